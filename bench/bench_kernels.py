"""Quality of the generated code: simulated time on trn2 against the roofline, for the cases users care about.

    python bench/bench_kernels.py [--case softmax] [--target trn2] [--trace-dir traces/]

Each case is compiled with torch.compile(backend="neuron-mlir") on bf16 inputs (the precision the TensorE peak
and the memory-bound goals are stated for), run once on the simulator, and checked against eager PyTorch. The
table shows the simulated time, the roofline bound (max of the model's FLOPs, as `torch.utils.flop_counter`
counts them, at TensorE's bf16 peak, and the graphs' inputs and outputs at HBM bandwidth), their ratio, MFU, and
the goal of each case.

Inference cases run one forward graph:

    matmul 4096^3                  >= 90% of TensorE peak (MFU)
    fp8 _scaled_mm                 >= 80% of TensorE's fp8 peak (MFU at the fp8 rate)
    softmax / layer norm / chain   >= 70% of the roofline (64 MiB of bf16 data each)
    GPT-2 block (d=768, seq 512)   >= 70% of the roofline

Training cases (`backward` and `train` in their names) run a forward and a backward graph, with a fixed random
gradient for the output (or the loss's own, for a scalar loss): the time is the sum over both graphs, the FLOPs
are eager's forward and backward, and the HBM bound counts both graphs' inputs and outputs (what the forward
saves for the backward included). Every gradient is checked against a float64 run of the same function, within a
small multiple of eager bf16's own error (`golden_mismatch`).

    kernels and their backward     >= 60% of the roofline
    one real-width layer, training >= 40% of the roofline

The convolution cases (`conv ...`, `resnet ...`, `convnext ...`) are the strided convolutions of real-width
vision and speech models at their own shapes, each forward alone and as a training step, ResNet-50's max
pooling after its stem and two of its batch norms in training mode; all aim at 60% of the roofline.

The fp8 cases are `torch._scaled_mm` as float8 training's forward calls it (torchao's Float8Linear): e4m3
operands with per-tensor scales, the fp8 weight [N, K] read as its transpose (K contiguous), at 4096^3 (bf16 out)
and at a Llama-3.2-1B gate projection over 2048 tokens ([2048, 2048] x [8192, 2048]^T, fp32 out). Their compute
bound and MFU are at TensorE's fp8 rate; eager is the same product of the widened operands in fp32.

The autocast case is an fp32 Linear layer and its GELU (2048 tokens, 768 -> 3072) run inside
`torch.autocast("cpu", torch.bfloat16)`, its output widened back to fp32: Dynamo and AOTAutograd insert the casts
of the input, the weight, the bias and the output. Its goal is that those casts cost no HBM round trip of their
own: the case's simulated time within 5% of the same fp32 model compiled with `options={"auto_cast": "matmul"}`
(whose matmul reads the fp32 operands and rounds them to bf16 as its DMAs load them), the reference, compiled and
run after it (`of ref` is the reference's time over the case's). Below the row: the HBM bytes each moved and the
busy time per source line of both, so that a cast that got a loop nest of its own shows where.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import neuron_mlir
from neuron_mlir.frontend.tensors import to_numpy
from neuron_mlir.ir.semantics.compare import golden_mismatch
from neuron_mlir.tools import trace_picture

BF16 = torch.bfloat16
ROWS, COLUMNS = 8192, 4096  # 32 Mi elements: 64 MiB of bf16
TOKENS = 2048  # rows of the training kernels: batch x sequence of a real-width layer

Builder = Callable[[], tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]]


@dataclass(frozen=True)
class Case:
    build: Builder
    metric: str  # "mfu", "roofline", or "reference": the reference's simulated time over the case's
    goal: float
    training: bool = False
    reference: Builder | None = None  # the metric "reference"'s model, compiled with `reference_options`
    reference_options: tuple[tuple[str, object], ...] = ()
    peak: str = "bf16"  # the TensorE rate the compute bound and MFU are stated for ("fp8": fp8 operands)


class _FirstOutput(torch.nn.Module):
    """A transformers layer returning its hidden states as one tensor (layers return tuples in some versions)."""

    def __init__(self, layer: torch.nn.Module, **call_options: object) -> None:
        super().__init__()
        self.layer = layer
        self.call_options = call_options

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        out = self.layer(hidden, **self.call_options)
        return out[0] if isinstance(out, tuple) else out


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _gpt2_block(training: bool = False, tokens: int = 512) -> Builder:
    def build() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        _offline()
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block

        torch.manual_seed(0)
        config = GPT2Config(
            n_embd=768, n_head=12, n_positions=tokens, attn_implementation="sdpa",
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        )  # fmt: skip
        block = GPT2Block(config).to(BF16).train(training)
        return _FirstOutput(block), (torch.randn(1, tokens, 768, dtype=BF16, requires_grad=training),)

    return build


def _bert_layer() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    _offline()
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=768, num_attention_heads=12, intermediate_size=3072, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="sdpa",
    )  # fmt: skip
    return _FirstOutput(BertLayer(config).to(BF16)), (torch.randn(4, 128, 768, dtype=BF16, requires_grad=True),)


def _vit_layer() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    _offline()
    from transformers import ViTConfig
    from transformers.models.vit.modeling_vit import ViTLayer

    torch.manual_seed(0)
    config = ViTConfig(
        hidden_size=768, num_attention_heads=12, intermediate_size=3072, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="sdpa",
    )  # fmt: skip
    return _FirstOutput(ViTLayer(config).to(BF16)), (torch.randn(2, 197, 768, dtype=BF16, requires_grad=True),)


class _LlamaLayer(torch.nn.Module):
    """One Llama decoder layer with its rotary embedding, as LlamaModel calls it (causal, positions 0..s-1)."""

    def __init__(self, config: object) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(config)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(hidden.shape[1]).unsqueeze(0)
        out = self.layer(hidden, position_ids=positions, position_embeddings=self.rotary(hidden, positions))
        return out[0] if isinstance(out, tuple) else out


def _llama_layer() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    _offline()
    from transformers import LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        num_hidden_layers=1, max_position_embeddings=256, rope_theta=500000.0,
    )  # fmt: skip
    config._attn_implementation = "sdpa"
    return _LlamaLayer(config).to(BF16), (torch.randn(1, 256, 2048, dtype=BF16, requires_grad=True),)


def _rows(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=BF16, requires_grad=True)


def _layer_norm_backward() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    norm = torch.nn.LayerNorm(768, dtype=BF16)
    with torch.no_grad():  # parameters away from 1 and 0, so that their gradients matter
        norm.weight.normal_(1.0, 0.2)
        norm.bias.normal_(0.0, 0.2)
    return norm, (_rows(TOKENS, 768),)


class _RMSNorm(torch.nn.Module):
    """RMSNorm as Llama computes it: in fp32, scaled by the weight after the cast back."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(width, dtype=BF16) * 0.2 + 1.0)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        upcast = hidden.float()
        upcast = upcast * torch.rsqrt(upcast.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.weight * upcast.to(hidden.dtype)


class _Linear(torch.nn.Module):
    def __init__(self, inputs: int, outputs: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(inputs, outputs, dtype=BF16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def _embedding_backward() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return torch.nn.Embedding(30522, 768, dtype=BF16), (torch.randint(0, 30522, (512,)),)


def _cross_entropy() -> tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]:
    logits = torch.randn(1024, 50257, dtype=BF16, requires_grad=True)
    return (lambda x, target: torch.nn.functional.cross_entropy(x, target)), (logits, torch.randint(0, 50257, (1024,)))


def _attention() -> tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]:
    q, k, v = (_rows(1, 12, 512, 64) for _ in range(3))
    return (lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)), (q, k, v)


