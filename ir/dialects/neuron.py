"""The neuron dialect: one op is one NeuronCore instruction on explicit SBUF, PSUM and HBM buffers.

Buffers are builtin memrefs whose memory space is `#mem<hbm|sbuf|psum>` (the `mem` dialect the tile level
shares, `ir/dialects/memory.py`). An SBUF or PSUM memref is `memref<P x F... x T>`: its first dimension is the
partition axis (at most 128), the rest is laid out row-major inside each partition. HBM memrefs are ordinary
row-major arrays (the function's arguments and results, and `neuron.alloc`ated scratch).

Every instruction names its operands by role (`dst`, `src`, `stationary`, ...), each an access into a buffer:

    %buf[0:128, 0, [[1, 512]]]             SBUF/PSUM: partitions 0..127, element offset 0, free pattern
    %x[%off + 300, [[300, 37], [1, 300]]]  HBM: dynamic + static element offset, then (step, num) per dimension

Steps and offsets count elements of the buffer's type; `runtime/program.py` defines the addressing exactly,
and `runtime/isa.py` each opcode's semantics. The op set, roles and attributes mirror that table one to one, so
the neuron dialect's reference semantics are the runtime's: the program the backend translates it to
(`backend_trn/translate.py`), run on the simulator.

Verifiers check the syntax's own rules here (accesses inside their buffers, an HBM access without partitions,
an immediate or a register for an attribute, not both) and the hardware's rules for the module's target
(`neuron.target = #neuron.target<trn2>` on the module; trn2 when absent) through `runtime.isa.check_instruction`,
the instruction set's one statement of them, which the bundle validator calls too: engines, partition counts and
start partitions, which engine may read or write which memory, matmul tile limits, PSUM banks, dtypes.

After `neuron-allocate-memory` every `neuron.alloc` carries its `address`; after `neuron-insert-sync` every
instruction has an `id` and the `waits` that order it after producers on other queues.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StridedLayoutAttr,
    StringAttr,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, SSAValue
from xdsl.irdl import (
    AttrConstraint,
    AttrSizedOperandSegments,
    IRDLOperation,
    OptionalDef,
    ParsePropInAttrDict,
    VariadicDef,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    irdl_to_attr_constraint,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import MemoryAllocEffect, Pure
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir.dialects.memory import MemorySpaceAttr, memory_of
from neuron_mlir.ir.locations import at_source
from neuron_mlir.ir.op_init import init_op
from neuron_mlir.ir.verification import memoized_verify, value_key
from neuron_mlir.runtime import hardware, isa
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.program import AttrValue

# ----------------------------------------------------------------------------------------------------------------
# Attributes
# ----------------------------------------------------------------------------------------------------------------


class _KeywordAttr(ParametrizedAttribute):
    """An attribute holding one keyword out of a known set, spelled `#neuron.<kind><keyword>`."""

    KIND: ClassVar[str]  # what the keyword names, for parse errors

    @property
    def keyword(self) -> str:
        word = self.parameters[0]
        assert isinstance(word, StringAttr)
        return word.data

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            word = parser.parse_identifier(context_msg=f" {cls.KIND}")
        return (StringAttr(word),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.keyword)


_ENGINE_OF_NAME: dict[str, Engine] = {engine.value: engine for engine in Engine}


@irdl_attr_definition
class EngineAttr(_KeywordAttr):
    """The queue an instruction is issued to: `#neuron.engine<vector>` (tensor, vector, scalar, gpsimd, dma)."""

    name = "neuron.engine"
    KIND: ClassVar[str] = "engine name"

    engine_name: StringAttr

    def __init__(self, engine: Engine | str) -> None:
        super().__init__(StringAttr(Engine(engine).value))

    @property
    def engine(self) -> Engine:
        # a table rather than `Engine(name)`: every pass asks every instruction its engine, often, and the enum's
        # lookup by value costs ten times the table's (`verify`, run as the attribute is made, admits no other name)
        return _ENGINE_OF_NAME[self.engine_name.data]

    def verify(self) -> None:
        if self.engine_name.data not in {e.value for e in Engine}:
            raise VerifyException(f"unknown engine '{self.engine_name.data}'")


@irdl_attr_definition
class TargetAttr(_KeywordAttr):
    """The NeuronCore generation a module is compiled for: `#neuron.target<trn2>` (trn1, trn2, trn3)."""

    name = "neuron.target"
    KIND: ClassVar[str] = "target name"

    target_name: StringAttr

    def __init__(self, name: str) -> None:
        super().__init__(StringAttr(name))

    @property
    def target(self) -> Target:
        return hardware.get_target(self.target_name.data)

    def verify(self) -> None:
        if self.target_name.data not in hardware.TARGETS:
            known = ", ".join(hardware.TARGETS)
            raise VerifyException(f"unknown target '{self.target_name.data}' (known: {known})")


@irdl_attr_definition
class AccessPatternAttr(ParametrizedAttribute):
    """The static part of an access: partitions (SBUF/PSUM only), element offset and (step, num) per dim.

    `#neuron.ap<0:128, 0, [[1, 512]]>` is partitions 0..127, offset 0, 512 contiguous elements each;
    `#neuron.ap<300, [[300, 37], [1, 300]]>` is an HBM access (no partition part). A dynamic offset, when an
    instruction has one, is an SSA `index` operand added to `offset`.
    """

    name = "neuron.ap"

    partition_start: IntAttr
    partitions: IntAttr  # 0 for HBM accesses
    offset: IntAttr
    pattern: ArrayAttr[ArrayAttr[IntAttr]]

    def __init__(
        self,
        pattern: Sequence[tuple[int, int]],
        offset: int = 0,
        partition_start: int = 0,
        partitions: int = 0,
    ) -> None:
        super().__init__(
            IntAttr(partition_start),
            IntAttr(partitions),
            IntAttr(offset),
            ArrayAttr([ArrayAttr([IntAttr(step), IntAttr(num)]) for step, num in pattern]),
        )

    @property
    def dims(self) -> tuple[tuple[int, int], ...]:
        return tuple((pair.data[0].data, pair.data[1].data) for pair in self.pattern.data)

    @property
    def is_on_chip(self) -> bool:
        return self.partitions.data > 0

    @property
    def shape(self) -> tuple[int, ...]:
        free = tuple(num for _, num in self.dims)
        return (self.partitions.data, *free) if self.is_on_chip else free

    @property
    def num_elements(self) -> int:
        count = 1
        for extent in self.shape:
            count *= extent
        return count

    def verify(self) -> None:
        if self.partition_start.data < 0 or self.partitions.data < 0:
            raise VerifyException("access partitions must be non-negative")
        if self.offset.data < 0:
            raise VerifyException(f"access offset {self.offset.data} is negative")
        for pair in self.pattern.data:
            if len(pair.data) != 2:
                raise VerifyException("each access-pattern dimension is a [step, num] pair")
            if pair.data[1].data <= 0:
                raise VerifyException(f"access-pattern dimension has non-positive size {pair.data[1].data}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            start, count, offset, pattern = _parse_pattern_body(parser, allow_dynamic=False)[1:]
        return AccessPatternAttr(pattern, offset, start, count).parameters

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(_format_pattern_body(self))


@functools.lru_cache(maxsize=1 << 16)
def _access_pattern(
    pattern: tuple[tuple[int, int], ...], offset: int, partition_start: int, partitions: int
) -> AccessPatternAttr:
    return AccessPatternAttr(pattern, offset, partition_start, partitions)


def access_pattern(
    pattern: Sequence[tuple[int, int]], offset: int = 0, partition_start: int = 0, partitions: int = 0
) -> AccessPatternAttr:
    """`AccessPatternAttr(pattern, offset, partition_start, partitions)`, made once per distinct value: a lowering
    asks for the same few patterns thousands of times, and building one (a dozen attributes, each verified) cost
    more than the rest of convert-tile-to-neuron's work on it. Attributes are immutable values, so ops share it."""
    key = tuple((int(step), int(num)) for step, num in pattern)
    return _access_pattern(key, int(offset), int(partition_start), int(partitions))


