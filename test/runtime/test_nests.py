"""Loop nests handled as a whole (runtime.lanes, RaceChecker.issue_lanes, Timeline.issue_lanes) against the plain
interpreter: the same instances and registers, the same race verdicts and messages, the same profile.

The plain path is `vectorize=False`: every instance issued one by one, checked and timed as it issues. Races are
planted in loops long enough that the nest check (not the first lanes, which go one by one while the clocks
settle) has to find them.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import pytest

from neuron_mlir.runtime import isa, races
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.interpreter import Interpreter
from neuron_mlir.runtime.lanes import trace, vector_scalar_op
from neuron_mlir.runtime.program import Loop, Node, Program, Reg, ScalarOp
from neuron_mlir.runtime.simulator import RaceError, Simulator, run_program
from neuron_mlir.runtime.validate import validate_program

# ---- the definition's loop --------------------------------------------------------------------------------------


def test_iterating_a_loop_from_given_trips_and_registers_is_what_the_loop_does():
    """`Interpreter.iterate` (what a nest that cannot batch falls back to) runs the iterations the loop would, from
    the registers as they are: a sum of the induction values into register 1, which starts at 10."""
    body = (ScalarOp(Reg(1), "add", Reg(1), Reg(0)),)
    loop = Loop(Reg(0), Reg(2), 5, 1, body)
    whole = Interpreter({}, 3, lambda plan, values: None)
    whole.registers[1:] = [10, 2]
    whole.run([loop])
    part = Interpreter({}, 3, lambda plan, values: None)
    part.registers[1:] = [10, 2]
    part.iterate(loop, range(2, 5))
    assert part.registers == whole.registers == [4, 10 + 2 + 3 + 4, 2]


# ---- registers over lanes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(isa.SCALAR_OPS))
def test_vector_scalar_ops_give_the_registers_bits(op):
    rng = np.random.default_rng(len(op))
    edges = [0, 1, -1, 2, -2, 7, -7, 2**31 - 1, -(2**31), 2**30, -(2**30) - 3, 65536]
    values = np.array(edges + rng.integers(-(2**31), 2**31, 200).tolist(), dtype=np.int64)
    lhs, rhs = np.meshgrid(values, values)
    result = vector_scalar_op(op, lhs, rhs)
    if op in ("floordiv", "rem"):
        assert result is None  # some divisor is 0: the plain run reports it
        nonzero = rhs != 0
        lhs, rhs = lhs[nonzero], rhs[nonzero]
        result = vector_scalar_op(op, lhs, rhs)
    expected = [isa.scalar_op(op, int(a), int(b)) for a, b in zip(lhs.reshape(-1), rhs.reshape(-1), strict=True)]
    assert np.asarray(result).reshape(-1).tolist() == expected
    assert vector_scalar_op(op, 5, 3) == isa.scalar_op(op, 5, 3)


def _loops(nodes: Sequence[Node]) -> list[Loop]:
    found = []
    for node in nodes:
        if isinstance(node, Loop):
            found.append(node)
            found += _loops(node.body)
    return found


def scalar_heavy_nest(seed: int) -> Program:
    """A perfect nest of two loops whose registers come from chains of every scalar op (wrapping, negative,
    divisions by non-zero values), an inner loop unrolled per lane, and a register left for after the nest."""
    rng = np.random.default_rng(seed)
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (16, 4096), "f32"), b.output("y", (16, 4096), "f32")
    t = b.sbuf("t", (16, 8), "f32")
    kept = b.reg()
    with b.loop(1, 4) as i:
        scaled = b.scalar(b.reg(), "mul", i, int(rng.integers(2**20, 2**29)))  # wraps past 2**31
        with b.loop(-2, 3, 2) as j:
            value = b.scalar(b.reg(), "add", scaled, j)
            for op in ("sub", "max", "min", "floordiv", "rem", "mul", "lt", "ge", "eq", "ne", "le", "gt"):
                operand = int(rng.integers(1, 9)) * (1 if rng.random() < 0.5 else -1)
                b.scalar(value, op, value, operand)
            column = b.scalar(b.reg(), "rem", value, 256)
            column = b.scalar(column, "add", column, 256)
            b.scalar(column, "mul", column, 8)
            with b.loop(0, 2) as k:
                offset = b.scalar(b.reg(), "add", column, k)
                b.dma(b.ap(t), b.ap(x, [(4096, 16), (1, 8)], reg=offset))
                b.dma(b.ap(y, [(4096, 16), (1, 8)], reg=offset), b.ap(t), queue=1)
            b.scalar(kept, "add", column, j)
    b.dma(b.ap(y, [(4096, 16), (1, 8)], reg=kept), b.ap(t), queue=2)
    return b.build()


@pytest.mark.parametrize("seed", range(6))
def test_a_trace_issues_what_the_interpreter_issues(seed):
    program = scalar_heavy_nest(seed)
    simulator = Simulator(validate_program(program))
    (loop,) = [node for node in program.body if isinstance(node, Loop)]
    issued: list[tuple[int, list[int]]] = []
    interpreter = Interpreter(
        simulator.plan_of, program.num_registers, lambda plan, values: issued.append((plan.index, values))
    )
    interpreter.run((loop,))
    assert type(loop.lower) is int
    assert type(loop.upper) is int
    lanes = trace(loop, range(loop.lower, loop.upper, loop.step), [0] * program.num_registers, simulator.plan_of)
    assert lanes is not None
    assert lanes.shape == (3, 3)
    assert [(plan.index, values) for plan, values in lanes.instances()] == issued
    registers = [0] * program.num_registers
    for register, value in lanes.exit_registers.items():
        registers[register] = value
    assert registers == interpreter.registers


def test_nests_a_trace_cannot_describe_are_declined():
    b = ProgramBuilder("trn2", auto_waits=True)
    x = b.input("x", (16, 64), "f32")
    t = b.sbuf("t", (16, 8), "f32")
    carried = b.reg()
    with b.loop(0, 4):  # a register carried from one iteration to the next
        b.scalar(carried, "add", carried, 8)
        b.dma(b.ap(t), b.ap(x, [(64, 16), (1, 8)], reg=carried))
    with b.loop(0, 3) as i, b.loop(0, i):  # an inner loop whose trip count differs per iteration
        b.inst("memset", "vector", {"dst": b.ap(t)}, {"value": 1.0})
    program = b.build()
    simulator = Simulator(validate_program(program))
    for loop in [node for node in program.body if isinstance(node, Loop)]:
        assert type(loop.lower) is int  # the loops at the top have immediate bounds
        assert type(loop.upper) is int
        trips = range(loop.lower, loop.upper, loop.step)
        assert trace(loop, trips, [0] * program.num_registers, simulator.plan_of) is None


# ---- race verdicts ------------------------------------------------------------------------------------------


def assert_runs_agree(program: Program, inputs: Sequence[np.ndarray]) -> bool:
    """The plain path and the fast path (a fresh copy of the program, run three times: first, taped, replayed)
    agree: the same RaceError message, or the same bits and profile. Returns whether there was a race."""
    copy = dataclasses.replace(program, body=list(program.body))
    try:
        expected, reference = run_program(program, inputs, vectorize=False)
    except RaceError as error:
        message = str(error)
    else:
        message = None
    if message is not None:
        with pytest.raises(RaceError) as caught:
            run_program(copy, inputs)
        assert str(caught.value) == message
        return True
    for _ in range(3):
        outputs, profile = run_program(copy, inputs)
        for want, got in zip(expected, outputs, strict=True):
            assert got.tobytes() == want.tobytes()
        assert profile == reference
    return False


@pytest.fixture
def nest_checks(monkeypatch) -> list[int]:
    """Counts the nests whose race check ran as a whole (past the lanes that settle one by one); nests as small
    as these tests' are checked as a whole too."""
    monkeypatch.setattr(races.RaceChecker, "MIN_NEST_INSTANCES", 0)
    counted: list[int] = []
    original = races.RaceChecker._check_within

    def check_within(self, lanes, *args):
        counted.append(lanes.count)
        return original(self, lanes, *args)

    monkeypatch.setattr(races.RaceChecker, "_check_within", check_within)
    return counted


