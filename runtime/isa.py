"""The instruction set the simulator executes: one record per opcode, the one definition of each instruction.

An opcode's record (`OPCODES`, an `OpcodeSpec`) holds its engines, operand roles and attributes, its rules
(`check`) and its semantics (`semantics`, the NumPy function of `runtime.semantics`). It is the contract
between the compiler and the runtime, and everything that asks about an instruction asks its record:

* `check_instruction` is the hardware's rules for one instruction, in terms of `Operand`s (memory, dtype,
  partitions, free pattern of each operand) and attribute values. The neuron dialect's verifiers
  (`ir.dialects.neuron`) and the bundle validator (`runtime.validate`) both call it, each translating its own
  encoding of operands into `Operand`s, so IR that verifies never makes a bundle that is refused for breaking
  a rule of an instruction. A broken rule raises `RuleError`, naming the operand or attribute at fault.
* `semantics` computes what the instruction does, for one instance or for many lanes of instances at once (see
  `runtime.semantics`); the simulator, its loop vectoriser and its tape all run that one function.

The table mirrors the public nki.isa instruction list [nki-isa] (keys in square brackets are defined in
docs/hardware-sources.md); each record's `doc` states the semantics precisely.

Notation: `P` = partitions of the access, `F...` = its free shape. All arithmetic is fp32 inside the engines
(integer ops on GpSimdE are exact 32-bit, 64-bit for int64); results are cast to the destination's dtype,
rounding to nearest even.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from neuron_mlir.runtime import collectives, dtypes, hardware, semantics
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.program import Reg

# Binary ALU operators shared by tensor_tensor, tensor_scalar and scalar_tensor_tensor (arithmetic and bitvec
# operators, [nki-shared]). Comparisons produce 1.0 / 0.0. There is no divide: divide is multiply by reciprocal.
ALU_OPS: frozenset[str] = frozenset(
    {
        "add",
        "subtract",
        "multiply",
        "max",
        "min",
        "abs_max",
        "abs_min",
        "power",
        "is_equal",
        "not_equal",
        "is_ge",
        "is_gt",
        "is_le",
        "is_lt",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "left_shift",
        "right_shift",  # logical shift: the hardware has no arithmetic shift right [nki-shared]
    }
)

# ScalarE activation function table [nki-shared], applied as func(src * scale + bias).
ACTIVATION_FUNCTIONS: frozenset[str] = frozenset(
    {
        "copy",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "relu",
        "sigmoid",
        "tanh",
        "gelu",
        "gelu_dx",
        "gelu_apprx_tanh",
        "silu",
        "silu_dx",
        "erf",
        "softplus",
        "mish",
        "sin",
        "arctan",
        "sign",
        "abs",
        "square",
    }
)

# Functions GpSimdE runs as hand-written vector kernels (its eight cores are general-purpose C/C++ processors
# with 512-bit SIMD [nki-arch-trn1]): only what no VectorE/ScalarE ALU operator or activation function offers.
# Name -> number of tensor inputs. Semantics in `runtime.alu.gpsimd_kernel`, cost per element in `runtime.hardware`.
#   divide        in0 / in1, IEEE fp32 division rounded to nearest (the ALU has no divide, [nki-shared])
#   divide_trunc  in0 / in1 rounded toward zero; exact on integers
#   divide_floor  in0 / in1 rounded toward -inf (PyTorch's floor division); exact on integers
#   fmod          in0 - trunc(in0 / in1) * in1, exactly (the sign of in0, C's fmod); exact on integers
#   remainder     in0 - floor(in0 / in1) * in1, exactly (the sign of in1, Python's %); exact on integers
#   uniform       fp32 in [0, 1) from Philox-4x32-10 of counter in0 under key in1 (counter-based: each element's
#                 value depends only on its counter and the key, never on the order of evaluation)
#   normal        fp32 standard normal, Box-Muller on two words of the same Philox output
#   stochastic_round_bf16
#                 in0 (fp32) rounded to one of its two bf16 neighbours at random: the one further from zero with
#                 probability (distance to the nearer one toward zero) / (their spacing), decided by in1 (uniform
#                 in [0, 1), 24 bits); bf16 values, NaN and infinities pass unchanged. Its mean is in0 exactly.
GPSIMD_KERNELS: dict[str, int] = {
    "divide": 2,
    "divide_trunc": 2,
    "divide_floor": 2,
    "fmod": 2,
    "remainder": 2,
    "uniform": 2,
    "normal": 2,
    "stochastic_round_bf16": 2,
}

# Free-axis reduction operators of tensor_reduce and of activation's accumulate.
REDUCE_OPS: frozenset[str] = frozenset({"add", "max", "min", "multiply", "abs_max"})

# Integer operations of ScalarOp (sequencer register ALU): floordiv and rem round toward negative infinity, as
# the documented floor_divide and mod (the remainder takes the divisor's sign, Python's `%`); MLIR's truncating
# divsi/remsi are built from them (`backend_trn.translate`). Results wrap to the 32-bit registers (`wrap32`).
# `SCALAR_FUNCTIONS` is their one definition.
SCALAR_OPS: frozenset[str] = frozenset(
    {"add", "sub", "mul", "floordiv", "rem", "min", "max", "eq", "ne", "lt", "le", "gt", "ge"}
)


# The comparison subset of ALU_OPS (affine_select's predicate).
COMPARISON_OPS: frozenset[str] = frozenset({"is_equal", "not_equal", "is_ge", "is_gt", "is_le", "is_lt"})

# Bit-vector operators of ALU_OPS: they act on 32-bit integer values (float operands are first converted to
# int32, truncating toward zero and saturating), never on fp32.
BITVEC_OPS: frozenset[str] = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"})

# Sides of an indirect dma_copy: '' (a plain copy), 'src' (a gather) or 'dst' (a scatter).
INDIRECT_SIDES: frozenset[str] = frozenset({"", "src", "dst"})

# Engine access patterns of SBUF/PSUM: sizes are uint16 and steps int16, in elements [nki-arch-trn1].
ENGINE_MAX_NUM = hardware.ACCESS_PATTERN_MAX_NUM
ENGINE_STEP_RANGE = hardware.ACCESS_PATTERN_STEP_RANGE
# Free dimensions of an HBM access (a DMA descriptor's pattern) in the bundle format.
MAX_HBM_DIMS = 8


# ---- operands and attributes in the rules' terms -----------------------------------------------------------


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


class _Dynamic:
    def __repr__(self) -> str:
        return "DYNAMIC"


REQUIRED: Any = _Required()  # the default of an attribute that must be given
# The value of an attribute read from a register when the instruction issues, where no register is named (the
# dialect's `<attr>_dynamic` operands); the validator passes the `program.Reg` itself.
DYNAMIC: Any = _Dynamic()


def is_register_value(value: object) -> bool:
    """Whether an attribute value is known only when the instruction issues (a register)."""
    return value is DYNAMIC or isinstance(value, Reg)


@dataclass(frozen=True)
class Attr:
    """One attribute of an opcode: the kind of its value, its default, whether a register may give it.

    Kinds: 'bool', 'number', 'int', 'pattern' ((step, num) pairs), 'groups' (replica groups: tuples of ranks),
    'counts' (a tuple of non-negative integers; empty when not given), or
    a key of `CHOICES` (a name out of a set).
    """

    kind: str
    default: object = REQUIRED
    register: bool = False


# Named-choice attribute kinds: what the name names (for diagnostics) and the names allowed.
CHOICES: dict[str, tuple[str, frozenset[str]]] = {
    "activation": ("activation function", ACTIVATION_FUNCTIONS),
    "alu": ("ALU operator", ALU_OPS),
    "alu_or_none": ("ALU operator", ALU_OPS),  # may also be None (no second step)
    "reduce": ("reduction", REDUCE_OPS),
    "cmp": ("comparison", COMPARISON_OPS),
    "indirect": ("indirect side", INDIRECT_SIDES),
    "kernel": ("GpSimd kernel", frozenset(GPSIMD_KERNELS)),
    "collective_reduce": ("collective reduction", collectives.REDUCTIONS),
}


@dataclass
class Operand:
    """What the rules know of one operand: where it lives, its element type and the shape of its access.

    The dialect builds these from an op's memrefs and access patterns, the validator from a program's buffers
    and accesses (its own operand facts extend this class).
    """

    role: str
    memory: Memory
    dtype: str  # the storage type's name (`runtime.dtypes`)
    partitions: int  # 0 in HBM
    partition_start: int
    pattern: tuple[tuple[int, int], ...]  # (step, num) per free dimension
    free_shape: tuple[int, ...]  # the pattern's nums
    free_count: int  # elements per partition (in HBM: in all)
    offset: int | None  # the element offset of the access, None when a register adds to it
    address: int | None  # the buffer's byte address (on chip: within each partition), None when not placed

    @classmethod
    def of(
        cls,
        role: str,
        memory: Memory,
        dtype: str,
        partitions: int,
        partition_start: int,
        pattern: tuple[tuple[int, int], ...],
        offset: int | None,
        address: int | None,
    ) -> Operand:
        """The facts of an access; its free shape and element count follow from the pattern."""
        free_shape = tuple(num for _, num in pattern)
        count = math.prod(free_shape)
        return cls(role, memory, dtype, partitions, partition_start, pattern, free_shape, count, offset, address)

    @property
    def elements(self) -> int:
        return max(self.partitions, 1) * self.free_count

    def describe(self) -> str:
        """`[P, elements per partition]` on chip, `[elements]` in HBM (how the rules compare shapes)."""
        return f"[{self.partitions}, {self.free_count}]" if self.partitions else f"[{self.free_count}]"


class RuleError(ValueError):
    """An instruction breaks a rule of the hardware; `role` or `attribute` names what is at fault."""

    def __init__(self, message: str, role: str | None = None, attribute: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.role = role
        self.attribute = attribute


Operands = Mapping[str, Operand]
Attrs = Mapping[str, Any]


# ---- the rules every instruction shares ---------------------------------------------------------------------


def check_instruction(
    opcode: str, engine: Engine, queue: int | None, operands: Operands, attrs: Attrs, target: Target
) -> None:
    """Raise `RuleError` unless the instruction keeps every rule of the hardware (the module docstring).

    `queue` is the DMA queue, None when the instruction has none; `attrs` are the attributes given (defaults
    apply to the others), a register-valued one as a `program.Reg` or `DYNAMIC`. Operand roles and attribute
    names and types are the caller's to check: they are its encoding's.
    """
    spec = OPCODES[opcode]
    attrs = spec.defaults | dict(attrs)
    if engine not in spec.engines:
        allowed = ", ".join(sorted(e.value for e in spec.engines))
        raise RuleError(f"cannot run on the {engine.value} engine (allowed: {allowed})")
    for role, engines in spec.role_engines.items():
        if role in operands and engine not in engines:
            allowed = ", ".join(sorted(e.value for e in engines))
            raise RuleError(f"only the {allowed} engine has it, not the {engine.value} engine", role)
    if engine is Engine.DMA:
        if queue is None:
            raise RuleError("a DMA instruction needs a queue")
        if not 0 <= queue < target.dma_queues:
            raise RuleError(f"DMA queue {queue} is outside 0..{target.dma_queues - 1}")
    elif queue is not None:
        raise RuleError(f"only DMA instructions have a queue (engine is {engine.value})")
    reads, writes = _ENGINE_MEMORIES[engine]
    written = spec.written_roles
    compute = engine is not Engine.DMA
    # Per operand, in the instruction's loop: every instruction of every program passes here.
    for role, operand in operands.items():
        memory, pattern = operand.memory, operand.pattern
        is_write = role in written
        if memory not in (writes if is_write else reads):
            verb = "write" if is_write else "read"
            raise RuleError(f"the {engine.value} engine cannot {verb} {memory.value.upper()}", role)
        if memory is Memory.HBM:
            if len(pattern) > MAX_HBM_DIMS:
                raise RuleError(f"{len(pattern)} free dimensions exceed the {MAX_HBM_DIMS} of an HBM access", role)
        else:
            _check_on_chip(operand, compute, target)
        # an indirect scatter's indexed side spans every row an offset may pick: the rows written are data
        if is_write and not injective(pattern) and attrs.get("indirect") != role:
            raise RuleError(f"the written pattern {list(pattern)} touches some elements twice", role)
    check_attribute_values(spec, attrs, target)
    spec.check(operands, attrs, target)


def check_attribute_values(spec: OpcodeSpec, attrs: Attrs, target: Target) -> None:
    """Raise `RuleError` for an attribute of `attrs` (completed with the defaults) whose value has no meaning: an
    unknown name of a choice, a malformed pattern or replica groups."""
    for name, kind, names in spec.valued_attrs:  # (no register gives any of these)
        value = attrs.get(name)
        if value is not None and value not in names:
            _check_attribute(name, kind, value, target)


# The memories each engine may (read, write), as tuples: membership in a tuple compares members by identity,
# where a frozenset of Enum members hashes each one in Python.
_ENGINE_MEMORIES: dict[Engine, tuple[tuple[Memory, ...], tuple[Memory, ...]]] = {
    engine: (tuple(hardware.ENGINE_READS[engine]), tuple(hardware.ENGINE_WRITES[engine])) for engine in Engine
}


def _check_on_chip(operand: Operand, compute: bool, target: Target) -> None:
    """An SBUF or PSUM access: its partitions, and for a compute engine (`compute`) its free pattern."""
    role, pattern = operand.role, operand.pattern
    count, start = operand.partitions, operand.partition_start
    if not 1 <= count <= target.partitions:
        raise RuleError(f"{count} partitions; an on-chip access covers 1..{target.partitions}", role)
    if start and compute and start not in hardware.allowed_partition_starts(count):
        allowed_starts = ", ".join(map(str, hardware.allowed_partition_starts(count)))
        raise RuleError(
            f"an access of {count} partitions cannot start at partition {start} (allowed: {allowed_starts})", role
        )
    if len(pattern) > target.max_free_dims:
        raise RuleError(f"{len(pattern)} free dimensions exceed the hardware's {target.max_free_dims}", role)
    if compute:
        low, high = ENGINE_STEP_RANGE
        for step, num in pattern:
            if num > ENGINE_MAX_NUM or not low <= step <= high:
                raise RuleError(
                    f"(step {step}, num {num}) does not fit an engine access pattern (num at most "
                    f"{ENGINE_MAX_NUM}, step within int16)",
                    role,
                )


def injective(pattern: tuple[tuple[int, int], ...]) -> bool:
    """A sufficient test that a (step, num) pattern never maps two indices to one element."""
    if len(pattern) == 1:  # the common case, exactly
        step, num = pattern[0]
        return step != 0 or num == 1
    span = 0
    for step, num in sorted((d for d in pattern if d[1] > 1), key=lambda d: abs(d[0])):
        if abs(step) <= span:
            return False
        span += abs(step) * (num - 1)
    return True


def _check_attribute(name: str, kind: str, value: object, target: Target) -> None:
    choices = CHOICES.get(kind)
    if choices is not None:
        what, names = choices
        if value not in names:
            known = ", ".join(sorted(choice or "''" for choice in names))
            raise RuleError(f"unknown {what} {value!r} (known: {known})", attribute=name)
    elif kind == "groups":
        _check_replica_groups(name, value)
    elif kind == "counts":
        counts: Any = value
        if not isinstance(counts, tuple) or any(not isinstance(c, int) or c < 0 for c in counts):
            raise RuleError(f"{value!r} is not a list of non-negative counts", attribute=name)
    elif kind == "pattern":
        pattern: Any = value
        if not 1 <= len(pattern) <= target.max_free_dims:
            raise RuleError(
                f"{len(pattern)} (step, num) pairs; a pattern has 1 to {target.max_free_dims}", attribute=name
            )
        for step, num in pattern:
            if not 1 <= num <= ENGINE_MAX_NUM:
                raise RuleError(f"pattern entry (step {step}, num {num}) is out of range", attribute=name)


def _check_replica_groups(name: str, value: object) -> None:
    """Replica groups: one or more groups of distinct non-negative ranks, all of one size, no rank in two."""
    groups: Any = value
    if not isinstance(groups, tuple) or not groups or not all(isinstance(g, tuple) and g for g in groups):
        raise RuleError("replica groups must be one or more non-empty groups of ranks", attribute=name)
    seen: set[int] = set()
    for group in groups:
        if any(not isinstance(rank, int) or rank < 0 for rank in group):
            raise RuleError(f"group {list(group)} holds a rank that is not a non-negative integer", attribute=name)
        if len(set(group)) != len(group) or seen & set(group):
            raise RuleError(f"rank(s) {sorted(seen & set(group)) or list(group)} appear twice", attribute=name)
        seen |= set(group)
    if len({len(group) for group in groups}) != 1:
        sizes = [len(group) for group in groups]
        raise RuleError(
            f"groups of different sizes {sizes}: every group of a collective has as many ranks", attribute=name
        )


def crosses_bank(first_byte: int, width: int, bank: int) -> bool:
    """Whether bytes [first_byte, first_byte + width) of a partition lie in more than one PSUM bank."""
    return first_byte // bank != (first_byte + width - 1) // bank


def bank_crossing(first_byte: int, width: int, bank: int) -> str:
    """The diagnostic of an access that `crosses_bank`."""
    return f"bytes {first_byte}..{first_byte + width - 1} of each partition cross a {bank}-byte PSUM bank boundary"


# ---- each opcode's own rules --------------------------------------------------------------------------------


def _same_elements(first: Operand, second: Operand) -> None:
    if first.partitions != second.partitions or first.free_count != second.free_count:
        raise RuleError(
            f"{first.role} is {first.describe()} but {second.role} is {second.describe()} (partitions, elements "
            "per partition)"
        )


def _column(ops: Operands, role: str, partitions: int) -> None:
    operand = ops.get(role)
    if operand is not None and (operand.partitions != partitions or operand.free_count != 1):
        raise RuleError(f"must be a per-partition column [{partitions}, 1], got {operand.describe()}", role)


def _no_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    """Nothing beyond the rules every instruction shares."""


# The operands whose `address` the rules read, by opcode: a matmul's rows lie in one PSUM bank. A caller may
# leave the address of any other operand out (None), as the dialect's verifier does, so that it checks
# instructions differing only in where their buffers lie once (`ir/verification.py`).
READS_ADDRESSES: dict[str, frozenset[str]] = {"nc_matmul": frozenset({"dst"})}


def _matmul_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    stationary, moving, dst = ops["stationary"], ops["moving"], ops["dst"]
    for operand in (stationary, moving):
        if operand.dtype not in dtypes.FLOAT_DTYPES:
            raise RuleError(f"TensorE reads float inputs, got {operand.dtype}", operand.role)
    k = stationary.partitions
    m, n = stationary.free_count, moving.free_count
    if moving.partitions != k:
        raise RuleError(f"stationary and moving contract over different partition counts ({k} vs {moving.partitions})")
    if k > target.matmul_max_k:
        raise RuleError(f"contraction size {k} exceeds {target.matmul_max_k}")
    if m > target.matmul_max_stationary_free:
        raise RuleError(f"free size {m} exceeds {target.matmul_max_stationary_free} on {target.name}", "stationary")
    if n > target.matmul_max_moving_free:
        raise RuleError(f"free size {n} exceeds {target.matmul_max_moving_free} on {target.name}", "moving")
    _row_tile_rules(stationary, moving, attrs, target)
    if attrs["is_transpose"]:
        if m != k:
            raise RuleError(f"a transpose needs a square identity, got [{k}, {m}]", "stationary")
        if dst.partitions != n or dst.free_count != k:
            raise RuleError(f"the transpose of moving [{k}, {n}] is [{n}, {k}], dst is {dst.describe()}", "dst")
        expected = moving.dtype if target.matmul_transpose_bit_exact else "f32"
        if dst.dtype != expected:
            raise RuleError(f"a transpose on {target.name} writes {expected}, dst is {dst.dtype}", "dst")
        accumulate = attrs["accumulate"]
        if is_register_value(accumulate) or accumulate:
            raise RuleError("a transpose cannot accumulate")
    else:
        if (stationary.dtype == "f32") != (moving.dtype == "f32"):
            raise RuleError(f"inputs must both be f32 or both narrower, got {stationary.dtype} and {moving.dtype}")
        if dst.partitions != m or dst.free_count != n:
            raise RuleError(f"is {dst.describe()} but the product is [{m}, {n}]", "dst")
        allowed = ("f32", "bf16") if target.matmul_bf16_psum_output else ("f32",)
        if dst.dtype not in allowed:
            raise RuleError(
                f"PSUM accumulation on {target.name} writes {' or '.join(allowed)}, dst is {dst.dtype}", "dst"
            )
    # The rows a matmul writes lie in one PSUM bank. A register offset is the validator's to bound.
    if dst.offset is not None:
        itemsize = dtypes.itemsize(dst.dtype)
        low, high = extent(dst.pattern)
        first = (dst.address or 0) + (dst.offset + low) * itemsize
        width = (high - low + 1) * itemsize
        if crosses_bank(first, width, target.psum_bank_bytes):
            raise RuleError(bank_crossing(first, width, target.psum_bank_bytes), "dst")


def _row_tile_rules(stationary: Operand, moving: Operand, attrs: Attrs, target: Target) -> None:
    """TensorE's row tiling mode [nki-isa]: `row_tile_size` rows of the PE array starting at `row_tile_start`.

    The size is one the target has (`Target.matmul_row_tile_sizes`), the start a multiple of it inside the array,
    and the contraction no larger than the tile. SBUF partitions feed the PE rows one to one (partition p streams
    into row p), so our reading of the published rule is that both operands lie on the tile's own partitions: a
    matmul in the row tile starting at 64 reads partitions 64..127.
    """
    start, size = attrs["row_tile_start"], attrs["row_tile_size"]
    if not size:
        if start:
            raise RuleError(f"row_tile_start {start} needs a row_tile_size")
        return
    if size not in target.matmul_row_tile_sizes:
        allowed = ", ".join(map(str, target.matmul_row_tile_sizes)) or "none"
        raise RuleError(f"row tile size {size} is not one {target.name} has (row tile sizes: {allowed})")
    if start < 0 or start % size or start + size > target.matmul_max_k:
        raise RuleError(
            f"row tile start {start} is not a multiple of the row tile size {size} within the "
            f"{target.matmul_max_k} PE rows"
        )
    for operand in (stationary, moving):
        first, last = operand.partition_start, operand.partition_start + operand.partitions - 1
        if first < start or last >= start + size:
            raise RuleError(
                f"partitions {first}..{last} lie outside the row tile's rows {start}..{start + size - 1} "
                "(partitions feed the PE rows one to one)",
                operand.role,
            )


def row_tile(attrs: Attrs, target: Target) -> tuple[int, int]:
    """The PE rows [first, stop) a matmul with (validated) attributes `attrs` occupies: its row tile, or all."""
    size = attrs.get("row_tile_size", 0)
    if not size:
        return 0, target.matmul_max_k
    start = attrs.get("row_tile_start", 0)
    assert isinstance(start, int)
    assert isinstance(size, int)
    return start, start + size


def extent(pattern: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """The lowest and highest element a (step, num) pattern reaches, relative to its offset."""
    low = high = 0
    for step, num in pattern:
        reach = step * (num - 1)
        if reach < 0:
            low += reach
        else:
            high += reach
    return low, high


def _activation_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    _same_elements(ops["dst"], ops["src"])
    for role in ("bias", "scale_vector", "accumulate_dst"):
        _column(ops, role, ops["dst"].partitions)


def _tensor_tensor_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    _same_elements(ops["dst"], ops["in0"])
    _same_elements(ops["dst"], ops["in1"])
    if ops["in0"].memory is Memory.PSUM and ops["in1"].memory is Memory.PSUM:
        raise RuleError("at most one input may be in PSUM")


def _tensor_scalar_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    _same_elements(ops["dst"], ops["src"])
    for role in ("operand0", "operand1", "accumulate_dst"):
        _column(ops, role, ops["dst"].partitions)
    if "operand1" in ops and attrs["op1"] is None:
        raise RuleError("given without op1", "operand1")
    if "accumulate_dst" in ops:
        if attrs["op1"] is not None:
            raise RuleError("a tensor_scalar that reduces has one operator (no op1)", attribute="op1")
        if attrs["op0"] not in REDUCING_TENSOR_SCALAR_OPS:
            raise RuleError(f"{attrs['op0']} is not arithmetic: a tensor_scalar that reduces has an arithmetic op0",
                            attribute="op0")  # fmt: skip


def _scalar_tensor_tensor_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    _same_elements(ops["dst"], ops["src"])
    _same_elements(ops["dst"], ops["in1"])
    _column(ops, "operand0", ops["dst"].partitions)
    if ops["src"].memory is Memory.PSUM and ops["in1"].memory is Memory.PSUM:
        raise RuleError("src and in1 cannot both be in PSUM")


def _tensor_reduce_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    src, dst = ops["src"], ops["dst"]
    axes = attrs["axes"]
    if not 1 <= axes <= len(src.free_shape):
        raise RuleError(f"cannot reduce {axes} axes of a {len(src.free_shape)}-d free pattern", attribute="axes")
    kept = math.prod(src.free_shape[: len(src.free_shape) - axes])
    if dst.partitions != src.partitions or dst.free_count != kept:
        raise RuleError(f"is {dst.describe()} but src reduced over {axes} axes is [{src.partitions}, {kept}]", "dst")


def _elementwise_rules(*sources: str) -> Callable[[Operands, Attrs, Target], None]:
    """Rules of an instruction whose `sources` pair with dst element by element."""

    def rules(ops: Operands, attrs: Attrs, target: Target) -> None:
        for role in sources:
            _same_elements(ops["dst"], ops[role])

    return rules


def _pattern_fits(ops: Operands, attrs: Attrs) -> None:
    free = tuple(num for _, num in attrs["pattern"])
    if free != ops["dst"].free_shape:
        raise RuleError(
            f"covers the free shape {list(free)}, dst's is {list(ops['dst'].free_shape)}", attribute="pattern"
        )


def _iota_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    _pattern_fits(ops, attrs)


def _affine_select_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    _same_elements(ops["dst"], ops["on_true"])
    _pattern_fits(ops, attrs)


def _gpsimd_kernel_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    _same_elements(ops["dst"], ops["in0"])
    if "in1" in ops:
        # in1 is in0's size, or a per-partition column broadcast along the free axes
        if ops["in1"].free_count == 1:
            _column(ops, "in1", ops["dst"].partitions)
        else:
            _same_elements(ops["dst"], ops["in1"])
    kernel = attrs["kernel"]
    arity = GPSIMD_KERNELS[kernel]
    if arity != 1 + ("in1" in ops):
        raise RuleError(f"kernel {kernel!r} takes {arity} input(s)")


def _dma_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    src, dst = ops["src"], ops["dst"]
    if attrs["indirect"] or "offsets" in ops:
        _indirect_dma_rules(ops, attrs)
        return
    if attrs["accumulate"]:
        raise RuleError("accumulate needs an indirect (scatter) dma_copy")
    if src.elements != dst.elements:
        raise RuleError(f"dst has {dst.elements} elements but src has {src.elements}")


def _dma_transpose_rules(ops: Operands, attrs: Attrs, target: Target) -> None:
    """src, read in row-major order, is an [R, C] matrix; dst in SBUF is its transpose [C partitions, R]."""
    src, dst = ops["src"], ops["dst"]
    if not target.dma_transpose_hbm_efficiency:
        raise RuleError(f"{target.name} ({target.core_version}) has no DMA transpose")
    if dst.memory is not Memory.SBUF or src.memory not in (Memory.HBM, Memory.SBUF):
        raise RuleError(f"reads HBM or SBUF and writes SBUF, not {src.memory.value} to {dst.memory.value}")
    if src.dtype != dst.dtype:
        raise RuleError(f"src is {src.dtype} but dst is {dst.dtype}: a DMA transpose does not convert")
    if dtypes.itemsize(src.dtype) != 2:
        raise RuleError(f"transposes 2-byte elements only, got {src.dtype}")
    columns, rows = dst.partitions, dst.free_count
    if src.elements != rows * columns:
        raise RuleError(f"dst has {dst.elements} elements but src has {src.elements}")
    if src.memory is Memory.SBUF:
        if (src.partitions, src.free_count) != (rows, columns):
            raise RuleError(f"src {src.describe()} is not the transpose of dst {dst.describe()}")
        return
    # an HBM source: its innermost dimensions hold one row of C elements
    inner = 1
    for num in reversed(src.free_shape):
        if inner >= columns:
            break
        inner *= num
    if inner != columns:
        raise RuleError(
            f"src's pattern {list(src.pattern)} does not end in rows of {columns} elements (dst's partitions)"
        )


def _collective_rules(opcode: str) -> Callable[[Operands, Attrs, Target], None]:
    """Both sides in HBM, one dtype, and the element counts the collective's group size implies."""

    def check(ops: Operands, attrs: Attrs, target: Target) -> None:
        src, dst = ops["src"], ops["dst"]
        if src.dtype != dst.dtype:
            raise RuleError(f"src is {src.dtype} but dst is {dst.dtype}: a collective does not convert")
        groups = attrs["replica_groups"]
        n = len(groups[0]) if isinstance(groups, tuple) and groups else 1
        uneven = opcode == "all_to_all" and bool(attrs.get("input_splits") or attrs.get("output_splits"))
        if uneven:
            _check_splits(attrs, src.elements, dst.elements, n)
        elif opcode in ("all_reduce", "all_to_all", "broadcast") and src.elements != dst.elements:
            raise RuleError(f"dst has {dst.elements} elements but src has {src.elements}")
        if opcode == "all_gather" and dst.elements != src.elements * n:
            raise RuleError(
                f"dst has {dst.elements} elements but {n} ranks of {src.elements} gather {src.elements * n}"
            )
        if opcode == "reduce_scatter" and src.elements != dst.elements * n:
            raise RuleError(
                f"src has {src.elements} elements but {n} ranks of {dst.elements} scatter {dst.elements * n}"
            )
        if opcode == "all_to_all" and not uneven and src.elements % n:
            raise RuleError(f"src's {src.elements} elements do not split into {n} equal blocks")
        if opcode == "broadcast" and not 0 <= int(attrs["root"]) < n:
            raise RuleError(f"root {attrs['root']} is no position in a replica group of {n} ranks", attribute="root")

    return check


