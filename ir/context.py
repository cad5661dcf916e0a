"""An xDSL context that knows every dialect neuron-mlir reads: xDSL's own and torch, tile, neuron (all lazy)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import get_all_dialects

from neuron_mlir.ir.dialects import ALL_DIALECTS


def make_context() -> Context:
    ctx = Context()
    for name, factory in {**get_all_dialects(), **ALL_DIALECTS}.items():
        ctx.register_dialect(name, factory)
    return ctx
