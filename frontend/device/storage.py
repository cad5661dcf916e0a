"""The data of `neuron` tensors: storages whose bytes are blocks of the simulated HBM (`runtime/device_memory.py`).

A device storage is a torch `UntypedStorage` on the `neuron` device built around the data pointer of its block's
bytes, and the block hangs on the storage's Python object. torch keeps one Python object per storage for as long
as any tensor uses it (views, autograd's saved shallow copies and `detach()` all share the storage), so the block
lives exactly as long as the storage, and dies (giving its HBM range back) with the last tensor that uses it.

Tensors are given their storage, sizes and strides by the CPU kernels of `set_` and the view ops, which only
write metadata, or, for a fresh contiguous tensor, made whole by the native hooks (`native.fresh_tensor`: block,
storage and tensor in one call, when the memory's address space is the native one): a device tensor never reaches
an allocator of torch's own. The same bytes are visible on the host
as CPU tensors (`host_alias`), the way the CPU fallback and the host side of compiled ops read and write them.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch

from neuron_mlir.runtime.device_memory import (
    AddressSpace,
    Block,
    DeviceMemory,
    DeviceOutOfMemoryError,
    PythonAddressSpace,
)

DEVICE_TYPE = "neuron"
# the kernels of `set_` and of the view ops are registered for CPU; they only write metadata
CPU_KEYS = torch.DispatchKeySet(torch.DispatchKey.CPU)
_BLOCK_ATTRIBUTE = "_neuron_block"
BLOCK_ATTRIBUTE = _BLOCK_ATTRIBUTE  # for the native hooks, which make storages carrying their blocks
# dtype -> a flat CPU tensor over the whole block, kept on the storage (made once, not per op)
_HOST_VIEWS_ATTRIBUTE = "_neuron_host_views"
# (offset, shape, dtype) -> a NumPy array over those bytes of the block (`dense_array`), kept on the storage
_DENSE_ARRAYS_ATTRIBUTE = "_neuron_dense_arrays"
DENSE_ARRAYS_ATTRIBUTE = _DENSE_ARRAYS_ATTRIBUTE  # for the native hooks, which keep arrays on the storages they make
# (offset, shape, strides, dtype) -> (block, the gather of those elements), kept on the storage by deferred regions
# (`region._gather`) for the strided operands they read as inputs
_GATHERS_ATTRIBUTE = "_neuron_gathers"
_DENSE_ARRAYS_PER_STORAGE = 16  # more views of one storage than a model's step asks for: start afresh

_numpy_dtypes: dict[torch.dtype, np.dtype] = {}


def numpy_element(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype's elements (`tensors.numpy_dtype`), remembered: asked once per op."""
    element = _numpy_dtypes.get(dtype)
    if element is None:  # frontend.tensors imports ml_dtypes: not at registration, which `import torch` runs
        from neuron_mlir.frontend.tensors import numpy_dtype

        element = _numpy_dtypes[dtype] = np.dtype(numpy_dtype(dtype))
    return element


_torch_dtypes: dict[np.dtype, torch.dtype] = {}

_memory: DeviceMemory | None = None
_device: torch.device | None = None


# On POSIX, os.environ keeps the encoded environment in a dict its setters update; reading it directly skips the
# encoding and decoding of `os.environ.get`, a good part of a microsecond per setting that every eager op reads.
_ENVIRON_DATA: dict[bytes, bytes] | None = getattr(os.environ, "_data", None) if os.name == "posix" else None


def setting(name: str, default: str) -> str:
    """`os.environ.get(name, default)`, cheaper: for the settings read on every eager op (they may change between
    ops: a test or a bench turns deferral on and off)."""
    data = _ENVIRON_DATA
    if data is None:
        return os.environ.get(name, default)
    known = _settings.get(name)
    if known is None:
        known = _settings[name] = [os.fsencode(name), _UNREAD, default, default]
    raw = data.get(known[0])
    # os.environ's setters store a new bytes object: the same object read again is the same value, decoded once
    # (the entry holds it, so its identity cannot pass to another value)
    if raw is not known[1] or default is not known[2]:
        known[1], known[2] = raw, default
        known[3] = default if raw is None else os.fsdecode(raw)
    return known[3]


