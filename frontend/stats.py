"""Counters behind `neuron_mlir.stats()`: what was compiled, what fell back to the CPU, and how long it took."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Stats:
    graphs_compiled: int = 0
    nodes_compiled: int = 0
    nodes_fallen_back: int = 0
    fallback_ops: Counter[str] = field(default_factory=Counter)
    compile_seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    compiled_ahead: int = 0
    """Graphs whose program a child process compiled while the forward ran (`frontend.compile_ahead`)."""
    recompilations: int = 0
    size_notes: list[str] = field(default_factory=list)
    """Why a graph with symbolic sizes is compiled once per size, and calls outside a bucketed size range."""
    runs: int = 0
    host_random_draws: Counter[str] = field(default_factory=Counter)
    """Random ops of compiled graphs drawn on the host under `fallback_random`, by op (`frontend.fallback_random`)."""
    host_random_values: int = 0
    """The random values (elements) those draws made."""
    pass_seconds: dict[str, float] = field(default_factory=dict)
    latest_profiles: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "graphs_compiled": self.graphs_compiled,
            "nodes_compiled": self.nodes_compiled,
            "nodes_fallen_back": self.nodes_fallen_back,
            "fallback_ops": dict(self.fallback_ops),
            "compile_seconds": self.compile_seconds,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "compiled_ahead": self.compiled_ahead,
            "recompilations": self.recompilations,
            "size_notes": list(self.size_notes),
            "runs": self.runs,
            "host_random_draws": dict(self.host_random_draws),
            "host_random_values": self.host_random_values,
            "pass_seconds": dict(self.pass_seconds),
        }


STATS = Stats()
_warned_ops: set[str] = set()


def record_compile(nodes: int, seconds: float) -> None:
    STATS.graphs_compiled += 1
    STATS.nodes_compiled += nodes
    STATS.compile_seconds += seconds


def record_compile_seconds(seconds: float) -> None:
    """Compile time spent without compiling a graph (a cache lookup that missed before a partitioning)."""
    STATS.compile_seconds += seconds


def record_fallback(op_name: str) -> bool:
    """Count a fallen-back node; True the first time this op falls back (time to warn)."""
    STATS.fallback_ops[op_name] += 1
    STATS.nodes_fallen_back += 1
    first = op_name not in _warned_ops
    _warned_ops.add(op_name)
    return first


def record_pass_times(timings: dict[str, float]) -> None:
    for name, seconds in timings.items():
        STATS.pass_seconds[name] = STATS.pass_seconds.get(name, 0.0) + seconds


def record_cache_hit() -> None:
    STATS.cache_hits += 1


def record_cache_miss() -> None:
    STATS.cache_misses += 1


def record_found_in_cache(key: str) -> None:
    """A graph's program found in the compile cache under `key`: a hit, or the taking of a program compiled ahead
    for it (counted once as such)."""
    from neuron_mlir.frontend.cache import compile_cache

    ahead = compile_cache().compiled_ahead
    if key in ahead:
        ahead.discard(key)
        STATS.compiled_ahead += 1
    else:
        STATS.cache_hits += 1


def record_host_random_draw(op_name: str, values: int) -> None:
    """One random op of a compiled graph drawn on the host (`fallback_random`), of `values` elements."""
    STATS.host_random_draws[op_name] += 1
    STATS.host_random_values += values


def record_recompilation() -> None:
    STATS.recompilations += 1


def record_size_note(note: str) -> None:
    STATS.size_notes.append(note)


def record_run(graph: str, profile: Any) -> None:
    STATS.runs += 1
    STATS.latest_profiles[graph] = profile


def reset() -> None:
    global STATS
    STATS.__init__()  # type: ignore[misc]
    _warned_ops.clear()