def striped_stores(distance: int, trips: int = 12, blocks: int = 7, ordered: bool = False) -> Program:
    """Queue 1 stores tile a to block i of y, queue 2 stores tile b to block (i + distance) % blocks: the two
    stores of one block are `distance` lanes apart and nothing orders them (unless `ordered`: then each store
    waits on the other queue's latest one)."""
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (16, 8), "f32"), b.output("y", (16, blocks * 8), "f32")
    a_tile, b_tile = b.sbuf("a", (16, 8), "f32"), b.sbuf("b", (16, 8), "f32")
    load_a = b.dma(b.ap(a_tile), b.ap(x), queue=3)
    load_b = b.dma(b.ap(b_tile), b.ap(x), queue=4)
    with b.loop(0, trips) as i:
        own = b.scalar(b.reg(), "rem", i, blocks)
        b.scalar(own, "mul", own, 8)
        other = b.scalar(b.reg(), "add", i, distance)
        b.scalar(other, "rem", other, blocks)
        b.scalar(other, "mul", other, 8)
        store_a, store_b = 1000, 1001
        b.dma(
            b.ap(y, [(blocks * 8, 16), (1, 8)], reg=own), b.ap(a_tile), queue=1,
            waits=[load_a, store_b] if ordered else [load_a], id=store_a,
        )  # fmt: skip
        b.dma(
            b.ap(y, [(blocks * 8, 16), (1, 8)], reg=other), b.ap(b_tile), queue=2,
            waits=[load_b, store_a] if ordered else [load_b], id=store_b,
        )  # fmt: skip
    return b.build()