def _check_splits(attrs: Attrs, sent: int, received: int, n: int) -> None:
    """An uneven all_to_all: both split lists given, one count per rank of the group, adding up to the tensors."""
    for name, total in (("input_splits", sent), ("output_splits", received)):
        splits: Any = attrs.get(name) or ()
        if len(splits) != n:
            raise RuleError(f"{len(splits)} counts for a replica group of {n} ranks", attribute=name)
        if sum(splits) != total:
            side = "src" if name == "input_splits" else "dst"
            raise RuleError(f"the counts add up to {sum(splits)} but {side} has {total} elements", attribute=name)


def _indirect_dma_rules(ops: Operands, attrs: Attrs) -> None:
    """Indirect DMA: int32 SBUF offsets [P, R]; the indexed HBM side [(step, bound), row...]; the other in SBUF.

    The indexed side's pattern covers every row an offset may choose, so the bounds, overlap and race checks
    that reason about patterns stay sound; the offsets themselves are checked when the instruction runs.
    """
    indirect = attrs["indirect"]
    if indirect not in ("src", "dst"):
        raise RuleError("an 'offsets' operand needs indirect = 'src' or 'dst'")
    if "offsets" not in ops:
        raise RuleError("an indirect dma_copy needs an 'offsets' operand")
    table, other, offsets = ops[indirect], ops["dst" if indirect == "src" else "src"], ops["offsets"]
    if attrs["accumulate"] and indirect != "dst":
        raise RuleError("accumulate needs indirect = 'dst' (a scatter)")
    if table.memory is not Memory.HBM or other.memory is not Memory.SBUF or offsets.memory is not Memory.SBUF:
        raise RuleError(f"the indexed side '{table.role}' must be in HBM, '{other.role}' and 'offsets' in SBUF")
    if offsets.dtype != "i32":
        raise RuleError(f"must be i32, got {offsets.dtype}", "offsets")
    if offsets.partitions != other.partitions:
        raise RuleError(
            f"{offsets.partitions} partitions of offsets for {other.partitions} of '{other.role}'", "offsets"
        )
    row = math.prod(table.free_shape[1:])
    if other.free_count != offsets.free_count * row:
        raise RuleError(
            f"'{other.role}' holds {other.free_count} elements per partition, but {offsets.free_count} offsets per "
            f"partition of {row}-element rows make {offsets.free_count * row}"
        )


