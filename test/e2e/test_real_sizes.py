"""Real sizes: the op families of real models compile at the widths of real checkpoints, on every target.

Each case is traced (forward, and backward for training cases) without running anything eagerly, and every graph
is compiled in strict mode for trn1, trn2 and trn3: a resource limit (PSUM banks, SBUF bytes, offsets exact in
fp32) must be planned around by the lowering, never reach the user as an error or a CPU fallback. The shapes span
what real models use: rows 1-8192, features 64-8192, heads 1-64 (grouped-query too), head dims 32-256,
sequences 1-4096, vocabularies up to 262,144 tokens. A sample runs on the simulated core against eager.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support import trace_aten_graphs
from support.compiled import check_compiled

import neuron_mlir
from neuron_mlir.frontend.backend import CompileOptions
from neuron_mlir.frontend.compile_graph import compile_graph

F32, BF16 = torch.float32, torch.bfloat16
TARGETS = ("trn1", "trn2", "trn3")


@dataclass(frozen=True)
class Case:
    fn: Callable[..., Any]
    inputs: Callable[[], tuple[Any, ...]]  # built when the case runs, not at collection
    training: bool = True


def _randn(*shape: int, dtype: torch.dtype = F32, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def _linear(rows: int, features: int, out: int, dtype: torch.dtype) -> Case:
    return Case(
        lambda x, w, b: F.linear(x, w, b),
        lambda: (_randn(rows, features, dtype=dtype), _randn(out, features, dtype=dtype), _randn(out, dtype=dtype)),
    )


def _attention(batch: int, heads: int, length: int, width: int, causal: bool, dtype: torch.dtype, training: bool):
    return Case(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        lambda: tuple(_randn(batch, heads, length, width, dtype=dtype, grad=training) for _ in range(3)),
        training,
    )


def _conv2d(batch: int, channels: int, size: int, out: int, kernel: int, groups: int, stride: int) -> Case:
    return Case(
        lambda x, w: F.conv2d(x, w, stride=stride, padding=kernel // 2, groups=groups),
        lambda: (_randn(batch, channels, size, size), _randn(out, channels // groups, kernel, kernel)),
    )


def _layer_norm(rows: int, features: int, dtype: torch.dtype) -> Case:
    return Case(
        lambda x, w, b: F.layer_norm(x, (features,), w, b),
        lambda: (_randn(rows, features, dtype=dtype), _randn(features, dtype=dtype), _randn(features, dtype=dtype)),
    )


def _rms_norm(rows: int, features: int, dtype: torch.dtype) -> Case:
    return Case(
        lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
        lambda: (_randn(rows, features, dtype=dtype), _randn(features, dtype=dtype)),
    )


CASES: dict[str, Case] = {
    # Linear layers: BERT-base, GPT-2 and Llama projections, a decode step, narrow heads
    "linear-768x768-rows1024-f32": _linear(1024, 768, 768, F32),
    "linear-768x3072-rows1024-bf16": _linear(1024, 768, 3072, BF16),
    "linear-3072x768-rows2048-f32": _linear(2048, 3072, 768, F32),
    "linear-640x1024-rows768-bf16": _linear(768, 640, 1024, BF16),
    "linear-2048x8192-rows4096-bf16": _linear(4096, 2048, 8192, BF16),
    "linear-8192x2048-rows256-f32": _linear(256, 8192, 2048, F32),
    "linear-4096x4096-rows1-bf16": _linear(1, 4096, 4096, BF16),
    "linear-64x64-rows8192-f32": _linear(8192, 64, 64, F32),
    "linear-1000x77-rows129-f32": _linear(129, 1000, 77, F32),
    # a masked-LM decoder's input gradient: K is the vocabulary, A one of the graph's inputs
    "mm-512x30522x768-f32": Case(
        torch.mm, lambda: (_randn(512, 30522, grad=False), _randn(30522, 768, grad=False)), training=False
    ),
    # attention: training traces the math path, inference the fused kernel
    "attention-bert-train-f32": _attention(4, 12, 128, 64, False, F32, True),
    "attention-gpt2-causal-train-bf16": _attention(2, 12, 512, 64, True, BF16, True),
    "attention-129-causal-train-f32": _attention(1, 32, 129, 64, True, F32, True),
    "attention-64heads-train-bf16": _attention(1, 64, 256, 32, False, BF16, True),
    "attention-4096-causal-train-bf16": _attention(1, 1, 4096, 64, True, BF16, True),
    "attention-decode-train-f32": _attention(4, 12, 1, 64, False, F32, True),
    "attention-bert-infer-f32": _attention(4, 12, 128, 64, False, F32, False),
    "attention-129-causal-infer-bf16": _attention(1, 32, 129, 64, True, BF16, False),
    "attention-1024x128-causal-infer-bf16": _attention(1, 8, 1024, 128, True, BF16, False),
    "attention-4096-causal-infer-f32": _attention(1, 2, 4096, 64, True, F32, False),
    "attention-decode-infer-bf16": _attention(4, 64, 1, 128, False, BF16, False),
    "attention-256-wide-causal-infer-bf16": _attention(1, 8, 512, 256, True, BF16, False),
    "attention-256-wide-train-f32": _attention(1, 4, 256, 256, False, F32, True),
    "attention-gqa-32-8-infer-bf16": Case(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        lambda: (_randn(1, 32, 256, 64, dtype=BF16, grad=False), *(_randn(1, 8, 256, 64, dtype=BF16, grad=False),) * 2),
        training=False,
    ),
    "attention-gqa-32-8-train-bf16": Case(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        lambda: (
            _randn(1, 32, 256, 64, dtype=BF16),
            _randn(1, 8, 256, 64, dtype=BF16),
            _randn(1, 8, 256, 64, dtype=BF16),
        ),
    ),
    # convolutions: ViT patches, ResNet stem and blocks, ConvNeXt depthwise, grouped, speech
    "conv-patch16-768": _conv2d(2, 3, 224, 768, 16, 1, 16),
    "conv-stem-7x7-s2": _conv2d(2, 3, 224, 64, 7, 1, 2),
    "conv-3x3-64-56": _conv2d(2, 64, 56, 64, 3, 1, 1),
    "conv-1x1-512-2048": _conv2d(2, 512, 7, 2048, 1, 1, 1),
    "conv-depthwise-7x7-96-56": _conv2d(2, 96, 56, 96, 7, 96, 1),
    "conv-depthwise-7x7-384-14": _conv2d(2, 384, 14, 384, 7, 384, 1),
    "conv-grouped-3x3-g32": _conv2d(2, 128, 28, 128, 3, 32, 1),
    # a deep stage's strided 3x3: the weight's rows (36 KiB a partition per output-channel tile) exceed SBUF
    "conv-3x3-s2-1024-4": _conv2d(2, 1024, 4, 1024, 3, 1, 2),
    "conv-3x3-s2-2048-8": _conv2d(1, 2048, 8, 2048, 3, 1, 2),
    "conv1d-speech-384": Case(
        lambda x, w: F.conv1d(x, w, padding=1), lambda: (_randn(2, 384, 1500), _randn(384, 384, 3))
    ),
    # normalization
    "layernorm-8192x768-bf16": _layer_norm(8192, 768, BF16),
    "layernorm-1x8192-f32": _layer_norm(1, 8192, F32),
    "layernorm-4096x64-f32": _layer_norm(4096, 64, F32),
    "rmsnorm-256x8192-bf16": _rms_norm(256, 8192, BF16),
    "rmsnorm-2048x2048-f32": _rms_norm(2048, 2048, F32),
    "batchnorm-train-256x56": Case(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda: (_randn(8, 256, 56, 56), _randn(256), _randn(256)),
    ),
    "groupnorm-32-512x32": Case(
        lambda x, w, b: F.group_norm(x, 32, w, b), lambda: (_randn(2, 512, 32, 32), _randn(512), _randn(512))
    ),
    # reductions, softmax, vocabularies
    "sum-rows-8192x4096": Case(lambda x: x.sum(0), lambda: (_randn(8192, 4096),)),
    "mean-last-64x8192-bf16": Case(lambda x: x.mean(-1), lambda: (_randn(64, 8192, dtype=BF16),)),
    "softmax-1024x4096-bf16": Case(lambda x: torch.softmax(x, -1), lambda: (_randn(1024, 4096, dtype=BF16),)),
    "cross-entropy-1024x50257": Case(
        lambda x, t: F.cross_entropy(x, t), lambda: (_randn(1024, 50257), torch.randint(0, 50257, (1024,)))
    ),
    "embedding-30522x768": Case(
        lambda ids, w: F.embedding(ids, w), lambda: (torch.randint(0, 30522, (4, 128)), _randn(30522, 768))
    ),
    "embedding-262144x256": Case(
        lambda ids, w: F.embedding(ids, w), lambda: (torch.randint(0, 262144, (2, 64)), _randn(262144, 256))
    ),
    # activations at MLP widths
    "gelu-1024x3072": Case(lambda x: F.gelu(x), lambda: (_randn(1024, 3072),)),
    "swiglu-256x8192-bf16": Case(
        lambda g, u: F.silu(g) * u, lambda: (_randn(256, 8192, dtype=BF16), _randn(256, 8192, dtype=BF16))
    ),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", CASES)
def test_compiles_at_real_size(name: str, target: str) -> None:
    case = CASES[name]
    torch.manual_seed(0)
    graphs = trace_aten_graphs(case.fn, *case.inputs(), backward=case.training)
    assert len(graphs) == (2 if case.training else 1), f"{len(graphs)} graphs traced"
    options = CompileOptions(target=target, strict=True, cache=False)
    for index, (graph, example) in enumerate(graphs):
        compile_graph(graph, example, options, "backward" if index else "forward")


def _train_step_matches_eager(module: torch.nn.Module, *inputs: torch.Tensor) -> None:
    """Forward and parameter gradients of one step, no node on the CPU, each as close to a float64 run of the
    same step as eager is (in the module's dtype: eager's low-precision sums over thousands of rows can be
    further from the truth than ours)."""
    import copy

    from support import assert_close_to_golden

    def step(model: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        out = model(*args)
        out.double().square().sum().backward()
        grads = {}
        for name, p in model.named_parameters():
            assert p.grad is not None, f"{name} has no gradient"
            grads[name] = p.grad.clone()
        return out.detach(), grads

    golden_out, golden_grads = step(copy.deepcopy(module).double(), tuple(x.double() for x in inputs))
    eager_out, eager_grads = step(module, inputs)
    module.zero_grad()
    compiled = torch.compile(module, backend="neuron-mlir")
    got_out, _ = step(compiled, inputs)  # type: ignore[arg-type]  # compiling a Module gives a Module
    got_grads = {name: p.grad for name, p in module.named_parameters()}
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    assert_close_to_golden(got_out, eager_out, golden_out, "forward")
    for name, grad in got_grads.items():
        assert_close_to_golden(grad, eager_grads[name], golden_grads[name], f"grad of {name}")


@pytest.mark.usefixtures("fresh_compiler")
def test_linear_768_trains_at_bert_width() -> None:
    """The first layer a new user compiles: Linear(768, 768) on [8, 128, 768] (it once ran out of PSUM)."""
    torch.manual_seed(0)
    _train_step_matches_eager(torch.nn.Linear(768, 768), torch.randn(8, 128, 768))


@pytest.mark.usefixtures("fresh_compiler")
def test_depthwise_block_trains_at_convnext_width() -> None:
    """ConvNeXt's first stage: a 7x7 depthwise convolution over 96 channels of 56 x 56."""
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Conv2d(96, 96, 7, padding=3, groups=96), torch.nn.GELU())
    _train_step_matches_eager(block, torch.randn(2, 96, 56, 56))


