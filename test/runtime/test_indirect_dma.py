"""Indirect DMA (dma_copy with per-row offsets): gathers, scatters, accumulation, bounds, validation and cost."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.hardware import TARGETS, Engine
from neuron_mlir.runtime.program import AttrValue
from neuron_mlir.runtime.races import SimulationError
from neuron_mlir.runtime.simulator import run_program
from neuron_mlir.runtime.validate import BundleError, validate_program


def _gather_program(rows: int, bound: int, width: int, per_partition: int = 1, dtype: str = "f32"):
    """table[bound, width] (HBM) gathered by offsets[rows, per_partition] into out[rows, per_partition * width]."""
    b = ProgramBuilder("trn2", auto_waits=True)
    table = b.input("table", (bound, width), "f32")
    offsets_in = b.input("offsets", (rows, per_partition), "i32")
    out = b.output("out", (rows, per_partition * width), dtype)
    offsets = b.sbuf("o", (rows, per_partition), "i32")
    gathered = b.sbuf("g", (rows, per_partition * width), dtype)
    b.dma(b.ap(offsets), b.ap(offsets_in))
    b.inst(
        "dma_copy",
        Engine.DMA,
        {"dst": b.ap(gathered), "src": b.ap(table, [(width, bound), (1, width)]), "offsets": b.ap(offsets)},
        {"indirect": "src"},
        queue=1,
    )
    b.dma(b.ap(out), b.ap(gathered), queue=2)
    return b


def test_gather_rows_matches_numpy_indexing():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((37, 5)).astype(np.float32)
    offsets = rng.integers(0, 37, size=(19, 1)).astype(np.int32)
    (out,), _ = run_program(_gather_program(19, 37, 5).build(), [table, offsets])
    np.testing.assert_array_equal(out, table[offsets[:, 0]])


def test_gather_several_rows_per_partition_and_converts_dtype():
    rng = np.random.default_rng(1)
    table = rng.standard_normal((11, 3)).astype(np.float32)
    offsets = rng.integers(0, 11, size=(4, 6)).astype(np.int32)
    (out,), _ = run_program(_gather_program(4, 11, 3, per_partition=6, dtype="bf16").build(), [table, offsets])
    expected = table[offsets].reshape(4, 18)
    np.testing.assert_allclose(out.astype(np.float32), expected, rtol=1e-2)


@pytest.mark.parametrize("bad", [-1, 37])
def test_out_of_bounds_offset_stops_the_run(bad):
    table = np.zeros((37, 5), np.float32)
    offsets = np.zeros((19, 1), np.int32)
    offsets[7, 0] = bad
    with pytest.raises(SimulationError, match=rf"indirect offset {bad} at partition 7 is outside \[0, 37\)"):
        run_program(_gather_program(19, 37, 5).build(), [table, offsets])


def _scatter_program(rows: int, bound: int, width: int, accumulate: bool):
    b = ProgramBuilder("trn2", auto_waits=True)
    values_in = b.input("values", (rows, width), "f32")
    offsets_in = b.input("offsets", (rows, 1), "i32")
    table = b.output("table", (bound, width), "f32")
    values = b.sbuf("v", (rows, width), "f32")
    offsets = b.sbuf("o", (rows, 1), "i32")
    zeros = b.sbuf("z", (bound, width), "f32")
    b.inst("memset", "vector", {"dst": b.ap(zeros)}, {"value": 1.0})
    b.dma(b.ap(table), b.ap(zeros))
    b.dma(b.ap(values), b.ap(values_in), queue=1)
    b.dma(b.ap(offsets), b.ap(offsets_in), queue=2)
    attrs: dict[str, AttrValue] = {"indirect": "dst"}
    if accumulate:
        attrs["accumulate"] = True
    b.inst(
        "dma_copy",
        Engine.DMA,
        {"dst": b.ap(table, [(width, bound), (1, width)]), "src": b.ap(values), "offsets": b.ap(offsets)},
        attrs,
        queue=3,
    )
    return b


def test_accumulating_scatter_sums_every_duplicate():
    rng = np.random.default_rng(2)
    values = rng.standard_normal((20, 4)).astype(np.float32)
    offsets = np.array([[3], [1], [3], [3], [0]] * 4, np.int32)
    (table,), _ = run_program(_scatter_program(20, 6, 4, accumulate=True).build(), [values, offsets])
    expected = np.ones((6, 4), np.float32)
    np.add.at(expected, offsets[:, 0], values)
    np.testing.assert_allclose(table, expected, rtol=1e-6)


def test_plain_scatter_keeps_the_last_duplicate():
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    offsets = np.array([[2], [0], [2]], np.int32)
    (table,), _ = run_program(_scatter_program(3, 4, 4, accumulate=False).build(), [values, offsets])
    expected = np.ones((4, 4), np.float32)
    expected[0], expected[2] = values[1], values[2]
    np.testing.assert_array_equal(table, expected)


def _with_attrs(b: ProgramBuilder, **changes):
    program = b.build()
    inst = next(i for i in program.instructions() if "offsets" in i.operands)
    inst.attrs.update(changes)
    return program


def test_validation_rules():
    with pytest.raises(BundleError, match="needs indirect = 'src' or 'dst'"):
        validate_program(_with_attrs(_gather_program(4, 9, 2), indirect=""))
    with pytest.raises(BundleError, match="accumulate needs indirect = 'dst'"):
        validate_program(_with_attrs(_gather_program(4, 9, 2), accumulate=True))
    with pytest.raises(BundleError, match="unknown indirect side 'sideways'"):
        validate_program(_with_attrs(_gather_program(4, 9, 2), indirect="sideways"))
    with pytest.raises(BundleError, match="indexed side 'dst' must be in HBM"):
        validate_program(_with_attrs(_gather_program(4, 9, 2), indirect="dst"))


def test_validation_of_shapes_and_dtypes():
    b = ProgramBuilder("trn2", auto_waits=True)
    table = b.input("table", (9, 2), "f32")
    offsets = b.sbuf("o", (4, 1), "f32")
    out = b.sbuf("g", (4, 3), "f32")
    b.inst("dma_copy", Engine.DMA, {"dst": b.ap(out), "src": b.ap(table, [(2, 9), (1, 2)]), "offsets": b.ap(offsets)},
           {"indirect": "src"})  # fmt: skip
    with pytest.raises(BundleError, match="operand 'offsets': must be i32, got f32"):
        validate_program(b.build())
    b = ProgramBuilder("trn2", auto_waits=True)
    table = b.input("table", (9, 2), "f32")
    offsets = b.sbuf("o", (4, 1), "i32")
    out = b.sbuf("g", (4, 3), "f32")
    b.inst("dma_copy", Engine.DMA, {"dst": b.ap(out), "src": b.ap(table, [(2, 9), (1, 2)]), "offsets": b.ap(offsets)},
           {"indirect": "src"})  # fmt: skip
    with pytest.raises(BundleError, match="holds 3 elements per partition, but 1 offsets per partition of 2-element"):
        validate_program(b.build())
    b = ProgramBuilder("trn2", auto_waits=True)
    src, dst = b.input("x", (4, 2), "f32"), b.output("y", (4, 2), "f32")
    b.inst("dma_copy", Engine.DMA, {"dst": b.ap(dst), "src": b.ap(src)}, {"accumulate": True})
    with pytest.raises(BundleError, match="accumulate needs an indirect"):
        validate_program(b.build())


def test_indirect_cost_counts_descriptors_and_rows_only():
    hw = TARGETS["trn2"]
    program = _gather_program(64, 1000, 32).build()
    inst = next(i for i in program.instructions() if "offsets" in i.operands)
    cost = cost_model.instruction_cost(inst, program.buffers, hw)
    assert isinstance(cost, cost_model.DmaCost)
    descriptors = (hw.gpsimd_startup_cycles + 64 * hw.swdge_cycles_per_descriptor) / hw.clock_ghz[Engine.GPSIMD]
    assert cost.fixed_ns == pytest.approx(hw.dma_fixed_latency_ns + descriptors)
    # only the 64 chosen rows of 128 bytes move, in 128-byte chunks, over 8 engines
    assert (cost.bytes, cost.hbm_bytes, cost.chunk_bytes, cost.engines) == (64 * 128, 64 * 128, 128, 8)
    assert cost.efficiency == pytest.approx(cost_model.dma_efficiency(128, hw))
    scatter = _scatter_program(64, 100, 32, accumulate=True).build()
    inst = next(i for i in scatter.instructions() if "offsets" in i.operands)
    scatter_cost = cost_model.instruction_cost(inst, scatter.buffers, hw)
    assert isinstance(scatter_cost, cost_model.DmaCost)
    assert scatter_cost.hbm_bytes == 2 * 64 * 128
