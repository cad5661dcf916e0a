"""Epilogue fusion: an elementwise op of one tensor applied as its operand's producer stores it.

A producer whose loop nest writes its whole result with `tile.store`s of SBUF tiles (a matmul's PSUM evacuation)
registers those stores (`register_stores`). When the next op to lower is an elementwise op of that result alone,
and nothing else uses the result, its per-tile compute is applied to each stored tile right before the store,
which then writes the elementwise op's result instead: the intermediate tensor, its HBM round trip and the
elementwise loop nest disappear (gelu after a Linear layer runs as the matmul's output tiles leave PSUM).

Input contract: the producer's stores cover its result exactly once and are its only writes; the consumer's
lowering goes through `elementwise.elementwise` with the producer's result (or a row-major reshape of all of
it) as its only tensor operand and a result of that shape.

Output guarantee: the same values as the unfused lowering, bit for bit: the compute sees the very tiles (same
element type) that the elementwise nest would have loaded back.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import memref
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    layout_of,
    result_element_type,
    result_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import capture_elementwise
from neuron_mlir.lowering.emitter import Emitter
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.runtime.hardware import Memory

# result tensor -> the stores that write all of it, for the function being converted
_stores: dict[SSAValue, list[tile.StoreOp]] = {}


def reset() -> None:
    """Forget every registered producer (at the start of each function)."""
    _stores.clear()


def register_stores(result: SSAValue, stores: list[tile.StoreOp]) -> None:
    """`stores` write all of `result` (a fresh allocation), each exactly once: a consumer may fuse into them."""
    if isinstance(result.owner, memref.AllocOp) and stores:
        _stores[result] = stores


def fuse_into_producer(
    em: Emitter, op: Operation, args: dict[str, Any], lowering: Lowering, sole_user: bool
) -> list[SSAValue] | None:
    """Lower `op` into its operand's producer when it can (see the module docstring); None when it cannot.

    `sole_user`: at the torch level, `op` is the only user of its tensor operand, and so is each view op between
    it and the producer of that operand (so the producer's result is dead once fused).
    """
    tensors = [value for value in args.values() if isinstance(value, SSAValue) and root(value) in _stores]
    if not sole_user or len(tensors) != 1 or len(op.results) != 1:
        return None
    operand, source = tensors[0], root(tensors[0])
    shape = tuple(result_shape(op))
    layout = layout_of(operand)
    # a reshape of the whole result (row-major, same elements): the stored tiles map to the same elements
    if layout.shape != shape or not layout.is_contiguous() or layout.offset or layout.num_elements != len_of(source):
        return None
    before, constants = set(em.block.ops), dict(em.constants)
    with capture_elementwise() as captured:
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
    if emitted or len(captured) != 1 or captured[0][0] != [operand]:
        return None
    compute = captured[0][1]
    element_type = result_element_type(op)
    allocation = source.owner
    assert isinstance(allocation, memref.AllocOp)
    out = memref.AllocOp([], [], tile.hbm_type(layout_of(source).shape, element_type))
    out.location = op.location
    allocation.parent_block().insert_op_after(out, allocation)  # type: ignore[union-attr]
    for store in _stores.pop(source):
        value = store.value
        assert isinstance(value.type, TileType)
        at = Emitter(store.parent_block(), store, op.location, em.constants, em.constant_block)  # type: ignore[arg-type]
        result_type = TileType(value.type.get_shape(), element_type, Memory.SBUF)
        store.operands[0] = compute(at, [value], result_type)
        store.operands[1] = out.memref
    views = []
    while isinstance(operand.owner, tile.ViewOp):  # the reshapes of the product have no other user: drop them
        views.append(operand.owner)
        operand = operand.owner.source
    for dead in views:
        if not dead.result.uses:
            dead.detach()
            dead.erase()
    if not source.uses:
        allocation.detach()
        allocation.erase()
    return [view(em, out.memref, Layout.contiguous(shape))]


def root(value: SSAValue) -> SSAValue:
    """The allocation (or function argument) under a chain of `tile.view`s."""
    while isinstance(value.owner, tile.ViewOp):
        value = value.owner.source
    return value


def len_of(value: SSAValue) -> int:
    """The number of elements of an HBM tensor."""
    return layout_of(value).num_elements
