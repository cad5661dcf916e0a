"""Tensors between torch and NumPy: values and dtypes kept exactly, whatever the NumPy array's layout."""

import ml_dtypes
import numpy as np
import pytest
import torch

from neuron_mlir.frontend.tensors import from_numpy, to_numpy


def _layouts(dtype: np.dtype) -> list[np.ndarray]:
    values = (np.arange(6 * 5 * 4, dtype=np.float32) - 37.25).astype(dtype)
    block = values.reshape(6, 5, 4)
    return [
        block,  # row-major
        block.transpose(2, 0, 1),  # a permutation of a row-major buffer (a weight's gradient laid out transposed)
        block.T,
        block[:, ::2, 1:3],  # strided slices
        block[::-1, :, ::-1],  # negative strides
        np.broadcast_to(block[0, 0], (3, 4)),  # a zero stride
        block[2, 3, 1],  # 0-d
        block[:0],  # empty
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_from_numpy_gives_a_contiguous_tensor_of_the_same_values(dtype: type) -> None:
    for array in _layouts(np.dtype(dtype)):
        tensor = from_numpy(array)
        assert tensor.is_contiguous()
        assert tuple(tensor.shape) == array.shape
        back = to_numpy(tensor)
        assert back.dtype == array.dtype
        assert back.tobytes() == np.ascontiguousarray(array).tobytes()


def test_from_numpy_shares_a_contiguous_array() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = from_numpy(array)
    array[1, 2] = -1.0
    assert tensor[1, 2].item() == -1.0


def test_from_numpy_keeps_bf16_bits_of_a_transposed_array() -> None:
    bits = np.arange(-300, 300, dtype=np.int16)
    array = bits.view(ml_dtypes.bfloat16).reshape(20, 30).T
    tensor = from_numpy(array)
    assert tensor.dtype is torch.bfloat16
    assert np.array_equal(tensor.view(torch.int16).numpy(), np.ascontiguousarray(bits.reshape(20, 30).T))
