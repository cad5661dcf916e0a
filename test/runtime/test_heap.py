"""`runtime.heap.compiling`: the heap before the first compile frozen, once; no full collection during a compile,
its garbage collected as it ends, one collection for several short compiles; a process that froze its heap itself, or disabled the collector,
keeps its settings. Each case runs in a fresh interpreter: freezing is for the whole process.
`runtime.heap.first_run`: a simulator's first run with the collector paused, its objects frozen when many.
`runtime.heap.small_pages`: NumPy's huge-page hint off inside a simulator run, as it was after."""

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
        import gc, time, weakref
        from neuron_mlir.runtime import heap
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
        # frozen once: what came after the first stays in reach; a compile far shorter than the last
        # collection leaves its garbage for a later one
        print(second() is None, scanned(during))
        with compiling():
            time.sleep(heap._COMPILE_PER_COLLECTION * heap._last_collection_seconds + 0.01)
        print(second() is None)  # long enough: collected, with the garbage of the compiles before it
        """
    )
    assert found == ["True", "True", "False", "True", "True", "False", "True", "True"]


def test_a_compile_collects_its_young_generations_only_and_the_rest_once_it_ends():
    found = _run(
        """
        import gc, weakref
        from neuron_mlir.runtime.heap import compiling

        class Node:
            pass

        generations = []
        gc.callbacks.append(lambda phase, info: phase == "start" and generations.append(info["generation"]))
        thresholds = gc.get_threshold()
        with compiling():
            generations.clear()  # the freeze's own collection
            young = Node()
            young.self = young
            young = weakref.ref(young)
            kept = [[] for _ in range(400_000)]  # enough for several full collections at the usual thresholds
            print(young() is None, max(generations), gc.get_threshold()[:2] == thresholds[:2])
        # then one full collection, and the thresholds as they were
        print(generations[-1], gc.get_threshold() == thresholds)
        """
    )
    # a cycle made during the compile is freed by a young collection; none collects the whole heap until the end
    assert found == ["True", "1", "True", "2", "True"]


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


def test_simulator_runs_make_arrays_of_ordinary_pages_and_restore_numpy_s_setting():
    found = _run(
        """
        import numpy as np
        from neuron_mlir.runtime import heap, simulator
        from neuron_mlir.runtime.builder import ProgramBuilder

        switch = heap._HUGEPAGE_SWITCH
        b = ProgramBuilder("trn2", auto_waits=True)
        x, y = b.input("x", (4, 8), "f32"), b.output("y", (4, 8), "f32")
        tile = b.sbuf("t", (4, 8), "f32")
        b.dma(b.ap(tile), b.ap(x))
        b.dma(b.ap(y), b.ap(tile))
        program = b.build()
        seen = []
        make_machine = simulator.Machine

        def machine(*args):
            seen.append(switch(False))  # the setting the machine's memories are made under
            return make_machine(*args)

        simulator.Machine = machine
        for setting in (True, False):
            switch(setting)
            (out,), _ = simulator.run_program(program, [np.ones((4, 8), np.float32)])
            print(switch(setting), (out == 1).all())
            program = b.build()  # a new program: a new simulator and machine
        print(*seen)
        """
    )
    assert found == ["True", "True", "False", "True", "False", "False"]


def test_a_first_run_pauses_the_collector_and_later_runs_and_a_disabled_collector_are_left_alone():
    found = _run(
        """
        import gc
        import numpy as np
        from neuron_mlir.runtime import simulator
        from neuron_mlir.runtime.builder import ProgramBuilder

        b = ProgramBuilder("trn2", auto_waits=True)
        x, y = b.input("x", (4, 8), "f32"), b.output("y", (4, 8), "f32")
        tile = b.sbuf("t", (4, 8), "f32")
        b.dma(b.ap(tile), b.ap(x))
        b.dma(b.ap(y), b.ap(tile))
        program = b.build()
        seen = []
        make_machine, walk = simulator.Machine, simulator.Simulator._walk

        def machine(*args):
            seen.append(gc.isenabled())  # while the simulator is made
            return make_machine(*args)

        def walked(self, interpreter):
            seen.append(gc.isenabled())  # while a run walks the program
            return walk(self, interpreter)

        simulator.Machine, simulator.Simulator._walk = machine, walked
        for _ in range(2):
            (out,), _ = simulator.run_program(program, [np.ones((4, 8), np.float32)], check_races=False)
            print(gc.isenabled(), (out == 1).all())
        gc.disable()
        (out,), _ = simulator.run_program(b.build(), [np.ones((4, 8), np.float32)])
        print(gc.isenabled(), *seen)
        """
    )
    # made and walked with the collector paused; the second run replays the tape and walks nothing
    assert found == ["True", "True", "True", "True", "False", "False", "False", "False", "False"]


def test_a_first_run_that_leaves_many_objects_freezes_them_and_its_simulator_still_goes_with_its_program():
    found = _run(
        """
        import gc, weakref
        import numpy as np
        from neuron_mlir.runtime import heap, simulator
        from neuron_mlir.runtime.builder import ProgramBuilder
        from neuron_mlir.runtime.validate import validate_program

        def program():
            b = ProgramBuilder("trn2", auto_waits=True)
            x, y = b.input("x", (4, 8), "f32"), b.output("y", (4, 8), "f32")
            tile = b.sbuf("t", (4, 8), "f32")
            b.dma(b.ap(tile), b.ap(x))
            b.dma(b.ap(y), b.ap(tile))
            return validate_program(b.build())

        def run(validated):  # whether an object made before the run was frozen after it
            made_before = [validated]
            (out,), _ = simulator.run_validated(validated, inputs)
            assert (out == 1).all()
            return not any(found is made_before for found in gc.get_objects())

        made = []
        make = simulator.Simulator.__init__

        def init(self, *args):
            made.append(weakref.ref(self))
            make(self, *args)

        simulator.Simulator.__init__ = init
        inputs = [np.ones((4, 8), np.float32)]
        gc.collect()
        print(run(program()), gc.isenabled())  # far fewer objects than the bound: left to the collector
        heap._FREEZE_FIRST_RUN_OBJECTS = 1
        large = program()
        print(run(large), gc.isenabled())
        print(run(large), len(made))  # a later run of the same simulator freezes nothing
        gc.disable()  # reference counting alone frees a frozen simulator with its program
        del large
        print(made[-1]() is None)
        print(run(program()), gc.isenabled())  # a process that disabled the collector: nothing frozen
        """
    )
    assert found == ["False", "True", "True", "True", "False", "2", "True", "False", "False"]
