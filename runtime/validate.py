"""Checks that a `Program` is safe and meaningful to run, before any instruction runs.

`validate_program` is the single gate in front of the simulator: `bundle.read_bundle` calls it on every decoded
bundle and `simulator.run_program` on every in-memory program. It checks, and on the first violation raises one
`BundleError` naming the instruction id and operand role (or the buffer, binding or loop) at fault:

* types and ranges of every field (a hand-built or decoded Program may hold anything);
* the memory plan: known dtypes, buffers inside SBUF/PSUM rows and HBM capacity (this also rejects sizes that
  would allocate absurd amounts of host memory), constants matching their buffers, bindings inside theirs;
* each instruction's encoding: known opcode and engine, operand roles, attribute names and types, accesses
  inside their buffers' partitions; then the instruction set's rules for it, `runtime.isa.check_instruction`
  (the same function the neuron dialect's verifiers call): engine, DMA queue, which engine may read or write
  which memory, partition counts and start partitions, free-pattern limits, attribute values, per-opcode
  shapes and dtypes, matmul tile limits, a matmul's PSUM destination inside one bank;
* ids unique, waits naming existing ids, register numbers in range, loop steps non-zero;
* with an abstract interpretation of the register program (strided intervals: every register value lies in
  `{lo + k * stride} ∩ [lo, hi]`), every access inside its buffer for every value its offset register can take
  (and a matmul's destination inside one PSUM bank),
  loop trip counts bounded, no divisor that can be zero, and no two matmul accumulation groups writing
  overlapping-but-different PSUM regions while both may be in flight (neither yet read by another engine).

Registers are 32-bit: they start at 0 (a scalar argument's register at any value of its declared range, each
checked), ScalarOps wrap to int32, and a loop sets its induction register to
`lower + k * step` at the start of each iteration (bounds are read once, at loop entry).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from neuron_mlir.runtime import dtypes, hardware, isa
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.program import (
    Access,
    BufferDecl,
    Instruction,
    Loop,
    Node,
    Program,
    Reg,
    ScalarInput,
    ScalarOp,
    TensorBinding,
)


class BundleError(ValueError):
    """A bundle or program that must not run: the message says what is wrong and where."""


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_BUFFERS = 1 << 16
MAX_REGISTERS = 1 << 16
MAX_INSTRUCTIONS = 1 << 20
MAX_LOCATIONS = 1 << 20
MAX_NESTING = 32
MAX_BINDING_RANK = 16
# A loop is analysed round by round (round k covers its first k iterations) until its register ranges stop
# growing or every iteration is covered; registers still growing after this many rounds, or once the whole
# analysis has visited this many nodes, are widened to any 32-bit value.
_MAX_EXACT_ROUNDS = 1024
_VISIT_BUDGET = 300_000


@dataclass(frozen=True)
class MemorySizes:
    """The memories a program is checked against and simulated with."""

    partitions: int
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    hbm_bytes: int

    def row_bytes(self, memory: Memory) -> int:
        if memory is Memory.SBUF:
            return self.sbuf_bytes_per_partition
        if memory is Memory.PSUM:
            return self.psum_bytes_per_partition
        return self.hbm_bytes


# The simulator holds SBUF and PSUM in host memory whatever their size; an override past this is a mistake.
MAX_OVERRIDE_ROW_BYTES = 256 * hardware.MIB


def memory_sizes(target: Target, override: Mapping[Any, int] | None = None) -> MemorySizes:
    """The target's memory sizes, optionally replaced per memory.

    `override` maps a `Memory` (or its name 'sbuf', 'psum', 'hbm') to bytes per partition for SBUF and PSUM and
    to total bytes for HBM. The IR's reference interpreter uses it to run programs whose buffers were not yet
    placed within the target's capacity.
    """
    sizes = {
        Memory.SBUF: target.sbuf_bytes_per_partition,
        Memory.PSUM: target.psum_bytes_per_partition,
        Memory.HBM: target.hbm_bytes,
    }
    for key, value in (override or {}).items():
        try:
            memory = Memory(key)
        except ValueError:
            raise BundleError(f"memory_sizes_override: unknown memory {key!r} (expected sbuf, psum or hbm)") from None
        if not _is_int(value) or value <= 0:
            raise BundleError(f"memory_sizes_override[{memory.value}]: expected a positive integer, got {value!r}")
        if memory is not Memory.HBM and value > MAX_OVERRIDE_ROW_BYTES:
            raise BundleError(
                f"memory_sizes_override[{memory.value}]: {value} bytes per partition is more than the simulator "
                f"holds ({MAX_OVERRIDE_ROW_BYTES})"
            )
        sizes[memory] = int(value)
    return MemorySizes(target.partitions, sizes[Memory.SBUF], sizes[Memory.PSUM], sizes[Memory.HBM])


@dataclass
class ValidatedProgram:
    """A program that passed `validate_program`, with the facts the simulator needs."""

    program: Program
    target: Target
    sizes: MemorySizes
    instructions: list[Instruction]  # static instructions in program order
    index_of_id: dict[int, int]  # instruction id -> position in `instructions`
    # The simulator's reusable preparation for this program (plans, memories), filled by `runtime.simulator`.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


# ---- small type predicates ---------------------------------------------------------------------------------


_Entry = TypeVar("_Entry", BufferDecl, TensorBinding)


def _named_entries(kind: str, entries: Sequence[object], expected: type[_Entry]) -> Iterator[tuple[_Entry, str]]:
    """Each of a program's buffers or bindings, once it is an `expected` with a string name, with the way
    diagnostics name it (`input 2 ('x')`)."""
    for index, entry in enumerate(entries):
        if not isinstance(entry, expected):
            raise BundleError(f"{kind} {index}: expected a {expected.__name__}, got {type(entry).__name__}")
        if not isinstance(entry.name, str):
            raise BundleError(f"{kind} {index}: name must be a string")
        yield entry, f"{kind} {index} ('{entry.name}')"


def _is_int(value: object) -> bool:
    if type(value) is int:  # the common case, without the (slow) abstract base class check
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_number(value: object) -> bool:
    if type(value) is int or type(value) is float:
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_bool(value: object) -> bool:
    return isinstance(value, (bool, np.bool_))


def _where(inst: Instruction, role: str | None = None) -> str:
    text = f"instruction {inst.id} ({inst.opcode})"
    return f"{text}, operand '{role}'" if role else text


# ---- strided intervals -------------------------------------------------------------------------------------
# A span (lo, hi, stride) stands for {lo + k * stride | k >= 0} ∩ [lo, hi]; stride 0 iff lo == hi, and
# (hi - lo) % stride == 0 otherwise.

Span = tuple[int, int, int]
TOP: Span = (INT32_MIN, INT32_MAX, 1)


def _span(lo: int, hi: int, stride: int) -> Span:
    if lo < INT32_MIN or hi > INT32_MAX:
        return TOP  # the register wraps: any value
    if lo == hi:
        return (lo, lo, 0)
    stride = abs(stride) or 1
    return (lo, lo + (hi - lo) // stride * stride, stride)


def _const(value: int) -> Span:
    return (value, value, 0)


def _join(a: Span, b: Span) -> Span:
    return _span(min(a[0], b[0]), max(a[1], b[1]), math.gcd(a[2], b[2], abs(a[0] - b[0])))


def _corners(a: Span, b: Span, fn: Any) -> tuple[int, int]:
    values = [fn(x, y) for x in (a[0], a[1]) for y in (b[0], b[1])]
    return min(values), max(values)


def _scalar_span(op: str, a: Span, b: Span) -> Span:
    """Transfer function of a ScalarOp (the caller has ruled out a zero divisor)."""
    if op == "add":
        return _span(a[0] + b[0], a[1] + b[1], math.gcd(a[2], b[2]))
    if op == "sub":
        return _span(a[0] - b[1], a[1] - b[0], math.gcd(a[2], b[2]))
    if op == "mul":
        lo, hi = _corners(a, b, lambda x, y: x * y)
        return _span(lo, hi, math.gcd(a[0] * b[2], b[0] * a[2], a[2] * b[2]))
    if op == "floordiv":
        if b[0] < 0 < b[1]:  # a divisor set around (not through) zero: |x // y| <= |x|
            bound = max(abs(a[0]), abs(a[1]))
            return _span(-bound, bound, 1)
        lo, hi = _corners(a, b, lambda x, y: x // y)
        stride = abs(a[2] // b[0]) if b[2] == 0 and a[2] % b[0] == 0 else 1
        return _span(lo, hi, stride)
    if op == "rem":
        return _rem_span(a, b)
    if op in ("min", "max"):
        pick = min if op == "min" else max
        return _span(pick(a[0], b[0]), pick(a[1], b[1]), math.gcd(a[2], b[2], abs(a[0] - b[0])))
    decided = _decide_comparison(op, a, b)
    return _const(decided) if decided is not None else (0, 1, 1)


def _rem_span(a: Span, b: Span) -> Span:
    """Floor remainder: the sign follows the divisor."""
    if b[2] == 0:
        divisor = b[0]
        if a[2] % divisor == 0:
            return _const(a[0] % divisor)
        if divisor > 0 and a[0] >= 0 and a[1] < divisor:
            return a
        if divisor > 0:
            step = math.gcd(a[2], divisor)
            phase = a[0] % step
            return _span(phase, phase + (divisor - 1 - phase) // step * step, step)
        return _span(divisor + 1, 0, 1)
    if b[0] > 0:
        top = b[1] - 1 if a[0] < 0 else min(a[1], b[1] - 1)
        return _span(0, top, 1)
    if b[1] < 0:
        return _span(b[0] + 1, 0, 1)
    return _span(b[0] + 1, b[1] - 1, 1)  # divisors of both signs: |x % y| < |y|, either sign


def _decide_comparison(op: str, a: Span, b: Span) -> int | None:
    if op == "lt":
        return 1 if a[1] < b[0] else 0 if a[0] >= b[1] else None
    if op == "le":
        return 1 if a[1] <= b[0] else 0 if a[0] > b[1] else None
    if op == "gt":
        return _decide_comparison("lt", b, a)
    if op == "ge":
        return _decide_comparison("le", b, a)
    if a[0] == a[1] == b[0] == b[1]:
        return 1 if op == "eq" else 0
    if a[1] < b[0] or b[1] < a[0]:
        return 0 if op == "eq" else 1
    return None


def _families_overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Can [x, x + width) for some x in span a overlap [y, y + width) for some y in span b?

    Each argument is (lo, hi, stride, width). Exact for the hulls, conservative (ignores the ends) for the phases.
    """
    a_lo, a_hi, a_stride, a_width = a
    b_lo, b_hi, b_stride, b_width = b
    if a_hi + a_width <= b_lo or b_hi + b_width <= a_lo:
        return False
    step = math.gcd(a_stride, b_stride)
    if step == 0:
        return True
    phase = (b_lo - a_lo) % step
    return phase < a_width or step - phase < b_width


