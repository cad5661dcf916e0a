"""Python's cyclic garbage collector around compiles: each compile's garbage collected as the compile ends, the
long-lived heap frozen once.

A process that compiles a model has imported PyTorch, the compiler and the model: several hundred thousand
objects that live as long as the process, which every full collection of CPython's collector scans. A compile
adds from about a hundred thousand objects (a small graph) to several hundred thousand, many of them cyclic
garbage once the program is built (its IR). The first full collection after a compile scans all of that and falls
into whatever allocates next, often a simulator's first run, which builds its program's plans and tape (a few
hundred milliseconds, more than the run itself on small graphs).

`settle_heap`, called as a compile returns its compiled program: collects (the compile's IR is garbage by then,
its frames are gone) and, the first time in a process, moves every surviving object into the collector's
permanent generation (`gc.freeze`), which collections never scan. Objects there still die by reference counting;
only a cycle among them that becomes garbage later stays, which is why the heap is frozen once (the imports, the
model, the first compiled program), not after every compile. Later collections, those after later compiles
included, scan only what came after. A process that froze its heap itself keeps its own freeze; one with the
collector disabled is left alone.
"""

from __future__ import annotations

import gc

_froze = False


def settle_heap() -> None:
    """Collect garbage, then freeze the survivors if this process never froze its heap (module docstring)."""
    global _froze
    if not gc.isenabled():
        return
    gc.collect()
    if not _froze and gc.get_freeze_count() == 0:
        gc.freeze()
    _froze = True
