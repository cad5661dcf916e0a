"""The race checker: it catches a missing wait, accepts a correct one, and names both instructions."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.simulator import RaceError, run_program, sharing_written


def load_compute_store(wait_for_load: bool, wait_for_compute: bool):
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (128, 64), "f32"), b.output("y", (128, 64), "f32")
    t, u = b.sbuf("t", (128, 64), "f32"), b.sbuf("u", (128, 64), "f32")
    load = b.dma(b.ap(t), b.ap(x), queue=2, location="model.py:10 (net.load)")
    compute = b.inst(
        "activation",
        "scalar",
        {"dst": b.ap(u), "src": b.ap(t)},
        {"func": "exp"},
        waits=[load] if wait_for_load else [],
        location="model.py:11 (net.act)",
    )
    b.dma(b.ap(y), b.ap(u), queue=3, waits=[compute] if wait_for_compute else [])
    return b.build()


def test_correct_waits_pass():
    x = np.zeros((128, 64), np.float32)
    (y,), _ = run_program(load_compute_store(True, True), [x])
    np.testing.assert_array_equal(y, 1.0)


def test_missing_wait_is_reported_with_both_instructions():
    with pytest.raises(RaceError) as caught:
        run_program(load_compute_store(False, True), [np.zeros((128, 64), np.float32)])
    message = str(caught.value)
    assert "instruction 1 (activation, scalar queue at model.py:11 (net.act))" in message
    assert "instruction 0 (dma_copy, dma2 queue at model.py:10 (net.load))" in message
    assert "SBUF" in message
    assert "no chain of waits" in message


def test_missing_wait_before_the_store_is_reported():
    with pytest.raises(RaceError, match=r"instruction 2 \(dma_copy, dma3 queue\)"):
        run_program(load_compute_store(True, False), [np.zeros((128, 64), np.float32)])


def test_race_checking_can_be_turned_off():
    run_program(load_compute_store(False, False), [np.zeros((128, 64), np.float32)], check_races=False)


def double_buffered(wait_for_reader: bool):
    """A loop loads tile i into buffer i % 2 while ScalarE works on the other one."""
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (128, 4 * 64), "f32"), b.output("y", (128, 4 * 64), "f32")
    t = b.sbuf("t", (128, 2 * 64), "f32")
    u = b.sbuf("u", (128, 4 * 64), "f32")
    with b.loop(0, 4) as i:
        slot = b.scalar(b.reg(), "rem", i, 2)
        slot_offset = b.scalar(b.reg(), "mul", slot, 64)
        column = b.scalar(b.reg(), "mul", i, 64)
        load = b.dma(
            b.ap(t, [(1, 64)], reg=slot_offset),
            b.ap(x, [(256, 128), (1, 64)], reg=column),
            waits=[50] if wait_for_reader else [],
        )
        b.inst(
            "activation",
            "scalar",
            {"dst": b.ap(u, [(1, 64)], reg=column), "src": b.ap(t, [(1, 64)], reg=slot_offset)},
            {"func": "copy"},
            waits=[load],
            id=50,
        )
    b.dma(b.ap(y), b.ap(u), queue=1, waits=[50])
    return b.build()


def test_write_after_read_across_loop_iterations():
    data = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)
    (y,), _ = run_program(double_buffered(True), [data])
    np.testing.assert_array_equal(y, data)
    with pytest.raises(
        RaceError,
        match=r"instruction \d+ \(dma_copy, dma0 queue\) writes .* instruction 50 "
        r"\(activation, scalar queue\) read",
    ):
        run_program(double_buffered(False), [data])


def test_ordering_through_a_chain_of_waits():
    """DMA -> VectorE -> ScalarE: ScalarE reads the DMA's bytes, ordered through VectorE."""
    b = ProgramBuilder("trn2")
    x = b.input("x", (128, 8), "f32")
    t, u, v = (b.sbuf(name, (128, 8), "f32") for name in "tuv")
    load = b.dma(b.ap(t), b.ap(x))
    middle = b.inst("tensor_copy", "vector", {"dst": b.ap(u), "src": b.ap(t)}, waits=[load])
    b.inst(
        "tensor_tensor",
        "gpsimd",
        {"dst": b.ap(v), "in0": b.ap(t), "in1": b.ap(u)},
        {"op": "add"},
        waits=[middle],
    )
    run_program(b.build(), [np.ones((128, 8), np.float32)])


