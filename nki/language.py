"""`nki.language`: tensors, buffers, dtypes, loops, launch grids and the tile-level functions of NKI.

Creation (`ndarray`, `zeros`, `ones`, `full`, `zeros_like`, `empty_like`) allocates a buffer in the memory its
`buffer` names: `sbuf`, `psum`, or HBM (`hbm` = `private_hbm`, `shared_hbm`). `affine_range`,
`sequential_range` and `fori_loop` are traced as loops, `static_range` is unrolled (see `tracing.py`).

The functions that return new tiles (`load`, `copy`, `matmul`, `transpose`, the elementwise arithmetic,
activations and reductions, `broadcast_to`, `where`) allocate their result and issue `nki.isa` instructions: an
elementwise op of two tiles is a VectorE `tensor_tensor` (a [P, 1] operand or a number makes it a
`tensor_scalar`, with the operands swapped when the number comes first), `divide` is GpSimdE's exact divide, a
unary function is a ScalarE `activation`, a reduction a VectorE `tensor_reduce`, `matmul` and `transpose` TensorE
products into PSUM.
"""

from __future__ import annotations

import builtins
import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import StringAttr

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.nki import isa as nisa
from neuron_mlir.nki.operators import BINARY, REDUCTIONS, UNARY, Operator
from neuron_mlir.nki.tracing import Buffer, DynSlice, NkiTensor, current_trace, dtype_of, error, trace
from neuron_mlir.runtime.hardware import DEFAULT_TARGET, Engine, Memory, get_target

# ---- buffers ---------------------------------------------------------------------------------------------------


class BufferKind:
    """Where `nl.ndarray` puts a tensor: `nl.sbuf`, `nl.psum`, `nl.hbm`/`nl.private_hbm`, `nl.shared_hbm`."""

    def __init__(self, name: str, memory: Memory, shared: bool = False) -> None:
        self.name = name
        self.memory = memory
        self.shared = shared

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __eq__(self, other: object) -> bool:
        # `tensor.buffer == nl.sbuf`, as kernels ask where a tensor lives: a tensor's buffer record is in this
        # memory (any HBM buffer equals nl.hbm and nl.shared_hbm)
        if isinstance(other, Buffer):
            return other.memory is self.memory
        return self is other

    __hash__ = object.__hash__


sbuf = BufferKind("sbuf", Memory.SBUF)
psum = BufferKind("psum", Memory.PSUM)
hbm = BufferKind("hbm", Memory.HBM)
private_hbm = hbm
shared_hbm = BufferKind("shared_hbm", Memory.HBM, shared=True)

# ---- dtypes ----------------------------------------------------------------------------------------------------

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
# fp8 [nki-shared]: e4m3fn (no infinities, largest 448) and e5m2 have storage types; NKI's float8_e4m3 (the
# variant with infinities, largest 240) has none, so using it is a diagnostic naming the dtype
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)


# ---- sizes -----------------------------------------------------------------------------------------------------


_DEFAULT_TARGET = get_target(DEFAULT_TARGET)


class tile_size:
    """The tile limits kernels size their loops by: the default target's figures (`runtime/hardware.py`)."""

    pmax = _DEFAULT_TARGET.partitions  # partitions of an SBUF/PSUM tile
    psum_fmax = _DEFAULT_TARGET.psum_bank_bytes // 4  # fp32 elements of a PSUM tile per partition: one bank
    psum_bank_fmax = psum_fmax
    gemm_stationary_fmax = _DEFAULT_TARGET.matmul_max_stationary_free  # free size of nc_matmul's stationary (M)
    gemm_moving_fmax = _DEFAULT_TARGET.matmul_max_moving_free  # free size of nc_matmul's moving operand (N)
    bn_stats_fmax = 512  # NKI's published limit of bn_stats' free size (an API figure, not a hardware one here)
    psum_num_banks = _DEFAULT_TARGET.psum_banks


# ---- indexing and loops ----------------------------------------------------------------------------------------


