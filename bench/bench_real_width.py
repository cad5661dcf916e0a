"""The real-width model set, one training step each: status, compile and wall times, simulated time -> docs/models.md.

The table is the section "real-width" of docs/models.md (`tools/doc_sections.py`); the rest of the page, such as
`make model-sweep`'s section, is left as it is.

    python bench/bench_real_width.py                                # every model -> docs/models.md
    python bench/bench_real_width.py --models vit-b16 --output -    # one model, the table on stdout only
    make models                                                     # this, then the real-width tests

For each model of examples/models/real_width.py, a fresh Python process builds the model (train mode, dropout
off), times eager PyTorch's training step (forward, the loss sum(output * R) with a fixed random R, backward;
the median of `--repeat` steps after a first one), then compiles the same step with
torch.compile(backend="neuron-mlir") for `--target` (default trn2; the other options at their defaults), the
compile cache off, and measures:

* status: `native` when no node fell back to the CPU, `fallback` with the ops that did, `failing` with the first
  line of the error (an exception, a timeout after `--timeout` seconds, or a process killed by the memory limit);
* compile: the backend's own compile time of every graph (`neuron_mlir.stats()["compile_seconds"]`), cold;
* first call: wall time of the first step, which also traces the graphs (Dynamo, AOTAutograd) and runs them;
* steady call: the median wall time of `--repeat` further steps, with the CPU time of the process beside it (on a
  shared machine other processes add wall time but little CPU time);
* simulated step: the simulated NeuronCore time of the step's graphs, forward and backward (the sum over the
  profiles of the latest call, `neuron_mlir.profiles()`), MFU (the matmul FLOPs at TensorE's peak for their
  dtypes, over the simulated time) and the share of the roofline bound (`runtime/profile.py` defines both);
* peak memory: the process's peak resident set during eager's steps, the first compiled step and the later ones;
* compiler peak memory: the compiler's own, apart from the simulator's: the backend's compile of each graph is
  wrapped so that free memory is returned to the system and the peak resident set reset as it starts, and the
  peak read as it ends; the growth over the resident size at its start, the largest over the step's graphs, is
  the column (`_CompilerMemory`);
* Inductor: in another fresh process, Inductor's cold compile of the same step (`backend="inductor"`, its caches
  in an empty directory): the first call's wall time minus a later call's.

The table ends with the ratios the project sets goals for: our first call over Inductor's cold compile (<= 1),
the steady step over eager's (geometric mean <= 3) and the compiled steps' peak memory over eager's (<= 2).
`--results` keeps each model's measurements in a JSON Lines file, so a run can be done a few models at a time.

Every process imports a copy of the compiler's source taken when the run starts, compiled to bytecode once (as an
installed package is), so that edits to the checkout during a long run change nothing, and no child spends its
measured compile time compiling the compiler's own modules. Each child's address space is limited (`--memory-gib`)
so that a model that outgrows the machine fails alone instead of pushing others out of memory.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuron_mlir.tools.doc_sections import replace_section
from neuron_mlir.tools.model_sweep import snapshot_packages

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO / "docs" / "models.md"
SECTION = "real-width"  # this script's section of docs/models.md (neuron_mlir.tools.doc_sections)
PAGE_TITLE = "# Models"


# ---- the child: one model, one process ---------------------------------------------------------------------


def _reset_peak_memory() -> None:
    """Start the process's peak resident set (VmHWM) again from its current size (Linux: clear_refs mode 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def _peak_memory_gib() -> float:
    """The process's peak resident set since the last `_reset_peak_memory` (or its start), in GiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _resident_gib() -> float:
    """The process's resident set now, in GiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20
    return 0.0


