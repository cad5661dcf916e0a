"""Data movement compiled for the simulated NeuronCore against eager: views, copies through access patterns,
padding, and the index-based resampling (upsampling) that decomposes to gathers."""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch

import neuron_mlir


def _compiled_matches_eager(fn, *inputs, grads: bool = False):
    inputs = [x.detach().clone().requires_grad_(grads) for x in inputs]
    mirror = [x.detach().clone().requires_grad_(grads) for x in inputs]
    out = torch.compile(fn, backend="neuron-mlir")(*inputs)
    expected = fn(*mirror)
    assert_close_to_torch(out, expected, "forward")
    if grads:
        seed = torch.randn_like(expected)
        out.backward(seed)
        expected.backward(seed)
        for a, b in zip(inputs, mirror, strict=True):
            assert_close_to_torch(a.grad, b.grad, "grad")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


CASES = [
    ("cat_three", lambda a, b, c: torch.cat([a, b, c], 1) * 2, [(3, 1, 5), (3, 130, 5), (3, 2, 5)]),
    ("split_with_sizes", lambda x: [t * 2 for t in torch.split(x, [1, 129, 3], dim=1)], [(2, 133)]),
    ("flip", lambda x: torch.flip(x, [0, 2]) + 1, [(3, 4, 130)]),
    ("diagonal", lambda x: torch.diagonal(x, 1, 0, 2) * 2, [(5, 3, 7)]),
    ("repeat", lambda x: x.repeat(2, 1, 3), [(3, 1, 5)]),
    ("as_strided_windows", lambda x: torch.as_strided(x, (4, 3), (2, 1)) + 0, [(11,)]),
    ("as_strided_of_a_view", lambda x: torch.as_strided(x.t(), (3, 2), (5, 1), 2) * 2, [(4, 6)]),
    ("constant_pad", lambda x: F.pad(x, (1, 2, 0, 3), value=-1.5), [(3, 130, 5)]),
    ("constant_pad_negative", lambda x: F.pad(x, (-1, 2, 1, -2)), [(1, 3, 6, 7)]),
    ("slice_scatter", lambda x, s: torch.slice_scatter(x, s, 1, 1, 8, 3), [(4, 9), (4, 3)]),
    ("select_scatter", lambda x, s: torch.select_scatter(x, s, 0, 2), [(5, 3), (3,)]),
    ("diagonal_scatter", lambda x, s: torch.diagonal_scatter(x, s, -1), [(4, 5), (3,)]),
    ("as_strided_scatter", lambda x, s: torch.as_strided_scatter(x, s, (2, 3), (4, 1), 1), [(3, 4), (2, 3)]),
    ("narrow_copy", lambda x: torch.narrow_copy(x, 1, -3, 2) * 2, [(3, 130)]),
    ("unfold_windows", lambda x: x.unfold(1, 3, 2) + 1, [(2, 9, 3)]),
    ("reflection_pad", lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [(1, 3, 5, 6)]),
    ("replication_pad", lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"), [(3, 1, 5, 6)]),
    ("circular_pad", lambda x: F.pad(x, (2, 1), mode="circular"), [(1, 3, 7)]),
    ("upsample_nearest2d", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), [(1, 3, 5, 7)]),
    ("upsample_bilinear2d", lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=False), [(3, 1, 5, 4)]),
    # grouped-query attention's key repeat of heads interleaved in the rows, at 512 positions: a wide tile whose
    # free axis would take five dimensions (an access pattern takes four)
    ("repeat_heads", lambda y: y.view(4, 512, 2, 8).transpose(1, 2)[:, :, None].expand(4, 2, 2, 512, 8).reshape(4, 4, 512, 8) * 2, [(4, 512, 16)]),
]  # fmt: skip


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "shapes"), CASES, ids=[case[0] for case in CASES])
def test_movement(name, fn, shapes):
    torch.manual_seed(0)
    out_fn = (lambda *xs: torch.cat([t.flatten() for t in fn(*xs)])) if name == "split_with_sizes" else fn
    _compiled_matches_eager(out_fn, *[torch.randn(s) for s in shapes])


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
def test_padding_backward(mode):
    torch.manual_seed(1)
    _compiled_matches_eager(lambda x: F.pad(x, (2, 1, 1, 2), mode=mode).sin(), torch.randn(1, 3, 5, 6), grads=True)


@pytest.mark.usefixtures("fresh_compiler")
def test_upsampling_backward():
    torch.manual_seed(2)
    fn = lambda x: F.interpolate(x, scale_factor=2, mode="nearest").sin()  # noqa: E731
    _compiled_matches_eager(fn, torch.randn(1, 3, 4, 5), grads=True)
