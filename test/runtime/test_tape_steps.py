"""The tape's prepared steps (runtime.tape) give the bits of the semantics function they stand for.

Per opcode the tape prepares and per operand dtype, on one instance and on lanes: the operands are views into
larger arrays (rows with gaps, as in the simulator's memories), the step and the semantics function run on
copies of the same memory, and every byte must agree, inputs included. Then the inputs change in place and both
run again: a step that had frozen data instead of reading memory when it runs would show.

Each case says whether the form is one the tape prepares; the test checks that too, so a preparer that stopped
preparing (and so tested nothing here) fails.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from neuron_mlir.runtime import dtypes, isa, tape
from neuron_mlir.runtime.hardware import TRN2, Engine
from neuron_mlir.runtime.races import SimulationError

F32, BF16, I32, I64 = "f32", "bf16", "i32", "i64"


def _cases():
    """(opcode, engine, operands: role -> (shape, dtype), attrs, prepared?)."""
    tile = {"src": ((16, 24), F32), "dst": ((16, 24), F32)}
    column = ((16, 1), F32)
    for src, dst, ready in [(F32, F32, True), (I32, F32, True), (F32, I32, True), (F32, BF16, False)]:
        yield "dma_copy", "dma", {"src": ((16, 24), src), "dst": ((16, 24), dst)}, {}, ready
        yield "tensor_copy", "vector", {"src": ((16, 24), src), "dst": ((16, 24), dst)}, {}, ready
    yield "dma_copy", "dma", {"src": ((16, 24), BF16), "dst": ((16, 24), BF16)}, {}, True
    yield "dma_copy", "dma", {"src": ((16, 24), "i1"), "dst": ((16, 24), I32)}, {}, True  # a mask's bools as 0, 1
    yield "dma_copy", "dma", {"src": ((16, 24), "i1"), "dst": ((16, 24), BF16)}, {}, False
    yield "tensor_copy", "gpsimd", {"src": ((16, 24), I64), "dst": ((16, 24), I32)}, {}, False
    # widened exactly to the 64-bit lanes: NumPy's cast
    yield "tensor_copy", "gpsimd", {"src": ((16, 24), I32), "dst": ((16, 24), I64)}, {}, True
    pair = {"in0": ((16, 24), F32), "in1": ((16, 24), F32), "dst": ((16, 24), F32)}
    for op in ("add", "subtract", "multiply", "max", "min"):
        yield "tensor_tensor", "vector", pair, {"op": op}, True
    # operators that are no fp32 ufunc, and integer domains: alu.binary of the rows, stored converting
    yield "tensor_tensor", "vector", pair, {"op": "power"}, True
    yield "tensor_tensor", "vector", {**pair, "dst": ((16, 24), "i1")}, {"op": "is_lt"}, True
    # an operand whose rows do not merge (4 x 6 with a gap after each 6): reshaped per run
    yield "tensor_tensor", "vector", {**pair, "in1": ((16, 4, 6), F32)}, {"op": "subtract"}, True
    yield "tensor_tensor", "vector", {**pair, "in0": ((16, 4, 6), F32), "in1": ((16, 4, 6), F32)}, {"op": "max"}, True
    yield "tensor_tensor", "vector", {**pair, "in1": ((16, 24), BF16)}, {"op": "add"}, False
    yield "tensor_tensor", "vector", {**pair, "dst": ((16, 24), BF16)}, {"op": "add"}, False
    yield "tensor_tensor", "gpsimd", {"in0": ((16, 24), I32), "in1": ((16, 24), I32), "dst": ((16, 24), I32)}, {
        "op": "add"}, True  # fmt: skip
    yield "tensor_tensor", "gpsimd", {"in0": ((16, 24), I64), "in1": ((16, 24), I64), "dst": ((16, 24), I64)}, {
        "op": "subtract"}, True  # fmt: skip
    # exact integer operators as NumPy's own in the operands' type (wrapping alike: see the overflow test below)
    for op in ("max", "multiply"):
        for dtype in (I32, I64):
            yield "tensor_tensor", "gpsimd", {"in0": ((16, 24), dtype), "in1": ((16, 24), dtype), "dst": ((16, 24), dtype)}, {
                "op": op}, True  # fmt: skip
    yield "tensor_tensor", "gpsimd", {"in0": ((16, 24), I32), "in1": ((16, 24), I64), "dst": ((16, 24), I64)}, {
        "op": "add"}, True  # fmt: skip
    # rows that do not merge (4 x 6 with gaps): not without a copy
    yield "tensor_tensor", "vector", {**pair, "in1": ((16, 4, 6), F32)}, {"op": "power"}, False
    yield "tensor_scalar", "vector", tile, {"op0": "multiply", "scalar0": 3.0}, True
    yield "tensor_scalar", "scalar", {**tile, "operand0": column}, {"op0": "subtract", "reverse0": True}, True
    yield "tensor_scalar", "vector", {**tile, "operand0": column}, {
        "op0": "is_ge", "op1": "add", "scalar1": -0.25, "reverse1": True}, True  # fmt: skip
    yield "tensor_scalar", "vector", tile, {"op0": "multiply", "scalar0": 2.0, "op1": "power", "scalar1": 2.0}, True
    yield "tensor_scalar", "vector", {"src": ((16, 24), I64), "dst": ((16, 24), "i1")}, {
        "op0": "not_equal", "scalar0": -100.0}, True  # fmt: skip
    yield "tensor_scalar", "vector", {**tile, "operand0": ((16, 1), BF16)}, {"op0": "is_ge", "reverse0": True}, True
    yield "tensor_scalar", "gpsimd", {"src": ((16, 24), I32), "dst": ((16, 24), I32), "operand0": ((16, 1), I32)}, {
        "op0": "subtract", "op1": "is_equal", "scalar1": 0.0}, True  # fmt: skip
    yield "tensor_scalar", "vector", {**tile, "src": ((16, 4, 6), F32)}, {"op0": "is_equal", "scalar0": 0.0}, False
    yield "tensor_scalar", "vector", {**tile, "dst": ((16, 24), BF16)}, {"op0": "add", "scalar0": 1.0}, False
    yield "tensor_scalar", "gpsimd", {"src": ((16, 24), I32), "dst": ((16, 24), I32)}, {
        "op0": "add", "scalar0": 3.0}, True  # fmt: skip
    triple = {**tile, "in1": ((16, 24), F32)}
    yield "scalar_tensor_tensor", "vector", {**triple, "operand0": column}, {"op0": "subtract", "op1": "multiply"}, True
    yield "scalar_tensor_tensor", "vector", triple, {
        "op0": "multiply", "scalar0": -0.5, "reverse0": True, "op1": "max", "reverse1": True}, True  # fmt: skip
    yield "scalar_tensor_tensor", "vector", triple, {"op0": "add", "scalar0": 1.0, "op1": "is_ge"}, False
    yield "scalar_tensor_tensor", "vector", {**triple, "in1": ((16, 24), BF16)}, {"op0": "add", "op1": "add"}, False
    # rows of 4 x 6 with a gap after each 6: not one row per partition without a copy
    yield "scalar_tensor_tensor", "vector", {**triple, "in1": ((16, 4, 6), F32)}, {"op0": "add", "op1": "add"}, False
    yield "scalar_tensor_tensor", "vector", {**triple, "dst": ((16, 24), BF16)}, {"op0": "add", "op1": "add"}, False
    yield "activation", "scalar", {**tile, "bias": column}, {"func": "exp"}, True
    yield "activation", "scalar", tile, {"func": "tanh", "scale": 0.5, "bias_value": 1.0}, True
    yield "activation", "scalar", {**tile, "scale_vector": column}, {"func": "square"}, True
    # functions of more than one ufunc: alu.activation of the pre-activation
    yield "activation", "scalar", tile, {"func": "gelu"}, True
    yield "activation", "scalar", {**tile, "bias": column}, {"func": "rsqrt", "scale": 0.25}, True
    # with the row sums of the results (a softmax's denominators, a norm's sums of squares)
    yield "activation", "scalar", {**tile, "accumulate_dst": column}, {"func": "exp"}, True
    yield "activation", "scalar", {**tile, "bias": column, "accumulate_dst": column}, {"func": "square"}, True
    yield "activation", "scalar", {**tile, "scale_vector": column, "accumulate_dst": column}, {
        "func": "copy", "bias_value": 0.5}, True  # fmt: skip
    yield "activation", "scalar", {**tile, "accumulate_dst": column}, {"func": "gelu"}, True
    # VectorE's tensor_scalar that sums what it writes: its semantics function as it is
    yield "tensor_scalar", "vector", {**tile, "operand0": column, "accumulate_dst": column}, {"op0": "subtract"}, False
    yield "activation", "scalar", {**tile, "dst": ((16, 24), BF16)}, {"func": "gelu"}, False
    yield "activation", "scalar", {**tile, "accumulate_dst": ((16, 1), BF16)}, {"func": "exp"}, False
    yield "activation", "scalar", {**tile, "dst": ((16, 24), BF16)}, {"func": "relu"}, False
    for op in ("add", "max", "min", "multiply", "abs_max"):
        yield "tensor_reduce", "vector", {"src": ((16, 24), F32), "dst": column}, {"op": op}, True
    yield "tensor_reduce", "vector", {"src": ((16, 4, 6), F32), "dst": ((16, 4), F32)}, {"op": "add"}, True
    yield "tensor_reduce", "vector", {"src": ((16, 4, 6), F32), "dst": column}, {"op": "max", "axes": 2}, False
    yield "tensor_reduce", "vector", {"src": ((16, 6, 4), F32), "dst": ((16, 6), F32)}, {
        "op": "add", "negate": True}, True  # fmt: skip
    yield "tensor_reduce", "vector", {"src": ((16, 24), BF16), "dst": column}, {"op": "add"}, False
    yield "tensor_reduce", "vector", {"src": ((16, 24), F32), "dst": ((16, 1), BF16)}, {"op": "max"}, False
    matmul = {"stationary": ((32, 24), F32), "moving": ((32, 40), F32), "dst": ((24, 40), F32)}
    yield "nc_matmul", "tensor", matmul, {}, True
    yield "nc_matmul", "tensor", matmul, {"accumulate": True}, True
    yield "nc_matmul", "tensor", {**matmul, "moving": ((32, 40), BF16), "stationary": ((32, 24), BF16)}, {}, False
    # a moving window whose free dimensions do not merge (rows of 4 x 10 with gaps): reshaped per run
    window = {**matmul, "moving": ((32, 4, 10), F32)}
    yield "nc_matmul", "tensor", window, {}, True
    yield "nc_matmul", "tensor", window, {"accumulate": True}, True
    square = {"stationary": ((24, 24), F32), "moving": ((24, 40), F32), "dst": ((40, 24), F32)}
    yield "nc_matmul", "tensor", {**square, "stationary": ((24, 24), "identity")}, {"is_transpose": True}, True
    yield "nc_matmul", "tensor", square, {"is_transpose": True}, True  # not an identity: the product, in the step
    # a destination whose free dimensions do not merge (each row of 4 x 6 has a gap after it): no view of the
    # transpose's shape, so the step copies through a contiguous transpose
    split = {**square, "stationary": ((24, 24), "identity"), "dst": ((40, 4, 6), F32)}
    yield "nc_matmul", "tensor", split, {"is_transpose": True}, True
    for dtype in (F32, BF16, I64):
        yield "memset", "vector", {"dst": ((16, 24), dtype)}, {"value": -2.5 if dtype != I64 else 7.0}, True
    for dtype in (I32, F32):
        yield "iota", "gpsimd", {"dst": ((16, 4, 6), dtype)}, {
            "pattern": ((6, 4), (-1, 6)), "channel_multiplier": 24, "base": 5}, True  # fmt: skip
    select = {"on_true": ((16, 24), F32), "dst": ((16, 24), F32)}
    attrs = {"cmp": "is_ge", "pattern": ((-1, 24),), "channel_multiplier": 1, "on_false_value": -1.0}
    yield "affine_select", "gpsimd", select, attrs, True
    yield "affine_select", "gpsimd", {**select, "on_true": ((16, 24), BF16)}, attrs, False


CASES = list(_cases())


def _memory(shape: tuple[int, ...], dtype: str, lanes: tuple[int, ...], rng) -> np.ndarray:
    """A view of `shape` (after `lanes`) into a larger array: each row has a gap after it, as in SBUF."""
    numpy_dtype = dtypes.numpy_dtype(dtype)
    padded = (*lanes, *shape[:-1], shape[-1] + 3)
    if np.issubdtype(numpy_dtype, np.integer):
        whole = rng.integers(-1000, 1000, padded).astype(numpy_dtype)
    else:
        whole = (rng.standard_normal(padded) * 3).astype(numpy_dtype)
        whole.reshape(-1)[rng.integers(whole.size)] = np.nan  # one: more would make every matmul result NaN
    return whole[..., : shape[-1]]


def _fill(arrays: dict[str, np.ndarray], keep: set[str], rng) -> None:
    """New values of the operands not in `keep`, written in place (the step must read them when it runs)."""
    for role, array in arrays.items():
        if role in keep:
            continue
        if np.issubdtype(array.dtype, np.integer):
            array[...] = rng.integers(-1000, 1000, array.shape)
        else:
            array[...] = (rng.standard_normal(array.shape) * 3).astype(array.dtype)


@pytest.mark.parametrize("lanes", [(), (3,)], ids=["instance", "lanes"])
@pytest.mark.parametrize(
    "case", [pytest.param(case, id=f"{case[0]}-{'-'.join(str(o[1]) for o in case[2].values())}-{n}")
             for n, case in enumerate(CASES)]
)  # fmt: skip
def test_prepared_step_gives_the_bits_of_the_semantics_function(case, lanes):
    opcode, engine_name, operands, attrs, expect_prepared = case
    engine = Engine(engine_name)
    spec = isa.OPCODES[opcode]
    rng = np.random.default_rng(len(str(case)))
    arrays = {}
    keep = set(spec.written_roles)  # outputs, and identities (which must stay identities)
    for role, (shape, dtype) in operands.items():
        if dtype == "identity":
            arrays[role] = _memory(shape, F32, lanes, rng)
            arrays[role][...] = np.eye(shape[0], dtype=np.float32)
            keep.add(role)
        else:
            arrays[role] = _memory(shape, dtype, lanes, rng)
    full_attrs = isa.with_defaults(opcode, attrs)
    nl = len(lanes)
    for round_ in range(2):
        # the step's memory and the reference's: copies of the same bytes, each a view into its own base
        stepped = {role: _copy_view(array) for role, array in arrays.items()}
        reference = {role: _copy_view(array) for role, array in arrays.items()}
        if nl:
            step = tape.lane_step(opcode, stepped, full_attrs, engine, TRN2, nl)
        else:
            step = tape.instance_step(spec.semantics, opcode, stepped, full_attrs, engine, TRN2)
        is_prepared = not (isinstance(step, functools.partial) and step.func is spec.semantics)
        assert is_prepared == expect_prepared
        for run in range(2):
            if run:  # new inputs in place, for both
                _fill(stepped, keep, np.random.default_rng(round_ * 7 + run))
                _fill(reference, keep, np.random.default_rng(round_ * 7 + run))
            with np.errstate(all="ignore"):
                step()
                spec.semantics(reference, full_attrs, engine, TRN2, nl)
            for role in arrays:
                assert stepped[role].tobytes() == reference[role].tobytes(), (role, run)
        arrays = stepped  # the next round starts from what this one wrote (accumulations grow)


def _copy_view(view: np.ndarray) -> np.ndarray:
    """A copy of the whole array under `view`, and the same view into the copy."""
    base = view.base if view.base is not None else view
    copy = base.copy()
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return np.ndarray(view.shape, view.dtype, copy, offset, view.strides)


def test_cases_cover_every_prepared_opcode():
    assert {case[0] for case in CASES if case[4]} == set(tape._PREPARERS)


def test_steps_of_one_shape_share_their_intermediate_and_each_gives_its_own_bits():
    """scalar_tensor_tensor's steps compute (src op0 s) into an fp32 intermediate of one per shape and thread
    rather than an array each: interleaved, two steps of one shape each still give the semantics' bits, and on
    another thread a step gets an intermediate of that thread's."""
    import threading

    rng = np.random.default_rng(5)
    attrs = isa.with_defaults("scalar_tensor_tensor", {"op0": "multiply", "scalar0": 0.5, "op1": "add"})
    cases = []
    for _ in range(2):
        operands = {role: _memory((16, 24), F32, (), rng) for role in ("src", "in1", "dst")}
        step = tape.instance_step(
            isa.OPCODES["scalar_tensor_tensor"].semantics, "scalar_tensor_tensor", operands, attrs, Engine.VECTOR, TRN2
        )
        assert not isinstance(step, functools.partial)  # prepared
        reference = {role: _copy_view(array) for role, array in operands.items()}
        cases.append((step, operands, reference))
    for step, _, _ in cases:
        step()
    for _, _, reference in cases:
        isa.OPCODES["scalar_tensor_tensor"].semantics(reference, attrs, Engine.VECTOR, TRN2)
    for _, operands, reference in cases:
        assert operands["dst"].tobytes() == reference["dst"].tobytes()
    here = tape._scratch((16, 24))
    there = []
    thread = threading.Thread(target=lambda: there.append(tape._scratch((16, 24))))
    thread.start()
    thread.join()
    assert here is tape._scratch((16, 24))
    assert there[0] is not here


