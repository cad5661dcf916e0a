"""The engines' arithmetic: ALU operators, activation functions, reductions and dtype conversion, in NumPy.

One definition serves the simulator's instruction semantics and the tile dialect's reference semantics, so
that "what `add` means" is written once. Floating-point work is fp32 as in the engines (A2: all arithmetic is
FP32 with free casting on input and output); integer operands of bitwise ops are handled as 32-bit integers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_F32 = np.float32


def _f32(x: np.ndarray | float) -> np.ndarray:
    return np.asarray(x, dtype=_F32)


def _as_int32(x: np.ndarray | float) -> np.ndarray:
    values = np.asarray(x)
    if values.dtype.kind == "f":
        values = np.nan_to_num(values.astype(np.float64), nan=0.0)
        values = np.clip(np.trunc(values), -(2.0**31), 2.0**31 - 1)
    return values.astype(np.int64).astype(np.int32)


def _flag(x: np.ndarray) -> np.ndarray:
    return x.astype(_F32)


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": lambda a, b: _f32(a) + _f32(b),
    "subtract": lambda a, b: _f32(a) - _f32(b),
    "multiply": lambda a, b: _f32(a) * _f32(b),
    "max": lambda a, b: np.maximum(_f32(a), _f32(b)),
    "min": lambda a, b: np.minimum(_f32(a), _f32(b)),
    "abs_max": lambda a, b: np.maximum(np.abs(_f32(a)), np.abs(_f32(b))),
    "abs_min": lambda a, b: np.minimum(np.abs(_f32(a)), np.abs(_f32(b))),
    "power": lambda a, b: np.power(_f32(a), _f32(b)),
    "is_equal": lambda a, b: _flag(_f32(a) == _f32(b)),
    "not_equal": lambda a, b: _flag(_f32(a) != _f32(b)),
    "is_ge": lambda a, b: _flag(_f32(a) >= _f32(b)),
    "is_gt": lambda a, b: _flag(_f32(a) > _f32(b)),
    "is_le": lambda a, b: _flag(_f32(a) <= _f32(b)),
    "is_lt": lambda a, b: _flag(_f32(a) < _f32(b)),
    "logical_and": lambda a, b: _flag((_f32(a) != 0) & (_f32(b) != 0)),
    "logical_or": lambda a, b: _flag((_f32(a) != 0) | (_f32(b) != 0)),
    "logical_xor": lambda a, b: _flag((_f32(a) != 0) ^ (_f32(b) != 0)),
    "bitwise_and": lambda a, b: _as_int32(a) & _as_int32(b),
    "bitwise_or": lambda a, b: _as_int32(a) | _as_int32(b),
    "bitwise_xor": lambda a, b: _as_int32(a) ^ _as_int32(b),
    "left_shift": lambda a, b: _as_int32(a) << (_as_int32(b) & 31),
    # the hardware has no arithmetic shift right: shift the 32-bit pattern as unsigned
    "right_shift": lambda a, b: (_as_int32(a).view(np.uint32) >> (_as_int32(b) & 31).astype(np.uint32)).view(
        np.int32
    ),
}


def binary(op: str, lhs: np.ndarray | float, rhs: np.ndarray | float) -> np.ndarray:
    """`lhs <op> rhs` for an ALU operator of `runtime.isa.ALU_OPS` (comparisons give 1.0 / 0.0)."""
    with np.errstate(all="ignore"):
        return _BINARY[op](lhs, rhs)  # type: ignore[arg-type]


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 in float64: absolute error below 1.5e-7, under fp32's resolution near 1.
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    result = 1.0 - poly * np.exp(-z * z)
    return (np.sign(x) * result).astype(_F32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / np.sqrt(_F32(2.0))))).astype(_F32)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    inner = np.sqrt(_F32(2.0 / np.pi)) * (x + _F32(0.044715) * x * x * x)
    return (0.5 * x * (1.0 + np.tanh(inner))).astype(_F32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x))).astype(_F32)


def _softplus(x: np.ndarray) -> np.ndarray:
    return (np.logaddexp(_F32(0.0), x)).astype(_F32)


_ACTIVATIONS: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "copy": lambda x, a: x,
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "sqrt": lambda x, a: np.sqrt(x),
    "rsqrt": lambda x, a: 1.0 / np.sqrt(x),
    "reciprocal": lambda x, a: 1.0 / x,
    "relu": lambda x, a: np.where(x > 0, x, _F32(0.0)),
    "sigmoid": lambda x, a: _sigmoid(x),
    "tanh": lambda x, a: np.tanh(x),
    "gelu": lambda x, a: _gelu(x),
    "gelu_apprx_tanh": lambda x, a: _gelu_tanh(x),
    "silu": lambda x, a: x * _sigmoid(x),
    "erf": lambda x, a: _erf(x),
    "softplus": lambda x, a: _softplus(x),
    "mish": lambda x, a: x * np.tanh(_softplus(x)),
    "sin": lambda x, a: np.sin(x),
    "arctan": lambda x, a: np.arctan(x),
    "sign": lambda x, a: np.sign(x),
    "abs": lambda x, a: np.abs(x),
    "square": lambda x, a: x * x,
}


def activation(func: str, x: np.ndarray, alpha: float = 0.0) -> np.ndarray:
    """A ScalarE activation function applied to fp32 `x` (already scaled and biased)."""
    with np.errstate(all="ignore"):
        return _f32(_ACTIVATIONS[func](_f32(x), alpha))


_REDUCE: dict[str, Callable[..., np.ndarray]] = {
    "add": np.sum,
    "max": np.max,
    "min": np.min,
    "multiply": np.prod,
}


def reduce(op: str, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Reduce fp32 `x` over `axes` with a reduction of `runtime.isa.REDUCE_OPS`."""
    values = _f32(x)
    with np.errstate(all="ignore"):
        if op == "abs_max":
            return np.max(np.abs(values), axis=axes).astype(_F32)
        return _REDUCE[op](values, axis=axes).astype(_F32)


def cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert to `dtype` as an engine's output converter does.

    Floats round to nearest even (ml_dtypes for bf16/fp8); to integers, floats truncate toward zero and
    saturate, NaN becoming 0; to bool, any non-zero value is true.
    """
    values = np.asarray(values)
    target = np.dtype(dtype)
    if values.dtype == target:
        return values
    if target == np.bool_:
        return values != 0
    if target.kind in "iu" and values.dtype.kind == "f":
        info = np.iinfo(target)
        wide = np.nan_to_num(values.astype(np.float64), nan=0.0)
        return np.clip(np.trunc(wide), info.min, info.max).astype(target)
    if values.dtype.kind in "V" or target.kind == "V":
        return values.astype(_F32).astype(target)
    return values.astype(target)


def uninitialised(count: int, dtype: np.dtype) -> np.ndarray:
    """A fresh buffer of `count` elements, all bytes 0xFF: floats read as NaN, integers as -1 (or max)."""
    return np.full(count * np.dtype(dtype).itemsize, 0xFF, dtype=np.uint8).view(dtype)
