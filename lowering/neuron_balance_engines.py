"""neuron-balance-engines: spread the instructions any of several engines can run so that no engine dominates.

Input contract: neuron-level functions (after convert-tile-to-neuron), before synchronisation: every compute
instruction has the engine the converter chose for it by its kind (ScalarE activations, VectorE arithmetic,
GpSimdE exact integer work).

Output guarantee: the same instructions computing the same values; within each block (a loop body or the
function body), float `tensor_scalar`, `tensor_copy`, `tensor_tensor`, `select` and `memset` instructions that
the converter put on VectorE may have moved to GpSimdE (when none of their operands is in PSUM, which GpSimdE
cannot reach) or, for `tensor_scalar` and `tensor_copy` with plain arithmetic, to ScalarE. Assignment is greedy
over the block by the cost model (`runtime.cost_model`): the most expensive movable instruction first, each to
the engine that would then finish the block's work earliest, VectorE on ties. Copies of one instruction (same
opcode, properties, buffer types and location, as unrolling makes them) go to one engine together. Engines run
in parallel, so a body that needed the sum of its instructions on VectorE now needs about the largest engine's
share. Integer work stays where it is (GpSimdE's lanes are exact; VectorE rounds through fp32), and so does `power`.

After the assignment, a `tensor_tensor` left on VectorE whose input is an fp32 tile that a one-step float
`tensor_scalar` (on any engine) alone wrote becomes one `scalar_tensor_tensor` computing both: VectorE streams
the same 2N (or N) instead of 2N, the tensor_scalar's engine is freed, and the chain loses a step. The engine
keeps the intermediate in fp32, what the fp32 tile held, so the results are the same bits. A `tensor_copy` that
alone then moves the result into a window of another buffer is folded in as neuron-fuse-instructions does.
Pairs the assignment spread over other engines stay apart: there they can cost less than the one VectorE pass.

PSUM evacuations (a `tensor_copy` of a PSUM tile into an SBUF buffer of its own: how the tile level hands a
matmul's accumulators over, one engine-neutral copy each) depend on where the function's time goes. When TensorE
is the function's busiest engine (by the cost model, every instruction counted once per trip of its loops), a
bank released late stalls the engine that sets the pace: a block's evacuations of one instruction are then
placed as two interleaved halves (first, third, ... and second, fourth, ...), the half holding the last one
first, so that they split between VectorE and ScalarE by their costs and two banks drain at once, the last
(ready last) on the engine that finishes it soonest. Otherwise the engines' throughput sets the pace and they
move together like any other copies. Copies into a window of a buffer that other instructions write (inserts
into a panel) keep the engine the converter gave that buffer, so that they need no waits on each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, IntegerType, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import memory_of
from neuron_mlir.ir.dialects.neuron import EngineAttr, InstructionOp, element_type_name
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.lowering.neuron_fuse_instructions import forward_into_copy_reader, fuse_scalar_tensor_tensor
from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.hardware import ENGINE_READS, ENGINE_WRITES, Engine, Memory, Target

_MOVABLE: dict[str, tuple[Engine, ...]] = {
    "tensor_scalar": (Engine.GPSIMD, Engine.SCALAR),
    "tensor_copy": (Engine.GPSIMD, Engine.SCALAR),
    "tensor_tensor": (Engine.GPSIMD,),
    "select": (Engine.GPSIMD,),
    "memset": (Engine.GPSIMD,),
}
# ALU operators ScalarE's tensor_scalar is given here: plain fp32 arithmetic
_SCALAR_ENGINE_OPS = frozenset({"add", "subtract", "multiply", "max", "min"})
_STAY = frozenset({"power"})


def _shapes(op: InstructionOp) -> dict[str, cost_model.OperandShape] | None:
    shapes = {}
    for role in op.present_roles():
        access = op.access(role)
        assert access is not None
        buffer, pattern, _ = access
        memref_type = buffer.type
        assert isinstance(memref_type, MemRefType)
        shapes[role] = cost_model.OperandShape(
            memory_of(memref_type),
            element_type_name(memref_type.element_type),
            pattern.partitions.data if pattern.is_on_chip else 0,
            tuple(num for _, num in pattern.dims),
            tuple(step for step, _ in pattern.dims),
        )
    return shapes


def _attrs(op: InstructionOp) -> dict[str, object]:
    attrs: dict[str, object] = {}
    for name, attr in op.properties.items():
        if isinstance(attr, StringAttr):
            attrs[name] = attr.data
    return attrs


def cost_ns(op: InstructionOp, engine: Engine, target: Target) -> float:
    """The cost model's time for `op` on `engine`."""
    shapes = _shapes(op)
    assert shapes is not None
    return cost_model.compute_ns(op.spec().name, engine, shapes, _attrs(op), target)


