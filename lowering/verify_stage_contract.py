"""verify-stage-contract: check that IR is what a stage of the pipeline promises to hand on.

`verify-stage-contract{stage=tile}` after convert-torch-to-tile: no torch op and no tensor type remain.
`stage=neuron` after convert-tile-to-neuron: only neuron instructions, buffers, index arithmetic and loops
without carried values. `stage=allocated`: additionally every buffer has an address. `stage=synchronised`:
additionally every instruction has an id. Each violation names the op and its source line, so a pass that
leaves work undone fails at its own boundary rather than somewhere downstream.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.locations import OpDiagnostic, at_source

STAGES = ("tile", "neuron", "allocated", "synchronised")
_NEURON_LEVEL_GLUE = (func.FuncOp, func.ReturnOp, scf.ForOp, scf.YieldOp, ModuleOp)


def _violation(op: Operation, message: str, stage: str) -> PassFailedException:
    return OpDiagnostic(f"{op.name}: {message} after the '{stage}' stage{at_source(op)}", op)


def check_stage_contract(module: ModuleOp, stage: str) -> None:
    """Raise PassFailedException at the first op that breaks the contract of `stage`."""
    if stage not in STAGES:
        raise PassFailedException(f"unknown stage '{stage}' (stages: {', '.join(STAGES)})")
    level = STAGES.index(stage)
    # a leftover torch op is the most telling violation: report it before its tensors
    for op in module.walk():
        if op.dialect_name() == "torch":
            raise _violation(op, "torch op remains", stage)
    for op in module.walk():
        block_args = [arg for region in op.regions for block in region.blocks for arg in block.args]
        if any(isinstance(arg.type, TensorType) for arg in block_args):
            raise _violation(op, "tensor argument remains", stage)
        if level >= 1 and any(arg.type.name == "tile.tile" for arg in block_args):
            raise _violation(op, "tile argument remains", stage)
        if any(isinstance(v.type, TensorType) for v in (*op.operands, *op.results)):
            raise _violation(op, "tensor value remains", stage)
        if level < 1:
            continue
        if isinstance(op, scf.ForOp) and op.iter_args:
            raise _violation(op, "loop still carries values", stage)
        if not (
            isinstance(op, _NEURON_LEVEL_GLUE)
            or op.dialect_name() == "neuron"
            or (op.dialect_name() == "arith" and not isinstance(op, arith.ConstantOp | arith.IndexCastOp))
            or isinstance(op, arith.ConstantOp | arith.IndexCastOp)
        ):
            raise _violation(op, "is not a neuron-level op", stage)
        if level >= 2 and isinstance(op, neuron.AllocOp) and op.address is None:
            raise _violation(op, "buffer has no address", stage)
        if level >= 3 and isinstance(op, neuron.InstructionOp) and op.instruction_id is None:
            raise _violation(op, "instruction has no id", stage)


@dataclass(frozen=True)
class VerifyStageContractPass(ModulePass):
    name = "verify-stage-contract"

    stage: str = "tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_stage_contract(op, self.stage)
