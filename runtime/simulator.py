"""Runs a `Program` on a simulated NeuronCore: results bit for bit, time by the cost model, races checked.

`run_program` validates a program (`runtime.validate`, the same checks a bundle gets), lays out its memory plan
(`runtime.machine`), loads constants and inputs into HBM, runs it and returns copies of the outputs and a
`Profile`. `run_validated` runs a `ValidatedProgram` (a bundle read back, a program the compiler validated once)
without validating it again.

What a run is, is defined by `runtime.interpreter` (which instruction instances issue, in which order, with which
register values) and, per instance, by three parts that never consult one another: `runtime.semantics` (what it
computes), `runtime.timeline` (when it runs: queues, semaphores, DMA bandwidth, the cost model) and
`runtime.races` (whether every conflicting access on another queue is ordered with it; a `RaceError` names both
instructions otherwise). Registers depend on immediates, loop counters and the run's scalar arguments only and
nothing on the timeline or in the race check reads data, so every run of a program with the same scalar arguments
issues the same instances with the same times (a register-bounded loop runs the trips its registers give, and
only the instances that issue take time).

`vectorize=False` executes that definition literally, instance by instance: the reference. The default takes
fast paths, each proven by the tests to give the reference's bits, profile and race verdict:

* A loop nest is handled as a whole when it can be: `runtime.lanes` evaluates the registers of all its
  iterations at once, and `runtime.vectorize` does its data work as batched NumPy calls when that provably gives
  the same bits (otherwise instance by instance).
* Single instances are race-checked in batches (`RaceChecker.flush`); a race found there or in a nest is worded
  by a run of the reference.
* The first run keeps its data work as a tape (`runtime.tape`) and works out which bytes it read before
  writing them (`runtime.refill`; when that analysis would weigh on the first run, the second run does it after
  filling all memory). Later runs of the same `ValidatedProgram` fill those bytes again, load the inputs, run the
  tape and return the profile the first run measured, walking nothing. The tape leaves out the copies into SBUF and
  PSUM whose readers can read the copied bytes where the copy read them (`runtime.copy_forwarding`). A run that asks
  for race checking when no earlier run did walks the program again for the timeline and the race checker (its
  data work is the tape's).

The preparation (plans, memories, loop analyses, tape) is kept with the `ValidatedProgram` and reused by its later
runs; `run_program` also remembers the validation of a `Program` object as long as the object is alive and
unchanged.
"""

from __future__ import annotations

import bisect
import copy as copy_module
import dataclasses
import functools
import sys
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from neuron_mlir.runtime import blas, bound_inputs, copy_forwarding, dtypes, heap, host_arena, refill, tape, vectorize
from neuron_mlir.runtime.addresses import Addresses
from neuron_mlir.runtime.hardware import Memory
from neuron_mlir.runtime.interpreter import Interpreter
from neuron_mlir.runtime.lanes import Lanes, trace
from neuron_mlir.runtime.machine import Machine
from neuron_mlir.runtime.plan import QUEUES, InstructionPlan, plan_program, queue_index
from neuron_mlir.runtime.profile import Profile
from neuron_mlir.runtime.program import Instruction, Loop, Node, Program, row_major_strides
from neuron_mlir.runtime.races import RaceChecker, RaceError, RaceFound, SimulationError
from neuron_mlir.runtime.timeline import Timeline
from neuron_mlir.runtime.validate import ValidatedProgram, validate_program

__all__ = [
    "RaceError",
    "SimulationError",
    "analyse_validated",
    "expect_analysis",
    "queue_index",
    "run_program",
    "run_validated",
]

# A program keeps one simulator (memories, plans, tape) for its next run whatever its size: without it every run
# of a program whose memories exceed a limit would be a first run (planning, a walk, recording). More simulators,
# left by concurrent runs, are kept only up to this size each.
_POOLED_MACHINE_BYTES = 1 << 30
# Inputs smaller than this are copied into HBM on every run rather than bound in place (`runtime.bound_inputs`):
# remaking the tape steps that read a bound input costs microseconds per step, more than copying up to this many
# bytes (a single-op program of eager execution on small tensors runs in tens of microseconds).
_BIND_MIN_BYTES = 1 << 16
# How many entry register states of one loop a simulator remembers the trace (and batch) of.
_TRACES_PER_LOOP = 16
# The views a run loads and reads (`Simulator._entry_views`): (constant's view, its value) pairs, (view, dtype,
# shape) per input binding, the view of each output binding.
_NO_CONTEXT = nullcontext()
# The key of `ValidatedProgram.cache` under which a first run finds the analysis it is to take (`expect_analysis`).
_PENDING_ANALYSIS = "pending analysis"
_EntryViews = tuple[
    list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.dtype[Any], tuple[int, ...]]], list[np.ndarray]
]


