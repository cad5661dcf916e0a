"""Reference semantics: run IR of any level on NumPy inputs, so a pass can be checked by execution.

    outputs = run_function(module, inputs)          # torch, tile or neuron level, detected from the ops
    problems = check_semantics(before, after)       # same random inputs through both, compared per dtype

Each level has its own interpreter: the torch dialect calls the ATen ops themselves (`torch.py`), the tile
dialect is NumPy (`tile.py`), and the neuron dialect runs on the simulated NeuronCore (`neuron.py`). All take
and return NumPy arrays in the function's argument and result order, so a pass's input and output can be run
on the same inputs and compared.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType

from neuron_mlir.ir.semantics.compare import compare_all
from neuron_mlir.ir.semantics.structured import find_function
from neuron_mlir.ir.types import runtime_dtype_name


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
    if level == "torch":
        from neuron_mlir.ir.semantics.torch import run_torch_function

        return run_torch_function(module, inputs, entry)
    if level == "tile":
        from neuron_mlir.ir.semantics.tile import run_tile_function

        return run_tile_function(module, inputs, entry)
    from neuron_mlir.ir.semantics.neuron import run_neuron_function

    return run_neuron_function(module, inputs, entry)


def random_inputs(module: ModuleOp, entry: str = "main", seed: int = 0) -> list[np.ndarray]:
    """Random arguments for `@entry`: standard normal floats, small integers, random booleans."""
    from neuron_mlir.runtime.dtypes import numpy_dtype

    rng = np.random.default_rng(seed)
    function = find_function(module, entry)
    arrays: list[np.ndarray] = []
    for arg in function.body.block.args:
        arg_type = arg.type
        assert isinstance(arg_type, TensorType | MemRefType), f"argument of type {arg_type}"
        shape = arg_type.get_shape()
        name = runtime_dtype_name(arg_type.element_type)
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
