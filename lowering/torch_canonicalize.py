"""torch-canonicalize: drop the torch ops that compute nothing, and cancel view pairs.

Input contract: torch-dialect functions as the FX importer produces them (value semantics: no op writes to an
existing value, so a copy is the value itself).

Output guarantee: the same results from fewer ops, every remaining op with its location. Removed:
- copies and aliases: `alias`, `detach`, `clone`, `lift_fresh_copy`, and `_to_copy` to the same type;
- views and reshapes that change nothing: `view`, `_unsafe_view`, `expand`, `squeeze*`, `slice` (step 1) whose
  result type is their operand's; `permute` by the identity; `transpose` of a dimension with itself; `t` of a
  rank <= 1 tensor; `cat` of one tensor;
- arithmetic identities with the operand's type: `mul`/`div` by 1, `add`/`sub` of 0 (`.Scalar` overloads), `pow`
  by 1; bitwise ones: a boolean tensor `& True`, `| False`, `^ False`, an integer tensor `& -1`, `| 0`, `^ 0`
  (transformers' mask code starts each `and_masks` from `True &`, a pass over the whole [b, 1, s, s] mask);
- the sum of two `slice_scatter`s into zeros whose slices split a dimension becomes the `cat` of their sources;
- elementwise ops of a permuted function input (unary ones, scaling by a single element, narrowing casts) compute
  in the input's own order and permute their result; a full max, min or infinity norm of such a permute reduces
  the input;
- view pairs that cancel: `permute` of `permute` (composed, or dropped when the identity), `transpose` of the
  same `transpose`, `t` of `t`, `view`-like of `view`-like back to the original shape, `squeeze.dim` of
  `unsqueeze` on the same dimension; `expand` of `expand` becomes one `expand`;
- the largest magnitude, `max(abs(x))` or `amax(abs(x), dims)` of a float `x` whose `abs` nothing else reads,
  becomes `linalg_vector_norm(x, inf, dims)`: the one reduction that takes magnitudes as it loads, so `|x|` is
  never written out and read back (fp8 scaling takes this maximum of every weight and activation it casts).
Results that become unused are erased (the ops are Pure). The pass never fails: what it does not recognise it
leaves alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import AnyFloat, IntegerType, ModuleOp, TensorType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from neuron_mlir.ir.dialects.torch import TorchOp, op_class_for

COPIES = frozenset({"torch.aten.alias", "torch.aten.detach", "torch.aten.clone", "torch.aten.lift_fresh_copy"})
"""Under value semantics these are their operand."""

SAME_TYPE_IDENTITIES = frozenset(
    {
        "torch.aten._to_copy",
        "torch.aten.view",
        "torch.aten._unsafe_view",
        "torch.aten.expand",
        "torch.aten.squeeze",
        "torch.aten.squeeze.dim",
        "torch.aten.squeeze.dims",
        "torch.aten.unsqueeze",
    }
)
"""Identities whenever the result has the operand's type (same shape and dtype)."""

RESHAPES = frozenset({"torch.aten.view", "torch.aten._unsafe_view"})

_NEUTRAL_SCALARS = {
    "torch.aten.mul.Scalar": ("other", 1),
    "torch.aten.div.Scalar": ("other", 1),
    "torch.aten.add.Scalar": ("other", 0),
    "torch.aten.sub.Scalar": ("other", 0),
    "torch.aten.pow.Tensor_Scalar": ("exponent", 1),
}


# per bitwise `.Scalar` op, the scalar that leaves a boolean tensor, then an integer tensor, as it is
_NEUTRAL_BITS = {
    "torch.aten.bitwise_and.Scalar": (True, -1),
    "torch.aten.bitwise_or.Scalar": (False, 0),
    "torch.aten.bitwise_xor.Scalar": (False, 0),
}


def _neutral_bits(name: str, operand: SSAValue, value: object) -> bool:
    """Whether the bitwise op `name` with scalar `value` leaves `operand` (of the result's type) as it is."""
    assert isinstance(operand.type, TensorType)
    element = operand.type.element_type
    if not isinstance(element, IntegerType):
        return False
    boolean, integer = _NEUTRAL_BITS[name]
    if element.width.data == 1:
        return isinstance(value, bool) and value is boolean
    return isinstance(value, int) and int(value) == integer


