"""tile-fuse-matmul-chains: a Linear layer and its activation, read only by another Linear layer, computed on chip
as that layer's stationary panel.

In `act(x @ W1 + b1) @ W2` (a transformer's MLP) the second matmul reads the hidden activations H as A, that is as
H^T tiles with the hidden features on partitions: it loads rows of H and transposes them on TensorE. The first
matmul can produce exactly those tiles with its operands swapped: H^T[n, rows] = W1[:, n]-stationary times
x^T-moving, where W1's [128, 128] tiles load straight from a row-major W1 (K1 on partitions) and x^T is the first
matmul's own stationary panel of the same rows. b1 is then one value per partition, so each PSUM tile leaves
through a single ScalarE activation `act(p + b1[n])` into its slot of the second matmul's panel. H never goes to
HBM, the first matmul adds no bias row and its product is never transposed back.

Input contract: tile-level functions after tile-fuse-epilogues, as convert-torch-to-tile's matmul writes them:

* H, an allocation of the function body seen through views as one row-major [M, N1] matrix, N1 a multiple of 128,
  that only `tile.store`s and `tile.load`s use (not the function's return);
* its stores (the first matmul's evacuations) each write a PSUM accumulation through at most a bias add, one
  activation of `ACTIVATIONS` and copies; the accumulation sums products of a stationary panel's windows (x^T,
  K1 on partitions, built in a loop of TensorE transposes of a row tile as in the matmul's hoisted panel) and
  windows of one [K1 / 128, 128, N1] view of a row-major W1, plus at most one ones-row matmul adding the bias
  row; the bias (that row, or the add's operand) is one strided vector b1 broadcast over rows. Rows left over by
  the 128-row tiles may accumulate with the roles swapped (W1's columns stationary, x^T moving, the bias row in
  128-column pieces) and reach the store copied out of PSUM and transposed back;
* its loads (the second matmul's) each read whole rows [m, N1] that only a panel loop transposes, 128 columns at
  a time, into the second matmul's stationary panel ([128, N1 / 128, m]);
* the row tiles the first matmul transposes depend on their rows only through the row index of their loads
  (plain rows of x, or rows a layer norm computes), and nothing writes x, W1 or b1 from the first matmul's nest
  on.

Output guarantee: each of the second matmul's panels is built in place of its row loads and transposes: the row
tiles of the first matmul are computed again for its rows (their ops cloned, the row index replaced, every tile's
ops interleaved with the others' as the matmul's own panel interleaves them), transposed into x^T as the first
matmul did, and the hidden features computed 128 at a time as described above, W1 loaded 512 features per DMA.
The panel holds act(x @ W1 + b1)^T rounded once to H's type: the product and the bias in fp32, as PSUM holds
them, where the unfused stores round the biased product to H's type before the activation (one rounding fewer).
H's stores and whatever only they used (the first matmul's whole nest) are erased.

What it leaves alone, each then keeping its own loop nests: an H with another reader (it must reach HBM anyway),
rows of H loaded other than whole for a panel (a second matmul whose panel is not hoisted: a hidden size too
long for it to stay on chip), a hidden size that is not a multiple of 128, an activation that is not one ScalarE
function or an epilogue that is not elementwise in it (it would not commute with the transposition into
partitions), a W1 that is not row-major (its [128, 128] columns would be strided reads), and a first matmul
whose row tiles depend on more than their row index.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import IndexType, ModuleOp, f32
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
    parent_block,
    row_indices,
    row_positions,
    storage_root,
    tile_type_of,
    unchanged_from,
    users_through_views,
)
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import PARTITIONS, Memory
from neuron_mlir.runtime.program import row_major_strides

# The ScalarE functions a chain applies as the hidden features leave PSUM.
ACTIVATIONS = ("gelu", "gelu_apprx_tanh", "relu", "sigmoid", "tanh")
# Hidden features per load of W1: [128, K1 / 128, 512] takes 1 KiB runs of each row (512 bf16), which DMA moves
# near its full rate, and feeds four 128-feature PSUM tiles.
FEATURES_PER_LOAD = 512

# Ops a row tile or a panel step may be computed with (no effects but reads; none with regions).
_CLONABLE: tuple[type[Operation], ...] = (
    tile.LoadOp,
    *tile.ELEMENTWISE_OPS,
    tile.ReduceOp,
    tile.ExtractOp,
    tile.InsertOp,
    tile.TransposeOp,
    tile.EmptyOp,
    arith.AddiOp,
    arith.MuliOp,
    arith.SubiOp,
)


def _whole_load(value: SSAValue) -> tile.LoadOp | None:
    """The load a B tile comes from: its own, or, for a B loaded in pieces into an empty tile (a resident B:
    convert-torch-to-tile's matmul, in pieces of K tiles and columns), the first piece's, when the pieces load
    windows of one view at their own place in the tile and cover all of it once."""
    owner = value.owner
    if isinstance(owner, tile.LoadOp):
        return owner
    pieces: list[tuple[int, int, tile.LoadOp]] = []
    while isinstance(owner, tile.InsertOp):
        piece = owner.value.owner
        offsets = [integer_constant(index) for index in owner.indices]
        if owner.steps is not None or owner.window is not None or not isinstance(piece, tile.LoadOp):
            return None
        if len(offsets) != 2:
            return None
        if offsets[0] is None or offsets[1] is None:
            return None
        pieces.append((offsets[0], offsets[1], piece))
        owner = owner.dest.owner
    if not isinstance(owner, tile.EmptyOp) or not pieces:
        return None
    pieces.reverse()
    first = pieces[0][2]
    _, tiles, columns = tile_type_of(value).get_shape()
    covered: set[tuple[int, int]] = set()
    for t0, c0, piece in pieces:
        indices = [integer_constant(index) for index in piece.indices]
        if piece.source is not first.source or piece.dims != first.dims or indices != [t0, 0, c0]:
            return None
        _, piece_tiles, piece_columns = tile_type_of(piece.result).get_shape()
        cells = {(t, c) for t in range(t0, t0 + piece_tiles) for c in range(c0, c0 + piece_columns)}
        if cells & covered:
            return None
        covered |= cells
    if len(covered) != tiles * columns or max(covered) != (tiles - 1, columns - 1):
        return None
    return first


@dataclass
class _RowTemplate:
    """How the first matmul computes the x^T panel of one row tile of m rows: the row tile (its ops, the row
    index its loads use), and the panel loop's step for it (a transpose, then the evacuation)."""

    rows: int
    row_value: SSAValue  # [m, K1]
    row_index: Rows  # the row index of the loads the row tile is computed from
    row_ops: list[Operation]  # in block order
    loop: scf.ForOp  # the panel loop
    position: int  # which of the loop's results
    step_ops: list[Operation]  # the loop body's ops computing that result, in order


# The indices that pick a row tile: the row index, after the batch indices of rows viewed as [B..., M, K].
Rows = tuple[SSAValue, ...]


def same_rows(first: Sequence[SSAValue], second: Sequence[SSAValue]) -> bool:
    """Whether two row indices are the same values."""
    return len(first) == len(second) and all(a is b for a, b in zip(first, second, strict=True))


@dataclass
class Panel:
    """One panel loop of the second matmul: its rows (index, size) per result, and the row loads it transposes.
    Rows shorter than one K tile have no panel loop (`loop` is None): only their partial K tiles, transposed on
    their own, in one block."""

    loop: scf.ForOp | None
    subs: list[tuple[Rows, int]]
    loads: list[tile.LoadOp]
    # per sub, the partial last K tile when K is not a multiple of 128: its [m, K % 128] load, and the SBUF tile
    # its transpose was evacuated to (what the matmul reads)
    rests: list[tuple[tile.LoadOp, SSAValue] | None]

    @property
    def start(self) -> Operation:
        """The first op of the panel's work: its loop, or its first partial tile's load."""
        if self.loop is not None:
            return self.loop
        first = self.rests[0]
        assert first is not None
        return first[0]

    @property
    def panel_loop(self) -> scf.ForOp:
        """The panel loop of a panel with full K tiles (chains have no other)."""
        assert self.loop is not None
        return self.loop


@dataclass
class _Chain:
    hidden: SSAValue  # H
    stores: list[tile.StoreOp]
    panels: list[Panel]
    templates: dict[int, _RowTemplate]  # by the row tile's height
    block_rows: list[list[_RowTemplate]]  # the templates of each of the first matmul's panel loops, in order
    weights: tuple[SSAValue, Layout]  # W1's storage and its [K1 tiles, 128, N1] layout
    weights_element: Attribute  # the element type the first matmul reads W1 in (its loads may round it)
    bias: tuple[SSAValue, int, int] | None  # b1's storage, stride and offset
    fn: str
    activation: Operation
    matmul: Operation
    k1_tiles: int
    features: int  # N1
    element_type: Attribute  # the panel's: H's, or what its loads round H's rows to
    first: Operation  # the first top-level op holding a store of H


def panel_element_type(hidden: SSAValue, loads: list[tile.LoadOp]) -> Attribute | None:
    """The element type the panel built from `hidden`'s rows holds: the type its loads read, which is `hidden`'s
    own, or bf16 when the loads round fp32 rows (auto-cast operands: rounding the fp32 rows computed on chip is the
    same rounding); None when the loads disagree or convert otherwise."""
    stored = hidden.type.element_type  # type: ignore[attr-defined]
    loaded = {load.tile_type().element_type for load in loads}
    if loaded == {stored}:
        return stored
    if len(loaded) == 1 and stored == f32:
        return loaded.pop()
    return None


def read_as_matmul_rows(
    value: SSAValue, block: Block, accepts_columns: Callable[[int], bool], batched: bool = False
) -> tuple[int, list[tile.StoreOp], list[tile.LoadOp], list[Panel]] | None:
    """How a matrix allocated in `block` is written whole and read only as whole rows by matmuls' panel loops:
    (its columns, the stores, the loads, the panels), or None. A fusion that moves the matrix's rows into those
    panels (a chain's hidden layer, a prologue's normalised rows) starts from this; `accepts_columns` is its own
    rule on the row width. With `batched`, the matrix may be seen as [B..., M, K] rows (one row-major layout for
    every store and load: a size bucket's token rows split back into batches), its row tiles then picked by
    batch and row indices."""
    if not isinstance(value.owner, memref.AllocOp) or value.owner.parent_block() is not block:
        return None
    loads_all = [user for user, _ in users_through_views(value) if isinstance(user, tile.LoadOp)]
    if not loads_all:
        return None
    total = memref_layout(value).num_elements
    columns = memref_layout(loads_all[0].source).shape[-1]
    if not accepts_columns(columns) or total % columns:
        return None
    users = hidden_users(value, total // columns, columns, batched)
    if users is None:
        return None
    stores, loads = users
    panels = panels_of(loads, columns)
    if panels is None:
        return None
    return columns, stores, loads, panels


def hidden_users(
    hidden: SSAValue, rows: int, columns: int, batched: bool = False
) -> tuple[list[tile.StoreOp], list[tile.LoadOp]] | None:
    """The stores and loads of `hidden` ([rows, columns], row-major; with `batched`, seen through one row-major
    [B..., M, columns] layout by all of them, dimensions of one element aside, so that the same row indices pick
    the same rows), or None."""
    stores: list[tile.StoreOp] = []
    loads: list[tile.LoadOp] = []
    shapes = set()
    for user, view in users_through_views(hidden):
        layout = memref_layout(view)
        shapes.add(tuple(extent for extent in layout.shape[:-1] if extent != 1))
        if len(layout.shape) < 2 or layout.shape[-1] != columns or math.prod(layout.shape) != rows * columns:
            return None
        if layout.strides != row_major_strides(layout.shape) or layout.offset:
            return None
        if isinstance(user, tile.StoreOp) and user.dest is view and user.dims is None:
            stores.append(user)
        elif isinstance(user, tile.LoadOp) and user.dims is None:
            loads.append(user)
        else:
            return None
    matrix = (rows,) if rows != 1 else ()  # [rows, columns], a single row's dimension left out as above
    if shapes != {matrix} and (not batched or len(shapes) != 1):
        return None
    return (stores, loads) if stores and loads else None


def _function_block(op: Operation) -> Block:
    while not isinstance(op.parent_op(), func.FuncOp):
        parent = op.parent_op()
        assert parent is not None
        op = parent
    block = op.parent_block()
    assert block is not None
    return block


def _at_top(value: SSAValue, top: Block) -> bool:
    """Whether `value` is a function argument or defined in the function body (so usable anywhere after it)."""
    owner = value.owner
    return owner is top if isinstance(owner, Block) else owner.parent_block() is top


def _panel_step(loop: scf.ForOp, position: int) -> tuple[SSAValue, list[Operation]] | None:
    """(the row tile, the body's ops computing result `position`) of a panel loop: each step inserts the evacuated
    transpose of the row tile's 128 columns of step t at [t, 0] of the carried panel."""
    body = loop.body.block
    top = _function_block(loop)
    yielded = body.last_op
    assert isinstance(yielded, scf.YieldOp)
    carried, iv = body.args[position + 1], body.args[0]
    insert = yielded.operands[position].owner
    if not isinstance(insert, tile.InsertOp) or insert.dest is not carried or insert.parent_block() is not body:
        return None
    if insert.window is not None:
        return None
    if len(insert.indices) != 2 or insert.indices[0] is not iv or integer_constant(insert.indices[1]) != 0:
        return None
    ops: list[Operation] = [insert]
    pending: list[SSAValue] = [insert.value, *insert.indices[1:]]
    row: SSAValue | None = None
    seen: set[SSAValue] = set()
    while pending:
        value = pending.pop()
        if value in seen or value is iv:
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, Block) or owner.parent_block() is not body:
            if not _at_top(value, top):  # another carried value, or a value of the enclosing nest
                return None
            continue
        if isinstance(owner, tile.TransposeOp):
            extract = owner.input.owner
            if not isinstance(extract, tile.ExtractOp) or extract.parent_block() is not body or row is not None:
                return None
            row = extract.source
            if _is_nested(row, body):
                return None
            ops.extend((owner, extract))
            pending.extend(extract.indices)
            continue
        if not isinstance(owner, _CLONABLE) or isinstance(owner, tile.LoadOp | tile.TransposeOp):
            return None
        ops.append(owner)
        pending.extend(owner.operands)
    if row is None:
        return None
    order = {op: index for index, op in enumerate(body.ops)}
    return row, sorted(set(ops), key=lambda op: order[op])


def row_computation(row: SSAValue, block: Block) -> tuple[list[Operation], Rows] | None:
    """The ops computing row tile `row` in `block` and the one row index their loads use (`row_indices`: the
    others are constants); None when the tile depends on anything else of its loop nest."""
    top = _function_block(_defining_op(row))
    ops: list[Operation] = []
    index: Rows | None = None
    pending = [row]
    seen: set[SSAValue] = set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, Block) or owner.parent_block() is not block:
            if not _at_top(value, top):
                return None
            continue
        if isinstance(owner, arith.ConstantOp):
            continue
        if not isinstance(owner, _CLONABLE) or isinstance(owner, tile.EmptyOp | tile.InsertOp | tile.TransposeOp):
            return None
        if owner in ops:
            continue
        ops.append(owner)
        if isinstance(owner, tile.LoadOp):
            if len(owner.indices) < 2 or not _at_top(owner.source, top):
                return None
            rows = row_indices(owner)
            if index is not None and not same_rows(rows, index):
                return None
            index = rows
            positions = row_positions(owner)
            others = [at for dim, at in enumerate(owner.indices) if dim not in positions]
            if any(integer_constant(other) is None for other in others):
                return None
            continue
        pending.extend(owner.operands)
    if index is None:
        return None
    order = {op: position for position, op in enumerate(block.ops)}
    return sorted(ops, key=lambda op: order[op]), index


