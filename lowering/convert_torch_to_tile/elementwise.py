"""Elementwise lowerings: one loop nest over the broadcast output, one tile computation per iteration.

The output and every (broadcast) operand are re-viewed in one canonical iteration space: dimensions that are
contiguous in all of them are merged, the second-to-last dimension becomes the partition axis (tiles of 128),
the last the free axis (tiles of 2048; a nest of two such tiles and nothing else runs as four equal ones,
`SHORT_NEST_TILES`), and any leading dimensions become loops. A 1-d space is split into [P, n / P] when n has a
divisor P <= 128 so that all lanes work. Broadcast operands keep stride 0 in their views, so broadcasting never
copies; where one keeps a short leading dimension from merging, the space may be split back at the output's last
dimension to fill more lanes, when the cost model's rules say that is faster (`lane_filling_tiling`). An operand
whose contiguous dimension lies on the partitions (a permuted view) is loaded as blocks of rows transposed on
TensorE where the cost model finds that faster than its one-element DMA chunks (`transposes_on_chip`); its nest
keeps the plain tiles.

In a program compiled for a size bucket, an op whose result has dimensions bounded by the call's sizes
(`neuron.size_bounds`) keeps those dimensions apart in the iteration space, and the nest runs only their real
extent: a bounded loop dimension runs the call's trips, a bounded partition dimension ceil(n / 128) row tiles
(`bounded_space`). Rows beyond the bound are padding and stay unwritten (the size buckets never read padding as
real data). A bounded free dimension of 2 to `COLUMN_VARIANTS` whole 128-column blocks (the key columns of a
`[b, 1, s, s]` mask) runs in one tile of the call's blocks: the tile loop is emitted once per width `128 j`,
each copy guarded by a loop of one trip when the call has `j` blocks and of none otherwise (`width_trips`),
since an access pattern's extents are immediates; other bounded free dimensions run their whole extent.

Each ATen op is a small computation on the loaded tiles (`TileMath`), with the engine each step naturally runs
on: ScalarE activations (with their free scale and bias) for transcendental functions, VectorE for arithmetic,
comparisons and selects, GpSimdE for exact integer arithmetic and the division family (`tile.kernel`).
Dtypes follow PyTorch: the importer gives every result its promoted type; float intermediates are fp32 and only
the last step rounds to the result type; when the result and every operand are integers (or bools) the
arithmetic is exact integer arithmetic on GpSimdE: 32-bit, or 64-bit when a tensor is int64 (GpSimdE's cores run
64-bit integers in software, at twice the cost), wrapping as PyTorch's integers do. An fp32 division by a
number is GpSimdE's IEEE divide unless the number's reciprocal is exact (a power of two): multiplying by a rounded
reciprocal misrounds a fixed share of the quotients, all in one direction, a bias that sums of quotients keep.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    Float8E4M3FNType,
    IndexType,
    IntegerType,
    MemRefType,
    StringAttr,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.dialects.torch import SIZE_BOUNDS_ATTR
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    FREE_TILE,
    PARTITION_TILE,
    Lowering,
    alloc,
    arguments_of,
    element_type_of,
    emitter_target,
    layout_of,
    load,
    memref_type_of,
    result_element_type,
    result_shape,
    view,
)
from neuron_mlir.lowering.layout import Layout, collapse
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.dtypes import FLOAT_DTYPES, itemsize, numpy_dtype
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.program import row_major_strides

# compute(emitter, operand tiles, result tile type) -> result tile (SBUF)
TileCompute = Callable[[LoopNestBuilder, list[SSAValue], TileType], SSAValue]


@dataclass(frozen=True)
class TilePosition:
    """Where a tile of the iteration space lies: its indices ([loops..., p0, f0]) and the output's strides."""

    indices: list[Index]
    strides: tuple[int, ...]

    def element_offsets(self, em: LoopNestBuilder, result: TileType, element_type: Attribute) -> SSAValue:
        """Each element's offset in the output (its flat index when the output is a fresh tensor): an iota
        whose base is the tile's offset, known at run time inside loops."""
        base: Index = 0
        for index, stride in zip(self.indices, self.strides, strict=True):
            base = em.add(base, em.mul(index, stride))
        tile_type = TileType(result.get_shape(), element_type, Memory.SBUF)
        steps, multiplier = [self.strides[-1]], self.strides[-2]
        if isinstance(base, int):
            return em.insert(tile.IotaOp(tile_type, steps, base=base, channel_multiplier=multiplier)).result
        return em.insert(tile.IotaOp(tile_type, steps, channel_multiplier=multiplier, offset=base)).result


# compute_at(emitter, operand tiles, result tile type, position) -> result tile (SBUF)
PositionedCompute = Callable[[LoopNestBuilder, list[SSAValue], TileType, TilePosition], SSAValue]


def lane_split(extent: int) -> int:
    """The largest divisor of `extent` that fits the partition axis."""
    for candidate in range(min(PARTITION_TILE, extent), 0, -1):
        if extent % candidate == 0:
            return candidate
    return 1


def iteration_space(shape: Sequence[int], layouts: Sequence[Layout]) -> tuple[tuple[int, ...], list[Layout]]:
    """Canonical [loops..., P, F] shape and each layout viewed in it (offsets kept)."""
    dims, strides = collapse(shape, [layout.strides for layout in layouts])
    canonical = [Layout(dims, s, layout.offset) for s, layout in zip(strides, layouts, strict=True)]
    if len(dims) == 0:
        canonical = [Layout((1, 1), (0, 0), layout.offset) for layout in layouts]
        return (1, 1), canonical
    if len(dims) == 1:
        lanes = lane_split(dims[0])
        canonical = [layout.split_dim(0, lanes) for layout in canonical]
        return canonical[0].shape, canonical
    return dims, canonical


def size_bounds(em: LoopNestBuilder, op: Operation) -> tuple[SSAValue | None, ...] | None:
    """Per dimension of `op`'s first result, the size argument bounding its real extent (`SIZE_BOUNDS_ATTR`), or
    None when no dimension has one."""
    names = op.attributes.get(SIZE_BOUNDS_ATTR)
    if em.context is None or not isinstance(names, ArrayAttr):
        return None
    arguments = em.context.size_arguments
    bounds = tuple(arguments.get(n.data) if isinstance(n, StringAttr) and n.data else None for n in names.data)
    return bounds if any(b is not None for b in bounds) else None


def size_factors(em: LoopNestBuilder, op: Operation, dim: int) -> list[tuple[SSAValue | None, int]] | None:
    """The factors dimension `dim` of `op`'s first result is merged from, major to minor, when
    `SIZE_BOUNDS_ATTR` names them (`"s0*s1"`, `"s0*16"`): each a size argument with its extent in the bucket, or
    None with a static extent. None when the dimension names no merged factors."""
    names = op.attributes.get(SIZE_BOUNDS_ATTR)
    if em.context is None or not isinstance(names, ArrayAttr) or not -len(names.data) <= dim < len(names.data):
        return None
    entry = names.data[dim]
    if not isinstance(entry, StringAttr) or "*" not in entry.data:
        return None
    factors: list[tuple[SSAValue | None, int]] = []
    for name in entry.data.split("*"):
        if name.isdigit():
            factors.append((None, int(name)))
        elif name in em.context.size_arguments:
            factors.append((em.context.size_arguments[name], em.context.size_extents[name]))
        else:
            return None
    return factors


