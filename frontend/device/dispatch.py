"""How ATen ops on `neuron` tensors run: the PrivateUse1 kernels and the boxed fallback behind every other op.

Input contract: torch's dispatcher calls `neuron_fallback(op, *args, **kwargs)` for every op on device tensors
that has no kernel of its own for PrivateUse1. Composite kernels run first, so most ops arrive decomposed, and
structured ops arrive as their `out=` variant with an output of another size (often none), which the kernel resizes.
The functional forms of structured ops and the in-place foreach ops have kernels of their own here
(`structured_kernels`, `foreach_kernels`): one eager program per call where the compiler takes it, else what the
composite kernel does.

Output guarantee: the op's result follows PyTorch's semantics for a device tensor:
* memory management (`empty*`, `resize_`, `set_`) and copies across devices are served by `storage`;
* view ops (`view`, `as_strided`, `unfold`, ... : the ops whose schema returns an alias without writing it) run
  the CPU kernel on the device tensor itself, which writes sizes and strides over the same device storage, so
  views alias their base exactly;
* every other op runs as a compiled single-op program on the simulated NeuronCore when the compiler takes it
  (`eager`), else on the host over CPU aliases of the device bytes (`run_on_host`): in-place and `out=` writes
  land in device memory directly, a returned view shares the device storage, and fresh results are copied into
  new device tensors.
Mixing a device tensor with a CPU tensor of one dimension or more is PyTorch's usual same-device error.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map_only

from neuron_mlir.frontend.device import sources, storage
from neuron_mlir.frontend.device.storage import DEVICE_TYPE

aten = torch.ops.aten

# Ops that accept CPU tensors next to device tensors on other accelerators too: index tensors may stay on the host.
_HOST_OPERANDS_ALLOWED = {"aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"}


def _is_device(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and storage.on_device(value)


def _memory_format_strides(size: list[int], memory_format: torch.memory_format | None) -> list[int]:
    if memory_format in (None, torch.contiguous_format, torch.preserve_format):
        return storage.contiguous_strides(size)
    return list(torch.empty(size, memory_format=memory_format, device="meta").stride())


def _empty_memory_format(
    size: list[int],
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    size = [int(s) for s in size]
    return storage.empty_strided(size, _memory_format_strides(size, memory_format), dtype or torch.get_default_dtype())


def _empty_strided(
    size: list[int],
    stride: list[int],
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> torch.Tensor:
    return storage.empty_strided(size, stride, dtype or torch.get_default_dtype())


def native_empty(
    size: tuple[int, ...], stride: tuple[int, ...] | None, dtype: torch.dtype, memory_format: torch.memory_format | None
) -> torch.Tensor:
    """The Python side of the native `empty.memory_format` and `empty_strided` kernels: the layouts they do not
    make themselves (and the out-of-memory error)."""
    if stride is None:
        return _empty_memory_format(list(size), dtype, memory_format=memory_format)
    return _empty_strided(list(size), list(stride), dtype)


def native_fill(tensor: torch.Tensor, value: Any) -> Any:
    """The Python side of the native `fill_.Scalar` kernel: the fill as the fallback runs it, then its constant
    program and kept output for the kernel to replay (`eager.kept_fill`), or None."""
    neuron_fallback(aten.fill_.Scalar, tensor, value)
    return _eager.kept_fill(tensor, value) if _eager is not None else None


def _host_view(tensor: torch.Tensor) -> torch.Tensor:
    return storage.host_alias(tensor) if _is_device(tensor) else tensor


def _copy_from(source: torch.Tensor, destination: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    from neuron_mlir.frontend.device import streams

    streams.count_transfer(source, destination)
    if _is_device(source) and _is_device(destination):
        from neuron_mlir.frontend.device import region

        if region.enabled() and region.record_copy(source, destination):
            return destination  # part of the pending region's program
        storage.observe()  # a pending region runs first: its time comes before the copy's on the stream
        streams.device_copy(source, destination)  # a DMA on the device: its simulated time on the stream
    _host_view(destination).copy_(_host_view(source))
    return destination


def _copy_from_and_resize(source: torch.Tensor, destination: torch.Tensor) -> torch.Tensor:
    if destination.shape != source.shape:
        storage.resize(destination, source.shape)
    return _copy_from(source, destination)


def _resize(tensor: torch.Tensor, size: list[int], memory_format: torch.memory_format | None = None) -> torch.Tensor:
    storage.resize(tensor, size)
    if memory_format not in (None, torch.contiguous_format, torch.preserve_format):
        strides = _memory_format_strides([int(s) for s in size], memory_format)
        storage.bind(tensor, tensor.untyped_storage(), tensor.storage_offset(), size, strides)
    return tensor


def _set_empty(tensor: torch.Tensor) -> torch.Tensor:
    return storage.bind(tensor, storage.new_storage(0), 0, [0], [1])


def _local_scalar_dense(tensor: torch.Tensor) -> Any:
    from neuron_mlir.frontend.device import streams

    streams.current_stream().synchronize()  # reading a value waits for the work that computes it
    return storage.host_alias(tensor).item()


def _record_stream(tensor: torch.Tensor, stream: Any) -> None:
    """One stream runs everything on the simulated device (in order), so no tensor outlives its uses early."""


def _to_copy(
    tensor: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
    non_blocking: bool = False,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    """`Tensor.to` when it copies. A cast that stays on the device and yields a contiguous tensor runs as a
    compiled program; other copies allocate the result like PyTorch's composite kernel and `copy_` into it. A copy
    to the host never pins its result (the simulated device has no pinned host memory, and every copy has finished
    when it returns), so `non_blocking=True` behaves as a blocking copy."""
    target = torch.device(device) if device is not None else tensor.device
    dtype = dtype or tensor.dtype
    contiguous = memory_format == torch.contiguous_format or (
        memory_format in (None, torch.preserve_format) and tensor.is_contiguous()
    )
    if target.type == DEVICE_TYPE and dtype != tensor.dtype and contiguous:
        from neuron_mlir.frontend.device import eager

        # a dtype without NeuronCore storage (float64, complex128, complex32) is a copy of bytes for the host, not
        # a refusal
        if not {dtype, tensor.dtype} & eager.unstorable_dtypes():
            if tensor.is_complex() and not dtype.is_complex and dtype != torch.bool:
                _warn_complex_to_real()
            return eager.run(aten._to_copy.default, (tensor,), {"dtype": dtype})
    result = torch.empty_like(tensor, dtype=dtype, device=target, memory_format=memory_format or torch.preserve_format)
    return result.copy_(tensor)


_complex_to_real_warned = False


def _warn_complex_to_real() -> None:
    """PyTorch's warning for a cast of complex values to a real dtype, once per process as its copy gives it (the
    device's compiled cast does not go through that copy)."""
    global _complex_to_real_warned
    if not _complex_to_real_warned:
        _complex_to_real_warned = True
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3)


