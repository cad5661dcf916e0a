"""Layer, group, batch and RMS normalization, forward and backward, from reductions and elementwise loop nests.

Each normalization is a mean and a variance over its statistics dims (`reduction.emit_variance`: VectorE folds
with rows on partitions), `rstd = rsqrt(var + eps)` (one ScalarE instruction, eps as the free bias), and one
elementwise pass `(x - mean) * rstd * weight + bias` whose statistics and affine parameters are stride-0
broadcast views, so nothing is copied to line them up:

    layer norm   statistics over the trailing `normalized_shape` dims, one row per leading index
    group norm   x viewed as [N, G, C/G, HxW]: statistics over the last two, weight viewed as [G, C/G, 1]
    batch norm   statistics over every dim but the channel (dim 1), weight viewed as [C, 1, ...]; in training
                 the running statistics update to (1 - momentum) * running + momentum * batch (unbiased var)

Batch norm in training keeps its mean exact to fp32 precision: with few values per channel close together
against their mean (a tiny batch at 1x1 spatial size), the rounding of a mean summed from the values is not small
against their spread, and every normalized value and gradient inherits it. A contiguous input takes one nest over
channel tiles (`_batch_norm_training_by_channel`, channels on partitions): one pass sums the differences from a
shift f per channel and their squares (two ScalarE activations with -f as their bias, summed by their
accumulate), giving m = f + s/N, what it lost, r = (f - m) + s/N, and the shifted-data variance q/N - (s/N)^2.
f is the mean of up to `PILOT_VALUES` of the channel's first values (its first value at 1x1 spatial size): every
difference carries f - mean, and the sum rounds against N |f - mean|, which from a single value of a map whose
mean is small against its spread (a stem convolution's) left m tens of times eager's error off;
a second pass normalizes (x - m) * (rstd * weight) + shift with shift = bias - r * rstd * weight, as
tensor_scalar steps with per-channel [P, 1] columns that never leave the channel tile (16-bit x and result:
x * scale + (bias - (m + r) * scale), eager's form, one step in VectorE's 16-bit mode). The saved statistics and
the updated running ones are written from the columns between the passes. Other inputs take the same
statistics as separate nests (`_batch_statistics`, the squares a pass of their own about m). The saved mean is
m + r. Its backward in training (`native_batch_norm_backward`, which the frontend keeps whole) runs two passes
over x and dy per channel tile (`_batch_norm_backward_by_channel`): the first sums dy, x - m and dy * (x - m),
which also finds the saved mean's rounding again; the second writes grad_input from per-channel columns. Both
nests read x and dy in their own dtypes and see a 1-d batch norm's [N, C] as one strided run per channel. Where
the channel tiles' chunks fit on chip (`_for_channel_tiles`), the second pass reads the chunks the first loaded,
so x and dy cross HBM once, and the tiles are straight-line code, each tile's first pass before the previous
tile's second.
With fewer channels than half the partitions, both spread each channel over several partitions (`_ChannelSplit`)
and make the parts' sums their channel's with one matmul.

Backward, with xhat = (x - mean) * rstd and g = grad_out * weight, over the same statistics dims:

    grad_input  = rstd * (g - mean(g) - xhat * mean(g * xhat))
    grad_weight = sum(grad_out * xhat),  grad_bias = sum(grad_out)   over the dims the parameter broadcasts on

(batch norm in eval mode: grad_input = grad_out * weight * rstd of the running variance). Results the
`output_mask` does not ask for are not computed. Statistics and intermediates are fp32; results round to their
ATen dtypes once.

Layer norm forward over rows that fit in SBUF (`common.body_budget_bytes`) reads x once and writes each result
once instead: rows on partitions, the normalized dims (one strided run in x) on the free axis, and per row tile

    s = sum(x)                                  VectorE reduce                 -> [P, 1]
    q = sum((x - s/N)^2)                        ScalarE square with -mean as the per-partition bias, summed by
                                                the activation's accumulate (neuron-fuse-instructions)
    rstd = rsqrt(q/N + eps)                     ScalarE, 1/N and eps as the free scale and bias
    y = (x - mean) * rstd [* weight] [+ bias]   the [P, 1] statistics as per-partition scalars (one two-step
                                                tensor_scalar); weight and bias are loaded once per nest as
                                                partition-broadcast tiles

so no statistic goes through HBM and nothing is broadcast by a DMA. The saved mean and rstd are stored only
when something uses them. Rows of one dimension go in row groups (`rows.py`: several rows per partition per
DMA, computed in straight-line code in wavefront order); other row shapes take one row tile per trip.

RMS norm (`aten._fused_rms_norm`, which torch-recognize-rms-norm makes of the spelled-out chain) is the same
pass without the mean: ScalarE squares summed by the accumulate, rstd = rsqrt(sum/N + eps), out = x * rstd
[* weight]. Where torch-fuse-rms-norm-neighbours marked them, it also computes the two ops models put around it
from the rows it holds, instead of their own loop nests over HBM: the fp32 upcast of its input that the forward
saves for the backward, and the multiply of its result by a weight vector (`weight * normed.to(dtype)`). Its
backward (`_fused_rms_norm_backward`) is one pass too, grad_input = gw * rstd - x * rstd^3 * sum(gw x) / N per
row, which also writes the (marked) cast of grad_input that follows it, and accumulates the (marked) weight
gradient autograd spells as sum(grad_out * saved normalized rows) over the rows with ones-column matmuls in PSUM,
as layer norm's backward does.

A layer norm whose only user is a matmul taking it as A (a Linear layer after it, as in every pre-norm
transformer block) runs in that matmul's prologue: tile-fuse-matmul-prologues moves this nest's row computation
into the matmul's panel and applies weight and bias per partition as the transposed tiles leave PSUM.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    FREE_TILE,
    PARTITION_TILE,
    Lowering,
    alloc,
    arguments_of,
    body_budget_bytes,
    column_tile,
    element_type_of,
    emitter_target,
    for_row_tiles,
    layout_of,
    load,
    result_element_type,
    result_shape,
    sbuf_tile,
    store,
    tensor_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    element_bytes as _bytes,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import (
    TileMath,
    bounded_loop,
    contiguous_if_transposed,
    emit_elementwise,
    real_prefix,
    size_bounds,
)
from neuron_mlir.lowering.convert_torch_to_tile.reduction import ReductionSpace, RowTile, emit_reduce, emit_variance
from neuron_mlir.lowering.layout import Layout, collapse
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.lowering.torch_fuse_batch_norm_casts import is_marked as is_batch_norm_cast
from neuron_mlir.lowering.torch_fuse_batch_norm_casts import statistics_casts
from neuron_mlir.lowering.torch_fuse_rms_norm_neighbours import (
    is_marked,
    narrowing_of_gradient,
    upcast_of_input,
    weight_gradient,
    weight_product,
)
from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.hardware import Engine, Memory
from neuron_mlir.runtime.program import row_major_strides


def _reshaped(em: LoopNestBuilder, tensor: SSAValue, shape: Sequence[int]) -> SSAValue:
    """`tensor` viewed with `shape` (same elements, row-major); a contiguous copy first when no view can say it."""
    layout = layout_of(tensor)
    reshaped = layout.reshape(list(shape))
    if reshaped is None:
        copy = emit_elementwise(em, layout.shape, element_type_of(tensor), [tensor], lambda e, t, r: t[0])
        reshaped = layout_of(copy).reshape(list(shape))
        assert reshaped is not None
        return view(em, copy, reshaped)
    return view(em, tensor, reshaped)


def _channel_view(em: LoopNestBuilder, vector: SSAValue, rank: int, dim: int) -> SSAValue:
    """A 1-d tensor viewed as rank-`rank` with its extent at `dim` and size 1 elsewhere (for broadcasting)."""
    layout = layout_of(vector)
    shape = [1] * rank
    shape[dim] = layout.shape[0]
    strides = [0] * rank
    strides[dim] = layout.strides[0]
    return view(em, vector, Layout(tuple(shape), tuple(strides), layout.offset))


def _rstd(em: LoopNestBuilder, variance: SSAValue, eps: float) -> SSAValue:
    shape = layout_of(variance).shape
    return emit_elementwise(
        em, shape, f32, [variance], lambda e, t, r: TileMath(e, r).act("rsqrt", t[0], bias=eps, out=r)
    )


def _cast(
    em: LoopNestBuilder, tensor: SSAValue, element_type: Attribute, shape: Sequence[int] | None = None
) -> SSAValue:
    """`tensor` (viewed with `shape`) in `element_type`: itself when nothing changes."""
    if shape is not None and tuple(shape) != layout_of(tensor).shape:
        tensor = _reshaped(em, tensor, shape)
    if element_type_of(tensor) == element_type:
        return tensor
    shape = layout_of(tensor).shape
    return emit_elementwise(em, shape, element_type, [tensor], lambda e, t, r: TileMath(e, r).copy(t[0], r))


def _normalize(
    em: LoopNestBuilder,
    x: SSAValue,
    mean: SSAValue,
    rstd: SSAValue,
    weight: SSAValue | None,
    bias: SSAValue | None,
    out_type: Attribute,
) -> SSAValue:
    """(x - mean) * rstd * weight + bias over x's shape (every other operand broadcasts to it)."""
    operands = [x, mean, rstd] + [v for v in (weight, bias) if v is not None]

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        value, centre, scale, *affine = tiles
        last = weight is None and bias is None
        value = m.bin("multiply", m.bin("subtract", value, centre), scale, result if last else None)
        if weight is not None:
            value = m.bin("multiply", value, affine.pop(0), result if bias is None else None)
        if bias is not None:
            value = m.bin("add", value, affine.pop(0), result)
        return value

    return emit_elementwise(em, layout_of(x).shape, out_type, operands, compute)


def _mask(args: dict[str, Any]) -> list[bool]:
    mask = args.get("output_mask")
    return [True, True, True] if mask is None else [bool(v) for v in mask]


