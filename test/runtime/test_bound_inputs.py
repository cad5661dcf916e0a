"""Inputs bound in place (runtime.bound_inputs): steady runs read inputs from the caller's arrays, with the bits
and the profile of the plain path (every instance executed as it issues, inputs copied into HBM); inputs that
cannot be bound are copied, and still give those bits."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from neuron_mlir.runtime import bound_inputs, dtypes, tape
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.program import Program, TensorBinding
from neuron_mlir.runtime.simulator import Simulator, run_program, run_validated
from neuron_mlir.runtime.validate import ValidatedProgram, validate_program


def _inputs(program: Program, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for binding in program.inputs:
        dtype = dtypes.numpy_dtype(program.buffers[binding.buffer].dtype)
        if np.issubdtype(dtype, np.integer):
            arrays.append(rng.integers(-50, 50, binding.shape).astype(dtype))
        else:
            arrays.append(rng.standard_normal(binding.shape).astype(dtype))
    return arrays


def _straight_line() -> Program:
    """Instances reading inputs of three dtypes: whole, strided, converted to fp32 on the way."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, n, h = b.input("x", (64, 32), "f32"), b.input("n", (64, 32), "i32"), b.input("h", (64, 32), "bf16")
    y, k = b.output("y", (64, 32), "f32"), b.output("k", (64, 32), "f32")
    t, u, v = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32"), b.sbuf("v", (64, 32), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.dma(b.ap(u, [(1, 16)], partitions=64), b.ap(x, [(32, 64), (2, 16)]), queue=1)  # every other column
    b.dma(b.ap(u, [(1, 16)], offset=16), b.ap(n, [(32, 64), (1, 16)]), queue=2)  # int32 -> fp32
    b.dma(b.ap(v), b.ap(h), queue=3)  # bf16 -> fp32
    b.inst("tensor_tensor", "vector", {"dst": b.ap(t), "in0": b.ap(t), "in1": b.ap(u)}, {"op": "add"})
    b.inst("tensor_tensor", "vector", {"dst": b.ap(v), "in0": b.ap(v), "in1": b.ap(t)}, {"op": "multiply"})
    b.dma(b.ap(y), b.ap(t), queue=4)
    b.dma(b.ap(k), b.ap(v), queue=5)
    return b.build()


def _run_and_compare(validated: ValidatedProgram, inputs: list[np.ndarray], run: int) -> list[np.ndarray]:
    program = validated.program
    copies = [np.array(array, copy=True) for array in inputs]
    expected, reference = run_program(program, copies, vectorize=False)
    outputs, profile = run_validated(validated, inputs, check_races=False)
    for want, got in zip(expected, outputs, strict=True):
        assert got.dtype == want.dtype
        assert got.shape == want.shape
        assert got.tobytes() == want.tobytes(), f"run {run}"
    assert profile == reference, f"run {run}"
    for before, after in zip(copies, inputs, strict=True):  # the caller's arrays keep their values
        assert before.tobytes() == np.ascontiguousarray(after).tobytes()
    return outputs


def _simulator(validated: ValidatedProgram) -> Simulator:
    (simulator,) = validated.cache["simulators"]
    return simulator


def _bound(validated: ValidatedProgram) -> dict[int, int]:
    """The inputs the program's simulator binds (input position -> buffer)."""
    binding = _simulator(validated)._binding
    assert binding is not None
    return binding.inputs


def _loop_reading_inputs() -> Program:
    """A batched nest and single instances reading two inputs, one of them 1 MiB (its pages are given back)."""
    b = ProgramBuilder("trn2", auto_waits=True)
    big, x = b.input("big", (128, 2048), "f32"), b.input("x", (128, 64), "bf16")
    y, z = b.output("y", (128, 2048), "f32"), b.output("z", (128, 64), "f32")
    t, u = b.sbuf("t", (128, 256), "f32"), b.sbuf("u", (128, 64), "f32")
    column = b.reg()
    with b.loop(0, 8) as i:
        b.scalar(column, "mul", i, 256)
        b.dma(b.ap(t), b.ap(big, [(2048, 128), (1, 256)], reg=column))
        b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "square"})
        b.dma(b.ap(y, [(2048, 128), (1, 256)], reg=column), b.ap(t), queue=1)
    b.dma(b.ap(u), b.ap(x), queue=2)
    b.inst("tensor_scalar", "vector", {"dst": b.ap(u), "src": b.ap(u)}, {"op0": "multiply", "scalar0": 3.0})
    b.dma(b.ap(z), b.ap(u), queue=3)
    return b.build()


