"""torch-fuse-matmul-prologues: a layer norm read only by a matmul is marked to run in the matmul's prologue.

Input contract: torch-dialect functions, after the torch stage's cleanups (so that use counts are final).

Output guarantee: the same ops, with `neuron.fuse = "matmul_prologue"` on every `native_layer_norm` whose
normalized result only an `mm` or `addmm` reads, as its left operand A, through views only, with nothing but views
between the two ops, and whose statistics (mean, rstd) nothing reads. Nothing else changes; the pass never fails.

The mark is the decision; convert-torch-to-tile carries it out (lowering/convert_torch_to_tile/prologue.py): the
matmul computes the normalized rows where it would have loaded A's rows and applies the per-feature affine as
the transposed K tiles leave PSUM, so the layer norm's result never reaches HBM. What only the tile level knows
can still keep a marked layer norm in place, where it then runs as its own loop nest, computing the same values:
rows the on-chip plan cannot take (normalized dims that are not one contiguous run) or a matmul whose blocking
does not hoist A's panel.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from neuron_mlir.lowering.convert_torch_to_tile.prologue import (
    FUSE,
    MATMUL_CONSUMERS,
    MATMUL_PROLOGUE,
    consumer_of,
    fusion_mark,
)


def prologue_consumer(op: Operation) -> Operation | None:
    """The matmul whose prologue layer norm `op` may run in (module docstring), or None."""
    if op.name != "torch.aten.native_layer_norm" or any(result.uses for result in op.results[1:]):
        return None
    return consumer_of(op, MATMUL_CONSUMERS)


def mark_matmul_prologues(function: func.FuncOp) -> int:
    """Mark every layer norm of `function` its matmul can take as its prologue, and unmark any other op marked
    so (IR changed since it was marked); the count marked."""
    marked = 0
    for op in function.body.walk():
        if prologue_consumer(op) is not None:
            op.attributes[FUSE] = StringAttr(MATMUL_PROLOGUE)
            marked += 1
        elif fusion_mark(op) == MATMUL_PROLOGUE:
            del op.attributes[FUSE]
    return marked


@dataclass(frozen=True)
class TorchFuseMatmulProloguesPass(ModulePass):
    name = "torch-fuse-matmul-prologues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in op.ops:
            if isinstance(function, func.FuncOp) and not function.is_declaration:
                mark_matmul_prologues(function)
