"""The torch dialect: one op per ATen overload, on builtin `tensor<...>` types with value semantics.

The op classes are generated from the ATen schemas into `torch_ops.py` by `tools/gen_torch_dialect.py`
(`python -m neuron_mlir.tools.gen_torch_dialect`). This module holds what they share: the base class `TorchOp`
with the one custom syntax, the verifier, the schema metadata, the conversion between ATen argument values and
properties, `op_class_for` and the `Torch` dialect object. Nothing here imports torch.

Naming follows torch-mlir: `aten::mm` is `torch.aten.mm` (class `AtenMmOp`), `aten::add.Tensor` is
`torch.aten.add.Tensor` (`AtenAddTensorOp`). Each class's docstring is its ATen schema.

ATen arguments, in schema order:
    Tensor       an operand                     Tensor?     an optional operand, printed `none` when absent
    Tensor[]     a variadic operand `[%a, %b]`  Tensor?[]   a variadic operand `[%a, none]`, plus the property
                                                            `<name>_none_positions` (array<i64>) saying where
    anything else is a property of the argument's name:
        int, SymInt -> i64 IntegerAttr      float -> f64 FloatAttr     bool -> i1 IntegerAttr (`true`)
        Scalar -> i64, f64 or i1 attr       int[] -> array<i64: ...>   float[] -> array<f64: ...>
        bool[] -> array<i1: ...>            str -> StringAttr          ScalarType -> the element type (`f32`)
        Layout, Device, MemoryFormat -> StringAttr (`"strided"`, `"cpu"`, `"contiguous_format"`)
        Generator? -> always absent: graphs pass None (the default generator); an explicit generator is refused
        X? -> absent when None (when the schema's default is not None, an explicit None is the type `none`)
    SymInt arguments are static i64 properties: the FX importer specialises symbolic sizes to their hints.
ATen results: Tensor -> a tensor result, Tensor[] -> variadic results, SymInt -> `index`, Scalar -> i64/f64/i1.
A Tensor result ATen leaves undefined (`convolution_backward` with `output_mask` false) has the type `none`.

One syntax for every op: tensor arguments in schema order, then the properties that differ from their schema
default (defaults are elided when printing and filled in when parsing), then discardable attributes, then the
functional type of the operands actually present:

    %3 = torch.aten.addmm %b, %x, %w : (tensor<520xf32>, tensor<37x300xf32>, tensor<300x520xf32>) -> tensor<37x520xf32>
    %4 = torch.aten.convolution %x, %w, none {stride = array<i64: 2, 2>, ...} : (...) -> tensor<1x8x4x4xf32>
    %5 = torch.aten.cat [%a, %b] {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>

Interface for the FX importer and the reference semantics:

    cls = op_class_for("aten::add.Tensor")    # also "aten.add.Tensor"; "aten::mm" / "aten.mm.default"
    cls.SCHEMA.args                            # ArgSpec(name, kind, prop, optional, default, kwarg_only, length)
    op = cls.from_args({"self": x, "other": y, "alpha": 2}, [result_type])    # or cls.create(args, types)
    op = cls.from_args(cls.SCHEMA.bind(node_args, node_kwargs), [result_type])  # from an FX node's call
    op.arguments()                             # {"self": x, "other": y, "alpha": 2}
    args, kwargs = op.call_arguments(values)   # the ATen call, with `values` in place of op.operands

Builders take tensor arguments as SSAValues (a list for Tensor[], entries may be None for Tensor?[], None for
an absent Tensor?) and the others as plain Python values (int, float, bool, str, lists of those; a torch dtype,
layout, memory format or device works too, read through its name) or ready-made attributes.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import cached_property
from typing import Any, ClassVar, Self, SupportsFloat, SupportsIndex

from xdsl.dialects.builtin import (
    I1,
    I64,
    AnyFloatConstr,
    ArrayAttr,
    BFloat16Type,
    ComplexType,
    DenseArrayBase,
    DictionaryAttr,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NoneType,
    Signedness,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    AttrConstraint,
    IRDLOperation,
    ParsePropInAttrDict,
    base,
    eq,
    irdl_op_definition,
    irdl_to_attr_constraint,
    opt_prop_def,
    prop_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir.locations import OpDiagnostic, at_source

# --------------------------------------------------------------------------------------------------------------
# Schema metadata


class ArgKind(StrEnum):
    """How an ATen argument appears on the op."""

    TENSOR = "Tensor"
    OPTIONAL_TENSOR = "Tensor?"
    TENSOR_LIST = "Tensor[]"
    OPTIONAL_TENSOR_LIST = "Tensor?[]"
    PROPERTY = "property"


class PropKind(StrEnum):
    """The ATen type of a property argument (SymInt is `int`; `X?` is `ArgSpec.optional`)."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    SCALAR = "Scalar"
    STR = "str"
    SCALAR_TYPE = "ScalarType"
    LAYOUT = "Layout"
    DEVICE = "Device"
    MEMORY_FORMAT = "MemoryFormat"
    INT_LIST = "int[]"
    FLOAT_LIST = "float[]"
    BOOL_LIST = "bool[]"
    GENERATOR = "Generator"
    """Only None: graphs never hold a generator object, so the property is always absent."""


class ResultKind(StrEnum):
    """The ATen type of a result."""

    TENSOR = "Tensor"
    TENSOR_LIST = "Tensor[]"
    SYM_INT = "SymInt"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    SCALAR = "Scalar"


class ShapeRule(StrEnum):
    """Result shape rules the verifier checks for the simple op families."""

    SAME = "same"
    """Every tensor result has the shape of the first tensor operand (unary elementwise, Tensor-Scalar ops)."""
    BROADCAST = "broadcast"
    """The tensor result has the broadcast shape of all tensor operands (Tensor-Tensor elementwise)."""

    # View and reshaping ops: the result shapes follow from the first operand's shape and the op's arguments, as
    # ATen computes them, and the element type is the operand's (view_as_real / view_as_complex change it).
    PERMUTE = "permute"
    """`dims` reorders the dimensions (permute, permute_copy)."""
    RESHAPE = "reshape"
    """`size` is the result shape, with at most one -1 standing for the rest (view, view_copy, _unsafe_view)."""
    EXPAND = "expand"
    """`size` broadcasts the operand: -1 keeps a dimension, new dimensions go in front."""
    TRANSPOSE_2D = "t"
    """A rank-2 operand is transposed; ranks 0 and 1 are kept (t)."""
    SQUEEZE = "squeeze"
    """The dimensions `dim` names (one or a list) are dropped where their size is 1."""
    UNSQUEEZE = "unsqueeze"
    """A dimension of size 1 is inserted at `dim`."""
    SLICE = "slice"
    """Dimension `dim` keeps the elements start:end:step, with ATen's clamping of start and end."""
    SELECT = "select"
    """Dimension `dim` is dropped at `index`."""
    NARROW = "narrow"
    """Dimension `dim` keeps `length` elements from `start` (narrow_copy)."""
    AS_STRIDED = "as_strided"
    """`size` is the result shape, with as many strides as sizes."""
    DIAGONAL = "diagonal"
    """`dim1` and `dim2` are replaced by their diagonal at `offset`, appended last."""
    UNFOLD = "unfold"
    """`dimension` becomes the number of windows of `size` elements `step` apart; the window is appended last."""
    SPLIT = "split"
    """One result per entry of `split_sizes`, which must add up to the size of `dim` (split_with_sizes)."""
    UNBIND = "unbind"
    """One result per element of `dim`, each without that dimension (unbind_copy)."""
    VIEW_AS_REAL = "view_as_real"
    """A complex operand becomes its real element type with a last dimension of 2."""
    VIEW_AS_COMPLEX = "view_as_complex"
    """A float operand with a last dimension of 2 becomes complex without it."""


class _NoDefault(Enum):
    NO_DEFAULT = "NO_DEFAULT"

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault.NO_DEFAULT
"""`ArgSpec.default` of an argument the schema gives no default."""