def test_a_prepared_gather_gives_the_semantics_rows_and_stops_at_an_offset_outside_the_table():
    """An indirect dma_copy that gathers rows (an embedding's lookup) is prepared: the rows the offsets pick when
    it runs, and the semantics function's error for an offset outside the table."""
    rng = np.random.default_rng(3)
    arrays = {"src": _memory((37, 5), F32, (), rng), "dst": _memory((19, 5), F32, (), rng)}
    arrays["offsets"] = rng.integers(0, 37, (19, 1)).astype(np.int32)
    attrs = isa.with_defaults("dma_copy", {"indirect": "src"})
    spec = isa.OPCODES["dma_copy"]
    step = tape.instance_step(spec.semantics, "dma_copy", arrays, attrs, Engine.DMA, TRN2)
    assert not isinstance(step, functools.partial)  # prepared
    for run in range(2):
        if run:  # other rows, picked in place
            arrays["offsets"][...] = rng.integers(0, 37, (19, 1))
        reference = {role: _copy_view(array) for role, array in arrays.items()}
        step()
        spec.semantics(reference, attrs, Engine.DMA, TRN2)
        assert arrays["dst"].tobytes() == reference["dst"].tobytes()
    for bad in (-1, 37):
        arrays["offsets"][7, 0] = bad
        with pytest.raises(SimulationError, match=rf"indirect offset {bad} at partition 7 is outside \[0, 37\)"):
            step()


