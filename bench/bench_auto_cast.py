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

With `--train-steps N`, each model (a language model: `gpt2`, `llama`, `gpt2-small`) is instead trained for N
steps of AdamW on one fixed batch (next-token cross entropy) three ways from the same initial weights: compiled
with auto_cast="matmul", eager fp32, and eager under `torch.autocast("cpu", torch.bfloat16)`; the table shows the
three loss curves side by side. With `--seeds K` (K > 1) this is done from K initial weights: seed 0 is the model
as built, seed s > 0 draws every parameter tensor anew from a normal distribution with that tensor's own mean and
standard deviation (the zoo's language models initialise their weights from normal distributions; constant
tensors, such as norms' weights and biases, stay as they are), with torch's generator seeded with s. The table
then shows per step the spread (lowest and highest loss) of the K eager bf16 autocast runs beside the K compiled
runs, and the verdict line says whether every compiled run stays within the eager bf16 runs' spread at every step
and how far each compiled run is from the eager bf16 run of its own seed, relative to that spread.

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
        "llama": zoo.llama,
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


def reseeded(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """A copy of `model` whose parameter tensors are drawn anew (seed > 0) from normal distributions with each
    tensor's own mean and standard deviation; constant tensors are kept. Seed 0 is the model itself."""
    import copy

    copied = copy.deepcopy(model)
    if seed == 0:
        return copied
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in copied.parameters():
            if parameter.numel() < 2 or float(parameter.std()) == 0.0:
                continue
            noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
            parameter.copy_(noise * parameter.std() + parameter.mean())
    return copied


def train(name: str, steps: int, seeds: int, args: argparse.Namespace) -> list[list[tuple[float, float, float]]]:
    """Per seed and step, the loss of training `name` compiled with auto_cast="matmul", in eager fp32 and under
    eager bf16 autocast (the same initial weights, `reseeded` for the seed, and the same batch)."""
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
    compiled_model = reseeded(model, 0)
    options = {"auto_cast": "matmul", "target": args.target, "check_races": False}
    compiled = torch.compile(compiled_model, backend="neuron-mlir", options=options)
    runs = []
    for seed in range(seeds):
        initial = reseeded(model, seed)
        # the compiled graphs read the parameters as inputs: loading new values reuses the compiled programs
        compiled_model.load_state_dict(initial.state_dict())
        curves = [
            losses(lambda _: loss_of(compiled(tokens)), compiled_model),
            losses(lambda trained: loss_of(trained(tokens)), reseeded(initial, 0)),
            losses(autocast_step, reseeded(initial, 0)),
        ]
        runs.append(list(zip(*curves, strict=True)))
        print(f"{name}: seed {seed} done", file=sys.stderr)
    return runs


def training_table(name: str, runs: list[list[tuple[float, float, float]]]) -> str:
    if len(runs) > 1:
        return spread_table(name, runs)
    curve = runs[0]
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


def spread_table(name: str, runs: list[list[tuple[float, float, float]]]) -> str:
    """The compiled runs against the spread of the eager bf16 autocast runs over the seeds, step by step."""
    steps = len(runs[0])
    lines = [
        f"{name}: training loss over {len(runs)} seeds, one fixed batch, AdamW (lr 1e-3)\n",
        "| step | eager bf16 autocast: lowest - highest | compiled, auto_cast=matmul: lowest - highest | "
        "compiled: mean | largest same-seed difference: compiled - eager bf16 | eager fp32 - eager bf16 |",
        "|---:|---|---|---:|---:|---:|",
    ]
    every = max(1, steps // 10)
    outside, excess, mean_outside = 0, 0.0, 0
    worst = {"compiled": (0.0, 0), "fp32": (0.0, 0)}  # largest same-seed difference / spread, and its step
    for step in range(steps):
        ours = [run[step][0] for run in runs]
        fp32 = [run[step][1] for run in runs]
        bf16 = [run[step][2] for run in runs]
        low, high = min(bf16), max(bf16)
        for value in ours:
            if not low <= value <= high:
                outside += 1
                excess = max(excess, low - value, value - high)
        mean = sum(ours) / len(ours)
        mean_outside += not low <= mean <= high
        largest = {}
        for label, values in (("compiled", ours), ("fp32", fp32)):
            largest[label] = max((a - b for a, b in zip(values, bf16, strict=True)), key=abs)
            share = abs(largest[label]) / (high - low) if high > low else float("inf")
            if share > worst[label][0]:
                worst[label] = (share, step + 1)
        if step == 0 or (step + 1) % every == 0 or step + 1 == steps:
            lines.append(
                f"| {step + 1} | {low:.4f} - {high:.4f} | {min(ours):.4f} - {max(ours):.4f} | {mean:.4f} | "
                f"{largest['compiled']:+.4f} | {largest['fp32']:+.4f} |"
            )
    lines.append(
        f"\nThe compiled runs' mean is within the eager bf16 spread at {steps - mean_outside} of {steps} steps. "
        f"Compiled (run, step) points outside it: {outside} of {steps * len(runs)}, by at most {excess:.4f} (the "
        f"runs of the seeds whose eager bf16 runs bound the spread). Largest same-seed difference from eager bf16, "
        f"relative to the spread at its step: compiled {worst['compiled'][0]:.1%} (step {worst['compiled'][1]}), "
        f"eager fp32 {worst['fp32'][0]:.1%} (step {worst['fp32'][1]})."
    )
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
    parser.add_argument("--seeds", type=int, default=1, help="initial weights to train from (with --train-steps)")
    args = parser.parse_args()
    os.environ.setdefault("NEURON_MLIR_CACHE_DIR", "off")
    if args.train_steps:
        for name in args.models:
            print(training_table(name, train(name, args.train_steps, args.seeds, args)) + "\n")
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
