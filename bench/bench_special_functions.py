"""The special functions of `frontend/special_functions.py` compiled and run on the simulated NeuronCore over
their whole domains, against eager fp32, element by element.

    python bench/bench_special_functions.py [--functions lgamma,bessel_j0] [--points 10000]

The unit tests evaluate the decompositions on the CPU over ~10^4 points each and compile only a few of them
(compiling every function takes minutes); this run compiles every one of them over the same kind of domain
(both signs of 1e-30 ... 1e30 by decades, -40 ... 40 densely with fp32 steps beside each integer, +-0, +-inf,
NaN; the unit interval's tails for erfinv and ndtri) and prints, per function, the compile time, whether any
node fell back to the CPU and the elements outside the fp32 tolerance (`compare.pointwise_mismatch`).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable

import torch

os.environ.setdefault("NEURON_MLIR_CACHE_DIR", "off")  # a cached program would hide a compile's cost

import neuron_mlir
from neuron_mlir.frontend.tensors import to_numpy
from neuron_mlir.ir.semantics.compare import pointwise_mismatch

SPECIAL = torch.special


def real_line(points: int) -> torch.Tensor:
    decades = torch.logspace(-30, 30, points // 5)
    near = torch.linspace(0.0, 40.0, points // 5)
    integers = torch.arange(1.0, 41.0)
    beside = torch.cat([integers.nextafter(integers + 1), integers.nextafter(integers - 1)])
    special = torch.tensor([0.0, math.inf, math.nan, 1.0, 2.0, 0.5])
    positive = torch.cat([decades, near, beside, special])
    return torch.cat([positive, -positive, torch.linspace(-40.0, 0.0, points // 5) + 0.25])


def unit_interval(points: int, signed: bool) -> torch.Tensor:
    dense = torch.linspace(-1.0 if signed else 0.0, 1.0, points // 2)
    tails = torch.cat([torch.logspace(-38, -1, points // 5), 1.0 - torch.logspace(math.log10(6e-8), -1, points // 10)])
    return torch.cat([dense, tails, -tails if signed else tails, torch.tensor([1.5, -1.5, math.nan])])


def functions(points: int) -> dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]]:
    line = real_line(points)
    bounded = line[line.isnan() | (line >= -1e4)]
    # below -1e4 eager's own zeta sums |x| terms one by one; below -100 Airy's phase has no fp32 bits left
    return {
        "lgamma": (torch.lgamma, line),
        "digamma": (torch.digamma, line),
        **{f"polygamma_{n}": (lambda x, n=n: torch.polygamma(n, x), bounded) for n in (1, 2, 3, 4)},
        "zeta": (lambda q: SPECIAL.zeta(3.0, q), bounded),
        "mvlgamma_3": (lambda x: torch.mvlgamma(x, 3), line[line.isnan() | (line > 1.0)]),
        "erfinv": (torch.erfinv, unit_interval(points, signed=True)),
        "ndtri": (SPECIAL.ndtri, unit_interval(points, signed=False)),
        "erfcx": (SPECIAL.erfcx, line),
        "log_ndtr": (SPECIAL.log_ndtr, line),
        "i0": (torch.i0, line),
        "i0e": (SPECIAL.i0e, line),
        "i1": (SPECIAL.i1, line),
        "i1e": (SPECIAL.i1e, line),
        "modified_bessel_i0": (SPECIAL.modified_bessel_i0, line),
        "modified_bessel_i1": (SPECIAL.modified_bessel_i1, line),
        "modified_bessel_k0": (SPECIAL.modified_bessel_k0, line),
        "modified_bessel_k1": (SPECIAL.modified_bessel_k1, line),
        "scaled_modified_bessel_k0": (SPECIAL.scaled_modified_bessel_k0, line),
        "scaled_modified_bessel_k1": (SPECIAL.scaled_modified_bessel_k1, line),
        "bessel_j0": (SPECIAL.bessel_j0, line),
        "bessel_j1": (SPECIAL.bessel_j1, line),
        "bessel_y0": (SPECIAL.bessel_y0, line),
        "bessel_y1": (SPECIAL.bessel_y1, line),
        "spherical_bessel_j0": (SPECIAL.spherical_bessel_j0, line),
        "airy_ai": (SPECIAL.airy_ai, line[line.isnan() | (line >= -100.0)]),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--functions", help="comma-separated names (default: all)")
    parser.add_argument("--points", type=int, default=10000, help="about this many points per function")
    options = parser.parse_args()
    table = functions(options.points)
    names = options.functions.split(",") if options.functions else list(table)
    print("| function | points | compile + run (s) | CPU fallback | outside the fp32 tolerance |")
    print("|---|---|---|---|---|")
    for name in names:
        function, points = table[name]
        torch._dynamo.reset()
        neuron_mlir.reset()
        start = time.perf_counter()
        actual = torch.compile(function, backend="neuron-mlir")(points)
        seconds = time.perf_counter() - start
        fallback = neuron_mlir.stats()["fallback_ops"] or "none"
        problem = pointwise_mismatch(to_numpy(actual), to_numpy(function(points))) or "none"
        print(f"| {name} | {points.numel()} | {seconds:.1f} | {fallback} | {problem} |", flush=True)


if __name__ == "__main__":
    main()
