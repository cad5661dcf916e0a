"""Registering the `neuron` device with torch: PrivateUse1 renamed, its hooks, device guard, module and kernels.

`autoload` is the function of the `torch.backends` entry point (pyproject.toml), which `import torch` calls: from
then on `torch.device("neuron")`, `Tensor.to("neuron")` / `.neuron()`, `Module.to("neuron")`,
`torch.accelerator`, `torch.neuron` and `torch.autocast("neuron")` work without importing neuron-mlir.
With TORCH_DEVICE_BACKEND_AUTOLOAD=0, `register()` does the same by hand. Registering costs no compiler import:
the compiler loads with the first op that runs on the device.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.backend_registration import generate_methods_for_privateuse1_backend, rename_privateuse1_backend

from neuron_mlir.frontend.device.storage import DEVICE_TYPE

_library: torch.library.Library | None = None
_aten_library: torch.library.Library | None = None
# the pass-through registrations of `_copy_from` for the math-bit keys (`register`), kept alive with the process
_math_bit_libraries: list[torch.library.Library] = []


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    """What torch asks of a backend's runtime: always present, always usable (it is simulated)."""

    def is_available(self) -> bool:
        return True

    def has_primary_context(self, device_index: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _DeviceGuard(torch._C._acc.DeviceGuard):
    def type_(self) -> Any:  # torch's stub says a device; the binding wants the DeviceType enum
        return torch._C._autograd.DeviceType.PrivateUse1


def hide_from_dynamo(*functions: Any) -> None:
    """Make torch.compile's frame evaluation run these functions, and every function they call, as they are.

    torch calls the device's Python kernels and hooks from C++ while running eager code, and inside a compiled
    function that eager code runs with Dynamo's frame hook installed (FSDP2's hooks, code around graph breaks):
    Dynamo would then trace the device's own internals as if they were the user's code, compiling NumPy views of
    device memory into graphs. A frame strategy set on their code objects tells it to leave them alone; it is
    set through torch's C binding, so registering the device does not import Dynamo."""
    try:
        from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy
    except ImportError:  # a torch without Dynamo's frame hook has nothing to hide from
        return
    skip = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)  # this frame, and recursively its callees
    for function in functions:
        set_code_exec_strategy(getattr(function, "__func__", function).__code__, skip)


def is_registered() -> bool:
    return _library is not None


