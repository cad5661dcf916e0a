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
from neuron_mlir.ir.dialects.neuron import target_of
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
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
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import copy_to
from neuron_mlir.lowering.emitter import Emitter, Index
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.runtime.hardware import DEFAULT_TARGET, Memory, get_target

# epilogue(emitter, psum tile [m, n], output indices (batch..., m0, n0), result type) -> SBUF tile
Epilogue = Callable[[Emitter, SSAValue, list[Index], TileType], SSAValue]


def _evacuate(em: Emitter, product: SSAValue, indices: list[Index], result_type: TileType) -> SSAValue:
    return to_sbuf(em, product, result_type.element_type)


def matmul_limits(em: Emitter) -> tuple[int, int, int]:
    """(K, M, N) tile limits of the target's TensorE: contraction, stationary free, moving free (one PSUM bank)."""
    anchor = em.anchor if em.anchor is not None else em.block.parent_op()
    target = target_of(anchor) if anchor is not None else get_target(DEFAULT_TARGET)
    return target.matmul_max_k, target.matmul_max_stationary_free, target.matmul_max_moving_free


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
    k_tile, m_tile, n_limit = matmul_limits(em)
    n_tile = moving_tile(rhs_layout.strides, rhs_layout.shape, m_tile, n_limit)
    finish = epilogue or _evacuate

    def output_tile(inner: Emitter, batch: list[Index], m0: Index, m_size: int, n0: Index, n_size: int) -> None:
        def first(e: Emitter, k0: Index, k_size: int) -> SSAValue:
            return _product(e, lhs, rhs, batch, m0, m_size, n0, n_size, k0, k_size, None)

        def step(e: Emitter, k0: Index, k_size: int, acc: SSAValue) -> SSAValue:
            return _product(e, lhs, rhs, batch, m0, m_size, n0, n_size, k0, k_size, acc)

        if k == 0:  # an empty contraction: the product is zero (and there is no operand tile to load)
            product = inner.insert(tile.FillOp(0.0, TileType((m_size, n_size), f32, Memory.SBUF))).result
        else:
            product = inner.accumulate_tiles(k, k_tile, first, step)
        result_type = TileType((m_size, n_size), out_element_type, Memory.SBUF)
        store(inner, finish(inner, product, [*batch, m0, n0], result_type), out, [*batch, m0, n0])

    def batches(inner: Emitter, dims: tuple[int, ...], batch: list[Index]) -> None:
        if dims:
            inner.for_each(dims[0], lambda e, b: batches(e, dims[1:], [*batch, b]))
            return
        inner.for_tiles(
            m,
            m_tile,
            lambda em_m, m0, m_size: em_m.for_tiles(
                n, n_tile, lambda em_n, n0, n_size: output_tile(em_n, batch, m0, m_size, n0, n_size)
            ),
        )

    batches(em, batch_shape, [])
    return out


def moving_tile(
    rhs_strides: tuple[int, ...],
    rhs_shape: tuple[int, ...],
    transpose_limit: int = MATMUL_M_TILE,
    bank_limit: int = MATMUL_N_TILE,
) -> int:
    """N per matmul: one PSUM bank (512 fp32), or 128 when each moving tile is transposed on TensorE first."""
    rank = len(rhs_shape)
    return transpose_limit if _k_contiguous(rhs_strides, rhs_shape, rank - 2, rank - 1) else bank_limit


def _k_contiguous(layout_strides: tuple[int, ...], shape: tuple[int, ...], k_dim: int, other_dim: int) -> bool:
    """Whether K is the contiguous axis (and the other is not): such tiles load row-wise and transpose on TensorE."""
    return layout_strides[k_dim] == 1 and shape[other_dim] > 1 and layout_strides[other_dim] != 1


def _k_on_partitions(
    em: Emitter,
    tensor: SSAValue,
    batch: list[Index],
    k0: Index,
    k_size: int,
    other0: Index,
    other_size: int,
    k_dim: int,
    other_dim: int,
) -> SSAValue:
    """The [K, other] SBUF tile of `tensor` with K on partitions, loaded the cheapest way its layout allows.

    When K is the tensor's contiguous axis, a DMA with K on partitions would move one element per descriptor;
    instead the tile is loaded row-wise ([other, K], contiguous rows) and transposed on TensorE, then copied
    out of PSUM.
    """
    layout = layout_of(tensor)
    indices: list[Index] = [*batch, 0, 0]
    indices[k_dim], indices[other_dim] = k0, other0
    if _k_contiguous(layout.strides, layout.shape, k_dim, other_dim):
        rows = load(em, tensor, indices, (other_size, k_size), dims=(other_dim, k_dim))
        transposed = em.insert(tile.TransposeOp(rows)).result
        return to_sbuf(em, transposed)
    return load(em, tensor, indices, (k_size, other_size), dims=(k_dim, other_dim))


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
    # stationary: A[m0:m0+m, k0:k0+k] with K on the partition axis; moving: B[k0:k0+k, n0:n0+n], likewise
    stationary = _k_on_partitions(em, lhs, batch, k0, k_size, m0, m_size, rank - 1, rank - 2)
    moving = _k_on_partitions(em, rhs, batch, k0, k_size, n0, n_size, rank - 2, rank - 1)
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
    return [_scaled_product_plus(em, op, args["self"], args["mat1"], args["mat2"], args)]


