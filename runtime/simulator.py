"""Runs a `Program` on a simulated NeuronCore: results bit for bit, time by the cost model, races checked.

`run_program` validates the program (`runtime.validate`, the same checks a bundle gets), lays out its memory
plan (`runtime.machine`), writes constants and inputs to HBM, executes, and returns copies of the outputs and
a `Profile`. `run_validated` runs a `ValidatedProgram` (a bundle read back, a program the compiler validated
once) without validating it again.

Function and time are separate. Instructions execute strictly in program order (loops iterate, ScalarOps update
registers), each as `runtime.semantics` defines, so results never depend on timing. Timing follows
`runtime.cost_model`:

* Each queue (tensor, vector, scalar, gpsimd, sync and the 16 DMA queues) is in order: an instance starts when
  its queue is free and the most recent issued instance of every id in its `waits` has completed (an id with no
  issued instance yet imposes no wait).
* Compute instances take their cost-model duration, plus the dependency penalty when they read what the
  previous instance of their queue wrote.
* A DMA instance first waits its fixed latency, then moves its bytes through two shared resources: the core's
  DMA engines (16 x the per-engine rate, each transfer limited to the engines its partitions use and slowed by
  its chunk efficiency) and HBM bandwidth. Bandwidth is granted in program order: a transfer gets whatever
  earlier transfers leave free at each moment, so queues never add up to more than the core has and simulated
  time can never beat the HBM roofline.
* ScalarOps and loop bookkeeping take no time.

With `check_races` (the default), `runtime.races` verifies that every conflicting pair of accesses from
different queues is ordered by waits, raising `RaceError` naming both instructions otherwise.

The per-instruction work is planned once per static instruction (views of static accesses, strides, costs,
resolved waits), so an instance costs one semantics call plus a few list operations. The plans, the memories and
the loop analysis are kept with the `ValidatedProgram` and reused by later runs of it; `run_program` also
remembers the validation of a `Program` object as long as the object is alive and unchanged.

With `vectorize` (the default), timing, race checking and registers still advance instance by instance in
program order, but the data work of loops whose iterations are independent runs as whole NumPy operations over
all iterations at once (`runtime.vectorize`), giving the same bits. `vectorize=False` runs the reference path,
where every instance executes its semantics as it issues.

Nothing on the timeline depends on data, so once a vectorised run has produced the profile (and, when races are
to be checked, a checked run found none), later runs do only the data work and return a copy of that profile.
The first of them records its data work as a tape (`runtime.prepared`) and the ones after it replay the tape,
walking nothing.
"""

from __future__ import annotations

import bisect
import copy as copy_module
import dataclasses
import math
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_mlir.runtime import blas, cost_model, dtypes, isa, prepared, vectorize
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.isa import SCALAR_FUNCTIONS, wrap32
from neuron_mlir.runtime.machine import FILL_BYTE, MEMORY_NAMES, Machine
from neuron_mlir.runtime.profile import QUEUE_NAMES, InstructionStats, Profile, TraceEvents
from neuron_mlir.runtime.program import Access, Instruction, Loop, Node, Program, Reg, ScalarOp
from neuron_mlir.runtime.races import AccessSite, InstanceInfo, RaceChecker, RaceError, SimulationError
from neuron_mlir.runtime.validate import ValidatedProgram, validate_program

__all__ = ["RaceError", "SimulationError", "run_program", "run_validated"]

_ENGINE_QUEUE = {Engine.TENSOR: 0, Engine.VECTOR: 1, Engine.SCALAR: 2, Engine.GPSIMD: 3, Engine.SYNC: 4}
_DMA_QUEUE_BASE = 5


def queue_index(inst: Instruction) -> int:
    """The simulator's queue number of an instruction (index into `profile.QUEUE_NAMES`)."""
    if inst.engine is Engine.DMA:
        return _DMA_QUEUE_BASE + int(inst.queue)
    return _ENGINE_QUEUE[inst.engine]


def run_program(
    program: Program | ValidatedProgram,
    inputs: Sequence[np.ndarray],
    *,
    check_races: bool = True,
    memory_sizes_override: Mapping[Any, int] | None = None,
    vectorize: bool = True,
) -> tuple[list[np.ndarray], Profile]:
    """Validate and run `program` on `inputs` (in `program.inputs` order); return (outputs, profile).

    Inputs must have exactly the bindings' shapes and dtypes. Outputs are fresh arrays read through
    `program.outputs`, in order. `memory_sizes_override` maps 'sbuf'/'psum' to bytes per partition and 'hbm' to
    bytes, replacing the target's sizes (for programs whose buffers are not yet placed within capacity).
    `vectorize=False` runs every instance one by one (the reference; results and profile are the same).
    Raises `BundleError` for an invalid program, `ValueError` for bad inputs, `RaceError` for a data race.
    A `ValidatedProgram` (without an override) runs as `run_validated` runs it, without validating again.
    """
    if isinstance(program, ValidatedProgram) and memory_sizes_override is None:
        return run_validated(program, inputs, check_races=check_races, vectorize=vectorize)
    validated = _validated(program.program if isinstance(program, ValidatedProgram) else program, memory_sizes_override)
    return run_validated(validated, inputs, check_races=check_races, vectorize=vectorize)


