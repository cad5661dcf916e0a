"""Tracing an NKI kernel into the neuron dialect: tensors, buffers, source lines and instruction emission.

A kernel runs once per argument signature as ordinary Python. Its tensors are `NkiTensor`s: views (partition
range, element offset, strides) of buffers that are `neuron.alloc`s in SBUF, PSUM or HBM, or the function's HBM
arguments. Every `nki.isa` call appends one neuron instruction (an `nki.language` call one or a few) to the
function being built, located at the kernel's own source line, and verifies it at once: the neuron dialect's
verifiers are the hardware's rules (`runtime.isa.check_instruction`), so a kernel that breaks one fails at the
line that broke it, with the rule.

Loops (`nl.affine_range`, `nl.sequential_range`, `nl.static_range`, `range`) are Python loops and are unrolled
while tracing: every trip's instructions are emitted with static offsets. (The dialect has `scf.for` loops with
register offsets, but a kernel's Python sees its loop index as an int: it slices with it, branches on it and
computes sizes from it, which a symbolic index cannot honour in general.)

Fresh SBUF, PSUM and HBM buffers hold NaN on the simulated core, but the memory allocator reuses on-chip bytes
between buffers whose lives do not overlap, so a fresh buffer could read another's old values there. The trace
therefore tracks which elements of each buffer have been written, and a read of an element never written is an
error at the line that reads it. The same record gives `nc_matmul`'s `accumulate=None` its meaning: the first
write to a PSUM tile overwrites, later ones add.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import buffer_type
from neuron_mlir.ir.locations import describe_location, source_location
from neuron_mlir.ir.types import element_type_for
from neuron_mlir.runtime import dtypes, isa
from neuron_mlir.runtime.hardware import Engine, Memory, Target

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# NKI's rule for PSUM tiles: one tile lives in one 2 KiB bank of each partition (512 fp32) [nki tile_size].
PSUM_TILE_BYTES = 2048


class NkiError(ValueError):
    """A kernel breaks a rule of NKI or of the hardware; the message names the call, the rule and the line."""


def _kernel_frame() -> tuple[str, int] | None:
    """(file, line) of the innermost caller outside this package: the kernel's own source line."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR + os.sep):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


def error(message: str) -> NkiError:
    """An `NkiError` ending with the kernel's source line, when a kernel is being traced."""
    trace = current_trace(required=False)
    where = trace.where() if trace is not None else ""
    return NkiError(f"{message}{where}")


def dtype_of(value: Any) -> np.dtype:
    """A NumPy dtype with a NeuronCore storage type, from what a kernel passes as a dtype."""
    try:
        dtype = np.dtype(value)
        dtypes.dtype_name(dtype)
    except (TypeError, ValueError):
        raise error(f"dtype {value!r} has no NeuronCore storage type") from None
    return dtype


def dtype_name(dtype: np.dtype) -> str:
    return dtypes.dtype_name(dtype)


# ----------------------------------------------------------------------------------------------------------------
# Buffers and tensors
# ----------------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Buffer:
    """A buffer of the traced function: a `neuron.alloc` or an HBM argument, and which elements hold data."""

    value: SSAValue
    memory: Memory
    dtype: np.dtype
    shape: tuple[int, ...]
    name: str
    # which elements were written: [partitions, row] on chip, flat in HBM
    written: np.ndarray = field(repr=False)

    @property
    def on_chip(self) -> bool:
        return self.memory is not Memory.HBM


class DynSlice:
    """`nl.ds(start, size)`: `size` elements from `start` along one dimension."""

    def __init__(self, start: int, size: int) -> None:
        self.start = int(start)
        self.size = int(size)

    def __repr__(self) -> str:
        return f"ds({self.start}, {self.size})"


