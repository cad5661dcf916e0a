"""The model set (examples/models/zoo.py): every forward and backward graph imports, verifies, round-trips its
text, and its torch-level reference semantics reproduce what the FX graph computes on the same inputs; the
torch stage of the default pipeline keeps those results; and a transformers module that lowers keeps its
source locations down to the neuron instructions."""

import sys

import pytest
import torch
from support import REPO, capture_aten_graphs_with_inputs
from xdsl.context import Context

from neuron_mlir.frontend.import_check import check_import
from neuron_mlir.frontend.tensors import to_numpy
from neuron_mlir.ir.semantics import run_function
from neuron_mlir.ir.semantics.compare import compare_all
from neuron_mlir.lowering.pipelines import DEFAULT_PIPELINE, pass_class

sys.path.insert(0, str(REPO / "examples"))
from models.zoo import MODELS


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _check_all(name: str, training: bool) -> int:
    model, inputs = MODELS[name]()
    if training:
        model.train()
    torch.manual_seed(1)
    graphs = capture_aten_graphs_with_inputs(model, *inputs, backward=training)
    assert graphs, f"{name}: no graph was captured"
    for index, (graph, graph_inputs) in enumerate(graphs):
        try:
            module, signature = check_import(graph, graph_inputs)
        except Exception as error:
            raise AssertionError(f"{name} graph {index} of {len(graphs)}: {error}") from error
        _check_torch_stage(module, signature, graph_inputs, f"{name} graph {index}")
    return len(graphs)


def _check_torch_stage(module, signature, graph_inputs, what):
    """The torch-level passes of the default pipeline compute the same outputs on the graph's real inputs."""
    arguments = [to_numpy(a) for a in signature.arguments(graph_inputs)] + [to_numpy(c) for c in signature.constants]
    torch.manual_seed(0)
    before = run_function(module, arguments)
    stage, passes = DEFAULT_PIPELINE[0]
    assert stage == "torch"
    for pass_name in passes:
        pass_class(pass_name)().apply(Context(), module)
    module.verify()
    torch.manual_seed(0)
    problems = compare_all(run_function(module, arguments), before)
    assert not problems, f"{what}: the torch stage changed the results: {problems}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_inference_graphs_import_and_reproduce(name):
    with torch.no_grad():
        _check_all(name, training=False)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_graphs_import_and_reproduce(name):
    count = _check_all(name, training=True)
    assert count >= 2, "a forward and a backward graph"


def test_transformers_locations_reach_the_neuron_instructions():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    from neuron_mlir.ir.locations import describe_location
    from neuron_mlir.lowering.pipelines import run_pipeline

    torch.manual_seed(0)
    mlp = LlamaMLP(LlamaConfig(hidden_size=32, intermediate_size=64))
    graphs = capture_aten_graphs_with_inputs(mlp, torch.randn(2, 8, 32), backward=True)
    for graph, graph_inputs in graphs:
        module, _ = check_import(graph, graph_inputs)
        run_pipeline(Context(), module)
        places = {describe_location(op.location) for op in module.walk() if op.dialect_name() == "neuron"}
        assert any("modeling_llama.py" in p and "(model.down_proj)" in p for p in places), sorted(places)
