"""tile-fuse-matmul-prologues: a layer norm read only by a matmul, as A, runs in the matmul's prologue.

A matmul reads its left operand A [M, K] as A^T tiles (K on partitions): it loads rows of A and transposes them on
TensorE into its stationary panel. When A is a layer norm's result that nothing else reads, the matmul can
compute the normalized rows itself, where it would have loaded them, and apply the per-feature affine (weight,
bias) as it evacuates the transposes from PSUM: there a feature is a partition, and the affine is one
per-partition two-step `binary_scalar` instead of two tensor-tensor passes over the rows. A never reaches HBM.

Input contract: tile-level functions as convert-torch-to-tile writes them (after tile-fuse-epilogues):

* A, an allocation of the function body seen through views as one row-major [M, K] matrix, or through one
  row-major [B..., M, K] layout by every store and load (token rows split back into a size bucket's batches:
  a row tile is then picked by its batch and row indices), that only `tile.store`s and `tile.load`s use (not
  the function's return);
* its loads each read the rows [m, full K tiles] that only a panel loop of a matmul transposes, 128 columns at a
  time, into its stationary panel ([128, K // 128, m]), and, when K % 128 is not 0, the same rows' last
  [m, K % 128] columns, transposed and copied out of PSUM on their own (for K below 128, these alone: rows a
  matmul's stationary operand takes whole, `[K, m]`);
* its stores each write a row tile computed, in the store's block, from loads at the store's row index only (the
  normalized rows: x and its row statistics), followed by per-feature ops: `tile.binary` multiplies and adds of
  a tile loaded from a vector broadcast over the rows (a stride-0 view of [m, K]);
* the nests holding the stores write nothing else (a layer norm whose statistics are saved for a backward pass
  keeps its nest), and nothing writes x or the vectors from the first store's nest on.

Output guarantee: each panel loop reading A is replaced (for K below 128, the partial tiles' loads of one block):
its rows are computed by the stores' row ops cloned with the panel's row index (each tile's loads and statistics, a
tile's loads and passes over its rows ahead of the tile before's last column ops, then each tile's normalization, so
each engine's queue holds one kind of work after another), rounded to A's element type as the stored rows were, and
transposed 128 columns at a time (the partial last K tile after the loop); each transposed tile leaves PSUM through
the per-feature ops as per-partition `binary_scalar`s (the vectors loaded once as [128, K // 128] columns and a
[K % 128, 1] last one), in fp32 and rounded to A's type at the last. The rows are rounded to A's type before the affine
instead of after it (the transposes stay 16-bit, at TensorE's full rate).
A's stores and whatever only they used (the layer norm's nest) are erased.

What it leaves alone: an A with another reader (it must reach HBM anyway), or loaded other than as whole rows
for a hoisted panel (a K too long for the panel to stay on chip, or A read with K not contiguous), a per-feature
op that is not a multiply or an add, and a nest whose row computation also feeds another store (the statistics
saved for a backward pass).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.matmul import carry, window
from neuron_mlir.lowering.fusion_walks import fuse_at_allocations
from neuron_mlir.lowering.ir_queries import (
    ancestor_in,
    block_positions,
    clone_load_at_row,
    clone_ops,
    defined_functions,
    erase_stores,
    integer_constant,
    memref_layout,
    row_indices,
    storage_root,
    tile_type_of,
    unchanged_from,
)
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.lowering.tile_fuse_matmul_chains import (
    Panel,
    Rows,
    index_constants,
    panel_element_type,
    read_as_matmul_rows,
    row_computation,
    same_rows,
)
from neuron_mlir.runtime.hardware import PARTITIONS, Memory

# Per-feature ops that commute with the transposition into per-partition scalar ops.
_AFFINE_OPS = ("multiply", "add")


@dataclass(frozen=True)
class _Vector:
    """A vector the rows are combined with per feature: its storage, stride and offset."""

    storage: SSAValue
    stride: int
    offset: int


@dataclass
class _RowTemplate:
    """How the stores compute a row tile of m rows: the ops up to the affine, the row index their loads use."""

    rows: int
    row_value: SSAValue
    row_index: Rows
    row_ops: list[Operation]


@dataclass
class _Prologue:
    normalized: SSAValue  # A
    stores: list[tile.StoreOp]
    panels: list[Panel]
    templates: dict[int, _RowTemplate]
    affine: list[tuple[str, _Vector]]  # the per-feature ops, in order
    element_type: Attribute  # the panel's: A's, or what its loads round A's rows to
    tiles: int  # full K tiles
    rest: int  # K % 128
    location: Operation  # an op of the layer norm's nest, for locations


def _vector(value: SSAValue) -> _Vector | None:
    """The vector a per-feature operand is loaded from: a load through a stride-0 view of [m, K]."""
    load = value.owner
    if not isinstance(load, tile.LoadOp) or load.dims is not None:
        return None
    layout = memref_layout(load.source)
    if len(layout.shape) != 2 or layout.strides[0] != 0 or any(integer_constant(i) != 0 for i in load.indices):
        return None
    return _Vector(storage_root(load.source), layout.strides[1], layout.offset)


def _affine(value: SSAValue) -> tuple[SSAValue, list[tuple[str, _Vector]], list[Operation]]:
    """(the rows before the per-feature ops, those ops in order, the ops themselves) of a stored value."""
    steps: list[tuple[str, _Vector]] = []
    ops: list[Operation] = []
    while isinstance(value.owner, tile.BinaryOp) and value.owner.op.data in _AFFINE_OPS:
        op = value.owner
        lhs, rhs = _vector(op.lhs), _vector(op.rhs)
        if (lhs is None) == (rhs is None):
            break
        steps.append((op.op.data, lhs or rhs))  # type: ignore[arg-type]
        ops.append(op)
        value = op.rhs if lhs is not None else op.lhs
    steps.reverse()
    return value, steps, ops


def _writes_only(top: Operation, allowed: set[Operation]) -> bool:
    """Whether the only ops with effects under `top` (a nest) are the `allowed` stores."""
    for op in top.walk():
        if isinstance(op, tile.StoreOp | tile.ScatterOp | memref.AllocOp) and op not in allowed:
            return False
    return True


def _prologue(normalized: SSAValue, block: Block) -> _Prologue | None:
    """The prologue fusion `normalized` allows (module docstring), or None."""
    read = read_as_matmul_rows(normalized, block, lambda columns: columns > 0, batched=True)
    if read is None:
        return None
    columns, stores, loads, panels = read
    nests = {ancestor_in(store, block) for store in stores}
    if not all(_writes_only(nest, set(stores)) for nest in nests):
        return None
    loading = [ancestor_in(load, block) for load in loads]
    position = block_positions(block, [*nests, *loading]).__getitem__
    first = min(nests, key=position)
    earliest_load = min(loading, key=position)
    if not max(nests, key=position).is_before_in_block(earliest_load):
        return None
    templates: dict[int, _RowTemplate] = {}
    affines = set()
    storage: set[SSAValue] = set()
    for store in stores:
        rows, affine, affine_ops = _affine(store.value)
        affines.add(tuple(affine))
        store_block = store.parent_block()
        assert store_block is not None
        found = row_computation(rows, store_block)
        if found is None or not same_rows(found[1], row_indices(store)) or integer_constant(store.indices[-1]) != 0:
            return None
        row_ops, row_index = found
        dying = {*row_ops, *affine_ops, store}
        if any(use.operation not in dying for op in row_ops for result in op.results for use in result.uses):
            return None  # a row op also feeds something else (the statistics, stored): the nest would stay
        height = tile_type_of(store.value).get_shape()[0]
        templates.setdefault(height, _RowTemplate(height, rows, row_index, row_ops))
        storage.update(storage_root(op.source) for op in row_ops if isinstance(op, tile.LoadOp))
    if len(affines) != 1 or any(rows not in templates for panel in panels for _, rows in panel.subs):
        return None
    affine = list(next(iter(affines)))
    storage.update(vector.storage for _, vector in affine)
    if not all(unchanged_from(value, first, block) for value in storage):
        return None
    element = panel_element_type(normalized, loads)
    if element is None:
        return None
    tiles, rest = divmod(columns, PARTITIONS)
    return _Prologue(normalized, stores, panels, templates, affine, element, tiles, rest, stores[0])


def _row_order(templates: list[_RowTemplate]) -> list[tuple[int, Operation]]:
    """(tile, op) of the row tiles' ops in the order to clone them: each tile's loads and the ops that its per-row
    columns (the statistics) depend on, then each tile's others (the normalization), so each engine's queue holds
    one kind of work after another and the tiles' chains overlap.

    A tile's loads and passes over its rows (and the columns they read) come before the previous tile's last
    column ops (those no pass of their tile reads): a column op waits for its tile's passes on other engines, and
    ahead of the next tile's pass in its engine's queue it would hold that pass back. Each tile's loads come just
    before its passes rather than all first: rows that tile-fuse-loops later builds on chip from stored tiles
    are copies on the engines, which would otherwise queue ahead of the earlier tiles' passes."""
    loads: list[list[tuple[int, Operation]]] = []
    passes: list[list[tuple[int, Operation]]] = []
    finishes: list[list[tuple[int, Operation]]] = []
    others: list[list[tuple[int, Operation]]] = []
    for position, template in enumerate(templates):
        statistics = _ancestors_in([op for op in template.row_ops if any(map(_is_column, op.results))], template)
        streamed = _ancestors_in([op for op in statistics if _reads_rows(op)], template)
        loads.append([])
        passes.append([])
        finishes.append([])
        others.append([])
        for op in template.row_ops:
            if isinstance(op, tile.LoadOp):
                loads[-1].append((position, op))
            elif op in streamed:
                passes[-1].append((position, op))
            elif op in statistics:
                finishes[-1].append((position, op))
            else:
                others[-1].append((position, op))
    skewed: list[tuple[int, Operation]] = []
    for position in range(len(templates)):
        skewed += loads[position] + passes[position]
        if position:
            skewed += finishes[position - 1]
    if finishes:
        skewed += finishes[-1]
    return skewed + [entry for tile_ops in others for entry in tile_ops]


