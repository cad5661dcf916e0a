"""Translate neuron IR into the runtime program it denotes: the step from the compiler to the machine.

Input contract: a module whose `@entry` function holds only neuron instructions, `neuron.alloc`/`neuron.view`
buffers, index arithmetic (`arith` on `index` and integer constants) and `scf.for` loops that carry no values,
as `convert-tile-to-neuron` and the neuron-level passes leave it. With `require_allocated`, every on-chip buffer
must have its address (`neuron-allocate-memory`); without it, buffers lacking one get fresh, non-overlapping
addresses, and `memory_sizes_needed` says how far the simulated memories must grow to hold them. `index`
arguments are size arguments, ranged by the function's `neuron.size_arguments`.

Output guarantee: `build_program` returns a `runtime.program.Program` in which buffers become the memory plan,
`scf.for` loops stay `Loop` nodes, index arithmetic becomes `ScalarOp`s on registers (folded when static) and
each instruction op becomes the `Instruction` of the same opcode, at the op's source location; size arguments
become the program's scalar inputs (`ScalarInput`), whose registers the call's values start. IR outside the
contract raises `ProgramBuildError` naming the op and its source line. The program is not validated here: the
runtime's validator (`runtime/validate.py`) accepts it before it runs or is written.

This one translation serves every consumer, so what a bundle runs and what `neuron-opt --check-semantics`
executes are the same program: the frontend and the bundle writer (`emit_bundle.py`) build with it, and the
neuron level's reference semantics are this translation followed by a run on the simulator (`semantics.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import neuron, tile
from neuron_mlir.ir.dialects.memory import memory_of
from neuron_mlir.ir.dialects.neuron import InstructionOp
from neuron_mlir.ir.dialects.torch import SIZE_ARGUMENTS_ATTR, size_arguments
from neuron_mlir.ir.locations import at_source, describe_location
from neuron_mlir.ir.semantics.structured import InterpretationError, find_function
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import Memory, Target
from neuron_mlir.runtime.isa import DYNAMIC, scalar_op
from neuron_mlir.runtime.program import (
    Access,
    AttrValue,
    BufferDecl,
    Instruction,
    Loop,
    Node,
    Program,
    Reg,
    Scalar,
    ScalarInput,
    ScalarOp,
    TensorBinding,
    row_major_strides,
)

# Index arithmetic that is one register-ALU operation. arith.divsi and arith.remsi round toward zero while the
# register ALU's floordiv and rem round toward negative infinity (`runtime.isa.SCALAR_OPS`): they are built
# from those by `_Builder.truncating`.
_SCALAR_OPS: dict[type[Operation], str] = {
    arith.AddiOp: "add",
    arith.SubiOp: "sub",
    arith.MuliOp: "mul",
    arith.FloorDivSIOp: "floordiv",
    arith.MinSIOp: "min",
    arith.MaxSIOp: "max",
}
_CMPI_OPS = {0: "eq", 1: "ne", 2: "lt", 3: "le", 4: "gt", 5: "ge"}


class ProgramBuildError(InterpretationError):
    """The IR is not a neuron-level program (an op with no instruction, a dynamic shape, ...)."""


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass
class _Builder:
    require_allocated: bool
    target: Target
    buffers: list[BufferDecl] = field(default_factory=list)
    buffer_index: dict[SSAValue, int] = field(default_factory=dict)
    scalars: dict[SSAValue, Scalar] = field(default_factory=dict)
    registers: int = 0
    locations: list[str] = field(default_factory=list)
    location_index: dict[str, int] = field(default_factory=dict)
    next_id: int = 0
    fresh_address: dict[Memory, int] = field(default_factory=dict)

    def register(self) -> Reg:
        self.registers += 1
        return Reg(self.registers - 1)

    def location(self, op: Operation) -> int:
        text = describe_location(op.location)
        if not text:
            return -1
        if text not in self.location_index:
            self.location_index[text] = len(self.locations)
            self.locations.append(text)
        return self.location_index[text]

    def scalar(self, value: SSAValue) -> Scalar:
        if value not in self.scalars:
            raise ProgramBuildError(f"index value {value.name_hint or value} is not computed by index arithmetic")
        return self.scalars[value]

    # ---- buffers -----------------------------------------------------------------------------------------------

    def add_buffer(self, value: SSAValue, name: str, address: int | None) -> int:
        memref_type = value.type
        assert isinstance(memref_type, MemRefType)
        memory = memory_of(memref_type)
        dtype = runtime_dtype_name(memref_type.element_type)
        shape = memref_type.get_shape()
        if 0 in shape:  # a tensor without elements (an empty argument): its binding reads and writes nothing
            shape = (1,)
        if address is None:
            if self.require_allocated and memory is not Memory.HBM:
                raise ProgramBuildError(f"buffer {name} has no address: run neuron-allocate-memory first")
            row = int(np.prod(shape if memory is Memory.HBM else shape[1:], dtype=np.int64)) * itemsize(dtype)
            # PSUM buffers start on a bank so that no matmul output straddles two banks
            alignment = {
                Memory.PSUM: self.target.psum_bank_bytes,
                Memory.SBUF: self.target.on_chip_alignment_bytes,
                Memory.HBM: self.target.hbm_alignment_bytes,
            }[memory]
            address = _align(self.fresh_address.get(memory, 0), alignment)
            self.fresh_address[memory] = address + row
        self.buffers.append(BufferDecl(name, memory, address, shape, dtype))
        self.buffer_index[value] = len(self.buffers) - 1
        return len(self.buffers) - 1

    def root(self, value: SSAValue) -> SSAValue:
        owner = value.owner
        while isinstance(owner, neuron.ViewOp | tile.ViewOp):
            value = owner.source
            owner = value.owner
        return value

    # ---- nodes -------------------------------------------------------------------------------------------------

    def nodes(self, ops: Sequence[Operation]) -> list[Node]:
        result: list[Node] = []
        for op in ops:
            self.node(op, result)
        return result

    def node(self, op: Operation, out: list[Node]) -> None:
        """Append the nodes `op` denotes to `out` (none for allocations and static index arithmetic)."""
        if isinstance(op, neuron.AllocOp | neuron.ViewOp | func.ReturnOp | scf.YieldOp):
            return
        if isinstance(op, arith.ConstantOp):
            if not isinstance(op.value, IntegerAttr):
                raise ProgramBuildError(f"arith.constant of {op.value} has no meaning at the neuron level")
            self.scalars[op.result] = op.value.value.data
        elif isinstance(op, arith.IndexCastOp):
            self.scalars[op.result] = self.scalar(op.input)
        elif (name := _SCALAR_OPS.get(type(op))) is not None or isinstance(op, arith.CmpiOp):
            if isinstance(op, arith.CmpiOp):
                name = _CMPI_OPS[op.predicate.value.data]
            assert name is not None
            lhs, rhs = self.scalar(op.operands[0]), self.scalar(op.operands[1])
            self.scalars[op.results[0]] = self.folding(op, lambda: self.scalar_op(name, lhs, rhs, out))
        elif isinstance(op, arith.DivSIOp | arith.RemSIOp):
            lhs, rhs = self.scalar(op.operands[0]), self.scalar(op.operands[1])
            remainder = isinstance(op, arith.RemSIOp)
            self.scalars[op.results[0]] = self.folding(op, lambda: self.truncating(remainder, lhs, rhs, out))
        elif isinstance(op, scf.ForOp):
            out.append(self.loop(op))
        elif isinstance(op, InstructionOp):
            out.append(self.instruction(op))
        else:
            raise ProgramBuildError(f"{op.name} is not a neuron instruction{at_source(op)}")

    @staticmethod
    def folding(op: Operation, compute: Callable[[], Scalar]) -> Scalar:
        """`compute()`, with a division of constants by zero reported as `op`'s error."""
        try:
            return compute()
        except ZeroDivisionError:
            raise ProgramBuildError(f"{op.name} divides by a zero constant{at_source(op)}") from None

    def scalar_op(self, name: str, lhs: Scalar, rhs: Scalar, out: list[Node]) -> Scalar:
        """`lhs <name> rhs` on the register ALU: folded when both are known, else a ScalarOp appended to `out`."""
        if isinstance(lhs, int) and isinstance(rhs, int):
            return scalar_op(name, lhs, rhs)
        dest = self.register()
        out.append(ScalarOp(dest, name, lhs, rhs))
        return dest

    def truncating(self, remainder: bool, lhs: Scalar, rhs: Scalar, out: list[Node]) -> Scalar:
        """arith.remsi (`remainder`) or arith.divsi: rounded toward zero, from the register ALU's floor forms.

        The two roundings differ exactly when the floor remainder is not zero and the operands' signs differ;
        then the truncated quotient is one more than the floor quotient, and the remainder one divisor less.
        With operands whose signs are known (a loop induction counting up from 0 by a positive constant, say)
        the correction folds to 0, in the IR here or in the validator's range analysis of the registers.
        """
        floor_remainder = self.scalar_op("rem", lhs, rhs, out)
        signs_differ = self.scalar_op("ne", self.scalar_op("lt", lhs, 0, out), self.scalar_op("lt", rhs, 0, out), out)
        correction = self.scalar_op("mul", signs_differ, self.scalar_op("ne", floor_remainder, 0, out), out)
        if remainder:
            return self.scalar_op("sub", floor_remainder, self.scalar_op("mul", correction, rhs, out), out)
        return self.scalar_op("add", self.scalar_op("floordiv", lhs, rhs, out), correction, out)

    def loop(self, op: scf.ForOp) -> Loop:
        if op.iter_args:
            raise ProgramBuildError("loops at the neuron level carry no values (run convert-tile-to-neuron)")
        step = self.scalar(op.step)
        if not isinstance(step, int) or step <= 0:
            raise ProgramBuildError("loop steps must be positive constants")
        induction = self.register()
        self.scalars[op.body.block.args[0]] = induction
        lower, upper = self.scalar(op.lb), self.scalar(op.ub)
        return Loop(induction, lower, upper, step, tuple(self.nodes(list(op.body.block.ops))))

    def access(self, op: InstructionOp, role: str) -> Access:
        entry = op.access(role)
        assert entry is not None
        buffer, pattern, dynamic = entry
        root = self.root(buffer)
        if root not in self.buffer_index:
            raise ProgramBuildError(f"{op.name}: operand {role} is not a function argument or neuron.alloc")
        offset_reg = None
        offset = pattern.offset.data
        if dynamic is not None:
            value = self.scalar(dynamic)
            if isinstance(value, int):
                offset += value
            else:
                offset_reg = value
        return Access(
            buffer=self.buffer_index[root],
            pattern=pattern.dims,
            offset=offset,
            offset_reg=offset_reg,
            partition_start=pattern.partition_start.data,
            partitions=pattern.partitions.data,
        )

    def instruction(self, op: InstructionOp) -> Instruction:
        operands = {role: self.access(op, role) for role in op.present_roles()}
        attrs: dict[str, AttrValue] = {}
        specs = op.spec().attr_specs
        for name, value in op.attribute_values().items():
            # an attribute an operand gives is that operand's value: a register, or a constant folded here (an
            # i1 condition folds to 0 or 1, which a bool attribute encodes as false or true)
            if value is DYNAMIC:
                value = self.scalar(getattr(op, f"{name}_dynamic"))
                if isinstance(value, int) and specs[name].kind == "bool":
                    value = bool(value)
            attrs[name] = value
        if op.instruction_id is not None:
            instruction_id = op.instruction_id.value.data
        else:
            instruction_id = self.next_id
        self.next_id = max(self.next_id, instruction_id) + 1
        waits = tuple(int(w) for w in op.waits.get_values()) if op.waits is not None else ()
        return Instruction(
            id=instruction_id,
            opcode=op.OPCODE,
            engine=op.engine_kind,
            operands=operands,
            attrs=attrs,
            queue=op.queue.value.data if op.queue is not None else 0,
            waits=waits,
            location=self.location(op),
        )


