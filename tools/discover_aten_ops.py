"""Find the ATen overloads that real graphs hand to a backend after core-ATen decomposition.

Compiles a handful of small models with `torch.compile` through AOTAutograd with
`torch._decomp.core_aten_decompositions()`, forward and backward, and records every `call_function` target of
the graphs it receives. The non-core ones are what the torch dialect must offer beyond `torch.Tag.core`
(`EXTRA_OVERLOADS` in `tools/gen_torch_dialect.py` is this script's output, curated).

    python -m neuron_mlir.tools.discover_aten_ops            # table of non-core overloads and the models using them
    python -m neuron_mlir.tools.discover_aten_ops --all      # every overload seen

Runs on CPU in about a minute. Like the generator, this is a developer tool and imports torch freely.
"""

from __future__ import annotations

import argparse
import operator
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

GraphHook = Callable[[torch.fx.GraphModule, list[Any], str], None]
"""Called with each forward/backward graph, its first real inputs and the model tag."""


def _aot_recording_backend(
    seen: dict[str, set[str]],
    model_name: str,
    decompositions: dict[Any, Callable[..., Any]],
    on_graph: GraphHook | None = None,
) -> Callable[..., Any]:
    """A torch.compile backend that records the ATen targets of the forward and backward graphs."""
    from torch._functorch.aot_autograd import aot_module_simplified

    def record(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is not operator.getitem:
                seen[str(node.target)].add(model_name)
        pending = [on_graph]

        def run(args: list[Any]) -> Any:
            if (hook := pending.pop() if pending else None) is not None:
                hook(gm, list(args), model_name)
            return gm(*args)

        run._boxed_call = True  # type: ignore[attr-defined]  # AOTAutograd's calling convention reads the flag
        return run

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=record, bw_compiler=record, decompositions=decompositions
        )

    return backend


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.net(x), torch.arange(x.shape[0]) % 10)


class _Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(0.1),
            nn.Conv2d(8, 8, 3, stride=2, groups=2),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1)).log_softmax(-1).mean()


class _Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x).sum()


class _EmbeddingLayerNormGelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.norm = nn.LayerNorm(16)
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = (x.abs() * 10).long() % 50
        return F.gelu(self.proj(self.norm(self.embed(tokens[:, :4])))).pow(2).mean()


class _Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 8, batch_first=True)
        self.gru = nn.GRU(8, 8, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        out, _ = self.gru(out)
        return out.sum()


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum()


class _WeightNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.utils.parametrizations.weight_norm(nn.Linear(16, 8))
        self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(16, 4, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).tanh().sum() + self.conv(x.transpose(1, 2)).sum()


class _MoeRouting(nn.Module):
    """Dense top-2 expert routing with per-expert token counts, as small MoE layers write it."""

    def __init__(self) -> None:
        super().__init__()
        self.router = nn.Linear(16, 4)
        self.experts = nn.Parameter(torch.randn(4, 16, 16) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(-1, 16)
        weights, experts = torch.topk(self.router(tokens).softmax(-1), 2, dim=-1)
        counts = torch.histc(experts.float(), bins=4, min=0, max=3)
        every_expert = torch.einsum("td,edh->teh", tokens, self.experts)
        picked = every_expert.gather(1, experts[..., None].expand(-1, -1, 16))
        mixed = (picked * weights[..., None]).sum(1)
        staging = torch.empty_like(mixed.t()).t()
        staging.copy_(mixed)
        return staging.sum() + counts.max() * 0


class _ConstantsAndActivations(nn.Module):
    """Tensor constants built in forward, detach, masked_fill and a few activations and losses."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor([1.0, 2.0])
        y = x @ self.weight.t()
        y = (y.detach() + y).masked_fill(y > 3, 0.0)
        y = F.silu(y) + F.softplus(y) + F.hardswish(y) + F.mish(y)
        return F.mse_loss(y, torch.zeros_like(y)) * scale.sum()


MODELS: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "mlp": lambda: (_Mlp(), torch.randn(8, 16)),
    "cnn": lambda: (_Cnn(), torch.randn(2, 3, 16, 16)),
    "transformer": lambda: (_Transformer(), torch.randn(2, 5, 16)),
    "embedding_layernorm_gelu": lambda: (_EmbeddingLayerNormGelu(), torch.randn(2, 6)),
    "lstm_gru": lambda: (_Recurrent(), torch.randn(2, 5, 16)),
    "sdpa": lambda: (_Attention(), torch.randn(2, 5, 16)),
    "weight_norm": lambda: (_WeightNorm(), torch.randn(2, 5, 16)),
    "moe_routing": lambda: (_MoeRouting(), torch.randn(2, 5, 16)),
    "constants": lambda: (_ConstantsAndActivations(), torch.randn(2, 4, 16)),
}


@contextmanager
def _fresh_dynamo() -> Iterator[None]:
    """A clean Dynamo cache, and RNN modules traced rather than run eagerly behind a graph break."""
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(allow_rnn=True):
            yield
    finally:
        torch._dynamo.reset()


def discover(drop_flash_attention_decomposition: bool = True, on_graph: GraphHook | None = None) -> dict[str, set[str]]:
    """Overload name (`aten.add.Tensor`) -> the models (and mode) whose forward or backward graph used it.

    Each model runs twice: in train mode with `loss.backward()` (forward and backward graphs), and in eval mode
    under `torch.no_grad()` (the inference graph, where e.g. LSTM stays the fused `mkldnn_rnn_layer`).

    The frontend drops core-ATen's decomposition of the CPU flash-attention op (it is wrong for training: see
    `frontend.backend.decompositions`), so by default discovery does too and sees the fused attention pair.
    `on_graph` is called once per graph with its first real inputs (the example inputs at compile time are fake).
    """
    from torch._decomp import core_aten_decompositions

    decompositions = dict(core_aten_decompositions())
    if drop_flash_attention_decomposition:
        decompositions.pop(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default, None)
    seen: dict[str, set[str]] = defaultdict(set)
    for name, make in MODELS.items():
        for training in (True, False):
            torch.manual_seed(0)
            model, x = make()
            model.train(training)
            tag = f"{name} ({'train' if training else 'eval'})"
            with _fresh_dynamo(), torch.set_grad_enabled(training):
                backend = _aot_recording_backend(seen, tag, decompositions, on_graph)
                compiled = torch.compile(model, backend=backend)
                loss = compiled(x.requires_grad_(training))
                if training:
                    loss.backward()
    return seen


def is_core(overload_name: str) -> bool:
    """Whether `aten.add.Tensor` is tagged `torch.Tag.core`."""
    _, packet, overload = overload_name.split(".", 2)
    return torch.Tag.core in getattr(getattr(torch.ops.aten, packet), overload).tags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list core overloads too")
    parser.add_argument(
        "--keep-flash-attention-decomposition",
        action="store_true",
        help="use core_aten_decompositions() unchanged",
    )
    options = parser.parse_args()
    seen = discover(drop_flash_attention_decomposition=not options.keep_flash_attention_decomposition)
    for name in sorted(seen):
        if not name.startswith("aten."):
            print(f"{name:60s} (not ATen) {', '.join(sorted(seen[name]))}")
        elif options.all or not is_core(name):
            tag = "core" if is_core(name) else "extra"
            print(f"{name:60s} {tag:5s} {', '.join(sorted(seen[name]))}")


if __name__ == "__main__":
    main()