@pytest.mark.parametrize("distance", [3, 5])
def test_a_race_first_reached_in_a_late_lane_is_reported_as_one_by_one(distance, nest_checks):
    program = striped_stores(distance)
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    with pytest.raises(RaceError) as sequential:
        run_program(program, [x], vectorize=False)
    assert "dma1 queue" in str(sequential.value)
    assert "dma2 queue" in str(sequential.value)
    assert assert_runs_agree(program, [x])
    assert nest_checks  # found by the check of the nest as a whole, not by its first lanes


def lagging_wait(first_conflict: int, trips: int = 12) -> Program:
    """ScalarE writes slot min(i, first_conflict - 1) of u and queue 1 stores it; ScalarE learns of the stores only
    through queue 2, whose instruction comes after it in the lane and waits on the latest store: one lane behind.
    So the store of lane i and the write of lane i + 1 are unordered, and they meet first when the slots stop
    moving, in lane `first_conflict`."""
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (16, 8), "f32"), b.output("y", (16, 8 * trips), "f32")
    z = b.output("z", (16, 8), "f32")
    t, u, w = b.sbuf("t", (16, 8), "f32"), b.sbuf("u", (16, 8 * trips), "f32"), b.sbuf("w", (16, 8), "f32")
    b.dma(b.ap(t), b.ap(x), queue=0, id=1)
    b.inst("memset", "gpsimd", {"dst": b.ap(w)}, {"value": 0.0}, id=2)
    with b.loop(0, trips) as i:
        slot = b.scalar(b.reg(), "min", i, first_conflict - 1)
        b.scalar(slot, "mul", slot, 8)
        column = b.scalar(b.reg(), "mul", i, 8)
        b.inst("activation", "scalar", {"dst": b.ap(u, [(1, 8)], reg=slot), "src": b.ap(t)}, {"func": "exp"},
               waits=[1, 4], id=3)  # fmt: skip
        b.dma(b.ap(z), b.ap(w), queue=2, waits=[2, 5], id=4)
        b.dma(b.ap(y, [(8 * trips, 16), (1, 8)], reg=column), b.ap(u, [(1, 8)], reg=slot), queue=1, waits=[3], id=5)
    return b.build()


@pytest.mark.parametrize("first_conflict", [4, 7])
def test_a_race_behind_a_lagging_wait_is_found_by_the_nest_check(first_conflict, nest_checks, found_by_nest_check):
    found = found_by_nest_check
    program = lagging_wait(first_conflict)
    x = np.ones((16, 8), np.float32)
    with pytest.raises(RaceError) as sequential:
        run_program(program, [x], vectorize=False)
    assert "instruction 3 (activation, scalar queue) writes" in str(sequential.value)
    assert "instruction 5 (dma_copy, dma1 queue) read" in str(sequential.value)
    assert assert_runs_agree(program, [x])
    assert nest_checks
    assert found  # the nest check found it, not a lane issued one by one
    found.clear()
    assert not assert_runs_agree(lagging_wait(first_conflict, trips=first_conflict), [x])  # stops just before
    assert not found


def test_stores_of_one_block_ordered_through_waits_do_not_race(nest_checks):
    program = striped_stores(3, ordered=True)
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    assert not assert_runs_agree(program, [x])
    assert nest_checks


def around_a_nest(before: bool, after: bool) -> Program:
    """A nest storing blocks of y, with an unordered write of y before it or after it (or neither)."""
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (16, 64), "f32"), b.output("y", (16, 64), "f32")
    t, u = b.sbuf("t", (16, 64), "f32"), b.sbuf("u", (16, 8), "f32")
    fill = b.inst("memset", "gpsimd", {"dst": b.ap(t)}, {"value": 2.0})
    first = b.dma(b.ap(y), b.ap(t), queue=5, waits=[fill])
    load = b.dma(b.ap(u), b.ap(x, [(64, 16), (1, 8)]), queue=3)
    with b.loop(0, 8) as i:
        column = b.scalar(b.reg(), "mul", i, 8)
        b.dma(
            b.ap(y, [(64, 16), (1, 8)], reg=column), b.ap(u), queue=1, waits=[load] if before else [load, first], id=77
        )
    b.dma(b.ap(y, [(64, 16), (1, 8)], offset=40), b.ap(t, [(1, 8)]), queue=6, waits=[fill] if after else [fill, 77])
    return b.build()