def _ancestors_in(roots: list[Operation], template: _RowTemplate) -> set[Operation]:
    """`roots` and the row ops of `template` they depend on."""
    found: set[Operation] = set()
    pending = list(roots)
    while pending:
        op = pending.pop()
        if op in found or op not in template.row_ops:
            continue
        found.add(op)
        pending.extend(operand.owner for operand in op.operands if isinstance(operand.owner, Operation))
    return found


def _reads_rows(op: Operation) -> bool:
    """Whether `op` streams a tile of several columns (a pass over rows, not a per-row column op)."""
    return any(
        isinstance(operand.type, TileType) and not _is_column(operand) and not isinstance(op, tile.ExtractOp)
        for operand in op.operands
    )


def _is_column(value: SSAValue) -> bool:
    return isinstance(value.type, TileType) and value.type.get_shape()[-1] == 1


def _row_tiles(prologue: _Prologue, em: LoopNestBuilder, subs: list[tuple[Rows, int]]) -> list[SSAValue]:
    """The rows of `subs` before the affine, rounded to A's type (in the order of `_row_order`)."""
    templates = [prologue.templates[rows] for _, rows in subs]
    mappings: list[dict[SSAValue, SSAValue]] = [{} for _ in subs]
    for position, op in _row_order(templates):
        mapping, template = mappings[position], templates[position]
        if isinstance(op, tile.LoadOp):  # the same load of the sub's rows: only the row index changes
            clone_load_at_row(op, subs[position][0], em, mapping)
        elif op.results and op.results[0] is template.row_value and isinstance(op.results[0].type, TileType):
            # the last op rounds to A's type, as the stored rows were rounded before the matmul loaded them
            result = op.results[0].type
            rounded = TileType(result.get_shape(), prologue.element_type, result.memory)
            rounded_op = type(op).create(
                operands=[mapping.get(operand, operand) for operand in op.operands],
                result_types=[rounded],
                properties=dict(op.properties),
                attributes=dict(op.attributes),
            )
            mapping[op.results[0]] = em.insert(rounded_op).results[0]
            rounded_op.location = op.location
        else:
            clone_ops([op], em, mapping)
    rows: list[SSAValue] = []
    for mapping, template in zip(mappings, templates, strict=True):
        value = mapping[template.row_value]
        if tile_type_of(value).element_type != prologue.element_type:  # not rounded by its last op: a copy
            shape = tile_type_of(value).get_shape()
            value = em.insert(tile.CopyOp(value, TileType(shape, prologue.element_type, Memory.SBUF))).result
        rows.append(value)
    return rows


