"""torch-fuse-rms-norm-neighbours: the ops beside an RMS norm that its row pass computes too are marked.

Input contract: torch-dialect functions, after torch-recognize-rms-norm and the torch stage's cleanups (so that
use counts are final).

Output guarantee: the same ops, with the discardable attribute `neuron.fuse = "rms_norm_rows"` on each op that
an RMS norm's one pass over the rows can write from the rows it holds, and on no other op (stale marks are
dropped). Nothing else changes; the pass never fails. The neighbours, all after the norm in its block:

- of `_fused_rms_norm(x, ...)`: the fp32 upcast of x (`_to_copy`, plain layout and memory format, x's shape),
  which the forward saves for the backward; and the product of the norm's result with a weight vector
  (`mul.Tensor` of the result type whose other operand has as many elements as a row, laid along the row);
- of `_fused_rms_norm_backward(grad_out, x, ...)`: the cast of grad_input to a 16-bit type (`_to_copy`, the
  chain's `.to(dtype)` of the upcast it differentiates); and the weight gradient autograd spells as
  `sum(grad_out * saved, dims before the row)` (`sum.dim_IntList` of a `mul.Tensor` that only it reads, saved of
  x's shape, no dtype change) - the sum is marked.

The mark is the decision; convert-torch-to-tile's normalization lowering carries it out where the IR still bears
it out and what only the tile level knows allows (the operands' layouts are single strided runs, the rows fit
beside the pass's own, PSUM holds the weight gradient's accumulators). Otherwise the neighbour keeps its own loop
nest, computing the same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType, f32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.fusion_walks import FUSE, mark_fusions
from neuron_mlir.lowering.ir_queries import defined_functions, tensor_shape_of
from neuron_mlir.runtime.dtypes import itemsize

INTO_RMS_NORM_ROWS = "rms_norm_rows"
RMS_NORM = "torch.aten._fused_rms_norm"
RMS_NORM_BACKWARD = "torch.aten._fused_rms_norm_backward"
_PRESERVED_FORMATS = (None, "preserve_format")


def _later_in_block(op: Operation, candidate: Operation) -> bool:
    current = op.next_op
    while current is not None:
        if current is candidate:
            return True
        current = current.next_op
    return False


def plain_cast(op: Operation) -> TensorType | None:
    """The result type of a `_to_copy` that only changes the element type (strided layout, preserved format)."""
    result = op.results[0].type if op.results else None
    if op.name != "torch.aten._to_copy" or not isinstance(result, TensorType):
        return None
    arguments = op.arguments()  # type: ignore[attr-defined]
    if arguments.get("layout") not in (None, "strided") or arguments.get("memory_format") not in _PRESERVED_FORMATS:
        return None
    return result


def row_length(norm: Operation) -> int:
    """The number of elements of one normalized row of an RMS norm or its backward."""
    arguments = norm.arguments()  # type: ignore[attr-defined]
    return math.prod(int(size) for size in arguments["normalized_shape"])


def upcast_of_input(norm: Operation) -> Operation | None:
    """The fp32 upcast of `_fused_rms_norm`'s input that its row pass can write, or None."""
    source = norm.operands[0]
    for use in source.uses:
        result = plain_cast(use.operation)
        if result is None or result.element_type != f32 or tuple(result.get_shape()) != tensor_shape_of(source):
            continue
        if _later_in_block(norm, use.operation):
            return use.operation
    return None


def weight_product(norm: Operation) -> tuple[Operation, SSAValue] | None:
    """(the product, its weight operand) of `_fused_rms_norm`'s result with a weight vector, or None."""
    length = row_length(norm)
    result = norm.results[0]
    for use in result.uses:
        product = use.operation
        if product.name != "torch.aten.mul.Tensor" or product.results[0].type != result.type:
            continue
        weight = product.operands[1 - use.index]
        shape = tensor_shape_of(weight)
        if weight is result or math.prod(shape) != length or not shape or shape[-1] != length:
            continue
        if _later_in_block(norm, product):
            return product, weight
    return None


def narrowing_of_gradient(norm: Operation) -> Operation | None:
    """The cast of `_fused_rms_norm_backward`'s grad_input to a 16-bit type that its row pass can write, or None."""
    for use in norm.results[0].uses:
        result = plain_cast(use.operation)
        if result is None or itemsize(runtime_dtype_name(result.element_type)) != 2:
            continue
        if _later_in_block(norm, use.operation):
            return use.operation
    return None


def weight_gradient(norm: Operation) -> tuple[Operation, Operation, SSAValue] | None:
    """(product, sum, saved) when `sum(grad_out * saved, dims before the row)` of `_fused_rms_norm_backward`'s
    grad_out is the weight gradient its row pass can accumulate, or None."""
    grad_out, x = norm.operands[0], norm.operands[1]
    rank = len(tensor_shape_of(x))
    axis = rank - len(norm.arguments()["normalized_shape"])  # type: ignore[attr-defined]
    for use in grad_out.uses:
        product = use.operation
        if product.name != "torch.aten.mul.Tensor" or not _later_in_block(norm, product):
            continue
        saved = product.operands[1 - use.index]
        if saved is grad_out or tensor_shape_of(saved) != tensor_shape_of(x) or not product.results[0].has_one_use():
            continue
        total = next(iter(product.results[0].uses)).operation
        if total.name != "torch.aten.sum.dim_IntList":
            continue
        arguments = total.arguments()
        dims = sorted(int(d) % rank for d in (arguments.get("dim") or []))
        if dims != list(range(axis)) or arguments.get("dtype") is not None:
            continue
        summed, multiplied = total.results[0].type, product.results[0].type
        assert isinstance(summed, TensorType)
        assert isinstance(multiplied, TensorType)
        if summed.element_type == multiplied.element_type and _later_in_block(norm, total):
            return product, total, saved
    return None


def neighbours(norm: Operation) -> list[Operation]:
    """The ops beside `norm` that its row pass can compute (the ones the pass marks)."""
    found: list[Operation | None] = []
    if norm.name == RMS_NORM:
        scale = weight_product(norm)
        found += [upcast_of_input(norm), scale[0] if scale is not None else None]
    elif norm.name == RMS_NORM_BACKWARD:
        gradient = weight_gradient(norm)
        found += [narrowing_of_gradient(norm), gradient[1] if gradient is not None else None]
    return [op for op in found if op is not None]


def is_marked(op: Operation | None) -> bool:
    return op is not None and op.attributes.get(FUSE) == StringAttr(INTO_RMS_NORM_ROWS)


def mark_rms_norm_neighbours(function: func.FuncOp) -> int:
    """Mark the neighbours of every RMS norm (and backward) of `function`, unmark any other op so marked; the count
    marked."""
    chosen = {id(op) for norm in function.body.walk() for op in neighbours(norm)}
    return mark_fusions(function, INTO_RMS_NORM_ROWS, lambda op: id(op) in chosen)


@dataclass(frozen=True)
class TorchFuseRmsNormNeighboursPass(ModulePass):
    name = "torch-fuse-rms-norm-neighbours"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            mark_rms_norm_neighbours(function)
