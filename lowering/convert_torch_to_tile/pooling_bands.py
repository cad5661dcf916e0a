"""2-d max pooling and its backward over SBUF-resident bands of whole rows (the path for a CNN's pooling layers).

Planes (batch x channels) lie on the partitions, as in pooling.py. Instead of one strided DMA per kernel offset
and output tile, a block of output rows reads its input rows once: one DMA of whole rows per plane into a band
in SBUF whose border holds the padding's -inf (written on chip, so no padded copy of the input goes through
HBM). The kernel taps are then strided windows of that band (`tile.extract` with steps), which VectorE reads
in place:

- forward: the maximum is separable: first over the kernel's columns (a [band rows, out columns] tile), then
  over its rows. The indices follow the same two stages, in PyTorch's scan order (row-major over the window,
  the first of equal maxima wins): a column stage keeps the first winning column offset (later offsets only
  replace it on a strict `>`, so `max(arg, better * offset)` is that select), a row stage the first winning row
  with its column, and the window origin's flat index (a GpSimdE iota) is added at the end, in fp32 (the
  engines add in fp32 whatever they write), which the store's DMA converts to the int64 result: an int64 tile
  cost GpSimdE twice the passes (ResNet-50's pool: forward 47.5 -> 45.7 us). Offsets inside a window are bf16
  while it holds them exactly (`offset_type`: below 256, as for ResNet-50's 112-wide planes), fp32 beyond.
  With no user of the indices only the maxima are computed.
- backward: the input gradient is gathered, not scattered (as PyTorch's CUDA kernel does: every index lies in
  its own window). The input's padded rows and columns split into `stride`-spaced phases; kernel tap k
  (offset k * dilation = q * stride + a) sends output position o to phase a, lattice position o + q. So per
  tap, `select(index - origin == displacement(k), grad, 0)` over the output positions whose share lands on the
  phase's lattice positions inside the input, shifted by q (windows of tiles with q rows and columns of border,
  where the offsets hold a value no tap matches), summed per phase in PyTorch's order of accumulation (output
  positions row-major: taps in reverse scan order), and each phase is written into the gradient's rows with
  the stride as step. The offsets `index - origin` take
  the forward's `offset_type` and grad_output its own 16-bit type (VectorE compares 16-bit tiles at 4x and
  selects at 2x its fp32 rate). The sums take the gradient's type: PyTorch's CPU kernel adds each share into
  the gradient in that type, rounding after every add, so 16-bit sums in its order are its bits (fp32 sums
  rounded once differed from them where three or four windows share a maximum), and fp32 ones are fp32's.
  A phase goes into the block's gradient rows as soon as its last tap is added, so that its last add writes
  them itself. Every element is written once.

Row blocks are emitted one chain of dependent passes each; the forward's go two side by side, a pass of each
in turn, so that an engine waiting for another's pass has the other block's work. The backward's run one after
another, each block's loads and offsets emitted ahead of the block before's taps (`_pipelined`).

The bands' rows are short (a ResNet-50 plane's 112 bf16 elements between two border columns): a DMA straight
into the band would move 224-byte chunks at the overhead-bound rate, so convert-tile-to-neuron loads such rows
whole and copies them into the band on chip.

Row blocks are unrolled and sized for a share of SBUF (the forward's first and last halved); partition tiles
loop. `fits` says when this path applies (2-d, whole rows in an engine access pattern); pooling.py keeps the
general one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from xdsl.dialects.builtin import bf16, f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    PARTITION_TILE,
    alloc,
    element_type_of,
    layout_of,
    load,
    result_element_type,
    result_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime import hardware
from neuron_mlir.runtime.hardware import Memory

NEG_INF = float("-inf")
# Per-partition bytes one row block's tiles may take (a share of the smallest target's 192 KiB, so that two
# blocks can be in flight).
BLOCK_BYTES = 48 * 1024
# The same for a forward without indices: its few maxima per block take less time than the block's load, so
# smaller blocks let each load overlap the previous block's maxima (ResNet-50's pool: 42.7 us in one block of
# 48 KiB, 32.1 in blocks of 16 KiB, 30.6 in blocks of 8 KiB; with indices and in the backward, 16 KiB blocks
# were slower: 137.2 -> 153.1 us for the training step).
VALUES_BLOCK_BYTES = 8 * 1024
# Offsets from a window's origin below this are integers bf16 holds exactly; in bf16 VectorE compares them at 4x
# its fp32 rate (and selects and adds at 2x).
EXACT_BF16 = 256
# Forward row blocks emitted side by side, a pass of each in turn (`_interleaved`): ResNet-50's pool 51.6 -> 51.0 us
# with indices, 30.3 -> 30.0 without. The backward keeps one block at a time: two side by side took 62.3 -> 65.5
# us (both blocks' stores then come late, and the engines are as busy either way); one block's loads and offsets
# ahead of the block before's taps (`_pipelined`): 58.6 -> 54.5 us. The forward that way: 47.9 -> 50.8.
FORWARD_INTERLEAVE = 2
# A band row must be addressable by one engine access pattern step (int16 elements).
MAX_STEP = hardware.ACCESS_PATTERN_STEP_RANGE[1]


def _itemsize(element_type: Attribute) -> int:
    width = getattr(element_type, "width", None)
    if width is not None:
        return max(1, width.data // 8)
    bitwidth = getattr(element_type, "bitwidth", 32)
    return max(1, int(bitwidth) // 8)


class BandGeometry:
    """One spatial dim of a 2-d max pooling: input n, output o, kernel k, stride s, padding p, dilation d and the
    high-side padding `high` (ceil mode's last windows)."""

    def __init__(self, n: int, o: int, k: int, s: int, p: int, d: int, high: int) -> None:
        self.n, self.o, self.k, self.s, self.p, self.d, self.high = n, o, k, s, p, d, high
        self.padded = n + p + high

    def band_rows(self, rows: int) -> int:
        """Padded input rows that `rows` consecutive outputs read."""
        return (rows - 1) * self.s + self.d * (self.k - 1) + 1

    def phase(self, k: int) -> tuple[int, int]:
        """(shift q, phase a) of tap k: offset k * d = q * s + a."""
        return divmod(k * self.d, self.s)

    @property
    def lattice(self) -> int:
        """Lattice positions per phase covering the padded extent."""
        return -(-self.padded // self.s)

    @property
    def shift(self) -> int:
        return self.phase(self.k - 1)[0]


def offset_type(geometry: Sequence[BandGeometry]) -> Attribute:
    """The element type of flat offsets inside a window: bf16 while the largest (the last tap's) is exact in it."""
    rows, cols = geometry
    largest = (rows.k - 1) * rows.d * cols.n + (cols.k - 1) * cols.d
    return bf16 if largest < EXACT_BF16 else f32


def fits(geometry: Sequence[BandGeometry]) -> bool:
    """Whether the band path takes a pooling: 2-d, and a band row (and a stride of them) is one access pattern
    step, with room for a few rows in a block."""
    if len(geometry) != 2 or min(g.o for g in geometry) < 1:
        return False
    rows, cols = geometry
    width = cols.padded
    return max(rows.s, rows.d) * width <= MAX_STEP and 16 * width <= BLOCK_BYTES


def _fill(em: LoopNestBuilder, value: float, shape: Sequence[int], element_type: Attribute) -> SSAValue:
    return em.insert(tile.FillOp(value, TileType(tuple(shape), element_type, Memory.SBUF))).result


def _window(em: LoopNestBuilder, source: SSAValue, at: Sequence[int], shape: Sequence[int],
            steps: Sequence[int] | None = None) -> SSAValue:  # fmt: skip
    source_type = source.type
    assert isinstance(source_type, TileType)
    result = TileType(tuple(shape), source_type.element_type, Memory.SBUF)
    return em.insert(tile.ExtractOp(source, [em.index(i) for i in at], result, steps)).result


def _binary(em: LoopNestBuilder, op: str, lhs: SSAValue, rhs: SSAValue, element_type: Attribute) -> SSAValue:
    assert isinstance(lhs.type, TileType)
    result = TileType(lhs.type.get_shape(), element_type, Memory.SBUF)
    return em.insert(tile.BinaryOp(lhs, rhs, op, result)).result


def _scalar(em: LoopNestBuilder, op: str, value: SSAValue, scalar: float, element_type: Attribute) -> SSAValue:
    assert isinstance(value.type, TileType)
    result = TileType(value.type.get_shape(), element_type, Memory.SBUF)
    return em.insert(tile.BinaryScalarOp(value, op, result, scalar=scalar)).result


def _bordered(
    em: LoopNestBuilder,
    source: SSAValue,
    p0: Index,
    ps: int,
    shape: tuple[int, int],
    rows: tuple[int, int],
    at: tuple[int, int],
    columns: int,
    border: float | None,
    element_type: Attribute,
    prepare: Callable[[SSAValue, tuple[int, int]], SSAValue] | None = None,
) -> SSAValue:
    """A [ps, shape] SBUF tile holding source[p0:p0+ps, rows[0]:rows[1], :columns] at `at`, `border` elsewhere
    (None: left unwritten, for a reader that never uses it). With `prepare`, the tile holds prepare(rows, `at`)
    instead, in prepare's type, computed from the rows as loaded (in `element_type`) before they take their place.

    The rows arrive by one DMA; only the border is written by the engines."""
    height, width = shape
    count = rows[1] - rows[0]
    value = None
    band_type = element_type
    if count > 0:
        value = load(em, source, [p0, rows[0], 0], (ps, count, columns), element_type)
        if prepare is not None:
            value = prepare(value, at)
            assert isinstance(value.type, TileType)
            band_type = value.type.element_type
    band = em.insert(tile.EmptyOp(TileType((ps, height, width), band_type, Memory.SBUF))).result
    if value is not None:
        band = em.insert(tile.InsertOp(value, band, [em.index(at[0]), em.index(at[1])])).result
    top, left = (at[0], at[1]) if count > 0 else (height, 0)
    bottom = height - top - max(count, 0)
    right = width - left - columns
    pieces = [
        ((top, width), (0, 0)),
        ((bottom, width), (top + max(count, 0), 0)),
        ((max(count, 0), left), (top, 0)),
        ((max(count, 0), right), (top, left + columns)),
    ]
    for (h, w), (r, c) in pieces:
        if border is not None and h > 0 and w > 0:
            band = em.insert(tile.InsertOp(_fill(em, border, (ps, h, w), band_type), band,
                                           [em.index(r), em.index(c)])).result  # fmt: skip
    return band


def _row_blocks(
    total: int, per_row_bytes: int, fixed: int = 0, budget: int | None = None, taper: bool = False
) -> list[tuple[int, int]]:
    """(start, count) blocks of `total` rows, each within `budget` (BLOCK_BYTES) at `per_row_bytes` (+ `fixed`
    rows). With `taper` the first and the last of several blocks are split in two: nothing overlaps the first
    block's load or the last block's store, so those are kept short (ResNet-50's pool alone: forward with indices
    54.2 -> 51.6 us, without 30.6 -> 30.3; its backward 63.7 -> 62.3 alone, but the real-width ResNet-50's
    backward graph 4490.9 -> 4542.0 us, so the backward keeps even blocks)."""
    budget = BLOCK_BYTES if budget is None else budget
    rows = max(1, min(total, budget // max(1, per_row_bytes) - fixed))
    count = -(-total // rows)
    rows = -(-total // count)  # even blocks
    blocks = [(start, min(rows, total - start)) for start in range(0, total, rows)]
    if not taper or len(blocks) < 2:
        return blocks
    tapered: list[tuple[int, int]] = []
    for i, (start, size) in enumerate(blocks):
        half = size // 2 if i in (0, len(blocks) - 1) else 0
        tapered += [(start, half), (start + half, size - half)] if half else [(start, size)]
    return tapered


def _interleaved(blocks: Sequence[Iterator[None]], width: int) -> None:
    """Run the blocks' emitters `width` at a time, a step of each in turn. Each block is one chain of dependent
    passes that the engines take turns on; with the next block's passes between them, an engine waiting for
    another has independent work (each engine runs its instructions in program order)."""
    active: list[Iterator[None]] = []
    pending = list(blocks)
    while active or pending:
        while pending and len(active) < width:
            active.append(pending.pop(0))
        for block in list(active):
            if next(block, StopIteration) is StopIteration:
                active.remove(block)


def _pipelined(blocks: Sequence[Iterator[None]]) -> None:
    """Run the blocks' emitters one after another, each block's first step (its loads and the passes that only
    prepare its operands) emitted before the rest of the block ahead of it: the engines run in program order, so
    the next block's loads are issued, and its operands ready, by the time this block's last pass ends."""
    for i, block in enumerate(blocks):
        if i == 0:
            next(block, None)
        if i + 1 < len(blocks):
            next(blocks[i + 1], None)
        for _ in block:
            pass


def emit_max_pool(em: LoopNestBuilder, op: Operation, x: SSAValue, geometry: Sequence[BandGeometry]) -> list[SSAValue]:
    """Max pooling of planes x[P, H, W] over row bands: values and (when used) PyTorch's flat input indices."""
    gh, gw = geometry
    partitions = layout_of(x).shape[0]
    x_type = element_type_of(x)
    value_type, index_type = result_element_type(op, 0), result_element_type(op, 1)
    want_indices = bool(op.results[1].uses)
    values = alloc(em, (partitions, gh.o, gw.o), value_type)
    indices = alloc(em, (partitions, gh.o, gw.o), index_type) if want_indices else None
    # the column stage's offsets (at most d * (k - 1)) are exact in a 16-bit float up to 256
    column_type = x_type if _itemsize(x_type) == 2 and gw.d * (gw.k - 1) <= 256 else f32
    size = _itemsize(x_type)
    per_row = gh.s * (gw.padded * size + gw.o * (size + (3 * 4 if want_indices else 0)))
    per_row += gw.o * (size + (4 * 4 if want_indices else 0))
    blocks = _row_blocks(gh.o, per_row, 1, None if want_indices else min(BLOCK_BYTES, VALUES_BLOCK_BYTES), True)

    def per_partition(e: LoopNestBuilder, p0: Index, ps: int) -> None:
        _interleaved([_max_pool_block(e, x, p0, ps, o0, rows, gh, gw, values, indices, column_type)
                      for o0, rows in blocks], FORWARD_INTERLEAVE)  # fmt: skip

    em.for_tiles(partitions, PARTITION_TILE, per_partition)
    shape = result_shape(op)
    results = [view(em, values, Layout.contiguous(shape))]
    if indices is None:  # nothing reads them: an unwritten tensor of the right type
        indices = alloc(em, (partitions, gh.o, gw.o), index_type)
    return [*results, view(em, indices, Layout.contiguous(shape))]


def _max_pool_block(
    em: LoopNestBuilder,
    x: SSAValue,
    p0: Index,
    ps: int,
    o0: int,
    rows: int,
    gh: BandGeometry,
    gw: BandGeometry,
    values: SSAValue,
    indices: SSAValue | None,
    column_type: Attribute,
) -> Iterator[None]:
    """Output rows [o0, o0 + rows): emitted a step per `next`."""
    x_type = element_type_of(x)
    where_type = offset_type((gh, gw))
    height = gh.band_rows(rows)
    first = o0 * gh.s  # the band's first padded row
    real = (max(first, gh.p) - gh.p, min(first + height, gh.p + gh.n) - gh.p)
    band = _bordered(em, x, p0, ps, (height, gw.padded), real, (real[0] + gh.p - first, gw.p), gw.n, NEG_INF, x_type)

    # column stage: [ps, height, out columns]
    best: SSAValue | None = None
    arg: SSAValue | None = None
    for kw in range(gw.k):
        tap = _window(em, band, [0, kw * gw.d], (ps, height, gw.o), [1, gw.s])
        if best is None:
            best = tap
            continue
        yield
        if indices is not None:
            better = _binary(em, "is_gt", tap, best, column_type)
            moved = better if kw * gw.d == 1 else _scalar(em, "multiply", better, float(kw * gw.d), column_type)
            arg = moved if arg is None else _binary(em, "max", arg, moved, column_type)
        best = _binary(em, "max", best, tap, x_type)
    assert best is not None
    if indices is not None and arg is None:
        arg = _fill(em, 0.0, (ps, height, gw.o), column_type)

    # row stage: [ps, rows, out columns]; the winner's offset from the window's origin in `where`
    result: SSAValue | None = None
    where: SSAValue | None = None
    shape = (ps, rows, gw.o)
    for kh in range(gh.k):
        yield
        tap = _window(em, best, [kh * gh.d, 0], shape, [gh.s, 1])
        here = None
        if arg is not None:
            here = _window(em, arg, [kh * gh.d, 0], shape, [gh.s, 1])
            if kh > 0 or column_type != where_type:
                here = _scalar(em, "add", here, float(kh * gh.d * gw.n), where_type)
        if result is None:
            result, where = tap, here
            continue
        if here is not None and where is not None:
            better = _binary(em, "is_gt", tap, result, where_type)
            where = em.insert(tile.SelectOp(better, here, where, TileType(shape, where_type, Memory.SBUF))).result
        result = _binary(em, "max", result, tap, x_type)
    assert result is not None
    if isinstance(result.owner, tile.ExtractOp):  # a 1 x 1 kernel: the window itself
        result = em.insert(tile.CopyOp(result, TileType(shape, x_type, Memory.SBUF))).result
    values_type = element_type_of(values)
    em.insert(tile.StoreOp(to_sbuf(em, result, values_type), values, [em.index(i) for i in (p0, o0, 0)]))
    if indices is None or where is None:
        return
    yield
    base = (o0 * gh.s - gh.p) * gw.n - gw.p
    origin = em.insert(tile.IotaOp(TileType(shape, f32, Memory.SBUF), [gh.s * gw.n, gw.s], base)).result
    flat = _binary(em, "add", where, origin, f32)
    em.insert(tile.StoreOp(flat, indices, [em.index(i) for i in (p0, o0, 0)]))


def emit_max_pool_backward(
    em: LoopNestBuilder,
    op: Operation,
    grad_out: SSAValue,
    indices: SSAValue,
    geometry: Sequence[BandGeometry],
) -> SSAValue:
    """grad_input planes [P, H, W] of a 2-d max pooling from grad_out and indices planes [P, OH, OW]."""
    gh, gw = geometry
    partitions = layout_of(grad_out).shape[0]
    out_type = result_element_type(op)
    grad = alloc(em, (partitions, gh.n, gw.n), out_type)
    columns = gw.lattice + gw.shift
    # about eight f32 tiles of the shifted output domain live at once, and the gradient rows
    per_row = 8 * 4 * columns + gh.s * gw.n * _itemsize(out_type)
    blocks = _row_blocks(gh.lattice, per_row, gh.shift)

    def per_partition(e: LoopNestBuilder, p0: Index, ps: int) -> None:
        # the selects' zeros, one tile for every block (windows of it)
        zeros = _fill(e, 0.0, (ps, max(rows for _, rows in blocks), gw.lattice), _grad_type(grad_out))
        _pipelined([_backward_block(e, grad_out, indices, grad, zeros, p0, ps, u0, rows, gh, gw)
                    for u0, rows in blocks])  # fmt: skip

    em.for_tiles(partitions, PARTITION_TILE, per_partition)
    return grad


def _grad_type(grad_out: SSAValue) -> Attribute:
    """The type grad_output's shares keep up to the sums: its own when 16-bit (a select moves it unchanged)."""
    return element_type_of(grad_out) if _itemsize(element_type_of(grad_out)) == 2 else f32


def _backward_block(
    em: LoopNestBuilder,
    grad_out: SSAValue,
    indices: SSAValue,
    grad: SSAValue,
    zeros: SSAValue,
    p0: Index,
    ps: int,
    u0: int,
    rows: int,
    gh: BandGeometry,
    gw: BandGeometry,
) -> Iterator[None]:
    """Lattice rows [u0, u0 + rows) of every phase, and the gradient rows they hold: emitted a step per `next`."""
    # the output positions the block's taps read: rows [u0 - shift, u0 + rows), columns [-shift, lattice)
    first = u0 - gh.shift
    shape = (rows + gh.shift, gw.lattice + gw.shift)
    real = (max(first, 0), min(u0 + rows, gh.o))
    at = (real[0] - first, gw.shift)
    # grad_output stays in its own type up to the phases' sums (a select moves it unchanged); the offsets from
    # each window's origin go to bf16 when it holds them exactly. They are computed from the indices as loaded
    # (the band of offsets takes them in place: an index band of its own cost a copy per block, 3 x 0.9 us of
    # ScalarE), and their border holds -1, which no tap matches, so no tap selects there and grad_output's border
    # is never read as a value (left unwritten: its zero fill was eight small instructions per block, 62.3 ->
    # 60.4 us for ResNet-50's pool); offsets that round in bf16 are only those outside a window, which no index
    # of a real position has.
    grad_type = _grad_type(grad_out)
    relative_type = offset_type((gh, gw))
    g = _bordered(em, grad_out, p0, ps, shape, real, at, gw.o, None, grad_type)
    base = (first * gh.s - gh.p) * gw.n - gw.shift * gw.s - gw.p

    def offsets_from_origins(index: SSAValue, where: tuple[int, int]) -> SSAValue:
        """index - the flat input index of its window's origin, for the indices loaded at `where` in the band."""
        start = base + where[0] * gh.s * gw.n + where[1] * gw.s
        assert isinstance(index.type, TileType)
        origin_type = TileType(index.type.get_shape(), f32, Memory.SBUF)
        origin = em.insert(tile.IotaOp(origin_type, [gh.s * gw.n, gw.s], start)).result
        return _binary(em, "subtract", index, origin, relative_type)

    relative = _bordered(em, indices, p0, ps, shape, real, at, gw.o, -1.0, f32, offsets_from_origins)

    # the gradient rows of the block: padded rows [u0 * s, (u0 + rows) * s) inside the input, and the lattice
    # positions [u, v) of each phase that land inside the input (a phase's taps add over those alone, so that the
    # last add of a phase writes its window of the block's rows itself)
    top = max(u0 * gh.s, gh.p)
    bottom = min((u0 + rows) * gh.s, gh.p + gh.n)
    if bottom <= top:
        return
    parts: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for ah in range(gh.s):
        u_lo, u_hi = -(-(top - ah) // gh.s), -(-(bottom - ah) // gh.s)
        for aw in range(gw.s):
            v_lo, v_hi = -(-(gw.p - aw) // gw.s), -(-(gw.p + gw.n - aw) // gw.s)
            if u_hi > u_lo and v_hi > v_lo:
                parts[(ah, aw)] = (u_lo, u_hi, v_lo, v_hi)

    sum_type = element_type_of(grad) if _itemsize(element_type_of(grad)) == 2 else f32
    out_type = element_type_of(grad)
    block = em.insert(tile.EmptyOp(TileType((ps, bottom - top, gw.n), out_type, Memory.SBUF))).result

    def place(value: SSAValue, key: tuple[int, int]) -> None:
        """Write a phase's part into the block's rows, with the stride as step."""
        nonlocal block
        u_lo, _, v_lo, _ = parts[key]
        spot = (u_lo * gh.s + key[0] - top, v_lo * gw.s + key[1] - gw.p)
        block = em.insert(tile.InsertOp(value, block, [em.index(i) for i in spot], [gh.s, gw.s])).result

    taps = [(kh, kw) for kh in reversed(range(gh.k)) for kw in reversed(range(gw.k))]
    remaining = {key: 0 for key in parts}
    for kh, kw in taps:
        key = (gh.phase(kh)[1], gw.phase(kw)[1])
        if key in remaining:
            remaining[key] += 1
    phases: dict[tuple[int, int], SSAValue] = {}
    # PyTorch adds in output order: the last tap's output comes first. Each phase goes into the block as soon as
    # its last tap is added, so that its last pass writes the block's window itself.
    for kh, kw in taps:
        (qh, ah), (qw, aw) = gh.phase(kh), gw.phase(kw)
        key = (ah, aw)
        if key not in parts:
            continue
        u_lo, u_hi, v_lo, v_hi = parts[key]
        yield
        # the output positions whose share lands on the phase's part: shifted by the tap's q
        window = [gh.shift - qh + u_lo - u0, gw.shift - qw + v_lo]
        part = (ps, u_hi - u_lo, v_hi - v_lo)
        offsets = _window(em, relative, window, part)
        hit = _scalar(em, "is_equal", offsets, float(kh * gh.d * gw.n + kw * gw.d), relative_type)
        grads, nothing = _window(em, g, window, part), _window(em, zeros, [0, 0], part)
        shifted = em.insert(tile.SelectOp(hit, grads, nothing, TileType(part, grad_type, Memory.SBUF))).result
        phases[key] = shifted if key not in phases else _binary(em, "add", phases[key], shifted, sum_type)
        remaining[key] -= 1
        if not remaining[key]:
            place(phases[key], key)
    yield
    for key, (u_lo, u_hi, v_lo, v_hi) in parts.items():
        if key not in phases:  # no tap reaches the phase (a kernel smaller than the stride)
            place(_fill(em, 0.0, (ps, u_hi - u_lo, v_hi - v_lo), f32), key)
    em.insert(tile.StoreOp(block, grad, [em.index(i) for i in (p0, top - gh.p, 0)]))
