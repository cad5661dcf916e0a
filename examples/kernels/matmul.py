"""The tiled matrix multiplication of NKI's matmul tutorial [nki-matmul-tutorial], in its four stages.

Each computes `result[M, N] = lhsT[K, M].T @ rhs[K, N]` (the left operand arrives transposed, as TensorE reads
it: the contraction axis K on the partitions) and returns a new HBM tensor in lhsT's dtype.

1. `matmul_tiled`: one PSUM tile per [128, 512] block of the result, loading both operand tiles for every step
   of the contraction.
2. `matmul_hoisted`: the lhsT tiles of a row block are loaded once and reused across the column blocks (in
   slots as wide as the rhs tiles, as the published kernel allocates them).
3. `matmul_blocked_free`: the M and N dimensions are blocked, so each loaded operand tile feeds several matmuls.
4. `matmul_blocked`: K is blocked too, and partial sums accumulate in SBUF, which bounds the SBUF each block
   needs while keeping every loaded tile in use for a whole block of the result.

    python examples/kernels/matmul.py      # the four stages on the simulated trn1 core, with their latencies
"""

from __future__ import annotations

import numpy as np

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl

TILE_K = nl.tile_size.pmax  # contraction rows per matmul (partitions)
TILE_M = nl.tile_size.gemm_stationary_fmax  # result rows per matmul
TILE_N = nl.tile_size.gemm_moving_fmax  # result columns per matmul (one PSUM bank of fp32)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _check_shapes(lhsT: nki.NkiTensor, rhs: nki.NkiTensor) -> tuple[int, int, int]:
    K, M = lhsT.shape
    K_rhs, N = rhs.shape
    _require(K_rhs == K, "lhsT and rhs must have the same contraction dimension")
    _require(K % TILE_K == 0 and M % TILE_M == 0 and N % TILE_N == 0, "shapes must be multiples of the tiles")
    return K, M, N


@nki.jit
def matmul_tiled(lhsT: nki.NkiTensor, rhs: nki.NkiTensor) -> nki.NkiTensor:
    K, M, N = _check_shapes(lhsT, rhs)
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[nl.ds(k * TILE_K, TILE_K), nl.ds(m * TILE_M, TILE_M)])
                nisa.dma_copy(dst=rhs_tile, src=rhs[nl.ds(k * TILE_K, TILE_K), nl.ds(n * TILE_N, TILE_N)])
                # the first matmul into the fresh PSUM tile overwrites it, the following ones accumulate
                nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile)
            out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(dst=result[nl.ds(m * TILE_M, TILE_M), nl.ds(n * TILE_N, TILE_N)], src=out_tile)
    return result


