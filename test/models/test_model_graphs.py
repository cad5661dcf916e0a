"""The model set (examples/models/zoo.py): every forward and backward graph imports, verifies, round-trips its
text, and its torch-level reference semantics reproduce what the FX graph computes on the same inputs."""

import sys

import pytest
import torch
from support import REPO, capture_aten_graphs_with_inputs

from neuron_mlir.frontend.import_check import check_import

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
            check_import(graph, graph_inputs)
        except Exception as error:
            raise AssertionError(f"{name} graph {index} of {len(graphs)}: {error}") from error
    return len(graphs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_inference_graphs_import_and_reproduce(name):
    with torch.no_grad():
        _check_all(name, training=False)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_graphs_import_and_reproduce(name):
    count = _check_all(name, training=True)
    assert count >= 2, "a forward and a backward graph"
