"""torch-recognize-activations: activation functions written out as arithmetic become the one op they are.

Input contract: torch-dialect functions (after torch-canonicalize).

Output guarantee: each recognised expression is replaced by the named ATen op, which lowers to one ScalarE
activation instead of a chain of elementwise loop nests over HBM. Recognised:
- the tanh approximation of GELU as model code spells it (GPT-2's `NewGELUActivation`, `gelu_new`):
  `(x * 0.5) * (tanh((x + pow(x, 3) * 0.044715) * sqrt(2 / pi)) + 1)`, the products and sums in either operand
  order, becomes `aten.gelu(x, approximate="tanh")`.
The replacement computes in fp32 and rounds once to the result's dtype, where the spelled-out chain rounds every
intermediate: for a bf16 or fp16 tensor the two differ by a few units in the last place, within the dtype's
tolerance; for fp32 they agree to rounding. Intermediates with other users stay for them; the rest of a replaced
chain is erased. Anything else is left alone: the pass never fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from neuron_mlir.ir.dialects.torch import TorchOp, op_class_for

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


def _torch_op(value: SSAValue, name: str) -> TorchOp | None:
    owner = value.owner
    return owner if isinstance(owner, TorchOp) and owner.name == name else None


def _scalar_times(value: SSAValue, factor: float) -> SSAValue | None:
    """The tensor `t` when `value` is `t * factor` (mul.Scalar), else None."""
    op = _torch_op(value, "torch.aten.mul.Scalar")
    if op is None or not _close(op.arguments().get("other"), factor):
        return None
    return op.operands[0]


def _close(value: object, expected: float) -> bool:
    return isinstance(value, int | float) and math.isclose(float(value), expected, rel_tol=1e-6)


def _plain_sum(value: SSAValue) -> tuple[SSAValue, SSAValue] | None:
    """(a, b) when `value` is `a + b` (add.Tensor with alpha 1)."""
    op = _torch_op(value, "torch.aten.add.Tensor")
    if op is None or not _close(op.arguments().get("alpha", 1), 1.0):
        return None
    return op.operands[0], op.operands[1]


def _tanh_gelu_input(half_x: SSAValue, one_plus_tanh: SSAValue) -> SSAValue | None:
    """x when `half_x * one_plus_tanh` is the tanh approximation of GELU of x."""
    x = _scalar_times(half_x, 0.5)
    shifted = _torch_op(one_plus_tanh, "torch.aten.add.Scalar")
    if x is None or shifted is None or not _close(shifted.arguments().get("other"), 1.0):
        return None
    if not _close(shifted.arguments().get("alpha", 1), 1.0):
        return None
    tanh = _torch_op(shifted.operands[0], "torch.aten.tanh")
    inner = _scalar_times(tanh.operands[0], _SQRT_2_OVER_PI) if tanh is not None else None
    terms = _plain_sum(inner) if inner is not None else None
    if terms is None:
        return None
    for linear, cubic_term in (terms, terms[::-1]):
        cubed = _scalar_times(cubic_term, _CUBIC)
        power = _torch_op(cubed, "torch.aten.pow.Tensor_Scalar") if cubed is not None else None
        if linear is x and power is not None and power.operands[0] is x and _close(power.arguments()["exponent"], 3):
            return x
    return None


class RecognizeTanhGelu(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or op.name != "torch.aten.mul.Tensor":
            return
        lhs, rhs = op.operands
        x = _tanh_gelu_input(lhs, rhs) or _tanh_gelu_input(rhs, lhs)
        if x is None or x.type != op.results[0].type:
            return
        gelu_class = op_class_for("aten::gelu")
        assert gelu_class is not None
        gelu = gelu_class.from_args({"self": x, "approximate": "tanh"}, [op.results[0].type])
        gelu.location = op.location
        rewriter.replace_op(op, gelu)


@dataclass(frozen=True)
class TorchRecognizeActivationsPass(ModulePass):
    name = "torch-recognize-activations"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(RecognizeTanhGelu()).rewrite_module(op)
        # The replaced chains' ops that nothing reads any more (torch ops are Pure), last first.
        for dead in reversed(list(op.walk())):
            if isinstance(dead, TorchOp) and dead.results and not any(result.uses for result in dead.results):
                dead.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
                dead.erase()
