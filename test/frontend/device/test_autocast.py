"""torch.autocast on the `neuron` device (frontend/device/autocast.py) casts as PyTorch's autocast does on the CPU.

The dtype routing is the dispatcher's, before an op reaches the device's kernels, whichever way those then run
(compiled, or on the host): the cases run on the host, which is fast.
"""

import torch
import torch.nn.functional as F
from support import assert_close_to_torch

from neuron_mlir.frontend.device import autocast

BF16 = torch.bfloat16


def test_bf16_is_the_default_and_both_16_bit_types_work(host_mode):
    assert torch.get_autocast_dtype("neuron") == BF16
    x, w = torch.randn(4, 8, device="neuron"), torch.randn(16, 8, device="neuron")
    for dtype in (BF16, torch.float16):
        with torch.autocast("neuron", dtype=dtype):
            assert F.linear(x, w).dtype == dtype
    assert F.linear(x, w).dtype == torch.float32  # outside the region nothing is cast


def test_each_policy_casts_as_pytorch_autocast_lists_say(host_mode):
    """Lower precision (as CPU autocast casts it), fp32 (CUDA's list: softmax and exp of bf16 in fp32, which CPU
    autocast leaves in bf16), promote, and fp64 left alone."""
    torch.manual_seed(0)
    x, w, b = torch.randn(6, 8), torch.randn(16, 8), torch.randn(16)
    half = torch.randn(6, 16, dtype=BF16)

    def region(x, w, b, half):
        y = F.linear(x, w, b)
        return y, y @ w, torch.softmax(half, -1), torch.exp(half), torch.cat([y, half.float()]), x.double().sum()

    with torch.autocast("cpu", dtype=BF16):
        y = F.linear(x, w, b)
        expected = [y, y @ w]
    expected += [torch.softmax(half.float(), -1), torch.exp(half.float()), torch.cat([y.float(), half.float()])]
    expected.append(x.double().sum())
    with torch.autocast("neuron", dtype=BF16):
        actual = region(*(t.to("neuron") for t in (x, w, b, half)))
    assert [t.dtype for t in actual] == [BF16, BF16, torch.float32, torch.float32, torch.float32, torch.float64]
    assert_close_to_torch([t.cpu() for t in actual], expected)


def test_every_listed_op_this_torch_has_gets_a_kernel():
    table = autocast.policies()
    names = {overload._schema.name.removeprefix("aten::") for overload in table}
    assert {"mm", "linear", "conv2d", "softmax", "layer_norm", "cat", "scaled_dot_product_attention"} <= names
    assert table[torch.ops.aten.mm.default] == "lower"
    assert table[torch.ops.aten.softmax.int] == "fp32"
    assert table[torch.ops.aten.cat.default] == "promote"
    assert all(not overload._schema.is_mutable for overload in table)


def test_training_step_under_autocast_against_cpu_autocast(host_mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 20), torch.nn.GELU(), torch.nn.Linear(20, 5))
    x, target = torch.randn(7, 12), torch.randint(0, 5, (7,))

    def step(model, x, target, device):
        model.zero_grad()
        with torch.autocast(device, dtype=BF16):
            logits = model(x)
            loss = F.cross_entropy(logits, target)
        loss.backward()
        return logits, loss, [p.grad for p in model.parameters()]

    logits, loss, grads = step(model, x, target, "cpu")
    on_device = torch.nn.Sequential(*(layer for layer in model)).to("neuron")  # the same modules, moved
    actual = step(on_device, x.to("neuron"), target.to("neuron"), "neuron")
    assert actual[0].dtype == BF16
    assert actual[1].dtype == torch.float32
    assert all(g.dtype == torch.float32 for g in actual[2])
    assert_close_to_torch(actual[0].cpu(), logits, "logits")
    assert_close_to_torch(actual[1].cpu(), loss, "loss", precision=BF16)
    assert_close_to_torch([g.cpu() for g in actual[2]], grads, "gradients", precision=BF16)
