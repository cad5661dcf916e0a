"""Each cost rule recomputed from the hardware table, directly and as timed by the simulator."""

from __future__ import annotations

import pytest

from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.hardware import GPSIMD_KERNEL_CYCLES_PER_ELEMENT, TARGETS, Engine
from neuron_mlir.runtime.simulator import run_program


def single_instruction_ns(builder: ProgramBuilder, inst_id: int) -> float:
    """Busy time of one instruction in a run of the builder's program (nothing else on its queue)."""
    _, profile = run_program(builder.build(), [], check_races=False)
    (stats,) = [s for s in profile.instructions if s.id == inst_id]
    assert stats.count == 1
    return stats.busy_ns


def matmul_program(target: str, dtype: str, k: int, m: int, n: int, transpose: bool = False):
    b = ProgramBuilder(target)
    stationary = b.sbuf("s", (k, m), dtype)
    moving = b.sbuf("m", (k, n), dtype)
    dst = b.psum("d", (n, k) if transpose else (m, n), dtype if transpose else "f32")
    attrs = {"is_transpose": True} if transpose else {}
    inst = b.inst(
        "nc_matmul",
        "tensor",
        {"dst": b.ap(dst), "stationary": b.ap(stationary), "moving": b.ap(moving)},
        attrs,
    )
    return b, inst


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize(("dtype", "factor"), [("bf16", 1), ("f16", 1), ("f32", 4)])
def test_matmul_max_n_64_cycles_times_four_for_fp32(target, dtype, factor):
    hw = TARGETS[target]
    b, inst = matmul_program(target, dtype, 128, 128, 512)
    expected = max(512, 64) * factor / hw.clock_ghz[Engine.TENSOR]
    assert single_instruction_ns(b, inst) == pytest.approx(expected)


@pytest.mark.parametrize(("target", "speedup"), [("trn1", 1), ("trn2", 2), ("trn3", 2)])
@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2"])
def test_fp8_matmul_runs_at_the_targets_fp8_rate_on_full_tiles(target, speedup, dtype):
    hw = TARGETS[target]
    b, inst = matmul_program(target, dtype, 128, 128, 512)
    assert single_instruction_ns(b, inst) == pytest.approx(512 / speedup / hw.clock_ghz[Engine.TENSOR])
    # a partial contraction tile has no partner for the double-row mode: the bf16 rate
    b, inst = matmul_program(target, dtype, 96, 128, 512)
    assert single_instruction_ns(b, inst) == pytest.approx(512 / hw.clock_ghz[Engine.TENSOR])


def test_fp8_transpose_runs_at_the_bf16_rate():
    b, inst = matmul_program("trn2", "f8e4m3", 128, 128, 128, transpose=True)
    assert single_instruction_ns(b, inst) == pytest.approx(128 / 2.4)


def test_matmul_bf16_128x128x512_on_trn2_is_512_cycles_at_2_4_ghz():
    b, inst = matmul_program("trn2", "bf16", 128, 128, 512)
    assert single_instruction_ns(b, inst) == pytest.approx(512 / 2.4)
    b, inst = matmul_program("trn2", "f32", 128, 128, 512)
    assert single_instruction_ns(b, inst) == pytest.approx(4 * 512 / 2.4)


def test_short_matmul_costs_the_64_cycle_minimum():
    b, inst = matmul_program("trn2", "bf16", 128, 128, 17)
    assert single_instruction_ns(b, inst) == pytest.approx(64 / 2.4)


@pytest.mark.parametrize(("target", "factor"), [("trn1", 4), ("trn2", 2), ("trn3", 2)])
def test_fp32_transpose_rate(target, factor):
    hw = TARGETS[target]
    b, inst = matmul_program(target, "f32", 128, 128, 96, transpose=True)
    assert single_instruction_ns(b, inst) == pytest.approx(max(96, 64) * factor / hw.clock_ghz[Engine.TENSOR])


