"""The program's own helpers: the row-major strides every level uses for dense tensors."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_mlir.runtime.program import row_major_strides


@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 3, 4), (5, 1, 1, 6)])
def test_row_major_strides_are_numpys_for_a_contiguous_array(shape: tuple[int, ...]) -> None:
    expected = tuple(stride // 4 for stride in np.empty(shape, dtype=np.float32).strides)
    assert row_major_strides(shape) == expected
    assert row_major_strides(list(shape)) == expected


def test_an_empty_dimension_keeps_the_strides_a_dense_layout_would_have() -> None:
    # (NumPy gives every dimension of an empty array stride 0; a memref layout keeps the products of the extents)
    assert row_major_strides((0, 3)) == (3, 1)
    assert row_major_strides((3, 0, 2)) == (0, 2, 1)
