"""grid_sampler_2d/3d: sampling an image at data-dependent coordinates, as PyTorch's CPU kernel defines it.

The coordinates are computed on the engines in a few elementwise passes over the grid ([N, O...]): unnormalise
(align_corners or not), then apply the padding mode (border clips, reflection folds with fmod/floor on GpSimdE).
Each tap of the interpolation (4 for bilinear, 8 for trilinear, 1 for nearest, 16 for bicubic) is then an
element gather of the input at (clamped) integer coordinates through indirect DMA (indexing.py), broadcast over
the channels; a tap outside the image contributes 0 under `zeros` padding (a select, so inf/NaN in the image do
not leak), and the taps are combined with PyTorch's weights in PyTorch's order (corners with x fastest; bicubic:
rows, then columns, with the A = -0.75 cubic convolution coefficients). Nearest rounds half to even like
`nearbyint`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    arguments_of,
    layout_of,
    result_element_type,
    result_shape,
    tensor_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise
from neuron_mlir.lowering.convert_torch_to_tile.indexing import IndexedAccess, IndexTerm, emit_gather
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory

CUBIC_A = -0.75

# fn(emitter, tiles) -> tile, every tile f32 of one shape
TileMath = Callable[[LoopNestBuilder, list[SSAValue]], SSAValue]


class _Math:
    """Shorthands for fp32 tile arithmetic of one shape."""

    def __init__(self, em: LoopNestBuilder, shape: Sequence[int]):
        self.em, self.type = em, TileType(tuple(shape), f32, Memory.SBUF)

    def s(self, value: SSAValue, op: str, scalar: float, reverse: bool = False) -> SSAValue:
        return self.em.insert(tile.BinaryScalarOp(value, op, self.type, scalar=scalar, reverse=reverse)).result

    def b(self, lhs: SSAValue, op: str, rhs: SSAValue) -> SSAValue:
        return self.em.insert(tile.BinaryOp(lhs, rhs, op, self.type)).result

    def fill(self, value: float) -> SSAValue:
        return self.em.insert(tile.FillOp(value, self.type)).result

    def kernel(self, value: SSAValue, kernel: str, other: float) -> SSAValue:
        return self.em.insert(tile.KernelOp(value, kernel, self.type, self.fill(other))).result

    def floor(self, value: SSAValue) -> SSAValue:
        return self.kernel(value, "divide_floor", 1.0)

    def select(self, predicate: SSAValue, on_true: SSAValue, on_false: SSAValue) -> SSAValue:
        return self.em.insert(tile.SelectOp(predicate, on_true, on_false, self.type)).result

    def nearbyint(self, value: SSAValue) -> SSAValue:
        """Round half to even: floor(x + 0.5), one less when x + 0.5 is an odd integer (a tie)."""
        shifted = self.s(value, "add", 0.5)
        rounded = self.floor(shifted)
        tie = self.b(shifted, "is_equal", rounded)
        odd = self.s(self.kernel(rounded, "fmod", 2.0), "not_equal", 0.0)
        return self.b(rounded, "subtract", self.b(tie, "multiply", odd))


def _map(em: LoopNestBuilder, shape: Sequence[int], inputs: Sequence[SSAValue], fn: TileMath) -> SSAValue:
    """A fresh f32 HBM tensor of `shape`: fn over the (broadcast) inputs, tile by tile."""

    def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return fn(e, tiles)

    return emit_elementwise(em, tuple(shape), f32, list(inputs), compute)


def _unnormalize(m: _Math, coord: SSAValue, size: int, align_corners: bool) -> SSAValue:
    if align_corners:
        return m.s(m.s(m.s(coord, "add", 1.0), "multiply", 0.5), "multiply", float(size - 1))
    return m.s(m.s(m.s(m.s(coord, "add", 1.0), "multiply", float(size)), "subtract", 1.0), "multiply", 0.5)


def _reflect(m: _Math, coord: SSAValue, twice_low: int, twice_high: int) -> SSAValue:
    if twice_low == twice_high:
        return m.fill(0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = m.em.insert(tile.UnaryOp(m.s(coord, "subtract", low), "abs", m.type)).result
    extra = m.kernel(distance, "fmod", span)
    flips = m.kernel(distance, "divide_floor", span)
    even = m.s(m.kernel(flips, "fmod", 2.0), "is_equal", 0.0)
    return m.select(even, m.s(extra, "add", low), m.s(m.s(extra, "subtract", span, reverse=True), "add", low))


def _pad_coordinate(m: _Math, coord: SSAValue, size: int, padding: int, align_corners: bool) -> SSAValue:
    """PyTorch's compute_coordinates: border clips into [0, size - 1], reflection folds then clips."""
    if padding == 0:
        return coord
    if padding == 2:
        coord = _reflect(m, coord, 0, 2 * (size - 1)) if align_corners else _reflect(m, coord, -1, 2 * size - 1)
    return m.s(m.s(coord, "max", 0.0), "min", float(size - 1))


