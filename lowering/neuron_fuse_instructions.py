"""neuron-fuse-instructions: merge instruction pairs the ISA can do in one instruction (peepholes).

Input contract: neuron-level functions before memory allocation (convert-tile-to-neuron's output): instructions
over `neuron.alloc`ed buffers, in blocks of straight-line code and `scf.for` bodies.

Output guarantee: the same results, with these pairs (within one block, the second instruction reading all of
what the first wrote, with static accesses) replaced by one instruction at the second one's place:

* `activation` writing an fp32 buffer, then an add `tensor_reduce` of all of it: the activation sums its
  output into `accumulate_dst` (ScalarE adds the free-axis sum for 64 cycles instead of VectorE streaming the
  tile again; the sum of fp32 values is the same as the sum of what was stored). When a `tensor_copy` into a
  16-bit tile was that buffer's other reader (attention's probabilities, a matmul operand), the copy is then
  forwarded as below: ScalarE sums the fp32 results of its function before its write rounds them, so the
  accumulated sum stays the fp32 one. A one-step float `tensor_scalar` multiplying by a [P, 1] column (or an
  immediate) into an fp32 buffer counts as such an activation: it becomes ScalarE's `copy` with that scale
  (`scale_vector`), which computes the same products in fp32, and sums them as it writes them (a layer norm
  backward's rstd * g and its row sum: one ScalarE pass where VectorE streamed the row twice). Any other
  one-operator float `tensor_scalar` (x - f with a per-partition shift f) sums its output on VectorE, as the ISA's
  tensor_scalar_reduce: 64 cycles more for the pass, where the reduce streamed the tile again.
* `tensor_reduce`, then a `tensor_scalar` multiplying its [P, 1] result by -1 and nothing else reading that
  result: the reduce with `negate`.
* `tensor_scalar`, then a `tensor_scalar` whose source is the first one's fp32 result and nothing else reads
  that result (nor the second as its per-partition operand: t * t keeps t): one `tensor_scalar` with both steps
  (`op0`, `op1`); the engines compute both steps in fp32 and
  round once, exactly what the fp32 intermediate held. With 16-bit source and destination the pair becomes one
  pass in VectorE's 16-bit performance mode.

* `tensor_scalar`, `tensor_tensor`, `scalar_tensor_tensor` or `activation` writing a whole buffer that nothing
  but one `tensor_copy` then reads, all of it, into a window of another float buffer (an insert into a larger
  tile, such as an evacuation of PSUM that applies a per-partition affine before landing in a stationary panel,
  or a row computed into its row group's tile): the first instruction writes the window itself. It computes in
  fp32 and rounds once to the window's type, as the copy did from the intermediate (which, fp32 or the same type
  as the window, held the value the copy rounded). Stores between the two that read all of the buffer (an
  evacuated tile also inserted into the row the next nest reads) read the window instead.

* A `tensor_copy` of an fp32 PSUM tile into an fp32 SBUF buffer that nothing but one float `tensor_scalar` then
  reads, all of it, in the same block (after the merges above: a matmul epilogue's scale steps): the
  tensor_scalar reads the PSUM tile itself. The copy was exact, so the values are the same; the accumulator's
  bank is released by the one pass instead of two, and the pass, no longer an evacuation the engine balancing
  keeps together, spreads over VectorE and ScalarE like other arithmetic. Only when nothing between the two
  writes the PSUM tile and no PSUM buffer is allocated or written between them, so the longer read holds no
  more PSUM than the block held already.

A buffer left without users is deleted; a buffer the merged instruction writes earlier than before has its
`neuron.alloc` moved up to the instruction. Integer work (GpSimdE's exact lanes) is never merged.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, ModuleOp, StringAttr, f32, i1
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.memory import memory_of
from neuron_mlir.ir.dialects.neuron import InstructionOp
from neuron_mlir.lowering.convert_tile_to_neuron import full_access
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.runtime import isa
from neuron_mlir.runtime.hardware import Engine, Memory

Access = tuple[SSAValue, neuron.AccessPatternAttr, SSAValue | None]


def _static(access: Access | None) -> bool:
    return access is not None and access[2] is None


def _same(a: Access | None, b: Access | None) -> bool:
    return a is not None and b is not None and a[0] is b[0] and a[1] == b[1] and a[2] is None and b[2] is None


def _is_f32(buffer: SSAValue) -> bool:
    return isinstance(buffer.type, MemRefType) and buffer.type.element_type == f32


def _instruction_users(buffer: SSAValue) -> set[Operation]:
    return {use.operation for use in buffer.uses}


def _properties(op: InstructionOp) -> dict[str, Attribute]:
    """The non-access properties of an instruction (what `build_instruction` takes besides accesses)."""
    reserved = {f"{role}_ap" for role in op.roles()} | {"engine", "operandSegmentSizes"}
    return {name: attr for name, attr in op.properties.items() if name not in reserved}


def _accesses(op: InstructionOp) -> dict[str, Access]:
    return {role: access for role in op.present_roles() if (access := op.access(role)) is not None}


class _Sorted:
    """Ops of one block in program order, with their positions (`ProgramOrder`'s)."""

    def __init__(self, positions: list[float], ops: list[Operation]) -> None:
        self.positions, self.ops = positions, ops

    def remove(self, op: Operation, position: float) -> None:
        index = bisect_left(self.positions, position)
        if index < len(self.ops) and self.ops[index] is op:
            del self.positions[index], self.ops[index]

    def add(self, op: Operation, position: float) -> None:
        index = bisect_left(self.positions, position)
        self.positions.insert(index, position)
        self.ops.insert(index, op)

    def last_before(self, position: float) -> Operation | None:
        index = bisect_left(self.positions, position) - 1
        return self.ops[index] if index >= 0 else None

    def any_between(self, start: float, end: float) -> bool:
        return bisect_right(self.positions, start) < bisect_left(self.positions, end)


class ProgramOrder:
    """Where instructions stand in their blocks, and for each buffer the ops of a block that use or write it, so
    that what the merges ask (the closest earlier writer of a buffer, whether anything between two instructions
    touches one) is a binary search among the buffer's own users instead of a walk over the block: a block of n
    instructions is merged in time about linear in n, not quadratic.

    Made for one application of a pass and told of every change the merges make (`_merge`, `_hoist_alloc`,
    `_available_at`): a merged instruction takes the position of the one it replaces and the lists of the
    buffers the merge touched, an op moved up takes a position just before the op it now precedes. An op it was
    not told of numbers its block again."""

    def __init__(self) -> None:
        self._positions: dict[Operation, float] = {}
        self._numbered: set[Block] = set()
        # buffer -> block -> (users, writers): the ops of the block (or the ops of it enclosing them) that use
        # the buffer, and those that write it (directly or inside)
        self._users: dict[SSAValue, dict[Block, tuple[_Sorted, _Sorted]]] = {}

    def position(self, op: Operation) -> float:
        position = self._positions.get(op)
        if position is None:
            block = op.parent_block()
            assert block is not None
            self._number(block)
            position = self._positions[op]
        return position

    def _number(self, block: Block) -> None:
        if block in self._numbered:
            self._users.clear()  # positions listed under the old numbering
        self._numbered.add(block)
        for index, op in enumerate(block.ops):
            self._positions[op] = index

    def precedes(self, first: Operation, second: Operation) -> bool:
        """Whether `first` stands before `second` (two ops of one block)."""
        return self.position(first) < self.position(second)

    def moved_before(self, moved: Operation, anchor: Operation) -> None:
        """`moved` (no instruction: an alloc, index arithmetic) now stands just before `anchor`."""
        self._positions[moved] = self.position(anchor) - 0.5

    def forget(self, buffer: SSAValue) -> None:
        """Drop `buffer`'s lists (made again when asked): its users changed other than by a merge."""
        self._users.pop(buffer, None)

    def replaced(self, old: Operation, new: Operation) -> None:
        position = self._positions.get(old)
        if position is not None:
            self._positions[new] = position

    def merged(self, replaced: Operation, fused: Operation, absorbed: Operation, buffers: set[SSAValue]) -> None:
        """`fused` stands where `replaced` stood and `absorbed` is gone (both of one block); `buffers` are all the
        three used. Their lists for that block are edited in place (a merge near the end of a long block must
        not list a buffer's many users again); lists for the blocks around it are made again when asked."""
        block = fused.parent_block()
        position = self.position(fused)
        for buffer in buffers:
            per_block = self._users.get(buffer)
            if per_block is None:
                continue
            for listed_block in list(per_block):
                if listed_block is not block:
                    del per_block[listed_block]
                    continue
                for listed in per_block[listed_block]:
                    for gone in (replaced, absorbed):
                        listed.remove(gone, self._positions.get(gone, -1.0))
                users, writers = per_block[listed_block]
                if any(operand is buffer for operand in fused.operands):
                    users.add(fused, position)
                    if _writes(fused, buffer):
                        writers.add(fused, position)

    def _users_in(self, buffer: SSAValue, block: Block) -> tuple[_Sorted, _Sorted]:
        listed = self._users.get(buffer, {}).get(block)
        if listed is not None:
            return listed
        writes: dict[Operation, bool] = {}
        for use in buffer.uses:
            ancestor = _ancestor_in(use.operation, block)
            if ancestor is not None:
                writes[ancestor] = writes.get(ancestor, False) or _writes(use.operation, buffer)
        if any(op not in self._positions for op in writes):
            self._number(block)  # before listing: numbering again drops the lists made under the old numbering
        ops = sorted(writes, key=self.position)
        users = _Sorted([self.position(op) for op in ops], ops)
        written = [op for op in ops if writes[op]]
        listed = (users, _Sorted([self.position(op) for op in written], written))
        self._users.setdefault(buffer, {})[block] = listed
        return listed

    def previous_writer(self, op: InstructionOp, buffer: SSAValue) -> InstructionOp | None:
        """The closest instruction before `op` in its block that writes `buffer` (None past a nested region that
        writes it)."""
        block = op.parent_block()
        assert block is not None
        writer = self._users_in(buffer, block)[1].last_before(self.position(op))
        return writer if isinstance(writer, InstructionOp) and not writer.regions else None

    def used_between(self, first: Operation, last: Operation, buffer: SSAValue, *, writes_only: bool = False) -> bool:
        """Whether an op strictly between `first` and `last` (one block), nested ones included, uses `buffer`
        (writes it, with `writes_only`)."""
        block = last.parent_block()
        assert block is not None
        users, writers = self._users_in(buffer, block)
        return (writers if writes_only else users).any_between(self.position(first), self.position(last))


def _ancestor_in(op: Operation, block: Block) -> Operation | None:
    """`op` or the op enclosing it that stands in `block` (None when `block` does not enclose it)."""
    current: Operation | None = op
    while current is not None:
        parent = current.parent_block()
        if parent is block:
            return current
        current = parent.parent_op() if parent is not None else None
    return None


def _replace(old: InstructionOp, new: InstructionOp, order: ProgramOrder) -> None:
    new.location = old.location
    new.attributes.update(old.attributes)
    block = old.parent_block()
    assert block is not None
    block.insert_op_before(new, old)
    order.replaced(old, new)
    old.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
    old.erase()


def _merge(
    replaced: InstructionOp, fused: InstructionOp, absorbed: Operation, scratch: SSAValue | None, order: ProgramOrder
) -> None:
    """`fused` takes `replaced`'s place, `absorbed` (whose work it now does) goes, and so does the `scratch`
    buffer that passed a value between the two when nothing else uses it."""
    buffers = {*replaced.operands, *fused.operands, *absorbed.operands}
    _replace(replaced, fused, order)
    order.merged(replaced, fused, absorbed, buffers)
    absorbed.detach()
    absorbed.erase()
    if scratch is not None:
        _erase_if_unused(scratch)


def _untouched_between(first: Operation, last: Operation, buffer: SSAValue, order: ProgramOrder) -> bool:
    """Whether no op between `first` and `last` (one block) reads or writes `buffer`."""
    return not order.used_between(first, last, buffer)


def _scalar_reads_stable(first: InstructionOp, second: InstructionOp, order: ProgramOrder) -> bool:
    """Whether the reads of a tensor_scalar `first` may move down to `second`: nothing in between writes them."""
    read = {access[0] for role in ("src", "operand0") if (access := first.access(role)) is not None}
    return not any(order.used_between(first, second, buffer, writes_only=True) for buffer in read)


def _writes(op: Operation, buffer: SSAValue) -> bool:
    if not isinstance(op, InstructionOp):
        return False
    spec = op.spec()
    return any(getattr(op, role) is buffer for role in spec.writes + spec.optional_writes)


def _erase_if_unused(buffer: SSAValue) -> None:
    owner = buffer.owner
    if isinstance(owner, neuron.AllocOp) and not buffer.uses:
        owner.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
        owner.erase()


def _hoist_alloc(buffer: SSAValue, before: Operation, order: ProgramOrder) -> bool:
    """Make `buffer`'s alloc precede `before` (same block); False when it is defined elsewhere."""
    owner = buffer.owner
    if not isinstance(owner, neuron.AllocOp):
        return False
    block = before.parent_block()
    if owner.parent_block() is not block:
        return _defined_before(owner, before, order)
    assert block is not None
    if order.precedes(before, owner):
        owner.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
        block.insert_op_before(owner, before)
        order.moved_before(owner, before)
    return True


def _defined_before(owner: Operation, op: Operation, order: ProgramOrder) -> bool:
    """Whether `owner` is in a block enclosing `op` (so it dominates it in our structured code)."""
    current: Operation | None = op
    while current is not None:
        block = current.parent_block()
        if block is None:
            return False
        if owner.parent_block() is block:
            return order.precedes(owner, current)
        current = block.parent_op()
    return False


def _fuse_accumulate(reduce: neuron.TensorReduceOp, order: ProgramOrder) -> bool:
    """activation -> dst (fp32); tensor_reduce add of all of dst  ==>  activation with accumulate_dst."""
    if reduce.op.data != "add" or reduce.properties.get("negate") is not None:
        return False
    source, target = reduce.access("src"), reduce.access("dst")
    if not _static(source) or not _static(target) or not _is_f32(source[0]):  # type: ignore[index]
        return False
    assert source is not None
    assert target is not None
    axes = reduce.properties.get("axes")
    if (axes.value.data if isinstance(axes, IntegerAttr) else 1) != len(source[1].dims):
        return False
    activation = order.previous_writer(reduce, source[0])
    if isinstance(activation, neuron.TensorScalarOp):  # a product by a per-partition scale: ScalarE's copy
        spelled = _as_activation(activation)
        if spelled is None:
            return _fuse_vector_accumulate(activation, reduce, target, order)
        accesses, properties = spelled
    elif isinstance(activation, neuron.ActivationOp) and activation.accumulate_dst is None:
        accesses, properties = _accesses(activation), _properties(activation)
    else:
        return False
    if not _same(activation.access("dst"), source):
        return False
    if not _untouched_between(activation, reduce, target[0], order) or not _hoist_alloc(target[0], activation, order):
        return False
    accesses["accumulate_dst"] = target
    fused = neuron.ActivationOp.build_instruction(Engine.SCALAR, accesses, properties)
    _merge(activation, fused, reduce, None, order)
    # A copy of the fp32 output (a 16-bit matmul operand) that the walk met before the reduce may now forward.
    forward_into_copy_reader(fused, order)
    return True


def _fuse_vector_accumulate(
    scalar: neuron.TensorScalarOp, reduce: neuron.TensorReduceOp, target: Access, order: ProgramOrder
) -> bool:
    """tensor_scalar of one float operator -> dst (fp32); tensor_reduce add of all of dst  ==>  VectorE's
    tensor_scalar with accumulate_dst (a subtraction of a per-partition shift and its sum in one VectorE pass)."""
    if scalar.op1 is not None or scalar.accumulate_dst is not None:
        return False
    if scalar.op0.data not in isa.REDUCING_TENSOR_SCALAR_OPS:
        return False
    destination = scalar.access("dst")
    if destination is None or not _is_f32(destination[0]) or not _float_only(scalar):
        return False
    if not _same(destination, reduce.access("src")):
        return False
    if not _untouched_between(scalar, reduce, target[0], order) or not _hoist_alloc(target[0], scalar, order):
        return False
    accesses = _accesses(scalar)
    accesses["accumulate_dst"] = target
    fused = neuron.TensorScalarOp.build_instruction(Engine.VECTOR, accesses, _properties(scalar))
    _merge(scalar, fused, reduce, None, order)
    return True


def _as_activation(scale: neuron.TensorScalarOp) -> tuple[dict[str, Access], dict[str, Attribute]] | None:
    """The accesses and properties of an activation `copy` computing what a one-step float tensor_scalar
    `src * s` (s a [P, 1] column or an immediate) writes to an fp32 buffer: ScalarE computes `src * scale + 0` in
    fp32 and rounds once, the same value. None for any other tensor_scalar."""
    if scale.op1 is not None or scale.op0.data != "multiply" or scale.reverse0 is not None:
        return None
    destination = scale.access("dst")
    if destination is None or not _is_f32(destination[0]) or not _float_only(scale):
        return None
    accesses = {role: access for role, access in _accesses(scale).items() if role in ("src", "dst")}
    properties: dict[str, Attribute] = {"func": StringAttr("copy")}
    if scale.operand0 is not None:
        accesses["scale_vector"] = scale.access("operand0")  # type: ignore[assignment]
    elif isinstance(scale.scalar0, FloatAttr):
        properties["scale"] = scale.scalar0
    else:
        return None
    return accesses, properties


def _fuse_negate(scale: neuron.TensorScalarOp, order: ProgramOrder) -> bool:
    """tensor_reduce -> d; tensor_scalar d * -1 (d read by nothing else)  ==>  tensor_reduce with negate."""
    if scale.op1 is not None or scale.operand0 is not None or scale.op0.data != "multiply":
        return False
    if not isinstance(scale.scalar0, FloatAttr) or scale.scalar0.value.data != -1.0:
        return False
    source, target = scale.access("src"), scale.access("dst")
    if not _static(source) or not _static(target):
        return False
    assert source is not None
    assert target is not None
    reduce = order.previous_writer(scale, source[0])
    if not isinstance(reduce, neuron.TensorReduceOp) or reduce.properties.get("negate") is not None:
        return False
    if reduce.engine_kind is not Engine.VECTOR or not _same(reduce.access("dst"), source):
        return False
    if _instruction_users(source[0]) != {reduce, scale} or not _is_f32(source[0]):
        return False
    if source[0].type != target[0].type or source[1] != target[1]:
        return False
    if not _untouched_between(reduce, scale, target[0], order) or not _hoist_alloc(target[0], reduce, order):
        return False
    accesses = _accesses(reduce)
    accesses["dst"] = target
    properties = _properties(reduce)
    properties["negate"] = IntegerAttr(1, i1)
    fused = neuron.TensorReduceOp.build_instruction(reduce.engine_kind, accesses, properties)
    _merge(reduce, fused, scale, source[0], order)
    return True


_FLOAT_ENGINES = (Engine.VECTOR, Engine.SCALAR)
# Operators VectorE computes on fp32 (not the bit-vector ones, on integers, nor power, which GpSimdE runs)
_FLOAT_ALU_OPS = frozenset({"add", "subtract", "multiply", "max", "min", "abs_max", "abs_min"})


def _float_only(op: InstructionOp) -> bool:
    return all(
        isinstance(buffer.type, MemRefType) and not str(buffer.type.element_type).startswith(("i", "ui"))
        for buffer in (getattr(op, role) for role in op.present_roles())
    )


def _fuse_scalar_pair(second: neuron.TensorScalarOp, order: ProgramOrder) -> bool:
    """tensor_scalar -> t (fp32, read only by the second); tensor_scalar of t  ==>  one two-step tensor_scalar."""
    if second.op1 is not None or second.engine_kind not in _FLOAT_ENGINES or not _float_only(second):
        return False
    if second.accumulate_dst is not None:  # a sum of one operator's results
        return False
    source = second.access("src")
    if not _static(source) or not _is_f32(source[0]):  # type: ignore[index]
        return False
    assert source is not None
    first = order.previous_writer(second, source[0])
    if not isinstance(first, neuron.TensorScalarOp) or first.op1 is not None or first.accumulate_dst is not None:
        return False
    if first.engine_kind is not second.engine_kind or not _float_only(first):
        return False
    if not _same(first.access("dst"), source) or _instruction_users(source[0]) != {first, second}:
        return False
    if second.operand0 is source[0]:  # t is also the second's per-partition operand (t * t): t must be written
        return False
    if not _scalar_reads_stable(first, second, order):
        return False
    accesses = _accesses(first)
    accesses["dst"] = second.access("dst")  # type: ignore[assignment]
    properties = _properties(first)
    properties["op1"] = StringAttr(second.op0.data)
    if second.operand0 is not None:
        accesses["operand1"] = second.access("operand0")  # type: ignore[assignment]
    elif second.scalar0 is not None:
        properties["scalar1"] = second.scalar0
    if second.reverse0 is not None:
        properties["reverse1"] = second.reverse0
    fused = neuron.TensorScalarOp.build_instruction(second.engine_kind, accesses, properties)
    _merge(second, fused, first, source[0], order)
    return True


def fuse_scalar_tensor_tensor(
    second: neuron.TensorTensorOp,
    accept: Callable[[neuron.TensorScalarOp, neuron.TensorTensorOp, neuron.ScalarTensorTensorOp], bool] | None = None,
    order: ProgramOrder | None = None,
) -> neuron.ScalarTensorTensorOp | None:
    """tensor_scalar -> t (fp32, one step, read only by the second); tensor_tensor of t and u on VectorE  ==>
    scalar_tensor_tensor (t's step, then the tensor_tensor's operator with u), returned (None: not merged).
    `accept(first, second, merged)`, when given, decides on the merged instruction before anything changes.

    Not part of this pass: whether the merge pays depends on where the engine balancing puts the pair (a
    tensor_tensor on GpSimdE and a tensor_scalar on ScalarE may cost less than one VectorE pass), so
    neuron-balance-engines merges the pairs it leaves on VectorE."""
    if second.engine_kind is not Engine.VECTOR or not _float_only(second):
        return None
    source, other = second.access("in0"), second.access("in1")
    reverse = False
    order = order or ProgramOrder()
    first = _scalar_step_writing(second, source, order)
    if first is None:
        source, other, reverse = other, source, True
        first = _scalar_step_writing(second, source, order)
    if first is None or source is None or other is None or other[0] is source[0]:
        return None
    src = first.access("src")
    assert src is not None
    if memory_of(src[0].type) is Memory.PSUM and memory_of(other[0].type) is Memory.PSUM:
        return None
    if not _scalar_reads_stable(first, second, order):
        return None
    accesses = {role: access for role, access in _accesses(first).items() if role in ("src", "operand0")}
    accesses["in1"] = other
    accesses["dst"] = second.access("dst")  # type: ignore[assignment]
    properties = {name: attr for name, attr in _properties(first).items() if name in ("op0", "scalar0", "reverse0")}
    properties["op1"] = StringAttr(second.op.data)
    if reverse:
        properties["reverse1"] = IntegerAttr(1, i1)
    fused = neuron.ScalarTensorTensorOp.build_instruction(Engine.VECTOR, accesses, properties)
    assert isinstance(fused, neuron.ScalarTensorTensorOp)
    if accept is not None and not accept(first, second, fused):
        fused.erase()
        return None
    _merge(second, fused, first, source[0], order)
    return fused


def forward_into_copy_reader(writer: InstructionOp, order: ProgramOrder | None = None) -> None:
    """Apply the copy forwarding of this pass to the one `tensor_copy` that reads what `writer` wrote, if any."""
    destination = writer.access("dst")
    if destination is None:
        return
    readers = [use.operation for use in destination[0].uses if use.operation is not writer]
    if len(readers) == 1 and isinstance(readers[0], neuron.TensorCopyOp):
        _forward_into_copy(readers[0], order or ProgramOrder())


def _scalar_step_writing(
    second: InstructionOp, source: Access | None, order: ProgramOrder
) -> neuron.TensorScalarOp | None:
    """The one-step float tensor_scalar that wrote all of `source`, an fp32 buffer only `second` reads after it."""
    if not _static(source) or not _is_f32(source[0]):  # type: ignore[index]
        return None
    assert source is not None
    first = order.previous_writer(second, source[0])
    if not isinstance(first, neuron.TensorScalarOp) or first.op1 is not None or not _float_only(first):
        return None
    if first.op0.data not in _FLOAT_ALU_OPS:
        return None
    if not _same(first.access("dst"), source) or _instruction_users(source[0]) != {first, second}:
        return None
    return first


def _available_at(value: SSAValue | None, op: Operation, order: ProgramOrder) -> bool:
    """Whether an access's dynamic offset `value` is available at `op` (a block argument of a block enclosing
    it, or defined before it there); index arithmetic computing it later in `op`'s block from values available
    at `op` moves up to `op` to make it so."""
    if value is None:
        return True
    owner = value.owner
    if isinstance(owner, Block):
        current: Operation | None = op
        while current is not None:
            if current.parent_block() is owner:
                return True
            parent = current.parent_block()
            current = parent.parent_op() if parent is not None else None
        return False
    if _defined_before(owner, op, order):
        return True
    movable = owner.dialect_name() == "arith" and not owner.regions and owner.parent_block() is op.parent_block()
    if not movable or not all(_available_at(operand, op, order) for operand in owner.operands):
        return False
    owner.detach()
    op.parent_block().insert_op_before(owner, op)  # type: ignore[union-attr]
    order.moved_before(owner, op)
    return True


def _forward_into_copy(copy: neuron.TensorCopyOp, order: ProgramOrder) -> bool:
    """tensor_scalar / tensor_tensor / activation -> t (whole, read by the copy and by DMAs between the two that
    read all of it); tensor_copy t -> window of d  ==>  the first instruction writes the window of d, and those
    DMAs read it there."""
    source, target = copy.access("src"), copy.access("dst")
    if not _static(source) or target is None or not _float_only(copy):
        return False
    assert source is not None
    same_type = source[0].type.element_type == target[0].type.element_type  # type: ignore[attr-defined]
    if source[0] is target[0] or not (_is_f32(source[0]) or same_type):
        return False
    writer = order.previous_writer(copy, source[0])
    if not isinstance(
        writer, neuron.TensorScalarOp | neuron.TensorTensorOp | neuron.ScalarTensorTensorOp | neuron.ActivationOp
    ):
        return False
    if not _float_only(writer):
        return False
    if not _same(writer.access("dst"), source):
        return False
    if source[1] != full_access(source[0])[1]:
        return False
    readers = _readers_between(writer, copy, source, order)
    if readers is None or not _untouched_between(writer, copy, target[0], order):
        return False
    if not _available_at(target[2], writer, order) or not _hoist_alloc(target[0], writer, order):
        return False
    for reader, role in readers:  # they read the same values where the writer now puts them
        accesses = _accesses(reader)
        accesses[role] = target
        moved = type(reader).build_instruction(reader.engine_kind, accesses, _properties(reader))
        _replace(reader, moved, order)
    if readers:  # listed again when asked (rare: a merge without them edits the lists in place)
        order.forget(source[0])
        order.forget(target[0])
    accesses = _accesses(writer)
    accesses["dst"] = target
    fused = type(writer).build_instruction(writer.engine_kind, accesses, _properties(writer))
    _merge(writer, fused, copy, source[0], order)
    return True


def _read_from_psum(reader: neuron.TensorScalarOp, order: ProgramOrder) -> bool:
    """tensor_copy PSUM p (fp32) -> t (fp32, whole, read only by `reader`); tensor_scalar of t  ==>  the
    tensor_scalar of p, where nothing between the two writes p or touches other PSUM."""
    if reader.engine_kind not in _FLOAT_ENGINES or not _float_only(reader):
        return False
    source = reader.access("src")
    if not _static(source) or not _is_f32(source[0]):  # type: ignore[index]
        return False
    assert source is not None
    copy = order.previous_writer(reader, source[0])
    if not isinstance(copy, neuron.TensorCopyOp) or copy.parent_block() is not reader.parent_block():
        return False
    accumulator = copy.access("src")
    if not _static(accumulator) or not _same(copy.access("dst"), source):
        return False
    assert accumulator is not None
    if memory_of(accumulator[0].type) is not Memory.PSUM or not _is_f32(accumulator[0]):
        return False
    if source[1] != full_access(source[0])[1] or _instruction_users(source[0]) != {copy, reader}:
        return False
    if order.used_between(copy, reader, accumulator[0], writes_only=True) or _psum_touched_between(copy, reader):
        return False
    result = reader.access("dst")
    assert result is not None
    if any(not isinstance(user, neuron.DmaCopyOp) for user in _instruction_users(result[0]) - {reader}):
        return False  # more work on chip follows: the copy and the scaling are steps of a chain two engines share
    accesses = _accesses(reader)
    accesses["src"] = accumulator
    fused = neuron.TensorScalarOp.build_instruction(reader.engine_kind, accesses, _properties(reader))
    _merge(reader, fused, copy, source[0], order)
    return True


def _psum_touched_between(first: Operation, last: Operation) -> bool:
    """Whether an op strictly between `first` and `last` (one block), nested ones included, allocates a PSUM
    buffer or writes one: what would make PSUM held across the span grow."""
    op = first.next_op
    while op is not None and op is not last:
        for inner in op.walk():
            if isinstance(inner, neuron.AllocOp) and inner.memory is Memory.PSUM:
                return True
            if isinstance(inner, InstructionOp):
                spec = inner.spec()
                for role in spec.writes + spec.optional_writes:
                    buffer = getattr(inner, role)
                    if buffer is not None and memory_of(buffer.type) is Memory.PSUM:
                        return True
        op = op.next_op
    return False


def _readers_between(
    writer: InstructionOp, copy: InstructionOp, source: Access, order: ProgramOrder
) -> list[tuple[InstructionOp, str]] | None:
    """The DMAs besides `writer` and `copy` that use `source`'s buffer, each with the role it reads it in: each
    reads all of it (`source`'s pattern, one role) and stands between the two in their block, as a store of an
    evacuated tile does before the copy that inserts the tile into a row. None when another use exists: moving an
    engine's read to the window measured slower (a ViT-B/16 training step 553.2 -> 553.6 us)."""
    readers: list[tuple[InstructionOp, str]] = []
    for user in _instruction_users(source[0]) - {writer, copy}:
        if not isinstance(user, neuron.DmaCopyOp) or user.parent_block() is not copy.parent_block():
            return None
        roles = [role for role in user.present_roles() if getattr(user, role) is source[0]]
        if len(roles) != 1 or _writes(user, source[0]) or not _same(user.access(roles[0]), source):
            return None
        if not (order.precedes(writer, user) and order.precedes(user, copy)):
            return None
        readers.append((user, roles[0]))
    return readers


@dataclass(frozen=True)
class NeuronFuseInstructionsPass(ModulePass):
    name = "neuron-fuse-instructions"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in defined_functions(op):
            order = ProgramOrder()
            for instruction in [i for i in function.body.walk() if isinstance(i, InstructionOp)]:
                if instruction.parent is None:
                    continue  # erased by an earlier merge
                if isinstance(instruction, neuron.TensorReduceOp):
                    _fuse_accumulate(instruction, order)
                elif isinstance(instruction, neuron.TensorScalarOp):
                    _fuse_negate(instruction, order) or _fuse_scalar_pair(instruction, order)
                elif isinstance(instruction, neuron.TensorCopyOp):
                    _forward_into_copy(instruction, order)
            # after the merges above, so that the reader is the instruction they leave (one pass of all its steps)
            for instruction in [i for i in function.body.walk() if isinstance(i, neuron.TensorScalarOp)]:
                if instruction.parent is not None:
                    _read_from_psum(instruction, order)
