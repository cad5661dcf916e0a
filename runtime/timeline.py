"""When each instruction instance runs: in-order queues, semaphore waits, shared DMA bandwidth, the cost model.

Instances are issued to the `Timeline` in program order (`issue`), and each gets a start and an end:

* Each queue (tensor, vector, scalar, gpsimd, sync and the 16 DMA queues) is in order: an instance starts when
  its queue is free and the most recent issued instance of every instruction in its `waits` has completed (an
  instruction with no issued instance yet imposes no wait).
* TensorE is in order too, but a matmul in TensorE's row tiling mode (`row_tile_size`) occupies only its rows of
  the PE array [nki-isa]: it starts when the previous TensorE instance has started (issue stays in order), the
  instances that hold any of its rows have finished streaming, and its waits are met, so matmuls in disjoint row
  tiles stream at the same time. A full-array instance (any matmul or transpose without a row tile) holds every
  row, so it waits for all of them, as before. Completion stays in program order (assumed): an instance counts as
  done, for the waits on it and the end of its queue, no earlier than the TensorE instance before it, so a wait
  on a matmul still covers every earlier one, as the synchronisation (`neuron-insert-sync`) assumes of a queue.
* A compute instance takes its cost-model duration (`runtime.cost_model`), plus the dependency penalty when it
  reads bytes the previous instance of its queue wrote.
* A DMA instance first waits its fixed latency, then moves its bytes through two shared resources (`Bandwidth`):
  the core's DMA engines (16 x the per-engine rate, each transfer limited to the engines its partitions use and
  slowed by its chunk efficiency) and HBM bandwidth. Bandwidth is granted in program order: a transfer gets
  whatever earlier transfers leave free at each moment, so queues never add up to more than the core has and
  simulated time can never beat the HBM roofline.
* ScalarOps and loop bookkeeping take no time.

Nothing here reads data: times depend on the program and the register values of each instance only. The
timeline also keeps the run's statistics (instances, busy time and FLOPs per static instruction, bytes moved, one
trace event per instance) and turns them into a `Profile`.

Every float operation is done in one fixed order per instance, so the same issue sequence gives the same bits.
A traced loop nest (`runtime.lanes`) is timed by `issue_lanes`, which keeps only that chain of float operations
instance by instance (each start is the maximum of earlier ends, each end a start plus a duration, or a transfer's
walk through bandwidth shared with the transfers around it, whose arithmetic depends on where they meet) and does
everything else (dependency penalties, statistics, events) over all lanes at once. `Bandwidth.transfer`'s direct
paths are `Bandwidth.walk`, the segment-by-segment definition, written out for the two common shapes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from neuron_mlir.runtime import dtypes
from neuron_mlir.runtime.hardware import Target
from neuron_mlir.runtime.lanes import Lanes
from neuron_mlir.runtime.plan import (
    COLLECTIVE_QUEUE,
    DMA_QUEUE_BASE,
    PE_ROW_SLOTS,
    QUEUES,
    Footprint,
    InstructionPlan,
    OperandPlan,
)
from neuron_mlir.runtime.profile import QUEUE_NAMES, InstructionStats, Profile, TraceEvents
from neuron_mlir.runtime.program import Program

# Transfers issued between two attempts to drop bandwidth history no later transfer can reach.
_FORGET_EVERY = 64

# A DMA's arguments to `Bandwidth.transfer` (fixed latency, bytes, engine rate, efficiency, HBM bytes per byte), and
# its (duration, engine grant, HBM grant) when it moves bytes alone, None when it cannot
_TransferConstants = tuple[float, int, float, float, float, tuple[float, float, float] | None]


class Bandwidth:
    """Arbitrates the core's DMA engines and HBM bandwidth among overlapping transfers, in program order.

    Usage of both resources is a step function of time, kept as breakpoints; each transfer takes, at every
    moment, the largest rate that fits under both capacities and its own limit, and adds its usage.
    """

    def __init__(self, engine_capacity: float, hbm_capacity: float) -> None:
        self.engine_capacity = engine_capacity
        self.hbm_capacity = hbm_capacity
        self.times: list[float] = [0.0]
        self.engine_used: list[float] = [0.0]
        self.hbm_used: list[float] = [0.0]

    def _split(self, t: float) -> int:
        index = bisect.bisect_right(self.times, t) - 1
        if index < 0:  # before the forgotten history: nothing else can be moving then
            self.times.insert(0, t)
            self.engine_used.insert(0, 0.0)
            self.hbm_used.insert(0, 0.0)
            return 0
        if self.times[index] == t:
            return index
        self.times.insert(index + 1, t)
        self.engine_used.insert(index + 1, self.engine_used[index])
        self.hbm_used.insert(index + 1, self.hbm_used[index])
        return index + 1

    def transfer(
        self, start: float, nbytes: float, max_engine_rate: float, efficiency: float, hbm_per_byte: float
    ) -> float:
        """Move `nbytes` from `start` on; return the completion time."""
        times, engine_used, hbm_used = self.times, self.engine_used, self.hbm_used
        last = len(times) - 1
        if start >= times[last]:
            # After the last breakpoint (the latest end of any transfer) nothing moves: the transfer has the whole
            # core to itself until it ends. The same arithmetic as the general walk below, with one segment.
            rate = min(max_engine_rate, self.engine_capacity - engine_used[last]) * efficiency
            if hbm_per_byte:
                rate = min(rate, (self.hbm_capacity - hbm_used[last]) / hbm_per_byte)
            if rate > 1e-9:
                if times[last] != start:
                    times.append(start)
                    engine_used.append(engine_used[last])
                    hbm_used.append(hbm_used[last])
                    last += 1
                end = start + float(nbytes) / rate
                if end > start:
                    times.append(end)
                    engine_used.append(engine_used[last])
                    hbm_used.append(hbm_used[last])
                    engine_used[last] += rate / efficiency
                    hbm_used[last] += rate * hbm_per_byte
                return end
        elif last and times[last - 1] <= start:
            # Inside the last busy segment, and done before it ends (the common case of transfers overlapping
            # the previous one): the general walk below with one segment, written out.
            busy = last - 1
            rate = min(max_engine_rate, self.engine_capacity - engine_used[busy]) * efficiency
            if hbm_per_byte:
                rate = min(rate, (self.hbm_capacity - hbm_used[busy]) / hbm_per_byte)
            remaining = float(nbytes)
            end = start + remaining / rate if rate > 1e-9 else math.inf
            if rate > 1e-9 and rate * (times[last] - start) >= remaining and end <= times[last]:
                if times[busy] != start:
                    times.insert(last, start)
                    engine_used.insert(last, engine_used[busy])
                    hbm_used.insert(last, hbm_used[busy])
                    busy = last
                    last += 1
                if end > start:
                    if end != times[last]:
                        times.insert(last, end)
                        engine_used.insert(last, engine_used[busy])
                        hbm_used.insert(last, hbm_used[busy])
                    engine_used[busy] += rate / efficiency
                    hbm_used[busy] += rate * hbm_per_byte
                return end
        return self.walk(start, nbytes, max_engine_rate, efficiency, hbm_per_byte)

    def walk(
        self, start: float, nbytes: float, max_engine_rate: float, efficiency: float, hbm_per_byte: float
    ) -> float:
        """`transfer` segment by segment: the definition its direct paths follow."""
        times, engine_used, hbm_used = self.times, self.engine_used, self.hbm_used
        index = self._split(start)
        remaining = float(nbytes)
        now = start
        grants: list[tuple[int, float]] = []
        while True:
            segment_end = times[index + 1] if index + 1 < len(times) else math.inf
            rate = min(max_engine_rate, self.engine_capacity - engine_used[index]) * efficiency
            if hbm_per_byte:
                rate = min(rate, (self.hbm_capacity - hbm_used[index]) / hbm_per_byte)
            if rate > 1e-9:
                if rate * (segment_end - now) >= remaining:
                    end = now + remaining / rate
                    if end > now:  # a rounding residue that ends where it starts moves nothing: no usage
                        grants.append((index, rate))
                    break
                remaining -= rate * (segment_end - now)
                grants.append((index, rate))
            now = segment_end
            index += 1
        self._split(end)
        for index, rate in grants:
            engine_used[index] += rate / efficiency
            hbm_used[index] += rate * hbm_per_byte
        return end

    def forget_before(self, t: float) -> None:
        """Drop history no future transfer can reach (all future starts are at or after `t`)."""
        index = bisect.bisect_right(self.times, t) - 1
        if index > 0:
            del self.times[:index], self.engine_used[:index], self.hbm_used[:index]


class Timeline:
    """The simulated time of one run, instance by instance (see the module docstring)."""

    def __init__(self, plans: Sequence[InstructionPlan], target: Target) -> None:
        self.plans = plans
        self.target = target
        self.queue_free = [0.0] * QUEUES
        self.done = [0.0] * len(plans)  # end of the most recent instance of each static instruction
        self.previous_writes: list[list[Footprint]] = [[] for _ in range(QUEUES)]
        # TensorE's row tiles: when each slot of PE rows (`plan.PE_ROW_SLOT`) is done streaming, and the start of
        # the latest TensorE instance (issue is in order)
        self.pe_free = [0.0] * PE_ROW_SLOTS
        self.tensor_issued = 0.0
        self.bandwidth = Bandwidth(target.dma_aggregate_bytes_per_ns, target.hbm_bandwidth_gbps)
        self.events = TraceEvents()
        self.count = [0] * len(plans)
        self.busy_ns = [0.0] * len(plans)
        self.flops = [0] * len(plans)
        self.dma_bytes = 0
        self.hbm_bytes = 0
        # Queues the rest of the program may still issue to (set by the caller per top-level node): bandwidth
        # history before all of them are free can be forgotten.
        self.live_queues: Sequence[int] = range(QUEUES)
        self._issued_since_forget = 0

    def issue(self, plan: InstructionPlan, values: Sequence[int]) -> tuple[float, float]:
        """One instance of `plan` with register values `values`: its (start, end)."""
        queue = plan.queue
        rows = plan.pe_rows
        if rows is None:
            start = self.queue_free[queue]
        else:
            start = self.tensor_issued
            pe_free = self.pe_free
            for slot in range(rows[0], rows[1]):
                if pe_free[slot] > start:
                    start = pe_free[slot]
        done = self.done
        for wait in plan.waits:
            if done[wait] > start:
                start = done[wait]
        dma = plan.dma
        if dma is not None:
            end = self.bandwidth.transfer(
                start + dma.fixed_ns, dma.bytes, plan.engine_rate, dma.efficiency, plan.hbm_per_byte
            )
            self.dma_bytes += dma.bytes
            self.hbm_bytes += dma.hbm_bytes
            self._issued_since_forget += 1
            if self._issued_since_forget >= _FORGET_EVERY:
                self.forget_bandwidth_history()
        elif plan.penalty_ns:
            duration = plan.duration_ns
            previous = self.previous_writes[queue]
            if previous and _overlaps_any(plan.read_footprints_at(values), previous):
                duration += plan.penalty_ns
            end = start + duration
            self.previous_writes[queue] = plan.write_footprints_at(values)
        else:
            end = start + plan.duration_ns
        if rows is not None:
            for slot in range(rows[0], rows[1]):
                self.pe_free[slot] = end
            self.tensor_issued = start
            if end < self.queue_free[queue]:  # completion in program order
                end = self.queue_free[queue]
        self.queue_free[queue] = end
        index = plan.index
        done[index] = end
        self.count[index] += 1
        self.busy_ns[index] += end - start
        self.flops[index] += plan.flops
        events = self.events
        events.queue.append(queue)
        events.start.append(start)
        events.end.append(end)
        events.instruction.append(index)
        return start, end

    def issue_lanes(self, lanes: Lanes) -> tuple[np.ndarray, np.ndarray]:
        """Every instance of a traced nest (`runtime.lanes`), in program order, exactly as `issue` one by one would
        time them; returns their starts and ends as float64 [lanes, positions].

        Only the arithmetic of starts and ends runs instance by instance (it is a chain of float operations in
        program order); which instances pay the dependency penalty, the statistics, the bytes and the trace events
        are worked out for all lanes at once, with the same float operations in the same order."""
        positions = lanes.positions
        count, width = lanes.count, len(positions)
        penalised = self._penalties(lanes)
        durations: list[float | list[float]] = []
        for position, plan in enumerate(positions):
            flags = penalised[position]
            if flags is None:
                durations.append(plan.duration_ns)
            else:
                with_penalty = plan.duration_ns + plan.penalty_ns
                durations.append([with_penalty if flag else plan.duration_ns for flag in flags.tolist()])
        starts = [0.0] * (count * width)
        ends = [0.0] * (count * width)
        queue_free, done, bandwidth = self.queue_free, self.done, self.bandwidth
        steps = [
            (plan.queue, plan.index, plan.waits, durations[position], self._transfer_constants(plan), plan.pe_rows)
            for position, plan in enumerate(positions)
        ]
        transfer = bandwidth.transfer
        times, engine_used, hbm_used = bandwidth.times, bandwidth.engine_used, bandwidth.hbm_used
        pe_free, tensor_issued = self.pe_free, self.tensor_issued
        slot = 0
        for lane in range(count):
            for queue, index, waits, duration, dma, rows in steps:
                if rows is None:
                    start = queue_free[queue]
                else:  # `issue`'s TensorE rule
                    start = tensor_issued
                    for row in range(rows[0], rows[1]):
                        if pe_free[row] > start:
                            start = pe_free[row]
                for wait in waits:
                    if done[wait] > start:
                        start = done[wait]
                if dma is not None:
                    fixed, nbytes, rate, efficiency, hbm_per_byte, alone = dma
                    now = start + fixed
                    if alone is not None and now >= times[-1] and engine_used[-1] == 0.0 and hbm_used[-1] == 0.0:
                        # `Bandwidth.transfer`'s path after the last breakpoint, its constants worked out once
                        duration_alone, engine_grant, hbm_grant = alone
                        if times[-1] != now:
                            times.append(now)
                            engine_used.append(0.0)
                            hbm_used.append(0.0)
                        end = now + duration_alone
                        if end > now:
                            times.append(end)
                            engine_used.append(0.0)
                            hbm_used.append(0.0)
                            engine_used[-2] += engine_grant
                            hbm_used[-2] += hbm_grant
                    else:
                        end = transfer(now, nbytes, rate, efficiency, hbm_per_byte)
                    self._issued_since_forget += 1
                    if self._issued_since_forget >= _FORGET_EVERY:
                        self.forget_bandwidth_history()
                        times, engine_used, hbm_used = bandwidth.times, bandwidth.engine_used, bandwidth.hbm_used
                elif isinstance(duration, float):
                    end = start + duration
                else:
                    end = start + duration[lane]
                if rows is not None:
                    for row in range(rows[0], rows[1]):
                        pe_free[row] = end
                    tensor_issued = start
                    if end < queue_free[queue]:
                        end = queue_free[queue]
                queue_free[queue] = end
                done[index] = end
                starts[slot] = start
                ends[slot] = end
                slot += 1
        self.tensor_issued = tensor_issued
        start_array = np.array(starts, dtype=np.float64).reshape(count, width)
        end_array = np.array(ends, dtype=np.float64).reshape(count, width)
        self._account(lanes, start_array, end_array)
        return start_array, end_array

    def _transfer_constants(self, plan: InstructionPlan) -> _TransferConstants | None:
        """A DMA's arguments to `Bandwidth.transfer` and, when it would move bytes alone (nothing else moving:
        both resources idle), its duration and grants there, computed as `transfer` computes them."""
        dma = plan.dma
        if dma is None:
            return None
        bandwidth = self.bandwidth
        rate = min(plan.engine_rate, bandwidth.engine_capacity - 0.0) * dma.efficiency
        if plan.hbm_per_byte:
            rate = min(rate, (bandwidth.hbm_capacity - 0.0) / plan.hbm_per_byte)
        alone = None
        if rate > 1e-9:
            alone = (float(dma.bytes) / rate, 0.0 + rate / dma.efficiency, 0.0 + rate * plan.hbm_per_byte)
        return (dma.fixed_ns, dma.bytes, plan.engine_rate, dma.efficiency, plan.hbm_per_byte, alone)

    def _penalties(self, lanes: Lanes) -> list[np.ndarray | None]:
        """Per position, per lane: does the instance pay the dependency penalty (None: it never can)? Also leaves
        `previous_writes` as the nest leaves it."""
        positions = lanes.positions
        count = lanes.count
        flags: list[np.ndarray | None] = [None] * len(positions)
        last_on_queue: dict[int, int] = {}
        for position, plan in enumerate(positions):
            if plan.penalty_ns:
                last_on_queue[plan.queue] = position
        previous_on_queue: dict[int, int] = {}
        for position, plan in enumerate(positions):
            if not plan.penalty_ns:
                continue
            queue = plan.queue
            before = previous_on_queue.get(queue)
            reads = [_footprints(lanes, position, op) for op in plan.reads]
            if before is not None:  # the previous instance of the queue is in the same lane
                writes = [_footprints(lanes, before, op) for op in lanes.positions[before].writes]
                hit = _any_overlap(reads, writes, count)
            else:  # in the previous lane, or before the nest for lane 0
                last = last_on_queue[queue]
                writes = [_footprints(lanes, last, op) for op in lanes.positions[last].writes]
                hit = np.zeros(count, bool)
                if count > 1:
                    hit[1:] = _any_overlap(
                        [_lanes_slice(f, 1, count) for f in reads],
                        [_lanes_slice(f, 0, count - 1) for f in writes],
                        count - 1,
                    )
                previous = self.previous_writes[queue]
                first_reads = [_lane_footprint(f, 0) for f in reads]
                hit[0] = bool(previous) and _overlaps_any(first_reads, previous)
            flags[position] = hit
            previous_on_queue[queue] = position
        for queue, last in last_on_queue.items():
            last_writes = positions[last].writes
            self.previous_writes[queue] = [
                _lane_footprint(_footprints(lanes, last, op), count - 1) for op in last_writes
            ]
        return flags

    def _account(self, lanes: Lanes, starts: np.ndarray, ends: np.ndarray) -> None:
        """Statistics, bytes and trace events of a nest's instances (`issue_lanes`)."""
        positions = lanes.positions
        count = lanes.count
        durations = ends - starts  # the same subtraction per instance as `issue`
        by_plan: dict[int, list[int]] = {}
        for position, plan in enumerate(positions):
            by_plan.setdefault(plan.index, []).append(position)
        for index, columns in by_plan.items():
            plan = positions[columns[0]]
            self.count[index] += count * len(columns)
            self.flops[index] += plan.flops * count * len(columns)
            # busy time sums instance by instance in program order: a sequential accumulation, not a pairwise sum
            values = durations[:, columns].reshape(-1)
            self.busy_ns[index] = float(np.add.accumulate(np.concatenate(([self.busy_ns[index]], values)))[-1])
            if plan.dma is not None:
                self.dma_bytes += plan.dma.bytes * count * len(columns)
                self.hbm_bytes += plan.dma.hbm_bytes * count * len(columns)
        queues = np.array([plan.queue for plan in positions], dtype=np.int8)
        indices = np.array([plan.index for plan in positions], dtype=np.int64)
        events = self.events
        events.queue.frombytes(np.tile(queues, count).tobytes())
        events.start.frombytes(starts.reshape(-1).tobytes())
        events.end.frombytes(ends.reshape(-1).tobytes())
        events.instruction.frombytes(np.tile(indices, count).astype(np.dtype(events.instruction.typecode)).tobytes())

    def forget_bandwidth_history(self) -> None:
        self._issued_since_forget = 0
        live = [q for q in self.live_queues if DMA_QUEUE_BASE <= q < COLLECTIVE_QUEUE]
        if live:
            self.bandwidth.forget_before(min(self.queue_free[q] for q in live))

    # ---- results ---------------------------------------------------------------------------------------------

    def profile(self, program: Program) -> Profile:
        target = self.target
        busy: dict[str, float] = {}
        opcode_counts: dict[str, int] = {}
        flops_by_family: dict[str, int] = {}
        location_ns: dict[str, float] = {}
        location_counts: dict[str, int] = {}
        stats = []
        for plan in self.plans:
            index = plan.index
            info = InstructionStats(
                plan.id, plan.opcode, QUEUE_NAMES[plan.queue], plan.location,
                self.count[index], self.busy_ns[index], self.flops[index],
            )  # fmt: skip
            stats.append(info)
            if not info.count:
                continue
            busy[info.queue] = busy.get(info.queue, 0.0) + info.busy_ns
            opcode_counts[info.opcode] = opcode_counts.get(info.opcode, 0) + info.count
            if info.flops:
                flops_by_family[plan.family] = flops_by_family.get(plan.family, 0) + info.flops
            location = info.location or "<unknown location>"
            location_ns[location] = location_ns.get(location, 0.0) + info.busy_ns
            location_counts[location] = location_counts.get(location, 0) + info.count
        return Profile(
            target=target.name,
            core_version=target.core_version,
            total_ns=max(self.done, default=0.0),
            busy_ns=busy,
            opcode_counts=opcode_counts,
            dma_bytes=self.dma_bytes,
            hbm_bytes=self.hbm_bytes,
            flops=sum(flops_by_family.values()),
            flops_by_family=flops_by_family,
            peak_flops_by_family={family: target.peak_flops(family) for family in ("fp32", "bf16", "fp8")},
            hbm_bandwidth_bytes_per_ns=target.hbm_bandwidth_gbps,
            instructions=stats,
            events=self.events,
            location_ns=location_ns,
            location_counts=location_counts,
            io_bytes=sum(
                math.prod(binding.shape) * dtypes.itemsize(program.buffers[binding.buffer].dtype)
                for binding in (*program.inputs, *program.outputs)
            ),
        )


