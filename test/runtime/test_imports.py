"""The runtime stands alone: NumPy, ml_dtypes, the standard library and itself (docs/architecture.md#layering)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import neuron_mlir.runtime

RUNTIME = Path(neuron_mlir.runtime.__file__).parent
ALLOWED_THIRD_PARTY = {"numpy", "ml_dtypes"}


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_runtime_imports_only_numpy_ml_dtypes_stdlib_and_itself():
    for path in sorted(RUNTIME.glob("*.py")):
        for module in imported_modules(path):
            top = module.split(".")[0]
            if module.startswith("neuron_mlir."):
                assert module.startswith("neuron_mlir.runtime"), f"{path.name} imports {module}"
            else:
                assert top in ALLOWED_THIRD_PARTY or top in sys.stdlib_module_names, f"{path.name} imports {module}"


def test_loading_the_runtime_pulls_in_no_compiler():
    code = (
        "import sys; import neuron_mlir.runtime.simulator, neuron_mlir.runtime.bundle, neuron_mlir.runtime.builder; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'xdsl') or m.startswith(('neuron_mlir.ir', "
        "'neuron_mlir.lowering', 'neuron_mlir.frontend', 'neuron_mlir.backend_trn'))]; print(bad); assert not bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
