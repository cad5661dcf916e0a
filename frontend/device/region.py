"""Deferred regions: consecutive eager ops on device tensors recorded and run as one compiled program.

Input contract: `record` is offered every eager op whose single-op program compiled (`eager._Program`, with its
results' shapes and dtypes from its trace) together with the device memory the program's results go to (a
written tensor's own bytes, or a new block per fresh result), after the op's own checks have passed at the user's
line. Everything else that reads or writes device bytes calls `storage.observe()` first (host aliases, NumPy
views handed to compiled graphs and collectives, resizes, copies, events and stream switches), and so does the
eager path before an op it does not record.

Output guarantee: the device's memory, the current stream's simulated time and the time per op and line read, at
every observation, what running each recorded op alone in order would have left. A region runs as one program
compiled by `frontend.compile_graph` from the recorded ops' single-op graphs stitched in order (an FX graph of
core ATen ops), cached in memory by its ops, their operand links and which results it stores, and on disk by the
compile cache as any graph is. A result whose tensors all died before the region ran is no output of it and stays
on chip. A region the compiler refuses, or whose run fails, runs op by op with the single-op programs, so that a
failure names the line that issued the failing op.

What is recorded and what flushes: an op whose operands are device tensors (or 0-d CPU scalars, whose values are
taken when recorded) that are either outside the region's pending results or over one of them (the same bytes: a
reshaped or dimension-permuted view of it is a view or permute node of the graph; part of its bytes, a slice or a
row, or its elements repeated, an expand, an as_strided node), and whose written tensors and results all cover
pending bytes exactly or none (a written tensor dense in another order of its dimensions is a result stored
transposed, read back only at those strides; an out= tensor without elements is resized to its result first, when
the region writes nothing of its storage); and
a copy between device tensors of one shape and dtype into a contiguous one (`record_copy`: `clone`, `contiguous()`,
`copy_`), as a contiguous clone. Anything else (pending bytes read as another dtype, a write to part of a pending
result) runs the region first, then the op alone. The region also runs when a backward pass ends, when an optimizer
step ends and when it reaches `NEURON_MLIR_REGION_OPS` ops (default 256), so that a training loop's regions repeat
step after step and are found in the cache. `NEURON_MLIR_DEFER=0` turns recording off (every op its own program, as
before).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from neuron_mlir.frontend.device import sources, storage, streams


def enabled() -> bool:
    """Whether eager ops are recorded: not with `NEURON_MLIR_DEFER=0`, nor when every op runs on the host
    (`NEURON_MLIR_EAGER=host`, where a copy is the host's too)."""
    setting = storage.setting
    return setting("NEURON_MLIR_DEFER", "1") not in ("", "0") and setting("NEURON_MLIR_EAGER", "compile") != "host"


def _limit() -> int:
    return int(storage.setting("NEURON_MLIR_REGION_OPS", "256"))


# an operand's source: ("input", index into the region's inputs) or ("value", value id, view), where the view is
# None (the value itself), ("view", shape), ("permute", contiguous shape, dims) or ("strided", shape, strides,
# element offset) for part of the value's elements
Source = tuple[Any, ...]


@dataclass(eq=False, slots=True)
class _Op:
    program: Any  # eager._Program
    name: str
    line: str
    sources: list[Source]
    values: list[int]  # value ids of the program's graph outputs, in order
    targets: list[np.ndarray]  # per graph output, the device memory it is stored to


@dataclass(eq=False, slots=True)
class _Written:
    """The pending value of some bytes of a block: the latest value a recorded op gives them."""

    value: int
    start: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    # the strides it is stored at when not contiguous (a dense permutation of its dimensions), else None
    strides: tuple[int, ...] | None = None
    # an operand's source when it is this value itself (made once: most operands are)
    source: Source = ()


@dataclass(eq=False)
class _Region:
    ops: list[_Op] = field(default_factory=list)
    # region inputs: arrays over device bytes, or values taken when recorded, or gathers made at the run
    inputs: list[Callable[[], np.ndarray]] = field(default_factory=list)
    input_types: list[tuple[tuple[int, ...], torch.dtype]] = field(default_factory=list)
    input_keys: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # id(block) -> (a weak reference to the block, its pending values)
    pending: dict[int, tuple[weakref.ref[Any], list[_Written]]] = field(default_factory=dict)
    stream: Any = None
    backward_task: int = -1
    value_count: int = 0
    limit: int = 0  # ops after which the region runs (`NEURON_MLIR_REGION_OPS`, read when it starts)
    # id() of the blocks the region's inputs are read from, and per value id that of the block it is stored to
    input_blocks: set[int] = field(default_factory=set)
    target_blocks: dict[int, int] = field(default_factory=dict)
    # per value id: (the block it is stored to, as a weak reference, and the pending entry it is, if any)
    stored: dict[int, tuple[weakref.ref[Any], _Written]] = field(default_factory=dict)


_region = _Region()


@dataclass
class _Compiled:
    compiled: Any  # CompiledGraph
    outputs: list[int]  # value ids stored by the program, in the order of the graph's outputs
    # whether some output of the program is an input's buffer, which the simulator reads from the caller's array
    # as it hands the outputs over (`_run`)
    outputs_inputs: bool = True
    # per recorded op, its share of the region's time (`_account`): the ops' single-op programs are the same
    # programs on every run of the region, and a program's time is the same on every run
    shares: list[float] | None = None


# region key -> its program, or None when the compiler refused it (its ops then run one by one)
_programs: dict[tuple[Any, ...], _Compiled | None] = {}
_UNSEEN: Any = object()  # a region key not looked up before
last_program: Any = None  # the compiled program of the region that ran last (its profile: `last_profile`)
REGION_STATS = {"regions_run": 0, "region_ops": 0, "regions_compiled": 0, "regions_refused": 0, "flushes": 0}


def pending_ops() -> int:
    return len(_region.ops)


def _entries(block: Any) -> list[_Written] | None:
    found = _region.pending.get(id(block))
    if found is None or found[0]() is not block:
        return None
    return found[1]


def settled(tensor: torch.Tensor) -> bool:
    """Whether no pending value is stored in device tensor `tensor`'s block (its bytes are what they will be)."""
    block = storage._stored_block(tensor.untyped_storage())
    return block is None or not _entries(block)


def _source_of(tensor: torch.Tensor) -> Source | None:
    """Where an operand's value comes from in the region, or None when it overlaps pending bytes otherwise than
    exactly (the region must run first)."""
    region = _region
    if tensor.is_cpu:
        region.inputs.append(_held(_scalar_value(tensor)))  # a 0-d scalar: its value now
        region.input_types.append((tuple(tensor.shape), tensor.dtype))
        return ("input", len(region.inputs) - 1)
    block, stored, offset, contiguous, plain = storage._tensor_facts(
        tensor, _BLOCK_ATTRIBUTE
    ) or storage.python_tensor_facts(tensor, _BLOCK_ATTRIBUTE)
    if not plain:
        return None  # a conjugate or negative view: its bytes are not its values, the op runs alone
    if block is None:
        block = storage.block_of(tensor)
    dtype = tensor.dtype
    held = region.pending.get(id(block))
    if held is not None and held[0]() is block:
        itemsize = dtype.itemsize
        start = offset * itemsize
        if contiguous:
            nbytes = tensor.numel() * itemsize
        else:
            nbytes = _span_bytes(tensor.shape, tensor.stride(), itemsize)
        for entry in held[1]:
            if entry.start < start + nbytes and start < entry.start + entry.nbytes:
                if entry.dtype != dtype:
                    return None
                if entry.start == start and entry.nbytes == nbytes:
                    if contiguous and entry.strides is None and tensor.shape == entry.shape:
                        return entry.source  # the value itself, the common case
                    return _viewed(entry, tensor, contiguous)
                return _within(entry, tensor, start, nbytes)
    # an operand read from device memory: one input per place, the same tensor geometry read once
    shape = tensor.shape
    if contiguous:
        key: tuple[Any, ...] = (id(block), offset, shape, dtype)
    else:
        key = (id(block), offset, shape, dtype, tensor.stride())
    index = region.input_keys.get(key)
    if index is None:
        region.input_blocks.add(id(block))
        dense = None
        if contiguous:
            # the array `storage.dense_array` keeps on the storage, found without a second look at the tensor
            arrays = getattr(stored, _DENSE_ARRAYS_ATTRIBUTE, None)
            dense = arrays.get((offset, shape, dtype)) if arrays is not None else None
            if dense is None:
                dense = storage.dense_array(tensor)
        region.inputs.append(_gather(block, stored, tensor) if dense is None else _held(dense))
        region.input_types.append((tuple(shape), dtype))
        index = region.input_keys[key] = len(region.inputs) - 1
    return _INPUT_SOURCES[index] if index < len(_INPUT_SOURCES) else ("input", index)


# the sources of the first inputs, made once: a region reads hundreds of inputs step after step
_INPUT_SOURCES: list[Source] = [("input", index) for index in range(1024)]
# the sources of the first values as themselves, made once for the same reason (and a region's objects are fewer for
# the collector to scan while it is pending)
_VALUE_SOURCES: list[Source] = [("value", value, None) for value in range(4096)]
_BLOCK_ATTRIBUTE = storage._BLOCK_ATTRIBUTE
_DENSE_ARRAYS_ATTRIBUTE = storage._DENSE_ARRAYS_ATTRIBUTE
_GATHERS_ATTRIBUTE = storage._GATHERS_ATTRIBUTE
# what the native reader of operands' sources (`native.sources_of()`, `use_native`) answers for an operand whose
# source `_source_of` is to work out
_SLOW: Any = object()
_sources_of: Callable[..., list[Any] | None] | None = None
# the native hooks' registration of a recorded op's fresh results (`native.record_fresh()`, `use_native`)
_record_fresh: Callable[..., tuple[int, int]] | None = None


def _next_slow(found: list[Any], start: int) -> int | None:
    """The position of the first operand from `start` on that the native reader left to `_source_of`."""
    for position in range(start, len(found)):
        if found[position] is _SLOW:
            return position
    return None


def _may_be_native(operand: Any) -> bool:
    """Whether the native reader may answer for `operand` (a contiguous device tensor; it leaves the others)."""
    return isinstance(operand, torch.Tensor) and not operand.is_cpu and operand.is_contiguous()


def use_native(
    sources_of: Callable[..., list[Any] | None] | None, record_fresh: Callable[..., tuple[int, int]] | None = None
) -> None:
    """Find recorded ops' common operands' sources with the native hooks' `native.sources_of()`, or each with
    `_source_of` (None); register their fresh results with `native.record_fresh()`, or in Python (None)."""
    global _sources_of, _record_fresh
    _sources_of, _record_fresh = sources_of, record_fresh


def _held(array: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: array


def _viewed(entry: _Written, tensor: torch.Tensor, contiguous: bool) -> Source | None:
    # a pending value is contiguous: an operand over the same bytes is it, a reshape of it, or a permutation of
    # the dimensions of a reshape of it (a square matrix's transpose has the value's shape, not its strides)
    shape = tuple(tensor.shape)
    if entry.strides is not None:  # stored in another order: read back only in that order
        same = shape == entry.shape and tuple(tensor.stride()) == entry.strides
        return ("value", entry.value, None) if same else None
    if tensor.numel() != math.prod(entry.shape):
        # over the value's bytes with elements repeated (an `expand`): an as_strided of the value
        return _within(entry, tensor, entry.start, entry.nbytes)
    if contiguous:
        return ("value", entry.value, None if shape == entry.shape else ("view", shape))
    view = _permuted_view(shape, tuple(tensor.stride()))
    if view is None:
        return _within(entry, tensor, entry.start, entry.nbytes)
    return ("value", entry.value, view)


def _permuted_view(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[Any, ...] | None:
    """The view of a contiguous value whose dimensions, permuted, give a tensor of `shape` at `strides` (a
    "permute" source view), or None when no permutation does; remembered per layout, as a step reads the same few
    transposes again and again."""
    key = (shape, strides)
    view = _PERMUTED_VIEWS.get(key, _UNSEEN)
    if view is _UNSEEN:
        found = _permutation(shape, strides)
        if found is None:
            view = None
        else:
            dims, base = found
            view = ("permute", tuple(base), tuple(dims.index(d) for d in range(len(shape))))
        if len(_PERMUTED_VIEWS) >= _LAYOUTS_KEPT:
            _PERMUTED_VIEWS.clear()
        _PERMUTED_VIEWS[key] = view
    return view


def _span_bytes(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """`storage.storage_nbytes`, remembered per layout."""
    key = (shape, strides, itemsize)
    found = _SPANS.get(key)
    if found is None:
        found = storage.storage_nbytes(shape, strides, itemsize)
        if len(_SPANS) >= _LAYOUTS_KEPT:
            _SPANS.clear()
        _SPANS[key] = found
    return found


# layouts of strided operands seen, more than a model's steps read: past it, start afresh
_LAYOUTS_KEPT = 4096
# (shape, strides) -> the "permute" view giving that layout from a contiguous value, or None (`_permuted_view`)
_PERMUTED_VIEWS: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
# (shape, strides, itemsize) -> the bytes spanned (`_span_bytes`)
_SPANS: dict[tuple[Any, ...], int] = {}


def _within(entry: _Written, tensor: torch.Tensor, start: int, nbytes: int) -> Source | None:
    """A view of part of a pending value's bytes (a slice, a row), as an `as_strided` of the value; None when it
    reaches outside them or the value is stored in another order."""
    itemsize = tensor.dtype.itemsize
    offset = start - entry.start
    if entry.strides is not None or offset < 0 or offset + nbytes > entry.nbytes or offset % itemsize:
        return None
    return ("value", entry.value, ("strided", tuple(tensor.shape), tuple(tensor.stride()), offset // itemsize))


def _permutation(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[list[int], list[int]] | None:
    """The dimensions in memory order and the contiguous shape in that order, when a tensor of `shape` at
    `strides` is dense in some order of its dimensions; else None."""
    dims = sorted(range(len(shape)), key=lambda d: -strides[d])
    base = [shape[d] for d in dims]
    if storage.contiguous_strides(base) != [strides[d] for d in dims]:
        return None
    return dims, base


def permuted_array(tensor: torch.Tensor) -> np.ndarray | None:
    """A strided NumPy array over the bytes of device tensor `tensor` when it is dense in some order of its
    dimensions (an elementwise result of a transpose keeps that layout) and no conjugate or negative view, else
    None."""
    from neuron_mlir.frontend.tensors import numpy_dtype

    shape, strides = tuple(tensor.shape), tuple(tensor.stride())
    if tensor.numel() == 0 or tensor.is_conj() or tensor.is_neg() or _permutation(shape, strides) is None:
        return None
    element = np.dtype(numpy_dtype(tensor.dtype))
    start = int(tensor.storage_offset()) * element.itemsize
    data = storage.block_of(tensor).data[start : start + tensor.numel() * element.itemsize].view(element)
    return np.lib.stride_tricks.as_strided(data, shape=shape, strides=[s * element.itemsize for s in strides])


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    from neuron_mlir.frontend.tensors import to_numpy

    return to_numpy(tensor)


def _scalar_value(tensor: torch.Tensor) -> np.ndarray:
    """A copy of CPU tensor `tensor`'s values (a 0-d scalar operand's, taken when its op is recorded)."""
    if tensor.dim() == 0:
        element = _SCALAR_ELEMENTS.get(tensor.dtype)
        if element is None:
            from neuron_mlir.frontend.tensors import numpy_dtype

            element = _SCALAR_ELEMENTS[tensor.dtype] = np.dtype(numpy_dtype(tensor.dtype))
        # its value as a Python number holds every value of its dtype exactly (bf16 and fp8 among them), and reads
        # through a conjugate or negative bit: a fraction of to_numpy's cost (and its import), for a GELU's
        # constants on every call
        return np.array(tensor.item(), element)
    return _numpy(tensor).copy()


# torch dtype -> the NumPy dtype of its scalars' values (`_scalar_value`)
_SCALAR_ELEMENTS: dict[torch.dtype, np.dtype] = {}


def _gather(block: Any, stored: Any, tensor: torch.Tensor) -> Callable[[], np.ndarray]:
    """A strided operand's elements, gathered dense when the region runs (its bytes are the same then: every
    write to device memory outside the region runs the region first, and the region writes its results last).

    The gather is kept on the storage `stored` by the operand's offset, shape, strides and dtype, with the block it
    reads: a training step reads the same transposed weights step after step, and making the gather (the dtype's
    lookup, the geometry, the block's bytes) costs several times what finding it does."""
    offset, shape, dtype = tensor.storage_offset(), tuple(tensor.shape), tensor.dtype
    key = (offset, shape, tensor.stride(), dtype)
    kept: dict[tuple[Any, ...], tuple[Any, Callable[[], np.ndarray]]] | None = getattr(stored, _GATHERS_ATTRIBUTE, None)
    if kept is not None:
        found = kept.get(key)
        if found is not None and found[0] is block:
            return found[1]
    element = storage.numpy_element(dtype)
    itemsize = element.itemsize
    start = offset * itemsize
    strides = tuple(s * itemsize for s in key[2])
    if not _span(shape, strides, itemsize):
        return lambda: np.empty(shape, element)
    data = block.data

    def gather_typed() -> np.ndarray:
        # the elements' view over the block's bytes (the constructor checks that it lies within them; a fifth of
        # what np.lib.stride_tricks.as_strided costs), made dense
        return np.ascontiguousarray(np.ndarray(shape, element, data, start, strides))

    if stored is not None:
        if kept is None or len(kept) >= storage._DENSE_ARRAYS_PER_STORAGE:
            kept = {}
            setattr(stored, _GATHERS_ATTRIBUTE, kept)
        kept[key] = (block, gather_typed)
    return gather_typed


def _span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    if any(extent == 0 for extent in shape):
        return 0
    return itemsize + sum((extent - 1) * stride for extent, stride in zip(shape, strides, strict=True))


def _writes_cleanly(entries: list[_Written], start: int, nbytes: int) -> bool:
    """Whether a write of `nbytes` from `start` covers each pending value of its block exactly or not at all."""
    end = start + nbytes
    for e in entries:  # a loop, not all() of a generator: most blocks hold one value
        if not ((e.start == start and e.nbytes == nbytes) or e.start >= end or start >= e.start + e.nbytes):
            return False
    return True


def record(
    program: Any,
    name: str,
    operands: list[Any],
    outputs: list[tuple[torch.Tensor, np.ndarray]],
    written: int | None = None,
) -> bool:
    """Record an op instead of running it: `operands` are the program's tensor operands in order, `outputs` per
    graph output the device tensor it is stored to and the array over its bytes; with `written`, the outputs
    after the first `written` are fresh results (contiguous tensors over new blocks, which hold no pending value).
    False (nothing recorded) when the op cannot join the region; the region has then run, and the caller runs the
    op alone."""
    stream = streams._current or streams.current_stream()
    task = _graph_task_id()
    region = _region
    if region.ops and (region.stream is not stream or (task != region.backward_task and region.backward_task != -1)):
        flush()  # another stream, or past a backward pass: a region of its own
        region = _region
    pending = region.pending
    count = len(outputs)
    fresh_from = count if written is None else written
    # per written output: its tensor, block, dtype, the bytes it covers there and the block's pending values (None:
    # none yet)
    spans = []
    facts_of = storage._tensor_facts
    for index in range(fresh_from):
        tensor = outputs[index][0]
        block, _, offset, contiguous, _ = facts_of(tensor, _BLOCK_ATTRIBUTE) or storage.python_tensor_facts(
            tensor, _BLOCK_ATTRIBUTE
        )
        if block is None:
            block = storage.block_of(tensor)
        dtype = tensor.dtype
        itemsize = dtype.itemsize
        start = offset * itemsize
        nbytes = tensor.numel() * itemsize
        held = pending.get(id(block))
        if held is not None:
            if held[0]() is not block:
                held = None  # a dead block's entries under a reused id
            elif not _writes_cleanly(held[1], start, nbytes):
                flush()
                return False
        spans.append((tensor, block, dtype, start, nbytes, held, contiguous))
    mark = len(region.inputs)
    # the common operands' sources in one native call, the others (`_SLOW`) here, in order
    found = (
        [_SLOW] * len(operands)
        if _sources_of is None
        else _sources_of(operands, region, _INPUT_SOURCES, _BLOCK_ATTRIBUTE, _DENSE_ARRAYS_ATTRIBUTE, _held, _SLOW)
    )
    listed: list[Any] = found or []
    for index, source in enumerate(listed):
        if source is _SLOW:
            source = listed[index] = _source_of(operands[index])
            if source is None:
                found = None
                break
            if _sources_of is not None:
                # the native reader adds no input after an operand it leaves here (the inputs come in the operands'
                # order): with this one's input added, it answers the next operand it left for lack of that
                # order, and those after it (a foreach op's dozens of operands)
                later = _next_slow(listed, index + 1)
                if later is not None and _may_be_native(operands[later]):
                    rest = _sources_of(
                        operands[later:],
                        region,
                        _INPUT_SOURCES,
                        _BLOCK_ATTRIBUTE,
                        _DENSE_ARRAYS_ATTRIBUTE,
                        _held,
                        _SLOW,
                    )
                    if rest is None:
                        found = None
                        break
                    listed[later:] = rest
    if found is None:
        # the region runs without the inputs this op added
        del region.inputs[mark:], region.input_types[mark:]
        region.input_keys = {k: v for k, v in region.input_keys.items() if v < mark}
        flush()
        return False
    if not region.ops:
        region.stream = stream
        region.limit = _limit()
        storage.set_observer(flush)
        _install_hooks()
    if task != -1 and region.backward_task != task:
        torch.autograd.Variable._execution_engine.queue_callback(flush)
    region.backward_task = task
    values = []
    targets: list[np.ndarray] = []
    stored, target_blocks = region.stored, region.target_blocks
    value = region.value_count
    for tensor, block, dtype, start, nbytes, held, contiguous in spans:
        values.append(value)
        strides = None if contiguous else tuple(tensor.stride())
        entry = _Written(value, start, nbytes, dtype, tuple(tensor.shape), strides, _value_source(value))
        if held is None:
            # `held` of an earlier output of this op may be this block's too (two outputs into one block)
            held = pending.get(id(block))
            if held is None or held[0]() is not block:
                held = pending[id(block)] = (weakref.ref(block), [])
        entries = held[1]
        if len(entries) == 1:  # most blocks hold one value: the one this write replaces, or another
            if entries[0].start == start and entries[0].nbytes == nbytes:
                entries.clear()
        elif entries:
            entries[:] = [e for e in entries if e.start != start or e.nbytes != nbytes]
        entries.append(entry)
        stored[value] = (held[0], entry)
        target_blocks[value] = id(block)
        targets.append(outputs[len(targets)][1])
        value += 1
    first = fresh_from
    if _record_fresh is not None:
        # the fresh results' entries in one native call, up to one it leaves here
        value, first = _record_fresh(
            outputs,
            fresh_from,
            pending,
            stored,
            target_blocks,
            values,
            targets,
            value,
            _Written,
            _VALUE_SOURCES,
            _BLOCK_ATTRIBUTE,
        )
    for index in range(first, count):
        # a fresh result: its block is new, so an entry under its id is a dead block's
        tensor, target = outputs[index]
        block = getattr(tensor.untyped_storage(), _BLOCK_ATTRIBUTE, None) or storage.block_of(tensor)
        dtype = tensor.dtype
        shape = target.shape  # the array over the tensor's bytes, of its shape
        entry = _Written(value, 0, target.nbytes, dtype, shape, None, _value_source(value))
        reference = weakref.ref(block)
        pending[id(block)] = (reference, [entry])
        stored[value] = (reference, entry)
        target_blocks[value] = id(block)
        values.append(value)
        targets.append(target)
        value += 1
    region.value_count = value
    region.ops.append(_Op(program, name, sources.user_line(), found, values, targets))
    if len(region.ops) >= region.limit:
        flush()
    return True


def _value_source(value: int) -> Source:
    return _VALUE_SOURCES[value] if value < len(_VALUE_SOURCES) else ("value", value, None)


_graph_task_id = torch._C._current_graph_task_id


@dataclass(eq=False)
class _CopyProgram:
    """A copy between device tensors of one shape and dtype, recorded like an op: its graph is a contiguous clone
    of the source (the region's program fuses it like any op); run alone, it is a copy of the bytes."""

    graph_module: Callable[[torch.Tensor], tuple[torch.Tensor]]
    compiled: Any = None


_copy_programs: dict[tuple[Any, ...], _CopyProgram] = {}


def _clone(source: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.ops.aten.clone.default(source, memory_format=torch.contiguous_format),)


def record_copy(source: torch.Tensor, destination: torch.Tensor) -> bool:
    """Record `destination.copy_(source)` between device tensors of one shape and dtype into a contiguous
    destination; False (nothing recorded) otherwise, the region having run if it had to."""
    if source.dtype != destination.dtype or source.shape != destination.shape or destination.numel() == 0:
        return False
    target = storage.dense_array(destination)
    if target is None:
        return False
    key = (tuple(destination.shape), destination.dtype)
    program = _copy_programs.get(key)
    if program is None:
        program = _copy_programs[key] = _CopyProgram(_clone)
    return record(program, streams.DEVICE_COPY, [source], [(destination, target)])


_hooks_installed = False


def _install_hooks() -> None:
    """An optimizer step's end runs the region: a training loop's regions then repeat step after step."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from neuron_mlir.frontend.device.registration import hide_from_dynamo

    register_optimizer_step_post_hook(_after_optimizer_step)
    # torch calls them from C++ (the autograd engine's callback) and from optimizer code that a compiled function
    # may run: the region's internals are not the user's code to trace
    hide_from_dynamo(flush, _after_optimizer_step)


def _after_optimizer_step(*_: Any) -> None:
    flush()


def flush() -> None:
    """Run the pending region (nothing when none is pending)."""
    global _region
    region = _region
    if not region.ops:
        return
    _region = _Region()
    storage.set_observer(None)
    REGION_STATS["flushes"] += 1
    # the values some live tensor still holds: a result overwritten later, or whose tensors all died, is not stored
    pending = region.pending
    outputs = []
    for value, (block_ref, entry) in region.stored.items():
        block = block_ref()
        if block is not None:
            held = pending.get(id(block))
            if held is not None and held[0] is block_ref and entry in held[1]:
                outputs.append(value)
    if not outputs:  # every result died unread: nothing to compute
        for op in region.ops:
            sources.record(op.name, 0.0, line=op.line)
        return
    key = _key(region, outputs)
    compiled = _programs.get(key, _UNSEEN)  # one lookup: the key is as long as the region
    if compiled is _UNSEEN:
        compiled = _programs[key] = _compile(region, outputs)
    if compiled is None:
        _run_one_by_one(region)
        return
    try:
        _run(region, compiled)
    except Exception:
        _programs[key] = None
        _run_one_by_one(region)


def _key(region: _Region, outputs: list[int]) -> tuple[Any, ...]:
    parts: list[Any] = [tuple(region.input_types), tuple(outputs)]
    for op in region.ops:
        parts.append((id(op.program), tuple(op.sources)))
    return tuple(parts)


def _compile(region: _Region, outputs: list[int]) -> _Compiled | None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from neuron_mlir.frontend.backend import CompileOptions
    from neuron_mlir.frontend.compile_graph import CompiledGraph, compile_graph

    examples = [torch.empty(shape, dtype=dtype) for shape, dtype in region.input_types]
    ops = region.ops

    def stitched(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values: dict[int, torch.Tensor] = {}
        for op in ops:
            operands = [_resolve(source, inputs, values) for source in op.sources]
            results = op.program.graph_module(*operands)
            for value, result in zip(op.values, results, strict=True):
                values[value] = result
        return tuple(values[v] for v in outputs)

    from neuron_mlir.frontend.device.eager import _clean_dispatch_state

    try:
        # the dispatcher's state as a single op's trace has it: a flush may come from inside a tensor subclass's
        # dispatch or an autocast region
        with _clean_dispatch_state(), FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fakes = [mode.from_tensor(e) for e in examples]
            graph_module = make_fx(stitched)(*fakes)
        options = CompileOptions.from_user({"strict": True, "progress": False})
        compiled = compile_graph(graph_module, examples, options, "eager_region")
    except Exception:  # a region that does not trace or compile (NeuronCompileError and others) runs op by op
        REGION_STATS["regions_refused"] += 1
        return None
    if not isinstance(compiled, CompiledGraph) or compiled._seeded or compiled.signature.guards:
        REGION_STATS["regions_refused"] += 1
        return None
    REGION_STATS["regions_compiled"] += 1
    inputs = {binding.buffer for binding in compiled.program.inputs}
    return _Compiled(compiled, outputs, any(binding.buffer in inputs for binding in compiled.program.outputs))


def _resolve(source: Source, inputs: Any, values: dict[int, Any]) -> Any:
    if source[0] == "input":
        return inputs[source[1]]
    value = values[source[1]]
    view = source[2]
    if view is None:
        return value
    if view[0] == "view":
        return value.reshape(view[1])
    if view[0] == "strided":  # the value is contiguous: its elements in order from its storage offset
        return torch.ops.aten.as_strided.default(value, view[1], view[2], value.storage_offset() + view[3])
    return value.reshape(view[1]).permute(view[2])


def _run(region: _Region, compiled: _Compiled) -> None:
    global last_program
    program = compiled.compiled
    signature = program.signature
    arrays = [make() for make in region.inputs]
    targets = {value: target for op in region.ops for value, target in zip(op.values, op.targets, strict=True)}
    into: list[np.ndarray | None] = [None] * len(program.program.outputs)
    uses: dict[int, int] = {}
    for index in signature.outputs:
        if index is not None:
            uses[index] = uses.get(index, 0) + 1
    # the simulator writes an output given a place straight there after the run, in output order, and an output
    # that is an input's buffer is read from the caller's array then: when the program has such an output, memory
    # that an input of the region is read from receives its new value only after the run (an optimizer step's
    # parameters and buffers, read and written, go straight there otherwise)
    read = region.input_blocks if compiled.outputs_inputs else ()
    for value, index in zip(compiled.outputs, signature.outputs, strict=True):
        target = targets[value]
        if (
            index is not None
            and uses[index] == 1
            and region.target_blocks[value] not in read
            and target.flags.c_contiguous  # a result stored in another order is copied there after the run
        ):
            into[index] = target
    results = signature.results(program.run_arrays(signature.arguments(arrays), None, into))
    for value, index, result in zip(compiled.outputs, signature.outputs, results, strict=True):
        target = targets[value]
        if index is None or uses[index] != 1 or result is not target:
            np.copyto(target, np.asarray(result).reshape(target.shape))
    total = float(program.last_profile.total_ns)
    last_program = program
    if compiled.shares is None:
        compiled.shares = _shares(region)
    _account(region, total, compiled.shares)
    REGION_STATS["regions_run"] += 1
    REGION_STATS["region_ops"] += len(region.ops)


def _account(region: _Region, total: float, shares: list[float]) -> None:
    """The region's time on its stream, split among its ops' lines by their shares (`_shares`)."""
    region.stream.add_run(total)
    record = sources.record
    for op, share in zip(region.ops, shares, strict=True):
        record(op.name, total * share, line=op.line)


def _shares(region: _Region) -> list[float]:
    """Each recorded op's share of the region's time: its single-op program's time over theirs all (equal shares
    when they took none)."""
    alone = [_single_ns(op.program) for op in region.ops]
    whole = sum(alone)
    return [ns / whole if whole else 1 / len(alone) for ns in alone]


def _single_ns(program: Any) -> float:
    profile = getattr(program.compiled, "last_profile", None)
    return float(profile.total_ns) if profile is not None else 0.0


def _run_one_by_one(region: _Region) -> None:
    """Each recorded op's own program, in order, reading earlier results from the memory they were stored to."""
    arrays = [make() for make in region.inputs]
    stored: dict[int, np.ndarray] = {}
    for op in region.ops:
        operands = [_operand(source, arrays, stored) for source in op.sources]
        if isinstance(op.program, _CopyProgram):
            np.copyto(op.targets[0], operands[0].reshape(op.targets[0].shape))
            stored[op.values[0]] = op.targets[0]
            sources.record(op.name, 0.0, line=op.line)
            continue
        compiled = op.program.compiled
        signature = compiled.signature
        try:
            outputs = signature.results(compiled.run_arrays(signature.arguments(operands), None, []))
        except Exception as error:
            error.add_note(f"neuron-mlir: raised by {op.name} issued at {op.line}")
            raise
        for value, target, result in zip(op.values, op.targets, outputs, strict=True):
            np.copyto(target, np.asarray(result).reshape(target.shape))
            stored[value] = target
        ns = _single_ns(op.program)
        region.stream.add_run(ns)
        sources.record(op.name, ns, line=op.line)


def _operand(source: Source, arrays: list[np.ndarray], stored: dict[int, np.ndarray]) -> np.ndarray:
    if source[0] == "input":
        return arrays[source[1]]
    value = stored[source[1]]
    view = source[2]
    if view is None:
        return np.ascontiguousarray(value)  # a result stored in another order is read back dense
    if view[0] == "view":
        return value.reshape(view[1])
    if view[0] == "strided":
        itemsize = value.itemsize
        flat = value.reshape(-1)[view[3] :]
        strided = np.lib.stride_tricks.as_strided(flat, shape=view[1], strides=[s * itemsize for s in view[2]])
        return np.ascontiguousarray(strided)
    return np.ascontiguousarray(value.reshape(view[1]).transpose(view[2]))


def reset() -> None:
    """Forget the region programs (the pending region runs first)."""
    flush()
    _programs.clear()
    for counter in REGION_STATS:
        REGION_STATS[counter] = 0