def run_validated(
    validated: ValidatedProgram,
    inputs: Sequence[np.ndarray],
    *,
    check_races: bool = True,
    vectorize: bool = True,
    share_profile: bool = False,
) -> tuple[list[np.ndarray], Profile]:
    """`run_program` for a program that already passed `validate_program` (e.g. from `bundle.read_bundle`).

    Runs of the same `ValidatedProgram` share their preparation; the program must not change after validation.
    With `share_profile`, a run whose profile was already known returns the program's stored profile itself
    rather than a copy (copying a large program's profile costs more than a small run): the caller must not
    change it.
    """
    cache = validated.cache
    pool: list[_Simulator] = cache.setdefault("simulators", [])
    try:
        simulator = pool.pop()
    except IndexError:
        simulator = _Simulator(validated)
    # Nothing on the timeline or in the race check depends on data (registers come from immediates and loop
    # counters only), so after one complete run the profile is known and, once a run checked races, so is
    # their absence: later vectorised runs only do the data work.
    template: Profile | None = cache.get("profile") if vectorize else None
    data_only = template is not None and (not check_races or cache.get("race_free", False))
    try:
        simulator.reset(check_races and not data_only, vectorize, timing=not data_only)
        simulator.load(inputs)
        with blas.single_threaded():
            if data_only:
                simulator.execute_data()
            else:
                simulator.execute()
        outputs = simulator.outputs()
        if data_only:
            assert template is not None
            return outputs, template if share_profile else template.copy()
        profile = simulator.profile()
        if vectorize:
            cache["profile"] = profile.copy()
            if check_races:
                cache["race_free"] = True
        return outputs, profile
    finally:
        simulator.finish()
        if simulator.machine.bytes_held <= _POOLED_MACHINE_BYTES:
            pool.append(simulator)


# More separate byte ranges than this to fill per memory range and `_clear_plan` fills their hull instead.
_MAX_CLEAR_RUNS = 256


def _offset(view: np.ndarray, base: np.ndarray) -> int:
    """Bytes from the start of `base` to element 0 of `view` (a view of it)."""
    return view.__array_interface__["data"][0] - base.__array_interface__["data"][0]


# A simulator keeps its memories for the next run of the same program up to this size.
_POOLED_MACHINE_BYTES = 1 << 30

# run_program's memory of validated programs: id(program) -> (weak reference, override, snapshot, validated).
# The ValidatedProgram holds a private copy of the program (the snapshot), never the caller's object, so the
# entry goes away with the caller's program.
_VALIDATED: dict[int, tuple[weakref.ref, Any, tuple, ValidatedProgram]] = {}


def _fields(program: Program) -> tuple:
    constants = tuple(
        (index, type(array), getattr(array, "dtype", None), getattr(array, "shape", None))
        for index, array in program.constants.items()
    ) if isinstance(program.constants, dict) else program.constants
    return (
        type(program),
        program.target,
        program.buffers,
        program.inputs,
        program.outputs,
        program.body,
        constants,
        program.num_registers,
        program.locations,
        program.entry,
        program.compiler_version,
    )


def _validated(program: Program, override: Mapping[Any, int] | None) -> ValidatedProgram:
    """`validate_program`, remembered while `program` is alive and compares equal to what was validated."""
    key = id(program)
    override_key = tuple(sorted((str(k), repr(v)) for k, v in override.items())) if override else ()
    entry = _VALIDATED.get(key)
    if entry is not None:
        reference, entry_override, snapshot, validated = entry
        if reference() is program and entry_override == override_key:
            try:
                if _fields(program) == snapshot:
                    return validated
            except Exception:
                pass
    validated = validate_program(program, override)
    try:
        fields = {f.name: getattr(program, f.name) for f in dataclasses.fields(Program) if f.name != "constants"}
        copied = copy_module.deepcopy(fields)
        reference = weakref.ref(program, lambda _, key=key: _VALIDATED.pop(key, None))
    except Exception:
        return validated
    copy = Program(**copied, constants=program.constants)
    snapshot = _fields(copy)
    validated = ValidatedProgram(
        copy,
        validated.target,
        validated.sizes,
        copy.instructions(),
        validated.index_of_id,
    )
    _VALIDATED[key] = (reference, override_key, snapshot, validated)
    return validated


# ---- per-instruction plans ---------------------------------------------------------------------------------


class _Operand:
    """One operand of one static instruction: how to view it and which bytes it touches."""

    __slots__ = ("register", "role", "site", "static_view", "view_args")

    def __init__(
        self, machine: Machine, role: str, access: Access, is_write: bool, memory_names: list[str]
    ) -> None:
        self.role = role
        home = machine.homes[access.buffer]
        itemsize = home.dtype.itemsize
        self.register = access.offset_reg.index if access.offset_reg is not None else -1
        shape = [num for _, num in access.pattern]
        strides = [step * itemsize for step, _ in access.pattern]
        start = home.base + int(access.offset) * itemsize
        address = home.address + int(access.offset) * itemsize
        on_chip = home.memory is not Memory.HBM
        if on_chip:
            shape.insert(0, access.partitions)
            strides.insert(0, home.partition_stride)
            array_start = start + access.partition_start * home.partition_stride
        else:
            array_start = start
        self.view_args = (tuple(shape), home.dtype, home.array, array_start, tuple(strides), itemsize)
        self.static_view = self.view(0) if self.register < 0 else None
        low = sum(min(0, step * (num - 1)) for step, num in access.pattern) * itemsize
        high = (sum(max(0, step * (num - 1)) for step, num in access.pattern) + 1) * itemsize
        self.site = AccessSite(
            role=role,
            is_write=is_write,
            buffer=access.buffer,
            memory_id=home.memory_id,
            memory_name=memory_names[home.memory_id],
            partition_start=access.partition_start if on_chip else 0,
            partition_end=access.partition_start + access.partitions if on_chip else 1,
            base=address,
            itemsize=itemsize,
            pattern=tuple((int(step), int(num)) for step, num in access.pattern),
            low=low,
            high=high,
            register=self.register,
        )

    def view(self, register_value: int) -> np.ndarray:
        shape, dtype, array, start, strides, itemsize = self.view_args
        return np.ndarray(
            shape, dtype, buffer=array, offset=start + register_value * itemsize, strides=strides
        )


