"""The scaling model of bench/bench_scaling.py (docs/performance.md section 7): DDP's exposed communication and
FSDP2's event simulation on 2 and 4 ranks against hand-computed timelines from the collective cost model, and
the efficiency plot."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from neuron_mlir.runtime import collectives
from neuron_mlir.runtime.hardware import TRN2

_PATH = Path(__file__).resolve().parents[2] / "bench" / "bench_scaling.py"
_SPEC = importlib.util.spec_from_file_location("bench_scaling", _PATH)
assert _SPEC is not None
assert _SPEC.loader is not None
scaling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(scaling)

MIB = 2**20


def _all_reduce(size: int, ranks: int) -> float:
    return collectives.collective_ns("all_reduce", size, tuple(range(ranks)), TRN2)


@pytest.mark.parametrize("ranks", [2, 4])
def test_ddp_exposes_what_the_backward_does_not_hide(ranks):
    gradients = 60 * MIB  # buckets of 25, 25 and 10 MiB
    buckets = [25 * MIB, 25 * MIB, 10 * MIB]
    # a backward long enough that each bucket's all-reduce ends before the next is ready: only the last shows
    long = 1e9
    assert scaling.exposed_ns(long, gradients, ranks) == pytest.approx(_all_reduce(10 * MIB, ranks))
    # no backward to hide behind: every bucket's all-reduce in turn
    assert scaling.exposed_ns(0.0, gradients, ranks) == pytest.approx(sum(_all_reduce(b, ranks) for b in buckets))
    assert scaling.exposed_ns(long, gradients, 1) == 0.0


@pytest.mark.parametrize("ranks", [2, 4])
def test_fsdp_overlaps_gathers_with_compute_on_one_queue(ranks):
    layer, root, params = (1e6, 2e6), (5e5, 1e6), (1000, 500)
    compute = 2 * sum(layer) + sum(root)
    assert scaling.fsdp_ns(2, layer, root, params, 1) == pytest.approx(compute)

    def cost(kind: str, count: int) -> float:
        return collectives.collective_ns(kind, 4 * count, tuple(range(ranks)), TRN2)

    # by hand, for two layers (f, b: a layer's forward and backward; the queue runs one collective at a time)
    f, b = layer
    gather, gather_root = cost("all_gather", 1000), cost("all_gather", 500)
    scatter, scatter_root = cost("reduce_scatter", 1000), cost("reduce_scatter", 500)
    start0 = gather_root + gather  # the root's gather, then layer 0's, both issued at once
    gathered1 = start0 + gather  # layer 1's, issued as layer 0 starts
    start1 = max(start0 + f, gathered1)
    end_forward = start1 + f + root[0]
    regathered1 = max(gathered1, end_forward) + gather  # issued as the backward begins
    start1b = max(end_forward + root[1], regathered1)  # the root's backward first
    regathered0 = max(regathered1, start1b) + gather  # issued as layer 1's backward starts
    scattered1 = max(regathered0, start1b + b) + scatter
    start0b = max(start1b + b, regathered0)
    scattered0 = max(scattered1, start0b + b) + scatter
    queue, now = max(scattered0, start0b + b) + scatter_root, start0b + b
    assert scaling.fsdp_ns(2, layer, root, params, ranks) == pytest.approx(max(now, queue))
    assert scaling.fsdp_ns(2, layer, root, params, ranks) > compute


def test_the_plot_has_one_line_per_series_and_a_point_per_core_count():
    series = {
        "a, DDP": [(1, 1.0), (2, 0.99), (4, 0.98), (1024, 0.88)],
        "a, FSDP2": [(1, 1.0), (2, 0.96), (4, 0.95), (1024, 0.90)],
    }
    root = ElementTree.fromstring(scaling.efficiency_svg(series))
    namespace = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{namespace}polyline")
    assert len(lines) == 2
    for line, points in zip(lines, series.values(), strict=True):
        drawn = [tuple(map(float, pair.split(","))) for pair in line.get("points", "").split()]
        assert len(drawn) == len(points)
        xs = [x for x, _ in drawn]
        assert xs == sorted(xs)  # more cores to the right
        ys = [y for _, y in drawn]
        assert ys[0] == min(ys)  # 100% at the top
    labels = {text.text for text in root.iter(f"{namespace}text")}
    assert {"a, DDP", "a, FSDP2", "1024"} <= labels