def run_program(
    program: Program | ValidatedProgram,
    inputs: Sequence[np.ndarray],
    *,
    check_races: bool = True,
    memory_sizes_override: Mapping[Any, int] | None = None,
    vectorize: bool = True,
    scalars: Sequence[int] = (),
) -> tuple[list[np.ndarray], Profile]:
    """Validate and run `program` on `inputs` (in `program.inputs` order); return (outputs, profile).

    `scalars` are the values of the program's scalar arguments (`program.scalars`, in order): the registers they
    start in, each within its declared range.

    Inputs must have exactly the bindings' shapes and dtypes. Outputs are fresh arrays read through
    `program.outputs`, in order. `memory_sizes_override` maps 'sbuf'/'psum' to bytes per partition and 'hbm' to
    bytes, replacing the target's sizes (for programs whose buffers are not yet placed within capacity).
    `vectorize=False` runs every instance one by one (the reference; results and profile are the same).
    Raises `BundleError` for an invalid program, `ValueError` for bad inputs, `RaceError` for a data race.
    A `ValidatedProgram` (without an override) runs as `run_validated` runs it, without validating again.
    """
    if isinstance(program, ValidatedProgram) and memory_sizes_override is None:
        return run_validated(program, inputs, check_races=check_races, vectorize=vectorize, scalars=scalars)
    validated = _validated(program.program if isinstance(program, ValidatedProgram) else program, memory_sizes_override)
    return run_validated(validated, inputs, check_races=check_races, vectorize=vectorize, scalars=scalars)


def run_validated(
    validated: ValidatedProgram,
    inputs: Sequence[np.ndarray],
    *,
    check_races: bool = True,
    vectorize: bool = True,
    share_profile: bool = False,
    scalars: Sequence[int] = (),
    into: Sequence[np.ndarray | None] = (),
) -> tuple[list[np.ndarray], Profile]:
    """`run_program` for a program that already passed `validate_program` (e.g. from `bundle.read_bundle`).

    Runs of the same `ValidatedProgram` share their preparation; the program must not change after validation.
    Runs with the same scalar arguments share it: the instances a run issues, and so its tape and profile, follow
    from them.
    With `share_profile`, a run returns the program's stored profile itself rather than a copy (copying a large
    program's profile costs more than a small run), and a run that times the program stores its own profile
    without copying it: the caller must not change it.
    `into` gives, per output, an array of its shape and dtype to write it to (None: a new array): that array is
    then the output, written straight from the program's HBM (the caller's memory for the result: no copy in
    between).
    """
    with heap.small_pages():  # the memories and outputs of a run are GiBs of fresh pages at real widths
        return _run_pooled(
            validated, inputs, check_races, vectorize, share_profile, _scalar_values(validated, scalars), into
        )


def analyse_validated(validated: ValidatedProgram, scalars: Sequence[int] = ()) -> Profile | None:
    """What a first run of `validated` learns besides its outputs, without its data work: the profile of every
    run with these scalar arguments, or None when the race check does not show the program race-free.

    Register values never depend on data (`runtime.interpreter`), so neither do the instances a run issues, their
    timeline nor the accesses races are checked on: a walk that times and checks them, with no memory read or
    written, finds what a first run would. So another process can make it (the compile-ahead child, for the
    backward it compiled) while this one does the first run's data work (`expect_analysis`). A race is not worded
    here: the program's own first run, checking again, finds and words it.
    """
    simulator = Simulator(validated, _scalar_values(validated, scalars))
    try:
        return simulator.analyse()
    except (RaceFound, RaceError):
        return None
    finally:
        simulator.finish()


def expect_analysis(validated: ValidatedProgram, analysis: Callable[[], Profile | None]) -> None:
    """Have the first run of `validated` (a program without scalar arguments) take its timing and race check
    from `analysis`, which gives what `analyse_validated` gives, being made elsewhere: that run does the data
    work, then calls `analysis` (which may wait for it) and, given a profile, returns it and counts the program
    race-free; given None, or a profile not of this program, it times and checks the run itself as any first
    run does. Either way its outputs are returned only once the race check has passed."""
    if validated.program.scalars:
        raise ValueError("a program with scalar arguments is analysed per their values")
    validated.cache[_PENDING_ANALYSIS] = analysis


def _scalar_values(validated: ValidatedProgram, scalars: Sequence[int]) -> tuple[int, ...]:
    """The scalar arguments of a run, checked against the program's declarations."""
    declared = validated.program.scalars
    if len(scalars) != len(declared):
        raise ValueError(f"the program takes {len(declared)} scalar arguments, got {len(scalars)}")
    for value, scalar in zip(scalars, declared, strict=True):
        if not scalar.lower <= int(value) <= scalar.upper:
            raise ValueError(f"scalar argument {scalar.name} = {value} is outside [{scalar.lower}, {scalar.upper}]")
    return tuple(int(value) for value in scalars)


def _run_pooled(
    validated: ValidatedProgram,
    inputs: Sequence[np.ndarray],
    check_races: bool,
    vectorize: bool,
    share_profile: bool,
    scalars: tuple[int, ...] = (),
    into: Sequence[np.ndarray | None] = (),
) -> tuple[list[np.ndarray], Profile]:
    """`run_validated` on a simulator of the program's pool for these scalar arguments (a new one when none is
    free)."""
    cache = validated.cache if not scalars else validated.cache.setdefault(f"scalars {scalars}", {})
    pool: list[Simulator] = cache.setdefault("simulators", [])
    # The run uses the process's shared memories when no other run holds them (`runtime.host_arena`), else a
    # simulator of memories of its own.
    arena = host_arena.SHARED if host_arena.SHARED.claim() else None
    try:
        for position in range(len(pool) - 1, -1, -1):
            if pool[position].arena is arena:
                simulator = pool.pop(position)
                return _run_and_keep(simulator, pool, cache, inputs, check_races, vectorize, share_profile, into)
        # a first run's objects live as long as the simulator: scanned at most once, after it
        with heap.first_run():
            simulator = Simulator(validated, scalars, arena)
            return _run_and_keep(simulator, pool, cache, inputs, check_races, vectorize, share_profile, into)
    finally:
        if arena is not None:
            arena.release()


