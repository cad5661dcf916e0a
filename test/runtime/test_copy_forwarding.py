"""Copies a tape leaves out (runtime.copy_forwarding): a copy into SBUF or PSUM whose readers can read its source in
place, and a store to HBM whose source's producer can write the destination itself, are not replayed, and every run
still gives the plain path's bits (every instance executed as it issues); a copy whose readers cannot (its source
written before they read, a reader of part of the tile, a write of part of it, a product at other strides) stays,
and so does a store whose source is read again or whose destination is touched before it."""

from __future__ import annotations

import numpy as np

from neuron_mlir.runtime import copy_forwarding, tape
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.simulator import run_program, run_validated
from neuron_mlir.runtime.validate import validate_program


def _replayed_steps(program: Program, runs: int = 4) -> list[tape.Step]:
    """Run `program` `runs` times on changing inputs, each matching the plain path bit for bit; the tape's steps."""
    validated = validate_program(program)
    for run in range(runs):
        rng = np.random.default_rng(run)
        inputs = [rng.standard_normal(binding.shape).astype(np.float32) for binding in program.inputs]
        expected, reference = run_program(program, inputs, vectorize=False)
        outputs, profile = run_validated(validated, inputs, check_races=False)
        for want, got in zip(expected, outputs, strict=True):
            assert got.tobytes() == want.tobytes(), f"run {run}"
        assert profile == reference
    (simulator,) = validated.cache["simulators"]
    assert simulator.tape is not None
    return simulator.tape.steps


def _instances(program: Program) -> int:
    return len(program.instructions())


def test_loads_and_evacuations_read_in_place():
    b = ProgramBuilder("trn2", auto_waits=True)
    x, w = b.input("x", (64, 64), "f32"), b.input("w", (64, 48), "f32")
    y, z = b.output("y", (64, 32), "f32"), b.output("z", (32, 48), "f32")
    t, s = b.sbuf("t", (64, 32), "f32"), b.sbuf("s", (64, 32), "f32")
    ws, e = b.sbuf("ws", (64, 48), "f32"), b.sbuf("e", (32, 48), "f32")
    acc = b.psum("acc", (32, 48), "f32")
    # half of x's columns: read in place by the add (elementwise: rows at another stride give the same bits)
    b.dma(b.ap(t), b.ap(x, [(64, 64), (1, 32)]))
    # the other half, read by the matmul, whose product may sum in another order over other strides: kept
    b.dma(b.ap(s), b.ap(x, [(64, 64), (1, 32)], offset=32), queue=1)
    b.dma(b.ap(ws), b.ap(w), queue=2)  # read by the matmul at the same strides as w's rows: left out
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(s), "moving": b.ap(ws)})
    b.inst("tensor_tensor", "vector", {"dst": b.ap(t), "in0": b.ap(t), "in1": b.ap(t)}, {"op": "add"})
    b.inst("tensor_copy", "vector", {"dst": b.ap(e), "src": b.ap(acc)})  # read by the activation: left out
    b.inst("activation", "scalar", {"dst": b.ap(e), "src": b.ap(e)}, {"func": "exp"})
    b.dma(b.ap(y), b.ap(t), queue=3)  # stores: the add and the activation write y and z themselves
    b.dma(b.ap(z), b.ap(e), queue=4)
    program = b.build()
    steps = _replayed_steps(program)
    assert len(steps) == _instances(program) - 5


def test_a_reduction_keeps_a_load_at_other_strides():
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (64, 64), "f32"), b.output("y", (64, 1), "f32")
    t, col = b.sbuf("t", (64, 32), "f32"), b.sbuf("col", (64, 1), "f32")
    b.dma(b.ap(t), b.ap(x, [(64, 64), (2, 32)]))  # every other column: another innermost stride
    b.inst("tensor_reduce", "vector", {"dst": b.ap(col), "src": b.ap(t)}, {"op": "add"})
    b.dma(b.ap(y), b.ap(col), queue=1)  # the store: the reduction writes y, at col's strides
    program = b.build()
    steps = _replayed_steps(program)
    assert len(steps) == _instances(program) - 1


