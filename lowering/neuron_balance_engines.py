"""neuron-balance-engines: spread the instructions any of several engines can run so that no engine dominates.

Input contract: neuron-level functions (after convert-tile-to-neuron), before synchronisation: every compute
instruction has the engine the converter chose for it by its kind (ScalarE activations, VectorE arithmetic,
GpSimdE exact integer work).

Output guarantee: the same instructions computing the same values; within each block (a loop body or the
function body), float `tensor_scalar`, `tensor_copy`, `tensor_tensor`, `select` and `memset` instructions that
the converter put on VectorE may have moved to GpSimdE (when none of their operands is in PSUM, which GpSimdE
cannot reach) or, for `tensor_scalar` and `tensor_copy` with plain arithmetic, to ScalarE. Assignment is greedy
over the block by the cost model (`runtime.cost_model`): the most expensive movable instruction first, each to
the engine that would then finish the block's work earliest, VectorE on ties. Copies of one instruction (same
opcode, properties, buffer types and location, as unrolling makes them) go to one engine together. Engines run
in parallel, so a body that needed the sum of its instructions on VectorE now needs about the largest engine's
share. Integer work stays where it is (GpSimdE's lanes are exact; VectorE rounds through fp32), and so does `power`.

Balanced totals are not a short block when its work is chains: with every copy of a step on one engine, each step
of the independent chains of a block's tiles (an epilogue's dozen elementwise passes over four tiles) waits for
the step before on another engine, and the engines take turns. So a second assignment is made, instruction by
instruction in program order, each movable one to the engine that would finish it soonest given the engines'
queues and the buffers' last reads and writes (the cost model's times and its dependency penalty), and the block
is simulated under both: engines as in-order queues, DMAs side by side, nested loop nests whole, a loop body twice
(the next trip reuses the same buffers). The soonest-finish assignment replaces the by-load one when its span is
shorter by more than 3%. Where TensorE sets the pace, evacuations (below) keep their by-load halves in it.

Neither assignment looks ahead: the by-load one ignores the chains, the soonest-finish one places each instruction
before it knows what comes after. So the block is then improved an instruction at a time: in program order, each
movable instruction tries its other engines, the rest of the block (and a loop body's second trip) simulated again
for each, and keeps the one with the shortest span; the result replaces the assignment when its span is shorter by
more than 3% (the same margin). ResNet-50's 3 x 3 / 2 max pool, whose blocks are chains of compares, selects and
adds that VectorE and GpSimdE share: training step 96.2 -> 91.5 us, inference 22.1 -> 20.4; the RMSNorm backward
339.0 -> 312.4. Without the margin, moves the estimate judged slightly better were worse in the simulator
(cross-entropy 1492.6 -> 1684.7 us, softmax 432.8 -> 466.3); with it one still is (the GPT-2 block's training step
565.4 -> 567.2). The work is the block's movable instructions times its steps and trips, so larger blocks keep
their assignment (`_MOVES_BUDGET`).

The one change of order: a PSUM evacuation whose tile is first read further down its block moves down to just
before that reader when the simulated span is shorter by more than 1% that way. Early in its engine's queue it
holds back the independent work behind it, and in a loop body it waits for the previous trip's last reader of
the same SBUF tile: the next trip's chain would start only when this one's ended. A moved evacuation keeps its
PSUM tile longer, so evacuations move only as far as the block's PSUM, as the allocator places it, still fits
the target's (`_within_psum`): a function of more live tiles than PSUM holds fails to allocate.

Before the assignment, such a pair whose `scalar_tensor_tensor` (below) costs VectorE less than the two cost on
their cheapest engines together becomes that one instruction, so that the assignment weighs the one pass it is:
a bf16 (x - s) * y streams at one element per cycle [nki-isa-2.26], where costed apart the pair looked like a
ScalarE and a GpSimdE pass and the merge was never chosen (a layer norm backward's (x - mean) * grad_out).
After the assignment, a `tensor_tensor` left on VectorE whose input is an fp32 tile that a one-step float
`tensor_scalar` (on any engine) alone wrote becomes one `scalar_tensor_tensor` computing both: VectorE streams
the same 2N (or N) instead of 2N, the tensor_scalar's engine is freed, and the chain loses a step. The engine
keeps the intermediate in fp32, what the fp32 tile held, so the results are the same bits. A `tensor_copy` that
alone then moves the result into a window of another buffer is folded in as neuron-fuse-instructions does.
Pairs the assignment spread over other engines stay apart: there they can cost less than the one VectorE pass.

PSUM evacuations (a `tensor_copy` of a PSUM tile into an SBUF buffer of its own: how the tile level hands a
matmul's accumulators over, one engine-neutral copy each) depend on where the function's time goes. When TensorE
is the function's busiest engine (by the cost model, every instruction counted once per trip of its loops), a
bank released late stalls the engine that sets the pace: a block's evacuations of one instruction are then
placed as two interleaved halves (first, third, ... and second, fourth, ...), the half holding the last one
first, so that they split between VectorE and ScalarE by their costs and two banks drain at once, the last
(ready last) on the engine that finishes it soonest. Otherwise the engines' throughput sets the pace and they
move together like any other copies. Copies into a window of a buffer that other instructions write (inserts
into a panel) keep the engine the converter gave that buffer, so that they need no waits on each other.
"""