def vector_program(target: str, opcode: str, dtype: str, free: int, engine: str = "vector", **attrs):
    b = ProgramBuilder(target)
    a = b.sbuf("a", (128, free), dtype)
    c = b.sbuf("c", (128, free), dtype)
    d = b.sbuf("d", (128, free), dtype)
    operands = {
        "tensor_tensor": {"dst": b.ap(d), "in0": b.ap(a), "in1": b.ap(c)},
        "tensor_copy": {"dst": b.ap(d), "src": b.ap(a)},
        "tensor_scalar": {"dst": b.ap(d), "src": b.ap(a)},
        "activation": {"dst": b.ap(d), "src": b.ap(a)},
        "memset": {"dst": b.ap(d)},
        "iota": {"dst": b.ap(d)},
    }[opcode]
    inst = b.inst(opcode, engine, operands, attrs)
    return b, inst


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("free", [1, 7, 64, 513, 2048])
def test_vector_engine_n_per_input_with_64_cycle_minimum(target, free):
    hw = TARGETS[target]
    clock = hw.clock_ghz[Engine.VECTOR]
    b, inst = vector_program(target, "tensor_copy", "f32", free)
    assert single_instruction_ns(b, inst) == pytest.approx(max(64, free) / clock)
    b, inst = vector_program(target, "tensor_tensor", "f32", free, op="add")
    assert single_instruction_ns(b, inst) == pytest.approx(max(64, 2 * free) / clock)


@pytest.mark.parametrize(("target", "copy_speedup", "other_speedup"), [("trn1", 1, 1), ("trn2", 4, 2), ("trn3", 4, 2)])
def test_vector_16bit_performance_modes(target, copy_speedup, other_speedup):
    clock = TARGETS[target].clock_ghz[Engine.VECTOR]
    b, inst = vector_program(target, "tensor_copy", "bf16", 2048)
    assert single_instruction_ns(b, inst) == pytest.approx(2048 / copy_speedup / clock)
    b, inst = vector_program(target, "tensor_tensor", "bf16", 2048, op="add")
    assert single_instruction_ns(b, inst) == pytest.approx(2 * 2048 / other_speedup / clock)
    b, inst = vector_program(target, "memset", "f16", 2048, value=0.0)
    assert single_instruction_ns(b, inst) == pytest.approx(2048 / other_speedup / clock)


def scalar_tensor_tensor_ns(target: str, dtypes: tuple[str, str], free: int, op0: str, op1: str) -> float:
    b = ProgramBuilder(target)
    src, in1 = b.sbuf("x", (128, free), dtypes[0]), b.sbuf("y", (128, free), dtypes[1])
    column, dst = b.sbuf("s", (128, 1), "f32"), b.sbuf("d", (128, free), dtypes[0])
    accesses = {"dst": b.ap(dst), "src": b.ap(src), "in1": b.ap(in1), "operand0": b.ap(column)}
    inst = b.inst("scalar_tensor_tensor", "vector", accesses, {"op0": op0, "op1": op1})
    return single_instruction_ns(b, inst)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_scalar_tensor_tensor_2n_or_n_for_bf16_subtract_multiply(target):
    clock = TARGETS[target].clock_ghz[Engine.VECTOR]
    bf16 = ("bf16", "bf16")
    # (x - s) * y over bf16 and an even N streams at N; everything else at 2N, with no other 16-bit mode
    assert scalar_tensor_tensor_ns(target, bf16, 768, "subtract", "multiply") == pytest.approx(768 / clock)
    assert scalar_tensor_tensor_ns(target, bf16, 767, "subtract", "multiply") == pytest.approx(2 * 767 / clock)
    assert scalar_tensor_tensor_ns(target, bf16, 768, "multiply", "add") == pytest.approx(2 * 768 / clock)
    mixed = ("bf16", "f32")
    assert scalar_tensor_tensor_ns(target, mixed, 768, "subtract", "multiply") == pytest.approx(2 * 768 / clock)
    assert scalar_tensor_tensor_ns(target, ("f32", "f32"), 20, "add", "add") == pytest.approx(64 / clock)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("free", [7, 512])
def test_scalar_engine_max_64_n(target, free):
    clock = TARGETS[target].clock_ghz[Engine.SCALAR]
    b, inst = vector_program(target, "activation", "f32", free, engine="scalar", func="exp")
    assert single_instruction_ns(b, inst) == pytest.approx(max(64, free) / clock)


