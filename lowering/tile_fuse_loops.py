"""tile-fuse-loops: fuse loop nests that walk the same tiles, so intermediates stay on chip.

Input contract: tile-level functions (convert-torch-to-tile's output), where each torch op became its own loop
nest storing its result to a fresh HBM tensor that the next op's nest loads again.

Output guarantee: the same results, with
1. Fusion: consecutive top-level `scf.for` nests with the same loop structure (equal bounds at every level:
   constants, or the same value of the function's top level such as a size argument; the levels carry no
   values; the straight-line code between loops, such as peeled remainder tiles, may differ) become one nest
   when the later nest reads the earlier one's HBM results only at the tile the earlier one stored in the
   matching place (same element type, offset, extents and strides of the view, tile shape, dims and indices,
   leaving out a view's dimensions of one element at index 0 that no tile dimension walks, which move nothing:
   a batch of one's `[1, s, 32]` rows and its `[s, 32]` rows are the same bytes). The later nest's code goes
   right after the earlier nest's code of the same place, so each tile is produced and consumed in one
   iteration.
   `memref.alloc`, `tile.view` and index constants between the nests move above the first; straight-line tile
   code between them (the first nest's peeled remainder tiles) stays after the fused loop when the second nest
   provably touches other elements of every tensor that code stores or that it stores (index ranges from the
   constant loop bounds). What the second nest reads of that code (a matmul's weights loaded once before its
   rows, perhaps transposed; a layer norm's affine vectors) moves above the first nest too, when those ops
   are loads of tensors nothing before them writes from the first nest on, and compute on tiles. A nest may
   hold loads, stores, elementwise compute, reductions, index arithmetic and, for nests whose trips the call's
   sizes decide (a bound computed from a size argument), TensorE's products and transposes and the loops
   carrying a stationary panel that transposes build (one step of the code around them, not a level; they read
   nothing the first nest writes). Other nests are left alone, and so
   are nests whose fused body would hold more than a quarter of a partition of SBUF at once (half of it once
   double-buffered; `fused_live_bytes`: a tile lives from its definition to its last use, and a load that
   forwarding will replace shares the stored tile), so a long elementwise chain, such as a decomposed
   activation's backward, still fuses whole. Linear layers over the same rows fuse so (a transformer's
   attention output projection, residual add, MLP and the next layer's Q/K/V projection over the token rows of
   a size bucket's program, each a loop up to the call's last row tile): each row tile's activations go from
   one product to the next on chip.
2. Forwarding: in every block, a `tile.load` of exactly what an earlier `tile.store` of that block wrote (or of
   exactly what an earlier load read), with no store to the same tensor in between, uses that tile instead
   (with a `tile.copy` where the store or the load converted the element type). An earlier load that rounded the
   tensor's values (fp32 to bf16) stands only for loads rounding them the same way. A load of what several
   stores at constant indices wrote, each stored tile whole inside the loaded one, on its partitions and in its
   element type, is built on chip from them (an empty tile and an insert each) when no matmul or transpose
   runs between the last of those stores and the load: a matmul's 512-column output blocks read back as whole
   rows by the layer norm in the next matmul's prologue, without the HBM round trip between the nests. Stored
   tiles of other views of the tensor count by where their elements lie in its storage: when windows of them
   (leading free dimensions fixed, the trailing ones walking the load's own, on the load's partitions) cover
   what the load reads exactly once, the tile is built from an extract and an insert per window, under the same
   rule: attention's rows collected per group of heads and query tiles, read back by the output projection as
   the rows of each query tile.
3. Dead stores: an HBM tensor allocated in the function that nothing loads and nothing returns (through any view)
   loses its stores, views and allocation; copies and views left without users go too.

So an elementwise chain such as `gelu(2 * x + 1) * x` is one loop nest that loads x once and stores once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import BFloat16Type, Float16Type, IndexType, IntegerAttr, MemRefType, ModuleOp, f32
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.neuron import target_of
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.ir_queries import (
    defined_functions,
    erase_stores,
    integer_constant,
    memref_layout,
    storage_root,
)
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import Memory

# Ops a fusable nest may hold: value-semantics compute on tiles, index arithmetic, and tile transfers.
_COMPUTE: tuple[type[Operation], ...] = (*tile.ELEMENTWISE_OPS, tile.IotaOp, tile.KernelOp, tile.ReduceOp)
_INDEX = (arith.ConstantOp, arith.AddiOp, arith.MuliOp, arith.SubiOp)
# Ops that may sit between two nests and move above the first (they neither read nor write tensor data).
_MOVABLE = (memref.AllocOp, tile.ViewOp, arith.ConstantOp)
# What a matmul's nest adds to a streaming nest: TensorE products and transposes, and the on-chip panels built
# from them (a panel's loop carries its tile, so it is one step of its segment, not a level of the nest).
_MATMUL = (tile.MatmulOp, tile.TransposeOp, tile.EmptyOp, tile.ExtractOp, tile.InsertOp, tile.ViewOp)
_TRANSFERS = (tile.LoadOp, tile.StoreOp)

# a loop's bounds (constants, top-level values; None otherwise: `_bound`) with its body's loops, in order
_Skeleton = tuple[tuple[tuple[int | SSAValue | None, int | SSAValue | None, int | SSAValue | None], "_Skeleton"], ...]
# what makes two transfers move the same data: root buffer, element type, the view's offset and (extent, stride) per
# dimension, indices (constants folded), tile shape, mapping; dimensions of one element at index 0 that no tile
# dimension walks left out (a batch of one's [1, s, 32] rows stored and its [s, 32] rows loaded move the same bytes)
_TransferKey = tuple[
    SSAValue,
    Attribute,
    int,
    tuple[tuple[int, int], ...],
    tuple[int | SSAValue, ...],
    tuple[int, ...],
    tuple[int, ...],
]


def _constant_bounds(loop: scf.ForOp) -> tuple[int | None, int | None, int | None]:
    return integer_constant(loop.lb), integer_constant(loop.ub), integer_constant(loop.step)


def _bound(value: SSAValue) -> int | SSAValue | None:
    """A loop bound two nests can share: a constant, or a value of the function's top level (a size argument or
    index arithmetic on one), which every nest of the function sees unchanged. None otherwise."""
    constant = integer_constant(value)
    if constant is not None:
        return constant
    owner = value.owner
    block = owner if isinstance(owner, Block) else owner.parent_block()
    return value if block is not None and isinstance(block.parent_op(), func.FuncOp) else None


def _bounds(loop: scf.ForOp) -> tuple[int | SSAValue | None, int | SSAValue | None, int | SSAValue | None]:
    return _bound(loop.lb), _bound(loop.ub), _bound(loop.step)


def _is_level(op: Operation) -> bool:
    """Whether `op` is a level of a nest: a loop carrying no values. A loop that carries values (a matmul's panel
    built tile by tile) is one step of the code around it."""
    return isinstance(op, scf.ForOp) and not op.iter_args


def _skeleton(block: Block) -> _Skeleton:
    """The loop structure of a block: for each level in order, its bounds and its body's skeleton."""
    return tuple((_bounds(op), _skeleton(op.body.block)) for op in block.ops if _is_level(op))


