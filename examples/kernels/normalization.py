"""Row-wise kernels of transformer layers: RMSNorm, softmax and layer norm over the last axis of [N, D] tensors.

Rows go to partitions, 128 at a time (a last, shorter tile takes the remainder); a row's statistics are
per-partition columns [P, 1], which VectorE and ScalarE broadcast along the free axis. Weights ([D] vectors) are
loaded once and broadcast across the partitions on TensorE.

    python examples/kernels/normalization.py      # each kernel against NumPy, with its simulated latency
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl

P = nl.tile_size.pmax


def _row_tiles(rows: int) -> Iterator[tuple[Any, int]]:
    """(first row, row count) of each tile: full tiles in a traced loop, then the remainder."""
    for i in nl.affine_range(rows // P):
        yield i * P, P
    if rows % P:
        yield rows - rows % P, rows % P


def _rows_of(weight: nki.NkiTensor, columns: int) -> nki.NkiTensor:
    """A [D] weight vector as a [P, D] SBUF tile, every partition holding it."""
    return nl.broadcast_to(nl.load(weight.reshape((1, columns)), dtype=nl.float32), (P, columns))


@nki.jit
def rms_norm(x: nki.NkiTensor, weight: nki.NkiTensor, eps: float = 1e-6) -> nki.NkiTensor:
    """x / sqrt(mean(x^2, -1) + eps) * weight."""
    rows, columns = x.shape
    out = nl.ndarray((rows, columns), dtype=x.dtype, buffer=nl.shared_hbm)
    weight_rows = _rows_of(weight, columns)
    for first, count in _row_tiles(rows):
        block = nl.ds(first, count)
        tile = nl.load(x[block, :], dtype=nl.float32)
        squares = nl.ndarray((count, columns), dtype=nl.float32)
        sum_squares = nl.ndarray((count, 1), dtype=nl.float32)
        nisa.activation(squares, nl.square, tile, reduce_op=nl.add, reduce_res=sum_squares)
        # rsqrt(sum / D + eps) in one ScalarE pass
        inverse_rms = nl.ndarray((count, 1), dtype=nl.float32)
        nisa.activation(inverse_rms, nl.rsqrt, sum_squares, scale=1.0 / columns, bias=eps)
        normalised = nl.ndarray((count, columns), dtype=x.dtype)
        nisa.scalar_tensor_tensor(
            dst=normalised,
            data=tile,
            op0=nl.multiply,
            operand0=inverse_rms,
            op1=nl.multiply,
            operand1=weight_rows[0:count, :],
        )
        nl.store(out[block, :], normalised)
    return out


@nki.jit
def softmax(x: nki.NkiTensor) -> nki.NkiTensor:
    """exp(x - max) / sum(exp(x - max)) along the last axis."""
    rows, columns = x.shape
    out = nl.ndarray((rows, columns), dtype=x.dtype, buffer=nl.shared_hbm)
    for first, count in _row_tiles(rows):
        block = nl.ds(first, count)
        tile = nl.load(x[block, :], dtype=nl.float32)
        negated_max = nl.ndarray((count, 1), dtype=nl.float32)
        nisa.tensor_reduce(negated_max, nl.maximum, tile, axis=1, negate=True)
        exps = nl.ndarray((count, columns), dtype=nl.float32)
        sums = nl.ndarray((count, 1), dtype=nl.float32)
        nisa.activation(exps, nl.exp, tile, bias=negated_max, reduce_op=nl.add, reduce_res=sums)
        inverse = nl.ndarray((count, 1), dtype=nl.float32)
        nisa.reciprocal(inverse, sums)
        probabilities = nl.ndarray((count, columns), dtype=x.dtype)
        nisa.tensor_scalar(probabilities, exps, nl.multiply, inverse)
        nl.store(out[block, :], probabilities)
    return out


@nki.jit
def layer_norm(x: nki.NkiTensor, weight: nki.NkiTensor, bias: nki.NkiTensor, eps: float = 1e-5) -> nki.NkiTensor:
    """(x - mean) / sqrt(var + eps) * weight + bias along the last axis (statistics by bn_stats/bn_aggr)."""
    rows, columns = x.shape
    chunk = nl.tile_size.bn_stats_fmax
    chunks = -(-columns // chunk)
    out = nl.ndarray((rows, columns), dtype=x.dtype, buffer=nl.shared_hbm)
    weight_rows, bias_rows = _rows_of(weight, columns), _rows_of(bias, columns)
    for first, count in _row_tiles(rows):
        block = nl.ds(first, count)
        tile = nl.load(x[block, :], dtype=nl.float32)
        stats = nl.ndarray((count, nisa.BN_STATS_SIZE * chunks), dtype=nl.float32)
        for c in nl.static_range(chunks):
            width = min(chunk, columns - c * chunk)
            nisa.bn_stats(stats[:, nl.ds(c * nisa.BN_STATS_SIZE, nisa.BN_STATS_SIZE)], tile[:, nl.ds(c * chunk, width)])
        mean_var = nl.ndarray((count, 2), dtype=nl.float32)
        nisa.bn_aggr(mean_var, stats)
        inverse_std = nl.ndarray((count, 1), dtype=nl.float32)
        nisa.activation(inverse_std, nl.rsqrt, mean_var[:, 1:2], bias=eps)
        centred = nl.ndarray((count, columns), dtype=nl.float32)
        nisa.tensor_scalar(centred, tile, nl.subtract, mean_var[:, 0:1], op1=nl.multiply, operand1=inverse_std)
        scaled = nl.ndarray((count, columns), dtype=nl.float32)
        nisa.tensor_tensor(scaled, centred, weight_rows[0:count, :], nl.multiply)
        normalised = nl.ndarray((count, columns), dtype=x.dtype)
        nisa.tensor_tensor(normalised, scaled, bias_rows[0:count, :], nl.add)
        nl.store(out[block, :], normalised)
    return out


def reference_rms_norm(x: np.ndarray, weight: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x32 = x.astype(np.float32)
    return (x32 / np.sqrt((x32 * x32).mean(-1, keepdims=True) + eps) * weight).astype(x.dtype)


def reference_softmax(x: np.ndarray) -> np.ndarray:
    exps = np.exp(x - x.max(-1, keepdims=True))
    return exps / exps.sum(-1, keepdims=True)


def reference_layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    centred = x - x.mean(-1, keepdims=True)
    return centred / np.sqrt(centred.var(-1, keepdims=True) + eps) * weight + bias


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 768)).astype(np.float32)
    weight, bias = rng.standard_normal(768).astype(np.float32), rng.standard_normal(768).astype(np.float32)
    cases = [
        (rms_norm, (x, weight), reference_rms_norm(x, weight)),
        (softmax, (x,), reference_softmax(x)),
        (layer_norm, (x, weight, bias), reference_layer_norm(x, weight, bias)),
    ]
    for kernel, args, expected in cases:
        run = nki.benchmark(kernel, target="trn1")(*args)
        error = float(np.abs(run.outputs - expected).max())
        print(f"{kernel.__name__:<10} {run.latency_us:8.1f} us   max error {error:.2e}")
