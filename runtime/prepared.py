"""A run's data work recorded once and run again: the simulator's tape.

Registers never depend on data, so every run of a program executes the same instances with the same operand
views and attributes. The simulator (`runtime.simulator`, `execute_data`) records the data work of one run as a
`Tape`, a list of steps in program order, and later runs run the tape instead of walking the program:

* an instance becomes a call of its `runtime.semantics` function with the views and attributes it was recorded
  with (`functools.partial`), or, for the common forms below, a *prepared* step;
* a loop nest that ran batched (`runtime.vectorize`) becomes its `Batch.run`.

A prepared step is the semantics function's own fast path with every decision that depends only on shapes,
dtypes, strides, memory layout and attribute values (all fixed for a recorded instance) taken once, while
preparing: which ufunc, whether the destination can be written in place, the reshaped views of the operands
(only where reshaping gives a view, never a copy, so the step reads the memory as it is when it runs), constants
derived from immediates. The NumPy calls that read or write simulated memory are the ones the semantics function
makes, with the same operands, so the results are the same bits. Anything else (dtype conversions, integer
arithmetic, reductions, data-dependent choices such as an identity test) runs the semantics function itself.

The semantics functions' fast paths ignore floating-point errors (`np.errstate(all="ignore")`); a tape runs all
its steps under that setting, which changes warnings only, never values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from neuron_mlir.runtime import alu, semantics
from neuron_mlir.runtime.hardware import Engine, Target

Step = Callable[[], None]

F32 = alu.F32


class Tape:
    """The recorded steps of one run's data work; `run` does that work again."""

    __slots__ = ("steps",)

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps

    def run(self) -> None:
        with np.errstate(all="ignore"):
            for step in self.steps:
                step()


def batch_step(batch: Any) -> Step:
    """A batched loop nest (`vectorize.Batch`) as a step."""
    return batch.run


def instance_step(
    function: Callable[..., None],
    opcode: str,
    views: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
    engine: Engine,
    target: Target,
) -> Step:
    """One recorded instance as a step: prepared when its form allows, else its semantics function."""
    prepare = _PREPARERS.get(opcode)
    if prepare is not None and function is semantics.SEMANTICS[opcode]:
        step = prepare(views, attrs, engine, target)
        if step is not None:
            return step
    return functools.partial(function, views, attrs, engine, target)


# ---- preparing -------------------------------------------------------------------------------------------


