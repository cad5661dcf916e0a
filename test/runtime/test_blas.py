"""BLAS threads around the simulator's products (runtime.blas): one thread for a run, all of them for a tape's
large products, the count restored afterwards, and the same bits whatever the count."""

from __future__ import annotations

import os

import numpy as np
import pytest

from neuron_mlir.runtime import blas


class _FakeOpenBLAS:
    """Counts the setter's calls."""

    def __init__(self, threads: int) -> None:
        self.threads, self.sets = threads, 0

    def get(self) -> int:
        return self.threads

    def set(self, threads: int) -> None:
        self.sets += 1
        self.threads = threads


@pytest.fixture
def fake(monkeypatch):
    library = _FakeOpenBLAS(threads=4)
    controls = blas._Controls(library.get, library.set, initial=4)
    monkeypatch.setattr(blas, "_openblas_controls", lambda: controls)
    return library


def test_single_threaded_sets_one_thread_and_restores(fake):
    with blas.single_threaded():
        assert fake.threads == 1
        with blas.single_threaded():  # already one: the setter is not called again
            assert fake.threads == 1
        assert fake.threads == 1
    assert fake.threads == 4
    assert fake.sets == 2


def test_single_threaded_restores_after_an_error(fake):
    with pytest.raises(RuntimeError), blas.single_threaded():
        raise RuntimeError("in the run")
    assert fake.threads == 4


def test_a_wide_product_runs_on_the_initial_threads_and_goes_back(fake):
    seen = []
    product = blas.wide(lambda: seen.append(fake.threads))
    assert isinstance(product, blas.Wide)
    with blas.single_threaded():
        product()
        assert fake.threads == 1
    product()  # already at the initial count: nothing to change
    assert seen == [4, 4]
    assert fake.sets == 4  # into the run, wide and back, out of the run


def test_one_thread_or_no_openblas_leaves_products_alone(monkeypatch):
    def product() -> None:
        pass

    monkeypatch.setattr(blas, "_openblas_controls", lambda: None)
    assert blas.wide(product) is product
    with blas.single_threaded():
        pass
    library = _FakeOpenBLAS(threads=1)
    monkeypatch.setattr(blas, "_openblas_controls", lambda: blas._Controls(library.get, library.set, initial=1))
    assert blas.wide(product) is product


@pytest.mark.parametrize("shape", [(128, 128, 512), (3, 128, 96, 200), (64, 128, 384)])
def test_products_have_the_same_bits_on_one_and_on_all_threads(shape):
    """The reason a tape may widen its products: OpenBLAS splits rows and columns between threads, not sums."""
    if blas._openblas_controls() is None or blas.wide_threads() <= 1:
        pytest.skip("NumPy's BLAS is not a multi-threaded OpenBLAS here")
    rng = np.random.default_rng(7)
    *lanes, k, m, n = shape
    lhs = np.swapaxes(rng.standard_normal((*lanes, k, m)).astype(np.float32), -1, -2)  # stationary^T, as a tape
    rhs = rng.standard_normal((*lanes, k, n)).astype(np.float32)
    narrow, widened = np.empty((*lanes, m, n), np.float32), np.empty((*lanes, m, n), np.float32)

    def product() -> None:
        np.matmul(lhs, rhs, out=widened)

    with blas.single_threaded():
        np.matmul(lhs, rhs, out=narrow)
        blas.wide(product)()
    assert narrow.tobytes() == widened.tobytes()


def test_a_spare_core_is_a_load_average_below_the_usable_cores(monkeypatch):
    monkeypatch.setattr(blas, "_usable_cores", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 3.0, 3.0))
    assert blas.spare_core()
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 0.5, 0.5))
    assert not blas.spare_core()
