"""A first run's timing and race check made without its data work (`analyse_validated`) and handed to the run
(`expect_analysis`): the same profile as a first run's, and a race still stops the run that was to take it."""

from __future__ import annotations

import numpy as np
import pytest
from support.programs import loops_batched_and_sequential

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.simulator import (
    RaceError,
    analyse_validated,
    expect_analysis,
    run_validated,
)
from neuron_mlir.runtime.validate import validate_program


def _load_compute_store(wait_for_load: bool) -> Program:
    b = ProgramBuilder("trn2")
    x, y = b.input("x", (128, 64), "f32"), b.output("y", (128, 64), "f32")
    t, u = b.sbuf("t", (128, 64), "f32"), b.sbuf("u", (128, 64), "f32")
    load = b.dma(b.ap(t), b.ap(x), queue=2, location="model.py:10 (net.load)")
    compute = b.inst(
        "activation", "scalar", {"dst": b.ap(u), "src": b.ap(t)}, {"func": "exp"}, waits=[load] if wait_for_load else []
    )
    b.dma(b.ap(y), b.ap(u), queue=3, waits=[compute])
    return b.build()


def _inputs(program: Program) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(tuple(binding.shape)).astype(np.float32) for binding in program.inputs]


@pytest.mark.parametrize("build", [lambda: _load_compute_store(True), loops_batched_and_sequential])
def test_the_analysis_is_the_first_run_s_profile_and_the_run_that_takes_it_computes_the_same(build):
    program = build()
    inputs = _inputs(program)
    expected_outputs, expected_profile = run_validated(validate_program(program), inputs)

    found = analyse_validated(validate_program(program))
    assert found == expected_profile

    validated = validate_program(program)
    asked = []

    def analysis():
        asked.append(True)
        return found

    expect_analysis(validated, analysis)
    outputs, profile = run_validated(validated, inputs)
    assert asked == [True]
    assert profile == expected_profile
    for output, expected in zip(outputs, expected_outputs, strict=True):
        np.testing.assert_array_equal(output, expected)
    again, profile = run_validated(validated, inputs)  # later runs: the tape, the same profile
    assert asked == [True]
    assert profile == expected_profile
    np.testing.assert_array_equal(again[0], expected_outputs[0])


def test_a_racy_program_has_no_analysis_and_its_first_run_still_raises():
    racy = validate_program(_load_compute_store(False))
    assert analyse_validated(racy) is None
    expect_analysis(racy, lambda: None)  # what the other process gives for it
    with pytest.raises(RaceError, match=r"instruction 1 \(activation, scalar queue\)"):
        run_validated(racy, _inputs(racy.program))


def test_an_analysis_of_another_program_is_not_taken():
    program = loops_batched_and_sequential()
    other = analyse_validated(validate_program(_load_compute_store(True)))
    assert other is not None
    validated = validate_program(program)
    expect_analysis(validated, lambda: other)
    _, profile = run_validated(validated, _inputs(program))
    assert profile == run_validated(validate_program(program), _inputs(program))[1]
    assert profile != other