def test_a_copy_whose_source_changes_before_its_reader_stays():
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (64, 32), "f32"), b.output("y", (64, 32), "f32")
    s, t = b.sbuf("s", (64, 32), "f32"), b.sbuf("t", (64, 32), "f32")
    b.dma(b.ap(s), b.ap(x))  # read by the activation, which then writes s whole: left out
    b.inst("activation", "scalar", {"dst": b.ap(s), "src": b.ap(s)}, {"func": "exp"})
    b.inst("tensor_copy", "vector", {"dst": b.ap(t), "src": b.ap(s)})  # its source s changes before t is read
    b.inst("tensor_scalar", "vector", {"dst": b.ap(s), "src": b.ap(s)}, {"op0": "multiply", "scalar0": 3.0})
    b.inst("tensor_tensor", "vector", {"dst": b.ap(s), "in0": b.ap(t), "in1": b.ap(s)}, {"op": "subtract"})
    b.dma(b.ap(y), b.ap(s), queue=1)  # the store: the subtraction writes y
    program = b.build()
    steps = _replayed_steps(program)
    assert len(steps) == _instances(program) - 2


def test_a_copy_read_in_part_or_written_in_part_stays():
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y, z = b.input("x", (64, 32), "f32"), b.output("y", (64, 16), "f32"), b.output("z", (64, 32), "f32")
    t, u, h = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32"), b.sbuf("h", (64, 16), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.inst("tensor_scalar", "vector", {"dst": b.ap(h), "src": b.ap(t, [(1, 16)])}, {"op0": "add", "scalar0": 1.0})
    b.dma(b.ap(u), b.ap(x), queue=1)
    b.inst("memset", "vector", {"dst": b.ap(u, [(1, 16)], offset=16)}, {"value": 0.5})
    b.inst("activation", "scalar", {"dst": b.ap(u), "src": b.ap(u)}, {"func": "tanh"})
    b.dma(b.ap(y), b.ap(h), queue=2)  # the stores: the tensor_scalar and the activation write y and z
    b.dma(b.ap(z), b.ap(u), queue=3)
    program = b.build()
    steps = _replayed_steps(program)
    assert len(steps) == _instances(program) - 2


def test_a_store_whose_source_is_read_again_or_whose_destination_is_touched_stays():
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y, z = b.input("x", (64, 32), "f32"), b.output("y", (64, 32), "f32"), b.output("z", (64, 32), "f32")
    t, u = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32")
    b.dma(b.ap(t), b.ap(x))  # read by the activation, which writes t whole: left out
    b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "exp"})
    b.dma(b.ap(y), b.ap(t), queue=1)  # t is read again after the store
    b.inst("tensor_scalar", "vector", {"dst": b.ap(u), "src": b.ap(t)}, {"op0": "multiply", "scalar0": 2.0})
    b.inst("tensor_scalar", "vector", {"dst": b.ap(t), "src": b.ap(u)}, {"op0": "add", "scalar0": 1.0})
    b.dma(b.ap(u), b.ap(y), queue=2)  # reads y, which the last store writes: that store stays
    b.dma(b.ap(z), b.ap(t), queue=3)  # the second tensor_scalar writes z itself
    b.dma(b.ap(y), b.ap(u), queue=4)
    program = b.build()
    steps = _replayed_steps(program)
    assert len(steps) == _instances(program) - 2


def test_loads_in_a_batched_loop_read_in_place():
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (128, 6 * 16), "f32"), b.output("y", (128, 6 * 16), "f32")
    t = b.sbuf("t", (128, 16), "f32")
    column = b.reg()
    with b.loop(0, 6) as i:
        b.scalar(column, "mul", i, 16)
        b.dma(b.ap(t), b.ap(x, [(96, 128), (1, 16)], reg=column))
        b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "square"})
        b.dma(b.ap(y, [(96, 128), (1, 16)], reg=column), b.ap(t), queue=1)
    _replayed_steps(b.build())