from __future__ import annotations

import bisect
import math
from copy import copy as shallow_copy
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, IntegerType, MemRefType, ModuleOp, StringAttr, f32
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import memory_of
from neuron_mlir.ir.dialects.neuron import EngineAttr, InstructionOp, element_type_name
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.lowering.neuron_fuse_instructions import (
    ProgramOrder,
    forward_into_copy_reader,
    fuse_scalar_tensor_tensor,
)
from neuron_mlir.lowering.neuron_unroll_loops import live_beside, placed_bytes
from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.hardware import ENGINE_READS, ENGINE_WRITES, Engine, Memory, Target

_MOVABLE: dict[str, tuple[Engine, ...]] = {
    "tensor_scalar": (Engine.GPSIMD, Engine.SCALAR),
    "tensor_copy": (Engine.GPSIMD, Engine.SCALAR),
    "tensor_tensor": (Engine.GPSIMD,),
    "select": (Engine.GPSIMD,),
    "memset": (Engine.GPSIMD,),
}
# ALU operators ScalarE's tensor_scalar is given here: plain fp32 arithmetic
_SCALAR_ENGINE_OPS = frozenset({"add", "subtract", "multiply", "max", "min"})
_STAY = frozenset({"power"})
# The soonest-finish assignment replaces the by-load one only when it shortens the block's simulated span by more
# than this: the estimate ignores DMA queues and contention, so near-ties keep the steadier by-load placement.
_BETTER = 0.97
# A block is improved instruction by instruction (`_move_one_by_one`) when its movable instructions times its steps
# and simulated trips are at most this: each move is judged by simulating the rest of the block again, so the work
# grows as that product (a block of 113 movable instructions and 146 steps, the max pool's backward: about 0.2 s).
_MOVES_BUDGET = 20_000
# An evacuation moves down to its tile's first reader only when that shortens the simulated span by more than this.
_SINK_BETTER = 0.99


def _shapes(op: InstructionOp) -> dict[str, cost_model.OperandShape] | None:
    shapes = {}
    for role in op.present_roles():
        access = op.access(role)
        assert access is not None
        buffer, pattern, _ = access
        memref_type = buffer.type
        assert isinstance(memref_type, MemRefType)
        shapes[role] = cost_model.OperandShape(
            memory_of(memref_type),
            element_type_name(memref_type.element_type),
            pattern.partitions.data if pattern.is_on_chip else 0,
            tuple(num for _, num in pattern.dims),
            tuple(step for step, _ in pattern.dims),
        )
    return shapes


def _attrs(op: InstructionOp) -> dict[str, object]:
    attrs: dict[str, object] = {}
    for name, attr in op.properties.items():
        if isinstance(attr, StringAttr):
            attrs[name] = attr.data
    return attrs


def cost_ns(
    op: InstructionOp,
    engine: Engine,
    target: Target,
    shapes: dict[str, cost_model.OperandShape] | None = None,
) -> float:
    """The cost model's time for `op` on `engine` (`shapes`: `op`'s operand shapes, when known already)."""
    if shapes is None:
        shapes = _shapes(op)
    assert shapes is not None
    return cost_model.compute_ns(op.spec().name, engine, shapes, _attrs(op), target)


class InstructionCosts:
    """The cost model's times for one block's assignment, each computed once: the assignment asks for the same
    instruction's time on the same engine many times (by load, by finish, the spans of both), and reading an
    instruction's access patterns costs more than the model itself. Made for a stretch of the pass in which no
    instruction's operands change (engines may)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._compute: dict[tuple[InstructionOp, Engine], float] = {}
        self._dma: dict[InstructionOp, float] = {}
        self._shapes: dict[InstructionOp, dict[str, cost_model.OperandShape] | None] = {}

    def shapes(self, op: InstructionOp) -> dict[str, cost_model.OperandShape]:
        """`op`'s operand shapes, as the cost model reads them."""
        if op not in self._shapes:
            self._shapes[op] = _shapes(op)
        shapes = self._shapes[op]
        assert shapes is not None
        return shapes

    def ns(self, op: InstructionOp, engine: Engine) -> float:
        key = (op, engine)
        known = self._compute.get(key)
        if known is None:
            known = self._compute[key] = cost_ns(op, engine, self.target, self.shapes(op))
        return known

    def dma_ns(self, op: InstructionOp) -> float:
        known = self._dma.get(op)
        if known is None:
            known = self._dma[op] = _dma_ns(op, self.target)
        return known


