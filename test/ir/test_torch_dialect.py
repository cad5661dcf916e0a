"""The torch dialect: builders, lookup, property conversion, verifiers, syntax round trips and ATen semantics."""

from __future__ import annotations

import operator
import re
import subprocess
import sys
import textwrap
from io import StringIO
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import (
    BFloat16Type,
    Builtin,
    ComplexType,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NoneType,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.dialects.func import Func
from xdsl.ir import SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.test_value import create_ssa_value

from neuron_mlir.ir.dialects import torch_ops
from neuron_mlir.ir.dialects.torch import (
    NO_DEFAULT,
    ArgKind,
    PropKind,
    Torch,
    TorchOp,
    all_op_classes,
    dtype_name_for,
    element_type_for_dtype,
    from_attribute,
    op_class_for,
    to_attribute,
)
from neuron_mlir.ir.semantics.torch import TorchInterpretationError, run_torch_function

LIT_DIR = Path(__file__).resolve().parents[1] / "lit" / "dialects" / "torch"


def tensor(*shape: int, element_type=f32) -> TensorType:
    return TensorType(element_type, shape)


def value(*shape: int, element_type=f32):
    return create_ssa_value(tensor(*shape, element_type=element_type))


def context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Torch):
        ctx.load_dialect(dialect)
    return ctx


def parse(text: str) -> ModuleOp:
    module = Parser(context(), text).parse_module()
    module.verify()
    return module


def generic(module: ModuleOp) -> str:
    stream = StringIO()
    Printer(stream=stream, print_generic_format=True, print_debuginfo=True).print_op(module)
    return stream.getvalue()


def custom(module: ModuleOp) -> str:
    stream = StringIO()
    Printer(stream=stream, print_debuginfo=True).print_op(module)
    return stream.getvalue()