@pytest.mark.parametrize("accumulate", [False, True])
def test_a_prepared_scatter_gives_the_semantics_rows_and_stops_at_an_offset_outside_the_table(accumulate):
    """An indirect dma_copy that scatters fp32 rows (with accumulate: an embedding's gradient) is prepared: the
    table the semantics function leaves, with offsets that repeat (the last row sent to a place wins, or all add up
    in order) and offsets that do not, and its error for an offset outside the table."""
    rng = np.random.default_rng(5)
    arrays = {"src": _memory((19, 5), F32, (), rng), "dst": _memory((37, 5), F32, (), rng)}
    arrays["offsets"] = rng.permutation(37)[:19].reshape(19, 1).astype(np.int32)
    attrs = isa.with_defaults("dma_copy", {"indirect": "dst", "accumulate": accumulate})
    spec = isa.OPCODES["dma_copy"]
    step = tape.instance_step(spec.semantics, "dma_copy", arrays, attrs, Engine.DMA, TRN2)
    assert not isinstance(step, functools.partial)  # prepared
    for run in range(3):
        if run == 1:  # other places, written in place
            arrays["offsets"][...] = rng.permutation(37)[:19].reshape(19, 1)
        if run == 2:  # places that repeat
            arrays["offsets"][...] = rng.integers(0, 6, (19, 1))
        arrays["src"][...] = rng.standard_normal((19, 5)).astype(np.float32)
        reference = {role: _copy_view(array) for role, array in arrays.items()}
        step()
        spec.semantics(reference, attrs, Engine.DMA, TRN2)
        assert arrays["dst"].tobytes() == reference["dst"].tobytes(), f"run {run}"
    for bad in (-1, 37):
        arrays["offsets"][7, 0] = bad
        with pytest.raises(SimulationError, match=rf"indirect offset {bad} at partition 7 is outside \[0, 37\)"):
            step()


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "max", "min"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_exact_integer_steps_wrap_as_the_semantics_function(op, dtype):
    """GpSimdE's exact integer operators prepared as NumPy's ufuncs in the operands' type: at the type's edges
    (sums, differences and products that overflow) they wrap as the semantics function does."""
    info = np.iinfo(dtype)
    edges = np.array([info.min, info.min + 1, -3, -1, 0, 1, 2, info.max - 1, info.max], dtype)
    lhs, rhs = np.meshgrid(edges, edges)
    arrays = {"in0": lhs.copy(), "in1": rhs.copy(), "dst": np.zeros_like(lhs)}
    attrs = isa.with_defaults("tensor_tensor", {"op": op})
    spec = isa.OPCODES["tensor_tensor"]
    step = tape.instance_step(spec.semantics, "tensor_tensor", arrays, attrs, Engine.GPSIMD, TRN2)
    reference = {role: array.copy() for role, array in arrays.items()}
    with np.errstate(all="ignore"):
        step()
        spec.semantics(reference, attrs, Engine.GPSIMD, TRN2)
    assert arrays["dst"].tobytes() == reference["dst"].tobytes()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_exact_integer_steps_write_in_place_over_overlapping_halves(dtype):
    """A running sum's step (in1 the row shifted by a stride, the destination the shifted part, all one buffer)
    is the exact ufunc straight into the destination, not the semantics function's sum stored afterwards, and
    gives its bits although its output overlaps its inputs."""
    row = np.arange(2 * 16, dtype=dtype).reshape(2, 16) * 7 - 50
    row[0, 3] = np.iinfo(dtype).max  # a sum that wraps
    arrays = {"in0": row[:, 4:], "in1": row[:, :-4], "dst": row[:, 4:]}
    reference_row = row.copy()
    reference = {"in0": reference_row[:, 4:], "in1": reference_row[:, :-4], "dst": reference_row[:, 4:]}
    attrs = isa.with_defaults("tensor_tensor", {"op": "add"})
    spec = isa.OPCODES["tensor_tensor"]
    step = tape.instance_step(spec.semantics, "tensor_tensor", arrays, attrs, Engine.GPSIMD, TRN2)
    assert isinstance(step, functools.partial)
    assert step.func is np.add
    with np.errstate(all="ignore"):
        step()
        spec.semantics(reference, attrs, Engine.GPSIMD, TRN2)
    assert row.tobytes() == reference_row.tobytes()


