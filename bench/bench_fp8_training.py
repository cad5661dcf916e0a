"""fp8 training with torchao against bf16 and fp32: loss after N steps and the simulated step time.

    python bench/bench_fp8_training.py                        # the zoo's Llama and GPT-2, 50 steps each
    python bench/bench_fp8_training.py --steps 0 --models llama-1b-layer gpt2-small   # one step, real widths
    python bench/bench_fp8_training.py --steps 0 --models llama-1b-layer --tokens 4096  # more tokens per step

Each model is trained from the same initial fp32 weights on one fixed batch (next-token cross entropy, AdamW with
lr 1e-3, the optimizer eager on the host) three ways, each compiled with torch.compile(backend="neuron-mlir",
strict) for `--target`:

    fp32   the model as it is (`auto_cast` "none")
    bf16   `auto_cast="matmul"`: matmuls multiply bf16 roundings of their operands, fp32 elsewhere
    fp8    torchao's `convert_to_float8_training` on every nn.Linear (GPT-2's transformers Conv1D layers are first
           replaced by the equivalent nn.Linear): matmuls multiply fp8 operands with dynamic per-tensor scales
           (e4m3 inputs and weights, e5m2 gradients), fp32 elsewhere

The simulated step time is the forward and backward graphs' time (the sum of their latest profiles; the
optimizer is not compiled). The loss difference compares fp8 with bf16 at the last step, relative to bf16's loss
(the goal: within 1%). With `--steps 0` only one step is run and timed (the real-width models, whose 50 steps
would take hours to simulate on a loaded machine).

Models: `llama` and `gpt2` are examples/models/zoo.py's (widths 32); `llama-1b-layer` and `gpt2-small` are
examples/models/real_width.py's (published widths, one and two layers). `--tokens N` replaces a model's batch by N
random tokens: one sequence of N tokens, or N / L sequences of the model's largest length L (GPT-2's 1024) when N
exceeds it.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import neuron_mlir

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

PRECISIONS = ("fp32", "bf16", "fp8")


def _model(name: str, tokens_per_step: int = 0) -> tuple[torch.nn.Module, torch.Tensor]:
    from models import zoo
    from models.real_width import gpt2_small, llama_1b_layer

    builders: dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]] = {
        "llama": zoo.llama,
        "gpt2": zoo.gpt2,
        "llama-1b-layer": llama_1b_layer,
        "gpt2-small": gpt2_small,
    }
    model, (tokens,) = builders[name]()
    if tokens_per_step:
        tokens = _batch(model, tokens_per_step)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model, tokens


def _batch(model: torch.nn.Module, tokens_per_step: int) -> torch.Tensor:
    """A batch of `tokens_per_step` random tokens: one sequence, or as many sequences of the model's largest
    length as it takes."""
    config: Any = model.config  # a transformers config
    longest = int(getattr(config, "n_positions", None) or config.max_position_embeddings)
    length = min(tokens_per_step, longest)
    if tokens_per_step % length:
        raise SystemExit(f"--tokens {tokens_per_step}: not a multiple of the model's sequence length {length}")
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, int(config.vocab_size), (tokens_per_step // length, length), generator=generator)


def linear_layers_for_conv1d(model: torch.nn.Module) -> torch.nn.Module:
    """transformers' GPT-2 Conv1D layers (y = x @ W + b, W stored [in, out]) as the equivalent nn.Linear."""
    from transformers.pytorch_utils import Conv1D

    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, Conv1D):
                fan_in, fan_out = child.weight.shape
                linear = torch.nn.Linear(fan_in, fan_out)
                with torch.no_grad():
                    linear.weight.copy_(child.weight.t())
                    linear.bias.copy_(child.bias)
                setattr(parent, child_name, linear)
    return model


def _variant(model: torch.nn.Module, precision: str) -> tuple[torch.nn.Module, dict[str, Any]]:
    """A copy of `model` prepared for `precision`, and the compile options."""
    trained = copy.deepcopy(model)
    if precision == "fp8":
        from torchao.float8 import convert_to_float8_training

        convert_to_float8_training(linear_layers_for_conv1d(trained))
    return trained, {"auto_cast": "matmul" if precision == "bf16" else "none"}


