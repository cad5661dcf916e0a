"""Pairwise distances: `_cdist_forward` and `_pdist_forward` with PyTorch's p-norm semantics.

PyTorch picks the algorithm, and with it the rounding, so these lowerings pick the same one:

- p = 2 with `compute_mode` 1, or mode 0/None with more than 25 rows on either side (ATen's `cdist_impl`):
  one TensorE matmul of the augmented matrices [-2*x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, then `sqrt(max(., 0))`
  as PSUM is evacuated: exactly ATen's `_euclidean_dist`.
- otherwise the direct definition, one row of x2 (broadcast over the partitions holding x1's rows) at a time on
  VectorE: d = x1 - x2_row, then per p: 0 counts d != 0, 1 sums |d|, 2 is sqrt(sum d^2), inf is max |d|, any
  other p is (sum |d|^p)^(1/p) (GpSimdE power).

`_pdist_forward` is always direct (ATen's pdist has no matmul path): row i against rows i+1.. on partitions,
written to the condensed output in PyTorch's (i, j > i) order.

ATen's kernels take p in the inputs' element type and pick the norm by that value (`Dist<scalar_t>`): a p whose
float32 is inf (1e127) is the max norm, one whose float32 is 0 counts, so the direct path converts p first.
Only the matmul path's test sees the double, as `cdist_impl`'s does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
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
    fold_nest,
    layout_of,
    load,
    result_element_type,
    result_shape,
    tensor_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise
from neuron_mlir.lowering.convert_torch_to_tile.matmul import emit_matmul
from neuron_mlir.lowering.convert_torch_to_tile.movement import copy_into, fill_into
from neuron_mlir.lowering.convert_torch_to_tile.reduction import emit_reduce
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.dtypes import numpy_dtype
from neuron_mlir.runtime.hardware import Memory


def _as_element(p: float, element_type: Attribute) -> float:
    """p as ATen's distance kernels hold it: converted to the inputs' element type."""
    with np.errstate(over="ignore"):
        return float(numpy_dtype(runtime_dtype_name(element_type)).type(p))


def _work(shape: Sequence[int]) -> TileType:
    return TileType(tuple(shape), f32, Memory.SBUF)


def _scalar(em: LoopNestBuilder, op: str, value: SSAValue, scalar: float) -> SSAValue:
    shape = value.type.get_shape()  # type: ignore[attr-defined]
    return em.insert(tile.BinaryScalarOp(value, op, _work(shape), scalar=scalar)).result


def _binary(em: LoopNestBuilder, op: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    shape = lhs.type.get_shape()  # type: ignore[attr-defined]
    return em.insert(tile.BinaryOp(lhs, rhs, op, _work(shape))).result


def _reduce(em: LoopNestBuilder, op: str, value: SSAValue) -> SSAValue:
    rows = value.type.get_shape()[0]  # type: ignore[attr-defined]
    return em.insert(tile.ReduceOp(value, op, _work((rows, 1)))).result


def _partial(em: LoopNestBuilder, p: float, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    """The [rows, 1] partial p-norm accumulation of one chunk of the difference (before the final root)."""
    diff = _binary(em, "subtract", lhs, rhs)
    if p == 0:
        return _reduce(em, "add", _scalar(em, "not_equal", diff, 0.0))
    if math.isinf(p):
        return _reduce(em, "abs_max", diff)
    if p == 2:
        return _reduce(em, "add", _binary(em, "multiply", diff, diff))
    magnitude = em.insert(tile.UnaryOp(diff, "abs", _work(diff.type.get_shape()))).result  # type: ignore[attr-defined]
    if p == 1:
        return _reduce(em, "add", magnitude)
    return _reduce(em, "add", _scalar(em, "power", magnitude, p))


def _combine(em: LoopNestBuilder, p: float, acc: SSAValue, value: SSAValue) -> SSAValue:
    return _binary(em, "max" if math.isinf(p) else "add", acc, value)


def _finish(em: LoopNestBuilder, p: float, total: SSAValue, element_type: Attribute) -> SSAValue:
    shape = total.type.get_shape()  # type: ignore[attr-defined]
    if p == 2:
        total = em.insert(tile.UnaryOp(total, "sqrt", _work(shape))).result
    elif p not in (0, 1) and not math.isinf(p):
        total = _scalar(em, "power", total, 1.0 / p)
    return em.insert(tile.CopyOp(total, TileType(shape, element_type, Memory.SBUF))).result


def _direct_rows(
    em: LoopNestBuilder, p: float, rows: SSAValue, other_row: SSAValue, at: list[Index], other_at: list[Index],
    count: int, width: int, element_type: Attribute,
) -> SSAValue:  # fmt: skip
    """[count, 1]: p-distances between `count` rows of `rows` (at `at`) and one row broadcast over them."""

    def step(e: LoopNestBuilder, offsets: list[Index], sizes: list[int], acc: SSAValue | None) -> SSAValue:
        (m0,), (ms,) = offsets, sizes
        lhs = load(e, rows, [*at[:-1], m0], (count, ms), f32)
        rhs = load(e, other_row, [*other_at[:-1], m0], (count, ms), f32)
        value = _partial(e, p, lhs, rhs)
        return value if acc is None else _combine(e, p, acc, value)

    if width == 0:
        return em.insert(tile.FillOp(0.0, TileType((count, 1), element_type, Memory.SBUF))).result
    return _finish(em, p, fold_nest(em, [(width, FREE_TILE)], step), element_type)


def _broadcast_rows(em: LoopNestBuilder, x: SSAValue, partitions: int) -> SSAValue:
    """x[..., R, M] viewed as [..., R, partitions, M] (each row repeated on every partition, stride 0)."""
    layout = layout_of(x)
    shape = (*layout.shape[:-1], partitions, layout.shape[-1])
    strides = (*layout.strides[:-1], 0, layout.strides[-1])
    return view(em, x, Layout(shape, strides, layout.offset))


def _uses_matmul(p: float, mode: int | None, rows1: int, rows2: int) -> bool:
    return p == 2 and (mode == 1 or (mode in (None, 0) and (rows1 > 25 or rows2 > 25)))


def _euclidean_by_matmul(em: LoopNestBuilder, x1: SSAValue, x2: SSAValue, element_type: Attribute) -> SSAValue:
    """ATen's _euclidean_dist: [-2*x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, then sqrt(max(., 0))."""
    a, b = layout_of(x1), layout_of(x2)
    width = a.shape[-1]

    def augmented(x: SSAValue, scale: float, norm_last: bool) -> SSAValue:
        layout = layout_of(x)
        shape = (*layout.shape[:-1], width + 2)
        out = alloc(em, shape, f32)
        out_layout = layout_of(out)

        def scaled(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            value = e.insert(tile.BinaryScalarOp(tiles[0], "multiply", result, scalar=scale)).result
            return value

        emit_elementwise(em, layout.shape, f32, [x], scaled, view(em, out, out_layout.slice(-1, 0, width)))
        squares = emit_elementwise(
            em, layout.shape, f32, [x], lambda e, t, r: e.insert(tile.BinaryOp(t[0], t[0], "multiply", r)).result
        )
        norms = emit_reduce(em, squares, [layout.rank - 1], True, "add", f32)
        norm_at, one_at = (width + 1, width) if norm_last else (width, width + 1)
        copy_into(em, norms, view(em, out, out_layout.slice(-1, norm_at, norm_at + 1)))
        fill_into(em, view(em, out, out_layout.slice(-1, one_at, one_at + 1)), 1.0)
        return out

    lhs = augmented(x1, -2.0, norm_last=False)
    rhs = augmented(x2, 1.0, norm_last=True)
    rhs_t = view(em, rhs, layout_of(rhs).transpose(-1, -2))

    def epilogue(e: LoopNestBuilder, product: SSAValue, indices: list[Index], result_type: TileType) -> SSAValue:
        shape = result_type.get_shape()
        clamped = e.insert(tile.BinaryScalarOp(product, "max", _work(shape), scalar=0.0)).result
        return e.insert(tile.UnaryOp(clamped, "sqrt", result_type)).result

    del b
    return emit_matmul(em, lhs, rhs_t, element_type, epilogue)


def _cdist(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    x1, x2 = args["x1"], args["x2"]
    p = float(args["p"])
    mode = args.get("compute_mode")
    a, b = layout_of(x1), layout_of(x2)
    batch = tuple(result_shape(op)[:-2])
    # the batch dims broadcast (stride-0 views)
    x1 = view(em, x1, a.expand((*batch, *a.shape[-2:])))
    x2 = view(em, x2, b.expand((*batch, *b.shape[-2:])))
    a, b = layout_of(x1), layout_of(x2)
    element_type = result_element_type(op)
    rows1, rows2, width = a.shape[-2], b.shape[-2], a.shape[-1]
    if _uses_matmul(p, mode, rows1, rows2) and width > 0:
        return [_euclidean_by_matmul(em, x1, x2, element_type)]
    p = _as_element(p, element_type)
    out = alloc(em, result_shape(op), element_type)
    spread = _broadcast_rows(em, x2, PARTITION_TILE)

    def per_batch(e: LoopNestBuilder, done: list[Index]) -> None:
        def rows_tile(e2: LoopNestBuilder, p0: Index, ps: int) -> None:
            def per_row(e3: LoopNestBuilder, r: Index) -> None:
                column = _direct_rows(e3, p, x1, spread, [*done, p0, 0], [*done, r, 0, 0], ps, width, element_type)
                e3.insert(tile.StoreOp(column, out, [e3.index(i) for i in [*done, p0, r]]))

            e2.for_each(rows2, per_row)

        e.for_tiles(rows1, PARTITION_TILE, rows_tile)

    em.for_each_index(batch, per_batch)
    return [out]


def _pdist(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    x = args["self"]
    layout = layout_of(x)
    count, width = layout.shape
    element_type = result_element_type(op)
    p = _as_element(float(args.get("p", 2.0)), element_type)
    out = alloc(em, result_shape(op), element_type)
    column_view = view(em, out, Layout((result_shape(op)[0], 1), (1, 1), 0))
    spread = _broadcast_rows(em, x, PARTITION_TILE)
    start = 0
    for i in range(count - 1):
        others = count - 1 - i

        def rows_tile(e: LoopNestBuilder, j0: Index, js: int, i: int = i, start: int = start) -> None:
            first = e.add(j0, i + 1)
            column = _direct_rows(e, p, x, spread, [first, 0], [i, 0, 0], js, width, element_type)
            e.insert(tile.StoreOp(column, column_view, [e.index(e.add(j0, start)), e.index(0)]))

        em.for_tiles(others, PARTITION_TILE, rows_tile)
        start += others
    return [out]


def _broadcasts(shape: Sequence[int], batch: Sequence[int]) -> bool:
    """Whether batch dims `shape` expand to `batch` (PyTorch's broadcasting, aligned at the right)."""
    if len(shape) > len(batch):
        return False
    return all(own in (1, wanted) for own, wanted in zip(reversed(shape), reversed(batch), strict=False))


def legal(op: Operation) -> str | None:
    """cdist's batch dims must broadcast to the result's; pdist takes a 2-d input."""
    args = arguments_of(op)
    if op.name == "torch.aten._pdist_forward":
        rank = len(tensor_shape(args["self"]))
        return None if rank == 2 else f"pdist takes a 2-d input, got rank {rank}"
    a, b = tensor_shape(args["x1"]), tensor_shape(args["x2"])
    batch = tensor_shape(op.results[0])[:-2]
    if not (_broadcasts(a[:-2], batch) and _broadcasts(b[:-2], batch)):
        return f"batch shapes {a[:-2]} and {b[:-2]} do not broadcast"
    return None


DISTANCE_LOWERINGS: dict[str, Lowering] = {
    "torch.aten._cdist_forward": _cdist,
    "torch.aten._pdist_forward": _pdist,
}
