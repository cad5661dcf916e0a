"""convert-tile-to-neuron: tile values become on-chip buffers, tile ops become engine instructions.

Input contract: the output of convert-torch-to-tile: functions over HBM memrefs whose bodies hold
`memref.alloc`, `tile` ops, `scf.for` (tile values may be loop-carried) and index `arith`.

Output guarantee: no tile op, tile type or loop-carried value remains. Every tile value lives in a
`neuron.alloc`ed SBUF or PSUM buffer of the tile's shape, allocated where the value was defined; HBM tensors are
`neuron.alloc`s in HBM; views are folded into the DMA access patterns that read and write through them (a view
that leaves the function becomes a `neuron.view`). Each tile op becomes one instruction on the engine the
hardware would use: loads and stores are `dma_copy`s spread round-robin over the DMA queues (a 2-D load whose
partitions walk the tensor's contiguous dimension, of 2-byte elements it does not convert, is a `dma_transpose`
on targets whose DMAs transpose, where a copy would move one element per descriptor; a `tile.load_transpose`
always is, its source walking the row dims, then the column dims the partitions receive), matmuls are
`nc_matmul`s on TensorE that accumulate in place into their accumulator's PSUM buffer, activations run on
ScalarE, elementwise arithmetic, copies, selects, fills and reductions on VectorE, except that integer
arithmetic (exact 32-bit), `power`, iotas and kernel functions run on GpSimdE; collectives run on the collective
queue, one instruction each on the whole HBM tensors; a `tile.nki_kernel` is replaced by the kernel's traced
instructions, which read and write the call's HBM tensors in place. A `tile.extract` window is no
instruction: matmuls, transposes, inserts and the per-partition columns of a `tile.binary_scalar` (its scalar)
and a `tile.unary` (its bias) read it in place through an access pattern (at a dynamic offset when its indices
are loop values), other users get a copy. A `tile.insert` is a copy into the window of its
destination's buffer (in place when nothing else reads the destination), on VectorE or ScalarE, alternating
between destinations so that evacuations into different tiles overlap; a load whose only use is such an insert
(same element type, same block, a destination that exists when the load runs) is a DMA into that window, so one
tile can be filled by several transfers, each of which only waits for, and is only waited on by, its own bytes,
unless the window's rows would make that DMA's chunks overhead-bound where the whole tile's are not (a band's
short rows between border columns): then the tile is loaded into a buffer of its own and the insert copies it.
Loop-carried tiles stay in the buffer of their initial value: ops that update them write in place, otherwise the
body copies the new value back before the next iteration. Locations are kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, memref, scf
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    LocationAttr,
    MemRefType,
    ModuleOp,
    NameLoc,
    StringAttr,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects import memory as mem
from neuron_mlir.ir.dialects import neuron, tile
from neuron_mlir.ir.dialects.neuron import AccessPatternAttr, InstructionOp
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.kernel_calls import traced_kernel
from neuron_mlir.ir.locations import OpDiagnostic, at_source
from neuron_mlir.ir.semantics.tile import is_integer_op
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import Engine, Memory, Target
from neuron_mlir.runtime.profile import KERNEL_LOCATION_PREFIX
from neuron_mlir.runtime.program import row_major_strides

Access = tuple[SSAValue, AccessPatternAttr, SSAValue | None]


def _diagnostic(op: Operation, reason: str) -> PassFailedException:
    return OpDiagnostic(f"{op.name}: {reason}{at_source(op)}", op)


def full_access(buffer: SSAValue) -> Access:
    """The whole of an on-chip buffer: all its partitions, its free dims row-major."""
    memref_type = buffer.type
    assert isinstance(memref_type, MemRefType)
    shape = memref_type.get_shape()
    free = shape[1:]
    strides = row_major_strides(free)
    return buffer, neuron.access_pattern(list(zip(strides, free, strict=True)), 0, 0, shape[0]), None


@dataclass
class _FunctionConversion:
    function: func.FuncOp
    target: Target
    constants: dict[int, SSAValue] = field(default_factory=dict)
    buffers: dict[SSAValue, SSAValue] = field(default_factory=dict)  # tile value -> on-chip buffer
    roots: dict[SSAValue, SSAValue] = field(default_factory=dict)  # HBM memref -> the buffer underneath
    next_queue: int = 0
    replaced: list[Operation] = field(default_factory=list)
    identities: dict[Attribute, SSAValue] = field(default_factory=dict)  # element type -> identity matrix
    windows: dict[SSAValue, Access] = field(default_factory=dict)  # tile.extract result -> access read in place
    insert_engines: dict[SSAValue, Engine] = field(default_factory=dict)  # tile.insert destination -> engine
    loaded_in_place: set[Operation] = field(default_factory=set)  # tile.inserts whose value was a DMA into the window

    @property
    def entry(self) -> Block:
        return self.function.body.block

    def emitter(self, op: Operation) -> LoopNestBuilder:
        block = op.parent_block()
        assert block is not None
        return LoopNestBuilder(block, op, op.location, self.constants, self.entry)

    # ---- values ----------------------------------------------------------------------------------------------

    def buffer(self, value: SSAValue) -> SSAValue:
        if value not in self.buffers:
            user = next(iter(value.uses)).operation if value.uses else self.function
            name = f"%{value.name_hint} " if value.name_hint else ""
            raise _diagnostic(user, f"tile operand {name}is not produced by a tile op in this function")
        return self.buffers[value]

    def access(self, value: SSAValue) -> Access:
        """Where an instruction reads the tile `value`: a window of a larger buffer, or its own whole buffer."""
        window = self.windows.get(value)
        return window if window is not None else full_access(self.buffer(value))

    def root(self, value: SSAValue) -> SSAValue:
        return self.roots.get(value, value)

    def new_buffer(self, em: LoopNestBuilder, tile_type: TileType, hint: str | None) -> SSAValue:
        buffer_type = mem.buffer_type(tile_type.get_shape(), tile_type.element_type, tile_type.memory)
        return em.insert(neuron.AllocOp(buffer_type, name_hint=hint)).buffer

    def result_buffer(self, em: LoopNestBuilder, op: Operation, in_place: SSAValue | None = None) -> SSAValue:
        """The buffer of `op`'s result: `in_place` (an operand's buffer the op updates) or a new one."""
        result = op.results[0]
        if in_place is not None:
            self.buffers[result] = in_place
            return in_place
        assert isinstance(result.type, TileType)
        buffer = self.new_buffer(em, result.type, result.name_hint)
        self.buffers[result] = buffer
        return buffer

    def identity(self, element_type: Attribute, location: LocationAttr) -> SSAValue:
        """A [partitions, partitions] identity in SBUF (TensorE transposes multiply by it), built once per function.

        GpSimdE fills it at the top of the function: ones everywhere, then `affine_select` keeps the ones where
        partition - column == 0.
        """
        if element_type in self.identities:
            return self.identities[element_type]
        first = self.entry.first_op
        em = LoopNestBuilder(self.entry, first, location, self.constants, self.entry)
        size = self.target.partitions
        buffer_type = mem.buffer_type((size, size), element_type, Memory.SBUF)
        ones = em.insert(neuron.AllocOp(buffer_type, name_hint="ones")).buffer
        eye = em.insert(neuron.AllocOp(buffer_type, name_hint="identity")).buffer
        self.emit(em, neuron.MemsetOp, Engine.GPSIMD, {"dst": full_access(ones)}, {"value": FloatAttr(1.0, f64)})
        props: dict[str, Attribute] = {
            "cmp": StringAttr("is_equal"),
            "channel_multiplier": IntegerAttr(1, i64),
            "pattern": DenseArrayBase.from_list(i64, [-1, size]),
            "on_false_value": FloatAttr(0.0, f64),
        }
        accesses = {"dst": full_access(eye), "on_true": full_access(ones)}
        self.emit(em, neuron.AffineSelectOp, Engine.GPSIMD, accesses, props)
        self.identities[element_type] = eye
        return eye

    def queue(self) -> int:
        chosen = self.next_queue
        self.next_queue = (self.next_queue + 1) % self.target.dma_queues
        return chosen

    # ---- walking ---------------------------------------------------------------------------------------------

    def convert_block(self, block: Block) -> None:
        for op in list(block.ops):
            self.convert_op(op)

    def convert_op(self, op: Operation) -> None:
        if isinstance(op, scf.ForOp):
            self.convert_for(op)
            return
        if isinstance(op, memref.AllocOp):
            self.convert_hbm_alloc(op)
            return
        handler = _HANDLERS.get(type(op))
        if handler is not None:
            handler(self, op)
            self.replaced.append(op)
        elif op.dialect_name() == "tile":
            raise _diagnostic(op, "no lowering to neuron instructions yet")

    def convert_hbm_alloc(self, op: memref.AllocOp) -> None:
        memref_type = op.memref.type
        em = self.emitter(op)
        alloc = em.insert(neuron.AllocOp(memref_type, name_hint=op.memref.name_hint))
        op.memref.replace_all_uses_with(alloc.buffer)
        op.detach()
        op.erase()

    def convert_for(self, loop: scf.ForOp) -> None:
        body = loop.body.block
        carried = list(loop.iter_args)
        for block_arg, init in zip(body.args[1:], carried, strict=True):
            if not isinstance(init.type, TileType):
                raise _diagnostic(loop, f"loop-carried value of type {init.type} is not a tile")
            self.buffers[block_arg] = self.buffer(init)
        self.convert_block(body)
        terminator = body.last_op
        assert isinstance(terminator, scf.YieldOp)
        for block_arg, yielded in zip(body.args[1:], terminator.operands, strict=True):
            source, destination = self.buffer(yielded), self.buffer(block_arg)
            if source is not destination:
                em = self.emitter(terminator)
                self.emit(
                    em,
                    neuron.TensorCopyOp,
                    Engine.VECTOR,
                    {"dst": full_access(destination), "src": full_access(source)},
                )
        for result, init in zip(loop.results, carried, strict=True):
            self.buffers[result] = self.buffer(init)
        # rebuild the loop without iter_args: the carried tiles now live in buffers
        new_body = Block(arg_types=[IndexType()])
        new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, [], new_body)
        new_loop.location = loop.location
        body.args[0].replace_all_uses_with(new_body.args[0])
        for op in list(body.ops):
            op.detach()
            if isinstance(op, scf.YieldOp):
                op.erase(safe_erase=False)
                continue
            new_body.add_op(op)
        new_body.add_op(scf.YieldOp())
        parent = loop.parent_block()
        assert parent is not None
        parent.insert_op_before(new_loop, loop)
        self.replaced.append(loop)

    def emit(
        self,
        em: LoopNestBuilder,
        op_class: type[InstructionOp],
        engine: Engine,
        accesses: dict[str, Access],
        properties: dict[str, Attribute] | None = None,
    ) -> InstructionOp:
        props = dict(properties or {})
        if engine is Engine.DMA:
            props["queue"] = IntegerAttr(self.queue(), i64)
        return em.insert(op_class.build_instruction(engine, accesses, props))

    # ---- HBM accesses ----------------------------------------------------------------------------------------

    def hbm_access(
        self,
        em: LoopNestBuilder,
        tensor: SSAValue,
        indices: Sequence[SSAValue],
        dims: Sequence[int],
        shape: Sequence[int],
    ) -> Access:
        """The DMA side of a tile transfer: root buffer, offset of `indices`, one (stride, extent) per tile dim."""
        memref_type = tensor.type
        assert isinstance(memref_type, MemRefType)
        strides, offset = tile.memref_strides(memref_type)
        static = offset
        dynamic: Index = 0
        for index, stride in zip(indices, strides, strict=True):
            constant = _constant_index(index)
            if constant is not None:
                static += constant * stride
            else:
                dynamic = em.add(dynamic, em.mul(index, stride))
        pattern = [(strides[d], extent) for d, extent in zip(dims, shape, strict=True)]
        dynamic_value = em.index(dynamic) if isinstance(dynamic, SSAValue) else None
        if isinstance(dynamic, int):
            static += dynamic
        return self.root(tensor), neuron.access_pattern(pattern, static), dynamic_value


def _constant_index(value: SSAValue) -> int | None:
    from xdsl.dialects import arith

    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


# ---- one handler per tile op ---------------------------------------------------------------------------------


def _view(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.ViewOp)
    conv.roots[op.result] = conv.root(op.source)
    escaping = [use.operation for use in op.result.uses if isinstance(use.operation, func.ReturnOp)]
    if escaping:
        em = conv.emitter(op)
        result_type = op.result.type
        assert isinstance(result_type, MemRefType)
        neuron_view = em.insert(neuron.ViewOp(conv.root(op.source), result_type))
        op.result.replace_uses_with_if(neuron_view.result, lambda use: isinstance(use.operation, func.ReturnOp))


def _load(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.LoadOp)
    em = conv.emitter(op)
    tile_type = op.tile_type()
    source = conv.hbm_access(em, op.source, op.indices, op.mapped_dims(), tile_type.get_shape())
    transposed = _transposed_source(conv, op, source)
    instruction: type[neuron.InstructionOp] = neuron.DmaCopyOp if transposed is None else neuron.DmaTransposeOp
    source = source if transposed is None else transposed
    insert = _insert_loading_in_place(conv, op)
    if insert is not None and _window_chunks_short(conv, source, insert, tile_type):
        insert = None  # loaded whole into a buffer of its own, then copied into the window on chip by the insert
    if insert is not None:
        buffer = conv.buffer(insert.dest)
        destination = _window(em, full_access(buffer), tile_type, insert.indices, insert.step_values())
        conv.buffers[op.result] = buffer
        conv.loaded_in_place.add(insert)
        conv.emit(em, instruction, Engine.DMA, {"dst": destination, "src": source})
        return
    buffer = conv.result_buffer(em, op)
    conv.emit(em, instruction, Engine.DMA, {"dst": full_access(buffer), "src": source})


def _load_transpose(conv: _FunctionConversion, op: Operation) -> None:
    """A DMA transpose whose source pattern walks the row dims, then the column dims (innermost: the rows of C
    elements the partitions receive)."""
    assert isinstance(op, tile.LoadTransposeOp)
    em = conv.emitter(op)
    walked = [*op.rows(), *op.columns()]
    dims, sizes = [d for d, _ in walked], [n for _, n in walked]
    source = conv.hbm_access(em, op.source, op.indices, dims, sizes)
    buffer = conv.result_buffer(em, op)
    conv.emit(em, neuron.DmaTransposeOp, Engine.DMA, {"dst": full_access(buffer), "src": source})


def _transposed_source(conv: _FunctionConversion, load: tile.LoadOp, source: Access) -> Access | None:
    """The source of a DMA transpose for `load`, when the target has one and the load is a 2-D tile whose
    partitions walk the tensor's contiguous dimension (a transposed tile) in a 2-byte dtype it does not convert:
    the source read as rows [free, partitions]. A dma_copy would move such a tile one element per descriptor."""
    tile_type = load.tile_type()
    if not conv.target.dma_transpose_hbm_efficiency or len(tile_type.get_shape()) != 2:
        return None
    element_type = load.memref_type().element_type
    if element_type != tile_type.element_type or itemsize(neuron.element_type_name(element_type)) != 2:
        return None
    buffer, pattern, dynamic = source
    (partition_step, partitions), (free_step, free) = pattern.dims
    if partition_step != 1 or free_step <= 1 or partitions == 1 or free == 1:
        return None
    rows = AccessPatternAttr([(free_step, free), (partition_step, partitions)], pattern.offset.data)
    return buffer, rows, dynamic


def _insert_loading_in_place(conv: _FunctionConversion, load: tile.LoadOp) -> tile.InsertOp | None:
    """The tile.insert that `load`'s DMA may write straight into: the load's only use, an uncast insert in the same
    block into a destination that is updated in place (no other use) and already has its buffer, at indices that
    exist where the load is. The destination's other windows are then untouched until the insert, as before."""
    if not load.result.has_one_use():
        return None
    use = next(iter(load.result.uses))
    insert = use.operation
    if not isinstance(insert, tile.InsertOp) or use.index != 0 or insert.parent_block() is not load.parent_block():
        return None
    if insert.window is not None:  # the load's own shape is not the window's
        return None
    dest = insert.dest.type
    if not isinstance(dest, TileType) or dest.element_type != load.tile_type().element_type:
        return None
    if dest.memory != Memory.SBUF or not insert.dest.has_one_use() or insert.dest not in conv.buffers:
        return None
    return insert if all(_defined_before(index, load) for index in insert.indices) else None


