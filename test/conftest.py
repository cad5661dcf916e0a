"""Shared pytest setup: the `support` helpers importable from every test, and a clean torch.compile state."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    """Tests compile into a cache of their own, never the user's ~/.cache/neuron-mlir."""
    import os

    os.environ["NEURON_MLIR_CACHE_DIR"] = str(tmp_path_factory.mktemp("neuron-mlir-cache"))


@pytest.fixture
def fresh_compiler():
    """A torch.compile cache and neuron-mlir stats that no other test has touched."""
    import torch

    import neuron_mlir

    torch._dynamo.reset()
    neuron_mlir.reset()
    yield
    torch._dynamo.reset()
    neuron_mlir.reset()
