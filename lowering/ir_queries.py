"""Questions the passes ask of the IR, answered once.

What a pass walks (a module's function definitions), what a value is (an index constant, a tile, the allocation
under a chain of views), where an op sits (its ancestor directly in a block) and the clean-up after a rewrite
(erasing what nothing reads any more, and the stores a fusion replaced with what only they used). The passes keep
their own logic; these are the facts they share.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from neuron_mlir.ir.dialects import neuron, tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.dialects.torch import size_arguments
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import LoopNestBuilder


def defined_functions(module: ModuleOp) -> list[func.FuncOp]:
    """The `func.func` ops of `module` that have a body (declarations have nothing to rewrite), in module order,
    as a list taken before the caller's walk so that it may add or erase functions."""
    return [op for op in module.ops if isinstance(op, func.FuncOp) and not op.is_declaration]


def integer_constant(value: SSAValue) -> int | None:
    """The value of an `arith.constant` integer (or index), None for anything computed."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def size_argument_ranges(function: func.FuncOp) -> dict[SSAValue, tuple[int, int]]:
    """The values each size argument of `function` (an `index` argument) may take at a call: the inclusive range
    its `SIZE_ARGUMENTS_ATTR` entry declares, which the program's callers and validator enforce."""
    if function.is_declaration:
        return {}
    sizes = [arg for arg in function.body.block.args if isinstance(arg.type, IndexType)]
    return {arg: (size.lower, size.upper) for arg, size in zip(sizes, size_arguments(function), strict=False)}


def index_interval(value: SSAValue, known: dict[SSAValue, tuple[int, int]]) -> tuple[int, int] | None:
    """The least and greatest value an index computed from constants and the values in `known` (each with its
    inclusive range) can take, through add, subtract, multiply, signed floor division by a positive constant,
    signed minimum and maximum and index casts; None for anything else (a loop induction, a load)."""
    if value in known:
        return known[value]
    constant = integer_constant(value)
    if constant is not None:
        return constant, constant
    owner = value.owner
    if isinstance(owner, arith.IndexCastOp):
        return index_interval(owner.input, known)
    arithmetic = arith.AddiOp | arith.SubiOp | arith.MuliOp | arith.FloorDivSIOp | arith.MinSIOp | arith.MaxSIOp
    if not isinstance(owner, arithmetic):
        return None
    lhs, rhs = index_interval(owner.lhs, known), index_interval(owner.rhs, known)
    if lhs is None or rhs is None:
        return None
    if isinstance(owner, arith.MinSIOp):
        return min(lhs[0], rhs[0]), min(lhs[1], rhs[1])
    if isinstance(owner, arith.MaxSIOp):
        return max(lhs[0], rhs[0]), max(lhs[1], rhs[1])
    if isinstance(owner, arith.AddiOp):
        return lhs[0] + rhs[0], lhs[1] + rhs[1]
    if isinstance(owner, arith.SubiOp):
        return lhs[0] - rhs[1], lhs[1] - rhs[0]
    if isinstance(owner, arith.MuliOp):
        ends = [a * b for a in lhs for b in rhs]
        return min(ends), max(ends)
    if rhs[0] != rhs[1] or rhs[0] <= 0:
        return None  # a divisor that is not one positive constant
    return lhs[0] // rhs[0], lhs[1] // rhs[0]  # floor division is monotonic in the dividend


def tile_type_of(value: SSAValue) -> TileType:
    assert isinstance(value.type, TileType)
    return value.type


def tensor_shape_of(value: SSAValue) -> tuple[int, ...]:
    """The shape of a torch-level tensor value."""
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def storage_root(value: SSAValue) -> SSAValue:
    """The allocation (or function argument) under a chain of views, `tile.view` or `neuron.view`."""
    while isinstance(value.owner, tile.ViewOp | neuron.ViewOp):
        value = value.owner.source
    return value


def memref_layout(value: SSAValue) -> Layout:
    """The shape, strides and offset of a memref value."""
    memref_type = value.type
    assert isinstance(memref_type, MemRefType)
    strides, offset = tile.memref_strides(memref_type)
    return Layout(memref_type.get_shape(), strides, offset)


def users_through_views(value: SSAValue) -> Iterator[tuple[Operation, SSAValue]]:
    """(op, the view of `value` it uses) for every user of `value` that is not itself a view, through views."""
    for use in list(value.uses):
        if isinstance(use.operation, tile.ViewOp):
            yield from users_through_views(use.operation.result)
        else:
            yield use.operation, value


def parent_op(op: Operation) -> Operation:
    parent = op.parent_op()
    assert parent is not None
    return parent


def parent_block(op: Operation) -> Block:
    block = op.parent_block()
    assert block is not None
    return block


def ancestor_in(op: Operation, block: Block) -> Operation:
    """The ancestor of `op` (or `op`) directly in `block`."""
    while op.parent_block() is not block:
        op = parent_op(op)
    return op


