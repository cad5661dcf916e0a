"""neuron-mlir: a PyTorch compiler for AWS Trainium NeuronCores that runs without the hardware.

    model = torch.compile(model, backend="neuron-mlir")

The backend is found through the `torch_dynamo_backends` entry point, so no import is needed. This module is
the public Python API; the compiler itself lives in the subpackages (ir, frontend, lowering, backend_trn,
runtime, tools), see README.md. Importing it stays cheap: torch and xDSL load only when a function needs them.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def stats() -> dict[str, Any]:
    """Counts so far: graphs and nodes compiled, nodes that fell back to the CPU (by op), compile time, runs,
    programs compiled again for new sizes (`recompilations`), why a graph with symbolic sizes was compiled
    per size or traced again (`size_notes`), and under `fallback_random` the random ops drawn on the host, by op
    (`host_random_draws`), and the values they drew (`host_random_values`)."""
    from neuron_mlir.frontend.stats import STATS

    return STATS.as_dict()


def profiles() -> dict[str, Any]:
    """The profile of the latest run of each compiled graph, by graph name (e.g. 'graph0_forward')."""
    from neuron_mlir.frontend.stats import STATS

    # copies: runs share one stored profile per program (runtime.simulator.run_validated's share_profile)
    return {name: profile.copy() for name, profile in STATS.latest_profiles.items()}


def report(max_depth: int | None = None) -> str:
    """Simulated time of the latest runs of compiled graphs by module path (`model.layers.0.mlp`) and
    forward/backward phase; then, when the `neuron` device ran eager ops, their time by op and source line."""
    import sys

    from neuron_mlir.frontend.report import eager_report, is_eager_profile, module_report

    sources = sys.modules.get("neuron_mlir.frontend.device.sources")
    eager_times = sources.EAGER_TIMES if sources is not None else {}
    compiled = {name: profile for name, profile in profiles().items() if not is_eager_profile(name)}
    parts = [module_report(compiled, max_depth)] if compiled or not eager_times else []
    if eager_times:
        parts.append(eager_report(eager_times))
    return "\n\n".join(parts)


def write_trace(path: str) -> None:
    """Write one Chrome/Perfetto trace of the latest run of every compiled graph (a process per graph)."""
    import json

    from neuron_mlir.frontend.report import combined_trace

    with open(path, "w", encoding="utf-8") as handle:
        json.dump(combined_trace(profiles()), handle)


def as_torch_op(kernel: Any = None, **options: Any) -> Any:
    """Register an NKI kernel (`@nki.jit`) as a `torch.library` custom op: `as_torch_op(kernel, name="lib::op",
    out_shape=..., backward=...)`, or `@as_torch_op(name=..., out_shape=...)` above `@nki.jit` (docs/nki.md)."""
    from neuron_mlir.frontend.nki_ops import as_torch_op as register

    return register(kernel, **options)


def reset() -> None:
    """Forget stats and profiles and number graphs from 0 again; the `neuron` device forgets its eager programs
    (named like graphs) and counts.

    Call it together with `torch._dynamo.reset()`, which drops the compiled graphs themselves.
    """
    import sys

    from neuron_mlir.frontend.compile_graph import reset_graph_names
    from neuron_mlir.frontend.stats import reset as reset_stats

    reset_stats()
    reset_graph_names()
    eager = sys.modules.get("neuron_mlir.frontend.device.eager")
    if eager is not None:
        eager.reset()
