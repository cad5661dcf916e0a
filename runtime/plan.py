"""Each static instruction of a program, worked out once for a machine: operand views, byte sites, cost, waits.

An instruction runs many times (loops), and almost everything about it is the same every time: which memory its
operands view and how (strides, dtype), which bytes they touch relative to their offset registers, what it costs,
which instructions it waits for. `plan_program` computes that once per program and `Machine`; what an instance
adds is its *register values*: the values of the registers in `InstructionPlan.registers` (offset registers of
its operands, then registers of its attributes), in that order. Given them, `views`, `attributes` and `shifts`
give exactly the operands, attributes and byte shifts the instance has, and nothing else in a plan changes.

Guarantees: a plan holds no data of its own (its views are of the machine's memories), and nothing changes it
after it is built: every run of the program shares it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from neuron_mlir.runtime import collectives, cost_model, dtypes, isa
from neuron_mlir.runtime.addresses import Addresses
from neuron_mlir.runtime.hardware import PARTITIONS, Engine, Memory, Target
from neuron_mlir.runtime.machine import MEMORY_NAMES, Home, Machine
from neuron_mlir.runtime.profile import QUEUE_NAMES
from neuron_mlir.runtime.program import Access, Instruction, Program, Reg
from neuron_mlir.runtime.races import AccessSite

DMA_QUEUE_BASE = 5
QUEUES = len(QUEUE_NAMES)  # the queues instances issue to: tensor, vector, scalar, gpsimd, sync, 16 DMA, collective
COLLECTIVE_QUEUE = QUEUE_NAMES.index("collective")
_ENGINE_QUEUE = {
    Engine.TENSOR: 0, Engine.VECTOR: 1, Engine.SCALAR: 2, Engine.GPSIMD: 3, Engine.SYNC: 4,
    Engine.COLLECTIVE: COLLECTIVE_QUEUE,
}  # fmt: skip

# PE rows per slot of the timeline's TensorE state: the smallest row tile of any target [nki-isa], so every row tile
# is a whole number of slots.
PE_ROW_SLOT = 32
PE_ROW_SLOTS = PARTITIONS // PE_ROW_SLOT

# (memory id, first partition, end partition, first byte, end byte): the hull of an access, for overlap tests
Footprint = tuple[int, int, int, int, int]


def queue_index(inst: Instruction) -> int:
    """The simulator's queue number of an instruction (index into `profile.QUEUE_NAMES`)."""
    if inst.engine is Engine.DMA:
        return DMA_QUEUE_BASE + int(inst.queue)
    return _ENGINE_QUEUE[inst.engine]


class _Layout:
    """What an operand's plan takes from its buffer's home, pattern and partitions alone (not its offset): the
    view's shape and strides, the partition rows' bytes before element 0, the bytes it reaches around it."""

    __slots__ = (
        "high",
        "itemsize",
        "low",
        "partition_bytes",
        "partition_end",
        "partition_start",
        "pattern",
        "shape",
        "strides",
    )

    def __init__(self, home: Home, access: Access) -> None:
        itemsize = self.itemsize = home.dtype.itemsize
        self.pattern = tuple((int(step), int(num)) for step, num in access.pattern)
        shape = [num for _, num in self.pattern]
        strides = [step * itemsize for step, _ in self.pattern]
        self.partition_bytes = 0
        self.partition_start, self.partition_end = 0, 1
        if home.memory is not Memory.HBM:
            shape.insert(0, access.partitions)
            strides.insert(0, home.partition_stride)
            self.partition_bytes = access.partition_start * home.partition_stride
            self.partition_start = access.partition_start
            self.partition_end = access.partition_start + access.partitions
        self.shape, self.strides = tuple(shape), tuple(strides)
        low = high = 0
        for step, num in self.pattern:
            reach = step * (num - 1)
            if reach < 0:
                low += reach
            else:
                high += reach
        self.low, self.high = low * itemsize, (high + 1) * itemsize


