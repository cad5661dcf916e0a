"""tile-fuse-epilogues: an elementwise nest reading a matmul's product runs as the product's tiles leave PSUM.

Input contract: tile-level functions as convert-torch-to-tile writes them (before tile-fuse-loops): each torch op
became its own loop nest, storing its result into a fresh `memref.alloc` that the next op's nest loads again.

Output guarantee: the same values, bit for bit, with each *epilogue* folded into its producer.

* A producer is an allocation P of the function body that only `tile.store`s write, each storing an SBUF tile
  computed in its block from a PSUM tile (a matmul's evacuation) through a row-major view of all of P, all of them
  in top-level ops before anything reads P. The function may also return P (a training forward saves a Linear
  layer's output for its activation's backward).
* Its epilogue is the elementwise nest that alone reads P: the stores of one allocation O whose values are
  computed in their blocks by elementwise tile ops (`tile.unary`, `binary`, `binary_scalar`, `select`, `copy`,
  `fill`, `kernel`: nothing that depends on a tile's position) from tiles loaded at the store's own indices and
  tile shape, one of them through a row-major view of all of P; every store of O computing the same ops.
* The nest's other operands (a residual, a broadcast bias; any strides) must be function arguments or
  allocations that nothing writes from the first top-level op holding a store of P on, and their views must read
  them through P's shape (`Layout.reshape`).

Each store of P then computes the nest's ops on its own tile (rounded to P's element type first and converted to
the nest's load type, as the nest read it back) and on the other operands' tiles loaded at its indices, and writes
O instead (or beside P, when the function returns P): the nest's reads of P and its loop nest disappear, and so
does P itself unless it is returned (gelu after a Linear layer runs as the matmul's output tiles leave PSUM;
`a + residual` after GPT-2's projections). O, now written by the producer, may in turn be the producer of a further
epilogue. Nothing else changes: a product with another reader, a consumer that is not elementwise over it, or an
operand written after the product's stores began keeps its own nest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.fusion_walks import fuse_at_allocations
from neuron_mlir.lowering.ir_queries import (
    ancestor_in,
    block_positions,
    defined_functions,
    memref_layout,
    storage_root,
    tile_type_of,
    unchanged_from,
    users_through_views,
)
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.runtime.hardware import Memory

OpT = TypeVar("OpT", bound=Operation)

# The per-tile compute an epilogue may hold: value-semantics elementwise ops, no position-dependent ones (iota).
_ELEMENTWISE: tuple[type[Operation], ...] = (*tile.ELEMENTWISE_OPS, tile.KernelOp)
# Ops of a nest that die with its stores once nothing uses them (index constants stay: they are shared).
_DEAD_WHEN_UNUSED: tuple[type[Operation], ...] = (
    *_ELEMENTWISE,
    tile.LoadOp,
    tile.ViewOp,
    arith.AddiOp,
    arith.MuliOp,
    arith.SubiOp,
)


def _whole(layout: Layout, elements: int) -> bool:
    """Whether a view is all of its allocation's `elements`, row-major: its tiles map to elements by flat index."""
    return layout.is_contiguous() and not layout.offset and layout.num_elements == elements


def _from_psum(value: SSAValue) -> bool:
    """Whether an SBUF tile is computed, in its block, from a PSUM tile by elementwise ops (an evacuation)."""
    pending, seen = [value], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if isinstance(current.type, TileType) and current.type.memory is Memory.PSUM:
            return True
        owner = current.owner
        if isinstance(owner, _ELEMENTWISE):
            pending.extend(owner.operands)
    return False


@dataclass
class _Compute:
    """The per-tile computation of one store of the epilogue: its ops in order and the loads they read."""

    store: tile.StoreOp
    ops: list[Operation]
    loads: list[tile.LoadOp]


def _compute_of(store: tile.StoreOp) -> _Compute | None:
    """The elementwise ops and loads the store's value is computed from in its block, when that is all it is."""
    ops: list[Operation] = []
    loads: list[tile.LoadOp] = []
    block = store.parent_block()
    pending, seen = [store.value], set()
    while pending:
        value = pending.pop()
        if value in seen or not isinstance(value.type, TileType):
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, tile.LoadOp) and owner.parent_block() is block:
            loads.append(owner)
        elif isinstance(owner, _ELEMENTWISE) and owner.parent_block() is block:
            ops.append(owner)
            pending.extend(owner.operands)
        else:
            return None
    assert block is not None
    order = {op: index for index, op in enumerate(block.ops)}
    ops.sort(key=lambda op: order[op])
    loads.sort(key=lambda op: order[op])
    return _Compute(store, ops, loads)