@dataclass
class _Plan:
    index: int
    inst: Instruction
    queue: int
    execute: Callable[[Mapping[str, np.ndarray], Mapping[str, Any], Engine, Target], None]
    attrs: dict[str, Any]
    register_attrs: list[tuple[str, int]]
    operands: list[_Operand]
    reads: list[_Operand]
    writes: list[_Operand]
    dynamic: bool
    static_views: dict[str, np.ndarray]
    waits: list[int]
    duration_ns: float  # compute instructions
    dma: cost_model.DmaCost | None
    penalty_ns: float
    flops: int
    family: str
    info: InstructionStats
    # Registers a recorded instance keeps (runtime.vectorize): operand offset registers, then register attrs.
    record_regs: list[int]
    record_columns: dict[tuple[str, Any], int]
    attr_is_flag: dict[str, bool]  # register attributes read as `register != 0` (boolean ones), else as values
    work_bytes: int  # bytes the instruction's operands cover (an estimate of its data work)
    sites: list[AccessSite]  # the operands' race-checker sites
    no_shifts: list[int]  # zeros, one per operand
    # Footprints of static operands for the dependency penalty (None for register-addressed ones).
    read_footprints: list[tuple[int, int, int, int, int]] | None
    write_footprints: list[tuple[int, int, int, int, int]] | None


class _Bandwidth:
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


# ---- the simulator -----------------------------------------------------------------------------------------

_UNSEEN: Any = object()


