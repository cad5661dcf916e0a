"""Activations spelled out in model code become one call in Dynamo's graph, before AOTAutograd differentiates
them (frontend/recognize_activations.py)."""

import math

import pytest
import torch
from support import capture_aten_graphs

from neuron_mlir.frontend.recognize_activations import recognize_activations

_K = math.sqrt(2.0 / math.pi)


def _new_gelu(x: torch.Tensor) -> torch.Tensor:  # GPT-2's NewGELUActivation, as transformers writes it
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _swapped_operands(x: torch.Tensor) -> torch.Tensor:
    return (torch.tanh((x**3 * 0.044715 + x) * _K) + 1.0) * (x * 0.5)


def _method_calls(x: torch.Tensor) -> torch.Tensor:
    return x.mul(0.5).mul(x.pow(3).mul(0.044715).add(x).mul(_K).tanh().add(1.0))


def _cube_as_products(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 * (1.0 + torch.tanh(_K * (x + 0.044715 * (x * x * x))))


def _calls(module: torch.fx.GraphModule) -> list[object]:
    return [node.target for node in module.graph.nodes if node.op in ("call_function", "call_method")]


@pytest.mark.parametrize("spelling", [_new_gelu, _swapped_operands, _method_calls, _cube_as_products])
def test_a_spelled_out_tanh_gelu_becomes_one_call(spelling):
    module = torch.fx.symbolic_trace(spelling)
    assert recognize_activations(module) == 1
    assert _calls(module) == [torch.nn.functional.gelu]
    gelu = next(node for node in module.graph.nodes if node.op == "call_function")
    assert gelu.kwargs == {"approximate": "tanh"}
    x = torch.randn(64, 32)
    torch.testing.assert_close(module(x), torch.nn.functional.gelu(x, approximate="tanh"))


def test_an_intermediate_read_elsewhere_stays_for_its_reader():
    def shared_tanh(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = torch.tanh(_K * (x + 0.044715 * torch.pow(x, 3.0)))
        return 0.5 * x * (1.0 + t), t * 2.0

    module = torch.fx.symbolic_trace(shared_tanh)
    assert recognize_activations(module) == 1
    calls = _calls(module)
    assert torch.nn.functional.gelu in calls
    assert torch.tanh in calls
    x = torch.randn(8, 16)
    for got, want in zip(module(x), shared_tanh(x), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    "near_miss",
    [
        lambda x: 0.5 * x * (1.0 + torch.tanh(_K * (x + 0.04 * torch.pow(x, 3.0)))),  # another cubic coefficient
        lambda x: 0.5 * x * (1.0 + torch.tanh(_K * (x + 0.044715 * torch.pow(x, 2.0)))),  # a square
        lambda x, y: 0.5 * x * (1.0 + torch.tanh(_K * (y + 0.044715 * torch.pow(x, 3.0)))),  # two tensors
        lambda x: 0.5 * x * (2.0 + torch.tanh(_K * (x + 0.044715 * torch.pow(x, 3.0)))),  # not 1 + tanh
        lambda x, y: 0.5 * x * (1.0 + torch.tanh(_K * (x + 0.044715 * (x * x * y)))),  # not a cube of x
    ],
)
def test_other_arithmetic_is_left_alone(near_miss):
    module = torch.fx.symbolic_trace(near_miss)
    before = _calls(module)
    assert recognize_activations(module) == 0
    assert _calls(module) == before


def test_the_training_graphs_save_the_gelu_input_and_differentiate_the_function():
    """The forward saves no tanh or other intermediate of the activation, and the backward is one gelu_backward."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), _NewGelu(), torch.nn.Linear(64, 16))

    forward, backward = capture_aten_graphs(model, torch.randn(4, 16, requires_grad=True), backward=True)
    forward_ops = {node.target for node in forward.graph.nodes}
    backward_ops = {node.target for node in backward.graph.nodes}
    assert torch.ops.aten.gelu.default in forward_ops
    assert torch.ops.aten.tanh.default not in forward_ops | backward_ops
    assert torch.ops.aten.gelu_backward.default in backward_ops


class _NewGelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _new_gelu(x)
