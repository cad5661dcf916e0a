"""Quality of the generated code: simulated time on trn2 against the roofline, for the cases users care about.

    python bench/bench_kernels.py [--case softmax] [--target trn2] [--trace-dir traces/]

Each case is compiled with torch.compile(backend="neuron-mlir") on bf16 inputs (the precision the TensorE peak
and the memory-bound goals are stated for), run once on the simulator, and checked against eager PyTorch. The
table shows the simulated time, the roofline bound (max of the model's FLOPs, as `torch.utils.flop_counter`
counts them, at TensorE's bf16 peak, and the graph's inputs and outputs at HBM bandwidth), their ratio, MFU, and
the goal of each case:

    matmul 4096^3                  >= 90% of TensorE peak (MFU)
    softmax / layer norm / chain   >= 70% of the roofline (64 MiB of bf16 data each)
    GPT-2 block (d=768, seq 512)   >= 50% of the roofline
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import neuron_mlir
from neuron_mlir.tools import trace_picture

BF16 = torch.bfloat16
ROWS, COLUMNS = 8192, 4096  # 32 Mi elements: 64 MiB of bf16


def _gpt2_block() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    torch.manual_seed(0)
    config = GPT2Config(n_embd=768, n_head=12, n_positions=512, attn_implementation="sdpa")
    block = GPT2Block(config).eval().to(BF16)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = block

        def forward(self, hidden: torch.Tensor) -> torch.Tensor:
            out = self.block(hidden)
            return out[0] if isinstance(out, tuple) else out

    return Block(), (torch.randn(1, 512, 768, dtype=BF16),)


# name -> (builder of (callable, inputs), metric, goal): metric "mfu" or "roofline"
CASES: dict[str, tuple[Callable[[], tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]], str, float]] = {
    "matmul 4096x4096x4096": (
        lambda: (lambda a, b: a @ b, (torch.randn(4096, 4096, dtype=BF16), torch.randn(4096, 4096, dtype=BF16))),
        "mfu",
        0.90,
    ),
    "softmax 8192x4096": (
        lambda: (lambda x: torch.softmax(x, -1), (torch.randn(ROWS, COLUMNS, dtype=BF16),)),
        "roofline",
        0.70,
    ),
    "layer norm 8192x4096": (
        lambda: (lambda x: torch.nn.functional.layer_norm(x, (COLUMNS,)), (torch.randn(ROWS, COLUMNS, dtype=BF16),)),
        "roofline",
        0.70,
    ),
    "gelu(2x + 1) * x 8192x4096": (
        lambda: (lambda x: torch.nn.functional.gelu(x * 2.0 + 1.0) * x, (torch.randn(ROWS, COLUMNS, dtype=BF16),)),
        "roofline",
        0.70,
    ),
    "GPT-2 block d=768 seq 512": (_gpt2_block, "roofline", 0.50),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="", help="run the cases whose name contains this text")
    parser.add_argument("--target", default="trn2")
    parser.add_argument("--trace-dir", help="write each case's Chrome trace there, and its SVG timeline picture")
    args = parser.parse_args()
    header = (
        f"{'case':<28} {'simulated us':>13} {'roofline us':>12} {'of roofline':>11} {'MFU':>6} {'goal':>12} "
        f"{'met':>4} {'compile s':>9} {'sim wall s':>10}"
    )
    print(header)
    print("-" * len(header))
    failures = 0
    for name, (build, metric, goal) in CASES.items():
        if args.case not in name:
            continue
        torch._dynamo.reset()
        neuron_mlir.reset()
        torch.manual_seed(0)
        function, inputs = build()
        options = {"target": args.target, "check_races": False, "cache": False}
        compiled = torch.compile(function, backend="neuron-mlir", options=options)
        started = time.perf_counter()
        with torch.no_grad():
            result = compiled(*inputs)
        wall = time.perf_counter() - started
        stats = neuron_mlir.stats()
        # One eager run gives both the reference and the model's FLOPs (as PyTorch counts them, not the executed
        # ones: identity matmuls that add a causal bias in PSUM, or any other work the compiler adds, must not
        # raise the bound or the MFU). Attention goes through the math path, as the counter knows no CPU flash
        # kernel. A single run matters: eager bf16 matmuls have no fast CPU kernel (4096^3 takes minutes).
        with FlopCounterMode(display=False) as counter, torch.no_grad(), sdpa_kernel([SDPBackend.MATH]):
            expected = function(*inputs)
        torch.testing.assert_close(result.float(), expected.float(), rtol=3e-2, atol=3e-2)
        profiles = list(neuron_mlir.profiles().values())
        total = sum(p.total_ns for p in profiles)
        peak = profiles[0].peak_flops_by_family["bf16"] if profiles else 1.0
        compute = counter.get_total_flops() / peak * 1e9
        roofline = max(compute, sum(p.hbm_bound_ns for p in profiles))
        mfu = compute / total if total else 0.0
        achieved = mfu if metric == "mfu" else roofline / total
        met = achieved >= goal and not stats["fallback_ops"]
        failures += not met
        goal_text = f">= {goal:.0%} {'MFU' if metric == 'mfu' else 'roof'}"
        print(
            f"{name:<28} {total / 1e3:>13.1f} {roofline / 1e3:>12.1f} {roofline / total:>10.1%} {mfu:>6.1%} "
            f"{goal_text:>12} {'yes' if met else 'no':>4} {stats['compile_seconds']:>9.2f} "
            f"{wall - stats['compile_seconds']:>10.2f}"
        )
        if stats["fallback_ops"]:
            print(f"  fell back to the CPU: {stats['fallback_ops']}")
        if args.trace_dir:
            Path(args.trace_dir).mkdir(parents=True, exist_ok=True)
            stem = Path(args.trace_dir) / re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
            neuron_mlir.write_trace(str(stem.with_suffix(".json")))
            trace_picture.main([str(stem.with_suffix(".json")), str(stem.with_suffix(".svg")), "--title", name])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
