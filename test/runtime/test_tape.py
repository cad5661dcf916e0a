"""The tape (runtime.tape): later runs of a program replay the recorded data work, prepared steps included,
and give the bits and the profile of the plain path (`vectorize=False`, every instance executed as it issues).

Inputs change between runs, so a step that had frozen data instead of reading memory would show.
"""

from __future__ import annotations

import functools
import weakref
from pathlib import Path

import numpy as np
import pytest
from support.programs import loops_batched_and_sequential

from neuron_mlir.runtime import blas, isa, tape
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.bundle import read_bundle
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.simulator import run_program, run_validated
from neuron_mlir.runtime.validate import validate_program

DATA = Path(__file__).with_name("data")


def _inputs(program: Program, seed: int) -> list[np.ndarray]:
    from neuron_mlir.runtime import dtypes

    rng = np.random.default_rng(seed)
    arrays = []
    for binding in program.inputs:
        dtype = dtypes.numpy_dtype(program.buffers[binding.buffer].dtype)
        if np.issubdtype(dtype, np.integer):
            arrays.append(rng.integers(-50, 50, binding.shape).astype(dtype))
        else:
            arrays.append(rng.standard_normal(binding.shape).astype(dtype))
    return arrays


def _assert_runs_match_the_plain_path(program: Program, runs: int = 5) -> list[tape.Step]:
    """Run `program` `runs` times on alternating inputs (validated once, as the frontend runs it); each run must
    match the plain path bit for bit, with an equal profile. Returns the tape's steps."""
    validated = validate_program(program)
    for run in range(runs):
        inputs = _inputs(program, seed=run % 2)
        expected, reference = run_program(program, inputs, vectorize=False)
        outputs, profile = run_validated(validated, inputs, check_races=False)
        for want, got in zip(expected, outputs, strict=True):
            assert got.dtype == want.dtype
            assert got.shape == want.shape
            assert got.tobytes() == want.tobytes(), f"run {run}"
        assert profile == reference, f"run {run}"
    (simulator,) = validated.cache["simulators"]
    assert simulator.tape is not None  # the later runs replayed it
    return simulator.tape.steps


def _prepared(steps: list[tape.Step]) -> list[tape.Step]:
    plain = {spec.semantics for spec in isa.OPCODES.values()}
    return [s for s in steps if not (isinstance(s, functools.partial) and s.func in plain)]


