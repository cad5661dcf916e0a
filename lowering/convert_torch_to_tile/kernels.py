"""NKI kernel lowerings: a `torch.nki_kernel` becomes a `tile.nki_kernel` on whole HBM tensors.

The kernel's HBM arguments are row-major tensors, so an operand that is a view with another layout (a transpose,
a slice) is first copied into a fresh row-major tensor; each result is a fresh HBM tensor the kernel writes. The
kernel's instructions themselves are placed later, by convert-tile-to-neuron, which inlines the kernel's trace.

A kernel call lowers when its kernel is registered in this process (`neuron_mlir.as_torch_op`) and traces, for
the op's operand shapes and dtypes on the module's target, into the results the op declares. Otherwise the
reason is the kernel's own diagnostic (with its source line), and the frontend runs the call as the kernel's own
program between compiled regions instead.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import neuron, tile
from neuron_mlir.ir.dialects.torch import NkiKernelOp
from neuron_mlir.ir.kernel_calls import traced_kernel
from neuron_mlir.lowering.convert_torch_to_tile.common import Lowering, alloc
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import copy_to
from neuron_mlir.lowering.loop_nests import LoopNestBuilder
from neuron_mlir.runtime.program import row_major_strides


def legal(op: Operation) -> str | None:
    """The kernel is registered, traces for these operands, and returns what the op declares."""
    assert isinstance(op, NkiKernelOp)
    try:
        function = traced_kernel(op, list(op.inputs))
    except (ValueError, LookupError) as error:  # the kernel's NkiError is a ValueError
        return str(error)
    returned = function.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    if len(returned.operands) != len(op.outputs):
        return f"the kernel returns {len(returned.operands)} tensor(s), the op declares {len(op.outputs)}"
    for index, (value, result) in enumerate(zip(returned.operands, op.outputs, strict=True)):
        traced, declared = value.type, result.type
        assert isinstance(traced, MemRefType)
        assert isinstance(declared, TensorType)
        if traced.get_shape() != declared.get_shape() or traced.element_type != declared.element_type:
            return f"the kernel returns output {index} as {traced}, the op declares {declared}"
        if not isinstance(value.owner, neuron.AllocOp):
            return f"the kernel returns output {index} as a view of another tensor (inlined, it writes its outputs)"
    return None


def _row_major(value: SSAValue) -> bool:
    memref_type = value.type
    assert isinstance(memref_type, MemRefType)
    return tile.memref_strides(memref_type) == (row_major_strides(memref_type.get_shape()), 0)


def _kernel_call(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    assert isinstance(op, NkiKernelOp)
    inputs = [value if _row_major(value) else copy_to(em, value) for value in args["inputs"]]
    outputs = []
    for result in op.outputs:
        result_type = result.type
        assert isinstance(result_type, TensorType)
        outputs.append(alloc(em, result_type.get_shape(), result_type.element_type))
    em.insert(tile.NkiKernelOp(op.kernel, inputs, outputs, op.scalars, op.fingerprint))
    return outputs


KERNEL_LOWERINGS: dict[str, Lowering] = {"torch.nki_kernel": _kernel_call}
