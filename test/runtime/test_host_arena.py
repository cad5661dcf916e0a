"""The shared host memory (runtime.host_arena): simulators of different programs run on the same host bytes, one
run at a time, each with the bits and profile it has alone; a run that finds the memory claimed uses its own."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from neuron_mlir.runtime import host_arena
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.bundle import read_bundle
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.simulator import run_program, run_validated
from neuron_mlir.runtime.validate import validate_program

DATA = Path(__file__).with_name("data")


def _inputs(program: Program, seed: int) -> list[np.ndarray]:
    from neuron_mlir.runtime import dtypes

    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(binding.shape).astype(dtypes.numpy_dtype(program.buffers[binding.buffer].dtype))
        for binding in program.inputs
    ]


def _reads_fresh_memory() -> Program:
    """Outputs of SBUF bytes nothing wrote (NaN on every run), beside bytes of the input and computed ones."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x = b.input("x", (64, 32), "f32")
    fresh, computed, mixed = (b.output(name, (64, 32), "f32") for name in ("fresh", "computed", "mixed"))
    t, u = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32")
    b.dma(b.ap(fresh), b.ap(t))  # t not written yet
    b.inst("memset", "vector", {"dst": b.ap(t)}, {"value": 1.0})
    b.inst("tensor_tensor", "vector", {"dst": b.ap(t), "in0": b.ap(t), "in1": b.ap(t)}, {"op": "add"})
    b.dma(b.ap(computed), b.ap(t), queue=1)
    b.dma(b.ap(u, [(1, 16)]), b.ap(x, [(32, 64), (1, 16)]), queue=2)  # half of u from x, the other half fresh
    b.dma(b.ap(mixed), b.ap(u), queue=3)
    return b.build()


def _programs() -> list[Program]:
    return [
        read_bundle(DATA / "softmax_512x512.neuronb"),
        read_bundle(DATA / "matmul_384x128x1024.neuronb"),
        _reads_fresh_memory(),
    ]


def _assert_same(outputs: list[np.ndarray], expected: list[np.ndarray], what: str) -> None:
    for got, want in zip(outputs, expected, strict=True):
        assert got.dtype == want.dtype
        assert got.shape == want.shape
        assert got.tobytes() == want.tobytes(), what


def test_programs_run_in_turn_on_the_same_host_memory_give_their_own_results():
    """Each program's runs, interleaved with the others' (which leave their own bytes in the shared memory), give
    the plain path's bits and profile; memory nobody wrote still reads as fresh (NaN) on every run."""
    programs = _programs()
    validated = [validate_program(program) for program in programs]
    references = {}
    for seed in range(3):
        for index, program in enumerate(programs):
            inputs = _inputs(program, seed % 2)
            if (index, seed % 2) not in references:
                references[index, seed % 2] = run_program(program, inputs, vectorize=False)
            expected, profile = references[index, seed % 2]
            outputs, got_profile = run_validated(validated[index], inputs, check_races=False)
            _assert_same(outputs, expected, f"program {index}, run {seed}")
            assert got_profile == profile
    fresh, computed, mixed = outputs
    assert np.isnan(fresh).all()
    assert (computed == 2.0).all()
    assert np.isnan(mixed[:, 16:]).all()
    assert not np.isnan(mixed[:, :16]).any()
    simulators = [v.cache["simulators"] for v in validated]
    assert all(len(pool) == 1 and pool[0].arena is host_arena.SHARED for pool in simulators)
    machines = [pool[0].machine for pool in simulators]
    arrays = [[a for arrays in m.arrays.values() for a in arrays] for m in machines]
    # the memories overlap: held once for all, not once per program
    assert any(np.shares_memory(a, b) for a in arrays[0] for b in arrays[1])


def test_a_run_that_finds_the_memory_claimed_uses_memories_of_its_own():
    """As a run on another thread (or one nested in a run) would: the same bits from a simulator whose memories are
    its own, kept beside the one on the shared memory."""
    program = _programs()[0]
    validated = validate_program(program)
    inputs = _inputs(program, 0)
    expected, _ = run_program(program, inputs, vectorize=False)
    assert host_arena.SHARED.claim()
    try:
        outputs, _ = run_validated(validated, inputs, check_races=False)
        (private,) = validated.cache["simulators"]
        assert private.arena is None
        _assert_same(outputs, expected, "while claimed")
    finally:
        host_arena.SHARED.release()
    outputs, _ = run_validated(validated, inputs, check_races=False)
    _assert_same(outputs, expected, "after")
    assert {id(s.arena) for s in validated.cache["simulators"]} == {id(None), id(host_arena.SHARED)}


