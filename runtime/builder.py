"""A small builder for hand-written `Program`s: tests, examples and experiments.

It places buffers with a bump allocator (aligned as the target says: SBUF rows to `on_chip_alignment_bytes`,
PSUM buffers to bank boundaries, HBM to `hbm_alignment_bytes`), hands out registers and instruction ids, keeps
the location table, and builds loops with a context manager:

    b = ProgramBuilder("trn2")
    x, y = b.input("x", (128, 512), "f32"), b.output("y", (128, 512), "f32")
    t = b.sbuf("t", (128, 512), "f32")
    load = b.dma(b.ap(t), b.ap(x))
    act = b.inst("activation", "scalar", {"dst": b.ap(t), "src": b.ap(t)}, {"func": "exp"}, waits=[load])
    b.dma(b.ap(y), b.ap(t), waits=[act])
    outputs, profile = run_program(b.build(), [np.ones((128, 512), np.float32)])

With `auto_waits=True`, `build()` makes every instruction wait on every instruction of another queue whose
buffers conflict with its own (read/write or write/write on buffers sharing bytes). That over-synchronises but is
always race free, which is what semantics tests want; timing tests give waits by hand.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_mlir.runtime import dtypes, hardware, isa
from neuron_mlir.runtime.hardware import Engine, Memory
from neuron_mlir.runtime.program import (
    Access,
    AttrValue,
    BufferDecl,
    Instruction,
    Loop,
    Node,
    Program,
    Reg,
    Scalar,
    ScalarInput,
    ScalarOp,
    TensorBinding,
    row_major_strides,
)


@dataclass
class _PendingInstruction:
    id: int
    opcode: str
    engine: Engine
    operands: dict[str, Access]
    attrs: dict[str, AttrValue]
    queue: int
    waits: list[int]
    location: int


@dataclass
class _Frame:
    induction: Reg
    lower: Scalar
    upper: Scalar
    step: int
    body: list[Any] = field(default_factory=list)


def _row_major(shape: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The access pattern that walks `shape` densely in row-major order ([step, num] pairs)."""
    return tuple(zip(row_major_strides(shape), shape, strict=True)) or ((1, 1),)