def _conv(
    module: torch.nn.Module, input_shape: tuple[int, ...]
) -> Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """A convolution of a real-width model at its own shape (bf16). A stem's input is the image, which takes no
    gradient; a later layer's input does."""

    def build() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        torch.manual_seed(0)
        image = input_shape[1] == 3
        return module.to(BF16), (torch.randn(*input_shape, dtype=BF16, requires_grad=not image),)

    return build


class _LinearGelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(768, 3072)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh")


class _Autocast(torch.nn.Module):
    """`module` run inside a `torch.autocast("cpu", torch.bfloat16)` region, its output widened back to fp32."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=BF16):
            return self.module(x).float()


def _linear_gelu_fp32() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """fp32 weights and inputs (the same ones on every call: the seed is set here)."""
    torch.manual_seed(0)
    return _LinearGelu().eval(), (torch.randn(TOKENS, 768),)


class _ScaledMatmul:
    """`torch._scaled_mm(a, weight.t(), scale_a, scale_b)` as float8 training's forward calls it. Its `eager` form,
    the reference, multiplies the widened operands in fp32 (exact products, fp32 sums, the scales after): PyTorch's
    CPU kernel for fp8 is a scalar loop (26 s for a 512^3 product), and computes the same within fp32 rounding."""

    def __init__(self, out_dtype: torch.dtype) -> None:
        self.out_dtype = out_dtype

    def __call__(self, a: torch.Tensor, weight: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor):
        return torch._scaled_mm(a, weight.t(), scale_a, scale_b, out_dtype=self.out_dtype)

    def eager(self, a: torch.Tensor, weight: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor):
        return ((a.float() @ weight.float().t()) * scale_a * scale_b).to(self.out_dtype)


def _scaled_mm(m: int, k: int, n: int, out_dtype: torch.dtype) -> Builder:
    """e4m3 operands with per-tensor scales: a [m, k] row-major and a Linear layer's fp8 weight [n, k] read as its
    transpose (K contiguous), out in `out_dtype`."""

    def build() -> tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]:
        a = torch.randn(m, k).clamp(-4, 4).mul(100).to(torch.float8_e4m3fn)
        weight = torch.randn(n, k).clamp(-4, 4).mul(100).to(torch.float8_e4m3fn)
        scale_a, scale_b = torch.tensor(1 / 100), torch.tensor(1 / (100 * k**0.5))
        return _ScaledMatmul(out_dtype), (a, weight, scale_a, scale_b)

    return build


def _linear_gelu_autocast() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    module, inputs = _linear_gelu_fp32()
    return _Autocast(module).eval(), inputs


# The strided convolutions of real-width vision and speech models: ViT-B/16's patch embedding, whisper-small's
# second conv, ResNet-50's stem and downsampling convs, ConvNeXt-T's stem and downsampling layer.
CONVOLUTIONS: dict[str, tuple[Callable[[], torch.nn.Module], tuple[int, ...]]] = {
    "conv patch embed 16x16 s16 3->768": (lambda: torch.nn.Conv2d(3, 768, 16, 16), (2, 3, 224, 224)),
    "conv1d stride 2 768 x3000": (lambda: torch.nn.Conv1d(768, 768, 3, stride=2, padding=1), (1, 768, 3000)),
    "resnet stem 7x7 s2 3->64": (lambda: torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False), (2, 3, 224, 224)),
    "resnet 3x3 s2 256 28x28": (lambda: torch.nn.Conv2d(256, 256, 3, 2, 1, bias=False), (2, 256, 28, 28)),
    "resnet 1x1 s2 512->1024": (lambda: torch.nn.Conv2d(512, 1024, 1, 2, bias=False), (2, 512, 28, 28)),
    "convnext stem 4x4 s4 3->96": (lambda: torch.nn.Conv2d(3, 96, 4, 4), (2, 3, 224, 224)),
    "convnext down 2x2 s2 96->192": (lambda: torch.nn.Conv2d(96, 192, 2, 2), (2, 96, 56, 56)),
    # not a convolution, but the layer between ResNet-50's stem and its first stage, at the same batch
    "resnet max pool 3x3 s2 64 112x112": (lambda: torch.nn.MaxPool2d(3, 2, 1), (2, 64, 112, 112)),
    # nor these: the batch norms after ResNet-50's stem and after its first stage's convolutions (batch statistics)
    "resnet batch norm 64 112x112": (lambda: torch.nn.BatchNorm2d(64), (2, 64, 112, 112)),
    "resnet batch norm 256 56x56": (lambda: torch.nn.BatchNorm2d(256), (2, 256, 56, 56)),
}


CASES: dict[str, Case] = {
    "matmul 4096x4096x4096": Case(
        lambda: (lambda a, b: a @ b, (torch.randn(4096, 4096, dtype=BF16), torch.randn(4096, 4096, dtype=BF16))),
        "mfu",
        0.90,
    ),
    "fp8 _scaled_mm 4096x4096x4096 bf16": Case(_scaled_mm(4096, 4096, 4096, BF16), "mfu", 0.80, peak="fp8"),
    "fp8 _scaled_mm 2048x2048->8192 fp32": Case(_scaled_mm(TOKENS, 2048, 8192, torch.float32), "mfu", 0.80, peak="fp8"),
    "softmax 8192x4096": Case(
        lambda: (lambda x: torch.softmax(x, -1), (torch.randn(ROWS, COLUMNS, dtype=BF16),)), "roofline", 0.70
    ),
    "layer norm 8192x4096": Case(
        lambda: (lambda x: torch.nn.functional.layer_norm(x, (COLUMNS,)), (torch.randn(ROWS, COLUMNS, dtype=BF16),)),
        "roofline",
        0.70,
    ),
    "gelu(2x + 1) * x 8192x4096": Case(
        lambda: (lambda x: torch.nn.functional.gelu(x * 2.0 + 1.0) * x, (torch.randn(ROWS, COLUMNS, dtype=BF16),)),
        "roofline",
        0.70,
    ),
    "GPT-2 block d=768 seq 512": Case(_gpt2_block(), "roofline", 0.70),
    "layer norm backward 2048x768": Case(_layer_norm_backward, "roofline", 0.60, training=True),
    "RMSNorm backward 2048x2048": Case(lambda: (_RMSNorm(2048), (_rows(TOKENS, 2048),)), "roofline", 0.60, True),
    "softmax backward 12x512x512": Case(
        lambda: (lambda x: torch.softmax(x, -1), (_rows(12, 512, 512),)), "roofline", 0.60, True
    ),
    "attention backward 12x512x64 causal": Case(_attention, "roofline", 0.60, True),
    "GELU backward 2048x3072": Case(lambda: (torch.nn.functional.gelu, (_rows(TOKENS, 3072),)), "roofline", 0.60, True),
    "SiLU backward 2048x3072": Case(lambda: (torch.nn.functional.silu, (_rows(TOKENS, 3072),)), "roofline", 0.60, True),
    "linear backward 2048x768->3072": Case(lambda: (_Linear(768, 3072), (_rows(TOKENS, 768),)), "roofline", 0.60, True),
    "embedding backward 30522x768 512": Case(_embedding_backward, "roofline", 0.60, True),
    "cross-entropy backward 1024x50257": Case(_cross_entropy, "roofline", 0.60, True),
    "BERT-base layer train 4x128": Case(_bert_layer, "roofline", 0.40, True),
    "GPT-2 block train 1x512": Case(_gpt2_block(training=True), "roofline", 0.40, True),
    "Llama-3.2-1B layer train 1x256": Case(_llama_layer, "roofline", 0.40, True),
    "ViT-B/16 layer train 2x197": Case(_vit_layer, "roofline", 0.40, True),
    "autocast linear+GELU 2048x768->3072": Case(
        _linear_gelu_autocast,
        "reference",
        0.95,
        reference=_linear_gelu_fp32,
        reference_options=(("auto_cast", "matmul"),),
    ),
    **{
        f"{name}{' train' if training else ''}": Case(_conv(module(), shape), "roofline", 0.60, training)
        for name, (module, shape) in CONVOLUTIONS.items()
        for training in (False, True)
    },
}


def _leaves(function: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    """The tensors that receive gradients: floating inputs that ask for them, then the module's parameters."""
    parameters = list(function.parameters()) if isinstance(function, torch.nn.Module) else []
    return [t for t in inputs if t.requires_grad] + [p for p in parameters if p.requires_grad]


