"""Signed index division at both levels that execute it: the structured interpreter (tile and torch levels' loop
glue) and the neuron level's register program (`build_program`, what a bundle runs).

MLIR defines arith.divsi and arith.remsi as rounding toward zero (C's `/` and `%`) and arith.floordivsi toward
negative infinity; the register ALU's floordiv and rem round toward negative infinity (`runtime.isa`, as NKI's
floor_divide and mod). Every sign combination must give MLIR's answer on both levels, whether the builder folds
the arithmetic or emits it as register operations.
"""

from __future__ import annotations

import itertools

import pytest
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.semantics.neuron import ProgramBuildError, build_program, run_neuron_function
from neuron_mlir.ir.semantics.structured import InterpretationError, StructuredInterpreter
from neuron_mlir.runtime import isa
from neuron_mlir.runtime.validate import validate_program

# (dividend, divisor) with every sign combination, exact and inexact quotients, and magnitudes beyond 2^53
# (where a quotient computed through a float would be wrong)
PAIRS = [
    (a, b)
    for a, b in itertools.product([7, -7, 6, -6, 0, 1, -1, 2**60 + 1, -(2**60) - 1], [3, -3, 1, -1, 2**31 - 1])
]


def _c_division(a: int, b: int) -> tuple[int, int]:
    """C's (and MLIR's divsi/remsi) quotient and remainder, by the definition: |q| = |a| // |b|, a = q*b + r."""
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return quotient, a - quotient * b


def _parse(text: str):
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


@pytest.mark.parametrize(("a", "b"), PAIRS)
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
    assert (quotient, remainder) == _c_division(a, b)
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


def test_register_alu_floor_forms_follow_the_divisor() -> None:
    # the hardware's floor division and mod: the remainder takes the divisor's sign
    assert [isa.scalar_op("rem", a, b) for a, b in [(7, 3), (-7, 3), (7, -3), (-7, -3)]] == [1, 2, -2, -1]
    assert [isa.scalar_op("floordiv", a, b) for a, b in [(7, 3), (-7, 3), (7, -3), (-7, -3)]] == [2, -3, -3, 2]


_SBUF = "memref<1x1xi32, #neuron.mem<sbuf>>"
_OUT = "memref<3xi32, #neuron.mem<hbm>>"


def _register_program(a: int, b: int, dynamic: bool) -> str:
    """divsi, remsi and floordivsi of a and b written by iota (its base from a register) to three outputs.

    `dynamic`: a and b come from loop inductions (one trip each, from a to a + 1), so the builder cannot fold
    them and the program divides on the register ALU; otherwise they are constants and the builder folds."""
    if dynamic:
        operands = f"""
          %a0 = arith.constant {a} : index
          %a1 = arith.constant {a + 1} : index
          %b0 = arith.constant {b} : index
          %b1 = arith.constant {b + 1} : index
          scf.for %a = %a0 to %a1 step %one {{
          scf.for %b = %b0 to %b1 step %one {{"""
        close = "}\n}"
    else:
        operands = f"""
          %a = arith.constant {a} : index
          %b = arith.constant {b} : index"""
        close = ""
    stores = []
    for index, name in enumerate(["divsi", "remsi", "floordivsi"]):
        stores.append(f"""
          %v{index} = arith.{name} %a, %b : index
          neuron.iota gpsimd dst %t[0:1, 0, [[1, 1]]], base %v{index} {{pattern = array<i64: 1, 1>}} : {_SBUF}
          neuron.dma_copy dma dst %out[{index}, [[1, 1]]], src %t[0:1, 0, [[1, 1]]] {{queue = {index} : i64}} : {_OUT}, {_SBUF}""")
    return f"""
        func.func @main() -> {_OUT} {{
          %one = arith.constant 1 : index
          %out = neuron.alloc : {_OUT}
          %t = neuron.alloc : {_SBUF}
          {operands}
          {"".join(stores)}
          {close}
          func.return %out : {_OUT}
        }}
        """


# registers are 32-bit: operands within int32 whose quotient and remainder are too
REGISTER_PAIRS = [(a, b) for a, b in PAIRS if abs(a) < 2**31 and abs(b) < 2**31 - 1]


@pytest.mark.parametrize("dynamic", [False, True], ids=["folded", "registers"])
@pytest.mark.parametrize(("a", "b"), REGISTER_PAIRS)
def test_neuron_register_program_divides_as_mlir_defines(a: int, b: int, dynamic: bool) -> None:
    module = _parse(_register_program(a, b, dynamic))
    (out,) = run_neuron_function(module, [])
    assert out.tolist() == [*_c_division(a, b), a // b]


def test_a_loop_induction_remainder_keeps_its_range_in_the_validator() -> None:
    """`i mod 4` of an induction counting up from 0: the truncation's correction folds to 0 in the validator's
    register ranges, so an access offset by the remainder is proven inside its buffer."""
    module = _parse(
        f"""
        func.func @main() -> memref<4xi32, #neuron.mem<hbm>> {{
          %zero = arith.constant 0 : index
          %one = arith.constant 1 : index
          %four = arith.constant 4 : index
          %nine = arith.constant 9 : index
          %out = neuron.alloc : memref<4xi32, #neuron.mem<hbm>>
          %t = neuron.alloc : {_SBUF}
          scf.for %i = %zero to %nine step %one {{
            %r = arith.remsi %i, %four : index
            neuron.iota gpsimd dst %t[0:1, 0, [[1, 1]]], base %i {{pattern = array<i64: 1, 1>}} : {_SBUF}
            neuron.dma_copy dma dst %out[%r + 0, [[1, 1]]], src %t[0:1, 0, [[1, 1]]] {{queue = 0 : i64}} : memref<4xi32, #neuron.mem<hbm>>, {_SBUF}
          }}
          func.return %out : memref<4xi32, #neuron.mem<hbm>>
        }}
        """
    )
    validate_program(build_program(module))
    (out,) = run_neuron_function(module, [])
    assert out.tolist() == [8, 5, 6, 7]


def test_a_constant_division_by_zero_is_named() -> None:
    module = _parse(_register_program(5, 0, dynamic=False).replace("arith.divsi %a, %b : index",
                                                                    'arith.divsi %a, %b : index loc("m.py":3:1)'))
    with pytest.raises(ProgramBuildError, match=r"arith.divsi divides by a zero constant \(at m.py:3"):
        build_program(module)