@pytest.mark.parametrize(("before", "after"), [(True, False), (False, True), (False, False)])
def test_races_between_a_nest_and_what_comes_before_or_after_it(before, after, nest_checks):
    program = around_a_nest(before, after)
    x = np.ones((16, 64), np.float32)
    assert assert_runs_agree(program, [x]) == (before or after)
    if not before:
        assert nest_checks


@pytest.fixture
def found_by_nest_check(monkeypatch) -> list[bool]:
    """Records each race the check of a nest as a whole finds (`RaceChecker._overlapping` raising)."""
    found: list[bool] = []
    original = races.RaceChecker._overlapping

    def overlapping(self, *args):
        try:
            original(self, *args)
        except races.RaceFound:
            found.append(True)
            raise

    monkeypatch.setattr(races.RaceChecker, "_overlapping", overlapping)
    return found


def access_before_a_nest(kind: str, ordered: bool, late: int = 6, trips: int = 8) -> Program:
    """Queue 5 writes (`kind` "write") or reads ("read") block `late` of y; then a nest on queue 1 stores block i
    of y in lane i, waiting on that access only if `ordered`. Unordered, the two meet in lane `late` alone."""
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (16, 8), "f32"), b.output("y", (16, 8 * trips), "f32")
    t, u = b.sbuf("t", (16, 8), "f32"), b.sbuf("u", (16, 8), "f32")
    load = b.dma(b.ap(t), b.ap(x), queue=3)
    block = b.ap(y, [(8 * trips, 16), (1, 8)], offset=8 * late)
    if kind == "write":
        before = b.dma(block, b.ap(t), queue=5, waits=[load])
    else:
        before = b.dma(b.ap(u), block, queue=5)
    with b.loop(0, trips) as i:
        column = b.scalar(b.reg(), "mul", i, 8)
        waits = [load, before] if ordered else [load]
        b.dma(b.ap(y, [(8 * trips, 16), (1, 8)], reg=column), b.ap(t), queue=1, waits=waits, id=77)
    return b.build()


@pytest.mark.parametrize("kind", ["write", "read"])
@pytest.mark.parametrize("ordered", [False, True])
def test_an_access_before_a_nest_meeting_a_late_lane_is_found_by_the_nest_check(
    kind, ordered, nest_checks, found_by_nest_check
):
    program = access_before_a_nest(kind, ordered)
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    assert assert_runs_agree(program, [x]) == (not ordered)
    assert nest_checks
    assert bool(found_by_nest_check) == (not ordered)  # the nest check found it, not a lane issued one by one


def two_nests(last: int, second_trips: int, trips: int = 8) -> Program:
    """A nest on queue 1 stores block i of y in lane i (of `trips`); a second nest on queue 2, ordered with the first
    by nothing, stores block `last` - i in lane i (of `second_trips`), so counting down it meets the first nest's
    blocks from `trips` - 1 to `last` - `second_trips` + 1."""
    b = ProgramBuilder("trn2")
    blocks = 2 * trips
    x, y = b.input("x", (16, 8), "f32"), b.output("y", (16, 8 * blocks), "f32")
    t = b.sbuf("t", (16, 8), "f32")
    load = b.dma(b.ap(t), b.ap(x), queue=3)
    for queue in (1, 2):
        with b.loop(0, second_trips if queue == 2 else trips) as i:
            column = b.scalar(b.reg(), "mul", i, 8)
            if queue == 2:
                b.scalar(column, "sub", 8 * last, column)
            b.dma(b.ap(y, [(8 * blocks, 16), (1, 8)], reg=column), b.ap(t), queue=queue, waits=[load])
    return b.build()


@pytest.mark.parametrize(("second_trips", "meets"), [(8, False), (14, True), (16, True)])
def test_a_nest_meeting_an_earlier_nest_in_a_late_lane_gets_the_plain_verdict(second_trips, meets, nest_checks):
    """Counting down from block 15, the second nest meets the first from its lane 8 on: with 14 lanes only the
    first nest's lanes 2 to 7, which its check as a whole recorded (not the lanes that settled one by one)."""
    program = two_nests(15, second_trips)
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    assert assert_runs_agree(program, [x]) == meets
    assert nest_checks


