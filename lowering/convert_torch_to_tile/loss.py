"""The backward of the negative log-likelihood loss, alone and under the log-softmax backward (cross-entropy).

Input contract: `torch.aten.nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index,
total_weight)` with `self` the [N, C] (or [C]) log-probabilities, `target` the [N] (or 0-d) class of each row,
`weight` an optional [C] per-class weight, `reduction` 0 (none: grad_output is [N]), 1 (mean) or 2 (sum), and
`total_weight` the forward's sum of the weights of the rows that count. The frontend keeps the op whole (its
core-ATen decomposition fills a zero tensor, scatters into it and multiplies it: three passes over [N, C]).

Output guarantee: its gradient is zero but at one element per row,

    grad[i, target[i]] = c[i] = -grad_output[i] * weight[target[i]] / total_weight (mean; no division otherwise),

and 0 in rows whose target is `ignore_index`. Alone it lowers to a zero fill of the result and one scatter of
the column c (the fill is the result's only full pass). When torch-fuse-cross-entropy-backward has marked it,
its only reader being `_log_softmax_backward_data(grad, self)` along the class dim (cross-entropy's backward),
that gradient is

    grad_x = grad - exp(self) * sum(grad) = c * (onehot(target) - exp(self))

and the log-softmax backward's lowering computes it from `self` and c without the one-hot tensor
(`emit_cross_entropy_backward`): one pass reads each row of `self` and writes -c * exp(self) (ScalarE exp,
VectorE scale by a per-partition column, in fp32, rounded once), then the target element of every row is
overwritten with c * (1 - exp(self[i, target[i]])) from a gather of those N elements (computed in fp32 too, so
the cancellation near a confident prediction loses nothing to the rounded dense value). The nll_loss_backward's
own result is then a view of one element that nothing reads. Both lowerings ask the pass's `fused_reader` the same
question of the unconverted torch ops (they stay in place until the conversion ends), so they always agree, and
a mark the IR no longer bears out is ignored.

The per-row work (c, the clamped target) is a [N, 1] loop nest; the gather and scatters are element accesses
through indexing.py, whose offsets are exact below 2^24 within a tile: past 131072 classes a tile takes fewer
rows than 128 (a divisor of N, one row at worst; `legal` refuses rows of 2^24 classes or more).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import f32, i32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    PARTITION_TILE,
    Lowering,
    alloc,
    column_tile,
    element_bytes,
    element_type_of,
    layout_of,
    load,
    result_element_type,
    row_chunk_columns,
    store,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.context import context_of
from neuron_mlir.lowering.convert_torch_to_tile.indexing import (
    EXACT_OFFSETS,
    IndexedAccess,
    along_dim_access,
    emit_gather,
    emit_scatter,
    inexact,
)
from neuron_mlir.lowering.convert_torch_to_tile.movement import fill_into
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.lowering.torch_fuse_cross_entropy_backward import LOG_SOFTMAX_BACKWARD, NLL_LOSS_BACKWARD, fused_reader
from neuron_mlir.runtime.hardware import Memory

_MEAN = 1


class _Rows:
    """nll_loss_backward's operands seen as N rows of C classes: self [N, C], target and c as [N, 1]."""

    def __init__(self, em: LoopNestBuilder, args: dict[str, Any]) -> None:
        self.log_probabilities = args["self"]
        shape = layout_of(self.log_probabilities).shape
        self.rows, self.classes = (1, shape[0]) if len(shape) == 1 else shape
        self.target = _as_column(em, args["target"], self.rows)
        self.grad = _as_column(em, args["grad_output"], self.rows)
        self.total_weight = _as_column(em, args["total_weight"], self.rows)
        self.weight: SSAValue | None = args.get("weight")
        self.mean = int(args["reduction"]) == _MEAN
        self.ignore_index = float(int(args["ignore_index"]))

    def matrix(self, em: LoopNestBuilder, value: SSAValue) -> SSAValue:
        layout = layout_of(value)
        if layout.rank == 2:
            return value
        return view(em, value, Layout((1, self.classes), (0, layout.strides[0]), layout.offset))

    def coefficients(self, em: LoopNestBuilder) -> tuple[SSAValue, SSAValue]:
        """[N, 1] HBM tensors: c (fp32) and the target with ignored rows sent to class 0 (i32), which every
        access may then read (the ignored rows' c is 0)."""
        coefficient = alloc(em, (self.rows, 1), f32)
        clamped = alloc(em, (self.rows, 1), i32)

        def keep_mask(e: LoopNestBuilder, p0: Index, p: int) -> tuple[SSAValue, SSAValue]:
            target = load(e, self.target, [p0, 0], (p, 1), f32)
            keep = e.insert(tile.BinaryScalarOp(target, "not_equal", column_tile(p), scalar=self.ignore_index)).result
            return target, keep

        def clamp(e: LoopNestBuilder, p0: Index, p: int) -> None:
            target, keep = keep_mask(e, p0, p)
            index = e.insert(tile.BinaryOp(target, keep, "multiply", column_tile(p))).result
            store(e, e.insert(tile.CopyOp(index, column_tile(p, i32))).result, clamped, [p0, 0])

        em.for_tiles(self.rows, PARTITION_TILE, clamp)
        weights = None
        if self.weight is not None:
            weight_column = view(em, self.weight, _weight_column(layout_of(self.weight)))
            access = along_dim_access(em, weight_column, 0, clamped, wrap=False)
            weights = emit_gather(em, NLL_LOSS_BACKWARD, weight_column, access, f32)

        def scale(e: LoopNestBuilder, p0: Index, p: int) -> None:
            _, keep = keep_mask(e, p0, p)
            grad = load(e, self.grad, [p0, 0], (p, 1), f32)
            value = e.insert(tile.BinaryOp(grad, keep, "multiply", column_tile(p))).result
            if weights is not None:
                weight = load(e, weights, [p0, 0], (p, 1), f32)
                value = e.insert(tile.BinaryOp(value, weight, "multiply", column_tile(p))).result
            if self.mean:
                total = load(e, self.total_weight, [p0, 0], (p, 1), f32)
                inverse = e.insert(tile.UnaryOp(total, "reciprocal", column_tile(p))).result
                value = e.insert(tile.BinaryOp(value, inverse, "multiply", column_tile(p))).result
            value = e.insert(tile.BinaryScalarOp(value, "multiply", column_tile(p), scalar=-1.0)).result
            store(e, value, coefficient, [p0, 0])

        em.for_tiles(self.rows, PARTITION_TILE, scale)
        return coefficient, clamped


