"""Passes that take the torch dialect through tile to neuron instructions.

`ALL_PASSES` maps each pass name to a lazy factory returning the pass class, so that `neuron-opt` starts
without importing every pass (and never torch). A test checks each key equals the pass's `name` and that the
pass has its lit test in `test/lit/lowering/<name>.mlir`.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass

ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {}
