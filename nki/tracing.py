"""Tracing an NKI kernel into the neuron dialect: tensors, buffers, source lines and instruction emission.

A kernel runs once per argument signature as ordinary Python. Its tensors are `NkiTensor`s: views (partition
range, element offset, strides) of buffers that are `neuron.alloc`s in SBUF, PSUM or HBM, or the function's HBM
arguments. Every `nki.isa` call appends one neuron instruction (an `nki.language` call one or a few) to the
function being built, located at the kernel's own source line, and verifies it at once: the neuron dialect's
verifiers are the hardware's rules (`runtime.isa.check_instruction`), so a kernel that breaks one fails at the
line that broke it, with the rule.

Loops: the body of an `nl.affine_range` or `nl.sequential_range` loop runs once, with a symbolic index (an
`Affine` expression of the loop variable), and becomes an `scf.for` whose instructions address their operands
through register offsets computed from the induction variable, so the IR grows with the kernel's text, not with
its trip counts. Where the body needs the index as a Python number (it branches on it, calls `int()` or
`range()` with it, indexes the partition axis of a tile with it, multiplies two indices, keeps a tile made in the
loop for use after it), tracing stops with `NeedsUnrolling` naming the loop, and the kernel is traced again
with that loop unrolled: every trip's instructions emitted with static offsets. `nl.static_range` and Python's
`range` are always unrolled.

Fresh SBUF, PSUM and HBM buffers hold NaN on the simulated core (as in NKI's simulator [nki-simulator]), but the
memory allocator reuses on-chip bytes between buffers whose lives do not overlap, so a fresh buffer could read
another's old values there. The trace therefore tracks which elements of each buffer have been written (in a loop,
by any trip). A read of on-chip elements never written warns (`NkiWarning`) at the line that reads, and the
buffer is filled with fresh memory's bytes where it is made, so those elements read as NaN as they would on a
fresh core; in HBM such a read is an error. The same record gives
`nc_matmul`'s `accumulate=None` its meaning: the first write to a PSUM element overwrites, later ones add; in a loop
whose trips write the same elements that is a register condition, "not the first trip".
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    LocationAttr,
    MemRefType,
    ModuleOp,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import buffer_type
from neuron_mlir.ir.locations import describe_location, source_location
from neuron_mlir.ir.types import element_type_for
from neuron_mlir.runtime import dtypes, isa
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.program import row_major_strides

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class NkiError(ValueError):
    """A kernel breaks a rule of NKI or of the hardware; the message names the call, the rule and the line."""


class NkiWarning(UserWarning):
    """A kernel does something legal that is likely a mistake (it reads memory it never wrote)."""


LoopKey = tuple[str, int]  # the kernel source line of a loop's `nl.affine_range` call


class NeedsUnrolling(BaseException):  # not an Exception: a kernel's `except Exception` lets it pass
    """The kernel needs the index of these loops as a number: trace again with them unrolled."""

    def __init__(self, loops: frozenset[LoopKey], reason: str) -> None:
        super().__init__(reason)
        self.loops = loops
        self.reason = reason


@dataclass(eq=False)
class LoopVar:
    """The induction variable of a traced `scf.for`: its trips and its SSA value."""

    key: LoopKey
    trips: range
    value: SSAValue

    @property
    def first(self) -> int:
        return self.trips[0]

    @property
    def last(self) -> int:
        return self.trips[-1]


class Affine:
    """`const + sum(coefficient * loop variable)`: a symbolic loop index and what kernels compute from it."""

    __array_ufunc__ = None  # NumPy scalars defer to the reflected operators
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, const: int, terms: Mapping[LoopVar, int]) -> None:
        self.const = int(const)
        self.terms = {var: c for var, c in terms.items() if c != 0}

    @staticmethod
    def of(var: LoopVar) -> Affine:
        return Affine(0, {var: 1})

    @property
    def loops(self) -> frozenset[LoopKey]:
        return frozenset(var.key for var in self.terms)

    def _combine(self, other: Any, sign: int) -> Affine | int:
        if isinstance(other, Affine):
            terms = dict(self.terms)
            for var, c in other.terms.items():
                terms[var] = terms.get(var, 0) + sign * c
            return simplify(Affine(self.const + sign * other.const, terms))
        if isinstance(other, int | np.integer):
            return Affine(self.const + sign * int(other), self.terms)
        return self._needs_number(f"combining it with {type(other).__name__}")

    def __add__(self, other: Any) -> Affine | int:
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Affine | int:
        return self._combine(other, -1)

    def __rsub__(self, other: Any) -> Affine | int:
        return (-self)._combine(other, 1)

    def __neg__(self) -> Affine:
        return Affine(-self.const, {var: -c for var, c in self.terms.items()})

    def __mul__(self, other: Any) -> Affine | int:
        if isinstance(other, int | np.integer):
            return simplify(Affine(self.const * int(other), {var: c * int(other) for var, c in self.terms.items()}))
        return self._needs_number("multiplying it by a non-constant")

    __rmul__ = __mul__

    def minimum(self) -> int:
        return self.const + sum(c * (var.first if c > 0 else var.last) for var, c in self.terms.items())

    def maximum(self) -> int:
        return self.const + sum(c * (var.last if c > 0 else var.first) for var, c in self.terms.items())

    def at(self, values: Mapping[LoopVar, int]) -> int:
        return self.const + sum(c * values[var] for var, c in self.terms.items())

    def _needs_number(self, what: str) -> Any:
        raise NeedsUnrolling(self.loops, f"the loop index is used as a number ({what})")

    def __index__(self) -> int:
        return self._needs_number("as an index")

    def __int__(self) -> int:
        return self._needs_number("int()")

    def __float__(self) -> float:
        return self._needs_number("float()")

    def __bool__(self) -> bool:
        return self._needs_number("as a condition")

    def __eq__(self, other: object) -> bool:
        return self._needs_number("in a comparison")

    def __ne__(self, other: object) -> bool:
        return self._needs_number("in a comparison")

    def __lt__(self, other: object) -> bool:
        return self._needs_number("in a comparison")

    __le__ = __gt__ = __ge__ = __lt__

    def __floordiv__(self, other: object) -> Any:
        return self._needs_number("in a division")

    __mod__ = __rfloordiv__ = __rmod__ = __truediv__ = __rtruediv__ = __floordiv__

    def __repr__(self) -> str:
        parts = [f"{c}*i{id(var) % 1000}" for var, c in self.terms.items()]
        return " + ".join([*parts, str(self.const)])


Index = int | Affine


def simplify(value: Affine) -> Affine | int:
    return value if value.terms else value.const


def loops_of(*values: Any) -> frozenset[LoopKey]:
    found: frozenset[LoopKey] = frozenset()
    for value in values:
        if isinstance(value, Affine):
            found |= value.loops
    return found


def _kernel_frame() -> tuple[str, int] | None:
    """(file, line) of the innermost caller outside this package: the kernel's own source line."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR + os.sep):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
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
    # the traced loops open when the buffer was made: one buffer serves every trip of them
    scope: tuple[LoopVar, ...] = ()
    # an input the kernel writes into (its new contents go back to the caller's array)
    modified: bool = False

    @property
    def on_chip(self) -> bool:
        return self.memory is not Memory.HBM