# ---- the validator -----------------------------------------------------------------------------------------


@dataclass
class _Operand(isa.Operand):
    """Static facts of one access, derived once: the instruction set's terms, and the validator's own."""

    access: Access
    buffer: BufferDecl
    np_dtype: np.dtype
    low: int  # lowest element of the pattern relative to offset (+ register)
    high: int  # highest
    size: int  # the buffer's `elements_per_row`


class _Validator:
    def __init__(self, program: Program, override: Mapping[Any, int] | None) -> None:
        self.program = program
        if not isinstance(program, Program):
            raise BundleError(f"expected a Program, got {type(program).__name__}")
        if not isinstance(program.target, str) or program.target not in hardware.TARGETS:
            known = ", ".join(hardware.TARGETS)
            raise BundleError(f"unknown target {program.target!r} (known targets: {known})")
        self.target = hardware.TARGETS[program.target]
        self.sizes = memory_sizes(self.target, override)
        self.instructions: list[Instruction] = []
        self.index_of_id: dict[int, int] = {}
        self.operands: dict[int, dict[str, _Operand]] = {}  # keyed by id(instruction)
        # per buffer, filled by `check_buffers`: elements per row (`BufferDecl.elements_per_row`, without its
        # NumPy call) and NumPy dtype, read by every access to it
        self.buffer_elements: list[int] = []
        self.buffer_dtypes: list[np.dtype] = []

    # ---- program-level fields ------------------------------------------------------------------------------

    def run(self) -> ValidatedProgram:
        program = self.program
        for name in ("entry", "compiler_version"):
            if not isinstance(getattr(program, name), str):
                raise BundleError(f"program {name} must be a string")
        if not _is_int(program.num_registers) or not 0 <= program.num_registers <= MAX_REGISTERS:
            raise BundleError(f"num_registers must be an integer in 0..{MAX_REGISTERS}, got {program.num_registers!r}")
        if not isinstance(program.locations, list) or len(program.locations) > MAX_LOCATIONS:
            raise BundleError("locations must be a list of strings")
        for index, text in enumerate(program.locations):
            if not isinstance(text, str):
                raise BundleError(f"location {index} must be a string, got {type(text).__name__}")
        self.check_buffers()
        self.check_constants()
        self.check_bindings("input", program.inputs)
        self.check_bindings("output", program.outputs)
        self.check_scalars()
        if not isinstance(program.body, (list, tuple)):
            raise BundleError("program body must be a list of nodes")
        self.check_nodes(program.body, "body", depth=0)
        for inst in self.instructions:
            for wait in inst.waits:
                if wait not in self.index_of_id:
                    raise BundleError(f"{_where(inst)}: waits on instruction {wait}, which does not exist")
        _Interpreter(self).run(program.body)
        return ValidatedProgram(program, self.target, self.sizes, self.instructions, self.index_of_id)

    def check_scalars(self) -> None:
        names: set[str] = set()
        registers: set[int] = set()
        for position, scalar in enumerate(self.program.scalars):
            where = f"scalar input {position}"
            if not isinstance(scalar, ScalarInput) or not isinstance(scalar.name, str):
                raise BundleError(f"{where}: expected a named scalar input, got {scalar!r}")
            if scalar.name in names:
                raise BundleError(f"{where}: the name {scalar.name!r} is taken by an earlier scalar input")
            self.check_reg(scalar.register, f"{where} ({scalar.name}), register")
            if scalar.register.index in registers:
                raise BundleError(f"{where} ({scalar.name}): register r{scalar.register.index} holds another input")
            ordered = _is_int(scalar.lower) and _is_int(scalar.upper) and scalar.lower <= scalar.upper
            if not (ordered and scalar.lower >= INT32_MIN and scalar.upper <= INT32_MAX):
                raise BundleError(
                    f"{where} ({scalar.name}): range [{scalar.lower!r}, {scalar.upper!r}] is not an ordered pair of "
                    "32-bit integers"
                )
            names.add(scalar.name)
            registers.add(scalar.register.index)

    def check_buffers(self) -> None:
        buffers = self.program.buffers
        if not isinstance(buffers, list) or len(buffers) > MAX_BUFFERS:
            raise BundleError(f"buffers must be a list of at most {MAX_BUFFERS} BufferDecl")
        for buffer, where in _named_entries("buffer", buffers, BufferDecl):
            if not isinstance(buffer.memory, Memory):
                raise BundleError(f"{where}: memory must be hbm, sbuf or psum, got {buffer.memory!r}")
            if not isinstance(buffer.dtype, str) or buffer.dtype not in dtypes.DTYPES:
                raise BundleError(f"{where}: unknown dtype {buffer.dtype!r} (known: {', '.join(dtypes.DTYPES)})")
            if not _is_int(buffer.address) or buffer.address < 0:
                raise BundleError(f"{where}: address must be a non-negative integer, got {buffer.address!r}")
            shape = buffer.shape
            if not isinstance(shape, (tuple, list)) or not all(_is_int(d) and d >= 1 for d in shape) or len(shape) > 16:
                raise BundleError(f"{where}: shape must be a tuple of positive integers, got {shape!r}")
            itemsize = dtypes.itemsize(buffer.dtype)
            self.buffer_dtypes.append(dtypes.numpy_dtype(buffer.dtype))
            if buffer.memory is Memory.HBM:
                limit = self.sizes.hbm_bytes
                self.buffer_elements.append(math.prod(shape))
                nbytes = self.buffer_elements[-1] * itemsize
                if buffer.address + nbytes > limit:
                    raise BundleError(
                        f"{where}: bytes {buffer.address}..{buffer.address + nbytes} exceed the HBM capacity "
                        f"of {limit} bytes on {self.target.name}"
                    )
                continue
            if not shape:
                raise BundleError(f"{where}: an on-chip buffer needs a partition dimension")
            if shape[0] > self.sizes.partitions:
                raise BundleError(f"{where}: {shape[0]} partitions exceed the {self.sizes.partitions} of the core")
            self.buffer_elements.append(math.prod(shape[1:]))
            row = self.buffer_elements[-1] * itemsize
            limit = self.sizes.row_bytes(buffer.memory)
            if buffer.address + row > limit:
                raise BundleError(
                    f"{where}: bytes {buffer.address}..{buffer.address + row} of each partition exceed the "
                    f"{limit} bytes per partition of {buffer.memory.value.upper()}"
                )

    def check_constants(self) -> None:
        constants = self.program.constants
        if not isinstance(constants, dict):
            raise BundleError("constants must be a dict from buffer index to array")
        for index, array in constants.items():
            if not _is_int(index) or not 0 <= index < len(self.program.buffers):
                raise BundleError(f"constant for buffer {index!r}: no such buffer")
            buffer = self.program.buffers[index]
            where = f"constant for buffer {index} ('{buffer.name}')"
            if buffer.memory is not Memory.HBM:
                raise BundleError(f"{where}: constants live in HBM, the buffer is in {buffer.memory.value.upper()}")
            if not isinstance(array, np.ndarray):
                raise BundleError(f"{where}: expected a NumPy array, got {type(array).__name__}")
            if array.dtype != dtypes.numpy_dtype(buffer.dtype) or array.shape != tuple(buffer.shape):
                raise BundleError(
                    f"{where}: array {array.dtype}{list(array.shape)} does not match the buffer "
                    f"{buffer.dtype}{list(buffer.shape)}"
                )

    def check_bindings(self, kind: str, bindings: object) -> None:
        if not isinstance(bindings, list):
            raise BundleError(f"{kind}s must be a list of TensorBinding")
        names = set()
        for binding, where in _named_entries(kind, bindings, TensorBinding):
            if binding.name in names:
                raise BundleError(f"{where}: duplicate {kind} name")
            names.add(binding.name)
            if not _is_int(binding.buffer) or not 0 <= binding.buffer < len(self.program.buffers):
                raise BundleError(f"{where}: buffer {binding.buffer!r} does not exist")
            buffer = self.program.buffers[binding.buffer]
            if buffer.memory is not Memory.HBM:
                raise BundleError(f"{where}: entry tensors live in HBM, buffer '{buffer.name}' is not")
            shape, strides = binding.shape, binding.strides
            if not isinstance(shape, (tuple, list)) or not all(_is_int(d) and d >= 0 for d in shape):
                raise BundleError(f"{where}: shape must be a tuple of non-negative integers, got {shape!r}")
            if (
                not isinstance(strides, (tuple, list))
                or not all(_is_int(s) for s in strides)
                or len(strides) != len(shape)
            ):
                raise BundleError(f"{where}: strides must be a tuple of integers, one per dimension")
            if len(shape) > MAX_BINDING_RANK:
                raise BundleError(f"{where}: rank {len(shape)} exceeds {MAX_BINDING_RANK}")
            if not _is_int(binding.offset) or binding.offset < 0:
                raise BundleError(f"{where}: offset must be a non-negative integer")
            if kind == "input" and binding.buffer in self.program.constants:
                raise BundleError(f"{where}: buffer '{buffer.name}' holds a constant")
            if math.prod(shape) == 0:
                continue
            low = binding.offset + sum(min(0, s * (d - 1)) for s, d in zip(strides, shape, strict=True))
            high = binding.offset + sum(max(0, s * (d - 1)) for s, d in zip(strides, shape, strict=True))
            if low < 0 or high >= self.buffer_elements[binding.buffer]:
                raise BundleError(
                    f"{where}: elements {low}..{high} lie outside buffer '{buffer.name}' of "
                    f"{self.buffer_elements[binding.buffer]} elements"
                )
            if kind == "input" and not isa.injective(tuple(zip(strides, shape, strict=True))):
                raise BundleError(f"{where}: strides {strides} make elements overlap")

    # ---- structure -----------------------------------------------------------------------------------------

    def check_reg(self, reg: object, where: str) -> None:
        if not isinstance(reg, Reg) or not _is_int(reg.index):
            raise BundleError(f"{where}: expected a register, got {reg!r}")
        if not 0 <= reg.index < self.program.num_registers:
            raise BundleError(
                f"{where}: register r{reg.index} is outside the program's {self.program.num_registers} registers"
            )

    def check_scalar(self, value: Any, where: str) -> None:
        if isinstance(value, Reg):
            self.check_reg(value, where)
        elif not _is_int(value) or not INT32_MIN <= value <= INT32_MAX:
            raise BundleError(f"{where}: expected a 32-bit integer or a register, got {value!r}")

    def check_nodes(self, nodes: Sequence[Node], where: str, depth: int) -> None:
        if depth > MAX_NESTING:
            raise BundleError(f"{where}: loops nest deeper than {MAX_NESTING}")
        for position, node in enumerate(nodes):
            here = f"{where}[{position}]"
            if isinstance(node, Instruction):
                self.check_instruction(node)
            elif isinstance(node, ScalarOp):
                self.check_reg(node.dest, f"{here} (scalar op), dest")
                if not isinstance(node.op, str) or node.op not in isa.SCALAR_OPS:
                    raise BundleError(
                        f"{here}: unknown scalar op {node.op!r} (known: {', '.join(sorted(isa.SCALAR_OPS))})"
                    )
                self.check_scalar(node.lhs, f"{here} (scalar op {node.op}), lhs")
                self.check_scalar(node.rhs, f"{here} (scalar op {node.op}), rhs")
            elif isinstance(node, Loop):
                self.check_reg(node.induction, f"{here} (loop), induction")
                self.check_scalar(node.lower, f"{here} (loop), lower bound")
                self.check_scalar(node.upper, f"{here} (loop), upper bound")
                if not _is_int(node.step) or node.step == 0 or not INT32_MIN <= node.step <= INT32_MAX:
                    raise BundleError(f"{here} (loop): step must be a non-zero 32-bit integer, got {node.step!r}")
                if not isinstance(node.body, (tuple, list)):
                    raise BundleError(f"{here} (loop): body must be a sequence of nodes")
                self.check_nodes(node.body, f"{here}.body", depth + 1)
            else:
                raise BundleError(f"{here}: expected an Instruction, ScalarOp or Loop, got {type(node).__name__}")

    def check_instruction(self, inst: Instruction) -> None:
        # Locations (`_where`) are formatted only for an error: formatting them eagerly took a large share of
        # validating a well-formed program, which every compile and every cache hit does.
        if not _is_int(inst.id) or not 0 <= inst.id <= INT32_MAX:
            raise BundleError(f"instruction id must be a non-negative 32-bit integer, got {inst.id!r}")
        if inst.id in self.index_of_id:
            raise BundleError(f"instruction id {inst.id} is used twice")
        if len(self.instructions) >= MAX_INSTRUCTIONS:
            raise BundleError(f"more than {MAX_INSTRUCTIONS} instructions")
        if not isinstance(inst.opcode, str) or inst.opcode not in isa.OPCODES:
            raise BundleError(
                f"instruction {inst.id}: unknown opcode {inst.opcode!r} (known: {', '.join(sorted(isa.OPCODES))})"
            )
        self.index_of_id[inst.id] = len(self.instructions)
        self.instructions.append(inst)
        spec = isa.OPCODES[inst.opcode]
        engine = inst.engine
        if not isinstance(engine, Engine):
            raise BundleError(f"{_where(inst)}: unknown engine {engine!r}")
        if not _is_int(inst.queue):
            raise BundleError(f"{_where(inst)}: queue must be an integer")
        if not isinstance(inst.waits, (tuple, list)) or not all(_is_int(w) for w in inst.waits):
            raise BundleError(f"{_where(inst)}: waits must be a sequence of instruction ids")
        if len(inst.waits) > 1024:
            raise BundleError(f"{_where(inst)}: more than 1024 waits")
        if not _is_int(inst.location) or not -1 <= inst.location < len(self.program.locations):
            raise BundleError(f"{_where(inst)}: location {inst.location!r} is not an index into the location table")
        self.check_attrs(inst, spec)
        self.check_operands(inst, spec)
        queue = inst.queue if engine is Engine.DMA or inst.queue != 0 else None  # the encoding's 0: no queue
        try:
            isa.check_instruction(inst.opcode, engine, queue, self.operands[id(inst)], inst.attrs, self.target)
        except isa.RuleError as error:
            if error.attribute is not None:
                raise BundleError(f"{_where(inst)}, attribute '{error.attribute}': {error.message}") from None
            raise BundleError(f"{_where(inst, error.role)}: {error.message}") from None

    def check_attrs(self, inst: Instruction, spec: isa.OpcodeSpec) -> None:
        attrs = inst.attrs
        if not isinstance(attrs, dict):
            raise BundleError(f"{_where(inst)}: attrs must be a dict")
        for name in _required_attrs(spec):
            if name not in attrs:
                raise BundleError(f"{_where(inst)}: missing required attribute '{name}'")
        for name, value in attrs.items():
            if name not in spec.attrs:
                known = ", ".join(spec.attrs) or "none"
                raise BundleError(f"{_where(inst)}, attribute '{name}': unknown attribute (known: {known})")
            if isinstance(value, Reg):
                where = f"{_where(inst)}, attribute '{name}'"
                if name not in spec.register_attrs:
                    raise BundleError(f"{where}: cannot be a register")
                self.check_reg(value, where)
                continue
            kind = spec.attr_specs[name].kind
            if not _plain_attr_ok(kind, value):
                _check_attr_value(kind, value, f"{_where(inst)}, attribute '{name}'")

    def check_operands(self, inst: Instruction, spec: isa.OpcodeSpec) -> None:
        operands = inst.operands
        if not isinstance(operands, dict):
            raise BundleError(f"{_where(inst)}: operands must be a dict from role to Access")
        required, roles = _operand_roles(spec)
        for role in required:
            if role not in operands:
                raise BundleError(f"{_where(inst)}: missing operand '{role}'")
        infos: dict[str, _Operand] = {}
        for role, access in operands.items():
            if role not in roles:
                raise BundleError(f"{_where(inst)}: unknown operand role {role!r} (roles: {', '.join(spec.roles)})")
            infos[role] = self.check_access(inst, role, access)
        self.operands[id(inst)] = infos

    def check_access(self, inst: Instruction, role: str, access: object) -> _Operand:
        """The access's encoding and its place in its buffer; the instruction set's rules come after."""
        if not isinstance(access, Access):
            raise BundleError(f"{_where(inst, role)}: expected an Access, got {type(access).__name__}")
        index = access.buffer
        if not _is_int(index) or not 0 <= index < len(self.program.buffers):
            raise BundleError(f"{_where(inst, role)}: buffer {index!r} does not exist")
        buffer = self.program.buffers[index]
        memory = buffer.memory
        if access.offset_reg is not None:
            self.check_reg(access.offset_reg, f"{_where(inst, role)}, offset register")
        if not _is_int(access.offset) or abs(access.offset) > 2**40:
            raise BundleError(f"{_where(inst, role)}: offset must be an integer, got {access.offset!r}")
        count, start = access.partitions, access.partition_start
        if not _is_int(start):
            raise BundleError(f"{_where(inst, role)}: partition_start must be an integer")
        if not _is_int(count):
            raise BundleError(f"{_where(inst, role)}: partitions must be an integer")
        pattern = access.pattern
        if not isinstance(pattern, (tuple, list)) or not pattern:
            raise BundleError(f"{_where(inst, role)}: pattern must be a non-empty tuple of (step, num) pairs")
        in_hbm = memory is Memory.HBM
        low = high = 0
        free_count = 1
        for dim in pattern:
            if not (isinstance(dim, (tuple, list)) and len(dim) == 2 and _is_int(dim[0]) and _is_int(dim[1])):
                raise BundleError(
                    f"{_where(inst, role)}: pattern entries must be (step, num) integer pairs, got {dim!r}"
                )
            step, num = dim
            if num < 1 or num > INT32_MAX or abs(step) > INT32_MAX:
                raise BundleError(f"{_where(inst, role)}: pattern entry (step {step}, num {num}) is out of range")
            extent = step * (num - 1)
            if extent < 0:
                low += extent
            else:
                high += extent
            free_count *= num
        if in_hbm:
            if count != 0 or start != 0:
                raise BundleError(f"{_where(inst, role)}: an HBM access has no partition range (partitions must be 0)")
        elif 1 <= count <= self.sizes.partitions and (start < 0 or start + count > buffer.shape[0]):
            # (other counts break the instruction set's rules, which say so)
            raise BundleError(
                f"{_where(inst, role)}: partitions {start}..{start + count - 1} exceed buffer '{buffer.name}' "
                f"({buffer.partitions} partitions)"
            )
        return _Operand(
            role,
            memory,
            buffer.dtype,
            count,
            start,
            tuple(pattern),
            tuple(num for _, num in pattern),
            free_count,
            access.offset if access.offset_reg is None else None,
            buffer.address,
            access,
            buffer,
            self.buffer_dtypes[index],
            low,
            high,
            self.buffer_elements[index],
        )


