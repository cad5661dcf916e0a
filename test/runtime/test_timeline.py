"""The timeline: in-order queues, waits on the latest instance, overlap across engines, shared DMA bandwidth."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.hardware import TARGETS
from neuron_mlir.runtime.simulator import run_program

TRN2 = TARGETS["trn2"]
COPY_NS = 512 / 0.96  # tensor_copy of 512 f32 per partition on VectorE
ACT_NS = 512 / 1.2  # activation of 512 elements on ScalarE


def intervals(profile) -> dict[int, list[tuple[float, float]]]:
    """Instruction id -> [(start, end)] of each instance, in issue order."""
    found: dict[int, list[tuple[float, float]]] = {}
    for start, end, index in zip(profile.events.start, profile.events.end, profile.events.instruction, strict=True):
        found.setdefault(profile.instructions[index].id, []).append((start, end))
    return found


def tiles(b: ProgramBuilder, count: int, free: int = 512, dtype: str = "f32") -> list[int]:
    return [b.sbuf(f"t{i}", (128, free), dtype) for i in range(count)]


def test_independent_engines_overlap():
    b = ProgramBuilder("trn2")
    t = tiles(b, 4)
    vector = b.inst("tensor_copy", "vector", {"dst": b.ap(t[0]), "src": b.ap(t[1])})
    scalar = b.inst("activation", "scalar", {"dst": b.ap(t[2]), "src": b.ap(t[3])}, {"func": "exp"})
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    [(vector_start, vector_end)], [(scalar_start, scalar_end)] = spans[vector], spans[scalar]
    assert (vector_start, scalar_start) == (0.0, 0.0)
    assert vector_end == pytest.approx(COPY_NS)
    assert scalar_end == pytest.approx(ACT_NS)
    assert profile.total_ns == pytest.approx(max(COPY_NS, ACT_NS))


def test_a_wait_serialises():
    b = ProgramBuilder("trn2")
    t = tiles(b, 3)
    vector = b.inst("tensor_copy", "vector", {"dst": b.ap(t[0]), "src": b.ap(t[1])})
    scalar = b.inst("activation", "scalar", {"dst": b.ap(t[2]), "src": b.ap(t[0])}, {"func": "exp"}, waits=[vector])
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    assert spans[scalar][0][0] == pytest.approx(COPY_NS)
    assert profile.total_ns == pytest.approx(COPY_NS + ACT_NS)


def test_one_queue_runs_in_order():
    b = ProgramBuilder("trn2")
    t = tiles(b, 4)
    first = b.inst("tensor_copy", "vector", {"dst": b.ap(t[0]), "src": b.ap(t[1])})
    second = b.inst("tensor_copy", "vector", {"dst": b.ap(t[2]), "src": b.ap(t[3])})
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    assert spans[second][0][0] == pytest.approx(spans[first][0][1])


def test_a_wait_on_an_instruction_not_yet_issued_does_not_wait():
    b = ProgramBuilder("trn2")
    t = tiles(b, 4)
    early = b.inst("activation", "scalar", {"dst": b.ap(t[0]), "src": b.ap(t[1])}, {"func": "exp"}, waits=[99])
    b.inst("tensor_copy", "vector", {"dst": b.ap(t[2]), "src": b.ap(t[3])}, id=99)
    _, profile = run_program(b.build(), [])
    assert intervals(profile)[early][0][0] == 0.0


def test_waits_use_the_most_recent_instance():
    """Iteration i's ScalarE op waits on iteration i's VectorE op; its first instance cannot see a later one."""
    b = ProgramBuilder("trn2")
    t = tiles(b, 4)
    with b.loop(0, 3):
        vector = b.inst("tensor_copy", "vector", {"dst": b.ap(t[0]), "src": b.ap(t[1])}, waits=[101])
        scalar = b.inst(
            "activation",
            "scalar",
            {"dst": b.ap(t[2]), "src": b.ap(t[0])},
            {"func": "exp"},
            waits=[vector],
            id=101,
        )
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    for i in range(3):
        assert spans[scalar][i][0] == pytest.approx(spans[vector][i][1])
    # the copy of iteration i+1 waits for the activation of iteration i (a loop-carried dependence)
    for i in range(2):
        assert spans[vector][i + 1][0] == pytest.approx(spans[scalar][i][1])
    assert spans[vector][0][0] == 0.0


def dma_job(b: ProgramBuilder, queue: int, partitions: int = 128, free: int = 4096):
    """An HBM -> SBUF load of [partitions, free] f32 on `queue`."""
    source = b.hbm(f"x{queue}", (partitions, free), "f32")
    tile = b.sbuf(f"t{queue}", (partitions, free), "f32")
    return b.dma(b.ap(tile), b.ap(source), queue=queue)


def test_dma_queues_share_the_cores_bandwidth():
    nbytes = 128 * 4096 * 4  # 2 MiB each: 4 KiB rows, all 16 engines
    alone = TRN2.dma_fixed_latency_ns + nbytes / TRN2.hbm_bandwidth_gbps

    b = ProgramBuilder("trn2")
    dma_job(b, 0)
    _, one = run_program(b.build(), [])
    assert one.total_ns == pytest.approx(alone)

    b = ProgramBuilder("trn2")
    first, second = dma_job(b, 0), dma_job(b, 1)
    _, two = run_program(b.build(), [])
    spans = intervals(two)
    # Both start together; the first keeps its full rate, the second gets what is left, then finishes after it.
    assert spans[first][0][0] == 0.0
    assert spans[first][0][1] == pytest.approx(alone)
    assert spans[second][0][1] == pytest.approx(TRN2.dma_fixed_latency_ns + 2 * nbytes / TRN2.hbm_bandwidth_gbps)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_sixteen_queues_never_beat_the_hbm_roofline(target):
    b = ProgramBuilder(target)
    for queue in range(16):
        dma_job(b, queue, partitions=16, free=2048)
    _, profile = run_program(b.build(), [])
    hw = TARGETS[target]
    assert profile.hbm_bytes == 16 * 16 * 2048 * 4
    assert profile.total_ns >= profile.hbm_bound_ns
    # and the DMA engines' aggregate rate bounds it too (16 x the per-engine rate)
    engine_bound = profile.dma_bytes / hw.dma_aggregate_bytes_per_ns
    assert profile.total_ns >= hw.dma_fixed_latency_ns + engine_bound * (1 - 1e-9)


def test_small_partition_transfers_run_side_by_side():
    """Two 8-partition transfers each use one engine: together they take as long as one."""
    b = ProgramBuilder("trn2")
    first, second = dma_job(b, 0, partitions=8, free=1024), dma_job(b, 1, partitions=8, free=1024)
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    expected = TRN2.dma_fixed_latency_ns + 8 * 4096 / TRN2.dma_bytes_per_ns
    assert spans[first][0][1] == pytest.approx(expected)
    assert spans[second][0][1] == pytest.approx(expected)


def test_results_do_not_depend_on_timing():
    """Functional execution is in program order whatever the queues' timing (here: no waits at all)."""
    import numpy as np

    b = ProgramBuilder("trn2")
    x = b.input("x", (128, 512), "f32")
    y = b.output("y", (128, 512), "f32")
    t = b.sbuf("t", (128, 512), "f32")
    b.dma(b.ap(t), b.ap(x), queue=0)
    b.inst("tensor_scalar", "vector", {"dst": b.ap(t), "src": b.ap(t)}, {"op0": "add", "scalar0": 1.0})
    b.dma(b.ap(y), b.ap(t), queue=5)
    data = np.ones((128, 512), np.float32)
    (out,), _ = run_program(b.build(), [data], check_races=False)
    np.testing.assert_array_equal(out, 2.0)


