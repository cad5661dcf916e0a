"""neuron-unroll-loops: unroll the innermost loops that move data so consecutive iterations use different buffers.

Input contract: neuron-level functions (after convert-tile-to-neuron): loops carry no values and on-chip buffers
are `neuron.alloc`ed inside the loop bodies that use them.

Output guarantee: every `scf.for` with constant bounds whose body moves data with a DMA, no loop nested in it
does, and which runs at least twice is replaced by a loop whose step is `copies` times larger and whose body
holds `copies` copies of the old one (the induction variable of copy j is the new one plus j steps), followed by
the remaining iterations as straight copies; a loop of fewer than two full rounds becomes straight-line code.
Each copy allocates its own buffers, so once the allocator keeps a loop body's buffers apart
(`neuron-allocate-memory`), copy j + 1 loads into memory that copy j's compute does not touch: the DMA for the
next tile overlaps the compute of this one, and `neuron-insert-sync` orders each copy only after the copy that
last used the same buffers. IR grows by at most `copies` times those bodies; results are unchanged.

Loops nested in such a body only compute (a matmul's K loop over the chunks the body loaded): they are copied with
it. Unrolling only loops with no loop inside would leave a matmul's loop over output blocks rolled whenever each
block's K loop is a loop, and each block's loads would wait for the buffers the block before read: TensorE idled
at every block boundary (an fp8 [2048, 2048] x [2048, 8192] product with fp32 output: 694.1 -> 545.8 us).

Such a loop whose upper bound is computed at run time (a size bucket's program looping over the call's rows:
constant lower bound and step) gets two copies over its whole rounds, a loop up to
`lower + (upper - lower) // (2 * step) * 2 * step`, followed by the loop itself over the trip left (none or one),
so that it overlaps its DMAs as a constant loop does while the program's size stays independent of the call.

A loop bounded at run time that moves data and whose declared size ranges allow at most `SHORT_TRIPS` trips
(a bucket's loop over the call's batches, or over the row tiles of a 512-row bucket), innermost or not, becomes
straight-line code instead: one copy per trip it may run, copy j at the induction `lower + j * step`, as plain
code when the ranges guarantee that trip and otherwise inside a loop from `lower + j * step` to
`min(upper, lower + (j + 1) * step)`, which runs one trip or none. The copies share no buffer, so the scheduler
overlaps them as it overlaps a constant loop unrolled: a rolled loop over four batches, each one row tile, ran its
trips one after another where a program compiled for that size streams them two or more at a time. Loops nested
in a loop so expanded are expanded (or unrolled) first, so a batch loop of a nest over `[b, ceil(s / 128)]` tiles
gives every tile of the call a copy of its own, up to `SHORT_TRIPS` squared.

How many copies each loop gets (with `factor` unset; `factor=n` gives every loop n copies):

* A copy holds its buffers for its whole chain: the loads (DMA latency plus transfer), the compute on its
  tiles and the stores, one after another. With k copies in flight a trip therefore takes about
  max(busiest, chain / k), where `busiest` is the most time any one resource needs per trip: the DMA engines
  for the trip's bytes, or one compute engine for its instructions (both from `runtime.cost_model`).
* Two copies (double buffering) is the floor. A loop whose chain is long against its busiest resource is
  latency-bound (with the ~2 us fixed cost of each DMA, short bodies are): it gets the fewest copies that
  bring chain / k within `_SLACK` of `busiest`, at most `max_copies`.
* More than two copies only when they fit: the copies' SBUF and PSUM buffers (a matmul accumulator counts a
  whole PSUM bank) plus the buffers live beside the loop (allocated outside it and used in or after it, or in
  the body of an enclosing loop) must fit the target's capacity per partition, so an extra copy never makes
  the allocator fall back to tight loop bodies or take memory another loop nest needed.
* More than two copies only when they divide the trip count (and make at least two rounds): then no leftover
  copies follow the loop, whose number would vary with the tile count, and the program's size stays a function
  of its loop nests alone (docs/architecture.md, "The size rule").
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import memory_of
from neuron_mlir.lowering.ir_queries import defined_functions, index_interval, integer_constant, size_argument_ranges
from neuron_mlir.runtime.cost_model import OperandShape, compute_ns, dma_cost, indirect_dma_cost
from neuron_mlir.runtime.hardware import Engine, Memory, Target

# A trip within this factor of its busiest resource counts as throughput-bound: one more copy would buy less than
# the SBUF it takes from the tile sizes of later loops.
_SLACK = 1.2

# The most trips a loop bounded at run time may have to be emitted as one guarded copy per trip: four covers the
# call's batches of a bucket up to 4 and the 128-row tiles of a 512-row bucket; a nest of two such loops is 16
# copies of its body.
SHORT_TRIPS = 4


def _moves_data(loop: scf.ForOp) -> bool:
    return any(isinstance(op, neuron.DmaCopyOp | neuron.DmaTransposeOp) for op in loop.body.walk())


def _innermost_mover(loop: scf.ForOp) -> bool:
    """Whether no loop nested in `loop` moves data (loops that only compute may be nested)."""
    return not any(isinstance(op, scf.ForOp) and _moves_data(op) for op in loop.body.walk())


def _weighted_instructions(block: Block, weight: int = 1) -> Iterator[tuple[neuron.InstructionOp, int]]:
    """The instructions of `block` and of the loops nested in it, each with how often one run of the block runs it
    (a nested loop's instructions once per trip of it; a loop with bounds known only at run time counts once)."""
    for op in block.ops:
        if isinstance(op, neuron.InstructionOp):
            yield op, weight
        for region in op.regions:
            trips = _trips(op) if isinstance(op, scf.ForOp) else 1
            for inner in region.blocks:
                yield from _weighted_instructions(inner, weight * (trips or 1))


def _bounded_at_run_time(loop: scf.ForOp) -> bool:
    """Whether only the upper bound of `loop` is computed at run time (its lower bound and step constants)."""
    step = integer_constant(loop.step)
    return integer_constant(loop.lb) is not None and step is not None and step > 0 and integer_constant(loop.ub) is None


def _trip_range(loop: scf.ForOp, sizes: dict[SSAValue, tuple[int, int]]) -> tuple[int, int] | None:
    """The least and most trips of `loop` (constant lower bound and step) over the size arguments' ranges."""
    lower, step = integer_constant(loop.lb), integer_constant(loop.step)
    upper = index_interval(loop.ub, sizes)
    if lower is None or step is None or step <= 0 or upper is None:
        return None
    return max(0, -((lower - upper[0]) // step)), max(0, -((lower - upper[1]) // step))


def _trips(loop: scf.ForOp) -> int | None:
    lower, upper, step = integer_constant(loop.lb), integer_constant(loop.ub), integer_constant(loop.step)
    if lower is None or upper is None or step is None or step <= 0:
        return None
    return max(0, (upper - lower + step - 1) // step)


# --- how long one trip keeps its buffers, and how busy it keeps the engines --------------------------------------


@dataclass(frozen=True)
class TripCost:
    """The cost model's view of one trip of a loop body (nanoseconds)."""

    chain_ns: float  # loads, compute and stores one after another: how long a copy holds its buffers
    busiest_ns: float  # the most any one resource (the DMA engines, one compute engine) is busy per trip

    def copies_wanted(self, most: int) -> int:
        """The fewest copies (2 to `most`) that bring chain / copies within `_SLACK` of the busiest resource."""
        if self.busiest_ns <= 0.0:
            return most
        return max(2, min(most, math.ceil(self.chain_ns / (self.busiest_ns * _SLACK))))


def _operand_shape(op: neuron.InstructionOp, role: str) -> OperandShape:
    entry = op.access(role)
    assert entry is not None
    buffer, pattern, _ = entry
    buffer_type = buffer.type
    assert isinstance(buffer_type, MemRefType)
    return OperandShape(
        memory_of(buffer_type),
        neuron.element_type_name(buffer_type.element_type),
        pattern.partitions.data,
        tuple(num for _, num in pattern.dims),
        tuple(step for step, _ in pattern.dims),
    )


def trip_cost(loop: scf.ForOp, target: Target) -> TripCost:
    """Estimate one trip of `loop`'s body with the simulator's cost rules (`runtime.cost_model`)."""
    engine_ns: dict[Engine, float] = {}
    load_ns = store_ns = compute_total = dma_busy = 0.0
    for op, runs in _weighted_instructions(loop.body.block):
        shapes = {role: _operand_shape(op, role) for role in op.present_roles()}
        attrs = op.attribute_values()
        engine = op.engine_kind
        if engine is Engine.DMA:
            if attrs.get("indirect"):
                cost = indirect_dma_cost(shapes, attrs, target)
            else:
                cost = dma_cost(shapes["src"], shapes["dst"], target)
            # all transfers of a trip share the core's DMA engines and HBM bandwidth
            rate = target.dma_aggregate_bytes_per_ns * cost.efficiency
            if cost.hbm_bytes:
                rate = min(rate, target.hbm_bandwidth_gbps * cost.bytes / cost.hbm_bytes)
            dma_busy += runs * cost.bytes / rate
            if shapes["dst"].memory is Memory.HBM:
                store_ns = max(store_ns, cost.alone_ns(target))
            else:
                load_ns = max(load_ns, cost.alone_ns(target))
            continue
        duration = compute_ns(op.OPCODE, engine, shapes, attrs, target)
        engine_ns[engine] = engine_ns.get(engine, 0.0) + runs * duration
        # each step of a trip's chain reads what the one before wrote
        compute_total += runs * (duration + target.dependent_op_penalty_cycles / target.clock_ghz[engine])
    busiest = max([dma_busy, *engine_ns.values()])
    return TripCost(load_ns + compute_total + store_ns, busiest)


# --- whether the copies' buffers fit ----------------------------------------------------------------------------


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _accumulates(alloc: neuron.AllocOp) -> bool:
    return any(
        isinstance(use.operation, neuron.MatmulOp)
        and use.operation.dst is alloc.buffer
        and not use.operation.transposes
        for use in alloc.buffer.uses
    )


def placed_bytes(alloc: neuron.AllocOp, target: Target) -> int:
    """Bytes per partition the allocator places for `alloc` (an accumulation group takes a PSUM bank)."""
    size = _align(alloc.row_bytes(), target.on_chip_alignment_bytes)
    if alloc.memory is Memory.PSUM and _accumulates(alloc):
        size = _align(size, target.psum_bank_bytes)
    return size


def _used_from(alloc: neuron.AllocOp, block: Block, before: set[Operation]) -> bool:
    """Whether `alloc`'s buffer is used in one of `block`'s ops that is not in `before` (the ops before an
    anchor)."""
    for use in alloc.buffer.uses:
        user: Operation | None = use.operation
        while user is not None and user.parent_block() is not block:
            user = user.parent_op()
        if user is not None and user not in before:
            return True
    return False


def live_beside(loop: scf.ForOp, memory: Memory, target: Target) -> int:
    """Bytes per partition of `memory` that stay allocated while `loop` runs, outside its body."""
    total = 0
    anchor: Operation = loop
    while (block := anchor.parent_block()) is not None:
        owner = block.parent_op()
        in_loop_body = isinstance(owner, scf.ForOp)  # the allocator keeps a loop body's buffers for all of it
        # outside a loop body, an alloc before the anchor counts when its buffer is used at the anchor or after
        # it: the ops before the anchor are collected on the way to it, once an alloc needs them (a function's
        # top-level block holds thousands of ops, and few allocs of PSUM)
        before: set[Operation] = set()
        allocs: list[neuron.AllocOp] = []
        for op in block.ops:
            if in_loop_body:
                if isinstance(op, neuron.AllocOp) and op.memory is memory:
                    total += placed_bytes(op, target)
                continue
            if op is anchor:
                break
            if isinstance(op, neuron.AllocOp) and op.memory is memory:
                allocs.append(op)
            if allocs:
                before.add(op)
        for alloc in allocs:
            if _used_from(alloc, block, before):
                total += placed_bytes(alloc, target)
        if owner is None or isinstance(owner, func.FuncOp):
            break
        anchor = owner
    return total


def copies_fitting(loop: scf.ForOp, copies: int, target: Target) -> int:
    """The most copies of `loop`'s body, from `copies` down to 2, whose buffers fit beside those live around it."""
    capacities = {Memory.SBUF: target.sbuf_bytes_per_partition, Memory.PSUM: target.psum_bytes_per_partition}
    body = {memory: 0 for memory in capacities}
    for op in loop.body.walk():
        if isinstance(op, neuron.AllocOp) and op.memory in body:
            body[op.memory] += placed_bytes(op, target)
    beside = {memory: live_beside(loop, memory, target) for memory in capacities}
    while copies > 2:
        if all(beside[memory] + copies * body[memory] <= capacities[memory] for memory in capacities):
            break
        copies -= 1
    return copies


def choose_copies(loop: scf.ForOp, trips: int, target: Target, most: int) -> int:
    """How many copies of `loop`'s body to keep in flight (the rules in the module docstring)."""
    if most <= 2 or trips < 6:  # three copies need two full rounds
        return 2

    def dividing(copies: int) -> int:
        while copies > 2 and (trips % copies or trips < 2 * copies):
            copies -= 1
        return copies

    # the cheap tests first: whether the copies fit looks at every buffer live around the loop
    copies = dividing(trip_cost(loop, target).copies_wanted(most))
    return copies if copies <= 2 else dividing(copies_fitting(loop, copies, target))


class _Unroller:
    def __init__(self, function: func.FuncOp):
        self.function = function
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

    def fill_rounds(self, loop: scf.ForOp, body: Block, copies: int, step: int) -> None:
        """Fill `body`, the body of a loop stepping `copies` trips of `loop` at a time, with `copies` copies of
        `loop`'s body at the round's variable plus 0, step, 2 * step, ..., and its yield."""
        inside = InsertPoint.at_end(body)
        for copy in range(copies):
            induction: SSAValue = body.args[0]
            if copy:
                offset = arith.AddiOp(body.args[0], self.constant(copy * step))
                offset.location = loop.location
                _insert(offset, inside)
                induction = offset.result
            self.copy_body(loop, induction, inside)
        body.add_op(scf.YieldOp())

    def unroll(self, loop: scf.ForOp, copies: int) -> None:
        """Replace `loop` (constant bounds, at least `copies` trips) by one whose body holds `copies` copies."""
        lower, step, trips = integer_constant(loop.lb), integer_constant(loop.step), _trips(loop)
        assert lower is not None
        assert step is not None
        assert trips is not None
        full = trips // copies
        before = InsertPoint.before(loop)
        if full > 1:
            body = Block(arg_types=[IndexType()])
            new_upper = lower + full * copies * step
            new_loop = scf.ForOp(self.constant(lower), self.constant(new_upper), self.constant(copies * step), [], body)
            new_loop.location = loop.location
            _insert(new_loop, before)
            self.fill_rounds(loop, body, copies, step)
            done = full * copies
        else:
            done = 0
        for iteration in range(done, trips):
            self.copy_body(loop, self.constant(lower + iteration * step), before)
        loop.detach()
        loop.erase()

    def unroll_bounded(self, loop: scf.ForOp, copies: int) -> None:
        """Unroll `loop` (constant lower bound and step, an upper bound computed at run time: a size argument's
        trips) into a loop of `copies` copies over the whole rounds, `(upper - lower) // (copies * step)` of
        them, followed by `loop` itself over the trips left (fewer than `copies`, still rolled). The program
        keeps its size whatever the call's trip count."""
        lower, step = integer_constant(loop.lb), integer_constant(loop.step)
        assert lower is not None
        assert step is not None
        before = InsertPoint.before(loop)
        span: SSAValue = loop.ub
        index_ops: list[Operation] = []
        if lower:
            difference = arith.SubiOp(loop.ub, self.constant(lower))
            index_ops.append(difference)
            span = difference.result
        rounds = arith.FloorDivSIOp(span, self.constant(copies * step))
        covered = arith.MuliOp(rounds.result, self.constant(copies * step))
        index_ops += [rounds, covered]
        end: SSAValue = covered.result
        if lower:
            shifted = arith.AddiOp(covered.result, self.constant(lower))
            index_ops.append(shifted)
            end = shifted.result
        for op in index_ops:
            op.location = loop.location
            _insert(op, before)
        body = Block(arg_types=[IndexType()])
        main = scf.ForOp(self.constant(lower), end, self.constant(copies * step), [], body)
        main.location = loop.location
        _insert(main, before)
        self.fill_rounds(loop, body, copies, step)
        loop.operands[0] = end  # the rest: from where the rounds end

    def expand_short(self, loop: scf.ForOp, trips: tuple[int, int]) -> None:
        """Replace `loop` (constant lower bound and step, at most `trips[1]` trips of which `trips[0]` are sure)
        by one copy of its body per trip: the sure ones as plain code, each other one in a loop of one trip or
        none (from its induction to `min(upper, induction + step)`). Each copy's induction is a constant."""
        lower, step = integer_constant(loop.lb), integer_constant(loop.step)
        assert lower is not None
        assert step is not None
        before = InsertPoint.before(loop)
        for trip in range(trips[1]):
            induction = self.constant(lower + trip * step)
            if trip < trips[0]:
                self.copy_body(loop, induction, before)
                continue
            end = arith.MinSIOp(loop.ub, self.constant(lower + (trip + 1) * step))
            end.location = loop.location
            _insert(end, before)
            body = Block(arg_types=[IndexType()])
            guard = scf.ForOp(induction, end.result, self.constant(step), [], body)
            guard.location = loop.location
            _insert(guard, before)
            self.copy_body(loop, induction, InsertPoint.at_end(body))
            body.add_op(scf.YieldOp())
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

    factor: int | None = None  # copies for every loop; unset: chosen per loop, from 2 to `max_copies`
    max_copies: int = 3

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.factor is not None and self.factor < 1:
            raise PassFailedException(f"neuron-unroll-loops: factor must be at least 1, got {self.factor}")
        if self.max_copies < 2:
            raise PassFailedException(f"neuron-unroll-loops: max-copies must be at least 2, got {self.max_copies}")
        if self.factor == 1:
            return
        target = neuron.target_of(op)
        for function in defined_functions(op):
            unroller = _Unroller(function)
            sizes = size_argument_ranges(function)
            loops = [loop for loop in function.body.walk() if isinstance(loop, scf.ForOp)]
            outer: list[scf.ForOp] = []
            for loop in loops:
                if loop.iter_args:
                    continue  # tile-level loops carry values: this pass runs after convert-tile-to-neuron
                if not _moves_data(loop):
                    continue
                if not _innermost_mover(loop):
                    outer.append(loop)
                    continue
                trips = _trips(loop)
                if trips is None and self.factor is None and _bounded_at_run_time(loop):
                    short = _trip_range(loop, sizes)
                    if short is not None and short[1] <= SHORT_TRIPS:
                        unroller.expand_short(loop, short)
                    else:
                        # a size bucket's loop over the call's rows: two copies (their count is not known here)
                        unroller.unroll_bounded(loop, 2)
                    continue
                if trips is None or trips < 2:
                    continue  # dynamic bounds, or nothing to overlap: leave the loop as it is
                if self.factor is not None:
                    if trips >= self.factor:
                        unroller.unroll(loop, self.factor)
                    continue
                unroller.unroll(loop, choose_copies(loop, trips, target, self.max_copies))
            # then the short loops around them, the inner ones first, so that each copies expanded bodies
            for loop in reversed(outer):
                if self.factor is None and _bounded_at_run_time(loop):
                    short = _trip_range(loop, sizes)
                    if short is not None and short[1] <= SHORT_TRIPS:
                        unroller.expand_short(loop, short)