def ds(start: Any, size: Any) -> DynSlice:
    """`size` elements from `start` along one dimension, as an index entry."""
    return DynSlice(start, size)


def _traced_loop(start: Any, stop: Any, step: Any) -> Iterator[Any]:
    low, high = (0, start) if stop is None else (start, stop)
    return trace().loop_range(low, high, step)


def affine_range(start: Any, stop: Any = None, step: Any = 1) -> Iterator[Any]:
    """Iterations without carried dependencies: an `scf.for` whose index is symbolic (see `tracing.py`)."""
    return _traced_loop(start, stop, step)


def sequential_range(start: Any, stop: Any = None, step: Any = 1) -> Iterator[Any]:
    """Iterations that depend on each other: an `scf.for` too, whose trips run in order like every loop's."""
    return _traced_loop(start, stop, step)


def fori_loop(lower: Any, upper: Any, body_fun: Any, step: Any = 1, unroll: bool = False) -> None:
    """NKI's compiled loop, `body_fun(i)` for i in range(lower, upper, step), traced as an `scf.for` like
    `sequential_range` (`unroll=True`: unrolled while tracing). The bounds must be known when the kernel is
    traced: bounds held in registers (run-time bounds) are not supported."""
    for name, value in (("lower", lower), ("upper", upper), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise error(
                f"nl.fori_loop: {name} must be an int known when the kernel is traced, got {type(value).__name__} "
                "(run-time bounds in registers are not supported)"
            )
    if step <= 0:
        raise error(f"nl.fori_loop: step must be a positive int, got {step}")
    if not callable(body_fun):
        raise error(f"nl.fori_loop: body_fun must be a function of the loop index, got {type(body_fun).__name__}")
    for index in static_range(lower, upper, step) if unroll else _traced_loop(lower, upper, step):
        body_fun(index)


def static_range(start: int, stop: int | None = None, step: int = 1) -> range:
    """A loop unrolled while tracing: the index is a Python int."""
    return range(start, stop, step) if stop is not None else range(start)


def program_id(axis: int = 0) -> int:
    """This program's index along `axis` of the launch grid (`kernel[n]`)."""
    ids = trace().program_ids
    if not 0 <= axis < len(ids):
        raise error(f"nl.program_id({axis}): the launch grid has {len(ids)} axes")
    return ids[axis]


def num_programs(axes: int = 0) -> int:
    """The size of the launch grid along `axes`."""
    grid = trace().grid
    if not 0 <= axes < len(grid):
        raise error(f"nl.num_programs({axes}): the launch grid has {len(grid)} axes")
    return grid[axes]


def program_ndim() -> int:
    return len(trace().grid)


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Instructions are issued in program order already; kept for kernels that ask for it."""
    yield


# ---- creation --------------------------------------------------------------------------------------------------


def ndarray(shape: Sequence[int], dtype: Any, buffer: BufferKind = sbuf, name: str = "", **_: Any) -> NkiTensor:
    """An uninitialised tensor of `shape` in `buffer` (on chip, dimension 0 is the partitions)."""
    if not isinstance(buffer, BufferKind):
        raise error(f"nl.ndarray: buffer {buffer!r} is not nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")
    current = trace()
    dims = tuple(int(s) for s in (shape if isinstance(shape, tuple | list) else (shape,)))
    if buffer.shared:
        return current.shared_output(dims, dtype_of(dtype), name)
    return current.allocate(dims, dtype_of(dtype), buffer.memory, name)


def full(shape: Sequence[int], fill_value: float, dtype: Any, buffer: BufferKind = sbuf, name: str = "") -> NkiTensor:
    tensor = ndarray(shape, dtype, buffer, name)
    if buffer.memory is Memory.HBM:
        raise error("nl.full: fills are on-chip (memset); create the tile in nl.sbuf and store it")
    nisa.memset(tensor, fill_value)
    return tensor


def zeros(shape: Sequence[int], dtype: Any, buffer: BufferKind = sbuf, name: str = "") -> NkiTensor:
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape: Sequence[int], dtype: Any, buffer: BufferKind = sbuf, name: str = "") -> NkiTensor:
    return full(shape, 1.0, dtype, buffer, name)


def _buffer_of(tensor: NkiTensor) -> BufferKind:
    return {Memory.SBUF: sbuf, Memory.PSUM: psum, Memory.HBM: hbm}[tensor.buffer.memory]


def zeros_like(x: NkiTensor, dtype: Any = None, buffer: BufferKind | None = None, name: str = "") -> NkiTensor:
    return zeros(x.shape, dtype or x.dtype, buffer or _buffer_of(x), name)


def empty_like(x: NkiTensor, dtype: Any = None, buffer: BufferKind | None = None, name: str = "") -> NkiTensor:
    return ndarray(x.shape, dtype or x.dtype, buffer or _buffer_of(x), name)


# ---- movement --------------------------------------------------------------------------------------------------


def _tile_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape if len(shape) >= 2 else (1, *shape)


def load(src: NkiTensor, dtype: Any = None, **_: Any) -> NkiTensor:
    """A new SBUF tile holding `src` (an HBM view; its first dimension becomes the partitions)."""
    if not isinstance(src, NkiTensor) or src.buffer.memory is not Memory.HBM:
        raise error(f"nl.load: src must be an HBM tensor, got {src!r}")
    tile = ndarray(_tile_shape(src.shape), dtype or src.dtype, sbuf)
    nisa.dma_copy(tile, src)
    return tile


def load_transpose2d(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """A new SBUF tile [P, F] holding the 2-D HBM view src [F, P] transposed.

    Where the target has DMA transposes (trn2, trn3) and src's rows are contiguous 2-byte elements loaded
    without conversion, it is one `nisa.dma_transpose`; otherwise (trn1, other dtypes) a copy reading src
    column-wise with element strides, which every target's DMA can do, more slowly."""
    if not isinstance(src, NkiTensor) or src.buffer.memory is not Memory.HBM or src.ndim != 2:
        raise error(f"nl.load_transpose2d: src must be a 2-D HBM tensor, got {src!r}")
    wanted = dtype_of(dtype) if dtype is not None else src.dtype
    if (
        trace().target.dma_transpose_hbm_efficiency
        and wanted == src.dtype
        and src.dtype.itemsize == 2
        and src.strides[-1] == 1
    ):
        tile = ndarray((src.shape[1], src.shape[0]), src.dtype, sbuf)
        nisa.dma_transpose(tile, src)
        return tile
    return load(src.T, dtype)


def store(dst: NkiTensor, value: NkiTensor, **_: Any) -> None:
    """Write the on-chip tile `value` into the HBM view `dst` (a PSUM tile goes through SBUF first)."""
    if not isinstance(dst, NkiTensor) or dst.buffer.memory is not Memory.HBM:
        raise error(f"nl.store: dst must be an HBM tensor, got {dst!r}")
    if isinstance(value, NkiTensor) and value.buffer.memory is Memory.PSUM:
        value = copy(value)
    nisa.dma_copy(dst, value)


def _copy(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """A new SBUF tile holding x (from SBUF or PSUM), converted to dtype."""
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    nisa.tensor_copy(out, x)
    return out


copy = UNARY["copy"]


def transpose(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """x[P, F]^T as a new PSUM tile [F, P] (TensorE)."""
    exact = trace().target.matmul_transpose_bit_exact
    out = ndarray((x.shape[1], x.shape[0]), dtype or (x.dtype if exact else float32), psum)
    nisa.nc_transpose(out, x)
    return out


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
    """x @ y as a new fp32 PSUM tile [M, N]: x is [M, K] ([K, M] with transpose_x), y [K, N]."""
    stationary = x
    if not transpose_x:
        stationary = _copy(transpose(x), x.dtype)
    out = ndarray((stationary.shape[1], y.shape[1]), float32, psum)
    nisa.nc_matmul(out, stationary, y)
    return out


def broadcast_to(x: NkiTensor, shape: Sequence[int]) -> NkiTensor:
    """x with size-1 dimensions repeated to `shape`; across partitions it is a TensorE product with a ones row
    (a new tile), along free dimensions a view that reads each element repeatedly."""
    target = tuple(int(s) for s in shape)
    if x.shape[0] != target[0]:
        if x.shape[0] != 1 or x.ndim != 2:
            raise error(f"nl.broadcast_to: cannot broadcast {list(x.shape)} to {list(target)} (rows [1, F] only)")
        # ones[1, P]^T @ x[1, F]: every partition receives the row, one PSUM bank of columns at a time
        ones_row = full((1, target[0]), 1.0, x.dtype)
        spread = ndarray((target[0], x.size), x.dtype, sbuf)
        width = tile_size.psum_fmax
        for first in range(0, x.size, width):
            columns = slice(first, builtins.min(first + width, x.size))  # this module's min is nl.min
            product = ndarray((target[0], columns.stop - first), float32, psum)
            nisa.nc_matmul(product, ones_row, x[:, columns])
            nisa.tensor_copy(spread[:, columns], product)
        x = spread
    if x.shape == target:
        return x
    return x.broadcast_free(target)


# ---- elementwise arithmetic ------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating)


def _result_dtype(dtype: Any, *operands: Any) -> np.dtype:
    if dtype is not None:
        return dtype_of(dtype)
    tiles = [o.dtype for o in operands if isinstance(o, NkiTensor)]
    if all(t == tiles[0] for t in tiles):
        return tiles[0]
    return float32 if float32 in tiles else tiles[0]


def _is_column(t: NkiTensor) -> bool:
    return t.size == t.shape[0]


def _binary_function(token: Operator) -> Any:
    api = f"nl.{token.name}"

    def function(x: Any, y: Any, dtype: Any = None, **_: Any) -> NkiTensor:
        if not isinstance(x, NkiTensor) and not isinstance(y, NkiTensor):
            raise error(f"{api}: at least one operand must be a tile")
        out_dtype = _result_dtype(dtype, x, y)
        if token.name == "divide":
            return _divide(x, y, out_dtype)
        if isinstance(x, NkiTensor) and _is_number(y):
            out = ndarray(x.shape, out_dtype)
            nisa.tensor_scalar(out, x, token, float(y))
            return out
        if _is_number(x) and isinstance(y, NkiTensor):
            out = ndarray(y.shape, out_dtype)
            nisa.tensor_scalar(out, y, token, float(x), reverse0=True)
            return out
        assert isinstance(x, NkiTensor)
        assert isinstance(y, NkiTensor)
        if x.shape != y.shape and x.shape[0] == y.shape[0]:
            if _is_column(y) and not _is_column(x):
                out = ndarray(x.shape, out_dtype)
                nisa.tensor_scalar(out, x, token, y)
                return out
            if _is_column(x) and not _is_column(y):
                out = ndarray(y.shape, out_dtype)
                nisa.tensor_scalar(out, y, token, x, reverse0=True)
                return out
        shape = _broadcast_shape(x.shape, y.shape, api)
        x, y = broadcast_to(x, shape), broadcast_to(y, shape)
        if x.buffer.memory is Memory.PSUM and y.buffer.memory is Memory.PSUM:
            y = _copy(y)
        out = ndarray(shape, out_dtype)
        nisa.tensor_tensor(out, x, y, token)
        return out

    return function


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], api: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in np.broadcast_shapes(a, b))
    except ValueError:
        raise error(f"{api}: shapes {list(a)} and {list(b)} do not broadcast") from None


def _divide(x: Any, y: Any, out_dtype: np.dtype) -> NkiTensor:
    """x / y: a multiply by 1/y for a number y, else GpSimdE's IEEE division (from SBUF)."""
    if isinstance(x, NkiTensor) and _is_number(y):
        out = ndarray(x.shape, out_dtype)
        nisa.tensor_scalar(out, x, BINARY["multiply"], 1.0 / float(y))
        return out
    if _is_number(x):
        assert isinstance(y, NkiTensor)
        numerator = full(y.shape, float(x), float32)
        return _divide(numerator, y, out_dtype)
    assert isinstance(x, NkiTensor)
    assert isinstance(y, NkiTensor)
    if x.buffer.memory is Memory.PSUM:
        x = _copy(x)
    if y.buffer.memory is Memory.PSUM:
        y = _copy(y)
    if not (_is_column(y) and y.shape[0] == x.shape[0]):
        shape = _broadcast_shape(x.shape, y.shape, "nl.divide")
        x, y = broadcast_to(x, shape), broadcast_to(y, shape)
    out = ndarray(x.shape, out_dtype)
    trace().emit(
        "nl.divide",
        neuron.GpsimdKernelOp,
        Engine.GPSIMD,
        {"dst": out, "in0": x, "in1": y},
        {"kernel": StringAttr("divide")},
    )
    return out


def _unary_function(token: Operator) -> Any:
    def function(x: NkiTensor, dtype: Any = None, **_: Any) -> NkiTensor:
        out = ndarray(x.shape, _result_dtype(dtype, x))
        nisa.activation(out, token, x)
        return out

    return function


def _reduction_function(token: Operator) -> Any:
    api = f"nl.{token.name}"

    def function(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False, **_: Any) -> NkiTensor:
        axes = nisa._reduced_axes(x, axis, api)
        kept = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        shape = kept if keepdims else tuple(s for d, s in enumerate(x.shape) if d not in axes)
        out = ndarray(shape, _result_dtype(dtype, x))
        if token.name == "mean":
            nisa.tensor_reduce(out, BINARY["add"], x, axis)
            count = math.prod(x.shape[d] for d in axes)
            nisa.tensor_scalar(out, out, BINARY["multiply"], 1.0 / count)
        else:
            nisa.tensor_reduce(out, token, x, axis)
        return out

    return function


for _token in BINARY.values():
    _token.function = _binary_function(_token)
for _token in UNARY.values():
    _token.function = _unary_function(_token)
UNARY["copy"].function = _copy
for _token in REDUCTIONS.values():
    _token.function = _reduction_function(_token)

add = BINARY["add"]
subtract = BINARY["subtract"]
multiply = BINARY["multiply"]
divide = BINARY["divide"]
maximum = BINARY["maximum"]
minimum = BINARY["minimum"]
power = BINARY["power"]
equal = BINARY["equal"]
not_equal = BINARY["not_equal"]
greater = BINARY["greater"]
greater_equal = BINARY["greater_equal"]
less = BINARY["less"]
less_equal = BINARY["less_equal"]
logical_and = BINARY["logical_and"]
logical_or = BINARY["logical_or"]
logical_xor = BINARY["logical_xor"]
bitwise_and = BINARY["bitwise_and"]
bitwise_or = BINARY["bitwise_or"]
bitwise_xor = BINARY["bitwise_xor"]
left_shift = BINARY["left_shift"]
right_shift = BINARY["right_shift"]

exp = UNARY["exp"]
log = UNARY["log"]
sqrt = UNARY["sqrt"]
rsqrt = UNARY["rsqrt"]
reciprocal = UNARY["reciprocal"]
relu = UNARY["relu"]
sigmoid = UNARY["sigmoid"]
tanh = UNARY["tanh"]
gelu = UNARY["gelu"]
gelu_dx = UNARY["gelu_dx"]
gelu_apprx_tanh = UNARY["gelu_apprx_tanh"]
silu = UNARY["silu"]
silu_dx = UNARY["silu_dx"]
erf = UNARY["erf"]
softplus = UNARY["softplus"]
mish = UNARY["mish"]
sin = UNARY["sin"]
arctan = UNARY["arctan"]
sign = UNARY["sign"]
abs = UNARY["abs"]
square = UNARY["square"]

sum = REDUCTIONS["sum"]
max = REDUCTIONS["max"]
min = REDUCTIONS["min"]
prod = REDUCTIONS["prod"]
mean = REDUCTIONS["mean"]


def _last_free_axis(x: NkiTensor, axis: Any, api: str) -> None:
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    if x.ndim != 2 or [int(a) % x.ndim for a in axes] != [1]:
        raise error(f"{api}: over the free axis of a 2-D tile [P, F] only, got axis {axis} of {list(x.shape)}")


def softmax(x: NkiTensor, axis: Any = -1, dtype: Any = None, **_: Any) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) along the free axis: a VectorE max, one ScalarE exp that also sums the row,
    a reciprocal and a multiply."""
    _last_free_axis(x, axis, "nl.softmax")
    rows = x.shape[0]
    negated_max = ndarray((rows, 1), float32)
    nisa.tensor_reduce(negated_max, BINARY["maximum"], x, axis=1, negate=True)
    exps = ndarray(x.shape, float32)
    sums = ndarray((rows, 1), float32)
    nisa.activation(exps, UNARY["exp"], x, bias=negated_max, reduce_res=sums)
    nisa.reciprocal(sums, sums)
    out = ndarray(x.shape, _result_dtype(dtype, x))
    nisa.tensor_scalar(out, exps, BINARY["multiply"], sums)
    return out


def rms_norm(
    x: NkiTensor, w: NkiTensor, axis: Any, n: int, epsilon: float = 1e-6, dtype: Any = None, **_: Any
) -> NkiTensor:
    """x / sqrt(sum(x^2) / n + epsilon) * w along the free axis (w a tile of x's shape, or a row [1, F])."""
    _last_free_axis(x, axis, "nl.rms_norm")
    rows = x.shape[0]
    squares = ndarray(x.shape, float32)
    inverse_rms = ndarray((rows, 1), float32)
    nisa.activation(squares, UNARY["square"], x, reduce_res=inverse_rms)
    nisa.activation(inverse_rms, UNARY["rsqrt"], inverse_rms, scale=1.0 / n, bias=epsilon)
    weight = broadcast_to(w, x.shape) if w.shape != x.shape else w
    out = ndarray(x.shape, _result_dtype(dtype, x))
    nisa.scalar_tensor_tensor(out, x, BINARY["multiply"], inverse_rms, BINARY["multiply"], weight)
    return out


def var(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False, **_: Any) -> NkiTensor:
    """The population variance along the free axis of a 2-D tile: the mean, then the mean of squared deviations
    (a subtract and one ScalarE square that sums the row)."""
    _last_free_axis(x, axis, "nl.var")
    rows, count = x.shape
    centre = ndarray((rows, 1), float32)
    nisa.tensor_reduce(centre, BINARY["add"], x, axis=1)
    nisa.tensor_scalar(centre, centre, BINARY["multiply"], 1.0 / count)
    deviations = ndarray(x.shape, float32)
    nisa.tensor_scalar(deviations, x, BINARY["subtract"], centre)
    out = ndarray((rows, 1) if keepdims else (rows,), _result_dtype(dtype, x))
    nisa.activation(deviations, UNARY["square"], deviations, scale=1.0, reduce_res=centre)
    nisa.tensor_scalar(out, centre, BINARY["multiply"], 1.0 / count)
    return out


def where(condition: NkiTensor, x: NkiTensor, y: NkiTensor, dtype: Any = None) -> NkiTensor:
    """x where condition is non-zero, else y (VectorE select; tiles of one shape)."""
    out = ndarray(x.shape, _result_dtype(dtype, x, y))
    trace().emit(
        "nl.where", neuron.SelectOp, Engine.VECTOR, {"dst": out, "predicate": condition, "on_true": x, "on_false": y}
    )
    return out


def in_kernel() -> bool:
    """Whether a kernel is being traced (for helpers shared with plain NumPy code)."""
    return current_trace(required=False) is not None
