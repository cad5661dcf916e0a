"""Softmax and log-softmax, kept on chip: one pass over HBM for rows that fit in SBUF.

Input contract: `torch.aten._softmax` / `_log_softmax` on a float tensor along any dimension. Output guarantee: a
fresh HBM tensor written by one loop nest; rows go on partitions and the softmax dimension on the free axis (any
other dimension is first viewed there: the DMA reads it strided). Tiles are loaded in the input's own dtype, so
the DMA moves each byte once and converts nothing. For a row tile `x` of [P, N]:

    m = max(x)                    VectorE reduce                                  -> [P, 1]
    e = exp(x - m), s = sum(e)    ScalarE, -m as the per-partition bias; the sum is the activation's free-axis
                                  accumulate (neuron-fuse-instructions merges the add-reduce of an fp32 result)
    softmax     = e * (1 / s)     reciprocal of the column, then one multiply by it
    log_softmax = x - (m + log s)

A row tile is loaded once and stored once when its tiles (input, fp32 exponentials, output) fit the SBUF share
of one loop body (`common.body_budget_bytes`): a 4096-wide row needs 32 KiB per partition in bf16. Longer rows
are folded in chunks: one pass keeps a running maximum and sum of exponentials per row (each
chunk's exponentials are taken against the maximum so far, and the sum before it is rescaled by exp(old max -
new max) when the maximum grows; a maximum is never below -FLT_MAX, so chunks of -inf add 0), and a second
pass writes the result, reading the row again: two reads and a write (cross-entropy's 50257-wide rows). The
chunks are as wide as the body's share allows, and of equal width (`common.row_chunk_columns`).

The backward kernels (`_softmax_backward_data`, `_log_softmax_backward_data`, kept whole by the frontend) take the
same rows, grad_output `g` and the forward's output `y`, and compute in fp32, rounding once:

    softmax     s = sum(g * y)    VectorE multiply, then reduce                  -> [P, 1]
                grad = (g - s) * y                                               one pass with s as a column
    log_softmax s = sum(g)        VectorE reduce
                grad = g - exp(y) * s                                            ScalarE exp, VectorE

so each of g and y is read once and the gradient written once (rows longer than the SBUF share: a pass for the
sum, then a pass that writes, reading the row again). Rows of one dimension go in row groups (`rows.py`: several
rows per partition per DMA, computed in straight-line code in wavefront order, each read in place from the
group's tile and written into the group's result tile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    FREE_TILE,
    Lowering,
    alloc,
    body_budget_bytes,
    column_tile,
    dims_out_of_range,
    element_bytes,
    element_type_of,
    for_row_tiles,
    layout_of,
    load,
    result_element_type,
    row_chunk_columns,
    store,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.loss import emit_cross_entropy_backward
from neuron_mlir.lowering.layout import Layout, collapse, normalize_dim
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.lowering.torch_fuse_cross_entropy_backward import fused_nll_loss_backward
from neuron_mlir.runtime.hardware import Memory

_FLOAT32_MAX = 3.4028234663852886e38


def _row(p: int, n: int) -> TileType:
    return TileType((p, n), f32, Memory.SBUF)


RowTile = Callable[[LoopNestBuilder, list[Index], Index, int], None]


def emit_softmax(em: LoopNestBuilder, source: SSAValue, dim: int, log: bool, out_element_type: Any) -> SSAValue:
    layout = layout_of(source)
    if layout.rank == 0:
        layout = Layout((1,), (0,), layout.offset)
    dim = normalize_dim(dim, layout.rank)
    out = alloc(em, layout_of(source).shape, out_element_type)
    out_layout = layout_of(out)
    if out_layout.rank == 0:
        out_layout = Layout((1,), (0,), out_layout.offset)
    others = [d for d in range(layout.rank) if d != dim]
    # rows: every dimension but `dim`, merged where contiguous in both input and output; then the softmax dim
    row_shape = tuple(layout.shape[d] for d in others)
    row_dims, (in_rows, out_rows) = collapse(
        row_shape, [tuple(layout.strides[d] for d in others), tuple(out_layout.strides[d] for d in others)]
    )
    if not row_dims:
        row_dims, in_rows, out_rows = (1,), (0,), (0,)
    length = layout.shape[dim]
    source_view = view(em, source, Layout((*row_dims, length), (*in_rows, layout.strides[dim]), layout.offset))
    out_view = view(em, out, Layout((*row_dims, length), (*out_rows, out_layout.strides[dim]), out_layout.offset))

    in_type = element_type_of(source)
    row_bytes = length * (element_bytes(in_type) + 4 + element_bytes(out_element_type))
    single = length <= FREE_TILE or row_bytes <= body_budget_bytes(em)
    chunk_columns = row_chunk_columns(em, length, row_bytes // length)

    def row_tile(e: LoopNestBuilder, prefix: list[Index], p0: Index, p: int) -> None:
        indices = [*prefix, p0]

        def chunk(e2: LoopNestBuilder, f0: Index, size: int) -> SSAValue:
            return load(e2, source_view, [*indices, f0], (p, size), in_type)

        def reduce(e2: LoopNestBuilder, value: SSAValue, op: str) -> SSAValue:
            return e2.insert(tile.ReduceOp(value, op, column_tile(p))).result

        def combine(e2: LoopNestBuilder, a: SSAValue, b: SSAValue, op: str) -> SSAValue:
            return e2.insert(tile.BinaryOp(a, b, op, column_tile(p))).result

        def shifted_exp(e2: LoopNestBuilder, value: SSAValue, negative_max: SSAValue, size: int) -> SSAValue:
            return e2.insert(tile.UnaryOp(value, "exp", _row(p, size), bias=negative_max)).result

        def finite_max(e2: LoopNestBuilder, value: SSAValue) -> SSAValue:
            # a chunk of -inf alone (masked classes) must give exp(-inf - max) = 0, not exp(-inf + inf) = NaN
            return e2.insert(tile.BinaryScalarOp(value, "max", column_tile(p), scalar=-_FLOAT32_MAX)).result

        def online_first(e2: LoopNestBuilder, value: SSAValue, size: int) -> list[SSAValue]:
            chunk_max = finite_max(e2, reduce(e2, value, "max"))
            negative = e2.insert(tile.BinaryScalarOp(chunk_max, "multiply", column_tile(p), scalar=-1.0)).result
            return [chunk_max, reduce(e2, shifted_exp(e2, value, negative, size), "add")]

        def online_step(
            e2: LoopNestBuilder, value: SSAValue, size: int, running_max: SSAValue, running_sum: SSAValue
        ) -> list[SSAValue]:
            # the sum so far was taken against the old maximum: rescale it by exp(old - new)
            new_max = combine(e2, running_max, finite_max(e2, reduce(e2, value, "max")), "max")
            negative = e2.insert(tile.BinaryScalarOp(new_max, "multiply", column_tile(p), scalar=-1.0)).result
            rescale = e2.insert(tile.UnaryOp(running_max, "exp", column_tile(p), bias=negative)).result
            kept = combine(e2, running_sum, rescale, "multiply")
            return [new_max, combine(e2, kept, reduce(e2, shifted_exp(e2, value, negative, size), "add"), "add")]

        whole = chunk(e, 0, length) if single else None
        if whole is not None:
            row_max = reduce(e, whole, "max")
            negative_max = e.insert(tile.BinaryScalarOp(row_max, "multiply", column_tile(p), scalar=-1.0)).result
            exponentials = shifted_exp(e, whole, negative_max, length)
            total = reduce(e, exponentials, "add")
        else:
            exponentials = None
            row_max, total = e.accumulate_tile_values(
                length,
                chunk_columns,
                lambda e2, f0, size: online_first(e2, chunk(e2, f0, size), size),
                lambda e2, f0, size, acc: online_step(e2, chunk(e2, f0, size), size, acc[0], acc[1]),
            )
            negative_max = e.insert(tile.BinaryScalarOp(row_max, "multiply", column_tile(p), scalar=-1.0)).result
        if log:
            log_total = e.insert(tile.UnaryOp(total, "log", column_tile(p))).result
            shift = combine(e, row_max, log_total, "add")
        else:
            scale = e.insert(tile.UnaryOp(total, "reciprocal", column_tile(p))).result

        def write(e2: LoopNestBuilder, f0: Index, size: int) -> None:
            result_type = TileType((p, size), out_element_type, Memory.SBUF)
            if log:
                value = whole if whole is not None else chunk(e2, f0, size)
                result = e2.insert(tile.BinaryScalarOp(value, "subtract", result_type, column=shift)).result
            else:
                exps = (
                    exponentials
                    if exponentials is not None
                    else shifted_exp(e2, chunk(e2, f0, size), negative_max, size)
                )
                result = e2.insert(tile.BinaryScalarOp(exps, "multiply", result_type, column=scale)).result
            store(e2, result, out_view, [*indices, f0])

        if single:
            write(e, 0, length)
        else:
            e.for_tiles(length, chunk_columns, write)

    for_row_tiles(em, row_dims, row_tile)
    return out


def emit_softmax_backward(
    em: LoopNestBuilder, grad: SSAValue, output: SSAValue, dim: int, log: bool, out_element_type: Any
) -> SSAValue:
    """The gradient of (log-)softmax along `dim` from its output's gradient `grad` and the output `output` (see the
    module docstring), as a fresh HBM tensor of `out_element_type`."""
    shape = layout_of(grad).shape
    out = alloc(em, shape, out_element_type)
    layouts = [layout_of(v) for v in (grad, output, out)]
    if not shape:
        layouts = [Layout((1,), (0,), layout.offset) for layout in layouts]
    rank = layouts[0].rank
    dim = normalize_dim(dim, rank)
    others = [d for d in range(rank) if d != dim]
    row_shape = tuple(layouts[0].shape[d] for d in others)
    row_dims, row_strides = collapse(row_shape, [tuple(layout.strides[d] for d in others) for layout in layouts])
    if not row_dims:
        row_dims, row_strides = (1,), [(0,), (0,), (0,)]
    length = layouts[0].shape[dim]
    grad_view, output_view, out_view = (
        view(em, value, Layout((*row_dims, length), (*rows, layout.strides[dim]), layout.offset))
        for value, rows, layout in zip((grad, output, out), row_strides, layouts, strict=True)
    )
    in_bytes = element_bytes(element_type_of(grad)) + element_bytes(element_type_of(output))
    single = length <= FREE_TILE or length * (in_bytes + 8 + element_bytes(out_element_type)) <= body_budget_bytes(em)
    if len(row_dims) == 1:
        row_bytes = length * (in_bytes + 8 + 2 * element_bytes(out_element_type))
        if row_bytes <= body_budget_bytes(em):
            _softmax_backward_row_groups(em, grad_view, output_view, out_view, log, out_element_type, row_bytes)
            return out

    def row_tile(e: LoopNestBuilder, prefix: list[Index], p0: Index, p: int) -> None:
        indices = [*prefix, p0]

        def operands(e2: LoopNestBuilder, f0: Index, size: int) -> tuple[SSAValue, SSAValue]:
            return (
                load(e2, grad_view, [*indices, f0], (p, size)),
                load(e2, output_view, [*indices, f0], (p, size)),
            )

        def partial_sum(e2: LoopNestBuilder, g: SSAValue, y: SSAValue, size: int) -> SSAValue:
            summed = g if log else e2.insert(tile.BinaryOp(g, y, "multiply", _row(p, size))).result
            return e2.insert(tile.ReduceOp(summed, "add", column_tile(p))).result

        def write(e2: LoopNestBuilder, g: SSAValue, y: SSAValue, total: SSAValue, f0: Index, size: int) -> None:
            result_type = TileType((p, size), out_element_type, Memory.SBUF)
            if log:
                scaled = e2.insert(tile.UnaryOp(y, "exp", _row(p, size))).result
                scaled = e2.insert(tile.BinaryScalarOp(scaled, "multiply", _row(p, size), column=total)).result
                result = e2.insert(tile.BinaryOp(g, scaled, "subtract", result_type)).result
            else:
                centred = e2.insert(tile.BinaryScalarOp(g, "subtract", _row(p, size), column=total)).result
                result = e2.insert(tile.BinaryOp(centred, y, "multiply", result_type)).result
            store(e2, result, out_view, [*indices, f0])

        if single:
            g, y = operands(e, 0, length)
            write(e, g, y, partial_sum(e, g, y, length), 0, length)
            return

        def add_chunk(e2: LoopNestBuilder, f0: Index, size: int, acc: SSAValue | None = None) -> SSAValue:
            value = partial_sum(e2, *operands(e2, f0, size), size)
            return value if acc is None else e2.insert(tile.BinaryOp(acc, value, "add", column_tile(p))).result

        total = e.accumulate_tiles(length, FREE_TILE, add_chunk, add_chunk)
        e.for_tiles(length, FREE_TILE, lambda e2, f0, size: write(e2, *operands(e2, f0, size), total, f0, size))

    for_row_tiles(em, row_dims, row_tile)
    return out


def _softmax_backward_row_groups(
    em: LoopNestBuilder,
    grad_view: SSAValue,
    output_view: SSAValue,
    out_view: SSAValue,
    log: bool,
    out_element_type: Any,
    row_bytes: int,
) -> None:
    """The backward over [rows, length] views in row groups (`rows.py`): each DMA moves several rows per
    partition, and the rows of a group are computed in straight-line code, each with its own tiles, so that the
    engines overlap their chains (`row_bytes`: what one row's tiles take per partition)."""
    from neuron_mlir.lowering.convert_torch_to_tile.common import emitter_target
    from neuron_mlir.lowering.convert_torch_to_tile.rows import (
        STRAIGHT_LINE_ROWS,
        RowGroup,
        for_row_groups,
        rows_per_partition,
        wavefront,
    )

    rows, length = layout_of(grad_view).shape
    smallest = min(element_bytes(element_type_of(grad_view)), element_bytes(element_type_of(output_view)))
    full_rate = emitter_target(em).dma_full_rate_bytes_per_partition
    wanted = rows_per_partition(length * smallest, row_bytes, body_budget_bytes(em), rows, full_rate)
    per_partition = min(STRAIGHT_LINE_ROWS, wanted)

    def group_body(e: LoopNestBuilder, group: RowGroup, carried: list[SSAValue]) -> list[SSAValue]:
        p = group.partitions
        grads, outputs = group.load(e, grad_view), group.load(e, output_view)
        result = group.empty(e, (length,), out_element_type)
        row_type, result_type = _row(p, length), TileType((p, length), out_element_type, Memory.SBUF)
        count = group.per_partition
        gs = [group.row(e, grads, j) for j in range(count)]
        ys = [group.row(e, outputs, j) for j in range(count)]
        firsts: list[SSAValue] = [g for g in gs]  # per row: the product (softmax) or exp(y) (log-softmax)
        totals: list[SSAValue] = list(gs)
        seconds: list[SSAValue] = list(gs)
        results = [result]

        def first(j: int) -> None:
            if log:
                firsts[j] = e.insert(tile.UnaryOp(ys[j], "exp", row_type)).result
            else:
                firsts[j] = e.insert(tile.BinaryOp(gs[j], ys[j], "multiply", row_type)).result

        def total(j: int) -> None:
            totals[j] = e.insert(tile.ReduceOp(gs[j] if log else firsts[j], "add", column_tile(p))).result

        def second(j: int) -> None:
            if log:
                seconds[j] = e.insert(tile.BinaryScalarOp(firsts[j], "multiply", row_type, column=totals[j])).result
            else:
                seconds[j] = e.insert(tile.BinaryScalarOp(gs[j], "subtract", row_type, column=totals[j])).result

        def last(j: int) -> None:
            if log:
                value = e.insert(tile.BinaryOp(gs[j], seconds[j], "subtract", result_type)).result
            else:
                value = e.insert(tile.BinaryOp(seconds[j], ys[j], "multiply", result_type)).result
            results[0] = group.put(e, value, results[0], j)

        wavefront(count, [first, total, second, last], oldest_first=False)
        result = results[0]
        group.store(e, result, out_view)
        return carried

    for_row_groups(em, rows, per_partition, group_body)


def _softmax_backward(log: bool) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        nll = fused_nll_loss_backward(op) if log else None
        if nll is not None:  # cross-entropy: the one-hot gradient is never built (loss.py)
            return [emit_cross_entropy_backward(em, nll, result_element_type(op))]
        grad, output = args["grad_output"], args["output"]
        return [emit_softmax_backward(em, grad, output, int(args["dim"]), log, result_element_type(op))]

    return lower


def _softmax(log: bool) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        return [emit_softmax(em, args["self"], int(args["dim"]), log, result_element_type(op))]

    return lower


def legal(op: Operation) -> str | None:
    """A softmax and its backward lower along any dimension of their input."""
    operand = "output" if op.name.endswith("_backward_data") else "self"
    return dims_out_of_range(op, operand=operand)


SOFTMAX_LOWERINGS: dict[str, Lowering] = {
    "torch.aten._softmax": _softmax(log=False),
    "torch.aten._log_softmax": _softmax(log=True),
    "torch.aten._softmax_backward_data": _softmax_backward(log=False),
    "torch.aten._log_softmax_backward_data": _softmax_backward(log=True),
}