def _run_and_keep(
    simulator: Simulator,
    pool: list[Simulator],
    cache: dict[str, Any],
    inputs: Sequence[np.ndarray],
    check_races: bool,
    vectorize: bool,
    share_profile: bool,
    into: Sequence[np.ndarray | None],
) -> tuple[list[np.ndarray], Profile]:
    """A run of `simulator` (`_run_on`), which then goes back to the program's `pool` (`_run_pooled`)."""
    try:
        return _run_on(simulator, cache, inputs, check_races, vectorize, share_profile, into)
    finally:
        simulator.finish()
        if not pool or simulator.machine.bytes_held <= _POOLED_MACHINE_BYTES:
            pool.append(simulator)


def _run_on(
    simulator: Simulator,
    cache: dict[str, Any],
    inputs: Sequence[np.ndarray],
    check_races: bool,
    vectorize: bool,
    share_profile: bool,
    into: Sequence[np.ndarray | None],
) -> tuple[list[np.ndarray], Profile]:
    """One run of `simulator` (`_run_pooled`'s), its profile kept in the program's `cache`."""
    # OpenBLAS's thread count matters only to matmuls, the only instructions that call BLAS
    threads = blas.single_threaded() if simulator.uses_blas else _NO_CONTEXT
    with threads, heap.no_collections() if simulator.tape is None else _NO_CONTEXT:
        if not vectorize:
            outputs, reference_profile = simulator.run_reference(inputs, check_races)
            return _written_into(outputs, into), reference_profile
        known: Profile | None = cache.get("profile")
        pending = cache.pop(_PENDING_ANALYSIS, None) if known is None else None
        if pending is not None:
            outputs, _ = simulator.run(inputs, timing=False, check_races=False, into=into)
            known = _analysis_of(simulator, pending())
            if known is not None:
                cache["profile"], cache["race_free"] = known, True
                return outputs, known if share_profile else known.copy()
        races_needed = check_races and not cache.get("race_free", False)
        outputs, profile = simulator.run(
            inputs, timing=known is None or races_needed, check_races=races_needed, into=into
        )
    if profile is None:
        assert known is not None
        return outputs, known if share_profile else known.copy()
    cache["profile"] = profile if share_profile else profile.copy()
    if check_races:
        cache["race_free"] = True
    return outputs, profile


def _analysis_of(simulator: Simulator, profile: Profile | None) -> Profile | None:
    """`profile` if it is one of `simulator`'s program (`expect_analysis`)."""
    if profile is None:
        return None
    if profile.target == simulator.target.name and len(profile.instructions) == len(simulator.plans):
        return profile
    return None  # (the run then makes its own, as when none came)