def _signature(compute: _Compute) -> tuple[object, ...]:
    """What a store computes, up to tile shapes: the ops (name, properties, attributes) and where each operand
    comes from (an earlier op's result, or a load through a given view)."""
    names: dict[SSAValue, tuple[object, ...]] = {
        load.result: ("load", load.source, tile_type_of(load.result).element_type) for load in compute.loads
    }
    items = []
    for index, op in enumerate(compute.ops):
        operands = tuple(names[operand] for operand in op.operands)
        types = tuple(tile_type_of(result).element_type for result in op.results)
        properties, attributes = tuple(sorted(op.properties.items())), tuple(sorted(op.attributes.items()))
        items.append((op.name, properties, attributes, operands, types))
        for position, result in enumerate(op.results):
            names[result] = ("op", index, position)
    return tuple(items), names[compute.store.value]


def _tile_shape_map(compute: _Compute, product: tuple[int, ...]) -> dict[tuple[int, ...], tuple[int, ...]] | None:
    """How the compute's tile shapes become the product tile's: the stored tile's shape and its per-partition
    columns ([P, 1]); None when the compute has tiles of any other shape."""
    shape = tile_type_of(compute.store.value).get_shape()
    mapping = {(shape[0], 1): (product[0], 1), shape: product}  # a nest of [P, 1] tiles maps them to the product
    values = [load.result for load in compute.loads] + [r for op in compute.ops for r in op.results]
    if not all(tile_type_of(v).get_shape() in mapping for v in values):
        return None
    if shape[1] == 1 and product[1] != 1:
        # a nest of [P, 1] tiles cannot tell an operand taken as a per-partition column from a whole tile by its
        # shape: only a single element broadcast (loaded as the product tile's column) keeps the column's meaning
        singles = {load.result for load in compute.loads if _single_element(load, compute.store)}
        if any(value not in singles for op in compute.ops for value in _column_operands(op)):
            return None
    return mapping


def _column_operands(op: Operation) -> list[SSAValue]:
    """The operands `op` takes as per-partition [P, 1] columns, broadcast along the free axes."""
    if isinstance(op, tile.BinaryScalarOp) and op.column is not None:
        return [op.column]
    if isinstance(op, tile.UnaryOp) and op.bias is not None:
        return [op.bias]
    return []


@dataclass
class _Epilogue:
    """A producer and the epilogue it takes: the nest's stores, the compute to apply, the other operands."""

    product: SSAValue  # P
    out: SSAValue  # O
    producer_stores: list[tile.StoreOp]
    consumer_stores: list[tile.StoreOp]
    compute: _Compute
    first: Operation  # the first top-level op holding a store of the producer


def _producer_stores(product: SSAValue, block: Block) -> list[tile.StoreOp] | None:
    """The stores writing P, when P is written by nothing else and each store evacuates PSUM (see the module
    docstring); None otherwise."""
    stores: list[tile.StoreOp] = []
    for user, view in users_through_views(product):
        if isinstance(user, tile.StoreOp) and user.dest is view:
            if not _from_psum(user.value) or not _whole(memref_layout(view), memref_layout(product).num_elements):
                return None
            stores.append(user)
        elif not isinstance(user, tile.LoadOp | func.ReturnOp):
            return None
    return stores or None


def _returned(product: SSAValue) -> bool:
    """Whether the function returns P (or a view of it): a training forward's saved product."""
    return any(isinstance(user, func.ReturnOp) for user, _ in users_through_views(product))


