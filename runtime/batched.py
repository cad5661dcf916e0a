"""`runtime.semantics` over a batch of independent instances: one NumPy call runs an instruction for many lanes.

The simulator's loop vectoriser (`runtime.vectorize`) runs the iterations of a loop whose iterations do not
depend on each other as lanes: every operand gets `nl` leading lane dimensions (`[*lanes, P, F...]` on chip,
`[*lanes, F...]` in HBM), and each function here computes, for every lane, bit for bit what the matching
function of `runtime.semantics` computes for that lane's operands alone.

Each function mirrors its sequential counterpart operation by operation (same conversions, same fp32
arithmetic, same order of NumPy calls), only with the lane dimensions in front. Elementwise NumPy arithmetic
gives the same bits for an element wherever it sits in an array; reductions (`sum`, `max`, ...) and `matmul`
keep each lane's inner loops unchanged because the lane dimensions are the outermost, so their per-row results
match too. An operand that is the same for every lane may have lane strides of 0 (a broadcast view); only
destinations are guaranteed to be distinct per lane.

`lanewise` is the fallback for one instance whose lanes cannot share one call (e.g. a register attribute that
differs between lanes): it runs `runtime.semantics` lane by lane.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from neuron_mlir.runtime import alu, semantics
from neuron_mlir.runtime.hardware import Engine, Target

F32 = alu.F32

Operands = Mapping[str, np.ndarray]
Attrs = Mapping[str, Any]


def _store(dst: np.ndarray, values: np.ndarray) -> None:
    dst[...] = alu.cast(values, dst.dtype).reshape(dst.shape)


def _rows(array: np.ndarray, nl: int) -> np.ndarray:
    """[*lanes, P, elements]: the row-major pairing of elementwise instructions, per lane."""
    return array.reshape((*array.shape[:nl + 1], -1))


def _t(array: np.ndarray) -> np.ndarray:
    return np.swapaxes(array, -1, -2)


def _identity_lanes(matrix: np.ndarray, nl: int) -> np.ndarray:
    """Per lane: is the [K, M] matrix the identity (semantics._is_identity)?"""
    rows, cols = matrix.shape[-2:]
    lanes = matrix.shape[:nl]
    if rows != cols:
        return np.zeros(lanes, bool)
    if all(stride == 0 for stride in matrix.strides[:nl]):  # the same matrix in every lane: check it once
        first = matrix[(0,) * nl] if nl else matrix
        return np.full(lanes, semantics._is_identity(first))
    with np.errstate(invalid="ignore"):
        return (alu.to_f32(matrix) == semantics.identity_matrix(rows)).all(axis=(-2, -1))


def nc_matmul(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    stationary, moving, dst = ops["stationary"], ops["moving"], ops["dst"]
    lead = stationary.shape[:nl]
    k = stationary.shape[nl]
    stationary2, moving2 = stationary.reshape((*lead, k, -1)), moving.reshape((*lead, k, -1))
    if attrs.get("is_transpose"):
        identity = target.matmul_transpose_bit_exact and _identity_lanes(stationary2, nl)
        if identity is not False and identity.all():
            _store(dst, np.ascontiguousarray(_t(moving2)))
            return
        if identity is not False and identity.any():  # some lanes copy, others multiply
            lanewise("nc_matmul", ops, attrs, engine, target, nl)
            return
        with np.errstate(all="ignore"):
            _store(dst, _t(alu.to_f32(moving2)) @ alu.to_f32(stationary2))
        return
    semantics.matmul_into(dst, stationary2, moving2, bool(attrs.get("accumulate")), nl)


def activation(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    src, dst = ops["src"], ops["dst"]
    x = alu.to_f32(_rows(src, nl))
    scale_vector, bias = ops.get("scale_vector"), ops.get("bias")
    scale = (
        alu.to_f32(_rows(scale_vector, nl))
        if scale_vector is not None
        else np.float32(attrs.get("scale", 1.0))
    )
    shift = alu.to_f32(_rows(bias, nl)) if bias is not None else np.float32(attrs.get("bias_value", 0.0))
    accumulate_dst = ops.get("accumulate_dst")
    vectors = [v for v in (scale_vector, bias) if v is not None]
    if accumulate_dst is None and semantics.activation_into(dst, attrs["func"], x, scale, shift, vectors, nl):
        return
    with np.errstate(all="ignore"):
        y = semantics.activation_values(attrs["func"], x, scale, shift, attrs.get("alpha", 0.0))
        _store(dst, y)
        if accumulate_dst is not None:
            _store(accumulate_dst, y.sum(axis=-1, dtype=F32))


def tensor_tensor(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    in0, in1, dst = ops["in0"], ops["in1"], ops["dst"]
    integer = semantics._integer_domain(engine, [in0, in1], [])
    if semantics.binary_into(dst, attrs["op"], _rows(in0, nl), _rows(in1, nl), integer, nl):
        return
    _store(dst, alu.binary(attrs["op"], _rows(in0, nl), _rows(in1, nl), integer))


def tensor_scalar(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    src, dst = ops["src"], ops["dst"]
    steps = [("op0", "operand0", "scalar0", "reverse0"), ("op1", "operand1", "scalar1", "reverse1")]
    tensors = [src] + [ops[role] for _, role, _, _ in steps if ops.get(role) is not None]
    immediates = [attrs.get(name, 0.0) for _, role, name, _ in steps if ops.get(role) is None]
    integer = semantics._integer_domain(engine, tensors, immediates)
    values: Any = _rows(src, nl)
    last = "op1" if attrs.get("op1") is not None else "op0"
    for op_name, role, scalar_name, reverse_name in steps:
        op = attrs.get(op_name)
        if op is None:
            continue
        vector = ops.get(role)
        scalar: Any = _rows(vector, nl) if vector is not None else attrs.get(scalar_name, 0.0)
        if not integer and vector is not None:
            scalar = alu.to_f32(scalar)
        a, b = (scalar, values) if attrs.get(reverse_name) else (values, scalar)
        if op_name == last and semantics.binary_into(dst, op, a, b, integer, nl):
            return
        values = alu.binary(op, a, b, integer)
    _store(dst, values)


def tensor_reduce(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    src, dst = ops["src"], ops["dst"]
    axes = int(attrs.get("axes", 1))
    free = src.shape[nl + 1 :]
    reduced = math.prod(free[len(free) - axes :])
    result = alu.reduce(attrs["op"], src.reshape((*src.shape[:nl + 1], -1, reduced)), (nl + 2,))
    if attrs.get("negate"):
        result = -result
    _store(dst, result)


def tensor_copy(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    src, dst = ops["src"], ops["dst"]
    dst[...] = semantics._same_type_or_converted(_rows(src, nl), dst.dtype, engine).reshape(dst.shape)


def select(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    dst = ops["dst"]
    chosen = _rows(ops["predicate"], nl) != 0
    on_true = semantics._same_type_or_converted(_rows(ops["on_true"], nl), dst.dtype, engine)
    on_false = semantics._same_type_or_converted(_rows(ops["on_false"], nl), dst.dtype, engine)
    dst[...] = np.where(chosen, on_true, on_false).reshape(dst.shape)


def memset(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    dst = ops["dst"]
    dst[...] = semantics._immediate_as(attrs["value"], dst.dtype)


def iota(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    dst = ops["dst"]
    values = alu.cast(semantics.affine_values(dst.shape[nl], attrs), dst.dtype).reshape(dst.shape[nl:])
    dst[...] = values  # the same values in every lane


def affine_select(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    dst = ops["dst"]
    chosen = semantics._COMPARE_ZERO[attrs["cmp"]](semantics.affine_values(dst.shape[nl], attrs))
    on_true = semantics._same_type_or_converted(_rows(ops["on_true"], nl), dst.dtype, engine)
    on_false = semantics._immediate_as(attrs["on_false_value"], dst.dtype)
    dst[...] = np.where(chosen, on_true, on_false).reshape(dst.shape)


def gpsimd_kernel(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    in0, dst, in1 = ops["in0"], ops["dst"], ops.get("in1")
    tensors = [in0] if in1 is None else [in0, in1]
    integer = all(alu.is_integer_dtype(t.dtype) for t in [*tensors, dst])
    second = _rows(in1, nl) if in1 is not None else np.zeros((1, 1), np.int32)
    _store(dst, alu.gpsimd_kernel(attrs["kernel"], _rows(in0, nl), second, integer))


def dma_copy(ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    if attrs.get("indirect"):  # gathers/scatters: rows chosen by data, lane by lane in order
        lanewise("dma_copy", ops, attrs, engine, target, nl)
        return
    src, dst = ops["src"], ops["dst"]
    if src.dtype == dst.dtype:
        dst[...] = src.reshape(dst.shape)
    else:
        _store(dst, alu.to_f32(src))


BATCHED: dict[str, Callable[[Operands, Attrs, Engine, Target, int], None]] = {
    "nc_matmul": nc_matmul,
    "activation": activation,
    "tensor_tensor": tensor_tensor,
    "tensor_scalar": tensor_scalar,
    "tensor_reduce": tensor_reduce,
    "tensor_copy": tensor_copy,
    "select": select,
    "memset": memset,
    "iota": iota,
    "affine_select": affine_select,
    "gpsimd_kernel": gpsimd_kernel,
    "dma_copy": dma_copy,
}


def lanewise(opcode: str, ops: Operands, attrs: Attrs, engine: Engine, target: Target, nl: int) -> None:
    """Run `runtime.semantics` once per lane (attrs may map a name to a per-lane array of values)."""
    lanes = next(iter(ops.values())).shape[:nl]
    function = semantics.SEMANTICS[opcode]
    for lane in np.ndindex(*lanes):
        lane_attrs = {
            name: (value[lane].item() if isinstance(value, np.ndarray) else value) for name, value in attrs.items()
        }
        function({role: array[lane] for role, array in ops.items()}, lane_attrs, engine, target)