class DynSlice:
    """`nl.ds(start, size)`: `size` elements from `start` along one dimension."""

    def __init__(self, start: Index, size: Any) -> None:
        self.start: Index = start if isinstance(start, Affine) else int(start)
        if isinstance(size, Affine):
            raise NeedsUnrolling(size.loops, "nl.ds with a size that depends on a loop index")
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
        offset: Index = 0,
        partition_start: int = 0,
    ) -> None:
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset: Index = offset if isinstance(offset, Affine) else int(offset)
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
        offset: Index = self.offset
        partition_start = self.partition_start
        for dim, item in enumerate(items):
            size, stride = self.shape[dim], self.strides[dim]
            start, count, step, drop = _index(item, size, dim, self.shape, self.buffer.name)
            if self.buffer.on_chip and dim == 0:
                if step != 1:
                    raise error(f"the partition dimension cannot be sliced with step {step}")
                if isinstance(start, Affine):
                    raise NeedsUnrolling(start.loops, "a loop index selects partitions of a tile")
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
        if self.strides != row_major_strides(self.shape):
            raise error(f"reshape needs a contiguous view; {list(self.shape)} has strides {list(self.strides)}")
        return NkiTensor(self.buffer, new_shape, row_major_strides(new_shape), self.offset)

    def permute(self, *dims: Any) -> NkiTensor:
        """The view with its dimensions in the order `dims`; on chip the partition dimension stays first."""
        order = tuple(int(d) for d in (dims[0] if len(dims) == 1 and isinstance(dims[0], tuple | list) else dims))
        if sorted(order) != list(range(self.ndim)):
            raise error(f"permute{order} of a {self.ndim}-d tensor: give each dimension once")
        if self.buffer.on_chip and order[0] != 0:
            raise error("an on-chip view keeps the partition dimension first (no data moves across partitions)")
        return NkiTensor(
            self.buffer,
            [self.shape[d] for d in order],
            [self.strides[d] for d in order],
            self.offset,
            self.partition_start,
        )

    @property
    def T(self) -> NkiTensor:
        """The transposed view of a 2-D HBM tensor (a DMA reads it with the strides swapped)."""
        if self.ndim != 2:
            raise error(f".T of a {self.ndim}-d tensor: use permute")
        return self.permute(1, 0)

    def reshape_on_chip(self, shape: Sequence[int]) -> NkiTensor:
        """The same partitions with the free dimensions regrouped (a contiguous row of each partition)."""
        new_shape = tuple(int(s) for s in shape)
        if new_shape[0] != self.shape[0] or math.prod(new_shape) != self.size:
            raise error(f"cannot regroup {list(self.shape)} as {list(new_shape)}: partitions stay")
        if self.strides[1:] != row_major_strides(self.shape[1:]):
            raise error(f"cannot regroup the non-contiguous free dimensions of {list(self.shape)}")
        strides = (self.strides[0], *row_major_strides(new_shape[1:]))
        return NkiTensor(self.buffer, new_shape, strides, self.offset, self.partition_start)

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
        static = self.offset.const if isinstance(self.offset, Affine) else self.offset
        if static < 0:
            raise NeedsUnrolling(loops_of(self.offset), "an access whose constant offset is negative")
        if self.buffer.on_chip:
            return neuron.AccessPatternAttr(pattern, static, self.partition_start, self.shape[0])
        return neuron.AccessPatternAttr(pattern, static)

    def masks(self) -> list[np.ndarray]:
        """The views of the buffer's written-element record this tensor covers, one per trip of the loops its
        offset depends on (one view without loops), shaped as the tensor."""
        if not isinstance(self.offset, Affine):
            return [self._mask(self.offset)]
        variables = list(self.offset.terms)
        offset = self.offset
        return [
            self._mask(offset.at(dict(zip(variables, values, strict=True))))
            for values in itertools.product(*(var.trips for var in variables))
        ]

    def mask(self) -> np.ndarray:
        """The written-element view of a tensor whose offset is known (no loop index in it)."""
        if isinstance(self.offset, Affine):
            raise NeedsUnrolling(self.offset.loops, "a whole-record view of a loop-dependent tensor")
        return self._mask(self.offset)

    def _mask(self, offset: int) -> np.ndarray:
        written = self.buffer.written
        item = written.itemsize
        if self.buffer.on_chip:
            rows = written[self.partition_start : self.partition_start + self.shape[0]]
            base = rows[:, offset:]
            return np.lib.stride_tricks.as_strided(
                base, shape=self.shape, strides=(rows.strides[0], *[s * item for s in self.strides[1:]])
            )
        return np.lib.stride_tricks.as_strided(
            written[offset:], shape=self.shape, strides=[s * item for s in self.strides]
        )

    def is_whole_buffer(self) -> bool:
        return (
            self.shape == self.buffer.shape
            and not isinstance(self.offset, Affine)
            and self.offset == 0
            and self.partition_start == 0
            and (self.buffer.on_chip or self.strides == row_major_strides(self.shape))
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


def _bounds(value: Index) -> tuple[int, int]:
    """The least and greatest value of an index over the trips of its loops."""
    if isinstance(value, Affine):
        return value.minimum(), value.maximum()
    return int(value), int(value)


def _index(item: Any, size: int, dim: int, shape: tuple[int, ...], name: str) -> tuple[Index, int, int, bool]:
    """(start, count, step, drops the dimension) of one index entry, refusing anything outside the dimension."""

    def outside(what: str) -> NkiError:
        return error(f"indexing '{name}': index {what} of dimension {dim} is out of bounds for shape {list(shape)}")

    if isinstance(item, DynSlice):
        low, high = _bounds(item.start)
        if item.size <= 0 or low < 0 or high + item.size > size:
            raise outside(repr(item))
        return item.start, item.size, 1, False
    if isinstance(item, slice):
        step = 1 if item.step is None else int(item.step)
        if step <= 0:
            raise error(f"indexing '{name}': slice step {step} of dimension {dim}: steps are positive")
        if isinstance(item.start, Affine) or isinstance(item.stop, Affine):
            start_index: Index = 0 if item.start is None else item.start
            stop_index: Index = size if item.stop is None else item.stop
            count = stop_index - start_index
            if isinstance(count, Affine):
                raise NeedsUnrolling(count.loops, "a slice whose length depends on a loop index")
            low, high = _bounds(start_index)
            if count <= 0 or low < 0 or high + count > size:
                raise outside(f"{item.start}:{item.stop}")
            return start_index, -(-count // step), step, False
        start = 0 if item.start is None else int(item.start)
        stop = size if item.stop is None else int(item.stop)
        start = start + size if start < 0 else start
        stop = stop + size if stop < 0 else stop
        if not 0 <= start < stop <= size:
            raise outside(f"{item.start}:{item.stop}")
        return start, -(-(stop - start) // step), step, False
    if isinstance(item, Affine):
        low, high = _bounds(item)
        if low < 0 or high >= size:
            raise outside(repr(item))
        return item, 1, 1, True
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
    """The function being built for one kernel launch, where the kernel is, and the loops open around it."""

    kernel_name: str
    target: Target
    grid: tuple[int, ...]
    # loops to unroll (their source lines), and whether every loop is
    unrolled: frozenset[LoopKey] = frozenset()
    unroll_all: bool = False
    # loops traced with two copies of the body per trip (`rotation_candidates`)
    rotated: frozenset[LoopKey] = frozenset()
    seed: int = 0  # the key of the counter-based random draws (nisa.dropout)
    module: ModuleOp = field(init=False)
    function: func.FuncOp = field(init=False)
    block: Block = field(init=False)
    program_ids: tuple[int, ...] = ()
    # buffers made by nl.ndarray(buffer=nl.shared_hbm) in allocation order: every program of a grid shares them
    shared: list[Buffer] = field(default_factory=list)
    shared_cursor: int = 0
    loops: list[LoopVar] = field(default_factory=list)
    # where ops go: (block, the op they go before), innermost last
    _points: list[tuple[Block, Operation]] = field(default_factory=list)
    _loop_ops: list[scf.ForOp] = field(default_factory=list)
    _names: dict[str, int] = field(default_factory=dict)
    _constants: dict[Any, NkiTensor] = field(default_factory=dict)
    _end: func.ReturnOp = field(init=False)
    _inputs: list[Buffer] = field(default_factory=list)
    _counters: int = 0  # random counters handed out so far
    # loops (by source line) that directly make on-chip buffers or issue DMAs
    _allocating_loops: set[LoopKey] = field(default_factory=set)
    _dma_loops: set[LoopKey] = field(default_factory=set)
    _around_dma_loops: set[LoopKey] = field(default_factory=set)  # loops holding a loop that issues DMAs

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
        self._points = [(self.block, self._end)]
        tensors = []
        for (name, shape, dtype), arg in zip(inputs, self.block.args, strict=True):
            arg.name_hint = self.fresh_name(name)
            written = np.ones(max(math.prod(shape), 1), dtype=bool)
            buffer = Buffer(arg, Memory.HBM, dtype, shape, arg.name_hint, written)
            self._inputs.append(buffer)
            tensors.append(NkiTensor(buffer, shape, row_major_strides(shape)))
        return tensors

    def finish(self, results: Sequence[NkiTensor]) -> tuple[ModuleOp, list[int]]:
        """End the function returning `results`, then every input the kernel wrote into; the module and the
        positions (among the inputs) of those inputs."""
        values = []
        for result in results:
            if result.buffer.memory is not Memory.HBM or not result.is_whole_buffer():
                raise NkiError(
                    f"kernel {self.kernel_name} returns {result!r}: a kernel returns whole HBM tensors "
                    "(nl.ndarray(..., buffer=nl.shared_hbm))"
                )
            values.append(result.buffer.value)
        modified = [
            index for index, arg in enumerate(self.block.args) if self._inputs[index].modified and arg not in values
        ]
        values += [self.block.args[index] for index in modified]
        self.block.insert_op_before(func.ReturnOp(*values), self._end)
        self._end.detach()
        self._end.erase()
        self.function.function_type = FunctionType.from_lists(
            [arg.type for arg in self.block.args], [value.type for value in values]
        )
        return self.module, modified

    def insert(self, op: Operation) -> Operation:
        block, before = self._points[-1]
        block.insert_op_before(op, before)
        return op

    @contextlib.contextmanager
    def at_top_level(self) -> Iterator[None]:
        """Emit into the function's own block, before the outermost open loop: for what outlives the loops."""
        before = self._loop_ops[0] if self._loop_ops else self._end
        points, loops = self._points, self.loops
        self._points, self.loops = [(self.block, before)], []
        try:
            yield
        finally:
            self._points, self.loops = points, loops

    # ---- loops -----------------------------------------------------------------------------------------------

    def loop_range(self, start: Any, stop: Any, step: Any) -> Iterator[Index]:
        """The trips of an `nl.affine_range`/`nl.sequential_range` loop: one symbolic trip inside an `scf.for`
        (two, for a loop in `rotated`: see `rotation_candidates`), or the numbers themselves where the loop is
        unrolled (or has fewer than two trips)."""
        frame = _kernel_frame()
        key: LoopKey = frame if frame is not None else ("<unknown>", 0)
        bounds = loops_of(start, stop, step)
        if bounds:
            raise NeedsUnrolling(bounds, "a loop bound depends on another loop's index")
        trips = range(int(start), int(stop), int(step))
        if self.unroll_all or key in self.unrolled or len(trips) < 2:
            yield from trips
            return
        copies = 2 if key in self.rotated else 1
        rounds = range(trips.start, trips.start + len(trips) // copies * copies * trips.step, copies * trips.step)
        if len(rounds) < 2:
            yield from trips
            return
        constants = [self.index_constant(value) for value in (rounds.start, rounds.stop, rounds.step)]
        body = Block(arg_types=[IndexType()])
        terminator = scf.YieldOp()
        body.add_op(terminator)
        loop = scf.ForOp(constants[0], constants[1], constants[2], [], body)
        loop.location = self.location()
        self.insert(loop)
        variable = LoopVar(key, rounds, body.args[0])
        body.args[0].name_hint = self.fresh_name("i")
        self.loops.append(variable)
        self._loop_ops.append(loop)
        self._points.append((body, terminator))
        try:
            for copy in range(copies):
                yield Affine.of(variable) + copy * trips.step
        finally:
            self._points.pop()
            self._loop_ops.pop()
            self.loops.pop()
        # the trip a rotated loop of odd trip count has left, with its number
        yield from trips[len(rounds) * copies :]

    def rotation_candidates(self) -> frozenset[LoopKey]:
        """Traced loops whose bodies make on-chip buffers themselves, except loops that move data where no loop
        inside them does (`neuron-unroll-loops` gives those copies by its cost model, loops that only compute
        copied with them): traced with two copies of the body per trip, consecutive trips use different buffers,
        so one trip's loads and matmuls overlap the previous trip's work, as NKI's compiler rotates the buffers of
        affine loops."""
        innermost_moving = self._dma_loops - self._around_dma_loops
        return frozenset(self._allocating_loops - innermost_moving)

    def index_constant(self, value: int) -> SSAValue:
        return self.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).results[0]

    def index_value(self, value: Affine, with_constant: bool = False) -> SSAValue:
        """An SSA `index` computing the loop-dependent part of `value` (and its constant, when asked)."""
        total: SSAValue | None = None
        for var, coefficient in value.terms.items():
            term = var.value
            if coefficient != 1:
                term = self.insert(arith.MuliOp(var.value, self.index_constant(coefficient))).results[0]
            total = term if total is None else self.insert(arith.AddiOp(total, term)).results[0]
        assert total is not None
        if with_constant and value.const:
            total = self.insert(arith.AddiOp(total, self.index_constant(value.const))).results[0]
        return total

    def random_counters(self, count: int) -> tuple[int, SSAValue | None]:
        """The first of `count` counters of their own for each trip of the open traced loops: a constant, or (in
        loops) the constant plus a register offset, each loop's index weighted past the inner loops' range."""
        first = self._counters
        weights: dict[LoopVar, int] = {}
        span = count
        for var in reversed(self.loops):
            weights[var] = span
            span *= var.last + 1
        self._counters += span
        if not weights:
            return first, None
        return first, self.index_value(Affine(first, weights), with_constant=True)

    # ---- naming and locations --------------------------------------------------------------------------------

    def fresh_name(self, name: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "t"
        if base[0].isdigit():
            base = f"t{base}"
        count = self._names.get(base, 0)
        self._names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def location(self) -> LocationAttr:
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
        if any(isinstance(s, Affine) for s in shape):
            raise NeedsUnrolling(loops_of(*shape), "a tensor whose shape depends on a loop index")
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
            # NKI's rule for PSUM tiles: one tile lives in one bank of each partition [nki-tile-size]
            bank = self.target.psum_bank_bytes
            if memory is Memory.PSUM and row_bytes > bank:
                raise error(
                    f"nl.ndarray: PSUM tile of shape {list(shape)} and dtype {dtype_name(dtype)} needs {row_bytes} "
                    f"bytes per partition; a PSUM tile fits one {bank}-byte bank ({bank // 4} fp32)"
                )
        op = neuron.AllocOp(
            buffer_type(storage, element_type_for(dtype_name(dtype)), memory),
            name_hint=self.fresh_name(name or {"sbuf": "sb", "psum": "ps", "hbm": "hbm"}[memory.value]),
        )
        op.location = self.location()
        self.insert(op)
        self._verify(op, "nl.ndarray")
        if memory is Memory.HBM:
            written = np.zeros(max(math.prod(shape), 1), dtype=bool)
        else:
            written = np.zeros((storage[0], math.prod(storage[1:])), dtype=bool)
        assert op.buffer.name_hint is not None
        if self.loops and memory is not Memory.HBM:
            self._allocating_loops.add(self.loops[-1].key)
        buffer = Buffer(op.buffer, memory, dtype, shape, op.buffer.name_hint, written, tuple(self.loops))
        return NkiTensor(buffer, shape, row_major_strides(shape))

    def shared_output(self, shape: Sequence[int], dtype: np.dtype, name: str) -> NkiTensor:
        """An `nl.shared_hbm` tensor: the k-th one each program of a grid makes is the same buffer."""
        if self.shared_cursor < len(self.shared):
            buffer = self.shared[self.shared_cursor]
            self.shared_cursor += 1
            if buffer.shape != tuple(shape) or buffer.dtype != dtype:
                raise error(f"program {self.program_ids} allocates shared HBM tensors unlike program 0's")
            return NkiTensor(buffer, buffer.shape, row_major_strides(buffer.shape))
        with self.at_top_level():
            tensor = self.allocate(shape, dtype, Memory.HBM, name)
        self.shared.append(tensor.buffer)
        self.shared_cursor += 1
        return tensor

    def constant(self, key: Any, make: Any) -> NkiTensor:
        """A tile the trace builds once, outside every loop, and reuses (identities), made by `make()`."""
        if key not in self._constants:
            with self.at_top_level():
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
        dynamic: dict[str, SSAValue] | None = None,
    ) -> neuron.InstructionOp:
        """Append and verify one instruction; `accesses` gives each role's tensor (and pattern, if not its own).
        Reads of elements never written are refused; written elements are recorded."""
        spec = isa.OPCODES[op_class.OPCODE]
        resolved: dict[str, tuple[NkiTensor, neuron.AccessPatternAttr]] = {}
        for role, entry in accesses.items():
            tensor, pattern = entry if isinstance(entry, tuple) else (entry, entry.access_pattern())
            self._check_scope(tensor)
            resolved[role] = (tensor, pattern)
        props = dict(properties or {})
        if engine is Engine.DMA:
            props["queue"] = IntegerAttr(0, i64)
            if self.loops:
                self._dma_loops.add(self.loops[-1].key)
                self._around_dma_loops.update(loop.key for loop in self.loops[:-1])
        operands = {}
        for role, (tensor, pattern) in resolved.items():
            offset = self.index_value(tensor.offset) if isinstance(tensor.offset, Affine) else None
            operands[role] = (tensor.buffer.value, pattern, offset)
        op = op_class.build_instruction(engine, operands, props, dynamic)
        op.location = self.location()
        self.insert(op)
        self._verify(op, api)
        for role in spec.reads + spec.optional_reads:
            if role in resolved:
                self.check_written(api, resolved[role][0], role)
        for role in spec.writes + spec.optional_writes:
            if role in resolved:
                written = resolved[role][0]
                written.buffer.modified = True
                for view in written.masks():
                    view[...] = True
        return op

    def _check_scope(self, tensor: NkiTensor) -> None:
        """A buffer made inside a traced loop is one buffer for all its trips: used after the loop, it would hold
        only the last trip's data, where the kernel means one per trip."""
        for var in tensor.buffer.scope:
            if var not in self.loops:
                raise NeedsUnrolling(frozenset({var.key}), f"tile '{tensor.buffer.name}' is used after its loop")

    def check_written(self, api: str, tensor: NkiTensor, role: str) -> None:
        """A read of elements never written: on chip they read as NaN, as fresh memory does (the buffer is filled
        where it is made), with a warning at the reading line; in HBM it is an error."""
        if all(view.all() for view in tensor.masks()):
            return
        what = (
            f"{api}: {role} reads elements of {tensor.buffer.memory.value.upper()} tensor "
            f"'{tensor.buffer.name}' {list(tensor.shape)} that were never written"
        )
        if not tensor.buffer.on_chip:
            raise error(what)
        warnings.warn(NkiWarning(f"{what}: they hold NaN{self.where()}"), stacklevel=2)
        self._fill_fresh(tensor.buffer)

    def _fill_fresh(self, buffer: Buffer) -> None:
        """Fill an on-chip buffer where it is made with the bytes of fresh memory (0xFF: NaN, or -1 and the
        largest unsigned integers), so reads of elements no instruction wrote see them."""
        alloc = buffer.value.owner
        assert isinstance(alloc, neuron.AllocOp)
        fresh = float(np.frombuffer(b"\xff" * buffer.dtype.itemsize, dtype=buffer.dtype)[0].astype(np.float64))
        partitions, row = buffer.written.shape
        block = alloc.parent_block()
        assert block is not None
        after: Operation = alloc
        for start in range(0, row, isa.ENGINE_MAX_NUM):  # an engine access spans at most this many elements
            width = min(isa.ENGINE_MAX_NUM, row - start)
            fill = neuron.MemsetOp.build_instruction(
                Engine.VECTOR,
                {"dst": (buffer.value, neuron.AccessPatternAttr([(1, width)], start, 0, partitions), None)},
                {"value": FloatAttr(fresh, f64)},
            )
            fill.location = alloc.location
            block.insert_op_after(fill, after)
            self._verify(fill, "nl.ndarray")
            after = fill
        buffer.written[...] = True

    def first_write_accumulates(self, api: str, dst: NkiTensor) -> bool | SSAValue:
        """`accumulate=None` of an nc_matmul into dst: False where its elements were never written, True where they
        were; inside traced loops whose trips all write the same elements, "not the first trip" as a register
        condition."""
        views = dst.masks()
        if all(view.all() for view in views):
            return True
        if any(view.any() for view in views):
            if self.loops:
                raise NeedsUnrolling(frozenset(v.key for v in self.loops), "a PSUM tile written in part")
            raise error(f"{api}: dst is partly written and partly fresh: give accumulate=True or False")
        offset_loops = dst.offset.terms if isinstance(dst.offset, Affine) else {}
        repeating = [var for var in self.loops if var not in dst.buffer.scope and var not in offset_loops]
        if not repeating:
            return False
        # every trip variable is at least its first value, so the sum equals the sum of the firsts only on the
        # first trip of all of them
        trips = self.index_value(Affine(0, dict.fromkeys(repeating, 1)))
        firsts = self.index_constant(sum(var.first for var in repeating))
        return self.insert(arith.CmpiOp(trips, firsts, "ne")).results[0]

    def _verify(self, op: neuron.AllocOp | neuron.InstructionOp, api: str) -> None:
        try:
            op.verify()
        except VerifyException as failure:
            block = op.parent_block()
            assert block is not None
            block.detach_op(op)
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
