"""One program for many sizes: a decoder called at 15 batch sizes and sequence lengths.

For each way of declaring the sizes dynamic (`mark_dynamic` with a range, `dynamic=True`), the zoo's GPT-2
(positions table widened to 512) runs at 15 (batch, sequence) sizes in inference. Per size: the result against
eager PyTorch (within the dtype's tolerance), the simulated time of the call (every compiled program it ran),
and the simulated time of a program compiled for exactly that size (`dynamic=False`, a fresh compile). Printed:
programs compiled per Dynamo graph, per-size time ratios and their geometric mean, and a Markdown table for
docs/performance.md.

    python bench/bench_dynamic_shapes.py [--model gpt2|llama] [--sizes 5] [--modes marked,dynamic,automatic]
        [--order given|increasing|decreasing]

Modes: `marked` (`mark_dynamic` ranges), `dynamic` (`dynamic=True`), `automatic` (neither: Dynamo's automatic
dynamic sizes after the first size change). `--order` calls the sizes in the order given or sorted by sequence
length (the order changes which programs the learned buckets of unbounded sizes compile first).
    python bench/bench_dynamic_shapes.py --breakdown 4x128,2x7

`--breakdown` instead compares, at each size given, the bucketed program (marked ranges, its bucket compiled at
a size of the same bucket first) with the exact-size program per source location: busy time (engines and
queues) and wall time, each instant of the call split evenly among the locations with an instruction running
then, so that a location's wall times sum to the call's and overlap shows as a smaller share.

Simulated times are deterministic; the machine's load does not change them.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import neuron_mlir
from neuron_mlir.frontend import stats as stats_module
from neuron_mlir.ir.semantics.compare import mismatch

# (batch, sequence): irregular sequence lengths over 1..512, batches 1..4; Dynamo specialises sizes 0 and 1, so
# batch 1 and sequence 1 are graphs of their own
SIZES = [
    (2, 7), (4, 512), (3, 45), (1, 100), (2, 333), (4, 19), (3, 260), (2, 2), (4, 128),
    (1, 17), (3, 400), (2, 61), (4, 250), (3, 5), (1, 1),
]  # fmt: skip
MAX_SEQ = 512


def build(name: str) -> torch.nn.Module:
    from models import zoo

    zoo._offline()
    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=zoo.VOCAB, n_positions=MAX_SEQ, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
        )
        return zoo.from_config(GPT2LMHeadModel, config, attn_implementation="sdpa")
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=zoo.VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=MAX_SEQ,
    )  # fmt: skip
    return zoo.from_config(LlamaForCausalLM, config, attn_implementation="sdpa")


def call_time_ns(compiled: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, float]:
    """The compiled model's result and the simulated time of every program the call ran."""
    stats_module.STATS.latest_profiles.clear()
    with torch.no_grad():
        result = compiled(tokens)
    return result, sum(float(p.total_ns) for p in stats_module.STATS.latest_profiles.values())


def mark(tokens: torch.Tensor) -> None:
    batch, seq = tokens.shape
    if batch > 1:
        torch._dynamo.mark_dynamic(tokens, 0, min=2, max=4)
    if seq > 1:
        torch._dynamo.mark_dynamic(tokens, 1, min=2, max=MAX_SEQ)


def run_mode(model: torch.nn.Module, mode: str, sizes: list[tuple[int, int]]) -> dict[str, Any]:
    torch._dynamo.reset()
    neuron_mlir.reset()
    options: dict[str, Any] = {"cache": False}
    compiled = torch.compile(model, backend="neuron-mlir", dynamic=(mode == "dynamic") or None, options=options)
    rows = []
    for batch, seq in sizes:
        tokens = torch.randint(0, 96, (batch, seq), generator=torch.Generator().manual_seed(batch * 1000 + seq))
        if mode == "marked":
            mark(tokens)
        try:
            result, ns = call_time_ns(compiled, tokens)
        except Exception as failure:  # a size the compiler cannot compile at all: reported, not measured
            print(f"  {mode:8s} batch {batch} seq {seq:4d}: does not compile: {str(failure).splitlines()[1:2]}")
            rows.append({"size": (batch, seq), "ns": math.nan, "error": math.nan, "ok": False})
            continue
        with torch.no_grad():
            expected = model(tokens)
        error = float((result - expected).abs().max())
        ok = mismatch(result.numpy(), expected.numpy()) is None  # the dtype's tolerance
        rows.append({"size": (batch, seq), "ns": ns, "error": error, "ok": ok})
        print(f"  {mode:8s} batch {batch} seq {seq:4d}: {ns / 1e3:9.1f} us, max error {error:.2e}, ok {ok}", flush=True)
    stats = neuron_mlir.stats()
    return {
        "rows": rows,
        "programs": stats["graphs_compiled"] + stats["recompilations"],
        "graphs": stats["graphs_compiled"],
        "notes": stats["size_notes"],
        "fallback": stats["nodes_fallen_back"],
    }


def location_times(profiles: list[Any]) -> tuple[dict[str, float], dict[str, float]]:
    """Busy and wall time per source location over `profiles` (the wall time of each instant shared evenly among
    the locations active then)."""
    busy: dict[str, float] = {}
    wall: dict[str, float] = {}
    for profile in profiles:
        for location, ns in profile.location_ns.items():
            busy[location] = busy.get(location, 0.0) + ns
        table = profile.instructions
        points = []
        for start, end, index in zip(profile.events.start, profile.events.end, profile.events.instruction, strict=True):
            if end > start:
                points += [(start, 1, table[index].location), (end, -1, table[index].location)]
        points.sort(key=lambda point: (point[0], point[1]))
        active: dict[str, int] = {}
        previous = 0.0
        for time, change, location in points:
            if active and time > previous:
                share = (time - previous) / len(active)
                for name in active:
                    wall[name] = wall.get(name, 0.0) + share
            previous = time
            active[location] = active.get(location, 0) + change
            if not active[location]:
                del active[location]
    return busy, wall