class _CompilerMemory:
    """The compiler's own peak memory: the largest growth of the resident set during one graph's compile.

    Wraps the backend's compile of each graph (`frontend.backend.compile_graph`: import, passes, bundle): the
    C allocator first returns the memory it holds free to the system (glibc's `malloc_trim`: otherwise memory
    freed by eager's steps or an earlier graph's run would be reused unseen), then the peak resident set is reset,
    and as the compile ends the growth is its peak over the resident size at the start. Resetting the peak would
    lose the process's peak before the compile (tracing, the simulator's run of an earlier graph), so the highest
    peak read is kept as well (`peak_gib`).
    """

    def __init__(self) -> None:
        self.growth_gib = 0.0
        self.peak_gib = 0.0
        self.resident_at_first_compile_gib: float | None = None
        import ctypes
        import ctypes.util

        library = ctypes.util.find_library("c")
        self._trim = getattr(ctypes.CDLL(library), "malloc_trim", None) if library else None

    def wrap(self, compile_graph):
        def measured(*args, **kwargs):
            self.peak_gib = max(self.peak_gib, _peak_memory_gib())
            if self._trim is not None:
                self._trim(0)
            _reset_peak_memory()
            before = _resident_gib()
            if self.resident_at_first_compile_gib is None:
                self.resident_at_first_compile_gib = before
            try:
                return compile_graph(*args, **kwargs)
            finally:
                peak = _peak_memory_gib()
                self.growth_gib = max(self.growth_gib, peak - before)
                self.peak_gib = max(self.peak_gib, peak)

        return measured

    def with_children(self) -> float:
        """The growth, counting the children that compiled backward graphs ahead (`frontend/compile_ahead.py`):
        forked as the first graph's compile starts, each starts with the process's resident set then, so its peak
        resident set over that size is its own compile's growth (the reaped children's largest, by getrusage)."""
        children_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB on Linux
        if not children_gib or self.resident_at_first_compile_gib is None:
            return self.growth_gib
        return max(self.growth_gib, children_gib - self.resident_at_first_compile_gib)


def _training_step(name: str):
    """The model `name` in train mode without dropout, and its step: forward, sum(output * R), backward."""
    import torch

    sys.path.insert(0, str(REPO / "examples"))
    from models.real_width import REAL_WIDTH_MODELS
    from models.zoo import without_dropout

    model, inputs = REAL_WIDTH_MODELS[name]()
    without_dropout(model.train())
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

    return model, timed


def _measure(name: str, repeat: int, target: str) -> dict:
    """Build `name`, time eager's and the compiled training step; everything `_row` needs, as JSON values."""
    import torch

    import neuron_mlir
    from neuron_mlir.frontend import backend

    compiler_memory = _CompilerMemory()
    # The backend calls compile_graph by the name it imported: wrap it there.
    backend.compile_graph = compiler_memory.wrap(backend.compile_graph)  # type: ignore[attr-defined]
    model, timed = _training_step(name)
    result: dict = {"parameters": sum(p.numel() for p in model.parameters())}

    _reset_peak_memory()
    timed(model)
    eager = [timed(model) for _ in range(repeat)]
    result["eager_s"] = statistics.median(wall for wall, _ in eager)
    result["eager_cpu_s"] = statistics.median(cpu for _, cpu in eager)
    result["eager_peak_gib"] = _peak_memory_gib()

    _reset_peak_memory()
    compiled = torch.compile(model, backend="neuron-mlir", options={"target": target})
    result["first_call_s"] = timed(compiled)[0]
    stats = neuron_mlir.stats()
    result["compile_s"] = stats["compile_seconds"]
    result["graphs"] = stats["graphs_compiled"]
    result["fallback_ops"] = stats["fallback_ops"]
    result["peak_gib"] = max(_peak_memory_gib(), compiler_memory.peak_gib)
    result["compiler_peak_gib"] = compiler_memory.with_children()
    _reset_peak_memory()
    steady = [timed(compiled) for _ in range(repeat)]
    result["steady_peak_gib"] = _peak_memory_gib()
    result["steady_s"] = statistics.median(wall for wall, _ in steady)
    result["steady_cpu_s"] = statistics.median(cpu for _, cpu in steady)
    profiles = neuron_mlir.profiles().values()
    simulated = sum(p.total_ns for p in profiles)
    result["simulated_ms"] = simulated / 1e6
    result["mfu"] = sum(p.compute_bound_ns for p in profiles) / simulated if simulated else 0.0
    result["of_roofline"] = sum(p.roofline_ns for p in profiles) / simulated if simulated else 0.0
    result["status"] = "fallback" if stats["nodes_fallen_back"] else "native"
    return result


def _measure_inductor(name: str, repeat: int) -> dict:
    """Inductor's cold compile of the same step: its first call's wall time minus the median of later calls."""
    import torch

    model, timed = _training_step(name)
    compiled = torch.compile(model, backend="inductor")
    first_call = timed(compiled)[0]
    steady = statistics.median(timed(compiled)[0] for _ in range(repeat))
    return {"inductor_compile_s": first_call - steady, "inductor_steady_s": steady}


