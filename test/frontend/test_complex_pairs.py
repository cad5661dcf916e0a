"""The rewrite of complex values into real pairs (frontend/complex_pairs.py), checked on the FX graphs themselves:
the DFT matrices against NumPy's FFT, and rewritten graphs run eagerly against the graphs they came from."""

import operator

import numpy as np
import pytest
import torch
from support import assert_close_to_torch, numpy_close, trace_aten_graphs

from neuron_mlir.frontend.complex_pairs import (
    REFUSAL,
    _c2c_matrix,
    _c2r_matrix,
    _r2c_matrix,
    complex_as_pairs,
)
from neuron_mlir.ir.dialects.torch import op_class_for
from neuron_mlir.lowering.convert_torch_to_tile import is_lowerable


def _pairs(values: np.ndarray) -> np.ndarray:
    """Complex values as rows of (real, imaginary) pairs, the layout the matrices contract."""
    return np.stack([values.real, values.imag], axis=-1).reshape(*values.shape[:-1], -1).astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 8, 9])
def test_r2c_matrix_is_the_one_sided_dft(n):
    x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
    outputs = n // 2 + 1
    numpy_close(x @ _r2c_matrix(n, outputs, 1.0).numpy(), _pairs(np.fft.rfft(x)))


@pytest.mark.parametrize(("n", "forward"), [(6, True), (7, False), (1, True)])
def test_c2c_matrix_is_the_dft_in_either_direction(n, forward):
    rng = np.random.default_rng(n)
    z = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
    expected = np.fft.fft(z) if forward else np.fft.ifft(z) * n
    numpy_close(_pairs(z) @ _c2c_matrix(n, -1 if forward else 1, 1.0).numpy(), _pairs(expected))


@pytest.mark.parametrize("n", [1, 2, 8, 9])
def test_c2r_matrix_is_the_inverse_of_a_hermitian_half_spectrum(n):
    rng = np.random.default_rng(n)
    terms = n // 2 + 1
    spectrum = rng.standard_normal((3, terms)) + 1j * rng.standard_normal((3, terms))
    numpy_close(_pairs(spectrum) @ _c2r_matrix(terms, n, 1.0 / n).numpy(), np.fft.irfft(spectrum, n).astype(np.float32))


def _rewritten(fn, *inputs):
    [(graph_module, _)] = trace_aten_graphs(fn, *inputs)
    result = complex_as_pairs(graph_module)
    assert result is not None
    return graph_module, *result


def test_rewritten_graph_is_real_lowerable_located_and_computes_the_same():
    def spectral(x, z):
        mixed = torch.fft.fft2(x) * z.conj() + torch.fft.rfft(x, dim=0, norm="ortho").sum()
        return mixed, mixed.abs(), torch.fft.irfft(z, n=7)

    torch.manual_seed(0)
    x, z = torch.randn(6, 4), torch.randn(6, 4, dtype=torch.complex64)
    source, rewritten, boundary = _rewritten(spectral, x, z)
    assert boundary.inputs == [1]
    assert boundary.outputs == [0]
    calls = [node for node in rewritten.graph.nodes if node.op == "call_function"]
    for node in rewritten.graph.nodes:
        value = node.meta.get("val")
        assert not (isinstance(value, torch.Tensor) and value.is_complex()), f"{node.name} is still complex"
    for node in calls:
        if node.target is not operator.getitem:
            op_class = op_class_for(str(node.target))
            assert op_class is not None, f"{node.target} has no torch-dialect op"
            assert is_lowerable(op_class.name), f"{node.target} does not lower"
        assert "test_complex_pairs.py" in node.meta.get("stack_trace", ""), f"{node.name} lost its source line"
    assert sum(node.target is torch.ops.aten.mm.default for node in calls) == 4  # fft2: 2, rfft: 1, irfft: 1
    expected = source(x, z)
    actual = boundary.wrap(lambda args: list(rewritten(*args)))([x, z])
    assert_close_to_torch(list(actual), list(expected))


def test_node_without_rule_keeps_its_complex_values_between_conversions():
    torch.manual_seed(1)
    x = torch.randn(5, 8)
    source, rewritten, _boundary = _rewritten(lambda v: torch.fft.fft(v).sin().real, x)
    [sin] = [node for node in rewritten.graph.nodes if node.target is torch.ops.aten.sin.default]
    assert sin.meta[REFUSAL] == "stays complex: no rule computes it on (real, imaginary) pairs"
    [feed] = sin.all_input_nodes
    assert feed.target is torch.ops.aten.view_as_complex.default
    assert REFUSAL in feed.meta
    assert [user.target for user in sin.users] == [torch.ops.aten.view_as_real.default]
    assert_close_to_torch(rewritten(x), source(x))


def test_graph_without_complex_values_is_left_alone():
    [(graph_module, _)] = trace_aten_graphs(lambda x: torch.fft.fftshift(x) * 2, torch.randn(4, 6))
    assert complex_as_pairs(graph_module) is None
