"""Generate the torch dialect's op classes (`ir/dialects/torch_ops.py`) from the ATen schemas.

    python -m neuron_mlir.tools.gen_torch_dialect            # rewrite ir/dialects/torch_ops.py
    python -m neuron_mlir.tools.gen_torch_dialect --check    # exit 1 when the checked-in file is stale

One class per overload: every overload tagged `torch.Tag.core`, plus `EXTRA_OVERLOADS`, the non-core ones that
survive AOTAutograd with `core_aten_decompositions()` in real graphs (found with `tools/discover_aten_ops.py`).
The per-family verifier tables (`SAME_SHAPE`, `BROADCAST`, `RESULT_ELEMENT_TYPES`) live here too. The output is
sorted by op name and depends only on the torch version, so regenerating is a no-op until torch changes.
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from torchgen.model import BaseType, FunctionSchema, ListType, OptionalType, Type
from xdsl.irdl import IRDLOperation

# Non-core overloads the dialect offers, with where each was seen. "discover:" entries come from
# `python -m neuron_mlir.tools.discover_aten_ops` on torch 2.13 (model, and train = forward + backward graphs or
# eval = the no_grad inference graph); the others are named by DESIGN.md section 6 or by torch-mlir users as
# surviving in real model graphs, although the small models of the discovery script do not produce them.
EXTRA_OVERLOADS: dict[str, str] = {
    "aten::_native_batch_norm_legit_functional": "discover: cnn (train), BatchNorm2d in training mode",
    "aten::_scaled_dot_product_flash_attention_for_cpu": (
        "discover: sdpa (train, eval), F.scaled_dot_product_attention once the frontend drops core-ATen's "
        "decomposition of it (wrong for training, DESIGN.md section 6)"
    ),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "discover: sdpa (train)",
    "aten::_transformer_encoder_layer_fwd": "discover: transformer (eval), nn.TransformerEncoderLayer fast path",
    "aten::_unsafe_view": "real graphs (spec): reshape of a fresh matmul result",
    "aten::_weight_norm_interface": "DESIGN.md: weight-norm models; forward partner of the backward below",
    "aten::_weight_norm_interface_backward": "discover: weight_norm (train)",
    "aten::detach": "real graphs (spec)",
    "aten::empty_permuted": "discover: moe_routing (train, eval), empty_like of a transposed tensor; DESIGN.md MoE",
    "aten::histc": "discover: moe_routing (train, eval), per-expert token counts; DESIGN.md MoE",
    "aten::lift_fresh_copy": "discover: constants (train, eval), torch.tensor(...) built inside forward",
    "aten::linalg_vector_norm": "discover: weight_norm (train, eval), the norm of weight_norm's forward",
    "aten::max": "discover: moe_routing (train, eval), full reduction torch.max(t)",
    "aten::mkldnn_rnn_layer": "discover: lstm_gru (eval), nn.LSTM under no_grad; DESIGN.md",
    "aten::native_batch_norm_backward": "real graphs (spec): batch norm backward",
    "aten::new_empty_strided": "discover: moe_routing (train), backward of a copy into a transposed buffer",
    "aten::t": "real graphs (spec)",
    "aten::threshold_backward": "real graphs (spec): ReLU backward",
}

def _overloads(names: str) -> frozenset[str]:
    """`"add.Tensor mm"` -> {"aten::add.Tensor", "aten::mm"}."""
    return frozenset(f"aten::{name}" for name in names.split())


# Result shape rules the verifier checks (ShapeRule in ir/dialects/torch.py).
SAME_SHAPE = _overloads(
    "abs acos acosh asin asinh atan atanh bitwise_not ceil cos cosh erf exp expm1 floor isinf isnan log log10 "
    "log1p log2 logical_not neg reciprocal relu round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc "
    "gelu leaky_relu hardtanh elu clamp clone alias detach lift_fresh_copy _to_copy fill.Scalar full_like "
    "_softmax _log_softmax cumsum native_dropout copy "
    "add.Scalar sub.Scalar mul.Scalar div.Scalar div.Scalar_mode fmod.Scalar remainder.Scalar "
    "pow.Tensor_Scalar pow.Scalar bitwise_and.Scalar bitwise_or.Scalar bitwise_xor.Scalar "
    "eq.Scalar ne.Scalar lt.Scalar le.Scalar gt.Scalar ge.Scalar "
    "scatter.value scatter.src scatter_add scatter_reduce.two index_put select_scatter slice_scatter"
)
BROADCAST = _overloads(
    "add.Tensor sub.Tensor mul.Tensor div.Tensor div.Tensor_mode fmod.Tensor remainder.Tensor "
    "pow.Tensor_Tensor maximum minimum atan2 bitwise_and.Tensor bitwise_or.Tensor bitwise_xor.Tensor "
    "eq.Tensor ne.Tensor lt.Tensor le.Tensor gt.Tensor ge.Tensor logical_and logical_or logical_xor "
    "where.self clamp.Tensor threshold_backward"
)

# Result element types fixed by the op's nature: overload -> ((result index, element type), ...).
_BOOLEAN = _overloads(
    "eq.Tensor eq.Scalar ne.Tensor ne.Scalar lt.Tensor lt.Scalar le.Tensor le.Scalar gt.Tensor gt.Scalar "
    "ge.Tensor ge.Scalar logical_and logical_or logical_xor logical_not isinf isnan"
)
_INDEX_RESULT = _overloads("argmax argmin nonzero")
_VALUES_AND_INDICES = _overloads("sort topk max.dim min.dim max_pool2d_with_indices max_pool3d_with_indices")
RESULT_ELEMENT_TYPES: dict[str, tuple[tuple[int, str], ...]] = {
    **{name: ((0, "i1"),) for name in _BOOLEAN},
    **{name: ((0, "i64"),) for name in _INDEX_RESULT},
    **{name: ((1, "i64"),) for name in _VALUES_AND_INDICES},
    "aten::native_dropout": ((1, "i1"),),  # the keep mask
}

# Ops whose `dtype` argument is NOT the result's element type (a complex dtype gives a real norm).
DTYPE_NOT_RESULT: frozenset[str] = frozenset({"aten::linalg_vector_norm"})

# c10::ScalarType, Layout and MemoryFormat codes, as JIT schemas give defaults of those types.
_SCALAR_TYPE_NAMES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
    9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16",
}  # fmt: skip
_LAYOUT_NAMES = {0: "strided", 1: "sparse_coo"}
_MEMORY_FORMAT_NAMES = {0: "contiguous_format", 1: "preserve_format", 2: "channels_last", 3: "channels_last_3d"}

_PROPERTY_KINDS = {
    "int": "INT", "SymInt": "INT", "float": "FLOAT", "bool": "BOOL", "Scalar": "SCALAR", "str": "STR",
    "ScalarType": "SCALAR_TYPE", "Layout": "LAYOUT", "Device": "DEVICE", "MemoryFormat": "MEMORY_FORMAT",
}  # fmt: skip
_LIST_KINDS = {"int": "INT_LIST", "SymInt": "INT_LIST", "float": "FLOAT_LIST", "bool": "BOOL_LIST"}
_RESULT_KINDS = {
    "SymInt": "SYM_INT", "int": "INT", "float": "FLOAT", "bool": "BOOL", "SymBool": "BOOL", "Scalar": "SCALAR",
}  # fmt: skip

# Names a generated field must not take: Python keywords, Operation/IRDLOperation members, and TorchOp's own.
_TORCH_OP_MEMBERS = {"SCHEMA", "from_args", "create", "arguments", "call_arguments", "parse", "print", "verify_"}
_RESERVED = set(keyword.kwlist) | set(dir(IRDLOperation)) | _TORCH_OP_MEMBERS


@dataclass(frozen=True)
class _Arg:
    name: str
    field: str
    kind: str  # ArgKind member
    prop: str | None = None  # PropKind member
    optional: bool = False
    default: object = None
    has_default: bool = False
    kwarg_only: bool = False
    length: int | None = None
    mutable: bool = False


@dataclass(frozen=True)
class _Result:
    name: str
    field: str
    kind: str  # ResultKind member


@dataclass(frozen=True)
class _OpModel:
    overload: str  # aten::add.Tensor
    op_name: str  # torch.aten.add.Tensor
    class_name: str  # AtenAddTensorOp
    signature: str
    args: tuple[_Arg, ...]
    results: tuple[_Result, ...]
    pure: bool


def _camel(text: str) -> str:
    """`_native_batch_norm` -> `_NativeBatchNorm`, `resize_` -> `Resize_` (outer underscores kept, as torch-mlir
    does)."""
    core = text.strip("_")
    leading = len(text) - len(text.lstrip("_"))
    trailing = len(text) - len(text.rstrip("_"))
    return "_" * leading + "".join(p[:1].upper() + p[1:] for p in core.split("_")) + "_" * trailing


def _field_name(name: str, taken: set[str]) -> str:
    field = name
    while field in _RESERVED or field in taken:
        field += "_"
    taken.add(field)
    return field


def _default_value(arg: torch._C.Argument, prop: str | None) -> object:
    value = arg.default_value
    if value is None:
        return None
    if prop == "SCALAR_TYPE":
        return _SCALAR_TYPE_NAMES[value]
    if prop == "LAYOUT":
        return _LAYOUT_NAMES[value]
    if prop == "MEMORY_FORMAT":
        return _MEMORY_FORMAT_NAMES[value]
    if prop == "FLOAT":
        return float(value)
    if prop == "FLOAT_LIST":
        return tuple(float(v) for v in value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _classify_arg(type_: Type, where: str) -> tuple[str, str | None, bool, int | None]:
    """(ArgKind, PropKind, optional, fixed length) of a torchgen argument type."""
    optional = isinstance(type_, OptionalType)
    inner = type_.elem if isinstance(type_, OptionalType) else type_
    if isinstance(inner, BaseType):
        base = inner.name.name
        if base == "Tensor":
            return ("OPTIONAL_TENSOR" if optional else "TENSOR"), None, False, None
        if base in _PROPERTY_KINDS:
            return "PROPERTY", _PROPERTY_KINDS[base], optional, None
    if isinstance(inner, ListType) and not optional:
        elem = inner.elem
        if isinstance(elem, BaseType) and elem.name.name == "Tensor":
            return "TENSOR_LIST", None, False, None
        if isinstance(elem, OptionalType) and isinstance(elem.elem, BaseType) and elem.elem.name.name == "Tensor":
            return "OPTIONAL_TENSOR_LIST", None, False, None
    if isinstance(inner, ListType) and isinstance(inner.elem, BaseType) and inner.elem.name.name in _LIST_KINDS:
        length = inner.size if inner.size is not None and inner.size >= 2 else None
        return "PROPERTY", _LIST_KINDS[inner.elem.name.name], optional, length
    raise NotImplementedError(f"{where}: argument type {type_} has no representation in the torch dialect")


def _classify_result(type_: Type, where: str) -> str:
    if isinstance(type_, BaseType):
        if type_.name.name == "Tensor":
            return "TENSOR"
        if type_.name.name in _RESULT_KINDS:
            return _RESULT_KINDS[type_.name.name]
    if isinstance(type_, ListType) and isinstance(type_.elem, BaseType) and type_.elem.name.name == "Tensor":
        return "TENSOR_LIST"
    raise NotImplementedError(f"{where}: result type {type_} has no representation in the torch dialect")


def describe(op: torch._ops.OpOverload) -> _OpModel:
    """The generator's model of one ATen overload."""
    schema = op._schema
    signature = str(schema)
    parsed = FunctionSchema.parse(signature)
    overload = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    name, _, overload_name = overload.removeprefix("aten::").partition(".")
    taken: set[str] = set()
    args = []
    for parsed_arg, jit_arg in zip(parsed.arguments.flat_all, schema.arguments, strict=True):
        kind, prop, optional, length = _classify_arg(parsed_arg.type, overload)
        args.append(
            _Arg(
                name=jit_arg.name,
                field=_field_name(jit_arg.name, taken),
                kind=kind,
                prop=prop,
                optional=optional,
                default=_default_value(jit_arg, prop) if jit_arg.has_default_value() else None,
                has_default=jit_arg.has_default_value(),
                kwarg_only=jit_arg.kwarg_only,
                length=length,
                mutable=parsed_arg.annotation is not None and parsed_arg.annotation.is_write,
            )
        )
    for arg in args:  # reserve the implied property names of Tensor?[] arguments
        if arg.kind == "OPTIONAL_TENSOR_LIST":
            _field_name(f"{arg.name}_none_positions", taken)
    results = []
    for index, ret in enumerate(parsed.returns):
        result_name = ret.name or ("result" if len(parsed.returns) == 1 else f"result{index}")
        results.append(_Result(result_name, _field_name(result_name, taken), _classify_result(ret.type, overload)))
    if sum(r.kind == "TENSOR_LIST" for r in results) > 1:
        raise NotImplementedError(f"{overload}: more than one Tensor[] result")
    return _OpModel(
        overload=overload,
        op_name=f"torch.aten.{name}" + (f".{overload_name}" if overload_name else ""),
        class_name=f"Aten{_camel(name)}{_camel(overload_name)}Op",
        signature=signature,
        args=tuple(args),
        results=tuple(results),
        pure=torch.Tag.nondeterministic_seeded not in op.tags,
    )


