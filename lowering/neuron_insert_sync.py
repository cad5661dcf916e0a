"""neuron-insert-sync: order instructions across engine queues with semaphore waits.

Input contract: allocated neuron-level functions (every on-chip `neuron.alloc` has an address); loops are
`scf.for` with no iteration arguments, and dynamic offsets are `index` values computed by `arith` ops.

Output guarantee: every instruction has a unique `id` (program order), and `waits` lists, for each other queue,
the latest instruction there that it must follow: the last writers of what it reads (read after write), and the
last writers and readers of what it writes (write after write, write after read). A wait means "the most recent
issued instance of that instruction has completed" (runtime/program.py), and queues run in order, so waiting on
the latest conflicting instruction of a queue orders the waiter after every earlier conflicting instance there.
No two instruction instances on different queues that touch a common byte (one of them writing) are left
unordered; the simulator's race checker (runtime/races.py) verifies this on every run that enables it.

How. Every access is a footprint: the partitions it touches and, within each partition (HBM: within its buffer;
HBM scratch with an address: absolute, since scratch buffers whose lifetimes do not overlap share bytes), the
byte offsets `base + sum(i_d * step_d) + sum(c_L * iv_L)` for the pattern's index tuples `i` and the
inductions `iv_L` of the loops its dynamic offset depends on. The offset is traced through the `arith` ops that
compute it; when it is affine in loop inductions (add, sub, multiply by a constant, index casts, provably free of
32-bit register wrap-around) the footprint is exact, otherwise it covers its whole buffer (conservative). Two
accesses conflict when an integer solution exists for "some byte of one is some byte of the other" (a small
bounded search over the pattern and loop variables, which answers "conflict" when the search runs out of budget).

A loop body is analysed twice. The first pass stands for an iteration, the second for a later one: an access of
the second pass is compared with the records of the same pass as "same iteration" (common inductions equal) and
with the records of the first pass as "an earlier iteration" (the record's induction is the current one minus a
positive multiple of the step), which is how loop-carried dependences are found while the disjoint tiles of
different iterations (a stream's stores, a matmul's output tiles) are not ordered against each other. After the
loop, its records stand for all of its iterations (the induction ranges over the loop's bounds).

A loop whose bounds are computed at run time (a size bucket's loop over the call's rows) counts with the most
trips its size arguments' declared ranges allow. When such a loop may run no trip at all (a two-copy loop's rounds
and the trip left after them), its accesses may never have been issued: waiting on the latest of them would wait
on nothing, so a later access waits on each of them and still on the queue's latest access before the loop, and
a write inside such a loop removes no older record.

Only what can conflict is compared: records are grouped by memory (and HBM argument; allocated HBM scratch is one
group), reads apart from writes, and each distinct access (queue, footprint, the passes of the loops it depends
on) keeps only its latest instance; a write that exactly covers older records replaces them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import BytesAttr, DenseArrayBase, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import memory_of
from neuron_mlir.ir.dialects.neuron import InstructionOp
from neuron_mlir.ir.locations import OpDiagnostic, at_source
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.ir_queries import defined_functions, index_interval, size_argument_ranges, storage_root
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import Engine, Memory

QueueKey = tuple[str, int]

# An affine index value: constant + sum(coefficient * induction of loop).
Affine = tuple[int, tuple[tuple[scf.ForOp, int], ...]]
# What makes two footprints one: Footprint's fields up to `terms`, and whether the offset is exact (affine).
FootprintKey = tuple[
    Memory, SSAValue | None, int, int, int, int, tuple[tuple[int, int], ...], tuple[tuple[scf.ForOp, int], ...], bool
]

_INT32 = 2**31  # scalar registers hold two's-complement 32-bit values (runtime/isa.py wrap32)
_SEARCH_BUDGET = 256  # candidate values the overlap search may try before it answers "conflict"
_LEVEL_BITS = 3  # hull lengths of a level of `Records`' index: (2**(level - _LEVEL_BITS), 2**level]
_SCAN_ALL = 12  # records of a kind few enough that a query visits them all instead of looking in the index


@dataclass(frozen=True)
class _LoopRange:
    """The induction's values: lower + step * t for t in [0, trips); trips None when nothing bounds them. A bound
    computed at run time from size arguments (a size bucket's loop over the call's rows) counts with the most
    trips the arguments' ranges allow, and a lower bound computed so with its least value and step 1: the range
    then holds every value the induction may take, and more."""

    lower: int
    step: int
    trips: int | None


@dataclass(eq=False, slots=True)
class Footprint:
    """The bytes one access touches, per partition (interned: equal footprints are one object).

    Offsets are `base + sum(t_d * step_d) + sum(coefficient_L * iv_L)` with `0 <= t_d < num_d`; steps are positive
    byte counts sorted largest first, and every element is `size` bytes long.
    """

    memory: Memory
    buffer: SSAValue | None  # HBM arguments (and unallocated scratch) by identity; the rest by address
    p_low: int
    p_high: int
    base: int
    size: int
    dims: tuple[tuple[int, int], ...]
    terms: tuple[tuple[scf.ForOp, int], ...]  # byte coefficient of each loop induction
    low: int  # [low, high): bytes touched when every induction is 0
    high: int
    full_low: float  # [full_low, full_high): bytes touched over every induction value (infinite when unbounded)
    full_high: float
    exact: bool  # the footprint is exactly the bytes [low, high) (no inductions, dense, offset known)
    depth: int  # 1 + nesting depth of the deepest loop among `terms`; 0 without terms
    bucket: tuple[int, int] | None  # (level, full_low) of the hull in `Records`' index; None when it is unbounded


# Records of accesses, grouped by what can conflict: the memory and (for HBM arguments) the buffer. Within a group,
# reads and writes apart (a read only ever waits for writes). Each maps (queue, footprint, passes) of an access to the
# (sequence number, instruction id) of its latest instance, where `passes` says, for each open loop the
# footprint depends on, which of the two analysis passes recorded it. An older instance of the same key can never
# be the wait an instruction picks (the newer one conflicts exactly when it does, and the latest per queue wins),
# so the records stay as few as the distinct accesses, however long the program. `guard` names the loops that may
# run no trip (bounds computed at run time) open when the access was recorded: an access inside one may not have
# been issued at all, so it never stands for the older instances of its queue (see `_synchronise`).
RecordKey = tuple[QueueKey, Footprint, tuple[int, ...], tuple[scf.ForOp, ...]]


class Records:
    """Records of one kind (reads or writes) of a group, indexed by the byte range of their footprints' hulls.

    `entries` maps each record to its (sequence number, instruction id). The index lets a query visit only the
    records whose hull `[full_low, full_high)` may overlap the query's, instead of every record of the group: a
    record whose hull is more than 2**(level - _LEVEL_BITS) and at most 2**level bytes long sits at that level, in
    a list sorted by `full_low` (`lows`, with `keys` beside it), so a query costs a few bisections per level. The
    records overlapping `[low, high)` at a level start below `high` and above `low - 2**level`; those starting
    above `low - 2**(level - _LEVEL_BITS)` surely reach `low`, so only the ones in between are tested against the
    query's hull (wider levels mean fewer to bisect and more of those to test). Records with an unbounded hull
    (a loop without constant bounds) are always visited. `nested` holds the records made inside an open loop
    (their analysis passes not empty), in the order of `entries`: closing a loop visits those alone, not every
    record of the function.
    """

    __slots__ = ("entries", "levels", "nested", "unbounded")

    def __init__(self) -> None:
        self.entries: dict[RecordKey, tuple[int, int]] = {}
        self.levels: dict[int, tuple[list[int], list[RecordKey]]] = {}
        self.nested: dict[RecordKey, None] = {}
        self.unbounded: set[RecordKey] = set()

    def set(self, key: RecordKey, entry: tuple[int, int]) -> None:
        if key not in self.entries:
            if key[2]:
                self.nested[key] = None
            bucket = key[1].bucket
            if bucket is None:
                self.unbounded.add(key)
            else:
                level, low = bucket
                lows, keys = self.levels.get(level) or self.levels.setdefault(level, ([], []))
                at = bisect_right(lows, low)
                lows.insert(at, low)
                keys.insert(at, key)
        self.entries[key] = entry

    def remove(self, key: RecordKey) -> None:
        del self.entries[key]
        if key[2]:
            del self.nested[key]
        bucket = key[1].bucket
        if bucket is None:
            self.unbounded.discard(key)
            return
        level, low = bucket
        lows, keys = self.levels[level]
        at = keys.index(key, bisect_left(lows, low), bisect_right(lows, low))
        del lows[at]
        del keys[at]

    def overlapping(self, footprint: Footprint) -> list[RecordKey]:
        """The records whose hulls may overlap `footprint`'s (a superset of those that do), in no order."""
        if footprint.bucket is None or len(self.entries) <= _SCAN_ALL:
            return list(self.entries)
        low, high = int(footprint.full_low), int(footprint.full_high)
        found = list(self.unbounded)
        for level, (lows, keys) in self.levels.items():
            last = bisect_left(lows, high)
            if not last:
                continue
            first = bisect_right(lows, low - (1 << level), 0, last)
            sure = bisect_right(lows, low - (1 << level >> _LEVEL_BITS), first, last)
            if first < sure:  # may end at or before `low`
                found += [key for key in keys[first:sure] if key[1].full_high > low]
            found += keys[sure:last]
        return found


