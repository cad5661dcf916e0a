"""The race checker: proves that every conflicting pair of memory accesses on different queues is ordered.

Two instruction instances conflict when they touch a common byte and at least one of them writes it. On
hardware, instances on different queues are ordered only by semaphores: an instance happens after another if a
chain of waits (`Instruction.waits`, each on the most recent issued instance of an id) and same-queue program
order leads from one to the other. A conflicting pair that no such chain orders is a race: its outcome depends
on timing, which the hardware does not promise to reproduce, so the checker reports it even when the simulated
intervals happen not to overlap. This makes it a verifier for the compiler's synchronisation pass.

Happens-before is tracked with vector clocks (one component per queue). Past accesses are kept as records (per
memory, kind and queue, in issue order); a record is dropped once it can no longer race with anything: when a
later access on an ordered path covers the same bytes the same way, or when every queue that may still issue has
seen it (`RaceChecker`).

A traced loop nest (`runtime.lanes`) can be checked as a whole (`RaceChecker.issue_lanes`): its lanes issue the
same instructions, so once their clocks settle, happens-before repeats from lane to lane with a fixed growth,
proved from the references of every clock; unordered pairs are then bounds on lane distances, conflicts byte
overlaps over all lanes at once. The pairs to test (of the nest's operands with one another, with the records, with
earlier nests) are those whose byte hulls meet, found by sorting the hulls, and filtered by queue, kind, partitions
and happens-before as arrays, so the check costs no Python step per record or per pair of operands that cannot
meet. Its verdict is the instance-by-instance one; a race it finds is reported by running the program instance by
instance (`RaceFound`), so the first race and its words are always the same.

Single instances may be checked in batches (`RaceChecker(deferred=True)`, the simulator's fast path): their
clocks advance as they issue, and `flush` checks up to `FLUSH_EVERY` of them at once against each other and the
records, pairs of accesses found by sorting byte ranges rather than by walking records per access. A race found
so is reported the same way as one found in a nest.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from neuron_mlir.runtime.profile import QUEUE_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from neuron_mlir.runtime.lanes import Lanes
    from neuron_mlir.runtime.plan import OperandPlan


class SimulationError(RuntimeError):
    """A program that passed validation misbehaved while running (e.g. a data race)."""


class RaceError(SimulationError):
    """Two unordered instruction instances on different queues touch the same bytes, one of them writing."""


class RaceFound(Exception):
    """A check of many instances at once (`RaceChecker.issue_lanes`) found a race. Which race an instance-by-
    instance run reports first, and in which words, is that run's to say: the caller runs the program that way."""


# Sites with at most this many elements keep their sorted element offsets.
_CACHED_OFFSETS = 1 << 20


@dataclass(slots=True)
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
    _sorted: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _runs: tuple[np.ndarray, int] | None = field(default=None, init=False, repr=False, compare=False)

    def _starts(self, pattern: tuple[tuple[int, int], ...]) -> np.ndarray:
        """Sorted start bytes of the positions `pattern` (a prefix of the site's, or all of it) walks from base."""
        offsets = np.zeros(1, dtype=np.int64)
        for step, num in pattern:
            offsets = (offsets[:, None] + step * self.itemsize * np.arange(num, dtype=np.int64)[None, :]).reshape(-1)
        return np.sort(offsets + self.base)

    def byte_offsets(self, shift: int) -> np.ndarray:
        """Sorted start bytes of every element of the access (within one partition)."""
        found = self._sorted
        if found is None:
            found = self._starts(self.pattern)
            if found.size <= _CACHED_OFFSETS:  # kept with the (static) site: loops ask again and again
                self._sorted = found
        return found + shift

    def forget_offsets(self) -> None:
        """Drop the offsets `byte_offsets` and `byte_runs` keep (up to 8 MiB each): only race checks read them, and
        a program's race checks are done in one run."""
        self._sorted = None
        self._runs = None

    def byte_runs(self, shift: int) -> tuple[np.ndarray, int]:
        """Sorted start bytes of the access's runs of adjacent elements, and the runs' length in bytes: a run is
        the innermost dimension when its elements are adjacent (step 1), else one element. The runs cover exactly
        the elements' bytes, with far fewer entries than `byte_offsets` for row-wise accesses."""
        found = self._runs
        if found is None:
            pattern, length = self.pattern, self.itemsize
            if pattern and pattern[-1][0] == 1:
                length = pattern[-1][1] * self.itemsize
                pattern = pattern[:-1]
            found = (self._starts(pattern), length)
            if found[0].size <= _CACHED_OFFSETS:
                self._runs = found
        return found[0] + shift, found[1]


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


# InstanceInfo's fields in order: what the issue loop passes, the object being built only for a report
InstanceFields = tuple[int, str, int, str, float, float]


def _runs_meet(a: AccessSite, a_shift: int, b: AccessSite, b_shift: int) -> bool:
    """Whether any byte of `a` is a byte of `b`, from their runs (`AccessSite.byte_runs`)."""
    a_starts, a_length = a.byte_runs(a_shift)
    b_starts, b_length = b.byte_runs(b_shift)
    # b's run [s, s + b_length) meets some a run [t, t + a_length) iff t in (s - a_length, s + b_length); a's runs
    # all have one length, so the first start past s - a_length decides
    first = np.searchsorted(a_starts, b_starts - a_length + 1, side="left")
    hit = first < a_starts.size
    return bool((a_starts[first[hit]] < b_starts[hit] + b_length).any())


def _overlap(a: AccessSite, a_shift: int, b: AccessSite, b_shift: int) -> tuple[int, int] | None:
    """The first common byte range of two accesses (exact, element by element), or None."""
    if not _runs_meet(a, a_shift, b, b_shift):  # the common case, decided on runs rather than elements
        return None
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

    __slots__ = ("alive", "hi", "info", "lo", "order", "queue", "seq", "shift", "site")

    def __init__(
        self, queue: int, seq: int, site: AccessSite, shift: int, info: InstanceInfo | InstanceFields, order: int
    ):
        self.queue, self.seq, self.site, self.shift, self.info, self.order = queue, seq, site, shift, info, order
        self.lo = site.base + shift + site.low
        self.hi = site.base + shift + site.high
        self.alive = True


