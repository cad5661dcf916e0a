"""neuron-assign-dma-queues: give each DMA instruction the queue on which it can start soonest.

Input contract: neuron-level functions after loop unrolling (`neuron-unroll-loops`), whose copies of a loop body
repeat the queue numbers of the body they were cloned from; every instruction has its engine.

Output guarantee: the same instructions in the same order; every DMA instruction has a queue below the target's
DMA queue count (`Target.dma_queues`), chosen by a list scheduler over the function's program order (below).
Within a loop nest (an outermost loop holding DMAs, with every loop inside it), each DMA is on a queue held by the
fewest of the nest's DMAs before it: a nest of at most that many DMAs has them on distinct queues; in a larger
nest, a queue holds loads only or stores only where the count allows.

Why. Each queue runs its transfers in order, so a transfer waits for everything queued before it on its queue,
whatever the synchronisation pass says it depends on. Dealt out round-robin, a load whose operands are ready at
the start could land behind a store that waits for the compute of a whole trip, and every load after it on that
queue with it. Here the function runs in an estimate, instruction by instruction in program order, with the rules
the simulator times it by:

* compute engines are in-order queues; an instruction takes the cost model's time (`runtime.cost_model`), plus
  the dependency penalty when it reads what the previous instruction of its engine wrote;
* an instruction starts when the writes it reads have ended, and when the reads and writes of the buffers it
  writes have ended (a buffer several instructions write is written in windows: the windows do not wait for each
  other, and a reader waits for the windows it overlaps, when its access and theirs are at constant offsets
  outside loops, else for all of them);
* a DMA takes its fixed latency, then moves its bytes through the core's DMA engines and HBM bandwidth shared
  with the transfers around it, granted in program order (`runtime.timeline.Bandwidth`, the simulator's own
  arbitration);
* a loop's first two trips are walked, and the clocks the second set move later by its advance for the trips
  after it.

Each DMA goes to the queue that lets it start earliest: max(when the queue is free, when its operands are
ready), where a queue counts as free in time only when it frees half a fixed DMA latency before the operands are
ready (`_SLACK`: the estimate is not the simulator's timing). Among queues that tie, it takes the one that became
free last, which keeps the queues that free up early for the transfers after it whose operands are ready early
(the next trip's loads, emitted after this trip's stores). The estimate only orders the choice: the
synchronisation pass still orders every conflicting pair of instructions, and the simulator times them exactly.
The DMA engine count is the target's, one queue each, as the simulator has them.

A DMA inside a loop runs on its queue every trip, where the estimate chooses it from the first trip alone. Two
DMAs of one nest on one queue take turns on it every trip: a load queued behind a store of the trip before waits
for that trip's compute, and the trips run one after the other instead of overlapping (a row-tiled softmax over
8192 x 4096 took 432.8 -> 663.2 us simulated with the nest's DMAs placed by the estimate alone, a 4096^3 matmul
1821.4 -> 2376.0 us). So the estimate chooses a nest's DMA only among the queues the fewest of the nest's earlier
DMAs hold, which spreads a nest as round-robin numbering does while keeping it off the queues that the transfers
around it leave busy. A nest of more DMAs than queues (a matmul's loop over output blocks unrolled twice, with the
chunks and the stores of both copies) shares them, and among those the fewest hold, a load takes a queue that holds
loads only and a store one that holds stores only, where there is one: the estimate's first trip would put a load
behind a store that frees early there, but in every later trip that store waits for the trip's compute, and the
load behind it does too (an fp8 4096^3 product with its block loops unrolled, 1120.3 -> 1029.8 us).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.neuron import InstructionOp
from neuron_mlir.lowering.ir_queries import defined_functions, storage_root
from neuron_mlir.lowering.neuron_balance_engines import InstructionCosts, instruction_buffers, loop_trips
from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.timeline import Bandwidth

_COMPUTE = (Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)
# A queue counts as free for a DMA when it is estimated free this many fixed DMA latencies before the DMA's operands
# are ready: the estimate is not the simulator's timing, and a queue chosen with no slack at all delays the DMA by
# any error (the GPT-2 block's inference 167.5 -> 168.5 us with none, unchanged with half a latency).
_SLACK = 0.5
# Transfers estimated between two drops of the bandwidth history no later transfer can reach.
_FORGET_EVERY = 64
# Runs of contiguous elements a footprint lists at most (an access of more waits for every window of its buffer).
_FOOTPRINT_RUNS = 1 << 14


def _transfer(op: InstructionOp, costs: InstructionCosts) -> cost_model.DmaCost:
    shapes = costs.shapes(op)
    attrs = op.attribute_values()
    if attrs.get("indirect"):
        return cost_model.indirect_dma_cost(shapes, attrs, costs.target)
    if op.spec().name == "dma_transpose":
        return cost_model.dma_transpose_cost(shapes["src"], shapes["dst"], costs.target)
    return cost_model.dma_cost(shapes["src"], shapes["dst"], costs.target)


@dataclass(frozen=True)
class _Footprint:
    """The elements a constant access pattern touches in its buffer: partitions [first, end) (none in HBM) and,
    in each, runs of `run` elements from each of `starts` (sorted), all of them in [low, high)."""

    partitions: tuple[int, int]
    starts: np.ndarray
    run: int
    low: int
    high: int

    def overlaps(self, other: _Footprint) -> bool:
        (a0, a1), (b0, b1) = self.partitions, other.partitions
        if a1 <= b0 or b1 <= a0 or self.high <= other.low or other.high <= self.low:
            return False
        if len(self.starts) == 1 and len(other.starts) == 1:  # one run each: their ranges meet
            return True
        # for each run of self, the last run of other starting before it ends must end after it starts
        index = other.starts.searchsorted(self.starts + self.run)
        before = index > 0
        return bool((other.starts[index[before] - 1] + other.run > self.starts[before]).any())


def _footprint(op: InstructionOp, role: str) -> _Footprint | None:
    """The footprint of `role`'s access when its offset is constant and it addresses its buffer itself (not a
    view), at most `_FOOTPRINT_RUNS` runs; else None (it may touch any element)."""
    access = op.access(role)
    if access is None:
        return None
    buffer, pattern, dynamic = access
    if dynamic is not None or storage_root(buffer) is not buffer:
        return None
    dims = [(step, num) for step, num in pattern.dims if num > 1]
    run = 1
    if dims and dims[-1][0] == 1:
        run = dims.pop()[1]
    if math.prod(num for _, num in dims) > _FOOTPRINT_RUNS:
        return None
    starts = np.array([pattern.offset.data], dtype=np.int64)
    for step, num in dims:
        starts = (starts[:, None] + np.arange(num, dtype=np.int64) * step).ravel()
    first = pattern.partition_start.data
    partitions = (first, first + pattern.partitions.data) if pattern.is_on_chip else (0, 1)
    starts.sort()
    return _Footprint(partitions, starts, run, int(starts[0]), int(starts[-1]) + run)


@dataclass
class _Access:
    """What an instruction reads and writes, as root buffers; the windows it reads and writes of buffers written
    in windows (`_Estimate.windowed`), by footprint (None: any element)."""

    reads: tuple[SSAValue, ...]
    writes: tuple[SSAValue, ...]
    whole: tuple[SSAValue, ...]  # the written buffers that no other instruction writes a window of
    window_reads: tuple[tuple[SSAValue, _Footprint | None], ...] = ()
    window_writes: tuple[tuple[SSAValue, _Footprint | None], ...] = ()


@dataclass
class _Estimate:
    """The function's run as the module docstring describes it, with the queue choices made so far."""

    target: Target
    costs: InstructionCosts
    windowed: set[SSAValue]
    queue_free: list[float] = field(default_factory=list)
    engine_free: dict[Engine, float] = field(default_factory=dict)
    last_written: dict[Engine, tuple[SSAValue, ...]] = field(default_factory=dict)
    written: dict[SSAValue, float] = field(default_factory=dict)
    read: dict[SSAValue, float] = field(default_factory=dict)
    bandwidth: Bandwidth | None = None  # the core's DMA engines and HBM, shared as the simulator shares them
    issued: int = 0
    chosen: dict[InstructionOp, int] = field(default_factory=dict)
    accesses: dict[InstructionOp, _Access] = field(default_factory=dict)
    transfers: dict[InstructionOp, cost_model.DmaCost] = field(default_factory=dict)
    touched: set[tuple[str, object]] | None = None  # clocks set during a loop's second trip
    nest: scf.ForOp | None = None  # the outermost loop holding DMAs around the instructions walked
    nest_held: dict[scf.ForOp, list[int]] = field(default_factory=dict)  # per nest: its DMAs on each queue
    # per nest and queue: whether its DMAs there store to HBM (True), load from it (False), or both
    nest_directions: dict[scf.ForOp, list[set[bool]]] = field(default_factory=dict)
    # per buffer written in windows: each window written outside loops and when it ends; a buffer with a window
    # written in a loop (whose clocks `advance` moves) or of no footprint waits as a whole (`written`)
    windows: dict[SSAValue, list[tuple[_Footprint, float]]] = field(default_factory=dict)
    whole_windows: set[SSAValue] = field(default_factory=set)
    depth: int = 0  # loops around the instructions walked

    def __post_init__(self) -> None:
        self.queue_free = [0.0] * self.target.dma_queues
        self.engine_free = dict.fromkeys(_COMPUTE, 0.0)
        self.bandwidth = Bandwidth(self.target.dma_aggregate_bytes_per_ns, self.target.hbm_bandwidth_gbps)

    def access(self, op: InstructionOp) -> _Access:
        known = self.accesses.get(op)
        if known is None:
            reads, writes = instruction_buffers(op)
            roots_written = tuple(dict.fromkeys(storage_root(buffer) for buffer in writes))
            whole = tuple(buffer for buffer in roots_written if buffer not in self.windowed)
            roots_read = tuple(dict.fromkeys(storage_root(b) for b in reads))
            spec = op.spec()
            writing = set(spec.writes + spec.optional_writes)
            window_reads: list[tuple[SSAValue, _Footprint | None]] = []
            window_writes: list[tuple[SSAValue, _Footprint | None]] = []
            for role in op.present_roles():
                root = storage_root(getattr(op, role))
                if root in self.windowed:
                    (window_writes if role in writing else window_reads).append((root, _footprint(op, role)))
            known = self.accesses[op] = _Access(
                roots_read, roots_written, whole, tuple(window_reads), tuple(window_writes)
            )
        return known

    def ready(self, access: _Access) -> float:
        written, read = self.written, self.read
        ready = 0.0
        precise = set()
        for buffer, footprint in access.window_reads:
            if footprint is None or buffer in self.whole_windows:
                continue
            precise.add(buffer)
            for window, end in self.windows.get(buffer, ()):
                if end > ready and window.overlaps(footprint):
                    ready = end
        for buffer in access.reads:
            if buffer not in precise:
                ready = max(ready, written.get(buffer, 0.0))
        for buffer in access.whole:
            ready = max(ready, written.get(buffer, 0.0), read.get(buffer, 0.0))
        return ready

    def transfer(self, op: InstructionOp, start: float) -> float:
        """When a DMA issued at `start` ends."""
        cost = self.transfers.get(op)
        if cost is None:
            cost = self.transfers[op] = _transfer(op, self.costs)
        assert self.bandwidth is not None
        self.issued += 1
        if self.issued % _FORGET_EVERY == 0:  # no later transfer starts before every queue is free
            self.bandwidth.forget_before(min(self.queue_free))
        hbm_per_byte = cost.hbm_bytes / cost.bytes if cost.bytes else 0.0
        rate = cost.engine_rate(self.target)
        return self.bandwidth.transfer(start + cost.fixed_ns, cost.bytes, rate, cost.efficiency, hbm_per_byte)

    def choose(self, ready: float, stores: bool) -> int:
        """The queue for a DMA whose operands are ready at `ready` and that `stores` to HBM or not (module
        docstring)."""
        free = self.queue_free
        wanted = ready - self.target.dma_fixed_latency_ns * _SLACK
        candidates: Sequence[int] = range(self.target.dma_queues)
        held = directions = None
        if self.nest is not None:
            queues = self.target.dma_queues
            held = self.nest_held.setdefault(self.nest, [0] * queues)
            directions = self.nest_directions.setdefault(self.nest, [set() for _ in range(queues)])
            fewest = min(held)
            candidates = [queue for queue in candidates if held[queue] == fewest]
            alike = [queue for queue in candidates if directions[queue] <= {stores}]
            candidates = alike or candidates
        chosen = min(candidates, key=lambda queue: (max(free[queue], wanted), -min(free[queue], wanted), queue))
        if held is not None and directions is not None:
            held[chosen] += 1
            directions[chosen].add(stores)
        return chosen

    def issue(self, op: InstructionOp) -> None:
        access = self.access(op)
        ready = self.ready(access)
        engine = op.engine_kind
        if engine is Engine.DMA:
            queue = self.chosen.get(op)
            if queue is None:
                stores = self.costs.shapes(op)["dst"].memory is Memory.HBM
                queue = self.chosen[op] = self.choose(ready, stores)
            end = self.transfer(op, max(ready, self.queue_free[queue]))
            self.queue_free[queue] = end
            self._touch("queue", queue)
        elif engine in self.engine_free:
            start = max(ready, self.engine_free[engine])
            duration = self.costs.ns(op, engine)
            if any(buffer in self.last_written.get(engine, ()) for buffer in access.reads):
                duration += self.target.dependent_op_penalty_cycles / self.target.clock_ghz[engine]
            end = start + duration
            self.engine_free[engine] = end
            self.last_written[engine] = access.writes
            self._touch("engine", engine)
        else:  # the sync engine and the collective queue: nothing here competes with them
            end = ready
        for buffer in access.reads:
            self.read[buffer] = max(self.read.get(buffer, 0.0), end)
            self._touch("read", buffer)
        for buffer in access.writes:
            self.written[buffer] = max(self.written.get(buffer, 0.0), end) if buffer in self.windowed else end
            self._touch("written", buffer)
        for buffer, footprint in access.window_writes:
            if footprint is None or self.depth:
                self.whole_windows.add(buffer)
            else:
                self.windows.setdefault(buffer, []).append((footprint, end))

    def _touch(self, kind: str, key: object) -> None:
        if self.touched is not None:
            self.touched.add((kind, key))

    def latest(self) -> float:
        return max([*self.queue_free, *self.engine_free.values()])

    def advance(self, touched: set[tuple[str, object]], by: float) -> None:
        """Move the clocks a loop's trip set by `by` later (the trips the estimate does not walk)."""
        for kind, key in touched:
            if kind == "queue":
                assert isinstance(key, int)
                self.queue_free[key] += by
            elif kind == "engine":
                assert isinstance(key, Engine)
                self.engine_free[key] += by
            elif kind == "read":
                assert isinstance(key, SSAValue)
                self.read[key] += by
            else:
                assert isinstance(key, SSAValue)
                self.written[key] += by