@dataclass(frozen=True)
class ArgSpec:
    """One ATen argument: `name` is the schema's (and the property's) name."""

    name: str
    kind: ArgKind
    prop: PropKind | None = None
    """The property's ATen type, for `kind == PROPERTY`."""
    optional: bool = False
    """`X?`: the property may be None (absent)."""
    default: object = NO_DEFAULT
    """The schema default as a Python value (lists as tuples, ScalarType as its name such as "int64")."""
    kwarg_only: bool = False
    length: int | None = None
    """The fixed length of a list argument such as `int[2]`."""
    mutable: bool = False
    """ATen writes to this tensor (`Tensor(a!)`); the op itself has value semantics and does not."""
    field: str = ""
    """The Python accessor on the op class; the name itself unless that is a keyword or taken."""

    def __post_init__(self) -> None:
        if not self.field:
            object.__setattr__(self, "field", self.name)

    @property
    def none_positions_name(self) -> str:
        """For a Tensor?[] argument: the property listing the positions that are None."""
        return f"{self.name}_none_positions"


@dataclass(frozen=True)
class ResultSpec:
    """One ATen result; `name` is the schema's, or `result` / `result<i>` when the schema has none."""

    name: str
    kind: ResultKind


@dataclass(frozen=True)
class OpSchema:
    """Everything an op class knows about its ATen overload."""

    signature: str
    """The ATen schema, e.g. `aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`."""
    args: tuple[ArgSpec, ...]
    results: tuple[ResultSpec, ...]
    shape_rule: ShapeRule | None = None
    result_element_types: tuple[tuple[int, Attribute], ...] = ()
    """(result index, element type) pairs fixed by the op's nature, e.g. i1 for comparisons."""
    dtype_sets_result: bool = False
    """The `dtype` argument, when given, is the element type of the (single) tensor result."""

    @cached_property
    def overload_name(self) -> str:
        """`aten::add.Tensor`, or `aten::mm` for a default overload."""
        return self.signature.split("(", 1)[0]

    @cached_property
    def operand_args(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.args if a.kind is not ArgKind.PROPERTY)

    @cached_property
    def property_args(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.args if a.kind is ArgKind.PROPERTY)

    @cached_property
    def arg_names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.args)

    @cached_property
    def property_names(self) -> frozenset[str]:
        """Properties that the custom syntax prints in the attribute dictionary."""
        return frozenset(a.name for a in self.property_args)

    def bind(self, args: Sequence[object], kwargs: Mapping[str, object]) -> dict[str, object]:
        """Name the values of an ATen call (an FX node's `args` and `kwargs`), as `from_args` takes them."""
        positional = [a for a in self.args if not a.kwarg_only]
        if len(args) > len(positional):
            raise ValueError(f"{self.overload_name} takes {len(positional)} positional arguments, got {len(args)}")
        named = {spec.name: value for spec, value in zip(positional, args, strict=False)}
        for name, value in kwargs.items():
            if name not in self.arg_names or name in named:
                raise ValueError(f"{self.overload_name}: unexpected or repeated argument '{name}'")
            named[name] = value
        return named

    @cached_property
    def default_attributes(self) -> Mapping[str, Attribute]:
        """Property name -> the attribute of its schema default (None defaults are absent properties)."""
        defaults: dict[str, Attribute] = {}
        for spec in self.property_args:
            if spec.default is not NO_DEFAULT and spec.default is not None:
                assert spec.prop is not None
                defaults[spec.name] = to_attribute(spec.prop, spec.default, spec.length)
        return defaults


# --------------------------------------------------------------------------------------------------------------
# Python values <-> attributes

_DTYPES: dict[str, Attribute] = {
    "bool": i1,
    "uint8": IntegerType(8, Signedness.UNSIGNED),
    "uint16": IntegerType(16, Signedness.UNSIGNED),
    "uint32": IntegerType(32, Signedness.UNSIGNED),
    "uint64": IntegerType(64, Signedness.UNSIGNED),
    "int8": IntegerType(8),
    "int16": IntegerType(16),
    "int32": IntegerType(32),
    "int64": i64,
    "float16": Float16Type(),
    "bfloat16": BFloat16Type(),
    "float32": Float32Type(),
    "float64": Float64Type(),
    "complex32": ComplexType(Float16Type()),
    "complex64": ComplexType(Float32Type()),
    "complex128": ComplexType(Float64Type()),
    "float8_e4m3fn": Float8E4M3FNType(),
    "float8_e5m2": Float8E5M2Type(),
}
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32"}
_DTYPE_NAMES: dict[Attribute, str] = {attr: name for name, attr in _DTYPES.items()}


def element_type_for_dtype(dtype: object) -> Attribute:
    """The element type of a torch dtype, given as the dtype itself or its name ("float32", "torch.int64")."""
    name = str(dtype).removeprefix("torch.")
    name = _DTYPE_ALIASES.get(name, name)
    if name not in _DTYPES:
        raise ValueError(f"no element type for dtype {dtype!r}")
    return _DTYPES[name]


def dtype_name_for(element_type: Attribute) -> str:
    """The torch dtype name of an element type: `f32` -> "float32" (so `getattr(torch, name)` is the dtype)."""
    if element_type not in _DTYPE_NAMES:
        raise ValueError(f"no torch dtype for element type {element_type}")
    return _DTYPE_NAMES[element_type]


def _int_list(value: object, length: int | None) -> list[int]:
    if isinstance(value, numbers.Integral):
        return [int(value)] * (length or 1)
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"expected an int or a list of ints, got {value!r}")
    values = [operator.index(v) for v in value]
    if length is not None and len(values) == 1:
        return values * length  # `int[2] padding=[1]`: ATen's kernels read one entry as every one
    return values


def _items(value: object, kind: str) -> list[object]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"expected a {kind} or a list of them, got {value!r}")
    return list(value)


def _float(value: object) -> float:
    if not isinstance(value, SupportsFloat | SupportsIndex):
        raise TypeError(f"expected a float, got {value!r}")
    return float(value)


def to_attribute(kind: PropKind, value: object, length: int | None = None) -> Attribute:
    """The property attribute for a Python argument value (an Attribute is taken as it is).

    A plain int (or a one-element list) given for a list argument of fixed length is repeated `length` times
    (a plain int for `int[]` is a one-element list), as ATen's kernels do.
    """
    if isinstance(value, Attribute):
        return value
    match kind:
        case PropKind.INT:
            if not isinstance(value, SupportsIndex):
                raise TypeError(f"expected an int, got {value!r}")
            return IntegerAttr(operator.index(value), i64)
        case PropKind.FLOAT:
            if not isinstance(value, SupportsFloat | SupportsIndex):
                raise TypeError(f"expected a float, got {value!r}")
            return FloatAttr(float(value), f64)
        case PropKind.BOOL:
            return IntegerAttr(int(bool(value)), i1)
        case PropKind.SCALAR:
            if isinstance(value, bool):
                return IntegerAttr(int(value), i1)
            if isinstance(value, numbers.Integral):
                return IntegerAttr(int(value), i64)
            if isinstance(value, numbers.Real):
                return FloatAttr(float(value), f64)
            raise ValueError(f"unsupported Scalar value {value!r}: expected bool, int or float")
        case PropKind.INT_LIST:
            return DenseArrayBase.from_list(i64, _int_list(value, length))
        case PropKind.BOOL_LIST:
            bools = [value] * (length or 1) if isinstance(value, bool) else _items(value, "bool")
            return DenseArrayBase.from_list(i1, [int(bool(v)) for v in bools])
        case PropKind.FLOAT_LIST:
            floats = [value] * (length or 1) if isinstance(value, numbers.Real) else _items(value, "float")
            return DenseArrayBase.from_list(f64, [_float(v) for v in floats])
        case PropKind.STR:
            if not isinstance(value, str):
                raise ValueError(f"expected a str, got {value!r}")
            return StringAttr(value)
        case PropKind.SCALAR_TYPE:
            return element_type_for_dtype(value)
        case PropKind.LAYOUT | PropKind.MEMORY_FORMAT:
            return StringAttr(str(value).removeprefix("torch."))
        case PropKind.DEVICE:
            return StringAttr(str(value))
        case PropKind.GENERATOR:
            raise ValueError(f"a torch.Generator cannot be a property (only None, the default), got {value!r}")