def _contiguous_elements(dims: Sequence[tuple[int, int]]) -> int:
    """Elements of the longest run of consecutive elements an access pattern's free dims visit (innermost first),
    as the cost model counts a DMA's chunks."""
    run = 1
    for step, num in reversed(dims):
        if num == 1:
            continue
        if step != run:
            break
        run *= num
    return run


def _window_chunks_short(conv: _FunctionConversion, source: Access, insert: tile.InsertOp, tile_type: TileType) -> bool:
    """Whether a DMA straight into `insert`'s window would move overhead-bound chunks (below the target's
    `dma_min_efficient_bytes_per_partition`: the window's rows are short, as a band's between its border columns)
    where the tile loaded whole moves longer ones. A DMA's time grows with its number of chunks, an on-chip copy's
    only with its elements: a band of 112-wide bf16 rows in place moved at 44% of the DMA engines' rate."""
    whole = insert.dest.type
    assert isinstance(whole, TileType)
    free, dest_free = tile_type.get_shape()[1:], whole.get_shape()[1:]
    dest_strides = row_major_strides(dest_free)[len(dest_free) - len(free) :]
    window = [(stride * step, num) for stride, step, num in zip(dest_strides, insert.step_values(), free, strict=True)]
    source_run = _contiguous_elements(source[1].dims[1:])
    size = itemsize(neuron.element_type_name(tile_type.element_type))
    in_place = min(source_run, _contiguous_elements(window)) * size
    whole_tile = min(source_run, math.prod(free)) * size
    floor = conv.target.dma_min_efficient_bytes_per_partition
    return in_place < floor and whole_tile > in_place


