"""Where the simulated time went, by the model's own structure: module path and forward/backward phase.

Every instruction carries the location of the op it came from (`file:line (model.layers.0.mlp)`), and every
profile counts busy time per location. This module rolls those up the module hierarchy (time spent in
`model.layers.0.mlp` also counts for `model.layers.0`, `model.layers` and `model`) and splits it by phase:
graphs named `*_forward` or `*_inference` are the forward phase, `*_backward` the backward phase.

Busy time is the sum of the durations of the instructions attributed to a module, over all engines and DMA
queues; since engines overlap, it can exceed the wall-clock simulated time, and the table shows both.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

UNATTRIBUTED = "(no module)"
_MODULE = re.compile(r"\(([^()]*)\)\s*$")


def module_of(location: str) -> str:
    """'model.layers.0' from 'model.py:12 (model.layers.0)', or the location itself when it is only a path."""
    match = _MODULE.search(location)
    if match:
        return match.group(1)
    if location and ":" not in location:
        return location
    return UNATTRIBUTED


def phase_of(graph_name: str) -> str:
    return "backward" if graph_name.endswith("_backward") else "forward"


def busy_by_module(profiles: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """module path -> phase -> busy ns, rolled up the module hierarchy."""
    table: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for graph, profile in profiles.items():
        phase = phase_of(graph)
        for location, busy in profile.location_ns.items():
            module = module_of(location)
            parts = module.split(".") if module != UNATTRIBUTED else [module]
            for depth in range(1, len(parts) + 1):
                table[".".join(parts[:depth])][phase] += busy
    return {module: dict(phases) for module, phases in table.items()}


def module_report(profiles: Mapping[str, Any], max_depth: int | None = None, top: int = 30) -> str:
    """A text table: per module path, busy time in the forward and backward phases and its share."""
    if not profiles:
        return "no profiles yet: run a compiled model first"
    table = busy_by_module(profiles)
    phases = ("forward", "backward")
    wall: defaultdict[str, float] = defaultdict(float)
    busy_total: defaultdict[str, float] = defaultdict(float)
    for graph, profile in profiles.items():
        wall[phase_of(graph)] += profile.total_ns
        busy_total[phase_of(graph)] += sum(profile.location_ns.values())
    lines = ["simulated time by phase (wall clock on the NeuronCore, engines overlapping):"]
    for phase in phases:
        if wall[phase]:
            lines.append(f"  {phase:<9} {wall[phase] / 1e3:>12.3f} us")
    lines.append("")
    lines.append(f"  {'module':<44} {'forward us':>12} {'backward us':>12} {'share':>7}")
    grand = sum(busy_total.values()) or 1.0
    rows = sorted(table.items(), key=lambda item: -sum(item[1].values()))
    shown = 0
    for module, by_phase in rows:
        if max_depth is not None and module.count(".") >= max_depth:
            continue
        total = sum(by_phase.values())
        cells = "".join(f" {by_phase.get(p, 0.0) / 1e3:>12.3f}" for p in phases)
        lines.append(f"  {module:<44}{cells} {total / grand:>7.1%}")
        shown += 1
        if shown >= top:
            break
    lines.append("  (busy time: instruction durations summed over engines and DMA queues)")
    return "\n".join(lines)


# profiles of the `neuron` device's eager work: single-op programs (`graph3_eager_mul_out`) and its copies
_EAGER_PROFILE = re.compile(r"^(graph\d+_eager_|device_copy_)")


def is_eager_profile(name: str) -> bool:
    """Whether profile `name` is the device's eager work rather than a graph of a compiled model."""
    return _EAGER_PROFILE.match(name) is not None


def eager_report(times: Mapping[tuple[str, str], Any], top: int = 30) -> str:
    """A text table of the device's eager ops: per op and the user's source line that issued it, the calls, how
    many ran on the host, and their simulated device time (all runs, not only the latest)."""
    grand = sum(entry.simulated_ns for entry in times.values()) or 1.0
    calls = sum(entry.calls for entry in times.values())
    lines = [
        f"eager ops on the device: {calls} calls, {grand / 1e3:.3f} us simulated, by op and source line",
        "",
        f"  {'op':<36} {'calls':>7} {'on host':>8} {'simulated us':>13} {'share':>7}  source line",
    ]
    rows = sorted(times.items(), key=lambda item: (-item[1].simulated_ns, -item[1].calls))
    for (op, line), entry in rows[:top]:
        lines.append(
            f"  {op:<36} {entry.calls:>7} {entry.host_calls:>8} {entry.simulated_ns / 1e3:>13.3f} "
            f"{entry.simulated_ns / grand:>7.1%}  {line or '(unknown)'}"
        )
    if len(rows) > top:
        lines.append(f"  ... {len(rows) - top} more (op, line) pairs")
    return "\n".join(lines)


def combined_trace(profiles: Mapping[str, Any]) -> dict[str, Any]:
    """One Chrome/Perfetto trace: a process per graph (named with its phase), a track per engine."""
    events: list[dict[str, Any]] = []
    for index, (graph, profile) in enumerate(profiles.items()):
        for event in profile.chrome_trace()["traceEvents"]:
            event = dict(event)
            event["pid"] = index
            if event.get("name") == "process_name":
                event["args"] = {"name": f"{graph} ({phase_of(graph)}, {profile.target})"}
            events.append(event)
    return {"traceEvents": events, "displayTimeUnit": "ns"}