class NkiTensor:
    """A view of a buffer: `shape`, element `strides` and `offset`; on chip dimension 0 is the partition range
    starting at `partition_start` (its stride is unused: views never step across partitions)."""

    def __init__(
        self,
        buffer: Buffer,
        shape: Sequence[int],
        strides: Sequence[int],
        offset: int = 0,
        partition_start: int = 0,
    ) -> None:
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.partition_start = int(partition_start)

    # ---- what a kernel reads ---------------------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        return self.buffer.dtype

    @property
    def buffer_kind(self) -> Memory:
        return self.buffer.memory

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def name(self) -> str:
        return self.buffer.name

    def __repr__(self) -> str:
        where = self.buffer.memory.value
        return f"NkiTensor({self.buffer.name}, {list(self.shape)}, {dtype_name(self.dtype)}, {where})"

    # ---- views -----------------------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> NkiTensor:
        items = list(key) if isinstance(key, tuple) else [key]
        if any(item is Ellipsis for item in items):
            at = items.index(Ellipsis)
            fill = self.ndim - (len(items) - 1)
            items[at : at + 1] = [slice(None)] * fill
        if len(items) > self.ndim:
            raise error(f"index {key!r} has {len(items)} entries for a {self.ndim}-d tensor {list(self.shape)}")
        items += [slice(None)] * (self.ndim - len(items))
        shape: list[int] = []
        strides: list[int] = []
        offset, partition_start = self.offset, self.partition_start
        for dim, item in enumerate(items):
            size, stride = self.shape[dim], self.strides[dim]
            start, count, step, drop = _index(item, size, dim, self.shape, self.buffer.name)
            if self.buffer.on_chip and dim == 0:
                if step != 1:
                    raise error(f"the partition dimension cannot be sliced with step {step}")
                partition_start += start
                shape.append(count)
                strides.append(stride)
                continue
            offset += start * stride
            if drop:
                continue
            shape.append(count)
            strides.append(stride * step)
        return NkiTensor(self.buffer, shape, strides, offset, partition_start)

    def reshape(self, *shape: Any) -> NkiTensor:
        """A row-major reshape of a contiguous HBM tensor (on-chip tiles cannot move data across partitions)."""
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        new_shape = tuple(int(d) for d in dims)
        if self.buffer.on_chip:
            raise error("reshape applies to HBM tensors: an on-chip view never moves data across partitions")
        if math.prod(new_shape) != self.size:
            raise error(f"cannot reshape {list(self.shape)} ({self.size} elements) to {list(new_shape)}")
        if self.strides != row_major(self.shape):
            raise error(f"reshape needs a contiguous view; {list(self.shape)} has strides {list(self.strides)}")
        return NkiTensor(self.buffer, new_shape, row_major(new_shape), self.offset)

    def broadcast_free(self, shape: Sequence[int]) -> NkiTensor:
        """This on-chip tile read with its size-1 free dimensions repeated to `shape` (step 0: no copy)."""
        target = tuple(int(s) for s in shape)
        own = self.shape if len(self.shape) == len(target) else (self.shape[0], *[1] * (len(target) - 1))
        if len(self.shape) != len(target) and self.size != self.shape[0]:
            raise error(f"cannot broadcast {list(self.shape)} to {list(target)}")
        strides = [self.strides[0]]
        own_strides = self.strides if len(self.shape) == len(target) else (self.strides[0], *[0] * (len(target) - 1))
        for dim in range(1, len(target)):
            if own[dim] == target[dim]:
                strides.append(own_strides[dim])
            elif own[dim] == 1:
                strides.append(0)
            else:
                raise error(f"cannot broadcast {list(self.shape)} to {list(target)}")
        return NkiTensor(self.buffer, (own[0], *target[1:]), strides, self.offset, self.partition_start)

    # ---- the neuron dialect's terms --------------------------------------------------------------------------

    @property
    def partitions(self) -> int:
        return self.shape[0] if self.buffer.on_chip else 0

    @property
    def free_shape(self) -> tuple[int, ...]:
        return self.shape[1:] if self.buffer.on_chip else self.shape

    @property
    def free_strides(self) -> tuple[int, ...]:
        return self.strides[1:] if self.buffer.on_chip else self.strides

    def access_pattern(self, dims: Sequence[tuple[int, int]] | None = None) -> neuron.AccessPatternAttr:
        """The access of this view; `dims` replaces its (merged) free pattern when given."""
        pattern = list(dims) if dims is not None else merge_dims(zip(self.free_strides, self.free_shape, strict=True))
        if self.buffer.on_chip:
            return neuron.AccessPatternAttr(pattern, self.offset, self.partition_start, self.shape[0])
        return neuron.AccessPatternAttr(pattern, self.offset)

    def mask(self) -> np.ndarray:
        """The view of the buffer's written-element record this tensor covers, shaped as the tensor."""
        written = self.buffer.written
        item = written.itemsize
        if self.buffer.on_chip:
            rows = written[self.partition_start : self.partition_start + self.shape[0]]
            base = rows[:, self.offset :]
            return np.lib.stride_tricks.as_strided(
                base, shape=self.shape, strides=(rows.strides[0], *[s * item for s in self.strides[1:]])
            )
        return np.lib.stride_tricks.as_strided(
            written[self.offset :], shape=self.shape, strides=[s * item for s in self.strides]
        )

    def is_whole_buffer(self) -> bool:
        return (
            self.shape == self.buffer.shape
            and self.offset == 0
            and self.partition_start == 0
            and (self.buffer.on_chip or self.strides == row_major(self.shape))
        )

    # ---- arithmetic on tiles, as nki.language spells it ------------------------------------------------------

    def _binary(self, name: str, other: Any, reverse: bool = False) -> NkiTensor:
        from neuron_mlir.nki import language

        function = getattr(language, name)
        return function(other, self) if reverse else function(self, other)

    def __add__(self, other: Any) -> NkiTensor:
        return self._binary("add", other)

    def __radd__(self, other: Any) -> NkiTensor:
        return self._binary("add", other, reverse=True)

    def __sub__(self, other: Any) -> NkiTensor:
        return self._binary("subtract", other)

    def __rsub__(self, other: Any) -> NkiTensor:
        return self._binary("subtract", other, reverse=True)

    def __mul__(self, other: Any) -> NkiTensor:
        return self._binary("multiply", other)

    def __rmul__(self, other: Any) -> NkiTensor:
        return self._binary("multiply", other, reverse=True)

    def __truediv__(self, other: Any) -> NkiTensor:
        return self._binary("divide", other)

    def __neg__(self) -> NkiTensor:
        return self._binary("multiply", -1.0)


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides = []
    running = 1
    for extent in reversed(shape):
        strides.append(running)
        running *= extent
    return tuple(reversed(strides))


