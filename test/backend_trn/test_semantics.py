"""The neuron level's reference semantics: registered with `ir.semantics` by importing the backend.

`ir/` may not import `backend_trn/`, so `ir.semantics.run_function` finds the neuron level's runner in its
registry. These tests run in fresh interpreters, where nothing has imported the backend yet.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from neuron_mlir.ir.semantics import register_level_semantics

_PROGRAM = """
import numpy as np
from xdsl.parser import Parser
from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.semantics import check_semantics, run_function

HBM = "memref<1x4xf32, #mem<hbm>>"
SBUF = "memref<1x4xf32, #mem<sbuf>>"
TEXT = f'''
func.func @main(%x: {HBM}) -> {HBM} {{
  %out = neuron.alloc : {HBM}
  %t = neuron.alloc : {SBUF}
  neuron.dma_copy dma dst %t[0:1, 0, [[1, 4]]], src %x[0, [[4, 1], [1, 4]]] {{queue = 0 : i64}} : {SBUF}, {HBM}
  neuron.dma_copy dma dst %out[0, [[4, 1], [1, 4]]], src %t[0:1, 0, [[1, 4]]] {{queue = 1 : i64}} : {HBM}, {SBUF}
  func.return %out : {HBM}
}}
'''
module = Parser(make_context(), TEXT).parse_module()
{before}
try:
    (out,) = run_function(module, [np.arange(4, dtype=np.float32).reshape(1, 4)])
    print(out.tolist(), check_semantics(module, module.clone()))
except Exception as error:
    print(type(error).__name__, error)
"""


def _run(before: str, tmp_path: Path) -> str:
    code = _PROGRAM.replace("{before}", before)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    return result.stdout.strip()


def test_neuron_ir_runs_once_the_backend_is_imported(tmp_path: Path) -> None:
    assert _run("import neuron_mlir.backend_trn", tmp_path) == "[[0.0, 1.0, 2.0, 3.0]] []"


def test_without_the_backend_running_neuron_ir_says_what_to_import(tmp_path: Path) -> None:
    output = _run("", tmp_path)
    assert output.startswith("MissingLevelSemantics no reference semantics registered for neuron-level IR")
    assert "import neuron_mlir.backend_trn" in output


def test_only_the_three_levels_take_a_runner() -> None:
    def runner(module: ModuleOp, inputs, entry: str) -> list:
        return []

    with pytest.raises(ValueError, match="unknown IR level 'bundle': the levels are torch, tile, neuron"):
        register_level_semantics("bundle", runner)
