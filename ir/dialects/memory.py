"""The memory spaces of buffers, shared by the tile and neuron levels: `#mem<hbm>`, `#mem<sbuf>`, `#mem<psum>`.

A memref's memory space says where its bytes live. The tile level's tensors are HBM memrefs and its tiles name
SBUF or PSUM; the neuron level's buffers are memrefs in any of the three. Neither level owns the attribute, so
it lives in a dialect of its own whose name, `mem`, names no level.

The spelling is MLIR's opaque dialect-attribute syntax, `#<dialect><<body>>`: dialect `mem`, body the space's
keyword. xDSL reads `#mem<sbuf>` as the attribute named `mem.sbuf` and prints such attributes back the same way
(`OpaqueSyntaxAttribute`), so each space is one parameterless attribute class. `memory_space(memory)` gives the
attribute of a runtime `Memory`, and `memory_of(type)` the memory of a buffer type.

xDSL looks `#mem<dram>` up as the attribute `mem.dram` and, finding none, would only say that it is not
registered. The context of `ir/context.py` answers such a lookup with `unknown_memory_space`, whose parser
reports the rule instead: `unknown memory space 'dram' (expected hbm, sbuf or psum)`, at the token.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, Dialect, OpaqueSyntaxAttribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from neuron_mlir.runtime.hardware import Memory


class MemorySpaceAttr(ParametrizedAttribute, OpaqueSyntaxAttribute):
    """Where a buffer lives: one subclass per memory, spelled `#mem<keyword>`."""

    MEMORY: ClassVar[Memory]

    @property
    def memory(self) -> Memory:
        return self.MEMORY

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        # the keyword is the whole body: anything after it is the parser's error at that token
        return ()

    def print_parameters(self, printer: Printer) -> None:
        return


@irdl_attr_definition
class HbmSpaceAttr(MemorySpaceAttr):
    """Device memory (HBM): function arguments and results, and scratch tensors."""

    name = "mem.hbm"
    MEMORY: ClassVar[Memory] = Memory.HBM


@irdl_attr_definition
class SbufSpaceAttr(MemorySpaceAttr):
    """The state buffer (SBUF): on-chip, addressed by partition and byte within the partition."""

    name = "mem.sbuf"
    MEMORY: ClassVar[Memory] = Memory.SBUF


@irdl_attr_definition
class PsumSpaceAttr(MemorySpaceAttr):
    """The partial-sum buffer (PSUM): on-chip, where TensorE accumulates."""

    name = "mem.psum"
    MEMORY: ClassVar[Memory] = Memory.PSUM


_SPACES: dict[Memory, type[MemorySpaceAttr]] = {
    space.MEMORY: space for space in (HbmSpaceAttr, SbufSpaceAttr, PsumSpaceAttr)
}


_MEMORY_OF_SPACE: dict[type[Attribute], Memory] = {space: memory for memory, space in _SPACES.items()}


# One attribute per memory (attributes are immutable values), found by the memory or its name: the passes ask for
# one per tile type and buffer they make, and making it (the enum's lookup by value, the attribute's verification)
# cost more than the rest of the call.
_SPACE_ATTRS: dict[Memory | str, MemorySpaceAttr] = {}


def memory_space(memory: Memory | str) -> MemorySpaceAttr:
    """The attribute of `memory`: `#mem<hbm>`, `#mem<sbuf>` or `#mem<psum>`."""
    attr = _SPACE_ATTRS.get(memory)
    if attr is None:
        attr = _SPACE_ATTRS[memory] = _SPACES[Memory(memory)]()
    return attr


def memory_of(buffer_type: Attribute) -> Memory:
    """The memory of a buffer type; memrefs without a `#mem<...>` space are HBM."""
    # the passes ask this of every access they look at: a memref of one of the three spaces is answered by the
    # classes themselves (attribute classes are ABCs, whose `isinstance` costs more than the rest of the call)
    if type(buffer_type) is MemRefType:
        known = _MEMORY_OF_SPACE.get(type(buffer_type.memory_space))
        if known is not None:
            return known
    if isinstance(buffer_type, MemRefType) and isinstance(buffer_type.memory_space, MemorySpaceAttr):
        return buffer_type.memory_space.memory
    return Memory.HBM


def buffer_type(shape: Sequence[int], element_type: Attribute, memory: Memory) -> MemRefType:
    """`memref<shape x element_type, #mem<memory>>`, made once per distinct value (attributes are immutable, and
    building and verifying a memref type cost a lowering more than the op that uses it)."""
    return _buffer_type(tuple(int(extent) for extent in shape), element_type, Memory(memory))


@functools.lru_cache(maxsize=1 << 14)
def _buffer_type(shape: tuple[int, ...], element_type: Attribute, memory: Memory) -> MemRefType:
    return MemRefType(element_type, shape, memory_space=memory_space(memory))


def unknown_memory_space(attribute_name: str) -> type[ParametrizedAttribute]:
    """An attribute class for the unknown space `attribute_name` (`mem.<keyword>`) whose parsing fails, naming
    the keyword and the spaces there are. It is never instantiated."""
    keyword = attribute_name.removeprefix(f"{Mem.name}.")
    names = [memory.value for memory in _SPACES]
    expected = f"{', '.join(names[:-1])} or {names[-1]}"

    class UnknownMemorySpace(ParametrizedAttribute):
        name = attribute_name

        @classmethod
        def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
            parser.raise_error(f"unknown memory space '{keyword}' (expected {expected})")

    return UnknownMemorySpace


Mem = Dialect("mem", [], [HbmSpaceAttr, SbufSpaceAttr, PsumSpaceAttr])