def core_overloads() -> list[torch._ops.OpOverload]:
    """Every ATen overload tagged `torch.Tag.core`, sorted by qualified name.

    Enumerated from the dispatcher, not `dir(torch.ops.aten)`, which lists only the packets loaded so far and so
    depends on what the process did before (in a fresh process it misses four of torch 2.13's 193 core overloads:
    adaptive_avg_pool1d, avg_pool1d, resize_, sym_is_contiguous).
    """
    registered = [name for name in torch._C._dispatch_get_all_op_names() if name.startswith("aten::")]
    packet_names = sorted({name.removeprefix("aten::").split(".")[0] for name in registered})
    found = []
    for packet_name in packet_names:
        packet = getattr(torch.ops.aten, packet_name)
        for overload_name in packet.overloads():
            op = getattr(packet, overload_name)
            if torch.Tag.core in op.tags:
                found.append(op)
    return sorted(found, key=lambda op: op.name())


def selected_overloads() -> list[torch._ops.OpOverload]:
    """Every core overload plus the extras, sorted by qualified name."""
    chosen = {op.name(): op for op in core_overloads()}
    for name in EXTRA_OVERLOADS:
        packet_name, _, overload_name = name.removeprefix("aten::").partition(".")
        op = getattr(getattr(torch.ops.aten, packet_name), overload_name or "default")
        if torch.Tag.core in op.tags:
            raise ValueError(f"{name} is core: remove it from EXTRA_OVERLOADS")
        chosen[op.name()] = op
    return [chosen[name] for name in sorted(chosen)]