def _child_main(name: str, repeat: int, memory_gib: float, target: str, inductor: bool) -> int:
    if memory_gib > 0:
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        result = _measure_inductor(name, repeat) if inductor else _measure(name, repeat, target)
    except MemoryError:
        result = {"status": "failing", "error": f"out of memory (address space limited to {memory_gib:g} GiB)"}
    except Exception as error:  # the table reports it; the traceback goes to stderr
        import traceback

        traceback.print_exc()
        first_line = (str(error).strip().splitlines() or [""])[0]
        result = {"status": "failing", "error": f"{type(error).__name__}: {first_line}"}
    print(json.dumps(result))
    return 0


# ---- the parent: children, then the table ----------------------------------------------------------------


def _run_child(name: str, args: argparse.Namespace, snapshot: Path, inductor: bool = False) -> dict:
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
        "--memory-gib", str(args.memory_gib), "--target", args.target,
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as inductor_cache:
        if inductor:  # cold: Inductor's caches in an empty directory, its FX graph cache off
            command.append("--inductor")
            environment.update(TORCHINDUCTOR_CACHE_DIR=inductor_cache, TORCHINDUCTOR_FX_GRAPH_CACHE="0")
        started = time.perf_counter()
        try:
            completed = subprocess.run(
                command, capture_output=True, text=True, env=environment, cwd=snapshot, timeout=args.timeout,
                check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"status": "failing", "error": f"timed out after {args.timeout:.0f} s"}
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        last = (completed.stderr.strip().splitlines() or [f"exit status {completed.returncode}"])[-1]
        return {"status": "failing", "error": f"the process died ({last})"}
    result = json.loads(lines[-1])
    result["process_s"] = time.perf_counter() - started
    if result.get("status") == "failing":
        sys.stderr.write(completed.stderr[-4000:])
    return result


def _measure_model(name: str, args: argparse.Namespace, snapshot: Path) -> dict:
    """Our backend's measurements of `name`, then Inductor's (each its own process), in one dict."""
    result = _run_child(name, args, snapshot)
    if not args.skip_inductor:
        inductor = _run_child(name, args, snapshot, inductor=True)
        if inductor.get("status") == "failing":
            result["inductor_error"] = inductor["error"]
        result.update({key: value for key, value in inductor.items() if key.startswith("inductor_")})
    return result


def _status(result: dict) -> str:
    if result["status"] == "native":
        return "native"
    if result["status"] == "fallback":
        ops = ", ".join(f"`{op}` ({count})" for op, count in sorted(result["fallback_ops"].items()))
        return f"fallback: {ops}"
    return f"failing: {result['error'].replace('|', '/')}"


def _ratio(result: dict, numerator: str, denominator: str) -> float | None:
    if numerator in result and result.get(denominator):
        return result[numerator] / result[denominator]
    return None


def _row(name: str, result: dict) -> str:
    def number(key: str, form: str) -> str:
        return format(result[key], form) if key in result else ""

    def ratio(numerator: str, denominator: str) -> str:
        value = _ratio(result, numerator, denominator)
        return "" if value is None else f"{value:.2f}"

    cells = [
        f"`{name}`",
        f"{result['parameters'] / 1e6:.1f}M" if "parameters" in result else "",
        _status(result),
        number("graphs", "d"),
        number("compile_s", ".1f"),
        number("first_call_s", ".1f"),
        "failed" if "inductor_error" in result else number("inductor_compile_s", ".1f"),
        ratio("first_call_s", "inductor_compile_s"),
        f"{result['steady_s']:.1f} ({result['steady_cpu_s']:.1f})" if "steady_s" in result else "",
        f"{result['eager_s']:.2f} ({result['eager_cpu_s']:.2f})" if "eager_s" in result else "",
        ratio("steady_s", "eager_s"),
        number("simulated_ms", ".2f"),
        f"{result['mfu']:.1%}" if "mfu" in result else "",
        f"{result['of_roofline']:.1%}" if "of_roofline" in result else "",
        number("eager_peak_gib", ".1f"),
        number("peak_gib", ".1f"),
        number("compiler_peak_gib", ".2f"),
        number("steady_peak_gib", ".1f"),
        ratio("steady_peak_gib", "eager_peak_gib"),
    ]
    return "| " + " | ".join(cells) + " |"


