"""neuron-allocate-memory: give every buffer an address, reusing on-chip memory between disjoint lifetimes.

Input contract: neuron-level functions (no tile ops); `neuron.alloc`s may lack addresses.

Output guarantee: every `neuron.alloc` has an `address`. SBUF and PSUM buffers whose live ranges overlap get
disjoint byte ranges and everything fits the target's capacity: SBUF bytes per partition; PSUM in 2 KiB banks,
where a matmul's accumulator gets a bank of its own (each bank holds one accumulation group) and other PSUM
buffers, such as transposes, share banks without straddling two. A live range runs in program
order from the alloc to its last use, extended to the end of any loop that uses the buffer but does not
allocate it (the buffer is read again in the next iteration). A matmul whose PSUM output nothing reads is erased
first, with its buffer (`erase_unread_products`): the core would count its group in flight for good.

A buffer allocated inside a loop body lives for the whole body by preference: the engines run ahead of each
other, so the next iteration's first instructions may start while this iteration's last ones still use their
buffers, and buffers of one body that share no bytes never make one engine wait for another across iterations.
Every iteration reuses the same buffers; the synchronisation pass orders those reuses (unrolled loops,
`neuron-unroll-loops`, get one set of buffers per copy: double buffering). When a memory does not fit that
way, the bodies are made *tight* one at a time (first the loop of the buffer that did not fit, then the loops
of the buffers live beside it, largest first): a tight body's buffers live only from their alloc to their last
use, so buffers used in different stages of one iteration share bytes. That is still correct, because
neuron-insert-sync orders accesses by address, across iterations as well as within one; it only costs overlap
between iterations, which is why it is the fallback and not the rule.

Placement is next-fit: each buffer goes at the first free range after the previous one, wrapping around, so
memory just freed is reused as late as possible and the waits that reuse creates stay rare. When on-chip memory
runs out even with every body tight, placement starts over largest first, each buffer at the lowest address free
over its whole live range: next fit can scatter small buffers so that no gap holds a large one although most
bytes are free, and placing the large ones first packs far tighter (at the price of early reuse). Only when that
fails too does the pass fail, naming the buffer, its source line and what was live.

HBM scratch is reused by liveness too, because the simulator holds every byte of the plan in host memory: a
training graph's intermediates (attention scores, activations kept for the backward) are made and consumed one
layer after another, and giving each its own bytes would hold all of them at once. An HBM buffer lives from its
first use to its last (not from its alloc: the lowering may place HBM allocs early), and a use inside a loop the
alloc is not in keeps it live over the whole loop, both ends. Buffers allocated in a loop body live for the whole
body (never tight: HBM has room). A buffer the function returns, directly or through `neuron.view`s, keeps bytes
of its own for the whole function, as do buffers used by anything else than an instruction or a view; the
function's arguments are not allocs and are placed after the scratch by the backend. Sharing is safe because
neuron-insert-sync orders HBM accesses to allocated scratch by address, so a later writer of shared bytes waits
for every earlier reader and writer of them on other queues; that wait is the price of sharing, and placement
keeps it off the critical path where memory allows. First fit (the lowest free address) sets the budget: its
plan, plus `HBM_SPARE_BYTES`. Within the budget each buffer goes to the free range whose bytes were freed longest
ago, bytes no buffer has held counting as oldest: so a buffer born as another dies takes bytes of its own while
the budget has room, and otherwise bytes whose last readers are long done (least recently freed, as in an LRU),
not the bytes that just came free. When some buffer fits no free range below the budget (the ranges freed in
that order can be more fragmented than first fit's), the function keeps first fit's placement: the plan never
exceeds the budget.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.locations import OpDiagnostic, describe_location
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.runtime.hardware import Memory, Target

# HBM bytes a plan may take beyond first fit's to keep a buffer off bytes freed just before it: reusing them makes
# its first writer wait for the last readers of the buffer that held them. A few MiB of host memory in the
# simulator is cheap next to that, and small next to the plans where reuse matters (hundreds of MiB).
HBM_SPARE_BYTES = 16 * 2**20


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass(eq=False)
class _Interval:
    alloc: neuron.AllocOp
    start: int
    end: int
    size: int


def erase_unread_products(function: func.FuncOp) -> None:
    """Erase the matmuls (products and transposes) whose PSUM output nothing reads, with their buffers.

    Such a write has no effect, and the core counts its accumulation group in flight until another engine reads
    the group, which none ever does: its bytes could never be given to another group (the bundle's validation
    refuses the overlap), so keeping it would hold PSUM for the rest of the function."""
    for alloc in [op for op in function.body.walk() if isinstance(op, neuron.AllocOp) and op.memory is Memory.PSUM]:
        writers = [use.operation for use in alloc.buffer.uses]
        if writers and all(isinstance(w, neuron.MatmulOp) and w.dst is alloc.buffer for w in writers):
            for writer in writers:
                Rewriter.erase_op(writer)
            Rewriter.erase_op(alloc)


def _accumulates(alloc: neuron.AllocOp) -> bool:
    """Whether a PSUM buffer is the destination of a (non-transpose) matmul: an accumulation group."""
    for use in alloc.buffer.uses:
        user = use.operation
        if isinstance(user, neuron.MatmulOp) and user.dst is alloc.buffer and not user.transposes:
            return True
    return False


@dataclass(frozen=True)
class _Lifetime:
    """An on-chip alloc's live range before any body is tightened: from its alloc to its last use (extended to the
    end of each loop that uses it without allocating it), and the loop body it is allocated in, if any."""

    alloc: neuron.AllocOp
    memory: Memory
    start: int
    end: int
    size: int
    body: tuple[int, int] | None  # (start, end) of the loop the alloc is directly in
    loop: scf.ForOp | None


def _numbering(function: func.FuncOp) -> tuple[dict[Operation, int], dict[Operation, int]]:
    """Program-order positions of every op of `function`, and the last position of each loop (its start is its
    own position)."""
    position: dict[Operation, int] = {}
    loop_end: dict[Operation, int] = {}
    counter = 0

    def number(op: Operation) -> None:
        nonlocal counter
        position[op] = counter
        counter += 1
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    number(inner)
        if isinstance(op, scf.ForOp):
            loop_end[op] = counter
            counter += 1

    for op in function.body.block.ops:
        number(op)
    return position, loop_end


def _lifetimes(function: func.FuncOp, bank_bytes: int) -> list[_Lifetime]:
    """The lifetimes of a function's on-chip allocations in program order; `bank_bytes` is the PSUM bank size.

    Computed once per function: tightening a loop body only changes which of them `_intervals` extends."""
    position, loop_end = _numbering(function)
    lifetimes = []
    for op in function.body.walk():
        if not isinstance(op, neuron.AllocOp):
            continue
        memory = op.memory
        if memory is Memory.HBM:
            continue
        end = position[op]
        for use in op.buffer.uses:
            user = use.operation
            point = position[user]
            # a use inside a loop the alloc is not inside keeps the buffer alive to that loop's end
            ancestor = user.parent_op()
            while ancestor is not None and not ancestor.is_ancestor(op):
                if isinstance(ancestor, scf.ForOp):
                    point = max(point, loop_end[ancestor])
                ancestor = ancestor.parent_op()
            end = max(end, point)
        enclosing = op.parent_op()
        loop = enclosing if isinstance(enclosing, scf.ForOp) else None
        body = (position[loop], loop_end[loop]) if loop is not None else None
        size = op.row_bytes()
        if memory is Memory.PSUM and _accumulates(op):
            size = _align(size, bank_bytes)  # one accumulation group per bank [nki-arch-trn1]
        lifetimes.append(_Lifetime(op, memory, position[op], end, size, body, loop))
    return lifetimes


def _intervals(lifetimes: list[_Lifetime], memory: Memory, tight_loops: frozenset[scf.ForOp]) -> list[_Interval]:
    """The live ranges in `memory`: a buffer allocated directly in the body of a loop lives for the whole body
    unless that loop is in `tight_loops` (see the module docstring)."""
    intervals = []
    for lifetime in lifetimes:
        if lifetime.memory is not memory:
            continue
        start, end = lifetime.start, lifetime.end
        if lifetime.body is not None and lifetime.loop not in tight_loops:
            start, end = min(start, lifetime.body[0]), max(end, lifetime.body[1])
        intervals.append(_Interval(lifetime.alloc, start, end, lifetime.size))
    return intervals


def _where(op: Operation) -> str:
    text = describe_location(op.location)
    return f" (at {text})" if text else ""


def _first_gap(
    active: list[tuple[int, int, _Interval]], start: int, size: int, alignment: int, bank: int | None = None
) -> int:
    """The lowest aligned address >= start where `size` bytes overlap no active buffer.

    With `bank`, a buffer no larger than a bank never straddles two (a matmul writes within one PSUM bank) and
    a larger one starts on a bank boundary.
    """

    def legal(address: int) -> int:
        address = _align(address, alignment)
        if bank is not None:
            crosses = size <= bank and address // bank != (address + size - 1) // bank
            if crosses or (size > bank and address % bank):
                address = _align(address, bank)
        return address

    address = legal(start)
    for taken_address, taken_size, _ in sorted(active, key=lambda entry: entry[0]):
        if taken_address + taken_size <= address:
            continue
        if address + size <= taken_address:
            break
        address = legal(taken_address + taken_size)
    return address


class _OutOfMemory(Exception):
    """A buffer that did not fit next to the buffers live at its start."""

    def __init__(self, interval: _Interval, active: list[tuple[int, int, _Interval]], alignment: int) -> None:
        super().__init__()
        self.interval = interval
        self.live = [entry[2] for entry in active]
        self.live_bytes = sum(_align(entry[1], alignment) for entry in active)


def _place(intervals: list[_Interval], capacity: int, alignment: int, bank: int | None = None) -> dict[_Interval, int]:
    """Next fit over live intervals, in order of start (see the module docstring): an address per interval."""
    addresses: dict[_Interval, int] = {}
    active: list[tuple[int, int, _Interval]] = []  # (address, size, interval)
    cursor = 0
    for interval in sorted(intervals, key=lambda i: (i.start, -i.size)):
        active = [entry for entry in active if entry[2].end >= interval.start]
        size = _align(interval.size, alignment)
        address = _first_gap(active, cursor, size, alignment, bank)
        if address + size > capacity:
            address = _first_gap(active, 0, size, alignment, bank)
        if address + size > capacity:
            raise _OutOfMemory(interval, active, alignment)
        active.append((address, size, interval))
        addresses[interval] = address
        cursor = address + size
    return addresses


def _place_largest_first(
    intervals: list[_Interval], capacity: int, alignment: int, bank: int | None = None
) -> dict[_Interval, int]:
    """Largest buffer first, each at the lowest address free over its whole live range: an address per interval.

    Next fit scatters buffers over the whole memory, so a large buffer can find no gap wide enough although most
    bytes are free (a 60 KiB band among eight small tiles). Placing the large buffers first, at the bottom, and
    the small ones in the gaps they leave packs far tighter; it reuses bytes as soon as they are free, so it is
    the last resort, when next fit fails with every loop body tight.
    """
    addresses: dict[_Interval, int] = {}
    # intervals placed so far, by start; the longest live range bounds how far back an overlapping one can start
    placed: list[tuple[int, int, _Interval]] = []
    starts: list[int] = []
    longest = 0
    for interval in sorted(intervals, key=lambda i: (-i.size, i.start)):
        size = _align(interval.size, alignment)
        low = bisect.bisect_left(starts, interval.start - longest)
        high = bisect.bisect_right(starts, interval.end)
        overlapping = [entry for entry in placed[low:high] if entry[2].end >= interval.start]
        address = _first_gap(overlapping, 0, size, alignment, bank)
        if address + size > capacity:
            raise _OutOfMemory(interval, overlapping, alignment)
        addresses[interval] = address
        at = bisect.bisect_right(starts, interval.start)
        starts.insert(at, interval.start)
        placed.insert(at, (address, size, interval))
        longest = max(longest, interval.end - interval.start)
    return addresses


def _loop_to_tighten(failure: _OutOfMemory, tight: frozenset[scf.ForOp]) -> scf.ForOp | None:
    """The loop body whose buffers should stop living for the whole body next, or None when none is left.

    The body of the buffer that did not fit comes first; then the bodies holding the most live bytes.
    """
    extended: dict[scf.ForOp, int] = {}
    for interval in failure.live:
        loop = interval.alloc.parent_op()
        if isinstance(loop, scf.ForOp) and loop not in tight:
            extended[loop] = extended.get(loop, 0) + interval.size
    own = failure.interval.alloc.parent_op()
    if isinstance(own, scf.ForOp) and own not in tight:
        return own
    if not extended:
        return None
    return max(extended, key=lambda loop: extended[loop])


def allocate_on_chip(
    lifetimes: list[_Lifetime], memory: Memory, capacity: int, alignment: int, target: Target, bank: int | None = None
) -> None:
    """Addresses for the function's buffers in one on-chip memory, tightening loop bodies until they fit."""
    tight: frozenset[scf.ForOp] = frozenset()
    while True:
        intervals = _intervals(lifetimes, memory, tight)
        try:
            addresses = _place(intervals, capacity, alignment, bank)
        except _OutOfMemory as failure:
            loop = _loop_to_tighten(failure, tight)
            if loop is None:
                try:
                    addresses = _place_largest_first(intervals, capacity, alignment, bank)
                except _OutOfMemory:
                    pass
                else:
                    _set_addresses(addresses)
                    return
                raise OpDiagnostic(
                    f"neuron.alloc: out of {memory.value.upper()} on {target.name}: a buffer of "
                    f"{failure.interval.size} bytes per partition does not fit next to {len(failure.live)} live "
                    f"buffers ({failure.live_bytes} of {capacity} bytes per partition in use)"
                    f"{_where(failure.interval.alloc)}",
                    failure.interval.alloc,
                ) from None
            tight = tight | {loop}
            continue
        _set_addresses(addresses)
        return