def _defined_before(value: SSAValue, op: Operation) -> bool:
    """Whether `value` may be used at `op`: a constant, an argument of an enclosing block, or defined earlier in
    op's block."""
    if _constant_index(value) is not None:
        return True
    owner = value.owner
    if isinstance(owner, Block):
        return owner.is_ancestor(op)
    return owner.parent_block() is op.parent_block() and owner.is_before_in_block(op)


def _store(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.StoreOp)
    em = conv.emitter(op)
    tile_type = op.tile_type()
    destination = conv.hbm_access(em, op.dest, op.indices, op.mapped_dims(), tile_type.get_shape())
    conv.emit(em, neuron.DmaCopyOp, Engine.DMA, {"dst": destination, "src": full_access(conv.buffer(op.value))})


def _matmul(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.MatmulOp)
    em = conv.emitter(op)
    props: dict[str, Attribute] = {}
    if op.acc is not None:
        if not op.acc.has_one_use():
            raise _diagnostic(op, "the accumulator of a matmul must have no other use (it is updated in place)")
        props["accumulate"] = IntegerAttr(1, i1)
    buffer = conv.result_buffer(em, op, conv.buffer(op.acc) if op.acc is not None else None)
    accesses = {
        "dst": full_access(buffer),
        "stationary": conv.access(op.stationary),
        "moving": conv.access(op.moving),
    }
    rows = op.row_range()
    if rows is not None:
        start, size = rows
        for role in ("stationary", "moving"):
            value, pattern, dynamic = accesses[role]
            # tiles (and their windows) begin at partition 0 of their buffer
            moved = neuron.access_pattern(pattern.dims, pattern.offset.data, start, size)
            accesses[role] = (value, moved, dynamic)
        tile_size = _row_tile_size(conv.target, start, size)
        if tile_size is not None:
            props["row_tile_start"] = IntegerAttr(start - start % tile_size, i64)
            props["row_tile_size"] = IntegerAttr(tile_size, i64)
    conv.emit(em, neuron.MatmulOp, Engine.TENSOR, accesses, props)