def _evacuate(
    prologue: _Prologue, e: LoopNestBuilder, value: SSAValue, columns: list[SSAValue], t: Index | None
) -> SSAValue:
    """A transposed tile [k, m] leaving PSUM through the per-feature ops as per-partition scalar ops (columns
    `t` of the vectors' [128, K tiles] columns, or their [K % 128, 1] last column when `t` is None)."""
    k, m = tile_type_of(value).get_shape()
    for position, ((name, _), vector) in enumerate(zip(prologue.affine, columns, strict=True)):
        column = vector
        if t is not None:
            column_type = TileType((k, 1), tile_type_of(vector).element_type, Memory.SBUF)
            column = e.insert(tile.ExtractOp(vector, [e.index(t)], column_type)).result
        last = position == len(columns) - 1
        out = TileType((k, m), prologue.element_type if last else f32, Memory.SBUF)
        value = e.insert(tile.BinaryScalarOp(value, name, out, column=column)).result
    return value


def _build_panel(
    prologue: _Prologue,
    em: LoopNestBuilder,
    panel: Panel,
    columns: list[SSAValue],
    last_columns: list[SSAValue],
) -> tuple[list[SSAValue], list[SSAValue | None]]:
    """The matmul's panel of rows `subs` (and each sub's partial last K tile): the rows computed, transposed, and
    the affine applied per partition."""
    subs = panel.subs
    rows = _row_tiles(prologue, em, subs)
    empty: list[SSAValue] = [
        em.insert(tile.EmptyOp(TileType((PARTITIONS, prologue.tiles, m), prologue.element_type))).result
        for _, m in subs
        if prologue.tiles
    ]

    def transpose_step(e: LoopNestBuilder, t: Index, panel: list[SSAValue]) -> list[SSAValue]:
        updated: list[SSAValue] = []
        for row, part, (_, m) in zip(rows, panel, subs, strict=True):
            block = window(e, row, [e.mul(t, PARTITIONS)], (m, PARTITIONS))
            value = _evacuate(prologue, e, e.insert(tile.TransposeOp(block)).result, columns, t)
            updated.append(e.insert(tile.InsertOp(value, part, [e.index(t), e.index(0)])).result)
        return updated

    full = carry(em, 0, prologue.tiles, 1, empty, transpose_step, always_loop=True) if prologue.tiles else []
    rests: list[SSAValue | None] = []
    for row, rest, (_, m) in zip(rows, panel.rests, subs, strict=True):
        if rest is None:
            rests.append(None)
            continue
        block = window(em, row, [prologue.tiles * PARTITIONS], (m, prologue.rest))
        value = _evacuate(prologue, em, em.insert(tile.TransposeOp(block)).result, last_columns, None)
        if tile_type_of(value).memory is not Memory.SBUF:  # no affine: a copy evacuates PSUM
            value = em.insert(tile.CopyOp(value, TileType((prologue.rest, m), prologue.element_type))).result
        rests.append(value)
    return full, rests


