"""Transcendental functions, activations, rounding and float classification, composed from engine functions.

ScalarE's activation table (`runtime.isa.ACTIVATION_FUNCTIONS`) computes `f(x * scale + bias)` in one
instruction, scale and bias for free; what the table lacks is composed, each step on its natural engine:

    cos(x)   = sin(x + pi/2)                          bias
    tan(x)   = tan(d) or -cot(d), d = x - n pi/2       Cody-Waite reduction, then sines over each other
    exp2(x)  = exp(x * ln 2)                          scale
    expm1    = exp(x) - 1;   log1p = log(x + 1)       bias
    log2/10  = log(x) / ln 2 (ln 10)
    sinh/cosh = (exp(x - ln 2) -/+ exp(-x - ln 2))    scale -1 and bias -ln 2: no extra multiply
    asin(x)  = atan(x / sqrt((1 - x)(1 + x)));  acos = pi/2 - asin
    asinh, acosh, atanh through log and sqrt; atan2 through atan and a quadrant correction
    round    = (x + 1.5 * 2^23) - 1.5 * 2^23 (fp32 addition rounds half to even), floor/ceil from it
    gelu_backward, silu_backward = grad * gelu_dx(x), grad * silu_dx(x)   the derivatives are table functions
                                                      (the tanh-approximated GELU's is composed from sigmoids)

Accuracy: each composition stays within a few fp32 ulp of the function, except near the cancellations the
formulas have (expm1 and log1p near 0 and the inverse hyperbolics keep an absolute error of about 1e-7), which
the project's fp32 tolerance (`ir/semantics/compare.py`) accepts. Rounding functions are exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import Lowering, arguments_of
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import (
    TileMath,
    _exact,
    _number,
    elementwise,
    is_integer_type,
)
from neuron_mlir.lowering.loop_nests import LoopNestBuilder

_LN2 = math.log(2.0)
_HALF_PI = math.pi / 2

Compute = Any  # Callable[[TileMath, SSAValue, TileType], SSAValue]


def _float_unary(compute: Compute, integer_identity: bool = False) -> Lowering:
    """A float function of one tensor; `integer_identity` makes integer inputs a plain copy (rounding ops)."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        def body(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            m = TileMath(e, result)
            if integer_identity and _exact(tiles, result):
                return m.copy(tiles[0], result)
            return compute(m, tiles[0], result)

        return elementwise(op, args, em, ["self"], body)

    return lower


def _activation(fn: str, scale: float = 1.0, bias: float = 0.0) -> Lowering:
    return _float_unary(lambda m, x, r: m.act(fn, x, scale, bias, r))


def _then_scale(fn: str, factor: float, bias: float = 0.0) -> Lowering:
    return _float_unary(lambda m, x, r: m.sc("multiply", m.act(fn, x, bias=bias), factor, r))


# ---- trigonometric and hyperbolic ----------------------------------------------------------------------------


def _cos(m: TileMath, x: SSAValue, out: TileType | None = None) -> SSAValue:
    return m.act("sin", x, bias=_HALF_PI, out=out)


# pi/2 in three fp32 parts (Cody-Waite, Cephes' sinf constants): the first two have few significant bits, so
# their products with the quadrant number are exact and x - n * pi/2 keeps every bit of the small remainder
_HALF_PI_1, _HALF_PI_2, _HALF_PI_3 = 1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8


