"""The tile dialect: where layout and tiling are decided and visible, still with value semantics.

Values of type `!tile.tile<P x F... x T, sbuf|psum>` are on-chip tiles: the first dimension is the partition
axis (P <= 128), the rest the free axes. Tiles are loaded from and stored to HBM tensors, which are memrefs in
`#mem<hbm>` (`ir/dialects/memory.py`), usually inside `scf.for` loops over tile offsets. A tile op is one of the
compute families the engines offer (TensorE matmul into PSUM, elementwise with per-partition or immediate
scalars, free-axis reductions, transposes, fills, casts); which instruction and engine implement it is decided
when converting to the neuron dialect. A tile kept on chip across loops (a matmul's stationary panel) is walked
through windows: `tile.extract` reads a window in place, `tile.insert` writes one, `tile.empty` starts a tile
filled that way. There are no buffers yet: a tile is a value, and PSUM accumulation across a K loop is a
loop-carried `tile.matmul ... acc`.

HBM views (transposes, reshapes, broadcasts, slices) are `tile.view`s: the result memref's strided layout
describes the view relative to the underlying allocation, so a view costs nothing and a load through it becomes
a strided DMA.

Reference semantics: NumPy (`ir/semantics/tile.py`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    UnitAttr,
    f64,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect, Pure
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir.dialects.memory import MemorySpaceAttr, memory_of, memory_space
from neuron_mlir.ir.dialects.neuron import NUMBER, element_type_name, target_of, view_problem
from neuron_mlir.ir.locations import at_source
from neuron_mlir.ir.op_init import init_op
from neuron_mlir.ir.types import is_integer_type, number_attr
from neuron_mlir.ir.verification import memoized_verify, value_key
from neuron_mlir.runtime import dtypes, hardware, isa
from neuron_mlir.runtime.hardware import Memory
from neuron_mlir.runtime.program import row_major_strides


@irdl_attr_definition
class TileType(ParametrizedAttribute, TypeAttribute):
    """An on-chip tile: `!tile.tile<128x512xf32, sbuf>`; the first dimension is the partition axis."""

    name = "tile.tile"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    memory_space: MemorySpaceAttr

    def __init__(self, shape: Sequence[int], element_type: Attribute, memory: Memory = Memory.SBUF) -> None:
        super().__init__(ArrayAttr([IntAttr(d) for d in shape]), element_type, memory_space(memory))

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def memory(self) -> Memory:
        return self.memory_space.memory

    @property
    def partitions(self) -> int:
        return self.get_shape()[0]

    @property
    def free_size(self) -> int:
        size = 1
        for extent in self.get_shape()[1:]:
            size *= extent
        return size

    def with_memory(self, memory: Memory) -> TileType:
        return TileType(self.get_shape(), self.element_type, memory)

    def verify(self) -> None:
        shape = self.get_shape()
        if len(shape) < 2:
            raise VerifyException(f"a tile has a partition axis and at least one free axis, got shape {shape}")
        if any(extent <= 0 for extent in shape):
            raise VerifyException(f"tile shape {shape} has a non-positive dimension")
        if self.memory_space.memory is Memory.HBM:
            raise VerifyException("a tile lives in sbuf or psum, not hbm")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            shape, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            memory = parser.parse_identifier(context_msg=" tile memory (sbuf or psum)")
        if memory not in (Memory.SBUF.value, Memory.PSUM.value):
            parser.raise_error(f"tile memory must be sbuf or psum, got '{memory}'")
        return TileType(shape, element_type, Memory(memory)).parameters

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("x".join(str(d) for d in self.get_shape()) + "x")
            printer.print_attribute(self.element_type)
            printer.print_string(f", {self.memory.value}")


def _error(op: Operation, message: str) -> VerifyException:
    return VerifyException(f"{op.name}: {message}{at_source(op)}")


def _tile(value: SSAValue) -> TileType:
    assert isinstance(value.type, TileType)
    return value.type


def _check_partitions(op: Operation, tile_type: TileType, what: str) -> None:
    limit = target_of(op).partitions
    if tile_type.partitions > limit:
        raise _error(op, f"{what} has {tile_type.partitions} partitions, more than the {limit} the hardware has")


def memref_strides(memref_type: MemRefType) -> tuple[tuple[int, ...], int]:
    """(strides, offset) in elements of a memref relative to its underlying allocation.

    Raises ValueError for a dynamic stride or offset: addresses are computed at compile time, so every layout
    must be static (the view verifiers enforce it on the views they create).
    """
    layout = memref_type.layout
    if not isinstance(layout, StridedLayoutAttr):
        return row_major_strides(memref_type.get_shape()), 0
    strides = [value.data for value in layout.strides.data if isinstance(value, IntAttr)]
    if len(strides) != len(layout.strides.data) or not isinstance(layout.offset, IntAttr):
        raise ValueError(f"{memref_type} has a dynamic layout: strides and offset must be static")
    return tuple(strides), layout.offset.data


def hbm_type(
    shape: Sequence[int], element_type: Attribute, strides: Sequence[int] | None = None, offset: int = 0
) -> MemRefType:
    """An HBM memref; strided when `strides` (elements) differ from row-major or `offset` is non-zero."""
    layout: StridedLayoutAttr | NoneAttr = NoneAttr()
    if strides is not None and (tuple(strides) != row_major_strides(shape) or offset != 0):
        layout = StridedLayoutAttr(list(strides), offset)
    return MemRefType(element_type, shape, layout, memory_space(Memory.HBM))


# ----------------------------------------------------------------------------------------------------------------
# HBM views and data movement
# ----------------------------------------------------------------------------------------------------------------


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A view of an HBM tensor: the result type's strided layout says where its elements are.

    Offsets and strides of the result are in elements relative to the allocation underneath `source` (as in
    MLIR's strided layouts), so chains of views compose by construction and cost nothing at run time.

    ```mlir
    %wt = tile.view %w : memref<520x300xf32, #mem<hbm>>
                      to memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
    ```
    """

    name = "tile.view"

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


class _TileTransferOp(IRDLOperation):
    """Shared checks of tile.load / tile.store: index count, `dims` mapping and static bounds."""

    dims = opt_prop_def(DenseArrayBase)

    def memref_type(self) -> MemRefType:
        raise NotImplementedError

    def tile_type(self) -> TileType:
        raise NotImplementedError

    def index_values(self) -> Sequence[SSAValue]:
        raise NotImplementedError

    def mapped_dims(self) -> tuple[int, ...]:
        """For each tile dimension, the memref dimension it walks (default: the memref's last dims in order)."""
        if self.dims is not None:
            return tuple(int(d) for d in self.dims.get_values())
        rank = len(self.memref_type().get_shape())
        tile_rank = len(self.tile_type().get_shape())
        return tuple(range(rank - tile_rank, rank))

    def verify_(self) -> None:
        memref_type, tile_type = self.memref_type(), self.tile_type()
        rank = len(memref_type.get_shape())
        if len(self.index_values()) != rank:
            raise _error(self, f"expected {rank} indices for a rank-{rank} tensor, got {len(self.index_values())}")
        dims = self.mapped_dims()
        if len(dims) != len(tile_type.get_shape()):
            raise _error(self, f"dims {list(dims)} must name one tensor dimension per tile dimension")
        if len(set(dims)) != len(dims) or any(not 0 <= d < rank for d in dims):
            raise _error(self, f"dims {list(dims)} must be distinct dimensions of the rank-{rank} tensor")
        for tile_dim, (dim, extent) in enumerate(zip(dims, tile_type.get_shape(), strict=True)):
            if extent > memref_type.get_shape()[dim]:
                raise _error(
                    self,
                    f"tile dimension {tile_dim} ({extent}) is larger than tensor dimension {dim} "
                    f"({memref_type.get_shape()[dim]})",
                )
        _check_partitions(self, tile_type, "the tile")
        if memory_of(memref_type) is not Memory.HBM:
            raise _error(self, "tiles move between HBM tensors and on-chip memory")


