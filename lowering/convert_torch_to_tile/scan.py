"""Scans (`cumsum`) on TensorE: a matmul against a triangular matrix of ones, chunk by chunk with a carry.

The scanned dimension goes on the partition axis (the DMA reads it there through a strided view) and the other
dimensions on the free axis (at most one PSUM bank, 512, per matmul) or in loops. For a chunk `x` of L <= 128
rows:

    out[m, n]  = sum_k T[k, m] x[k, n]   with T[k, m] = (k <= m)   one nc_matmul (T built once by GpSimdE iota)
    out[m, n] += carry[n]                 ones[1, L]^T @ carry: a second matmul accumulating in the same PSUM
    carry[n]  += sum_k x[k, n]            ones[L, 1]^T @ x, added on VectorE

so the running total of earlier chunks reaches every row without moving data across partitions. Products are
exact (one operand is 0 or 1) and sums are fp32 in PSUM. A float input is scanned four times, its finite part
and 0/1 flags of NaN, +inf and -inf (in the matmul every element also meets the zeros of T, and 0 * inf = NaN
must not reach the rows before it), and one elementwise pass combines them: the flags' running counts decide
where the sum is NaN or infinite, as in a sequential sum.

An integer result (torch's cumsum of integers and bools is int64) must be exact, and PSUM sums in fp32 (exact
only up to 2^24), so integers scan on GpSimdE's integer lanes instead (`emit_integer_scan`): the scanned
dimension goes on the free axis, the other dimensions on partitions, each chunk (`INTEGER_SCAN_TILE`) is
scanned by `tile.scan` in the result type (in int32 for inputs of up to 16 bits, which cannot overflow within a
chunk, then widened), and a per-row carry column (the exact sum of the earlier chunks) is added to it. Reading
a scanned dimension that is not contiguous goes through an element-strided DMA, slower than the float path's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import IntegerType, f32
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    PARTITION_TILE,
    Lowering,
    alloc,
    dims_out_of_range,
    element_type_of,
    layout_of,
    load,
    result_element_type,
    row_layouts,
    sbuf_tile,
    store,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise
from neuron_mlir.lowering.convert_torch_to_tile.matmul import matmul_limits
from neuron_mlir.lowering.convert_torch_to_tile.reduction import chunk_integer_type, is_exact_integer, load_exact
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory

# Free-axis chunk of an integer scan: a chunk lives as its input, its int64 widening, the scan, the scan's scratch
# buffer and the carried result at once (about 36 KiB per partition at 1024 int64s), and the loop body is
# double-buffered; each scan step costs GpSimdE's startup plus one pass, so longer chunks gain little.
INTEGER_SCAN_TILE = 1024


def _triangle(em: LoopNestBuilder, size: int) -> SSAValue:
    """[size, size] fp32 with T[k, m] = 1 where k <= m: iota m - k, then m - k >= 0."""
    difference = em.insert(tile.IotaOp(sbuf_tile((size, size)), [1], channel_multiplier=-1)).result
    return em.insert(tile.BinaryScalarOp(difference, "is_ge", sbuf_tile((size, size)), scalar=0.0)).result


def _ones(em: LoopNestBuilder, shape: tuple[int, int]) -> SSAValue:
    return em.insert(tile.FillOp(1.0, sbuf_tile(shape))).result


def scan_views(em: LoopNestBuilder, values: list[SSAValue], dim: int) -> tuple[list[SSAValue], tuple[int, ...]]:
    """Same-shaped tensors viewed as [loops..., L, N]: the scanned dim second to last, the other dims merged
    (where contiguous in all of them) into loops and the free axis N."""
    rows, row_dims = row_layouts(values, dim)
    shape = (*row_dims[:-1], rows[0].shape[-1], row_dims[-1])
    views = [
        view(em, value, Layout(shape, (*row.strides[:-2], row.strides[-1], row.strides[-2]), row.offset))
        for value, row in zip(values, rows, strict=True)
    ]
    return views, shape


def _part(e: LoopNestBuilder, x: SSAValue, kind: str) -> SSAValue:
    """What a float scan sums for `kind`: the finite values (others as 0), or 0/1 flags of NaN, +inf, -inf."""
    x_type = x.type
    assert isinstance(x_type, TileType)

    def scalar(value: SSAValue, op: str, number: float) -> SSAValue:
        return e.insert(tile.BinaryScalarOp(value, op, x_type, scalar=number)).result

    if kind == "nan":
        return e.insert(tile.BinaryOp(x, x, "not_equal", x_type)).result
    if kind in ("inf", "-inf"):
        return scalar(x, "is_equal", math.inf if kind == "inf" else -math.inf)
    difference = e.insert(tile.BinaryOp(x, x, "subtract", x_type)).result  # 0 exactly where x is finite
    zeros = e.insert(tile.FillOp(0.0, x_type)).result
    return e.insert(tile.SelectOp(scalar(difference, "is_equal", 0.0), x, zeros, x_type)).result


def _scan_in_chunks(
    em: LoopNestBuilder,
    length: int,
    chunk: int,
    scan_chunk: Callable[[LoopNestBuilder, Index, int, SSAValue | None], tuple[SSAValue, SSAValue]],
    add_total: Callable[[LoopNestBuilder, SSAValue, int, SSAValue | None], SSAValue],
) -> None:
    """Scan `length` elements in chunks of `chunk`, carrying the total of the chunks before each one.

    `scan_chunk(f0, size, carry)` writes a chunk's running sums plus the carry (None for the first chunk) and
    returns (its result, its input); `add_total(input, size, carry)` is the carry for the next chunk. The last
    chunk computes no carry: none is needed, and on TensorE a matmul whose group no engine reads would hold its
    PSUM bank with nothing to order the next group's writes after it."""

    def step(e: LoopNestBuilder, f0: Index, size: int, carry: SSAValue | None) -> SSAValue:
        result, x = scan_chunk(e, f0, size, carry)
        if isinstance(f0, int) and f0 + size == length:
            return result if carry is None else carry
        return add_total(e, x, size, carry)

    em.accumulate_tiles(
        length,
        chunk,
        lambda e, f0, size: step(e, f0, size, None),
        lambda e, f0, size, carry: step(e, f0, size, carry),
    )


