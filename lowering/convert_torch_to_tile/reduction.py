"""Reductions over any dims: kept dims on the partition axis, reduced dims on the free axis.

The input is viewed with its kept dimensions first and its reduced ones last (a free permutation of strides), each
group merged where contiguous. The last kept dimension is tiled over partitions, the reduced elements are folded
tile by tile on VectorE (`tile.reduce` per chunk of 2048, combined into a [P, 1] fp32 column), and the column is
stored into the output. Chunks of a 16-bit float load in their own type unless a transform computes on them: the
engines reduce in fp32 whatever they read, so the column is the same, and the DMAs move half the bytes of fp32
chunks. Reducing along what was the partition axis of the data therefore reads it transposed
through the DMA access pattern rather than moving it across partitions, one element per descriptor; so a float sum
whose kept elements are the contiguous ones (a bias or norm-weight gradient summing the rows of [tokens, features])
runs on TensorE instead (`_sum_rows_on_tensor_engine`): row tiles of 128 are the contraction of a matmul with a
ones column, each moving tile a run of up to 512 contiguous features, accumulated in PSUM. A reduction over few
elements per kept one (dims of size 1; a batch of two summed, as the gradient of a parameter broadcast over the
batch is) folds whole slabs instead, elementwise, in the kept elements' own layout (`_fold_slabs`). Reducing every
element of a large contiguous tensor spreads it over all partitions and combines the per-partition results on
TensorE (a matmul with a ones vector, or a transpose).

On top of the fold (`emit_reduce`, with an optional per-chunk transform such as `x != 0` for `any` or
`(x - mean)^2` for variances):

* arg-reductions (`argmax`/`argmin`, `max.dim`/`min.dim`) carry a (value, index) pair of columns: within a
  chunk the index is the smallest position (a GpSimdE iota) whose value equals the chunk's extreme, across
  chunks a later chunk wins only when strictly better, so the first extreme wins as in PyTorch; NaN counts as
  the extreme.
* variances are two passes: the mean, then the sum of squared deviations from it, divided by N - correction.

Reductions over no element give the identity (0 for sums, 1 for products, NaN for means, False for any).

Integer results are exact, never rounded through fp32 (which holds integers exactly only up to 2^24): a sum,
product, maximum or minimum whose result type is an integer (int64 for torch's sums and products of any integer
or bool input) folds integer tiles of that type (`tile.reduce` and `tile.binary` on integers, run on GpSimdE's
integer lanes, int64 as 64-bit software lanes) and wraps exactly as PyTorch's integers do. Chunks are loaded in
the result type when the DMA's conversion (through fp32) is exact (floats, truncated as torch casts them, and
integers of up to 16 bits), else in their own type and widened on GpSimdE; a chunk of integers of up to 16 bits
(bools when counting) sums in int32, which cannot overflow within a chunk, and only its column widens to int64
(`chunk_integer_type`). A full reduction combines the lanes' integer columns by moving them onto one partition
through an HBM scratch tensor (TensorE and PSUM sum in fp32). Integer arg-reductions compare exactly too (in
int32, or int64 for int64 inputs). An integer result that needs a scale or a chunk transform (integer means,
variances or norms: PyTorch has none) is refused rather than computed in fp32.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import AnyFloat, IntegerType, i32, i64
from xdsl.dialects.builtin import f32 as F32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.neuron import target_of
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    FREE_TILE,
    PARTITION_TILE,
    Lowering,
    alloc,
    column_tile,
    dims_out_of_range,
    element_bytes,
    element_type_of,
    emitter_target,
    fold_nest,
    layout_of,
    load,
    result_element_type,
    store,
    tensor_element_type,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import TileCompute, TileMath, emit_elementwise, lane_split
from neuron_mlir.lowering.convert_torch_to_tile.matmul import split_axis
from neuron_mlir.lowering.layout import Layout, collapse, normalize_dim
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory

# Free-axis chunk of an integer fold or scan: its tiles are int64 (twice fp32's bytes) and a fold or scan keeps
# a scratch copy beside them, so chunks stay at 2048 elements (16 KiB per partition) whatever the float tiles are.
INTEGER_TILE = 2048
# how partial results of each reduction combine
_COMBINE = {"add": "add", "max": "max", "min": "min", "multiply": "multiply"}
# the result of reducing no element
_IDENTITY = {"add": 0.0, "multiply": 1.0, "max": -math.inf, "min": math.inf}


def reduced_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    chosen = {normalize_dim(d, len(shape)) for d in dims} if dims else set(range(len(shape)))
    if keepdim:
        return tuple(1 if i in chosen else extent for i, extent in enumerate(shape))
    return tuple(extent for i, extent in enumerate(shape) if i not in chosen)


def is_exact_integer(element_type: Attribute) -> bool:
    """Integers wider than bool: their reductions and scans must not round through fp32."""
    return isinstance(element_type, IntegerType) and element_type.width.data > 1


def chunk_integer_type(source_type: Attribute, result_type: Attribute, op: str) -> Attribute:
    """The integer type a chunk folds in before its column joins the `result_type` fold. A sum, maximum or
    minimum of a chunk (at most `INTEGER_TILE` elements) of integers of up to 16 bits fits int32, whose GpSimdE
    lanes cost half of int64's: counting bools into int64 folds each chunk in int32 and widens the column."""
    narrow = isinstance(source_type, IntegerType) and source_type.width.data <= 16
    wide_result = isinstance(result_type, IntegerType) and result_type.width.data > 32
    return i32 if narrow and wide_result and op in ("add", "max", "min") else result_type