# per setting's name: [its encoded name, the raw value last read, the default it was read with, the setting then]
_settings: dict[str, list[Any]] = {}
_UNREAD: Any = object()


# what runs a pending region of recorded eager ops (`region.flush`) while one is pending, else None
_observer: Any = None


def set_observer(observer: Any) -> None:
    global _observer
    _observer = observer


def observe() -> None:
    """Device bytes are about to be read or written outside the pending region of recorded eager ops (if one is
    pending): run it first, so that they hold what running every op as it came would have left."""
    if _observer is not None:
        _observer()


def device() -> torch.device:
    """`neuron:0` (made on first use: the name exists only once PrivateUse1 is renamed)."""
    global _device
    if _device is None:
        _device = torch.device(DEVICE_TYPE, 0)
    return _device


def on_device(tensor: torch.Tensor) -> bool:
    """Whether `tensor` is a device tensor: `tensor.device.type == "neuron"`, told without `.type`, which looks up
    the renamed backend's name and makes a new string on every call (several times a cheap check's cost)."""
    if tensor.is_cpu:
        return False
    where = tensor.device
    return where == (_device or device()) or where.type == DEVICE_TYPE


def device_memory() -> DeviceMemory:
    """The HBM of this process's NeuronCore, for the target NEURON_MLIR_TARGET names (trn2 by default)."""
    global _memory
    if _memory is None:
        from neuron_mlir.runtime.hardware import DEFAULT_TARGET, get_target

        _memory = DeviceMemory(get_target(os.environ.get("NEURON_MLIR_TARGET", DEFAULT_TARGET)), None, _address_space)
    return _memory


def _address_space(capacity: int, alignment: int) -> AddressSpace:
    """The native library's address space when it is loaded (no Python code per allocation and free), else the
    Python one."""
    from neuron_mlir.frontend.device import native

    space = native.address_space(capacity, alignment) if native.loaded() else None
    return cast(AddressSpace, space) if space is not None else PythonAddressSpace(capacity, alignment)


def new_storage(nbytes: int) -> torch.UntypedStorage:
    """A storage of `nbytes` in device memory; torch.OutOfMemoryError when the HBM cannot hold it."""
    try:
        block = device_memory().allocate(nbytes)
    except DeviceOutOfMemoryError as error:
        raise torch.OutOfMemoryError(str(error)) from None
    storage = torch._C._construct_storage_from_data_pointer(block.data.ctypes.data, device(), nbytes)
    setattr(storage, _BLOCK_ATTRIBUTE, block)
    return cast(torch.UntypedStorage, storage)


def allocate_for_torch(nbytes: int) -> tuple[int, Block]:
    """A block for a storage torch allocates itself through the device's C++ allocator (the native hooks'):
    its address, and the block, which the storage's data pointer keeps alive."""
    try:
        block = device_memory().allocate(nbytes)
    except DeviceOutOfMemoryError as error:
        raise torch.OutOfMemoryError(str(error)) from None
    address = int(block.data.ctypes.data)
    if nbytes:  # empty arrays may share an address; they have no bytes to find
        _torch_blocks[address] = block
    return address, block


# the blocks of storages from torch's own allocations, by address: such a storage has no block attribute
_torch_blocks: weakref.WeakValueDictionary[int, Block] = weakref.WeakValueDictionary()


def _stored_block(stored: torch.UntypedStorage) -> Block | None:
    block: Block | None = getattr(stored, _BLOCK_ATTRIBUTE, None)
    if block is None and _torch_blocks:
        block = _torch_blocks.get(stored.data_ptr())
    return block