@pytest.mark.parametrize("seed", range(20))
def test_transfers_take_the_bits_of_the_segment_walk(seed):
    """`Bandwidth.transfer`'s direct paths (after the last breakpoint; inside the last busy segment) against
    `Bandwidth.walk`, the segment-by-segment definition: the same end of every transfer, the same breakpoints
    and usage after each, over random transfers that start after, inside and before earlier ones, with history
    forgotten now and then."""
    from neuron_mlir.runtime.timeline import Bandwidth

    rng = np.random.default_rng(seed)
    fast = Bandwidth(TRN2.dma_aggregate_bytes_per_ns, TRN2.hbm_bandwidth_gbps)
    plain = Bandwidth(TRN2.dma_aggregate_bytes_per_ns, TRN2.hbm_bandwidth_gbps)
    now = 0.0
    for step in range(300):
        kind = rng.integers(4)
        if kind == 0:  # after everything
            start = max(fast.times[-1], now) + float(rng.integers(0, 3) * rng.random() * 100)
        elif kind == 1 and len(fast.times) > 1:  # inside the last busy segment
            start = fast.times[-2] + (fast.times[-1] - fast.times[-2]) * float(rng.random())
        else:
            start = now + float(rng.random() * 3000)
        start = max(start, fast.times[0])
        nbytes = int(rng.choice([4, 224, 4096, 65536, 1 << 20]))
        engines = int(rng.integers(1, 17))
        efficiency = float(rng.choice([1.0, 0.875, 0.0078125, 0.5]))
        hbm_per_byte = float(rng.choice([0.0, 1.0, 2.0]))
        rate = engines * TRN2.dma_bytes_per_ns
        end = fast.transfer(start, nbytes, rate, efficiency, hbm_per_byte)
        assert end == plain.walk(start, nbytes, rate, efficiency, hbm_per_byte)
        assert fast.times == plain.times
        assert fast.engine_used == plain.engine_used
        assert fast.hbm_used == plain.hbm_used
        now = max(now, start - 500.0)
        if step % 50 == 49:
            fast.forget_before(now)
            plain.forget_before(now)


