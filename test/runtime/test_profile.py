"""Profile numbers (FLOPs, MFU, roofline, busy times, counts, locations), the summary and the trace."""

from __future__ import annotations

import itertools
import json

import ml_dtypes
import numpy as np
import pytest

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.hardware import TARGETS, Engine
from neuron_mlir.runtime.profile import decode_profile, encode_profile
from neuron_mlir.runtime.simulator import run_program


def tiled_matmul(target: str, dtype: str, m: int, k: int, n: int):
    """C[m, n] = A[k, m]^T @ B[k, n]; tiles of 128 x 128 x 512, double-buffered loads on two DMA queues."""
    b = ProgramBuilder(target, auto_waits=True)
    a_hbm, b_hbm = b.input("a", (k, m), dtype), b.input("b", (k, n), dtype)
    c_hbm = b.output("c", (m, n), "f32")
    a_tile, b_tile = b.sbuf("a_tile", (128, 128), dtype), b.sbuf("b_tile", (128, 512), dtype)
    acc = b.psum("acc", (128, 512))
    out = b.sbuf("out", (128, 512), "f32")
    with b.loop(0, m // 128) as mi, b.loop(0, n // 512) as ni:
        with b.loop(0, k // 128) as ki:
            a_row = b.scalar(b.reg(), "mul", ki, 128 * m)
            a_col = b.scalar(b.reg(), "mul", mi, 128)
            a_offset = b.scalar(b.reg(), "add", a_row, a_col)
            b_row = b.scalar(b.reg(), "mul", ki, 128 * n)
            b_col = b.scalar(b.reg(), "mul", ni, 512)
            b_offset = b.scalar(b.reg(), "add", b_row, b_col)
            b.dma(
                b.ap(a_tile),
                b.ap(a_hbm, [(m, 128), (1, 128)], reg=a_offset),
                queue=0,
                location="model.py:3 (load_a)",
            )
            b.dma(
                b.ap(b_tile),
                b.ap(b_hbm, [(n, 128), (1, 512)], reg=b_offset),
                queue=1,
                location="model.py:4 (load_b)",
            )
            flag = b.scalar(b.reg(), "ne", ki, 0)
            b.inst(
                "nc_matmul",
                "tensor",
                {"dst": b.ap(acc), "stationary": b.ap(a_tile), "moving": b.ap(b_tile)},
                {"accumulate": flag},
                location="model.py:5 (mm)",
            )
        b.inst("tensor_copy", "vector", {"dst": b.ap(out), "src": b.ap(acc)}, location="model.py:6 (evict)")
        c_row = b.scalar(b.reg(), "mul", mi, 128 * n)
        c_col = b.scalar(b.reg(), "mul", ni, 512)
        c_offset = b.scalar(b.reg(), "add", c_row, c_col)
        b.dma(b.ap(c_hbm, [(n, 128), (1, 512)], reg=c_offset), b.ap(out), queue=2, location="model.py:7 (store)")
    return b.build()


@pytest.fixture(scope="module")
def matmul_run():
    rng = np.random.default_rng(0)
    m, k, n = 256, 384, 1024
    a = rng.standard_normal((k, m)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (c,), profile = run_program(tiled_matmul("trn2", "f32", m, k, n), [a, b])
    return a, b, c, profile, (m, k, n)


def test_results(matmul_run):
    a, b, c, _, _ = matmul_run
    np.testing.assert_allclose(c, a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_flops_mfu_and_roofline(matmul_run):
    *_, profile, (m, k, n) = matmul_run
    hw = TARGETS["trn2"]
    assert profile.flops == 2 * m * k * n
    assert profile.flops_by_family == {"fp32": 2 * m * k * n}
    compute_bound = 2 * m * k * n / hw.peak_flops("fp32") * 1e9
    assert profile.compute_bound_ns == pytest.approx(compute_bound)
    assert profile.mfu == pytest.approx(compute_bound / profile.total_ns)
    assert profile.mfu == pytest.approx(profile.flops / (profile.total_ns * 1e-9) / hw.peak_flops("fp32"))
    hbm_bytes = 4 * (m * k * (n // 512) + k * n * (m // 128) + m * n)  # A reread per column block, B per row
    assert profile.hbm_bytes == hbm_bytes == profile.dma_bytes
    io_bytes = 4 * (m * k + k * n + m * n)  # each input read once and the output written once: the least traffic
    assert profile.io_bytes == io_bytes
    assert profile.hbm_bound_ns == pytest.approx(io_bytes / hw.hbm_bandwidth_gbps)
    assert profile.roofline_ns == max(profile.compute_bound_ns, profile.hbm_bound_ns)
    assert profile.total_ns >= profile.roofline_ns


def test_busy_times_and_counts(matmul_run):
    *_, profile, (m, k, n) = matmul_run
    hw = TARGETS["trn2"]
    matmuls = (m // 128) * (n // 512) * (k // 128)
    assert profile.opcode_counts == {
        "nc_matmul": matmuls,
        "dma_copy": 2 * matmuls + matmuls // (k // 128),
        "tensor_copy": matmuls // (k // 128),
    }
    assert profile.busy_ns["tensor"] == pytest.approx(matmuls * 4 * 512 / hw.clock_ghz[Engine.TENSOR])
    assert profile.busy_ns["vector"] == pytest.approx(matmuls // (k // 128) * 512 / hw.clock_ghz[Engine.VECTOR])
    assert set(profile.busy_ns) == {"tensor", "vector", "dma0", "dma1", "dma2"}
    per_queue: dict[int, float] = {}
    for queue, start, end in zip(profile.events.queue, profile.events.start, profile.events.end, strict=True):
        per_queue[queue] = per_queue.get(queue, 0.0) + end - start
    assert sorted(per_queue.values()) == pytest.approx(sorted(profile.busy_ns.values()))
    assert profile.total_ns == pytest.approx(max(profile.events.end))
    assert profile.instruction_count == len(profile.events)


def test_per_location_totals(matmul_run):
    *_, profile, _ = matmul_run
    assert profile.location_counts["model.py:5 (mm)"] == profile.opcode_counts["nc_matmul"]
    assert profile.location_ns["model.py:5 (mm)"] == pytest.approx(profile.busy_ns["tensor"])
    assert sum(profile.location_ns.values()) == pytest.approx(sum(profile.busy_ns.values()))


def test_summary_table(matmul_run):
    *_, profile, _ = matmul_run
    text = profile.summary()
    for expected in (
        "trn2",
        "total time",
        "roofline",
        "MFU",
        "HBM bytes",
        "tensor",
        "dma0",
        "nc_matmul",
        "model.py:5 (mm)",
    ):
        assert expected in text


def test_chrome_trace(matmul_run, tmp_path):
    *_, profile, _ = matmul_run
    path = tmp_path / "trace.json"
    profile.write_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(names.values()) == ["DMA queue 0", "DMA queue 1", "DMA queue 2", "TensorE", "VectorE"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == profile.instruction_count
    assert {e["tid"] for e in complete} == set(names)
    matmuls = [e for e in complete if e["name"] == "nc_matmul"]
    assert len(matmuls) == profile.opcode_counts["nc_matmul"]
    assert all(e["args"]["location"] == "model.py:5 (mm)" and isinstance(e["args"]["id"], int) for e in matmuls)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in complete)
    # one track per queue: events on a track never overlap
    for tid in names:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in complete if e["tid"] == tid)
        assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(spans))


def test_bf16_mfu_uses_the_bf16_peak():
    inputs = [np.zeros((256, 128), ml_dtypes.bfloat16), np.zeros((256, 512), ml_dtypes.bfloat16)]
    _, profile = run_program(tiled_matmul("trn2", "bf16", 128, 256, 512), inputs)
    hw = TARGETS["trn2"]
    assert profile.compute_bound_ns == pytest.approx(profile.flops / hw.peak_flops("bf16") * 1e9)
    assert 0 < profile.mfu < 1


def test_empty_program_profile():
    b = ProgramBuilder("trn3")
    _, profile = run_program(b.build(), [])
    assert profile.total_ns == 0
    assert profile.mfu == 0
    assert profile.flops == 0
    assert "trn3" in profile.summary()
    assert profile.chrome_trace()["traceEvents"][0]["ph"] == "M"


def test_a_profile_encoded_decodes_equal(matmul_run):
    *_, profile, _ = matmul_run
    decoded = decode_profile(encode_profile(profile))
    assert decoded == profile
    assert decoded.events.start == profile.events.start
    assert decoded.summary() == profile.summary()


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-8],  # the trace cut short
        lambda data: data + b"\0",  # bytes after it
        lambda data: data[:8] + b"x" + data[9:],  # not JSON
        lambda data: data.replace(b'"flops":', b'"flop":', 1),  # a field renamed
        lambda data: data.replace(b'"target":"trn2"', b'"target":2222', 1),  # a field of the wrong type
    ],
)
def test_bytes_that_are_not_a_profile_are_refused(matmul_run, damage):
    *_, profile, _ = matmul_run
    with pytest.raises(ValueError, match="not a profile"):
        decode_profile(damage(encode_profile(profile)))
