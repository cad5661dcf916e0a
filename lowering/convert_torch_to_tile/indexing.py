"""Gathers and scatters through indirect DMA: embedding, index_select, gather, index.Tensor and the scatter family.

Every op here is an *indexed affine access*: output (or update) element `o` reads (or writes) the source element

    offset(o) = sum_k o_k * A_k + sum_j index_j[o] * B_j        (elements, relative to the source's origin)

with per-dimension coefficients A (the source's strides on the dimensions the output keeps, 0 elsewhere) and
index tensors broadcast to the output's shape, each scaled by the stride of the dimension it indexes (negative
indices wrap where PyTorch wraps them). One routine computes such offsets tile by tile on the engines (GpSimdE
iota for the affine part, VectorE for the indexed part) and moves the data with `tile.gather` / `tile.scatter`.
The arithmetic is fp32, exact below 2^24, so offsets are kept small: they are relative to the tile's origin
(an exact integer register offset of the DMA), and counted in units of the largest stride that divides every
coefficient (the DMA's table steps by that unit). An embedding's offsets are thus its token ids, whatever the
table's size; only a tile whose offsets still reach 2^24 units is refused.

- rows: when the output's last dimension is independent of every index (embedding, index_select on an outer
  dimension, index.Tensor on leading dims), one offset per partition moves a whole row of it;
- elements: otherwise one offset per element ([P, F] offsets, one descriptor each).

The table of each indirect DMA starts at the tile's own origin (a dynamic DMA offset) and spans exactly the
elements the tile's offsets can reach, so the bound the hardware checks is static and tight.

Scatters copy `self` first and then write (scatter, index_put) or add with an accumulating indirect DMA
(scatter_add, index_put with accumulate, scatter_reduce sum/mean, embedding_dense_backward). The DMA processes
rows in order and adds each one in fp32, so duplicate indices accumulate every contribution exactly as a
sequential CPU loop would. (The alternative, a one-hot [tokens x vocabulary] matmul on TensorE, is exact only
while the products and sums stay exact in fp32 and costs vocabulary-proportional work per token; the accumulating
DMA costs a descriptor per row and no arithmetic beyond the adds.) Out-of-range indices are not checked against
each dimension: an offset outside the table stops the run (the DMA's bound check), one inside reads another
element, where PyTorch would raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import TensorType, f32, i32
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
    dims_out_of_range,
    element_type_of,
    layout_of,
    load,
    result_element_type,
    result_shape,
    store,
    tensor_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import bounded_loop, copy_to, size_bounds
from neuron_mlir.lowering.convert_torch_to_tile.matmul import matmul_limits
from neuron_mlir.lowering.convert_torch_to_tile.movement import copy_into, fill_into
from neuron_mlir.lowering.layout import Layout, normalize_dim
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import Memory

# Offsets are computed in fp32 (VectorE): exact for integers below 2^24.
EXACT_OFFSETS = 1 << 24
# Element gathers move one element per descriptor: keep each DMA at 128 x 512 descriptors.
ELEMENT_TILE = 512
# The column tile of an element gather whose free dimension is bounded by the call's size: the loop runs
# ceil(n / BOUNDED_COLUMNS) of them.
BOUNDED_COLUMNS = 128
# A zero fill's stores: bytes per partition of each (1 MiB per DMA, well past a DMA's fixed cost), and how many
# a loop body holds (one per DMA queue).
ZERO_FILL_BYTES = 8 * 1024
ZERO_FILL_STORES = 16


# An HBM tensor as an access sees it: a memref when the access is emitted, or only its layout when the access is
# measured before converting (`legal`: how far its offsets reach for the op's row-major operands).
Operand = SSAValue | Layout


def _layout(value: Operand) -> Layout:
    return value if isinstance(value, Layout) else layout_of(value)


def _view(em: LoopNestBuilder | None, value: Operand, layout: Layout) -> Operand:
    """`value` re-described with `layout`: a `tile.view` when emitting, the layout itself when measuring."""
    if isinstance(value, Layout):
        return layout
    assert em is not None
    return view(em, value, layout)


@dataclass(frozen=True)
class IndexTerm:
    """An index tensor viewed with the output's shape (stride 0 where it broadcasts), scaled by `coefficient`;
    `wrap` is the size of the indexed dimension when negative indices count from its end."""

    index: Operand
    coefficient: int
    extent: int
    wrap: bool = False


def _source_without_negative_strides(em: LoopNestBuilder, source: SSAValue) -> SSAValue:
    if any(s < 0 for s in layout_of(source).strides):
        return copy_to(em, source)
    return source


def _exact_source(
    em: LoopNestBuilder, source: SSAValue, build: Callable[[SSAValue], IndexedAccess]
) -> tuple[SSAValue, IndexedAccess]:
    """The gather source (without negative strides) and its access, exact in fp32 (`inexact`).

    `legal` measured the access over a row-major source; a view's strides can make a tile's offsets reach further,
    and then the source is copied row-major first, which gives the access `legal` measured.
    """
    source = _source_without_negative_strides(em, source)
    access = build(source)
    if inexact(access) is not None and not layout_of(source).is_contiguous():
        source = copy_to(em, source)
        access = build(source)
    return source, access


def _tiling(shape: Sequence[int]) -> tuple[tuple[int, ...], int, int]:
    """The output as (leading dims looped, partition extent, free extent)."""
    if len(shape) == 0:
        return (), 1, 1
    if len(shape) == 1:
        return (), 1, shape[0]
    return tuple(shape[:-2]), shape[-2], shape[-1]


def _as_rank2(shape: Sequence[int], values: Sequence[int]) -> tuple[int, ...]:
    """Per-dim values of `shape` padded to at least 2 dims (a unit partition or free dim gets 0)."""
    values = tuple(values)
    return (0,) * max(0, 2 - len(shape)) + values


def _views_rank2(em: LoopNestBuilder, value: SSAValue, shape: Sequence[int]) -> SSAValue:
    layout = layout_of(value)
    pad = max(0, 2 - len(shape))
    return view(em, value, Layout((1,) * pad + tuple(layout.shape), (0,) * pad + tuple(layout.strides), layout.offset))


class IndexedAccess:
    """Offsets of an indexed affine access over an output shape, tile by tile."""

    def __init__(self, shape: Sequence[int], coefficients: Sequence[int], terms: Sequence[IndexTerm]):
        self.shape = tuple(shape)
        self.coefficients = _as_rank2(shape, coefficients)
        self.terms = list(terms)
        self.lead, self.partitions, self.free = _tiling(self.shape if len(self.shape) >= 2 else (1, *self.shape))
        if len(self.shape) == 0:
            self.lead, self.partitions, self.free = (), 1, 1
        # rows: the last dim is walked by the DMA when no index depends on it and it has a positive stride
        last_free = len(self.shape) >= 2 and all(_layout(t.index).strides[-1] == 0 for t in self.terms)
        self.rows = last_free and self.coefficients[-1] > 0 and self.free > 1
        # the unit of the offsets: every coefficient that enters them is a multiple of it
        entering = [t.coefficient for t in self.terms] + [self.coefficients[-2]]
        if not self.rows:
            entering.append(self.coefficients[-1])
        self.unit = math.gcd(*entering) or 1

    def reach(self, ps: int, fs: int) -> int:
        """The largest offset, in units, a tile of [ps, fs] can produce relative to its origin (+1: the table's
        bound)."""
        a = self.coefficients
        total = (ps - 1) * a[-2] + (0 if self.rows else (fs - 1) * a[-1])
        total += sum((t.extent - 1) * t.coefficient for t in self.terms)
        return total // self.unit + 1

    def origin(self, em: LoopNestBuilder, lead: Sequence[Index], p0: Index, f0: Index) -> Index:
        a = self.coefficients
        value: Index = 0
        for index, coefficient in zip([*lead, p0], a[:-1], strict=True):
            value = em.add(value, em.mul(index, coefficient))
        if not self.rows:
            value = em.add(value, em.mul(f0, a[-1]))
        return value

    def offsets(self, em: LoopNestBuilder, lead: Sequence[Index], p0: Index, ps: int, f0: Index, fs: int) -> SSAValue:
        """The [ps, 1] (rows) or [ps, fs] (elements) i32 offsets of a tile, relative to its origin, in units."""
        width = 1 if self.rows else fs
        a = [c // self.unit for c in self.coefficients]
        shape = (ps, width)
        total = em.insert(tile.IotaOp(TileType(shape, f32), [0 if self.rows else a[-1]], 0, a[-2])).result
        for term in self.terms:
            indices = [*lead, p0, f0]
            assert isinstance(term.index, SSAValue), "an emitted access has its index tensors"
            index_view = _views_rank2(em, term.index, self.shape)
            value = load(em, index_view, indices, shape, f32)
            if term.wrap:
                negative = em.insert(tile.BinaryScalarOp(value, "is_lt", TileType(shape, f32), scalar=0.0)).result
                shift = em.insert(
                    tile.BinaryScalarOp(negative, "multiply", TileType(shape, f32), scalar=float(term.extent))
                ).result
                value = em.insert(tile.BinaryOp(value, shift, "add", TileType(shape, f32))).result
            step = float(term.coefficient // self.unit)
            scaled = em.insert(tile.BinaryScalarOp(value, "multiply", TileType(shape, f32), scalar=step)).result
            total = em.insert(tile.BinaryOp(total, scaled, "add", TileType(shape, f32))).result
        return em.insert(tile.CopyOp(total, TileType(shape, i32))).result

    def run(
        self,
        em: LoopNestBuilder,
        body: Callable[[LoopNestBuilder, list[Index], Index, int, Index, int], None],
        bounds: Sequence[SSAValue | None] | None = None,
    ) -> None:
        """body(emitter, lead indices, p0, ps, f0, fs) over every tile of the output. With `bounds` (per output
        dimension, the size argument bounding its real extent: `size_bounds`), a bounded leading dimension runs the
        call's trips and a bounded partition dimension, when its extent is a multiple of the partition tile, the
        call's ceil(n / 128) row tiles; the rest of the output is padding, left unwritten."""
        free_tile = FREE_TILE if self.rows else ELEMENT_TILE
        lead_bounds: Sequence[SSAValue | None] = (None,) * len(self.lead)
        row_bound = column_bound = None
        if bounds is not None and len(bounds) == len(self.shape) >= 2:
            lead_bounds = bounds[:-2]
            row_bound = bounds[-2] if self.partitions % PARTITION_TILE == 0 else None
            # element gathers cost a descriptor per element: a bounded free dimension runs the call's columns in
            # tiles of BOUNDED_COLUMNS (rows move whole, their width is not the call's)
            if not self.rows and self.free % BOUNDED_COLUMNS == 0 and self.free > BOUNDED_COLUMNS:
                column_bound = bounds[-1]

        def columns(e: LoopNestBuilder, done: list[Index], p0: Index, ps: int) -> None:
            if column_bound is not None:
                bounded_loop(e, column_bound, BOUNDED_COLUMNS, lambda inner, f0, fs: body(inner, done, p0, ps, f0, fs))
                return
            e.for_tiles(self.free, free_tile, lambda inner, f0, fs: body(inner, done, p0, ps, f0, fs))

        def level(e: LoopNestBuilder, done: list[Index], left: Sequence[int]) -> None:
            if left:
                bound = lead_bounds[len(done)]
                if bound is not None:
                    bounded_loop(e, bound, 1, lambda inner, i, _: level(inner, [*done, i], left[1:]))
                else:
                    e.for_each(left[0], lambda inner, i: level(inner, [*done, i], left[1:]))
                return
            if row_bound is not None:
                bounded_loop(e, row_bound, PARTITION_TILE, lambda inner, p0, ps: columns(inner, done, p0, ps))
            else:
                e.for_tiles(self.partitions, PARTITION_TILE, lambda inner, p0, ps: columns(inner, done, p0, ps))

        level(em, [], self.lead)

    def table(
        self, em: LoopNestBuilder, source: SSAValue, origin: Index, ps: int, fs: int
    ) -> tuple[SSAValue, list[Index], int]:
        """A view of `source`'s allocation for one tile: (view, gather indices, indexed dim).

        Elements: [Q, bound] with element [q, j] at source origin + q + j * unit; rows: [Q, bound, fs] with the
        row's stride last. The tile's origin indexes Q (a dynamic DMA offset); offsets index `bound`.
        """
        layout = layout_of(source)
        span = 1 + sum((n - 1) * s for n, s in zip(layout.shape, layout.strides, strict=True))
        bound = self.reach(ps, fs)
        last = (bound - 1) * self.unit  # the largest offset, in elements
        shape: tuple[int, ...]
        strides: tuple[int, ...]
        if self.rows:
            # the row's start along the last dim is the gather index f0 of the view's third dim
            row = (self.free - 1) * self.coefficients[-1]
            starts = max(1, span - row - last)
            shape, strides = (starts, bound, self.free), (1, self.unit, self.coefficients[-1])
        else:
            starts = max(1, span - last)
            shape, strides = (starts, bound), (1, self.unit)
        return view(em, source, Layout(shape, strides, layout.offset)), [origin, 0, *([0] if self.rows else [])], 1