def _multiply(em: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
    """The product of a pair of tiles, as an elementwise compute."""
    a, b = tiles
    return TileMath(em, result).bin("multiply", a, b, result)


def _normalize_backward(
    em: LoopNestBuilder,
    x: SSAValue,
    grad: SSAValue,
    mean: SSAValue,
    rstd: SSAValue,
    weight: SSAValue | None,
    stat_dims: Sequence[int],
    param_dims: Sequence[int],
    mask: list[bool],
    types: Sequence[Attribute],
) -> list[SSAValue | None]:
    """(grad_input, grad_weight, grad_bias) of a normalization (the formulas in the module docstring) in the
    shape of x; grad_weight and grad_bias reduced over `param_dims` (without keepdim)."""
    shape = layout_of(x).shape
    count = math.prod(shape[d] for d in stat_dims)
    results: list[SSAValue | None] = [None, None, None]
    xhat = _normalize(em, x, mean, rstd, None, None, f32)
    if mask[0]:
        g = grad
        if weight is not None:
            g = emit_elementwise(em, shape, f32, [grad, weight], _multiply)
        scale = 1.0 / count if count else math.nan
        mean_g = emit_reduce(em, g, stat_dims, True, "add", f32, scale)
        g_xhat = emit_elementwise(em, shape, f32, [g, xhat], _multiply)
        mean_g_xhat = emit_reduce(em, g_xhat, stat_dims, True, "add", f32, scale)

        def grad_input(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            m = TileMath(e, result)
            inv, g_tile, a, xh, b = tiles
            centred = m.bin("subtract", m.bin("subtract", g_tile, a), m.bin("multiply", xh, b))
            return m.bin("multiply", centred, inv, result)

        results[0] = emit_elementwise(em, shape, types[0], [rstd, g, mean_g, xhat, mean_g_xhat], grad_input)
    if mask[1]:
        dy_xhat = emit_elementwise(em, shape, f32, [grad, xhat], _multiply)
        results[1] = _sum_over(em, dy_xhat, param_dims, types[1])
    if mask[2]:
        results[2] = _sum_over(em, grad, param_dims, types[2])
    return results


def _sum_over(em: LoopNestBuilder, tensor: SSAValue, dims: Sequence[int], element_type: Attribute) -> SSAValue:
    """The sum over `dims`; with no dims, the tensor itself (in `element_type`)."""
    if not list(dims):
        return _cast_copy(em, tensor, element_type)
    return emit_reduce(em, tensor, list(dims), False, "add", element_type)


# ---- layer norm ------------------------------------------------------------------------------------------------


def _layer_norm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    x = args["input"]
    shape = layout_of(x).shape
    axis = len(shape) - len(args["normalized_shape"])
    # a permuted view's rows would load one element per descriptor
    x = contiguous_if_transposed(em, x)
    weight, bias, eps = args.get("weight"), args.get("bias"), float(args["eps"])
    plan = _row_plan(em, op, x, axis, [v for v in (weight, bias) if v is not None])
    if plan is not None:
        results = [alloc(em, shape, result_element_type(op, 0))]
        results += [alloc(em, result_shape(op, 1), result_element_type(op, i)) for i in (1, 2)]
        _layer_norm_on_chip(em, op, x, plan, weight, bias, eps, results)
        return results
    dims = list(range(axis, len(shape)))
    variance, mean = emit_variance(em, x, dims, True, 0.0, f32)
    rstd = _rstd(em, variance, eps)
    out = _normalize(em, x, mean, rstd, weight, bias, result_element_type(op, 0))
    stats_shape = result_shape(op, 1)
    return [
        out,
        _cast(em, mean, result_element_type(op, 1), stats_shape),
        _cast(em, rstd, result_element_type(op, 2), stats_shape),
    ]


def _single_stride(layout: Layout, first: int) -> int | None:
    """The one stride of dims `first`.. of `layout` merged into one (None when they are not one run)."""
    shape = layout.shape[first:]
    dims, (strides,) = collapse(shape, [layout.strides[first:]])
    if len(dims) > 1:
        return None
    return strides[0] if dims else 1


@dataclass
class _RowPlan:
    """A layer norm over rows that fit on chip: x seen as [rows..., length] (the normalized dims one strided
    run), the affine parameters (weight, bias: either may be absent) with their single strides."""

    x_view_layout: Layout
    row_dims: tuple[int, ...]
    out_rows: tuple[int, ...]
    stat_rows: tuple[int, ...]
    length: int
    affine: list[SSAValue]
    affine_strides: list[int]


def _row_plan(em: LoopNestBuilder, op: Operation, x: SSAValue, axis: int, affine: list[SSAValue]) -> _RowPlan | None:
    """The on-chip plan (module docstring), or None when a row does not fit or the normalized dims of x (or of
    the affine parameters) are not one strided run."""
    layout = layout_of(x)
    shape = layout.shape
    length = math.prod(shape[axis:])
    out_type = result_element_type(op, 0)
    row_bytes = length * (_bytes(element_type_of(x)) + 4 + _bytes(out_type) + (4 if affine else 0))
    row_bytes += length * sum(_bytes(element_type_of(v)) for v in affine)
    if row_bytes > body_budget_bytes(em):
        return None
    x_stride = _single_stride(layout, axis)
    affine_strides = [_single_stride(layout_of(v), 0) for v in affine]
    if x_stride is None or any(stride is None for stride in affine_strides):
        return None
    leading = shape[:axis] or (1,)
    row_dims, (in_rows, out_rows, stat_rows) = collapse(
        leading, [layout.strides[:axis] or (0,), row_major_strides(shape)[:axis] or (0,), row_major_strides(leading)]
    )
    if not row_dims:
        row_dims, in_rows, out_rows, stat_rows = (1,), (0,), (0,), (0,)
    x_view_layout = Layout((*row_dims, length), (*in_rows, x_stride), layout.offset)
    strides = [stride for stride in affine_strides if stride is not None]
    return _RowPlan(x_view_layout, tuple(row_dims), tuple(out_rows), tuple(stat_rows), length, affine, strides)


# Row tiles up to which a layer norm's statistics take the shifted-data form (`_row_statistics`).
_SHIFTED_MAX_ROW_TILES = 4


def _row_statistics(
    e: LoopNestBuilder, tile_x: SSAValue, p: int, length: int, eps: float, shifted: bool
) -> tuple[SSAValue, SSAValue]:
    """-mean and rstd of each row of `tile_x` ([p, length]) as [p, 1] fp32 columns.

    Two passes (`shifted` False): the sum, then the squares about the mean. With `shifted`, the squares are taken
    about each row's first element c instead (ScalarE's (c - x)^2: scale -1, c the per-partition bias), so
    ScalarE's pass does not wait for VectorE's sum: var = sum((x - c)^2) / N - (mean - c)^2, the shifted-data form
    of the variance; with c an element of the row, (mean - c)^2 <= N var, so the subtraction cancels at most a
    factor N of the sum's magnitude, the rounding the sum of N squares already carries. It costs more column
    ops per tile: worth it where a few row tiles wait on the chain (a matmul's prologue), not in a long loop whose
    trips overlap anyway."""
    if not shifted:
        total = e.insert(tile.ReduceOp(tile_x, "add", column_tile(p))).result
        negative_mean = e.insert(tile.BinaryScalarOp(total, "multiply", column_tile(p), scalar=-1.0 / length)).result
        squares = e.insert(
            tile.UnaryOp(tile_x, "square", TileType((p, length), f32, Memory.SBUF), bias=negative_mean)
        ).result
        deviation = e.insert(tile.ReduceOp(squares, "add", column_tile(p))).result
        rstd = e.insert(tile.UnaryOp(deviation, "rsqrt", column_tile(p), scale=1.0 / length, bias_value=eps)).result
        return negative_mean, rstd
    x_type = tile_x.type
    assert isinstance(x_type, TileType)
    first = e.insert(tile.ExtractOp(tile_x, [e.index(0)], TileType((p, 1), x_type.element_type))).result
    # (c - x)^2: the activation's scale -1 and c itself as its per-partition bias, no column op before the pass
    squares = e.insert(
        tile.UnaryOp(tile_x, "square", TileType((p, length), f32, Memory.SBUF), scale=-1.0, bias=first)
    ).result
    deviation = e.insert(tile.ReduceOp(squares, "add", column_tile(p))).result
    total = e.insert(tile.ReduceOp(tile_x, "add", column_tile(p))).result
    negative_mean = e.insert(tile.BinaryScalarOp(total, "multiply", column_tile(p), scalar=-1.0 / length)).result
    # mean - c, then eps - (mean - c)^2 as the rsqrt's per-partition bias: two-step column ops beside -mean
    scaled = e.insert(tile.BinaryScalarOp(total, "multiply", column_tile(p), scalar=1.0 / length)).result
    offset = e.insert(tile.BinaryScalarOp(scaled, "subtract", column_tile(p), column=first)).result
    offset_squared = e.insert(tile.BinaryScalarOp(offset, "multiply", column_tile(p), column=offset)).result
    bias = e.insert(tile.BinaryScalarOp(offset_squared, "subtract", column_tile(p), scalar=eps, reverse=True)).result
    rstd = e.insert(tile.UnaryOp(deviation, "rsqrt", column_tile(p), scale=1.0 / length, bias=bias)).result
    return negative_mean, rstd


class _Broadcasts:
    """The affine parameters as [p, length] tiles broadcast over partitions, each loaded once per height p, at the
    function's level (`load` before a loop that reads them)."""

    def __init__(self, em: LoopNestBuilder, affine: list[SSAValue], strides: list[int], length: int) -> None:
        self.em, self.affine, self.strides, self.length = em, affine, strides, length
        self.tiles: dict[int, list[SSAValue]] = {}

    def load(self, p: int) -> list[SSAValue]:
        if p not in self.tiles:
            self.tiles[p] = []
            for value, stride in zip(self.affine, self.strides, strict=True):
                broadcast = view(self.em, value, Layout((p, self.length), (0, stride), layout_of(value).offset))
                self.tiles[p].append(load(self.em, broadcast, [0, 0], (p, self.length)))
        return self.tiles[p]


def _layer_norm_on_chip(
    em: LoopNestBuilder,
    op: Operation,
    x: SSAValue,
    plan: _RowPlan,
    weight: SSAValue | None,
    bias: SSAValue | None,
    eps: float,
    results: list[SSAValue],
) -> None:
    """Layer norm as one loop nest over row tiles (module docstring), writing `results` (out, mean, rstd)."""
    length, affine = plan.length, plan.affine
    out_type = result_element_type(op, 0)
    out, *stats = results
    wanted = [bool(op.results[i].uses) for i in (1, 2)]
    row_dims = plan.row_dims
    x_view = view(em, x, plan.x_view_layout)
    out_view = view(em, out, Layout((*row_dims, length), (*plan.out_rows, 1), 0))
    stat_views = [view(em, s, Layout((*row_dims, 1), (*plan.stat_rows, 1), 0)) for s in stats]

    # weight and bias as [p, N] tiles broadcast over partitions, loaded once for each row-tile height
    last = row_dims[-1]
    heights = {min(PARTITION_TILE, last)} | ({last % PARTITION_TILE} if last % PARTITION_TILE else set())
    params = _Broadcasts(em, affine, plan.affine_strides, length)

    # Row groups only for a layer norm that returns its statistics (training): without them, the nest of one row
    # tile per trip below is the form tile-fuse-matmul-prologues and tile-fuse-matmul-chains compute inside a
    # matmul's panel, and those passes do not read row groups.
    if (
        len(row_dims) == 1
        and any(wanted)
        and _layer_norm_row_groups(
            em, plan, x_view, out_view, stat_views, params, heights, out_type, wanted, eps, weight, bias
        )
    ):
        return
    # a size bucket's program runs the call's rows only, without statistics (inference): saved statistics of
    # unwritten rows would reach a backward's sums over rows
    bounded = None if any(wanted) else _bounded_rows(em, op, plan, [x_view, out_view, *stat_views])
    if bounded is not None:
        row_dims, row_bounds, (x_view, out_view, *stat_views) = bounded
        last = row_dims[-1]
        heights = {min(PARTITION_TILE, last)} | ({last % PARTITION_TILE} if last % PARTITION_TILE else set())
    for p in sorted(heights):
        params.load(p)

    # few row tiles (a Linear layer's prologue of one block row): the statistics' chain is the latency
    row_tiles = math.prod(row_dims[:-1]) * -(-row_dims[-1] // PARTITION_TILE)
    shifted = row_tiles <= _SHIFTED_MAX_ROW_TILES

    def row_tile(e: LoopNestBuilder, prefix: list[Index], p0: Index, p: int) -> None:
        indices = [*prefix, p0, 0]
        tile_x = load(e, x_view, indices, (p, length))
        negative_mean, rstd = _row_statistics(e, tile_x, p, length, eps, shifted)
        m = TileMath(e, TileType((p, length), out_type, Memory.SBUF))
        final = m.result
        centred = e.insert(tile.BinaryScalarOp(tile_x, "add", m.inner, column=negative_mean)).result
        value: SSAValue = e.insert(
            tile.BinaryScalarOp(centred, "multiply", m.inner if affine else final, column=rstd)
        ).result
        tiles = list(params.load(p))
        if weight is not None:
            value = m.bin("multiply", value, tiles.pop(0), final if bias is None else None)
        if bias is not None:
            value = m.bin("add", value, tiles.pop(0), final)
        store(e, value, out_view, indices)
        if wanted[0]:
            mean = e.insert(tile.BinaryScalarOp(negative_mean, "multiply", column_tile(p), scalar=-1.0)).result
            store(e, mean, stat_views[0], [*prefix, p0, 0])
        if wanted[1]:
            store(e, rstd, stat_views[1], [*prefix, p0, 0])

    if bounded is not None:
        _for_bounded_row_tiles(em, row_dims, row_bounds, row_tile)
    else:
        for_row_tiles(em, row_dims, row_tile)


def _bounded_rows(
    em: LoopNestBuilder, op: Operation, plan: _RowPlan, views: list[SSAValue]
) -> tuple[tuple[int, ...], tuple[SSAValue | None, ...], list[SSAValue]] | None:
    """In a size bucket's program, the rows of a layer norm whose leading dimensions are bounded by size
    arguments (`neuron.size_bounds`), unmerged: their extents, their bounds, and `views` ([rows, N] views of x,
    the output and the statistics) viewed as [leading..., N]. None when the last leading dimension is not
    bounded, or not in whole row tiles, or the merged rows do not split back."""
    bounds = size_bounds(em, op)
    shape = result_shape(op, 0)
    axis = len(shape)  # where the normalized dims start
    while axis > 0 and math.prod(shape[axis:]) < plan.length:
        axis -= 1
    leading = tuple(shape[:axis])
    if bounds is None or not leading or math.prod(shape[axis:]) != plan.length:
        return None
    # the rows' own bound must follow the call (whole row tiles inside the bucket): otherwise the nest keeps the
    # merged form tile-fuse-matmul-prologues computes inside a following matmul's panel (measured: a batch bound
    # alone over 64-row tiles lost that fusion and cost more than the skipped batches saved)
    rows = math.prod(leading)
    if bounds[axis - 1] is None or rows != math.prod(plan.row_dims):
        return None
    row_bounds: tuple[SSAValue | None, ...] = tuple(bounds[:axis])
    if leading[-1] % PARTITION_TILE:
        # rows shorter than a tile per batch ([4, 64] token rows) stay merged, in tiles that start below the last
        # real row (`real_prefix`), when the merged rows are whole tiles
        if len(leading) == 1 or rows % PARTITION_TILE:
            return None
        row_bounds = (real_prefix(em, list(zip(row_bounds, leading, strict=True))),)
        leading = (rows,)
    split: list[SSAValue] = []
    for value in views:
        layout = layout_of(value)
        reshaped = layout.reshape((*leading, layout.shape[-1]))
        if reshaped is None:
            return None
        split.append(view(em, value, reshaped))
    return leading, row_bounds, split


def _for_bounded_row_tiles(
    em: LoopNestBuilder,
    row_dims: tuple[int, ...],
    bounds: tuple[SSAValue | None, ...],
    row_tile: Callable[[LoopNestBuilder, list[Index], Index, int], None],
) -> None:
    """`for_row_tiles` whose loops run the call's trips where a size argument bounds their dimension: the
    leading ones its value, the last `ceil(bound / 128)` row tiles when its extent is a multiple of 128 (every
    row tile inside the bucket)."""

    def rows(e: LoopNestBuilder, prefix: list[Index]) -> None:
        dim = len(prefix)
        extent, bound = row_dims[dim], bounds[dim]
        if dim == len(row_dims) - 1:
            if bound is not None and extent % PARTITION_TILE == 0:
                bounded_loop(e, bound, PARTITION_TILE, lambda e2, p0, p: row_tile(e2, prefix, p0, p))
            else:
                e.for_tiles(extent, PARTITION_TILE, lambda e2, p0, p: row_tile(e2, prefix, p0, p))
        elif bound is not None:
            bounded_loop(e, bound, 1, lambda e2, i, _: rows(e2, [*prefix, i]))
        else:
            e.for_each(extent, lambda e2, i: rows(e2, [*prefix, i]))

    rows(em, [])


# Rows per partition of the layer norm forward's groups when they run in one wavefront (`_layer_norm_row_groups`).
_PIPELINED_FORWARD_ROWS = 2


def _layer_norm_row_groups(
    em: LoopNestBuilder,
    plan: _RowPlan,
    x_view: SSAValue,
    out_view: SSAValue,
    stat_views: list[SSAValue],
    params: _Broadcasts,
    heights: set[int],
    out_type: Attribute,
    wanted: list[bool],
    eps: float,
    weight: SSAValue | None,
    bias: SSAValue | None,
) -> bool:
    """Layer norm over one dimension of rows in row groups (`rows.py`): each DMA moves several rows per partition,
    and the rows of a group are computed in straight-line code in wavefront order, so that the engines overlap
    the rows' chains (each row's statistics, then its normalization); up to `rows.PIPELINED_ROW_TILES` row tiles,
    the rows of all groups in one wavefront (`rows.pipelined_row_groups`: 2048 rows of 768, 38.5 -> 35.9 µs).
    Rows too few for two full groups do not take groups of several rows per partition (one row tile per trip,
    two trips in flight, kept as many rows in flight with less waiting on a group's last row: a ViT-B/16 layer's
    394 rows, 5 us less than such groups): when they make at least `rows.PIPELINED_MIN_GROUPS` row tiles, each
    tile is a group of one row per partition, all of them in one wavefront (the ViT-B/16 step's forward 226.1 ->
    223.5 us, BERT-base's 512 rows 220.7 -> 214.5, against that loop). False, with nothing emitted, for fewer."""
    from neuron_mlir.lowering.convert_torch_to_tile.rows import (
        PIPELINED_MIN_GROUPS,
        PIPELINED_ROW_TILES,
        STRAIGHT_LINE_ROWS,
        RowGroup,
        for_row_groups,
        pipelined_row_groups,
        row_groups,
        rows_per_partition,
        wavefront,
    )

    (rows,), length = plan.row_dims, plan.length
    in_bytes = _bytes(element_type_of(x_view))
    # per row: x, its squares and the fp32 steps of the normalization, the result row and the group's result tile
    row_bytes = length * (in_bytes + 3 * 4 + 2 * _bytes(out_type)) + 8
    full_rate = emitter_target(em).dma_full_rate_bytes_per_partition
    fitting = rows_per_partition(length * in_bytes, row_bytes, body_budget_bytes(em), rows, full_rate)
    per_partition = min(STRAIGHT_LINE_ROWS, fitting)
    if rows < 2 * PARTITION_TILE * per_partition:
        if len(row_groups(rows, 1)) < PIPELINED_MIN_GROUPS:
            return False
        per_partition = 1
    # In one wavefront the later groups' transfers overlap the rows before them, so full-rate DMAs matter less
    # than the first group's arrival and the last group's store, which grow with the rows per partition: two
    # (2048 rows of 768: 32.9 -> 31.9 µs against three).
    pipelined_rows = min(per_partition, _PIPELINED_FORWARD_ROWS)
    if rows <= PIPELINED_ROW_TILES * PARTITION_TILE and len(row_groups(rows, pipelined_rows)) >= PIPELINED_MIN_GROUPS:
        per_partition = pipelined_rows
    stat_rows = [view(em, v, Layout((rows,), (layout_of(v).strides[0],), layout_of(v).offset)) for v in stat_views]

    def open_group(e: LoopNestBuilder, group: RowGroup) -> tuple[list[Callable[[int], None]], Callable[[], None]]:
        """The group's load; returns its steps (each for row j) and its stores."""
        p = group.partitions
        xs = group.load(e, x_view)
        indices = range(group.per_partition)
        x_tiles = [group.row(e, xs, j) for j in indices]
        means, rstds, values = list(x_tiles), list(x_tiles), list(x_tiles)
        square_type = TileType((p, length), f32, Memory.SBUF)
        m = TileMath(e, TileType((p, length), out_type, Memory.SBUF))
        # straight-line code loads the parameters after the first group's rows, which the rows need first (DMA
        # bandwidth goes to the transfers in program order); a loop finds them loaded before it
        affine = params.load(p)

        def mean(j: int) -> None:
            total = e.insert(tile.ReduceOp(x_tiles[j], "add", column_tile(p))).result
            means[j] = e.insert(tile.BinaryScalarOp(total, "multiply", column_tile(p), scalar=1.0 / length)).result

        def deviation(j: int) -> None:
            # (mean - x)^2: the activation's bias is per partition, its scale -1
            squares = e.insert(tile.UnaryOp(x_tiles[j], "square", square_type, scale=-1.0, bias=means[j])).result
            summed = e.insert(tile.ReduceOp(squares, "add", column_tile(p))).result
            rstds[j] = e.insert(
                tile.UnaryOp(summed, "rsqrt", column_tile(p), scale=1.0 / length, bias_value=eps)
            ).result

        def normalize(j: int) -> None:
            centred = e.insert(tile.BinaryScalarOp(x_tiles[j], "subtract", m.inner, column=means[j])).result
            if weight is not None:
                # (x - mean) * weight first: one scalar_tensor_tensor pass, at one element per cycle in bf16
                values[j] = m.bin("multiply", centred, affine[0], None)
            else:
                scaled_type = m.inner if affine else m.result
                values[j] = e.insert(tile.BinaryScalarOp(centred, "multiply", scaled_type, column=rstds[j])).result

        def scale(j: int) -> None:
            scaled_type = m.inner if bias is not None else m.result
            values[j] = e.insert(tile.BinaryScalarOp(values[j], "multiply", scaled_type, column=rstds[j])).result

        def shift(j: int) -> None:
            values[j] = m.bin("add", values[j], affine[-1], m.result)

        steps: list[Callable[[int], None]] = [mean, deviation, normalize]
        steps += [scale] if weight is not None else []
        steps += [shift] if bias is not None else []

        def close() -> None:
            result = group.empty(e, (length,), out_type)
            for j, value in enumerate(values):
                result = group.put(e, value, result, j)
            group.store(e, result, out_view)
            for kind, (stat_wanted, stat_view) in enumerate(zip(wanted, stat_rows, strict=True)):
                if not stat_wanted:
                    continue
                columns = group.empty(e, (), f32)
                for j in indices:
                    columns = group.put(e, means[j] if kind == 0 else rstds[j], columns, j)
                group.store(e, columns, stat_view)

        return steps, close

    def group_body(e: LoopNestBuilder, group: RowGroup, carried: list[SSAValue]) -> list[SSAValue]:
        steps, close = open_group(e, group)
        wavefront(group.per_partition, steps)
        close()
        return carried

    step_count = 3 + (weight is not None) + (bias is not None)
    if not pipelined_row_groups(
        em,
        rows,
        per_partition,
        open_group,
        [lambda state, j, i=i: state[0][i](j) for i in range(step_count)],  # type: ignore[misc]
        lambda state: state[1](),
    ):
        for p in sorted(heights):
            params.load(p)
        for_row_groups(em, rows, per_partition, group_body)
    return True


def _layer_norm_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
    x, grad = args["input"], args["grad_out"]
    shape = layout_of(x).shape
    axis = len(shape) - len(args["normalized_shape"])
    x, grad = contiguous_if_transposed(em, x), contiguous_if_transposed(em, grad)
    types = [result_element_type(op, i) if _is_tensor(op, i) else f32 for i in range(3)]
    mask = [m and _is_tensor(op, i) for i, m in enumerate(_mask(args))]
    mean, rstd, weight = args["mean"], args["rstd"], args.get("weight")
    on_chip = _layer_norm_backward_on_chip(em, x, grad, mean, rstd, weight, axis, mask, types)
    if on_chip is not None:
        return on_chip
    return _normalize_backward(
        em, x, grad, args["mean"], args["rstd"], args.get("weight"), range(axis, len(shape)), range(axis), mask, types
    )


# Share of the PSUM banks the weight and bias gradients may accumulate in (one bank per 512 features of each):
# half of them, as a matmul's output block takes.
_GRADIENT_BANK_SHARE = 2


def _layer_norm_backward_on_chip(
    em: LoopNestBuilder,
    x: SSAValue,
    grad: SSAValue,
    mean: SSAValue,
    rstd: SSAValue,
    weight: SSAValue | None,
    axis: int,
    mask: list[bool],
    types: Sequence[Attribute],
) -> list[SSAValue | None] | None:
    """Layer norm backward in one pass over row groups (`rows.py`), or None when the rows do not fit, their
    dimensions do not merge into one, or the parameter gradients need more PSUM banks than they may take.

    Per row of x and grad_out (normalized dims on the free axis), with the saved mean and rstd as fp32 columns,
    xhat = (x - mean) rstd and N the row's length:

        u = (x - mean) * grad_out                      one scalar_tensor_tensor (bf16: one element per cycle)
        g = grad_out * weight,  a = sum(g)             the sum by a ScalarE copy of g, which the later passes read
        b = sum(u * weight)                            = sum(g xhat) / rstd
        grad_input = (g - a / N) * rstd + (x - mean) * (-rstd^3 b / N)
        grad_weight += rstd^T u,  grad_bias += ones^T grad_out          TensorE, accumulated in PSUM

    which is rstd (g - mean(g) - xhat mean(g xhat)) without forming xhat: eight passes over each element, the
    two row sums included, where that order takes nine and each of its tensor_tensor passes reads an fp32 xhat.
    The parameter gradients sum over every row: a column as the stationary contracts a row tile's partitions
    (each row's rstd for the weight, ones for the bias), and PSUM accumulates over all row tiles (fp32). x and
    grad_out are read once, grad_input written once, and nothing else reaches HBM.

    Up to `rows.PIPELINED_ROW_TILES` row tiles, every group is straight-line code and the rows of all groups run
    in one wavefront (`rows.pipelined_row_groups`, the last group's rows stored one by one), with seven passes
    instead of eight, spread so that no engine waits on the others' share:

        u = (x - mean) * grad_out,  g = (grad_out - 0) * weight     VectorE, both bf16 (x - s) * y at one element
                                                                    per cycle; g is the exact fp32 product
        s = rstd g,  sum(s) = rstd a                                ScalarE's copy scaled by the rstd column,
                                                                    summing what it writes
        b = sum(u * weight)                                         the product, summed by a ScalarE copy
        grad_input = s + slope x + offset,  slope = -rstd^3 b / N,  offset = -rstd a / N - slope mean

    in six steps, each of passes on different engines that do not read each other's results (u; the matmuls and
    g; u * weight and s; b and the columns; slope x + offset; the sum), so that each engine's queue alternates
    between the rows in flight and no step waits for a chain emitted in the same wavefront slot (2048 rows of 768:
    64.1 -> 53.6 µs with one pass per step, 45.5 µs with the eight passes above, 42.2 µs so). Longer kernels loop
    over the groups with the eight passes, each group's rows in wavefront order, the newest row's step first:
    with the parameter gradients' matmuls last, the first steps of every row fill the queues of the engines that
    start the chain (measured: 64 against 81 µs, oldest first, for 2048 rows of 768, with the textbook passes;
    the seven passes there cost a BERT-base layer's 512 rows 2.4 µs more).
    """
    from neuron_mlir.lowering.convert_torch_to_tile.matmul import matmul_limits
    from neuron_mlir.lowering.convert_torch_to_tile.rows import (
        STRAIGHT_LINE_ROWS,
        for_row_groups,
        pipelined_row_groups,
        rows_per_partition,
        wavefront,
    )

    layout, grad_layout = layout_of(x), layout_of(grad)
    shape = layout.shape
    length = math.prod(shape[axis:])
    x_stride, grad_stride = _single_stride(layout, axis), _single_stride(grad_layout, axis)
    weight_stride = _single_stride(layout_of(weight), 0) if weight is not None else 1
    if not shape[axis:] or length == 0 or x_stride is None or grad_stride is None or weight_stride is None:
        return None
    leading = shape[:axis] or (1,)
    stat_layouts = [layout_of(mean), layout_of(rstd)]
    out = alloc(em, shape, types[0]) if mask[0] else None
    row_dims, row_strides = collapse(
        leading,
        [
            layout.strides[:axis] or (0,),
            grad_layout.strides[:axis] or (0,),
            *((stats.strides[:axis] or (0,)) for stats in stat_layouts),
            row_major_strides(shape)[:axis] or (0,),
        ],
    )
    if len(row_dims) > 1:
        return None
    rows = row_dims[0] if row_dims else 1
    x_rows, grad_rows, mean_rows, rstd_rows, out_rows = (s[0] if row_dims else 0 for s in row_strides)
    _, _, n_limit = matmul_limits(em)
    chunks = [(c0, min(n_limit, length - c0)) for c0 in range(0, length, n_limit)]
    target = emitter_target(em)
    if len(chunks) * (mask[1] + mask[2]) > target.psum_banks // _GRADIENT_BANK_SHARE:
        return None
    in_bytes = _bytes(element_type_of(x)) + _bytes(element_type_of(grad))
    # per row of a partition: the fp32 work tiles of one row (u, g and its copy, u * weight, grad_input's two terms)
    work_bytes = length * (4 * 6 + _bytes(types[0]) + (_bytes(element_type_of(weight)) if weight is not None else 0))
    # the rows of a group are computed one after another in straight-line code, each with its own work tiles, so
    # that the engines overlap the rows' chains (and neuron-unroll-loops overlaps two groups)
    group_bytes = length * (in_bytes + (_bytes(types[0]) if mask[0] else 0)) + 8 + work_bytes
    budget = body_budget_bytes(em)
    if budget < group_bytes:
        return None
    row_bytes = length * min(_bytes(element_type_of(x)), _bytes(element_type_of(grad)))
    full_rate = target.dma_full_rate_bytes_per_partition
    per_partition = min(STRAIGHT_LINE_ROWS, rows_per_partition(row_bytes, group_bytes, budget, rows, full_rate))

    def rows_view(value: SSAValue, row_stride: int, free_stride: int | None) -> SSAValue:
        offset = layout_of(value).offset
        if free_stride is None:
            return view(em, value, Layout((rows,), (row_stride,), offset))
        return view(em, value, Layout((rows, length), (row_stride, free_stride), offset))

    x_view, grad_view = rows_view(x, x_rows, x_stride), rows_view(grad, grad_rows, grad_stride)
    mean_view, rstd_view = rows_view(mean, mean_rows, None), rows_view(rstd, rstd_rows, None)
    out_view = rows_view(out, out_rows, 1) if out is not None else None
    grad_type = element_type_of(grad)
    heights = {min(PARTITION_TILE, rows)} | ({rows % PARTITION_TILE} if rows % PARTITION_TILE else set())
    weights: dict[int, SSAValue] = {}

    def load_weight(p: int) -> None:
        """The weight as a [p, length] tile broadcast over partitions, loaded once per height (outside any loop)."""
        if weight is not None and mask[0] and p not in weights:
            broadcast = view(em, weight, Layout((p, length), (0, weight_stride), layout_of(weight).offset))
            weights[p] = load(em, broadcast, [0, 0], (p, length))

    # the bias gradient's stationary: a ones column in grad_out's type
    ones = {
        p: em.insert(tile.FillOp(1.0, TileType((p, 1), grad_type, Memory.SBUF))).result
        for p in sorted(heights)
        if mask[2]
    }
    accumulators: list[SSAValue] = [
        em.insert(tile.FillOp(0.0, TileType((1, size), f32, Memory.PSUM))).result
        for _ in range(mask[1] + mask[2])
        for _, size in chunks
    ]

    def accumulate(e: LoopNestBuilder, stationary: SSAValue, moving: SSAValue, accs: list[SSAValue]) -> list[SSAValue]:
        p = moving.type.get_shape()[0]  # type: ignore[attr-defined]
        element_type = moving.type.element_type  # type: ignore[attr-defined]
        updated: list[SSAValue] = []
        for acc, (c0, size) in zip(accs, chunks, strict=True):
            part = moving
            if size != length:
                part = e.insert(tile.ExtractOp(moving, [e.index(c0)], TileType((p, size), element_type))).result
            updated.append(e.insert(tile.MatmulOp(stationary, part, TileType((1, size), f32, Memory.PSUM), acc)).result)
        return updated

    n_weight = len(chunks) * mask[1]
    # the parameter gradients' accumulators as the rows emitted so far left them
    sums = {"weight": accumulators[:n_weight], "bias": accumulators[n_weight:]}

    def open_group(e: LoopNestBuilder, group: Any) -> tuple[list[Callable[[int], None]], Callable[[], None]]:
        """The group's loads; returns its steps (each for row j) and its store."""
        p = group.partitions
        if pipelined:
            # in the order the rows read them (DMA bandwidth goes to the transfers in program order), the weight's
            # after the first group's
            means, rstds = group.load(e, mean_view, f32), group.load(e, rstd_view, f32)
            xs, grads = group.load(e, x_view), group.load(e, grad_view)
            load_weight(p)
        else:
            xs, grads = group.load(e, x_view), group.load(e, grad_view)
            means, rstds = group.load(e, mean_view, f32), group.load(e, rstd_view, f32)
        result = group.empty(e, (length,), types[0]) if out_view is not None else None
        row_type = TileType((p, length), f32, Memory.SBUF)
        column = TileType((p, 1), f32, Memory.SBUF)
        # rstd^3 of every row of the group at once (the coefficient of x - mean in grad_input)
        group_columns = TileType((p, group.per_partition), f32, Memory.SBUF)
        rstd_squares = e.insert(tile.BinaryOp(rstds, rstds, "multiply", group_columns)).result
        rstd_cubes = e.insert(tile.BinaryOp(rstd_squares, rstds, "multiply", group_columns)).result

        count = group.per_partition
        x_rows, grad_rows = [group.row(e, xs, j) for j in range(count)], [group.row(e, grads, j) for j in range(count)]
        mean_cols = [group.row(e, means, j) for j in range(count)]
        rstd_cols = [group.row(e, rstds, j) for j in range(count)]
        cube_cols = [group.row(e, rstd_cubes, j) for j in range(count)]
        out_type = TileType((p, length), types[0], Memory.SBUF)
        # per row: (x - mean) grad, g = grad * weight, -mean(g), -rstd^3 sum(g (x - mean)) / N, the two terms of
        # grad_input
        centred, gs, shifts, slopes, sloped, shifted = (list(x_rows) for _ in range(6))
        products, offsets = list(x_rows), list(x_rows)  # the one-wavefront form's g (x - mean) and offset
        filled = [result]  # grad_input's group tile, row by row

        def centred_gradient(j: int) -> None:
            difference = e.insert(tile.BinaryScalarOp(x_rows[j], "subtract", row_type, column=mean_cols[j])).result
            centred[j] = e.insert(tile.BinaryOp(difference, grad_rows[j], "multiply", row_type)).result

        def parameter_gradients(j: int) -> None:
            if mask[1]:  # sum over rows of rstd (x - mean) grad: rstd as the stationary column
                sums["weight"] = accumulate(e, rstd_cols[j], centred[j], sums["weight"])
            if mask[2]:
                sums["bias"] = accumulate(e, ones[p], grad_rows[j], sums["bias"])

        def weighted(j: int) -> None:
            gs[j] = grad_rows[j]
            if weight is not None:
                gs[j] = e.insert(tile.BinaryOp(grad_rows[j], weights[p], "multiply", row_type)).result

        def weighted_sum(j: int) -> None:
            # a ScalarE copy that sums what it writes: VectorE streams the other row sum and the (x - mean) grad
            gs[j] = e.insert(tile.UnaryOp(gs[j], "copy", row_type)).result
            g_sum = e.insert(tile.ReduceOp(gs[j], "add", column)).result
            shifts[j] = e.insert(tile.BinaryScalarOp(g_sum, "multiply", column, scalar=-1.0 / length)).result

        def correlation(j: int) -> None:
            # sum(g (x - mean)) = sum((x - mean) grad * weight)
            products = centred[j]
            if weight is not None:
                products = e.insert(tile.BinaryOp(centred[j], weights[p], "multiply", row_type)).result
            total = e.insert(tile.ReduceOp(products, "add", column)).result
            scaled = e.insert(tile.BinaryScalarOp(total, "multiply", column, column=cube_cols[j])).result
            slopes[j] = e.insert(tile.BinaryScalarOp(scaled, "multiply", column, scalar=-1.0 / length)).result

        def shifted_gradient(j: int) -> None:
            value = e.insert(tile.BinaryScalarOp(gs[j], "add", row_type, column=shifts[j])).result
            shifted[j] = e.insert(tile.BinaryScalarOp(value, "multiply", row_type, column=rstd_cols[j])).result

        def sloped_input(j: int) -> None:
            difference = e.insert(tile.BinaryScalarOp(x_rows[j], "subtract", row_type, column=mean_cols[j])).result
            sloped[j] = e.insert(tile.BinaryScalarOp(difference, "multiply", row_type, column=slopes[j])).result

        def finish(j: int) -> None:
            value = e.insert(tile.BinaryOp(sloped[j], shifted[j], "add", out_type)).result
            filled[0] = group.put(e, value, filled[0], j)

        # The one-wavefront form (docstring): grad_input = rstd g + slope x + offset.
        def exact_weighted(j: int) -> None:
            # (grad - 0) * weight: VectorE's bf16 (x - s) * y, one element per cycle, the exact fp32 product
            gs[j] = grad_rows[j]
            if weight is not None:
                zero = e.insert(tile.BinaryScalarOp(grad_rows[j], "subtract", row_type, scalar=0.0)).result
                gs[j] = e.insert(tile.BinaryOp(zero, weights[p], "multiply", row_type)).result

        def scaled_gradient(j: int) -> None:
            # rstd g, summed as ScalarE writes it (neuron-fuse-instructions): rstd sum(g)
            shifted[j] = e.insert(tile.BinaryScalarOp(gs[j], "multiply", row_type, column=rstd_cols[j])).result
            shifts[j] = e.insert(tile.ReduceOp(shifted[j], "add", column)).result

        def weighted_products(j: int) -> None:
            products[j] = centred[j]
            if weight is not None:
                products[j] = e.insert(tile.BinaryOp(centred[j], weights[p], "multiply", row_type)).result

        def correlation_offset(j: int) -> None:
            # sum(g (x - mean)) by a ScalarE copy that sums what it writes; slope = -rstd^3 sum(g (x - mean)) / N
            # and offset = -rstd sum(g) / N - slope mean
            copied = e.insert(tile.UnaryOp(products[j], "copy", row_type)).result
            total = e.insert(tile.ReduceOp(copied, "add", column)).result
            scaled = e.insert(tile.BinaryScalarOp(total, "multiply", column, column=cube_cols[j])).result
            slopes[j] = e.insert(tile.BinaryScalarOp(scaled, "multiply", column, scalar=-1.0 / length)).result
            centre = e.insert(tile.BinaryOp(slopes[j], mean_cols[j], "multiply", column)).result
            shift = e.insert(tile.BinaryScalarOp(shifts[j], "multiply", column, scalar=-1.0 / length)).result
            offsets[j] = e.insert(tile.BinaryScalarOp(shift, "subtract", column, column=centre)).result

        def affine_input(j: int) -> None:
            value = e.insert(tile.BinaryScalarOp(x_rows[j], "multiply", row_type, column=slopes[j])).result
            sloped[j] = e.insert(tile.BinaryScalarOp(value, "add", row_type, column=offsets[j])).result

        def together(*parts: Callable[[int], None]) -> Callable[[int], None]:
            """One step of passes on different engines, none reading another's result."""

            def step(j: int) -> None:
                for part in parts:
                    part(j)

            return step

        steps: list[Callable[[int], None]] = [centred_gradient] if mask[0] or mask[1] else [lambda j: None]
        if pipelined:  # see the docstring
            if result is None:
                steps.append(parameter_gradients)
            else:
                steps += [
                    together(parameter_gradients, exact_weighted),
                    together(weighted_products, scaled_gradient),
                    correlation_offset,
                    affine_input,
                    finish,
                ]
        else:
            if result is not None:
                steps += [weighted, weighted_sum, correlation, shifted_gradient, sloped_input, finish]
            steps.append(parameter_gradients)

        def close() -> None:
            if filled[0] is not None:
                assert out_view is not None
                group.store(e, filled[0], out_view)

        return steps, close

    def group_body(e: LoopNestBuilder, group: Any, accs: list[SSAValue]) -> list[SSAValue]:
        sums["weight"], sums["bias"] = accs[:n_weight], accs[n_weight:]
        steps, close = open_group(e, group)
        wavefront(group.per_partition, steps, oldest_first=False)
        close()
        return sums["weight"] + sums["bias"]

    pipelined = True
    step_count = 2 + 4 * (out_view is not None)
    done = pipelined_row_groups(
        em,
        rows,
        per_partition,
        open_group,
        [lambda state, j, i=i: state[0][i](j) for i in range(step_count)],  # type: ignore[misc]
        lambda state: state[1](),
        split_last=True,
    )
    if done:
        accumulators = sums["weight"] + sums["bias"]
    else:
        pipelined = False
        for p in sorted(heights):
            load_weight(p)
        accumulators = for_row_groups(em, rows, per_partition, group_body, accumulators)
    results: list[SSAValue | None] = [out, None, None]
    for index in (1, 2):
        if not mask[index]:
            continue
        gradient = alloc(em, shape[axis:], types[index])
        flat = view(em, gradient, Layout((1, length), (0, 1), 0))
        for (c0, size), acc in zip(chunks, accumulators[: len(chunks)], strict=True):
            value = em.insert(tile.CopyOp(acc, TileType((1, size), types[index], Memory.SBUF))).result
            store(em, value, flat, [0, c0])
        accumulators = accumulators[len(chunks) :]
        results[index] = gradient
    return results


def _is_tensor(op: Operation, index: int) -> bool:
    from xdsl.dialects.builtin import TensorType

    return isinstance(op.results[index].type, TensorType)


# ---- RMS norm --------------------------------------------------------------------------------------------------


def _fused_rms_norm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`aten._fused_rms_norm`: out = x * rstd [* weight], rstd = rsqrt(mean(x^2) + eps) over the normalized dims
    (fp32, rounded once to out's type; rstd fp32 with size-1 normalized dims, as ATen saves it)."""
    x, weight = args["input"], args.get("weight")
    shape = layout_of(x).shape
    axis = len(shape) - len(args["normalized_shape"])
    eps_value = args.get("eps")
    eps = float(eps_value) if eps_value is not None else _machine_epsilon(element_type_of(x))
    plan = _row_plan(em, op, x, axis, [weight] if weight is not None else [])
    if plan is not None:
        return _rms_norm_on_chip(em, op, x, plan, weight, eps)
    dims = list(range(axis, len(shape)))
    length = math.prod(shape[axis:])
    squares = emit_elementwise(em, shape, f32, [x], lambda e, t, r: TileMath(e, r).act("square", t[0], out=r))
    mean_square = emit_reduce(em, squares, dims, True, "add", f32, 1.0 / length if length else math.nan)
    rstd = _rstd(em, mean_square, eps)
    operands = [x, rstd] + ([weight] if weight is not None else [])
    out = emit_elementwise(em, shape, result_element_type(op, 0), operands, _product)
    return [out, _cast(em, rstd, result_element_type(op, 1), result_shape(op, 1))]


# ATen's eps when none is given: the machine epsilon of the type it computes in (fp32 for 16-bit inputs)
_DEFAULT_EPS = {"f64": 2.0**-52}
_FP32_EPS = 2.0**-23


def _machine_epsilon(element_type: Attribute) -> float:
    return _DEFAULT_EPS.get(runtime_dtype_name(element_type), _FP32_EPS)


def _product(em: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
    """The product of all tiles (fp32), rounded once to the result type."""
    m = TileMath(em, result)
    value = tiles[0]
    for position, factor in enumerate(tiles[1:], start=2):
        value = m.bin("multiply", value, factor, result if position == len(tiles) else None)
    return value


@dataclass
class _RmsNormNeighbours:
    """Ops next to an RMS norm that its row pass computes too: the upcast of its input that the function keeps
    (`hidden.float()`, saved for the backward) and the weight multiply of its result (`weight * normed`)."""

    upcast: Operation | None = None
    scale: Operation | None = None
    scale_weight: SSAValue | None = None  # the multiply's other operand, lowered


def _rms_norm_neighbours(em: LoopNestBuilder, op: Operation, length: int) -> _RmsNormNeighbours:
    """The neighbours torch-fuse-rms-norm-neighbours marked that this pass can take: a weight must be one strided
    run, defined before the norm."""
    from neuron_mlir.lowering.convert_torch_to_tile.context import context_of

    found = _RmsNormNeighbours()
    upcast = upcast_of_input(op)
    found.upcast = upcast if is_marked(upcast) else None
    scale = weight_product(op)
    lowered = context_of(em).lowered
    weight = lowered.get(scale[1]) if scale is not None and is_marked(scale[0]) else None
    if scale is not None and weight is not None and _single_stride(layout_of(weight), 0) is not None:
        found.scale, found.scale_weight = scale[0], weight
    return found


def _rms_norm_on_chip(
    em: LoopNestBuilder, op: Operation, x: SSAValue, plan: _RowPlan, weight: SSAValue | None, eps: float
) -> list[SSAValue]:
    """RMS norm as one pass over row tiles, rows on partitions and the normalized dims on the free axis:

        squares, summed = sum(x^2)                 ScalarE square, summed by the activation's accumulate
        rstd = rsqrt(summed / N + eps)             ScalarE, 1/N and eps as the free scale and bias
        out = x * rstd [* weight]                  the [P, 1] rstd as a per-partition scalar, rounded once

    reading each row once. It also writes what its neighbours (`_RmsNormNeighbours`) would have computed from the
    rows it holds, and those ops' own nests disappear: the fp32 upcast of the input, and `out * weight` (rounded
    as that op rounds it, from the rounded `out`); `out` itself is stored only when something else reads it."""
    from neuron_mlir.lowering.convert_torch_to_tile.context import absorb

    length = plan.length
    shape = layout_of(x).shape
    out_type = result_element_type(op, 0)
    neighbours = _rms_norm_neighbours(em, op, length)
    # a neighbour's rows (and the weight it multiplies by) live in the pass too: leave it its own nest when they
    # would not fit beside the pass's own (x, its squares, out and the weight: `_row_plan`'s count)
    spare = body_budget_bytes(em) - length * (_bytes(element_type_of(x)) + 4 + _bytes(out_type))
    spare -= length * (4 + _bytes(element_type_of(weight)) if weight is not None else 0)
    if neighbours.scale_weight is not None:
        cost = length * (_bytes(out_type) + _bytes(element_type_of(neighbours.scale_weight)))
        if cost > spare:
            neighbours.scale = neighbours.scale_weight = None
        spare -= cost if neighbours.scale is not None else 0
    if neighbours.upcast is not None and spare < length * 4:
        neighbours.upcast = None
    out = alloc(em, shape, out_type)
    rstd_out = alloc(em, result_shape(op, 1), result_element_type(op, 1))
    upcast = alloc(em, shape, f32) if neighbours.upcast is not None else None
    scaled = alloc(em, shape, out_type) if neighbours.scale is not None else None
    store_out = any(use.operation is not neighbours.scale for use in op.results[0].uses)
    store_rstd = bool(op.results[1].uses)
    row_dims = plan.row_dims
    x_view = view(em, x, plan.x_view_layout)

    def rows_view(value: SSAValue) -> SSAValue:
        return view(em, value, Layout((*row_dims, length), (*plan.out_rows, 1), 0))

    out_view, rstd_view = rows_view(out), view(em, rstd_out, Layout((*row_dims, 1), (*plan.stat_rows, 1), 0))
    upcast_view = rows_view(upcast) if upcast is not None else None
    scaled_view = rows_view(scaled) if scaled is not None else None
    last = row_dims[-1]
    heights = {min(PARTITION_TILE, last)} | ({last % PARTITION_TILE} if last % PARTITION_TILE else set())
    factors = [(v, _single_stride(layout_of(v), 0)) for v in (weight, neighbours.scale_weight) if v is not None]
    params: dict[int, list[SSAValue]] = {}
    for p in sorted(heights):
        params[p] = []
        for value, stride in factors:
            assert stride is not None
            broadcast = view(em, value, Layout((p, length), (0, stride), layout_of(value).offset))
            params[p].append(load(em, broadcast, [0, 0], (p, length)))

    def row_tile(e: LoopNestBuilder, prefix: list[Index], p0: Index, p: int) -> None:
        indices = [*prefix, p0, 0]
        tile_x = load(e, x_view, indices, (p, length))
        if upcast_view is not None:
            widened = e.insert(tile.CopyOp(tile_x, TileType((p, length), f32, Memory.SBUF))).result
            store(e, widened, upcast_view, indices)
        squares = e.insert(tile.UnaryOp(tile_x, "square", TileType((p, length), f32, Memory.SBUF))).result
        summed = e.insert(tile.ReduceOp(squares, "add", column_tile(p))).result
        rstd = e.insert(tile.UnaryOp(summed, "rsqrt", column_tile(p), scale=1.0 / length, bias_value=eps)).result
        final = TileType((p, length), out_type, Memory.SBUF)
        inner = TileType((p, length), f32, Memory.SBUF)
        tiles = list(params[p])
        value = e.insert(
            tile.BinaryScalarOp(tile_x, "multiply", inner if weight is not None else final, column=rstd)
        ).result
        if weight is not None:
            value = e.insert(tile.BinaryOp(value, tiles.pop(0), "multiply", final)).result
        if store_out:
            store(e, value, out_view, indices)
        if scaled_view is not None:
            store(e, e.insert(tile.BinaryOp(value, tiles.pop(0), "multiply", final)).result, scaled_view, indices)
        if store_rstd:
            store(e, rstd, rstd_view, [*prefix, p0, 0])

    for_row_tiles(em, row_dims, row_tile)
    for absorbed_op, written in ((neighbours.upcast, upcast), (neighbours.scale, scaled)):
        if absorbed_op is not None and written is not None:
            absorb(em, absorbed_op, _written_by_row_pass(written))
    return [out, rstd_out]


def _fused_rms_norm_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
    """`aten._fused_rms_norm_backward`, with gw = grad_out [* weight] and xhat = x * rstd over the normalized dims:

        grad_input  = rstd * (gw - xhat * mean(gw * xhat)) = gw * rstd - x * (rstd^3 * sum(gw * x) / N)
        grad_weight = sum(grad_out * xhat) over the leading dims

    in fp32, each result rounded once to its type."""
    x, grad, rstd, weight = args["input"], args["grad_out"], args["rstd"], args.get("weight")
    shape = layout_of(x).shape
    axis = len(shape) - len(args["normalized_shape"])
    mask = [bool(m) and _is_tensor(op, i) for i, m in enumerate(args["output_mask"])]
    mask[1] = mask[1] and weight is not None
    results: list[SSAValue | None] = [None, None]
    if mask[0]:
        on_chip = _rms_norm_backward_on_chip(em, op, x, grad, rstd, weight, axis)
        results[0] = on_chip if on_chip is not None else _rms_norm_grad_input(em, op, x, grad, rstd, weight, axis)
    if mask[1]:
        xhat = emit_elementwise(em, shape, f32, [x, rstd], _product)
        product = emit_elementwise(em, shape, f32, [grad, xhat], _multiply)
        results[1] = _sum_over(em, product, range(axis), result_element_type(op, 1))
    return results


def _rms_norm_grad_input(
    em: LoopNestBuilder,
    op: Operation,
    x: SSAValue,
    grad: SSAValue,
    rstd: SSAValue,
    weight: SSAValue | None,
    axis: int,
) -> SSAValue:
    """grad_input from elementwise nests and a reduction (rows that do not fit on chip)."""
    shape = layout_of(x).shape
    length = math.prod(shape[axis:])
    gw = emit_elementwise(em, shape, f32, [grad, weight], _multiply) if weight is not None else grad
    gx = emit_elementwise(em, shape, f32, [gw, x], _multiply)
    total = emit_reduce(em, gx, list(range(axis, len(shape))), True, "add", f32)

    def coefficient(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        r, summed = tiles
        cube = m.bin("multiply", m.bin("multiply", r, r), r)
        return m.sc("multiply", m.bin("multiply", cube, summed), -1.0 / length, result)

    c = emit_elementwise(em, layout_of(total).shape, f32, [rstd, total], coefficient)

    def grad_input(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        g_tile, r, x_tile, c_tile = tiles
        return m.bin("add", m.bin("multiply", g_tile, r), m.bin("multiply", x_tile, c_tile), result)

    return emit_elementwise(em, shape, result_element_type(op, 0), [gw, rstd, x, c], grad_input)


def _rms_norm_backward_on_chip(
    em: LoopNestBuilder,
    op: Operation,
    x: SSAValue,
    grad: SSAValue,
    rstd: SSAValue,
    weight: SSAValue | None,
    axis: int,
) -> SSAValue | None:
    """grad_input in one pass over row tiles (rows on partitions, the normalized dims on the free axis), or None
    when a row's tiles do not fit or the normalized dims of an operand are not one strided run:

        gw = grad_out [* weight]                           VectorE, with the weight as a partition-broadcast tile
        s = sum(gw * x)                                    one tensor_tensor with its free-axis sum
        c = -rstd^3 * s / N                                [P, 1] columns
        grad_input = x * c + gw * rstd                     per-partition scalars, rounded once

    reading grad_out, x and rstd once. A cast of grad_input to a 16-bit type (the chain's `.to(dtype)` of the
    upcast it differentiates) that follows is written from the same tile and its own nest disappears; the fp32
    result is stored only when something else reads it."""

    from neuron_mlir.lowering.convert_torch_to_tile.context import absorb

    layout, grad_layout = layout_of(x), layout_of(grad)
    shape = layout.shape
    length = math.prod(shape[axis:])
    strides = [_single_stride(layout, axis), _single_stride(grad_layout, axis)]
    weight_stride = _single_stride(layout_of(weight), 0) if weight is not None else 1
    if not shape[axis:] or length == 0 or None in strides or weight_stride is None:
        return None
    out_type = result_element_type(op, 0)
    downcast = narrowing_of_gradient(op)
    downcast = downcast if is_marked(downcast) else None
    narrow_type = result_element_type(downcast, 0) if downcast is not None else None
    store_out = any(use.operation is not downcast for use in op.results[0].uses)
    column_sum = _column_sum_neighbour(em, op, axis)
    # live at once: x, grad_out, three fp32 rows (gw and the two terms; the product dies in its sum), the stored
    # results and the weight
    stored = (_bytes(out_type) if store_out else 0) + (_bytes(narrow_type) if narrow_type is not None else 0)
    row_bytes = length * (_bytes(element_type_of(x)) + _bytes(element_type_of(grad)) + 3 * 4 + stored)
    row_bytes += length * (_bytes(element_type_of(weight)) if weight is not None else 0)
    if row_bytes > body_budget_bytes(em):
        return None
    if column_sum is not None and row_bytes + length * 2 * column_sum.bytes > body_budget_bytes(em):
        column_sum = None
    leading = shape[:axis] or (1,)
    stat_layout = layout_of(rstd)
    row_dims, (x_rows, grad_rows, rstd_rows, out_rows) = collapse(
        leading,
        [
            layout.strides[:axis] or (0,),
            grad_layout.strides[:axis] or (0,),
            stat_layout.strides[:axis] or (0,),
            row_major_strides(shape)[:axis] or (0,),
        ],
    )
    if not row_dims:
        row_dims, x_rows, grad_rows, rstd_rows, out_rows = (1,), (0,), (0,), (0,), (0,)
    x_stride, grad_stride = strides
    saved_view = None
    if column_sum is not None:
        saved_layout = layout_of(column_sum.saved)
        saved_dims, (saved_rows,) = collapse(leading, [saved_layout.strides[:axis] or (0,)])
        saved_stride = _single_stride(saved_layout, axis)
        if len(row_dims) != 1 or list(saved_dims) != list(row_dims) or saved_stride is None:
            column_sum = None
        else:
            saved_view = view(
                em, column_sum.saved, Layout((row_dims[0], length), (saved_rows[0], saved_stride), saved_layout.offset)
            )

    def rows_view(value: SSAValue, row_strides: Sequence[int], stride: int, width: int) -> SSAValue:
        return view(em, value, Layout((*row_dims, width), (*row_strides, stride), layout_of(value).offset))

    out = alloc(em, shape, out_type)
    narrow = alloc(em, shape, narrow_type) if narrow_type is not None else None
    x_view = rows_view(x, x_rows, x_stride, length)  # type: ignore[arg-type]
    grad_view = rows_view(grad, grad_rows, grad_stride, length)  # type: ignore[arg-type]
    rstd_view = rows_view(rstd, rstd_rows, 1, 1)
    out_view = rows_view(out, out_rows, 1, length)
    narrow_view = rows_view(narrow, out_rows, 1, length) if narrow is not None else None
    last = row_dims[-1]
    heights = {min(PARTITION_TILE, last)} | ({last % PARTITION_TILE} if last % PARTITION_TILE else set())
    weights: dict[int, SSAValue] = {}
    for p in sorted(heights):
        if weight is not None:
            broadcast = view(em, weight, Layout((p, length), (0, weight_stride), layout_of(weight).offset))
            weights[p] = load(em, broadcast, [0, 0], (p, length))

    ones: dict[int, SSAValue] = {}
    accumulators: list[SSAValue] = []
    if column_sum is not None:
        for p in sorted(heights):
            ones[p] = em.insert(tile.FillOp(1.0, TileType((p, 1), column_sum.product_type, Memory.SBUF))).result
        accumulators = [
            em.insert(tile.FillOp(0.0, TileType((1, size), f32, Memory.PSUM))).result for _, size in column_sum.chunks
        ]

    def row_tile(
        e: LoopNestBuilder, prefix: list[Index], p0: Index, p: int, accs: list[SSAValue] | None = None
    ) -> list[SSAValue]:
        indices = [*prefix, p0, 0]
        row_type = TileType((p, length), f32, Memory.SBUF)
        tile_x = load(e, x_view, indices, (p, length))
        gw = load(e, grad_view, indices, (p, length))
        r = load(e, rstd_view, indices, (p, 1), f32)
        updated: list[SSAValue] = []
        if column_sum is not None and accs is not None:
            assert saved_view is not None
            saved = load(e, saved_view, indices, (p, length))
            moving_type = TileType((p, length), column_sum.product_type, Memory.SBUF)
            product = e.insert(tile.BinaryOp(gw, saved, "multiply", moving_type)).result
            for acc, (c0, size) in zip(accs, column_sum.chunks, strict=True):
                part = product
                if size != length:
                    chunk_type = TileType((p, size), column_sum.product_type, Memory.SBUF)
                    part = e.insert(tile.ExtractOp(product, [e.index(c0)], chunk_type)).result
                result_type = TileType((1, size), f32, Memory.PSUM)
                updated.append(e.insert(tile.MatmulOp(ones[p], part, result_type, acc)).result)
        if weight is not None:
            gw = e.insert(tile.BinaryOp(gw, weights[p], "multiply", row_type)).result
        product = e.insert(tile.BinaryOp(gw, tile_x, "multiply", row_type)).result
        summed = e.insert(tile.ReduceOp(product, "add", column_tile(p))).result
        square = e.insert(tile.BinaryOp(r, r, "multiply", column_tile(p))).result
        cube = e.insert(tile.BinaryOp(square, r, "multiply", column_tile(p))).result
        scaled = e.insert(tile.BinaryOp(cube, summed, "multiply", column_tile(p))).result
        c = e.insert(tile.BinaryScalarOp(scaled, "multiply", column_tile(p), scalar=-1.0 / length)).result
        correction = e.insert(tile.BinaryScalarOp(tile_x, "multiply", row_type, column=c)).result
        direct = e.insert(tile.BinaryScalarOp(gw, "multiply", row_type, column=r)).result
        if store_out:
            value = e.insert(tile.BinaryOp(correction, direct, "add", TileType((p, length), out_type))).result
            store(e, value, out_view, indices)
        if narrow_view is not None:
            rounded = TileType((p, length), narrow_type)  # type: ignore[arg-type]
            store(e, e.insert(tile.BinaryOp(correction, direct, "add", rounded)).result, narrow_view, indices)
        return updated

    if column_sum is None:
        for_row_tiles(em, row_dims, row_tile)
    else:
        from neuron_mlir.lowering.convert_torch_to_tile.matmul import carry

        full, rest = divmod(row_dims[0], PARTITION_TILE)
        accumulators = carry(
            em, 0, full * PARTITION_TILE, PARTITION_TILE, accumulators,
            lambda e, p0, accs: row_tile(e, [], p0, PARTITION_TILE, accs),
        )  # fmt: skip
        if rest:
            accumulators = row_tile(em, [], full * PARTITION_TILE, rest, accumulators)
        total = alloc(em, column_sum.shape, column_sum.sum_type)
        flat = view(em, total, Layout((1, length), (0, 1), 0))
        for (c0, size), acc in zip(column_sum.chunks, accumulators, strict=True):
            value = em.insert(tile.CopyOp(acc, TileType((1, size), column_sum.sum_type, Memory.SBUF))).result
            store(em, value, flat, [0, c0])
        product_shape, product_type = shape, column_sum.product_type
        absorb(em, column_sum.product, lambda e, absorbed, arguments: [alloc(e, product_shape, product_type)])
        absorb(em, column_sum.total, _written_by_row_pass(total))
    if downcast is not None and narrow is not None:
        absorb(em, downcast, _written_by_row_pass(narrow))
    return out


def _written_by_row_pass(value: SSAValue) -> Any:
    """The lowering of an op whose result a row pass already wrote to `value`."""

    def lowering(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        return [value]

    return lowering


@dataclass
class _ColumnSum:
    """`sum(grad_out * saved, leading dims)` after an RMS norm backward (the weight gradient as autograd writes
    it, from the normalized rows the forward saved): the product op, the sum op, the saved rows (lowered), and
    how the sum accumulates (per 512-wide chunk of the row, a ones-column matmul into PSUM)."""

    product: Operation
    total: Operation
    saved: SSAValue
    product_type: Attribute
    sum_type: Attribute
    shape: tuple[int, ...]
    chunks: list[tuple[int, int]]

    @property
    def bytes(self) -> int:
        return _bytes(self.product_type)


def _column_sum_neighbour(em: LoopNestBuilder, op: Operation, axis: int) -> _ColumnSum | None:
    """The weight gradient's product and column sum of `op`'s grad_out that the row pass can accumulate, if any."""
    from neuron_mlir.lowering.convert_torch_to_tile.context import context_of
    from neuron_mlir.lowering.convert_torch_to_tile.matmul import matmul_limits

    x = op.operands[1]
    lowered = context_of(em).lowered
    length = math.prod(tensor_shape(x)[axis:])
    _, _, n_limit = matmul_limits(em)
    chunks = [(c0, min(n_limit, length - c0)) for c0 in range(0, length, n_limit)]
    if len(chunks) > emitter_target(em).psum_banks // _GRADIENT_BANK_SHARE:
        return None
    gradient = weight_gradient(op)
    if gradient is None or not is_marked(gradient[1]) or gradient[2] not in lowered:
        return None
    product, total, saved = gradient
    product_type = result_element_type(product, 0)
    summed_shape = tensor_shape(total.results[0])
    return _ColumnSum(product, total, lowered[saved], product_type, product_type, summed_shape, chunks)


# ---- group norm ------------------------------------------------------------------------------------------------


def _grouped(em: LoopNestBuilder, x: SSAValue, n: int, c: int, groups: int) -> SSAValue:
    """x ([N, C, *]) viewed as [N, G, C/G, HxW]."""
    hw = layout_of(x).num_elements // max(1, n * c)
    return _reshaped(em, x, [n, groups, c // groups, hw])


def _group_params(em: LoopNestBuilder, vector: SSAValue | None, c: int, groups: int) -> SSAValue | None:
    """A [C] parameter viewed as [G, C/G, 1] (broadcasting over N and HxW)."""
    if vector is None:
        return None
    layout = layout_of(vector)
    stride = layout.strides[0]
    return view(em, vector, Layout((groups, c // groups, 1), (stride * (c // groups), stride, 0), layout.offset))


def _group_norm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    x = args["input"]
    n, c, groups = int(args["N"]), int(args["C"]), int(args["group"])
    grouped = _grouped(em, x, n, c, groups)
    variance, mean = emit_variance(em, grouped, [2, 3], True, 0.0, f32)
    rstd = _rstd(em, variance, float(args["eps"]))
    weight = _group_params(em, args.get("weight"), c, groups)
    bias = _group_params(em, args.get("bias"), c, groups)
    out = _normalize(em, grouped, mean, rstd, weight, bias, result_element_type(op, 0))
    out = _reshaped(em, out, layout_of(x).shape)
    stats = result_shape(op, 1)
    return [out, _cast(em, mean, result_element_type(op, 1), stats), _cast(em, rstd, result_element_type(op, 2), stats)]


def _group_norm_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
    x, grad = args["input"], args["grad_out"]
    n, c, groups = int(args["N"]), int(args["C"]), int(args["group"])
    grouped_x, grouped_grad = _grouped(em, x, n, c, groups), _grouped(em, grad, n, c, groups)
    stats_shape = (n, groups, 1, 1)
    mean, rstd = _reshaped(em, args["mean"], stats_shape), _reshaped(em, args["rstd"], stats_shape)
    weight = _group_params(em, args.get("weight"), c, groups)
    types = [result_element_type(op, i) if _is_tensor(op, i) else f32 for i in range(3)]
    mask = [m and _is_tensor(op, i) for i, m in enumerate(_mask(args))]
    results = _normalize_backward(em, grouped_x, grouped_grad, mean, rstd, weight, [2, 3], [0, 3], mask, types)
    shapes = [layout_of(x).shape, (c,), (c,)]
    return [None if r is None else _reshaped(em, r, s) for r, s in zip(results, shapes, strict=True)]


# ---- batch norm ------------------------------------------------------------------------------------------------


def _batch_dims(x: SSAValue) -> list[int]:
    return [d for d in range(len(layout_of(x).shape)) if d != 1]


def _running_update(
    em: LoopNestBuilder, running: SSAValue, batch: SSAValue, momentum: float, factor: float, out_type: Attribute
) -> SSAValue:
    """(1 - momentum) * running + momentum * factor * batch."""

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        old = m.sc("multiply", tiles[0], 1.0 - momentum)
        return m.bin("add", old, m.sc("multiply", tiles[1], momentum * factor), result)

    return emit_elementwise(em, layout_of(running).shape, out_type, [running, batch], compute)


# Most values per channel whose mean is the first pass's shift (one contiguous run each): enough that the shift
# is a fraction of the spread from the mean, few enough that the nest finding it costs next to nothing.
PILOT_VALUES = 64


def _scaled_copy(scale: float) -> Callable[[LoopNestBuilder, SSAValue, RowTile], SSAValue]:
    """A reduction's chunk transform x * scale as one ScalarE activation, whose accumulate then takes the sum
    (neuron-fuse-instructions): a scaled sum in one instruction."""

    def transform(e: LoopNestBuilder, chunk: SSAValue, row: RowTile) -> SSAValue:
        return e.insert(tile.UnaryOp(chunk, "copy", chunk.type, scale=scale)).result  # type: ignore[arg-type]

    return transform


def _pilot_run(layout: Layout) -> tuple[int, int]:
    """(count, stride) of the values the first pass's shift averages: the leading run of the first
    image's plane of each channel that one stride walks (its innermost dims merged where they are contiguous),
    at most `PILOT_VALUES` of them; a count of 1 (one value, no run) at 1x1 spatial size."""
    dims, (strides,) = collapse(layout.shape[2:], [layout.strides[2:]])
    if not dims:
        return 1, 0
    return min(dims[-1], PILOT_VALUES), strides[-1]


def _batch_statistics(em: LoopNestBuilder, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(m, r, var) per channel: m the mean in fp32, r what m lost to its rounding (m + r is the mean to fp32
    precision) and var the variance about m + r.

    A mean summed from the values themselves is rounded at least once per value against the size of the sum, and
    where a channel's values are few and close together against their mean (a tiny batch at 1x1 spatial size)
    that rounding is not small against the deviations: the normalized values, and the gradients the backward
    computes from them, would be off by a constant fraction of the spread. So the first pass sums the values'
    differences from a shift f near the mean (exact for values within a factor of two of it, so the sum only
    rounds against the spread and against N |f - mean|): m = f + s/N rounded once, r = (f - m) + s/N. f is the
    mean of up to `PILOT_VALUES` of the channel's first values (`_pilot_run`), so |f - mean| is a fraction of the
    spread, not the spread itself as for a single value. The second pass is the usual sum of squared deviations
    from m, less r^2 (tiny against it) to centre it on m + r."""
    layout = layout_of(x)
    dims = _batch_dims(x)
    channels = (layout.shape[1],)
    count = math.prod(layout.shape[d] for d in dims)
    if count == 0:  # no value: a NaN mean and variance (the reductions' result over nothing), nothing lost
        variance, mean = emit_variance(em, x, dims, False, 0.0, f32)
        residual = emit_elementwise(em, channels, f32, [], lambda e, t, r: TileMath(e, r).fill(0.0, r))
        return mean, residual, variance
    pilot, stride = _pilot_run(layout)
    if pilot == 1:
        first = _cast_copy(em, view(em, x, Layout(channels, (layout.strides[1],), layout.offset)), f32)
    else:
        leading = view(em, x, Layout((*channels, pilot), (layout.strides[1], stride), layout.offset))
        first = emit_reduce(em, leading, [1], False, "add", f32, transform=_scaled_copy(1.0 / pilot))
    space = ReductionSpace(em, x, dims)

    def from_column(column_of: SSAValue, square: bool) -> Any:
        column_view = space.kept_view(em, column_of)

        def transform(e: LoopNestBuilder, chunk: SSAValue, row: RowTile) -> SSAValue:
            chunk_type = chunk.type
            assert isinstance(chunk_type, TileType)
            column = load(e, column_view, [*row.indices, 0], (row.partitions, 1), f32)
            negated = e.insert(tile.BinaryScalarOp(column, "multiply", column_tile(row.partitions), scalar=-1.0))
            # one ScalarE activation with the column as its per-partition bias, whose accumulate then takes the
            # reduction's sum (neuron-fuse-instructions)
            fn = "square" if square else "copy"
            return e.insert(tile.UnaryOp(chunk, fn, chunk_type, bias=negated.result)).result

        return transform

    shift = emit_reduce(em, x, dims, False, "add", f32, 1.0 / count, from_column(first, False))
    mean = _add(em, first, shift)

    def lost(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        return m.bin("add", m.bin("subtract", tiles[0], tiles[1]), tiles[2], result)

    residual = emit_elementwise(em, channels, f32, [first, mean, shift], lost)
    squares = emit_reduce(em, x, dims, False, "add", f32, 1.0 / count, from_column(mean, True))

    def corrected(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        return m.bin("subtract", tiles[0], m.bin("multiply", tiles[1], tiles[1]), result)

    variance = emit_elementwise(em, channels, f32, [squares, residual], corrected)
    return mean, residual, variance


def _add(em: LoopNestBuilder, a: SSAValue, b: SSAValue) -> SSAValue:
    """a + b over their (common) shape, in fp32."""
    return emit_elementwise(
        em, layout_of(a).shape, f32, [a, b], lambda e, t, r: TileMath(e, r).bin("add", t[0], t[1], r)
    )


def _product_of(em: LoopNestBuilder, a: SSAValue, b: SSAValue) -> SSAValue:
    """a * b over their (common) shape, in fp32."""
    return emit_elementwise(em, layout_of(a).shape, f32, [a, b], _multiply)


def _residual_shift(em: LoopNestBuilder, residual: SSAValue, scale: SSAValue, bias: SSAValue | None) -> SSAValue:
    """bias - residual * scale per channel: (x - m) * scale + this is (x - (m + residual)) * scale + bias."""

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        value = m.bin("multiply", tiles[0], tiles[1])
        if bias is not None:
            return m.bin("subtract", tiles[2], value, result)
        return m.sc("multiply", value, -1.0, result)

    operands = [residual, scale] + ([bias] if bias is not None else [])
    return emit_elementwise(em, layout_of(residual).shape, f32, operands, compute)


def _normalize_by_channel(
    em: LoopNestBuilder, x: SSAValue, centre: SSAValue, scale: SSAValue, shift: SSAValue, out_type: Attribute
) -> SSAValue | None:
    """(x - centre) * scale + shift for per-channel (dim 1) fp32 vectors, channels on partitions: each chunk of a
    channel tile is two tensor_scalar steps with the vectors' [P, 1] columns, loaded once per channel tile, as
    their per-partition operands (where a broadcasting elementwise nest would fill a tile per vector and
    per chunk). None for an input this does not lay out (not contiguous, or empty): the caller broadcasts."""
    layout = layout_of(x)
    shape = layout.shape
    if len(shape) < 2 or not layout.is_contiguous() or 0 in shape:
        return None
    batch, channels, rest = shape[0], shape[1], math.prod(shape[2:])
    rows = Layout((batch, channels, rest), (channels * rest, rest, 1), 0)
    out = alloc(em, shape, out_type)
    source = view(em, x, Layout(rows.shape, rows.strides, layout.offset))
    target = view(em, out, rows)
    vectors = [view(em, v, Layout((channels, 1), (layout_of(v).strides[0], 0), layout_of(v).offset)) for v in
               (centre, scale, shift)]  # fmt: skip

    def channel_tile(e: LoopNestBuilder, c0: Index, p: int) -> None:
        centres, scales, shifts = (load(e, v, [c0, 0], (p, 1), f32) for v in vectors)

        _normalize_channel_tile(e, source, target, c0, p, (batch, rest), (centres, scales, shifts), out_type)

    em.for_tiles(channels, PARTITION_TILE, channel_tile)
    return out


def _channel_rows(shape: Sequence[int]) -> Layout:
    """A contiguous [N, C, ...] tensor as [images, C, length] runs of each channel's values: [N, C, HxW] with
    unit-stride runs, and a 1-d batch norm's [N, C] as one run of N values at stride C per channel (one strided
    DMA per chunk rather than N one-element loads)."""
    batch, channels, rest = shape[0], shape[1], math.prod(shape[2:])
    if rest == 1:
        return Layout((1, channels, batch), (0, 1, channels), 0)
    return Layout((batch, channels, rest), (channels * rest, rest, 1), 0)


def _normalize_channel_tile(
    em: LoopNestBuilder,
    source: SSAValue,
    target: SSAValue,
    c0: Index,
    p: int,
    extent: tuple[int, int],
    columns: tuple[SSAValue, SSAValue, SSAValue],
    out_type: Attribute,
) -> None:
    """target = (source - centre) * scale + shift for the channel tile [c0, c0 + p) of [images, C, length] views,
    with (centre, scale, shift) per-partition [p, 1] columns: three tensor_scalar steps per chunk."""
    images, length = extent

    def chunk(e: LoopNestBuilder, n: Index, f0: Index, size: int) -> None:
        values = load(e, source, [n, c0, f0], (p, size))
        store(e, _normalized(e, values, columns, out_type), target, [n, c0, f0])

    em.for_each(images, lambda e, n: e.for_tiles(length, FREE_TILE, lambda e2, f0, size: chunk(e2, n, f0, size)))


def _normalized(
    em: LoopNestBuilder, values: SSAValue, columns: tuple[SSAValue, SSAValue, SSAValue], out_type: Attribute
) -> SSAValue:
    """(values - centre) * scale + shift in fp32, rounded once to `out_type`, with (centre, scale, shift)
    per-partition [P, 1] columns."""
    centre, scale, shift = columns
    shape = values.type.get_shape()  # type: ignore[attr-defined]
    work = TileType(shape, f32, Memory.SBUF)
    centred = em.insert(tile.BinaryScalarOp(values, "subtract", work, column=centre)).result
    scaled = em.insert(tile.BinaryScalarOp(centred, "multiply", work, column=scale)).result
    return em.insert(tile.BinaryScalarOp(scaled, "add", TileType(shape, out_type, Memory.SBUF), column=shift)).result


Chunk = tuple[Index, Index, int]  # (image, offset, size) of a channel tile's rows


def _even_chunks(images: int, length: int) -> list[tuple[int, int, int]]:
    """Every image's run of `length` values in the fewest chunks of at most FREE_TILE values, of sizes that differ
    by at most one (6272 values: four of 1568, where FREE_TILE-sized chunks leave a 128-value one whose fixed
    costs buy next to nothing)."""
    count = -(-length // FREE_TILE)
    size, larger = divmod(length, count)
    offsets = [i * size + min(i, larger) for i in range(count + 1)]
    return [(n, offsets[i], offsets[i + 1] - offsets[i]) for n in range(images) for i in range(count)]


# Chunks between a chunk's sums and the add that takes them into the totals (see `_ChannelPasses.sums`).
_FOLD_LAG = 1


class _ChannelPasses:
    """The two passes of a batch norm's channel nest over a channel tile's rows ([images, C, length] views): the
    first loads each chunk and sums it into [P, 1] columns, the second writes a result from the same chunk once the
    sums have become per-channel columns.

    With `keep` (`_for_channel_tiles` decides it), the loaded chunks stay on chip: the first pass is straight-line
    code whose loads nothing serialises (no buffer is reused), and the second reads them there, so x (and dy) cross
    HBM once instead of twice. Otherwise the second pass loads every chunk again, in loops over images and
    chunks."""

    def __init__(
        self, images: int, length: int, keep: bool, load_chunk: Callable[[LoopNestBuilder, Chunk], list[SSAValue]]
    ) -> None:
        self.images, self.length, self.load_chunk = images, length, load_chunk
        self.kept: list[tuple[Chunk, list[SSAValue]]] | None = [] if keep else None

    @property
    def chunk_sizes(self) -> list[int] | None:
        """The sizes of the chunks the first pass walks in straight-line code, in order (None: in loops)."""
        if self.kept is None:
            return None
        return [size for _, _, size in _even_chunks(self.images, self.length)]

    def sums(
        self,
        em: LoopNestBuilder,
        column: TileType,
        chunk_sums: Callable[[LoopNestBuilder, list[SSAValue], int, int | None], list[SSAValue]],
    ) -> list[SSAValue]:
        """The [P, 1] sums `chunk_sums(e, tiles, size, ordinal)` gives for each chunk's loaded tiles, added up
        over the tile's rows; `ordinal` indexes `chunk_sizes` (None for the chunks of loops)."""

        def fold(e: LoopNestBuilder, acc: list[SSAValue], more: list[SSAValue]) -> list[SSAValue]:
            return [e.insert(tile.BinaryOp(a, b, "add", column)).result for a, b in zip(acc, more, strict=True)]

        def of(e: LoopNestBuilder, chunk: Chunk, ordinal: int | None = None) -> list[SSAValue]:
            tiles = self.load_chunk(e, chunk)
            if self.kept is not None:
                self.kept.append((chunk, tiles))
            return chunk_sums(e, tiles, chunk[2], ordinal)

        if self.kept is not None:
            # a chunk's sums join the totals `_FOLD_LAG` chunks later: an add written right after its chunk would
            # hold its engine's queue (in order) until that chunk's sums were done, and with it that engine's share
            # of the next chunk; adds written after the last chunk would all wait for it
            parts: list[list[SSAValue]] = []
            totals: list[SSAValue] | None = None
            for ordinal, chunk in enumerate(_even_chunks(self.images, self.length)):
                parts.append(of(em, chunk, ordinal))
                if len(parts) > _FOLD_LAG:
                    more = parts.pop(0)
                    totals = more if totals is None else fold(em, totals, more)
            for more in parts:
                totals = more if totals is None else fold(em, totals, more)
            assert totals is not None  # a channel nest's rows are never empty
            return totals

        def image(e: LoopNestBuilder, n: Index) -> list[SSAValue]:
            return e.accumulate_tile_values(
                self.length,
                FREE_TILE,
                lambda e2, f0, size: of(e2, (n, f0, size)),
                lambda e2, f0, size, acc: fold(e2, acc, of(e2, (n, f0, size))),
            )

        return em.accumulate_tile_values(
            self.images, 1, lambda e, n, _: image(e, n), lambda e, n, _, acc: fold(e, acc, image(e, n))
        )

    def rewrite(self, em: LoopNestBuilder, write: Callable[[LoopNestBuilder, list[SSAValue], Chunk], None]) -> None:
        """`write(e, tiles, chunk)` for every chunk, with its tiles as the first pass loaded them (kept on chip,
        or loaded again)."""
        if self.kept is not None:
            for kept_chunk, tiles in self.kept:
                write(em, tiles, kept_chunk)
            return

        def reload(e: LoopNestBuilder, n: Index, f0: Index, size: int) -> None:
            write(e, self.load_chunk(e, (n, f0, size)), (n, f0, size))

        def image(e: LoopNestBuilder, n: Index) -> None:
            e.for_tiles(self.length, FREE_TILE, lambda e2, f0, size: reload(e2, n, f0, size))

        em.for_each(self.images, image)


# Chunks up to which the channel tiles' passes are straight-line code (each chunk is a handful of instructions per
# pass): beyond, the channel tiles run in a loop and only one tile's chunks are written out.
_MAX_STRAIGHT_CHUNKS = 128


def _for_channel_tiles(
    em: LoopNestBuilder,
    channels: int,
    images: int,
    length: int,
    value_bytes: int,
    channel_tile: Callable[[LoopNestBuilder, Index, int, bool], Callable[[], None]],
) -> None:
    """Run a batch norm's channel nest over its channel tiles: `channel_tile(e, c0, p, keep)` emits a tile's first
    pass (`_ChannelPasses`, keeping its chunks on chip with `keep`) and returns its second.

    Engines run their instructions in order, so a tile's first pass written after the previous tile's second waits
    for it, although its loads and sums depend on nothing there (256 channels: two tiles, one after the other,
    each half idle). Where two tiles' chunks fit `body_budget_bytes` per partition (`value_bytes` per value: x's
    itemsize, or x's and dy's), the tiles are straight-line code in a pipeline, each tile's first pass before the
    previous tile's second; where one tile's fit, a loop of tiles keeps each tile's chunks; else a loop reads them
    twice."""
    tiles = -(-channels // PARTITION_TILE)
    tile_bytes = images * length * value_bytes
    chunks = len(_even_chunks(images, length))
    budget = body_budget_bytes(em)
    live = min(tiles, 2)
    if live * tile_bytes <= budget and tiles * chunks <= _MAX_STRAIGHT_CHUNKS:
        pending: Callable[[], None] | None = None
        for t in range(tiles):
            c0 = t * PARTITION_TILE
            second = channel_tile(em, c0, min(PARTITION_TILE, channels - c0), True)
            if pending is not None:
                pending()
            pending = second
        assert pending is not None  # a channel nest has a channel
        pending()
        return
    keep = tile_bytes <= budget and chunks <= _MAX_STRAIGHT_CHUNKS
    em.for_tiles(channels, PARTITION_TILE, lambda e, c0, p: channel_tile(e, c0, p, keep)())


def _chunk_ns(em: LoopNestBuilder, opcode: str, engine: Engine, p: int, size: int, dtypes: dict[str, str]) -> float:
    """The cost model's time for one instruction over a [p, size] chunk, its operands' dtypes by role (an
    `accumulate_dst` role adds the [p, 1] sum)."""
    shapes = {
        role: cost_model.OperandShape(Memory.SBUF, dtype, p, (1,) if role == "accumulate_dst" else (size,), (1,))
        for role, dtype in dtypes.items()
    }
    return cost_model.compute_ns(opcode, engine, shapes, {"op": "add"}, emitter_target(em))


def _sums_on_scalar(
    sizes: list[int],
    fixed: Callable[[int], tuple[float, float]],
    on_scalar: Callable[[int], float],
    on_vector: Callable[[int], float],
) -> list[bool]:
    """For each chunk in order, whether a sum that either engine can take (ScalarE as an activation's accumulate,
    VectorE as a reduce or a tensor_scalar's accumulate) goes to ScalarE: each to the engine whose running load
    (`fixed(size)`: the chunk's other ScalarE and VectorE time) it leaves the lower, VectorE on ties. A pass whose
    sums all went to one engine waited for it while the other idled (a 64 x 112^2 backward's first pass: VectorE
    20 us, ScalarE 11)."""
    scalar = vector = 0.0
    choices = []
    for size in sizes:
        more_scalar, more_vector = fixed(size)
        scalar, vector = scalar + more_scalar, vector + more_vector
        to_scalar = max(scalar + on_scalar(size), vector) < max(scalar, vector + on_vector(size))
        choices.append(to_scalar)
        if to_scalar:
            scalar += on_scalar(size)
        else:
            vector += on_vector(size)
    return choices


# A part's values per image at least: shorter runs would cost the loads more in DMA descriptors (a run of 256
# 2-byte values is 512 bytes) than the idle lanes cost the engines.
_MIN_PART_VALUES = 256


@dataclass(frozen=True)
class _ChannelSplit:
    """Each channel of a batch norm over `parts` partitions, so that few channels still fill the engines' lanes.

    With channels on partitions, C channels use C of 128 lanes: 64 channels (ResNet's stem and first stage) leave
    half of every engine idle. A contiguous [N, C, L] tensor is also [N, C * parts, L / parts] with one stride per
    axis, partition c * parts + j holding the j-th part of channel c's run, so the per-channel nests run unchanged
    over parts; what differs is the statistics. A part's [P, 1] sums become its channel's by one TensorE matmul
    with the 0/1 matrix of `same channel` (`totals`), which leaves every part of a channel with the same total;
    per-channel vectors enter spread over their parts (`spread`) and leave from each channel's first part
    (`firsts`), both exact (one product by 1 per value). `parts` is 1 (everything as before) when no divisor of L
    above 1 fits the channels twice into 128 partitions with `_MIN_PART_VALUES` in each part, and for a batch norm
    over [N, C] (its runs are strided)."""

    channels: int
    parts: int

    @staticmethod
    def of(shape: Sequence[int]) -> _ChannelSplit:
        channels, length = shape[1], math.prod(shape[2:])
        parts = min(PARTITION_TILE // channels, length // _MIN_PART_VALUES) if channels else 1
        while parts > 1 and length % parts:
            parts -= 1
        return _ChannelSplit(channels, max(parts, 1))

    def rows(self, shape: Sequence[int]) -> Layout:
        """`_channel_rows(shape)` with each channel's run cut into its parts."""
        rows = _channel_rows(shape)
        if self.parts == 1:
            return rows
        batch, channels, length = rows.shape
        part = length // self.parts
        return Layout((batch, channels * self.parts, part), (rows.strides[0], part, 1), 0)

    def matrices(self, em: LoopNestBuilder) -> _SplitMatrices | None:
        """The matrices of `spread`, `totals` and `firsts`, made once per nest (None without parts)."""
        if self.parts == 1:
            return None
        c, rows = self.channels, self.channels * self.parts

        def where(offsets: SSAValue, test: str, bound: float) -> SSAValue:
            return em.insert(tile.BinaryScalarOp(offsets, test, sbuf_tile((c, rows)), scalar=bound)).result

        # spread[c, q] = 1 where q - parts c is in [0, parts): channel c's parts
        offsets = em.insert(tile.IotaOp(sbuf_tile((c, rows)), [1], 0, -self.parts)).result
        low, high = where(offsets, "is_ge", 0.0), where(offsets, "is_lt", float(self.parts))
        spread = em.insert(tile.BinaryOp(low, high, "multiply", sbuf_tile((c, rows)))).result
        same = to_sbuf(em, em.insert(tile.MatmulOp(spread, spread, TileType((rows, rows), f32, Memory.PSUM))).result)
        # first[q, c] = 1 where q = parts c: each channel's first part
        first = em.insert(tile.IotaOp(sbuf_tile((rows, c)), [-self.parts], 0, 1)).result
        first = em.insert(tile.BinaryScalarOp(first, "is_equal", sbuf_tile((rows, c)), scalar=0.0)).result
        return _SplitMatrices(spread, same, first)


@dataclass(frozen=True)
class _SplitMatrices:
    spread_matrix: SSAValue
    same_channel: SSAValue
    first_parts: SSAValue

    @staticmethod
    def _product(em: LoopNestBuilder, stationary: SSAValue, column: SSAValue) -> SSAValue:
        rows = stationary.type
        assert isinstance(rows, TileType)
        psum = TileType((rows.get_shape()[1], 1), f32, Memory.PSUM)
        return to_sbuf(em, em.insert(tile.MatmulOp(stationary, column, psum)).result)

    def spread(self, em: LoopNestBuilder, column: SSAValue) -> SSAValue:
        """A [C, 1] per-channel column as [C * parts, 1], each channel's value on each of its parts."""
        return self._product(em, self.spread_matrix, column)

    def totals(self, em: LoopNestBuilder, column: SSAValue) -> SSAValue:
        """Per-part [C * parts, 1] sums as their channel's totals, on every part of it."""
        return self._product(em, self.same_channel, column)

    def firsts(self, em: LoopNestBuilder, column: SSAValue) -> SSAValue:
        """A [C * parts, 1] column's values of each channel's first part, as [C, 1]."""
        return self._product(em, self.first_parts, column)


@dataclass(frozen=True)
class _RunningUpdate:
    """The running statistics a batch norm in training updates, as `_running_update` computes them: (1 - momentum)
    * running + momentum * factor * batch, for the mean (factor 1) and the variance (`unbiased`)."""

    mean: SSAValue
    var: SSAValue
    momentum: float
    unbiased: float
    types: tuple[Attribute, Attribute]


@dataclass(frozen=True)
class _ChannelNestResults:
    out: SSAValue
    mean: SSAValue  # in `saved_types[0]`
    rstd: SSAValue  # in `saved_types[1]`
    variance: SSAValue | None  # fp32; None where the nest updated the running statistics itself
    running: tuple[SSAValue, SSAValue] | None  # the updated running mean and variance
    casts: dict[int, SSAValue]  # the `casts` asked for, by position


def _batch_norm_training_by_channel(
    em: LoopNestBuilder,
    x: SSAValue,
    weight: SSAValue | None,
    bias: SSAValue | None,
    eps: float,
    out_type: Attribute,
    saved_types: tuple[Attribute, Attribute] = (f32, f32),
    running: _RunningUpdate | None = None,
    casts: dict[int, Attribute] | None = None,
) -> _ChannelNestResults | None:
    """Batch norm in training as one nest over channel tiles (channels on partitions): the result, the saved mean
    and rstd in `saved_types`, and the fp32 variance or, given `running`, the updated running statistics; None for
    an input this does not lay out (not contiguous, or empty). `casts` asks for per-channel results in other
    element types too, by position: 0 the mean, 1 the rstd, 2 and 3 the updated running mean and variance.

    Every per-channel result is written from the channel tile's columns, between the passes: small nests of their
    own after this one would wait, on engines that run their instructions in order, for the whole second pass, and
    their loads and stores of the vectors would queue behind its stores (the forward's last 3 us at 256 channels).

    Per channel tile, one pass over x sums s = sum(x - f) and q = sum((x - f)^2) about a shift f per channel, the
    mean of its first values as `_batch_statistics` takes it (`_pilot_run`), with two ScalarE activations with -f
    as their per-partition bias, summed by their accumulate; then, with N values per channel, m = f + s/N rounded
    once, r = (f - m) + s/N what m lost (m + r is the mean to fp32 precision, as `_batch_statistics` keeps it),
    var = q/N - (s/N)^2 (the shifted-data form about f: with f within the values' range, (s/N)^2 <= N var, so the
    subtraction cancels at most a factor N of q's magnitude, the rounding the sum of N squares already carries),
    and a second pass writes (x - m) * scale + shift with
    scale = rstd * weight and shift = bias - r * scale as per-partition columns (16-bit x and result: x * scale +
    (bias - (m + r) * scale), see `write`). The statistics never leave the channel tile between the passes, and x
    is read once where the chunks stay on chip (`_for_channel_tiles`), twice otherwise."""
    layout = layout_of(x)
    shape = layout.shape
    if len(shape) < 2 or not layout.is_contiguous() or 0 in shape:
        return None
    split = _ChannelSplit.of(shape)
    rows = split.rows(shape)
    channels, length = rows.shape[1], rows.shape[2]  # channels: their parts, when split
    norm = 1.0 / (rows.shape[0] * length * split.parts)
    out = alloc(em, shape, out_type)
    source = view(em, x, Layout(rows.shape, rows.strides, layout.offset))
    target = view(em, out, rows)
    pilot, stride = _pilot_run(layout)
    pilot = min(pilot, length)
    firsts = view(em, x, Layout((channels, pilot), (rows.strides[1], stride), layout.offset))
    affine = [
        view(em, v, Layout((split.channels, 1), (layout_of(v).strides[0], 0), layout_of(v).offset))
        for v in (weight, bias)
        if v is not None
    ]
    vector_view = Layout((split.channels, 1), (1, 0), 0)
    # the variance, or the updated running statistics instead
    vector_types = (*saved_types, *((f32,) if running is None else running.types))
    statistics = [alloc(em, (split.channels,), t) for t in vector_types]
    cast_results = {position: alloc(em, (split.channels,), t) for position, t in (casts or {}).items()}
    statistic_views = [view(em, v, vector_view) for v in statistics]
    cast_views = {position: view(em, v, vector_view) for position, v in cast_results.items()}
    running_views = (
        []
        if running is None
        else [view(em, v, Layout((split.channels, 1), (layout_of(v).strides[0], 0), layout_of(v).offset))
              for v in (running.mean, running.var)]
    )  # fmt: skip

    def channel_tile(e: LoopNestBuilder, c0: Index, p: int, keep: bool) -> Callable[[], None]:
        column = column_tile(p)
        matrices = split.matrices(e)
        first = load(e, firsts, [c0, 0], (p, pilot), f32)
        if pilot > 1:  # their mean: one scaled activation summed by its accumulate
            scaled = e.insert(tile.UnaryOp(first, "copy", TileType((p, pilot), f32, Memory.SBUF), scale=1.0 / pilot))
            first = e.insert(tile.ReduceOp(scaled.result, "add", column)).result
        if matrices is not None:  # one shift per channel: the mean of its parts' pilots
            totals = matrices.totals(e, first)
            first = e.insert(tile.BinaryScalarOp(totals, "multiply", column, scalar=1 / split.parts)).result
        negated = e.insert(tile.BinaryScalarOp(first, "multiply", column, scalar=-1.0)).result
        params = [load(e, v, [c0, 0], (split.channels if matrices else p, 1), f32) for v in affine]
        if matrices is not None:
            params = [matrices.spread(e, v) for v in params]

        def binary(e2: LoopNestBuilder, a: SSAValue, b: SSAValue, fn: str) -> SSAValue:
            return e2.insert(tile.BinaryOp(a, b, fn, column)).result

        def load_chunk(e2: LoopNestBuilder, chunk: Chunk) -> list[SSAValue]:
            # x in its own dtype: a DMA that widens it moves the fp32 bytes, and the activations compute in fp32
            n, f0, size = chunk
            return [load(e2, source, [n, c0, f0], (p, size))]

        def sums(e2: LoopNestBuilder, tiles: list[SSAValue], size: int, ordinal: int | None) -> list[SSAValue]:
            work = TileType((p, size), f32, Memory.SBUF)
            # x - f on VectorE and (x - f)^2 on ScalarE (an activation with -f as its bias); neuron-fuse-instructions
            # makes each sum the instruction's accumulate, so the engines share the pass. Where ScalarE's squares
            # leave it time, some chunks' x - f is its activation too (x * 1 + (-f): the same fp32 values)
            if ordinal is not None and shift_on_scalar[ordinal]:
                centred = e2.insert(tile.UnaryOp(tiles[0], "copy", work, bias=negated)).result
            else:
                centred = e2.insert(tile.BinaryScalarOp(tiles[0], "subtract", work, column=first)).result
            squares = e2.insert(tile.UnaryOp(tiles[0], "square", work, bias=negated)).result
            return [e2.insert(tile.ReduceOp(t, "add", column)).result for t in (centred, squares)]

        passes = _ChannelPasses(rows.shape[0], length, keep, load_chunk)
        accumulated = {"src": runtime_dtype_name(element_type_of(x)), "dst": "f32", "accumulate_dst": "f32"}

        def activation_ns(size: int) -> float:
            return _chunk_ns(e, "activation", Engine.SCALAR, p, size, accumulated)

        shift_on_scalar = _sums_on_scalar(
            passes.chunk_sizes or [],
            lambda size: (activation_ns(size), 0.0),
            activation_ns,
            lambda size: _chunk_ns(e, "tensor_scalar", Engine.VECTOR, p, size, accumulated),
        )
        shifted, squared = passes.sums(e, column, sums)
        if matrices is not None:
            shifted, squared = matrices.totals(e, shifted), matrices.totals(e, squared)
        offset = e.insert(tile.BinaryScalarOp(shifted, "multiply", column, scalar=norm)).result
        m = binary(e, first, offset, "add")
        residual = binary(e, binary(e, first, m, "subtract"), offset, "add")
        spread = e.insert(tile.BinaryScalarOp(squared, "multiply", column, scalar=norm)).result
        variance = binary(e, spread, binary(e, offset, offset, "multiply"), "subtract")
        variance = e.insert(tile.BinaryScalarOp(variance, "max", column, scalar=0.0)).result
        rstd = e.insert(tile.UnaryOp(variance, "rsqrt", column, bias_value=eps)).result
        scale = rstd if weight is None else binary(e, rstd, params[0], "multiply")
        mean = binary(e, m, residual, "add")
        # 16-bit in and out: x * scale + (bias - mean * scale), eager's own form, as one tensor_scalar in
        # VectorE's 16-bit mode (a quarter of an fp32 pass). Its fp32 roundings are a few units of 2^-24 of
        # |x * scale|, |mean * scale| and |bias|: against an output as large, 2^-15 of the 2^-9 its 16-bit
        # rounding is; against an output near 0 (x near the mean), below 2^-13 of the step between the outputs of
        # two neighbouring 16-bit x (2^-24 |x| is under 2^-16 of a bf16 x's spacing, 2^-13 of an fp16 one's)
        sixteen_bit = _bytes(element_type_of(x)) == 2 and _bytes(out_type) == 2
        # (the second pass's columns first: the per-channel results below wait in the engines' queues after them)

        def bias_less(value: SSAValue) -> SSAValue:
            if bias is not None:
                return binary(e, params[-1], value, "subtract")
            return e.insert(tile.BinaryScalarOp(value, "multiply", column, scalar=-1.0)).result

        if sixteen_bit:
            intercept = bias_less(binary(e, mean, scale, "multiply"))
        else:
            shift = bias_less(binary(e, residual, scale, "multiply"))

        def per_channel(value: SSAValue) -> SSAValue:
            return value if matrices is None else matrices.firsts(e, value)

        values = [per_channel(mean), per_channel(rstd), per_channel(variance)]
        if running is not None:
            width = split.channels if matrices else p
            kept = column_tile(width)
            for i, factor in enumerate((1.0, running.unbiased)):
                # as `_running_update` computes it, from the same fp32 batch statistics
                old = load(e, running_views[i], [c0, 0], (width, 1), f32)
                decayed = e.insert(tile.BinaryScalarOp(old, "multiply", kept, scalar=1.0 - running.momentum)).result
                new = e.insert(tile.BinaryScalarOp(values[2 * i], "multiply", kept,
                                                   scalar=running.momentum * factor)).result  # fmt: skip
                values.append(e.insert(tile.BinaryOp(decayed, new, "add", kept)).result)
            del values[2]
        for value, statistic, kind in zip(values, statistic_views, statistics, strict=True):
            store(e, to_sbuf(e, value, element_type_of(kind)), statistic, [c0, 0])
        for position, cast_view in cast_views.items():
            # the fp32 column rounded once, as the cast of the stored result rounds it
            store(e, to_sbuf(e, values[position], element_type_of(cast_results[position])), cast_view, [c0, 0])

        def write(e2: LoopNestBuilder, tiles: list[SSAValue], chunk: Chunk) -> None:
            if sixteen_bit:
                shape = (p, chunk[2])
                scaled = e2.insert(tile.BinaryScalarOp(tiles[0], "multiply", TileType(shape, f32, Memory.SBUF),
                                                       column=scale)).result  # fmt: skip
                result = TileType(shape, out_type, Memory.SBUF)
                value: SSAValue = e2.insert(tile.BinaryScalarOp(scaled, "add", result, column=intercept)).result
            else:
                value = _normalized(e2, tiles[0], (m, scale, shift), out_type)
            store(e2, value, target, [chunk[0], c0, chunk[1]])

        return lambda: passes.rewrite(e, write)

    _for_channel_tiles(em, channels, rows.shape[0], length, _bytes(element_type_of(x)), channel_tile)
    if running is None:
        return _ChannelNestResults(out, statistics[0], statistics[1], statistics[2], None, cast_results)
    return _ChannelNestResults(out, statistics[0], statistics[1], None, (statistics[2], statistics[3]), cast_results)


def _batch_norm(
    em: LoopNestBuilder, op: Operation, args: dict[str, Any], training: bool, outputs: str
) -> list[SSAValue]:
    """outputs: the results after `out`, in order: m(ean) r(std) R(eserve) u(pdated running mean and var)."""
    x = args["input"]
    shape = layout_of(x).shape
    rank = len(shape)
    eps = float(args["eps"])
    momentum = float(args.get("momentum") or 0.0)
    running_mean, running_var = args.get("running_mean"), args.get("running_var")
    weight = _channel_view(em, args["weight"], rank, 1) if args.get("weight") is not None else None
    bias = _channel_view(em, args["bias"], rank, 1) if args.get("bias") is not None else None
    out_type = result_element_type(op, 0)
    normalized = None
    fused = None
    updated: tuple[SSAValue, SSAValue] | None = None
    if training:
        mean_type, rstd_type = (result_element_type(op, 1 + outputs.index(k)) if k in outputs else f32 for k in "mr")
        running = None
        if "u" in outputs:
            assert running_mean is not None  # not optional in these schemas
            assert running_var is not None
            u = 1 + outputs.index("u")
            count = math.prod(shape[d] for d in _batch_dims(x))
            unbiased = count / (count - 1) if count > 1 else math.inf
            types = (result_element_type(op, u), result_element_type(op, u + 1))
            running = _RunningUpdate(running_mean, running_var, momentum, unbiased, types)
        # casts of the per-channel results that torch-fuse-batch-norm-casts marked, by their position in the nest
        positions = {1 + outputs.index(k): i for i, k in enumerate("mr") if k in outputs}
        if running is not None:
            positions |= {1 + outputs.index("u"): 2, 2 + outputs.index("u"): 3}
        marked = {
            positions[index]: cast
            for index, cast in statistics_casts(op).items()
            if index in positions and is_batch_norm_cast(cast)
        }
        cast_types = {position: result_element_type(cast, 0) for position, cast in marked.items()}
        fused = _batch_norm_training_by_channel(
            em,
            x,
            args.get("weight"),
            args.get("bias"),
            eps,
            out_type,
            (mean_type, rstd_type),
            running,
            cast_types,
        )
        if fused is not None:
            from neuron_mlir.lowering.convert_torch_to_tile.context import absorb

            for position, cast in marked.items():
                absorb(em, cast, _written_by_row_pass(fused.casts[position]))
    if fused is not None:
        normalized, mean, rstd, updated = fused.out, fused.mean, fused.rstd, fused.running
        variance = fused.variance
    elif training:
        centre, residual, variance = _batch_statistics(em, x)
        rstd = _rstd(em, variance, eps)
        mean = _add(em, centre, residual)
        # (x - m) * scale + shift, the residual of m taken out of the shift (a per-channel vector), not out of x
        scale = rstd if args.get("weight") is None else _product_of(em, rstd, args["weight"])
        shift = _residual_shift(em, residual, scale, args.get("bias"))
        normalized = _normalize_by_channel(em, x, centre, scale, shift, out_type)
        if normalized is None:
            centre_view, scale_view = _channel_view(em, centre, rank, 1), _channel_view(em, scale, rank, 1)
            normalized = _normalize(em, x, centre_view, scale_view, None, _channel_view(em, shift, rank, 1), out_type)
    else:
        # the schemas of the eval-mode ops have no optional running statistics
        assert running_mean is not None
        assert running_var is not None
        centre, rstd = running_mean, _rstd(em, running_var, eps)
        centre_view, rstd_view = _channel_view(em, centre, rank, 1), _channel_view(em, rstd, rank, 1)
        normalized = _normalize(em, x, centre_view, rstd_view, weight, bias, out_type)
    results = [normalized]
    index = 1
    for kind in outputs:
        out_type = result_element_type(op, index)
        if kind in "mr":
            if training:
                results.append(_cast(em, mean if kind == "m" else rstd, out_type))
            else:
                results.append(_empty(em, op, index))
        elif kind == "R":
            results.append(_empty(em, op, index))
        elif kind == "u":
            assert running_mean is not None  # not optional in these schemas
            assert running_var is not None
            if updated is not None:
                results.extend(updated)
            elif training:
                assert variance is not None  # the nest leaves it out only where it updated the statistics
                count = math.prod(shape[d] for d in _batch_dims(x))
                unbiased = count / (count - 1) if count > 1 else math.inf
                results.append(_running_update(em, running_mean, mean, momentum, 1.0, out_type))
                results.append(
                    _running_update(em, running_var, variance, momentum, unbiased, result_element_type(op, index + 1))
                )
            else:
                results.append(_cast_copy(em, running_mean, out_type))
                results.append(_cast_copy(em, running_var, result_element_type(op, index + 1)))
            index += 1
        index += 1
    return results


def _cast_copy(em: LoopNestBuilder, tensor: SSAValue, element_type: Attribute) -> SSAValue:
    shape = layout_of(tensor).shape
    return emit_elementwise(em, shape, element_type, [tensor], lambda e, t, r: TileMath(e, r).copy(t[0], r))


def _empty(em: LoopNestBuilder, op: Operation, index: int) -> SSAValue:
    from xdsl.dialects.builtin import TensorType

    from neuron_mlir.lowering.convert_torch_to_tile.common import empty_tensor

    result_type = op.results[index].type
    assert isinstance(result_type, TensorType)
    assert 0 in result_type.get_shape(), "`legal` refuses a statistics result with elements here"
    return empty_tensor(em, result_type)


def _batch_norm_functional(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return _batch_norm(em, op, args, bool(args["training"]), "mru")


def _batch_norm_no_training(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return _batch_norm(em, op, args, False, "mr")


def _batch_norm_no_stats(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """Batch statistics without running ones (instance norm, batch norm with track_running_stats=False)."""
    assert args["training"], "`legal` refuses batch norm without running statistics outside training"
    return _batch_norm(em, op, args, True, "mr")


def _batch_norm_with_update(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return _batch_norm(em, op, args, True, "mrRu")


def _contiguous(em: LoopNestBuilder, tensor: SSAValue) -> SSAValue:
    """`tensor` itself when its layout is row-major, else a row-major copy."""
    layout = layout_of(tensor)
    if layout.is_contiguous():
        return tensor
    return emit_elementwise(em, layout.shape, element_type_of(tensor), [tensor], lambda e, t, r: t[0])


# The residual mean(x - m) is taken for the rounding of a saved mean m only up to |m| * 2^-23 (at least half a unit
# in the last place of m, the rounding of a mean rounded once, and of eager's): beyond, m is not the batch's mean
# (a caller's own statistics), and the backward computes with m as given, as ATen's kernel does.
_RESIDUAL_BOUND = 2.0**-23


def _rounding_only(e: LoopNestBuilder, residual: SSAValue, mean: SSAValue) -> SSAValue:
    """`residual` where |residual| <= |mean| * _RESIDUAL_BOUND, else 0 ([P, 1] columns)."""
    column = residual.type
    assert isinstance(column, TileType)
    size = e.insert(tile.BinaryScalarOp(residual, "abs_max", column, scalar=0.0)).result
    bound = e.insert(tile.BinaryScalarOp(mean, "abs_max", column, scalar=0.0)).result
    bound = e.insert(tile.BinaryScalarOp(bound, "multiply", column, scalar=_RESIDUAL_BOUND)).result
    keep = e.insert(tile.BinaryOp(size, bound, "is_le", column)).result
    return e.insert(tile.BinaryOp(residual, keep, "multiply", column)).result


def _batch_norm_backward_by_channel(
    em: LoopNestBuilder,
    x: SSAValue,
    grad: SSAValue,
    mean: SSAValue,
    invstd: SSAValue,
    weight: SSAValue | None,
    mask: list[bool],
    types: Sequence[Attribute],
) -> list[SSAValue | None]:
    """Batch norm's backward in training, centred on the exact batch mean, with channels on partitions.

    Per channel tile, one pass over x and dy sums g = sum(dy), the residual s = sum(x - m) of the saved mean m (its
    rounding: the subtraction is exact for values within a factor of two of m) and p = sum(dy * (x - m)); then,
    with N values per channel, r = s / N (where it is m's rounding, `_rounding_only`), dot = p - r * g (the sum of
    dy against x centred on m + r), k = dot / N * invstd^2 and scale = invstd * weight, and a second pass writes
    grad_input = (dy - (g / N - r * k)) * scale - (x - m) * (k * scale) from the x and dy the first pass loaded,
    where the chunks fit on chip, else ((dy - (g / N - r * k)) - (x - m) * k) * scale from chunks loaded again.
    grad_weight = dot * invstd and grad_bias = g leave the statistics' columns. Where a channel's values are few
    and close together against their mean, r is not small against x - m, and without it every gradient would be
    off by a constant fraction of the spread."""
    shape = layout_of(x).shape
    split = _ChannelSplit.of(shape)
    rows = split.rows(shape)
    channels, length = rows.shape[1], rows.shape[2]  # channels: their parts, when split
    norm = 1.0 / (rows.shape[0] * length * split.parts)
    x, grad = _contiguous(em, x), _contiguous(em, grad)
    sources = [view(em, v, Layout(rows.shape, rows.strides, layout_of(v).offset)) for v in (x, grad)]
    columns = [
        view(em, v, Layout((split.channels, 1), (layout_of(v).strides[0], 0), layout_of(v).offset))
        for v in (mean, invstd, *([weight] if weight is not None else []))
    ]
    results: list[SSAValue | None] = [None, None, None]
    outputs: list[SSAValue | None] = [None, None, None]
    for index in range(3):
        if mask[index]:
            result = alloc(em, shape if index == 0 else (split.channels,), types[index])
            results[index] = result
            outputs[index] = view(em, result, rows if index == 0 else Layout((split.channels, 1), (1, 0), 0))

    def channel_tile(e: LoopNestBuilder, c0: Index, p: int, keep: bool) -> Callable[[], None]:
        column = column_tile(p)
        matrices = split.matrices(e)
        loaded = [load(e, v, [c0, 0], (split.channels if matrices else p, 1), f32) for v in columns]
        if matrices is not None:
            loaded = [matrices.spread(e, v) for v in loaded]
        m, istd = loaded[0], loaded[1]
        negated = e.insert(tile.BinaryScalarOp(m, "multiply", column, scalar=-1.0)).result

        def binary(e2: LoopNestBuilder, a: SSAValue, b: SSAValue, fn: str) -> SSAValue:
            return e2.insert(tile.BinaryOp(a, b, fn, column)).result

        def scaled(e2: LoopNestBuilder, a: SSAValue, factor: float) -> SSAValue:
            return e2.insert(tile.BinaryScalarOp(a, "multiply", column, scalar=factor)).result

        def load_chunk(e2: LoopNestBuilder, chunk: Chunk) -> list[SSAValue]:
            # in their own dtypes: VectorE sums a 16-bit dy at twice the rate, and every step computes in fp32
            n, f0, size = chunk
            return [load(e2, v, [n, c0, f0], (p, size)) for v in sources]

        def sums(e2: LoopNestBuilder, tiles: list[SSAValue], size: int, ordinal: int | None) -> list[SSAValue]:
            values, gradient = tiles
            work = TileType((p, size), f32, Memory.SBUF)
            # one activation with -m as its bias (the sum becomes its accumulate)
            centred = e2.insert(tile.UnaryOp(values, "copy", work, bias=negated)).result
            product = e2.insert(tile.BinaryOp(gradient, centred, "multiply", work)).result
            summed = gradient
            if ordinal is not None and gradient_on_scalar[ordinal]:
                # dy summed by a ScalarE copy's accumulate (its fp32 values) instead of VectorE's reduce: it waits
                # for nothing but its load, so ScalarE's queue never stalls on another engine for it
                summed = e2.insert(tile.UnaryOp(gradient, "copy", work)).result
            return [e2.insert(tile.ReduceOp(t, "add", column)).result for t in (summed, centred, product)]

        passes = _ChannelPasses(rows.shape[0], length, keep, load_chunk)
        x_dtype, dy_dtype = (runtime_dtype_name(element_type_of(v)) for v in sources)

        def copy_ns(size: int, dtype: str) -> float:
            accumulated = {"src": dtype, "dst": "f32", "accumulate_dst": "f32"}
            return _chunk_ns(e, "activation", Engine.SCALAR, p, size, accumulated)

        gradient_on_scalar = _sums_on_scalar(
            passes.chunk_sizes or [],
            lambda size: (
                copy_ns(size, x_dtype),
                _chunk_ns(e, "tensor_reduce", Engine.VECTOR, p, size, {"src": "f32", "dst": "f32"}),
            ),
            lambda size: copy_ns(size, dy_dtype),
            lambda size: _chunk_ns(e, "tensor_reduce", Engine.VECTOR, p, size, {"src": dy_dtype, "dst": "f32"}),
        )
        total, residual_sum, product_sum = passes.sums(e, column, sums)
        if matrices is not None:
            total, residual_sum, product_sum = (matrices.totals(e, v) for v in (total, residual_sum, product_sum))
        residual = _rounding_only(e, scaled(e, residual_sum, norm), m)
        dot = binary(e, product_sum, binary(e, residual, total, "multiply"), "subtract")

        def per_channel(value: SSAValue) -> SSAValue:
            return value if matrices is None else matrices.firsts(e, value)

        def parameter_gradients() -> None:
            if outputs[1] is not None:
                store(e, to_sbuf(e, per_channel(binary(e, dot, istd, "multiply")), types[1]), outputs[1], [c0, 0])
            if outputs[2] is not None:
                store(e, to_sbuf(e, per_channel(total), types[2]), outputs[2], [c0, 0])

        if outputs[0] is None:
            parameter_gradients()
            return lambda: None
        k = binary(e, scaled(e, dot, norm), binary(e, istd, istd, "multiply"), "multiply")
        scale = istd if weight is None else binary(e, istd, loaded[2], "multiply")
        # dy's mean comes off first, as eager's kernel takes it: where dy's values share a part large against
        # their differences, the subtraction is exact and nothing is rounded at dy's own size
        offset = binary(e, scaled(e, total, norm), binary(e, residual, k, "multiply"), "subtract")
        target = outputs[0]
        slope = binary(e, k, scale, "multiply")
        # after the second pass's columns, which would otherwise wait behind them in the engines' queues
        parameter_gradients()

        def grad_input(e2: LoopNestBuilder, tiles: list[SSAValue], chunk: Chunk) -> None:
            values, gradient = tiles
            n, f0, size = chunk
            work = TileType((p, size), f32, Memory.SBUF)
            result = TileType((p, size), types[0], Memory.SBUF)
            centred = e2.insert(tile.BinaryScalarOp(values, "subtract", work, column=m)).result
            if keep:
                # two independent two-step passes (one tensor_scalar each) and their difference: three instructions
                # a chunk where scaling the difference was a fourth after it
                sloped = e2.insert(tile.BinaryScalarOp(centred, "multiply", work, column=slope)).result
                shifted = e2.insert(tile.BinaryScalarOp(gradient, "subtract", work, column=offset)).result
                scaled_dy = e2.insert(tile.BinaryScalarOp(shifted, "multiply", work, column=scale)).result
                value = e2.insert(tile.BinaryOp(scaled_dy, sloped, "subtract", result)).result
            else:
                # a pass that loads its chunks again is bound by HBM, and there the four-step form lets the
                # engines keep up better (fp32 64 x 112^2: 96.3 us against 97.2)
                sloped = e2.insert(tile.BinaryScalarOp(centred, "multiply", work, column=k)).result
                shifted = e2.insert(tile.BinaryScalarOp(gradient, "subtract", work, column=offset)).result
                difference = e2.insert(tile.BinaryOp(shifted, sloped, "subtract", work)).result
                value = e2.insert(tile.BinaryScalarOp(difference, "multiply", result, column=scale)).result
            store(e2, value, target, [n, c0, f0])

        return lambda: passes.rewrite(e, grad_input)

    value_bytes = sum(_bytes(element_type_of(v)) for v in sources)
    _for_channel_tiles(em, channels, rows.shape[0], length, value_bytes, channel_tile)
    return results


def _batch_norm_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
    x, grad = args["input"], args["grad_out"]
    rank = len(layout_of(x).shape)
    dims = _batch_dims(x)
    types = [result_element_type(op, i) if _is_tensor(op, i) else f32 for i in range(3)]
    mask = [m and _is_tensor(op, i) for i, m in enumerate(_mask(args))]
    training = bool(args.get("train"))
    if training and 0 not in layout_of(x).shape:
        return _batch_norm_backward_by_channel(
            em, x, grad, args["save_mean"], args["save_invstd"], args.get("weight"), mask, types
        )
    weight = _channel_view(em, args["weight"], rank, 1) if args.get("weight") is not None else None
    if training:
        centre, rstd = args["save_mean"], args["save_invstd"]
    else:
        centre, rstd = args["running_mean"], _rstd(em, args["running_var"], float(args["eps"]))
    centre, rstd = _channel_view(em, centre, rank, 1), _channel_view(em, rstd, rank, 1)
    # with running statistics the input gradient is grad * rstd * weight alone (the statistics are constants)
    backward_mask = mask if training else [False, *mask[1:]]
    results = _normalize_backward(em, x, grad, centre, rstd, weight, dims, dims, backward_mask, types)
    if mask[0] and not training:
        operands = [grad, rstd] + ([weight] if weight is not None else [])

        def grad_input(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            m = TileMath(e, result)
            value = m.bin("multiply", tiles[0], tiles[1], result if weight is None else None)
            return value if weight is None else m.bin("multiply", value, tiles[2], result)

        results[0] = emit_elementwise(em, layout_of(x).shape, types[0], operands, grad_input)
    return results


# Batch norms' results that hold no statistics (shape (0,)): ATen leaves them empty in eval mode, and
# `_batch_norm_with_update_functional` leaves its reserve (result 3) empty on the CPU.
def _empty_results(op: Operation) -> tuple[int, ...]:
    if op.name == "torch.aten._native_batch_norm_legit_no_training":
        return (1, 2)
    if op.name == "torch.aten._native_batch_norm_legit_functional" and not arguments_of(op)["training"]:
        return (1, 2)
    if op.name == "torch.aten._batch_norm_with_update_functional":
        return (3,)
    return ()


def legal(op: Operation) -> str | None:
    """Normalizations lower for float inputs of any shape; batch norm without running statistics normalizes with
    batch statistics (training must be true), and results that hold no statistics must have a zero extent."""
    if op.name == "torch.aten._native_batch_norm_legit.no_stats" and not arguments_of(op)["training"]:
        return "without running statistics batch norm normalizes with batch statistics: training must be true"
    for index in _empty_results(op):
        shape = tensor_shape(op.results[index])
        if 0 not in shape:
            return f"result {index} has shape {shape}, but batch norm saves no statistics here (shape (0,))"
    return None


NORMALIZATION_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.native_layer_norm": _layer_norm,
    "torch.aten.native_layer_norm_backward": _layer_norm_backward,
    "torch.aten._fused_rms_norm": _fused_rms_norm,
    "torch.aten._fused_rms_norm_backward": _fused_rms_norm_backward,
    "torch.aten.native_group_norm": _group_norm,
    "torch.aten.native_group_norm_backward": _group_norm_backward,
    "torch.aten._native_batch_norm_legit_functional": _batch_norm_functional,
    "torch.aten._native_batch_norm_legit_no_training": _batch_norm_no_training,
    "torch.aten._native_batch_norm_legit.no_stats": _batch_norm_no_stats,
    "torch.aten._batch_norm_with_update_functional": _batch_norm_with_update,
    "torch.aten.native_batch_norm_backward": _batch_norm_backward,
}
