"""The memo of view addresses a first run's analyses share (`runtime.addresses`), and the addresses the instruction
plans tell it: every one must be the view's own, or copy forwarding, the input binding and the refill analysis
would place views where they are not."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_mlir.runtime import addresses
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.simulator import run_program
from neuron_mlir.runtime.validate import validate_program


def _address(view: np.ndarray) -> int:
    return view.__array_interface__["data"][0]


def test_the_memo_gives_each_view_its_address():
    memo = addresses.Addresses()
    block = np.zeros((8, 40), np.float32)
    views = [block, block[2:5, 3:9], block[::-1, ::2], block.T, block[3, 7:8]]
    for view in views:
        assert memo.of(view) == _address(view)
        assert memo.of(view) == _address(view)  # remembered
    copied = memo.copy()
    later = block[1:, 1:]
    assert copied.of(later) == _address(later)
    assert id(later) not in memo._known  # a copy learns apart from the memo it was made from


def _looped(accumulate: bool) -> Program:
    """A loop over column tiles of x at a register offset, into SBUF tiles at partition offsets and PSUM; with
    `accumulate`, each iteration adds into one tile (its iterations depend on one another: not batched)."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, w = b.input("x", (64, 4 * 16), "f32"), b.input("w", (32, 24), "f32")
    y, z = b.output("y", (64, 4 * 16), "f32"), b.output("z", (16, 24), "f32")
    t, acc = b.sbuf("t", (64, 16), "f32"), b.sbuf("acc", (64, 16), "f32")
    ws, e, p = b.sbuf("ws", (32, 24), "f32"), b.sbuf("e", (16, 24), "f32"), b.psum("p", (16, 24), "f32")
    b.inst("memset", "vector", {"dst": b.ap(acc)}, {"value": 0.0})
    with b.loop(0, 4) as i:
        column = b.scalar(b.reg(), "mul", i, 16)
        b.dma(b.ap(t), b.ap(x, [(64, 64), (1, 16)], reg=column))
        if accumulate:
            b.inst("tensor_tensor", "vector", {"dst": b.ap(acc), "in0": b.ap(acc), "in1": b.ap(t)}, {"op": "add"})
            b.dma(b.ap(y, [(64, 64), (1, 16)], reg=column), b.ap(acc), queue=1)
        else:
            b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "square"})
            b.dma(b.ap(y, [(64, 64), (1, 16)], reg=column), b.ap(t), queue=1)
    b.dma(b.ap(ws), b.ap(w), queue=2)
    stationary = b.ap(t, [(1, 16)], partitions=32, partition_start=32)
    b.inst("nc_matmul", "tensor", {"dst": b.ap(p), "stationary": stationary, "moving": b.ap(ws)})
    b.inst("tensor_copy", "vector", {"dst": b.ap(e), "src": b.ap(p)})
    b.dma(b.ap(z), b.ap(e), queue=3)
    return b.build()


@pytest.mark.parametrize("accumulate", [False, True])
def test_plans_tell_the_recorder_each_view_s_own_address(monkeypatch: pytest.MonkeyPatch, accumulate: bool):
    told: list[tuple[np.ndarray, int]] = []
    note = addresses.Addresses.note

    def checked(self: addresses.Addresses, view: np.ndarray, address: int) -> None:
        told.append((view, address))
        note(self, view, address)

    monkeypatch.setattr(addresses.Addresses, "note", checked)
    program = _looped(accumulate)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(binding.shape).astype(np.float32) for binding in program.inputs]
    expected, reference = run_program(program, inputs, vectorize=False)
    outputs, profile = run_program(validate_program(program), inputs)
    for want, got in zip(expected, outputs, strict=True):
        assert got.tobytes() == want.tobytes()
    assert profile == reference
    assert told
    if accumulate:  # the loop's iterations were recorded one by one, at their registers' offsets
        assert len({address for _, address in told}) > len(program.instructions())
    for view, address in told:
        assert address == _address(view), (view.shape, view.strides)