def _alternatives(op: InstructionOp) -> tuple[Engine, ...]:
    """Engines besides VectorE that may run `op` with the same results."""
    opcode = op.spec().name
    if opcode not in _MOVABLE or op.engine_kind is not Engine.VECTOR:
        return ()
    buffers = [getattr(op, role) for role in op.present_roles()]
    types = [buffer.type for buffer in buffers]
    if any(not isinstance(t, MemRefType) or isinstance(t.element_type, IntegerType) for t in types):
        return ()
    operators = {
        attr.data for name, attr in op.properties.items() if name.startswith("op") and isinstance(attr, StringAttr)
    }
    if operators & _STAY:
        return ()
    spec = op.spec()
    written = set(spec.writes + spec.optional_writes)
    chosen = []
    for engine in _MOVABLE[opcode]:
        if engine is Engine.SCALAR and not operators <= _SCALAR_ENGINE_OPS:
            continue
        reachable = all(
            memory_of(getattr(op, role).type) in (ENGINE_WRITES if role in written else ENGINE_READS)[engine]
            for role in op.present_roles()
        )
        narrowed = all(engine in spec.role_engines.get(role, spec.engines) for role in op.present_roles())
        if reachable and narrowed and spec.engines >= {engine}:
            chosen.append(engine)
    return tuple(chosen)


def _signature(op: InstructionOp) -> tuple[str, tuple[tuple[str, Attribute], ...], tuple[Attribute, ...], Attribute]:
    """What copies of one instruction made by unrolling share: opcode, properties, buffer types, location (the
    attributes themselves, which compare by value: printing them cost more than the rest of the pass)."""
    properties = tuple(sorted(op.properties.items(), key=_name_of))
    types = tuple(getattr(op, role).type for role in op.present_roles())
    return (op.name, properties, types, op.location)


def _name_of(item: tuple[str, Attribute]) -> str:
    return item[0]


def _writes(op: Operation, buffer: SSAValue) -> bool:
    if not isinstance(op, InstructionOp):
        return False
    written = set(op.spec().writes + op.spec().optional_writes)
    return any(getattr(op, role) is buffer for role in op.present_roles() if role in written)


def _psum_to_sbuf(op: neuron.TensorCopyOp | neuron.TensorScalarOp) -> bool:
    source, destination = op.src.type, op.dst.type
    assert isinstance(source, MemRefType)
    assert isinstance(destination, MemRefType)
    return memory_of(source) is Memory.PSUM and memory_of(destination) is Memory.SBUF


def _is_psum_evacuation(op: InstructionOp) -> bool:
    """A copy of a PSUM tile into an SBUF buffer of its own, at a static place: what frees an accumulator's bank
    for the next matmuls (an insert into a panel writes a window of a buffer that other copies write too)."""
    if not isinstance(op, neuron.TensorCopyOp) or op.dst_offset is not None or not _psum_to_sbuf(op):
        return False
    return not any(use.operation is not op and _writes(use.operation, op.dst) for use in op.dst.uses)


def _drains_psum(op: InstructionOp, target: Target) -> bool:
    """A PSUM evacuation, or a `tensor_scalar` reading a whole PSUM bank of fp32 sums (a matmul's output block, not
    a transpose's 16-bit tile) into an SBUF buffer of its own that only DMAs read (an evacuation with the block's
    scale steps folded in by neuron-fuse-instructions): either releases an accumulator's bank, so alternate ones
    drain side by side."""
    if _is_psum_evacuation(op):
        return True
    if not isinstance(op, neuron.TensorScalarOp) or op.dst_offset is not None or op.src_offset is not None:
        return False
    if not _psum_to_sbuf(op):
        return False
    source = op.src.type
    assert isinstance(source, MemRefType)
    # a whole bank of fp32 sums, a matmul's output block: attention's passes over its scores ([128, 256]) and its
    # normalised output ([128, 64] of a [128, 65] tile) are steps of chains whose copies keep moving together
    # (split, they made a Llama layer's forward 20 us slower)
    if source.element_type != f32 or math.prod(source.get_shape()[1:]) * 4 < target.psum_bank_bytes:
        return False
    return all(isinstance(use.operation, neuron.DmaCopyOp) for use in op.dst.uses if use.operation is not op)


