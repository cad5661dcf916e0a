"""An xDSL context that knows every dialect neuron-mlir reads: xDSL's own and torch, tile, neuron (all lazy)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.ir import Attribute

from neuron_mlir.ir.dialects import ALL_DIALECTS


class NeuronContext(Context):
    """xDSL's context, except that an unknown memory space (`#mem<dram>`) is a parse error naming the known ones.

    The parser looks `#mem<dram>` up as the attribute `mem.dram`; xDSL's context has no answer but "not
    registered", so this one answers with an attribute whose parser states the rule
    (`ir.dialects.memory.unknown_memory_space`).
    """

    def get_optional_attr(self, name: str) -> type[Attribute] | None:
        found = super().get_optional_attr(name)
        if found is None and name.startswith("mem."):
            from neuron_mlir.ir.dialects.memory import unknown_memory_space

            return unknown_memory_space(name)
        return found


def make_context() -> NeuronContext:
    ctx = NeuronContext()
    for name, factory in {**get_all_dialects(), **ALL_DIALECTS}.items():
        ctx.register_dialect(name, factory)
    return ctx