def pipelined(drop: tuple[int, int] | None, trips: int = 10) -> Program:
    """Load (two queues alternating buffers), compute on two engines, store: a software pipeline whose waits come
    from the builder, minus the wait `drop` (instruction position, wait position), if any."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (32, trips * 16), "f32"), b.output("y", (32, trips * 16), "f32")
    tiles = [b.sbuf(f"t{k}", (32, 16), "f32") for k in range(2)]
    out = b.sbuf("out", (32, 16), "f32")
    with b.loop(0, trips // 2) as i:
        for k in range(2):
            column = b.scalar(b.reg(), "mul", i, 32)
            b.scalar(column, "add", column, 16 * k)
            b.dma(b.ap(tiles[k]), b.ap(x, [(trips * 16, 32), (1, 16)], reg=column), queue=k)
            b.inst("activation", "scalar", {"dst": b.ap(tiles[k]), "src": b.ap(tiles[k])}, {"func": "exp"})
            b.inst("tensor_tensor", "vector", {"dst": b.ap(out), "in0": b.ap(tiles[k]), "in1": b.ap(tiles[k])},
                   {"op": "add"})  # fmt: skip
            b.dma(b.ap(y, [(trips * 16, 32), (1, 16)], reg=column), b.ap(out), queue=2 + k)
    program = b.build()
    if drop is None:
        return program
    return _without_wait(program, *drop)


def _without_wait(program: Program, which: int, wait: int) -> Program:
    """The program with wait number `wait` of its instruction number `which` (program order) removed."""
    target = program.instructions()[which]
    kept = tuple(w for position, w in enumerate(target.waits) if position != wait)

    def edit(nodes: Sequence[Node]) -> tuple[Node, ...]:
        edited: list[Node] = []
        for node in nodes:
            if node is target:
                node = dataclasses.replace(node, waits=kept)
            elif isinstance(node, Loop):
                node = dataclasses.replace(node, body=edit(node.body))
            edited.append(node)
        return tuple(edited)

    return dataclasses.replace(program, body=list(edit(program.body)))


def test_every_single_missing_wait_of_a_pipeline_gets_the_plain_verdict(nest_checks):
    """Drop each wait of a correctly synchronised pipeline in turn: whatever the plain path says (a race and its
    message, or none and the same bits and profile), the fast path says too."""
    program = pipelined(None)
    x = np.random.default_rng(0).standard_normal((32, 160)).astype(np.float32)
    assert not assert_runs_agree(program, [x])
    verdicts = []
    for which, inst in enumerate(program.instructions()):
        for wait in range(len(inst.waits)):
            verdicts.append(assert_runs_agree(pipelined((which, wait)), [x]))
    assert True in verdicts
    assert False in verdicts
    assert nest_checks


def random_synchronised_loop(seed: int) -> Program:
    """Random tile work over several queues in a loop long enough to be checked as a whole; waits from the
    builder, then a few dropped at random (so some programs race and some do not)."""
    rng = np.random.default_rng(seed)
    trips = int(rng.integers(6, 12))
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (16, 16 * trips), "f32"), b.output("y", (16, 16 * trips), "f32")
    tiles = [b.sbuf(f"t{k}", (16, 16), "f32") for k in range(3)]
    engines = ["vector", "gpsimd"]
    with b.loop(0, trips) as i:
        for _ in range(int(rng.integers(3, 7))):
            kind = rng.choice(["load", "store", "compute", "compute"])
            tile = tiles[int(rng.integers(3))]
            block = b.scalar(b.reg(), "mul", i, 16)
            if rng.random() < 0.3:  # another iteration's block: lanes touch common bytes
                b.scalar(block, "add", block, 16 * int(rng.integers(1, 3)))
                b.scalar(block, "rem", block, 16 * trips)
            if kind == "load":
                b.dma(b.ap(tile), b.ap(x, [(16 * trips, 16), (1, 16)], reg=block), queue=int(rng.integers(4)))
            elif kind == "store":
                b.dma(b.ap(y, [(16 * trips, 16), (1, 16)], reg=block), b.ap(tile), queue=4 + int(rng.integers(4)))
            else:
                other = tiles[int(rng.integers(3))]
                b.inst("tensor_tensor", engines[int(rng.integers(2))],
                       {"dst": b.ap(tile), "in0": b.ap(tile), "in1": b.ap(other)}, {"op": "add"})  # fmt: skip
    program = b.build()
    waits = [(n, w) for n, inst in enumerate(program.instructions()) for w in range(len(inst.waits))]
    for _ in range(int(rng.integers(0, 3))):
        if waits:
            which, wait = waits.pop(int(rng.integers(len(waits))))
            program = _without_wait(program, which, min(wait, len(program.instructions()[which].waits) - 1))
    return program


def test_random_loops_with_dropped_waits_get_the_plain_verdict(nest_checks):
    verdicts = []
    for seed in range(40):
        program = random_synchronised_loop(seed)
        x = np.random.default_rng(seed).standard_normal(program.buffers[program.inputs[0].buffer].shape)
        verdicts.append(assert_runs_agree(program, [x.astype(np.float32)]))
    assert True in verdicts
    assert False in verdicts
    assert nest_checks


def lagging_two_lanes(first_conflict: int, trips: int = 12) -> Program:
    """`lagging_wait` with ScalarE two lanes behind the stores (through queues 2 and 3), and slots that alternate from
    lane `first_conflict` on: the write of lane i + 2 meets the store of lane i (i >= `first_conflict`), unordered,
    while the store of lane i + 1 reads the other slot. The race is at a lane distance of 2 alone."""
    b = ProgramBuilder("trn2")
    c = first_conflict
    x, y = b.input("x", (16, 8), "f32"), b.output("y", (16, 8 * trips), "f32")
    z = b.output("z", (16, 8), "f32")
    t, u, w = b.sbuf("t", (16, 8), "f32"), b.sbuf("u", (16, 8 * (c + 2)), "f32"), b.sbuf("w", (16, 8), "f32")
    v = b.sbuf("v", (16, 8), "f32")
    b.dma(b.ap(t), b.ap(x), queue=0, id=1)
    b.inst("memset", "gpsimd", {"dst": b.ap(w)}, {"value": 0.0}, id=2)
    with b.loop(0, trips) as i:
        slot = b.scalar(b.reg(), "max", i, c)  # min(i, c) + (max(i, c) - c) % 2
        b.scalar(slot, "sub", slot, c)
        b.scalar(slot, "rem", slot, 2)
        low = b.scalar(b.reg(), "min", i, c)
        b.scalar(slot, "add", slot, low)
        b.scalar(slot, "mul", slot, 8)
        column = b.scalar(b.reg(), "mul", i, 8)
        b.inst("activation", "scalar", {"dst": b.ap(u, [(1, 8)], reg=slot), "src": b.ap(t)}, {"func": "exp"},
               waits=[1, 4], id=3)  # fmt: skip
        b.dma(b.ap(z), b.ap(w), queue=2, waits=[2, 6], id=4)
        b.dma(b.ap(v), b.ap(t), queue=3, waits=[1, 5], id=6)
        b.dma(b.ap(y, [(8 * trips, 16), (1, 8)], reg=column), b.ap(u, [(1, 8)], reg=slot), queue=1, waits=[3], id=5)
    return b.build()


@pytest.mark.parametrize("pair_elements", [1, 1 << 18])
def test_a_race_two_lanes_apart_is_found_whatever_the_lanes_compared_at_once(
    pair_elements, nest_checks, found_by_nest_check, monkeypatch
):
    """The check within a nest compares a pair of operands' lanes a group of distances at a time (its memory stays
    bounded in long nests); with groups of one distance, a race at the second distance is found all the same."""
    monkeypatch.setattr(races, "_PAIR_ELEMENTS", pair_elements)
    x = np.ones((16, 8), np.float32)
    with pytest.raises(RaceError) as sequential:
        run_program(lagging_two_lanes(5), [x], vectorize=False)
    assert "instruction 3 (activation, scalar queue) writes" in str(sequential.value)
    assert "instruction 5 (dma_copy, dma1 queue) read" in str(sequential.value)
    assert assert_runs_agree(lagging_two_lanes(5), [x])
    assert nest_checks
    assert found_by_nest_check
    found_by_nest_check.clear()
    assert not assert_runs_agree(lagging_two_lanes(5, trips=7), [x])  # stops just before
    assert not found_by_nest_check


# ---- single instances checked in batches ----------------------------------------------------------------------


@pytest.fixture
def batches(monkeypatch, request) -> list[int]:
    """Batches of `request.param` instances at most (`RaceChecker.FLUSH_EVERY`); counts the instances of each."""
    monkeypatch.setattr(races.RaceChecker, "FLUSH_EVERY", request.param)
    counted: list[int] = []
    original = races.RaceChecker.flush

    def flush(self):
        counted.append(len(self._pending))
        return original(self)

    monkeypatch.setattr(races.RaceChecker, "flush", flush)
    return counted


def random_straight_line(seed: int, drop_waits: bool = True) -> Program:
    """Random tile work on several queues with no loop, over tiles that overlap one another in part (so accesses
    meet at byte ranges that are neither equal nor disjoint), some of it in a short loop between; waits from the
    builder, then (with `drop_waits`) a few dropped at random."""
    rng = np.random.default_rng(seed)
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (16, 64), "f32"), b.output("y", (16, 64), "f32")
    space = b.sbuf("space", (16, 48), "f32")
    tiles = [b.ap(space, [(1, 16)], offset=8 * k) for k in range(5)]  # each shares half its bytes with the next

    def work() -> None:
        kind = rng.choice(["load", "store", "compute", "compute"])
        tile = tiles[int(rng.integers(len(tiles)))]
        block = [(64, 16), (1, 16)]
        column = 16 * int(rng.integers(4))
        if kind == "load":
            b.dma(tile, b.ap(x, block, offset=column), queue=int(rng.integers(4)))
        elif kind == "store":
            b.dma(b.ap(y, block, offset=column), tile, queue=4 + int(rng.integers(4)))
        else:
            other = tiles[int(rng.integers(len(tiles)))]
            engine = ["vector", "gpsimd", "scalar"][int(rng.integers(3))]
            if engine == "scalar":
                b.inst("activation", engine, {"dst": tile, "src": other}, {"func": "copy"})
            else:
                b.inst("tensor_tensor", engine, {"dst": tile, "in0": tile, "in1": other}, {"op": "add"})

    for _ in range(int(rng.integers(12, 30))):
        work()
        if rng.random() < 0.05:
            with b.loop(0, int(rng.integers(2, 5))):
                work()
    for column in range(4):  # every output byte written
        b.dma(b.ap(y, [(64, 16), (1, 16)], offset=16 * column), tiles[column], queue=4 + column)
    program = b.build()
    waits = [(n, w) for n, inst in enumerate(program.instructions()) for w in range(len(inst.waits))]
    for _ in range(int(rng.integers(0, 2 + len(waits) // 4)) if drop_waits else 0):
        if waits:
            which, wait = waits.pop(int(rng.integers(len(waits))))
            program = _without_wait(program, which, min(wait, len(program.instructions()[which].waits) - 1))
    return program


@pytest.mark.parametrize("batches", [1, 3, 16, 512], indirect=True)
def test_batches_of_single_instances_get_the_plain_verdict(batches):
    """A race between two instances of one batch, between a batch and the records of earlier ones, or none: the
    batched check says what the plain path says, whatever the batch size."""
    verdicts = []
    for seed in range(30):
        program = random_straight_line(seed)
        x = np.random.default_rng(seed).standard_normal((16, 64)).astype(np.float32)
        verdicts.append(assert_runs_agree(program, [x]))
    assert True in verdicts
    assert False in verdicts
    assert batches
    assert max(batches) <= races.RaceChecker.FLUSH_EVERY


def interleaved_stores(overlap: bool) -> Program:
    """Two DMA queues write every other element of one tile, unordered: their byte hulls meet, their bytes do not
    (unless `overlap`: then the second starts on the first's elements)."""
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (16, 8), "f32"), b.output("y", (16, 16), "f32")
    t = b.sbuf("t", (16, 16), "f32")
    b.dma(b.ap(t, [(2, 8)]), b.ap(x), queue=0, id=1)
    b.dma(b.ap(t, [(2, 8)], offset=0 if overlap else 1), b.ap(x), queue=1, id=2)
    b.dma(b.ap(y), b.ap(t), queue=2, waits=[1, 2])
    return b.build()