@pytest.mark.parametrize("make", [_straight_line, _loop_reading_inputs])
def test_bound_inputs_give_the_plain_paths_bits(make):
    program = make()
    validated = validate_program(program)
    for run in range(4):
        _run_and_compare(validated, _inputs(program, run % 2), run)
    assert sorted(_bound(validated)) == list(range(len(program.inputs)))


def test_a_bound_input_is_read_where_the_caller_holds_it_and_its_pages_are_given_back():
    program = _loop_reading_inputs()
    validated = validate_program(program)
    _run_and_compare(validated, _inputs(program, 0), 0)
    simulator = _simulator(validated)
    home = simulator.machine.homes[program.inputs[0].buffer]
    assert not home.array.any()  # released after the first run: the pages read as zeros
    inputs = _inputs(program, 1)
    _run_and_compare(validated, inputs, 1)
    assert not home.array.any()  # not copied in: the run read the caller's array
    # the run keeps nothing of the caller's arrays
    held = weakref.ref(inputs[0])
    del inputs
    gc.collect()
    assert held() is None
    # a run that walks the program again (the plain path on the same simulator) copies the inputs first
    inputs = _inputs(program, 0)
    expected, _ = run_program(program, inputs, vectorize=False)
    outputs, _ = run_validated(validated, inputs, check_races=False, vectorize=False)
    assert [o.tobytes() for o in outputs] == [e.tobytes() for e in expected]
    _run_and_compare(validated, _inputs(program, 1), 2)


def test_inputs_that_are_not_contiguous_are_copied_for_that_run():
    program = _loop_reading_inputs()
    validated = validate_program(program)
    for run in range(4):
        inputs = _inputs(program, run % 2)
        if run % 2:
            inputs[0] = np.asfortranarray(inputs[0])  # the same values, column-major
            inputs[1] = np.repeat(inputs[1], 2, axis=1)[:, ::2]  # every other column of a wider array
            assert not inputs[0].flags.c_contiguous
            assert not inputs[1].flags.c_contiguous
        _run_and_compare(validated, inputs, run)


def test_an_input_the_program_writes_is_copied_and_the_callers_array_keeps_its_values():
    b = ProgramBuilder("trn2", auto_waits=True)
    x, w = b.input("x", (64, 32), "f32"), b.input("w", (64, 32), "f32")
    y = b.output("y", (64, 32), "f32")
    t, u = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.dma(b.ap(u), b.ap(w), queue=1)
    b.inst("tensor_tensor", "vector", {"dst": b.ap(t), "in0": b.ap(t), "in1": b.ap(u)}, {"op": "add"})
    b.dma(b.ap(x), b.ap(t), queue=2)  # x written in place, then read back
    b.dma(b.ap(u), b.ap(x), queue=3)
    b.inst("tensor_tensor", "vector", {"dst": b.ap(u), "in0": b.ap(u), "in1": b.ap(t)}, {"op": "multiply"})
    b.dma(b.ap(y), b.ap(u), queue=4)
    program = b.build()
    validated = validate_program(program)
    for run in range(4):
        _run_and_compare(validated, _inputs(program, run % 2), run)
    assert _bound(validated) == {1: program.inputs[1].buffer}


def test_an_access_spanning_two_inputs_falls_back_to_copies():
    """Two inputs bound to the halves of one buffer, and a third whose bytes another buffer shares with the
    first's: a DMA reading either whole buffer spans two bindings, so none of these inputs is bound."""
    b = ProgramBuilder("trn2", auto_waits=True)
    pair = b.hbm("pair", (64, 64), "f32")
    alone = b.input("alone", (64, 32), "f32")
    wide = b.hbm("wide", (64, 64), "f32", address=b.buffers[alone].address)  # alone and the bytes after it
    tail = b.input("tail", (64, 32), "f32")  # placed after alone: inside wide
    y, z = b.output("y", (64, 64), "f32"), b.output("z", (64, 64), "f32")
    t = b.sbuf("t", (64, 64), "f32")
    b.dma(b.ap(t), b.ap(pair))
    b.dma(b.ap(y), b.ap(t), queue=1)
    b.dma(b.ap(t), b.ap(wide), queue=2)
    b.dma(b.ap(z), b.ap(t), queue=3)
    program = b.build()
    assert b.buffers[tail].address == b.buffers[alone].address + 64 * 32 * 4
    halves = [TensorBinding(name, pair, (64, 32), (64, 1), offset) for name, offset in (("left", 0), ("right", 32))]
    program.inputs = [*halves, *program.inputs]
    validated = validate_program(program)
    for run in range(3):
        _run_and_compare(validated, _inputs(program, run % 2), run)
    assert bound_inputs.bindable_inputs(program) == {}
    assert _bound(validated) == {}


