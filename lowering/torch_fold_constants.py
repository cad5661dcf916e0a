"""torch-fold-constants: fold the small constants real graphs carry into the ops that use them.

Constants at the torch level are `aten.full` (every element equal: how the importer spells splat tensor
constants, wrapped numbers and `torch.tensor(0.5)` in a forward) and `aten.scalar_tensor`; other tensor
constants are function arguments and stay so.

Input contract: torch-dialect functions as the FX importer produces them.

Output guarantee: the same results, with
- `X.Tensor(x, c)` for a constant `c` whose broadcast does not grow `x` rewritten to `X.Scalar(x, value)` (add,
  sub, mul, div, comparisons, pow, remainder, fmod, bitwise ops; with the constant first, `c + x`, `c * x`, the
  symmetric comparisons and bitwise ops as they are, `c < x` as `x > c` and the like, and `c - x` as
  `neg(x) + c`), whenever PyTorch's type promotion gives the scalar form the same computation dtype, and never
  trading an op that lowers to the tile dialect for one that does not; the scalar form keeps the op's size
  bounds (`SIZE_BOUNDS_ATTR`: its result has the same shape), and where it is an identity (`x * 1`, transformers'
  `True & mask`: torch-canonicalize's rules) the op is `x` itself;
- an op whose operands are all constants, with at most `FOLD_LIMIT` result elements, evaluated (by the torch
  reference semantics, that is ATen itself) and replaced by `aten.full` when its results are splats;
- `scalar_tensor(v)` spelled `full([], v)`.
New ops take the location of the op they replace. Constants left unused are erased. Evaluating needs torch,
imported only when there is something to evaluate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    ComplexType,
    IntegerType,
    LocationAttr,
    ModuleOp,
    TensorType,
    i1,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from neuron_mlir.ir.dialects.torch import SIZE_BOUNDS_ATTR, TorchOp, op_class_for
from neuron_mlir.lowering.torch_canonicalize import is_identity

FOLD_LIMIT = 4096
"""Largest result (in elements) evaluated at compile time."""

CONSTANTS = frozenset({"torch.aten.full", "torch.aten.scalar_tensor"})

# Tensor overload -> (Scalar overload, the argument the constant becomes)
_BINARY = ("add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod", "bitwise_and",
           "bitwise_or", "bitwise_xor")  # fmt: skip
TO_SCALAR: dict[str, tuple[str, str]] = {
    **{f"aten::{name}.Tensor": (f"aten::{name}.Scalar", "other") for name in _BINARY},
    "aten::pow.Tensor_Tensor": ("aten::pow.Tensor_Scalar", "exponent"),
}
COMMUTATIVE = frozenset(
    f"aten::{name}.Tensor" for name in ("add", "mul", "eq", "ne", "bitwise_and", "bitwise_or", "bitwise_xor")
)
# `c op x` as `x op' c`: the comparisons that flip
MIRRORED: dict[str, str] = {
    "aten::lt.Tensor": "aten::gt.Scalar",
    "aten::le.Tensor": "aten::ge.Scalar",
    "aten::gt.Tensor": "aten::lt.Scalar",
    "aten::ge.Tensor": "aten::le.Scalar",
}


def constant_value(value: SSAValue) -> Any | None:
    """The fill value of a constant (`full` / `scalar_tensor` result), else None."""
    owner = value.owner
    if not isinstance(owner, TorchOp) or owner.name not in CONSTANTS:
        return None
    args = owner.arguments()
    return args["fill_value"] if owner.name == "torch.aten.full" else args["s"]


def _category(element_type: Attribute) -> int:
    if element_type == i1:
        return 0
    if isinstance(element_type, IntegerType):
        return 1
    if isinstance(element_type, AnyFloat):
        return 2
    assert isinstance(element_type, ComplexType)
    return 3


def _same_promotion(tensor_type: TensorType, constant_type: TensorType) -> bool:
    """Whether `tensor op constant` computes in the dtype `tensor op <Python number>` does."""
    a, c = tensor_type.get_element_type(), constant_type.get_element_type()
    if a == c or _category(c) < _category(a):
        return True
    # same kind, different width: a 0-d constant does not promote a tensor with dimensions; anything else does
    return _category(c) == _category(a) and constant_type.get_num_dims() == 0 and tensor_type.get_num_dims() > 0


def _python_number(value: Any, element_type: Attribute) -> Any:
    if element_type == i1:
        return bool(value)
    if isinstance(element_type, IntegerType):
        return int(value)
    return float(value)


def _lowering_allows(source: str, target: str) -> bool:
    """Never trade an op that lowers for one that does not."""
    from neuron_mlir.lowering.convert_torch_to_tile import is_lowerable

    return is_lowerable(target) or not is_lowerable(source)


def full(shape: tuple[int, ...], value: Any, element_type: Attribute, location: LocationAttr) -> TorchOp:
    """`aten.full(shape, value)` of `element_type`."""
    op_class = op_class_for("aten::full")
    assert op_class is not None
    result_type = TensorType(element_type, shape)
    op = op_class.from_args(
        {"size": list(shape), "fill_value": _python_number(value, element_type), "dtype": element_type},
        [result_type],
    )
    op.location = location
    return op


class ConstantToScalar(RewritePattern):
    """`X.Tensor(x, full(v))` -> `X.Scalar(x, v)` when promotion and the result shape allow it."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp):
            return
        overload = op.SCHEMA.overload_name
        if overload not in TO_SCALAR or len(op.operands) != 2:
            return
        scalar_overload, scalar_arg = TO_SCALAR[overload]
        args = op.arguments()
        tensor_name, constant_name = "self", scalar_arg
        negate = False  # c - x is -x + c
        if constant_value(op.operands[1]) is None:
            if constant_value(op.operands[0]) is None or args.get("alpha", 1) != 1:
                return
            if overload in MIRRORED:
                scalar_overload = MIRRORED[overload]
            elif overload == "aten::sub.Tensor":
                scalar_overload, negate = "aten::add.Scalar", True
            elif overload not in COMMUTATIVE:
                return
            tensor_name, constant_name = constant_name, tensor_name
        target = op_class_for(scalar_overload)
        if target is None or not _lowering_allows(op.name, target.name):
            return
        tensor, constant = args[tensor_name], args[constant_name]
        assert isinstance(tensor, SSAValue)
        assert isinstance(constant, SSAValue)
        result_type = op.results[0].type
        if not isinstance(tensor.type, TensorType) or not isinstance(constant.type, TensorType):
            return
        if not isinstance(result_type, TensorType) or result_type.get_shape() != tensor.type.get_shape():
            return  # the constant broadcasts the tensor to a bigger shape
        if not _same_promotion(tensor.type, constant.type):
            return
        element_type = constant.type.get_element_type()
        if isinstance(element_type, ComplexType):
            return
        number = _python_number(constant_value(constant), element_type)
        new_ops: list[Operation] = []
        if negate:
            neg = op_class_for("aten::neg")
            if neg is None or not _lowering_allows(op.name, neg.name) or tensor.type.get_element_type() == i1:
                return
            new_ops.append(neg.from_args({"self": tensor}, [tensor.type]))
            tensor = new_ops[-1].results[0]
        new_args = {k: v for k, v in args.items() if k not in ("self", "other", scalar_arg)}
        new_args.update({"self": tensor, scalar_arg: number})
        new_ops.append(target.from_args(new_args, [result_type]))
        scalar_form = new_ops[-1]
        assert isinstance(scalar_form, TorchOp)
        if not negate and is_identity(scalar_form):
            rewriter.replace(op, [], [tensor])
            return
        bounds = op.attributes.get(SIZE_BOUNDS_ATTR)
        for new in new_ops:
            new.location = op.location
            if bounds is not None:  # every new op has the result's shape
                new.attributes[SIZE_BOUNDS_ATTR] = bounds
        rewriter.replace(op, new_ops)