def _spread(em: LoopNestBuilder, value: SSAValue, out_shape: Sequence[int]) -> SSAValue:
    """A grid-shaped [N, O...] tensor viewed with the output's shape [N, C, O...] (stride 0 over channels)."""
    layout = layout_of(value)
    return view(em, value, Layout(tuple(out_shape), (layout.strides[0], 0, *layout.strides[1:]), layout.offset))


def _tap(
    em: LoopNestBuilder,
    op_name: str,
    image: SSAValue,
    out_shape: Sequence[int],
    coordinates: Sequence[SSAValue],
    padding: int,
    align_corners: bool,
    bounded: bool,
) -> SSAValue:
    """image[n, c, ..., y, x] at integer-valued coordinates (x, y[, z]) of shape [N, O...], 0 outside the image.

    `bounded`: apply the padding mode to the coordinates first (bicubic's get_value_bounded).
    """
    spatial = layout_of(image).shape[2:]
    sizes = list(reversed(spatial))  # x walks the last dim, y the one before, ...
    grid_shape = (out_shape[0], *out_shape[2:])

    def fixed(size: int) -> TileMath:
        def fn(e: LoopNestBuilder, tiles: list[SSAValue]) -> SSAValue:
            m = _math_like(e, tiles[0])
            value = _pad_coordinate(m, tiles[0], size, padding, align_corners) if bounded else tiles[0]
            return m.s(m.s(value, "max", 0.0), "min", float(size - 1))

        return fn

    def inside(e: LoopNestBuilder, tiles: list[SSAValue]) -> SSAValue:
        m = _math_like(e, tiles[0])
        result: SSAValue | None = None
        for value, size in zip(tiles, sizes, strict=True):
            if bounded:
                value = _pad_coordinate(m, value, size, padding, align_corners)
            for check in (m.s(value, "is_ge", 0.0), m.s(value, "is_le", float(size - 1))):
                result = check if result is None else m.b(result, "multiply", check)
        assert result is not None
        return result

    clamped = [_map(em, grid_shape, [c], fixed(size)) for c, size in zip(coordinates, sizes, strict=True)]
    valid = _map(em, grid_shape, list(coordinates), inside)
    strides = layout_of(image).strides
    rank = len(spatial)
    terms = [
        IndexTerm(_spread(em, clamped[axis], out_shape), strides[2 + rank - 1 - axis], sizes[axis])
        for axis in range(rank)
    ]
    access = IndexedAccess(out_shape, (strides[0], strides[1], *([0] * rank)), terms)
    gathered = emit_gather(em, op_name, image, access, f32)

    def masked(e: LoopNestBuilder, tiles: list[SSAValue]) -> SSAValue:
        m = _math_like(e, tiles[0])
        return m.select(tiles[1], tiles[0], m.fill(0.0))

    return _map(em, out_shape, [gathered, _spread(em, valid, out_shape)], masked)