def load_exact(
    em: LoopNestBuilder,
    tensor: SSAValue,
    indices: Sequence[Index],
    shape: Sequence[int],
    element_type: Attribute,
    dims: Sequence[int] | None = None,
) -> SSAValue:
    """A tile of `tensor` as exact `element_type` integers. The DMA converts through fp32, which is exact for
    floats (truncated toward zero, as torch casts them) and integers of up to 16 bits; wider integers of
    another type load as they are and GpSimdE converts them (wrapping, as torch's integer casts do)."""
    source_type = element_type_of(tensor)
    if source_type == element_type or not (isinstance(source_type, IntegerType) and source_type.width.data > 16):
        return load(em, tensor, indices, shape, element_type, dims)
    value = load(em, tensor, indices, shape, source_type, dims)
    return em.insert(tile.CopyOp(value, TileType(tuple(shape), element_type, Memory.SBUF))).result


@dataclass
class RowTile:
    """Where a fold is: the kept-dims indices of a tile of `partitions` rows (for loading per-row columns)."""

    indices: list[Index]
    partitions: int


# transform(emitter, chunk [P, size] tile, row tile) -> the [P, size] tile to fold
ChunkTransform = Callable[[LoopNestBuilder, SSAValue, RowTile], SSAValue]


class ReductionSpace:
    """`source` viewed as [kept..., reduced...] and a kept-shaped tensor viewed as [kept..., 1]."""

    def __init__(self, em: LoopNestBuilder, source: SSAValue, dims: Sequence[int]):
        layout = layout_of(source)
        if layout.rank == 0:
            layout = Layout((1,), (0,), layout.offset)
        rank = layout.rank
        chosen = sorted({normalize_dim(d, rank) for d in dims}) if dims else list(range(rank))
        self.kept = [d for d in range(rank) if d not in chosen]
        self.chosen = chosen
        permuted = layout.permute(self.kept + chosen)
        self.kept_shape = permuted.shape[: len(self.kept)]
        # kept dims merge where contiguous in the source and in a contiguous result alike
        kept_dims, (kept_strides, _) = collapse(
            self.kept_shape, [permuted.strides[: len(self.kept)], Layout.contiguous(self.kept_shape).strides]
        )
        reduced_dims, (reduced_strides,) = collapse(
            permuted.shape[len(self.kept) :], [permuted.strides[len(self.kept) :]]
        )
        if not kept_dims:
            kept_dims, kept_strides = (1,), (0,)
        if not reduced_dims:
            reduced_dims, reduced_strides = (1,), (0,)
        self.kept_dims, self.reduced_dims = tuple(kept_dims), tuple(reduced_dims)
        self.count = math.prod(permuted.shape[len(self.kept) :])
        self.source_view = view(
            em, source, Layout((*kept_dims, *reduced_dims), (*kept_strides, *reduced_strides), layout.offset)
        )

    def kept_view(self, em: LoopNestBuilder, tensor: SSAValue) -> SSAValue:
        """A contiguous tensor holding one value per kept index (a keepdim or a plain reduction result) as
        [kept..., 1] in this space: the kept dims were merged only where a contiguous tensor merges them too."""
        layout = layout_of(tensor)
        assert layout.is_contiguous(), f"a reduction result must be contiguous, got {layout}"
        assert layout.num_elements == math.prod(self.kept_dims), f"{layout.shape} does not hold {self.kept_dims}"
        strides = Layout.contiguous(self.kept_dims).strides
        return view(em, tensor, Layout((*self.kept_dims, 1), (*strides, 1), layout.offset))

    @property
    def leading(self) -> tuple[int, ...]:
        return self.kept_dims[:-1]

    @property
    def partitions(self) -> int:
        return self.kept_dims[-1]

    def load_chunk(
        self,
        e: LoopNestBuilder,
        row: RowTile,
        reduced_index: list[Index],
        f0: Index,
        size: int,
        integer_type: Attribute | None = None,
        float_type: Attribute = F32,
    ) -> SSAValue:
        """A [rows, size] chunk: of `float_type` (fp32 unless given), or exact integers of `integer_type`."""
        free_dim = len(self.kept_dims) + len(self.reduced_dims) - 1
        indices, shape = [*row.indices, *reduced_index, f0], (row.partitions, size)
        dims = (len(self.kept_dims) - 1, free_dim)
        if integer_type is not None:
            return load_exact(e, self.source_view, indices, shape, integer_type, dims)
        return load(e, self.source_view, indices, shape, float_type, dims)

    def for_rows(self, em: LoopNestBuilder, body: Callable[[LoopNestBuilder, RowTile], None]) -> None:
        em.for_each_index(
            self.leading,
            lambda e, prefix: e.for_tiles(
                self.partitions, PARTITION_TILE, lambda e2, p0, p: body(e2, RowTile([*prefix, p0], p))
            ),
        )