def _rank(value: SSAValue) -> int:
    assert isinstance(value.type, TensorType)
    return value.type.get_num_dims()


def _int_list(value: object) -> list[int]:
    """An int-list argument, or int arguments gathered in a list (their kinds are the op verifier's to check)."""
    assert isinstance(value, list), f"expected ints, got {value!r}"
    assert all(isinstance(v, int) for v in value), f"expected ints, got {value!r}"
    return value


def _normalised(dims: list[int], rank: int) -> list[int]:
    return [d % rank if rank else 0 for d in dims]


def is_identity(op: TorchOp) -> bool:
    """Whether `op`'s (single) result equals its first operand."""
    if len(op.results) != 1 or not op.operands or op.results[0].type != op.operands[0].type:
        return False
    args = op.arguments()
    name = op.name
    if name in COPIES or name in SAME_TYPE_IDENTITIES:
        return True
    source = op.operands[0]
    match name:
        case "torch.aten.permute":
            return _normalised(_int_list(args["dims"]), _rank(source)) == list(range(_rank(source)))
        case "torch.aten.transpose.int":
            dim0, dim1 = _normalised(_int_list([args["dim0"], args["dim1"]]), _rank(source))
            return dim0 == dim1
        case "torch.aten.t":
            return _rank(source) <= 1
        case "torch.aten.slice.Tensor":
            return args.get("step", 1) == 1
        case "torch.aten.cat":
            return len(op.operands) == 1
    if name in _NEUTRAL_BITS:
        return _neutral_bits(name, source, args.get("other"))
    if name in _NEUTRAL_SCALARS:
        arg, neutral = _NEUTRAL_SCALARS[name]
        value = args.get(arg)
        return not isinstance(value, bool) and value == neutral
    return False


class DropIdentity(RewritePattern):
    """An op whose result is its operand is replaced by the operand."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, TorchOp) and is_identity(op):
            rewriter.replace(op, [], [op.operands[0]])


class CancelViewPairs(RewritePattern):
    """A view of a view that undoes it, or two views that compose into one."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or len(op.results) != 1 or not op.operands:
            return
        inner = op.operands[0].owner
        if not isinstance(inner, TorchOp) or not inner.operands:
            return
        source = inner.operands[0]
        outer_args, inner_args = op.arguments(), inner.arguments()
        if op.name in RESHAPES and inner.name in RESHAPES and op.results[0].type == source.type:
            rewriter.replace(op, [], [source])
            return
        match (op.name, inner.name):
            case ("torch.aten.t", "torch.aten.t"):
                rewriter.replace(op, [], [source])
            case ("torch.aten.transpose.int", "torch.aten.transpose.int"):
                rank = _rank(source)
                outer_pair = sorted(_normalised(_int_list([outer_args["dim0"], outer_args["dim1"]]), rank))
                inner_pair = sorted(_normalised(_int_list([inner_args["dim0"], inner_args["dim1"]]), rank))
                if outer_pair == inner_pair:
                    rewriter.replace(op, [], [source])
            case ("torch.aten.squeeze.dim", "torch.aten.unsqueeze"):
                if op.results[0].type == source.type:
                    rewriter.replace(op, [], [source])
            case ("torch.aten.permute", "torch.aten.permute"):
                rank = _rank(source)
                first = _normalised(_int_list(inner_args["dims"]), rank)
                second = _normalised(_int_list(outer_args["dims"]), rank)
                composed = [first[d] for d in second]
                self._replace_with(op, rewriter, source, {"dims": composed})
            case ("torch.aten.expand", "torch.aten.expand"):
                self._replace_with(op, rewriter, source, {"size": _int_list(outer_args["size"])})

    @staticmethod
    def _replace_with(op: TorchOp, rewriter: PatternRewriter, source: SSAValue, arguments: dict[str, object]) -> None:
        op_class = op_class_for(op.name.removeprefix("torch.").replace("aten.", "aten::", 1))
        assert op_class is not None
        new = op_class.from_args({"self": source, **arguments}, [op.results[0].type])
        new.location = op.location
        rewriter.replace(op, new)


def _zeros(value: SSAValue) -> bool:
    owner = value.owner
    if not isinstance(owner, TorchOp) or owner.name != "torch.aten.full":
        return False
    fill = owner.arguments().get("fill_value")
    return not isinstance(fill, bool) and fill == 0