def _every_prepared_form() -> Program:
    """Straight-line code with every instruction form the tape prepares, and neighbours it must not."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x = b.input("x", (64, 32), "f32")
    w = b.input("w", (64, 48), "f32")
    n = b.input("n", (64, 32), "i32")
    y = b.output("y", (64, 32), "f32")
    z = b.output("z", (64, 48), "f32")
    q = b.output("q", (64, 32), "bf16")
    k = b.output("k", (64, 32), "i32")
    t, u, v = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32"), b.sbuf("v", (64, 32), "f32")
    col, tb = b.sbuf("col", (64, 1), "f32"), b.sbuf("tb", (64, 32), "bf16")
    ws, ni = b.sbuf("ws", (64, 48), "f32"), b.sbuf("ni", (64, 32), "i32")
    acc = b.psum("acc", (32, 48), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.dma(b.ap(ws), b.ap(w), queue=1)
    b.dma(b.ap(ni), b.ap(n), queue=2)
    b.dma(b.ap(u, [(1, 16)], partitions=64), b.ap(x, [(32, 64), (2, 16)]), queue=3)  # strided source
    b.inst("memset", "vector", {"dst": b.ap(u, [(1, 16)], offset=16)}, {"value": 0.5})
    b.inst("iota", "gpsimd", {"dst": b.ap(v)}, {"pattern": ((1, 32),), "channel_multiplier": 32})
    b.inst("tensor_reduce", "vector", {"dst": b.ap(col), "src": b.ap(t)}, {"op": "max"})
    b.inst("tensor_tensor", "vector", {"dst": b.ap(v), "in0": b.ap(v), "in1": b.ap(t)}, {"op": "subtract"})
    b.inst("tensor_tensor", "vector", {"dst": b.ap(v), "in0": b.ap(v), "in1": b.ap(u)}, {"op": "power"})
    b.inst("tensor_scalar", "vector", {"dst": b.ap(u), "src": b.ap(u)}, {"op0": "multiply", "scalar0": 3.0})
    b.inst(
        "tensor_scalar",
        "vector",
        {"dst": b.ap(u), "src": b.ap(t), "operand0": b.ap(col)},
        {"op0": "subtract", "reverse0": True},
    )
    b.inst(
        "tensor_scalar",
        "vector",
        {"dst": b.ap(t), "src": b.ap(t), "operand0": b.ap(col)},
        {"op0": "is_ge", "op1": "add", "scalar1": -0.25, "reverse1": True},
    )
    b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t), "bias": b.ap(col)}, {"func": "exp"})
    b.inst("activation", "scalar", {"dst": b.ap(u), "src": b.ap(u)}, {"func": "tanh", "scale": 0.5, "bias_value": 1.0})
    b.inst("activation", "scalar", {"dst": b.ap(col), "src": b.ap(col), "scale_vector": b.ap(col)}, {"func": "square"})
    b.inst("activation", "scalar", {"dst": b.ap(v), "src": b.ap(v)}, {"func": "gelu"})
    b.inst("tensor_copy", "vector", {"dst": b.ap(tb), "src": b.ap(t)})
    b.inst("tensor_copy", "vector", {"dst": b.ap(t), "src": b.ap(u)})
    b.inst("tensor_tensor", "gpsimd", {"dst": b.ap(ni), "in0": b.ap(ni), "in1": b.ap(ni)}, {"op": "add"})
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(t), "moving": b.ap(ws)})
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(v), "moving": b.ap(ws)}, {"accumulate": True})
    b.inst("tensor_copy", "vector", {"dst": b.ap(ws, partitions=32), "src": b.ap(acc)})
    # transposes: by an identity built in SBUF (the bit-exact copy), and by a matrix that is not one
    eye, square, flipped = b.sbuf("eye", (32, 32), "f32"), b.sbuf("square", (32, 32), "f32"), b.psum("tr", (32, 32))
    b.inst("memset", "gpsimd", {"dst": b.ap(square)}, {"value": 1.0})
    b.inst(
        "affine_select",
        "gpsimd",
        {"dst": b.ap(eye), "on_true": b.ap(square)},
        {"cmp": "is_equal", "pattern": ((-1, 32),), "channel_multiplier": 1, "on_false_value": 0.0},
    )
    b.inst("nc_matmul", "tensor", {"dst": b.ap(flipped), "stationary": b.ap(eye), "moving": b.ap(t, partitions=32)},
           {"is_transpose": True})  # fmt: skip
    b.inst("tensor_copy", "vector", {"dst": b.ap(t, [(1, 32)], partitions=32), "src": b.ap(flipped)})
    b.inst("tensor_scalar", "vector", {"dst": b.ap(square), "src": b.ap(eye)}, {"op0": "multiply", "scalar0": 2.0})
    b.inst("nc_matmul", "tensor", {"dst": b.ap(flipped), "stationary": b.ap(square), "moving": b.ap(u, partitions=32)},
           {"is_transpose": True})  # fmt: skip
    b.inst("tensor_copy", "vector", {"dst": b.ap(u, [(1, 32)], partitions=32), "src": b.ap(flipped)})
    # an identity whose zeros are -0.0: other bytes, the same numbers (still the bit-exact copy)
    b.inst("memset", "gpsimd", {"dst": b.ap(square)}, {"value": 1.0})
    b.inst(
        "affine_select",
        "gpsimd",
        {"dst": b.ap(eye), "on_true": b.ap(square)},
        {"cmp": "is_equal", "pattern": ((-1, 32),), "channel_multiplier": 1, "on_false_value": -0.0},
    )
    b.inst("nc_matmul", "tensor", {"dst": b.ap(flipped), "stationary": b.ap(eye), "moving": b.ap(v, partitions=32)},
           {"is_transpose": True})  # fmt: skip
    b.inst(
        "tensor_copy", "vector", {"dst": b.ap(t, [(1, 32)], partitions=32, partition_start=32), "src": b.ap(flipped)}
    )
    b.dma(b.ap(y), b.ap(t))
    b.dma(b.ap(z), b.ap(ws), queue=1)
    b.dma(b.ap(q), b.ap(tb), queue=2)
    b.dma(b.ap(k), b.ap(ni), queue=3)
    return b.build()


def test_every_prepared_form_matches_the_plain_path():
    steps = _assert_runs_match_the_plain_path(_every_prepared_form())
    # most of the straight-line instances run prepared; the rest (a conversion to bf16 among them) through
    # their semantics functions
    assert len(_prepared(steps)) >= 20
    assert len(steps) - len(_prepared(steps)) >= 1


def test_loops_batched_and_sequential_replay_the_same():
    steps = _assert_runs_match_the_plain_path(loops_batched_and_sequential())
    # the batched loop replays as its three instructions over all lanes (and the write-back of its private tile),
    # not as 6 x 3 instances; the sequential loop instance by instance
    assert len(steps) < 6 + 3 * 2


def test_the_walk_s_caches_go_with_the_run_that_made_the_tape_and_a_later_walk_makes_them_again():
    """Runs of the tape walk nothing, so the loops' traces and nest analyses are dropped once the tape exists; a
    later run that walks (race checking asked for the first time) traces the loops again and agrees with the
    plain path."""
    program = loops_batched_and_sequential()
    validated = validate_program(program)
    expected, reference = run_program(program, _inputs(program, 1), vectorize=False)
    run_validated(validated, _inputs(program, 0), check_races=False)
    (simulator,) = validated.cache["simulators"]
    assert simulator.tape is not None
    assert not simulator._traces
    assert not simulator.nests
    traced = []
    original = simulator._run_nest

    def run_nest(*args, **kwargs):
        traced.append(len(simulator._traces))
        return original(*args, **kwargs)

    simulator._run_nest = run_nest
    outputs, profile = run_validated(validated, _inputs(program, 1), check_races=True)  # walks again
    assert traced
    assert traced[0] == 0
    assert [o.tobytes() for o in outputs] == [e.tobytes() for e in expected]
    assert profile == reference
    assert not simulator._traces
    assert not simulator.nests


def test_large_products_replay_on_all_blas_threads_with_the_same_bits(monkeypatch):
    """TensorE's largest products (128 x 128 x 512) replay as `blas.Wide` steps when a core is spare, the small
    one stays as it is."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, w = b.input("x", (128, 128), "f32"), b.input("w", (128, 512), "f32")
    y, s = b.output("y", (128, 512), "f32"), b.output("s", (16, 32), "f32")
    xs, ws = b.sbuf("xs", (128, 128), "f32"), b.sbuf("ws", (128, 512), "f32")
    out, small = b.sbuf("o", (128, 512), "f32"), b.sbuf("sm", (16, 32), "f32")
    acc, acc_small = b.psum("acc", (128, 512), "f32"), b.psum("acc_small", (16, 32), "f32")
    b.dma(b.ap(xs), b.ap(x))
    b.dma(b.ap(ws), b.ap(w), queue=1)
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(xs), "moving": b.ap(ws)})
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(xs), "moving": b.ap(ws)}, {"accumulate": True})
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc_small), "stationary": b.ap(xs, [(1, 16)], partitions=64),
           "moving": b.ap(ws, [(1, 32)], partitions=64)})  # fmt: skip
    b.inst("tensor_copy", "vector", {"dst": b.ap(out), "src": b.ap(acc)})
    b.inst("tensor_copy", "vector", {"dst": b.ap(small), "src": b.ap(acc_small)})
    b.dma(b.ap(y), b.ap(out))
    b.dma(b.ap(s), b.ap(small), queue=1)
    program = b.build()
    for spare in (True, False):  # replays wide and narrow, each the plain path's bits
        monkeypatch.setattr(blas, "spare_core", lambda spare=spare: spare)
        _assert_runs_match_the_plain_path(program)
    validated = validate_program(program)
    run_validated(validated, _inputs(program, 0), check_races=False)
    (simulator,) = validated.cache["simulators"]
    assert simulator.tape is not None
    narrow = simulator.tape.steps
    assert not any(isinstance(step, blas.Wide) for step in narrow)
    steps = simulator.tape.wide_steps
    wide = [step for step in steps if isinstance(step, blas.Wide)]
    products = [step for step in steps if isinstance(step, tape.Product)]
    if blas.wide_threads() > 1:
        widened = [step.product for step in wide]
        assert [step.macs for step in widened if isinstance(step, tape.Product)] == [128 * 128 * 512] * 2
        assert [step.macs for step in products] == [16 * 32 * 64]
    else:
        assert wide == []
        assert len(products) == 3