def emit_reduce(
    em: LoopNestBuilder,
    source: SSAValue,
    dims: Sequence[int],
    keepdim: bool,
    op: str,
    out_element_type: Attribute,
    scale: float | None = None,
    transform: ChunkTransform | None = None,
    empty_value: float | None = None,
) -> SSAValue:
    """Reduce `source` over `dims` (all dims when empty) with `op`; `scale` multiplies the result (means),
    `transform` maps each loaded chunk before it is folded and `empty_value` is the result over no element
    (default: the identity of `op`, NaN for a scaled sum)."""
    integer = is_exact_integer(out_element_type)
    assert not integer or (scale is None and transform is None), "integer results are exact: `legal` says so"
    integer_type = chunk_integer_type(element_type_of(source), out_element_type, op) if integer else None
    column_type = out_element_type if integer else F32
    space = ReductionSpace(em, source, dims)
    out_shape = reduced_shape(layout_of(source).shape, dims, keepdim)
    out = alloc(em, out_shape, out_element_type)
    if space.count == 0:
        value = _IDENTITY[op] if scale is None or op != "add" else math.nan
        value = value if empty_value is None else empty_value
        return emit_elementwise(em, out_shape, out_element_type, [], lambda e, t, r: _fill(e, value, r), out)
    if (
        not space.kept
        and transform in (None, _nonzero, _magnitude)
        and _reduce_on_every_lane(em, source, op, out, scale, transform)
    ):
        return out
    if space.kept and transform is None and _folds_slabs(em, space, integer, op):
        return _fold_slabs(em, source, space, keepdim, op, out, scale)
    if op == "add" and not integer and transform is None and _sums_rows(space):
        _sum_rows_on_tensor_engine(em, space, out, scale)
        return out
    out_view = space.kept_view(em, out)
    combine = _COMBINE[op]
    chunk_size = INTEGER_TILE if integer else FREE_TILE
    chunk_type = _chunk_float_type(source, transform)

    def partial(e: LoopNestBuilder, row: RowTile, reduced_index: list[Index], f0: Index, size: int) -> SSAValue:
        chunk = space.load_chunk(e, row, reduced_index, f0, size, integer_type, chunk_type)
        if transform is not None:
            chunk = transform(e, chunk, row)
        if integer_type is not None and integer_type != column_type:
            folded = e.insert(tile.ReduceOp(chunk, op, column_tile(row.partitions, integer_type))).result
            return e.insert(tile.CopyOp(folded, column_tile(row.partitions, column_type))).result
        return e.insert(tile.ReduceOp(chunk, op, column_tile(row.partitions, column_type))).result

    def fold(e: LoopNestBuilder, acc: SSAValue, value: SSAValue) -> SSAValue:
        return e.insert(tile.BinaryOp(acc, value, combine, acc.type)).result  # type: ignore[arg-type]

    def over(e: LoopNestBuilder, row: RowTile, remaining: tuple[int, ...], reduced_index: list[Index]) -> SSAValue:
        if len(remaining) == 1:
            return e.accumulate_tiles(
                remaining[0],
                chunk_size,
                lambda e2, f0, size: partial(e2, row, reduced_index, f0, size),
                lambda e2, f0, size, acc: fold(e2, acc, partial(e2, row, reduced_index, f0, size)),
            )
        return e.accumulate_each(
            remaining[0],
            lambda e2, i: over(e2, row, remaining[1:], [*reduced_index, i]),
            lambda e2, i, acc: fold(e2, acc, over(e2, row, remaining[1:], [*reduced_index, i])),
        )

    def row_tile(e: LoopNestBuilder, row: RowTile) -> None:
        result = over(e, row, space.reduced_dims, [])
        if scale is not None:
            result = e.insert(tile.BinaryScalarOp(result, "multiply", column_tile(row.partitions), scalar=scale)).result
        store(e, to_sbuf(e, result, out_element_type), out_view, [*row.indices, 0])

    space.for_rows(em, row_tile)
    return out


def _chunk_float_type(source: SSAValue, transform: ChunkTransform | None) -> Attribute:
    """The type a float reduction's chunks load in: a 16-bit float source's own type when the chunks are only
    folded (the engines reduce in fp32 whatever they read, so the column is the same bits), which halves the bytes
    the DMAs move and lets VectorE reduce bf16 at twice its fp32 rate; fp32 for a chunk transform, which computes
    on the chunk."""
    element_type = element_type_of(source)
    if transform is None and isinstance(element_type, AnyFloat) and element_type.bitwidth == 16:
        return element_type
    return F32


# Slabs one elementwise pass of `_fold_slabs` reads: each is an operand of one nest, whose tiles all live in SBUF
# at once.
SLABS_PER_PASS = 8
# Most reduced elements per kept one that `_fold_slabs` folds: a bound on the passes (each re-reads the partial
# result and waits for the one before).
SLAB_FOLD_LIMIT = 64