def _fuse(prologue: _Prologue, block: Block) -> None:
    constants = index_constants(block)
    starts = [ancestor_in(panel.start, block) for panel in prologue.panels]
    start = min(starts, key=block_positions(block, starts).__getitem__)
    location = prologue.location.location
    top = LoopNestBuilder(block, start, location, constants, block)
    columns: list[SSAValue] = []
    last_columns: list[SSAValue] = []
    for _, vector in prologue.affine:
        element = vector.storage.type.element_type  # type: ignore[attr-defined]
        full = Layout((PARTITIONS, prologue.tiles), (vector.stride, PARTITIONS * vector.stride), vector.offset)
        last_offset = vector.offset + prologue.tiles * PARTITIONS * vector.stride
        last = Layout((prologue.rest, 1), (vector.stride, 0), last_offset)
        for layout, shape, found in ((full, full.shape, columns), (last, last.shape, last_columns)):
            if not shape[0] or not shape[1]:
                continue
            view_type = tile.hbm_type(layout.shape, element, layout.strides, layout.offset)
            split = top.insert(tile.ViewOp(vector.storage, view_type)).result
            tile_type = TileType(shape, element, Memory.SBUF)
            found.append(top.insert(tile.LoadOp(split, [top.index(0), top.index(0)], tile_type)).result)
    for panel in prologue.panels:
        block_of_panel = panel.start.parent_block()
        assert block_of_panel is not None
        em = LoopNestBuilder(block_of_panel, panel.start, location, constants, block)
        built, rests = _build_panel(prologue, em, panel, columns, last_columns)
        if panel.loop is not None:
            for old, new in zip(panel.loop.results, built, strict=True):
                old.replace_all_uses_with(new)
        for rest, new_rest in zip(panel.rests, rests, strict=True):
            if rest is not None and new_rest is not None:
                rest[1].replace_all_uses_with(new_rest)
    seeds: list[Operation] = [panel.loop for panel in prologue.panels if panel.loop is not None]
    seeds += [rest[1].owner for panel in prologue.panels for rest in panel.rests if rest is not None]  # type: ignore[misc]
    owner = prologue.normalized.owner
    assert isinstance(owner, Operation)
    erase_stores(prologue.stores, [*seeds, owner])


def fuse_matmul_prologues(function: func.FuncOp) -> int:
    """Compute every layer norm a matmul alone reads in that matmul's prologue (module docstring); the count."""
    return fuse_at_allocations(function, _prologue, _fuse)


@dataclass(frozen=True)
class TileFuseMatmulProloguesPass(ModulePass):
    name = "tile-fuse-matmul-prologues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            fuse_matmul_prologues(function)
