"""The `mem` dialect's memory spaces (ir/dialects/memory.py): one attribute per runtime memory, both ways."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IntegerAttr, MemRefType, StringAttr, f32, i64
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects.memory import buffer_type, memory_of, memory_space
from neuron_mlir.runtime.hardware import Memory


@pytest.mark.parametrize("memory", list(Memory))
def test_each_memory_has_its_attribute_and_back(memory: Memory) -> None:
    attribute = memory_space(memory)
    assert attribute.memory is memory
    assert attribute == memory_space(memory.value)
    assert str(attribute) == f"#mem<{memory.value}>"
    assert memory_of(buffer_type((128, 4), f32, memory)) is memory


def test_a_memref_without_a_space_is_hbm() -> None:
    assert memory_of(MemRefType(f32, [4])) is Memory.HBM


def test_spaces_are_distinct() -> None:
    assert len({memory_space(memory) for memory in Memory}) == len(Memory)


@pytest.mark.parametrize("spelling", ["#mem<dram>", "#mem.dram"])
def test_an_unknown_space_is_a_parse_error_naming_the_known_ones(spelling: str) -> None:
    text = f"func.func @f(%x: memref<4xf32, {spelling}>) {{\n  func.return\n}}"
    with pytest.raises(ParseError, match=r"unknown memory space 'dram' \(expected hbm, sbuf or psum\)"):
        Parser(make_context(), text).parse_module()


def test_a_memref_of_another_space_is_hbm_and_a_non_memref_too() -> None:
    """Only the three `mem` spaces name a memory: a memref of another space (an integer, a string) is HBM, as is
    any type that is not a memref."""
    assert memory_of(MemRefType(f32, [4], memory_space=IntegerAttr(1, i64))) is Memory.HBM
    assert memory_of(MemRefType(f32, [4], memory_space=StringAttr("sbuf"))) is Memory.HBM
    assert memory_of(f32) is Memory.HBM
