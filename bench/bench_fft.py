"""FFTs on the simulated NeuronCore: simulated time, MFU and roofline of DFT-matmul transforms.

    python bench/bench_fft.py [--target trn2] [--cases fnet,rfft,spectral]

Each case compiles with torch.compile(backend="neuron-mlir") (compile cache off), runs once, and reports the
compile time, the simulated time of its graph, matmul MFU and the share of the roofline bound reached, the
largest difference to eager PyTorch and the nodes that fell back to the CPU (expected: none):

* fnet: FNet's token-mixing layer (real part of a 2-D DFT over tokens and hidden, residual layer norm,
  feed-forward block), inference, at 128 x 256 and 512 x 768;
* rfft: one-sided spectra of 256 signals of 1024 points and back (rfft, irfft);
* spectral: an FNO-style spectral convolution (rfft, product with complex weights, irfft), 64 x 512.

With --device, each case runs on the `neuron` device instead: eagerly (every op its own program, complex values
as pairs there too), then compiled over the device tensors, and the simulated time each puts on the device's
stream is reported next to the ops that ran on the host (expected: none) and the largest difference to eager
PyTorch on the CPU.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("NEURON_MLIR_CACHE_DIR", "off")

import torch

import neuron_mlir


class FNetMixing(torch.nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.feed_forward = torch.nn.Sequential(
            torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(), torch.nn.Linear(4 * hidden, hidden)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.norm(x + torch.fft.fft2(x).real)
        return mixed + self.feed_forward(mixed)


def _cases() -> dict[str, list[tuple[str, Callable[..., Any], list[torch.Tensor]]]]:
    torch.manual_seed(0)
    weights = torch.randn(64, 257, dtype=torch.complex64)
    return {
        "fnet": [
            (f"fnet {tokens}x{hidden}", FNetMixing(hidden).eval(), [torch.randn(1, tokens, hidden)])
            for tokens, hidden in ((128, 256), (512, 768))
        ],
        "rfft": [
            (
                "rfft+irfft 256x1024",
                lambda x: torch.fft.irfft(torch.fft.rfft(x) * 0.5, n=1024),
                [torch.randn(256, 1024)],
            )
        ],
        "spectral": [
            (
                "spectral conv 64x512",
                lambda x, w: torch.fft.irfft(torch.fft.rfft(x, norm="ortho") * w, n=512, norm="ortho"),
                [torch.randn(64, 512), weights],
            )
        ],
    }


def run_case(name: str, fn: Callable[..., Any], inputs: list[torch.Tensor], target: str) -> None:
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(fn, backend="neuron-mlir", options={"target": target})
    started = time.perf_counter()
    with torch.no_grad():
        actual = compiled(*inputs)
        expected = fn(*inputs)
    seconds = time.perf_counter() - started
    error = (actual - expected).abs().max().item()
    stats = neuron_mlir.stats()
    for profile in neuron_mlir.profiles().values():
        summary = profile.summary().splitlines()
        total = next(line for line in summary if "total time" in line).split()[-2:]
        roofline = next(line for line in summary if "roofline bound" in line).split("%")[0].split()[-1]
        mfu = next(line for line in summary if "MFU" in line).split("MFU")[1].split()[0]
        print(
            f"| {name} | {seconds:.1f} s | {' '.join(total)} | {mfu} | {roofline}% | {error:.1e} | "
            f"{stats['nodes_fallen_back']} |"
        )


def run_on_device(name: str, fn: Callable[..., Any], inputs: list[torch.Tensor], target: str) -> None:
    from neuron_mlir.frontend.device import eager, streams

    torch._dynamo.reset()
    neuron_mlir.reset()
    eager.reset()
    with torch.no_grad():
        expected = fn(*inputs)  # before a module moves to the device (in place)
        on_device = fn.to("neuron") if isinstance(fn, torch.nn.Module) else fn
        arguments = [t.to("neuron") for t in inputs]
        stream = streams.current_stream()

        def simulated(call: Callable[[], Any]) -> tuple[Any, float]:
            torch.neuron.synchronize()  # type: ignore[attr-defined]  # the device module torch loads
            start = stream.simulated_ns
            result = call()
            torch.neuron.synchronize()  # type: ignore[attr-defined]
            return result, stream.simulated_ns - start

        actual, eager_ns = simulated(lambda: on_device(*arguments))
        compiled = torch.compile(on_device, backend="neuron-mlir", options={"target": target})
        compiled(*arguments)  # the first call compiles
        compiled_actual, compiled_ns = simulated(lambda: compiled(*arguments))
    error = max((r.cpu() - expected).abs().max().item() for r in (actual, compiled_actual))
    host = sum(eager.EAGER_STATS.host_ops.values())
    native = sum(eager.EAGER_STATS.native_ops.values())
    print(f"| {name} | {native} | {host} | {eager_ns / 1000:.1f} us | {compiled_ns / 1000:.1f} us | {error:.1e} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="trn2")
    parser.add_argument("--cases", default="fnet,rfft,spectral")
    parser.add_argument("--device", action="store_true", help="eagerly on the neuron device, then compiled there")
    options = parser.parse_args()
    if options.device:
        os.environ["NEURON_MLIR_TARGET"] = options.target  # the device's core, read when its memory is made
        columns = "eager ops on the device | on the host | simulated, eager | simulated, compiled | max error"
        run = run_on_device
    else:
        columns = "compile + run | simulated | MFU | of roofline | max error | CPU nodes"
        run = run_case
    cases = _cases()
    print(f"| case | {columns} |")
    print("|---" * (columns.count("|") + 2) + "|")
    for family in options.cases.split(","):
        for name, fn, inputs in cases[family]:
            run(name, fn, inputs, options.target)


if __name__ == "__main__":
    main()