@pytest.mark.parametrize("name", ["softmax_512x512", "matmul_384x128x1024", "rowsum_scale_1024x512"])
def test_compiled_programs_replay_the_same(name):
    program = read_bundle(DATA / f"{name}.neuronb")
    _assert_runs_match_the_plain_path(program, runs=4)


def test_a_validated_program_is_not_validated_again_per_run(monkeypatch):
    program = _every_prepared_form()
    validated = validate_program(program)
    calls = []
    import neuron_mlir.runtime.simulator as simulator

    monkeypatch.setattr(simulator, "validate_program", lambda *a, **k: calls.append(a))
    for seed in range(3):
        run_program(validated, _inputs(program, seed))
    assert calls == []


def test_a_shared_profile_is_the_stored_one_from_the_first_run_and_copies_are_not():
    program = _every_prepared_form()
    shared, copied = validate_program(program), validate_program(program)
    first = run_validated(shared, _inputs(program, 0), share_profile=True)[1]
    assert first is shared.cache["profile"]
    assert run_validated(shared, _inputs(program, 1), share_profile=True)[1] is first
    first = run_validated(copied, _inputs(program, 0))[1]
    later = run_validated(copied, _inputs(program, 1))[1]
    stored = copied.cache["profile"]
    assert len({id(first), id(later), id(stored)}) == 3
    assert first.total_ns == later.total_ns == stored.total_ns
    assert first.instructions is not stored.instructions
    assert first.events.start is not stored.events.start


