"""The race checker: proves that every conflicting pair of memory accesses on different queues is ordered.

Two instruction instances conflict when they touch a common byte and at least one of them writes it. On
hardware, instances on different queues are ordered only by semaphores: an instance happens after another if a
chain of waits (`Instruction.waits`, each on the most recent issued instance of an id) and same-queue program
order leads from one to the other. A conflicting pair that no such chain orders is a race: its outcome depends
on timing, which the hardware does not promise to reproduce, so the checker reports it even when the simulated
intervals happen not to overlap. This makes it a verifier for the compiler's synchronisation pass.

Happens-before is tracked with vector clocks (one component per queue). Past accesses are kept as records per
buffer; a record is dropped once it can no longer race with anything: when a later access on an ordered path
covers the same bytes the same way, or when every queue that still has instructions to issue has seen it.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neuron_mlir.runtime.profile import QUEUE_NAMES


class SimulationError(RuntimeError):
    """A program that passed validation misbehaved while running (e.g. a data race)."""


class RaceError(SimulationError):
    """Two unordered instruction instances on different queues touch the same bytes, one of them writing."""


@dataclass
class AccessSite:
    """The static description of one operand, enough to find its bytes for any dynamic offset."""

    role: str
    is_write: bool
    buffer: int
    memory_id: int
    memory_name: str
    partition_start: int
    partition_end: int  # exclusive; 1 in HBM
    base: int  # byte of element 0 within the partition row (HBM: within the merged range) before the register
    itemsize: int
    pattern: tuple[tuple[int, int], ...]  # (step, num) in elements
    low: int  # byte offset of the lowest element relative to base
    high: int  # one past the highest byte relative to base
    register: int  # offset register index, -1 for none

    def byte_offsets(self, shift: int) -> np.ndarray:
        """Sorted start bytes of every element of the access (within one partition)."""
        offsets = np.zeros(1, dtype=np.int64)
        for step, num in self.pattern:
            offsets = (
                offsets[:, None] + step * self.itemsize * np.arange(num, dtype=np.int64)[None, :]
            ).reshape(-1)
        return np.sort(offsets + self.base + shift)


@dataclass
class InstanceInfo:
    """Who did an access: enough to write a clear error."""

    instruction_id: int
    opcode: str
    queue: int
    location: str
    start: float
    end: float

    def describe(self) -> str:
        queue = QUEUE_NAMES[self.queue]
        where = f" at {self.location}" if self.location else ""
        return f"instruction {self.instruction_id} ({self.opcode}, {queue} queue{where})"


def _overlap(a: AccessSite, a_shift: int, b: AccessSite, b_shift: int) -> tuple[int, int] | None:
    """The first common byte range of two accesses (exact, element by element), or None."""
    a_starts = a.byte_offsets(a_shift)
    b_starts = b.byte_offsets(b_shift)
    # b's element [s, s + b.itemsize) meets some a element [t, t + a.itemsize) iff t in (s - a.itemsize, s + b.itemsize)
    first = np.searchsorted(a_starts, b_starts - a.itemsize + 1, side="left")
    hit = first < a_starts.size
    hit[hit] = a_starts[first[hit]] < b_starts[hit] + b.itemsize
    if not hit.any():
        return None
    position = int(np.argmax(hit))
    start = int(max(b_starts[position], a_starts[first[position]]))
    return start, start + min(a.itemsize, b.itemsize)


class _Record:
    """One recorded access: an instance's operand at one shift."""

    __slots__ = ("alive", "bucket", "hi", "info", "lo", "order", "queue", "seq", "shift", "site")

    def __init__(self, queue: int, seq: int, site: AccessSite, shift: int, info: InstanceInfo | tuple, order: int):
        self.queue, self.seq, self.site, self.shift, self.info, self.order = queue, seq, site, shift, info, order
        self.lo = site.base + shift + site.low
        self.hi = site.base + shift + site.high
        self.alive = True
        self.bucket: list[_Record] = []


