"""A run's data work recorded once and run again: the simulator's tape.

Registers never depend on data, so every run of a program executes the same instances with the same operand
views and attributes. The simulator (`runtime.simulator`) records the data work of its first run as a `Tape`, a
list of steps in program order, and later runs run the tape instead of walking the program:

* an instance becomes a call of its `runtime.semantics` function with the views and attributes it was recorded
  with (`functools.partial`), or, for the common forms below, a *prepared* step;
* a loop nest that ran batched (`runtime.vectorize`) becomes its batch's steps, one per batched instruction,
  each prepared as an instance is (below, with the lane dimensions in front), then the write-back of its private
  bytes; a batch split across threads stays one step, its `Batch.run`.

A prepared step is the semantics function's own fast path with every decision that depends only on shapes,
dtypes, strides, memory layout and attribute values (all fixed for a recorded instance) taken once, while
preparing: which ufunc, whether the destination can be written in place, the reshaped views of the operands
(only where reshaping gives a view, never a copy, so the step reads the memory as it is when it runs), constants
derived from immediates. The NumPy calls that read or write simulated memory are the ones the semantics function
makes, with the same operands, so the results are the same bits. Anything else (dtype conversions, integer
arithmetic, reductions, data-dependent choices such as an identity test) runs the semantics function itself.

The semantics functions' fast paths ignore floating-point errors (`np.errstate(all="ignore")`); a tape runs all
its steps under that setting, which changes warnings only, never values.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from neuron_mlir.runtime import alu, blas, isa, semantics
from neuron_mlir.runtime.hardware import Engine, Target

Step = Callable[[], None]
# What makes a step of its operand views: `maker(views)` is the step, and the same maker given views of other
# memory holding the same bytes makes a step that reads them there (`runtime.bound_inputs`).
Maker = Callable[[dict[str, np.ndarray]], Step]

F32 = alu.F32


class Tape:
    """The recorded steps of one run's data work; `run` does that work again.

    When the machine has a core to spare (`blas.spare_core`), its products of at least `blas.WIDE_MIN_MACS`
    multiply-adds per lane run on all of OpenBLAS's threads (`wide_steps`, `blas.wide`); otherwise, and for
    everything else, BLAS runs as the run leaves it (single-threaded in the simulator). Only the tape's own steps
    are widened: a lane batch split across threads runs as one step, its products on the threads that share its
    lanes."""

    __slots__ = ("steps", "wide_steps")

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        widened = [_widened(step) for step in steps]
        self.wide_steps = widened if any(w is not s for w, s in zip(widened, steps, strict=True)) else steps

    def run(self) -> None:
        steps = self.wide_steps if self.wide_steps is not self.steps and blas.spare_core() else self.steps
        with np.errstate(all="ignore"):
            for step in steps:
                step()


def _widened(step: Step) -> Step:
    if isinstance(step, Product | GatheringProduct) and step.macs >= blas.WIDE_MIN_MACS:
        return blas.wide(step)
    return step


def batch_steps(batch: Any) -> list[Step]:
    """A batched loop nest (`vectorize.Batch`) as steps: its own when one thread runs it, else its `run`."""
    if len(batch.parts) != 1:
        return [batch.run]
    return [*batch.parts[0], *(_copy_into(real, shadow) for real, shadow in batch.write_back)]


def lane_step(
    opcode: str,
    views: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
    engine: Engine,
    target: Target,
    nl: int,
) -> Step:
    """One instruction of a batched nest over `nl` lane dimensions as a step: prepared when its form allows, else
    its semantics function over the lanes."""
    function = isa.OPCODES[opcode].semantics
    prepare = _PREPARERS.get(opcode)
    if prepare is not None:
        step = prepare(views, attrs, engine, target, nl)
        if step is not None:
            return step
    return functools.partial(function, views, attrs, engine, target, nl)


def instance_step(
    function: Callable[..., None],
    opcode: str,
    views: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
    engine: Engine,
    target: Target,
) -> Step:
    """One recorded instance as a step: prepared when its form allows, else its semantics function."""
    prepare = _PREPARERS.get(opcode)
    if prepare is not None and function is isa.OPCODES[opcode].semantics:
        step = prepare(views, attrs, engine, target, 0)
        if step is not None:
            return step
    return functools.partial(function, views, attrs, engine, target)


# ---- preparing -------------------------------------------------------------------------------------------


def _view(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """`array.reshape(shape)` when that is a view of the same memory (None when reshaping would copy)."""
    try:
        # (the method: `np.reshape` dispatches to it through a Python wrapper that costs three times the call)
        return array.reshape(shape, copy=False)
    except ValueError:
        return None


def _rows(array: np.ndarray, nl: int) -> np.ndarray | None:
    """`semantics._rows(array, nl)` as a view, or None."""
    return _view(array, (*array.shape[: nl + 1], -1))


def _f32_rows(array: np.ndarray, nl: int) -> np.ndarray | None:
    """`alu.to_f32(_rows(array, nl))` as a view (an fp32 operand), or None."""
    if array.dtype != F32:
        return None
    return _rows(array, nl)


def _copy_into(dst: np.ndarray, values: np.ndarray) -> Step:
    """`np.copyto(dst, values)` for values of dst's dtype, as dst's own `__setitem__`: the same copy (overlap
    handled alike, nothing to cast), without the Python dispatcher `np.copyto` runs first (a third of a small
    copy's time; a tape holds hundreds of small copies)."""
    return functools.partial(dst.__setitem__, Ellipsis, values)


def _prepare_dma_copy(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.dma_copy: dst[...] = src.reshape(dst.shape) between equal dtypes, else store(dst, to_f32(src))
    src, dst = ops["src"], ops["dst"]
    if attrs.get("indirect") == "src" and not nl:  # over lanes, the rows of each lane are data of that lane
        return _prepare_gather(src, dst, ops["offsets"])
    if attrs.get("indirect") == "dst" and not nl:
        return _prepare_scatter(src, dst, ops["offsets"], attrs)
    if attrs.get("indirect"):
        return None
    values = _view(src, dst.shape)
    if values is None:
        return None
    return _copy_into(dst, values) if src.dtype == dst.dtype else _converting_copy(dst, values)


def _prepare_gather(table: np.ndarray, dst: np.ndarray, offsets: np.ndarray) -> Step | None:
    # semantics._dma_indirect's gather between equal dtypes: the rows `offsets` picks, each checked to lie in the
    # table (else the semantics function itself runs, to raise its error), stored into dst (no conversion)
    if table.dtype != dst.dtype:
        return None
    bound, shape = table.shape[0], dst.shape

    def step() -> None:
        rows = offsets.reshape(-1).astype(np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= bound):
            semantics._dma_indirect(table, dst, offsets, {"indirect": "src"})  # raises, naming the first offset
        dst[...] = table[rows].reshape(shape)

    return step


def _prepare_scatter(src: np.ndarray, table: np.ndarray, offsets: np.ndarray, attrs: Mapping[str, Any]) -> Step | None:
    # semantics._dma_indirect's scatter of fp32 rows into an fp32 table (no conversion either way): with accumulate,
    # np.add.at of the rows into the table (the semantics function's, there into an fp32 copy of the table it then
    # stores: the same sums in the same order); else each row in order, the last of rows sent to one place winning:
    # one assignment when no place repeats (counted per run), else the semantics function. An offset outside the
    # table runs the semantics function, to raise its error.
    if src.dtype != F32 or table.dtype != F32:
        return None
    bound = table.shape[0]
    values = _view(src, (offsets.size, *table.shape[1:]))
    if values is None or np.may_share_memory(values, table) or np.may_share_memory(offsets, table):
        return None
    fallback = functools.partial(semantics._dma_indirect, src, table, offsets, attrs)

    def rows_within() -> np.ndarray | None:
        rows = offsets.reshape(-1).astype(np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= bound):
            return None
        return rows

    if attrs.get("accumulate"):

        def accumulated() -> None:
            rows = rows_within()
            if rows is None:
                fallback()  # raises, naming the first offset
                return
            np.add.at(table, rows, values)

        return accumulated

    def step() -> None:
        rows = rows_within()
        if rows is None or (rows.size and np.bincount(rows, minlength=bound).max() > 1):
            fallback()
            return
        table[rows] = values

    return step


def _prepare_tensor_copy(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.tensor_copy: dst[...] = _rows(src).reshape(dst.shape) with equal dtypes; between an integer and
    # fp32 dst[...] = cast(to_f32(_rows(src)), dst.dtype); both integers only where GpSimdE widens to int64 (its
    # other integer copies wrap)
    src, dst = ops["src"], ops["dst"]
    rows = _rows(src, nl)
    values = _view(rows, dst.shape) if rows is not None else None
    if values is None:
        return None
    if engine is Engine.GPSIMD and src.dtype.kind in "iu" and src.dtype.itemsize <= 4 and dst.dtype == np.int64:
        # GpSimdE widens to its 64-bit lanes exactly (to_int, no 32-bit wrap at that width, nothing to narrow):
        # NumPy's widening cast
        return functools.partial(np.copyto, dst, values, casting="unsafe")
    return _copy_into(dst, values) if src.dtype == dst.dtype else _converting_copy(dst, values)


def _converting_copy(dst: np.ndarray, values: np.ndarray) -> Step | None:
    """`dst[...] = alu.cast(alu.to_f32(values), dst.dtype)` for `values` of dst's shape, for two forms:

    * integers (or bools) to fp32: `to_f32` is one NumPy cast, which `copyto` does straight into dst (the same
      cast loop, without the temporary); bools to an integer type likewise (0.0 and 1.0 truncate to 0 and 1);
    * fp32 to an integer type: `alu.cast` truncates in float64, maps NaN to 0 and saturates; done here in one
      float64 buffer kept with the step. Infinities saturate without `nan_to_num` turning them into the largest
      float64 first: either way the clip gives the type's bound. A tile whose values all truncate into the
      type's range (a label's or an index's fp32 copy) needs none of that: NumPy's cast in one call.
    """
    if values.dtype.kind in "iub" and dst.dtype == F32:
        return functools.partial(np.copyto, dst, values, casting="unsafe")
    if values.dtype == np.bool_ and dst.dtype.kind in "iu":
        # to_f32 makes 0.0 and 1.0, which the truncation and saturation below leave 0 and 1: the cast of the bools
        return functools.partial(np.copyto, dst, values, casting="unsafe")
    if values.dtype != F32 or dst.dtype.kind not in "iu":
        return None
    info = np.iinfo(dst.dtype)
    wide = np.empty(dst.shape, np.float64)
    nan = np.empty(dst.shape, bool)
    # values strictly between these truncate into the type's range, where NumPy's cast (C's conversion, which
    # truncates toward zero) is the truncation itself: one call. Python compares its floats and ints exactly.
    lower, upper = info.min - 1, info.max + 1
    nonempty = values.size > 0

    def step() -> None:
        if nonempty and float(values.min()) > lower and float(values.max()) < upper:  # NaN fails both tests
            np.copyto(dst, values, casting="unsafe")
            return
        np.copyto(wide, values)
        np.trunc(wide, out=wide)
        np.isnan(wide, out=nan)
        np.copyto(wide, 0.0, where=nan)
        np.clip(wide, info.min, info.max, out=wide)
        np.copyto(dst, wide, casting="unsafe")

    return step


def _into_rows(dst: np.ndarray, nl: int, *shapes: tuple[int, ...], dtype: np.dtype = F32) -> np.ndarray | None:
    """`semantics.writable_rows(dst, nl, dtype)` when its shape is the operands' broadcast shape (binary_into's
    test)."""
    rows = semantics.writable_rows(dst, nl, dtype)
    if rows is None or rows.shape != np.broadcast_shapes(*shapes):
        return None
    return rows


def _prepare_tensor_tensor(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.tensor_tensor through binary_into: ufunc(to_f32(rows(in0)), to_f32(rows(in1)), out=rows(dst))
    in0, in1, dst = ops["in0"], ops["in1"], ops["dst"]
    ufunc = semantics._FLOAT_UFUNCS.get(attrs["op"])
    integer = semantics._integer_domain(engine, [in0, in1], [])
    if ufunc is None or integer:
        # binary_into declines at once: store(dst, alu.binary(...)) of the operands' rows (views, read as it runs)
        lhs, rhs = _rows(in0, nl), _rows(in1, nl)
        if lhs is None or rhs is None:
            return None
        exact = (
            _INTEGER_UFUNCS.get((attrs["op"], in0.dtype)) if integer and in0.dtype == in1.dtype == dst.dtype else None
        )
        # into the destination's rows in its own type (a ufunc whose output overlaps its inputs, as a running
        # sum's shifted halves do, computes as if into a fresh array: NumPy copies where the memory overlaps)
        rows = _into_rows(dst, nl, lhs.shape, rhs.shape, dtype=dst.dtype) if exact is not None else None
        if exact is not None and rows is not None:
            return functools.partial(exact, lhs, rhs, out=rows)
        return _stored(dst, lambda: alu.binary(attrs["op"], lhs, rhs, integer))
    if in0.dtype != F32 or in1.dtype != F32:
        return None
    lhs, rhs = _rows(in0, nl), _rows(in1, nl)
    if lhs is not None and rhs is not None:
        rows = _into_rows(dst, nl, lhs.shape, rhs.shape)
        return functools.partial(ufunc, lhs, rhs, out=rows) if rows is not None else None
    # an operand whose free dimensions do not merge (a strided window): reshaped per run, the same copy the
    # semantics function's reshape makes
    shape0, shape1 = (*in0.shape[: nl + 1], -1), (*in1.shape[: nl + 1], -1)
    rows = _into_rows(
        dst,
        nl,
        (*in0.shape[: nl + 1], math.prod(in0.shape[nl + 1 :])),
        (*in1.shape[: nl + 1], math.prod(in1.shape[nl + 1 :])),
    )
    if rows is None:
        return None

    def step() -> None:
        ufunc(in0.reshape(shape0), in1.reshape(shape1), out=rows)

    return step


# Integer operators whose exact result, wrapped as alu.binary wraps it (to 32 bits for int32 operands, int64's own
# wrapping for int64), is NumPy's ufunc in the operands' own type: two's-complement sums, differences and extremes
# (and int64 products; an int32 product is wrapped per operand first, which NumPy's is not).
_INTEGER_UFUNCS: dict[tuple[str, np.dtype], np.ufunc] = {
    **{
        (op, np.dtype(dtype)): ufunc
        for op, ufunc in (("add", np.add), ("subtract", np.subtract), ("max", np.maximum), ("min", np.minimum))
        for dtype in (np.int32, np.int64)
    },
    ("multiply", np.dtype(np.int64)): np.multiply,
}


def _stored(dst: np.ndarray, compute: Callable[[], np.ndarray]) -> Step:
    """A step that stores `compute()` into dst as semantics.store does (converting to dst's type)."""
    cast, dtype, shape = alu.cast, dst.dtype, dst.shape

    def step() -> None:
        dst[...] = cast(compute(), dtype).reshape(shape)

    return step


_TENSOR_SCALAR_STEPS = [("op0", "operand0", "scalar0", "reverse0"), ("op1", "operand1", "scalar1", "reverse1")]


def _tensor_scalar_operands(
    ops: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
    rows_of: Callable[[np.ndarray, int], np.ndarray | None],
    nl: int,
) -> list[tuple[str, Any, bool, bool]] | None:
    """A tensor_scalar's operators in order, each as (operator, operand, whether the operand is a per-partition
    vector, reverse): an immediate as its attribute, a vector as `rows_of(vector, nl)`. None when a vector's rows
    are no view `rows_of` gives."""
    used = []
    for op_name, role, scalar_name, reverse_name in _TENSOR_SCALAR_STEPS:
        op = attrs.get(op_name)
        if op is None:
            continue
        vector = ops.get(role)
        scalar: Any = attrs.get(scalar_name, 0.0)
        if vector is not None:
            scalar = rows_of(vector, nl)
            if scalar is None:
                return None
        used.append((op, scalar, vector is not None, bool(attrs.get(reverse_name))))
    return used


def _prepare_tensor_scalar(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.tensor_scalar when its last operator goes through binary_into (fp32 arithmetic throughout), or
    # when binary_into declines it at once (`_tensor_scalar_values`); one that also reduces runs as it is
    if ops.get("accumulate_dst") is not None:
        return None
    src, dst = ops["src"], ops["dst"]
    steps = _TENSOR_SCALAR_STEPS
    tensors = [src] + [ops[role] for _, role, _, _ in steps if ops.get(role) is not None]
    immediates = [attrs.get(name, 0.0) for _, role, name, _ in steps if ops.get(role) is None]
    integer = semantics._integer_domain(engine, tensors, immediates)
    last = attrs.get("op1") if attrs.get("op1") is not None else attrs.get("op0")
    if integer or last is None or semantics._FLOAT_UFUNCS.get(last) is None:
        return _tensor_scalar_values(ops, attrs, integer, nl)
    values = _f32_rows(src, nl)
    used = _tensor_scalar_operands(ops, attrs, _f32_rows, nl)
    if values is None or not used:
        return None
    op, scalar, _, reverse = used[-1]
    ufunc = semantics._FLOAT_UFUNCS.get(op)
    if ufunc is None:
        return None
    last_scalar = alu.to_f32(scalar)  # binary_into widens its operands; an immediate becomes an fp32 0-d array
    if len(used) == 1:
        lhs, rhs = (last_scalar, values) if reverse else (values, last_scalar)
        rows = _into_rows(dst, nl, lhs.shape, rhs.shape)
        return functools.partial(ufunc, lhs, rhs, out=rows) if rows is not None else None
    first_op, first_scalar, _, first_reverse = used[0]
    a, b = (first_scalar, values) if first_reverse else (values, first_scalar)
    intermediate = np.broadcast_shapes(np.shape(a), np.shape(b))
    rows = _into_rows(dst, nl, intermediate, last_scalar.shape)
    if rows is None:
        return None
    to_f32 = alu.to_f32
    first_function = alu._FLOAT_OPS.get(first_op)
    if first_function is None:  # an operator alu.binary computes in integers
        binary = alu.binary

        def first_values() -> np.ndarray:
            return binary(first_op, a, b, False)

    else:
        # alu.binary's fp32 branch without its errstate (the tape's run ignores errors already, which changes
        # warnings only): its operator on the operands widened to fp32, an immediate widened once
        a32, b32 = to_f32(a), to_f32(b)

        def first_values() -> np.ndarray:
            return first_function(a32, b32)

    def step() -> None:
        first = to_f32(first_values())
        if reverse:
            ufunc(last_scalar, first, out=rows)
        else:
            ufunc(first, last_scalar, out=rows)

    return step


def _tensor_scalar_values(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], integer: bool, nl: int
) -> Step | None:
    # semantics.tensor_scalar whose last operator binary_into declines at once (an integer domain, or an operator
    # that is no fp32 ufunc: a comparison, a division, a power): each operator by alu.binary in turn on the rows
    # (views, read as the step runs; a per-partition operand widened to fp32 outside an integer domain), then
    # store(dst, values)
    values = _rows(ops["src"], nl)
    operands = _tensor_scalar_operands(ops, attrs, _rows, nl)
    if values is None or operands is None:
        return None
    # outside an integer domain a per-partition operand is widened to fp32 per run
    used = [(op, scalar, vector and not integer, reverse) for op, scalar, vector, reverse in operands]
    if len(used) == 1 and used[0][0] in _COMPARISONS:
        step = _comparison(ops["dst"], values, used[0], integer, nl)
        if step is not None:
            return step
    binary, to_f32 = alu.binary, alu.to_f32

    def compute() -> np.ndarray:
        current = values
        for op, scalar, widen, reverse in used:
            operand = to_f32(scalar) if widen else scalar
            current = binary(op, operand, current, integer) if reverse else binary(op, current, operand, integer)
        return current

    return _stored(ops["dst"], compute)


_COMPARISONS: dict[str, np.ufunc] = {
    "is_equal": np.equal,
    "not_equal": np.not_equal,
    "is_ge": np.greater_equal,
    "is_gt": np.greater,
    "is_le": np.less_equal,
    "is_lt": np.less,
}
# Operand types whose values NumPy compares exactly against an int64 (no float64 promotion, as uint64's would be)
_EXACT_COMPARED = {np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16)}


def _comparison(
    dst: np.ndarray, values: np.ndarray, used: tuple[str, Any, bool, bool], integer: bool, nl: int
) -> Step | None:
    """A tensor_scalar of one comparison with an immediate as one ufunc into dst's rows in dst's own type.

    alu.binary compares the operands as converted (fp32 outside an integer domain; exact integers in one, the
    immediate converted as that width converts it) and gives 0 or 1 (fp32 or integers), which the store casts to
    dst's type; the ufunc makes the same comparison of the same numbers and casts its bools to dst's type, 0 and 1
    alike. The immediate's conversion happens once, here."""
    op, scalar, _, reverse = used
    if isinstance(scalar, np.ndarray):
        return None  # a per-partition operand: left to the semantics' path
    if integer:
        if values.dtype not in _EXACT_COMPARED:
            return None
        wide = alu.integer_width(values) == 64
        operand = alu._exact_int(scalar) if wide else alu.to_int(scalar)
    else:
        if values.dtype != F32:
            return None  # other types are widened to fp32 first, per run
        operand = alu.to_f32(scalar)
    if dst.dtype.isbuiltin != 1:
        return None  # bf16 and the like: NumPy may not cast bools to them in a ufunc's output
    rows = _into_rows(dst, nl, values.shape, dtype=dst.dtype)
    if rows is None:
        return None
    lhs, rhs = (operand, values) if reverse else (values, operand)
    return functools.partial(_COMPARISONS[op], lhs, rhs, out=rows)


def _prepare_scalar_tensor_tensor(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.scalar_tensor_tensor when its second operator goes through binary_into: both steps fp32 ufuncs
    # on fp32 operands, the first into a scratch array of the step's own (the semantics function's fresh one)
    src, in1, dst, vector = ops["src"], ops["in1"], ops["dst"], ops.get("operand0")
    first_ufunc, ufunc = semantics._FLOAT_UFUNCS.get(attrs["op0"]), semantics._FLOAT_UFUNCS.get(attrs["op1"])
    values, other = _f32_rows(src, nl), _f32_rows(in1, nl)
    if first_ufunc is None or ufunc is None or values is None or other is None:
        return None
    scalar = _f32_rows(vector, nl) if vector is not None else alu.to_f32(attrs.get("scalar0", 0.0))
    if scalar is None:
        return None
    a, b = (scalar, values) if attrs.get("reverse0") else (values, scalar)
    shape = np.broadcast_shapes(a.shape, b.shape)
    rows = _into_rows(dst, nl, shape, other.shape)
    if rows is None:
        return None
    if attrs.get("reverse1"):

        def reversed_step() -> None:
            scratch = _scratch(shape)
            first_ufunc(a, b, out=scratch)
            ufunc(other, scratch, out=rows)

        return reversed_step

    def step() -> None:
        scratch = _scratch(shape)
        first_ufunc(a, b, out=scratch)
        ufunc(scratch, other, out=rows)

    return step


_SCRATCH = threading.local()


def _scratch(shape: tuple[int, ...]) -> np.ndarray:
    """An fp32 array of `shape` for a step's intermediate, one per shape and thread. A step writes it before
    reading it and leaves nothing in it that it needs later, and one thread runs one step at a time, so the steps
    of a thread share it: an array of its own per step kept a program's worth of them resident (a tape holds
    thousands of such steps; 3-d ones over a batch's lanes are MiBs each)."""
    arrays = getattr(_SCRATCH, "arrays", None)
    if arrays is None:
        arrays = _SCRATCH.arrays = {}
    array = arrays.get(shape)
    if array is None:
        array = arrays[shape] = np.empty(shape, F32)
    return array


def _prepare_activation(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.activation on fp32 operands: through activation_into (a one-ufunc function, no accumulate_dst), or
    # through activation_values (`_activation_values_step`)
    src, dst = ops["src"], ops["dst"]
    func = attrs["func"]
    in_place = semantics._IN_PLACE_ACTIVATIONS.get(func)
    x = _f32_rows(src, nl)
    if x is None or func not in alu.ACTIVATIONS:
        return None
    scale_vector, bias = ops.get("scale_vector"), ops.get("bias")
    scale: Any = np.float32(attrs.get("scale", 1.0))
    if scale_vector is not None:
        scale = _f32_rows(scale_vector, nl)
    shift: Any = np.float32(attrs.get("bias_value", 0.0))
    if bias is not None:
        shift = _f32_rows(bias, nl)
    if scale is None or shift is None:
        return None
    if in_place is None or ops.get("accumulate_dst") is not None:
        return _activation_values_step(ops, func, in_place, x, scale, shift)
    rows = _into_rows(dst, nl, x.shape, np.shape(scale), np.shape(shift))
    if rows is None or any(np.may_share_memory(rows, v) for v in (scale_vector, bias) if v is not None):
        return None
    if isinstance(scale, np.float32) and scale == 1:

        def step() -> None:
            np.add(x, shift, out=rows)
            in_place(rows)

        return step

    def scaled_step() -> None:
        np.multiply(x, scale, out=rows)
        np.add(rows, shift, out=rows)
        in_place(rows)

    return scaled_step


def _activation_values_step(
    ops: Mapping[str, np.ndarray],
    func: str,
    in_place: Callable[[np.ndarray], np.ndarray] | None,
    x: np.ndarray,
    scale: Any,
    shift: Any,
) -> Step | None:
    # semantics.activation when activation_into declines (a function of more than one ufunc, or accumulate_dst):
    # y = activation_values(...), a fresh fp32 array of the operands' broadcast shape (the pre-activation, then the
    # function in place on it or alu.activation of it), then store(dst, y) and, with accumulate_dst,
    # store(accumulate_dst, y.sum(axis=-1, dtype=F32)). Here the pre-activation is the thread's scratch array of
    # that shape, computed by the same ufunc calls (activation_into's), so y holds the same bits in the same
    # row-major layout and its sums add the same values in the same order; the stores convert nothing between
    # fp32 arrays.
    dst, accumulate = ops["dst"], ops.get("accumulate_dst")
    if dst.dtype != F32 or (accumulate is not None and accumulate.dtype != F32):
        return None
    shape = np.broadcast_shapes(x.shape, np.shape(scale), np.shape(shift))
    if math.prod(shape) != dst.size or (accumulate is not None and math.prod(shape[:-1]) != accumulate.size):
        return None
    dst_shape = dst.shape
    sums_shape = accumulate.shape if accumulate is not None else ()
    function = alu.ACTIVATIONS[func]
    unit = isinstance(scale, np.float32) and scale == 1

    def step() -> None:
        y = _scratch(shape)
        if unit:
            np.add(x, shift, out=y)
        else:
            np.multiply(x, scale, out=y)
            np.add(y, shift, out=y)
        if in_place is not None:
            in_place(y)
        else:
            y = function(y).astype(F32, copy=False)
        dst[...] = y.reshape(dst_shape)
        if accumulate is not None:
            accumulate[...] = y.sum(axis=-1, dtype=F32).reshape(sums_shape)

    return step


def _prepare_tensor_reduce(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.tensor_reduce on fp32: alu.reduce's reduction of src's last `axes` free dimensions merged (a view
    # here, as src.reshape gives there), negated when asked, stored into an fp32 dst (no conversion)
    src, dst = ops["src"], ops["dst"]
    if src.dtype != F32 or dst.dtype != F32:
        return None
    axes = int(attrs.get("axes", 1))
    free = src.shape[nl + 1 :]
    values = _view(src, (*src.shape[: nl + 1], -1, math.prod(free[len(free) - axes :])))
    if values is None:
        return None
    reduce, axis, negate, shape = alu.REDUCE[attrs["op"]], (nl + 2,), bool(attrs.get("negate")), dst.shape

    def step() -> None:
        result = reduce(values, axis)
        if negate:
            result = -result
        dst[...] = result.reshape(shape)

    return step


def _prepare_nc_matmul(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.nc_matmul through matmul_into's in-place branch, or a transpose by an identity
    stationary, moving, dst = ops["stationary"], ops["moving"], ops["dst"]
    if stationary.dtype != F32 or moving.dtype != F32:
        return None
    lead, k = stationary.shape[:nl], stationary.shape[nl]
    stationary2, moving2 = _view(stationary, (*lead, k, -1)), _view(moving, (*lead, k, -1))
    if stationary2 is None:
        return None
    if moving2 is None:
        # a moving tile whose free dimensions do not merge (a convolution's strided window): the semantics
        # function's reshape copies it into a contiguous [*lanes, K, N] array, the step does the same per run
        if attrs.get("is_transpose"):
            return None
        lhs = np.swapaxes(stationary2, -1, -2)
        rows = semantics.writable_rows(dst, nl)
        if rows is None or rows.shape != (*lhs.shape[:-1], math.prod(moving.shape[nl + 1 :])):
            return None
        return GatheringProduct(lhs, moving, (*lead, k, -1), rows, bool(attrs.get("accumulate")))
    if attrs.get("is_transpose"):
        return _prepare_transpose(ops, attrs, engine, target, nl, stationary2, moving2)
    lhs, rhs = np.swapaxes(stationary2, -1, -2), moving2
    rows = semantics.writable_rows(dst, nl)
    if rows is None or rows.shape != (*lhs.shape[:-1], rhs.shape[-1]):
        return None
    return Product(lhs, rhs, rows, bool(attrs.get("accumulate")))


class Product:
    """A prepared matmul step: rows (=|+=) lhs @ rhs, one BLAS product per lane (a stack of them over lanes).

    A step of its own type so that a tape can tell its products, and their sizes, from its other steps."""

    __slots__ = ("accumulate", "lhs", "macs", "rhs", "rows")

    def __init__(self, lhs: np.ndarray, rhs: np.ndarray, rows: np.ndarray, accumulate: bool) -> None:
        self.lhs, self.rhs, self.rows, self.accumulate = lhs, rhs, rows, accumulate
        self.macs = lhs.shape[-2] * lhs.shape[-1] * rhs.shape[-1]  # multiply-adds of one lane's product

    def __call__(self) -> None:
        if self.accumulate:
            np.add(self.rows, self.lhs @ self.rhs, out=self.rows)  # the same sum as rows + product, stored
        else:
            np.matmul(self.lhs, self.rhs, out=self.rows)  # BLAS writes the product straight into PSUM


class GatheringProduct:
    """A prepared matmul step whose moving operand's free dimensions do not merge (a convolution's strided window):
    the moving tile is reshaped to [*lanes, K, N] on every run (a copy), as the semantics function reshapes it, and
    multiplied as a `Product` multiplies."""

    __slots__ = ("accumulate", "lhs", "macs", "moving", "rows", "shape")

    def __init__(
        self, lhs: np.ndarray, moving: np.ndarray, shape: tuple[int, ...], rows: np.ndarray, accumulate: bool
    ) -> None:
        self.lhs, self.moving, self.shape, self.rows, self.accumulate = lhs, moving, shape, rows, accumulate
        self.macs = lhs.shape[-2] * lhs.shape[-1] * rows.shape[-1]  # multiply-adds of one lane's product

    def __call__(self) -> None:
        rhs = self.moving.reshape(self.shape)
        if self.accumulate:
            np.add(self.rows, self.lhs @ rhs, out=self.rows)
        else:
            np.matmul(self.lhs, rhs, out=self.rows)


@functools.cache
def _identity_bytes(size: int, count: int) -> bytes:
    """The bytes of `count` fp32 identities of `size`: one shared object per shape, as a program holds thousands
    of transpose steps and each would otherwise keep a copy of its own."""
    return np.ascontiguousarray(semantics.identity_matrix(size), dtype=F32).tobytes() * count


def _prepare_transpose(
    ops: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
    engine: Engine,
    target: Target,
    nl: int,
    stationary2: np.ndarray,
    moving2: np.ndarray,
) -> Step | None:
    # semantics.nc_matmul with is_transpose: whether the stationary is an identity is data, tested on every run;
    # when it is, dst = moving^T (equal dtypes: store converts nothing), else the semantics function's product.
    # Over lanes: when every lane's stationary is an identity, else the semantics function, which sorts out lanes
    # that differ.
    dst = ops["dst"]
    rows, columns = stationary2.shape[-2:]
    if not target.matmul_transpose_bit_exact or rows != columns or dst.dtype != moving2.dtype:
        return None
    eye = semantics.identity_matrix(rows)
    probe, count = stationary2, 1
    if nl and all(stride == 0 for stride in stationary2.strides[:nl]):  # one matrix for all lanes: test it once
        probe = stationary2[(0,) * nl]
    elif nl:
        count = int(np.prod(stationary2.shape[:nl]))
    eye_bytes = _identity_bytes(rows, count)
    shape = dst.shape
    function = functools.partial(semantics.nc_matmul, ops, attrs, engine, target, nl)
    transposed = np.swapaxes(moving2, -1, -2)
    # store(dst, moving^T) copies the transpose into a contiguous array, then that into dst; when dst is a view of
    # the transpose's shape, one copy straight into it moves the same bits
    into = _view(dst, transposed.shape)
    if into is not None and np.may_share_memory(into, moving2):
        into = None

    def step() -> None:
        # semantics._identity_lanes of an fp32 matrix, `(stationary == eye).all()`: equal bytes decide it at half
        # the cost (the same bits are the same numbers, and the identity has no NaN); other bytes may still be
        # equal numbers (-0.0 for 0.0), so they take the elementwise test
        if probe.tobytes() == eye_bytes or (probe == eye).all():
            if into is not None:
                np.copyto(into, transposed)
            else:
                dst[...] = np.ascontiguousarray(transposed).reshape(shape)
        else:
            function()

    return step


def _prepare_affine_select(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.affine_select: which elements come from on_true depends on the attributes only, computed once
    dst, on_true = ops["dst"], ops["on_true"]
    values = _rows(on_true, nl) if on_true.dtype == dst.dtype else None
    if values is None:
        return None
    chosen = semantics._COMPARE_ZERO[attrs["cmp"]](semantics.affine_values(dst.shape[nl], attrs))
    chosen.flags.writeable = False
    on_false = semantics._immediate_as(attrs["on_false_value"], dst.dtype)
    shape = dst.shape

    def step() -> None:
        dst[...] = np.where(chosen, values, on_false).reshape(shape)

    return step


def _prepare_memset(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.memset: the value is an immediate, converted once
    dst = ops["dst"]
    return _copy_into(dst, semantics._immediate_as(attrs["value"], dst.dtype))


def _prepare_iota(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target, nl: int
) -> Step | None:
    # semantics.iota: the values depend on the attributes only, computed once
    dst = ops["dst"]
    values = alu.cast(semantics.affine_values(dst.shape[nl], attrs), dst.dtype).reshape(dst.shape[nl:])
    values = np.array(values, copy=True)  # the tape's own: nothing else may write it
    values.flags.writeable = False
    return _copy_into(dst, values)


# Each takes the operands' views (with `nl` leading lane dimensions), the attributes, the engine, the target and
# `nl`, and returns the prepared step or None.
_PREPARERS: dict[str, Callable[..., Step | None]] = {
    "dma_copy": _prepare_dma_copy,
    "tensor_copy": _prepare_tensor_copy,
    "tensor_tensor": _prepare_tensor_tensor,
    "tensor_scalar": _prepare_tensor_scalar,
    "scalar_tensor_tensor": _prepare_scalar_tensor_tensor,
    "activation": _prepare_activation,
    "tensor_reduce": _prepare_tensor_reduce,
    "nc_matmul": _prepare_nc_matmul,
    "memset": _prepare_memset,
    "iota": _prepare_iota,
    "affine_select": _prepare_affine_select,
}
