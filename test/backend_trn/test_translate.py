"""The translation of neuron IR into the runtime program (`backend_trn/translate.py`).

Signed index division first: MLIR's divsi and remsi round toward zero, while the register ALU's floordiv and rem
round toward negative infinity, so the translation builds the truncating forms from the floor forms. Every sign
combination must give MLIR's answer whether the translation folds the arithmetic or emits register operations
(`support.division` holds the pairs, shared with the structured interpreter's test in test/ir). Then the
translation's diagnostics and its memory bookkeeping for IR that is not yet allocated or synchronised.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.division import DIVISION_PAIRS, c_division
from xdsl.parser import Parser

from neuron_mlir.backend_trn.semantics import run_neuron_function
from neuron_mlir.backend_trn.translate import (
    ProgramBuildError,
    build_program,
    is_synchronised,
    memory_sizes_needed,
)
from neuron_mlir.ir.context import make_context
from neuron_mlir.runtime import isa
from neuron_mlir.runtime.hardware import get_target
from neuron_mlir.runtime.validate import validate_program


def _parse(text: str):
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def test_register_alu_floor_forms_follow_the_divisor() -> None:
    # the hardware's floor division and mod: the remainder takes the divisor's sign
    assert [isa.scalar_op("rem", a, b) for a, b in [(7, 3), (-7, 3), (7, -3), (-7, -3)]] == [1, 2, -2, -1]
    assert [isa.scalar_op("floordiv", a, b) for a, b in [(7, 3), (-7, 3), (7, -3), (-7, -3)]] == [2, -3, -3, 2]


_SBUF = "memref<1x1xi32, #mem<sbuf>>"
_OUT = "memref<3xi32, #mem<hbm>>"


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
REGISTER_PAIRS = [(a, b) for a, b in DIVISION_PAIRS if abs(a) < 2**31 and abs(b) < 2**31 - 1]


@pytest.mark.parametrize("dynamic", [False, True], ids=["folded", "registers"])
@pytest.mark.parametrize(("a", "b"), REGISTER_PAIRS)
def test_neuron_register_program_divides_as_mlir_defines(a: int, b: int, dynamic: bool) -> None:
    module = _parse(_register_program(a, b, dynamic))
    (out,) = run_neuron_function(module, [])
    assert out.tolist() == [*c_division(a, b), a // b]


def test_a_loop_induction_remainder_keeps_its_range_in_the_validator() -> None:
    """`i mod 4` of an induction counting up from 0: the truncation's correction folds to 0 in the validator's
    register ranges, so an access offset by the remainder is proven inside its buffer."""
    module = _parse(
        f"""
        func.func @main() -> memref<4xi32, #mem<hbm>> {{
          %zero = arith.constant 0 : index
          %one = arith.constant 1 : index
          %four = arith.constant 4 : index
          %nine = arith.constant 9 : index
          %out = neuron.alloc : memref<4xi32, #mem<hbm>>
          %t = neuron.alloc : {_SBUF}
          scf.for %i = %zero to %nine step %one {{
            %r = arith.remsi %i, %four : index
            neuron.iota gpsimd dst %t[0:1, 0, [[1, 1]]], base %i {{pattern = array<i64: 1, 1>}} : {_SBUF}
            neuron.dma_copy dma dst %out[%r + 0, [[1, 1]]], src %t[0:1, 0, [[1, 1]]] {{queue = 0 : i64}} : memref<4xi32, #mem<hbm>>, {_SBUF}
          }}
          func.return %out : memref<4xi32, #mem<hbm>>
        }}
        """
    )
    validate_program(build_program(module))
    (out,) = run_neuron_function(module, [])
    assert out.tolist() == [8, 5, 6, 7]


def test_a_constant_division_by_zero_is_named() -> None:
    module = _parse(
        _register_program(5, 0, dynamic=False).replace(
            "arith.divsi %a, %b : index", 'arith.divsi %a, %b : index loc("m.py":3:1)'
        )
    )
    with pytest.raises(ProgramBuildError, match=r"arith.divsi divides by a zero constant \(at m.py:3"):
        build_program(module)


_HBM = "memref<128x64xf32, #mem<hbm>>"


def _copy_through_sbuf(columns: int) -> str:
    """x -> SBUF tile `a` -> SBUF tile `b` -> out, both tiles `columns` wide and without addresses."""
    sbuf = f"memref<128x{columns}xf32, #mem<sbuf>>"
    return f"""
        func.func @main(%x: {_HBM}) -> {_HBM} {{
          %out = neuron.alloc : {_HBM}
          %a = neuron.alloc : {sbuf}
          %b = neuron.alloc : {sbuf}
          neuron.dma_copy dma dst %a[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {{queue = 0 : i64}} : {sbuf}, {_HBM}
          neuron.tensor_copy vector dst %b[0:128, 0, [[1, 64]]], src %a[0:128, 0, [[1, 64]]] : {sbuf}, {sbuf}
          neuron.dma_copy dma dst %out[0, [[64, 128], [1, 64]]], src %b[0:128, 0, [[1, 64]]] {{queue = 1 : i64}} : {_HBM}, {sbuf}
          func.return %out : {_HBM}
        }}
        """


def _input() -> np.ndarray:
    return np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def test_unallocated_ir_runs_in_the_target_memories_when_it_fits() -> None:
    program = build_program(_parse(_copy_through_sbuf(64)))
    assert memory_sizes_needed(program) is None
    assert not is_synchronised(program)
    (out,) = run_neuron_function(_parse(_copy_through_sbuf(64)), [_input()])
    np.testing.assert_array_equal(out, _input())


def test_unallocated_buffers_beyond_sbuf_grow_the_simulated_memory() -> None:
    sbuf_bytes = get_target("trn2").sbuf_bytes_per_partition
    columns = sbuf_bytes * 3 // 4 // 4  # two such f32 tiles side by side overflow a partition
    module = _parse(_copy_through_sbuf(columns))
    needed = memory_sizes_needed(build_program(module))
    assert needed is not None
    assert needed["sbuf"] >= 2 * columns * 4 > sbuf_bytes
    assert needed["psum"] == get_target("trn2").psum_bytes_per_partition
    (out,) = run_neuron_function(module, [_input()])
    np.testing.assert_array_equal(out, _input())


def test_a_bundle_program_requires_every_on_chip_address() -> None:
    with pytest.raises(ProgramBuildError, match="buffer a has no address: run neuron-allocate-memory first"):
        build_program(_parse(_copy_through_sbuf(64)), require_allocated=True)


def test_after_allocation_and_synchronisation_the_program_is_complete() -> None:
    from xdsl.context import Context

    from neuron_mlir.lowering.pipelines import pass_class

    module = _parse(_copy_through_sbuf(64))
    for name in ("neuron-allocate-memory", "neuron-insert-sync"):
        pass_class(name)().apply(Context(), module)
    program = build_program(module, require_allocated=True, compiler_version="1.2.3")
    validate_program(program)
    assert is_synchronised(program)
    assert program.compiler_version == "1.2.3"
    (out,) = run_neuron_function(module, [_input()])
    np.testing.assert_array_equal(out, _input())


def test_an_op_outside_the_neuron_level_is_named_with_its_source_line() -> None:
    module = _parse(
        """
        func.func @main() {
          %a = arith.constant 6 : index
          %b = arith.constant 3 : index
          %c = arith.andi %a, %b : index loc("model.py":7:1)
          func.return
        }
        """
    )
    with pytest.raises(ProgramBuildError, match=r"arith.andi is not a neuron instruction \(at model.py:7"):
        build_program(module)


def test_a_folded_condition_gives_a_bool_attribute() -> None:
    """An i1 register attribute whose condition folds (a loop copy's `trip != first` once unrolled) encodes as a
    bool, as the validator requires of `accumulate`."""
    module = _parse(
        """
func.func @main(%x: memref<128x64xf32, #mem<hbm>>) -> memref<64x64xf32, #mem<hbm>> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %first = arith.cmpi ne, %c0, %c0 : index
  %later = arith.cmpi ne, %c1, %c0 : index
  %out = neuron.alloc : memref<64x64xf32, #mem<hbm>>
  %s = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  %p = neuron.alloc : memref<64x64xf32, #mem<psum>>
  neuron.dma_copy dma dst %s[0:128, 0, [[1, 64]]], src %x[0, [[1, 8192]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 64]]], stationary %s[0:128, 0, [[1, 64]]], moving %s[0:128, 0, [[1, 64]]], accumulate %first : memref<64x64xf32, #mem<psum>>, memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 64]]], stationary %s[0:128, 0, [[1, 64]]], moving %s[0:128, 0, [[1, 64]]], accumulate %later : memref<64x64xf32, #mem<psum>>, memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  %y = neuron.alloc : memref<64x64xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %y[0:64, 0, [[1, 64]]], src %p[0:64, 0, [[1, 64]]] : memref<64x64xf32, #mem<sbuf>>, memref<64x64xf32, #mem<psum>>
  neuron.dma_copy dma dst %out[0, [[1, 4096]]], src %y[0:64, 0, [[1, 64]]] {queue = 0 : i64} : memref<64x64xf32, #mem<hbm>>, memref<64x64xf32, #mem<sbuf>>
  func.return %out : memref<64x64xf32, #mem<hbm>>
}
"""
    )
    program = build_program(module)
    flags = [i.attrs["accumulate"] for i in program.instructions() if i.opcode == "nc_matmul"]
    assert flags == [False, True]
    assert all(type(flag) is bool for flag in flags)
    validate_program(program, memory_sizes_needed(program))