def _layout(home: Home, access: Access, layouts: dict[tuple[object, ...], _Layout]) -> _Layout:
    """The operand's `_Layout`, made once per buffer, pattern and partitions."""
    try:
        key = (access.buffer, access.pattern, access.partitions, access.partition_start)
        found = layouts.get(key)
    except TypeError:  # a pattern of lists
        return _Layout(home, access)
    if found is None:
        found = layouts[key] = _Layout(home, access)
    return found


class OperandPlan:
    """One operand of one static instruction: how to view it and which bytes it touches."""

    __slots__ = ("column", "host_address", "register", "role", "site", "static_view", "view_args")

    def __init__(
        self,
        machine: Machine,
        role: str,
        access: Access,
        is_write: bool,
        shared: _Shared | None = None,
    ) -> None:
        """`shared`: what operands of one buffer, pattern and partitions share, worked out once (`_Layout`)."""
        self.role = role
        home = machine.homes[access.buffer]
        if shared is None:
            shared = _Shared()
        layout = _layout(home, access, shared.layouts)
        itemsize = layout.itemsize
        self.register = access.offset_reg.index if access.offset_reg is not None else -1
        self.column = -1  # position of `register` in the instance's register values (set by the plan)
        start = home.base + int(access.offset) * itemsize
        self.view_args = (
            layout.shape,
            home.dtype,
            home.array,
            start + layout.partition_bytes,
            layout.strides,
            itemsize,
        )
        # the host address of the view's element 0 with the register at 0 (`runtime.addresses`)
        self.host_address = shared.array_address(home.array) + start + layout.partition_bytes
        self.static_view = self.view(0) if self.register < 0 else None
        self.site = AccessSite(
            role,
            is_write,
            access.buffer,
            home.memory_id,
            MEMORY_NAMES[home.memory_id],
            layout.partition_start,
            layout.partition_end,
            home.address + int(access.offset) * itemsize,
            itemsize,
            layout.pattern,
            layout.low,
            layout.high,
            self.register,
        )

    def view(self, register_value: int) -> np.ndarray:
        """The operand with its offset register holding `register_value`."""
        shape, dtype, array, start, strides, itemsize = self.view_args
        return np.ndarray(shape, dtype, buffer=array, offset=start + register_value * itemsize, strides=strides)

    def footprint(self, register_value: int) -> Footprint:
        site = self.site
        lo = site.base + register_value * site.itemsize + site.low
        return (site.memory_id, site.partition_start, site.partition_end, lo, lo - site.low + site.high)


