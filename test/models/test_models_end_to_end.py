"""The model set runs on the simulated NeuronCore: inference, and a training step, as eager PyTorch does.

Every model of examples/models/zoo.py is compiled with torch.compile(backend="neuron-mlir") in strict mode
(any node that would fall back to the CPU is an error), and compared with eager PyTorch: the outputs, then one
training step (forward, loss, backward, SGD step) with dropout off: the loss, every parameter's gradient, and the
parameters after the step. (Dropout itself runs on the core's counter-based generator, which is reproducible
under torch.manual_seed but draws other numbers than torch's CPU generator; the random-op tests cover it.)
"""

import copy
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
from support import REPO, assert_close_to_torch

import neuron_mlir

sys.path.insert(0, str(REPO / "examples"))
from models.zoo import MODELS, without_dropout


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _first(output):
    return output[0] if isinstance(output, tuple | list) else output


def _loss(output: torch.Tensor) -> torch.Tensor:
    return output.float().square().mean()


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_inference_matches_eager(name):
    model, inputs = MODELS[name]()
    compiled = torch.compile(copy.deepcopy(model), backend="neuron-mlir", options={"strict": True})
    with torch.no_grad():
        assert_close_to_torch(_first(compiled(*inputs)), _first(model(*inputs)), f"{name} output")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_step_matches_eager(name):
    model, inputs = MODELS[name]()
    without_dropout(model.train())
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="neuron-mlir", options={"strict": True})
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (reference, model)]
    losses = []
    runs: tuple[Callable[..., Any], ...] = (reference, compiled)
    for run, optimizer in zip(runs, optimizers, strict=True):
        torch.manual_seed(2)  # dropout, if any, draws the same way in both
        optimizer.zero_grad()
        loss = _loss(_first(run(*inputs)))
        loss.backward()
        losses.append(loss.detach())
    assert_close_to_torch(losses[1], losses[0], f"{name} loss")
    for (label, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        if q.grad is None:
            assert p.grad is None, f"{name}: {label} has a gradient eager does not"
            continue
        assert_close_to_torch(p.grad, q.grad, f"{name} grad of {label}")
    for optimizer in optimizers:
        optimizer.step()
    for (label, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert_close_to_torch(p.detach(), q.detach(), f"{name} {label} after the step")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0
    assert stats["graphs_compiled"] >= 2  # forward and backward
