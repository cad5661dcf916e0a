"""How the lowerings find the traced instructions of an NKI kernel call (`torch.nki_kernel`, `tile.nki_kernel`).

The kernels live in `nki/`, which sits above `lowering/` (it runs the back-end passes on its traces), so the
lowerings cannot import it. Instead `neuron_mlir.nki` registers its tracer here when it is imported, which
every registered kernel has been (a kernel op is made from an `nki.jit` kernel). A module whose kernel calls
name no kernel of this process (read from a file by `neuron-opt`, say) gets a diagnostic naming the op.

The registry belongs to the op's definition, as a dialect's registration does, not to a pass: it is filled
once when `neuron_mlir.nki` is imported and no conversion changes it, so no pass carries state from one
conversion to the next through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

KernelTracer = Callable[[Operation, Sequence[SSAValue]], func.FuncOp]
"""(the call op, values typed as its tensors) -> a fresh copy of the kernel's traced function, before placement;
raises LookupError for a kernel this process does not have, ValueError when the kernel does not trace."""

_TRACERS: list[KernelTracer] = []


def register_kernel_tracer(tracer: KernelTracer) -> None:
    """Called once by `neuron_mlir.nki` when it is imported."""
    if tracer not in _TRACERS:
        _TRACERS.append(tracer)


def traced_kernel(op: Operation, values: Sequence[SSAValue]) -> func.FuncOp:
    """The traced function of the kernel that `op` calls with tensors typed as `values` (see `KernelTracer`)."""
    if not _TRACERS:
        kernel = op.properties.get("kernel")
        name = kernel.data if isinstance(kernel, StringAttr) else op.name
        raise LookupError(f"the kernel of torch op {name} is not registered in this process (neuron_mlir.as_torch_op)")
    return _TRACERS[-1](op, values)
