"""`init_op`: an op of the project's dialects initialised as IRDL's generic builder would, for less.

IRDL's builder (`IRDLOperation.__init__`) matches every argument against the op's definitions, converting ops to
their results and lists to operand segments, for every op made. The lowerings make hundreds of thousands of ops
per real-width compile (tiles, windows, buffers), and that matching was about as costly as making the op itself.
`init_op` takes the common forms directly: each operand a value, or a list or tuple of values for a variadic or
optional definition (None for an absent optional one), and single results; it gives the same operands, results
and properties in the same order. Any other form, and any op whose definition asks for segment sizes or equal
variadic sizes, goes through IRDL's builder, which also words its errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.irdl.operations import AttrSizedSegments, OptionalDef, SameVariadicSize, VariadicDef

_SINGLE, _OPTIONAL, _VARIADIC = 0, 1, 2

# op class -> (the kind of each operand definition, the number of results), or None when its definition needs IRDL's
# builder (more than operand and single result definitions, or options about segments)
_FORMS: dict[type[IRDLOperation], tuple[tuple[int, ...], int] | None] = {}


def _kind(definition: Any) -> int:
    if isinstance(definition, OptionalDef):
        return _OPTIONAL
    return _VARIADIC if isinstance(definition, VariadicDef) else _SINGLE


def _form(cls: type[IRDLOperation]) -> tuple[tuple[int, ...], int] | None:
    definition = cls.get_irdl_definition()
    if definition is None or definition.regions or definition.successors:
        return None
    if any(isinstance(option, AttrSizedSegments | SameVariadicSize) for option in definition.options):
        return None
    if any(_kind(result) != _SINGLE for _, result in definition.results):
        return None
    return tuple(_kind(operand) for _, operand in definition.operands), len(definition.results)


def init_op(
    op: IRDLOperation,
    operands: Sequence[SSAValue | Sequence[SSAValue] | None] = (),
    result_types: Sequence[Attribute] = (),
    properties: Mapping[str, Attribute | None] | None = None,
) -> None:
    """`IRDLOperation.__init__(op, operands=..., result_types=..., properties=...)`, the same op (module
    docstring)."""
    cls = type(op)
    if cls in _FORMS:
        form = _FORMS[cls]
    else:
        form = _FORMS[cls] = _form(cls)
    if form is not None:
        kinds, results = form
        flat = _flattened(operands, kinds)
        if (
            flat is not None
            and len(result_types) == results
            and not any(result is None or isinstance(result, Sequence) for result in result_types)
        ):
            built = {name: value for name, value in (properties or {}).items() if value is not None}
            Operation.__init__(op, operands=flat, result_types=result_types, properties=built)
            return
    IRDLOperation.__init__(op, operands=operands, result_types=result_types, properties=properties)


def _flattened(
    operands: Sequence[SSAValue | Sequence[SSAValue] | None], kinds: tuple[int, ...]
) -> list[SSAValue] | None:
    """The operand values in order, when every argument has a form `init_op` takes (None otherwise)."""
    if len(operands) != len(kinds):
        return None
    flat: list[SSAValue] = []
    for operand, kind in zip(operands, kinds, strict=True):
        if isinstance(operand, SSAValue):
            flat.append(operand)
        elif operand is None:
            if kind == _SINGLE:
                return None
        elif type(operand) is list or type(operand) is tuple:
            if kind == _SINGLE or (kind == _OPTIONAL and len(operand) > 1):
                return None
            if not all(isinstance(value, SSAValue) for value in operand):
                return None
            flat.extend(operand)
        else:
            return None
    return flat
