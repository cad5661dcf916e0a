"""A loop nest's instruction instances for all its iterations at once: registers evaluated over lanes in NumPy.

A *nest* is a loop together with the loops perfectly nested in it (`chain_of`: a body of ScalarOps followed by
exactly one loop continues the chain); each iteration of the innermost chain loop is one *lane*, and lanes are
numbered in program order (row-major over the chain's levels). `trace` evaluates the nest the way
`runtime.interpreter` would run it, but with every register held as an int64 array over the lanes (broadcast
along the levels it does not depend on), so that one pass over the innermost body yields every instance:

* `Lanes.positions` is the instance sequence of one lane (inner non-chain loops unrolled), the same for all;
* `Lanes.values[p][c]` is the value of register column `c` of position `p` in every lane.

ScalarOps are evaluated with NumPy operations giving, element by element, exactly `isa.scalar_op`'s 32-bit
results (`vector_scalar_op`). `trace` returns None (the caller then runs the loop iteration by iteration, where
the plain rules apply) when the nest is not of that form: a chain level or inner loop whose bounds differ between
lanes, a level without iterations, a register read in a lane before that lane sets it although the nest sets it
(a value carried from one lane to the next), a division by zero, or more instances per lane than `MAX_POSITIONS`.
When it returns Lanes, running the loop instance by instance would issue exactly `Lanes.instances()` and leave
the registers as `Lanes.exit_registers` says.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neuron_mlir.runtime.isa import scalar_op
from neuron_mlir.runtime.plan import InstructionPlan
from neuron_mlir.runtime.program import Instruction, Loop, Node, Reg, Scalar, ScalarOp

# Lanes with more instances than this are not traced: the outer loop runs iteration by iteration and its inner
# loops get their own chance (a long unrolled lane costs more NumPy calls than it saves).
MAX_POSITIONS = 4096

RegisterValue = int | np.ndarray


def chain_of(loop: Loop) -> list[Loop]:
    """The loop and the loops perfectly nested in it: while a body is ScalarOps then exactly one loop."""
    chain = [loop]
    while True:
        body = chain[-1].body
        if not body or type(body[-1]) is not Loop or any(type(node) is not ScalarOp for node in body[:-1]):
            return chain
        chain.append(body[-1])


def written_registers(nodes: Sequence[Node]) -> set[int]:
    """Registers any node in `nodes` (at any depth) sets: ScalarOp destinations and loop inductions."""
    found: set[int] = set()
    for node in nodes:
        if type(node) is ScalarOp:
            found.add(node.dest.index)
        elif type(node) is Loop:
            found.add(node.induction.index)
            found |= written_registers(node.body)
    return found


def wrap32_array(values: np.ndarray) -> np.ndarray:
    """`isa.wrap32` element by element (int64 in, int64 out)."""
    return ((values + 2**31) & 0xFFFFFFFF) - 2**31


def vector_scalar_op(op: str, lhs: RegisterValue, rhs: RegisterValue) -> RegisterValue | None:
    """`isa.scalar_op` element by element over int64 arrays (or plain ints); None on a division by zero.

    Operands are 32-bit values, so sums, differences and products are exact in int64 before wrapping; NumPy's
    integer floor_divide and remainder round like Python's // and % (toward -inf, remainder with the divisor's
    sign)."""
    if not isinstance(lhs, np.ndarray) and not isinstance(rhs, np.ndarray):
        try:
            return scalar_op(op, int(lhs), int(rhs))
        except ZeroDivisionError:
            return None
    a = np.asarray(lhs, dtype=np.int64)
    b = np.asarray(rhs, dtype=np.int64)
    if op in ("floordiv", "rem") and not b.all():
        return None
    if op == "add":
        result = a + b
    elif op == "sub":
        result = a - b
    elif op == "mul":
        result = a * b
    elif op == "floordiv":
        result = np.floor_divide(a, b)
    elif op == "rem":
        result = np.remainder(a, b)
    elif op == "min":
        return np.minimum(a, b)
    elif op == "max":
        return np.maximum(a, b)
    else:
        return _COMPARISONS[op](a, b).astype(np.int64)
    return wrap32_array(result)


_COMPARISONS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@dataclass
class Lanes:
    """Every instance of one execution of a nest (see the module docstring)."""

    loop: Loop
    shape: tuple[int, ...]  # iterations per chain level, outermost first
    positions: list[InstructionPlan]  # one lane's instances in order
    values: list[list[RegisterValue]]  # per position, per register column: broadcastable to `shape`
    exit_registers: dict[int, int]  # register -> value the nest leaves in it

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    def column(self, position: int, column: int) -> np.ndarray:
        """Register column `column` of `position` in every lane, flattened in lane order (int64 [count])."""
        value = self.values[position][column]
        return np.broadcast_to(np.asarray(value, dtype=np.int64), self.shape).reshape(-1)

    def columns(self, position: int) -> np.ndarray:
        """All register columns of `position`: int64 [count, columns]."""
        plan = self.positions[position]
        table = np.empty((self.count, len(plan.registers)), np.int64)
        for column in range(len(plan.registers)):
            table[:, column] = self.column(position, column)
        return table

    def instances(
        self, first_lane: int = 0, stop_lane: int | None = None
    ) -> Iterator[tuple[InstructionPlan, list[int]]]:
        """(plan, register values) of every instance of lanes [first_lane, stop_lane), in program order."""
        block = 4096  # lanes converted to Python lists at a time
        end = self.count if stop_lane is None else stop_lane
        for start in range(first_lane, end, block):
            stop = min(end, start + block)
            rows = [
                self.columns(position)[start:stop].tolist() if plan.registers else None
                for position, plan in enumerate(self.positions)
            ]
            for lane in range(stop - start):
                for position, plan in enumerate(self.positions):
                    table = rows[position]
                    yield plan, (table[lane] if table is not None else [])


class _Untraceable(Exception):
    """The nest is not of the form `trace` handles."""


class _Tracer:
    def __init__(self, loop: Loop, registers: Sequence[int], plan_of: Mapping[int, InstructionPlan]) -> None:
        self.registers = registers
        self.plan_of = plan_of
        self.written = written_registers([loop])
        self.env: dict[int, RegisterValue] = {}  # registers set in the lane so far
        self.positions: list[InstructionPlan] = []
        self.values: list[list[RegisterValue]] = []

    def value(self, operand: Scalar) -> RegisterValue:
        if type(operand) is not Reg:
            return int(operand)
        index = operand.index
        found = self.env.get(index)
        if found is not None:
            return found
        if index in self.written:
            raise _Untraceable  # the value would come from the previous lane (or an inner loop that did not run)
        return self.registers[index]

    def uniform(self, operand: Scalar) -> int:
        value = self.value(operand)
        if isinstance(value, np.ndarray):
            first = int(value.reshape(-1)[0])
            if not (value == first).all():
                raise _Untraceable
            return first
        return value

    def scalar(self, op: ScalarOp) -> None:
        result = vector_scalar_op(op.op, self.value(op.lhs), self.value(op.rhs))
        if result is None:
            raise _Untraceable  # division by zero: the plain run reports it where it happens
        self.env[op.dest.index] = result

    def body(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            kind = type(node)
            if kind is Instruction:
                plan = self.plan_of[id(node)]
                self.positions.append(plan)
                if len(self.positions) > MAX_POSITIONS:
                    raise _Untraceable
                self.values.append([self.value(Reg(r)) for r in plan.registers])
            elif kind is ScalarOp:
                self.scalar(node)  # type: ignore[arg-type]
            else:
                loop: Loop = node  # type: ignore[assignment]
                trips = range(self.uniform(loop.lower), self.uniform(loop.upper), int(loop.step))
                for value in trips:
                    self.env[loop.induction.index] = value
                    self.body(loop.body)


def trace(loop: Loop, trips: range, registers: Sequence[int], plan_of: Mapping[int, InstructionPlan]) -> Lanes | None:
    """The nest rooted at `loop`, entered with `registers` and running `trips`, as Lanes (or None: see above)."""
    chain = chain_of(loop)
    depth = len(chain)
    tracer = _Tracer(loop, registers, plan_of)
    shape: list[int] = []
    try:
        for level, chain_loop in enumerate(chain):
            if level:
                trips = range(tracer.uniform(chain_loop.lower), tracer.uniform(chain_loop.upper), int(chain_loop.step))
            if not trips:
                return None
            shape.append(len(trips))
            axis = [1] * depth
            axis[level] = len(trips)
            tracer.env[chain_loop.induction.index] = np.arange(
                trips.start, trips.stop, trips.step, dtype=np.int64
            ).reshape(axis)
            if level < depth - 1:
                for node in chain_loop.body[:-1]:
                    tracer.scalar(node)  # type: ignore[arg-type]
        tracer.body(chain[-1].body)
    except _Untraceable:
        return None
    exit_registers: dict[int, int] = {}
    for register, value in tracer.env.items():
        exit_registers[register] = int(np.asarray(value).reshape(-1)[-1]) if isinstance(value, np.ndarray) else value
    return Lanes(loop, tuple(shape), tracer.positions, tracer.values, exit_registers)
