"""The instruction set the simulator executes: opcodes, their engines, operand roles and attributes.

This table is the contract between the compiler (the neuron dialect encodes to it) and the runtime (the bundle
validator checks against it, `runtime.semantics` executes it). It mirrors the public nki.isa instruction list
[nki-isa] (keys in square brackets are defined in docs/hardware-sources.md); each entry's docstring states the
semantics precisely.

Notation: `P` = partitions of the access, `F...` = its free shape. All arithmetic is fp32 inside the engines
(integer ops on GpSimdE are exact 32-bit, 64-bit for int64); results are cast to the destination's dtype,
rounding to nearest even.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from neuron_mlir.runtime.hardware import Engine

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
        "gelu_apprx_tanh",
        "silu",
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
GPSIMD_KERNELS: dict[str, int] = {
    "divide": 2,
    "divide_trunc": 2,
    "divide_floor": 2,
    "fmod": 2,
    "remainder": 2,
    "uniform": 2,
    "normal": 2,
}

# Free-axis reduction operators of tensor_reduce and of activation's accumulate.
REDUCE_OPS: frozenset[str] = frozenset({"add", "max", "min", "multiply", "abs_max"})

# Integer operations of ScalarOp (sequencer register ALU): floordiv/rem round toward negative infinity; results
# wrap to the 32-bit registers (`wrap32`). `SCALAR_FUNCTIONS` is their one definition.
SCALAR_OPS: frozenset[str] = frozenset(
    {"add", "sub", "mul", "floordiv", "rem", "min", "max", "eq", "ne", "lt", "le", "gt", "ge"}
)


@dataclass(frozen=True)
class OpcodeSpec:
    """The static shape of one opcode: where it may run, which operands it has, which attributes."""

    name: str
    engines: frozenset[Engine]
    reads: tuple[str, ...]  # required operand roles read
    writes: tuple[str, ...]  # required operand roles written
    optional_reads: tuple[str, ...] = ()
    optional_writes: tuple[str, ...] = ()
    # attribute name -> default; a default of REQUIRED means the attribute must be present
    attrs: dict[str, object] = field(default_factory=dict)
    doc: str = ""

    @property
    def roles(self) -> tuple[str, ...]:
        return self.reads + self.writes + self.optional_reads + self.optional_writes


REQUIRED = object()

_VEC = frozenset({Engine.VECTOR})
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
            attrs={"accumulate": False, "is_transpose": False},
            doc="dst[M, N] (=|+=) stationary[K, M]^T @ moving[K, N]. K is the partition axis of both inputs "
            "(K <= 128, M <= 128, N <= 512 on trn1/trn2). dst is fp32 in PSUM. `accumulate` (immediate or "
            "register) adds to dst instead of overwriting. `is_transpose` (stationary must be an identity "
            "of matching size) copies moving^T bit-exactly and keeps moving's dtype (v3+).",
        ),
        OpcodeSpec(
            "activation",
            frozenset({Engine.SCALAR}),
            reads=("src",),
            writes=("dst",),
            optional_reads=("bias", "scale_vector"),
            optional_writes=("accumulate_dst",),
            attrs={"func": REQUIRED, "scale": 1.0, "bias_value": 0.0, "alpha": 0.0},
            doc="dst = func(src * scale + bias). scale is the immediate `scale` or the per-partition [P, 1] "
            "operand `scale_vector`; bias is the [P, 1] operand `bias` or the immediate `bias_value`. With "
            "`accumulate_dst` ([P, 1]) the sum of dst along all free axes is also written there.",
        ),
        OpcodeSpec(
            "tensor_tensor",
            _VEC_GPSIMD,
            reads=("in0", "in1"),
            writes=("dst",),
            attrs={"op": REQUIRED},
            doc="dst = in0 <op> in1 elementwise; all three have the same shape. At most one input in PSUM.",
        ),
        OpcodeSpec(
            "tensor_scalar",
            _ANY_COMPUTE_BUT_TENSOR,
            reads=("src",),
            writes=("dst",),
            optional_reads=("operand0", "operand1"),
            attrs={
                "op0": REQUIRED,
                "scalar0": 0.0,
                "reverse0": False,
                "op1": None,
                "scalar1": 0.0,
                "reverse1": False,
            },
            doc="dst = (src <op0> s0) <op1> s1, where s0 is the [P, 1] operand `operand0` broadcast along the "
            "free axes if given, else the immediate `scalar0` (same for s1). `reverseN` swaps the operands "
            "of opN (s <op> x). op1 = None skips the second step.",
        ),
        OpcodeSpec(
            "tensor_reduce",
            _VEC,
            reads=("src",),
            writes=("dst",),
            attrs={"op": REQUIRED, "axes": 1, "negate": False},
            doc="Reduce the `axes` innermost free axes of src with `op`; dst has src's shape without them "
            "(or [P, 1] when all free axes are reduced). Never reduces across partitions. `negate` negates "
            "the result.",
        ),
        OpcodeSpec(
            "tensor_copy",
            _ANY_COMPUTE_BUT_TENSOR,
            reads=("src",),
            writes=("dst",),
            doc="dst = src, converting the dtype (bit exact when the dtypes match). Same element count, "
            "row-major pairing within each partition.",
        ),
        OpcodeSpec(
            "select",
            _VEC_GPSIMD,
            reads=("predicate", "on_true", "on_false"),
            writes=("dst",),
            doc="dst = predicate != 0 ? on_true : on_false, elementwise, all operands of one shape.",
        ),
        OpcodeSpec(
            "memset",
            _VEC_GPSIMD,
            reads=(),
            writes=("dst",),
            attrs={"value": REQUIRED},
            doc="Fill dst with the immediate `value`.",
        ),
        OpcodeSpec(
            "iota",
            frozenset({Engine.GPSIMD}),
            reads=(),
            writes=("dst",),
            attrs={"base": 0, "channel_multiplier": 0, "pattern": REQUIRED},
            doc="dst[p, i...] = base + p * channel_multiplier + sum(i_d * step_d) over `pattern` "
            "((step, num) per free axis, matching dst's free shape), computed in int32.",
        ),
        OpcodeSpec(
            "affine_select",
            frozenset({Engine.GPSIMD}),
            reads=("on_true",),
            writes=("dst",),
            attrs={
                "cmp": REQUIRED,
                "base": 0,
                "channel_multiplier": 0,
                "pattern": REQUIRED,
                "on_false_value": REQUIRED,
            },
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
            attrs={"kernel": REQUIRED},
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
            attrs={"indirect": "", "accumulate": False},
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
    )
}

# The comparison subset of ALU_OPS (affine_select's predicate).
COMPARISON_OPS: frozenset[str] = frozenset({"is_equal", "not_equal", "is_ge", "is_gt", "is_le", "is_lt"})

# Bit-vector operators of ALU_OPS: they act on 32-bit integer values (float operands are first converted to
# int32, truncating toward zero and saturating), never on fp32.
BITVEC_OPS: frozenset[str] = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"})

# Attributes that may be a scalar register (`program.Reg`) read when the instruction issues, per opcode.
REGISTER_ATTRS: dict[str, frozenset[str]] = {"nc_matmul": frozenset({"accumulate"}), "iota": frozenset({"base"})}


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
