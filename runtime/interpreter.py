"""What a program does, by definition: its nodes executed in program order, one instruction instance at a time.

`Interpreter.run` walks the nodes of a `Program` (`runtime.program`) as they are:

* an `Instruction` issues one *instance*: the instruction with the current values of the registers it reads (its
  operands' offset registers, then its register attributes: `InstructionPlan.registers`);
* a `ScalarOp` sets its destination register to `isa.scalar_op(op, lhs, rhs)` (32-bit two's complement), where
  an operand is an immediate or a register's current value; division by zero is a `SimulationError`;
* a `Loop` evaluates its bounds once, then sets its induction register to each value of
  `range(lower, upper, step)` in turn and runs its body; after the loop the register keeps its last value.

All registers start at 0 but those of the program's scalar arguments, which the caller sets to the run's values
before `run`; so register values depend on immediates, loop counters and those arguments only, never on data.

What an instance *does* is the caller's `issue(plan, values)`: the simulator executes its semantics
(`runtime.semantics`), places it on the timeline (`runtime.timeline`) and checks it for races
(`runtime.races`). A caller may also pass `nests(loop, trips, registers)`, which may run a whole loop (all its
iterations, every instance in order) some faster way and leave the registers as the loop would; it returns False
to let the loop run here, iteration by iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from neuron_mlir.runtime.isa import scalar_op
from neuron_mlir.runtime.plan import InstructionPlan
from neuron_mlir.runtime.program import Instruction, Loop, Node, Reg, Scalar, ScalarOp
from neuron_mlir.runtime.races import SimulationError

Issue = Callable[[InstructionPlan, list[int]], None]
Nests = Callable[[Loop, range, list[int]], bool]


class Interpreter:
    """Executes program nodes in order (see the module docstring)."""

    def __init__(
        self,
        plan_of: Mapping[int, InstructionPlan],
        num_registers: int,
        issue: Issue,
        nests: Nests | None = None,
    ) -> None:
        self.plan_of = plan_of  # id(instruction) -> its plan
        self.registers = [0] * num_registers
        self.issue = issue
        self.nests = nests

    def run(self, nodes: Sequence[Node]) -> None:
        registers = self.registers
        plan_of = self.plan_of
        for node in nodes:
            if type(node) is Instruction:
                plan = plan_of[id(node)]
                self.issue(plan, [registers[r] for r in plan.registers])
            elif type(node) is ScalarOp:
                registers[node.dest.index] = self.scalar(node)
            else:
                assert type(node) is Loop
                self.loop(node)

    def value(self, operand: Scalar) -> int:
        return self.registers[operand.index] if type(operand) is Reg else int(operand)

    def scalar(self, op: ScalarOp) -> int:
        lhs, rhs = self.value(op.lhs), self.value(op.rhs)
        try:
            return scalar_op(op.op, lhs, rhs)
        except ZeroDivisionError:
            raise SimulationError(f"scalar division by zero ({lhs} by {rhs})") from None

    def loop(self, loop: Loop) -> None:
        trips = range(self.value(loop.lower), self.value(loop.upper), int(loop.step))
        if self.nests is not None and len(trips) > 1 and self.nests(loop, trips, self.registers):
            return
        self.iterate(loop, trips)

    def iterate(self, loop: Loop, trips: range) -> None:
        """The iterations of `loop` for the induction values `trips`, one after another."""
        registers = self.registers
        induction = loop.induction.index
        for value in trips:
            registers[induction] = value
            self.run(loop.body)
