"""torch-fuse-cross-entropy-backward: cross-entropy's backward is marked to be computed as one pass.

Input contract: torch-dialect functions, after the torch stage's cleanups (so that use counts are final).

Output guarantee: the same ops, with the discardable attribute `neuron.fuse = "log_softmax_backward"` on every
`nll_loss_backward` whose result only a `_log_softmax_backward_data` reads, as its gradient, along the class dim
and with the nll_loss_backward's own log-probabilities as that op's `output`: cross-entropy's backward. A mark
on any other op is dropped (the IR changed since it was marked). Nothing else changes; the pass never fails.

The mark is the decision; convert-torch-to-tile carries it out (lowering/convert_torch_to_tile/loss.py): the
log-softmax backward computes c * (onehot(target) - exp(self)) from nll_loss_backward's operands in one pass over
the rows, and the marked op's own one-hot gradient is never built. The conversion follows a mark only where the
IR still bears it out, so hand-written or stale marks cannot change a result; unmarked, both ops lower on their
own (a zero fill, a scatter, and a softmax backward), computing the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from neuron_mlir.lowering.fusion_walks import FUSE, mark_fusions
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.lowering.layout import normalize_dim

INTO_LOG_SOFTMAX_BACKWARD = "log_softmax_backward"
NLL_LOSS_BACKWARD = "torch.aten.nll_loss_backward"
LOG_SOFTMAX_BACKWARD = "torch.aten._log_softmax_backward_data"


def log_softmax_backward_reader(op: Operation) -> Operation | None:
    """The `_log_softmax_backward_data` that, with nll_loss_backward `op`, is cross-entropy's backward (the
    module docstring's rule), or None."""
    if op.name != NLL_LOSS_BACKWARD or not op.results[0].has_one_use():
        return None
    result = op.results[0]
    user = next(iter(result.uses)).operation
    if user.name != LOG_SOFTMAX_BACKWARD:
        return None
    arguments = user.arguments()
    log_probabilities = op.arguments()["self"]  # type: ignore[attr-defined]
    if arguments["grad_output"] is not result or arguments["output"] is not log_probabilities:
        return None
    rank = max(len(log_probabilities.type.get_shape()), 1)
    return user if normalize_dim(int(arguments["dim"]), rank) == rank - 1 else None


def fused_reader(op: Operation) -> Operation | None:
    """The log-softmax backward that computes marked nll_loss_backward `op`'s part too, where the IR still bears
    the mark out, or None."""
    if op.attributes.get(FUSE) != StringAttr(INTO_LOG_SOFTMAX_BACKWARD):
        return None
    return log_softmax_backward_reader(op)


def fused_nll_loss_backward(op: Operation) -> Operation | None:
    """The marked nll_loss_backward whose part the log-softmax backward `op` computes (`fused_reader`), or None."""
    owner = op.operands[0].owner if op.operands else None
    return owner if isinstance(owner, Operation) and fused_reader(owner) is op else None


def mark_cross_entropy_backward(function: func.FuncOp) -> int:
    """Mark every nll_loss_backward of `function` that forms cross-entropy's backward with its reader, and
    unmark any other op so marked; the count marked."""
    return mark_fusions(function, INTO_LOG_SOFTMAX_BACKWARD, lambda op: log_softmax_backward_reader(op) is not None)


@dataclass(frozen=True)
class TorchFuseCrossEntropyBackwardPass(ModulePass):
    name = "torch-fuse-cross-entropy-backward"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            mark_cross_entropy_backward(function)