def merge_dims(dims: Any) -> list[tuple[int, int]]:
    """(step, num) pairs with size-1 dimensions dropped and contiguous neighbours merged ([(1, 1)] when none)."""
    merged: list[tuple[int, int]] = []
    for stride, size in dims:
        if size == 1:
            continue
        if merged and merged[-1][0] == stride * size:
            merged[-1] = (stride, merged[-1][1] * size)
        else:
            merged.append((stride, size))
    return merged or [(1, 1)]


def _index(item: Any, size: int, dim: int, shape: tuple[int, ...], name: str) -> tuple[int, int, int, bool]:
    """(start, count, step, drops the dimension) of one index entry, refusing anything outside the dimension."""

    def outside(what: str) -> NkiError:
        return error(f"indexing '{name}': index {what} of dimension {dim} is out of bounds for shape {list(shape)}")

    if isinstance(item, DynSlice):
        if item.size <= 0 or item.start < 0 or item.start + item.size > size:
            raise outside(repr(item))
        return item.start, item.size, 1, False
    if isinstance(item, slice):
        step = 1 if item.step is None else int(item.step)
        if step <= 0:
            raise error(f"indexing '{name}': slice step {step} of dimension {dim}: steps are positive")
        start = 0 if item.start is None else int(item.start)
        stop = size if item.stop is None else int(item.stop)
        start = start + size if start < 0 else start
        stop = stop + size if stop < 0 else stop
        if not 0 <= start < stop <= size:
            raise outside(f"{item.start}:{item.stop}")
        return start, -(-(stop - start) // step), step, False
    if isinstance(item, int | np.integer):
        index = int(item) + size if int(item) < 0 else int(item)
        if not 0 <= index < size:
            raise outside(str(int(item)))
        return index, 1, 1, True
    raise error(f"indexing '{name}': cannot index dimension {dim} with {item!r} (ints, slices and nl.ds are supported)")


# ----------------------------------------------------------------------------------------------------------------
# The trace
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Trace:
    """The function being built for one kernel launch, and where the kernel is."""

    kernel_name: str
    target: Target
    grid: tuple[int, ...]
    module: ModuleOp = field(init=False)
    function: func.FuncOp = field(init=False)
    block: Block = field(init=False)
    program_ids: tuple[int, ...] = ()
    # buffers made by nl.ndarray(buffer=nl.shared_hbm) in allocation order: every program of a grid shares them
    shared: list[Buffer] = field(default_factory=list)
    shared_cursor: int = 0
    _names: dict[str, int] = field(default_factory=dict)
    _constants: dict[Any, NkiTensor] = field(default_factory=dict)
    _end: func.ReturnOp = field(init=False)

    def start(self, inputs: Sequence[tuple[str, tuple[int, ...], np.dtype]]) -> list[NkiTensor]:
        """Begin the function with one HBM argument per input; their tensors."""
        types = [self.hbm_type(shape, dtype) for _, shape, dtype in inputs]
        self.block = Block(arg_types=types)
        self.function = func.FuncOp("main", FunctionType.from_lists(types, []), Region(self.block))
        self.module = ModuleOp([self.function])
        self.module.attributes[neuron.TARGET_ATTR_NAME] = neuron.TargetAttr(self.target.name)
        # a return ends the block while it grows, so each op verifies as it is added; finish() replaces it
        self._end = func.ReturnOp()
        self.block.add_op(self._end)
        tensors = []
        for (name, shape, dtype), arg in zip(inputs, self.block.args, strict=True):
            arg.name_hint = self.fresh_name(name)
            written = np.ones(max(math.prod(shape), 1), dtype=bool)
            buffer = Buffer(arg, Memory.HBM, dtype, shape, arg.name_hint, written)
            tensors.append(NkiTensor(buffer, shape, row_major(shape)))
        return tensors

    def finish(self, results: Sequence[NkiTensor]) -> ModuleOp:
        values = []
        for result in results:
            if result.buffer.memory is not Memory.HBM or not result.is_whole_buffer():
                raise NkiError(
                    f"kernel {self.kernel_name} returns {result!r}: a kernel returns whole HBM tensors "
                    "(nl.ndarray(..., buffer=nl.shared_hbm))"
                )
            values.append(result.buffer.value)
        self.block.insert_op_before(func.ReturnOp(*values), self._end)
        self._end.detach()
        self._end.erase()
        self.function.function_type = FunctionType.from_lists(
            [arg.type for arg in self.block.args], [value.type for value in values]
        )
        return self.module

    # ---- naming and locations --------------------------------------------------------------------------------

    def fresh_name(self, name: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "t"
        if base[0].isdigit():
            base = f"t{base}"
        count = self._names.get(base, 0)
        self._names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def location(self) -> Attribute:
        frame = _kernel_frame()
        if frame is None:
            return source_location("<unknown>", 0, module_path=self.kernel_name)
        return source_location(frame[0], frame[1], module_path=self.kernel_name)

    def where(self) -> str:
        text = describe_location(self.location())
        return f" (at {text})" if text else ""

    # ---- buffers ---------------------------------------------------------------------------------------------

    @staticmethod
    def hbm_type(shape: Sequence[int], dtype: np.dtype) -> MemRefType:
        return buffer_type(tuple(shape), element_type_for(dtype_name(dtype)), Memory.HBM)

    def allocate(self, shape: Sequence[int], dtype: np.dtype, memory: Memory, name: str = "") -> NkiTensor:
        """A fresh buffer holding a tensor of `shape`; on chip, dimension 0 is its partitions."""
        shape = tuple(int(s) for s in shape)
        if not shape or any(s <= 0 for s in shape):
            raise error(f"nl.ndarray: cannot allocate a tensor of shape {list(shape)}: dimensions are positive")
        storage = shape if memory is Memory.HBM or len(shape) >= 2 else (*shape, 1)
        if memory is not Memory.HBM:
            if shape[0] > self.target.partitions:
                raise error(
                    f"nl.ndarray: tile of shape {list(shape)} has {shape[0]} partitions; the partition dimension "
                    f"(first) holds at most nl.tile_size.pmax = {self.target.partitions}"
                )
            row_bytes = math.prod(storage[1:]) * dtype.itemsize
            if memory is Memory.PSUM and row_bytes > PSUM_TILE_BYTES:
                raise error(
                    f"nl.ndarray: PSUM tile of shape {list(shape)} and dtype {dtype_name(dtype)} needs {row_bytes} "
                    f"bytes per partition; a PSUM tile fits one {PSUM_TILE_BYTES}-byte bank (nl.tile_size.psum_fmax "
                    "= 512 fp32)"
                )
        op = neuron.AllocOp(
            buffer_type(storage, element_type_for(dtype_name(dtype)), memory),
            name_hint=self.fresh_name(name or {"sbuf": "sb", "psum": "ps", "hbm": "hbm"}[memory.value]),
        )
        op.location = self.location()
        self.block.insert_op_before(op, self._end)
        self._verify(op, "nl.ndarray")
        if memory is Memory.HBM:
            written = np.zeros(max(math.prod(shape), 1), dtype=bool)
        else:
            written = np.zeros((storage[0], math.prod(storage[1:])), dtype=bool)
        assert op.buffer.name_hint is not None
        buffer = Buffer(op.buffer, memory, dtype, shape, op.buffer.name_hint, written)
        return NkiTensor(buffer, shape, row_major(shape))

    def shared_output(self, shape: Sequence[int], dtype: np.dtype, name: str) -> NkiTensor:
        """An `nl.shared_hbm` tensor: the k-th one each program of a grid makes is the same buffer."""
        if self.shared_cursor < len(self.shared):
            buffer = self.shared[self.shared_cursor]
            self.shared_cursor += 1
            if buffer.shape != tuple(shape) or buffer.dtype != dtype:
                raise error(f"program {self.program_ids} allocates shared HBM tensors unlike program 0's")
            return NkiTensor(buffer, buffer.shape, row_major(buffer.shape))
        tensor = self.allocate(shape, dtype, Memory.HBM, name)
        self.shared.append(tensor.buffer)
        self.shared_cursor += 1
        return tensor

    def constant(self, key: Any, make: Any) -> NkiTensor:
        """A tile the trace builds once and reuses (identities, ones), made by `make()` on first use."""
        if key not in self._constants:
            self._constants[key] = make()
        return self._constants[key]

    # ---- instructions ----------------------------------------------------------------------------------------

    def emit(
        self,
        api: str,
        op_class: type[neuron.InstructionOp],
        engine: Engine,
        accesses: Mapping[str, NkiTensor | tuple[NkiTensor, neuron.AccessPatternAttr]],
        properties: dict[str, Attribute] | None = None,
    ) -> neuron.InstructionOp:
        """Append and verify one instruction; `accesses` gives each role's tensor (and pattern, if not its own).
        Reads of elements never written are refused; written elements are recorded."""
        spec = isa.OPCODES[op_class.OPCODE]
        resolved: dict[str, tuple[NkiTensor, neuron.AccessPatternAttr]] = {}
        for role, entry in accesses.items():
            tensor, pattern = entry if isinstance(entry, tuple) else (entry, entry.access_pattern())
            resolved[role] = (tensor, pattern)
        props = dict(properties or {})
        if engine is Engine.DMA:
            props["queue"] = IntegerAttr(0, i64)
        op = op_class.build_instruction(
            engine, {role: (t.buffer.value, p, None) for role, (t, p) in resolved.items()}, props
        )
        op.location = self.location()
        self.block.insert_op_before(op, self._end)
        self._verify(op, api)
        for role in spec.reads + spec.optional_reads:
            if role in resolved:
                self.check_written(api, resolved[role][0], role)
        for role in spec.writes + spec.optional_writes:
            if role in resolved:
                resolved[role][0].mask()[...] = True
        return op

    def check_written(self, api: str, tensor: NkiTensor, role: str) -> None:
        if not tensor.mask().all():
            raise error(
                f"{api}: {role} reads elements of {tensor.buffer.memory.value.upper()} tensor "
                f"'{tensor.buffer.name}' {list(tensor.shape)} that were never written (fresh memory holds NaN)"
            )

    def _verify(self, op: neuron.AllocOp | neuron.InstructionOp, api: str) -> None:
        try:
            op.verify()
        except VerifyException as failure:
            op.detach()
            op.erase()
            raise NkiError(f"{api}: {failure}") from None


_CURRENT: list[Trace] = []


def current_trace(required: bool = True) -> Trace | None:
    if _CURRENT:
        return _CURRENT[-1]
    if required:
        raise NkiError("this nki call works only inside a kernel being traced (called through nki.jit)")
    return None


def trace() -> Trace:
    """The trace of the kernel being traced (an error outside one)."""
    found = current_trace()
    assert found is not None
    return found


@contextlib.contextmanager
def tracing(active: Trace) -> Iterator[Trace]:
    _CURRENT.append(active)
    try:
        yield active
    finally:
        _CURRENT.pop()