def _batched_tiles(read_after: bool) -> Program:
    """A loop of private SBUF tiles (one batch of lanes): tile i of x squared into u, then stored; with
    `read_after`, a store after the loop reads what the last lane left in u."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (128, 6 * 16), "f32"), b.output("y", (128, 6 * 16), "f32")
    last = b.output("last", (128, 16), "f32") if read_after else None
    t, u = b.sbuf("t", (128, 16), "f32"), b.sbuf("u", (128, 16), "f32")
    with b.loop(0, 6) as i:
        column = b.scalar(b.reg(), "mul", i, 16)
        b.dma(b.ap(t), b.ap(x, [(96, 128), (1, 16)], reg=column))
        b.inst("activation", "scalar", {"dst": b.ap(u), "src": b.ap(t)}, {"func": "square"})
        b.dma(b.ap(y, [(96, 128), (1, 16)], reg=column), b.ap(u), queue=1)
    if last is not None:
        b.dma(b.ap(last), b.ap(u), queue=2)
    return b.build()


def test_write_backs_of_private_tiles_nothing_reads_are_left_out():
    """A batched loop's write-back of its last lane's private tiles is replayed only when a later step reads them:
    after this loop nothing reads t or u, and the tape is the loop's three batched instructions alone (the two
    write-backs left out); a store after the loop reading u keeps u's write-back. Every run gives the plain
    path's bits either way."""
    program = _batched_tiles(False)
    assert len(_replayed_steps(program)) == _instances(program)
    program = _batched_tiles(True)
    assert len(_replayed_steps(program)) == _instances(program) + 1


def test_a_write_back_read_in_part_or_written_in_part_stays():
    """The rule's conditions, on the roles alone: a write-back stays when a later step reads a byte of its tile or
    writes part of it first, and is left out when a later step writes all of it first or none touches it."""
    tile = np.zeros((4, 8), np.float32)
    shadow = np.ones((4, 8), np.float32)
    step = tape._copy_into(tile, shadow)
    assert copy_forwarding._write_back(step, (None, {"dst": tile}))
    assert not copy_forwarding._write_back(step, (None, {"dst": tile[:, :4]}))
    assert not copy_forwarding._write_back(tape._copy_into(tile[:, :4], shadow[:, :4]), (None, {"src": tile}))
    whole: copy_forwarding.Footprint = (0, 0, 4, 0, 32)

    def unread(*later: tuple[str, copy_forwarding.Footprint, np.ndarray]) -> bool:
        roles: list[list[copy_forwarding._Role] | None] = [[("dst", "w", whole, tile)]]
        roles += [[("x", kind, where, view)] for kind, where, view in later]
        return copy_forwarding._unread(roles, copy_forwarding._Index(roles), 0, whole)

    assert unread()
    assert unread(("w", whole, tile))
    assert unread(("r", (1, 0, 4, 0, 32), tile))  # another array
    assert not unread(("r", (0, 1, 2, 8, 12), tile[1:2, 2:3]))
    assert not unread(("rw", whole, tile))
    assert not unread(("w", (0, 0, 4, 0, 16), tile[:, :4]), ("w", whole, tile))