def test_runs_on_two_threads_give_their_own_results():
    programs = _programs()[:2]
    validated = [validate_program(program) for program in programs]
    expected = [run_program(program, _inputs(program, 0), vectorize=False)[0] for program in programs]
    failures: list[str] = []

    def runs(index: int) -> None:
        for run in range(6):
            outputs, _ = run_validated(validated[index], _inputs(programs[index], 0), check_races=False)
            if [o.tobytes() for o in outputs] != [e.tobytes() for e in expected[index]]:
                failures.append(f"program {index}, run {run}")

    threads = [threading.Thread(target=runs, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_machines_are_carved_from_the_start_of_one_mapping(monkeypatch):
    """Later machines reuse the bytes of earlier ones; one larger than the mapping gets a new mapping."""
    monkeypatch.setattr(host_arena, "_RESERVE_BYTES", 1 << 20)
    arena = host_arena.HostArena()
    first = arena.carve([100, 5000])
    second = arena.carve([3000])
    assert np.shares_memory(first[0], second[0])
    assert not np.shares_memory(first[0], first[1])
    assert [a.size for a in first] == [100, 5000]
    larger = arena.carve([(1 << 20) + 1])
    assert larger[0].size == (1 << 20) + 1
    assert not np.shares_memory(larger[0], first[0])
    again = arena.carve([10])
    assert np.shares_memory(again[0], larger[0])


@pytest.fixture(autouse=True)
def _unclaimed():
    yield
    assert host_arena.SHARED.claim(), "a run left the shared memory claimed"
    host_arena.SHARED.release()


def test_lane_shadows_lie_at_the_end_above_every_machine(monkeypatch):
    """Every simulator's shadows for a worker are the same bytes at the mapping's end, the workers' slots disjoint
    and as large as the largest size asked; none when they would reach the machines' bytes."""
    monkeypatch.setattr(host_arena, "_RESERVE_BYTES", 1 << 20)
    arena = host_arena.HostArena()
    (machine,) = arena.carve([600_000])
    first = []
    for worker in range(2):
        space = arena.shadow_space(worker, 10_000)
        assert space is not None
        assert space.size >= 10_000
        first.append(space)
    assert not np.shares_memory(first[0], first[1])
    assert not any(np.shares_memory(space, machine) for space in first)
    again = arena.shadow_space(0, 5_000)
    assert again is not None
    assert np.shares_memory(again, first[0])
    assert again.size == first[0].size
    assert arena.shadow_space(0, 450_000) is None  # it would reach the machine's bytes
    assert arena.shadow_space(2, 150_000) is None


def test_a_refused_reservation_maps_only_what_the_machine_needs(monkeypatch):
    reserved = []
    real = host_arena._mapped

    def refusing(size: int) -> np.ndarray:
        reserved.append(size)
        if size > 1 << 20:
            raise MemoryError("the process cannot map it")  # what `_mapped` makes of the kernel's ENOMEM
        return real(size)

    monkeypatch.setattr(host_arena, "_mapped", refusing)
    arena = host_arena.HostArena()
    (array,) = arena.carve([5000])
    assert array.size == 5000
    assert reserved == [host_arena._reserve(5000), 8192]


def test_memories_the_process_cannot_map_are_a_memory_error():
    """A mapping beyond the process's address-space limit is refused by the kernel (ENOMEM): it reaches callers as
    the MemoryError NumPy raises for an allocation that fails, which neuron-opt reports as a diagnostic (a fuzz
    case declared an 8 GiB HBM buffer and the mapping's OSError escaped as a traceback)."""
    script = (
        "import resource\n"
        "from neuron_mlir.runtime import host_arena\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "try:\n"
        "    host_arena._mapped(8 << 30)\n"
        "except MemoryError as error:\n"
        "    print('MemoryError', error)\n"
    )
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith("MemoryError the simulated memories need 8589934592 bytes"), finished.stdout