_OPERAND_ROLES: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
_REQUIRED_ATTRS: dict[str, tuple[str, ...]] = {}


def _operand_roles(spec: isa.OpcodeSpec) -> tuple[tuple[str, ...], frozenset[str]]:
    """An opcode's (required roles, all roles), derived once per opcode."""
    roles = _OPERAND_ROLES.get(spec.name)
    if roles is None:
        roles = _OPERAND_ROLES[spec.name] = (spec.reads + spec.writes, frozenset(spec.roles))
    return roles


def _required_attrs(spec: isa.OpcodeSpec) -> tuple[str, ...]:
    required = _REQUIRED_ATTRS.get(spec.name)
    if required is None:
        required = _REQUIRED_ATTRS[spec.name] = tuple(n for n, d in spec.attrs.items() if d is isa.REQUIRED)
    return required


# ---- attributes --------------------------------------------------------------------------------------------


def _plain_attr_ok(kind: str, value: object) -> bool:
    """Whether `value` is of an attribute `kind`'s type in its commonest sorts (a plain bool, a plain number, a
    string for a named choice); False means only that `_check_attr_value` must decide (and explain a refusal).
    Which names a choice allows is the instruction set's rule (`isa.check_instruction`)."""
    if kind == "bool":
        return type(value) is bool
    if kind == "number":
        return type(value) is float or (type(value) is int and -(2**63) <= value < 2**63)
    if kind == "int":
        return type(value) is int and INT32_MIN <= value <= INT32_MAX
    return kind in isa.CHOICES and type(value) is str