@irdl_op_definition
class LoadOp(_TileTransferOp):
    """Load a tile from an HBM tensor starting at `indices`; `dims[i]` is the tensor dimension tile dim i walks.

    Tensor dimensions not in `dims` are fixed at their index. A `dims` that is not increasing loads a
    transposed tile; the element type may differ from the tensor's (the DMA converts).

    ```mlir
    %t = tile.load %x[%i, %c0] : memref<37x300xf32, #mem<hbm>> -> !tile.tile<37x300xf32, sbuf>
    %xt = tile.load %x[%c0, %k] {dims = array<i64: 1, 0>} : memref<37x300xf32, #mem<hbm>>
                                                          -> !tile.tile<128x37xf32, sbuf>
    ```
    """

    name = "tile.load"

    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(TileType)

    traits = traits_def(MemoryReadEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)"

    def __init__(
        self, source: SSAValue, indices: Sequence[SSAValue], result_type: TileType, dims: Sequence[int] | None = None
    ):
        props = {"dims": DenseArrayBase.from_list(i64, list(dims))} if dims is not None else {}
        init_op(self, operands=[source, indices], result_types=[result_type], properties=props)

    def memref_type(self) -> MemRefType:
        assert isinstance(self.source.type, MemRefType)
        return self.source.type

    def tile_type(self) -> TileType:
        return _tile(self.result)

    def index_values(self) -> Sequence[SSAValue]:
        return self.indices

    def verify_(self) -> None:
        super().verify_()
        if self.tile_type().memory is not Memory.SBUF:
            raise _error(self, "tiles are loaded into SBUF")


@irdl_op_definition
class LoadTransposeOp(IRDLOperation):
    """Load a tile whose partitions walk several tensor dimensions: `column_dims` (outermost first, `column_sizes`
    long) on the partitions, `row_dims` (`row_sizes` long) on the free dimensions, from `indices` on. Element
    [c, r...] is the tensor element at `indices` advanced by the row index r along the row dims and the flattened
    partition index c along the column dims (row-major: the last column dim fastest).

    It is a DMA transpose (targets whose DMAs transpose 2-byte elements; no conversion): each row of the source,
    read along the column dims, lands across the partitions. The partitions of a tile.load walk one tensor
    dimension; this one gathers, say, a patch's (kernel row, kernel column) elements, two dimensions of an image,
    onto the partitions of a matmul operand.

    ```mlir
    %p = tile.load_transpose %x[%n, %c, %c0, %c0] {row_dims = array<i64: 2, 3>, row_sizes = array<i64: 14, 14>,
           column_dims = array<i64: 4, 5>, column_sizes = array<i64: 8, 16>}
         : memref<2x3x14x16x14x16xbf16, strided<[...]>, #mem<hbm>> -> !tile.tile<128x14x14xbf16, sbuf>
    ```
    """

    name = "tile.load_transpose"

    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(TileType)
    row_dims = prop_def(DenseArrayBase)
    row_sizes = prop_def(DenseArrayBase)
    column_dims = prop_def(DenseArrayBase)
    column_sizes = prop_def(DenseArrayBase)

    traits = traits_def(MemoryReadEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)"

    def __init__(
        self,
        source: SSAValue,
        indices: Sequence[SSAValue],
        rows: Sequence[tuple[int, int]],
        columns: Sequence[tuple[int, int]],
        element_type: Attribute,
    ):
        """`rows` and `columns`: (tensor dim, size) pairs, outermost first."""
        props = {
            "row_dims": DenseArrayBase.from_list(i64, [d for d, _ in rows]),
            "row_sizes": DenseArrayBase.from_list(i64, [n for _, n in rows]),
            "column_dims": DenseArrayBase.from_list(i64, [d for d, _ in columns]),
            "column_sizes": DenseArrayBase.from_list(i64, [n for _, n in columns]),
        }
        partitions = 1
        for _, size in columns:
            partitions *= size
        result_type = TileType((partitions, *(n for _, n in rows)), element_type, Memory.SBUF)
        init_op(self, operands=[source, indices], result_types=[result_type], properties=props)

    def memref_type(self) -> MemRefType:
        assert isinstance(self.source.type, MemRefType)
        return self.source.type

    def tile_type(self) -> TileType:
        return _tile(self.result)

    def rows(self) -> tuple[tuple[int, int], ...]:
        """(tensor dim, size) of each free dimension of the result."""
        dims, sizes = self.row_dims.get_values(), self.row_sizes.get_values()
        return tuple((int(d), int(n)) for d, n in zip(dims, sizes, strict=True))

    def columns(self) -> tuple[tuple[int, int], ...]:
        """(tensor dim, size) of the partition's sub-dimensions, outermost first."""
        dims, sizes = self.column_dims.get_values(), self.column_sizes.get_values()
        return tuple((int(d), int(n)) for d, n in zip(dims, sizes, strict=True))

    def verify_(self) -> None:
        memref_type, tile_type = self.memref_type(), self.tile_type()
        shape = memref_type.get_shape()
        rank = len(shape)
        if len(self.indices) != rank:
            raise _error(self, f"expected {rank} indices for a rank-{rank} tensor, got {len(self.indices)}")
        if memory_of(memref_type) is not Memory.HBM or tile_type.memory is not Memory.SBUF:
            raise _error(self, "loads an HBM tensor into SBUF")
        if len(self.row_dims.get_values()) != len(self.row_sizes.get_values()) or len(
            self.column_dims.get_values()
        ) != len(self.column_sizes.get_values()):
            raise _error(self, "one size per row dim and per column dim")
        rows, columns = self.rows(), self.columns()
        dims = [d for d, _ in (*rows, *columns)]
        if not rows or not columns or len(set(dims)) != len(dims) or any(not 0 <= d < rank for d in dims):
            raise _error(self, f"row and column dims {dims} must be distinct dimensions of the rank-{rank} tensor")
        for dim, size in (*rows, *columns):
            if not 1 <= size <= shape[dim]:
                raise _error(self, f"size {size} along tensor dimension {dim} ({shape[dim]}) is out of range")
        partitions = 1
        for _, size in columns:
            partitions *= size
        if tile_type.get_shape() != (partitions, *(n for _, n in rows)):
            raise _error(self, f"result must be [{partitions}, {', '.join(str(n) for _, n in rows)}], got {tile_type}")
        _check_partitions(self, tile_type, "the tile")
        if tile_type.element_type != memref_type.element_type:
            raise _error(self, f"a DMA transpose does not convert: {memref_type.element_type} into {tile_type}")
        if dtypes.itemsize(element_type_name(tile_type.element_type)) != 2:
            raise _error(self, f"DMAs transpose 2-byte elements, not {tile_type.element_type}")
        target = target_of(self)
        if not target.dma_transpose_hbm_efficiency:
            raise _error(self, f"{target.name}'s DMAs do not transpose")