def _folds_slabs(em: LoopNestBuilder, space: ReductionSpace, integer: bool, op: str) -> bool:
    """Whether to fold whole float slabs elementwise (`_fold_slabs`): one element per kept one (a reduction over
    dims of size 1, which the fold would load as [128, 1] columns, one descriptor per element), or a few with the
    kept elements contiguous, for sums when the passes are fewer than TensorE's row sum would take matmuls (one per
    512 kept elements per 128 rows: a batch of 2 summed over 1500 x 768 elements is 1 pass against 2250 matmuls
    contracting 2 of their 128 rows each; simulated trn2, fp32: 42 us against 2297; 64 slabs of 300 x 768, 191
    us against 554)."""
    if integer or space.count > SLAB_FOLD_LIMIT:  # integers keep their exact fold
        return False
    if space.count == 1:
        return True
    if layout_of(space.source_view).strides[len(space.kept_dims) - 1] != 1:
        return False
    passes = 1 + math.ceil(max(0, space.count - SLABS_PER_PASS) / (SLABS_PER_PASS - 1))
    chunks = math.ceil(math.prod(space.kept_dims) / emitter_target(em).matmul_max_moving_free)
    row_sums = chunks * math.ceil(space.count / PARTITION_TILE)
    return op != "add" or passes < row_sums