# -- import cost and registry -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first_import",
    ["neuron_mlir.ir.dialects.torch", "neuron_mlir.ir.dialects.torch_ops"],
)
def test_import_does_not_load_torch_and_is_complete_in_either_order(first_import: str) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        import xdsl.dialects.builtin, xdsl.irdl, xdsl.parser, xdsl.printer
        start = time.perf_counter()
        import {first_import}
        elapsed = time.perf_counter() - start
        from neuron_mlir.ir.dialects.torch import Torch
        from neuron_mlir.ir.dialects.torch_ops import ALL_OPS
        print("torch" in sys.modules, len(list(Torch.operations)), len(ALL_OPS), elapsed)
        """
    )
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    torch_loaded, dialect_ops, generated_ops, elapsed = output.split()
    assert torch_loaded == "False"
    # the generated ops and the one written by hand, torch.nki_kernel (a call of an NKI kernel)
    assert int(dialect_ops) - 1 == int(generated_ops) == len(torch_ops.ALL_OPS)
    assert float(elapsed) < 1.0


def test_op_class_for_spellings() -> None:
    assert op_class_for("aten::add.Tensor") is torch_ops.AtenAddTensorOp
    assert op_class_for("aten.add.Tensor") is torch_ops.AtenAddTensorOp
    assert op_class_for("aten::mm") is torch_ops.AtenMmOp
    assert op_class_for("aten.mm.default") is torch_ops.AtenMmOp
    assert op_class_for(str(torch.ops.aten.mm.default)) is torch_ops.AtenMmOp
    assert op_class_for(str(torch.ops.aten.sum.dim_IntList)) is torch_ops.AtenSumDimIntListOp
    assert op_class_for("aten::_softmax") is torch_ops.Aten_SoftmaxOp
    assert op_class_for("aten::add.out") is None
    assert op_class_for("prims::add") is None
    assert op_class_for("mm") is None


def test_every_class_documents_its_schema_and_matches_its_irdl_definition() -> None:
    reserved = set(vars(TorchOp)) | {"name", "operands", "results", "properties", "attributes", "parent"}
    for cls in all_op_classes():
        schema = cls.SCHEMA
        assert cls.__doc__ == f"`{schema.signature}`"
        # aten::add.Tensor -> torch.aten.add.Tensor; _c10d_functional::all_reduce -> torch.c10d_functional.all_reduce
        assert cls.name == "torch." + schema.overload_name.replace("::", ".").removeprefix("_")
        op_def = cls.get_irdl_definition()
        assert [name for name, _ in op_def.operands] == [a.field for a in schema.operand_args]
        assert schema.property_names <= set(op_def.properties)
        assert len(op_def.results) == len(schema.results)
        fields = [name for name, _ in op_def.operands + op_def.results] + list(op_def.accessor_names)
        assert not set(fields) & reserved, cls.name


# -- builders -----------------------------------------------------------------------------------------------------


def test_from_args_fills_defaults_and_prints_the_shared_syntax() -> None:
    b, x, w = value(520), value(37, 300), value(300, 520)
    op = torch_ops.AtenAddmmOp.from_args({"self": b, "mat1": x, "mat2": w}, [tensor(37, 520)])
    op.verify()
    assert op.properties["beta"] == IntegerAttr(1, i64)
    assert op.properties["alpha"] == IntegerAttr(1, i64)
    assert str(op) == (
        "%0 = torch.aten.addmm %1, %2, %3 : (tensor<520xf32>, tensor<37x300xf32>, tensor<300x520xf32>) "
        "-> tensor<37x520xf32>"
    )
    scaled = torch_ops.AtenAddmmOp.create({"self": b, "mat1": x, "mat2": w, "alpha": 0.5}, [tensor(37, 520)])
    assert scaled.properties["alpha"] == FloatAttr(0.5, f64)
    assert "{alpha = 5.000000e-01 : f64}" in str(scaled)


def test_from_args_optional_and_list_operands() -> None:
    x, w = value(1, 3, 8, 8), value(8, 3, 3, 3)
    conv_args = {
        "input": x,
        "weight": w,
        "bias": None,
        "stride": [1, 1],
        "padding": 0,
        "dilation": (1, 1),
        "transposed": False,
        "output_padding": [0, 0],
        "groups": 1,
    }
    conv = torch_ops.AtenConvolutionOp.from_args(conv_args, [tensor(1, 8, 6, 6)])
    conv.verify()
    assert conv.bias is None
    assert conv.properties["padding"] == DenseArrayBase.from_list(i64, [0])
    assert " %1, %2, none {stride = array<i64: 1, 1>" in str(conv)

    a, c = value(2, 3), value(2, 5)
    cat = torch_ops.AtenCatOp.from_args({"tensors": [a, c], "dim": 1}, [tensor(2, 8)])
    cat.verify()
    assert list(cat.tensors) == [a, c]

    i = value(3, element_type=i64)
    index = torch_ops.AtenIndexTensorOp.from_args({"self": a, "indices": [None, i]}, [tensor(2, 3)])
    index.verify()
    assert index.properties["indices_none_positions"] == DenseArrayBase.from_list(i64, [0])
    assert index.arguments() == {"self": a, "indices": [None, i]}
    assert "torch.aten.index.Tensor %1, [none, %2] : (tensor<2x3xf32>, tensor<3xi64>)" in str(index)


def test_from_args_fixed_length_list_from_an_int() -> None:
    x = value(1, 3, 8, 8)
    pool = torch_ops.AtenAvgPool2dOp.from_args({"self": x, "kernel_size": 2, "padding": 1}, [tensor(1, 3, 5, 5)])
    pool.verify()
    assert pool.arguments()["kernel_size"] == [2, 2]
    assert pool.arguments()["padding"] == [1, 1]
    assert pool.arguments()["stride"] == []


def test_from_args_dtype_layout_device_and_memory_format() -> None:
    size = {"size": [2, 3]}
    by_name = torch_ops.AtenEmptyMemoryFormatOp.from_args(
        {**size, "dtype": "float16", "layout": "strided", "device": "cpu"}, [tensor(2, 3, element_type=Float16Type())]
    )
    from_torch = torch_ops.AtenEmptyMemoryFormatOp.from_args(
        {
            **size,
            "dtype": torch.float16,
            "layout": torch.strided,
            "device": torch.device("cpu"),
            "memory_format": torch.contiguous_format,
        },
        [tensor(2, 3, element_type=Float16Type())],
    )
    for op in (by_name, from_torch):
        op.verify()
        assert op.properties["dtype"] == Float16Type()
        assert op.properties["layout"] == StringAttr("strided")
        assert op.properties["device"] == StringAttr("cpu")
    assert from_torch.properties["memory_format"] == StringAttr("contiguous_format")
    as_attribute = torch_ops.Aten_ToCopyOp.from_args(
        {"self": value(2), "dtype": BFloat16Type()}, [tensor(2, element_type=BFloat16Type())]
    )
    as_attribute.verify()
    assert "{dtype = bf16}" in str(as_attribute)


def test_optional_property_with_a_non_none_default() -> None:
    default = torch_ops.AtenRandpermOp.from_args({"n": 5}, [tensor(5, element_type=i64)])
    explicit_none = torch_ops.AtenRandpermOp.from_args({"n": 5, "dtype": None}, [tensor(5, element_type=i64)])
    assert default.properties["dtype"] == i64
    assert explicit_none.properties["dtype"] == NoneType()
    assert default.arguments()["dtype"] == i64
    assert explicit_none.arguments()["dtype"] is None
    assert "dtype" not in str(default)
    assert "dtype = none" in str(explicit_none)


def test_from_args_errors() -> None:
    x = value(4)
    with pytest.raises(ValueError, match="missing argument 'other'"):
        torch_ops.AtenAddTensorOp.from_args({"self": x}, [tensor(4)])
    with pytest.raises(ValueError, match="unknown argument"):
        torch_ops.AtenAddTensorOp.from_args({"self": x, "other": x, "beta": 1}, [tensor(4)])
    with pytest.raises(ValueError, match="'alpha' may not be None"):
        torch_ops.AtenAddTensorOp.from_args({"self": x, "other": x, "alpha": None}, [tensor(4)])
    with pytest.raises(TypeError, match="'other' must be an SSAValue"):
        torch_ops.AtenAddTensorOp.from_args({"self": x, "other": 2.0}, [tensor(4)])
    with pytest.raises(ValueError, match="argument 'alpha': unsupported Scalar value"):
        torch_ops.AtenAddTensorOp.from_args({"self": x, "other": x, "alpha": 1j}, [tensor(4)])


def test_generic_create_and_clone_still_work() -> None:
    x = value(4)
    op = torch_ops.AtenReluOp.create(operands=[x], result_types=[tensor(4)])
    op.verify()
    clone = op.clone()
    assert isinstance(clone, torch_ops.AtenReluOp)
    assert clone.operands == op.operands


def test_call_arguments_rebuild_the_aten_call() -> None:
    x, y = value(4), value(4)
    op = torch_ops.AtenAddTensorOp.from_args({"self": x, "other": y, "alpha": 3}, [tensor(4)])
    assert op.call_arguments(["X", "Y"]) == (["X", "Y"], {"alpha": 3})
    norm = torch_ops.AtenNativeLayerNormOp.from_args(
        {"input": x, "normalized_shape": [4], "weight": None, "bias": y, "eps": 1e-5},
        [tensor(4), tensor(1), tensor(1)],
    )
    assert norm.call_arguments(["X", "B"]) == (["X", [4], None, "B", 1e-5], {})
    to_copy = torch_ops.Aten_ToCopyOp.from_args(
        {"self": x, "dtype": "float16"}, [tensor(4, element_type=Float16Type())]
    )
    args, kwargs = to_copy.call_arguments(["X"], lambda spec, v: f"<{spec.name}>")
    assert args == ["X"]
    assert kwargs == {
        "dtype": "<dtype>",
        "layout": None,
        "device": None,
        "pin_memory": None,
        "non_blocking": "<non_blocking>",
        "memory_format": None,
    }


def test_schema_metadata() -> None:
    schema = torch_ops.AtenAddTensorOp.SCHEMA
    assert schema.signature == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert [(a.name, a.kind) for a in schema.args] == [
        ("self", ArgKind.TENSOR),
        ("other", ArgKind.TENSOR),
        ("alpha", ArgKind.PROPERTY),
    ]
    alpha = schema.args[2]
    assert (alpha.prop, alpha.default, alpha.kwarg_only) == (PropKind.SCALAR, 1, True)
    pool = torch_ops.AtenAvgPool2dOp.SCHEMA.args
    assert [(a.name, a.length, a.default) for a in pool[1:4]] == [
        ("kernel_size", 2, NO_DEFAULT),
        ("stride", 2, ()),
        ("padding", 2, (0, 0)),
    ]
    index = torch_ops.AtenIndexTensorOp.SCHEMA.args[1]
    assert index.kind is ArgKind.OPTIONAL_TENSOR_LIST
    assert [r.name for r in torch_ops.AtenMaxDimOp.SCHEMA.results] == ["values", "indices"]


# -- property conversion ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "python", "attribute"),
    [
        (PropKind.INT, 3, IntegerAttr(3, i64)),
        (PropKind.INT, 9223372036854775807, IntegerAttr(9223372036854775807, i64)),
        (PropKind.FLOAT, 0.5, FloatAttr(0.5, f64)),
        (PropKind.BOOL, True, IntegerAttr(1, i1)),
        (PropKind.SCALAR, 2, IntegerAttr(2, i64)),
        (PropKind.SCALAR, -1.5, FloatAttr(-1.5, f64)),
        (PropKind.SCALAR, False, IntegerAttr(0, i1)),
        (PropKind.SCALAR, float("-inf"), FloatAttr(float("-inf"), f64)),
        (PropKind.INT_LIST, [1, 0], DenseArrayBase.from_list(i64, [1, 0])),
        (PropKind.BOOL_LIST, [True, False, True], DenseArrayBase.from_list(i1, [1, 0, 1])),
        (PropKind.FLOAT_LIST, [2.0, 0.5], DenseArrayBase.from_list(f64, [2.0, 0.5])),
        (PropKind.STR, "tanh", StringAttr("tanh")),
        (PropKind.LAYOUT, "strided", StringAttr("strided")),
        (PropKind.DEVICE, "cpu", StringAttr("cpu")),
        (PropKind.MEMORY_FORMAT, "channels_last", StringAttr("channels_last")),
    ],
)
def test_property_conversion_round_trips(kind: PropKind, python: object, attribute) -> None:
    assert to_attribute(kind, python) == attribute
    assert from_attribute(kind, attribute) == python
    assert type(from_attribute(kind, attribute)) is type(python)


@pytest.mark.parametrize(
    ("dtype", "element_type"),
    [
        (torch.float32, Float32Type()),
        (torch.bfloat16, BFloat16Type()),
        (torch.float16, Float16Type()),
        (torch.float64, f64),
        (torch.int64, i64),
        (torch.int32, IntegerType(32)),
        (torch.int8, IntegerType(8)),
        (torch.uint8, IntegerType(8, Signedness.UNSIGNED)),
        (torch.bool, i1),
        (torch.complex64, ComplexType(Float32Type())),
    ],
)
def test_dtypes(dtype: torch.dtype, element_type) -> None:
    assert element_type_for_dtype(dtype) == element_type
    assert to_attribute(PropKind.SCALAR_TYPE, dtype) == element_type
    assert getattr(torch, dtype_name_for(element_type)) is dtype


def test_unknown_dtype() -> None:
    with pytest.raises(ValueError, match="no element type for dtype"):
        element_type_for_dtype("torch.quint8")
    with pytest.raises(ValueError, match="no torch dtype"):
        dtype_name_for(IndexType())


# -- verifiers ----------------------------------------------------------------------------------------------------


def verify_message(op) -> str:
    with pytest.raises(VerifyException) as info:
        op.verify()
    return str(info.value)


def test_broadcast_and_same_shape_rules() -> None:
    add = torch_ops.AtenAddTensorOp.from_args({"self": value(37, 520), "other": value(10)}, [tensor(37, 520)])
    assert verify_message(add) == (
        "torch.aten.add.Tensor: result shape (37, 520) is not the broadcast of operand shapes (37, 520) and (10,)"
    )
    ok = torch_ops.AtenWhereSelfOp.from_args(
        {"condition": value(4, 1, element_type=i1), "self": value(1, 5), "other": value(5)}, [tensor(4, 5)]
    )
    ok.verify()
    zero_d = torch_ops.AtenMulTensorOp.from_args({"self": value(3, 2), "other": value()}, [tensor(3, 2)])
    zero_d.verify()
    dynamic = torch_ops.AtenMulTensorOp.from_args({"self": value(-1, 2), "other": value(2)}, [tensor(7, 2)])
    dynamic.verify()
    relu = torch_ops.AtenReluOp.from_args({"self": value(4, 3)}, [tensor(3, 4)])
    assert verify_message(relu) == "torch.aten.relu: result shape (3, 4) is not the operand shape (4, 3)"


def test_result_element_type_rules() -> None:
    eq = torch_ops.AtenEqScalarOp.from_args({"self": value(4), "other": 0}, [tensor(4)])
    assert verify_message(eq) == "torch.aten.eq.Scalar: result 'result' element type must be i1, found f32"
    topk = torch_ops.AtenTopkOp.from_args({"self": value(8), "k": 2}, [tensor(2), tensor(2, element_type=i64)])
    topk.verify()
    to_copy = torch_ops.Aten_ToCopyOp.from_args({"self": value(4), "dtype": "float16"}, [tensor(4)])
    assert verify_message(to_copy) == "torch.aten._to_copy: result element type must be f16 as 'dtype' says, found f32"


# (overload, operand shape, arguments): valid and invalid calls of every view op with a shape rule, ATen's edge
# cases included. ATen decides: where it computes a shape the verifier must accept exactly that shape and no
# other; where it raises, the verifier must reject the call whatever result type it is given.
VIEW_CASES = [
    ("aten::permute", (2, 3, 4), {"dims": [2, 0, 1]}),
    ("aten::permute", (2, 3, 4), {"dims": [-1, 0, 1]}),
    ("aten::permute", (16, 32), {"dims": [1, 0]}),
    ("aten::permute", (2, 3), {"dims": [1, 1]}),
    ("aten::permute", (2, 3), {"dims": [0, 1, 2]}),
    ("aten::permute_copy", (2, 3, 4), {"dims": [1, 2, 0]}),
    ("aten::view", (2, 3, 4), {"size": [-1, 4]}),
    ("aten::view", (2, 3, 4), {"size": [6, 5]}),
    ("aten::view", (2, 3, 4), {"size": [-1, -1]}),
    ("aten::view", (2, 3, 4), {"size": [-1, 5]}),
    ("aten::view", (0, 3), {"size": [3, 0]}),
    ("aten::_unsafe_view", (2, 3, 4), {"size": [24]}),
    ("aten::view_copy", (2, 3, 4), {"size": [2, 12]}),
    ("aten::expand", (4, 1), {"size": [2, -1, 5]}),
    ("aten::expand", (4, 1), {"size": [3, 5]}),
    ("aten::expand", (4, 1), {"size": [5]}),
    ("aten::expand", (4, 1), {"size": [-1, 4, 1]}),
    ("aten::t", (5, 7), {}),
    ("aten::t", (5,), {}),
    ("aten::t", (), {}),
    ("aten::t", (2, 3, 4), {}),
    ("aten::squeeze.dim", (1, 3, 1), {"dim": -1}),
    ("aten::squeeze.dim", (1, 3, 1), {"dim": 1}),
    ("aten::squeeze.dim", (1, 3, 1), {"dim": 3}),
    ("aten::squeeze.dim", (), {"dim": -1}),
    ("aten::squeeze.dims", (1, 3, 1), {"dim": [0, 1, 2]}),
    ("aten::squeeze.dims", (1, 3, 1), {"dim": [0, 5]}),
    ("aten::unsqueeze", (5, 7), {"dim": -1}),
    ("aten::unsqueeze", (5, 7), {"dim": 2}),
    ("aten::unsqueeze", (5, 7), {"dim": 3}),
    ("aten::unsqueeze", (), {"dim": 0}),
    ("aten::slice.Tensor", (5, 7), {"dim": 1, "start": -3, "end": 2**63 - 1, "step": 2}),
    ("aten::slice.Tensor", (5, 7), {"dim": 0, "start": 4, "end": 2}),
    ("aten::slice.Tensor", (5, 7), {"dim": 0, "start": -100, "end": -1}),
    ("aten::slice.Tensor", (5, 7), {"dim": 1, "start": 9}),
    ("aten::slice.Tensor", (5, 7), {"dim": 1, "step": 0}),
    ("aten::slice.Tensor", (5, 7), {"dim": 2}),
    ("aten::select.int", (2, 3, 4), {"dim": -2, "index": -1}),
    ("aten::select.int", (2, 3, 4), {"dim": 0, "index": 2}),
    ("aten::select.int", (2, 3, 4), {"dim": 0, "index": -3}),
    ("aten::narrow_copy", (5, 7), {"dim": 1, "start": 2, "length": 5}),
    ("aten::narrow_copy", (5, 7), {"dim": 1, "start": -2, "length": 2}),
    ("aten::narrow_copy", (5, 7), {"dim": 1, "start": 3, "length": 5}),
    ("aten::as_strided", (5, 7), {"size": [4, 4], "stride": [8, 1], "storage_offset": 3}),
    ("aten::as_strided", (5, 7), {"size": [0, 9], "stride": [100, 100]}),
    ("aten::as_strided", (5, 7), {"size": [4, 4], "stride": [8]}),
    ("aten::as_strided_copy", (5, 7), {"size": [5], "stride": [7]}),
    ("aten::diagonal", (2, 3, 4), {"offset": 1, "dim1": 2, "dim2": 1}),
    ("aten::diagonal", (2, 3, 4), {"offset": -5, "dim1": 1, "dim2": 2}),
    ("aten::diagonal", (3, 4), {"offset": 0, "dim1": 1, "dim2": -1}),
    ("aten::unfold", (5, 7), {"dimension": 1, "size": 3, "step": 2}),
    ("aten::unfold", (5, 7), {"dimension": 0, "size": 6, "step": 1}),
    ("aten::unfold", (), {"dimension": 0, "size": 1, "step": 1}),
    ("aten::split_with_sizes", (2, 3, 4), {"split_sizes": [1, 3], "dim": -1}),
    ("aten::split_with_sizes", (2, 3, 4), {"split_sizes": [1, 2], "dim": -1}),
    ("aten::unbind_copy.int", (2, 3, 4), {"dim": 1}),
    ("aten::view_as_real", (4, 3), {"dtype": torch.complex64}),
    ("aten::view_as_complex", (4, 3, 2), {}),
    ("aten::view_as_complex", (4, 3), {}),
]


def _aten_view(overload: str, shape: tuple[int, ...], arguments: dict):
    """ATen's results for the call (a list of tensors), or None when ATen refuses it."""
    arguments = dict(arguments)
    dtype = arguments.pop("dtype", torch.float32)
    packet, _, name = overload.removeprefix("aten::").partition(".")
    aten = getattr(getattr(torch.ops.aten, packet), name or "default")
    try:
        results = aten(torch.zeros(shape, dtype=dtype), **arguments)
    except (RuntimeError, IndexError, ValueError):
        return None
    return list(results) if isinstance(results, list | tuple) else [results]