def _epilogue(product: SSAValue, block: Block) -> _Epilogue | None:
    """The epilogue `product` takes (module docstring), or None."""
    stores = _producer_stores(product, block)
    if stores is None:
        return None
    elements = memref_layout(product).num_elements
    loads = [user for user, _ in users_through_views(product) if isinstance(user, tile.LoadOp)]
    if not loads:
        return None
    # the consumer: the allocation every load of P ends up stored into
    outs = set()
    for load in loads:
        for user in _forward_users(load.result):
            if not isinstance(user, tile.StoreOp):
                return None
            outs.add(storage_root(user.dest))
    if len(outs) != 1:
        return None
    (out,) = outs
    if not isinstance(out.owner, memref.AllocOp) or out.owner.parent_block() is not block or out is product:
        return None
    consumer_stores = []
    for user, view in users_through_views(out):
        if isinstance(user, tile.StoreOp) and user.dest is view:
            consumer_stores.append(user)
    computes = [_compute_of(store) for store in consumer_stores]
    if not computes or any(c is None for c in computes):
        return None
    assert all(c is not None for c in computes)
    if len({_signature(c) for c in computes}) != 1:  # type: ignore[arg-type]
        return None
    read = {load for c in computes for load in c.loads}  # type: ignore[union-attr]
    if set(loads) - read:  # P has a reader besides the nest
        return None
    producing = [ancestor_in(store, block) for store in stores]
    consuming = [ancestor_in(store, block) for store in consumer_stores]
    position = block_positions(block, producing + consuming).__getitem__
    first, last = min(producing, key=position), max(producing, key=position)
    nest_start = min(consuming, key=position)
    if not last.is_before_in_block(nest_start):
        return None
    if not _whole(memref_layout(consumer_stores[0].dest), elements) or memref_layout(out).num_elements != elements:
        return None
    for user, _ in users_through_views(out):  # nothing uses O before the nest
        if not (user in consumer_stores or nest_start.is_before_in_block(ancestor_in(user, block))):
            return None
    for compute in computes:
        assert compute is not None
        store = compute.store
        for load in compute.loads:
            if _single_element(load, store):
                storage = storage_root(load.source)
                if storage is product or storage is out or not unchanged_from(storage, first, block):
                    return None
                continue
            if list(load.indices) != list(store.indices) or load.dims is not None or store.dims is not None:
                return None
            if tile_type_of(load.result).get_shape() != tile_type_of(store.value).get_shape():
                return None
            storage = storage_root(load.source)
            if storage is product:
                if not _whole(memref_layout(load.source), elements):
                    return None
            elif storage is out or not unchanged_from(storage, first, block):
                return None
    compute = computes[0]
    assert compute is not None
    for producer_store in stores:
        if _tile_shape_map(compute, tile_type_of(producer_store.value).get_shape()) is None:
            return None
        destination = memref_layout(producer_store.dest)
        others = [
            memref_layout(load.source)
            for load in compute.loads
            if storage_root(load.source) is not product and not _single_element(load, compute.store)
        ]
        if any(
            other.num_elements != destination.num_elements  # another extent than the product's: no view of it
            or other.reshape(destination.shape) is None  # not seen through P's shape
            for other in others
        ):
            return None
    return _Epilogue(product, out, stores, consumer_stores, compute, first)


def _dims(store: tile.StoreOp) -> list[int] | None:
    """The tensor dimensions `store`'s tile dimensions walk, as given (None: its tensor's last ones)."""
    return None if store.dims is None else [int(d) for d in store.dims.get_values()]


def _single_element(load: tile.LoadOp, store: tile.StoreOp) -> bool:
    """Whether `load` reads one element broadcast to a [P, 1] column (a per-tensor scale) beside the nest's wider
    tiles that `store` writes: every stride of its view is 0, so it loads the same values at any index. Such an
    operand is loaded beside each product tile, as a column of as many partitions as the tile."""
    layout = memref_layout(load.source)
    shape, stored = tile_type_of(load.result).get_shape(), tile_type_of(store.value).get_shape()
    broadcast = (
        len(shape) == 2
        and shape[1] == 1
        and len(stored) == 2
        and load.dims is None
        and all(stride == 0 for stride in layout.strides)
    )
    # in a nest of [P, 1] tiles, only where every use takes it as a column (see `_tile_shape_map`)
    return broadcast and (
        stored[1] > 1
        or all(use.operation.operands[use.index] in _column_operands(use.operation) for use in load.result.uses)
    )


def _forward_users(value: SSAValue) -> Iterator[Operation]:
    """The ops that `value` flows into through elementwise ops (the ops themselves excluded)."""
    for use in list(value.uses):
        user = use.operation
        if isinstance(user, _ELEMENTWISE):
            for result in user.results:
                yield from _forward_users(result)
        else:
            yield user


def _retyped(value_type: Attribute, shapes: dict[tuple[int, ...], tuple[int, ...]]) -> TileType:
    assert isinstance(value_type, TileType)
    return TileType(shapes[value_type.get_shape()], value_type.element_type, value_type.memory)


