"""`torch.neuron`: the device module of the `neuron` device, as `torch.cuda` is CUDA's.

torch finds it by the device's name (`torch.get_device_module("neuron")`, `torch.accelerator`, autocast's
`get_amp_supported_dtype`, `torch.manual_seed`'s `manual_seed_all`). One process drives one NeuronCore, so there is
one device, index 0.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from neuron_mlir.frontend.device.random import (
    device_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from neuron_mlir.frontend.device.storage import device_memory
from neuron_mlir.frontend.device.streams import (
    Event,
    Stream,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def init() -> None:
    """The simulated device needs no initialisation."""


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def _check_index(device: Any) -> int:
    index = torch.device("neuron", device).index if isinstance(device, int) else None
    if isinstance(device, str | torch.device):
        parsed = torch.device(device)
        if parsed.type != "neuron":
            raise ValueError(f"expected a neuron device, got {parsed}")
        index = parsed.index
    if index not in (None, 0):
        raise ValueError(f"neuron device index {index} out of range: one NeuronCore per process (index 0)")
    return 0


def set_device(device: Any) -> None:
    _check_index(device)


class device:
    """Context manager selecting the device: the only one, index 0."""

    def __init__(self, device: Any) -> None:
        _check_index(device)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def get_device_name(device: Any = None) -> str:
    return f"NeuronCore ({device_memory().target.name}, simulated)"


def get_device_properties(device: Any = None) -> dict[str, Any]:
    target = device_memory().target
    return {"name": get_device_name(), "target": target.name, "total_memory": target.hbm_bytes}


def synchronize(device: Any = None) -> None:
    current_stream().synchronize()


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed_all() -> None:
    seed()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state()]


def set_rng_state_all(states: list[torch.Tensor]) -> None:
    set_rng_state(states[0])


def native_hooks_available() -> bool:
    """Whether the device's native hooks are loaded: storage resize (FSDP2), device generators, pinned memory."""
    from neuron_mlir.frontend.device import native

    return native.loaded()


def __getattr__(name: str) -> Any:
    # made on first use: the default generator is the native hooks' own, and they register after this module
    if name == "default_generators":
        return (device_generator(),)
    raise AttributeError(f"module 'torch.neuron' has no attribute '{name}'")


def memory_allocated(device: Any = None) -> int:
    """Bytes of device memory held by tensors, exactly (the sum of their storages' sizes)."""
    return device_memory().allocated_bytes


def max_memory_allocated(device: Any = None) -> int:
    return device_memory().peak_allocated_bytes


def memory_reserved(device: Any = None) -> int:
    """Bytes of the device's address space in use (storages rounded up to the HBM alignment)."""
    return device_memory().reserved_bytes


def max_memory_reserved(device: Any = None) -> int:
    return device_memory().peak_reserved_bytes


def reset_peak_memory_stats(device: Any = None) -> None:
    device_memory().reset_peak()


def memory_stats(device: Any = None) -> OrderedDict[str, int]:
    return OrderedDict(sorted(device_memory().stats().items()))


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device's HBM."""
    memory = device_memory()
    return memory.free_bytes, memory.capacity


def empty_cache() -> None:
    """Nothing to release: freed tensors give their memory back at once (there is no caching allocator)."""


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def eager_stats() -> dict[str, Any]:
    """Eager ops so far: calls run natively (compiled) and on the host, by op; programs compiled; bytes copied."""
    from neuron_mlir.frontend.device.eager import EAGER_STATS

    return EAGER_STATS.as_dict()


__all__ = [
    "Event",
    "Stream",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "eager_stats",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_available",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "native_hooks_available",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]
