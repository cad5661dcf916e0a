"""The `auto_cast` option compiled for the simulated NeuronCore against eager (lowering/torch_auto_cast.py).

"matmul": an fp32 graph's matmuls and convolutions multiply bf16 roundings of their operands with fp32
accumulation, which eager states exactly as the same fp32 op on operands rounded to bf16 and widened back: the
compiled results must match that within fp32's tolerance, and eager fp32 within bf16's. "all": bf16 except
reductions, normalizations and softmax, within bf16's tolerance of eager fp32. TensorE runs the auto-cast
matmuls at its bf16 rate.

Shapes avoid multiples of the tile sizes (128 partitions, 512-wide PSUM banks).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support import REPO, assert_close_to_torch
from torch.utils.flop_counter import FlopCounterMode

import neuron_mlir

sys.path.insert(0, str(REPO / "examples"))
from mlp import MLP

BF16 = torch.bfloat16


def _compiled(fn: Any, auto_cast: str, *inputs: torch.Tensor) -> Any:
    torch._dynamo.reset()
    neuron_mlir.reset()
    result = torch.compile(fn, backend="neuron-mlir", options={"auto_cast": auto_cast, "strict": True})(*inputs)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    return result


def _rounded(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """Each tensor rounded to bf16 and widened back to fp32 exactly."""
    return [t.to(BF16).float() for t in tensors]


def _linear_gelu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def test_matmul_mode_multiplies_bf16_roundings_and_accumulates_in_fp32():
    torch.manual_seed(0)
    x, w, b = torch.randn(130, 200), torch.randn(600, 200) / 14, torch.randn(600)
    out = _compiled(_linear_gelu, "matmul", x, w, b)
    assert out.dtype == torch.float32
    xr, wr = _rounded(x, w)
    # fp32 tolerance against the exact statement: bf16 products, fp32 sums, an fp32 bias and activation
    assert_close_to_torch(out, _linear_gelu(xr, wr, b), "against the rounded operands")
    assert_close_to_torch(out, _linear_gelu(x, w, b), "against eager fp32", precision=BF16)
    # and it is not simply fp32 (the rounding shows at fp32's tolerance)
    with pytest.raises(AssertionError):
        assert_close_to_torch(out, _linear_gelu(x, w, b))
    [profile] = neuron_mlir.profiles().values()
    assert set(profile.flops_by_family) == {"bf16"}, profile.flops_by_family


def test_matmul_mode_runs_tensor_engine_at_its_bf16_rate():
    torch.manual_seed(0)
    a, b = torch.randn(512, 1100), torch.randn(1100, 1000)
    busy = {}
    for mode in ("none", "matmul"):
        out = _compiled(torch.mm, mode, a, b)
        [profile] = neuron_mlir.profiles().values()
        busy[mode] = profile.busy_ns["tensor"]
    assert_close_to_torch(out, torch.mm(*_rounded(a, b)), "against the rounded operands")
    # fp32 matmuls cost TensorE four times the cycles of bf16 ones (runtime/hardware.py)
    assert busy["matmul"] < 0.3 * busy["none"], busy


def test_matmul_mode_convolution():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 5, 17, 19), torch.randn(7, 5, 3, 3), torch.randn(7)

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, b, padding=1)

    out = _compiled(conv, "matmul", x, w, b)
    rounded_x, rounded_w = _rounded(x, w)
    assert_close_to_torch(out, conv(rounded_x, rounded_w, b), "against the rounded operands")
    assert_close_to_torch(out, conv(x, w, b), "against eager fp32", precision=BF16)


def test_matmul_mode_training_step_against_eager_fp32():
    torch.manual_seed(0)
    model, x, target = MLP(), torch.randn(37, 300), torch.randint(0, 10, (37,))

    def step(model: torch.nn.Module, forward: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = F.cross_entropy(forward(x), target)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]

    with FlopCounterMode(display=False) as counter:
        expected = step(model, model)
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(model, backend="neuron-mlir", options={"auto_cast": "matmul", "strict": True})
    actual = step(model, compiled)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    assert_close_to_torch(actual, expected, "loss and gradients", precision=BF16)
    # every matmul of the forward and the backward ran in bf16 (the fp32 ones left are the bias gradients' column
    # sums, reductions that stay fp32)
    bf16_flops = sum(p.flops_by_family.get("bf16", 0) for p in neuron_mlir.profiles().values())
    assert bf16_flops == counter.get_total_flops()


class Block(torch.nn.Module):
    """Layer norm, Linear, GELU, Linear, a residual and a softmax: the ops "all" keeps fp32 and the ones it does not."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(96)
        self.up = torch.nn.Linear(96, 200)
        self.down = torch.nn.Linear(200, 96)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.down(F.gelu(self.up(self.norm(x))))
        return torch.softmax(h, dim=-1) * 96


def test_all_mode_against_eager_fp32_and_autocast():
    torch.manual_seed(0)
    model, x = Block(), torch.randn(3, 45, 96)
    out = _compiled(model, "all", x)
    assert out.dtype == torch.float32
    assert_close_to_torch(out, model(x), "against eager fp32", precision=BF16)
    with torch.autocast("cpu", dtype=BF16):
        autocast = model(x)
    assert_close_to_torch(out, autocast.float(), "against eager autocast", precision=BF16)