_HEADER = (
    "| model | parameters | status | graphs | compile s | first call s | Inductor compile s | first call / Inductor "
    "| steady call s (CPU s) | eager step s (CPU s) | steady / eager | simulated step ms | MFU | of roofline "
    "| eager peak GiB | first call peak GiB | compiler peak GiB | steady peak GiB | steady peak / eager |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values)) if values else float("nan")


def _summary(results: dict[str, dict]) -> str:
    """The ratios against the project's goals, over the models that ran."""

    def ratios(numerator: str, denominator: str) -> dict[str, float]:
        found = {name: _ratio(result, numerator, denominator) for name, result in results.items()}
        return {name: value for name, value in found.items() if value is not None}

    def worst(values: dict[str, float]) -> str:
        if not values:
            return "no model ran"
        name = max(values, key=values.__getitem__)
        return f"at most {values[name]:.2f} (`{name}`)"

    first_call = ratios("first_call_s", "inductor_compile_s")
    steady = ratios("steady_s", "eager_s")
    steady_cpu = ratios("steady_cpu_s", "eager_cpu_s")
    peak = ratios("steady_peak_gib", "eager_peak_gib")
    compiler_peak = {name: r["compiler_peak_gib"] for name, r in results.items() if "compiler_peak_gib" in r}
    native = sum(result["status"] == "native" for result in results.values())
    return (
        f"- {native} of {len(results)} models compile with no fallback.\n"
        f"- First call (trace, compile and run) over Inductor's cold compile of the same step (goal <= 1): "
        f"{worst(first_call)}, {sum(v <= 1 for v in first_call.values())} of {len(first_call)} within the goal.\n"
        f"- Steady call over eager's step, wall time (goal: geometric mean <= 3): geometric mean "
        f"{_geometric_mean(list(steady.values())):.2f}, {worst(steady)}; in CPU time (which other processes on "
        f"the machine do not add to), geometric mean {_geometric_mean(list(steady_cpu.values())):.2f}, "
        f"{worst(steady_cpu)}.\n"
        f"- Peak memory of the simulator's steady steps over eager's (goal <= 2): {worst(peak)}, "
        f"{sum(v <= 2 for v in peak.values())} of {len(peak)} within the goal.\n"
        f"- The compiler's own peak memory in GiB, the resident set's largest growth during one graph's compile "
        f"(goal <= 4): {worst(compiler_peak)}, {sum(v <= 4 for v in compiler_peak.values())} of "
        f"{len(compiler_peak)} within the goal."
    )


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} CPUs ({cpu}), {memory_gib:.0f} GiB of memory"


