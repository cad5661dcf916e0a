"""The state one application of convert-torch-to-tile shares between the lowerings of a function's ops.

Lowerings are functions of their op and its arguments; what links the lowering of one op to another's (the ops
an RMS norm computes in its own loop nest, which the conversion then does not lower again) lives in a
`ConversionContext` made for each function the pass converts, reached through the emitter the lowerings get
(`LoopNestBuilder.context`). Nothing of it outlives the conversion of that function, so converting one module cannot
change how another one converts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.ir import Attribute, Operation, SSAValue

if TYPE_CHECKING:
    from neuron_mlir.lowering.loop_nests import LoopNestBuilder

# A lowering that replaces another op's own (an op an RMS norm computes in its own loop nest).
Absorber = Callable[["LoopNestBuilder", Operation, dict[str, Any]], list[SSAValue]]


@dataclass
class ConversionContext:
    """What the lowerings of one function's ops share while it is converted.

    `constants`: the index constants at the top of the function body, created once and shared by all loops.
    `absorbers`: torch ops another op's lowering took into its loop nest -> the lowering the conversion calls
    instead.
    `lowered`: each torch value converted so far -> the HBM tensor (or view) it became, so that a lowering taking
    a later op into its own loop nest can read that op's other operands.
    `narrow_loads`: while one matmul-shaped op is lowered, the fp32 HBM tensors it multiplies only as their bf16
    rounding -> bf16: its DMAs convert them as they load (see `convert_torch_to_tile.narrowed_operands`).
    `size_arguments`: the function's size arguments by name (`ir.dialects.torch.SIZE_ARGUMENTS_ATTR`): `index`
    arguments holding, at each call, the real extent of the dimensions an op's `SIZE_BOUNDS_ATTR` names.
    """

    constants: dict[int, SSAValue] = field(default_factory=dict)
    absorbers: dict[Operation, Absorber] = field(default_factory=dict)
    lowered: dict[SSAValue, SSAValue] = field(default_factory=dict)
    narrow_loads: dict[SSAValue, Attribute] = field(default_factory=dict)
    size_arguments: dict[str, SSAValue] = field(default_factory=dict)
    # each size argument's extent in the bucket the function is compiled for (the top of its range)
    size_extents: dict[str, int] = field(default_factory=dict)
    # (size argument, tile, rounds) -> where the (rounds of) tiles covering its extent end, computed once at the
    # function's top; rounds 0: how many tiles cover it
    size_uppers: dict[tuple[SSAValue, int, int], SSAValue] = field(default_factory=dict)
    # the factors of a merged dimension (size argument or None, extent; major to minor) -> one past its last real
    # element, computed once at the function's top
    size_prefixes: dict[tuple[tuple[SSAValue | None, int], ...], SSAValue] = field(default_factory=dict)
    # (size argument, tiles in the bucket) -> per count j = 1..tiles, 1 when the call's tiles of 128 number j and
    # 0 otherwise, computed once at the function's top
    size_widths: dict[tuple[SSAValue, int], list[SSAValue]] = field(default_factory=dict)


def context_of(em: LoopNestBuilder) -> ConversionContext:
    """The conversion context `em` emits for (every emitter convert-torch-to-tile hands a lowering has one)."""
    context = em.context
    assert context is not None, "a convert-torch-to-tile lowering runs with the conversion's emitter"
    return context


def absorb(em: LoopNestBuilder, op: Operation, lowering: Absorber) -> None:
    """`op`, a later op that the current lowering computes in its own loop nest, gets `lowering` instead of its
    own (which returns the values that nest wrote)."""
    context_of(em).absorbers[op] = lowering


def absorber(em: LoopNestBuilder, op: Operation) -> Absorber | None:
    """The lowering an earlier lowering registered for `op` (`absorb`), taken once."""
    return context_of(em).absorbers.pop(op, None)