# --------------------------------------------------------------------------------------------------------------
# Rendering


def _literal(value: object) -> str:
    """A Python literal, with double-quoted strings unless the string holds a double quote (as ruff formats)."""
    if isinstance(value, str) and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return repr(value)


def _render_class(model: _OpModel) -> str:
    schema_args = []
    fields = []
    for arg in model.args:
        options = [_literal(arg.name), f"ArgKind.{arg.kind}"]
        if arg.prop:
            options.append(f"PropKind.{arg.prop}")
        if arg.optional:
            options.append("optional=True")
        if arg.has_default:
            options.append(f"default={_literal(arg.default)}")
        if arg.kwarg_only:
            options.append("kwarg_only=True")
        if arg.length is not None:
            options.append(f"length={arg.length}")
        if arg.mutable:
            options.append("mutable=True")
        if arg.field != arg.name:
            options.append(f"field={_literal(arg.field)}")
        schema_args.append(f"ArgSpec({', '.join(options)})")
        match arg.kind:
            case "TENSOR":
                fields.append(f"{arg.field} = operand_def(TensorType)")
            case "OPTIONAL_TENSOR":
                fields.append(f"{arg.field} = opt_operand_def(TensorType)")
            case "TENSOR_LIST" | "OPTIONAL_TENSOR_LIST":
                fields.append(f"{arg.field} = var_operand_def(TensorType)")
            case _:
                prop_options = [f"PropKind.{arg.prop}"]
                if arg.has_default and arg.default is not None:
                    prop_options.append(f"default={_literal(arg.default)}")
                if arg.optional:
                    prop_options.append("optional=True")
                if arg.field != arg.name:
                    prop_options.append(f"prop_name={_literal(arg.name)}")
                fields.append(f"{arg.field} = property_def({', '.join(prop_options)})")
    for arg in model.args:
        if arg.kind == "OPTIONAL_TENSOR_LIST":
            fields.append(f"{arg.name}_none_positions = none_positions_def()")
    for result in model.results:
        match result.kind:
            case "TENSOR":
                fields.append(f"{result.field} = result_def(TensorType)")
            case "TENSOR_LIST":
                fields.append(f"{result.field} = var_result_def(TensorType)")
            case _:
                fields.append(f"{result.field} = result_def(RESULT_CONSTRAINTS[ResultKind.{result.kind}])")

    schema_options = [
        _literal(model.signature),
        "args=(" + "".join(f"\n            {a}," for a in schema_args) + ("\n        )" if schema_args else ")"),
        "results=(" + " ".join(f'ResultSpec("{r.name}", ResultKind.{r.kind}),' for r in model.results) + ")",
    ]
    if model.overload in SAME_SHAPE:
        schema_options.append("shape_rule=ShapeRule.SAME")
    if model.overload in BROADCAST:
        schema_options.append("shape_rule=ShapeRule.BROADCAST")
    if model.overload in RESULT_ELEMENT_TYPES:
        pairs = " ".join(f"({i}, {t})," for i, t in RESULT_ELEMENT_TYPES[model.overload])
        schema_options.append(f"result_element_types=({pairs})")
    tensor_results = [r for r in model.results if r.kind == "TENSOR"]
    has_dtype = any(a.name == "dtype" and a.prop == "SCALAR_TYPE" for a in model.args)
    if has_dtype and len(model.results) == 1 and tensor_results and model.overload not in DTYPE_NOT_RESULT:
        schema_options.append("dtype_sets_result=True")

    variadic_operands = sum(a.kind != "TENSOR" for a in model.args if a.kind != "PROPERTY")
    lines = [
        "@irdl_op_definition",
        f"class {model.class_name}(TorchOp):",
        '    """`' + model.signature.replace("\\", "\\\\") + '`"""',
        "",
        f'    name = "{model.op_name}"',
        "    SCHEMA: ClassVar[OpSchema] = OpSchema(",
        *(f"        {option}," for option in schema_options),
        "    )",
    ]
    if model.pure:
        lines.append("    traits = traits_def(Pure())")
    if variadic_operands > 1:
        lines.append("    irdl_options = (AttrSizedOperandSegments(as_property=True),)")
    lines.append("")
    lines.extend(f"    {field}" for field in fields)
    return "\n".join(lines)


