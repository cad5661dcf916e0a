"""Row kernels: one computation per row of [rows, ...] tensors, with several rows on each partition per DMA.

A kernel that works row by row (layer norm and its backward, softmax's backward) puts rows on partitions. One row
per partition makes each DMA move one row per partition: a 768-wide bf16 row is 1.5 KiB, below the 4 KiB per
partition at which a transfer reaches full rate, and every transfer pays the fixed DMA latency for 128 rows
only. A *row group* instead holds `k` consecutive rows on each partition: partition i of a group starting at row
r holds rows r + i k .. r + i k + k - 1, so one DMA moves k rows per partition as one contiguous chunk (when a row
is contiguous), and the kernel computes on each row j < k as a [p, ...] window of the group's tile (read in
place: elementwise instructions take any access pattern). The rows are computed in straight-line code, each with
its own tiles, their steps emitted in wavefront order (`wavefront`: at time t, step s of row t - s for every s).
Each engine runs its queue in program order, so that order lets every engine work on one row while the others
work on the rows before and after it (a loop over j whose body's buffers every j reused ran one row's
chain after another). `STRAIGHT_LINE_ROWS` bounds k for that.

`for_row_groups` covers [0, rows): groups of 128 k rows in a loop, then the remaining whole 128-row tiles as one
group of fewer rows per partition, then the partial last tile (fewer than 128 rows) as a group of one row per
partition. `pipelined_row_groups` covers the same groups in straight-line code with one wavefront over the rows of
all of them, when they are few enough (`PIPELINED_ROW_TILES`): in a loop each engine's queue holds one group's
steps before the next group's, so a group's first steps wait until the engines have finished the group before,
and each group pays its chain's latency. `RowGroup.load` and `RowGroup.store` move a group's tile between SBUF
and a row view ([rows, ...], any strides) of an HBM tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from xdsl.ir import Attribute, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import PARTITION_TILE, layout_of, load, store, view
from neuron_mlir.lowering.convert_torch_to_tile.matmul import carry
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import Memory

# The most rows per partition of a group computed in straight-line code: the code grows with it, and past a few
# rows the DMA is at full rate and the chains overlap anyway.
STRAIGHT_LINE_ROWS = 8

State = TypeVar("State")

# The most 128-row tiles `pipelined_row_groups` puts in straight-line code: the program grows with the rows (about a
# dozen instructions per row tile), so longer kernels keep the loop over groups.
PIPELINED_ROW_TILES = 32
# The fewest groups `pipelined_row_groups` takes: two groups are the two copies neuron-unroll-loops makes of the
# loop's body, which overlap as well (a BERT-base layer norm backward of 512 rows: 2.5 us slower in one wavefront).
PIPELINED_MIN_GROUPS = 3


def wavefront(rows: int, steps: Sequence[Callable[[int], None]], oldest_first: bool = True) -> None:
    """`step(j)` for every step and row j < `rows` (each step of a row depends on its previous steps), emitted in
    wavefront order: at time t, step s of row t - s for every s, the oldest row's step first, or with
    `oldest_first=False` the newest row's (an engine that runs the first step of every row, as a chain whose
    steps each take one engine, then fills its queue with first steps before the later ones)."""
    order = range(len(steps) - 1, -1, -1) if oldest_first else range(len(steps))
    for time in range(rows + len(steps) - 1):
        for index in order:
            row = time - index
            if 0 <= row < rows:
                steps[index](row)


def rows_per_partition(row_bytes: int, group_bytes_per_row: int, budget: int, rows: int, full_rate_bytes: int) -> int:
    """How many rows a group puts on each partition: enough for `row_bytes` (the bytes one row of the smallest
    operand moves) to reach `full_rate_bytes` per partition, the size from which a DMA runs at full rate (the
    target's `dma_full_rate_bytes_per_partition`), as long as the group's tiles (`group_bytes_per_row` per row:
    every operand loaded or stored whole) fit in `budget`, and no more than the rows give each of 128
    partitions."""
    wanted = max(1, -(-full_rate_bytes // max(1, row_bytes)))
    fitting = max(1, budget // max(1, group_bytes_per_row))
    return max(1, min(wanted, fitting, rows // PARTITION_TILE))


@dataclass(frozen=True)
class RowGroup:
    """Rows [first, first + partitions * per_partition) on `partitions` partitions, `per_partition` each.

    `index` is the group's position in the row view seen as [rows / per_partition, per_partition, ...]: the loop
    value of the groups' loop, or a constant for the groups after it (whose views start at `first`)."""

    first: Index
    partitions: int
    per_partition: int
    index: Index
    offset_rows: int  # rows the group's view skips: 0 in the loop, `first` for the groups after it

    def grouped(self, em: LoopNestBuilder, rows_view: SSAValue) -> SSAValue:
        """`rows_view` ([rows, ...]) viewed as [n, per_partition, ...] from row `offset_rows`."""
        layout = layout_of(rows_view)
        rows, *rest = layout.shape
        row_stride, *rest_strides = layout.strides
        k = self.per_partition
        count = (rows - self.offset_rows) // k
        return view(
            em,
            rows_view,
            Layout(
                (count, k, *rest),
                (k * row_stride, row_stride, *rest_strides),
                layout.offset + self.offset_rows * row_stride,
            ),
        )

    def load(self, em: LoopNestBuilder, rows_view: SSAValue, element_type: Attribute | None = None) -> SSAValue:
        """The group's [partitions, per_partition, ...] tile of `rows_view`."""
        grouped = self.grouped(em, rows_view)
        rest = layout_of(grouped).shape[2:]
        indices = [self.index, 0, *(0 for _ in rest)]
        return load(em, grouped, indices, (self.partitions, self.per_partition, *rest), element_type)

    def store(self, em: LoopNestBuilder, value: SSAValue, rows_view: SSAValue) -> None:
        grouped = self.grouped(em, rows_view)
        rest = layout_of(grouped).shape[2:]
        store(em, value, grouped, [self.index, 0, *(0 for _ in rest)])

    def row(self, em: LoopNestBuilder, group_tile: SSAValue, j: Index) -> SSAValue:
        """Row j of every partition of a group tile: the [partitions, ...] window at [j, 0, ...]."""
        source = group_tile.type
        assert isinstance(source, TileType)
        shape = source.get_shape()
        rest = shape[2:] or (1,)
        window = TileType((shape[0], *rest), source.element_type, source.memory)
        indices = [em.index(j), *(em.index(0) for _ in shape[2:])]
        return em.insert(tile.ExtractOp(group_tile, indices, window)).result

    def empty(self, em: LoopNestBuilder, rest: Sequence[int], element_type: Attribute) -> SSAValue:
        """A [partitions, per_partition, *rest] SBUF tile to fill row by row (`tile.insert`)."""
        result = TileType((self.partitions, self.per_partition, *rest), element_type, Memory.SBUF)
        return em.insert(tile.EmptyOp(result)).result

    def put(self, em: LoopNestBuilder, value: SSAValue, group_tile: SSAValue, j: Index) -> SSAValue:
        """`group_tile` with row j replaced by `value` ([partitions, ...])."""
        shape = group_tile.type.get_shape()  # type: ignore[attr-defined]
        indices = [em.index(j), *(em.index(0) for _ in shape[2:])]
        return em.insert(tile.InsertOp(value, group_tile, indices)).result


def for_row_groups(
    em: LoopNestBuilder,
    rows: int,
    per_partition: int,
    body: Callable[[LoopNestBuilder, RowGroup, list[SSAValue]], list[SSAValue]],
    values: Sequence[SSAValue] = (),
) -> list[SSAValue]:
    """`values = body(emitter, group, values)` for every group covering [0, rows) (module docstring): the full
    groups in a loop carrying `values` (accumulators), then the rest; returns the final values."""
    k = max(1, per_partition)
    span = PARTITION_TILE * k
    full = rows // span
    carried = list(values)
    if full:
        carried = carry(
            em,
            0,
            full * PARTITION_TILE,
            PARTITION_TILE,
            carried,
            lambda e, index, current: body(e, RowGroup(e.mul(index, k), PARTITION_TILE, k, index, 0), current),
        )
    first = full * span
    tiles, rest = divmod(rows - first, PARTITION_TILE)
    if tiles:
        carried = body(em, RowGroup(first, PARTITION_TILE, tiles, 0, first), carried)
        first += tiles * PARTITION_TILE
    if rest:
        carried = body(em, RowGroup(first, rest, 1, 0, first), carried)
    return carried


def row_groups(rows: int, per_partition: int) -> list[RowGroup]:
    """The groups `for_row_groups` covers [0, rows) with, each at a constant position (no loop)."""
    k = max(1, per_partition)
    span = PARTITION_TILE * k
    groups = [RowGroup(first, PARTITION_TILE, k, 0, first) for first in range(0, rows // span * span, span)]
    first = rows // span * span
    tiles, rest = divmod(rows - first, PARTITION_TILE)
    if tiles:
        groups.append(RowGroup(first, PARTITION_TILE, tiles, 0, first))
        first += tiles * PARTITION_TILE
    if rest:
        groups.append(RowGroup(first, rest, 1, 0, first))
    return groups


def pipelined_row_groups(
    em: LoopNestBuilder,
    rows: int,
    per_partition: int,
    open_group: Callable[[LoopNestBuilder, RowGroup], State],
    steps: Sequence[Callable[[State, int], None]],
    close_group: Callable[[State], None],
    oldest_first: bool = True,
    split_last: bool = False,
) -> bool:
    """Every row group of [0, rows) (`row_groups`) in straight-line code, the rows of all groups in one wavefront:
    `open_group` (the group's loads) just before its first row's first step, `step(state, j)` for each step of
    row j of a group, `close_group` (its stores) right after its last row's last step. The engines then work on
    the last rows of a group and the first rows of the next at once, and each load is emitted in the order the
    rows need it (DMA bandwidth is shared in program order). False, with nothing emitted, when the rows take more
    than `PIPELINED_ROW_TILES` row tiles or make fewer than `PIPELINED_MIN_GROUPS` groups.

    With `split_last`, the last group of several rows per partition goes as that many groups of one row per
    partition: nothing overlaps the last group's store, and a smaller one, issued as soon as its rows are done
    while the next row is computed, ends sooner."""
    groups = row_groups(rows, per_partition)
    if -(-rows // PARTITION_TILE) > PIPELINED_ROW_TILES or len(groups) < PIPELINED_MIN_GROUPS:
        return False
    if split_last and groups[-1].per_partition > 1:
        split = groups.pop()
        assert isinstance(split.first, int)  # `row_groups` places every group at a constant row
        starts = [split.first + i * split.partitions for i in range(split.per_partition)]
        groups += [RowGroup(start, split.partitions, 1, 0, start) for start in starts]
    owners = [(number, j) for number, group in enumerate(groups) for j in range(group.per_partition)]
    states: dict[int, State] = {}
    last = len(steps) - 1

    def scheduled(index: int, step: Callable[[State, int], None]) -> Callable[[int], None]:
        def run(row: int) -> None:
            number, j = owners[row]
            if index == 0 and j == 0:
                states[number] = open_group(em, groups[number])
            step(states[number], j)
            if index == last and j == groups[number].per_partition - 1:
                close_group(states.pop(number))

        return run

    wavefront(len(owners), [scheduled(i, step) for i, step in enumerate(steps)], oldest_first)
    return True