# ---- the records ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpcodeSpec:
    """One opcode: where it may run, its operands and attributes, its rules and its semantics."""

    name: str
    engines: frozenset[Engine]
    reads: tuple[str, ...]  # required operand roles read
    writes: tuple[str, ...]  # required operand roles written
    # what it computes: (operands, attrs, engine, target, lane dimensions = 0), see `runtime.semantics`
    semantics: Callable[..., None]
    optional_reads: tuple[str, ...] = ()
    optional_writes: tuple[str, ...] = ()
    attr_specs: dict[str, Attr] = field(default_factory=dict)
    # the opcode's own rules, after those every instruction shares (`check_instruction`)
    check: Callable[[Operands, Attrs, Target], None] = _no_rules
    doc: str = ""
    # optional roles that only some of `engines` have: role -> those engines
    role_engines: dict[str, frozenset[Engine]] = field(default_factory=dict)

    @property
    def roles(self) -> tuple[str, ...]:
        return self.reads + self.writes + self.optional_reads + self.optional_writes

    @functools.cached_property
    def written_roles(self) -> frozenset[str]:
        return frozenset(self.writes + self.optional_writes)

    @functools.cached_property
    def attrs(self) -> dict[str, object]:
        """Attribute name -> default (`REQUIRED`: the attribute must be given)."""
        return {name: attr.default for name, attr in self.attr_specs.items()}

    @functools.cached_property
    def defaults(self) -> dict[str, object]:
        """The attributes that have a default, with it."""
        return {name: attr.default for name, attr in self.attr_specs.items() if attr.default is not REQUIRED}

    @functools.cached_property
    def valued_attrs(self) -> tuple[tuple[str, str, frozenset[str]], ...]:
        """(name, kind, names allowed) of the attributes whose values have rules: named choices and patterns (a
        pattern is in no set of names: `_check_attribute` checks it)."""
        return tuple(
            (name, a.kind, CHOICES[a.kind][1] if a.kind in CHOICES else frozenset())
            for name, a in self.attr_specs.items()
            if a.kind in CHOICES or a.kind in ("pattern", "groups", "counts")
        )

    @functools.cached_property
    def register_attrs(self) -> frozenset[str]:
        """The attributes a scalar register may give, read when the instruction issues."""
        return frozenset(name for name, attr in self.attr_specs.items() if attr.register)


