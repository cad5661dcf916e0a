"""Building structured loop nests: constants, index arithmetic, tiled `scf.for` loops and loop-carried values.

Lowerings describe *what* to compute for one tile; the `LoopNestBuilder` lays the tiles out: full tiles in an
`scf.for`, the partial last tile (shapes that are not multiples of the tile size) peeled after it with its own
static size, so every tile shape stays static and verifiable while IR size grows with loop nests, never with the
number of tiles. Every op created gets the location of the op being lowered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, LocationAttr
from xdsl.ir import Block, Operation, SSAValue

from neuron_mlir.ir.locations import describe_location

if TYPE_CHECKING:
    from neuron_mlir.lowering.convert_torch_to_tile.context import ConversionContext

Index = SSAValue | int
OpT = TypeVar("OpT", bound=Operation)


class LoopNestBuilder:
    """Inserts ops at one point (before `anchor` in `block`, or at the block's end), with one location.

    `context`: in convert-torch-to-tile, the state the lowerings of the function being converted share; emitters
    made from this one (`nested`, `located`, `at`) carry it on.
    """

    def __init__(
        self,
        block: Block,
        anchor: Operation | None,
        location: LocationAttr,
        constants: dict[int, SSAValue] | None = None,
        constant_block: Block | None = None,
        context: ConversionContext | None = None,
    ):
        self.block = block
        self.anchor = anchor
        self.location = location
        # index constants are created once, at the start of the function body, and shared by all loops
        self.constants = constants if constants is not None else {}
        self.constant_block = constant_block if constant_block is not None else block
        self.context = context

    def insert(self, op: OpT) -> OpT:
        for nested in op.walk():
            nested.location = self.location
        if self.anchor is not None:
            self.block.insert_op_before(op, self.anchor)
        else:
            self.block.add_op(op)
        return op

    def nested(self, block: Block) -> LoopNestBuilder:
        """An emitter appending to `block` (a loop body), sharing constants and location."""
        return LoopNestBuilder(block, None, self.location, self.constants, self.constant_block, self.context)

    def located(self, location: LocationAttr) -> LoopNestBuilder:
        """An emitter inserting at the same point with `location` (one op's work emitted inside another's)."""
        return LoopNestBuilder(self.block, self.anchor, location, self.constants, self.constant_block, self.context)

    def at(self, block: Block, anchor: Operation | None, location: LocationAttr | None = None) -> LoopNestBuilder:
        """An emitter inserting before `anchor` in `block` (another op's loop nest), sharing constants and context."""
        where = location if location is not None else self.location
        return LoopNestBuilder(block, anchor, where, self.constants, self.constant_block, self.context)

    def where(self) -> str:
        """' (at file.py:12 (model.l1))' for diagnostics, or '' when the location is unknown."""
        text = describe_location(self.location)
        return f" (at {text})" if text else ""

    # ---- index values --------------------------------------------------------------------------------------

    def index(self, value: Index) -> SSAValue:
        if isinstance(value, SSAValue):
            return value
        if value not in self.constants:
            constant = arith.ConstantOp(IntegerAttr(value, IndexType()))
            constant.location = self.location
            first = self.constant_block.first_op
            if first is None:
                self.constant_block.add_op(constant)
            else:
                self.constant_block.insert_op_before(constant, first)
            constant.result.name_hint = f"c{value}" if value >= 0 else f"c_neg{-value}"
            self.constants[value] = constant.result
        return self.constants[value]

    def add(self, lhs: Index, rhs: Index) -> Index:
        if isinstance(lhs, int) and isinstance(rhs, int):
            return lhs + rhs
        if rhs == 0:
            return lhs
        if lhs == 0:
            return rhs
        return self.insert(arith.AddiOp(self.index(lhs), self.index(rhs))).result

    def mul(self, lhs: Index, rhs: Index) -> Index:
        if isinstance(lhs, int) and isinstance(rhs, int):
            return lhs * rhs
        if rhs == 1:
            return lhs
        if lhs == 1:
            return rhs
        if rhs == 0 or lhs == 0:
            return 0
        return self.insert(arith.MuliOp(self.index(lhs), self.index(rhs))).result

    # ---- loops ---------------------------------------------------------------------------------------------

    def for_each(self, count: int, body: Callable[[LoopNestBuilder, Index], None]) -> None:
        """Run `body(emitter, i)` for i in range(count): an `scf.for` (or straight-line code for one trip)."""
        if count <= 0:
            return
        if count == 1:
            body(self, 0)
            return
        block = Block(arg_types=[IndexType()])
        self.insert(scf.ForOp(self.index(0), self.index(count), self.index(1), [], block))
        inner = self.nested(block)
        body(inner, block.args[0])
        inner.insert(scf.YieldOp())

    def for_each_index(self, extents: Sequence[int], body: Callable[[LoopNestBuilder, list[Index]], None]) -> None:
        """Run `body(emitter, [i0, i1, ...])` for every index tuple of `extents`: one `for_each` per extent,
        outermost first (none for no extents; no call when an extent is 0)."""

        def level(e: LoopNestBuilder, done: list[Index], left: Sequence[int]) -> None:
            if not left:
                body(e, done)
                return
            e.for_each(left[0], lambda inner, i: level(inner, [*done, i], left[1:]))

        level(self, [], extents)

    def for_tiles(self, extent: int, tile: int, body: Callable[[LoopNestBuilder, Index, int], None]) -> None:
        """Cover [0, extent) with tiles: `body(emitter, offset, size)` for the full tiles and the remainder."""
        full, remainder = divmod(extent, tile)
        if full == 1:
            body(self, 0, tile)
        elif full > 1:
            block = Block(arg_types=[IndexType()])
            self.insert(scf.ForOp(self.index(0), self.index(full * tile), self.index(tile), [], block))
            inner = self.nested(block)
            body(inner, block.args[0], tile)
            inner.insert(scf.YieldOp())
        if remainder:
            body(self, full * tile, remainder)

    def accumulate_tiles(
        self,
        extent: int,
        tile: int,
        first: Callable[[LoopNestBuilder, Index, int], SSAValue],
        step: Callable[[LoopNestBuilder, Index, int, SSAValue], SSAValue],
    ) -> SSAValue:
        """Fold over the tiles of [0, extent): `first` starts the value, `step` folds each later tile into it.

        The first tile is peeled so that the value never needs an identity element (PSUM accumulation
        starts by overwriting); the remaining full tiles run in an `scf.for` carrying the value.
        """
        (value,) = self.accumulate_tile_values(
            extent,
            tile,
            lambda em, offset, size: [first(em, offset, size)],
            lambda em, offset, size, values: [step(em, offset, size, values[0])],
        )
        return value

    def accumulate_tile_values(
        self,
        extent: int,
        tile: int,
        first: Callable[[LoopNestBuilder, Index, int], list[SSAValue]],
        step: Callable[[LoopNestBuilder, Index, int, list[SSAValue]], list[SSAValue]],
    ) -> list[SSAValue]:
        """`accumulate_tiles` carrying several values (the first tile peeled, an `scf.for` carrying them over the
        other full tiles, then the remainder)."""
        full, remainder = divmod(extent, tile)
        if full == 0:
            return first(self, 0, remainder)
        values = first(self, 0, tile)
        if full == 2:
            values = step(self, tile, tile, values)
        elif full > 2:
            block = Block(arg_types=[IndexType(), *(v.type for v in values)])
            loop = self.insert(scf.ForOp(self.index(tile), self.index(full * tile), self.index(tile), values, block))
            inner = self.nested(block)
            inner.insert(scf.YieldOp(*step(inner, block.args[0], tile, list(block.args[1:]))))
            values = list(loop.results)
        if remainder:
            values = step(self, full * tile, remainder, values)
        return values

    def accumulate_each(
        self,
        count: int,
        first: Callable[[LoopNestBuilder, Index], SSAValue],
        step: Callable[[LoopNestBuilder, Index, SSAValue], SSAValue],
    ) -> SSAValue:
        """`accumulate_tiles` with tiles of one element (a fold over range(count))."""
        return self.accumulate_tiles(
            count, 1, lambda em, offset, _: first(em, offset), lambda em, offset, _, acc: step(em, offset, acc)
        )