def _check_attr_value(kind: str, value: Any, where: str) -> None:
    if kind == "bool":
        if not _is_bool(value):
            raise BundleError(f"{where}: expected true or false, got {value!r}")
    elif kind == "number":
        if not _is_number(value) or (_is_int(value) and not -(2**63) <= value < 2**63):
            raise BundleError(f"{where}: expected a number, got {value!r}")
    elif kind == "int":
        if not _is_int(value) or not INT32_MIN <= value <= INT32_MAX:
            raise BundleError(f"{where}: expected a 32-bit integer, got {value!r}")
    elif kind == "pattern":
        if not isinstance(value, tuple) or not value:
            raise BundleError(f"{where}: expected (step, num) pairs, got {value!r}")
        for dim in value:
            if not (isinstance(dim, tuple) and len(dim) == 2 and all(_is_int(v) for v in dim)):
                raise BundleError(f"{where}: expected (step, num) integer pairs, got {dim!r}")
            if not INT32_MIN <= dim[0] <= INT32_MAX or not INT32_MIN <= dim[1] <= INT32_MAX:
                raise BundleError(f"{where}: pattern entry {dim!r} is out of range")
    elif kind == "counts":
        if not isinstance(value, tuple) or not all(_is_int(v) and 0 <= v <= INT32_MAX for v in value):
            raise BundleError(f"{where}: expected non-negative integer counts, got {value!r}")
    elif kind == "groups":
        if not isinstance(value, tuple) or not value:
            raise BundleError(f"{where}: expected replica groups (tuples of ranks), got {value!r}")
        for group in value:
            if not (isinstance(group, tuple) and group and all(_is_int(v) and 0 <= v <= INT32_MAX for v in group)):
                raise BundleError(f"{where}: expected a group of non-negative integer ranks, got {group!r}")
    elif not isinstance(value, str) and not (kind == "alu_or_none" and value is None):
        raise BundleError(f"{where}: expected a name, got {value!r}")


