"""Loops: `nl.affine_range` bodies traced once as `scf.for` loops, and unrolled where the kernel needs numbers."""

import sys

import numpy as np
import pytest
from support import REPO, numpy_close
from xdsl.dialects import scf
from xdsl.parser import Parser

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl
from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import neuron

sys.path.insert(0, str(REPO / "examples"))

from kernels.matmul import matmul_blocked, matmul_tiled


def _instructions(module) -> int:
    return sum(isinstance(op, neuron.InstructionOp) for op in module.walk())


def _loops(module) -> int:
    return sum(isinstance(op, scf.ForOp) for op in module.walk())


def test_the_tiled_matmul_traces_to_a_loop_nest_of_constant_size():
    """The column-block loop makes the PSUM accumulator and the result tile, so it is traced two trips at a time
    (two copies of the contraction loop); the contraction loop moves data and is left to neuron-unroll-loops."""
    small = [np.zeros((256, 256), np.float32), np.zeros((256, 2048), np.float32)]
    large = [np.zeros((1024, 512), np.float32), np.zeros((1024, 4096), np.float32)]
    small_module, large_module = nki.trace(matmul_tiled, *small), nki.trace(matmul_tiled, *large)
    assert _loops(small_module) == _loops(large_module) == 4
    assert _instructions(small_module) == _instructions(large_module) == 10


def test_the_traced_module_round_trips_through_the_parser():
    module = nki.trace(matmul_blocked, np.zeros((256, 256), np.float32), np.zeros((256, 1024), np.float32), 1, 1, 1)
    parsed = Parser(make_context(), str(module)).parse_module()
    parsed.verify()
    assert str(parsed) == str(module)


@pytest.mark.parametrize("kernel", [matmul_tiled, matmul_blocked])
def test_looped_and_unrolled_traces_agree(kernel):
    rng = np.random.default_rng(4)
    lhsT = rng.standard_normal((256, 256)).astype(np.float32)
    rhs = rng.standard_normal((256, 1024)).astype(np.float32)
    blocks = () if kernel is matmul_tiled else (1, 1, 1)  # tiles per block of M, N and K
    looped = nki.simulate(kernel)(lhsT, rhs, *blocks)
    unrolled = nki.Kernel(kernel.function, unroll=True)
    assert _loops(unrolled.trace(lhsT, rhs, *blocks)) == 0
    numpy_close(looped, nki.simulate(unrolled)(lhsT, rhs, *blocks))
    numpy_close(looped, lhsT.T @ rhs)


