"""The first whole path: an MLP with awkward sizes trains on the simulated NeuronCore exactly as in eager."""

import copy
import sys

import pytest
import torch
from support import REPO, assert_close_to_torch

sys.path.insert(0, str(REPO / "examples"))
from mlp import MLP

import neuron_mlir

BATCH, SIZES = 37, (300, 520, 130, 10)


def _models():
    torch.manual_seed(0)
    eager = MLP(SIZES)
    compiled_model = copy.deepcopy(eager)
    return eager, compiled_model, torch.compile(compiled_model, backend="neuron-mlir")


@pytest.mark.usefixtures("fresh_compiler")
def test_forward_and_every_gradient_match_eager():
    eager, model, compiled = _models()
    x = torch.randn(BATCH, SIZES[0])
    target = torch.randn(BATCH, SIZES[-1])

    out = compiled(x)
    expected = eager(x)
    assert_close_to_torch(out, expected, "forward")

    torch.nn.functional.mse_loss(out, target).backward()
    torch.nn.functional.mse_loss(expected, target).backward()
    for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters(), strict=True):
        assert p.grad is not None, name
        assert_close_to_torch(p.grad, q.grad, f"grad of {name}")

    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert stats["graphs_compiled"] == 2  # forward and backward
    assert set(neuron_mlir.profiles()) == {"graph0_forward", "graph1_backward"}


@pytest.mark.usefixtures("fresh_compiler")
def test_five_sgd_steps_give_eager_losses():
    eager, model, compiled = _models()
    x = torch.randn(BATCH, SIZES[0])
    target = torch.randn(BATCH, SIZES[-1])
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (eager, model)]
    for step in range(5):
        losses = []
        for run, optimizer in zip((eager, compiled), optimizers, strict=True):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(run(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        assert_close_to_torch(losses[1], losses[0], f"loss at step {step}")
    for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters(), strict=True):
        assert_close_to_torch(p.detach(), q.detach(), f"{name} after 5 steps")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
