"""OpInfo samples on the device against the CPU: PyTorch's own sample inputs moved to the device.

Two tests: the device's semantics in host mode (views and in-place forms included) over common ops and several
samples, and the compiled path over one entry of every op family in float32 and bfloat16, where every ATen op of
the sample must run natively on the simulated NeuronCore, as the device's dispatch counts it. The whole op_db runs
in `make coverage` (tools/coverage_sweep.py, the device column)."""

import functools

import pytest
import torch
from support import assert_close_to_torch
from torch.utils._pytree import tree_map_only

OPS = [
    "add", "sub", "mul", "div", "neg", "abs", "exp", "tanh", "sigmoid", "nn.functional.relu", "where", "clamp", "sum", "mean",
    "amax", "argmax", "matmul", "mm", "bmm", "cat", "stack", "transpose", "permute", "reshape", "narrow",
    "index_select", "gather", "masked_fill", "softmax", "nn.functional.linear", "nn.functional.gelu",
    "nn.functional.layer_norm", "nn.functional.cross_entropy", "cumsum", "tril", "flip", "roll",
]  # fmt: skip
SAMPLES_PER_OP = 3

# One or two entries per family (entry names as the sweep spells them), each required to run natively.
NATIVE_ENTRIES = [
    # arithmetic, transcendental, activations, rounding, comparisons
    "add", "div.floor_rounding", "remainder", "pow", "addcmul", "tan", "erf", "nn.functional.silu", "round", "lt",
    "where", "isnan", "equal",
    # casts and factories
    "to", "bfloat16", "long", "full", "zeros_like", "arange", "linspace", "eye",
    # reductions, softmax, normalization, scans, sort
    "sum", "argmax", "var", "log_softmax", "native_layer_norm", "native_batch_norm", "cumsum", "topk",
    # matmul, convolution, pooling, embedding
    "matmul", "addmm", "nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.max_pool2d",
    "nn.functional.embedding",
    # indexing, scatter, views (of a larger storage too), shape ops, padding
    "index_select", "gather", "scatter_add", "masked_fill", "transpose", "expand", "as_strided.partial_views",
    "cat", "flip", "tril", "constant_pad_nd",
    # complex values as (real, imaginary) pairs: FFTs (of a conjugate view), complex results
    "fft.hfft", "polar",
]  # fmt: skip
FLOAT32_ONLY = {"fft.hfft", "polar"}  # their ops have no bfloat16 samples on the CPU
NATIVE_CASES = [
    pytest.param(name, dtype, id=f"{name}-{dtype}")
    for name in NATIVE_ENTRIES
    for dtype in (torch.float32, torch.bfloat16)
    if dtype is torch.float32 or name not in FLOAT32_ONLY
]


@functools.cache
def _op_info(name):
    """The OpInfo entry of `name` (its plain variant when it has several), loaded on first use: importing the
    database takes seconds, which collection should not pay."""
    from torch.testing._internal.common_methods_invocations import op_db

    entries = [info for info in op_db if info.name == name]
    assert entries, f"no OpInfo entry named {name}"
    return next((info for info in entries if not info.variant_test_name), entries[0])


@functools.cache
def _entry(name):
    from neuron_mlir.tools.opinfo_sweep import _op_db, entry_name

    return next(info for info in _op_db() if entry_name(info) == name)


def _to_device(value):
    return tree_map_only(torch.Tensor, lambda t: t.detach().to("neuron"), value)


@pytest.mark.parametrize("name", OPS)
def test_samples_match_the_cpu(host_mode, name):
    info = _op_info(name)
    samples = list(info.sample_inputs("cpu", torch.float32, requires_grad=False))[:SAMPLES_PER_OP]
    assert samples, f"{info.name}: no samples"
    for index, sample in enumerate(samples):
        expected = info.op(sample.input, *sample.args, **sample.kwargs)
        actual = info.op(_to_device(sample.input), *_to_device(sample.args), **_to_device(sample.kwargs))
        actual = tree_map_only(torch.Tensor, lambda t: t.cpu(), actual)
        assert_close_to_torch(actual, expected, f"{info.name} sample {index}")


@pytest.mark.parametrize(("name", "dtype"), NATIVE_CASES)
def test_entries_run_natively(monkeypatch, fresh_eager, name, dtype):
    from neuron_mlir.tools.coverage_sweep import check_device_entry

    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    info = _entry(name)
    assert dtype in info.supported_dtypes("cpu"), f"{name} has no {dtype} samples on the CPU: see FLOAT32_ONLY"
    verdict = check_device_entry(info, dtype, max_samples=1)
    assert verdict.samples == 1, verdict
    assert verdict.status == "native", f"{name}: {verdict.status}: {verdict.reason}"
