"""The host heap around compiles and simulator runs: Python's cyclic garbage collector kept off the heap that was
there before the first compile, and NumPy's large arrays made of ordinary pages while the simulator runs.

A process that compiles a model has imported PyTorch, the compiler and the model: several hundred thousand
objects that live as long as the process, which every full collection of CPython's collector scans. A compile
allocates IR objects by the thousand, so the collector runs full collections during it, and each one would trace
all of that too (a tenth to a fifth of a real-width compile's CPU time); and the IR is cyclic garbage once the
program is built, so the first full collection after a compile falls into whatever allocates next, often a
simulator's first run (a few hundred milliseconds, more than the run itself on small graphs).

`compiling()` wraps a compile. As the first compile in a process starts, it collects, then moves every object into
the collector's permanent generation (`gc.freeze`), which collections never scan: the collections during that
compile, and all later ones, look only at what came after. As a compile ends (its frames gone, its IR garbage) it
collects, which scans only the unfrozen objects: the compiles' survivors, their garbage, and whatever the process
made since the freeze. Objects in the permanent generation still die by reference counting; only a cycle among
them that becomes garbage later stays, which is why the heap is frozen once, not at every compile. A process that
froze its heap itself keeps its own freeze; one with the collector disabled is left alone.

During a compile the collector collects its two young generations only. The IR a compile builds outlives many young
collections, so it reaches the oldest generation, and every full collection traced all of it again: CPython starts
one whenever that generation has grown by a quarter since the last, so a compile that builds its IR from a small
unfrozen heap ran a full collection at each step of that growth (the first call of whisper-small's training step
made 23 full collections in 6.6 CPU seconds, 7 in 2.3 s when compiles run none). Cycles that die young are still
freed as the compile goes; those whose objects grew old (a stage's IR after the next is built from it) wait for the
collection as the compile ends, which frees them all at once (the compiler's peak memory moved by hundredths of a
GiB).

That collection is amortised: it runs only once the compile time since the previous one is at least
`_COMPILE_PER_COLLECTION` times what the previous one took. A real-width compile (seconds) is collected after
every time; the single-op compiles of eager execution (a few tenths of a second each) share one collection among
several. Without the bound, a process whose unfrozen heap grew after its first compile (a test run that loads
PyTorch's OpInfo database, a script that imports a model library later) spent about as long collecting after
each single-op compile as compiling it. Nested compiles (a graph compiled while another compiles) count as one.

`small_pages()` wraps a simulator run. NumPy asks the kernel for transparent huge pages for every array of 4 MiB
or more (`madvise(MADV_HUGEPAGE)`); where the kernel then defragments on demand (its `defrag` setting `madvise`,
the usual default), the first touch of such an array waits while the kernel compacts memory to find free 2 MiB
blocks. On a machine whose memory is fragmented by other processes that costs 1 to 8 s of CPU per GiB, against
about 0.4 s for ordinary 4 KiB pages; a simulator makes GiBs of fresh memory (its memories on its first run, its
outputs on every run), so inside a run NumPy's arrays get ordinary pages. Their contents and layout are the same
either way; where NumPy has no such switch the block changes nothing.

`first_run()` wraps a new simulator and its first run (its plans, its walk, its tape), and `no_collections()` the
first run of a pooled simulator that made no tape before (its earlier runs failed or ran the reference). That run
makes tens of thousands of objects (hundreds of thousands at real widths) that live as long as the simulator
(plans, operand sites, race records, tape steps), few of them garbage; with the collector on, they would trigger
young collections every few hundred allocations and each survivor would be scanned again as it moves up the
generations. The collector is paused within the block. As it ends, when the run left at least
`_FREEZE_FIRST_RUN_OBJECTS` new objects that the collector tracks, they go to the permanent generation too: left to
it, the collector scanned each of them two or three times more (as the young generations' collections move them up,
then at the full collections their number triggers), which was 1.7 to 2.3 of the 4 to 6 CPU seconds the collector
took in whisper-small's first two calls (docs/performance.md). What a freeze keeps from the collector is only what
it alone could free: reference cycles, among the run's objects or among whatever else was unfrozen then, that are
garbage or become garbage later. The simulator is freed by reference counting (`Simulator.finish` drops what refers
back to it) when its program goes, its memories with it; what stays are cycles such as a traced graph's nodes once
the model is dropped, a few thousand small objects per real-width graph. Below the bound (small graphs, and each op
of eager execution, whose runs follow one another) the run's objects are left to the collector, scanned once by its
first collection after the block. A process that disabled the collector keeps it disabled, and nothing is frozen.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

# Collections after compiles cost at most about 1/_COMPILE_PER_COLLECTION of their time (module docstring).
_COMPILE_PER_COLLECTION = 10.0
# The oldest generation's threshold during a compile: so many collections of the middle one never happen in one.
_NO_FULL_COLLECTION = 1 << 30
# A first run that leaves at least so many new objects that the collector tracks has them frozen (module docstring).
_FREEZE_FIRST_RUN_OBJECTS = 100_000

_froze = False
_depth = 0
_compile_seconds_since_collection = 0.0
_last_collection_seconds = 0.0


@contextmanager
def compiling() -> Iterator[None]:
    """Run a compile with the older heap frozen (once per process) and its garbage collected after, amortised
    over compiles (module docstring)."""
    global _froze, _depth, _compile_seconds_since_collection, _last_collection_seconds
    if gc.isenabled() and not _froze:
        if gc.get_freeze_count() == 0:
            gc.collect()  # what is garbage already must not be frozen with the rest
            gc.freeze()
        _froze = True
    started = time.perf_counter()
    thresholds = gc.get_threshold()
    if _depth == 0 and gc.isenabled():  # the young generations only, until the compile ends
        gc.set_threshold(thresholds[0], thresholds[1], _NO_FULL_COLLECTION)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.set_threshold(*thresholds)
            _compile_seconds_since_collection += time.perf_counter() - started
            due = _compile_seconds_since_collection >= _COMPILE_PER_COLLECTION * _last_collection_seconds
            if gc.isenabled() and due:
                collection_started = time.perf_counter()
                gc.collect()
                _last_collection_seconds = time.perf_counter() - collection_started
                _compile_seconds_since_collection = 0.0


@contextmanager
def first_run() -> Iterator[None]:
    """Within the block, the cyclic collector does not run; after it, the objects it left are frozen when they are
    many (module docstring)."""
    paused = gc.isenabled()
    with no_collections():
        yield
        # With the collector paused, the youngest generation's count is the objects made in the block (those
        # freed since are not counted).
        if paused and gc.get_count()[0] >= _FREEZE_FIRST_RUN_OBJECTS:
            gc.freeze()


@contextmanager
def no_collections() -> Iterator[None]:
    """Within the block, the cyclic collector does not run (module docstring)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _hugepage_switch() -> Callable[[bool], bool] | None:
    """NumPy's switch of the huge-page hint for new arrays (it returns the previous setting), if it has one."""
    for module in ("_core", "core"):
        switch = getattr(getattr(getattr(np, module, None), "multiarray", None), "_set_madvise_hugepage", None)
        if switch is not None:
            return switch
    return None


_HUGEPAGE_SWITCH = _hugepage_switch()


class small_pages:
    """Within the block, NumPy's new arrays do not ask for transparent huge pages (module docstring).

    A class rather than a generator: it wraps every simulator run, and an eager op on the `neuron` device is one
    run of a few tens of microseconds."""

    __slots__ = ("_previous",)

    def __init__(self) -> None:
        self._previous = False

    def __enter__(self) -> None:
        if _HUGEPAGE_SWITCH is not None:
            self._previous = _HUGEPAGE_SWITCH(False)

    def __exit__(self, *exc: object) -> None:
        if _HUGEPAGE_SWITCH is not None:
            _HUGEPAGE_SWITCH(self._previous)