class _Span:
    """The live records of one kind (reads or writes) in one memory, by first byte (within a partition row on
    chip): the records whose byte hull meets [lo, hi) start in (lo - longest, hi)."""

    __slots__ = ("by_lo", "longest", "los", "stale")

    def __init__(self) -> None:
        self.by_lo: dict[int, list[_Record]] = {}
        self.los: list[int] = []  # sorted; may still hold first bytes whose records are all gone (`stale` of them)
        self.longest = 0
        self.stale = 0

    def overlapping(self, lo: int, hi: int) -> list[_Record]:
        los = self.los
        first = bisect.bisect_right(los, lo - self.longest)
        last = bisect.bisect_left(los, hi)
        found: list[_Record] = []
        by_lo = self.by_lo
        for start in los[first:last]:
            for record in by_lo.get(start, ()):
                if record.hi > lo:
                    found.append(record)
        return found

    def bucket(self, lo: int) -> list[_Record]:
        bucket = self.by_lo.get(lo)
        if bucket is None:
            bucket = self.by_lo[lo] = []
            los = self.los
            position = bisect.bisect_left(los, lo)
            if position < len(los) and los[position] == lo:
                self.stale -= 1  # still listed from records that are gone
            else:
                los.insert(position, lo)
        return bucket

    def drop(self, record: _Record) -> None:
        bucket = record.bucket
        bucket.remove(record)
        if not bucket:
            del self.by_lo[record.lo]
            self.stale += 1
            if self.stale > 16 and self.stale > len(self.los) // 2:
                self.los = sorted(self.by_lo)
                self.stale = 0


