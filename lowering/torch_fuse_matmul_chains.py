"""torch-fuse-matmul-chains: a Linear layer and its activation read by another Linear layer are marked to run
as that layer's stationary panel.

Input contract: torch-dialect functions, after the torch stage's cleanups (so that use counts are final).

Output guarantee: the same ops, with `neuron.fuse = "matmul_chain"` on every `addmm` (beta = alpha = 1, a 1-d
bias, A [M, K1] with M > 1, K1 and the bias's N1 multiples of 128) whose result only a GELU, ReLU, sigmoid or tanh
reads, through views only, whose result in turn only an `mm` or `addmm` reads as its left operand A, with nothing
but views between the ops (`chain_activation` in lowering/convert_torch_to_tile/matmul_chain.py); a mark on any
other op is removed. Nothing else changes; the pass never fails.

The mark is the decision; convert-torch-to-tile carries it out (matmul_chain.py): the first matmul runs with its
operands swapped so that each PSUM tile holds hidden features on partitions, the activation is applied as the tile
leaves PSUM into the second matmul's panel, and the hidden activations never reach HBM. What only the tile level
knows can still keep the ops in place, each then its own loop nest computing the same values: a first weight
that is not row-major (the layout views give it), or a second matmul whose blocking does not hoist its panel.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from neuron_mlir.lowering.convert_torch_to_tile.matmul_chain import chain_activation
from neuron_mlir.lowering.convert_torch_to_tile.prologue import FUSE, MATMUL_CHAIN, fusion_mark


def mark_matmul_chains(function: func.FuncOp) -> int:
    """Mark every addmm of `function` that the next matmul can take with its activation as its panel, and unmark
    any other op marked so (IR changed since it was marked); the count marked."""
    marked = 0
    for op in function.body.walk():
        if chain_activation(op) is not None:
            op.attributes[FUSE] = StringAttr(MATMUL_CHAIN)
            marked += 1
        elif fusion_mark(op) == MATMUL_CHAIN:
            del op.attributes[FUSE]
    return marked


@dataclass(frozen=True)
class TorchFuseMatmulChainsPass(ModulePass):
    name = "torch-fuse-matmul-chains"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in op.ops:
            if isinstance(function, func.FuncOp) and not function.is_declaration:
                mark_matmul_chains(function)