def _fusable_nest(loop: scf.ForOp, matmuls: bool = False) -> bool:
    """Whether a nest holds only what fusion may merge: loads, stores, elementwise compute, reductions, index
    arithmetic and levels with shared bounds; with `matmuls`, also TensorE's products and transposes and the
    loops that build panels of them."""
    if any(bound is None for bound in _bounds(loop)):
        return False
    allowed = (*_COMPUTE, *_INDEX, tile.LoadOp, tile.StoreOp, scf.YieldOp, *(_MATMUL if matmuls else ()))
    for op in loop.body.walk():
        if isinstance(op, scf.ForOp):
            if (op.iter_args and not matmuls) or any(bound is None for bound in _bounds(op)):
                return False
        elif not isinstance(op, allowed):
            return False
    return True


def streams_tiles(loop: scf.ForOp) -> bool:
    """Whether a loop nest only moves tiles between HBM and on-chip compute: it loads and stores, and holds
    nothing but loads, stores, elementwise compute, reductions, index arithmetic and loops without carried
    values."""
    ops = list(loop.body.walk())
    has_load = any(isinstance(op, tile.LoadOp) for op in ops)
    has_store = any(isinstance(op, tile.StoreOp) for op in ops)
    return has_load and has_store and _fusable_nest(loop)


def _segments(block: Block) -> list[list[Operation]]:
    """The straight-line runs of a block around its levels (one more run than levels), yield excluded."""
    runs: list[list[Operation]] = [[]]
    for op in block.ops:
        if _is_level(op):
            runs.append([])
        elif not isinstance(op, scf.YieldOp):
            runs[-1].append(op)
    return runs


def _loops(block: Block) -> list[scf.ForOp]:
    return [op for op in block.ops if isinstance(op, scf.ForOp) and _is_level(op)]


def _transfer_key(op: tile.LoadOp | tile.StoreOp, tensor: SSAValue, rename: dict[SSAValue, SSAValue]) -> _TransferKey:
    renamed = (rename.get(index, index) for index in op.indices)
    indices = [c if (c := integer_constant(index)) is not None else index for index in renamed]
    layout = memref_layout(tensor)
    mapped = op.mapped_dims()
    kept = [d for d, index in enumerate(indices) if layout.shape[d] != 1 or index != 0 or d in mapped]
    return (
        storage_root(tensor),
        _memref_element_type(tensor),
        layout.offset,
        tuple((layout.shape[d], layout.strides[d]) for d in kept),
        tuple(indices[d] for d in kept),
        op.tile_type().get_shape(),
        tuple(kept.index(d) for d in mapped),
    )


def _stores(ops: list[Operation]) -> Iterator[tile.StoreOp]:
    for op in ops:
        for inner in op.walk():
            if isinstance(inner, tile.StoreOp):
                yield inner


def _loads(ops: list[Operation]) -> Iterator[tile.LoadOp]:
    for op in ops:
        for inner in op.walk():
            if isinstance(inner, tile.LoadOp):
                yield inner