def test_a_program_beyond_the_pooling_size_still_keeps_its_simulator(monkeypatch):
    """A program keeps one simulator whatever the size of its memories, so its later runs replay the tape rather
    than each being a first run; simulators beyond the first, left by runs at the same time, are dropped when big."""
    import neuron_mlir.runtime.simulator as simulator_module

    monkeypatch.setattr(simulator_module, "_POOLED_MACHINE_BYTES", 0)
    program = _every_prepared_form()
    validated = validate_program(program)
    run_validated(validated, _inputs(program, 0), check_races=False)
    (first,) = validated.cache["simulators"]
    assert first.tape is not None
    for seed in (1, 0):
        outputs, _ = run_validated(validated, _inputs(program, seed), check_races=False)
        assert validated.cache["simulators"] == [first]
    expected, _ = run_program(program, _inputs(program, 0), vectorize=False)
    assert [o.tobytes() for o in outputs] == [e.tobytes() for e in expected]
    # with another simulator in the pool already (as concurrent runs leave it), the big one is not kept
    spare = simulator_module.Simulator(validated)
    validated.cache["simulators"].insert(0, spare)
    run_validated(validated, _inputs(program, 1), check_races=False)  # on `first`
    assert validated.cache["simulators"] == [spare]


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_outputs_reuse_only_arrays_nothing_references_any_more():
    """A run writes its outputs into the last run's arrays when the caller dropped them (and every view of them);
    arrays still referenced, directly or through a view or a tensor, keep the values they were returned with."""
    import torch

    from neuron_mlir.frontend.tensors import from_numpy

    program = _every_prepared_form()
    validated = validate_program(program)

    def run(seed: int) -> list[np.ndarray]:
        outputs, _ = run_validated(validated, _inputs(program, seed), check_races=False)
        expected, _ = run_program(program, _inputs(program, seed), vectorize=False)
        assert [o.tobytes() for o in outputs] == [e.tobytes() for e in expected]
        return outputs

    run(0)  # the first run records the tape; its outputs are dropped at once
    outputs = run(1)
    addresses = [_address(o) for o in outputs]
    del outputs
    outputs = run(0)  # nothing held the last run's arrays: they are this run's
    assert [_address(o) for o in outputs] == addresses

    held = outputs[0]  # held directly
    view = outputs[1][1:]  # through a NumPy view
    tensor = from_numpy(outputs[2])  # through a tensor (bf16: a view of its bits)
    kept = [held.tobytes(), view.tobytes(), outputs[2].tobytes()]
    reusable = _address(outputs[3])
    del outputs
    outputs = run(1)
    assert [_address(o) for o in outputs[:3]] != addresses[:3]
    assert _address(outputs[3]) == reusable
    assert [held.tobytes(), view.tobytes(), tensor.view(torch.int16).numpy().tobytes()] == kept