def block_of(tensor: torch.Tensor) -> Block:
    """The HBM block holding `tensor`'s data."""
    block = _stored_block(tensor.untyped_storage())
    if block is None:
        raise RuntimeError(f"a {DEVICE_TYPE} tensor without device memory (shape {tuple(tensor.shape)})")
    return block


def storage_nbytes(size: Sequence[int], stride: Sequence[int], itemsize: int) -> int:
    """Bytes a tensor of `size` and `stride` spans from its first element (0 when it has no elements)."""
    if any(extent == 0 for extent in size):
        return 0
    return (1 + sum((extent - 1) * step for extent, step in zip(size, stride, strict=True))) * itemsize


def contiguous_strides(size: Sequence[int]) -> list[int]:
    strides = [1] * len(size)
    for axis in range(len(size) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * max(size[axis + 1], 1)
    return strides


def bind(
    tensor: torch.Tensor,
    storage: torch.UntypedStorage,
    offset: int | torch.SymInt,
    size: Sequence[int],
    stride: Sequence[int],
) -> torch.Tensor:
    """Point `tensor` (a device tensor) at `storage` with this geometry; returns `tensor`."""
    torch.ops.aten.set_.source_Storage_storage_offset.redispatch(CPU_KEYS, tensor, storage, offset, size, stride)
    return tensor


def empty_strided(size: Sequence[int], stride: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A new device tensor with its own storage."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    shape = tuple(size)
    contiguous = stride == _strides(shape)
    if contiguous and _fresh_tensor is not None:  # block, storage and tensor in one native call
        made = _fresh_tensor((_memory or device_memory()).space, shape, dtype, None, _BLOCK_ATTRIBUTE)
        if made is not None:
            return cast(torch.Tensor, made[0])
    storage = new_storage(storage_nbytes(size, stride, dtype.itemsize))
    if _tensor_over is not None and contiguous:
        return cast(torch.Tensor, _tensor_over(storage, shape, dtype))
    return bind(torch._C._acc.create_empty_tensor((0,), dtype), storage, 0, size, stride)


def empty(size: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    return empty_strided(size, contiguous_strides(size), dtype)


def host_alias(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the very bytes of device tensor `tensor`: writes through either show in both. It carries
    `tensor`'s conjugate and negative bits."""
    if _observer is not None:
        _observer()
    stored = tensor.untyped_storage()
    dtype = tensor.dtype
    views: dict[torch.dtype, torch.Tensor] | None = getattr(stored, _HOST_VIEWS_ATTRIBUTE, None)
    if views is None:
        views = {}
        setattr(stored, _HOST_VIEWS_ATTRIBUTE, views)
    flat = views.get(dtype)
    if flat is None:
        block: Block | None = _stored_block(stored)
        if block is None:
            raise RuntimeError(f"a {DEVICE_TYPE} tensor without device memory (shape {tuple(tensor.shape)})")
        usable = block.nbytes - block.nbytes % dtype.itemsize
        # no elements to alias: NumPy gives empty arrays strides torch cannot view
        flat = torch.from_numpy(block.data[:usable]).view(dtype) if usable else torch.empty(0, dtype=dtype)
        views[dtype] = flat
    if not flat.numel():
        alias = torch.empty(0, dtype=dtype).as_strided(tensor.shape, tensor.stride(), 0)
    else:
        alias = flat.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())
    # a conjugate or negative view (`x.conj()`, `x.conj().imag`) stands for values its bytes hold conjugated or
    # negated: the alias carries the same bit, so that the CPU kernels reading or writing it resolve it as they do
    # for CPU tensors
    if tensor.is_conj():
        alias = alias.conj()
    if tensor.is_neg():
        alias = torch._neg_view(alias)
    return alias


def dense_array(tensor: torch.Tensor) -> np.ndarray | None:
    """A NumPy array over the very bytes of contiguous device tensor `tensor` (None when it is not contiguous, or is
    a conjugate or negative view):
    what the simulator reads and writes without a torch tensor in between.

    The arrays are kept on the storage by offset, shape and dtype (a parameter, an optimizer's state and the
    activations a backward reads are asked for again and again), as its host views are, and dropped with them
    when the storage gets another block (`resize_bytes`)."""
    if _cached_array is not None:  # a kept array found in one native call (most calls: parameters, activations)
        kept = _cached_array(tensor, _DENSE_ARRAYS_ATTRIBUTE)
        if kept is not None:
            return cast(np.ndarray, kept)
    block, stored, offset, contiguous, plain = _tensor_facts(tensor, _BLOCK_ATTRIBUTE) or python_tensor_facts(
        tensor, _BLOCK_ATTRIBUTE
    )
    if not (contiguous and plain):
        return None  # the bytes of a conjugate or negative view are not its values
    arrays: dict[tuple[Any, ...], np.ndarray] | None = getattr(stored, _DENSE_ARRAYS_ATTRIBUTE, None)
    key = (offset, tensor.shape, tensor.dtype)
    if arrays is not None:
        found = arrays.get(key)
        if found is not None:
            return found
    if block is None:
        block = _stored_block(stored)
    if block is None:
        raise RuntimeError(f"a {DEVICE_TYPE} tensor without device memory (shape {tuple(tensor.shape)})")
    dtype = tensor.dtype
    element = numpy_element(dtype)
    itemsize = dtype.itemsize
    start = offset * itemsize
    array = block.data[start : start + tensor.numel() * itemsize].view(element).reshape(tensor.shape)
    if arrays is None or len(arrays) >= _DENSE_ARRAYS_PER_STORAGE:
        arrays = {}
        setattr(stored, _DENSE_ARRAYS_ATTRIBUTE, arrays)
    arrays[key] = array
    return array


def from_array(array: np.ndarray) -> torch.Tensor:
    """A new contiguous device tensor holding NumPy `array`'s values (ml_dtypes' arrays as bf16 and fp8)."""
    tensor, values = empty_array(array.shape, array.dtype)
    np.copyto(values, array)
    return tensor


def empty_array(shape: Sequence[int], dtype: np.dtype) -> tuple[torch.Tensor, np.ndarray]:
    """A new contiguous device tensor of `shape` for values of NumPy `dtype` (ml_dtypes' as bf16 and fp8), and a
    NumPy array over its bytes, of that shape and dtype: what the simulator writes a result into."""
    torch_dtype = _torch_dtypes.get(dtype)
    if torch_dtype is None:
        from neuron_mlir.frontend.tensors import torch_dtype as to_torch

        torch_dtype = _torch_dtypes[dtype] = to_torch(dtype)
    shape = tuple(shape)
    memory = _memory or device_memory()
    if _fresh_tensor is not None:  # the whole of it in one native call
        made = _fresh_tensor(memory.space, shape, torch_dtype, dtype, _BLOCK_ATTRIBUTE, _DENSE_ARRAYS_ATTRIBUTE)
        if made is not None:
            return made
        # no room (the allocation below raises the out-of-memory error), or the memory's space is not native
    nbytes = math.prod(shape) * torch_dtype.itemsize
    # `new_storage` inlined: every eager op's fresh result and every compiled graph's device output comes here
    try:
        block = memory.allocate(nbytes)
    except DeviceOutOfMemoryError as error:
        raise torch.OutOfMemoryError(str(error)) from None
    data = block.data
    stored = torch._C._construct_storage_from_data_pointer(data.ctypes.data, _device or device(), nbytes)
    setattr(stored, _BLOCK_ATTRIBUTE, block)
    if _tensor_over is not None:
        tensor = _tensor_over(stored, shape, torch_dtype)
    else:
        tensor = torch._C._acc.create_empty_tensor((0,), torch_dtype)
        _set_storage(CPU_KEYS, tensor, stored, 0, shape, _strides(shape))
    # the new block's bytes are the tensor's, in order
    return tensor, data.view(dtype).reshape(shape)


def empty_arrays(
    layouts: Sequence[tuple[tuple[int, ...], torch.dtype, np.dtype]],
) -> list[tuple[torch.Tensor, np.ndarray]]:
    """`empty_array(shape, element)` for each `(shape, torch dtype, element)` of `layouts` (the torch dtype the one
    `element` stands for), in one native call when the hooks are loaded: a compiled graph's device outputs."""
    memory = _memory or device_memory()
    if _fresh_tensors is not None:
        made = _fresh_tensors(memory.space, layouts, _BLOCK_ATTRIBUTE, _DENSE_ARRAYS_ATTRIBUTE)
        if made is not None:
            return cast(list[tuple[torch.Tensor, np.ndarray]], made)
        # no room for one of them (the one-by-one path raises the out-of-memory error), or not a native space
    return [empty_array(shape, element) for shape, _, element in layouts]


def python_tensor_facts(tensor: torch.Tensor, attribute: str) -> tuple[Any, torch.UntypedStorage, int, bool, bool]:
    """What a deferred region and `dense_array` ask of a device tensor: its untyped storage's attribute `attribute`
    (None when it has none), the storage, its storage offset in elements, whether it is contiguous, and whether it
    is neither a conjugate nor a negative view (its bytes are its values). The native hooks' `tensor_facts` gives
    the same in one call (`_tensor_facts`), or None for a tensor without a storage, which this then asks."""
    stored = tensor.untyped_storage()
    plain = not (tensor.is_conj() or tensor.is_neg())
    return getattr(stored, attribute, None), stored, int(tensor.storage_offset()), tensor.is_contiguous(), plain


# the native hooks' constructor of a contiguous tensor over a storage, when they are loaded (`use_native`)
_tensor_over: Any = None
# the native hooks' maker of a whole fresh result (`native.fresh_tensor()`), and of several (`native.fresh_tensors()`)
_fresh_tensor: Any = None
_fresh_tensors: Any = None
# `python_tensor_facts`, or the native hooks' (`native.tensor_facts()`), which may also answer None
_tensor_facts: Any = python_tensor_facts
# the native hooks' reader of the arrays `dense_array` keeps (`native.cached_array()`), when they are loaded
_cached_array: Any = None
# the native hooks' reader of several tensors' kept arrays at once (`native.cached_arrays()`), when they are loaded
_cached_arrays: Any = None


def kept_arrays(values: list[Any]) -> list[np.ndarray | None] | None:
    """Per value of `values`, the array `dense_array` keeps for it when it is a device tensor that has one (else
    None), in one native call; None without the native hooks."""
    found = _cached_arrays
    return None if found is None else cast(list[np.ndarray | None], found(values, _DENSE_ARRAYS_ATTRIBUTE))


def use_native(
    tensor_over: Any,
    fresh_tensor: Any = None,
    tensor_facts: Any = None,
    fresh_tensors: Any = None,
    cached_array: Any = None,
    cached_arrays: Any = None,
) -> None:
    """Make fresh results with the native hooks' tensor constructor (`native.tensor_over()`) and their makers
    (`native.fresh_tensor()` and `native.fresh_tensors()`, which serve a device memory whose address space is the
    native one), read tensors' facts with their `native.tensor_facts()` and kept arrays with their
    `native.cached_array()` (several at once with `native.cached_arrays()`), or do without them (None)."""
    global _tensor_over, _fresh_tensor, _tensor_facts, _fresh_tensors, _cached_array, _cached_arrays
    _tensor_over, _fresh_tensor, _fresh_tensors = tensor_over, fresh_tensor, fresh_tensors
    _tensor_facts = tensor_facts or python_tensor_facts
    _cached_array, _cached_arrays = cached_array, cached_arrays


# the CPU kernel of `set_` over a storage, called without the OpOverload's Python wrapper
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset._handle.redispatch_boxed
_contiguous_strides: dict[tuple[int, ...], list[int]] = {}


def _strides(shape: tuple[int, ...]) -> list[int]:
    """`contiguous_strides(shape)`, remembered per shape (a training step asks for the same few again and again;
    the lists are passed to torch, which copies them)."""
    found = _contiguous_strides.get(shape)
    if found is None:
        if len(_contiguous_strides) > 4096:
            _contiguous_strides.clear()
        found = _contiguous_strides[shape] = contiguous_strides(shape)
    return found


def resize(tensor: torch.Tensor, size: Sequence[int], observed: bool = True) -> torch.Tensor:
    """`tensor.resize_(size)` on the device: contiguous strides; a larger storage (data kept) when it must grow.
    `observed=False` when the caller knows that no pending region writes the tensor's storage."""
    if observed:
        observe()
    size = [int(s) for s in size]
    stride = contiguous_strides(size)
    offset = int(tensor.storage_offset())
    needed = offset * tensor.dtype.itemsize + storage_nbytes(size, stride, tensor.dtype.itemsize)
    storage = tensor.untyped_storage()
    if needed > storage.nbytes():
        grown = new_storage(needed)
        old = block_of(tensor)
        getattr(grown, _BLOCK_ATTRIBUTE).data[: old.nbytes] = old.data
        storage = grown
    return bind(tensor, storage, offset, size, stride)


def resize_bytes(stored: torch.UntypedStorage, nbytes: int) -> int:
    """`untyped_storage().resize_(nbytes)` of a device storage, called by the native hooks: a new block of
    `nbytes` keeps the storage's first bytes and replaces its block (the old one is freed); returns the new bytes'
    address, which the hook points the storage at. FSDP2 frees unsharded parameters this way (`resize_(0)`) and
    brings them back before each all-gather (`resize_(n)`)."""
    observe()
    old = _stored_block(stored)
    try:
        block = device_memory().allocate(nbytes)
    except DeviceOutOfMemoryError as error:
        raise torch.OutOfMemoryError(str(error)) from None
    if old is not None:
        kept = min(old.nbytes, nbytes)
        block.data[:kept] = old.data[:kept]
    setattr(stored, _BLOCK_ATTRIBUTE, block)
    for attribute in (_HOST_VIEWS_ATTRIBUTE, _DENSE_ARRAYS_ATTRIBUTE, _GATHERS_ATTRIBUTE):
        if hasattr(stored, attribute):
            delattr(stored, attribute)  # they alias the old block
    return int(block.data.ctypes.data)


def numel(size: Sequence[int]) -> int:
    return math.prod(size)


def storage_from_host(host: torch.UntypedStorage) -> torch.UntypedStorage:
    """A device storage holding a copy of CPU storage `host`'s bytes."""
    nbytes = int(host.nbytes())
    result = new_storage(nbytes)
    if nbytes:
        source = torch.empty(0, dtype=torch.uint8).set_(host).numpy()
        getattr(result, _BLOCK_ATTRIBUTE).data[:] = source
    return result


def serialization_tag(stored: Any) -> str | None:
    """`torch.save`'s location of a device storage."""
    return f"{DEVICE_TYPE}:0" if stored.device.type == DEVICE_TYPE else None


def serialization_restore(stored: Any, location: str) -> torch.UntypedStorage | None:
    """`torch.load` of a storage saved on the device (or mapped to it): its bytes in new device memory.

    torch's own path for a PrivateUse1 location allocates through a C++ allocator the device does not have."""
    if location != DEVICE_TYPE and not location.startswith(f"{DEVICE_TYPE}:"):
        return None
    if location not in (DEVICE_TYPE, f"{DEVICE_TYPE}:0"):
        raise RuntimeError(f"cannot restore a storage on {location}: one NeuronCore per process ({DEVICE_TYPE}:0)")
    return cast(torch.UntypedStorage, stored) if stored.device.type == DEVICE_TYPE else storage_from_host(stored)
