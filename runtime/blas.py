"""How many threads NumPy's BLAS (OpenBLAS) uses for the simulator's matrix products.

Every TensorE instruction is a matrix product of at most 128 x 128 x 512, which one BLAS thread does in about
0.1 ms. Split over OpenBLAS's threads, a small one gains nothing: the threads cost more to wake than the work
they share, and when the machine is busy (a parallel test run, several simulators) their spin-waiting makes
each product up to a hundred times slower. So the simulator runs `single_threaded`: a run lowers OpenBLAS's
thread count to one and restores it afterwards.

The largest products are worth both cores when a core is free: a replayed tape (`runtime.tape`) runs each
product of at least `WIDE_MIN_MACS` multiply-adds per matrix on all the threads OpenBLAS started with (`wide`),
128 x 128 x 512 in about 0.08 ms instead of 0.1, while the load average says the machine has a core to spare
(`spare_core`). OpenBLAS splits a product's rows and columns between its
threads, never the sum over K, so every element is the same sum in the same order: the bits do not depend on the
thread count.

The library is the OpenBLAS NumPy loaded, found through `/proc/self/maps`, and its `*_get_num_threads` and
`*_set_num_threads` are called directly (about 0.1 and 0.3 microseconds); the setter is only called when the
count must change. Where that is not possible (another BLAS, another OS) nothing changes, which is always
correct, only slower or faster.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import TracebackType

_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("64_", "")

# A product runs on all threads (`wide`) from this many multiply-adds per matrix (M x N x K): 128 x 64 x 512,
# where two threads first beat one by a margin (on two idle cores, 46 against 58 microseconds; 128 x 128 x 512:
# 78 against 101). Smaller ones stay single-threaded.
WIDE_MIN_MACS = 1 << 22


@dataclass(frozen=True)
class _Controls:
    get: Callable[[], int]
    set: Callable[[int], None]
    initial: int  # OpenBLAS's own thread count (its default, or OPENBLAS_NUM_THREADS) when first looked at


@cache
def _openblas_controls() -> _Controls | None:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                getter = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
                setter = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
                if getter is not None and setter is not None:
                    getter.restype = ctypes.c_int
                    setter.argtypes = [ctypes.c_int]
                    return _Controls(getter, setter, max(1, getter()))
    return None


def spare_core() -> bool:
    """Whether the machine seems to have a core for a second BLAS thread: the last minute's load average (this
    process included) below the cores this process may use.

    On a busy machine a product split over threads waits for the slowest of them, and OpenBLAS's waiting threads
    spin on the cores others need: a tape-like loop of 128 x 128 x 512 products and copies took 25 times the wall
    time on two threads than on one at a load average of 25 on two cores."""
    return os.getloadavg()[0] < _usable_cores()


@cache
def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def wide_threads() -> int:
    """The threads a `wide` product runs on: OpenBLAS's own count before this module changed it (1 without
    OpenBLAS)."""
    controls = _openblas_controls()
    return controls.initial if controls is not None else 1


class single_threaded:
    """Within the block, OpenBLAS (if NumPy uses it) runs on one thread; the count before is restored after.

    Entering and leaving cost about a microsecond: one getter call, and the setter only when the count is not
    already one (the simulator runs once per eager op on the `neuron` device, so this is on its per-op path)."""

    __slots__ = ("_previous",)

    def __init__(self) -> None:
        self._previous = 1

    def __enter__(self) -> None:
        controls = _openblas_controls()
        if controls is None:
            return
        self._previous = previous = controls.get()
        if previous != 1:
            controls.set(1)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._previous != 1:
            controls = _openblas_controls()
            assert controls is not None
            controls.set(self._previous)


def wide(product: Callable[[], None]) -> Callable[[], None]:
    """`product` (a call that makes one BLAS product or a stack of them) as a call that runs it on all of
    OpenBLAS's threads, then goes back to the count it found (`product` itself without OpenBLAS or with one
    thread).

    OpenBLAS's thread count is one setting for the process: only a thread that runs alone may call the result
    (a tape's own steps, never a lane batch's parts running on several threads)."""
    controls = _openblas_controls()
    if controls is None or controls.initial <= 1:
        return product
    return Wide(product, controls)


class Wide:
    """A product run on all of OpenBLAS's threads (`wide`)."""

    __slots__ = ("_get", "_set", "_threads", "product")

    def __init__(self, product: Callable[[], None], controls: _Controls) -> None:
        self.product = product
        self._get, self._set, self._threads = controls.get, controls.set, controls.initial

    def __call__(self) -> None:
        previous = self._get()
        if previous == self._threads:
            self.product()
            return
        self._set(self._threads)
        try:
            self.product()
        finally:
            self._set(previous)