def train(
    name: str, precision: str, steps: int, target: str, tokens_per_step: int = 0, summaries: bool = False
) -> dict[str, Any]:
    """Losses per step and the simulated time of the last step."""
    model, tokens = _model(name, tokens_per_step)
    torch.manual_seed(0)
    trained, options = _variant(model, precision)
    trained.train()
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(
        trained, backend="neuron-mlir", options={**options, "target": target, "strict": True, "check_races": False}
    )
    optimizer = torch.optim.AdamW(trained.parameters(), lr=1e-3)
    losses: list[float] = []
    started = time.perf_counter()
    for _ in range(max(steps, 1)):
        optimizer.zero_grad()
        logits = compiled(tokens)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    profiles = neuron_mlir.profiles()
    if summaries:
        for graph, profile in profiles.items():
            print(f"{name} {precision}, {graph}:\n{profile.summary(top_locations=15)}\n", file=sys.stderr)
    step_ns = sum(profile.total_ns for profile in profiles.values())
    families: dict[str, int] = {}
    for profile in profiles.values():
        for family, flops in profile.flops_by_family.items():
            families[family] = families.get(family, 0) + flops
    total = sum(families.values()) or 1
    return {
        "losses": losses,
        "step_us": step_ns / 1000,
        "fp8_share": families.get("fp8", 0) / total,
        "wall_s": time.perf_counter() - started,
        "batch": tuple(tokens.shape),
    }


def table(rows: dict[tuple[str, str], dict[str, Any]], models: list[str], steps: int, target: str) -> str:
    lines = [
        f"Training, {target}, one fixed batch, AdamW lr 1e-3" + (f", {steps} steps" if steps else ", one step"),
        "",
        "| model | precision | final loss | vs bf16 | simulated step | vs fp32 | fp8 share of matmul FLOPs |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in models:
        base_loss = rows[(name, "bf16")]["losses"][-1]
        base_time = rows[(name, "fp32")]["step_us"]
        for precision in PRECISIONS:
            row = rows[(name, precision)]
            loss = row["losses"][-1]
            loss_text = f"{loss:.4f}" if steps else "-"
            difference = f"{(loss - base_loss) / base_loss:+.2%}" if steps else "-"
            lines.append(
                f"| {name} | {precision} | {loss_text} | {difference} | {row['step_us']:.1f} us | "
                f"{base_time / row['step_us']:.2f}x | {row['fp8_share']:.0%} |"
            )
    return "\n".join(lines)


def curves(rows: dict[tuple[str, str], dict[str, Any]], models: list[str]) -> str:
    parts = []
    for name in models:
        steps = len(rows[(name, "fp32")]["losses"])
        every = max(1, steps // 10)
        lines = [f"{name}: loss per step", "", "| step | fp32 | bf16 | fp8 |", "|---:|---:|---:|---:|"]
        for step in range(1, steps + 1):
            if step == 1 or step % every == 0 or step == steps:
                values = " | ".join(f"{rows[(name, p)]['losses'][step - 1]:.4f}" for p in PRECISIONS)
                lines.append(f"| {step} | {values} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["llama", "gpt2"])
    parser.add_argument("--steps", type=int, default=50, help="training steps (0: one step, timed only)")
    parser.add_argument("--target", default="trn2")
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--summaries", action="store_true", help="print each graph's profile summary")
    parser.add_argument(
        "--tokens",
        type=int,
        default=0,
        help="tokens per step (default: the model's own batch); one sequence, or "
        "sequences of the model's largest length",
    )
    args = parser.parse_args()
    os.environ.setdefault("NEURON_MLIR_CACHE_DIR", "off")
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for name in args.models:
        for precision in args.precisions:
            rows[(name, precision)] = train(name, precision, args.steps, args.target, args.tokens, args.summaries)
            row = rows[(name, precision)]
            print(
                f"{name} {precision} ({' x '.join(map(str, row['batch']))} tokens): {row['step_us']:.1f} us/step, "
                f"final loss {row['losses'][-1]:.4f}, "
                f"{row['wall_s']:.0f} s",
                file=sys.stderr,
            )
    if set(args.precisions) != set(PRECISIONS):
        return  # the table compares all three
    print(table(rows, args.models, args.steps, args.target))
    if args.steps:
        print("\n" + curves(rows, args.models))


if __name__ == "__main__":
    main()
