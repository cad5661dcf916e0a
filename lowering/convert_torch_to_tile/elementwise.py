"""Elementwise lowerings: one loop nest over the broadcast output, one tile computation per iteration.

The output and every (broadcast) operand are re-viewed in one canonical iteration space: dimensions that are
contiguous in all of them are merged, the second-to-last dimension becomes the partition axis (tiles of 128),
the last the free axis (tiles of 2048), and any leading dimensions become loops. A 1-d space is split into
[P, n / P] when n has a divisor P <= 128 so that all lanes work. Broadcast operands keep stride 0 in their
views, so broadcasting never copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    element_type_of,
    layout_of,
    load,
    result_element_type,
    result_shape,
    store,
    view,
)
from neuron_mlir.lowering.emitter import Emitter, Index
from neuron_mlir.lowering.layout import Layout, collapse
from neuron_mlir.runtime.hardware import Memory

# compute(emitter, operand tiles, result tile type) -> result tile (SBUF)
TileCompute = Callable[[Emitter, list[SSAValue], TileType], SSAValue]


def _lane_split(extent: int) -> int:
    """The largest divisor of `extent` that fits the partition axis."""
    for candidate in range(min(PARTITION_TILE, extent), 0, -1):
        if extent % candidate == 0:
            return candidate
    return 1


def iteration_space(shape: Sequence[int], layouts: Sequence[Layout]) -> tuple[tuple[int, ...], list[Layout]]:
    """Canonical [loops..., P, F] shape and each layout viewed in it (offsets kept)."""
    dims, strides = collapse(shape, [layout.strides for layout in layouts])
    canonical = [Layout(dims, s, layout.offset) for s, layout in zip(strides, layouts, strict=True)]
    if len(dims) == 0:
        canonical = [Layout((1, 1), (0, 0), layout.offset) for layout in layouts]
        return (1, 1), canonical
    if len(dims) == 1:
        lanes = _lane_split(dims[0])
        canonical = [layout.split_dim(0, lanes) for layout in canonical]
        return canonical[0].shape, canonical
    return dims, canonical


def emit_elementwise(
    em: Emitter,
    out_shape: Sequence[int],
    out_element_type: Attribute,
    operands: Sequence[SSAValue],
    compute: TileCompute,
    out: SSAValue | None = None,
) -> SSAValue:
    """Allocate (or use) `out`, and fill it with `compute` applied tile by tile to the broadcast operands."""
    out_shape = tuple(out_shape)
    if out is None:
        out = alloc(em, out_shape, out_element_type)
    layouts = [layout_of(out)] + [layout_of(value).broadcast_to(out_shape) for value in operands]
    space, canonical = iteration_space(out_shape, layouts)
    views = [view(em, value, layout) for value, layout in zip([out, *operands], canonical, strict=True)]
    out_view, operand_views = views[0], views[1:]
    leading = space[:-2]
    partitions, free = space[-2], space[-1]

    def tile_body(inner: Emitter, loop_indices: list[Index]) -> None:
        def partition_body(em_p: Emitter, p0: Index, p_size: int) -> None:
            def free_body(em_f: Emitter, f0: Index, f_size: int) -> None:
                indices = [*loop_indices, p0, f0]
                tiles = [load(em_f, v, indices, (p_size, f_size)) for v in operand_views]
                result_type = TileType((p_size, f_size), out_element_type, Memory.SBUF)
                store(em_f, compute(em_f, tiles, result_type), out_view, indices)

            em_p.for_tiles(free, FREE_TILE, free_body)

        inner.for_tiles(partitions, PARTITION_TILE, partition_body)

    _nest(em, list(leading), [], tile_body)
    return out


def _nest(em: Emitter, extents: list[int], indices: list[Index], body: Callable[[Emitter, list[Index]], None]) -> None:
    if not extents:
        body(em, indices)
        return
    em.for_each(extents[0], lambda inner, i: _nest(inner, extents[1:], [*indices, i], body))


def copy_to(em: Emitter, source: SSAValue, out: SSAValue | None = None) -> SSAValue:
    """A contiguous copy of `source` (or a copy into `out`)."""
    shape = layout_of(source).shape
    return emit_elementwise(em, shape, element_type_of(source), [source], lambda e, tiles, t: tiles[0], out)


# ---- ATen elementwise ops ----------------------------------------------------------------------------------


def _sbuf(result: TileType, element_type: Attribute | None = None) -> TileType:
    return TileType(result.get_shape(), element_type or result.element_type, Memory.SBUF)


def _binary(em: Emitter, alu_op: str, lhs: SSAValue, rhs: SSAValue, result: TileType) -> SSAValue:
    return em.insert(tile.BinaryOp(lhs, rhs, alu_op, result)).result


def _scalar(em: Emitter, alu_op: str, value: SSAValue, scalar: float, result: TileType, reverse=False) -> SSAValue:
    return em.insert(tile.BinaryScalarOp(value, alu_op, result, scalar=float(scalar), reverse=reverse)).result


def _unary(em: Emitter, fn: str, value: SSAValue, result: TileType, scale: float = 1.0) -> SSAValue:
    return em.insert(tile.UnaryOp(value, fn, result, scale=scale)).result


def _fill(em: Emitter, value: float, result: TileType) -> SSAValue:
    return em.insert(tile.FillOp(float(value), result)).result


def _scaled(em: Emitter, value: SSAValue, alpha: object, like: TileType) -> SSAValue:
    if alpha is None or alpha == 1:
        return value
    return _scalar(em, "multiply", value, float(alpha), _sbuf(like, f32))  # type: ignore[arg-type]


def _elementwise(op: Operation, args: dict[str, Any], em: Emitter, operands: list[str], compute: TileCompute):
    values = [args[name] for name in operands]
    out = emit_elementwise(em, result_shape(op), result_element_type(op), values, compute)
    return [out]


def _tensor_binary(alu_op: str, with_alpha: bool = False) -> Lowering:
    def lower(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        def compute(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
            rhs = _scaled(e, tiles[1], args.get("alpha"), result) if with_alpha else tiles[1]
            return _binary(e, alu_op, tiles[0], rhs, result)

        return _elementwise(op, args, em, ["self", "other"], compute)

    return lower


def _scalar_binary(alu_op: str, with_alpha: bool = False, reverse: bool = False) -> Lowering:
    def lower(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        scalar = float(args["other"])
        if with_alpha and args.get("alpha") not in (None, 1):
            scalar *= float(args["alpha"])

        def compute(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
            return _scalar(e, alu_op, tiles[0], scalar, result, reverse)

        return _elementwise(op, args, em, ["self"], compute)

    return lower


def _div_tensor(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    # VectorE has no divide: multiply by the ScalarE reciprocal
    def compute(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
        inverse = _unary(e, "reciprocal", tiles[1], _sbuf(result, f32))
        return _binary(e, "multiply", tiles[0], inverse, result)

    return _elementwise(op, args, em, ["self", "other"], compute)


def _div_scalar(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    inverse = 1.0 / float(args["other"])

    def compute(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return _scalar(e, "multiply", tiles[0], inverse, result)

    return _elementwise(op, args, em, ["self"], compute)


def _activation(fn: str, scale: float = 1.0) -> Lowering:
    def lower(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        return _elementwise(op, args, em, ["self"], lambda e, tiles, result: _unary(e, fn, tiles[0], result, scale))

    return lower


def _neg(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return _elementwise(op, args, em, ["self"], lambda e, t, result: _scalar(e, "multiply", t[0], -1.0, result))


def _where(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return e.insert(tile.SelectOp(tiles[0], tiles[1], tiles[2], result)).result

    return _elementwise(op, args, em, ["condition", "self", "other"], compute)


def _threshold_backward(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    threshold = float(args["threshold"])

    def compute(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
        grad, value = tiles
        keep = _scalar(e, "is_gt", value, threshold, _sbuf(result, f32))
        zeros = _fill(e, 0.0, _sbuf(result, f32))
        return e.insert(tile.SelectOp(keep, grad, zeros, result)).result

    return _elementwise(op, args, em, ["grad_output", "self"], compute)


def _constant_fill(value_arg: str, operands: Sequence[str] = ()) -> Lowering:
    def lower(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        value = float(args[value_arg])
        out = emit_elementwise(em, result_shape(op), result_element_type(op), [], lambda e, t, r: _fill(e, value, r))
        return [out]

    return lower


def _to_copy(em: Emitter, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    def compute(e: Emitter, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return e.insert(tile.CopyOp(tiles[0], result)).result

    return _elementwise(op, args, em, ["self"], compute)


ELEMENTWISE_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.add.Tensor": _tensor_binary("add", with_alpha=True),
    "torch.aten.sub.Tensor": _tensor_binary("subtract", with_alpha=True),
    "torch.aten.mul.Tensor": _tensor_binary("multiply"),
    "torch.aten.div.Tensor": _div_tensor,
    "torch.aten.maximum": _tensor_binary("max"),
    "torch.aten.minimum": _tensor_binary("min"),
    "torch.aten.eq.Tensor": _tensor_binary("is_equal"),
    "torch.aten.ne.Tensor": _tensor_binary("not_equal"),
    "torch.aten.lt.Tensor": _tensor_binary("is_lt"),
    "torch.aten.le.Tensor": _tensor_binary("is_le"),
    "torch.aten.gt.Tensor": _tensor_binary("is_gt"),
    "torch.aten.ge.Tensor": _tensor_binary("is_ge"),
    "torch.aten.add.Scalar": _scalar_binary("add", with_alpha=True),
    "torch.aten.sub.Scalar": _scalar_binary("subtract", with_alpha=True),
    "torch.aten.mul.Scalar": _scalar_binary("multiply"),
    "torch.aten.div.Scalar": _div_scalar,
    "torch.aten.eq.Scalar": _scalar_binary("is_equal"),
    "torch.aten.ne.Scalar": _scalar_binary("not_equal"),
    "torch.aten.lt.Scalar": _scalar_binary("is_lt"),
    "torch.aten.le.Scalar": _scalar_binary("is_le"),
    "torch.aten.gt.Scalar": _scalar_binary("is_gt"),
    "torch.aten.ge.Scalar": _scalar_binary("is_ge"),
    "torch.aten.relu": _activation("relu"),
    "torch.aten.exp": _activation("exp"),
    "torch.aten.log": _activation("log"),
    "torch.aten.sqrt": _activation("sqrt"),
    "torch.aten.rsqrt": _activation("rsqrt"),
    "torch.aten.reciprocal": _activation("reciprocal"),
    "torch.aten.sigmoid": _activation("sigmoid"),
    "torch.aten.tanh": _activation("tanh"),
    "torch.aten.abs": _activation("abs"),
    "torch.aten.sin": _activation("sin"),
    "torch.aten.neg": _neg,
    "torch.aten.where.self": _where,
    "torch.aten.threshold_backward": _threshold_backward,
    "torch.aten.scalar_tensor": _constant_fill("s"),
    "torch.aten.full": _constant_fill("fill_value"),
    "torch.aten.full_like": _constant_fill("fill_value"),
    "torch.aten.fill.Scalar": _constant_fill("value"),
    "torch.aten._to_copy": _to_copy,
}
