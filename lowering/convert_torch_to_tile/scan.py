"""Scans (`cumsum`) on TensorE: a matmul against a triangular matrix of ones, chunk by chunk with a carry.

The scanned dimension goes on the partition axis (the DMA reads it there through a strided view) and the other
dimensions on the free axis (at most one PSUM bank, 512, per matmul) or in loops. For a chunk `x` of L <= 128
rows:

    out[m, n]  = sum_k T[k, m] x[k, n]   with T[k, m] = (k <= m)   one nc_matmul (T built once by GpSimdE iota)
    out[m, n] += carry[n]                 ones[1, L]^T @ carry: a second matmul accumulating in the same PSUM
    carry[n]  += sum_k x[k, n]            ones[L, 1]^T @ x, added on VectorE

so the running total of earlier chunks reaches every row without moving data across partitions. Products are
exact (one operand is 0 or 1) and sums are fp32 in PSUM: integer scans are exact while the totals stay below
2^24.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    alloc,
    layout_of,
    load,
    result_element_type,
    store,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import nest
from neuron_mlir.lowering.convert_torch_to_tile.matmul import matmul_limits
from neuron_mlir.lowering.emitter import Emitter, Index
from neuron_mlir.lowering.layout import Layout, collapse, normalize_dim
from neuron_mlir.runtime.hardware import Memory


def _sbuf(shape: tuple[int, ...]) -> TileType:
    return TileType(shape, f32, Memory.SBUF)


def _triangle(em: Emitter, size: int) -> SSAValue:
    """[size, size] fp32 with T[k, m] = 1 where k <= m: iota m - k, then m - k >= 0."""
    difference = em.insert(tile.IotaOp(_sbuf((size, size)), [1], channel_multiplier=-1)).result
    return em.insert(tile.BinaryScalarOp(difference, "is_ge", _sbuf((size, size)), scalar=0.0)).result


def _ones(em: Emitter, shape: tuple[int, int]) -> SSAValue:
    return em.insert(tile.FillOp(1.0, _sbuf(shape))).result


def scan_views(em: Emitter, values: list[SSAValue], dim: int) -> tuple[list[SSAValue], tuple[int, ...]]:
    """Same-shaped tensors viewed as [loops..., L, N]: the scanned dim second to last, the other dims merged
    (where contiguous in all of them) into loops and the free axis N."""
    layouts = [layout_of(v) for v in values]
    layouts = [Layout((1,), (0,), lay.offset) if lay.rank == 0 else lay for lay in layouts]
    rank = layouts[0].rank
    dim = normalize_dim(dim, rank)
    others = [d for d in range(rank) if d != dim]
    other_dims, other_strides = collapse(
        tuple(layouts[0].shape[d] for d in others), [tuple(lay.strides[d] for d in others) for lay in layouts]
    )
    if not other_dims:
        other_dims, other_strides = (1,), [(0,) for _ in layouts]
    shape = (*other_dims[:-1], layouts[0].shape[dim], other_dims[-1])
    views = [
        view(em, value, Layout(shape, (*strides[:-1], lay.strides[dim], strides[-1]), lay.offset))
        for value, lay, strides in zip(values, layouts, other_strides, strict=True)
    ]
    return views, shape


def _cumsum(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    source = args["self"]
    out_type = result_element_type(op)
    out = alloc(em, layout_of(source).shape, out_type)
    (source_view, out_view), shape = scan_views(em, [source, out], int(args["dim"]))
    *loops, length, width = shape
    max_k, _, max_n = matmul_limits(em)
    chunk = min(length, max_k)
    triangles = {size: _triangle(em, size) for size in {chunk, length % chunk} if size}

    def body(e: Emitter, indices: list[Index]) -> None:
        def columns(e2: Emitter, n0: Index, n: int) -> None:
            ones_row = {size: _ones(e2, (1, size)) for size in triangles}
            ones_column = {size: _ones(e2, (size, 1)) for size in triangles}

            def step(e3: Emitter, l0: Index, size: int, carry: SSAValue | None) -> SSAValue:
                x = load(e3, source_view, [*indices, l0, n0], (size, n), f32)
                psum = TileType((size, n), f32, Memory.PSUM)
                product = e3.insert(tile.MatmulOp(triangles[size], x, psum)).result
                if carry is not None:
                    product = e3.insert(tile.MatmulOp(ones_row[size], carry, psum, product)).result
                store(e3, to_sbuf(e3, product, out_type), out_view, [*indices, l0, n0])
                total = e3.insert(tile.MatmulOp(ones_column[size], x, TileType((1, n), f32, Memory.PSUM))).result
                if carry is None:
                    return to_sbuf(e3, total, f32)
                return e3.insert(tile.BinaryOp(carry, total, "add", _sbuf((1, n)))).result

            e2.accumulate_tiles(
                length,
                chunk,
                lambda e3, l0, size: step(e3, l0, size, None),
                lambda e3, l0, size, carry: step(e3, l0, size, carry),
            )

        e.for_tiles(width, max_n, columns)

    nest(em, list(loops), [], body)
    return [out]


SCAN_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.cumsum": _cumsum,
}
