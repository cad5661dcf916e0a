"""Where the device's eager work comes from: the user's source line of each op, and the time per op and line.

An eager op reaches the device through torch's dispatcher with the user's Python frames still on the stack: the
innermost frame outside torch and neuron-mlir's frontend is the line that issued it (a model's `forward`, a
library's layer, an optimizer's `step` written outside torch). During `backward()` the autograd engine issues the
ops from C++ with no such frame, and the autograd node being run names them instead (`MmBackward0`, ...).

`record` accumulates, per (op, source line), the calls and the simulated device time they took; `neuron_mlir.report()`
prints the table (`frontend/report.py`'s `eager_report`). Finding the line walks the frames up from the op and
remembers per code object whether it is torch's or ours, so it costs a few dictionary lookups per op.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

import torch

_BACKWARD_SUFFIX = " (backward)"


@dataclass
class EagerTime:
    """Calls of one op from one source line and their simulated device time."""

    calls: int = 0
    simulated_ns: float = 0.0
    host_calls: int = 0  # of `calls`, how many ran on the host (no simulated time)


# (op, source line) -> its calls and time, in the order first seen
EAGER_TIMES: dict[tuple[str, str], EagerTime] = {}

# id(code) -> (the code, whether it is torch's or the frontend's): keyed by id, as hashing a code object hashes its
# bytecode, names and constants (0.3 to 0.5 us, twice or more per op); the entry holds the code, so that its id
# cannot pass to another code object while the entry lives (entries are never dropped)
_not_the_users: dict[int, tuple[CodeType, bool]] = {}
_skipped_directories: tuple[str, ...] = ()


def _skipped() -> tuple[str, ...]:
    global _skipped_directories
    if not _skipped_directories:
        import neuron_mlir.frontend

        # torch's frames and the frontend's (dispatch, eager, compiling) are not the user's
        _skipped_directories = (
            os.path.dirname(torch.__file__) + os.sep,
            os.path.dirname(neuron_mlir.frontend.__file__) + os.sep,
        )
    return _skipped_directories


def user_line() -> str:
    """`file:line` of the innermost frame outside torch and the frontend, else the autograd node being run
    (`MmBackward0 (backward)`), else ''.

    Inside a device kernel that marked its caller (`entered`) the walk starts from that frame: the frames below
    it are the frontend's, and following `f_back` through them made a frame object of each (half a microsecond
    apiece, and young objects for the collector), more than the rest of the walk.

    The autograd engine runs a backward pass on the thread that called `backward()` (see `registration`), below
    the user's `loss.backward()` frame: the walk stops at the engine's entry, so that an op of the pass is named
    by its node, as when the engine ran it on a thread of its own, while a user's frame inside the pass (a
    custom Function's backward, a hook) still names it.

    With the native hooks the walk is one native call (`native.user_line()`, with caches of its own of the same
    facts)."""
    native = _native_walk
    if native is _UNKNOWN:
        native = _native_walk_once()
    if native is not None:
        return native(_issuer, _engine_code or _engine_entry(), _skipped_directories or _skipped(), _BACKWARD_SUFFIX)
    frame: FrameType | None = _issuer.frame or sys._getframe(1)
    skipped = _not_the_users
    engine_entry = _engine_code or _engine_entry()
    while frame is not None:
        code = frame.f_code
        if code is engine_entry:
            break
        known = skipped.get(id(code))
        if known is None or known[0] is not code:
            filename = code.co_filename
            known = skipped[id(code)] = (code, filename.startswith(_skipped()) or filename.startswith("<frozen"))
        if not known[1]:
            # a training loop issues its ops from the same instructions step after step: each one's line is
            # worked out once (the line number is decoded from the code's line table)
            where = (id(code), frame.f_lasti)
            found = _lines.get(where)
            if found is None or found[0] is not code:
                found = _lines[where] = (code, f"{code.co_filename}:{frame.f_lineno}")
            return found[1]
        frame = frame.f_back
    node = torch._C._current_autograd_node()
    return node.name() + _BACKWARD_SUFFIX if node is not None else ""


_UNKNOWN: Any = object()
# the native hooks' walk (`native.user_line()`), None without them; looked up with the first line asked for, after
# the device's registration has loaded the hooks
_native_walk: Any = _UNKNOWN


def _native_walk_once() -> Any:
    global _native_walk
    from neuron_mlir.frontend.device import native

    _native_walk = native.user_line() if native.loaded() else None
    return _native_walk


class _Issuer(threading.local):
    """Per thread, the frame that called the device kernel running on it now (`entered`), or None outside the
    kernels that mark it: threads running device ops at once mark their own callers."""

    frame: FrameType | None = None


_issuer = _Issuer()


def entered() -> FrameType | None:
    """Called by a device kernel as it starts: marks the kernel's caller as the frame `user_line` walks from while
    the kernel runs on this thread (only torch's and the frontend's code runs below it until the kernel returns).
    Returns the mark it replaces, which the kernel hands to `left` as it returns, so that no frame outlives its
    kernel here."""
    issuer = _issuer
    previous = issuer.frame
    try:
        issuer.frame = sys._getframe(2)
    except ValueError:  # called from C++ with no Python frame below the kernel: the walk starts at the kernel
        issuer.frame = None
    return previous


def left(previous: FrameType | None) -> None:
    """Called by a device kernel as it returns, with what `entered` returned."""
    _issuer.frame = previous


def _engine_entry() -> CodeType:
    """The code of torch's Python frame that hands a backward pass to the autograd engine."""
    global _engine_code
    from torch.autograd.graph import _engine_run_backward

    _engine_code = _engine_run_backward.__code__
    return _engine_code


_engine_code: CodeType | None = None
# (id of the code, instruction offset) of a user's frame -> (the code, its `file:line`), by id as `_not_the_users`
_lines: dict[tuple[int, int], tuple[CodeType, str]] = {}


def record(op_name: str, simulated_ns: float, on_host: bool = False, line: str | None = None) -> None:
    """Count one call of `op_name` from the user's current line (`line`, when the caller found it already), with
    its simulated device time."""
    key = (op_name, user_line() if line is None else line)
    entry = EAGER_TIMES.get(key)
    if entry is None:
        entry = EAGER_TIMES[key] = EagerTime()
    entry.calls += 1
    entry.simulated_ns += simulated_ns
    entry.host_calls += on_host


def reset() -> None:
    EAGER_TIMES.clear()
