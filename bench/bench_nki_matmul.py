"""The four stages of the NKI matmul tutorial (examples/kernels/matmul.py) on the simulated core, against the
latencies the tutorial published for them.

    python bench/bench_nki_matmul.py [--size K M N] [--dtype bf16] [--target trn1] [--stage blocked]

The defaults are the tutorial's: `result[M, N] = lhsT[K, M].T @ rhs[K, N]` with K = 8192, M = 4096, N = 8192
in bf16 on trn1. Its legacy page (SDK 2.23, trn1.32xlarge) published 51.80 ms for the tiled kernel, 42.96 ms
with hoisted loads, 22.07 ms with blocked free dimensions and 6.97 ms fully blocked. Each stage runs once on
the simulator (the simulated core is deterministic); the table shows the simulated time, its ratio to the
published one, MFU on the target's TensorE peak, DMA traffic, and the largest error of 128 result rows against
NumPy's float32 product of the same inputs, relative to that product's largest magnitude.

Two more rows time the compiler's own matmul of the same product (`torch.compile(backend="neuron-mlir")` with the
same target, no kernel): `lhsT.T @ rhs` on the kernels' operands, and `a @ rhs` with `a = lhsT.T` stored row-major
(the compiler then builds A^T on chip with TensorE transposes). `--no-compiled` leaves them out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from kernels.matmul import matmul_blocked, matmul_blocked_free, matmul_hoisted, matmul_tiled

import neuron_mlir.nki as nki

PUBLISHED_MS = {"tiled": 51.80, "hoisted": 42.96, "blocked_free": 22.07, "blocked": 6.97}
STAGES = {
    "tiled": matmul_tiled,
    "hoisted": matmul_hoisted,
    "blocked_free": matmul_blocked_free,
    "blocked": matmul_blocked,
}
DTYPES = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", nargs=3, type=int, default=[8192, 4096, 8192], metavar=("K", "M", "N"))
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--target", default="trn1")
    parser.add_argument("--stage", choices=sorted(STAGES), action="append", help="run only these (repeatable)")
    parser.add_argument("--no-compiled", action="store_true", help="leave out the compiler's own matmul rows")
    options = parser.parse_args()
    k, m, n = options.size
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((k, m), dtype=np.float32).astype(DTYPES[options.dtype])
    rhs = rng.standard_normal((k, n), dtype=np.float32).astype(DTYPES[options.dtype])
    expected = lhsT[:, :128].astype(np.float32).T @ rhs.astype(np.float32)
    tutorial_size = (k, m, n) == (8192, 4096, 8192) and options.dtype == "bf16" and options.target == "trn1"
    print(f"lhsT [{k}, {m}]^T @ rhs [{k}, {n}], {options.dtype}, {options.target}")
    print(
        f"{'stage':<14} {'simulated':>12} {'published':>10} {'ratio':>6} {'MFU':>6} {'DMA':>10} {'rel error':>10} "
        f"{'wall':>7}"
    )
    for name in options.stage or list(STAGES):
        started = time.perf_counter()
        run = nki.benchmark(STAGES[name], target=options.target)(lhsT, rhs)
        wall = time.perf_counter() - started
        error = float(np.abs(run.outputs[:128].astype(np.float32) - expected).max() / np.abs(expected).max())
        simulated_ms = run.latency_ns / 1e6
        published = PUBLISHED_MS[name] if tutorial_size else None
        ratio = f"{simulated_ms / published:6.2f}" if published else f"{'':>6}"
        print(
            f"{name:<14} {simulated_ms:9.3f} ms {published or '':>10} {ratio} {run.profile.mfu:6.1%} "
            f"{run.profile.dma_bytes / 2**20:7.0f} MiB {error:10.2e} {wall:6.1f}s",
            flush=True,
        )
    if not options.no_compiled:
        for name, row_major in (("compiled", False), ("compiled a@b", True)):
            started = time.perf_counter()
            result, profile = _compiled_matmul(lhsT, rhs, options.target, row_major)
            wall = time.perf_counter() - started
            error = float(np.abs(result[:128].astype(np.float32) - expected).max() / np.abs(expected).max())
            print(
                f"{name:<14} {profile.total_ns / 1e6:9.3f} ms {'':>10} {'':>6} {profile.mfu:6.1%} "
                f"{profile.dma_bytes / 2**20:7.0f} MiB {error:10.2e} {wall:6.1f}s",
                flush=True,
            )


def _compiled_matmul(lhsT: np.ndarray, rhs: np.ndarray, target: str, row_major: bool) -> tuple[np.ndarray, Any]:
    """The product compiled by the neuron-mlir backend for `target`: `lhsT.T @ rhs` on the kernels' operands, or
    (`row_major`) `a @ rhs` with a = lhsT.T stored row-major; its result and the program's profile."""
    import torch

    import neuron_mlir
    from neuron_mlir.frontend.tensors import from_numpy, to_numpy

    torch._dynamo.reset()
    neuron_mlir.reset()
    options: dict[str, Any] = {"target": target, "check_races": False, "cache": False}
    left, right = from_numpy(lhsT), from_numpy(rhs)

    def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b

    def product_of_transposed(a_t: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a_t.t() @ b

    if row_major:
        result = torch.compile(product, backend="neuron-mlir", options=options)(left.t().contiguous(), right)
    else:
        result = torch.compile(product_of_transposed, backend="neuron-mlir", options=options)(left, right)
    (profile,) = neuron_mlir.profiles().values()
    return to_numpy(result), profile


if __name__ == "__main__":
    main()
