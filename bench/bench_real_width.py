"""The real-width model set, one training step each: status, compile and wall times, simulated time -> docs/models.md.

    python bench/bench_real_width.py                                # every model -> docs/models.md
    python bench/bench_real_width.py --models vit-b16 --output -    # one model, the table on stdout only
    make models                                                     # this, then the real-width tests

For each model of examples/models/real_width.py, a fresh Python process builds the model (train mode, dropout
off), times eager PyTorch's training step (forward, the loss sum(output * R) with a fixed random R, backward;
the median of `--repeat` steps after a first one), then compiles the same step with
torch.compile(backend="neuron-mlir") and the default options, the compile cache off, and measures:

* status: `native` when no node fell back to the CPU, `fallback` with the ops that did, `failing` with the first
  line of the error (an exception, a timeout after `--timeout` seconds, or a process killed by the memory limit);
* compile: the backend's own compile time of every graph (`neuron_mlir.stats()["compile_seconds"]`), cold;
* first call: wall time of the first step, which also traces the graphs (Dynamo, AOTAutograd) and runs them;
* steady call: the median wall time of `--repeat` further steps, with the CPU time of the process beside it (on a
  shared machine other processes add wall time but little CPU time);
* simulated step: the simulated NeuronCore time of the step's graphs, forward and backward (the sum over the
  profiles of the latest call, `neuron_mlir.profiles()`), MFU (the matmul FLOPs at TensorE's peak for their
  dtypes, over the simulated time) and the share of the roofline bound (`runtime/profile.py` defines both);
* peak memory: the process's peak resident set, eager and compiled steps included.

Every process imports a copy of the compiler's source taken when the run starts, compiled to bytecode once (as an
installed package is), so that edits to the checkout during a long run change nothing, and no child spends its
measured compile time compiling the compiler's own modules. Each child's address space is limited (`--memory-gib`)
so that a model that outgrows the machine fails alone instead of pushing others out of memory.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO / "docs" / "models.md"


# ---- the child: one model, one process ---------------------------------------------------------------------


def _measure(name: str, repeat: int) -> dict:
    """Build `name`, time eager's and the compiled training step; everything `_row` needs, as JSON values."""
    import torch

    sys.path.insert(0, str(REPO / "examples"))
    from models.real_width import REAL_WIDTH_MODELS
    from models.zoo import without_dropout

    import neuron_mlir

    model, inputs = REAL_WIDTH_MODELS[name]()
    without_dropout(model.train())
    result: dict = {"parameters": sum(p.numel() for p in model.parameters())}
    projection: list[torch.Tensor] = []

    def step(run) -> None:
        output = run(*inputs)
        if not projection:
            projection.append(torch.randn(output.shape, generator=torch.Generator().manual_seed(1)))
        (output * projection[0]).sum().backward()
        model.zero_grad(set_to_none=True)

    def timed(run) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        step(run)
        return time.perf_counter() - wall, time.process_time() - cpu

    timed(model)
    result["eager_s"] = statistics.median(timed(model)[0] for _ in range(repeat))

    compiled = torch.compile(model, backend="neuron-mlir")
    result["first_call_s"] = timed(compiled)[0]
    stats = neuron_mlir.stats()
    result["compile_s"] = stats["compile_seconds"]
    result["graphs"] = stats["graphs_compiled"]
    result["fallback_ops"] = stats["fallback_ops"]
    steady = [timed(compiled) for _ in range(repeat)]
    result["steady_s"] = statistics.median(wall for wall, _ in steady)
    result["steady_cpu_s"] = statistics.median(cpu for _, cpu in steady)
    profiles = neuron_mlir.profiles().values()
    simulated = sum(p.total_ns for p in profiles)
    result["simulated_ms"] = simulated / 1e6
    result["mfu"] = sum(p.compute_bound_ns for p in profiles) / simulated if simulated else 0.0
    result["of_roofline"] = sum(p.roofline_ns for p in profiles) / simulated if simulated else 0.0
    result["status"] = "fallback" if stats["nodes_fallen_back"] else "native"
    return result


