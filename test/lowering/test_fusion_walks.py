"""How the fusion passes walk a function: the order allocations are offered in, and marks set and dropped."""

from __future__ import annotations

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.lowering.fusion_walks import FUSE, fuse_at_allocations, mark_fusions

_ALLOCATIONS = """
func.func @f() {
  %a = memref.alloc() {name = "a"} : memref<4xf32>
  %b = memref.alloc() {name = "b"} : memref<4xf32>
  %c = memref.alloc() {name = "c"} : memref<4xf32>
  %d = memref.alloc() {name = "d"} : memref<4xf32>
  scf.execute_region {
    %nested = memref.alloc() {name = "nested"} : memref<4xf32>
    scf.yield
  }
  func.return
}
"""


def _function(source: str) -> func.FuncOp:
    module = Parser(make_context(), source).parse_module()
    assert isinstance(module, ModuleOp)
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def _name(value: SSAValue) -> str:
    assert isinstance(value.owner, Operation)
    name = value.owner.attributes["name"]
    assert isinstance(name, StringAttr)
    return name.data


def test_allocations_are_offered_in_block_order_a_fused_result_next_an_erased_one_never() -> None:
    function = _function(_ALLOCATIONS)
    block = function.body.block
    by_name = {_name(op.memref): op for op in block.ops if isinstance(op, memref.AllocOp)}
    offered: list[str] = []

    def match(value: SSAValue, body: Block) -> str | None:
        assert body is block
        offered.append(_name(value))
        return _name(value) if _name(value) == "a" else None

    def fuse(matched: str, body: Block) -> SSAValue:
        by_name["b"].detach()  # the fusion erases b and makes d a product like a
        by_name["b"].erase()
        return by_name["d"].memref

    assert fuse_at_allocations(function, match, fuse) == 1
    # d comes right after a, and again in its own place; the nested allocation is not in the body's block
    assert offered == ["a", "d", "c", "d"]


_MARKS = """
func.func @f() {
  %0 = memref.alloc() {name = "chosen"} : memref<4xf32>
  %1 = memref.alloc() {name = "other", neuron.fuse = "columns"} : memref<4xf32>
  scf.execute_region {
    %2 = memref.alloc() {name = "stale", neuron.fuse = "rows"} : memref<4xf32>
    scf.yield
  }
  func.return
}
"""


def test_marks_go_on_the_chosen_ops_and_off_the_others_and_another_fusion_keeps_its_own() -> None:
    function = _function(_MARKS)
    ops = {_name(op.memref): op for op in function.body.walk() if isinstance(op, memref.AllocOp)}

    assert mark_fusions(function, "rows", lambda op: op is ops["chosen"]) == 1
    assert ops["chosen"].attributes[FUSE] == StringAttr("rows")
    assert FUSE not in ops["stale"].attributes
    assert ops["other"].attributes[FUSE] == StringAttr("columns")