def build_program(
    module: ModuleOp, entry: str = "main", require_allocated: bool = False, compiler_version: str = ""
) -> Program:
    """The runtime program a neuron-level function denotes (see the module docstring)."""
    function = find_function(module, entry)
    target = neuron.target_of(module)
    builder = _Builder(require_allocated, target)
    body_ops = list(function.body.block.ops)
    for op in function.body.walk():
        if isinstance(op, neuron.AllocOp):
            name = op.buffer.name_hint or f"buffer{len(builder.buffers)}"
            address = op.address.value.data if op.address is not None else None
            builder.add_buffer(op.buffer, name, address)
    # arguments live in HBM after the program's own scratch
    hbm_end = builder.fresh_address.get(Memory.HBM, 0)
    for decl in builder.buffers:
        if decl.memory is Memory.HBM:
            size = int(np.prod(decl.shape, dtype=np.int64)) * itemsize(decl.dtype)
            hbm_end = max(hbm_end, decl.address + size)
    builder.fresh_address[Memory.HBM] = _align(hbm_end, target.hbm_alignment_bytes)
    inputs = []
    scalars: list[ScalarInput] = []
    ranges = _size_ranges(function)
    taken: set[str] = set()
    for index, arg in enumerate(function.body.block.args):
        if isinstance(arg.type, IndexType):  # a size argument: a register the call's value starts
            if len(scalars) >= len(ranges):
                raise ProgramBuildError(
                    f"@{function.sym_name.data}: index argument {index} has no range in {SIZE_ARGUMENTS_ATTR}"
                )
            name, lower, upper = ranges[len(scalars)]
            register = builder.register()
            builder.scalars[arg] = register
            scalars.append(ScalarInput(name, register, lower, upper))
            continue
        name = arg.name_hint or f"arg{index}"
        name = name if name not in taken else f"{name}_{index}"
        taken.add(name)
        buffer = builder.add_buffer(arg, name, None)
        assert isinstance(arg.type, MemRefType)
        shape = arg.type.get_shape()
        inputs.append(TensorBinding(name, buffer, shape, row_major_strides(shape), 0))
    body = builder.nodes(body_ops)
    terminator = function.body.block.last_op
    outputs = []
    if isinstance(terminator, func.ReturnOp):
        for index, value in enumerate(terminator.operands):
            memref_type = value.type
            assert isinstance(memref_type, MemRefType)
            strides, offset = tile.memref_strides(memref_type)
            root = builder.root(value)
            outputs.append(
                TensorBinding(f"out{index}", builder.buffer_index[root], memref_type.get_shape(), strides, offset)
            )
    return Program(
        target=target.name,
        buffers=builder.buffers,
        inputs=inputs,
        outputs=outputs,
        body=body,
        num_registers=builder.registers,
        locations=builder.locations,
        entry=function.sym_name.data,
        compiler_version=compiler_version,
        scalars=scalars,
    )


