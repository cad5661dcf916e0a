"""Floats Dynamo passes as graph inputs under `dynamic=True` are compiled as constants, checked at each call."""

import math
import operator

import pytest
import torch
from support import assert_close_to_torch

import neuron_mlir
from neuron_mlir.frontend.float_constants import ValueSpecialised, float_constants, fold_scalar_arithmetic, specialise

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def test_a_global_float_is_folded_into_the_graph_as_its_value():
    folded = []

    def backend(graph_module, example_inputs):
        values = float_constants(graph_module)
        assert list(values.values()) == [math.pi]  # math.pi is an input of the graph, read with .item()
        folded.append(specialise(graph_module, values))
        return graph_module

    torch.compile(_gelu, backend=backend, dynamic=True)(torch.randn(3, 4))
    targets = [str(n.target) for n in folded[0].graph.nodes if n.op in ("call_function", "call_method")]
    assert "item" not in targets, targets
    assert not any("sqrt" in t for t in targets), targets
    constants = [a for n in folded[0].graph.nodes if n.op == "call_function" for a in n.args if isinstance(a, float)]
    assert math.sqrt(2.0 / math.pi) in constants


_calls: list[float] = []


def _recorded(value):
    _calls.append(value)
    return value


def test_scalar_arithmetic_on_constants_is_folded_and_nothing_else_is_run():
    # a trace that specialised math.pi may keep `2.0 / 3.14159` and its square root as nodes of the graph
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    ratio = graph.call_function(operator.truediv, (2.0, math.pi))
    root = graph.call_function(torch._sym_sqrt, (ratio,))  # type: ignore[attr-defined]
    recorded = graph.call_function(_recorded, (0.5,))  # a function of the user's: never run while compiling
    graph.output(graph.call_function(operator.mul, (graph.call_function(operator.mul, (root, x)), recorded)))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert fold_scalar_arithmetic(module) == 2
    assert _calls == []
    products = [n for n in module.graph.nodes if n.target is operator.mul]
    assert products[0].args == (math.sqrt(2.0 / math.pi), x)
    assert_close_to_torch(module(torch.ones(2)), torch.ones(2) * math.sqrt(2.0 / math.pi) * 0.5)


def test_the_tanh_gelu_of_gpt2_compiles_whole_under_dynamic_true():
    # strict: before, sqrt(2 / pi) was computed by six ops on the CPU
    compiled = torch.compile(_gelu, backend="neuron-mlir", dynamic=True, options={"strict": True, "cache": False})
    for rows in (3, 5):
        x = torch.randn(rows, 4)
        assert_close_to_torch(compiled(x), _gelu(x), f"{rows} rows")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


class _Scale:
    factor = 0.5


def _scaled(x):
    return x * _Scale.factor


def test_a_float_that_changes_is_compiled_again_for_its_value():
    compiles = []

    def backend(graph_module, example_inputs):  # each specialisation run as an FX graph
        def compile(specialised):
            compiles.append(specialised)
            return specialised.forward

        return ValueSpecialised(graph_module, float_constants(graph_module), compile)

    compiled = torch.compile(_scaled, backend=backend, dynamic=True)
    x = torch.randn(3, 4)
    try:
        assert_close_to_torch(compiled(x), x * 0.5)
        _Scale.factor = 0.25  # Dynamo does not guard it: the graph's constant would be stale
        assert_close_to_torch(compiled(x), x * 0.25)
        _Scale.factor = 0.5
        assert_close_to_torch(compiled(x), x * 0.5)
    finally:
        _Scale.factor = 0.5
    assert len(compiles) == 2  # one per value
    notes = neuron_mlir.stats()["size_notes"]
    assert len(notes) == 1, notes
    assert "compiled again" in notes[0], notes