class NormMlp(torch.nn.Module):
    """GPT-2's MLP block: a layer norm read only by a Linear layer (computed in its prologue), whose GELU only the
    next Linear layer reads (computed on chip as that layer's panel: tile-fuse-matmul-prologues and -chains), the
    Linear layers as GPT-2 writes them (`Conv1D`: addmm with [in, out] weights)."""

    def __init__(self, features: int = 256, hidden: int = 640) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(features)
        self.up = torch.nn.Parameter(torch.randn(features, hidden) / features**0.5)
        self.up_bias = torch.nn.Parameter(torch.randn(hidden))
        self.down = torch.nn.Parameter(torch.randn(hidden, features) / hidden**0.5)
        self.down_bias = torch.nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.gelu(torch.addmm(self.up_bias, self.norm(x), self.up), approximate="tanh")
        return torch.addmm(self.down_bias, hidden, self.down)


def test_matmul_mode_keeps_the_prologue_and_chain_fusions():
    torch.manual_seed(0)
    model, x = NormMlp(), torch.randn(130, 256)
    hbm_bytes = {}
    for mode in ("none", "matmul"):
        with torch.no_grad():
            out = _compiled(model, mode, x)
        [profile] = neuron_mlir.profiles().values()
        hbm_bytes[mode] = profile.hbm_bytes
    with torch.no_grad():
        (normalized,) = _rounded(model.norm(x))
        (hidden,) = _rounded(F.gelu(torch.addmm(model.up_bias, normalized, *_rounded(model.up)), approximate="tanh"))
        expected = torch.addmm(model.down_bias, hidden, *_rounded(model.down))
    # the rows the fused layer norm and GELU compute on chip are rounded as the operands they stand for (the
    # prologue rounds the normalized rows before their affine as well, as it does for 16-bit models: within bf16's
    # tolerance, not fp32's)
    assert_close_to_torch(out, expected, "against the rounded operands", precision=BF16)
    assert_close_to_torch(out, model(x), "against eager fp32", precision=BF16)
    # neither the normalized rows nor the hidden layer reach HBM, and the DMAs round the weights as they load
    assert hbm_bytes["matmul"] == hbm_bytes["none"], hbm_bytes


class AutocastLinearGelu(torch.nn.Module):
    """An fp32 Linear layer and its GELU inside a `torch.autocast(device, bf16)` region: Dynamo rounds the input,
    the weight and the bias to bf16 and reads the weight through a permute."""

    def __init__(self, device: str = "cpu", dtype: torch.dtype = BF16) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(200, 600)
        self.device = device
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device, dtype=self.dtype):
            return F.gelu(self.linear(x), approximate="tanh").float()


def test_autocast_region_rounds_the_transposed_weight_as_the_matmul_loads_it():
    torch.manual_seed(0)
    model, x = AutocastLinearGelu().eval(), torch.randn(130, 200)
    with torch.no_grad():
        out = _compiled(model, "none", x)
        [profile] = neuron_mlir.profiles().values()
        assert_close_to_torch(out, model(x), "against eager autocast", precision=BF16)
        # the same layer with auto_cast="matmul" rounds the weight in its DMAs: under autocast the weight's
        # rounding must not be a pass of its own before the matmul (a bf16 copy of the weight in HBM), which made
        # this layer 1.5 times as slow (the gap left at this small size is 6%)
        fp32_model = torch.nn.Sequential(model.linear, torch.nn.GELU(approximate="tanh"))
        _compiled(fp32_model, "matmul", x)
        [reference] = neuron_mlir.profiles().values()
    assert set(profile.flops_by_family) == {"bf16"}, profile.flops_by_family
    assert profile.total_ns <= 1.1 * reference.total_ns, (profile.total_ns, reference.total_ns)


def test_device_autocast_region_compiles_like_the_cpu_one():
    """`torch.autocast("neuron")` over device tensors under torch.compile: the device's autocast kernels
    (frontend/device/autocast.py) insert the casts, which must reach the same program as a CPU region's, the
    weight rounded by the matmul's loads."""
    torch.manual_seed(0)
    model, x = AutocastLinearGelu().eval(), torch.randn(130, 200)
    on_device = AutocastLinearGelu("neuron").eval()
    on_device.load_state_dict(model.state_dict())
    on_device.to("neuron")
    with torch.no_grad():
        _compiled(model, "none", x)
        [reference] = neuron_mlir.profiles().values()
        out = _compiled(on_device, "none", x.to("neuron"))
        [profile] = neuron_mlir.profiles().values()
        assert out.device.type == "neuron"
        assert_close_to_torch(out.cpu(), model(x), "against eager CPU autocast", precision=BF16)
    assert set(profile.flops_by_family) == {"bf16"}, profile.flops_by_family
    assert (profile.total_ns, profile.hbm_bytes) == (reference.total_ns, reference.hbm_bytes)


def test_float16_autocast_region_matches_eager_autocast():
    """A `torch.autocast("cpu", torch.float16)` region under torch.compile matches eager CPU autocast at fp16's
    tolerance (a bf16 rounding would not), its matmul at TensorE's 16-bit rate (the "bf16" rate class, which
    fp16 shares)."""
    torch.manual_seed(0)
    model, x = AutocastLinearGelu(dtype=torch.float16).eval(), torch.randn(130, 200)
    with torch.no_grad():
        out = _compiled(model, "none", x)
        [profile] = neuron_mlir.profiles().values()
        assert_close_to_torch(out, model(x), "against eager autocast", precision=torch.float16)
    assert set(profile.flops_by_family) == {"bf16"}, profile.flops_by_family
