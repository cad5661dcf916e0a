"""What the `auto_cast` option buys: simulated time of fp32 models compiled with "none", "matmul" and "all".

    python bench/bench_auto_cast.py                          # the zoo's GPT-2 and BERT, and the Linear + GELU case
    python bench/bench_auto_cast.py --models gpt2-small bert-base --training

Each model runs in fp32, compiled with torch.compile(backend="neuron-mlir", options={"auto_cast": mode}) for
`--target` (the compile cache off), once per mode: inference (no_grad) by default, with `--training` one
training step (forward, the loss sum(output * R) with a fixed random R, backward), whose simulated time is the sum
over the forward and backward graphs. The table shows per model and mode the simulated time (the sum over the
latest profile of every graph), the speed-up over "none", the share of matmul FLOPs TensorE ran in bf16, and the
largest error against eager fp32 relative to the output's largest magnitude (the gradients' too with
`--training`), beside eager bf16 autocast's (`torch.autocast("cpu", torch.bfloat16)`) for scale.

With `--train-steps N`, each model (a language model: `gpt2`, `gpt2-small`) is instead trained for N steps of
AdamW on one fixed batch (next-token cross entropy) three ways from the same initial weights: compiled with
auto_cast="matmul", eager fp32, and eager under `torch.autocast("cpu", torch.bfloat16)`; the table shows the
three loss curves side by side.

Models: `gpt2` and `bert` are examples/models/zoo.py's (tiny widths); `gpt2-small` and `bert-base` are
examples/models/real_width.py's (published widths, two layers). `linear-gelu` is one Linear layer and its GELU
over 2048 x 768 -> 3072 tokens, also compiled two more ways: as a `torch.autocast("cpu", torch.bfloat16)` region
(Dynamo and AOTAutograd insert the casts) and as a bf16 model (inputs and weights bf16), the bound auto-casting
can approach.
"""

from __future__ import annotations

import argparse
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

MODES = ("none", "matmul", "all")
BF16 = torch.bfloat16


def _model(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from models import zoo
    from models.real_width import bert_base, gpt2_small

    builders: dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]] = {
        "gpt2": zoo.gpt2,
        "bert": zoo.bert,
        "gpt2-small": gpt2_small,
        "bert-base": bert_base,
        "linear-gelu": _linear_gelu,
    }
    return builders[name]()


class LinearGelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(768, 3072)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x), approximate="tanh")


class Autocast(torch.nn.Module):
    """`module` run inside a `torch.autocast("cpu", torch.bfloat16)` region, its output widened to fp32."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=BF16):
            return self.module(*inputs).float()


def _linear_gelu() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return LinearGelu().eval(), (torch.randn(2048, 768),)


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    expected = expected.double()
    return float((actual.double() - expected).abs().max() / expected.abs().max().clamp_min(1e-30))


def _step(model: torch.nn.Module, run: Any, inputs: tuple[torch.Tensor, ...], training: bool) -> list[torch.Tensor]:
    """The output (and with `training` every parameter's gradient) of one call of `run`."""
    if not training:
        with torch.no_grad():
            return [run(*inputs).float()]
    model.zero_grad()
    output = run(*inputs)
    weights = torch.randn(output.shape, generator=torch.Generator().manual_seed(1))
    (output.float() * weights).sum().backward()
    return [output.detach().float()] + [p.grad.float().clone() for p in model.parameters() if p.grad is not None]


def measure(
    name: str, mode: str, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], args: argparse.Namespace
) -> dict[str, Any]:
    """Compile and run `model` once with `mode` ("none", "matmul", "all", or "autocast"/"bf16" for the Linear
    layer's other spellings); the simulated time, the bf16 share of matmul FLOPs and the results."""
    torch._dynamo.reset()
    neuron_mlir.reset()
    options = {"auto_cast": mode if mode in MODES else "none", "target": args.target, "check_races": False}
    compiled = torch.compile(model, backend="neuron-mlir", options=options)
    started = time.perf_counter()
    results = _step(model, compiled, inputs, args.training)
    wall = time.perf_counter() - started
    profiles = list(neuron_mlir.profiles().values())
    flops = {family: sum(p.flops_by_family.get(family, 0) for p in profiles) for family in ("bf16", "fp32")}
    return {
        "model": name,
        "mode": mode,
        "simulated_us": sum(p.total_ns for p in profiles) / 1e3,
        "bf16_share": flops["bf16"] / max(1, sum(flops.values())),
        "fallback": neuron_mlir.stats()["nodes_fallen_back"],
        "wall_s": wall,
        "results": results,
    }