class ComplementarySliceScatters(RewritePattern):
    """The sum of two slice_scatters into zeros whose slices split a dimension is the cat of the two sources.

    AOTAutograd spells the gradient of slices that split a dimension (rotate_half's halves) this way: zeros,
    each source copied into its slice, and an add of the two. The cat writes each source once."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or op.name != "torch.aten.add.Tensor" or len(op.operands) != 2:
            return
        alpha = op.arguments().get("alpha")
        if alpha not in (None, 1) or isinstance(alpha, bool):
            return
        result_type = op.results[0].type
        pieces: list[tuple[int, int, int, SSAValue]] = []
        for operand in op.operands:
            scatter = operand.owner
            if not isinstance(scatter, TorchOp) or scatter.name != "torch.aten.slice_scatter":
                return
            if scatter.results[0].type != result_type or not _zeros(scatter.operands[0]):
                return
            args = scatter.arguments()
            if args.get("step", 1) != 1:
                return
            rank = _rank(scatter.results[0])
            dim_argument = args.get("dim", 0)
            assert isinstance(dim_argument, int)
            dim = _normalised([dim_argument], rank)[0]
            assert isinstance(result_type, TensorType)
            extent = result_type.get_shape()[dim]
            start, end, _ = slice(args.get("start"), args.get("end")).indices(extent)
            source = args["src"]
            assert isinstance(source, SSAValue)
            assert isinstance(source.type, TensorType)
            if source.type.element_type != result_type.element_type:
                return
            pieces.append((dim, start, end, source))
        (dim, start, middle, first), (other_dim, second_start, end, second) = sorted(pieces, key=lambda p: p[1])
        assert isinstance(result_type, TensorType)
        if dim != other_dim or start != 0 or middle != second_start or end != result_type.get_shape()[dim]:
            return
        if middle == 0 or middle == end:
            return
        cat_class = op_class_for("aten::cat")
        assert cat_class is not None
        new = cat_class.from_args({"tensors": [first, second], "dim": dim}, [result_type])
        new.location = op.location
        rewriter.replace(op, new)


_ELEMENTWISE_UNARY = frozenset(
    {"torch.aten.abs", "torch.aten.neg", "torch.aten.clamp", "torch.aten.mul.Scalar", "torch.aten.div.Scalar"}
)
_ELEMENTWISE_WITH_SCALE = frozenset({"torch.aten.mul.Tensor", "torch.aten.div.Tensor"})
_ORDER_FREE_REDUCTIONS = frozenset({"torch.aten.max", "torch.aten.min"})


def _order_free_reduction(op: TorchOp) -> bool:
    """A reduction of every element whose value does not depend on the elements' order: max, min, and a norm
    over all dims taking the largest or smallest magnitude."""
    if len(op.operands) != 1:
        return False
    if op.name == "torch.aten.linalg_vector_norm":
        args = op.arguments()
        order = args.get("ord", 2)
        return args.get("dim") is None and isinstance(order, int | float) and math.isinf(order)
    return op.name in _ORDER_FREE_REDUCTIONS


def _numel(value: SSAValue) -> int:
    assert isinstance(value.type, TensorType)
    return math.prod(value.type.get_shape())


class ElementwiseBeforePermute(RewritePattern):
    """An elementwise op of a permuted tensor computes on the tensor and permutes its result, and an order-free full
    reduction (max, min, the infinity norm) of a permuted tensor reduces the tensor itself.

    Only permutes of function inputs (weights), or of values computed from them by such ops, are looked through:
    elsewhere (attention's heads) the permuted order may be the one the readers want.

    fp8 training scales and casts a Linear layer's transposed weight, `cast(clamp(permute(w) * s))`, and takes the
    maximum of its magnitudes: computed in the transposed order every element is a separate DMA element; in w's
    own order the loads are whole rows, and the matmul reads the permuted fp8 result as it reads any transposed
    weight. Moved: unary ops (abs, neg, clamp, multiplication or division by a number), products and quotients by
    a single-element tensor, and casts to a narrower float (a widening is left where it is: matmuls read
    widenings of narrow tensors directly)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or not op.operands or len(op.results) != 1:
            return
        permute = op.operands[0].owner
        if not isinstance(permute, TorchOp) or permute.name != "torch.aten.permute":
            return
        source = permute.operands[0]
        if not self._rooted_in_argument(source):
            return  # only a function input's (a weight's) permute: elsewhere the permuted order may be the better one
        if _order_free_reduction(op):
            new = op_class_for(op.name.removeprefix("torch.").replace("aten.", "aten::", 1))
            assert new is not None
            replacement = new.from_args({**op.arguments(), "self": source}, [op.results[0].type])
            replacement.location = op.location
            rewriter.replace(op, replacement)
            return
        if not self._moves(op):
            return
        assert isinstance(source.type, TensorType)
        result_type = op.results[0].type
        assert isinstance(result_type, TensorType)
        op_class = op_class_for(op.name.removeprefix("torch.").replace("aten.", "aten::", 1))
        assert op_class is not None
        inner = op_class.from_args(
            {**op.arguments(), "self": source}, [TensorType(result_type.element_type, source.type.get_shape())]
        )
        inner.location = op.location
        outer = permute.__class__.from_args({**permute.arguments(), "self": inner.results[0]}, [result_type])
        outer.location = permute.location
        rewriter.replace(op, [inner, outer], [outer.results[0]])

    @classmethod
    def _rooted_in_argument(cls, value: SSAValue) -> bool:
        """Whether `value` is a function argument, or computed from one by ops this pattern moves."""
        while isinstance(value.owner, TorchOp) and cls._moves(value.owner):
            value = value.owner.operands[0]
        return isinstance(value, BlockArgument)

    @staticmethod
    def _moves(op: TorchOp) -> bool:
        if op.name in _ELEMENTWISE_UNARY:
            return len(op.operands) == 1
        if op.name in _ELEMENTWISE_WITH_SCALE:
            return len(op.operands) == 2 and _numel(op.operands[1]) == 1 and op.operands[0] is not op.operands[1]
        if op.name == "torch.aten._to_copy" and len(op.operands) == 1:
            source, result = op.operands[0].type, op.results[0].type
            assert isinstance(source, TensorType)
            assert isinstance(result, TensorType)
            narrow = isinstance(source.element_type, AnyFloat) and isinstance(result.element_type, AnyFloat)
            return narrow and result.element_type.bitwidth < source.element_type.bitwidth
        return False


class MagnitudeMaximum(RewritePattern):
    """`max(abs(x))` and `amax(abs(x), dims, keepdim)` of a float `x`, where only the maximum reads `abs(x)`, as
    `linalg_vector_norm(x, inf, dims, keepdim)`: the same value (the largest magnitude; NaN when any element is
    NaN) from one pass that loads `x` and folds magnitudes, where the pair is a pass writing `|x|` and a second
    reading it. fp8 scaling (torchao's amax) takes this maximum of every tensor it casts: at a 32000 x 2048 weight
    the separate `abs` alone moves 0.5 GB."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or op.name not in _MAXIMA or len(op.operands) != 1:
            return
        magnitude = op.operands[0].owner
        if not isinstance(magnitude, TorchOp) or magnitude.name != "torch.aten.abs" or len(magnitude.operands) != 1:
            return
        if not magnitude.results[0].has_one_use():
            return
        source = magnitude.operands[0]
        result_type = op.results[0].type
        if not isinstance(source.type, TensorType) or not isinstance(result_type, TensorType):
            return
        if not isinstance(source.type.element_type, AnyFloat) or source.type.element_type != result_type.element_type:
            return
        args = op.arguments()
        dims = args.get("dim") if op.name == "torch.aten.amax" else None
        if dims == []:
            dims = None  # amax over no listed dim reduces every dim, as the norm without dims does
        norm = op_class_for("aten::linalg_vector_norm")
        assert norm is not None
        new = norm.from_args(
            {"self": source, "ord": math.inf, "dim": dims, "keepdim": bool(args.get("keepdim", False))}, [result_type]
        )
        new.location = op.location
        rewriter.replace(op, new)


_MAXIMA = frozenset({"torch.aten.max", "torch.aten.amax"})


def canonicalize_patterns() -> list[RewritePattern]:
    return [
        DropIdentity(),
        CancelViewPairs(),
        ComplementarySliceScatters(),
        ElementwiseBeforePermute(),
        MagnitudeMaximum(),
    ]


@dataclass(frozen=True)
class TorchCanonicalizePass(ModulePass):
    name = "torch-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier(canonicalize_patterns())).rewrite_module(op)
