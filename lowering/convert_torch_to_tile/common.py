"""What every torch-to-tile lowering shares: HBM tensors with layouts, views, allocation, tile sizes.

A tensor at this level is an HBM memref whose type carries its layout relative to its allocation; views
(`tile.view`) re-describe the same memory, so transposes, reshapes and broadcasts cost nothing until a load
walks them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, TensorType, f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.locations import OpDiagnostic, at_source
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.layout import Layout, collapse, normalize_dim
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import PARTITIONS, Memory, Target

# Partition tiles use every lane; free-axis tiles of 2048 elements keep several operands of one loop body
# (8 KiB per partition each in fp32) comfortably inside SBUF while amortising the fixed cost per instruction.
PARTITION_TILE = PARTITIONS
FREE_TILE = 2048
# Share of a partition's SBUF that the tiles of one loop body may hold: neuron-unroll-loops gives the body at least
# two copies (double buffering; a third only when its buffers fit beside everything else), and other loop nests'
# buffers, constants and PSUM evacuations need room too.
SBUF_BODY_SHARE = 4


def emitter_target(em: LoopNestBuilder) -> Target:
    """The target of the module `em` writes into (the default target while the IR is not in a module yet): every
    hardware figure a lowering sizes its tiles by comes from here, never from a literal."""
    from neuron_mlir.ir.dialects.neuron import target_of
    from neuron_mlir.runtime.hardware import DEFAULT_TARGET, get_target

    anchor = em.anchor if em.anchor is not None else em.block.parent_op()
    return target_of(anchor) if anchor is not None else get_target(DEFAULT_TARGET)


def body_budget_bytes(em: LoopNestBuilder) -> int:
    """Bytes per partition that the tiles live in one loop body may use on the module's target."""
    return emitter_target(em).sbuf_bytes_per_partition // SBUF_BODY_SHARE