def _set_addresses(addresses: dict[_Interval, int]) -> None:
    for interval, address in addresses.items():
        interval.alloc.properties["address"] = IntegerAttr(address, i64)


def _hbm_users(value: SSAValue) -> list[Operation] | None:
    """The instructions that access an HBM buffer (through views too), or None when the buffer must keep bytes of
    its own for the whole function: it is returned, or used by an op that is neither an instruction nor a view."""
    users: list[Operation] = []
    pending = [value]
    while pending:
        for use in pending.pop().uses:
            user = use.operation
            if isinstance(user, neuron.ViewOp):
                pending.append(user.result)
            elif isinstance(user, neuron.InstructionOp):
                users.append(user)
            else:
                return None
    return users


def _hbm_intervals(function: func.FuncOp) -> list[_Interval]:
    """The live ranges of a function's HBM allocs (see the module docstring for what a range is)."""
    position, loop_end = _numbering(function)
    whole = (0, max(position.values(), default=0) + 1)
    intervals = []
    for op in function.body.walk():
        if not isinstance(op, neuron.AllocOp) or op.memory is not Memory.HBM:
            continue
        users = _hbm_users(op.buffer)
        if users is None:
            start, end = whole
        elif not users:
            start = end = position[op]
        else:
            start, end = whole[1], 0
            for user in users:
                first = last = position[user]
                # a use inside a loop the alloc is not inside happens in every iteration: the whole loop
                ancestor = user.parent_op()
                while ancestor is not None and not ancestor.is_ancestor(op):
                    if isinstance(ancestor, scf.ForOp):
                        first, last = min(first, position[ancestor]), max(last, loop_end[ancestor])
                    ancestor = ancestor.parent_op()
                start, end = min(start, first), max(end, last)
        loop = op.parent_op()
        if isinstance(loop, scf.ForOp):  # one set of buffers serves every iteration: live for the whole body
            start, end = min(start, position[loop]), max(end, loop_end[loop])
        intervals.append(_Interval(op, start, end, op.row_bytes()))
    return intervals