def _balance(block: Block, costs: InstructionCosts, spread_evacuations: bool) -> None:
    load = {Engine.VECTOR: 0.0, Engine.SCALAR: 0.0, Engine.GPSIMD: 0.0}
    # Copies of one instruction (tile-level unrolling) move together: engines are in-order queues, so copies
    # spread over different engines would make each copy's chain wait behind the previous copy's. PSUM
    # evacuations may be the exception (module docstring): each ends its own chain (matmuls into a bank, then
    # the copy), so alternate ones can drain side by side.
    classes: dict[object, list[InstructionOp]] = {}
    evacuations: dict[object, int] = {}
    for op in block.ops:
        if not isinstance(op, InstructionOp) or op.engine_kind not in load:
            continue
        if _alternatives(op):
            key: object = _signature(op)
            if spread_evacuations and _drains_psum(op, costs.target):
                count = evacuations[key] = evacuations.get(key, 0) + 1
                key = (key, count % 2)
            classes.setdefault(key, []).append(op)
        else:
            load[op.engine_kind] += costs.ns(op, op.engine_kind)
    movable = []
    for position, members in enumerate(classes.values()):
        on = {engine: len(members) * costs.ns(members[0], engine) for engine in _alternatives(members[0])}
        on[Engine.VECTOR] = len(members) * costs.ns(members[0], Engine.VECTOR)
        # Among equal costs, evacuation halves are placed from the block's last to its first: the last
        # accumulator is ready last and the block ends when its copy does, so its half gets the engine that
        # finishes it soonest, and the other half, ready sooner, takes what is left.
        order = -position if spread_evacuations and _drains_psum(members[0], costs.target) else position
        movable.append((on[Engine.VECTOR], order, members, on))
    movable.sort(key=lambda item: (-item[0], item[1]))
    for own, _, members, on in movable:
        best, finish = Engine.VECTOR, load[Engine.VECTOR] + own
        for engine, cost in on.items():
            if load[engine] + cost < finish:
                best, finish = engine, load[engine] + cost
        load[best] = finish
        for op in members:
            if best is not op.engine_kind:
                op.properties["engine"] = EngineAttr(best)


# --- a block's span under an assignment, simulated ------------------------------------------------------------

_QUEUED = (Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)


@dataclass
class _Step:
    """One thing the block issues: an instruction, or a nested loop nest taken whole."""

    op: Operation
    reads: tuple[SSAValue, ...]
    writes: tuple[SSAValue, ...]
    busy: dict[Engine, float]  # a nested op: each engine's time over all its trips


def instruction_buffers(op: InstructionOp) -> tuple[tuple[SSAValue, ...], tuple[SSAValue, ...]]:
    spec = op.spec()
    written = set(spec.writes + spec.optional_writes)
    roles = op.present_roles()
    reads = tuple(getattr(op, role) for role in roles if role not in written)
    writes = tuple(getattr(op, role) for role in roles if role in written)
    return reads, writes


def _steps(block: Block, costs: InstructionCosts) -> list[_Step]:
    steps = []
    for op in block.ops:
        if isinstance(op, InstructionOp):
            reads, writes = instruction_buffers(op)
            steps.append(_Step(op, reads, writes, {}))
        elif op.regions:
            busy: dict[Engine, float] = {}
            reads_inside: set[SSAValue] = set()
            writes_inside: set[SSAValue] = set()
            for inner in op.walk():
                if not isinstance(inner, InstructionOp):
                    continue
                inner_reads, inner_writes = instruction_buffers(inner)
                reads_inside.update(inner_reads)
                writes_inside.update(inner_writes)
                if inner.engine_kind in _QUEUED:
                    trips, parent = 1, inner.parent_op()
                    while parent is not None and parent is not op.parent_op():
                        if isinstance(parent, scf.ForOp):
                            trips *= loop_trips(parent)
                        parent = parent.parent_op()
                    engine = inner.engine_kind
                    busy[engine] = busy.get(engine, 0.0) + trips * costs.ns(inner, engine)
            steps.append(_Step(op, tuple(reads_inside), tuple(writes_inside), busy))
    return steps


def _dma_ns(op: InstructionOp, target: Target) -> float:
    shapes = _shapes(op)
    assert shapes is not None
    attrs = op.attribute_values()
    if attrs.get("indirect"):
        return cost_model.indirect_dma_cost(shapes, attrs, target).alone_ns(target)
    return cost_model.dma_cost(shapes["src"], shapes["dst"], target).alone_ns(target)


