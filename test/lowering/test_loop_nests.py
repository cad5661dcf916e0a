"""LoopNestBuilder's nests over several extents (lowering/loop_nests.py)."""

from __future__ import annotations

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.lowering.ir_queries import integer_constant
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder


def _builder() -> tuple[LoopNestBuilder, Block]:
    module = Parser(make_context(), "func.func @f() {\n  func.return\n}").parse_module()
    assert isinstance(module, ModuleOp)
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = function.body.block
    return LoopNestBuilder(block, block.last_op, function.location), block


def test_one_loop_per_extent_outermost_first_and_none_for_a_single_trip() -> None:
    builder, block = _builder()
    calls: list[tuple[LoopNestBuilder, list[Index]]] = []
    builder.for_each_index([2, 1, 3], lambda e, indices: calls.append((e, indices)))

    outer = next(op for op in block.ops if isinstance(op, scf.ForOp))
    assert integer_constant(outer.ub) == 2
    inner = next(op for op in outer.body.block.ops if isinstance(op, scf.ForOp))
    assert integer_constant(inner.ub) == 3
    assert not any(isinstance(op, scf.ForOp) for op in inner.body.block.ops)
    assert len(calls) == 1
    emitter, indices = calls[0]
    assert indices == [outer.body.block.args[0], 0, inner.body.block.args[0]]
    assert emitter.block is inner.body.block


def test_no_extents_call_the_body_once_in_place_and_an_empty_extent_never() -> None:
    builder, block = _builder()
    calls: list[list[Index]] = []
    builder.for_each_index([], lambda e, indices: calls.append(indices))
    assert calls == [[]]
    assert not any(isinstance(op, scf.ForOp) for op in block.ops)

    builder.for_each_index([0, 4], lambda e, indices: calls.append(indices))
    assert calls == [[]]
    assert not any(isinstance(op, scf.ForOp) for op in block.ops)
