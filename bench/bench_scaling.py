"""Data-parallel scaling on paper: simulated step time and efficiency of GPT-2-small and Llama-1B training steps
at 2 to 64 NeuronCores (and beyond one instance), from per-rank simulated profiles and the collective cost model.

    python bench/bench_scaling.py                      # both models -> the table on stdout
    python bench/bench_scaling.py --results s.jsonl    # keep the per-rank measurements (reused when present)
    python bench/bench_scaling.py --collectives-only   # the cost model's all_reduce times alone
    python bench/bench_scaling.py --results s.jsonl --plot docs/performance-scaling.svg   # and the plot

Per rank, one training step of the model at the real widths of examples/models/real_width.py (GPT-2 small:
hidden 768, 12 heads, vocabulary 50257, 2 x 256 tokens; Llama-3.2-1B: hidden 2048, 32/8 heads, SwiGLU 8192,
vocabulary 32000 tied, 1 x 256 tokens) is compiled with torch.compile(backend="neuron-mlir") for trn2 and run
once on the simulator, in a fresh process per model and depth: the simulated forward and backward times are the
sums over the step's graphs (`neuron_mlir.profiles()`). Each model is measured at 1 and 2 layers; the full depth
(GPT-2 small: 12 layers, Llama-3.2-1B: 16) is extrapolated linearly, since every layer is the same graph:
T(L) = T(1) + (L - 1) (T(2) - T(1)), for the forward and the backward separately. The parameter count is that of
the full-depth model (built on the meta device).

The step on N ranks is data parallel as PyTorch's DistributedDataParallel runs it: each rank runs the step on its
own micro-batch (weak scaling), and the fp32 gradients are all-reduced in buckets of 25 MiB (DDP's default
`bucket_cap_mb`) while the backward still runs. Buckets become ready as the backward produces their gradients
(uniformly over the backward's time, last layer first); the collective queue takes them in order, each costing
`runtime.collectives.collective_ns("all_reduce", bucket bytes, ranks 0..N-1, trn2)`, the faster of a ring and a
tree over NeuronLink within an instance (128 cores of trn2.48xlarge) and EFA beyond. The step is

    forward + backward + exposed communication,  exposed = max(0, end of the last bucket's all-reduce - backward)

and the scaling efficiency is the one-rank step over the N-rank step (per-rank throughput kept). The optimizer
step is left out (the same on every N). The figures are simulated, so the table does not depend on the machine.

The same step sharded as FSDP2 runs it (`fully_shard` on every layer and on the root, fp32 parameters, reshard
after forward) is a small event simulation of two resources, the compute and the collective queue (`fsdp_ns`):
each layer's parameters are all-gathered before its forward and again before its backward, the next layer's
all-gather issued as the current layer starts (FSDP2's implicit prefetch), its gradients reduce-scattered after
its backward; the root (embeddings, final norm, LM head) is gathered first and reduce-scattered last, its
forward compute after the layers and its backward compute before them. The per-layer compute is the measured
difference between the 2- and 1-layer steps, the root's the rest of the 1-layer step; parameters per layer and
root likewise from the 2- and 1-layer models.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUCKET_BYTES = 25 * 2**20
CORES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
MODELS = {"gpt2-small": 12, "llama-1b": 16}  # full depth


def _build(name: str, layers: int):
    """The model at `layers` layers and its inputs (the widths of examples/models/real_width.py)."""
    import torch

    if name == "gpt2-small":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=layers, n_head=12)
        model_class, batch, seq = GPT2LMHeadModel, 2, 256
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=layers,
            num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=8192,
            rope_theta=500000.0, tie_word_embeddings=True, rms_norm_eps=1e-5,
        )  # fmt: skip
        model_class, batch, seq = LlamaForCausalLM, 1, 256
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = model_class(config)
    return model, config, (torch.randint(0, config.vocab_size, (batch, seq)),)


def _child(name: str, layers: int) -> None:
    """Compile and run one training step; print the simulated forward and backward times as JSON."""
    import torch

    import neuron_mlir

    model, _, inputs = _build(name, layers)
    sys.path.insert(0, str(REPO / "examples"))
    from models.zoo import without_dropout

    without_dropout(model.train())

    def step(*args: torch.Tensor) -> torch.Tensor:
        return model(*args).logits

    compiled = torch.compile(step, backend="neuron-mlir", options={"target": "trn2", "cache": False})
    output = compiled(*inputs)
    (output * torch.randn(output.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
    profiles = neuron_mlir.profiles()
    forward = sum(p.total_ns for graph, p in profiles.items() if "backward" not in graph)
    backward = sum(p.total_ns for graph, p in profiles.items() if "backward" in graph)
    print(json.dumps({"model": name, "layers": layers, "forward_ns": forward, "backward_ns": backward}))


def _parameters(name: str, layers: int) -> int:
    """The parameter count of the model at `layers` layers (built on the meta device)."""
    import torch

    with torch.device("meta"):
        model, _, _ = _build(name, layers)
    return sum(p.numel() for p in model.parameters())


def _measure(name: str, layers: int, results: Path | None) -> dict:
    if results is not None and results.exists():
        for line in results.read_text().splitlines():
            entry = json.loads(line)
            if entry["model"] == name and entry["layers"] == layers:
                return entry
    completed = subprocess.run(
        [sys.executable, __file__, "--child", name, str(layers)], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{name} at {layers} layers failed:\n{completed.stderr[-4000:]}")
    entry = json.loads(completed.stdout.strip().splitlines()[-1])
    if results is not None:
        with results.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
    return entry


def exposed_ns(backward_ns: float, gradient_bytes: int, ranks: int) -> float:
    """Communication left after the backward: 25 MiB buckets, ready uniformly over the backward, all-reduced in
    order on the collective queue."""
    from neuron_mlir.runtime import collectives
    from neuron_mlir.runtime.hardware import TRN2

    if ranks == 1:
        return 0.0
    group = tuple(range(ranks))
    done, end = 0, 0.0
    while done < gradient_bytes:
        size = min(BUCKET_BYTES, gradient_bytes - done)
        done += size
        ready = backward_ns * done / gradient_bytes
        end = max(end, ready) + collectives.collective_ns("all_reduce", size, group, TRN2)
    return max(0.0, end - backward_ns)


def fsdp_ns(
    layers: int, layer: tuple[float, float], root: tuple[float, float], params: tuple[int, int], ranks: int
) -> float:
    """The FSDP2 step (module docstring): `layer` and `root` are (forward, backward) compute ns, `params` the
    (layer, root) parameter counts; 4 bytes a parameter."""
    from neuron_mlir.runtime import collectives
    from neuron_mlir.runtime.hardware import TRN2

    group = tuple(range(ranks))

    def cost(kind: str, count: int) -> float:
        return collectives.collective_ns(kind, 4 * count, group, TRN2) if ranks > 1 else 0.0

    queue_free = 0.0

    def issue(at: float, kind: str, count: int) -> float:
        nonlocal queue_free
        queue_free = max(queue_free, at) + cost(kind, count)
        return queue_free

    layer_params, root_params = params
    root_ready = issue(0.0, "all_gather", root_params)
    gathered = [issue(0.0, "all_gather", layer_params)]  # the first layer's, prefetched with the root's
    now = root_ready
    for index in range(layers):
        start = max(now, gathered[index])
        if index + 1 < layers:
            gathered.append(issue(start, "all_gather", layer_params))
        now = start + layer[0]
    now += root[0]  # final norm and LM head
    # backward: the root's gradients first (its parameters stay gathered), then the layers in reverse
    regathered = issue(now, "all_gather", layer_params)
    now += root[1]
    for index in range(layers):
        start = max(now, regathered)
        if index + 1 < layers:
            regathered = issue(start, "all_gather", layer_params)
        now = start + layer[1]
        issue(now, "reduce_scatter", layer_params)
    return max(now, issue(now, "reduce_scatter", root_params))


def collective_table() -> str:
    """The cost model alone: an all_reduce of 1 MiB and of 64 MiB over 2..256 ranks on each target, with the
    algorithm and link chosen (no compile: deterministic)."""
    from neuron_mlir.runtime import collectives
    from neuron_mlir.runtime.hardware import TARGETS

    lines = ["| target | message | " + " | ".join(str(n) for n in CORES[1:]) + " |", "|" + "---|" * (len(CORES) + 1)]
    for target in TARGETS.values():
        for size in (2**20, 64 * 2**20):
            cells = []
            for ranks in CORES[1:]:
                cost = collectives.collective_cost("all_reduce", size, tuple(range(ranks)), target)
                cells.append(f"{cost.ns / 1e3:,.0f} us {cost.algorithm}{' EFA' if cost.link == 'efa' else ''}")
            lines.append(f"| {target.name} | {size // 2**20} MiB | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def efficiency_svg(series: dict[str, list[tuple[int, float]]]) -> str:
    """A line plot of scaling efficiency (0-100%) against the number of NeuronCores (log scale), one line per
    series (name -> [(cores, efficiency)]), as a self-contained SVG."""
    width, height, left, right, top, bottom = 720, 400, 60, 200, 20, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    cores = sorted({n for points in series.values() for n, _ in points})
    low, high = math.log2(cores[0]), math.log2(cores[-1])
    lowest = min(e for points in series.values() for _, e in points)
    floor = min(80.0, 10.0 * math.floor(10.0 * lowest))  # the axis starts near the lowest to show the differences

    def x(n: int) -> float:
        return left + plot_w * (math.log2(n) - low) / (high - low)

    def y(efficiency: float) -> float:
        return top + plot_h * (100.0 - 100.0 * efficiency) / (100.0 - floor)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for percent in range(int(floor), 101, 5):
        level = y(percent / 100)
        parts.append(f'<line x1="{left}" y1="{level:.1f}" x2="{left + plot_w}" y2="{level:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{level + 4:.1f}" text-anchor="end">{percent}%</text>')
    for n in cores:
        parts.append(f'<line x1="{x(n):.1f}" y1="{top}" x2="{x(n):.1f}" y2="{top + plot_h}" stroke="#eee"/>')
        parts.append(f'<text x="{x(n):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{n}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">NeuronCores (trn2; 128 to an '
        "instance, EFA beyond)</text>"
    )
    parts.append(
        f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">scaling efficiency</text>'
    )
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
    for index, (name, points) in enumerate(series.items()):
        colour, dash = colours[index % len(colours)], "" if "DDP" in name else ' stroke-dasharray="6 3"'
        path = " ".join(f"{x(n):.1f},{y(e):.1f}" for n, e in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for n, e in points:
            parts.append(f'<circle cx="{x(n):.1f}" cy="{y(e):.1f}" r="3" fill="{colour}"/>')
        legend = top + 10 + 20 * index
        parts.append(
            f'<line x1="{left + plot_w + 12}" y1="{legend}" x2="{left + plot_w + 36}" y2="{legend}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{left + plot_w + 42}" y="{legend + 4}">{name}</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "LAYERS"), help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=None, help="JSON Lines file of per-rank measurements")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--collectives-only", action="store_true", help="only the cost model's all_reduce table")
    parser.add_argument("--plot", type=Path, default=None, help="also write the efficiency plot as this SVG file")
    args = parser.parse_args()
    if args.collectives_only:
        print(collective_table())
        return 0
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    header = "| model | params | step, 1 core | " + " | ".join(f"{n}" for n in CORES[1:]) + " |"
    lines = [header, "|" + "---|" * (len(CORES) + 2)]
    series: dict[str, list[tuple[int, float]]] = {}
    for name in args.models.split(","):
        full = MODELS[name]
        one, two = _measure(name, 1, args.results), _measure(name, 2, args.results)
        forward = one["forward_ns"] + (full - 1) * (two["forward_ns"] - one["forward_ns"])
        backward = one["backward_ns"] + (full - 1) * (two["backward_ns"] - one["backward_ns"])
        parameters = _parameters(name, full)
        alone = forward + backward
        cells = []
        series[f"{name}, DDP"] = [(1, 1.0)]
        for ranks in CORES[1:]:
            step = alone + exposed_ns(backward, 4 * parameters, ranks)
            cells.append(f"{step / 1e6:.1f} ms ({alone / step:.0%})")
            series[f"{name}, DDP"].append((ranks, alone / step))
        row = f"| {name} ({full} layers), DDP | {parameters / 1e6:.0f}M | {alone / 1e6:.1f} ms | "
        lines.append(row + " | ".join(cells) + " |")
        layer = (two["forward_ns"] - one["forward_ns"], two["backward_ns"] - one["backward_ns"])
        root = (one["forward_ns"] - layer[0], one["backward_ns"] - layer[1])
        one_layer_params = _parameters(name, 1)
        layer_params = _parameters(name, 2) - one_layer_params
        counts = (layer_params, one_layer_params - layer_params)
        alone_fsdp = fsdp_ns(full, layer, root, counts, 1)
        cells = []
        series[f"{name}, FSDP2"] = [(1, 1.0)]
        for ranks in CORES[1:]:
            step = fsdp_ns(full, layer, root, counts, ranks)
            cells.append(f"{step / 1e6:.1f} ms ({alone_fsdp / step:.0%})")
            series[f"{name}, FSDP2"].append((ranks, alone_fsdp / step))
        lines.append(f"| {name} ({full} layers), FSDP2 | | {alone_fsdp / 1e6:.1f} ms | " + " | ".join(cells) + " |")
        print(
            f"# {name}: forward {forward / 1e6:.2f} ms, backward {backward / 1e6:.2f} ms (measured: 1 layer "
            f"{one['forward_ns'] / 1e6:.2f} + {one['backward_ns'] / 1e6:.2f}, 2 layers {two['forward_ns'] / 1e6:.2f} "
            f"+ {two['backward_ns'] / 1e6:.2f}); fp32 gradients {4 * parameters / 2**20:.0f} MiB",
            file=sys.stderr,
        )
    print("\n".join(lines))
    print()
    print(collective_table())
    if args.plot is not None:
        args.plot.write_text(efficiency_svg(series))
    return 0


if __name__ == "__main__":
    sys.exit(main())
