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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    alloc,
    arguments_of,
    element_type_of,
    layout_of,
    load,
    result_element_type,
    result_shape,
    tensor_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import copy_to
from neuron_mlir.lowering.convert_torch_to_tile.matmul import matmul_limits
from neuron_mlir.lowering.convert_torch_to_tile.movement import copy_into, fill_into
from neuron_mlir.lowering.convert_torch_to_tile.reduction import emit_reduce
from neuron_mlir.lowering.emitter import Emitter, Index
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.runtime.hardware import Memory

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


def _nest(em: Emitter, extents: Sequence[int], body: Callable[[Emitter, list[Index]], None]) -> None:
    def level(e: Emitter, done: list[Index], left: Sequence[int]) -> None:
        if not left:
            body(e, done)
            return
        e.for_each(left[0], lambda inner, i: level(inner, [*done, i], left[1:]))

    level(em, [], extents)


def _store(em: Emitter, value: SSAValue, tensor: SSAValue, indices: Sequence[Index], dims: Sequence[int]) -> None:
    rank = layout_of(tensor).rank
    mapping = None if tuple(dims) == (rank - 2, rank - 1) else dims
    em.insert(tile.StoreOp(value, tensor, [em.index(i) for i in indices], mapping))


# ---- preparing operands --------------------------------------------------------------------------------------


def prepare_input(
    em: Emitter, x: SSAValue, low: Sequence[int], high: Sequence[int], spacing: Sequence[int]
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
    copy_into(em, view(em, x, inner), view(em, prepared, outer))
    return prepared


def prepare_weight(em: Emitter, w: SSAValue, groups: int, transposed: bool) -> SSAValue:
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
    em: Emitter,
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
    em: Emitter,
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
        e: Emitter,
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

        def step(e2: Emitter, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
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
            value = e.insert(tile.BinaryScalarOp(product, "add", result_type, column=column)).result
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

    def per_image(e: Emitter, idx: list[Index]) -> None:
        n, g, *lead_idx = idx

        def positions(e2: Emitter, co0: Index, co_size: int) -> None:
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


# ---- ATen ops ------------------------------------------------------------------------------------------------


def _expand_param(values: Sequence[int], rank: int) -> list[int]:
    values = list(values)
    return values * rank if len(values) == 1 else values


def emit_convolution(
    em: Emitter,
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
    wt = prepare_weight(em, w, groups, transposed)
    if transposed:
        reach = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        low = [r - p for r, p in zip(reach, padding, strict=True)]
        high = [r - p + op for r, p, op in zip(reach, padding, output_padding, strict=True)]
        xp = prepare_input(em, x, low, high, stride)
        return emit_direct_convolution(em, xp, wt, bias, [1] * rank, dilation, groups, out_element_type)
    xp = prepare_input(em, x, padding, padding, [1] * rank)
    return emit_direct_convolution(em, xp, wt, bias, stride, dilation, groups, out_element_type)


def _convolution(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
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
    em: Emitter,
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

    def output_tile(e: Emitter, idx: list[Index], co0: Index, co_size: int, ci0: Index, ci_size: int) -> None:
        g, *k_idx = idx
        co_global = e.add(e.mul(g, cout_g), co0)
        ci_global = e.add(e.mul(g, cin_g), ci0)

        def step(e2: Emitter, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
            n, *lead, p0 = offsets
            p_size = sizes[-1]
            stationary = load(e2, grad_out, [n, co_global, *lead, p0], (p_size, co_size), dims=(2 + rank - 1, 1))
            moving = load(e2, windows, [n, ci_global, *k_idx, *lead, p0], (p_size, ci_size), dims=(last, 1))
            result_type = TileType((co_size, ci_size), f32, Memory.PSUM)
            return e2.insert(tile.MatmulOp(stationary, moving, result_type, acc)).result

        nest = [(batch, 1), *((o, 1) for o in out_spatial[:-1]), (out_spatial[-1], k_tile)]
        product = fold_nest(e, nest, step)
        _store(e, to_sbuf(e, product, out_element_type), gw, [co_global, ci0, *k_idx], (0, 1))

    def per_offset(e: Emitter, idx: list[Index]) -> None:
        e.for_tiles(
            cout_g,
            m_tile,
            lambda e2, co0, cs: e2.for_tiles(cin_g, n_tile, lambda e3, ci0, ci: output_tile(e3, idx, co0, cs, ci0, ci)),
        )

    _nest(em, [groups, *kernel], per_offset)
    return gw


def _unused(em: Emitter, op: Operation, index: int) -> SSAValue | None:
    """A result output_mask leaves out: None when ATen leaves it undefined, else an (unwritten) tensor."""
    if not isinstance(op.results[index].type, TensorType):
        return None
    return alloc(em, result_shape(op, index), result_element_type(op, index))


def _convolution_backward(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
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