_IMPORTABLE = {
    "typing": ["ClassVar"],
    "xdsl.dialects.builtin": ["TensorType", "i1", "i64"],
    "xdsl.irdl": [
        "AttrSizedOperandSegments", "irdl_op_definition", "operand_def", "opt_operand_def", "result_def",
        "traits_def", "var_operand_def", "var_result_def",
    ],
    "xdsl.traits": ["Pure"],
    "neuron_mlir.ir.dialects.torch": [
        "RESULT_CONSTRAINTS", "ArgKind", "ArgSpec", "OpSchema", "PropKind", "ResultKind", "ResultSpec", "ShapeRule",
        "TorchOp", "none_positions_def", "property_def", "register_op_classes",
    ],
}  # fmt: skip


def _import_line(module: str, names: list[str]) -> str:
    """One `from` import ordered as ruff's isort does (constants, classes, then functions); several names go one
    per line with a trailing comma, which isort keeps whatever the configured line length."""
    ordered = sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    if len(ordered) == 1:
        return f"from {module} import {ordered[0]}"
    return f"from {module} import (\n" + "".join(f"    {n},\n" for n in ordered) + ")"


def render(overloads: list[torch._ops.OpOverload] | None = None) -> str:
    """The text of `ir/dialects/torch_ops.py`."""
    models = [describe(op) for op in (overloads if overloads is not None else selected_overloads())]
    known = {m.overload for m in models}
    for table in (SAME_SHAPE, BROADCAST, set(RESULT_ELEMENT_TYPES), DTYPE_NOT_RESULT):
        if missing := sorted(set(table) - known):
            raise ValueError(f"verifier tables name overloads the dialect lacks: {missing}")
    class_names = [m.class_name for m in models]
    if len(set(class_names)) != len(class_names):
        raise ValueError("two overloads map to the same class name")
    extras = sum(m.overload in EXTRA_OVERLOADS for m in models)
    body = "\n\n\n".join(_render_class(m) for m in models)
    footer = "ALL_OPS: tuple[type[TorchOp], ...] = (\n" + "".join(f"    {c},\n" for c in class_names) + ")\n"
    footer += "\nregister_op_classes(ALL_OPS)\n"
    used_text = body + footer
    groups = []
    sections = (["typing"], ["xdsl.dialects.builtin", "xdsl.irdl", "xdsl.traits"], ["neuron_mlir.ir.dialects.torch"])
    for section in sections:
        lines = []
        for module in section:
            names = [n for n in _IMPORTABLE[module] if re.search(rf"\b{n}\b", used_text)]
            if names:
                lines.append(_import_line(module, names))
        if lines:
            groups.append("\n".join(lines))
    version = torch.__version__.split("+")[0]
    header = (
        f'"""The torch dialect\'s op classes: GENERATED by tools/gen_torch_dialect.py, do not edit.\n\n'
        f"One class per ATen overload of torch {version}: {len(models) - extras} tagged core and {extras} more that\n"
        "survive core-ATen decomposition in real graphs. Regenerate after changing the generator or torch:\n\n"
        "    python -m neuron_mlir.tools.gen_torch_dialect\n\n"
        "The conventions (properties, syntax, builders) are in `neuron_mlir.ir.dialects.torch`.\n"
        '"""\n\n'
    )
    return header + "\n\n".join(groups) + "\n\n\n" + body + "\n\n\n" + footer


def generated_path() -> Path:
    """Where the generated module lives (ir/dialects/torch_ops.py), found without importing the dialect."""
    spec = importlib.util.find_spec("neuron_mlir.ir.dialects")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations))) / "torch_ops.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the checked-in file is not up to date")
    parser.add_argument("--output", type=Path, default=None, help="write here instead of ir/dialects/torch_ops.py")
    options = parser.parse_args(argv)
    path = options.output or generated_path()
    text = render()
    if options.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run `python -m neuron_mlir.tools.gen_torch_dialect`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.write_text(text)
    print(f"wrote {path} ({text.count('@irdl_op_definition')} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