def _addbmm(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`beta * self + alpha * sum_b batch1[b] @ batch2[b]`: one matmul contracting over (batch, K) in PSUM.

    batch1 [B, M, K] is viewed as [M, B * K] (a copy when its strides cannot merge B and K), batch2 as [B * K, N].
    """
    lhs, rhs = layout_of(args["batch1"]), layout_of(args["batch2"])
    batches, m, k = lhs.shape
    n = rhs.shape[-1]
    merged_lhs = _merged(em, args["batch1"], lhs.permute([1, 0, 2]), (m, batches * k))
    merged_rhs = _merged(em, args["batch2"], rhs, (batches * k, n))
    return [_scaled_product_plus(em, op, args["self"], merged_lhs, merged_rhs, args)]


def _addmv(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`beta * self + alpha * (mat @ vec)` as an [M, K] @ [K, 1] matmul."""
    vec = layout_of(args["vec"])
    column = view(em, args["vec"], Layout((vec.shape[0], 1), (vec.strides[0], 0), vec.offset))
    bias = layout_of(args["self"])
    bias_column = view(em, args["self"], bias.expand((layout_of(args["mat"]).shape[0],)).unsqueeze(1))
    out = _scaled_product_plus(em, op, bias_column, args["mat"], column, args, (layout_of(args["mat"]).shape[0], 1))
    return [view(em, out, layout_of(out).reshape(result_shape(op)))]  # type: ignore[arg-type]


def _trilinear(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`sum over sumdim of i1' * i2' * i3'`, each input unsqueezed at its `expand` dims (nn.functional.bilinear).

    The broadcast product is formed elementwise (VectorE) and reduced over `sumdim`: exact to the definition; it
    materialises the full product, which suits bilinear layers' small feature sizes.
    """
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise
    from neuron_mlir.lowering.convert_torch_to_tile.reduction import emit_reduce

    inputs = []
    for name, expand in (("i1", "expand1"), ("i2", "expand2"), ("i3", "expand3")):
        layout = layout_of(args[name])
        for dim in sorted(args[expand]):
            layout = layout.unsqueeze(dim)
        inputs.append((args[name], layout))
    rank = inputs[0][1].rank
    shape = tuple(max(layout.shape[d] for _, layout in inputs) for d in range(rank))
    views = [view(em, value, layout.expand(shape)) for value, layout in inputs]

    def product(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
        work = TileType(result.get_shape(), f32, Memory.SBUF)
        first = e.insert(tile.BinaryOp(tiles[0], tiles[1], "multiply", work)).result
        return e.insert(tile.BinaryOp(first, tiles[2], "multiply", work)).result

    products = emit_elementwise(em, shape, f32, views, product)
    sumdim = sorted(args["sumdim"])
    if not sumdim:
        return [copy_to(em, products) if result_element_type(op) == f32 else _cast_copy(em, products, op)]
    return [emit_reduce(em, products, sumdim, False, "add", result_element_type(op))]


def _cast_copy(em: Emitter, value: SSAValue, op: Operation) -> SSAValue:
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise

    def cast(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return e.insert(tile.CopyOp(tiles[0], result)).result

    return emit_elementwise(em, layout_of(value).shape, result_element_type(op), [value], cast)


def _merged(em: Emitter, value: SSAValue, layout: Layout, shape: tuple[int, ...]) -> SSAValue:
    """`value` seen through `layout`, reshaped to `shape` (copied contiguous first when strides cannot say it)."""
    reshaped = layout.reshape(shape)
    if reshaped is None:
        copy = copy_to(em, view(em, value, layout))
        reshaped = layout_of(copy).reshape(shape)
        assert reshaped is not None
        value = copy
    return view(em, value, reshaped)


def _scaled_product_plus(
    em: Emitter,
    op: Operation,
    bias_value: SSAValue,
    lhs: SSAValue,
    rhs: SSAValue,
    args: dict[str, Any],
    out_shape: tuple[int, ...] | None = None,
) -> SSAValue:
    """`beta * bias + alpha * (lhs @ rhs)` with the bias broadcast to the product's shape."""
    beta, alpha = float(args.get("beta", 1)), float(args.get("alpha", 1))
    out_shape = out_shape or result_shape(op)
    bias = broadcast_view(em, bias_value, out_shape)

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

    return emit_matmul(em, lhs, rhs, result_element_type(op), epilogue)


def _times(em: Emitter, value: SSAValue, factor: float, result_type: TileType) -> SSAValue:
    if factor == 1.0:
        return value
    return em.insert(tile.BinaryScalarOp(value, "multiply", result_type, scalar=factor)).result


MATMUL_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.mm": _mm,
    "torch.aten.bmm": _mm,
    "torch.aten.addmm": _addmm,
    "torch.aten.addbmm": _addbmm,
    "torch.aten.addmv": _addmv,
    "torch.aten._trilinear": _trilinear,
}