def test_activation_with_accumulate_adds_64_cycles():
    b = ProgramBuilder("trn2")
    a, d, s = b.sbuf("a", (128, 512), "f32"), b.sbuf("d", (128, 512), "f32"), b.sbuf("s", (128, 1), "f32")
    inst = b.inst("activation", "scalar", {"dst": b.ap(d), "src": b.ap(a), "accumulate_dst": b.ap(s)}, {"func": "exp"})
    assert single_instruction_ns(b, inst) == pytest.approx((512 + 64) / 1.2)


def test_tensor_scalar_with_accumulate_adds_64_cycles():
    b = ProgramBuilder("trn2")
    a, d, s = b.sbuf("a", (128, 512), "f32"), b.sbuf("d", (128, 512), "f32"), b.sbuf("s", (128, 1), "f32")
    accesses = {"dst": b.ap(d), "src": b.ap(a)}
    plain = b.inst("tensor_scalar", "vector", accesses, {"op0": "subtract", "scalar0": 1.0})
    summed = b.inst(
        "tensor_scalar", "vector", {**accesses, "accumulate_dst": b.ap(s)}, {"op0": "subtract", "scalar0": 1.0}
    )
    clock = TARGETS["trn2"].clock_ghz[Engine.VECTOR]
    assert single_instruction_ns(b, summed) - single_instruction_ns(b, plain) == pytest.approx(64 / clock)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_gpsimd_150_plus_n(target):
    clock = TARGETS[target].clock_ghz[Engine.GPSIMD]
    b, inst = vector_program(target, "iota", "i32", 100, engine="gpsimd", pattern=((1, 100),))
    assert single_instruction_ns(b, inst) == pytest.approx((150 + 100) / clock)
    b, inst = vector_program(target, "tensor_tensor", "i32", 1000, engine="gpsimd", op="add")
    assert single_instruction_ns(b, inst) == pytest.approx((150 + 1000) / clock)


@pytest.mark.parametrize("name", ["divide_floor", "normal"])
def test_gpsimd_kernel_startup_plus_cycles_per_element(name):
    b = ProgramBuilder("trn2")
    a, c, d = b.sbuf("a", (128, 300), "f32"), b.sbuf("c", (128, 300), "f32"), b.sbuf("d", (128, 300), "f32")
    inst = b.inst("gpsimd_kernel", "gpsimd", {"dst": b.ap(d), "in0": b.ap(a), "in1": b.ap(c)}, {"kernel": name})
    per_element = GPSIMD_KERNEL_CYCLES_PER_ELEMENT[name]
    assert single_instruction_ns(b, inst) == pytest.approx((150 + 300 * per_element) / 1.2)


def test_dependent_instruction_penalty():
    b = ProgramBuilder("trn2")
    a, c, d = b.sbuf("a", (128, 512), "f32"), b.sbuf("c", (128, 512), "f32"), b.sbuf("d", (128, 512), "f32")
    b.inst("tensor_copy", "vector", {"dst": b.ap(c), "src": b.ap(a)})
    dependent = b.inst("tensor_copy", "vector", {"dst": b.ap(d), "src": b.ap(c)})
    independent = b.inst("tensor_copy", "vector", {"dst": b.ap(a), "src": b.ap(b.sbuf("e", (128, 512), "f32"))})
    _, profile = run_program(b.build(), [], check_races=False)
    busy = {s.id: s.busy_ns for s in profile.instructions}
    assert busy[dependent] == pytest.approx((512 + 100) / 0.96)
    assert busy[independent] == pytest.approx(512 / 0.96)


# ---- DMA ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunk", "efficiency"),
    [(8192, 1.0), (4096, 1.0), (2048, 0.875), (1024, 0.75), (256, 0.5), (64, 0.125), (4, 0.5 / 64)],
)
def test_dma_efficiency_curve(chunk, efficiency):
    assert cost_model.dma_efficiency(chunk, TARGETS["trn2"]) == pytest.approx(efficiency)


def dma_program(target: str, partitions: int, free: int, dtype: str = "f32", transposed: bool = False):
    b = ProgramBuilder(target)
    source = b.hbm("x", (partitions, free), dtype)
    tile = b.sbuf("t", (free, partitions) if transposed else (partitions, free), dtype)
    pattern = [(1, free), (free, partitions)] if transposed else None
    inst = b.dma(b.ap(tile), b.ap(source, pattern))
    return b, inst


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_dma_alone_is_latency_plus_bytes_over_the_binding_rate(target):
    hw = TARGETS[target]
    b, inst = dma_program(target, 128, 1024)
    nbytes = 128 * 1024 * 4
    rate = min(16 * hw.dma_bytes_per_ns, hw.hbm_bandwidth_gbps)  # 4 KiB rows: full efficiency, all 16 engines
    assert single_instruction_ns(b, inst) == pytest.approx(hw.dma_fixed_latency_ns + nbytes / rate)


