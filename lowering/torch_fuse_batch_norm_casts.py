"""torch-fuse-batch-norm-casts: the casts of a batch norm's per-channel results that its channel nest writes too.

Input contract: torch-dialect functions, after the torch stage's cleanups (so that use counts are final).

Output guarantee: the same ops, with the discardable attribute `neuron.fuse = "batch_norm_columns"` on each
`_to_copy` that only changes the element type (plain layout and memory format) of a per-channel result of a batch
norm in training, later in the same block: the saved mean or rstd, or the updated running mean or variance (a
module whose buffers are bf16 gets them as fp32 results and casts them back). No other op carries the mark (stale
marks are dropped); nothing else changes, and the pass never fails.

The mark is the decision; convert-torch-to-tile's batch norm lowering carries it out where its channel nest runs
(a contiguous, non-empty input): the nest writes the cast from the channel tile's columns next to the result
itself. A cast in a nest of its own would run after the whole normalization pass, since engines run their
instructions in order, and its loads would get HBM bandwidth only after that pass's stores. Otherwise the cast
keeps its own loop nest, computing the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.fusion_walks import FUSE, mark_fusions
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.lowering.torch_fuse_rms_norm_neighbours import plain_cast

INTO_BATCH_NORM_COLUMNS = "batch_norm_columns"
_FLOATS = frozenset({"f32", "bf16", "f16"})

# Batch norms in training by op name: the indices of their per-channel results (saved mean and rstd, updated
# running mean and variance), and whether they are in training (the op's `training` argument, or always)
_PER_CHANNEL_RESULTS: dict[str, tuple[int, ...]] = {
    "torch.aten._native_batch_norm_legit_functional": (1, 2, 3, 4),
    "torch.aten._native_batch_norm_legit.no_stats": (1, 2),
    "torch.aten._batch_norm_with_update_functional": (1, 2, 4, 5),
}


def _in_training(norm: Operation) -> bool:
    if norm.name == "torch.aten._batch_norm_with_update_functional":
        return True
    return bool(norm.arguments().get("training"))  # type: ignore[attr-defined]


def statistics_casts(norm: Operation) -> dict[int, Operation]:
    """The casts of `norm`'s per-channel results that its channel nest can write, by result index (one each)."""
    indices = _PER_CHANNEL_RESULTS.get(norm.name)
    if indices is None or not _in_training(norm):
        return {}
    found: dict[int, Operation] = {}
    for index in indices:
        if index >= len(norm.results):
            continue
        for use in norm.results[index].uses:
            cast = use.operation
            result = plain_cast(cast)
            if result is None or runtime_dtype_name(result.element_type) not in _FLOATS:
                continue
            if cast.parent_block() is norm.parent_block() and _later(norm, cast):
                found[index] = cast
                break
    return found


def _later(op: Operation, candidate: Operation) -> bool:
    current = op.next_op
    while current is not None:
        if current is candidate:
            return True
        current = current.next_op
    return False


def is_marked(op: Operation) -> bool:
    return op.attributes.get(FUSE) == StringAttr(INTO_BATCH_NORM_COLUMNS)


def mark_batch_norm_casts(function: func.FuncOp) -> int:
    """Mark the statistics casts of every batch norm in training of `function`, unmark any other op so marked; the
    count marked."""
    chosen = {id(cast) for norm in function.body.walk() for cast in statistics_casts(norm).values()}
    return mark_fusions(function, INTO_BATCH_NORM_COLUMNS, lambda op: id(op) in chosen)


@dataclass(frozen=True)
class TorchFuseBatchNormCastsPass(ModulePass):
    name = "torch-fuse-batch-norm-casts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            mark_batch_norm_casts(function)