def _cubic_coefficients(m: _Math, t: SSAValue) -> list[SSAValue]:
    """PyTorch's get_cubic_upsample_coefficients for fraction t."""
    a = CUBIC_A

    def conv1(x: SSAValue) -> SSAValue:  # ((A + 2) * x - (A + 3)) * x * x + 1
        inner = m.s(m.s(x, "multiply", a + 2), "subtract", a + 3)
        return m.s(m.b(m.b(inner, "multiply", x), "multiply", x), "add", 1.0)

    def conv2(x: SSAValue) -> SSAValue:  # ((A * x - 5A) * x + 8A) * x - 4A
        inner = m.s(m.s(x, "multiply", a), "subtract", 5 * a)
        inner = m.s(m.b(inner, "multiply", x), "add", 8 * a)
        return m.s(m.b(inner, "multiply", x), "subtract", 4 * a)

    other = m.s(t, "subtract", 1.0, reverse=True)
    return [conv2(m.s(t, "add", 1.0)), conv1(t), conv1(other), conv2(m.s(other, "add", 1.0))]


def _grid_sampler(rank: int) -> Lowering:
    """grid_sampler_2d / grid_sampler_3d (rank spatial dims; bicubic exists in 2-d only, as in PyTorch)."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        image, grid = args["input"], args["grid"]
        mode, padding = int(args["interpolation_mode"]), int(args["padding_mode"])
        align = bool(args["align_corners"])
        sizes = list(reversed(layout_of(image).shape[2:]))  # x, y[, z]
        out_shape = result_shape(op)
        g = layout_of(grid)
        grid_shape = g.shape[:-1]
        components = [
            view(em, grid, Layout(grid_shape, g.strides[:-1], g.offset + a * g.strides[-1])) for a in range(rank)
        ]

        def source(size: int, pad: bool) -> TileMath:
            def fn(e: LoopNestBuilder, tiles: list[SSAValue]) -> SSAValue:
                m = _math_like(e, tiles[0])
                value = _unnormalize(m, tiles[0], size, align)
                return _pad_coordinate(m, value, size, padding, align) if pad else value

            return fn

        coords = [_map(em, grid_shape, [c], source(size, mode != 2)) for c, size in zip(components, sizes, strict=True)]
        element_type = result_element_type(op)

        if mode == 1:
            rounded = [_map(em, grid_shape, [c], _nearbyint) for c in coords]
            value = _tap(em, op.name, image, out_shape, rounded, padding, align, bounded=False)
            return [_cast(em, value, out_shape, element_type)]

        if mode == 0:
            lows = [_map(em, grid_shape, [c], floor_plus(0.0)) for c in coords]
            highs = [_map(em, grid_shape, [c], floor_plus(1.0)) for c in coords]

            def weight(corner: tuple[int, ...]) -> TileMath:
                # PyTorch: each axis contributes (high - x) toward the low corner, (x - low) toward the high one;
                # the factors multiply x first, then y, then z
                def fn(e: LoopNestBuilder, t: list[SSAValue]) -> SSAValue:
                    m = _math_like(e, t[0])
                    product: SSAValue | None = None
                    for axis in range(rank):
                        x, low, high = t[3 * axis : 3 * axis + 3]
                        factor = m.b(high, "subtract", x) if corner[axis] == 0 else m.b(x, "subtract", low)
                        product = factor if product is None else m.b(product, "multiply", factor)
                    assert product is not None
                    return product

                return fn

            total: SSAValue | None = None
            # corners in PyTorch's order: the last axis (z, then y) outermost, x innermost
            for reversed_corner in itertools.product((0, 1), repeat=rank):
                corner = tuple(reversed(reversed_corner))
                at = [highs[a] if corner[a] else lows[a] for a in range(rank)]
                tap = _tap(em, op.name, image, out_shape, at, padding, align, bounded=False)
                inputs = [v for a in range(rank) for v in (coords[a], lows[a], highs[a])]
                w = _map(em, grid_shape, inputs, weight(corner))
                operands = [tap, _spread(em, w, out_shape)] + ([total] if total is not None else [])

                def accumulate(e: LoopNestBuilder, t: list[SSAValue]) -> SSAValue:
                    m = _math_like(e, t[0])
                    product = m.b(t[0], "multiply", t[1])
                    return product if len(t) == 2 else m.b(t[2], "add", product)

                total = _map(em, out_shape, operands, accumulate)
            assert total is not None
            return [_cast(em, total, out_shape, element_type)]

        # bicubic (2-d): 4 rows of 4 taps around floor(coordinate), interpolated along x, then the rows along y
        ix, iy = coords
        fx, fy = _map(em, grid_shape, [ix], floor_plus(0.0)), _map(em, grid_shape, [iy], floor_plus(0.0))
        tx, ty = _map(em, grid_shape, [ix, fx], _difference), _map(em, grid_shape, [iy, fy], _difference)

        def coefficient(k: int) -> TileMath:
            return lambda e, t: _cubic_coefficients(_math_like(e, t[0]), t[0])[k]

        cx = [_map(em, grid_shape, [tx], coefficient(k)) for k in range(4)]
        cy = [_map(em, grid_shape, [ty], coefficient(k)) for k in range(4)]
        xs = [_map(em, grid_shape, [fx], floor_plus_shift(k - 1.0)) for k in range(4)]
        ys = [_map(em, grid_shape, [fy], floor_plus_shift(k - 1.0)) for k in range(4)]
        rows = []
        for j in range(4):
            taps = [_tap(em, op.name, image, out_shape, [xs[i], ys[j]], padding, align, bounded=True) for i in range(4)]
            rows.append(_weighted_sum(em, out_shape, taps, [_spread(em, w, out_shape) for w in cx]))
        total = _weighted_sum(em, out_shape, rows, [_spread(em, w, out_shape) for w in cy])
        return [_cast(em, total, out_shape, element_type)]

    return lower


def _math_like(em: LoopNestBuilder, value: SSAValue) -> _Math:
    value_type = value.type
    assert isinstance(value_type, TileType)
    return _Math(em, value_type.get_shape())


def floor_plus(delta: float) -> TileMath:
    """floor(x) + delta."""
    return lambda e, t: _math_like(e, t[0]).s(_math_like(e, t[0]).floor(t[0]), "add", delta)


def floor_plus_shift(delta: float) -> TileMath:
    """x + delta for values that are already integers (the taps around floor(x))."""
    return lambda e, t: _math_like(e, t[0]).s(t[0], "add", delta)


def _nearbyint(em: LoopNestBuilder, tiles: list[SSAValue]) -> SSAValue:
    return _math_like(em, tiles[0]).nearbyint(tiles[0])


def _difference(em: LoopNestBuilder, tiles: list[SSAValue]) -> SSAValue:
    return _math_like(em, tiles[0]).b(tiles[0], "subtract", tiles[1])


def _weighted_sum(
    em: LoopNestBuilder, shape: Sequence[int], values: list[SSAValue], weights: list[SSAValue]
) -> SSAValue:
    """v0*w0 + v1*w1 + v2*w2 + v3*w3, summed left to right (PyTorch's cubic_interp1d)."""

    def fn(e: LoopNestBuilder, t: list[SSAValue]) -> SSAValue:
        m = _math_like(e, t[0])
        count = len(t) // 2
        total = m.b(t[0], "multiply", t[count])
        for k in range(1, count):
            total = m.b(total, "add", m.b(t[k], "multiply", t[count + k]))
        return total

    return _map(em, shape, [*values, *weights], fn)


def _cast(em: LoopNestBuilder, value: SSAValue, shape: Sequence[int], element_type: Any) -> SSAValue:
    if element_type == f32:
        return value

    def copy(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return e.insert(tile.CopyOp(tiles[0], result)).result

    return emit_elementwise(em, tuple(shape), element_type, [value], copy)


def legal(op: Operation) -> str | None:
    """Grid sampling of an [N, C, spatial...] input, with PyTorch's interpolation modes (bicubic in 2-d only) and
    its three padding modes."""
    args = arguments_of(op)
    rank = 2 if op.name == "torch.aten.grid_sampler_2d" else 3
    mode, padding = int(args["interpolation_mode"]), int(args["padding_mode"])
    modes = (0, 1, 2) if rank == 2 else (0, 1)
    if len(tensor_shape(args["input"])) != rank + 2 or mode not in modes or padding not in (0, 1, 2):
        return (
            f"needs a {rank + 2}-d input, interpolation in {list(modes)} and padding in 0..2, got "
            f"interpolation {mode}, padding {padding}"
        )
    return None


SAMPLING_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.grid_sampler_2d": _grid_sampler(2),
    "torch.aten.grid_sampler_3d": _grid_sampler(3),
}
