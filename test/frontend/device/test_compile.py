"""torch.compile on device tensors: the compiled graphs read device memory in place and return device tensors."""

import sys
from typing import Any

import torch
from support import assert_close_to_torch

from neuron_mlir.frontend.compile_graph import CompiledGraph
from neuron_mlir.frontend.device import storage

neuron = torch.get_device_module("neuron")


def test_compiled_mlp_on_the_device_matches_the_cpu(fresh_compiler, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("neuron")
    model.load_state_dict(reference.state_dict())
    compiled = torch.compile(model, backend="neuron-mlir")
    inputs = torch.randn(3, 8)
    clock = neuron.current_stream().simulated_ns
    output = compiled(inputs.to("neuron"))
    assert neuron.current_stream().simulated_ns > clock  # the compiled graph's time is on the device's stream
    assert output.device == torch.device("neuron", 0)
    expected = reference(inputs)
    assert_close_to_torch(output.cpu(), expected)
    output.sum().backward()
    expected.sum().backward()
    for (name, parameter), on_device in zip(reference.named_parameters(), model.parameters(), strict=True):
        gradient = on_device.grad
        assert gradient is not None, name
        assert gradient.device.type == "neuron", name
        assert_close_to_torch(gradient.cpu(), parameter.grad, f"{name}.grad")


def test_repeated_calls_write_outputs_straight_into_device_memory(fresh_compiler, monkeypatch, arrays_copied_in):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("neuron")
    compiled = torch.compile(model, backend="neuron-mlir")
    inputs = [torch.randn(3, 8) for _ in range(3)]
    copied = arrays_copied_in
    # the device outputs of a graph's run are made together, in one native call
    batches: list[int] = []
    make = storage._fresh_tensors
    assert make is not None

    def counted(space: Any, layouts: Any, *rest: Any) -> Any:
        # the compiled graphs' batches (through storage.empty_arrays), not the recorded eager ops' (`.sum()`)
        if sys._getframe(2).f_code is CompiledGraph.call_sized.__code__:
            batches.append(len(layouts))
        return make(space, layouts, *rest)

    monkeypatch.setattr(storage, "_fresh_tensors", counted)
    outputs = []
    for x in inputs:
        output = compiled(x.to("neuron"))
        output.sum().backward()
        outputs.append(output)
        if len(outputs) == 1:
            assert copied  # the first call learns the outputs' layouts
            copied.clear()
            assert not batches
    assert not copied  # the later calls' outputs and gradients are written where their device tensors live
    # per later call, the forward graph's output and saved activations, then the backward graph's four gradients
    assert len(batches) == 4, batches
    assert batches[1::2] == [4, 4], batches
    assert all(output.device.type == "neuron" for output in outputs)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    for x, output in zip(inputs, outputs, strict=True):
        assert_close_to_torch(output.cpu(), reference(x).detach())
    grads = [p.grad for p in model.parameters()]
    expected = sum(reference(x).sum() for x in inputs)
    expected.backward()
    for gradient, parameter in zip(grads, reference.parameters(), strict=True):
        assert gradient is not None
        assert gradient.device.type == "neuron"
        assert_close_to_torch(gradient.cpu(), parameter.grad)


def test_compiled_code_saving_the_accelerators_random_state_runs(fresh_compiler):
    # torch.testing's freeze_rng_state (and fork_rng) save and restore the current accelerator's state, which the
    # device now is: under torch.compile those calls run eagerly around the graph instead of failing in Dynamo
    from torch.testing._utils import freeze_rng_state

    def seeded_tanh(x: torch.Tensor) -> torch.Tensor:
        with freeze_rng_state():
            torch.manual_seed(42)
            return torch.tanh(x) * 2

    state = neuron.get_rng_state()
    x = torch.randn(4, 5)
    output = torch.compile(seeded_tanh, backend="neuron-mlir")(x)
    assert_close_to_torch(output, torch.tanh(x) * 2)
    assert torch.equal(neuron.get_rng_state(), state)