class InstructionPlan:
    """One static instruction, planned (see the module docstring)."""

    __slots__ = (
        "attr_is_flag",
        "attrs",
        "columns",
        "dma",
        "duration_ns",
        "dynamic",
        "engine",
        "engine_rate",
        "execute",
        "family",
        "flops",
        "hbm_per_byte",
        "id",
        "index",
        "inst",
        "location",
        "opcode",
        "operands",
        "pe_rows",
        "penalty_ns",
        "queue",
        "read_footprints",
        "reads",
        "register_attrs",
        "registers",
        "sites",
        "static_views",
        "waits",
        "work_bytes",
        "write_footprints",
        "writes",
    )

    def __init__(
        self,
        index: int,
        inst: Instruction,
        program: Program,
        machine: Machine,
        target: Target,
        waits: list[int],
        shared: _Shared | None = None,
    ) -> None:
        """`shared`: what instructions of one form, and operands of one layout, share, worked out once per program
        (`_form`, `_layout`)."""
        spec = isa.OPCODES[inst.opcode]
        written_roles = set(spec.writes + spec.optional_writes)
        self.index = index
        self.inst = inst
        self.id = inst.id
        self.opcode = inst.opcode
        self.engine = inst.engine
        self.queue = queue_index(inst)
        self.location = program.locations[inst.location] if inst.location >= 0 else ""
        self.execute: Callable[..., None] = spec.semantics
        if inst.engine is Engine.COLLECTIVE and self.location:
            self.execute = _located(spec.semantics, self.location)
        self.operands = [
            OperandPlan(machine, role, access, role in written_roles, shared) for role, access in inst.operands.items()
        ]
        self.reads = [op for op in self.operands if not op.site.is_write]
        self.writes = [op for op in self.operands if op.site.is_write]
        self.sites = [op.site for op in self.operands]
        form = _form(inst, program, target, shared.forms if shared is not None else {})
        self.attrs = form.attrs
        self.register_attrs = form.register_attrs
        self.attr_is_flag = form.attr_is_flag
        # The registers an instance's values list: each operand's offset register once, then attribute registers.
        self.registers: list[int] = []
        self.columns: dict[tuple[str, Any], int] = {}
        for op in self.operands:
            if op.register >= 0:
                key = ("reg", op.register)
                if key not in self.columns:
                    self.columns[key] = len(self.registers)
                    self.registers.append(op.register)
                op.column = self.columns[key]
        for name, register in self.register_attrs:
            self.columns[("attr", name)] = len(self.registers)
            self.registers.append(register)
        self.dynamic = any(op.register >= 0 for op in self.operands)
        self.static_views = {op.role: op.static_view for op in self.operands if op.static_view is not None}
        self.waits = waits

        self.dma = form.dma
        self.duration_ns = form.duration_ns
        self.engine_rate = form.engine_rate
        self.hbm_per_byte = form.hbm_per_byte
        self.penalty_ns = form.penalty_ns
        self.pe_rows = form.pe_rows
        self.flops = form.flops
        self.family = form.family
        self.work_bytes = form.work_bytes
        # kept where the timeline asks for them on every instance: the dependency penalty's engines
        static = not self.dynamic and self.penalty_ns
        self.read_footprints = [op.footprint(0) for op in self.reads] if static else None
        self.write_footprints = [op.footprint(0) for op in self.writes] if static else None

    # ---- what an instance has, from its register values ------------------------------------------------------

    def views(self, values: Sequence[int]) -> dict[str, np.ndarray]:
        """The instance's operands: views of the machine's memories."""
        if not self.dynamic:
            return self.static_views
        views = dict(self.static_views)
        for op in self.operands:
            if op.register >= 0:
                views[op.role] = op.view(values[op.column])
        return views

    def attributes(self, values: Sequence[int]) -> dict[str, Any]:
        """The instance's attributes: immediates, and register attributes at their values (flags as booleans)."""
        if not self.register_attrs:
            return self.attrs
        attrs = dict(self.attrs)
        columns = self.columns
        for name, _ in self.register_attrs:
            value = values[columns[("attr", name)]]
            attrs[name] = value != 0 if self.attr_is_flag[name] else value
        return attrs

    def shifts(self, values: Sequence[int]) -> list[int]:
        """Per operand, the bytes its offset register moves it by."""
        return [values[op.column] * op.site.itemsize if op.column >= 0 else 0 for op in self.operands]

    def read_footprints_at(self, values: Sequence[int]) -> list[Footprint]:
        if self.read_footprints is not None:
            return self.read_footprints
        return [op.footprint(values[op.column] if op.column >= 0 else 0) for op in self.reads]

    def write_footprints_at(self, values: Sequence[int]) -> list[Footprint]:
        if self.write_footprints is not None:
            return self.write_footprints
        return [op.footprint(values[op.column] if op.column >= 0 else 0) for op in self.writes]


def plan_program(
    program: Program,
    instructions: Sequence[Instruction],
    index_of_id: dict[int, int],
    machine: Machine,
    target: Target,
    addresses: Addresses | None = None,
) -> list[InstructionPlan]:
    """Plans of `instructions` (the program's static instructions in program order), indexed like them;
    `addresses`, where the machine's arrays' addresses are looked up (and kept)."""
    shared = _Shared(addresses)
    return [
        InstructionPlan(index, inst, program, machine, target, [index_of_id[w] for w in inst.waits], shared)
        for index, inst in enumerate(instructions)
    ]


