"""neuron-unroll-loops: unroll innermost loops so consecutive iterations use different buffers.

Input contract: neuron-level functions (after convert-tile-to-neuron): loops carry no values and on-chip buffers
are `neuron.alloc`ed inside the loop bodies that use them.

Output guarantee: every innermost `scf.for` whose body moves data with a DMA and runs at least `factor` times is
replaced by a loop whose step is `factor` times larger and whose body holds `factor` copies of the old one (the
induction variable of copy j is the new one plus j steps), followed by the remaining iterations as straight
copies; a loop of exactly `factor` iterations becomes straight-line code. Each copy allocates its own buffers,
so once the allocator keeps a loop body's buffers apart (`neuron-allocate-memory`), copy j + 1 loads into
memory that copy j's compute does not touch: the DMA for the next tile overlaps the compute of this one
(double buffering, for factor 2), and `neuron-insert-sync` orders each copy only after the copy that last used
the same buffers. IR grows by at most `factor` times the innermost bodies; results are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects import neuron


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _is_innermost(loop: scf.ForOp) -> bool:
    return not any(isinstance(op, scf.ForOp) for op in loop.body.walk() if op is not loop)


def _moves_data(loop: scf.ForOp) -> bool:
    return any(isinstance(op, neuron.DmaCopyOp) for op in loop.body.walk())


class _Unroller:
    def __init__(self, function: func.FuncOp, factor: int):
        self.function = function
        self.factor = factor
        self.constants: dict[int, SSAValue] = {}

    def constant(self, value: int) -> SSAValue:
        if value not in self.constants:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            op.result.name_hint = f"c{value}"
            entry = self.function.body.block
            first = entry.first_op
            if first is None:
                entry.add_op(op)
            else:
                entry.insert_op_before(op, first)
            self.constants[value] = op.result
        return self.constants[value]

    def copy_body(self, loop: scf.ForOp, induction: SSAValue, destination: InsertPoint) -> None:
        """Clone the loop body (without its yield) with `induction` in place of the loop's variable."""
        mapping: dict[SSAValue, SSAValue] = {loop.body.block.args[0]: induction}
        for op in loop.body.block.ops:
            if isinstance(op, scf.YieldOp):
                continue
            clone = op.clone(value_mapper=mapping)
            _insert(clone, destination)

    def unroll(self, loop: scf.ForOp) -> None:
        lower, upper, step = _constant(loop.lb), _constant(loop.ub), _constant(loop.step)
        if lower is None or upper is None or step is None or step <= 0:
            return  # dynamic bounds: leave the loop as it is
        trips = max(0, (upper - lower + step - 1) // step)
        if trips < self.factor:
            return
        full = trips // self.factor
        parent = loop.parent_block()
        assert parent is not None
        before = InsertPoint.before(loop)
        if full > 1:
            body = Block(arg_types=[IndexType()])
            new_upper = lower + full * self.factor * step
            new_loop = scf.ForOp(
                self.constant(lower), self.constant(new_upper), self.constant(self.factor * step), [], body
            )
            new_loop.location = loop.location
            _insert(new_loop, before)
            inside = InsertPoint.at_end(body)
            for copy in range(self.factor):
                if copy == 0:
                    induction: SSAValue = body.args[0]
                else:
                    offset = arith.AddiOp(body.args[0], self.constant(copy * step))
                    offset.location = loop.location
                    _insert(offset, inside)
                    induction = offset.result
                self.copy_body(loop, induction, inside)
            body.add_op(scf.YieldOp())
            done = full * self.factor
        else:
            done = 0
        for iteration in range(done, trips):
            self.copy_body(loop, self.constant(lower + iteration * step), before)
        loop.detach()
        loop.erase()


def _insert(op: Operation, point: InsertPoint) -> None:
    if point.insert_before is not None:
        point.block.insert_op_before(op, point.insert_before)
    else:
        point.block.add_op(op)


@dataclass(frozen=True)
class NeuronUnrollLoopsPass(ModulePass):
    name = "neuron-unroll-loops"

    factor: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.factor < 1:
            raise PassFailedException(f"neuron-unroll-loops: factor must be at least 1, got {self.factor}")
        if self.factor == 1:
            return
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            if function.is_declaration:
                continue
            unroller = _Unroller(function, self.factor)
            loops = [loop for loop in function.body.walk() if isinstance(loop, scf.ForOp)]
            for loop in loops:
                if loop.iter_args:
                    continue  # tile-level loops carry values: this pass runs after convert-tile-to-neuron
                if _is_innermost(loop) and _moves_data(loop):
                    unroller.unroll(loop)