def _view(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """`array.reshape(shape)` when that is a view of the same memory (None when reshaping would copy)."""
    try:
        return np.reshape(array, shape, copy=False)
    except ValueError:
        return None


def _rows(array: np.ndarray) -> np.ndarray | None:
    """`semantics._rows(array)` as a view, or None."""
    return _view(array, (array.shape[0], -1))


def _f32_rows(array: np.ndarray) -> np.ndarray | None:
    """`alu.to_f32(semantics._rows(array))` as a view (an fp32 operand), or None."""
    if array.dtype != F32:
        return None
    return _rows(array)


def _copy_into(dst: np.ndarray, values: np.ndarray) -> Step:
    return functools.partial(np.copyto, dst, values)


def _prepare_dma_copy(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.dma_copy: dst[...] = src.reshape(dst.shape) between equal dtypes
    src, dst = ops["src"], ops["dst"]
    if attrs.get("indirect") or src.dtype != dst.dtype:
        return None
    values = _view(src, dst.shape)
    return _copy_into(dst, values) if values is not None else None


def _prepare_tensor_copy(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.tensor_copy with equal dtypes: dst[...] = _rows(src).reshape(dst.shape)
    src, dst = ops["src"], ops["dst"]
    if src.dtype != dst.dtype:
        return None
    rows = _rows(src)
    values = _view(rows, dst.shape) if rows is not None else None
    return _copy_into(dst, values) if values is not None else None


def _into_rows(dst: np.ndarray, *shapes: tuple[int, ...]) -> np.ndarray | None:
    """`semantics.writable_rows(dst)` when its shape is the operands' broadcast shape (binary_into's test)."""
    rows = semantics.writable_rows(dst, 0)
    if rows is None or rows.shape != np.broadcast_shapes(*shapes):
        return None
    return rows


def _prepare_tensor_tensor(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.tensor_tensor through binary_into: ufunc(to_f32(rows(in0)), to_f32(rows(in1)), out=rows(dst))
    in0, in1, dst = ops["in0"], ops["in1"], ops["dst"]
    ufunc = semantics._FLOAT_UFUNCS.get(attrs["op"])
    if ufunc is None or semantics._integer_domain(engine, [in0, in1], []):
        return None
    lhs, rhs = _f32_rows(in0), _f32_rows(in1)
    if lhs is None or rhs is None:
        return None
    rows = _into_rows(dst, lhs.shape, rhs.shape)
    return functools.partial(ufunc, lhs, rhs, out=rows) if rows is not None else None


def _prepare_tensor_scalar(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.tensor_scalar when its last operator goes through binary_into (fp32 arithmetic throughout)
    src, dst = ops["src"], ops["dst"]
    steps = [("op0", "operand0", "scalar0", "reverse0"), ("op1", "operand1", "scalar1", "reverse1")]
    tensors = [src] + [ops[role] for _, role, _, _ in steps if ops.get(role) is not None]
    immediates = [attrs.get(name, 0.0) for _, role, name, _ in steps if ops.get(role) is None]
    if semantics._integer_domain(engine, tensors, immediates):
        return None
    values = _f32_rows(src)
    if values is None:
        return None
    used = []
    for op_name, role, scalar_name, reverse_name in steps:
        op = attrs.get(op_name)
        if op is None:
            continue
        vector = ops.get(role)
        scalar: Any = attrs.get(scalar_name, 0.0)
        if vector is not None:
            scalar = _f32_rows(vector)
            if scalar is None:
                return None
        used.append((op, scalar, bool(attrs.get(reverse_name))))
    if not used or len(used) > 2:
        return None
    op, scalar, reverse = used[-1]
    ufunc = semantics._FLOAT_UFUNCS.get(op)
    if ufunc is None:
        return None
    last_scalar = alu.to_f32(scalar)  # binary_into widens its operands; an immediate becomes an fp32 0-d array
    if len(used) == 1:
        lhs, rhs = (last_scalar, values) if reverse else (values, last_scalar)
        rows = _into_rows(dst, lhs.shape, rhs.shape)
        return functools.partial(ufunc, lhs, rhs, out=rows) if rows is not None else None
    first_op, first_scalar, first_reverse = used[0]
    a, b = (first_scalar, values) if first_reverse else (values, first_scalar)
    intermediate = np.broadcast_shapes(np.shape(a), np.shape(b))
    rows = _into_rows(dst, intermediate, last_scalar.shape)
    if rows is None:
        return None
    binary, to_f32 = alu.binary, alu.to_f32

    def step() -> None:
        first = to_f32(binary(first_op, a, b, False))
        if reverse:
            ufunc(last_scalar, first, out=rows)
        else:
            ufunc(first, last_scalar, out=rows)

    return step


def _prepare_activation(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.activation through activation_into (no accumulate_dst, a one-ufunc function, fp32 operands)
    src, dst = ops["src"], ops["dst"]
    if ops.get("accumulate_dst") is not None:
        return None
    in_place = semantics._IN_PLACE_ACTIVATIONS.get(attrs["func"])
    x = _f32_rows(src)
    if in_place is None or x is None:
        return None
    scale_vector, bias = ops.get("scale_vector"), ops.get("bias")
    scale: Any = np.float32(attrs.get("scale", 1.0))
    if scale_vector is not None:
        scale = _f32_rows(scale_vector)
    shift: Any = np.float32(attrs.get("bias_value", 0.0))
    if bias is not None:
        shift = _f32_rows(bias)
    if scale is None or shift is None:
        return None
    rows = _into_rows(dst, x.shape, np.shape(scale), np.shape(shift))
    if rows is None or any(np.may_share_memory(rows, v) for v in (scale_vector, bias) if v is not None):
        return None
    if isinstance(scale, np.float32) and scale == 1:

        def step() -> None:
            np.add(x, shift, out=rows)
            in_place(rows)

        return step

    def scaled_step() -> None:
        np.multiply(x, scale, out=rows)
        np.add(rows, shift, out=rows)
        in_place(rows)

    return scaled_step


def _prepare_nc_matmul(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.nc_matmul through matmul_into's in-place branch, or a transpose by an identity
    stationary, moving, dst = ops["stationary"], ops["moving"], ops["dst"]
    if stationary.dtype != F32 or moving.dtype != F32:
        return None
    k = stationary.shape[0]
    stationary2, moving2 = _view(stationary, (k, -1)), _view(moving, (k, -1))
    if stationary2 is None or moving2 is None:
        return None
    if attrs.get("is_transpose"):
        return _prepare_transpose(ops, attrs, engine, target, stationary2, moving2)
    lhs, rhs = np.swapaxes(stationary2, -1, -2), moving2
    rows = semantics.writable_rows(dst, 0)
    if rows is None or rows.shape != (*lhs.shape[:-1], rhs.shape[-1]):
        return None
    if attrs.get("accumulate"):

        def accumulate() -> None:
            np.add(rows, lhs @ rhs, out=rows)

        return accumulate
    return functools.partial(np.matmul, lhs, rhs, out=rows)


def _prepare_transpose(
    ops: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
    engine: Engine,
    target: Target,
    stationary2: np.ndarray,
    moving2: np.ndarray,
) -> Step | None:
    # semantics.nc_matmul with is_transpose: whether the stationary is an identity is data, tested on every run;
    # when it is, dst = moving^T (equal dtypes: store converts nothing), else the semantics function's product
    dst = ops["dst"]
    rows, columns = stationary2.shape
    if not target.matmul_transpose_bit_exact or rows != columns or dst.dtype != moving2.dtype:
        return None
    eye = semantics.identity_matrix(rows)
    eye_bytes = np.ascontiguousarray(eye, dtype=F32).tobytes()
    function = semantics.nc_matmul

    def step() -> None:
        # semantics._is_identity of an fp32 matrix, `(stationary == eye).all()`: equal bytes decide it at half
        # the cost (the same bits are the same numbers, and the identity has no NaN); other bytes may still be
        # equal numbers (-0.0 for 0.0), so they take the elementwise test
        if stationary2.tobytes() == eye_bytes or (stationary2 == eye).all():
            dst[...] = np.ascontiguousarray(moving2.T).reshape(dst.shape)
        else:
            function(ops, attrs, engine, target)

    return step


def _prepare_affine_select(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.affine_select: which elements come from on_true depends on the attributes only, computed once
    dst, on_true = ops["dst"], ops["on_true"]
    values = _rows(on_true) if on_true.dtype == dst.dtype else None
    if values is None:
        return None
    chosen = semantics._COMPARE_ZERO[attrs["cmp"]](semantics.affine_values(dst.shape[0], attrs))
    chosen.flags.writeable = False
    on_false = semantics._immediate_as(attrs["on_false_value"], dst.dtype)
    shape = dst.shape

    def step() -> None:
        dst[...] = np.where(chosen, values, on_false).reshape(shape)

    return step


def _prepare_memset(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.memset: the value is an immediate, converted once
    dst = ops["dst"]
    return _copy_into(dst, semantics._immediate_as(attrs["value"], dst.dtype))


def _prepare_iota(
    ops: Mapping[str, np.ndarray], attrs: Mapping[str, Any], engine: Engine, target: Target
) -> Step | None:
    # semantics.iota: the values depend on the attributes only, computed once
    dst = ops["dst"]
    values = alu.cast(semantics.affine_values(dst.shape[0], attrs), dst.dtype).reshape(dst.shape)
    values = np.array(values, copy=True)  # the tape's own: nothing else may write it
    values.flags.writeable = False
    return _copy_into(dst, values)


_PREPARERS: dict[str, Callable[[Mapping[str, np.ndarray], Mapping[str, Any], Engine, Target], Step | None]] = {
    "dma_copy": _prepare_dma_copy,
    "tensor_copy": _prepare_tensor_copy,
    "tensor_tensor": _prepare_tensor_tensor,
    "tensor_scalar": _prepare_tensor_scalar,
    "activation": _prepare_activation,
    "nc_matmul": _prepare_nc_matmul,
    "memset": _prepare_memset,
    "iota": _prepare_iota,
    "affine_select": _prepare_affine_select,
}
