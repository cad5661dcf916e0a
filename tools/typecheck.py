"""typecheck: run mypy over neuron-mlir as Python imports it, and report errors at the files' real paths.

    python -m neuron_mlir.tools.typecheck [mypy options]

pyproject.toml maps each top-level folder into the `neuron_mlir` namespace (`neuron_mlir.ir` is `ir/`), which an
installed package resolves through setuptools' import hook. mypy finds modules on the file system only, so it
would see `ir/` as a package of its own and never match it with the `neuron_mlir.ir` that every import names.
This tool lays that namespace out as links under build/typecheck/ (rebuilt on every run, so a folder added to
the mapping is picked up), runs mypy with the configuration of pyproject.toml (which lists the files and
options), and rewrites the linked paths in its report back to the repository's own, so an error points at the
file to edit. The exit status is mypy's. It runs from a checkout installed in editable mode (`make venv`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# where the links go, under the repository; mypy_path in pyproject.toml names it
LINK_ROOT = Path("build") / "typecheck"


def package_dirs(pyproject: Path) -> dict[str, Path]:
    """The package -> folder mapping of [tool.setuptools] package-dir, as absolute paths."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {package: (pyproject.parent / folder).resolve() for package, folder in mapping.items()}


def link_namespace(mapping: dict[str, Path], root: Path) -> dict[Path, Path]:
    """Lay `mapping` out under `root` as Python's import system sees it; returns link folder -> real folder.

    A package whose parent is mapped too becomes a link to its folder; a root package becomes a real folder
    holding links to its own modules, so its mapped subpackages can sit beside them.
    """
    if root.exists():
        shutil.rmtree(root)
    links: dict[Path, Path] = {}
    for package in sorted(mapping, key=lambda name: name.count(".")):
        folder = mapping[package]
        target = root.joinpath(*package.split("."))
        parent = package.rpartition(".")[0]
        if any(ancestor.is_symlink() for ancestor in target.parents):
            raise ValueError(f"{package}: a package mapped inside another mapped package cannot be linked")
        if parent in mapping:
            target.symlink_to(folder, target_is_directory=True)
        else:
            target.mkdir(parents=True)
            for module in folder.glob("*.py"):
                (target / module.name).symlink_to(module)
        links[target] = folder
    return links


def real_paths(report: str, links: dict[Path, Path], repo: Path) -> str:
    """`report` with every linked path replaced by the repository path of the file it links to."""
    # the deepest link first, so a subpackage's prefix wins over its parent's
    for link in sorted(links, key=lambda path: len(path.parts), reverse=True):
        report = report.replace(f"{link}/", f"{links[link]}/")  # --show-absolute-path
        report = report.replace(f"{link.relative_to(repo)}/", f"{links[link].relative_to(repo)}/")
    return report


def typecheck(repo: Path, args: list[str]) -> int:
    """Link the namespace of `repo`'s pyproject.toml, run mypy in `repo` and print its report; mypy's status."""
    links = link_namespace(package_dirs(repo / "pyproject.toml"), repo / LINK_ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *args], cwd=repo, capture_output=True, text=True, check=False
    )
    sys.stdout.write(real_paths(result.stdout, links, repo))
    sys.stderr.write(real_paths(result.stderr, links, repo))
    return result.returncode


def main(argv: list[str] | None = None) -> int:
    return typecheck(REPO, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
