"""Generated sections of a Markdown file, so that several generators can share one page.

A section lies between two HTML comments that Markdown does not render:

    <!-- begin generated section: NAME -->
    ...
    <!-- end generated section: NAME -->

`replace_section` rewrites the text between one pair and leaves everything else of the file as it was: each
generator owns its section, and running one never clobbers another's. A file or section that does not exist yet
is created (the section appended at the end).
"""

from __future__ import annotations

import re
from pathlib import Path


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- begin generated section: {name} -->", f"<!-- end generated section: {name} -->"


def replace_section(path: Path, name: str, body: str, title: str = "") -> None:
    """Write `body` as the section `name` of the Markdown file at `path`. A new file starts with `title` (a
    heading line and an introduction, if given)."""
    begin, end = _markers(name)
    text = path.read_text(encoding="utf-8") if path.exists() else (title.rstrip() + "\n" if title else "")
    block = f"{begin}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if len(pattern.findall(text)) > 1:
        raise ValueError(f"{path}: the section {name!r} appears more than once")
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        if begin in text or end in text:
            raise ValueError(f"{path}: the section {name!r} has one marker without the other")
        text = (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"
    path.write_text(text, encoding="utf-8")


def read_section(path: Path, name: str) -> str | None:
    """The text of the section `name` of `path` (without its markers), or None when it has none."""
    if not path.exists():
        return None
    begin, end = _markers(name)
    match = re.search(re.escape(begin) + r"\n(.*?)\n?" + re.escape(end), path.read_text(encoding="utf-8"), re.DOTALL)
    return match.group(1) if match else None
