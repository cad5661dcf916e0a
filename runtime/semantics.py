"""What each instruction computes: one NumPy function per opcode, each the `semantics` of its `runtime.isa` record.

Every function takes the operands as NumPy arrays of their access shapes (`[P, F...]` on chip, `[F...]` in HBM)
and their storage dtypes, and writes its results into the destination arrays in place. The simulator passes
strided views of its memories, so a write lands in simulated SBUF/PSUM/HBM; the neuron dialect's reference
interpreter may pass ordinary arrays. Operands are paired element by element in row-major order within each
partition, so a destination may have a different free shape than its sources as long as the counts agree.

**Lanes.** Every function also runs many independent instances in one call: with `nl` > 0 each operand has `nl`
leading lane dimensions (`[*lanes, P, F...]` on chip, `[*lanes, F...]` in HBM), and the function computes, for
every lane, bit for bit what it computes for that lane's operands alone (`nl` = 0). The simulator's loop
vectoriser (`runtime.vectorize`) runs the iterations of a loop of independent iterations this way. It holds
because the lane dimensions are the outermost: elementwise NumPy arithmetic gives an element the same bits
wherever it sits in an array, and reductions and `matmul` keep each lane's inner loops as they are. An operand
that is the same for every lane may have lane strides of 0 (a broadcast view); destinations are distinct per
lane. What depends on a lane's data and cannot share one call (an identity test, an indirect DMA's rows) runs
lane by lane (`lanewise`).

Numerics are `runtime.alu`'s (shared with the tile dialect's reference semantics): fp32 arithmetic, results
narrowed to the destination dtype with round to nearest even, float-to-integer truncating and saturating. On
top of that, per instruction:

* Exact integers: an instruction on GpSimdE (native 32-bit integer math [nki-arch-trn1]) whose tensor operands
  are all of integer types and whose immediates are integral computes on integers, wrapping to 32 bits (64 bits
  when an operand is int64: software 64-bit lanes).
* Copies between equal dtypes (tensor_copy, dma_copy, dma_transpose, select's chosen values, is_transpose on v3+)
  are bit exact.
* Reductions (tensor_reduce, activation's accumulate) sum in fp32; their order is unspecified, as on hardware.
* nc_matmul: products and sums in fp32 (PSUM accumulation is fp32), whatever the input dtypes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from neuron_mlir.runtime import alu, collectives
from neuron_mlir.runtime.hardware import Engine, Target
from neuron_mlir.runtime.races import SimulationError

F32 = alu.F32
_INT64 = np.dtype(np.int64)


# ---- helpers -----------------------------------------------------------------------------------------------


def store(dst: np.ndarray, values: np.ndarray) -> None:
    """Write `values` (any shape with dst's element count) into dst in row-major order, converting."""
    dst[...] = alu.cast(values, dst.dtype).reshape(dst.shape)


def _rows(array: np.ndarray, nl: int) -> np.ndarray:
    """An on-chip operand as [*lanes, P, elements]: the row-major pairing used by elementwise instructions."""
    return array.reshape((*array.shape[: nl + 1], -1))


def _integer_domain(engine: Engine, tensors: list[np.ndarray], immediates: list[float | None]) -> bool:
    if engine is not Engine.GPSIMD:
        return False
    if not all(alu.is_integer_dtype(t.dtype) for t in tensors):
        return False
    return all(float(v).is_integer() for v in immediates if v is not None)


# ---- instructions ------------------------------------------------------------------------------------------

Operands = Mapping[str, np.ndarray]
Attrs = Mapping[str, Any]


_EYES: dict[int, np.ndarray] = {}


def identity_matrix(size: int) -> np.ndarray:
    """The fp32 identity of `size` (shared, read-only)."""
    eye = _EYES.get(size)
    if eye is None:
        eye = np.eye(size, dtype=F32)
        eye.flags.writeable = False
        _EYES[size] = eye
    return eye


def _identity_lanes(matrix: np.ndarray, nl: int) -> np.ndarray:
    """Per lane, whether the [*lanes, K, M] matrix is the identity (a bool array of the lane shape)."""
    rows, cols = matrix.shape[-2:]
    lanes = matrix.shape[:nl]
    if rows != cols:
        return np.zeros(lanes, bool)
    if nl and all(stride == 0 for stride in matrix.strides[:nl]):  # the same matrix in every lane: test it once
        return np.full(lanes, _identity_lanes(matrix[(0,) * nl], 0))
    with np.errstate(invalid="ignore"):
        return (alu.to_f32(matrix) == identity_matrix(rows)).all(axis=(-2, -1))


def writable_rows(dst: np.ndarray, nl: int = 0, dtype: np.dtype = F32) -> np.ndarray | None:
    """`dst` as [*lanes, P, elements] of `dtype` (fp32 unless given) sharing its memory, or None.

    Only when no copy is needed, each row is contiguous and no two elements share bytes: then computing a
    result straight into it gives the same bits as computing it into a fresh array and storing that.
    """
    if dst.dtype != dtype:
        return None
    rows = dst.view()
    shape: tuple[int, ...] = (*dst.shape[: nl + 1], -1)
    try:
        rows.shape = shape  # setting the shape, unlike reshape, never copies: it raises instead
    except AttributeError:
        return None
    itemsize = dst.dtype.itemsize
    if rows.shape[-1] > 1 and rows.strides[-1] != itemsize:
        return None
    span = rows.shape[-1] * itemsize
    for extent, stride in sorted(zip(rows.shape[:-1], rows.strides[:-1], strict=True), key=lambda d: abs(d[1])):
        if extent > 1:
            if abs(stride) < span:
                return None
            span += abs(stride) * (extent - 1)
    return rows


def matmul_into(dst: np.ndarray, stationary2: np.ndarray, moving2: np.ndarray, accumulate: bool, nl: int) -> None:
    """dst (=|+=) stationary2^T @ moving2 in fp32 ([*lanes, K, M] and [*lanes, K, N] operands)."""
    with np.errstate(all="ignore"):
        lhs = np.swapaxes(alu.to_f32(stationary2), -1, -2)
        rhs = alu.to_f32(moving2)
        rows = writable_rows(dst, nl)
        shape = (*lhs.shape[:-1], rhs.shape[-1])
        if rows is not None and rows.shape == shape:
            if accumulate:
                np.add(rows, lhs @ rhs, out=rows)  # the same sum as rows + product, stored
            else:
                np.matmul(lhs, rhs, out=rows)  # BLAS writes the product straight into PSUM
            return
        product = lhs @ rhs
        if accumulate:
            product = alu.to_f32(dst.reshape((*dst.shape[: nl + 1], -1))) + product
    store(dst, product)


def nc_matmul(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    """dst (=|+=) stationary^T @ moving in fp32; with is_transpose, dst = moving^T (see isa.py)."""
    stationary, moving, dst = ops["stationary"], ops["moving"], ops["dst"]
    lead = stationary.shape[:nl]
    k = stationary.shape[nl]
    stationary2, moving2 = stationary.reshape((*lead, k, -1)), moving.reshape((*lead, k, -1))
    if attrs.get("is_transpose"):
        if target.matmul_transpose_bit_exact:
            identity = _identity_lanes(stationary2, nl)
            if identity.all():
                store(dst, np.ascontiguousarray(np.swapaxes(moving2, -1, -2)))
                return
            if identity.any():  # some lanes copy, the others multiply
                lanewise(nc_matmul, ops, attrs, engine, target, nl)
                return
        # A transpose through the array arithmetic (v2, or a stationary that is not an identity).
        with np.errstate(all="ignore"):
            store(dst, np.swapaxes(alu.to_f32(moving2), -1, -2) @ alu.to_f32(stationary2))
        return
    matmul_into(dst, stationary2, moving2, bool(attrs.get("accumulate")), nl)


# Activation functions that are one NumPy ufunc, applied in place to the fresh pre-activation array.
_IN_PLACE_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "exp": lambda x: np.exp(x, out=x),
    "log": lambda x: np.log(x, out=x),
    "sqrt": lambda x: np.sqrt(x, out=x),
    "relu": lambda x: np.maximum(x, np.float32(0), out=x),
    "tanh": lambda x: np.tanh(x, out=x),
    "sin": lambda x: np.sin(x, out=x),
    "arctan": lambda x: np.arctan(x, out=x),
    "sign": lambda x: np.sign(x, out=x),
    "abs": lambda x: np.abs(x, out=x),
    "square": lambda x: np.square(x, out=x),
}


def activation_values(func: str, x: np.ndarray, scale: Any, shift: Any, alpha: float = 0.0) -> np.ndarray:
    """`func(x * scale + shift)` in fp32, for fp32 `x` and fp32 (or fp32-array) `scale` and `shift`.

    A scale of exactly 1 skips the multiply: `x * 1 + shift` and `x + shift` agree bit for bit (the add
    quiets a signalling NaN either way, and -0 * 1 is -0). Single-ufunc functions then run in place on the
    fresh array `x + shift`; the values are those of `alu.activation`.
    """
    with np.errstate(all="ignore"):
        if isinstance(scale, np.float32) and scale == 1:
            pre = x + shift
        else:
            pre = x * scale + shift
        in_place = _IN_PLACE_ACTIVATIONS.get(func)
        if in_place is not None and isinstance(pre, np.ndarray) and pre.dtype == F32:
            return in_place(pre)
    return alu.activation(func, pre, alpha)


def activation_into(
    dst: np.ndarray, func: str, x: np.ndarray, scale: Any, shift: Any, vectors: list[np.ndarray], nl: int
) -> bool:
    """`activation_values` computed straight into dst when that gives the same bits; False if it cannot.

    Its steps read `scale` and `shift` after writing dst, so neither may share memory with dst (x may: the
    first step is one ufunc call, which NumPy evaluates as if its operands did not overlap)."""
    in_place = _IN_PLACE_ACTIVATIONS.get(func)
    if in_place is None:
        return False
    rows = writable_rows(dst, nl)
    if rows is None or rows.shape != np.broadcast_shapes(x.shape, np.shape(scale), np.shape(shift)):
        return False
    if any(np.may_share_memory(rows, vector) for vector in vectors):
        return False
    with np.errstate(all="ignore"):
        if isinstance(scale, np.float32) and scale == 1:
            np.add(x, shift, out=rows)
        else:
            np.multiply(x, scale, out=rows)
            np.add(rows, shift, out=rows)
        in_place(rows)
    return True


def activation(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    src, dst = ops["src"], ops["dst"]
    x = alu.to_f32(_rows(src, nl))
    scale_vector, bias = ops.get("scale_vector"), ops.get("bias")
    scale = alu.to_f32(_rows(scale_vector, nl)) if scale_vector is not None else np.float32(attrs.get("scale", 1.0))
    shift = alu.to_f32(_rows(bias, nl)) if bias is not None else np.float32(attrs.get("bias_value", 0.0))
    accumulate_dst = ops.get("accumulate_dst")
    vectors = [v for v in (scale_vector, bias) if v is not None]
    if accumulate_dst is None and activation_into(dst, attrs["func"], x, scale, shift, vectors, nl):
        return
    with np.errstate(all="ignore"):
        y = activation_values(attrs["func"], x, scale, shift, attrs.get("alpha", 0.0))
        store(dst, y)
        if accumulate_dst is not None:
            store(accumulate_dst, y.sum(axis=-1, dtype=F32))


# ALU operators that are one NumPy ufunc on fp32 operands (alu's float operators), for results computed in place.
_FLOAT_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}


def binary_into(dst: np.ndarray, op: str, lhs: Any, rhs: Any, integer: bool, nl: int) -> bool:
    """`store(dst, alu.binary(op, lhs, rhs, integer))` as one ufunc call writing dst, when that is the same
    (fp32 operator, fp32 destination viewable as rows; NumPy evaluates one call as if nothing overlapped)."""
    ufunc = _FLOAT_UFUNCS.get(op)
    if ufunc is None or integer:
        return False
    rows = writable_rows(dst, nl)
    if rows is None:
        return False
    lhs, rhs = alu.to_f32(lhs), alu.to_f32(rhs)
    if rows.shape != np.broadcast_shapes(lhs.shape, rhs.shape):
        return False
    with np.errstate(all="ignore"):
        ufunc(lhs, rhs, out=rows)
    return True


def tensor_tensor(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    in0, in1, dst = ops["in0"], ops["in1"], ops["dst"]
    integer = _integer_domain(engine, [in0, in1], [])
    lhs, rhs = _rows(in0, nl), _rows(in1, nl)
    if binary_into(dst, attrs["op"], lhs, rhs, integer, nl):
        return
    store(dst, alu.binary(attrs["op"], lhs, rhs, integer))


def tensor_scalar(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    src, dst = ops["src"], ops["dst"]
    steps = [("op0", "operand0", "scalar0", "reverse0"), ("op1", "operand1", "scalar1", "reverse1")]
    tensors = [src] + [ops[role] for _, role, _, _ in steps if ops.get(role) is not None]
    immediates = [attrs.get(name, 0.0) for _, role, name, _ in steps if ops.get(role) is None]
    integer = _integer_domain(engine, tensors, immediates)
    accumulate_dst = ops.get("accumulate_dst")
    values: Any = _rows(src, nl)
    last = "op1" if attrs.get("op1") is not None else "op0"
    for op_name, role, scalar_name, reverse_name in steps:
        op = attrs.get(op_name)
        if op is None:
            continue
        vector = ops.get(role)
        scalar: Any = _rows(vector, nl) if vector is not None else attrs.get(scalar_name, 0.0)
        if not integer and vector is not None:
            scalar = alu.to_f32(scalar)  # per-partition scalars are read as fp32 [nki-isa]
        a, b = (scalar, values) if attrs.get(reverse_name) else (values, scalar)
        if op_name == last and accumulate_dst is None and binary_into(dst, op, a, b, integer, nl):
            return
        values = alu.binary(op, a, b, integer)
    store(dst, values)
    if accumulate_dst is not None:
        store(accumulate_dst, free_axes_sum(dst, nl))


def free_axes_sum(tile: np.ndarray, nl: int = 0) -> np.ndarray:
    """The [P, 1] fp32 sums of `tile`'s values (as stored, in its dtype) along all its free axes, each summed as
    tensor_reduce sums them: what an instruction's `accumulate_dst` receives beside its dst."""
    rows = tile.reshape((*tile.shape[: nl + 1], 1, -1))
    return alu.reduce("add", alu.to_f32(rows), (nl + 2,))


def scalar_tensor_tensor(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    """dst = (src <op0> s0) <op1> in1 in fp32, rounded once to dst's type (see isa.py)."""
    src, in1, dst, vector = ops["src"], ops["in1"], ops["dst"], ops.get("operand0")
    scalar: Any = alu.to_f32(_rows(vector, nl)) if vector is not None else attrs.get("scalar0", 0.0)
    values: Any = _rows(src, nl)
    a, b = (scalar, values) if attrs.get("reverse0") else (values, scalar)
    values = alu.binary(attrs["op0"], a, b, False)
    a, b = (_rows(in1, nl), values) if attrs.get("reverse1") else (values, _rows(in1, nl))
    if binary_into(dst, attrs["op1"], a, b, False, nl):
        return
    store(dst, alu.binary(attrs["op1"], a, b, False))


def tensor_reduce(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    src, dst = ops["src"], ops["dst"]
    axes = int(attrs.get("axes", 1))
    free = src.shape[nl + 1 :]
    reduced = math.prod(free[len(free) - axes :])
    result = alu.reduce(attrs["op"], src.reshape((*src.shape[: nl + 1], -1, reduced)), (nl + 2,))
    if attrs.get("negate"):
        result = -result
    store(dst, result)


def _same_type_or_converted(values: np.ndarray, dtype: np.dtype, engine: Engine) -> np.ndarray:
    if values.dtype == dtype:
        return values
    if engine is Engine.GPSIMD and alu.is_integer_dtype(values.dtype) and alu.is_integer_dtype(dtype):
        if alu.integer_width(values, np.zeros(0, dtype)) == 64:  # 64-bit software lanes: exact, then narrowed
            return alu.cast(alu.to_int(values), dtype)
        return alu.cast(alu.wrap32(alu.to_int(values)), dtype)
    return alu.cast(alu.to_f32(values), dtype)


def tensor_copy(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    src, dst = ops["src"], ops["dst"]
    dst[...] = _same_type_or_converted(_rows(src, nl), dst.dtype, engine).reshape(dst.shape)


def select(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    dst = ops["dst"]
    chosen = _rows(ops["predicate"], nl) != 0
    on_true = _same_type_or_converted(_rows(ops["on_true"], nl), dst.dtype, engine)
    on_false = _same_type_or_converted(_rows(ops["on_false"], nl), dst.dtype, engine)
    dst[...] = np.where(chosen, on_true, on_false).reshape(dst.shape)


def _immediate_as(value: Any, dtype: np.dtype) -> np.ndarray:
    if isinstance(value, float) and value.is_integer() and alu.is_integer_dtype(dtype) and dtype.itemsize == 8:
        value = int(value)  # a 64-bit fill takes integral values exactly (up to 2^53 as a float immediate)
    if isinstance(value, int) and alu.is_integer_dtype(dtype):
        return alu.cast(alu.wrap32(np.array(value, _INT64)) if dtype.itemsize <= 4 else np.array(value), dtype)
    return alu.cast(np.array(value, F32), dtype)


def memset(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    dst = ops["dst"]
    dst[...] = _immediate_as(attrs["value"], dst.dtype)


def affine_values(partitions: int, attrs: Attrs) -> np.ndarray:
    """`base + p * channel_multiplier + sum(i_d * step_d)` as int64 [P, elements] (iota, affine_select)."""
    free = np.zeros((1,), _INT64)
    for step, num in attrs["pattern"]:
        free = (free[:, None] + int(step) * np.arange(int(num), dtype=_INT64)[None, :]).reshape(-1)
    per_partition = int(attrs.get("channel_multiplier", 0)) * np.arange(partitions, dtype=_INT64)
    return alu.wrap32(int(attrs.get("base", 0)) + per_partition[:, None] + free[None, :])


def iota(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    dst = ops["dst"]
    values = alu.cast(affine_values(dst.shape[nl], attrs), dst.dtype)
    dst[...] = values.reshape(dst.shape[nl:])  # the same values in every lane


_COMPARE_ZERO: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "is_equal": lambda v: v == 0,
    "not_equal": lambda v: v != 0,
    "is_ge": lambda v: v >= 0,
    "is_gt": lambda v: v > 0,
    "is_le": lambda v: v <= 0,
    "is_lt": lambda v: v < 0,
}


def affine_select(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    dst = ops["dst"]
    chosen = _COMPARE_ZERO[attrs["cmp"]](affine_values(dst.shape[nl], attrs))  # the same in every lane
    on_true = _same_type_or_converted(_rows(ops["on_true"], nl), dst.dtype, engine)
    on_false = _immediate_as(attrs["on_false_value"], dst.dtype)
    dst[...] = np.where(chosen, on_true, on_false).reshape(dst.shape)


def gpsimd_kernel(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    """dst = kernel(in0, in1); in1 may be a [P, 1] column (see isa.GPSIMD_KERNELS)."""
    in0, dst, in1 = ops["in0"], ops["dst"], ops.get("in1")
    tensors = [in0] if in1 is None else [in0, in1]
    integer = all(alu.is_integer_dtype(t.dtype) for t in [*tensors, dst])
    second = _rows(in1, nl) if in1 is not None else np.zeros((1, 1), np.int32)
    store(dst, alu.gpsimd_kernel(attrs["kernel"], _rows(in0, nl), second, integer))


def dma_copy(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    src, dst = ops["src"], ops["dst"]
    if attrs.get("indirect"):
        if nl:  # the rows an instance moves are data: lane by lane, in order
            lanewise(dma_copy, ops, attrs, engine, target, nl)
        else:
            _dma_indirect(src, dst, ops["offsets"], attrs)
        return
    if src.dtype == dst.dtype:
        dst[...] = src.reshape(dst.shape)
    else:
        store(dst, alu.to_f32(src))


def dma_transpose(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    """dst[c, r] = src[r, c]: src's elements in row-major order as [R, C], dst [C, R...] (see isa.py)."""
    src, dst = ops["src"], ops["dst"]
    lanes = dst.shape[:nl]
    columns = dst.shape[nl]
    matrix = src.reshape((*lanes, -1, columns))
    dst[...] = np.swapaxes(matrix, -1, -2).reshape(dst.shape)


def collective(kind: str, ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int = 0) -> None:
    """A collective (`runtime.collectives`): src's elements in row-major order go to the other ranks of the
    caller's replica group through the injected transport; dst receives the result in row-major order."""
    if nl:  # each instance is one exchange with the other ranks, in order
        lanewise(functools.partial(collective, kind), ops, attrs, engine, target, nl)
        return
    src, dst = ops["src"], ops["dst"]
    flat = np.ascontiguousarray(src).reshape(-1)
    splits = (tuple(attrs.get("input_splits") or ()), tuple(attrs.get("output_splits") or ()))
    result = collectives.execute(
        kind, flat, attrs["replica_groups"], attrs.get("reduce", "sum"), int(attrs.get("root", 0)), splits
    )
    dst[...] = result.reshape(dst.shape)


def _dma_indirect(src: np.ndarray, dst: np.ndarray, offsets: np.ndarray, attrs: Attrs) -> None:
    """Gather (indirect src) or scatter (indirect dst) of rows chosen by `offsets` (see isa.py's dma_copy)."""
    table = src if attrs["indirect"] == "src" else dst
    bound = table.shape[0]
    rows = offsets.reshape(-1).astype(np.int64)
    bad = np.flatnonzero((rows < 0) | (rows >= bound))
    if bad.size:
        first = int(bad[0])
        per_partition = max(1, rows.size // max(1, offsets.shape[0]))
        raise SimulationError(
            f"dma_copy: indirect offset {int(rows[first])} at partition {first // per_partition} is outside "
            f"[0, {bound})"
        )
    row_shape = table.shape[1:]
    if attrs["indirect"] == "src":
        store(dst, table[rows] if src.dtype == dst.dtype else alu.to_f32(table[rows]))
        return
    values = src.reshape(rows.size, *row_shape)
    if attrs.get("accumulate"):
        total = alu.to_f32(table[...])
        np.add.at(total, rows, alu.to_f32(values))
        store(table, total)
        return
    for index, row in enumerate(rows):  # in order: the last duplicate wins, as the DMA writes them
        table[row] = alu.cast(values[index] if values.dtype == table.dtype else alu.to_f32(values[index]), table.dtype)


def lanewise(
    function: Callable[..., None], ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int
) -> None:
    """Run the semantics `function` once per lane of `nl` lane dimensions (see the module docstring).

    An attribute may map to an array of the lane shape holding each lane's value (a register that differs
    between lanes)."""
    lanes = next(iter(ops.values())).shape[:nl]
    for lane in np.ndindex(*lanes):
        lane_attrs = {
            name: (value[lane].item() if isinstance(value, np.ndarray) else value) for name, value in attrs.items()
        }
        function({role: array[lane] for role, array in ops.items()}, lane_attrs, engine, target)
