"""Activation functions as model code spells them out, described once for every level that recognises them.

The frontend recognises them in Dynamo's FX graph (before AOTAutograd differentiates them op by op) and
torch-recognize-activations in the torch dialect (for `.mlir` input and graphs that reach the importer
unrecognised). Both read arithmetic through an `Arithmetic` view of their own graph, and share the pattern here:
what the function is, which spellings count, and how close a constant must be.

The tanh approximation of GELU (GPT-2's `NewGELUActivation`, `gelu_new`):

    0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))

Every product and sum in either operand order, the scalars on either side, `0.5 * x` as `x * 0.5`, and the
cube as a power (`x**3`, `pow(x, 3)`) or as products (`x * x * x` in any grouping).
"""

from __future__ import annotations

import math
from typing import Protocol

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_CUBIC_COEFFICIENT = 0.044715
CONSTANT_RELATIVE_TOLERANCE = 1e-6
"""A constant written in model code matches within this relative error (`math.sqrt(2 / math.pi)` spelled as
0.7978845608 is the same constant)."""

Operand = object
"""A value of the graph or a Python number."""


class Arithmetic(Protocol):
    """How a graph spells the few operations the patterns read; each returns None when `value` is not one.

    The operands a view returns are graph values or Python numbers (a scalar operand)."""

    def product(self, value: Operand) -> tuple[Operand, Operand] | None:
        """(a, b) when `value` is a * b."""
        ...

    def sum(self, value: Operand) -> tuple[Operand, Operand] | None:
        """(a, b) when `value` is a + b (no scaling of either)."""
        ...

    def power(self, value: Operand) -> tuple[Operand, Operand] | None:
        """(base, exponent) when `value` is base ** exponent."""
        ...

    def tanh(self, value: Operand) -> Operand | None:
        """t when `value` is tanh(t)."""
        ...


def is_constant(operand: Operand, expected: float) -> bool:
    """Whether `operand` is a Python number equal to `expected` within the constants' tolerance."""
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        return False
    return math.isclose(float(operand), expected, rel_tol=CONSTANT_RELATIVE_TOLERANCE)


def tanh_gelu_input(arithmetic: Arithmetic, value: Operand) -> Operand | None:
    """x when `value` computes the tanh approximation of GELU of x as arithmetic, else None. x is a value of the
    view's own graph."""
    factors = arithmetic.product(value)
    if factors is None:
        return None
    for half_x, one_plus_tanh in (factors, factors[::-1]):
        x = _scaled(arithmetic, half_x, 0.5)
        tanh_argument = arithmetic.tanh(_shifted(arithmetic, one_plus_tanh, 1.0))
        terms = arithmetic.sum(_scaled(arithmetic, tanh_argument, SQRT_2_OVER_PI))
        if x is None or terms is None:
            continue
        for linear, cubic_term in (terms, terms[::-1]):
            if linear is x and _cube_of(arithmetic, _scaled(arithmetic, cubic_term, GELU_CUBIC_COEFFICIENT), x):
                return x
    return None


def _scaled(arithmetic: Arithmetic, value: Operand, factor: float) -> Operand | None:
    """t when `value` is t * factor or factor * t, t a graph value."""
    factors = arithmetic.product(value) if value is not None else None
    if factors is None:
        return None
    for tensor, scalar in (factors, factors[::-1]):
        if is_constant(scalar, factor) and _is_value(tensor):
            return tensor
    return None


def _shifted(arithmetic: Arithmetic, value: Operand, offset: float) -> Operand | None:
    """t when `value` is t + offset or offset + t, t a graph value."""
    terms = arithmetic.sum(value) if value is not None else None
    if terms is None:
        return None
    for tensor, scalar in (terms, terms[::-1]):
        if is_constant(scalar, offset) and _is_value(tensor):
            return tensor
    return None


def _cube_of(arithmetic: Arithmetic, value: Operand, x: Operand) -> bool:
    """Whether `value` is x**3: a power, or x * x * x grouped either way."""
    if value is None:
        return False
    power = arithmetic.power(value)
    if power is not None:
        return power[0] is x and is_constant(power[1], 3.0)
    factors = arithmetic.product(value)
    if factors is None:
        return False
    return any(single is x and _square_of(arithmetic, square, x) for single, square in (factors, factors[::-1]))


def _square_of(arithmetic: Arithmetic, value: Operand, x: Operand) -> bool:
    factors = arithmetic.product(value)
    if factors is not None:
        return factors[0] is x and factors[1] is x
    power = arithmetic.power(value)
    return power is not None and power[0] is x and is_constant(power[1], 2.0)


def _is_value(operand: Operand) -> bool:
    return operand is not None and not isinstance(operand, bool | int | float)
