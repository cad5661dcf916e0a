"""Kernels that break a rule of NKI or of the hardware: the error names the call, the rule and the kernel's line."""

import dataclasses
import inspect

import numpy as np
import pytest

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl
from neuron_mlir.runtime import hardware


def _line_of(kernel, marker: str) -> str:
    """'file:line' of the kernel's source line holding `marker`."""
    lines, first = inspect.getsourcelines(kernel.function)
    for offset, text in enumerate(lines):
        if marker in text:
            return f"{inspect.getsourcefile(kernel.function)}:{first + offset}"
    raise AssertionError(f"no line with {marker!r}")


def _fails(kernel, *args, rule: str, marker: str = "# fails here") -> str:
    with pytest.raises(nki.NkiError) as caught:
        nki.simulate(kernel)(*args)
    message = str(caught.value)
    assert rule in message
    assert f"(at {_line_of(kernel, marker)} ({kernel.__name__}))" in message
    return message


A = np.zeros((128, 512), dtype=np.float32)


@nki.jit
def too_many_partitions(a):
    tile = nl.ndarray((256, 64), nl.float32, buffer=nl.sbuf)  # fails here
    return tile


def test_partition_dimension_over_128():
    _fails(too_many_partitions, A, rule="256 partitions; the partition dimension (first) holds at most")


@nki.jit
def matmul_into_sbuf(a):
    tile = nl.load(a[:, 0:128])
    result = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(result, tile, tile)  # fails here
    return result


def test_matmul_into_sbuf():
    message = _fails(matmul_into_sbuf, A, rule="the tensor engine cannot write SBUF")
    assert message.startswith("nki.isa.nc_matmul: neuron.nc_matmul: dst:")


@nki.jit
def wide_psum_tile(a):
    acc = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)  # fails here
    return acc


def test_psum_tile_wider_than_a_bank():
    _fails(wide_psum_tile, A, rule="needs 4096 bytes per partition; a PSUM tile fits one 2048-byte bank")


@nki.jit
def bank_wide_psum_tile(a):
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)  # fails here
    return acc


def test_the_psum_bank_is_the_targets(monkeypatch):
    # a target whose 16 KiB of PSUM per partition is cut into 16 banks of 1 KiB: a 2 KiB tile no longer fits
    trn2 = hardware.TARGETS["trn2"]
    monkeypatch.setitem(hardware.TARGETS, "trn2", dataclasses.replace(trn2, psum_banks=2 * trn2.psum_banks))
    _fails(
        bank_wide_psum_tile, A, rule="needs 2048 bytes per partition; a PSUM tile fits one 1024-byte bank (256 fp32)"
    )


@nki.jit
def out_of_bounds_load(a):
    return nl.load(a[0:128, 256:768])  # fails here


def test_load_out_of_bounds():
    _fails(
        out_of_bounds_load, A, rule="indexing 'a': index 256:768 of dimension 1 is out of bounds for shape [128, 512]"
    )


@nki.jit
def out_of_bounds_ds(a):
    return nl.load(a[nl.ds(64, 128), :])  # fails here


def test_ds_out_of_bounds():
    _fails(out_of_bounds_ds, A, rule="index ds(64, 128) of dimension 0 is out of bounds")


@nki.jit
def integer_matmul(a):
    ints = nl.load(a[:, 0:128], dtype=nl.int32)
    acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, ints, ints)  # fails here
    return acc


def test_matmul_of_integers():
    _fails(integer_matmul, A, rule="stationary: TensorE reads float inputs, got i32")


@nki.jit
def mixed_precision_matmul(a):
    wide = nl.load(a[:, 0:128])
    narrow = nl.load(a[:, 0:128], dtype=nl.bfloat16)
    acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, wide, narrow)  # fails here
    return acc


def test_matmul_mixing_fp32_and_bf16():
    _fails(mixed_precision_matmul, A, rule="inputs must both be f32 or both narrower, got f32 and bf16")


@nki.jit
def moving_too_wide(a, b):
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, nl.load(a[:, 0:128]), nl.load(b))  # fails here
    return acc


def test_matmul_moving_free_size():
    b = np.zeros((128, 1024), dtype=np.float32)
    _fails(moving_too_wide, A, b, rule="moving: free size 1024 exceeds 512")


