"""Helpers for the runtime tests: run one instruction end to end on the simulated core."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import ml_dtypes
import numpy as np
import pytest

from neuron_mlir.runtime import dtypes
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.program import AttrValue
from neuron_mlir.runtime.simulator import run_program

Kernel = Callable[..., dict[str, np.ndarray]]


def run_kernel(
    opcode: str,
    engine: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Mapping[str, tuple[tuple[int, ...], str]],
    attrs: Mapping[str, AttrValue] | None = None,
    *,
    target: str = "trn2",
    psum: tuple[str, ...] = (),
    fill: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Load `inputs` ([P, F...] arrays) into SBUF (or PSUM for roles in `psum`), run one instruction, store
    `outputs` (role -> (shape, dtype)) back to HBM, and return them. `fill` preloads output tiles."""
    b = ProgramBuilder(target, auto_waits=True)
    tiles: dict[str, int] = {}

    def stage_in(role: str, array: np.ndarray, buffer: int, into_psum: bool) -> None:
        source = b.input(role, array.shape, dtypes.dtype_name(array.dtype))
        if into_psum:
            staging = b.sbuf(f"{role}_staging", array.shape, dtypes.dtype_name(array.dtype))
            b.dma(b.ap(staging), b.ap(source))
            b.inst("tensor_copy", "vector", {"dst": b.ap(buffer), "src": b.ap(staging)})
        else:
            b.dma(b.ap(buffer), b.ap(source))

    arrays = []
    for role, array in inputs.items():
        tiles[role] = b.buffer(
            f"{role}_tile", "psum" if role in psum else "sbuf", array.shape, dtypes.dtype_name(array.dtype)
        )
        stage_in(role, array, tiles[role], role in psum)
        arrays.append(array)
    for role, (shape, dtype) in outputs.items():
        tiles[role] = b.buffer(f"{role}_tile", "psum" if role in psum else "sbuf", shape, dtype)
        if fill and role in fill:
            stage_in(f"{role}_init", fill[role], tiles[role], role in psum)
            arrays.append(fill[role])
    b.inst(opcode, engine, {role: b.ap(tile) for role, tile in tiles.items()}, dict(attrs or {}))
    for role, (shape, dtype) in outputs.items():
        result = b.output(role, shape, dtype)
        source = tiles[role]
        if role in psum:
            source = b.sbuf(f"{role}_out", shape, dtype)
            b.inst("tensor_copy", "vector", {"dst": b.ap(source), "src": b.ap(tiles[role])})
        b.dma(b.ap(result), b.ap(source))
    results, _ = run_program(b.build(), arrays)
    return dict(zip(outputs, results, strict=True))


@pytest.fixture
def kernel() -> Kernel:
    return run_kernel


def build_rich_program(tiles: int = 2, target: str = "trn2"):
    """A small but complete program: constants, loops with a register bound, offset registers, a register
    accumulate flag, every engine and several DMA queues, non-finite attributes and source locations.

    y[t] = gelu(w^T @ bf16(x[t]) + 1) for each 128-row tile t of x; also z = max(x[0], -inf mask).
    Inputs: x [tiles*128, 512] f32. Outputs: y (same shape), z [128, 512] f32.
    """
    rng = np.random.default_rng(42)
    b = ProgramBuilder(target, auto_waits=True)
    x = b.input("x", (tiles * 128, 512), "f32")
    w = b.constant("w", (rng.standard_normal((128, 128)) * 0.1).astype(ml_dtypes.bfloat16))
    ones = b.constant("ones", np.ones((128, 1), np.float32))
    y = b.output("y", (tiles * 128, 512), "f32")
    z = b.output("z", (128, 512), "f32")
    w_tile, bias = b.sbuf("w_tile", (128, 128), "bf16"), b.sbuf("bias", (128, 1), "f32")
    x_tile, x_bf16 = b.sbuf("x_tile", (128, 512), "f32"), b.sbuf("x_bf16", (128, 512), "bf16")
    acc = b.psum("acc", (128, 512))
    out = b.sbuf("out", (128, 512), "f32")
    mask = b.sbuf("mask", (128, 512), "f32")
    b.dma(b.ap(w_tile), b.ap(w), queue=1, location="model.py:1 (w)")
    b.dma(b.ap(bias), b.ap(ones), queue=2)
    count = b.scalar(b.reg(), "add", 0, tiles)
    with b.loop(0, count) as t:
        row = b.scalar(b.reg(), "mul", t, 128 * 512)
        b.dma(b.ap(x_tile), b.ap(x, [(512, 128), (1, 512)], reg=row), queue=0, location="model.py:2 (load)")
        b.inst("tensor_copy", "vector", {"dst": b.ap(x_bf16), "src": b.ap(x_tile)})
        first = b.scalar(b.reg(), "ge", t, 0)
        b.inst(
            "nc_matmul",
            "tensor",
            {"dst": b.ap(acc), "stationary": b.ap(w_tile), "moving": b.ap(x_bf16)},
            {"accumulate": b.scalar(b.reg(), "eq", first, 0)},
            location="model.py:3 (mm)",
        )
        b.inst(
            "activation",
            "scalar",
            {"dst": b.ap(out), "src": b.ap(acc), "bias": b.ap(bias)},
            {"func": "gelu", "scale": 1.0},
            location="model.py:4 (gelu)",
        )
        b.dma(b.ap(y, [(512, 128), (1, 512)], reg=row), b.ap(out), queue=3)
    b.inst(
        "affine_select",
        "gpsimd",
        {"dst": b.ap(mask), "on_true": b.ap(x_tile)},
        {"cmp": "is_ge", "channel_multiplier": 1, "pattern": ((-1, 512),), "on_false_value": -np.inf},
    )
    b.inst("tensor_tensor", "vector", {"dst": b.ap(mask), "in0": b.ap(mask), "in1": b.ap(x_tile)}, {"op": "max"})
    b.dma(b.ap(z), b.ap(mask), queue=4)
    return b.build()


@pytest.fixture
def rich_program():
    return build_rich_program
