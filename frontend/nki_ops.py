"""NKI kernels as PyTorch operators: a `torch.library` custom op whose implementation is the simulated kernel.

This is the torch side of `nki/` (which takes NumPy arrays and never imports torch); the public spelling is
`neuron_mlir.as_torch_op`:

    rms_norm_op = neuron_mlir.as_torch_op(
        rms_norm,                                   # an @nki.jit kernel
        name="mylib::rms_norm",
        out_shape=lambda x, weight, eps=1e-6: x.shape,
        backward=rms_norm_backward,                 # optional: (ctx, grad) -> a gradient per input
    )
    y = rms_norm_op(x, weight)                      # torch tensors in and out; differentiable with backward=

The op's schema comes from the kernel's signature: a parameter with a number or bool default is that scalar
type, every other parameter is a Tensor. Where the op runs:

- CPU tensors: the kernel's program runs on the simulated core over NumPy copies of the operands; the results
  come back as new CPU tensors.
- `neuron` device tensors: the program reads the device memory of contiguous operands directly, its results are
  new device tensors, and its simulated time is added to the current stream like any eager op's.
- Fake tensors (Dynamo, AOTAutograd): `out_shape` (and `out_dtype`) make the results, so the op traces as one
  node. The `neuron-mlir` backend imports it as a `torch.nki_kernel` and inlines the kernel's traced
  instructions into the compiled program (the op's `nki.KernelCall`, registered here, is how the compiler finds
  the kernel); where the kernel cannot be inlined it runs between the compiled regions as its own program (see
  `frontend.compile_graph`), never counted as a CPU fallback.
- Autograd: `backward(ctx, *grads)` returns one gradient per op input (None for scalars), as
  `torch.library.register_autograd` takes it. Unless `setup_context` is given, `ctx.saved_tensors` holds the
  tensor inputs in order followed by the outputs, and `ctx.scalars` the other inputs by name. A backward of
  torch ops is traced by AOTAutograd and compiled like the rest of the model; one that calls another NKI op
  runs that kernel.

The shapes and dtypes of what the kernel traces to return are checked against `out_shape` and `out_dtype` before
it runs, and already in the fake implementation at static shapes (the kernel is traced for zeros of the operands'
signature, a trace the first real call reuses): a difference is an `NkiError` naming the op and the kernel's line
that made the tensor, since under `torch.compile` everything downstream is traced from the declared shapes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.ir import Block

from neuron_mlir.ir.locations import describe_location
from neuron_mlir.ir.types import element_type_for
from neuron_mlir.nki.tracing import NkiError, dtype_name, dtype_of

Shape = Sequence[int]

_KERNEL_OPS: dict[str, NkiTorchOp] = {}
"""The registered ops by qualified name ("mylib::rms_norm")."""


def kernel_op_of(target: Any) -> NkiTorchOp | None:
    """The NKI op an FX node's target (an OpOverload or OpOverloadPacket) calls, if it is one."""
    name = getattr(target, "name", None)
    qualified = name() if callable(name) else None
    if qualified is None:
        return None
    return _KERNEL_OPS.get(qualified.split(".")[0])


def _scalar_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return None


def _schema(function: Callable[..., Any], outputs: int) -> tuple[str, list[str], list[str]]:
    """(the op's schema, its parameter names, the names of its tensor parameters) from the kernel's signature."""
    parameters = []
    tensors = []
    names = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            raise NkiError(
                f"kernel {function.__name__}: parameter {parameter.name!r} of kind {parameter.kind.description} "
                "cannot be an operator argument (positional parameters only)"
            )
        names.append(parameter.name)
        scalar = _scalar_type(parameter.default) if parameter.default is not parameter.empty else None
        if scalar is None:
            if parameter.default is not parameter.empty:
                raise NkiError(
                    f"kernel {function.__name__}: parameter {parameter.name!r} defaults to "
                    f"{parameter.default!r}; an operator's defaults are numbers or bools"
                )
            parameters.append(f"Tensor {parameter.name}")
            tensors.append(parameter.name)
        else:
            parameters.append(f"{scalar} {parameter.name}={parameter.default!r}")
    returned = "Tensor" if outputs == 1 else "(" + ", ".join(["Tensor"] * outputs) + ")"
    return f"({', '.join(parameters)}) -> {returned}", names, tensors


def _kernel_line(function: Callable[..., Any]) -> str:
    try:
        line = inspect.getsourcelines(function)[1]
        path = inspect.getsourcefile(function) or "<unknown>"
    except (OSError, TypeError):
        return function.__name__
    from pathlib import Path

    return f"{Path(path).name}:{line} ({function.__name__})"


