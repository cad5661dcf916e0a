"""Elementwise addition of two HBM tensors, 128 rows per tile: the smallest complete NKI kernel.

python examples/kernels/tensor_add.py      # runs it on the simulated NeuronCore and prints the profile
"""

from __future__ import annotations

import numpy as np

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl


@nki.jit
def tensor_add(a: nki.NkiTensor, b: nki.NkiTensor) -> nki.NkiTensor:
    """a + b for [R, C] tensors whose row count R is a multiple of 128 (or below it)."""
    rows, columns = a.shape
    out = nl.ndarray((rows, columns), dtype=a.dtype, buffer=nl.shared_hbm)
    tile_rows = min(rows, nl.tile_size.pmax)
    for i in nl.affine_range(rows // tile_rows):
        block = nl.ds(i * tile_rows, tile_rows)
        a_tile = nl.ndarray((tile_rows, columns), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((tile_rows, columns), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a[block, :])
        nisa.dma_copy(dst=b_tile, src=b[block, :])
        sum_tile = nl.ndarray((tile_rows, columns), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=sum_tile, data1=a_tile, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=out[block, :], src=sum_tile)
    return out


@nki.jit
def tensor_add_nl(a: nki.NkiTensor, b: nki.NkiTensor) -> nki.NkiTensor:
    """The same sum written with nki.language's tile functions."""
    rows, columns = a.shape
    out = nl.ndarray((rows, columns), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // nl.tile_size.pmax):
        rows_i = slice(i * nl.tile_size.pmax, (i + 1) * nl.tile_size.pmax)
        nl.store(out[rows_i, :], nl.add(nl.load(a[rows_i, :]), nl.load(b[rows_i, :])))
    return out


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    y = rng.standard_normal((512, 1024)).astype(np.float32)
    result = nki.benchmark(tensor_add, target="trn1")(x, y)
    print("max error", float(np.abs(result.outputs - (x + y)).max()))
    print(result.summary())