def breakdown(model: torch.nn.Module, size: tuple[int, int], top: int = 20) -> None:
    """Print the busy and wall time per source location of the bucketed and the exact program at `size`."""
    batch, seq = size
    runs = {}
    for mode in ("exact", "marked"):
        torch._dynamo.reset()
        neuron_mlir.reset()
        options: dict[str, Any] = {"cache": False}
        compiled = torch.compile(
            model, backend="neuron-mlir", dynamic=False if mode == "exact" else None, options=options
        )
        tokens = torch.randint(0, 96, (batch, seq))
        if mode == "marked":
            # another size of the same buckets first, so that the call runs a program compiled for a bucket
            other = torch.randint(0, 96, (3 if batch > 1 else 1, seq - 1 if seq > 2 else seq + 1))
            mark(other)
            call_time_ns(compiled, other)
            mark(tokens)
        ns = call_time_ns(compiled, tokens)[1]
        runs[mode] = (ns, *location_times(list(stats_module.STATS.latest_profiles.values())))
    (exact_ns, exact_busy, exact_wall), (marked_ns, marked_busy, marked_wall) = runs["exact"], runs["marked"]
    print(f"\n{batch} x {seq}: exact {exact_ns / 1e3:.1f} us, bucketed {marked_ns / 1e3:.1f} us")
    print(f"{'busy exact':>11} {'bucketed':>9} {'wall exact':>11} {'bucketed':>9}  source location (by wall excess)")
    excess = {at: marked_wall.get(at, 0.0) - exact_wall.get(at, 0.0) for at in set(exact_wall) | set(marked_wall)}
    locations = sorted(excess, key=lambda at: -excess[at])
    for location in locations[:top]:
        print(
            f"{exact_busy.get(location, 0) / 1e3:11.1f} {marked_busy.get(location, 0) / 1e3:9.1f} "
            f"{exact_wall.get(location, 0) / 1e3:11.1f} {marked_wall.get(location, 0) / 1e3:9.1f}  {location[-100:]}"
        )


def exact_times(model: torch.nn.Module, sizes: list[tuple[int, int]]) -> dict[tuple[int, int], float]:
    times = {}
    for batch, seq in sizes:
        torch._dynamo.reset()
        neuron_mlir.reset()
        compiled = torch.compile(model, backend="neuron-mlir", dynamic=False, options={"cache": False})
        tokens = torch.randint(0, 96, (batch, seq))
        try:
            _, ns = call_time_ns(compiled, tokens)
        except Exception as error:
            print(f"  exact    batch {batch} seq {seq:4d}: does not compile: {str(error).splitlines()[1:2]}")
            ns = math.nan
        else:
            print(f"  exact    batch {batch} seq {seq:4d}: {ns / 1e3:9.1f} us", flush=True)
        times[(batch, seq)] = ns
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2", choices=["gpt2", "llama"])
    parser.add_argument("--sizes", type=int, default=len(SIZES), help="how many of the 15 sizes")
    parser.add_argument("--modes", default="marked,dynamic")
    parser.add_argument("--breakdown", help="sizes (4x128,2x7) to compare per source location, nothing else")
    parser.add_argument("--order", default="given", choices=["given", "increasing", "decreasing"])
    args = parser.parse_args()
    sizes = SIZES[: args.sizes]
    if args.order != "given":
        sizes = sorted(sizes, key=lambda size: size[::-1], reverse=args.order == "decreasing")
    model = build(args.model)
    if args.breakdown:
        for size in args.breakdown.split(","):
            batch, seq = (int(part) for part in size.split("x"))
            breakdown(model, (batch, seq))
        return
    results = {mode: run_mode(model, mode, sizes) for mode in args.modes.split(",")}
    exact = exact_times(model, sizes)
    print(f"\n{args.model}, inference, {len(sizes)} sizes")
    print("| sizes declared | programs (graphs) | all match eager | time / exact-size time, geomean | worst |")
    print("|---|---|---|---|---|")
    for mode, result in results.items():
        # sizes that compile both ways (NaN: one of them does not)
        ratios = [r for row in result["rows"] if not math.isnan(r := row["ns"] / exact[row["size"]])]
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        label = {"marked": "mark_dynamic(2..4, 2..512)", "dynamic": "dynamic=True"}.get(mode, "automatic dynamic")
        label += "" if args.order == "given" else f", {args.order} sizes"
        all_ok = all(row["ok"] for row in result["rows"])
        print(
            f"| {label} | {result['programs']} ({result['graphs']}) | {'yes' if all_ok else 'NO'} | "
            f"{geomean:.2f} | {max(ratios):.1f} |"
        )
    print("\n| batch, seq | exact-size us | " + " | ".join(f"{m} us" for m in results) + " |")
    print("|---|---|" + "---|" * len(results))
    for index, size in enumerate(sizes):
        cells = " | ".join(f"{results[m]['rows'][index]['ns'] / 1e3:.1f}" for m in results)
        print(f"| {size[0]}, {size[1]} | {exact[size] / 1e3:.1f} | {cells} |")
    for mode, result in results.items():
        print(f"\n{mode}: size notes:")
        for note in result["notes"]:
            print(f"  {note[:200]}")
        print(f"{mode}: nodes on the CPU: {result['fallback']}")


if __name__ == "__main__":
    main()
