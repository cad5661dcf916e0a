"""Element types shared by all levels: xDSL types <-> the runtime's dtype names.

The torch dialect uses builtin types as PyTorch does (f32, bf16, i64, i1, ...); on chip the same names map to
the runtime's storage types (`runtime/dtypes.py`).

An immediate number of the tile and neuron levels (a fill value, an operator's scalar) is an `f64` FloatAttr,
or an `i64` IntegerAttr where the values it meets are integers: an f64 holds integers exactly only up to 2^53,
and rounds int64's largest to 2^63, which wraps to its smallest (`number_attr`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    Float8E4M3FNType,
    Float8E5M2Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute

_BY_NAME: dict[str, Attribute] = {
    "f32": f32,
    "bf16": bf16,
    "f16": f16,
    "f64": f64,
    "f8e4m3": Float8E4M3FNType(),
    "f8e5m2": Float8E5M2Type(),
    "i64": i64,
    "i32": i32,
    "i16": i16,
    "i8": i8,
    "i1": i1,
    "u8": IntegerType(8, Signedness.UNSIGNED),
    "u16": IntegerType(16, Signedness.UNSIGNED),
    "u32": IntegerType(32, Signedness.UNSIGNED),
}


def runtime_dtype_name(element_type: Attribute) -> str:
    """'f32', 'bf16', 'i32', ... for an xDSL element type; a clear error for types the core cannot hold."""
    # the float types by their class (none is subclassed): the passes ask this of every access, and `isinstance`
    # on attribute classes (ABCs) costs more than the rest of the call
    known = _FLOAT_NAMES.get(type(element_type))
    if known is not None:
        return known
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        unsigned = element_type.signedness.data == Signedness.UNSIGNED
        if width == 1:
            return "i1"
        return f"{'u' if unsigned else 'i'}{width}"
    raise ValueError(f"element type {element_type} has no NeuronCore storage type")


_FLOAT_NAMES: dict[type[Attribute], str] = {
    type(element_type): name for name, element_type in _BY_NAME.items() if not isinstance(element_type, IntegerType)
}


def element_type_for(name: str) -> Attribute:
    """The xDSL element type for a runtime dtype name."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown element type name '{name}'") from None


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def is_integer_type(element_type: Attribute) -> bool:
    """Whether values of `element_type` are integers (booleans included)."""
    return isinstance(element_type, IntegerType)


def number_attr(value: float | int | bool, integer: bool) -> FloatAttr | IntegerAttr:
    """An immediate as the attribute that holds it exactly: `i64` for an integral value met by integer elements
    (`integer`), `f64` otherwise (fractions, infinities, NaN, floats of floating elements, and integers beyond
    int64, which no integer element holds)."""
    # int(value), not int(float(value)): an int keeps every bit
    if integer and float(value).is_integer() and INT64_MIN <= int(value) <= INT64_MAX:
        return IntegerAttr(int(value), i64)
    return FloatAttr(float(value), f64)


def number_value(attr: FloatAttr | IntegerAttr) -> float | int:
    """The Python number an immediate's attribute holds (an int exactly for an IntegerAttr)."""
    return attr.value.data
