"""Signed index division in the structured interpreter, the loop glue of the torch and tile levels' semantics.

MLIR defines arith.divsi and arith.remsi as rounding toward zero (C's `/` and `%`) and arith.floordivsi toward
negative infinity; every sign combination must give MLIR's answer (`support.division`). The neuron level's
register program is tested against the same pairs in test/backend_trn/test_translate.py.
"""

from __future__ import annotations

import pytest
from support.division import DIVISION_PAIRS, c_division
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.semantics.structured import InterpretationError, StructuredInterpreter


def _parse(text: str):
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


@pytest.mark.parametrize(("a", "b"), DIVISION_PAIRS)
def test_structured_interpreter_divides_as_mlir_defines(a: int, b: int) -> None:
    module = _parse(
        """
        func.func @main(%a: index, %b: index) -> (index, index, index) {
          %q = arith.divsi %a, %b : index
          %r = arith.remsi %a, %b : index
          %f = arith.floordivsi %a, %b : index
          func.return %q, %r, %f : index, index, index
        }
        """
    )
    quotient, remainder, floored = StructuredInterpreter({}).run_function(module, [a, b])
    assert (quotient, remainder) == c_division(a, b)
    assert floored == a // b


def test_structured_interpreter_names_a_division_by_zero() -> None:
    module = _parse(
        """
        func.func @main(%a: index, %b: index) -> index {
          %r = arith.remsi %a, %b : index loc("model.py":12:4)
          func.return %r : index
        }
        """
    )
    with pytest.raises(InterpretationError, match=r"arith.remsi: division by zero .*model.py:12"):
        StructuredInterpreter({}).run_function(module, [5, 0])