def _aligned(first: Block, second: Block, rename: dict[SSAValue, SSAValue], written: set[SSAValue]) -> bool:
    """Whether every load in `second` of a tensor the first nest writes reads exactly a tile that the first
    nest's matching segment stores (so forwarding will remove it). `rename` maps second's loop variables to
    first's."""
    for loop_a, loop_b in zip(_loops(first), _loops(second), strict=True):
        rename = {**rename, loop_b.body.block.args[0]: loop_a.body.block.args[0]}
        if not _aligned(loop_a.body.block, loop_b.body.block, rename, written):
            return False
    for run_a, run_b in zip(_segments(first), _segments(second), strict=True):
        stored = {_transfer_key(s, s.dest, {}) for s in run_a if isinstance(s, tile.StoreOp)}
        for op in run_b:
            if isinstance(op, tile.LoadOp):
                if storage_root(op.source) in written and _transfer_key(op, op.source, rename) not in stored:
                    return False
            elif any(storage_root(load.source) in written for load in _loads([op])):
                return False  # read inside a panel's loop: not at the tile the first nest stores here
    return True


def body_bytes(block: Block) -> int:
    """SBUF bytes per partition of the tiles a block (with everything nested in it) defines."""
    total = 0
    for op in block.walk():
        for result in op.results:
            if isinstance(result.type, TileType) and result.type.memory is Memory.SBUF:
                total += result.type.free_size * itemsize(runtime_dtype_name(result.type.element_type))
    return total


def _tile_bytes(value: SSAValue) -> int:
    value_type = value.type
    if not isinstance(value_type, TileType) or value_type.memory is not Memory.SBUF:
        return 0
    return value_type.free_size * itemsize(runtime_dtype_name(value_type.element_type))


def fused_live_bytes(first: scf.ForOp, second: scf.ForOp) -> int:
    """The most SBUF bytes per partition that the tiles of `first` and `second` fused into one body hold at once.

    Each tile lives from its definition to its last use (to the end of a nested loop that uses it and does not
    define it: the next trip reads it again), in the order of `first`'s code followed by `second`'s; a load of
    exactly what an earlier store of either nest wrote (or an earlier load read) is the tile forwarding will give
    it, so it costs nothing and keeps that tile alive. A chain of elementwise ops holds a few tiles at a time
    however long it is.
    """
    rename: dict[SSAValue, SSAValue] = {}
    for loop_a, loop_b in zip(_all_loops(first), _all_loops(second), strict=False):
        rename[loop_b.body.block.args[0]] = loop_a.body.block.args[0]
    ops = [op for loop in (first, second) for op in loop.body.walk()]
    position = {op: index for index, op in enumerate(ops)}
    loop_end = {op: max(position[inner] for inner in op.walk()) for op in ops if isinstance(op, scf.ForOp)}
    same: dict[SSAValue, SSAValue] = {}  # a load's result -> the tile forwarding gives it
    available: dict[_TransferKey, SSAValue] = {}
    for op in ops:
        if isinstance(op, tile.StoreOp):
            available[_transfer_key(op, op.dest, rename)] = same.get(op.value, op.value)
        elif isinstance(op, tile.LoadOp):
            key = _transfer_key(op, op.source, rename)
            known = available.get(key)
            if known is not None and known.type == op.result.type:
                same[op.result] = known
            else:
                available[key] = op.result
    end: dict[SSAValue, int] = {}
    for op in ops:
        for operand in op.operands:
            value = same.get(operand, operand)
            if not _tile_bytes(value):
                continue
            use = position[op]
            loop = op.parent_op()
            while isinstance(loop, scf.ForOp) and loop in position and not loop.is_ancestor(_defining_op(value)):
                use = max(use, loop_end[loop])
                loop = loop.parent_op()
            end[value] = max(end.get(value, 0), use)
    changes = [0] * (len(ops) + 1)
    for op in ops:
        for result in op.results:
            if result in same or not _tile_bytes(result):
                continue
            changes[position[op]] += _tile_bytes(result)
            changes[max(end.get(result, position[op]), position[op]) + 1] -= _tile_bytes(result)
    live = peak = 0
    for change in changes:
        live += change
        peak = max(peak, live)
    return peak


def _defining_op(value: SSAValue) -> Operation:
    owner = value.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        assert parent is not None
        return parent
    return owner


def _all_loops(loop: scf.ForOp) -> list[scf.ForOp]:
    return [op for op in loop.walk() if isinstance(op, scf.ForOp) and _is_level(op)]


def _bounded_at_run_time(loop: scf.ForOp) -> bool:
    """Whether some level of a nest takes a bound from the call (a size argument, or index arithmetic on one)."""
    return any(
        integer_constant(bound) is None
        for level in (loop, *_all_loops(loop))
        for bound in (level.lb, level.ub, level.step)
    )


def _can_fuse(first: scf.ForOp, second: scf.ForOp, budget: int) -> bool:
    if _bounds(first) != _bounds(second) or _skeleton(first.body.block) != _skeleton(second.body.block):
        return False
    # Matmul nests fuse only over trips the call decides: neuron-unroll-loops gives each such trip a copy of its
    # own (up to SHORT_TRIPS), so the fused body costs no overlap, while a constant loop's two or three copies
    # would each carry both products' chains (real-width training layers ran 0.4-0.5% slower so).
    matmuls = _bounded_at_run_time(first)
    if not (_fusable_nest(first, matmuls) and _fusable_nest(second, matmuls)):
        return False
    if fused_live_bytes(first, second) > budget:
        return False
    written_first = {storage_root(s.dest) for s in _stores([first])}
    read_first = {storage_root(load.source) for load in _loads([first])}
    written_second = {storage_root(s.dest) for s in _stores([second])}
    if written_second & (written_first | read_first):
        return False
    rename: dict[SSAValue, SSAValue] = {second.body.block.args[0]: first.body.block.args[0]}
    return _aligned(first.body.block, second.body.block, rename, written_first)


