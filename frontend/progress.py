"""Progress of long compiles: which graph, stage and pass the compiler is in, once a compile passes ~2 seconds.

Whether to show it is decided once per compile (`progress_enabled`): the `progress` option or
`NEURON_MLIR_PROGRESS=1`/`0` force it on or off; otherwise it is on when stderr is a terminal and logging does
not silence it, that is when neither the `neuron_mlir.progress` logger nor the `neuron_mlir` logger has a level
above INFO set (and `logging.disable` does not cover INFO).

The clock starts when the backend is called, so AOTAutograd's tracing counts (`trace`), and the graphs it hands
over report to the same line (`compile_progress`). Every report is an INFO record of the `neuron_mlir.progress`
logger. Where logging has handlers (on that logger, an ancestor or the root), the records go to them, formatted
as the application chose. Where it has none, they are written to stderr as
`neuron-mlir: graph0_forward: stage tile, pass convert-torch-to-tile (2.3 s)`: on a terminal one line rewritten in
place, elsewhere a line per report, and last `compiled in 13.2 s`. A compile that finishes within the delay prints
nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

PROGRESS_LOGGER = logging.getLogger("neuron_mlir.progress")

DELAY_SECONDS = 2.0
"""Compiles shorter than this show no progress."""


def progress_setting(value: object) -> bool | None:
    """The `progress` option or `NEURON_MLIR_PROGRESS` value as a forced choice: True, False or None (decide)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if value.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"neuron-mlir: progress must be 0 or 1 (or True/False), got {value!r}")
    return bool(value)


def progress_enabled(setting: bool | None, stream: TextIO | None = None) -> bool:
    """Whether a compile shows its progress: `setting` when forced, else a terminal `stream` (stderr by default)
    that logging does not silence."""
    if setting is not None:
        return setting
    if _silenced_by_logging():
        return False
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def _silenced_by_logging() -> bool:
    if logging.root.manager.disable >= logging.INFO:
        return True
    # the root logger's level (WARNING unless configured) says nothing about this library's progress: only a
    # level set on our own loggers does
    for name in (PROGRESS_LOGGER.name, "neuron_mlir"):
        level = logging.getLogger(name).level
        if level != logging.NOTSET:
            return level > logging.INFO
    return False


class CompileProgress:
    """The progress of one compile: `step` names what it is doing now, `finish` ends it.

    Nothing is shown before `delay` seconds; a timer shows the current step when the delay runs out, so a long
    step is reported while it runs.
    """

    def __init__(
        self,
        enabled: bool,
        stream: TextIO | None = None,
        delay: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        self.delay = DELAY_SECONDS if delay is None else delay
        self.clock = clock
        self.started = clock()
        self.current = "starting"
        self.shown = False
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        if enabled:
            self._timer = threading.Timer(self.delay, self._report_current)
            self._timer.daemon = True
            self._timer.start()

    def step(self, what: str) -> None:
        """The compile now does `what` (`graph0_forward: stage tile, pass convert-torch-to-tile`)."""
        if not self.enabled:
            return
        with self._lock:
            self.current = what
            if self.shown or self.clock() - self.started >= self.delay:
                self._emit(f"{what} ({self.clock() - self.started:.1f} s)", final=False)

    def finish(self) -> None:
        """The compile is done: the last report says how long it took (nothing when nothing was shown)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self.shown:
                self._emit(f"compiled in {self.clock() - self.started:.1f} s", final=True)
            self.enabled = False

    def _report_current(self) -> None:
        with self._lock:
            if self.enabled and not self.shown:
                self._emit(f"{self.current} ({self.clock() - self.started:.1f} s)", final=False)

    def _emit(self, message: str, final: bool) -> None:
        self.shown = True
        if logging_has_handlers():
            # the decision to show was taken above: hand the record to the application's handlers whatever the
            # loggers' effective level (the root's WARNING by default)
            record = PROGRESS_LOGGER.makeRecord(PROGRESS_LOGGER.name, logging.INFO, __file__, 0, message, (), None)
            PROGRESS_LOGGER.handle(record)
            return
        terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        if terminal:  # one line, rewritten: carriage return, clear to the end of the line
            self.stream.write(f"\r\x1b[Kneuron-mlir: {message}" + ("\n" if final else ""))
        else:
            self.stream.write(f"neuron-mlir: {message}\n")
        self.stream.flush()


def logging_has_handlers() -> bool:
    """Whether the application configured logging handlers that progress records reach."""
    return PROGRESS_LOGGER.hasHandlers()


_ACTIVE: ContextVar[CompileProgress | None] = ContextVar("neuron_mlir_compile_progress", default=None)


@contextmanager
def compile_progress(setting: bool | None) -> Iterator[CompileProgress]:
    """The progress of a compile, from the backend's call (AOTAutograd's tracing) to its last graph: a compile
    inside another one (each graph AOTAutograd hands over) reports to the outer one, so one clock decides when to
    show and one line says what happens."""
    outer = _ACTIVE.get()
    if outer is not None:
        yield outer
        return
    progress = CompileProgress(progress_enabled(setting))
    token = _ACTIVE.set(progress)
    try:
        yield progress
    finally:
        _ACTIVE.reset(token)
        progress.finish()
