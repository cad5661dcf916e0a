"""`InstructionOp.build_instruction` makes the op IRDL's generic builder makes: for every instruction class and
random choices of present roles, dynamic offsets, dynamic attributes and properties, the same operands, properties
(in the same order, the operand segment sizes last), results, regions and successors, and the same text. A required
role left out is refused as the generic builder refuses it."""

from __future__ import annotations

import io
import random

import pytest
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, f32, i64
from xdsl.ir import Block
from xdsl.printer import Printer

from neuron_mlir.ir.dialects.memory import memory_space
from neuron_mlir.ir.dialects.neuron import INSTRUCTION_OPS, AccessPatternAttr, EngineAttr, InstructionOp
from neuron_mlir.runtime.hardware import Engine, Memory


def _text(op: InstructionOp) -> str:
    stream = io.StringIO()
    Printer(stream=stream).print_op(op)
    return stream.getvalue()


def _arguments(cls: type[InstructionOp], rng: random.Random, block: Block) -> tuple[list, dict]:
    buffer, index = block.args
    spec = cls.spec()
    operands: list = []
    properties: dict = {"engine": rng.choice(list(Engine)).value}
    for role in cls.roles():
        required = role in spec.writes or role in spec.reads
        if required or rng.random() < 0.5:
            operands += [buffer, index if rng.random() < 0.3 else None]
            properties[f"{role}_ap"] = AccessPatternAttr([(1, rng.randint(1, 8))], rng.randint(0, 4), 0, 4)
        else:
            operands += [None, None]
    operands += [index if rng.random() < 0.5 else None for _ in cls.DYNAMIC_ATTRS]
    if rng.random() < 0.5:
        properties["queue"] = IntegerAttr(rng.randint(0, 3), i64)
    return operands, properties


@pytest.mark.parametrize("seed", range(3))
def test_every_instruction_is_built_as_the_generic_builder_builds_it(seed: int) -> None:
    rng = random.Random(seed)
    block = Block(arg_types=[MemRefType(f32, [4, 64], memory_space=memory_space(Memory.SBUF)), IndexType()])
    for cls in INSTRUCTION_OPS:
        operands, properties = _arguments(cls, rng, block)
        engine = Engine(properties.pop("engine"))
        accesses = {}
        position = 0
        for role in cls.roles():
            if operands[position] is not None:
                accesses[role] = (operands[position], properties.pop(f"{role}_ap"), operands[position + 1])
            position += 2
        dynamic = {
            name: value for name, value in zip(cls.DYNAMIC_ATTRS, operands[position:], strict=True) if value is not None
        }
        built = cls.build_instruction(engine, accesses, dict(properties), dynamic)
        generic_properties = {"engine": EngineAttr(engine), **properties}
        for role, (_, pattern, _) in accesses.items():
            generic_properties[f"{role}_ap"] = pattern
        generic = cls.build(operands=operands, properties=generic_properties)
        assert list(built.operands) == list(generic.operands), cls.name
        assert list(built.properties.items()) == list(generic.properties.items()), cls.name
        assert (list(built.results), built.regions, built.successors, built.attributes) == (
            list(generic.results),
            generic.regions,
            generic.successors,
            generic.attributes,
        )
        assert _text(built) == _text(generic)


def test_a_required_role_left_out_is_refused_as_the_generic_builder_refuses_it() -> None:
    block = Block(arg_types=[MemRefType(f32, [4, 64], memory_space=memory_space(Memory.SBUF)), IndexType()])
    cls = next(c for c in INSTRUCTION_OPS if c.spec().reads and c.spec().writes)
    role = cls.spec().writes[0]
    pattern = AccessPatternAttr([(1, 8)], 0, 0, 4)
    accesses = {r: (block.args[0], pattern, None) for r in cls.spec().reads}
    with pytest.raises(ValueError, match=f"non-variadic .* '{role}'"):
        cls.build_instruction(Engine.VECTOR, accesses)