def from_attribute(kind: PropKind, attr: Attribute) -> object:
    """The Python value of a property: the inverse of `to_attribute` (ScalarType stays the element type)."""
    if isinstance(attr, NoneType):
        return None
    match kind:
        case PropKind.INT | PropKind.FLOAT:
            assert isinstance(attr, IntegerAttr | FloatAttr)
            return attr.value.data
        case PropKind.BOOL:
            assert isinstance(attr, IntegerAttr)
            return bool(attr.value.data)
        case PropKind.SCALAR:
            assert isinstance(attr, IntegerAttr | FloatAttr)
            if attr.type == i1:
                return bool(attr.value.data)
            return attr.value.data
        case PropKind.INT_LIST | PropKind.FLOAT_LIST:
            assert isinstance(attr, DenseArrayBase)
            return list(attr.get_values())
        case PropKind.BOOL_LIST:
            assert isinstance(attr, DenseArrayBase)
            return [bool(v) for v in attr.get_values()]
        case PropKind.STR | PropKind.LAYOUT | PropKind.MEMORY_FORMAT | PropKind.DEVICE:
            assert isinstance(attr, StringAttr)
            return attr.data
        case PropKind.SCALAR_TYPE | PropKind.GENERATOR:
            return attr


# --------------------------------------------------------------------------------------------------------------
# Field definitions used by the generated classes

ELEMENT_TYPE: AttrConstraint = base(IntegerType) | AnyFloatConstr | base(ComplexType)
"""Element types a ScalarType property may hold."""

_PROPERTY_CONSTRAINTS: dict[PropKind, AttrConstraint] = {
    PropKind.INT: irdl_to_attr_constraint(IntegerAttr[I64]),
    PropKind.FLOAT: irdl_to_attr_constraint(FloatAttr[Float64Type]),
    PropKind.BOOL: irdl_to_attr_constraint(IntegerAttr[I1]),
    PropKind.SCALAR: irdl_to_attr_constraint(IntegerAttr[I64] | IntegerAttr[I1] | FloatAttr[Float64Type]),
    PropKind.STR: base(StringAttr),
    PropKind.SCALAR_TYPE: ELEMENT_TYPE,
    PropKind.LAYOUT: base(StringAttr),
    PropKind.DEVICE: base(StringAttr),
    PropKind.MEMORY_FORMAT: base(StringAttr),
    PropKind.INT_LIST: irdl_to_attr_constraint(DenseArrayBase[I64]),
    PropKind.FLOAT_LIST: irdl_to_attr_constraint(DenseArrayBase[Float64Type]),
    PropKind.BOOL_LIST: irdl_to_attr_constraint(DenseArrayBase[I1]),
    PropKind.GENERATOR: base(NoneType),
}

# the names torch gives its layouts and memory formats (`torch.strided`, ...), as the properties hold them
_NAMED_VALUES: dict[PropKind, frozenset[str]] = {
    PropKind.LAYOUT: frozenset(
        ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged")
    ),
    PropKind.MEMORY_FORMAT: frozenset(
        ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d", "legacy_contiguous_format")
    ),
}

TENSOR_RESULT: AttrConstraint = base(TensorType) | base(NoneType)
"""A Tensor result: a tensor, or `none` where ATen leaves it undefined (an output mask said not to compute it)."""

RESULT_CONSTRAINTS: dict[ResultKind, AttrConstraint] = {
    ResultKind.TENSOR: TENSOR_RESULT,
    ResultKind.TENSOR_LIST: base(TensorType),
    ResultKind.SYM_INT: base(IndexType),
    ResultKind.INT: eq(i64),
    ResultKind.FLOAT: eq(f64),
    ResultKind.BOOL: eq(i1),
    ResultKind.SCALAR: eq(i64) | eq(f64) | eq(i1),
}
"""The type each kind of result must have."""


def property_def(
    kind: PropKind,
    *,
    default: object = NO_DEFAULT,
    optional: bool = False,
    length: int | None = None,
    prop_name: str | None = None,
) -> Any:
    """The IRDL property of an argument: schema defaults become `default_value`, `X?` an optional property."""
    constraint = _PROPERTY_CONSTRAINTS[kind]
    if default is NO_DEFAULT or default is None:
        if optional:
            return opt_prop_def(constraint, prop_name=prop_name)
        return prop_def(constraint, prop_name=prop_name)
    default_value = to_attribute(kind, default, length)
    if optional:  # `X? x=<not None>`: absent means the default, so None needs a spelling of its own
        return prop_def(constraint | base(NoneType), default_value, prop_name=prop_name)
    return prop_def(constraint, default_value, prop_name=prop_name)


def none_positions_def() -> Any:
    """The property of a Tensor?[] argument listing which positions of the list are None."""
    return prop_def(irdl_to_attr_constraint(DenseArrayBase[I64]), DenseArrayBase.from_list(i64, []))


# --------------------------------------------------------------------------------------------------------------
# The base class