class _Timeline:
    """Engines as in-order queues over a block's steps (`_span_ns` states the rules)."""

    def __init__(self, costs: InstructionCosts, steps: list[_Step]) -> None:
        self.costs = costs
        self.target = costs.target
        # Buffers several steps write are written a window each (a panel's inserts): the windows do not wait
        # for each other, readers wait for them all.
        writers: dict[SSAValue, int] = {}
        for step in steps:
            for buffer in set(step.writes):
                writers[buffer] = writers.get(buffer, 0) + 1
        self.windowed = {buffer for buffer, count in writers.items() if count > 1}
        self.free = dict.fromkeys(_QUEUED, 0.0)
        self.last_written: dict[Engine, tuple[SSAValue, ...]] = {}
        self.written: dict[SSAValue, float] = {}
        self.read: dict[SSAValue, float] = {}
        self.end = 0.0

    def copy(self) -> _Timeline:
        """The same state, to issue further steps on without changing this one."""
        twin = shallow_copy(self)
        twin.free, twin.last_written = dict(self.free), dict(self.last_written)
        twin.written, twin.read = dict(self.written), dict(self.read)
        return twin

    def ready(self, step: _Step) -> float:
        whole = [buffer for buffer in step.writes if buffer not in self.windowed]
        after_writes = [self.written.get(buffer, 0.0) for buffer in step.reads + tuple(whole)]
        after_reads = [self.read.get(buffer, 0.0) for buffer in whole]
        return max([0.0, *after_writes, *after_reads])

    def finish(self, step: _Step, engine: Engine) -> float:
        """When `step`'s instruction would end on `engine`, issued now."""
        op = step.op
        assert isinstance(op, InstructionOp)
        ready = self.ready(step)
        if engine is Engine.DMA:
            return ready + self.costs.dma_ns(op)
        if engine not in self.free:
            return ready
        penalty = 0.0
        if any(buffer in self.last_written.get(engine, ()) for buffer in step.reads):
            penalty = self.target.dependent_op_penalty_cycles / self.target.clock_ghz[engine]
        return max(ready, self.free[engine]) + penalty + self.costs.ns(op, engine)

    def issue(self, step: _Step, engine: Engine | None) -> None:
        """Run `step` (on `engine` when it is an instruction)."""
        if engine is None:
            start = max([self.ready(step)] + [self.free[queue] for queue in step.busy])
            finish = start + max(step.busy.values(), default=0.0)
            for queue, busy in step.busy.items():
                self.free[queue] = start + busy
        else:
            finish = self.finish(step, engine)
            if engine in self.free:
                self.free[engine] = finish
                self.last_written[engine] = step.writes
        for buffer in step.reads:
            self.read[buffer] = max(self.read.get(buffer, 0.0), finish)
        for buffer in step.writes:
            self.written[buffer] = max(self.written.get(buffer, 0.0), finish) if buffer in self.windowed else finish
        self.end = max(self.end, finish)


def _engine(step: _Step, engines: dict[InstructionOp, Engine]) -> Engine | None:
    op = step.op
    return engines.get(op, op.engine_kind) if isinstance(op, InstructionOp) else None


def _span_ns(steps: list[_Step], engines: dict[InstructionOp, Engine], rounds: int, costs: InstructionCosts) -> float:
    """When the block's work ends, run `rounds` times back to back, each engine an in-order queue.

    An instruction starts when its engine is free, the writes it reads have ended and the reads and writes of the
    buffers it writes have ended (a loop body reuses its buffers every trip); reading what the queue's previous
    instruction wrote costs the simulator's dependency penalty; windows of one buffer (several steps write it) do
    not wait for each other. DMAs run side by side at their own rates. A nested loop nest starts when its inputs
    are ready and every engine it uses is free, and holds each for its total."""
    timeline = _Timeline(costs, steps)
    for _ in range(rounds):
        for step in steps:
            timeline.issue(step, _engine(step, engines))
    return timeline.end


def _list_schedule(
    steps: list[_Step], options: dict[InstructionOp, list[Engine]], costs: InstructionCosts
) -> dict[InstructionOp, Engine]:
    """Each instruction with `options` in program order to the one that would finish it soonest, given what the
    instructions before it already hold (ties keep the first option)."""
    chosen: dict[InstructionOp, Engine] = {}
    timeline = _Timeline(costs, steps)
    for step in steps:
        op = step.op
        if isinstance(op, InstructionOp) and op in options:
            chosen[op] = min(options[op], key=lambda engine: timeline.finish(step, engine))
        timeline.issue(step, _engine(step, chosen))
    return chosen


