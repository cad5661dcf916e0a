"""Where MoE routing runs: the zoo's Mixtral compiled with each experts implementation of transformers.

    python bench/bench_moe_routing.py [--experts grouped_mm,eager] [--capture]

Per experts implementation (`grouped_mm` is what transformers picks for Mixtral by default; `eager` loops over
the experts hit, with a `nonzero` on the expert mask): the graphs compiled, the FX nodes that fell back to the CPU
(by op), the ATen ops the host ran during one warm compiled forward (the profiler's top-level `aten::` events: the
code between graphs that Dynamo left to Python, fallback nodes, and the tensor conversions around each program),
the largest difference to eager's logits, and for a training step (forward, loss, backward) whether every
gradient is within the dtype's tolerance of eager's. `--capture` turns on Dynamo's
`capture_dynamic_output_shape_ops` and `capture_scalar_outputs`, which put `nonzero` and `.item()` in graphs.
The compile cache is off.
"""

from __future__ import annotations

import argparse
import collections
import copy
import os
import sys
import warnings
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "test"))


def _model(experts: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from models.zoo import MODELS

    model, inputs = MODELS["mixtral"]()
    model.set_experts_implementation(experts)  # type: ignore[operator]  # a transformers model's method
    return model, inputs


def _host_ops(run) -> collections.Counter[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        run()

    def top_level(event) -> bool:
        parent = event.cpu_parent
        while parent is not None:
            if parent.name.startswith("aten::"):
                return False
            parent = parent.cpu_parent
        return True

    return collections.Counter(e.name for e in profiler.events() if e.name.startswith("aten::") and top_level(e))


def measure(experts: str) -> None:
    from support import assert_close_to_torch

    import neuron_mlir

    torch._dynamo.reset()
    neuron_mlir.reset()
    model, inputs = _model(experts)
    compiled = torch.compile(copy.deepcopy(model), backend="neuron-mlir")
    with torch.no_grad():
        expected, actual = model(*inputs), compiled(*inputs)
        host = _host_ops(lambda: compiled(*inputs))
    stats = neuron_mlir.stats()
    print(f"{experts}: forward")
    print(
        f"  graphs compiled {stats['graphs_compiled']}, nodes on the CPU {stats['nodes_fallen_back']}"
        f" {stats['fallback_ops'] or ''}"
    )
    print(f"  host ATen ops per warm forward: {sum(host.values())}: {dict(host.most_common(12))}")
    print(f"  max |logits - eager| {(actual - expected).abs().max().item():.3g}")

    torch._dynamo.reset()
    neuron_mlir.reset()
    model.train()
    reference, trained = copy.deepcopy(model), copy.deepcopy(model)
    step = torch.compile(trained, backend="neuron-mlir")
    for run in (reference, step):
        run(*inputs).float().square().mean().backward()
    wrong = []
    for (name, p), q in zip(trained.named_parameters(), reference.parameters(), strict=True):
        try:
            assert_close_to_torch(p.grad, q.grad, name)
        except AssertionError as error:
            wrong.append(str(error))
    stats = neuron_mlir.stats()
    print(
        f"{experts}: training step: graphs {stats['graphs_compiled']}, nodes on the CPU "
        f"{stats['nodes_fallen_back']}, gradients off eager's tolerance: {len(wrong)}"
    )
    for line in wrong[:5]:
        print("   ", line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experts", default="grouped_mm,eager")
    parser.add_argument("--capture", action="store_true")
    options = parser.parse_args()
    os.environ.setdefault("NEURON_MLIR_CACHE_DIR", "off")
    warnings.filterwarnings("ignore")
    if options.capture:
        torch._dynamo.config.capture_dynamic_output_shape_ops = True
        torch._dynamo.config.capture_scalar_outputs = True
    for experts in options.experts.split(","):
        measure(experts)


if __name__ == "__main__":
    main()