@pytest.mark.usefixtures("fresh_compiler")
def test_strided_convolution_trains_at_1024_channels() -> None:
    """A dense-prediction head's 3x3 / 2 convolution over 1024 channels of 4 x 4: its input gradient keeps one
    input-channel tile's columns of the weight on chip at a time (all of them once ran out of SBUF)."""
    torch.manual_seed(0)
    _train_step_matches_eager(torch.nn.Conv2d(1024, 1024, 3, stride=2, padding=1), torch.randn(2, 1024, 4, 4))


@pytest.mark.usefixtures("fresh_compiler")
def test_attention_at_129_tokens_runs() -> None:
    """One past a partition tile of queries, with 32 heads, through the fused inference kernel."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 32, 129, 64) for _ in range(3))
    check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)


@pytest.mark.usefixtures("fresh_compiler")
def test_layer_norm_trains_at_gpt2_width_in_bf16() -> None:
    torch.manual_seed(0)
    _train_step_matches_eager(torch.nn.LayerNorm(768).to(BF16), torch.randn(2048, 768, dtype=BF16))


def _linear_step_matches_golden(rows: int, features: int, out: int, dtype: torch.dtype) -> None:
    """A Linear layer's output and its three gradients (input, weight, bias) against a float64 run: the backward
    multiplies by transposed operands (dX = dY W, dW = dY^T X with the tokens as the contraction axis)."""
    from support import assert_close_to_golden

    torch.manual_seed(0)
    layer = torch.nn.Linear(features, out).to(dtype)
    x = torch.randn(rows, features, dtype=dtype)
    grad_out = torch.randn(rows, out, dtype=dtype)

    def step(
        run: Callable[[torch.Tensor], torch.Tensor], module: torch.nn.Module, xs: torch.Tensor, grad: torch.Tensor
    ):
        xs = xs.clone().requires_grad_(True)
        result = run(xs)
        result.backward(grad)
        return result.detach(), xs.grad, module.weight.grad, module.bias.grad

    golden_layer = copy.deepcopy(layer).double()
    golden = step(golden_layer, golden_layer, x.double(), grad_out.double())
    eager_layer = copy.deepcopy(layer)
    eager = step(eager_layer, eager_layer, x, grad_out)
    got = step(torch.compile(layer, backend="neuron-mlir"), layer, x, grad_out)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    for what, actual, eager_value, golden_value in zip(("output", "dX", "dW", "db"), got, eager, golden, strict=True):
        assert_close_to_golden(actual, eager_value, golden_value, what)


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("dtype", [BF16, F32], ids=["bf16", "f32"])
def test_linear_gradients_at_mlp_width(dtype: torch.dtype) -> None:
    """GPT-2's c_fc over 2048 tokens: several block rows share each operand kept whole on chip."""
    _linear_step_matches_golden(2048, 768, 3072, dtype)


@pytest.mark.usefixtures("fresh_compiler")
def test_linear_gradients_with_partial_tiles() -> None:
    """No size a multiple of a tile: the resident operands end in partial K tiles, the block rows in partial rows."""
    _linear_step_matches_golden(1100, 200, 700, F32)


class _Gpt2Mlp(torch.nn.Module):
    """GPT-2's MLP with its GELU spelled out as the model code writes it (`NewGELUActivation`)."""

    def __init__(self, width: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.c_fc = torch.nn.Linear(width, 4 * width, dtype=dtype)
        self.c_proj = torch.nn.Linear(4 * width, width, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import math

        h = self.c_fc(x)
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return self.c_proj(h)


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("dtype", [BF16, F32], ids=["bf16", "f32"])
def test_gpt2_mlp_trains_at_gpt2_width(dtype: torch.dtype) -> None:
    """512 tokens of d = 768: the spelled-out GELU is one gelu and one gelu_backward across the two graphs."""
    torch.manual_seed(0)
    _train_step_matches_eager(_Gpt2Mlp(768, dtype), torch.randn(1, 512, 768, dtype=dtype))
