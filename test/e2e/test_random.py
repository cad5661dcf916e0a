"""Random ops through torch.compile(backend="neuron-mlir"): a counter-based generator on the device, seeded from
torch's CPU generator at every call. The numbers differ from eager's, so these tests check what must hold:
reproducibility under torch.manual_seed, fresh draws on every call, the distributions, and dropout's mask."""

import pytest
import torch

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _draws(x):
    return (
        torch.rand(64, 130),
        torch.randn(300, 50),
        torch.randn_like(x),
        torch.nn.functional.dropout(x, 0.3),
        torch.bernoulli(x.sigmoid()),
    )


def test_same_seed_same_draws_and_each_call_draws_anew():
    compiled = torch.compile(_draws, backend="neuron-mlir")
    x = torch.randn(200, 40)
    torch.manual_seed(7)
    first = compiled(x)
    torch.manual_seed(7)
    again = compiled(x)
    later = compiled(x)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not any(torch.equal(a, b) for a, b in zip(first, later, strict=True))
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]


def test_a_generator_argument_of_none_draws_on_the_device():
    # a model handing on its optional generator (UnivNet's noise) calls the `.generator` overloads with None
    def noise(x):
        return x + torch.randn(x.shape, generator=None), torch.rand(3, 5, generator=None)

    torch.manual_seed(3)
    normal, uniform = torch.compile(noise, backend="neuron-mlir")(torch.zeros(200, 40))
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    assert abs(normal.mean()) < 0.03
    assert abs(normal.std() - 1) < 0.03
    assert uniform.shape == (3, 5)
    assert uniform.min() >= 0
    assert uniform.max() < 1


def test_distributions():
    torch.manual_seed(0)
    uniform, normal, normal_like, _, coins = torch.compile(_draws, backend="neuron-mlir")(torch.zeros(200, 40))
    assert uniform.min() >= 0
    assert uniform.max() < 1
    assert abs(uniform.mean() - 0.5) < 0.02
    assert abs(normal.mean()) < 0.02
    assert abs(normal.std() - 1) < 0.02
    assert normal_like.shape == (200, 40)
    assert set(coins.unique().tolist()) <= {0.0, 1.0}
    assert abs(coins.mean() - 0.5) < 0.05  # sigmoid(0) = 0.5
    # distinct random ops of one program draw independent streams
    assert abs(torch.corrcoef(torch.stack([normal[:200].flatten()[:8000], normal_like.flatten()]))[0, 1]) < 0.05


def test_dropout_mask_and_scale_match_its_backward():
    torch.manual_seed(1)
    x = torch.randn(130, 70, requires_grad=True)
    out = torch.compile(lambda t: torch.nn.functional.dropout(t, 0.25), backend="neuron-mlir")(x)
    out.sum().backward()
    kept = out != 0
    assert abs(kept.float().mean() - 0.75) < 0.02
    torch.testing.assert_close(out[kept], x[kept] / 0.75)
    torch.testing.assert_close(x.grad, kept.float() / 0.75)


def test_dropout_in_eval_mode_is_the_identity():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).eval()
    x = torch.randn(4, 8)
    torch.testing.assert_close(torch.compile(model, backend="neuron-mlir")(x), model(x))