def _merge(first: Block, second: Block) -> None:
    """Append each segment of `second` after the matching segment of `first`, merging loops pairwise."""
    second.args[0].replace_all_uses_with(first.args[0])
    loops_a, loops_b = _loops(first), _loops(second)
    runs_b = _segments(second)
    anchors: list[Operation | None] = [*loops_a, first.last_op if isinstance(first.last_op, scf.YieldOp) else None]
    for run, anchor in zip(runs_b, anchors, strict=True):
        for op in run:
            op.detach()
            if anchor is None:
                first.add_op(op)
            else:
                first.insert_op_before(op, anchor)
    for loop_a, loop_b in zip(loops_a, loops_b, strict=True):
        _merge(loop_a.body.block, loop_b.body.block)
        loop_b.detach()
        loop_b.erase()


def _fuse_nests(block: Block, budget: int) -> None:
    current: scf.ForOp | None = None
    tail: list[Operation] = []  # straight-line code after `current` (its peeled remainder tiles, say)
    for op in list(block.ops):
        if isinstance(op, scf.ForOp):
            if current is not None and _can_fuse(current, op, budget):
                early = _early_ops(current, tail, op)
                rest = [other for other in tail if other not in early]
                if _can_hoist(op, rest):
                    for moved in early:
                        moved.detach()
                        block.insert_op_before(moved, current)
                    tail = rest
                    op.detach()
                    block.insert_op_after(op, current)
                    _merge(current.body.block, op.body.block)
                    op.detach()
                    op.erase()
                    continue
            current, tail = (op, []) if not op.iter_args else (None, [])
        elif isinstance(op, _MOVABLE) and current is not None:
            if all(_dominates_before(operand, current) for operand in op.operands):
                op.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
                block.insert_op_before(op, current)
            else:
                tail.append(op)
        elif current is not None and not op.regions and isinstance(op, (*_COMPUTE, *_INDEX, *_MATMUL, *_TRANSFERS)):
            tail.append(op)
        else:
            current, tail = None, []


def _early_ops(current: scf.ForOp, tail: list[Operation], loop: scf.ForOp) -> list[Operation]:
    """The ops of `tail` that `loop` reads the results of (directly or through each other), when they may all run
    before `current`: loads of what neither `current` nor the code before them in `tail` writes, and compute on
    tiles, with their other operands defined before `current` (a matmul's weights, loaded between two nests and
    perhaps transposed, or a layer norm's affine vectors, which the second nest reads). Empty otherwise."""
    produced: dict[SSAValue, Operation] = {result: op for op in tail for result in op.results}
    needed: set[Operation] = set()
    pending = [operand for inner in loop.walk() for operand in inner.operands if operand in produced]
    while pending:
        op = produced[pending.pop()]
        if op not in needed:
            needed.add(op)
            pending.extend(operand for operand in op.operands if operand in produced)
    written = {storage_root(store.dest) for store in _stores([current])}
    for op in tail:
        if op not in needed:
            written |= _written_roots(op)
        elif not (
            isinstance(op, (*_COMPUTE, *_INDEX, *_MATMUL))
            or (isinstance(op, tile.LoadOp) and storage_root(op.source) not in written)
        ) or not all(operand in produced or _dominates_before(operand, current) for operand in op.operands):
            return []
    return [op for op in tail if op in needed]


def _index_range(value: SSAValue) -> tuple[int, int] | None:
    """The values an index takes: a constant, or the induction variable of a loop with constant bounds."""
    constant = integer_constant(value)
    if constant is not None:
        return constant, constant
    owner = value.owner
    if isinstance(owner, Block) and isinstance(loop := owner.parent_op(), scf.ForOp):
        lower, upper, step = _constant_bounds(loop)
        if lower is not None and upper is not None and step is not None and upper > lower and step > 0:
            return lower, lower + (upper - lower - 1) // step * step
    return None


def _box(op: tile.LoadOp | tile.StoreOp) -> tuple[SSAValue, MemRefType, list[tuple[int, int]] | None]:
    """The tensor an access touches, its view type, and per view dim the index range it may touch."""
    tensor = op.source if isinstance(op, tile.LoadOp) else op.dest
    memref_type = tensor.type
    assert isinstance(memref_type, MemRefType)
    extents = dict(zip(op.mapped_dims(), op.tile_type().get_shape(), strict=True))
    box = []
    for dim, index in enumerate(op.indices):
        bounds = _index_range(index)
        if bounds is None:
            return storage_root(tensor), memref_type, None
        box.append((bounds[0], bounds[1] + extents.get(dim, 1) - 1))
    return storage_root(tensor), memref_type, box


