"""The operator tokens of NKI (`nl.add`, `nl.exp`, `nl.maximum`, ...) and what each is to the instruction set.

One token is at once an argument of `nki.isa` instructions (`op=nl.add`) and, called, an `nki.language` function
(`nl.add(x, y)`). Its `alu`, `activation` and `reduce` names are the runtime's operator names (`runtime.isa`):
the ALU operator of tensor_tensor/tensor_scalar, the ScalarE activation function, the reduction of tensor_reduce.
NumPy's functions (`np.add`, `np.exp`, `np.max`, ...), which NKI's own examples pass as well, stand for the
token of the same meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from neuron_mlir.nki.tracing import error


class Operator:
    """An NKI operator token; calling it runs the `nki.language` function of the same name."""

    def __init__(
        self,
        name: str,
        alu: str | None = None,
        activation: str | None = None,
        reduce: str | None = None,
    ) -> None:
        self.name = name
        self.alu = alu
        self.activation = activation
        self.reduce = reduce
        self.function: Callable[..., Any] | None = None  # set by nki.language

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.function is None:
            raise error(f"nl.{self.name} is an operator token, not a function")
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def _binary(name: str, alu: str | None, reduce: str | None = None) -> Operator:
    return Operator(name, alu=alu, reduce=reduce)


BINARY: dict[str, Operator] = {
    op.name: op
    for op in (
        _binary("add", "add", "add"),
        _binary("subtract", "subtract"),
        _binary("multiply", "multiply", "multiply"),
        _binary("divide", None),
        _binary("maximum", "max", "max"),
        _binary("minimum", "min", "min"),
        _binary("power", "power"),
        _binary("equal", "is_equal"),
        _binary("not_equal", "not_equal"),
        _binary("greater", "is_gt"),
        _binary("greater_equal", "is_ge"),
        _binary("less", "is_lt"),
        _binary("less_equal", "is_le"),
        _binary("logical_and", "logical_and"),
        _binary("logical_or", "logical_or"),
        _binary("logical_xor", "logical_xor"),
        _binary("bitwise_and", "bitwise_and"),
        _binary("bitwise_or", "bitwise_or"),
        _binary("bitwise_xor", "bitwise_xor"),
        _binary("left_shift", "left_shift"),
        _binary("right_shift", "right_shift"),
    )
}

UNARY: dict[str, Operator] = {
    name: Operator(name, activation=function)
    for name, function in (
        ("copy", "copy"),
        ("exp", "exp"),
        ("log", "log"),
        ("sqrt", "sqrt"),
        ("rsqrt", "rsqrt"),
        ("reciprocal", "reciprocal"),
        ("relu", "relu"),
        ("sigmoid", "sigmoid"),
        ("tanh", "tanh"),
        ("gelu", "gelu"),
        ("gelu_dx", "gelu_dx"),
        ("gelu_apprx_tanh", "gelu_apprx_tanh"),
        ("silu", "silu"),
        ("silu_dx", "silu_dx"),
        ("erf", "erf"),
        ("softplus", "softplus"),
        ("mish", "mish"),
        ("sin", "sin"),
        ("arctan", "arctan"),
        ("sign", "sign"),
        ("abs", "abs"),
        ("square", "square"),
    )
}

REDUCTIONS: dict[str, Operator] = {
    name: Operator(name, reduce=reduce)
    for name, reduce in (("sum", "add"), ("max", "max"), ("min", "min"), ("prod", "multiply"), ("mean", None))
}

_NUMPY: dict[Any, Operator] = {
    np.add: BINARY["add"],
    np.subtract: BINARY["subtract"],
    np.multiply: BINARY["multiply"],
    np.divide: BINARY["divide"],
    np.maximum: BINARY["maximum"],
    np.minimum: BINARY["minimum"],
    np.power: BINARY["power"],
    np.equal: BINARY["equal"],
    np.not_equal: BINARY["not_equal"],
    np.greater: BINARY["greater"],
    np.greater_equal: BINARY["greater_equal"],
    np.less: BINARY["less"],
    np.less_equal: BINARY["less_equal"],
    np.logical_and: BINARY["logical_and"],
    np.logical_or: BINARY["logical_or"],
    np.logical_xor: BINARY["logical_xor"],
    np.bitwise_and: BINARY["bitwise_and"],
    np.bitwise_or: BINARY["bitwise_or"],
    np.bitwise_xor: BINARY["bitwise_xor"],
    np.left_shift: BINARY["left_shift"],
    np.right_shift: BINARY["right_shift"],
    np.exp: UNARY["exp"],
    np.log: UNARY["log"],
    np.sqrt: UNARY["sqrt"],
    np.reciprocal: UNARY["reciprocal"],
    np.tanh: UNARY["tanh"],
    np.sin: UNARY["sin"],
    np.arctan: UNARY["arctan"],
    np.sign: UNARY["sign"],
    np.abs: UNARY["abs"],
    np.square: UNARY["square"],
    np.sum: REDUCTIONS["sum"],
    np.max: REDUCTIONS["max"],
    np.min: REDUCTIONS["min"],
    np.prod: REDUCTIONS["prod"],
}


def operator(value: Any, api: str, role: str = "op") -> Operator:
    """The token `value` stands for (an `Operator` or a NumPy function)."""
    if isinstance(value, Operator):
        return value
    found = _NUMPY.get(value)
    if found is None:
        raise error(f"{api}: {role} {value!r} is not an NKI operator (nl.add, nl.exp, np.maximum, ...)")
    return found


def alu_name(value: Any, api: str, role: str = "op") -> str:
    token = operator(value, api, role)
    if token.alu is None:
        raise error(f"{api}: {role} {token!r} is not an ALU operator of the Vector engine")
    return token.alu


def activation_name(value: Any, api: str) -> str:
    token = operator(value, api)
    if token.activation is None:
        raise error(f"{api}: op {token!r} is not an activation function of the Scalar engine")
    return token.activation


def reduce_name(value: Any, api: str) -> str:
    token = operator(value, api)
    if token.reduce is None:
        raise error(f"{api}: op {token!r} is not a reduction (nl.add, nl.maximum, nl.minimum, nl.multiply)")
    return token.reduce