def test_disjoint_bytes_of_one_buffer_need_no_wait():
    """Two queues write interleaved columns of one tile: the hulls overlap, the bytes do not."""
    b = ProgramBuilder("trn2")
    x = b.input("x", (128, 64), "f32")
    t = b.sbuf("t", (128, 64), "f32")
    b.dma(b.ap(t, [(2, 32)]), b.ap(x, [(64, 128), (2, 32)]), queue=0)
    b.dma(b.ap(t, [(2, 32)], offset=1), b.ap(x, [(64, 128), (2, 32)], offset=1), queue=1)
    b.inst("memset", "gpsimd", {"dst": b.ap(t, partitions=32, partition_start=96)}, {"value": 0.0})
    with pytest.raises(RaceError):
        run_program(b.build(), [np.zeros((128, 64), np.float32)])
    # without the overlapping memset (partitions 96..127 overlap both DMAs) there is no race
    b2 = ProgramBuilder("trn2")
    x = b2.input("x", (128, 64), "f32")
    t = b2.sbuf("t", (128, 64), "f32")
    b2.dma(b2.ap(t, [(2, 32)]), b2.ap(x, [(64, 128), (2, 32)]), queue=0)
    b2.dma(b2.ap(t, [(2, 32)], offset=1), b2.ap(x, [(64, 128), (2, 32)], offset=1), queue=1)
    run_program(b2.build(), [np.zeros((128, 64), np.float32)])


def test_concurrent_reads_do_not_race():
    b = ProgramBuilder("trn2")
    x = b.input("x", (128, 8), "f32")
    t, u, v = (b.sbuf(name, (128, 8), "f32") for name in "tuv")
    load = b.dma(b.ap(t), b.ap(x))
    b.inst("tensor_copy", "vector", {"dst": b.ap(u), "src": b.ap(t)}, waits=[load])
    b.inst("activation", "scalar", {"dst": b.ap(v), "src": b.ap(t)}, {"func": "copy"}, waits=[load])
    run_program(b.build(), [np.ones((128, 8), np.float32)])


def test_aliasing_buffers_are_checked():
    """Two buffers the allocator placed on the same bytes conflict like one."""
    b = ProgramBuilder("trn2")
    first = b.sbuf("first", (128, 16), "f32", address=1024)
    second = b.sbuf("second", (128, 8), "bf16", address=1024 + 32)
    b.inst("memset", "vector", {"dst": b.ap(first)}, {"value": 1.0})
    b.inst("memset", "gpsimd", {"dst": b.ap(second)}, {"value": 2.0})
    with pytest.raises(RaceError, match=r"instruction 1 .* writes .* instruction 0"):
        run_program(b.build(), [])


def test_matmul_group_evicted_after_wait():
    """TensorE accumulates; VectorE evicts after waiting on the last matmul of the group."""
    b = ProgramBuilder("trn2")
    s = b.sbuf("s", (128, 64), "bf16")
    m = b.sbuf("m", (128, 128), "bf16")
    p = b.psum("p", (64, 128))
    o = b.sbuf("o", (64, 128), "f32")
    init_s = b.inst("memset", "vector", {"dst": b.ap(s)}, {"value": 1.0})
    init_m = b.inst("memset", "gpsimd", {"dst": b.ap(m)}, {"value": 0.5})
    with b.loop(0, 3) as k:
        flag = b.scalar(b.reg(), "ne", k, 0)
        mm = b.inst(
            "nc_matmul",
            "tensor",
            {"dst": b.ap(p), "stationary": b.ap(s), "moving": b.ap(m)},
            {"accumulate": flag},
            waits=[init_s, init_m],
        )
    b.inst("tensor_copy", "vector", {"dst": b.ap(o), "src": b.ap(p)}, waits=[mm])
    run_program(b.build(), [])


