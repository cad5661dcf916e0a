"""A training loop written for any accelerator runs unmodified on `neuron` and matches the CPU, eagerly and under
torch.compile with neuron-mlir as the default backend: optimizer, gradient clipping, a learning-rate schedule and
`zero_grad`, as device-agnostic scripts write them."""

import pytest
import torch
from support import assert_close_to_torch

import neuron_mlir

STEPS = 3


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _train(device: torch.device, optimizer_options: dict, compiled: bool) -> tuple[list[float], dict]:
    """The loop as a device-agnostic script writes it: nothing in it names neuron."""
    torch.manual_seed(0)
    model = _Block().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, **optimizer_options)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    step = torch.compile(model) if compiled else model
    inputs, labels = torch.randn(8, 16), torch.randint(0, 4, (8,))
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(step(inputs.to(device)), labels.to(device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses, {name: value.detach().cpu() for name, value in model.state_dict().items()}


def _check_eager_loop(optimizer_options: dict) -> None:
    device = torch.accelerator.current_accelerator()
    assert device is not None
    assert device.type == "neuron"
    losses, state = _train(device, optimizer_options, compiled=False)
    expected_losses, expected_state = _train(torch.device("cpu"), optimizer_options, compiled=False)
    assert_close_to_torch(torch.tensor(losses), torch.tensor(expected_losses), "losses")
    for name, value in expected_state.items():
        assert_close_to_torch(state[name], value, name)


def test_the_eager_loop_runs_on_the_core_and_matches_the_cpu(monkeypatch, fresh_eager):
    """Every op compiled as a single-op program and run on the simulated NeuronCore."""
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    _check_eager_loop({})
    stats = torch.get_device_module("neuron").eager_stats()
    assert stats["native_calls"] > stats["host_calls"], stats  # the host runs only what hands values to it


@pytest.mark.parametrize("optimizer_options", [{"foreach": True}, {"fused": True}], ids=["foreach", "fused"])
def test_the_optimizer_forms_keep_the_device_semantics(host_mode, optimizer_options):
    """The foreach and fused optimizer forms, with the device's semantics (views, in-place, out=) on the host."""
    _check_eager_loop(optimizer_options)


def test_the_compiled_loop_with_the_default_backend_matches_the_cpu(fresh_compiler, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    torch.compiler.set_default_backend("neuron-mlir")
    try:
        device = torch.accelerator.current_accelerator()
        assert device is not None
        losses, state = _train(device, {}, compiled=True)
    finally:
        torch.compiler.set_default_backend(None)
    stats = neuron_mlir.stats()
    assert stats["graphs_compiled"] >= 2, stats  # the forward and the backward, by neuron-mlir
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    expected_losses, expected_state = _train(torch.device("cpu"), {}, compiled=False)
    assert_close_to_torch(torch.tensor(losses), torch.tensor(expected_losses), "losses")
    for name, value in expected_state.items():
        assert_close_to_torch(state[name], value, name)