def test_outputs_in_a_transposed_layout_are_not_kept_for_the_next_run():
    """A caller copies an output in a transposed layout into row-major order (torch does): the simulator keeps
    no reference to such an array, and the next run makes a new one; row-major outputs are taken again."""
    from neuron_mlir.runtime.program import TensorBinding

    b = ProgramBuilder("trn2", auto_waits=True)
    x = b.input("x", (64, 32), "f32")
    y = b.output("y", (64, 32), "f32")
    b.outputs.append(TensorBinding("y_t", y, (32, 64), (1, 32)))  # the same bytes, read as the transpose
    t = b.sbuf("t", (64, 32), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "square"})
    b.dma(b.ap(y), b.ap(t), queue=1)
    program = b.build()
    validated = validate_program(program)
    addresses = []
    for seed in (0, 1, 0):
        expected, _ = run_program(program, _inputs(program, seed), vectorize=False)
        outputs, _ = run_validated(validated, _inputs(program, seed), check_races=False)
        assert [o.tobytes() for o in outputs] == [e.tobytes() for e in expected]
        assert outputs[1].strides == (4, 128)  # the binding's layout
        addresses.append(_address(outputs[0]))
        transposed = weakref.ref(outputs[1])
        del outputs
        assert transposed() is None
    assert addresses[1] == addresses[2]  # the row-major output's array, taken again


def test_outputs_are_written_into_the_callers_arrays():
    """`into` gives an array per output (None: a new one): the output is that array, holding the plain path's
    bits, on the tape's runs and the first, and no later run hands it out as an array of its own."""
    program = _every_prepared_form()
    validated = validate_program(program)
    for seed in (0, 1, 0):
        expected, _ = run_program(program, _inputs(program, seed), vectorize=False)
        into = [np.full(e.shape, 7, e.dtype) if position % 2 == 0 else None for position, e in enumerate(expected)]
        outputs, _ = run_validated(validated, _inputs(program, seed), check_races=False, into=into)
        assert [o.tobytes() for o in outputs] == [e.tobytes() for e in expected]
        for destination, output in zip(into, outputs, strict=True):
            assert destination is None or output is destination
        given = [weakref.ref(d) for d in into if d is not None]
        del outputs, into, destination, output
        assert all(ref() is None for ref in given)  # the simulator keeps no caller's array for a later run
    reference, _ = run_program(program, _inputs(program, 1), vectorize=False)
    into = [np.empty(e.shape, e.dtype) for e in reference]
    outputs, _ = run_validated(validated, _inputs(program, 1), check_races=False, vectorize=False, into=into)
    assert all(o is d for o, d in zip(outputs, into, strict=True))  # the plain path writes them there too
    assert [o.tobytes() for o in outputs] == [e.tobytes() for e in reference]