def emit_scan(
    em: LoopNestBuilder,
    source: SSAValue,
    out: SSAValue,
    dim: int,
    part: Callable[[LoopNestBuilder, SSAValue], SSAValue] | None,
) -> None:
    """Write the running sums of `source` (each chunk mapped by `part`) along `dim` into `out`."""
    (source_view, out_view), shape = scan_views(em, [source, out], dim)
    out_type = element_type_of(out)
    *loops, length, width = shape
    max_k, _, max_n = matmul_limits(em)
    chunk = min(length, max_k)
    triangles = {size: _triangle(em, size) for size in {chunk, length % chunk} if size}

    def body(e: LoopNestBuilder, indices: list[Index]) -> None:
        def columns(e2: LoopNestBuilder, n0: Index, n: int) -> None:
            ones_row = {size: _ones(e2, (1, size)) for size in triangles}
            ones_column = {size: _ones(e2, (size, 1)) for size in triangles}

            def scan_chunk(
                e3: LoopNestBuilder, l0: Index, size: int, carry: SSAValue | None
            ) -> tuple[SSAValue, SSAValue]:
                x = load(e3, source_view, [*indices, l0, n0], (size, n), f32)
                if part is not None:
                    x = part(e3, x)
                psum = TileType((size, n), f32, Memory.PSUM)
                product = e3.insert(tile.MatmulOp(triangles[size], x, psum)).result
                if carry is not None:
                    product = e3.insert(tile.MatmulOp(ones_row[size], carry, psum, product)).result
                result = to_sbuf(e3, product, out_type)
                store(e3, result, out_view, [*indices, l0, n0])
                return result, x

            def add_total(e3: LoopNestBuilder, x: SSAValue, size: int, carry: SSAValue | None) -> SSAValue:
                total = e3.insert(tile.MatmulOp(ones_column[size], x, TileType((1, n), f32, Memory.PSUM))).result
                if carry is None:
                    return to_sbuf(e3, total, f32)
                return e3.insert(tile.BinaryOp(carry, total, "add", sbuf_tile((1, n)))).result

            _scan_in_chunks(e2, length, chunk, scan_chunk, add_total)

        e.for_tiles(width, max_n, columns)

    em.for_each_index(loops, body)