def bounded_space(
    shape: Sequence[int],
    layouts: Sequence[Layout],
    bounds: Sequence[SSAValue | None],
    merged_tile: int | None = None,
) -> tuple[tuple[int, ...], list[Layout], dict[int, SSAValue]] | None:
    """A canonical [loops..., P, F] space in which each bounded dimension stays a dimension of its own, with the
    layouts viewed in it and the bounded dimensions whose trips can follow the call (space index -> bound): a
    loop dimension, or the partition dimension when its extent is a multiple of the partition tile (so that each
    row tile it starts lies inside the bucket). None when none can, or when the free axis would be narrow (tiles
    of a few elements would cost more in fixed DMA costs than the trips save) and narrower than `merged_tile`,
    the free size the op's tiles have when it runs merged (its tiles then stay as they are, and only the trips
    change): the op then runs its whole extent, merged as usual. Tiles of at least `BLOCK_SIDE` rows and columns
    under a loop that follows the call are blocks, not narrow rows, and stay as they are; so do such blocks when
    no dimension can follow the call but the merged tiles would differ (a batch of one's [1, 1, 64, 64] mask):
    the space then runs whole, with no dimension following the call, tiled as its neighbours are."""
    if len(bounds) != len(shape):
        return None
    # segments of consecutive dimensions that may merge: each bounded dimension is one of its own
    segments: list[tuple[int, int, SSAValue | None]] = []
    start = 0
    for dim, bound in enumerate(bounds):
        if bound is not None and shape[dim] > 1:
            if start < dim:
                segments.append((start, dim, None))
            segments.append((dim, dim + 1, bound))
            start = dim + 1
    if start < len(shape):
        segments.append((start, len(shape), None))
    dims: list[int] = []
    strides: list[list[int]] = [[] for _ in layouts]
    bounded: dict[int, SSAValue] = {}
    for first, end, bound in segments:
        merged, merged_strides = collapse(shape[first:end], [layout.strides[first:end] for layout in layouts])
        if bound is not None:
            bounded[len(dims)] = bound
        dims.extend(merged)
        for mine, more in zip(strides, merged_strides, strict=True):
            mine.extend(more)
    rank = len(dims)
    dynamic = {d: b for d, b in bounded.items() if d < rank - 2 or (d >= rank - 2 and _whole_blocks(dims[d], d - rank))}
    if rank < 2:
        return None
    blocks = min(dims[-2:]) >= BLOCK_SIDE and (not dynamic or any(d < rank - 2 for d in dynamic))
    if not dynamic and not (blocks and bounded and dims[-1] != merged_tile):
        return None
    if dims[-1] < min(NARROW_FREE, merged_tile or NARROW_FREE) and not blocks:
        return None
    canonical = [Layout(tuple(dims), tuple(s), layout.offset) for s, layout in zip(strides, layouts, strict=True)]
    return tuple(dims), canonical, dynamic


# The least rows and columns of a tile under a loop over the call's batches for the bounded space to be kept
# although its free axis is narrow: a lower bucket's [b, 1, 64, 64] attention mask, whose comparisons of
# broadcast positions can only tile it so (a batch per trip), runs its `&`s and `where`s over the same [64, 64]
# blocks instead of merged [128, 128] tiles of the whole bucket, so tile-fuse-loops chains them on chip (and a
# batch of one's mask, [64, 64] blocks in straight-line code, forwards them).
BLOCK_SIDE = 64


# The most 128-column blocks a bounded free dimension may have for its tile loop to be emitted once per width:
# each width is a copy of the loop's body, and the guarded copies of short row loops multiply them.
COLUMN_VARIANTS = 4


def _whole_blocks(extent: int, from_end: int) -> bool:
    """Whether a bounded dimension of a canonical space can follow the call: the partition dimension (-2) when
    every row tile it starts lies inside the bucket, the free dimension (-1) when it is 2 to COLUMN_VARIANTS
    whole 128-column blocks (`width_trips`)."""
    blocks, rest = divmod(extent, PARTITION_TILE)
    return not rest and (from_end == -2 or 1 < blocks <= COLUMN_VARIANTS)


def width_trips(em: LoopNestBuilder, bound: SSAValue, blocks: int) -> list[SSAValue]:
    """For j = 1..`blocks`, the trips of a loop that runs once when ceil(bound / 128) is j and never otherwise,
    computed once at the function's top: the call's count c lies in 1..blocks, so `[c >= j]` is
    `(c + blocks - j) // blocks` and the trips are `[c >= j] - [c >= j + 1]` (index arithmetic only)."""
    key = (bound, blocks)
    cache = em.context.size_widths if em.context is not None else {}
    if key not in cache:
        count = bounded_tiles(em, bound, PARTITION_TILE)
        ops: list[Operation] = []
        at_least: list[SSAValue | None] = [None, None]  # [c >= 1] is 1
        for j in range(2, blocks + 1):
            shifted = count
            if j < blocks:
                add = arith.AddiOp(count, em.index(blocks - j))
                ops.append(add)
                shifted = add.result
            at = arith.FloorDivSIOp(shifted, em.index(blocks))
            ops.append(at)
            at_least.append(at.result)
        at_least.append(None)  # [c >= blocks + 1] is 0
        trips: list[SSAValue] = []
        for j in range(1, blocks + 1):
            this, beyond = at_least[j], at_least[j + 1]
            if beyond is None:
                assert this is not None
                trips.append(this)
                continue
            less = arith.SubiOp(this if this is not None else em.index(1), beyond)
            ops.append(less)
            trips.append(less.result)
        _at_top(em, ops, count)
        cache[key] = trips
    return cache[key]


def bounded_upper(em: LoopNestBuilder, bound: SSAValue, tile: int, rounds: int = 1) -> SSAValue:
    """ceil(bound / tile) * tile: where tiles of `tile` covering [0, bound) end; with `rounds`, where the whole
    rounds of `rounds` such tiles end (the trips a loop of `rounds` tiles per trip runs before the tiles left).
    Computed once per function, at its top (after the index constants), so that nests bounded alike have the
    same bound and tile-fuse-loops fuses them."""
    if tile == 1 and rounds == 1:
        return bound
    key = (bound, tile, rounds)
    cache = em.context.size_uppers if em.context is not None else {}
    if key not in cache:
        dividend: SSAValue
        if rounds == 1:
            rounded = arith.AddiOp(bound, em.index(tile - 1))
            # after the bound's own computation when it has one (`real_prefix`)
            _at_top(em, [rounded], bound if isinstance(bound.owner, Operation) else None)
            dividend = rounded.result
        else:  # floor(ceil(bound / tile) / rounds) rounds of tiles
            dividend = bounded_upper(em, bound, tile)
        rounds_done = arith.FloorDivSIOp(dividend, em.index(tile * rounds))
        upper = arith.MuliOp(rounds_done.result, em.index(tile * rounds))
        _at_top(em, [rounds_done, upper], dividend)
        cache[key] = upper.result
    return cache[key]


def bounded_tiles(em: LoopNestBuilder, bound: SSAValue, tile: int) -> SSAValue:
    """ceil(bound / tile): how many tiles of `tile` cover [0, bound), computed once at the function's top (the
    trip count of a loop over tile indices)."""
    key = (bound, tile, 0)
    cache = em.context.size_uppers if em.context is not None else {}
    if key not in cache:
        upper = bounded_upper(em, bound, tile)
        count = arith.FloorDivSIOp(upper, em.index(tile))
        _at_top(em, [count], upper)
        cache[key] = count.result
    return cache[key]


def real_prefix(em: LoopNestBuilder, factors: Sequence[tuple[SSAValue | None, int]]) -> SSAValue:
    """One past the last real element of a dimension merged from `factors` (major to minor: a size argument and
    its extent in the bucket, or None for a static extent, real throughout): `1 + sum((f_i - 1) * stride_i)`. At
    the bucket's sizes element `i*S + j` of `[b, s] -> [b*s]` is real iff `i < b` and `j < s`, so every element at
    or past `(b - 1) * S + s` is padding, while some below it are too (the rows `s..S` of each batch but the
    last). A nest whose tiles of a merged dimension are wider than its minor factor (`[4*64]` rows in tiles of
    128) can still run only the tiles that start below it. Computed once per function, at its top."""
    key = tuple(factors)
    cache = em.context.size_prefixes if em.context is not None else {}
    if key not in cache:
        ops: list[Operation] = []
        total: SSAValue | None = None
        constant, stride = 1, 1
        for bound, extent in reversed(factors):
            if bound is None:
                constant += (extent - 1) * stride
            else:
                less = arith.SubiOp(bound, em.index(1))
                term: Operation = less
                if stride != 1:
                    term = arith.MuliOp(less.result, em.index(stride))
                    ops.append(less)
                ops.append(term)
                if total is not None:
                    summed = arith.AddiOp(total, term.results[0])
                    ops.append(summed)
                    total = summed.result
                else:
                    total = term.results[0]
            stride *= extent
        assert total is not None, "a merged dimension with no size argument among its factors"
        end = arith.AddiOp(total, em.index(constant))
        ops.append(end)
        _at_top(em, ops, None)
        cache[key] = end.result
    return cache[key]


