"""What each instruction computes: one NumPy function per opcode of `runtime.isa.OPCODES`.

Every function takes the operands as NumPy arrays of their access shapes (`[P, F...]` on chip, `[F...]` in HBM)
and their storage dtypes, and writes its results into the destination arrays in place. The simulator passes
strided views of its memories, so a write lands in simulated SBUF/PSUM/HBM; the neuron dialect's reference
interpreter may pass ordinary arrays. Operands are paired element by element in row-major order within each
partition, so a destination may have a different free shape than its sources as long as the counts agree.

Numerics, as the hardware does them (A2: "all arithmetic is done in FP32, with free casting on input and
output"):

* Inputs are widened to fp32 and the arithmetic runs in fp32. Results are narrowed to the destination dtype
  with round to nearest even (ml_dtypes for bf16/fp8, NumPy for f16); fp8 e4m3 overflow gives NaN as in
  ml_dtypes. fp32 to integer truncates toward zero (as C and torch casts do), saturates to the integer range
  and maps NaN to 0; to `i1` it is `!= 0`.
* Exact integers: an instruction on GpSimdE (native 32-bit integer math, A2) whose tensor operands are all of
  integer types and whose immediates are integral computes on integers, wrapping to 32 bits.
* Bit-vector operators (`isa.BITVEC_OPS`) always act on 32-bit integers; float operands are first converted as
  above (truncated). Shifts by less than 0 or more than 31 give 0; `right_shift` is logical (SH: no arithmetic shift).
* Copies between equal dtypes (tensor_copy, dma_copy, select's chosen values, is_transpose) are bit exact.
* Reductions (tensor_reduce, activation's accumulate) sum in fp32; their order is unspecified, as on hardware.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from neuron_mlir.runtime import isa
from neuron_mlir.runtime.hardware import Engine, Target

F32 = np.dtype(np.float32)
_INT64 = np.dtype(np.int64)


# ---- conversions ----------------------------------------------------------------------------------------------


def is_integer_dtype(dtype: np.dtype) -> bool:
    return dtype.kind in "iub"


def to_f32(values: np.ndarray) -> np.ndarray:
    """Widen to fp32 the way the engines' input converters do (integers round to nearest even)."""
    return np.asarray(values).astype(F32, copy=False)


def to_int(values: np.ndarray) -> np.ndarray:
    """Integer values as int64: integers exactly, floats truncated toward zero and saturated to int32."""
    values = np.asarray(values)
    if is_integer_dtype(values.dtype):
        return values.astype(_INT64, copy=False)
    with np.errstate(invalid="ignore"):
        truncated = np.trunc(to_f32(values).astype(np.float64))
        truncated = np.nan_to_num(truncated, nan=0.0, posinf=2**31 - 1, neginf=-(2**31))
    return np.clip(truncated, -(2**31), 2**31 - 1).astype(_INT64)


