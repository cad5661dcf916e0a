"""Integer tensors read as sizes by a graph that cannot be traced otherwise are compiled as their values."""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch

import neuron_mlir
from neuron_mlir.frontend.size_inputs import size_inputs

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _position_bias(boxes, height, width, weight):
    # SAM 3's box position bias: a grid from 0-d size tensors, views that infer a size from the element count, a
    # projection per head, and the heads moved first (a copy, whose size must not be zero to be traced)
    rows = torch.arange(0, height, dtype=torch.float32) / height
    columns = torch.arange(0, width, dtype=torch.float32) / width
    dy = (rows.view(1, -1, 1) - boxes[:, :, 1:4:2].reshape(-1, 1, 2)).view(boxes.shape[0], boxes.shape[1], -1, 2)
    dx = (columns.view(1, -1, 1) - boxes[:, :, 0:3:2].reshape(-1, 1, 2)).view(boxes.shape[0], boxes.shape[1], -1, 2)
    dy, dx = F.linear(dy, weight), F.linear(dx, weight)
    return (dy.unsqueeze(3) + dx.unsqueeze(2)).flatten(2, 3).permute(0, 3, 1, 2).contiguous()


def _train_step(function, boxes, height, width, weight):
    weight = weight.detach().requires_grad_()
    result = function(boxes, height, width, weight)
    result.square().sum().backward()
    return result, weight.grad


def test_sizes_read_from_integer_tensors_compile_natively():
    # the trace used to fail on the copy's element count (unbacked height x width): the graph ran on the CPU
    boxes, weight = torch.rand(2, 8, 4), torch.randn(3, 2)
    height, width = torch.tensor(4), torch.tensor(6)
    compiled = torch.compile(_position_bias, backend="neuron-mlir")
    for actual, expected in zip(
        _train_step(compiled, boxes, height, width, weight),
        _train_step(_position_bias, boxes, height, width, weight),
        strict=True,
    ):
        assert_close_to_torch(actual, expected)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


def test_new_sizes_compile_again_with_a_note():
    boxes, weight = torch.rand(2, 8, 4), torch.randn(3, 2)
    compiled = torch.compile(_position_bias, backend="neuron-mlir")
    for height, width in ((4, 6), (3, 5), (4, 6)):
        h, w = torch.tensor(height), torch.tensor(width)
        result, gradient = _train_step(compiled, boxes, h, w, weight)
        assert result.shape == (2, 3, 8, height * width)
        expected, expected_gradient = _train_step(_position_bias, boxes, h, w, weight)
        assert_close_to_torch(result, expected)
        assert_close_to_torch(gradient, expected_gradient)
    notes = neuron_mlir.stats()["size_notes"]
    assert sum("integer inputs read as sizes" in note for note in notes) == 1, notes  # (3, 5) once
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_only_inputs_read_as_sizes_are_candidates():
    found = []

    def backend(graph_module, example_inputs):
        found.append(size_inputs(graph_module))
        return graph_module.forward

    def scaled(x, n, k):
        return torch.arange(0, n, dtype=torch.float32) * x.sum() + k  # n a size, k a tensor operand

    torch.compile(scaled, backend=backend)(torch.randn(3), torch.tensor(5), torch.tensor(2))
    assert [list(values.values()) for values in found] == [[5]]  # n, not k
