"""Reference semantics: run IR of any level on NumPy inputs, so a pass can be checked by execution.

    outputs = run_function(module, inputs)          # torch, tile or neuron level, detected from the ops
    problems = check_semantics(before, after)       # same random inputs through both, compared per dtype

Each level has its own runner: the torch dialect calls the ATen ops themselves (`torch.py`), the tile dialect
is NumPy (`tile.py`). The neuron level means the runtime program it denotes, run on the simulated NeuronCore;
building that program is the backend's translation (`backend_trn/translate.py`), which `ir/` may not import
(docs/architecture.md#layering). So runners live in a registry, keyed by level: this package registers the
torch and tile runners, and importing `neuron_mlir.backend_trn` registers the neuron one. Whoever runs neuron IR
through `run_function` or `check_semantics` (`neuron-opt`, the pipeline tests) imports the backend first;
without it, running neuron IR is an error that says so. All runners take and return NumPy arrays in the
function's argument and result order, so a pass's input and output can be run on the same inputs and compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType

from neuron_mlir.ir.semantics.compare import compare_all
from neuron_mlir.ir.semantics.structured import InterpretationError, find_function
from neuron_mlir.ir.types import runtime_dtype_name

LevelRunner = Callable[[ModuleOp, Sequence[np.ndarray], str], list[np.ndarray]]
"""Runs `@entry` of a module of one level: (module, inputs, entry) -> outputs, NumPy arrays in signature order."""

LEVELS = ("torch", "tile", "neuron")
_RUNNERS: dict[str, LevelRunner] = {}


class MissingLevelSemantics(InterpretationError):
    """No runner is registered for the level of the IR to run."""


def register_level_semantics(level: str, runner: LevelRunner) -> None:
    """Make `runner` the reference semantics of `level` (registering a level again replaces its runner)."""
    if level not in LEVELS:
        raise ValueError(f"unknown IR level {level!r}: the levels are {', '.join(LEVELS)}")
    _RUNNERS[level] = runner


def level_of(module: ModuleOp) -> str:
    """'torch', 'tile' or 'neuron': the highest level whose ops the module holds."""
    dialects = {op.dialect_name() for op in module.walk()}
    if "torch" in dialects:
        return "torch"
    if "tile" in dialects or "memref" in dialects:
        return "tile"
    function_types = [
        arg.type for op in module.walk() for region in op.regions for block in region.blocks for arg in block.args
    ]
    if any(isinstance(t, TensorType) for t in function_types):
        return "torch"
    return "neuron" if "neuron" in dialects else "tile"


def run_function(module: ModuleOp, inputs: Sequence[np.ndarray], entry: str = "main") -> list[np.ndarray]:
    """Execute `@entry` of `module` with the reference semantics of its level."""
    level = level_of(module)
    runner = _RUNNERS.get(level)
    if runner is None:
        hint = (
            ": neuron IR runs as the program the backend translates it to; import neuron_mlir.backend_trn first"
            if level == "neuron"
            else ""
        )
        raise MissingLevelSemantics(f"no reference semantics registered for {level}-level IR{hint}")
    return runner(module, inputs, entry)


def _run_torch(module: ModuleOp, inputs: Sequence[np.ndarray], entry: str) -> list[np.ndarray]:
    # each level's interpreter is imported on use: running one level loads nothing of the others
    from neuron_mlir.ir.semantics.torch import run_torch_function

    return run_torch_function(module, inputs, entry)


def _run_tile(module: ModuleOp, inputs: Sequence[np.ndarray], entry: str) -> list[np.ndarray]:
    from neuron_mlir.ir.semantics.tile import run_tile_function

    return run_tile_function(module, inputs, entry)


register_level_semantics("torch", _run_torch)
register_level_semantics("tile", _run_tile)


def random_inputs(
    module: ModuleOp, entry: str = "main", seed: int = 0, max_bytes: int | None = None
) -> list[np.ndarray]:
    """Random arguments for `@entry`: standard normal floats, small integers, random booleans; an argument that
    is no tensor of static shape, or arguments above `max_bytes` in all, are an InterpretationError."""
    from neuron_mlir.runtime.dtypes import numpy_dtype

    rng = np.random.default_rng(seed)
    function = find_function(module, entry)
    if len(function.body.blocks) != 1:
        raise InterpretationError(f"@{entry} has {len(function.body.blocks)} blocks: only one runs", function)
    arrays: list[np.ndarray] = []
    total_bytes = 0
    for index, arg in enumerate(function.body.block.args):
        arg_type = arg.type
        if not isinstance(arg_type, TensorType | MemRefType) or any(size < 0 for size in arg_type.get_shape()):
            raise InterpretationError(
                f"@{entry} argument {index} is {arg_type}, not a tensor of static shape", function
            )
        shape = arg_type.get_shape()
        total_bytes += math.prod(shape) * 8  # drawn as float64 first
        if max_bytes is not None and total_bytes > max_bytes:
            raise InterpretationError(
                f"@{entry} arguments 0-{index} alone take {total_bytes / 2**30:.1f} GiB of random values, more than "
                f"the {max_bytes / 2**30:.1f} GiB allowed",
                function,
            )
        try:
            name = runtime_dtype_name(arg_type.element_type)
        except ValueError as error:
            raise InterpretationError(f"@{entry} argument {index}: {error}", function) from None
        if name == "i1":
            arrays.append(rng.random(shape) < 0.5)
        elif name.startswith(("i", "u")):
            arrays.append(rng.integers(0, 8, shape).astype(numpy_dtype(name)))
        elif name == "f64":
            arrays.append(rng.standard_normal(shape))
        else:
            arrays.append(rng.standard_normal(shape).astype(np.float32).astype(numpy_dtype(name)))
    return arrays


def check_semantics(
    before: ModuleOp, after: ModuleOp, inputs: Sequence[np.ndarray] | None = None, entry: str = "main"
) -> list[str]:
    """Run both modules on the same inputs; the list of output mismatches (empty when they agree)."""
    if inputs is None:
        inputs = random_inputs(before, entry)
    expected = run_function(before, [np.copy(a) for a in inputs], entry)
    actual = run_function(after, [np.copy(a) for a in inputs], entry)
    return compare_all(actual, expected)
