"""Run NumPy's BLAS single-threaded while the simulator executes.

Every TensorE instruction is a small matrix product (at most 128 x 128 x 512), which one BLAS thread does in
about 0.1 ms. OpenBLAS's worker threads do not speed that up, and when the machine is busy (a parallel test
run, several simulators) their spin-waiting makes each product up to a hundred times slower. `single_threaded`
lowers OpenBLAS's thread count for the duration of a run and restores it afterwards.

It finds the OpenBLAS library NumPy loaded through `/proc/self/maps` and calls its `*_set_num_threads`; where
that is not possible (another BLAS, another OS) it does nothing, which is always correct, only slower.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterator
from functools import cache

_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("64_", "")


@cache
def _openblas_controls() -> tuple[Callable[[], int], Callable[[int], None]] | None:
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
                    return getter, setter
    return None


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Within the block, OpenBLAS (if NumPy uses it) runs on one thread."""
    controls = _openblas_controls()
    if controls is None:
        yield
        return
    getter, setter = controls
    previous = getter()
    if previous <= 1:
        yield
        return
    setter(1)
    try:
        yield
    finally:
        setter(previous)
