"""Small runtime programs several simulator tests run (not collected: no test_ prefix)."""

from __future__ import annotations

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.program import Program


def loops_batched_and_sequential() -> Program:
    """A loop of independent iterations, which the simulator batches as a nest, then one whose iterations each read
    what the previous one wrote, run iteration by iteration (register-addressed)."""
    b = ProgramBuilder("trn2", auto_waits=True)
    x, y = b.input("x", (128, 6 * 16), "f32"), b.output("y", (128, 7 * 16), "f32")
    t = b.sbuf("t", (128, 16), "f32")
    column = b.reg()
    with b.loop(0, 6) as i:
        b.scalar(column, "mul", i, 16)
        b.dma(b.ap(t), b.ap(x, [(96, 128), (1, 16)], reg=column))
        b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "square"})
        b.dma(b.ap(y, [(112, 128), (1, 16)], reg=column), b.ap(t), queue=1)
    with b.loop(0, 3) as i:
        b.scalar(column, "mul", i, 16)
        b.inst("tensor_scalar", "vector", {"dst": b.ap(t), "src": b.ap(t)}, {"op0": "add", "scalar0": 1.0})
        b.dma(b.ap(y, [(112, 128), (1, 16)], offset=96), b.ap(t), queue=2)
    return b.build()