class _Issued:
    """The records of one queue, one memory and one kind (reads or writes), in issue order (so by sequence
    number): the ones an instance is not ordered after are a suffix, found by bisection."""

    __slots__ = ("dead", "records", "seqs", "start")

    def __init__(self) -> None:
        self.records: list[_Record] = []
        self.seqs: list[int] = []
        self.start = 0  # records before it are pruned
        self.dead = 0  # records after it that were replaced

    def unordered(self, known: int) -> list[_Record]:
        """Records with a sequence number above `known` (the querying clock's entry for this queue)."""
        first = bisect.bisect_right(self.seqs, known, self.start)
        return self.records[first:]

    def prune(self, known: int) -> list[_Record]:
        """Forget the records every future instance is ordered after (sequence number at most `known`); return
        those that were still alive."""
        start = bisect.bisect_right(self.seqs, known, self.start)
        dropped = []
        for record in self.records[self.start : start]:
            if record.alive:
                record.alive = False
                dropped.append(record)
            else:
                self.dead -= 1
        self.start = start
        if start > 64 and start > len(self.records) // 2:
            del self.records[:start], self.seqs[:start]
            self.start = 0
        return dropped

    def compact(self) -> None:
        kept = [record for record in self.records[self.start :] if record.alive]
        self.records = kept
        self.seqs = [record.seq for record in kept]
        self.start = self.dead = 0


class _NestRecord:
    """The accesses of one operand of one position of a nest, over a run of its lanes: lane t (from 0) is at byte
    shift `shifts[t]` and has sequence number `first_seq + t * growth` on `queue` (`RaceChecker.issue_lanes`)."""

    __slots__ = ("alive", "first_seq", "growth", "hi", "last_seq", "lo", "queue", "shifts", "site")

    def __init__(self, site: AccessSite, queue: int, shifts: np.ndarray, first_seq: int, growth: int) -> None:
        self.site, self.queue, self.shifts, self.first_seq, self.growth = site, queue, shifts, first_seq, growth
        self.last_seq = first_seq + (shifts.size - 1) * growth
        self.lo = site.base + int(shifts.min()) + site.low
        self.hi = site.base + int(shifts.max()) + site.high
        self.alive = True

    def unordered_from(self, known: int) -> int:
        """The first lane whose sequence number is above `known` (all lanes from it on are)."""
        if known < self.first_seq:
            return 0
        return (known - self.first_seq) // self.growth + 1