def _row_tile_size(target: Target, start: int, size: int) -> int | None:
    """The smallest row tile of `target` that holds PE rows [start, start + size), or None (the whole array)."""
    for tile_size in sorted(target.matmul_row_tile_sizes):
        if start // tile_size == (start + size - 1) // tile_size:
            return tile_size
    return None


def _transpose(conv: _FunctionConversion, op: Operation) -> None:
    """A TensorE transpose: nc_matmul in transpose mode against the identity, into PSUM."""
    assert isinstance(op, tile.TransposeOp)
    source = op.input.type
    assert isinstance(source, TileType)
    eye = conv.identity(source.element_type, op.location)
    em = conv.emitter(op)
    result = op.result.type
    assert isinstance(result, TileType)
    if neuron.target_of(op).matmul_transpose_bit_exact or result.element_type == f32:
        buffer = conv.result_buffer(em, op)
    else:
        # Before v3 the transpose goes through the array's fp32 arithmetic: PSUM holds the (exact) fp32 values,
        # which whatever reads the tile converts back.
        buffer = conv.new_buffer(em, TileType(result.get_shape(), f32, Memory.PSUM), op.result.name_hint)
        conv.buffers[op.result] = buffer
    k = source.partitions
    square = neuron.access_pattern([(1, k)], 0, 0, k)
    accesses = {
        "dst": full_access(buffer),
        "stationary": (eye, square, None),
        "moving": conv.access(op.input),
    }
    conv.emit(em, neuron.MatmulOp, Engine.TENSOR, accesses, {"is_transpose": IntegerAttr(1, i1)})


