"""The model set, end to end: compile time against Inductor, the warm cache, and simulator speed and memory.

    python bench/bench_models.py [--models gpt2,llama] [--repeat 5]

Every measurement runs in a fresh Python process, so no cache or warm state leaks from one to another. The
processes import a copy of the compiler's source taken when the bench starts, so edits to the checkout while it
runs (a shared checkout) change nothing it measures; the copy is compiled to bytecode once, as an installed
package is, so that no child spends its measured time compiling the compiler's source:

* compile: a training step's forward and backward graphs (first call minus a steady-state call), with our
  backend (compile cache off) and with Inductor (`backend="inductor"`, its caches pointed at an empty directory);
* warm: our backend in a second process whose compile cache holds the first one's programs (both the whole
  first-call overhead, which includes Dynamo and AOTAutograd tracing, and our backend's own compile time). A
  warm run whose lookups missed (a cache key that is not stable across processes) is marked `(N missed)`;
* simulator: wall time of an inference call on the simulated NeuronCore against eager PyTorch on the CPU, each
  the median of `--repeat` calls after a first one (the project quotes medians: one disturbed call moves a
  median by one rank, never by its own delay), and the peak resident memory of a process doing either. The
  ratio of the fastest calls is printed too (`min ratio`): on a shared machine other processes only ever add
  time, so the fastest call is the least disturbed one, and the two ratios far apart mean a noisy run.

Ratios: ours / Inductor's compile time (goal <= 1), warm / cold backend compile time (goal <= 0.1), simulator /
eager wall time from the medians (goal: geometric mean <= 3) and peak memory (goal <= 2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_CHILD = textwrap.dedent(
    """
    import json, os, resource, statistics, sys, time
    sys.path.insert(0, {examples!r})
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from models.zoo import MODELS
    mode, name, repeat = {mode!r}, {name!r}, {repeat}
    model, inputs = MODELS[name]()
    result = {{}}

    def first(output):
        return output[0] if isinstance(output, (tuple, list)) else output

    def step(run):
        loss = first(run(*inputs)).float().square().mean()
        loss.backward()

    if mode in ("ours", "warm", "inductor"):
        model.train()
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        backend = "inductor" if mode == "inductor" else "neuron-mlir"
        options = {{"check_races": False}} if backend == "neuron-mlir" else None
        compiled = torch.compile(model, backend=backend, options=options)
        started = time.perf_counter()
        step(compiled)
        first_call = time.perf_counter() - started
        steady = []
        for _ in range(2):
            started = time.perf_counter()
            step(compiled)
            steady.append(time.perf_counter() - started)
        result["compile_s"] = first_call - min(steady)
        if backend == "neuron-mlir":
            import neuron_mlir
            stats = neuron_mlir.stats()
            result["backend_s"] = stats["compile_seconds"]
            result["cache_hits"] = stats["cache_hits"]
            result["cache_misses"] = stats["cache_misses"]
            result["fallback"] = stats["fallback_ops"]
    else:
        model.eval()
        run = model
        if mode == "simulate":
            run = torch.compile(model, backend="neuron-mlir", options={{"check_races": False}})
        with torch.no_grad():
            run(*inputs)
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                run(*inputs)
                times.append(time.perf_counter() - started)
        result["median_s"] = statistics.median(times)
        result["min_s"] = min(times)
    result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))
    """
)


_SNAPSHOT: Path | None = None  # the copy of the compiler the children import


def _snapshot_compiler(directory: Path) -> None:
    """Copy the installed packages' source (pyproject's package-dir layout) under `directory`/neuron_mlir, and
    compile it to bytecode, as installing a package does: otherwise, where bytecode is not written
    (PYTHONDONTWRITEBYTECODE), every child would compile each module it imports again, inside what it measures."""
    import compileall
    import shutil
    import tomllib

    global _SNAPSHOT
    layout = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(layout.items()):
        target = directory.joinpath(*package.split("."))
        shutil.copytree(REPO / folder, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    compileall.compile_dir(directory, quiet=1)
    _SNAPSHOT = directory


def _child(mode: str, name: str, repeat: int, environment: dict[str, str]) -> dict:
    code = _CHILD.format(examples=str(REPO / "examples"), mode=mode, name=name, repeat=repeat)
    environment = dict(environment)
    if _SNAPSHOT is not None:  # first on the path (the working directory, for `-c`), before the editable install
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_SNAPSHOT), os.environ.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **environment},
        cwd=_SNAPSHOT,
        check=False,
    )
    if completed.returncode != 0:
        return {"error": completed.stderr.strip().splitlines()[-1] if completed.stderr else "failed"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _cold_and_warm(name: str, repeat: int) -> tuple[dict, dict]:
    """A cold compile into an empty cache, then a second process with that cache."""
    with tempfile.TemporaryDirectory() as cache:
        ours = _child("ours", name, repeat, {"NEURON_MLIR_CACHE_DIR": cache})
        warm = _child("warm", name, repeat, {"NEURON_MLIR_CACHE_DIR": cache})
    return ours, warm


def _geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> int:
    sys.path.insert(0, str(REPO / "examples"))
    from models.zoo import MODELS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--skip-inductor", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    with tempfile.TemporaryDirectory() as snapshot:
        _snapshot_compiler(Path(snapshot))
        return _run(names, args)


def _run(names: list[str], args: argparse.Namespace) -> int:

    print(
        f"{'model':<9} {'ours s':>7} {'inductor s':>10} {'ratio':>6} {'warm s':>7} {'backend cold/warm s':>19} "
        f"{'warm/cold':>9} "
        f"{'sim ms':>8} {'eager ms':>9} {'ratio':>6} {'min ratio':>9} {'sim MiB':>8} {'eager MiB':>9} {'ratio':>6}"
    )
    compile_ratios, warm_ratios, speed_ratios, fastest_ratios, memory_ratios = [], [], [], [], []
    for name in names:
        with tempfile.TemporaryDirectory() as inductor_cache:
            ours, warm = _cold_and_warm(name, args.repeat)
            inductor = (
                {}
                if args.skip_inductor
                else _child(
                    "inductor",
                    name,
                    args.repeat,
                    {"TORCHINDUCTOR_CACHE_DIR": inductor_cache, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0"},
                )
            )
        simulated = _child("simulate", name, args.repeat, {"NEURON_MLIR_CACHE_DIR": "off"})
        eager = _child("eager", name, args.repeat, {})
        errors = [r["error"] for r in (ours, warm, inductor, simulated, eager) if "error" in r]
        if errors:
            print(f"{name:<9} error: {errors[0]}")
            continue
        compile_ratio = ours["compile_s"] / inductor["compile_s"] if inductor else float("nan")
        warm_ratio = warm["backend_s"] / ours["backend_s"]
        speed = simulated["median_s"] / eager["median_s"]
        fastest_speed = simulated["min_s"] / eager["min_s"]
        memory = simulated["peak_mib"] / eager["peak_mib"]
        compile_ratios.append(compile_ratio)
        warm_ratios.append(warm_ratio)
        speed_ratios.append(speed)
        fastest_ratios.append(fastest_speed)
        memory_ratios.append(memory)
        print(
            f"{name:<9} {ours['compile_s']:>7.2f} {inductor.get('compile_s', float('nan')):>10.2f} "
            f"{compile_ratio:>6.2f} {warm['compile_s']:>7.2f} "
            f"{ours['backend_s']:>9.2f} / {warm['backend_s']:<7.2f} {warm_ratio:>9.2f} "
            f"{simulated['median_s'] * 1e3:>8.1f} {eager['median_s'] * 1e3:>9.1f} {speed:>6.2f} {fastest_speed:>9.2f} "
            f"{simulated['peak_mib']:>8.0f} {eager['peak_mib']:>9.0f} "
            f"{memory:>6.2f}"
            + (f"   ({warm['cache_misses']} missed)" if warm.get("cache_misses") else "")
            + (f"   fallback {ours['fallback']}" if ours.get("fallback") else "")
        )
    print()
    print(f"compile time ours/Inductor: max {max(compile_ratios, default=float('nan')):.2f} (goal <= 1)")
    print(f"warm / cold backend compile: max {max(warm_ratios, default=float('nan')):.2f} (goal <= 0.1)")
    print(
        f"simulator / eager time:     geomean {_geomean(speed_ratios):.2f} of medians (goal <= 3), "
        f"{_geomean(fastest_ratios):.2f} of the fastest calls"
    )
    print(f"simulator / eager memory:   max {max(memory_ratios, default=float('nan')):.2f} (goal <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
