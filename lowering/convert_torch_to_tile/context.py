"""The state one application of convert-torch-to-tile shares between the lowerings of a function's ops.

Lowerings are functions of their op and its arguments; what links the lowering of one op to another's (a layer
norm deferred into the prologue of the matmul that reads it, the ops an RMS norm computes in its own nest) lives
in a `ConversionContext` made for each function the pass converts, reached through the emitter the lowerings get
(`LoopNestBuilder.context`). Nothing of it outlives the conversion of that function, so converting one module cannot
change how another one converts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.ir import Operation, SSAValue

if TYPE_CHECKING:
    from neuron_mlir.lowering.convert_torch_to_tile.prologue import Prologue
    from neuron_mlir.lowering.loop_nests import LoopNestBuilder

# A lowering that replaces another op's own (an op an RMS norm computes in its own loop nest).
Absorber = Callable[["LoopNestBuilder", Operation, dict[str, Any]], list[SSAValue]]


@dataclass
class ConversionContext:
    """What the lowerings of one function's ops share while it is converted.

    `constants`: the index constants at the top of the function body, created once and shared by all loops.
    `deferred`: a deferred producer's result allocation -> the prologue that computes it in its consumer matmul.
    `absorbers`: torch ops another op's lowering took into its loop nest -> the lowering the conversion calls
    instead.
    `lowered`: each torch value converted so far -> the HBM tensor (or view) it became, so that a lowering taking
    a later op into its own loop nest can read that op's other operands.
    """

    constants: dict[int, SSAValue] = field(default_factory=dict)
    deferred: dict[SSAValue, Prologue] = field(default_factory=dict)
    absorbers: dict[Operation, Absorber] = field(default_factory=dict)
    lowered: dict[SSAValue, SSAValue] = field(default_factory=dict)


def context_of(em: LoopNestBuilder) -> ConversionContext:
    """The conversion context `em` emits for (every emitter convert-torch-to-tile hands a lowering has one)."""
    context = em.context
    assert context is not None, "a convert-torch-to-tile lowering runs with the conversion's emitter"
    return context