@nki.jit
def reads_fresh_tile(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.memset(tile[0:64, :], 2.0)
    nl.store(out, tile)  # warns here
    return out


def test_read_of_on_chip_memory_never_written_is_nan_with_a_warning():
    with pytest.warns(nki.NkiWarning) as caught:
        out = nki.simulate(reads_fresh_tile)(A)
    message = str(caught[0].message)
    assert "src reads elements of SBUF tensor 'sb' [128, 512] that were never written: they hold NaN" in message
    assert f"(at {_line_of(reads_fresh_tile, '# warns here')} (reads_fresh_tile))" in message
    assert (out[:64] == 2.0).all()
    assert np.isnan(out[64:]).all()


@nki.jit
def reads_fresh_hbm(a):
    scratch = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
    return nl.load(scratch)  # fails here


def test_read_of_hbm_never_written():
    _fails(reads_fresh_hbm, A, rule="src reads elements of HBM tensor 'hbm' [128, 512] that were never written")


@nki.jit
def reduce_partitions(a):
    tile = nl.load(a)
    total = nl.ndarray((1, 512), nl.float32)
    nisa.tensor_reduce(total, nl.add, tile, axis=0)  # fails here
    return total


def test_reduction_over_the_partition_axis():
    _fails(reduce_partitions, A, rule="reductions run over trailing free axes, never the partition axis 0")


@nki.jit
def tensor_tensor_shapes(a):
    tile = nl.load(a)
    out = nl.ndarray((128, 256), nl.float32)
    nisa.tensor_tensor(out, tile, tile, nl.add)  # fails here
    return out


def test_elementwise_shapes_differ():
    _fails(tensor_tensor_shapes, A, rule="dst is [128, 256] but in0 is [128, 512]")


@nki.jit
def unknown_activation(a):
    tile = nl.load(a)
    nisa.activation(tile, nl.add, tile)  # fails here
    return tile


def test_activation_of_an_alu_operator():
    _fails(unknown_activation, A, rule="op nl.add is not an activation function of the Scalar engine")


@nki.jit
def returns_a_tile(a):
    return nl.load(a)


def test_kernel_returns_on_chip_tile():
    with pytest.raises(nki.NkiError, match="a kernel returns whole HBM tensors"):
        nki.simulate(returns_a_tile)(A)


def test_language_call_outside_a_kernel():
    with pytest.raises(nki.NkiError, match="only inside a kernel being traced"):
        nl.ndarray((128, 4), nl.float32)


@nki.jit
def four_live_tiles(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    tiles = [nl.load(a) for _ in range(4)]  # fails here
    total = tiles[0]
    for tile in tiles[1:]:
        total = nl.add(total, tile)
    nl.store(out, total)
    return out


def test_sbuf_over_capacity_when_placed():
    wide = np.zeros((128, 16000), dtype=np.float32)
    message = _fails(four_live_tiles, wide, rule="out of SBUF on trn2: a buffer of 64000 bytes per partition")
    assert message.startswith("kernel four_live_tiles: neuron.alloc:")


@nki.jit
def double_row_matmul(a, b):
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, nl.load(a), nl.load(b), perf_mode=nisa.matmul_perf_mode.double_row)  # fails here
    return acc


def test_double_row_needs_fp8_and_a_target_that_has_it():
    a8 = np.zeros((128, 128), dtype=nl.float8_e4m3fn)
    b8 = np.zeros((128, 512), dtype=nl.float8_e4m3fn)
    rule = "perf_mode double_row multiplies fp8 operands, got bf16, f8e4m3"
    _fails(double_row_matmul, a8.astype(nl.bfloat16), b8, rule=rule)
    with pytest.raises(nki.NkiError, match=r"double_row is not supported on trn1 \(NeuronCore-v2\)"):
        nki.simulate(double_row_matmul, target="trn1")(a8, b8)
    # NKI's float8_e4m3 (with infinities) has no storage type on the simulated core: a diagnostic, not a guess
    with pytest.raises(nki.NkiError, match=r"float8_e4m3.* has no NeuronCore storage type"):
        nki.simulate(double_row_matmul)(np.zeros((128, 128), dtype=nl.float8_e4m3), b8)


@nki.jit
def dma_transposed(a):
    tile = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(tile, a)  # fails here
    return tile


def test_dma_transpose_needs_a_target_that_has_it():
    a = np.zeros((32, 64), dtype=nl.bfloat16)
    with pytest.raises(nki.NkiError) as caught:
        nki.simulate(dma_transposed, target="trn1")(a)
    message = str(caught.value)
    assert message.startswith("nki.isa.dma_transpose: neuron.dma_transpose: trn1 (NeuronCore-v2) has no DMA transpose")
    assert f"(at {_line_of(dma_transposed, '# fails here')} (dma_transposed))" in message
    # the instruction's own rules, at the same line, on a target that has it
    _fails(dma_transposed, a.astype(np.float32), rule="transposes 2-byte elements only, got f32")


@nki.jit
def dma_transpose_wrong_shape(a):
    tile = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(tile, a)  # fails here
    return tile


def test_dma_transpose_dst_is_the_transpose():
    rule = "dst must be src permuted by (1, 0), [64, 32], got [32, 64]"
    _fails(dma_transpose_wrong_shape, np.zeros((32, 64), dtype=nl.bfloat16), rule=rule)
    # a permutation NKI does not have
    with pytest.raises(nki.NkiError, match=r"the permutations are \(1, 0\), \(2, 1, 0\) and \(3, 1, 2, 0\)"):
        nki.simulate(dma_transpose_wrong_shape)(np.zeros((4, 8, 16, 2, 2), dtype=nl.bfloat16))


@nki.jit
def hwdge_transpose(a):
    out = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(tile, a, dge_mode=nisa.dge_mode.hwdge)  # fails here
    nl.store(out, tile)
    return out


def test_dma_transpose_by_hardware_dge_keeps_its_shape_rule():
    rule = "a hardware-DGE transpose needs src.shape[0] == 16 and src.shape[-1] a multiple of 128, got [32, 64]"
    _fails(hwdge_transpose, np.zeros((32, 64), dtype=nl.bfloat16), rule=rule)
    a = np.arange(16 * 128).reshape(16, 128).astype(nl.bfloat16)  # within the rule it runs
    np.testing.assert_array_equal(nki.simulate(hwdge_transpose)(a), a.T)
