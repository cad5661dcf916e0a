"""neuron-opt's diagnostics: where an op is reported when it was written in the input, and when a pass made it."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i32

from neuron_mlir.ir.locations import source_location
from neuron_mlir.tools.neuron_opt import NeuronOptMain

SOURCE = """\
func.func @main(%x: i32) -> i32 {
  %y = arith.addi %x, %x : i32
  func.return %y : i32
}
"""


@pytest.fixture
def main(tmp_path):
    path = tmp_path / "input.mlir"
    path.write_text(SOURCE)
    tool = NeuronOptMain(args=[str(path)])
    with path.open("rb") as stream:
        module = tool.parse_chunk(stream, "mlir")
    assert module is not None
    return tool, module, str(path)


def test_an_op_of_the_input_is_reported_at_its_position(main) -> None:
    tool, module, path = main
    add = next(op for op in module.walk() if isinstance(op, arith.AddiOp))
    assert tool.located(add, "arith.addi: a rule") == (
        f"{path}:2:3: error: arith.addi: a rule\n  %y = arith.addi %x, %x : i32\n  ^"
    )
    # its source location, when it has one, follows the rule
    add.location = source_location("model.py", 7, 3, "model.head")
    assert tool.located(add, "arith.addi: a rule").startswith(
        f"{path}:2:3: error: arith.addi: a rule (at model.py:7 (model.head))\n"
    )


def test_an_op_a_pass_created_is_reported_at_its_location_and_shown(main) -> None:
    tool, _module, path = main
    created = arith.ConstantOp(IntegerAttr(1, i32))
    created.location = source_location("model.py", 7, 3, "model.head")
    assert tool.located(created, "arith.constant: a rule") == (
        "model.py:7:3: error: arith.constant: a rule\n%0 = arith.constant 1 : i32"
    )
    unplaced = arith.ConstantOp(IntegerAttr(2, i32))
    assert tool.located(unplaced, "arith.constant: a rule") == (
        f"{path}: error: arith.constant: a rule\n%0 = arith.constant 2 : i32"
    )


def test_a_long_op_a_pass_created_is_shortened_to_its_first_and_last_lines(main) -> None:
    tool, module, path = main
    function = next(iter(module.ops)).clone()  # a new op: not written in the input
    body = function.regions[0].blocks[0]
    for _ in range(20):
        body.insert_op_before(arith.ConstantOp(IntegerAttr(0, i32)), body.first_op)
    lines = tool.located(function, "func.func: a rule").splitlines()
    assert lines == [f"{path}: error: func.func: a rule", "func.func @main(%x: i32) -> i32 {", "  ...", "}"]