def wrap32(values: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to 32 bits (GpSimdE's integer lanes)."""
    return ((values + 2**31) & 0xFFFFFFFF) - 2**31


def convert(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`values` (fp32 from the arithmetic, or int64 from integer math) as `dtype`, per the module rules."""
    values = np.asarray(values)
    if values.dtype == dtype:
        return values
    if dtype == np.bool_:
        return values != 0
    if is_integer_dtype(dtype):
        if is_integer_dtype(values.dtype):
            return values.astype(dtype)  # wraps, as integer stores do
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):
            truncated = np.nan_to_num(np.trunc(values.astype(np.float64)), nan=0.0)
        return np.clip(truncated, info.min, info.max).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        if is_integer_dtype(values.dtype):
            values = values.astype(F32)
        return values.astype(dtype)


def store(dst: np.ndarray, values: np.ndarray) -> None:
    """Write `values` (any shape with dst's element count) into dst in row-major order, converting."""
    dst[...] = convert(values, dst.dtype).reshape(dst.shape)


def _rows(array: np.ndarray) -> np.ndarray:
    """An on-chip operand as [P, elements]: the row-major pairing used by elementwise instructions."""
    return array.reshape(array.shape[0], -1)


def _integer_domain(engine: Engine, tensors: list[np.ndarray], immediates: list[object]) -> bool:
    if engine is not Engine.GPSIMD:
        return False
    if not all(is_integer_dtype(t.dtype) for t in tensors):
        return False
    return all(float(v).is_integer() for v in immediates if v is not None)


# ---- elementwise functions ------------------------------------------------------------------------------------

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# Numerical Recipes' Chebyshev fit of erfc(z) = t * exp(-z^2 + poly(t)), t = 1 / (1 + z/2): relative error below
# 1.2e-7 for z >= 0, i.e. within fp32 rounding; below |x| = 0.5 a Taylor series keeps erf's relative accuracy.
_ERFC_COEFFS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in fp32 (NumPy has none; accurate to about one fp32 ulp)."""
    x64 = np.asarray(x, dtype=np.float64)
    z = np.abs(x64)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(t)
    for coefficient in reversed(_ERFC_COEFFS):
        poly = poly * t + coefficient
    with np.errstate(over="ignore", under="ignore"):
        erfc = t * np.exp(-z * z + poly)
    large = np.sign(x64) * (1.0 - erfc)
    x2 = x64 * x64
    series = x64 * (1 + x2 * (-1 / 3 + x2 * (1 / 10 + x2 * (-1 / 42 + x2 * (1 / 216 + x2 * (-1 / 1320))))))
    small = _TWO_OVER_SQRT_PI * series
    return np.where(z < 0.5, small, large).astype(F32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.float32(1) / (np.float32(1) + np.exp(-x))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0), x)


_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))
_HALF = np.float32(0.5)

ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x),
    "reciprocal": lambda x: np.float32(1) / x,
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "gelu": lambda x: _HALF * x * (np.float32(1) + erf(x * np.float32(1 / math.sqrt(2.0)))),
    "gelu_apprx_tanh": lambda x: (
        _HALF * x * (np.float32(1) + np.tanh(_SQRT_2_OVER_PI * (x + np.float32(0.044715) * x * x * x)))
    ),
    "silu": lambda x: x * _sigmoid(x),
    "erf": erf,
    "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "sin": np.sin,
    "arctan": np.arctan,
    "sign": np.sign,
    "abs": np.abs,
    "square": np.square,
}


def _flag(values: np.ndarray) -> np.ndarray:
    return values.astype(F32)


_FLOAT_ALU: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "power": np.power,
    "is_equal": lambda a, b: _flag(a == b),
    "not_equal": lambda a, b: _flag(a != b),
    "is_ge": lambda a, b: _flag(a >= b),
    "is_gt": lambda a, b: _flag(a > b),
    "is_le": lambda a, b: _flag(a <= b),
    "is_lt": lambda a, b: _flag(a < b),
    "logical_and": lambda a, b: _flag((a != 0) & (b != 0)),
    "logical_or": lambda a, b: _flag((a != 0) | (b != 0)),
    "logical_xor": lambda a, b: _flag((a != 0) ^ (b != 0)),
}


def _int_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    result = np.zeros(a.shape, _INT64)
    nonnegative = b >= 0
    # Repeated squaring on wrapped 32-bit values keeps every intermediate inside int64.
    base, exponent = wrap32(a[nonnegative]), b[nonnegative].copy()
    acc = np.ones(base.shape, _INT64)
    while exponent.size and exponent.max() > 0:
        odd = (exponent & 1) == 1
        acc[odd] = wrap32(acc[odd] * base[odd])
        base = wrap32(base * base)
        exponent >>= 1
    result[nonnegative] = acc
    # Negative exponents: only 1 and -1 have integral results.
    negative = ~nonnegative
    result[negative & (a == 1)] = 1
    result[negative & (a == -1)] = np.where(b[negative & (a == -1)] % 2 == 0, 1, -1)
    return result


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    valid = (b >= 0) & (b <= 31)
    return np.where(valid, (a & 0xFFFFFFFF) << np.where(valid, b, 0), 0)


def _shift_right(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    valid = (b >= 0) & (b <= 31)
    return np.where(valid, (a & 0xFFFFFFFF) >> np.where(valid, b, 0), 0)


_INT_ALU: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": lambda a, b: wrap32(a) * wrap32(b),
    "max": np.maximum,
    "min": np.minimum,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "power": _int_power,
    "is_equal": lambda a, b: (a == b).astype(_INT64),
    "not_equal": lambda a, b: (a != b).astype(_INT64),
    "is_ge": lambda a, b: (a >= b).astype(_INT64),
    "is_gt": lambda a, b: (a > b).astype(_INT64),
    "is_le": lambda a, b: (a <= b).astype(_INT64),
    "is_lt": lambda a, b: (a < b).astype(_INT64),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(_INT64),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(_INT64),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(_INT64),
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": _shift_left,
    "right_shift": _shift_right,
}


def alu(op: str, a: Any, b: Any, integer: bool) -> np.ndarray:
    """`a <op> b` in fp32, or on 32-bit integers when `integer` or when `op` is a bit-vector operator."""
    if integer or op in isa.BITVEC_OPS:
        return wrap32(_INT_ALU[op](to_int(a), to_int(b)))
    with np.errstate(all="ignore"):
        return _FLOAT_ALU[op](to_f32(a), to_f32(b))


# ---- instructions ---------------------------------------------------------------------------------------------

Operands = Mapping[str, np.ndarray]
Attrs = Mapping[str, Any]


def _is_identity(matrix: np.ndarray) -> bool:
    rows, cols = matrix.shape
    if rows != cols:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.array_equal(to_f32(matrix), np.eye(rows, dtype=F32)))


def nc_matmul(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    """dst (=|+=) stationary^T @ moving in fp32; with is_transpose, dst = moving^T (see isa.py)."""
    stationary, moving, dst = ops["stationary"], ops["moving"], ops["dst"]
    k = stationary.shape[0]
    stationary2, moving2 = stationary.reshape(k, -1), moving.reshape(k, -1)
    if attrs.get("is_transpose"):
        if target.matmul_transpose_bit_exact and _is_identity(stationary2):
            store(dst, np.ascontiguousarray(moving2.T))
            return
        # A transpose through the array arithmetic (v2, or a stationary that is not an identity).
        with np.errstate(all="ignore"):
            store(dst, to_f32(moving2).T @ to_f32(stationary2))
        return
    with np.errstate(all="ignore"):
        product = to_f32(stationary2).T @ to_f32(moving2)
        if attrs.get("accumulate"):
            product = to_f32(_rows(dst)) + product
    store(dst, product)


def activation(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    src, dst = ops["src"], ops["dst"]
    x = to_f32(_rows(src))
    scale_vector, bias = ops.get("scale_vector"), ops.get("bias")
    scale = to_f32(_rows(scale_vector)) if scale_vector is not None else np.float32(attrs.get("scale", 1.0))
    shift = to_f32(_rows(bias)) if bias is not None else np.float32(attrs.get("bias_value", 0.0))
    with np.errstate(all="ignore"):
        y = ACTIVATIONS[attrs["func"]](x * scale + shift).astype(F32, copy=False)
        store(dst, y)
        accumulate_dst = ops.get("accumulate_dst")
        if accumulate_dst is not None:
            store(accumulate_dst, y.sum(axis=1, dtype=F32))


def tensor_tensor(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    in0, in1, dst = ops["in0"], ops["in1"], ops["dst"]
    integer = _integer_domain(engine, [in0, in1], [])
    store(dst, alu(attrs["op"], _rows(in0), _rows(in1), integer))


def tensor_scalar(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    src, dst = ops["src"], ops["dst"]
    steps = [("op0", "operand0", "scalar0", "reverse0"), ("op1", "operand1", "scalar1", "reverse1")]
    tensors = [src] + [ops[role] for _, role, _, _ in steps if ops.get(role) is not None]
    immediates = [attrs.get(name, 0.0) for _, role, name, _ in steps if ops.get(role) is None]
    integer = _integer_domain(engine, tensors, immediates)
    values: Any = _rows(src)
    for op_name, role, scalar_name, reverse_name in steps:
        op = attrs.get(op_name)
        if op is None:
            continue
        vector = ops.get(role)
        scalar: Any = _rows(vector) if vector is not None else attrs.get(scalar_name, 0.0)
        if not integer and vector is not None:
            scalar = to_f32(scalar)  # per-partition scalars are read as fp32 (ISA)
        a, b = (scalar, values) if attrs.get(reverse_name) else (values, scalar)
        values = alu(op, a, b, integer)
    store(dst, values)


_REDUCERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "add": lambda x: x.sum(axis=-1, dtype=F32),
    "max": lambda x: x.max(axis=-1),
    "min": lambda x: x.min(axis=-1),
    "multiply": lambda x: x.prod(axis=-1, dtype=F32),
    "abs_max": lambda x: np.abs(x).max(axis=-1),
}


def tensor_reduce(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    src, dst = ops["src"], ops["dst"]
    axes = int(attrs.get("axes", 1))
    free = src.shape[1:]
    reduced = math.prod(free[len(free) - axes :])
    x = to_f32(src).reshape(src.shape[0], -1, reduced)
    with np.errstate(all="ignore"):
        result = _REDUCERS[attrs["op"]](x)
        if attrs.get("negate"):
            result = -result
    store(dst, result)


def _same_type_or_converted(values: np.ndarray, dtype: np.dtype, engine: Engine) -> np.ndarray:
    if values.dtype == dtype:
        return values
    if engine is Engine.GPSIMD and is_integer_dtype(values.dtype) and is_integer_dtype(dtype):
        return convert(wrap32(to_int(values)), dtype)
    return convert(to_f32(values), dtype)


def tensor_copy(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    src, dst = ops["src"], ops["dst"]
    dst[...] = _same_type_or_converted(_rows(src), dst.dtype, engine).reshape(dst.shape)


def select(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    dst = ops["dst"]
    chosen = _rows(ops["predicate"]) != 0
    on_true = _same_type_or_converted(_rows(ops["on_true"]), dst.dtype, engine)
    on_false = _same_type_or_converted(_rows(ops["on_false"]), dst.dtype, engine)
    dst[...] = np.where(chosen, on_true, on_false).reshape(dst.shape)


def _immediate_as(value: Any, dtype: np.dtype) -> np.ndarray:
    if isinstance(value, int) and is_integer_dtype(dtype):
        return convert(wrap32(np.array(value, _INT64)) if dtype.itemsize <= 4 else np.array(value), dtype)
    return convert(np.array(value, F32), dtype)


def memset(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    dst = ops["dst"]
    dst[...] = _immediate_as(attrs["value"], dst.dtype)


def affine_values(partitions: int, attrs: Attrs) -> np.ndarray:
    """`base + p * channel_multiplier + sum(i_d * step_d)` as int64 [P, elements] (iota, affine_select)."""
    free = np.zeros((1,), _INT64)
    for step, num in attrs["pattern"]:
        free = (free[:, None] + int(step) * np.arange(int(num), dtype=_INT64)[None, :]).reshape(-1)
    lanes = int(attrs.get("channel_multiplier", 0)) * np.arange(partitions, dtype=_INT64)
    return wrap32(int(attrs.get("base", 0)) + lanes[:, None] + free[None, :])


def iota(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    dst = ops["dst"]
    store(dst, affine_values(dst.shape[0], attrs))


_COMPARE_ZERO: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "is_equal": lambda v: v == 0,
    "not_equal": lambda v: v != 0,
    "is_ge": lambda v: v >= 0,
    "is_gt": lambda v: v > 0,
    "is_le": lambda v: v <= 0,
    "is_lt": lambda v: v < 0,
}


def affine_select(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    dst = ops["dst"]
    chosen = _COMPARE_ZERO[attrs["cmp"]](affine_values(dst.shape[0], attrs))
    on_true = _same_type_or_converted(_rows(ops["on_true"]), dst.dtype, engine)
    on_false = _immediate_as(attrs["on_false_value"], dst.dtype)
    dst[...] = np.where(chosen, on_true, on_false).reshape(dst.shape)


def dma_copy(ops: Operands, attrs: Attrs, engine: Engine, target: Target) -> None:
    src, dst = ops["src"], ops["dst"]
    if src.dtype == dst.dtype:
        dst[...] = src.reshape(dst.shape)
    else:
        store(dst, to_f32(src))


SEMANTICS: dict[str, Callable[[Operands, Attrs, Engine, Target], None]] = {
    "nc_matmul": nc_matmul,
    "activation": activation,
    "tensor_tensor": tensor_tensor,
    "tensor_scalar": tensor_scalar,
    "tensor_reduce": tensor_reduce,
    "tensor_copy": tensor_copy,
    "select": select,
    "memset": memset,
    "iota": iota,
    "affine_select": affine_select,
    "dma_copy": dma_copy,
}


def with_defaults(opcode: str, attrs: Attrs) -> dict[str, Any]:
    """`attrs` completed with the opcode's defaults from `isa.OPCODES`."""
    spec = isa.OPCODES[opcode]
    full = {name: value for name, value in spec.attrs.items() if value is not isa.REQUIRED}
    full.update(attrs)
    return full


def execute(opcode: str, engine: Engine, ops: Operands, attrs: Attrs, target: Target) -> None:
    """Run one instruction on NumPy operands (see the module docstring); attributes default per isa.py.

    Register-valued attributes must already be resolved to their values.
    """
    SEMANTICS[opcode](ops, with_defaults(opcode, attrs), engine, target)