def _written_into(outputs: list[np.ndarray], into: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """`outputs` with those that `into` gives an array for copied there (that array in their place)."""
    for position, destination in enumerate(into):
        if destination is not None:
            np.copyto(destination, outputs[position])
            outputs[position] = destination
    return outputs


class Simulator:
    """One program prepared on one machine: plans, memories, loop analyses and, after its first run, its tape."""

    def __init__(
        self, validated: ValidatedProgram, scalars: tuple[int, ...] = (), arena: host_arena.HostArena | None = None
    ) -> None:
        """`arena`: memories from it (`runtime.host_arena`; every run of this simulator holds its claim), else
        of its own."""
        # (not the validated program itself: its cache holds this simulator, and a cycle between the two would
        # leave a simulator that `heap.first_run` froze to outlive its program)
        self.arena = arena
        self.program = program = validated.program
        # (register, value) of each scalar argument: the registers a walk starts from
        self.entry_registers = [(s.register.index, value) for s, value in zip(program.scalars, scalars, strict=True)]
        self.target = validated.target
        bindable = bound_inputs.bindable_inputs(program)
        self.machine = Machine(program.buffers, validated.sizes, bindable.values(), arena)
        self.uses_blas = any(inst.opcode == "nc_matmul" for inst in validated.instructions)
        # the host addresses of the machine's arrays, for the plans and a first run's analyses (`runtime.addresses`)
        self.addresses = Addresses()
        for array, address in self.machine.known_addresses:
            self.addresses.note(array, address)
        self.plans: list[InstructionPlan] = plan_program(
            program, validated.instructions, validated.index_of_id, self.machine, self.target, self.addresses
        )
        written = {op.site.buffer for plan in self.plans for op in plan.writes}
        # Inputs that steady runs may read where the caller holds them (`runtime.bound_inputs`), once the tape shows
        # how it reads them; then `_binding`.
        self._bindable = {position: index for position, index in bindable.items() if index not in written}
        self._binding: bound_inputs.InputBinding | None = None
        # Whether the run that bound the inputs is to give back their pages in HBM as it finishes (once: an input
        # that a later run copies again, not contiguous or for a walk, keeps them rather than fault them in on
        # every such run)
        self._release_bound = False
        # output position -> the position of the bindable input whose buffer it reads
        input_of_buffer = {index: position for position, index in self._bindable.items()}
        self._outputs_of_inputs = {
            position: input_of_buffer[output.buffer]
            for position, output in enumerate(program.outputs)
            if output.buffer in input_of_buffer
        }
        self.plan_of = {id(plan.inst): plan for plan in self.plans}
        self.live_after = self._live_queues()
        self.next_waits_after = self._next_waits()
        self._race_facts: tuple[list[bool], list[str]] | None = None
        # Loops as nests whose data work may run batched, analysed when first reached (None: never batched).
        self.nests: dict[int, vectorize.Nest | None] = {}
        # Per loop, per entry registers: its trace (None: not traceable) and the batch of its data work, if any.
        self._traces: dict[int, OrderedDict[tuple[int, ...], tuple[Lanes | None, Any]]] = {}
        self.scratch: list[np.ndarray] = []  # per worker thread, lane shadows of batched loops (`shadow_space`)
        # The data work of the first complete run, replayed by the later ones, and the bytes a run reads before
        # writing them (the only ones a later run must fill again; None: all of them).
        self.tape: tape.Tape | None = None
        self._refill: list[np.ndarray] | None = None
        # The taped run's accesses, and their views' addresses, while the refill analysis waits for the second run.
        self._unanalysed: tuple[list[refill.Access], Addresses] | None = None
        self._fresh_memory = True
        self._loaded_ranges = self._ranges_load_overwrites()
        self._entry: _EntryViews | None = None  # see `_entry_views`
        self._returned: list[np.ndarray | None] = []  # the last run's outputs (see `outputs`)
        # What the current run's walk feeds each instance to (see `run`).
        self.timeline: Timeline | None = None
        self.races: RaceChecker | None = None
        self.recorder: _Recorder | None = None

    # ---- runs ------------------------------------------------------------------------------------------------

    def run_reference(self, inputs: Sequence[np.ndarray], check_races: bool) -> tuple[list[np.ndarray], Profile]:
        """The definition executed literally: every instance's semantics, timeline and race check as it issues."""
        self._start(inputs)
        timeline = self.timeline = Timeline(self.plans, self.target)
        races = self.races = self._race_checker() if check_races else None
        target = self.target

        def issue(plan: InstructionPlan, values: list[int]) -> None:
            plan.execute(plan.views(values), plan.attributes(values), plan.engine, target)
            start, end = timeline.issue(plan, values)
            if races is not None:
                info = (plan.id, plan.opcode, plan.queue, plan.location, start, end)
                races.issue(plan.index, plan.queue, plan.waits, plan.sites, plan.shifts(values), info)

        self._walk(self._interpreter(issue))
        return self.outputs(), timeline.profile(self.program)

    def analyse(self) -> Profile:
        """The timeline and race check of a run without its data work (`analyse_validated`). Raises `RaceFound`
        or `RaceError` for a race."""
        timeline = self.timeline = Timeline(self.plans, self.target)
        races = self.races = self._race_checker(deferred=True)

        def issue(plan: InstructionPlan, values: list[int]) -> None:
            start, end = timeline.issue(plan, values)
            info = (plan.id, plan.opcode, plan.queue, plan.location, start, end)
            races.issue(plan.index, plan.queue, plan.waits, plan.sites, plan.shifts(values), info)

        self._walk(self._interpreter(issue, self._nest))
        races.flush()
        return timeline.profile(self.program)

    def run(
        self,
        inputs: Sequence[np.ndarray],
        *,
        timing: bool,
        check_races: bool,
        into: Sequence[np.ndarray | None] = (),
    ) -> tuple[list[np.ndarray], Profile | None]:
        """A run on the fast paths: the profile when `timing` (or race checking) asked for a walk, else None.

        The data work comes from the tape once there is one; the first run records it while walking. A run of the
        tape alone reads the inputs it can bind where the caller holds them (`runtime.bound_inputs`)."""
        if self.tape is not None and not timing and not check_races:
            bound = self._start(inputs, bind=True)
            steps = self.tape.steps
            if bound:
                assert self._binding is not None
                steps = self._binding.steps(steps, bound)
            if steps is self.tape.steps:
                self.tape.run()
            else:
                tape.Tape(steps).run()
            del steps  # the steps made over the caller's arrays
            outputs = self.outputs(bound, into)
            del bound
            self._analyse_refill()
            return outputs, None
        self._start(inputs)
        timeline = self.timeline = Timeline(self.plans, self.target) if timing or check_races else None
        races = self.races = self._race_checker(deferred=True) if check_races else None
        recorder = self.recorder = _Recorder(self) if self.tape is None else None

        def issue(plan: InstructionPlan, values: list[int]) -> None:
            if recorder is not None:
                recorder.instance(plan, values)
            if timeline is not None:
                start, end = timeline.issue(plan, values)
                if races is not None:
                    info = (plan.id, plan.opcode, plan.queue, plan.location, start, end)
                    races.issue(plan.index, plan.queue, plan.waits, plan.sites, plan.shifts(values), info)

        try:
            # (the recorder runs prepared steps, which leave floating-point flags to their caller as the tape does)
            with np.errstate(all="ignore"):
                self._walk(self._interpreter(issue, self._nest))
            if races is not None:
                races.flush()
        except RaceFound:
            # A nest or a batch of instances checked as a whole has a race: the reference run finds the first one
            # and words it.
            self.finish()
            self.run_reference(inputs, check_races=True)
            raise SimulationError("a race found in a loop nest did not show instance by instance") from None
        if recorder is None:
            assert self.tape is not None
            with np.errstate(all="ignore"):
                self.tape.run()
        outputs = self.outputs(None, into)
        if recorder is None:
            self._analyse_refill()
        else:
            # later runs read on-chip copies' sources in place where they can (`runtime.copy_forwarding`)
            # (the three analyses of the recorded views look each view's address up once)
            addresses = recorder.addresses
            steps, sources = copy_forwarding.forward_copies(recorder.steps, recorder.sources, self.machine, addresses)
            self.tape = tape.Tape(steps)
            self._bind_inputs(sources, addresses)
            self._unanalysed = (recorder.accesses, addresses)
            # In the next run when it costs no more than the data work (so that run costs at most about two steady
            # ones); else now, in a first run that costs more than that anyway.
            if refill.analysis_seconds(recorder.accesses) > recorder.seconds:
                self._analyse_refill()
        return outputs, timeline.profile(self.program) if timeline is not None else None

    def _analyse_refill(self) -> None:
        """Work out the bytes later runs must fill again (`runtime.refill`) from the taped run's accesses."""
        if self._unanalysed is None:
            return
        accesses, addresses = self._unanalysed
        self._unanalysed = None
        machine = self.machine
        constants, bindings, outputs = self._entry_views()
        rows = [
            0 if memory is Memory.HBM else end - start
            for memory, ranges in machine.ranges.items()
            for start, end in ranges
        ]
        self._refill = refill.bytes_read_first(
            [array for arrays in machine.arrays.values() for array in arrays],
            rows,
            accesses,
            [view for view, _ in constants] + [view for view, _, _ in bindings],
            self._overwritten_views(),
            outputs,
            addresses,
        )

    def finish(self) -> None:
        """Drop what a run left that the next one does not need: the walk's state, and after the run that bound
        the inputs, the host pages of their copies in HBM (a run that reads them there copies them first); after a
        run that checked races, the offsets its checks kept with the operand sites (a program's races are checked
        once: at real widths these are hundreds of MiB)."""
        if self.races is not None:
            for plan in self.plans:
                for site in plan.sites:
                    site.forget_offsets()
        self.timeline = self.races = self.recorder = None
        if self.tape is not None:
            # Runs of the tape walk nothing, so the walk's caches, the loops' traces (register tables of every
            # iteration) and the nests' analyses (byte masks), would stay resident for nothing: tens of MiB at
            # real widths. A later walk (race checking asked for the first time) makes them again as it goes.
            self._traces.clear()
            self.nests.clear()
        if self._release_bound and self._binding is not None:
            for index in self._binding.inputs.values():
                self.machine.release(index)
        self._release_bound = False

    def _bind_inputs(self, sources: Sequence[bound_inputs.Source], addresses: Addresses) -> None:
        """Work out which inputs steady runs read in place, from the first run's recorded steps."""
        homes = self.machine.homes
        candidates = {position: homes[index].array for position, index in self._bindable.items()}
        self._binding = bound_inputs.InputBinding.build(candidates, self._bindable, sources, addresses)
        self._release_bound = True

    def _start(self, inputs: Sequence[np.ndarray], bind: bool = False) -> dict[int, np.ndarray]:
        """Memory as fresh (where this program can tell), then the constants and inputs loaded; with `bind`, the
        inputs bound in place are not copied, and are returned (input position -> the caller's array)."""
        if self._refill is not None:
            for view in self._refill:
                view.fill(0xFF)
        elif not self._fresh_memory:
            self.machine.clear(self._loaded_ranges)
        self._fresh_memory = False
        return self.load(inputs, self._binding.inputs if bind and self._binding is not None else {})

    def _interpreter(self, issue: Any, nests: Any = None) -> Interpreter:
        """An interpreter at the program's entry: registers 0 but the scalar arguments'."""
        interpreter = Interpreter(self.plan_of, self.program.num_registers, issue, nests)
        for register, value in self.entry_registers:
            interpreter.registers[register] = value
        return interpreter

    def _walk(self, interpreter: Interpreter) -> None:
        for position, node in enumerate(self.program.body):
            live = self.live_after[position]
            if self.timeline is not None:
                self.timeline.live_queues = live
            if self.races is not None:
                self.races.live_queues = live
                self.races.next_waits = self.next_waits_after[position]
            interpreter.run((node,))

    # ---- loop nests ----------------------------------------------------------------------------------------

    def _nest(self, loop: Loop, trips: range, registers: list[int]) -> bool:
        """Run a loop as a nest (`runtime.lanes`): its instances to the timeline and race checker, its data work
        to the recorder. False: run it iteration by iteration."""
        return self._run_nest(loop, trips, registers, True)

    def _data_nest(self, loop: Loop, trips: range, registers: list[int]) -> bool:
        """`_nest` for the data work only (within a nest whose timeline and races are done)."""
        return self._run_nest(loop, trips, registers, False)

    def _run_nest(self, loop: Loop, trips: range, registers: list[int], analysis: bool) -> bool:
        key = tuple(registers)
        cached = self._traces.setdefault(id(loop), OrderedDict())
        entry = cached.get(key)
        if entry is None:
            entry = (trace(loop, trips, registers, self.plan_of), None)
            cached[key] = entry
            if len(cached) > _TRACES_PER_LOOP:
                cached.popitem(last=False)
        lanes = entry[0]
        if lanes is None:
            return False
        timeline, races = self.timeline, self.races
        if analysis and timeline is not None and lanes.positions:
            starts, ends = timeline.issue_lanes(lanes)
            if races is not None:
                races.issue_lanes(lanes, starts, ends)
        recorder = self.recorder
        if recorder is not None and lanes.positions:
            batch = recorder.nest(loop, lanes, entry[1])
            if batch is not None:
                cached[key] = (lanes, batch)
            else:
                # not as one batch: iteration by iteration, where nests inside may still batch
                walk = Interpreter(self.plan_of, self.program.num_registers, recorder.instance, self._data_nest)
                walk.registers[:] = registers
                walk.iterate(loop, trips)
        for register, value in lanes.exit_registers.items():
            registers[register] = value
        return True

    def nest_analysis(self, loop: Loop) -> vectorize.Nest | None:
        if id(loop) not in self.nests:
            self.nests[id(loop)] = vectorize.analyse(loop, self.plan_of, self.machine.homes)
        return self.nests[id(loop)]

    def shadow_space(self, worker: int, size: int) -> np.ndarray:
        """At least `size` bytes for the lane shadows of `worker` (`runtime.vectorize`): the arena's, shared with
        other simulators, when it has room, else this simulator's scratch. A batch keeps views of the bytes it was
        built with; when a later batch needs more, its scratch is a new, larger array (the old one lives on with
        the batches that use it). Batches never run at once, and a shadow holds nothing between runs."""
        if self.arena is not None:
            space = self.arena.shadow_space(worker, size)
            if space is not None:
                return space
        scratch = self.scratch
        while len(scratch) <= worker:
            scratch.append(np.empty(0, np.uint8))
        if scratch[worker].size < size:
            scratch[worker] = np.empty(max(size, 2 * scratch[worker].size), np.uint8)
        return scratch[worker]

    # ---- static facts ----------------------------------------------------------------------------------------

    def _live_queues(self) -> list[list[int]]:
        """For each top-level node, the queues that node and the ones after it may still issue to."""
        suffix: list[list[int]] = []
        seen: set[int] = set()
        live: list[int] = []
        plan_of = self.plan_of
        for node in reversed(self.program.body):
            if type(node) is Instruction:
                queues: set[int] = {plan_of[id(node)].queue}
            else:
                queues = {plan_of[id(inst)].queue for inst in _instructions_in(node)}
            if not queues <= seen:
                seen |= queues
                live = sorted(seen)
            suffix.append(live)  # (nodes with the same queues ahead share the list: nobody changes it)
        suffix.reverse()
        return suffix

    def _next_waits(self) -> list[dict[int, list[int]]]:
        """For each top-level node, per queue with nothing in it but more to come: what the queue's next
        instruction waits on, when that instruction surely issues next on its queue (no loop that might not run
        comes before it). The race checker uses it to bound what that queue will have seen."""
        result: list[dict[int, list[int]]] = []
        # queue -> the waits of its first instruction after this node, for those that surely issue
        ahead: dict[int, list[int]] = {}
        for node in reversed(self.program.body):
            firsts = self._first_per_queue(node, True)
            found = dict(ahead)
            for queue, (plan, sure) in firsts.items():
                found.pop(queue, None)
                if sure:
                    ahead[queue] = plan.waits
                else:
                    ahead.pop(queue, None)
            result.append(found)
        result.reverse()
        return result

    def _first_per_queue(self, node: Node, sure: bool) -> dict[int, tuple[InstructionPlan, bool]]:
        """The first instruction per queue in `node`, and whether it surely issues (given `node` runs)."""
        if isinstance(node, Instruction):
            plan = self.plan_of[id(node)]
            return {plan.queue: (plan, sure)}
        if not isinstance(node, Loop):
            return {}
        runs = (
            isinstance(node.lower, int)
            and isinstance(node.upper, int)
            and len(range(node.lower, node.upper, node.step)) > 0
        )
        found: dict[int, tuple[InstructionPlan, bool]] = {}
        for child in node.body:
            for queue, first in self._first_per_queue(child, sure and runs).items():
                found.setdefault(queue, first)
        return found

    def _race_checker(self, deferred: bool = False) -> RaceChecker:
        if self._race_facts is None:
            self._race_facts = self._race_checker_facts()
        return RaceChecker(QUEUES, *self._race_facts, deferred=deferred)

    def _race_checker_facts(self) -> tuple[list[bool], list[str]]:
        """The race checker's static inputs: per buffer, whether any instruction writes a byte it shares (its own
        or another buffer's), and the buffers' names."""
        buffers = self.program.buffers
        homes = self.machine.homes
        extents = []
        for index, buffer in enumerate(buffers):
            row = buffer.elements_per_row * dtypes.itemsize(buffer.dtype)
            extents.append((homes[index].memory_id, homes[index].address, homes[index].address + row))
        directly_written = [False] * len(buffers)
        for plan in self.plans:
            for op in plan.writes:
                directly_written[op.site.buffer] = True
        return sharing_written(extents, directly_written), [buffer.name for buffer in buffers]

    # ---- memory, inputs and outputs --------------------------------------------------------------------------

    def _ranges_load_overwrites(self) -> list[tuple[Memory, int, int]]:
        """HBM address ranges `load` writes completely: constants, and inputs bound to all of their buffer."""
        program = self.program
        covered = set(program.constants)
        for binding in program.inputs:
            buffer = program.buffers[binding.buffer]
            full = tuple(binding.shape) == tuple(buffer.shape) and binding.offset == 0
            if full and tuple(binding.strides) == row_major_strides(buffer.shape):
                covered.add(binding.buffer)
        ranges = []
        for index in covered:
            buffer = program.buffers[index]
            size = buffer.elements_per_row * dtypes.itemsize(buffer.dtype)
            ranges.append((buffer.memory, buffer.address, buffer.address + size))
        return ranges

    def _overwritten_views(self) -> list[np.ndarray]:
        """`_ranges_load_overwrites` as parts of the machine's arrays."""
        views = []
        for memory, start, end in self._loaded_ranges:
            for (range_start, range_end), array in zip(
                self.machine.ranges[memory], self.machine.arrays[memory], strict=True
            ):
                if range_start <= start and end <= range_end and memory is Memory.HBM:
                    views.append(array[start - range_start : end - range_start])
        return views

    def _entry_views(self) -> _EntryViews:
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

    def load(self, inputs: Sequence[np.ndarray], bound: Mapping[int, int] | None = None) -> dict[int, np.ndarray]:
        """The constants and inputs into HBM, but the inputs at positions in `bound` whose arrays are
        C-contiguous and of `_BIND_MIN_BYTES` or more: those are returned (position -> array), to be read where
        they are."""
        program = self.program
        if len(inputs) != len(program.inputs):
            raise ValueError(f"{program.entry} takes {len(program.inputs)} inputs, got {len(inputs)}")
        constants, bindings, _ = self._entry_views()
        for view, array in constants:
            view[...] = array
        in_place: dict[int, np.ndarray] = {}
        for position, ((view, expected, shape), value) in enumerate(zip(bindings, inputs, strict=True)):
            array = value if type(value) is np.ndarray else np.asarray(value)
            if array.shape != shape or array.dtype != expected:
                raise ValueError(
                    f"input {position} ('{program.inputs[position].name}'): expected {dtypes.dtype_name(expected)}"
                    f"{list(shape)}, got {array.dtype}{list(array.shape)}"
                )
            if bound and position in bound and array.flags.c_contiguous and array.nbytes >= _BIND_MIN_BYTES:
                in_place[position] = array
                continue
            view[...] = array
        return in_place

    def outputs(
        self, bound: Mapping[int, np.ndarray] | None = None, into: Sequence[np.ndarray | None] = ()
    ) -> list[np.ndarray]:
        """Copies of the output bindings, each the caller's own; an output of the buffer of an input in `bound`
        (input position -> the caller's array, read in place this run) is copied from that array. An output that
        `into` gives an array for is copied there, and is that array.

        An array the last run returned that nothing references any more (the caller dropped it, and every view
        and tensor made of it) takes this run's values: a fresh array of a large output costs more than the
        copy itself, its pages faulted in, zeroed and, as NumPy asks for huge pages, often compacted by the
        kernel (for gpt2-small's 595 MiB of outputs per training step, a second of CPU time against 0.1). Only
        row-major arrays are taken again: one in a transposed layout is new on every run."""
        returned = self._returned
        arrays = []
        # the arrays a later run may take again: not the caller's destinations (None there)
        kept: list[Any] = []
        for position, view in enumerate(self._entry_views()[2]):
            if bound and position in self._outputs_of_inputs:
                view = self._output_of_input(position, bound, view)
            destination = into[position] if position < len(into) else None
            if destination is not None:
                np.copyto(destination, view)
                arrays.append(destination)
                kept.append(None)
                continue
            # (no local name for the candidate: it would be one more reference than the list's)
            if position < len(returned) and returned[position] is not None and _held_only_by_list(returned, position):
                array = returned[position]
                assert array is not None
                np.copyto(array, view)
            else:
                array = np.array(view, copy=True)
            arrays.append(array)
            # An array in another order than row-major (a transposed HBM layout) is copied once more by a caller
            # that needs row-major order (the frontend's torch tensors): kept here, it would be held twice
            # between runs (whisper-small: 35 MiB), so it is made afresh each run.
            kept.append(array if array.flags.c_contiguous else None)
        self._returned = kept
        return arrays

    def _output_of_input(self, position: int, bound: Mapping[int, np.ndarray], view: np.ndarray) -> np.ndarray:
        """Output `position`'s binding as a view of the caller's array of the input whose buffer it reads, when
        that input is in `bound` (its buffer in HBM holds nothing this run), else `view`."""
        array = bound.get(self._outputs_of_inputs[position])
        if array is None or view.size == 0:
            return view
        binding = self.program.outputs[position]
        itemsize = view.itemsize
        return np.ndarray(
            view.shape,
            view.dtype,
            buffer=array.reshape(-1).view(np.uint8),
            offset=binding.offset * itemsize,
            strides=tuple(stride * itemsize for stride in binding.strides),
        )


def _references_of_list_item(items: list[Any], position: int) -> int:
    return sys.getrefcount(items[position])


# What `_references_of_list_item` counts for an object that only one list holds: the list's reference and those
# the call itself makes, which depend on the Python version, so they are counted rather than assumed.
_ONLY_A_LIST_HOLDS = _references_of_list_item([object()], 0)


def _held_only_by_list(items: list[Any], position: int) -> bool:
    """Whether nothing but `items` references `items[position]`."""
    return _references_of_list_item(items, position) == _ONLY_A_LIST_HOLDS


class _Recorder:
    """The data work of a first run: every instance executed by its semantics and kept as a prepared step for the
    tape, nests batched where `runtime.vectorize` allows; and every access, for `runtime.refill`."""

    def __init__(self, simulator: Simulator) -> None:
        self.simulator = simulator
        self.target = simulator.target
        self.steps: list[tape.Step] = []
        self.sources: list[bound_inputs.Source] = []  # per step, its maker and views (`runtime.bound_inputs`)
        self.accesses: list[refill.Access] = []
        # the addresses of the views the steps use, for the analyses of the recording (`runtime.addresses`)
        self.addresses = simulator.addresses.copy()
        # CPU seconds spent on the data work itself (about what a run of the tape will take), weighed against
        # `refill.analysis_seconds`, a CPU-time estimate: wall time would let the load of a shared machine decide
        self.seconds = 0.0

    def instance(self, plan: InstructionPlan, values: list[int]) -> None:
        views, attrs = plan.views(values), plan.attributes(values)
        note = self.addresses.note
        for op in plan.operands:
            column = op.column
            note(views[op.role], op.host_address if column < 0 else op.host_address + values[column] * op.site.itemsize)
        # The step the tape will replay does the data work now too: it gives the semantics' bits (`runtime.tape`)
        # in less time than the semantics function, which the first run would otherwise call besides preparing it.
        step = tape.instance_step(plan.execute, plan.opcode, views, attrs, plan.engine, self.target)
        started = time.process_time()
        step()
        self.seconds += time.process_time() - started
        self.steps.append(step)
        maker = functools.partial(
            tape.instance_step, plan.execute, plan.opcode, attrs=attrs, engine=plan.engine, target=self.target
        )
        self.sources.append((maker, views))
        self.accesses.append((plan.opcode, views, attrs))

    def nest(self, loop: Loop, lanes: Lanes, known: vectorize.Batch | None) -> vectorize.Batch | None:
        """The nest's data work as a batch (`known` again, or a new one); None when it does not batch (the caller
        then does it iteration by iteration)."""
        batch = known
        if batch is not None:
            started = time.process_time()
            batch.run()
            self.seconds += time.process_time() - started
        else:
            nest = self.simulator.nest_analysis(loop)
            if nest is not None and not nest.failed:
                batch = vectorize.run_nest(self.simulator, nest, lanes)
                if batch is not None:
                    self.seconds += batch.run_seconds
        if batch is not None:
            steps = tape.batch_steps(batch)
            if len(batch.parts) == 1:
                self.sources.extend(batch.makers[0])
                self.sources.extend((None, {"dst": real}) for real, _ in batch.write_back)
            else:  # one step, running its parts on threads
                self.sources.append((batch.remade, batch.operand_views()))
            assert len(self.sources) == len(self.steps) + len(steps)
            self.steps.extend(steps)
            self.accesses.extend(batch.accesses)
        return batch


def sharing_written(extents: Sequence[tuple[int, int, int]], written: Sequence[bool]) -> list[bool]:
    """Per byte range (memory, start, end), whether it shares a byte with one of those that `written` marks, itself
    included: one that starts before its end and ends after its start, in the same memory."""
    # per memory, the written ranges by start, with the furthest end among those starting so far
    starts: dict[int, list[int]] = {}
    reach: dict[int, list[int]] = {}
    for memory, start, end in sorted(extent for extent, marked in zip(extents, written, strict=True) if marked):
        furthest = reach.setdefault(memory, [])
        starts.setdefault(memory, []).append(start)
        furthest.append(max(end, furthest[-1]) if furthest else end)
    found = []
    for memory, start, end in extents:
        before = bisect.bisect_left(starts.get(memory, []), end)
        found.append(before > 0 and reach[memory][before - 1] > start)
    return found


def _instructions_in(node: Node) -> list[Instruction]:
    if isinstance(node, Instruction):
        return [node]
    if isinstance(node, Loop):
        return [inst for child in node.body for inst in _instructions_in(child)]
    return []


# run_program's memory of validated programs: id(program) -> (weak reference, override, snapshot, validated).
# The ValidatedProgram holds a private copy of the program (the snapshot), never the caller's object, so the
# entry goes away with the caller's program.
_VALIDATED: dict[int, tuple[weakref.ref[Program], Any, tuple[Any, ...], ValidatedProgram]] = {}


def _fields(program: Program) -> tuple[Any, ...]:
    constants = (
        tuple(
            (index, type(array), getattr(array, "dtype", None), getattr(array, "shape", None))
            for index, array in program.constants.items()
        )
        if isinstance(program.constants, dict)
        else program.constants
    )
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
        tuple(program.scalars),
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
        reference = weakref.ref(program, lambda _: _VALIDATED.pop(key, None))
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
