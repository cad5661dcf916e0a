"""Sweep PyTorch's OpInfo database through the importer: how much of ATen, as real graphs use it, imports.

    python -m neuron_mlir.tools.opinfo_sweep                      # all of op_db -> docs/importer-coverage.md
    python -m neuron_mlir.tools.opinfo_sweep --ops add,cat,max    # a few entries, report to stdout only
    make importer-coverage

For every entry of `torch.testing._internal.common_methods_invocations.op_db` (an op and variant), take up to
`--max-samples` float32 CPU samples, trace each call with AOTAutograd and the backend's decompositions (as
`torch.compile(backend="neuron-mlir")` would, without Dynamo), and check each forward graph with
`neuron_mlir.frontend.import_check`: import, verify, text round trip, and on the first graph torch-level
semantics against the graph's own outputs.

An entry *passes* when at least one sample gave a graph and every graph imported, verified and round-tripped;
it *fails* otherwise; it has *no graph* when AOTAutograd produced none (no float32 support, data-dependent
output shapes, non-tensor results, ...), and those are counted apart. Coverage = passed / (passed + failed).
Semantic mismatches on the first sample are listed separately (random ops are expected there).

The harness is meant to grow: `check_entry` is the one place a sample becomes a graph and a verdict. The
"compile and compare" mode is `tools/coverage_sweep.py` (`make coverage`), which iterates the same entries and
samples (`entry_name`, `_split_sample`) through `torch.compile(backend="neuron-mlir")`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing
import re
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

DEFAULT_MAX_SAMPLES = 8
ENTRY_TIME_BUDGET_S = 20.0


@dataclass
class EntryResult:
    """The verdict on one op_db entry."""

    name: str
    status: str  # "pass", "fail" or "no graph"
    reason: str = ""
    graphs: int = 0
    semantics: str = ""  # a mismatch description, "" when the first graph reproduced its outputs (or was not run)
    aten_ops: list[str] = field(default_factory=list)


def entry_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _op_db() -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


def _split_sample(sample: Any) -> tuple[list[torch.Tensor], Callable[[list[torch.Tensor]], tuple[Any, Any, Any]]]:
    """The sample's tensors (graph inputs) and a function rebuilding (input, args, kwargs) from them."""
    import torch.utils._pytree as pytree

    leaves, spec = pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i] for i in positions]

    def rebuild(values: list[torch.Tensor]) -> tuple[Any, Any, Any]:
        filled = list(leaves)
        for position, value in zip(positions, values, strict=True):
            filled[position] = value
        return pytree.tree_unflatten(filled, spec)

    return tensors, rebuild


def trace_sample(op: Any, sample: Any) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """The AOTAutograd forward graph of calling `op` on `sample`, and its inputs; raises when there is none."""
    from torch._functorch.aot_autograd import aot_function

    from neuron_mlir.frontend.backend import decompositions

    tensors, rebuild = _split_sample(sample)

    def call(*values: torch.Tensor) -> Any:
        first, args, kwargs = rebuild(list(values))
        return op.op(first, *args, **kwargs)

    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm

    inputs = [t.detach().clone() for t in tensors]
    aot_function(call, fw_compiler=keep, decompositions=decompositions())(*[t.clone() for t in inputs])
    if len(graphs) != 1:
        raise ValueError(f"AOTAutograd produced {len(graphs)} graphs")
    return graphs[0], inputs


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    text = re.sub(r"0x[0-9a-f]+", "0x...", text)
    return text[:300]