def _fold_slabs(
    em: LoopNestBuilder,
    source: SSAValue,
    space: ReductionSpace,
    keepdim: bool,
    op: str,
    out: SSAValue,
    scale: float | None,
) -> SSAValue:
    """out = slab_0 <op> slab_1 <op> ... (times `scale`), a slab being `source` at one index of the reduced dims,
    shaped like `out`: elementwise nests over the kept elements in their own layout, each slab one operand,
    folded in index order (eager's order for a reduction over outer dims). Past `SLABS_PER_PASS` slabs, each
    later pass folds the partial result in `out` with the next slabs."""
    layout = layout_of(source)
    reduced_strides = [layout.strides[d] for d in space.chosen]
    dims = [d for d in range(layout.rank) if d not in space.chosen or keepdim]
    shape = tuple(1 if d in space.chosen else layout.shape[d] for d in dims)
    strides = tuple(0 if d in space.chosen else layout.strides[d] for d in dims)
    offsets = [
        layout.offset + sum(i * s for i, s in zip(index, reduced_strides, strict=True))
        for index in itertools.product(*(range(layout.shape[d]) for d in space.chosen))
    ]
    combine = _COMBINE[op]

    def folded(last: bool) -> TileCompute:
        def compute(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
            maths = TileMath(e, result)
            total = tiles[0]
            for value in tiles[1:]:
                total = maths.bin(combine, total, value)
            return total if not last or scale is None or scale == 1.0 else maths.sc("multiply", total, scale)

        return compute

    first, rest = offsets[:SLABS_PER_PASS], offsets[SLABS_PER_PASS:]
    passes = [first] + [rest[i : i + SLABS_PER_PASS - 1] for i in range(0, len(rest), SLABS_PER_PASS - 1)]
    for number, group in enumerate(passes):
        slabs = [view(em, source, Layout(shape, strides, offset)) for offset in group]
        operands = slabs if number == 0 else [out, *slabs]
        last = number == len(passes) - 1
        emit_elementwise(em, layout_of(out).shape, element_type_of(out), operands, folded(last), out, wide=True)
    return out


def _sums_rows(space: ReductionSpace) -> bool:
    """Whether the fold would read the data transposed: the kept elements (partitions) are contiguous and the
    innermost reduced dim is not."""
    strides = layout_of(space.source_view).strides
    kept_stride, reduced_stride = strides[len(space.kept_dims) - 1], strides[-1]
    return space.count > 1 and space.partitions > 1 and kept_stride == 1 and reduced_stride != 1


# Bytes per partition of one load of a row sum: a group of row tiles per DMA, so each transfer's fixed cost is
# paid once per group, not once per 128 rows.
ROW_GROUP_BYTES = 8 * 1024


def _sum_rows_on_tensor_engine(em: LoopNestBuilder, space: ReductionSpace, out: SSAValue, scale: float | None) -> None:
    """out[kept] = sum over the reduced dims, the innermost reduced dim as TensorE's contraction (see the module
    docstring): per chunk of up to 512 kept elements, one PSUM row accumulates ones[rows]^T @ rows."""
    anchor = em.anchor if em.anchor is not None else em.block.parent_op()
    assert anchor is not None
    limits = target_of(anchor)
    k_tile, n_tile = limits.matmul_max_k, limits.matmul_max_moving_free
    operand_type = element_type_of(space.source_view)
    if not isinstance(operand_type, AnyFloat) or str(operand_type) not in ("f32", "bf16", "f16"):
        operand_type = F32
    kept_rank = len(space.kept_dims)
    *outer_reduced, rows = space.reduced_dims
    out_layout = layout_of(out)
    out_rows = view(
        em,
        out,
        Layout(
            (*space.leading, 1, space.partitions),
            (*Layout.contiguous(space.kept_dims).strides[:-1], 0, 1),
            out_layout.offset,
        ),
    )

    rank = kept_rank + len(space.reduced_dims)
    row_tiles, rest = divmod(rows, k_tile)
    # rows as [row tiles, k_tile]: a group of row tiles is one DMA, [k_tile, tiles, ks]
    grouped = split_axis(em, space.source_view, rank - 1, row_tiles, k_tile) if row_tiles else None
    group = max(1, ROW_GROUP_BYTES // (n_tile * element_bytes(operand_type)))

    def chunk(e: LoopNestBuilder, leading: list[Index], k0: Index, ks: int) -> None:
        result_type = TileType((1, ks), F32, Memory.PSUM)
        rows_type = TileType((k_tile, ks), operand_type, Memory.SBUF)
        ones = e.insert(tile.FillOp(1.0, TileType((k_tile, 1), operand_type, Memory.SBUF))).result

        def tiles_step(
            e2: LoopNestBuilder, outer: list[Index], t0: Index, tiles: int, acc: SSAValue | None
        ) -> SSAValue:
            assert grouped is not None
            moving = load(e2, grouped, [*leading, k0, *outer, t0, 0], (k_tile, tiles, ks), operand_type,
                          dims=(rank, rank - 1, kept_rank - 1))  # fmt: skip
            for t in range(tiles):
                rows_tile = e2.insert(tile.ExtractOp(moving, [e2.index(t), e2.index(0)], rows_type)).result
                acc = e2.insert(tile.MatmulOp(ones, rows_tile, result_type, acc)).result
            assert acc is not None
            return acc

        def rest_step(e2: LoopNestBuilder, outer: list[Index], acc: SSAValue | None) -> SSAValue:
            moving = load(e2, space.source_view, [*leading, k0, *outer, row_tiles * k_tile], (rest, ks), operand_type,
                          dims=(rank - 1, kept_rank - 1))  # fmt: skip
            ones_rest = e2.insert(tile.FillOp(1.0, TileType((rest, 1), operand_type, Memory.SBUF))).result
            return e2.insert(tile.MatmulOp(ones_rest, moving, result_type, acc)).result

        def per_outer(e2: LoopNestBuilder, outer: list[Index], _: list[int], acc: SSAValue | None) -> SSAValue:
            if row_tiles:
                acc = fold_nest(e2, [(row_tiles, group)], lambda e3, o, s, a: tiles_step(e3, outer, o[0], s[0], a), acc)
            if rest:
                acc = rest_step(e2, outer, acc)
            assert acc is not None
            return acc

        total = fold_nest(e, [(extent, 1) for extent in outer_reduced], per_outer)
        if scale is not None:
            total = e.insert(
                tile.BinaryScalarOp(total, "multiply", TileType((1, ks), F32, Memory.SBUF), scalar=scale)
            ).result
        store(e, to_sbuf(e, total, element_type_of(out)), out_rows, [*leading, 0, k0])

    em.for_each_index(
        space.leading,
        lambda e, prefix: e.for_tiles(space.partitions, n_tile, lambda e2, k0, ks: chunk(e2, prefix, k0, ks)),
    )


def _reduce_on_every_lane(
    em: LoopNestBuilder, source: SSAValue, op: str, out: SSAValue, scale: float | None, transform: ChunkTransform | None
) -> bool:
    """A reduction of every element of a contiguous tensor with more than one chunk: the elements spread over
    up to 128 partitions, each folds its share on VectorE, and TensorE combines the [P, 1] column: a matmul
    with a ones vector sums it, a transpose lays it on one partition for the other operators (only where the
    transpose is bit exact, v3+). An integer result folds exactly on GpSimdE and its column reaches one
    partition through HBM (`_combine_lanes_exactly`). False when the tensor does not qualify (the caller folds
    on one lane)."""
    layout = layout_of(source)
    count = layout.num_elements
    lanes = lane_split(count)
    if not layout.is_contiguous() or count <= FREE_TILE or lanes < 2:
        return False
    out_type = element_type_of(out)
    integer = is_exact_integer(out_type)
    anchor = em.anchor if em.anchor is not None else em.block.parent_op()
    exact_transpose = anchor is not None and target_of(anchor).matmul_transpose_bit_exact
    if op != "add" and not exact_transpose and not integer:
        return False
    column_type = out_type if integer else F32
    chunk_type = chunk_integer_type(element_type_of(source), out_type, op) if integer else F32
    width = count // lanes
    spread = view(em, source, Layout((lanes, width), (width, 1), layout.offset))
    row = RowTile([0], lanes)

    def partial(e: LoopNestBuilder, f0: Index, size: int) -> SSAValue:
        if integer:
            chunk = load_exact(e, spread, [0, f0], (lanes, size), chunk_type)
        else:
            chunk = load(e, spread, [0, f0], (lanes, size), F32)
        if transform is not None:
            chunk = transform(e, chunk, row)
        if chunk_type != column_type:
            folded = e.insert(tile.ReduceOp(chunk, op, column_tile(lanes, chunk_type))).result
            return e.insert(tile.CopyOp(folded, column_tile(lanes, column_type))).result
        return e.insert(tile.ReduceOp(chunk, op, column_tile(lanes, column_type))).result

    def fold(e: LoopNestBuilder, f0: Index, size: int, acc: SSAValue) -> SSAValue:
        return e.insert(tile.BinaryOp(acc, partial(e, f0, size), _COMBINE[op], column_tile(lanes, column_type))).result

    column = em.accumulate_tiles(width, INTEGER_TILE if integer else FREE_TILE, partial, fold)
    if integer:
        _combine_lanes_exactly(em, column, op, out)
        return True
    single = TileType((1, 1), F32, Memory.PSUM)
    if op == "add":
        ones = em.insert(tile.FillOp(1.0, column_tile(lanes))).result
        total: SSAValue = em.insert(tile.MatmulOp(column, ones, single)).result
    else:
        row_tile = em.insert(tile.TransposeOp(column)).result
        total = em.insert(tile.ReduceOp(row_tile, op, column_tile(1))).result
    total = to_sbuf(em, total, F32)
    if scale is not None:
        total = em.insert(tile.BinaryScalarOp(total, "multiply", column_tile(1), scalar=scale)).result
    out_layout = layout_of(out)
    store(
        em, to_sbuf(em, total, element_type_of(out)), view(em, out, Layout((1, 1), (0, 0), out_layout.offset)), [0, 0]
    )
    return True


def _combine_lanes_exactly(em: LoopNestBuilder, column: SSAValue, op: str, out: SSAValue) -> None:
    """Fold a [lanes, 1] integer column into the one-element `out` exactly: the column is stored to an HBM
    scratch tensor and loaded back as one row (a DMA moves bits, where TensorE would sum or transpose through
    fp32 PSUM), which GpSimdE then folds."""
    column_type = column.type
    assert isinstance(column_type, TileType)
    lanes, element_type = column_type.partitions, column_type.element_type
    scratch = alloc(em, (lanes,), element_type)
    store(em, column, view(em, scratch, Layout((lanes, 1), (1, 1), 0)), [0, 0])
    row = load(em, view(em, scratch, Layout((1, lanes), (lanes, 1), 0)), [0, 0], (1, lanes))
    total = em.insert(tile.ReduceOp(row, op, column_tile(1, element_type))).result
    store(em, total, view(em, out, Layout((1, 1), (0, 0), layout_of(out).offset)), [0, 0])


def _fill(em: LoopNestBuilder, value: float, result: TileType) -> SSAValue:
    return em.insert(tile.FillOp(value, result)).result


def _positions(em: LoopNestBuilder, tile_type: TileType, f0: Index) -> SSAValue:
    """Each element's position along the free axis, starting at `f0` (a GpSimdE iota)."""
    if isinstance(f0, int):
        return em.insert(tile.IotaOp(tile_type, [1], base=f0)).result
    return em.insert(tile.IotaOp(tile_type, [1], offset=f0)).result


def emit_arg_reduce(
    em: LoopNestBuilder, source: SSAValue, dim: int | None, keepdim: bool, op: str, value_type: Attribute | None
) -> tuple[SSAValue | None, SSAValue]:
    """(values, int64 indices) of the first maximum (`op` = "max") or minimum along `dim` (None: flattened)."""
    shape = layout_of(source).shape
    if dim is None:
        # the flattened tensor: a view when the input is contiguous, else a contiguous copy first
        if not layout_of(source).is_contiguous():
            source = emit_elementwise(em, shape, element_type_of(source), [source], lambda e, t, r: t[0])
        layout = layout_of(source)
        source = view(em, source, Layout((max(1, math.prod(shape)),), (1,), layout.offset))
        dims: list[int] = [0]
    else:
        dims = [dim]
    space = ReductionSpace(em, source, dims)
    if dim is None:
        out_shape: tuple[int, ...] = tuple(1 for _ in shape) if keepdim else ()
    else:
        out_shape = reduced_shape(shape, dims, keepdim)
    indices = alloc(em, out_shape, i64)
    values = alloc(em, out_shape, value_type) if value_type is not None else None
    source_type = element_type_of(source)
    # Integers compare exactly on GpSimdE (fp32 would merge neighbouring integers beyond 2^24 and pick the wrong
    # one): their values fold in int32 (int64 for int64 inputs), positions are int32 iotas, and there is no NaN
    # to track. Floats fold in fp32 with fp32 positions (exact up to 2^24), NaN counting as the extreme.
    exact = is_exact_integer(source_type)
    if exact:
        assert isinstance(source_type, IntegerType)
        work: Attribute = i64 if source_type.width.data > 32 else i32
        position_type: Attribute = i32
    else:
        work = position_type = F32
    never = float(2**30 if exact else 2**24)  # a position past any chunk's, which a "min" never picks
    index_view = space.kept_view(em, indices)
    value_view = space.kept_view(em, values) if values is not None else None
    better = "is_gt" if op == "max" else "is_lt"

    def chunk_extreme(e: LoopNestBuilder, row: RowTile, f0: Index, size: int) -> list[SSAValue]:
        p = row.partitions
        x = space.load_chunk(e, row, [], f0, size, work if exact else None)
        extreme = e.insert(tile.ReduceOp(x, op, column_tile(p, work))).result
        whole = TileType((p, size), work, Memory.SBUF)
        hit = e.insert(tile.BinaryScalarOp(x, "is_equal", whole, column=extreme)).result
        if not exact:
            is_nan = e.insert(tile.BinaryOp(x, x, "not_equal", whole)).result
            hit = e.insert(tile.BinaryOp(hit, is_nan, "logical_or", whole)).result
        positions = TileType((p, size), position_type, Memory.SBUF)
        position = _positions(e, positions, f0)
        beyond = e.insert(tile.FillOp(never, positions)).result
        candidates = e.insert(tile.SelectOp(hit, position, beyond, positions)).result
        return [extreme, e.insert(tile.ReduceOp(candidates, "min", column_tile(p, position_type))).result]

    def combine(e: LoopNestBuilder, row: RowTile, f0: Index, size: int, acc: list[SSAValue]) -> list[SSAValue]:
        p = row.partitions
        extreme, index = chunk_extreme(e, row, f0, size)
        best, best_index = acc
        column = column_tile(p, work)
        # a later chunk wins only when strictly better (the first extreme keeps its index), or NaN over a number
        # (NaN is the extreme)
        wins = e.insert(tile.BinaryOp(extreme, best, better, column)).result
        if not exact:
            new_nan = e.insert(tile.BinaryOp(extreme, extreme, "not_equal", column)).result
            old_number = e.insert(tile.BinaryOp(best, best, "is_equal", column)).result
            nan_wins = e.insert(tile.BinaryOp(new_nan, old_number, "logical_and", column)).result
            wins = e.insert(tile.BinaryOp(wins, nan_wins, "logical_or", column)).result
        best = e.insert(tile.SelectOp(wins, extreme, best, column)).result
        best_index = e.insert(tile.SelectOp(wins, index, best_index, column_tile(p, position_type))).result
        return [best, best_index]

    # one reduced dimension: the space merged nothing into it
    (length,) = space.reduced_dims

    def row_tile(e: LoopNestBuilder, row: RowTile) -> None:
        best, best_index = e.accumulate_tile_values(
            length,
            INTEGER_TILE if exact else FREE_TILE,
            lambda e2, f0, size: chunk_extreme(e2, row, f0, size),
            lambda e2, f0, size, acc: combine(e2, row, f0, size, acc),
        )
        store(e, to_sbuf(e, best_index, i64), index_view, [*row.indices, 0])
        if value_view is not None and value_type is not None:
            store(e, to_sbuf(e, best, value_type), value_view, [*row.indices, 0])

    space.for_rows(em, row_tile)
    return values, indices


# ---- ATen ops ------------------------------------------------------------------------------------------------


def _dims(args: dict[str, Any]) -> list[int]:
    dims = args.get("dim")
    if dims is None:
        return []
    return [dims] if isinstance(dims, int) else list(dims)


def _count(shape: Sequence[int], dims: Sequence[int]) -> int:
    chosen = {normalize_dim(d, len(shape)) for d in dims} if dims else set(range(len(shape)))
    return math.prod(shape[d] for d in chosen) if shape else 1


def _reduce(op_name: str, mean: bool = False) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        source = args["self"]
        dims = _dims(args)
        scale = None
        if mean:
            count = _count(layout_of(source).shape, dims)
            scale = 1.0 / count if count else math.nan
        keepdim = bool(args.get("keepdim", False))
        return [emit_reduce(em, source, dims, keepdim, op_name, result_element_type(op), scale)]

    return lower


def _nonzero(e: LoopNestBuilder, chunk: SSAValue, row: RowTile) -> SSAValue:
    return e.insert(tile.BinaryScalarOp(chunk, "not_equal", chunk.type, scalar=0.0)).result  # type: ignore[arg-type]


def _magnitude(e: LoopNestBuilder, chunk: SSAValue, row: RowTile) -> SSAValue:
    return e.insert(tile.UnaryOp(chunk, "abs", chunk.type)).result  # type: ignore[arg-type]


def _any(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    source, dims, keepdim = args["self"], _dims(args), bool(args.get("keepdim", False))
    return [emit_reduce(em, source, dims, keepdim, "max", result_element_type(op), None, _nonzero, 0.0)]


def _full_reduce(op_name: str) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        return [emit_reduce(em, args["self"], [], False, op_name, result_element_type(op))]

    return lower


def _arg_reduce(op_name: str) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        dim = args.get("dim")
        _, indices = emit_arg_reduce(em, args["self"], dim, bool(args.get("keepdim", False)), op_name, None)
        return [indices]

    return lower


def _max_min_dim(op_name: str) -> Lowering:
    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        keepdim = bool(args.get("keepdim", False))
        values, indices = emit_arg_reduce(em, args["self"], int(args["dim"]), keepdim, op_name, result_element_type(op))
        assert values is not None
        return [values, indices]

    return lower


def emit_variance(
    em: LoopNestBuilder, source: SSAValue, dims: Sequence[int], keepdim: bool, correction: float, out_type: Attribute
) -> tuple[SSAValue, SSAValue]:
    """(variance, mean) over `dims`: the mean first, then the sum of squared deviations / (N - correction)."""
    count = _count(layout_of(source).shape, dims)
    mean = emit_reduce(em, source, dims, True, "add", F32, 1.0 / count if count else math.nan)
    mean_view = ReductionSpace(em, source, dims).kept_view(em, mean)

    def squared_deviation(e: LoopNestBuilder, chunk: SSAValue, row: RowTile) -> SSAValue:
        chunk_type = chunk.type
        assert isinstance(chunk_type, TileType)
        column = load(e, mean_view, [*row.indices, 0], (row.partitions, 1), F32)
        deviation = e.insert(tile.BinaryScalarOp(chunk, "subtract", chunk_type, column=column)).result
        return e.insert(tile.UnaryOp(deviation, "square", chunk_type)).result

    divisor = count - correction
    scale = 1.0 / divisor if divisor > 0 else math.inf
    variance = emit_reduce(em, source, dims, keepdim, "add", out_type, scale, squared_deviation)
    if keepdim:
        mean_out = mean
    else:
        mean_out = view(em, mean, _squeezed(layout_of(mean), reduced_shape(layout_of(source).shape, dims, False)))
    return variance, mean_out


def _squeezed(layout: Layout, shape: tuple[int, ...]) -> Layout:
    squeezed = layout.reshape(list(shape))
    assert squeezed is not None
    return squeezed


def _correction(args: dict[str, Any]) -> float:
    if "unbiased" in args:
        return 1.0 if args.get("unbiased", True) else 0.0
    correction = args.get("correction")
    return 1.0 if correction is None else float(correction)


def _var(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    variance, _ = emit_variance(
        em, args["self"], _dims(args), bool(args.get("keepdim", False)), _correction(args), result_element_type(op)
    )
    return [variance]


def _var_mean(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    out_type = result_element_type(op)
    variance, mean = emit_variance(
        em, args["self"], _dims(args), bool(args.get("keepdim", False)), _correction(args), out_type
    )
    if out_type != F32:
        mean = emit_elementwise(em, layout_of(mean).shape, out_type, [mean], lambda e, t, r: to_sbuf(e, t[0], out_type))
    return [variance, mean]


def _vector_norm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """linalg_vector_norm: max/min of |x| for ord +-inf, the count of non-zeros for 0, else sum(|x|^ord)^(1/ord)
    (sqrt of a sum of squares for 2: ScalarE's square and sqrt)."""
    source, dims, keepdim = args["self"], _dims(args), bool(args.get("keepdim", False))
    order = float(args.get("ord", 2))
    out_type = result_element_type(op)

    def powered(e: LoopNestBuilder, chunk: SSAValue, row: RowTile) -> SSAValue:
        chunk_type = chunk.type
        assert isinstance(chunk_type, TileType)
        if order == 0:
            return e.insert(tile.BinaryScalarOp(chunk, "not_equal", chunk_type, scalar=0.0)).result
        if order == 2:
            return e.insert(tile.UnaryOp(chunk, "square", chunk_type)).result
        magnitude = _magnitude(e, chunk, row)
        if order == 1:
            return magnitude
        return e.insert(tile.BinaryScalarOp(magnitude, "power", chunk_type, scalar=order)).result

    if math.isinf(order):
        return [emit_reduce(em, source, dims, keepdim, "max" if order > 0 else "min", out_type, None, _magnitude)]
    if order in (0, 1):
        return [emit_reduce(em, source, dims, keepdim, "add", out_type, None, powered, 0.0)]
    total = emit_reduce(em, source, dims, keepdim, "add", F32, None, powered, 0.0)

    def root(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        if order == 2:
            return e.insert(tile.UnaryOp(tiles[0], "sqrt", result)).result
        return e.insert(tile.BinaryScalarOp(tiles[0], "power", result, scalar=1.0 / order)).result

    return [emit_elementwise(em, layout_of(total).shape, out_type, [total], root)]


# Reductions that scale their sum (means, variances) or transform each chunk before folding it (norms).
_SCALED = frozenset({"torch.aten.mean", "torch.aten.mean.dim", "torch.aten.var.correction", "torch.aten.var.dim",
                     "torch.aten.var_mean.correction"})  # fmt: skip
_TRANSFORMED = frozenset({"torch.aten.linalg_vector_norm"})


def legal(op: Operation) -> str | None:
    """Reductions lower over any dims of their input; an integer result must be exact, so a reduction that scales
    or transforms (integer means, variances, norms: PyTorch has none) does not lower rather than round."""
    if (problem := dims_out_of_range(op)) is not None:
        return problem
    out_type = tensor_element_type(op.results[0])
    if is_exact_integer(out_type) and (op.name in _SCALED or op.name in _TRANSFORMED):
        what = "a scaled" if op.name in _SCALED else "a transformed"
        return (
            f"{what} reduction with an integer result ({out_type}) has no exact lowering (it would round through fp32)"
        )
    return None


REDUCTION_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.linalg_vector_norm": _vector_norm,
    "torch.aten.sum.dim_IntList": _reduce("add"),
    "torch.aten.mean.dim": _reduce("add", mean=True),
    "torch.aten.mean": _reduce("add", mean=True),
    "torch.aten.amax": _reduce("max"),
    "torch.aten.amin": _reduce("min"),
    "torch.aten.prod": _reduce("multiply"),
    "torch.aten.prod.dim_int": _reduce("multiply"),
    "torch.aten.max": _full_reduce("max"),
    "torch.aten.min": _full_reduce("min"),
    "torch.aten.any": _any,
    "torch.aten.any.dim": _any,
    "torch.aten.any.dims": _any,
    "torch.aten.argmax": _arg_reduce("max"),
    "torch.aten.argmin": _arg_reduce("min"),
    "torch.aten.max.dim": _max_min_dim("max"),
    "torch.aten.min.dim": _max_min_dim("min"),
    "torch.aten.var.correction": _var,
    "torch.aten.var.dim": _var,
    "torch.aten.var_mean.correction": _var_mean,
}
