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
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Block
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import memory_of
from neuron_mlir.ir.dialects.neuron import EngineAttr, InstructionOp, element_type_name
from neuron_mlir.runtime import cost_model
from neuron_mlir.runtime.hardware import ENGINE_READS, ENGINE_WRITES, Engine, Target

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


def _balance(block: Block, target: Target) -> None:
    load = {Engine.VECTOR: 0.0, Engine.SCALAR: 0.0, Engine.GPSIMD: 0.0}
    # Copies of one instruction (tile-level unrolling) move together: engines are in-order queues, so copies
    # spread over different engines would make each copy's chain wait behind the previous copy's.
    classes: dict[tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], str], list[InstructionOp]] = {}
    for op in block.ops:
        if not isinstance(op, InstructionOp) or op.engine_kind not in load:
            continue
        if _alternatives(op):
            classes.setdefault(_signature(op), []).append(op)
        else:
            load[op.engine_kind] += cost_ns(op, op.engine_kind, target)
    movable = []
    for members in classes.values():
        costs = {engine: len(members) * cost_ns(members[0], engine, target) for engine in _alternatives(members[0])}
        costs[Engine.VECTOR] = len(members) * cost_ns(members[0], Engine.VECTOR, target)
        movable.append((costs[Engine.VECTOR], members, costs))
    movable.sort(key=lambda item: -item[0])
    for own, members, costs in movable:
        best, finish = Engine.VECTOR, load[Engine.VECTOR] + own
        for engine, cost in costs.items():
            if load[engine] + cost < finish:
                best, finish = engine, load[engine] + cost
        load[best] = finish
        for op in members:
            if best is not op.engine_kind:
                op.properties["engine"] = EngineAttr(best)


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
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            if function.is_declaration:
                continue
            for block in _blocks(function):
                _balance(block, target)