@pytest.mark.parametrize(("overload", "shape", "arguments"), VIEW_CASES, ids=lambda case: str(case))
def test_view_rules_agree_with_aten(overload: str, shape: tuple[int, ...], arguments: dict) -> None:
    cls = op_class_for(overload)
    assert cls is not None
    assert cls.SCHEMA.shape_rule is not None
    element_type = element_type_for_dtype(arguments.get("dtype", torch.float32))
    operand = value(*shape, element_type=element_type)
    properties = {k: v for k, v in arguments.items() if k != "dtype"}
    expected = _aten_view(overload, shape, arguments)
    if expected is None:
        with pytest.raises(VerifyException, match=re.escape(cls.name + ":")):
            cls.from_args({"self": operand, **properties}, [tensor(*shape, element_type=element_type)]).verify()
        return
    types = [tensor(*r.shape, element_type=element_type_for_dtype(r.dtype)) for r in expected]
    cls.from_args({"self": operand, **properties}, types).verify()
    # one more element in the last dimension (a 0-d result becomes 1-d)
    wrong = [
        tensor(*r.shape[:-1], r.shape[-1] + 1, element_type=t.element_type) if r.dim() else tensor(2)
        for r, t in zip(expected, types, strict=True)
    ]
    assert cls.name in verify_message(cls.from_args({"self": operand, **properties}, wrong))
    if overload not in ("aten::view_as_real", "aten::view_as_complex"):
        other_type = [tensor(*r.shape, element_type=f64) for r in expected]
        assert "element type must be f32, found f64" in verify_message(
            cls.from_args({"self": operand, **properties}, other_type)
        )


