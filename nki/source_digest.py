"""The user code a kernel's traced instructions depend on, as one digest.

A compiled program that inlines a kernel is cached on disk under a key that covers the compiler's own sources
(`frontend/cache.py`), not the user's. The kernel's part of the key is this digest: the kernel function's source
and, found through its bytecode, every user function it reaches (by a global name, a closure cell or a default
argument, transitively) with its source, and every module-level constant of a plain type (numbers, strings,
tuples of them) those functions read by name. Editing a function the kernel calls or a tile-size constant
therefore gives a new key, as editing the kernel does.

What is not covered: code reached through an attribute of a module object (`tiling.blocks(...)`), and
mutable globals (lists, dicts, arrays) read by the kernel. Functions of the compiler itself are left out (the
compiler's fingerprint covers them), and so is the Python standard library, which changes only with the
interpreter. Functions of other installed packages count as user code.
"""

from __future__ import annotations

import hashlib
import inspect
import sysconfig
import types
from collections.abc import Callable, Iterator
from typing import Any

_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def _paths(*keys: str) -> tuple[str, ...]:
    return tuple(sorted({path for key in keys if (path := sysconfig.get_paths().get(key))}))


_STANDARD_LIBRARY = _paths("stdlib", "platstdlib")
_INSTALLED_PACKAGES = _paths("purelib", "platlib")


def _is_plain(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_is_plain(item) for item in value)
    return isinstance(value, _PLAIN)


def _is_user_function(value: Any) -> bool:
    if not isinstance(value, types.FunctionType):
        return False
    if (value.__module__ or "").split(".")[0] == "neuron_mlir":
        return False
    try:
        path = inspect.getsourcefile(value)
    except TypeError:
        return False
    if path is None:
        return False
    # a virtual environment's site-packages may lie under the standard library's directory
    return path.startswith(_INSTALLED_PACKAGES) or not path.startswith(_STANDARD_LIBRARY)


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """The function's code and that of the comprehensions, lambdas and inner functions it defines."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def _referenced(function: types.FunctionType) -> Iterator[tuple[str, Any]]:
    """(name, value) of the globals the function's code names, then its closure cells and default arguments."""
    names: set[str] = set()
    for code in _code_objects(function.__code__):
        names.update(code.co_names)
    for name in sorted(names):
        if name in function.__globals__:
            yield name, function.__globals__[name]
    for index, cell in enumerate(function.__closure__ or ()):
        try:
            yield f"<closure {index}>", cell.cell_contents
        except ValueError:  # an empty cell: a name assigned after the function was made
            continue
    defaults = list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
    for index, default in enumerate(defaults):
        yield f"<default {index}>", default


def _source(function: types.FunctionType) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):  # defined in a string (exec) or at an interactive prompt
        code = function.__code__
        return f"{code.co_code.hex()} {code.co_consts!r} {code.co_names!r}"


def source_digest(function: Callable[..., Any], extra: str = "") -> str:
    """A 16-hex-digit digest of `function`'s source and the user code it depends on (see the module docstring),
    with `extra` (the kernel's options) appended."""
    digest = hashlib.sha256()
    pending: list[Any] = [function]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        current = getattr(current, "function", current)  # a kernel object wraps its function
        if id(current) in seen or not isinstance(current, types.FunctionType):
            continue
        seen.add(id(current))
        digest.update(f"{current.__module__}.{current.__qualname__}\0{_source(current)}\0".encode())
        for name, value in _referenced(current):
            target = getattr(value, "function", value)
            if _is_user_function(target):
                pending.append(target)
            elif _is_plain(value):
                digest.update(f"{name}={value!r}\0".encode())
    digest.update(extra.encode())
    return digest.hexdigest()[:16]