def emit_integer_scan(em: LoopNestBuilder, source: SSAValue, out: SSAValue, dim: int) -> None:
    """Write the exact running sums of `source` along `dim` into the integer tensor `out`, wrapping to its
    type: rows (the other dims) on partitions, the scanned dim on the free axis in chunks, each chunk
    scanned on GpSimdE (`tile.scan`) plus the carry of the chunks before it."""
    (source_view, out_view), shape = scan_views(em, [source, out], dim)
    *loops, length, width = shape
    # [loops..., L, N] -> [loops..., N, L]: the scanned dim is read along the free axis through the DMA pattern
    order = [*range(len(loops)), len(loops) + 1, len(loops)]
    source_rows = view(em, source_view, layout_of(source_view).permute(order))
    out_rows = view(em, out_view, layout_of(out_view).permute(order))
    out_type = element_type_of(out)
    # a chunk of integers of up to 16 bits scans in int32 (no overflow within a chunk), then widens
    scan_type = chunk_integer_type(element_type_of(source), out_type, "add")

    def body(e: LoopNestBuilder, indices: list[Index]) -> None:
        def rows(e2: LoopNestBuilder, p0: Index, p: int) -> None:
            column = TileType((p, 1), out_type, Memory.SBUF)

            def widened(e3: LoopNestBuilder, value: SSAValue, shape: tuple[int, int]) -> SSAValue:
                if scan_type == out_type:
                    return value
                return e3.insert(tile.CopyOp(value, TileType(shape, out_type, Memory.SBUF))).result

            def scan_chunk(
                e3: LoopNestBuilder, f0: Index, size: int, carry: SSAValue | None
            ) -> tuple[SSAValue, SSAValue]:
                x = load_exact(e3, source_rows, [*indices, p0, f0], (p, size), scan_type)
                scanned = widened(e3, e3.insert(tile.ScanOp(x, "add", x.type)).result, (p, size))  # type: ignore[arg-type]
                if carry is not None:
                    scanned = e3.insert(tile.BinaryScalarOp(scanned, "add", scanned.type, column=carry)).result  # type: ignore[arg-type]
                store(e3, scanned, out_rows, [*indices, p0, f0])
                return scanned, x

            def add_total(e3: LoopNestBuilder, x: SSAValue, size: int, carry: SSAValue | None) -> SSAValue:
                reduced = e3.insert(tile.ReduceOp(x, "add", TileType((p, 1), scan_type, Memory.SBUF))).result
                total = widened(e3, reduced, (p, 1))
                if carry is None:
                    return total
                return e3.insert(tile.BinaryOp(carry, total, "add", column)).result

            _scan_in_chunks(e2, length, INTEGER_SCAN_TILE, scan_chunk, add_total)

        e.for_tiles(width, PARTITION_TILE, rows)

    em.for_each_index(loops, body)


def _combine(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
    """The running sum from the scanned parts: NaN after a NaN or after infinities of both signs, +-inf after
    infinities of one sign, else the finite sum."""
    finite, nans, positive, negative = tiles
    inner = TileType(result.get_shape(), f32, Memory.SBUF)

    def seen(count: SSAValue) -> SSAValue:
        return e.insert(tile.BinaryScalarOp(count, "is_gt", inner, scalar=0.5)).result

    def constant(value: float) -> SSAValue:
        return e.insert(tile.FillOp(value, inner)).result

    any_positive, any_negative = seen(positive), seen(negative)
    both = e.insert(tile.BinaryOp(any_positive, any_negative, "logical_and", inner)).result
    invalid = e.insert(tile.BinaryOp(seen(nans), both, "logical_or", inner)).result
    value = e.insert(tile.SelectOp(any_negative, constant(-math.inf), finite, inner)).result
    value = e.insert(tile.SelectOp(any_positive, constant(math.inf), value, inner)).result
    return e.insert(tile.SelectOp(invalid, constant(math.nan), value, result)).result


def _cumsum(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    source, dim = args["self"], int(args["dim"])
    shape = layout_of(source).shape
    out = alloc(em, shape, result_element_type(op))
    if is_exact_integer(result_element_type(op)):
        emit_integer_scan(em, source, out, dim)
        return [out]
    if isinstance(element_type_of(source), IntegerType):
        emit_scan(em, source, out, dim, None)  # integers scanned into floats: finite, summed in fp32
        return [out]
    # In the matmul every element also meets the zeros of T, and 0 * inf = NaN must not reach the rows before
    # it: scan the finite part and counts of NaN, +inf and -inf apart, then combine.
    parts = []
    for kind in ("finite", "nan", "inf", "-inf"):
        scanned = alloc(em, shape, f32)
        emit_scan(em, source, scanned, dim, functools.partial(_part, kind=kind))
        parts.append(scanned)
    emit_elementwise(em, shape, result_element_type(op), parts, _combine, out)
    return [out]


def legal(op: Operation) -> str | None:
    """A scan lowers along any dimension of its input."""
    return dims_out_of_range(op)


SCAN_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.cumsum": _cumsum,
}