def test_every_view_op_has_a_shape_rule() -> None:
    """Every op whose ATen schema returns an alias of its input (`Tensor(a)`), or copies one, has its result shapes
    checked (alias, detach and _conj keep the operand's shape)."""
    for cls in all_op_classes():
        signature = cls.SCHEMA.signature
        returns = signature.rsplit("->", 1)[1]
        is_view = "(a)" in returns or "(a)[]" in returns
        is_view_copy = cls.name.removeprefix("torch.aten.").split(".")[0] in (
            "view_copy",
            "permute_copy",
            "as_strided_copy",
            "narrow_copy",
            "unbind_copy",
            "_unsafe_view",
        )
        if is_view or is_view_copy:
            assert cls.SCHEMA.shape_rule is not None, cls.name
    message = verify_message(
        torch_ops.AtenPermuteOp.from_args({"self": value(16, 32), "dims": [1, 0]}, [tensor(32, 17)])
    )
    assert message == (
        "torch.aten.permute: result shape (32, 17) is not (32, 16), the shape its arguments give for operand "
        "shape (16, 32)"
    )


def test_list_length_and_none_positions_rules() -> None:
    pool = torch_ops.AtenAvgPool2dOp.from_args(
        {"self": value(1, 1, 4, 4), "kernel_size": [2, 2, 2]}, [tensor(1, 1, 2, 2)]
    )
    assert verify_message(pool) == "torch.aten.avg_pool2d: 'kernel_size' must have 2 elements, found 3"
    index = torch_ops.AtenIndexTensorOp.from_args(
        {"self": value(4), "indices": [None, value(2, element_type=i64)]}, [tensor(2)]
    )
    index.properties["indices_none_positions"] = DenseArrayBase.from_list(i64, [1, 0])
    assert "'indices_none_positions' must hold increasing positions below 3" in verify_message(index)


