"""Python's cyclic garbage collector around compiles: the heap that was there before the first compile frozen for
good as that compile starts, each compile's garbage collected as it ends.

A process that compiles a model has imported PyTorch, the compiler and the model: several hundred thousand
objects that live as long as the process, which every full collection of CPython's collector scans. A compile
allocates IR objects by the thousand, so the collector runs full collections during it, and each one would trace
all of that too (a tenth to a fifth of a real-width compile's CPU time); and the IR is cyclic garbage once the
program is built, so the first full collection after a compile falls into whatever allocates next, often a
simulator's first run (a few hundred milliseconds, more than the run itself on small graphs).

`compiling()` wraps a compile. As the first compile in a process starts, it collects, then moves every object into the
collector's permanent generation (`gc.freeze`), which collections never scan: the collections during that
compile, and all later ones, look only at what came after. As each compile ends (its frames gone, its IR garbage)
it collects, which scans only the unfrozen objects: the compiles' survivors and their garbage. Objects in the
permanent generation still die by reference counting; only a cycle among them that becomes garbage later stays,
which is why the heap is frozen once, not at every compile. A process that froze its heap itself keeps its own
freeze; one with the collector disabled is left alone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_froze = False


@contextmanager
def compiling() -> Iterator[None]:
    """Run a compile with the older heap frozen (once per process) and its garbage collected after (module
    docstring)."""
    global _froze
    if gc.isenabled() and not _froze:
        if gc.get_freeze_count() == 0:
            gc.collect()  # what is garbage already must not be frozen with the rest
            gc.freeze()
        _froze = True
    try:
        yield
    finally:
        if gc.isenabled():
            gc.collect()