def _alternatives(op: InstructionOp) -> tuple[Engine, ...]:
    """Engines besides VectorE that may run `op` with the same results."""
    opcode = op.spec().name
    if opcode not in _MOVABLE or op.engine_kind is not Engine.VECTOR:
        return ()
    buffers = [getattr(op, role) for role in op.present_roles()]
    types = [buffer.type for buffer in buffers]
    if any(not isinstance(t, MemRefType) or isinstance(t.element_type, IntegerType) for t in types):
        return ()
    operators = {
        attr.data for name, attr in op.properties.items() if name.startswith("op") and isinstance(attr, StringAttr)
    }
    if operators & _STAY:
        return ()
    spec = op.spec()
    written = set(spec.writes + spec.optional_writes)
    chosen = []
    for engine in _MOVABLE[opcode]:
        if engine is Engine.SCALAR and not operators <= _SCALAR_ENGINE_OPS:
            continue
        reachable = all(
            memory_of(getattr(op, role).type) in (ENGINE_WRITES if role in written else ENGINE_READS)[engine]
            for role in op.present_roles()
        )
        if reachable and spec.engines >= {engine}:
            chosen.append(engine)
    return tuple(chosen)


def _signature(op: InstructionOp) -> tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], str]:
    """What copies of one instruction made by unrolling share: opcode, properties, buffer types, location."""
    properties = tuple(sorted((name, str(attr)) for name, attr in op.properties.items()))
    types = tuple(str(getattr(op, role).type) for role in op.present_roles())
    return (op.name, properties, types, str(op.location))


def _writes(op: Operation, buffer: SSAValue) -> bool:
    if not isinstance(op, InstructionOp):
        return False
    written = set(op.spec().writes + op.spec().optional_writes)
    return any(getattr(op, role) is buffer for role in op.present_roles() if role in written)


def _is_psum_evacuation(op: InstructionOp) -> bool:
    """A copy of a PSUM tile into an SBUF buffer of its own, at a static place: what frees an accumulator's bank
    for the next matmuls (an insert into a panel writes a window of a buffer that other copies write too)."""
    if not isinstance(op, neuron.TensorCopyOp) or op.dst_offset is not None:
        return False
    source, destination = op.src.type, op.dst.type
    assert isinstance(source, MemRefType)
    assert isinstance(destination, MemRefType)
    if memory_of(source) is not Memory.PSUM or memory_of(destination) is not Memory.SBUF:
        return False
    return not any(use.operation is not op and _writes(use.operation, op.dst) for use in op.dst.uses)


