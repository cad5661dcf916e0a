"""Train a small GPT-2 (transformers, random weights) with torch.compile(backend="neuron-mlir"), next to eager.

    python examples/train_transformer.py [--model gpt2] [--steps 3] [--trace transformer_trace.json]

Any model of examples/models/zoo.py works (gpt2, llama, mixtral, mamba, bert, vit, resnet, cnn, mlp). Prints each
step's loss in eager PyTorch and on the simulated NeuronCore, what (if anything) fell back to the CPU, and where the
simulated time went: by module path (`model.transformer.h.0.attn`) and by forward/backward phase.
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

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.zoo import MODELS

import neuron_mlir


def _first(output: object) -> torch.Tensor:
    return output[0] if isinstance(output, tuple | list) else output  # type: ignore[return-value]


def _loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross entropy for language models; a plain square loss for the others."""
    if logits.dim() == 3 and tokens.dim() == 2 and logits.shape[:2] == tokens.shape:
        return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())
    return logits.float().square().mean()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--target", default="trn2", choices=["trn1", "trn2", "trn3"])
    parser.add_argument("--trace", default="transformer_trace.json")
    args = parser.parse_args()

    model, inputs = MODELS[args.model]()
    model.train()
    for module in model.modules():  # deterministic steps, so that eager and the simulated core can be compared
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="neuron-mlir", options={"target": args.target})
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (reference, model)]
    parameters = sum(p.numel() for p in model.parameters())
    print(
        f"neuron-mlir {neuron_mlir.__version__}: {args.model} ({parameters:,} parameters), inputs "
        f"{[tuple(t.shape) for t in inputs]}, target {args.target}\n"
    )
    started = time.perf_counter()
    for step in range(args.steps):
        losses = []
        runs: tuple[Callable[..., Any], ...] = (reference, compiled)
        for run, optimizer in zip(runs, optimizers, strict=True):
            optimizer.zero_grad()
            loss = _loss(_first(run(*inputs)), inputs[0])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(
            f"  step {step}: loss eager {losses[0]:.6f}   neuron-mlir {losses[1]:.6f}   "
            f"difference {abs(losses[0] - losses[1]):.2e}"
        )
    wall = time.perf_counter() - started
    stats = neuron_mlir.stats()
    print(
        f"\ncompiled {stats['graphs_compiled']} graphs ({stats['nodes_compiled']} ATen nodes) in "
        f"{stats['compile_seconds']:.1f} s; {args.steps} steps took {wall:.1f} s of wall time"
    )
    fallen = stats["fallback_ops"]
    print("nodes run on the CPU instead: " + (", ".join(f"{op} x{n}" for op, n in fallen.items()) or "none"))
    print()
    print(neuron_mlir.report(max_depth=5))
    neuron_mlir.write_trace(args.trace)
    print(f"\ntrace written to {args.trace} (https://ui.perfetto.dev: a process per graph, a track per engine)")
    return 0 if not fallen else 1


if __name__ == "__main__":
    sys.exit(main())