def check_entry(op: Any, max_samples: int = DEFAULT_MAX_SAMPLES, semantics: bool = True) -> EntryResult:
    """Trace up to `max_samples` float32 samples of one op_db entry and check every graph's import."""
    from neuron_mlir.frontend.import_check import ImportCheckError, check_import

    name = entry_name(op)
    if torch.float32 not in op.supported_dtypes("cpu"):
        return EntryResult(name, "no graph", "no float32 support on CPU")
    started = time.perf_counter()
    no_graph: list[str] = []
    result = EntryResult(name, "no graph")
    ops: set[str] = set()
    try:
        samples = list(itertools.islice(op.sample_inputs("cpu", torch.float32, requires_grad=False), max_samples))
    except Exception as error:
        return EntryResult(name, "no graph", f"sample_inputs failed: {_short(error)}")
    for sample in samples:
        if time.perf_counter() - started > ENTRY_TIME_BUDGET_S:
            break
        try:
            graph, inputs = trace_sample(op, sample)
        except Exception as error:
            no_graph.append(f"{type(error).__name__}: {_short(error)}")
            continue
        ops |= {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
        result.graphs += 1
        try:
            check_import(graph)
        except ImportCheckError as error:
            result.status, result.reason = "fail", _short(error)
            break
        except Exception as error:  # an importer crash is a failure too, with its type
            result.status, result.reason = "fail", f"crash: {type(error).__name__}: {_short(error)}"
            break
        result.status = "pass"
        if semantics and result.graphs == 1 and not result.semantics:
            result.semantics = _semantics_problem(graph, inputs)
    if result.status == "no graph":
        result.reason = no_graph[0] if no_graph else "no samples"
    result.aten_ops = sorted(ops)
    return result


def _semantics_problem(graph: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> str:
    from neuron_mlir.frontend.import_check import ImportCheckError, check_import

    if sum(n.op == "placeholder" for n in graph.graph.nodes) != len(inputs):
        return ""  # AOTAutograd added inputs of its own (effect tokens): the sample's tensors do not fill them
    try:
        check_import(graph, inputs)
    except ImportCheckError as error:
        return _short(error)
    except Exception as error:
        return f"{type(error).__name__}: {_short(error)}"
    return ""


# -- running -----------------------------------------------------------------------------------------------------


def _quietly(function: Callable[..., EntryResult], *args: Any) -> EntryResult:
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        return function(*args)


def _worker(task: tuple[int, int, bool]) -> EntryResult:
    index, max_samples, semantics = task
    op = _op_db()[index]
    try:
        return _quietly(check_entry, op, max_samples, semantics)
    except Exception as error:  # a harness bug must not lose the whole sweep
        return EntryResult(entry_name(op), "fail", f"harness: {type(error).__name__}: {_short(error)}")


def sweep(
    names: Iterable[str] | None = None, max_samples: int = DEFAULT_MAX_SAMPLES, jobs: int = 1, semantics: bool = True
) -> list[EntryResult]:
    """Check every op_db entry (or those whose name or op name is in `names`), `jobs` processes in parallel."""
    database = _op_db()
    wanted = set(names) if names is not None else None
    indices = [i for i, op in enumerate(database) if wanted is None or op.name in wanted or entry_name(op) in wanted]
    tasks = [(i, max_samples, semantics) for i in indices]
    if jobs <= 1:
        return [_worker(task) for task in tasks]
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs, maxtasksperchild=50) as pool:
        return list(pool.imap(_worker, tasks, chunksize=4))


# -- reporting ---------------------------------------------------------------------------------------------------


def coverage(results: list[EntryResult]) -> tuple[int, int, int, float]:
    """(passed, failed, no graph, percentage of entries with graphs that pass)."""
    passed = sum(r.status == "pass" for r in results)
    failed = sum(r.status == "fail" for r in results)
    without = sum(r.status == "no graph" for r in results)
    return passed, failed, without, 100.0 * passed / max(1, passed + failed)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report(results: list[EntryResult], max_samples: int, seconds: float) -> str:
    """The markdown of docs/importer-coverage.md."""
    passed, failed, without, percent = coverage(results)
    version = torch.__version__.split("+")[0]
    lines = [
        "# Importer coverage on PyTorch's OpInfo database",
        "",
        "Generated by `make importer-coverage` (`python -m neuron_mlir.tools.opinfo_sweep`); do not edit.",
        "",
        f"torch {version}, {len(results)} entries of `op_db`, up to {max_samples} float32 CPU samples each, "
        "forward graphs from AOTAutograd with the backend's decompositions. An entry passes when every graph "
        "imported, verified and printed/re-parsed/re-printed identically.",
        "",
        "| | entries |",
        "|---|---|",
        f"| with graphs | {passed + failed} |",
        f"| pass | {passed} |",
        f"| fail | {failed} |",
        f"| no graph from AOTAutograd | {without} |",
        f"| **coverage** (pass / with graphs) | **{percent:.1f}%** |",
        "",
        f"Sweep time: {seconds:.0f} s.",
        "",
        "## Failures",
        "",
    ]
    failures = sorted((r for r in results if r.status == "fail"), key=lambda r: r.name)
    if failures:
        lines += ["| entry | reason |", "|---|---|"]
        lines += [f"| `{r.name}` | {_cell(r.reason)} |" for r in failures]
    else:
        lines.append("None.")
    mismatches = sorted((r for r in results if r.semantics), key=lambda r: r.name)
    lines += [
        "",
        "## Torch-level semantics differing from the graph on the first sample",
        "",
        "Random ops draw different numbers; anything else here is a bug to look at.",
        "",
    ]
    if mismatches:
        lines += ["| entry | difference |", "|---|---|"]
        lines += [f"| `{r.name}` | {_cell(r.semantics)} |" for r in mismatches]
    else:
        lines.append("None.")
    lines += ["", "## No graph", "", "Entries AOTAutograd produced no graph for, by reason.", ""]
    by_reason: dict[str, list[str]] = defaultdict(list)
    for r in results:
        if r.status == "no graph":
            by_reason[_reason_class(r.reason)].append(r.name)
    lines += ["| reason | entries |", "|---|---|"]
    for reason, names in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
        lines.append(f"| {_cell(reason)} | {', '.join(f'`{n}`' for n in sorted(names))} |")
    seen = Counter(op for r in results for op in r.aten_ops)
    lines += [
        "",
        "## ATen ops in the graphs",
        "",
        f"{len(seen)} distinct call targets appear in the graphs: " + ", ".join(f"`{o}`" for o in sorted(seen)),
        "",
    ]
    return "\n".join(lines)


def _reason_class(reason: str) -> str:
    """Group similar no-graph reasons: data-dependent shapes, unsupported outputs, ..."""
    reason = re.sub(r"\b[us]\d+\b", "u*", reason)
    reason = re.sub(r"\(\d+(, \d+)*\)|\[\d+(, \d+)*\]|\b\d+\b", "N", reason)
    return reason[:160]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated op or entry names (default: all of op_db)")
    parser.add_argument("--max-samples", type=int, default=DEFAULT_MAX_SAMPLES)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--no-semantics", action="store_true", help="skip the semantics check of the first sample")
    parser.add_argument("--output", type=Path, help="write the markdown report here")
    options = parser.parse_args(argv)
    names = options.ops.split(",") if options.ops else None
    started = time.perf_counter()
    results = sweep(names, options.max_samples, options.jobs, not options.no_semantics)
    seconds = time.perf_counter() - started
    text = report(results, options.max_samples, seconds)
    if options.output is not None:
        options.output.write_text(text)
    passed, failed, without, percent = coverage(results)
    for r in results:
        if r.status == "fail":
            print(f"FAIL {r.name}: {r.reason}")
    print(
        f"importer coverage: {percent:.1f}% ({passed} of {passed + failed} entries with graphs pass; "
        f"{without} without a graph) in {seconds:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