_REDUCING = frozenset({"all_reduce", "reduce_scatter"})
_COLLECTIVE_DOCS = {
    "all_reduce": "dst = the elementwise `reduce` (sum, avg, product, min, max) of src over the ranks of the "
    "caller's replica group; src and dst are HBM tensors of one count and dtype. Runs on the collective queue "
    "through the injected transport (runtime/collectives.py).",
    "all_gather": "dst = the src of every rank of the group, concatenated in rank order (dst holds group size x "
    "src's elements).",
    "reduce_scatter": "The elementwise `reduce` of src over the group, split into group-size equal blocks; dst = the "
    "block at the caller's position in its group.",
    "all_to_all": "src is split into group-size equal blocks; block j goes to the group's j-th rank, and dst is the "
    "blocks received, in rank order. Uneven: `input_splits` gives the element count of each block sent (in rank "
    "order) and `output_splits` of each block received; rank i's j-th input count equals rank j's i-th output count.",
    "broadcast": "dst = the src of the group's `root`-th rank (its position in the replica group), on every rank of "
    "the group; src and dst have one count and dtype.",
}
_VEC = frozenset({Engine.VECTOR})
# tensor_scalar's operators when it also reduces into accumulate_dst: arithmetic ones [nki-isa-2.26]
REDUCING_TENSOR_SCALAR_OPS = frozenset({"add", "subtract", "multiply", "max", "min"})
_VEC_GPSIMD = frozenset({Engine.VECTOR, Engine.GPSIMD})
_ANY_COMPUTE_BUT_TENSOR = frozenset({Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD})

