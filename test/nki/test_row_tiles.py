"""nc_matmul's tile_position / tile_size: TensorE's row tiling mode, from NKI to the simulated core."""

import inspect

import ml_dtypes
import numpy as np
import pytest
from support import numpy_close

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl


def two_heads(q_t, k_t, tiled: bool):
    """Scores of two heads of 64 features whose Q^T and K^T share a [128, n] tile (head 0 on partitions 0..63,
    head 1 on 64..127): one matmul per head, in the two row tiles of the PE array when `tiled`."""
    rows, n = q_t.shape[1], k_t.shape[1]
    out = nl.ndarray((2, rows, n), nl.float32, buffer=nl.shared_hbm)
    q_tile, k_tile = nl.load(q_t), nl.load(k_t)
    for head in nl.static_range(2):
        scores = nl.ndarray((rows, n), nl.float32, buffer=nl.psum)
        low = head * 64
        position, size = ((low, 0), (64, 128)) if tiled else ((), ())
        nisa.nc_matmul(
            scores, q_tile[low : low + 64, :], k_tile[low : low + 64, :], tile_position=position, tile_size=size
        )
        nl.store(out[head], nl.copy(scores))
    return out


two_heads_tiled = nki.jit(lambda q_t, k_t: two_heads(q_t, k_t, True))
two_heads_full = nki.jit(lambda q_t, k_t: two_heads(q_t, k_t, False))


def test_two_heads_in_the_two_row_tiles():
    """The same scores with and without row tiles; with them the two products stream together, so TensorE is done
    one product sooner."""
    rng = np.random.default_rng(0)
    q_t = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    k_t = rng.standard_normal((128, 512)).astype(ml_dtypes.bfloat16)
    tiled = nki.benchmark(two_heads_tiled, target="trn2")(q_t, k_t)
    full = nki.benchmark(two_heads_full, target="trn2")(q_t, k_t)
    wide_q, wide_k = q_t.astype(np.float32), k_t.astype(np.float32)
    expected = np.stack([wide_q[h * 64 : h * 64 + 64].T @ wide_k[h * 64 : h * 64 + 64] for h in range(2)])
    numpy_close(tiled.outputs, expected)
    np.testing.assert_array_equal(tiled.outputs, full.outputs)
    module = nki.ir_text(nki.trace(two_heads_tiled, q_t, k_t, target="trn2"))
    assert "{row_tile_start = 64 : i64, row_tile_size = 64 : i64}" in module
    matmul_ns = 512 / 2.4
    events = tiled.profile.events
    matmuls = [
        (start, end)
        for start, end, index in zip(events.start, events.end, events.instruction, strict=True)
        if tiled.profile.instructions[index].opcode == "nc_matmul"
    ]
    assert len(matmuls) == 2
    assert matmuls[0] == matmuls[1]
    assert matmuls[0][1] - matmuls[0][0] == pytest.approx(matmul_ns)


@nki.jit
def quarter_on_trn1(q_t, k_t):
    scores = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(scores, nl.load(q_t)[0:32, :], nl.load(k_t)[0:32, :], tile_position=(0, 0), tile_size=(32, 128))
    return nl.copy(scores)


@nki.jit
def position_alone(q_t, k_t):
    scores = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(scores, nl.load(q_t)[0:64, :], nl.load(k_t)[0:64, :], tile_position=(0, 0))
    return nl.copy(scores)


@nki.jit
def column_tiles(q_t, k_t):
    scores = nl.ndarray((64, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(scores, nl.load(q_t)[0:64, 0:64], nl.load(k_t)[0:64, :], tile_position=(0, 64), tile_size=(64, 64))
    return nl.copy(scores)


@pytest.mark.parametrize(
    ("kernel", "target", "rule"),
    [
        (quarter_on_trn1, "trn1", "neuron.nc_matmul: row tile size 32 is not one trn1 has (row tile sizes: 64)"),
        (position_alone, "trn2", "tile_position and tile_size enable tiling mode together"),
        (column_tiles, "trn2", "column tiling is not supported"),
    ],
)
def test_tiling_mode_diagnostics(kernel, target, rule):
    q_t = np.zeros((128, 128), ml_dtypes.bfloat16)
    k_t = np.zeros((128, 512), ml_dtypes.bfloat16)
    with pytest.raises(nki.NkiError) as caught:
        nki.simulate(kernel, target=target)(q_t, k_t)
    message = str(caught.value)
    assert message.startswith("nki.isa.nc_matmul: ")
    assert rule in message
    lines, first = inspect.getsourcelines(kernel.function)
    line = first + next(i for i, text in enumerate(lines) if "nisa.nc_matmul(" in text)
    assert f"{inspect.getsourcefile(kernel.function)}:{line} " in message