@pytest.mark.parametrize("in_first_run", [True, False], ids=["analysed-in-the-first-run", "in-the-second"])
def test_memory_read_before_it_is_written_reads_fresh_on_every_run(in_first_run, monkeypatch):
    """Later runs fill again only the bytes a run reads before writing them (worked out in the first run, or in
    the second, which fills all memory first): those must still read as fresh memory (NaN) on every run,
    including bytes the same run writes afterwards."""
    from neuron_mlir.runtime import refill

    monkeypatch.setattr(refill, "SECONDS_PER_ACCESS", 0.0 if in_first_run else 1e6)
    b = ProgramBuilder("trn2", auto_waits=True)
    x = b.input("x", (64, 32), "f32")
    before, after, mixed = (
        b.output("before", (64, 32), "f32"),
        b.output("after", (64, 32), "f32"),
        b.output("mixed", (64, 32), "f32"),
    )
    t, u = b.sbuf("t", (64, 32), "f32"), b.sbuf("u", (64, 32), "f32")
    b.dma(b.ap(before), b.ap(t))  # t not written yet: fresh bytes
    b.inst("memset", "vector", {"dst": b.ap(t)}, {"value": 1.0})
    b.inst("tensor_tensor", "vector", {"dst": b.ap(t), "in0": b.ap(t), "in1": b.ap(t)}, {"op": "add"})
    b.dma(b.ap(after), b.ap(t), queue=1)
    b.dma(b.ap(u, [(1, 16)]), b.ap(x, [(32, 64), (1, 16)]), queue=2)  # half of u from x, the other half fresh
    b.dma(b.ap(mixed), b.ap(u), queue=3)
    program = b.build()
    validated = validate_program(program)
    for seed in range(4):
        before_run, after_run, mixed_run = run_validated(validated, _inputs(program, seed), check_races=False)[0]
        assert np.isnan(before_run).all(), f"run {seed}"
        assert (after_run == 2.0).all()
        assert np.isnan(mixed_run[:, 16:]).all()
        assert not np.isnan(mixed_run[:, :16]).any()
    _assert_runs_match_the_plain_path(program)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # the plain path's int64 saturation
@pytest.mark.parametrize("target", ["i64", "i32", "i16", "u8", "u32"])
def test_conversions_between_fp32_and_integers_replay_the_same(target):
    """The prepared integer <-> fp32 copies give the semantics functions' bits, special values included:
    NaN to 0, infinities and out-of-range values saturated, truncation toward zero, -0.0."""
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.7, -0.7, 2.5e9, -2.5e9, 1e20, -1e20, 65535.9, -1.5],
                       np.float32)  # fmt: skip
    b = ProgramBuilder("trn2", auto_waits=True)
    x = b.input("x", (32, 24), "f32")
    n = b.input("n", (32, 24), "i32")
    y, m = b.output("y", (32, 24), target), b.output("m", (32, 24), "f32")
    z = b.output("z", (32, 24), "f32")
    t, ti, tn = b.sbuf("t", (32, 24), "f32"), b.sbuf("ti", (32, 24), target), b.sbuf("tn", (32, 24), "i32")
    tf = b.sbuf("tf", (32, 24), "f32")
    b.dma(b.ap(t), b.ap(x))
    b.dma(b.ap(tn), b.ap(n), queue=1)
    b.inst("tensor_copy", "vector", {"dst": b.ap(ti), "src": b.ap(t)})  # fp32 -> integer
    b.inst("tensor_copy", "gpsimd", {"dst": b.ap(tf), "src": b.ap(ti)})  # integer -> fp32
    b.dma(b.ap(y), b.ap(ti), queue=2)
    b.dma(b.ap(m), b.ap(tf), queue=3)
    b.dma(b.ap(z), b.ap(tn), queue=4)  # integer -> fp32 by the DMA
    program = b.build()
    validated = validate_program(program)
    rng = np.random.default_rng(0)
    for run in range(4):
        values = (rng.standard_normal((32, 24)) * 10.0 ** rng.integers(0, 12, (32, 24))).astype(np.float32)
        values.reshape(-1)[: special.size] = special
        inputs = [values, rng.integers(-(2**31), 2**31, (32, 24)).astype(np.int32)]
        expected, _ = run_program(program, inputs, vectorize=False)
        outputs, _ = run_validated(validated, inputs, check_races=False)
        for want, got in zip(expected, outputs, strict=True):
            assert got.dtype == want.dtype
            assert got.tobytes() == want.tobytes(), f"run {run}"
    (simulator,) = validated.cache["simulators"]
    assert len(_prepared(simulator.tape.steps)) == len(simulator.tape.steps)
