"""FFTs and complex arithmetic through torch.compile, against eager PyTorch, with no node on the CPU.

Complex values are carried as (real, imaginary) float32 pairs and every FFT is a DFT matmul per transformed
dimension (frontend/complex_pairs.py): real-to-complex, complex-to-complex and complex-to-real transforms at even
and odd sizes, every normalisation, one and several dimensions, complex inputs and outputs, and a spectral
token-mixing layer (FNet) trained a step.
"""

import pytest
import torch
from support import assert_close_to_torch
from support.compiled import check_compiled, run_compiled

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _complex(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.complex64)


# (name, function, inputs): every ATen FFT op (_fft_r2c, _fft_c2c, _fft_c2r) with each normalisation
TRANSFORMS = [
    ("rfft_even_odd_and_fft_of_real", lambda x, y, w: (torch.fft.rfft(x), torch.fft.rfft(y, norm="ortho"), torch.fft.fft(w, dim=0, norm="forward")), lambda: [torch.randn(3, 16), torch.randn(4, 9), torch.randn(7, 5)]),
    ("ifft_and_irfft", lambda z, u, v: (torch.fft.ifft(z), torch.fft.irfft(u, n=9), torch.fft.irfft(v, norm="ortho")), lambda: [_complex(2, 15), _complex(3, 5), _complex(2, 3, 7)]),
    ("hfft_and_ihfft", lambda z, x: (torch.fft.hfft(z, n=10), torch.fft.ihfft(x)), lambda: [_complex(4, 6), torch.randn(3, 11)]),
    ("two_and_three_dims", lambda x, z, r, y: (torch.fft.fft2(x), torch.fft.ifft2(z, norm="ortho"), torch.fft.rfft2(r, norm="forward"), torch.fft.ifftn(y)), lambda: [torch.randn(2, 6, 5), _complex(5, 4), torch.randn(3, 6, 7), torch.randn(3, 4, 5)]),
    ("stft_and_rfftn_irfftn", lambda x, w, v: (torch.stft(x, 8, hop_length=3, window=w, return_complex=True), torch.fft.irfftn(torch.fft.rfftn(v, dim=(0, 2)), s=(5, 8), dim=(0, 2))), lambda: [torch.randn(2, 40), torch.hann_window(8), torch.randn(5, 3, 8)]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fn", "make_inputs"), TRANSFORMS, ids=[case[0] for case in TRANSFORMS])
def test_transform_matches_torch_fft(name, fn, make_inputs):
    torch.manual_seed(0)
    check_compiled(fn, *make_inputs())


def test_long_transform_stays_within_fp32_tolerance():
    # 200 points: the DFT matrix spans two partition tiles of the contraction
    torch.manual_seed(1)
    check_compiled(lambda x: torch.fft.fft(x), torch.randn(4, 200))


def test_complex_arithmetic_on_pairs():
    def arithmetic(a, b, magnitude, phase, x, batched):
        product = a * b + a / b - b.conj() * 2 + (a - 1j)
        built = torch.polar(magnitude, phase) + torch.complex(x, magnitude)
        functions = (a.exp(), b.log(), b.reciprocal(), a.sgn())
        products = (a @ b.transpose(0, 1), batched @ batched, a @ x.transpose(0, 1).to(torch.complex64))
        return (
            product,
            built.abs(),
            built.angle(),
            torch.view_as_real(a * x),
            x.to(torch.complex64) * 0.5,
            *functions,
            *products,
        )

    torch.manual_seed(2)
    inputs = [
        _complex(3, 4),
        _complex(3, 4) + 2,
        torch.rand(3, 4) + 0.1,
        torch.randn(3, 4),
        torch.randn(3, 4),
        _complex(2, 5, 5),
    ]
    check_compiled(arithmetic, *inputs)


def test_complex32_values_are_float16_pairs():
    torch.manual_seed(6)
    check_compiled(lambda x, y: (x.chalf() * 2 + y.chalf()).conj(), torch.randn(3, 5), torch.randn(3, 5))


def test_conjugate_view_input_crosses_the_boundary_resolved():
    torch.manual_seed(3)
    z = _complex(4, 8)
    actual = run_compiled(lambda v: torch.fft.fft(v) * 2, z.conj())
    assert_close_to_torch(actual, torch.fft.fft(z.conj()) * 2)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


class FNetMixing(torch.nn.Module):
    """FNet's token mixing: the real part of a 2-D DFT over (tokens, hidden), then a residual layer norm and a
    feed-forward block."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.feed_forward = torch.nn.Sequential(
            torch.nn.Linear(hidden, 2 * hidden), torch.nn.GELU(), torch.nn.Linear(2 * hidden, hidden)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.norm(x + torch.fft.fft2(x).real)
        return mixed + self.feed_forward(mixed)


def test_fnet_layer_forward_and_backward_without_fallback():
    torch.manual_seed(4)
    model = FNetMixing(24)
    mirror = FNetMixing(24)
    mirror.load_state_dict(model.state_dict())
    x = torch.randn(2, 10, 24, requires_grad=True)
    x_mirror = x.detach().clone().requires_grad_()
    out = torch.compile(model, backend="neuron-mlir")(x)
    expected = mirror(x_mirror)
    assert_close_to_torch(out, expected, "output")
    seed = torch.randn_like(expected)
    out.backward(seed)
    expected.backward(seed)
    assert_close_to_torch(x.grad, x_mirror.grad, "input gradient")
    for (name, ours), eager in zip(model.named_parameters(), mirror.parameters(), strict=True):
        assert_close_to_torch(ours.grad, eager.grad, name)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


def test_spectral_convolution_with_complex_weights_trains_without_fallback():
    # an FNO-style layer: the one-sided spectrum times complex weights (a parameter), back to the signal; the
    # backward graphs carry complex gradients (abs, slice_scatter, conj) through the same rewrite
    torch.manual_seed(7)
    weights = torch.nn.Parameter(_complex(4, 9))
    mirror = torch.nn.Parameter(weights.detach().clone())
    x = torch.randn(4, 16, requires_grad=True)
    x_mirror = x.detach().clone().requires_grad_()

    def layer(signal, w):
        spectrum = torch.fft.rfft(signal, norm="ortho") * w
        return torch.fft.irfft(spectrum, n=16, norm="ortho") + spectrum.abs().sum(-1, keepdim=True)

    out = torch.compile(layer, backend="neuron-mlir")(x, weights)
    expected = layer(x_mirror, mirror)
    assert_close_to_torch(out, expected, "output")
    out.square().sum().backward()
    expected.square().sum().backward()
    assert_close_to_torch(x.grad, x_mirror.grad, "signal gradient")
    assert_close_to_torch(weights.grad, mirror.grad, "weight gradient")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


def test_new_sizes_recompile_the_transforms_without_fallback():
    # the second size makes Dynamo trace with symbolic sizes: the graph is specialised per call's sizes
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(lambda x: torch.fft.fft2(x).real * 2, backend="neuron-mlir")
    for tokens in (8, 12, 12, 16):
        x = torch.randn(2, tokens, 6)
        assert_close_to_torch(compiled(x), torch.fft.fft2(x).real * 2, f"{tokens} tokens")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert stats["recompilations"] == 1  # 12 and 16 tokens: one symbolic graph, specialised twice


def test_op_without_pair_rule_runs_on_cpu_with_its_reason():
    torch.manual_seed(5)
    z = _complex(3, 6)
    with pytest.warns(UserWarning, match=r"aten\.sin\.default stays complex: no rule computes it"):
        actual = run_compiled(lambda v: torch.sin(torch.fft.fft(v)).abs() + 1, z)
    assert_close_to_torch(actual, torch.sin(torch.fft.fft(z)).abs() + 1)
    stats = neuron_mlir.stats()
    assert stats["fallback_ops"].get("aten.sin.default") == 1
    assert stats["nodes_compiled"] > 0  # the transforms around it still ran on the core


def test_complex128_is_refused_in_strict_mode_with_the_reason():
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(lambda z: torch.fft.fft(z) * 2, backend="neuron-mlir", options={"strict": True})
    with pytest.raises(Exception, match=r"_fft_c2c.*complex128 is not supported on the NeuronCore \(no fp64 engine"):
        compiled(torch.randn(4, 8, dtype=torch.complex128))


def test_a_failing_rule_is_an_error_naming_the_node(monkeypatch):
    from neuron_mlir.frontend import complex_pairs

    def broken(site, value):
        raise ValueError("broken on purpose")

    monkeypatch.setitem(complex_pairs._RULES, torch.ops.aten.neg.default, broken)
    with pytest.raises(Exception, match=r"aten\.neg\.default.*test_fft\.py:\d+.*rule for complex pairs failed"):
        run_compiled(lambda z: -torch.fft.fft(z), _complex(2, 4))