class _Simulator:
    """The prepared program (plans, memories, loop analysis), reused run after run; `reset` starts a run."""

    def __init__(self, validated: ValidatedProgram) -> None:
        self.validated = validated
        self.program = program = validated.program
        self.target = target = validated.target
        self.machine = Machine(program.buffers, validated.sizes)
        self._fresh_memory = True
        self._entry: tuple[list, list, list] | None = None  # see `_entry_views`
        self._loaded_ranges = self._ranges_load_overwrites()
        memory_names = list(MEMORY_NAMES)
        self.plans = [
            self._plan(index, inst, memory_names) for index, inst in enumerate(validated.instructions)
        ]
        # Loops as nests that may run batched, analysed when a vectorising walk first reaches them (None: no).
        self.nests: dict[int, vectorize.Nest | None] = {}
        self._plan_of = {id(plan.inst): plan for plan in self.plans}
        self.body = self._compile(program.body)
        self.dma_queues_used = sorted({p.queue for p in self.plans if p.dma is not None})
        self.live_after = self._live_queues()
        self._race_facts: tuple[list[list[int]], list[bool], list[str]] | None = None
        self.engine_rates = {id(p): p.dma.engine_rate(target) for p in self.plans if p.dma is not None}
        self.scratch: list[np.ndarray] = []  # per worker thread, lane shadows of batched loops (runtime.vectorize)
        self.recording: vectorize.Recording | None = None
        # The data work of one run, recorded by the first `execute_data` and run by the later ones.
        self.tape: prepared.Tape | None = None
        self._taping: list[prepared.Step] | None = None
        # What the taped run accessed, in order: (opcode, views, attrs) per instance, or a batch (`_clear_plan`).
        self._taped: list[Any] = []
        # Once the tape exists: the only bytes a run must set back to FILL_BYTE (None: all of them, `Machine.clear`)
        self._clear_views: list[np.ndarray] | None = None

    def reset(self, check_races: bool, vectorize: bool, timing: bool = True) -> None:
        """Fresh state for one run: memories filled again, registers, timeline and statistics at zero.

        Without `timing` (a run that only does the data work, `execute_data`) the timeline and statistics are
        left as they are: nothing reads them."""
        if self._clear_views is not None:
            for view in self._clear_views:
                view.fill(FILL_BYTE)
        elif not self._fresh_memory:
            self.machine.clear(self._loaded_ranges)
        self._fresh_memory = False
        self.vectorize = vectorize
        self.regs = [0] * self.program.num_registers
        self.recording = None
        if not timing:
            self.races = None
            return
        self.queue_free = [0.0] * len(QUEUE_NAMES)
        self.done = [0.0] * len(self.plans)
        self.previous_writes: list[list[tuple[int, int, int, int, int]]] = [[] for _ in QUEUE_NAMES]
        target = self.target
        self.bandwidth = _Bandwidth(target.dma_aggregate_bytes_per_ns, target.hbm_bandwidth_gbps)
        self.events = TraceEvents()
        self.dma_bytes = 0
        self.hbm_bytes = 0
        self.races = None
        if check_races:
            if self._race_facts is None:
                self._race_facts = self._race_checker_facts()
            self.races = RaceChecker(len(QUEUE_NAMES), *self._race_facts)
        self._current_live: list[int] = list(range(len(QUEUE_NAMES)))
        self._issued_since_forget = 0
        self.recording = None
        for plan in self.plans:
            old = plan.info
            plan.info = InstructionStats(old.id, old.opcode, old.queue, old.location)

    def finish(self) -> None:
        """Drop what a run left that the next one does not need."""
        self.races = None
        self.recording = None

    # ---- planning ------------------------------------------------------------------------------------------

    def _plan(self, index: int, inst: Instruction, memory_names: list[str]) -> _Plan:
        spec = isa.OPCODES[inst.opcode]
        spec_writes = set(spec.writes + spec.optional_writes)
        operands = [
            _Operand(self.machine, role, access, role in spec_writes, memory_names)
            for role, access in inst.operands.items()
        ]
        attrs = isa.with_defaults(
            inst.opcode, {k: v for k, v in inst.attrs.items() if not isinstance(v, Reg)}
        )
        register_attrs = [(name, value.index) for name, value in inst.attrs.items() if isinstance(value, Reg)]
        cost = cost_model.instruction_cost(inst, self.program.buffers, self.target)
        location = self.program.locations[inst.location] if inst.location >= 0 else ""
        queue = queue_index(inst)
        flops = cost_model.matmul_flops(inst)
        family = ""
        if flops:
            family = dtypes.matmul_family(self.program.buffers[inst.operands["moving"].buffer].dtype)
        penalty = 0.0
        if inst.engine in (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD):
            penalty = self.target.dependent_op_penalty_cycles / self.target.clock_ghz[inst.engine]
        record_regs: list[int] = []
        record_columns: dict[tuple[str, Any], int] = {}
        for op in operands:
            if op.register >= 0 and ("reg", op.register) not in record_columns:
                record_columns[("reg", op.register)] = len(record_regs)
                record_regs.append(op.register)
        for name, register in register_attrs:
            record_columns[("attr", name)] = len(record_regs)
            record_regs.append(register)
        reads = [op for op in operands if not op.site.is_write]
        writes = [op for op in operands if op.site.is_write]
        static = all(op.register < 0 for op in operands)
        return _Plan(
            index=index,
            inst=inst,
            queue=queue,
            execute=spec.semantics,
            attrs=attrs,
            register_attrs=register_attrs,
            operands=operands,
            reads=reads,
            writes=writes,
            dynamic=any(op.register >= 0 for op in operands),
            static_views={op.role: op.static_view for op in operands if op.static_view is not None},
            waits=[self.validated.index_of_id[w] for w in inst.waits],
            duration_ns=cost if isinstance(cost, float) else 0.0,
            dma=cost if isinstance(cost, cost_model.DmaCost) else None,
            penalty_ns=penalty,
            flops=flops,
            family=family,
            info=InstructionStats(inst.id, inst.opcode, QUEUE_NAMES[queue], location),
            record_regs=record_regs,
            record_columns=record_columns,
            attr_is_flag={name: isinstance(spec.attrs.get(name), bool) for name, _ in register_attrs},
            work_bytes=sum(access.num_elements * dtypes.itemsize(self.program.buffers[access.buffer].dtype)
                           for access in inst.operands.values()),
            sites=[op.site for op in operands],
            no_shifts=[0] * len(operands),
            read_footprints=[_static_footprint(op) for op in reads] if static else None,
            write_footprints=[_static_footprint(op) for op in writes] if static else None,
        )

    def _compile(self, nodes: Sequence[Node]) -> list[tuple]:
        index_of = {id(plan.inst): plan for plan in self.plans}
        compiled: list[tuple] = []
        for node in nodes:
            if isinstance(node, Instruction):
                compiled.append((0, index_of[id(node)]))
            elif isinstance(node, ScalarOp):
                compiled.append(
                    (1, node.dest.index, SCALAR_FUNCTIONS[node.op], _operand(node.lhs), _operand(node.rhs))
                )
            else:
                assert isinstance(node, Loop)
                compiled.append(
                    (
                        2,
                        node.induction.index,
                        _operand(node.lower),
                        _operand(node.upper),
                        int(node.step),
                        self._compile(node.body),
                        node,
                        id(node),
                    )
                )
        return compiled

    def _live_queues(self) -> list[list[int]]:
        """For each top-level node, the queues that node and the ones after it may still issue to."""
        suffix: list[list[int]] = []
        seen: set[int] = set()
        for node in reversed(self.program.body):
            seen |= {queue_index(inst) for inst in _instructions_in(node)}
            suffix.append(sorted(seen))
        suffix.reverse()
        return suffix

    def _race_checker_facts(self) -> tuple[list[list[int]], list[bool], list[str]]:
        """The race checker's static inputs: buffers sharing bytes, buffers any instruction writes, names."""
        buffers = self.program.buffers
        homes = self.machine.homes
        extents = []
        for index, buffer in enumerate(buffers):
            row = buffer.elements_per_row * dtypes.itemsize(buffer.dtype)
            extents.append((homes[index].memory_id, homes[index].address, homes[index].address + row))
        aliases: list[list[int]] = [[] for _ in extents]
        by_memory: dict[int, list[int]] = {}
        for index, (memory_id, _, _) in enumerate(extents):
            by_memory.setdefault(memory_id, []).append(index)
        for members in by_memory.values():
            ordered = sorted(members, key=lambda i: extents[i][1])
            for position, index in enumerate(ordered):
                _, start, end = extents[index]
                for other in ordered[position:]:
                    if extents[other][1] >= end:
                        break
                    if extents[other][2] > start:
                        aliases[index].append(other)
                        if other != index:
                            aliases[other].append(index)
        aliases = [sorted(set(found)) for found in aliases]
        directly_written = [False] * len(buffers)
        for plan in self.plans:
            for op in plan.writes:
                directly_written[op.site.buffer] = True
        written = [any(directly_written[other] for other in aliases[index]) for index in range(len(buffers))]
        return aliases, written, [buffer.name for buffer in buffers]

    # ---- running -------------------------------------------------------------------------------------------

    def _ranges_load_overwrites(self) -> list[tuple[Memory, int, int]]:
        """HBM address ranges `load` writes completely: constants, and inputs bound to all of their buffer."""
        program = self.program
        covered = set(program.constants)
        for binding in program.inputs:
            buffer = program.buffers[binding.buffer]
            full = tuple(binding.shape) == tuple(buffer.shape) and binding.offset == 0
            strides = tuple(binding.strides)
            expected, step = [], 1
            for extent in reversed(buffer.shape):
                expected.append(step)
                step *= extent
            if full and strides == tuple(reversed(expected)):
                covered.add(binding.buffer)
        ranges = []
        for index in covered:
            buffer = program.buffers[index]
            size = buffer.elements_per_row * dtypes.itemsize(buffer.dtype)
            ranges.append((buffer.memory, buffer.address, buffer.address + size))
        return ranges

    def _entry_views(self) -> tuple[list, list, list]:
        """The views `load` and `outputs` use, made once: (constant's view, its value) pairs, (view, dtype,
        shape) per input binding and the view of each output binding. The memories never move, so neither do
        the views; per run, only the copies remain."""
        if self._entry is None:
            program, machine = self.program, self.machine
            constants = [
                (machine.buffer_view(index, program.buffers[index].shape), array)
                for index, array in program.constants.items()
            ]
            inputs = [
                (
                    machine.binding_view(binding),
                    dtypes.numpy_dtype(program.buffers[binding.buffer].dtype),
                    tuple(binding.shape),
                )
                for binding in program.inputs
            ]
            outputs = [machine.binding_view(binding) for binding in program.outputs]
            self._entry = (constants, inputs, outputs)
        return self._entry

    def load(self, inputs: Sequence[np.ndarray]) -> None:
        program = self.program
        if len(inputs) != len(program.inputs):
            raise ValueError(f"{program.entry} takes {len(program.inputs)} inputs, got {len(inputs)}")
        constants, bindings, _ = self._entry_views()
        for view, array in constants:
            view[...] = array
        for position, ((view, expected, shape), value) in enumerate(zip(bindings, inputs, strict=True)):
            array = value if type(value) is np.ndarray else np.asarray(value)
            if array.shape != shape or array.dtype != expected:
                raise ValueError(
                    f"input {position} ('{program.inputs[position].name}'): expected {dtypes.dtype_name(expected)}"
                    f"{list(shape)}, got {array.dtype}{list(array.shape)}"
                )
            view[...] = array

    def outputs(self) -> list[np.ndarray]:
        return [np.array(view, copy=True) for view in self._entry_views()[2]]

    def execute(self) -> None:
        walk = self._walk if self.vectorize else self._run
        for position, node in enumerate(self.body):
            if self.races is not None:
                self.races.live_queues = self.live_after[position]
            self._current_live = self.live_after[position]
            walk((node,))

    def execute_data(self) -> None:
        """Only the data work, in program order (for a program whose timeline is already known).

        The first such run walks the program and records its data work as a tape: every instance executed
        directly, with its views and attributes resolved, and every batched nest. Registers never depend on
        data, so every later run does the same work, and runs the tape (`runtime.prepared`) instead of walking.
        """
        if self.tape is not None:
            self.tape.run()
            return
        self._taping = []
        self._taped = []
        try:
            self._walk_data(self.body)
            self.tape = prepared.Tape(self._taping)
            self._clear_views = self._clear_plan(self._taped)
        finally:
            self._taping = None
            self._taped = []

    def _clear_plan(self, taped: list[Any]) -> list[np.ndarray]:
        """The bytes a run may read before it writes them, as views of the machine's arrays to fill.

        Fresh memory reads as FILL_BYTE (NaN, -1), and every run must see that wherever it reads memory it has not
        written yet. Registers never depend on data, so every run accesses the same bytes in the same order as
        the taped one: the bytes that run read before writing them (inputs and constants count as written by
        `load`; the outputs are read at the end) are the only ones a later run needs filled again; everything
        else it overwrites before any read. Accesses are taken whole (a read role reads all its view), and a
        write that may leave bytes of its view unwritten (a scatter) counts as a read and not as a write, so the
        set can only be too large.
        """
        arrays = [array for arrays in self.machine.arrays.values() for array in arrays]
        starts = [array.__array_interface__["data"][0] for array in arrays]
        written = [np.zeros(array.size, bool) for array in arrays]
        needed = [np.zeros(array.size, bool) for array in arrays]

        def cover(view: np.ndarray) -> tuple[int, np.ndarray] | None:
            """Which array `view` is in, and its bytes as the same view of a byte mask (an extra axis per byte)."""
            if view.size == 0:
                return None
            address = view.__array_interface__["data"][0]
            for index, start in enumerate(starts):
                if start <= address < start + arrays[index].size:
                    mask = np.ndarray(
                        (*view.shape, view.itemsize),
                        bool,
                        buffer=written[index],
                        offset=address - start,
                        strides=(*view.strides, 1),
                    )
                    return index, mask
            return None  # not simulated memory

        def read(view: np.ndarray) -> None:
            found = cover(view)
            if found is not None:
                index, mask = found
                # the same view of `needed`: the masks share a layout
                target = np.ndarray(mask.shape, bool, buffer=needed[index], offset=_offset(mask, written[index]),
                                    strides=mask.strides)
                np.logical_or(target, ~mask, out=target)

        def write(view: np.ndarray) -> None:
            found = cover(view)
            if found is not None:
                found[1][...] = True

        constants, inputs, outputs = self._entry_views()
        for view, _ in constants:
            write(view)
        for view, _, _ in inputs:
            write(view)
        for entry in self._accesses_of(taped):
            opcode, views, attrs = entry
            spec = isa.OPCODES.get(opcode)
            writes = set(spec.writes + spec.optional_writes) if spec is not None else {"dst"}
            partial: set[str] = set()
            if opcode == "nc_matmul" and np.any(attrs.get("accumulate", False)):
                partial.add("dst")  # accumulation reads the destination
            if opcode == "dma_copy" and attrs.get("indirect") == "dst":
                partial.add("dst")  # a scatter writes only the rows its offsets choose
            for role, view in views.items():
                if role not in writes or role in partial:
                    read(view)
            for role, view in views.items():
                if role in writes and role not in partial:
                    write(view)
        for view in outputs:
            read(view)
        views = []
        for array, mask in zip(arrays, needed, strict=True):
            # int8 bounds keep the difference int8: a Python 0 would make it int64, eight bytes per byte of HBM
            zero = np.int8(0)
            edges = np.flatnonzero(np.diff(mask.view(np.int8), prepend=zero, append=zero))
            runs = list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
            if len(runs) > _MAX_CLEAR_RUNS:  # many small pieces: one fill of their hull is quicker
                runs = [(runs[0][0], runs[-1][1])]
            views.extend(array[start:end] for start, end in runs)
        return views

    @staticmethod
    def _accesses_of(taped: list[Any]) -> Iterator[tuple[str, Mapping[str, np.ndarray], Mapping[str, Any]]]:
        for entry in taped:
            if isinstance(entry, tuple):
                yield entry
            else:
                yield from entry.accesses

    def _walk_data(self, nodes: Sequence[tuple]) -> None:
        regs = self.regs
        for node in nodes:
            kind = node[0]
            if kind == 0:
                plan = node[1]
                recording = self.recording
                if recording is None:
                    self._execute_now(plan)
                else:
                    recording.sequence.append(plan.index)
                    if plan.record_regs:
                        recording.values[plan.index].append(tuple([regs[r] for r in plan.record_regs]))
            elif kind == 1:
                _, dest, function, lhs, rhs = node
                a = regs[lhs[1]] if lhs[0] else lhs[1]
                b = regs[rhs[1]] if rhs[0] else rhs[1]
                try:
                    regs[dest] = wrap32(function(a, b))
                except ZeroDivisionError:
                    raise SimulationError(f"scalar division by zero ({a} by {b})") from None
            else:
                _, induction, lower, upper, step, body, loop, key = node
                start = regs[lower[1]] if lower[0] else lower[1]
                stop = regs[upper[1]] if upper[0] else upper[1]
                recording = self.recording
                if recording is None:
                    nest = self.nests.get(key, _UNSEEN)
                    if nest is _UNSEEN:
                        nest = self.nests[key] = vectorize.analyse(loop, self._plan_of, self.machine.homes)
                    if nest is not None and not nest.failed:
                        trips = len(range(start, stop, step))
                        if trips:
                            self._run_nest(nest, induction, range(start, stop, step), body, trips, self._walk_data)
                            continue
                else:
                    level = recording.nest.chain_keys.get(key)
                    if level is not None:
                        recording.trips[level - 1].append(len(range(start, stop, step)))
                for value in range(start, stop, step):
                    regs[induction] = value
                    self._walk_data(body)

    # ---- the reference path: every instance executes as it issues ------------------------------------------

    def _run(self, nodes: Sequence[tuple]) -> None:
        regs = self.regs
        for node in nodes:
            kind = node[0]
            if kind == 0:
                self._issue(node[1])
            elif kind == 1:
                _, dest, function, lhs, rhs = node
                a = regs[lhs[1]] if lhs[0] else lhs[1]
                b = regs[rhs[1]] if rhs[0] else rhs[1]
                try:
                    regs[dest] = wrap32(function(a, b))
                except ZeroDivisionError:
                    raise SimulationError(f"scalar division by zero ({a} by {b})") from None
            else:
                _, induction, lower, upper, step, body = node[:6]
                start = regs[lower[1]] if lower[0] else lower[1]
                stop = regs[upper[1]] if upper[0] else upper[1]
                for value in range(start, stop, step):
                    regs[induction] = value
                    self._run(body)

    def _issue(self, plan: _Plan) -> None:
        regs = self.regs
        if plan.dynamic:
            views = dict(plan.static_views)
            for op in plan.operands:
                if op.register >= 0:
                    views[op.role] = op.view(regs[op.register])
        else:
            views = plan.static_views
        attrs = plan.attrs
        if plan.register_attrs:
            attrs = dict(attrs)
            for name, register in plan.register_attrs:
                attrs[name] = regs[register] != 0 if plan.attr_is_flag[name] else regs[register]
        plan.execute(views, attrs, plan.inst.engine, self.target)

        queue = plan.queue
        start = self.queue_free[queue]
        done = self.done
        for wait in plan.waits:
            if done[wait] > start:
                start = done[wait]
        if plan.dma is not None:
            dma = plan.dma
            end = self.bandwidth.transfer(
                start + dma.fixed_ns,
                dma.bytes,
                dma.engine_rate(self.target),
                dma.efficiency,
                dma.hbm_bytes / dma.bytes,
            )
            self.dma_bytes += dma.bytes
            self.hbm_bytes += dma.hbm_bytes
            self._issued_since_forget += 1
            if self._issued_since_forget >= 64:
                self._forget_bandwidth_history()
        else:
            duration = plan.duration_ns
            if plan.penalty_ns and self._reads_previous_write(plan, queue):
                duration += plan.penalty_ns
            end = start + duration
            if plan.penalty_ns:
                self.previous_writes[queue] = [self._footprint(op) for op in plan.writes]
        self.queue_free[queue] = end
        done[plan.index] = end
        info = plan.info
        info.count += 1
        info.busy_ns += end - start
        info.flops += plan.flops
        events = self.events
        events.queue.append(queue)
        events.start.append(start)
        events.end.append(end)
        events.instruction.append(plan.index)
        if self.races is not None:
            shifts = [regs[op.register] * op.site.itemsize if op.register >= 0 else 0 for op in plan.operands]
            instance = InstanceInfo(info.id, info.opcode, queue, info.location, start, end)
            self.races.issue(
                plan.index, queue, plan.waits, [op.site for op in plan.operands], shifts, instance
            )

    # ---- the vectorising path: timing in program order, data now, or batched per loop nest ------------------

    def _walk(self, nodes: Sequence[tuple]) -> None:
        regs = self.regs
        for node in nodes:
            kind = node[0]
            if kind == 0:
                plan = node[1]
                recording = self.recording
                if recording is None:
                    self._execute_now(plan)
                elif recording is not vectorize.DEFERRED:
                    recording.sequence.append(plan.index)
                    if plan.record_regs:
                        recording.values[plan.index].append(tuple([regs[r] for r in plan.record_regs]))
                self._time(plan)
            elif kind == 1:
                _, dest, function, lhs, rhs = node
                a = regs[lhs[1]] if lhs[0] else lhs[1]
                b = regs[rhs[1]] if rhs[0] else rhs[1]
                try:
                    regs[dest] = wrap32(function(a, b))
                except ZeroDivisionError:
                    raise SimulationError(f"scalar division by zero ({a} by {b})") from None
            else:
                _, induction, lower, upper, step, body, loop, key = node
                start = regs[lower[1]] if lower[0] else lower[1]
                stop = regs[upper[1]] if upper[0] else upper[1]
                recording = self.recording
                if recording is None:
                    nest = self.nests.get(key, _UNSEEN)
                    if nest is _UNSEEN:
                        nest = self.nests[key] = vectorize.analyse(loop, self._plan_of, self.machine.homes)
                    if nest is not None and not nest.failed:
                        trips = len(range(start, stop, step))
                        if trips:
                            self._run_nest(nest, induction, range(start, stop, step), body, trips)
                            continue
                elif recording is not vectorize.DEFERRED:
                    level = recording.nest.chain_keys.get(key)
                    if level is not None:
                        recording.trips[level - 1].append(len(range(start, stop, step)))
                for value in range(start, stop, step):
                    regs[induction] = value
                    self._walk(body)

    def _run_nest(
        self,
        nest: vectorize.Nest,
        induction: int,
        values: range,
        body: Sequence[tuple],
        trips: int,
        walk: Callable[[Sequence[tuple]], None] | None = None,
    ) -> None:
        """Run a loop nest: walk it (with `walk`: `_walk` for timing, `_walk_data` for nothing else) while
        recording its instances, then do its data work batched. A nest entered again with the same registers
        reuses its batch: the timing walk then records nothing, and the data-only walk skips the nest, setting the
        registers it leaves behind."""
        regs = self.regs
        entry = tuple(regs)
        known = nest.batches.get(entry)
        if known is not None:
            batch, exit_registers = known
            if walk is None:
                self.recording = vectorize.DEFERRED
                try:
                    for value in values:
                        regs[induction] = value
                        self._walk(body)
                finally:
                    self.recording = None
            else:
                regs[:] = exit_registers
                if self._taping is not None:
                    self._taping.extend(prepared.batch_steps(batch))
                    self._taped.append(batch)
            batch.run()
            return
        recording = vectorize.Recording(nest, trips)
        for index in nest.plans:
            if self.plans[index].record_regs:
                recording.values[index] = []
        self.recording = recording
        step = walk or self._walk
        try:
            for value in values:
                regs[induction] = value
                step(body)
        finally:
            self.recording = None
        batch = vectorize.run_nest(self, recording)
        if batch is None:
            self._replay(recording)
            return
        if self._taping is not None:
            self._taping.extend(prepared.batch_steps(batch))
            self._taped.append(batch)
        if len(nest.batches) >= vectorize.MAX_BATCHES:
            nest.batches.pop(next(iter(nest.batches)))
        nest.batches[entry] = (batch, list(regs))

    def _replay(self, recording: vectorize.Recording) -> None:
        """The recorded instances' data work, one by one in order: what the reference path does."""
        plans, target, tape = self.plans, self.target, self._taping
        pending = {index: iter(values) for index, values in recording.values.items()}
        for index in recording.sequence:
            plan = plans[index]
            if not plan.record_regs:
                plan.execute(plan.static_views, plan.attrs, plan.inst.engine, target)
                if tape is not None:
                    tape.append(self._step(plan, plan.static_views, plan.attrs))
                continue
            values = next(pending[index])
            columns = plan.record_columns
            views = plan.static_views
            if plan.dynamic:
                views = dict(views)
                for op in plan.operands:
                    if op.register >= 0:
                        views[op.role] = op.view(values[columns[("reg", op.register)]])
            attrs = plan.attrs
            if plan.register_attrs:
                attrs = dict(attrs)
                for name, _ in plan.register_attrs:
                    value = values[columns[("attr", name)]]
                    attrs[name] = value != 0 if plan.attr_is_flag[name] else value
            plan.execute(views, attrs, plan.inst.engine, target)
            if tape is not None:
                tape.append(self._step(plan, views, attrs))

    def _step(self, plan: _Plan, views: dict[str, np.ndarray], attrs: dict[str, Any]) -> prepared.Step:
        self._taped.append((plan.inst.opcode, views, attrs))
        return prepared.instance_step(plan.execute, plan.inst.opcode, views, attrs, plan.inst.engine, self.target)

    def _execute_now(self, plan: _Plan) -> None:
        regs = self.regs
        if plan.dynamic:
            views = dict(plan.static_views)
            for op in plan.operands:
                if op.register >= 0:
                    views[op.role] = op.view(regs[op.register])
        else:
            views = plan.static_views
        attrs = plan.attrs
        if plan.register_attrs:
            attrs = dict(attrs)
            for name, register in plan.register_attrs:
                attrs[name] = regs[register] != 0 if plan.attr_is_flag[name] else regs[register]
        plan.execute(views, attrs, plan.inst.engine, self.target)
        if self._taping is not None:
            self._taping.append(self._step(plan, views, attrs))

    def _time(self, plan: _Plan) -> None:
        """One instance on the timeline (and through the race checker), without its data work."""
        queue = plan.queue
        start = self.queue_free[queue]
        done = self.done
        for wait in plan.waits:
            if done[wait] > start:
                start = done[wait]
        dma = plan.dma
        if dma is not None:
            end = self.bandwidth.transfer(
                start + dma.fixed_ns,
                dma.bytes,
                self.engine_rates[id(plan)],
                dma.efficiency,
                dma.hbm_bytes / dma.bytes,
            )
            self.dma_bytes += dma.bytes
            self.hbm_bytes += dma.hbm_bytes
            self._issued_since_forget += 1
            if self._issued_since_forget >= 64:
                self._forget_bandwidth_history()
        elif plan.penalty_ns:
            duration = plan.duration_ns
            previous = self.previous_writes[queue]
            if previous:
                reads = plan.read_footprints
                if reads is None:
                    reads = [self._footprint(op) for op in plan.reads]
                if _overlaps_any(reads, previous):
                    duration += plan.penalty_ns
            end = start + duration
            writes = plan.write_footprints
            self.previous_writes[queue] = writes if writes is not None else [self._footprint(op) for op in plan.writes]
        else:
            end = start + plan.duration_ns
        self.queue_free[queue] = end
        done[plan.index] = end
        info = plan.info
        info.count += 1
        info.busy_ns += end - start
        info.flops += plan.flops
        events = self.events
        events.queue.append(queue)
        events.start.append(start)
        events.end.append(end)
        events.instruction.append(plan.index)
        if self.races is not None:
            if plan.dynamic:
                regs = self.regs
                shifts = [regs[op.register] * op.site.itemsize if op.register >= 0 else 0 for op in plan.operands]
            else:
                shifts = plan.no_shifts
            instance = (info.id, info.opcode, queue, info.location, start, end)
            self.races.issue(plan.index, queue, plan.waits, plan.sites, shifts, instance)

    def _footprint(self, op: _Operand) -> tuple[int, int, int, int, int]:
        site = op.site
        shift = self.regs[op.register] * site.itemsize if op.register >= 0 else 0
        lo = site.base + shift + site.low
        return (site.memory_id, site.partition_start, site.partition_end, lo, lo - site.low + site.high)

    def _reads_previous_write(self, plan: _Plan, queue: int) -> bool:
        previous = self.previous_writes[queue]
        if not previous:
            return False
        for op in plan.reads:
            memory, p0, p1, lo, hi = self._footprint(op)
            for other_memory, q0, q1, other_lo, other_hi in previous:
                if memory == other_memory and p0 < q1 and q0 < p1 and lo < other_hi and other_lo < hi:
                    return True
        return False

    def _forget_bandwidth_history(self) -> None:
        self._issued_since_forget = 0
        live = [q for q in self._current_live if q >= _DMA_QUEUE_BASE]
        if live:
            self.bandwidth.forget_before(min(self.queue_free[q] for q in live))

    # ---- results -------------------------------------------------------------------------------------------

    def profile(self) -> Profile:
        target = self.target
        busy: dict[str, float] = {}
        opcode_counts: dict[str, int] = {}
        flops_by_family: dict[str, int] = {}
        location_ns: dict[str, float] = {}
        location_counts: dict[str, int] = {}
        for plan in self.plans:
            info = plan.info
            if not info.count:
                continue
            busy[info.queue] = busy.get(info.queue, 0.0) + info.busy_ns
            opcode_counts[info.opcode] = opcode_counts.get(info.opcode, 0) + info.count
            if info.flops:
                flops_by_family[plan.family] = flops_by_family.get(plan.family, 0) + info.flops
            location = info.location or "<unknown location>"
            location_ns[location] = location_ns.get(location, 0.0) + info.busy_ns
            location_counts[location] = location_counts.get(location, 0) + info.count
        total = max(self.done, default=0.0)
        return Profile(
            target=target.name,
            core_version=target.core_version,
            total_ns=total,
            busy_ns=busy,
            opcode_counts=opcode_counts,
            dma_bytes=self.dma_bytes,
            hbm_bytes=self.hbm_bytes,
            flops=sum(flops_by_family.values()),
            flops_by_family=flops_by_family,
            peak_flops_by_family={family: target.peak_flops(family) for family in ("fp32", "bf16", "fp8")},
            hbm_bandwidth_bytes_per_ns=target.hbm_bandwidth_gbps,
            instructions=[plan.info for plan in self.plans],
            events=self.events,
            location_ns=location_ns,
            location_counts=location_counts,
            io_bytes=self._io_bytes(),
        )

    def _io_bytes(self) -> int:
        buffers = self.program.buffers
        return sum(
            math.prod(binding.shape) * dtypes.itemsize(buffers[binding.buffer].dtype)
            for binding in (*self.program.inputs, *self.program.outputs)
        )


def _static_footprint(op: _Operand) -> tuple[int, int, int, int, int]:
    site = op.site
    lo = site.base + site.low
    return (site.memory_id, site.partition_start, site.partition_end, lo, lo - site.low + site.high)


def _overlaps_any(
    reads: list[tuple[int, int, int, int, int]], previous: list[tuple[int, int, int, int, int]]
) -> bool:
    for memory, p0, p1, lo, hi in reads:
        for other_memory, q0, q1, other_lo, other_hi in previous:
            if memory == other_memory and p0 < q1 and q0 < p1 and lo < other_hi and other_lo < hi:
                return True
    return False


def _operand(value: int | Reg) -> tuple[bool, int]:
    return (True, value.index) if isinstance(value, Reg) else (False, int(value))


def _instructions_in(node: Node) -> list[Instruction]:
    if isinstance(node, Instruction):
        return [node]
    if isinstance(node, Loop):
        return [inst for child in node.body for inst in _instructions_in(child)]
    return []
