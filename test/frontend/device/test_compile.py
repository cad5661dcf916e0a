"""torch.compile on device tensors: the compiled graphs read device memory in place and return device tensors."""

import torch
from support import assert_close_to_torch

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
