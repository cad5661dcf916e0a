"""tile-unroll-streaming-loops: give streaming loops deeper buffering by unrolling them at the tile level.

Input contract: tile-level functions (after convert-torch-to-tile and tile-fuse-loops).

Output guarantee: the same results. An innermost `scf.for` that streams tiles (it loads and stores, and holds
nothing but loads, stores, elementwise compute and index arithmetic: no reductions, whose row tiles grow with
the row instead of having the fixed elementwise tile size), has constant bounds, carries no values and runs at
least `2 * factor` times becomes a loop of step `factor` times larger whose body holds
`factor` copies of the old body (copy j at the induction variable plus j steps), followed by the leftover
iterations as straight copies. Only loops whose tiles, times `factor` and times the two copies neuron-unroll-loops
makes at least, fit in half a partition of SBUF are unrolled.

Why: each tile load waits for the compute of the tile two iterations back to free its buffer (neuron-unroll-loops
double-buffers, and gives a latency-bound loop a third copy only when it fits), so a body's period is about (DMA
latency + the compute chain reading the loaded tile) / 2. With the ~2 us fixed cost of a DMA and an elementwise
chain of a few microseconds that is well above the time the tile's bytes take at HBM bandwidth; two copies per
body here and two or three per copy there put four to six tiles in flight.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.neuron import target_of
from neuron_mlir.lowering.ir_queries import defined_functions, integer_constant
from neuron_mlir.lowering.tile_fuse_loops import body_bytes, streams_tiles

# The copies neuron-unroll-loops always makes of an innermost streaming loop (double buffering). It makes a third
# only when that copy's buffers fit beside everything live (its own check), so this pass budgets for the two.
NEURON_UNROLL_MIN_COPIES = 2


class _Unroller:
    def __init__(self, function: func.FuncOp, factor: int, budget: int):
        self.function = function
        self.factor = factor
        self.budget = budget
        self.constants: dict[int, SSAValue] = {}
        for op in function.body.block.ops:  # reuse the index constants the function has
            value = integer_constant(op.results[0]) if isinstance(op, arith.ConstantOp) else None
            if value is not None and isinstance(op.results[0].type, IndexType):
                self.constants.setdefault(value, op.results[0])

    def constant(self, value: int, location: object) -> SSAValue:
        if value not in self.constants:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            op.location = location  # type: ignore[assignment]
            op.result.name_hint = f"c{value}"
            entry = self.function.body.block
            if entry.first_op is None:
                entry.add_op(op)
            else:
                entry.insert_op_before(op, entry.first_op)
            self.constants[value] = op.result
        return self.constants[value]

    def wanted(self, loop: scf.ForOp) -> bool:
        if loop.iter_args or any(isinstance(op, scf.ForOp) for op in loop.body.block.walk()):
            return False
        lower, upper, step = (integer_constant(v) for v in (loop.lb, loop.ub, loop.step))
        if lower is None or upper is None or step is None:
            return False
        if step <= 0 or (upper - lower + step - 1) // step < 2 * self.factor:
            return False
        if not streams_tiles(loop) or any(isinstance(op, tile.ReduceOp) for op in loop.body.walk()):
            return False
        return body_bytes(loop.body.block) * self.factor * NEURON_UNROLL_MIN_COPIES <= self.budget

    def copy_body(self, loop: scf.ForOp, induction: SSAValue, block: Block, before: Operation | None) -> None:
        mapping: dict[SSAValue, SSAValue] = {loop.body.block.args[0]: induction}
        for op in loop.body.block.ops:
            if isinstance(op, scf.YieldOp):
                continue
            clone = op.clone(value_mapper=mapping)
            if before is None:
                block.add_op(clone)
            else:
                block.insert_op_before(clone, before)

    def unroll(self, loop: scf.ForOp) -> None:
        lower, upper, step = (integer_constant(v) for v in (loop.lb, loop.ub, loop.step))
        assert lower is not None
        assert upper is not None
        assert step is not None
        trips = (upper - lower + step - 1) // step
        full = trips // self.factor
        parent = loop.parent_block()
        assert parent is not None
        body = Block(arg_types=[IndexType()])
        new_loop = scf.ForOp(
            self.constant(lower, loop.location),
            self.constant(lower + full * self.factor * step, loop.location),
            self.constant(self.factor * step, loop.location),
            [],
            body,
        )
        new_loop.location = loop.location
        parent.insert_op_before(new_loop, loop)
        for copy in range(self.factor):
            induction: SSAValue = body.args[0]
            if copy:
                offset = arith.AddiOp(body.args[0], self.constant(copy * step, loop.location))
                offset.location = loop.location
                body.add_op(offset)
                induction = offset.result
            self.copy_body(loop, induction, body, None)
        body.add_op(scf.YieldOp())
        for iteration in range(full * self.factor, trips):
            self.copy_body(loop, self.constant(lower + iteration * step, loop.location), parent, loop)
        loop.detach()
        loop.erase()


@dataclass(frozen=True)
class TileUnrollStreamingLoopsPass(ModulePass):
    name = "tile-unroll-streaming-loops"

    factor: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.factor < 1:
            raise PassFailedException(f"tile-unroll-streaming-loops: factor must be at least 1, got {self.factor}")
        if self.factor == 1:
            return
        budget = target_of(op).sbuf_bytes_per_partition // 2
        for function in defined_functions(op):
            unroller = _Unroller(function, self.factor, budget)
            for loop in [loop for loop in function.body.walk() if isinstance(loop, scf.ForOp)]:
                if unroller.wanted(loop):
                    unroller.unroll(loop)
