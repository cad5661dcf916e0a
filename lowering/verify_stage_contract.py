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
from xdsl.dialects import func, scf
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


def _neuron_level(op_class: type[Operation]) -> bool:
    """Whether ops of `op_class` may remain after the neuron stage (a property of the class alone)."""
    return (
        issubclass(op_class, _NEURON_LEVEL_GLUE)
        or op_class.dialect_name() in ("neuron", "arith")  # arith: index arithmetic, constants and casts
    )


def check_stage_contract(module: ModuleOp, stage: str) -> None:
    """Raise PassFailedException at the first op that breaks the contract of `stage`."""
    if stage not in STAGES:
        raise PassFailedException(f"unknown stage '{stage}' (stages: {', '.join(STAGES)})")
    level = STAGES.index(stage)
    ops = list(module.walk())
    # a leftover torch op is the most telling violation: report it before its tensors
    for op in ops:
        if type(op).name.startswith("torch."):  # the class's dialect, as `dialect_name` reads it
            raise _violation(op, "torch op remains", stage)
    neuron_level: dict[type[Operation], bool] = {}  # per class, asked once
    for op in ops:
        if op.regions:
            block_args = [arg for region in op.regions for block in region.blocks for arg in block.args]
            if any(isinstance(arg.type, TensorType) for arg in block_args):
                raise _violation(op, "tensor argument remains", stage)
            if level >= 1 and any(arg.type.name == "tile.tile" for arg in block_args):
                raise _violation(op, "tile argument remains", stage)
        if any(isinstance(v.type, TensorType) for v in op.operands) or any(
            isinstance(v.type, TensorType) for v in op.results
        ):
            raise _violation(op, "tensor value remains", stage)
        if level < 1:
            continue
        if isinstance(op, scf.ForOp) and op.iter_args:
            raise _violation(op, "loop still carries values", stage)
        allowed = neuron_level.get(type(op))
        if allowed is None:
            allowed = neuron_level[type(op)] = _neuron_level(type(op))
        if not allowed:
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