def inexact(access: IndexedAccess) -> str | None:
    """Why the access's offsets are not exact in fp32 (a tile's offsets reach 2^24 units), or None."""
    reach = access.reach(min(access.partitions, PARTITION_TILE), min(access.free, ELEMENT_TILE))
    if reach >= EXACT_OFFSETS:
        return (
            f"offsets within a tile reach {reach} (in steps of {access.unit} element(s)): fp32 offsets are exact "
            "only below 2^24"
        )
    return None


def _check_exact(op_name: str, access: IndexedAccess) -> None:
    problem = inexact(access)
    assert problem is None, f"{op_name}: {problem}, which `legal` rules out"


def emit_gather(
    em: LoopNestBuilder,
    op_name: str,
    source: SSAValue,
    access: IndexedAccess,
    out_element_type: Attribute,
    bounds: Sequence[SSAValue | None] | None = None,
) -> SSAValue:
    """out[shape] with out[o] = source element at offset(o); the access must be exact (`inexact`). With `bounds`
    (the output's `size_bounds`), only the call's part of the output is gathered (`IndexedAccess.run`)."""
    _check_exact(op_name, access)
    out = alloc(em, access.shape, out_element_type)
    out_view = _views_rank2(em, out, access.shape)
    if math.prod(access.shape) == 0:
        return out

    def body(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> None:
        offsets = access.offsets(e, lead, p0, ps, f0, fs)
        table, indices, dim = access.table(e, source, access.origin(e, lead, p0, f0), ps, fs)
        if access.rows:
            indices[-1] = f0
        result_type = TileType((ps, fs), out_element_type, Memory.SBUF)
        rows = e.insert(
            tile.GatherOp(table, [e.index(i) for i in indices], offsets, dim, result_type, (2,) if access.rows else ())
        ).result
        e.insert(tile.StoreOp(rows, out_view, [e.index(i) for i in [*lead, p0, f0]]))

    access.run(em, body, bounds)
    return out


def _output_bounds(em: LoopNestBuilder, op: Operation, access: IndexedAccess) -> Sequence[SSAValue | None] | None:
    """The size arguments bounding the op's result dimensions, when the access's output is that result."""
    bounds = size_bounds(em, op)
    return bounds if bounds is not None and tuple(result_shape(op)) == access.shape else None


def emit_scatter(
    em: LoopNestBuilder,
    op_name: str,
    dest: SSAValue,
    access: IndexedAccess,
    values: Callable[[LoopNestBuilder, list[Index], Index, int, Index, int], SSAValue],
    accumulate: bool,
) -> None:
    """dest element at offset(o) = (or +=) values(o) for every o of the access's shape; the access must be exact
    (`inexact`)."""
    _check_exact(op_name, access)
    if math.prod(access.shape) == 0:
        return

    def body(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> None:
        offsets = access.offsets(e, lead, p0, ps, f0, fs)
        table, indices, dim = access.table(e, dest, access.origin(e, lead, p0, f0), ps, fs)
        if access.rows:
            indices[-1] = f0
        rows = values(e, lead, p0, ps, f0, fs)
        e.insert(
            tile.ScatterOp(
                rows, table, [e.index(i) for i in indices], offsets, dim, (2,) if access.rows else (), accumulate
            )
        )

    access.run(em, body)


def _load_values(source: SSAValue, shape: Sequence[int], element_type: Attribute):  # type: ignore[no-untyped-def]
    """A `values` callback reading `source` (viewed with `shape`) at the tile's positions."""

    def values(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> SSAValue:
        return load(e, _views_rank2(e, source, shape), [*lead, p0, f0], (ps, fs), element_type)

    return values


def _fill_values(value: float | int, element_type: Attribute):  # type: ignore[no-untyped-def]
    def values(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> SSAValue:
        return e.insert(tile.FillOp(value, TileType((ps, fs), element_type, Memory.SBUF))).result

    return values


# ---- building accesses -------------------------------------------------------------------------------------


def _broadcast_index(
    em: LoopNestBuilder | None, index: Operand, shape: Sequence[int], placement: Sequence[int]
) -> Operand:
    """`index` viewed with `shape`: its dims land on `placement` (right-aligned broadcasting), stride 0 elsewhere."""
    layout = _layout(index)
    strides = [0] * len(shape)
    for dim, (extent, stride) in zip(placement, zip(layout.shape, layout.strides, strict=True), strict=True):
        strides[dim] = stride if extent != 1 else 0
    return _view(em, index, Layout(tuple(shape), tuple(strides), layout.offset))


def along_dim_access(
    em: LoopNestBuilder | None, source: Operand, dim: int, index: Operand, wrap: bool
) -> IndexedAccess:
    """gather/scatter's access: the output has the index's shape; dimension `dim` comes from the index."""
    src = _layout(source)
    idx = _layout(index)
    shape = idx.shape if idx.rank else ()
    coefficients = [0 if k == dim else src.strides[k] for k in range(len(shape))]
    term = IndexTerm(_view(em, index, Layout(idx.shape, idx.strides, idx.offset)), src.strides[dim] if src.rank else 0,
                     src.shape[dim] if src.rank else 1, wrap)  # fmt: skip
    return IndexedAccess(shape, coefficients, [term])


def _index_shapes(indices: Sequence[object]) -> list[tuple[int, ...]]:
    return [value.type.get_shape() for value in indices if isinstance(value, SSAValue)]


def _broadcast_shape(shapes: Sequence[Sequence[int]]) -> list[int] | None:
    """The shape index tensors broadcast to (aligned at the right), or None when they do not."""
    rank = max(len(shape) for shape in shapes)
    broadcast: list[int] = []
    for position in range(rank):
        sizes = {shape[position - (rank - len(shape))] for shape in shapes if position - (rank - len(shape)) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        broadcast.append(sizes.pop() if sizes else 1)
    return broadcast


def advanced_indexing_problem(indices: Sequence[object]) -> str | None:
    """Why advanced indexing with `indices` (index tensors or memrefs, None keeping a dimension) does not lower."""
    present = [value for value in indices if value is not None]
    if not present:
        return "indexing without any index tensor"
    if any(str(value.type.element_type) in ("i1", "ui8", "i8") for value in present):  # type: ignore[attr-defined]
        return "boolean mask indices select a data-dependent number of elements"
    shapes = _index_shapes(present)
    if _broadcast_shape(shapes) is None:
        return f"index shapes {shapes} do not broadcast"
    return None


def advanced_access(em: LoopNestBuilder | None, source: Operand, indices: Sequence[Operand | None]) -> IndexedAccess:
    """index.Tensor's access: PyTorch's advanced indexing with integer index tensors (None keeps a dimension),
    which `advanced_indexing_problem` accepts."""
    src = _layout(source)
    indexed = [d for d, index in enumerate(indices) if index is not None]
    index_layouts = [_layout(indices[d]) for d in indexed]  # type: ignore[arg-type]
    rank = max(layout.rank for layout in index_layouts)
    broadcast = _broadcast_shape([layout.shape for layout in index_layouts])
    assert broadcast is not None, "the index shapes broadcast"
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    kept = [d for d in range(src.rank) if d not in indexed]
    if adjacent:
        before, after = [d for d in kept if d < indexed[0]], [d for d in kept if d > indexed[-1]]
        shape = [src.shape[d] for d in before] + broadcast + [src.shape[d] for d in after]
        coefficients = [src.strides[d] for d in before] + [0] * rank + [src.strides[d] for d in after]
        first = len(before)
    else:
        shape = broadcast + [src.shape[d] for d in kept]
        coefficients = [0] * rank + [src.strides[d] for d in kept]
        first = 0
    terms = []
    for d, layout in zip(indexed, index_layouts, strict=True):
        placement = [first + rank - layout.rank + i for i in range(layout.rank)]
        index_view = _broadcast_index(em, indices[d], shape, placement)  # type: ignore[arg-type]
        terms.append(IndexTerm(index_view, src.strides[d], src.shape[d], wrap=True))
    return IndexedAccess(shape, coefficients, terms)


# ---- ATen ops ------------------------------------------------------------------------------------------------


def _embedding_access(em: LoopNestBuilder | None, weight: Operand, indices: Operand) -> IndexedAccess:
    w, idx = _layout(weight), _layout(indices)
    shape = (*idx.shape, w.shape[1])
    term = IndexTerm(_view(em, indices, Layout(shape, (*idx.strides, 0), idx.offset)), w.strides[0], w.shape[0])
    return IndexedAccess(shape, [0] * idx.rank + [w.strides[1]], [term])


def _embedding(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    weight, access = _exact_source(em, args["weight"], lambda w: _embedding_access(em, w, args["indices"]))
    return [emit_gather(em, op.name, weight, access, result_element_type(op), _output_bounds(em, op, access))]


def _index_select_access(em: LoopNestBuilder | None, source: Operand, index: Operand, dim: int) -> IndexedAccess:
    src, idx = _layout(source), _layout(index)
    dim = normalize_dim(dim, src.rank)
    count = idx.shape[0] if idx.rank else 1
    shape = list(src.shape)
    shape[dim] = count
    strides = [0] * src.rank
    strides[dim] = idx.strides[0] if idx.rank else 0
    term = IndexTerm(_view(em, index, Layout(tuple(shape), tuple(strides), idx.offset)), src.strides[dim],
                     src.shape[dim])  # fmt: skip
    coefficients = [0 if k == dim else src.strides[k] for k in range(src.rank)]
    return IndexedAccess(shape, coefficients, [term])


def _index_select(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    if layout_of(args["self"]).rank == 0:
        return [copy_to(em, args["self"])]
    source, access = _exact_source(
        em, args["self"], lambda source: _index_select_access(em, source, args["index"], args["dim"])
    )
    return [emit_gather(em, op.name, source, access, result_element_type(op), _output_bounds(em, op, access))]


def _along_dim(em: LoopNestBuilder | None, source: Operand, dim: int, index: Operand) -> IndexedAccess:
    """gather's and the scatters' access along `dim` (as PyTorch says it; a 0-d tensor takes 0)."""
    rank = _layout(source).rank
    return along_dim_access(em, source, normalize_dim(dim, rank) if rank else 0, index, wrap=False)


def _gather(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    source, access = _exact_source(em, args["self"], lambda source: _along_dim(em, source, args["dim"], args["index"]))
    return [emit_gather(em, op.name, source, access, result_element_type(op), _output_bounds(em, op, access))]


def _index_tensor(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    indices = list(args["indices"])
    source, access = _exact_source(em, args["self"], lambda source: advanced_access(em, source, indices))
    return [emit_gather(em, op.name, source, access, result_element_type(op), _output_bounds(em, op, access))]


def _scatter_with_reduce(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> Sequence[SSAValue | None]:
    """scatter.reduce: reduce='add' accumulates like scatter_add, 'multiply' multiplies into self."""
    reduce = str(args["reduce"])
    if reduce == "add":
        return _scatter("add")(em, op, args)
    rank = layout_of(args["self"]).rank
    dim = normalize_dim(args["dim"], rank) if rank else 0
    out = emit_dense_scatter_reduce(
        em, op.name, args["self"], dim, args["index"], args["src"], "prod", True, result_element_type(op)
    )
    return [out]


def _scatter(mode: str) -> Lowering:
    """scatter.src / scatter.value / scatter_add: copy self, then write or add at the indexed positions."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        out = copy_to(em, args["self"])
        access = _along_dim(em, out, args["dim"], args["index"])
        element_type = result_element_type(op)
        if mode == "value":
            values = _fill_values(args["value"], element_type)
        else:
            values = _load_values(args["src"], access.shape, element_type)
        emit_scatter(em, op.name, out, access, values, accumulate=mode == "add")
        return [out]

    return lower


_DENSE_REDUCE = {"amax": ("max", float("-inf")), "amin": ("min", float("inf")), "prod": ("multiply", 1.0)}


def emit_dense_scatter_reduce(
    em: LoopNestBuilder, op_name: str, source: SSAValue, dim: int, index: SSAValue, src: SSAValue, reduce: str,
    include_self: bool, element_type: Attribute,
) -> SSAValue:  # fmt: skip
    """scatter_reduce for reductions the DMA cannot accumulate (max, min, product): compare and select.

    For each target slot t of `dim` and each position r of the other dims, reduce the `src` values whose index
    equals t: a [rows, T, J] tile compares the index (broadcast along T) with an iota of t, selects src or the
    reduction's identity, and reduces over J on VectorE. Exact (no arithmetic beyond the reduction itself) and
    deterministic; the work grows with T x J per position, so it suits the small index dimensions this is used
    for.
    """
    alu_op, identity = _DENSE_REDUCE[reduce]
    if layout_of(index).rank == 0:
        # a 0-d scatter is a 1-element one along dim 0
        def one(value: SSAValue) -> SSAValue:
            return view(em, value, layout_of(value).reshape((1,)) or Layout((1,), (1,), layout_of(value).offset))

        out = emit_dense_scatter_reduce(
            em, op_name, one(source), 0, one(index), one(src), reduce, include_self, element_type
        )
        return view(em, out, Layout((), (), layout_of(out).offset))
    out = copy_to(em, source)
    out_layout, idx = layout_of(out), layout_of(index)
    rank = idx.rank
    order = [d for d in range(rank) if d != dim] + [dim]
    targets = out_layout.shape[dim]
    rest = tuple(idx.shape[d] for d in order[:-1])
    width = idx.shape[dim]
    src_view = layout_of(src)
    for d in range(rank):
        src_view = src_view.slice(d, 0, idx.shape[d])

    # [rest..., T, J] views: the index and src broadcast along T, out along J is not needed
    def spread(layout: Layout) -> Layout:
        permuted = layout.permute(order)
        return Layout((*permuted.shape[:-1], targets, width), (*permuted.strides[:-1], 0, permuted.strides[-1]),
                      permuted.offset)  # fmt: skip

    index_spread = view(em, index, spread(idx))
    src_spread = view(em, src, spread(src_view))
    out_rows = out_layout.permute(order)
    for d in range(rank - 1):
        out_rows = out_rows.slice(d, 0, rest[d])
    out_view = view(em, out, out_rows)
    lead, partitions = (rest[:-1], rest[-1]) if rest else ((), 1)
    if not rest:
        index_spread = view(em, index_spread, _unit_first(layout_of(index_spread)))
        src_spread = view(em, src_spread, _unit_first(layout_of(src_spread)))
        out_view = view(em, out_view, _unit_first(layout_of(out_view)))
    t_tile = max(1, min(targets, FREE_TILE // max(1, width)))

    def body(e: LoopNestBuilder, done: list[Index], p0: Index, ps: int) -> None:
        for t0 in range(0, targets, t_tile):
            ts = min(t_tile, targets - t0)
            shape = (ps, ts, width)
            at = [*done, p0, t0, 0]
            ids = load(e, index_spread, at, shape, f32)
            values = load(e, src_spread, at, shape, f32)
            slots = e.insert(tile.IotaOp(TileType(shape, f32), [1, 0], t0)).result
            hit = e.insert(tile.BinaryOp(ids, slots, "is_equal", TileType(shape, f32))).result
            fill = e.insert(tile.FillOp(identity, TileType(shape, f32))).result
            chosen = e.insert(tile.SelectOp(hit, values, fill, TileType(shape, f32))).result
            reduced = e.insert(tile.ReduceOp(chosen, alu_op, TileType((ps, ts), f32))).result
            current = load(e, out_view, [*done, p0, t0], (ps, ts), f32)
            if include_self:
                result = e.insert(tile.BinaryOp(current, reduced, alu_op, TileType((ps, ts), f32))).result
            else:
                any_hit = e.insert(tile.ReduceOp(hit, "max", TileType((ps, ts), f32))).result
                result = e.insert(tile.SelectOp(any_hit, reduced, current, TileType((ps, ts), f32))).result
            stored = e.insert(tile.CopyOp(result, TileType((ps, ts), element_type))).result
            e.insert(tile.StoreOp(stored, out_view, [e.index(i) for i in [*done, p0, t0]]))

    def level(e: LoopNestBuilder, done: list[Index]) -> None:
        e.for_tiles(partitions, PARTITION_TILE, lambda e2, p0, ps: body(e2, done, p0, ps))

    if width > 0 and math.prod(rest) > 0:
        em.for_each_index(lead, level)
    return out


def _unit_first(layout: Layout) -> Layout:
    return Layout((1, *layout.shape), (0, *layout.strides), layout.offset)


def _scatter_reduce(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    reduce, include_self = str(args["reduce"]), bool(args.get("include_self", True))
    if reduce in _DENSE_REDUCE:
        rank = layout_of(args["self"]).rank
        dim = normalize_dim(args["dim"], rank) if rank else 0
        out = emit_dense_scatter_reduce(
            em, op.name, args["self"], dim, args["index"], args["src"], reduce, include_self, result_element_type(op)
        )
        return [out]
    element_type = result_element_type(op)
    out = copy_to(em, args["self"])
    rank = layout_of(out).rank
    dim = normalize_dim(args["dim"], rank) if rank else 0
    access = along_dim_access(em, out, dim, args["index"], wrap=False)
    if not include_self:
        emit_scatter(em, op.name, out, access, _fill_values(0.0, element_type), accumulate=False)
    emit_scatter(em, op.name, out, access, _load_values(args["src"], access.shape, element_type), accumulate=True)
    if reduce == "sum":
        return [out]
    counts = alloc(em, layout_of(out).shape, f32)
    fill_into(em, counts, 1.0 if include_self else 0.0)
    count_access = along_dim_access(em, counts, dim, args["index"], wrap=False)
    emit_scatter(em, op.name, counts, count_access, _fill_values(1.0, f32), accumulate=True)
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise

    def mean(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        total, count = tiles
        shape = result.get_shape()
        at_least_one = e.insert(tile.BinaryScalarOp(count, "max", TileType(shape, f32), scalar=1.0)).result
        inverse = e.insert(tile.UnaryOp(at_least_one, "reciprocal", TileType(shape, f32))).result
        quotient = e.insert(tile.BinaryOp(total, inverse, "multiply", TileType(shape, f32))).result
        return e.insert(tile.CopyOp(quotient, result)).result

    return [emit_elementwise(em, layout_of(out).shape, element_type, [out, counts], mean)]


def _is_mask(value: Operand | None) -> bool:
    """Whether an index is a boolean mask (its dtype, from a memref or a torch tensor)."""
    return isinstance(value, SSAValue) and str(value.type.element_type) in ("i1", "ui8")  # type: ignore[attr-defined]


def _mask_views(
    source: Layout, indices: Sequence[Layout | None], masks: Sequence[bool], values: Layout
) -> tuple[Layout, Layout] | None:
    """index_put's one boolean mask (`masks`: which indices are masks) and its values seen over the whole of self
    ([mask view, values view]), when they can be: the mask covers whole dims of self and the values broadcast over
    the rest of them."""
    positions = [d for d, index in enumerate(indices) if index is not None]
    if len(positions) != 1 or not masks[positions[0]]:
        return None
    first, m = positions[0], indices[positions[0]]
    assert m is not None
    src, v = source, values
    rest = src.shape[first + m.rank :]
    if (
        src.shape[first : first + m.rank] != m.shape
        or v.rank > 1 + len(rest)
        or (v.rank > len(rest) and v.shape[0] != 1)
    ):
        return None
    mask_strides = [0] * src.rank
    mask_strides[first : first + m.rank] = m.strides
    trailing = v.shape[max(0, v.rank - len(rest)) :]
    try:
        values_rest = Layout(trailing, v.strides[max(0, v.rank - len(rest)) :], v.offset).expand(rest)
    except ValueError:
        return None
    value_strides = [0] * (first + m.rank) + list(values_rest.strides)
    return Layout(src.shape, tuple(mask_strides), m.offset), Layout(src.shape, tuple(value_strides), v.offset)


def _masked_put(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue] | None:
    """index_put with one boolean mask whose values do not depend on how many elements it selects.

    Then it is elementwise: `where(mask, values, self)` (or `self + mask * values` when accumulating), with the
    mask and the values broadcast over self; None when the values have one row per selected element.
    """
    indices = list(args["indices"])
    layouts = [None if index is None else layout_of(index) for index in indices]
    views = _mask_views(layout_of(args["self"]), layouts, [_is_mask(i) for i in indices], layout_of(args["values"]))
    if views is None:
        return None
    src = layout_of(args["self"])
    mask = next(index for index in indices if index is not None)
    mask_view, values_view = view(em, mask, views[0]), view(em, args["values"], views[1])
    accumulate = bool(args.get("accumulate", False))
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise

    def put(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        current, chosen, value = tiles
        if not accumulate:
            return e.insert(tile.SelectOp(chosen, value, current, result)).result
        work = TileType(result.get_shape(), f32, Memory.SBUF)
        scaled = e.insert(tile.BinaryOp(chosen, value, "multiply", work)).result
        return e.insert(tile.BinaryOp(current, scaled, "add", result)).result

    out = emit_elementwise(em, src.shape, result_element_type(op), [args["self"], mask_view, values_view], put)
    return [out]


def _spread_index(em: LoopNestBuilder | None, index: Operand, source: Operand, dim: int) -> Operand:
    """index_reduce's 1-d index along `dim` broadcast over the source's other dims."""
    shape, idx = _layout(source).shape, _layout(index)
    strides = [0] * len(shape)
    if shape:
        strides[dim] = idx.strides[0] if idx.rank else 0
    return _view(em, index, Layout(shape, tuple(strides), idx.offset))


def _index_reduce(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """index_reduce is scatter_reduce with the 1-d index broadcast over the source's other dims."""
    rank = layout_of(args["source"]).rank
    dim = normalize_dim(args["dim"], rank) if rank else 0
    spread = _spread_index(em, args["index"], args["source"], dim)
    reduce = str(args["reduce"])
    forwarded = {
        "self": args["self"], "dim": dim, "index": spread, "src": args["source"], "reduce": reduce,
        "include_self": args.get("include_self", True),
    }  # fmt: skip
    return _scatter_reduce(em, op, forwarded)


def _index_put(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    masked = _masked_put(em, op, args)
    if masked is not None:
        return masked
    out = copy_to(em, args["self"])
    access = advanced_access(em, out, list(args["indices"]))
    element_type = result_element_type(op)
    values_layout = layout_of(args["values"]).broadcast_to(access.shape)
    values = view(em, args["values"], values_layout)
    emit_scatter(em, op.name, out, access, _load_values(values, access.shape, element_type), bool(args["accumulate"]))
    return [out]


def _dense_backward_access(em: LoopNestBuilder | None, indices: Operand, width: int, rows: int) -> IndexedAccess:
    """embedding_dense_backward's scatter into the [rows, width] gradient: row `indices[i]` per index."""
    idx = _layout(indices)
    shape = (*idx.shape, width)
    term = IndexTerm(_view(em, indices, Layout(shape, (*idx.strides, 0), idx.offset)), width, rows)
    return IndexedAccess(shape, [0] * idx.rank + [1], [term])


def _zero_fill(em: LoopNestBuilder, out: SSAValue) -> None:
    """Zero the fresh row-major HBM tensor `out` as [128, n / 128] (the rest, under 128 elements, as one row):
    memset tiles of `ZERO_FILL_BYTES` per partition, made once and stored again and again, `ZERO_FILL_STORES` to
    a loop body, so that the stores spread over the DMA queues. The per-tile fill of `fill_into` would memset
    every tile it stores, and give all its stores the one or two queues of its loop body."""
    layout = layout_of(out)
    element_type = element_type_of(out)
    columns, rest = divmod(layout.num_elements, PARTITION_TILE)
    if columns:
        flat = view(em, out, Layout((PARTITION_TILE, columns), (columns, 1), layout.offset))
        chunk = min(columns, max(1, ZERO_FILL_BYTES // itemsize(runtime_dtype_name(element_type))))
        zeros = {
            size: em.insert(tile.FillOp(0.0, TileType((PARTITION_TILE, size), element_type))).result
            for size in {chunk, columns % chunk} - {0}
        }

        def stores(e: LoopNestBuilder, start: Index, extent: int) -> None:
            for offset in range(0, extent, chunk):
                store(e, zeros[min(chunk, extent - offset)], flat, [0, e.add(start, offset)])

        em.for_tiles(columns, chunk * ZERO_FILL_STORES, stores)
    if rest:
        fill_into(em, view(em, out, Layout((1, rest), (rest, 1), layout.offset + columns * PARTITION_TILE)), 0.0)


def _embedding_dense_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    grad, indices = args["grad_output"], args["indices"]
    width = layout_of(grad).shape[-1]
    out = alloc(em, result_shape(op), result_element_type(op))
    _zero_fill(em, out)
    access = _dense_backward_access(em, indices, width, result_shape(op)[0])
    index = access.terms[0].index
    assert isinstance(index, SSAValue), "an access built with an emitter views its index tensor"
    shape = access.shape
    padding = int(args.get("padding_idx", -1))

    def values(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> SSAValue:
        rows = load(e, _views_rank2(e, grad, shape), [*lead, p0, f0], (ps, fs), f32)
        if padding < 0:
            return rows
        ids = load(e, _views_rank2(e, index, shape), [*lead, p0, 0], (ps, 1), f32)
        keep = e.insert(tile.BinaryScalarOp(ids, "not_equal", TileType((ps, 1), f32), scalar=float(padding))).result
        return e.insert(tile.BinaryScalarOp(rows, "multiply", TileType((ps, fs), f32), column=keep)).result

    emit_scatter(em, op.name, out, access, values, accumulate=True)
    return [out]


def _prefix_rows(count: int) -> tuple[int, int]:
    """masked_scatter's flat mask as [rows, width]: the widest width of at most 128 that divides `count`."""
    width = next(d for d in range(min(PARTITION_TILE, count), 0, -1) if count % d == 0)
    return count // width, width


def _masked_scatter(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """out[i] = mask[i] ? source[count of true mask elements before i] : self[i], in row-major order.

    The flat mask is viewed as [R, L]. Exclusive prefix counts come from TensorE: within rows, mask @ U with U
    strictly upper triangular ([L, L] ones where k < j); across rows, a strictly triangular [R, R] times the row
    totals. Counts are exact in fp32 (at most R * L = 16384). The source is then gathered at those counts
    (clamped into range where the mask is false) and selected where the mask is true.
    """
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise

    # self and mask broadcast together to the result's shape
    target = Layout.contiguous(result_shape(op))
    current = view(em, args["self"], layout_of(args["self"]).broadcast_to(target.shape))
    count = target.num_elements
    source = args["source"]
    available = layout_of(source).num_elements
    if count == 0 or available == 0:
        return [copy_to(em, current)]
    rows, width = _prefix_rows(count)
    mask = alloc(em, (rows, width), f32)
    copy_into(
        em,
        view(em, args["mask"], layout_of(args["mask"]).broadcast_to(target.shape)),
        view(em, mask, Layout.contiguous(target.shape)),
    )
    values = load(em, mask, [0, 0], (rows, width))
    transposed = load(em, mask, [0, 0], (width, rows), dims=(1, 0))
    within = em.insert(tile.IotaOp(TileType((width, width), f32), [1], 0, -1)).result
    within = em.insert(tile.BinaryScalarOp(within, "is_gt", TileType((width, width), f32), scalar=0.0)).result
    prefix = em.insert(tile.MatmulOp(transposed, within, TileType((rows, width), f32, Memory.PSUM))).result
    totals = em.insert(tile.ReduceOp(values, "add", TileType((rows, 1), f32))).result
    before = em.insert(tile.IotaOp(TileType((rows, rows), f32), [1], 0, -1)).result
    before = em.insert(tile.BinaryScalarOp(before, "is_gt", TileType((rows, rows), f32), scalar=0.0)).result
    carried = em.insert(tile.MatmulOp(before, totals, TileType((rows, 1), f32, Memory.PSUM))).result
    carried = em.insert(tile.CopyOp(carried, TileType((rows, 1), f32))).result
    counts = em.insert(tile.BinaryScalarOp(prefix, "add", TileType((rows, width), f32), column=carried)).result
    counts = em.insert(
        tile.BinaryScalarOp(counts, "min", TileType((rows, width), f32), scalar=float(available - 1))
    ).result
    positions = alloc(em, (rows, width), f32)
    em.insert(tile.StoreOp(counts, positions, [em.index(0), em.index(0)]))
    flat_source = copy_to(em, source) if not layout_of(source).is_contiguous() else source
    flat_source = view(em, flat_source, Layout((available,), (1,), layout_of(flat_source).offset))
    access = IndexedAccess((rows, width), (0, 0), [IndexTerm(positions, 1, available)])
    gathered = emit_gather(em, op.name, flat_source, access, result_element_type(op))
    gathered = view(em, gathered, Layout.contiguous(target.shape))
    mask_view = view(em, mask, Layout.contiguous(target.shape))

    def choose(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        chosen, taken, kept = tiles
        return e.insert(tile.SelectOp(chosen, taken, kept, result)).result

    return [emit_elementwise(em, target.shape, result_element_type(op), [mask_view, gathered, current], choose)]


def _bag_access(em: LoopNestBuilder | None, weight: Operand, indices: Operand) -> IndexedAccess:
    """The row gather of an embedding bag: row `indices[t]` of the weight for each token t."""
    w, idx = _layout(weight), _layout(indices)
    shape = (idx.shape[0], w.shape[1])
    term = IndexTerm(_view(em, indices, Layout(shape, (idx.strides[0], 0), idx.offset)), w.strides[0], w.shape[0])
    return IndexedAccess(shape, [0, w.strides[1]], [term])


def _embedding_bag(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue | None]:
    """Bags of embedding rows: a row gather, then a [bags x tokens] membership matrix: sum and mean on TensorE,
    max by selection and a VectorE reduction (_bag_maxima).

    The bag matrix M[b, t] = (start_b <= t < end_b), times the per-sample weights (sum) or 1/bag size (mean), and
    zero for padding_idx tokens, is built from an iota of t compared with per-partition start/end columns;
    output = M @ rows accumulates in PSUM like any matmul. The auxiliary outputs follow PyTorch's CPU kernel:
    offset2bag (bag of each token, mean only) is a column count of starts <= t on TensorE, bag_size and
    max_indices are the bag sizes (mean) or zeros (sum).
    """
    from neuron_mlir.lowering.convert_torch_to_tile.common import empty_tensor
    from neuron_mlir.lowering.convert_torch_to_tile.matmul import emit_matmul

    weight, indices, offsets = args["weight"], args["indices"], args["offsets"]
    mode, include_last = int(args.get("mode", 0)), bool(args.get("include_last_offset", False))
    padding = int(args.get("padding_idx", -1) if args.get("padding_idx") is not None else -1)
    weights = args.get("per_sample_weights")
    # scale_grad_by_freq only changes the gradient (embedding_bag's backward), not these outputs
    idx, off = layout_of(indices), layout_of(offsets)
    tokens = idx.shape[0]
    bags = off.shape[0] - (1 if include_last else 0)
    width = layout_of(weight).shape[1]
    weight, access = _exact_source(em, weight, lambda w: _bag_access(em, w, indices))
    rows = emit_gather(em, op.name, weight, access, f32)
    ends = alloc(em, (bags,), f32)
    following = bags if include_last else bags - 1
    if following:
        copy_into(em, view(em, offsets, Layout((following,), off.strides, off.offset + off.strides[0])),
                  view(em, ends, Layout((following,), (1,), 0)))  # fmt: skip
    if not include_last:
        fill_into(em, view(em, ends, Layout((1,), (1,), bags - 1)), float(tokens))
    starts_column = load(
        em, view(em, offsets, Layout((bags, 1), (off.strides[0], 0), off.offset)), [0, 0], (bags, 1), f32
    )
    ends_column = load(em, view(em, ends, Layout((bags, 1), (1, 0), 0)), [0, 0], (bags, 1), f32)
    grid = TileType((bags, tokens), f32, Memory.SBUF)
    position = em.insert(tile.IotaOp(grid, [1])).result
    started = em.insert(tile.BinaryScalarOp(position, "is_ge", grid, column=starts_column)).result
    before_end = em.insert(tile.BinaryScalarOp(position, "is_lt", grid, column=ends_column)).result
    members = em.insert(tile.BinaryOp(started, before_end, "multiply", grid)).result
    if padding >= 0:
        ids = load(em, view(em, indices, Layout((bags, tokens), (0, idx.strides[0]), idx.offset)), [0, 0],
                   (bags, tokens), f32)  # fmt: skip
        kept = em.insert(tile.BinaryScalarOp(ids, "not_equal", grid, scalar=float(padding))).result
        members = em.insert(tile.BinaryOp(members, kept, "multiply", grid)).result
    sizes = em.insert(tile.ReduceOp(members, "add", TileType((bags, 1), f32))).result
    scaled = members
    if mode == 1:
        at_least_one = em.insert(tile.BinaryScalarOp(sizes, "max", TileType((bags, 1), f32), scalar=1.0)).result
        inverse = em.insert(tile.UnaryOp(at_least_one, "reciprocal", TileType((bags, 1), f32))).result
        scaled = em.insert(tile.BinaryScalarOp(members, "multiply", grid, column=inverse)).result
    elif weights is not None:
        w = layout_of(weights)
        row = load(
            em, view(em, weights, Layout((bags, tokens), (0, w.strides[0]), w.offset)), [0, 0], (bags, tokens), f32
        )
        scaled = em.insert(tile.BinaryOp(members, row, "multiply", grid)).result
    matrix = alloc(em, (bags, tokens), f32)
    em.insert(tile.StoreOp(scaled, matrix, [em.index(0), em.index(0)]))
    winners: SSAValue | None = None
    if mode == 2:
        output, winners = _bag_maxima(em, op, rows, matrix, sizes, indices, bags, tokens, width)
    else:
        output = emit_matmul(em, matrix, rows, result_element_type(op, 0))
    results: list[SSAValue | None] = [output]

    def auxiliary(index: int, values: Callable[[], SSAValue]) -> SSAValue | None:
        result_type = op.results[index].type
        if not isinstance(result_type, TensorType):
            return None
        if 0 in result_type.get_shape():
            return empty_tensor(em, result_type)
        shape = result_type.get_shape()
        out = alloc(em, shape, result_type.element_type)
        value = values()
        size = layout_of(value).shape
        if size != (1,) and size != shape:
            # the meta kernel sizes some of these by the offsets (one more with include_last_offset): zero the rest
            fill_into(em, out, 0.0)
            copy_into(em, value, view(em, out, Layout(size, (1,), 0)))
        else:
            copy_into(em, view(em, value, layout_of(value).broadcast_to(shape)), out)
        return out

    def bag_of_token() -> SSAValue:
        _, _, n_limit = matmul_limits(em)
        counts = alloc(em, (1, tokens), f32)
        ones = em.insert(tile.FillOp(1.0, TileType((bags, 1), f32))).result
        for c0 in range(0, tokens, n_limit):
            cs = min(n_limit, tokens - c0)
            chunk = TileType((bags, cs), f32, Memory.SBUF)
            at = em.insert(tile.IotaOp(chunk, [1], c0)).result
            begun = em.insert(tile.BinaryScalarOp(at, "is_ge", chunk, column=starts_column)).result
            total = em.insert(tile.MatmulOp(ones, begun, TileType((1, cs), f32, Memory.PSUM))).result
            bag = em.insert(tile.BinaryScalarOp(total, "subtract", TileType((1, cs), f32), scalar=1.0)).result
            em.insert(tile.StoreOp(bag, counts, [em.index(0), em.index(c0)]))
        return view(em, counts, Layout((tokens,), (1,), 0))

    def bag_sizes() -> SSAValue:
        out = alloc(em, (bags,), f32)
        em.insert(tile.StoreOp(sizes, view(em, out, Layout((bags, 1), (1, 0), 0)), [em.index(0), em.index(0)]))
        return out

    def zeros() -> SSAValue:
        out = alloc(em, (1,), f32)
        fill_into(em, out, 0.0)
        return out

    # sum mode leaves offset2bag empty and bag_size / max_indices zero (sized by the offsets), as the CPU kernel;
    # mean repeats the bag sizes as max_indices; max gives the vocabulary index of each maximum
    results.append(auxiliary(1, bag_of_token))
    results.append(auxiliary(2, zeros if mode == 0 else bag_sizes))
    if winners is not None:
        results.append(auxiliary(3, lambda: winners))
    else:
        results.append(auxiliary(3, bag_sizes if mode == 1 else zeros))
    return results


def _bag_maxima(
    em: LoopNestBuilder, op: Operation, rows: SSAValue, matrix: SSAValue, sizes: SSAValue, indices: SSAValue,
    bags: int, tokens: int, width: int,
) -> tuple[SSAValue, SSAValue]:  # fmt: skip
    """embedding_bag max: per bag and feature, the maximum over the bag's rows (0 for an empty bag), and the
    vocabulary index of its first occurrence (PyTorch's strict `>` scan), from [bags, features, tokens] tiles."""
    output = alloc(em, (bags, width), result_element_type(op, 0))
    best_values = alloc(em, (bags, width), f32)
    first = alloc(em, (bags, width), f32)
    chunk = max(1, FREE_TILE // tokens)
    spread_rows = view(em, rows, Layout((bags, width, tokens), (0, 1, width), 0))
    spread_members = view(em, matrix, Layout((bags, width, tokens), (tokens, 0, 1), 0))
    spread_best = view(em, best_values, Layout((bags, width, tokens), (width, 1, 0), 0))
    nonempty = em.insert(tile.BinaryScalarOp(sizes, "is_gt", TileType((bags, 1), f32), scalar=0.0)).result
    for d0 in range(0, width, chunk):
        dc = min(chunk, width - d0)
        cube, plane = TileType((bags, dc, tokens), f32), TileType((bags, dc), f32)
        values = load(em, spread_rows, [0, d0, 0], (bags, dc, tokens))
        members = load(em, spread_members, [0, d0, 0], (bags, dc, tokens))
        lowest = em.insert(tile.FillOp(float("-inf"), cube)).result
        candidates = em.insert(tile.SelectOp(members, values, lowest, cube)).result
        best = em.insert(tile.ReduceOp(candidates, "max", plane)).result
        kept = em.insert(tile.BinaryScalarOp(em.insert(tile.FillOp(0.0, plane)).result, "add", plane, column=nonempty))
        best = em.insert(tile.SelectOp(kept.result, best, em.insert(tile.FillOp(0.0, plane)).result, plane)).result
        em.insert(tile.StoreOp(best, best_values, [em.index(0), em.index(d0)]))
        em.insert(tile.StoreOp(em.insert(tile.CopyOp(best, TileType((bags, dc), result_element_type(op, 0)))).result,
                               output, [em.index(0), em.index(d0)]))  # fmt: skip
        # the first token whose value equals the maximum: min over tokens of (hit ? t : tokens - 1)
        target = load(em, spread_best, [0, d0, 0], (bags, dc, tokens))
        hit = em.insert(tile.BinaryOp(candidates, target, "is_equal", cube)).result
        position = em.insert(tile.IotaOp(cube, [0, 1])).result
        last = em.insert(tile.FillOp(float(tokens - 1), cube)).result
        chosen = em.insert(tile.SelectOp(hit, position, last, cube)).result
        em.insert(tile.StoreOp(em.insert(tile.ReduceOp(chosen, "min", plane)).result, first,
                               [em.index(0), em.index(d0)]))  # fmt: skip
    idx = layout_of(indices)
    token_of = IndexTerm(first, idx.strides[0], tokens)
    vocabulary = emit_gather(em, op.name, indices, IndexedAccess((bags, width), (0, 0), [token_of]), f32)
    winners = alloc(em, (bags, width), f32)

    def empty_is_zero(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        zero = e.insert(tile.FillOp(0.0, result)).result
        return e.insert(tile.SelectOp(tiles[1], tiles[0], zero, result)).result

    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise

    nonempty_rows = alloc(em, (bags, 1), f32)
    em.insert(tile.StoreOp(nonempty, nonempty_rows, [em.index(0), em.index(0)]))
    emit_elementwise(em, (bags, width), f32, [vocabulary, view(em, nonempty_rows, Layout((bags, width), (1, 0), 0))],
                     empty_is_zero, winners)  # fmt: skip
    return output, winners


def _embedding_renorm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """Rows of `self` named by `indices` whose p-norm exceeds max_norm are scaled by max_norm / (norm + 1e-7).

    Which rows are named is a scatter of ones into a [rows] flag vector (indirect DMA); every row's norm is a
    VectorE reduction with the row on a partition; the scale applies where both hold.
    """
    source, indices = args["self"], args["indices"]
    max_norm, p = float(args["max_norm"]), float(args["norm_type"])
    src, idx = layout_of(source), layout_of(indices)
    count, width = src.shape
    named = alloc(em, (count,), f32)
    fill_into(em, named, 0.0)
    flat = idx.reshape((idx.num_elements,))
    index_view = view(
        em, indices if flat is not None else copy_to(em, indices), flat or Layout((idx.num_elements,), (1,))
    )
    if idx.num_elements:
        access = IndexedAccess((idx.num_elements,), (0,), [IndexTerm(index_view, 1, count)])
        emit_scatter(em, op.name, named, access, _fill_values(1.0, f32), accumulate=False)
    out = alloc(em, (count, width), result_element_type(op))
    flags = view(em, named, Layout((count, 1), (1, 0), 0))

    def rows(e: LoopNestBuilder, p0: Index, ps: int) -> None:
        row_type, column_type = TileType((ps, width), f32), TileType((ps, 1), f32)
        values = load(e, source, [p0, 0], (ps, width), f32)
        if p == 2:
            powered = e.insert(tile.BinaryOp(values, values, "multiply", row_type)).result
        else:
            powered = e.insert(tile.UnaryOp(values, "abs", row_type)).result
            if p != 1:
                powered = e.insert(tile.BinaryScalarOp(powered, "power", row_type, scalar=p)).result
        norm = e.insert(tile.ReduceOp(powered, "add", column_type)).result
        if p == 2:
            norm = e.insert(tile.UnaryOp(norm, "sqrt", column_type)).result
        elif p != 1:
            norm = e.insert(tile.BinaryScalarOp(norm, "power", column_type, scalar=1.0 / p)).result
        too_long = e.insert(tile.BinaryScalarOp(norm, "is_gt", column_type, scalar=max_norm)).result
        chosen = e.insert(
            tile.BinaryOp(too_long, load(e, flags, [p0, 0], (ps, 1), f32), "multiply", column_type)
        ).result
        shrink = e.insert(tile.UnaryOp(e.insert(tile.BinaryScalarOp(norm, "add", column_type, scalar=1e-7)).result,
                                       "reciprocal", column_type)).result  # fmt: skip
        shrink = e.insert(tile.BinaryScalarOp(shrink, "multiply", column_type, scalar=max_norm)).result
        ones = e.insert(tile.FillOp(1.0, column_type)).result
        factor = e.insert(tile.SelectOp(chosen, shrink, ones, column_type)).result
        scaled = e.insert(tile.BinaryScalarOp(values, "multiply", TileType((ps, width), result_element_type(op)),
                                              column=factor)).result  # fmt: skip
        e.insert(tile.StoreOp(scaled, out, [e.index(p0), e.index(0)]))

    em.for_tiles(count, PARTITION_TILE, rows)
    return [out]


# ---- legality ------------------------------------------------------------------------------------------------

# ops whose `dim` indexes their `self`
_DIM_OPS = frozenset({
    "torch.aten.index_select", "torch.aten.gather", "torch.aten.scatter.src", "torch.aten.scatter.value",
    "torch.aten.scatter_add", "torch.aten.scatter.reduce", "torch.aten.scatter_reduce.two", "torch.aten.index_reduce",
})  # fmt: skip
_REDUCTIONS = {
    "torch.aten.scatter.reduce": ("add", "multiply"),
    "torch.aten.scatter_reduce.two": ("sum", "mean", *_DENSE_REDUCE),
    "torch.aten.index_reduce": ("mean", *_DENSE_REDUCE),
}


def _row_major(value: object) -> Layout | None:
    """A torch tensor argument as the row-major tensor `legal` measures accesses over (None stays None)."""
    return None if value is None else Layout.contiguous(tensor_shape(value))


def _measured_access(op: Operation, args: dict[str, Any]) -> IndexedAccess | None:
    """The indexed access the op's lowering makes over row-major operands (None when it makes none): the same
    builders as the lowerings, measuring layouts instead of emitting views."""
    name = op.name
    # per argument, as the op's schema has it: a layout, or a list of them (None for an absent index)
    rm: dict[str, Any] = {key: [_row_major(v) for v in value] if isinstance(value, list) else _row_major(value)
          for key, value in args.items() if isinstance(value, SSAValue | list)}  # fmt: skip
    reduce = str(args.get("reduce"))
    if name == "torch.aten.embedding":
        return _embedding_access(None, rm["weight"], rm["indices"])
    if name == "torch.aten.index_select":
        return _index_select_access(None, rm["self"], rm["index"], args["dim"]) if rm["self"].rank else None
    if name in ("torch.aten.gather", "torch.aten.scatter.src", "torch.aten.scatter.value", "torch.aten.scatter_add"):
        return _along_dim(None, rm["self"], args["dim"], rm["index"])
    if name in ("torch.aten.scatter.reduce", "torch.aten.scatter_reduce.two") and reduce not in _DENSE_REDUCE:
        return None if reduce == "multiply" else _along_dim(None, rm["self"], args["dim"], rm["index"])
    if name == "torch.aten.index_reduce" and reduce == "mean":
        rank = rm["source"].rank
        dim = normalize_dim(args["dim"], rank) if rank else 0
        return along_dim_access(None, rm["self"], dim, _spread_index(None, rm["index"], rm["source"], dim), False)
    if name in ("torch.aten.index.Tensor", "torch.aten._unsafe_index.Tensor"):
        return advanced_access(None, rm["self"], rm["indices"])
    if name in ("torch.aten.index_put", "torch.aten._unsafe_index_put"):
        masks = [_is_mask(index) for index in args["indices"]]
        if _mask_views(rm["self"], rm["indices"], masks, rm["values"]) is not None:
            return None
        return advanced_access(None, rm["self"], rm["indices"])
    if name == "torch.aten.embedding_dense_backward":
        width, rows = tensor_shape(args["grad_output"])[-1], tensor_shape(op.results[0])[0]
        return _dense_backward_access(None, rm["indices"], width, rows)
    if name in ("torch.aten._embedding_bag", "torch.aten._embedding_bag_forward_only"):
        return _bag_access(None, rm["weight"], rm["indices"])
    if name == "torch.aten.masked_scatter":
        count, available = math.prod(tensor_shape(op.results[0])), math.prod(tensor_shape(args["source"]))
        if not count or not available:
            return None
        shape = _prefix_rows(count)
        return IndexedAccess(shape, (0, 0), [IndexTerm(Layout.contiguous(shape), 1, available)])
    if name == "torch.aten.embedding_renorm":
        named, count = math.prod(tensor_shape(args["indices"])), tensor_shape(args["self"])[0]
        return IndexedAccess((named,), (0,), [IndexTerm(Layout((named,), (1,)), 1, count)]) if named else None
    return None


_ADVANCED_INDEXING = (
    "torch.aten.index.Tensor",
    "torch.aten._unsafe_index.Tensor",
    "torch.aten.index_put",
    "torch.aten._unsafe_index_put",
)


def _too_many_indices(source: SSAValue, indices: Sequence[Operand | None]) -> str | None:
    """ATen's refusal of more indices than the source has dimensions (a boolean mask indexes as many as its
    rank), or None."""
    rank = len(tensor_shape(source))
    count = sum(len(tensor_shape(index)) if _is_mask(index) else 1 for index in indices)
    if count > rank:
        return f"too many indices for a tensor of dimension {rank} (got {count})"
    return None


def legal(op: Operation) -> str | None:
    """Gathers and scatters lower when their arguments are ones the lowerings know (reductions, modes, ranks and
    sizes below) and their offsets stay exact in fp32 over row-major operands (`inexact`; a strided source is
    copied row-major first when its own strides would not)."""
    args = arguments_of(op)
    name = op.name
    if name in _DIM_OPS and (problem := dims_out_of_range(op)) is not None:
        return problem
    if name in _REDUCTIONS and str(args["reduce"]) not in _REDUCTIONS[name]:
        known = " (add or multiply)" if name == "torch.aten.scatter.reduce" else ""
        return f"unknown reduction '{args['reduce']}'{known}"
    if name in _ADVANCED_INDEXING and (problem := _too_many_indices(args["self"], args["indices"])) is not None:
        return problem
    if name in ("torch.aten.index.Tensor", "torch.aten._unsafe_index.Tensor"):
        if (problem := advanced_indexing_problem(args["indices"])) is not None:
            return problem
        source = Layout.contiguous(tensor_shape(args["self"]))
        computed = advanced_access(None, source, [_row_major(i) for i in args["indices"]]).shape
        if computed != tensor_shape(op.results[0]):
            return f"computed shape {computed} differs from the result's {tensor_shape(op.results[0])}"
    if name in ("torch.aten.index_put", "torch.aten._unsafe_index_put"):
        masks = [_is_mask(index) for index in args["indices"]]
        layouts = [_row_major(index) for index in args["indices"]]
        measured = _mask_views(_row_major(args["self"]), layouts, masks, _row_major(args["values"]))  # type: ignore[arg-type]
        if measured is None and (problem := advanced_indexing_problem(args["indices"])) is not None:
            return problem
    if name == "torch.aten.embedding_dense_backward":
        if args.get("scale_grad_by_freq"):
            return "scale_grad_by_freq needs per-index counts (not lowered)"
        grad, indices = tensor_shape(args["grad_output"]), tensor_shape(args["indices"])
        if grad != (*indices, grad[-1]):
            return f"grad_output of shape {grad} does not match indices x {grad[-1]}"
    if name == "torch.aten.masked_scatter":
        count = math.prod(tensor_shape(op.results[0]))
        if count and math.prod(tensor_shape(args["source"])) and (rows := _prefix_rows(count)[0]) > PARTITION_TILE:
            return f"{count} elements need {rows} rows of prefix counts, more than one tile of 128"
    if name in ("torch.aten._embedding_bag", "torch.aten._embedding_bag_forward_only"):
        mode, include_last = int(args.get("mode", 0)), bool(args.get("include_last_offset", False))
        if mode not in (0, 1, 2):
            return f"unknown mode {mode} (0 sum, 1 mean, 2 max)"
        indices, offsets = tensor_shape(args["indices"]), tensor_shape(args["offsets"])
        if len(indices) != 1 or len(offsets) != 1:
            return f"indices and offsets must be 1-d, got ranks {len(indices)} and {len(offsets)}"
        tokens, bags = indices[0], offsets[0] - (1 if include_last else 0)
        if bags > PARTITION_TILE or tokens > FREE_TILE or tokens == 0 or bags <= 0:
            return f"{bags} bags of {tokens} tokens: at most 128 bags of 1 to 2048 tokens lower"
    if name == "torch.aten.embedding_renorm":
        shape = tensor_shape(args["self"])
        if len(shape) != 2:
            return f"the weight must be 2-d, got rank {len(shape)}"
        if shape[1] > FREE_TILE:
            return f"rows of {shape[1]} elements: at most {FREE_TILE} (one tile per row) lower"
    access = _measured_access(op, args)
    return None if access is None else inexact(access)


INDEXING_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.embedding_renorm": _embedding_renorm,
    "torch.aten._embedding_bag_forward_only": _embedding_bag,
    "torch.aten._embedding_bag": _embedding_bag,
    "torch.aten.masked_scatter": _masked_scatter,
    "torch.aten.embedding": _embedding,
    "torch.aten.index_select": _index_select,
    "torch.aten.gather": _gather,
    "torch.aten.index.Tensor": _index_tensor,
    "torch.aten._unsafe_index.Tensor": _index_tensor,
    "torch.aten.scatter.src": _scatter("src"),
    "torch.aten.scatter.value": _scatter("value"),
    "torch.aten.scatter_add": _scatter("add"),
    "torch.aten.scatter.reduce": _scatter_with_reduce,
    "torch.aten.scatter_reduce.two": _scatter_reduce,
    "torch.aten.index_reduce": _index_reduce,
    "torch.aten.index_put": _index_put,
    "torch.aten._unsafe_index_put": _index_put,
    "torch.aten.embedding_dense_backward": _embedding_dense_backward,
}
