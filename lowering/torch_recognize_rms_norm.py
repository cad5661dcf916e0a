"""torch-recognize-rms-norm: RMSNorm spelled out as arithmetic becomes `aten._fused_rms_norm`, and its backward
chain `aten._fused_rms_norm_backward`.

Input contract: torch-dialect functions (after torch-canonicalize and torch-fold-constants, which turn the
`+ eps` into an `add.Scalar`).

Output guarantee: every expression

    y = x * rsqrt(mean(x^2, dim=-1, keepdim=True) + eps)        (x^2 as pow(x, 2) or x * x; either mul order)

becomes `y, rstd = aten._fused_rms_norm(x, [N], None, eps)` (N the last dim), the rsqrt's users reading `rstd`.
That is how Llama, Mistral and T5 write their norms, and what AOTAutograd hands over for them. The fused op lowers
to one pass over the rows (each row read once, its statistic kept on chip) instead of a chain of loop nests over
HBM.

When x is an upcast (`_to_copy` of a bf16 or fp16 tensor to fp32) and y's only user casts it back to that type,
as the models do (`hidden.float()` ... `.to(input_dtype)`), the op reads the narrow tensor and its first result
is the cast-back one: the upcast is exact, and the fused op computes in fp32 and rounds once, exactly as the
chain does. The upcast itself stays for its other users, placed right after the fused op (its lowering may then
write the fp32 copy from the rows it holds). The statistic is fp32, as ATen saves it.

The backward graph autograd makes of that chain computes the input gradient as

    grad_x = g * rstd + (-0.5 * sum(g * x, -1, keepdim) * rstd^3 / N) * (2 * x)   (the broadcast as expand or not)

which becomes `grad_x, _ = aten._fused_rms_norm_backward(g, x, [N], rstd, None, [True, False])`, placed right
after the last definition of its operands, so that the ops reading the same rows after it (the weight gradient,
sum(grad_out * saved normalized rows)) may be computed in its pass. When g is the exact upcast of a bf16 or fp16
tensor, that tensor is the op's grad_out; when that tensor is `grad * weight` with a weight vector over the last
dim, grad and weight are (the fused op multiplies them in fp32, where the chain rounded the product to the
narrow type first: a few units in the last place of it). Both uses of rstd must be one value: the frontend's
partition gives the backward one input for a saved tensor and its aliases.

The replaced chains' ops that nothing else reads are erased; anything that does not match is left alone: the
pass never fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, ModuleOp, NoneType, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint

from neuron_mlir.ir.dialects.torch import TorchOp, op_class_for
from neuron_mlir.lowering.ir_queries import tensor_shape_of

_NARROW_FLOATS = ("bf16", "f16")


def _torch_op(value: SSAValue, name: str) -> TorchOp | None:
    owner = value.owner
    return owner if isinstance(owner, TorchOp) and owner.name == name else None


def _close(value: object, expected: float) -> bool:
    return isinstance(value, int | float) and math.isclose(float(value), expected, rel_tol=1e-9)


def _is_square_of(value: SSAValue, x: SSAValue) -> bool:
    power = _torch_op(value, "torch.aten.pow.Tensor_Scalar")
    if power is not None:
        return power.operands[0] is x and _close(power.arguments().get("exponent"), 2.0)
    product = _torch_op(value, "torch.aten.mul.Tensor")
    return product is not None and product.operands[0] is x and product.operands[1] is x


def _reduced_dims(dims: object, rank: int) -> list[int] | None:
    """A reduction's `dim` argument as non-negative dims (None when it is no list, or the tensor is 0-d)."""
    if not isinstance(dims, list | tuple) or not rank:
        return None
    return [int(d) % rank for d in dims]


def _rms_epsilon(rstd: SSAValue, x: SSAValue) -> float | None:
    """eps when `rstd` is rsqrt(mean(x^2, last dim, keepdim) + eps), else None."""
    root = _torch_op(rstd, "torch.aten.rsqrt")
    shifted = _torch_op(root.operands[0], "torch.aten.add.Scalar") if root is not None else None
    if shifted is None or not _close(shifted.arguments().get("alpha", 1), 1.0):
        return None
    eps = shifted.arguments().get("other")
    mean = _torch_op(shifted.operands[0], "torch.aten.mean.dim")
    if mean is None or not isinstance(eps, int | float) or not _is_square_of(mean.operands[0], x):
        return None
    args = mean.arguments()
    rank = len(tensor_shape_of(x))
    if _reduced_dims(args.get("dim"), rank) != [rank - 1] or not args.get("keepdim") or args.get("dtype") is not None:
        return None
    return float(eps)


def _element_name(value: SSAValue) -> str | None:
    assert isinstance(value.type, TensorType)
    element = value.type.element_type
    if isinstance(element, Float32Type):
        return "f32"
    if isinstance(element, Float16Type):
        return "f16"
    return "bf16" if isinstance(element, BFloat16Type) else None


def _plain_cast(op: TorchOp | None) -> bool:
    """Whether `op` is a `_to_copy` that changes nothing but the element type."""
    if op is None or op.name != "torch.aten._to_copy":
        return False
    args = op.arguments()
    return args.get("layout") in (None, "strided") and args.get("memory_format") in (None, "preserve_format")


