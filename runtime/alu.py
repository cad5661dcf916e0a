"""The engines' arithmetic: ALU operators, activation functions, reductions and dtype conversion, in NumPy.

One definition serves the simulator's instruction semantics (`runtime.semantics`) and the tile dialect's
reference semantics, so "what `add` means" is written once. The rules, as the hardware's engines apply them
(all arithmetic in fp32, with free casting on input and output [nki-arch-trn1]):

* Arithmetic runs in fp32: inputs are widened to fp32 (integers rounding to nearest even) and results narrowed
  by `cast` with round to nearest even (ml_dtypes for bf16/fp8, NumPy for f16; fp8 e4m3 overflow gives NaN).
* `cast` from float to an integer type truncates toward zero (as C and torch casts do), saturates, and maps NaN
  to 0; to bool it is `!= 0`; between integer types it wraps.
* Integer mode (`binary(..., integer=True)`, GpSimdE's native 32-bit integer math): exact, wrapping to 32 bits;
  with a 64-bit (int64) operand exact in 64 bits, as GpSimdE's cores run 64-bit integers in software (pairs of
  32-bit lanes, `gpsimd_int64_cycles_factor` times the cost).
* Bit-vector operators (`isa.BITVEC_OPS`) always act on 32-bit integers, float operands first cast as above.
  Shifts by less than 0 or more than 31 give 0; `right_shift` is logical (there is no arithmetic shift right,
  [nki-shared]).
* Comparisons and logical operators give 1 / 0. NaN propagates through max/min/relu, as in torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

F32 = np.dtype(np.float32)
_INT64 = np.dtype(np.int64)


# ---- conversions -------------------------------------------------------------------------------------------


def is_integer_dtype(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind in "iub"


def to_f32(values: Any) -> np.ndarray:
    """Widen to fp32 the way the engines' input converters do."""
    return np.asarray(values).astype(F32, copy=False)


def to_int(values: Any) -> np.ndarray:
    """Integer values as int64: integers exactly, floats truncated toward zero and saturated to int32."""
    values = np.asarray(values)
    if is_integer_dtype(values.dtype):
        return values.astype(_INT64, copy=False)
    with np.errstate(invalid="ignore"):
        truncated = np.trunc(to_f32(values).astype(np.float64))
        truncated = np.nan_to_num(truncated, nan=0.0, posinf=2**31 - 1, neginf=-(2**31))
    return np.clip(truncated, -(2**31), 2**31 - 1).astype(_INT64)


def wrap32(values: Any) -> np.ndarray:
    """Two's-complement wrap of integer values to 32 bits (GpSimdE's integer lanes)."""
    return ((np.asarray(values, dtype=_INT64) + 2**31) & 0xFFFFFFFF) - 2**31


def cast(values: Any, dtype: np.dtype) -> np.ndarray:
    """Convert to `dtype` as an engine's output converter does (see the module docstring)."""
    values = np.asarray(values)
    dtype = np.dtype(dtype)
    if values.dtype == dtype:
        return values
    if dtype == np.bool_:
        return values != 0
    if is_integer_dtype(dtype):
        if is_integer_dtype(values.dtype):
            return values.astype(dtype)
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):
            truncated = np.nan_to_num(np.trunc(values.astype(np.float64)), nan=0.0)
        return np.clip(truncated, info.min, info.max).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        if is_integer_dtype(values.dtype):
            values = values.astype(F32)
        return values.astype(dtype)


def uninitialised(count: int, dtype: np.dtype) -> np.ndarray:
    """A fresh buffer of `count` elements, all bytes 0xFF: floats read as NaN, integers as -1 (or max)."""
    return np.full(count * np.dtype(dtype).itemsize, 0xFF, dtype=np.uint8).view(dtype)


# ---- activation functions ----------------------------------------------------------------------------------

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


# erf runs over chunks of this many elements, so that its float64 temporaries (five of eight bytes per element)
# stay in a core's cache and are made once per call.
_ERF_CHUNK = 8192


