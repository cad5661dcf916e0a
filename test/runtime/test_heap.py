"""`runtime.heap`: garbage is collected at every call, the survivors frozen at the first only; a process that froze
its heap itself, or disabled the collector, keeps its settings. Each case runs in a fresh interpreter: freezing is
for the whole process."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return completed.stdout.split()


def test_collects_every_time_and_freezes_the_first_survivors_only():
    found = _run(
        """
        import gc, weakref
        from neuron_mlir.runtime.heap import settle_heap

        class Node:
            pass

        def garbage_cycle():
            node = Node()
            node.self = node  # only the cyclic collector can free it
            return weakref.ref(node)

        def scanned(obj):  # in a generation collections look at (not frozen)
            return any(found is obj for found in gc.get_objects())

        kept, first = Node(), garbage_cycle()
        settle_heap()
        frozen = gc.get_freeze_count()
        print(first() is None, frozen > 0, scanned(kept))
        later, second = Node(), garbage_cycle()
        settle_heap()
        print(second() is None, gc.get_freeze_count() == frozen, scanned(later))
        """
    )
    assert found == ["True", "True", "False", "True", "True", "True"]


def test_keeps_a_process_s_own_freeze_and_a_disabled_collector():
    found = _run(
        """
        import gc, weakref
        from neuron_mlir.runtime.heap import settle_heap

        class Node:
            pass

        gc.disable()
        node = Node()
        node.self = node
        dead = weakref.ref(node)
        del node
        settle_heap()
        print(dead() is None, gc.get_freeze_count())
        gc.enable()
        gc.collect()
        gc.freeze()
        frozen = gc.get_freeze_count()
        mine = Node()
        settle_heap()
        print(gc.get_freeze_count() == frozen, any(found is mine for found in gc.get_objects()))
        """
    )
    assert found == ["False", "0", "True", "True"]