class _FreedBytes:
    """When each HBM byte was last freed: disjoint [start, end) ranges in address order, each with the program
    position at which the buffer that held it died. Bytes no buffer has held yet are absent (never freed)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int, int]] = []  # (start, end, freed at)
        self.ends: list[int] = []  # each range's end, ascending as the ranges are disjoint: bisected

    def free(self, start: int, end: int, when: int) -> None:
        kept = []
        for range_start, range_end, freed in self.ranges:
            if range_end <= start or end <= range_start:
                kept.append((range_start, range_end, freed))
                continue
            if range_start < start:
                kept.append((range_start, start, freed))
            if end < range_end:
                kept.append((end, range_end, freed))
        kept.append((start, end, when))
        self.ranges = sorted(kept)
        self.ends = [range_end for _, range_end, _ in self.ranges]

    def boundaries(self) -> list[int]:
        return [edge for start, end, _ in self.ranges for edge in (start, end)]

    def last_freed(self, start: int, end: int) -> int:
        """The latest death among the buffers that held bytes of [start, end); -1 when none did."""
        latest = -1
        for index in range(bisect.bisect_right(self.ends, start), len(self.ranges)):
            range_start, _, freed = self.ranges[index]
            if range_start >= end:
                break
            latest = max(latest, freed)
        return latest


def _least_recently_freed(
    active: list[tuple[int, int, _Interval]], freed: _FreedBytes, size: int, alignment: int, limit: int
) -> int | None:
    """The aligned address below `limit` where `size` bytes overlap no active buffer and were freed longest ago
    (bytes never held before all others, the lowest address among equals), or None when no free range below
    `limit` is large enough."""
    # the active buffers never overlap, so in address order their ends ascend too: the first one ending after an
    # address is the only one that can overlap a range starting there without starting before it ends
    taken = sorted((address, address + taken_size) for address, taken_size, _ in active)
    stops = [stop for _, stop in taken]
    candidates = {_align(edge, alignment) for edge in [0, *freed.boundaries(), *stops]}
    best: tuple[int, int] | None = None
    for address in sorted(candidates):
        end = address + size
        if end > limit:
            break
        after = bisect.bisect_right(stops, address)
        if after < len(taken) and taken[after][0] < end:
            continue
        choice = (freed.last_freed(address, end), address)
        if best is None or choice < best:
            best = choice
    return None if best is None else best[1]


def _place_first_fit(intervals: list[_Interval], alignment: int) -> dict[_Interval, int]:
    """The lowest aligned free address for each interval, in order of start (largest first among equal starts)."""
    addresses: dict[_Interval, int] = {}
    active: list[tuple[int, int, _Interval]] = []  # (address, size, interval)
    for interval in sorted(intervals, key=lambda i: (i.start, -i.size)):
        active = [entry for entry in active if entry[2].end >= interval.start]
        size = _align(max(interval.size, 1), alignment)
        address = _first_gap(active, 0, size, alignment)
        active.append((address, size, interval))
        addresses[interval] = address
    return addresses


def _place_hbm(intervals: list[_Interval], alignment: int, spare_bytes: int) -> dict[_Interval, int]:
    """An address per interval (see the module docstring): in order of start (largest first among equal starts),
    the free range below the budget whose bytes were freed longest ago, bytes never held first; first fit's
    addresses for all of them when some buffer fits no free range below the budget."""
    first_fit = _place_first_fit(intervals, alignment)
    budget = _plan_bytes(first_fit, alignment) + spare_bytes
    addresses: dict[_Interval, int] = {}
    active: list[tuple[int, int, _Interval]] = []  # (address, size, interval)
    freed = _FreedBytes()
    for interval in sorted(intervals, key=lambda i: (i.start, -i.size)):
        dead = sorted((entry for entry in active if entry[2].end < interval.start), key=lambda e: e[2].end)
        for address, size, gone in dead:
            freed.free(address, address + size, gone.end)
        active = [entry for entry in active if entry[2].end >= interval.start]
        size = _align(max(interval.size, 1), alignment)
        place = _least_recently_freed(active, freed, size, alignment, budget)
        if place is None:  # the free ranges are too fragmented for the budget, which first fit's plan fits
            return first_fit
        active.append((place, size, interval))
        addresses[interval] = place
    return addresses


def _plan_bytes(addresses: dict[_Interval, int], alignment: int) -> int:
    return max((address + _align(max(i.size, 1), alignment) for i, address in addresses.items()), default=0)


def allocate_hbm(function: func.FuncOp, alignment: int, spare_bytes: int = HBM_SPARE_BYTES) -> None:
    """Addresses for the function's HBM scratch: buffers whose live ranges do not overlap may share bytes, in a plan
    at most `spare_bytes` larger than first fit's where the free ranges allow (see the module docstring)."""
    for interval, address in _place_hbm(_hbm_intervals(function), alignment, spare_bytes).items():
        interval.alloc.properties["address"] = IntegerAttr(address, i64)


@dataclass(frozen=True)
class NeuronAllocateMemoryPass(ModulePass):
    name = "neuron-allocate-memory"

    hbm_spare_bytes: int = HBM_SPARE_BYTES  # HBM the plan may take beyond first fit's (0: first fit's size)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = neuron.target_of(op)
        for function in defined_functions(op):
            erase_unread_products(function)
            alignment = target.on_chip_alignment_bytes
            lifetimes = _lifetimes(function, target.psum_bank_bytes)
            allocate_on_chip(lifetimes, Memory.SBUF, target.sbuf_bytes_per_partition, alignment, target)
            allocate_on_chip(
                lifetimes, Memory.PSUM, target.psum_bytes_per_partition, alignment, target, target.psum_bank_bytes
            )
            allocate_hbm(function, target.hbm_alignment_bytes, self.hbm_spare_bytes)
