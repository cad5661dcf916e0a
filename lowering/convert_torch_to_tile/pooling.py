"""Pooling (average, max with indices, adaptive average; 2-d and 3-d), their backward, and col2im on VectorE.

Every plane (all leading dims merged: batch x channels) is one partition; output positions lie along the free
axes in tiles of [rows, columns]. A pooling window is a set of kernel offsets: for offset k the input elements
of all output positions form a strided *window view* (positions o*s + k*d), so each offset is one DMA'd tile
and one VectorE max/add into the running result. Padding is a prepared copy of the input with a border of the
pooling's neutral value (-inf for max, 0 for sums), sized to also cover `ceil_mode`'s last partial windows.

- avg_pool: the window sum times 1/count, where count (which depends on the position only: padding and ceil
  mode cut windows short) comes from the same window sum over a plane of ones, or is the kernel volume, or the
  divisor override.
- 2-d max pooling and its backward take `pooling_bands.py` when a padded row fits an engine access pattern
  (whole input rows read once into SBUF, taps as strided windows of them, the backward gathered per stride
  phase); what follows is the general path (1-d and 3-d pooling, rows too wide for a band).
- max_pool_with_indices: kernel offsets are unrolled; a strict `>` keeps the first maximum (PyTorch's order),
  a select carries the winning offset's flat displacement, and adding a per-position map of window origins
  (built once by GpSimdE iota) gives PyTorch's flat input index.
- adaptive average pooling: regular windows when every size divides, else one reduction per output position.
- backward: average pooling reads, adds and writes the zero-initialised padded gradient through the same window
  views, one kernel offset (or adaptive output position) at a time; max pooling scatters grad_output to the saved
  indices with an accumulating indirect DMA (indexing.py), exact for any in-range index. (The band path gathers
  instead, for indices that lie in their own windows, as a forward computes them: PyTorch's CUDA contract.)
- col2im (fold) is the same window accumulation with one slab of columns per kernel offset.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile import pooling_bands
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    FREE_TILE,
    PARTITION_TILE,
    Lowering,
    alloc,
    arguments_of,
    element_type_of,
    fold_nest,
    layout_of,
    load,
    result_element_type,
    result_shape,
    tensor_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import copy_to
from neuron_mlir.lowering.convert_torch_to_tile.movement import copy_into, fill_into
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory
from neuron_mlir.runtime.program import row_major_strides

NEG_INF = float("-inf")


def _param(values: Sequence[int] | int | None, rank: int, default: Sequence[int]) -> list[int]:
    if values is None or (isinstance(values, Sequence) and len(values) == 0):
        return list(default)
    if isinstance(values, int):
        return [values] * rank
    values = list(values)
    return values * rank if len(values) == 1 else values


def planes(em: LoopNestBuilder, x: SSAValue, rank: int) -> SSAValue:
    """x[..., S...] viewed as [P, S...] (all leading dims merged; a contiguous copy when strides can't say it)."""
    layout = layout_of(x)
    shape = (math.prod(layout.shape[: layout.rank - rank]), *layout.shape[layout.rank - rank :])
    merged = layout.reshape(shape)
    if merged is None:
        x = copy_to(em, x)
        merged = layout_of(x).reshape(shape)
        assert merged is not None
    return view(em, x, merged)


def pad_planes(em: LoopNestBuilder, x: SSAValue, low: Sequence[int], high: Sequence[int], value: float) -> SSAValue:
    """x[P, S...] with `low`/`high` elements of `value` around each spatial dim (x itself when no padding)."""
    if not any(low) and not any(high):
        return x
    layout = layout_of(x)
    spatial = layout.shape[1:]
    padded = alloc(em, (layout.shape[0], *(s + lo + hi for s, lo, hi in zip(spatial, low, high, strict=True))),
                   element_type_of(x))  # fmt: skip
    fill_into(em, padded, value)
    inner = layout_of(padded)
    for i, (s, lo) in enumerate(zip(spatial, low, strict=True)):
        inner = inner.slice(1 + i, lo, lo + s)
    copy_into(em, x, view(em, padded, inner))
    return padded


def windows(
    em: LoopNestBuilder,
    xp: SSAValue,
    kernel: Sequence[int],
    out: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> SSAValue:
    """The window view [P, K..., O...] of xp[P, S...]: element [p, k, o] = xp[p, o*s + k*d]."""
    layout = layout_of(xp)
    spatial = layout.strides[1:]
    strides = (
        layout.strides[0],
        *(st * d for st, d in zip(spatial, dilation, strict=True)),
        *(st * s for st, s in zip(spatial, stride, strict=True)),
    )
    return view(em, xp, Layout((layout.shape[0], *kernel, *out), strides, layout.offset))


class PositionTiles:
    """Tiles of [partitions, rows, columns] over an output [P, O...]; loads/stores through views shaped like it."""

    def __init__(self, partitions: int, out: Sequence[int]):
        self.partitions, self.out, self.rank = partitions, tuple(out), len(out)
        self.columns = min(out[-1], FREE_TILE)
        self.rows = 1
        if self.rank >= 2 and self.columns == out[-1]:
            self.rows = max(1, min(out[-2], FREE_TILE // out[-1]))

    def shape(self, ps: int, rs: int, cs: int) -> tuple[int, ...]:
        return (ps, rs, cs) if self.rank >= 2 else (ps, cs)

    def run(
        self, em: LoopNestBuilder, body: Callable[[LoopNestBuilder, Index, int, list[Index], int, int], None]
    ) -> None:
        """body(emitter, p0, partitions, position indices (lead..., r0, c0 or c0), rows, columns)."""

        def per_partition(e: LoopNestBuilder, p0: Index, ps: int) -> None:
            def lead(e2: LoopNestBuilder, done: list[Index]) -> None:
                if self.rank >= 2:
                    e2.for_tiles(
                        self.out[-2],
                        self.rows,
                        lambda e3, r0, rs: e3.for_tiles(
                            self.out[-1], self.columns, lambda e4, c0, cs: body(e4, p0, ps, [*done, r0, c0], rs, cs)
                        ),
                    )
                else:
                    e2.for_tiles(self.out[-1], self.columns, lambda e3, c0, cs: body(e3, p0, ps, [c0], 1, cs))

            e.for_each_index(self.out[:-2] if self.rank >= 2 else (), lead)

        em.for_tiles(self.partitions, PARTITION_TILE, per_partition)

    def load(
        self, em: LoopNestBuilder, tensor: SSAValue, p0: Index, pos: list[Index], size: tuple[int, int, int],
        extra: Sequence[Index] = (), element_type: Attribute | None = None,
    ) -> SSAValue:  # fmt: skip
        """The tile at (p0, pos) of `tensor` [P, extra..., O...] (`extra` indexes dims between P and O)."""
        rank = layout_of(tensor).rank
        dims = (0, rank - 2, rank - 1) if self.rank >= 2 else (0, rank - 1)
        return load(em, tensor, [p0, *extra, *pos], self.shape(*size), element_type, dims=dims)

    def store(self, em: LoopNestBuilder, value: SSAValue, tensor: SSAValue, p0: Index, pos: list[Index]) -> None:
        rank = layout_of(tensor).rank
        dims = (0, rank - 2, rank - 1) if self.rank >= 2 else (0, rank - 1)
        default = tuple(range(rank - len(dims), rank))
        em.insert(tile.StoreOp(value, tensor, [em.index(i) for i in [p0, *pos]], None if dims == default else dims))


def _binary(em: LoopNestBuilder, op: str, lhs: SSAValue, rhs: SSAValue, element_type: Attribute = f32) -> SSAValue:
    result = TileType(tile_shape(lhs), element_type, Memory.SBUF)
    return em.insert(tile.BinaryOp(lhs, rhs, op, result)).result


def _scalar(em: LoopNestBuilder, op: str, value: SSAValue, scalar: float, element_type: Attribute = f32) -> SSAValue:
    result = TileType(tile_shape(value), element_type, Memory.SBUF)
    return em.insert(tile.BinaryScalarOp(value, op, result, scalar=scalar)).result


def tile_shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TileType)
    return value.type.get_shape()


def _broadcast_planes(em: LoopNestBuilder, value: SSAValue, partitions: int, planar: bool = False) -> SSAValue:
    """value[O...] (or value[1, O...] when `planar`) viewed as [partitions, O...], stride 0 on the plane axis."""
    layout = layout_of(value)
    if planar:
        layout = layout.squeeze([0])
    return view(em, value, Layout((partitions, *layout.shape), (0, *layout.strides), layout.offset))


# ---- geometry ------------------------------------------------------------------------------------------------


class Geometry:
    """Kernel, stride, padding and dilation of one pooling, and the padding its output needs."""

    def __init__(
        self,
        spatial: Sequence[int],
        out: Sequence[int],
        kernel: Sequence[int],
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
    ) -> None:
        self.spatial, self.out, self.kernel = tuple(spatial), tuple(out), tuple(kernel)
        self.stride, self.padding, self.dilation = tuple(stride), tuple(padding), tuple(dilation)
        # ceil mode's last window may reach past the padded input: pad the high side far enough
        self.high = tuple(
            max(p, (o - 1) * s + d * (k - 1) + 1 - n - p)
            for n, o, k, s, p, d in zip(spatial, out, kernel, stride, padding, dilation, strict=True)
        )

    @property
    def offsets(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(k) for k in self.kernel)))

    def displacement(self, offset: Sequence[int]) -> int:
        """The flat input-index displacement of a kernel offset (row-major over the unpadded input)."""
        strides = row_major_strides(self.spatial)
        return sum(k * d * st for k, d, st in zip(offset, self.dilation, strides, strict=True))


def _geometry(args: dict[str, Any], rank: int, spatial: Sequence[int], out: Sequence[int]) -> Geometry:
    """The geometry a pooling op's arguments give: kernel_size, stride (the kernel's by default), padding (0) and
    dilation (1; average pooling has none)."""
    return Geometry(spatial, out, *_window_parameters(args, rank))


def _window_parameters(args: dict[str, Any], rank: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """kernel_size, stride (the kernel's by default), padding (0) and dilation (1) of a pooling's arguments."""
    kernel = _param(args["kernel_size"], rank, [])
    stride = _param(args.get("stride"), rank, kernel)
    padding, dilation = _param(args.get("padding", 0), rank, [0] * rank), _param(args.get("dilation", 1), rank, [1])
    return kernel, stride, padding, dilation


def _regular_geometry(spatial: Sequence[int], out: Sequence[int]) -> Geometry | None:
    """An adaptive pooling's windows when every size divides: regular, non-overlapping ones (else None)."""
    if not all(n % o == 0 for n, o in zip(spatial, out, strict=True)):
        return None
    kernel = [n // o for n, o in zip(spatial, out, strict=True)]
    return Geometry(spatial, out, kernel, kernel, [0] * len(kernel), [1] * len(kernel))


@dataclass(frozen=True)
class _AdaptiveInput:
    """An adaptive pooling's input as [P, S...] planes, its spatial sizes in and out, and its windows when they
    are regular (every size divides)."""

    x: SSAValue
    spatial: tuple[int, ...]
    out_spatial: tuple[int, ...]
    partitions: int
    regular: Geometry | None


def _adaptive_input(em: LoopNestBuilder, op: Operation, args: dict[str, Any], rank: int) -> _AdaptiveInput:
    x = planes(em, args["self"], rank)
    spatial, out_spatial = layout_of(x).shape[1:], result_shape(op)[-rank:]
    return _AdaptiveInput(x, spatial, out_spatial, layout_of(x).shape[0], _regular_geometry(spatial, out_spatial))


def _each_adaptive_window(
    em: LoopNestBuilder,
    partitions: int,
    spatial: Sequence[int],
    out: Sequence[int],
    body: Callable[[LoopNestBuilder, Index, int, int, tuple[tuple[int, int], ...]], None],
) -> None:
    """body(emitter, p0, partitions, flat output position, its window's (start, end) per dim) for every output
    position of an adaptive pooling whose sizes do not divide, per tile of partitions."""
    ranges = [_adaptive_windows(n, o) for n, o in zip(spatial, out, strict=True)]

    def per_partition(e: LoopNestBuilder, p0: Index, ps: int) -> None:
        for flat, window in enumerate(itertools.product(*ranges)):
            body(e, p0, ps, flat, window)

    em.for_tiles(partitions, PARTITION_TILE, per_partition)


def _counts(em: LoopNestBuilder, g: Geometry, include_pad: bool) -> SSAValue | None:
    """[1, O...] window element counts (None when every window counts the kernel volume)."""
    padded = tuple(n + p + h for n, p, h in zip(g.spatial, g.padding, g.high, strict=True))
    extent = [n + 2 * p if include_pad else n for n, p in zip(g.spatial, g.padding, strict=True)]
    start = [0 if include_pad else p for p in g.padding]
    covered = all(st == 0 and e == n for st, e, n in zip(start, extent, padded, strict=True))
    if covered:
        return None
    ones = alloc(em, (1, *padded), f32)
    fill_into(em, ones, 0.0)
    region = layout_of(ones)
    for i, (st, e) in enumerate(zip(start, extent, strict=True)):
        region = region.slice(1 + i, st, st + e)
    fill_into(em, view(em, ones, region), 1.0)
    return _window_sum(em, windows(em, ones, g.kernel, g.out, g.stride, g.dilation), g, 1)


def _window_sum(
    em: LoopNestBuilder,
    wins: SSAValue,
    g: Geometry,
    partitions: int,
    scale: SSAValue | float | None = None,
    out_element_type: Attribute = f32,
) -> SSAValue:
    """out[P, O...] = sum over kernel offsets of wins[P, K..., O...] (times `scale`: a [.., O...] map or a float)."""
    out = alloc(em, (partitions, *g.out), out_element_type)
    tiles = PositionTiles(partitions, g.out)

    def body(e: LoopNestBuilder, p0: Index, ps: int, pos: list[Index], rs: int, cs: int) -> None:
        def step(e2: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
            value = tiles.load(e2, wins, p0, pos, (ps, rs, cs), offsets, f32)
            return value if acc is None else _binary(e2, "add", acc, value)

        total = fold_nest(e, [(k, 1) for k in g.kernel], step)
        if isinstance(scale, float):
            total = _scalar(e, "multiply", total, scale)
        elif scale is not None:
            counts = tiles.load(e, _broadcast_planes(e, scale, partitions, True), p0, pos, (ps, rs, cs), (), f32)
            inverse = e.insert(tile.UnaryOp(counts, "reciprocal", TileType(tile_shape(counts), f32))).result
            total = _binary(e, "multiply", total, inverse)
        tiles.store(e, to_sbuf(e, total, out_element_type), out, p0, pos)

    tiles.run(em, body)
    return out


# ---- forward ops ---------------------------------------------------------------------------------------------


def _avg_pool(rank: int) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        x = planes(em, args["self"], rank)
        g = _geometry(args, rank, layout_of(x).shape[1:], result_shape(op)[-rank:])
        xp = pad_planes(em, x, g.padding, g.high, 0.0)
        divisor = args.get("divisor_override")
        scale: SSAValue | float | None
        if divisor is not None:
            scale = 1.0 / float(divisor)
        else:
            counts = _counts(em, g, bool(args.get("count_include_pad", True)))
            scale = 1.0 / math.prod(g.kernel) if counts is None else counts
        partitions = layout_of(x).shape[0]
        wins = windows(em, xp, g.kernel, g.out, g.stride, g.dilation)
        out = _window_sum(em, wins, g, partitions, scale, result_element_type(op))
        return [view(em, out, Layout.contiguous(result_shape(op)))]

    return lower


def _index_map(em: LoopNestBuilder, g: Geometry) -> SSAValue:
    """[O...] f32: the flat input index of each output position's window origin, (o*s - p) row-major."""
    strides = row_major_strides(g.spatial)
    out = alloc(em, g.out, f32)
    rank = len(g.out)
    if rank == 1:
        rows_view = view(em, out, Layout((1, g.out[0]), (0, 1), 0))
        lead_extents: tuple[int, ...] = ()
        row_count, row_step = 1, 0
    else:
        rows_view = out
        lead_extents = g.out[:-2]
        row_count, row_step = g.out[-2], g.stride[-2] * strides[-2]
    columns = g.out[-1]
    for lead in itertools.product(*(range(n) for n in lead_extents)):
        lead_base = sum((o * s - p) * st for o, s, p, st in zip(lead, g.stride, g.padding, strides, strict=False))
        for r0 in range(0, row_count, PARTITION_TILE):
            rs = min(PARTITION_TILE, row_count - r0)
            for c0 in range(0, columns, FREE_TILE):
                cs = min(FREE_TILE, columns - c0)
                base = lead_base + (c0 * g.stride[-1] - g.padding[-1]) * strides[-1]
                if rank >= 2:
                    base += (r0 * g.stride[-2] - g.padding[-2]) * strides[-2]
                result = TileType((rs, cs), f32, Memory.SBUF)
                value = em.insert(tile.IotaOp(result, [g.stride[-1] * strides[-1]], base, row_step)).result
                em.insert(tile.StoreOp(value, rows_view, [em.index(i) for i in (*lead, r0, c0)]))
    return out


def _max_pool_with_indices(rank: int) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        x = planes(em, args["self"], rank)
        g = _geometry(args, rank, layout_of(x).shape[1:], result_shape(op)[-rank:])
        if _in_bands(g):
            return pooling_bands.emit_max_pool(em, op, x, _band_geometry(g))
        return _emit_max_pool(em, op, x, g)

    return lower


def _in_bands(g: Geometry) -> bool:
    """Whether a max pooling (or its backward) takes the row-band path of pooling_bands.py."""
    return pooling_bands.fits(_band_geometry(g))


def _band_geometry(g: Geometry) -> tuple[pooling_bands.BandGeometry, ...]:
    """g per spatial dim (rows first), as pooling_bands.py takes it."""
    dims = zip(g.spatial, g.out, g.kernel, g.stride, g.padding, g.dilation, g.high, strict=True)
    return tuple(pooling_bands.BandGeometry(*dim) for dim in dims)


def _emit_max_pool(em: LoopNestBuilder, op: Operation, x: SSAValue, g: Geometry) -> list[SSAValue]:
    """Max pooling of planes x[P, S...] with geometry g: values and PyTorch's flat input indices."""
    partitions = layout_of(x).shape[0]
    xp = pad_planes(em, x, g.padding, g.high, NEG_INF)
    wins = windows(em, xp, g.kernel, g.out, g.stride, g.dilation)
    origins = _broadcast_planes(em, _index_map(em, g), partitions)
    values = alloc(em, (partitions, *g.out), result_element_type(op, 0))
    indices = alloc(em, (partitions, *g.out), result_element_type(op, 1))
    tiles = PositionTiles(partitions, g.out)

    def body(e: LoopNestBuilder, p0: Index, ps: int, pos: list[Index], rs: int, cs: int) -> None:
        best: SSAValue | None = None
        where: SSAValue | None = None
        shape = tiles.shape(ps, rs, cs)
        for offset in g.offsets:
            value = tiles.load(e, wins, p0, pos, (ps, rs, cs), list(offset), f32)
            here = e.insert(tile.FillOp(float(g.displacement(offset)), TileType(shape, f32))).result
            if best is None or where is None:
                best, where = value, here
                continue
            better = _binary(e, "is_gt", value, best)
            best = e.insert(tile.SelectOp(better, value, best, TileType(shape, f32))).result
            where = e.insert(tile.SelectOp(better, here, where, TileType(shape, f32))).result
        assert best is not None
        assert where is not None
        origin = tiles.load(e, origins, p0, pos, (ps, rs, cs))
        flat = _binary(e, "add", where, origin)
        tiles.store(e, to_sbuf(e, best, result_element_type(op, 0)), values, p0, pos)
        tiles.store(e, to_sbuf(e, flat, result_element_type(op, 1)), indices, p0, pos)

    tiles.run(em, body)
    shape = result_shape(op)
    return [view(em, values, Layout.contiguous(shape)), view(em, indices, Layout.contiguous(shape))]


def _adaptive_max_pool(rank: int) -> Lowering:
    """Adaptive max pooling: regular max pooling when sizes divide; else each output position reduces its own
    window (max, then the first position holding it: the smallest flat index among the equal ones)."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        pooled = _adaptive_input(em, op, args, rank)
        x, spatial, out_spatial, partitions = pooled.x, pooled.spatial, pooled.out_spatial, pooled.partitions
        regular = pooled.regular
        if regular is not None and _in_bands(regular):
            return pooling_bands.emit_max_pool(em, op, x, _band_geometry(regular))
        if regular is not None:
            return _emit_max_pool(em, op, x, regular)
        count = math.prod(out_spatial)
        values = alloc(em, (partitions, count), result_element_type(op, 0))
        indices = alloc(em, (partitions, count), result_element_type(op, 1))
        strides = row_major_strides(spatial)

        def window_max(e: LoopNestBuilder, p0: Index, ps: int, flat: int, window: tuple[tuple[int, int], ...]) -> None:
            column = TileType((ps, 1), f32)
            sizes = tuple(hi - lo for lo, hi in window)
            region_type = TileType((ps, *sizes), f32)
            region = load(e, x, [p0, *(lo for lo, _ in window)], (ps, *sizes), f32)
            best = e.insert(tile.ReduceOp(region, "max", column, axes=rank)).result
            zeros = e.insert(tile.FillOp(0.0, region_type)).result
            spread = e.insert(tile.BinaryScalarOp(zeros, "add", region_type, column=best)).result
            hit = e.insert(tile.BinaryOp(region, spread, "is_equal", region_type)).result
            base = sum(lo * st for (lo, _), st in zip(window, strides, strict=True))
            position = e.insert(tile.IotaOp(region_type, list(strides), base)).result
            never = e.insert(tile.FillOp(float(math.prod(spatial)), region_type)).result
            first = e.insert(tile.SelectOp(hit, position, never, region_type)).result
            first = e.insert(tile.ReduceOp(first, "min", column, axes=rank)).result
            for value, out in ((best, values), (first, indices)):
                stored = to_sbuf(e, value, out.type.element_type)  # type: ignore[attr-defined]
                e.insert(tile.StoreOp(stored, out, [e.index(p0), e.index(flat)]))

        _each_adaptive_window(em, partitions, spatial, out_spatial, window_max)
        shape = result_shape(op)
        return [view(em, values, Layout.contiguous(shape)), view(em, indices, Layout.contiguous(shape))]

    return lower


def _adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((o * size) // out, -((-(o + 1) * size) // out)) for o in range(out)]


def _adaptive_avg_pool(rank: int) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        pooled = _adaptive_input(em, op, args, rank)
        x, spatial, out_spatial, partitions = pooled.x, pooled.spatial, pooled.out_spatial, pooled.partitions
        g = pooled.regular
        if g is not None:
            wins = windows(em, x, g.kernel, g.out, g.stride, g.dilation)
            out = _window_sum(em, wins, g, partitions, 1.0 / math.prod(g.kernel), result_element_type(op))
            return [view(em, out, Layout.contiguous(result_shape(op)))]
        out = alloc(em, (partitions, math.prod(out_spatial)), result_element_type(op))

        def window_mean(e: LoopNestBuilder, p0: Index, ps: int, flat: int, window: tuple[tuple[int, int], ...]) -> None:
            sizes = [hi - lo for lo, hi in window]
            region = load(e, x, [p0, *(lo for lo, _ in window)], (ps, *sizes), f32)
            total = e.insert(tile.ReduceOp(region, "add", TileType((ps, 1), f32), axes=rank)).result
            mean = _scalar(e, "multiply", total, 1.0 / math.prod(sizes), result_element_type(op))
            e.insert(tile.StoreOp(mean, out, [e.index(p0), e.index(flat)]))

        _each_adaptive_window(em, partitions, spatial, out_spatial, window_mean)
        return [view(em, out, Layout.contiguous(result_shape(op)))]

    return lower


# ---- backward ops --------------------------------------------------------------------------------------------


def _scatter_windows(
    em: LoopNestBuilder,
    grad_out: SSAValue,
    g: Geometry,
    partitions: int,
    contribution: Callable[
        [LoopNestBuilder, SSAValue, tuple[int, ...], Index, list[Index], tuple[int, int, int]], SSAValue
    ],
    out_element_type: Attribute,
) -> SSAValue:
    """grad_input[P, S...]: for each kernel offset, add contribution(grad tile) into the offset's window view.

    `grad_out` is [P, O...], or [P, K..., O...] with one slab per kernel offset (col2im).
    """
    padded_shape = (partitions, *(n + p + h for n, p, h in zip(g.spatial, g.padding, g.high, strict=True)))
    gp = alloc(em, padded_shape, f32)
    fill_into(em, gp, 0.0)
    wins = windows(em, gp, g.kernel, g.out, g.stride, g.dilation)
    tiles = PositionTiles(partitions, g.out)
    for offset in g.offsets:

        def body(
            e: LoopNestBuilder, p0: Index, ps: int, pos: list[Index], rs: int, cs: int, k: tuple[int, ...] = offset
        ) -> None:
            per_offset = layout_of(grad_out).rank > 1 + len(g.out)
            go = tiles.load(e, grad_out, p0, pos, (ps, rs, cs), list(k) if per_offset else (), f32)
            added = contribution(e, go, k, p0, pos, (ps, rs, cs))
            current = tiles.load(e, wins, p0, pos, (ps, rs, cs), list(k), f32)
            rank = layout_of(wins).rank
            e.insert(
                tile.StoreOp(
                    _binary(e, "add", current, added),
                    wins,
                    [e.index(i) for i in [p0, *k, *pos]],
                    (0, rank - 2, rank - 1) if len(g.out) >= 2 else (0, rank - 1),
                )
            )

        tiles.run(em, body)
    interior = layout_of(gp)
    for i, (n, p) in enumerate(zip(g.spatial, g.padding, strict=True)):
        interior = interior.slice(1 + i, p, p + n)
    return _from_f32(em, view(em, gp, interior), out_element_type)


def copy_to_type(em: LoopNestBuilder, source: SSAValue, element_type: Attribute) -> SSAValue:
    out = alloc(em, layout_of(source).shape, element_type)
    copy_into(em, source, out)
    return out


def _from_f32(em: LoopNestBuilder, gradient: SSAValue, element_type: Attribute) -> SSAValue:
    """An fp32 gradient accumulated in HBM, in the result's element type (a copy unless that is fp32)."""
    return gradient if element_type == f32 else copy_to_type(em, gradient, element_type)


def _avg_pool_backward(rank: int) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        x = layout_of(args["self"])
        grad_out = planes(em, args["grad_output"], rank)
        spatial = x.shape[-rank:]
        partitions = layout_of(grad_out).shape[0]
        g = _geometry(args, rank, spatial, layout_of(grad_out).shape[1:])
        divisor = args.get("divisor_override")
        counts = None
        if divisor is None:
            counts = _counts(em, g, bool(args.get("count_include_pad", True)))
        inverse_counts = None
        if counts is not None:
            inverse_counts = _broadcast_planes(em, counts, partitions, True)
        scale = 1.0 / float(divisor) if divisor is not None else 1.0 / math.prod(g.kernel)
        tiles = PositionTiles(partitions, g.out)

        def contribution(e: LoopNestBuilder, go: SSAValue, k, p0: Index, pos: list[Index], size) -> SSAValue:  # type: ignore[no-untyped-def]
            if inverse_counts is None:
                return _scalar(e, "multiply", go, scale)
            count = tiles.load(e, inverse_counts, p0, pos, size, (), f32)
            inverse = e.insert(tile.UnaryOp(count, "reciprocal", TileType(tile_shape(count), f32))).result
            return _binary(e, "multiply", go, inverse)

        grad = _scatter_windows(em, grad_out, g, partitions, contribution, result_element_type(op))
        return [_reshaped(em, grad, result_shape(op))]

    return lower


def _reshaped(em: LoopNestBuilder, value: SSAValue, shape: Sequence[int]) -> SSAValue:
    layout = layout_of(value).reshape(shape)
    if layout is None:
        value = copy_to(em, value)
        layout = layout_of(value).reshape(shape)
        assert layout is not None
    return view(em, value, layout)


def _max_pool_backward(rank: int) -> Lowering:
    """grad_input[plane, indices[plane, o]] += grad_output[plane, o]: an accumulating scatter (indirect DMA).

    Exact for any in-range indices, in PyTorch's order of output positions within a plane, so duplicates (windows
    that overlap on their maximum) add in the same order as the CPU kernel.
    """

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        from neuron_mlir.lowering.convert_torch_to_tile.indexing import IndexedAccess, IndexTerm, emit_scatter

        spatial = layout_of(args["self"]).shape[-rank:]
        if rank == 2:
            out_planes = planes(em, args["grad_output"], rank)
            g = _geometry(args, rank, spatial, layout_of(out_planes).shape[1:])
            if _in_bands(g):
                index_planes = planes(em, args["indices"], rank)
                grad = pooling_bands.emit_max_pool_backward(em, op, out_planes, index_planes, _band_geometry(g))
                return [_reshaped(em, grad, result_shape(op))]
        grad_out = _reshaped(
            em, planes(em, args["grad_output"], rank), (-1, math.prod(layout_of(args["grad_output"]).shape[-rank:]))
        )
        indices = _reshaped(em, planes(em, args["indices"], rank), layout_of(grad_out).shape)
        partitions, positions = layout_of(grad_out).shape
        area = math.prod(spatial)
        grad = alloc(em, (partitions, area), f32)
        fill_into(em, grad, 0.0)
        access = IndexedAccess((partitions, positions), (area, 0), [IndexTerm(indices, 1, area)])

        def values(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> SSAValue:
            return load(e, grad_out, [p0, f0], (ps, fs), f32)

        emit_scatter(em, op.name, grad, access, values, accumulate=True)
        return [_reshaped(em, _from_f32(em, grad, result_element_type(op)), result_shape(op))]

    return lower


def _adaptive_avg_pool_backward(rank: int) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        spatial = layout_of(args["self"]).shape[-rank:]
        grad_out = planes(em, args["grad_output"], rank)
        out_spatial = layout_of(grad_out).shape[1:]
        partitions = layout_of(grad_out).shape[0]
        g = _regular_geometry(spatial, out_spatial)
        if g is not None:
            scale = 1.0 / math.prod(g.kernel)
            grad = _scatter_windows(
                em, grad_out, g, partitions, lambda e, go, *_: _scalar(e, "multiply", go, scale),
                result_element_type(op),
            )  # fmt: skip
            return [_reshaped(em, grad, result_shape(op))]
        gp = alloc(em, (partitions, *spatial), f32)
        fill_into(em, gp, 0.0)
        flat_grad = _reshaped(em, grad_out, (partitions, math.prod(out_spatial)))

        def window_share(
            e: LoopNestBuilder, p0: Index, ps: int, flat: int, window: tuple[tuple[int, int], ...]
        ) -> None:
            sizes = [hi - lo for lo, hi in window]
            column = load(e, flat_grad, [p0, flat], (ps, 1), f32)
            share = _scalar(e, "multiply", column, 1.0 / math.prod(sizes))
            at = [p0, *(lo for lo, _ in window)]
            region = load(e, gp, at, (ps, *sizes), f32)
            added = e.insert(tile.BinaryScalarOp(region, "add", TileType(tile_shape(region), f32), column=share)).result
            e.insert(tile.StoreOp(added, gp, [e.index(i) for i in at]))

        _each_adaptive_window(em, partitions, spatial, out_spatial, window_share)
        return [_reshaped(em, _from_f32(em, gp, result_element_type(op)), result_shape(op))]

    return lower


def _col2im_parameters(args: dict[str, Any]) -> tuple[list[int], list[int], list[int], list[int]]:
    """col2im's kernel, stride, padding and dilation, one value per spatial dim where one stands for both."""
    kernel, stride = _param(args["kernel_size"], 2, []), _param(args["stride"], 2, [1])
    return kernel, stride, _param(args["padding"], 2, [0, 0]), _param(args["dilation"], 2, [1])


def _col2im_geometry(args: dict[str, Any], out_shape: Sequence[int]) -> Geometry:
    """col2im's windows: one per block (column) position, over the output's last two dims."""
    spatial = tuple(out_shape[-2:])
    kernel, stride, padding, dilation = _col2im_parameters(args)
    blocks = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in
                   zip(spatial, padding, dilation, kernel, stride, strict=True))  # fmt: skip
    return Geometry(spatial, blocks, kernel, stride, padding, dilation)


def _col2im(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """col2im (fold): every column block is added into its window of the output, one kernel offset at a time.

    The input [N, C * kh * kw, L] is viewed as [N * C, kh, kw, Lh, Lw]; for each kernel offset its [planes, Lh, Lw]
    slab is added (read, add, write) into the zero-initialised padded output through that offset's window view.
    """
    out_shape = result_shape(op)
    g = _col2im_geometry(args, out_shape)
    channels = out_shape[-3]
    batch = math.prod(out_shape[:-3])
    slabs = _reshaped(em, args["self"], (batch * channels, *g.kernel, *g.out))
    folded = _scatter_windows(em, slabs, g, batch * channels, lambda e, go, *_: go, result_element_type(op))
    return [_reshaped(em, folded, out_shape)]


def legal(op: Operation) -> str | None:
    """Pooling needs a channel dimension in front of its spatial ones; col2im's input must hold the columns of
    every block its parameters give."""
    args = arguments_of(op)
    if op.name == "torch.aten.col2im":
        shape, out_shape = tensor_shape(args["self"]), tensor_shape(op.results[0])
        if len(out_shape) < 3:
            return f"the result {out_shape} needs a channel dimension and 2 spatial dimensions"
        # ATen's col2im_shape_check refuses these too (the block count divides by the stride)
        if (problem := _parameter_problem(*_col2im_parameters(args), 2)) is not None:
            return problem
        g = _col2im_geometry(args, out_shape)
        channels, kernel, blocks = out_shape[-3], list(g.kernel), g.out
        if len(shape) < 2 or shape[-1] != math.prod(blocks) or shape[-2] != channels * math.prod(kernel):
            return f"input {shape} does not hold {channels} x {kernel} columns of {blocks} blocks"
        return None
    rank = int(op.name.split("pool")[1][0])  # avg_pool2d, max_pool3d_with_indices, _adaptive_avg_pool2d, ...
    source = args.get("self")
    if source is not None and len(tensor_shape(source)) < rank + 1:
        return f"the input needs a channel dimension and {rank} spatial dimensions"
    if "kernel_size" in args and source is not None:
        windows = args.get("grad_output", op.results[0])
        return _window_problem(args, rank, tensor_shape(source)[-rank:], tensor_shape(windows)[-rank:])
    return None


def _parameter_problem(
    kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], rank: int
) -> str | None:
    """The rule window parameters break, or None: `rank` values each, positive kernel, stride and dilation, padding
    not negative."""
    if not len(kernel) == len(stride) == len(padding) == len(dilation) == rank:
        return f"kernel_size, stride, padding and dilation need {rank} values each"
    if min(*kernel, *stride, *dilation) <= 0 or min(padding) < 0:
        return f"kernel_size {kernel}, stride {stride} and dilation {dilation} must be positive, padding {padding} >= 0"
    return None


def _window_problem(args: dict[str, Any], rank: int, spatial: Sequence[int], out: Sequence[int]) -> str | None:
    """The rule of PyTorch's pooling shape check (`pool2d_shape_check` and kin) that a pooling's windows break,
    or None: positive kernel, stride and dilation, padding at most half the dilated kernel, and the output size
    the formula gives (at least 1, `ceil_mode`'s last window starting inside the padded input) equal to `out`."""
    kernel, stride, padding, dilation = _window_parameters(args, rank)
    if (problem := _parameter_problem(kernel, stride, padding, dilation, rank)) is not None:
        return problem
    expected = []
    for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation, strict=True):
        if p > (d * (k - 1) + 1) // 2:
            return f"padding {padding} must be at most half of the kernel {kernel}"
        span = n + 2 * p - d * (k - 1) - 1
        size = (span + (s - 1 if args.get("ceil_mode") else 0)) // s + 1
        if args.get("ceil_mode") and (size - 1) * s >= n + p:
            size -= 1  # the last window must start inside the input or its left padding
        expected.append(size)
    if min(expected) < 1:
        return f"the kernel {kernel} does not fit the input {list(spatial)} (output size {expected})"
    if list(out) != expected:
        return f"the output's spatial size {list(out)} is not the {expected} the windows give"
    return None


POOLING_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.col2im": _col2im,
    "torch.aten.avg_pool2d": _avg_pool(2),
    "torch.aten.avg_pool3d": _avg_pool(3),
    "torch.aten.avg_pool2d_backward": _avg_pool_backward(2),
    "torch.aten.avg_pool3d_backward": _avg_pool_backward(3),
    "torch.aten.max_pool2d_with_indices": _max_pool_with_indices(2),
    "torch.aten.max_pool3d_with_indices": _max_pool_with_indices(3),
    "torch.aten.max_pool2d_with_indices_backward": _max_pool_backward(2),
    "torch.aten.max_pool3d_with_indices_backward": _max_pool_backward(3),
    "torch.aten._adaptive_avg_pool2d": _adaptive_avg_pool(2),
    "torch.aten.adaptive_max_pool2d": _adaptive_max_pool(2),
    "torch.aten.adaptive_max_pool3d": _adaptive_max_pool(3),
    "torch.aten._adaptive_avg_pool3d": _adaptive_avg_pool(3),
    "torch.aten._adaptive_avg_pool2d_backward": _adaptive_avg_pool_backward(2),
    "torch.aten._adaptive_avg_pool3d_backward": _adaptive_avg_pool_backward(3),
}