@nki.jit
def matmul_hoisted(lhsT: nki.NkiTensor, rhs: nki.NkiTensor) -> nki.NkiTensor:
    K, M, N = _check_shapes(lhsT, rhs)
    k_tiles = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        # every contraction tile of this row block, loaded once for all column blocks. As in the published
        # kernel ([nki-samples-matmul] in docs/hardware-sources.md), each lhsT tile gets a TILE_N-wide slot of
        # which it fills TILE_M columns: at the tutorial's size that panel takes 64 KiB of each partition's SBUF
        # instead of 16, so two rhs column panels (64 KiB each) no longer fit beside it, and the next column's
        # loads cannot overlap this column's matmuls
        lhsT_tiles = nl.ndarray((TILE_K, k_tiles, TILE_N), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            nisa.dma_copy(
                dst=lhsT_tiles[:, k, nl.ds(0, TILE_M)], src=lhsT[nl.ds(k * TILE_K, TILE_K), nl.ds(m * TILE_M, TILE_M)]
            )
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = nl.ndarray((TILE_K, k_tiles, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(k_tiles):
                nisa.dma_copy(dst=rhs_tiles[:, k, :], src=rhs[nl.ds(k * TILE_K, TILE_K), nl.ds(n * TILE_N, TILE_N)])
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_tiles):
                nisa.nc_matmul(dst=acc, stationary=lhsT_tiles[:, k, nl.ds(0, TILE_M)], moving=rhs_tiles[:, k, :])
            out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(dst=result[nl.ds(m * TILE_M, TILE_M), nl.ds(n * TILE_N, TILE_N)], src=out_tile)
    return result


@nki.jit
def matmul_blocked_free(
    lhsT: nki.NkiTensor, rhs: nki.NkiTensor, tiles_in_block_m: int = 2, tiles_in_block_n: int = 2
) -> nki.NkiTensor:
    K, M, N = _check_shapes(lhsT, rhs)
    k_tiles = K // TILE_K
    block_m, block_n = TILE_M * tiles_in_block_m, TILE_N * tiles_in_block_n
    _require(M % block_m == 0 and N % block_n == 0, "M and N must be multiples of their blocks")
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m2 in nl.affine_range(M // block_m):
        lhsT_tiles = nl.ndarray((TILE_K, k_tiles, block_m), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            nisa.dma_copy(dst=lhsT_tiles[:, k, :], src=lhsT[nl.ds(k * TILE_K, TILE_K), nl.ds(m2 * block_m, block_m)])
        for n2 in nl.affine_range(N // block_n):
            rhs_tiles = nl.ndarray((TILE_K, k_tiles, block_n), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(k_tiles):
                nisa.dma_copy(dst=rhs_tiles[:, k, :], src=rhs[nl.ds(k * TILE_K, TILE_K), nl.ds(n2 * block_n, block_n)])
            for m1 in nl.affine_range(tiles_in_block_m):
                for n1 in nl.affine_range(tiles_in_block_n):
                    acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(k_tiles):
                        nisa.nc_matmul(
                            dst=acc,
                            stationary=lhsT_tiles[:, k, nl.ds(m1 * TILE_M, TILE_M)],
                            moving=rhs_tiles[:, k, nl.ds(n1 * TILE_N, TILE_N)],
                        )
                    out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=out_tile, src=acc)
                    rows = nl.ds(m2 * block_m + m1 * TILE_M, TILE_M)
                    nisa.dma_copy(dst=result[rows, nl.ds(n2 * block_n + n1 * TILE_N, TILE_N)], src=out_tile)
    return result


@nki.jit
def matmul_blocked(
    lhsT: nki.NkiTensor,
    rhs: nki.NkiTensor,
    tiles_in_block_m: int = 16,
    tiles_in_block_n: int = 2,
    tiles_in_block_k: int = 8,
) -> nki.NkiTensor:
    K, M, N = _check_shapes(lhsT, rhs)
    block_m, block_n, block_k = TILE_M * tiles_in_block_m, TILE_N * tiles_in_block_n, TILE_K * tiles_in_block_k
    _require(M % block_m == 0 and N % block_n == 0 and K % block_k == 0, "shapes must be multiples of the blocks")
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n2 in nl.affine_range(N // block_n):
        for m2 in nl.affine_range(M // block_m):
            # partial sums of the result block over the K blocks so far, kept in SBUF in fp32
            sums = nl.zeros((TILE_M, tiles_in_block_m, block_n), dtype=nl.float32, buffer=nl.sbuf)
            for k2 in nl.sequential_range(K // block_k):
                lhsT_tiles = nl.ndarray((TILE_K, tiles_in_block_k, block_m), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tiles = nl.ndarray((TILE_K, tiles_in_block_k, block_n), dtype=rhs.dtype, buffer=nl.sbuf)
                for k1 in nl.affine_range(tiles_in_block_k):
                    k_rows = nl.ds(k2 * block_k + k1 * TILE_K, TILE_K)
                    nisa.dma_copy(dst=lhsT_tiles[:, k1, :], src=lhsT[k_rows, nl.ds(m2 * block_m, block_m)])
                    nisa.dma_copy(dst=rhs_tiles[:, k1, :], src=rhs[k_rows, nl.ds(n2 * block_n, block_n)])
                for m1 in nl.affine_range(tiles_in_block_m):
                    for n1 in nl.affine_range(tiles_in_block_n):
                        acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for k1 in nl.affine_range(tiles_in_block_k):
                            nisa.nc_matmul(
                                dst=acc,
                                stationary=lhsT_tiles[:, k1, nl.ds(m1 * TILE_M, TILE_M)],
                                moving=rhs_tiles[:, k1, nl.ds(n1 * TILE_N, TILE_N)],
                            )
                        partial = sums[:, m1, nl.ds(n1 * TILE_N, TILE_N)]
                        nisa.tensor_tensor(dst=partial, data1=partial, data2=acc, op=nl.add)
            for m1 in nl.affine_range(tiles_in_block_m):
                out_tile = nl.ndarray((TILE_M, block_n), dtype=result.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=out_tile, src=sums[:, m1, :])
                rows = nl.ds(m2 * block_m + m1 * TILE_M, TILE_M)
                nisa.dma_copy(dst=result[rows, nl.ds(n2 * block_n, block_n)], src=out_tile)
    return result


STAGES = (matmul_tiled, matmul_hoisted, matmul_blocked_free, matmul_blocked)

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    K, M, N = 1024, 2048, 1024
    lhsT = rng.standard_normal((K, M)).astype(np.float32)
    rhs = rng.standard_normal((K, N)).astype(np.float32)
    expected = lhsT.T @ rhs
    for kernel in STAGES:
        run = nki.benchmark(kernel, target="trn1")(lhsT, rhs)
        error = float(np.abs(run.outputs - expected).max())
        print(f"{kernel.__name__:<22} {run.latency_us:10.1f} us   max error {error:.2e}")