def _defining_op(value: SSAValue) -> Operation:
    owner = value.owner
    assert isinstance(owner, Operation)
    return owner


def _is_nested(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined in `block` or a region nested in it."""
    owner = value.owner
    current: Block | None = owner if isinstance(owner, Block) else owner.parent_block()
    while current is not None:
        if current is block:
            return True
        parent = current.parent_op()
        current = None if parent is None else parent.parent_block()
    return False


def _matmuls(value: SSAValue, stop: SSAValue | None = None) -> list[tile.MatmulOp] | None:
    """The matmuls accumulating into `value` (through the loops carrying it) back to `stop` (or the first)."""
    matmuls: list[tile.MatmulOp] = []
    current: SSAValue | None = value
    while current is not stop:
        if current is None:
            return None
        owner = current.owner
        if isinstance(owner, scf.ForOp):
            index = [result for result in owner.results].index(current)  # type: ignore[arg-type]
            yielded = owner.body.block.last_op
            assert yielded is not None
            inner = _matmuls(yielded.operands[index], owner.body.block.args[index + 1])
            if inner is None:
                return None
            matmuls.extend(inner)
            current = owner.iter_args[index]
            continue
        if not isinstance(owner, tile.MatmulOp):
            return None
        matmuls.append(owner)
        current = owner.acc
    return matmuls


def _accumulation(value: SSAValue) -> tuple[list[tile.MatmulOp], tile.LoadOp | None, bool] | None:
    """The matmuls of an evacuated accumulation, the bias tile an add joins to it, and whether the matmuls ran
    with their roles swapped (rows a 128-row tile leaves over: the accumulation copied out of PSUM and
    transposed back to rows, convert-torch-to-tile's `_Kernel.swapped`)."""
    bias: tile.LoadOp | None = None
    if isinstance(value.owner, tile.BinaryOp) and value.owner.op.data == "add":
        lhs, rhs = value.owner.lhs, value.owner.rhs
        psum, other = (lhs, rhs) if tile_type_of(lhs).memory is Memory.PSUM else (rhs, lhs)
        if not isinstance(other.owner, tile.LoadOp):
            return None
        bias, value = other.owner, psum
    if tile_type_of(value).memory is not Memory.PSUM:
        return None
    swapped = isinstance(value.owner, tile.TransposeOp)
    if isinstance(value.owner, tile.TransposeOp):
        copy = value.owner.input.owner
        if not isinstance(copy, tile.CopyOp) or tile_type_of(copy.input).memory is not Memory.PSUM:
            return None
        value = copy.input
    matmuls = _matmuls(value)
    return None if matmuls is None else (matmuls, bias, swapped)


def _epilogue(value: SSAValue) -> tuple[tile.UnaryOp, SSAValue] | None:
    """The activation of a stored value (copies around it) and the value it is applied to."""
    while isinstance(value.owner, tile.CopyOp):
        value = value.owner.input
    activation = value.owner
    if not isinstance(activation, tile.UnaryOp) or activation.fn.data not in ACTIVATIONS:
        return None
    if activation.bias is not None or activation.scale is not None or activation.bias_value is not None:
        return None
    if activation.alpha is not None:
        return None
    value = activation.input
    while isinstance(value.owner, tile.CopyOp):
        value = value.owner.input
    return activation, value


def _ones(value: SSAValue) -> bool:
    owner = value.owner
    if isinstance(owner, tile.ExtractOp):
        owner = owner.source.owner
    return isinstance(owner, tile.FillOp) and owner.value.value.data == 1.0


def _stationary_panel(value: SSAValue) -> tuple[scf.ForOp, int] | None:
    """The panel loop result a matmul's stationary operand is a [128, m] window of."""
    extract = value.owner
    if not isinstance(extract, tile.ExtractOp) or not isinstance(extract.source.owner, scf.ForOp):
        return None
    loop = extract.source.owner
    return loop, [result for result in loop.results].index(extract.source)  # type: ignore[arg-type]


def _chain(hidden: SSAValue, block: Block) -> _Chain | None:
    """The chain `hidden` is the middle of (module docstring), or None."""
    read = read_as_matmul_rows(hidden, block, lambda columns: columns > 0 and columns % PARTITIONS == 0)
    if read is None:
        return None
    columns, stores, loads, panels = read
    producing = [ancestor_in(store, block) for store in stores]
    loading = [ancestor_in(load, block) for load in loads]
    position = block_positions(block, producing + loading).__getitem__
    first, last = min(producing, key=position), max(producing, key=position)
    earliest_load = min(loading, key=position)
    if not last.is_before_in_block(earliest_load):
        return None
    templates: dict[int, _RowTemplate] = {}
    weights: tuple[SSAValue, Layout] | None = None
    weights_read: set[Attribute] = set()  # the element types W1's loads read it in (its own, or rounded)
    biases: set[tuple[SSAValue, int, int]] = set()
    fns: set[str] = set()
    activation: Operation | None = None
    matmul: Operation | None = None
    inputs: list[SSAValue] = []
    loops: dict[scf.ForOp, dict[int, _RowTemplate]] = {}
    found_templates: dict[tuple[scf.ForOp, int], _RowTemplate | None] = {}
    biased: set[bool] = set()  # whether each store's accumulation has the bias (all or none)
    for store in stores:
        epilogue = _epilogue(store.value)
        if epilogue is None:
            return None
        activation, accumulated = epilogue
        fns.add(activation.fn.data)
        found = _accumulation(accumulated)
        if found is None:
            return None
        matmuls, bias_add, swapped = found
        bias_terms = 0 if bias_add is None else 1
        if bias_add is not None:
            bias = _bias_of(bias_add.source)
            if bias is None:
                return None
            biases.add(bias)
        rows = tile_type_of(store.value).get_shape()[0]
        for product in matmuls:
            matmul = product
            # a swapped matmul has x^T (or the ones row) moving and W1's (or the bias row's) columns stationary
            stationary, moving = (
                (product.moving, product.stationary) if swapped else (product.stationary, product.moving)
            )
            if _ones(stationary):
                row_load = moving.owner
                if isinstance(row_load, tile.ExtractOp):  # a piece of the bias row (128 columns when swapped)
                    row_load = row_load.source.owner
                if not isinstance(row_load, tile.LoadOp):
                    return None
                bias = _bias_of(row_load.source)
                if bias is None:
                    return None
                biases.add(bias)
                bias_terms += 1
                continue
            panel = _stationary_panel(stationary)
            chunk = moving.owner
            if panel is None or not isinstance(chunk, tile.ExtractOp):
                return None
            chunk_load = _whole_load(chunk.source)
            if chunk_load is None:
                return None
            if chunk_load.dims is None or tuple(chunk_load.dims.get_values()) != (1, 0, 2):
                return None
            layout = memref_layout(chunk_load.source)
            if len(layout.shape) != 3 or layout.shape[1:] != (PARTITIONS, columns) or layout.strides[2] != 1:
                return None
            if layout.strides[0] != PARTITIONS * layout.strides[1]:
                return None
            candidate = (storage_root(chunk_load.source), layout)
            if weights is not None and weights != candidate:
                return None
            weights = candidate
            weights_read.add(chunk_load.tile_type().element_type)
            if panel not in found_templates:
                found_templates[panel] = _template(panel[0], panel[1], block)
            template = found_templates[panel]
            if template is None or template.rows != rows or not same_rows(template.row_index, row_indices(store)):
                return None
            templates.setdefault(rows, template)
            row_templates = loops.setdefault(template.loop, {})
            row_templates.setdefault(template.position, template)
            inputs.extend(_row_storage(template))
        if bias_terms > 1:
            return None
        biased.add(bias_terms == 1)
    if len(biased) != 1 or weights is None or len(fns) != 1 or len(biases) > 1 or activation is None or matmul is None:
        return None
    k1_tiles = weights[1].shape[0]
    for template in templates.values():  # each panel holds all of K1
        if tile_type_of(template.row_value).get_shape() != (template.rows, k1_tiles * PARTITIONS):
            return None
        if integer_constant(template.loop.ub) != k1_tiles:
            return None
    if any(rows not in templates for panel in panels for _, rows in panel.subs):
        return None
    for storage in {*inputs, weights[0], *(bias[0] for bias in biases)}:
        if not unchanged_from(storage, first, block):
            return None
    (fn,) = fns
    bias_of = next(iter(biases)) if biases else None
    element = panel_element_type(hidden, loads)
    if element is None or len(weights_read) != 1:
        return None
    block_rows = [[found[p] for p in sorted(found)] for found in loops.values()]
    return _Chain(
        hidden,
        stores,
        panels,
        templates,
        block_rows,
        weights,
        weights_read.pop(),
        bias_of,
        fn,
        activation,
        matmul,
        k1_tiles,
        columns,
        element,
        first,
    )


def _row_storage(template: _RowTemplate) -> list[SSAValue]:
    return [storage_root(op.source) for op in template.row_ops if isinstance(op, tile.LoadOp)]


def _bias_of(source: SSAValue) -> tuple[SSAValue, int, int] | None:
    """b1 (storage, stride, offset) behind a broadcast view of it (rows at stride 0)."""
    layout = memref_layout(source)
    if len(layout.shape) != 2 or layout.strides[0] != 0:
        return None
    return storage_root(source), layout.strides[1], layout.offset


def _template(loop: scf.ForOp, position: int, block: Block) -> _RowTemplate | None:
    step = _panel_step(loop, position)
    if step is None:
        return None
    row, step_ops = step
    init = loop.iter_args[position]
    if not isinstance(init.owner, tile.EmptyOp) or integer_constant(loop.lb) != 0 or integer_constant(loop.step) != 1:
        return None
    loop_block = loop.parent_block()
    assert loop_block is not None
    found = row_computation(row, loop_block)
    if found is None:
        return None
    row_ops, index = found
    rows = tile_type_of(row).get_shape()[0]
    return _RowTemplate(rows, row, index, row_ops, loop, position, step_ops)


def _rest_tile(load: tile.LoadOp) -> SSAValue | None:
    """The evacuated transpose of a partial last K tile's rows: load -> transpose -> copy to SBUF, nothing else."""
    uses = list(load.result.uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, tile.TransposeOp):
        return None
    transposed = uses[0].operation.result
    copies = [use.operation for use in transposed.uses]
    if len(copies) != 1 or not isinstance(copies[0], tile.CopyOp):
        return None
    if copies[0].parent_block() is not load.parent_block():
        return None
    return copies[0].result


def panels_of(loads: list[tile.LoadOp], columns: int) -> list[Panel] | None:
    """The panel loops of the matmuls reading whole rows of A [M, `columns`] (all of `loads`): each transposes
    rows [m, full K tiles] into its panel, and the partial last K tile, if any, is transposed on its own. Rows
    shorter than one K tile have only partial tiles: panels without a loop (`Panel.loop` None)."""
    full = columns - columns % PARTITIONS
    by_loop: dict[scf.ForOp, dict[int, tile.LoadOp]] = {}
    rests: list[tuple[tile.LoadOp, SSAValue]] = []
    for load in loads:
        shape = tile_type_of(load.result).get_shape()
        if len(load.indices) < 2 or load.dims is not None:
            return None
        if columns % PARTITIONS and shape[1] == columns % PARTITIONS and integer_constant(load.indices[-1]) == full:
            rest = _rest_tile(load)
            if rest is None:
                return None
            rests.append((load, rest))
            continue
        if shape[1] != full or integer_constant(load.indices[-1]) != 0:
            return None
        extracts = [use.operation for use in load.result.uses]
        loops = {extract.parent_op() for extract in extracts}
        if len(loops) != 1 or not all(isinstance(e, tile.ExtractOp) for e in extracts):
            return None
        (loop,) = loops
        if not isinstance(loop, scf.ForOp) or loop.parent_block() is not load.parent_block():
            return None
        for position in range(len(loop.results)):
            step = _panel_step(loop, position)
            if step is not None and step[0] is load.result:
                by_loop.setdefault(loop, {})[position] = load
                break
        else:
            return None
    if not full:  # no panel loop: the partial tiles alone, grouped by block
        return _loopless_panels(rests) or None
    panels = []
    for loop, positions in by_loop.items():
        if sorted(positions) != list(range(len(loop.results))):
            return None
        if (
            integer_constant(loop.lb) != 0
            or integer_constant(loop.ub) != full // PARTITIONS
            or integer_constant(loop.step) != 1
        ):
            return None
        ordered = [positions[p] for p in range(len(loop.results))]
        subs = [(row_indices(load), tile_type_of(load.result).get_shape()[0]) for load in ordered]
        panels.append(Panel(loop, subs, ordered, [None] * len(subs)))
    for load, rest in rests:  # each with the panel of the same rows, in the same block
        matches = [
            (panel, position)
            for panel in panels
            for position, (index, rows) in enumerate(panel.subs)
            if same_rows(index, row_indices(load))
            and rows == tile_type_of(load.result).get_shape()[0]
            and panel.panel_loop.parent_block() is load.parent_block()
            and panel.rests[position] is None
        ]
        if not matches:
            return None
        panel, position = matches[0]
        panel.rests[position] = (load, rest)
    if columns % PARTITIONS and any(rest is None for panel in panels for rest in panel.rests):
        return None
    return panels


def _loopless_panels(rests: list[tuple[tile.LoadOp, SSAValue]]) -> list[Panel]:
    """Panels of rows shorter than one K tile: the partial tiles' loads of one block, in order, as long as each
    one's row index is defined before the first of them (where the panel's rows are computed)."""
    panels: list[Panel] = []
    for load, rest in sorted(rests, key=lambda entry: _position(entry[0])):
        row = row_indices(load)
        first = panels[-1].start if panels else None
        if (
            first is None
            or first.parent_block() is not load.parent_block()
            or not all(_defined_before(index, first) for index in row)
        ):
            panels.append(Panel(None, [], [], []))
        panels[-1].subs.append((row, tile_type_of(load.result).get_shape()[0]))
        panels[-1].rests.append((load, rest))
    return panels


def _position(op: Operation) -> tuple[int, ...]:
    """`op`'s place in program order: its index in each block from the function's body down."""
    path: list[int] = []
    while not isinstance(op, func.FuncOp):
        block = parent_block(op)
        path.append(block.get_operation_index(op))
        parent = block.parent_op()
        assert parent is not None
        op = parent
    return tuple(reversed(path))


def _defined_before(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is usable at `op`: an argument of a block holding it, or a result of an op before it in a
    block holding it."""
    owner = value.owner
    block = owner if isinstance(owner, Block) else owner.parent_block()
    current: Operation | None = op
    while current is not None:
        if current.parent_block() is block:
            return isinstance(owner, Block) or owner.is_before_in_block(current)
        current = current.parent_op()
    return False


def _x_transposed(chain: _Chain, em: LoopNestBuilder, subs: list[tuple[Rows, int]]) -> list[SSAValue]:
    """x^T ([128, K1 tiles, m] per sub) of the rows `subs`: each sub's row tile computed by its template's ops,
    every tile's op i before any tile's op i + 1, then one loop of their transposes."""
    templates = _templates_for(chain, subs)
    mappings: list[dict[SSAValue, SSAValue]] = [{} for _ in subs]
    for position, op in _row_order(templates):
        mapping = mappings[position]
        if isinstance(op, tile.LoadOp):  # the same load of the sub's rows: only the row index changes
            clone_load_at_row(op, subs[position][0], em, mapping)
            continue
        clone_ops([op], em, mapping)
    rows = [mapping[template.row_value] for mapping, template in zip(mappings, templates, strict=True)]
    empties: list[SSAValue] = [
        em.insert(tile.EmptyOp(TileType((PARTITIONS, chain.k1_tiles, m), tile_type_of(row).element_type))).result
        for row, (_, m) in zip(rows, subs, strict=True)
    ]

    def step(e: LoopNestBuilder, t: Index, panels: list[SSAValue]) -> list[SSAValue]:
        updated = []
        for template, row, panel in zip(templates, rows, panels, strict=True):
            body = template.loop.body.block
            mapping = {body.args[0]: e.index(t), body.args[template.position + 1]: panel, template.row_value: row}
            clone_ops(template.step_ops, e, mapping)
            yielded = body.last_op
            assert yielded is not None
            updated.append(mapping[yielded.operands[template.position]])
        return updated

    return carry(em, 0, chain.k1_tiles, 1, empties, step, always_loop=True)


def _templates_for(chain: _Chain, subs: list[tuple[Rows, int]]) -> list[_RowTemplate]:
    """The row templates of `subs`: a panel loop of the first matmul with the same rows per tile when there is one
    (its tiles then keep their order of ops), else any template of each tile's height."""
    sizes = [rows for _, rows in subs]
    for templates in chain.block_rows:
        if [template.rows for template in templates] == sizes:
            return templates
    return [chain.templates[rows] for rows in sizes]


def _row_order(templates: list[_RowTemplate]) -> list[tuple[int, Operation]]:
    """(sub, op) of the row tiles' ops in the order to clone them: their own order when they share a block (one
    panel loop's tiles), else op i of every tile before op i + 1 of any."""
    blocks = {id(_defining_op(template.row_value).parent_block()) for template in templates}
    if len(blocks) == 1 and len({id(template) for template in templates}) == len(templates):
        block = _defining_op(templates[0].row_value).parent_block()
        assert block is not None
        order = {op: index for index, op in enumerate(block.ops)}
        pairs = [(position, op) for position, template in enumerate(templates) for op in template.row_ops]
        return sorted(pairs, key=lambda pair: order[pair[1]])
    interleaved = zip_longest(*(template.row_ops for template in templates))
    return [(position, op) for ops in interleaved for position, op in enumerate(ops) if op is not None]


def _build_panel(
    chain: _Chain, em: LoopNestBuilder, subs: list[tuple[Rows, int]], weights: SSAValue, biases: SSAValue | None
) -> list[SSAValue]:
    """The second matmul's panel of rows `subs`: act(x @ W1 + b1)^T, 128 hidden features at a time."""
    x_t = _x_transposed(chain, em.located(chain.matmul.location), subs)
    k1_tiles, tiles = chain.k1_tiles, chain.features // PARTITIONS
    per_load = FEATURES_PER_LOAD // PARTITIONS
    out_type = chain.element_type
    empty: list[SSAValue] = [
        em.insert(tile.EmptyOp(TileType((PARTITIONS, tiles, m), out_type, Memory.SBUF))).result for _, m in subs
    ]

    def feature(e: LoopNestBuilder, w: SSAValue, first: Index, j: Index, carried: list[SSAValue]) -> list[SSAValue]:
        """Hidden-feature tile first + j of every sub: the K1 products of each sub into a PSUM tile, one sub at a
        time (one accumulator live per product, evacuated by its activation while the next sub's products run),
        each activation written into the sub's panel."""
        e = e.located(chain.matmul.location)
        t = e.add(first, j)
        offset = e.mul(j, PARTITIONS)
        column = None
        if biases is not None:
            column_type = TileType((PARTITIONS, 1), tile_type_of(biases).element_type, Memory.SBUF)
            column = e.insert(tile.ExtractOp(biases, [e.index(t)], column_type)).result
        act = e.located(chain.activation.location)
        panels = list(carried)
        for s, (part, (_, m)) in enumerate(zip(x_t, subs, strict=True)):

            def product(
                inner: LoopNestBuilder, k: Index, accs: list[SSAValue] | None, part: SSAValue = part, m: int = m
            ) -> list[SSAValue]:
                stationary = window(inner, w, [k, offset], (PARTITIONS, PARTITIONS))
                moving = window(inner, part, [k, 0], (PARTITIONS, m))
                psum = TileType((PARTITIONS, m), f32, Memory.PSUM)
                acc = None if accs is None else accs[0]
                return [inner.insert(tile.MatmulOp(stationary, moving, psum, acc)).result]

            [acc] = carry(e, 1, k1_tiles, 1, product(e, 0, None), product, always_loop=True)
            value_type = TileType((PARTITIONS, m), out_type, Memory.SBUF)
            value = act.insert(tile.UnaryOp(acc, chain.fn, value_type, bias=column)).result
            panels[s] = act.insert(tile.InsertOp(value, panels[s], [act.index(t), act.index(0)])).result
        return panels

    def load_weights(e: LoopNestBuilder, first: Index, count: int) -> SSAValue:
        """W1's columns of hidden-feature tiles [first, first + count): [128, K1 tiles, count * 128]."""
        e = e.located(chain.matmul.location)
        tile_type = TileType((PARTITIONS, k1_tiles, count * PARTITIONS), chain.weights_element, Memory.SBUF)
        indices = [e.index(0), e.index(0), e.index(e.mul(first, PARTITIONS))]
        return e.insert(tile.LoadOp(weights, indices, tile_type, (1, 0, 2))).result

    def features(e: LoopNestBuilder, w: SSAValue, first: Index, count: int, panels: list[SSAValue]) -> list[SSAValue]:
        return carry(e, 0, count, 1, panels, lambda e2, j, p: feature(e2, w, first, j, p), always_loop=True)

    def pair(e: LoopNestBuilder, first: Index, panels: list[SSAValue]) -> list[SSAValue]:
        # both loads first: the next pair's first load overlaps this pair's second half
        second = e.add(first, per_load)
        w_first, w_second = load_weights(e, first, per_load), load_weights(e, second, per_load)
        panels = features(e, w_first, first, per_load, panels)
        return features(e, w_second, second, per_load, panels)

    full_loads, last = divmod(tiles, per_load)
    pairs, odd = divmod(full_loads, 2)
    panels = carry(em, 0, pairs * 2 * per_load, 2 * per_load, empty, pair, always_loop=True)
    for first, count in ((pairs * 2 * per_load, per_load if odd else 0), (full_loads * per_load, last)):
        if count:
            panels = features(em, load_weights(em, first, count), first, count, panels)
    return panels


def _fuse(chain: _Chain, block: Block, constants: dict[int, SSAValue]) -> None:
    """Build each of the second matmul's panels from the first matmul's inputs; erase H's stores and loads."""
    starts = [ancestor_in(panel.panel_loop, block) for panel in chain.panels]
    start = min(starts, key=block_positions(block, starts).__getitem__)
    top = LoopNestBuilder(block, start, chain.matmul.location, constants, block)
    storage, layout = chain.weights
    weights_type = tile.hbm_type(layout.shape, storage.type.element_type, layout.strides, layout.offset)  # type: ignore[attr-defined]
    weights = storage if weights_type == storage.type else top.insert(tile.ViewOp(storage, weights_type)).result
    biases = None
    if chain.bias is not None:
        bias_storage, stride, offset = chain.bias
        tiles = chain.features // PARTITIONS
        bias_layout = Layout((PARTITIONS, tiles), (stride, PARTITIONS * stride), offset)
        element = bias_storage.type.element_type  # type: ignore[attr-defined]
        columns_type = tile.hbm_type(bias_layout.shape, element, bias_layout.strides, bias_layout.offset)
        columns = top.insert(tile.ViewOp(bias_storage, columns_type)).result
        biases = top.insert(
            tile.LoadOp(columns, [top.index(0), top.index(0)], TileType((PARTITIONS, tiles), element, Memory.SBUF))
        ).result
    for panel in chain.panels:
        # in place of the panel loop: the row indices are defined by then
        loop = panel.panel_loop
        em = LoopNestBuilder(parent_block(loop), loop, chain.matmul.location, constants, block)
        built = _build_panel(chain, em, panel.subs, weights, biases)
        for old, new in zip(loop.results, built, strict=True):
            old.replace_all_uses_with(new)
    erase_stores(chain.stores, [panel.panel_loop for panel in chain.panels] + [_defining_op(chain.hidden)])


def index_constants(block: Block) -> dict[int, SSAValue]:
    """The index constants at the top of a function body, by value, for loop nest builders to share."""
    constants: dict[int, SSAValue] = {}
    for op in block.ops:
        if isinstance(op, arith.ConstantOp) and isinstance(op.result.type, IndexType):
            value = integer_constant(op.result)
            if value is not None:
                constants.setdefault(value, op.result)
    return constants


def fuse_matmul_chains(function: func.FuncOp) -> int:
    """Compute every chain's hidden activations in its second matmul's panels (module docstring); the count."""
    constants = index_constants(function.body.block)
    return fuse_at_allocations(function, _chain, lambda chain, block: _fuse(chain, block, constants))


@dataclass(frozen=True)
class TileFuseMatmulChainsPass(ModulePass):
    name = "tile-fuse-matmul-chains"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            fuse_matmul_chains(function)
