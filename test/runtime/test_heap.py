"""`runtime.heap.compiling`: the heap before the first compile frozen, once; each compile's garbage collected as it
ends; a process that froze its heap itself, or disabled the collector, keeps its settings. Each case runs in a
fresh interpreter: freezing is for the whole process."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return completed.stdout.split()


def test_freezes_the_older_heap_once_and_collects_each_compile_s_garbage():
    found = _run(
        """
        import gc, weakref
        from neuron_mlir.runtime.heap import compiling

        class Node:
            pass

        def garbage_cycle():
            node = Node()
            node.self = node  # only the cyclic collector can free it
            return weakref.ref(node)

        def scanned(obj):  # in a generation collections look at (not frozen)
            return any(found is obj for found in gc.get_objects())

        older, before = Node(), garbage_cycle()
        with compiling():
            print(before() is None, gc.get_freeze_count() > 0, scanned(older))
            during, first = Node(), garbage_cycle()
        print(first() is None, scanned(during))
        with compiling():
            second = garbage_cycle()
        print(second() is None, scanned(during))  # frozen once: what came after the first stays in reach
        """
    )
    assert found == ["True", "True", "False", "True", "True", "True", "True"]


def test_keeps_a_process_s_own_freeze_and_a_disabled_collector():
    found = _run(
        """
        import gc, weakref
        from neuron_mlir.runtime.heap import compiling

        class Node:
            pass

        gc.disable()
        with compiling():
            node = Node()
            node.self = node
            dead = weakref.ref(node)
            del node
        print(dead() is None, gc.get_freeze_count())
        gc.enable()
        gc.collect()
        gc.freeze()
        frozen = gc.get_freeze_count()
        mine = Node()
        with compiling():
            pass
        print(gc.get_freeze_count() == frozen, any(found is mine for found in gc.get_objects()))
        """
    )
    assert found == ["False", "0", "True", "True"]