def _train_step(
    function: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], seed: int = 1
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The output and the leaves' gradients of one forward and backward, with a fixed random output gradient."""
    for leaf in _leaves(function, inputs):
        leaf.grad = None
    output = function(*inputs)
    if output.dim() == 0:
        output.backward()
    else:
        generator = torch.Generator().manual_seed(seed)
        output.backward(torch.randn(output.shape, generator=generator).to(output.dtype))
    gradients = []
    for leaf in _leaves(function, inputs):
        assert leaf.grad is not None, "every leaf takes part in the output"
        gradients.append(leaf.grad)
    return output.detach(), gradients


def _as_float64(function: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]):
    """A float64 copy of a case (the golden run the gradients are judged against)."""

    def widen(tensor: torch.Tensor) -> torch.Tensor:
        if not tensor.is_floating_point():
            return tensor
        return tensor.detach().double().requires_grad_(tensor.requires_grad)

    wide = copy.deepcopy(function).double() if isinstance(function, torch.nn.Module) else function
    return wide, tuple(widen(t) for t in inputs)


def _measure_training(
    function: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], options: dict[str, Any]
) -> tuple[float, str | None]:
    """Run a training case compiled, in eager bf16 and in float64: the eager FLOPs and the first mismatch."""
    reference = copy.deepcopy(function) if isinstance(function, torch.nn.Module) else function
    reference_inputs = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
    golden_function, golden_inputs = _as_float64(function, inputs)
    compiled = torch.compile(function, backend="neuron-mlir", options=options)
    output, gradients = _train_step(compiled, inputs)
    with FlopCounterMode(display=False) as counter, sdpa_kernel([SDPBackend.MATH]):
        eager_output, eager_gradients = _train_step(reference, reference_inputs)
    with sdpa_kernel([SDPBackend.MATH]):
        golden_output, golden_gradients = _train_step(golden_function, golden_inputs)
    names = ["output"] + [f"gradient {i}" for i in range(len(gradients))]
    for name, ours, eager, golden in zip(
        names, [output, *gradients], [eager_output, *eager_gradients], [golden_output, *golden_gradients], strict=True
    ):
        problem = golden_mismatch(to_numpy(ours.float()), to_numpy(eager.float()), to_numpy(golden))
        if problem is not None:
            return counter.get_total_flops(), f"{name}: {problem}"
    return counter.get_total_flops(), None