def _child_main(name: str, repeat: int, memory_gib: float) -> int:
    if memory_gib > 0:
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        result = _measure(name, repeat)
    except MemoryError:
        result = {"status": "failing", "error": f"out of memory (address space limited to {memory_gib:g} GiB)"}
    except Exception as error:  # the table reports it; the traceback goes to stderr
        import traceback

        traceback.print_exc()
        first_line = (str(error).strip().splitlines() or [""])[0]
        result = {"status": "failing", "error": f"{type(error).__name__}: {first_line}"}
    result["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(result))
    return 0


# ---- the parent: children, then the table ----------------------------------------------------------------


def _snapshot_compiler(directory: Path) -> None:
    """Copy the packages' source (pyproject's package-dir layout) under `directory` and compile it to bytecode."""
    layout = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(layout.items()):
        target = directory.joinpath(*package.split("."))
        shutil.copytree(REPO / folder, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    compileall.compile_dir(directory, quiet=1)


def _run_child(name: str, args: argparse.Namespace, snapshot: Path) -> dict:
    environment = {
        **os.environ,
        "NEURON_MLIR_CACHE_DIR": "off",
        "NEURON_MLIR_PROGRESS": "0",
        # the snapshot first on the path (and the working directory), before the editable install
        "PYTHONPATH": os.pathsep.join(filter(None, [str(snapshot), os.environ.get("PYTHONPATH")])),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = [
        sys.executable, str(Path(__file__).resolve()), "--child", name, "--repeat", str(args.repeat),
        "--memory-gib", str(args.memory_gib),
    ]  # fmt: skip
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, env=environment, cwd=snapshot, timeout=args.timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"status": "failing", "error": f"timed out after {args.timeout:.0f} s"}
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        last = (completed.stderr.strip().splitlines() or [f"exit status {completed.returncode}"])[-1]
        return {"status": "failing", "error": f"the process died ({last})"}
    result = json.loads(lines[-1])
    result["process_s"] = time.perf_counter() - started
    if result["status"] == "failing":
        sys.stderr.write(completed.stderr[-4000:])
    return result


def _status(result: dict) -> str:
    if result["status"] == "native":
        return "native"
    if result["status"] == "fallback":
        ops = ", ".join(f"`{op}` ({count})" for op, count in sorted(result["fallback_ops"].items()))
        return f"fallback: {ops}"
    return f"failing: {result['error'].replace('|', '/')}"


def _row(name: str, result: dict) -> str:
    def number(key: str, form: str) -> str:
        return format(result[key], form) if key in result else ""

    cells = [
        f"`{name}`",
        f"{result['parameters'] / 1e6:.1f}M" if "parameters" in result else "",
        _status(result),
        number("graphs", "d"),
        number("compile_s", ".1f"),
        number("first_call_s", ".1f"),
        f"{result['steady_s']:.1f} ({result['steady_cpu_s']:.1f})" if "steady_s" in result else "",
        number("eager_s", ".2f"),
        number("simulated_ms", ".2f"),
        f"{result['mfu']:.1%}" if "mfu" in result else "",
        f"{result['of_roofline']:.1%}" if "of_roofline" in result else "",
        number("peak_gib", ".1f"),
    ]
    return "| " + " | ".join(cells) + " |"


_HEADER = (
    "| model | parameters | status | graphs | compile s | first call s | steady call s (CPU s) | eager step s "
    "| simulated step ms | MFU | of roofline | peak GiB |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _document(rows: list[str], args: argparse.Namespace, started: str, loads: tuple[tuple, tuple]) -> str:
    import torch

    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    (start_load, end_load) = loads
    table = "\n".join(rows)
    return f"""# The real-width model set

Generated by `make models` (`python bench/bench_real_width.py`); do not edit. The models are
`examples/models/real_width.py`'s: real architectures at the widths of published checkpoints, with random weights
and one or two layers (the builders' docstring says what each one keeps and cuts, and why).
`test/models/test_real_width_models.py` checks each one's inference and training step against a float64 run of
the same step (`pytest --real-width`, which `make models` runs after this table).

Each row is one fresh process: the model's training step (forward, the loss sum(output * R) with a fixed random
R, backward), compiled with `torch.compile(model, backend="neuron-mlir")`, default options (target trn2), compile
cache off.

- **status**: `native` when no node fell back to the CPU; `fallback` names the ops that ran on the CPU (nodes);
  `failing` gives the first line of the error.
- **graphs**: graphs compiled (forward, backward, and the pieces between graph breaks, with a recompilation per
  new shape).
- **compile s**: the backend's own compile time of all graphs, cold. **first call s**: the first step's wall time,
  which traces the graphs too (Dynamo, AOTAutograd), compiles them and runs them on the simulator.
- **steady call s**: the median wall time of {args.repeat} later steps on the simulated NeuronCore, with the
  process's CPU time of the same steps in parentheses (the machine is shared: other processes add wall time).
- **eager step s**: eager PyTorch's wall time for the same step on the CPU (median of {args.repeat}).
- **simulated step ms**: simulated NeuronCore time of the step's graphs, forward and backward, as the cost model
  of trn2 predicts it (deterministic). **MFU**: the matmul FLOPs at TensorE's fp32 peak, over that time.
  **of roofline**: the roofline bound (the larger of the FLOPs at peak and the graphs' inputs and outputs moved
  once over HBM) over that time (`runtime/profile.py`).
- **peak GiB**: the process's peak resident memory, eager and compiled steps together.

Run: {started}, commit {commit}, torch {torch.__version__}, Python {platform.python_version()},
{os.cpu_count()} CPUs, load average {start_load[0]:.1f} at the start and {end_load[0]:.1f} at the end.

{_HEADER}
{table}
"""


def main() -> int:
    sys.path.insert(0, str(REPO / "examples"))
    from models.real_width import REAL_WIDTH_MODELS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(REAL_WIDTH_MODELS), help="comma-separated names")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="the Markdown file to write, or - for stdout")
    parser.add_argument("--repeat", type=int, default=2, help="steady steps (and eager steps) to take the median of")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per model")
    parser.add_argument("--memory-gib", type=float, default=16.0, help="address-space limit per model, 0 for none")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child_main(args.child, args.repeat, args.memory_gib)

    names = [name for name in args.models.split(",") if name]
    unknown = sorted(set(names) - set(REAL_WIDTH_MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; the set is {sorted(REAL_WIDTH_MODELS)}")
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    start_load = os.getloadavg()
    rows = []
    print(_HEADER)
    with tempfile.TemporaryDirectory() as snapshot:
        _snapshot_compiler(Path(snapshot))
        for name in names:
            rows.append(_row(name, _run_child(name, args, Path(snapshot))))
            print(rows[-1], flush=True)
    document = _document(rows, args, started, (start_load, os.getloadavg()))
    if args.output != "-":
        Path(args.output).write_text(document, encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
