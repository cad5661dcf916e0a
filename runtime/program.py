"""The in-memory form of a compiled NeuronCore program: what a bundle holds and what the simulator runs.

A `Program` is a structured instruction stream in program order. Loops stay loops (`Loop` nodes whose bounds
are immediates or registers), index arithmetic runs on 32-bit-style scalar registers (`ScalarOp`), and each
`Instruction` is one NeuronCore instruction for one queue (an engine, or DMA queue `queue`). Projecting the
stream onto one queue gives that engine's own instruction stream; cross-queue ordering is explicit: an
instruction lists in `waits` the ids of the instructions whose most recent issued instance must have completed
before it starts (one hardware semaphore per producer, counted per instance). Instructions on the same queue
run in order and need no waits.

Registers start at 0, except those of the entry's scalar arguments (`ScalarInput`), which start at the call's
values: a loop bounded by such a register (or by index arithmetic on it) runs as many trips as the call needs.

Memory is byte addressed. HBM is flat. SBUF and PSUM are two-dimensional: `partitions` rows, each
`bytes_per_partition` long; a buffer there occupies the same byte range `[address, address + row_bytes)` in each
of its partitions, starting at partition 0.

An `Access` names which elements of a buffer an instruction reads or writes:

* HBM: element `offset + offset_reg + sum(i_d * step_d)` of the buffer, for each index tuple `i` of `pattern`
  (row-major, the first dimension outermost). Its logical shape is `[num_0, num_1, ...]`.
* SBUF/PSUM: partition `partition_start + p` for `p < partitions`, and within each partition the element
  `offset + offset_reg + sum(i_d * step_d)` of the buffer's row. Its logical shape is `[partitions, num_0, ...]`.

Steps and offsets count elements of the access dtype (the buffer's dtype). A DMA pairs the source and
destination elements in row-major order of their logical shapes, which must hold the same number of elements.

This module only describes; `runtime.bundle` owns the on-disk encoding and validation, and
`runtime.simulator` executes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import final

import numpy as np

from neuron_mlir.runtime.hardware import Engine, Memory


@final  # code tells a register from an immediate by `type(x) is Reg`, which only a final class narrows
@dataclass(frozen=True)
class Reg:
    """A scalar register (integer valued), numbered within the program."""

    index: int


# A scalar operand: an immediate integer or a register.
Scalar = int | Reg
# An instruction attribute: immediates of the usual kinds, a register (dynamic flags/values) or a list.
AttrValue = bool | int | float | str | Reg | tuple["AttrValue", ...] | None


@dataclass(frozen=True)
class BufferDecl:
    """A named region of one memory, fixed at compile time (the memory plan)."""

    name: str
    memory: Memory
    address: int  # bytes; HBM: absolute; SBUF/PSUM: offset inside every partition row
    shape: tuple[int, ...]  # SBUF/PSUM: (partitions, free...); HBM: the logical shape, row-major
    dtype: str  # a name from runtime.dtypes.DTYPES

    @property
    def partitions(self) -> int:
        return self.shape[0] if self.memory is not Memory.HBM else 0

    @property
    def elements_per_row(self) -> int:
        """Elements per partition row (SBUF/PSUM) or in the whole buffer (HBM)."""
        return int(math.prod(self.shape[1:] if self.memory is not Memory.HBM else self.shape))


@dataclass(frozen=True)
class Access:
    """Which elements of buffer `buffer` an operand covers (see the module docstring)."""

    buffer: int
    pattern: tuple[tuple[int, int], ...]  # (step, num) per free dimension, outermost first
    offset: int = 0
    offset_reg: Reg | None = None
    partition_start: int = 0
    partitions: int = 0  # 0 for HBM

    @property
    def shape(self) -> tuple[int, ...]:
        free = tuple(num for _, num in self.pattern)
        return (self.partitions, *free) if self.partitions else free

    @property
    def num_elements(self) -> int:
        return int(math.prod(self.shape))


@dataclass(frozen=True)
class Instruction:
    """One NeuronCore instruction. Operand roles and attributes per opcode: `runtime.isa.OPCODES`."""

    id: int
    opcode: str
    engine: Engine
    operands: dict[str, Access]
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    queue: int = 0  # DMA queue (0..15) for Engine.DMA, else 0
    waits: tuple[int, ...] = ()
    location: int = -1  # index into Program.locations, -1 if unknown


@dataclass(frozen=True)
class ScalarOp:
    """`dest = op(lhs, rhs)` on integer registers: index arithmetic for addresses and loop-dependent flags."""

    dest: Reg
    op: str  # runtime.isa.SCALAR_OPS
    lhs: Scalar
    rhs: Scalar


@dataclass(frozen=True)
class Loop:
    """`for induction in range(lower, upper, step): body`, executed by every engine's sequencer."""

    induction: Reg
    lower: Scalar
    upper: Scalar
    step: int
    body: tuple[Node, ...]


Node = Instruction | ScalarOp | Loop


@dataclass(frozen=True)
class TensorBinding:
    """An entry-point argument or result: a strided view of an HBM buffer (element units)."""

    name: str
    buffer: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0


@dataclass(frozen=True)
class ScalarInput:
    """An entry-point integer argument: register `register` holds the call's value when the program starts.

    The value lies in `[lower, upper]` (the validator checks every access for each value in that range, and a
    run with a value outside it is refused): the actual extent of a dimension the program's buffers hold at
    `upper`, so that loops over it take their trip counts from the call."""

    name: str
    register: Reg
    lower: int
    upper: int


@dataclass
class Program:
    """A complete program for one NeuronCore: memory plan, entry signature, constants and instructions."""

    target: str
    buffers: list[BufferDecl]
    inputs: list[TensorBinding]
    outputs: list[TensorBinding]
    body: list[Node]
    constants: dict[int, np.ndarray] = field(default_factory=dict)  # buffer index -> contents
    num_registers: int = 0
    locations: list[str] = field(default_factory=list)  # "file:line (module.path)" per location index
    entry: str = "main"
    compiler_version: str = ""
    scalars: list[ScalarInput] = field(default_factory=list)  # integer arguments, in call order

    def instructions(self) -> list[Instruction]:
        """Every static instruction, in program order (loop bodies once)."""
        return instructions_of(self.body)


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a dense row-major array of `shape`: the last dimension contiguous."""
    strides: list[int] = []
    running = 1
    for extent in reversed(shape):
        strides.append(running)
        running *= extent
    return tuple(reversed(strides))


def instructions_of(nodes: Sequence[Node]) -> list[Instruction]:
    """Every static instruction of `nodes`, in program order (loop bodies once)."""
    found: list[Instruction] = []
    for node in nodes:
        if isinstance(node, Instruction):
            found.append(node)
        elif isinstance(node, Loop):
            found.extend(instructions_of(node.body))
    return found