def _measure_inference(
    function: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], options: dict[str, Any]
) -> tuple[float, str | None]:
    compiled = torch.compile(function, backend="neuron-mlir", options=options)
    with torch.no_grad():
        result = compiled(*inputs)
    # One eager run gives both the reference and the model's FLOPs (as PyTorch counts them, not the executed
    # ones: identity matmuls that add a causal bias in PSUM, or any other work the compiler adds, must not
    # raise the bound or the MFU). Attention goes through the math path, as the counter knows no CPU flash
    # kernel. A single run matters: eager bf16 matmuls have no fast CPU kernel (4096^3 takes minutes).
    eager = getattr(function, "eager", function)  # a case's own eager form, where PyTorch's CPU kernel crawls
    with FlopCounterMode(display=False) as counter, torch.no_grad(), sdpa_kernel([SDPBackend.MATH]):
        expected = eager(*inputs)
    torch.testing.assert_close(result.float(), expected.float(), rtol=3e-2, atol=3e-2)
    return counter.get_total_flops(), None


GOAL_UNITS = {"mfu": "MFU", "roofline": "roof", "reference": "of ref"}


def _reference_profiles(case: Case, options: dict[str, Any]) -> list[Any]:
    """The profiles of the case's reference model, compiled with its options and run once (inference)."""
    assert case.reference is not None, "a case measured against a reference names one"
    torch._dynamo.reset()
    neuron_mlir.reset()
    function, inputs = case.reference()
    reference_options: dict[str, Any] = {**options, **dict(case.reference_options)}
    compiled = torch.compile(function, backend="neuron-mlir", options=reference_options)
    with torch.no_grad():
        compiled(*inputs)
    return list(neuron_mlir.profiles().values())