OPCODES: dict[str, OpcodeSpec] = {
    spec.name: spec
    for spec in (
        OpcodeSpec(
            "nc_matmul",
            frozenset({Engine.TENSOR}),
            reads=("stationary", "moving"),
            writes=("dst",),
            attr_specs={
                "accumulate": Attr("bool", False, register=True),
                "is_transpose": Attr("bool", False),
                "row_tile_start": Attr("int", 0),
                "row_tile_size": Attr("int", 0),
            },
            check=_matmul_rules,
            semantics=semantics.nc_matmul,
            doc="dst[M, N] (=|+=) stationary[K, M]^T @ moving[K, N]. K is the partition axis of both inputs "
            "(K <= 128, M <= 128, N <= 512 on trn1/trn2). dst is fp32 in PSUM. `accumulate` (immediate or "
            "register) adds to dst instead of overwriting. `is_transpose` (stationary must be an identity "
            "of matching size) copies moving^T bit-exactly and keeps moving's dtype (v3+). `row_tile_size` "
            "(32 or 64 where the target has it; 0: the whole array) and `row_tile_start` (a multiple of it) run "
            "the matmul on those PE rows alone, its operands on the same partitions, beside matmuls in other "
            "row tiles.",
        ),
        OpcodeSpec(
            "activation",
            frozenset({Engine.SCALAR}),
            reads=("src",),
            writes=("dst",),
            optional_reads=("bias", "scale_vector"),
            optional_writes=("accumulate_dst",),
            attr_specs={
                "func": Attr("activation"),
                "scale": Attr("number", 1.0),
                "bias_value": Attr("number", 0.0),
                "alpha": Attr("number", 0.0),
            },
            check=_activation_rules,
            semantics=semantics.activation,
            doc="dst = func(src * scale + bias). scale is the immediate `scale` or the per-partition [P, 1] "
            "operand `scale_vector`; bias is the [P, 1] operand `bias` or the immediate `bias_value`. With "
            "`accumulate_dst` ([P, 1]) the sum of dst along all free axes is also written there.",
        ),
        OpcodeSpec(
            "tensor_tensor",
            _VEC_GPSIMD,
            reads=("in0", "in1"),
            writes=("dst",),
            attr_specs={"op": Attr("alu")},
            check=_tensor_tensor_rules,
            semantics=semantics.tensor_tensor,
            doc="dst = in0 <op> in1 elementwise; all three have the same shape. At most one input in PSUM.",
        ),
        OpcodeSpec(
            "tensor_scalar",
            _ANY_COMPUTE_BUT_TENSOR,
            reads=("src",),
            writes=("dst",),
            optional_reads=("operand0", "operand1"),
            optional_writes=("accumulate_dst",),
            role_engines={"accumulate_dst": _VEC},
            attr_specs={
                "op0": Attr("alu"),
                "scalar0": Attr("number", 0.0),
                "reverse0": Attr("bool", False),
                "op1": Attr("alu_or_none", None),
                "scalar1": Attr("number", 0.0),
                "reverse1": Attr("bool", False),
            },
            check=_tensor_scalar_rules,
            semantics=semantics.tensor_scalar,
            doc="dst = (src <op0> s0) <op1> s1, where s0 is the [P, 1] operand `operand0` broadcast along the "
            "free axes if given, else the immediate `scalar0` (same for s1). `reverseN` swaps the operands "
            "of opN (s <op> x). op1 = None skips the second step. With `accumulate_dst` ([P, 1]; VectorE only, "
            "one arithmetic operator: the ISA's tensor_scalar_reduce) the sum of dst along all free axes is also "
            "written there.",
        ),
        OpcodeSpec(
            "scalar_tensor_tensor",
            _VEC,
            reads=("src", "in1"),
            writes=("dst",),
            optional_reads=("operand0",),
            attr_specs={
                "op0": Attr("alu"),
                "scalar0": Attr("number", 0.0),
                "reverse0": Attr("bool", False),
                "op1": Attr("alu"),
                "reverse1": Attr("bool", False),
            },
            check=_scalar_tensor_tensor_rules,
            semantics=semantics.scalar_tensor_tensor,
            doc="dst = (src <op0> s0) <op1> in1, where s0 is the [P, 1] operand `operand0` broadcast along the "
            "free axes if given, else the immediate `scalar0`, and in1 pairs with src element by element. "
            "`reverse0` computes s0 <op0> src, `reverse1` in1 <op1> (...). The intermediate stays fp32 inside "
            "the engine: the result is that of a tensor_scalar into an fp32 tile followed by a tensor_tensor. "
            "src and in1 are not both in PSUM [nki-isa-2.26].",
        ),
        OpcodeSpec(
            "tensor_reduce",
            _VEC,
            reads=("src",),
            writes=("dst",),
            attr_specs={"op": Attr("reduce"), "axes": Attr("int", 1), "negate": Attr("bool", False)},
            check=_tensor_reduce_rules,
            semantics=semantics.tensor_reduce,
            doc="Reduce the `axes` innermost free axes of src with `op`; dst has src's shape without them "
            "(or [P, 1] when all free axes are reduced). Never reduces across partitions. `negate` negates "
            "the result.",
        ),
        OpcodeSpec(
            "tensor_copy",
            _ANY_COMPUTE_BUT_TENSOR,
            reads=("src",),
            writes=("dst",),
            check=_elementwise_rules("src"),
            semantics=semantics.tensor_copy,
            doc="dst = src, converting the dtype (bit exact when the dtypes match). Same element count, "
            "row-major pairing within each partition.",
        ),
        OpcodeSpec(
            "select",
            _VEC_GPSIMD,
            reads=("predicate", "on_true", "on_false"),
            writes=("dst",),
            check=_elementwise_rules("predicate", "on_true", "on_false"),
            semantics=semantics.select,
            doc="dst = predicate != 0 ? on_true : on_false, elementwise, all operands of one shape.",
        ),
        OpcodeSpec(
            "memset",
            _VEC_GPSIMD,
            reads=(),
            writes=("dst",),
            attr_specs={"value": Attr("number")},
            semantics=semantics.memset,
            doc="Fill dst with the immediate `value`.",
        ),
        OpcodeSpec(
            "iota",
            frozenset({Engine.GPSIMD}),
            reads=(),
            writes=("dst",),
            attr_specs={
                "base": Attr("int", 0, register=True),
                "channel_multiplier": Attr("int", 0),
                "pattern": Attr("pattern"),
            },
            check=_iota_rules,
            semantics=semantics.iota,
            doc="dst[p, i...] = base + p * channel_multiplier + sum(i_d * step_d) over `pattern` "
            "((step, num) per free axis, matching dst's free shape), computed in int32.",
        ),
        OpcodeSpec(
            "affine_select",
            frozenset({Engine.GPSIMD}),
            reads=("on_true",),
            writes=("dst",),
            attr_specs={
                "cmp": Attr("cmp"),
                "base": Attr("int", 0),
                "channel_multiplier": Attr("int", 0),
                "pattern": Attr("pattern"),
                "on_false_value": Attr("number"),
            },
            check=_affine_select_rules,
            semantics=semantics.affine_select,
            doc="v = base + p * channel_multiplier + sum(i_d * step_d); dst = (v <cmp> 0) ? on_true : "
            "on_false_value. cmp is one of is_equal, not_equal, is_ge, is_gt, is_le, is_lt. Builds masks "
            "(causal, identity) without reading memory for the predicate.",
        ),
        OpcodeSpec(
            "gpsimd_kernel",
            frozenset({Engine.GPSIMD}),
            reads=("in0",),
            writes=("dst",),
            optional_reads=("in1",),
            attr_specs={"kernel": Attr("kernel")},
            check=_gpsimd_kernel_rules,
            semantics=semantics.gpsimd_kernel,
            doc="dst = kernel(in0, in1) elementwise for a function of GPSIMD_KERNELS (its docstring there). in1 "
            "has in0's shape or is a [P, 1] column broadcast along the free axes. With all tensors integer "
            "the division kernels compute exactly on 32-bit integers (integer division by zero gives 0); "
            "otherwise in fp32.",
        ),
        OpcodeSpec(
            "dma_copy",
            frozenset({Engine.DMA}),
            reads=("src",),
            writes=("dst",),
            optional_reads=("offsets",),
            attr_specs={"indirect": Attr("indirect", ""), "accumulate": Attr("bool", False)},
            check=_dma_rules,
            semantics=semantics.dma_copy,
            doc="Copy src to dst element by element in row-major order of their logical shapes (same element "
            "count), converting the dtype through fp32 when they differ. src and dst are in HBM or SBUF. "
            "Indirect (`indirect` = 'src': gather, 'dst': scatter; software DGE, descriptors written by GpSimdE): "
            "`offsets` is an int32 SBUF tile [P, R] and the named side is in HBM with pattern [(step, bound), "
            "row...]: its first dimension is the indexed one. The other side holds P x R rows in order; row "
            "(p, r) is the HBM row offsets[p, r] (element offset offsets[p, r] * step). Every offset must lie in "
            "[0, bound): any other value stops the run with an error naming the instruction, the partition and "
            "the value (nothing is clamped or skipped). Scatters with duplicate offsets write in row-major "
            "(p, r) order, the last one wins; with `accumulate` the DMA reads, adds in fp32 and writes each row "
            "in that order, so every duplicate contribution is summed.",
        ),
        OpcodeSpec(
            "dma_transpose",
            frozenset({Engine.DMA}),
            reads=("src",),
            writes=("dst",),
            check=_dma_transpose_rules,
            semantics=semantics.dma_transpose,
            doc="Transpose while moving (NeuronCore-v3 on): src's elements in row-major order form an [R, C] "
            "matrix (in SBUF: R partitions of C elements; in HBM: a pattern whose innermost dimensions hold C "
            "elements), and dst, an SBUF access of C partitions and R elements each, receives its transpose: "
            "dst[c, r] = src[r, c], bit exact. 2-byte dtypes, src's and dst's the same.",
        ),
        *(
            OpcodeSpec(
                name,
                frozenset({Engine.COLLECTIVE}),
                reads=("src",),
                writes=("dst",),
                attr_specs={
                    "replica_groups": Attr("groups"),
                    **({"reduce": Attr("collective_reduce", "sum")} if name in _REDUCING else {}),
                    **({"root": Attr("int", 0)} if name == "broadcast" else {}),
                    **(
                        {"input_splits": Attr("counts", ()), "output_splits": Attr("counts", ())}
                        if name == "all_to_all"
                        else {}
                    ),
                },
                check=_collective_rules(name),
                semantics=functools.partial(semantics.collective, name),
                doc=doc,
            )
            for name, doc in _COLLECTIVE_DOCS.items()
        ),
    )
}


