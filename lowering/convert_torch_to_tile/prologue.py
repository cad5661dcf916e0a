"""Prologue fusion: a producer computed on chip as its consumer matmul builds the stationary panel from it.

A matmul reads its left operand A [M, K] as A^T tiles (K on partitions), which it gets by loading rows of A and
transposing them on TensorE. When A is a layer norm's output and the matmul its only user, the layer norm need
not go through HBM at all: the matmul computes the normalized rows itself, in the rows it would have loaded,
and applies the per-feature affine (weight, bias) as it evacuates the transposes from PSUM, where a feature is
a partition and the affine is one per-partition multiply-add instead of two tensor-tensor passes over the rows
(normalization.py). (A Linear layer and its activation computed as the next matmul's panel is a tile-level
rewrite: tile-fuse-matmul-chains.)

A lowering that computes a neighbouring op in its own loop nest (an RMS norm's upcast of its input and scaling
of its result) registers that op (`absorb`): the conversion calls the given handler for it instead of its
lowering.

Which producers run in their consumer is decided before the conversion, by torch-level passes that mark them
(`neuron.fuse`, `fusion_mark`). A marked producer's lowering emits nothing but its result's allocation and
registers a `Prologue` (`defer`). The matmul reading it as A takes it (`take`) and either uses it or emits it in
place (`Prologue.materialize`); any other reader of a deferred result (another operand of a matmul, any other op,
the function's return) gets it materialized first (`materialize_operands`), so nothing deferred is ever lost,
whatever the marks say.

Input contract: nothing between a producer and its readers writes the producer's inputs (value semantics), so a
producer materialized at its reader computes what it would have computed at its own place.
"""

from __future__ import annotations

from typing import Any, Protocol

from xdsl.dialects import memref
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.lowering.convert_torch_to_tile.context import Absorber, context_of
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder

# Torch ops whose lowering calls `emit_matmul` with the named operand as A, and so may take its prologue.
MATMUL_CONSUMERS: dict[str, str] = {"torch.aten.mm": "self", "torch.aten.addmm": "mat1"}

# The discardable attribute by which a torch-level pass marks an op to be computed inside another op's loop nest,
# and its value: a layer norm computed in the prologue of the matmul reading it (torch-fuse-matmul-prologues).
FUSE = "neuron.fuse"
MATMUL_PROLOGUE = "matmul_prologue"


def fusion_mark(op: Operation) -> str | None:
    """The fusion a torch-level pass decided for `op` (its `neuron.fuse` attribute), if any."""
    mark = op.attributes.get(FUSE)
    return mark.data if isinstance(mark, StringAttr) else None


class Prologue(Protocol):
    """What a deferred producer gives the matmul that builds its panel from it."""

    rows: int  # M: the producer's result seen as [rows, length]
    length: int  # K

    def materialize(self, em: LoopNestBuilder) -> SSAValue:
        """Emit the producer's own loop nest, writing its result to HBM (the consumer does not fuse it); returns
        the result, which replaces the deferred allocation in every use of it."""

    def discard(self) -> None:
        """The consumer fused the producer: erase the allocations of its results (nothing writes or reads them)."""

    def setup(self, em: LoopNestBuilder, k_tile: int) -> None:
        """Emit what every row block shares (the affine parameters as per-partition columns), once."""

    def row_tiles(self, em: LoopNestBuilder, subs: list[tuple[Index, int]]) -> list[SSAValue]:
        """Per (m0, m_size) of `subs`, the [m_size, length] SBUF tile of rows m0.. before the per-feature
        affine, in the result's type."""

    def evacuate(self, em: LoopNestBuilder, transposed: SSAValue, k_index: Index | None) -> SSAValue:
        """A PSUM transpose of one K tile of a row tile ([k, m], K tile `k_index`, or the partial last K tile
        when None) with the affine applied, as the SBUF tile the panel holds."""


def absorb(em: LoopNestBuilder, op: Operation, lowering: Absorber) -> None:
    """`op` (reading a deferred result) becomes part of the deferred producer: `lowering` replaces its own."""
    context_of(em).absorbers[op] = lowering


def absorber(em: LoopNestBuilder, op: Operation) -> Absorber | None:
    return context_of(em).absorbers.pop(op, None)


def consumer_of(op: Operation, consumers: dict[str, str] = MATMUL_CONSUMERS) -> Operation | None:
    """The op that alone uses `op`'s first result, through views only, as its operand `consumers[name]`, with only
    views in between (by default a matmul taking it as A)."""
    from neuron_mlir.lowering.convert_torch_to_tile.views import VIEW_LOWERINGS

    value = op.results[0]
    while True:
        if not value.has_one_use():
            return None
        use = next(iter(value.uses))
        user = use.operation
        if user.name not in VIEW_LOWERINGS:
            break
        value = user.results[0]
    operand = consumers.get(user.name)
    if operand is None or user.arguments().get(operand) is not value:
        return None
    between = op.next_op
    while between is not None and between is not user:
        if between.name.startswith("torch.") and between.name not in VIEW_LOWERINGS:
            return None
        between = between.next_op
    return user if between is user else None


def defer(em: LoopNestBuilder, result: SSAValue, prologue: Prologue) -> None:
    """`result` (a fresh allocation) is written by `prologue`, emitted by its consumer."""
    assert isinstance(result.owner, memref.AllocOp)
    context_of(em).deferred[result] = prologue


def _root(value: SSAValue) -> SSAValue:
    while isinstance(value.owner, tile.ViewOp):
        value = value.owner.source
    return value


def take(em: LoopNestBuilder, value: SSAValue) -> tuple[SSAValue, Prologue] | None:
    """The deferred producer of all of `value` (a view of its result), now the caller's to fuse or materialize."""
    root = _root(value)
    prologue = context_of(em).deferred.pop(root, None)
    return None if prologue is None else (root, prologue)


def materialize_operands(em: LoopNestBuilder, arguments: dict[str, Any], keep: str | None = None) -> None:
    """Emit every deferred producer whose result is among `arguments` (before their user's lowering), updating
    the arguments that were the deferred allocation itself; argument `keep` (a matmul's A, which may take the
    producer as its prologue) is left deferred."""
    for name, value in arguments.items():
        if name == keep:
            continue
        values = list(value) if isinstance(value, list | tuple) else [value]
        for index, item in enumerate(values):
            if isinstance(item, SSAValue) and (taken := take(em, item)) is not None:
                result = taken[1].materialize(em)
                if item is taken[0]:
                    values[index] = result
        arguments[name] = values if isinstance(value, list | tuple) else values[0]


def _drop_dead_views(value: SSAValue) -> None:
    for use in list(value.uses):
        user = use.operation
        if isinstance(user, tile.ViewOp) and user.parent is not None:
            _drop_dead_views(user.result)
            if not user.result.uses:
                user.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
                user.erase()


def drop_unused(value: SSAValue) -> None:
    """Erase the views down to `value`'s allocation, and the allocation, once nothing reads them (views of it
    that nothing reads go first)."""
    _drop_dead_views(value)
    while True:
        owner = value.owner
        if value.uses or not isinstance(owner, tile.ViewOp | memref.AllocOp) or owner.parent is None:
            return
        source = owner.source if isinstance(owner, tile.ViewOp) else None
        owner.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
        owner.erase()
        if source is None:
            return
        value = source