def _instructions(block: Block) -> Iterator[InstructionOp]:
    for op in block.walk():
        if isinstance(op, InstructionOp):
            yield op


def _windowed(body: Block) -> set[SSAValue]:
    writers: dict[SSAValue, int] = {}
    for op in _instructions(body):
        for buffer in {storage_root(b) for b in instruction_buffers(op)[1]}:
            writers[buffer] = writers.get(buffer, 0) + 1
    return {buffer for buffer, count in writers.items() if count > 1}


def _visit(block: Block, estimate: _Estimate) -> None:
    for op in block.ops:
        if isinstance(op, InstructionOp):
            estimate.issue(op)
        elif isinstance(op, scf.ForOp):
            _visit_loop(op, estimate)
        elif op.regions:
            for region in op.regions:
                for inner in region.blocks:
                    _visit(inner, estimate)


def _visit_loop(loop: scf.ForOp, estimate: _Estimate) -> None:
    estimate.depth += 1
    if estimate.nest is None and _has_dma(loop):
        estimate.nest = loop
        _visit_trips(loop, estimate)
        estimate.nest = None
    else:
        _visit_trips(loop, estimate)
    estimate.depth -= 1


def _visit_trips(loop: scf.ForOp, estimate: _Estimate) -> None:
    trips = loop_trips(loop)
    _visit(loop.body.block, estimate)
    if trips > 1:
        outer_touched = estimate.touched
        estimate.touched = set()
        before = estimate.latest()
        _visit(loop.body.block, estimate)
        touched = estimate.touched
        estimate.touched = outer_touched
        if outer_touched is not None:
            outer_touched.update(touched)
        if trips > 2:
            estimate.advance(touched, (trips - 2) * max(0.0, estimate.latest() - before))


def _has_dma(op: Operation) -> bool:
    return any(isinstance(i, InstructionOp) and i.engine_kind is Engine.DMA for i in op.walk())


@dataclass(frozen=True)
class NeuronAssignDmaQueuesPass(ModulePass):
    name = "neuron-assign-dma-queues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = neuron.target_of(op)
        for function in defined_functions(op):
            if not _has_dma(function):
                continue
            body = function.body.block
            estimate = _Estimate(target, InstructionCosts(target), _windowed(body))
            _visit(body, estimate)
            for transfer, queue in estimate.chosen.items():
                transfer.properties["queue"] = IntegerAttr(queue, i64)