# ---- TensorE row tiles ---------------------------------------------------------------------------------------

MATMUL_NS = 512 / 2.4  # a bf16 matmul streaming 512 moving columns on trn2


def row_tiled(b: ProgramBuilder, tiles: list[tuple[int, int] | None], columns: int = 512, name: str = "") -> list[int]:
    """One bf16 matmul per entry, in order: (row_tile_start, row_tile_size), or None for the full array (K = 128).
    Each writes its own PSUM buffer and reads its operands on its row tile's partitions."""
    stationary, moving = b.sbuf(f"{name}s", (128, 64), "bf16"), b.sbuf(f"{name}m", (128, 512), "bf16")
    ids = []
    for position, tile in enumerate(tiles):
        dst = b.psum(f"{name}p{position}", (64, columns))
        start, size = tile if tile is not None else (0, 128)
        attrs = {"row_tile_start": start, "row_tile_size": size} if tile is not None else {}
        ids.append(
            b.inst(
                "nc_matmul",
                "tensor",
                {
                    "dst": b.ap(dst),
                    "stationary": b.ap(stationary, partitions=size, partition_start=start),
                    "moving": b.ap(moving, [(1, columns)], partitions=size, partition_start=start),
                },
                attrs,
            )
        )
    return ids


def test_matmuls_in_disjoint_row_tiles_stream_together():
    b = ProgramBuilder("trn2")
    first, second = row_tiled(b, [(0, 64), (64, 64)])
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    assert spans[first] == spans[second]
    [(start, end)] = spans[first]
    assert start == 0.0
    assert end == pytest.approx(MATMUL_NS)
    assert profile.total_ns == pytest.approx(MATMUL_NS)


def test_matmuls_in_one_row_tile_take_turns():
    b = ProgramBuilder("trn2")
    _, second, third = row_tiled(b, [(0, 64), (0, 32), (32, 32)])
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    assert spans[second][0][0] == pytest.approx(MATMUL_NS)  # rows 0..31 are the first one's
    # rows 32..63 are the first one's too, and issue is in order: the third starts with the second
    assert spans[third][0] == spans[second][0]
    assert profile.total_ns == pytest.approx(2 * MATMUL_NS)


def test_a_full_array_matmul_waits_for_every_row_tile():
    b = ProgramBuilder("trn2")
    quarter, half, full = row_tiled(b, [(96, 32), (0, 64), None])
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    assert spans[quarter][0][0] == spans[half][0][0] == 0.0
    start, end = spans[full][0]
    assert start == pytest.approx(MATMUL_NS)
    assert end == pytest.approx(2 * MATMUL_NS)


def test_row_tiled_matmuls_issue_and_complete_in_order():
    """A matmul behind a full-array one starts after it although its rows would be free; a short matmul beside a
    long one finishes streaming first but counts as done only with it."""
    b = ProgramBuilder("trn2")
    _, tiled = row_tiled(b, [None, (64, 64)])
    _, profile = run_program(b.build(), [])
    assert intervals(profile)[tiled][0][0] == pytest.approx(MATMUL_NS)
    b = ProgramBuilder("trn2")
    (long,) = row_tiled(b, [(0, 64)])
    (short,) = row_tiled(b, [(64, 64)], columns=128, name="short_")
    _, profile = run_program(b.build(), [])
    spans = intervals(profile)
    for index in (long, short):  # the short one streams 128 columns and is done with the long one
        start, end = spans[index][0]
        assert start == 0.0
        assert end == pytest.approx(MATMUL_NS)
    assert profile.busy_ns["tensor"] == pytest.approx(2 * MATMUL_NS)