@nki.jit
def branch_on_index(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        rows = nl.ds(i * 128, 128)
        tile = nl.load(a[rows, :])
        scale = 2.0 if i == 0 else 3.0  # needs the index as a number: this loop is unrolled
        nl.store(out[rows, :], nl.multiply(tile, scale))
    return out


def test_a_branch_on_the_index_unrolls_that_loop():
    a = np.random.default_rng(5).standard_normal((384, 16)).astype(np.float32)
    assert _loops(nki.trace(branch_on_index, a)) == 0
    numpy_close(nki.simulate(branch_on_index)(a), np.concatenate([2 * a[:128], 3 * a[128:]]))


@nki.jit
def tiles_kept_after_the_loop(a):
    out = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.shared_hbm)
    tiles = []
    for i in nl.affine_range(a.shape[0] // 128):
        tiles.append(nl.load(a[nl.ds(i * 128, 128), :]))
    total = tiles[0]
    for tile in tiles[1:]:
        total = nl.add(total, tile)
    nl.store(out, total)
    return out


def test_a_tile_used_after_its_loop_unrolls_that_loop():
    a = np.random.default_rng(6).standard_normal((384, 16)).astype(np.float32)
    numpy_close(nki.simulate(tiles_kept_after_the_loop)(a), a[:128] + a[128:256] + a[256:])


@nki.jit
def row_sums_by_column_block(a):
    """Accumulates across a loop into a PSUM tile made outside it: the first trip overwrites, the others add."""
    out = nl.ndarray((a.shape[1], 1), nl.float32, buffer=nl.shared_hbm)
    ones = nl.ones((128, 1), nl.float32)
    acc = nl.ndarray((a.shape[1], 1), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(a.shape[0] // 128):
        nisa.nc_matmul(acc, nl.load(a[nl.ds(i * 128, 128), :]), ones)
    nl.store(out, acc)
    return out


def test_psum_accumulation_across_a_traced_loop():
    a = np.random.default_rng(7).standard_normal((512, 64)).astype(np.float32)
    module = nki.trace(row_sums_by_column_block, a)
    assert _loops(module) == 1
    assert any(op.name == "arith.cmpi" for op in module.walk()), "accumulate should be a register condition"
    numpy_close(nki.simulate(row_sums_by_column_block)(a)[:, 0], a.sum(0))


@nki.jit
def column_slices(a):
    """A loop index in a free-axis slice of an SBUF tile and in HBM offsets: register offsets on both."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    tile = nl.load(a)
    for j in nl.affine_range(a.shape[1] // 32):
        columns = nl.ds(j * 32, 32)
        nl.store(out[:, columns], nl.exp(tile[:, columns]))
    return out


def test_loop_index_in_on_chip_and_hbm_offsets():
    a = np.random.default_rng(8).standard_normal((128, 256)).astype(np.float32)
    assert _loops(nki.trace(column_slices, a)) == 1
    numpy_close(nki.simulate(column_slices)(a), np.exp(a))


@nki.jit
def partitions_by_index(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    tile = nl.load(a)
    for i in nl.affine_range(4):
        rows = nl.ds(i * 32, 32)
        nl.store(out[rows, :], nl.copy(tile[rows, :]))  # a partition range by index: unrolled
    return out


def test_a_partition_range_chosen_by_index_unrolls():
    a = np.random.default_rng(9).standard_normal((128, 8)).astype(np.float32)
    assert _loops(nki.trace(partitions_by_index, a)) == 0
    numpy_close(nki.simulate(partitions_by_index)(a), a)


@nki.jit
def out_of_bounds_on_the_last_trip(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        nl.store(out[nl.ds(i * 128, 128), :], nl.load(a[nl.ds(i * 128, 128), :]))
    return out


def test_bounds_are_checked_over_every_trip():
    with pytest.raises(nki.NkiError, match=r"index ds\(.*, 128\) of dimension 0 is out of bounds for shape \[256, 8\]"):
        nki.trace(out_of_bounds_on_the_last_trip, np.zeros((256, 8), np.float32))


def test_the_trace_runs_through_neuron_opt_and_neuron_run(tmp_path, capsys):
    """The traced text, with the kernel's lines as locations, is ordinary neuron-level IR for the tools."""
    from neuron_mlir.tools import neuron_opt, neuron_run

    lhsT, rhs = np.ones((256, 128), np.float32), np.ones((256, 512), np.float32)
    traced = tmp_path / "matmul.mlir"
    traced.write_text(nki.ir_text(nki.trace(matmul_tiled, lhsT, rhs)))
    lowered = tmp_path / "lowered.mlir"
    passes = "neuron-unroll-loops,neuron-assign-dma-queues,neuron-allocate-memory,neuron-insert-sync"
    neuron_opt.main([str(traced), "--print-debuginfo", "-p", passes, "-o", str(lowered)])
    text = lowered.read_text()
    assert '"matmul_tiled"' in text
    assert "kernels/matmul.py" in text
    assert neuron_run.main([str(lowered)]) == 0
    assert "out0: shape [128, 512] dtype f32" in capsys.readouterr().out


def test_a_kernel_writes_a_bundle_that_neuron_run_runs(tmp_path, capsys):
    from neuron_mlir.runtime.bundle import read_bundle
    from neuron_mlir.tools import neuron_run

    lhsT = np.random.default_rng(11).standard_normal((256, 128)).astype(np.float32)
    rhs = np.random.default_rng(12).standard_normal((256, 512)).astype(np.float32)
    path = tmp_path / "matmul.neuronb"
    matmul_tiled.write_bundle(path, lhsT, rhs, target="trn1")
    program = read_bundle(path)
    assert program.target == "trn1"
    assert [binding.name for binding in program.inputs] == ["lhsT", "rhs"]
    np.save(tmp_path / "lhsT.npy", lhsT)
    np.save(tmp_path / "rhs.npy", rhs)
    out = tmp_path / "out"
    assert (
        neuron_run.main(
            [
                str(path),
                "--input",
                f"lhsT={tmp_path / 'lhsT.npy'}",
                "--input",
                f"rhs={tmp_path / 'rhs.npy'}",
                "--save-outputs",
                str(out),
            ]
        )
        == 0
    )
    numpy_close(np.load(out / "out0.npy"), lhsT.T @ rhs)
    assert "simulated trn1" in capsys.readouterr().out


@nki.jit
def scaled_sum_over_trips(a, trips):
    """Each trip makes its own tile (scaled copies of `a`) and accumulates its product into one PSUM tile made
    outside the loop: the loop is traced two trips at a time, with the odd last trip after it."""
    out = nl.ndarray((a.shape[1], a.shape[1]), nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(a)
    acc = nl.ndarray((a.shape[1], a.shape[1]), nl.float32, buffer=nl.psum)
    for _trip in nl.affine_range(trips):
        scaled = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_scalar(scaled, tile, nl.multiply, 0.5)
        nisa.nc_matmul(acc, scaled, tile)
    nl.store(out, acc)
    return out


@pytest.mark.parametrize("trips", [4, 5])
def test_a_loop_traced_two_trips_at_a_time_accumulates_every_trip(trips):
    a = np.random.default_rng(13).standard_normal((128, 64)).astype(np.float32)
    module = nki.trace(scaled_sum_over_trips, a, trips)
    matmuls = [op for op in module.walk() if isinstance(op, neuron.MatmulOp)]
    assert len(matmuls) == (2 if trips == 4 else 3), "two copies in the loop, and the odd trip after it"
    numpy_close(nki.simulate(scaled_sum_over_trips)(a, trips), trips * 0.5 * (a.T @ a))


@nki.jit
def rows_added_by_fori_loop(a, b, unroll=False):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)

    def body(i):
        rows = nl.ds(i * 128, 128)
        nl.store(out[rows, :], nl.add(nl.load(a[rows, :]), nl.load(b[rows, :])))

    nl.fori_loop(1, a.shape[0] // 128, body, unroll=unroll)  # row block 0 is left to the next line
    nl.store(out[0:128, :], nl.load(a[0:128, :]))
    return out


@pytest.mark.parametrize(("unroll", "loops"), [(False, 1), (True, 0)])
def test_fori_loop_is_a_traced_loop_unless_unrolled(unroll, loops):
    rng = np.random.default_rng(8)
    a, b = (rng.standard_normal((512, 64)).astype(np.float32) for _ in range(2))
    expected = a + b
    expected[:128] = a[:128]
    numpy_close(nki.simulate(rows_added_by_fori_loop)(a, b, unroll=unroll), expected)
    assert _loops(nki.trace(rows_added_by_fori_loop, a, b, unroll=unroll)) == loops


def test_fori_loop_bounds_are_known_when_traced():
    @nki.jit
    def register_bound(a):
        nl.fori_loop(0, nl.load(a), lambda i: None)
        return a

    with pytest.raises(
        nki.NkiError, match=r"nl\.fori_loop: upper must be an int known when the kernel is traced"
    ) as caught:
        nki.simulate(register_bound)(np.zeros((1, 1), np.int32))
    assert str(caught.value).endswith("(register_bound))")


@nki.jit
def rows_scaled_by_an_inner_loop(a, steps):
    """Each row block is loaded, halved `steps` times by a loop that only computes, and stored: the row loop moves
    data and no loop inside it does, so it is traced once per trip and left to neuron-unroll-loops."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for block in nl.affine_range(a.shape[0] // 128):
        rows = nl.ds(block * 128, 128)
        tile = nl.load(a[rows, :])
        for _step in nl.affine_range(steps):
            nisa.tensor_scalar(tile, tile, nl.multiply, 0.5)
        nl.store(out[rows, :], tile)
    return out


def test_a_loop_around_a_loop_that_only_computes_is_left_to_the_unroller():
    a = np.random.default_rng(21).standard_normal((512, 64)).astype(np.float32)
    module = nki.trace(rows_scaled_by_an_inner_loop, a, 3)
    dmas = [op for op in module.walk() if isinstance(op, neuron.DmaCopyOp)]
    assert len(dmas) == 2, "one copy of the row loop's body: its load and its store"
    numpy_close(nki.simulate(rows_scaled_by_an_inner_loop)(a, 3), a * 0.125)