def _weight_column(layout: Layout) -> Layout:
    return Layout((layout.shape[0], 1), (layout.strides[0], 0), layout.offset)


def _as_column(em: LoopNestBuilder, value: SSAValue, rows: int) -> SSAValue:
    """`value` ([N], [N, 1] or 0-d, broadcast) viewed as [rows, 1]."""
    layout = layout_of(value)
    stride = layout.strides[0] if layout.rank and layout.shape[0] != 1 else 0
    return view(em, value, Layout((rows, 1), (stride, 0), layout.offset))


def _row_group(rows: int, classes: int) -> int:
    """Rows per tile of the accesses to each row's target element: 128, or fewer (a divisor of `rows`) where the
    offsets of 128 rows of `classes` elements would reach 2^24 (vocabularies past 131072 classes)."""
    fitting = min(rows, PARTITION_TILE, max(1, (EXACT_OFFSETS - 1) // max(classes, 1)))
    return max(d for d in range(1, fitting + 1) if rows % d == 0)


def _grouped(em: LoopNestBuilder | None, value: SSAValue | Layout, group: int) -> Any:
    """An [N, X] tensor (or layout) viewed as [N / group, group, X]."""
    layout = value if isinstance(value, Layout) else layout_of(value)
    (rows, width), (row_stride, stride) = layout.shape, layout.strides
    grouped = Layout((rows // group, group, width), (row_stride * group, row_stride, stride), layout.offset)
    return grouped if em is None or isinstance(value, Layout) else view(em, value, grouped)


def _target_access(
    em: LoopNestBuilder | None, matrix: SSAValue | Layout, clamped: SSAValue | Layout, group: int
) -> IndexedAccess:
    """The element [i, target[i]] of every row of an [N, C] tensor, `group` rows to a tile."""
    return along_dim_access(em, _grouped(em, matrix, group), 2, _grouped(em, clamped, group), wrap=False)


def _nll_loss_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    shape = layout_of(args["self"]).shape
    element_type = result_element_type(op)
    if fused_reader(op) is not None:
        # the log-softmax backward computes the gradient itself; nothing reads this one
        base = alloc(em, (1,), element_type)
        return [em.insert(tile.ViewOp(base, tile.hbm_type(shape, element_type, [0] * len(shape), 0))).result]
    rows = _Rows(em, args)
    coefficient, clamped = rows.coefficients(em)
    out = alloc(em, shape, element_type)
    fill_into(em, out, 0.0)
    matrix = rows.matrix(em, out)

    group = _row_group(rows.rows, rows.classes)
    coefficients = _grouped(em, coefficient, group)

    def values(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> SSAValue:
        value = load(e, coefficients, [*lead, p0, 0], (ps, 1), f32)
        return e.insert(tile.CopyOp(value, column_tile(ps, element_type))).result

    access = _target_access(em, matrix, clamped, group)
    emit_scatter(em, op.name, _grouped(em, matrix, group), access, values, accumulate=False)
    return [out]


def emit_cross_entropy_backward(em: LoopNestBuilder, nll: Operation, out_element_type: Attribute) -> SSAValue:
    """`_log_softmax_backward_data(nll_loss_backward(...), self)` from nll_loss_backward's operands (see the
    module docstring), as a fresh HBM tensor."""
    lowered = context_of(em).lowered
    args = {name: lowered.get(value, value) for name, value in nll.arguments().items()}  # type: ignore[attr-defined]
    rows = _Rows(em, args)
    coefficient, clamped = rows.coefficients(em)
    out = alloc(em, layout_of(rows.log_probabilities).shape, out_element_type)
    source, matrix = rows.matrix(em, rows.log_probabilities), rows.matrix(em, out)
    classes = rows.classes
    # the row chunk, the fp32 exponentials and the result
    column_bytes = element_bytes(element_type_of(source)) + 4 + element_bytes(out_element_type)
    chunk_columns = row_chunk_columns(em, classes, column_bytes)

    def row_tile(e: LoopNestBuilder, p0: Index, p: int) -> None:
        negative = load(e, coefficient, [p0, 0], (p, 1), f32)
        negative = e.insert(tile.BinaryScalarOp(negative, "multiply", column_tile(p), scalar=-1.0)).result

        def chunk(e2: LoopNestBuilder, f0: Index, size: int) -> None:
            values = load(e2, source, [p0, f0], (p, size))
            exponentials = e2.insert(tile.UnaryOp(values, "exp", TileType((p, size), f32, Memory.SBUF))).result
            result_type = TileType((p, size), out_element_type, Memory.SBUF)
            scaled = e2.insert(tile.BinaryScalarOp(exponentials, "multiply", result_type, column=negative)).result
            store(e2, scaled, matrix, [p0, f0])

        e.for_tiles(classes, chunk_columns, chunk)

    em.for_tiles(rows.rows, PARTITION_TILE, row_tile)
    group = _row_group(rows.rows, classes)
    coefficients = _grouped(em, coefficient, group)
    access = _target_access(em, source, clamped, group)
    picked = emit_gather(em, LOG_SOFTMAX_BACKWARD, _grouped(em, source, group), access, f32)

    def target_values(e: LoopNestBuilder, lead: list[Index], p0: Index, ps: int, f0: Index, fs: int) -> SSAValue:
        exponential = load(e, picked, [*lead, p0, 0], (ps, 1))
        exponential = e.insert(tile.UnaryOp(exponential, "exp", column_tile(ps))).result
        # c * (1 - exp(picked)) = c - c * exp(picked)
        c = load(e, coefficients, [*lead, p0, 0], (ps, 1), f32)
        product = e.insert(tile.BinaryOp(c, exponential, "multiply", column_tile(ps))).result
        value = e.insert(tile.BinaryOp(c, product, "subtract", column_tile(ps))).result
        return e.insert(tile.CopyOp(value, column_tile(ps, out_element_type))).result

    access = _target_access(em, matrix, clamped, group)
    emit_scatter(em, LOG_SOFTMAX_BACKWARD, _grouped(em, matrix, group), access, target_values, False)
    return out


def legal(op: Operation) -> str | None:
    """The one-element-per-row accesses must be exact (indexing.py): C * 128 below 2^24."""
    self_type = op.operands[1].type
    shape = tuple(self_type.get_shape())  # type: ignore[attr-defined]
    if len(shape) not in (1, 2):
        return f"self must be [C] or [N, C] log-probabilities, got rank {len(shape)}"
    rows, classes = (1, shape[0]) if len(shape) == 1 else shape
    matrix = Layout((rows, classes), (classes, 1), 0)
    problem = inexact(_target_access(None, matrix, Layout((rows, 1), (1, 0), 0), _row_group(rows, classes)))
    return None if problem is None else f"the target element of each row: {problem}"


LOSS_LOWERINGS: dict[str, Lowering] = {NLL_LOSS_BACKWARD: _nll_loss_backward}