def test_dma_engines_scale_with_partitions():
    hw = TARGETS["trn2"]
    b, inst = dma_program("trn2", 16, 1024)  # 2 engines of 8 partitions
    assert single_instruction_ns(b, inst) == pytest.approx(hw.dma_fixed_latency_ns + 16 * 4096 / (2 * 23.0))
    cost = cost_model.instruction_cost(b.build().instructions()[0], b.build().buffers, hw)
    assert isinstance(cost, cost_model.DmaCost)
    assert (cost.engines, cost.bytes, cost.hbm_bytes, cost.chunk_bytes) == (2, 65536, 65536, 4096)


def test_transposing_dma_is_element_bound():
    hw = TARGETS["trn2"]
    b, inst = dma_program("trn2", 128, 128, transposed=True)  # 4-byte chunks on the HBM side
    efficiency = 0.5 * 4 / 256
    expected = hw.dma_fixed_latency_ns + 128 * 128 * 4 / (16 * 23.0 * efficiency)
    assert single_instruction_ns(b, inst) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("source", "partitions", "free", "filled"),
    [("hbm", 128, 512, 1.0), ("hbm", 64, 512, 0.5), ("sbuf", 128, 128, 1.0), ("hbm", 128, 24, 24 / 32)],
)
def test_dma_transpose_moves_at_its_share_of_all_engines(source, partitions, free, filled):
    """All 16 engines together, at 90% (HBM) or 50% (SBUF) of a copy's rate, scaled by the [128, 16] blocks
    the destination fills."""
    hw = TARGETS["trn2"]
    b = ProgramBuilder("trn2")
    src = b.hbm("x", (free, partitions), "bf16") if source == "hbm" else b.sbuf("x", (free, partitions), "bf16")
    tile = b.sbuf("t", (partitions, free), "bf16")
    inst = b.inst("dma_transpose", "dma", {"dst": b.ap(tile), "src": b.ap(src)})
    share = (0.9 if source == "hbm" else 0.5) * filled
    nbytes = partitions * free * 2
    expected = hw.dma_fixed_latency_ns + nbytes / (16 * hw.dma_bytes_per_ns * share)
    assert single_instruction_ns(b, inst) == pytest.approx(expected)


def test_dma_transpose_beats_an_element_strided_copy():
    """The transposed load a dma_copy can only do one element per descriptor (`test_transposing_dma_is_element_bound`)."""
    b, copy = dma_program("trn2", 128, 128, dtype="bf16", transposed=True)
    t = ProgramBuilder("trn2")
    src, tile = t.hbm("x", (128, 128), "bf16"), t.sbuf("t", (128, 128), "bf16")
    transpose = t.inst("dma_transpose", "dma", {"dst": t.ap(tile), "src": t.ap(src)})
    assert single_instruction_ns(t, transpose) < single_instruction_ns(b, copy) / 10


def test_matmul_flops_count():
    b, _ = matmul_program("trn2", "bf16", 128, 96, 512)
    inst = b.build().instructions()[0]
    assert cost_model.matmul_flops(inst) == 2 * 128 * 96 * 512
    b, _ = matmul_program("trn2", "bf16", 128, 128, 64, transpose=True)
    assert cost_model.matmul_flops(b.build().instructions()[0]) == 0


def test_int64_on_gpsimd_costs_twice_as_much():
    b = ProgramBuilder("trn2")
    a, c, d = b.sbuf("a", (128, 500), "i64"), b.sbuf("c", (128, 500), "i64"), b.sbuf("d", (128, 500), "i64")
    inst = b.inst("tensor_tensor", "gpsimd", {"dst": b.ap(d), "in0": b.ap(a), "in1": b.ap(c)}, {"op": "add"})
    assert single_instruction_ns(b, inst) == pytest.approx((150 + 500 * 2) / 1.2)