def test_a_matmul_whose_operands_would_become_one_keeps_a_load():
    """Two tiles loaded from the same rows, a matmul's stationary and moving operands: read in place, both would be
    one array, which NumPy multiplies with its own transpose by another BLAS routine (another summation order).
    The first load is left out, the second stays."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (64, 32), "f32"), b.output("y", (32, 32), "f32")
    t, u, e = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32"), b.sbuf("e", (32, 32), "f32")
    acc = b.psum("acc", (32, 32), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.dma(b.ap(u), b.ap(x), queue=1)
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(t), "moving": b.ap(u)})
    b.inst("tensor_copy", "vector", {"dst": b.ap(e), "src": b.ap(acc)})
    b.dma(b.ap(y), b.ap(e), queue=2)
    program = b.build()
    steps = _replayed_steps(program)
    # left out: the first load, the evacuation (the store reads PSUM) and the store (the matmul writes y)
    assert len(steps) == _instances(program) - 3


def test_a_copy_whose_readers_lie_beyond_the_reach_stays(monkeypatch):
    """Only `REACH` steps touching a copy's memory are looked at after it: a reader further away keeps the copy."""

    def program() -> Program:
        b = ProgramBuilder("trn2", auto_waits=True)
        x, y = b.input("x", (64, 64), "f32"), b.output("y", (64, 32), "f32")
        t, s = b.sbuf("t", (64, 32), "f32"), b.sbuf("s", (64, 32), "f32")
        b.dma(b.ap(t), b.ap(x, [(64, 64), (1, 32)]))
        b.dma(b.ap(s), b.ap(x, [(64, 64), (1, 32)], offset=32), queue=1)  # touches x, the first copy's source
        b.inst("tensor_tensor", "vector", {"dst": b.ap(s), "in0": b.ap(t), "in1": b.ap(s)}, {"op": "add"})
        b.dma(b.ap(y), b.ap(s), queue=2)
        return b.build()

    # both loads left out, and the store (the add writes y)
    assert len(_replayed_steps(program())) == _instances(program()) - 3
    monkeypatch.setattr(copy_forwarding, "REACH", 1)
    # the first load's reader is the second step touching x or t after it: the first load stays
    assert len(_replayed_steps(program())) == _instances(program()) - 2


def test_the_index_gives_the_nearest_steps_of_the_keys_asked_for():
    """The steps after or before a position touching one of some memory arrays, nearest first, each once, at most
    the number asked for: the copies look at no more (a tape of thousands of steps per array)."""
    where = {2: (0,), 3: (1,), 5: (0, 1), 7: (0,), 8: (2,), 9: (1,)}
    roles = [
        [("r", "r", (key, 0, 1, 0, 4), np.zeros(1)) for key in where[position]] if position in where else None
        for position in range(10)
    ]
    index = copy_forwarding._Index(roles)
    assert index.nearest(2, (0, 1), 10, after=True) == [3, 5, 7, 9]
    assert index.nearest(2, (0, 1), 2, after=True) == [3, 5]
    assert index.nearest(9, (0, 1), 10, after=False) == [7, 5, 3, 2]
    assert index.nearest(9, (0, 1), 3, after=False) == [7, 5, 3]
    assert index.nearest(0, (2,), 10, after=True) == [8]
    index.add(5, roles[5])  # a step made again over the same arrays is listed once
    index.add(6, [("r", "r", (1, 0, 1, 0, 4), np.zeros(1))])
    assert index.nearest(2, (0, 1), 10, after=True) == [3, 5, 6, 7, 9]


def test_the_index_gives_the_nearby_steps_that_meet_the_footprints():
    """`near` keeps, of the nearest steps of the keys, exactly those with a rectangle meeting a footprint asked
    about, and the steps made again since (whatever their rectangles), with whether more steps lie beyond: the
    copies' checks, which such a step alone can change, visit only those. Compared with the rectangles' overlaps
    tested one by one on random footprints."""
    rng = np.random.default_rng(7)

    def rectangle(keys: tuple[int, ...] = (0, 1, 2)) -> tuple[int, int, int, int, int]:
        key, p0, low = int(rng.choice(keys)), int(rng.integers(0, 8)), int(rng.integers(0, 64))
        return key, p0, p0 + int(rng.integers(1, 5)), low, low + int(rng.integers(1, 24))

    for _ in range(200):
        roles = [
            None if rng.random() < 0.1 else [("r", "r", rectangle(), np.zeros(1)) for _ in range(rng.integers(1, 4))]
            for _ in range(60)
        ]
        index = copy_forwarding._Index(roles)
        changed = sorted({int(p) for p in rng.integers(0, 60, size=3)})
        for position in changed:
            roles[position] = [("r", "r", rectangle(), np.zeros(1))]
            index.add(position, roles[position])
        position, limit, after = int(rng.integers(0, 60)), int(rng.integers(1, 30)), bool(rng.random() < 0.5)
        keys = tuple({int(k) for k in rng.integers(0, 3, size=2)})
        footprints = (rectangle(keys), rectangle(keys))  # (a copy's tile and source: of the keys asked about)
        nearest = index.nearest(position, keys, limit + 1, after)
        expected = [
            p
            for p in nearest[:limit]
            if p in changed
            or any(copy_forwarding._overlap(where, f) for _, _, where, _ in roles[p] or () for f in footprints)
        ]
        found, beyond = index.near(position, keys, limit, footprints, after)
        assert found == expected
        assert beyond == (len(nearest) > limit)