# -- syntax -------------------------------------------------------------------------------------------------------


def lit_chunks(name: str) -> list[str]:
    return (LIT_DIR / name).read_text().split("// -----")


@pytest.mark.parametrize("chunk", lit_chunks("ops.mlir"))
def test_custom_generic_custom_round_trip_is_identical(chunk: str) -> None:
    module = parse(chunk)
    text = custom(module)
    via_generic = parse(generic(module))
    assert custom(via_generic) == text
    assert custom(parse(text)) == text
    assert via_generic.is_structurally_equivalent(module)


def test_properties_and_attributes_survive_round_trip() -> None:
    module = parse(
        """
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = torch.aten.add.Scalar %x {other = 2 : i64, alpha = 1 : i64, a.b = [1, 2]} : (tensor<4xf32>) -> tensor<4xf32>
          func.return %0 : tensor<4xf32>
        }
        """
    )
    op = next(op for op in module.walk() if isinstance(op, TorchOp))
    assert set(op.properties) == {"other", "alpha"}
    assert set(op.attributes) == {"a.b"}
    assert "{other = 2 : i64, a.b = [1 : i64, 2 : i64]}" in custom(module)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("torch.aten.add.Tensor %x, %x : (tensor<4xf32>) -> tensor<4xf32>", "has 2 operands but 1 operand types"),
        ("torch.aten.add.Tensor %x : (tensor<4xf32>) -> tensor<4xf32>", "between the tensor arguments"),
        ("torch.aten.mm %x, none : (tensor<4xf32>) -> tensor<4xf32>", "operand expected for 'mat2'"),
        ("torch.aten.cat %x : (tensor<4xf32>) -> tensor<4xf32>", "'[' expected"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        Parser(context(), f"func.func @f(%x: tensor<4xf32>) {{\n %0 = {text}\n func.return\n}}").parse_module()


# -- reference semantics ------------------------------------------------------------------------------------------

SEMANTICS_SOURCE = """
func.func @main(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %b: tensor<5xf32>, %i: tensor<2xi64>, %h: tensor<4x3xbf16>)
    -> (tensor<4x5xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<4xi64>, tensor<4x3xbf16>, tensor<4x3xf32>, index,
        tensor<3xf32>, tensor<4x3xf32>, tensor<4x2xf32>) {
  %c = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %j = arith.constant dense<[0, 2]> : tensor<2xi64>
  %0 = torch.aten.addmm %b, %x, %w {alpha = 2 : i64} : (tensor<5xf32>, tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %1 = torch.aten.index.Tensor %x, [%i] : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %2:2 = torch.aten.max.dim %x {dim = 1 : i64} : (tensor<4x3xf32>) -> (tensor<4xf32>, tensor<4xi64>)
  %3 = torch.aten.gelu %h {approximate = "tanh"} : (tensor<4x3xbf16>) -> tensor<4x3xbf16>
  %4 = torch.aten.mul.Tensor %x, %c : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %5 = torch.aten.sym_size.int %x {dim = 0 : i64} : (tensor<4x3xf32>) -> index
  %6:2 = torch.aten.split_with_sizes %c {split_sizes = array<i64: 1, 2>} : (tensor<3xf32>) -> (tensor<1xf32>, tensor<2xf32>)
  %7 = torch.aten.cat [%6#1, %6#0] : (tensor<2xf32>, tensor<1xf32>) -> tensor<3xf32>
  %8 = torch.aten.index_put %x, [%i], %1 {accumulate = true} : (tensor<4x3xf32>, tensor<2xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %9 = torch.aten.index.Tensor %x, [none, %j] : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  func.return %0, %1, %2#0, %2#1, %3, %4, %5, %7, %8, %9
      : tensor<4x5xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<4xi64>, tensor<4x3xbf16>, tensor<4x3xf32>, index,
        tensor<3xf32>, tensor<4x3xf32>, tensor<4x2xf32>
}
"""


def test_semantics_match_aten() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    i = np.array([2, 0], dtype=np.int64)
    h = rng.standard_normal((4, 3)).astype(ml_dtypes.bfloat16)
    outputs = run_torch_function(parse(SEMANTICS_SOURCE), [x, w, b, i, h])

    tx, tw, tb, ti = map(torch.from_numpy, (x, w, b, i))
    th = torch.from_numpy(h.view(np.int16)).view(torch.bfloat16)
    values, indices = torch.ops.aten.max.dim(tx, 1)
    expected = [
        torch.ops.aten.addmm(tb, tx, tw, alpha=2),
        tx[ti],
        values,
        indices,
        torch.ops.aten.gelu(th, approximate="tanh"),
        tx * torch.tensor([1.0, 2.0, 3.0]),
        4,
        torch.tensor([2.0, 3.0, 1.0]),
        torch.ops.aten.index_put(tx, [ti], tx[ti], accumulate=True),
        tx[:, [0, 2]],
    ]
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        if not isinstance(want, torch.Tensor):
            assert got == want
            assert got.dtype == np.int64
        elif want.dtype == torch.bfloat16:
            assert got.dtype == ml_dtypes.bfloat16
            np.testing.assert_array_equal(got.astype(np.float32), want.float().numpy())
        else:
            np.testing.assert_array_equal(got, want.numpy())


def test_semantics_keep_value_semantics_for_mutating_overloads() -> None:
    module = parse(
        """
        func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>, %out: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
          %0 = torch.aten.atan2.out %x, %y, %out : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
          func.return %0, %out : tensor<3xf32>, tensor<3xf32>
        }
        """
    )
    assert torch_ops.AtenAtan2OutOp.SCHEMA.args[2].mutable
    x, y, out = np.array([1.0, -1.0, 0.5], np.float32), np.ones(3, np.float32), np.zeros(3, np.float32)
    result, untouched = run_torch_function(module, [x, y, out])
    np.testing.assert_array_equal(result, torch.atan2(torch.from_numpy(x), torch.from_numpy(y)).numpy())
    np.testing.assert_array_equal(untouched, out)


def test_semantics_reject_unknown_ops_and_wrong_types() -> None:
    wrong_dtype = parse(
        """
        func.func @main(%x: tensor<4xf32>) -> tensor<4xf64> {
          %0 = "torch.aten.neg"(%x) : (tensor<4xf32>) -> tensor<4xf64>
          func.return %0 : tensor<4xf64>
        }
        """
    )
    with pytest.raises(TorchInterpretationError, match=r"torch\.aten\.neg: ATen computed \(4,\) torch.float32"):
        run_torch_function(wrong_dtype, [np.zeros(4, np.float32)])
    with pytest.raises(TorchInterpretationError, match="argument 0 is tensor<4xf32>"):
        run_torch_function(wrong_dtype, [np.zeros(4, np.float64)])
    with pytest.raises(TorchInterpretationError, match="no func\\.func @other"):
        run_torch_function(wrong_dtype, [], entry="other")
    foreign = parse(
        """
        func.func @main(%x: i32) -> i32 {
          %0 = arith.addi %x, %x : i32
          func.return %0 : i32
        }
        """
    )
    with pytest.raises(TorchInterpretationError, match="arith\\.addi has no torch-level semantics"):
        run_torch_function(foreign, [np.array(1, np.int32)])


# -- the importer-facing interface on a real decomposed graph ------------------------------------------------------


def import_graph(gm: torch.fx.GraphModule) -> ModuleOp:
    """A minimal FX importer built only on the dialect's interface: op_class_for, SCHEMA.bind, from_args.

    FX graphs pass Python numbers to Tensor arguments (`aten.mul.Tensor(x, 0.5)`); they become 0-d constants of
    the first tensor argument's element type, which keeps ATen's wrapped-number type promotion for these cases.
    """
    from xdsl.builder import Builder
    from xdsl.dialects.arith import ConstantOp
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.rewriter import InsertPoint

    def type_of(meta: torch.Tensor) -> TensorType:
        return TensorType(element_type_for_dtype(meta.dtype), tuple(meta.shape))

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outputs = output.args[0] if isinstance(output.args[0], tuple | list) else [output.args[0]]
    outputs = [n for n in outputs if n is not None]  # backward graphs return None for inputs without gradient
    function = FuncOp(
        "main", ([type_of(n.meta["val"]) for n in placeholders], [type_of(n.meta["val"]) for n in outputs])
    )
    builder = Builder(InsertPoint.at_end(function.body.block))
    values = dict(zip(placeholders, function.body.block.args, strict=True))

    def lookup(arg: object) -> object:
        if isinstance(arg, torch.fx.Node):
            return values[arg]
        if isinstance(arg, list | tuple):
            return [lookup(a) for a in arg]
        return arg

    for node in gm.graph.nodes:
        if node.op == "get_attr":
            constant = getattr(gm, node.target)
            # type_of gives a tensor type of a NumPy dtype: one xDSL's dense attribute takes
            attr = DenseIntOrFPElementsAttr.from_list(type_of(constant), constant.flatten().tolist())  # type: ignore[type-var]
            values[node] = builder.insert(ConstantOp(attr)).result  # type: ignore[arg-type]
            continue
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            values[node] = values[node.args[0]][node.args[1]]
            continue
        cls = op_class_for(str(node.target))
        assert cls is not None, node.target
        metas = node.meta["val"] if isinstance(node.meta["val"], tuple | list) else [node.meta["val"]]
        args = cls.SCHEMA.bind([lookup(a) for a in node.args], {k: lookup(v) for k, v in node.kwargs.items()})
        for spec in cls.SCHEMA.operand_args:
            number = args.get(spec.name)
            if spec.kind is ArgKind.TENSOR and isinstance(number, int | float):
                like = next(v for v in args.values() if isinstance(v, SSAValue))
                scalar_type = TensorType(like.type.get_element_type(), ())
                constant = ConstantOp(DenseIntOrFPElementsAttr.from_list(scalar_type, [number]))
                args[spec.name] = builder.insert(constant).result
        op = builder.insert(cls.from_args(args, [type_of(m) for m in metas]))
        values[node] = op.results if len(op.results) > 1 else op.results[0]
    builder.insert(ReturnOp(*[values[n] for n in outputs]))
    module = ModuleOp([function])
    module.verify()
    return module


def test_a_decomposed_fx_graph_imports_round_trips_and_runs() -> None:
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    def model(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.layer_norm(torch.relu(x @ w + b), (5,))
        return torch.cat([h.softmax(-1), h[:, :2].float() * 0.5], dim=1).sum(0)

    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (3, 5), (5,))]
    table = core_aten_decompositions()
    gm = make_fx(model, decomposition_table=table)(*map(torch.from_numpy, inputs))  # type: ignore[arg-type]  # torch's own table
    module = import_graph(gm)
    names = {op.name for op in module.walk() if isinstance(op, TorchOp)}
    assert {"torch.aten.mm", "torch.aten.native_layer_norm", "torch.aten.cat", "torch.aten._softmax"} <= names
    reparsed = parse(generic(module))
    assert custom(reparsed) == custom(module)
    (result,) = run_torch_function(reparsed, inputs)
    np.testing.assert_allclose(result, model(*map(torch.from_numpy, inputs)).numpy(), rtol=1e-6, atol=1e-6)