def block_positions(block: Block, ops: Iterable[Operation]) -> dict[Operation, int]:
    """The index in `block` of each of `ops` (ops directly in it), from one walk of the block that stops at the
    last of them: `Block.get_operation_index` walks from the start on every call, so ordering k ops by it took k
    walks."""
    wanted = set(ops)
    positions: dict[Operation, int] = {}
    if not wanted:
        return positions
    for index, op in enumerate(block.ops):
        if op in wanted:
            positions[op] = index
            if len(positions) == len(wanted):
                return positions
    raise ValueError("block_positions: an op is not directly in the block")


def unchanged_from(storage: SSAValue, first: Operation, block: Block) -> bool:
    """Whether `storage` is a function argument or defined before `first`, and nothing writes it (a store, or any
    op but a load, a gather or the function's return reading it) from `first` on: its contents at `first` are
    final. A training forward returns the values its backward reads (a residual sum), and returning one hands it
    over as it is."""
    owner = storage.owner
    if isinstance(owner, Operation) and not ancestor_in(owner, block).is_before_in_block(first):
        return False
    for user, _ in users_through_views(storage):
        if isinstance(user, tile.LoadOp | tile.GatherOp | func.ReturnOp):
            continue
        if not ancestor_in(user, block).is_before_in_block(first):
            return False
    return True


def clone_ops(ops: list[Operation], builder: LoopNestBuilder, mapping: dict[SSAValue, SSAValue]) -> None:
    """Clone `ops` in order at the builder's insertion point, operands renamed by `mapping` (which gains the
    clones' results)."""
    for op in ops:
        clone = op.clone(value_mapper=mapping)
        clone.location = op.location
        if builder.anchor is not None:
            builder.block.insert_op_before(clone, builder.anchor)
        else:
            builder.block.add_op(clone)
        mapping.update(zip(op.results, clone.results, strict=True))


def row_positions(op: tile.LoadOp | tile.StoreOp) -> list[int]:
    """Where the row index of a load or store of a row tile is, in its indices: the dimensions of its view up to
    the one on the tile's partitions (the row's, after the batches' of rows seen as [B..., M, K]), those of one
    element left out (their index is 0 whatever the row)."""
    shape = op.memref_type().get_shape()
    partition = op.mapped_dims()[0]
    return [dim for dim in range(partition + 1) if shape[dim] != 1]


def row_indices(op: tile.LoadOp | tile.StoreOp) -> tuple[SSAValue, ...]:
    """The row index of a load or store of a row tile (`row_positions`): the batch indices, then the row's."""
    return tuple(op.indices[dim] for dim in row_positions(op))


def clone_load_at_row(
    load: tile.LoadOp, row: Sequence[SSAValue], builder: LoopNestBuilder, mapping: dict[SSAValue, SSAValue]
) -> None:
    """Clone `load` as `clone_ops` does, with its row index (`row_indices`) replaced by `row`: the same load of
    other rows (a fusion computing a row tile again where another loop nest needs it)."""
    dims = None if load.dims is None else tuple(load.dims.get_values())
    indices = list(load.indices)
    positions = row_positions(load)
    assert len(positions) == len(row), "a row index of another rank"
    for dim, value in zip(positions, row, strict=True):
        indices[dim] = value
    clone = builder.insert(tile.LoadOp(mapping.get(load.source, load.source), indices, load.result.type, dims))
    clone.location = load.location
    mapping[load.result] = clone.result


def erase_stores(stores: Iterable[Operation], seeds: Iterable[Operation]) -> None:
    """Erase `stores` (writes a rewrite has made redundant), then, as `erase_dead` does, whatever only they and
    `seeds` kept alive: the stored values' computations, the nests that held the stores, `seeds` and what those
    used."""
    pending = list(seeds)
    for store in stores:
        pending.extend(owner for owner in (operand.owner for operand in store.operands) if isinstance(owner, Operation))
        pending.append(parent_op(store))
        store.detach()
        store.erase()
    erase_dead(pending)


def erase_dead(seeds: list[Operation]) -> None:
    """Erase ops that nothing uses and that have no effect but reads, from `seeds` (and what they used) on; an
    emptied loop goes with its body."""
    pending = list(seeds)
    while pending:
        op = pending.pop()
        if op.parent is None:
            continue
        unused_storage = isinstance(op, memref.AllocOp) and not op.memref.uses
        if not (unused_storage or is_trivially_dead(op)):
            continue
        inputs = [operand.owner for nested in op.walk() for operand in nested.operands]
        parent = op.parent_op()
        op.detach()
        op.erase(safe_erase=False)
        pending.extend(owner for owner in inputs if isinstance(owner, Operation))
        if parent is not None and not isinstance(parent, func.FuncOp):
            pending.append(parent)