class ProgramBuilder:
    def __init__(self, target: str = hardware.DEFAULT_TARGET, *, auto_waits: bool = False) -> None:
        self.target = hardware.get_target(target)
        self.auto_waits = auto_waits
        self.buffers: list[BufferDecl] = []
        self.inputs: list[TensorBinding] = []
        self.outputs: list[TensorBinding] = []
        self.constants: dict[int, np.ndarray] = {}
        self.locations: list[str] = []
        self.num_registers = 0
        self.scalars: list[ScalarInput] = []
        self._next = {Memory.SBUF: 0, Memory.PSUM: 0, Memory.HBM: 0}
        self._next_id = 0
        self._stack: list[_Frame] = []
        self._body: list[Any] = []

    # ---- memory plan ---------------------------------------------------------------------------------------

    def buffer(
        self, name: str, memory: Memory | str, shape: Sequence[int], dtype: str, address: int | None = None
    ) -> int:
        """Declare a buffer (placed automatically unless `address` is given); return its index."""
        memory = Memory(memory)
        shape = tuple(int(d) for d in shape)
        itemsize = dtypes.itemsize(dtype)
        row = math.prod(shape[1:] if memory is not Memory.HBM else shape) * itemsize
        if address is None:
            align = {
                Memory.SBUF: self.target.on_chip_alignment_bytes,
                Memory.PSUM: self.target.psum_bank_bytes,
                Memory.HBM: self.target.hbm_alignment_bytes,
            }[memory]
            address = -(-self._next[memory] // align) * align
            self._next[memory] = address + row
        self.buffers.append(BufferDecl(name, memory, address, shape, dtype))
        return len(self.buffers) - 1

    def sbuf(self, name: str, shape: Sequence[int], dtype: str, address: int | None = None) -> int:
        return self.buffer(name, Memory.SBUF, shape, dtype, address)

    def psum(self, name: str, shape: Sequence[int], dtype: str = "f32", address: int | None = None) -> int:
        return self.buffer(name, Memory.PSUM, shape, dtype, address)

    def hbm(self, name: str, shape: Sequence[int], dtype: str, address: int | None = None) -> int:
        return self.buffer(name, Memory.HBM, shape, dtype, address)

    def _binding(self, name: str, buffer: int) -> TensorBinding:
        shape = self.buffers[buffer].shape
        return TensorBinding(name, buffer, shape, row_major_strides(shape))

    def input(self, name: str, shape: Sequence[int], dtype: str) -> int:
        """A row-major HBM buffer bound as the next entry argument."""
        buffer = self.hbm(name, shape, dtype)
        self.inputs.append(self._binding(name, buffer))
        return buffer

    def output(self, name: str, shape: Sequence[int], dtype: str) -> int:
        buffer = self.hbm(name, shape, dtype)
        self.outputs.append(self._binding(name, buffer))
        return buffer

    def constant(self, name: str, array: np.ndarray) -> int:
        buffer = self.hbm(name, array.shape, dtypes.dtype_name(array.dtype))
        self.constants[buffer] = np.ascontiguousarray(array)
        return buffer

    def ap(
        self,
        buffer: int,
        pattern: Sequence[tuple[int, int]] | None = None,
        offset: int = 0,
        reg: Reg | None = None,
        partitions: int | None = None,
        partition_start: int = 0,
    ) -> Access:
        """An access of `buffer`; by default all of it, row-major (on chip: every partition, its whole row)."""
        decl = self.buffers[buffer]
        on_chip = decl.memory is not Memory.HBM
        if pattern is None:
            pattern = _row_major(decl.shape[1:] if on_chip else decl.shape)
        if on_chip and partitions is None:
            partitions = decl.shape[0] - partition_start
        return Access(
            buffer,
            tuple((int(s), int(n)) for s, n in pattern),
            offset,
            reg,
            partition_start if on_chip else 0,
            partitions if on_chip else 0,  # type: ignore[arg-type]
        )

    # ---- instructions --------------------------------------------------------------------------------------

    def reg(self) -> Reg:
        self.num_registers += 1
        return Reg(self.num_registers - 1)

    def scalar_input(self, name: str, lower: int, upper: int) -> Reg:
        """An integer argument of the entry point in [lower, upper]: the register holding the call's value."""
        register = self.reg()
        self.scalars.append(ScalarInput(name, register, lower, upper))
        return register

    def location(self, text: str) -> int:
        if text not in self.locations:
            self.locations.append(text)
        return self.locations.index(text)

    def _emit(self, node: Any) -> None:
        (self._stack[-1].body if self._stack else self._body).append(node)

    def inst(
        self,
        opcode: str,
        engine: Engine | str,
        operands: Mapping[str, Access],
        attrs: Mapping[str, AttrValue] | None = None,
        *,
        queue: int = 0,
        waits: Sequence[int] = (),
        location: str | None = None,
        id: int | None = None,
    ) -> int:
        """Append an instruction; return its id."""
        if id is None:
            id = self._next_id
        self._next_id = max(self._next_id, id + 1)
        pending = _PendingInstruction(
            id,
            opcode,
            Engine(engine),
            dict(operands),
            dict(attrs or {}),
            queue,
            list(waits),
            self.location(location) if location is not None else -1,
        )
        self._emit(pending)
        return id

    def dma(self, dst: Access, src: Access, *, queue: int = 0, waits: Sequence[int] = (), **kwargs: Any) -> int:
        return self.inst("dma_copy", Engine.DMA, {"dst": dst, "src": src}, queue=queue, waits=waits, **kwargs)

    def scalar(self, dest: Reg, op: str, lhs: Scalar, rhs: Scalar) -> Reg:
        if op not in isa.SCALAR_OPS:
            raise ValueError(f"unknown scalar op {op!r}")
        self._emit(ScalarOp(dest, op, lhs, rhs))
        return dest

    @contextlib.contextmanager
    def loop(self, lower: Scalar, upper: Scalar, step: int = 1) -> Iterator[Reg]:
        """`for reg in range(lower, upper, step):` around the instructions emitted inside the block."""
        frame = _Frame(self.reg(), lower, upper, step)
        self._stack.append(frame)
        try:
            yield frame.induction
        finally:
            self._stack.pop()
        self._emit(frame)

    # ---- result --------------------------------------------------------------------------------------------

    def build(self) -> Program:
        if self._stack:
            raise ValueError("build() inside an open loop")
        pending = list(_walk(self._body))
        if self.auto_waits:
            self._add_waits(pending)
        return Program(
            target=self.target.name,
            buffers=list(self.buffers),
            inputs=list(self.inputs),
            outputs=list(self.outputs),
            body=[_freeze(node) for node in self._body],
            constants=dict(self.constants),
            num_registers=self.num_registers,
            locations=list(self.locations),
            compiler_version="runtime.builder",
            scalars=list(self.scalars),
        )

    def _add_waits(self, pending: list[_PendingInstruction]) -> None:
        extents = [
            (b.memory, b.address, b.address + b.elements_per_row * dtypes.itemsize(b.dtype)) for b in self.buffers
        ]

        def shares(a: int, b: int) -> bool:
            (ma, sa, ea), (mb, sb, eb) = extents[a], extents[b]
            return ma == mb and sa < eb and sb < ea

        def touched(inst: _PendingInstruction) -> tuple[set[int], set[int]]:
            spec = isa.OPCODES[inst.opcode]
            writes = {a.buffer for role, a in inst.operands.items() if role in spec.writes + spec.optional_writes}
            reads = {a.buffer for role, a in inst.operands.items() if role not in spec.writes + spec.optional_writes}
            return reads, writes

        def queue_of(inst: _PendingInstruction) -> tuple[Engine, int]:
            return (inst.engine, inst.queue)

        sets = [touched(inst) for inst in pending]
        for x, (x_reads, x_writes) in zip(pending, sets, strict=True):
            for y, (y_reads, y_writes) in zip(pending, sets, strict=True):
                if queue_of(x) == queue_of(y) or y.id in x.waits:
                    continue
                conflict = any(shares(a, b) for a in x_writes for b in y_reads | y_writes) or any(
                    shares(a, b) for a in x_reads for b in y_writes
                )
                if conflict:
                    x.waits.append(y.id)


def _walk(nodes: list[Any]) -> Iterator[_PendingInstruction]:
    for node in nodes:
        if isinstance(node, _PendingInstruction):
            yield node
        elif isinstance(node, _Frame):
            yield from _walk(node.body)


def _freeze(node: Any) -> Node:
    if isinstance(node, _PendingInstruction):
        return Instruction(
            node.id,
            node.opcode,
            node.engine,
            node.operands,
            node.attrs,
            node.queue,
            tuple(node.waits),
            node.location,
        )
    if isinstance(node, _Frame):
        return Loop(node.induction, node.lower, node.upper, node.step, tuple(_freeze(n) for n in node.body))
    return node
