"""What every torch-to-tile lowering shares: HBM tensors with layouts, views, allocation, tile sizes.

A tensor at this level is an HBM memref whose type carries its layout relative to its allocation; views
(`tile.view`) re-describe the same memory, so transposes, reshapes and broadcasts cost nothing until a load
walks them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.locations import OpDiagnostic
from neuron_mlir.lowering.emitter import Emitter, Index
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.runtime.hardware import PARTITIONS, Memory

# Partition tiles use every lane; free-axis tiles of 2048 elements keep several operands of one loop body
# (8 KiB per partition each in fp32) comfortably inside SBUF while amortising the fixed cost per instruction.
PARTITION_TILE = PARTITIONS
FREE_TILE = 2048
# Share of a partition's SBUF that the tiles of one loop body may hold: the body is unrolled twice for double
# buffering (neuron-unroll-loops) and other loop nests' buffers, constants and PSUM evacuations need room too.
SBUF_BODY_SHARE = 4


def body_budget_bytes(em: Emitter) -> int:
    """Bytes per partition that the tiles live in one loop body may use on the module's target."""
    from neuron_mlir.ir.dialects.neuron import target_of
    from neuron_mlir.runtime.hardware import DEFAULT_TARGET, get_target

    anchor = em.anchor if em.anchor is not None else em.block.parent_op()
    target = target_of(anchor) if anchor is not None else get_target(DEFAULT_TARGET)
    return target.sbuf_bytes_per_partition // SBUF_BODY_SHARE


def memref_type_of(value: SSAValue) -> MemRefType:
    assert isinstance(value.type, MemRefType), f"expected an HBM memref, got {value.type}"
    return value.type


def layout_of(value: SSAValue) -> Layout:
    memref_type = memref_type_of(value)
    strides, offset = tile.memref_strides(memref_type)
    return Layout(memref_type.get_shape(), strides, offset)


def element_type_of(value: SSAValue) -> Attribute:
    return memref_type_of(value).element_type


def view(em: Emitter, value: SSAValue, layout: Layout) -> SSAValue:
    """`value` re-described with `layout` (relative to the same allocation); no op when nothing changes."""
    if layout == layout_of(value):
        return value
    result_type = tile.hbm_type(layout.shape, element_type_of(value), layout.strides, layout.offset)
    if result_type == value.type:
        return value
    return em.insert(tile.ViewOp(value, result_type)).result


def alloc(em: Emitter, shape: Sequence[int], element_type: Attribute) -> SSAValue:
    """A fresh row-major HBM tensor."""
    return em.insert(memref.AllocOp([], [], tile.hbm_type(tuple(shape), element_type))).memref


def empty_tensor(em: Emitter, tensor_type: TensorType) -> SSAValue:
    """An HBM tensor of a shape with a zero extent: a zero-stride view of a one-element allocation."""
    shape = tensor_type.get_shape()
    base = alloc(em, (1,), tensor_type.element_type)
    return em.insert(tile.ViewOp(base, tile.hbm_type(shape, tensor_type.element_type, [0] * len(shape), 0))).result


def load(
    em: Emitter,
    tensor: SSAValue,
    indices: Sequence[Index],
    shape: Sequence[int],
    element_type: Attribute | None = None,
    dims: Sequence[int] | None = None,
) -> SSAValue:
    """Load a `shape` tile (SBUF) from `tensor` at `indices`; `dims` maps tile dims to tensor dims."""
    tile_type = TileType(tuple(shape), element_type or element_type_of(tensor), Memory.SBUF)
    rank = len(memref_type_of(tensor).get_shape())
    default_dims = tuple(range(rank - len(shape), rank))
    mapping = None if dims is None or tuple(dims) == default_dims else dims
    return em.insert(tile.LoadOp(tensor, [em.index(i) for i in indices], tile_type, mapping)).result


def store(em: Emitter, value: SSAValue, tensor: SSAValue, indices: Sequence[Index]) -> None:
    em.insert(tile.StoreOp(value, tensor, [em.index(i) for i in indices]))


def to_sbuf(em: Emitter, value: SSAValue, element_type: Attribute | None = None) -> SSAValue:
    """A tile in SBUF with `element_type` (a copy only when memory or type differ)."""
    source = value.type
    assert isinstance(source, TileType)
    wanted = TileType(source.get_shape(), element_type or source.element_type, Memory.SBUF)
    if wanted == source:
        return value
    return em.insert(tile.CopyOp(value, wanted)).result


class LoweringRefused(OpDiagnostic):
    """A torch op this pass cannot lower (with these arguments): the frontend runs that node on the CPU instead.

    `value_name` is the SSA name of the op's first result, which the FX importer takes from the FX node's name,
    so the frontend can tell which node to send to the CPU.
    """

    def __init__(self, message: str, value_name: str | None = None, op: Operation | None = None):
        super().__init__(message, op)
        self.value_name = value_name


def refuse(em: Emitter, op_name: str, reason: str) -> LoweringRefused:
    """The diagnostic for an input this lowering does not handle: names the op, the rule and the source line."""
    return LoweringRefused(f"{op_name}: {reason}{em.where()}")


# A lowering takes the op, its ATen arguments (tensors already replaced by their HBM memrefs) and returns one
# memref per result (None for a result of type `none`, which ATen leaves undefined).
Lowering = Callable[[Emitter, Operation, dict[str, Any]], list[SSAValue]]


def result_shape(op: Operation, index: int = 0) -> tuple[int, ...]:
    result_type = op.results[index].type
    assert isinstance(result_type, TensorType)
    return result_type.get_shape()


def result_element_type(op: Operation, index: int = 0) -> Attribute:
    result_type = op.results[index].type
    assert isinstance(result_type, TensorType)
    return result_type.element_type


# body(emitter, offsets, sizes, accumulator or None) -> the new accumulator
FoldBody = Callable[[Emitter, list[Index], list[int], SSAValue | None], SSAValue]


def fold_nest(em: Emitter, dims: Sequence[tuple[int, int]], body: FoldBody, acc: SSAValue | None = None) -> SSAValue:
    """Fold `body` over every tile of the nest `dims` ((extent, tile) per level, outermost first).

    The accumulator starts as `acc` (None: the first step starts it); inner levels run inside the outer
    levels' loops, carrying the accumulator, so the nest stays loops whatever its trip counts.
    """
    if not dims:
        return body(em, [], [], acc)
    (extent, size), rest = dims[0], list(dims[1:])

    def level(e: Emitter, offset: Index, tile_size: int, carried: SSAValue | None) -> SSAValue:
        return fold_nest(
            e, rest, lambda e2, offsets, sizes, a: body(e2, [offset, *offsets], [tile_size, *sizes], a), carried
        )

    return em.accumulate_tiles(
        extent, size, lambda e, o, s: level(e, o, s, acc), lambda e, o, s, carried: level(e, o, s, carried)
    )
