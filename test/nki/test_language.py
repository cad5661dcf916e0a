"""nki.language and nki.isa calls traced into neuron instructions and run on the simulated core, against NumPy."""

import numpy as np
import pytest
from support import numpy_close

import neuron_mlir.nki as nki
import neuron_mlir.nki.isa as nisa
import neuron_mlir.nki.language as nl
from neuron_mlir.ir.dialects import neuron


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@nki.jit
def softmax_rows(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    exps = nl.exp(nl.subtract(tile, nl.max(tile, axis=1, keepdims=True)))
    nl.store(out, nl.divide(exps, nl.sum(exps, axis=1, keepdims=True)))
    return out


def test_language_softmax(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    exps = np.exp(x - x.max(1, keepdims=True))
    numpy_close(nki.simulate(softmax_rows)(x), exps / exps.sum(1, keepdims=True))


@nki.jit
def activation_and_reduce(x, bias):
    rows = x.shape[0]
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    stats = nl.ndarray((rows, 2), nl.float32, buffer=nl.shared_hbm)
    tile, bias_tile = nl.load(x), nl.load(bias)
    y = nl.ndarray(x.shape, nl.float32)
    row_sum = nl.ndarray((rows, 1), nl.float32)
    nisa.activation_reduce(dst=y, op=nl.exp, data=tile, reduce_op=nl.add, reduce_res=row_sum, bias=bias_tile, scale=0.5)
    negated_max = nl.ndarray((rows, 1), nl.float32)
    nisa.tensor_reduce(dst=negated_max, op=np.max, data=tile, axis=(1,), negate=True)
    nl.store(out, y)
    nl.store(stats[:, 0:1], row_sum)
    nl.store(stats[:, 1:2], negated_max)
    return out, stats


def test_activation_with_bias_scale_and_reduce(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    bias = rng.standard_normal((128, 1)).astype(np.float32)
    out, stats = nki.simulate(activation_and_reduce)(x, bias)
    expected = np.exp(x * 0.5 + bias)
    numpy_close(out, expected)
    numpy_close(stats[:, 0], expected.sum(1))
    numpy_close(stats[:, 1], -x.max(1))


@nki.jit
def matmul_and_transpose(a, w):
    product = nl.ndarray((a.shape[0], w.shape[1]), nl.float32, buffer=nl.shared_hbm)
    transposed = nl.ndarray((a.shape[1], a.shape[0]), nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.load(a)
    nl.store(product, nl.matmul(a_tile, nl.load(w)))
    nl.store(transposed, nl.transpose(a_tile))
    return product, transposed


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_matmul_and_transpose(rng, target):
    """trn2 transposes on the PE array bit exactly; trn1 multiplies by an identity."""
    a = rng.standard_normal((64, 128)).astype(np.float32)
    w = rng.standard_normal((128, 96)).astype(np.float32)
    product, transposed = nki.simulate(matmul_and_transpose, target=target)(a, w)
    numpy_close(product, a @ w)
    numpy_close(transposed, a.T)


@nki.jit
def gpsimd_and_vector(x):
    partitions, free = x.shape
    fused = nl.ndarray((partitions, free), nl.float32, buffer=nl.shared_hbm)
    indices = nl.ndarray((partitions, free), nl.int32, buffer=nl.shared_hbm)
    selected = nl.ndarray((partitions, free), nl.float32, buffer=nl.shared_hbm)
    across = nl.ndarray((2, free), nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    doubled_plus = nl.ndarray((partitions, free), nl.float32)
    nisa.scalar_tensor_tensor(dst=doubled_plus, data=tile, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=tile)
    nl.store(fused, doubled_plus)
    iota = nl.ndarray((partitions, free), nl.int32)
    nisa.iota(iota, [[1, free]], offset=3, channel_multiplier=free)
    nl.store(indices, iota)
    lower = nl.ndarray((partitions, free), nl.float32)
    nisa.affine_select(lower, [[-1, free]], 1, tile, -5.0, cmp_op=nl.greater_equal)
    nl.store(selected, lower)
    for row, op in enumerate((nl.add, nl.maximum)):
        reduced = nl.ndarray((1, free), nl.float32)
        nisa.tensor_partition_reduce(reduced, op, tile)
        nl.store(across[row : row + 1, :], reduced)
    return fused, indices, selected, across


def test_gpsimd_and_partition_reductions(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    fused, indices, selected, across = nki.simulate(gpsimd_and_vector)(x)
    numpy_close(fused, 3 * x)
    numpy_close(indices, (3 + np.arange(128)[:, None] * 64 + np.arange(64)[None]).astype(np.int32))
    p, f = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    numpy_close(selected, np.where(p - f >= 0, x, -5.0).astype(np.float32))
    numpy_close(across[0], x.sum(0))
    numpy_close(across[1], x.max(0))


@nki.jit
def batch_norm_stats(x):
    partitions, free = x.shape
    out = nl.ndarray((partitions, 2), nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    stats = nl.ndarray((partitions, 2 * nisa.BN_STATS_SIZE), nl.float32)
    half = free // 2
    nisa.bn_stats(stats[:, 0:6], tile[:, 0:half])
    nisa.bn_stats(stats[:, 6:12], tile[:, half:free])
    aggregate = nl.ndarray((partitions, 2), nl.float32)
    nisa.bn_aggr(aggregate, stats)
    nl.store(out, aggregate)
    return out


def test_bn_stats_and_aggr(rng):
    x = (rng.standard_normal((128, 200)) * 3 + 1).astype(np.float32)
    out = nki.simulate(batch_norm_stats)(x)
    numpy_close(out[:, 0], x.mean(1))
    numpy_close(out[:, 1], x.var(1))


@nki.jit
def scaled_by_program(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    mine = nl.ds(nl.program_id(0) * rows, rows)
    nl.store(out[mine, :], nl.multiply(nl.load(a[mine, :]), float(nl.program_id(0) + 1)))
    return out


def test_launch_grid_programs_share_the_output(rng):
    a = rng.standard_normal((256, 32)).astype(np.float32)
    numpy_close(nki.simulate(scaled_by_program[2])(a), np.concatenate([a[:128], 2 * a[128:]]))


@nki.jit
def reshaped_unary(a):
    rows = a.shape[0] * a.shape[1] // 128
    out = nl.ndarray((rows, 128), a.dtype, buffer=nl.shared_hbm)
    tile = nl.load(a.reshape((rows, 128)))
    nl.store(out, nl.add(nl.reciprocal(nl.exp(tile)), nl.rsqrt(nl.exp(tile))))
    return out


def test_hbm_reshape_and_activations(rng):
    a = rng.standard_normal((64, 256)).astype(np.float32)
    numpy_close(nki.simulate(reshaped_unary)(a), (np.exp(-a) + np.exp(-a / 2)).reshape(128, 128))


@nki.jit
def row_broadcast(a, row):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), nl.broadcast_to(nl.load(row), a.shape)))
    return out


def test_broadcast_across_partitions_and_trace_once(rng):
    a = rng.standard_normal((128, 48)).astype(np.float32)
    row = rng.standard_normal((1, 48)).astype(np.float32)
    numpy_close(nki.simulate(row_broadcast)(a, row), a * row)
    traces = row_broadcast.traces
    nki.simulate(row_broadcast)(a + 1, row)
    assert row_broadcast.traces == traces, "a second call with the same signature traced again"
    nki.simulate(row_broadcast)(a[:64].copy(), row)
    assert row_broadcast.traces == traces + 1, "a new shape must trace anew"


def test_trace_is_neuron_ir_with_kernel_locations(rng):
    a = rng.standard_normal((128, 48)).astype(np.float32)
    module = nki.trace(row_broadcast, a, a[:1].copy())
    module.verify()
    instructions = [op for op in module.walk() if isinstance(op, neuron.InstructionOp)]
    assert {op.OPCODE for op in instructions} >= {"dma_copy", "nc_matmul", "tensor_copy", "tensor_tensor"}
    from neuron_mlir.ir.locations import describe_location

    assert all(describe_location(op.location).startswith(f"{__file__}:") for op in instructions)
    assert all(describe_location(op.location).endswith("(row_broadcast)") for op in instructions)


def test_benchmark_reports_latency_and_profile(rng):
    a = rng.standard_normal((128, 48)).astype(np.float32)
    result = nki.benchmark(row_broadcast, target="trn1")(a, a[:1].copy())
    numpy_close(result.outputs, a * a[:1])
    assert result.target == "trn1"
    assert result.latency_ns == result.profile.total_ns > 0
    assert "trn1" in result.summary()
    # the simulator's trace (Chrome/Perfetto JSON) places every instruction at the kernel's line
    spans = [event for event in result.profile.chrome_trace()["traceEvents"] if event["ph"] == "X"]
    assert spans
    assert all(event["args"]["location"].endswith("(row_broadcast)") for event in spans)
    assert {event["name"] for event in spans} >= {"dma_copy", "nc_matmul"}


@nki.jit
def psum_accumulate_over_zeros(lhsT, rhs):
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((lhsT.shape[1], rhs.shape[1]), nl.float32, buffer=nl.psum)
    lhsT_tile, rhs_tile = nl.load(lhsT), nl.load(rhs)
    nisa.nc_matmul(acc, lhsT_tile, rhs_tile)  # acc holds zeros: accumulate=None adds
    nisa.nc_matmul(acc, lhsT_tile, rhs_tile, accumulate=True)
    nl.store(out, acc)
    return out


def test_matmul_accumulates_into_written_psum(rng):
    lhsT = rng.standard_normal((128, 32)).astype(np.float32)
    rhs = rng.standard_normal((128, 64)).astype(np.float32)
    numpy_close(nki.simulate(psum_accumulate_over_zeros)(lhsT, rhs), 2 * (lhsT.T @ rhs))


@nki.jit
def add_into(a, b, result):
    """The legacy style: the kernel writes into an output argument and returns nothing."""
    for i in nl.affine_range(a.shape[0] // 128):
        rows = nl.ds(i * 128, 128)
        nl.store(result[rows, :], nl.add(nl.load(a[rows, :]), nl.load(b[rows, :])))


def test_writes_into_an_input_reach_the_callers_array(rng):
    a = rng.standard_normal((256, 8)).astype(np.float32)
    b = rng.standard_normal((256, 8)).astype(np.float32)
    result = np.zeros((256, 8), np.float32)
    before = a.copy()
    assert nki.simulate(add_into)(a, b, result) is None
    numpy_close(result, a + b)
    numpy_close(a, before)


def test_legacy_benchmark_decorator(rng):
    a = rng.standard_normal((128, 48)).astype(np.float32)
    benchmarked = nki.benchmark(warmup=2, iters=5)(row_broadcast.function)
    numpy_close(benchmarked(a, a[:1].copy()), a * a[:1])
    latency = benchmarked.benchmark_result.nc_latency
    assert latency.get_latency_percentile(50) == latency.get_latency_percentile(99) > 0


@nki.jit
def dropout_rows(a, prob):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        rows = nl.ds(i * 128, 128)
        tile = nl.load(a[rows, :])
        dropped = nl.ndarray(tile.shape, tile.dtype)
        nisa.dropout(dropped, tile, nl.load(prob) if isinstance(prob, nki.NkiTensor) else prob)
        nl.store(out[rows, :], dropped)
    return out


def test_dropout_drops_at_the_rate_asked_and_differs_by_trip(rng):
    a = rng.uniform(1, 2, (256, 512)).astype(np.float32)
    assert (nki.simulate(dropout_rows)(a, 0.0) == a).all()
    assert (nki.simulate(dropout_rows)(a, 1.0) == 0).all()
    out = nki.simulate(dropout_rows)(a, 0.25)
    kept = out != 0
    assert (out[kept] == a[kept]).all(), "kept elements are not rescaled"
    assert abs(1 - kept.mean() - 0.25) < 0.01
    # the loop's two trips draw independently: their masks agree about 0.75^2 + 0.25^2 of the time
    assert abs((kept[:128] == kept[128:]).mean() - 0.625) < 0.02
    numpy_close(nki.simulate(dropout_rows)(a, 0.25), out)  # repeatable


def test_dropout_with_a_probability_per_partition(rng):
    a = np.ones((128, 1024), np.float32)
    prob = np.linspace(0, 1, 128, dtype=np.float32)[:, None]
    drop_rate = (nki.simulate(dropout_rows)(a, prob) == 0).mean(axis=1)
    assert np.abs(drop_rate - prob[:, 0]).max() < 0.07


@nki.jit
def assorted(x, w):
    """The remaining functions and instructions, each result stored into one slice of a [6, P, F] output."""
    partitions, free = x.shape
    out = nl.ndarray((6, partitions, free), nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    nl.store(out[0], nl.where(nl.greater(tile, 0.0), tile, nl.full((partitions, free), -1.0, nl.float32)))
    centred = nl.subtract(tile, nl.mean(tile, axis=1, keepdims=True))
    nl.store(out[1], nl.add(centred, nl.min(tile, axis=1, keepdims=True)))
    two_step = nl.ndarray((partitions, free), nl.float32)
    nisa.tensor_scalar(two_step, tile, nl.multiply, 3.0, op1=nl.maximum, operand1=0.5)
    nl.store(out[2], two_step)
    shifted = nl.ndarray((partitions, free), nl.float32)
    nisa.exponential(shifted, tile, max_value=1.5)
    nl.store(out[3], shifted)
    transposed = nl.ndarray((free, partitions), nl.float32, buffer=nl.psum)
    nisa.nc_transpose(transposed, nl.load_transpose2d(w))  # w [F, P] -> [P, F] -> back to [F, P]
    nl.store(out[4].reshape((free, partitions)), transposed)
    nl.store(out[5], nl.add(nl.zeros((partitions, free), nl.float32), nl.ones((partitions, free), nl.float32)))
    return out


def test_assorted_functions(rng):
    x = rng.standard_normal((64, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    out = nki.simulate(assorted)(x, w)
    numpy_close(out[0], np.where(x > 0, x, -1.0).astype(np.float32))
    numpy_close(out[1], x - x.mean(1, keepdims=True) + x.min(1, keepdims=True))
    numpy_close(out[2], np.maximum(x * 3, 0.5))
    numpy_close(out[3], np.exp(x - 1.5))
    numpy_close(out[4], w)
    numpy_close(out[5], np.ones_like(x))


def test_views_permute_and_transpose(rng):
    @nki.jit
    def permuted(a):
        out = nl.ndarray((a.shape[2], a.shape[0], a.shape[1]), a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a.permute(2, 0, 1)))
        return out

    a = rng.standard_normal((3, 5, 16)).astype(np.float32)
    numpy_close(nki.simulate(permuted)(a), a.transpose(2, 0, 1))


@nki.jit
def language_norms(x, w):
    out = nl.ndarray((2, *x.shape), nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    nl.store(out[0], nl.softmax(tile, axis=1))
    nl.store(out[1], nl.rms_norm(tile, nl.load(w), axis=1, n=x.shape[1], epsilon=1e-5))
    return out


def test_language_softmax_and_rms_norm(rng):
    x = rng.standard_normal((96, 200)).astype(np.float32)
    w = rng.standard_normal((1, 200)).astype(np.float32)
    out = nki.simulate(language_norms)(x, w)
    exps = np.exp(x - x.max(1, keepdims=True))
    numpy_close(out[0], exps / exps.sum(1, keepdims=True))
    numpy_close(out[1], x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * w)


def test_a_kernel_asks_where_a_tensor_lives(rng):
    @nki.jit
    def where_am_i(a):
        tile = nl.load(a)
        assert a.buffer == nl.hbm
        assert tile.buffer == nl.sbuf
        assert tile.buffer != nl.psum
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, tile)
        return out

    a = rng.standard_normal((4, 4)).astype(np.float32)
    numpy_close(nki.simulate(where_am_i)(a), a)


def test_language_var(rng):
    @nki.jit
    def row_variance(x):
        out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.var(nl.load(x), axis=1, keepdims=True))
        return out

    x = (rng.standard_normal((100, 300)) * 3 + 5).astype(np.float32)
    numpy_close(nki.simulate(row_variance)(x)[:, 0], x.var(1))


@pytest.mark.parametrize(("reduce", "reference", "instructions"), [
    (nl.maximum, np.max, ["tensor_scalar", "tensor_reduce"]),
    (nl.add, np.sum, ["tensor_scalar"]),  # VectorE's tensor_scalar sums what it writes (accumulate_dst)
], ids=["max", "add"])  # fmt: skip
def test_tensor_scalar_reduce(rng, reduce, reference, instructions):
    @nki.jit
    def shifted_row_reduce(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        reduced = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        shifted = nl.ndarray(x.shape, nl.float32)
        row = nl.ndarray((x.shape[0], 1), nl.float32)
        nisa.tensor_scalar_reduce(shifted, nl.load(x), nl.subtract, 1.0, reduce, row)
        nl.store(out, shifted)
        nl.store(reduced, row)
        return out, reduced

    x = rng.standard_normal((32, 3, 20)).astype(np.float32)
    computed = [op.OPCODE for op in shifted_row_reduce.trace(x).walk() if op.name in ("neuron.tensor_scalar",
                "neuron.tensor_reduce")]  # fmt: skip
    assert computed == instructions
    out, reduced = nki.simulate(shifted_row_reduce)(x)
    numpy_close(out, x - 1)
    numpy_close(reduced[:, 0], reference(x - 1, axis=(1, 2)))


@nki.jit
def _fp8_matmul(lhsT, rhs, mode="none"):
    acc = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=nl.load(lhsT), moving=nl.load(rhs), perf_mode=nisa.matmul_perf_mode(mode))
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(acc))
    return out


@pytest.mark.parametrize("rhs_dtype", [nl.float8_e4m3fn, nl.float8_e5m2])
def test_fp8_matmul_at_the_double_row_rate(rhs_dtype):
    """fp8 operands (e4m3fn, mixed with e5m2 too) multiply exactly into fp32 PSUM; with perf_mode double_row on
    trn2 TensorE takes half the time of the same matmul in bf16."""
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((128, 128)).astype(nl.float8_e4m3fn)
    rhs = rng.standard_normal((128, 512)).astype(rhs_dtype)
    run = nki.benchmark(_fp8_matmul, target="trn2")(lhsT, rhs, "double_row")
    numpy_close(run.outputs, lhsT.astype(np.float32).T @ rhs.astype(np.float32))
    wide = nki.benchmark(_fp8_matmul, target="trn2")(lhsT.astype(nl.bfloat16), rhs.astype(nl.bfloat16))
    assert run.profile.busy_ns["tensor"] * 2 == pytest.approx(wide.profile.busy_ns["tensor"])


@nki.jit
def dma_transposes(a):
    rows, columns = a.shape
    transposed = nl.ndarray((columns, rows), a.dtype, buffer=nl.shared_hbm)
    round_trip = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    loaded = nl.ndarray((columns, rows), a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(loaded, a)  # from HBM
    back = nl.ndarray((rows, columns), a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(back, loaded, axes=(1, 0))  # between SBUF tiles
    nl.store(transposed, loaded)
    nl.store(round_trip, back)
    return transposed, round_trip


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint16)


def test_dma_transpose_is_the_dma_instruction_and_bit_exact(rng):
    a = rng.standard_normal((96, 80)).astype(nl.bfloat16)
    a[3, 5] = np.nan  # a DMA moves bits: NaN and -0 come through unchanged
    a[7, 1] = -0.0
    run = nki.benchmark(dma_transposes, target="trn2")(a)
    transposed, round_trip = run.outputs
    np.testing.assert_array_equal(_bits(transposed), _bits(np.ascontiguousarray(a.T)))
    np.testing.assert_array_equal(_bits(round_trip), _bits(a))
    assert run.profile.opcode_counts["dma_transpose"] == 2


@nki.jit
def loads_transposed(w):
    out = nl.ndarray((w.shape[1], w.shape[0]), w.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(w))
    return out


@pytest.mark.parametrize(
    ("target", "dtype", "transposes"),
    [("trn2", nl.bfloat16, 1), ("trn3", nl.float16, 1), ("trn1", nl.bfloat16, 0), ("trn2", np.float32, 0)],
)
def test_load_transpose2d_uses_the_dma_transpose_where_it_can(rng, target, dtype, transposes):
    w = rng.standard_normal((48, 80)).astype(dtype)
    run = nki.benchmark(loads_transposed, target=target)(w)
    assert run.profile.opcode_counts.get("dma_transpose", 0) == transposes
    np.testing.assert_array_equal(run.outputs, np.ascontiguousarray(w.T))


@nki.jit
def permuted_by_dma(a):
    axes = {3: (2, 1, 0), 4: (3, 1, 2, 0)}[a.ndim]
    shape = tuple(a.shape[axis] for axis in axes)
    out = nl.ndarray(shape, a.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(tile, a, axes=axes)
    nl.store(out, tile)
    return out


@pytest.mark.parametrize(("shape", "axes"), [((3, 5, 64), (2, 1, 0)), ((2, 3, 4, 32), (3, 1, 2, 0))])
def test_dma_transpose_of_3d_and_4d_tensors(rng, shape, axes):
    a = rng.standard_normal(shape).astype(nl.bfloat16)
    out = nki.simulate(permuted_by_dma, target="trn2")(a)
    np.testing.assert_array_equal(_bits(out), _bits(np.ascontiguousarray(np.transpose(a, axes))))


@nki.jit
def copied_with_dma_modes(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=a, oob_mode=nisa.oob_mode.error, dge_mode=nisa.dge_mode.unknown)
    nisa.dma_copy(dst=out, src=tile, oob_mode=nisa.oob_mode.skip, dge_mode=nisa.dge_mode.hwdge)
    return out


def test_dma_copy_takes_nkis_dma_enums(rng):
    a = rng.standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(copied_with_dma_modes)(a), a)
