"""Pooling compiled for the simulated NeuronCore against eager, forward and backward.

Batches 1 and 3, channels 1, 3 and 130 (planes beyond one partition tile), padding, ceil mode and dilation.
"""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch

import neuron_mlir


def _compiled_matches_eager(fn, x, grads: bool = True):
    x = x.detach().clone().requires_grad_(grads)
    mirror = x.detach().clone().requires_grad_(grads)
    out = torch.compile(fn, backend="neuron-mlir")(x)
    expected = fn(mirror)
    assert_close_to_torch(out, expected, "forward")
    if grads:
        first = out[0] if isinstance(out, tuple) else out
        seed = torch.randn_like(first)
        first.backward(seed)
        (expected[0] if isinstance(expected, tuple) else expected).backward(seed)
        assert_close_to_torch(x.grad, mirror.grad, "grad")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


POOLS = [
    ("avg2d_batch1_c1", lambda x: F.avg_pool2d(x, 3, 2, 1), (1, 1, 9, 11)),
    ("avg2d_ceil_no_pad_count", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     (3, 3, 10, 11)),
    ("avg2d_divisor_c130", lambda x: F.avg_pool2d(x, 2, 2, divisor_override=3), (1, 130, 6, 7)),
    ("avg3d", lambda x: F.avg_pool3d(x, 2, 1, 1), (1, 3, 4, 5, 6)),
    ("max2d_indices", lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (3, 3, 9, 11)),
    ("max2d_dilated_ceil_c130", lambda x: F.max_pool2d(x, 2, 1, 0, dilation=2, ceil_mode=True), (1, 130, 7, 8)),
    ("max1d", lambda x: F.max_pool1d(x, 3, 2, 1), (3, 1, 17)),
    ("max3d_indices", lambda x: F.max_pool3d(x, 2, 2, 1, return_indices=True), (1, 3, 5, 5, 6)),
    ("adaptive2d_divisible", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (3, 3, 9, 6)),
    ("adaptive2d_uneven_c130", lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (1, 130, 9, 7)),
    ("adaptive3d_uneven", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (1, 3, 5, 7, 6)),
    ("adaptive1d", lambda x: F.adaptive_avg_pool1d(x, 5), (3, 1, 13)),
    ("adaptive_max2d_uneven_c130", lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), (1, 130, 9, 7)),
    ("adaptive_max3d_divisible", lambda x: F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True), (1, 3, 4, 6, 4)),
]  # fmt: skip


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "shape"), POOLS, ids=[case[0] for case in POOLS])
def test_pooling_forward_and_backward(name, fn, shape):
    torch.manual_seed(0)
    # adaptive max pooling's backward op is not in the torch dialect yet: forward only
    _compiled_matches_eager(fn, torch.randn(shape), grads=not name.startswith("adaptive_max"))


@pytest.mark.usefixtures("fresh_compiler")
def test_max_pool_ties_pick_the_first_maximum():
    """Equal values in a window: PyTorch's index is the first in scan order, and the gradient goes there."""
    x = torch.tensor([[[[1.0, 1.0, 0.0], [1.0, 2.0, 2.0], [0.0, 2.0, 0.0]]]])
    _compiled_matches_eager(lambda t: F.max_pool2d(t, 2, 1, return_indices=True), x)


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(
    ("name", "fn", "shape"),
    [
        ("fold_strided_padded", lambda x: F.fold(x, (5, 6), (2, 3), stride=2, padding=1), (1, 2 * 6, 9)),
        ("fold_unbatched_dilated", lambda x: F.fold(x, (5, 5), 2, dilation=2, stride=(2, 1)), (3 * 4, 6)),
    ],
    ids=["fold_strided_padded", "fold_unbatched_dilated"],
)
def test_col2im(name, fn, shape):
    """col2im (fold): overlapping blocks add up; it is also the backward of unfold (im2col)."""
    torch.manual_seed(3)
    _compiled_matches_eager(fn, torch.randn(shape))


@pytest.mark.usefixtures("fresh_compiler")
def test_default_stride_trains():
    # the forward's default stride (= the kernel size) reaches the backward ops as an empty list
    _compiled_matches_eager(lambda x: F.avg_pool2d(F.max_pool2d(x, 2), 2), torch.randn(2, 3, 13, 13))
