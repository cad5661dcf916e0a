"""The row-wise kernels of examples/kernels/normalization.py against NumPy, with a remainder tile of rows."""

import sys

import numpy as np
import pytest
from support import REPO, numpy_close

import neuron_mlir.nki as nki

sys.path.insert(0, str(REPO / "examples"))

from kernels.normalization import (
    layer_norm,
    reference_layer_norm,
    reference_rms_norm,
    reference_softmax,
    rms_norm,
    softmax,
)


@pytest.fixture
def rng():
    return np.random.default_rng(10)


@pytest.mark.parametrize("shape", [(200, 96), (256, 640)])
def test_rms_norm(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    weight = rng.standard_normal(shape[1]).astype(np.float32)
    numpy_close(nki.simulate(rms_norm)(x, weight), reference_rms_norm(x, weight))


def test_softmax(rng):
    x = (rng.standard_normal((300, 80)) * 4).astype(np.float32)
    numpy_close(nki.simulate(softmax)(x), reference_softmax(x))


@pytest.mark.parametrize("shape", [(130, 64), (128, 600)])
def test_layer_norm(rng, shape):
    """600 columns take two bn_stats chunks (512 and 88), aggregated by bn_aggr."""
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    weight = rng.standard_normal(shape[1]).astype(np.float32)
    bias = rng.standard_normal(shape[1]).astype(np.float32)
    numpy_close(nki.simulate(layer_norm)(x, weight, bias), reference_layer_norm(x, weight, bias))