def _disjoint(a: tile.LoadOp | tile.StoreOp, b: tile.LoadOp | tile.StoreOp) -> bool:
    root_a, type_a, box_a = _box(a)
    root_b, type_b, box_b = _box(b)
    if root_a is not root_b:
        return True
    if type_a != type_b or box_a is None or box_b is None:
        return False
    return any(hi_a < lo_b or hi_b < lo_a for (lo_a, hi_a), (lo_b, hi_b) in zip(box_a, box_b, strict=True))


def _can_hoist(loop: scf.ForOp, ops: list[Operation]) -> bool:
    """Whether `loop` may run before `ops`: it uses none of their values, and no two accesses of a tensor, one of
    them a store, may touch the same elements."""
    defined = {result for op in ops for result in op.results}
    inside = list(loop.body.walk())
    if any(operand in defined for op in inside for operand in op.operands):
        return False
    transfers = [op for op in inside if isinstance(op, tile.LoadOp | tile.StoreOp)]
    for op in ops:
        if not isinstance(op, tile.LoadOp | tile.StoreOp):
            continue
        for other in transfers:
            if (isinstance(op, tile.StoreOp) or isinstance(other, tile.StoreOp)) and not _disjoint(op, other):
                return False
    return True


def _dominates_before(value: SSAValue, op: Operation) -> bool:
    owner = value.owner
    if isinstance(owner, Block):
        return True
    block = op.parent_block()
    assert block is not None
    if owner.parent_block() is not block:
        return True  # defined in an enclosing block, hence before
    return owner.is_before_in_block(op)  # walks from the owner only, not twice from the block's start


# per memref dimension, the [first, end) indices a tile covers
Box = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class _Piece:
    """A tile a store wrote at constant indices: the box it covers in its view (per tile dimension, the memref
    dimension it walks, its first index and extent), and the tile as a load would read it back."""

    view: Attribute  # the view's memref type (layout included)
    dims: tuple[int, ...]
    start: tuple[int, ...]  # per memref dimension
    shape: tuple[int, ...]  # per tile dimension
    value: SSAValue
    tensor_work: int  # TensorE ops of the block before its store (`_forward`)
    transfer: Operation | None = None  # the store (or load) itself

    # box and footprint are asked for each stored tile by every later load of the tensor: computed once
    @cached_property
    def box(self) -> Box:
        """Per memref dimension, the [first, end) indices the tile covers."""
        extents = dict(zip(self.dims, self.shape, strict=True))
        return tuple((first, first + extents.get(dim, 1)) for dim, first in enumerate(self.start))

    @cached_property
    def footprint(self) -> _Footprint | None:
        """Where the tile's elements lie in the tensor's storage, whatever the view (None for a view that repeats
        elements: a stride of 0)."""
        assert isinstance(self.view, MemRefType)
        strides, offset = tile.memref_strides(self.view)
        base = offset + sum(first * stride for first, stride in zip(self.start, strides, strict=True))
        steps = tuple(strides[dim] for dim in self.dims)
        if any(step <= 0 for extent, step in zip(self.shape, steps, strict=True) if extent > 1):
            return None
        return _Footprint(base, steps, self.shape)


@dataclass(frozen=True)
class _Footprint:
    """A tile's elements in the storage of a tensor: element (i0, i1, ...) at `base` + sum(i_d * steps[d])."""

    base: int
    steps: tuple[int, ...]
    shape: tuple[int, ...]

    @cached_property
    def span(self) -> tuple[int, int]:
        """The first element and one past the last."""
        return self.base, self.base + sum(
            (extent - 1) * step for extent, step in zip(self.shape, self.steps, strict=True)
        ) + 1

    def offsets(self) -> np.ndarray:
        grids = np.ix_(
            *(np.arange(extent, dtype=np.int64) * step for extent, step in zip(self.shape, self.steps, strict=True))
        )
        total = np.full(self.shape, self.base, dtype=np.int64)
        for grid in grids:
            total = total + grid
        return total

    def meets(self, other: _Footprint) -> bool:
        """Whether the two tiles share an element of the storage.

        Exact, by marking one tile's elements within the common span and looking up the other's: linear in the
        tiles' sizes, where intersecting the two offset sets sorted them (tens of milliseconds for a stored
        [128, 2, 768] tile, and a block's loads ask about every stored tile of another view)."""
        (a0, a1), (b0, b1) = self.span, other.span
        low, high = max(a0, b0), min(a1, b1)
        if high <= low:
            return False
        mine, theirs = self.offsets().ravel(), other.offsets().ravel()
        mine = mine[(mine >= low) & (mine < high)]
        theirs = theirs[(theirs >= low) & (theirs < high)]
        if not mine.size or not theirs.size:
            return False
        if high - low > 16 * (mine.size + theirs.size):  # sparse in a wide span: a table would be mostly empty
            ordered = np.sort(mine)
            found = np.minimum(np.searchsorted(ordered, theirs), ordered.size - 1)
            return bool((ordered[found] == theirs).any())
        marked = np.zeros(high - low, dtype=np.bool_)
        marked[mine - low] = True
        return bool(marked[theirs - low].any())


def _pieces_disjoint(first: _Piece, second: _Piece) -> bool:
    """Whether two stored tiles share no element of the tensor (in the same view by their boxes, else by where
    their elements lie; a footprint that cannot say counts as shared)."""
    if first.view == second.view and first.dims == second.dims:
        return not _overlap(first.box, second.box)
    a, b = first.footprint, second.footprint
    if a is None or b is None:
        return False
    return not a.meets(b)


