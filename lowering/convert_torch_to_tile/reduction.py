"""Reductions over any dims: kept dims on the partition axis, reduced dims on the free axis.

The input is viewed with its kept dimensions first and its reduced ones last (a free permutation of strides),
each group merged where contiguous. The last kept dimension is tiled over partitions, the reduced elements are
folded tile by tile on VectorE (`tile.reduce` per chunk of 2048, combined into a [P, 1] fp32 column), and the
column is stored into the output. Reducing along what was the partition axis of the data therefore reads it
transposed through the DMA access pattern rather than moving it across partitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    FREE_TILE,
    PARTITION_TILE,
    Lowering,
    alloc,
    layout_of,
    load,
    result_element_type,
    store,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.emitter import Emitter, Index
from neuron_mlir.lowering.layout import Layout, collapse, normalize_dim
from neuron_mlir.runtime.hardware import Memory

# how partial results of each reduction combine
_COMBINE = {"add": "add", "max": "max", "min": "min", "multiply": "multiply"}


def reduced_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    chosen = {normalize_dim(d, len(shape)) for d in dims} if dims else set(range(len(shape)))
    if keepdim:
        return tuple(1 if i in chosen else extent for i, extent in enumerate(shape))
    return tuple(extent for i, extent in enumerate(shape) if i not in chosen)


def emit_reduce(
    em: Emitter,
    source: SSAValue,
    dims: Sequence[int],
    keepdim: bool,
    op: str,
    out_element_type: Attribute,
    scale: float | None = None,
) -> SSAValue:
    """Reduce `source` over `dims` (all dims when empty) with `op`; `scale` multiplies the result (means)."""
    layout = layout_of(source)
    if layout.rank == 0:
        layout = Layout((1,), (0,), layout.offset)
    rank = layout.rank
    chosen = sorted({normalize_dim(d, rank) for d in dims}) if dims else list(range(rank))
    kept = [d for d in range(rank) if d not in chosen]
    out_shape = reduced_shape(layout_of(source).shape, dims, keepdim)
    out = alloc(em, out_shape, out_element_type)

    permuted = layout.permute(kept + chosen)
    kept_shape = permuted.shape[: len(kept)]
    kept_out_strides = Layout.contiguous(kept_shape).strides
    kept_dims, (kept_in_strides, kept_out) = collapse(kept_shape, [permuted.strides[: len(kept)], kept_out_strides])
    reduced_dims, (reduced_strides,) = collapse(permuted.shape[len(kept) :], [permuted.strides[len(kept) :]])
    if not kept_dims:
        kept_dims, kept_in_strides, kept_out = (1,), (0,), (0,)
    if not reduced_dims:
        reduced_dims, reduced_strides = (1,), (0,)

    source_view = view(
        em, source, Layout((*kept_dims, *reduced_dims), (*kept_in_strides, *reduced_strides), layout.offset)
    )
    out_view = view(em, out, Layout((*kept_dims, 1), (*kept_out, 1), layout_of(out).offset))
    leading, partitions = kept_dims[:-1], kept_dims[-1]
    combine = _COMBINE[op]

    def partial(e: Emitter, prefix: list[Index], reduced_index: list[Index], f0: Index, size: int, p_size: int):
        free_dim = len(kept_dims) + len(reduced_dims) - 1
        chunk = load(e, source_view, [*prefix, *reduced_index, f0], (p_size, size), dims=(len(kept_dims) - 1, free_dim))
        column = TileType((p_size, 1), f32, Memory.SBUF)
        return e.insert(tile.ReduceOp(chunk, op, column)).result

    def fold(e: Emitter, acc: SSAValue, value: SSAValue) -> SSAValue:
        return e.insert(tile.BinaryOp(acc, value, combine, acc.type)).result  # type: ignore[arg-type]

    def over(e: Emitter, prefix: list[Index], remaining: tuple[int, ...], reduced_index: list[Index], p_size: int):
        if len(remaining) == 1:
            return e.accumulate_tiles(
                remaining[0],
                FREE_TILE,
                lambda e2, f0, size: partial(e2, prefix, reduced_index, f0, size, p_size),
                lambda e2, f0, size, acc: fold(e2, acc, partial(e2, prefix, reduced_index, f0, size, p_size)),
            )
        return e.accumulate_each(
            remaining[0],
            lambda e2, i: over(e2, prefix, remaining[1:], [*reduced_index, i], p_size),
            lambda e2, i, acc: fold(e2, acc, over(e2, prefix, remaining[1:], [*reduced_index, i], p_size)),
        )

    def rows(e: Emitter, prefix: list[Index]) -> None:
        def partition_tile(e2: Emitter, p0: Index, p_size: int) -> None:
            result = over(e2, [*prefix, p0], reduced_dims, [], p_size)
            if scale is not None:
                scaled = TileType((p_size, 1), f32, Memory.SBUF)
                result = e2.insert(tile.BinaryScalarOp(result, "multiply", scaled, scalar=scale)).result
            store(e2, to_sbuf(e2, result, out_element_type), out_view, [*prefix, p0, 0])

        e.for_tiles(partitions, PARTITION_TILE, partition_tile)

    def loops(e: Emitter, extents: tuple[int, ...], prefix: list[Index]) -> None:
        if not extents:
            rows(e, prefix)
            return
        e.for_each(extents[0], lambda e2, i: loops(e2, extents[1:], [*prefix, i]))

    loops(em, tuple(leading), [])
    return out


# ---- ATen ops ------------------------------------------------------------------------------------------------


def _dims(args: dict[str, Any]) -> list[int]:
    dims = args.get("dim")
    if dims is None:
        return []
    return [dims] if isinstance(dims, int) else list(dims)


def _reduce(op_name: str, mean: bool = False) -> Lowering:
    def lower(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        source = args["self"]
        dims = _dims(args)
        shape = layout_of(source).shape
        scale = None
        if mean:
            chosen = {normalize_dim(d, len(shape)) for d in dims} if dims else set(range(len(shape)))
            count = 1
            for d in chosen:
                count *= shape[d] if shape else 1
            scale = 1.0 / count if count else float("nan")
        keepdim = bool(args.get("keepdim", False))
        return [emit_reduce(em, source, dims, keepdim, op_name, result_element_type(op), scale)]

    return lower


REDUCTION_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.sum.dim_IntList": _reduce("add"),
    "torch.aten.mean.dim": _reduce("add", mean=True),
    "torch.aten.mean": _reduce("add", mean=True),
    "torch.aten.amax": _reduce("max"),
    "torch.aten.amin": _reduce("min"),
    "torch.aten.prod": _reduce("multiply"),
}