def _parse_pattern_body(
    parser: AttrParser, allow_dynamic: bool
) -> tuple[UnresolvedOperand | None, int, int, int, list[tuple[int, int]]]:
    """Parse `[p0:p1,] [%off +] offset, [[step, num], ...]` (the inside of an access)."""
    start = count = 0
    dynamic: UnresolvedOperand | None = None
    if allow_dynamic and isinstance(parser, Parser):
        dynamic = parser.parse_optional_unresolved_operand()
    if dynamic is not None:
        parser.parse_punctuation("+")
        offset = parser.parse_integer(allow_negative=False)
    else:
        first = parser.parse_integer(allow_negative=False)
        if parser.parse_optional_punctuation(":") is not None:
            start = first
            count = parser.parse_integer(allow_negative=False) - first
            parser.parse_punctuation(",")
            if allow_dynamic and isinstance(parser, Parser):
                dynamic = parser.parse_optional_unresolved_operand()
            if dynamic is not None:
                parser.parse_punctuation("+")
            offset = parser.parse_integer(allow_negative=False)
        else:
            offset = first
    parser.parse_punctuation(",")

    def parse_pair() -> tuple[int, int]:
        pair = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_negative=True)
        )
        if len(pair) != 2:
            parser.raise_error(f"an access-pattern dimension is a [step, num] pair, got {len(pair)} numbers")
        return pair[0], pair[1]

    pattern = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parse_pair)
    return dynamic, start, count, offset, pattern


def _format_pattern_body(ap: AccessPatternAttr) -> str:
    parts = []
    if ap.is_on_chip:
        parts.append(f"{ap.partition_start.data}:{ap.partition_start.data + ap.partitions.data}")
    parts.append(str(ap.offset.data))
    parts.append("[" + ", ".join(f"[{step}, {num}]" for step, num in ap.dims) + "]")
    return ", ".join(parts)


# ----------------------------------------------------------------------------------------------------------------
# Helpers shared by the verifiers
# ----------------------------------------------------------------------------------------------------------------

TARGET_ATTR_NAME = "neuron.target"

# An immediate of kind "number": an f64, or an i64 that holds an integer exactly (int64's extremes included)
NUMBER: AttrConstraint[FloatAttr | IntegerAttr] = base(FloatAttr) | irdl_to_attr_constraint(IntegerAttr[I64])


def target_of(op: Operation) -> Target:
    """The target of the module enclosing `op` (trn2 when the module does not say)."""
    current: Operation | None = op
    while current is not None:
        if isinstance(current, ModuleOp) and isinstance(attr := current.attributes.get(TARGET_ATTR_NAME), TargetAttr):
            return attr.target
        current = current.parent_op()
    return hardware.get_target(hardware.DEFAULT_TARGET)


def has_static_layout(memref_type: MemRefType) -> bool:
    """Whether every stride and the offset of a memref are known (no `?` in `strided<[?, 1], offset: ?>`)."""
    layout = memref_type.layout
    if not isinstance(layout, StridedLayoutAttr):
        return True
    return all(isinstance(value, IntAttr) for value in (*layout.strides.data, layout.offset))


def view_problem(source: MemRefType, result: MemRefType) -> str | None:
    """The rule a view of `source` as `result` breaks, if any: the one rule of `tile.view` and `neuron.view`. A view
    is a new layout of the same HBM elements: same element type, static strides and offset."""
    if source.element_type != result.element_type:
        return f"a view keeps the element type ({source.element_type} vs {result.element_type})"
    if memory_of(source) is not Memory.HBM or memory_of(result) is not Memory.HBM:
        return "views are of HBM memrefs"
    if not has_static_layout(result):
        return f"a view's strides and offset are static, got {result.layout}"
    return None


def element_type_name(element_type: Attribute) -> str:
    """The runtime's name of an xDSL element type ('f32', 'bf16', 'i32', ...)."""
    from neuron_mlir.ir.types import runtime_dtype_name

    return runtime_dtype_name(element_type)


def _error(op: Operation, message: str) -> VerifyException:
    return VerifyException(f"{op.name}: {message}{at_source(op)}")


# ----------------------------------------------------------------------------------------------------------------
# Buffers
# ----------------------------------------------------------------------------------------------------------------


