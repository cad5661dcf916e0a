"""Convolutions (1-d, 2-d, 3-d; strided, padded, dilated, grouped, transposed) and their backward as TensorE matmuls.

One general path, `emit_direct_convolution`, computes a stride-`s`, dilation-`d`, unpadded convolution of a
prepared input `xp[N, Cin, S...]` with a prepared weight `wt[K..., Cin/g, Cout]`:

    out[n, co, o...] = sum over kernel offsets k... and input channels ci of wt[k..., ci, co] * xp[n, ci, o*s + k*d]

Each output tile is [Cout tile (<= 128, stationary free), output positions (<= one PSUM bank, moving free)];
its PSUM accumulation runs over (kernel offsets x input-channel tiles of 128), each step one matmul. The moving
operand of offset k is a tile of the *shifted window view* of xp (shape [N, Cin, K..., O...], strides
[.., .., d*stride, s*stride]): the DMA access pattern does the windowing, so no im2col is ever materialised.
Groups are a loop whose index offsets the channel ranges. The bias is added per partition (output channel) as
PSUM is evacuated.

Padding and the zero insertion of transposed convolutions are handled by preparing `xp` once: a zero-filled
HBM tensor with the input copied into its (strided, possibly cropped) interior. A transposed convolution is the
direct convolution (stride 1) of that zero-inserted input with the flipped, in/out-swapped weight.

`convolution_backward`: grad_input is the transposed convolution of grad_output (or, for a transposed forward,
the direct one); grad_weight correlates input windows with grad_output, contracting over (batch x positions) on
the partition axis, one matmul per 128 positions, accumulating in PSUM; grad_bias is a reduction.

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

import math
from collections.abc import Callable, Sequence
from typing import Any

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
from neuron_mlir.lowering.convert_torch_to_tile.matmul import carry, matmul_limits, window
from neuron_mlir.lowering.convert_torch_to_tile.movement import fill_into
from neuron_mlir.lowering.convert_torch_to_tile.reduction import emit_reduce
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory


def _nest(em: LoopNestBuilder, extents: Sequence[int], body: Callable[[LoopNestBuilder, list[Index]], None]) -> None:
    def level(e: LoopNestBuilder, done: list[Index], left: Sequence[int]) -> None:
        if not left:
            body(e, done)
            return
        e.for_each(left[0], lambda inner, i: level(inner, [*done, i], left[1:]))

    level(em, [], extents)


def _store(
    em: LoopNestBuilder, value: SSAValue, tensor: SSAValue, indices: Sequence[Index], dims: Sequence[int]
) -> None:
    rank = layout_of(tensor).rank
    mapping = None if tuple(dims) == (rank - 2, rank - 1) else dims
    em.insert(tile.StoreOp(value, tensor, [em.index(i) for i in indices], mapping))


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
    for i, (n, u, lo, size) in enumerate(zip(spatial, spacing, low, sizes, strict=True)):
        first = max(0, -(lo // u) if lo < 0 else 0)  # first input index whose position lo + j*u is >= 0
        last = min(n - 1, (size - 1 - lo) // u)  # last index whose position is < size
        if last < first:
            fill_into(em, prepared, 0.0)
            return prepared
        inner = inner.slice(2 + i, first, last + 1)
        outer = outer.slice(2 + i, lo + first * u, lo + last * u + 1, u)
    if any(lo > 0 for lo in low) or any(hi > 0 for hi in high) or any(u > 1 for u in spacing):
        fill_into(em, prepared, 0.0)
    copy_channels(em, view(em, x, inner), view(em, prepared, outer))
    return prepared


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
        e: LoopNestBuilder, lead: list[Index], c0: Index, cs: int, r0: Index, rs: int, col0: Index, ns: int
    ) -> None:
        n, *outer = lead
        shape: tuple[int, ...]
        dims: tuple[int, ...]
        if len(spatial) == 1:
            indices, shape, dims = [n, c0, col0], (cs, ns), (1, 2)
        else:
            indices, shape, dims = [n, c0, *outer, r0, col0], (cs, rs, ns), (1, rank - 2, rank - 1)
        value = load(e, source, indices, shape, element_type_of(out), dims=dims)
        _store(e, value, out, indices, dims)

    def per_plane(e: LoopNestBuilder, lead: list[Index]) -> None:
        e.for_tiles(
            channels,
            PARTITION_TILE,
            lambda e2, c0, cs: e2.for_tiles(
                rows_extent,
                rows,
                lambda e3, r0, rs: e3.for_tiles(
                    row, columns, lambda e4, col0, ns: copy_tile(e4, lead, c0, cs, r0, rs, col0, ns)
                ),
            ),
        )

    _nest(em, [batch, *spatial_loops], per_plane)


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


def emit_direct_convolution(
    em: LoopNestBuilder,
    xp: SSAValue,
    wt: SSAValue,
    bias: SSAValue | None,
    stride: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    out_element_type: Attribute,
) -> SSAValue:
    """out[N, Cout, O...] of the unpadded convolution of xp[N, Cin, S...] with wt[K..., Cin/g, Cout]."""
    k_tile, m_tile, n_tile = matmul_limits(em)
    x_layout, w_layout = layout_of(xp), layout_of(wt)
    rank = x_layout.rank - 2
    batch = x_layout.shape[0]
    kernel = w_layout.shape[:rank]
    cin_g, cout = w_layout.shape[rank:]
    cout_g = cout // groups
    spatial = x_layout.shape[2:]
    out_spatial = tuple(
        (s - d * (k - 1) - 1) // st + 1 for s, k, d, st in zip(spatial, kernel, dilation, stride, strict=True)
    )
    out = alloc(em, (batch, cout, *out_spatial), out_element_type)
    # the shifted-window view: [N, Cin, K..., O...]; kernel offsets and output positions are view dims
    windows = _windows(em, xp, kernel, out_spatial, stride, dilation)
    lead, rows, columns = _position_tiles(out_spatial, n_tile)
    if rank >= 2 and columns == out_spatial[-1]:
        # whole rows per tile: store through the output with its last two dims merged
        merged = layout_of(out).reshape((batch, cout, *out_spatial[:-2], out_spatial[-2] * out_spatial[-1]))
        assert merged is not None
        out_rows = view(em, out, merged)
    else:
        out_rows = out
    bias_column = None
    if bias is not None:
        bias_column = view(em, bias, layout_of(bias).unsqueeze(1))

    def output_tile(
        e: LoopNestBuilder,
        n: Index,
        g: Index,
        lead_idx: list[Index],
        co0: Index,
        co_size: int,
        r0: Index,
        rs: int,
        c0: Index,
        cs: int,
    ) -> None:
        co_global = e.add(e.mul(g, cout_g), co0)

        def step(e2: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
            *k_idx, ci0 = offsets
            ci_size = sizes[-1]
            stationary = load(e2, wt, [*k_idx, ci0, co_global], (ci_size, co_size))
            ci_global = e2.add(e2.mul(g, cin_g), ci0)
            if rank >= 2:
                position = [*lead_idx, r0, c0]
                shape: tuple[int, ...] = (ci_size, rs, cs)
                dims: tuple[int, ...] = (1, 2 + 2 * rank - 2, 2 + 2 * rank - 1)
            else:
                position, shape, dims = [c0], (ci_size, cs), (1, 2 + 2 * rank - 1)
            moving = load(e2, windows, [n, ci_global, *k_idx, *position], shape, dims=dims)
            result_type = TileType((co_size, rs * cs), f32, Memory.PSUM)
            return e2.insert(tile.MatmulOp(stationary, moving, result_type, acc)).result

        product = fold_nest(e, [*((k, 1) for k in kernel), (cin_g, k_tile)], step)
        result_type = TileType((co_size, rs * cs), out_element_type, Memory.SBUF)
        if bias_column is not None:
            column = load(e, bias_column, [co_global, 0], (co_size, 1), f32)
            value: SSAValue = e.insert(tile.BinaryScalarOp(product, "add", result_type, column=column)).result
        else:
            value = to_sbuf(e, product, out_element_type)
        if out_rows is out:
            if rank >= 2:
                store_at: list[Index] = [n, co_global, *lead_idx, r0, c0]
            else:
                store_at = [n, co_global, c0]
        else:
            store_at = [n, co_global, *lead_idx, e.mul(r0, out_spatial[-1])]
        _store(e, value, out_rows, store_at, (1, layout_of(out_rows).rank - 1))

    def per_image(e: LoopNestBuilder, idx: list[Index]) -> None:
        n, g, *lead_idx = idx

        def positions(e2: LoopNestBuilder, co0: Index, co_size: int) -> None:
            if rank >= 2:
                e2.for_tiles(
                    out_spatial[-2],
                    rows,
                    lambda e3, r0, rs: e3.for_tiles(
                        out_spatial[-1],
                        columns,
                        lambda e4, c0, cs: output_tile(e4, n, g, lead_idx, co0, co_size, r0, rs, c0, cs),
                    ),
                )
            else:
                e2.for_tiles(
                    out_spatial[-1], columns, lambda e3, c0, cs: output_tile(e3, n, g, [], co0, co_size, 0, 1, c0, cs)
                )

        e.for_tiles(cout_g, m_tile, positions)

    _nest(em, [batch, groups, *lead], per_image)
    return out


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
    out_spatial = [
        (s - d * (k - 1) - 1) // st + 1 for s, k, d, st in zip(spatial, kernel, dilation2, stride2, strict=True)
    ]
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
            band = None
            if banded:
                band_shape = (c_size, rs + dilation2[0] * (kernel[0] - 1), cs + dilation2[1] * (kernel[1] - 1))
                band = load(e2, planar_x, [n, c0, r0, col0], band_shape, dims=(1, 2, 3))

            def step(e3: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
                kh, kw = offsets
                tap = e3.add(e3.mul(kh, kernel[1]), kw)
                if diagonals is not None:
                    stationary = window(e3, diagonals, [tap, 0], (c_size, c_size))
                else:
                    stationary = _diagonal(e3, mask, tap_columns, source_tap(e3, tap), operand_type)
                if band is not None:
                    at = [e3.mul(kh, dilation2[0]), e3.mul(kw, dilation2[1])]
                    moving = window(e3, band, at, (c_size, rs, cs))
                else:
                    moving = load(e3, windows, [n, c0, kh, kw, r0, col0], (c_size, rs, cs), dims=(1, 4, 5))
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

        def per_image(e2: LoopNestBuilder, n: Index) -> None:
            e2.for_tiles(
                out_spatial[0],
                rows,
                lambda e3, r0, rs: e3.for_tiles(
                    out_spatial[1], columns, lambda e4, col0, cs: output_tile(e4, n, r0, rs, col0, cs)
                ),
            )

        e.for_each(batch, per_image)

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
            band = None
            if banded:
                band_shape = (c_size, rs + dilation2[0] * (kernel2[0] - 1), cs + dilation2[1] * (kernel2[1] - 1))
                band = load(e2, planar_x, [n, c0, r0, col0], band_shape, f32, dims=(1, 2, 3))

            def per_row(e3: LoopNestBuilder, kh: Index, carried: list[SSAValue]) -> list[SSAValue]:
                def per_tap(e4: LoopNestBuilder, kw: Index, values: list[SSAValue]) -> list[SSAValue]:
                    tap = e4.add(e4.mul(kh, kernel2[1]), kw)
                    if band is not None:
                        at = [e4.mul(kh, dilation2[0]), e4.mul(kw, dilation2[1])]
                        taken = window(e4, band, at, (c_size, rs, cs))
                    else:
                        taken = load(e4, windows, [n, c0, kh, kw, r0, col0], (c_size, rs, cs), f32, dims=(1, 4, 5))
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
    if rank <= 2 and is_depthwise(layout_of(w).shape, groups):
        if transposed:
            reach = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
            low = [r - p for r, p in zip(reach, padding, strict=True)]
            high = [r - p + op for r, p, op in zip(reach, padding, output_padding, strict=True)]
            xp = prepare_input(em, x, low, high, stride)
            return emit_depthwise_convolution(em, xp, w, True, bias, [1] * rank, dilation, out_element_type)
        xp = prepare_input(em, x, padding, padding, [1] * rank)
        return emit_depthwise_convolution(em, xp, w, False, bias, stride, dilation, out_element_type)
    wt = prepare_weight(em, w, groups, transposed)
    if transposed:
        reach = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        low = [r - p for r, p in zip(reach, padding, strict=True)]
        high = [r - p + op for r, p, op in zip(reach, padding, output_padding, strict=True)]
        xp = prepare_input(em, x, low, high, stride)
        return emit_direct_convolution(em, xp, wt, bias, [1] * rank, dilation, groups, out_element_type)
    xp = prepare_input(em, x, padding, padding, [1] * rank)
    return emit_direct_convolution(em, xp, wt, bias, stride, dilation, groups, out_element_type)


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

    _nest(em, [groups, *kernel], per_offset)
    return gw


def _unused(em: LoopNestBuilder, op: Operation, index: int) -> SSAValue | None:
    """A result output_mask leaves out: None when ATen leaves it undefined, else an (unwritten) tensor."""
    if not isinstance(op.results[index].type, TensorType):
        return None
    return alloc(em, result_shape(op, index), result_element_type(op, index))


def _convolution_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
    grad_out, x, w = args["grad_output"], args["input"], args["weight"]
    rank = layout_of(x).rank - 2
    stride, padding = _expand_param(args["stride"], rank), _expand_param(args["padding"], rank)
    dilation = _expand_param(args["dilation"], rank)
    groups, transposed = int(args["groups"]), bool(args["transposed"])
    mask = list(args["output_mask"])
    kernel = layout_of(w).shape[2:]
    results: list[SSAValue | None] = []
    if mask[0]:
        in_spatial = layout_of(x).shape[2:]
        go_spatial = layout_of(grad_out).shape[2:]
        if transposed:
            # the input gradient of a transposed convolution is the direct convolution of grad_output
            grad_in = emit_convolution(
                em,
                op.name,
                grad_out,
                w,
                None,
                stride,
                padding,
                dilation,
                False,
                [0] * rank,
                groups,
                result_element_type(op, 0),
            )
        else:
            extra = [
                s - ((o - 1) * st - 2 * p + d * (k - 1) + 1)
                for s, o, st, p, d, k in zip(in_spatial, go_spatial, stride, padding, dilation, kernel, strict=True)
            ]
            grad_in = emit_convolution(
                em,
                op.name,
                grad_out,
                w,
                None,
                stride,
                padding,
                dilation,
                True,
                extra,
                groups,
                result_element_type(op, 0),
            )
        results.append(grad_in)
    else:
        results.append(_unused(em, op, 0))
    if mask[1]:
        if transposed:
            # w[Cin, Cout/g, K] of a transposed convolution: the roles of input and grad_output swap
            gw = emit_weight_gradient(
                em, grad_out, x, kernel, stride, padding, dilation, groups, result_element_type(op, 1)
            )
        elif rank <= 2 and is_depthwise(layout_of(w).shape, groups):
            xp = prepare_input(em, x, padding, padding, [1] * rank)
            gw = emit_depthwise_weight_gradient(em, xp, grad_out, kernel, stride, dilation, result_element_type(op, 1))
        else:
            gw = emit_weight_gradient(
                em, x, grad_out, kernel, stride, padding, dilation, groups, result_element_type(op, 1)
            )
        results.append(gw)
    else:
        results.append(_unused(em, op, 1))
    if mask[2]:
        dims = [0, *range(2, rank + 2)]
        results.append(emit_reduce(em, grad_out, dims, False, "add", result_element_type(op, 2)))
    else:
        results.append(_unused(em, op, 2))
    return results


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
    if op.name == "torch.aten.convolution":
        expected = convolution_shape(
            x_shape,
            tensor_shape(args["weight"]),
            args["stride"],
            args["padding"],
            args["dilation"],
            bool(args["transposed"]),
            args["output_padding"],
            int(args["groups"]),
        )
        if expected != tensor_shape(op.results[0]):
            return f"computed shape {expected} differs from {tensor_shape(op.results[0])}"
    return None


CONVOLUTION_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.convolution": _convolution,
    "torch.aten.convolution_backward": _convolution_backward,
}