def erf(x: Any) -> np.ndarray:
    """The error function in fp32 (NumPy has none; accurate to about one fp32 ulp).

    Evaluated in float64, chunk by chunk in five buffers: a fresh temporary per operation would make each call
    fault in and zero a dozen new arrays of eight bytes per element, and stream them through memory. Each
    operation is the one the formula names, with the same operands in the same order, so the bits are those of
    the formula written out over the whole array at once.
    """
    flat = np.ravel(np.asarray(x))  # may be the caller's array: only read
    result = np.empty(flat.size, F32)
    buffers = [np.empty(min(flat.size, _ERF_CHUNK), np.float64) for _ in range(5)]
    for start in range(0, flat.size, _ERF_CHUNK):
        stop = min(start + _ERF_CHUNK, flat.size)
        _erf_chunk(flat[start:stop], result[start:stop], *(buffer[: stop - start] for buffer in buffers))
    return result.reshape(np.shape(x))


def _erf_chunk(
    x: np.ndarray, out: np.ndarray, x64: np.ndarray, z: np.ndarray, t: np.ndarray, poly: np.ndarray, e: np.ndarray
) -> None:
    """erf of the 1-d `x` into the fp32 `out`, in float64 buffers of its size."""
    np.copyto(x64, x, casting="unsafe")  # as np.asarray(x, dtype=np.float64) converts
    np.abs(x64, out=z)
    np.multiply(0.5, z, out=t)
    np.add(1.0, t, out=t)
    np.divide(1.0, t, out=t)  # t = 1 / (1 + z/2)
    poly.fill(0.0)
    for coefficient in reversed(_ERFC_COEFFS):
        np.multiply(poly, t, out=poly)
        np.add(poly, coefficient, out=poly)
    np.negative(z, out=e)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        np.multiply(e, z, out=e)
        np.add(e, poly, out=e)
        np.exp(e, out=e)
        np.multiply(t, e, out=e)  # erfc(z) = t * exp(-z^2 + poly)
    np.subtract(1.0, e, out=e)
    np.multiply(np.sign(x64, out=t), e, out=e)  # sign(x) * (1 - erfc(|x|)), for |x| >= 0.5
    x2 = np.multiply(x64, x64, out=poly)
    series = np.multiply(x2, -1 / 1320, out=z)
    for coefficient in (1 / 216, -1 / 42, 1 / 10, -1 / 3):
        np.add(coefficient, series, out=series)
        np.multiply(x2, series, out=series)
    np.add(1, series, out=series)
    np.multiply(x64, series, out=series)  # x (1 - x^2/3 + x^4/10 - ...), erf's Taylor series over 2/sqrt(pi)
    np.multiply(_TWO_OVER_SQRT_PI, series, out=series)
    small = np.less(np.abs(x64, out=t), 0.5)
    np.copyto(out, e, casting="unsafe")  # rounded to fp32 as astype rounds
    np.copyto(out, series, where=small, casting="unsafe")


_ONE = np.float32(1)
_HALF = np.float32(0.5)
_SQRT_HALF = np.float32(1 / math.sqrt(2.0))
_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return _ONE / (_ONE + np.exp(-x))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0), x)


