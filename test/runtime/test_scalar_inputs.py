"""Scalar arguments of a program (`runtime.program.ScalarInput`): registers that start at the call's values, so a
loop bounded by index arithmetic on them runs the trips the call needs and the run is charged for those alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.bundle import read_bundle, write_bundle
from neuron_mlir.runtime.program import Program, Reg, ScalarInput
from neuron_mlir.runtime.simulator import run_program, run_validated
from neuron_mlir.runtime.validate import BundleError, validate_program

ROWS, WIDTH, TILE = 512, 64, 128


def _row_tiles(upper: int = ROWS) -> Program:
    """y[:n] = exp(x[:n]) by row tiles of 128, for n in [1, upper]: ceil(n / 128) trips of load, exp, store."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (ROWS, WIDTH), "f32"), b.output("y", (ROWS, WIDTH), "f32")
    t = b.sbuf("t", (TILE, WIDTH), "f32")
    n = b.scalar_input("n", 1, upper)
    trips = b.scalar(b.reg(), "floordiv", b.scalar(b.reg(), "add", n, TILE - 1), TILE)
    with b.loop(0, trips) as tile:
        offset = b.scalar(b.reg(), "mul", tile, TILE * WIDTH)
        rows = [(WIDTH, TILE), (1, WIDTH)]
        b.dma(b.ap(t), b.ap(x, rows, reg=offset))
        b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "exp"})
        b.dma(b.ap(y, rows, reg=offset), b.ap(t), queue=1)
    return b.build()


def test_a_register_bounded_loop_runs_ceil_n_over_the_tile_trips_and_is_charged_for_them_alone():
    validated = validate_program(_row_tiles())
    x = np.random.default_rng(0).standard_normal((ROWS, WIDTH)).astype(np.float32)
    totals: dict[int, float] = {}
    # each size twice, interleaved: later runs replay the tape of their own scalar values
    for n in (1, 128, 129, 300, 512, 129, 1):
        (y,), profile = run_validated(validated, [x], scalars=[n])
        trips = -(-n // TILE)
        assert profile.opcode_counts == {"dma_copy": 2 * trips, "activation": trips}
        np.testing.assert_array_equal(y[: trips * TILE], np.exp(x[: trips * TILE]))
        totals.setdefault(n, profile.total_ns)
        assert profile.total_ns == totals[n]
    assert totals[1] == totals[128] < totals[129] < totals[300] < totals[512]
    # the reference (every instance issued one by one) agrees with the fast paths
    _, reference = run_program(validated, [x], vectorize=False, scalars=[300])
    assert reference.total_ns == totals[300]
    assert reference.opcode_counts["activation"] == 3


def test_scalar_arguments_are_checked_against_their_range_and_kept_by_bundles(tmp_path):
    program = _row_tiles()
    x = np.zeros((ROWS, WIDTH), np.float32)
    with pytest.raises(ValueError, match="n = 513 is outside"):
        run_program(program, [x], scalars=[513])
    with pytest.raises(ValueError, match="takes 1 scalar arguments, got 0"):
        run_program(program, [x])
    # every value of the range is checked: up to 640 rows would read past the 512-row input
    with pytest.raises(BundleError, match="outside"):
        validate_program(_row_tiles(upper=640))
    path = tmp_path / "tiles.bundle"
    write_bundle(program, path)
    read = read_bundle(path)
    assert read.scalars == program.scalars
    _, profile = run_program(read, [x], scalars=[200])
    assert profile.opcode_counts["activation"] == 2


def test_malformed_scalar_declarations_are_refused():
    program = _row_tiles()
    (n,) = program.scalars
    cases = [
        ([n, ScalarInput("n", Reg(n.register.index + 1), 1, 4)], "the name 'n' is taken"),
        ([n, ScalarInput("m", n.register, 1, 4)], "holds another input"),
        ([ScalarInput("n", n.register, 5, 1)], "is not an ordered pair"),
        ([ScalarInput("n", Reg(program.num_registers), 1, 4)], "outside the program's"),
    ]
    for scalars, problem in cases:
        with pytest.raises(BundleError, match=problem):
            validate_program(dataclasses.replace(program, scalars=scalars))
