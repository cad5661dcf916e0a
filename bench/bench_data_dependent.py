"""Ops whose result size depends on values, on the `neuron` device: simulated time.

    python bench/bench_data_dependent.py [--sections count,moe] [--sizes 64x64,1024x256,4096x128] [--output t.md]

count: what counting first costs, for `repeat_interleave` by a tensor of repeats. Per size (n repeats of 0 to 3
over rows of d float32 features, `torch.repeat_interleave(x, repeats, dim=0)` on device tensors, each op its own
program: `NEURON_MLIR_DEFER=0`), the simulated time of a warm call without
`output_size=` (the count program, the host's read of its result, the indices at the size's bucket, the
`index_select`) against the baseline in the same run, the same call given `output_size=` (no count); the same
two inside a step of deferred regions (`x * 2` before, a column sum after: the count program joins the region
before it); then the indices' program by each of its two forms, searching the running sums and scattering them,
forced for every size.

moe: a mixture of experts routed eagerly on device tensors (64 tokens of 32 features, 8 experts of 32 hidden
features, top-2: per expert `torch.where` of the choices, the rows gathered, the expert's matmul, `index_add_`;
`nonzero` and `bincount` beside), forward and backward: the simulated time of a warm step in deferred regions
against the same step with each op its own program, in the same run.

Simulated times come from the cost model: deterministic, whatever the machine's load.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ["NEURON_MLIR_DEFER"] = "0"  # each op its own program, its time on the stream as it runs
os.environ.setdefault("NEURON_MLIR_EAGER", "compile")

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))  # models.routing


def _simulated_us(call: Callable[[], object]) -> float:
    """The simulated time of a warm call: its second run, read off the stream's clock once its deferred region
    has run (its results kept: a region computes no result that died before it ran)."""
    neuron = torch.get_device_module("neuron")
    stream = neuron.current_stream()
    kept = [call()]
    neuron.synchronize()
    before = stream.simulated_ns
    kept.append(call())
    neuron.synchronize()
    return (stream.simulated_ns - before) / 1000


def _program_us(kind: str) -> float:
    """The latest run's time of the eager program of `kind` last run (programs are named `graph<N>_eager_<kind>`)."""
    import neuron_mlir

    runs = [profile for name, profile in neuron_mlir.profiles().items() if name.endswith("_eager_" + kind)]
    return runs[-1].total_ns / 1000


def measure(n: int, d: int) -> dict[str, float]:
    from neuron_mlir.frontend import data_dependent

    torch.manual_seed(0)
    x, repeats = torch.randn(n, d).to("neuron"), torch.randint(0, 4, (n,)).to("neuron")
    total = int(repeats.sum().item())
    row: dict[str, float] = {"sum": total}
    row["counted us"] = _simulated_us(lambda: torch.repeat_interleave(x, repeats, dim=0))
    row["count program us"] = _program_us("repeat_interleave_count")
    row["given us"] = _simulated_us(lambda: torch.repeat_interleave(x, repeats, dim=0, output_size=total))
    os.environ["NEURON_MLIR_DEFER"] = "1"
    try:
        row["step counted us"] = _simulated_us(lambda: torch.repeat_interleave(x * 2, repeats, dim=0).sum(0))
        row["step given us"] = _simulated_us(
            lambda: torch.repeat_interleave(x * 2, repeats, dim=0, output_size=total).sum(0)
        )
    finally:
        os.environ["NEURON_MLIR_DEFER"] = "0"
    searched = data_dependent._SEARCHED_PAIRS
    try:
        for form, pairs in (("searched", sys.maxsize), ("scattered", 0)):
            data_dependent._SEARCHED_PAIRS = pairs
            from neuron_mlir.frontend.device import eager

            eager.reset()  # the indices' program traced again in this form
            _simulated_us(lambda: torch.repeat_interleave(repeats))
            row[f"indices {form} us"] = _program_us("repeat_interleave_Tensor")
    finally:
        data_dependent._SEARCHED_PAIRS = searched
    return row


def _route(x: torch.Tensor, gate: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    from models.routing import route_tokens

    return route_tokens(x, gate, experts)


def measure_moe() -> dict[str, float]:
    torch.manual_seed(0)
    parameters = [torch.randn(64, 32), torch.randn(32, 8), torch.randn(8, 32, 32) / 6]
    on_device = [p.to("neuron").requires_grad_() for p in parameters]

    def step() -> torch.Tensor:
        out = _route(*on_device)
        out.square().sum().backward()
        for parameter in on_device:
            parameter.grad = None
        return out.detach()

    row = {}
    for mode, defer in (("deferred us", "1"), ("alone us", "0")):
        os.environ["NEURON_MLIR_DEFER"] = defer
        try:
            row[mode] = _simulated_us(step)
        finally:
            os.environ["NEURON_MLIR_DEFER"] = "0"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="count,moe", help="count, moe")
    parser.add_argument("--sizes", default="64x64,1024x256,4096x128", help="n x d: repeats, features per row")
    parser.add_argument("--output", default="-", help="a Markdown file for the table, or - for stdout")
    options = parser.parse_args()
    header = "| n x d | sum | counted call us | count program us | output_size= call us | counted / given |"
    header += " step, counted us | step, given us | indices searched us | indices scattered us |"
    sections = options.sections.split(",")
    lines = [header, "|" + "---|" * 10] if "count" in sections else []
    for size in options.sizes.split(",") if "count" in sections else []:
        n, d = (int(part) for part in size.split("x"))
        row = measure(n, d)
        lines.append(
            f"| {n} x {d} | {row['sum']:.0f} | {row['counted us']:.1f} | {row['count program us']:.1f} | "
            f"{row['given us']:.1f} | {row['counted us'] / row['given us']:.2f} | "
            f"{row['step counted us']:.1f} | {row['step given us']:.1f} | "
            f"{row['indices searched us']:.1f} | {row['indices scattered us']:.1f} |"
        )
    if "moe" in sections:
        row = measure_moe()
        lines += [
            "",
            "| eager MoE routing step | deferred regions us | each op alone us | deferred / alone |",
        ]
        lines += ["|---|---|---|---|"]
        lines.append(
            f"| 64 tokens, 8 experts, top-2 | {row['deferred us']:.1f} | {row['alone us']:.1f} | "
            f"{row['deferred us'] / row['alone us']:.2f} |"
        )
    table = "\n".join(lines).lstrip("\n") + "\n"
    if options.output == "-":
        print(table, end="")
    else:
        Path(options.output).write_text(table)


if __name__ == "__main__":
    main()
