"""Matmul-shaped lowerings: `C[M, N] = A[M, K] @ B[K, N]` on TensorE, K reduced in PSUM.

Each output tile of at most 128 x 512 accumulates over K tiles of 128 in one PSUM bank: the stationary operand
is the [K, M] slice of A (loaded transposed, K on partitions), the moving operand the [K, N] slice of B. An
epilogue turns the PSUM tile into the stored SBUF tile; for `addmm` it adds the (broadcast) bias as it
evacuates PSUM, so the bias costs no extra pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    MATMUL_K_TILE,
    MATMUL_M_TILE,
    MATMUL_N_TILE,
    Lowering,
    alloc,
    layout_of,
    load,
    result_element_type,
    result_shape,
    store,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.emitter import Emitter, Index
from neuron_mlir.runtime.hardware import Memory

# epilogue(emitter, psum tile [m, n], output indices (batch..., m0, n0), result type) -> SBUF tile
Epilogue = Callable[[Emitter, SSAValue, list[Index], TileType], SSAValue]


def _evacuate(em: Emitter, product: SSAValue, indices: list[Index], result_type: TileType) -> SSAValue:
    return to_sbuf(em, product, result_type.element_type)


def emit_matmul(
    em: Emitter,
    lhs: SSAValue,
    rhs: SSAValue,
    out_element_type: Attribute,
    epilogue: Epilogue | None = None,
) -> SSAValue:
    """`lhs @ rhs` for [M, K] @ [K, N], or batched [B, M, K] @ [B, K, N]; any strides."""
    lhs_layout, rhs_layout = layout_of(lhs), layout_of(rhs)
    batch_shape = lhs_layout.shape[:-2]
    m, k = lhs_layout.shape[-2:]
    n = rhs_layout.shape[-1]
    out = alloc(em, (*batch_shape, m, n), out_element_type)
    finish = epilogue or _evacuate

    def output_tile(inner: Emitter, batch: list[Index], m0: Index, m_size: int, n0: Index, n_size: int) -> None:
        def first(e: Emitter, k0: Index, k_size: int) -> SSAValue:
            return _product(e, lhs, rhs, batch, m0, m_size, n0, n_size, k0, k_size, None)

        def step(e: Emitter, k0: Index, k_size: int, acc: SSAValue) -> SSAValue:
            return _product(e, lhs, rhs, batch, m0, m_size, n0, n_size, k0, k_size, acc)

        product = inner.accumulate_tiles(k, MATMUL_K_TILE, first, step)
        result_type = TileType((m_size, n_size), out_element_type, Memory.SBUF)
        store(inner, finish(inner, product, [*batch, m0, n0], result_type), out, [*batch, m0, n0])

    def batches(inner: Emitter, dims: tuple[int, ...], batch: list[Index]) -> None:
        if dims:
            inner.for_each(dims[0], lambda e, b: batches(e, dims[1:], [*batch, b]))
            return
        inner.for_tiles(
            m,
            MATMUL_M_TILE,
            lambda em_m, m0, m_size: em_m.for_tiles(
                n, MATMUL_N_TILE, lambda em_n, n0, n_size: output_tile(em_n, batch, m0, m_size, n0, n_size)
            ),
        )

    batches(em, batch_shape, [])
    return out


def _product(
    em: Emitter,
    lhs: SSAValue,
    rhs: SSAValue,
    batch: list[Index],
    m0: Index,
    m_size: int,
    n0: Index,
    n_size: int,
    k0: Index,
    k_size: int,
    acc: SSAValue | None,
) -> SSAValue:
    rank = len(batch) + 2
    # stationary: A[m0:m0+m, k0:k0+k] loaded transposed, so K is on the partition axis
    stationary = load(em, lhs, [*batch, m0, k0], (k_size, m_size), dims=(rank - 1, rank - 2))
    moving = load(em, rhs, [*batch, k0, n0], (k_size, n_size))
    result_type = TileType((m_size, n_size), f32, Memory.PSUM)
    return em.insert(tile.MatmulOp(stationary, moving, result_type, acc)).result


def broadcast_view(em: Emitter, value: SSAValue, shape: tuple[int, ...]) -> SSAValue:
    """`value` viewed broadcast to `shape` (stride 0 on broadcast dims)."""
    return view(em, value, layout_of(value).broadcast_to(shape))


# ---- ATen ops ------------------------------------------------------------------------------------------------


def _mm(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [emit_matmul(em, args["self"], args["mat2"], result_element_type(op))]


def _addmm(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`beta * self + alpha * (mat1 @ mat2)`: the bias joins as PSUM is evacuated."""
    beta, alpha = float(args.get("beta", 1)), float(args.get("alpha", 1))
    out_shape = result_shape(op)
    bias = broadcast_view(em, args["self"], out_shape)

    def epilogue(e: Emitter, product: SSAValue, indices: list[Index], result_type: TileType) -> SSAValue:
        shape = result_type.get_shape()
        work = TileType(shape, f32, Memory.SBUF)
        bias_tile = load(e, bias, indices, shape)
        if beta == 0.0:
            return to_sbuf(e, _times(e, product, alpha, work), result_type.element_type)
        if beta != 1.0:
            bias_tile = _times(e, bias_tile, beta, work)
        if alpha != 1.0:
            product = _times(e, product, alpha, work)
        return e.insert(tile.BinaryOp(product, bias_tile, "add", result_type)).result

    return [emit_matmul(em, args["mat1"], args["mat2"], result_element_type(op), epilogue)]


def _times(em: Emitter, value: SSAValue, factor: float, result_type: TileType) -> SSAValue:
    if factor == 1.0:
        return value
    return em.insert(tile.BinaryScalarOp(value, "multiply", result_type, scalar=factor)).result


MATMUL_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.mm": _mm,
    "torch.aten.bmm": _mm,
    "torch.aten.addmm": _addmm,
}
