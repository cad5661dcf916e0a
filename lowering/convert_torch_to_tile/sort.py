"""`sort` and `topk` by ranking: each element's position in the sorted order is a count of comparisons.

For one row `x` of length n (every other dim is a loop), two passes on VectorE with GpSimdE iotas:

    rank   i on partitions, j on the free axis: x[j] is the same stride-0 row on every partition, x[i] a
           per-partition column, and rank[i] = sum_j before(j, i), where j comes before i when its key is
           smaller (larger, descending) or equal with j < i. Keys order NaN after every number (before, when
           descending), as PyTorch does. The ranks form a permutation, and the result is a stable sort.
    place  r on partitions, i on the free axis: out[r] = the x[i] (and i) whose rank[i] == r, picked by a
           select and a sum over i (one term is non-zero, so NaN and infinities come through unchanged)

Each pass is n / 128 x n / 512 tiles per row, so the work grows as n^2 / 128: fine for the sort lengths of
typical models (a few thousand), and the same code serves `topk` (the place pass only for r < k). Values go
through fp32 (integer values exact up to 2^24); indices are int64.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import f32, i64
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    PARTITION_TILE,
    Lowering,
    alloc,
    arguments_of,
    dims_out_of_range,
    layout_of,
    load,
    result_element_type,
    result_shape,
    row_views,
    store,
    tensor_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.layout import Layout, normalize_dim
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory

# Free-axis chunk of both passes: about twenty [P, chunk] fp32 intermediates are live in a chunk's body (and
# twice that when loop iterations get their own buffers), which must fit a partition's SBUF.
CHUNK = 512


def _spread(em: LoopNestBuilder, row_view: SSAValue, partitions: int) -> SSAValue:
    """A [rows..., length] view seen as [rows..., partitions, length] with the row repeated on every partition."""
    layout = layout_of(row_view)
    shape = (*layout.shape[:-1], partitions, layout.shape[-1])
    strides = (*layout.strides[:-1], 0, layout.strides[-1])
    return view(em, row_view, Layout(shape, strides, layout.offset))


def _columns(em: LoopNestBuilder, row_view: SSAValue) -> SSAValue:
    """A [rows..., length] view seen as [rows..., length, 1]: [P, 1] column tiles walk the length on partitions."""
    layout = layout_of(row_view)
    return view(em, row_view, Layout((*layout.shape, 1), (*layout.strides, 1), layout.offset))


def _f32(shape: tuple[int, ...]) -> TileType:
    return TileType(shape, f32, Memory.SBUF)


class _Ops:
    """Tile ops on [P, size] tiles and [P, 1] columns (comparisons against a column broadcast on the free axis)."""

    def __init__(self, em: LoopNestBuilder):
        self.em = em

    def bin(self, op: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.em.insert(tile.BinaryOp(a, b, op, a.type)).result  # type: ignore[arg-type]

    def col(self, op: str, a: SSAValue, column: SSAValue) -> SSAValue:
        return self.em.insert(tile.BinaryScalarOp(a, op, a.type, column=column)).result  # type: ignore[arg-type]

    def select(self, p: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.em.insert(tile.SelectOp(p, a, b, a.type)).result  # type: ignore[arg-type]

    def fill(self, value: float, like: SSAValue) -> SSAValue:
        return self.em.insert(tile.FillOp(value, like.type)).result  # type: ignore[arg-type]

    def keys(self, x: SSAValue) -> tuple[SSAValue, SSAValue]:
        """(1 where NaN else 0, x with NaN replaced by 0): sorting on the pair puts NaN after every number."""
        nan = self.bin("not_equal", x, x)
        return nan, self.select(nan, self.fill(0.0, x), x)

    def iota(self, shape: tuple[int, ...], offset: Index, along_partitions: bool) -> SSAValue:
        steps, multiplier = ([0], 1) if along_partitions else ([1], 0)
        if isinstance(offset, int):
            return self.em.insert(tile.IotaOp(_f32(shape), steps, base=offset, channel_multiplier=multiplier)).result
        return self.em.insert(tile.IotaOp(_f32(shape), steps, channel_multiplier=multiplier, offset=offset)).result

    def reduce(self, x: SSAValue, partitions: int) -> SSAValue:
        return self.em.insert(tile.ReduceOp(x, "add", _f32((partitions, 1)))).result


def emit_sort(
    em: LoopNestBuilder,
    source: SSAValue,
    dim: int,
    descending: bool,
    count: int | None,
    values_type: Any,
) -> tuple[SSAValue, SSAValue]:
    """(values, int64 indices) of `source` sorted along `dim`; with `count`, only the first `count` (topk)."""
    shape = layout_of(source).shape or (1,)
    axis = normalize_dim(dim, len(shape))
    length = shape[axis]
    kept = length if count is None else count
    out_shape = tuple(kept if d == axis else e for d, e in enumerate(shape)) if layout_of(source).shape else ()
    values = alloc(em, out_shape, values_type)
    indices = alloc(em, out_shape, i64)
    ranks = alloc(em, shape, f32)
    # one set of row dims for all four: a strided source may merge fewer dims than the fresh results would
    (x_rows, rank_rows, value_rows, index_rows), row_dims = row_views(em, [source, ranks, values, indices], axis)
    x_columns, rank_columns = _columns(em, x_rows), _columns(em, rank_rows)
    value_columns, index_columns = _columns(em, value_rows), _columns(em, index_rows)
    later = "is_gt" if descending else "is_lt"  # j precedes i when key_j <later> key_i

    def rank_row(e: LoopNestBuilder, row: list[Index]) -> None:
        def i_tile(e2: LoopNestBuilder, i0: Index, p: int) -> None:
            ops_i = _Ops(e2)
            own = load(e2, x_columns, [*row, i0, 0], (p, 1), f32)
            own_nan, own_key = ops_i.keys(own)
            own_position = ops_i.iota((p, 1), i0, along_partitions=True)
            spread = _spread(e2, x_rows, p)

            def count_before(e3: LoopNestBuilder, j0: Index, size: int) -> SSAValue:
                ops = _Ops(e3)
                others = load(e3, spread, [*row, 0, j0], (p, size), f32)
                nan, key = ops.keys(others)
                position = ops.iota((p, size), j0, along_partitions=False)
                # the NaN flag decides first: numbers before NaN ascending (NaN before numbers descending)
                first = ops.col("is_gt" if descending else "is_lt", nan, own_nan)
                same_class = ops.col("is_equal", nan, own_nan)
                smaller = ops.col(later, key, own_key)
                tie = ops.bin(
                    "logical_and", ops.col("is_equal", key, own_key), ops.col("is_lt", position, own_position)
                )
                within = ops.bin("logical_and", same_class, ops.bin("logical_or", smaller, tie))
                return ops.reduce(ops.bin("logical_or", first, within), p)

            rank = e2.accumulate_tiles(
                length,
                CHUNK,
                count_before,
                lambda e3, j0, size, acc: _Ops(e3).bin("add", acc, count_before(e3, j0, size)),
            )
            store(e2, rank, rank_columns, [*row, i0, 0])

        e.for_tiles(length, PARTITION_TILE, i_tile)

    def place_row(e: LoopNestBuilder, row: list[Index]) -> None:
        def r_tile(e2: LoopNestBuilder, r0: Index, p: int) -> None:
            target = _Ops(e2).iota((p, 1), r0, along_partitions=True)
            spread_ranks, spread_values = _spread(e2, rank_rows, p), _spread(e2, x_rows, p)

            def pick(e3: LoopNestBuilder, i0: Index, size: int) -> list[SSAValue]:
                ops = _Ops(e3)
                ranks_tile = load(e3, spread_ranks, [*row, 0, i0], (p, size), f32)
                values_tile = load(e3, spread_values, [*row, 0, i0], (p, size), f32)
                hit = ops.col("is_equal", ranks_tile, target)
                zeros = ops.fill(0.0, values_tile)
                position = ops.iota((p, size), i0, along_partitions=False)
                return [
                    ops.reduce(ops.select(hit, values_tile, zeros), p),
                    ops.reduce(ops.select(hit, position, zeros), p),
                ]

            def combine(e3: LoopNestBuilder, i0: Index, size: int, acc: list[SSAValue]) -> list[SSAValue]:
                ops = _Ops(e3)
                value, index = pick(e3, i0, size)
                return [ops.bin("add", acc[0], value), ops.bin("add", acc[1], index)]

            value, index = e2.accumulate_tile_values(length, CHUNK, pick, combine)
            store(e2, to_sbuf(e2, value, values_type), value_columns, [*row, r0, 0])
            store(e2, to_sbuf(e2, index, i64), index_columns, [*row, r0, 0])

        e.for_tiles(kept, PARTITION_TILE, r_tile)

    em.for_each_index(row_dims, rank_row)
    em.for_each_index(row_dims, place_row)
    return values, indices


def _sort(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    values, indices = emit_sort(
        em, args["self"], int(args.get("dim", -1)), bool(args.get("descending", False)), None, result_element_type(op)
    )
    return [values, indices]


def _topk(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    k = int(args["k"])
    dim = int(args.get("dim", -1))
    shape = layout_of(args["self"]).shape
    if shape and not 0 <= k <= shape[normalize_dim(dim, len(shape))]:
        raise ValueError(f"k = {k} is out of range for a dimension of {shape[normalize_dim(dim, len(shape))]}")
    # sorted=False leaves the order to the implementation: this one is always sorted
    values, indices = emit_sort(em, args["self"], dim, bool(args.get("largest", True)), k, result_element_type(op))
    assert result_shape(op) == layout_of(values).shape
    return [values, indices]


def legal(op: Operation) -> str | None:
    """Sorts lower along any dimension; topk takes at most the dimension's length."""
    args = arguments_of(op)
    if (problem := dims_out_of_range(op)) is not None:
        return problem
    if op.name == "torch.aten.topk":
        shape, k = tensor_shape(args["self"]), int(args["k"])
        length = shape[normalize_dim(int(args.get("dim", -1)), len(shape))] if shape else 1
        if shape and not 0 <= k <= length:
            return f"k = {k} is out of range for a dimension of {length}"
    return None


SORT_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.sort": _sort,
    "torch.aten.sort.stable": _sort,
    "torch.aten.topk": _topk,
}
