"""docs/architecture.md stays true of the code: every module it names exists, every module of the product is named
in it, and its pipeline diagram lists the default pipeline's passes, stage by stage, as `lowering/pipelines.py`
runs them."""

from __future__ import annotations

import re

from support import REPO

from neuron_mlir.lowering import ALL_PASSES
from neuron_mlir.lowering.pipelines import DEFAULT_PIPELINE

DOC = REPO / "docs" / "architecture.md"
PRODUCT = ("backend_trn", "frontend", "ir", "lowering", "neuron_mlir", "nki", "runtime", "tools")
# Paths the document names as examples of what a reader would write, not as modules that exist.
EXAMPLES = {"lowering/neuron_foo_bar.py"}
# A path: folders then a file or a folder, as the document spells them in backquotes or a code block.
PATH = re.compile(r"(?<![\w/.<-])((?:[a-z_]+/)+(?:[\w.-]+\.(?:py|mlir|md|sh|toml|cfg))?)(?![\w*<>-])")
PASS_NAME = re.compile(r"\b[a-z]+(?:-[a-z]+)*\b")


def _text() -> str:
    return DOC.read_text()


def test_every_path_the_document_names_exists() -> None:
    missing = sorted({path for path in PATH.findall(_text()) if path not in EXAMPLES and not (REPO / path).exists()})
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_module_of_the_product_is_named() -> None:
    """By its path, or by its file name in a listing of its folder (the device's layers, a package's files)."""
    text = _text()
    unnamed = []
    for folder in PRODUCT:
        for module in sorted((REPO / folder).rglob("*.py")):
            relative = module.relative_to(REPO)
            if module.name == "__init__.py" or "__pycache__" in relative.parts:
                continue
            in_listing = f"{relative.parent}/" in text and re.search(rf"(?<![\w/]){re.escape(module.name)}", text)
            if str(relative) not in text and not in_listing:
                unnamed.append(str(relative))
    assert unnamed == [], (
        f"modules that docs/architecture.md does not name: {unnamed}; add each to 'Where each concern lives' "
        "(or to its folder's listing)"
    )


def _diagram_stages() -> list[tuple[str, list[str]]]:
    """(stage, pass names) as the pipeline diagram's `lowering/` rows list them."""
    block = _text().split("## The pipeline", 1)[1].split("```", 2)[1]
    rows = block[block.index("\nlowering/") : block.index("\nbackend_trn/")]
    stages: list[tuple[str, list[str]]] = []
    for line in rows.splitlines():
        if match := re.search(r'stage "(\w+)"\s+\S+(?: -> \S+)?\s+(.*)', line):
            stages.append((match.group(1), []))
            listed = match.group(2)
        elif stages and line.strip():
            listed = line.strip()
        else:
            continue
        names = listed.split(":", 1)[0]  # a stage of one pass may say what it does after a colon
        stages[-1][1].extend(name for name in PASS_NAME.findall(names))
    return stages


def test_the_pipeline_diagram_lists_the_default_pipeline() -> None:
    assert _diagram_stages() == [(stage, list(passes)) for stage, passes in DEFAULT_PIPELINE]


def test_every_registered_pass_is_named() -> None:
    text = _text()
    unnamed = sorted(name for name in ALL_PASSES if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text))
    assert unnamed == [], f"passes that docs/architecture.md does not name: {unnamed}"