def _shape_text(shape: Sequence[int]) -> str:
    dims = ", ".join("?" if d < 0 else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def _broadcast_shapes(shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """NumPy broadcasting; -1 (dynamic) matches anything. None when the shapes do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[int] = []
    for axis in range(rank):
        dims = {s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0} - {1}
        static = dims - {-1}
        if len(static) > 1:
            return None
        result.append(static.pop() if static else (-1 if -1 in dims else 1))
    return tuple(result)


def _shapes_match(expected: Sequence[int], found: Sequence[int]) -> bool:
    return len(expected) == len(found) and all(e == f or e < 0 or f < 0 for e, f in zip(expected, found, strict=True))


def _list_text(values: Sequence[object]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _ssa_value(op_name: str, arg: str, value: object) -> SSAValue:
    if not isinstance(value, SSAValue):
        raise TypeError(f"{op_name}: argument '{arg}' must be an SSAValue, got {type(value).__name__}")
    return value


def _ssa_list(op_name: str, arg: str, value: object) -> list[SSAValue | None]:
    """A Tensor[] / Tensor?[] argument's entries (None entries are checked by the caller)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{op_name}: argument '{arg}' must be a list of SSAValues, got {type(value).__name__}")
    return [None if v is None else _ssa_value(op_name, arg, v) for v in value]


# the property holding the number an op writes into every element of its result, by op
_FILL_PROPERTIES = {
    "torch.aten.full": "fill_value",
    "torch.aten.full_like": "fill_value",
    "torch.aten.scalar_tensor": "s",
    "torch.aten.fill.Scalar": "value",
}
_FLOAT32_MAX = 3.4028234663852886e38


class TorchOp(IRDLOperation):
    """Base of every generated torch-dialect op: shared syntax, verifier and ATen-argument conversion."""

    SCHEMA: ClassVar[OpSchema]

    # -- building ----------------------------------------------------------------------------------------------

    @classmethod
    def from_args(
        cls,
        args: Mapping[str, object],
        result_types: Sequence[Attribute],
        attributes: Mapping[str, Attribute] | None = None,
    ) -> Self:
        """Build the op from ATen arguments by name (see the module docstring for the value conventions).

        Arguments left out take their schema default; a left-out optional argument is None.
        """
        schema = cls.SCHEMA
        if unknown := sorted(set(args) - schema.arg_names):
            raise ValueError(f"{cls.name}: unknown argument(s) {', '.join(unknown)}; schema: {schema.signature}")
        operands: list[SSAValue | Sequence[SSAValue] | None] = []
        properties: dict[str, Attribute] = {}
        for spec in schema.args:
            if spec.name not in args:
                if spec.default is NO_DEFAULT and not (spec.optional or spec.kind is ArgKind.OPTIONAL_TENSOR):
                    raise ValueError(f"{cls.name}: missing argument '{spec.name}'; schema: {schema.signature}")
                if spec.kind is ArgKind.OPTIONAL_TENSOR:
                    operands.append(None)
                continue
            value = args[spec.name]
            match spec.kind:
                case ArgKind.TENSOR:
                    operands.append(_ssa_value(cls.name, spec.name, value))
                case ArgKind.OPTIONAL_TENSOR:
                    operands.append(None if value is None else _ssa_value(cls.name, spec.name, value))
                case ArgKind.TENSOR_LIST:
                    entries = _ssa_list(cls.name, spec.name, value)
                    if None in entries:
                        raise TypeError(f"{cls.name}: argument '{spec.name}' (Tensor[]) may not hold None")
                    operands.append([v for v in entries if v is not None])
                case ArgKind.OPTIONAL_TENSOR_LIST:
                    entries = _ssa_list(cls.name, spec.name, value)
                    operands.append([v for v in entries if v is not None])
                    nones = [i for i, v in enumerate(entries) if v is None]
                    properties[spec.none_positions_name] = DenseArrayBase.from_list(i64, nones)
                case ArgKind.PROPERTY:
                    assert spec.prop is not None
                    if value is None:
                        if not spec.optional:
                            raise ValueError(f"{cls.name}: argument '{spec.name}' may not be None")
                        if spec.default is not None and spec.default is not NO_DEFAULT:
                            properties[spec.name] = NoneType()
                        continue
                    try:
                        properties[spec.name] = to_attribute(spec.prop, value, spec.length)
                    except (TypeError, ValueError) as error:
                        raise ValueError(f"{cls.name}: argument '{spec.name}': {error}") from error
        return cls(
            operands=operands,
            result_types=cls._grouped_result_types(result_types),
            properties=properties,
            attributes=attributes,
        )

    @classmethod
    def create(  # pyright: ignore[reportIncompatibleMethodOverride]
        cls, args: Mapping[str, object] | None = None, result_types: Sequence[Attribute] = (), **generic: Any
    ) -> Self:
        """`from_args(args, result_types)` when given ATen arguments; xDSL's generic `create(operands=...)`
        (used by the generic parser and `clone`) otherwise."""
        if args is None:
            return super().create(result_types=result_types, **generic)
        if set(generic) - {"attributes"}:
            raise TypeError(f"{cls.name}.create: with ATen arguments, only `attributes` may be given too")
        return cls.from_args(args, result_types, generic.get("attributes"))

    @classmethod
    def _grouped_result_types(cls, result_types: Sequence[Attribute]) -> list[Attribute | list[Attribute]]:
        """Flat result types grouped as the result definitions expect (a list for the Tensor[] result)."""
        results = cls.SCHEMA.results
        if all(r.kind is not ResultKind.TENSOR_LIST for r in results):
            return list(result_types)
        variadic = len(result_types) - (len(results) - 1)
        grouped: list[Attribute | list[Attribute]] = []
        position = 0
        for result in results:
            if result.kind is ResultKind.TENSOR_LIST:
                grouped.append(list(result_types[position : position + variadic]))
                position += variadic
            else:
                grouped.append(result_types[position])
                position += 1
        return grouped

    # -- reading arguments back --------------------------------------------------------------------------------

    def _argument_values(self, values: Sequence[object]) -> Iterator[tuple[ArgSpec, object]]:
        """(spec, value) per schema argument; tensor arguments take their value from `values`, which runs
        parallel to `self.operands`."""
        flat = iter(values)
        for spec in self.SCHEMA.args:
            match spec.kind:
                case ArgKind.TENSOR:
                    yield spec, next(flat)
                case ArgKind.OPTIONAL_TENSOR:
                    yield spec, None if getattr(self, spec.field) is None else next(flat)
                case ArgKind.TENSOR_LIST:
                    yield spec, [next(flat) for _ in getattr(self, spec.field)]
                case ArgKind.OPTIONAL_TENSOR_LIST:
                    present = [next(flat) for _ in getattr(self, spec.field)]
                    yield spec, self._with_nones(spec, present)
                case ArgKind.PROPERTY:
                    assert spec.prop is not None
                    attr = self.properties.get(spec.name)
                    yield spec, None if attr is None else from_attribute(spec.prop, attr)

    def _with_nones(self, spec: ArgSpec, present: Sequence[Any]) -> list[Any]:
        """A Tensor?[] argument's full list: the present entries with None where the property says."""
        nones = set(self._none_positions(spec))
        entries = iter(present)
        return [None if i in nones else next(entries) for i in range(len(present) + len(nones))]

    def _none_positions(self, spec: ArgSpec) -> tuple[int, ...]:
        attr = self.properties.get(spec.none_positions_name)
        return tuple(attr.get_values()) if isinstance(attr, DenseArrayBase) else ()  # pyright: ignore

    def arguments(self) -> dict[str, object]:
        """Schema argument name -> SSAValue (lists for Tensor[], None entries for Tensor?[]) or Python value."""
        return {spec.name: value for spec, value in self._argument_values(self.operands)}

    def call_arguments(
        self, values: Sequence[object], convert: Callable[[ArgSpec, object], object] | None = None
    ) -> tuple[list[object], dict[str, object]]:
        """The ATen call `(args, kwargs)` with `values` (parallel to `self.operands`) in place of the operands.

        `convert(spec, value)` maps each non-None property value, e.g. an element type to a torch dtype.
        """
        args: list[object] = []
        kwargs: dict[str, object] = {}
        for spec, value in self._argument_values(values):
            if convert is not None and spec.kind is ArgKind.PROPERTY and value is not None:
                value = convert(spec, value)
            if spec.kwarg_only:
                kwargs[spec.name] = value
            else:
                args.append(value)
        return args, kwargs

    # -- syntax ------------------------------------------------------------------------------------------------

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        schema = cls.SCHEMA
        items: list[UnresolvedOperand | list[UnresolvedOperand | None] | None] = []
        for index, spec in enumerate(schema.operand_args):
            if index:
                parser.parse_punctuation(",", f" between the tensor arguments of {cls.name}")
            items.append(_parse_operand_item(parser, spec))
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        start = parser.pos
        function_type = parser.parse_function_type()
        unresolved = [u for item in items for u in (item if isinstance(item, list) else [item]) if u is not None]
        operand_types = function_type.inputs.data
        if len(operand_types) != len(unresolved):
            parser.raise_error(
                f"{cls.name} has {len(unresolved)} operands but {len(operand_types)} operand types", start, parser.pos
            )
        result_types = function_type.outputs.data
        has_list_result = any(r.kind is ResultKind.TENSOR_LIST for r in schema.results)
        if len(result_types) < len(schema.results) - has_list_result or (
            not has_list_result and len(result_types) != len(schema.results)
        ):
            expected = f"at least {len(schema.results) - 1}" if has_list_result else str(len(schema.results))
            parser.raise_error(
                f"{cls.name} has {expected} results but {len(result_types)} result types", start, parser.pos
            )
        resolved = iter(parser.resolve_operands(unresolved, operand_types, start))
        operands: list[SSAValue | Sequence[SSAValue] | None] = []
        properties = {k: v for k, v in attributes.items() if k in schema.property_names}
        discardable = {k: v for k, v in attributes.items() if k not in schema.property_names}
        for spec, item in zip(schema.operand_args, items, strict=True):
            if isinstance(item, list):
                operands.append([next(resolved) for u in item if u is not None])
                if spec.kind is ArgKind.OPTIONAL_TENSOR_LIST:
                    nones = [i for i, u in enumerate(item) if u is None]
                    properties[spec.none_positions_name] = DenseArrayBase.from_list(i64, nones)
            else:
                operands.append(None if item is None else next(resolved))
        return cls(
            operands=operands,
            result_types=cls._grouped_result_types(function_type.outputs.data),
            properties=properties,
            attributes=discardable,
        )

    def print(self, printer: Printer) -> None:
        schema = self.SCHEMA
        for index, spec in enumerate(schema.operand_args):
            printer.print_string(", " if index else " ")
            value = getattr(self, spec.field)
            match spec.kind:
                case ArgKind.TENSOR:
                    printer.print_operand(value)
                case ArgKind.OPTIONAL_TENSOR:
                    _print_optional_operand(printer, value)
                case ArgKind.TENSOR_LIST | ArgKind.OPTIONAL_TENSOR_LIST:
                    entries = self._with_nones(spec, value) if spec.kind is ArgKind.OPTIONAL_TENSOR_LIST else value
                    with printer.in_square_brackets():
                        printer.print_list(entries, lambda v: _print_optional_operand(printer, v))
        printed: dict[str, Attribute] = {}
        for spec in schema.property_args:
            attr = self.properties.get(spec.name)
            if attr is not None and attr != schema.default_attributes.get(spec.name):
                printed[spec.name] = attr
        printed.update(self.attributes)
        printer.print_op_attributes(printed)
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)

    # -- verification ------------------------------------------------------------------------------------------

    def verify_(self) -> None:
        schema = self.SCHEMA
        for spec in schema.args:
            if spec.kind is ArgKind.OPTIONAL_TENSOR_LIST:
                self._verify_none_positions(spec)
            elif spec.length is not None:
                self._verify_list_length(spec)
        for index, element_type in schema.result_element_types:
            result = self.results[index]
            found = result.type.get_element_type() if isinstance(result.type, TensorType) else result.type
            if found != element_type:
                raise VerifyException(
                    f"{self.name}: result '{schema.results[index].name}' element type must be {element_type}, "
                    f"found {found}"
                )
        if schema.dtype_sets_result:
            self._verify_dtype_result()
        self._verify_dim_in_range()
        self._verify_named_values()
        self._verify_fill_converts()
        if schema.shape_rule is not None:
            self._verify_shape_rule(schema.shape_rule)

    def _verify_dim_in_range(self) -> None:
        """An `int dim` names a dimension of the tensor operands, whatever the op (passes index shapes with it);
        views check theirs with their shapes, and `unsqueeze` names one of its result."""
        spec = next((s for s in self.SCHEMA.property_args if s.name == "dim" and s.prop is PropKind.INT), None)
        if spec is None or self.SCHEMA.shape_rule in _VIEW_SHAPES or self.name == "torch.aten.unsqueeze":
            return
        attr = self.properties.get("dim")
        tensor_types = [v.type for v in self.operands if isinstance(v.type, TensorType)]
        if not isinstance(attr, IntegerAttr) or not tensor_types:
            return
        # the widest operand: `cat` skips legacy empty 1-d operands, which may come first (a fresh KV cache)
        rank = max(len(t.get_shape()) for t in tensor_types)
        bound = max(rank, 1)  # ATen takes 0 and -1 for a rank-0 tensor
        dim = attr.value.data
        if not -bound <= dim < bound:
            raise VerifyException(f"{self.name}: 'dim' {dim} is out of range for {rank} dimension(s)")

    def _verify_named_values(self) -> None:
        """A layout or memory format names one of torch's (`torch.strided`, `torch.channels_last`, ...): ATen and
        the passes look them up by name."""
        for spec in self.SCHEMA.property_args:
            names = _NAMED_VALUES.get(spec.prop) if spec.prop is not None else None
            attr = self.properties.get(spec.name)
            if names is not None and isinstance(attr, StringAttr) and attr.data not in names:
                kind = "layout" if spec.prop is PropKind.LAYOUT else "memory format"
                raise VerifyException(
                    f"{self.name}: '{spec.name}' \"{attr.data}\" names no torch {kind} ({', '.join(sorted(names))})"
                )

    def _verify_fill_converts(self) -> None:
        """A number written into every element of the result (`full`, `full_like`, `scalar_tensor`, `fill`) must
        convert to the result's element type, as ATen checks before it writes: an integer type holds only finite
        numbers within its range (no rounding into it: int8's -128.5 is refused), float32 every float64 but the
        finite ones beyond its largest (bf16 and fp16 round those to infinity)."""
        name = _FILL_PROPERTIES.get(self.name)
        if name is None or not self.results:
            return
        attr = self.properties.get(name)
        result_type = self.results[0].type
        if not isinstance(attr, FloatAttr | IntegerAttr) or not isinstance(result_type, TensorType):
            return
        element_type, value = result_type.get_element_type(), attr.value.data
        if isinstance(element_type, IntegerType) and element_type.width.data > 1:
            width = element_type.width.data
            unsigned = element_type.signedness.data is Signedness.UNSIGNED
            low, high = (0, 2**width - 1) if unsigned else (-(2 ** (width - 1)), 2 ** (width - 1) - 1)
            fits = (isinstance(value, int) or math.isfinite(value)) and low <= value <= high
        elif isinstance(element_type, Float32Type):
            fits = not math.isfinite(value) or abs(value) <= _FLOAT32_MAX
        else:
            return
        if not fits:
            raise VerifyException(
                f"{self.name}: '{name}' {value} cannot be converted to {element_type} without overflow"
            )

    def _verify_none_positions(self, spec: ArgSpec) -> None:
        positions = self._none_positions(spec)
        size = len(getattr(self, spec.field)) + len(positions)
        if any(not 0 <= p < size for p in positions) or list(positions) != sorted(set(positions)):
            raise VerifyException(
                f"{self.name}: '{spec.none_positions_name}' must hold increasing positions below {size} "
                f"(the length of '{spec.name}'), found {_list_text(positions)}"
            )

    def _verify_list_length(self, spec: ArgSpec) -> None:
        attr = self.properties.get(spec.name)
        if not isinstance(attr, DenseArrayBase):
            return
        found = len(attr)
        # `int[2] stride=[]`: in ATen's pooling ops an empty stride means "the kernel size", and the backward
        # ops receive whatever the forward got, so an empty stride is legal there too
        empty_allowed = spec.default == () or spec.name == "stride"
        if found != spec.length and not (found == 0 and empty_allowed):
            raise VerifyException(f"{self.name}: '{spec.name}' must have {spec.length} elements, found {found}")

    def _verify_dtype_result(self) -> None:
        dtype = self.properties.get("dtype")
        if dtype is None or isinstance(dtype, NoneType):
            return
        result_type = self.results[0].type
        if isinstance(result_type, TensorType) and result_type.get_element_type() != dtype:
            raise VerifyException(
                f"{self.name}: result element type must be {dtype} as 'dtype' says, "
                f"found {result_type.get_element_type()}"
            )

    def _verify_shape_rule(self, rule: ShapeRule) -> None:
        if rule in _VIEW_SHAPES:
            self._verify_view(rule)
            return
        shapes = [v.type.get_shape() for v in self.operands if isinstance(v.type, TensorType)]
        result_types = [r.type for r in self.results if isinstance(r.type, TensorType)]
        if not shapes or not result_types:
            return
        if rule is ShapeRule.SAME:
            for result_type in result_types:
                if not _shapes_match(shapes[0], result_type.get_shape()):
                    raise VerifyException(
                        f"{self.name}: result shape {_shape_text(result_type.get_shape())} is not the operand "
                        f"shape {_shape_text(shapes[0])}"
                    )
            return
        expected = _broadcast_shapes(shapes)
        found = result_types[0].get_shape()
        if expected is None or not _shapes_match(expected, found):
            texts = [_shape_text(s) for s in shapes]
            listed = ", ".join(texts[:-1]) + " and " + texts[-1] if len(texts) > 1 else texts[0]
            raise VerifyException(
                f"{self.name}: result shape {_shape_text(found)} is not the broadcast of operand shapes {listed}"
            )

    def _verify_view(self, rule: ShapeRule) -> None:
        source = self.operands[0].type
        if not isinstance(source, TensorType):
            return
        result_types = [r.type for r in self.results if isinstance(r.type, TensorType)]
        expected_shapes = _VIEW_SHAPES[rule](_ViewArguments(self, tuple(source.get_shape())))
        if len(expected_shapes) != len(result_types):
            raise VerifyException(
                f"{self.name}: {len(result_types)} tensor results, but its arguments make {len(expected_shapes)}"
            )
        element_type = _view_element_type(self.name, rule, source.get_element_type())
        for index, (result_type, expected) in enumerate(zip(result_types, expected_shapes, strict=True)):
            what = "result" if len(result_types) == 1 else f"result {index}"
            found = result_type.get_shape()
            if not _shapes_match(expected, found):
                raise VerifyException(
                    f"{self.name}: {what} shape {_shape_text(found)} is not {_shape_text(expected)}, the shape its "
                    f"arguments give for operand shape {_shape_text(source.get_shape())}"
                )
            if result_type.get_element_type() != element_type:
                raise VerifyException(
                    f"{self.name}: {what} element type must be {element_type}, found {result_type.get_element_type()}"
                )


# --------------------------------------------------------------------------------------------------------------
# Result shapes of the view ops (ShapeRule.PERMUTE ...), as ATen computes them. A dimension of -1 is dynamic:
# it matches anything, and whatever depends on it is dynamic too.

Shape = tuple[int, ...]


@dataclass(frozen=True)
class _ViewArguments:
    """A view op's operand shape and properties, with the argument checks ATen makes, raised as VerifyException."""

    op: TorchOp
    shape: Shape

    @property
    def rank(self) -> int:
        return len(self.shape)

    def fail(self, message: str) -> VerifyException:
        return VerifyException(f"{self.op.name}: {message}")

    def value(self, name: str) -> Any:
        spec = next(s for s in self.op.SCHEMA.property_args if s.name == name)
        assert spec.prop is not None
        attr = self.op.properties.get(name)
        if attr is None:
            return None if spec.default is NO_DEFAULT else spec.default
        return from_attribute(spec.prop, attr)

    def ints(self, name: str) -> list[int]:
        found = self.value(name)
        return [found] if isinstance(found, int) else list(found)

    def dim(self, name: str, dim: int | None = None, rank: int | None = None) -> int:
        """`dim` (the property `name` by default) wrapped into [0, rank); a rank-0 tensor takes 0 and -1."""
        dim = self.value(name) if dim is None else dim
        rank = self.rank if rank is None else rank
        bound = max(rank, 1)
        if not -bound <= dim < bound:
            raise self.fail(f"'{name}' {dim} is out of range for {rank} dimension(s)")
        return dim % bound

    def numel(self) -> int | None:
        """The operand's element count, None when a dimension is dynamic."""
        return None if any(d < 0 for d in self.shape) else _product(self.shape)


def _product(dims: Sequence[int]) -> int:
    result = 1
    for d in dims:
        result *= d
    return result


def _permute_shape(view: _ViewArguments) -> list[Shape]:
    dims = [view.dim("dims", d) for d in view.ints("dims")]
    if sorted(dims) != list(range(view.rank)):
        raise view.fail(f"'dims' {_list_text(view.ints('dims'))} is not a permutation of {view.rank} dimension(s)")
    return [tuple(view.shape[d] for d in dims)]


def _reshape_shape(view: _ViewArguments) -> list[Shape]:
    size = view.ints("size")
    if size.count(-1) > 1 or any(d < -1 for d in size):
        raise view.fail(f"'size' {_list_text(size)} may hold one -1 and otherwise no negative size")
    numel = view.numel()
    known = _product([d for d in size if d != -1])
    if numel is None:
        return [tuple(size)]
    if -1 in size:
        if known == 0 or numel % known:
            raise view.fail(f"'size' {_list_text(size)} cannot hold the operand's {numel} elements")
        return [tuple(numel // known if d == -1 else d for d in size)]
    if known != numel:
        raise view.fail(f"'size' {_list_text(size)} has {known} elements, the operand {numel}")
    return [tuple(size)]


def _expand_shape(view: _ViewArguments) -> list[Shape]:
    size = view.ints("size")
    new = len(size) - view.rank
    if new < 0:
        raise view.fail(f"'size' {_list_text(size)} has fewer dimensions than the operand's {view.rank}")
    result = []
    for index, wanted in enumerate(size):
        if index < new:
            if wanted < 0:
                raise view.fail(f"'size' {_list_text(size)}: a new leading dimension cannot be {wanted}")
            result.append(wanted)
            continue
        own = view.shape[index - new]
        if wanted == -1 or wanted == own:
            result.append(own)
        elif own == 1 or own < 0:
            result.append(wanted)
        else:
            raise view.fail(f"'size' {_list_text(size)} cannot expand the operand shape {_shape_text(view.shape)}")
    return [tuple(result)]


def _transpose_2d_shape(view: _ViewArguments) -> list[Shape]:
    if view.rank > 2:
        raise view.fail(f"the operand has {view.rank} dimensions; t takes at most 2")
    return [tuple(reversed(view.shape))]


def _squeeze_shape(view: _ViewArguments) -> list[Shape]:
    dims = {view.dim("dim", d) for d in view.ints("dim")}
    return [tuple(d for axis, d in enumerate(view.shape) if not (axis in dims and d == 1))]


def _unsqueeze_shape(view: _ViewArguments) -> list[Shape]:
    dim = view.dim("dim", rank=view.rank + 1)
    return [(*view.shape[:dim], 1, *view.shape[dim:])]


def _slice_shape(view: _ViewArguments) -> list[Shape]:
    if view.rank == 0:
        raise view.fail("a 0-d tensor cannot be sliced")
    dim = view.dim("dim")
    step = view.value("step")
    if step <= 0:
        raise view.fail(f"'step' must be positive, found {step}")
    size = view.shape[dim]
    if size < 0:
        return [(*view.shape[:dim], -1, *view.shape[dim + 1 :])]
    start, end = view.value("start"), view.value("end")
    start = 0 if start is None else start + size if start < 0 else start
    end = size if end is None else end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return [(*view.shape[:dim], (end - start + step - 1) // step, *view.shape[dim + 1 :])]


def _select_shape(view: _ViewArguments) -> list[Shape]:
    if view.rank == 0:
        raise view.fail("select needs a tensor of at least one dimension")
    dim = view.dim("dim")
    index, size = view.value("index"), view.shape[dim]
    if size >= 0 and not -size <= index < size:
        raise view.fail(f"'index' {index} is out of range for dimension {dim} of size {size}")
    return [view.shape[:dim] + view.shape[dim + 1 :]]


def _narrow_shape(view: _ViewArguments) -> list[Shape]:
    if view.rank == 0:
        raise view.fail("narrow needs a tensor of at least one dimension")
    dim = view.dim("dim")
    start, length, size = view.value("start"), view.value("length"), view.shape[dim]
    if size >= 0:
        first = start + size if start < 0 else start
        if length < 0 or not 0 <= first <= size or first + length > size:
            raise view.fail(f"'start' {start} and 'length' {length} exceed dimension {dim} of size {size}")
    return [(*view.shape[:dim], length, *view.shape[dim + 1 :])]


def _as_strided_shape(view: _ViewArguments) -> list[Shape]:
    # Strides and the offset address the storage of the operand's base, which a view may exceed: whether they
    # stay inside it is for the lowering to check, which knows the allocation.
    size, stride = view.ints("size"), view.ints("stride")
    if len(size) != len(stride):
        raise view.fail(f"'size' {_list_text(size)} and 'stride' {_list_text(stride)} differ in length")
    if any(d < 0 for d in size):
        raise view.fail(f"'size' {_list_text(size)} holds a negative size")
    return [tuple(size)]


def _diagonal_shape(view: _ViewArguments) -> list[Shape]:
    dim1, dim2 = view.dim("dim1"), view.dim("dim2")
    if view.rank < 2 or dim1 == dim2:
        raise view.fail(f"'dim1' and 'dim2' must be two distinct dimensions of the {view.rank}-d operand")
    offset, rows, columns = view.value("offset"), view.shape[dim1], view.shape[dim2]
    if rows < 0 or columns < 0:
        length = -1
    elif offset >= 0:
        length = max(0, min(rows, columns - offset))
    else:
        length = max(0, min(rows + offset, columns))
    kept = tuple(d for axis, d in enumerate(view.shape) if axis not in (dim1, dim2))
    return [(*kept, length)]


def _unfold_shape(view: _ViewArguments) -> list[Shape]:
    dim = view.dim("dimension")
    size, step = view.value("size"), view.value("step")
    extent = view.shape[dim] if view.rank else 1
    if step <= 0 or size < 0 or (extent >= 0 and size > extent):
        raise view.fail(f"'size' {size} and 'step' {step} do not fit dimension {dim} of size {extent}")
    if view.rank == 0:
        return [(size,)]
    windows = -1 if extent < 0 else (extent - size) // step + 1
    return [(*view.shape[:dim], windows, *view.shape[dim + 1 :], size)]


def _split_shapes(view: _ViewArguments) -> list[Shape]:
    dim = view.dim("dim")
    sizes, extent = view.ints("split_sizes"), view.shape[dim]
    if any(s < 0 for s in sizes) or (extent >= 0 and sum(sizes) != extent):
        raise view.fail(f"'split_sizes' {_list_text(sizes)} must add up to the size {extent} of dimension {dim}")
    return [(*view.shape[:dim], s, *view.shape[dim + 1 :]) for s in sizes]


def _unbind_shapes(view: _ViewArguments) -> list[Shape]:
    dim = view.dim("dim")
    count = view.shape[dim]
    kept = view.shape[:dim] + view.shape[dim + 1 :]
    if count < 0:  # as many results as there are: each has the remaining shape
        return [kept] * len([r for r in view.op.results if isinstance(r.type, TensorType)])
    return [kept] * count


def _view_as_real_shape(view: _ViewArguments) -> list[Shape]:
    return [(*view.shape, 2)]


def _view_as_complex_shape(view: _ViewArguments) -> list[Shape]:
    if not view.shape or view.shape[-1] not in (2, -1):
        raise view.fail(f"the operand's last dimension must be 2, found shape {_shape_text(view.shape)}")
    return [view.shape[:-1]]


_VIEW_SHAPES: dict[ShapeRule, Callable[[_ViewArguments], list[Shape]]] = {
    ShapeRule.PERMUTE: _permute_shape,
    ShapeRule.RESHAPE: _reshape_shape,
    ShapeRule.EXPAND: _expand_shape,
    ShapeRule.TRANSPOSE_2D: _transpose_2d_shape,
    ShapeRule.SQUEEZE: _squeeze_shape,
    ShapeRule.UNSQUEEZE: _unsqueeze_shape,
    ShapeRule.SLICE: _slice_shape,
    ShapeRule.SELECT: _select_shape,
    ShapeRule.NARROW: _narrow_shape,
    ShapeRule.AS_STRIDED: _as_strided_shape,
    ShapeRule.DIAGONAL: _diagonal_shape,
    ShapeRule.UNFOLD: _unfold_shape,
    ShapeRule.SPLIT: _split_shapes,
    ShapeRule.UNBIND: _unbind_shapes,
    ShapeRule.VIEW_AS_REAL: _view_as_real_shape,
    ShapeRule.VIEW_AS_COMPLEX: _view_as_complex_shape,
}


def _view_element_type(op_name: str, rule: ShapeRule, source: Attribute) -> Attribute:
    """The element type of a view's results: the operand's, except for the complex <-> real views."""
    if rule is ShapeRule.VIEW_AS_REAL:
        if not isinstance(source, ComplexType):
            raise VerifyException(f"{op_name}: the operand must be complex, found {source}")
        return source.element_type
    if rule is ShapeRule.VIEW_AS_COMPLEX:
        if not isinstance(source, Float16Type | Float32Type | Float64Type):
            raise VerifyException(f"{op_name}: the operand must be f16, f32 or f64, found {source}")
        return ComplexType(source)
    return source


def _print_optional_operand(printer: Printer, value: SSAValue | None) -> None:
    if value is None:
        printer.print_string("none")
    else:
        printer.print_operand(value)


def _parse_operand_item(parser: Parser, spec: ArgSpec) -> UnresolvedOperand | list[UnresolvedOperand | None] | None:
    """One tensor argument in the custom syntax: `%x`, `none` (Tensor?), `[%a, %b]` or `[%a, none]` (Tensor?[])."""

    def optional_operand() -> UnresolvedOperand | None:
        if parser.parse_optional_keyword("none") is not None:
            return None
        return parser.parse_unresolved_operand()

    match spec.kind:
        case ArgKind.TENSOR:
            return parser.parse_unresolved_operand(f"operand expected for '{spec.name}'")
        case ArgKind.OPTIONAL_TENSOR:
            return optional_operand()
        case ArgKind.TENSOR_LIST:
            return list(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_unresolved_operand))
        case _:
            return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, optional_operand)


# --------------------------------------------------------------------------------------------------------------
# Registry

_OP_CLASSES: list[type[Operation]] = []
_BY_NAME: dict[str, type[TorchOp]] = {}


def register_op_classes(classes: Sequence[type[TorchOp]]) -> None:
    """Called once by the generated `torch_ops` module with its classes."""
    _OP_CLASSES.extend(classes)
    _BY_NAME.update((cls.name, cls) for cls in classes)


PROCESS_GROUPS_ATTR = "neuron.process_groups"
"""The module attribute that gives the ranks of each process group the module's collectives name (their
`group_name`): `{"<group name>" = array<i64: ranks...>}`. The frontend resolves the names when it imports a graph."""


SIZE_ARGUMENTS_ATTR = "neuron.size_arguments"
"""The function attribute naming the integer arguments a program takes at each call: the actual sizes of the
dimensions a size bucket pads, `[["s0", lower, upper], ...]` in call order. The function is compiled for
`upper` (the bucket's size); each call passes a value in `[lower, upper]`. convert-torch-to-tile makes them
`index` arguments of the function, and the translation to a program its scalar inputs."""


@dataclass(frozen=True)
class SizeArgument:
    """One entry of `SIZE_ARGUMENTS_ATTR`: a call passes `name` a value in `[lower, upper]`."""

    name: str
    lower: int
    upper: int


def size_arguments(function: Operation) -> list[SizeArgument]:
    """The size arguments `function` declares (`SIZE_ARGUMENTS_ATTR`), in call order; [] when it declares none.
    Raises an OpDiagnostic at `function` naming the entry and the rule it breaks: each is `["name", lower, upper]`
    with a unique name and integer bounds, 1 <= lower <= upper."""

    def refused(rule: str) -> OpDiagnostic:
        name = function.properties.get("sym_name") or function.attributes.get("sym_name")
        where = f"@{name.data}" if isinstance(name, StringAttr) else function.name
        return OpDiagnostic(f"{where}: {SIZE_ARGUMENTS_ATTR} {rule}{at_source(function)}", function)

    table = function.attributes.get(SIZE_ARGUMENTS_ATTR)
    if table is None:
        return []
    if not isinstance(table, ArrayAttr):
        raise refused('must be an array of ["name", lower, upper] entries')
    entries: list[SizeArgument] = []
    for index, entry in enumerate(table.data):
        fields = entry.data if isinstance(entry, ArrayAttr) else ()
        name, lower, upper = fields if len(fields) == 3 else (None, None, None)
        if not (
            isinstance(name, StringAttr)
            and all(isinstance(b, IntegerAttr) and isinstance(b.type, IntegerType) for b in (lower, upper))
        ):
            raise refused(f'entry {index} must be ["name", lower, upper] with integer bounds, not {entry}')
        low, high = lower.value.data, upper.value.data  # type: ignore[union-attr]
        if not 1 <= low <= high:
            raise refused(f"entry {index} ({name.data}) must have 1 <= lower <= upper, not [{low}, {high}]")
        if any(e.name == name.data for e in entries):
            raise refused(f"names {name.data} twice")
        entries.append(SizeArgument(name.data, low, high))
    return entries


SIZE_BOUNDS_ATTR = "neuron.size_bounds"
"""The op attribute naming, per dimension of the op's first result, the size argument (`SIZE_ARGUMENTS_ATTR`)
whose value at a call bounds that dimension's real extent (`""` for a dimension no argument bounds). Elements at
or beyond the bound are padding: a lowering may leave them unwritten, since the size buckets keep padding out of
every real element (docs/dynamic-shapes.md). Passes that rebuild an op may drop it: the op then writes all of
its elements, as it did before."""

PADDED_KEYS_ATTR = "neuron.padded_keys"
"""The attribute of a flash attention op whose keys a size bucket pads: the size argument (`SIZE_ARGUMENTS_ATTR`)
whose value at a call is the number of real keys. Keys at and past it are padding that may hold anything, even
NaN (rows the bounded nests before the op left unwritten); their mask entries are -inf, and the lowering sets
their key and value rows to 0 on chip, so that no padded row reaches a real output (0 * NaN is NaN). Unlike
`SIZE_BOUNDS_ATTR` it must not be dropped: a pass that rebuilds the op keeps its attributes."""


# The functional collectives that exchange data, and the collective each is (`runtime.collectives`).
COLLECTIVE_KINDS: dict[str, str] = {
    "torch.c10d_functional.all_reduce": "all_reduce",
    "torch.c10d_functional.all_gather_into_tensor": "all_gather",
    "torch.c10d_functional.reduce_scatter_tensor": "reduce_scatter",
    "torch.c10d_functional.all_to_all_single": "all_to_all",
    "torch.c10d_functional.broadcast": "broadcast",
}
# The coalesced forms: one call exchanging a list of tensors, each as the single form would (one collective each).
COALESCED_COLLECTIVE_KINDS: dict[str, str] = {
    "torch.c10d_functional.all_reduce_coalesced": "all_reduce",
    "torch.c10d_functional.all_gather_into_tensor_coalesced": "all_gather",
    "torch.c10d_functional.reduce_scatter_tensor_coalesced": "reduce_scatter",
}


def all_to_all_splits(op: Operation) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The element counts an `all_to_all_single` sends to and receives from each rank (its row splits times a
    row's elements) when it names uneven splits; None for equal blocks. The op's lists must already be checked
    (one count per rank, adding up to the tensors' rows): an empty list means equal splits of its tensor."""
    arguments = op.arguments()  # type: ignore[attr-defined]
    sizes = [list(arguments[name] or []) for name in ("input_split_sizes", "output_split_sizes")]
    if not any(sizes):
        return None
    counts = []
    for listed, value in zip(sizes, (op.operands[0], op.results[0]), strict=True):
        value_type = value.type
        assert isinstance(value_type, TensorType)
        shape = value_type.get_shape()
        rows, row = (shape[0], math.prod(shape[1:])) if shape else (1, 1)
        other = sizes[1] if listed is sizes[0] else sizes[0]
        listed = listed or [rows // len(other)] * len(other)
        counts.append(tuple(int(split) * row for split in listed))
    if len(set(counts[0] + counts[1])) == 1:
        return None  # equal after all
    return counts[0], counts[1]


def process_group_ranks(op: Operation, name: str) -> tuple[int, ...] | None:
    """The ranks of the process group `name` as the module holding `op` records them (`PROCESS_GROUPS_ATTR`),
    None when it does not."""
    module: Operation = op
    while not isinstance(module, ModuleOp):
        parent = module.parent_op()
        if parent is None:
            return None
        module = parent
    table = module.attributes.get(PROCESS_GROUPS_ATTR)
    ranks = table.data.get(name) if isinstance(table, DictionaryAttr) else None
    if not isinstance(ranks, DenseArrayBase):
        return None
    return tuple(int(rank) for rank in ranks.get_values())


def op_class_for(overload: str) -> type[TorchOp] | None:
    """The op class of an ATen overload: "aten::add.Tensor", "aten.add.Tensor", "aten::mm", "aten.mm.default"
    (`str(torch.ops.aten.mm.default)` works too), or of a functional collective ("_c10d_functional.all_reduce"). None
    when the dialect has no such op."""
    text = str(overload).strip()
    namespace, separator, rest = text.partition("::")
    if not separator:
        namespace, _, rest = text.partition(".")
    if namespace not in ("aten", "_c10d_functional") or not rest:
        return None
    return _BY_NAME.get(f"torch.{namespace.lstrip('_')}." + rest.removesuffix(".default"))


def all_op_classes() -> tuple[type[TorchOp], ...]:
    """Every op class of the dialect, sorted by op name."""
    return tuple(sorted(_BY_NAME.values(), key=lambda cls: cls.name))


@irdl_op_definition
class NkiKernelOp(IRDLOperation):
    """A call of an NKI kernel registered as a torch op (`neuron_mlir.as_torch_op`): `kernel` is the op's
    qualified name ("mylib::rms_norm"), `scalars` its non-tensor arguments by parameter name, `fingerprint` a
    digest of the kernel's source (so that a program compiled for one version of the kernel is not reused for
    another). The tensor operands are the kernel's tensor parameters in order; the results its outputs.

    ```mlir
    %y = torch.nki_kernel %x, %w {kernel = "mylib::rms_norm", scalars = {eps = 1.0e-06 : f64}, fingerprint = "..."}
        : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    ```
    """

    name = "torch.nki_kernel"

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    kernel = prop_def(StringAttr)
    scalars = prop_def(DictionaryAttr)
    fingerprint = prop_def(StringAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$inputs attr-dict `:` functional-type($inputs, $outputs)"

    def __init__(
        self,
        kernel: str,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        scalars: Mapping[str, Attribute],
        fingerprint: str,
    ) -> None:
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(result_types)],
            properties={
                "kernel": StringAttr(kernel),
                "scalars": DictionaryAttr(dict(scalars)),
                "fingerprint": StringAttr(fingerprint),
            },
        )

    def arguments(self) -> dict[str, Any]:
        """As the lowerings read a torch op's arguments: the tensor operands under `inputs`."""
        return {"inputs": list(self.inputs)}

    @staticmethod
    def scalar_values_of(scalars: DictionaryAttr) -> dict[str, int | float | bool]:
        """The kernel's non-tensor arguments (the `scalars` of a torch or tile `nki_kernel`) as Python values."""
        values: dict[str, int | float | bool] = {}
        for key, attr in scalars.data.items():
            if isinstance(attr, FloatAttr):
                values[key] = float(attr.value.data)
            elif isinstance(attr, IntegerAttr):
                width = attr.type.width.data if isinstance(attr.type, IntegerType) else 64
                values[key] = bool(attr.value.data) if width == 1 else int(attr.value.data)
        return values


# The generated module subclasses TorchOp and registers its classes above. `Torch` holds `_OP_CLASSES` itself,
# so the dialect is complete even when `torch_ops` is imported first and this module finishes before it does.
import neuron_mlir.ir.dialects.torch_ops  # noqa: E402, F401

_OP_CLASSES.append(NkiKernelOp)  # the one op not generated from an ATen schema
Torch = Dialect("torch", _OP_CLASSES, [])