class NkiTorchOp:
    """A kernel registered as a torch custom op: call it with tensors; `.op` is the `torch.ops` overload."""

    def __init__(
        self,
        kernel: Any,
        name: str,
        out_shape: Callable[..., Shape | Sequence[Shape]],
        out_dtype: torch.dtype | Callable[..., torch.dtype | Sequence[torch.dtype]] | None = None,
        outputs: int = 1,
        backward: Callable[..., Any] | None = None,
        setup_context: Callable[..., None] | None = None,
    ) -> None:
        from neuron_mlir.nki import Kernel

        self.kernel: Kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        if "::" not in name:
            name = f"nki::{name}"
        if name in _KERNEL_OPS:
            raise NkiError(f"torch op {name} is already registered (by kernel {_KERNEL_OPS[name].kernel.__name__})")
        if outputs < 1:
            raise NkiError(f"torch op {name}: a kernel op returns at least one tensor, got outputs={outputs}")
        self.name = name
        self.out_shape = out_shape
        self.out_dtype = out_dtype
        self.outputs = outputs
        schema, self.parameters, self.tensor_parameters = _schema(self.kernel.function, outputs)
        self.custom_op = torch.library.custom_op(name, self._run, mutates_args=(), schema=schema)
        self.custom_op.register_fake(self._fake)
        self.custom_op.register_kernel("cpu", self._run)
        self._register_device()
        if backward is not None:
            self.custom_op.register_autograd(backward, setup_context=setup_context or self._save_for_backward)
        elif setup_context is not None:
            raise NkiError(f"torch op {name}: setup_context without backward")
        namespace, op_name = name.split("::")
        self.op = getattr(getattr(torch.ops, namespace), op_name).default
        _KERNEL_OPS[name] = self
        from neuron_mlir.nki import KernelCall, register_call

        defaults = {
            p.name: p.default
            for p in inspect.signature(self.kernel.function).parameters.values()
            if p.name not in self.tensor_parameters
        }
        self.call = KernelCall(name, self.kernel, tuple(self.parameters), tuple(self.tensor_parameters), defaults)
        register_call(self.call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.custom_op(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<NKI torch op {self.name} of kernel {self.kernel.__name__}>"

    # ---- declared results ------------------------------------------------------------------------------------

    def _declared(self, args: Sequence[Any]) -> list[tuple[tuple[Any, ...], torch.dtype]]:
        """(shape, dtype) of each output as `out_shape` and `out_dtype` declare them for these arguments."""
        shapes = self.out_shape(*args)
        shape_list = [shapes] if self.outputs == 1 else list(shapes)
        if self.out_dtype is None:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            dtypes = [first.dtype if first is not None else torch.float32] * self.outputs
        elif isinstance(self.out_dtype, torch.dtype):
            dtypes = [self.out_dtype] * self.outputs
        else:
            chosen = self.out_dtype(*args)
            dtypes = [chosen] * self.outputs if isinstance(chosen, torch.dtype) else list(chosen)
        if len(shape_list) != self.outputs or len(dtypes) != self.outputs:
            raise NkiError(
                f"torch op {self.name}: out_shape/out_dtype declare {len(shape_list)}/{len(dtypes)} outputs, "
                f"the op has {self.outputs}"
            )
        # sizes stay as given: symbolic under dynamic shapes, where int() would specialise them
        return [(tuple(cast(Sequence[Any], shape)), dtype) for shape, dtype in zip(shape_list, dtypes, strict=True)]

    def _fake(self, *args: Any) -> Any:
        """The op's results from the declaration; at static shapes the kernel is traced for them first, so that
        a declaration the kernel contradicts fails while the graph is traced, not when it first runs."""
        from neuron_mlir.frontend.tensors import numpy_dtype

        declared = self._declared(args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        static = all(isinstance(size, int) for t in tensors for size in t.shape) and all(
            isinstance(size, int) for shape, _ in declared for size in shape
        )
        if static:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            # zeros of the operands' signature: the trace depends on shapes and dtypes only, and is cached for them
            with unset_fake_temporarily():
                self._check_traced(self._arrays(args, lambda t: np.zeros(t.shape, numpy_dtype(t.dtype))), declared)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        results = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in declared]
        return results[0] if self.outputs == 1 else tuple(results)

    # ---- running the kernel ----------------------------------------------------------------------------------

    def _check_traced(self, arrays: Sequence[Any], declared: Sequence[tuple[tuple[Any, ...], torch.dtype]]) -> Any:
        """The kernel's compiled program for `arrays`, after checking that it returns the declared tensors."""
        from neuron_mlir.frontend.tensors import numpy_dtype

        compiled = self.kernel.compile(*arrays)
        if compiled.returned == "none" or compiled.modified:
            raise NkiError(
                f"torch op {self.name}: kernel {self.kernel.__name__} writes into its inputs; as a torch op a kernel "
                f"returns its results (nl.ndarray(..., buffer=nl.shared_hbm)) (at {_kernel_line(self.kernel.function)})"
            )
        if compiled.outputs != self.outputs:
            raise NkiError(
                f"torch op {self.name}: kernel {self.kernel.__name__} returns {compiled.outputs} tensor(s), the op "
                f"declares {self.outputs} (at {_kernel_line(self.kernel.function)})"
            )
        returned = next(op for op in compiled.module.walk() if isinstance(op, func.ReturnOp))
        for index, (value, (shape, dtype)) in enumerate(zip(returned.operands, declared, strict=False)):
            value_type = cast(Any, value.type)  # a shaped type with an element type (memref or tensor)
            traced_shape = tuple(int(size) for size in value_type.get_shape())
            declared_shape = tuple(int(size) for size in shape)
            expected_dtype = element_type_for(dtype_name(dtype_of(numpy_dtype(dtype))))
            traced_dtype = value_type.element_type
            if traced_shape == declared_shape and traced_dtype == expected_dtype:
                continue
            owner = value.owner
            where = describe_location(owner.location) if not isinstance(owner, Block) else ""
            where = where or _kernel_line(self.kernel.function)
            what = f"output {index}" if self.outputs > 1 else "its output"
            raise NkiError(
                f"torch op {self.name}: kernel {self.kernel.__name__} returns {what} as {list(traced_shape)} "
                f"{traced_dtype}, but out_shape/out_dtype declare {list(declared_shape)} {expected_dtype} (at {where})"
            )
        return compiled

    def _arrays(self, args: Sequence[Any], to_array: Callable[[torch.Tensor], np.ndarray]) -> list[Any]:
        arrays = []
        for name, value in zip(self.parameters, args, strict=False):
            if name in self.tensor_parameters:
                if not isinstance(value, torch.Tensor):
                    raise NkiError(f"torch op {self.name}: argument {name!r} must be a tensor, got {value!r}")
                arrays.append(to_array(value.detach()))
            else:
                arrays.append(value)
        return arrays

    def _simulate(self, arrays: list[Any], declared: Any) -> tuple[list[np.ndarray], float]:
        self._check_traced(arrays, declared)
        results, profile = self.kernel.simulate(*arrays)
        outputs = [results] if self.outputs == 1 else list(results)
        return outputs, float(profile.total_ns)

    def _run(self, *args: Any) -> Any:
        """The op on CPU tensors: the kernel simulated over copies of them."""
        from neuron_mlir.frontend.tensors import from_numpy, to_numpy

        declared = self._declared(args)
        outputs, _ = self._simulate(self._arrays(args, lambda t: np.ascontiguousarray(to_numpy(t))), declared)
        results = [from_numpy(np.array(o)) for o in outputs]
        return results[0] if self.outputs == 1 else tuple(results)

    def _register_device(self) -> None:
        """The op on `neuron` tensors: the kernel's program over the device memory, timed on the current stream."""
        from neuron_mlir.frontend.device import storage

        def on_device(*args: Any) -> Any:
            from neuron_mlir.frontend.device import eager, sources, streams
            from neuron_mlir.frontend.tensors import to_numpy

            def device_array(tensor: torch.Tensor) -> np.ndarray:
                storage.observe()
                dense = storage.dense_array(tensor) if tensor.device.type == storage.DEVICE_TYPE else None
                return dense if dense is not None else np.ascontiguousarray(to_numpy(storage.host_alias(tensor)))

            declared = self._declared(args)
            outputs, simulated_ns = self._simulate(self._arrays(args, device_array), declared)
            streams.current_stream().add_run(simulated_ns)
            sources.record(self.name, simulated_ns)
            eager.EAGER_STATS.native_ops[self.name] += 1
            results = [storage.from_array(np.asarray(o)) for o in outputs]
            return results[0] if self.outputs == 1 else tuple(results)

        self.custom_op.register_kernel(storage.DEVICE_TYPE, on_device)

    # ---- autograd --------------------------------------------------------------------------------------------

    def _save_for_backward(self, ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*(v for v in inputs if isinstance(v, torch.Tensor)), *outputs)
        ctx.scalars = {
            name: value
            for name, value in zip(self.parameters, inputs, strict=False)
            if name not in self.tensor_parameters
        }


def as_torch_op(
    kernel: Any = None,
    *,
    name: str,
    out_shape: Callable[..., Shape | Sequence[Shape]],
    out_dtype: torch.dtype | Callable[..., Any] | None = None,
    outputs: int = 1,
    backward: Callable[..., Any] | None = None,
    setup_context: Callable[..., None] | None = None,
) -> Any:
    """Register `kernel` as the torch custom op `name` ("namespace::op", or "op" in the `nki` namespace); without
    `kernel`, a decorator to put above `@nki.jit`.

    `out_shape(*args)` gives the output's shape (a list of shapes when `outputs` > 1) from the op's arguments,
    real or fake; `out_dtype` a dtype or a function of the arguments (default: the first tensor's dtype).
    `backward(ctx, *grads)` makes the op differentiable (module docstring)."""
    if kernel is None:
        return lambda function: NkiTorchOp(function, name, out_shape, out_dtype, outputs, backward, setup_context)
    return NkiTorchOp(kernel, name, out_shape, out_dtype, outputs, backward, setup_context)
