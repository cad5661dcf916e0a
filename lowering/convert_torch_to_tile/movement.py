"""Data-movement lowerings: ops that rearrange elements without computing on them.

Whatever the strided view algebra can say stays a view (`diagonal`, `as_strided`, `flip` with negative strides,
`split_with_sizes` as slices). The rest writes a fresh tensor through views of it, so the DMA access patterns do
the rearranging: `cat` copies each input into its slice of the output, `repeat` copies one stride-0 (broadcast)
view of the input into the output viewed as (repeat, size) pairs, `constant_pad_nd` fills the border and copies
the (possibly cropped) input into the interior, `slice_scatter` copies `self` and then `src` into its slice.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import f32, i32
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.types import is_integer_type
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    FREE_TILE,
    PARTITION_TILE,
    Lowering,
    alloc,
    arguments_of,
    dim_out_of_range,
    dims_out_of_range,
    element_type_of,
    layout_of,
    result_element_type,
    result_shape,
    tensor_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import copy_to, emit_elementwise
from neuron_mlir.lowering.layout import Layout, normalize_dim
from neuron_mlir.lowering.loop_nests import LoopNestBuilder
from neuron_mlir.runtime.program import row_major_strides


def fill_into(em: LoopNestBuilder, out: SSAValue, value: float | int) -> None:
    """Fill every element of the HBM view `out` with `value`."""
    layout = layout_of(out)
    if layout.num_elements == 0:
        return
    fill = lambda e, tiles, result: e.insert(tile.FillOp(value, result)).result  # noqa: E731
    emit_elementwise(em, layout.shape, element_type_of(out), [], fill, out, wide=True)


def copy_into(em: LoopNestBuilder, source: SSAValue, out: SSAValue) -> None:
    """Copy `source` (any layout; broadcast to `out`'s shape) into the HBM view `out`, converting the dtype."""
    shape = layout_of(out).shape
    if layout_of(out).num_elements == 0:
        return

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        if tiles[0].type == result:
            return tiles[0]
        return e.insert(tile.CopyOp(tiles[0], result)).result

    emit_elementwise(em, shape, element_type_of(out), [source], compute, out, wide=True)


def _diagonal(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    layout = layout_of(args["self"]).diagonal(args.get("offset", 0), args.get("dim1", 0), args.get("dim2", 1))
    return [view(em, args["self"], layout)]


def _as_strided(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """A view with the given sizes and strides over the input's allocation, which is PyTorch's storage: views keep
    their base's allocation, so strides and `storage_offset` count the same elements as in eager."""
    source = args["self"]
    layout = layout_of(source)
    offset = args.get("storage_offset")
    size, stride = tuple(args["size"]), tuple(args["stride"])
    # `legal` kept the view inside the input's own elements; the allocation under a view of another tensor holds
    # at least the elements that view spans, which can be fewer (a broadcast): then a copy of the input is viewed
    span = layout.offset + 1 + sum((n - 1) * abs(s) for n, s in zip(layout.shape, layout.strides, strict=True))
    start = layout.offset if offset is None else int(offset)
    reach = start + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) if 0 not in size else start
    if reach >= span:
        source = copy_to(em, source)
        start = 0 if offset is None else int(offset)
    return [view(em, source, Layout(size, stride, start))]


def _flip(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [view(em, args["self"], layout_of(args["self"]).flip(args["dims"]))]


def _split_with_sizes(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    layout = layout_of(args["self"])
    dim = normalize_dim(args.get("dim", 0), layout.rank)
    results, start = [], 0
    for size in args["split_sizes"]:
        results.append(view(em, args["self"], layout.slice(dim, start, start + size)))
        start += size
    return results


def _cat(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    shape = result_shape(op)
    out = alloc(em, shape, result_element_type(op))
    out_layout = layout_of(out)
    dim = normalize_dim(args.get("dim", 0), len(shape))
    start = 0
    for tensor in args["tensors"]:
        part = layout_of(tensor)
        if part.num_elements == 0:
            continue  # PyTorch skips empty inputs (including legacy 1-d empties of another rank)
        size = part.shape[dim]
        copy_into(em, tensor, view(em, out, out_layout.slice(dim, start, start + size)))
        start += size
    return [out]


def _repeat(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """Out viewed as (repeat_0, size_0, repeat_1, size_1, ...) receives the input broadcast along the repeats."""
    repeats = list(args["repeats"])
    source = layout_of(args["self"])
    lead = len(repeats) - source.rank
    sizes = [1] * lead + list(source.shape)
    strides = [0] * lead + list(source.strides)
    pair_shape = tuple(x for r, n in zip(repeats, sizes, strict=True) for x in (r, n))
    pair_strides = tuple(x for s in strides for x in (0, s))
    out = alloc(em, result_shape(op), result_element_type(op))
    out_pairs = Layout(pair_shape, row_major_strides(pair_shape), 0)
    copy_into(em, view(em, args["self"], Layout(pair_shape, pair_strides, source.offset)), view(em, out, out_pairs))
    return [out]


def _constant_pad_nd(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """Fill the border with `value`, copy the input (cropped where a pad is negative) into the interior."""
    pads = list(args["pad"])
    source = layout_of(args["self"])
    shape = result_shape(op)
    out = alloc(em, shape, result_element_type(op))
    inner, outer = source, layout_of(out)
    for i in range(len(pads) // 2):
        dim = source.rank - 1 - i
        low, high = pads[2 * i], pads[2 * i + 1]
        inner = inner.slice(dim, max(0, -low), source.shape[dim] - max(0, -high))
        outer = outer.slice(dim, max(0, low), shape[dim] - max(0, high))
    if any(p > 0 for p in pads):
        fill_into(em, out, args.get("value", 0))
    copy_into(em, view(em, args["self"], inner), view(em, out, outer))
    return [out]


def _slice_scatter(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    out = copy_to(em, args["self"])
    layout = layout_of(out)
    step = args.get("step", 1)
    sliced = layout.slice(args.get("dim", 0), args.get("start"), args.get("end"), step)
    copy_into(em, args["src"], view(em, out, sliced))
    return [out]


def _select_scatter(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    out = copy_to(em, args["self"])
    copy_into(em, args["src"], view(em, out, layout_of(out).select(args["dim"], args["index"])))
    return [out]


def _diagonal_scatter(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    out = copy_to(em, args["self"])
    diagonal = layout_of(out).diagonal(args.get("offset", 0), args.get("dim1", 0), args.get("dim2", 1))
    copy_into(em, args["src"], view(em, out, diagonal))
    return [out]


def _as_strided_scatter(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """A copy of self with `src` written through as_strided(size, stride, storage_offset) of the copy."""
    out = copy_to(em, args["self"])
    offset = args.get("storage_offset")
    size, stride = tuple(args["size"]), tuple(args["stride"])
    start = layout_of(out).offset if offset is None else int(offset)
    target = Layout(size, stride, start)
    copy_into(em, args["src"], view(em, out, target))
    return [out]


def _injective(layout: Layout) -> bool:
    """Whether no two indices of `layout` reach the same element (strides sorted, each past the previous span)."""
    reach = 0
    for stride, extent in sorted((abs(s), n) for n, s in zip(layout.shape, layout.strides, strict=True) if n > 1):
        if stride <= reach:
            return False
        reach += stride * (extent - 1)
    return True


def _narrow_copy(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    start, length = int(args["start"]), int(args["length"])
    layout = layout_of(args["self"])
    dim = normalize_dim(args["dim"], layout.rank)
    start = start + layout.shape[dim] if start < 0 else start
    return [copy_to(em, view(em, args["self"], layout.slice(dim, start, start + length)))]


def _unfold(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [view(em, args["self"], layout_of(args["self"]).unfold(args["dimension"], args["size"], args["step"]))]


def _copy(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`copy(self, src)` as a value: src broadcast to self's shape, in self's dtype."""
    out = alloc(em, result_shape(op), result_element_type(op))
    copy_into(em, args["src"], out)
    return [out]


def _empty(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [alloc(em, result_shape(op), result_element_type(op))]


# The integers fp32 holds exactly: an integer arange reaching beyond them is computed in integers
_FP32_EXACT_INTEGERS = 2**24


def _arange(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """out[i] = start + i * step: GpSimdE iota counts i (int32, exact), VectorE scales and shifts in fp32, or,
    for integer results reaching beyond fp32's exact integers (2^24), GpSimdE in the result's integers.

    Tiles are [128, up to 2048] blocks of the flat output at static positions, so each iota's base is a constant.
    """
    start, step = args.get("start", 0), args.get("step", 1)
    (count,) = result_shape(op)
    element_type = result_element_type(op)
    reach = max(abs(start), abs(start + (count - 1) * step)) if count else 0
    exact = (
        is_integer_type(element_type)
        and all(float(v).is_integer() for v in (start, step))
        and reach > _FP32_EXACT_INTEGERS
    )
    work = element_type if exact else f32
    out = alloc(em, (count,), element_type)
    block = PARTITION_TILE * FREE_TILE
    for first in range(0, count, block):
        size = min(block, count - first)
        columns = min(FREE_TILE, size)
        rows = size // columns
        for base, (p, f) in ((first, (rows, columns)), (first + rows * columns, (1, size - rows * columns))):
            if p == 0 or f == 0:
                continue
            target = view(em, out, Layout((p, f), (f, 1), base))
            counter = em.insert(tile.IotaOp(TileType((p, f), i32 if exact else f32), [1], base, f)).result
            if exact:
                counter = em.insert(tile.CopyOp(counter, TileType((p, f), work))).result
            scale, shift = (int(step), int(start)) if exact else (float(step), float(start))
            value = em.insert(tile.BinaryScalarOp(counter, "multiply", TileType((p, f), work), scalar=scale)).result
            value = em.insert(tile.BinaryScalarOp(value, "add", TileType((p, f), work), scalar=shift)).result
            if not exact:
                value = em.insert(tile.CopyOp(value, TileType((p, f), element_type))).result
            em.insert(tile.StoreOp(value, target, [em.index(0), em.index(0)]))
    return [out]


def _strided_reach(args: dict[str, Any]) -> tuple[list[int], list[int], int]:
    """as_strided's sizes and strides and the largest element they reach (from a storage offset of 0 when none
    is given: the input is a tensor of its own)."""
    size, stride = list(args["size"]), list(args["stride"])
    start = int(args.get("storage_offset") or 0)
    reach = start + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) if 0 not in size else start
    return size, stride, reach


def legal(op: Operation) -> str | None:
    """Data movement lowers for any dtype; its dimension arguments must be in range, and as_strided's views (and
    as_strided_scatter's writes) must stay inside the input's elements, with non-negative strides, written once."""
    args = arguments_of(op)
    if op.name in ("torch.aten.diagonal", "torch.aten.diagonal_scatter"):
        dims = (int(args.get("dim1", 0)), int(args.get("dim2", 1)))
        rank = len(tensor_shape(args["self"]))
        if (problem := dim_out_of_range(dims[0], rank) or dim_out_of_range(dims[1], rank)) is not None:
            return problem
        if normalize_dim(dims[0], rank) == normalize_dim(dims[1], rank):
            return f"diagonal dimensions must differ, got {dims[0]} and {dims[1]}"
    elif op.name == "torch.aten.cat":
        rank = len(tensor_shape(op.results[0]))
        return dim_out_of_range(int(args.get("dim", 0)), rank)
    elif op.name == "torch.aten.flip":
        return dims_out_of_range(op, ("dims",))
    elif op.name == "torch.aten.unfold":
        return dims_out_of_range(op, ("dimension",))
    elif op.name in ("torch.aten.split_with_sizes", "torch.aten.slice_scatter", "torch.aten.select_scatter",
                     "torch.aten.narrow_copy"):  # fmt: skip
        return dims_out_of_range(op)
    elif op.name in ("torch.aten.as_strided", "torch.aten.as_strided_scatter"):
        size, stride, reach = _strided_reach(args)
        elements = math.prod(tensor_shape(args["self"]))
        if any(s < 0 for s in stride):
            return f"negative strides {stride} are not valid for {op.name.removeprefix('torch.aten.')}"
        if reach >= max(elements, 1):
            return f"sizes {size} and strides {stride} reach past the {elements} elements of the input's storage"
        if op.name == "torch.aten.as_strided_scatter" and not _injective(Layout(tuple(size), tuple(stride), 0)):
            return f"sizes {size} and strides {stride} write some elements twice"
    return None


MOVEMENT_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.arange.start_step": _arange,
    "torch.aten.diagonal": _diagonal,
    "torch.aten.as_strided": _as_strided,
    "torch.aten.flip": _flip,
    "torch.aten.split_with_sizes": _split_with_sizes,
    "torch.aten.cat": _cat,
    "torch.aten.repeat": _repeat,
    "torch.aten.constant_pad_nd": _constant_pad_nd,
    "torch.aten.slice_scatter": _slice_scatter,
    "torch.aten.select_scatter": _select_scatter,
    "torch.aten.diagonal_scatter": _diagonal_scatter,
    "torch.aten.as_strided_scatter": _as_strided_scatter,
    "torch.aten.narrow_copy": _narrow_copy,
    "torch.aten.unfold": _unfold,
    "torch.aten.copy": _copy,
    "torch.aten.empty.memory_format": _empty,
    "torch.aten.empty_strided": _empty,
}
