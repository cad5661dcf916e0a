"""Loops of independent iterations run as whole NumPy operations, with the bits of running them one by one.

This module changes only how the *data* work of a loop nest is done. The simulator (`runtime.simulator`) hands
`run_nest` a nest's instances, traced for all iterations at once (`runtime.lanes`: which instruction, the values
of the registers it uses, per lane), and `run_nest` executes them all iterations at once, one NumPy call per
instruction of one iteration (`runtime.semantics` over lanes), when that is provably the same as running them
one after another; otherwise it declines, and the simulator does the nest's data work iteration by iteration (where the
nests inside it may batch).

**Lanes.** A nest is a loop together with the loops perfectly nested in it (`lanes.chain_of`); each iteration of
its innermost chain loop is one *lane*. Lanes may run as one batch when, for every lane:

* **Same control flow.** Every lane issues the same instructions in the same order (the trace guarantees it:
  chain and inner loop bounds are the same in every lane), so one lane's sequence describes all.
* **Private on-chip memory.** SBUF/PSUM bytes written by a statically addressed instruction of the nest are
  *private*: every read of them in a lane must come after a write of the same bytes in the same lane (checked
  exactly, byte by byte, along the lane's instance sequence, matmul accumulation reading its destination).
  Each lane then gets its own copy of these bytes (a shadow array, one slice per lane); afterwards the real
  memory receives the last lane's copy, which is what sequential execution leaves there.
* **Direct accesses do not conflict across lanes.** Everything else (HBM, register-addressed SBUF/PSUM, and
  reads of on-chip bytes the nest does not write) reads and writes the real memories through strided views with
  one stride per lane dimension, which needs each operand's offsets to be affine in the lane indices. No byte
  written by one lane may be read or written by another: checked per pair of operands on the recorded offsets,
  exactly for one operand against itself (its offsets over lanes and repetitions, with its pattern, must be
  injective) and by per-lane byte hulls between different operands (sound, possibly failing on interleavings,
  which then run sequentially). Register-addressed on-chip accesses must also stay off the private bytes.

Within one lane the instances keep their order, and lanes do not share a byte that any of them writes, so
running them interleaved (instruction by instruction across lanes) gives every lane the values sequential
execution gives it. Register attributes that differ between lanes run that instruction lane by lane; indirect
DMA (rows chosen by data) keeps its loop sequential.

**Running.** Lanes run in chunks whose private bytes fit in a core's cache (more lanes per NumPy call would
only add cache misses: a lane's tiles are read right after they are written), and when there is enough work,
disjoint ranges of lanes run on several threads (NumPy releases the GIL in its loops and BLAS), each with its
own shadows. A `Batch` holds every step's views, ready to run again: registers never depend on data, so a nest
entered with the same registers issues the same instances, and the simulator keeps the batch per entry state.

Loops that fail a check run sequentially (and are not tried again, leaving inner loops their chance).
"""

from __future__ import annotations

import bisect
import functools
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_mlir.runtime import isa, semantics, tape
from neuron_mlir.runtime.addresses import Addresses
from neuron_mlir.runtime.lanes import chain_of
from neuron_mlir.runtime.program import Instruction, Loop, Node, Reg, instructions_of, row_major_strides

if TYPE_CHECKING:  # pragma: no cover
    from neuron_mlir.runtime.lanes import Lanes
    from neuron_mlir.runtime.plan import InstructionPlan as _Plan
    from neuron_mlir.runtime.plan import OperandPlan as _Operand
    from neuron_mlir.runtime.simulator import Simulator as _Simulator