def _fuse(epilogue: _Epilogue, block: Block) -> None:
    """Rewrite the producer's stores to compute the epilogue and write O; drop the nest, P and its views."""
    compute, product, out = epilogue.compute, epilogue.product, epilogue.out
    kept = _returned(product)  # still stored for the caller: the epilogue's result is stored beside it
    out_alloc = out.owner
    assert isinstance(out_alloc, memref.AllocOp)
    out_alloc.detach()
    block.insert_op_before(out_alloc, epilogue.first)
    views: dict[SSAValue, SSAValue] = {}  # (source view of an operand, in the nest) -> its view in P's shape

    def before_producer(op: OpT) -> OpT:
        block.insert_op_before(op, epilogue.first)
        return op

    def operand_view(source: SSAValue, shape: tuple[int, ...]) -> SSAValue:
        key = source
        if key not in views:
            layout = memref_layout(source).reshape(shape)
            assert layout is not None, "checked: the nest's view reads elements of P's shape"
            storage = storage_root(source)
            view_type = tile.hbm_type(shape, _element(storage), layout.strides, layout.offset)
            if view_type == storage.type:
                views[key] = storage
            else:
                view = before_producer(tile.ViewOp(storage, view_type))
                if isinstance(source.owner, Operation):
                    view.location = source.owner.location
                views[key] = view.result
        return views[key]

    out_views: dict[Attribute, SSAValue] = {}
    # single-element operands: one view each, a column as tall as the tallest product tile, made before the
    # producer's first store (which the rewrite below erases)
    columns: dict[SSAValue, SSAValue] = {}
    singles = [load for load in compute.loads if _single_element(load, compute.store)]
    if singles:
        zero = before_producer(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
        rows = max(tile_type_of(store.value).get_shape()[0] for store in epilogue.producer_stores)
        for load in singles:
            if load.source not in columns:
                storage = storage_root(load.source)
                view_type = tile.hbm_type((rows, 1), _element(storage), (0, 0), memref_layout(load.source).offset)
                view = before_producer(tile.ViewOp(storage, view_type))
                view.location = load.location
                columns[load.source] = view.result

    def out_view_for(store: tile.StoreOp) -> SSAValue:
        dest_type = store.dest.type
        if dest_type not in out_views:
            strides, offset = tile.memref_strides(dest_type)  # type: ignore[arg-type]
            view_type = tile.hbm_type(memref_layout(store.dest).shape, _element(out), strides, offset)
            if view_type == out.type:
                out_views[dest_type] = out
            else:
                out_view = before_producer(tile.ViewOp(out, view_type))
                out_view.location = out_alloc.location
                out_views[dest_type] = out_view.result
        return out_views[dest_type]

    for group in _evacuation_groups(epilogue.producer_stores):
        # After the group's last store, the stores' epilogues step by step (each op for every store before the
        # next op): engines run their instructions in program order, so one store's chain after another would
        # leave each engine waiting on the chain's previous step on another engine.
        cursor: Operation = group[-1]

        def emit(op: Operation) -> None:
            nonlocal cursor
            _block_of(cursor).insert_op_after(op, cursor)
            cursor = op

        values: list[dict[SSAValue, SSAValue]] = []
        group_columns: dict[tuple[SSAValue, int], SSAValue] = {}
        shape_maps = []
        for store in group:
            shapes = _tile_shape_map(compute, tile_type_of(store.value).get_shape())
            assert shapes is not None
            shape_maps.append(shapes)
            loaded: dict[SSAValue, SSAValue] = {}
            for load in compute.loads:
                wanted = load.result.type
                assert isinstance(wanted, TileType)
                if storage_root(load.source) is product:
                    loaded[load.result] = _as_loaded(store, _element(product), _retyped(wanted, shapes), emit)
                elif load in singles:
                    column = TileType((shapes[wanted.get_shape()][0], 1), wanted.element_type, wanted.memory)
                    key = (load.source, column.get_shape()[0])
                    if key not in group_columns:  # one load serves the group's tiles of this height
                        new_load = tile.LoadOp(columns[load.source], [zero, zero], column)
                        new_load.location = load.location
                        emit(new_load)
                        group_columns[key] = new_load.result
                    loaded[load.result] = group_columns[key]
                else:
                    # read where the product's store writes, walking the dims it walks (a weight gradient's store
                    # per kernel position walks the channel dims of its 4-D tensor)
                    source = operand_view(load.source, memref_layout(store.dest).shape)
                    new_load = tile.LoadOp(source, list(store.indices), _retyped(wanted, shapes), _dims(store))
                    new_load.location = load.location
                    emit(new_load)
                    loaded[load.result] = new_load.result
            values.append(loaded)
        for op in compute.ops:
            for loaded, shapes in zip(values, shape_maps, strict=True):
                clone = type(op).create(
                    operands=[loaded[operand] for operand in op.operands],
                    result_types=[_retyped(result.type, shapes) for result in op.results],
                    properties=dict(op.properties),
                    attributes=dict(op.attributes),
                )
                clone.location = op.location
                emit(clone)
                loaded.update(zip(op.results, clone.results, strict=True))
        for store, loaded in zip(group, values, strict=True):
            out_store = tile.StoreOp(
                loaded[compute.store.value], out_view_for(store), list(store.indices), _dims(store)
            )
            out_store.location = epilogue.consumer_stores[0].location if kept else store.location
            emit(out_store)
            if not kept:
                store.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
                store.erase()
    for store in epilogue.consumer_stores:
        _erase_with_unused_inputs(store)
    if not kept:
        _erase_with_unused_inputs(product.owner)  # type: ignore[arg-type]


def _evacuation_groups(stores: list[tile.StoreOp]) -> list[list[tile.StoreOp]]:
    """The producer's stores in runs that evacuate one output block: consecutive stores of one block with no
    matmul or loop between them, in program order."""
    groups: list[list[tile.StoreOp]] = []
    positions: dict[Operation, int] = {}
    for block in {id(_block_of(store)): _block_of(store) for store in stores}.values():
        positions.update(block_positions(block, [store for store in stores if store.parent_block() is block]))
    for store in sorted(stores, key=lambda op: (id(op.parent_block()), positions[op])):
        previous = groups[-1][-1] if groups else None
        if previous is None or previous.parent_block() is not store.parent_block() or _work_between(previous, store):
            groups.append([store])
        else:
            groups[-1].append(store)
    return groups


def _work_between(first: Operation, second: Operation) -> bool:
    """Whether a matmul or a loop lies between two ops of one block (another output block's work)."""
    op = first.next_op
    while op is not None and op is not second:
        if isinstance(op, tile.MatmulOp | scf.ForOp):
            return True
        op = op.next_op
    return False


def _block_of(op: Operation) -> Block:
    block = op.parent_block()
    assert block is not None
    return block


def _element(value: SSAValue) -> Attribute:
    memref_type = value.type
    assert isinstance(memref_type, MemRefType)
    return memref_type.element_type


def _as_loaded(
    store: tile.StoreOp, stored_type: Attribute, wanted: TileType, emit: Callable[[Operation], None]
) -> SSAValue:
    """The producer's tile as the nest loaded it back from P: rounded to P's element type by the store, then
    converted to the load's type by the DMA (each a `tile.copy`, given to `emit`, only where the type changes)."""
    value = store.value
    for element_type in (stored_type, wanted.element_type):
        current = tile_type_of(value)
        if current.element_type != element_type:
            copy = tile.CopyOp(value, TileType(current.get_shape(), element_type, Memory.SBUF))
            copy.location = store.location
            emit(copy)
            value = copy.result
    return value


def _erase_with_unused_inputs(op: Operation) -> None:
    """Erase `op` (a store, or an allocation only views use) and then whatever only it used: the nest's compute,
    loads, views and index arithmetic, and loops left with nothing but their yield."""
    if isinstance(op, memref.AllocOp):
        for user, _ in list(users_through_views(op.memref)):
            raise AssertionError(f"{user.name} still uses the product")
        _erase_views(op.memref)
        if op.memref.uses:
            return
    parent = op.parent_op()
    inputs = list(op.operands)
    op.detach()
    op.erase()
    for value in inputs:
        owner = value.owner
        if isinstance(owner, _DEAD_WHEN_UNUSED) and owner.parent is not None and not owner.results[0].uses:
            _erase_with_unused_inputs(owner)
    emptied = isinstance(parent, scf.ForOp) and parent.parent is not None and not parent.results
    if emptied and all(isinstance(inner, scf.YieldOp) for inner in parent.body.block.ops):  # type: ignore[union-attr]
        _erase_with_unused_inputs(parent)  # type: ignore[arg-type]


def _erase_views(value: SSAValue) -> None:
    for use in list(value.uses):
        if isinstance(use.operation, tile.ViewOp):
            _erase_views(use.operation.result)
            use.operation.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
            use.operation.erase()


def fuse_epilogues(function: func.FuncOp) -> int:
    """Fold every epilogue of the function's body into its producer (module docstring); the count fused."""

    def fuse(epilogue: _Epilogue, block: Block) -> SSAValue:
        _fuse(epilogue, block)
        return epilogue.out  # the consumer's result is now a product the same way

    return fuse_at_allocations(function, _epilogue, fuse)


@dataclass(frozen=True)
class TileFuseEpiloguesPass(ModulePass):
    name = "tile-fuse-epilogues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            fuse_epilogues(function)
