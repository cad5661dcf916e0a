"""torch-recognize-activations: activation functions written out as arithmetic become the one op they are.

Input contract: torch-dialect functions (after torch-canonicalize).

Output guarantee: each recognised expression is replaced by the named ATen op, which lowers to one ScalarE
activation instead of a chain of elementwise loop nests over HBM. Recognised:
- the tanh approximation of GELU as model code spells it (GPT-2's `NewGELUActivation`, `gelu_new`: the spellings
  `ir/activation_patterns.py` accepts) becomes `aten.gelu(x, approximate="tanh")`.
The replacement computes in fp32 and rounds once to the result's dtype, where the spelled-out chain rounds every
intermediate: for a bf16 or fp16 tensor the two differ by a few units in the last place, within the dtype's
tolerance; for fp32 they agree to rounding. Intermediates with other users stay for them; the rest of a replaced
chain is erased. Anything else is left alone: the pass never fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from neuron_mlir.ir.activation_patterns import Operand, is_constant, tanh_gelu_input
from neuron_mlir.ir.dialects.torch import TorchOp, op_class_for


def _torch_op(value: Operand, name: str) -> TorchOp | None:
    owner = value.owner if isinstance(value, SSAValue) else None
    return owner if isinstance(owner, TorchOp) and owner.name == name else None


def _unscaled(op: TorchOp) -> bool:
    return is_constant(op.arguments().get("alpha", 1), 1.0)


class _TorchArithmetic:
    """The torch dialect's spelling of the operations the activation patterns read."""

    def product(self, value: Operand) -> tuple[Operand, Operand] | None:
        if (op := _torch_op(value, "torch.aten.mul.Tensor")) is not None:
            return op.operands[0], op.operands[1]
        if (op := _torch_op(value, "torch.aten.mul.Scalar")) is not None:
            return op.operands[0], op.arguments().get("other")
        return None

    def sum(self, value: Operand) -> tuple[Operand, Operand] | None:
        if (op := _torch_op(value, "torch.aten.add.Tensor")) is not None and _unscaled(op):
            return op.operands[0], op.operands[1]
        if (op := _torch_op(value, "torch.aten.add.Scalar")) is not None and _unscaled(op):
            return op.operands[0], op.arguments().get("other")
        return None

    def power(self, value: Operand) -> tuple[Operand, Operand] | None:
        if (op := _torch_op(value, "torch.aten.pow.Tensor_Scalar")) is not None:
            return op.operands[0], op.arguments().get("exponent")
        return None

    def tanh(self, value: Operand) -> Operand | None:
        op = _torch_op(value, "torch.aten.tanh")
        return op.operands[0] if op is not None else None


class RecognizeTanhGelu(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, TorchOp) or op.name != "torch.aten.mul.Tensor":
            return
        x = tanh_gelu_input(_TorchArithmetic(), op.results[0])
        if not isinstance(x, SSAValue) or x.type != op.results[0].type:
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