class EvaluateConstantOp(RewritePattern):
    """An op on constants only, with a small splat result, becomes that constant."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or not op.results or not op.operands:
            return
        if op.name in CONSTANTS or not _is_pure(op):
            return
        if any(constant_value(v) is None for v in op.operands):
            return
        result_types = [r.type for r in op.results]
        if not all(isinstance(t, TensorType) and _small(t) for t in result_types):
            return
        values = _evaluate(op)
        if values is None:
            return
        new_ops = []
        for result_type, value in zip(result_types, values, strict=True):
            assert isinstance(result_type, TensorType)
            if value is None:
                return
            new_ops.append(full(result_type.get_shape(), value, result_type.get_element_type(), op.location))
        rewriter.replace(op, new_ops)


class ScalarTensorToFull(RewritePattern):
    """`scalar_tensor(v)` is `full([], v)`: one spelling for constants."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or op.name != "torch.aten.scalar_tensor":
            return
        result_type = op.results[0].type
        assert isinstance(result_type, TensorType)
        if isinstance(result_type.get_element_type(), ComplexType):
            return
        value = op.arguments()["s"]
        rewriter.replace(op, full((), value, result_type.get_element_type(), op.location))


def _small(tensor_type: TensorType) -> bool:
    shape = tensor_type.get_shape()
    return all(d >= 0 for d in shape) and tensor_type.element_count() <= FOLD_LIMIT


def _is_pure(op: Operation) -> bool:
    from xdsl.traits import Pure

    return op.has_trait(Pure)


def _evaluate(op: TorchOp) -> list[Any] | None:
    """Each result's splat value, computed by ATen on the constant operands; None when a result is not a splat."""
    import torch  # noqa: TID251  (constant folding evaluates with ATen itself, only when there is work)
    from torch._subclasses.fake_tensor import unset_fake_temporarily  # noqa: TID251

    from neuron_mlir.ir.dialects.torch import dtype_name_for
    from neuron_mlir.ir.semantics.torch import evaluate_op

    # the frontend compiles inside AOTAutograd's fake mode, where the operands would be fake tensors whose values
    # (the splat test, `.item()`) cannot be read
    with unset_fake_temporarily():
        operands = []
        for value in op.operands:
            fill = constant_value(value)
            assert isinstance(value.type, TensorType)
            assert fill is not None, "folding needs constant operands"
            dtype = getattr(torch, dtype_name_for(value.type.get_element_type()))
            operands.append(torch.full(tuple(value.type.get_shape()), fill, dtype=dtype))
        try:
            results = evaluate_op(op, operands)
        except Exception:  # an op ATen refuses on these values is left for run time to report
            return None
        splats: list[Any] = []
        for result in results:
            if not isinstance(result, torch.Tensor) or result.is_complex() or result.numel() == 0:
                return None
            flat = result.reshape(-1)
            same = (flat == flat[0]) | (torch.isnan(flat) & torch.isnan(flat[0]))
            if not bool(torch.all(same)):
                return None
            splats.append(flat[0].item())
        return splats


def fold_constants_patterns() -> list[RewritePattern]:
    return [ScalarTensorToFull(), ConstantToScalar(), EvaluateConstantOp()]


@dataclass(frozen=True)
class TorchFoldConstantsPass(ModulePass):
    name = "torch-fold-constants"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier(fold_constants_patterns())).rewrite_module(op)