def _merge_scalar_tensor_pairs(block: Block) -> None:
    """Each VectorE tensor_tensor fed by a tensor_scalar alone becomes one scalar_tensor_tensor (module docstring)."""
    order = ProgramOrder()
    for op in list(block.ops):
        if isinstance(op, neuron.TensorTensorOp) and op.parent is not None and op.engine_kind is Engine.VECTOR:
            fused = fuse_scalar_tensor_tensor(op, order=order)
            if fused is not None:
                forward_into_copy_reader(fused, order)


def _cheapest_ns(op: InstructionOp, target: Target) -> float:
    shapes = _shapes(op)
    return min(cost_ns(op, engine, target, shapes) for engine in (op.engine_kind, *_alternatives(op)))


def _merge_cheaper_pairs(block: Block, target: Target) -> None:
    """Before the assignment, the tensor_scalar -> tensor_tensor pairs whose scalar_tensor_tensor costs VectorE less
    than the two instructions cost on their cheapest engines together (a bf16 (x - s) * y streams at one element
    per cycle) become that instruction, so that the assignment weighs the one pass each is, when that lowers the
    block's bound: the larger of the work only VectorE, ScalarE or GpSimdE can run and a third of all the work.
    Merged, the pairs are VectorE's alone, and where VectorE's own work already sets the bound (a softmax
    backward's row sums) they are cheaper apart on the other engines."""
    pairs: dict[neuron.TensorTensorOp, tuple[float, float]] = {}  # second -> (the pair's cost apart, merged)

    def cheaper(
        first: neuron.TensorScalarOp, second: neuron.TensorTensorOp, merged: neuron.ScalarTensorTensorOp
    ) -> bool:
        apart = _cheapest_ns(first, target) + _cheapest_ns(second, target)
        cost = cost_ns(merged, Engine.VECTOR, target)
        if cost < apart:
            pairs[second] = (apart, cost)
        return False  # decided below, for the block as a whole

    order = ProgramOrder()
    for op in [op for op in block.ops if isinstance(op, neuron.TensorTensorOp) and op.engine_kind is Engine.VECTOR]:
        fuse_scalar_tensor_tensor(op, cheaper, order)
    if not pairs:
        return
    own = {Engine.VECTOR: 0.0, Engine.SCALAR: 0.0, Engine.GPSIMD: 0.0}
    total = 0.0
    for op in block.ops:
        if not isinstance(op, InstructionOp) or op.engine_kind not in own:
            continue
        if _alternatives(op):
            total += _cheapest_ns(op, target)
        else:
            cost = cost_ns(op, op.engine_kind, target)
            own[op.engine_kind] += cost
            total += cost
    apart_bound = max(*own.values(), total / 3)
    merged_costs = sum(merged for _, merged in pairs.values())
    merged_total = total - sum(apart for apart, _ in pairs.values()) + merged_costs
    merged_bound = max(own[Engine.VECTOR] + merged_costs, own[Engine.SCALAR], own[Engine.GPSIMD], merged_total / 3)
    if merged_bound >= apart_bound:
        return
    for second in pairs:
        fused = fuse_scalar_tensor_tensor(second, order=order)
        if fused is not None:
            forward_into_copy_reader(fused, order)


