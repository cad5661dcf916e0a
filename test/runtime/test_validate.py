"""The validator on in-memory programs: register interval analysis, PSUM groups, limits, and its domain's soundness."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from neuron_mlir.runtime import validate
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.hardware import Engine, Memory
from neuron_mlir.runtime.program import Access, BufferDecl, Instruction, Program, TensorBinding
from neuron_mlir.runtime.simulator import run_program
from neuron_mlir.runtime.validate import BundleError, validate_program

# ---- the strided-interval domain is sound ------------------------------------------------------------------


def members(span: tuple[int, int, int]) -> list[int]:
    lo, hi, stride = span
    return [lo] if stride == 0 else list(range(lo, hi + 1, stride))


def contains(span: tuple[int, int, int], value: int) -> bool:
    lo, hi, stride = span
    return lo <= value <= hi and (value == lo if stride == 0 else (value - lo) % stride == 0)


SPANS = [
    validate._span(lo, lo + stride * count, stride)
    for lo in range(-7, 8, 3)
    for stride in (0, 1, 2, 3, 5)
    for count in (0, 1, 3)
]
CONCRETE: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "rem": lambda a, b: a % b,
    "min": min,
    "max": max,
    "eq": lambda a, b: int(a == b),
    "ne": lambda a, b: int(a != b),
    "lt": lambda a, b: int(a < b),
    "le": lambda a, b: int(a <= b),
    "gt": lambda a, b: int(a > b),
    "ge": lambda a, b: int(a >= b),
}


@pytest.mark.parametrize("op", sorted(CONCRETE))
def test_scalar_transfer_functions_are_sound(op):
    for a, b in itertools.product(SPANS, SPANS):
        if op in ("floordiv", "rem") and any(v == 0 for v in members(b)):
            continue
        result = validate._scalar_span(op, a, b)
        for x, y in itertools.product(members(a), members(b)):
            assert contains(result, CONCRETE[op](x, y)), (op, a, b, x, y, result)


def test_join_is_sound():
    for a, b in itertools.product(SPANS, SPANS):
        joined = validate._join(a, b)
        assert all(contains(joined, v) for v in members(a) + members(b))


def test_family_overlap_never_misses_a_real_overlap():
    rng = random.Random(0)
    for _ in range(3000):
        families = []
        for _ in range(2):
            lo, stride, count, width = (
                rng.randrange(0, 64),
                rng.choice([0, 4, 8, 16, 32]),
                rng.randrange(1, 5),
                rng.choice([4, 8, 16, 24]),
            )
            families.append((lo, lo + stride * (count - 1) if stride else lo, stride, width))
        a, b = families
        real = any(x < y + b[3] and y < x + a[3] for x in members(a[:3]) for y in members(b[:3]))
        if real:
            assert validate._families_overlap(a, b)


# ---- register-addressed programs ---------------------------------------------------------------------------


def pointer_loop(trips: int, tile_columns: int):
    """A pointer register advanced by 16 elements per iteration (no induction arithmetic)."""
    b = ProgramBuilder("trn2")
    x = b.hbm("x", (128, tile_columns), "f32")
    t = b.sbuf("t", (128, 16), "f32")
    pointer = b.reg()
    with b.loop(0, trips):
        b.dma(b.ap(t), b.ap(x, [(tile_columns, 128), (1, 16)], reg=pointer))
        b.scalar(pointer, "add", pointer, 16)
    return b.build()


def test_pointer_increment_loops_are_bounded_exactly():
    validate_program(pointer_loop(trips=100, tile_columns=1600))
    with pytest.raises(BundleError, match=r"register r0 in 0..1584\) lie outside buffer 'x'"):
        validate_program(pointer_loop(trips=100, tile_columns=1599))


def test_zero_trip_loops_are_not_checked_for_addresses():
    b = ProgramBuilder("trn2")
    t = b.sbuf("t", (128, 16), "f32")
    with b.loop(4, 4) as i:
        offset = b.scalar(b.reg(), "mul", i, 100)
        b.inst("memset", "vector", {"dst": b.ap(t, [(1, 16)], reg=offset)}, {"value": 0.0})
    validate_program(b.build())


def test_negative_step_loops():
    b = ProgramBuilder("trn2")
    t = b.sbuf("t", (128, 64), "f32")
    with b.loop(63, -1, -1) as i:
        b.inst("memset", "vector", {"dst": b.ap(t, [(1, 1)], reg=i)}, {"value": 0.0})
    validate_program(b.build())
    b = ProgramBuilder("trn2")
    t = b.sbuf("t", (128, 64), "f32")
    with b.loop(64, -1, -1) as i:
        b.inst("memset", "vector", {"dst": b.ap(t, [(1, 1)], reg=i)}, {"value": 0.0})
    with pytest.raises(BundleError, match=r"register r0 in 0..64"):
        validate_program(b.build())


def test_loop_bounds_from_registers_and_nested_loops():
    b = ProgramBuilder("trn2")
    t = b.sbuf("t", (128, 8 * 8), "f32")
    limit = b.scalar(b.reg(), "add", 0, 8)
    with b.loop(0, limit) as i, b.loop(0, i) as j:
        offset = b.scalar(b.reg(), "mul", i, 8)
        b.scalar(offset, "add", offset, j)
        b.inst("memset", "vector", {"dst": b.ap(t, [(1, 1)], reg=offset)}, {"value": 1.0})
    validate_program(b.build())


def double_buffered_matmuls(second_bank_offset: int):
    """Two matmul groups per iteration into alternating banks, each evicted before the next iteration."""
    b = ProgramBuilder("trn2")
    s, m = b.sbuf("s", (128, 128), "bf16"), b.sbuf("m", (128, 256), "bf16")
    acc = b.psum("acc", (128, 4 * 512))
    out = b.sbuf("out", (128, 256), "f32")
    b.inst("memset", "vector", {"dst": b.ap(s)}, {"value": 1.0}, id=100)
    b.inst("memset", "vector", {"dst": b.ap(m)}, {"value": 1.0}, id=101)
    with b.loop(0, 6) as i:
        slot = b.scalar(b.reg(), "rem", i, 2)
        first = b.scalar(b.reg(), "mul", slot, 1024)  # banks 0 and 2
        second = b.scalar(b.reg(), "add", first, second_bank_offset)
        a = b.inst(
            "nc_matmul",
            "tensor",
            {"dst": b.ap(acc, [(1, 256)], reg=first), "stationary": b.ap(s), "moving": b.ap(m)},
            waits=[100, 101, 200, 201],
        )
        c = b.inst(
            "nc_matmul",
            "tensor",
            {"dst": b.ap(acc, [(1, 256)], reg=second), "stationary": b.ap(s), "moving": b.ap(m)},
        )
        b.inst(
            "tensor_copy",
            "vector",
            {"dst": b.ap(out), "src": b.ap(acc, [(1, 256)], reg=first)},
            waits=[a],
            id=200,
        )
        b.inst(
            "tensor_copy",
            "vector",
            {"dst": b.ap(out), "src": b.ap(acc, [(1, 256)], reg=second)},
            waits=[c],
            id=201,
        )
    return b.build()


def test_alternating_psum_banks_are_proved_disjoint():
    program = double_buffered_matmuls(second_bank_offset=512)  # banks 1 and 3
    validate_program(program)
    run_program(program, [])


def test_overlapping_accumulation_groups_are_rejected():
    with pytest.raises(BundleError, match="overlapping the accumulation region of instruction"):
        validate_program(double_buffered_matmuls(second_bank_offset=128))


def test_a_psum_region_can_be_reused_after_eviction():
    b = ProgramBuilder("trn2")
    s, m = b.sbuf("s", (128, 128), "bf16"), b.sbuf("m", (128, 512), "bf16")
    acc = b.psum("acc", (128, 512))
    out = b.sbuf("out", (128, 512), "f32")
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(s), "moving": b.ap(m)})
    b.inst("tensor_copy", "vector", {"dst": b.ap(out), "src": b.ap(acc)})
    b.inst(
        "nc_matmul",
        "tensor",
        {"dst": b.ap(acc, [(1, 256)], offset=128), "stationary": b.ap(s), "moving": b.ap(m, [(1, 256)])},
    )
    validate_program(b.build())


def test_memory_sizes_override():
    b = ProgramBuilder("trn2")
    t = b.sbuf("t", (128, 1024), "f32", address=300 * 1024)
    b.inst("memset", "vector", {"dst": b.ap(t)}, {"value": 0.0})
    with pytest.raises(BundleError, match="bytes per partition of SBUF"):
        validate_program(b.build())
    validate_program(b.build(), {"sbuf": 512 * 1024})
    run_program(b.build(), [], memory_sizes_override={Memory.SBUF: 512 * 1024})
    with pytest.raises(BundleError, match="unknown memory 'l2'"):
        validate_program(b.build(), {"l2": 1})


def bare_program(*instructions: Instruction, buffers: list[BufferDecl] | None = None) -> Program:
    return Program(
        target="trn2",
        buffers=buffers
        or [
            BufferDecl("t", Memory.SBUF, 0, (128, 64), "f32"),
            BufferDecl("u", Memory.SBUF, 256, (128, 64), "f32"),
        ],
        inputs=[],
        outputs=[],
        body=list(instructions),
    )


@pytest.mark.parametrize(
    ("buffers", "inputs", "outputs", "message"),
    [
        ([object()], [], [], r"buffer 0: expected a BufferDecl, got object"),
        ([BufferDecl(7, Memory.HBM, 0, (4,), "f32")], [], [], r"buffer 0: name must be a string"),  # type: ignore[arg-type]  # the mistake under test
        ([BufferDecl("x", Memory.HBM, 0, (4,), "f32")], [None], [], r"input 0: expected a TensorBinding, got NoneType"),
        ([BufferDecl("x", Memory.HBM, 0, (4,), "f32")], [], [TensorBinding(3, 0, (4,), (1,))], r"output 0: name must"),  # type: ignore[arg-type]  # the mistake under test
        (
            [BufferDecl("x", Memory.HBM, 0, (4,), "f32")],
            [TensorBinding("a", 0, (4,), (1,)), TensorBinding("a", 0, (4,), (1,))],
            [],
            r"input 1 \('a'\): duplicate input name",
        ),
        ([BufferDecl("x", Memory.HBM, 0, (4,), "f32")], [], [TensorBinding("y", 2, (4,), (1,))], r"output 0 \('y'\)"),
    ],
)
def test_buffers_and_bindings_are_named_in_diagnostics(buffers, inputs, outputs, message):
    program = Program(target="trn2", buffers=buffers, inputs=inputs, outputs=outputs, body=[])
    with pytest.raises(BundleError, match=message):
        validate_program(program)


def access(buffer: int = 0, **fields) -> Access:
    values: dict[str, Any] = {"pattern": ((1, 64),), "partitions": 128} | fields
    return Access(buffer, **values)


@pytest.mark.parametrize(
    ("inst", "message"),
    [
        (
            Instruction(0, "memset", Engine.VECTOR, {"dst": access(offset=1.5)}, {"value": 0.0}),
            "offset must be an integer, got 1.5",
        ),
        (
            Instruction(0, "memset", Engine.VECTOR, {"dst": access(pattern=((0, 64),))}, {"value": 0.0}),
            "touches some elements twice",
        ),
        (
            Instruction(0, "memset", Engine.VECTOR, {"dst": access(pattern=((1, 2), (1, 32)))}, {"value": 0.0}),
            "touches some elements twice",
        ),
        (
            Instruction(
                0,
                "tensor_copy",
                Engine.VECTOR,
                {"dst": access(pattern=((1, 1),)), "src": access(1, pattern=((40000, 1),))},
            ),
            "does not fit an engine access pattern",
        ),
        (
            Instruction(
                0,
                "tensor_scalar",
                Engine.VECTOR,
                {"dst": access(), "src": access(1), "operand1": access(1, pattern=((1, 1),))},
                {"op0": "add"},
            ),
            "operand1': given without op1",
        ),
        (
            Instruction(0, "memset", Engine.VECTOR, {"dst": access()}, {"value": True}),
            "expected a number, got True",
        ),
        (Instruction(0, "memset", "vector", {"dst": access()}, {"value": 0.0}), "unknown engine 'vector'"),  # type: ignore[arg-type]
        (
            Instruction(0, "memset", Engine.VECTOR, {"dst": access()}, {"value": 0.0}, queue=3),
            "only DMA instructions have a queue",
        ),
        (
            Instruction(0, "dma_copy", Engine.DMA, {"dst": access(), "src": access(1)}, queue=16),
            r"DMA queue 16 is outside 0..15",
        ),
        (
            Instruction(0, "memset", Engine.VECTOR, {"dst": access()}, {"value": 0.0}, location=4),
            "location 4 is not an index",
        ),
        (
            Instruction(0, "iota", Engine.GPSIMD, {"dst": access()}, {"pattern": ((1, 63),)}),
            r"attribute 'pattern': covers the free shape \[63\], dst's is \[64\]",
        ),
        (  # as many elements as dst, in another shape
            Instruction(0, "iota", Engine.GPSIMD, {"dst": access()}, {"pattern": ((1, 32), (32, 2))}),
            r"attribute 'pattern': covers the free shape \[32, 2\], dst's is \[64\]",
        ),
        (
            Instruction(
                0,
                "tensor_reduce",
                Engine.VECTOR,
                {"dst": access(pattern=((1, 1),)), "src": access(1)},
                {"op": "add", "axes": 2},
            ),
            "cannot reduce 2 axes of a 1-d free pattern",
        ),
        (
            Instruction(
                0,
                "activation",
                Engine.SCALAR,
                {"dst": access(), "src": access(1), "bias": access(1, pattern=((1, 2),))},
                {"func": "exp"},
            ),
            r"operand 'bias': must be a per-partition column \[128, 1\], got \[128, 2\]",
        ),
        (
            Instruction(
                0,
                "tensor_tensor",
                Engine.VECTOR,
                {"dst": access(), "in0": access(1), "in1": access(1, pattern=((1, 32),))},
                {"op": "add"},
            ),
            r"dst is \[128, 64\] but in1 is \[128, 32\]",
        ),
        (
            Instruction(0, "memset", Engine.VECTOR, {"dst": access(partitions=64, partition_start=32)}, {"value": 0.0}),
            r"cannot start at partition 32 \(allowed: 0, 64\)",
        ),
    ],
)
def test_instruction_rules(inst, message):
    with pytest.raises(BundleError, match=message):
        validate_program(bare_program(inst))


def test_numpy_integers_are_accepted_in_memory():
    inst = Instruction(
        np.int64(0),  # type: ignore[arg-type]  # NumPy integers, as a program built with NumPy arithmetic holds
        "memset",
        Engine.VECTOR,
        {"dst": access(offset=np.int32(0))},
        {"value": 0.0},
    )
    validate_program(bare_program(inst))


def test_matmul_rules():
    buffers = [
        BufferDecl("s", Memory.SBUF, 0, (128, 128), "f32"),
        BufferDecl("m", Memory.SBUF, 512, (128, 512), "bf16"),
        BufferDecl("p", Memory.PSUM, 0, (128, 512), "f32"),
    ]
    mixed = Instruction(
        0,
        "nc_matmul",
        Engine.TENSOR,
        {
            "dst": access(2, pattern=((1, 512),)),
            "stationary": access(0, pattern=((1, 128),)),
            "moving": access(1, pattern=((1, 512),)),
        },
    )
    with pytest.raises(BundleError, match="inputs must both be f32 or both narrower, got f32 and bf16"):
        validate_program(bare_program(mixed, buffers=buffers))
    buffers[1] = BufferDecl("m", Memory.SBUF, 512, (128, 512), "i32")
    with pytest.raises(BundleError, match="TensorE reads float inputs, got i32"):
        validate_program(bare_program(mixed, buffers=buffers))


def test_validation_is_fast_for_a_large_loop_nest():
    """A 16 x 16 x 16 tiled loop nest validates without walking its iterations."""
    import time

    b = ProgramBuilder("trn2")
    x = b.hbm("x", (2048, 2048), "f32")
    t = b.sbuf("t", (128, 512), "f32")
    with b.loop(0, 16) as i, b.loop(0, 4) as j, b.loop(0, 16):
        row = b.scalar(b.reg(), "mul", i, 128 * 2048)
        column = b.scalar(b.reg(), "mul", j, 512)
        offset = b.scalar(b.reg(), "add", row, column)
        b.dma(b.ap(t), b.ap(x, [(2048, 128), (1, 512)], reg=offset))
    start = time.perf_counter()
    validate_program(b.build())
    assert time.perf_counter() - start < 0.5


def _matmuls_at_register_offsets(step: int):
    """Three matmuls into [128, 256] fp32 PSUM rows at element offsets 0, step, 2 * step (a register)."""
    b = ProgramBuilder("trn2")
    s, m = b.sbuf("s", (128, 128), "bf16"), b.sbuf("m", (128, 256), "bf16")
    acc = b.psum("acc", (128, 2048))
    with b.loop(0, 3) as i:
        offset = b.scalar(b.reg(), "mul", i, step)
        b.inst("nc_matmul", "tensor", {"dst": b.ap(acc, [(1, 256)], reg=offset), "stationary": b.ap(s),
                                       "moving": b.ap(m)})  # fmt: skip
    return b.build()


def test_a_register_offset_matmul_destination_stays_inside_one_bank():
    """A static offset's bank is the instruction set's rule; a register's is proved over the values it takes."""
    validate_program(_matmuls_at_register_offsets(step=512))  # rows at bytes 0, 2048, 4096: one bank each
    with pytest.raises(BundleError, match=r"bytes 1536\.\.2559 of each partition cross a 2048-byte PSUM bank"):
        validate_program(_matmuls_at_register_offsets(step=384))


@pytest.mark.parametrize(
    ("target", "dtype", "message"),
    [("trn2", "bf16", None), ("trn1", "bf16", "trn1 .NeuronCore-v2. has no DMA transpose"), ("trn2", "f32", "2-byte")],
)
def test_dma_transpose_rules_are_the_dialects(target, dtype, message):
    """The bundle validator refuses a DMA transpose by the rule the neuron dialect's verifier applies (invalid.mlir)."""
    b = ProgramBuilder(target)
    x, t = b.hbm("x", (512, 64), dtype), b.sbuf("t", (64, 512), dtype)
    b.inst("dma_transpose", "dma", {"dst": b.ap(t), "src": b.ap(x)})
    if message is None:
        validate_program(b.build())
        return
    with pytest.raises(BundleError, match=message):
        validate_program(b.build())