def _piece(op: tile.LoadOp | tile.StoreOp, tensor: SSAValue, value: SSAValue, tensor_work: int) -> _Piece | None:
    """The box of a transfer whose indices are constants, with its tile dimensions in the memref's order."""
    start = [integer_constant(index) for index in op.indices]
    dims = op.mapped_dims()
    if any(first is None for first in start):
        return None
    return _Piece(
        tensor.type, dims, tuple(s for s in start if s is not None), op.tile_type().get_shape(), value, tensor_work, op
    )


def _overlap(first: Box, second: Box) -> bool:
    # a loop rather than all() over a generator: asked for every pair of a tensor's stored tiles
    for (a0, a1), (b0, b1) in zip(first, second, strict=True):  # noqa: SIM110
        if a1 <= b0 or b1 <= a0:
            return False
    return True


def _inside(inner: Box, outer: Box) -> bool:
    return all(o0 <= i0 and i1 <= o1 for (i0, i1), (o0, o1) in zip(inner, outer, strict=True))


def _volume(box: Box) -> int:
    volume = 1
    for first, end in box:
        volume *= end - first
    return volume


def _assembled(load: tile.LoadOp, pieces: list[_Piece], tensor_work: int) -> list[_Piece] | None:
    """The stored tiles that together are exactly what `load` reads, each whole inside it and all on its
    partitions, the last stored with no TensorE work since; None when they are not.

    Assembling keeps the stored tiles alive up to the load: only a load in the code right after the nest that
    stored them (no matmul or transpose between) gets them, so that no later nest's SBUF holds them too."""
    wanted = _piece(load, load.source, load.result, tensor_work)
    if wanted is None or list(wanted.dims) != sorted(wanted.dims):
        return None
    box = wanted.box
    parts: list[_Piece] = []
    for piece in pieces:
        if piece.view != wanted.view or piece.dims != wanted.dims:
            if _pieces_disjoint(piece, wanted):
                continue
            return None  # another view of the tensor: its boxes do not compare
        other = piece.box
        if not _overlap(other, box):
            continue
        if not _inside(other, box) or _tile_element(piece.value) != load.tile_type().element_type:
            return None
        if other[wanted.dims[0]] != box[wanted.dims[0]]:  # an insert fills the destination's first partitions
            return None
        parts.append(piece)
    if len(parts) < 2 or sum(_volume(p.box) for p in parts) != _volume(box):
        return None
    if max(p.tensor_work for p in parts) != tensor_work:
        return None
    return parts


def _assemble(block: Block, load: tile.LoadOp, parts: list[_Piece]) -> SSAValue:
    """`load`'s tile built on chip from the stored tiles: an empty tile and one insert per piece."""
    empty = tile.EmptyOp(load.tile_type())
    new_ops: list[Operation] = [empty]
    value = empty.result
    wanted = _piece(load, load.source, load.result, 0)
    assert wanted is not None
    for part in parts:
        indices: list[SSAValue] = []
        for dim in part.dims[1:]:
            constant = arith.ConstantOp(IntegerAttr(part.start[dim] - wanted.start[dim], IndexType()))
            new_ops.append(constant)
            indices.append(constant.result)
        insert = tile.InsertOp(part.value, value, indices)
        new_ops.append(insert)
        value = insert.result
    for new in new_ops:
        new.location = load.location
        block.insert_op_before(new, load)
    return value


@dataclass(frozen=True)
class _Window:
    """Part of a stored tile that a load reads back: the tile's leading free dimensions fixed at `fixed` (its
    trailing ones kept whole), found in the loaded tile at `at` (one index per free dimension of it)."""

    piece: _Piece
    fixed: tuple[int, ...]
    at: tuple[int, ...]


