"""Citations resolve: every hardware-source key the repository cites is defined in docs/hardware-sources.md, and
every document and section it cites exists in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import REPO

SOURCES = REPO / "docs" / "hardware-sources.md"
SUFFIXES = {".py", ".md", ".toml", ".mlir", ".cfg"}
SKIPPED_DIRS = {".venv", ".git", "build", "__pycache__", "Output"}

# A key: lowercase words joined by hyphens ("nki-arch-trn2", "nki-isa-2.26", "lnc"). A citation: keys in square
# brackets, separated by commas, each optionally followed by a parenthesised page part ("nki-isa (dma_copy)").
# Bracketed words are a citation when each starts with the first word of a defined key (nki-, nc-, chip-, ...), so
# that `# type: ignore[arg-type]` or a TOML table is none, while a misspelt key still is one.
KEY = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9.]+)*")
BRACKETS = re.compile(r"\[([^\[\]\n]+)\](?!\()")  # not a Markdown link's text
DEFINITION = re.compile(r"^\| `\[(" + KEY.pattern + r")\]` \|", re.M)
# A document under docs/ by its path from the repository root, optionally with a #section; in docs/ itself also
# relative Markdown links to a sibling document.
DOCUMENT = re.compile(r"\bdocs/([\w.-]+\.md)(?:#([\w-]+))?")
RELATIVE_LINK = re.compile(r"\]\(([\w.-]+\.md)(?:#([\w-]+))?\)")
# Documents that were never part of the repository and must not be cited again.
ABSENT = ("DESIGN" + ".md", "shared" + "/reference", "neuroncore" + ".md", "style" + "-anchors")


def _files() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        relative = path.relative_to(REPO)
        skipped = SKIPPED_DIRS.intersection(relative.parts) or relative.parts[0].endswith(".egg-info")
        if path.suffix in SUFFIXES and path.is_file() and not skipped:
            found.append(path)
    return sorted(found)


def defined_keys() -> set[str]:
    return set(DEFINITION.findall(SOURCES.read_text()))


def cited_keys(text: str) -> list[str]:
    """The source keys of every citation in `text`."""
    families = {key.split("-")[0] for key in defined_keys()}
    keys = []
    for match in BRACKETS.finditer(text):
        items = [re.sub(r"\s*\(.*\)$", "", item.strip()) for item in match.group(1).split(",")]
        if all(KEY.fullmatch(item) and item.split("-")[0] in families for item in items):
            keys.extend(items)
    return keys


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(document: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in document.read_text().splitlines() if line.startswith("#")}


def test_the_key_pattern_finds_citations_and_nothing_else():
    text = "a [nki-arch-trn1, nki-isa (dma_copy)] b [derived] c x[i - 1] [see](hardware-sources.md) [nki-isa-2.26]"
    text += " [arg-type] [build-system] [a-z0-9] [lnc] [nki-arch-tr2]"
    assert cited_keys(text) == ["nki-arch-trn1", "nki-isa", "nki-isa-2.26", "lnc", "nki-arch-tr2"]


def test_every_defined_key_is_cited():
    body = SOURCES.read_text().split("## Structure of a core", 1)[1]
    cited = set(cited_keys(body))
    for path in _files():
        if path != SOURCES and path.resolve() != Path(__file__).resolve():
            cited.update(cited_keys(path.read_text()))
    assert defined_keys(), "docs/hardware-sources.md defines no keys"
    assert sorted(defined_keys() - cited) == []


@pytest.mark.parametrize("path", _files(), ids=lambda path: str(path.relative_to(REPO)))
def test_citations_resolve(path):
    text = path.read_text()
    this_file = path.resolve() == Path(__file__).resolve()  # its examples cite wrong things on purpose
    undefined = sorted(set(cited_keys(text)) - defined_keys())
    assert this_file or undefined == [], f"{path.relative_to(REPO)} cites keys docs/hardware-sources.md does not define"
    links = DOCUMENT.findall(text)
    if path.parent == REPO / "docs":
        links += RELATIVE_LINK.findall(text)
    for name, section in links:
        document = REPO / "docs" / name
        assert document.is_file(), f"{path.relative_to(REPO)} cites docs/{name}, which does not exist"
        if section:
            assert section in _anchors(document), f"{path.relative_to(REPO)} cites docs/{name}#{section}"
    if not this_file:
        for absent in ABSENT:
            assert absent not in text, f"{path.relative_to(REPO)} cites {absent}, which the repository does not hold"