def test_overlap_on_runs_agrees_with_the_element_by_element_test():
    """`_runs_meet` decides overlap from runs of adjacent elements; it must agree with the element-wise answer on
    interleaved rows, sliding windows, broadcasts and mixed element sizes."""
    from neuron_mlir.runtime.races import AccessSite, _runs_meet

    def site(pattern: tuple[tuple[int, int], ...], itemsize: int, base: int) -> AccessSite:
        return AccessSite("x", False, 0, 0, "SBUF", 0, 1, base, itemsize, pattern, 0, 0, -1)

    def elements_meet(a: AccessSite, shift_a: int, b: AccessSite, shift_b: int) -> bool:
        a_bytes = {int(s) + k for s in a.byte_offsets(shift_a) for k in range(a.itemsize)}
        return any(int(s) + k in a_bytes for s in b.byte_offsets(shift_b) for k in range(b.itemsize))

    rng = np.random.default_rng(0)
    patterns = [((8, 4), (1, 3)), ((3, 5), (1, 4)), ((0, 3), (1, 2)), ((2, 6),), ((16, 2), (4, 2), (1, 2)), ((1, 7),)]
    for _ in range(400):
        a = site(patterns[rng.integers(len(patterns))], int(rng.choice([2, 4])), int(rng.integers(0, 24)))
        b = site(patterns[rng.integers(len(patterns))], int(rng.choice([2, 4])), int(rng.integers(0, 24)))
        shift_a, shift_b = int(rng.integers(0, 8)), int(rng.integers(0, 8))
        assert _runs_meet(a, shift_a, b, shift_b) == elements_meet(a, shift_a, b, shift_b)


def test_a_checked_run_leaves_no_offsets_with_the_operand_sites():
    """The offsets race checks keep per operand site serve only the run that checks; later runs (the tape) would
    carry them for nothing, up to 8 MiB a site at real widths. Runs checking again find the same verdicts."""
    from neuron_mlir.runtime.simulator import run_validated
    from neuron_mlir.runtime.validate import validate_program

    def interleaved(wait: bool):
        # two queues write the even and the odd columns of one tile: hulls that meet, bytes that do not, so
        # only an element-wise test clears them; the third writes it all, after them or not
        b = ProgramBuilder("trn2")
        x, y = b.input("x", (128, 64), "f32"), b.output("y", (128, 64), "f32")
        t = b.sbuf("t", (128, 64), "f32")
        even = b.dma(b.ap(t, [(2, 32)]), b.ap(x, [(64, 128), (2, 32)]), queue=2)
        odd = b.dma(b.ap(t, [(2, 32)], offset=1), b.ap(x, [(64, 128), (2, 32)], offset=1), queue=3)
        b.dma(b.ap(y), b.ap(t), queue=4, waits=[even, odd] if wait else [even])
        return b.build()

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    validated = validate_program(interleaved(True))
    for _ in range(2):
        (y,), _ = run_validated(validated, [x])
        np.testing.assert_array_equal(y, x)
    (simulator,) = validated.cache["simulators"]
    sites = [site for plan in simulator.plans for site in plan.sites]
    assert sites
    assert all(site._sorted is None and site._runs is None for site in sites)
    racy = validate_program(interleaved(False))
    with pytest.raises(RaceError, match="dma_copy"):
        run_validated(racy, [x])


def test_buffers_sharing_a_written_byte_are_those_the_pairs_give():
    """`sharing_written`, which tells the checker which buffers' reads can race (any instruction writes a byte
    they share), is the pairwise test of every two byte ranges of a memory, an empty range sharing nothing with
    itself: compared on random ranges, empty ones and equal starts among them."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        extents = []
        for _ in range(int(rng.integers(1, 25))):
            start = int(rng.integers(0, 40))
            extents.append((int(rng.integers(0, 2)), start, start + int(rng.choice([0, 1, 3, 8, 20]))))
        written = [bool(rng.random() < 0.3) for _ in extents]
        expected = [
            any(
                marked and memory == other_memory and other_start < end and start < other_end
                for (other_memory, other_start, other_end), marked in zip(extents, written, strict=True)
            )
            for memory, start, end in extents
        ]
        assert sharing_written(extents, written) == expected