def test_steps_that_cannot_be_made_again_or_reach_past_an_input_refuse_it():
    memory = np.zeros(4096, np.uint8)
    first, second, third = memory[:1024], memory[1024:2048], memory[2048:3072]
    made = []

    def maker(views: dict[str, np.ndarray]) -> tape.Step:
        made.append(views)
        return lambda: None

    inside = first[256:512].view(np.float32)
    sources: list[bound_inputs.Source] = [
        (maker, {"src": inside, "dst": np.zeros(64, np.float32)}),
        (None, {"src": second[:64]}),  # a step that cannot be made again reads `second`
        (maker, {"src": memory[2000:2100]}),  # reaches from `second` into `third`
    ]
    binding = bound_inputs.InputBinding.build({0: first, 1: second, 2: third}, {0: 5, 1: 6, 2: 7}, sources)
    assert binding.inputs == {0: 5}
    caller = np.arange(256, dtype=np.float32)
    steps = binding.steps([lambda: None] * 3, {0: caller})
    assert len(made) == 1
    assert steps[1] is not steps[0]
    assert np.shares_memory(made[0]["src"], caller)
    assert made[0]["src"].tobytes() == caller.view(np.uint8)[256:512].tobytes()


def test_a_nest_split_across_threads_reads_bound_inputs(monkeypatch):
    from neuron_mlir.runtime import vectorize

    monkeypatch.setattr(vectorize, "MAX_WORKERS", 2)
    monkeypatch.setattr(vectorize, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(vectorize, "CHUNK_BYTES", 1)  # one lane per chunk: several chunks per thread
    program = _loop_reading_inputs()
    validated = validate_program(program)
    for run in range(3):
        _run_and_compare(validated, _inputs(program, run % 2), run)
    simulator = _simulator(validated)
    assert simulator.tape is not None
    assert any(getattr(step, "__func__", None) is vectorize.Batch.run for step in simulator.tape.steps)
    assert sorted(_bound(validated)) == [0, 1]


def test_outputs_that_read_a_bound_inputs_buffer_copy_the_callers_array():
    """A graph returning its input (an autograd forward saving a parameter for the backward) declares outputs of
    the input's buffer: bound, the input is not in HBM, and these outputs come from the caller's array."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x = b.input("x", (64, 48), "f32")
    y = b.output("y", (64, 48), "f32")
    t = b.sbuf("t", (64, 48), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "square"})
    b.dma(b.ap(y), b.ap(t), queue=1)
    program = b.build()
    program.outputs = [
        *program.outputs,
        TensorBinding("same", x, (64, 48), (48, 1)),
        TensorBinding("transposed", x, (48, 64), (1, 48)),
        TensorBinding("corner", x, (8, 4), (48, 1), offset=48 * 3 + 5),
    ]
    validated = validate_program(program)
    for run in range(4):
        inputs = _inputs(program, run % 2)
        outputs = _run_and_compare(validated, inputs, run)
        assert outputs[2].tobytes() == np.ascontiguousarray(inputs[0].T).tobytes()
        assert not np.shares_memory(outputs[1], inputs[0])  # a copy, the caller's own
    assert _bound(validated) == {0: x}


def test_buffers_next_to_an_input_leave_it_bindable():
    """A buffer ending where an input starts, or starting where it ends, shares no byte with it: the input stays
    bindable; one reaching a single element into it does not."""
    b = ProgramBuilder("trn2", auto_waits=True)
    before = b.hbm("before", (64, 32), "f32")
    x = b.input("x", (64, 32), "f32")
    after = b.hbm("after", (64, 32), "f32")
    start = b.buffers[x].address
    assert b.buffers[before].address + 64 * 32 * 4 == start
    assert b.buffers[after].address == start + 64 * 32 * 4
    y = b.output("y", (64, 32), "f32")
    t = b.sbuf("t", (64, 32), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.dma(b.ap(y), b.ap(t), queue=1)
    program = b.build()
    assert bound_inputs.bindable_inputs(program) == {0: x}
    into = b.hbm("into", (1, 2), "f32", address=start + 64 * 32 * 4 - 4)  # its first element is x's last
    program = b.build()
    assert b.buffers[into].address < start + 64 * 32 * 4
    assert bound_inputs.bindable_inputs(program) == {}