def loop_trips(loop: scf.ForOp) -> int:
    """A loop's trip count when its bounds are constants, else 1."""
    bounds = [value.owner for value in (loop.lb, loop.ub, loop.step)]
    if not all(isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr) for owner in bounds):
        return 1
    lower, upper, step = (owner.value.value.data for owner in bounds)  # type: ignore[union-attr]
    return max(0, -(-(upper - lower) // step)) if step > 0 else 1


def engine_totals(function: func.FuncOp, target: Target) -> dict[Engine, float]:
    """Each compute engine's time over a whole run of `function` (every instruction times its loops' trips)."""
    totals = {Engine.TENSOR: 0.0, Engine.VECTOR: 0.0, Engine.SCALAR: 0.0, Engine.GPSIMD: 0.0}
    for op in function.body.walk():
        if not isinstance(op, InstructionOp) or op.engine_kind not in totals:
            continue
        trips, parent = 1, op.parent_op()
        while parent is not None and parent is not function:
            if isinstance(parent, scf.ForOp):
                trips *= loop_trips(parent)
            parent = parent.parent_op()
        totals[op.engine_kind] += trips * cost_ns(op, op.engine_kind, target)
    return totals


def _blocks(function: func.FuncOp) -> list[Block]:
    blocks = [function.body.block]
    for op in function.body.walk():
        for region in op.regions:
            blocks.extend(region.blocks)
    return blocks


@dataclass(frozen=True)
class NeuronBalanceEnginesPass(ModulePass):
    name = "neuron-balance-engines"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = neuron.target_of(op)
        for function in defined_functions(op):
            totals = engine_totals(function, target)
            spread_evacuations = totals[Engine.TENSOR] >= max(totals.values())  # TensorE sets the pace
            for block in _blocks(function):
                _merge_cheaper_pairs(block, target)
                # the merges change instructions' operands: one table per block, after them
                costs = InstructionCosts(target)
                # the assignment changes engines alone, which no step records: the sinking reuses its steps
                steps = _assign(block, costs, spread_evacuations)
                _sink_evacuations(block, costs, steps)
                _merge_scalar_tensor_pairs(block)


def _assign(block: Block, costs: InstructionCosts, spread_evacuations: bool) -> list[_Step] | None:
    """The cheaper for the block of two assignments (module docstring): copies together by load, or each
    instruction by the soonest finish. The block's steps, when it simulated them."""
    options = {op: [op.engine_kind, *_alternatives(op)] for op in block.ops if isinstance(op, InstructionOp)}
    options = {op: engines for op, engines in options.items() if len(engines) > 1}
    if not options:
        return None
    _balance(block, costs, spread_evacuations)
    by_load = {op: op.engine_kind for op in options}
    if spread_evacuations:  # where TensorE sets the pace its evacuations keep their interleaved halves
        options = {op: [by_load[op]] if _drains_psum(op, costs.target) else engines for op, engines in options.items()}
    steps = _steps(block, costs)
    by_finish = _list_schedule(steps, options, costs)
    # a loop body's trips follow each other: the next trip's first instructions wait for this one's buffers
    rounds = 2 if isinstance(block.parent_op(), scf.ForOp) else 1
    if _span_ns(steps, by_finish, rounds, costs) < _span_ns(steps, by_load, rounds, costs) * _BETTER:
        for op, engine in by_finish.items():
            op.properties["engine"] = EngineAttr(engine)
    if len(options) * len(steps) * rounds <= _MOVES_BUDGET:
        _move_one_by_one(steps, options, rounds, costs)
    return steps


def _move_one_by_one(
    steps: list[_Step], options: dict[InstructionOp, list[Engine]], rounds: int, costs: InstructionCosts
) -> None:
    """Improve a block's assignment an instruction at a time (module docstring): in program order, each movable
    instruction takes whichever of its engines gives the shortest simulated span (`rounds` trips), the instructions
    before it keeping what they took. The result replaces the assignment only when its span is shorter by more
    than `_BETTER`'s margin."""
    engines = {op: op.engine_kind for op in options}
    start = best = _span_ns(steps, engines, rounds, costs)
    prefix = _Timeline(costs, steps)  # the first trip's steps before the current one, as assigned
    for index, step in enumerate(steps):
        op = step.op
        if isinstance(op, InstructionOp) and op in options:
            chosen = engines[op]
            for engine in options[op]:
                if engine is chosen:
                    continue
                engines[op] = engine
                trial = prefix.copy()
                for later in steps[index:] + steps * (rounds - 1):
                    trial.issue(later, _engine(later, engines))
                    if trial.end >= best:  # the span only grows from here
                        break
                if trial.end < best:
                    best, chosen = trial.end, engine
            engines[op] = chosen
        prefix.issue(step, _engine(step, engines))
    if best < start * _BETTER:
        for op, engine in engines.items():
            op.properties["engine"] = EngineAttr(engine)


class _FirstUsers:
    """Per op of one block, the first operation after it that touches a given buffer: one numbering of the block
    and, per buffer asked about, the sorted positions of the block's ops using it (inside a nested op too), so
    each question is a binary search instead of a walk over the ops in between. The block must not change while
    it is used."""

    def __init__(self, block: Block):
        self.block = block
        self.ops = list(block.ops)
        self.position = {op: index for index, op in enumerate(self.ops)}
        self._users: dict[SSAValue, list[int]] = {}

    def _positions(self, value: SSAValue) -> list[int]:
        found = self._users.get(value)
        if found is None:
            at: set[int] = set()
            for use in value.uses:
                user: Operation | None = use.operation
                while user is not None and user.parent_block() is not self.block:
                    user = user.parent_op()
                if user is not None:
                    at.add(self.position[user])
            found = self._users[value] = sorted(at)
        return found

    def first_user(self, op: neuron.TensorCopyOp) -> Operation | None:
        """The first operation after `op` that touches its source or destination (inside a nested op too), or the
        block's terminator; None for the block's last op."""
        start = self.position[op]
        last = len(self.ops) - 1
        if start == last:
            return None
        first = last
        for buffer in (op.src, op.dst):
            positions = self._positions(buffer)
            index = bisect.bisect_right(positions, start)
            if index < len(positions):
                first = min(first, positions[index])
        return self.ops[first]


def _sink_evacuations(block: Block, costs: InstructionCosts, steps: list[_Step] | None = None) -> None:
    """Move each PSUM evacuation down to just before the first use of its tile, when the simulated span (module
    docstring) is shorter by more than `_SINK_BETTER` that way, as far as PSUM holds the longer lives
    (`_within_psum`). `steps`: the block's, when known already."""
    moves = []
    users = _FirstUsers(block)
    for op in users.ops:
        if isinstance(op, neuron.TensorCopyOp) and _is_psum_evacuation(op):
            user = users.first_user(op)
            if user is not None and user is not op.next_op:
                moves.append((op, user))
    moves = _within_psum(block, moves, costs.target)
    if not moves:
        return
    if steps is None:
        steps = _steps(block, costs)
    by_op = {step.op: step for step in steps}
    moved = {copy for copy, _ in moves}
    sunk = [step for step in steps if step.op not in moved]
    for copy, user in moves:
        following: Operation | None = user
        while following is not None and following not in by_op:
            following = following.next_op
        position = sunk.index(by_op[following]) if following is not None else len(sunk)
        sunk.insert(position, by_op[copy])
    rounds = 2 if isinstance(block.parent_op(), scf.ForOp) else 1
    if _span_ns(sunk, {}, rounds, costs) >= _span_ns(steps, {}, rounds, costs) * _SINK_BETTER:
        return
    for copy, user in moves:
        block.detach_op(copy)
        block.insert_op_before(copy, user)


def _within_psum(
    block: Block, moves: list[tuple[neuron.TensorCopyOp, Operation]], target: Target
) -> list[tuple[neuron.TensorCopyOp, Operation]]:
    """The moves, in program order, after which the PSUM the block holds at once still fits the target's.

    A sunk evacuation keeps its PSUM tile until it runs, so tiles whose copies now wait for one reader all live at
    once (a convolution's filter panels transposed one after another, each copied out just before the first
    matmul: 48 of 512 bytes where 32 fit). The allocator gives a buffer of the block bytes from its alloc to its
    last use (a loop body's for the whole body, unless that does not fit), so the block's PSUM at each op is
    counted that way: the bytes the allocator places for the buffers live there (`placed_bytes`), what an op
    holding a loop nest allocates inside it (twice for a loop: neuron-unroll-loops gives its body two copies at
    least) and, in a loop body, what lives beside the loop (`live_beside`). A move whose longer life would take
    that above the target's PSUM stays where it was."""
    if not moves:
        return moves
    capacity = target.psum_bytes_per_partition
    owner = block.parent_op()
    if isinstance(owner, scf.ForOp):
        capacity -= live_beside(owner, Memory.PSUM, target)
    ops = list(block.ops)
    position = {op: index for index, op in enumerate(ops)}

    def in_block(user: Operation) -> Operation | None:
        while user.parent_block() is not block:
            parent = user.parent_op()
            if parent is None:
                return None
            user = parent
        return user

    held = [0] * (len(ops) + 1)  # per op of the block, as differences first
    ends: dict[neuron.AllocOp, int] = {}
    for index, op in enumerate(ops):
        if isinstance(op, neuron.AllocOp):
            if op.memory is not Memory.PSUM:
                continue
            uses = [in_block(use.operation) for use in op.buffer.uses]
            end = max([index, *(position[user] for user in uses if user is not None)])
            ends[op] = end
            held[index] += placed_bytes(op, target)
            held[end + 1] -= placed_bytes(op, target)
            continue
        inner = sum(
            placed_bytes(alloc, target)
            for region in op.regions
            for alloc in region.walk()
            if isinstance(alloc, neuron.AllocOp) and alloc.memory is Memory.PSUM
        )
        copies = 2 if isinstance(op, scf.ForOp) else 1
        held[index] += copies * inner
        held[index + 1] -= copies * inner
    for index in range(1, len(ops)):
        held[index] += held[index - 1]
    kept = []
    for copy, user in moves:
        alloc = copy.src.owner
        if not isinstance(alloc, neuron.AllocOp) or alloc not in ends:
            kept.append((copy, user))  # allocated outside the block: it lives beside it whatever the copy does
            continue
        # the copy runs just before `user` now: its tile lives over the ops up to it
        stretch = range(ends[alloc] + 1, position[user])
        size = placed_bytes(alloc, target)
        if any(held[index] + size > capacity for index in stretch):
            continue
        for index in stretch:
            held[index] += size
        ends[alloc] = max(ends[alloc], position[user] - 1)
        kept.append((copy, user))
    return kept
