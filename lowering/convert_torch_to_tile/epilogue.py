"""Epilogue fusion: an elementwise op of a tensor applied as the tensor's producer stores it.

A producer whose loop nest writes its whole result with `tile.store`s of SBUF tiles (a matmul's PSUM evacuation)
registers those stores (`register_stores`). When an elementwise op takes that result and nothing else uses it,
the op's per-tile compute is applied to each stored tile right before the store, which then writes the
elementwise op's result instead: the intermediate tensor, its HBM round trip and the elementwise loop nest
disappear (gelu after a Linear layer runs as the matmul's output tiles leave PSUM). The op's other tensor
operands (a residual, a broadcast bias; any strides) are loaded in the epilogue as the tiles at the same
indices, seen through the product's shape (`a + residual` after GPT-2's projections).

Input contract: the producer's stores cover its result exactly once and are its only writes; the consumer's
lowering goes through `elementwise.elementwise` with the producer's result (or a row-major reshape of all of
it) among its tensor operands and a result of that shape. Every other operand must be fully written before the
producer's loop nest and not written after it (checked: its storage is a function argument or allocated before
the nest, and nothing after the nest but views uses it); otherwise the op is lowered on its own.

Output guarantee: the same values as the unfused lowering, bit for bit: the compute sees the very tiles (same
element types) that the elementwise nest would have loaded.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from xdsl.dialects import memref
from xdsl.ir import Block, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    layout_of,
    load,
    result_element_type,
    result_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.context import context_of
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import capture_elementwise
from neuron_mlir.lowering.emitter import Emitter
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.runtime.hardware import Memory


def register_stores(em: Emitter, result: SSAValue, stores: list[tile.StoreOp]) -> None:
    """`stores` write all of `result` (a fresh allocation), each exactly once: a consumer may fuse into them."""
    if isinstance(result.owner, memref.AllocOp) and stores:
        context_of(em).stores[result] = stores


def fuse_into_producer(
    em: Emitter, op: Operation, args: dict[str, Any], lowering: Lowering, sole_uses: Collection[SSAValue]
) -> list[SSAValue] | None:
    """Lower `op` into an operand's producer when it can (see the module docstring); None when it cannot.

    `sole_uses`: the operands of which, at the torch level, `op` is the only user, and so is each view op
    between `op` and the producer of that operand (so the producer's result is dead once fused).
    """
    if len(op.results) != 1:
        return None
    shape = tuple(result_shape(op))
    registered = context_of(em).stores
    candidates = [
        value
        for value in args.values()
        if isinstance(value, SSAValue) and value in sole_uses and root(value) in registered and _whole(value, shape)
    ]
    if not candidates:
        return None
    # the latest producer: any other one is complete before its loop nest starts
    order = {o: i for i, o in enumerate(em.block.ops)} if len(candidates) > 1 else {}
    operand = max(candidates, key=lambda value: order.get(root(value).owner, 0))  # type: ignore[arg-type]
    source = root(operand)
    before, constants = set(em.block.ops), dict(em.constants)
    with capture_elementwise(em) as captured:
        try:
            lowering(em, op, args)
        except (ValueError, IndexError, AssertionError):
            captured.clear()
    emitted = [o for o in em.block.ops if o not in before]
    for stray in reversed(emitted):  # a lowering that emits anything besides its elementwise nest is not fused
        stray.detach()
        stray.erase(safe_erase=False)
    if emitted:
        em.constants.clear()
        em.constants.update(constants)
    if emitted or len(captured) != 1 or captured[0][0].count(operand) != 1:
        return None
    values, compute = captured[0]
    allocation = source.owner
    assert isinstance(allocation, memref.AllocOp)
    stores = registered[source]
    # The other operands, seen through the product's shape: the tile of each at a store's indices (and size)
    # holds the elements the stored tile is combined with. Their views go before the nest that loads them.
    before_nest = em.at(em.block, _top_level(stores[0], em.block), op.location)
    seen: dict[int, tuple[SSAValue, Layout]] = {}
    for position, value in enumerate(values):
        if value is operand:
            continue
        layout = layout_of(value).broadcast_to(shape).reshape(layout_of(source).shape)
        if layout is None or root(value) is source or not _ready_before(value, stores, em.block):
            return None
        seen[position] = (root(value), layout)
    others = {position: view(before_nest, storage, layout) for position, (storage, layout) in seen.items()}
    element_type = result_element_type(op)
    out = memref.AllocOp([], [], tile.hbm_type(layout_of(source).shape, element_type))
    out.location = op.location
    allocation.parent_block().insert_op_after(out, allocation)  # type: ignore[union-attr]
    del registered[source]
    for store in stores:
        value = store.value
        assert isinstance(value.type, TileType)
        at = em.at(store.parent_block(), store, op.location)  # type: ignore[arg-type]
        tile_shape = value.type.get_shape()
        tiles = [
            value if position not in others else load(at, others[position], store.indices, tile_shape)
            for position in range(len(values))
        ]
        result_type = TileType(tile_shape, element_type, Memory.SBUF)
        store.operands[0] = compute(at, tiles, result_type)
        store.operands[1] = out.memref
    views = []
    while isinstance(operand.owner, tile.ViewOp):  # the reshapes of the product have no other user: drop them
        views.append(operand.owner)
        operand = operand.owner.source
    for dead in views:
        if not dead.result.uses:
            dead.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
            dead.erase()
    if not source.uses:
        allocation.detach()
        allocation.erase()
    return [view(em, out.memref, Layout.contiguous(shape))]


def _whole(operand: SSAValue, shape: tuple[int, ...]) -> bool:
    """Whether `operand` is a reshape of all of its producer's result (row-major, same elements) to `shape`: the
    stored tiles then map to the same elements."""
    layout = layout_of(operand)
    return (
        layout.shape == shape
        and layout.is_contiguous()
        and not layout.offset
        and layout.num_elements == len_of(root(operand))
    )


def _ready_before(value: SSAValue, stores: list[tile.StoreOp], block: Block) -> bool:
    """Whether all of `value`'s storage is written before the producer's `stores` and never after them: it is a
    function argument or allocated before the first store's top-level op, and nothing after the last store's
    but views uses it (ops in between are the producer's own, which writes only its result)."""
    first, last = _top_level(stores[0], block), _top_level(stores[-1], block)
    storage = root(value)
    if isinstance(storage.owner, Operation) and not _top_level(storage.owner, block).is_before_in_block(first):
        return False
    pending = [storage]
    while pending:
        for use in pending.pop().uses:
            if isinstance(use.operation, tile.ViewOp):
                pending.append(use.operation.result)
            elif last.is_before_in_block(_top_level(use.operation, block)):
                return False
    return True


def _top_level(op: Operation, block: Block) -> Operation:
    """The ancestor of `op` (or `op`) directly in `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


def root(value: SSAValue) -> SSAValue:
    """The allocation (or function argument) under a chain of `tile.view`s."""
    while isinstance(value.owner, tile.ViewOp):
        value = value.owner.source
    return value


def len_of(value: SSAValue) -> int:
    """The number of elements of an HBM tensor."""
    return layout_of(value).num_elements