# A nest runs batched only with at least this many lanes: below, recording costs more than it saves.
MIN_LANES = 2
# Lanes run in chunks whose private bytes stay about this size, so that what one instruction of a chunk writes is
# still in cache when the next one reads it (batching more lanes than fit only adds cache misses).
CHUNK_BYTES = 2 << 20
# Independent lanes are split across up to this many threads (NumPy releases the GIL in its loops and BLAS)
# when the batch touches at least PARALLEL_BYTES.
MAX_WORKERS = min(4, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else 1
PARALLEL_BYTES = 16 << 20
# Byte masks of private on-chip memory larger than this are not built: the loop runs sequentially.
MAX_MASK_CELLS = 1 << 25
# Patterns with more contiguous runs than this are marked byte by byte.
_MAX_RUNS = 64


# ---- static analysis ---------------------------------------------------------------------------------------


@dataclass
class _Footprint:
    """The bytes a statically addressed on-chip operand touches: mask rows [p0, p1) x byte runs."""

    memory_id: int
    p0: int
    p1: int
    runs: list[tuple[int, int]] | None  # [start, end) relative to the mask origin, or None: use `index`
    index: np.ndarray | None

    def covered(self, mask: np.ndarray) -> bool:
        rows = mask[self.p0 : self.p1]
        if self.runs is not None:
            return all(rows[:, start:end].all() for start, end in self.runs)
        return bool(rows[:, self.index].all())

    def any_in(self, mask: np.ndarray) -> bool:
        rows = mask[self.p0 : self.p1]
        if self.runs is not None:
            return any(rows[:, start:end].any() for start, end in self.runs)
        return bool(rows[:, self.index].any())

    def mark(self, mask: np.ndarray) -> None:
        if self.runs is not None:
            for start, end in self.runs:
                mask[self.p0 : self.p1, start:end] = True
        else:
            mask[self.p0 : self.p1, self.index] = True


@dataclass
class _Private:
    """A private operand: its view into the lane shadow of its host array."""

    shadow: int  # index into Nest.shadows
    offset: int  # bytes from the lane's shadow start to element 0 of partition partition_start
    shape: tuple[int, ...]  # [P, F...]
    free_strides: tuple[int, ...]
    dtype: np.dtype


@dataclass
class _Shadow:
    array: np.ndarray  # the host array (a machine range) whose bytes it privatises
    lo: int  # host row byte range [lo, hi) it covers
    hi: int
    rows: int  # partitions 0..rows-1

    @property
    def lane_bytes(self) -> int:
        return self.rows * (self.hi - self.lo)


@dataclass
class Nest:
    """A loop nest that may run batched: the static facts; `run_nest` checks the dynamic ones."""

    chain: list[Loop]  # chain[0] is the nest's loop; chain[k + 1] is the only loop in chain[k]'s body
    plans: list[int]  # plan indices of every instruction in the innermost body (any depth)
    private: dict[tuple[int, str], _Private]
    reads_private: dict[int, list[tuple[str, _Footprint]]]  # plan -> private operands it reads
    writes_private: dict[int, list[tuple[str, _Footprint]]]  # plan -> private operands it writes
    accumulate_reg: dict[int, int]  # plan -> column of its register-valued `accumulate` (dst is read then)
    masks: dict[int, tuple[int, int, int]]  # memory id -> (origin byte, rows, width) of the private masks
    partition_cuts: dict[int, list[int]]  # memory id -> partition boundaries: mask row r is [cuts[r], cuts[r + 1])
    private_masks: dict[int, np.ndarray]  # memory id -> every private byte
    shadows: list[_Shadow]
    failed: bool = False
    coverage: dict[Any, bool] = field(default_factory=dict)  # lane sequence (+ flags) -> passes

    @property
    def lane_bytes(self) -> int:
        return sum(shadow.lane_bytes for shadow in self.shadows)


def analyse(loop: Loop, plan_of: dict[int, _Plan], homes: Sequence[Any]) -> Nest | None:
    """The loop as a nest that may run batched, or None (`plan_of` maps id(instruction) to its plan)."""
    return _analyse(loop, plan_of, homes)


def _unrolled(nodes: Sequence[Node]) -> list[Instruction]:
    """One iteration's instructions in order, inner loops taken twice (a cheap stand-in for the real order)."""
    found: list[Instruction] = []
    for node in nodes:
        if isinstance(node, Instruction):
            found.append(node)
        elif isinstance(node, Loop):
            inner = _unrolled(node.body)
            found.extend(inner + inner)
    return found


def _data_dependent(inst: Instruction) -> bool:
    """Does what the instruction touches, or whether it fails, depend on data (indirect DMA), or is it unknown?"""
    return inst.opcode not in isa.OPCODES or "offsets" in inst.operands or bool(inst.attrs.get("indirect"))


def _reads_dst(inst: Instruction) -> bool | None:
    """Does the instruction read its destination? None: it depends on a register."""
    if inst.opcode != "nc_matmul":
        return False
    accumulate = inst.attrs.get("accumulate")
    if isinstance(accumulate, Reg):
        return None
    return bool(accumulate) and not inst.attrs.get("is_transpose")


def _contiguous(pattern: tuple[tuple[int, int], ...]) -> bool:
    """Does the pattern visit consecutive elements, each once (so its bytes are exactly its hull)?"""
    span = 1
    for step, num in sorted((d for d in pattern if d[1] > 1), key=lambda d: abs(d[0])):
        if abs(step) != span:
            return False
        span *= num
    return True


def _runs(starts: np.ndarray, itemsize: int) -> list[tuple[int, int]] | None:
    """Merge sorted element start bytes into [start, end) byte runs (None when there are too many)."""
    if starts.size == 0:
        return []
    breaks = np.nonzero(starts[1:] > starts[:-1] + itemsize)[0]
    if breaks.size >= _MAX_RUNS:
        return None
    first = np.concatenate(([0], breaks + 1))
    last = np.concatenate((breaks, [starts.size - 1]))
    return [(int(starts[a]), int(starts[b]) + itemsize) for a, b in zip(first, last, strict=True)]


def _analyse(loop: Loop, plan_of: dict[int, _Plan], homes: Sequence[Any]) -> Nest | None:
    chain = chain_of(loop)
    body = chain[-1].body
    instructions = instructions_of(body)
    if not instructions or any(_data_dependent(inst) for inst in instructions):
        return None
    plans = [plan_of[id(inst)] for inst in instructions]

    # Statically addressed on-chip operands: their bytes, in hardware row addresses per memory.
    static_ops: list[tuple[_Plan, _Operand]] = []
    for plan in plans:
        for op in plan.operands:
            if op.site.memory_id != _HBM_ID and op.register < 0:
                static_ops.append((plan, op))
    # Masks have one row per interval between the partition boundaries these operands use (every partition of an
    # interval is touched by the same operands in the same way) and one column per byte of their address hull.
    bounds: dict[int, list[int]] = {}
    cuts: dict[int, set[int]] = {}
    for _, op in static_ops:
        site = op.site
        entry = bounds.setdefault(site.memory_id, [site.base + site.low, site.base + site.high])
        entry[0] = min(entry[0], site.base + site.low)
        entry[1] = max(entry[1], site.base + site.high)
        cuts.setdefault(site.memory_id, set()).update((site.partition_start, site.partition_end))
    masks: dict[int, tuple[int, int, int]] = {}
    partition_cuts = {memory_id: sorted(found) for memory_id, found in cuts.items()}
    for memory_id, (lo, hi) in bounds.items():
        rows = len(partition_cuts[memory_id]) - 1
        if rows * (hi - lo) > MAX_MASK_CELLS:
            return None
        masks[memory_id] = (lo, rows, hi - lo)
    footprints: dict[tuple[int, str], _Footprint] = {}
    for plan, op in static_ops:
        site = op.site
        origin = masks[site.memory_id][0]
        index = None
        if _contiguous(site.pattern):  # one run: the hull
            runs: list[tuple[int, int]] | None = [(site.base + site.low - origin, site.base + site.high - origin)]
        else:
            starts = site.byte_offsets(0) - origin
            runs = _runs(starts, site.itemsize)
            if runs is None:
                index = (starts[:, None] + np.arange(site.itemsize)[None, :]).reshape(-1)
        row_cuts = partition_cuts[site.memory_id]
        footprints[(plan.index, op.role)] = _Footprint(
            site.memory_id, row_cuts.index(site.partition_start), row_cuts.index(site.partition_end), runs, index
        )

    # Private bytes: everything a static on-chip write touches.
    private_masks = {m: np.zeros((rows, width), bool) for m, (_, rows, width) in masks.items()}
    for plan, op in static_ops:
        if op.site.is_write:
            footprints[(plan.index, op.role)].mark(private_masks[op.site.memory_id])

    private: dict[tuple[int, str], _Private] = {}
    reads_private: dict[int, list[tuple[str, _Footprint]]] = {}
    writes_private: dict[int, list[tuple[str, _Footprint]]] = {}
    accumulate_reg: dict[int, int] = {}
    shadow_of: dict[int, _Shadow] = {}
    layout: list[tuple[_Plan, _Operand, int]] = []
    for plan, op in static_ops:
        footprint = footprints[(plan.index, op.role)]
        mask = private_masks[op.site.memory_id]
        if not footprint.any_in(mask):
            continue  # a read of bytes the nest never writes: direct
        if not footprint.covered(mask):
            return None  # partly private: not supported
        access = plan.inst.operands[op.role]
        home = homes[access.buffer]
        row_offset = home.base + int(access.offset) * home.dtype.itemsize
        shadow = shadow_of.get(id(home.array))
        lo, hi = row_offset + op.site.low, row_offset + op.site.high
        if shadow is None:
            shadow = shadow_of[id(home.array)] = _Shadow(home.array, lo, hi, op.site.partition_end)
        shadow.lo, shadow.hi = min(shadow.lo, lo), max(shadow.hi, hi)
        shadow.rows = max(shadow.rows, op.site.partition_end)
        layout.append((plan, op, row_offset))
        if op.site.is_write:
            writes_private.setdefault(plan.index, []).append((op.role, footprint))
            reads = _reads_dst(plan.inst) if op.role == "dst" else False
            if reads:
                reads_private.setdefault(plan.index, []).append((op.role, footprint))
            elif reads is None:
                accumulate_reg[plan.index] = plan.columns[("attr", "accumulate")]
        else:
            reads_private.setdefault(plan.index, []).append((op.role, footprint))
    # A register-addressed on-chip accumulate may read its destination: only as a direct operand.
    shadows = list(shadow_of.values())
    index_of_shadow = {id(shadow.array): position for position, shadow in enumerate(shadows)}
    for plan, op, row_offset in layout:
        shadow = shadows[index_of_shadow[id(op.view_args[2])]]
        span = shadow.hi - shadow.lo
        shape, dtype, _, _, strides, _ = op.view_args
        private[(plan.index, op.role)] = _Private(
            index_of_shadow[id(op.view_args[2])],
            row_offset - shadow.lo + op.site.partition_start * span,
            shape,
            strides[1:],
            dtype,
        )

    nest = Nest(
        chain=chain,
        plans=sorted({plan.index for plan in plans}),
        private=private,
        reads_private=reads_private,
        writes_private=writes_private,
        accumulate_reg=accumulate_reg,
        masks=masks,
        partition_cuts=partition_cuts,
        private_masks=private_masks,
        shadows=shadows,
    )
    # A cheap static filter: one iteration (inner loops twice, register accumulates as plain writes) must
    # already read private bytes only after writing them.
    if not _covers(nest, [plan_of[id(inst)].index for inst in _unrolled(body)], {}):
        return None
    return nest


def _covers(nest: Nest, sequence: Sequence[int], reads_dst: dict[tuple[int, int], bool]) -> bool:
    """Does every private read along one lane's instance sequence come after a write of its bytes?"""
    written = {m: np.zeros((rows, width), bool) for m, (_, rows, width) in nest.masks.items()}
    seen: dict[int, int] = {}
    for index in sequence:
        occurrence = seen.get(index, 0)
        seen[index] = occurrence + 1
        for _, footprint in nest.reads_private.get(index, ()):
            if not footprint.covered(written[footprint.memory_id]):
                return False
        if reads_dst.get((index, occurrence)):
            for role, footprint in nest.writes_private.get(index, ()):
                if role == "dst" and not footprint.covered(written[footprint.memory_id]):
                    return False
        for _, footprint in nest.writes_private.get(index, ()):
            footprint.mark(written[footprint.memory_id])
    return True


_HBM_ID = 2  # machine.HBM_ID (imported lazily by the simulator; kept literal to avoid an import cycle)


# ---- recording ---------------------------------------------------------------------------------------------


# ---- running -----------------------------------------------------------------------------------------------


class _Fallback(Exception):
    """The recorded execution cannot run batched."""


class _TooFewLanes(_Fallback):
    """Batching would not pay this time (the nest may still batch when entered with more lanes)."""


def run_nest(sim: _Simulator, nest: Nest, lanes: Lanes) -> Batch | None:
    """Execute the data work of a traced nest as a batch and return the batch (which can run again whenever the
    nest is entered with the same registers); None when it must run instance by instance."""
    try:
        batch = Batch(sim, nest, lanes)
    except _TooFewLanes:
        return None
    except _Fallback:
        nest.failed = True
        return None
    started = time.process_time()
    batch.run()
    batch.run_seconds = time.process_time() - started
    return batch


class _Direct:
    """A direct operand's offsets: element `base[j] + sum(lane_d * delta_d)` (register part) for lane, rep j."""

    __slots__ = ("base", "deltas", "op", "plan", "regs")

    def __init__(self, plan: _Plan, op: _Operand, regs: np.ndarray, deltas: tuple[int, ...]) -> None:
        self.plan, self.op, self.regs, self.deltas = plan, op, regs, deltas
        self.base = regs.reshape(-1, regs.shape[-1])[0]


class Batch:
    """A recorded nest execution, checked and turned into batched steps (see the module docstring)."""

    def __init__(self, sim: _Simulator, nest: Nest, trace: Lanes) -> None:
        self.run_seconds = 0.0  # the CPU time its first run took
        # the simulator's plans and target, not the simulator: the tape keeps batches, and a simulator in a cycle
        # with its own tape would outlive its program once `heap.first_run` froze it
        self.plans, self.target = sim.plans, sim.target
        # while the batch is built in a first run: its recorder's memo of view addresses, told those of the views
        # made here (`runtime.addresses`); not kept after, as the tape keeps the batch
        recorder = getattr(sim, "recorder", None)
        self._addresses: Addresses | None = recorder.addresses if recorder is not None else None
        self.nest = nest
        self.lanes = lanes = trace.shape
        if trace.count < MIN_LANES:
            raise _TooFewLanes
        self.sequence = [plan.index for plan in trace.positions]
        plans = sim.plans
        occurrences: dict[int, int] = {}
        for index in self.sequence:
            occurrences[index] = occurrences.get(index, 0) + 1
        self.occurrences = occurrences
        # Register values: plan -> int64 [*lanes, reps, columns].
        self.values: dict[int, np.ndarray] = {}
        by_plan: dict[int, list[int]] = {}
        for position, plan in enumerate(trace.positions):
            if plan.registers:
                by_plan.setdefault(plan.index, []).append(position)
        for index, positions in by_plan.items():
            table = np.stack([trace.columns(position) for position in positions], axis=1)
            self.values[index] = table.reshape((*lanes, len(positions), table.shape[-1]))
        # Register attributes: per (plan, rep) one value, or per lane when they differ.
        self.attrs: dict[tuple[int, int], dict[str, Any]] = {}
        reads_dst: dict[tuple[int, int], bool] = {}
        for index in occurrences:
            plan = plans[index]
            if not plan.register_attrs:
                continue
            values = self.values[index]
            for rep in range(occurrences[index]):
                resolved: dict[str, Any] = {}
                for name, _ in plan.register_attrs:
                    column = values[..., rep, plan.columns[("attr", name)]]
                    if plan.attr_is_flag[name]:
                        column = column != 0
                    first = column.reshape(-1)[0].item()
                    resolved[name] = first if (column == first).all() else column
                    if name == "accumulate" and index in nest.accumulate_reg:
                        reads_dst[(index, rep)] = bool(np.any(column))
                self.attrs[(index, rep)] = resolved
        key = (tuple(self.sequence), tuple(sorted(reads_dst.items())))
        passes = nest.coverage.get(key)
        if passes is None:
            passes = nest.coverage[key] = _covers(nest, self.sequence, reads_dst)
        if not passes:
            raise _Fallback
        self.direct = self._direct_operands()
        self._check_conflicts()
        self._prepare(sim)
        self._addresses = None

    # ---- direct operands and their conflicts ---------------------------------------------------------------

    def _direct_operands(self) -> dict[tuple[int, str], _Direct]:
        lanes = self.lanes
        direct: dict[tuple[int, str], _Direct] = {}
        for index, reps in self.occurrences.items():
            plan = self.plans[index]
            for op in plan.operands:
                if (index, op.role) in self.nest.private:
                    continue
                if op.register < 0:
                    regs = np.zeros((*lanes, reps), np.int64)
                    deltas = (0,) * len(lanes)
                else:
                    regs = self.values[index][..., plan.columns[("reg", op.register)]]
                    deltas = _affine(regs, lanes)
                direct[(index, op.role)] = _Direct(plan, op, regs, deltas)
        return direct

    def _check_conflicts(self) -> None:
        """No byte written by one lane is touched by another (see the module docstring)."""
        by_memory: dict[int, list[_Direct]] = {}
        for group in self.direct.values():
            by_memory.setdefault(group.op.site.memory_id, []).append(group)
        for memory_id, groups in by_memory.items():
            if memory_id != _HBM_ID:
                mask = self.nest.private_masks.get(memory_id)
                if mask is not None:
                    origin, cuts = self.nest.masks[memory_id][0], self.nest.partition_cuts[memory_id]
                    for group in groups:
                        if group.op.register >= 0 and _touches_mask(group, mask, origin, cuts):
                            raise _Fallback
            if not any(g.op.site.is_write for g in groups):
                continue
            # Operands of one shape (element size, pattern, partitions, lane strides) form a family: its members
            # differ only in their base offsets, so one injectivity test covers them all, exactly.
            families: dict[tuple[object, ...], list[_Direct]] = {}
            for group in groups:
                site = group.op.site
                key = (site.itemsize, site.pattern, site.partition_start, site.partition_end, group.deltas)
                families.setdefault(key, []).append(group)
            # Members that cannot meet (disjoint hulls over all lanes and reps) need not share a test.
            members = [part for family in families.values() for part in _components(family)]
            hulls = [_lane_hulls(family) for family in members]
            for position, family in enumerate(members):
                writes = any(g.op.site.is_write for g in family)
                if writes:
                    _check_family(family)
                for other in range(position + 1, len(members)):
                    if writes or any(g.op.site.is_write for g in members[other]):
                        _check_pair(family[0].op.site, members[other][0].op.site, hulls[position], hulls[other])

    # ---- execution ---------------------------------------------------------------------------------------------

    def _prepare(self, sim: _Simulator) -> None:
        """Split the lanes into chunks and workers and build every step's views once (the lane shadows from
        `sim`'s shadow space)."""
        nest, lanes = self.nest, self.lanes
        inner = int(np.prod(lanes[1:]))
        chunk = max(1, min(lanes[0], CHUNK_BYTES // max(1, nest.lane_bytes * inner)))
        work = sum(self.plans[index].work_bytes for index in self.sequence) * int(np.prod(lanes))
        workers = _workers(lanes[0], chunk, work)
        # Worker w runs the lanes [bounds[w], bounds[w + 1]) of the first lane dimension, chunk by chunk.
        per_worker = -(-lanes[0] // workers)
        bounds = [min(lanes[0], w * per_worker) for w in range(workers + 1)]
        self.parts: list[list[tape.Step]] = []
        # per part, each step's maker and views: the step is `maker(views)` (`tape.Maker`)
        self.makers: list[list[tuple[tape.Maker, dict[str, np.ndarray]]]] = []
        self.accesses = self._accesses()
        for worker in range(workers):
            shadows = _shadows(sim, nest, worker, chunk * inner)
            made: list[tuple[tape.Maker, dict[str, np.ndarray]]] = []
            for start in range(bounds[worker], bounds[worker + 1], chunk):
                stop = min(bounds[worker + 1], start + chunk)
                chunk_lanes = (stop - start, *lanes[1:])
                made.extend(self._steps(start, stop, chunk_lanes, shadows))
                if stop == lanes[0]:
                    last, final_shadows = chunk_lanes, shadows
            self.parts.append([maker(views) for maker, views in made])
            self.makers.append(made)
        # Real memory gets the last lane's private bytes, as sequential execution leaves them there.
        final = tuple(extent - 1 for extent in last)
        self.write_back: list[tuple[np.ndarray, np.ndarray]] = []
        done: set[tuple[int, str]] = set()
        for index in self.occurrences:
            for role, _ in nest.writes_private.get(index, ()):
                if (index, role) not in done:
                    done.add((index, role))
                    view = _private_view(nest.private[(index, role)], final_shadows, last)[final]
                    self.write_back.append((self.plans[index].static_views[role], view))
                    self.accesses.append(("", {"dst": self.plans[index].static_views[role]}, {}))

    def _accesses(self) -> list[tuple[str, dict[str, np.ndarray], Any]]:
        """Which simulated bytes the batch reads and writes, for `runtime.refill`: per instruction of a lane, in
        order, (opcode, its direct operands over all lanes, attributes); the write-back follows. Lanes share no
        byte any of them writes, so this order shows each written byte's accesses in the order of its lane."""
        accesses = []
        seen: dict[int, int] = {}
        for index in self.sequence:
            rep = seen.get(index, 0)
            seen[index] = rep + 1
            plan = self.plans[index]
            views = {
                op.role: self._direct_view(self.direct[(index, op.role)], rep, 0, self.lanes)
                for op in plan.operands
                if (index, op.role) in self.direct
            }
            attrs = plan.attrs
            resolved = self.attrs.get((index, rep))
            if resolved:
                attrs = {**attrs, **resolved}
            accesses.append((plan.inst.opcode, views, attrs))
        return accesses

    def _steps(
        self, start: int, stop: int, lanes: tuple[int, ...], shadows: list[np.ndarray]
    ) -> list[tuple[tape.Maker, dict[str, np.ndarray]]]:
        """One step per instruction of one chunk, prepared (`runtime.tape`) where its form allows: its maker and
        the views the maker makes it of."""
        nest, plans, target = self.nest, self.plans, self.target
        private_views: dict[tuple[int, str], np.ndarray] = {}
        for key, info in nest.private.items():
            if key[0] in self.occurrences:
                private_views[key] = private = _private_view(info, shadows, lanes)
                if self._addresses is not None:
                    self._addresses.note(private, self._addresses.of(shadows[info.shadow]) + info.offset)
        nl = len(lanes)
        steps: list[tuple[tape.Maker, dict[str, np.ndarray]]] = []
        seen: dict[int, int] = {}
        for index in self.sequence:
            rep = seen.get(index, 0)
            seen[index] = rep + 1
            plan = plans[index]
            views: dict[str, np.ndarray] = {}
            for op in plan.operands:
                key = (index, op.role)
                view = private_views.get(key)
                if view is None:
                    view = self._direct_view(self.direct[key], rep, start, lanes)
                views[op.role] = view
            attrs = plan.attrs
            per_lane = False
            resolved = self.attrs.get((index, rep))
            if resolved:
                attrs = dict(attrs)
                for name, value in resolved.items():
                    if isinstance(value, np.ndarray):
                        value = value[start:stop]
                        per_lane = True
                    attrs[name] = value
            engine = plan.inst.engine
            maker: tape.Maker
            if per_lane:
                function = isa.OPCODES[plan.inst.opcode].semantics
                maker = functools.partial(_lanewise_step, function, attrs=attrs, engine=engine, target=target, nl=nl)
            else:
                maker = functools.partial(
                    tape.lane_step, plan.inst.opcode, attrs=attrs, engine=engine, target=target, nl=nl
                )
            steps.append((maker, views))
        return steps

    def run(self) -> None:
        """The data work of the nest: every step of every worker, then the write-back."""
        _run_batch(self.parts, self.write_back)

    def operand_views(self) -> dict[str, np.ndarray]:
        """The operand views of every step of every worker, keyed for `remade`."""
        return {
            f"{part} {position} {role}": view
            for part, made in enumerate(self.makers)
            for position, (_, views) in enumerate(made)
            for role, view in views.items()
        }

    def remade(self, views: dict[str, np.ndarray]) -> tape.Step:
        """`run` with every step made again of `views` (keyed as `operand_views` keys them): the same work over
        other memory holding the same bytes (`runtime.bound_inputs`)."""
        parts = [
            [
                maker({role: views[f"{part} {position} {role}"] for role in own})
                for position, (maker, own) in enumerate(made)
            ]
            for part, made in enumerate(self.makers)
        ]
        return functools.partial(_run_batch, parts, self.write_back)

    def _direct_view(self, group: _Direct, rep: int, start: int, lanes: tuple[int, ...]) -> np.ndarray:
        shape, dtype, array, array_start, strides, itemsize = group.op.view_args
        moved = (int(group.base[rep]) + start * group.deltas[0]) * itemsize
        view = np.ndarray(
            lanes + shape,
            dtype,
            buffer=array,
            offset=array_start + moved,
            strides=tuple(d * itemsize for d in group.deltas) + strides,
        )
        if self._addresses is not None:
            self._addresses.note(view, group.op.host_address + moved)
        return view


def _run_batch(parts: list[list[tape.Step]], write_back: list[tuple[np.ndarray, np.ndarray]]) -> None:
    if len(parts) == 1:
        _run_steps(parts[0])
    else:
        futures = [_pool().submit(_run_steps, part) for part in parts[1:]]
        try:
            _run_steps(parts[0])
        finally:
            for future in futures:
                future.result()
    for real, shadow in write_back:
        real[...] = shadow


def _lanewise_step(
    function: Any, views: dict[str, np.ndarray], attrs: dict[str, Any], engine: Any, target: Any, nl: int
) -> tape.Step:
    """An instruction whose register attributes differ between lanes, run lane by lane."""
    return functools.partial(semantics.lanewise, function, views, attrs, engine, target, nl)


def _run_steps(steps: list[tape.Step]) -> None:
    # prepared steps leave floating-point errors to their caller, as a tape does (`runtime.tape`); the
    # setting is per thread
    with np.errstate(all="ignore"):
        for step in steps:
            step()


def _shadows(sim: _Simulator, nest: Nest, worker: int, lanes: int) -> list[np.ndarray]:
    """One [lanes, rows, span] byte array per shadow, carved from the simulator's shadow space for `worker`
    (`Simulator.shadow_space`)."""
    sizes = [lanes * shadow.lane_bytes for shadow in nest.shadows]
    total = sum(-(-size // 64) * 64 for size in sizes)
    space = sim.shadow_space(worker, total)
    arrays, offset = [], 0
    for shadow, size in zip(nest.shadows, sizes, strict=True):
        flat = space[offset : offset + size]
        arrays.append(flat.reshape(lanes, shadow.rows, shadow.hi - shadow.lo))
        offset += -(-size // 64) * 64
    return arrays


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max(1, MAX_WORKERS - 1), thread_name_prefix="neuron-sim-lanes")
        return _POOL


def _workers(first_lanes: int, chunk: int, work_bytes: int) -> int:
    """How many threads share the lanes: one unless there is enough work for each to have a chunk of it."""
    if MAX_WORKERS <= 1 or work_bytes < PARALLEL_BYTES:
        return 1
    return max(1, min(MAX_WORKERS, -(-first_lanes // chunk) if chunk < first_lanes else first_lanes))


def _private_view(info: _Private, shadows: list[np.ndarray], lanes: tuple[int, ...]) -> np.ndarray:
    """A private operand over lanes: [*lanes, P, F...] in its shadow (lanes row-major over the shadow's lanes)."""
    shadow = shadows[info.shadow]
    span = shadow.shape[2]
    lane_strides = [shadow.shape[1] * span * stride for stride in row_major_strides(lanes)]
    return np.ndarray(
        lanes + info.shape,
        info.dtype,
        buffer=shadow,
        offset=info.offset,
        strides=(*lane_strides, span, *info.free_strides),
    )


def _affine(regs: np.ndarray, lanes: tuple[int, ...]) -> tuple[int, ...]:
    """Per-lane-dimension deltas of values [*lanes, reps] that are affine in the lane indices, else _Fallback."""
    origin = regs[(0,) * len(lanes)]
    deltas = []
    expected = np.broadcast_to(origin, regs.shape).copy()
    for dim, extent in enumerate(lanes):
        if extent == 1:
            deltas.append(0)
            continue
        step = [0] * len(lanes)
        step[dim] = 1
        delta = regs[tuple(step)] - origin
        if not (delta == delta[0]).all():
            raise _Fallback
        deltas.append(int(delta[0]))
        shape = [1] * len(lanes) + [1]
        shape[dim] = extent
        expected += (np.arange(extent, dtype=np.int64) * int(delta[0])).reshape(shape)
    if not np.array_equal(expected, regs):
        raise _Fallback
    return tuple(deltas)


def _addresses(group: _Direct) -> np.ndarray:
    """Hardware byte address of element 0 per lane and rep: [*lanes, reps]."""
    site = group.op.site
    return site.base + group.regs * site.itemsize


def _lane_hulls(family: list[_Direct]) -> tuple[np.ndarray, np.ndarray]:
    """Per lane (flattened), the byte hull [lo, hi) of a family's accesses over all their reps."""
    los, his = [], []
    for group in family:
        site = group.op.site
        addresses = _addresses(group)
        flat = addresses.reshape(-1, addresses.shape[-1])
        los.append(flat.min(axis=1) + site.low)
        his.append(flat.max(axis=1) + site.high)
    return np.min(los, axis=0), np.max(his, axis=0)


def _components(family: list[_Direct]) -> list[list[_Direct]]:
    """Split a family into groups of members whose byte hulls (over all lanes and reps) overlap transitively."""
    spans = []
    for group in family:
        addresses = _addresses(group)
        spans.append((int(addresses.min()) + group.op.site.low, int(addresses.max()) + group.op.site.high, group))
    spans.sort(key=lambda span: span[0])
    parts: list[list[_Direct]] = []
    reach = None
    for lo, hi, group in spans:
        if reach is None or lo >= reach:
            parts.append([])
            reach = hi
        parts[-1].append(group)
        reach = max(reach, hi)
    return parts


def _touches_mask(group: _Direct, mask: np.ndarray, origin: int, cuts: list[int]) -> bool:
    """Can the operand touch a private byte (any lane, any rep)? Conservative: its whole byte hull, and every mask
    row whose partition interval meets its partitions."""
    site = group.op.site
    addresses = _addresses(group)
    lo = int(addresses.min()) + site.low - origin
    hi = int(addresses.max()) + site.high - origin
    lo, hi = max(lo, 0), min(hi, mask.shape[1])
    first = max(0, bisect.bisect_right(cuts, site.partition_start) - 1)
    last = min(mask.shape[0], bisect.bisect_left(cuts, site.partition_end))
    if lo >= hi or first >= last:
        return False
    return bool(mask[first:last, lo:hi].any())


def _check_family(family: list[_Direct]) -> None:
    """Operands of one shape, one of them written: lanes x bases x pattern must never reach one element twice.

    Their element offsets are `base + sum(lane_d * delta_d) + pattern`, with `base` ranging over every member's
    offset in every rep (lane 0's); a sufficient test is that these bases form an arithmetic progression (or one
    value) and that the pattern (lane dimensions, the progression, the access's own dimensions) is injective.
    """
    first = family[0]
    site = first.op.site
    lanes = first.regs.shape[:-1]
    if any((g.op.site.base - site.base) % site.itemsize for g in family):
        raise _Fallback  # members not aligned to each other's elements
    # (sorted(set()) rather than np.unique, whose first call imports numpy.ma)
    offsets = {int(v) + (g.op.site.base - site.base) // site.itemsize for g in family for v in g.base}
    bases = np.array(sorted(offsets), dtype=np.int64)
    dims = [(delta, extent) for delta, extent in zip(first.deltas, lanes, strict=True) if extent > 1]
    if bases.size > 1:
        steps = np.diff(bases)
        if not (steps == steps[0]).all():
            raise _Fallback
        dims.append((int(steps[0]), int(bases.size)))
    dims.extend(site.pattern)
    if not isa.injective(tuple(dims)):
        raise _Fallback


def _check_pair(a: Any, b: Any, a_hulls: tuple[np.ndarray, np.ndarray], b_hulls: tuple[np.ndarray, np.ndarray]) -> None:
    """Two families of different shapes, one writing: no lane's hull may meet another lane's (sound, not exact)."""
    if a.partition_end <= b.partition_start or b.partition_end <= a.partition_start:
        return
    a_lo, a_hi = a_hulls
    b_lo, b_hi = b_hulls
    if a_hi.max() <= b_lo.min() or b_hi.max() <= a_lo.min():
        return
    if a_lo.size > 4096:
        raise _Fallback
    overlap = (a_lo[:, None] < b_hi[None, :]) & (b_lo[None, :] < a_hi[:, None])
    np.fill_diagonal(overlap, False)
    if overlap.any():
        raise _Fallback