# ---- abstract interpretation of the register program -------------------------------------------------------

# An open accumulation group: PSUM partitions [p0, p1) and the byte family (lo, hi, stride, width) it may write.
_Group = tuple[int, int, tuple[int, int, int, int], int]  # (p0, p1, family, instruction id)


@dataclass
class _State:
    regs: list[Span]
    groups: dict[tuple[Any, ...], _Group]

    def copy(self) -> _State:
        return _State(list(self.regs), dict(self.groups))

    def join(self, other: _State, registers: Sequence[int] | None = None) -> _State:
        """The state either of the two may be. `registers`: the only registers in which they may differ (those a
        loop body writes, when `other` is that body's state after starting from this one or one joined with it)."""
        if registers is None:
            regs = [a if a == b else _join(a, b) for a, b in zip(self.regs, other.regs, strict=True)]
        else:
            # (a body writes few of a program's thousands of registers: joining them all, every round of every
            # loop, was half of a large program's validation)
            regs = list(self.regs)
            own, others = self.regs, other.regs
            for index in registers:
                if own[index] != others[index]:
                    regs[index] = _join(own[index], others[index])
        groups = dict(self.groups)
        for key, group in other.groups.items():
            mine = groups.get(key)
            if mine is None or mine == group:
                groups[key] = group
                continue
            lo_family, hi_family = mine[2], group[2]
            joined = _join(lo_family[:3], hi_family[:3])
            groups[key] = (mine[0], mine[1], (*joined, max(lo_family[3], hi_family[3])), mine[3])
        return _State(regs, groups)