class RaceChecker:
    """Records accesses as instances issue; raises `RaceError` on the first unordered conflict.

    Records are kept per memory, kind (reads and writes apart) and queue, in issue order, so an access looks only
    at records it is not ordered after (per queue, those with a sequence number its clock has not seen) and of
    those only at ones whose byte hull meets its own (only records of buffers sharing bytes with its own can):
    reads at writes only, writes at both. The record reported is the one a plain list of records per buffer would
    give: of the buffers sharing bytes with its own, in buffer order, the first with a racing record, and its
    earliest recorded racing record. A record is dropped when a later access on an ordered path covers the same
    bytes the same way, or when no instance still to come can race with it: periodically, every queue the rest of
    the program may issue to is checked for what its next instance will have seen (its own clock, and for a queue
    with nothing more in the current top-level node, the clocks of what its next instruction waits on)."""

    _PRUNE_EVERY = 64
    # Deferred instances checked at once (`flush`): enough to amortise the NumPy calls of a check.
    FLUSH_EVERY = 512

    def __init__(
        self,
        queues: int,
        written: Sequence[bool],
        buffer_names: Sequence[str] = (),
        *,
        deferred: bool = False,
    ) -> None:
        self.queues = queues
        # Checks of single instances done in batches (`flush`): a race is then raised as `RaceFound`.
        self.deferred = deferred
        self._pending: list[tuple[list[int], int, Sequence[AccessSite], Sequence[int], InstanceFields]] = []
        self.batched_instances = 0  # instances checked in batches, and the batches
        self.batches = 0
        self.buffer_names = buffer_names
        self.written = written  # buffer -> can any instruction write bytes it shares
        self.last_clock: list[list[int]] = [[0] * queues for _ in range(queues)]
        self.sequence = [0] * queues
        self.instance_clock: dict[int, tuple[list[int], int]] = {}  # latest instance of each id: (clock, queue)
        # per memory id: (writes, reads), each per queue that has any
        self.records: dict[int, tuple[dict[int, _Issued], dict[int, _Issued]]] = {}
        self.by_site: dict[int, dict[int, list[_Record]]] = {}  # site -> shift -> its live records
        # per memory id: (writes, reads) of nests checked as a whole, kept in compact form
        self.nest_records: dict[int, tuple[list[_NestRecord], list[_NestRecord]]] = {}
        # Queues the rest of the program may issue to, and for those with nothing left in the current top-level
        # node, the instructions their next instruction waits on (set by the caller per top-level node).
        self.live_queues: Sequence[int] = range(queues)
        self.next_waits: Mapping[int, Sequence[int]] = {}
        self._overlaps: dict[tuple[int, int, int], tuple[int, int] | None] = {}
        self._since_prune = 0
        self._order = 0

    def issue(
        self,
        plan_index: int,
        queue: int,
        waits: Sequence[int],
        sites: Sequence[AccessSite],
        shifts: Sequence[int],
        info: InstanceInfo | InstanceFields,
    ) -> list[int]:
        """One instance issues: `info` is an InstanceInfo or the tuple of its fields (built only for a report).
        Returns its clock."""
        clock = self._merged(self.last_clock[queue], waits)
        if clock is self.last_clock[queue]:
            clock = list(clock)
        sequence = self.sequence[queue] + 1
        self.sequence[queue] = sequence
        clock[queue] = sequence
        self.last_clock[queue] = clock
        self.instance_clock[plan_index] = (clock, queue)
        if self.deferred:
            self._pending.append((clock, queue, sites, shifts, info))  # type: ignore[arg-type]
            if len(self._pending) >= self.FLUSH_EVERY:
                self.flush()
            return clock
        for site, shift in zip(sites, shifts, strict=False):
            self._check(site, shift, queue, clock, info)
        for site, shift in zip(sites, shifts, strict=False):
            self._record(site, shift, queue, clock, info)
        self._since_prune += 1
        if self._since_prune >= self._PRUNE_EVERY:
            self._prune()
        return clock

    def _merged(self, clock: list[int], waits: Sequence[int]) -> list[int]:
        """`clock` merged with the clocks of the latest instances of `waits` (`clock` itself if that adds nothing)."""
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
        return clock

    def _check(
        self, site: AccessSite, shift: int, queue: int, clock: list[int], info: InstanceInfo | InstanceFields
    ) -> None:
        p0, p1 = site.partition_start, site.partition_end
        lo, hi = site.base + shift + site.low, site.base + shift + site.high
        nests = self.nest_records.get(site.memory_id)
        if nests is not None:
            for group in nests if site.is_write else nests[:1]:
                for nest in group:
                    known = clock[nest.queue]
                    if nest.queue == queue or nest.last_seq <= known or nest.lo >= hi or lo >= nest.hi:
                        continue
                    other = nest.site
                    if other.partition_end <= p0 or p1 <= other.partition_start or not nest.alive:
                        continue
                    self._overlapping(other, 0, site, shift - nest.shifts[nest.unordered_from(known) :])
        entry = self.records.get(site.memory_id)
        if entry is None:
            return
        candidates: list[_Record] = []
        for per_queue in entry if site.is_write else entry[:1]:  # a read races with writes only
            for other_queue, issued in per_queue.items():
                known = clock[other_queue]
                if other_queue == queue or not issued.seqs or issued.seqs[-1] <= known:
                    continue  # the same queue, or every record of that queue is ordered before this access
                for record in issued.unordered(known):
                    if record.lo < hi and lo < record.hi and record.alive:
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

    def _report(
        self, site: AccessSite, info: InstanceInfo | InstanceFields, record: _Record, overlap: tuple[int, int]
    ) -> None:
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
        self, site: AccessSite, shift: int, queue: int, clock: list[int], info: InstanceInfo | InstanceFields
    ) -> None:
        if not site.is_write and not self.written[site.buffer]:
            return  # nobody writes these bytes: reads of them can never race
        entry = self.records.get(site.memory_id)
        if entry is None:
            entry = self.records[site.memory_id] = ({}, {})
        per_queue = entry[0] if site.is_write else entry[1]
        issued = per_queue.get(queue)
        if issued is None:
            issued = per_queue[queue] = _Issued()
        record = _Record(queue, clock[queue], site, shift, info, self._order)
        self._order += 1
        by_shift = self.by_site.get(id(site))
        if by_shift is None:
            by_shift = self.by_site[id(site)] = {}
        same = by_shift.get(shift)
        if same is None:
            by_shift[shift] = [record]
        else:
            # A new access covering exactly the same bytes (same site, same shift: same kind), ordered after an
            # old one, makes the old one redundant: anything that races with the old one races with the new one.
            kept = []
            for old in same:
                if old.alive and (old.queue == queue or clock[old.queue] >= old.seq):
                    old.alive = False
                    self._issued(old).dead += 1
                elif old.alive:
                    kept.append(old)
            kept.append(record)
            by_shift[shift] = kept
        issued.records.append(record)
        issued.seqs.append(record.seq)
        if issued.dead > 64 and issued.dead > (len(issued.records) - issued.start) // 2:
            issued.compact()

    def _issued(self, record: _Record) -> _Issued:
        site = record.site
        entry = self.records[site.memory_id]
        return (entry[0] if site.is_write else entry[1])[record.queue]

    def _prune(self) -> None:
        """Drop records that no instance still to come can race with."""
        self._since_prune = 0
        known = self._known()
        if known is None:
            return
        for entry in self.records.values():
            for per_queue in entry:
                for queue, issued in per_queue.items():
                    if issued.start == len(issued.seqs) or issued.seqs[issued.start] > known[queue]:
                        continue
                    for record in issued.prune(known[queue]):
                        self._forget(record)
        for nests in self.nest_records.values():
            for group in nests:
                if any(nest.last_seq <= known[nest.queue] for nest in group):
                    for nest in group:
                        nest.alive = nest.last_seq > known[nest.queue]
                    group[:] = [nest for nest in group if nest.alive]

    def _known(self) -> list[int] | None:
        """Per queue, the sequence number every instance still to come has seen at least (None: none to come).

        What each live queue's next instance will have seen, at least: its own clock, merged (for a queue with
        nothing more in this top-level node) with the clocks its next instruction's waits have now."""
        live = list(self.live_queues)
        if not live:
            return None
        seen = [self._merged(self.last_clock[q], self.next_waits.get(q, ())) for q in live]
        return [min(clock[component] for clock in seen) for component in range(self.queues)]

    def flush(self) -> None:
        """Check and record the instances `issue` deferred (`deferred`), all at once.

        The verdict is the one `issue` gives instance by instance: for each pending access, every recorded access
        and every earlier pending one it is not ordered after (on another queue, one of the two writing, byte
        hulls meeting) is a candidate, found for all pairs at once with NumPy; a candidate whose bytes really meet
        is a race (`RaceFound`). Records that an access on an ordered path would have replaced meanwhile race with
        whatever raced with the access that replaced them, so checking them too changes no verdict. Then the
        accesses are recorded, except those every instance still to come is ordered after (a prune would drop
        them at once), and older records are pruned."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self.batches += 1
        self.batched_instances += len(pending)
        sites: list[AccessSite] = []
        shifts: list[int] = []
        owner: list[int] = []
        for number, (_, _, instance_sites, instance_shifts, _) in enumerate(pending):
            for site, shift in zip(instance_sites, instance_shifts, strict=False):
                sites.append(site)
                shifts.append(shift)
                owner.append(number)
        if sites:
            self._check_pending(pending, sites, shifts, owner)
        known = self._known()
        for clock, queue, instance_sites, instance_shifts, info in pending:
            if known is not None and clock[queue] <= known[queue]:
                continue  # every instance still to come is ordered after it
            for site, shift in zip(instance_sites, instance_shifts, strict=False):
                self._record(site, shift, queue, clock, info)
        self._prune()

    def _check_pending(
        self,
        pending: list[tuple[list[int], int, Sequence[AccessSite], Sequence[int], InstanceFields]],
        sites: list[AccessSite],
        shifts: list[int],
        owner: list[int],
    ) -> None:
        """`flush`'s check: raise `RaceFound` if a pending access races with a record or an earlier one."""
        clocks = np.array([clock for clock, _, _, _, _ in pending], dtype=np.int64)  # [instance, queue]
        number = np.array(owner, dtype=np.int64)
        queue = np.array([pending[k][1] for k in owner], dtype=np.int64)
        view = clocks[number]  # [access, queue]: what the access's instance has seen
        memory = np.array([site.memory_id for site in sites], dtype=np.int64)
        writes = np.array([site.is_write for site in sites], dtype=bool)
        p0 = np.array([site.partition_start for site in sites], dtype=np.int64)
        p1 = np.array([site.partition_end for site in sites], dtype=np.int64)
        shift = np.array(shifts, dtype=np.int64)
        lo = np.array([site.base + site.low for site in sites], dtype=np.int64) + shift
        hi = np.array([site.base + site.high for site in sites], dtype=np.int64) + shift

        # the records some pending access has not seen: only they can race with one
        lowest_seen = clocks.min(axis=0)
        records: list[_Record] = []
        for memory_id, entry in self.records.items():
            if not (memory == memory_id).any():
                continue
            for per_queue in entry:
                for other_queue, issued in per_queue.items():
                    if issued.seqs and issued.seqs[-1] > lowest_seen[other_queue]:
                        records.extend(r for r in issued.unordered(int(lowest_seen[other_queue])) if r.alive)
        # records first (issued before every pending access: order -1), then the pending accesses
        count = len(records)
        order = np.concatenate((np.full(count, -1, np.int64), number))
        all_queue = np.concatenate((np.array([r.queue for r in records], dtype=np.int64), queue))
        all_seq = np.concatenate((np.array([r.seq for r in records], dtype=np.int64), clocks[number, queue]))
        all_memory = np.concatenate((np.array([r.site.memory_id for r in records], dtype=np.int64), memory))
        all_writes = np.concatenate((np.array([r.site.is_write for r in records], dtype=bool), writes))
        all_p0 = np.concatenate((np.array([r.site.partition_start for r in records], dtype=np.int64), p0))
        all_p1 = np.concatenate((np.array([r.site.partition_end for r in records], dtype=np.int64), p1))
        all_lo = np.concatenate((np.array([r.lo for r in records], dtype=np.int64), lo))
        all_hi = np.concatenate((np.array([r.hi for r in records], dtype=np.int64), hi))
        first, second = _meeting_pairs(all_memory, all_lo, all_hi)
        swap = order[first] > order[second]
        a, b = np.where(swap, second, first), np.where(swap, first, second)  # a issued before b
        candidate = (
            (order[a] < order[b])
            & (all_queue[a] != all_queue[b])
            & (all_writes[a] | all_writes[b])
            & (all_p0[a] < all_p1[b])
            & (all_p0[b] < all_p1[a])
        )
        a, b = a[candidate], b[candidate]
        unordered = view[b - count, all_queue[a]] < all_seq[a]  # b has not seen a
        for earlier, later in zip(a[unordered].tolist(), (b[unordered] - count).tolist(), strict=True):
            if earlier < count:
                record = records[earlier]
                other, other_shift = record.site, record.shift
            else:
                other, other_shift = sites[earlier - count], shifts[earlier - count]
            if self._overlap(other, other_shift, sites[later], shifts[later]) is not None:
                raise RaceFound

        # nests checked as a whole earlier: the pairs of an access and a nest whose hulls meet, at once
        in_use = set(memory.tolist())
        nests = [
            nest
            for memory_id, groups in self.nest_records.items()
            if memory_id in in_use
            for group in groups
            for nest in group
            if nest.alive
        ]
        if not nests:
            return
        later, other, met = _meeting_nests(memory, lo, hi, nests)
        nest_queue = met.queue
        near = (
            (queue[later] != nest_queue)
            & (writes[later] | met.is_write)
            & (view[later, nest_queue] < met.last_seq)
            & (met.partition_start < p1[later])
            & (p0[later] < met.partition_end)
        )
        for access, j in zip(later[near].tolist(), other[near].tolist(), strict=True):
            nest = nests[j]
            known = int(view[access, nest.queue])
            relative = shifts[access] - nest.shifts[nest.unordered_from(known) :]
            self._overlapping(nest.site, 0, sites[access], relative)

    def _forget(self, record: _Record) -> None:
        """Remove a record that is no longer alive from the index by site and shift."""
        by_shift = self.by_site[id(record.site)]
        same = by_shift[record.shift]
        same.remove(record)
        if not same:
            del by_shift[record.shift]

    # ---- a traced loop nest at once --------------------------------------------------------------------------

    # Lanes a nest issues one by one at most while its clocks settle into their periodic form.
    MAX_SETTLING_LANES = 8
    # Nests with fewer instances than this are issued one by one: the checks of a whole nest cost more.
    MIN_NEST_INSTANCES = 256

    def issue_lanes(self, lanes: Lanes, starts: np.ndarray, ends: np.ndarray) -> None:
        """Every instance of a traced nest (`runtime.lanes`) in program order, with the verdict and the records
        `issue` one by one would leave; `starts` and `ends` [lanes, positions] are their simulated times.

        All lanes issue the same instructions, so once the first lanes have settled, happens-before repeats from
        lane to lane: each clock entry of a position either stays as it is or grows by that queue's instances per
        lane. Lanes go through `issue` one by one until `_periodic` proves, from the last two of them and the
        references every clock is the maximum of (the queue's previous instance, the waits' latest instances),
        that the clocks keep that form through the last lane (or `MAX_SETTLING_LANES` have passed: then all of
        them go through `issue`). For the lanes after that, instance (k, i) is unordered with an earlier instance
        (k - d, j) of another queue exactly for distances d below a bound per pair of positions, and with a
        recorded access exactly for a range of lanes per record; conflicts are byte overlaps, tested over all
        lanes at once. A race raises `RaceFound`. Afterwards only the records `issue` would still hold for later
        instances are recorded: the last access to each byte range per operand, unless every queue still to issue
        is already ordered after it."""
        count, width = lanes.count, len(lanes.positions)
        clocks: list[list[list[int]]] = []
        instances = lanes.instances()
        whole = count * width >= self.MIN_NEST_INSTANCES
        entry_clocks = self._entry_clocks(lanes) if whole else {}
        for lane in range(count):
            if whole and 2 <= lane <= self.MAX_SETTLING_LANES:
                pattern = self._periodic(lanes, clocks[-2], clocks[-1], entry_clocks, count - lane)
                if pattern is not None:
                    anchor, slopes = pattern  # clock of (lane - 1 + t, i) = anchor[i] + t * slopes[i]
                    self.flush()
                    shifts = _Shifts(lanes, lane)
                    if self._check_within(lanes, anchor, slopes, shifts, lane) and self._check_against_records(
                        lanes, anchor, slopes, shifts, lane
                    ):
                        self._advance(lanes, anchor, slopes, shifts, lane)
                        return
            row = []
            for position in range(width):
                plan, values = next(instances)
                info = (plan.id, plan.opcode, plan.queue, plan.location, float(starts[lane, position]),
                        float(ends[lane, position]))  # fmt: skip
                row.append(self.issue(plan.index, plan.queue, plan.waits, plan.sites, plan.shifts(values), info))
            clocks.append(row)
            del clocks[:-2]

    def _entry_clocks(self, lanes: Lanes) -> dict[int, list[int]]:
        """Clocks of the latest instances of instructions outside the nest (constant while it runs)."""
        inside = {plan.index for plan in lanes.positions}
        found: dict[int, list[int]] = {}
        for plan in lanes.positions:
            for wait in plan.waits:
                if wait not in inside and wait in self.instance_clock:
                    found[wait] = self.instance_clock[wait][0]
        return found

    def _periodic(
        self,
        lanes: Lanes,
        before: list[list[int]],
        last: list[list[int]],
        entry_clocks: dict[int, list[int]],
        remaining: int,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(clocks of the last base lane, growth per lane) [positions, queues] when the clock of position i,
        `remaining` lanes on, is exactly anchor[i] + lanes * slopes[i]; else None.

        Each entry's growth is 0 or `step` (its queue's instances per lane; for the own queue always `step`). By
        induction over the instances in order: a clock entry is the maximum of its references' entries, each of
        them (by induction) anchor + lanes * slope; a maximum of those with slope `step` and of constants has the
        form anchor + lanes * slope for all remaining lanes iff, at the last base lane, the growing ones already
        dominate (slope `step`), or none grows or they stay below the constants through the last lane (slope 0)."""
        positions = lanes.positions
        step = np.zeros(self.queues, np.int64)
        for plan in positions:
            step[plan.queue] += 1
        anchor = np.array(last, dtype=np.int64)
        previous = np.array(before, dtype=np.int64)
        slopes = anchor - previous
        if not ((slopes == 0) | (slopes == step[None, :])).all():
            return None
        width = len(positions)
        queues = np.array([plan.queue for plan in positions], dtype=np.int64)
        if (slopes[np.arange(width), queues] != step[queues]).any():
            return None
        # Each position's references at the last base lane, as rows of `values` (positions' clocks at the last base
        # lane, then at the one before, then the entry clocks of waits on instructions outside the nest): its
        # queue's previous instance, then the latest instance of each wait.
        entries = list(entry_clocks)
        entry_row = {wait: 2 * width + number for number, wait in enumerate(entries)}
        latest: dict[int, int] = {}  # plan -> its latest position so far in the lane
        last_of_plan = {plan.index: position for position, plan in enumerate(positions)}
        last_on_queue = {plan.queue: position for position, plan in enumerate(positions)}
        previous_on_queue: dict[int, int] = {}
        rows: list[int] = []
        starts: list[int] = []
        for position, plan in enumerate(positions):
            starts.append(len(rows))
            if plan.queue in previous_on_queue:
                rows.append(previous_on_queue[plan.queue])
            else:
                rows.append(width + last_on_queue[plan.queue])
            for wait in plan.waits:
                if wait in latest:
                    rows.append(latest[wait])
                elif wait in last_of_plan:
                    rows.append(width + last_of_plan[wait])
                elif wait in entry_row:
                    rows.append(entry_row[wait])
            latest[plan.index] = position
            previous_on_queue[plan.queue] = position
        growth = slopes > 0
        values = [anchor, previous]
        grows_of = [growth, growth]
        if entries:
            values.append(np.array([entry_clocks[wait] for wait in entries], dtype=np.int64))
            grows_of.append(np.zeros((len(entries), self.queues), bool))
        index = np.array(rows, dtype=np.int64)
        table = np.concatenate(values)[index]
        grows = np.concatenate(grows_of)[index]
        lowest = -(2**62)  # below any clock entry, and far from overflowing when grown
        first_rows = np.array(starts, dtype=np.int64)
        top_growing = np.maximum.reduceat(np.where(grows, table, lowest), first_rows, axis=0)
        top_still = np.maximum.reduceat(np.where(grows, lowest, table), first_rows, axis=0)
        any_growing = np.logical_or.reduceat(grows, first_rows, axis=0)
        holds = np.where(
            growth,
            any_growing & (top_growing >= top_still),
            ~any_growing | (top_growing + remaining * step[None, :] <= top_still),
        )
        holds[np.arange(width), queues] = True  # the own entry is the sequence number
        if not holds.all():
            return None
        return anchor, slopes

    def _check_against_records(
        self, lanes: Lanes, anchor: np.ndarray, slopes: np.ndarray, shifts: _Shifts, base: int
    ) -> bool:
        """Lanes from `base` on against every access recorded before them; False when that cannot be decided
        here.

        Every (operand, record) pair whose byte hulls meet is found at once (`_crossing_pairs`: the operand's hull
        over all its lanes), and the pairs' queues, kinds, partitions and happens-before are filtered as arrays;
        only the survivors are tested byte by byte, over the lanes each record is unordered with."""
        operands = _Operands(lanes, shifts)
        if not operands.count:
            return True
        lanes_here = lanes.count - base
        first = anchor + slopes  # the clock of each position's first lane here; entries only grow after it
        lowest = first.min(axis=0)
        memories = set(operands.memory.tolist())
        any_write = {memory: False for memory in memories}
        for memory, write in zip(operands.memory.tolist(), operands.writes.tolist(), strict=True):
            any_write[memory] = any_write[memory] or write
        records: list[_Record] = []
        for memory in memories:
            entry = self.records.get(memory)
            if entry is None:
                continue
            for per_queue in entry if any_write[memory] else entry[:1]:  # a read races with writes only
                for other_queue, issued in per_queue.items():
                    if issued.seqs and issued.seqs[-1] > lowest[other_queue]:
                        records.extend(r for r in issued.unordered(int(lowest[other_queue])) if r.alive)
        if records:
            self._check_records(operands, records, anchor, slopes, first, lanes_here)
        nests = [
            nest
            for memory in memories
            for group in self.nest_records.get(memory, ())[: 2 if any_write[memory] else 1]
            for nest in group
        ]
        if nests:
            op, other, met = _meeting_nests(operands.memory, operands.lo, operands.hi, nests)
            nest_queue = met.queue
            near = (
                (operands.queue[op] != nest_queue)
                & (operands.writes[op] | met.is_write)
                & (operands.p0[op] < met.partition_end)
                & (met.partition_start < operands.p1[op])
                & (first[operands.where[op], nest_queue] < met.last_seq)
            )
            for k, j in zip(op[near].tolist(), other[near].tolist(), strict=True):
                position, plan_op = operands.items[k]
                nest = nests[j]
                # some of its lanes are unordered with some lanes here: decided only if no bytes meet
                unordered = nest.shifts[nest.unordered_from(int(first[position, nest.queue])) :]
                if not _disjoint(nest.site, unordered, plan_op.site, shifts.of(position, plan_op)):
                    return False
        return True

    def _check_records(
        self,
        operands: _Operands,
        records: list[_Record],
        anchor: np.ndarray,
        slopes: np.ndarray,
        first: np.ndarray,
        lanes_here: int,
    ) -> None:
        """`_check_against_records`'s test of recorded single accesses: raise `RaceFound` on a race."""
        record_memory = np.array([r.site.memory_id for r in records], dtype=np.int64)
        record_lo = np.array([r.lo for r in records], dtype=np.int64)
        record_hi = np.array([r.hi for r in records], dtype=np.int64)
        op, other = _crossing_pairs(operands.memory, operands.lo, operands.hi, record_memory, record_lo, record_hi)
        if not op.size:
            return
        record_queue = np.array([r.queue for r in records], dtype=np.int64)[other]
        record_seq = np.array([r.seq for r in records], dtype=np.int64)[other]
        where = operands.where[op]
        near = (
            (operands.queue[op] != record_queue)
            & (operands.writes[op] | np.array([r.site.is_write for r in records], dtype=bool)[other])
            & (operands.p0[op] < np.array([r.site.partition_end for r in records], dtype=np.int64)[other])
            & (np.array([r.site.partition_start for r in records], dtype=np.int64)[other] < operands.p1[op])
            & (first[where, record_queue] < record_seq)
        )
        op, other, where, record_queue, record_seq = (
            op[near], other[near], where[near], record_queue[near], record_seq[near]
        )  # fmt: skip
        # unordered in lanes base - 1 + t (t >= 1) while anchor + t * slope < the record's number
        growth = slopes[where, record_queue]
        gap = record_seq - anchor[where, record_queue]
        unordered = np.where(growth == 0, lanes_here, np.minimum(lanes_here, -(-gap // np.maximum(growth, 1)) - 1))
        for k, j, count in zip(op.tolist(), other.tolist(), unordered.tolist(), strict=True):
            if count <= 0:
                continue
            position, plan_op = operands.items[k]
            record = records[j]
            lane_shifts = operands.shifts.of(position, plan_op)
            self._overlapping(record.site, record.shift, plan_op.site, lane_shifts[:count] - record.shift)

    def _check_within(self, lanes: Lanes, anchor: np.ndarray, slopes: np.ndarray, shifts: _Shifts, base: int) -> bool:
        """Pairs of instances both in lanes from `base` on; False when that cannot be decided here."""
        positions = lanes.positions
        width, lanes_here = len(positions), lanes.count - base
        queues = np.array([plan.queue for plan in positions], dtype=np.int64)
        own = anchor[np.arange(width), queues]  # each position's own sequence number at the last base lane
        step = slopes[np.arange(width), queues]  # instances of its queue per lane
        seen = anchor[:, queues]  # seen[j, i]: what position j has seen of position i's queue
        follows = slopes[:, queues] > 0  # follows[j, i]: j keeps seeing position i's queue's new instances
        # (k, i) then (k + d, j) on another queue: unordered while seen[j, i] + d * step[i] < own[i] if j follows
        # i's queue; if it does not, unordered at every distance from the lane where own[i] passes seen[j, i]
        limit = np.where(follows, -(-(own[None, :] - seen) // step[None, :]), lanes_here + 1)  # [j, i]
        operands = _Operands(lanes, shifts)
        if not operands.count:
            return True
        # a: the earlier instance's operand, b: the later one's; each pair of meeting hulls in both orders
        meeting_a, meeting_b = _meeting_pairs(operands.memory, operands.lo, operands.hi)
        a = np.concatenate((meeting_a, meeting_b))
        b = np.concatenate((meeting_b, meeting_a))
        where, queue, writes, p0, p1 = operands.where, operands.queue, operands.writes, operands.p0, operands.p1
        smallest = np.where(where[b] > where[a], 0, 1)
        distances = np.minimum(limit[where[b], where[a]], lanes_here)
        candidate = (
            (queue[a] != queue[b])
            & (writes[a] | writes[b])
            & (p0[a] < p1[b])
            & (p0[b] < p1[a])
            & (distances > smallest)
        )
        a, b, smallest, distances = a[candidate], b[candidate], smallest[candidate], distances[candidate]
        followed = follows[where[b], where[a]]
        for k, m in zip(a[~followed].tolist(), b[~followed].tolist(), strict=True):
            i, op_a = operands.items[k]
            j, op_b = operands.items[m]
            if not _disjoint(op_a.site, shifts.of(i, op_a), op_b.site, shifts.of(j, op_b)):
                return False  # unordered at every lane distance and touching common bytes: not decided here
        for k, m, low, high in zip(
            a[followed].tolist(),
            b[followed].tolist(),
            smallest[followed].tolist(),
            distances[followed].tolist(),
            strict=True,
        ):
            i, op_a = operands.items[k]
            j, op_b = operands.items[m]
            shifts_a, shifts_b = shifts.of(i, op_a), shifts.of(j, op_b)
            # the distances d in [low, high) a group at a time: lane t of a against lane t + d of b, for a group's
            # distances at once (groups of at most _PAIR_ELEMENTS lanes, or one distance)
            group = max(1, _PAIR_ELEMENTS // lanes_here)
            for first in range(low, high, group):
                lengths = lanes_here - np.arange(first, min(first + group, high))
                lane = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
                distance = np.repeat(np.arange(first, first + lengths.size), lengths)
                self._overlapping(op_a.site, 0, op_b.site, shifts_b[lane + distance] - shifts_a[lane])
        return True

    def _overlapping(self, a: AccessSite, a_shift: int, b: AccessSite, relative: np.ndarray) -> None:
        """Raise `RaceFound` if `b` at any of the shifts `a_shift + relative` meets `a` at `a_shift`."""
        if relative.size == 0:
            return
        # hulls first (b's hull at a relative shift r meets a's iff r lies strictly between these bounds)
        low = a.base + a.low - (b.base + b.high)
        high = a.base + a.high - (b.base + b.low)
        near = relative[(relative > low) & (relative < high)]
        for value in np.unique(near).tolist():
            if self._overlap(a, a_shift, b, a_shift + value) is not None:
                raise RaceFound

    def _advance(self, lanes: Lanes, anchor: np.ndarray, slopes: np.ndarray, shifts: _Shifts, base: int) -> None:
        """Clocks, sequence numbers and records as `issue` would leave them after the remaining lanes: the
        accesses of those lanes that may still matter become one `_NestRecord` per operand."""
        positions = lanes.positions
        lanes_here = lanes.count - base
        final = anchor + lanes_here * slopes  # clocks of the last lane
        for position, plan in enumerate(positions):
            clock = final[position].tolist()
            self.last_clock[plan.queue] = clock
            self.instance_clock[plan.index] = (clock, plan.queue)
            self.sequence[plan.queue] = clock[plan.queue]
        live = list(self.live_queues)
        seen = [self._merged(self.last_clock[q], self.next_waits.get(q, ())) for q in live]
        known = [min(clock[component] for clock in seen) for component in range(self.queues)] if live else None
        for position, plan in enumerate(positions):
            growth = int(slopes[position, plan.queue])
            first_seq = int(anchor[position, plan.queue]) + growth  # of the lane `base`
            for op in plan.operands:
                site = op.site
                if not site.is_write and not self.written[site.buffer]:
                    continue
                lane_shifts = shifts.of(position, op)
                self._replace(site, plan.queue, lane_shifts)
                first = 0  # the first lane some instance still to come is not ordered after (`unordered_from`)
                if known is not None and known[plan.queue] >= first_seq:
                    first = (known[plan.queue] - first_seq) // growth + 1
                    if first >= lane_shifts.size:
                        continue  # every instance still to come is ordered after all of them
                nest = _NestRecord(site, plan.queue, lane_shifts[first:], first_seq + first * growth, growth)
                nests = self.nest_records.get(site.memory_id)
                if nests is None:
                    nests = self.nest_records[site.memory_id] = ([], [])
                (nests[0] if site.is_write else nests[1]).append(nest)
        self._prune()

    def _replace(self, site: AccessSite, queue: int, lane_shifts: np.ndarray) -> None:
        """Records of `site` at any of `lane_shifts` are covered, same bytes the same way, by the nest's later
        accesses on the same queue: drop them, as `_record` would."""
        by_shift = self.by_site.get(id(site))
        if not by_shift:
            return
        if lane_shifts.size <= _SMALL_LANES:  # a set of a few Python ints beats NumPy's calls
            lanes = set(lane_shifts.tolist())
            found = [shift for shift in by_shift if shift in lanes]
        else:
            present = np.fromiter(by_shift.keys(), dtype=np.int64, count=len(by_shift))
            found = present[np.isin(present, lane_shifts)].tolist()
        for shift in found:
            for old in by_shift.pop(shift):
                if old.alive:
                    old.alive = False
                    self._issued(old).dead += 1


def _meeting_pairs(memory: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j), i != j, once, whose byte ranges [lo, hi) (all nonempty) meet in the same memory: after
    sorting by (memory, lo), each range meets exactly the ranges after it that start before it ends."""
    size = lo.size
    key = (memory << 48) + lo  # addresses stay far below 2**48
    order = np.argsort(key, kind="stable")
    starts = key[order]
    ends = np.searchsorted(starts, (memory << 48)[order] + hi[order], side="left")
    counts = np.maximum(ends - np.arange(size) - 1, 0)
    total = int(counts.sum())
    if total == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty
    left = np.repeat(np.arange(size), counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return order[left], order[left + 1 + offsets]


def _ranges(first: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each i, the integers first[i] .. first[i] + counts[i] - 1: (owner i of each, the integers)."""
    total = int(counts.sum())
    owner = np.repeat(np.arange(counts.size), counts)
    return owner, np.repeat(first, counts) + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


class _NestFields(NamedTuple):
    """What the checks against earlier nests read of each nest in a list of pairs (one row per pair)."""

    queue: np.ndarray
    is_write: np.ndarray
    last_seq: np.ndarray
    partition_start: np.ndarray
    partition_end: np.ndarray


def _meeting_nests(
    memory: np.ndarray, lo: np.ndarray, hi: np.ndarray, nests: Sequence[Any]
) -> tuple[np.ndarray, np.ndarray, _NestFields]:
    """The pairs (access, nest) whose byte ranges meet (`_crossing_pairs` of the accesses' [lo, hi) in `memory`
    and the nests' hulls), with the nests' fields for each pair."""
    later, other = _crossing_pairs(
        memory, lo, hi,
        np.array([nest.site.memory_id for nest in nests], dtype=np.int64),
        np.array([nest.lo for nest in nests], dtype=np.int64),
        np.array([nest.hi for nest in nests], dtype=np.int64),
    )  # fmt: skip
    fields = _NestFields(
        np.array([nest.queue for nest in nests], dtype=np.int64)[other],
        np.array([nest.site.is_write for nest in nests], dtype=bool)[other],
        np.array([nest.last_seq for nest in nests], dtype=np.int64)[other],
        np.array([nest.site.partition_start for nest in nests], dtype=np.int64)[other],
        np.array([nest.site.partition_end for nest in nests], dtype=np.int64)[other],
    )
    return later, other, fields


def _crossing_pairs(
    memory_a: np.ndarray, lo_a: np.ndarray, hi_a: np.ndarray, memory_b: np.ndarray, lo_b: np.ndarray, hi_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i of a, j of b), once, whose byte ranges [lo, hi) (all nonempty) meet in the same memory: j
    starts within i (lo_a[i] <= lo_b[j] < hi_a[i]), or i starts within j after j's start."""
    key_a = (memory_a << 48) + lo_a  # addresses stay far below 2**48
    key_b = (memory_b << 48) + lo_b
    order_b = np.argsort(key_b, kind="stable")
    sorted_b = key_b[order_b]
    first = np.searchsorted(sorted_b, key_a, side="left")
    owner, found = _ranges(first, np.searchsorted(sorted_b, (memory_a << 48) + hi_a, side="left") - first)
    order_a = np.argsort(key_a, kind="stable")
    sorted_a = key_a[order_a]
    first = np.searchsorted(sorted_a, key_b, side="right")
    other_owner, other_found = _ranges(
        first, np.maximum(np.searchsorted(sorted_a, (memory_b << 48) + hi_b, side="left") - first, 0)
    )
    return (
        np.concatenate((owner, order_a[other_found])),
        np.concatenate((order_b[found], other_owner)),
    )


class _Operands:
    """Every operand of a nest's lane as arrays (`RaceChecker`'s checks of a nest as a whole): its position,
    queue, kind, memory, partitions and byte hull over the lanes of `shifts`."""

    def __init__(self, lanes: Lanes, shifts: _Shifts) -> None:
        self.shifts = shifts
        self.items = [(position, op) for position, plan in enumerate(lanes.positions) for op in plan.operands]
        self.count = len(self.items)
        sites = [op.site for _, op in self.items]
        queues = [plan.queue for plan in lanes.positions]
        self.where = np.array([position for position, _ in self.items], dtype=np.int64)
        self.queue = np.array(queues, dtype=np.int64)[self.where] if self.count else np.zeros(0, np.int64)
        self.writes = np.array([site.is_write for site in sites], dtype=bool)
        self.memory = np.array([site.memory_id for site in sites], dtype=np.int64)
        self.p0 = np.array([site.partition_start for site in sites], dtype=np.int64)
        self.p1 = np.array([site.partition_end for site in sites], dtype=np.int64)
        hulls = np.array([shifts.hull(position, op) for position, op in self.items], dtype=np.int64).reshape(-1, 2)
        self.lo, self.hi = hulls[:, 0], hulls[:, 1]


# Lane pairs (over all distances) a check within a nest compares in one call at most.
_PAIR_ELEMENTS = 1 << 18

# Lane counts up to which `RaceChecker._replace` compares shifts as Python sets.
_SMALL_LANES = 64

# Largest number of elements (over all lanes) `_disjoint` marks in a byte mask.
_MAX_DISJOINT_ELEMENTS = 1 << 22


def _disjoint(a: AccessSite, a_shifts: np.ndarray, b: AccessSite, b_shifts: np.ndarray) -> bool:
    """Do the bytes of `a` over all its shifts and those of `b` over all its shifts have none in common (False
    also when the sets are too large to compare)?"""
    if a.memory_id != b.memory_id or a.partition_end <= b.partition_start or b.partition_end <= a.partition_start:
        return True
    a_starts = (a.byte_offsets(0)[None, :] + np.unique(a_shifts)[:, None]).reshape(-1)
    b_starts = (b.byte_offsets(0)[None, :] + np.unique(b_shifts)[:, None]).reshape(-1)
    if a_starts.size > _MAX_DISJOINT_ELEMENTS or b_starts.size > _MAX_DISJOINT_ELEMENTS:
        return False
    origin = min(int(a_starts.min()), int(b_starts.min()))
    size = max(int(a_starts.max()) + a.itemsize, int(b_starts.max()) + b.itemsize) - origin
    if size > 8 * _MAX_DISJOINT_ELEMENTS:
        return False
    mask = np.zeros(size, bool)
    for byte in range(a.itemsize):
        mask[a_starts - origin + byte] = True
    return not any(mask[b_starts - origin + byte].any() for byte in range(b.itemsize))


class _Shifts:
    """Byte shifts of each operand in every lane from `base` on (its offset register's values times the element
    size; zeros for a static operand), computed once per operand."""

    def __init__(self, lanes: Lanes, base: int) -> None:
        self.lanes = lanes
        self.base = base
        self.cache: dict[tuple[int, int], np.ndarray] = {}
        self.hulls: dict[tuple[int, int], tuple[int, int]] = {}

    def of(self, position: int, op: OperandPlan) -> np.ndarray:
        key = (position, id(op))
        found = self.cache.get(key)
        if found is None:
            column = op.column
            count = self.lanes.count - self.base
            if column < 0:
                found = np.zeros(count, np.int64)
            else:
                found = self.lanes.column(position, column)[self.base :] * op.site.itemsize
            self.cache[key] = found
        return found

    def hull(self, position: int, op: OperandPlan) -> tuple[int, int]:
        """The operand's byte hull over all those lanes."""
        key = (position, id(op))
        found = self.hulls.get(key)
        if found is None:
            values = self.of(position, op)
            site = op.site
            found = (0, 0)
            if values.size:
                found = (site.base + int(values.min()) + site.low, site.base + int(values.max()) + site.high)
            self.hulls[key] = found
        return found
