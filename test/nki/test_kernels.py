"""The example kernels (examples/kernels/) on the simulated core, against NumPy, at small shapes."""

import sys

import numpy as np
import pytest
from support import REPO, numpy_close

import neuron_mlir.nki as nki

sys.path.insert(0, str(REPO / "examples"))

from kernels.attention import fused_self_attention, reference_attention
from kernels.matmul import matmul_blocked, matmul_blocked_free, matmul_hoisted, matmul_tiled
from kernels.tensor_add import tensor_add, tensor_add_nl


@pytest.mark.parametrize("kernel", [tensor_add, tensor_add_nl])
def test_tensor_add(kernel):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 300)).astype(np.float32)
    b = rng.standard_normal((256, 300)).astype(np.float32)
    numpy_close(nki.simulate(kernel)(a, b), a + b)


def test_tensor_add_below_one_tile_of_rows():
    a = np.arange(40 * 7, dtype=np.float32).reshape(40, 7)
    numpy_close(nki.simulate(tensor_add)(a, a), a + a)


MATMUL_STAGES = [
    pytest.param(matmul_tiled, {}, id="tiled"),
    pytest.param(matmul_hoisted, {}, id="hoisted"),
    pytest.param(matmul_blocked_free, {"tiles_in_block_m": 2, "tiles_in_block_n": 1}, id="blocked_free"),
    pytest.param(matmul_blocked, {"tiles_in_block_m": 1, "tiles_in_block_n": 1, "tiles_in_block_k": 1}, id="blocked"),
]


@pytest.mark.parametrize(("kernel", "blocks"), MATMUL_STAGES)
def test_matmul_stage(kernel, blocks):
    rng = np.random.default_rng(1)
    lhsT = rng.standard_normal((256, 256)).astype(np.float32)
    rhs = rng.standard_normal((256, 1024)).astype(np.float32)
    numpy_close(nki.simulate(kernel)(lhsT, rhs, **blocks), lhsT.T @ rhs)


@pytest.mark.parametrize(("kernel", "blocks"), MATMUL_STAGES)
def test_matmul_stage_bf16(kernel, blocks):
    import ml_dtypes

    rng = np.random.default_rng(2)
    lhsT = rng.standard_normal((256, 256)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    result = nki.simulate(kernel)(lhsT, rhs, **blocks)
    assert result.dtype == lhsT.dtype
    expected = (lhsT.astype(np.float32).T @ rhs.astype(np.float32)).astype(ml_dtypes.bfloat16)
    numpy_close(result, expected)


def test_blocked_matmul_runs_faster_than_tiled_on_trn1():
    """Blocking reuses every loaded tile: less DMA for the same products, so less simulated time."""
    rng = np.random.default_rng(3)
    lhsT = rng.standard_normal((512, 512)).astype(np.float32)
    rhs = rng.standard_normal((512, 1024)).astype(np.float32)
    tiled = nki.benchmark(matmul_tiled, target="trn1")(lhsT, rhs)
    blocked = nki.benchmark(matmul_blocked, target="trn1")(
        lhsT, rhs, tiles_in_block_m=4, tiles_in_block_n=2, tiles_in_block_k=2
    )
    numpy_close(blocked.outputs, tiled.outputs)
    assert blocked.profile.dma_bytes < tiled.profile.dma_bytes
    assert blocked.latency_ns < tiled.latency_ns


@pytest.mark.parametrize(
    ("dtype", "seq", "target", "causal"),
    [("float32", 384, "trn2", False), ("bfloat16", 512, "trn2", True), ("bfloat16", 256, "trn1", False)],
)
def test_fused_self_attention(dtype, seq, target, causal):
    """384 keys take 128-column score tiles, 512 one 512-column tile; bf16 q/k load by DMA transposes on trn2
    and by strided loads on trn1; the causal case masks the scores and skips the key blocks past the diagonal."""
    import ml_dtypes

    numpy_dtype = np.float32 if dtype == "float32" else ml_dtypes.bfloat16
    rng = np.random.default_rng(4)
    q, k, v = ((rng.standard_normal((seq, 64)) * 2).astype(numpy_dtype) for _ in range(3))
    run = nki.benchmark(fused_self_attention, target=target)(q, k, v, causal=causal)
    assert run.outputs.dtype == q.dtype
    numpy_close(run.outputs, reference_attention(q, k, v, causal=causal))
    transposed_loads = 1 + seq // 128  # k once, q per block of 128 rows
    expected = transposed_loads if target == "trn2" and dtype == "bfloat16" else 0
    assert run.profile.opcode_counts.get("dma_transpose", 0) == expected