def _size_ranges(function: func.FuncOp) -> list[tuple[str, int, int]]:
    """The (name, lower, upper) of each size argument of `function`, in order (`SIZE_ARGUMENTS_ATTR`)."""
    return [(size.name, size.lower, size.upper) for size in size_arguments(function)]


def memory_sizes_needed(program: Program) -> dict[str, int] | None:
    """Per-partition SBUF/PSUM sizes covering every buffer, when they exceed the target's (unallocated IR)."""
    from neuron_mlir.runtime.hardware import get_target

    target = get_target(program.target)
    needed = {"sbuf": target.sbuf_bytes_per_partition, "psum": target.psum_bytes_per_partition}
    for decl in program.buffers:
        if decl.memory is Memory.HBM:
            continue
        row = int(np.prod(decl.shape[1:], dtype=np.int64)) * itemsize(decl.dtype)
        end = _align(decl.address + row, target.on_chip_alignment_bytes)
        needed[decl.memory.value] = max(needed[decl.memory.value], end)
    if needed["sbuf"] == target.sbuf_bytes_per_partition and needed["psum"] == target.psum_bytes_per_partition:
        return None
    return needed


def is_synchronised(program: Program) -> bool:
    """Whether `program` carries semaphore waits, the mark `neuron-insert-sync` leaves.

    Only synchronised programs are meant to be race free, so only their runs check races: before
    `neuron-insert-sync` the IR orders nothing between engines. (Instruction ids say nothing here: the
    translation numbers every instruction that has none.)
    """
    return any(instruction.waits for instruction in program.instructions())