def _at_top(em: LoopNestBuilder, ops: list[Operation], after: SSAValue | None) -> None:
    """Insert `ops` into the function's top block: right after `after`'s definition, or before its first op that
    is not an index constant."""
    block = em.constant_block
    anchor = next((op for op in block.ops if not isinstance(op, arith.ConstantOp)), None)
    if after is not None and isinstance(after.owner, Operation):
        anchor = after.owner.next_op
    for op in ops:
        op.location = em.location
        if anchor is None:
            block.add_op(op)
        else:
            block.insert_op_before(op, anchor)


def bounded_loop(
    em: LoopNestBuilder, bound: SSAValue, tile: int, body: Callable[[LoopNestBuilder, Index, int], None]
) -> None:
    """`body(emitter, offset, tile)` for the tiles of `tile` that start below `bound` (a size argument)."""
    block = Block(arg_types=[IndexType()])
    em.insert(scf.ForOp(em.index(0), bounded_upper(em, bound, tile), em.index(tile), [], block))
    inner = em.nested(block)
    body(inner, block.args[0], tile)
    inner.insert(scf.YieldOp())


@dataclass(frozen=True)
class Tiling:
    """Which dimensions of a canonical iteration space a tile covers: `partition` goes on the partition axis
    (tiles of 128), `free` (increasing, ending with the last dimension) make up the free axes, and the other
    dimensions are loops, in order."""

    space: tuple[int, ...]
    partition: int
    free: tuple[int, ...]

    @property
    def loops(self) -> tuple[int, ...]:
        return tuple(d for d in range(len(self.space)) if d != self.partition and d not in self.free)

    @property
    def tile_dims(self) -> tuple[int, ...]:
        return (self.partition, *self.free)


# A tile whose free axis holds fewer elements than this gathers more dimensions into it: each DMA has a fixed cost
# of about 2 us, so [128, 64] tiles of a permuted or sliced tensor would spend most of their time on it.
NARROW_FREE = FREE_TILE // 4

# Tiles of a nest that would be two along its free axis and nothing else (one partition tile, no loop): such a
# nest is its chain's latency, the first tile's load before any compute and the last tile's store after it, and
# with two tiles each is half the nest. In four equal tiles the loads, the compute and the stores overlap in a
# pipeline whose fill and drain are a quarter of it (a ViT-B/16 step's residual gradient sums, [394, 768] as
# [128, 2364]: the step's backward 332.7 -> 329.7 us; three tiles 330.5, six 329.5).
SHORT_NEST_TILES = 4

# Columns of one block transposed on TensorE (`load_transposed`): the block's partitions before the transpose.
TRANSPOSE_COLUMNS = PARTITION_TILE


