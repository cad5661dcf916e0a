"""The import rules of docs/architecture.md#layering, checked on the source and on the installed package."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

FOLDERS = ("ir", "frontend", "lowering", "backend_trn", "runtime", "tools", "nki")
# which project folders each folder may import (besides itself)
ALLOWED = {
    "runtime": set(),
    "ir": {"runtime"},
    "lowering": {"ir", "runtime"},
    "backend_trn": {"ir", "runtime", "lowering"},
    "frontend": {"ir", "lowering", "backend_trn", "runtime", "nki"},
    # NKI kernels trace into the neuron dialect and run through the back end; no torch
    "nki": {"ir", "lowering", "backend_trn", "runtime"},
    "tools": set(FOLDERS),
}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at module level) for every import in a file."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) in top_level))
    return found


def _sources(folder: str):
    return sorted((REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", FOLDERS)
def test_folder_imports_only_what_it_may(folder):
    for path in _sources(folder):
        for module, _ in _imports(path):
            if not module.startswith("neuron_mlir."):
                continue
            target = module.split(".")[1]
            if target in FOLDERS and target != folder:
                assert target in ALLOWED[folder], f"{path.relative_to(REPO)} imports {module}"


def test_runtime_stands_alone():
    for path in _sources("runtime"):
        for module, _ in _imports(path):
            root = module.split(".")[0]
            assert root not in ("xdsl", "torch"), f"{path.relative_to(REPO)} imports {module}"


# tools/ may import what it needs (docs/architecture.md#layering), but the IR tools must start without torch
TORCH_FREE_TOOLS = ("neuron_opt.py", "neuron_run.py")


@pytest.mark.parametrize("folder", ["ir", "lowering", "backend_trn", "runtime", "tools", "nki"])
def test_no_module_level_torch_outside_the_frontend(folder):
    for path in _sources(folder):
        if folder == "tools" and path.name not in TORCH_FREE_TOOLS:
            continue
        for module, top in _imports(path):
            assert not (top and module.split(".")[0] == "torch"), f"{path.relative_to(REPO)} imports torch"


def _run_outside_repo(code: str, tmp_path: Path) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    return result.stdout.strip()


def test_neuron_opt_does_not_import_torch(tmp_path):
    code = "import sys; import neuron_mlir.tools.neuron_opt; print('torch' in sys.modules)"
    assert _run_outside_repo(code, tmp_path) == "False"


def test_installed_package_imports_from_outside_the_repository(tmp_path):
    code = (
        "import neuron_mlir, neuron_mlir.ir.dialects.neuron, neuron_mlir.runtime.simulator, "
        "neuron_mlir.lowering.pipelines, neuron_mlir.frontend.backend; print(neuron_mlir.__version__)"
    )
    assert _run_outside_repo(code, tmp_path) == neuron_mlir_version()


def test_no_generic_top_level_modules_installed(tmp_path):
    code = "import importlib.util as u; print([m for m in ('ir', 'runtime', 'tools', 'lowering', 'frontend') if u.find_spec(m)])"
    assert _run_outside_repo(code, tmp_path) == "[]"


def test_backend_registered_by_entry_point(tmp_path):
    code = "import torch._dynamo; print('neuron-mlir' in torch._dynamo.list_backends())"
    assert _run_outside_repo(code, tmp_path) == "True"


def test_every_package_folder_is_listed_in_pyproject():
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = {folder: package for package, folder in config["package-dir"].items()}
    for init in REPO.glob("*/**/__init__.py"):
        relative = init.parent.relative_to(REPO)
        top = relative.parts[0]
        if top not in mapping:
            continue
        package = ".".join([mapping[top], *relative.parts[1:]])
        assert package in listed, f"{relative} is a package but pyproject.toml does not list {package}"


def neuron_mlir_version() -> str:
    import neuron_mlir

    return neuron_mlir.__version__


def test_neuron_opt_on_neuron_level_ir_leaves_torch_out(tmp_path):
    source = REPO / "test" / "lit" / "lowering" / "Inputs" / "mlp_forward.neuron.mlir"
    code = (
        "import sys, contextlib, io\n"
        "from neuron_mlir.tools.neuron_opt import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main([{str(source)!r}, '-p', 'neuron-allocate-memory,neuron-insert-sync'])\n"
        "print('torch' in sys.modules)"
    )
    assert _run_outside_repo(code, tmp_path) == "False"