def _balance(block: Block, target: Target, spread_evacuations: bool) -> None:
    load = {Engine.VECTOR: 0.0, Engine.SCALAR: 0.0, Engine.GPSIMD: 0.0}
    # Copies of one instruction (tile-level unrolling) move together: engines are in-order queues, so copies
    # spread over different engines would make each copy's chain wait behind the previous copy's. PSUM
    # evacuations may be the exception (module docstring): each ends its own chain (matmuls into a bank, then
    # the copy), so alternate ones can drain side by side.
    classes: dict[object, list[InstructionOp]] = {}
    evacuations: dict[object, int] = {}
    for op in block.ops:
        if not isinstance(op, InstructionOp) or op.engine_kind not in load:
            continue
        if _alternatives(op):
            key: object = _signature(op)
            if spread_evacuations and _is_psum_evacuation(op):
                count = evacuations[key] = evacuations.get(key, 0) + 1
                key = (key, count % 2)
            classes.setdefault(key, []).append(op)
        else:
            load[op.engine_kind] += cost_ns(op, op.engine_kind, target)
    movable = []
    for position, members in enumerate(classes.values()):
        costs = {engine: len(members) * cost_ns(members[0], engine, target) for engine in _alternatives(members[0])}
        costs[Engine.VECTOR] = len(members) * cost_ns(members[0], Engine.VECTOR, target)
        # Among equal costs, evacuation halves are placed from the block's last to its first: the last
        # accumulator is ready last and the block ends when its copy does, so its half gets the engine that
        # finishes it soonest, and the other half, ready sooner, takes what is left.
        order = -position if spread_evacuations and _is_psum_evacuation(members[0]) else position
        movable.append((costs[Engine.VECTOR], order, members, costs))
    movable.sort(key=lambda item: (-item[0], item[1]))
    for own, _, members, costs in movable:
        best, finish = Engine.VECTOR, load[Engine.VECTOR] + own
        for engine, cost in costs.items():
            if load[engine] + cost < finish:
                best, finish = engine, load[engine] + cost
        load[best] = finish
        for op in members:
            if best is not op.engine_kind:
                op.properties["engine"] = EngineAttr(best)


def _merge_scalar_tensor_pairs(block: Block) -> None:
    """Each VectorE tensor_tensor fed by a tensor_scalar alone becomes one scalar_tensor_tensor (module docstring)."""
    for op in list(block.ops):
        if isinstance(op, neuron.TensorTensorOp) and op.parent is not None and op.engine_kind is Engine.VECTOR:
            fused = fuse_scalar_tensor_tensor(op)
            if fused is not None:
                forward_into_copy_reader(fused)


def _trips(loop: scf.ForOp) -> int:
    """A loop's trip count when its bounds are constants, else 1."""
    bounds = [value.owner for value in (loop.lb, loop.ub, loop.step)]
    if not all(isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr) for owner in bounds):
        return 1
    lower, upper, step = (owner.value.value.data for owner in bounds)  # type: ignore[union-attr]
    return max(0, -(-(upper - lower) // step)) if step > 0 else 1


def engine_totals(function: func.FuncOp, target: Target) -> dict[Engine, float]:
    """Each compute engine's time over a whole run of `function` (every instruction times its loops' trips)."""
    totals = {Engine.TENSOR: 0.0, Engine.VECTOR: 0.0, Engine.SCALAR: 0.0, Engine.GPSIMD: 0.0}
    for op in function.body.walk():
        if not isinstance(op, InstructionOp) or op.engine_kind not in totals:
            continue
        trips, parent = 1, op.parent_op()
        while parent is not None and parent is not function:
            if isinstance(parent, scf.ForOp):
                trips *= _trips(parent)
            parent = parent.parent_op()
        totals[op.engine_kind] += trips * cost_ns(op, op.engine_kind, target)
    return totals


def _blocks(function: func.FuncOp) -> list[Block]:
    blocks = [function.body.block]
    for op in function.body.walk():
        for region in op.regions:
            blocks.extend(region.blocks)
    return blocks


@dataclass(frozen=True)
class NeuronBalanceEnginesPass(ModulePass):
    name = "neuron-balance-engines"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = neuron.target_of(op)
        for function in defined_functions(op):
            totals = engine_totals(function, target)
            spread_evacuations = totals[Engine.TENSOR] >= max(totals.values())  # TensorE sets the pace
            for block in _blocks(function):
                _balance(block, target, spread_evacuations)
                _merge_scalar_tensor_pairs(block)
