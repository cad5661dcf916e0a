"""How the fusion passes walk a function: the one visiting order each of them drives its own matching with.

Two kinds of fusion pass share it. The tile-level fusions (tile-fuse-epilogues, tile-fuse-matmul-prologues,
tile-fuse-matmul-chains) anchor on an allocation of the function body, the value one nest stores and another
loads, and rewrite the nests around it: `fuse_at_allocations` offers each allocation to the pass's matcher and
hands what it matched to the pass's rewrite. The torch-level fusions (torch-fuse-cross-entropy-backward,
torch-fuse-rms-norm-neighbours) only decide: `mark_fusions` sets their `neuron.fuse` mark on the ops they choose
and drops it where the IR no longer bears it out, and convert-torch-to-tile carries the decision out.

The passes keep their matching and rewriting; only the walk lives here. xDSL's `PatternRewriteWalker` does not
fit the tile-level fusions: each rewrite moves and erases ops far from the allocation it matched (a producer's
stores, a consumer's whole loop nest, a panel loop elsewhere in the body) directly rather than through a
`PatternRewriter`, and the order is part of the result (allocations directly in the body, in block order, each
once, a fused consumer's result next), where the walker visits every op and, by default, repeats to a fixed point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, SSAValue

FUSE = "neuron.fuse"
"""The discardable attribute a torch-level fusion marks an op with; its string value names the fusion."""

Match = TypeVar("Match")


def fuse_at_allocations(
    function: func.FuncOp,
    match: Callable[[SSAValue, Block], Match | None],
    fuse: Callable[[Match, Block], SSAValue | None],
) -> int:
    """Offer each allocation directly in `function`'s body, in block order, to `match` (with the body), and
    `fuse` each match; the count fused.

    An allocation an earlier fusion erased is passed over. A value `fuse` returns (a consumer's result that the
    fusion made a product of the same kind) is offered next, before the remaining allocations."""
    block = function.body.block
    pending: list[SSAValue] = [op.memref for op in block.ops if isinstance(op, memref.AllocOp)]
    fused = 0
    while pending:
        value = pending.pop(0)
        if value.owner.parent is None:
            continue
        found = match(value, block)
        if found is None:
            continue
        produced = fuse(found, block)
        fused += 1
        if produced is not None:
            pending.insert(0, produced)
    return fused


def mark_fusions(function: func.FuncOp, into: str, chosen: Callable[[Operation], bool]) -> int:
    """Mark each op of `function` (nested ones too) that `chosen` picks with `neuron.fuse = into`, and drop that
    mark from every other op (it was decided on IR that has since changed); the count marked. Marks of another
    fusion are left alone: each fusion pass keeps its own."""
    mark = StringAttr(into)
    marked = 0
    for op in function.body.walk():
        if chosen(op):
            op.attributes[FUSE] = mark
            marked += 1
        elif op.attributes.get(FUSE) == mark:
            del op.attributes[FUSE]
    return marked