@irdl_op_definition
class StoreOp(_TileTransferOp):
    """Store an SBUF tile into an HBM tensor at `indices` (the inverse of `tile.load`, same `dims`).

    ```mlir
    tile.store %t, %y[%i, %c0] : !tile.tile<37x520xf32, sbuf>, memref<37x520xf32, #mem<hbm>>
    ```
    """

    name = "tile.store"

    value = operand_def(TileType)
    dest = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    traits = traits_def(MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$value `,` $dest `[` $indices `]` attr-dict `:` type($value) `,` type($dest)"

    def __init__(self, value: SSAValue, dest: SSAValue, indices: Sequence[SSAValue], dims: Sequence[int] | None = None):
        props = {"dims": DenseArrayBase.from_list(i64, list(dims))} if dims is not None else {}
        init_op(self, operands=[value, dest, indices], properties=props)

    def memref_type(self) -> MemRefType:
        assert isinstance(self.dest.type, MemRefType)
        return self.dest.type

    def tile_type(self) -> TileType:
        return _tile(self.value)

    def index_values(self) -> Sequence[SSAValue]:
        return self.indices

    def verify_(self) -> None:
        super().verify_()
        if self.tile_type().memory is not Memory.SBUF:
            raise _error(self, "tiles are stored from SBUF (copy PSUM tiles to SBUF first)")


# ----------------------------------------------------------------------------------------------------------------
# Compute
# ----------------------------------------------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """TensorE matmul: `result[M, N] = stationary[K, M]^T @ moving[K, N] (+ acc)`, in PSUM, fp32.

    K (the partition axis of both inputs) <= 128, M <= 128 and N <= 512 on trn1/trn2. With `acc` the product
    is added to it: inside an `scf.for` over K tiles, with `acc` carried by the loop, this is PSUM accumulation.

    `rows = array<i64: start, size>` contracts over partitions [start, start + size) of both inputs alone (K =
    size), which then may have more partitions: two heads of 64 features in one [128, N] tile each multiply over
    their own half. Such a product runs in TensorE's row tiling mode where the target has a row tile of that size
    (the rows of the PE array the partitions feed), beside a product in another row tile.

    ```mlir
    %p = tile.matmul %xt, %w acc %acc : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x512xf32, sbuf>,
                                         !tile.tile<37x512xf32, psum>) -> !tile.tile<37x512xf32, psum>
    %s = tile.matmul %qt, %kt {rows = array<i64: 64, 64>} : (!tile.tile<128x128xbf16, sbuf>,
                                         !tile.tile<128x512xbf16, sbuf>) -> !tile.tile<128x512xf32, psum>
    ```
    """

    name = "tile.matmul"

    stationary = operand_def(TileType)
    moving = operand_def(TileType)
    acc = opt_operand_def(TileType)
    result = result_def(TileType)
    rows = opt_prop_def(DenseArrayBase)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$stationary `,` $moving (`acc` $acc^)? attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        stationary: SSAValue,
        moving: SSAValue,
        result_type: TileType,
        acc: SSAValue | None = None,
        rows: tuple[int, int] | None = None,
    ):
        props = {"rows": DenseArrayBase.from_list(i64, list(rows))} if rows is not None else {}
        init_op(self, operands=[stationary, moving, acc], result_types=[result_type], properties=props)

    def row_range(self) -> tuple[int, int] | None:
        """(first partition, count) the product contracts over when `rows` is given, else None (all of them)."""
        if self.rows is None:
            return None
        start, size = (int(v) for v in self.rows.get_values())
        return start, size

    def verify_(self) -> None:
        target = target_of(self)
        stationary, moving, result = _tile(self.stationary), _tile(self.moving), _tile(self.result)
        k, m, n = stationary.partitions, stationary.free_size, moving.free_size
        if self.rows is not None:
            values = tuple(int(v) for v in self.rows.get_values())
            if len(values) != 2:
                raise _error(self, f"rows must be (start, size), got {list(values)}")
            start, size = values
            if size < 1 or start < 0 or start + size > min(k, moving.partitions):
                raise _error(
                    self,
                    f"rows [{start}, {start + size}) lie outside the inputs' partitions ({k} and {moving.partitions})",
                )
            if start and start not in hardware.allowed_partition_starts(size):
                allowed = ", ".join(map(str, hardware.allowed_partition_starts(size)))
                raise _error(self, f"rows of {size} partitions cannot start at partition {start} (allowed: {allowed})")
            k = size
        elif moving.partitions != k:
            raise _error(self, f"stationary and moving contract over different sizes ({k} vs {moving.partitions})")
        if k > target.matmul_max_k or m > target.matmul_max_stationary_free or n > target.matmul_max_moving_free:
            raise _error(
                self,
                f"matmul of K={k}, M={m}, N={n} exceeds {target.name}'s limits (K <= {target.matmul_max_k}, "
                f"M <= {target.matmul_max_stationary_free}, N <= {target.matmul_max_moving_free})",
            )
        if result.get_shape() != (m, n) or result.memory is not Memory.PSUM:
            raise _error(self, f"result must be !tile.tile<{m}x{n}xf32, psum>, got {result}")
        if self.acc is not None and self.acc.type != result:
            raise _error(self, f"accumulator type {self.acc.type} differs from the result type {result}")


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """Transpose a tile on TensorE (matmul against an identity): `[P, F]` -> `[F, P]` in PSUM.

    A tile with several free dimensions transposes as the [P, F] matrix of its flattened free axes (row-major),
    so a window of a band ([P, rows, columns]) becomes [rows * columns, P] in one pass.

    ```mlir
    %t = tile.transpose %x : !tile.tile<37x128xf32, sbuf> -> !tile.tile<128x37xf32, psum>
    ```
    """

    name = "tile.transpose"

    input = operand_def(TileType)
    result = result_def(TileType)

    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, value: SSAValue):
        source = _tile(value)
        p, f = source.partitions, source.free_size
        init_op(self, operands=[value], result_types=[TileType((f, p), source.element_type, Memory.PSUM)])

    def verify_(self) -> None:
        source, result = _tile(self.input), _tile(self.result)
        if len(source.get_shape()) < 2:
            raise _error(self, f"a transposed tile has a free dimension, got {source.get_shape()}")
        p, f = source.partitions, source.free_size
        if result.get_shape() != (f, p) or result.memory is not Memory.PSUM:
            raise _error(self, f"result must be [{f}, {p}] in psum, got {result}")
        if f > target_of(self).partitions or p > target_of(self).matmul_max_moving_free:
            raise _error(self, f"a [{p}, {f}] tile is too large to transpose in one pass")


@irdl_op_definition
class EmptyOp(IRDLOperation):
    """A tile whose elements are not yet defined: the starting value of a tile filled piece by piece (`tile.insert`).

    ```mlir
    %at = tile.empty : !tile.tile<128x32x128xbf16, sbuf>
    ```
    """

    name = "tile.empty"

    result = result_def(TileType)

    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, result_type: TileType):
        init_op(self, result_types=[result_type])

    def verify_(self) -> None:
        _check_partitions(self, _tile(self.result), "the tile")


def _check_window(
    op: Operation,
    whole: TileType,
    part: TileType,
    indices: Sequence[SSAValue],
    what: str,
    steps: Sequence[int] | None = None,
) -> None:
    """The slice rule shared by tile.extract and tile.insert (see ExtractOp)."""
    whole_free, part_free = whole.get_shape()[1:], part.get_shape()[1:]
    if len(indices) != len(whole_free):
        raise _error(op, f"expected {len(whole_free)} indices, one per free dimension of {whole}, got {len(indices)}")
    if len(part_free) > len(whole_free):
        raise _error(op, f"{what} {part} has more free dimensions than {whole}")
    if part.partitions > whole.partitions:
        raise _error(op, f"{what} {part} has more partitions than {whole}")
    steps = [1] * len(part_free) if steps is None else list(steps)
    if len(steps) != len(part_free) or any(step < 1 for step in steps):
        raise _error(op, f"steps {steps} must give one positive step per free dimension of {part}")
    trailing = whole_free[len(whole_free) - len(part_free) :]
    spans = [(p - 1) * step + 1 if p else 0 for p, step in zip(part_free, steps, strict=True)]
    if any(span > w for span, w in zip(spans, trailing, strict=True)):
        stepped = f" (steps {steps})" if any(step != 1 for step in steps) else ""
        raise _error(op, f"{what} {part}{stepped} does not fit in the trailing free dimensions of {whole}")


@irdl_op_definition
class ExtractOp(IRDLOperation):
    """A window of a tile: its first partitions, and from each free dimension the range starting at its index.

    There is one index per free dimension of `source`; the result's free dimensions are the source's trailing
    ones (each as long as the result says), and the leading free dimensions the result drops are fixed at their
    index. Indices may be loop values, so a tile kept on chip can be walked without copying: the window is read
    in place by the ops that use it.

    `steps` (one per free dimension of the result, 1 when absent) takes every step-th element of a kept
    dimension from its index on: element i of that dimension is source element index + i * step. An access
    pattern walks it like any other window, so a strided convolution's kernel tap reads its positions from an
    input band loaded whole.

    ```mlir
    %blk = tile.extract %at[%k, %c0] : !tile.tile<128x32x128xbf16, sbuf> -> !tile.tile<128x128xbf16, sbuf>
    %tap = tile.extract %band[%c1, %c2] {steps = array<i64: 2, 2>} : !tile.tile<64x9x33xbf16, sbuf>
                                                                      -> !tile.tile<64x4x16xbf16, sbuf>
    ```
    """

    name = "tile.extract"

    source = operand_def(TileType)
    indices = var_operand_def(IndexType)
    result = result_def(TileType)
    steps = opt_prop_def(DenseArrayBase)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)"

    def __init__(
        self,
        source: SSAValue,
        indices: Sequence[SSAValue],
        result_type: TileType,
        steps: Sequence[int] | None = None,
    ):
        props = {}
        if steps is not None and any(step != 1 for step in steps):
            props["steps"] = DenseArrayBase.from_list(i64, list(steps))
        init_op(self, operands=[source, indices], result_types=[result_type], properties=props)

    def step_values(self) -> tuple[int, ...]:
        """The step of each free dimension of the result (1 unless `steps` says otherwise)."""
        if self.steps is None:
            return (1,) * (len(_tile(self.result).get_shape()) - 1)
        return tuple(int(step) for step in self.steps.get_values())

    def verify_(self) -> None:
        source, result = _tile(self.source), _tile(self.result)
        if source.element_type != result.element_type or source.memory is not result.memory:
            raise _error(self, f"a window keeps the element type and memory of {source}, got {result}")
        _check_window(self, source, result, self.indices, "the window", self.step_values())


@irdl_op_definition
class InsertOp(IRDLOperation):
    """`dest` with the window at `indices` (as tile.extract defines it, `steps` included) replaced by `value`, cast
    to dest's type.

    The value may come from PSUM (an evacuation into a slice of an SBUF tile). When `dest` has no other use
    the update happens in place.

    `window` (the window's free dimensions, when they are not the value's) writes the value's elements of each
    partition row-major into a window of that shape, as many of them: a matmul's [P, rows * columns] product
    lands in rows of a larger tile, every `steps`-th element, in one copy where one per row would each pay the
    engine's fixed cost.

    ```mlir
    %at2 = tile.insert %t, %at[%k, %c0] : !tile.tile<128x128xbf16, psum>, !tile.tile<128x32x128xbf16, sbuf>
    %g2 = tile.insert %p, %g[%c1, %c0] {window = array<i64: 14, 14>, steps = array<i64: 2, 2>}
        : !tile.tile<128x196xf32, psum>, !tile.tile<128x28x28xbf16, sbuf>
    ```
    """

    name = "tile.insert"

    T: ClassVar = VarConstraint("T", base(TileType))
    value = operand_def(TileType)
    dest = operand_def(T)
    indices = var_operand_def(IndexType)
    result = result_def(T)
    steps = opt_prop_def(DenseArrayBase)
    window = opt_prop_def(DenseArrayBase)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$value `,` $dest `[` $indices `]` attr-dict `:` type($value) `,` type($dest)"

    def __init__(
        self,
        value: SSAValue,
        dest: SSAValue,
        indices: Sequence[SSAValue],
        steps: Sequence[int] | None = None,
        window: Sequence[int] | None = None,
    ):
        props = {}
        if steps is not None and any(step != 1 for step in steps):
            props["steps"] = DenseArrayBase.from_list(i64, list(steps))
        if window is not None and tuple(window) != _tile(value).get_shape()[1:]:
            props["window"] = DenseArrayBase.from_list(i64, list(window))
        init_op(self, operands=[value, dest, indices], result_types=[dest.type], properties=props)

    def window_type(self) -> TileType:
        """The value's type in the shape of the window it fills (the value's own unless `window` says otherwise)."""
        value = _tile(self.value)
        if self.window is None:
            return value
        shape = (value.partitions, *(int(v) for v in self.window.get_values()))
        return TileType(shape, value.element_type, value.memory)

    def step_values(self) -> tuple[int, ...]:
        """The step of each free dimension of the window inside `dest` (1 unless `steps` says otherwise)."""
        if self.steps is None:
            return (1,) * (len(self.window_type().get_shape()) - 1)
        return tuple(int(step) for step in self.steps.get_values())

    def verify_(self) -> None:
        value, dest, result = _tile(self.value), _tile(self.dest), _tile(self.result)
        if result != dest:
            raise _error(self, f"the result type {result} differs from the destination's {dest}")
        if dest.memory is not Memory.SBUF:
            raise _error(self, f"tiles are inserted into SBUF tiles, got {dest}")
        window = self.window_type()
        if window.free_size != value.free_size:
            shape = list(window.get_shape()[1:])
            raise _error(self, f"a window of {shape} does not hold the {value.free_size} elements of {value}")
        _check_window(self, dest, window, self.indices, "the value", self.step_values())


class _ElementwiseOp(IRDLOperation):
    """Elementwise ops: every tile operand and the result share one shape (element types may differ)."""

    TILE_OPERANDS: ClassVar[tuple[str, ...]] = ()

    def verify_(self) -> None:
        result = _tile(self.results[0])
        _check_partitions(self, result, "the result")
        for name in self.TILE_OPERANDS:
            value = getattr(self, name)
            if value is None:
                continue
            if _tile(value).get_shape() != result.get_shape():
                raise _error(
                    self, f"operand '{name}' has shape {_tile(value).get_shape()}, result has {result.get_shape()}"
                )
        self.verify_elementwise()

    def verify_elementwise(self) -> None:
        pass


def _check_number(
    op: Operation, attr: FloatAttr | IntegerAttr | None, element_type: Attribute, name: str, what: str
) -> None:
    """An immediate is a float, or an i64 where integer elements meet it (`ir.types.number_attr`)."""
    if isinstance(attr, IntegerAttr) and not is_integer_type(element_type):
        raise _error(op, f"an integer `{name}` needs integer elements, but {what} holds {element_type}")


def _check_column(op: Operation, column: SSAValue | None, partitions: int, what: str) -> None:
    if column is None:
        return
    shape = _tile(column).get_shape()
    if shape[0] != partitions or any(extent != 1 for extent in shape[1:]):
        raise _error(op, f"{what} must be a [{partitions}, 1] per-partition column, got {shape}")


@irdl_op_definition
class UnaryOp(_ElementwiseOp):
    """`result = fn(input * scale + bias)` with a ScalarE activation function (`runtime.isa` table).

    `bias` is an optional per-partition [P, 1] column, else the immediate `bias_value`.

    ```mlir
    %r = tile.unary %x {fn = "relu"} : (!tile.tile<37x512xf32, psum>) -> !tile.tile<37x512xf32, sbuf>
    ```
    """

    name = "tile.unary"
    TILE_OPERANDS: ClassVar[tuple[str, ...]] = ("input",)

    input = operand_def(TileType)
    bias = opt_operand_def(TileType)
    result = result_def(TileType)
    fn = prop_def(StringAttr)
    scale = opt_prop_def(FloatAttr)
    bias_value = opt_prop_def(FloatAttr)
    alpha = opt_prop_def(FloatAttr)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input (`bias` $bias^)? attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        value: SSAValue,
        fn: str,
        result_type: TileType,
        scale: float = 1.0,
        bias_value: float = 0.0,
        bias: SSAValue | None = None,
    ):
        props: dict[str, Attribute] = {"fn": StringAttr(fn)}
        if scale != 1.0:
            props["scale"] = FloatAttr(scale, f64)
        if bias_value != 0.0:
            props["bias_value"] = FloatAttr(bias_value, f64)
        init_op(self, operands=[value, bias], result_types=[result_type], properties=props)

    def verify_elementwise(self) -> None:
        if self.fn.data not in isa.ACTIVATION_FUNCTIONS:
            raise _error(self, f"unknown activation function '{self.fn.data}'")
        _check_column(self, self.bias, _tile(self.result).partitions, "bias")


@irdl_op_definition
class BinaryOp(_ElementwiseOp):
    """`result = lhs <op> rhs` elementwise on equal shapes (an ALU operator of `runtime.isa`).

    ```mlir
    %s = tile.binary %a, %b {op = "add"} : (!tile.tile<37x512xf32, sbuf>, !tile.tile<37x512xf32, sbuf>)
                                            -> !tile.tile<37x512xf32, sbuf>
    ```
    """

    name = "tile.binary"
    TILE_OPERANDS: ClassVar[tuple[str, ...]] = ("lhs", "rhs")

    lhs = operand_def(TileType)
    rhs = operand_def(TileType)
    result = result_def(TileType)
    op = prop_def(StringAttr)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, op: str, result_type: TileType):
        init_op(self, operands=[lhs, rhs], result_types=[result_type], properties={"op": StringAttr(op)})

    def verify_elementwise(self) -> None:
        if self.op.data not in isa.ALU_OPS:
            raise _error(self, f"unknown ALU operator '{self.op.data}'")
        if _tile(self.lhs).memory is Memory.PSUM and _tile(self.rhs).memory is Memory.PSUM:
            raise _error(self, "at most one operand may be in PSUM")


@irdl_op_definition
class BinaryScalarOp(_ElementwiseOp):
    """`result = input <op> scalar` (or `scalar <op> input` with `reverse`), scalar an immediate or a column.

    With a `column` operand ([P, 1]) the scalar varies per partition and broadcasts along the free axes. An
    immediate is an `f64`, or an `i64` (exact to int64's extremes) when the input's elements are integers.

    ```mlir
    %y = tile.binary_scalar %x {op = "multiply", scalar = 0.5 : f64} : (...) -> !tile.tile<37x512xf32, sbuf>
    %n = tile.binary_scalar %i {op = "add", scalar = 4611686018427387905 : i64} : (...) -> !tile.tile<8x1xi64, sbuf>
    %z = tile.binary_scalar %x column %b {op = "add"} : (...) -> !tile.tile<130x37xf32, sbuf>
    ```
    """

    name = "tile.binary_scalar"
    TILE_OPERANDS: ClassVar[tuple[str, ...]] = ("input",)

    input = operand_def(TileType)
    column = opt_operand_def(TileType)
    result = result_def(TileType)
    op = prop_def(StringAttr)
    scalar = opt_prop_def(NUMBER)
    reverse = opt_prop_def(IntegerAttr)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input (`column` $column^)? attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        value: SSAValue,
        op: str,
        result_type: TileType,
        scalar: float | None = None,
        column: SSAValue | None = None,
        reverse: bool = False,
    ):
        props: dict[str, Attribute] = {"op": StringAttr(op)}
        if scalar is not None:
            props["scalar"] = number_attr(scalar, is_integer_type(_tile(value).element_type))
        if reverse:
            props["reverse"] = IntegerAttr(1, 1)
        init_op(self, operands=[value, column], result_types=[result_type], properties=props)

    @property
    def is_reversed(self) -> bool:
        return self.reverse is not None and bool(self.reverse.value.data)

    def verify_elementwise(self) -> None:
        if self.op.data not in isa.ALU_OPS:
            raise _error(self, f"unknown ALU operator '{self.op.data}'")
        if (self.scalar is None) == (self.column is None):
            raise _error(self, "give exactly one of an immediate `scalar` or a `column` operand")
        _check_number(self, self.scalar, _tile(self.input).element_type, "scalar", "the input")
        _check_column(self, self.column, _tile(self.result).partitions, "column")


@irdl_op_definition
class SelectOp(_ElementwiseOp):
    """`result = predicate != 0 ? on_true : on_false` elementwise.

    ```mlir
    %r = tile.select %p, %a, %b : (!tile.tile<37x130xi1, sbuf>, ...) -> !tile.tile<37x130xf32, sbuf>
    ```
    """

    name = "tile.select"
    TILE_OPERANDS: ClassVar[tuple[str, ...]] = ("predicate", "on_true", "on_false")

    predicate = operand_def(TileType)
    on_true = operand_def(TileType)
    on_false = operand_def(TileType)
    result = result_def(TileType)

    traits = traits_def(Pure())
    assembly_format = "$predicate `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)"

    def __init__(self, predicate: SSAValue, on_true: SSAValue, on_false: SSAValue, result_type: TileType):
        init_op(self, operands=[predicate, on_true, on_false], result_types=[result_type])


@irdl_op_definition
class CopyOp(_ElementwiseOp):
    """Copy a tile, changing its memory (PSUM -> SBUF evacuation) and/or element type.

    ```mlir
    %s = tile.copy %p : (!tile.tile<37x512xf32, psum>) -> !tile.tile<37x512xf32, sbuf>
    ```
    """

    name = "tile.copy"
    TILE_OPERANDS: ClassVar[tuple[str, ...]] = ("input",)

    input = operand_def(TileType)
    result = result_def(TileType)

    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` functional-type(operands, results)"

    def __init__(self, value: SSAValue, result_type: TileType):
        init_op(self, operands=[value], result_types=[result_type])


@irdl_op_definition
class FillOp(IRDLOperation):
    """A tile with every element equal to `value`: an `f64`, or an `i64` (exact to int64's extremes) when the
    elements are integers.

    ```mlir
    %ones = tile.fill {value = 1.0 : f64} : !tile.tile<128x1xf32, sbuf>
    %top = tile.fill {value = 9223372036854775807 : i64} : !tile.tile<128x1xi64, sbuf>
    ```
    """

    name = "tile.fill"

    result = result_def(TileType)
    value = prop_def(NUMBER)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, value: float, result_type: TileType):
        attr = number_attr(value, is_integer_type(result_type.element_type))
        init_op(self, result_types=[result_type], properties={"value": attr})

    def verify_(self) -> None:
        _check_partitions(self, _tile(self.result), "the tile")
        _check_number(self, self.value, _tile(self.result).element_type, "value", "the tile")


@irdl_op_definition
class IotaOp(IRDLOperation):
    """A tile of affine integers: `result[p, i...] = base + p * channel_multiplier + sum(i_d * step_d)`.

    `steps` has one step per free axis of the result. Values are computed exactly in int32 (GpSimdE iota) and
    cast to the result's element type (exact in fp32 up to 2^24): index maps for argmax-style selections. The
    optional index operand `offset` adds a value known only at run time (a loop index) to `base`.

    ```mlir
    %i = tile.iota {base = -1 : i64, channel_multiplier = 7 : i64, steps = array<i64: 2>}
         : !tile.tile<5x3xf32, sbuf>
    %j = tile.iota %f0 {steps = array<i64: 1>} : !tile.tile<128x512xi32, sbuf>
    ```
    """

    name = "tile.iota"

    offset = opt_operand_def(IndexType)
    result = result_def(TileType)
    base = opt_prop_def(IntegerAttr)
    channel_multiplier = opt_prop_def(IntegerAttr)
    steps = prop_def(DenseArrayBase)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "($offset^)? attr-dict `:` type($result)"

    def __init__(
        self,
        result_type: TileType,
        steps: Sequence[int],
        base: int = 0,
        channel_multiplier: int = 0,
        offset: SSAValue | None = None,
    ):
        props: dict[str, Attribute] = {"steps": DenseArrayBase.from_list(i64, list(steps))}
        if base:
            props["base"] = IntegerAttr(base, i64)
        if channel_multiplier:
            props["channel_multiplier"] = IntegerAttr(channel_multiplier, i64)
        init_op(self, operands=[offset], result_types=[result_type], properties=props)

    def step_values(self) -> tuple[int, ...]:
        return tuple(int(v) for v in self.steps.get_values())

    def base_value(self) -> int:
        return self.base.value.data if self.base is not None else 0

    def multiplier_value(self) -> int:
        return self.channel_multiplier.value.data if self.channel_multiplier is not None else 0

    def verify_(self) -> None:
        result = _tile(self.result)
        _check_partitions(self, result, "the tile")
        if len(self.step_values()) != len(result.get_shape()) - 1:
            raise _error(
                self, f"steps {list(self.step_values())} must give one step per free axis of {result.get_shape()}"
            )
        if result.memory is not Memory.SBUF:
            raise _error(self, "iota writes SBUF (GpSimdE)")


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Reduce the `axes` innermost free axes of a tile with `op` (add, max, min, multiply, abs_max).

    The result keeps the partition axis; reducing every free axis gives a [P, 1] column. A float reduction
    computes in fp32 (VectorE). An integer reduction (input and result of one integer element type, in SBUF) is
    exact, wrapping to the element type as PyTorch's integers do: GpSimdE's integer lanes fold it (see
    `convert-tile-to-neuron`).

    ```mlir
    %s = tile.reduce %x {op = "add"} : (!tile.tile<130x37xf32, sbuf>) -> !tile.tile<130x1xf32, sbuf>
    ```
    """

    name = "tile.reduce"

    input = operand_def(TileType)
    result = result_def(TileType)
    op = prop_def(StringAttr)
    axes = opt_prop_def(IntegerAttr)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` functional-type(operands, results)"

    def __init__(self, value: SSAValue, op: str, result_type: TileType, axes: int = 1):
        props: dict[str, Attribute] = {"op": StringAttr(op)}
        if axes != 1:
            props["axes"] = IntegerAttr(axes, i64)
        init_op(self, operands=[value], result_types=[result_type], properties=props)

    @property
    def reduced_axes(self) -> int:
        return self.axes.value.data if self.axes is not None else 1

    def verify_(self) -> None:
        if self.op.data not in isa.REDUCE_OPS:
            raise _error(self, f"unknown reduction '{self.op.data}'")
        source, result = _tile(self.input).get_shape(), _tile(self.result).get_shape()
        axes = self.reduced_axes
        if not 1 <= axes <= len(source) - 1:
            raise _error(self, f"cannot reduce {axes} free axes of a tile of shape {source}")
        kept = source[: len(source) - axes]
        expected = kept if len(kept) > 1 else (*kept, 1)
        if result != expected:
            raise _error(self, f"result shape {result} should be {expected}")
        _check_exact_integer(self, self.input, self.result)


def _is_integer_tile(value: SSAValue) -> bool:
    return isinstance(_tile(value).element_type, IntegerType)


def _check_exact_integer(op: Operation, source: SSAValue, result: SSAValue) -> None:
    """An integer fold or scan runs on GpSimdE's integer lanes: one element type (it wraps to that type, so a
    wider accumulator is a `tile.copy` first) and SBUF operands (GpSimdE cannot read PSUM). A fold with a
    float side is an fp32 fold whose input or result is converted on the way."""
    if not (_is_integer_tile(source) and _is_integer_tile(result)):
        return
    source_type, result_type = _tile(source), _tile(result)
    if source_type.element_type != result_type.element_type:
        raise _error(
            op,
            f"an integer {op.name} keeps its element type ({source_type.element_type} -> "
            f"{result_type.element_type}); widen the input with tile.copy first",
        )
    if source_type.memory is not Memory.SBUF or result_type.memory is not Memory.SBUF:
        raise _error(op, f"an integer {op.name} works in SBUF (GpSimdE cannot reach PSUM)")


@irdl_op_definition
class ScanOp(IRDLOperation):
    """Inclusive running `op` (add, max, min, multiply) along the innermost free axis of an integer tile:
    `result[p, ..., i] = x[p, ..., 0] op ... op x[p, ..., i]`, exact and wrapping to the element type.

    Floats scan on TensorE instead (a triangular matmul, `convert_torch_to_tile/scan.py`); this op is the exact
    integer path, run on GpSimdE's integer lanes.

    ```mlir
    %s = tile.scan %x {op = "add"} : (!tile.tile<128x600xi64, sbuf>) -> !tile.tile<128x600xi64, sbuf>
    ```
    """

    name = "tile.scan"

    input = operand_def(TileType)
    result = result_def(TileType)
    op = prop_def(StringAttr)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` functional-type(operands, results)"

    def __init__(self, value: SSAValue, op: str, result_type: TileType):
        init_op(self, operands=[value], result_types=[result_type], properties={"op": StringAttr(op)})

    def verify_(self) -> None:
        if self.op.data not in SCAN_OPS:
            raise _error(self, f"unknown scan '{self.op.data}' (expected one of {sorted(SCAN_OPS)})")
        source, result = _tile(self.input), _tile(self.result)
        if source.get_shape() != result.get_shape():
            raise _error(self, f"result shape {result.get_shape()} should be {source.get_shape()}")
        if not _is_integer_tile(self.input) or not _is_integer_tile(self.result):
            raise _error(self, "tile.scan scans integer tiles (floats scan on TensorE)")
        _check_exact_integer(self, self.input, self.result)


# the operators a scan may run: associative ALU operators
SCAN_OPS: frozenset[str] = frozenset({"add", "max", "min", "multiply"})


@irdl_op_definition
class KernelOp(_ElementwiseOp):
    """`result = kernel(input, other)` with a GpSimdE kernel function (`runtime.isa.GPSIMD_KERNELS`).

    The division family (`divide`, `divide_trunc`, `divide_floor`, `fmod`, `remainder`: exact on integer tiles)
    and the counter-based generators (`uniform`, `normal`: `input` holds int32 counters, `other` the key).
    `other` has the result's shape or is a [P, 1] column; both inputs are in SBUF (GpSimdE cannot read PSUM).

    ```mlir
    %q = tile.kernel %a, %b {kernel = "divide_floor"} : (!tile.tile<37x64xi32, sbuf>, !tile.tile<37x64xi32, sbuf>)
                                                        -> !tile.tile<37x64xi32, sbuf>
    ```
    """

    name = "tile.kernel"
    TILE_OPERANDS: ClassVar[tuple[str, ...]] = ("input",)

    input = operand_def(TileType)
    other = opt_operand_def(TileType)
    result = result_def(TileType)
    kernel = prop_def(StringAttr)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input (`,` $other^)? attr-dict `:` functional-type(operands, results)"

    def __init__(self, value: SSAValue, kernel: str, result_type: TileType, other: SSAValue | None = None):
        init_op(self, operands=[value, other], result_types=[result_type], properties={"kernel": StringAttr(kernel)})

    def verify_elementwise(self) -> None:
        if self.kernel.data not in isa.GPSIMD_KERNELS:
            raise _error(self, f"unknown GpSimd kernel '{self.kernel.data}'")
        arity = isa.GPSIMD_KERNELS[self.kernel.data]
        if arity != 1 + (self.other is not None):
            raise _error(self, f"kernel '{self.kernel.data}' takes {arity} input(s)")
        result = _tile(self.result)
        if self.other is not None and _tile(self.other).get_shape() != result.get_shape():
            _check_column(self, self.other, result.partitions, "other")
        for value in (self.input, self.other):
            if value is not None and _tile(value).memory is not Memory.SBUF:
                raise _error(self, "GpSimd kernels read SBUF tiles")


class _IndirectOp(IRDLOperation):
    """Shared rules of tile.gather / tile.scatter: one index per tensor dim, offsets [P, R] of i32, row shape."""

    dim = prop_def(IntegerAttr)
    dims = opt_prop_def(DenseArrayBase)

    def memref_type(self) -> MemRefType:
        raise NotImplementedError

    def rows_type(self) -> TileType:
        raise NotImplementedError

    def index_values(self) -> Sequence[SSAValue]:
        raise NotImplementedError

    def offsets_type(self) -> TileType:
        raise NotImplementedError

    @property
    def indexed_dim(self) -> int:
        return self.dim.value.data

    def row_dims(self) -> tuple[int, ...]:
        """The tensor dimensions one row walks (empty: one element per offset)."""
        return tuple(int(d) for d in self.dims.get_values()) if self.dims is not None else ()

    def verify_(self) -> None:
        memref_type, rows, offsets = self.memref_type(), self.rows_type(), self.offsets_type()
        shape = memref_type.get_shape()
        rank = len(shape)
        if len(self.index_values()) != rank:
            raise _error(self, f"expected {rank} indices for a rank-{rank} tensor, got {len(self.index_values())}")
        if not 0 <= self.indexed_dim < rank:
            raise _error(self, f"dim {self.indexed_dim} is not a dimension of the rank-{rank} tensor")
        if memory_of(memref_type) is not Memory.HBM:
            raise _error(self, "the indexed tensor is in HBM")
        if offsets.memory is not Memory.SBUF or offsets.element_type != i32 or len(offsets.get_shape()) != 2:
            raise _error(self, f"offsets must be a [P, R] i32 SBUF tile, got {offsets}")
        if rows.memory is not Memory.SBUF or rows.partitions != offsets.partitions:
            raise _error(self, f"the rows tile must be in SBUF with the {offsets.partitions} partitions of offsets")
        _check_partitions(self, rows, "the rows tile")
        dims, per_partition = self.row_dims(), offsets.get_shape()[1]
        if len(set(dims)) != len(dims) or any(not 0 <= d < rank or d == self.indexed_dim for d in dims):
            raise _error(self, f"dims {list(dims)} must be distinct dimensions other than dim {self.indexed_dim}")
        if per_partition == 1:
            extents = rows.get_shape()[1:]
            if (len(extents) != len(dims)) if dims else (extents != (1,)):
                raise _error(self, f"rows of shape {extents} do not walk dims {list(dims)} (one extent each)")
            for d, extent in zip(dims, extents if dims else (), strict=True):
                if extent > shape[d]:
                    raise _error(self, f"a row of {extent} along dimension {d} exceeds its size {shape[d]}")
        elif dims or rows.get_shape() != offsets.get_shape():
            raise _error(
                self,
                f"with {per_partition} offsets per partition each row is one element: rows must be "
                f"{offsets.get_shape()} with no dims",
            )


@irdl_op_definition
class GatherOp(_IndirectOp):
    """Rows of an HBM tensor chosen by offsets (an indirect DMA): one row per offset.

    For partition p and offset r, the row is the tensor at `indices` with dimension `dim` replaced by
    `indices[dim] + offsets[p, r]`, walking `dims` from their indices. With one offset per partition the result is
    [P, row extents...]; with R offsets per partition each row is one element (no `dims`) and the result is [P, R].
    Offsets outside [0, size of `dim` - indices[dim]) are an error when the program runs.

    ```mlir
    %rows = tile.gather %w[%c0, %c0], %ids {dim = 0 : i64, dims = array<i64: 1>}
            : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf>
    ```
    """

    name = "tile.gather"

    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    offsets = operand_def(TileType)
    result = result_def(TileType)

    traits = traits_def(MemoryReadEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$source `[` $indices `]` `,` $offsets attr-dict `:` type($source) `,` type($offsets) `->` type($result)"
    )

    def __init__(
        self,
        source: SSAValue,
        indices: Sequence[SSAValue],
        offsets: SSAValue,
        dim: int,
        result_type: TileType,
        dims: Sequence[int] = (),
    ):
        props: dict[str, Attribute] = {"dim": IntegerAttr(dim, i64)}
        if dims:
            props["dims"] = DenseArrayBase.from_list(i64, list(dims))
        init_op(self, operands=[source, indices, offsets], result_types=[result_type], properties=props)

    def memref_type(self) -> MemRefType:
        assert isinstance(self.source.type, MemRefType)
        return self.source.type

    def rows_type(self) -> TileType:
        return _tile(self.result)

    def index_values(self) -> Sequence[SSAValue]:
        return self.indices

    def offsets_type(self) -> TileType:
        return _tile(self.offsets)


@irdl_op_definition
class ScatterOp(_IndirectOp):
    """Write (or with `accumulate`, add) the rows of a tile into an HBM tensor at offsets: tile.gather's inverse.

    Rows are written in row-major (p, r) order: with duplicate offsets the last row wins, or with `accumulate`
    every row is added (fp32 read-modify-write, in that order).

    ```mlir
    tile.scatter %g, %dw[%c0, %c0], %ids {dim = 0 : i64, dims = array<i64: 1>, accumulate}
        : !tile.tile<128x64xf32, sbuf>, memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf>
    ```
    """

    name = "tile.scatter"

    value = operand_def(TileType)
    dest = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    offsets = operand_def(TileType)
    accumulate = opt_prop_def(UnitAttr)

    traits = traits_def(MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$value `,` $dest `[` $indices `]` `,` $offsets attr-dict `:` type($value) `,` type($dest) `,` type($offsets)"
    )

    def __init__(
        self,
        value: SSAValue,
        dest: SSAValue,
        indices: Sequence[SSAValue],
        offsets: SSAValue,
        dim: int,
        dims: Sequence[int] = (),
        accumulate: bool = False,
    ):
        props: dict[str, Attribute] = {"dim": IntegerAttr(dim, i64)}
        if dims:
            props["dims"] = DenseArrayBase.from_list(i64, list(dims))
        if accumulate:
            props["accumulate"] = UnitAttr()
        init_op(self, operands=[value, dest, indices, offsets], properties=props)

    def memref_type(self) -> MemRefType:
        assert isinstance(self.dest.type, MemRefType)
        return self.dest.type

    def rows_type(self) -> TileType:
        return _tile(self.value)

    def index_values(self) -> Sequence[SSAValue]:
        return self.indices

    def offsets_type(self) -> TileType:
        return _tile(self.offsets)


# ----------------------------------------------------------------------------------------------------------------
# Collectives
# ----------------------------------------------------------------------------------------------------------------


def replica_groups_attr(groups: Sequence[Sequence[int]]) -> ArrayAttr:
    """`[array<i64: 0, 1>, ...]`: how both levels spell replica groups."""
    return ArrayAttr([DenseArrayBase.from_list(i64, list(group)) for group in groups])


def replica_groups_of(attr: Attribute) -> tuple[tuple[int, ...], ...]:
    assert isinstance(attr, ArrayAttr)
    return tuple(tuple(int(rank) for rank in group.get_values()) for group in attr.data)


@irdl_op_definition
class CollectiveOp(IRDLOperation):
    """A collective between NeuronCores on whole HBM tensors: `kind` is all_reduce, all_gather, reduce_scatter,
    all_to_all or broadcast (their semantics: `runtime.isa`'s records of the same names), `reduce` the reduction
    of all_reduce and reduce_scatter, `root` a broadcast's source (its position in the replica group),
    `replica_groups` the groups of ranks that exchange, `input_splits`/`output_splits` an uneven all_to_all's element
    counts sent to and received from each rank of the group. `dest` is written whole.

    ```mlir
    tile.collective %x into %y {kind = "all_reduce", reduce = "sum", replica_groups = [array<i64: 0, 1>]}
        : memref<8x4xf32, #mem<hbm>>, memref<8x4xf32, #mem<hbm>>
    ```
    """

    name = "tile.collective"

    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    kind = prop_def(StringAttr)
    reduce = opt_prop_def(StringAttr)
    root = opt_prop_def(IntegerAttr)
    input_splits = opt_prop_def(DenseArrayBase)
    output_splits = opt_prop_def(DenseArrayBase)
    replica_groups = prop_def(ArrayAttr)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `into` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(
        self,
        kind: str,
        source: SSAValue,
        dest: SSAValue,
        groups: Sequence[Sequence[int]],
        reduce: str | None = None,
        root: int | None = None,
        splits: tuple[Sequence[int], Sequence[int]] | None = None,
    ):
        props: dict[str, Attribute] = {"kind": StringAttr(kind), "replica_groups": replica_groups_attr(groups)}
        if reduce is not None:
            props["reduce"] = StringAttr(reduce)
        if root is not None:
            props["root"] = IntegerAttr(root, 64)
        if splits is not None:
            props["input_splits"] = DenseArrayBase.from_list(i64, list(splits[0]))
            props["output_splits"] = DenseArrayBase.from_list(i64, list(splits[1]))
        init_op(self, operands=[source, dest], properties=props)

    def verify_(self) -> None:
        kind = self.kind.data
        spec = isa.OPCODES.get(kind)
        if spec is None or kind not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
            known = "all_gather, all_reduce, all_to_all, broadcast, reduce_scatter"
            raise _error(self, f"unknown collective '{kind}' (known: {known})")
        for role, value in (("source", self.source), ("dest", self.dest)):
            memref_type = value.type
            assert isinstance(memref_type, MemRefType)
            if memory_of(memref_type) is not Memory.HBM:
                raise _error(self, f"the {role} of a collective is an HBM tensor")
        if self.reduce is not None and "reduce" not in spec.attr_specs:
            raise _error(self, f"{kind} takes no reduction")
        if (self.root is not None) != (kind == "broadcast"):
            raise _error(self, "a broadcast names its root" if kind == "broadcast" else f"{kind} takes no root")
        if not all(isinstance(group, DenseArrayBase) for group in self.replica_groups.data):
            raise _error(self, "replica_groups must be a list of rank arrays, e.g. [array<i64: 0, 1>]")
        source, dest = self.source.type, self.dest.type
        assert isinstance(source, MemRefType)
        assert isinstance(dest, MemRefType)
        attrs: dict[str, object] = {"replica_groups": replica_groups_of(self.replica_groups)}
        if self.reduce is not None:
            attrs["reduce"] = self.reduce.data
        if self.root is not None:
            attrs["root"] = self.root.value.data
        if (self.input_splits is not None or self.output_splits is not None) and kind != "all_to_all":
            raise _error(self, f"{kind} takes no split counts")
        for name in ("input_splits", "output_splits"):
            counts = getattr(self, name)
            if counts is not None:
                attrs[name] = tuple(int(c) for c in counts.get_values())
        operands = {
            "src": _collective_operand("src", source),
            "dst": _collective_operand("dst", dest),
        }
        try:
            isa.check_attribute_values(spec, spec.defaults | attrs, target_of(self))
            spec.check(operands, spec.defaults | attrs, target_of(self))
        except isa.RuleError as error:
            where = f"attribute '{error.attribute}': " if error.attribute else ""
            raise _error(self, f"{kind}: {where}{error.message}") from None


def _collective_operand(role: str, memref_type: MemRefType) -> isa.Operand:
    shape = tuple(memref_type.get_shape())
    strides = row_major_strides(shape) if shape else ()
    pattern = tuple(zip(strides, shape, strict=True)) if shape else ((1, 1),)
    return isa.Operand.of(role, Memory.HBM, element_type_name(memref_type.element_type), 0, 0, pattern, 0, None)


# ----------------------------------------------------------------------------------------------------------------
# NKI kernels
# ----------------------------------------------------------------------------------------------------------------


@irdl_op_definition
class NkiKernelOp(IRDLOperation):
    """A call of an NKI kernel registered as a torch op, on whole HBM tensors: it reads `inputs` (row-major, as
    the kernel's HBM arguments are) and writes each of `outputs` whole. `kernel`, `scalars` and `fingerprint`
    are those of `torch.nki_kernel`; convert-tile-to-neuron inlines the kernel's traced instructions here.

    ```mlir
    tile.nki_kernel (%x, %w) into (%y) {kernel = "mylib::rms_norm", scalars = {eps = 1.0e-06 : f64}, ...}
        : memref<8x32xf32, #mem<hbm>>, memref<32xf32, #mem<hbm>> into memref<8x32xf32, #mem<hbm>>
    ```
    """

    name = "tile.nki_kernel"

    inputs = var_operand_def(MemRefType)
    outputs = var_operand_def(MemRefType)
    kernel = prop_def(StringAttr)
    scalars = prop_def(DictionaryAttr)
    fingerprint = prop_def(StringAttr)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = "`(` $inputs `)` `into` `(` $outputs `)` attr-dict `:` type($inputs) `into` type($outputs)"

    def __init__(
        self,
        kernel: StringAttr,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        scalars: DictionaryAttr,
        fingerprint: StringAttr,
    ):
        init_op(
            self,
            operands=[list(inputs), list(outputs)],
            properties={"kernel": kernel, "scalars": scalars, "fingerprint": fingerprint},
        )

    def verify_(self) -> None:
        for role, values in (("input", self.inputs), ("output", self.outputs)):
            for value in values:
                memref_type = value.type
                assert isinstance(memref_type, MemRefType)
                if memory_of(memref_type) is not Memory.HBM:
                    raise _error(self, f"an {role} of a kernel call is an HBM tensor")
                if memref_strides(memref_type) != (row_major_strides(memref_type.get_shape()), 0):
                    raise _error(self, f"an {role} of a kernel call is a row-major tensor, got {memref_type}")


ELEMENTWISE_OPS: tuple[type[IRDLOperation], ...] = (UnaryOp, BinaryOp, BinaryScalarOp, SelectOp, CopyOp, FillOp)
"""Per-element compute with value semantics that depends on no element's position (unlike IotaOp) and holds no
region (unlike KernelOp): what a fusion may move, clone or merge between loop nests freely."""


TILE_OPS: tuple[type[IRDLOperation], ...] = (
    ViewOp,
    LoadOp,
    LoadTransposeOp,
    StoreOp,
    MatmulOp,
    TransposeOp,
    EmptyOp,
    ExtractOp,
    InsertOp,
    UnaryOp,
    BinaryOp,
    BinaryScalarOp,
    SelectOp,
    CopyOp,
    FillOp,
    ReduceOp,
    ScanOp,
    IotaOp,
    GatherOp,
    ScatterOp,
    KernelOp,
    CollectiveOp,
    NkiKernelOp,
)


def _verify_key(op: Operation) -> Hashable:
    """All a tile op's verifier reads: its values (`verification.value_key`) and the module's target."""
    return (*value_key(op), id(target_of(op)))


# A tile-level module repeats each loop body's ops with equal types (one per fused nest, per unrolled step): inside
# `verify_module` each distinct one is checked once. Collectives read the module's process groups and kernel calls
# their kernel's registry, so they are checked every time.
for _op_class in TILE_OPS:
    if _op_class not in (CollectiveOp, NkiKernelOp):
        _op_class.verify_ = memoized_verify(_op_class.verify_, _verify_key)  # type: ignore[method-assign]

Tile = Dialect("tile", list(TILE_OPS), [TileType])
