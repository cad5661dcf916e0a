"""Moving tensors between torch and the simulator's NumPy arrays (bf16 included, through ml_dtypes)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import torch

# torch dtypes NumPy cannot hold directly: (storage dtype of the same width, ml_dtypes type)
_VIA_BITS = {
    torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
    torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2),
}
_FROM_ML_DTYPES = {np.dtype(ml): (storage, dtype) for dtype, (storage, ml) in _VIA_BITS.items()}


_device_storage: Any = None  # frontend.device.storage, imported with the first device tensor converted


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous NumPy copy-or-view of a CPU or `neuron` tensor, keeping low-precision dtypes exact."""
    if tensor.is_cpu:
        value = tensor.detach()
    elif tensor.device.type == "neuron":  # the device's memory is host memory: read it in place, no copy
        global _device_storage
        if _device_storage is None:
            from neuron_mlir.frontend.device import storage as _device_storage
        _device_storage.observe()
        array = _device_storage.dense_array(tensor)  # of the bytes alone: no autograd view needed
        if array is not None:
            return array
        value = _device_storage.host_alias(tensor.detach())
    else:
        value = tensor.detach().cpu()
    if value.is_conj() or value.is_neg():  # a view standing for conjugated or negated bytes: its values
        value = value.resolve_conj().resolve_neg()
    if not value.is_contiguous():
        value = value.contiguous()
    if value.dtype in _VIA_BITS:
        storage, ml_type = _VIA_BITS[value.dtype]
        return value.view(storage).numpy().view(ml_type)
    return value.numpy()


_NUMPY_DTYPES: dict[torch.dtype, np.dtype] = {dtype: np.dtype(ml) for dtype, (_, ml) in _VIA_BITS.items()}


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype `to_numpy` gives a tensor of `dtype` (ml_dtypes' for the ones NumPy lacks)."""
    found = _NUMPY_DTYPES.get(dtype)
    if found is None:
        found = _NUMPY_DTYPES[dtype] = torch.empty(0, dtype=dtype).numpy().dtype
    return found


_TORCH_DTYPES: dict[np.dtype, torch.dtype] = {np.dtype(ml): dtype for dtype, (_, ml) in _VIA_BITS.items()}


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    """The torch dtype `from_numpy` gives an array of NumPy dtype `dtype`."""
    found = _TORCH_DTYPES.get(dtype)
    if found is None:
        found = _TORCH_DTYPES[dtype] = torch.from_numpy(np.empty(0, dtype=dtype)).dtype
    return found


def from_numpy(array: np.ndarray) -> torch.Tensor:
    """A contiguous torch tensor of `array`'s values (which the caller does not reuse): a copy-free view when
    `array` is C-contiguous, else one copy.

    The simulator's outputs keep the layout of their HBM buffers, often a transpose of the tensor's row-major one
    (a weight's gradient). torch copies such a layout into row-major order in blocks, several times faster than
    NumPy's element-by-element strided copy (for a 32000 x 2048 fp32 transpose, 0.2 against 0.9 s of CPU time).
    """
    array = np.asarray(array)
    if array.dtype in _FROM_ML_DTYPES:
        storage, dtype = _FROM_ML_DTYPES[array.dtype]
        bits = np.dtype({torch.int16: np.int16, torch.uint8: np.uint8}[storage])
        return _contiguous_tensor(array.view(bits)).view(dtype)
    return _contiguous_tensor(array)


def _contiguous_tensor(array: np.ndarray) -> torch.Tensor:
    if array.flags.c_contiguous:
        return torch.from_numpy(array)
    if all(stride > 0 and stride % array.itemsize == 0 for stride in array.strides):  # what torch can view
        return torch.from_numpy(array).contiguous()
    # np.ascontiguousarray turns 0-d arrays into 1-d ones: keep the shape
    return torch.from_numpy(np.ascontiguousarray(array).reshape(array.shape))
