"""Convolutions (1-d, 2-d, 3-d; strided, padded, dilated, grouped, transposed) and their backward as TensorE matmuls.

Every convolution but a depthwise one computes a stride-`s`, dilation-`d`, unpadded convolution of a prepared
input `xp[N, Cin, S...]` with the weight w[Cout, Cin/g, K...] (`emit_banded_convolution`):

    out[n, co, o...] = sum over kernel offsets k... and input channels ci of w[co, ci, k...] * xp[n, ci, o*s + k*d]

Each output tile is [Cout tile (<= 128, stationary free), output positions (<= one PSUM bank, moving free)];
its PSUM accumulation runs over (kernel offsets x input-channel tiles of 128), each step one matmul. Groups are
a loop whose index offsets the channel ranges. The bias is added per partition (output channel) as PSUM is
evacuated.

Padding and the zero insertion of transposed convolutions are handled by preparing `xp` once: a zero-filled
HBM tensor with the input copied into its (strided, possibly cropped) interior; zero insertion spreads each tile
of whole rows on chip (`spread_channels`), so both sides of every DMA move whole rows. A transposed convolution
is the convolution (stride 1) of that zero-inserted input with the flipped, in/out-swapped weight.

Per output tile and input-channel tile the band of input rows the tile's positions read is loaded once with
whole rows, and each tap's moving operand is a (strided) window of that SBUF tile read in place (`tile.extract`
with steps: TensorE's moving operand is an access pattern). Loading each tap's window view from HBM instead
moves one output row per DMA chunk (one element with a stride above 1): ResNet-50's 7 x 7 planes are 14-byte
runs, each charged as a 256-byte chunk, and such convolutions ran 10-100x slower. The [ci, co] stationaries come
from the weight's rows on chip: one strided window per tap, transposed on TensorE (a transposed convolution's
weight rows are already [ci, co]). Few input channels (RGB stems: ViT's 16 x 16 / 16 patch embedding, ConvNeXt's 4 x 4
/ 4 stem, ResNet's 7 x 7 / 2) would contract over 3 of 128 partitions per tap, so `kernel_row_packing` first
copies the input rows each output row reads so that (channel, kernel row) pairs form one partition dim: the
convolution becomes one of a 1 x KW filter over C * KH channels (48 for ViT). This is also how a patch embedding
(stride = kernel) runs: its "matmul over patches" contracts over (channel, kernel row) on partitions and
accumulates over kernel columns in PSUM, each column's patch elements a strided window of contiguous input rows.
A torch-level rewrite into view/permute + mm instead materialises the patches by a copy whose reads are
kernel-column runs (32 bytes for ViT, 8 for ConvNeXt), 15x slower here, and then transposes them for the matmul.

`convolution_backward`: grad_input is the transposed convolution of grad_output (or, for a transposed forward,
the direct one), except for a strided 1-d or 2-d convolution of one group (`emit_phase_input_gradient`): the
input positions of one residue modulo the stride are reached by a fixed subset of the taps, so each residue is
a stride-1 convolution of grad_output with those taps, whose products land at the residue's positions of a tile
of whole input rows; no product of an inserted zero is computed. grad_weight (`emit_banded_weight_gradient`)
contracts over output positions, which must be on the partitions: grad_output blocks and the taps' strided band
windows are loaded with whole rows and transposed on TensorE, each once into panels kept in SBUF when they fit
(the resident strategy; otherwise per block of the result), one matmul per tile of 128 positions
accumulating [co, ci * taps] in PSUM, stored as whole weight rows (kernel-row packed like the forward when that
was). grad_bias is a reduction. When the weight gradient comes first and grad_output fits on chip, the three
gradients read one copy of it (`ChannelsOnChip`), loaded once, with the margin of zeros the input gradient's
phases read written on chip, instead of a load each and a padded copy through HBM.

Few input channels over output rows of up to 128 columns that fill at least 48 partitions, alone or several rows
together (ResNet's 7 x 7 / 2, ConvNeXt's 4 x 4 / 4 stems, ViT's patches), take the input transposed once per
kernel column instead, output columns on the partitions (`_transposed_input`):
the weight gradient contracts over each output row's columns, one matmul per row taking all of the filter's
columns (`emit_row_weight_gradient`), and the forward transposes each row's patches back in chunks of up to 128
(channel, kernel row, kernel column) rows, one matmul per chunk (`emit_row_convolution`), where the kernel-row
packing contracts over 21 (channel, kernel row) rows per kernel column.

A 2-d convolution whose kernel equals its stride (a patch embedding: ViT's 16 x 16 / 16) in a 2-byte type, on a
target whose DMAs transpose, is one matmul over its patches instead (`emit_patch_convolution`,
`emit_patch_weight_gradient`): each position tile's patches come by DMA transposes straight onto the partitions,
[(channel, kernel row, kernel column), positions] (`tile.load_transpose`), the filter's rows likewise, so the
forward needs no TensorE transpose; the weight gradient transposes each patch chunk once into [positions,
columns] and contracts it against grad_output's rows (a DMA transpose), the bias gradient against a column of
ones. Kernel rows shorter than a DMA transpose's block (ConvNeXt's 4 x 4 stem, its 2 x 2 downsampling) keep the
paths above: such a transpose would read its source a few bytes at a time.

Depthwise convolutions (one input channel per group, one output channel per group: ConvNeXt's 7x7, MobileNet's,
Mamba's causal conv1d) take their own path, `emit_depthwise_convolution`: as groups of one channel, the general
path would contract over K = 1 with a 1 x 1 stationary per matmul. Instead 128 channels share the partitions: the
stationary of kernel offset k is the diagonal matrix diag(w[:, k]) (built once per channel tile on chip, from an
iota mask scaled per partition), so each matmul applies one tap to 128 channels at once and PSUM sums the taps.
With stride 1 the input band a tile needs (its rows plus the kernel's halo) is loaded once and every tap reads a
window of it in place; with larger strides each tap's strided window is loaded. The weight gradient of a depthwise
convolution is a per-channel dot product of input windows and grad_output, which stays per partition: each tap
multiplies its window by the grad_output tile and reduces along the free axes into its column.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import arith
from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    PARTITION_TILE,
    Lowering,
    alloc,
    arguments_of,
    element_type_of,
    emitter_target,
    fold_nest,
    layout_of,
    load,
    result_element_type,
    result_shape,
    tensor_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import contiguous_if_transposed, copy_to
from neuron_mlir.lowering.convert_torch_to_tile.matmul import carry, matmul_limits, window
from neuron_mlir.lowering.convert_torch_to_tile.movement import fill_into
from neuron_mlir.lowering.convert_torch_to_tile.reduction import emit_reduce
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory


def _store(
    em: LoopNestBuilder, value: SSAValue, tensor: SSAValue, indices: Sequence[Index], dims: Sequence[int]
) -> None:
    rank = layout_of(tensor).rank
    mapping = None if tuple(dims) == (rank - 2, rank - 1) else dims
    em.insert(tile.StoreOp(value, tensor, [em.index(i) for i in indices], mapping))


def _for_channel_tiles(
    em: LoopNestBuilder,
    planes: Sequence[int],
    channels: int,
    tiles: Sequence[tuple[int, int]],
    body: Callable[[LoopNestBuilder, list[Index], Index, int, list[Index], list[int]], None],
) -> None:
    """body(emitter, plane indices, c0, channels, offsets, sizes) for each tile of up to 128 channels and of
    `tiles` ((extent, tile size) per trailing dim), at every index of `planes` (the image and leading dims)."""

    def trailing(
        e: LoopNestBuilder, lead: list[Index], c0: Index, cs: int, offsets: list[Index], sizes: list[int], depth: int
    ) -> None:
        if depth == len(tiles):
            body(e, lead, c0, cs, offsets, sizes)
            return
        extent, size = tiles[depth]
        e.for_tiles(extent, size, lambda e2, o, n: trailing(e2, lead, c0, cs, [*offsets, o], [*sizes, n], depth + 1))

    em.for_each_index(
        planes,
        lambda e, lead: e.for_tiles(channels, PARTITION_TILE, lambda e2, c0, cs: trailing(e2, lead, c0, cs, [], [], 0)),
    )


# ---- preparing operands --------------------------------------------------------------------------------------


def prepare_input(
    em: LoopNestBuilder, x: SSAValue, low: Sequence[int], high: Sequence[int], spacing: Sequence[int]
) -> SSAValue:
    """`x[N, C, S...]` with `spacing - 1` zeros between elements and `low`/`high` zeros (negative: cropping) per
    spatial dim; `x` itself when nothing changes."""
    if all(lo == 0 for lo in low) and all(hi == 0 for hi in high) and all(u == 1 for u in spacing):
        return x
    source = layout_of(x)
    spatial = source.shape[2:]
    sizes = [(n - 1) * u + 1 + lo + hi for n, u, lo, hi in zip(spatial, spacing, low, high, strict=True)]
    prepared = alloc(em, (*source.shape[:2], *sizes), element_type_of(x))
    inner, outer = source, layout_of(prepared)
    borders: list[tuple[int, int, int]] = []  # (dim, start, end) of the zeros around the interior
    for i, (n, u, lo, size) in enumerate(zip(spatial, spacing, low, sizes, strict=True)):
        first = max(0, -(lo // u) if lo < 0 else 0)  # first input index whose position lo + j*u is >= 0
        last = min(n - 1, (size - 1 - lo) // u)  # last index whose position is < size
        if last < first:
            fill_into(em, prepared, 0.0)
            return prepared
        inner = inner.slice(2 + i, first, last + 1)
        outer = outer.slice(2 + i, lo + first * u, lo + last * u + 1, u)
        borders += [(2 + i, 0, lo + first * u), (2 + i, lo + last * u + 1, size)]
    last_dim = 2 + len(spatial) - 1
    thin = len(spatial) >= 2 and any(dim == last_dim and end > start for dim, start, end in borders)
    itemsize = _itemsize(element_type_of(x))
    padding_only = all(u == 1 for u in spacing) and min(low) >= 0 and min(high) >= 0
    if thin and padding_only and sizes[-1] * itemsize <= CHANNEL_COPY_BYTES:
        # the interior rows written whole, their zeros beside them built on chip; the slabs above and below
        # filled alone
        interior = layout_of(prepared)
        for i, (lo, n) in enumerate(zip(low[:-1], spatial[:-1], strict=True)):
            interior = interior.slice(2 + i, lo, lo + n)
        pad_rows(em, x, view(em, prepared, interior), low[-1])
        for dim, start, end in borders:
            if dim != last_dim and end > start:
                fill_into(em, view(em, prepared, layout_of(prepared).slice(dim, start, end)), 0.0)
        return prepared
    if any(u > 1 for u in spacing) or thin:
        # zeros between the elements, or short runs of zeros beside each row (filled alone they would move a
        # few elements per DMA chunk): fill everything, the copy overwrites the interior
        fill_into(em, prepared, 0.0)
    else:
        # only the slabs of padding around the interior, whole rows each: the copy writes the rest
        for dim, start, end in borders:
            if end > start:
                fill_into(em, view(em, prepared, layout_of(prepared).slice(dim, start, end)), 0.0)
    if any(u > 1 for u in spacing):
        spread_channels(em, view(em, x, inner), prepared, outer, spacing)
    else:
        copy_channels(em, view(em, x, inner), view(em, prepared, outer))
    return prepared


def spread_channels(
    em: LoopNestBuilder, source: SSAValue, prepared: SSAValue, interior: Layout, spacing: Sequence[int]
) -> None:
    """Write source[N, C, S...] into `prepared` at the elements of `interior` (a view of it whose spatial strides
    are `spacing` times prepared's), with whole rows moving on both sides.

    Each tile of up to 128 channels of whole rows is loaded as it is, spread on chip into a zero tile (an insert
    every `spacing` elements) and stored as contiguous rows of prepared, the zeros between the elements
    included. Writing the strided view directly would move one element per DMA chunk.
    """
    layout = layout_of(source)
    batch, channels, *spatial = layout.shape
    if layout.num_elements == 0:
        return
    rank = len(spatial)
    itemsize = _itemsize(element_type_of(prepared))
    outer = layout_of(prepared)
    # where the interior starts in prepared, per dim
    start = []
    remainder = interior.offset - outer.offset
    for stride in outer.strides:
        start.append(remainder // stride)
        remainder %= stride
    row, row_spacing = spatial[-1], spacing[-1]
    columns = max(1, min(row, (CHANNEL_COPY_BYTES // itemsize - 1) // row_spacing + 1))
    if rank >= 2:
        rows_extent, rows_spacing = spatial[-2], spacing[-2]
        per_row = ((min(columns, row) - 1) * row_spacing + 1) * itemsize
        rows = max(1, min(rows_extent, (CHANNEL_COPY_BYTES // per_row - 1) // rows_spacing + 1))
        if columns < row:
            rows = 1

    def spread_tile(
        e: LoopNestBuilder, lead: list[Index], c0: Index, cs: int, first: list[Index], sizes: list[int]
    ) -> None:
        n, *outer_idx = lead
        tail_dims = tuple(range(rank - len(sizes) + 2, rank + 2))
        value = load(e, source, [n, c0, *outer_idx, *first], (cs, *sizes), dims=(1, *tail_dims))
        spans = [(size - 1) * u + 1 for size, u in zip(sizes, spacing[-len(sizes) :], strict=True)]
        zeros = e.insert(tile.FillOp(0.0, TileType((cs, *spans), element_type_of(prepared), Memory.SBUF))).result
        spread = e.insert(tile.InsertOp(value, zeros, [e.index(0)] * len(sizes), spacing[-len(sizes) :])).result
        lead_at = [e.add(start[2 + d], e.mul(i, spacing[d])) for d, i in enumerate(outer_idx)]
        tail_at = [
            e.add(start[2 + rank - len(sizes) + d], e.mul(i, spacing[rank - len(sizes) + d]))
            for d, i in enumerate(first)
        ]
        _store(e, spread, prepared, [n, c0, *lead_at, *tail_at], (1, *tail_dims))

    if rank >= 2:
        _for_channel_tiles(em, [batch, *spatial[:-2]], channels, [(rows_extent, rows), (row, columns)], spread_tile)
    else:
        _for_channel_tiles(em, [batch], channels, [(row, columns)], spread_tile)


# Bytes per partition of one tile of `copy_channels`.
CHANNEL_COPY_BYTES = 32 * 1024


def copy_channels(em: LoopNestBuilder, source: SSAValue, out: SSAValue) -> None:
    """Copy `source` [N, C, S...] into the HBM view `out` of the same shape, channels on partitions.

    Each tile is up to 128 channels of whole rows of the last spatial dims, so every partition moves long runs
    (an elementwise copy would put the rows of one small image on the partitions, one image per DMA).
    """
    layout = layout_of(source)
    batch, channels, *spatial = layout.shape
    if layout.num_elements == 0:
        return
    if len(spatial) == 1:
        spatial_loops, rows_extent, row = [], 1, spatial[0]
    else:
        spatial_loops, rows_extent, row = list(spatial[:-2]), spatial[-2], spatial[-1]
    itemsize = 2 if str(element_type_of(source)) in ("bf16", "f16") else 4
    rows = max(1, min(rows_extent, CHANNEL_COPY_BYTES // max(1, row * itemsize)))
    columns = row if rows > 1 or row * itemsize <= CHANNEL_COPY_BYTES else CHANNEL_COPY_BYTES // itemsize
    rank = layout.rank

    def copy_tile(
        e: LoopNestBuilder, lead: list[Index], c0: Index, cs: int, offsets: list[Index], sizes: list[int]
    ) -> None:
        (r0, col0), (rs, ns) = offsets, sizes
        n, *outer = lead
        shape: tuple[int, ...]
        dims: tuple[int, ...]
        if len(spatial) == 1:
            indices, shape, dims = [n, c0, col0], (cs, ns), (1, 2)
        else:
            indices, shape, dims = [n, c0, *outer, r0, col0], (cs, rs, ns), (1, rank - 2, rank - 1)
        value = load(e, source, indices, shape, element_type_of(out), dims=dims)
        _store(e, value, out, indices, dims)

    _for_channel_tiles(em, [batch, *spatial_loops], channels, [(rows_extent, rows), (row, columns)], copy_tile)


# Fewer channels than this put an image's rows on the partitions when padding them (`pad_rows`).
ROWS_ON_PARTITIONS_CHANNELS = 32


def pad_rows(em: LoopNestBuilder, source: SSAValue, out: SSAValue, left: int) -> None:
    """Copy `source` [N, C, S..., W] into the HBM view `out` [N, C, S..., Wp] (Wp >= W + left), each row at
    column `left` with zeros beside it: tiles of up to 128 channels of whole rows are loaded, inserted into a zero
    tile of padded rows and stored as contiguous rows, so no DMA moves a row's few zeros alone."""
    layout = layout_of(source)
    batch, channels, *spatial = layout.shape
    padded = layout_of(out).shape[-1]
    if layout.num_elements == 0:
        return
    rank = layout.rank
    element_type = element_type_of(out)
    rows_extent, row = spatial[-2], spatial[-1]
    rows = max(1, min(rows_extent, CHANNEL_COPY_BYTES // (padded * _itemsize(element_type))))
    if channels < ROWS_ON_PARTITIONS_CHANNELS:
        # few channels (an image): rows on the partitions, so each DMA spreads over the engines
        def row_tile(e: LoopNestBuilder, lead: list[Index], r0: Index, rs: int) -> None:
            dims = (rank - 2, rank - 1)
            value = load(e, source, [*lead, r0, 0], (rs, row), element_type, dims=dims)
            zeros = e.insert(tile.FillOp(0.0, TileType((rs, padded), element_type, Memory.SBUF))).result
            whole = e.insert(tile.InsertOp(value, zeros, [e.index(left)])).result
            _store(e, whole, out, [*lead, r0, 0], dims)

        em.for_each_index(
            [batch, channels, *spatial[:-2]],
            lambda e, lead: e.for_tiles(rows_extent, PARTITION_TILE, lambda e2, r0, rs: row_tile(e2, lead, r0, rs)),
        )
        return

    def pad_tile(
        e: LoopNestBuilder, lead: list[Index], c0: Index, cs: int, offsets: list[Index], sizes: list[int]
    ) -> None:
        (r0,), (rs,) = offsets, sizes
        n, *outer = lead
        dims = (1, rank - 2, rank - 1)
        value = load(e, source, [n, c0, *outer, r0, 0], (cs, rs, row), element_type, dims=dims)
        zeros = e.insert(tile.FillOp(0.0, TileType((cs, rs, padded), element_type, Memory.SBUF))).result
        whole = e.insert(tile.InsertOp(value, zeros, [e.index(0), e.index(left)])).result
        _store(e, whole, out, [n, c0, *outer, r0, 0], dims)

    _for_channel_tiles(em, [batch, *spatial[:-2]], channels, [(rows_extent, rows)], pad_tile)


def prepare_weight(em: LoopNestBuilder, w: SSAValue, groups: int, transposed: bool) -> SSAValue:
    """The weight as a contiguous wt[K..., Cin/g, Cout], so each [ci, co] stationary tile loads row-wise.

    Direct: w[Cout, Cin/g, K...] permuted. Transposed: w[Cin, Cout/g, K...] with kernel dims flipped and the
    channel roles swapped per group (the weight of the equivalent direct convolution).
    """
    layout = layout_of(w)
    rank = layout.rank
    kernel_dims = list(range(2, rank))
    if not transposed:
        permuted = layout.permute([*kernel_dims, 1, 0])
        return copy_to(em, view(em, w, permuted))
    cin = layout.shape[0]
    split = layout.split_dim(0, groups)  # [g, Cin/g, Cout/g, K...]
    permuted = split.permute([d + 1 for d in kernel_dims] + [1, 0, 2]).flip(list(range(rank - 2)))
    prepared = copy_to(em, view(em, w, permuted))  # [K..., Cin/g, g, Cout/g]
    merged = layout_of(prepared).reshape((*layout.shape[2:], cin // groups, layout.shape[1] * groups))
    assert merged is not None, "a contiguous tensor can always be reshaped"
    return view(em, prepared, merged)


# ---- the direct convolution ----------------------------------------------------------------------------------


def _windows(
    em: LoopNestBuilder,
    xp: SSAValue,
    kernel: Sequence[int],
    out_spatial: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> SSAValue:
    """The shifted-window view of xp[N, C, S...]: [N, C, K..., O...], element [n, c, k, o] = xp[n, c, o*s + k*d]."""
    layout = layout_of(xp)
    spatial_strides = layout.strides[2:]
    strides = (
        *layout.strides[:2],
        *(st * d for st, d in zip(spatial_strides, dilation, strict=True)),
        *(st * s for st, s in zip(spatial_strides, stride, strict=True)),
    )
    return view(em, xp, Layout((*layout.shape[:2], *kernel, *out_spatial), strides, layout.offset))


def _position_tiles(out_spatial: Sequence[int], n_tile: int) -> tuple[list[int], int, int]:
    """Output positions per matmul: (leading spatial dims looped one by one, rows per tile, columns per tile).

    The last dim is tiled by up to `n_tile` columns; when a whole row fits, several rows share one tile.
    """
    last = out_spatial[-1]
    columns = min(last, n_tile)
    rows = max(1, min(out_spatial[-2], n_tile // last)) if len(out_spatial) >= 2 and columns == last else 1
    return list(out_spatial[:-2] if len(out_spatial) >= 2 else []), rows, columns


def _flat_tap(em: LoopNestBuilder, k_idx: Sequence[Index], kernel: Sequence[int]) -> Index:
    """The row-major index of kernel offset `k_idx` among the kernel's taps."""
    flat: Index = 0
    for k, extent in zip(k_idx, kernel, strict=True):
        flat = em.add(em.mul(flat, extent), k)
    return flat


def _output_spatial(
    spatial: Sequence[int], kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]
) -> tuple[int, ...]:
    """The output positions of an unpadded convolution along each spatial dim."""
    return tuple((s - d * (k - 1) - 1) // st + 1 for s, k, d, st in zip(spatial, kernel, dilation, stride, strict=True))


def _for_position_tiles(
    em: LoopNestBuilder,
    out_spatial: Sequence[int],
    rows: int,
    columns: int,
    body: Callable[[LoopNestBuilder, Index, int, Index, int], None],
    unroll_rows: int = 1,
    unroll_columns: int = 1,
) -> None:
    """body(emitter, r0, rows, c0, columns) for every tile of `rows` x `columns` output positions of one plane
    (the last two output dims; one row at r0 = 0 for a 1-d convolution), `unroll_*` tiles per loop trip."""

    def along_row(e: LoopNestBuilder, r0: Index, rs: int) -> None:
        _for_tiles_unrolled(e, out_spatial[-1], columns, unroll_columns, lambda e2, c0, cs: body(e2, r0, rs, c0, cs))

    if len(out_spatial) >= 2:
        _for_tiles_unrolled(em, out_spatial[-2], rows, unroll_rows, along_row)
    else:
        along_row(em, 0, 1)


class _ConvolutionOutput:
    """Where the output tiles of a convolution out[N, Cout, O...] go: a tile of whole rows of positions is stored
    through a view with the last two dims merged (one run per partition), and the bias is added per partition
    (output channel) as PSUM is evacuated."""

    def __init__(self, em: LoopNestBuilder, out: SSAValue, bias: SSAValue | None, whole_rows: bool) -> None:
        self.out, self.whole_rows = out, whole_rows
        shape = layout_of(out).shape
        self.rank = len(shape) - 2
        self.rows = out
        if whole_rows:
            merged = layout_of(out).reshape((*shape[:-2], shape[-2] * shape[-1]))
            assert merged is not None
            self.rows = view(em, out, merged)
        self.bias_column = view(em, bias, layout_of(bias).unsqueeze(1)) if bias is not None else None

    def bias_tile(self, em: LoopNestBuilder, co_global: Index, co_size: int) -> SSAValue | None:
        """The bias of output channels [co_global, + co_size) as a column (None without a bias)."""
        if self.bias_column is None:
            return None
        return load(em, self.bias_column, [co_global, 0], (co_size, 1), f32)

    def store(
        self,
        em: LoopNestBuilder,
        product: SSAValue,
        n: Index,
        co_global: Index,
        co_size: int,
        lead_idx: list[Index],
        r0: Index,
        c0: Index,
        bias_tile: SSAValue | None = None,
    ) -> None:
        """Evacuate the PSUM tile `product` [co, positions] (plus the bias) and store it at (n, co, lead, r0, c0)."""
        element_type = element_type_of(self.out)
        product_type = product.type
        assert isinstance(product_type, TileType)
        result_type = TileType(product_type.get_shape(), element_type, Memory.SBUF)
        if self.bias_column is not None:
            column = bias_tile if bias_tile is not None else self.bias_tile(em, co_global, co_size)
            value: SSAValue = em.insert(tile.BinaryScalarOp(product, "add", result_type, column=column)).result
        else:
            value = to_sbuf(em, product, element_type)
        if self.whole_rows:
            store_at = [n, co_global, *lead_idx, em.mul(r0, layout_of(self.out).shape[-1])]
        elif self.rank >= 2:
            store_at = [n, co_global, *lead_idx, r0, c0]
        else:
            store_at = [n, co_global, c0]
        _store(em, value, self.rows, store_at, (1, layout_of(self.rows).rank - 1))


# Bytes per partition of the input band a strided convolution's output tile reads (two are in flight).
BAND_BYTES = 48 * 1024

# Input-channel tiles whose bands the banded convolution keeps on chip at once for all output-channel tiles.
RESIDENT_CHANNEL_TILES = 16

# Output-channel tiles up to which the banded convolution with resident stationaries emits each tile's
# instructions separately (stores on different DMA queues, bias columns loaded once) instead of looping.
STRAIGHT_CHANNEL_TILES = 8

# Output tiles of the banded convolution emitted per loop trip (fewer when their bands would exceed 2 *
# BAND_BYTES per partition).
UNROLL_TILES = 4


def _fold_nest_unrolled(
    em: LoopNestBuilder,
    dims: Sequence[tuple[int, int]],
    factor: int,
    body: Callable[[LoopNestBuilder, list[Index], list[int], SSAValue | None], SSAValue],
) -> SSAValue:
    """`fold_nest(em, dims, body)` with the innermost level of two or more full tiles unrolled `factor` times,
    so that the loads of consecutive steps are separate instructions (different DMA queues and buffers) issued
    ahead of the accumulation chain."""
    level = next((i for i in reversed(range(len(dims))) if dims[i][0] // dims[i][1] >= 2), None)
    if level is None or factor <= 1:
        return fold_nest(em, dims, body)
    outer, (extent, size), inner = list(dims[:level]), dims[level], list(dims[level + 1 :])
    full, remainder = divmod(extent, size)
    trips, left = divmod(full, factor)

    def at(
        e: LoopNestBuilder, offsets: list[Index], sizes: list[int], offset: Index, tile_size: int, acc: SSAValue | None
    ) -> SSAValue:
        return fold_nest(
            e, inner, lambda e2, o2, s2, a: body(e2, [*offsets, offset, *o2], [*sizes, tile_size, *s2], a), acc
        )

    def unrolled(e: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
        def copies(e2: LoopNestBuilder, base: Index, _: int, carried: SSAValue | None) -> SSAValue:
            for j in range(factor):
                carried = at(e2, offsets, sizes, e2.add(base, j * size), size, carried)
            assert carried is not None
            return carried

        if trips:
            acc = fold_nest(
                e, [(trips * factor * size, factor * size)], lambda e2, o, s, a: copies(e2, o[0], s[0], a), acc
            )
        for j in range(left):
            acc = at(e, offsets, sizes, (trips * factor + j) * size, size, acc)
        if remainder:
            acc = at(e, offsets, sizes, full * size, remainder, acc)
        assert acc is not None
        return acc

    return fold_nest(em, outer, unrolled)


def _for_tiles_unrolled(
    em: LoopNestBuilder, extent: int, size: int, factor: int, body: Callable[[LoopNestBuilder, Index, int], None]
) -> None:
    """`em.for_tiles(extent, size, body)` with `factor` full tiles per loop trip (straight copies of the body at
    consecutive offsets), the full tiles left over and the partial last one after the loop."""
    full, remainder = divmod(extent, size)
    trips, left = divmod(full, factor)
    if factor <= 1 or trips == 0:
        em.for_tiles(extent, size, body)
        return

    def copies(e: LoopNestBuilder, base: Index) -> None:
        for j in range(factor):
            body(e, e.add(base, j * size), size)

    em.for_tiles(trips * factor * size, factor * size, lambda e, base, _: copies(e, base))
    for j in range(left):
        body(em, (trips * factor + j) * size, size)
    if remainder:
        body(em, full * size, remainder)


def _for_tile_groups(
    em: LoopNestBuilder,
    extent: int,
    size: int,
    factor: int,
    body: Callable[[LoopNestBuilder, list[tuple[Index, int]]], None],
) -> None:
    """`_for_tiles_unrolled`, its tiles handed to `body` together as [(offset, size)]: `factor` full tiles per
    loop trip, then the full tiles left over and the partial last one as one more group."""
    full, remainder = divmod(extent, size)
    trips, left = divmod(full, factor)
    if factor <= 1 or trips == 0:
        em.for_tiles(extent, size, lambda e, offset, count: body(e, [(offset, count)]))
        return

    def group(e: LoopNestBuilder, base: Index, _: int) -> None:
        body(e, [(e.add(base, j * size), size) for j in range(factor)])

    em.for_tiles(trips * factor * size, factor * size, group)
    rest: list[tuple[Index, int]] = [((trips * factor + j) * size, size) for j in range(left)]
    if remainder:
        rest.append((full * size, remainder))
    if rest:
        body(em, rest)


def _band_extent(positions: int, kernel: int, stride: int, dilation: int) -> int:
    """Input elements along one dim that `positions` outputs read: first window start to last window end."""
    return (positions - 1) * stride + (kernel - 1) * dilation + 1


def layout_of_band(band: SSAValue) -> int:
    """The channels (partitions) of a loaded band."""
    band_type = band.type
    assert isinstance(band_type, TileType)
    return band_type.partitions


def _band_spans(
    positions: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    spatial: Sequence[int],
    out_spatial: Sequence[int],
) -> list[int]:
    """The band's extent along the dims a tile of `positions` (the trailing output dims) spans. A tile of whole
    output rows reads whole input rows: the few columns past the last window cost less than breaking the
    band's rows into separate DMA chunks."""
    tail = len(positions)
    spans = [
        _band_extent(p, k, st, d)
        for p, k, st, d in zip(positions, kernel[-tail:], stride[-tail:], dilation[-tail:], strict=True)
    ]
    if tail == 2 and positions[-1] == out_spatial[-1]:
        spans[-1] = spatial[-1]
    return spans


def _band_tiles(
    out_spatial: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    n_tile: int,
    itemsize: int,
) -> tuple[int, int]:
    """(rows, columns) of output positions per tile of the banded path: as `_position_tiles`, fewer when the
    input band they read would exceed BAND_BYTES per partition."""
    _, rows, columns = _position_tiles(out_spatial, n_tile)
    lead_span = math.prod(_band_extent(1, k, 1, d) for k, d in zip(kernel[:-2], dilation[:-2], strict=True))

    def band_bytes(r: int, c: int) -> int:
        span = lead_span * _band_extent(c, kernel[-1], stride[-1], dilation[-1])
        if len(out_spatial) >= 2:
            span *= _band_extent(r, kernel[-2], stride[-2], dilation[-2])
        return span * itemsize

    while band_bytes(rows, columns) > BAND_BYTES and rows > 1:
        rows = (rows + 1) // 2
    while band_bytes(rows, columns) > BAND_BYTES and columns > 1:
        columns = (columns + 1) // 2
    return rows, columns


# Bytes per partition of a weight panel kept on chip for one output-channel tile (and of the weight rows it is
# transposed from); larger weights are read per tap from a prepared copy instead.
PANEL_BYTES = 64 * 1024


def _itemsize(element_type: Attribute) -> int:
    return 2 if str(element_type) in ("bf16", "f16") else 4


def _weight_panel(
    em: LoopNestBuilder,
    w: SSAValue,
    co_global: Index,
    co_size: int,
    cin_g: int,
    taps: int,
    k_tile: int,
    into: SSAValue | None = None,
    column: int = 0,
) -> SSAValue:
    """The stationary operands of one output-channel tile, [ci (<= k_tile), ci tiles, taps, co], built on chip.

    w[Cout, Cin/g, K...] is read as rows (each output channel's Cin/g * taps weights contiguous); the [co, ci]
    block of one tap is the strided window of those rows that starts at the tap and steps over the taps, and a
    TensorE transpose turns it into the [ci, co] stationary. Permuting the weight in HBM instead moves one
    element per DMA chunk.
    """
    element_type = element_type_of(w)
    rows_layout = layout_of(w).reshape((layout_of(w).shape[0], cin_g * taps))
    assert rows_layout is not None, "a convolution weight is contiguous"
    rows = load(em, view(em, w, rows_layout), [co_global, 0], (co_size, cin_g * taps))
    ci_tiles = -(-cin_g // k_tile)
    panel: SSAValue
    if into is None:
        panel_type = TileType((min(cin_g, k_tile), ci_tiles, taps, co_size), element_type, Memory.SBUF)
        panel = em.insert(tile.EmptyOp(panel_type)).result
    else:
        panel = into

    def channel_tile(e: LoopNestBuilder, t: Index, ci_size: int, acc: SSAValue | None) -> SSAValue:
        assert acc is not None

        def per_tap(e2: LoopNestBuilder, k: Index, carried: list[SSAValue]) -> list[SSAValue]:
            block_type = TileType((co_size, ci_size), element_type, Memory.SBUF)
            start = e2.add(e2.mul(t, k_tile * taps), k)
            block = e2.insert(tile.ExtractOp(rows, [e2.index(start)], block_type, [taps])).result
            transposed = e2.insert(tile.TransposeOp(block)).result
            at = [e2.index(i) for i in (t, k, column)]
            return [e2.insert(tile.InsertOp(transposed, carried[0], at)).result]

        if taps <= STRAIGHT_TAP_TRANSPOSES:
            # straight code: each tap's transpose has a PSUM buffer of its own, so TensorE transposes the next
            # tap while the last one is copied out (in a loop, every trip's transpose waits for the trip before's
            # copy out of the one buffer)
            for k in range(taps):
                acc = per_tap(e, k, [acc])[0]
            return acc
        return carry(e, 0, taps, 1, [acc], per_tap)[0]

    return _fold_channel_tiles(em, cin_g, k_tile, channel_tile, panel)


# Kernel taps up to which `_weight_panel` transposes each tap's block in straight code rather than a loop.
STRAIGHT_TAP_TRANSPOSES = 9


# Contiguous bytes per partition from which a DMA runs at its full rate (the cost model's curve).
FULL_RATE_RUN_BYTES = 4 * 1024


def interleaved_rows(cout_g: int, width: int, m_tile: int, element_type: Attribute) -> int:
    """How many consecutive weight rows of `width` weights `_interleaved_weight_panel` puts on each partition per
    load (enough for a full-rate run), or 0 when the forward's stationaries load one row per partition: rows
    already that long, or output channels not a whole number of such loads."""
    row_bytes = width * _itemsize(element_type)
    rows = -(-FULL_RATE_RUN_BYTES // row_bytes)
    if rows < 2 or cout_g % (m_tile * rows):
        return 0
    return rows


def _interleaved_weight_panel(
    em: LoopNestBuilder, w: SSAValue, g: Index, cout_g: int, cin_g: int, taps: int, k_tile: int, m_tile: int
) -> SSAValue:
    """`_weight_panel` of every output-channel tile of group g, [ci, ci tiles, taps, Cout/g], from loads of J
    consecutive weight rows per partition (`interleaved_rows`: J runs of Cin/g * taps weights, one contiguous run
    of at least 4 KiB per partition). Load c holds output channels (c * m_tile + p) * J + j on partition p;
    transposing the [co, ci] window of its row j gives m_tile of them J apart, inserted into the panel with step J.
    One row per partition per load moves runs of Cin/g * taps weights instead (1 KiB for ResNet's 1 x 1 over 512
    channels: 75% of the DMA rate)."""
    element_type = element_type_of(w)
    width = cin_g * taps
    per_partition = interleaved_rows(cout_g, width, m_tile, element_type)
    flat = layout_of(w).reshape((layout_of(w).shape[0], width))
    assert flat is not None, "a convolution weight is contiguous"
    rows_layout = Layout(
        (flat.shape[0] // per_partition, per_partition, width), (per_partition * width, width, 1), flat.offset
    )
    rows_view = view(em, w, rows_layout)
    ci_tiles = -(-cin_g // k_tile)
    panel_type = TileType((min(cin_g, k_tile), ci_tiles, taps, cout_g), element_type, Memory.SBUF)
    panel: SSAValue = em.insert(tile.EmptyOp(panel_type)).result
    loads = cout_g // (m_tile * per_partition)
    for c in range(loads):
        first_row = em.add(em.mul(g, cout_g // per_partition), c * m_tile)
        rows = load(em, rows_view, [first_row, 0, 0], (m_tile, per_partition, width))
        for j in range(per_partition):

            def channel_tile(
                e: LoopNestBuilder,
                t: Index,
                ci_size: int,
                acc: SSAValue | None,
                rows: SSAValue = rows,
                c: int = c,
                j: int = j,
            ) -> SSAValue:
                assert acc is not None

                def per_tap(e2: LoopNestBuilder, k: Index, carried: list[SSAValue]) -> list[SSAValue]:
                    block_type = TileType((m_tile, ci_size), element_type, Memory.SBUF)
                    start = e2.add(e2.mul(t, k_tile * taps), k)
                    block = e2.insert(tile.ExtractOp(rows, [e2.index(j), e2.index(start)], block_type, [taps])).result
                    transposed = e2.insert(tile.TransposeOp(block)).result
                    at = [e2.index(i) for i in (t, k, c * m_tile * per_partition + j)]
                    return [e2.insert(tile.InsertOp(transposed, carried[0], at, [per_partition])).result]

                return carry(e, 0, taps, 1, [acc], per_tap)[0]

            panel = _fold_channel_tiles(em, cin_g, k_tile, channel_tile, panel)
    return panel


def _fold_channel_tiles(
    em: LoopNestBuilder,
    channels: int,
    k_tile: int,
    body: Callable[[LoopNestBuilder, Index, int, SSAValue | None], SSAValue],
    acc: SSAValue | None = None,
) -> SSAValue:
    """Fold `body(tile index, tile size, acc)` over the channel tiles of `k_tile`: a loop over the full tiles,
    then the partial last one (its size is static, so it is its own step)."""
    full, rest = divmod(channels, k_tile)
    if full:
        acc = fold_nest(em, [(full, 1)], lambda e, offsets, _, a: body(e, offsets[0], k_tile, a), acc)
    if rest:
        acc = body(em, full, rest, acc)
    assert acc is not None, "a convolution has at least one input channel"
    return acc


def _transposed_weight_panel(
    em: LoopNestBuilder, w: SSAValue, g: Index, co0: Index, co_size: int, cin_g: int, taps: int, k_tile: int
) -> SSAValue:
    """The stationary operands of one output-channel tile of a transposed convolution, w[Cin, Cout/g, K...]:
    [ci (<= k_tile), ci tiles, co * taps], the rows of w as they are (the input channels are already its rows),
    each ci tile's columns of this tile loaded as whole runs. The [ci, co] stationary of a tap is the window
    that starts at the tap and steps over the taps."""
    element_type = element_type_of(w)
    layout = layout_of(w)
    rows_layout = layout.reshape((layout.shape[0], layout.shape[1] * taps))
    assert rows_layout is not None, "a convolution weight is contiguous"
    rows = view(em, w, rows_layout)
    ci_tiles = -(-cin_g // k_tile)
    panel_type = TileType((min(cin_g, k_tile), ci_tiles, co_size * taps), element_type, Memory.SBUF)
    panel = em.insert(tile.EmptyOp(panel_type)).result

    def channel_tile(e: LoopNestBuilder, t: Index, ci_size: int, acc: SSAValue | None) -> SSAValue:
        assert acc is not None
        ci_global = e.add(e.mul(g, cin_g), e.mul(t, k_tile))
        block = load(e, rows, [ci_global, e.mul(co0, taps)], (ci_size, co_size * taps))
        return e.insert(tile.InsertOp(block, acc, [e.index(t), e.index(0)])).result

    return _fold_channel_tiles(em, cin_g, k_tile, channel_tile, panel)


def panel_fits(cin_g: int, taps: int, co_tile: int, k_tile: int, element_type: Attribute) -> bool:
    """Whether `_weight_panel` of one output-channel tile (and the weight rows it comes from) fits PANEL_BYTES."""
    itemsize = _itemsize(element_type)
    return -(-cin_g // k_tile) * taps * co_tile * itemsize <= PANEL_BYTES and cin_g * taps * itemsize <= PANEL_BYTES


def emit_banded_convolution(
    em: LoopNestBuilder,
    xp: SSAValue,
    w: SSAValue,
    bias: SSAValue | None,
    stride: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    out_element_type: Attribute,
    transposed: bool = False,
    x_on_chip: ChannelsOnChip | None = None,
) -> SSAValue:
    """The convolution of xp with w[Cout, Cin/g, K...] (stride `stride`, dilation `dilation`), without
    element-strided DMAs. `transposed`: w is a transposed convolution's [Cin, Cout/g, K...], the convolution
    the one of its flipped, in/out-swapped filter (xp is then the zero-inserted input and the stride 1). With
    `x_on_chip` (one group), xp is its tensor, held with its margins (the padding), and every band is a window
    of it.

    Per output tile and input-channel tile, the band of xp its positions read (the rows and columns from the
    first window's start to the last window's end, and every kernel offset of the leading dims of a 3-d
    convolution) is loaded once, channels on partitions and whole rows contiguous on the free axes. Each kernel
    tap's moving operand is then the strided window of that band, read in place (tile.extract with steps):
    positions o*s + k*d. A strided window view loaded from HBM instead moves one element per contiguous chunk.
    The stationary operands of an output-channel tile are built once, on chip (`_weight_panel`), when they fit;
    otherwise each tap reads its [ci, co] block from the weight prepared in HBM.
    """
    k_tile, m_tile, n_tile = matmul_limits(em)
    x_layout, w_layout = layout_of(xp), layout_of(w)
    rank = x_layout.rank - 2
    batch = x_layout.shape[0]
    kernel = w_layout.shape[2:]
    if transposed:
        cin_g, cout = w_layout.shape[0] // groups, w_layout.shape[1] * groups
    else:
        cout, cin_g = w_layout.shape[:2]
    cout_g = cout // groups
    taps = math.prod(kernel)
    assert x_on_chip is None or groups == 1, "an input on chip serves one group"
    spatial = x_on_chip.spatial if x_on_chip is not None else x_layout.shape[2:]
    out_spatial = _output_spatial(spatial, kernel, stride, dilation)
    out = alloc(em, (batch, cout, *out_spatial), out_element_type)
    element_type = element_type_of(xp)
    rows, columns = _band_tiles(out_spatial, kernel, stride, dilation, n_tile, _itemsize(element_type))
    band_bytes = _itemsize(element_type) * math.prod(
        _band_extent(p, k, st, d)
        for p, k, st, d in zip(
            [*([1] * (rank - 2)), *([rows] if rank >= 2 else []), columns], kernel, stride, dilation, strict=True
        )
    )
    unroll = max(1, min(UNROLL_TILES, 2 * BAND_BYTES // max(1, band_bytes)))
    lead = list(out_spatial[:-2]) if rank >= 2 else []
    output = _ConvolutionOutput(em, out, bias, rank >= 2 and columns == out_spatial[-1])
    lead_spans = [_band_extent(1, k, 1, d) for k, d in zip(kernel[: len(lead)], dilation[: len(lead)], strict=True)]
    if transposed:
        on_chip = -(-cin_g // k_tile) * min(cout_g, m_tile) * taps * _itemsize(element_type_of(w)) <= PANEL_BYTES
    else:
        on_chip = panel_fits(cin_g, taps, min(cout_g, m_tile), k_tile, element_type_of(w))
    wt = None if on_chip else prepare_weight(em, w, groups, transposed)

    def load_band(
        e: LoopNestBuilder, n: Index, g: Index, lead_idx: list[Index], first: list[Index], positions: tuple[int, ...]
    ) -> Callable[[LoopNestBuilder, Index, int], SSAValue]:
        band_spans = _band_spans(positions, kernel, stride, dilation, spatial, out_spatial)
        band_at = [e.mul(i, st) for i, st in zip([*lead_idx, *first], stride, strict=True)]

        def band_of(e2: LoopNestBuilder, t: Index, ci_size: int) -> SSAValue:
            if x_on_chip is not None:
                return x_on_chip.tile_at(e2, t, ci_size, [n, *band_at], (*lead_spans, *band_spans))
            ci_global = e2.add(e2.mul(g, cin_g), e2.mul(t, k_tile))
            band_shape = (ci_size, *lead_spans, *band_spans)
            return load(e2, xp, [n, ci_global, *band_at], band_shape, dims=tuple(range(1, rank + 2)))

        return band_of

    def output_tile(
        e: LoopNestBuilder,
        panel: SSAValue | None,
        n: Index,
        g: Index,
        lead_idx: list[Index],
        co_global: Index,
        co_size: int,
        r0: Index,
        rs: int,
        c0: Index,
        cs: int,
        panel_co0: Index = 0,
        bands: list[SSAValue] | None = None,
        bias_tile: SSAValue | None = None,
    ) -> None:
        positions = (rs, cs) if rank >= 2 else (cs,)
        first = [r0, c0] if rank >= 2 else [c0]
        tail = len(positions)
        band_of = load_band(e, n, g, lead_idx, first, positions)

        def channel_tile(e2: LoopNestBuilder, t: Index, ci_size: int, acc: SSAValue | None) -> SSAValue:
            ci0 = e2.mul(t, k_tile)
            if bands is not None:
                assert isinstance(t, int), "preloaded bands are indexed by an unrolled channel tile"
                band = bands[t]
            else:
                band = band_of(e2, t, ci_size)

            def tap(e3: LoopNestBuilder, k_idx: list[Index], _: list[int], acc3: SSAValue | None) -> SSAValue:
                stationary: SSAValue
                if panel is not None and transposed:
                    # the filter flipped: tap k of the direct convolution is tap K - 1 - k of w
                    flat: Index = 0
                    for k, extent in zip(k_idx, kernel, strict=True):
                        flat = e3.add(e3.mul(flat, extent), e3.add(extent - 1, e3.mul(k, -1)))
                    stationary_type = TileType((ci_size, co_size), element_type_of(w), Memory.SBUF)
                    column = e3.add(e3.mul(panel_co0, taps), flat)
                    stationary = e3.insert(
                        tile.ExtractOp(panel, [e3.index(t), e3.index(column)], stationary_type, [taps])
                    ).result
                elif panel is not None:
                    stationary = window(e3, panel, [t, _flat_tap(e3, k_idx, kernel), panel_co0], (ci_size, co_size))
                else:
                    assert wt is not None
                    stationary = load(e3, wt, [*k_idx, ci0, co_global], (ci_size, co_size))
                at = [e3.mul(k, d) for k, d in zip(k_idx, dilation, strict=True)]
                window_type = TileType((ci_size, *positions), element_type, Memory.SBUF)
                moving = e3.insert(tile.ExtractOp(band, [e3.index(i) for i in at], window_type, stride[-tail:])).result
                result_type = TileType((co_size, math.prod(positions)), f32, Memory.PSUM)
                return e3.insert(tile.MatmulOp(stationary, moving, result_type, acc3)).result

            return fold_nest(e2, [(k, 1) for k in kernel], tap, acc)

        if bands is not None:
            product = None
            for t, band in enumerate(bands):
                product = channel_tile(e, t, layout_of_band(band), product)
            assert product is not None
        else:
            product = _fold_channel_tiles(e, cin_g, k_tile, channel_tile)
        output.store(e, product, n, co_global, co_size, lead_idx, r0, c0, bias_tile)

    # Unroll the innermost loop that repeats output tiles, so that several tiles' band loads are different
    # instructions (on different DMA queues, into different buffers) and overlap the matmuls of the others.
    column_trips = out_spatial[-1] // columns
    row_trips = out_spatial[-2] // rows if rank >= 2 else 1
    unroll_columns = unroll if column_trips >= 2 else 1
    unroll_rows = unroll if column_trips < 2 and row_trips >= 2 else 1
    unroll_images = unroll if column_trips < 2 and row_trips < 2 else 1

    def each_position_tile(
        e: LoopNestBuilder, body: Callable[[LoopNestBuilder, Index, list[Index], Index, int, Index, int], None]
    ) -> None:
        """body(emitter, n, lead indices, r0, rows, c0, columns) for every output tile of positions."""

        def per_image(e2: LoopNestBuilder, idx: list[Index]) -> None:
            n, *lead_idx = idx
            _for_position_tiles(
                e2,
                out_spatial,
                rows,
                columns,
                lambda e3, r0, rs, c0, cs: body(e3, n, lead_idx, r0, rs, c0, cs),
                unroll_rows,
                unroll_columns,
            )

        extents = [batch, *lead]
        e.for_each_index(
            extents[:-1],
            lambda e2, outer: _for_tiles_unrolled(
                e2, extents[-1], 1, unroll_images, lambda e3, i, _: per_image(e3, [*outer, i])
            ),
        )

    def per_channel_tile(e: LoopNestBuilder, g: Index, co0: Index, co_size: int) -> None:
        co_global = e.add(e.mul(g, cout_g), co0)
        if not on_chip:
            panel = None
        elif transposed:
            panel = _transposed_weight_panel(e, w, g, co0, co_size, cin_g, taps, k_tile)
        else:
            panel = _weight_panel(e, w, co_global, co_size, cin_g, taps, k_tile)
        each_position_tile(
            e,
            lambda e2, n, lead_idx, r0, rs, c0, cs: output_tile(
                e2, panel, n, g, lead_idx, co_global, co_size, r0, rs, c0, cs
            ),
        )

    # With every output-channel tile's stationaries on chip at once, each output tile's bands are loaded once
    # for all of them (instead of once per output-channel tile).
    ci_tiles = -(-cin_g // k_tile)
    w_itemsize = _itemsize(element_type_of(w))
    resident = (
        on_chip
        and cout_g > m_tile
        and ci_tiles <= RESIDENT_CHANNEL_TILES
        and ci_tiles * taps * cout_g * w_itemsize <= PANEL_BYTES
        and (transposed or cin_g * taps * w_itemsize <= PANEL_BYTES)
        and ci_tiles * band_bytes <= 2 * BAND_BYTES
    )

    def per_group_resident(e: LoopNestBuilder, g: Index) -> None:
        if transposed:
            panel = _transposed_weight_panel(e, w, g, 0, cout_g, cin_g, taps, k_tile)
        elif interleaved_rows(cout_g, cin_g * taps, m_tile, element_type_of(w)):
            panel = _interleaved_weight_panel(e, w, g, cout_g, cin_g, taps, k_tile, m_tile)
        else:
            panel_type = TileType((min(cin_g, k_tile), ci_tiles, taps, cout_g), element_type_of(w), Memory.SBUF)
            panel = e.insert(tile.EmptyOp(panel_type)).result
            full, rest = divmod(cout_g, m_tile)
            for j, size in [*((j, m_tile) for j in range(full)), *([(full, rest)] if rest else [])]:
                co_global = e.add(e.mul(g, cout_g), j * m_tile)
                panel = _weight_panel(e, w, co_global, size, cin_g, taps, k_tile, panel, j * m_tile)
        co_tiles = [(co0, min(m_tile, cout_g - co0)) for co0 in range(0, cout_g, m_tile)]
        co_straight = not transposed and len(co_tiles) <= STRAIGHT_CHANNEL_TILES
        # the bias columns of the output-channel tiles, loaded once for every position tile
        biases = (
            [output.bias_tile(e, e.add(e.mul(g, cout_g), co0), size) for co0, size in co_tiles]
            if co_straight and output.bias_column is not None
            else []
        )

        def position_tile(
            e2: LoopNestBuilder, n: Index, lead_idx: list[Index], r0: Index, rs: int, c0: Index, cs: int
        ) -> None:
            first = [r0, c0] if rank >= 2 else [c0]
            positions = (rs, cs) if rank >= 2 else (cs,)
            band_of = load_band(e2, n, g, lead_idx, first, positions)
            bands = [band_of(e2, t, min(k_tile, cin_g - t * k_tile)) for t in range(ci_tiles)]
            if co_straight:
                # each output-channel tile its own instructions: its store goes to a DMA queue of its own
                for j, (co0, co_size) in enumerate(co_tiles):
                    co_global = e2.add(e2.mul(g, cout_g), co0)
                    bias_tile = biases[j] if biases else None
                    output_tile(e2, panel, n, g, lead_idx, co_global, co_size, r0, rs, c0, cs, co0, bands, bias_tile)
                return
            e2.for_tiles(
                cout_g,
                m_tile,
                lambda e3, co0, co_size: output_tile(
                    e3, panel, n, g, lead_idx, e3.add(e3.mul(g, cout_g), co0), co_size, r0, rs, c0, cs, co0, bands
                ),
            )

        each_position_tile(e, position_tile)

    if resident:
        em.for_each(groups, per_group_resident)
    else:
        em.for_each(
            groups, lambda e, g: e.for_tiles(cout_g, m_tile, lambda e2, co0, cs: per_channel_tile(e2, g, co0, cs))
        )
    return out


# A strided 2-d convolution over fewer input channels than this contracts over (channel, kernel row) pairs: its
# channels alone would fill at most a quarter of TensorE's contraction partitions per tap.
ROW_PACKING_MAX_CHANNELS = 32

# Bytes per partition of one tile of `kernel_row_packing`'s copy.
ROW_COPY_BYTES = 32 * 1024


def packs_kernel_rows(channels: int, w_shape: Sequence[int], groups: int, k_tile: int) -> bool:
    """Whether a strided convolution takes `kernel_row_packing`: 2-d, one group, few input channels, and every
    (channel, kernel row) pair of the filter on one partition tile."""
    if len(w_shape) != 4 or groups != 1:
        return False
    kernel_rows = w_shape[2]
    return channels < ROW_PACKING_MAX_CHANNELS and kernel_rows > 1 and channels * kernel_rows <= k_tile


def kernel_row_packing(
    em: LoopNestBuilder, xp: SSAValue, w: SSAValue, row_stride: int, row_dilation: int
) -> tuple[SSAValue, SSAValue]:
    """A stride-`s` convolution of xp[N, C, H, W] with w[Cout, C, KH, KW] as one of 1 x KW kernel, row stride 1,
    over C * KH channels: (rows[N, C * KH, OH, W], w viewed as [Cout, C * KH, 1, KW]).

    rows[n, c * KH + kh, oh, :] is input row oh * s + kh * d of channel c: the rows each output row reads, copied
    so that the (channel, kernel row) pairs are one uniformly strided dim that can be the partition axis. Each
    matmul then contracts over C * KH partitions (48 for ViT-B/16's 16 x 16 patches of RGB, 21 for ResNet's 7 x 7
    stem) instead of C, with KW taps instead of KH * KW. The copy moves whole rows (KH / s times the input when
    kernel windows overlap); a patch embedding (s = KH) copies each row once.
    """
    x_layout = layout_of(xp)
    batch, channels, height, width = x_layout.shape
    cout, _, kernel_rows, kernel_columns = layout_of(w).shape
    out_rows = (height - row_dilation * (kernel_rows - 1) - 1) // row_stride + 1
    packed = alloc(em, (batch, out_rows, channels, kernel_rows, width), element_type_of(xp))
    sn, sc, sh, sw = x_layout.strides
    source = view(
        em,
        xp,
        Layout(
            (batch, out_rows, channels, kernel_rows, width),
            (sn, sh * row_stride, sc, sh * row_dilation, sw),
            x_layout.offset,
        ),
    )
    itemsize = _itemsize(element_type_of(xp))
    if channels * kernel_rows * width * itemsize <= ROW_COPY_BYTES:
        # output rows on partitions: each moves its (channel, kernel row) block of whole rows, one run on the
        # packed side, and up to 128 partitions keep all DMA engines busy
        def copy_blocks(e: LoopNestBuilder, n: Index, r0: Index, rs: int) -> None:
            if rs * 2 < PARTITION_TILE:
                # few output rows (partitions), so few DMA engines per transfer: one transfer per channel, each
                # its own instruction, so they run side by side on different queues
                for c in range(channels):
                    at = [n, r0, c, 0, 0]
                    value = load(e, source, at, (rs, kernel_rows, width), dims=(1, 3, 4))
                    _store(e, value, packed, at, (1, 3, 4))
                return
            at = [n, r0, 0, 0, 0]
            value = load(e, source, at, (rs, channels, kernel_rows, width), dims=(1, 2, 3, 4))
            _store(e, value, packed, at, (1, 2, 3, 4))

        em.for_each(
            batch, lambda e, n: e.for_tiles(out_rows, PARTITION_TILE, lambda e2, r0, rs: copy_blocks(e2, n, r0, rs))
        )
    else:
        per_tile = max(1, min(out_rows, ROW_COPY_BYTES // (channels * width * itemsize)))
        dims = (3, 1, 2, 4)

        def copy_rows(e: LoopNestBuilder, n: Index, r0: Index, rs: int) -> None:
            at = [n, r0, 0, 0, 0]
            value = load(e, source, at, (kernel_rows, rs, channels, width), dims=dims)
            _store(e, value, packed, at, dims)

        em.for_each(batch, lambda e, n: e.for_tiles(out_rows, per_tile, lambda e2, r0, rs: copy_rows(e2, n, r0, rs)))
    merged = layout_of(packed).reshape((batch, out_rows, channels * kernel_rows, width))
    assert merged is not None, "a fresh tensor is contiguous"
    rows = view(em, packed, merged.permute([0, 2, 1, 3]))
    w_merged = layout_of(w).reshape((cout, channels * kernel_rows, 1, kernel_columns))
    assert w_merged is not None, "a convolution weight is contiguous"
    return rows, view(em, w, w_merged)


# ---- depthwise convolutions -----------------------------------------------------------------------------------

# Bytes per partition the hoisted diagonal stationaries of one channel tile may take; larger kernels build each
# tap's diagonal inside the tap loop instead.
DIAGONALS_SBUF_BYTES = 64 * 1024


def is_depthwise(weight_shape: Sequence[int], groups: int) -> bool:
    """Whether a convolution's weight ([Cout, Cin/g, K...] direct, [Cin, Cout/g, K...] transposed) is depthwise
    with one output channel per input channel."""
    return groups > 1 and weight_shape[1] == 1 and weight_shape[0] == groups


def _as_planar(em: LoopNestBuilder, tensor: SSAValue, rank: int) -> SSAValue:
    """A 1-d convolution's [N, C, L] (or weight [C, 1, K]) as [N, C, 1, L]: one path serves both ranks."""
    if rank == 2:
        return tensor
    layout = layout_of(tensor)
    return view(
        em,
        tensor,
        Layout((*layout.shape[:2], 1, layout.shape[2]), (*layout.strides[:2], 0, layout.strides[2]), layout.offset),
    )


def _tap_columns(em: LoopNestBuilder, w: SSAValue, c0: Index, c_size: int) -> SSAValue:
    """[c_size, K] fp32: column k holds kernel offset k (row-major over the kernel dims) of each channel's filter."""
    layout = layout_of(w)
    taps = math.prod(layout.shape[2:])
    flat = layout.reshape((layout.shape[0], taps)) if layout.shape[1] == 1 else None
    source = view(em, w, flat) if flat is not None else copy_to(em, w)
    if flat is None:
        rows = layout_of(source).reshape((layout.shape[0], taps))
        assert rows is not None, "a copy is row-major: any reshape of it is a view"
        source = view(em, source, rows)
    return load(em, source, [c0, 0], (c_size, taps), f32)


def _diagonal(em: LoopNestBuilder, mask: SSAValue, columns: SSAValue, tap: Index, element_type: Attribute) -> SSAValue:
    c_size = mask.type.get_shape()[0]  # type: ignore[attr-defined]
    column = window(em, columns, [tap], (c_size, 1))
    return em.insert(
        tile.BinaryScalarOp(mask, "multiply", TileType((c_size, c_size), element_type, Memory.SBUF), column=column)
    ).result


def _depthwise_windows(
    em: LoopNestBuilder,
    planar_x: SSAValue,
    windows: SSAValue,
    banded: bool,
    at: tuple[Index, Index, Index, Index],
    size: tuple[int, int, int],
    kernel: Sequence[int],
    dilation: Sequence[int],
    element_type: Attribute | None = None,
) -> Callable[[LoopNestBuilder, Index, Index], SSAValue]:
    """The input windows [channels, rows, columns] of the taps (kh, kw) of one output tile (at (n, c0, r0, c0) of
    `size`) of a 2-d depthwise convolution: with stride 1 (`banded`) windows of the band of input rows the tile
    reads (its rows and the kernel's halo), loaded here once; else each tap's window loaded from the strided
    window view [N, C, KH, KW, OH, OW]."""
    n, c0, r0, col0 = at
    c_size, rs, cs = size
    band = None
    if banded:
        band_shape = (c_size, rs + dilation[0] * (kernel[0] - 1), cs + dilation[1] * (kernel[1] - 1))
        band = load(em, planar_x, [n, c0, r0, col0], band_shape, element_type, dims=(1, 2, 3))

    def tap_window(e: LoopNestBuilder, kh: Index, kw: Index) -> SSAValue:
        if band is not None:
            return window(e, band, [e.mul(kh, dilation[0]), e.mul(kw, dilation[1])], (c_size, rs, cs))
        return load(e, windows, [n, c0, kh, kw, r0, col0], (c_size, rs, cs), element_type, dims=(1, 4, 5))

    return tap_window


def emit_depthwise_convolution(
    em: LoopNestBuilder,
    xp: SSAValue,
    w: SSAValue,
    flip: bool,
    bias: SSAValue | None,
    stride: Sequence[int],
    dilation: Sequence[int],
    out_element_type: Attribute,
) -> SSAValue:
    """out[N, C, O...] with out[n, c, o] = sum_k w[c, 0, k'] * xp[n, c, o*s + k*d], k' = k (or the kernel flipped:
    a transposed convolution's), for xp[N, C, S...] already padded and 1-d or 2-d."""
    _, m_tile, n_tile = matmul_limits(em)
    rank = layout_of(xp).rank - 2
    planar_x, planar_w = _as_planar(em, xp, rank), _as_planar(em, w, rank)
    stride2, dilation2 = ([1, *stride], [1, *dilation]) if rank == 1 else (list(stride), list(dilation))
    batch, channels, *spatial = layout_of(planar_x).shape
    kernel = layout_of(planar_w).shape[2:]
    taps = kernel[0] * kernel[1]
    out_spatial = _output_spatial(spatial, kernel, stride2, dilation2)
    out = alloc(em, (batch, channels, *out_spatial[2 - rank :]), out_element_type)
    planar_out = _as_planar(em, out, rank)
    windows = _windows(em, planar_x, kernel, out_spatial, stride2, dilation2)
    _, rows, columns = _position_tiles(out_spatial, n_tile)
    operand_type = element_type_of(xp)
    banded = all(st == 1 for st in stride2)
    bias_column = view(em, bias, layout_of(bias).unsqueeze(1)) if bias is not None else None
    itemsize = 2 if str(operand_type) in ("bf16", "f16") else 4

    def per_channel_tile(e: LoopNestBuilder, c0: Index, c_size: int) -> None:
        tap_columns = _tap_columns(e, w, c0, c_size)
        identity = e.insert(tile.IotaOp(TileType((c_size, c_size), f32, Memory.SBUF), [-1], 0, 1)).result
        mask = e.insert(
            tile.BinaryScalarOp(identity, "is_equal", TileType((c_size, c_size), f32, Memory.SBUF), scalar=0.0)
        ).result

        def source_tap(e2: LoopNestBuilder, tap: Index) -> Index:
            return e2.add(e2.mul(tap, -1), taps - 1) if flip else tap

        hoisted = taps * c_size * itemsize <= DIAGONALS_SBUF_BYTES
        diagonals = None
        if hoisted:
            empty = e.insert(tile.EmptyOp(TileType((c_size, taps, c_size), operand_type, Memory.SBUF))).result

            def build(e2: LoopNestBuilder, tap: Index, carried: list[SSAValue]) -> list[SSAValue]:
                diagonal = _diagonal(e2, mask, tap_columns, source_tap(e2, tap), operand_type)
                return [e2.insert(tile.InsertOp(diagonal, carried[0], [e2.index(tap), e2.index(0)])).result]

            [diagonals] = carry(e, 0, taps, 1, [empty], build)

        def output_tile(e2: LoopNestBuilder, n: Index, r0: Index, rs: int, col0: Index, cs: int) -> None:
            tap_window = _depthwise_windows(
                e2, planar_x, windows, banded, (n, c0, r0, col0), (c_size, rs, cs), kernel, dilation2
            )

            def step(e3: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
                kh, kw = offsets
                tap = e3.add(e3.mul(kh, kernel[1]), kw)
                if diagonals is not None:
                    stationary = window(e3, diagonals, [tap, 0], (c_size, c_size))
                else:
                    stationary = _diagonal(e3, mask, tap_columns, source_tap(e3, tap), operand_type)
                moving = tap_window(e3, kh, kw)
                result_type = TileType((c_size, rs * cs), f32, Memory.PSUM)
                return e3.insert(tile.MatmulOp(stationary, moving, result_type, acc)).result

            product = fold_nest(e2, [(kernel[0], 1), (kernel[1], 1)], step)
            if bias_column is not None:
                bias_tile = load(e2, bias_column, [c0, 0], (c_size, 1), f32)
                flat_type = TileType((c_size, rs * cs), out_element_type, Memory.SBUF)
                value: SSAValue = e2.insert(tile.BinaryScalarOp(product, "add", flat_type, column=bias_tile)).result
            else:
                value = to_sbuf(e2, product, out_element_type)
            rows_view = layout_of(planar_out).reshape((batch, channels, out_spatial[0] * out_spatial[1]))
            if cs == out_spatial[1] and rows_view is not None:
                _store(e2, value, view(e2, planar_out, rows_view), [n, c0, e2.mul(r0, out_spatial[1])], (1, 2))
            else:
                _store(e2, value, planar_out, [n, c0, r0, col0], (1, 3))

        e.for_each(
            batch,
            lambda e2, n: _for_position_tiles(
                e2, out_spatial, rows, columns, lambda e3, r0, rs, col0, cs: output_tile(e3, n, r0, rs, col0, cs)
            ),
        )

    em.for_tiles(channels, m_tile, per_channel_tile)
    return out


def emit_depthwise_weight_gradient(
    em: LoopNestBuilder,
    xp: SSAValue,
    grad_out: SSAValue,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    out_element_type: Attribute,
) -> SSAValue:
    """gw[C, 1, K...] = sum over n, o of go[n, c, o] * xp[n, c, o*s + k*d], per channel (a depthwise filter's)."""
    _, m_tile, n_tile = matmul_limits(em)
    rank = len(kernel)
    planar_x, planar_go = _as_planar(em, xp, rank), _as_planar(em, grad_out, rank)
    kernel2 = [1, *kernel] if rank == 1 else list(kernel)
    stride2, dilation2 = ([1, *stride], [1, *dilation]) if rank == 1 else (list(stride), list(dilation))
    batch, channels, *out_spatial = layout_of(planar_go).shape
    taps = kernel2[0] * kernel2[1]
    windows = _windows(em, planar_x, kernel2, out_spatial, stride2, dilation2)
    _, rows, columns = _position_tiles(out_spatial, n_tile)
    gw = alloc(em, (channels, 1, *kernel), out_element_type)
    gw_columns = view(em, gw, Layout((channels, taps), (taps, 1), 0))
    banded = all(st == 1 for st in stride2)

    def per_channel_tile(e: LoopNestBuilder, c0: Index, c_size: int) -> None:
        column_type = TileType((c_size, 1), f32, Memory.SBUF)

        def position_tile(
            e2: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None
        ) -> SSAValue:
            n, r0, col0 = offsets
            rs, cs = sizes[1], sizes[2]
            if acc is None:
                acc = e2.insert(tile.FillOp(0.0, TileType((c_size, taps), f32, Memory.SBUF))).result
            go = load(e2, planar_go, [n, c0, r0, col0], (c_size, rs, cs), f32, dims=(1, 2, 3))
            tap_window = _depthwise_windows(
                e2, planar_x, windows, banded, (n, c0, r0, col0), (c_size, rs, cs), kernel2, dilation2, f32
            )

            def per_row(e3: LoopNestBuilder, kh: Index, carried: list[SSAValue]) -> list[SSAValue]:
                def per_tap(e4: LoopNestBuilder, kw: Index, values: list[SSAValue]) -> list[SSAValue]:
                    tap = e4.add(e4.mul(kh, kernel2[1]), kw)
                    taken = tap_window(e4, kh, kw)
                    product = e4.insert(
                        tile.BinaryOp(taken, go, "multiply", TileType((c_size, rs, cs), f32, Memory.SBUF))
                    ).result
                    total = e4.insert(tile.ReduceOp(product, "add", column_type, axes=2)).result
                    previous = window(e4, values[0], [tap], (c_size, 1))
                    summed = e4.insert(tile.BinaryOp(previous, total, "add", column_type)).result
                    return [e4.insert(tile.InsertOp(summed, values[0], [e4.index(tap)])).result]

                return carry(e3, 0, kernel2[1], 1, carried, per_tap)

            [acc] = carry(e2, 0, kernel2[0], 1, [acc], per_row)
            return acc

        nest = [(batch, 1), (out_spatial[0], rows), (out_spatial[1], columns)]
        total = fold_nest(e, nest, position_tile)
        _store(e, to_sbuf(e, total, out_element_type), gw_columns, [c0, 0], (0, 1))

    em.for_tiles(channels, m_tile, per_channel_tile)
    return gw


# ---- ATen ops ------------------------------------------------------------------------------------------------


def _expand_param(values: Sequence[int], rank: int) -> list[int]:
    values = list(values)
    return values * rank if len(values) == 1 else values


def emit_convolution(
    em: LoopNestBuilder,
    op_name: str,
    x: SSAValue,
    w: SSAValue,
    bias: SSAValue | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
    out_element_type: Attribute,
) -> SSAValue:
    """aten.convolution's semantics on batched input x[N, C, S...]."""
    rank = layout_of(x).rank - 2
    stride, padding = _expand_param(stride, rank), _expand_param(padding, rank)
    dilation, output_padding = _expand_param(dilation, rank), _expand_param(output_padding or [0], rank)
    kernel = layout_of(w).shape[2:]
    depthwise = rank <= 2 and is_depthwise(layout_of(w).shape, groups)
    # every path reads whole rows of the map's channels: a channels-last map seen as [N, C, H, W] (ConvNeXt's
    # downsampling after its channels-first layer norm) would load one element per descriptor
    x = contiguous_if_transposed(em, x)
    if transposed:
        # the direct convolution (stride 1) of the zero-inserted input, padded by the kernel's reach less the
        # padding, with the flipped filter
        reach = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        low = [r - p for r, p in zip(reach, padding, strict=True)]
        high = [r - p + op for r, p, op in zip(reach, padding, output_padding, strict=True)]
        k_tile = matmul_limits(em)[0]
        margins = all(st == 1 for st in stride) and min([*low, *high]) >= 0 and any([*low, *high])
        if margins and rank <= 2 and groups == 1 and not depthwise and ChannelsOnChip.fits(x, k_tile, low, high):
            # no zeros between the elements, only a margin: held on chip with it (a stride-1 convolution's input
            # gradient), instead of a padded copy through HBM
            x_on_chip = ChannelsOnChip(em, x, k_tile, low, high)
            return emit_banded_convolution(
                em, x, w, bias, [1] * rank, dilation, groups, out_element_type, True, x_on_chip=x_on_chip
            )
        xp = prepare_input(em, x, low, high, stride)
        if depthwise:
            return emit_depthwise_convolution(em, xp, w, True, bias, [1] * rank, dilation, out_element_type)
        return emit_banded_convolution(em, xp, w, bias, [1] * rank, dilation, groups, out_element_type, True)
    k_tile, _, n_tile = matmul_limits(em)
    x_shape, w_shape = layout_of(x).shape, layout_of(w).shape
    itemsize = _itemsize(element_type_of(x))
    if takes_patches(em, x, w, stride, padding, dilation, groups):
        return emit_patch_convolution(em, x, w, bias, out_element_type)
    if contracts_output_rows(x_shape, w_shape, stride, padding, dilation, groups, k_tile, n_tile, itemsize, True):
        return emit_row_convolution(em, x, w, bias, stride, padding, dilation, out_element_type)
    packs = any(st > 1 for st in stride) and packs_kernel_rows(x_shape[1], w_shape, groups, k_tile)
    held = any(padding) and rank <= 2 and groups == 1 and not depthwise and not packs
    if held and ChannelsOnChip.fits(x, k_tile, padding, padding):
        # the input held on chip with its padding written there, instead of a padded copy through HBM
        x_on_chip = ChannelsOnChip(em, x, k_tile, padding, padding)
        return emit_banded_convolution(em, x, w, bias, stride, dilation, groups, out_element_type, x_on_chip=x_on_chip)
    xp = prepare_input(em, x, padding, padding, [1] * rank)
    if depthwise:
        return emit_depthwise_convolution(em, xp, w, False, bias, stride, dilation, out_element_type)
    if packs:
        rows, w_rows = kernel_row_packing(em, xp, w, stride[0], dilation[0])
        return emit_banded_convolution(em, rows, w_rows, bias, [1, stride[1]], [1, dilation[1]], 1, out_element_type)
    return emit_banded_convolution(em, xp, w, bias, stride, dilation, groups, out_element_type)


def _convolution(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    out = emit_convolution(
        em,
        op.name,
        args["input"],
        args["weight"],
        args.get("bias"),
        args["stride"],
        args["padding"],
        args["dilation"],
        bool(args["transposed"]),
        args["output_padding"],
        int(args["groups"]),
        result_element_type(op),
    )
    assert layout_of(out).shape == result_shape(op), f"{layout_of(out).shape} is the shape `legal` computed"
    return [out]


def emit_weight_gradient(
    em: LoopNestBuilder,
    x: SSAValue,
    grad_out: SSAValue,
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    out_element_type: Attribute,
) -> SSAValue:
    """gw[Cout, Cin/g, K...] = sum over n, o of go[n, co, o] * xp[n, ci, o*s + k*d] (direct convolution's)."""
    k_tile, m_tile, n_tile = matmul_limits(em)
    rank = len(kernel)
    xp = prepare_input(em, x, padding, padding, [1] * rank)
    x_layout, g_layout = layout_of(xp), layout_of(grad_out)
    batch, cin = x_layout.shape[:2]
    cout = g_layout.shape[1]
    out_spatial = g_layout.shape[2:]
    cin_g, cout_g = cin // groups, cout // groups
    windows = _windows(em, xp, kernel, out_spatial, stride, dilation)
    gw = alloc(em, (cout, cin_g, *kernel), out_element_type)
    last = 2 + 2 * rank - 1

    def output_tile(e: LoopNestBuilder, idx: list[Index], co0: Index, co_size: int, ci0: Index, ci_size: int) -> None:
        g, *k_idx = idx
        co_global = e.add(e.mul(g, cout_g), co0)
        ci_global = e.add(e.mul(g, cin_g), ci0)

        def step(e2: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
            n, *lead, p0 = offsets
            p_size = sizes[-1]
            stationary = load(e2, grad_out, [n, co_global, *lead, p0], (p_size, co_size), dims=(2 + rank - 1, 1))
            moving = load(e2, windows, [n, ci_global, *k_idx, *lead, p0], (p_size, ci_size), dims=(last, 1))
            result_type = TileType((co_size, ci_size), f32, Memory.PSUM)
            return e2.insert(tile.MatmulOp(stationary, moving, result_type, acc)).result

        nest = [(batch, 1), *((o, 1) for o in out_spatial[:-1]), (out_spatial[-1], k_tile)]
        product = fold_nest(e, nest, step)
        _store(e, to_sbuf(e, product, out_element_type), gw, [co_global, ci0, *k_idx], (0, 1))

    def per_offset(e: LoopNestBuilder, idx: list[Index]) -> None:
        e.for_tiles(
            cout_g,
            m_tile,
            lambda e2, co0, cs: e2.for_tiles(cin_g, n_tile, lambda e3, ci0, ci: output_tile(e3, idx, co0, cs, ci0, ci)),
        )

    em.for_each_index([groups, *kernel], per_offset)
    return gw


# Bytes per partition the weight gradient may keep of its transposed operands (grad_output and the input windows
# with output positions on partitions, every position tile at once); larger problems transpose per block.
TRANSPOSED_PANEL_BYTES = 96 * 1024

# Bytes per partition of the channel tiles one DMA of the weight gradient loads together (one position tile's
# grad_output block or input band, all channel tiles side by side).
GROUPED_LOAD_BYTES = 16 * 1024

# Kernel taps times channel tiles up to which the weight gradient's per-tile transposes are emitted straight
# (no inner loop), so the loop over position tiles stays innermost and its loads are double buffered.
STRAIGHT_TRANSPOSES = 64

# Position tiles the weight gradient loads together (one block), and the bytes per partition a block's load of
# one operand may take: a DMA has a fixed cost of about 2 us, a position tile's rows only a few hundred bytes.
BLOCK_TILES = 8
BLOCK_LOAD_BYTES = 12 * 1024

# Bytes per partition up to which the weight gradient's rows of every output-channel tile are held at once, so
# that their stores run side by side on different DMA queues.
STRAIGHT_ROWS_BYTES = 16 * 1024

# Matmuls up to which a resident weight gradient's products may be emitted after the input gradient (see
# `_convolution_backward`): a few dozen hide under the input gradient's stores; hundreds (whisper's conv1d: 360)
# are better emitted first, with the input gradient's loads and stores overlapping them.
DEFERRED_MATMULS = 64


@dataclass(frozen=True)
class _TileKind:
    """Blocks of output positions of one shape: along each trailing output dim, `counts[d]` blocks of `sizes[d]`
    positions from offset `starts[d]` on, for every image and leading position. A block is cut along the first
    trailing dim into `parts` (offset, extent), one position tile each, whose slots are consecutive from
    `first_slot` on, block after block."""

    first_slot: int
    counts: tuple[int, ...]
    starts: tuple[int, ...]
    sizes: tuple[int, ...]
    parts: tuple[tuple[int, int], ...]

    def part_positions(self, part: int) -> int:
        return self.parts[part][1] * math.prod(self.sizes[1:])


def _tile_kinds(lead_count: int, tail: Sequence[int], tile_sizes: Sequence[int], group: int) -> list[_TileKind]:
    """The position tiles of the trailing output dims `tail` (tiles of `tile_sizes`), `group` tiles along the first
    of them to a block, grouped by shape: the full blocks and the partial last one of each dim. `lead_count`
    blocks of each shape per block of the tail (images x leading positions)."""
    options: list[list[tuple[int, int, int]]] = []
    for d, (extent, size) in enumerate(zip(tail, tile_sizes, strict=True)):
        block = size * group if d == 0 else size
        full, rest = divmod(extent, block)
        options.append([*([(full, 0, block)] if full else []), *([(1, full * block, rest)] if rest else [])])
    kinds, slot = [], 0
    for combination in itertools.product(*options):
        counts = tuple(c for c, _, _ in combination)
        sizes = tuple(z for _, _, z in combination)
        parts = tuple((o, min(tile_sizes[0], sizes[0] - o)) for o in range(0, sizes[0], tile_sizes[0]))
        kinds.append(_TileKind(slot, counts, tuple(s for _, s, _ in combination), sizes, parts))
        slot += lead_count * math.prod(counts) * len(parts)
    return kinds


def _carry_nest(
    em: LoopNestBuilder,
    counts: Sequence[int],
    values: list[SSAValue],
    body: Callable[[LoopNestBuilder, list[Index], list[SSAValue]], list[SSAValue]],
) -> list[SSAValue]:
    """`values = body(indices, values)` over every index tuple of `counts`, as nested loops carrying them."""
    if not counts:
        return body(em, [], values)
    return carry(
        em,
        0,
        counts[0],
        1,
        values,
        lambda e, i, v: _carry_nest(e, counts[1:], v, lambda e2, rest, v2: body(e2, [i, *rest], v2)),
    )


# Bytes per partition up to which a convolution's backward keeps grad_output on chip whole (every image, output
# channels on partitions), loaded once for both gradients that read it.
SHARED_GRAD_OUTPUT_BYTES = 16 * 1024


class ChannelsOnChip:
    """A tensor [N, C, S...] that several loops of one lowering read as channel tiles of up to `k_tile`
    partitions: loaded once, whole, at the point where it was made (on its first use, so a lowering that ends up
    not reading it emits nothing), one DMA per image and part, into [k_tile, N, C // k_tile, S...] (and
    [C % k_tile, N, S...] for the last channels), and served as windows of those tiles read in place.

    `low` and `high` zeros around each spatial dim are written on chip (the input gradient's phases read
    grad_output with such a margin); requests are in the tensor's own coordinates unless `padded`.

    A convolution's backward reads grad_output twice, for the weight gradient's transposes and as the input
    gradient's moving operand, each loading it with its own DMAs: for ResNet's 1 x 1 / 2 over 1024 channels
    0.8 MB of 392-byte runs per gradient, at 58% of the DMA engines' rate by the cost model's chunk rule; with a
    margin, the input gradient read a padded copy written to HBM and loaded back.
    """

    def __init__(
        self,
        em: LoopNestBuilder,
        tensor: SSAValue,
        k_tile: int,
        low: Sequence[int] | None = None,
        high: Sequence[int] | None = None,
    ) -> None:
        self.em, self.tensor, self.k_tile = em, tensor, k_tile
        rank = layout_of(tensor).rank - 2
        self.low = list(low) if low is not None else [0] * rank
        self.high = list(high) if high is not None else [0] * rank
        assert min([*self.low, *self.high], default=0) >= 0, "a margin of zeros, not a crop"
        self.block = em.block
        # the op before the point: what is emitted from here on comes after it
        self.before = em.anchor.prev_op if em.anchor is not None else em.block.last_op
        self.full: SSAValue | None = None
        self.rest: SSAValue | None = None
        self.loaded = False

    @property
    def spatial(self) -> list[int]:
        """The spatial dims as held on chip (the margins included)."""
        return [s + lo + hi for s, lo, hi in zip(layout_of(self.tensor).shape[2:], self.low, self.high, strict=True)]

    @staticmethod
    def fits(tensor: SSAValue, k_tile: int, low: Sequence[int], high: Sequence[int]) -> bool:
        """Whether `tensor` [N, C, S...] with its margins takes at most SHARED_GRAD_OUTPUT_BYTES per partition."""
        batch, channels, *spatial = layout_of(tensor).shape
        held = math.prod(s + lo + hi for s, lo, hi in zip(spatial, low, high, strict=True))
        per_partition = batch * -(-channels // k_tile) * held * _itemsize(element_type_of(tensor))
        return bool(spatial) and per_partition <= SHARED_GRAD_OUTPUT_BYTES

    def _load(self) -> None:
        if self.loaded:
            return
        self.loaded = True
        if self.before is not None:
            following = self.before.next_op
        else:
            # the block's start, after the index constants emitters put there (the loads use them)
            following = self.block.first_op
            while isinstance(following, arith.ConstantOp):
                following = following.next_op
        em = self.em.at(self.block, following)
        layout = layout_of(self.tensor)
        batch, channels, *spatial = layout.shape
        held = self.spatial
        element_type = element_type_of(self.tensor)
        full, rest = divmod(channels, self.k_tile)
        trailing = tuple(range(3, 3 + len(spatial)))
        margins = any(self.low) or any(self.high)

        def start(shape: tuple[int, ...]) -> SSAValue:
            tile_type = TileType(shape, element_type, Memory.SBUF)
            return em.insert(tile.FillOp(0.0, tile_type) if margins else tile.EmptyOp(tile_type)).result

        if full:
            split = Layout(
                (batch, full, self.k_tile, *spatial),
                (layout.strides[0], layout.strides[1] * self.k_tile, layout.strides[1], *layout.strides[2:]),
                layout.offset,
            )
            grouped = view(em, self.tensor, split)
            whole = start((self.k_tile, batch, full, *held))
            for n in range(batch):
                image = load(em, grouped, [n, 0, 0, *([0] * len(spatial))], (self.k_tile, full, *spatial),
                             dims=(2, 1, *trailing))  # fmt: skip
                at = [em.index(i) for i in (n, 0, *self.low)]
                whole = em.insert(tile.InsertOp(image, whole, at)).result
            self.full = whole
        if rest:
            last = start((rest, batch, *held))
            for n in range(batch):
                image = load(em, self.tensor, [n, full * self.k_tile, *([0] * len(spatial))], (rest, *spatial),
                             dims=(1, *(d - 1 for d in trailing)))  # fmt: skip
                at = [em.index(i) for i in (n, *self.low)]
                last = em.insert(tile.InsertOp(image, last, at)).result
            self.rest = last

    def channel_sums(self, em: LoopNestBuilder, out_element_type: Attribute) -> SSAValue:
        """The tensor summed over every dim but the channels ([C], a convolution's bias gradient): per channel
        tile, each image's plane reduced in place and the images' sums added, in fp32."""
        self._load()
        batch, channels = layout_of(self.tensor).shape[:2]
        spatial = self.spatial  # the margins' zeros add nothing
        out = alloc(em, (channels,), out_element_type)
        column_view = view(em, out, layout_of(out).unsqueeze(1))
        element_type = element_type_of(self.tensor)
        for c0 in range(0, channels, self.k_tile):
            size = min(self.k_tile, channels - c0)
            column_type = TileType((size, 1), f32, Memory.SBUF)
            total: SSAValue | None = None
            for n in range(batch):
                plane_type = TileType((size, *spatial), element_type, Memory.SBUF)
                if size == self.k_tile:
                    assert self.full is not None
                    indices = [em.index(i) for i in (n, c0 // self.k_tile, *([0] * len(spatial)))]
                    plane = em.insert(tile.ExtractOp(self.full, indices, plane_type)).result
                else:
                    assert self.rest is not None
                    indices = [em.index(i) for i in (n, *([0] * len(spatial)))]
                    plane = em.insert(tile.ExtractOp(self.rest, indices, plane_type)).result
                part = em.insert(tile.ReduceOp(plane, "add", column_type, len(spatial))).result
                total = part if total is None else em.insert(tile.BinaryOp(total, part, "add", column_type)).result
            assert total is not None, "a tensor on chip has at least one image"
            em.insert(tile.StoreOp(to_sbuf(em, total, out_element_type), column_view, [em.index(c0), em.index(0)]))
        return out

    def tile_at(self, em: LoopNestBuilder, t: Index, size: int, at: Sequence[Index], shape: Sequence[int]) -> SSAValue:
        """Channel tile `t` (a loop index for the full tiles; `size` below `k_tile` for the last channels) of image
        at[0], the window of `shape` at spatial offsets at[1:] counted within the margins."""
        self._load()
        n, *offsets = at
        window_type = TileType((size, *shape), element_type_of(self.tensor), Memory.SBUF)
        if size == self.k_tile:
            assert self.full is not None
            indices = [em.index(i) for i in (n, t, *offsets)]
            return em.insert(tile.ExtractOp(self.full, indices, window_type)).result
        assert self.rest is not None
        indices = [em.index(i) for i in (n, *offsets)]
        return em.insert(tile.ExtractOp(self.rest, indices, window_type)).result

    def tiles(
        self,
        em: LoopNestBuilder,
        first: Index,
        channels: int,
        at: Sequence[Index],
        shape: Sequence[int],
        padded: bool = False,
    ) -> list[tuple[SSAValue, int, int]] | None:
        """`_channel_tiles`' answer from the tensor on chip (`at` counted within the margins when `padded`), or
        None when the request is not whole channel tiles from a tile boundary (or not of the tensor's rank)."""
        total = layout_of(self.tensor).shape[1]
        spatial = layout_of(self.tensor).shape[2:]
        if not isinstance(first, int) or first % self.k_tile or len(at) != 1 + len(spatial):
            return None
        if len(shape) != len(spatial) or (channels % self.k_tile and first + channels != total):
            return None
        self._load()
        n, *offsets = at
        if not padded:
            offsets = [em.add(o, lo) for o, lo in zip(offsets, self.low, strict=True)]
        element_type = element_type_of(self.tensor)
        tiles: list[tuple[SSAValue, int, int]] = []
        for c0 in range(0, channels, self.k_tile):
            size = min(self.k_tile, channels - c0)
            t = (first + c0) // self.k_tile
            window_type = TileType((size, *shape), element_type, Memory.SBUF)
            if size == self.k_tile:
                assert self.full is not None
                indices = [em.index(i) for i in (n, t, *offsets)]
                value = em.insert(tile.ExtractOp(self.full, indices, window_type)).result
            else:
                assert self.rest is not None
                indices = [em.index(i) for i in (n, *offsets)]
                value = em.insert(tile.ExtractOp(self.rest, indices, window_type)).result
            tiles.append((value, c0, size))
        return tiles


def _channel_tiles(
    em: LoopNestBuilder,
    tensor: SSAValue,
    first: Index,
    channels: int,
    k_tile: int,
    at: Sequence[Index],
    shape: Sequence[int],
    on_chip: ChannelsOnChip | None = None,
) -> list[tuple[SSAValue, int, int]]:
    """The channels [first, first + channels) of `tensor` [N, C, S...] at (n, spatial offsets) `at` = [n, *rest],
    `shape` positions each, as [(tile, first channel, channels)] of at most `k_tile` partitions. The full tiles come
    from one DMA ([k_tile, tiles, *shape]) when they fit GROUPED_LOAD_BYTES, so a position tile costs one transfer
    per operand rather than one per channel tile; from `on_chip`'s tiles when it holds `tensor` in such tiles."""
    if on_chip is not None and on_chip.tensor is tensor and on_chip.k_tile == k_tile:
        served = on_chip.tiles(em, first, channels, at, shape)
        if served is not None:
            return served
    n, *rest = at
    rank = layout_of(tensor).rank
    full, remainder = divmod(channels, k_tile)
    itemsize = _itemsize(element_type_of(tensor))
    tiles: list[tuple[SSAValue, int, int]] = []
    # the tile's free dims walk the tensor's trailing dims
    spatial_dims = tuple(range(rank - len(shape), rank))
    if full > 1 and full * math.prod(shape) * itemsize <= GROUPED_LOAD_BYTES:
        layout = layout_of(tensor)
        stride = layout.strides[1]
        # [N, tiles, k_tile, S...] over the channels from `first` (a view of the tensor, whatever `first` is: the
        # tile index enters as the offset of the load)
        split = Layout(
            (layout.shape[0], full, k_tile, *layout.shape[2:]),
            (layout.strides[0], stride * k_tile, stride, *layout.strides[2:]),
            layout.offset,
        )
        grouped_view = view(em, tensor, split)
        if isinstance(first, int) and first % k_tile == 0:
            indices: list[Index] = [n, first // k_tile, 0, *rest]
            grouped = load(
                em, grouped_view, indices, (k_tile, full, *shape), dims=(2, 1, *(d + 1 for d in spatial_dims))
            )
            for t in range(full):
                part = em.insert(
                    tile.ExtractOp(
                        grouped,
                        [em.index(t), *(em.index(0) for _ in shape)],
                        TileType((k_tile, *shape), element_type_of(tensor), Memory.SBUF),
                    )
                ).result
                tiles.append((part, t * k_tile, k_tile))
            full_done = True
        else:
            full_done = False
    else:
        full_done = False
    if not full_done:
        for t in range(full):
            value = load(em, tensor, [n, em.add(first, t * k_tile), *rest], (k_tile, *shape), dims=(1, *spatial_dims))
            tiles.append((value, t * k_tile, k_tile))
    if remainder:
        value = load(em, tensor, [n, em.add(first, full * k_tile), *rest], (remainder, *shape), dims=(1, *spatial_dims))
        tiles.append((value, full * k_tile, remainder))
    return tiles


@dataclass(frozen=True)
class _WeightGradient:
    """What both strategies of the banded weight gradient share: operands, shapes and the position tiling."""

    xp: SSAValue
    grad_out: SSAValue
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    out_element_type: Attribute
    k_tile: int
    m_tile: int
    n_tile: int
    batch: int
    cin_g: int
    cout_g: int
    spatial: tuple[int, ...]  # of xp
    out_spatial: tuple[int, ...]
    rows: int  # output rows per position tile (2-d and 3-d)
    columns: int  # output columns per position tile
    on_chip: ChannelsOnChip | None = None  # grad_output, when the backward keeps it on chip for both gradients
    x_on_chip: ChannelsOnChip | None = None  # the input with its padding, standing for xp's bands

    @property
    def taps(self) -> int:
        return math.prod(self.kernel)

    @property
    def rank(self) -> int:
        return len(self.kernel)

    @property
    def lead(self) -> list[int]:
        """The leading output dims (a 3-d convolution's first), walked one position at a time."""
        return list(self.out_spatial[:-2]) if self.rank >= 2 else []

    @property
    def lead_spans(self) -> list[int]:
        """The band's extent along the leading dims: every kernel offset of one position."""
        lead = len(self.lead)
        return [_band_extent(1, k, 1, d) for k, d in zip(self.kernel[:lead], self.dilation[:lead], strict=True)]

    @property
    def tail_stride(self) -> tuple[int, ...]:
        """The stride along the dims a position tile spans (the last two, or the last of a 1-d convolution)."""
        return self.stride[-2:] if self.rank >= 2 else self.stride[-1:]

    def band_spans(self, positions: Sequence[int]) -> list[int]:
        return _band_spans(positions, self.kernel, self.stride, self.dilation, self.spatial, self.out_spatial)


def _insert_tap_windows(
    em: LoopNestBuilder,
    wg: _WeightGradient,
    k_idx: list[Index],
    bands: Sequence[tuple[SSAValue, int, int]],
    positions: tuple[int, ...],
    offset: int,
    into: SSAValue,
    slot: Sequence[Index] = (),
    first_channel: int = 0,
) -> SSAValue:
    """Insert tap `k_idx`'s windows of `bands` ([(band, first channel, channels)]: channel tiles of one block of
    input rows), transposed on TensorE to [positions, channels], into `into` at [*slot, (channel -
    first_channel) * taps + tap] with the taps innermost (the weight's own order). The windows start `offset`
    positions (times the stride) into the band along the first dim a position tile spans."""
    tap = _flat_tap(em, k_idx, wg.kernel)
    at = [em.mul(k, d) for k, d in zip(k_idx, wg.dilation, strict=True)]
    lead = len(wg.lead)
    at[lead] = em.add(at[lead], offset * wg.tail_stride[0])
    for band, c0, size in bands:
        window_type = TileType((size, *positions), element_type_of(wg.xp), Memory.SBUF)
        taken = em.insert(tile.ExtractOp(band, [em.index(i) for i in at], window_type, wg.tail_stride)).result
        transposed = em.insert(tile.TransposeOp(taken)).result
        column = em.add((c0 - first_channel) * wg.taps, tap)
        at_column = [*(em.index(i) for i in slot), em.index(column)]
        into = em.insert(tile.InsertOp(transposed, into, at_column, [wg.taps])).result
    return into


def folds_taps(wg: _WeightGradient) -> bool:
    """Whether the weight gradient's input windows take `_insert_taps_folded`: one tile of few channels (an RGB
    stem's, or its packed (channel, kernel row) pairs) whose taps together are at most a transpose's columns.

    A tap's matmul there streams channels x taps columns where its transpose streams the tile's positions (up
    to 128): ConvNeXt's 4 x 4 stem (12 x 4) halves its TensorE time, ResNet's 7 x 7 (21 x 7 = 147) would grow
    it (backward 141.1 -> 153.4 us, measured), though its copies out of PSUM drop from seven to one."""
    return wg.taps > 1 and wg.cin_g <= wg.k_tile and wg.cin_g * wg.taps <= wg.k_tile


def tap_selectors(em: LoopNestBuilder, wg: _WeightGradient, element_type: Attribute) -> list[SSAValue]:
    """Per tap, the [C, C * taps] 0/1 matrix with a one at [c, c * taps + tap] (C = Cin/g): the moving operand
    that puts the tap's window, as a matmul's stationary, into its columns (built once, on GpSimdE/VectorE)."""
    shape = TileType((wg.cin_g, wg.cin_g * wg.taps), f32, Memory.SBUF)
    selectors: list[SSAValue] = []
    for tap in range(wg.taps):
        # column - taps * partition - tap: zero exactly at the tap's column of each channel
        offsets = em.insert(tile.IotaOp(shape, [1], -tap, -wg.taps)).result
        hit = TileType(shape.get_shape(), element_type, Memory.SBUF)
        selectors.append(em.insert(tile.BinaryScalarOp(offsets, "is_equal", hit, scalar=0.0)).result)
    return selectors


def _insert_taps_folded(
    em: LoopNestBuilder,
    wg: _WeightGradient,
    bands: Sequence[tuple[SSAValue, int, int]],
    positions: tuple[int, ...],
    offset: int,
    into: SSAValue,
    slot: Sequence[Index],
    selectors: Sequence[SSAValue],
) -> SSAValue:
    """What `_insert_tap_windows` does for every tap at once: each tap's window, the stationary of a matmul
    against its selector, lands in its columns of one PSUM tile [positions, channels * taps] (the products
    accumulate, each column written by one tap, times one, plus zeros), which one copy puts into `into`. Per
    tap a transpose instead fills a few columns, and its copy out of PSUM costs an engine's fixed minimum."""
    lead = len(wg.lead)
    count = math.prod(positions)
    for band, c0, size in bands:
        acc: SSAValue | None = None
        for tap, k_idx in enumerate(itertools.product(*(range(k) for k in wg.kernel))):
            at: list[Index] = [k * d for k, d in zip(k_idx, wg.dilation, strict=True)]
            at[lead] = em.add(at[lead], offset * wg.tail_stride[0])
            window_type = TileType((size, *positions), element_type_of(wg.xp), Memory.SBUF)
            taken = em.insert(tile.ExtractOp(band, [em.index(i) for i in at], window_type, wg.tail_stride)).result
            result_type = TileType((count, size * wg.taps), f32, Memory.PSUM)
            acc = em.insert(tile.MatmulOp(taken, selectors[tap], result_type, acc)).result
        assert acc is not None
        at_column = [*(em.index(i) for i in slot), em.index(c0 * wg.taps)]
        into = em.insert(tile.InsertOp(acc, into, at_column)).result
    return into


def emit_banded_weight_gradient(
    em: LoopNestBuilder,
    xp: SSAValue,
    grad_out: SSAValue,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    out_element_type: Attribute,
    resident: bool | None = None,
    deferred: list[Callable[[], None]] | None = None,
    on_chip: ChannelsOnChip | None = None,
    x_on_chip: ChannelsOnChip | None = None,
) -> SSAValue | None:
    """gw[Cout, Cin/g, K...] = sum over n, o of go[n, co, o] * xp[n, ci, o*s + k*d], without element-strided DMAs;
    None when a block of one input channel's taps exceeds a matmul's moving operand (or, `resident` forced, when
    the panels do not fit). With `deferred` given, a resident gradient of one group whose products take at most
    DEFERRED_MATMULS matmuls emits its panels and leaves the products and stores as a callable appended to it,
    for the caller to emit later.

    The contraction runs over output positions, which TensorE needs on the partitions of both operands, where
    they are the contiguous (free) axis of grad_output and of the input. So each tile of up to 128 positions
    loads its grad_output block [co, positions] and its input band [ci, band] with whole rows, and transposes on
    TensorE: the grad_output block into the stationary [positions, co], each tap's strided window of the band
    into [positions, ci], inserted into the moving tile [positions, ci * taps] with the taps innermost (the
    weight's own order). Matmuls over the position tiles accumulate [co, ci * taps] in PSUM, stored as whole
    rows of the weight gradient.

    Two strategies share that: `resident` (the default wherever a group's transposed operands fit
    TRANSPOSED_PANEL_BYTES per partition, `_weight_gradient_resident`) transposes every position tile once
    into panels kept on chip and then multiplies out each block of the result; otherwise
    (`_weight_gradient_per_block`) each [co, ci] block of the result loads and transposes its position tiles
    itself.
    """
    k_tile, m_tile, n_tile = matmul_limits(em)
    x_layout, g_layout = layout_of(xp), layout_of(grad_out)
    batch, cin = x_layout.shape[:2]
    out_spatial = tuple(g_layout.shape[2:])
    taps = math.prod(kernel)
    if min(k_tile, n_tile // taps, cin // groups) < 1 or any(o == 0 for o in out_spatial):
        return None
    rows, columns = _band_tiles(out_spatial, kernel, stride, dilation, k_tile, _itemsize(element_type_of(xp)))
    # xp's spatial dims: the input's with its margins when the input is held on chip with them (xp is then the
    # input itself, whose bands are read from there: only the resident strategy does so)
    spatial = tuple(x_on_chip.spatial) if x_on_chip is not None else tuple(x_layout.shape[2:])
    wg = _WeightGradient(
        xp, grad_out, tuple(kernel), tuple(stride), tuple(dilation), groups, out_element_type,
        k_tile, m_tile, n_tile, batch, cin // groups, g_layout.shape[1] // groups,
        spatial, out_spatial, rows, columns, on_chip, x_on_chip,
    )  # fmt: skip
    plan = _resident_plan(wg) if resident is not False else None
    if (resident or x_on_chip is not None) and plan is None:
        return None
    gw = alloc(em, (g_layout.shape[1], wg.cin_g, *kernel), out_element_type)
    gw_rows_layout = layout_of(gw).reshape((g_layout.shape[1], wg.cin_g * taps))
    assert gw_rows_layout is not None
    gw_rows = view(em, gw, gw_rows_layout)
    if plan is not None:
        matmuls = plan.slots * -(-wg.cout_g // wg.m_tile) * -(-wg.cin_g * taps // wg.n_tile)
        later = deferred if wg.groups == 1 and matmuls <= DEFERRED_MATMULS else None
        _weight_gradient_resident(em, wg, plan, gw_rows, later)
    else:
        _weight_gradient_per_block(em, wg, gw_rows)
    return gw


def _weight_gradient_per_block(em: LoopNestBuilder, wg: _WeightGradient, gw_rows: SSAValue) -> None:
    """The banded weight gradient block by block of the result: each [co, ci * taps] block loads its operands
    per position tile and transposes them (a block of ci's taps at most one matmul's moving operand)."""
    rank, lead, taps = wg.rank, wg.lead, wg.taps
    ci_tile = min(wg.k_tile, wg.n_tile // taps, wg.cin_g)
    element_type = element_type_of(wg.xp)

    def block(e: LoopNestBuilder, g: Index, co0: Index, co_size: int, ci0: Index, ci_size: int) -> None:
        co_global = e.add(e.mul(g, wg.cout_g), co0)
        ci_global = e.add(e.mul(g, wg.cin_g), ci0)

        def position_tile(
            e2: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None
        ) -> SSAValue:
            n, *lead_idx = offsets[: 1 + len(lead)]
            first = offsets[1 + len(lead) :]
            positions = tuple(sizes[1 + len(lead) :])
            count = math.prod(positions)
            go_dims = tuple([1, *range(2 + len(lead), 2 + rank)])
            go = load(e2, wg.grad_out, [n, co_global, *lead_idx, *first], (co_size, *positions), dims=go_dims)
            go_t = to_sbuf(e2, e2.insert(tile.TransposeOp(go)).result)
            band_at = [e2.mul(i, st) for i, st in zip([*lead_idx, *first], wg.stride, strict=True)]
            band_shape = (ci_size, *wg.lead_spans, *wg.band_spans(positions))
            band = load(e2, wg.xp, [n, ci_global, *band_at], band_shape, dims=tuple(range(1, rank + 2)))
            moving: SSAValue = e2.insert(
                tile.EmptyOp(TileType((count, ci_size * taps), element_type, Memory.SBUF))
            ).result

            def per_tap(e3: LoopNestBuilder, k_idx: list[Index], carried: list[SSAValue]) -> list[SSAValue]:
                return [_insert_tap_windows(e3, wg, k_idx, [(band, 0, ci_size)], positions, 0, carried[0])]

            [moving] = _carry_nest(e2, wg.kernel, [moving], per_tap)
            result_type = TileType((co_size, ci_size * taps), f32, Memory.PSUM)
            return e2.insert(tile.MatmulOp(go_t, moving, result_type, acc)).result

        nest = [(wg.batch, 1), *((o, 1) for o in lead)]
        if rank >= 2:
            nest += [(wg.out_spatial[-2], wg.rows), (wg.out_spatial[-1], wg.columns)]
        else:
            nest += [(wg.out_spatial[-1], wg.columns)]
        product = _fold_nest_unrolled(e, nest, UNROLL_TILES, position_tile)
        _store(e, to_sbuf(e, product, wg.out_element_type), gw_rows, [co_global, e.mul(ci0, taps)], (0, 1))

    em.for_each(
        wg.groups,
        lambda e, g: e.for_tiles(
            wg.cout_g,
            wg.m_tile,
            lambda e2, co0, cs: e2.for_tiles(wg.cin_g, ci_tile, lambda e3, ci0, ci: block(e3, g, co0, cs, ci0, ci)),
        ),
    )


@dataclass(frozen=True)
class _ResidentPlan:
    """How the resident weight gradient walks the output positions: blocks of `group` position tiles along the
    first dim a tile spans, of the shapes `kinds`, `slots` position tiles in all, at most `positions_max`
    positions each."""

    group: int
    kinds: list[_TileKind]
    slots: int
    positions_max: int


def _resident_plan(wg: _WeightGradient) -> _ResidentPlan | None:
    """The resident strategy's blocks, or None when a group's transposed operands exceed TRANSPOSED_PANEL_BYTES
    per partition (or a position tile the partitions)."""
    x_size, g_size = _itemsize(element_type_of(wg.xp)), _itemsize(element_type_of(wg.grad_out))
    lead, rank = wg.lead, wg.rank
    tail = list(wg.out_spatial[-2:]) if rank >= 2 else [wg.out_spatial[-1]]
    tile_sizes = [wg.rows, wg.columns] if rank >= 2 else [wg.columns]
    lead_count = wg.batch * math.prod(lead)

    def block_bytes(group: int) -> int:
        """Bytes per partition of one block's loads (all channel tiles of each operand side by side)."""
        positions = [min(t * group, e) if d == 0 else t for d, (t, e) in enumerate(zip(tile_sizes, tail, strict=True))]
        go = -(-wg.cout_g // wg.m_tile) * math.prod(positions) * g_size
        band = -(-wg.cin_g // wg.k_tile) * math.prod([*wg.lead_spans, *wg.band_spans(positions)]) * x_size
        return max(go, band)

    group = 1
    while group < BLOCK_TILES and group * tile_sizes[0] < tail[0] and block_bytes(2 * group) <= BLOCK_LOAD_BYTES:
        group *= 2
    kinds = _tile_kinds(lead_count, tail, tile_sizes, group)
    slots = sum(lead_count * math.prod(kind.counts) * len(kind.parts) for kind in kinds)
    positions_max = max(kind.part_positions(p) for kind in kinds for p in range(len(kind.parts)))
    if slots * (wg.cout_g * g_size + wg.cin_g * wg.taps * x_size) > TRANSPOSED_PANEL_BYTES or positions_max > wg.k_tile:
        return None
    return _ResidentPlan(group, kinds, slots, positions_max)


def _weight_gradient_resident(
    em: LoopNestBuilder,
    wg: _WeightGradient,
    plan: _ResidentPlan,
    gw_rows: SSAValue,
    deferred: list[Callable[[], None]] | None = None,
) -> None:
    """The banded weight gradient with each operand loaded and transposed once.

    First the output positions are walked in blocks of several position tiles (up to 128 positions each): a block
    loads its grad_output rows and input band once, all channels (one DMA per operand when the channel tiles fit
    together), and TensorE transposes each position tile of it into two panels kept on chip, output positions on
    partitions: grad_output^T [positions, tiles, Cout/g] and the taps' windows^T [positions, tiles, Cin/g * taps]
    (taps innermost, the weight's own order). Then each [co, 512] block of the weight gradient accumulates its
    products over all position tiles in one PSUM bank, and each output-channel tile's row leaves in one store.
    Transposing per block of the result instead redoes the grad_output transposes for each input-channel tile
    and the input's for each output-channel tile, and reloads both; loading per position tile pays a DMA's fixed
    cost for a few hundred bytes per partition.
    """
    lead, taps, kinds = wg.lead, wg.taps, plan.kinds
    x_type, g_type = element_type_of(wg.xp), element_type_of(wg.grad_out)
    lead_count = wg.batch * math.prod(lead)
    ci_tiles = -(-wg.cin_g // wg.k_tile)
    straight = ci_tiles * taps * plan.group <= STRAIGHT_TRANSPOSES
    selectors = tap_selectors(em, wg, x_type) if folds_taps(wg) else None
    # The input's panel is cut into buffers of whole channel tiles, each at least a PSUM bank's columns where the
    # channel tiles allow (a product's columns never straddle two): inserts into one buffer keep one engine, so
    # the copies of the transposes out of PSUM, one per tap and channel tile, split between VectorE and ScalarE
    # (ResNet's 3 x 3 / 2: 72 of them all on ScalarE before).
    per_panel = max(1, wg.n_tile // (wg.k_tile * taps))
    x_groups = [(c0, min(per_panel * wg.k_tile, wg.cin_g - c0)) for c0 in range(0, wg.cin_g, per_panel * wg.k_tile)]

    def build_panels(e: LoopNestBuilder, g: Index) -> Callable[[LoopNestBuilder], None]:
        """Emit group g's panels; return what emits its products and stores from them."""
        go_panel: SSAValue = e.insert(
            tile.EmptyOp(TileType((plan.positions_max, plan.slots, wg.cout_g), g_type, Memory.SBUF))
        ).result
        x_panels: list[SSAValue] = [
            e.insert(tile.EmptyOp(TileType((plan.positions_max, plan.slots, size * taps), x_type, Memory.SBUF))).result
            for _, size in x_groups
        ]

        def block(e2: LoopNestBuilder, idx: list[Index], panels: list[SSAValue], kind: _TileKind) -> list[SSAValue]:
            go_p, *x_ps = panels
            n, *rest = idx
            lead_idx = rest[: len(lead)]
            flat: Index = n
            for i, extent in zip(rest, [*lead, *kind.counts], strict=True):
                flat = e2.add(e2.mul(flat, extent), i)
            base = e2.add(e2.mul(flat, len(kind.parts)), kind.first_slot)
            first = [
                e2.add(start, e2.mul(t, size))
                for t, start, size in zip(rest[len(lead) :], kind.starts, kind.sizes, strict=True)
            ]
            go_blocks = _channel_tiles(
                e2,
                wg.grad_out,
                e2.mul(g, wg.cout_g),
                wg.cout_g,
                wg.m_tile,
                [n, *lead_idx, *first],
                kind.sizes,
                wg.on_chip,
            )
            band_at = [e2.mul(i, st) for i, st in zip([*lead_idx, *first], wg.stride, strict=True)]
            band_shape = (*wg.lead_spans, *wg.band_spans(kind.sizes))
            served = (
                wg.x_on_chip.tiles(e2, e2.mul(g, wg.cin_g), wg.cin_g, [n, *band_at], band_shape, padded=True)
                if wg.x_on_chip is not None
                else None
            )
            if served is None:
                assert wg.x_on_chip is None, "the input on chip serves every band of the resident strategy"
                served = _channel_tiles(e2, wg.xp, e2.mul(g, wg.cin_g), wg.cin_g, wg.k_tile, [n, *band_at], band_shape)
            bands = served
            for p, (offset, extent) in enumerate(kind.parts):
                slot = e2.add(base, p)
                positions = (extent, *kind.sizes[1:])
                for go, c0, size in go_blocks:
                    part_type = TileType((size, *positions), g_type, Memory.SBUF)
                    at = [offset, *([0] * (len(positions) - 1))]
                    part = e2.insert(tile.ExtractOp(go, [e2.index(i) for i in at], part_type)).result
                    transposed = e2.insert(tile.TransposeOp(part)).result
                    go_p = e2.insert(tile.InsertOp(transposed, go_p, [e2.index(slot), e2.index(c0)])).result

                def taps_step(
                    e3: LoopNestBuilder,
                    k_idx: list[Index],
                    v: list[SSAValue],
                    positions: tuple[int, ...] = positions,
                    offset: int = offset,
                    slot: Index = slot,
                ) -> list[SSAValue]:
                    return [
                        _insert_tap_windows(
                            e3,
                            wg,
                            k_idx,
                            [band for band in bands if first <= band[1] < first + size],
                            positions,
                            offset,
                            panel,
                            [slot],
                            first,
                        )
                        for panel, (first, size) in zip(v, x_groups, strict=True)
                    ]

                if selectors is not None:
                    assert len(x_ps) == 1, "folded taps have one channel tile"
                    x_ps = [_insert_taps_folded(e2, wg, bands, positions, offset, x_ps[0], [slot], selectors)]
                elif straight:
                    for k_idx in itertools.product(*(range(k) for k in wg.kernel)):
                        x_ps = taps_step(e2, list(k_idx), x_ps)
                else:
                    x_ps = _carry_nest(e2, wg.kernel, x_ps, taps_step)
            return [go_p, *x_ps]

        panels: list[SSAValue] = [go_panel, *x_panels]
        for kind in kinds:
            panels = _carry_nest(e, [wg.batch, *lead, *kind.counts], panels, functools.partial(block, kind=kind))
        go_panel, *x_panels = panels

        def block_product(
            e2: LoopNestBuilder, co0: Index, co_size: int, x_panel: SSAValue, j0: int, js: int
        ) -> SSAValue:
            """[co, j0 : j0 + js] of `x_panel`'s columns of the weight gradient's rows, summed over every position
            tile in PSUM."""
            acc: SSAValue | None = None
            for kind in kinds:
                for p in range(len(kind.parts)):
                    count = kind.part_positions(p)

                    def step(
                        e3: LoopNestBuilder,
                        o: list[Index],
                        _: list[int],
                        a: SSAValue | None,
                        kind: _TileKind = kind,
                        p: int = p,
                        count: int = count,
                    ) -> SSAValue:
                        slot = e3.add(e3.mul(o[0], len(kind.parts)), kind.first_slot + p)
                        stationary_type = TileType((count, co_size), g_type, Memory.SBUF)
                        at = [e3.index(slot), e3.index(co0)]
                        stationary = e3.insert(tile.ExtractOp(go_panel, at, stationary_type)).result
                        moving_type = TileType((count, js), x_type, Memory.SBUF)
                        moving = e3.insert(tile.ExtractOp(x_panel, [e3.index(slot), e3.index(j0)], moving_type)).result
                        result_type = TileType((co_size, js), f32, Memory.PSUM)
                        return e3.insert(tile.MatmulOp(stationary, moving, result_type, a)).result

                    acc = fold_nest(e2, [(lead_count * math.prod(kind.counts), 1)], step, acc)
            assert acc is not None
            return acc

        def output_rows(e2: LoopNestBuilder, co0: Index, co_size: int) -> None:
            width = wg.cin_g * taps
            row = e2.insert(tile.EmptyOp(TileType((co_size, width), wg.out_element_type, Memory.SBUF))).result
            for x_panel, (first, size) in zip(x_panels, x_groups, strict=True):
                for j0 in range(0, size * taps, wg.n_tile):
                    product = block_product(e2, co0, co_size, x_panel, j0, min(wg.n_tile, size * taps - j0))
                    row = e2.insert(tile.InsertOp(product, row, [e2.index(first * taps + j0)])).result
            _store(e2, row, gw_rows, [e2.add(e2.mul(g, wg.cout_g), co0), 0], (0, 1))

        def multiply_out(e: LoopNestBuilder) -> None:
            co_tiles = [(co0, min(wg.m_tile, wg.cout_g - co0)) for co0 in range(0, wg.cout_g, wg.m_tile)]
            row_bytes = wg.cin_g * taps * _itemsize(wg.out_element_type)
            if len(co_tiles) <= STRAIGHT_CHANNEL_TILES and len(co_tiles) * row_bytes <= STRAIGHT_ROWS_BYTES:
                # each output-channel tile's row its own buffer and store: in a loop, a trip's evacuation waits
                # for the previous trip's store (mostly the DMA's fixed latency) to free the buffer
                for co0, co_size in co_tiles:
                    output_rows(e, co0, co_size)
            else:
                e.for_tiles(wg.cout_g, wg.m_tile, output_rows)

        return multiply_out

    def per_group(e: LoopNestBuilder, g: Index) -> None:
        multiply_out = build_panels(e, g)
        if deferred is not None:
            assert wg.groups == 1, "only one group's panels outlive their loop"
            deferred.append(functools.partial(multiply_out, e))
        else:
            multiply_out(e)

    em.for_each(wg.groups, per_group)


# ---- few channels over the input transposed once per kernel column ------------------------------------------

# Output columns (of one row, or of `row_group` rows together) that fill enough of TensorE's partitions for the
# contraction over them (`emit_row_weight_gradient`) and the transposes back (`emit_row_convolution`): ConvNeXt-T's
# stem, 56 columns a row, gains.
ROW_CONTRACTION_MIN_COLUMNS = 48

# Bytes per partition of one batch element's transposed input (`_transposed_input`; two are in flight).
ROW_CONTRACTION_BYTES = 32 * 1024

# Bytes per partition of a block of grad_output rows `emit_row_weight_gradient` loads in one DMA.
ROW_CONTRACTION_GRAD_BYTES = 8 * 1024


# (a, b): a of every b output rows of grad_output `emit_row_weight_gradient` loads transposed by DMA where the
# target's DMAs transpose, the others transposed on TensorE.
DMA_ROWS_OF = (3, 5)


def contracts_output_rows(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    k_tile: int,
    n_tile: int,
    itemsize: int,
    forward: bool = False,
) -> bool:
    """Whether a 2-d convolution's weight gradient takes `emit_row_weight_gradient` (its forward
    `emit_row_convolution`): one group of few input channels (an RGB stem) whose filter's columns (channels x
    kernel rows x kernel columns) fit one matmul's moving operand (forward: whose (channel, kernel row) pairs fit
    one partition tile), output rows of at most `k_tile` positions that fill at least ROW_CONTRACTION_MIN_COLUMNS
    partitions (`row_group` of them together), and a transposed input that fits ROW_CONTRACTION_BYTES per
    partition."""
    if len(w_shape) != 4 or len(x_shape) != 4 or groups != 1:
        return False
    _, cin, kernel_rows, kernel_columns = w_shape
    height, width = (s + 2 * p for s, p in zip(x_shape[2:], padding, strict=True))
    out_columns = (width - dilation[1] * (kernel_columns - 1) - 1) // stride[1] + 1
    out_rows = (height - dilation[0] * (kernel_rows - 1) - 1) // stride[0] + 1
    if out_rows < 1 or not 1 <= out_columns <= k_tile:
        return False
    group = row_group(out_rows, out_columns, padding[0], k_tile)
    fits = cin * kernel_rows <= k_tile if forward else cin * kernel_rows * kernel_columns <= n_tile
    rows_kept = height if group == 1 else _grouped_rows_extent(out_rows, group, kernel_rows, stride[0], dilation[0])
    return (
        cin < ROW_PACKING_MAX_CHANNELS
        and fits
        and group * out_columns >= ROW_CONTRACTION_MIN_COLUMNS
        and kernel_columns * cin * rows_kept * itemsize <= ROW_CONTRACTION_BYTES
    )


def _row_chunks(kernel_columns: int, per_chunk: int) -> list[tuple[int, int]]:
    """The kernel columns in chunks of at most `per_chunk`, as even as their count allows: (first, count)."""
    chunk_count = -(-kernel_columns // per_chunk)
    per_chunk = -(-kernel_columns // chunk_count)
    return [(k0, min(per_chunk, kernel_columns - k0)) for k0 in range(0, kernel_columns, per_chunk)]


def _rows_per_window(
    channels: int,
    kernel_rows: int,
    kernel_columns: int,
    row_stride: int,
    row_dilation: int,
    group: int,
    out_rows: int,
    k_tile: int,
) -> int:
    """How many consecutive output rows `emit_row_convolution` reads from one transposed window: two when the
    window of both rows' input rows (kernel_rows + row_stride / row_dilation per kernel column and channel) takes
    no more chunks of at most `k_tile` rows than one row's, else one.

    Each row then keeps its own matmuls (stationaries with zeros at the other row's input rows, so TensorE streams
    the same columns), but the window's transposes, and their copies out of PSUM, serve two rows: ResNet's 7 x 7 /
    2 stem, 27 rows per kernel column where one row reads 21, transposes two chunks (four and three kernel
    columns) per two output rows instead of per row."""
    if group != 1 or row_stride % row_dilation or out_rows % 2:
        return 1
    one, two = channels * kernel_rows, channels * (kernel_rows + row_stride // row_dilation)
    if two > k_tile:
        return 1
    fewer = len(_row_chunks(kernel_columns, k_tile // two)) <= len(_row_chunks(kernel_columns, k_tile // one))
    return 2 if fewer else 1


def row_group(out_rows: int, out_columns: int, row_padding: int, k_tile: int) -> int:
    """How many output rows share the partitions of `_transposed_input`: as many as fit `k_tile` and divide the
    output rows, without row padding (1 otherwise). ConvNeXt's stem (56 columns) takes two per transpose and
    matmul instead of one."""
    if row_padding:
        return 1
    group = max(1, k_tile // out_columns)
    while out_rows % group:
        group -= 1
    return group


def _grouped_rows_extent(out_rows: int, group: int, kernel_rows: int, row_stride: int, row_dilation: int) -> int:
    """The input rows `_transposed_input` keeps per partition group: those the first row of each group reads."""
    return (out_rows // group - 1) * group * row_stride + (kernel_rows - 1) * row_dilation + 1


def _transposed_input(
    em: LoopNestBuilder,
    x: SSAValue,
    n: Index,
    out_columns: int,
    kernel_columns: int,
    padding: Sequence[int],
    column_stride: int,
    column_dilation: int,
    group: int = 1,
    row_stride: int = 1,
    rows_extent: int = 0,
) -> SSAValue:
    """Batch element n of x[N, C, H, W] padded by `padding` and transposed once per kernel column:
    xt[ow, kw, c, r] = xp[n, c, r, ow * column_stride + kw * column_dilation], output columns on the partitions.

    Each tile of up to 128 input rows of a channel loads as whole rows (zeros beside them set on chip) and each
    kernel column's strided window of it is transposed on TensorE into its place; the padding's rows are zeros.

    With `group` > 1 (no row padding), `group` output rows share the partitions: xt[(i, ow), kw, c, r] is input row
    r + i * row_stride, for the first `rows_extent` rows r, so output rows oh ... oh + group - 1 read the window at
    oh * row_stride together (each tile of input rows loads once per i, overlapping)."""
    layout = layout_of(x)
    _, channels, height, width = layout.shape
    row_pad, column_pad = padding
    padded_rows, padded_width = height + 2 * row_pad, width + 2 * column_pad
    x_type = element_type_of(x)
    if group > 1:
        assert row_pad == 0, "grouped rows are not padded"
        sn, sc, sh, sw = layout.strides
        shape = (layout.shape[0], channels, rows_extent, group, width)
        rows_view = view(em, x, Layout(shape, (sn, sc, sh, sh * row_stride, sw), layout.offset))
        xt_grouped: SSAValue = em.insert(
            tile.EmptyOp(TileType((group * out_columns, kernel_columns, channels, rows_extent), x_type, Memory.SBUF))
        ).result
        for c in range(channels):
            for r0 in range(0, rows_extent, PARTITION_TILE):
                rs = min(PARTITION_TILE, rows_extent - r0)
                rows = load(em, rows_view, [n, c, r0, 0, 0], (rs, group, width), dims=(2, 3, 4))
                if column_pad:
                    zeros_type = TileType((rs, group, padded_width), x_type, Memory.SBUF)
                    zeros = em.insert(tile.FillOp(0.0, zeros_type)).result
                    rows = em.insert(tile.InsertOp(rows, zeros, [em.index(0), em.index(column_pad)])).result
                for kw in range(kernel_columns):
                    window_type = TileType((rs, group, out_columns), x_type, Memory.SBUF)
                    at = [em.index(0), em.index(kw * column_dilation)]
                    window = em.insert(tile.ExtractOp(rows, at, window_type, [1, column_stride])).result
                    transposed = em.insert(tile.TransposeOp(window)).result
                    at = [em.index(kw), em.index(c), em.index(r0)]
                    xt_grouped = em.insert(tile.InsertOp(transposed, xt_grouped, at)).result
        return xt_grouped
    xt: SSAValue = em.insert(
        tile.EmptyOp(TileType((out_columns, kernel_columns, channels, padded_rows), x_type, Memory.SBUF))
    ).result
    for start, end in ((0, row_pad), (row_pad + height, padded_rows)):
        if end > start:
            zeros_type = TileType((out_columns, kernel_columns, channels, end - start), x_type, Memory.SBUF)
            zeros = em.insert(tile.FillOp(0.0, zeros_type)).result
            xt = em.insert(tile.InsertOp(zeros, xt, [em.index(0), em.index(0), em.index(start)])).result
    for c in range(channels):
        for r0 in range(0, height, PARTITION_TILE):
            rs = min(PARTITION_TILE, height - r0)
            rows = load(em, x, [n, c, r0, 0], (rs, width), dims=(2, 3))
            if column_pad:
                zeros = em.insert(tile.FillOp(0.0, TileType((rs, padded_width), x_type, Memory.SBUF))).result
                rows = em.insert(tile.InsertOp(rows, zeros, [em.index(column_pad)])).result
            for kw in range(kernel_columns):
                window_type = TileType((rs, out_columns), x_type, Memory.SBUF)
                at = [em.index(kw * column_dilation)]
                window = em.insert(tile.ExtractOp(rows, at, window_type, [column_stride])).result
                transposed = em.insert(tile.TransposeOp(window)).result
                at = [em.index(kw), em.index(c), em.index(row_pad + r0)]
                xt = em.insert(tile.InsertOp(transposed, xt, at)).result
    return xt


def emit_row_convolution(
    em: LoopNestBuilder,
    x: SSAValue,
    w: SSAValue,
    bias: SSAValue | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    out_element_type: Attribute,
) -> SSAValue:
    """out[n, co, oh, ow] = bias[co] + sum over c, kh, kw of w[co, c, kh, kw] * xp[n, c, oh*sh + kh*dh, ow*sw + kw*dw]
    for few input channels (`contracts_output_rows`, C x KH <= 128), xp the input padded on chip.

    The input is transposed once per kernel column (`_transposed_input`), so output row oh's patches are the
    window xt[:, :, :, oh*sh + kh*dh] of it, [ow, (kw, c, kh)]; transposed back on TensorE in chunks of whole
    kernel columns (at most 128 rows each) they are the moving operands of one matmul per chunk, the filter's
    matching [(kw, c, kh), co] rows as stationaries, so each product contracts over up to 126 rows (6 kernel
    columns of ResNet's 21 (channel, kernel row) pairs) where the kernel-row packing contracts over 21 per
    kernel column. Several output rows share one PSUM bank and one store.
    """
    k_tile, m_tile, n_tile = matmul_limits(em)
    batch, channels, height, width = layout_of(x).shape
    cout, _, kernel_rows, kernel_columns = layout_of(w).shape
    padded_rows = height + 2 * padding[0]
    out_rows = (padded_rows - dilation[0] * (kernel_rows - 1) - 1) // stride[0] + 1
    out_columns = (width + 2 * padding[1] - dilation[1] * (kernel_columns - 1) - 1) // stride[1] + 1
    x_type = element_type_of(x)
    group = row_group(out_rows, out_columns, padding[0], k_tile)
    # `shared` consecutive output rows read one window of window_rows input rows per (kernel column, channel)
    shared = _rows_per_window(channels, kernel_rows, kernel_columns, stride[0], dilation[0], group, out_rows, k_tile)
    window_rows = kernel_rows + (shared - 1) * (stride[0] // dilation[0])
    part = channels * window_rows  # rows of one kernel column
    chunks = _row_chunks(kernel_columns, k_tile // part)
    out = alloc(em, (batch, cout, out_rows, out_columns), out_element_type)
    output = _ConvolutionOutput(em, out, bias, whole_rows=True)
    rows_extent = _grouped_rows_extent(out_rows, group, kernel_rows, stride[0], dilation[0])
    block_rows = max(group, min(out_rows, n_tile // out_columns) // group * group)
    if shared > 1:
        # each of the `shared` products of a block fills a PSUM bank
        block_rows = max(shared, min(out_rows, shared * (n_tile // out_columns)) // shared * shared)
    w_rows_layout = layout_of(w).reshape((cout, channels * kernel_rows * kernel_columns))
    assert w_rows_layout is not None, "a convolution weight is contiguous"
    w_rows = view(em, w, w_rows_layout)
    co_tiles = [(co0, min(m_tile, cout - co0)) for co0 in range(0, cout, m_tile)]

    # the stationaries: per output-channel tile, chunk and output row i of the rows sharing a window, the filter's
    # [(kw, c, r), co] rows, w[co, c, r - i * stride / dilation, kw] where that is a kernel row, zeros elsewhere
    stationaries: list[list[list[SSAValue]]] = []
    row_shift = stride[0] // dilation[0]
    for co0, co_size in co_tiles:
        rows = load(em, w_rows, [co0, 0], (co_size, channels * kernel_rows * kernel_columns), x_type)
        per_tile: list[list[SSAValue]] = []
        for k0, ks in chunks:
            per_row: list[SSAValue] = []
            for i in range(shared):
                gathered_type = TileType((co_size, ks, channels, window_rows), x_type, Memory.SBUF)
                gathered: SSAValue = em.insert(
                    tile.FillOp(0.0, gathered_type) if shared > 1 else tile.EmptyOp(gathered_type)
                ).result
                for j in range(ks):
                    column_type = TileType((co_size, channels * kernel_rows), x_type, Memory.SBUF)
                    column = em.insert(tile.ExtractOp(rows, [em.index(k0 + j)], column_type, [kernel_columns])).result
                    at = [em.index(j), em.index(0), em.index(i * row_shift)]
                    window = (channels, kernel_rows)
                    gathered = em.insert(tile.InsertOp(column, gathered, at, None, window)).result
                # copied into a tile of its own: kept as the transpose's PSUM buffer, every chunk of every
                # output-channel tile would hold PSUM for the whole convolution (fp32 ViT patches: 48 buffers, out
                # of PSUM)
                panel_type = TileType((ks * part, co_size), x_type, Memory.SBUF)
                panel = em.insert(tile.EmptyOp(panel_type)).result
                transposed = em.insert(tile.TransposeOp(gathered)).result
                per_row.append(em.insert(tile.InsertOp(transposed, panel, [em.index(0)])).result)
            per_tile.append(per_row)
        stationaries.append(per_tile)

    def per_element(e: LoopNestBuilder, n: Index) -> None:
        xt = _transposed_input(
            e, x, n, out_columns, kernel_columns, padding, stride[1], dilation[1], group, stride[0], rows_extent
        )

        def transposed_patches(e2: LoopNestBuilder, oh0: Index, count: int) -> list[SSAValue]:
            windows = count // (group * shared)  # transposes per chunk
            patches = []
            for k0, ks in chunks:
                panel: SSAValue = e2.insert(
                    tile.EmptyOp(TileType((ks * part, windows, group * out_columns), x_type, Memory.SBUF))
                ).result
                for j in range(windows):
                    window_type = TileType((group * out_columns, ks, channels, window_rows), x_type, Memory.SBUF)
                    first_row = e2.add(oh0, j * group * shared)
                    at = [e2.index(k0), e2.index(0), e2.index(e2.mul(first_row, stride[0]))]
                    window = e2.insert(tile.ExtractOp(xt, at, window_type, [1, 1, dilation[0]])).result
                    transposed = e2.insert(tile.TransposeOp(window)).result
                    panel = e2.insert(tile.InsertOp(transposed, panel, [e2.index(j), e2.index(0)])).result
                patches.append(panel)
            return patches

        def multiply(e2: LoopNestBuilder, oh0: Index, count: int, patches: list[SSAValue]) -> None:
            windows = count // (group * shared)
            for (co0, co_size), per_tile in zip(co_tiles, stationaries, strict=True):
                products: list[SSAValue] = []
                for i in range(shared):
                    acc: SSAValue | None = None
                    for per_row, panel in zip(per_tile, patches, strict=True):
                        result_type = TileType((co_size, windows * group * out_columns), f32, Memory.PSUM)
                        acc = e2.insert(tile.MatmulOp(per_row[i], panel, result_type, acc)).result
                    assert acc is not None
                    products.append(acc)
                if shared == 1:
                    output.store(e2, products[0], n, co0, co_size, [], oh0, 0)
                    continue
                # product i holds output rows oh0 + i, oh0 + i + shared, ...: one copy each into the block's rows
                rows_type = TileType((co_size, count, out_columns), out_element_type, Memory.SBUF)
                block_rows_tile: SSAValue = e2.insert(tile.EmptyOp(rows_type)).result
                column = output.bias_tile(e2, co0, co_size)
                for i, product in enumerate(products):
                    value = product
                    if column is not None:
                        biased = TileType((co_size, windows * out_columns), out_element_type, Memory.SBUF)
                        value = e2.insert(tile.BinaryScalarOp(product, "add", biased, column=column)).result
                    at = [e2.index(i), e2.index(0)]
                    window = (windows, out_columns)
                    block_rows_tile = e2.insert(tile.InsertOp(value, block_rows_tile, at, [shared, 1], window)).result
                _store(e2, block_rows_tile, out, [n, co0, oh0, 0], (1, 2, 3))

        def blocks(e2: LoopNestBuilder, tiles: list[tuple[Index, int]]) -> None:
            # every block's transposes before the first block's matmuls: TensorE transposes the next block while
            # the last one's copies out of PSUM run, where block by block each matmul waited for them
            patches = [transposed_patches(e2, oh0, count) for oh0, count in tiles]
            for (oh0, count), block_patches in zip(tiles, patches, strict=True):
                multiply(e2, oh0, count, block_patches)

        # several blocks per loop trip: a loop's store keeps its DMA queue on every trip
        _for_tile_groups(e, out_rows, block_rows, UNROLL_TILES, blocks)

    em.for_each(batch, per_element)
    return out


def emit_row_weight_gradient(
    em: LoopNestBuilder,
    x: SSAValue,
    grad_out: SSAValue,
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    out_element_type: Attribute,
) -> SSAValue:
    """gw[Cout, C, KH, KW] = sum over n, oh, ow of go[n, co, oh, ow] * xp[n, c, oh*sh + kh*dh, ow*sw + kw*dw] for
    few input channels (`contracts_output_rows`), xp the input padded on chip.

    The contraction runs over the output columns of one output row at a time, on the partitions: per batch element
    the input is transposed once per kernel column into xt[ow, kw, c, r] = xp[c, r, ow*sw + kw*dw] (each a TensorE
    transpose of a strided window of up to 128 input rows, the padding's rows and columns zeros set on chip), and
    output row oh reads the window xt[:, :, :, oh*sh + kh*dh] of it in place as its moving operand, all C x KH x KW
    columns in one matmul against grad_output's row transposed to [ow, co] (by a DMA transpose for DMA_ROWS_OF of
    the rows where the target's DMAs transpose 2-byte types, on TensorE otherwise: all of them by DMA made the
    DMA queues the bound, each transfer's fixed cost for 14 KiB). The banded gradient transposes a
    window per kernel column and position tile instead (seven per tile for ResNet's 7 x 7 stem, each streaming
    the tile's positions to fill 21 columns), and copies each out of PSUM.
    """
    _, m_tile, _ = matmul_limits(em)
    batch, channels = layout_of(x).shape[:2]
    cout, out_rows, out_columns = layout_of(grad_out).shape[1:]
    kernel_rows, kernel_columns = kernel
    row_stride, column_stride = stride
    x_type, g_type = element_type_of(x), element_type_of(grad_out)
    columns = kernel_columns * channels * kernel_rows  # the product's columns, (kw, c, kh) order
    gw = alloc(em, (cout, channels, kernel_rows, kernel_columns), out_element_type)
    gw_rows_layout = layout_of(gw).reshape((cout, columns))
    assert gw_rows_layout is not None, "a fresh tensor is contiguous"
    gw_rows = view(em, gw, gw_rows_layout)
    co_tiles = [(co0, min(m_tile, cout - co0)) for co0 in range(0, cout, m_tile)]
    k_tile = matmul_limits(em)[0]
    group = row_group(out_rows, out_columns, padding[0], k_tile)
    rows_extent = _grouped_rows_extent(out_rows, group, kernel_rows, row_stride, dilation[0])
    block_rows = ROW_CONTRACTION_GRAD_BYTES // (out_columns * _itemsize(g_type))
    block_rows = max(group, min(out_rows, block_rows) // group * group)
    go_rows_layout = layout_of(grad_out).reshape((batch, cout, out_rows * out_columns))
    go_rows = view(em, grad_out, go_rows_layout) if go_rows_layout is not None else None
    dma_transposes = bool(emitter_target(em).dma_transpose_hbm_efficiency) and _itemsize(g_type) == 2
    dma_transposes = dma_transposes and go_rows is not None

    def row_products(e: LoopNestBuilder, n: Index, xt: SSAValue, co0: int, co_size: int) -> SSAValue:
        """grad_output's co tile times the input windows of every output row of batch element n, in PSUM."""

        def block(e2: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
            (oh0,), (count,) = offsets, sizes
            groups = count // group
            by_dma = [dma_transposes and q % DMA_ROWS_OF[1] < DMA_ROWS_OF[0] for q in range(groups)]
            if not all(by_dma):
                go = load(e2, grad_out, [n, co0, oh0, 0], (co_size, count, out_columns), dims=(1, 2, 3))
            for q in range(groups):
                positions = group * out_columns
                if by_dma[q]:
                    # [(rows, ow), co] straight from the DMA engines: TensorE keeps only the products
                    assert go_rows is not None
                    at = [n, co0, e2.mul(e2.add(oh0, q * group), out_columns)]
                    stationary = load(e2, go_rows, at, (positions, co_size), dims=(2, 1))
                else:
                    rows_type = TileType((co_size, group, out_columns), g_type, Memory.SBUF)
                    rows = e2.insert(tile.ExtractOp(go, [e2.index(q * group), e2.index(0)], rows_type)).result
                    stationary = to_sbuf(e2, e2.insert(tile.TransposeOp(rows)).result, g_type)
                moving_type = TileType((positions, kernel_columns, channels, kernel_rows), x_type, Memory.SBUF)
                window = [e2.index(0), e2.index(0), e2.index(e2.mul(e2.add(oh0, q * group), row_stride))]
                moving = e2.insert(tile.ExtractOp(xt, window, moving_type, [1, 1, dilation[0]])).result
                result_type = TileType((co_size, columns), f32, Memory.PSUM)
                acc = e2.insert(tile.MatmulOp(stationary, moving, result_type, acc)).result
            assert acc is not None
            return acc

        return fold_nest(e, [(out_rows, block_rows)], block)

    def per_element(e: LoopNestBuilder, idx: list[Index], sums: list[SSAValue]) -> list[SSAValue]:
        (n,) = idx
        xt = _transposed_input(
            e, x, n, out_columns, kernel_columns, padding, column_stride, dilation[1], group, row_stride, rows_extent
        )
        added: list[SSAValue] = []
        for (co0, co_size), total in zip(co_tiles, sums, strict=True):
            product = row_products(e, n, xt, co0, co_size)
            total_type = TileType((co_size, columns), f32, Memory.SBUF)
            added.append(e.insert(tile.BinaryOp(total, product, "add", total_type)).result)
        return added

    zero_sums: list[SSAValue] = [
        em.insert(tile.FillOp(0.0, TileType((co_size, columns), f32, Memory.SBUF))).result for _, co_size in co_tiles
    ]
    sums = _carry_nest(em, [batch], zero_sums, per_element)
    for (co0, co_size), total in zip(co_tiles, sums, strict=True):
        # the products' (kw, c, kh) columns back into the weight's (c, kh, kw) order
        row: SSAValue = em.insert(tile.EmptyOp(TileType((co_size, columns), out_element_type, Memory.SBUF))).result
        part = channels * kernel_rows
        for kw in range(kernel_columns):
            taken_type = TileType((co_size, part), f32, Memory.SBUF)
            taken = em.insert(tile.ExtractOp(total, [em.index(kw * part)], taken_type)).result
            row = em.insert(tile.InsertOp(taken, row, [em.index(kw)], [kernel_columns])).result
        _store(em, row, gw_rows, [co0, 0], (0, 1))
    return gw


# Bytes per partition of the filter's transposed chunks `emit_patch_convolution` keeps on chip for the whole
# convolution (ViT-B/16's patch embedding: 6 chunks of 768 output channels, 9 KiB).
PATCH_STATIONARY_BYTES = 48 * 1024


def takes_patches(
    em: LoopNestBuilder,
    x: SSAValue,
    w: SSAValue,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> bool:
    """Whether a convolution takes `emit_patch_convolution`: 2-d, one group, no padding or dilation, a kernel equal
    to its stride (non-overlapping windows: a patch embedding), 2-byte input and weight of one type on a target whose
    DMAs transpose them, kernel rows at least as long as a DMA transpose's block (so that its source is read in runs
    of whole blocks) and the filter's transposed chunks within PATCH_STATIONARY_BYTES per partition."""
    x_shape, w_shape = layout_of(x).shape, layout_of(w).shape
    if len(x_shape) != 4 or len(w_shape) != 4 or groups != 1 or any(padding) or any(d != 1 for d in dilation):
        return False
    cout, cin, kernel_rows, kernel_columns = w_shape
    if tuple(stride) != (kernel_rows, kernel_columns) or x_shape[1] != cin:
        return False
    if element_type_of(x) != element_type_of(w) or _itemsize(element_type_of(x)) != 2:
        return False
    target = emitter_target(em)
    k_tile, _, n_tile = matmul_limits(em)
    height, width = x_shape[2:]
    out_columns = width // kernel_columns
    if not target.dma_transpose_hbm_efficiency or height < kernel_rows or not 1 <= out_columns <= n_tile:
        return False
    if kernel_columns < target.dma_transpose_block_elements or kernel_columns > k_tile:
        return False
    if layout_of(w).reshape((cout, cin * kernel_rows * kernel_columns)) is None:
        return False  # the filter's rows are read as one run per output channel
    chunks = len(_patch_chunks(cin, kernel_rows, kernel_columns, k_tile))
    return chunks * cout * 2 <= PATCH_STATIONARY_BYTES


def _patch_chunks(channels: int, kernel_rows: int, kernel_columns: int, k_tile: int) -> list[tuple[int, int, int, int]]:
    """The contraction's (channel, kernel row, kernel column) rows in chunks of at most `k_tile`, each a contiguous
    range of the filter's rows: (c0, channels, kh0, kernel rows); whole channels when a channel's patch fits."""
    per_channel = kernel_rows * kernel_columns
    if per_channel <= k_tile:
        count = -(-channels // (k_tile // per_channel))
        size = -(-channels // count)
        return [(c0, min(size, channels - c0), 0, kernel_rows) for c0 in range(0, channels, size)]
    count = -(-kernel_rows // (k_tile // kernel_columns))
    size = -(-kernel_rows // count)
    return [(c, 1, kh0, min(size, kernel_rows - kh0)) for c in range(channels) for kh0 in range(0, kernel_rows, size)]


def _tile_partitions(value: SSAValue) -> int:
    return _tile_of(value).partitions


def _tile_of(value: SSAValue) -> TileType:
    value_type = value.type
    assert isinstance(value_type, TileType)
    return value_type


def _patches_view(em: LoopNestBuilder, x: SSAValue, kernel: Sequence[int]) -> SSAValue:
    """x[N, C, H, W] seen as [N, C, OH, KH, OW, KW]: element (n, c, oh, kh, ow, kw) is x[n, c, oh*KH + kh,
    ow*KW + kw] (rows and columns past the last whole patch left out)."""
    layout = layout_of(x)
    batch, channels, height, width = layout.shape
    kernel_rows, kernel_columns = kernel
    sn, sc, sh, sw = layout.strides
    shape = (batch, channels, height // kernel_rows, kernel_rows, width // kernel_columns, kernel_columns)
    strides = (sn, sc, sh * kernel_rows, sh, sw * kernel_columns, sw)
    return view(em, x, Layout(shape, strides, layout.offset))


def emit_patch_convolution(
    em: LoopNestBuilder, x: SSAValue, w: SSAValue, bias: SSAValue | None, out_element_type: Attribute
) -> SSAValue:
    """out[n, co, oh, ow] = bias[co] + sum over c, kh, kw of w[co, c, kh, kw] * x[n, c, oh*KH + kh, ow*KW + kw] for a
    kernel equal to its stride (`takes_patches`): one matmul over the patches.

    The patches of a tile of output positions come onto the partitions by DMA transposes from HBM, [(c, kh, kw)
    chunk, (oh, ow)] (`tile.load_transpose`: each position's patch is a row of the source read across the
    partitions), and the filter's matching chunks [(c, kh, kw), co] by DMA transposes of its rows, loaded once.
    Each output tile is then one PSUM accumulation over the chunks, with no TensorE transpose and no copy out of
    PSUM but the one to its store (`_patch_products_by_chunk` for whole images). The transposed-input path
    (`emit_row_convolution`) transposed each row of the input on TensorE and each output row's patches back, and
    the kernel-row packing copied the rows through HBM and contracted over (channel, kernel row) pairs only.
    """
    k_tile, m_tile, n_tile = matmul_limits(em)
    batch, channels = layout_of(x).shape[:2]
    cout, _, kernel_rows, kernel_columns = layout_of(w).shape
    patches = _patches_view(em, x, (kernel_rows, kernel_columns))
    out_rows, out_columns = layout_of(patches).shape[2], layout_of(patches).shape[4]
    x_type = element_type_of(x)
    out = alloc(em, (batch, cout, out_rows, out_columns), out_element_type)
    output = _ConvolutionOutput(em, out, bias, whole_rows=True)
    chunks = _patch_chunks(channels, kernel_rows, kernel_columns, k_tile)
    columns = channels * kernel_rows * kernel_columns
    w_rows_layout = layout_of(w).reshape((cout, columns))
    assert w_rows_layout is not None, "a convolution weight is contiguous"
    w_rows = view(em, w, w_rows_layout)
    co_tiles = [(co0, min(m_tile, cout - co0)) for co0 in range(0, cout, m_tile)]
    per_patch = kernel_rows * kernel_columns
    positions = out_rows * out_columns
    images = min(batch, n_tile // positions)
    if images and len(co_tiles) < emitter_target(em).psum_banks:
        _patch_products_by_chunk(em, patches, w_rows, bias, output, chunks, co_tiles, images, per_patch)
        return out
    # the stationaries: per chunk, the filter's [(c, kh, kw), co] rows in one DMA transpose, each output-channel
    # tile a window of it
    chunk_rows = []
    for c0, cs, kh0, khs in chunks:
        at = [0, c0 * per_patch + kh0 * kernel_columns]
        chunk_rows.append(load(em, w_rows, at, (cs * khs * kernel_columns, cout), dims=(1, 0)))
    stationaries = [
        [
            em.insert(
                tile.ExtractOp(rows, [em.index(co0)], TileType((_tile_partitions(rows), co_size), x_type, Memory.SBUF))
            ).result
            for rows in chunk_rows
        ]
        for co0, co_size in co_tiles
    ]
    bias_tiles = [output.bias_tile(em, co0, co_size) for co0, co_size in co_tiles]
    tile_rows = max(1, min(out_rows, n_tile // out_columns))
    tile_rows = -(-out_rows // -(-out_rows // tile_rows))  # balanced

    def position_tile(e: LoopNestBuilder, n: Index, oh0: Index, rows: int) -> None:
        moving = []
        for c0, cs, kh0, khs in chunks:
            walked = [(1, cs)] if cs > 1 else []
            load_op = tile.LoadTransposeOp(
                patches,
                [e.index(i) for i in (n, c0, oh0, kh0, 0, 0)],
                [(2, rows), (4, out_columns)],
                [*walked, (3, khs), (5, kernel_columns)],
                x_type,
            )
            moving.append(e.insert(load_op).result)
        for (co0, co_size), per_tile, bias_tile in zip(co_tiles, stationaries, bias_tiles, strict=True):
            acc: SSAValue | None = None
            for stationary, panel in zip(per_tile, moving, strict=True):
                result_type = TileType((co_size, rows * out_columns), f32, Memory.PSUM)
                acc = e.insert(tile.MatmulOp(stationary, panel, result_type, acc)).result
            assert acc is not None
            output.store(e, acc, n, co0, co_size, [], oh0, 0, bias_tile)

    em.for_each(
        batch,
        lambda e, n: _for_tiles_unrolled(
            e, out_rows, tile_rows, UNROLL_TILES, lambda e2, oh0, rows: position_tile(e2, n, oh0, rows)
        ),
    )
    return out


def _patch_products_by_chunk(
    em: LoopNestBuilder,
    patches: SSAValue,
    w_rows: SSAValue,
    bias: SSAValue | None,
    output: _ConvolutionOutput,
    chunks: Sequence[tuple[int, int, int, int]],
    co_tiles: Sequence[tuple[int, int]],
    images: int,
    per_patch: int,
) -> None:
    """`emit_patch_convolution` over blocks of `images` whole images, one PSUM accumulator per output-channel tile
    (each a bank): the contraction's chunks outermost, each chunk's filter rows and patches loaded in program
    order just before its products. DMA bandwidth goes to transfers in program order, so the first chunk's
    products start once its own 0.3 MB are in (ViT's patch embedding: 2.8 us) instead of after every chunk of the
    filter and the patches (6.8 us), and each later chunk's products overlap the next chunk's loads. Each block's
    output-channel tile is stored once, all its images together."""
    batch, _, out_rows, _, out_columns, kernel_columns = layout_of(patches).shape
    positions = out_rows * out_columns
    x_type = element_type_of(patches)
    out_type = element_type_of(output.out)
    cout = layout_of(w_rows).shape[0]
    # a bias of the operands' type starts each accumulator (a ones row against it, while TensorE waits for the
    # first chunk), so that the copies out of PSUM are plain inserts of each image's window; another type is
    # added per partition as PSUM is evacuated
    bias_row: SSAValue | None = None
    bias_tiles: list[SSAValue | None] = [None for _ in co_tiles]
    if bias is not None and element_type_of(bias) == x_type:
        bias_row = load(em, view(em, bias, layout_of(bias).unsqueeze(0)), [0, 0], (1, cout))
        ones = em.insert(tile.FillOp(1.0, TileType((1, images * positions), x_type, Memory.SBUF))).result
    elif bias is not None:
        bias_tiles = [output.bias_tile(em, co0, co_size) for co0, co_size in co_tiles]
    stationaries: list[SSAValue] = []

    def block(e: LoopNestBuilder, n0: Index, count: int) -> None:
        first = not stationaries
        accs: list[SSAValue | None] = [None] * len(co_tiles)
        if bias_row is not None:
            ones_type = TileType((1, count * positions), x_type, Memory.SBUF)
            ones_window = e.insert(tile.ExtractOp(ones, [e.index(0)], ones_type)).result
            for t, (co0, co_size) in enumerate(co_tiles):
                row = e.insert(tile.ExtractOp(bias_row, [e.index(co0)], TileType((1, co_size), x_type, Memory.SBUF)))
                result_type = TileType((co_size, count * positions), f32, Memory.PSUM)
                accs[t] = e.insert(tile.MatmulOp(row.result, ones_window, result_type)).result
        for q, (c0, cs, kh0, khs) in enumerate(chunks):
            if first:
                at = [0, c0 * per_patch + kh0 * kernel_columns]
                stationaries.append(
                    load(e, w_rows, at, (cs * khs * kernel_columns, layout_of(w_rows).shape[0]), dims=(1, 0))
                )
            walked = [(1, cs)] if cs > 1 else []
            chunk = e.insert(
                tile.LoadTransposeOp(
                    patches,
                    [e.index(i) for i in (n0, c0, 0, kh0, 0, 0)],
                    [(0, count), (2, out_rows), (4, out_columns)],
                    [*walked, (3, khs), (5, kernel_columns)],
                    x_type,
                )
            ).result
            rows = stationaries[q]
            for t, (co0, co_size) in enumerate(co_tiles):
                window_type = TileType((_tile_partitions(rows), co_size), x_type, Memory.SBUF)
                stationary = e.insert(tile.ExtractOp(rows, [e.index(co0)], window_type)).result
                result_type = TileType((co_size, count * positions), f32, Memory.PSUM)
                accs[t] = e.insert(tile.MatmulOp(stationary, chunk, result_type, accs[t])).result
        for (co0, co_size), acc, column in zip(co_tiles, accs, bias_tiles, strict=True):
            assert acc is not None
            flat_type = TileType((co_size, count * positions), out_type, Memory.SBUF)
            # inserts read PSUM windows in place: without a column, each image's window goes straight to its place
            flat = acc if column is None else e.insert(tile.BinaryScalarOp(acc, "add", flat_type, column=column)).result
            result: SSAValue = e.insert(
                tile.EmptyOp(TileType((co_size, count, positions), out_type, Memory.SBUF))
            ).result
            for j in range(count):
                image = e.insert(
                    tile.ExtractOp(
                        flat,
                        [e.index(j * positions)],
                        TileType((co_size, positions), _tile_of(flat).element_type, _tile_of(flat).memory),
                    )
                )
                result = e.insert(tile.InsertOp(image.result, result, [e.index(j), e.index(0)])).result
            _store(e, result, output.rows, [n0, co0, 0], (1, 0, 2))

    # the first block loads the filter's chunks between its own loads; the others find them on chip
    block(em, 0, images)
    if batch > images:
        em.for_tiles(batch - images, images, lambda e, offset, count: block(e, e.add(offset, images), count))


# Bytes per partition of the patches and grad_output tiles, positions on the partitions, that
# `emit_patch_weight_gradient` keeps on chip for all output-channel tiles (ViT-B/16's patch embedding: 12 KiB).
PATCH_PANEL_BYTES = 64 * 1024


def _patch_position_tiles(out_rows: int, out_columns: int, limit: int) -> list[tuple[int, int]]:
    """(first output row, rows) of balanced tiles of whole output rows, at most `limit` positions each."""
    rows = max(1, min(out_rows, limit // out_columns))
    rows = -(-out_rows // -(-out_rows // rows))
    return [(r0, min(rows, out_rows - r0)) for r0 in range(0, out_rows, rows)]


def patch_weight_gradient_fits(em: LoopNestBuilder, x: SSAValue, w: SSAValue, grad_out: SSAValue) -> bool:
    """Whether `emit_patch_weight_gradient` keeps every position tile's patches and grad_output on chip within
    PATCH_PANEL_BYTES per partition (grad_output of the input's type, whole rows of at most 128 positions)."""
    k_tile = matmul_limits(em)[0]
    batch, channels = layout_of(x).shape[:2]
    cout, _, kernel_rows, kernel_columns = layout_of(w).shape
    out_rows, out_columns = layout_of(grad_out).shape[2:]
    if element_type_of(grad_out) != element_type_of(x) or out_columns > k_tile:
        return False
    if layout_of(grad_out).reshape((batch, cout, out_rows * out_columns)) is None:
        return False  # grad_output's rows are read as one run per output channel
    tiles = batch * len(_patch_position_tiles(out_rows, out_columns, k_tile))
    return tiles * (channels * kernel_rows * kernel_columns + cout) * 2 <= PATCH_PANEL_BYTES


def emit_patch_weight_gradient(
    em: LoopNestBuilder,
    x: SSAValue,
    w: SSAValue,
    grad_out: SSAValue,
    out_element_type: Attribute,
    bias_element_type: Attribute | None = None,
) -> tuple[SSAValue, SSAValue | None]:
    """gw[co, c, kh, kw] = sum over n, oh, ow of go[n, co, oh, ow] * x[n, c, oh*KH + kh, ow*KW + kw] for a kernel
    equal to its stride (`takes_patches`, `patch_weight_gradient_fits`): one matmul contracting over positions.

    Per tile of whole output rows of one image (at most 128 positions), the patches come by DMA transposes as for
    the forward ([(c, kh, kw) chunk, positions]) and are transposed on TensorE into a panel [positions, (c, kh,
    kw)], the filter's own column order; grad_output's rows come transposed, [positions, co], by a DMA transpose.
    Both stay on chip, and each output-channel tile is then one PSUM accumulation over all position tiles per
    chunk of columns (a bank each), stored as whole rows of the weight.

    With `bias_element_type`, the bias gradient too (returned second): the panels end in a column of ones, so
    each product's last column sums grad_output over the tile's positions, where a reduction loaded grad_output
    again and summed it last.
    """
    k_tile, m_tile, n_tile = matmul_limits(em)
    batch, channels = layout_of(x).shape[:2]
    cout, _, kernel_rows, kernel_columns = layout_of(w).shape
    patches = _patches_view(em, x, (kernel_rows, kernel_columns))
    out_rows, out_columns = layout_of(grad_out).shape[2:]
    x_type = element_type_of(x)
    chunks = _patch_chunks(channels, kernel_rows, kernel_columns, k_tile)
    per_patch = kernel_rows * kernel_columns
    columns = channels * per_patch
    go_layout = layout_of(grad_out).reshape((batch, cout, out_rows * out_columns))
    assert go_layout is not None, "grad_output is made contiguous first"
    go_rows = view(em, grad_out, go_layout)
    gw = alloc(em, (cout, channels, kernel_rows, kernel_columns), out_element_type)
    gw_layout = layout_of(gw).reshape((cout, columns))
    assert gw_layout is not None, "a fresh tensor is contiguous"
    gw_rows = view(em, gw, gw_layout)

    # with the bias gradient, the panels end in a column of ones: each product's last column is the sum of
    # grad_output's row over the tile's positions
    with_bias = bias_element_type is not None
    panel_columns = columns + with_bias
    pieces = -(-panel_columns // n_tile)
    piece = -(-panel_columns // pieces)
    column_chunks = [(k0, min(piece, panel_columns - k0)) for k0 in range(0, panel_columns, piece)]
    co_tiles = [(co0, min(m_tile, cout - co0)) for co0 in range(0, cout, m_tile)]
    # output-channel tiles whose accumulators (a PSUM bank per chunk of columns) run alongside the position tiles'
    # loads, two banks left for the transposes: TensorE multiplies each tile as it arrives instead of idling until
    # the last one (ViT's patch embedding: 3 of 6)
    alongside = max(1, (emitter_target(em).psum_banks - 2) // len(column_chunks))
    accs: dict[tuple[int, int], SSAValue | None] = {}
    gb: SSAValue | None = None
    if with_bias:
        ones = em.insert(tile.FillOp(1.0, TileType((k_tile, 1), x_type, Memory.SBUF))).result
        sums: SSAValue = em.insert(tile.EmptyOp(TileType((m_tile, len(co_tiles)), f32, Memory.SBUF))).result

    def products(t: int, panel: SSAValue, grads: SSAValue, positions: int) -> None:
        co0, co_size = co_tiles[t]
        stationary_type = TileType((positions, co_size), x_type, Memory.SBUF)
        stationary = em.insert(tile.ExtractOp(grads, [em.index(co0)], stationary_type)).result
        for j, (k0, ks) in enumerate(column_chunks):
            moving = em.insert(tile.ExtractOp(panel, [em.index(k0)], TileType((positions, ks), x_type, Memory.SBUF)))
            result_type = TileType((co_size, ks), f32, Memory.PSUM)
            accs[t, j] = em.insert(tile.MatmulOp(stationary, moving.result, result_type, accs.get((t, j)))).result

    def store_rows(t: int) -> None:
        nonlocal sums
        co0, co_size = co_tiles[t]
        row: SSAValue = em.insert(tile.EmptyOp(TileType((co_size, columns), out_element_type, Memory.SBUF))).result
        for j, (k0, ks) in enumerate(column_chunks):
            acc = accs[t, j]
            assert acc is not None
            weight_columns = min(ks, columns - k0)
            if weight_columns < ks:  # the last chunk's last column is the bias gradient's
                taken = em.insert(
                    tile.ExtractOp(acc, [em.index(0)], TileType((co_size, weight_columns), f32, Memory.PSUM))
                )
                bias_type = TileType((co_size, 1), f32, Memory.PSUM)
                bias_sums = em.insert(tile.ExtractOp(acc, [em.index(weight_columns)], bias_type)).result
                sums = em.insert(tile.InsertOp(bias_sums, sums, [em.index(t)])).result
                acc = taken.result
            row = em.insert(tile.InsertOp(acc, row, [em.index(k0)])).result
        _store(em, row, gw_rows, [co0, 0], (0, 1))

    panels: list[tuple[SSAValue, SSAValue, int]] = []  # (patches [pos, columns], grad_output [pos, co], positions)
    for n in range(batch):
        for oh0, rows in _patch_position_tiles(out_rows, out_columns, k_tile):
            positions = rows * out_columns
            panel_type = TileType((positions, panel_columns), x_type, Memory.SBUF)
            panel: SSAValue = em.insert(tile.EmptyOp(panel_type)).result
            if with_bias:
                column = em.insert(tile.ExtractOp(ones, [em.index(0)], TileType((positions, 1), x_type, Memory.SBUF)))
                panel = em.insert(tile.InsertOp(column.result, panel, [em.index(columns)])).result
            for c0, cs, kh0, khs in chunks:
                walked = [(1, cs)] if cs > 1 else []
                chunk = em.insert(
                    tile.LoadTransposeOp(
                        patches,
                        [em.index(i) for i in (n, c0, oh0, kh0, 0, 0)],
                        [(2, rows), (4, out_columns)],
                        [*walked, (3, khs), (5, kernel_columns)],
                        x_type,
                    )
                ).result
                transposed = em.insert(tile.TransposeOp(chunk)).result
                at = [em.index(c0 * per_patch + kh0 * kernel_columns)]
                panel = em.insert(tile.InsertOp(transposed, panel, at)).result
            grads = load(em, go_rows, [n, 0, oh0 * out_columns], (positions, cout), dims=(2, 1))
            panels.append((panel, grads, positions))
            for t in range(min(alongside, len(co_tiles))):
                products(t, panel, grads, positions)
    for t in range(len(co_tiles)):
        if t >= alongside:
            for panel, grads, positions in panels:
                products(t, panel, grads, positions)
        store_rows(t)

    if bias_element_type is not None:
        gb = alloc(em, (cout,), bias_element_type)
        # the sums [p, t] of output channels t * m_tile + p, transposed into rows (one run per tile; a column per
        # tile stored 2-byte runs)
        tiles, layout = len(co_tiles), layout_of(gb)
        if cout % m_tile == 0:
            rows_type = TileType((tiles, m_tile), bias_element_type, Memory.SBUF)
            gb_rows = to_sbuf(em, em.insert(tile.TransposeOp(sums)).result, bias_element_type)
            assert _tile_of(gb_rows) == rows_type
            _store(em, gb_rows, view(em, gb, Layout((tiles, m_tile), (m_tile, 1), layout.offset)), [0, 0], (0, 1))
        else:
            column_view = view(em, gb, layout.unsqueeze(1))
            for t, (co0, co_size) in enumerate(co_tiles):
                part = em.insert(tile.ExtractOp(sums, [em.index(t)], TileType((co_size, 1), f32, Memory.SBUF)))
                _store(em, part.result, column_view, [co0, 0], (0, 1))
    return gw, gb


# Input-channel tiles up to which the phase-split input gradient emits each tile's instructions separately (its
# store on a DMA queue of its own) instead of looping.
STRAIGHT_INPUT_TILES = 8

# Bytes per partition of the tile of input rows one block of the phase-split input gradient writes.
INPUT_ROWS_BYTES = 32 * 1024


def splits_into_phases(w_shape: Sequence[int], stride: Sequence[int], groups: int) -> bool:
    """Whether a strided 1-d or 2-d convolution's input gradient takes `emit_phase_input_gradient` (one group)."""
    return len(w_shape) - 2 in (1, 2) and groups == 1 and any(st > 1 for st in stride)


@dataclass(frozen=True)
class _Phase:
    """The input positions r + s*m of one residue r along one dim: `count` of them, reached by the kernel taps
    `taps` as (tap, shift), tap k of output position m + shift."""

    residue: int
    count: int
    taps: tuple[tuple[int, int], ...]


def _phases(size: int, kernel: int, stride: int, padding: int, dilation: int) -> list[_Phase]:
    """Input position i = o*s + k*d - p: for residue r = i mod s, the taps k with (r + p - k*d) divisible by s,
    output position o = m + (r + p - k*d) / s."""
    phases = []
    for r in range(stride):
        taps = tuple(
            (k, (r + padding - k * dilation) // stride)
            for k in range(kernel)
            if (r + padding - k * dilation) % stride == 0
        )
        phases.append(_Phase(r, max(0, -(-(size - r) // stride)), taps))
    return phases


def _phase_shifts(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
) -> tuple[list[list[_Phase]], list[int], list[list[int]]]:
    """Per spatial dim: its phases, the positions of the largest (residue 0) and every tap's shift."""
    phases = [
        _phases(size, k, st, p, d)
        for size, k, st, p, d in zip(in_spatial, kernel, stride, padding, dilation, strict=True)
    ]
    positions = [dim[0].count for dim in phases]
    shifts = [[shift for phase in dim for _, shift in phase.taps] for dim in phases]
    return phases, positions, shifts


def phase_padding(
    in_spatial: Sequence[int],
    out_spatial: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
) -> tuple[list[int], list[int]] | None:
    """The zeros `emit_phase_input_gradient` reads before and after grad_output along each spatial dim (where its
    taps' shifts reach past it), or None when along some dim no tap reaches any input position."""
    _, positions, shifts = _phase_shifts(in_spatial, kernel, stride, padding, dilation)
    if any(not s for s in shifts):
        return None
    low = [-min(s) for s in shifts]
    high = [p - 1 + max(s) - (o - 1) for p, s, o in zip(positions, shifts, out_spatial, strict=True)]
    return low, high


def emit_phase_input_gradient(
    em: LoopNestBuilder,
    grad_out: SSAValue,
    w: SSAValue,
    in_spatial: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    out_element_type: Attribute,
    on_chip: ChannelsOnChip | None = None,
    whole_phases: bool = True,
) -> SSAValue | None:
    """grad_input[n, c, i] = sum over co and the (o, k) with o*s + k*d - p = i of w[co, c, k] * grad_output[n, co,
    o], split by the residue of i modulo the stride (`splits_into_phases`); None when one input-channel tile's
    columns of the weight's rows exceed PANEL_BYTES, or an output row what one tile holds.

    The input positions of one residue r (a phase) are reached by a fixed subset of the kernel taps, tap k from
    output position m + shift_k for phase position m: each phase is a stride-1 convolution of grad_output with
    those taps. Per block of phase positions, grad_output's rows (output channels on partitions, with the
    shifts' halo; zeros past its edges) are loaded once for every input-channel tile, and each phase accumulates
    its taps' products in PSUM: grad_output's shifted window times the tap's [co, c] weight block, a strided
    window of the weight's own rows (co on partitions, as the contraction needs: no transposes). Each phase's
    products land in an SBUF tile of whole input rows at its residue with the stride as step (one copy out of
    PSUM per phase, or per row of it with `whole_phases` False), and the tile leaves in one store. A weight too
    large to keep on chip whole (a deep stage's 1024 channels) is kept one input-channel tile's columns at a
    time, each walking every block. The transposed convolution of the
    zero-inserted grad_output instead computes stride^d times the products, most of them of zeros, after a round
    trip of the zero-filled tensor through HBM.
    """
    k_tile, m_tile, n_tile = matmul_limits(em)
    batch, cout, *out_spatial = layout_of(grad_out).shape
    _, cin, *kernel = layout_of(w).shape
    rank = len(kernel)
    taps = math.prod(kernel)
    w_type = element_type_of(w)
    # per dim: the phase positions (of residue 0, the most) and the shifts' range
    phases, positions, shifts = _phase_shifts(in_spatial, kernel, stride, padding, dilation)
    if any(not s for s in shifts):
        return None  # no tap reaches any input position along a dim (the gradient is zero): the general path
    low = [min(s) for s in shifts]
    high = [max(s) for s in shifts]
    row = positions[1] + high[1] - low[1] if rank == 2 else 1
    co_tiles = [(co0, min(m_tile, cout - co0)) for co0 in range(0, cout, m_tile)]
    c_tiles = [(c0, min(k_tile, cin - c0)) for c0 in range(0, cin, k_tile)]
    # The weight's rows of every output-channel tile stay on chip for the whole gradient when they fit; else each
    # input-channel tile's columns of them do, loaded once per input-channel tile, which then walks every block
    # of positions (reloading grad_output's rows per input-channel tile: far fewer bytes than the weight's when
    # the weight is too large to keep, a deep layer's few positions).
    w_size = _itemsize(w_type)
    resident = len(co_tiles) * cin * taps * w_size <= PANEL_BYTES
    if not resident and len(co_tiles) * k_tile * taps * w_size > PANEL_BYTES:
        return None
    if rank == 2 and positions[1] > n_tile:
        return None
    gx = alloc(em, (batch, cin, *in_spatial), out_element_type)
    if any(o == 0 for o in out_spatial) or batch == 0:
        fill_into(em, gx, 0.0)
        return gx
    # grad_output with zeros where the shifts reach past it: padded index m + shift - low
    pads = phase_padding(in_spatial, out_spatial, kernel, stride, padding, dilation)
    assert pads is not None, "every dim has a tap (checked above)"
    shared = on_chip is not None and on_chip.tensor is grad_out and (on_chip.low, on_chip.high) == pads
    go = grad_out if shared else prepare_input(em, grad_out, *pads, [1] * rank)
    rows_layout = layout_of(w).reshape((cout, cin * taps))
    assert rows_layout is not None, "a convolution weight is contiguous"
    w_rows = view(em, w, rows_layout)
    columns = positions[1] if rank == 2 else 1
    # a block's positions fit one PSUM bank, and its tile of input rows INPUT_ROWS_BYTES per partition
    input_row = stride[0] * (in_spatial[1] if rank == 2 else 1) * _itemsize(out_element_type)
    per_block = max(1, min(positions[0], n_tile // columns, INPUT_ROWS_BYTES // input_row))
    zeros = any(not phase.taps for dim in phases for phase in dim)
    phase_grid = list(itertools.product(*phases))

    def input_tile(
        e: LoopNestBuilder,
        panels: list[SSAValue],
        panel_c0: Index,
        go_tiles: list[tuple[SSAValue, int, int]],
        n: Index,
        m0: Index,
        last: bool,
        ms: int,
        extent: int,
        c0: Index,
        cs: int,
    ) -> None:
        shape = (cs, extent, in_spatial[1]) if rank == 2 else (cs, extent)
        out_type = TileType(shape, out_element_type, Memory.SBUF)
        value: SSAValue = e.insert(tile.FillOp(0.0, out_type) if zeros else tile.EmptyOp(out_type)).result
        for phase in phase_grid:
            if any(not p.taps for p in phase):
                continue
            # the block's positions of this phase: fewer in the last block when the residue's count is
            rows_here = min(ms, phase[0].count - (positions[0] - ms)) if last else ms
            cols_here = phase[1].count if rank == 2 else 1
            if rows_here <= 0 or cols_here <= 0:
                continue
            product: SSAValue | None = None
            for tap_pairs in itertools.product(*(p.taps for p in phase)):
                tap = 0
                for (k, _), k_extent in zip(tap_pairs, kernel, strict=True):
                    tap = tap * k_extent + k
                at = [shift - lo for (_, shift), lo in zip(tap_pairs, low, strict=True)]
                for go_band, co0, co_size in go_tiles:
                    stationary_type = TileType((co_size, cs), w_type, Memory.SBUF)
                    stationary = e.insert(
                        tile.ExtractOp(
                            panels[co0 // m_tile],
                            [e.index(e.add(e.mul(panel_c0, taps), tap))],
                            stationary_type,
                            [taps],
                        )
                    ).result
                    window_shape = (co_size, rows_here, cols_here) if rank == 2 else (co_size, rows_here)
                    window_type = TileType(window_shape, element_type_of(go), Memory.SBUF)
                    moving = e.insert(tile.ExtractOp(go_band, [e.index(i) for i in at], window_type)).result
                    result_type = TileType((cs, rows_here * cols_here), f32, Memory.PSUM)
                    product = e.insert(tile.MatmulOp(stationary, moving, result_type, product)).result
            assert product is not None
            if rank == 2 and whole_phases:
                # the phase's products, rows of cols_here, at their residue in the input rows: one copy out of PSUM
                at_row = [e.index(phase[0].residue), e.index(phase[1].residue)]
                window = (rows_here, cols_here)
                value = e.insert(tile.InsertOp(product, value, at_row, list(stride), window)).result
            elif rank == 2:
                for i in range(rows_here):
                    # one row of the phase's products, at its residue in the input rows
                    line_type = TileType((cs, cols_here), f32, Memory.PSUM)
                    line = e.insert(tile.ExtractOp(product, [e.index(i * cols_here)], line_type)).result
                    at_row = [e.index(phase[0].residue + i * stride[0]), e.index(phase[1].residue)]
                    value = e.insert(tile.InsertOp(line, value, at_row, [stride[1]])).result
            else:
                value = e.insert(tile.InsertOp(product, value, [e.index(phase[0].residue)], [stride[0]])).result
        start = e.mul(m0, stride[0])
        _store(e, value, gx, [n, c0, start, 0] if rank == 2 else [n, c0, start], tuple(range(1, rank + 2)))

    ChannelTile = tuple[list[SSAValue], Index, int] | None  # one input-channel tile's panels, c0 and size

    def block(e: LoopNestBuilder, n: Index, m0: Index, ms: int, last: bool, only: ChannelTile) -> None:
        band = (ms + high[0] - low[0], row) if rank == 2 else (ms + high[0] - low[0],)
        at: list[Index] = [n, m0, 0] if rank == 2 else [n, m0]
        served = on_chip.tiles(e, 0, cout, at, band, padded=True) if shared and on_chip is not None else None
        go_tiles = served if served is not None else _channel_tiles(e, go, 0, cout, m_tile, at, band)
        extent = in_spatial[0] - (positions[0] - ms) * stride[0] if last else ms * stride[0]
        if only is not None:
            slices, c0, cs = only
            input_tile(e, slices, 0, go_tiles, n, m0, last, ms, extent, c0, cs)
        elif len(c_tiles) <= STRAIGHT_INPUT_TILES:
            for c0, cs in c_tiles:
                input_tile(e, panels, c0, go_tiles, n, m0, last, ms, extent, c0, cs)
        else:
            e.for_tiles(
                cin, k_tile, lambda e2, c0, cs: input_tile(e2, panels, c0, go_tiles, n, m0, last, ms, extent, c0, cs)
            )

    def per_image(e: LoopNestBuilder, n: Index, only: ChannelTile = None) -> None:
        # every block but the last covers stride * its positions of input rows; the last runs to the input's end
        last_start = (positions[0] - 1) // per_block * per_block
        if last_start:
            e.for_tiles(last_start, per_block, lambda e2, m0, ms: block(e2, n, m0, ms, False, only))
        block(e, n, last_start, positions[0] - last_start, True, only)

    if resident:
        # the weight's rows, each output-channel tile's loaded once
        panels = [load(em, w_rows, [co0, 0], (size, cin * taps)) for co0, size in co_tiles]
        em.for_each(batch, per_image)
        return gx

    def per_channel_tile(e: LoopNestBuilder, c0: Index, cs: int) -> None:
        slices = [load(e, w_rows, [co0, e.mul(c0, taps)], (size, cs * taps)) for co0, size in co_tiles]
        e.for_each(batch, lambda e2, n: per_image(e2, n, (slices, c0, cs)))

    panels = []
    em.for_tiles(cin, k_tile, per_channel_tile)
    return gx


def _unused(em: LoopNestBuilder, op: Operation, index: int) -> SSAValue | None:
    """A result output_mask leaves out: None when ATen leaves it undefined, else an (unwritten) tensor."""
    if not isinstance(op.results[index].type, TensorType):
        return None
    return alloc(em, result_shape(op, index), result_element_type(op, index))


def _direct_weight_gradient(
    em: LoopNestBuilder,
    x: SSAValue,
    w: SSAValue,
    grad_out: SSAValue,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    out_element_type: Attribute,
    deferred: list[Callable[[], None]] | None = None,
    on_chip: ChannelsOnChip | None = None,
) -> SSAValue:
    """The weight gradient of a direct (not depthwise) convolution: for the kernel-row packing of the forward
    when it took one (the gradient of the packed 1 x KW filter is the filter's, viewed back), else banded, else
    (a block of one channel's taps too wide for a matmul) correlating strided window views."""
    rank = len(stride)
    kernel = layout_of(w).shape[2:]
    k_tile, _, n_tile = matmul_limits(em)
    itemsize = _itemsize(element_type_of(x))
    if contracts_output_rows(
        layout_of(x).shape, layout_of(w).shape, stride, padding, dilation, groups, k_tile, n_tile, itemsize
    ):
        # grad_output's rows are loaded with its channels on partitions: a channels-last one (ConvNeXt's stem,
        # whose gradient comes back from its channels-first layer norm) would load one element per descriptor
        grads = contiguous_if_transposed(em, grad_out)
        return emit_row_weight_gradient(em, x, grads, kernel, stride, padding, dilation, out_element_type)
    packs = any(st > 1 for st in stride) and packs_kernel_rows(
        layout_of(x).shape[1], layout_of(w).shape, groups, k_tile
    )
    if any(padding) and not packs and groups == 1 and ChannelsOnChip.fits(x, k_tile, padding, padding):
        # the input held on chip with its padding written there, instead of a padded copy through HBM
        x_on_chip = ChannelsOnChip(em, x, k_tile, padding, padding)
        held = emit_banded_weight_gradient(
            em, x, grad_out, kernel, stride, dilation, groups, out_element_type, deferred=deferred,
            on_chip=on_chip, x_on_chip=x_on_chip,
        )  # fmt: skip
        if held is not None:
            return held
    xp = prepare_input(em, x, padding, padding, [1] * rank)
    if packs:
        rows, w_rows = kernel_row_packing(em, xp, w, stride[0], dilation[0])
        packed = emit_banded_weight_gradient(
            em,
            rows,
            grad_out,
            layout_of(w_rows).shape[2:],
            [1, stride[1]],
            [1, dilation[1]],
            1,
            out_element_type,
            deferred=deferred,
        )
        if packed is not None:
            merged = layout_of(packed).reshape(layout_of(w).shape)
            assert merged is not None, "a fresh tensor is contiguous"
            return view(em, packed, merged)
    banded = emit_banded_weight_gradient(
        em, xp, grad_out, kernel, stride, dilation, groups, out_element_type, deferred=deferred, on_chip=on_chip
    )
    if banded is not None:
        return banded
    return emit_weight_gradient(em, x, grad_out, kernel, stride, padding, dilation, groups, out_element_type)


def _tiles_the_input(kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int]) -> bool:  # fmt: skip
    """Whether the windows tile the input (kernel = stride, no padding or dilation: a patchify or downsampling
    layer, or a 1 x 1 convolution).

    Its input gradient is then one product per tap and position, which only waits for grad_output's loads, so
    it goes first, the weight gradient's transposes and products after it on TensorE (ConvNeXt's 2 x 2 / 2
    downsampling, backward 22.2 -> 21.2 us; weight gradient first it waits behind the transposes). For 1 x 1
    stride-1 convolutions the two orders differ case by case (ResNet's 256 -> 128 at 56 x 56 alone: backward
    43.5 us the other way, 46.3 this way) and this one is better over a model: the real-width ResNet-50's
    training step 7.30 -> 7.18 ms (simulated). A stem's image takes no gradient: its bias gradient then stays
    before the weight gradient's products (ViT's patches, backward 28.3 us; 32.7 with it after them)."""
    return list(kernel) == list(stride) and not any(padding) and all(d == 1 for d in dilation)


def _phase_margins(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    out_spatial: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> tuple[list[int], list[int]] | None:
    """The zeros around grad_output that the input gradient's phases read (`phase_padding`), when it takes
    `emit_phase_input_gradient` and they are margins (not a crop); else None."""
    if not splits_into_phases(w_shape, stride, groups):
        return None
    pads = phase_padding(x_shape[2:], out_spatial, w_shape[2:], stride, padding, dilation)
    if pads is None or min([*pads[0], *pads[1]]) < 0:
        return None
    return pads


def _convolution_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
    grad_out, x, w = args["grad_output"], args["input"], args["weight"]
    rank = layout_of(x).rank - 2
    stride, padding = _expand_param(args["stride"], rank), _expand_param(args["padding"], rank)
    dilation = _expand_param(args["dilation"], rank)
    groups, transposed = int(args["groups"]), bool(args["transposed"])
    mask = list(args["output_mask"])
    kernel = layout_of(w).shape[2:]
    # as in the forward (emit_convolution), a channels-last input would load one element per descriptor
    x = contiguous_if_transposed(em, x)
    if rank <= 2 and is_depthwise(layout_of(w).shape, groups):
        # read by all three gradients with channels on partitions: a channels-last gradient (ConvNeXt's, permuted
        # back from its layer norm) too
        grad_out = contiguous_if_transposed(em, grad_out)
    # a resident weight gradient's products, when `_direct_weight_gradient` leaves them for later
    deferred: list[Callable[[], None]] = []
    direct = not transposed and not (rank <= 2 and is_depthwise(layout_of(w).shape, groups))
    input_first = mask[0] and _tiles_the_input(kernel, stride, padding, dilation)
    # grad_output read by the weight and input gradients (and the bias gradient) from one copy on chip, with the
    # margin of zeros the input gradient's phases read written on chip, when the weight gradient comes first. With
    # the input gradient first (windows that tile the input) its first products would wait for whole images of
    # grad_output instead of a block of rows (ConvNeXt-T's 2 x 2 / 2 downsampling: backward 21.2 -> 21.9 us), so
    # it keeps its own loads.
    m_tile = matmul_limits(em)[1]
    margins = (
        _phase_margins(
            layout_of(x).shape, layout_of(w).shape, layout_of(grad_out).shape[2:], stride, padding, dilation, groups
        )
        if direct and mask[0] and mask[1] and not input_first
        else None
    )
    on_chip = (
        ChannelsOnChip(em, grad_out, m_tile, *margins)
        if margins is not None and ChannelsOnChip.fits(grad_out, m_tile, *margins)
        else None
    )

    def weight_gradient() -> SSAValue | None:
        if mask[1]:
            if transposed:
                # w[Cin, Cout/g, K] of a transposed convolution: the roles of input and grad_output swap
                gw = emit_weight_gradient(
                    em, grad_out, x, kernel, stride, padding, dilation, groups, result_element_type(op, 1)
                )
            elif rank <= 2 and is_depthwise(layout_of(w).shape, groups):
                xp = prepare_input(em, x, padding, padding, [1] * rank)
                gw = emit_depthwise_weight_gradient(
                    em, xp, grad_out, kernel, stride, dilation, result_element_type(op, 1)
                )
            else:
                # with grad_output shared and no margin read (windows that do not overlap: one tap per input
                # position), the input gradient's few products wait only for the weight's rows, which load
                # behind the weight gradient's operands: the weight gradient's products fill TensorE's wait
                # (ResNet's 1 x 1 / 2: backward 29.1 -> 27.1 us). Overlapping windows' input gradient has
                # several taps per phase, and the weight gradient's products stay deferred (its 3 x 3 / 2: 39.0
                # us deferred, 41.2 not).
                overlapping = margins is not None and any(m > 0 for m in (*margins[0], *margins[1]))
                later = deferred if on_chip is None or overlapping else None
                gw = _direct_weight_gradient(
                    em, x, w, grad_out, stride, padding, dilation, groups, result_element_type(op, 1), later, on_chip
                )
            return gw
        return _unused(em, op, 1)

    def input_gradient() -> SSAValue | None:
        if mask[0]:
            in_spatial = layout_of(x).shape[2:]
            go_spatial = layout_of(grad_out).shape[2:]
            # The input gradient is grad_output's convolution of the other kind: transposed for a direct convolution
            # (its output padding restores the input's size where the stride dropped positions), direct for a
            # transposed one.
            if transposed:
                extra = [0] * rank
            else:
                extra = [
                    s - ((o - 1) * st - 2 * p + d * (k - 1) + 1)
                    for s, o, st, p, d, k in zip(in_spatial, go_spatial, stride, padding, dilation, kernel, strict=True)
                ]
            grad_in: SSAValue | None = None
            if not transposed and splits_into_phases(layout_of(w).shape, stride, groups):
                # Going first, the input gradient's stores share the DMA engines with the weight gradient's operand
                # loads, which that gradient's products wait for: copied out of PSUM a row at a time, its stores
                # start later and leave those loads the bandwidth (ConvNeXt-T's 2 x 2 / 2 backward: 21.2 us, 23.1
                # with each phase copied whole). After the weight gradient's loads and transposes, whole phases
                # (ResNet's 3 x 3 / 2: 29.2 -> 28.4 us).
                grad_in = emit_phase_input_gradient(
                    em,
                    grad_out,
                    w,
                    in_spatial,
                    stride,
                    padding,
                    dilation,
                    result_element_type(op, 0),
                    on_chip,
                    whole_phases=not input_first,
                )
            if grad_in is None:
                grad_in = emit_convolution(
                    em,
                    op.name,
                    grad_out,
                    w,
                    None,
                    stride,
                    padding,
                    dilation,
                    not transposed,
                    extra,
                    groups,
                    result_element_type(op, 0),
                )
            return grad_in
        return _unused(em, op, 0)

    def bias_gradient() -> SSAValue | None:
        if mask[2]:
            if on_chip is not None:
                return on_chip.channel_sums(em, result_element_type(op, 2))
            dims = [0, *range(2, rank + 2)]
            return emit_reduce(em, grad_out, dims, False, "add", result_element_type(op, 2))
        return _unused(em, op, 2)

    if direct and mask[1] and takes_patches(em, x, w, stride, padding, dilation, groups):
        grads = contiguous_if_transposed(em, grad_out)
        if patch_weight_gradient_fits(em, x, w, grads):
            # the weight and bias gradients from one set of transposed tiles, then the input gradient
            bias_type = result_element_type(op, 2) if mask[2] else None
            patch_weight, patch_bias = emit_patch_weight_gradient(
                em, x, w, grads, result_element_type(op, 1), bias_type
            )
            grad_out = grads
            return [input_gradient(), patch_weight, patch_bias if mask[2] else _unused(em, op, 2)]
    if not direct or input_first:
        grad_input = input_gradient()
        grad_weight = weight_gradient()
        for emit in deferred:
            emit()
        return [grad_input, grad_weight, bias_gradient()]
    # A direct convolution's weight gradient comes first, and a resident one's products (a few dozen matmuls)
    # after the bias and input gradients. TensorE runs its instructions in program order and each DMA queue its
    # transfers: the weight gradient's transposes then fill the time its operands take to load, the input
    # gradient's products follow as their operands arrive, the bias gradient's loads are not queued behind the
    # input gradient's stores, and the weight gradient's products (which need every transposed tile) overlap
    # those stores. Emitted last whole, its products ran after the input gradient with the DMA queues idle
    # (ResNet's 1 x 1 / 2: 34.1 -> 31.6 us backward, its 3 x 3 / 2: 49.2 -> 43.0). The bias gradient, a few
    # loads and VectorE sums, goes before the input gradient: after it, its sums queued on VectorE behind every
    # evacuation of the input gradient's products and ended the backward (whisper's conv2: 202.3 -> 198.2 us).
    grad_weight = weight_gradient()
    grad_bias = bias_gradient()
    grad_input = input_gradient()
    for emit in deferred:
        emit()
    return [grad_input, grad_weight, grad_bias]


def convolution_shape(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> tuple[int, ...]:
    """aten.convolution's result shape for input [N, C, S...] and weight [Cout, C/g, K...] (transposed:
    [C, Cout/g, K...])."""
    rank = len(x_shape) - 2
    stride, padding = _expand_param(stride, rank), _expand_param(padding, rank)
    dilation, output_padding = _expand_param(dilation, rank), _expand_param(output_padding or [0], rank)
    kernel = w_shape[2:]
    if transposed:
        spatial = [
            (s - 1) * st - 2 * p + d * (k - 1) + extra + 1
            for s, st, p, d, k, extra in zip(
                x_shape[2:], stride, padding, dilation, kernel, output_padding, strict=True
            )
        ]
        channels = w_shape[1] * groups
    else:
        spatial = [
            (s + 2 * p - d * (k - 1) - 1) // st + 1
            for s, st, p, d, k in zip(x_shape[2:], stride, padding, dilation, kernel, strict=True)
        ]
        channels = w_shape[0]
    return (x_shape[0], channels, *spatial)


def legal(op: Operation) -> str | None:
    """Batched 1-d, 2-d and 3-d convolutions (direct, strided, dilated, grouped, transposed) and their gradients
    lower; the result must have the shape the parameters give."""
    args = arguments_of(op)
    x_shape = tensor_shape(args["input"])
    if not 1 <= len(x_shape) - 2 <= 3:
        return f"only batched 1-d, 2-d and 3-d convolutions lower (input rank {len(x_shape)})"
    w_shape = tensor_shape(args["weight"])
    if len(w_shape) != len(x_shape):
        return f"the weight's rank {len(w_shape)} differs from the input's {len(x_shape)}"
    rank = len(x_shape) - 2
    # ATen takes one value for every spatial dimension, or one for each (`expand_param_if_needed`)
    for name in ("stride", "padding", "dilation", "output_padding"):
        if len(args[name]) not in (1, rank):
            return f"{name} has {len(args[name])} values, for {rank} spatial dimensions"
    # ATen refuses these before it computes anything (and the output size divides by the stride)
    if any(int(v) < 1 for v in args["stride"]):
        return f"a stride must be positive, found {list(args['stride'])}"
    if any(int(v) < 1 for v in args["dilation"]):
        return f"a dilation must be positive, found {list(args['dilation'])}"
    if any(int(v) < 0 for v in args["padding"]):
        return f"a padding must not be negative, found {list(args['padding'])}"
    if int(args["groups"]) < 1:
        return f"groups must be positive, found {int(args['groups'])}"
    expected = convolution_shape(
        x_shape,
        w_shape,
        args["stride"],
        args["padding"],
        args["dilation"],
        bool(args["transposed"]),
        args["output_padding"],
        int(args["groups"]),
    )
    if op.name == "torch.aten.convolution" and expected != tensor_shape(op.results[0]):
        return f"computed shape {expected} differs from {tensor_shape(op.results[0])}"
    # the backward's grad_output has the forward's result shape
    if op.name == "torch.aten.convolution_backward" and expected != tensor_shape(args["grad_output"]):
        return f"grad_output's shape {tensor_shape(args['grad_output'])} differs from the computed {expected}"
    return None


CONVOLUTION_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.convolution": _convolution,
    "torch.aten.convolution_backward": _convolution_backward,
}
