"""Train a small MLP with torch.compile(backend="neuron-mlir") on the simulated NeuronCore, next to eager.

    python examples/train_mlp.py [--steps 5] [--target trn2] [--trace neuron_mlir_trace.json]

Prints the largest difference to eager PyTorch (forward output, every gradient, each step's loss), then the
simulated profile of the forward and backward graphs: time, busy time per engine, MFU, roofline, and where the
time went by source line. The Chrome/Perfetto trace (open it at https://ui.perfetto.dev) is written too.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from mlp import MLP

import neuron_mlir


def max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().double() - b.detach().double()).abs().max().item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=37)
    parser.add_argument("--target", default="trn2", choices=["trn1", "trn2", "trn3"])
    parser.add_argument("--trace", default="neuron_mlir_trace.json", help="where to write the Chrome trace")
    args = parser.parse_args()

    torch.manual_seed(0)
    sizes = (300, 520, 130, 10)
    eager = MLP(sizes)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="neuron-mlir", options={"target": args.target})
    x = torch.randn(args.batch, sizes[0])
    target = torch.randn(args.batch, sizes[-1])
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (eager, model)]

    print(
        f"neuron-mlir {neuron_mlir.__version__}: MLP {' -> '.join(map(str, sizes))}, batch {args.batch}, "
        f"target {args.target}\n"
    )
    worst = {"forward": 0.0, "gradients": 0.0, "loss": 0.0}
    started = time.perf_counter()
    for step in range(args.steps):
        outputs, losses = [], []
        runs: tuple[Callable[..., torch.Tensor], ...] = (eager, compiled)
        for run, optimizer in zip(runs, optimizers, strict=True):
            optimizer.zero_grad()
            out = run(x)
            loss = torch.nn.functional.mse_loss(out, target)
            loss.backward()
            outputs.append(out)
            losses.append(loss)
        worst["forward"] = max(worst["forward"], max_difference(outputs[1], outputs[0]))
        worst["loss"] = max(worst["loss"], max_difference(losses[1], losses[0]))
        for p, q in zip(model.parameters(), eager.parameters(), strict=True):
            assert p.grad is not None, "every parameter takes part in the loss"
            assert q.grad is not None
            worst["gradients"] = max(worst["gradients"], max_difference(p.grad, q.grad))
        print(f"  step {step}: loss eager {losses[0].item():.6f}   neuron-mlir {losses[1].item():.6f}")
        for optimizer in optimizers:
            optimizer.step()
    wall = time.perf_counter() - started

    print("\nlargest difference to eager PyTorch:")
    for what, value in worst.items():
        print(f"  {what:<10} {value:.3e}")
    stats = neuron_mlir.stats()
    print(
        f"\ncompiled {stats['graphs_compiled']} graphs ({stats['nodes_compiled']} ATen nodes) in "
        f"{stats['compile_seconds']:.2f} s; nodes run on the CPU instead: {stats['nodes_fallen_back']}; "
        f"{args.steps} training steps took {wall:.2f} s of wall time"
    )

    for name, profile in neuron_mlir.profiles().items():
        print(f"\n=== {name} ===")
        print(profile.summary(top_locations=6))
    print()
    print(neuron_mlir.report())
    neuron_mlir.write_trace(args.trace)
    print(f"\ntrace written to {args.trace} (https://ui.perfetto.dev: a process per graph, a track per engine)")
    return 0 if stats["nodes_fallen_back"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
