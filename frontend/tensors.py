"""Moving tensors between torch and the simulator's NumPy arrays (bf16 included, through ml_dtypes)."""

from __future__ import annotations

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


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous NumPy copy-or-view of a CPU tensor, keeping low-precision dtypes exact."""
    value = tensor.detach()
    if not value.is_cpu:
        value = value.cpu()
    if not value.is_contiguous():
        value = value.contiguous()
    if value.dtype in _VIA_BITS:
        storage, ml_type = _VIA_BITS[value.dtype]
        return value.view(storage).numpy().view(ml_type)
    return value.numpy()


def from_numpy(array: np.ndarray) -> torch.Tensor:
    """A torch tensor owning a copy-free view of `array` (which the caller does not reuse)."""
    # np.ascontiguousarray turns 0-d arrays into 1-d ones: keep the shape
    array = np.ascontiguousarray(array).reshape(np.shape(array))
    if array.dtype in _FROM_ML_DTYPES:
        storage, dtype = _FROM_ML_DTYPES[array.dtype]
        bits = np.dtype({torch.int16: np.int16, torch.uint8: np.uint8}[storage])
        return torch.from_numpy(array.view(bits)).view(dtype)
    return torch.from_numpy(array)