_COMPARED: dict[str, np.ndarray] = {
    "f32": np.array([np.nan, -np.inf, -100.0, -0.0, 0.0, 1e-45, 1.0, 2.5, np.inf], np.float32),
    "i32": np.array([np.iinfo(np.int32).min, -101, -100, -1, 0, 1, 2, np.iinfo(np.int32).max], np.int32),
    "i64": np.array([np.iinfo(np.int64).min, -(2**40), -100, 0, 1, 2**31, np.iinfo(np.int64).max], np.int64),
    "bool": np.array([True, False, True], np.bool_),
}


@pytest.mark.parametrize("op", ["is_equal", "not_equal", "is_ge", "is_gt", "is_le", "is_lt"])
@pytest.mark.parametrize(
    ("engine", "src", "dst", "scalar"),
    [
        (Engine.VECTOR, "f32", np.float32, 0.0),
        (Engine.VECTOR, "f32", np.float32, -100.0),
        (Engine.VECTOR, "f32", np.bool_, -0.0),
        (Engine.GPSIMD, "i64", np.bool_, -100.0),
        (Engine.GPSIMD, "i64", np.int64, 2.0**31),
        (Engine.GPSIMD, "i32", np.int32, -100.0),
        (Engine.GPSIMD, "i32", np.bool_, 2.0**33),  # beyond int32: saturated as the 32-bit lanes read it
        (Engine.GPSIMD, "bool", np.bool_, 0.0),
        (Engine.GPSIMD, "bool", np.float32, 1.0),
    ],
)
@pytest.mark.parametrize("reverse", [False, True])
def test_a_comparison_with_an_immediate_is_one_ufunc_with_the_semantics_bits(op, engine, src, dst, scalar, reverse):
    """tensor_scalar's comparison of a tile with an immediate, in fp32 or in an integer domain, into a
    destination of another type: one NumPy comparison straight into the destination, the semantics' bits."""
    values = np.tile(_COMPARED[src], (4, 1))
    arrays = {"src": values, "dst": np.full(values.shape, 7, dst)}
    reference = {role: array.copy() for role, array in arrays.items()}
    attrs = isa.with_defaults("tensor_scalar", {"op0": op, "scalar0": scalar, "reverse0": reverse})
    spec = isa.OPCODES["tensor_scalar"]
    step = tape.instance_step(spec.semantics, "tensor_scalar", arrays, attrs, engine, TRN2)
    assert isinstance(step, functools.partial)
    assert step.func is tape._COMPARISONS[op]
    with np.errstate(all="ignore"):
        step()
        spec.semantics(reference, attrs, engine, TRN2)
    assert arrays["dst"].tobytes() == reference["dst"].tobytes()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int16, np.uint8, np.uint32])