def _reference_lines(profiles: list[Any], reference: list[Any], options: dict[str, object]) -> str:
    """The HBM traffic of the case and of its reference, and their busy time per source line (summed over the
    engines and queues), longest first: where the case's extra time goes."""
    spelled = ", ".join(f"{key}={value!r}" for key, value in options.items())
    lines = []
    for label, run in (("case", profiles), (f"reference ({spelled})", reference)):
        total = sum(p.total_ns for p in run) / 1e3
        hbm = sum(p.hbm_bytes for p in run) / 2**20
        lines.append(f"  {label}: {total:.1f} us, {hbm:.1f} MiB of HBM traffic; busy time per source line:")
        busy: dict[str, float] = {}
        for profile in run:
            for location, ns in profile.location_ns.items():
                busy[location] = busy.get(location, 0.0) + ns
        for location, ns in sorted(busy.items(), key=lambda item: -item[1]):
            lines.append(f"    {ns / 1e3:10.1f} us  {Path(location).name if '/' in location else location}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="", help="run the cases whose name contains this text")
    parser.add_argument("--target", default="trn2")
    parser.add_argument("--trace-dir", help="write each case's Chrome trace there, and its SVG timeline picture")
    args = parser.parse_args()
    header = (
        f"{'case':<36} {'simulated us':>13} {'roofline us':>12} {'of roofline':>11} {'MFU':>6} {'goal':>12} "
        f"{'met':>4} {'compile s':>9} {'sim wall s':>10}"
    )
    print(header)
    print("-" * len(header))
    failures = 0
    for name, case in CASES.items():
        if args.case not in name:
            continue
        torch._dynamo.reset()
        neuron_mlir.reset()
        torch.manual_seed(0)
        function, inputs = case.build()
        options = {"target": args.target, "check_races": False, "cache": False}
        started = time.perf_counter()
        measure = _measure_training if case.training else _measure_inference
        flops, problem = measure(function, inputs, options)
        wall = time.perf_counter() - started
        stats = neuron_mlir.stats()
        profiles = list(neuron_mlir.profiles().values())
        total = sum(p.total_ns for p in profiles)
        peak = profiles[0].peak_flops_by_family[case.peak] if profiles else 1.0
        compute = flops / peak * 1e9
        roofline = max(compute, sum(p.hbm_bound_ns for p in profiles))
        mfu = compute / total if total else 0.0
        achieved = mfu if case.metric == "mfu" else roofline / total
        reference: list[Any] = []
        if case.metric == "reference":
            reference = _reference_profiles(case, options)
            achieved = sum(p.total_ns for p in reference) / total
        met = achieved >= case.goal and not stats["fallback_ops"] and problem is None
        failures += not met
        goal_text = f">= {case.goal:.0%} {GOAL_UNITS[case.metric]}"
        print(
            f"{name:<36} {total / 1e3:>13.1f} {roofline / 1e3:>12.1f} {roofline / total:>10.1%} {mfu:>6.1%} "
            f"{goal_text:>12} {'yes' if met else 'no':>4} {stats['compile_seconds']:>9.2f} "
            f"{wall - stats['compile_seconds']:>10.2f}",
            flush=True,
        )
        if len(profiles) > 1:
            times = (f"{graph}: {p.total_ns / 1e3:.1f} us" for graph, p in neuron_mlir.profiles().items())
            print("  " + ", ".join(times))
        if reference:
            print(_reference_lines(profiles, reference, dict(case.reference_options)))
        if stats["fallback_ops"]:
            print(f"  fell back to the CPU: {stats['fallback_ops']}")
        if problem is not None:
            print(f"  wrong result: {problem}")
        if args.trace_dir:
            Path(args.trace_dir).mkdir(parents=True, exist_ok=True)
            stem = Path(args.trace_dir) / re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
            neuron_mlir.write_trace(str(stem.with_suffix(".json")))
            trace_picture.main([str(stem.with_suffix(".json")), str(stem.with_suffix(".svg")), "--title", name])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
