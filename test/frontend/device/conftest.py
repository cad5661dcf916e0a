"""Fixtures of the device tests: the eager mode, and the device's counters started afresh."""

import pytest


@pytest.fixture(params=["host", "compile"])
def eager_mode(request, monkeypatch):
    """Both ways an eager op runs: on the host only, and compiled (falling back to the host when refused)."""
    monkeypatch.setenv("NEURON_MLIR_EAGER", request.param)
    return request.param


@pytest.fixture
def host_mode(monkeypatch):
    """Every eager op on the host: the device's semantics without compiling (fast)."""
    monkeypatch.setenv("NEURON_MLIR_EAGER", "host")


@pytest.fixture
def fresh_eager():
    from neuron_mlir.frontend.device import eager

    eager.reset()
    yield eager
    eager.reset()