class _Shared:
    """What the plans of one program share: per instruction form and per operand layout."""

    def __init__(self, addresses: Addresses | None = None) -> None:
        self.forms: dict[tuple[object, ...], _Form] = {}
        self.layouts: dict[tuple[object, ...], _Layout] = {}
        self.array_address = (addresses if addresses is not None else Addresses()).of  # of the machine's arrays


class _Form:
    """What a plan takes from its instruction's form alone: attributes, cost and what the timeline derives from it
    (shared by the plans of one form: none changes it)."""

    __slots__ = (
        "attr_is_flag",
        "attrs",
        "dma",
        "duration_ns",
        "engine_rate",
        "family",
        "flops",
        "hbm_per_byte",
        "pe_rows",
        "penalty_ns",
        "register_attrs",
        "work_bytes",
    )

    def __init__(self, inst: Instruction, program: Program, target: Target) -> None:
        spec = isa.OPCODES[inst.opcode]
        self.attrs = isa.with_defaults(inst.opcode, {k: v for k, v in inst.attrs.items() if not isinstance(v, Reg)})
        self.register_attrs = [(name, value.index) for name, value in inst.attrs.items() if isinstance(value, Reg)]
        self.attr_is_flag = {name: isinstance(spec.attrs.get(name), bool) for name, _ in self.register_attrs}
        cost = cost_model.instruction_cost(inst, program.buffers, target)
        self.dma = cost if isinstance(cost, cost_model.DmaCost) else None
        self.duration_ns = cost if isinstance(cost, float) else 0.0
        self.engine_rate = self.dma.engine_rate(target) if self.dma is not None else 0.0
        self.hbm_per_byte = self.dma.hbm_bytes / self.dma.bytes if self.dma is not None else 0.0
        self.penalty_ns = 0.0
        if inst.engine in (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD):
            self.penalty_ns = target.dependent_op_penalty_cycles / target.clock_ghz[inst.engine]
        # TensorE instructions: the slots of PE rows they occupy (`PE_ROW_SLOT` rows each), for the timeline
        self.pe_rows: tuple[int, int] | None = None
        if inst.engine is Engine.TENSOR:
            first, stop = isa.row_tile(self.attrs, target)
            self.pe_rows = (first // PE_ROW_SLOT, stop // PE_ROW_SLOT)
        self.flops = cost_model.matmul_flops(inst)
        self.family = ""
        if self.flops:
            self.family = dtypes.matmul_family(program.buffers[inst.operands["moving"].buffer].dtype)
        buffers = program.buffers
        self.work_bytes = 0  # the operands' bytes, as their views have them (partitions on chip)
        for access in inst.operands.values():
            buffer = buffers[access.buffer]
            elements = math.prod(num for _, num in access.pattern)
            if buffer.memory is not Memory.HBM:
                elements *= access.partitions
            self.work_bytes += elements * dtypes.itemsize(buffer.dtype)


def _form(inst: Instruction, program: Program, target: Target, forms: dict[tuple[object, ...], _Form]) -> _Form:
    """The instruction's `_Form`, made once per distinct form: what it is made of (opcode, engine, each operand's
    memory, dtype, partitions and pattern, the attributes) is what many instructions of a program share."""
    buffers = program.buffers
    key = (
        inst.opcode,
        inst.engine,
        tuple(
            (role, buffers[access.buffer].memory, buffers[access.buffer].dtype, access.partitions, access.pattern)
            for role, access in inst.operands.items()
        ),
        tuple(sorted(inst.attrs.items())),
    )
    found = forms.get(key)
    if found is None:
        found = forms[key] = _Form(inst, program, target)
    return found


def _located(semantics: Callable[..., None], location: str) -> Callable[..., None]:
    """A collective's semantics whose failures (ranks that disagree, a peer gone) name the user's source line of
    the collective: every rank raises, and each says where its program issued the exchange."""

    def run(*args: Any) -> None:
        try:
            semantics(*args)
        except collectives.CollectiveError as error:
            raise collectives.CollectiveError(f"{error} (at {location})") from error

    return run