# A footprint over all lanes: (memory id, first partition, end partition, first bytes [count], end bytes [count]).
LaneFootprint = tuple[int, int, int, np.ndarray, np.ndarray]


def _footprints(lanes: Lanes, position: int, op: OperandPlan) -> LaneFootprint:
    site = op.site
    shift = lanes.column(position, op.column) * site.itemsize if op.column >= 0 else np.zeros(lanes.count, np.int64)
    lo = site.base + shift + site.low
    return (site.memory_id, site.partition_start, site.partition_end, lo, lo - site.low + site.high)


def _lanes_slice(footprint: LaneFootprint, first: int, stop: int) -> LaneFootprint:
    memory, p0, p1, lo, hi = footprint
    return (memory, p0, p1, lo[first:stop], hi[first:stop])


def _lane_footprint(footprint: LaneFootprint, lane: int) -> Footprint:
    memory, p0, p1, lo, hi = footprint
    return (memory, p0, p1, int(lo[lane]), int(hi[lane]))


def _any_overlap(reads: list[LaneFootprint], writes: list[LaneFootprint], count: int) -> np.ndarray:
    """`_overlaps_any` lane by lane."""
    hit = np.zeros(count, bool)
    for memory, p0, p1, lo, hi in reads:
        for other_memory, q0, q1, other_lo, other_hi in writes:
            if memory == other_memory and p0 < q1 and q0 < p1:
                hit |= (lo < other_hi) & (other_lo < hi)
    return hit


def _overlaps_any(reads: list[Footprint], previous: list[Footprint]) -> bool:
    for memory, p0, p1, lo, hi in reads:
        for other_memory, q0, q1, other_lo, other_hi in previous:
            if memory == other_memory and p0 < q1 and q0 < p1 and lo < other_hi and other_lo < hi:
                return True
    return False
