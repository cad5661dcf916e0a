"""A small pre-norm transformer whose RMSNorm layers call the NKI RMSNorm kernel as a torch op.

`rms_norm_op` registers `normalization.rms_norm` with `neuron_mlir.as_torch_op`; its backward is written in torch
ops, so eager mode runs it with PyTorch and `torch.compile` compiles it with the rest of the backward graph. The
same model trains in eager (the kernel simulated on every call) and under `torch.compile(backend="neuron-mlir")`
(the kernel one node of the graph, run between the compiled regions as its own program) from the same initial
weights, and the losses of the two runs agree:

    python examples/kernels/nki_transformer.py                 # width 64, 2 layers, 4 steps
    python examples/kernels/nki_transformer.py --width 128 --layers 4 --steps 8
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import neuron_mlir
from kernels.normalization import rms_norm


def rms_norm_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
    """Gradients of x / rms(x) * weight: with n = x / rms(x) and g = grad * weight,
    dx = (g - n * mean(g * n)) / rms(x) and dweight = sum over rows of grad * n."""
    x, weight, _ = ctx.saved_tensors
    inverse_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx.scalars["eps"])
    normalised = x * inverse_rms
    scaled = grad * weight
    grad_x = inverse_rms * (scaled - normalised * (scaled * normalised).mean(-1, keepdim=True))
    return grad_x, (grad * normalised).sum(0), None


rms_norm_op = neuron_mlir.as_torch_op(
    rms_norm,
    name="nki_examples::rms_norm",
    out_shape=lambda x, weight, eps=1e-6: x.shape,
    backward=rms_norm_backward,
)


class NkiRMSNorm(nn.Module):
    """RMSNorm over the last axis by the NKI kernel, which takes [rows, width]: leading axes are flattened."""

    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm_op(x.reshape(-1, x.shape[-1]), self.weight, self.eps).reshape(x.shape)


class Block(nn.Module):
    """Causal self-attention and a SiLU MLP, each behind an RMSNorm and a residual connection."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention_norm = NkiRMSNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.projection = nn.Linear(width, width, bias=False)
        self.mlp_norm = NkiRMSNorm(width)
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).split(width, dim=-1)
        q, k, v = (t.reshape(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.projection(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.down(F.silu(self.up(self.mlp_norm(x))))


class TinyTransformer(nn.Module):
    def __init__(self, vocabulary: int, width: int, heads: int, layers: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.final_norm = NkiRMSNorm(width)
        self.head = nn.Linear(width, vocabulary, bias=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.final_norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def train(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]], learning_rate: float) -> list[float]:
    """SGD steps over `batches`; the loss of each step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    losses = []
    for tokens, targets in batches:
        optimizer.zero_grad()
        loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def make_run(
    width: int = 64, heads: int = 2, layers: int = 2, steps: int = 4, length: int = 16, batch: int = 2, seed: int = 0
) -> tuple[TinyTransformer, list[tuple[torch.Tensor, torch.Tensor]]]:
    """A model and its training batches, fixed by `seed`: next-token prediction on one batch of random token
    sequences, seen `steps` times, so that the loss falls as the model memorises it."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    vocabulary = 97
    model = TinyTransformer(vocabulary, width, heads, layers)
    sequence = torch.randint(0, vocabulary, (batch, length + 1), generator=generator)
    return model, [(sequence[:, :-1], sequence[:, 1:])] * steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    arguments = parser.parse_args()
    model, batches = make_run(arguments.width, arguments.heads, arguments.layers, arguments.steps, arguments.length)
    compiled_model = copy.deepcopy(model)
    eager_losses = train(model, batches, arguments.learning_rate)
    compiled_module = cast(nn.Module, torch.compile(compiled_model, backend="neuron-mlir"))
    compiled_losses = train(compiled_module, batches, arguments.learning_rate)
    stats = neuron_mlir.stats()
    for step, (eager, compiled) in enumerate(zip(eager_losses, compiled_losses, strict=True)):
        print(f"step {step}: loss eager {eager:.6f}  compiled {compiled:.6f}  difference {abs(eager - compiled):.2e}")
    print(f"graphs compiled: {stats['graphs_compiled']}, nodes run on the CPU: {stats['nodes_fallen_back']}")
    # the kernel's instructions are inlined into the compiled programs: its row in each program's profile
    for graph, profile in neuron_mlir.profiles().items():
        busy = profile.kernel_ns().get(rms_norm_op.name, 0.0)
        print(f"{graph}: {profile.total_us:.1f} us, of which the RMSNorm kernel keeps engines busy {busy / 1e3:.1f} us")


if __name__ == "__main__":
    main()