def _tan(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    """tan(x) from the remainder d = x - n * pi/2 (|d| <= pi/4): tan(d) for even n, -cot(d) for odd n.

    Near a pole of tan, d is tiny and known to nearly every bit, so -cos(d)/sin(d) keeps the relative precision
    that sin(x)/cos(x) loses to the rounding of x near an odd multiple of pi/2.
    """
    n = m.round_half_even(m.sc("multiply", x, 2.0 / math.pi))
    d = m.bin("subtract", x, m.sc("multiply", n, _HALF_PI_1))
    d = m.bin("subtract", d, m.sc("multiply", n, _HALF_PI_2))
    d = m.bin("subtract", d, m.sc("multiply", n, _HALF_PI_3))
    sine = m.act("sin", d)
    cosine = m.act("sin", m.act("abs", d), scale=-1.0, bias=_HALF_PI)  # cos(d) = sin(pi/2 - |d|)
    odd = m.sc("is_equal", m.act("abs", m.kernel("fmod", n, m.column(2.0, f32))), 1.0)
    numerator = m.select(odd, m.sc("multiply", cosine, -1.0), sine)
    denominator = m.select(odd, sine, cosine)
    return m.divide(numerator, denominator, r)


def _half_exponentials(m: TileMath, x: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(e^x / 2, e^-x / 2), each one ScalarE instruction."""
    return m.act("exp", x, bias=-_LN2), m.act("exp", x, scale=-1.0, bias=-_LN2)


def _sinh(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    positive, negative = _half_exponentials(m, x)
    return m.bin("subtract", positive, negative, r)


def _cosh(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    positive, negative = _half_exponentials(m, x)
    return m.bin("add", positive, negative, r)


def _asin(m: TileMath, x: SSAValue, out: TileType | None = None) -> SSAValue:
    # (1 - x)(1 + x) keeps precision near |x| = 1 where 1 - x^2 would cancel; rsqrt(0) = inf gives +-pi/2
    room = m.bin("multiply", m.sc("subtract", x, 1.0, reverse=True), m.sc("add", x, 1.0))
    return m.act("arctan", m.bin("multiply", x, m.act("rsqrt", room)), out=out)


def _acos(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    return m.sc("subtract", _asin(m, x), _HALF_PI, r, reverse=True)


def _asinh(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    # odd symmetry: sign(x) * log(|x| + sqrt(x^2 + 1)) avoids the cancellation of x + sqrt(x^2 + 1) for x < 0
    root = m.act("sqrt", m.act("square", x), bias=1.0)
    magnitude = m.act("log", m.bin("add", m.act("abs", x), root))
    return m.bin("multiply", magnitude, m.sign(x), r)


def _acosh(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    root = m.act("sqrt", m.bin("multiply", m.sc("subtract", x, 1.0), m.sc("add", x, 1.0)))
    return m.act("log", m.bin("add", x, root), out=r)


def _atanh(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    difference = m.bin("subtract", m.act("log", x, bias=1.0), m.act("log", x, scale=-1.0, bias=1.0))
    return m.sc("multiply", difference, 0.5, r)


def _atan2(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        y, x = tiles
        ratio = m.divide(y, x)
        # 0 / 0 would be NaN: atan2(0, x) is 0 or +-pi, which the correction below supplies
        both_zero = m.bin("multiply", m.sc("is_equal", y, 0.0), m.sc("is_equal", x, 0.0))
        angle = m.act("arctan", m.select(both_zero, m.fill(0.0), ratio))
        # left half-plane: add pi above the axis (y >= 0) and subtract it below
        half_turn = m.sc("add", m.sc("multiply", m.sc("is_ge", y, 0.0), 2 * math.pi), -math.pi)
        correction = m.bin("multiply", m.sc("is_lt", x, 0.0), half_turn)
        return m.bin("add", angle, correction, result)

    return elementwise(op, args, em, ["self", "other"], compute)


# ---- exponentials and logarithms -------------------------------------------------------------------------------


def _expm1(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    return m.sc("add", m.act("exp", x), -1.0, r)


def _erfc(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    return m.sc("subtract", m.act("erf", x), 1.0, r, reverse=True)


# ---- activations -----------------------------------------------------------------------------------------------


def _gelu(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> Sequence[SSAValue | None]:
    approximate = args.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"unknown gelu approximation {approximate!r}")
    fn = "gelu_apprx_tanh" if approximate == "tanh" else "gelu"
    return _activation(fn)(em, op, args)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715  # the tanh approximation's cubic coefficient


def _gelu_tanh_dx(m: TileMath, x: SSAValue) -> SSAValue:
    """The derivative of the tanh-approximated GELU, x s with s = (1 + tanh(u)) / 2 = sigmoid(2u),
    u = k (x + c x^3), k = sqrt(2 / pi): s + x s (1 - s) 2u' = s (1 + 6kc (1 - s) x (x^2 + 1 / 3c)).

    Ten passes (eleven with the gradient's product), three of them ScalarE functions: 2u = 2kc x (x^2 + 1/c)
    is one scale away from a product, and 1 - s = sigmoid(-2u) is a second table lookup where the tanh form needs
    a square and an affine step for 1 - tanh^2. For large |x| the sigmoid form keeps its precision where
    1 + tanh(u) cancels."""
    x2 = m.act("square", x)
    two_u_over_2kc = m.bin("multiply", x, m.sc("add", x2, 1.0 / _GELU_CUBIC))
    kc2 = 2.0 * _SQRT_2_OVER_PI * _GELU_CUBIC
    s = m.act("sigmoid", two_u_over_2kc, scale=kc2)
    one_minus_s = m.act("sigmoid", two_u_over_2kc, scale=-kc2)
    slope = m.bin("multiply", x, m.sc("add", x2, 1.0 / (3.0 * _GELU_CUBIC)))  # x (1 + 3c x^2) / 3c
    correction = m.sc("add", m.sc("multiply", m.bin("multiply", one_minus_s, slope), 3.0 * kc2), 1.0)
    return m.bin("multiply", s, correction)


def _gelu_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """grad * gelu'(x): the exact GELU's derivative is one ScalarE function (`gelu_dx`); the tanh approximation's
    is composed."""
    approximate = args.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"unknown gelu approximation {approximate!r}")

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        grad, x = tiles
        slope = m.act("gelu_dx", x) if approximate == "none" else _gelu_tanh_dx(m, x)
        return m.bin("multiply", grad, slope, result)

    return elementwise(op, args, em, ["grad_output", "self"], compute)


def _silu_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """grad * silu'(x), the derivative one ScalarE function (`silu_dx`)."""

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        return m.bin("multiply", tiles[0], m.act("silu_dx", tiles[1]), result)

    return elementwise(op, args, em, ["grad_output", "self"], compute)


def _elu(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    alpha, scale = _number(args.get("alpha", 1)), _number(args.get("scale", 1))
    input_scale = _number(args.get("input_scale", 1))

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        x = tiles[0]
        # x > 0: scale * x;  else: scale * alpha * (exp(x * input_scale) - 1); min(x, 0) keeps exp finite
        negative = m.sc(
            "multiply", m.sc("add", m.act("exp", m.sc("min", x, 0.0), scale=input_scale), -1.0), scale * alpha
        )
        positive = m.sc("multiply", x, scale)
        return m.select(m.sc("is_gt", x, 0.0), positive, negative, result)

    return elementwise(op, args, em, ["self"], compute)


def _leaky_relu(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    slope = _number(args.get("negative_slope", 0.01))

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        x = tiles[0]
        return m.select(m.sc("is_gt", x, 0.0), x, m.sc("multiply", x, slope), result)

    return elementwise(op, args, em, ["self"], compute)


def _relu(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        if _exact(tiles, result):
            return TileMath(e, result, True).sc("max", tiles[0], 0.0, result)
        return TileMath(e, result).act("relu", tiles[0], out=result)

    return elementwise(op, args, em, ["self"], compute)


# ---- rounding and classification -------------------------------------------------------------------------------


def _round_decimals(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    decimals = int(args["decimals"])

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        if decimals == 0:
            return m.round_half_even(tiles[0], result)
        # PyTorch: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for negative d
        factor = float(10 ** abs(decimals))
        column = m.column(factor, f32)
        if decimals > 0:
            return m.kernel("divide", m.round_half_even(m.sc("multiply", tiles[0], factor)), column, result)
        return m.sc("multiply", m.round_half_even(m.kernel("divide", tiles[0], column)), factor, result)

    return elementwise(op, args, em, ["self"], compute)


def _isinf(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    return m.sc("is_equal", m.act("abs", x), math.inf, r)


def _isnan(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    return m.bin("not_equal", x, x, r)


def _signbit(m: TileMath, x: SSAValue, r: TileType) -> SSAValue:
    # x < 0 misses -0.0, and no ALU op tells -0.0 from 0.0 (ScalarE's x * scale + bias even turns it into
    # 0.0); IEEE division does: 1 / -0.0 = -inf (GpSimdE). Infinities have 1 / x = +-0, hence both tests.
    reciprocal = m.kernel("divide", m.fill(1.0), x)
    return m.bin("logical_or", m.sc("is_lt", x, 0.0), m.sc("is_lt", reciprocal, 0.0), r)


def _classify(compute: Any, integer_value: float) -> Lowering:
    """isinf/isnan/signbit: integers are never inf or NaN (and their sign is a comparison)."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        def body(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            m = TileMath(e, result)
            assert isinstance(tiles[0].type, TileType)
            if is_integer_type(tiles[0].type.element_type):
                if integer_value < 0:  # signbit of an integer
                    return m.sc("is_lt", tiles[0], 0.0, result)
                return m.fill(integer_value, result)
            return compute(m, tiles[0], result)

        return elementwise(op, args, em, ["self"], body)

    return lower


def _copysign(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        magnitude = m.act("abs", tiles[0])
        negative = _signbit(m, tiles[1], m.inner)
        return m.select(negative, m.sc("multiply", magnitude, -1.0), magnitude, result)

    return elementwise(op, args, em, ["self", "other"], compute)


def _hypot(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        return m.act("sqrt", m.bin("add", m.act("square", tiles[0]), m.act("square", tiles[1])), out=result)

    return elementwise(op, args, em, ["self", "other"], compute)


def legal(op: Operation) -> str | None:
    """Activations lower for every float and integer tensor; GELU takes PyTorch's two approximations."""
    if op.name == "torch.aten.gelu":
        approximate = arguments_of(op).get("approximate", "none")
        if approximate not in ("none", "tanh"):
            return f"unknown gelu approximation {approximate!r}"
    return None


ACTIVATION_LOWERINGS: dict[str, Lowering] = {
    # exponentials and logarithms
    "torch.aten.exp": _activation("exp"),
    "torch.aten.exp2": _activation("exp", scale=_LN2),
    "torch.aten.expm1": _float_unary(_expm1),
    "torch.aten.log": _activation("log"),
    "torch.aten.log1p": _activation("log", bias=1.0),
    "torch.aten.log2": _then_scale("log", 1.0 / _LN2),
    "torch.aten.log10": _then_scale("log", 1.0 / math.log(10.0)),
    "torch.aten.sqrt": _activation("sqrt"),
    "torch.aten.rsqrt": _activation("rsqrt"),
    "torch.aten.reciprocal": _activation("reciprocal"),
    # trigonometric and hyperbolic
    "torch.aten.sin": _activation("sin"),
    "torch.aten.cos": _float_unary(lambda m, x, r: _cos(m, x, r)),
    "torch.aten.tan": _float_unary(_tan),
    "torch.aten.asin": _float_unary(lambda m, x, r: _asin(m, x, r)),
    "torch.aten.acos": _float_unary(_acos),
    "torch.aten.atan": _activation("arctan"),
    "torch.aten.atan2": _atan2,
    "torch.aten.sinh": _float_unary(_sinh),
    "torch.aten.cosh": _float_unary(_cosh),
    "torch.aten.tanh": _activation("tanh"),
    "torch.aten.asinh": _float_unary(_asinh),
    "torch.aten.acosh": _float_unary(_acosh),
    "torch.aten.atanh": _float_unary(_atanh),
    # special functions
    "torch.aten.erf": _activation("erf"),
    "torch.aten.erfc": _float_unary(_erfc),
    "torch.aten.sigmoid": _activation("sigmoid"),
    # activations
    "torch.aten.relu": _relu,
    "torch.aten.gelu": _gelu,
    "torch.aten.silu": _activation("silu"),
    "torch.aten.gelu_backward": _gelu_backward,
    "torch.aten.silu_backward": _silu_backward,
    "torch.aten.elu": _elu,
    "torch.aten.leaky_relu": _leaky_relu,
    # rounding
    "torch.aten.round": _float_unary(lambda m, x, r: m.round_half_even(x, r), integer_identity=True),
    "torch.aten.round.decimals": _round_decimals,
    "torch.aten.floor": _float_unary(lambda m, x, r: m.floor(x, r), integer_identity=True),
    "torch.aten.ceil": _float_unary(lambda m, x, r: m.ceil(x, r), integer_identity=True),
    "torch.aten.trunc": _float_unary(lambda m, x, r: m.trunc(x, r), integer_identity=True),
    # classification and sign manipulation
    "torch.aten.isinf": _classify(_isinf, 0.0),
    "torch.aten.isnan": _classify(_isnan, 0.0),
    "torch.aten.signbit": _classify(_signbit, -1.0),
    "torch.aten.copysign.Tensor": _copysign,
    "torch.aten.hypot": _hypot,
}
