"""The named pipelines: ordered stages of passes, each ending with its contract check.

`neuron-pipeline` runs the default one as a single pass, so
`neuron-opt model.mlir -p neuron-pipeline` takes torch-dialect IR to allocated, synchronised neuron
instructions, and `neuron-pipeline{until=tile}` stops after a stage (to save or inspect its IR).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.verification import verify_module
from neuron_mlir.lowering.verify_stage_contract import STAGES, check_stage_contract

# (stage name, passes) in order; the stage name is also the contract checked at its end. The torch stage
# (torch-level canonicalization, constant folding, the casts of the module's auto_cast mode, and xDSL's cse and
# dce on the Pure torch ops, then the fusion decisions, marks that convert-torch-to-tile follows) hands on valid
# torch-dialect IR, which the verifier checks.
DEFAULT_PIPELINE: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "torch",
        (
            "torch-canonicalize",
            "torch-fold-constants",
            "torch-recognize-activations",
            "torch-recognize-rms-norm",
            "torch-auto-cast",
            "cse",
            "dce",
            "torch-fuse-cross-entropy-backward",
            "torch-fuse-rms-norm-neighbours",
            "torch-fuse-batch-norm-casts",
        ),
    ),
    (
        "tile",
        (
            "convert-torch-to-tile",
            "tile-fuse-epilogues",
            "tile-fuse-matmul-prologues",
            "tile-fuse-matmul-chains",
            "tile-fuse-loops",
            "tile-unroll-streaming-loops",
        ),
    ),
    (
        "neuron",
        (
            "convert-tile-to-neuron",
            "neuron-fuse-instructions",
            "neuron-balance-engines",
            "neuron-unroll-loops",
            "neuron-assign-dma-queues",
        ),
    ),
    ("allocated", ("neuron-allocate-memory",)),
    ("synchronised", ("neuron-insert-sync",)),
)

StageCallback = Callable[[str, ModuleOp], None]
PassCallback = Callable[[str, ModuleOp], None]
"""Called around each pass with the pass's name and the module (`neuron-opt --print-between-passes` prints it)."""


def pass_class(name: str) -> type[ModulePass]:
    """A pass of the pipeline by name: ours (`ALL_PASSES`) or xDSL's (`cse`, `dce`)."""
    from xdsl.transforms import get_all_passes

    from neuron_mlir.lowering import ALL_PASSES

    factory = ALL_PASSES.get(name) or get_all_passes()[name]
    return factory()


def pipeline_passes(until: str | None = None) -> list[str]:
    """The names of the passes `run_pipeline` runs, in order, up to the end of stage `until` (all by default)."""
    _check_stage(until)
    names: list[str] = []
    for stage, passes in DEFAULT_PIPELINE:
        names.extend(passes)
        if stage == until:
            break
    return names


def _check_stage(until: str | None) -> None:
    names = [stage for stage, _ in DEFAULT_PIPELINE]
    if until is not None and until not in names:
        raise PassFailedException(f"unknown stage '{until}' (stages: {', '.join(names)})")


def run_pipeline(
    ctx: Context,
    module: ModuleOp,
    until: str | None = None,
    after_stage: StageCallback | None = None,
    timings: dict[str, float] | None = None,
    after_pass: PassCallback | None = None,
    before_pass: PassCallback | None = None,
    verify_stages: bool = True,
) -> None:
    """Run the default pipeline on `module` in place, checking each stage's contract and (`verify_stages`) the
    IR's validity after each stage.

    `before_pass` and `after_pass` are called around each pass with its name (progress reports, printing)."""
    import time

    _check_stage(until)
    for stage, passes in DEFAULT_PIPELINE:
        for pass_name in passes:
            if before_pass is not None:
                before_pass(pass_name, module)
            started = time.perf_counter()
            pass_class(pass_name)().apply(ctx, module)
            if timings is not None:
                timings[pass_name] = timings.get(pass_name, 0.0) + time.perf_counter() - started
            if after_pass is not None:
                after_pass(pass_name, module)
        if verify_stages:
            verify_module(module)
        if stage in STAGES:  # the torch stage promises what the verifier checks: valid torch-dialect IR
            check_stage_contract(module, stage)
        if after_stage is not None:
            after_stage(stage, module)
        if stage == until:
            return


@dataclass(frozen=True)
class NeuronPipelinePass(ModulePass):
    name = "neuron-pipeline"

    until: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_pipeline(ctx, op, self.until)