def _narrow_source(x: SSAValue, y: Operation) -> tuple[SSAValue, TorchOp, TorchOp] | None:
    """(narrow, upcast, downcast) when x = upcast(narrow) from bf16/fp16 to fp32 and y's only user casts it back
    to narrow's type."""
    upcast = _torch_op(x, "torch.aten._to_copy")
    if not _plain_cast(upcast) or _element_name(x) != "f32":
        return None
    assert upcast is not None
    narrow = upcast.operands[0]
    if _element_name(narrow) not in _NARROW_FLOATS or not y.results[0].has_one_use():
        return None
    downcast = next(iter(y.results[0].uses)).operation
    if not isinstance(downcast, TorchOp) or not _plain_cast(downcast):
        return None
    if downcast.results[0].type != narrow.type:
        return None
    return narrow, upcast, downcast


class RecognizeRmsNorm(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or op.name != "torch.aten.mul.Tensor":
            return
        for x, rstd in (op.operands, op.operands[::-1]):
            eps = _rms_epsilon(rstd, x)
            if eps is not None and op.results[0].type == x.type and tensor_shape_of(x):
                self._rewrite(op, x, rstd, eps, rewriter)
                return

    def _rewrite(self, op: Operation, x: SSAValue, rstd: SSAValue, eps: float, rewriter: PatternRewriter) -> None:
        narrowed = _narrow_source(x, op)
        source, normalized = (narrowed[0], narrowed[2]) if narrowed is not None else (x, op)
        fused_class = op_class_for("aten::_fused_rms_norm")
        assert fused_class is not None
        args = {"input": source, "normalized_shape": [tensor_shape_of(x)[-1]], "weight": None, "eps": eps}
        fused = fused_class.from_args(args, [normalized.results[0].type, rstd.type])
        fused.location = op.location
        # before the chain's first op (the upcast when there is one), so that every reader of a result follows it
        first = narrowed[1] if narrowed is not None else _chain_start(rstd)
        rewriter.insert(fused, InsertPoint.before(first))
        if narrowed is not None:  # the upcast's other readers come after it: it may follow the fused op
            upcast = narrowed[1]
            upcast.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
            rewriter.insert(upcast, InsertPoint.after(fused))
        rewriter.replace_all_uses_with(rstd, fused.results[1])
        rewriter.replace_all_uses_with(normalized.results[0], fused.results[0])


def _chain_start(rstd: SSAValue) -> Operation:
    """The square at the head of rsqrt(mean(square) + eps)."""
    root = rstd.owner
    assert isinstance(root, Operation)
    shifted = root.operands[0].owner
    assert isinstance(shifted, Operation)
    mean = shifted.operands[0].owner
    assert isinstance(mean, Operation)
    square = mean.operands[0].owner
    assert isinstance(square, Operation)
    return square


def _operand_pairs(op: TorchOp | None) -> list[tuple[SSAValue, SSAValue]]:
    """Both orders of a commutative op's two operands (none when `op` is None)."""
    if op is None:
        return []
    return [(op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])]


def _scaled(value: SSAValue, factor: float) -> SSAValue | None:
    """t when `value` is `t * factor` (mul.Scalar) or `t / (1 / factor)` (div.Scalar)."""
    product = _torch_op(value, "torch.aten.mul.Scalar")
    if product is not None and _close(product.arguments().get("other"), factor):
        return product.operands[0]
    quotient = _torch_op(value, "torch.aten.div.Scalar")
    divisor = quotient.arguments().get("other") if quotient is not None else None
    if quotient is not None and isinstance(divisor, int | float) and divisor and _close(1.0 / divisor, factor):
        return quotient.operands[0]
    return None


def _row_sum_of_product(value: SSAValue, g: SSAValue, x: SSAValue) -> bool:
    """Whether `value` is sum(g * x, last dim, keepdim)."""
    total = _torch_op(value, "torch.aten.sum.dim_IntList")
    if total is None or not total.arguments().get("keepdim") or total.arguments().get("dtype") is not None:
        return False
    rank = len(tensor_shape_of(x))
    if _reduced_dims(total.arguments().get("dim"), rank) != [rank - 1]:
        return False
    product = _torch_op(total.operands[0], "torch.aten.mul.Tensor")
    return any(a is g and b is x for a, b in _operand_pairs(product))


def _correction_matches(value: SSAValue, g: SSAValue, x: SSAValue, rstd: SSAValue) -> bool:
    """Whether `value` is (-0.5 * sum(g x) * rstd^3 / N) * (2 x), as autograd differentiates
    x * rsqrt(mean(x^2) + eps) through the mean (N the last dim; the broadcast spelled as expand or not)."""
    length = tensor_shape_of(x)[-1]
    for left, right in _operand_pairs(_torch_op(value, "torch.aten.mul.Tensor")):
        if _scaled(right, 2.0) is not x:
            continue
        spread = _scaled(left, 1.0 / length)
        expanded = _torch_op(spread, "torch.aten.expand") if spread is not None else None
        row = expanded.operands[0] if expanded is not None else spread
        for half_sum, cube in _operand_pairs(_torch_op(row, "torch.aten.mul.Tensor") if row is not None else None):
            power = _torch_op(cube, "torch.aten.pow.Tensor_Scalar")
            if power is None or power.operands[0] is not rstd or not _close(power.arguments()["exponent"], 3.0):
                continue
            total = _scaled(half_sum, -0.5)
            if total is not None and _row_sum_of_product(total, g, x):
                return True
    return False