_INV_SQRT_2PI = np.float32(1 / math.sqrt(2.0 * math.pi))
_GELU_CUBIC = np.float32(0.044715)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as PyTorch's CPU kernel
    defines it: the cube is the product `x * x * x` (NumPy's `x**3` calls `powf`, seventy times the cost), and
    the other operations are its own, in its order, each rounded to fp32."""
    shape = np.shape(x)
    x = np.atleast_1d(x)
    inner = np.multiply(x, x)
    np.multiply(inner, x, out=inner)
    np.multiply(_GELU_CUBIC, inner, out=inner)
    np.add(x, inner, out=inner)
    np.multiply(_SQRT_2_OVER_PI, inner, out=inner)
    np.tanh(inner, out=inner)
    np.add(_ONE, inner, out=inner)
    half = np.multiply(_HALF, x)
    return np.multiply(half, inner, out=half).reshape(shape)


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx of x * Phi(x): Phi(x) + x * phi(x), Phi and phi the standard normal's distribution and density."""
    return _HALF * (_ONE + erf(x * _SQRT_HALF)) + x * _INV_SQRT_2PI * np.exp(-_HALF * x * x)


def _silu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx of x * sigmoid(x): sigmoid(x) * (1 + x * (1 - sigmoid(x)))."""
    s = _sigmoid(x)
    return s * (_ONE + x * (_ONE - s))


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: _ONE / np.sqrt(x),
    "reciprocal": lambda x: _ONE / x,
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "gelu": lambda x: _HALF * x * (_ONE + erf(x * _SQRT_HALF)),
    "gelu_apprx_tanh": _gelu_tanh,
    "silu": lambda x: x * _sigmoid(x),
    "gelu_dx": _gelu_dx,
    "silu_dx": _silu_dx,
    "erf": erf,
    "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "sin": np.sin,
    "arctan": np.arctan,
    "sign": np.sign,
    "abs": np.abs,
    "square": np.square,
}


def activation(func: str, x: Any, alpha: float = 0.0) -> np.ndarray:
    """A ScalarE activation function applied to `x` (already scaled and biased), in fp32.

    `alpha` is accepted for the functions that take a parameter; none of the current table does.
    """
    with np.errstate(all="ignore"):
        return ACTIVATIONS[func](to_f32(x)).astype(F32, copy=False)


# ---- binary operators --------------------------------------------------------------------------------------


def _flag(values: np.ndarray) -> np.ndarray:
    return values.astype(F32)


_FLOAT_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
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


def _integer_power(a: np.ndarray, b: np.ndarray, wrap: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """a ** b on int64 values by square-and-multiply, every product wrapped by `wrap` (to 32 bits: then every
    intermediate stays inside int64; or not at all: int64's own wrapping, as 64-bit lanes compute)."""
    a, b = np.broadcast_arrays(a, b)
    result = np.zeros(a.shape, _INT64)
    nonnegative = b >= 0
    base, exponent = wrap(a[nonnegative]), b[nonnegative].copy()
    acc = np.ones(base.shape, _INT64)
    while exponent.size and exponent.max() > 0:
        odd = (exponent & 1) == 1
        acc[odd] = wrap(acc[odd] * base[odd])
        base = wrap(base * base)
        exponent >>= 1
    result[nonnegative] = acc
    # Negative exponents: only 1 and -1 have integral powers.
    negative = ~nonnegative
    result[negative & (a == 1)] = 1
    minus_one = negative & (a == -1)
    result[minus_one] = np.where(b[minus_one] % 2 == 0, 1, -1)
    return result


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    valid = (b >= 0) & (b <= 31)
    return np.where(valid, (a & 0xFFFFFFFF) << np.where(valid, b, 0), 0)


def _shift_right(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    valid = (b >= 0) & (b <= 31)
    return np.where(valid, (a & 0xFFFFFFFF) >> np.where(valid, b, 0), 0)


_INT_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": lambda a, b: wrap32(a) * wrap32(b),
    "max": np.maximum,
    "min": np.minimum,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "power": lambda a, b: _integer_power(a, b, wrap32),
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


def integer_width(*operands: Any) -> int:
    """64 when an integer operand is 8 bytes wide (GpSimdE runs int64 as 64-bit software lanes), else 32. An
    immediate (a Python int, whatever its size) takes the width of the tensors it meets."""
    for operand in operands:
        if isinstance(operand, int):
            continue
        dtype = np.asarray(operand).dtype
        if is_integer_dtype(dtype) and dtype.itemsize == 8:
            return 64
    return 32


def _exact_int(values: Any) -> np.ndarray:
    """Integer operands as int64; integral immediates (floats in the instruction) exactly."""
    values = np.asarray(values)
    if is_integer_dtype(values.dtype):
        return values.astype(_INT64, copy=False)
    return values.astype(np.float64).astype(_INT64)


def _shift64(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    valid = (b >= 0) & (b <= 63)
    bits, amount = a.astype(np.uint64), np.where(valid, b, 0).astype(np.uint64)
    shifted = bits << amount if left else bits >> amount  # logical, as the 32-bit shifts
    return np.where(valid, shifted.astype(_INT64), 0)


_INT64_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    **_INT_OPS,
    "multiply": np.multiply,
    "power": lambda a, b: _integer_power(a, b, lambda values: values),
    "left_shift": lambda a, b: _shift64(a, b, True),
    "right_shift": lambda a, b: _shift64(a, b, False),
}


def binary(op: str, lhs: Any, rhs: Any, integer: bool = False) -> np.ndarray:
    """`lhs <op> rhs` for an operator of `isa.ALU_OPS`: fp32, or exact integers when `integer` is set or `op` is
    a bit-vector operator: 32-bit (int32 result), or 64-bit (int64 result) when an operand is 64-bit."""
    if integer and integer_width(lhs, rhs) == 64:
        with np.errstate(all="ignore"):
            return _INT64_OPS[op](_exact_int(lhs), _exact_int(rhs)).astype(_INT64)
    if integer or op not in _FLOAT_OPS:  # the bit-vector operators have no fp32 form
        return wrap32(_INT_OPS[op](to_int(lhs), to_int(rhs))).astype(np.int32)
    with np.errstate(all="ignore"):
        return _FLOAT_OPS[op](to_f32(lhs), to_f32(rhs))


# ---- GpSimdE kernels ---------------------------------------------------------------------------------------


def _floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's floor division of floats (`div_floor_floating`), step by step in the operands' precision."""
    with np.errstate(all="ignore"):
        quotient = a / b
        mod = np.fmod(a, b)
        div = (a - mod) / b
        div = np.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
        floored = np.floor(div)
        floored = np.where(div - floored > 0.5, floored + 1, floored)
        result = np.where(div != 0, floored, np.copysign(np.zeros_like(div), quotient))
        return np.where(b == 0, quotient, result).astype(a.dtype, copy=False)


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's remainder of floats: fmod, moved by one divisor when the signs of the two differ."""
    with np.errstate(all="ignore"):
        mod = np.fmod(a, b)
        return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod).astype(a.dtype, copy=False)


def _int_divide(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    if op == "divide_floor":
        result = a // safe
    elif op == "divide_trunc":
        # the floor quotient moved toward zero where inexact: |a| would overflow for int64's smallest
        floor = a // safe
        inexact = (floor * safe != a) & ((a < 0) != (safe < 0))
        result = np.where(inexact, floor + 1, floor)
    elif op == "fmod":
        result = np.fmod(a, safe)
    else:
        result = np.remainder(a, safe)
    return np.where(b == 0, 0, result)


_PHILOX_M0, _PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PHILOX_W0, _PHILOX_W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_LOW32 = np.uint64(0xFFFFFFFF)


def philox(counter: Any, key: Any) -> tuple[np.ndarray, ...]:
    """Philox-4x32-10 (Salmon et al., SC'11) of the block (counter, 0, 0, 0) under the key (key, 0): four
    uint32 words per element, as uint64 arrays."""
    c0 = np.asarray(counter).astype(np.int64).astype(np.uint64) & _LOW32
    k0 = np.broadcast_to(np.asarray(key).astype(np.int64).astype(np.uint64) & _LOW32, c0.shape).copy()
    k1 = np.zeros_like(c0)
    c1, c2, c3 = np.zeros_like(c0), np.zeros_like(c0), np.zeros_like(c0)
    for _ in range(10):
        p0, p1 = _PHILOX_M0 * c0, _PHILOX_M1 * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _LOW32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _LOW32
        k0, k1 = (k0 + _PHILOX_W0) & _LOW32, (k1 + _PHILOX_W1) & _LOW32
    return c0, c1, c2, c3


def _unit(word: np.ndarray) -> np.ndarray:
    """The top 24 bits of a 32-bit word as an fp32 in [0, 1) (every value exactly representable)."""
    return ((word >> np.uint64(8)).astype(np.float64) * 2.0**-24).astype(F32)


def _normal(counter: Any, key: Any) -> np.ndarray:
    words = philox(counter, key)
    u1 = np.float32(1) - _unit(words[0])  # in (0, 1]: the logarithm stays finite
    u2 = _unit(words[1])
    with np.errstate(all="ignore"):
        return (np.sqrt(np.float32(-2) * np.log(u1)) * np.cos(np.float32(2 * math.pi) * u2)).astype(F32)


def stochastic_round_bf16(values: Any, uniform: Any) -> np.ndarray:
    """fp32 `values` rounded to bf16 stochastically by `uniform` draws in [0, 1), as fp32 (exact bf16 values).

    Truncating an fp32 bit pattern's low 16 bits gives the bf16 neighbour toward zero; adding one unit of bf16
    precision to the truncated pattern gives the neighbour away from zero (the next binade's first value when the
    mantissa carries over, infinity past the largest finite value). The low 16 bits over 2^16 are the distance
    to the first neighbour in units of their spacing, so taking the second when `uniform` is below it makes the
    expected result `values` itself; with 24-bit draws the probability is exact (a multiple of 2^-16)."""
    x, u = np.broadcast_arrays(to_f32(values), to_f32(uniform))
    bits = np.ascontiguousarray(x).view(np.uint32)
    low = bits & np.uint32(0xFFFF)
    toward_zero = bits & np.uint32(0xFFFF0000)
    away = toward_zero + np.uint32(0x10000)
    chosen = np.where(u < low.astype(F32) * np.float32(2.0**-16), away, toward_zero).astype(np.uint32)
    rounded = chosen.view(F32)
    return np.where(np.isfinite(x), rounded, x)


def gpsimd_kernel(name: str, in0: Any, in1: Any, integer: bool = False) -> np.ndarray:
    """A kernel of `isa.GPSIMD_KERNELS` on (broadcastable) operands: int32 results in integer mode, else fp32."""
    if name == "stochastic_round_bf16":
        return stochastic_round_bf16(in0, in1)
    if name == "uniform":
        return _unit(philox(in0, in1)[0])
    if name == "normal":
        return _normal(in0, in1)
    if integer and name != "divide":
        if integer_width(in0, in1) == 64:
            return _int_divide(name, _exact_int(in0), _exact_int(in1)).astype(_INT64)
        return wrap32(_int_divide(name, to_int(in0), to_int(in1))).astype(np.int32)
    a, b = np.broadcast_arrays(to_f32(in0), to_f32(in1))
    with np.errstate(all="ignore"):
        if name == "divide":
            return a / b
        if name == "divide_trunc":
            return np.trunc(a / b)
        if name == "divide_floor":
            return _floor_divide(a, b)
        if name == "fmod":
            return np.fmod(a, b)
        return _remainder(a, b)


# ---- reductions --------------------------------------------------------------------------------------------

# the reductions of fp32 arrays, each giving an fp32 array (`reduce`, and the tape's prepared steps)
REDUCE: dict[str, Callable[[np.ndarray, tuple[int, ...]], np.ndarray]] = {
    "add": lambda x, axes: x.sum(axis=axes, dtype=F32),
    "max": lambda x, axes: x.max(axis=axes),
    "min": lambda x, axes: x.min(axis=axes),
    "multiply": lambda x, axes: x.prod(axis=axes, dtype=F32),
    "abs_max": lambda x, axes: np.abs(x).max(axis=axes),
}


def reduce(op: str, x: Any, axes: tuple[int, ...]) -> np.ndarray:
    """Reduce `x` over `axes` in fp32 with an operator of `isa.REDUCE_OPS` (summation order unspecified)."""
    with np.errstate(all="ignore"):
        return REDUCE[op](to_f32(x), axes).astype(F32, copy=False)