def _position(delta: int, load: _Footprint) -> tuple[int, ...] | None:
    """The loaded tile's free indices of the element `delta` past its first one on partition 0, when there is
    one (None otherwise)."""
    if delta < 0:
        return None
    indices = [0] * len(load.shape)
    for dim in sorted((d for d in range(1, len(load.shape)) if load.shape[d] > 1), key=lambda d: -load.steps[d]):
        indices[dim] = min(delta // load.steps[dim], load.shape[dim] - 1)
        delta -= indices[dim] * load.steps[dim]
    return tuple(indices[1:]) if delta == 0 else None


def _windows(load: tile.LoadOp, pieces: list[_Piece], tensor_work: int) -> list[_Window] | None:
    """The stored tiles (of any views of the tensor) that together hold exactly what `load` reads: windows of
    them, each on the load's partitions with its kept dimensions walking the load's trailing ones, that cover
    every loaded element once, the last stored with no TensorE work since; None when they do not.

    An attention's output rows collected per group of heads [128, query tiles, heads * Ev] and read back by the
    projection as [128, H * Ev] rows of one query tile: each group's tile gives a window [128, heads * Ev] per
    query tile."""
    wanted = _piece(load, load.source, load.result, tensor_work)
    if wanted is None or not pieces or max(p.tensor_work for p in pieces) != tensor_work:
        return None
    target = wanted.footprint
    if target is None or len(target.shape) < 2:
        return None
    lo, hi = target.span
    overlapping = [p for p in pieces if (f := p.footprint) is None or (f.span[0] < hi and lo < f.span[1])]
    if not overlapping:
        return None
    element = load.tile_type().element_type
    offsets = target.offsets()
    covered = np.zeros(target.shape, dtype=np.int64)
    free = len(target.shape) - 1
    windows: list[_Window] = []
    for piece in overlapping:
        source = piece.footprint
        if source is None or _tile_element(piece.value) != element or source.shape[0] != target.shape[0]:
            return None
        if source.steps[0] != target.steps[0] and target.shape[0] > 1:
            return None
        # the piece's trailing dimensions that walk the load's trailing ones: kept whole in each window
        kept = 0
        while (
            kept < min(len(source.shape) - 1, free)
            and source.steps[-1 - kept] == target.steps[-1 - kept]
            and source.shape[-1 - kept] <= target.shape[-1 - kept]
        ):
            kept += 1
        if kept == 0:
            return None
        extents = (1,) * (free - kept) + source.shape[len(source.shape) - kept :]
        elements = source.offsets()
        for fixed in np.ndindex(*source.shape[1 : len(source.shape) - kept]):
            part = elements[(slice(None), *fixed)]
            first = source.base + sum(i * step for i, step in zip(fixed, source.steps[1:], strict=False))
            at = _position(first - target.base, target)
            if at is None:
                if np.isin(part, offsets).any():
                    return None  # the load reads part of this window, not all of it
                continue
            box = (slice(None), *(slice(i, i + extent) for i, extent in zip(at, extents, strict=True)))
            region = offsets[box]
            if region.size != part.size or not np.array_equal(region.reshape(part.shape), part):
                return None
            covered[box] += 1
            windows.append(_Window(piece, tuple(int(i) for i in fixed), at))
    if len(windows) < 2 or not (covered == 1).all():
        return None
    return windows


def _assemble_windows(block: Block, load: tile.LoadOp, windows: list[_Window]) -> SSAValue:
    """`load`'s tile built on chip from windows of stored tiles: an empty tile, an extract and an insert each.

    Each window's copy comes right after the store of its tile (windows in the order of their stores), not at the
    load: the engines copy the early tiles' windows while later ones are computed (attention's groups of heads), so
    that the load's tile is whole soon after the last store rather than after every copy."""
    empty = tile.EmptyOp(load.tile_type())
    value = empty.result
    placed: list[tuple[Operation | None, list[Operation]]] = [(None, [empty])]

    def constant(number: int, ops: list[Operation]) -> SSAValue:
        op = arith.ConstantOp(IntegerAttr(number, IndexType()))
        ops.append(op)
        return op.result

    for window in windows:
        ops: list[Operation] = []
        part = window.piece.value
        part_type = part.type
        assert isinstance(part_type, TileType)
        shape = part_type.get_shape()
        if window.fixed:
            kept = shape[1 + len(window.fixed) :]
            indices = [constant(i, ops) for i in window.fixed] + [constant(0, ops) for _ in kept]
            extract = tile.ExtractOp(
                part, indices, TileType((shape[0], *kept), part_type.element_type, part_type.memory)
            )
            ops.append(extract)
            part = extract.result
        insert = tile.InsertOp(part, value, [constant(i, ops) for i in window.at])
        ops.append(insert)
        value = insert.result
        store = window.piece.transfer
        placed.append((store if store is not None and store.parent_block() is block else None, ops))
    stores = [store for store, _ in placed[1:] if store is not None]
    in_order = len(stores) == len(windows) and all(
        earlier is later or earlier.is_before_in_block(later) for earlier, later in pairwise(stores)
    )
    last_after: dict[Operation, Operation] = {}
    for store, ops in placed:
        for new in ops:
            new.location = load.location
        if not in_order:
            for new in ops:
                block.insert_op_before(new, load)
        elif store is None:  # the empty tile, before the first store
            for new in ops:
                block.insert_op_before(new, stores[0])
        else:
            anchor = last_after.get(store, store)  # after the store and this tile's copies already placed there
            for new in ops:
                block.insert_op_after(new, anchor)
                anchor = new
            last_after[store] = anchor
    return value


def _tensor_work(op: Operation) -> bool:
    return any(isinstance(inner, tile.MatmulOp | tile.TransposeOp) for inner in op.walk())


def _forward(block: Block) -> None:
    """Store-to-load and load-to-load forwarding within `block` (and, separately, every nested block); a load of
    what several stores just wrote, each tile whole, is built from their tiles (`_assembled`)."""
    # what is known per tensor: a write forgets one tensor's entries without touching (and rehashing) the others'
    available: dict[SSAValue, dict[_TransferKey, SSAValue]] = {}
    # per tensor, the tiles stored at constant indices that no later write overlaps
    stored: dict[SSAValue, list[_Piece]] = {}
    tensor_work = 0
    for op in list(block.ops):
        for region in op.regions:
            for inner in region.blocks:
                _forward(inner)
        if isinstance(op, tile.StoreOp):
            key = _transfer_key(op, op.dest, {})
            memref_type = op.memref_type()
            assert isinstance(memref_type, MemRefType)
            as_stored = _as_stored(op.value, memref_type, op)
            available[key[0]] = {key: as_stored}
            piece = _piece(op, op.dest, as_stored, tensor_work)
            kept = [p for p in stored.get(key[0], []) if piece is not None and _pieces_disjoint(p, piece)]
            stored[key[0]] = kept + ([piece] if piece is not None else [])
        elif isinstance(op, tile.LoadOp):
            key = _transfer_key(op, op.source, {})
            known = available.setdefault(key[0], {})
            value = known.get(key)
            wanted = op.tile_type()
            stored_type = _memref_element_type(op.source)
            if value is None and (parts := _assembled(op, stored.get(key[0], []), tensor_work)) is not None:
                value = _assemble(block, op, parts)
                known[key] = value
            elif value is None and (windows := _windows(op, stored.get(key[0], []), tensor_work)) is not None:
                value = _assemble_windows(block, op, windows)
                known[key] = value
            elif value is None or not _holds_for(_tile_element(value), stored_type, wanted.element_type):
                # An earlier load that rounded what it read cannot stand for a load of other values: the tensor's
                # own are kept for later loads instead.
                if value is None or wanted.element_type == stored_type:
                    known[key] = op.result
                continue
            if value.type != wanted:
                copy = tile.CopyOp(value, wanted)
                copy.location = op.location
                block.insert_op_before(copy, op)
                value = copy.result
            op.result.replace_all_uses_with(value)
            op.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
            op.erase()
        elif not isinstance(op, (*_COMPUTE, *_INDEX, tile.ViewOp, memref.AllocOp)):
            # a nested region, a scatter, anything else that may write tensors: forget what it could overwrite
            for tensor in _written_roots(op):
                available.pop(tensor, None)
                stored.pop(tensor, None)
        if _tensor_work(op):
            tensor_work += 1


def _written_roots(op: Operation) -> set[SSAValue]:
    """The tensors `op` (or anything nested in it) may write: stores' destinations, and every tensor operand of
    an op that is not known to only read."""
    written: set[SSAValue] = set()
    for inner in op.walk():
        if isinstance(inner, tile.StoreOp):
            written.add(storage_root(inner.dest))
        elif not isinstance(inner, (tile.LoadOp, tile.ViewOp, tile.GatherOp)):
            written |= {storage_root(v) for v in inner.operands if isinstance(v.type, MemRefType)}
    return written


def _holds_for(held: Attribute, stored: Attribute, wanted: Attribute) -> bool:
    """Whether a tile of `held` values, loaded from a tensor of `stored` ones, gives what a load of `wanted` ones
    reads: it is what that load reads, or it holds the tensor's values exactly (in their type, or widened from
    16-bit floats to fp32)."""
    return held in (wanted, stored) or (held == f32 and isinstance(stored, BFloat16Type | Float16Type))


def _memref_element_type(value: SSAValue) -> Attribute:
    memref_type = value.type
    assert isinstance(memref_type, MemRefType)
    return memref_type.element_type


def _tile_element(value: SSAValue) -> Attribute:
    tile_type = value.type
    assert isinstance(tile_type, TileType)
    return tile_type.element_type


def _as_stored(value: SSAValue, memref_type: MemRefType, store: tile.StoreOp) -> SSAValue:
    """The tile as a load would read it back: rounded to the tensor's element type when the store converted."""
    value_type = value.type
    assert isinstance(value_type, TileType)
    if value_type.element_type == memref_type.element_type:
        return value
    rounded = tile.CopyOp(value, TileType(value_type.get_shape(), memref_type.element_type, value_type.memory))
    rounded.location = store.location
    block = store.parent_block()
    assert block is not None
    block.insert_op_before(rounded, store)
    return rounded.result


def _users_through_views(value: SSAValue) -> Iterator[Operation]:
    for use in list(value.uses):
        if isinstance(use.operation, tile.ViewOp):
            yield use.operation
            yield from _users_through_views(use.operation.result)
        else:
            yield use.operation


def _remove_dead_stores(function: func.FuncOp) -> None:
    """Erase the stores to buffers that nothing reads, and with them whatever only they kept alive (the stored
    values' computations, the views, the buffers, emptied nests): a product left behind with no reader would
    hold its PSUM accumulator in flight to the program's end."""
    dead: list[Operation] = []
    for alloc in [op for op in function.body.walk() if isinstance(op, memref.AllocOp)]:
        users = list(_users_through_views(alloc.memref))
        if all(isinstance(user, tile.StoreOp | tile.ViewOp) for user in users):
            dead.extend([*users, alloc])
    stores = [op for op in dead if isinstance(op, tile.StoreOp)]
    erase_stores(stores, [op for op in dead if not isinstance(op, tile.StoreOp)])


def _remove_unused_values(block: Block) -> None:
    """Drop copies and views nothing uses any more (forwarding and dead stores leave them behind)."""
    for op in reversed(list(block.walk())):
        if isinstance(op, tile.CopyOp | tile.ViewOp) and not op.results[0].uses:
            op.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
            op.erase()


@dataclass(frozen=True)
class TileFuseLoopsPass(ModulePass):
    name = "tile-fuse-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            body = function.body.block
            # a fused body's tiles, double-buffered by neuron-unroll-loops, may take half a partition
            _fuse_nests(body, target_of(op).sbuf_bytes_per_partition // 4)
            _forward(body)
            _remove_dead_stores(function)
            _remove_unused_values(body)
