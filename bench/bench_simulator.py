"""Simulator speed: wall time of running compiled programs on the simulated NeuronCore vs eager PyTorch.

    python bench/bench_simulator.py [--repeat 3] [--target trn2]

Each case runs through the whole pipeline (torch.compile with the neuron-mlir backend), then the compiled
function and eager PyTorch run on the same inputs, alternately, `--repeat` times; the table shows medians
and their ratio (simulator / eager: lower is better), plus the simulated time on the chip, the roofline bound
and MFU, so one run shows both how fast the simulator is and how good the generated code is.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import neuron_mlir

CASES: dict[str, tuple[Callable[..., torch.Tensor], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "matmul 2048x2048x2048 fp32": (lambda a, b: a @ b, lambda: (torch.randn(2048, 2048), torch.randn(2048, 2048))),
    "softmax 512x4096 fp32": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(512, 4096),)),
}


def _median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default="trn2")
    args = parser.parse_args()
    torch.manual_seed(0)
    header = f"{'case':<28} {'compile s':>9} {'sim wall s':>10} {'eager s':>9} {'ratio':>8} " \
             f"{'simulated us':>13} {'roofline us':>12} {'of roofline':>11} {'MFU':>6}"
    print(header)
    print("-" * len(header))
    for name, (fn, make_inputs) in CASES.items():
        torch._dynamo.reset()
        neuron_mlir.reset()
        inputs = make_inputs()
        compiled = torch.compile(fn, backend="neuron-mlir", options={"target": args.target, "check_races": False})
        result = compiled(*inputs)  # compiles, then runs once
        compile_seconds = neuron_mlir.stats()["compile_seconds"]
        torch.testing.assert_close(result, fn(*inputs), rtol=1e-4, atol=1e-4)
        simulator = _median_seconds(lambda: compiled(*inputs), args.repeat)  # noqa: B023
        eager = _median_seconds(lambda: fn(*inputs), max(args.repeat, 5))  # noqa: B023
        (profile,) = neuron_mlir.profiles().values()
        print(
            f"{name:<28} {compile_seconds:>9.2f} {simulator:>10.3f} {eager:>9.4f} {simulator / eager:>7.1f}x "
            f"{profile.total_ns / 1e3:>13.1f} {profile.roofline_ns / 1e3:>12.1f} "
            f"{profile.roofline_ns / profile.total_ns:>10.1%} {profile.mfu:>6.1%}"
        )


if __name__ == "__main__":
    main()