@pytest.mark.parametrize(
    "edge", [None, "min", "max", np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31), 2.0**63, -(2.0**63), -1.0, 255.5]
)
def test_an_fp32_to_integer_copy_truncates_and_saturates_as_the_semantics_function(dtype, edge):
    """tensor_copy from fp32 to an integer type: values that truncate into the type's range take NumPy's cast,
    the others (NaN, infinities, values beyond the type's bounds) the truncation and saturation in float64; one
    edge among ordinary values sends the whole tile the second way, and both give the semantics' bits."""
    info = np.iinfo(dtype)
    ordinary = [-0.0, 0.0, 0.5, -0.5, 0.999, 1.5, 2.75, 100.25]
    edge = {"min": float(info.min), "max": float(info.max)}.get(edge, edge)
    values = np.array([*ordinary, *([] if edge is None else [edge])], np.float32).reshape(1, -1)
    arrays = {"src": np.repeat(values, 3, axis=0), "dst": np.zeros((3, values.shape[1]), dtype)}
    reference = {role: array.copy() for role, array in arrays.items()}
    spec = isa.OPCODES["tensor_copy"]
    attrs = isa.with_defaults("tensor_copy", {})
    step = tape.instance_step(spec.semantics, "tensor_copy", arrays, attrs, Engine.VECTOR, TRN2)
    assert not isinstance(step, functools.partial)
    with np.errstate(all="ignore"):
        step()
        spec.semantics(reference, attrs, Engine.VECTOR, TRN2)
    assert arrays["dst"].tobytes() == reference["dst"].tobytes()