def _window(
    em: LoopNestBuilder,
    whole: Access,
    part: TileType,
    indices: Sequence[SSAValue],
    steps: Sequence[int] | None = None,
) -> Access:
    """The access of the tile.extract / tile.insert window of `part`'s shape at `indices` inside `whole`, each kept
    dimension taking every `steps`-th element."""
    buffer, pattern, dynamic = whole
    free = part.get_shape()[1:]
    steps = [1] * len(free) if steps is None else list(steps)
    dims = pattern.dims
    static = pattern.offset.data
    offset: Index = dynamic if dynamic is not None else 0
    for index, (step, _) in zip(indices, dims, strict=True):
        constant = _constant_index(index)
        if constant is not None:
            static += constant * step
        else:
            offset = em.add(offset, em.mul(index, step))
    kept = [
        (step * every, extent)
        for (step, _), extent, every in zip(dims[len(dims) - len(free) :], free, steps, strict=True)
    ]
    window = neuron.access_pattern(kept, static, pattern.partition_start.data, part.partitions)
    return buffer, window, em.index(offset) if isinstance(offset, SSAValue) else None


# Elementwise ops and reductions: their instructions read each tile operand through an access pattern, so a
# window of a larger tile (a row of a row group) is read in place. Integer work keeps whole buffers (GpSimdE's
# exact folds address them so).
_STREAMING_OPS = (tile.BinaryOp, tile.BinaryScalarOp, tile.UnaryOp, tile.CopyOp, tile.ReduceOp, tile.SelectOp)


def _reads_windows(use_operation: Operation, index: int) -> bool:
    """Whether an operand is read by an instruction that takes any access pattern (so a window needs no copy)."""
    if isinstance(use_operation, _STREAMING_OPS) and not is_integer_op(use_operation):
        return True  # float arithmetic streams its operands through any access pattern
    if isinstance(use_operation, tile.MatmulOp):
        return use_operation.operands[index] is not use_operation.acc
    if isinstance(use_operation, tile.BinaryScalarOp):  # the [P, 1] scalar column: one element per partition
        return use_operation.operands[index] is use_operation.column and use_operation.input is not use_operation.column
    if isinstance(use_operation, tile.UnaryOp):  # the [P, 1] bias column of an activation
        return use_operation.operands[index] is use_operation.bias and use_operation.input is not use_operation.bias
    if isinstance(use_operation, tile.ExtractOp):  # a window of a window is a window of the same buffer
        return True
    return isinstance(use_operation, tile.TransposeOp) or (isinstance(use_operation, tile.InsertOp) and index == 0)


def _empty(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.EmptyOp)
    conv.result_buffer(conv.emitter(op), op)


def _extract(conv: _FunctionConversion, op: Operation) -> None:
    """A window read in place by the matmuls, transposes and inserts that use it; copied out for any other user."""
    assert isinstance(op, tile.ExtractOp)
    em = conv.emitter(op)
    result = op.result.type
    assert isinstance(result, TileType)
    window = _window(em, conv.access(op.source), result, op.indices, op.step_values())
    if all(_reads_windows(use.operation, use.index) for use in op.result.uses):
        conv.windows[op.result] = window
        return
    buffer = conv.result_buffer(em, op)
    conv.emit(em, neuron.TensorCopyOp, Engine.VECTOR, {"dst": full_access(buffer), "src": window})


def _insert(conv: _FunctionConversion, op: Operation) -> None:
    """A copy (casting) into the window of the destination: in place when nothing else reads the destination.

    Inserts into one destination stay on one engine, so they need no waits on each other; successive
    destinations alternate between VectorE and ScalarE, which then evacuate PSUM side by side.
    """
    assert isinstance(op, tile.InsertOp)
    if op in conv.loaded_in_place:  # its value is already there: see `_load`
        conv.buffers[op.result] = conv.buffer(op.dest)
        return
    em = conv.emitter(op)
    in_place = op.dest.has_one_use()
    buffer = conv.result_buffer(em, op, conv.buffer(op.dest) if in_place else None)
    if not in_place:  # others still read the destination: insert into a copy
        conv.emit(em, neuron.TensorCopyOp, Engine.VECTOR, {"dst": full_access(buffer), "src": conv.access(op.dest)})
    value = op.window_type()
    if buffer not in conv.insert_engines:
        engines = (Engine.VECTOR, Engine.SCALAR)
        conv.insert_engines[buffer] = engines[len(conv.insert_engines) % len(engines)]
    accesses = {
        "dst": _window(em, full_access(buffer), value, op.indices, op.step_values()),
        "src": conv.access(op.value),
    }
    conv.emit(em, neuron.TensorCopyOp, conv.insert_engines[buffer], accesses)