def bench(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    model, inputs = _model(name)
    if args.training:
        model.train()
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    eager = _step(model, model, inputs, args.training)
    autocast = _step(model, Autocast(model), inputs, args.training)
    rows = [measure(name, mode, model, inputs, args) for mode in MODES]
    if name == "linear-gelu":
        rows.append(measure(name, "autocast", Autocast(model), inputs, args))
        bf16_model = LinearGelu()
        bf16_model.load_state_dict(model.state_dict())
        bf16_model = bf16_model.to(BF16).train(args.training)
        row = measure(name, "bf16", bf16_model, tuple(x.to(BF16) for x in inputs), args)
        row["results"] = row["results"][:1]  # the gradients of a bf16 model are its own parameters'
        rows.append(row)
    for row in rows:
        row["error"] = max(_relative_error(a, e) for a, e in zip(row["results"], eager, strict=False))
        row["autocast_error"] = max(_relative_error(a, e) for a, e in zip(autocast, eager, strict=True))
    return rows


def train(name: str, steps: int, args: argparse.Namespace) -> list[tuple[float, float, float]]:
    """Per step, the loss of training `name` compiled with auto_cast="matmul", in eager fp32 and under eager bf16
    autocast (the same initial weights and batch)."""
    import copy

    model, (tokens,) = _model(name)
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0

    def loss_of(logits: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())

    def losses(run: Callable[[torch.nn.Module], torch.Tensor], trained: torch.nn.Module) -> list[float]:
        optimizer = torch.optim.AdamW(trained.parameters(), lr=1e-3)
        curve = []
        for _ in range(steps):
            optimizer.zero_grad()
            loss = run(trained)
            loss.backward()
            optimizer.step()
            curve.append(float(loss.detach()))
        return curve

    def autocast_step(trained: torch.nn.Module) -> torch.Tensor:
        with torch.autocast("cpu", dtype=BF16):
            return loss_of(trained(tokens))

    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled_model = copy.deepcopy(model)
    options = {"auto_cast": "matmul", "target": args.target, "check_races": False}
    compiled = torch.compile(compiled_model, backend="neuron-mlir", options=options)
    curves = [
        losses(lambda _: loss_of(compiled(tokens)), compiled_model),
        losses(lambda trained: loss_of(trained(tokens)), copy.deepcopy(model)),
        losses(autocast_step, copy.deepcopy(model)),
    ]
    return list(zip(*curves, strict=True))


def training_table(name: str, curve: list[tuple[float, float, float]]) -> str:
    lines = [
        f"{name}: training loss, one fixed batch, AdamW (lr 1e-3)\n",
        "| step | compiled, auto_cast=matmul | eager fp32 | eager bf16 autocast |",
        "|---:|---:|---:|---:|",
    ]
    every = max(1, len(curve) // 10)
    for step, (ours, fp32, autocast) in enumerate(curve, start=1):
        if step == 1 or step % every == 0 or step == len(curve):
            lines.append(f"| {step} | {ours:.4f} | {fp32:.4f} | {autocast:.4f} |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | mode | simulated | vs none | bf16 FLOPs | error vs fp32 | eager autocast's error | CPU nodes |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    baseline = {row["model"]: row["simulated_us"] for row in rows if row["mode"] == "none"}
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['mode']} | {row['simulated_us']:.1f} us | "
            f"{baseline[row['model']] / row['simulated_us']:.2f}x | {row['bf16_share']:.0%} | {row['error']:.2e} | "
            f"{row['autocast_error']:.2e} | {row['fallback']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["linear-gelu", "gpt2", "bert"])
    parser.add_argument("--target", default="trn2")
    parser.add_argument("--training", action="store_true", help="one training step instead of inference")
    parser.add_argument("--train-steps", type=int, default=0, help="loss curves of this many training steps")
    args = parser.parse_args()
    os.environ.setdefault("NEURON_MLIR_CACHE_DIR", "off")
    if args.train_steps:
        for name in args.models:
            print(training_table(name, train(name, args.train_steps, args)) + "\n")
        return
    rows: list[dict[str, Any]] = []
    for name in args.models:
        rows.extend(bench(name, args))
        print(f"{name}: done", file=sys.stderr)
    kind = "training step" if args.training else "inference"
    print(f"auto_cast on {args.target}, {kind}\n")
    print(table(rows))


if __name__ == "__main__":
    main()
