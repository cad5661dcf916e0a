"""neuron-insert-sync: order instructions across engine queues with semaphore waits.

Input contract: allocated neuron-level functions (every on-chip `neuron.alloc` has an address).

Output guarantee: every instruction has a unique `id` (program order), and `waits` lists, for each other queue,
the latest instruction there that it must follow: the last writers of what it reads (read after write), and the
last writers and readers of what it writes (write after write, write after read). A wait means "the most recent
issued instance of that instruction has completed" (runtime/program.py), which is exactly what a loop needs:
the loop body is analysed twice, so an instruction at the top of the body also waits for the previous
iteration's users of a reused buffer. Instructions on the same queue run in order and never wait on each other.

Memory regions are tracked by byte range: on-chip buffers by address (so reuse of an address by a later buffer
is ordered too), HBM by buffer and element range. Accesses whose offsets depend on loop indices are taken as
covering their whole buffer, which is conservative but never unsafe. The simulator's race checker verifies
the result. Only what can conflict is compared: records are grouped by memory (and HBM buffer), reads apart from
writes, and each distinct access keeps only its latest instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.neuron import InstructionOp
from neuron_mlir.ir.locations import describe_location
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import Engine, Memory

QueueKey = tuple[str, int]


@dataclass(frozen=True)
class Region:
    """Bytes [low, high) of partitions [p_low, p_high) in one memory (HBM: of one buffer)."""

    memory: Memory
    buffer: SSAValue | None  # HBM buffers are told apart by identity; on-chip ones by address
    low: int
    high: int
    p_low: int = 0
    p_high: int = 1

    def overlaps(self, other: Region) -> bool:
        if self.memory is not other.memory or self.buffer is not other.buffer:
            return False
        return (
            self.low < other.high and other.low < self.high and self.p_low < other.p_high and other.p_low < self.p_high
        )

    def covers(self, other: Region) -> bool:
        return (
            self.memory is other.memory
            and self.buffer is other.buffer
            and self.low <= other.low
            and other.high <= self.high
            and self.p_low <= other.p_low
            and other.p_high <= self.p_high
        )


# Records of accesses, grouped by what can conflict: the memory and (for HBM) the buffer. Within a group, reads
# and writes apart (a read only ever waits for writes). Each maps (queue, region) of an access to the (sequence
# number, instruction id) of its latest instance: an older access of the same queue, kind and region can never be
# the wait an instruction picks (the newer one conflicts exactly when it does, and the latest per queue wins), so
# the records stay as few as the distinct accesses, however long the program.
RecordKey = tuple[QueueKey, Region]
Records = dict[RecordKey, tuple[int, int]]


@dataclass
class _Group:
    reads: Records = field(default_factory=dict)
    writes: Records = field(default_factory=dict)


@dataclass
class _State:
    groups: dict[tuple[Memory, SSAValue | None], _Group] = field(default_factory=dict)
    sequence: int = 0

    def group(self, region: Region) -> _Group:
        key = (region.memory, region.buffer)
        if key not in self.groups:
            self.groups[key] = _Group()
        return self.groups[key]


def _queue_of(op: InstructionOp) -> QueueKey:
    engine = op.engine_kind
    return (engine.value, op.queue.value.data if engine is Engine.DMA and op.queue is not None else 0)


def _root_buffer(value: SSAValue) -> SSAValue:
    owner = value.owner
    while isinstance(owner, neuron.ViewOp):
        value = owner.source
        owner = value.owner
    return value


def _region(op: InstructionOp, role: str) -> Region:
    access = op.access(role)
    assert access is not None
    buffer, pattern, dynamic = access
    memref_type = buffer.type
    assert isinstance(memref_type, MemRefType)
    from neuron_mlir.ir.types import runtime_dtype_name

    size = itemsize(runtime_dtype_name(memref_type.element_type))
    memory = neuron.memory_of(memref_type)
    shape = memref_type.get_shape()
    row_elements = 1
    for extent in shape if memory is Memory.HBM else shape[1:]:
        row_elements *= extent
    if dynamic is not None:
        low_element, high_element = 0, row_elements
    else:
        low_element = high_element = pattern.offset.data
        for step, num in pattern.dims:
            reach = step * (num - 1)
            if reach < 0:
                low_element += reach
            else:
                high_element += reach
        high_element += 1
    if memory is Memory.HBM:
        return Region(memory, _root_buffer(buffer), low_element * size, high_element * size)
    alloc = buffer.owner
    if not isinstance(alloc, neuron.AllocOp) or alloc.address is None:
        where = describe_location(op.location)
        raise PassFailedException(
            f"{op.name}: on-chip buffers need addresses before synchronisation; run neuron-allocate-memory first"
            + (f" (at {where})" if where else "")
        )
    base = alloc.address.value.data
    start = pattern.partition_start.data
    return Region(
        memory, None, base + low_element * size, base + high_element * size, start, start + pattern.partitions.data
    )


def _synchronise(op: InstructionOp, state: _State, waits: dict[InstructionOp, set[int]]) -> None:
    own_id = op.instruction_id.value.data if op.instruction_id is not None else -1
    queue = _queue_of(op)
    spec = op.spec()
    written_roles = set(spec.writes + spec.optional_writes)
    reads = [_region(op, role) for role in op.present_roles() if role not in written_roles]
    writes = [_region(op, role) for role in op.present_roles() if role in written_roles]
    latest: dict[QueueKey, tuple[int, int]] = {}  # queue -> (record sequence number, instruction id)

    def wait_for(records: Records, region: Region) -> None:
        for (record_queue, record_region), (sequence, instruction_id) in records.items():
            if record_queue == queue or not record_region.overlaps(region):
                continue
            if record_queue not in latest or latest[record_queue][0] < sequence:
                latest[record_queue] = (sequence, instruction_id)

    for region in reads:  # read after write
        wait_for(state.group(region).writes, region)
    for region in writes:  # write after write, write after read
        group = state.group(region)
        wait_for(group.writes, region)
        wait_for(group.reads, region)
    waits.setdefault(op, set()).update(instruction_id for _, instruction_id in latest.values())
    for region in writes:
        group = state.group(region)
        for records in (group.reads, group.writes):
            for key in [key for key in records if region.covers(key[1])]:
                del records[key]
    for regions, writing in ((reads, False), (writes, True)):
        for region in regions:
            group = state.group(region)
            records = group.writes if writing else group.reads
            key = (queue, region)
            records.pop(key, None)  # re-inserted last: iteration follows the sequence
            state.sequence += 1
            records[key] = (state.sequence, own_id)


def _visit(block: Block, state: _State, waits: dict[InstructionOp, set[int]]) -> None:
    for op in block.ops:
        if isinstance(op, scf.ForOp):
            # twice: the second pass sees the previous iteration's accesses (loop-carried dependences)
            _visit(op.body.block, state, waits)
            _visit(op.body.block, state, waits)
        elif isinstance(op, InstructionOp):
            _synchronise(op, state, waits)
        elif op.regions:
            for region in op.regions:
                for inner in region.blocks:
                    _visit(inner, state, waits)


@dataclass(frozen=True)
class NeuronInsertSyncPass(ModulePass):
    name = "neuron-insert-sync"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            if function.is_declaration:
                continue
            instructions = [i for i in function.body.walk() if isinstance(i, InstructionOp)]
            for number, instruction in enumerate(instructions):
                instruction.properties["id"] = IntegerAttr(number, i64)
                instruction.properties.pop("waits", None)
            waits: dict[InstructionOp, set[int]] = {}
            _visit(function.body.block, _State(), waits)
            for instruction, ids in waits.items():
                own = instruction.instruction_id.value.data if instruction.instruction_id is not None else -1
                ordered = sorted(i for i in ids if i != own)
                if ordered:
                    instruction.properties["waits"] = DenseArrayBase.from_list(i64, ordered)