def with_defaults(opcode: str, attrs: Attrs) -> dict[str, Any]:
    """`attrs` completed with the opcode's defaults."""
    return OPCODES[opcode].defaults | dict(attrs)


def execute(opcode: str, engine: Engine, ops: Mapping[str, Any], attrs: Attrs, target: Target) -> None:
    """Run one instruction on NumPy operands (`runtime.semantics`); attributes default per the record.

    Register-valued attributes must already be resolved to their values.
    """
    OPCODES[opcode].semantics(ops, with_defaults(opcode, attrs), engine, target)


SCALAR_FUNCTIONS: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "rem": lambda a, b: a % b,
    "min": min,
    "max": max,
    "eq": lambda a, b: int(a == b),
    "ne": lambda a, b: int(a != b),
    "lt": lambda a, b: int(a < b),
    "le": lambda a, b: int(a <= b),
    "gt": lambda a, b: int(a > b),
    "ge": lambda a, b: int(a >= b),
}


def wrap32(value: int) -> int:
    """A register's value: two's-complement 32 bits."""
    return ((value + 2**31) & 0xFFFFFFFF) - 2**31


def scalar_op(op: str, lhs: int, rhs: int) -> int:
    """The result of ScalarOp `op` as the register holds it."""
    return wrap32(SCALAR_FUNCTIONS[op](lhs, rhs))