@dataclass
class _Group:
    reads: Records = field(default_factory=Records)
    writes: Records = field(default_factory=Records)


@dataclass
class _State:
    groups: dict[tuple[Memory, SSAValue | None], _Group] = field(default_factory=dict)
    sequence: int = 0
    loops: list[scf.ForOp] = field(default_factory=list)  # the open loops, outermost first
    passes: list[int] = field(default_factory=list)  # the analysis pass (0, 1) of each open loop
    depth_of: dict[scf.ForOp, int] = field(default_factory=dict)
    ranges: dict[scf.ForOp, _LoopRange] = field(default_factory=dict)
    affine: dict[SSAValue, Affine | None] = field(default_factory=dict)
    interned: dict[FootprintKey, Footprint] = field(default_factory=dict)
    accesses: dict[InstructionOp, tuple[list[Footprint], list[Footprint]]] = field(default_factory=dict)
    conflicts: dict[tuple[Footprint, Footprint, int, int], bool] = field(default_factory=dict)
    sizes: dict[SSAValue, tuple[int, int]] = field(default_factory=dict)  # each size argument's range
    guards: list[scf.ForOp] = field(default_factory=list)  # the open loops that may run no trip, outermost first
    guard_entry: dict[scf.ForOp, int] = field(default_factory=dict)  # the sequence number where each was entered
    # `conflict`'s first analysis pass where a record's passes differ from the open loops' current ones (`passes`):
    # valid while those stay the same, so emptied whenever a loop is entered, left or analysed again
    earlier: dict[tuple[int, ...], int] = field(default_factory=dict)

    def group(self, footprint: Footprint) -> _Group:
        key = (footprint.memory, footprint.buffer)
        if key not in self.groups:
            self.groups[key] = _Group()
        return self.groups[key]

    # ---- index values ------------------------------------------------------------------------------------------

    def loop_range(self, loop: scf.ForOp) -> _LoopRange:
        if loop not in self.ranges:
            lower, step = self.value_of(loop.lb), self.value_of(loop.step)
            lowest, highest = index_interval(loop.lb, self.sizes), index_interval(loop.ub, self.sizes)
            if step is None or step <= 0 or lowest is None:
                self.ranges[loop] = _LoopRange(lower or 0, step or 1, None)
            elif highest is None:
                self.ranges[loop] = _LoopRange(lowest[0], step, None)
            elif lower is None:  # from where an earlier loop over the call's rows stopped
                self.ranges[loop] = _LoopRange(lowest[0], 1, max(0, highest[1] - lowest[0]))
            else:
                self.ranges[loop] = _LoopRange(lower, step, max(0, -((lower - highest[1]) // step)))
        return self.ranges[loop]

    def may_skip(self, loop: scf.ForOp) -> bool:
        """Whether `loop` may run no trip: its bounds are computed at run time and can meet (the rounds of a
        two-copy loop over the call's rows, and the trips left after them), or are not known at all."""
        lowest, highest = index_interval(loop.lb, self.sizes), index_interval(loop.ub, self.sizes)
        return lowest is None or highest is None or highest[0] <= lowest[1]

    def issued(self, guard: tuple[scf.ForOp, ...], sequence: int) -> bool:
        """Whether an access recorded at `sequence` inside the loops `guard` has surely been issued before the
        current one: each of those loops is still open and was entered (in its current instance) before it."""
        return all(loop in self.guard_entry and sequence > self.guard_entry[loop] for loop in guard)

    def value_of(self, value: SSAValue) -> int | None:
        """The constant an index value always has, or None."""
        form = self.affine_of(value)
        return form[0] if form is not None and not form[1] else None

    def bounds(self, form: Affine) -> tuple[float, float]:
        low = high = float(form[0])
        for loop, coefficient in form[1]:
            span = self.loop_range(loop)
            if span.trips is None:
                return float("-inf"), float("inf")
            last = span.lower + span.step * max(span.trips - 1, 0)
            ends = (coefficient * span.lower, coefficient * last)
            low, high = low + min(ends), high + max(ends)
        return low, high

    def affine_of(self, value: SSAValue) -> Affine | None:
        """`value` as an affine function of loop inductions, or None when it is not provably one."""
        if value in self.affine:
            return self.affine[value]
        form = self._affine(value)
        if form is not None:
            low, high = self.bounds(form)
            if low < -_INT32 or high >= _INT32:
                form = None  # the register may wrap around: the affine form would not be its value
        self.affine[value] = form
        return form

    def _affine(self, value: SSAValue) -> Affine | None:
        owner = value.owner
        if isinstance(owner, Block):
            loop = owner.parent_op()
            if isinstance(loop, scf.ForOp) and owner is loop.body.block and value is owner.args[0]:
                return 0, ((loop, 1),)
            return None
        if isinstance(owner, arith.ConstantOp):
            return (owner.value.value.data, ()) if isinstance(owner.value, IntegerAttr) else None
        if isinstance(owner, arith.IndexCastOp):
            return self.affine_of(owner.input)
        if isinstance(owner, arith.AddiOp | arith.SubiOp | arith.MuliOp):
            lhs, rhs = self.affine_of(owner.lhs), self.affine_of(owner.rhs)
            if lhs is None or rhs is None:
                return None
            if isinstance(owner, arith.MuliOp):
                if lhs[1] and rhs[1]:
                    return None  # a product of inductions is not affine
                (scale, _), form = (lhs, rhs) if not lhs[1] else (rhs, lhs)
                return _combine(form, scale, (0, ()), 0)
            return _combine(lhs, 1, rhs, -1 if isinstance(owner, arith.SubiOp) else 1)
        return None

    # ---- footprints --------------------------------------------------------------------------------------------

    def footprints(self, op: InstructionOp) -> tuple[list[Footprint], list[Footprint]]:
        """(reads, writes) of `op`, computed once per instruction."""
        if op not in self.accesses:
            spec = op.spec()
            written = set(spec.writes + spec.optional_writes)
            roles = op.present_roles()
            self.accesses[op] = (
                [self.footprint(op, role) for role in roles if role not in written],
                [self.footprint(op, role) for role in roles if role in written],
            )
        return self.accesses[op]

    def footprint(self, op: InstructionOp, role: str) -> Footprint:
        access = op.access(role)
        assert access is not None
        buffer, pattern, dynamic = access
        memref_type = buffer.type
        assert isinstance(memref_type, MemRefType)
        size = itemsize(runtime_dtype_name(memref_type.element_type))
        memory = memory_of(memref_type)
        if memory is Memory.HBM:
            root = storage_root(buffer)
            scratch = root.owner
            if isinstance(scratch, neuron.AllocOp) and scratch.address is not None:
                # allocated scratch may share bytes with other scratch (neuron-allocate-memory reuses HBM by
                # liveness): one group for all of it, told apart by address
                owner, start = None, scratch.address.value.data
            else:
                owner, start = root, 0
            p_low, p_high = 0, 1
        else:
            alloc = buffer.owner
            if not isinstance(alloc, neuron.AllocOp) or alloc.address is None:
                raise OpDiagnostic(
                    f"{op.name}: on-chip buffers need addresses before synchronisation; run neuron-allocate-memory "
                    "first" + at_source(op),
                    op,
                )
            owner, start = None, alloc.address.value.data
            p_low = pattern.partition_start.data
            p_high = p_low + pattern.partitions.data
        form = (pattern.offset.data, ()) if dynamic is None else self.affine_of(dynamic)
        if form is not None:
            offset, terms = form[0] + (pattern.offset.data if dynamic is not None else 0), form[1]
            base = start + offset * size
            dims: list[tuple[int, int]] = []
            for step, num in pattern.dims:
                if step == 0 or num <= 1:
                    continue
                if step < 0:  # the same elements walked from the other end
                    base += step * size * (num - 1)
                    step = -step
                dims.append((step * size, num))
            byte_terms = tuple((loop, coefficient * size) for loop, coefficient in terms if coefficient)
        else:
            # An offset that is not affine in loop inductions: anywhere in the buffer (a row of it on chip).
            shape = memref_type.get_shape()
            row = 1
            for extent in shape if memory is Memory.HBM else shape[1:]:
                row *= extent
            base, dims, byte_terms = start, [(size, row)] if row > 1 else [], ()
        dims.sort(reverse=True)
        key: FootprintKey = (memory, owner, p_low, p_high, base, size, tuple(dims), byte_terms, form is not None)
        if key not in self.interned:
            self.interned[key] = self._make(key, exact_offset=form is not None)
        return self.interned[key]

    def _make(self, key: FootprintKey, exact_offset: bool) -> Footprint:
        memory, owner, p_low, p_high, base, size, dims, terms, _ = key
        high = base + size + sum(step * (num - 1) for step, num in dims)
        dense, expected = True, size
        for step, num in reversed(dims):
            dense = dense and step == expected
            expected = step * num
        extra_low, extra_high = self.bounds((0, tuple((loop, c) for loop, c in terms)))
        depth = 1 + max((self.depth_of[loop] for loop, _ in terms), default=-1)
        bucket = None
        if extra_low != float("-inf") and extra_high != float("inf"):
            full_low = base + int(extra_low)
            level = -(-(high + int(extra_high) - full_low - 1).bit_length() // _LEVEL_BITS) * _LEVEL_BITS
            bucket = level, full_low
        return Footprint(
            memory=memory,
            buffer=owner,
            p_low=p_low,
            p_high=p_high,
            base=base,
            size=size,
            dims=dims,
            terms=terms,
            low=base,
            high=high,
            full_low=base + extra_low,
            full_high=high + extra_high,
            exact=dense and exact_offset and not terms,
            depth=depth,
            bucket=bucket,
        )

    # ---- conflicts ---------------------------------------------------------------------------------------------

    def conflict(self, old: Footprint, passes: tuple[int, ...], new: Footprint) -> bool:
        """Can an instance of `old` recorded in `passes` touch a byte that the current instance of `new` does?"""
        if old.p_high <= new.p_low or new.p_high <= old.p_low:
            return False
        if old.full_high <= new.full_low or new.full_high <= old.full_low:
            return False
        if old.exact and new.exact:
            return True  # the hulls are the bytes, and they overlap
        # The loops the two share are the first len(passes) open ones; they are in the same iteration up to the
        # first pass that differs, where `old` is in an earlier iteration (the rest are not shared).
        shared = len(passes)
        earlier = self.earlier.get(passes)
        if earlier is None:
            earlier = next((d for d in range(shared) if passes[d] != self.passes[d]), shared)
            self.earlier[passes] = earlier
        key = (old, new, shared, earlier)
        found = self.conflicts.get(key)
        if found is None:
            found = self._overlap(old, new, shared, earlier)
            if len(self.conflicts) > 200_000:
                self.conflicts.clear()
            self.conflicts[key] = found
        return found

    def _overlap(self, old: Footprint, new: Footprint, shared: int, earlier: int) -> bool:
        if earlier < shared:
            span = self.loop_range(self.loops[earlier])
            if span.trips is not None and span.trips <= 1:
                return False  # a loop of one iteration has no earlier iteration
        # Unknowns: t_d of each pattern dimension, each loop's iteration index, and for the loop where `old` is
        # earlier the iteration distance k >= 1. new byte - old byte = constant + sum(coefficient * unknown).
        constant = new.base - old.base
        terms: list[tuple[int, int, int]] = [(step, 0, num - 1) for step, num in new.dims]
        terms += [(-step, 0, num - 1) for step, num in old.dims]
        coefficients: dict[scf.ForOp, list[int]] = {}
        for loop, coefficient in new.terms:
            coefficients.setdefault(loop, [0, 0])[1] += coefficient
        for loop, coefficient in old.terms:
            coefficients.setdefault(loop, [0, 0])[0] += coefficient
        for loop, (old_c, new_c) in coefficients.items():
            span = self.loop_range(loop)
            if span.trips is None:
                return True  # an induction without bounds: anywhere
            last = max(span.trips - 1, 0)
            depth = self.depth_of[loop]
            if depth < shared and depth <= earlier:  # one induction for both (old's: minus k steps if earlier)
                constant += (new_c - old_c) * span.lower
                terms.append(((new_c - old_c) * span.step, 0, last))
                if depth == earlier:
                    terms.append((old_c * span.step, 1, last))
            else:  # independent inductions
                constant += (new_c - old_c) * span.lower
                terms += [(new_c * span.step, 0, last), (-old_c * span.step, 0, last)]
        # Byte x of `old` and byte y of `new` are a common byte when -new.size < y - x < old.size.
        return _solvable(terms, 1 - new.size - constant, old.size - 1 - constant)

    # ---- loops -------------------------------------------------------------------------------------------------

    def close_loop(self, depth: int) -> None:
        """The loop at `depth` is done: records inside it stand for all of its iterations from now on."""
        for group in self.groups.values():
            for name in ("reads", "writes"):
                records: Records = getattr(group, name)
                inside = [key for key in records.nested if len(key[2]) > depth]
                for key in inside:
                    entry = records.entries[key]
                    records.remove(key)
                    queue, footprint, passes, guard = key
                    merged = (queue, footprint, passes[:depth], guard)
                    known = records.entries.get(merged)
                    if known is None or known[0] < entry[0]:
                        records.set(merged, entry)


def _combine(lhs: Affine, lhs_scale: int, rhs: Affine, rhs_scale: int) -> Affine:
    coefficients: dict[scf.ForOp, int] = {}
    for loop, coefficient in lhs[1]:
        coefficients[loop] = coefficients.get(loop, 0) + lhs_scale * coefficient
    for loop, coefficient in rhs[1]:
        coefficients[loop] = coefficients.get(loop, 0) + rhs_scale * coefficient
    return lhs_scale * lhs[0] + rhs_scale * rhs[0], tuple((k, v) for k, v in coefficients.items() if v)


def _solvable(terms: list[tuple[int, int, int]], low: int, high: int) -> bool:
    """Is there an integer t_j in [lo_j, hi_j] for each (c_j, lo_j, hi_j) with low <= sum(c_j * t_j) <= high?

    Exact for the nested strides of tiles and loops (the search tries a few values per unknown, largest
    coefficient first); answers True, which is always safe, when the search would take too long.
    """
    merged: dict[int, list[int]] = {}
    for coefficient, lo, hi in terms:
        if coefficient < 0:
            coefficient, lo, hi = -coefficient, -hi, -lo
        if coefficient == 0 or lo == hi:
            low, high = low - coefficient * lo, high - coefficient * lo
            continue
        if coefficient in merged:  # c*t1 + c*t2 takes exactly the values c*t for t in the summed range
            merged[coefficient][0] += lo
            merged[coefficient][1] += hi
        else:
            merged[coefficient] = [lo, hi]
    ordered = sorted(merged.items(), reverse=True)
    count = len(ordered)
    rest_low, rest_high = [0] * (count + 1), [0] * (count + 1)
    for index in range(count - 1, -1, -1):
        coefficient, (lo, hi) = ordered[index]
        rest_low[index] = rest_low[index + 1] + coefficient * lo
        rest_high[index] = rest_high[index + 1] + coefficient * hi
    budget = _SEARCH_BUDGET

    def search(index: int, low: int, high: int) -> bool:
        nonlocal budget
        if high < rest_low[index] or rest_high[index] < low:
            return False
        if index == count:
            return True
        coefficient, (lo, hi) = ordered[index]
        first = max(lo, -((rest_high[index + 1] - low) // coefficient))  # ceil((low - rest_high) / c)
        last = min(hi, (high - rest_low[index + 1]) // coefficient)
        if last - first + 1 > budget:
            return True
        for value in range(first, last + 1):
            budget -= 1
            if budget < 0:
                return True
            if search(index + 1, low - coefficient * value, high - coefficient * value):
                return True
        return False

    return search(0, low, high)


def _queue_of(op: InstructionOp) -> QueueKey:
    engine = op.engine_kind
    return (engine.value, op.queue.value.data if engine is Engine.DMA and op.queue is not None else 0)


def _synchronise(op: InstructionOp, state: _State, waits: dict[InstructionOp, set[int]]) -> None:
    own_id = op.instruction_id.value.data if op.instruction_id is not None else -1
    queue = _queue_of(op)
    reads, writes = state.footprints(op)
    latest: dict[QueueKey, tuple[int, int]] = {}  # queue -> (record sequence number, instruction id)
    unsure: set[int] = set()  # conflicting instructions that may not have been issued (`Records`' guard)

    def wait_for(records: Records, footprint: Footprint, covers: bool) -> None:
        entries = records.entries
        found = records.overlapping(footprint)
        if covers:
            # Records whose every instance lies inside this write's bytes conflict with it, so it is ordered after
            # them: whoever conflicts with them later conflicts with this write too, and waiting on it is enough.
            # (Removed once every query of the instruction is answered.)
            start, end, first, last = footprint.low, footprint.high, footprint.p_low, footprint.p_high
            covered.append(
                (
                    records,
                    [
                        key
                        for key in found
                        if start <= key[1].full_low
                        and key[1].full_high <= end
                        and first <= key[1].p_low
                        and key[1].p_high <= last
                    ],
                )
            )
        # records whose partitions or hulls miss the footprint's cannot conflict (`_State.conflict`'s first
        # tests, here before the sort: most candidates of a large group fail them)
        p_low, p_high, low, high = footprint.p_low, footprint.p_high, footprint.full_low, footprint.full_high
        candidates = [
            key
            for key in found
            if key[0] != queue
            and key[1].p_low < p_high
            and p_low < key[1].p_high
            and key[1].full_low < high
            and low < key[1].full_high
        ]
        # newest first: once a queue has a conflicting record, its older ones need no test (the entries'
        # sequence numbers are distinct, so the order is the sequence numbers')
        candidates.sort(key=entries.__getitem__, reverse=True)
        exact = footprint.exact
        for key in candidates:
            record_queue, record_footprint, passes, guard = key
            sequence, instruction_id = entries[key]
            known = latest.get(record_queue)
            if known is not None and known[0] >= sequence:
                continue  # a later instruction of that queue is waited on already
            if (exact and record_footprint.exact) or state.conflict(record_footprint, passes, footprint):
                if not guard or state.issued(guard, sequence):
                    latest[record_queue] = (sequence, instruction_id)
                else:  # waited on, but the queue's older conflicting instances are still looked for
                    unsure.add(instruction_id)

    covered: list[tuple[Records, list[RecordKey]]] = []
    for footprint in reads:  # read after write
        wait_for(state.group(footprint).writes, footprint, False)
    for footprint in writes:  # write after write, write after read
        group = state.group(footprint)
        covers = footprint.exact and not state.guards  # (a write that may not be issued covers nothing)
        wait_for(group.writes, footprint, covers)
        wait_for(group.reads, footprint, covers)
    waits.setdefault(op, set()).update(instruction_id for _, instruction_id in latest.values())
    waits[op].update(unsure)
    for records, keys in covered:
        entries = records.entries
        for key in keys:
            if key in entries:  # (another write of the instruction may cover it too)
                records.remove(key)
    for footprints, writing in ((reads, False), (writes, True)):
        for footprint in footprints:
            group = state.group(footprint)
            records = group.writes if writing else group.reads
            state.sequence += 1
            key = (queue, footprint, tuple(state.passes[: footprint.depth]), tuple(state.guards))
            records.set(key, (state.sequence, own_id))


def _visit(block: Block, state: _State, waits: dict[InstructionOp, set[int]]) -> None:
    for op in block.ops:
        if isinstance(op, scf.ForOp):
            _visit_loop(op, state, waits)
        elif isinstance(op, InstructionOp):
            _synchronise(op, state, waits)
        elif op.regions:
            for region in op.regions:
                for inner in region.blocks:
                    _visit(inner, state, waits)


def _visit_loop(loop: scf.ForOp, state: _State, waits: dict[InstructionOp, set[int]]) -> None:
    depth = len(state.loops)
    state.depth_of[loop] = depth
    state.loops.append(loop)
    state.passes.append(0)
    state.earlier.clear()
    guarded = state.may_skip(loop)
    if guarded:
        state.guards.append(loop)
        state.guard_entry[loop] = state.sequence
    _visit(loop.body.block, state, waits)
    trips = state.loop_range(loop).trips
    if trips is None or trips > 1:
        # The second pass is a later iteration: it sees the first pass's accesses as an earlier iteration's
        # (loop-carried dependences). A loop of at most one iteration has none.
        state.passes[-1] = 1
        state.earlier.clear()
        _visit(loop.body.block, state, waits)
    state.loops.pop()
    state.passes.pop()
    state.earlier.clear()
    if guarded:  # from here its accesses may or may not have been issued
        state.guards.pop()
        del state.guard_entry[loop]
    state.close_loop(depth)


@dataclass(frozen=True)
class NeuronInsertSyncPass(ModulePass):
    name = "neuron-insert-sync"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            instructions = [i for i in function.body.walk() if isinstance(i, InstructionOp)]
            for number, instruction in enumerate(instructions):
                instruction.properties["id"] = IntegerAttr(number, i64)
                instruction.properties.pop("waits", None)
            waits: dict[InstructionOp, set[int]] = {}
            _visit(function.body.block, _State(sizes=size_argument_ranges(function)), waits)
            for instruction, ids in waits.items():
                own = instruction.instruction_id.value.data if instruction.instruction_id is not None else -1
                ordered = sorted(i for i in ids if i != own)
                if ordered:
                    # packed at once: `from_list` checks each id against i64's range (they are instruction
                    # numbers), about a tenth of the pass in profiles
                    instruction.properties["waits"] = DenseArrayBase(i64, BytesAttr(i64.pack(ordered)))
