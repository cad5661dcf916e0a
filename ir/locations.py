"""Source locations: how an op remembers the user's Python line and module path through every pass.

The importer gives each op `loc("model.layers.0.mlp"("/path/model.py":42:17))`: a name location holding the
module path around a file:line:col location. Lowering patterns copy the location of the op they replace onto
every op they create (`copy_location`), so diagnostics, bundles and profiles all point at the user's line.
A pass that refuses an op raises `OpDiagnostic`, which carries the op along with the message.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects.builtin import (
    ArrayAttr,
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    IntAttr,
    LocationAttr,
    NameLoc,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import PassFailedException


def source_location(filename: str, line: int, column: int = 0, module_path: str | None = None) -> LocationAttr:
    """A location for a Python source line, optionally named by the module path that ran it."""
    file_location = FileLineColLoc(StringAttr(filename), IntAttr(line), IntAttr(column))
    if module_path:
        return NameLoc(StringAttr(module_path), file_location)
    return file_location


def describe_location(location: Attribute) -> str:
    """'file.py:42 (model.layers.0.mlp)', 'file.py:42', 'model.l1' or '' for an unknown location."""
    file_line = _file_line(location)
    name = _name(location)
    if file_line and name:
        return f"{file_line} ({name})"
    return file_line or name or ""


def at_source(op: Operation) -> str:
    """' (at file.py:42 (model.mlp))' to end a diagnostic about `op`, or '' when its location is unknown."""
    where = describe_location(op.location)
    return f" (at {where})" if where else ""


def file_position(location: Attribute) -> str | None:
    """'file.py:42:17' for a location that holds a file position, None otherwise."""
    if isinstance(location, FileLineColLoc):
        return f"{location.filename.data}:{location.line.data}:{location.column.data}"
    if isinstance(location, NameLoc):
        return file_position(location.location)
    if isinstance(location, CallSiteLoc):
        return file_position(location.callee)
    if isinstance(location, FusedLoc):
        for inner in _fused_parts(location):
            if found := file_position(inner):
                return found
    return None


def module_path_of(location: Attribute) -> str:
    """The module path recorded in a location ('' if none)."""
    return _name(location) or ""


def _fused_parts(location: FusedLoc) -> tuple[Attribute, ...]:
    # xDSL declares the parameter as a plain Attribute; its constraint admits only an array of locations
    parts = location.locations
    return parts.data if isinstance(parts, ArrayAttr) else ()


def _file_line(location: Attribute) -> str | None:
    if isinstance(location, FileLineColLoc):
        return f"{location.filename.data}:{location.line.data}"
    if isinstance(location, NameLoc):
        return _file_line(location.location)
    if isinstance(location, CallSiteLoc):
        return _file_line(location.callee)
    if isinstance(location, FusedLoc):
        for inner in _fused_parts(location):
            if found := _file_line(inner):
                return found
    return None


def _name(location: Attribute) -> str | None:
    if isinstance(location, NameLoc):
        return location.desc.data
    if isinstance(location, CallSiteLoc):
        return _name(location.callee)
    if isinstance(location, FusedLoc):
        for inner in _fused_parts(location):
            if found := _name(inner):
                return found
    return None


class OpDiagnostic(PassFailedException):
    """A pass's refusal of one op: the message (naming the op, the rule and the source line) and the op itself,
    so that a tool can point at the op in the IR it read (`neuron-opt` prints its position and text)."""

    def __init__(self, message: str, op: Operation | None = None):
        super().__init__(message)
        self.op = op


def copy_location(source: Operation, created: Iterable[Operation]) -> None:
    """Give every op in `created` (and the ops nested in them) `source`'s location where they have none."""
    location = source.location
    if isinstance(location, UnknownLoc):
        return
    for op in created:
        for nested in op.walk():
            if isinstance(nested.location, UnknownLoc):
                nested.location = location
