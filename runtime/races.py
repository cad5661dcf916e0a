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


class RaceChecker:
    """Records accesses as instances issue; raises `RaceError` on the first unordered conflict."""

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
        # per buffer: records [queue, seq, is_write, p0, p1, lo, hi, key, site, shift, info]
        self.records: list[list[list]] = [[] for _ in aliases]
        self.live_queues: Sequence[int] = range(queues)
        self._overlaps: dict[tuple[int, int, int], tuple[int, int] | None] = {}
        self._since_prune = 0

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
        p0, p1 = site.partition_start, site.partition_end
        lo, hi = site.base + shift + site.low, site.base + shift + site.high
        for buffer in self.aliases[site.buffer]:
            for record in self.records[buffer]:
                other_queue = record[0]
                if other_queue == queue or clock[other_queue] >= record[1]:
                    continue  # same queue, or a chain of waits orders them
                if not (site.is_write or record[2]):
                    continue
                if record[4] <= p0 or p1 <= record[3] or record[6] <= lo or hi <= record[5]:
                    continue
                overlap = self._overlap(record[8], record[9], site, shift)
                if overlap is None:
                    continue
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

    def _report(self, site: AccessSite, info: InstanceInfo | tuple, record: list, overlap: tuple[int, int]) -> None:
        other_site: AccessSite = record[8]
        other = record[10] if isinstance(record[10], InstanceInfo) else InstanceInfo(*record[10])
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
        key = (id(site), shift)
        records = self.records[site.buffer]
        # A new access covering exactly the same bytes, ordered after an old one, makes the old one redundant
        # (a write replaces reads and writes; a read replaces reads): anything that races with the old one
        # races with the new one too.
        kept = [
            record
            for record in records
            if not (
                record[7] == key
                and (site.is_write or not record[2])
                and (record[0] == queue or clock[record[0]] >= record[1])
            )
        ]
        kept.append(
            [
                queue,
                clock[queue],
                site.is_write,
                site.partition_start,
                site.partition_end,
                site.base + shift + site.low,
                site.base + shift + site.high,
                key,
                site,
                shift,
                info,
            ]
        )
        self.records[site.buffer] = kept

    def _prune(self) -> None:
        self._since_prune = 0
        live = list(self.live_queues)
        if not live:
            return
        known = [min(self.last_clock[q][component] for q in live) for component in range(self.queues)]
        for buffer, records in enumerate(self.records):
            if records:
                self.records[buffer] = [record for record in records if record[1] > known[record[0]]]