def test_every_graph_of_the_discovery_models_imports_and_runs_like_aten() -> None:
    """Forward and backward graphs of small real models (tools/discover_aten_ops.py) verify, round-trip, and
    compute through the dialect's semantics exactly what the graph computes."""
    from neuron_mlir.ir.semantics.torch import to_numpy
    from neuron_mlir.tools import discover_aten_ops

    failures: list[str] = []
    checked: list[str] = []

    def check(gm: torch.fx.GraphModule, args: list, tag: str) -> None:
        try:
            module = parse(generic(import_graph(gm)))
            torch.manual_seed(0)
            outputs = run_torch_function(module, [to_numpy(a) for a in args])
            torch.manual_seed(0)
            expected = [e for e in gm(*args) if e is not None]
            for got, want in zip(outputs, expected, strict=True):
                np.testing.assert_allclose(
                    got.astype(np.float64), to_numpy(want).astype(np.float64), rtol=1e-6, atol=1e-6
                )
            checked.append(tag)
        except Exception as error:  # collected: an exception here would surface inside the compiled model
            failures.append(f"{tag}: {error!r}")

    discover_aten_ops.discover(on_graph=check)
    assert not failures, "\n".join(failures)
    assert len(checked) >= 2 * len(discover_aten_ops.MODELS)


def test_bind_names_positional_and_keyword_arguments() -> None:
    schema = torch_ops.AtenAddTensorOp.SCHEMA
    assert schema.bind(["x", "y"], {"alpha": 2}) == {"self": "x", "other": "y", "alpha": 2}
    with pytest.raises(ValueError, match="takes 2 positional arguments"):
        schema.bind(["x", "y", 2], {})
    with pytest.raises(ValueError, match="unexpected or repeated argument 'self'"):
        schema.bind(["x"], {"self": "x"})
