"""What the passes share of the IR: here, loading a row tile again at other rows, and the range of an index."""

from __future__ import annotations

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import tile
from neuron_mlir.lowering.ir_queries import block_positions, clone_load_at_row, index_interval
from neuron_mlir.lowering.loop_nests import LoopNestBuilder

_FUNCTION = """
func.func @rows(%x: memref<256x8x300xf32, #mem<hbm>>, %y: memref<256x8x300xf32, #mem<hbm>>, %i: index) -> !tile.tile<37x300xf32, sbuf> {
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%i, %c2, %c0] {dims = array<i64: 0, 2>} : memref<256x8x300xf32, #mem<hbm>> -> !tile.tile<37x300xf32, sbuf> loc("model.py":3:1)
  func.return %t : !tile.tile<37x300xf32, sbuf>
}
"""


def test_a_load_cloned_at_another_row_keeps_everything_but_its_row_index() -> None:
    module = Parser(make_context(), _FUNCTION).parse_module()
    assert isinstance(module, ModuleOp)
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = function.body.block
    load = next(op for op in block.ops if isinstance(op, tile.LoadOp))
    row = block.args[2]  # %i
    source = block.args[0]
    mapping: dict[SSAValue, SSAValue] = {}
    builder = LoopNestBuilder(block, block.last_op, function.location)
    clone_load_at_row(load, [row], builder, mapping)

    clone = mapping[load.result].owner
    assert isinstance(clone, tile.LoadOp)
    assert clone is not load
    assert clone.next_op is block.last_op  # inserted where the builder stands
    assert list(clone.indices) == [row, *load.indices[1:]]
    assert clone.source is source
    assert clone.result.type == load.result.type
    assert clone.dims is not None
    assert tuple(clone.dims.get_values()) == (0, 2)
    assert clone.location == load.location
    # a source the mapping renames is read renamed
    other = block.args[1]
    renamed: dict[SSAValue, SSAValue] = {source: other}
    clone_load_at_row(load, [row], builder, renamed)
    renamed_clone = renamed[load.result].owner
    assert isinstance(renamed_clone, tile.LoadOp)
    assert renamed_clone.source is other


_BOUNDS = """
func.func @guards(%n: index) {
  %c1 = arith.constant 1 : index
  %c127 = arith.constant 127 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %rounded = arith.addi %n, %c127 : index
  %tiles = arith.floordivsi %rounded, %c128 : index
  %end = arith.muli %tiles, %c128 : index
  %second = arith.minsi %end, %c256 : index
  %at_least = arith.maxsi %end, %c256 : index
  func.return
}
"""


def test_index_intervals_follow_minimum_and_maximum() -> None:
    # the guard of a short loop's second copy ends at min(ceil(n / 128) * 128, 256): for n in 1..512, 128..256
    module = Parser(make_context(), _BOUNDS).parse_module()
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    n = function.body.block.args[0]
    values = {op.results[0].name_hint: op.results[0] for op in function.body.block.ops if op.results}
    known: dict[SSAValue, tuple[int, int]] = {n: (1, 512)}
    assert index_interval(values["end"], known) == (128, 512)
    assert index_interval(values["second"], known) == (128, 256)
    assert index_interval(values["at_least"], known) == (256, 512)


def test_block_positions_are_the_indices_of_the_ops_asked_for() -> None:
    module = Parser(make_context(), _FUNCTION).parse_module()
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = function.body.block
    ops = list(block.ops)
    assert block_positions(block, [ops[3], ops[1]]) == {ops[3]: 3, ops[1]: 1}
    assert block_positions(block, []) == {}
    nested = next(op for op in module.ops if isinstance(op, func.FuncOp))  # not directly in the function's body
    with pytest.raises(ValueError, match="not directly in the block"):
        block_positions(block, [ops[0], nested])