def _document(results: dict[str, dict], args: argparse.Namespace, written: str) -> str:
    import torch

    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    loads = [result["load_average"] for result in results.values() if "load_average" in result]
    load = f"load average {min(loads):.1f} to {max(loads):.1f} as models ended (where recorded)" if loads else ""
    table = "\n".join(_row(name, result) for name, result in results.items())
    inductor_errors = "".join(
        f"\nInductor failed on `{name}`: {result['inductor_error']}\n"
        for name, result in results.items()
        if "inductor_error" in result
    )
    return f"""## The real-width model set

Generated by `make models` (`python bench/bench_real_width.py`); do not edit. The models are
`examples/models/real_width.py`'s: real architectures at the widths of published checkpoints, with random weights
and one or two layers (the builders' docstring says what each one keeps and cuts, and why).
`test/models/test_real_width_models.py` checks each one's inference and training step against a float64 run of
the same step (`pytest --real-width`, which `make models` runs after this table).

Each row is one fresh process: the model's training step (forward, the loss sum(output * R) with a fixed random
R, backward), compiled with `torch.compile(model, backend="neuron-mlir", options={{"target": "{args.target}"}})`,
the other options at their defaults, compile cache off. Inductor's columns come from another fresh process that
compiles the same step with `backend="inductor"`, its caches in an empty directory (its precompiled C++ header,
kept elsewhere, may be warm).

- **status**: `native` when no node fell back to the CPU; `fallback` names the ops that ran on the CPU (nodes);
  `failing` gives the first line of the error.
- **graphs**: graphs compiled (forward, backward, and the pieces between graph breaks, with a recompilation per
  new shape).
- **compile s**: the backend's own compile time of all graphs, cold, in the process (a backward compiled ahead in
  a child process, `frontend/compile_ahead.py`, counts for the time the first call waited for it and read its
  program back). **first call s**: the first step's wall time,
  which traces the graphs too (Dynamo, AOTAutograd), compiles them and runs them on the simulator.
- **Inductor compile s**: Inductor's cold compile of the same step (its first call's wall time minus a later
  call's, the median of {args.repeat}). **first call / Inductor**: our whole first call over it (goal <= 1).
- **steady call s**: the median wall time of {args.repeat} later steps on the simulated NeuronCore, with the
  process's CPU time of the same steps in parentheses (the machine is shared: other processes add wall time).
- **eager step s**: eager PyTorch's wall time for the same step on the CPU (median of {args.repeat}), its CPU
  time in parentheses (eager uses every core; the simulator one).
  **steady / eager**: the simulator's steady step over eager's (goal: geometric mean <= 3).
- **simulated step ms**: simulated NeuronCore time of the step's graphs, forward and backward, as the cost model
  of {args.target} predicts it (deterministic). **MFU**: the matmul FLOPs at TensorE's fp32 peak, over that time.
  **of roofline**: the roofline bound (the larger of the FLOPs at peak and the graphs' inputs and outputs moved
  once over HBM) over that time (`runtime/profile.py`).
- **eager peak GiB**, **first call peak GiB**, **steady peak GiB**: the process's peak resident memory during
  eager's steps, during the first compiled step (tracing, compiling and the first simulated run) and during the
  later compiled steps (the simulator), each counted from the resident size before it: the model's parameters,
  inputs and the imported libraries are in all three, and in the steady peak also what the first call left
  resident (the compiled programs, and memory the allocator kept after compiling). **steady peak / eager**: the
  simulator's over eager's (goal <= 2).
- **compiler peak GiB**: the compiler's own peak memory: for each graph, the process's peak resident set during
  the backend's compile of it (FX import, passes, bundle) over the resident size as it starts, after the C
  allocator has returned its free memory to the system; the largest over the graphs and over the children that
  compiled backwards ahead (each one's peak resident set over the process's as the first compile started: the
  size it was forked with) (goal <= 4 on the largest model).

Written {written} at commit {commit} (each model measured by a run of this script, possibly an earlier one
kept with `--results`), torch {torch.__version__}, Python {platform.python_version()}, {_machine()}, shared with
other work{": " + load if load else ""}.

{_HEADER}
{table}
{inductor_errors}
{_summary(results)}
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
    parser.add_argument("--target", default="trn2", choices=("trn1", "trn2", "trn3"), help="NeuronCore to compile for")
    parser.add_argument("--skip-inductor", action="store_true", help="leave Inductor's compile time out")
    parser.add_argument(
        "--results", help="a JSON Lines file: each model's measurements are appended to it, and models it already "
        "holds are not run again (a long run done in parts)",
    )  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--inductor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child_main(args.child, args.repeat, args.memory_gib, args.target, args.inductor)

    names = [name for name in args.models.split(",") if name]
    unknown = sorted(set(names) - set(REAL_WIDTH_MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; the set is {sorted(REAL_WIDTH_MODELS)}")
    done: dict[str, dict] = {}
    if args.results and Path(args.results).exists():
        for line in Path(args.results).read_text().splitlines():
            record = json.loads(line)
            done[record.pop("model")] = record
    results: dict[str, dict] = {}
    print(_HEADER)
    with tempfile.TemporaryDirectory() as snapshot:
        snapshot_packages(Path(snapshot))
        for name in names:
            if name in done:
                results[name] = done[name]
            else:
                results[name] = _measure_model(name, args, Path(snapshot))
                results[name]["load_average"] = os.getloadavg()[0]  # the last minute's, as the model ends
                if args.results:
                    with open(args.results, "a", encoding="utf-8") as log:
                        log.write(json.dumps({"model": name, **results[name]}) + "\n")
            print(_row(name, results[name]), flush=True)
    written = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    document = _document(results, args, written)
    if args.output != "-":
        # its own section of the page: `make model-sweep` writes another one
        replace_section(Path(args.output), SECTION, document, title=PAGE_TITLE)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