class RaceChecker:
    """Records accesses as instances issue; raises `RaceError` on the first unordered conflict.

    Records live per memory and kind (reads and writes apart), ordered by first byte, so an access only looks at
    records whose byte hull can meet its own (only records of buffers sharing bytes with its
    own can): reads at writes only, writes at both. The record reported is the one a plain list of records per
    buffer would give: of the aliasing buffers in the order of `aliases`, the first with a racing record, and its
    earliest recorded racing record. Records known to every queue that may still issue are dropped
    periodically, in issue order per queue."""

    _PRUNE_EVERY = 64

    def __init__(
        self,
        queues: int,
        aliases: Sequence[Sequence[int]],
        written: Sequence[bool],
        buffer_names: Sequence[str] = (),
    ) -> None:
        self.queues = queues
        self.buffer_names = buffer_names
        self.aliases = aliases  # buffer -> buffers sharing bytes with it (itself included)
        self.written = written  # buffer -> can any instruction write bytes it shares
        self.last_clock: list[list[int]] = [[0] * queues for _ in range(queues)]
        self.sequence = [0] * queues
        self.instance_clock: dict[int, tuple[list[int], int]] = {}  # latest instance of each id: (clock, queue)
        # per memory id: (write records, read records)
        self.records: dict[int, tuple[_Span, _Span]] = {}
        self.by_queue: list[deque[_Record]] = [deque() for _ in range(queues)]  # records in issue order
        self.live_queues: Sequence[int] = range(queues)
        self._overlaps: dict[tuple[int, int, int], tuple[int, int] | None] = {}
        self._since_prune = 0
        self._order = 0
        self._dead = [0] * queues  # records in `by_queue` that were replaced, per queue

    def issue(
        self,
        plan_index: int,
        queue: int,
        waits: Sequence[int],
        sites: Sequence[AccessSite],
        shifts: Sequence[int],
        info: InstanceInfo | tuple,
    ) -> None:
        """One instance issues: `info` is an InstanceInfo or the tuple of its fields (built only for a report)."""
        clock = self.last_clock[queue]
        merged = False
        instance_clock = self.instance_clock
        for wait in waits:
            known = instance_clock.get(wait)
            if known is None:
                continue
            other, other_queue = known
            if clock[other_queue] >= other[other_queue]:
                # Already after that instance: clocks of one queue only grow, so whoever passed on its sequence
                # number passed on everything it had seen too, and the merge would change nothing.
                continue
            clock = [x if x >= y else y for x, y in zip(clock, other, strict=False)]
            merged = True
        if not merged:
            clock = list(clock)
        sequence = self.sequence[queue] + 1
        self.sequence[queue] = sequence
        clock[queue] = sequence
        self.last_clock[queue] = clock
        instance_clock[plan_index] = (clock, queue)
        for site, shift in zip(sites, shifts, strict=False):
            self._check(site, shift, queue, clock, info)
        for site, shift in zip(sites, shifts, strict=False):
            self._record(site, shift, queue, clock, info)
        self._since_prune += 1
        if self._since_prune >= self._PRUNE_EVERY:
            self._prune()

    def _check(self, site: AccessSite, shift: int, queue: int, clock: list[int], info: InstanceInfo | tuple) -> None:
        entry = self.records.get(site.memory_id)
        if entry is None:
            return
        p0, p1 = site.partition_start, site.partition_end
        lo, hi = site.base + shift + site.low, site.base + shift + site.high
        candidates: list[_Record] = []
        for span in entry if site.is_write else entry[:1]:  # a read races with writes only
            for record in span.overlapping(lo, hi):
                other_queue = record.queue
                if other_queue != queue and clock[other_queue] < record.seq:
                    other = record.site
                    if other.partition_start < p1 and p0 < other.partition_end:
                        candidates.append(record)  # unordered: a race if the bytes really meet
        if len(candidates) > 1:
            candidates.sort(key=lambda record: (record.site.buffer, record.order))
        for record in candidates:
            overlap = self._overlap(record.site, record.shift, site, shift)
            if overlap is not None:
                self._report(site, info, record, overlap)

    def _overlap(self, a: AccessSite, a_shift: int, b: AccessSite, b_shift: int) -> tuple[int, int] | None:
        # Overlap depends only on the two sites and their relative shift, which loops repeat (e.g. two queues
        # storing the two halves of every output tile), so the element-wise answer is computed once.
        key = (id(a), id(b), b_shift - a_shift)
        if key not in self._overlaps:
            if len(self._overlaps) > 100_000:
                self._overlaps.clear()
            self._overlaps[key] = _overlap(a, 0, b, b_shift - a_shift)
        found = self._overlaps[key]
        return None if found is None else (found[0] + a_shift, found[1] + a_shift)

    def _report(self, site: AccessSite, info: InstanceInfo | tuple, record: _Record, overlap: tuple[int, int]) -> None:
        other_site = record.site
        other = record.info if isinstance(record.info, InstanceInfo) else InstanceInfo(*record.info)
        info = info if isinstance(info, InstanceInfo) else InstanceInfo(*info)
        partitions = max(site.partition_start, other_site.partition_start)
        where = f"{site.memory_name} bytes {overlap[0]}..{overlap[1] - 1}"
        if site.memory_name != "HBM":
            where += f" of partition {partitions}"
        if site.buffer < len(self.buffer_names):
            where += f" (buffer '{self.buffer_names[site.buffer]}')"
        verb = "writes" if site.is_write else "reads"
        other_verb = "wrote" if other_site.is_write else "read"
        raise RaceError(
            f"data race on {where}: {info.describe()} {verb} them (operand '{site.role}') while "
            f"{other.describe()} {other_verb} them (operand '{other_site.role}'), and no chain of waits orders "
            f"the two (simulated at {other.start:.0f}..{other.end:.0f} ns and {info.start:.0f}..{info.end:.0f} "
            f"ns); add a wait on instruction {other.instruction_id} to instruction {info.instruction_id}"
        )

    def _record(
        self, site: AccessSite, shift: int, queue: int, clock: list[int], info: InstanceInfo | tuple
    ) -> None:
        if not site.is_write and not self.written[site.buffer]:
            return  # nobody writes these bytes: reads of them can never race
        entry = self.records.get(site.memory_id)
        if entry is None:
            entry = self.records[site.memory_id] = (_Span(), _Span())
        span = entry[0] if site.is_write else entry[1]
        span.longest = max(span.longest, site.high - site.low)
        bucket = span.bucket(site.base + shift + site.low)
        # A new access covering exactly the same bytes (same site, same shift: same kind), ordered after an old
        # one, makes the old one redundant: anything that races with the old one races with the new one too.
        for record in [
            r for r in bucket if r.site is site and r.shift == shift and (r.queue == queue or clock[r.queue] >= r.seq)
        ]:
            record.alive = False
            bucket.remove(record)
            self._dead[record.queue] += 1
        record = _Record(queue, clock[queue], site, shift, info, self._order)
        self._order += 1
        record.bucket = bucket
        bucket.append(record)
        pending = self.by_queue[queue]
        pending.append(record)
        if self._dead[queue] > 64 and self._dead[queue] > len(pending) // 2:
            self.by_queue[queue] = deque(r for r in pending if r.alive)
            self._dead[queue] = 0

    def _prune(self) -> None:
        """Drop records every queue that may still issue is ordered after: nothing can race with them any more."""
        self._since_prune = 0
        live = list(self.live_queues)
        if not live:
            return
        for queue in range(self.queues):
            known = min(self.last_clock[q][queue] for q in live)
            pending = self.by_queue[queue]
            while pending and pending[0].seq <= known:
                record = pending.popleft()
                if not record.alive:
                    self._dead[queue] -= 1
                else:
                    record.alive = False
                    site = record.site
                    entry = self.records[site.memory_id]
                    (entry[0] if site.is_write else entry[1]).drop(record)