class _Interpreter:
    """Walks the program once per loop round with register spans, checking every access against them."""

    def __init__(self, validator: _Validator) -> None:
        self.v = validator
        self.bank = validator.target.psum_bank_bytes
        self.visits = 0
        self._written: dict[int, tuple[int, ...]] = {}  # id(loop) -> `written`

    def written(self, loop: Loop) -> tuple[int, ...]:
        """The registers `loop` writes: its induction, and those its body's scalar ops and loops write."""
        found = self._written.get(id(loop))
        if found is None:
            registers = {loop.induction.index}
            for node in loop.body:
                if isinstance(node, ScalarOp):
                    registers.add(node.dest.index)
                elif isinstance(node, Loop):
                    registers.update(self.written(node))
            found = self._written[id(loop)] = tuple(sorted(registers))
        return found

    def run(self, body: Sequence[Node]) -> None:
        regs = [_const(0)] * self.v.program.num_registers
        for scalar in self.v.program.scalars:  # every value of the declared range
            regs[scalar.register.index] = _span(scalar.lower, scalar.upper, 1)
        state = _State(regs, {})
        self.nodes(body, state, "body")

    def value(self, scalar: int | Reg, state: _State) -> Span:
        return state.regs[scalar.index] if isinstance(scalar, Reg) else _const(int(scalar))

    def nodes(self, nodes: Sequence[Node], state: _State, where: str) -> _State:
        self.visits += len(nodes)
        for position, node in enumerate(nodes):
            if type(node) is Instruction:  # the common case first; `here` is formatted only where needed
                self.instruction(node, state)
                continue
            here = f"{where}[{position}]"
            if isinstance(node, Instruction):
                self.instruction(node, state)
            elif isinstance(node, ScalarOp):
                lhs, rhs = self.value(node.lhs, state), self.value(node.rhs, state)
                if node.op in ("floordiv", "rem") and rhs[0] <= 0 <= rhs[1] and (rhs[2] == 0 or rhs[0] % rhs[2] == 0):
                    raise BundleError(
                        f"{here} (scalar op {node.op}): the divisor may be zero (range {rhs[0]}..{rhs[1]})"
                    )
                state.regs[node.dest.index] = _scalar_span(node.op, lhs, rhs)
            else:
                assert isinstance(node, Loop)
                state = self.loop(node, state, here)
        return state

    def loop(self, loop: Loop, entry: _State, where: str) -> _State:
        lower, upper, step = self.value(loop.lower, entry), self.value(loop.upper, entry), int(loop.step)
        if step > 0:
            max_trips = max(0, -((lower[0] - upper[1]) // step))
            min_trips = max(0, -((lower[1] - upper[0]) // step))
        else:
            max_trips = max(0, -((upper[0] - lower[1]) // -step))
            min_trips = max(0, -((upper[1] - lower[0]) // -step))
        if max_trips > INT32_MAX:
            raise BundleError(f"{where} (loop): up to {max_trips} iterations, more than a 32-bit count")
        if max_trips == 0:
            return entry  # never runs: its instructions were checked structurally, their addresses are moot
        stride = math.gcd(lower[2], step)
        if step > 0:
            lo = lower[0]
            hi = min(upper[1] - 1, lower[1] + (max_trips - 1) * step)
            hi = lo + (hi - lo) // stride * stride if stride else lo
        else:
            hi = lower[1]
            lo = max(upper[0] + 1, lower[0] - (max_trips - 1) * -step)
            lo = hi - (hi - lo) // stride * stride if stride else hi
        induction = _span(lo, hi, stride)
        # the registers a round may change: the others keep their entry values in every state below
        written = self.written(loop)
        current = entry
        rounds = 0
        widened_at = None
        while True:
            state = current.copy()
            state.regs[loop.induction.index] = induction
            out = self.nodes(loop.body, state, f"{where}.body")
            rounds += 1
            following = entry.join(out, written)
            if rounds >= max_trips or following == current:
                break
            if widened_at is None and (rounds >= _MAX_EXACT_ROUNDS or self.visits >= _VISIT_BUDGET):
                widened_at = rounds
            if widened_at is not None:
                # Registers still growing may take any 32-bit value.
                following.regs = [r if r == c else TOP for r, c in zip(following.regs, current.regs, strict=True)]
                if rounds >= widened_at + 2:
                    break
            current = following
        return entry.join(out, written) if min_trips == 0 else out

    def instruction(self, inst: Instruction, state: _State) -> None:
        ops = self.v.operands[id(inst)]
        regs = state.regs
        for operand in ops.values():
            # the bounds test of `check_bounds`, inline (once per operand per loop round), which reports a failure
            offset_reg = operand.access.offset_reg
            if offset_reg is None:
                low = high = operand.access.offset
            else:
                reg = regs[offset_reg.index]
                low, high = reg[0] + operand.access.offset, reg[1] + operand.access.offset
            if low + operand.low < 0 or high + operand.high >= operand.size:
                self.check_bounds(inst, operand, state)
        if inst.opcode == "nc_matmul":
            self.matmul_dst(inst, ops["dst"], state)
            return
        for operand in ops.values():
            if operand.memory is Memory.PSUM:
                self.close_groups(operand, state)

    def offset_span(self, operand: _Operand, state: _State) -> Span:
        access = operand.access
        base = int(access.offset)
        if access.offset_reg is None:
            return _const(base)
        reg = state.regs[access.offset_reg.index]
        return (reg[0] + base, reg[1] + base, reg[2])

    def check_bounds(self, inst: Instruction, operand: _Operand, state: _State) -> None:
        offsets = self.offset_span(operand, state)
        low, high = offsets[0] + operand.low, offsets[1] + operand.high
        size = operand.size
        if low >= 0 and high < size:
            return
        access = operand.access
        unit = "elements per partition" if operand.memory is not Memory.HBM else "elements"
        detail = ""
        if access.offset_reg is not None:
            reg = state.regs[access.offset_reg.index]
            detail = f" (offset {access.offset} + register r{access.offset_reg.index} in {reg[0]}..{reg[1]})"
        raise BundleError(
            f"{_where(inst, operand.role)}: elements {low}..{high}{detail} lie outside buffer "
            f"'{operand.buffer.name}' of {size} {unit}"
        )

    def family(self, operand: _Operand, state: _State) -> tuple[int, int, int, int]:
        """The byte family within a partition row that the access may touch: (lo, hi, stride, width)."""
        itemsize = operand.np_dtype.itemsize
        offsets = self.offset_span(operand, state)
        first = operand.buffer.address + (offsets[0] + operand.low) * itemsize
        last = operand.buffer.address + (offsets[1] + operand.low) * itemsize
        width = (operand.high - operand.low + 1) * itemsize
        return (first, last, offsets[2] * itemsize, width)

    def matmul_dst(self, inst: Instruction, dst: _Operand, state: _State) -> None:
        family = self.family(dst, state)
        if dst.offset is None:  # a static offset's bank is the instruction set's rule, checked already
            self.check_bank(inst, family)
        access = dst.access
        p0, p1 = access.partition_start, access.partition_start + access.partitions
        key = (
            access.buffer,
            p0,
            p1,
            access.offset,
            access.offset_reg.index if access.offset_reg is not None else None,
            tuple(d for d in access.pattern if d[1] > 1),
        )
        for other_key, (q0, q1, other_family, other_id) in state.groups.items():
            if other_key == key or q1 <= p0 or p1 <= q0:
                continue
            if _families_overlap(family, other_family):
                raise BundleError(
                    f"{_where(inst, 'dst')}: writes PSUM bytes overlapping the accumulation region of instruction "
                    f"{other_id}, whose group may still be in flight (no other engine has read it since); "
                    "different accumulation groups need disjoint PSUM regions"
                )
        previous = state.groups.get(key)
        if previous is not None and previous[2] != family:
            joined = _join(previous[2][:3], family[:3])
            family = (*joined, max(previous[2][3], family[3]))
        state.groups[key] = (p0, p1, family, inst.id)

    def check_bank(self, inst: Instruction, family: tuple[int, int, int, int]) -> None:
        """Every row a register-offset matmul destination may start at stays inside one PSUM bank."""
        lo, hi, stride, width = family
        bank = self.bank
        if stride == 0 or stride % bank == 0:
            starts: Sequence[int] = (lo,)
        elif (hi - lo) // stride < 4096:
            starts = range(lo, hi + 1, stride)
        else:
            raise BundleError(f"{_where(inst, 'dst')}: cannot prove the PSUM destination stays inside one bank")
        for start in starts:
            if isa.crosses_bank(start, width, bank):
                raise BundleError(f"{_where(inst, 'dst')}: {isa.bank_crossing(start, width, bank)}")

    def close_groups(self, operand: _Operand, state: _State) -> None:
        if not state.groups:
            return
        family = self.family(operand, state)
        access = operand.access
        p0, p1 = access.partition_start, access.partition_start + access.partitions
        for key, (q0, q1, other_family, _) in list(state.groups.items()):
            if q1 > p0 and p1 > q0 and _families_overlap(family, other_family):
                del state.groups[key]


def validate_program(program: Program, memory_sizes_override: Mapping[Any, int] | None = None) -> ValidatedProgram:
    """Check everything about `program` (see the module docstring); raise `BundleError` on the first problem."""
    try:
        return _Validator(program, memory_sizes_override).run()
    except BundleError:
        raise
    except (
        TypeError,
        AttributeError,
        ValueError,
        OverflowError,
        RecursionError,
        KeyError,
        IndexError,
    ) as error:
        # A field of an unexpected kind that slipped past the type checks: still one clear error.
        raise BundleError(f"malformed program: {type(error).__name__}: {error}") from None
