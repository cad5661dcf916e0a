"""`verify_module` checks each distinct op once, and still refuses every op `module.verify()` refuses."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir import verification
from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.verification import shared_verification, verify_module
from neuron_mlir.runtime import isa

_COPIES = """
builtin.module attributes {{neuron.target = #neuron.target<{target}>}} {{
  func.func @copies() {{
    %d = neuron.alloc {{address = 0 : i64}} : memref<37x512xf32, #mem<sbuf>>
    %p = neuron.alloc {{address = 0 : i64}} : memref<37x512xf32, #mem<psum>>
    %e = neuron.alloc {{address = 2048 : i64}} : memref<37x512xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %d[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[1, 512]]] : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
    neuron.tensor_copy vector dst %d[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[1, 512]]] : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
    neuron.tensor_copy vector dst %e[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[1, 512]]] : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
    neuron.tensor_copy {engine} dst %e[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[1, 512]]] : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
    func.return
  }}
}}
"""


def _module_text(engine: str, target: str) -> str:
    return _COPIES.format(engine=engine, target=target)


def _module(engine: str = "vector", target: str = "trn2") -> ModuleOp:
    return Parser(make_context(), _module_text(engine, target)).parse_module()


def _checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The opcodes `isa.check_instruction` is asked about, in order."""
    asked: list[str] = []
    check = isa.check_instruction

    def counted(opcode: str, *args: object) -> None:
        asked.append(opcode)
        check(opcode, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(isa, "check_instruction", counted)
    return asked


def test_equal_instructions_are_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _module()
    asked = _checks(monkeypatch)
    verify_module(module)
    # four copies: the second equals the first in everything verified; the third and fourth access a buffer at
    # another address, which a copy's rules do not read (after allocation every buffer has its own)
    assert asked == ["tensor_copy"]
    asked.clear()
    module.verify()  # outside verify_module every op is checked
    assert asked == ["tensor_copy"] * 4


_MATMULS = """
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmuls() {
    %p = neuron.alloc {address = 0 : i64} : memref<37x512xf32, #mem<psum>>
    %q = neuron.alloc {address = 1024 : i64} : memref<37x512xf32, #mem<psum>>
    %s = neuron.alloc {address = 0 : i64} : memref<128x37xf32, #mem<sbuf>>
    %m = neuron.alloc {address = 256 : i64} : memref<128x512xf32, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    neuron.nc_matmul tensor dst %q[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    func.return
  }
}
"""


def test_instructions_whose_rules_read_addresses_are_told_apart_by_them() -> None:
    # the second matmul equals the first but for its PSUM tile's address, where its rows cross a bank
    assert "nc_matmul" in isa.READS_ADDRESSES
    module = Parser(make_context(), _MATMULS).parse_module()
    with pytest.raises(VerifyException, match="cross a 2048-byte PSUM bank boundary"):
        verify_module(module)


def test_an_invalid_op_among_equal_valid_ones_is_refused() -> None:
    module = _module(engine="gpsimd")  # the last copy: GpSimdE cannot read PSUM
    with pytest.raises(VerifyException, match="the gpsimd engine cannot read PSUM"):
        verify_module(module)


def test_an_op_changed_after_a_verification_is_checked_again() -> None:
    module = _module()
    verify_module(module)
    alloc = next(op for op in module.walk() if isinstance(op, neuron.AllocOp))
    alloc.address = IntegerAttr(1 << 30, i64)  # beyond SBUF: equal to nothing verified before
    with pytest.raises(VerifyException, match="does not fit"):
        verify_module(module)


def test_the_target_is_part_of_what_is_verified() -> None:
    # 200 KiB per partition fits trn2's SBUF, not trn1's: an op equal to one that passed on trn2 is checked on trn1
    def module(target: str) -> ModuleOp:
        text = _module_text("vector", target).replace("37x512xf32, #mem<sbuf>", "37x51200xf32, #mem<sbuf>")
        return Parser(make_context(), text).parse_module()

    with shared_verification():
        module("trn2").verify()
        with pytest.raises(VerifyException, match="exceed SBUF capacity"):
            module("trn1").verify()


def test_numbered_instructions_share_a_check_but_not_a_missing_id(monkeypatch: pytest.MonkeyPatch) -> None:
    # neuron-insert-sync gives every instruction its own id and waits: they do not make its rules differ
    copy = "neuron.tensor_copy vector dst %d[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[1, 512]]] {{{numbers}}} : "
    copy += "memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>"
    numbered = [copy.format(numbers=f"id = {n} : i64, waits = array<i64: {n - 1}>") for n in (1, 2, 3)]

    def module(last: str) -> ModuleOp:
        body = "\n    ".join([*numbered, last])
        text = (
            _module_text("vector", "trn2").split("    neuron.tensor_copy")[0] + f"    {body}\n    func.return\n  }}\n}}"
        )
        return Parser(make_context(), text).parse_module()

    asked = _checks(monkeypatch)
    verify_module(module(copy.format(numbers="id = 4 : i64")))
    assert asked == ["tensor_copy", "tensor_copy"]  # with waits, then without
    with pytest.raises(VerifyException, match="an instruction with `waits` needs an `id`"):
        verify_module(module(copy.format(numbers="waits = array<i64: 3>")))


def test_a_call_that_stops_looking_up_keys_still_checks_every_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verification, "_TRIAL", 2)
    # the first two copies differ (their patterns): the lookups miss, then two equal copies and a refused one
    text = _module_text("gpsimd", "trn2").replace("[[1, 512]]", "[[1, 256]]", 2)
    copy = text.split("\n")[7]
    module = Parser(make_context(), text.replace(copy, copy + "\n" + copy)).parse_module()
    asked = _checks(monkeypatch)
    with pytest.raises(VerifyException, match="the gpsimd engine cannot read PSUM"):
        verify_module(module)
    assert asked == ["tensor_copy"] * 5  # no longer looked up: the equal copies are checked too


def test_each_key_function_decides_alone_whether_to_look_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # three allocs at distinct keys (after allocation every buffer has its own address) stop the allocs' lookups,
    # not the instructions': the equal copies are still checked once
    monkeypatch.setattr(verification, "_TRIAL", 2)
    module = _module()
    asked = _checks(monkeypatch)
    verify_module(module)
    assert asked == ["tensor_copy"]