def register() -> None:
    """Make PrivateUse1 the `neuron` device (once per process; later calls do nothing)."""
    global _library, _aten_library
    if _library is not None:
        return
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", DEVICE_TYPE):
        raise RuntimeError(
            f"cannot register the {DEVICE_TYPE} device: torch's PrivateUse1 backend is already '{current}'"
        )
    if current != DEVICE_TYPE:
        rename_privateuse1_backend(DEVICE_TYPE)
    # after the rename: these modules make `torch.device("neuron")`s
    from neuron_mlir.frontend.device import dispatch, storage, torch_neuron
    from neuron_mlir.frontend.device.dispatch import (
        OVERRIDDEN_KERNELS,
        foreach_kernels,
        neuron_fallback,
        structured_kernels,
    )

    # storages' methods only with the native hooks (below): their copies allocate through a C++ allocator
    generate_methods_for_privateuse1_backend()
    torch._register_device_module(DEVICE_TYPE, torch_neuron)
    from neuron_mlir.frontend.device import native

    # the native hooks add storage resize, generators and pinned memory; without them, torch's Python hooks
    if native.register_hooks(storage.resize_bytes, storage.allocate_for_torch):
        # `UntypedStorage.neuron()` / `.is_neuron` allocate through the native hooks' C++ allocator
        generate_methods_for_privateuse1_backend(
            for_tensor=False, for_module=False, for_packed_sequence=False, for_storage=True
        )
    else:
        torch._C._acc.register_python_privateuseone_hook(_Hooks())
        if native.unavailable_reason() != "NEURON_MLIR_NATIVE=0":
            import warnings

            warnings.warn(
                f"neuron-mlir: the {DEVICE_TYPE} device's native hooks are unavailable ({native.unavailable_reason()}):"
                " untyped_storage().resize_ (FSDP2), torch.Generator(device='neuron') and pin_memory() raise"
                " NotImplementedError",
                stacklevel=2,
            )
    if not native.register_device_guard():
        torch._C._acc.register_python_privateuseone_device_guard(_DeviceGuard())
    from neuron_mlir.frontend.device import module_conversion

    module_conversion.install()  # `Module.to("neuron")` would untie tied weights (module_conversion's docstring)
    # The autograd engine runs a device's part of a backward pass on a thread of its own per device, so that a
    # GPU's streams overlap the CPU's work. The simulated NeuronCore's work is host work: the hand-over to that
    # thread and back for every pass only adds CPU time (a tenth to a sixth of an eager MLP training step). The
    # engine runs a pass on the calling thread when multithreading is off for it, a per-thread setting: off for
    # the thread that registers the device (the main thread, as `import torch` loads it). The order of the ops,
    # their results and `torch.autograd.set_multithreading_enabled` in user code are unchanged.
    torch._C._set_multithreading_enabled(False)
    # before torch's PrivateUse1 entry (priority 23), which would allocate the storage in C++
    torch.serialization.register_package(19, storage.serialization_tag, storage.serialization_restore)
    library = torch.library.Library("_", "IMPL", "PrivateUse1")
    library.fallback(neuron_fallback)
    aten_library = torch.library.Library("aten", "IMPL", "PrivateUse1")
    foreach, structured = foreach_kernels(), structured_kernels()
    for name, kernel in (*OVERRIDDEN_KERNELS.items(), *foreach.items(), *structured.items()):
        aten_library.impl(name, kernel)
    # view ops in C++ where the native hooks are loaded (the fallback serves them from Python otherwise); after the
    # Python kernels, which the list leaves out
    if native.loaded():
        native.register_metadata_kernels(dispatch.metadata_ops())
        native.register_attention_choice()
        storage.use_native(
            native.tensor_over(),
            native.fresh_tensor(),
            native.tensor_facts(),
            native.fresh_tensors(),
            native.cached_array(),
            native.cached_arrays(),
        )
        from neuron_mlir.frontend.device import region

        region.use_native(native.sources_of(), native.record_fresh())
        # `ones_like` (the gradient `loss.backward()` starts from) without the Python fallback's call per op
        native.register_device_kernels(
            dispatch.native_fill,
            dispatch.native_empty,
            storage.BLOCK_ATTRIBUTE,
            storage.DENSE_ARRAYS_ATTRIBUTE,
            vars(storage),
        )
    # torch's fallback for the Conjugate (Negative) key materialises a conjugate (negative) operand with `clone`,
    # whose `copy_` hands a device tensor to `_copy_from`, which is not on the key's pass-through list (the CPU's
    # and CUDA's copies never call it): that call reached the same fallback with the same operand and recursed
    # until the stack overflowed. Passed through, `_copy_from` gets the view itself, and copies through host
    # aliases carrying its bit (`storage.host_alias`), as the CPU's `copy_` does.
    for key in ("Conjugate", "Negative"):
        math_bit = torch.library.Library("aten", "IMPL", key)
        for name in ("_copy_from", "_copy_from_and_resize"):
            math_bit.impl(name, torch.library.fallthrough_kernel)
        _math_bit_libraries.append(math_bit)
    _library, _aten_library = library, aten_library
    hide_from_dynamo(
        neuron_fallback,
        dispatch.native_fill,
        dispatch.native_empty,
        storage.resize_bytes,
        storage.allocate_for_torch,
        *OVERRIDDEN_KERNELS.values(),
        # every foreach kernel is a closure of one code object, and so is every structured op's
        *list(foreach.values())[:1],
        *list(structured.values())[:1],
        _DeviceGuard.type_,
        _Hooks.is_available,
        _Hooks.has_primary_context,
        _Hooks.is_built,
    )
    from neuron_mlir.frontend.device import autocast

    autocast.register()  # torch.autocast("neuron"): torch has no kernels for a PrivateUse1 device's autocast key
    from neuron_mlir.frontend.distributed import process_group

    process_group.register()  # the `neuron` collectives backend, torch.distributed's choice for neuron tensors
    # c10d calls the group's collectives from C++
    hide_from_dynamo(*(v for v in vars(process_group.NeuronProcessGroup).values() if callable(v)))


def autoload() -> None:
    """The `torch.backends` entry point: called by `import torch` (unless TORCH_DEVICE_BACKEND_AUTOLOAD=0).

    A failure to register is a warning, not an exception: torch turns an entry point's exception into a failed
    `import torch`, and a broken device must not make torch itself unusable."""
    try:
        register()
    except Exception as error:
        import warnings

        warnings.warn(f"neuron-mlir: the {DEVICE_TYPE} device is not available: {error!r}", stacklevel=2)