def test_a_view_outside_the_machine_has_its_byte_hull_as_footprint():
    """Views of memory the machine does not hold (a batched nest's lane shadows) are one row of absolute bytes:
    their hull, whatever the order and repetition of their elements."""

    class _NoMemories:
        arrays: dict = {}
        ranges: dict = {}

    memory = copy_forwarding._Memory(_NoMemories())
    shadow = np.zeros((6, 40), np.float32)
    views = [
        shadow,
        shadow[1:5, 3:17:2],
        shadow[::-1, ::-3],
        shadow[2:3, 5:6],
        np.broadcast_to(shadow[1, 4:9], (7, 5)),
        shadow.T[4:20].reshape(2, 8, 6)[:, ::-1],
    ]
    primed = copy_forwarding._Memory(_NoMemories())
    primed.prime(views)
    for view in views:
        low, high = np.lib.array_utils.byte_bounds(view)
        assert memory.footprint(view) == ((-1, 0, 1, low, high), "")
        assert primed.footprint(view) == ((-1, 0, 1, low, high), "")


def test_footprints_in_bulk_are_those_one_by_one():
    """`_Memory.prime` gives every view the footprint `_Memory.footprint` gives it alone: on-chip views within a
    row and across rows, HBM views, views outside the machine, reversed, repeated (stride 0) and scalar ones."""
    from neuron_mlir.runtime.hardware import Memory

    sbuf = np.zeros(8 * 64, np.uint8)  # 8 partitions of 64 bytes
    psum = np.zeros(4 * 32, np.uint8)
    hbm = np.zeros(1000, np.uint8)

    class _Machine:
        arrays = {Memory.SBUF: [sbuf], Memory.PSUM: [psum], Memory.HBM: [hbm]}
        ranges = {Memory.SBUF: [(0, 64)], Memory.PSUM: [(128, 160)], Memory.HBM: [(0, 1000)]}

    def views_of(array: np.ndarray, rows: int) -> list[np.ndarray]:
        grid = array.view(np.float32).reshape(rows, -1)
        flat = array.view(np.uint16)
        return [
            grid,
            grid[1:5, 3:9:2],
            grid[::-1, ::-3],
            grid[2:3, 5:6],
            grid[2, 1, ...],
            np.broadcast_to(grid[1, 2:7], (7, 5)),
            grid.T[2:6],
            grid[:, None, 2:4],
            flat[3:-5:7],
            flat[::-1][:13],
            grid.reshape(-1)[5:21].reshape(2, 8),  # across a row boundary: whole rows of its hull
        ]

    rng = np.random.default_rng(0)
    outside = np.zeros((6, 40), np.float32)
    views = views_of(sbuf, 8) + views_of(psum, 4) + views_of(hbm, 10) + views_of(outside.view(np.uint8), 6)
    views += [views[int(i)][..., ::2] for i in rng.integers(0, len(views), 12) if views[int(i)].ndim]
    one, bulk = copy_forwarding._Memory(_Machine()), copy_forwarding._Memory(_Machine())
    bulk.prime([view for view in views if view.size])
    for view in views:
        if view.size:
            assert bulk.footprint(view) == one.footprint(view), (view.shape, view.strides)