def row_chunk_columns(em: LoopNestBuilder, length: int, column_bytes: int) -> int:
    """Columns per chunk of a row too long for one loop body, whose tiles take `column_bytes` per column: as few
    chunks as the body's SBUF share holds, all of one width. Each chunk is a DMA with a fixed cost of its own
    (about 2 us), which the 512 KiB of a 2048-wide bf16 chunk of 128 rows barely outweighs, and a narrow last
    chunk would pay it for a few bytes."""
    widest = max(FREE_TILE, body_budget_bytes(em) // max(column_bytes, 1))
    count = -(-length // widest)
    return -(-length // count)


def for_row_tiles(
    em: LoopNestBuilder,
    row_dims: Sequence[int],
    row_tile: Callable[[LoopNestBuilder, list[Index], Index, int], object],
) -> None:
    """`row_tile(e, prefix, p0, p)` for every tile of up to 128 rows of the last of `row_dims` (at least one),
    under a loop per leading row dim (`prefix` their indices)."""

    def tiles(e: LoopNestBuilder, prefix: list[Index]) -> None:
        def one_tile(e2: LoopNestBuilder, p0: Index, p: int) -> None:
            row_tile(e2, prefix, p0, p)

        e.for_tiles(row_dims[-1], PARTITION_TILE, one_tile)

    em.for_each_index(row_dims[:-1], tiles)


def element_bytes(element_type: Attribute) -> int:
    """Bytes per element of a storage type (what SBUF budgets and DMA sizes count)."""
    return itemsize(runtime_dtype_name(element_type))


def memref_type_of(value: SSAValue) -> MemRefType:
    assert isinstance(value.type, MemRefType), f"expected an HBM memref, got {value.type}"
    return value.type


def layout_of(value: SSAValue) -> Layout:
    memref_type = memref_type_of(value)
    strides, offset = tile.memref_strides(memref_type)
    return Layout(memref_type.get_shape(), strides, offset)


def element_type_of(value: SSAValue) -> Attribute:
    return memref_type_of(value).element_type


def view(em: LoopNestBuilder, value: SSAValue, layout: Layout) -> SSAValue:
    """`value` re-described with `layout` (relative to the same allocation); no op when nothing changes."""
    if layout == layout_of(value):
        return value
    result_type = tile.hbm_type(layout.shape, element_type_of(value), layout.strides, layout.offset)
    if result_type == value.type:
        return value
    return em.insert(tile.ViewOp(value, result_type)).result


def row_layouts(values: Sequence[SSAValue], dim: int) -> tuple[list[Layout], tuple[int, ...]]:
    """The layouts of tensors equal in every dim but `dim`, seen as [rows..., length]: the other dims merged where
    contiguous in all of them. Returns the layouts and the row dims."""
    layouts = [layout_of(v) for v in values]
    layouts = [Layout((1,), (0,), lay.offset) if lay.rank == 0 else lay for lay in layouts]
    rank = layouts[0].rank
    dim = normalize_dim(dim, rank)
    others = [d for d in range(rank) if d != dim]
    row_dims, row_strides = collapse(
        tuple(layouts[0].shape[d] for d in others), [tuple(lay.strides[d] for d in others) for lay in layouts]
    )
    if not row_dims:
        row_dims, row_strides = (1,), [(0,) for _ in layouts]
    rows = [
        Layout((*row_dims, lay.shape[dim]), (*strides, lay.strides[dim]), lay.offset)
        for lay, strides in zip(layouts, row_strides, strict=True)
    ]
    return rows, tuple(row_dims)


def row_views(em: LoopNestBuilder, values: list[SSAValue], dim: int) -> tuple[list[SSAValue], tuple[int, ...]]:
    """`row_layouts` applied: the tensors viewed as [rows..., length], and the row dims."""
    layouts, row_dims = row_layouts(values, dim)
    return [view(em, value, layout) for value, layout in zip(values, layouts, strict=True)], row_dims


def sbuf_tile(shape: Sequence[int], element_type: Attribute = f32) -> TileType:
    """An on-chip (SBUF) tile of `shape`, fp32 unless said otherwise: the type of most scratch tiles."""
    return TileType(tuple(shape), element_type, Memory.SBUF)


def column_tile(partitions: int, element_type: Attribute = f32) -> TileType:
    """A [partitions, 1] SBUF tile: one value per row, as row statistics and per-row scalars are kept."""
    return sbuf_tile((partitions, 1), element_type)


def alloc(em: LoopNestBuilder, shape: Sequence[int], element_type: Attribute) -> SSAValue:
    """A fresh row-major HBM tensor."""
    return em.insert(memref.AllocOp([], [], tile.hbm_type(tuple(shape), element_type))).memref


def empty_tensor(em: LoopNestBuilder, tensor_type: TensorType) -> SSAValue:
    """An HBM tensor of a shape with a zero extent: a zero-stride view of a one-element allocation."""
    shape = tensor_type.get_shape()
    base = alloc(em, (1,), tensor_type.element_type)
    return em.insert(tile.ViewOp(base, tile.hbm_type(shape, tensor_type.element_type, [0] * len(shape), 0))).result


def load(
    em: LoopNestBuilder,
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


def store(em: LoopNestBuilder, value: SSAValue, tensor: SSAValue, indices: Sequence[Index]) -> None:
    em.insert(tile.StoreOp(value, tensor, [em.index(i) for i in indices]))


def to_sbuf(em: LoopNestBuilder, value: SSAValue, element_type: Attribute | None = None) -> SSAValue:
    """A tile in SBUF with `element_type` (a copy only when memory or type differ)."""
    source = value.type
    assert isinstance(source, TileType)
    wanted = TileType(source.get_shape(), element_type or source.element_type, Memory.SBUF)
    if wanted == source:
        return value
    return em.insert(tile.CopyOp(value, wanted)).result


class NotLowerable(OpDiagnostic):
    """A torch op that convert-torch-to-tile does not lower with these arguments, found before anything is
    converted (`legality`): names the op, the rule it breaks and the user's source line. The frontend asks the same
    legality of every node first and runs such nodes on the CPU, so a compile never meets this diagnostic."""


class LoweringInternalError(OpDiagnostic):
    """A lowering failed on an op that its family declared legal: a bug of the compiler, never a property of the
    user's program (and never a reason to run the op on the CPU silently). Names the op, its source line and the
    exception, with what to do about it."""

    def __init__(self, op: Operation, error: BaseException):
        aten = op.name.removeprefix("torch.")
        super().__init__(
            f"{op.name}: internal compiler error while lowering it to the tile dialect: "
            f"{type(error).__name__}: {error}{at_source(op)}. This is a bug in "
            f"neuron-mlir: please report it with this message; to work around it, run the op on the CPU with "
            f"options={{'cpu_ops': ['{aten}']}}",
            op,
        )


# A lowering takes the op, its ATen arguments (tensors already replaced by their HBM memrefs) and returns one
# memref per result (None for a result of type `none`, which ATen leaves undefined).
Lowering = Callable[[LoopNestBuilder, Operation, dict[str, Any]], Sequence[SSAValue | None]]

# A family's legality check: None when its lowering takes the torch op as it is (its operand and result types,
# its attributes, the module's target), else the rule the op breaks. It looks at the op alone, never at what
# other ops lowered to, so that the frontend can ask it of every op of a graph before converting any.
Legality = Callable[[Operation], str | None]


def always_legal(op: Operation) -> str | None:
    """The legality of a family whose lowerings take every verified op of theirs."""
    return None


def arguments_of(op: Operation) -> dict[str, Any]:
    """A torch op's ATen arguments: tensor operands as their SSA values (of `tensor` type), the rest as Python."""
    return op.arguments()  # type: ignore[attr-defined]


def _tensor_type(value: object) -> TensorType:
    value_type = value.type if isinstance(value, SSAValue) else None
    assert isinstance(value_type, TensorType), f"expected a tensor, got {value}"
    return value_type


def tensor_shape(value: object) -> tuple[int, ...]:
    """The shape of a torch-level tensor argument."""
    return _tensor_type(value).get_shape()


def tensor_element_type(value: object) -> Attribute:
    """The element type of a torch-level tensor argument."""
    return _tensor_type(value).element_type


def dim_out_of_range(dim: int, rank: int) -> str | None:
    """The rule a dimension index breaks (PyTorch's range, rank 0 counting as rank 1), or None."""
    bound = max(rank, 1)
    return None if -bound <= dim < bound else f"dimension {dim} is out of range for rank {rank}"


def dims_out_of_range(op: Operation, names: Sequence[str] = ("dim",), operand: str = "self") -> str | None:
    """The first of the op's dimension arguments `names` (ints or lists of ints) outside the rank of its tensor
    argument `operand`, as a rule broken, or None."""
    args = arguments_of(op)
    rank = len(tensor_shape(args[operand]))
    for name in names:
        value = args.get(name)
        for dim in [value] if isinstance(value, int) else list(value) if value is not None else []:
            if (problem := dim_out_of_range(int(dim), rank)) is not None:
                return problem
    return None


def result_shape(op: Operation, index: int = 0) -> tuple[int, ...]:
    result_type = op.results[index].type
    assert isinstance(result_type, TensorType)
    return result_type.get_shape()


def result_element_type(op: Operation, index: int = 0) -> Attribute:
    result_type = op.results[index].type
    assert isinstance(result_type, TensorType)
    return result_type.element_type


# body(emitter, offsets, sizes, accumulator or None) -> the new accumulator
FoldBody = Callable[[LoopNestBuilder, list[Index], list[int], SSAValue | None], SSAValue]


def fold_nest(
    em: LoopNestBuilder, dims: Sequence[tuple[int, int]], body: FoldBody, acc: SSAValue | None = None
) -> SSAValue:
    """Fold `body` over every tile of the nest `dims` ((extent, tile) per level, outermost first).

    The accumulator starts as `acc` (None: the first step starts it); inner levels run inside the outer
    levels' loops, carrying the accumulator, so the nest stays loops whatever its trip counts.
    """
    if not dims:
        return body(em, [], [], acc)
    (extent, size), rest = dims[0], list(dims[1:])

    def level(e: LoopNestBuilder, offset: Index, tile_size: int, carried: SSAValue | None) -> SSAValue:
        return fold_nest(
            e, rest, lambda e2, offsets, sizes, a: body(e2, [offset, *offsets], [tile_size, *sizes], a), carried
        )

    return em.accumulate_tiles(
        extent, size, lambda e, o, s: level(e, o, s, acc), lambda e, o, s, carried: level(e, o, s, carried)
    )