def _backward_operands(g: SSAValue) -> tuple[SSAValue, SSAValue | None]:
    """(grad_out, weight) for a gradient g of the normalized rows: g itself, or when g is an exact upcast of a
    narrow tensor, that tensor; and when that tensor is `grad * weight` with weight a vector over the last dim,
    grad and the weight (the fused op multiplies them in fp32, where the chain rounded the product first)."""
    upcast = _torch_op(g, "torch.aten._to_copy")
    if not _plain_cast(upcast) or _element_name(g) != "f32":
        return g, None
    assert upcast is not None
    narrow = upcast.operands[0]
    if _element_name(narrow) not in _NARROW_FLOATS:
        return g, None
    length = tensor_shape_of(g)[-1]
    for grad, weight in _operand_pairs(_torch_op(narrow, "torch.aten.mul.Tensor")):
        if (
            tensor_shape_of(grad) == tensor_shape_of(g)
            and tensor_shape_of(weight) == (length,)
            and weight.type == _vector_type(narrow)
        ):
            return grad, weight
    return narrow, None


def _vector_type(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return TensorType(value.type.element_type, [tensor_shape_of(value)[-1]])


class RecognizeRmsNormBackward(RewritePattern):
    """grad_input = g * rstd + (-0.5 * sum(g x) * rstd^3 / N) * 2x, the chain autograd writes for the backward
    of the forward chain above, becomes `_fused_rms_norm_backward(g, x, [N], rstd, None, [True, False])`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or op.name != "torch.aten.add.Tensor":
            return
        if not _close(op.arguments().get("alpha", 1), 1.0) or _element_name(op.results[0]) != "f32":
            return
        for direct, correction in _operand_pairs(op):
            for g, rstd in _operand_pairs(_torch_op(direct, "torch.aten.mul.Tensor")):
                shape = tensor_shape_of(g)
                if shape != tensor_shape_of(op.results[0]) or tensor_shape_of(rstd) != (*shape[:-1], 1):
                    continue
                x = _correction_input(correction, g)
                if x is None or x.type != op.results[0].type or not _correction_matches(correction, g, x, rstd):
                    continue
                self._rewrite(op, g, x, rstd, rewriter)
                return

    def _rewrite(self, op: Operation, g: SSAValue, x: SSAValue, rstd: SSAValue, rewriter: PatternRewriter) -> None:
        grad_out, weight = _backward_operands(g)
        backward_class = op_class_for("aten::_fused_rms_norm_backward")
        assert backward_class is not None
        args = {
            "grad_out": grad_out,
            "input": x,
            "normalized_shape": [tensor_shape_of(x)[-1]],
            "rstd": rstd,
            "weight": weight,
            "output_mask": [True, False],
        }
        fused = backward_class.from_args(args, [op.results[0].type, NoneType()])
        fused.location = op.location
        # as early as its operands allow: ops that read the same rows after it (the weight gradient's product of
        # grad_out and the saved normalized rows) may then be computed in its pass
        rewriter.insert(fused, _earliest_point(op, [grad_out, x, rstd] + ([weight] if weight is not None else [])))
        rewriter.replace(op, [], [fused.results[0]])


def _earliest_point(op: Operation, operands: list[SSAValue]) -> InsertPoint:
    """Right after the last of `operands` defined in `op`'s block (its start when all are arguments)."""
    block = op.parent_block()
    assert block is not None
    defining = {value.owner for value in operands if isinstance(value.owner, Operation)}
    last: Operation | None = None
    for current in block.ops:
        if current is op:
            break
        if current in defining:
            last = current
    return InsertPoint.after(last) if last is not None else InsertPoint.at_start(block)


def _correction_input(correction: SSAValue, g: SSAValue) -> SSAValue | None:
    """x of the correction term `... * (x * 2)`: the operand scaled by 2."""
    for _, right in _operand_pairs(_torch_op(correction, "torch.aten.mul.Tensor")):
        x = _scaled(right, 2.0)
        if x is not None and x is not g:
            return x
    return None


@dataclass(frozen=True)
class TorchRecognizeRmsNormPass(ModulePass):
    name = "torch-recognize-rms-norm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(RecognizeRmsNorm(), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(RecognizeRmsNormBackward(), apply_recursively=False).rewrite_module(op)
        # The replaced chains' ops that nothing reads any more (torch ops are Pure), last first.
        for dead in reversed(list(op.walk())):
            if isinstance(dead, TorchOp) and dead.results and not any(result.uses for result in dead.results):
                dead.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
                dead.erase()
