"""Reference semantics of the tile dialect (and the HBM memrefs around it) in NumPy.

HBM memrefs are strided views of flat NumPy buffers, exactly as their layouts say; tiles are NumPy arrays.
Engines compute in fp32, so every compute op evaluates in float32 (or exactly, for integer results) and casts
to its result's element type, rounding to nearest even.

    outputs = run_tile_function(module, [x, w])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute, Operation

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.semantics.structured import Handler, InterpretationError, StructuredInterpreter
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.runtime import alu, collectives
from neuron_mlir.runtime.dtypes import numpy_dtype
from neuron_mlir.runtime.program import row_major_strides


@dataclass
class HbmTensor:
    """A memref value: a strided view (element units) of a flat buffer."""

    root: np.ndarray  # 1-D
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    def array(self) -> np.ndarray:
        itemsize = self.root.itemsize
        return np.lib.stride_tricks.as_strided(
            self.root[self.offset :], self.shape, tuple(s * itemsize for s in self.strides)
        )


class OutOfBoundsError(InterpretationError, IndexError):
    """An access the IR makes outside its tensor or tile: what no verifier can see when the indices are values."""


def numpy_type(element_type: Attribute) -> np.dtype:
    return numpy_dtype(runtime_dtype_name(element_type))


def _tile_type(op: Operation) -> tile.TileType:
    result_type = op.results[0].type
    assert isinstance(result_type, tile.TileType)
    return result_type


def _cast(values: np.ndarray, op: Operation) -> np.ndarray:
    return alu.cast(values, numpy_type(_tile_type(op).element_type))


def _alloc(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    memref_type = op.results[0].type
    assert isinstance(memref_type, MemRefType)
    shape = memref_type.get_shape()
    dtype = numpy_type(memref_type.element_type)
    root = alu.uninitialised(int(np.prod(shape, dtype=np.int64)), dtype)
    return [HbmTensor(root, shape, row_major_strides(shape), 0)]


def _view(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.ViewOp)
    source: HbmTensor = args[0]
    result_type = op.result.type
    assert isinstance(result_type, MemRefType)
    strides, offset = tile.memref_strides(result_type)
    return [HbmTensor(source.root, result_type.get_shape(), strides, offset)]


def _box(transfer: tile.LoadOp | tile.StoreOp, tensor: HbmTensor, indices: Sequence[int]) -> np.ndarray:
    """The region of `tensor` a load/store touches, with axes in tile order."""
    tile_shape = transfer.tile_type().get_shape()
    dims = transfer.mapped_dims()
    selection: list[slice | int] = list(indices)
    for dim, extent in zip(dims, tile_shape, strict=True):
        selection[dim] = slice(indices[dim], indices[dim] + extent)
    region = tensor.array()[tuple(selection)]
    # after integer indexing, the remaining axes are the mapped dims in increasing order
    remaining = sorted(dims)
    return np.transpose(region, [remaining.index(d) for d in dims])


def _load(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.LoadOp)
    tensor, *indices = args
    region = _box(op, tensor, indices)
    if region.shape != op.tile_type().get_shape():
        raise OutOfBoundsError(f"{op.name}: the tile at {indices} reaches outside the tensor of shape {tensor.shape}")
    return [alu.cast(region, numpy_type(op.tile_type().element_type))]


def _load_transpose(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.LoadTransposeOp)
    tensor, *indices = args
    walked = [*op.columns(), *op.rows()]
    selection: list[slice | int] = list(indices)
    for dim, size in walked:
        selection[dim] = slice(indices[dim], indices[dim] + size)
    region = tensor.array()[tuple(selection)]
    remaining = sorted(dim for dim, _ in walked)
    if region.shape != tuple(dict(walked)[dim] for dim in remaining):
        raise OutOfBoundsError(f"{op.name}: the tile at {indices} reaches outside the tensor of shape {tensor.shape}")
    region = np.transpose(region, [remaining.index(dim) for dim, _ in walked])
    return [region.reshape(op.tile_type().get_shape()).copy()]


def _store(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.StoreOp)
    value, tensor, *indices = args
    region = _box(op, tensor, indices)
    if region.shape != value.shape:
        raise OutOfBoundsError(f"{op.name}: the tile at {indices} reaches outside the tensor of shape {tensor.shape}")
    region[...] = alu.cast(value, tensor.root.dtype)
    return []


def _matmul(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    stationary, moving, *acc = args
    assert isinstance(op, tile.MatmulOp)
    rows = op.row_range()
    if rows is not None:
        stationary, moving = stationary[rows[0] : rows[0] + rows[1]], moving[rows[0] : rows[0] + rows[1]]
    k = stationary.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 and overflow are IEEE results, not faults
        product = stationary.reshape(k, -1).astype(np.float32).T @ moving.reshape(k, -1).astype(np.float32)
    if acc:
        product = acc[0] + product
    return [product.astype(np.float32)]


def _transpose(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    source = args[0]
    return [np.ascontiguousarray(source.reshape(source.shape[0], -1).T)]


def _empty(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    result_type = _tile_type(op)
    count = result_type.partitions * result_type.free_size
    return [alu.uninitialised(count, numpy_type(result_type.element_type)).reshape(result_type.get_shape())]


def _window(
    whole: tuple[int, ...], part: tuple[int, ...], indices: Sequence[int], steps: Sequence[int] | None = None
) -> tuple[slice | int, ...]:
    """The selection of tile.extract / tile.insert: first partitions, dropped leading free dims fixed at their
    index, kept ones every `steps`-th element from their index on."""
    dropped = len(whole) - len(part)
    steps = [1] * (len(part) - 1) if steps is None else list(steps)
    selection: list[slice | int] = [slice(0, part[0])]
    for axis, index in enumerate(indices, start=1):
        if axis <= dropped:
            selection.append(int(index))
        else:
            extent, step = part[axis - dropped], steps[axis - dropped - 1]
            end = int(index) + (extent - 1) * step + 1 if extent else int(index)
            if end > whole[axis]:
                raise OutOfBoundsError(f"a window of {part} at {list(indices)} reaches outside a tile of {whole}")
            selection.append(slice(int(index), end, step))
    return tuple(selection)


def _extract(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.ExtractOp)
    source, *indices = args
    return [np.array(source[_window(source.shape, _tile_type(op).get_shape(), indices, op.step_values())])]


def _insert(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.InsertOp)
    value, dest, *indices = args
    result = np.array(dest)
    shape = op.window_type().get_shape()
    result[_window(dest.shape, shape, indices, op.step_values())] = alu.cast(value.reshape(shape), result.dtype)
    return [result]


def _unary(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.UnaryOp)
    value = args[0].astype(np.float32)
    scale = op.scale.value.data if op.scale is not None else 1.0
    bias: Any = op.bias_value.value.data if op.bias_value is not None else 0.0
    if op.bias is not None:
        bias = args[1].astype(np.float32).reshape(-1, *([1] * (value.ndim - 1)))
    alpha = op.alpha.value.data if op.alpha is not None else 0.0
    return [_cast(alu.activation(op.fn.data, value * np.float32(scale) + bias, alpha), op)]


def is_integer_op(op: Operation) -> bool:
    """Whether a tile op computes exactly on integers: every tile operand and the result are integers (and an
    immediate scalar is integral). Such ops run on GpSimdE's 32-bit integer lanes, wrapping to 32 bits."""
    types = [value.type for value in (*op.operands, *op.results) if isinstance(value.type, tile.TileType)]
    if not all(alu.is_integer_dtype(numpy_type(t.element_type)) for t in types):
        return False
    scalar = op.properties.get("scalar")
    if scalar is None:
        return True
    return isinstance(scalar, FloatAttr | IntegerAttr) and float(scalar.value.data).is_integer()