@pytest.mark.parametrize("batches", [512], indirect=True)
@pytest.mark.parametrize("overlap", [False, True])
def test_a_batch_pair_whose_hulls_meet_is_decided_element_by_element(overlap, batches):
    """The pairs a batch finds by byte hulls are candidates only: the element-wise test decides."""
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    assert assert_runs_agree(interleaved_stores(overlap), [x]) == overlap
    assert batches


def test_every_instance_of_a_first_run_is_checked_in_a_batch(monkeypatch):
    """The counts the checker keeps: on a first run whose nests are too small to be checked as a whole, every
    instance that issued was checked in a batch."""
    issued: list[int] = []
    original = races.RaceChecker.issue

    def issue(self, plan_index, *args):
        issued.append(plan_index)
        return original(self, plan_index, *args)

    monkeypatch.setattr(races.RaceChecker, "issue", issue)
    monkeypatch.setattr(races.RaceChecker, "FLUSH_EVERY", 8)
    program = random_straight_line(2, drop_waits=False)
    simulator = Simulator(validate_program(program))
    simulator.run([np.zeros((16, 64), np.float32)], timing=True, check_races=True)
    checker = simulator.races
    assert checker is not None
    assert checker.batched_instances == len(issued) >= len(program.instructions())
    assert checker.batches == -(-len(issued) // 8)


# ---- the timeline of a nest ----------------------------------------------------------------------------------


def test_a_nest_is_timed_as_instance_by_instance_with_contended_dma():
    """Many overlapping transfers on several queues (shared bandwidth, transfers crossing each other's ends),
    dependency penalties and register-addressed footprints: the same profile, event by event."""
    for trips, queues in itertools.product((5, 17), (1, 3, 16)):
        first, second, store = 0, 1 % queues, queues - 1
        b = ProgramBuilder("trn2", auto_waits=True)
        x, y = b.input("x", (128, 64 * trips), "f32"), b.output("y", (128, 64 * trips), "f32")
        t = b.sbuf("t", (128, 64 * trips), "f32")
        with b.loop(0, trips) as i:
            column = b.scalar(b.reg(), "mul", i, 64)
            half = b.scalar(b.reg(), "add", column, 32)
            b.dma(b.ap(t, [(1, 32)], reg=column), b.ap(x, [(64 * trips, 128), (1, 32)], reg=column), queue=first)
            b.dma(b.ap(t, [(1, 32)], reg=half), b.ap(x, [(64 * trips, 128), (1, 32)], reg=half), queue=second)
            tile = b.ap(t, [(1, 64)], reg=column)
            b.inst("activation", "scalar", {"dst": tile, "src": tile}, {"func": "exp"})
            b.inst("tensor_scalar", "scalar", {"dst": tile, "src": tile}, {"op0": "multiply", "scalar0": 2.0})
            b.dma(b.ap(y, [(64 * trips, 128), (1, 64)], reg=column), tile, queue=store)
        program = b.build()
        x_in = np.random.default_rng(trips).standard_normal((128, 64 * trips)).astype(np.float32)
        assert not assert_runs_agree(program, [x_in])


def test_a_nest_of_row_tiled_matmuls_is_timed_as_instance_by_instance():
    """TensorE's row tiles in a nest: per iteration a matmul in each half of the PE array, one in a quarter and
    one over the full array, their products summed by ScalarE and VectorE: the same profile, event by event, on both paths,
    and the sum NumPy gives (the quarter's product is overwritten by the full one's: w^T x twice)."""
    trips = 9
    rng = np.random.default_rng(3)
    w = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (128, 256 * trips), "bf16"), b.output("y", (64, 256 * trips), "f32")
    weights = b.constant("weights", w)
    stationary, moving = b.sbuf("w", (128, 64), "bf16"), b.sbuf("x", (128, 256 * trips), "bf16")
    b.dma(b.ap(stationary), b.ap(weights), queue=1)
    b.dma(b.ap(moving), b.ap(x), queue=0)
    low, high, full = b.psum("low", (64, 256)), b.psum("high", (64, 256)), b.psum("full", (64, 256))
    out = b.sbuf("out", (64, 256 * trips), "f32")
    with b.loop(0, trips) as i:
        column = b.scalar(b.reg(), "mul", i, 256)
        for dst, start, size in ((low, 0, 64), (high, 64, 64), (full, 96, 32), (full, 0, 128)):
            attrs = {"row_tile_start": start, "row_tile_size": size} if size < 128 else {}
            b.inst(
                "nc_matmul",
                "tensor",
                {
                    "dst": b.ap(dst),
                    "stationary": b.ap(stationary, partitions=size, partition_start=start),
                    "moving": b.ap(moving, [(1, 256)], reg=column, partitions=size, partition_start=start),
                },
                attrs,
            )
        tile = b.ap(out, [(1, 256)], reg=column)
        b.inst("activation", "scalar", {"dst": tile, "src": b.ap(low)}, {"func": "copy"})
        for product in (full, high):
            b.inst("tensor_tensor", "vector", {"dst": tile, "in0": tile, "in1": b.ap(product)}, {"op": "add"})
    b.dma(b.ap(y), b.ap(out), queue=2)
    program = b.build()
    x_in = rng.standard_normal((128, 256 * trips)).astype(ml_dtypes.bfloat16)
    assert not assert_runs_agree(program, [x_in])
    (result,), profile = run_program(program, [x_in])
    expected = 2 * w.astype(np.float32).T @ x_in.astype(np.float32)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)
    starts: dict[int, list[float]] = {}
    for start, index in zip(profile.events.start, profile.events.instruction, strict=True):
        starts.setdefault(profile.instructions[index].id, []).append(start)
    matmuls = [s.id for s in profile.instructions if s.opcode == "nc_matmul"]
    assert starts[matmuls[0]][0] == starts[matmuls[1]][0]  # the two halves stream together
