"""Fused self-attention in one kernel, in the style of NKI's fused attention tutorial [nki-attention-tutorial]:
`softmax(q @ k.T * scale) @ v` for one head, q, k, v and the result [seq, d_head] in HBM, with the [seq, seq]
scores never leaving the chip.

For each block of 128 query rows:

1. the scores' row block [128, seq] is computed in 512-column PSUM tiles by TensorE, with q^T and k^T as its
   operands (the head dimension on the partitions: TensorE contracts over partitions), scaled on the way to SBUF;
2. softmax's numerator comes from one ScalarE pass, `exp(s - rowmax)`, which also sums each row; the division
   waits until the end, where it is one multiply of a [128, d_head] tile instead of a [128, seq] one;
3. the numerator is transposed 128 keys at a time on TensorE (keys to the partitions) and multiplied by the
   matching 128 rows of v, accumulating the [128, d_head] result in one PSUM tile across the key blocks.

With `causal=True` an `affine_select` on GpSimdE sets the scores of keys after each query row's to a large
negative number before the row max (so they add nothing), and the key blocks past the diagonal are skipped in
step 3; the query loop is then unrolled, as the select's offset is the block's first row.

q and k arrive row-major, so their transposes are loaded by `nl.load_transpose2d`, which is one DMA transpose
where the target has it (trn2, trn3, 2-byte dtypes) and an element-strided load elsewhere.

    python examples/kernels/attention.py      # against NumPy on the simulated trn1 and trn2, with latencies
"""

from __future__ import annotations

import math

import numpy as np

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl

P = nl.tile_size.pmax  # query rows per block, keys per transposed block
KEYS_PER_SCORE_TILE = nl.tile_size.gemm_moving_fmax  # score columns per PSUM tile (one bank of fp32)
MASKED = -3.0e38  # a masked score: finite, so the row max stays a number, and exp(MASKED - max) is 0


@nki.jit
def fused_self_attention(
    q: nki.NkiTensor, k: nki.NkiTensor, v: nki.NkiTensor, scale: float = 0.0, causal: bool = False
) -> nki.NkiTensor:
    """softmax(q @ k.T * scale) @ v for q, k, v [seq, d_head]; scale 0 means 1 / sqrt(d_head); `causal`: query
    row r sees keys 0..r only."""
    seq, d_head = q.shape
    if k.shape != (seq, d_head) or v.shape != (seq, d_head):
        raise ValueError("q, k and v must have the same shape [seq, d_head]")
    if d_head > P or seq % P:
        raise ValueError(f"d_head must be at most {P} and seq a multiple of {P}")
    scale = scale or 1.0 / math.sqrt(d_head)
    score_tile = KEYS_PER_SCORE_TILE if seq % KEYS_PER_SCORE_TILE == 0 else P
    out = nl.ndarray((seq, d_head), dtype=q.dtype, buffer=nl.shared_hbm)

    k_t = nl.load_transpose2d(k)  # [d_head, seq], loaded once for every query block
    # v as [128 keys, key block, d_head], also loaded once: per query block its rows would be 128-byte DMAs
    v_blocks = nl.load(v.reshape((seq // P, P, d_head)).permute(1, 0, 2))
    for i in nl.affine_range(seq // P):
        rows = nl.ds(i * P, P)
        q_t = nl.load_transpose2d(q[rows, :])  # [d_head, 128]

        scores = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(seq // score_tile):
            columns = nl.ds(j * score_tile, score_tile)
            product = nl.ndarray((P, score_tile), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=product, stationary=q_t, moving=k_t[:, columns])
            nisa.activation(dst=scores[:, columns], op=nl.copy, data=product, scale=scale)

        if causal:  # key c stays where i * P + p - c >= 0 (p the partition); the others lose every exp
            nisa.affine_select(
                dst=scores,
                pattern=[[-1, seq]],
                channel_multiplier=1,
                on_true_tile=scores,
                on_false_value=MASKED,
                cmp_op=nl.greater_equal,
                offset=i * P,
            )
        negated_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=negated_max, op=nl.maximum, data=scores, axis=1, negate=True)
        # the numerator in v's dtype: TensorE multiplies it by v next
        numerator = nl.ndarray((P, seq), dtype=v.dtype, buffer=nl.sbuf)
        row_sums = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=numerator, op=nl.exp, data=scores, bias=negated_max, reduce_op=nl.add, reduce_res=row_sums)

        attended = nl.ndarray((P, d_head), dtype=nl.float32, buffer=nl.psum)
        # causal: the key blocks after the diagonal's hold only zeros of the numerator, so they are skipped
        # (the query loop is unrolled by then: affine_select's offset needs i as a number)
        for t in nl.affine_range(i + 1 if causal else seq // P):
            keys = nl.ds(t * P, P)
            numerator_t = nl.ndarray((P, P), dtype=v.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=numerator_t, src=nl.transpose(numerator[:, keys]))
            # the first key block overwrites the fresh PSUM tile, the following ones accumulate
            nisa.nc_matmul(dst=attended, stationary=numerator_t, moving=v_blocks[:, t, :])

        inverse_sums = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inverse_sums, data=row_sums)
        result = nl.ndarray((P, d_head), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=result, data=attended, op0=nl.multiply, operand0=inverse_sums)
        nl.store(out[rows, :], result)
    return out


def reference_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float = 0.0, causal: bool = False
) -> np.ndarray:
    q32, k32, v32 = (a.astype(np.float32) for a in (q, k, v))
    scores = q32 @ k32.T * (scale or 1.0 / math.sqrt(q.shape[1]))
    if causal:
        scores = np.where(np.tri(len(q), dtype=bool), scores, -np.inf)
    exps = np.exp(scores - scores.max(-1, keepdims=True))
    return ((exps / exps.sum(-1, keepdims=True)) @ v32).astype(q.dtype)


if __name__ == "__main__":
    import ml_dtypes

    rng = np.random.default_rng(0)
    for dtype in (np.float32, ml_dtypes.bfloat16):
        q, k, v = (rng.standard_normal((1024, 64)).astype(dtype) for _ in range(3))
        expected = reference_attention(q, k, v).astype(np.float32)
        for target in ("trn1", "trn2"):
            run = nki.benchmark(fused_self_attention, target=target)(q, k, v)
            error = float(np.abs(run.outputs.astype(np.float32) - expected).max())
            print(f"{np.dtype(dtype).name:<9} {target}  {run.latency_us:8.1f} us   max error {error:.2e}")
