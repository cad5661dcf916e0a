"""Helpers for the runtime tests: run one instruction end to end on the simulated core."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from neuron_mlir.runtime import dtypes
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.simulator import run_program

Kernel = Callable[..., dict[str, np.ndarray]]


def run_kernel(
    opcode: str,
    engine: str,
    inputs: Mapping[str, np.ndarray],
    outputs: Mapping[str, tuple[tuple[int, ...], str]],
    attrs: Mapping[str, object] | None = None,
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
        tiles[role] = b.buffer(f"{role}_tile", "psum" if role in psum else "sbuf", array.shape,
                               dtypes.dtype_name(array.dtype))
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