def _binary(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.BinaryOp)
    return [_cast(alu.binary(op.op.data, args[0], args[1], is_integer_op(op)), op)]


def _binary_scalar(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.BinaryScalarOp)
    value = args[0]
    integer = is_integer_op(op)
    if op.column is not None:
        scalar: Any = args[1].reshape(-1, *([1] * (value.ndim - 1)))
    else:
        assert op.scalar is not None
        scalar = int(op.scalar.value.data) if integer else np.float32(op.scalar.value.data)
    lhs, rhs = (scalar, value) if op.is_reversed else (value, scalar)
    return [_cast(alu.binary(op.op.data, lhs, rhs, integer), op)]


def _kernel(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.KernelOp)
    value = args[0]
    other = args[1] if len(args) > 1 else np.zeros((1,), np.int32)
    if other.shape != value.shape:  # a [P, 1] column
        other = other.reshape(-1, *([1] * (value.ndim - 1)))
    return [_cast(alu.gpsimd_kernel(op.kernel.data, value, other, is_integer_op(op)), op)]


def _select(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    predicate, on_true, on_false = args
    return [_cast(np.where(predicate != 0, on_true, on_false), op)]


def _copy(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    return [_cast(args[0], op)]


def _fill(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.FillOp)
    result_type = _tile_type(op)
    if isinstance(op.value, IntegerAttr):  # integers exactly, int64 extremes included
        return [_cast(np.full(result_type.get_shape(), op.value.value.data, np.int64), op)]
    return [_cast(np.full(result_type.get_shape(), op.value.value.data, np.float32), op)]


def _reduce(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.ReduceOp)
    value = args[0]
    axes = tuple(range(value.ndim - op.reduced_axes, value.ndim))
    if is_integer_op(op):
        reduced = _INTEGER_REDUCE[op.op.data](value.astype(np.int64), axes)
    else:
        reduced = alu.reduce(op.op.data, value, axes)
    return [_cast(reduced.reshape(_tile_type(op).get_shape()), op)]


# Exact integer folds in int64; the cast to the element type then wraps, which is the same as wrapping every
# partial result (sums and products modulo 2^k are homomorphic images of the int64 ones).
_INTEGER_REDUCE = {
    "add": lambda x, axes: x.sum(axis=axes),
    "multiply": lambda x, axes: x.prod(axis=axes),
    "max": lambda x, axes: x.max(axis=axes),
    "min": lambda x, axes: x.min(axis=axes),
    "abs_max": lambda x, axes: np.abs(x).max(axis=axes),
}

_INTEGER_SCAN: dict[str, Callable[..., np.ndarray]] = {
    "add": np.cumsum,
    "multiply": np.cumprod,
    "max": np.maximum.accumulate,
    "min": np.minimum.accumulate,
}


def _scan(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.ScanOp)
    with np.errstate(over="ignore"):
        return [_cast(_INTEGER_SCAN[op.op.data](args[0].astype(np.int64), axis=-1), op)]


def _iota(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.IotaOp)
    shape = _tile_type(op).get_shape()
    grids = np.indices(shape, dtype=np.int64)
    offset = int(args[0]) if args else 0
    values = op.base_value() + offset + grids[0] * op.multiplier_value()
    for axis, step in enumerate(op.step_values(), start=1):
        values = values + grids[axis] * step
    return [_cast(values.astype(np.int32), op)]


def _indirect_rows(
    op: tile.GatherOp | tile.ScatterOp, tensor: HbmTensor, indices: Sequence[int], offsets: np.ndarray
) -> list[np.ndarray]:
    """For each offset in row-major (p, r) order: the view of its row in `tensor`, shape (1, row extents...)."""
    array = tensor.array()
    dim, dims = op.indexed_dim, op.row_dims()
    extents = op.rows_type().get_shape()[1:] if dims else ()
    bound = array.shape[dim] - indices[dim]
    views: list[np.ndarray] = []
    for p, r in np.ndindex(*offsets.shape):
        offset = int(offsets[p, r])
        if not 0 <= offset < bound:
            raise OutOfBoundsError(f"{op.name}: offset {offset} at partition {p} is outside [0, {bound})")
        selection: list[slice | int] = list(indices)
        selection[dim] = slice(indices[dim] + offset, indices[dim] + offset + 1)
        for d, extent in zip(dims, extents, strict=True):
            selection[d] = slice(indices[d], indices[d] + extent)
        region = array[tuple(selection)]
        # after integer indexing the remaining axes are dim and dims in increasing order: put dim first (size 1)
        remaining = sorted([dim, *dims])
        views.append(np.transpose(region, [remaining.index(d) for d in (dim, *dims)]))
    return views


def _gather(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.GatherOp)
    tensor, *indices, offsets = args
    rows = [np.array(view) for view in _indirect_rows(op, tensor, indices, offsets)]
    return [_cast(np.stack(rows).reshape(op.rows_type().get_shape()), op)]


def _scatter(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    assert isinstance(op, tile.ScatterOp)
    value, tensor, *indices, offsets = args
    views = _indirect_rows(op, tensor, indices, offsets)
    flat = value.reshape(len(views), -1)
    for view, row in zip(views, flat, strict=True):
        row = row.reshape(view.shape)
        if op.accumulate is not None:
            row = alu.to_f32(view) + alu.to_f32(row)
        view[...] = alu.cast(row, tensor.root.dtype)
    return []


def _collective(interp: StructuredInterpreter, op: Operation, args: list[Any]) -> list[Any]:
    """The exchange through the injected transport (`runtime.collectives`), the whole tensors in row-major order."""
    assert isinstance(op, tile.CollectiveOp)
    source, dest = args
    reduction = op.reduce.data if op.reduce is not None else "sum"
    groups = tile.replica_groups_of(op.replica_groups)
    try:
        root = op.root.value.data if op.root is not None else 0
        sent, received = (
            tuple(int(c) for c in counts.get_values()) if counts is not None else ()
            for counts in (op.input_splits, op.output_splits)
        )
        flat = collectives.execute(
            op.kind.data, np.ascontiguousarray(source.array()).reshape(-1), groups, reduction, root, (sent, received)
        )
    except collectives.CollectiveError as error:
        raise InterpretationError(f"{op.name}: {error}", op) from error
    dest.array()[...] = flat.reshape(dest.shape)
    return []


TILE_HANDLERS: dict[type[Operation], Handler] = {
    memref.AllocOp: _alloc,
    tile.ViewOp: _view,
    tile.LoadOp: _load,
    tile.LoadTransposeOp: _load_transpose,
    tile.StoreOp: _store,
    tile.MatmulOp: _matmul,
    tile.TransposeOp: _transpose,
    tile.EmptyOp: _empty,
    tile.ExtractOp: _extract,
    tile.InsertOp: _insert,
    tile.UnaryOp: _unary,
    tile.BinaryOp: _binary,
    tile.BinaryScalarOp: _binary_scalar,
    tile.SelectOp: _select,
    tile.CopyOp: _copy,
    tile.FillOp: _fill,
    tile.IotaOp: _iota,
    tile.GatherOp: _gather,
    tile.ScatterOp: _scatter,
    tile.ReduceOp: _reduce,
    tile.ScanOp: _scan,
    tile.KernelOp: _kernel,
    tile.CollectiveOp: _collective,
}


def run_tile_function(module: ModuleOp, inputs: Sequence[np.ndarray], entry: str = "main") -> list[np.ndarray]:
    """Run a tile-level function on NumPy inputs; returns its results as fresh arrays."""
    tensors = []
    for value in inputs:
        flat = np.ascontiguousarray(value).reshape(-1).copy()
        shape = tuple(np.shape(value))
        tensors.append(HbmTensor(flat, shape, row_major_strides(shape), 0))
    results = StructuredInterpreter(TILE_HANDLERS).run_function(module, tensors, entry)
    return [np.array(result.array()) for result in results]