def _unary(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.UnaryOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    accesses = {"dst": full_access(buffer), "src": conv.access(op.input)}
    if op.bias is not None:
        accesses["bias"] = conv.access(op.bias)
    props: dict[str, Attribute] = {"func": StringAttr(op.fn.data)}
    for name in ("scale", "bias_value", "alpha"):
        value = getattr(op, name)
        if value is not None:
            props[name] = value
    conv.emit(em, neuron.ActivationOp, Engine.SCALAR, accesses, props)


def _in_place_target(conv: _FunctionConversion, op: Operation, candidates: Sequence[SSAValue]) -> SSAValue | None:
    """A loop-carried operand whose buffer the op may overwrite: the op's result only feeds the loop's yield."""
    result = op.results[0]
    if not result.has_one_use() or not isinstance(next(iter(result.uses)).operation, scf.YieldOp):
        return None
    for candidate in candidates:
        if candidate.owner is op.parent_block() and candidate.has_one_use():
            return conv.buffer(candidate)
    return None


def _arithmetic_engine(op: Operation) -> Engine:
    """VectorE (fp32 ALU), or GpSimdE for exact integer work and for `power` (it runs on GpSimdE, [nki-isa]),
    when every operand is in SBUF (GpSimdE cannot reach PSUM)."""
    in_sbuf = all(value.type.memory is Memory.SBUF for value in op.operands if isinstance(value.type, TileType))
    wants_gpsimd = is_integer_op(op) or op.properties.get("op") == StringAttr("power")
    return Engine.GPSIMD if wants_gpsimd and in_sbuf else Engine.VECTOR


def _binary(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.BinaryOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op, _in_place_target(conv, op, [op.lhs, op.rhs]))
    accesses = {
        "dst": full_access(buffer),
        "in0": conv.access(op.lhs),
        "in1": conv.access(op.rhs),
    }
    conv.emit(em, neuron.TensorTensorOp, _arithmetic_engine(op), accesses, {"op": StringAttr(op.op.data)})


def _binary_scalar(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.BinaryScalarOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    accesses = {"dst": full_access(buffer), "src": conv.access(op.input)}
    props: dict[str, Attribute] = {"op0": StringAttr(op.op.data)}
    if op.column is not None:
        accesses["operand0"] = conv.access(op.column)
    else:
        assert op.scalar is not None
        props["scalar0"] = op.scalar
    if op.is_reversed:
        props["reverse0"] = IntegerAttr(1, i1)
    conv.emit(em, neuron.TensorScalarOp, _arithmetic_engine(op), accesses, props)


def _select(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.SelectOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    accesses = {
        "dst": full_access(buffer),
        "predicate": conv.access(op.predicate),
        "on_true": conv.access(op.on_true),
        "on_false": conv.access(op.on_false),
    }
    conv.emit(em, neuron.SelectOp, _arithmetic_engine(op), accesses)


def _copy(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.CopyOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    accesses = {"dst": full_access(buffer), "src": conv.access(op.input)}
    # integer to integer conversions are exact on GpSimdE; VectorE would round through fp32
    conv.emit(em, neuron.TensorCopyOp, _arithmetic_engine(op), accesses)


def _fill(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.FillOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    conv.emit(em, neuron.MemsetOp, Engine.VECTOR, {"dst": full_access(buffer)}, {"value": op.value})


def _iota(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.IotaOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    result = op.result.type
    assert isinstance(result, TileType)
    shape = result.get_shape()
    pattern = [v for step, num in zip(op.step_values(), shape[1:], strict=True) for v in (step, num)]
    props: dict[str, Attribute] = {"pattern": DenseArrayBase.from_list(i64, pattern)}
    if op.channel_multiplier is not None:
        props["channel_multiplier"] = op.channel_multiplier
    dynamic: dict[str, SSAValue] = {}
    if op.offset is not None:
        # a run-time base: the static base plus the offset, in a scalar register
        base = em.add(op.offset, op.base_value())
        dynamic["base"] = em.index(base)
    elif op.base is not None:
        props["base"] = op.base
    em.insert(neuron.IotaOp.build_instruction(Engine.GPSIMD, {"dst": full_access(buffer)}, props, dynamic))


def _kernel(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.KernelOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    accesses = {"dst": full_access(buffer), "in0": full_access(conv.buffer(op.input))}
    if op.other is not None:
        accesses["in1"] = full_access(conv.buffer(op.other))
    conv.emit(em, neuron.GpsimdKernelOp, Engine.GPSIMD, accesses, {"kernel": op.kernel})


def _indirect_access(conv: _FunctionConversion, em: LoopNestBuilder, op: tile.GatherOp | tile.ScatterOp) -> Access:
    """The indexed HBM side of an indirect DMA: [(stride of dim, rows an offset may reach), row pattern...]."""
    memref_type = op.memref_type()
    dims = op.row_dims()
    extents = op.rows_type().get_shape()[1:] if dims else ()
    tensor = op.source if isinstance(op, tile.GatherOp) else op.dest
    buffer, pattern, dynamic = conv.hbm_access(em, tensor, op.index_values(), dims, extents)
    start = _constant_index(op.index_values()[op.indexed_dim])
    if start is None:
        raise _diagnostic(op, f"the index of the indexed dimension {op.indexed_dim} must be a constant")
    strides, _ = tile.memref_strides(memref_type)
    bound = memref_type.get_shape()[op.indexed_dim] - start
    indexed = [(strides[op.indexed_dim], bound), *pattern.dims]
    return buffer, neuron.access_pattern(indexed, pattern.offset.data), dynamic


def _gather(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.GatherOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    accesses = {
        "dst": full_access(buffer),
        "src": _indirect_access(conv, em, op),
        "offsets": full_access(conv.buffer(op.offsets)),
    }
    conv.emit(em, neuron.DmaCopyOp, Engine.DMA, accesses, {"indirect": StringAttr("src")})


def _scatter(conv: _FunctionConversion, op: Operation) -> None:
    assert isinstance(op, tile.ScatterOp)
    em = conv.emitter(op)
    accesses = {
        "dst": _indirect_access(conv, em, op),
        "src": full_access(conv.buffer(op.value)),
        "offsets": full_access(conv.buffer(op.offsets)),
    }
    props: dict[str, Attribute] = {"indirect": StringAttr("dst")}
    if op.accumulate is not None:
        props["accumulate"] = IntegerAttr(1, i1)
    conv.emit(em, neuron.DmaCopyOp, Engine.DMA, accesses, props)


def _reduce(conv: _FunctionConversion, op: Operation) -> None:
    """VectorE's tensor_reduce (fp32), or for an integer tile an exact fold on GpSimdE (`_integer_fold`)."""
    assert isinstance(op, tile.ReduceOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    source = op.input.type
    assert isinstance(source, TileType)
    result = op.result.type
    assert isinstance(result, TileType)
    if is_integer_op(op):
        _integer_fold(conv, em, op, buffer, source)
        return
    # the destination drops the reduced axes: view the [P, 1] column as the kept shape
    kept = source.get_shape()[1 : len(source.get_shape()) - op.reduced_axes] or (1,)
    dst_buffer, _, _ = full_access(buffer)
    dst_pattern = neuron.access_pattern(list(zip(row_major_strides(kept), kept, strict=True)), 0, 0, result.partitions)
    accesses = {"dst": (dst_buffer, dst_pattern, None), "src": conv.access(op.input)}
    props: dict[str, Attribute] = {"op": StringAttr(op.op.data)}
    if op.reduced_axes != 1:
        props["axes"] = IntegerAttr(op.reduced_axes, i64)
    conv.emit(em, neuron.TensorReduceOp, Engine.VECTOR, accesses, props)


def _lanes(buffer: SSAValue, rows: int, row_stride: int, start: int, length: int, partitions: int) -> Access:
    """Columns [start, start + length) of each of the `rows` rows (`row_stride` apart) of every partition."""
    pattern = [(row_stride, rows), (1, length)] if rows > 1 else [(1, length)]
    return buffer, neuron.access_pattern(pattern, start, 0, partitions), None


def _integer_fold(
    conv: _FunctionConversion, em: LoopNestBuilder, op: tile.ReduceOp, buffer: SSAValue, source: TileType
) -> None:
    """An exact integer reduction: VectorE's tensor_reduce computes in fp32 (inexact beyond 2^24), so GpSimdE's
    integer lanes fold the reduced axes as a tree of `tensor_tensor`s over halves of them, each step adding the
    last half of the live columns onto the first half (an odd middle column stays where it is), until one
    column per kept row remains. The first step writes a scratch buffer (the input is a value), later steps
    update it in place (each element reads and writes only itself and a column of the other half); the last
    step writes the result. log2(reduced) instructions of shrinking width."""
    shape = source.get_shape()
    partitions = shape[0]
    rows = math.prod(shape[1 : len(shape) - op.reduced_axes])
    length = math.prod(shape[len(shape) - op.reduced_axes :])
    current, stride = conv.buffer(op.input), length
    scratch_stride = (length + 1) // 2
    scratch = None
    if length == 1:  # nothing to fold: a copy (abs_max still takes the magnitude)
        dst, src = _lanes(buffer, rows, 1, 0, 1, partitions), _lanes(current, rows, 1, 0, 1, partitions)
        if op.op.data == "abs_max":
            accesses = {"dst": dst, "in0": src, "in1": src}
            conv.emit(em, neuron.TensorTensorOp, Engine.GPSIMD, accesses, {"op": StringAttr("abs_max")})
        else:
            conv.emit(em, neuron.TensorCopyOp, Engine.GPSIMD, {"dst": dst, "src": src})
    while length > 1:
        half, middle = divmod(length, 2)
        if half + middle == 1:
            target, target_stride = buffer, 1
        else:
            if scratch is None:
                scratch_type = TileType((partitions, rows * scratch_stride), source.element_type, Memory.SBUF)
                scratch = conv.new_buffer(em, scratch_type, None)
            target, target_stride = scratch, scratch_stride
        accesses = {
            "dst": _lanes(target, rows, target_stride, 0, half, partitions),
            "in0": _lanes(current, rows, stride, 0, half, partitions),
            "in1": _lanes(current, rows, stride, half + middle, half, partitions),
        }
        conv.emit(em, neuron.TensorTensorOp, Engine.GPSIMD, accesses, {"op": StringAttr(op.op.data)})
        if middle and target is not current:
            accesses = {
                "dst": _lanes(target, rows, target_stride, half, 1, partitions),
                "src": _lanes(current, rows, stride, half, 1, partitions),
            }
            conv.emit(em, neuron.TensorCopyOp, Engine.GPSIMD, accesses)
        current, stride, length = target, target_stride, half + middle


def _scan(conv: _FunctionConversion, op: Operation) -> None:
    """An exact integer scan on GpSimdE (Hillis-Steele): for shifts 1, 2, 4, ... below the length, each column
    combines with the one `shift` before it (`tensor_tensor` over shifted column ranges) and the first `shift`
    columns, already final, are copied, alternating between the result and a scratch buffer so that the last
    shift lands in the result. log2(length) steps of two instructions."""
    assert isinstance(op, tile.ScanOp)
    em = conv.emitter(op)
    buffer = conv.result_buffer(em, op)
    source = op.input.type
    assert isinstance(source, TileType)
    shape = source.get_shape()
    partitions, rows, length = shape[0], math.prod(shape[1:-1]), shape[-1]
    current = conv.buffer(op.input)
    shifts = [1 << k for k in range(max(0, (length - 1).bit_length()))]
    if not shifts:
        accesses = {"dst": full_access(buffer), "src": full_access(current)}
        conv.emit(em, neuron.TensorCopyOp, Engine.GPSIMD, accesses)
        return
    scratch = conv.new_buffer(em, source, None) if len(shifts) > 1 else None
    for step, shift in enumerate(shifts):
        target = buffer if (len(shifts) - 1 - step) % 2 == 0 else scratch
        assert target is not None
        accesses = {
            "dst": _lanes(target, rows, length, shift, length - shift, partitions),
            "in0": _lanes(current, rows, length, shift, length - shift, partitions),
            "in1": _lanes(current, rows, length, 0, length - shift, partitions),
        }
        conv.emit(em, neuron.TensorTensorOp, Engine.GPSIMD, accesses, {"op": StringAttr(op.op.data)})
        accesses = {
            "dst": _lanes(target, rows, length, 0, shift, partitions),
            "src": _lanes(current, rows, length, 0, shift, partitions),
        }
        conv.emit(em, neuron.TensorCopyOp, Engine.GPSIMD, accesses)
        current = target


_COLLECTIVE_OPS: dict[str, type[InstructionOp]] = {op.OPCODE: op for op in neuron.COLLECTIVE_OPS}


def _whole_tensor(conv: _FunctionConversion, tensor: SSAValue) -> Access:
    """An HBM tensor (or view) as one access of all its elements in row-major order."""
    memref_type = tensor.type
    assert isinstance(memref_type, MemRefType)
    strides, offset = tile.memref_strides(memref_type)
    shape = memref_type.get_shape()
    pattern = [(stride, extent) for stride, extent in zip(strides, shape, strict=True)] or [(1, 1)]
    return conv.root(tensor), neuron.access_pattern(pattern, offset), None


def _collective(conv: _FunctionConversion, op: Operation) -> None:
    """One collective instruction on the collective queue, reading and writing the tensors in HBM."""
    assert isinstance(op, tile.CollectiveOp)
    properties: dict[str, Attribute] = {"replica_groups": op.replica_groups}
    if op.reduce is not None:
        properties["reduce"] = op.reduce
    if op.root is not None:
        properties["root"] = op.root
    if op.input_splits is not None and op.output_splits is not None:
        properties["input_splits"], properties["output_splits"] = op.input_splits, op.output_splits
    accesses = {"src": _whole_tensor(conv, op.source), "dst": _whole_tensor(conv, op.dest)}
    conv.emit(conv.emitter(op), _COLLECTIVE_OPS[op.kind.data], Engine.COLLECTIVE, accesses, properties)


def _nki_kernel(conv: _FunctionConversion, op: Operation) -> None:
    """The kernel's traced instructions, placed where the call is: its HBM arguments become the call's input
    tensors, the HBM tensors it returns become the call's output tensors (each written where the kernel writes
    it, with no copy), and every instruction is located at the kernel's line, named after the torch op, so that
    diagnostics and the profile's per-kernel rows point at it."""
    assert isinstance(op, tile.NkiKernelOp)
    try:
        function = traced_kernel(op, list(op.inputs))
    except (ValueError, LookupError) as error:  # NkiError is a ValueError
        raise _diagnostic(op, str(error)) from None
    body = function.body.block
    for argument, value in zip(body.args, op.inputs, strict=True):
        # a row-major view at offset 0 addresses the elements of its allocation the kernel's patterns address
        argument.replace_all_uses_with(conv.root(value))
    returned = body.last_op
    assert isinstance(returned, func.ReturnOp)
    for value, output in zip(returned.operands, op.outputs, strict=True):
        allocation = value.owner
        if not isinstance(allocation, neuron.AllocOp):
            raise _diagnostic(op, "the kernel returns a view of another tensor; inlined, it writes its outputs")
        value.replace_all_uses_with(conv.root(output))
    returned.detach()
    returned.erase(safe_erase=False)
    tag = StringAttr(KERNEL_LOCATION_PREFIX + op.kernel.data)
    parent = op.parent_block()
    assert parent is not None
    for inner in list(body.ops):
        inner.detach()
        if isinstance(inner, neuron.AllocOp) and not inner.buffer.uses:
            inner.erase()  # a returned tensor, now the call's output
            continue
        for nested in inner.walk():
            nested.location = _in_kernel(nested.location, tag)
        parent.insert_op_before(inner, op)


def _in_kernel(location: LocationAttr, tag: StringAttr) -> LocationAttr:
    """The kernel's source position, named as a call of the kernel op `tag`."""
    inner = location.location if isinstance(location, NameLoc) else location
    return NameLoc(tag, inner)


_HANDLERS = {
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
    tile.KernelOp: _kernel,
    tile.ReduceOp: _reduce,
    tile.ScanOp: _scan,
    tile.CollectiveOp: _collective,
    tile.NkiKernelOp: _nki_kernel,
}


@dataclass(frozen=True)
class ConvertTileToNeuronPass(ModulePass):
    name = "convert-tile-to-neuron"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = neuron.target_of(op)
        for function in defined_functions(op):
            conversion = _FunctionConversion(function, target)
            conversion.convert_block(function.body.block)
            for replaced in reversed(conversion.replaced):
                replaced.detach()
                replaced.erase(safe_erase=False)
