"""OpInfo samples on the device against the CPU: PyTorch's own sample inputs for common ops, moved to the device
(host mode: the device's semantics, views and in-place forms included; the compiled path has its own tests)."""

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


@functools.cache
def _op_info(name):
    """The OpInfo entry of `name` (its plain variant when it has several), loaded on first use: importing the
    database takes seconds, which collection should not pay."""
    from torch.testing._internal.common_methods_invocations import op_db

    entries = [info for info in op_db if info.name == name]
    assert entries, f"no OpInfo entry named {name}"
    return next((info for info in entries if not info.variant_test_name), entries[0])


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