def wide_tiling(space: Sequence[int], layouts: Sequence[Layout], max_free_dims: int) -> tuple[Tiling, list[Layout]]:
    """The tiling of a canonical [loops..., P, F] space, with a multi-dimensional free axis when F is narrow.

    Dimensions that strides cannot merge (a head axis permuted against the sequence, the half of a row a slice
    keeps) leave a short last dimension. Then the partition axis is the second-to-last dimension when it fills
    the 128 lanes (else the longest other one), whole loop dimensions join the free axis from the innermost out
    while the free size stays within FREE_TILE, and a partition dimension longer than 128 lanes gives its inner
    factor too (several consecutive rows per partition). A DMA then walks the whole tile with one access pattern,
    so the free axis takes at most `max_free_dims` dimensions (the target's access patterns).
    """
    rank = len(space)
    last = rank - 1
    plain = Tiling(tuple(space), rank - 2, (last,))
    if rank < 2 or space[last] >= NARROW_FREE or any(_broadcast_along_free(layout) for layout in layouts):
        return plain, list(layouts)
    candidates = range(rank - 1)
    partition = rank - 2
    if space[partition] < PARTITION_TILE:
        partition = max(candidates, key=lambda d: (min(space[d], PARTITION_TILE), d))
    budget = FREE_TILE // space[last]
    free = [last]
    for dim in range(rank - 2, -1, -1):
        if dim != partition and space[dim] <= budget and len(free) < max_free_dims:
            free.append(dim)
            budget //= space[dim]
    original = layouts = list(layouts)
    space = tuple(space)
    rows_per_lane = _rows_per_lane(space[partition], budget)
    if rows_per_lane > 1 and len(free) < max_free_dims:
        layouts = [layout.split_dim(partition, space[partition] // rows_per_lane) for layout in layouts]
        space = layouts[0].shape
        free = [d + 1 if d > partition else d for d in free] + [partition + 1]
    tiling = Tiling(space, partition, tuple(sorted(free)))
    if _tile_elements(tiling) <= _tile_elements(plain):
        return plain, list(original)
    return tiling, layouts


def lane_filling_tiling(
    shape: Sequence[int],
    space: Sequence[int],
    layouts: Sequence[Layout],
    dtypes: Sequence[str],
    target: Target,
) -> tuple[Tiling, list[Layout]]:
    """`wide_tiling` of a canonical space, or of the space with its last dimension split back at the output's
    last dimension when the first leaves lanes empty and the second fills more of them in less time
    (`_nest_ns`; `dtypes` are the runtime dtypes of the output and operands, in the order of `layouts`).

    A broadcast operand can keep a short leading dimension from merging with the rest: `[b, s, 32] + [1, s, 32]`
    is the space `[b, s * 32]`, whose plain tiles have b partitions and a free axis of up to FREE_TILE elements,
    each instruction streaming that many elements on b lanes. Split as `[b, s, 32]`, s goes on the partitions
    and b joins the free axis: tiles of `[s, b x 32]`, the same elements in a fraction of the instruction's time.
    But every operand then moves in runs of the last dimension (32 elements) instead of the plain tiles' long
    rows, at a fraction of the DMA rate: where the operands are large and the lanes already many (a rotary
    product of 32 heads, `[32, 256, 64] * [1, 256, 64]` on 32 lanes), the loads cost more than the lanes save."""
    tiling, canonical = wide_tiling(space, layouts, target.max_free_dims)
    inner = next((extent for extent in reversed(shape) if extent != 1), None)
    rank = len(space)
    if (
        rank < 2
        or min(tiling.space[tiling.partition], PARTITION_TILE) == PARTITION_TILE
        or inner is None
        or space[-1] == inner
        or space[-1] % inner
    ):
        return tiling, canonical
    split = [layout.split_dim(rank - 1, space[-1] // inner) for layout in layouts]
    other, other_layouts = wide_tiling(split[0].shape, split, target.max_free_dims)
    lanes = min(other.space[other.partition], PARTITION_TILE)
    if lanes > min(tiling.space[tiling.partition], PARTITION_TILE) and _nest_ns(
        other, other_layouts, dtypes, target
    ) < _nest_ns(tiling, canonical, dtypes, target):
        return other, other_layouts
    return tiling, canonical


def _nest_ns(tiling: Tiling, layouts: Sequence[Layout], dtypes: Sequence[str], target: Target) -> float:
    """An estimate of an elementwise nest's time under `tiling` (`layouts`: the output's, then the operands'),
    by the cost model's rules: each tile's transfers (a store, and a load per operand; a column broadcast along
    the free axis loads [P, 1]) and one VectorE pass over its streamed operands. The transfers run on every
    queue at once, so they take the longest of their summed times spread over the queues, their bytes at the
    engines' aggregate rate scaled by the efficiency of their runs, and their HBM bytes at HBM bandwidth; the
    compute overlaps them. The pass stands for the nest's computation, whose instructions are not known here:
    only the comparison of two tilings of the same nest matters."""
    space = tiling.space
    partitions = min(space[tiling.partition], PARTITION_TILE)
    widths = [space[d] for d in tiling.free[:-1]] + [min(space[-1], FREE_TILE)]
    tiles = math.prod(space[d] for d in tiling.loops)
    tiles *= -(-space[tiling.partition] // PARTITION_TILE) * -(-space[-1] // FREE_TILE)
    alone = engine_ns = hbm_ns = 0.0
    streamed: list[cost_model.OperandShape] = []
    for index, (layout, dtype) in enumerate(zip(layouts, dtypes, strict=True)):
        column = index > 0 and _broadcast_column(layout, tiling)
        free = [1] if column else widths
        strides = [layout.strides[tiling.partition]] + [0 if column else layout.strides[d] for d in tiling.free]
        hbm = cost_model.OperandShape(Memory.HBM, dtype, 0, (partitions, *free), tuple(strides))
        sbuf = cost_model.OperandShape(Memory.SBUF, dtype, partitions, tuple(free), row_major_strides(free))
        dma = cost_model.dma_cost(hbm, sbuf, target)
        alone += tiles * dma.alone_ns(target)
        engine_ns += tiles * dma.bytes / (target.dma_aggregate_bytes_per_ns * dma.efficiency)
        hbm_ns += tiles * dma.hbm_bytes / target.hbm_bandwidth_gbps
        if index > 0 and not column:
            streamed.append(sbuf)
    result = cost_model.OperandShape(Memory.SBUF, dtypes[0], partitions, tuple(widths), row_major_strides(widths))
    if len(streamed) >= 2:
        operands = {"in0": streamed[0], "in1": streamed[1], "dst": result}
        opcode = "tensor_tensor"
    else:
        operands = {"src": streamed[0] if streamed else result, "dst": result}
        opcode = "tensor_copy"
    compute = tiles * cost_model.compute_ns(opcode, Engine.VECTOR, operands, {}, target)
    return max(alone / target.dma_queues, engine_ns, hbm_ns, compute)


def _transfer_ns(dma: cost_model.DmaCost, count: int, target: Target) -> float:
    """`count` such transfers spread over the DMA queues, as `_nest_ns` prices a tile's: the longest of their
    queue time, their bytes at the engines' rate for their runs, and their HBM bytes at HBM bandwidth."""
    return count * max(
        dma.alone_ns(target) / target.dma_queues,
        dma.bytes / (target.dma_aggregate_bytes_per_ns * dma.efficiency),
        dma.hbm_bytes / target.hbm_bandwidth_gbps,
    )


def transposes_on_chip(layout: Layout, tiling: Tiling, dtype: str, target: Target) -> bool:
    """Whether an operand's tiles load faster as blocks of rows transposed on TensorE than as they are.

    An operand whose partition dimension is its contiguous one and whose free dimension is not (a permuted view:
    a convolution's [channels, positions] output read as [positions, channels]) loads each tile one element per
    descriptor, at a hundredth of the DMA engines' rate; 2-byte elements load so by DMA transpose instead
    (convert-tile-to-neuron). Loaded as [columns, rows] blocks, its contiguous dimension runs along each
    partition, and each block's TensorE transpose into PSUM and the copy out of it put the columns back on the
    free axis. Of the two, the cost model's faster for one full tile (`_transfer_ns`; the transposes and
    copies run on other engines beside the transfers). Only where TensorE transposes bit-exactly
    (`matmul_transpose_bit_exact`): an identity matmul would spread a NaN over its row."""
    if len(tiling.free) != 1 or dtype not in FLOAT_DTYPES or not target.matmul_transpose_bit_exact:
        return False
    space, partition = tiling.space, tiling.partition
    free_stride = layout.strides[-1]
    if layout.strides[partition] != 1 or free_stride in (0, 1) or space[partition] == 1 or space[-1] == 1:
        return False
    p, f = min(space[partition], PARTITION_TILE), min(space[-1], FREE_TILE)
    sbuf = cost_model.OperandShape(Memory.SBUF, dtype, p, (f,), (1,))
    hbm = cost_model.OperandShape(Memory.HBM, dtype, 0, (p, f), (1, free_stride))
    if itemsize(dtype) == 2 and target.dma_transpose_hbm_efficiency:
        direct = cost_model.dma_transpose_cost(hbm, sbuf, target)
    else:
        direct = cost_model.dma_cost(hbm, sbuf, target)
    blocks, c = -(-f // TRANSPOSE_COLUMNS), min(f, TRANSPOSE_COLUMNS)
    rows = cost_model.OperandShape(Memory.SBUF, dtype, c, (p,), (1,))
    block_dma = cost_model.dma_cost(
        cost_model.OperandShape(Memory.HBM, dtype, 0, (c, p), (free_stride, 1)), rows, target
    )
    block = cost_model.OperandShape(Memory.PSUM, dtype, p, (c,), (1,))
    identity = cost_model.OperandShape(Memory.SBUF, dtype, c, (c,), (1,))
    transpose = cost_model.compute_ns(
        "nc_matmul", Engine.TENSOR, {"moving": rows, "stationary": identity, "dst": block}, {"is_transpose": 1}, target
    )
    evacuation = {"src": block, "dst": cost_model.OperandShape(Memory.SBUF, dtype, p, (c,), (1,))}
    copy = cost_model.compute_ns("tensor_copy", Engine.VECTOR, evacuation, {}, target)
    on_chip = max(_transfer_ns(block_dma, blocks, target), blocks * transpose, blocks * copy)
    return on_chip < _transfer_ns(direct, 1, target)


def load_transposed(
    em: LoopNestBuilder, tensor: SSAValue, indices: Sequence[Index], shape: Sequence[int], tiling: Tiling
) -> SSAValue:
    """The [p, f] tile of `tensor` at `indices` of the plain `tiling`, loaded as [columns, p] blocks (the free
    dimension on partitions, each partition a contiguous run), each transposed on TensorE and copied into its
    columns (`transposes_on_chip`)."""
    p, f = shape
    free_dim = len(tiling.space) - 1
    element_type = element_type_of(tensor)
    whole = em.insert(tile.EmptyOp(TileType((p, f), element_type, Memory.SBUF))).result
    for c0 in range(0, f, TRANSPOSE_COLUMNS):
        columns = min(TRANSPOSE_COLUMNS, f - c0)
        at = list(indices)
        at[free_dim] = em.add(at[free_dim], c0)
        rows = load(em, tensor, at, (columns, p), dims=(free_dim, tiling.partition))
        block = em.insert(tile.TransposeOp(rows)).result
        whole = em.insert(tile.InsertOp(block, whole, [em.index(c0)])).result
    return whole


def _broadcast_along_free(layout: Layout) -> bool:
    """Whether an operand repeats each row (or one value) along the last dimension. The plain tiling loads such a
    column once per partition and spreads it on chip; a multi-dimensional tile would have to fetch it by DMA one
    element per descriptor, which costs far more than the narrow tiles save (a softmax-backward row scale)."""
    return len(layout.shape) >= 2 and layout.strides[-1] == 0 and layout.shape[-1] > 1


def _tile_elements(tiling: Tiling) -> int:
    return min(tiling.space[tiling.partition], PARTITION_TILE) * min(
        math.prod(tiling.space[d] for d in tiling.free), FREE_TILE
    )


def _rows_per_lane(extent: int, budget: int) -> int:
    """The largest divisor g <= budget of a partition dimension's extent that leaves at least 128 groups."""
    for g in range(min(budget, extent // PARTITION_TILE), 1, -1):
        if extent % g == 0:
            return g
    return 1


def emit_elementwise(
    em: LoopNestBuilder,
    out_shape: Sequence[int],
    out_element_type: Attribute,
    operands: Sequence[SSAValue],
    compute: TileCompute | None,
    out: SSAValue | None = None,
    compute_at: PositionedCompute | None = None,
    wide: bool = False,
    bounds: Sequence[SSAValue | None] | None = None,
) -> SSAValue:
    """Allocate (or use) `out`, and fill it with `compute` applied tile by tile to the broadcast operands
    (or `compute_at`, which also learns where each tile lies). With `wide` (a `compute` that works on tiles of
    any rank), a narrow free axis takes in more dimensions (`wide_tiling`). `bounds` (per output dimension, a
    size argument or None) lets the nest write only the rows below them (`bounded_space`)."""
    out_shape = tuple(out_shape)
    if out is None:
        out = alloc(em, out_shape, out_element_type)
    layouts = [layout_of(out)] + [layout_of(value).broadcast_to(out_shape) for value in operands]
    bounded = None
    if bounds is not None:
        # the free size of the merged tiles: the last dimension of the merged space, unless a wide tiling would
        # gather more into it
        merged_space, merged_layouts = iteration_space(out_shape, layouts)
        merged_tile = merged_space[-1] if merged_space else None
        if wide and compute_at is None and merged_tile is not None:
            tiling, _ = wide_tiling(merged_space, merged_layouts, emitter_target(em).max_free_dims)
            merged_tile = math.prod(tiling.space[d] for d in tiling.free) if len(tiling.free) > 1 else merged_tile
        bounded = bounded_space(out_shape, layouts, bounds, merged_tile)
    dynamic: dict[int, SSAValue] = {}
    if bounded is not None:
        space, canonical, dynamic = bounded
    else:
        space, canonical = iteration_space(out_shape, layouts)
    target = emitter_target(em)
    dtypes = [runtime_dtype_name(memref_type_of(value).element_type) for value in [out, *operands]]
    tiling = Tiling(tuple(space), len(space) - 2, (len(space) - 1,))
    # An operand transposed on chip keeps the plain tiles, whose columns its blocks fill: a wider tile would load
    # it one element per descriptor again.
    transposing = any(
        transposes_on_chip(layout, tiling, dtype, target)
        for layout, dtype in zip(canonical[1:], dtypes[1:], strict=True)
    )
    if wide and compute_at is None and bounded is None and not transposing:
        tiling, canonical = lane_filling_tiling(out_shape, space, canonical, dtypes, target)
    space = tiling.space
    views = [view(em, value, layout) for value, layout in zip([out, *operands], canonical, strict=True)]
    out_view, operand_views = views[0], views[1:]
    partitions, free = space[tiling.partition], space[-1]
    whole_free = [space[d] for d in tiling.free[:-1]]
    trailing = tuple(range(len(space) - len(tiling.tile_dims), len(space)))
    plain = tiling.tile_dims == trailing
    by_column = [_broadcast_column(layout, tiling) for layout in canonical[1:]]
    on_chip = [
        plain and transposes_on_chip(layout, tiling, dtype, target)
        for layout, dtype in zip(canonical[1:], dtypes[1:], strict=True)
    ]
    free_dim = len(space) - 1
    free_tile = FREE_TILE
    if (
        plain
        and not dynamic
        and not tiling.loops
        and partitions <= PARTITION_TILE
        and FREE_TILE < free <= 2 * FREE_TILE
    ):
        free_tile = -(-free // SHORT_NEST_TILES)

    def positions(loop_indices: list[Index], p0: Index, f0: Index) -> list[Index]:
        indices: list[Index] = [0] * len(space)
        for dim, index in zip(tiling.loops, loop_indices, strict=True):
            indices[dim] = index
        indices[tiling.partition] = p0
        indices[-1] = f0
        return indices

    def transfer_dims() -> tuple[int, ...] | None:
        return None if plain else tiling.tile_dims

    def tile_body(inner: LoopNestBuilder, loop_indices: list[Index]) -> None:
        def partition_body(em_p: LoopNestBuilder, p0: Index, p_size: int) -> None:
            columns = [
                load(em_p, v, positions(loop_indices, p0, 0), (p_size, 1)) if column else None
                for v, column in zip(operand_views, by_column, strict=True)
            ]

            def free_body(em_f: LoopNestBuilder, f0: Index, f_size: int) -> None:
                indices = positions(loop_indices, p0, f0)
                shape = (p_size, *whole_free, f_size)
                tiles = [
                    _spread(em_f, column, f_size)
                    if column is not None
                    else load_transposed(em_f, v, indices, shape, tiling)
                    if transposed
                    else load(em_f, v, indices, shape, dims=transfer_dims())
                    for v, column, transposed in zip(operand_views, columns, on_chip, strict=True)
                ]
                result_type = TileType(shape, out_element_type, Memory.SBUF)
                if compute_at is not None:
                    value = compute_at(em_f, tiles, result_type, TilePosition(indices, canonical[0].strides))
                else:
                    assert compute is not None
                    value = compute(em_f, tiles, result_type)
                em_f.insert(tile.StoreOp(value, out_view, [em_f.index(i) for i in indices], transfer_dims()))

            if free_dim not in dynamic:
                em_p.for_tiles(free, free_tile, free_body)
                return
            # one tile loop per width of the call's columns, each run only when the call has that many blocks
            blocks = free // PARTITION_TILE
            for j, trips in enumerate(width_trips(em_p, dynamic[free_dim], blocks), 1):
                block = Block(arg_types=[IndexType()])
                em_p.insert(scf.ForOp(em_p.index(0), trips, em_p.index(1), [], block))
                guarded = em_p.nested(block)
                guarded.for_tiles(j * PARTITION_TILE, FREE_TILE, free_body)
                guarded.insert(scf.YieldOp())

        if tiling.partition in dynamic:
            bounded_loop(inner, dynamic[tiling.partition], PARTITION_TILE, partition_body)
        else:
            inner.for_tiles(partitions, PARTITION_TILE, partition_body)

    if dynamic:
        loop_bounds = [dynamic.get(d, space[d]) for d in tiling.loops]
        bounded_nest(em, loop_bounds, [], tile_body)
    else:
        em.for_each_index([space[d] for d in tiling.loops], tile_body)
    return out


def bounded_nest(
    em: LoopNestBuilder,
    extents: list[int | SSAValue],
    indices: list[Index],
    body: Callable[[LoopNestBuilder, list[Index]], None],
) -> None:
    """`nest` whose extents may be size arguments (a loop running the call's trips)."""
    if not extents:
        body(em, indices)
        return
    extent = extents[0]
    if isinstance(extent, int):
        em.for_each(extent, lambda inner, i: bounded_nest(inner, extents[1:], [*indices, i], body))
    else:
        bounded_loop(em, extent, 1, lambda inner, i, _: bounded_nest(inner, extents[1:], [*indices, i], body))


def _broadcast_column(layout: Layout, tiling: Tiling) -> bool:
    """Whether an operand is a column broadcast along the (one-dimensional) free axis ([P, 1] values, free stride
    0: a float, a boolean mask, integer positions), or one value broadcast everywhere (a 0-d tensor:
    `where(mask, 0.0, -inf)`'s): loaded as one element per partition and spread on chip, instead of a DMA of one
    element per descriptor."""
    if len(tiling.free) != 1:
        return False
    return layout.strides[-1] == 0 and layout.shape[-1] > 1


def _spread(em: LoopNestBuilder, column: SSAValue, width: int) -> SSAValue:
    """The [P, 1] `column` repeated along `width` free elements (-0 + column: exact, signed zeros and NaN
    included, where +0 + -0 would be +0; an integer column adds in integer mode, exact at every width)."""
    source = column.type
    assert isinstance(source, TileType)
    wide = TileType((source.partitions, width), source.element_type, Memory.SBUF)
    zeros = em.insert(tile.FillOp(-0.0, wide)).result
    return em.insert(tile.BinaryScalarOp(zeros, "add", wide, column=column)).result


def copy_to(em: LoopNestBuilder, source: SSAValue, out: SSAValue | None = None) -> SSAValue:
    """A contiguous copy of `source` (or a copy into `out`)."""
    shape = layout_of(source).shape
    return emit_elementwise(em, shape, element_type_of(source), [source], lambda e, tiles, t: tiles[0], out, wide=True)


# ---- tile arithmetic -----------------------------------------------------------------------------------------


def transposed_in_memory(layout: Layout) -> bool:
    """Whether a tensor's last dimension (of more than one element) is strided while another is contiguous: a
    permuted view, such as a channels-last map seen as [N, C, H, W]."""
    dims = [(stride, extent) for stride, extent in zip(layout.strides, layout.shape, strict=True) if extent > 1]
    return bool(dims) and dims[-1][0] != 1 and any(stride == 1 for stride, _ in dims[:-1])


def contiguous_if_transposed(em: LoopNestBuilder, value: SSAValue) -> SSAValue:
    """`value`, or a contiguous copy of it where it is `transposed_in_memory`: for a lowering that would load its
    rows one element per descriptor, maybe more than once. The copy is one elementwise nest, whose tiles transpose
    on chip where that is faster (`transposes_on_chip`)."""
    return copy_to(em, value) if transposed_in_memory(layout_of(value)) else value


def is_integer_type(element_type: Attribute) -> bool:
    return isinstance(element_type, IntegerType)


def tile_is_integer(value: SSAValue) -> bool:
    assert isinstance(value.type, TileType)
    return is_integer_type(value.type.element_type)


class TileMath:
    """Tile arithmetic inside one compute callback, on tiles shaped like `result`.

    Intermediates are fp32 SBUF tiles (`exact` switches them to the result's integer type); each helper takes
    an optional `out` type, given for the step that produces the final result.
    """

    def __init__(self, em: LoopNestBuilder, result: TileType, exact: bool = False):
        self.em = em
        self.result = result
        self.inner = TileType(result.get_shape(), result.element_type if exact else f32, Memory.SBUF)

    def _type(self, out: TileType | None) -> TileType:
        return out if out is not None else self.inner

    def act(self, fn: str, x: SSAValue, scale: float = 1.0, bias: float = 0.0, out: TileType | None = None) -> SSAValue:
        """ScalarE: `fn(x * scale + bias)` in one instruction."""
        return self.em.insert(tile.UnaryOp(x, fn, self._type(out), scale=scale, bias_value=bias)).result

    def bin(self, op: str, a: SSAValue, b: SSAValue, out: TileType | None = None) -> SSAValue:
        return self.em.insert(tile.BinaryOp(a, b, op, self._type(out))).result

    def sc(self, op: str, x: SSAValue, scalar: float, out: TileType | None = None, reverse: bool = False) -> SSAValue:
        """`x <op> scalar` (or `scalar <op> x`) with an immediate."""
        return self.em.insert(tile.BinaryScalarOp(x, op, self._type(out), scalar=scalar, reverse=reverse)).result

    def select(self, predicate: SSAValue, a: SSAValue, b: SSAValue, out: TileType | None = None) -> SSAValue:
        return self.em.insert(tile.SelectOp(predicate, a, b, self._type(out))).result

    def fill(self, value: float, out: TileType | None = None) -> SSAValue:
        return self.em.insert(tile.FillOp(value, self._type(out))).result

    def copy(self, x: SSAValue, out: TileType | None = None) -> SSAValue:
        return self.em.insert(tile.CopyOp(x, self._type(out))).result

    def kernel(self, name: str, a: SSAValue, b: SSAValue, out: TileType | None = None) -> SSAValue:
        return self.em.insert(tile.KernelOp(a, name, self._type(out), b)).result

    def column(self, value: float, element_type: Attribute) -> SSAValue:
        """A [P, 1] column holding `value` (the per-partition scalar operand of GpSimdE kernels)."""
        shape = (self.result.partitions, 1)
        return self.em.insert(tile.FillOp(value, TileType(shape, element_type, Memory.SBUF))).result

    # compositions shared by several ops

    def isnan(self, x: SSAValue) -> SSAValue:
        """1 where x is NaN (the only value unequal to itself)."""
        return self.bin("not_equal", x, x)

    def where_nan(self, x: SSAValue, then: SSAValue, otherwise: SSAValue, out: TileType | None = None) -> SSAValue:
        return self.select(self.isnan(x), then, otherwise, out)

    def round_half_even(self, x: SSAValue, out: TileType | None = None) -> SSAValue:
        """Round to the nearest integer, ties to even: adding and removing 2^23 with x's sign puts the sum where
        fp32 has no fraction bits, so the add rounds exactly as IEEE does; |x| >= 2^23 (already integral), inf
        and NaN pass through. (One unsigned constant such as 1.5 * 2^23 would only serve |x| < 2^22, and fp32
        still has halves up to 2^23.)"""
        negative = self.sc("is_lt", x, 0.0)
        magic = self.sc("add", self.sc("multiply", negative, -2.0 * _INTEGRAL_FROM), _INTEGRAL_FROM)
        shifted = self.bin("subtract", self.bin("add", x, magic), magic)
        small = self.sc("is_lt", self.act("abs", x), _INTEGRAL_FROM)
        return self.select(small, shifted, x, out)

    def floor(self, x: SSAValue, out: TileType | None = None) -> SSAValue:
        rounded = self.round_half_even(x)
        return self.bin("subtract", rounded, self.bin("is_gt", rounded, x), out)

    def ceil(self, x: SSAValue, out: TileType | None = None) -> SSAValue:
        rounded = self.round_half_even(x)
        return self.bin("add", rounded, self.bin("is_lt", rounded, x), out)

    def trunc(self, x: SSAValue, out: TileType | None = None) -> SSAValue:
        return self.select(self.sc("is_lt", x, 0.0), self.ceil(x), self.floor(x), out)

    def sign(self, x: SSAValue, out: TileType | None = None) -> SSAValue:
        """-1, 0 or 1 (0 for NaN and both zeros, as torch.sign)."""
        return self.bin("subtract", self.sc("is_gt", x, 0.0), self.sc("is_lt", x, 0.0), out)

    def divide(self, a: SSAValue, b: SSAValue, out: TileType | None = None) -> SSAValue:
        """a / b as a times the ScalarE reciprocal of b (VectorE has no divide; within 2 ulp of IEEE)."""
        return self.bin("multiply", a, self.act("reciprocal", b), out)


_INTEGRAL_FROM = 8388608.0  # 2^23: every fp32 of this magnitude or more is an integer (or inf/NaN)


# ---- lowering helpers ----------------------------------------------------------------------------------------


def _sbuf(result: TileType, element_type: Attribute | None = None) -> TileType:
    return TileType(result.get_shape(), element_type or result.element_type, Memory.SBUF)


def elementwise(
    op: Operation, args: dict[str, Any], em: LoopNestBuilder, operands: Sequence[str], compute: TileCompute
) -> list[SSAValue]:
    """Lower `op` as `compute` over the named tensor operands (None operands are skipped)."""
    values = [args[name] for name in operands if args.get(name) is not None]
    bounds = size_bounds(em, op)
    return [emit_elementwise(em, result_shape(op), result_element_type(op), values, compute, wide=True, bounds=bounds)]


def _exact(tiles: Sequence[SSAValue], result: TileType) -> bool:
    """Integer result from integer operands: compute exactly (GpSimdE)."""
    return is_integer_type(result.element_type) and all(tile_is_integer(t) for t in tiles)


def _integral(value: object) -> bool:
    return isinstance(value, bool | int) or (isinstance(value, float) and value.is_integer())


def _number(value: object) -> float | int:
    """A Scalar argument as a Python number: integers stay ints, exact to int64's extremes (an immediate of
    integer elements is an i64), booleans become 0 or 1."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    return float(value)  # type: ignore[arg-type]


def in_tensor_dtype(value: object, tensor: SSAValue) -> float | int:
    """A Python scalar as PyTorch uses it against a float tensor: cast to the tensor's dtype (a bf16 or f16
    tensor compares with, adds and clamps to the scalar rounded to bf16/f16; fp32 immediates round anyway)."""
    number = _number(value)
    element_type = tensor.type.element_type if isinstance(tensor.type, TileType | MemRefType) else None
    if element_type is None or is_integer_type(element_type) or element_type == f32:
        return number
    dtype = numpy_dtype(runtime_dtype_name(element_type))
    with np.errstate(over="ignore"):  # a scalar beyond the dtype's range is its infinity, as ATen's cast makes it
        return float(np.array(number, dtype=np.float64).astype(np.float32).astype(dtype))


def _alpha_scaled(m: TileMath, value: SSAValue, alpha: object) -> SSAValue:
    if alpha is None or alpha == 1:
        return value
    return m.sc("multiply", value, _number(alpha))


# ---- arithmetic ------------------------------------------------------------------------------------------------


_COMMUTATIVE = frozenset({"add", "multiply", "max", "min"})


def _single_element_operand(op: Operation, args: dict[str, Any], alu_op: str, second: str) -> tuple[str, str] | None:
    """(the tensor operand's name, the single-element operand's name) when one float operand of a binary op holds
    one element and the other many, both of the result's dtype, and the op can take the single element as a
    per-partition scalar (commutative, or the scalar second)."""
    names = ("self", second)
    values = [value for value in (args.get(name) for name in names) if isinstance(value, SSAValue)]
    if len(values) != len(names) or len(op.results) != 1:
        return None
    result = result_element_type(op)
    if not isinstance(result, AnyFloat) or any(element_type_of(v) != result for v in values):
        return None
    sizes = [int(np.prod(layout_of(value).shape)) for value in values]
    for position in (1, 0):
        if sizes[position] == 1 and sizes[1 - position] > 1 and (position == 1 or alu_op in _COMMUTATIVE):
            return names[1 - position], names[position]
    return None


def _tensor_binary(alu_op: str, with_alpha: bool = False, reverse: bool = False, second: str = "other") -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        split = _single_element_operand(op, args, alu_op, second)
        if split is not None and not reverse and (not with_alpha or args.get("alpha") in (None, 1)):
            # A single-element operand (a scale) is a per-partition scalar column read once per tile, where a
            # broadcast tile would fetch it element by element.
            tensor_name, scalar_name = split
            scalar = args[scalar_name]
            column_view = view(em, scalar, Layout((PARTITION_TILE, 1), (0, 0), layout_of(scalar).offset))

            def scaled(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
                column = load(e, column_view, [0, 0], (result.partitions, 1))
                return e.insert(tile.BinaryScalarOp(tiles[0], alu_op, result, column=column)).result

            return elementwise(op, args, em, [tensor_name], scaled)

        def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            m = TileMath(e, result, _exact(tiles, result))
            lhs, rhs = (tiles[1], tiles[0]) if reverse else (tiles[0], tiles[1])
            rhs = _alpha_scaled(m, rhs, args.get("alpha")) if with_alpha else rhs
            return m.bin(alu_op, lhs, rhs, result)

        return elementwise(op, args, em, ["self", second], compute)

    return lower


def _scalar_binary(alu_op: str, argument: str = "other", with_alpha: bool = False, reverse: bool = False) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        scalar = in_tensor_dtype(args[argument], args["self"])
        if with_alpha and args.get("alpha") not in (None, 1):
            scalar = in_tensor_dtype(scalar * _number(args["alpha"]), args["self"])

        def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            m = TileMath(e, result)
            return m.sc(alu_op, tiles[0], scalar, result, reverse)

        return elementwise(op, args, em, ["self"], compute)

    return lower


def _div_tensor(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return elementwise(op, args, em, ["self", "other"], lambda e, t, r: TileMath(e, r).divide(t[0], t[1], r))


def _div_scalar(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> Sequence[SSAValue | None]:
    other = in_tensor_dtype(args["other"], args["self"])
    if result_element_type(op) == f32 and not _exact_reciprocal(other):
        # fp32 divides as IEEE does: multiplying by the rounded reciprocal misrounds a fixed share of the
        # quotients (a third of them for 3), all the same way, and a sum of many such quotients keeps the bias
        return _IEEE_SCALAR_DIVISION(em, op, args)
    # x / 0 is +-inf (NaN for 0 and NaN): multiplying by a signed infinity gives exactly that. 16-bit floats
    # multiply by the fp32 reciprocal as ATen's kernels do.
    inverse = 1.0 / other if other != 0 else math.copysign(math.inf, other)
    return elementwise(op, args, em, ["self"], lambda e, t, r: TileMath(e, r).sc("multiply", t[0], inverse, r))


def _exact_reciprocal(divisor: float | int) -> bool:
    """Whether x * (1 / divisor) is x / divisor for every fp32 x: the divisor (as fp32) is 0, infinite, NaN or a
    power of two whose reciprocal fp32 holds."""
    value = float(np.float32(divisor))
    if value == 0 or not math.isfinite(value):
        return True
    inverse = 1.0 / value
    return math.frexp(value)[0] in (0.5, -0.5) and math.isfinite(inverse) and float(np.float32(inverse)) == inverse


_ROUNDING_KERNELS = {None: "divide", "trunc": "divide_trunc", "floor": "divide_floor"}


def _division_kernel(name_of: Callable[[dict[str, Any]], str], scalar: bool) -> Lowering:
    """Ops of the division family on GpSimdE: a tensor or (as a [P, 1] column) a scalar divisor."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        name = name_of(args)
        if name == "divide" and not scalar:
            return _div_tensor(em, op, args)

        def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            m = TileMath(e, result)
            numerator = tiles[0]
            if scalar:
                value = args["other"]
                integer = _exact(tiles, result) and _integral(value)
                divisor = m.column(in_tensor_dtype(value, numerator), result.element_type if integer else f32)
                if not integer and tile_is_integer(numerator):
                    numerator = m.copy(numerator)
            else:
                divisor = tiles[1]
                if not _exact(tiles, result):  # mixed operands divide in fp32
                    numerator = numerator if not tile_is_integer(numerator) else m.copy(numerator)
                    divisor = divisor if not tile_is_integer(divisor) else m.copy(divisor)
            return m.kernel(name, numerator, divisor, result)

        return elementwise(op, args, em, ["self"] if scalar else ["self", "other"], compute)

    return lower


_IEEE_SCALAR_DIVISION = _division_kernel(lambda _: "divide", scalar=True)


def _rounding_mode(args: dict[str, Any]) -> str:
    mode = args.get("rounding_mode")
    if mode not in _ROUNDING_KERNELS:
        raise ValueError(f"unknown rounding_mode {mode!r}")
    return _ROUNDING_KERNELS[mode]


def _pow_tensor_scalar(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    exponent = args["exponent"]

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        exact = _exact(tiles, result) and _integral(exponent)
        m = TileMath(e, result, exact)
        x = tiles[0]
        value = _number(exponent)
        if exact:
            return m.sc("power", x, value, result)
        if value == 1:
            return m.copy(x, result)
        if value == 2:
            return m.act("square", x, out=result)
        if value == 0.5:
            return m.act("sqrt", x, out=result)
        if value == -1:
            return m.act("reciprocal", x, out=result)
        if value == -0.5:
            return m.act("rsqrt", x, out=result)
        if value == 3:
            return m.bin("multiply", m.act("square", x), x, result)
        return m.sc("power", x, value, result)

    return elementwise(op, args, em, ["self"], compute)


def _pow_scalar(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    base = _number(args["self"])

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        exact = _exact(tiles, result) and _integral(args["self"])
        m = TileMath(e, result, exact)
        if base > 0 and not exact:
            # base^x = exp(x * ln(base)): one ScalarE instruction with the free scale
            return m.act("exp", tiles[0], scale=math.log(base), out=result)
        return m.sc("power", tiles[0], base, result, reverse=True)

    return elementwise(op, args, em, ["exponent"], compute)


def _float_max_min(alu_op: str) -> Lowering:
    """fmax/fmin: the maximum/minimum ignoring a NaN operand (NaN only when both are NaN)."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            a, b = tiles
            if _exact(tiles, result):
                return TileMath(e, result, True).bin(alu_op, a, b, result)
            m = TileMath(e, result)
            chosen = m.where_nan(a, b, m.bin(alu_op, a, b))
            return m.where_nan(b, a, chosen, result)

        return elementwise(op, args, em, ["self", "other"], compute)

    return lower


def _clamp_scalar(min_arg: str, max_arg: str) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        low, high = args.get(min_arg), args.get(max_arg)

        def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            exact = _exact(tiles, result) and all(v is None or _integral(v) for v in (low, high))
            m = TileMath(e, result, exact)
            value = tiles[0]
            steps = [("max", low), ("min", high)]
            steps = [(name, bound) for name, bound in steps if bound is not None]
            if not steps:
                return m.copy(value, result)
            for index, (name, bound) in enumerate(steps):
                bound_value = in_tensor_dtype(bound, tiles[0])
                value = m.sc(name, value, bound_value, result if index == len(steps) - 1 else None)
            return value

        return elementwise(op, args, em, ["self"], compute)

    return lower


def _clamp_tensor(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    names = [name for name in ("min", "max") if args.get(name) is not None]

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result, _exact(tiles, result))
        value = tiles[0]
        if not names:
            return m.copy(value, result)
        for index, (name, bound) in enumerate(zip(names, tiles[1:], strict=True)):
            value = m.bin("max" if name == "min" else "min", value, bound, result if index == len(names) - 1 else None)
        return value

    return elementwise(op, args, em, ["self", *names], compute)


def _where(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return e.insert(tile.SelectOp(tiles[0], tiles[1], tiles[2], result)).result

    return elementwise(op, args, em, ["condition", "self", "other"], compute)


def _unary_exact_or_float(
    exact_compute: Callable[[TileMath, SSAValue, TileType], SSAValue],
    float_compute: Callable[[TileMath, SSAValue, TileType], SSAValue],
) -> Lowering:
    """One computation for integer tensors (exact, GpSimdE) and one for floats."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            if _exact(tiles, result):
                return exact_compute(TileMath(e, result, True), tiles[0], result)
            return float_compute(TileMath(e, result), tiles[0], result)

        return elementwise(op, args, em, ["self"], compute)

    return lower


def _unary(compute: Callable[[TileMath, SSAValue, TileType], SSAValue]) -> Lowering:
    return _unary_exact_or_float(compute, compute)


def _threshold_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    threshold = _number(args["threshold"])

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        grad, value = tiles
        return m.select(m.sc("is_gt", value, threshold), grad, m.fill(0.0), result)

    return elementwise(op, args, em, ["grad_output", "self"], compute)


# ---- logical and bitwise -------------------------------------------------------------------------------------


def _logical_not(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return elementwise(op, args, em, ["self"], lambda e, t, r: TileMath(e, r).sc("is_equal", t[0], 0.0, r))


def _bitwise_not(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result, True)
        if result.element_type == IntegerType(1):
            return m.sc("is_equal", tiles[0], 0.0, result)
        return m.sc("bitwise_xor", tiles[0], -1.0, result)

    return elementwise(op, args, em, ["self"], compute)


# ---- casts and creation ----------------------------------------------------------------------------------------


E4M3FN_MAX = 448.0
"""The largest finite float8_e4m3fn value (the format has no infinities)."""


def _within_e4m3fn_range(value: SSAValue) -> bool:
    """Whether every value of `value` converts to float8_e4m3fn without saturating: it is e4m3fn itself, or a
    clamp into [-448, 448] (as fp8 training clamps before casting)."""
    if isinstance(value.type, TensorType) and isinstance(value.type.element_type, Float8E4M3FNType):
        return True
    owner = value.owner
    if not isinstance(owner, Operation) or owner.name != "torch.aten.clamp":
        return False
    bounds = arguments_of(owner)
    low, high = bounds.get("min"), bounds.get("max")
    in_range = isinstance(low, int | float) and isinstance(high, int | float)
    return in_range and float(low) >= -E4M3FN_MAX and float(high) <= E4M3FN_MAX  # type: ignore[arg-type]


def _to_copy(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    from neuron_mlir.lowering.convert_torch_to_tile.random import rounds_stochastically, stochastic_rounding_cast

    if rounds_stochastically(op):
        return stochastic_rounding_cast(em, op, args)

    saturate = not _within_e4m3fn_range(op.operands[0])

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        source = tiles[0]
        if saturate and isinstance(result.element_type, Float8E4M3FNType):
            # PyTorch's cast to float8_e4m3fn saturates: out-of-range values and infinities become +-448, NaN
            # stays NaN; an engine's output conversion rounds to nearest even, so clamp first (max and min
            # propagate NaN). Casts to float8_e5m2 do not saturate (overflow is infinity), as the conversion does.
            m = TileMath(e, result)
            return m.sc("min", m.sc("max", source, -E4M3FN_MAX), E4M3FN_MAX, result)
        return e.insert(tile.CopyOp(source, result)).result

    return elementwise(op, args, em, ["self"], compute)


def _constant_fill(value_arg: str) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        value = _number(args[value_arg])
        out = emit_elementwise(em, result_shape(op), result_element_type(op), [], lambda e, t, r: _fill(e, value, r))
        return [out]

    return lower


def _fill(em: LoopNestBuilder, value: float, result: TileType) -> SSAValue:
    return em.insert(tile.FillOp(value, result)).result


def legal(op: Operation) -> str | None:
    """Elementwise ops lower for every dtype with storage; the division family needs a rounding mode it knows."""
    if op.name in ("torch.aten.div.Tensor_mode", "torch.aten.div.Scalar_mode"):
        mode = arguments_of(op).get("rounding_mode")
        if mode not in _ROUNDING_KERNELS:
            return f"unknown rounding_mode {mode!r}"
    return None


ELEMENTWISE_LOWERINGS: dict[str, Lowering] = {
    # arithmetic
    "torch.aten.add.Tensor": _tensor_binary("add", with_alpha=True),
    "torch.aten.sub.Tensor": _tensor_binary("subtract", with_alpha=True),
    "torch.aten.mul.Tensor": _tensor_binary("multiply"),
    "torch.aten.add.Scalar": _scalar_binary("add", with_alpha=True),
    "torch.aten.sub.Scalar": _scalar_binary("subtract", with_alpha=True),
    "torch.aten.mul.Scalar": _scalar_binary("multiply"),
    "torch.aten.div.Tensor": _div_tensor,
    "torch.aten.div.Scalar": _div_scalar,
    "torch.aten.div.Tensor_mode": _division_kernel(_rounding_mode, scalar=False),
    "torch.aten.div.Scalar_mode": _division_kernel(_rounding_mode, scalar=True),
    "torch.aten.remainder.Tensor": _division_kernel(lambda a: "remainder", scalar=False),
    "torch.aten.remainder.Scalar": _division_kernel(lambda a: "remainder", scalar=True),
    "torch.aten.fmod.Tensor": _division_kernel(lambda a: "fmod", scalar=False),
    "torch.aten.fmod.Scalar": _division_kernel(lambda a: "fmod", scalar=True),
    "torch.aten.pow.Tensor_Tensor": _tensor_binary("power", second="exponent"),
    "torch.aten.pow.Tensor_Scalar": _pow_tensor_scalar,
    "torch.aten.pow.Scalar": _pow_scalar,
    "torch.aten.maximum": _tensor_binary("max"),
    "torch.aten.minimum": _tensor_binary("min"),
    "torch.aten.fmax": _float_max_min("max"),
    "torch.aten.fmin": _float_max_min("min"),
    "torch.aten.clamp": _clamp_scalar("min", "max"),
    "torch.aten.clamp.Tensor": _clamp_tensor,
    "torch.aten.hardtanh": _clamp_scalar("min_val", "max_val"),
    "torch.aten.where.self": _where,
    "torch.aten.neg": _unary(lambda m, x, r: m.sc("multiply", x, -1.0, r)),
    "torch.aten.abs": _unary_exact_or_float(
        lambda m, x, r: m.sc("abs_max", x, 0.0, r), lambda m, x, r: m.act("abs", x, out=r)
    ),
    "torch.aten.sign": _unary(lambda m, x, r: m.sign(x, r)),
    "torch.aten.threshold_backward": _threshold_backward,
    # comparisons
    "torch.aten.eq.Tensor": _tensor_binary("is_equal"),
    "torch.aten.ne.Tensor": _tensor_binary("not_equal"),
    "torch.aten.lt.Tensor": _tensor_binary("is_lt"),
    "torch.aten.le.Tensor": _tensor_binary("is_le"),
    "torch.aten.gt.Tensor": _tensor_binary("is_gt"),
    "torch.aten.ge.Tensor": _tensor_binary("is_ge"),
    "torch.aten.eq.Scalar": _scalar_binary("is_equal"),
    "torch.aten.ne.Scalar": _scalar_binary("not_equal"),
    "torch.aten.lt.Scalar": _scalar_binary("is_lt"),
    "torch.aten.le.Scalar": _scalar_binary("is_le"),
    "torch.aten.gt.Scalar": _scalar_binary("is_gt"),
    "torch.aten.ge.Scalar": _scalar_binary("is_ge"),
    # logical and bitwise
    "torch.aten.logical_and": _tensor_binary("logical_and"),
    "torch.aten.logical_or": _tensor_binary("logical_or"),
    "torch.aten.logical_xor": _tensor_binary("logical_xor"),
    "torch.aten.logical_not": _logical_not,
    "torch.aten.bitwise_and.Tensor": _tensor_binary("bitwise_and"),
    "torch.aten.bitwise_or.Tensor": _tensor_binary("bitwise_or"),
    "torch.aten.bitwise_xor.Tensor": _tensor_binary("bitwise_xor"),
    "torch.aten.bitwise_and.Scalar": _scalar_binary("bitwise_and"),
    "torch.aten.bitwise_or.Scalar": _scalar_binary("bitwise_or"),
    "torch.aten.bitwise_xor.Scalar": _scalar_binary("bitwise_xor"),
    "torch.aten.bitwise_not": _bitwise_not,
    # casts and creation
    "torch.aten._to_copy": _to_copy,
    "torch.aten.scalar_tensor": _constant_fill("s"),
    "torch.aten.full": _constant_fill("fill_value"),
    "torch.aten.full_like": _constant_fill("fill_value"),
    "torch.aten.fill.Scalar": _constant_fill("value"),
}
