"""Fixtures of the device tests: the eager mode, the device's counters started afresh, copies counted."""

import pytest


@pytest.fixture(params=["host", "compile"])
def eager_mode(request, monkeypatch):
    """Both ways an eager op runs: on the host only, and compiled (falling back to the host when refused)."""
    monkeypatch.setenv("NEURON_MLIR_EAGER", request.param)
    return request.param


@pytest.fixture(params=["deferred", "alone"])
def deferral(request, monkeypatch):
    """Both ways compiled eager ops run: recorded into deferred regions, and each as its own program."""
    from neuron_mlir.frontend.device import region

    region.flush()
    monkeypatch.setenv("NEURON_MLIR_DEFER", "1" if request.param == "deferred" else "0")
    yield request.param
    region.flush()


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


@pytest.fixture
def arrays_copied_in(monkeypatch):
    """The shapes of the arrays copied into new device storage (`storage.from_array`) while the test runs: a
    result the simulator wrote straight into device memory is not among them."""
    from neuron_mlir.frontend.device import storage

    copied: list[tuple[int, ...]] = []
    from_array = storage.from_array

    def counted(array):
        copied.append(array.shape)
        return from_array(array)

    monkeypatch.setattr(storage, "from_array", counted)
    return copied