def _convolution(*args: Any, **kwargs: Any) -> torch.Tensor:
    """`convolution_overrideable`: the convolution of backends without their own (its composite kernel only
    raises); the same arguments as `convolution`, which the compiler lowers."""
    from neuron_mlir.frontend.device import eager

    return eager.run(aten.convolution.default, args, kwargs)


def _convolution_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
    output_mask: list[bool],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`convolution_backward_overrideable`, as `convolution_backward`, which also wants the bias's size: the
    output's channels, the weight's first dimension (a transposed convolution's second, times the groups)."""
    from neuron_mlir.frontend.device import eager

    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    arguments = (grad_output, input, weight, [channels], stride, padding, dilation, transposed, output_padding)
    return eager.run(aten.convolution_backward.default, (*arguments, groups, output_mask), {})


def _native_layer_norm(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The composite kernel of other backends computes it through `native_batch_norm`; the compiler lowers the
    layer norm itself."""
    from neuron_mlir.frontend.device import eager

    return eager.run(aten.native_layer_norm.default, args, kwargs)


def _cumulative_extreme(op: torch._ops.OpOverload) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """`cummax` / `cummin`: their composite kernel fills the results through `_cummax_helper`, which writes its
    arguments without returning them and so cannot be traced alone; the op itself compiles."""

    def kernel(tensor: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        from neuron_mlir.frontend.device import eager

        return eager.run(op, (tensor, dim), {})

    return kernel


def _whole(op: torch._ops.OpOverload) -> Callable[..., Any]:
    """An implicit composite run as one program. `linalg_matrix_rank`'s composite makes its tolerances float64
    tensors, which the core cannot hold, op by op; traced whole, the compiler's decomposition computes in the
    matrix's dtype. Only for ops without a gradient: a backend kernel replaces the composite under autograd too."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        from neuron_mlir.frontend.device import eager

        return eager.run(op, args, kwargs)

    return kernel


# Kernels that replace a composite kernel for the device (registered under their op names, not via the fallback,
# which composite ops never reach).
OVERRIDDEN_KERNELS: dict[str, Callable[..., Any]] = {
    "_to_copy": _to_copy,
    "convolution_overrideable": _convolution,
    "convolution_backward_overrideable": _convolution_backward,
    "native_layer_norm": _native_layer_norm,
    "cummax": _cumulative_extreme(aten.cummax.default),
    "cummin": _cumulative_extreme(aten.cummin.default),
    "linalg_matrix_rank.atol_rtol_float": _whole(aten.linalg_matrix_rank.atol_rtol_float),
    "linalg_matrix_rank.atol_rtol_tensor": _whole(aten.linalg_matrix_rank.atol_rtol_tensor),
}


def foreach_kernels() -> dict[str, Callable[..., Any]]:
    """Kernels for the in-place `_foreach_*` ops (an optimizer's step): each call is one eager program over all its
    tensors. Their composite kernel, which other backends get, calls the per-tensor op once per tensor,
    and an optimizer step over a model's parameters was then dozens of programs per foreach call."""
    kernels: dict[str, Callable[..., Any]] = {}
    # the registered names carry their overloads (`aten::_foreach_add_.List`): one per op packet
    for name in sorted({n.split(".")[0] for n in torch._C._dispatch_get_all_op_names()}):
        if not name.startswith("aten::_foreach_") or name in _FOREACH_KEPT:
            continue
        packet = getattr(aten, name.removeprefix("aten::"), None)
        if packet is None:
            continue
        for overload_name in packet.overloads():
            qualified = name if overload_name == "default" else f"{name}.{overload_name}"
            # only ops whose other backends run the composite kernel (the device's replaces it), never `out=`
            if overload_name.endswith("out") or not torch._C._dispatch_has_kernel_for_dispatch_key(
                qualified, "CompositeExplicitAutograd"
            ):
                continue
            base = getattr(aten, name.removeprefix("aten::_foreach_"), None)
            op = getattr(packet, overload_name)
            # in place only: the functional ones return lists, which single-op programs do not return
            if base is not None and op._schema.is_mutable and foreach_by_element(op):
                kernels[qualified.removeprefix("aten::")] = _foreach_kernel(op, base)
    return kernels


# Foreach ops left to their composite kernel: copies may cross devices (one program runs on one), and the norm's,
# max's and mm's per-tensor ops are not their names without the prefix (`linalg_vector_norm` for `_foreach_norm`).
_FOREACH_KEPT = {f"aten::_foreach_{name}" for name in ("copy", "copy_", "norm", "max", "mm")}


def foreach_by_element(op: torch._ops.OpOverload) -> bool:
    """Whether foreach op `op` is its per-tensor op over its lists' elements with its other arguments alike for
    every element: every tensor argument is a list (a lone tensor may be one scalar per element, as
    `_foreach_addcdiv.Tensor`'s is)."""
    return all(
        not isinstance(argument.type, torch.TensorType) and "Tensor?" not in str(argument.type)
        for argument in op._schema.arguments
    )


def _foreach_kernel(op: torch._ops.OpOverload, base: Any) -> Callable[..., Any]:
    """One program for the whole call; where the compiler refuses it, the per-tensor ops one by one (`base`, the
    op's per-tensor packet: `add_` for `_foreach_add_`), as the composite kernel runs them."""

    def foreach_kernel(*args: Any, **kwargs: Any) -> Any:
        from neuron_mlir.frontend.device import eager

        def per_tensor() -> Any:
            results = eager.per_element(op, base, *args, **kwargs)
            return results if op._schema.returns else None

        previous = sources.entered()
        try:
            return eager.run_or(op, args, kwargs, per_tensor)
        finally:
            sources.left(previous)

    return foreach_kernel


def _native_batch_norm(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`native_batch_norm` updates the running statistics without saying so in its schema, so tracing it alone
    cannot make the update a value; `_native_batch_norm_legit` is the same computation with the writes declared
    (what torch.compile's graphs hold), and compiles."""
    from neuron_mlir.frontend.device import eager

    if running_mean is None and running_var is None:
        no_stats = (input, weight, bias, training, momentum, eps)
        return eager.run(aten._native_batch_norm_legit.no_stats, no_stats, {})
    arguments = (input, weight, bias, running_mean, running_var, training, momentum, eps)
    return eager.run(aten._native_batch_norm_legit.default, arguments, {})


def _equal(tensor: torch.Tensor, other: torch.Tensor) -> bool:
    """`torch.equal` as device ops: the comparison and its reduction run on the NeuronCore, and only the one
    boolean travels to the host (values compare after type promotion, NaN equals nothing, as on the CPU)."""
    check_same_device(aten.equal.default, [tensor, other])
    if tensor.shape != other.shape:
        return False
    return bool(torch.eq(tensor, other).all().item())


_KERNELS: dict[Any, Callable[..., Any]] = {
    aten.native_batch_norm.default: _native_batch_norm,
    aten.equal.default: _equal,
    aten.empty.memory_format: _empty_memory_format,
    aten.empty_strided.default: _empty_strided,
    aten._copy_from.default: _copy_from,
    aten._copy_from_and_resize.default: _copy_from_and_resize,
    aten.resize_.default: _resize,
    aten.set_.default: _set_empty,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.record_stream.default: _record_stream,
}
_CPU_METADATA_KERNELS = {
    aten.set_.source_Storage,
    aten.set_.source_Storage_storage_offset,
    aten.set_.source_Tensor,
}


# what the fallback does with an op, by id(op) (an OpOverload hashes by a Python method; ops live as long as the
# process): its kernel in `_KERNELS`, `_ON_CPU` for a view or metadata op (its CPU kernel over the device tensor), or
# `_EAGER` (an eager op)
_routes: dict[int, Any] = {}
_ON_CPU: Any = object()
_EAGER: Any = object()


def neuron_fallback(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """The PrivateUse1 fallback: every op on device tensors without a kernel of its own comes here."""
    route = _routes.get(id(op))
    if route is None:
        kernel = _KERNELS.get(op)
        on_cpu = op.is_view or op in _CPU_METADATA_KERNELS
        route = _routes[id(op)] = kernel if kernel is not None else _ON_CPU if on_cpu else _EAGER
    if route is _ON_CPU:
        return op.redispatch(storage.CPU_KEYS, *args, **kwargs)
    previous = sources.entered()
    try:
        if route is _EAGER:
            global _eager
            if _eager is None:
                from neuron_mlir.frontend.device import eager as _eager
            return _eager.run(op, args, kwargs)  # which checks the operands' devices first (`check_same_device`)
        return route(*args, **kwargs)
    finally:
        sources.left(previous)


_eager: Any = None  # frontend.device.eager, imported with the first op that computes (it loads the compiler)


# kernels that would make a device op run other than through the fallback (the backend's own, or a composite)
_KERNEL_KEYS = (
    "PrivateUse1",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)


def metadata_ops() -> list[str]:
    """The aten ops (`name.overload`) that reach `neuron_fallback` and are served there by their CPU kernel over
    the device tensor: the view ops with a CPU kernel and no composite or device kernel (`view`, `as_strided`;
    `transpose`, `expand`, `t` and slicing are composites that end in `as_strided`), and `_CPU_METADATA_KERNELS`.
    The native hooks register a C++ kernel doing the same for each, so that a view costs no call into Python."""
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    names = []
    for qualified in sorted(torch._C._dispatch_get_all_op_names()):
        if not qualified.startswith("aten::") or not has_kernel(qualified, "CPU"):
            continue
        name, _, overload_name = qualified.removeprefix("aten::").partition(".")
        packet = getattr(aten, name, None)
        op = getattr(packet, overload_name or "default", None) if packet is not None else None
        if not isinstance(op, torch._ops.OpOverload) or op in _KERNELS:
            continue
        if (op.is_view or op in _CPU_METADATA_KERNELS) and not any(has_kernel(qualified, k) for k in _KERNEL_KEYS):
            names.append(qualified.removeprefix("aten::"))
    return names


def structured_kernels() -> dict[str, Callable[..., Any]]:
    """Kernels for the functional forms of structured ops (`add.Tensor`, `mm`, `sum.dim_IntList` ...).

    Other backends run their composite kernel: the op's meta function sizes the output, `empty_strided` allocates
    it, and the `out=` variant fills it: two calls of the device's fallback per op. With all tensor operands
    contiguous (so the output is contiguous too) the kernel runs the functional op as one eager program instead;
    otherwise, and where the compiler refuses the op, it does what the composite kernel does (`_via_out_variant`),
    so that the output's strides, the errors for bad arguments and the out= program are the same as before."""
    kernels: dict[str, Callable[..., Any]] = {}
    registered = set(torch._C._dispatch_get_all_op_names())
    structured = sorted(
        name
        for name in registered
        if name.startswith("aten::")
        and torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeExplicitAutogradNonFunctional")
    )
    for qualified in structured:
        name, _, overload_name = qualified.partition(".")
        packet = getattr(aten, name.removeprefix("aten::"), None)
        if packet is None:
            continue
        op = getattr(packet, overload_name or "default", None)
        if (
            op is None
            or op._schema.is_mutable
            or op in _KERNELS
            or qualified.removeprefix("aten::") in OVERRIDDEN_KERNELS
            or not op._schema.returns
        ):
            continue
        overloads = [
            getattr(packet, o) for o in packet.overloads() if (f"{name}.{o}" if o != "default" else name) in registered
        ]
        out = _out_variant(op, overloads)
        if out is not None:
            kernels[qualified.removeprefix("aten::")] = _structured_kernel(op, out)
    return kernels


def _out_variant(op: torch._ops.OpOverload, overloads: list[torch._ops.OpOverload]) -> torch._ops.OpOverload | None:
    """The `out=` overload taking `op`'s arguments, one output per result."""
    arguments = [(a.name, str(a.type)) for a in op._schema.arguments]
    for candidate in overloads:
        schema = candidate._schema
        outs = [a for a in schema.arguments if a.is_out]
        if (
            len(outs) == len(op._schema.returns)
            and [(a.name, str(a.type)) for a in schema.arguments if not a.is_out] == arguments
        ):
            return candidate
    return None


def _structured_kernel(op: torch._ops.OpOverload, out: torch._ops.OpOverload) -> Callable[..., Any]:
    tensor_arguments = [i for i, a in enumerate(op._schema.arguments) if isinstance(a.type, torch.TensorType)]

    def structured_kernel(*args: Any, **kwargs: Any) -> Any:
        previous = sources.entered()
        try:
            return _structured_call(op, out, tensor_arguments, args, kwargs)
        finally:
            sources.left(previous)

    return structured_kernel


def _structured_call(
    op: torch._ops.OpOverload,
    out: torch._ops.OpOverload,
    tensor_arguments: list[int],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """A structured op's functional form on device tensors (`_structured_kernel`)."""
    global _eager
    if _eager is None:
        from neuron_mlir.frontend.device import eager as _eager
    for index in tensor_arguments:
        if index < len(args) and isinstance(args[index], _NUMBERS):
            args = _numbers_as_tensors(args, tensor_arguments)
            break
    flat = _eager._leaves(args, kwargs)
    # a result size that depends on values (`x[mask]`) has no meta kernel to ask for strides or sizes: its results
    # are always fresh and contiguous, and a call the device has no padded form for (a mask beside other indices)
    # is refused by its trace, not raised by the meta kernel
    bounded = _eager.bounded_kernel(op, args) is not None
    if not bounded and _masks_an_index(op, args):
        return _eager.run(op, args, kwargs)
    for value in () if bounded else flat:
        if isinstance(value, torch.Tensor) and not value.is_contiguous():
            if not _contiguous_results(op, args, kwargs, flat):
                return _via_out_variant(op, out, args, kwargs)
            break
    return _eager.run_or(
        op,
        args,
        kwargs,
        lambda: _via_out_variant(op, out, args, kwargs),
        lambda: _on_meta(op, args, kwargs),
        flat,
    )


# a tuple of types, not a union: `int | float | complex` in a call makes a union object on every evaluation
_NUMBERS = (int, float, complex)


def _masks_an_index(op: torch._ops.OpOverload, args: tuple[Any, ...]) -> bool:
    """Whether a call indexes by a boolean mask (`index.Tensor`): its result's size depends on the mask's values."""
    if op is not torch.ops.aten.index.Tensor or len(args) < 2:
        return False
    return any(isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8) for index in args[1])


def _numbers_as_tensors(args: tuple[Any, ...], tensor_arguments: list[int]) -> tuple[Any, ...]:
    """The arguments with Python numbers where the schema takes a tensor as 0-d CPU tensors. A C++ composite
    passes a scalar operand as a wrapped-number tensor (`remainder(indices, 5)` within `take_along_dim`), which
    reaches Python as the number. A 0-d tensor of the dtype the number alone promotes as (int64, the default float
    dtype, bool, complex) takes part in type promotion as the number does beside a tensor of one dimension or
    more, but it outranks a wrapped number beside 0-d tensors (a 0-d bf16 tensor times 0.5 is bf16, times a 0-d
    float32 tensor float32): there it takes the dtype the 0-d tensors and the number promote to."""
    values = list(args)
    tensors = [values[i] for i in tensor_arguments if i < len(values) and isinstance(values[i], torch.Tensor)]
    beside_0d = bool(tensors) and all(t.dim() == 0 for t in tensors)
    for index in tensor_arguments:
        if index < len(values) and isinstance(values[index], _NUMBERS):
            number = values[index]
            dtype = None
            if beside_0d:
                peer = torch.empty((), dtype=functools.reduce(torch.promote_types, [t.dtype for t in tensors]))
                dtype = torch.result_type(peer, number)
            values[index] = _number_tensor(number, dtype)
    return tuple(values)


def _number_tensor(value: int | float | complex, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`torch.tensor(value, dtype=dtype)`, made once per value and dtype: a model's scalars (GELU's constants, a
    loss's scale) reach the device kernels as numbers on every call, and making the tensor costs more than the rest
    of the conversion. The tensor is an operand only (no kernel writes it, and a recorded op takes its value when
    recorded). Keyed by the number's type and exact value (a float by its bits: -0.0 and 0.0 are other tensors, and
    a NaN finds its own), `dtype` and, for a float or complex, the default dtype the tensor takes. Under a torch
    function or dispatch mode (a default device, a fake mode) `torch.tensor` makes what the mode makes, every call,
    as before."""
    if _function_modes() or _dispatch_modes():
        return torch.tensor(value, dtype=dtype)
    # the exact type: a NumPy float64 (a float subclass) gives a float64 tensor where a float gives the default dtype
    kind = type(value)
    if isinstance(value, float):
        key: tuple[Any, ...] = (kind, value.hex(), torch.get_default_dtype(), dtype)
    elif isinstance(value, complex):
        key = (kind, value.real.hex(), value.imag.hex(), torch.get_default_dtype(), dtype)
    else:
        key = (kind, value, dtype)
    tensor = _number_tensors.get(key)
    if tensor is None:
        if len(_number_tensors) >= _NUMBER_TENSORS_KEPT:
            _number_tensors.clear()  # values that change call after call (a schedule's) keep no more than this
        tensor = _number_tensors[key] = torch.tensor(value, dtype=dtype)
    return tensor


_number_tensors: dict[tuple[Any, ...], torch.Tensor] = {}
_NUMBER_TENSORS_KEPT = 256
_function_modes = torch._C._len_torch_function_stack
_dispatch_modes = torch._C._len_torch_dispatch_stack


# (op, every argument with each tensor's strides) -> whether the op's results are contiguous
_contiguous: dict[tuple[Any, ...], bool] = {}


def _contiguous_results(
    op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], flat: list[Any]
) -> bool:
    """Whether `op` gives contiguous results for these arguments, some of them not contiguous (a matmul of a
    transposed weight does; an elementwise op of a transpose keeps its strides), as the meta kernel decides."""
    key = (
        op,
        tuple(kwargs),
        *(
            (v.shape, v.stride(), v.dtype, v.is_cpu, storage.on_device(v))
            if isinstance(v, torch.Tensor)
            else (type(v), v)
            for v in flat
        ),
    )
    try:
        found = _contiguous.get(key)
    except TypeError:  # a value without a hash (a symbolic size): not remembered
        return all(r.is_contiguous() for r in _on_meta(op, args, kwargs))
    if found is None:
        found = _contiguous[key] = all(r.is_contiguous() for r in _on_meta(op, args, kwargs))
    return found


def _on_meta(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """`op`'s results for device tensors of the arguments' geometry on the meta device. Arguments the op does not
    take raise the CPU kernel's error, PyTorch's eager error (the meta kernels word some of them differently)."""

    def on_meta(value: torch.Tensor) -> torch.Tensor:
        if not _is_device(value):
            return value  # a CPU scalar keeps its part in type promotion
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")

    meta_args, meta_kwargs = tree_map_only(torch.Tensor, on_meta, (args, kwargs))
    try:
        result = op(*meta_args, **meta_kwargs)
    except RuntimeError:
        run_on_host(op, args, kwargs)  # raises PyTorch's own error
        raise
    return [result] if len(op._schema.returns) == 1 else list(result)


def _via_out_variant(
    op: torch._ops.OpOverload, out: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """`op` as its composite kernel runs it: outputs sized and strided by the op on meta tensors (which raises
    PyTorch's error for bad arguments), allocated on the device, then filled by the `out=` variant."""

    if op in _filling:
        # the out= variant's kernel calls the functional op again (`linalg_pinv`'s does): the host runs it
        return _eager.run(op, args, kwargs)
    results = _on_meta(op, args, kwargs)
    outputs = [_empty_like_meta(r) for r in results]
    names = [a.name for a in out._schema.arguments if a.is_out]
    _filling.add(op)
    try:
        out(*args, **kwargs, **dict(zip(names, outputs, strict=True)))
    finally:
        _filling.discard(op)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


# the functional ops whose out= variant `_via_out_variant` is running
_filling: set[torch._ops.OpOverload] = set()


def _empty_like_meta(result: Any) -> Any:
    """Device outputs of a meta result's geometry: a tensor, or a list of them (a `Tensor[]` return)."""
    if isinstance(result, list | tuple):
        return [_empty_like_meta(r) for r in result]
    return storage.empty_strided(result.shape, result.stride(), result.dtype)


def check_same_device(op: torch._ops.OpOverload, operands: list[Any]) -> None:
    """PyTorch's error for a device tensor next to a CPU tensor (0-d CPU tensors pass, as scalars do on CUDA);
    `operands` are the op's arguments flattened."""
    host = None
    on_device = False
    for value in operands:
        if isinstance(value, torch.Tensor):
            if value.is_cpu:
                if host is None and value.dim() > 0:
                    host = value
            elif not on_device:
                on_device = storage.on_device(value)
    if host is not None and on_device and op._schema.name not in _HOST_OPERANDS_ALLOWED:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {storage.device()} and "
            f"cpu! (in {op._schema.name})"
        )


def run_on_host(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `op` by its CPU kernel over host aliases of the device tensors (see the module docstring)."""
    from neuron_mlir.frontend.device import random

    aliases: dict[int, torch.Tensor] = {}

    def to_host(value: torch.Tensor) -> torch.Tensor:
        if not _is_device(value):
            return value
        alias = aliases.get(id(value))
        if alias is None:
            alias = aliases[id(value)] = storage.host_alias(value)
        return alias

    host_args, host_kwargs = tree_map_only(torch.Tensor, to_host, (args, kwargs))
    if host_kwargs.get("device") is not None and torch.device(host_kwargs["device"]).type == DEVICE_TYPE:
        host_kwargs["device"] = torch.device("cpu")  # a factory op: made on the host, then copied over
    schema = op._schema
    written = _written_arguments(schema, args, kwargs)
    if "generator" in (a.name for a in schema.arguments):
        with random.on_host(host_kwargs.get("generator") or random.device_generator()) as generator:
            host_kwargs["generator"] = generator
            return _run_on_host(op, host_args, host_kwargs, written, aliases, args, kwargs)
    if torch.Tag.nondeterministic_seeded in op.tags and "generator" not in host_kwargs:
        with random.as_default_generator():  # a random op without a generator argument (native_dropout)
            return _run_on_host(op, host_args, host_kwargs, written, aliases, args, kwargs)
    return _run_on_host(op, host_args, host_kwargs, written, aliases, args, kwargs)


def _run_on_host(
    op: torch._ops.OpOverload,
    host_args: Any,
    host_kwargs: dict[str, Any],
    written: list[tuple[int | str, Any]],
    aliases: dict[int, torch.Tensor],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    schema = op._schema
    try:
        result = op(*host_args, **host_kwargs)
    except RuntimeError as error:
        if not written or "not resizable" not in str(error):
            raise
        # an out= tensor too small for the result: compute into fresh host tensors, then grow the device tensors
        host_args = list(host_args)
        fresh: list[tuple[Any, Any]] = []
        for where, value in written:
            replacement = tree_map_only(torch.Tensor, lambda t: torch.empty(0, dtype=t.dtype), value)
            if isinstance(where, int):
                host_args[where] = replacement
            else:
                host_kwargs[where] = replacement
            fresh.append((value, replacement))
        result = op(*host_args, **host_kwargs)
        for value, replacement in fresh:
            for device_tensor, host_tensor in zip(_tensors(value), _tensors(replacement), strict=True):
                storage.resize(device_tensor, host_tensor.shape)
                storage.host_alias(device_tensor).copy_(host_tensor)
    else:
        for _, value in written:
            for device_tensor in _tensors(value):
                _follow_host_geometry(device_tensor, aliases[id(device_tensor)])
    return _device_results(schema, result, args, kwargs)


def _tensors(value: Any) -> list[torch.Tensor]:
    return [v for v in tree_flatten(value)[0] if isinstance(v, torch.Tensor)]


def _written_arguments(
    schema: torch.FunctionSchema, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[int | str, Any]]:
    """The device tensors the op writes (in-place `self`, `out=`), each with where it was passed: its position
    in `args` or its keyword."""
    written: list[tuple[int | str, Any]] = []
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        where: int | str = argument.name if argument.name in kwargs else index
        value = kwargs[argument.name] if isinstance(where, str) else args[index] if index < len(args) else None
        tensors = _tensors(value)
        if tensors and all(_is_device(t) for t in tensors):
            written.append((where, value))
    return written


def _follow_host_geometry(device_tensor: torch.Tensor, host_tensor: torch.Tensor) -> None:
    """A CPU kernel may restride, shrink or (when the device tensor holds no bytes yet, so its host alias owns its
    own) grow an output (`resize_output`): give the device tensor the same geometry, over its own storage when the
    host tensor still uses the device bytes, else over new device memory that receives the host tensor's values."""
    if host_tensor.untyped_storage().data_ptr() != device_tensor.untyped_storage().data_ptr():
        storage.resize(device_tensor, host_tensor.shape)
        storage.host_alias(device_tensor).copy_(host_tensor)
        return
    if (
        device_tensor.shape != host_tensor.shape
        or device_tensor.stride() != host_tensor.stride()
        or device_tensor.storage_offset() != host_tensor.storage_offset()
    ):
        storage.bind(
            device_tensor,
            device_tensor.untyped_storage(),
            host_tensor.storage_offset(),
            host_tensor.shape,
            host_tensor.stride(),
        )


def _argument_by_alias_set(
    schema: torch.FunctionSchema, alias_set: set[str], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is not None and argument.alias_info.before_set & alias_set:
            if argument.name in kwargs:
                return kwargs[argument.name]
            return args[index] if index < len(args) else argument.default_value
    raise RuntimeError(f"{schema.name}: no argument in alias set {alias_set}")


def _device_results(schema: torch.FunctionSchema, result: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The op's results as device values: written arguments returned as themselves, views of device tensors as
    device views, fresh tensors copied to new device tensors."""
    returns = schema.returns
    if not returns:  # ops that only write their arguments (`_foreach_*_`, `_fused_adamw_`)
        return None
    values = [result] if len(returns) == 1 else list(result)
    converted = []
    for declared, value in zip(returns, values, strict=True):
        alias = declared.alias_info
        if alias is not None and alias.is_write:
            converted.append(_argument_by_alias_set(schema, alias.before_set, args, kwargs))
        elif alias is not None:
            base = _argument_by_alias_set(schema, alias.before_set, args, kwargs)
            converted.append(tree_map_only(torch.Tensor, functools.partial(_device_view, base), value))
        else:
            converted.append(tree_map_only(torch.Tensor, to_device, value))
    return converted[0] if len(returns) == 1 else tuple(converted)


def _device_view(base: torch.Tensor, host_view: torch.Tensor) -> torch.Tensor:
    if not _is_device(base):
        return to_device(host_view)
    view = torch._C._acc.create_empty_tensor((0,), host_view.dtype)
    return storage.bind(view, base.untyped_storage(), host_view.storage_offset(), host_view.shape, host_view.stride())


def to_device(host: torch.Tensor) -> torch.Tensor:
    """A new device tensor holding `host`'s values (a dense layout keeps its strides, others become contiguous)."""
    if _is_device(host):
        return host
    stride = host.stride() if _dense(host) else storage.contiguous_strides(host.shape)
    tensor = storage.empty_strided(host.shape, stride, host.dtype)
    storage.host_alias(tensor).copy_(host)
    return tensor


def _dense(tensor: torch.Tensor) -> bool:
    return _non_overlapping_and_dense(tensor) and tensor.storage_offset() == 0


def _non_overlapping_and_dense(tensor: torch.Tensor) -> bool:
    # a contiguous tensor is the common case, told by a flag torch keeps; the general test costs tens of us
    return tensor.is_contiguous() or bool(torch._prims_common.is_non_overlapping_and_dense_or_false(tensor))
