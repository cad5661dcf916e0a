"""typecheck: the `neuron_mlir` namespace laid out as links for mypy, errors reported at the real paths."""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path

import pytest
from support import REPO

from neuron_mlir.tools.typecheck import link_namespace, package_dirs, real_paths, typecheck


def _project(root: Path) -> None:
    """A package `demo` whose subpackage `demo.core` is the top-level folder core/, as pyproject.toml maps it."""
    (root / "demo").mkdir()
    (root / "demo" / "__init__.py").write_text("")
    (root / "core").mkdir()
    (root / "core" / "__init__.py").write_text("")
    (root / "core" / "shapes.py").write_text("def area(width: int, height: int) -> int:\n    return width * height\n")
    (root / "core" / "use.py").write_text(
        "from demo.core.shapes import area\n\nTOTAL: int = area(2, 3)\nWRONG: str = area(2, 3)\n"
    )
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [tool.setuptools]
            package-dir = { "demo" = "demo", "demo.core" = "core" }

            [tool.mypy]
            files = ["build/typecheck/demo"]
            mypy_path = ["build/typecheck"]
            explicit_package_bases = true
            """
        )
    )


def test_the_repository_mapping_covers_every_package_folder():
    mapping = package_dirs(REPO / "pyproject.toml")
    assert mapping["neuron_mlir"] == REPO / "neuron_mlir"
    for folder in ("ir", "frontend", "lowering", "backend_trn", "runtime", "tools"):
        assert mapping[f"neuron_mlir.{folder}"] == REPO / folder


def test_no_module_is_exempt_from_type_errors():
    """Every package is type-checked whole: no override of pyproject.toml ignores a module's errors."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    exempt = [o["module"] for o in config["tool"]["mypy"].get("overrides", []) if o.get("ignore_errors")]
    assert exempt == []


def test_links_mirror_the_import_namespace(tmp_path):
    _project(tmp_path)
    root = tmp_path / "build" / "typecheck"
    links = link_namespace(package_dirs(tmp_path / "pyproject.toml"), root)
    assert links == {root / "demo": tmp_path / "demo", root / "demo" / "core": tmp_path / "core"}
    assert not (root / "demo").is_symlink()
    assert (root / "demo" / "__init__.py").resolve() == tmp_path / "demo" / "__init__.py"
    assert (root / "demo" / "core").resolve() == tmp_path / "core"
    assert (root / "demo" / "core" / "shapes.py").read_text().startswith("def area")


def test_links_are_rebuilt_from_scratch(tmp_path):
    _project(tmp_path)
    root = tmp_path / "build" / "typecheck"
    stale = root / "demo" / "removed"
    stale.mkdir(parents=True)
    link_namespace(package_dirs(tmp_path / "pyproject.toml"), root)
    assert not stale.exists()


def test_a_package_mapped_inside_a_linked_one_is_refused(tmp_path):
    _project(tmp_path)
    (tmp_path / "extra").mkdir()
    mapping = {**package_dirs(tmp_path / "pyproject.toml"), "demo.core.extra": tmp_path / "extra"}
    with pytest.raises(ValueError, match=r"demo\.core\.extra"):
        link_namespace(mapping, tmp_path / "build" / "typecheck")
    assert not (tmp_path / "core" / "extra").exists()  # nothing written through the link into the real folder


def test_report_paths_point_at_the_real_files(tmp_path):
    root = tmp_path / "build" / "typecheck"
    links = {root / "demo": tmp_path / "demo", root / "demo" / "core": tmp_path / "core"}
    report = (
        "build/typecheck/demo/core/use.py:4: error: bad  [assignment]\n"
        "build/typecheck/demo/__init__.py:1: note: fine\n"
        f"{root}/demo/core/use.py:4: error: bad  [assignment]\n"
    )
    assert real_paths(report, links, tmp_path) == (
        "core/use.py:4: error: bad  [assignment]\n"
        "demo/__init__.py:1: note: fine\n"
        f"{tmp_path}/core/use.py:4: error: bad  [assignment]\n"
    )


def test_mypy_resolves_the_mapped_imports_and_reports_real_paths(tmp_path, capsys):
    _project(tmp_path)
    status = typecheck(tmp_path, ["--no-incremental"])
    out = capsys.readouterr().out
    # the import `demo.core.shapes` resolved: `area` is known to return int, so only the str annotation is wrong
    assert status == 1
    assert out.splitlines()[0].startswith("core/use.py:4: error: Incompatible types in assignment")
    assert "Found 1 error in 1 file" in out