@irdl_op_definition
class AllocOp(IRDLOperation):
    """Allocate a buffer in SBUF, PSUM or HBM.

    Before `neuron-allocate-memory` the buffer has no address; afterwards `address` is its byte offset (within
    each partition for SBUF and PSUM, absolute for HBM). An SBUF/PSUM buffer's first dimension is its partition
    count (at most 128); its row is the product of the other dimensions times the element size.

    ```mlir
    %t = neuron.alloc {address = 0 : i64} : memref<128x512xf32, #mem<sbuf>>
    ```
    """

    name = "neuron.alloc"

    buffer = result_def(MemRefType)
    address = opt_prop_def(IntegerAttr)

    traits = traits_def(MemoryAllocEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($buffer)"

    def __init__(self, result_type: MemRefType, address: int | None = None, name_hint: str | None = None):
        props = {"address": IntegerAttr(address, i64)} if address is not None else {}
        init_op(self, result_types=[result_type], properties=props)
        if name_hint:
            self.buffer.name_hint = name_hint

    @property
    def memory(self) -> Memory:
        return memory_of(self.buffer.type)

    def row_bytes(self) -> int:
        """Bytes per partition (SBUF/PSUM) or in total (HBM)."""
        memref_type = self.buffer.type
        assert isinstance(memref_type, MemRefType)
        shape = memref_type.get_shape()
        dims = shape if self.memory is Memory.HBM else shape[1:]
        count = 1
        for extent in dims:
            count *= extent
        from neuron_mlir.runtime.dtypes import itemsize

        return count * itemsize(element_type_name(memref_type.element_type))

    def verify_(self) -> None:
        memref_type = self.buffer.type
        assert isinstance(memref_type, MemRefType)
        if not isinstance(memref_type.memory_space, MemorySpaceAttr):
            raise _error(self, "buffer type needs a #mem<...> memory space")
        from neuron_mlir.runtime.dtypes import DTYPES

        try:
            storable = element_type_name(memref_type.element_type) in DTYPES
        except ValueError:
            storable = False
        if not storable:
            raise _error(self, f"element type {memref_type.element_type} has no NeuronCore storage type")
        shape = memref_type.get_shape()
        if any(extent <= 0 for extent in shape):
            raise _error(self, f"buffer shape {shape} has a non-positive dimension")
        target = target_of(self)
        if self.memory is not Memory.HBM:
            if len(shape) < 2:
                raise _error(self, f"on-chip buffer needs [partitions, free...] dimensions, got {shape}")
            if shape[0] > target.partitions:
                raise _error(self, f"{shape[0]} partitions exceed the {target.partitions} of {target.name}")
            capacity = (
                target.sbuf_bytes_per_partition if self.memory is Memory.SBUF else target.psum_bytes_per_partition
            )
            if self.row_bytes() > capacity:
                raise _error(
                    self,
                    f"{self.row_bytes()} bytes per partition exceed {self.memory.value.upper()} capacity of "
                    f"{capacity} bytes per partition on {target.name}",
                )
            if self.address is not None:
                address = self.address.value.data
                if address < 0 or address + self.row_bytes() > capacity:
                    raise _error(
                        self,
                        f"buffer at address {address} with {self.row_bytes()} bytes per partition does not fit "
                        f"in {self.memory.value.upper()} ({capacity} bytes per partition on {target.name})",
                    )
        elif self.address is not None and self.address.value.data < 0:
            raise _error(self, f"negative HBM address {self.address.value.data}")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A strided view of an HBM buffer, for a tensor that leaves the program as a view of another.

    Instructions address HBM through their access patterns, so views never appear as their operands; a
    function result that is a transpose or reshape of an argument, say, is returned as a `neuron.view`. The
    result type's strided layout is relative to the source buffer's start.

    ```mlir
    %t = neuron.view %w : memref<520x300xf32, #mem<hbm>>
                     to memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
    ```
    """

    name = "neuron.view"

    source = operand_def(MemRefType)
    result = result_def(MemRefType)

    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"

    def __init__(self, source: SSAValue, result_type: MemRefType):
        init_op(self, operands=[source], result_types=[result_type])

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isinstance(source, MemRefType)
        assert isinstance(result, MemRefType)
        if (problem := view_problem(source, result)) is not None:
            raise _error(self, problem)


# ----------------------------------------------------------------------------------------------------------------
# Instructions
# ----------------------------------------------------------------------------------------------------------------


# Per instruction class: its roles in order (`InstructionOp.roles`); per class and operand segment sizes (the
# property's bytes): the roles present. Both are asked in the passes' inner loops.
_ROLES: dict[type[InstructionOp], tuple[str, ...]] = {}
_PRESENT_ROLES: dict[tuple[type[InstructionOp], bytes], tuple[str, ...]] = {}
# Per instruction class, whether each operand may be absent, in order; None where its definition is not the plain
# optional and single operands (and operand segment sizes) that `InstructionOp._built` assumes.
_OPERAND_OPTIONAL: dict[type[InstructionOp], tuple[bool, ...] | None] = {}
# Attributes are immutable values: one per engine and one per pattern of operand segment sizes serve every
# instruction, instead of each made (and verified) anew.
_ENGINE_ATTRS: dict[Engine, EngineAttr] = {}
_SEGMENT_SIZES: dict[tuple[int, ...], DenseArrayBase] = {}


def _operand_optional(cls: type[InstructionOp]) -> tuple[bool, ...] | None:
    """Whether each operand of `cls` may be absent; None unless every operand is single or optional and the only
    option about them is operand segment sizes as a property (`InstructionOp._built`)."""
    op_def = cls.get_irdl_definition()
    if op_def.results or op_def.regions or op_def.successors:
        return None
    segments = [o for o in op_def.options if isinstance(o, AttrSizedOperandSegments)]
    others = [o for o in op_def.options if not isinstance(o, AttrSizedOperandSegments | ParsePropInAttrDict)]
    if len(segments) != 1 or not segments[0].as_property or others:
        return None
    optional = []
    for _, definition in op_def.operands:
        if isinstance(definition, OptionalDef):
            optional.append(True)
        elif isinstance(definition, VariadicDef):
            return None
        else:
            optional.append(False)
    return tuple(optional)


class InstructionOp(IRDLOperation):
    """Base of every instruction op: the shared syntax, access decoding and the generic hardware checks.

    Subclasses declare, for each role `r` of their opcode in `runtime.isa.OPCODES`, an operand `r` (the
    buffer), an optional operand `r_offset` (dynamic element offset, `index`) and a property `r_ap`.
    """

    OPCODE: ClassVar[str]
    # attributes that may be given at run time by an i1/index operand named `<attr>_dynamic`
    DYNAMIC_ATTRS: ClassVar[tuple[str, ...]] = ()

    engine = prop_def(EngineAttr)
    queue = opt_prop_def(IntegerAttr)
    instruction_id = opt_prop_def(IntegerAttr, prop_name="id")
    waits = opt_prop_def(DenseArrayBase)

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())

    # ---- structure -------------------------------------------------------------------------------------------

    @classmethod
    def spec(cls) -> isa.OpcodeSpec:
        return isa.OPCODES[cls.OPCODE]

    @classmethod
    def roles(cls) -> tuple[str, ...]:
        roles = _ROLES.get(cls)
        if roles is None:
            spec = cls.spec()
            roles = _ROLES[cls] = spec.writes + spec.optional_writes + spec.reads + spec.optional_reads
        return roles

    def access(self, role: str) -> tuple[SSAValue, AccessPatternAttr, SSAValue | None] | None:
        """(buffer, static pattern, dynamic offset) of `role`, or None when an optional role is absent."""
        buffer = getattr(self, role)
        if buffer is None:
            return None
        pattern = self.properties.get(f"{role}_ap")
        assert isinstance(pattern, AccessPatternAttr)
        return buffer, pattern, getattr(self, f"{role}_offset")

    def present_roles(self) -> list[str]:
        # which roles are present is a function of the operand segment sizes: found once per class and sizes
        sizes = self.properties["operandSegmentSizes"]
        assert isinstance(sizes, DenseArrayBase)
        key = (type(self), sizes.data.data)
        present = _PRESENT_ROLES.get(key)
        if present is None:
            present = _PRESENT_ROLES[key] = tuple(role for role in self.roles() if getattr(self, role) is not None)
        return list(present)

    @property
    def engine_kind(self) -> Engine:
        return self.engine.engine

    @classmethod
    def build_instruction(
        cls,
        engine: Engine,
        accesses: Mapping[str, tuple[SSAValue, AccessPatternAttr, SSAValue | None]],
        properties: dict[str, Attribute] | None = None,
        dynamic: dict[str, SSAValue] | None = None,
    ) -> InstructionOp:
        """Create an instruction from its role accesses (buffer, pattern, dynamic offset or None)."""
        operands: list[SSAValue | None] = []
        engine_attr = _ENGINE_ATTRS.get(engine)
        if engine_attr is None:
            engine_attr = _ENGINE_ATTRS[engine] = EngineAttr(engine)
        props: dict[str, Attribute] = {"engine": engine_attr}
        props.update(properties or {})
        for role in cls.roles():
            entry = accesses.get(role)
            if entry is None:
                operands += [None, None]
                continue
            buffer, pattern, offset = entry
            operands += [buffer, offset]
            props[f"{role}_ap"] = pattern
        for name in cls.DYNAMIC_ATTRS:
            operands.append((dynamic or {}).get(name))
        return cls._built(operands, props)

    @classmethod
    def _built(cls, operands: list[SSAValue | None], properties: dict[str, Attribute]) -> InstructionOp:
        """`cls.build(operands=operands, properties=properties)`, the same op, without IRDL's generic handling of
        arguments: an instruction's operands are single values or absent, so their segment sizes are 1 or 0, and
        that handling was the largest part of making an instruction (several per instruction of every compile)."""
        optional = _OPERAND_OPTIONAL.get(cls, ())
        if optional == ():
            optional = _OPERAND_OPTIONAL[cls] = _operand_optional(cls)
        if optional is None or len(optional) != len(operands):
            return cls.build(operands=operands, properties=properties)
        present: list[SSAValue] = []
        sizes: list[int] = []
        for operand, may_be_absent in zip(operands, optional, strict=True):
            if operand is None:
                if not may_be_absent:
                    return cls.build(operands=operands, properties=properties)  # (its error names the operand)
                sizes.append(0)
            else:
                present.append(operand)
                sizes.append(1)
        built = {name: attr for name, attr in properties.items() if attr is not None}
        key = tuple(sizes)
        segment_sizes = _SEGMENT_SIZES.get(key)
        if segment_sizes is None:
            segment_sizes = _SEGMENT_SIZES[key] = DenseArrayBase.from_list(i32, sizes)
        built[AttrSizedOperandSegments.attribute_name] = segment_sizes
        op = cls.__new__(cls)
        Operation.__init__(op, operands=present, properties=built)
        return op

    # ---- verification ----------------------------------------------------------------------------------------

    def verify_(self) -> None:
        target = target_of(self)
        if self.waits is not None and self.instruction_id is None:
            raise _error(self, "an instruction with `waits` needs an `id`")
        operands = {role: self._rule_operand(role) for role in self.present_roles()}
        queue = self.queue.value.data if self.queue is not None else None
        try:
            isa.check_instruction(self.OPCODE, self.engine_kind, queue, operands, self.attribute_values(), target)
        except isa.RuleError as error:
            if error.attribute is not None:
                raise _error(self, f"attribute '{error.attribute}': {error.message}") from None
            raise _error(self, f"{error.role}: {error.message}" if error.role else error.message) from None

    def _rule_operand(self, role: str) -> isa.Operand:
        """The access of `role` in the instruction set's terms, after the syntax's own checks of it."""
        access = self.access(role)
        assert access is not None
        buffer, pattern, dynamic = access
        memref_type = buffer.type
        assert isinstance(memref_type, MemRefType)
        memory = memory_of(memref_type)
        shape = memref_type.get_shape()
        if memory is Memory.HBM:
            if pattern.is_on_chip:
                raise _error(self, f"{role}: an HBM access has no partition range")
            row = 1
            for extent in shape:
                row *= extent
        else:
            if not pattern.is_on_chip:
                raise _error(self, f"{role}: an {memory.value.upper()} access needs a partition range")
            start, count = pattern.partition_start.data, pattern.partitions.data
            if start + count > shape[0]:
                raise _error(
                    self, f"{role}: partitions {start}:{start + count} exceed the buffer's {shape[0]} partitions"
                )
            row = 1
            for extent in shape[1:]:
                row *= extent
        low, high = isa.extent(pattern.dims)
        low, high = low + pattern.offset.data, high + pattern.offset.data
        if low < 0 or high >= row:
            raise _error(
                self,
                f"{role}: elements {low}..{high} of the access lie outside the buffer's {row} elements"
                + (" per partition" if memory is not Memory.HBM else ""),
            )
        try:
            dtype = element_type_name(memref_type.element_type)
        except ValueError:
            raise _error(
                self, f"{role}: element type {memref_type.element_type} has no NeuronCore storage type"
            ) from None
        owner = buffer.owner
        address = None  # read by the rules of `isa.READS_ADDRESSES` alone (`_instruction_key`)
        if (
            role in isa.READS_ADDRESSES.get(self.OPCODE, ())
            and isinstance(owner, AllocOp)
            and owner.address is not None
        ):
            address = owner.address.value.data
        return isa.Operand.of(
            role,
            memory,
            dtype,
            pattern.partitions.data,
            pattern.partition_start.data,
            pattern.dims,
            pattern.offset.data if dynamic is None else None,
            address,
        )

    def attribute_values(self) -> dict[str, AttrValue]:
        """The opcode's attributes that are set, as the instruction encodes them (`runtime.isa`): Python values,
        and `isa.DYNAMIC` for one given by an operand (a register when the instruction issues)."""
        values: dict[str, AttrValue] = {}
        for name, attr in self.spec().attr_specs.items():
            value = self.properties.get(name)
            dynamic = getattr(self, f"{name}_dynamic") if name in self.DYNAMIC_ATTRS else None
            if dynamic is not None:
                if value is not None:
                    raise _error(self, f"give {name} as an immediate or as a register, not both")
                values[name] = isa.DYNAMIC
            elif value is not None:
                values[name] = self._attribute_value(name, attr.kind, value)
        return values

    def _attribute_value(self, name: str, kind: str, value: Attribute) -> AttrValue:
        if kind == "pattern":
            assert isinstance(value, DenseArrayBase)
            numbers = tuple(int(v) for v in value.get_values())
            if len(numbers) % 2:
                raise _error(self, f"{name} must hold (step, num) pairs")
            return tuple(zip(numbers[0::2], numbers[1::2], strict=True))
        if kind == "counts":
            if not isinstance(value, DenseArrayBase):
                raise _error(self, f"{name} must be an array of counts, e.g. array<i64: 2, 6>")
            return tuple(int(v) for v in value.get_values())
        if kind == "groups":
            if not isinstance(value, ArrayAttr) or not all(isinstance(g, DenseArrayBase) for g in value.data):
                raise _error(self, f"{name} must be a list of rank arrays, e.g. [array<i64: 0, 1>]")
            return tuple(tuple(int(rank) for rank in group.get_values()) for group in value.data)
        if isinstance(value, IntegerAttr):
            return bool(value.value.data) if kind == "bool" else value.value.data
        if isinstance(value, FloatAttr):
            return float(value.value.data)
        assert isinstance(value, StringAttr)
        return value.data

    # ---- syntax ----------------------------------------------------------------------------------------------

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.engine_kind.value}")
        types: list[Attribute] = []
        for position, role in enumerate(self.present_roles()):
            access = self.access(role)
            assert access is not None
            buffer, pattern, dynamic = access
            types.append(buffer.type)
            printer.print_string(f"{' ' if position == 0 else ', '}{role} ")
            printer.print_operand(buffer)
            printer.print_string("[")
            if pattern.is_on_chip:
                start = pattern.partition_start.data
                printer.print_string(f"{start}:{start + pattern.partitions.data}, ")
            if dynamic is not None:
                printer.print_operand(dynamic)
                printer.print_string(" + ")
            dims = ", ".join(f"[{step}, {num}]" for step, num in pattern.dims)
            printer.print_string(f"{pattern.offset.data}, [{dims}]]")
        for name in self.DYNAMIC_ATTRS:
            value = getattr(self, f"{name}_dynamic")
            if value is not None:
                printer.print_string(f", {name} ")
                printer.print_operand(value)
        reserved = {f"{role}_ap" for role in self.roles()} | {"engine", "operandSegmentSizes"}
        shown = {name: attr for name, attr in self.properties.items() if name not in reserved}
        shown.update(self.attributes)
        printer.print_op_attributes(shown)
        printer.print_string(" : ")
        printer.print_list(types, printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> InstructionOp:
        engine_name = parser.parse_identifier(context_msg=" engine name")
        if engine_name not in {e.value for e in Engine}:
            allowed = ", ".join(sorted(e.value for e in cls.spec().engines))
            parser.raise_error(f"unknown engine '{engine_name}' ({cls.name} runs on: {allowed})")
        engine = Engine(engine_name)
        parsed: dict[str, tuple[UnresolvedOperand, AccessPatternAttr, UnresolvedOperand | None]] = {}
        dynamic_attrs: dict[str, UnresolvedOperand] = {}
        roles = cls.roles()

        def parse_item() -> None:
            word = parser.parse_identifier(context_msg=" operand role")
            if word in cls.DYNAMIC_ATTRS:
                dynamic_attrs[word] = parser.parse_unresolved_operand()
                return
            if word not in roles:
                parser.raise_error(f"{cls.name} has no operand role '{word}' (roles: {', '.join(roles)})")
            if word in parsed:
                parser.raise_error(f"operand role '{word}' given twice")
            buffer = parser.parse_unresolved_operand()
            parser.parse_punctuation("[")
            dynamic, start, count, offset, pattern = _parse_pattern_body(parser, allow_dynamic=True)
            parser.parse_punctuation("]")
            parsed[word] = (buffer, AccessPatternAttr(pattern, offset, start, count), dynamic)

        parser.parse_comma_separated_list(parser.Delimiter.NONE, parse_item)
        required = cls.spec().writes + cls.spec().reads
        if missing := [role for role in required if role not in parsed]:
            parser.raise_error(f"{cls.name} needs operand role(s) {', '.join(missing)} (roles: {', '.join(roles)})")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        order = list(parsed)  # types follow the operands in the order written
        if len(types) != len(order):
            parser.raise_error(f"expected {len(order)} buffer types, got {len(types)}")
        index = IndexType()
        accesses = {}
        for role, memref_type in zip(order, types, strict=True):
            buffer, pattern, dynamic = parsed[role]
            offset_value = parser.resolve_operand(dynamic, index) if dynamic is not None else None
            accesses[role] = (parser.resolve_operand(buffer, memref_type), pattern, offset_value)
        dynamic_values = {
            name: parser.resolve_operand(value, cls.dynamic_attr_type(name)) for name, value in dynamic_attrs.items()
        }
        op_def = cls.get_irdl_definition()
        properties = {name: attr for name, attr in attrs.items() if name in op_def.properties}
        discardable = {name: attr for name, attr in attrs.items() if name not in op_def.properties}
        op = cls.build_instruction(engine, accesses, properties, dynamic_values)
        op.attributes.update(discardable)
        return op

    @classmethod
    def dynamic_attr_type(cls, name: str) -> Attribute:
        return i1


@irdl_op_definition
class MatmulOp(InstructionOp):
    """TensorE matrix multiply: `dst[M, N] (=|+=) stationary[K, M]^T @ moving[K, N]` into PSUM.

    K is the partition axis of both inputs (K <= 128); the stationary free size M becomes the output's
    partitions (M <= 128) and the moving free size N its free size (N <= 512 on trn1/trn2: one 2 KiB PSUM bank
    of fp32). `accumulate` (static, or the i1 operand `accumulate`) adds into dst instead of overwriting, which
    is how K larger than 128 is reduced. Inputs are both fp32 or both 16/8-bit; dst is fp32. With
    `is_transpose` the stationary is an identity and dst receives moving^T in moving's dtype (v3+). With
    `row_tile_size` (32 or 64 rows, as the target allows) and `row_tile_start` (a multiple of it) the matmul
    occupies those PE rows alone, its K partitions inside them, and runs beside matmuls in other row tiles.

    ```mlir
    neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 520]]], stationary %w[0:128, 0, [[1, 37]]],
        moving %x[0:128, 0, [[1, 520]]], accumulate %first : memref<...>, memref<...>, memref<...>
    ```
    """

    name = "neuron.nc_matmul"
    OPCODE: ClassVar[str] = "nc_matmul"
    DYNAMIC_ATTRS: ClassVar[tuple[str, ...]] = ("accumulate",)

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    stationary = operand_def(MemRefType)
    stationary_offset = opt_operand_def(IndexType)
    moving = operand_def(MemRefType)
    moving_offset = opt_operand_def(IndexType)
    accumulate_dynamic = opt_operand_def(IntegerType(1))
    dst_ap = prop_def(AccessPatternAttr)
    stationary_ap = prop_def(AccessPatternAttr)
    moving_ap = prop_def(AccessPatternAttr)
    accumulate = opt_prop_def(IntegerAttr)
    is_transpose = opt_prop_def(IntegerAttr)
    row_tile_start = opt_prop_def(IntegerAttr)
    row_tile_size = opt_prop_def(IntegerAttr)

    @property
    def transposes(self) -> bool:
        return self.is_transpose is not None and bool(self.is_transpose.value.data)


@irdl_op_definition
class ActivationOp(InstructionOp):
    """ScalarE activation: `dst = func(src * scale + bias)`, optionally summing dst into `accumulate_dst`.

    `scale` is an immediate or the per-partition [P, 1] operand `scale_vector`; bias is the [P, 1] operand
    `bias` or the immediate `bias_value`. Scale and bias cost nothing extra. Functions: runtime.isa's table.

    ```mlir
    neuron.activation scalar dst %y[0:37, 0, [[1, 520]]], src %p[0:37, 0, [[1, 520]]] {func = "relu"} : ...
    ```
    """

    name = "neuron.activation"
    OPCODE: ClassVar[str] = "activation"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    accumulate_dst = opt_operand_def(MemRefType)
    accumulate_dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    bias = opt_operand_def(MemRefType)
    bias_offset = opt_operand_def(IndexType)
    scale_vector = opt_operand_def(MemRefType)
    scale_vector_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    accumulate_dst_ap = opt_prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)
    bias_ap = opt_prop_def(AccessPatternAttr)
    scale_vector_ap = opt_prop_def(AccessPatternAttr)
    func = prop_def(StringAttr)
    scale = opt_prop_def(FloatAttr)
    bias_value = opt_prop_def(FloatAttr)
    alpha = opt_prop_def(FloatAttr)


@irdl_op_definition
class TensorTensorOp(InstructionOp):
    """Elementwise binary ALU op: `dst = in0 <op> in1` (VectorE, or GpSimdE for integer work).

    All three accesses have the same shape; at most one input may be in PSUM. Comparisons give 1.0 / 0.0.

    ```mlir
    neuron.tensor_tensor vector dst %c[0:128, 0, [[1, 512]]], in0 %a[...], in1 %b[...] {op = "add"} : ...
    ```
    """

    name = "neuron.tensor_tensor"
    OPCODE: ClassVar[str] = "tensor_tensor"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    in0 = operand_def(MemRefType)
    in0_offset = opt_operand_def(IndexType)
    in1 = operand_def(MemRefType)
    in1_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    in0_ap = prop_def(AccessPatternAttr)
    in1_ap = prop_def(AccessPatternAttr)
    op = prop_def(StringAttr)


@irdl_op_definition
class TensorScalarOp(InstructionOp):
    """`dst = (src <op0> s0) <op1> s1` with per-partition or immediate scalars.

    s0 is the [P, 1] operand `operand0` broadcast along the free axes when given, else the immediate `scalar0`
    (likewise s1); `reverse0`/`reverse1` swap an op's operands; without `op1` the second step is skipped. On
    VectorE, with one operator, the [P, 1] `accumulate_dst` also receives the sum of dst along its free axes.

    ```mlir
    neuron.tensor_scalar vector dst %y[0:37, 0, [[1, 520]]], src %x[...] {op0 = "max", scalar0 = 0.0 : f64} : ...
    ```
    """

    name = "neuron.tensor_scalar"
    OPCODE: ClassVar[str] = "tensor_scalar"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    accumulate_dst = opt_operand_def(MemRefType)
    accumulate_dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    operand0 = opt_operand_def(MemRefType)
    operand0_offset = opt_operand_def(IndexType)
    operand1 = opt_operand_def(MemRefType)
    operand1_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)
    operand0_ap = opt_prop_def(AccessPatternAttr)
    operand1_ap = opt_prop_def(AccessPatternAttr)
    accumulate_dst_ap = opt_prop_def(AccessPatternAttr)
    op0 = prop_def(StringAttr)
    scalar0 = opt_prop_def(NUMBER)
    reverse0 = opt_prop_def(IntegerAttr)
    op1 = opt_prop_def(StringAttr)
    scalar1 = opt_prop_def(NUMBER)
    reverse1 = opt_prop_def(IntegerAttr)


@irdl_op_definition
class ScalarTensorTensorOp(InstructionOp):
    """`dst = (src <op0> s0) <op1> in1` on VectorE: a tensor_scalar step, then a tensor_tensor step, in one pass.

    s0 is the [P, 1] operand `operand0` broadcast along the free axes when given, else the immediate `scalar0`;
    in1 has src's shape, and src and in1 are not both in PSUM. `reverse0` computes `s0 <op0> src`, `reverse1`
    `in1 <op1> (...)`. The intermediate stays fp32 inside the engine.

    ```mlir
    neuron.scalar_tensor_tensor vector dst %d[0:128, 0, [[1, 512]]], src %y[...], in1 %dy[...],
        operand0 %s[0:128, 0, [[1, 1]]] {op0 = "subtract", op1 = "multiply"} : ...
    ```
    """

    name = "neuron.scalar_tensor_tensor"
    OPCODE: ClassVar[str] = "scalar_tensor_tensor"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    in1 = operand_def(MemRefType)
    in1_offset = opt_operand_def(IndexType)
    operand0 = opt_operand_def(MemRefType)
    operand0_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)
    in1_ap = prop_def(AccessPatternAttr)
    operand0_ap = opt_prop_def(AccessPatternAttr)
    op0 = prop_def(StringAttr)
    scalar0 = opt_prop_def(NUMBER)
    reverse0 = opt_prop_def(IntegerAttr)
    op1 = prop_def(StringAttr)
    reverse1 = opt_prop_def(IntegerAttr)


@irdl_op_definition
class TensorReduceOp(InstructionOp):
    """Reduce the `axes` innermost free axes of src with `op` (never across partitions; VectorE).

    ```mlir
    neuron.tensor_reduce vector dst %s[0:130, 0, [[1, 1]]], src %x[0:130, 0, [[1, 37]]] {op = "add"} : ...
    ```
    """

    name = "neuron.tensor_reduce"
    OPCODE: ClassVar[str] = "tensor_reduce"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)
    op = prop_def(StringAttr)
    axes = opt_prop_def(IntegerAttr)
    negate = opt_prop_def(IntegerAttr)


@irdl_op_definition
class TensorCopyOp(InstructionOp):
    """`dst = src`, converting the element type (bit exact when types match). VectorE, ScalarE or GpSimdE.

    Evacuating PSUM to SBUF is the common use.

    ```mlir
    neuron.tensor_copy vector dst %y[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[1, 512]]] : ...
    ```
    """

    name = "neuron.tensor_copy"
    OPCODE: ClassVar[str] = "tensor_copy"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)


@irdl_op_definition
class SelectOp(InstructionOp):
    """`dst = predicate != 0 ? on_true : on_false`, elementwise over one shape (VectorE or GpSimdE).

    ```mlir
    neuron.select vector dst %d[...], predicate %m[...], on_true %a[...], on_false %b[...] : ...
    ```
    """

    name = "neuron.select"
    OPCODE: ClassVar[str] = "select"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    predicate = operand_def(MemRefType)
    predicate_offset = opt_operand_def(IndexType)
    on_true = operand_def(MemRefType)
    on_true_offset = opt_operand_def(IndexType)
    on_false = operand_def(MemRefType)
    on_false_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    predicate_ap = prop_def(AccessPatternAttr)
    on_true_ap = prop_def(AccessPatternAttr)
    on_false_ap = prop_def(AccessPatternAttr)


@irdl_op_definition
class MemsetOp(InstructionOp):
    """Fill dst with the immediate `value` (VectorE or GpSimdE).

    ```mlir
    neuron.memset vector dst %ones[0:128, 0, [[1, 1]]] {value = 1.0 : f64} : ...
    ```
    """

    name = "neuron.memset"
    OPCODE: ClassVar[str] = "memset"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    value = prop_def(NUMBER)


@irdl_op_definition
class IotaOp(InstructionOp):
    """GpSimdE iota: `dst[p, i...] = base + p * channel_multiplier + sum(i_d * step_d)` in int32.

    `pattern` is the flattened (step, num) list of the free axes and must match dst's free shape. `base` may be
    a scalar register (an `index` operand), e.g. a loop's offset into the tensor being generated.

    ```mlir
    neuron.iota gpsimd dst %i[0:128, 0, [[1, 128]]] {pattern = array<i64: 1, 128>} : ...
    neuron.iota gpsimd dst %i[0:128, 0, [[1, 128]]], base %off {pattern = array<i64: 1, 128>} : ...
    ```
    """

    name = "neuron.iota"
    OPCODE: ClassVar[str] = "iota"
    DYNAMIC_ATTRS: ClassVar[tuple[str, ...]] = ("base",)

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    base_dynamic = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    base = opt_prop_def(IntegerAttr)
    channel_multiplier = opt_prop_def(IntegerAttr)
    pattern = prop_def(DenseArrayBase)

    @classmethod
    def dynamic_attr_type(cls, name: str) -> Attribute:
        return IndexType()


@irdl_op_definition
class AffineSelectOp(InstructionOp):
    """GpSimdE affine select: `dst = (base + p*channel_multiplier + sum(i_d*step_d)) <cmp> 0 ? on_true : fill`.

    Builds masks such as identities and causal masks without reading a predicate from memory.

    ```mlir
    neuron.affine_select gpsimd dst %eye[0:128, 0, [[1, 128]]], on_true %ones[0:128, 0, [[1, 128]]]
        {cmp = "is_equal", channel_multiplier = 1 : i64, pattern = array<i64: -1, 128>,
         on_false_value = 0.0 : f64} : ...
    ```
    """

    name = "neuron.affine_select"
    OPCODE: ClassVar[str] = "affine_select"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    on_true = operand_def(MemRefType)
    on_true_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    on_true_ap = prop_def(AccessPatternAttr)
    cmp = prop_def(StringAttr)
    base = opt_prop_def(IntegerAttr)
    channel_multiplier = opt_prop_def(IntegerAttr)
    pattern = prop_def(DenseArrayBase)
    on_false_value = prop_def(NUMBER)


@irdl_op_definition
class GpsimdKernelOp(InstructionOp):
    """GpSimdE kernel: `dst = kernel(in0, in1)` elementwise for a function of `runtime.isa.GPSIMD_KERNELS`.

    The division family (exact on integers) and the counter-based random generators: what no VectorE ALU
    operator or ScalarE activation offers. `in1` has in0's shape or is a [P, 1] column. SBUF only.

    ```mlir
    neuron.gpsimd_kernel gpsimd dst %q[0:128, 0, [[1, 64]]], in0 %a[...], in1 %b[...] {kernel = "divide_floor"} : ...
    ```
    """

    name = "neuron.gpsimd_kernel"
    OPCODE: ClassVar[str] = "gpsimd_kernel"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    in0 = operand_def(MemRefType)
    in0_offset = opt_operand_def(IndexType)
    in1 = opt_operand_def(MemRefType)
    in1_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    in0_ap = prop_def(AccessPatternAttr)
    in1_ap = opt_prop_def(AccessPatternAttr)
    kernel = prop_def(StringAttr)


@irdl_op_definition
class DmaCopyOp(InstructionOp):
    """DMA: copy src to dst element by element in row-major order (same count), converting the dtype.

    Either side is HBM or SBUF; the HBM side's pattern may be any strided view (transposes, broadcasts with
    step 0), which is how views fold into data movement instead of copies.

    ```mlir
    neuron.dma_copy dma dst %x_tile[0:37, 0, [[1, 300]]], src %x[0, [[300, 37], [1, 300]]] {queue = 0 : i64} : ...
    ```
    """

    name = "neuron.dma_copy"
    OPCODE: ClassVar[str] = "dma_copy"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    offsets = opt_operand_def(MemRefType)
    offsets_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)
    offsets_ap = opt_prop_def(AccessPatternAttr)
    indirect = opt_prop_def(StringAttr)
    accumulate = opt_prop_def(IntegerAttr)


@irdl_op_definition
class DmaTransposeOp(InstructionOp):
    """DMA: dst[c, r] = src[r, c], src's elements in row-major order an [R, C] matrix and dst an SBUF access of C
    partitions (NeuronCore-v3 on). src is in HBM (its pattern ends in rows of C elements) or SBUF (R partitions of
    C); 2-byte dtypes, src's and dst's the same. The rules are `dma_transpose` in `runtime.isa`.

    ```mlir
    neuron.dma_transpose dma dst %kt[0:64, 0, [[1, 512]]], src %k[0, [[64, 512], [1, 64]]] {queue = 0 : i64} : ...
    ```
    """

    name = "neuron.dma_transpose"
    OPCODE: ClassVar[str] = "dma_transpose"

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)


class _CollectiveOp(InstructionOp):
    """Shared fields of the collectives: an HBM tensor in, one out, and the replica groups of the ranks taking
    part (a rank exchanges with the other ranks of the group that holds it)."""

    dst = operand_def(MemRefType)
    dst_offset = opt_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_offset = opt_operand_def(IndexType)
    dst_ap = prop_def(AccessPatternAttr)
    src_ap = prop_def(AccessPatternAttr)
    replica_groups = prop_def(ArrayAttr)


@irdl_op_definition
class AllReduceOp(_CollectiveOp):
    """Collective: dst = the elementwise `reduce` (sum, avg, product, min, max) of src over the caller's replica
    group, run by the collective queue over NeuronLink/EFA (`runtime.collectives`).

    ```mlir
    neuron.all_reduce collective dst %y[0, [[1, 4096]]], src %x[0, [[1, 4096]]]
        {reduce = "sum", replica_groups = [array<i64: 0, 1>]} : memref<...>, memref<...>
    ```
    """

    name = "neuron.all_reduce"
    OPCODE: ClassVar[str] = "all_reduce"

    reduce = opt_prop_def(StringAttr)


@irdl_op_definition
class AllGatherOp(_CollectiveOp):
    """Collective: dst = every rank's src concatenated in the group's rank order (group size x src's elements)."""

    name = "neuron.all_gather"
    OPCODE: ClassVar[str] = "all_gather"


@irdl_op_definition
class ReduceScatterOp(_CollectiveOp):
    """Collective: the elementwise `reduce` of src over the group, split in group-size blocks; dst = the caller's."""

    name = "neuron.reduce_scatter"
    OPCODE: ClassVar[str] = "reduce_scatter"

    reduce = opt_prop_def(StringAttr)


@irdl_op_definition
class AllToAllOp(_CollectiveOp):
    """Collective: src's j-th block goes to the group's j-th rank; dst = the blocks received, in rank order. The
    blocks are equal, or (uneven) `input_splits` and `output_splits` give their element counts."""

    name = "neuron.all_to_all"
    OPCODE: ClassVar[str] = "all_to_all"

    input_splits = opt_prop_def(DenseArrayBase)
    output_splits = opt_prop_def(DenseArrayBase)


@irdl_op_definition
class BroadcastOp(_CollectiveOp):
    """Collective: dst = the src of the group's `root`-th rank (its position in the replica group), on every rank.

    ```mlir
    neuron.broadcast collective dst %y[0, [[1, 4096]]], src %x[0, [[1, 4096]]]
        {root = 1 : i64, replica_groups = [array<i64: 0, 1>]} : memref<...>, memref<...>
    ```
    """

    name = "neuron.broadcast"
    OPCODE: ClassVar[str] = "broadcast"

    root = opt_prop_def(IntegerAttr)


COLLECTIVE_OPS: tuple[type[InstructionOp], ...] = (AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, BroadcastOp)

INSTRUCTION_OPS: tuple[type[InstructionOp], ...] = (
    MatmulOp,
    ActivationOp,
    TensorTensorOp,
    TensorScalarOp,
    ScalarTensorTensorOp,
    TensorReduceOp,
    TensorCopyOp,
    SelectOp,
    MemsetOp,
    IotaOp,
    AffineSelectOp,
    GpsimdKernelOp,
    DmaCopyOp,
    DmaTransposeOp,
    *COLLECTIVE_OPS,
)
OPCODE_TO_OP: dict[str, type[InstructionOp]] = {op.OPCODE: op for op in INSTRUCTION_OPS}


# Where each operand definition's operand sits, per value of an instruction's operand segment sizes (the bytes of
# the property): -1 for an absent optional operand.
_SEGMENT_STARTS: dict[bytes, tuple[int, ...]] = {}


class _SegmentedOperand:
    """An instruction's operand by name, located through `_SEGMENT_STARTS`.

    xDSL's accessor decodes the segment sizes property on every read; the passes read instructions' operands by
    role in their inner loops (footprints, costs, buffers), where that decoding was most of their time. The value
    read is the same: the operand at the start of its segment, None for an empty optional one."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __get__(self, op: Operation | None, owner: type | None = None) -> Any:
        if op is None:
            return self
        sizes = op.properties["operandSegmentSizes"]
        assert isinstance(sizes, DenseArrayBase)
        key = sizes.data.data
        starts = _SEGMENT_STARTS.get(key)
        if starts is None:
            found, position = [], 0
            for size in sizes.get_values():
                found.append(position if size else -1)
                position += int(size)
            starts = _SEGMENT_STARTS[key] = tuple(found)
        start = starts[self.index]
        return None if start < 0 else op._operands[start]  # the tuple `op.operands` wraps, read directly

    def __set__(self, op: Operation, value: object) -> None:
        raise NotImplementedError("an instruction's operands are replaced through its operand list, not by name")


for _instruction in INSTRUCTION_OPS:
    for _index, (_name, _) in enumerate(_instruction.get_irdl_definition().operands):
        setattr(_instruction, _name, _SegmentedOperand(_index))


def _alloc_key(op: Operation) -> Hashable:
    """All `AllocOp.verify_` reads: its type, address and attributes, and the module's target."""
    return (*value_key(op), id(target_of(op)))


# An instruction's id and waits (neuron-insert-sync's numbering): its verifier asks only whether they are there.
_NUMBERING = frozenset(("id", "waits"))


def _instruction_key(op: Operation) -> Hashable:
    """All an instruction's verification reads: its values, the target, and the address of each buffer it
    accesses in a role whose address the rules read (`isa.READS_ADDRESSES`, `_rule_operand`); the buffers
    themselves only through their types. After memory allocation every buffer has an address of its own, so keys
    holding every address would all differ: only a matmul's PSUM tile's is there."""
    assert isinstance(op, InstructionOp)
    roles = isa.READS_ADDRESSES.get(op.OPCODE)
    addresses: tuple[Attribute | None, ...] = ()
    if roles:
        buffers = [getattr(op, role) for role in sorted(roles)]
        addresses = tuple(
            buffer.owner.address if buffer is not None and isinstance(buffer.owner, AllocOp) else None
            for buffer in buffers
        )
    return (*value_key(op, _NUMBERING), addresses, id(target_of(op)))


# Unrolled loops repeat each instruction with equal patterns and buffer types: inside `verify_module` each
# distinct one is checked once. Collectives are left out: their rules read the module's process groups.
AllocOp.verify_ = memoized_verify(AllocOp.verify_, _alloc_key)  # type: ignore[method-assign]
for _instruction in INSTRUCTION_OPS:
    if _instruction not in COLLECTIVE_OPS:
        _instruction.verify_ = memoized_verify(_instruction.verify_, _instruction_key)  # type: ignore[method-assign]

Neuron = Dialect(
    "neuron",
    [AllocOp, ViewOp, *INSTRUCTION_OPS],
    [EngineAttr, TargetAttr, AccessPatternAttr],
)
