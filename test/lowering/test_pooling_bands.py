"""2-d max pooling over row bands (lowering/convert_torch_to_tile/pooling_bands.py), compiled and simulated.

Each case checks that the band path lowered the op (forward and backward) and compares values, indices and the
input gradient with eager PyTorch; small row-block budgets force several blocks per plane, so the halo rows
that neighbouring blocks share are read (forward) and gathered (backward) by both.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch

import neuron_mlir
from neuron_mlir.lowering.convert_torch_to_tile import pooling_bands


@pytest.fixture
def taken(monkeypatch, tmp_path):
    """The band path's calls: ('forward' | 'backward', row blocks per plane). The compile cache starts empty, so
    every graph is lowered here."""
    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path))
    calls: list[tuple[str, int]] = []
    blocks = pooling_bands._row_blocks

    def recording_blocks(*args, **kwargs):
        result = blocks(*args, **kwargs)
        calls.append(("blocks", len(result)))
        return result

    forward, backward = pooling_bands.emit_max_pool, pooling_bands.emit_max_pool_backward

    def recording_forward(*args, **kwargs):
        calls.append(("forward", 0))
        return forward(*args, **kwargs)

    def recording_backward(*args, **kwargs):
        calls.append(("backward", 0))
        return backward(*args, **kwargs)

    monkeypatch.setattr(pooling_bands, "_row_blocks", recording_blocks)
    monkeypatch.setattr(pooling_bands, "emit_max_pool", recording_forward)
    monkeypatch.setattr(pooling_bands, "emit_max_pool_backward", recording_backward)
    return calls


def _check(fn, x: torch.Tensor, exact: bool = False) -> None:
    x = x.detach().clone().requires_grad_(True)
    mirror = x.detach().clone().requires_grad_(True)
    values, indices = torch.compile(fn, backend="neuron-mlir")(x)
    expected_values, expected_indices = fn(mirror)
    assert torch.equal(values, expected_values), "max values"
    assert torch.equal(indices, expected_indices), "indices"
    seed = torch.randn_like(values)
    values.backward(seed)
    expected_values.backward(seed)
    got, expected = x.grad, mirror.grad
    assert got is not None
    assert expected is not None
    if exact:  # sums in PyTorch's order of accumulation
        assert torch.equal(got, expected), (got - expected).abs().max()
    else:
        assert_close_to_torch(got, expected, "grad")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


CASES = [
    # ResNet's 3 x 3 / 2 with padding, planes over two partition tiles
    ("3x3_s2_p1", lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (1, 130, 9, 10), torch.float32),
    # overlapping windows (stride 1): one input element is the maximum of up to nine windows
    ("3x3_s1_p1", lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), (2, 3, 11, 9), torch.float32),
    # dilation, ceil mode's partial last windows, a rectangular kernel and stride, bf16 values
    (
        "dilated_ceil_bf16",
        lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1), dilation=2, ceil_mode=True, return_indices=True),
        (1, 4, 12, 13),
        torch.bfloat16,
    ),
    # a kernel smaller than the stride: input rows and columns no window reads get a zero gradient
    ("2x2_s3", lambda x: F.max_pool2d(x, 2, 3, return_indices=True), (2, 2, 11, 10), torch.float32),
    # windows so wide (dilation 3: offsets up to 2 * 3 * 43 + 6, odd ones among them) that offsets inside one
    # pass bf16's exact integers: they stay fp32
    (
        "wide_windows",
        lambda x: F.max_pool2d(x, 3, 2, 1, dilation=3, return_indices=True),
        (1, 3, 20, 43),
        torch.float32,
    ),
]
TIED = ("3x3_s1_p1", "wide_windows")


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("budget", [pooling_bands.BLOCK_BYTES, 1024], ids=["one_block", "several_blocks"])
@pytest.mark.parametrize(("name", "fn", "shape", "dtype"), CASES, ids=[case[0] for case in CASES])
def test_band_max_pool_matches_eager(monkeypatch, taken, budget, name, fn, shape, dtype):
    monkeypatch.setattr(pooling_bands, "BLOCK_BYTES", budget)
    torch.manual_seed(0)
    # few distinct values: windows tie often, so the first maximum and the order of accumulation are tested
    x = torch.randint(-3, 4, shape).to(dtype) if name in TIED else torch.randn(shape, dtype=dtype)
    _check(fn, x, exact=dtype == torch.float32)
    kinds = [kind for kind, _ in taken]
    assert "forward" in kinds, taken
    assert "backward" in kinds, taken
    blocks = [count for kind, count in taken if kind == "blocks"]
    assert (max(blocks) > 1) == (budget == 1024), blocks


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("budget", [pooling_bands.BLOCK_BYTES, 1024], ids=["one_block", "several_blocks"])
def test_band_max_pool_backward_adds_16_bit_shares_as_the_cpu_does(monkeypatch, taken, budget):
    """ResNet's 3 x 3 / 2 with padding over an odd size, its maxima on the odd rows and columns, each shared by up
    to four windows (whose corners they are), and gradients over six orders of magnitude: PyTorch's CPU kernel adds every share into the
    bf16 gradient, rounding each add, and the band path's bf16 sums in its order give the same bits (fp32 sums
    rounded once do not)."""
    monkeypatch.setattr(pooling_bands, "BLOCK_BYTES", budget)
    torch.manual_seed(3)
    x = torch.randn(2, 8, 31, 29)
    x[..., 1::2, 1::2] += 4
    x = x.to(torch.bfloat16).requires_grad_(True)
    mirror = x.detach().clone().requires_grad_(True)
    fn = lambda t: F.max_pool2d(t, 3, 2, 1)  # noqa: E731
    values = torch.compile(fn, backend="neuron-mlir")(x)
    expected = fn(mirror)
    assert torch.equal(values, expected)
    scale = torch.logspace(-3, 3, values.numel()).reshape(values.shape)
    seed = (torch.randn(values.shape) * scale).to(torch.bfloat16)
    values.backward(seed)
    expected.backward(seed)
    assert x.grad is not None
    assert mirror.grad is not None
    assert torch.equal(x.grad, mirror.grad), (x.grad.float() - mirror.grad.float()).abs().max()
    assert ("backward", 0) in taken
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_window_offsets_take_bf16_only_while_exact():
    """Offsets from a window's origin (up to (k - 1) * d * width + (k - 1) * d) are bf16 below 256, else fp32:
    the cases above cover both."""

    def geometry(width: int, dilation: int) -> tuple[pooling_bands.BandGeometry, ...]:
        return tuple(pooling_bands.BandGeometry(width, 8, 3, 2, 1, dilation, 0) for _ in range(2))

    assert str(pooling_bands.offset_type(geometry(112, 1))) == "bf16"  # ResNet-50's pool: 2 * 112 + 2 = 226
    assert str(pooling_bands.offset_type(geometry(127, 1))) == "f32"  # 2 * 127 + 2 = 256
    assert str(pooling_bands.offset_type(geometry(43, 3))) == "f32"  # the wide windows above: 2 * 3 * 43 + 6


@pytest.mark.usefixtures("fresh_compiler")
def test_band_max_pool_without_indices_in_inference(taken):
    """With nothing reading the indices (inference), only the maxima are computed."""
    torch.manual_seed(1)
    x = torch.randn(2, 8, 15, 15)
    with torch.no_grad():
        got = torch.compile(lambda t: F.max_pool2d(t, 3, 2, 1), backend="neuron-mlir")(x)
    assert torch.equal(got, F.max_pool2d(x, 3, 2, 1))
    assert ("forward", 0) in taken


@pytest.mark.usefixtures("fresh_compiler")
def test_band_adaptive_max_pool_of_dividing_sizes(taken):
    """An adaptive max pooling whose sizes divide is a regular one and takes the bands too."""
    torch.manual_seed(2)
    x = torch.randn(2, 5, 9, 8)
    values, indices = torch.compile(lambda t: F.adaptive_max_pool2d(t, (3, 2), return_indices=True),
                                    backend="neuron-mlir")(x)  # fmt: skip
    expected_values, expected_indices = F.adaptive_max_pool2d(x, (3, 2), return_indices=True)
    assert torch.equal(values, expected_values)
    assert torch.equal(indices, expected_indices)
    assert ("forward", 0) in taken
