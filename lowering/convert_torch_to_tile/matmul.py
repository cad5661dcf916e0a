"""Matmul-shaped lowerings: `C[M, N] = A[M, K] @ B[K, N]` on TensorE, K reduced in PSUM.

Input contract: `emit_matmul` takes HBM tensors [..., M, K] and [..., K, N] (equal batch dims) with any strides,
any sizes (none need be a multiple of a tile; K may be 0) and float element types; an epilogue callback may
replace the default PSUM evacuation (addmm's bias in fp32, cdist's square root), and a bias row [..., 1, N] may
be added to every row of the product in PSUM (addmm's bias in 16-bit types).

Output guarantee: loops over blocks of the output, sized from the shapes and the target's limits
(`choose_blocking`), never per tile:

* A block row is `m_subs` stationary tiles of at most 128 rows. Its stationary panel, A^T over K with K on
  partitions ([128, K tiles, m] per m sub-tile, plus the partial last K tile), is built once per block row when
  it fits its share of SBUF (`STATIONARY_SBUF_SHARE`) and then serves every output block of the row: A^T is
  produced once, whatever N is. When K is A's contiguous axis (row-major A), the panel is one DMA of whole rows
  (long contiguous chunks) followed by a loop of TensorE transposes (a bit-exact pass-through of bf16 on v3+)
  into the panel's slots; otherwise it is one strided DMA. For a K too long to fit, the panel is built per K
  range inside each block.
* An output block is `m_subs x n_subs` PSUM accumulators (half of the PSUM banks, `BLOCK_BANK_SHARE`; each a
  128 x 512 fp32 bank at most), so each moving tile (a K tile of B, up to 512 columns) feeds `m_subs` matmuls and each
  stationary tile `n_subs`. B is streamed in chunks of `chunk_tiles` K tiles, each one DMA ([K tile, tiles,
  columns]: `MOVING_CHUNK_BYTES` per partition) or, when K is B's contiguous axis, row loads transposed on
  TensorE; where the target's DMAs transpose 2-byte elements (trn2, trn3) and B is loaded as it is stored, each
  K tile of such a B is one DMA transpose instead (a Linear layer's bf16 weight: the transposes would otherwise
  take TensorE time beside the matmuls, where the DMA moves the same bytes at 0.9 of a copy's rate). Chunks go
  in pairs (both loads, then the K loop over each), so loads overlap compute, or in groups of three or four
  where a chunk's load would outlast its matmuls (`chunks_in_flight`); the first K
  tile is peeled to start the accumulation, and every loop of more than one trip whose trip count depends on K
  stays a loop. When the
  block's whole B fits two chunks (short K), it is exactly one pair, so the unrolled block loop double-buffers;
  a B to transpose whose block holds that much is one chunk of all of K (for blocks of several stationary tiles),
  so the next block's row loads and transposes run under this block's matmuls.
* When several block rows read the same B, or B has K contiguous (a Linear layer's weight), or a single block
  row of more than two blocks with a short K and an A computed in the graph reads it, and all of it fits
  `RESIDENT_SBUF_SHARE` of SBUF with K on partitions, it is loaded (or transposed) once per batch, after the
  first block row's panel, and the blocks read windows of it instead of loading chunks. For a K-contiguous B
  that also means long row loads: per-block chunks are loaded as rows of the chunk's K tiles, the chunk sized by
  `MOVING_CHUNK_BYTES` as a row-major B's is (runs of 512 bytes or more in fp8 and bf16), where the whole B is
  loaded as whole rows. A row-major B read by a single block row of at most `MAX_UNROLLED_BLOCKS` blocks with a
  bias row loads
  in pieces of one block's columns, in the blocks' order, its bias row whole ahead of it, and the blocks are
  straight-line code, so that each block's matmuls wait for its own columns only. Full block rows whose
  hoisted panels fit the budget twice go two per trip (both panels first), so the next trip's first panel loads
  while this trip's second row computes.
* A K-contiguous B that TensorE transposes (no DMA transpose for its elements: fp8, fp32, elements its loads
  convert, any on a target without DMA transposes), too large to stay whole on chip, read by two block rows or
  more, is transposed once (`_transpose_once`): the first block row transposes it as above and also stores each
  transposed chunk into a row-major copy in HBM, which the other block rows read as a row-major B (a product of
  its own blocking). The copy holds the bits TensorE reads (B's, or the rounding its loads make; transposes pass
  them through).
* A's rows are loaded whole for a hoisted panel ([m, K] at the block row's rows, and the partial last K tile
  on its own), which is what tile-fuse-matmul-prologues and tile-fuse-matmul-chains replace with rows computed on
  chip (a layer norm's; a Linear layer's activations, built transposed).
* A bias row is added by one more matmul per accumulator, the first (a ones row [1, m] as the stationary, the
  bias row's [1, n] window as the moving), its load issued at the start of the block (for a resident B, the whole
  row's, ahead of B's loads). Where the target has PE row tiles and K is long enough that the extra bytes are
  small, the row loads onto partitions 0 to 96 and the block's bias matmuls take the copies at 0, 32, 64 and 96
  in turn (`tile.matmul`'s rows), each on its own row tile, so they stream together (`_Kernel.load_bias`).
* Within a chunk of K tiles, each m sub-tile's matmuls run before the next sub-tile's, so that a block's first
  accumulators are final while TensorE still works on the others: their evacuation, epilogue and store overlap
  the rest of the block instead of all waiting for its last K tile.
* A sub-tile of few rows (the rows the tiles of 128 leave over) over a long K runs with the roles swapped
  (`_Kernel.swapped`): 128-column pieces of B stationary, its rows moving, so TensorE streams its few rows
  instead of B's columns; each [128, rows] accumulator is transposed back (bit-exact) as it leaves PSUM.
* After the last K tile the block's accumulators are evacuated through the epilogue (by default one plain copy
  each, whose engines the neuron level chooses) and stored.

The matmuls read their operands as windows of the panel and the chunk (`tile.extract`), and operands keep their
element type: bf16 stays bf16 on TensorE (fp32 runs at a quarter of the rate). An fp32 operand the conversion
says is multiplied only as its bf16 rounding (`operand_load_type`: torch-auto-cast's casts) is rounded by the DMAs
that load it, so TensorE reads bf16 and no rounded copy of the operand is ever stored.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import IndexType, f32
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    alloc,
    element_bytes,
    element_type_of,
    emitter_target,
    layout_of,
    load,
    result_element_type,
    result_shape,
    store,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import (
    bounded_loop,
    bounded_nest,
    bounded_upper,
    copy_to,
    real_prefix,
    size_bounds,
    size_factors,
)
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.lowering.neuron_unroll_loops import SHORT_TRIPS
from neuron_mlir.runtime.hardware import Engine, Memory, Target

# epilogue(emitter, psum tile [m, n], output indices (batch..., m0, n0), result type) -> SBUF tile
Epilogue = Callable[[LoopNestBuilder, SSAValue, list[Index], TileType], SSAValue]

# Share of the PSUM banks one output block accumulates in: half of them (4 of trn2's 8), so the transposes that
# build the next stationary panel have banks of their own and the evacuation of one block never waits for the
# other half. When the block has no K loop of its own, its loop is the innermost one with DMAs, which
# neuron-unroll-loops doubles: then it takes half as many.
BLOCK_BANK_SHARE = 2
# Share of SBUF (per partition) the stationary panel of an output block may take: the transposed A^T slices and
# the rows they are transposed from. The rest holds the moving chunks (several in flight), the evacuated
# outputs, whatever the epilogue loads, and, when A is computed on chip, what its computation keeps beside the
# panel: tile-fuse-matmul-prologues computes a layer norm's rows in fp32 where the panel's rows load, and
# tile-fuse-matmul-chains a Linear layer's panel and its W1 tiles.
STATIONARY_SBUF_SHARE = 3 / 8
# Bytes per partition of one moving-chunk DMA. A DMA pays ~2 us of fixed latency (runtime/hardware.py), so each
# should carry enough TensorE work (~7 us at this size in bf16) for the next ones to arrive under it.
MOVING_CHUNK_BYTES = 8 * 1024
# Share of SBUF (per partition) B may take when it is kept whole on chip with K on partitions ([K tile, K tiles,
# N]): it is then loaded (and, when K is its contiguous axis, transposed) once, not once per block row.
RESIDENT_SBUF_SHARE = 1 / 4
# Chunks per panel at least (smaller chunks for short K): the first chunk's load cannot overlap any compute of the
# block, and the unrolled chunk loop needs a few trips to double-buffer.
MIN_CHUNKS = 4
# Moving chunks a block loads at once at most (`chunks_in_flight`): each holds `MOVING_CHUNK_BYTES` of every
# partition, beside the stationary panel.
MAX_CHUNKS_IN_FLIGHT = 4
# Evacuated blocks an output block's stores may keep in SBUF at once (this block's and the next one's): with the
# moving operand, what a panel of A read from HBM leaves room for (`stationary_budget`).
EVACUATED_BLOCKS = 2
# Output blocks of a single block row over a resident B that are emitted as straight-line code rather than a loop,
# at most: each block's matmuls then wait for the pieces of B holding its own columns, which a loop's instructions
# (waiting for every piece any trip reads) cannot.
MAX_UNROLLED_BLOCKS = 8


def matmul_limits(em: LoopNestBuilder) -> tuple[int, int, int]:
    """(K, M, N) tile limits of the target's TensorE: contraction, stationary free, moving free (one PSUM bank)."""
    return _limits(em).matmul


@dataclass(frozen=True)
class Limits:
    """What the blocking depends on in the target: TensorE tile limits, SBUF and PSUM bytes per partition."""

    matmul: tuple[int, int, int]  # K, M, N per matmul
    sbuf_bytes: int
    psum_bank_bytes: int
    psum_banks: int
    target: Target | None = None  # its DMA and TensorE rates time a chunk's load against its matmuls

    @classmethod
    def of(cls, target: Target) -> Limits:
        """The limits of `target`, its rates included."""
        return cls(
            (target.matmul_max_k, target.matmul_max_stationary_free, target.matmul_max_moving_free),
            target.sbuf_bytes_per_partition,
            target.psum_bank_bytes,
            target.psum_banks,
            target,
        )


def _limits(em: LoopNestBuilder) -> Limits:
    return Limits.of(emitter_target(em))


@dataclass(frozen=True)
class Blocking:
    """How one matmul is blocked: see the module docstring."""

    k_tile: int  # contraction per matmul (partitions)
    m_tile: int  # stationary free size per matmul
    n_tile: int  # moving free size per matmul (one PSUM bank)
    m_subs: int  # stationary tiles per output block
    n_subs: int  # moving tiles per output block
    panel_tiles: int  # full K tiles per stationary panel
    chunk_tiles: int  # full K tiles per moving chunk
    hoisted: bool  # one panel holds all of K: built once per block row and reused by every output block of it
    resident: bool = False  # B is built once, whole, with K on partitions, and every block reads windows of it
    paired: bool = False  # full block rows go two per trip (hoisted panels that fit the budget twice)
    chunks_in_flight: int = 2  # moving chunks loaded together, then computed in turn (`chunks_in_flight`)


def stationary_budget(k: int, n: int, itemsize: int, lhs_from_hbm: bool, limits: Limits) -> int:
    """Bytes per partition the stationary panel of a block row may take (with the rows it is transposed from).

    `STATIONARY_SBUF_SHARE` of SBUF when A may be computed on chip: tile-fuse-matmul-prologues and
    tile-fuse-matmul-chains run after the blocking is chosen and keep their own rows, parameters and weight tiles
    beside the panel. When A is read from HBM (one of the function's arguments: both fusions only replace rows of
    an allocation of the function), nothing else shares the block row's SBUF, and the panel takes what the moving
    operand (the chunks in flight, or all of B when it fits to be kept resident) and the evacuated blocks leave:
    at K = 8192 in bf16 that is a block row of 512 rows instead of 256, and B read half as often."""
    default = int(limits.sbuf_bytes * STATIONARY_SBUF_SHARE)
    if not lhs_from_hbm:
        return default
    k_tile = limits.matmul[0]
    k_tiles = -(-k // k_tile)
    moving = MAX_CHUNKS_IN_FLIGHT * MOVING_CHUNK_BYTES
    if k_tiles * n * itemsize <= limits.sbuf_bytes * RESIDENT_SBUF_SHARE:
        moving = max(moving, k_tiles * n * itemsize)
    evacuated = EVACUATED_BLOCKS * (limits.psum_banks // BLOCK_BANK_SHARE) * limits.psum_bank_bytes
    return max(default, limits.sbuf_bytes - moving - evacuated)


def choose_blocking(
    m: int,
    k: int,
    n: int,
    itemsize: int,
    lhs_transposed: bool,
    rhs_transposed: bool,
    limits: Limits,
    lhs_from_hbm: bool = False,
) -> Blocking:
    """The blocking of an [M, K] @ [K, N] matmul from its shape, element size and the target's limits.

    `*_transposed`: whether that operand has K contiguous, so its K-on-partition tiles come from TensorE
    transposes of row-wise loads (the stationary rows then take SBUF as well, the moving transposes PSUM).
    `lhs_from_hbm`: A's rows can only be loaded, never computed on chip by a fusion (`stationary_budget`).
    """
    k_tile, m_tile, n_tile = limits.matmul
    m_tiles = max(1, -(-m // m_tile))
    n_tiles = max(1, -(-n // n_tile))
    k_full = k // k_tile
    budget = stationary_budget(k, n, itemsize, lhs_from_hbm, limits)
    per_tile = m_tile * itemsize * (2 if lhs_transposed else 1)  # bytes per partition per K tile and m sub-tile
    block_accumulators = limits.psum_banks // BLOCK_BANK_SHARE
    accumulators = block_accumulators
    while True:
        m_subs = min(accumulators, m_tiles)
        # The widest block row whose panel holds all of K (built once, reused by the whole row); else the widest.
        fitting = [subs for subs in range(m_subs, 0, -1) if subs * (k_full + 1) * per_tile <= budget]
        hoisted = bool(fitting)
        m_subs = fitting[0] if fitting else m_subs
        panel_tiles = max(1, min(k_full, budget // (m_subs * per_tile)))
        # a panel of fewer than 3 tiles has no chunk loop (the first chunk is peeled): see BLOCK_BANK_SHARE
        if panel_tiles >= 3 or accumulators < block_accumulators:
            break
        accumulators //= 2
    if lhs_from_hbm and not hoisted:
        # The larger budget is sized for one panel that holds all of K. A panel of part of K is reloaded per K
        # step, the next step's while this one's matmuls run, so two of them live at once: only the share a
        # fusion leaves has room for that (a [512, 30522] @ [30522, 768] product, the input gradient of a
        # masked-LM decoder, ran out of SBUF with the larger one).
        return choose_blocking(m, k, n, itemsize, lhs_transposed, rhs_transposed, limits)
    # Several block rows read the same B: when all of it fits its share of SBUF, it is loaded (and transposed)
    # once instead of once per block row; the blocks then only read it, in one K loop each. A B to transpose is
    # kept whole for a single block row too: loaded as whole rows rather than a PSUM bank's worth of K at a time.
    k_tiles = k_full + (1 if k % k_tile else 0)
    fits = k_tiles * n * itemsize <= limits.sbuf_bytes * RESIDENT_SBUF_SHARE
    resident = (m > m_subs * m_tile or rhs_transposed) and hoisted and fits
    # A single block row reads B once, so keeping it whole only issues its loads ahead of the blocks. That pays
    # for a short K (each block's B one pair of chunks, below) when the row has more than two blocks: otherwise
    # each block's chunks load into the buffers the block before used, and TensorE idles at those boundaries
    # (the GPT-2 block's c_attn and c_fc, A computed by their layer norms: 179.1 -> 177.3 us). With two blocks it
    # took 3.8 us off the GPT-2 block's attention projection but put 4.9 us on a ViT-B/16 step's backward (394
    # rows, K = N = 768, after the DMA-bound attention backward, whose transfers B's early loads then share), so
    # two blocks load per block. An A read from HBM was not measured: its budget (`stationary_budget`) decides.
    n_subs = max(1, min(accumulators // m_subs, n_tiles))
    block_n = min(n, n_subs * n_tile)
    short_k = panel_tiles * block_n * itemsize <= 2 * MOVING_CHUNK_BYTES
    if hoisted and fits and short_k and not lhs_from_hbm and -(-n // block_n) > 2:
        resident = True
    # Two hoisted panels in SBUF at once let the next block row's panel load under this row's matmuls. They
    # keep to the share a fusion leaves: with A read from HBM, a second panel in the room the larger budget gives
    # was measured slower (a panel's long load ahead of the moving chunks; 8192-long K in bf16 on trn1).
    shared = int(limits.sbuf_bytes * STATIONARY_SBUF_SHARE)
    paired = hoisted and m >= 2 * m_subs * m_tile and 2 * m_subs * (k_full + 1) * per_tile <= shared
    if resident:
        chunk_tiles = max(1, panel_tiles)
        if short_k:
            # A short K, as below: two chunks and no K loop, so the block loop is the innermost one and
            # neuron-unroll-loops gives the next block accumulators of its own.
            chunk_tiles = max(1, -(-panel_tiles // 2))
        return Blocking(k_tile, m_tile, n_tile, m_subs, n_subs, panel_tiles, chunk_tiles, hoisted, True, paired)
    if rhs_transposed:  # one K tile of the block's moving transposes fits a PSUM bank
        n_subs = max(1, min(n_subs, limits.psum_bank_bytes // (n_tile * itemsize)))
    block_n = min(n, n_subs * n_tile)
    short_k = panel_tiles * block_n * itemsize <= 2 * MOVING_CHUNK_BYTES  # of the block as it now is
    # A B with K contiguous is loaded as rows of the chunk's K tiles and transposed one K tile at a time (one
    # PSUM tile per column piece), so its chunk is bounded by SBUF as a row-major B's is: the longer its rows, the
    # fewer DMAs and the longer their runs (a bank's worth of K was 256-byte runs in fp8 and bf16: half rate).
    chunk_tiles = MOVING_CHUNK_BYTES // (block_n * itemsize)
    chunk_tiles = max(1, min(chunk_tiles, panel_tiles // MIN_CHUNKS))
    if rhs_transposed and hoisted and m_subs > 1 and short_k:
        # A short K to transpose (fp8 weights up to K = 2048, 16-bit up to 1024): the block's whole B is one
        # chunk, loaded as rows of all of K at the block's start with no chunk loop, so the block loop is the
        # innermost one with DMAs and neuron-unroll-loops gives the next block's loads and transposes buffers of
        # their own: they run under this block's matmuls instead of after them. In a chunk loop, each trip's row
        # loads and transposes wait for the buffers the last trip's matmuls read (x @ W^T, W K-contiguous: fp8
        # [256, 2048] x [8192, 2048] 193.3 -> 153.4 us, TensorE busy 57% -> 72%; bf16 [1024, 1024] x [4096,
        # 1024] 237.7 -> 171.6 us). A block of one stationary tile has too few matmuls per chunk to hide the
        # next block's loads (bf16 [128, 1024] x [8192, 1024] took 110.8 -> 120.3 us), so it keeps the loop.
        chunk_tiles = max(1, panel_tiles)
    if not rhs_transposed and hoisted and short_k:
        # A short K: the block's whole B is one pair of chunks, loaded at the block's start with no chunk loop.
        # A chunk loop of one or two trips reuses its buffers, so each trip's loads would wait for the last one's
        # matmuls (exposed DMA latency); without it the block loop is the innermost loop with DMAs, which
        # neuron-unroll-loops doubles: the next block's loads and accumulators get buffers of their own.
        chunk_tiles = max(1, -(-panel_tiles // 2))
    in_flight = 2
    if not rhs_transposed and limits.target is not None:
        room = None
        if lhs_from_hbm:  # what the panel leaves beside the evacuated blocks (`stationary_budget`)
            panel_bytes = (2 if paired else 1) * m_subs * (k_full + 1 if hoisted else panel_tiles) * per_tile
            room = limits.sbuf_bytes - panel_bytes - EVACUATED_BLOCKS * accumulators * limits.psum_bank_bytes
        in_flight = chunks_in_flight(chunk_tiles, min(m, m_subs * m_tile), block_n, itemsize, k // k_tile, limits, room)
    return Blocking(k_tile, m_tile, n_tile, m_subs, n_subs, panel_tiles, chunk_tiles, hoisted, False, paired, in_flight)


def chunks_in_flight(
    chunk_tiles: int,
    block_m: int,
    block_n: int,
    itemsize: int,
    k_tiles: int,
    limits: Limits,
    room: int | None = None,
) -> int:
    """How many moving chunks a block loads together before computing them in turn (2 to
    `MAX_CHUNKS_IN_FLIGHT`). A chunk's buffer is free again once its matmuls are done, so the next load into it
    has the compute of the other chunks in flight to arrive under: with the DMA's fixed latency
    (`dma_fixed_latency_ns`) a chunk of short rows (B's block is a few hundred columns: runs below the full-rate
    size) can take longer to load than its matmuls take, and two in flight leave TensorE waiting each time.
    Times from the cost model's rules: the transfer at the DMA engines' aggregate rate and the efficiency of its
    runs, a matmul `max(columns, matmul_min_cycles)` TensorE cycles (`matmul_fp32_factor` times that for fp32,
    divided by `matmul_fp8_speedup` for fp8).
    The count divides the block's chunks where one up to the most does (no chunk left to load alone). `room`:
    the bytes per partition the chunks may take."""
    from neuron_mlir.runtime.cost_model import dma_efficiency
    from neuron_mlir.runtime.hardware import Engine

    target = limits.target
    assert target is not None
    k_tile, m_tile, n_tile = limits.matmul
    run = block_n * itemsize  # B is row-major here: each K row of the chunk is one run of the block's columns
    rate = target.dma_aggregate_bytes_per_ns * dma_efficiency(run, target)
    load_ns = target.dma_fixed_latency_ns + k_tile * chunk_tiles * run / rate
    matmuls = chunk_tiles * -(-block_m // m_tile) * -(-block_n // n_tile)
    cycles: float = max(min(block_n, n_tile), target.matmul_min_cycles)
    cycles *= target.matmul_fp32_factor if itemsize == 4 else 1
    if itemsize == 1:  # both operands fp8 (the only 1-byte matmul types), over full K tiles: TensorE's fp8 rate
        cycles /= target.matmul_fp8_speedup
    compute_ns = matmuls * cycles / target.clock_ghz[Engine.TENSOR]
    needed = 2
    while needed < MAX_CHUNKS_IN_FLIGHT and load_ns > (needed - 1) * compute_ns:
        needed += 1
    if room is None:  # half of what the panel's share leaves: the rest may be a fused prologue's
        room = int(limits.sbuf_bytes * (1 - STATIONARY_SBUF_SHARE) / 2)
    if needed == 2 or needed * MOVING_CHUNK_BYTES > room:
        return 2
    chunks = k_tiles // chunk_tiles
    dividing = [
        count
        for count in range(needed, MAX_CHUNKS_IN_FLIGHT + 1)
        if chunks % count == 0 and count * MOVING_CHUNK_BYTES <= room
    ]
    return dividing[0] if dividing else needed


@dataclass(frozen=True)
class RowBound:
    """The real rows of an [M, K] @ [K, N] product in a size bucket's program, M merged from size arguments and
    static extents (`[b*s, h]` token rows): M is `outer` (each a loop: a size argument bounding its trips, or None
    for a static extent) times `inner` rows, of which the first `rows` (a size argument, or one past the last real
    row of merged rows: `real_prefix`) are real or padding, and the rest padding."""

    outer: tuple[tuple[SSAValue | None, int], ...]
    inner: int
    rows: SSAValue


def row_bound(em: LoopNestBuilder, op: Operation, m: int) -> RowBound | None:
    """The `RowBound` of a 2-D product's rows that `op`'s size bounds name (`size_factors`, or one size argument):
    its last factor must be a size argument and the row tiles of 128 it starts must lie inside the bucket's
    rows."""
    if len(result_shape(op)) != 2:
        return None
    factors = size_factors(em, op, 0)
    if factors is None:  # rows that are exactly a size argument's extent (a batch of one)
        bounds = size_bounds(em, op)
        factors = [(bounds[0], m)] if bounds is not None and bounds[0] is not None else None
    if not factors or factors[-1][0] is None or math.prod(extent for _, extent in factors) != m:
        return None
    rows, inner = factors[-1]
    assert rows is not None
    m_tile = matmul_limits(em)[1]
    if inner % m_tile:
        # rows that fit one tile stay merged with the outer factors (per-factor tiles would be smaller, not
        # fewer): the merged rows' tiles that start below the last real row (`real_prefix`)
        if len(factors) == 1 or m % m_tile:
            return None
        return RowBound((), m, real_prefix(em, factors))
    return RowBound(tuple(factors[:-1]), inner, rows)


def emit_matmul(
    em: LoopNestBuilder,
    lhs: SSAValue,
    rhs: SSAValue,
    out_element_type: Attribute,
    epilogue: Epilogue | None = None,
    bias_row: SSAValue | None = None,
    rows: RowBound | None = None,
) -> SSAValue:
    """`lhs @ rhs (+ bias_row)` for [M, K] @ [K, N], or batched [B, M, K] @ [B, K, N]; any strides.

    `bias_row` ([..., 1, N], any strides) is added to every row of the product by TensorE: one more matmul per
    accumulator, its first, a ones row [1, m] against the bias row [1, n], so the evacuation stays a plain copy.
    `rows` (a 2-D product in a size bucket's program) lets the product compute only the real rows' tiles
    (`emit_bounded_matmul`).
    """
    if rows is not None:
        bounded = emit_bounded_matmul(em, lhs, rhs, out_element_type, epilogue, bias_row, rows)
        if bounded is not None:
            return bounded
    lhs_layout, rhs_layout = layout_of(lhs), layout_of(rhs)
    batch_shape = lhs_layout.shape[:-2]
    m, k = lhs_layout.shape[-2:]
    n = rhs_layout.shape[-1]
    out = alloc(em, (*batch_shape, m, n), out_element_type)
    rank = len(lhs_layout.shape)
    lhs_transposed = _k_contiguous(lhs_layout.strides, lhs_layout.shape, rank - 1, rank - 2)
    rhs_transposed = _k_contiguous(rhs_layout.strides, rhs_layout.shape, rank - 2, rank - 1)
    lhs_type, rhs_type = operand_load_type(em, lhs), operand_load_type(em, rhs)
    itemsize = max(element_bytes(lhs_type), element_bytes(rhs_type))
    blocking = choose_blocking(m, k, n, itemsize, lhs_transposed, rhs_transposed, _limits(em), _argument(lhs))
    kernel = _Kernel(
        lhs, rhs, out, out_element_type, epilogue, blocking, lhs_transposed, rhs_transposed, k, lhs_type, rhs_type
    )
    # A B transposed once: the first block row transposes it as usual and also stores what it transposed, a
    # row-major copy that the other block rows read (`_transpose_once`)
    rest: _Kernel | None = None
    if rhs_transposed and _transpose_once(em, blocking, m, k, rhs, rhs_type):
        kernel.blocking = dataclasses.replace(blocking, paired=False)
        kernel.copy_to = alloc(em, (*batch_shape, k, n), rhs_type)
        rest_blocking = choose_blocking(m, k, n, itemsize, lhs_transposed, False, _limits(em), _argument(lhs))
        rest = _Kernel(
            lhs, kernel.copy_to, out, out_element_type, epilogue, rest_blocking, lhs_transposed, False, k, lhs_type,
            rhs_type,
        )  # fmt: skip
        kernel.copy_columns = rest.rhs_columns = _copy_columns(kernel.blocking, rest_blocking, k, n)
    for each in (kernel, rest):
        if each is None:
            continue
        each.target = emitter_target(em)
        if bias_row is not None:
            each.bias_row = bias_row
            each.ones = each.bias_ones(em)

    def batches(inner: LoopNestBuilder, dims: tuple[int, ...], batch: list[Index]) -> None:
        if dims:
            inner.for_each(dims[0], lambda e, b: batches(e, dims[1:], [*batch, b]))
            return
        if rest is None:
            kernel.block_rows(inner, batch, m, n, resident=blocking.resident and k > 0)
            return
        first = blocking.m_subs * blocking.m_tile
        kernel.block_row(inner, batch, 0, first, n)
        rest.block_rows(inner, batch, m, n, begin=first)

    batches(em, batch_shape, [])
    return out


# Block rows from which a K-contiguous B that TensorE must transpose (no DMA transpose for its elements: fp8,
# fp32, converted ones) is transposed once, by the first block row, instead of once per block row
# (`_transpose_once`).
TRANSPOSE_ONCE_BLOCK_ROWS = 2


def _transpose_once(
    em: LoopNestBuilder, blocking: Blocking, m: int, k: int, rhs: SSAValue, rhs_type: Attribute
) -> bool:
    """Whether the first block row stores the B it transposes as a row-major copy in HBM that the other block
    rows read, instead of each transposing all of B again.

    Each block row transposes all of a B that is not kept whole on chip: [K, N] / 128^2 TensorE transposes at the
    bf16 rate (the fp8 double-row mode cannot transpose) and their copies out of PSUM. For an fp8 product that
    is half of TensorE's time per block row of 512 rows (a [128, 512] moving tile is 4 transposes of 128 cycles
    against 4 matmuls of 256), so a 4096^3 product was bound by its transposes. The copy costs one more write of
    B, under the first row's TensorE work, and the later rows read it as a row-major B (one DMA per chunk)."""
    if blocking.resident or k < blocking.k_tile or _dma_transposable(em, rhs, rhs_type):
        return False
    return -(-m // (blocking.m_subs * blocking.m_tile)) >= TRANSPOSE_ONCE_BLOCK_ROWS


def _copy_columns(first: Blocking, rest: Blocking, k: int, n: int) -> int:
    """The column blocks of a transposed-once B's copy (`_blocked_by_columns`): the blocks' width when both block
    rows' kernels walk B in blocks of that width over whole K tiles, else 0 (the copy stays row-major).

    Row-major, each partition of a moving chunk [K tile, tiles, block columns] is `tiles` runs of one block's
    columns (512 bytes in fp8: 62.5% of the DMA rate, `dma_efficiency`), written so by the first block row and
    read so by every other, whose chunk loads then outlast the matmuls they feed at fp8's rate. Blocked, each
    partition's part of a chunk is one run of `tiles` times that."""
    width = first.n_subs * first.n_tile
    if rest.n_subs * rest.n_tile != width or rest.resident or n % width or k % first.k_tile or n == width:
        return 0
    return width


def _blocked_by_columns(em: LoopNestBuilder, copy: SSAValue, k_tile: int, columns: int) -> SSAValue:
    """A [..., K, N] copy stored by column blocks, viewed as [..., N - columns + 1, K tile, K tiles, columns]: the
    block of columns [n0, n0 + columns) holds K tile `t`'s row `p` at `[n0, p, t, :]`, each partition's K tiles
    one after another (element (t * k_tile + p, n0 + c) at n0 * K + (p * K tiles + t) * columns + c), so a moving
    chunk [K tile, tiles, columns] at `[n0, 0, t0, 0]` is one contiguous run per partition. Only block starts
    (multiples of `columns`) are valid n0: the view's last element is the copy's last."""
    layout = layout_of(copy)
    k, n = layout.shape[-2:]
    k_tiles = k // k_tile
    shape = (*layout.shape[:-2], n - columns + 1, k_tile, k_tiles, columns)
    strides = (*layout.strides[:-2], k, k_tiles * columns, columns, 1)
    return view(em, copy, Layout(shape, strides, layout.offset))


def _argument(value: SSAValue) -> bool:
    """Whether `value` is (a view of) one of the function's arguments: its rows can only come from HBM."""
    while isinstance(value.owner, tile.ViewOp):
        value = value.owner.source
    return isinstance(value, BlockArgument) and isinstance(value.block.parent_op(), func.FuncOp)


def emit_bounded_matmul(
    em: LoopNestBuilder,
    lhs: SSAValue,
    rhs: SSAValue,
    out_element_type: Attribute,
    epilogue: Epilogue | None,
    bias_row: SSAValue | None,
    rows: RowBound,
) -> SSAValue | None:
    """`lhs @ rhs` over M = outer x inner rows of which the call's are real (`RowBound`): the product's M is
    viewed as [outer..., inner], the outer factors become loops (the call's trips where a size argument bounds
    them) and each runs ceil(rows / 128) block rows of one m tile, so the call's work follows its size. Rows
    beyond the call's in a computed tile are padding, as are the tiles never computed. B, the same for every
    outer index, is loaded once before the loops when it is kept whole on chip. None when lhs's rows cannot be
    viewed that way (strides that do not split)."""
    lhs_layout, rhs_layout = layout_of(lhs), layout_of(rhs)
    m, k = lhs_layout.shape
    n = rhs_layout.shape[-1]
    outer = tuple(extent for _, extent in rows.outer)
    split_lhs = lhs_layout.reshape((*outer, rows.inner, k))
    if split_lhs is None:
        return None
    out = alloc(em, (m, n), out_element_type)
    out_split = layout_of(out).reshape((*outer, rows.inner, n))
    assert out_split is not None
    zeros = (0,) * len(outer)
    lhs_view = view(em, lhs, split_lhs)
    rhs_view = view(em, rhs, Layout((*outer, k, n), (*zeros, *rhs_layout.strides), rhs_layout.offset))
    out_view = view(em, out, out_split)
    lhs_transposed = _k_contiguous(lhs_layout.strides, lhs_layout.shape, 1, 0)
    rhs_transposed = _k_contiguous(rhs_layout.strides, rhs_layout.shape, 0, 1)
    lhs_type, rhs_type = operand_load_type(em, lhs), operand_load_type(em, rhs)
    itemsize = max(element_bytes(lhs_type), element_bytes(rhs_type))
    # blocked as the whole product, but one m tile per block row: the call's rows end within a tile, not within
    # a block of several
    blocking = choose_blocking(m, k, n, itemsize, lhs_transposed, rhs_transposed, _limits(em), _argument(lhs))
    # block rows go two per trip (two panels, the second loading under the first's blocks) where the whole
    # product's panels of two or more sub-tiles fit: a trip's panel would otherwise wait for the last trip's
    # blocks to free its buffer, one panel load exposed per 128 rows (a 4 x 512 call 21% slower than the whole).
    # Not when the rows are at most SHORT_TRIPS tiles: neuron-unroll-loops then gives every trip a copy with
    # buffers of its own, and the first tile, which every call runs, is plain code (in a loop of pairs, a call of
    # one tile ran it in the loop of the tile left, whose accesses wait for every access before them that a
    # guarded copy may have issued)
    short = math.ceil(rows.inner / matmul_limits(em)[1]) <= SHORT_TRIPS
    paired = blocking.hoisted and k > 0 and (blocking.paired or blocking.m_subs > 1) and not short
    blocking = dataclasses.replace(blocking, m_subs=1, paired=False)
    if epilogue is not None:
        flat_epilogue = epilogue

        def split_epilogue(
            e: LoopNestBuilder, product: SSAValue, indices: list[Index], result_type: TileType
        ) -> SSAValue:
            # the caller's epilogue indexes the [M, N] product
            *factors, r0, c0 = indices
            flat, stride = r0, rows.inner
            for index, extent in zip(reversed(factors), reversed(outer), strict=True):
                flat = e.add(e.mul(index, stride), flat)
                stride *= extent
            return flat_epilogue(e, product, [flat, c0], result_type)

        epilogue = split_epilogue
    kernel = _Kernel(
        lhs_view,
        rhs_view,
        out_view,
        out_element_type,
        epilogue,
        blocking,
        lhs_transposed,
        rhs_transposed,
        k,
        lhs_type,
        rhs_type,
    )
    kernel.target = emitter_target(em)
    if bias_row is not None:
        bias_layout = layout_of(bias_row)
        kernel.bias_row = view(
            em, bias_row, Layout((*outer, 1, n), (*zeros, *bias_layout.strides[-2:]), bias_layout.offset)
        )
        kernel.ones = kernel.bias_ones(em)
    if blocking.resident and k > 0:
        kernel.build_resident(em, [0] * len(outer), n)

    m_tile = blocking.m_tile

    def body(inner: LoopNestBuilder, batch: list[Index]) -> None:
        def block_row(e: LoopNestBuilder, m0: Index, _: int) -> None:
            kernel.block_row(e, batch, m0, m_tile, n)

        if not paired:
            bounded_loop(inner, rows.rows, m_tile, block_row)
            return

        def pair(e: LoopNestBuilder, m0: Index) -> None:
            # one panel for both tiles (their transposes share a loop, as a block row's sub-tiles do), then the
            # blocks of each tile, so each block keeps the whole product's accumulators
            subs, panels = kernel.row_panels(e, batch, m0, 2 * m_tile)
            assert panels is not None
            for index, sub in enumerate(subs):
                panel = _Panel(panels[0].full[index : index + 1], panels[0].rest[index : index + 1])
                kernel.row_blocks(e, batch, [sub], [panel], n)

        # the whole pairs of the call's row tiles, then the tile left (none or one)
        pairs_end = bounded_upper(inner, rows.rows, m_tile, 2)
        block = Block(arg_types=[IndexType()])
        inner.insert(scf.ForOp(inner.index(0), pairs_end, inner.index(2 * m_tile), [], block))
        pair(inner.nested(block), block.args[0])
        inner.nested(block).insert(scf.YieldOp())
        rest = Block(arg_types=[IndexType()])
        upper = bounded_upper(inner, rows.rows, m_tile)
        inner.insert(scf.ForOp(pairs_end, upper, inner.index(m_tile), [], rest))
        block_row(inner.nested(rest), rest.args[0], m_tile)
        inner.nested(rest).insert(scf.YieldOp())

    bounded_nest(em, [bound if bound is not None else extent for bound, extent in rows.outer], [], body)
    return out


def operand_load_type(em: LoopNestBuilder, operand: SSAValue) -> Attribute:
    """The element type TensorE reads `operand` in: its own, or the narrower one the conversion asks the op being
    lowered to read it in (`ConversionContext.narrow_loads`: an fp32 tensor whose bf16 rounding is all the op
    multiplies), which the operand's DMAs convert to as they load."""
    context = em.context
    narrow = context.narrow_loads.get(operand) if context is not None else None
    return narrow if narrow is not None else element_type_of(operand)


def _split(size: int, piece: int) -> list[tuple[int, int]]:
    """(offset, size) of the pieces of at most `piece` that cover [0, size)."""
    return [(offset, min(piece, size - offset)) for offset in range(0, size, piece)]


def carry(
    em: LoopNestBuilder,
    start: int,
    stop: int,
    step: int,
    values: list[SSAValue],
    body: Callable[[LoopNestBuilder, Index, list[SSAValue]], list[SSAValue]],
    always_loop: bool = False,
) -> list[SSAValue]:
    """`values = body(offset, values)` for offset in range(start, stop, step): an scf.for carrying them.

    One trip is inlined unless `always_loop`: loops whose trip count varies with the shape stay loops, so the
    program's structure (and size) does not.
    """
    trips = max(0, -(-(stop - start) // step))
    if trips == 0:
        return values
    if trips == 1 and not always_loop:
        return body(em, start, values)
    block = Block(arg_types=[IndexType(), *(value.type for value in values)])
    loop = em.insert(scf.ForOp(em.index(start), em.index(stop), em.index(step), values, block))
    inner = em.nested(block)
    inner.insert(scf.YieldOp(*body(inner, block.args[0], list(block.args[1:]))))
    return list(loop.results)


def _shape(value: SSAValue) -> tuple[int, ...]:
    tile_type = value.type
    assert isinstance(tile_type, TileType)
    return tile_type.get_shape()


def _element(value: SSAValue) -> Attribute:
    tile_type = value.type
    assert isinstance(tile_type, TileType)
    return tile_type.element_type


def window(em: LoopNestBuilder, value: SSAValue, indices: list[Index], shape: tuple[int, ...]) -> SSAValue:
    """tile.extract of `shape` at `indices` (the tile itself when that is all of it)."""
    source = value.type
    assert isinstance(source, TileType)
    if source.get_shape() == shape and all(isinstance(i, int) and i == 0 for i in indices):
        return value
    result = TileType(shape, source.element_type, source.memory)
    return em.insert(tile.ExtractOp(value, [em.index(i) for i in indices], result)).result


@dataclass(frozen=True)
class _Panel:
    """The stationary operand of one block row over a K range, per m sub-tile: `full[s]` is [K_TILE, tiles, m_s]
    (K tile t of the range at [:, t, :]), `rest[s]` the [K % K_TILE, m_s] last tile when the range ends K."""

    full: list[SSAValue]
    rest: list[SSAValue]


@dataclass(frozen=True)
class _Moving:
    """A moving operand: K tile `tile0 + t` of the chunk is `value[:, tile0 + t, column0:]` (`value[:, column0:]`
    for a partial last tile), so a chunk is either a tile of its own or a window of the resident B."""

    value: SSAValue
    tile0: Index
    column0: Index


@dataclass
class _Kernel:
    lhs: SSAValue
    rhs: SSAValue
    out: SSAValue
    out_element_type: Attribute
    epilogue: Epilogue | None
    blocking: Blocking
    lhs_transposed: bool
    rhs_transposed: bool
    k: int
    lhs_type: Attribute  # the element type TensorE reads A in (the DMA converts when it is not A's)
    rhs_type: Attribute  # and B
    bias_row: SSAValue | None = None  # [..., 1, N] HBM, accumulated into PSUM by a rank-1 matmul
    ones: SSAValue | None = None  # [1, m_tile] SBUF ones: the stationary of the bias matmul
    resident: SSAValue | None = None  # all of B's full K tiles, [K_TILE, K tiles, N], when `blocking.resident`
    resident_rest: SSAValue | None = None  # B's partial last K tile [K % K_TILE, N], when resident
    bias_whole: SSAValue | None = None  # the bias row [1, N], loaded before a resident B read block by block
    target: Target | None = None  # its TensorE costs decide which sub-tiles run swapped (`swapped`)
    copy_to: SSAValue | None = None  # [..., K, N] HBM: B's transposed tiles are stored there too, row-major
    copy_columns: int = 0  # or by blocks of this many columns (`_blocked_by_columns`)
    rhs_columns: int = 0  # B (another kernel's `copy_to`) is stored by blocks of this many columns

    # ---- structure -------------------------------------------------------------------------------------------

    def block_rows(
        self, em: LoopNestBuilder, batch: list[Index], m: int, n: int, resident: bool = False, begin: int = 0
    ) -> None:
        """Every block row of the output. With `blocking.paired`, full block rows go two per trip: both panels
        first, then the blocks of each, so the next trip's first panel loads while the second row computes.

        With `resident`, B is built after the first trip's panels and before their blocks: DMA bandwidth goes
        to transfers in program order, and the panels' transposes then run while B arrives."""
        b = self.blocking
        block_m = b.m_subs * b.m_tile
        pairs = (m - begin) // (2 * block_m) if b.paired else 0
        start = begin
        if resident:
            assert not begin, "a resident B is built by the first block row"
            sizes = [block_m, block_m] if pairs else [min(block_m, m)]
            rows = [self.row_panels(em, batch, i * block_m, size) for i, size in enumerate(sizes)]
            # B read by one block row: each block waits for its own columns only (`load_resident_rows`). A B to
            # transpose loads by K tiles whatever the blocks: unrolling its blocks alone slowed the GPT-2 block's
            # training step (c_attn's input gradient, 625.0 -> 657.9 us). Without a bias row (an input gradient,
            # whose B has long arrived under the backward's earlier work) the straight-line blocks lose more than
            # they gain: their evacuations reuse the block before's buffers where the unrolled loop's copies have
            # their own (BERT-base's step 558.6 -> 562.5 us, the intermediate layer's input gradient).
            by_block = (
                not self.rhs_transposed
                and self.bias_row is not None
                and m <= block_m
                and -(-n // (b.n_subs * b.n_tile)) <= MAX_UNROLLED_BLOCKS
            )
            # The bias row ahead of B: DMA bandwidth goes to transfers in program order, and each block's first
            # matmul reads it (a row loaded per block, behind B, held the linear forward's first block back 13 us)
            if self.bias_row is not None:
                self.bias_whole = self.load_bias(em, batch, 0, n)
            self.build_resident(em, batch, n, by_block)
            for subs, panels in rows:
                self.row_blocks(em, batch, subs, panels, n, unrolled=by_block)
            start = sum(sizes)
        paired_end = begin + pairs * 2 * block_m
        if paired_end > start:
            offset = start

            def pair(e: LoopNestBuilder, m0: Index) -> None:
                first = e.add(offset, m0)
                second = e.add(first, block_m)
                rows = [self.row_panels(e, batch, first, block_m), self.row_panels(e, batch, second, block_m)]
                for subs, panels in rows:
                    self.row_blocks(e, batch, subs, panels, n)

            em.for_tiles(paired_end - start, 2 * block_m, lambda e, m0, _: pair(e, m0))
            start = paired_end
        if m > start:
            first = start
            em.for_tiles(m - start, block_m, lambda e, m0, size: self.block_row(e, batch, e.add(first, m0), size, n))

    def block_row(self, em: LoopNestBuilder, batch: list[Index], m0: Index, m_size: int, n: int) -> None:
        """All output blocks of rows [m0, m0 + m_size): the stationary panel first when it is hoisted."""
        subs, panels = self.row_panels(em, batch, m0, m_size)
        self.row_blocks(em, batch, subs, panels, n)

    def row_panels(
        self, em: LoopNestBuilder, batch: list[Index], m0: Index, m_size: int
    ) -> tuple[list[tuple[Index, int]], list[_Panel] | None]:
        """The m sub-tiles of rows [m0, m0 + m_size) and, when it is hoisted, their whole-K stationary panel."""
        b = self.blocking
        subs = [(em.add(m0, offset), size) for offset, size in _split(m_size, b.m_tile)]
        k_full, k_rest = divmod(self.k, b.k_tile)
        panels: list[_Panel] | None = None
        if b.hoisted and self.k:
            panels = [self.panel(em, batch, subs, 0, k_full, bool(k_rest))]
        return subs, panels

    def row_blocks(
        self,
        em: LoopNestBuilder,
        batch: list[Index],
        subs: list[tuple[Index, int]],
        panels: list[_Panel] | None,
        n: int,
        unrolled: bool = False,
    ) -> None:
        """The output blocks of one block row, across N: a loop, or straight-line code when `unrolled`."""
        block_n = self.blocking.n_subs * self.blocking.n_tile
        if unrolled:
            for n0, n_size in _split(n, block_n):
                self.block(em, batch, subs, n0, n_size, panels)
            return
        em.for_tiles(n, block_n, lambda e, n0, n_size: self.block(e, batch, subs, n0, n_size, panels))

    def block(
        self,
        em: LoopNestBuilder,
        batch: list[Index],
        subs: list[tuple[Index, int]],
        n0: Index,
        n_size: int,
        panels: list[_Panel] | None,
    ) -> None:
        """One output block: accumulate over K in PSUM, then evacuate and store each of its tiles."""
        b = self.blocking
        columns = [(em.add(n0, offset), size) for offset, size in _split(n_size, b.n_tile)]
        k_full, k_rest = divmod(self.k, b.k_tile)
        # The bias row loads first, ahead of the block's moving chunks (or is a window of the whole row, loaded
        # ahead of a resident B): its matmul starts each accumulator.
        bias, bias0 = self.bias_whole, n0
        if bias is None and self.bias_row is not None:
            bias, bias0 = self.load_bias(em, batch, n0, n_size), 0
        started: list[SSAValue] | None = None
        if bias is not None and self.ones is not None and self.k:
            started = self.bias_products(em, bias, [size for _, size in subs], n_size, bias0)
        accs: list[SSAValue]
        if self.k == 0:  # an empty contraction: the product is zero (and there is no operand tile to load)
            accs = [
                em.insert(tile.FillOp(0.0, TileType((m, c), f32, Memory.SBUF))).result
                for _, m in subs
                for _, c in columns
            ]
        elif panels is not None:
            accs = self.accumulate(em, batch, subs, n0, n_size, panels[0], 0, k_full, bool(k_rest), started)
        else:
            full_panels, last = divmod(k_full, b.panel_tiles)

            def panel_step(
                e: LoopNestBuilder, t0: Index, tiles: int, rest: bool, accs: list[SSAValue] | None
            ) -> list[SSAValue]:
                panel = self.panel(e, batch, subs, t0, tiles, rest)
                return self.accumulate(e, batch, subs, n0, n_size, panel, t0, tiles, rest, accs)

            step = b.panel_tiles
            if full_panels:
                accs = panel_step(em, 0, step, False, started)
                accs = carry(
                    em, step, full_panels * step, step, accs, lambda e, t0, a: panel_step(e, t0, step, False, a)
                )
                if last or k_rest:
                    accs = panel_step(em, full_panels * step, last, bool(k_rest), accs)
            else:
                accs = panel_step(em, 0, last, bool(k_rest), started)
        if bias is not None and self.ones is not None and not self.k:  # the bias alone: the product is zero
            accs = self.bias_products(em, bias, [size for _, size in subs], n_size, bias0)
        finish = self.epilogue or self.evacuate
        index = 0
        for (m0, m_size), swapped in zip(subs, self.swaps([size for _, size in subs], n_size), strict=True):
            for c0, c_size in _split(n_size, b.m_tile) if swapped else columns:
                product = accs[index]
                index += 1
                if swapped:  # back to rows: the same fp32 sums, in PSUM as an unswapped accumulator holds them
                    product = em.insert(tile.TransposeOp(to_sbuf(em, product))).result
                    c0 = em.add(n0, c0)
                result_type = TileType((m_size, c_size), self.out_element_type, Memory.SBUF)
                indices = [*batch, m0, c0]
                value = finish(em, product, indices, result_type)
                em.insert(tile.StoreOp(value, self.out, [em.index(i) for i in indices]))

    def accumulate(
        self,
        em: LoopNestBuilder,
        batch: list[Index],
        subs: list[tuple[Index, int]],
        n0: Index,
        n_size: int,
        panel: _Panel,
        t0: Index,
        tiles: int,
        rest: bool,
        accs: list[SSAValue] | None,
    ) -> list[SSAValue]:
        """Fold K tiles [t0, t0 + tiles) (and the partial last tile when `rest`) into the block's accumulators.

        Moving chunks of `chunk_tiles` K tiles are each one DMA (or one set of row loads to transpose). They go
        in groups of `chunks_in_flight` (a pair at least): all loads first, then the K loop over each, so the
        next group's loads overlap this group's later chunks (double buffering, or deeper where a chunk's load
        outlasts its matmuls). Within a chunk, each m sub-tile runs its K loop before the next sub-tile's: in the
        last chunk the first sub-tiles' accumulators are then final while the others still accumulate. The
        block's first group is peeled, and in it the first K tile of an accumulator the bias did not start (it
        starts the PSUM accumulation); the group loop stays a loop even for one trip, and a K loop for more than
        one.
        """
        b = self.blocking
        chunk = b.chunk_tiles
        group = b.chunks_in_flight
        full_chunks, last = divmod(tiles, chunk)
        groups, left = divmod(full_chunks, group)

        # which sub-tiles run swapped is decided for the block's sub-tiles together (their PSUM banks add up)
        swaps = self.swaps([_shape(part)[-1] for part in panel.full], n_size)
        widths = [len(_split(n_size, b.m_tile if swapped else b.n_tile)) for swapped in swaps]

        def compute(
            e: LoopNestBuilder, moving: _Moving, c0: Index, count: int, acc: list[SSAValue] | None
        ) -> list[SSAValue]:
            results: list[SSAValue] = []
            for index, (part, swapped) in enumerate(zip(panel.full, swaps, strict=True)):

                def step(
                    inner: LoopNestBuilder,
                    t: Index,
                    values: list[SSAValue] | None,
                    part: SSAValue = part,
                    swapped: bool = swapped,
                ) -> list[SSAValue]:
                    stationary = [window(inner, part, [inner.add(c0, t), 0], (b.k_tile, _shape(part)[-1]))]
                    lead = [inner.add(moving.tile0, t)]
                    return self.products(
                        inner, stationary, moving.value, lead, b.k_tile, n_size, values, moving.column0, [swapped]
                    )

                first = sum(widths[:index])
                sub_acc = acc[first : first + widths[index]] if acc is not None else None
                start = 0
                if sub_acc is None:
                    sub_acc, start = step(e, 0, None), 1
                # a single trip is inlined: a short K then leaves the block loop innermost (see BLOCK_BANK_SHARE)
                results += carry(e, start, count, 1, sub_acc, step, always_loop=count - start > 1)
            return results

        def load(e: LoopNestBuilder, c0: Index, count: int) -> _Moving:
            return self.moving_chunk(e, batch, e.add(t0, c0), count, n0, n_size)

        def in_flight(e: LoopNestBuilder, c0: Index, acc: list[SSAValue] | None) -> list[SSAValue]:
            starts = [c0] + [e.add(c0, index * chunk) for index in range(1, group)]
            loaded = [load(e, start, chunk) for start in starts]
            for moving, start in zip(loaded, starts, strict=True):
                acc = compute(e, moving, start, chunk, acc)
            assert acc is not None
            return acc

        done = 0
        if groups and (accs is None or t0 == 0):  # the block's first group (whether or not the bias started it)
            accs, done = in_flight(em, 0, accs), 1
        if groups > done:
            assert accs is not None
            stop = groups * group * chunk
            accs = carry(em, done * group * chunk, stop, group * chunk, accs, in_flight, always_loop=True)
        leftover = [((groups * group + index) * chunk, chunk) for index in range(left)]
        for c0, count in (*leftover, (full_chunks * chunk, last)):
            if count:
                accs = compute(em, load(em, c0, count), c0, count, accs)
        if rest:
            k_rest = self.k % b.k_tile
            rest_moving = self.moving_rest(em, batch, n0, n_size)
            accs = self.products(em, panel.rest, rest_moving.value, [], k_rest, n_size, accs, rest_moving.column0)
        assert accs is not None
        return accs

    def products(
        self,
        em: LoopNestBuilder,
        stationary: list[SSAValue],
        moving: SSAValue,
        lead: list[Index],
        k_size: int,
        n_size: int,
        accs: list[SSAValue] | None,
        column0: Index = 0,
        swaps: list[bool] | None = None,
    ) -> list[SSAValue]:
        """One K tile's matmuls into every accumulator of the block (m sub-tiles outer, n sub-tiles inner).

        `swaps` (one per stationary part) is which run swapped, when decided for a larger set of sub-tiles.

        The block's columns start at `column0` of `moving` (a resident B holds all of N). A sub-tile of few rows
        (`swapped`) runs with the roles swapped: each [k, 128] piece of the moving tile is the stationary and the
        sub-tile's [k, m] the moving, into [128, m] accumulators."""
        columns = _split(n_size, self.blocking.n_tile)
        rhs = [window(em, moving, [*lead, em.add(column0, c0)], (k_size, c_size)) for c0, c_size in columns]
        results: list[SSAValue] = []
        if swaps is None:
            swaps = self.swaps([_shape(part)[-1] for part in stationary], n_size)
        for part, swapped in zip(stationary, swaps, strict=True):
            m_size = _shape(part)[-1]
            if swapped:
                for c0, c_size in _split(n_size, self.blocking.m_tile):
                    piece = window(em, moving, [*lead, em.add(column0, c0)], (k_size, c_size))
                    acc = accs[len(results)] if accs is not None else None
                    result_type = TileType((c_size, m_size), f32, Memory.PSUM)
                    results.append(em.insert(tile.MatmulOp(piece, part, result_type, acc)).result)
                continue
            for j, (_, c_size) in enumerate(columns):
                acc = accs[len(results)] if accs is not None else None
                result_type = TileType((m_size, c_size), f32, Memory.PSUM)
                results.append(em.insert(tile.MatmulOp(part, rhs[j], result_type, acc)).result)
        return results

    def bias_spacing(self) -> int:
        """Partitions between the copies of the bias row (`load_bias`): the target's smallest PE row tile, or 0 for
        a single copy: without row tiles, or when the copies' bytes would exceed a quarter of B's (the bias row's
        DMA grows with the partitions it covers, B's with K)."""
        if self.target is None or not self.target.matmul_row_tile_sizes:
            return 0
        spacing = min(self.target.matmul_row_tile_sizes)
        span = self.target.partitions - spacing + 1
        if spacing >= self.target.partitions or 4 * span > self.k:
            return 0
        return spacing

    def bias_copies(self) -> int:
        spacing = self.bias_spacing()
        return self.target.partitions // spacing if spacing and self.target is not None else 1

    def bias_ones(self, em: LoopNestBuilder) -> SSAValue:
        """The stationary of the bias matmuls: ones of m_tile columns on every partition up to the last copy of the
        bias row (`load_bias`): [1, m_tile] for a single copy."""
        assert self.bias_row is not None
        rows = (self.bias_copies() - 1) * self.bias_spacing() + 1
        ones_type = TileType((rows, self.blocking.m_tile), element_type_of(self.bias_row), Memory.SBUF)
        return em.insert(tile.FillOp(1.0, ones_type)).result

    def load_bias(self, em: LoopNestBuilder, batch: list[Index], n0: Index, size: int) -> SSAValue:
        """Columns [n0, n0 + size) of the bias row, with a copy on the first partition of each row tile of the PE
        array (0, 32, 64 and 96 on trn2): one DMA of the row broadcast over partitions 0 to 96 (a DMA writes
        consecutive partitions). The bias matmuls that start a block's accumulators (K = 1) take the copies in
        turn, each on its own row tile, so they stream together where on one row of the array they ran one after
        another (`bias_products`)."""
        assert self.bias_row is not None
        copies, spacing = self.bias_copies(), self.bias_spacing()
        if copies == 1:
            return load(em, self.bias_row, [*batch, 0, n0], (1, size))
        layout = layout_of(self.bias_row)
        span = (copies - 1) * spacing + 1
        spread = Layout(
            (*layout.shape[:-2], span, layout.shape[-1]), (*layout.strides[:-2], 0, layout.strides[-1]), layout.offset
        )
        return load(em, view(em, self.bias_row, spread), [*batch, 0, n0], (span, size))

    def bias_products(
        self, em: LoopNestBuilder, bias: SSAValue, m_sizes: list[int], n_size: int, column0: Index
    ) -> list[SSAValue]:
        """The bias matmuls of one block, as `products` makes them (a ones row against the bias row, K = 1), each
        reading the next copy of the bias row (`load_bias`) on its own PE rows."""
        assert self.ones is not None
        spacing = max(self.bias_spacing(), 1)
        copies = self.bias_copies()
        results: list[SSAValue] = []
        swaps = self.swaps(m_sizes, n_size)
        for m_size, swapped in zip(m_sizes, swaps, strict=True):
            pieces = _split(n_size, self.blocking.m_tile if swapped else self.blocking.n_tile)
            for c0, c_size in pieces:
                first = (len(results) % copies) * spacing
                rows = (first, 1) if copies > 1 else None
                ones = window(em, self.ones, [0], (first + 1, m_size))
                row = window(em, bias, [em.add(column0, c0)], (first + 1, c_size))
                stationary, moving, shape = (row, ones, (c_size, m_size)) if swapped else (ones, row, (m_size, c_size))
                product = tile.MatmulOp(stationary, moving, TileType(shape, f32, Memory.PSUM), rows=rows)
                results.append(em.insert(product).result)
        return results

    def swaps(self, m_sizes: list[int], n_size: int) -> list[bool]:
        """Which sub-tiles of `m_sizes` rows run swapped in a block of `n_size` columns (`swapped`). A swapped
        sub-tile takes a PSUM bank per 128 columns where an unswapped one takes one per 512: none is swapped when the
        block's accumulators would leave no bank for the transposes back to rows ([130, 3072] x [3072, 768]
        would take 2 + 6 of trn2's 8; a ViT step's 394 rows take 3 + 4)."""
        swaps = [self.swapped(m_size, n_size) for m_size in m_sizes]
        if not any(swaps) or self.target is None:
            return swaps
        b = self.blocking
        banks = sum(len(_split(n_size, b.m_tile if swap else b.n_tile)) for swap in swaps)
        return swaps if banks < self.target.psum_banks else [False] * len(swaps)

    def swapped(self, m_size: int, n_size: int) -> bool:
        """Whether a sub-tile of `m_size` rows accumulates a block of `n_size` columns transposed (`products`).

        TensorE time follows the moving side's columns, so a sub-tile of a few rows (the rows a tile of 128 leaves
        over: 394 = 3 x 128 + 10) costs as much per K step as a full one: `max(c, 64)` cycles per PSUM bank of
        columns. With the roles swapped it costs `max(m_size, 64)` per 128 columns. Each [128, m_size]
        accumulator then goes back to rows as it leaves PSUM (`block`): a copy out of PSUM, an fp32 transpose, and
        its own evacuation and store, so the swap pays only for a long K (the cost model's rules, in ns: the
        [394, 3072] x [3072, 768] products of a ViT-B/16 MLP, not its [394, 768] x [768, 768] projections). Only
        where transposes are bit-exact (v3 on): the rows then hold the same fp32 sums as unswapped."""
        target = self.target
        b = self.blocking
        if not self.k or target is None or not target.matmul_transpose_bit_exact or m_size >= b.m_tile:
            return False
        k_steps = -(-self.k // b.k_tile) + (1 if self.bias_row is not None else 0)
        floor = target.matmul_min_cycles
        pieces = _split(n_size, b.m_tile)
        normal = sum(max(c, floor) for _, c in _split(n_size, b.n_tile))
        saved_ns = k_steps * (normal - len(pieces) * max(m_size, floor)) / target.clock_ghz[Engine.TENSOR]
        transposes = len(pieces) * max(m_size, floor) * target.matmul_transpose_fp32_factor
        transposes_ns = transposes / target.clock_ghz[Engine.TENSOR]
        vector = target.vector_min_cycles
        copies_ns = len(pieces) * max(m_size, vector) / target.clock_ghz[Engine.VECTOR]
        # each piece leaves PSUM through its own store: the stores past the one bank's are DMAs whose fixed latency
        # the queues share
        stores_ns = (len(pieces) - len(_split(n_size, b.n_tile))) * target.dma_fixed_latency_ns / target.dma_queues
        return saved_ns > transposes_ns + copies_ns + stores_ns

    # ---- operands --------------------------------------------------------------------------------------------

    def panel(
        self, em: LoopNestBuilder, batch: list[Index], subs: list[tuple[Index, int]], t0: Index, tiles: int, rest: bool
    ) -> _Panel:
        """The stationary A^T of rows `subs` over K tiles [t0, t0 + tiles) (+ the partial last tile)."""
        b = self.blocking
        rank = len(batch) + 2
        full: list[SSAValue] = []
        rest_tiles: list[SSAValue] = []
        k0 = em.mul(t0, b.k_tile)
        k_full, k_rest = divmod(self.k, b.k_tile)
        if tiles and not self.lhs_transposed:
            split = split_axis(em, self.lhs, rank - 1, k_full, b.k_tile)
            for m0, m_size in subs:
                indices: list[Index] = [*batch, m0, t0, 0]
                full.append(
                    load(em, split, indices, (b.k_tile, tiles, m_size), self.lhs_type, dims=(rank, rank - 1, rank - 2))
                )
        elif tiles:
            rows = [
                load(em, self.lhs, [*batch, m0, k0], (m_size, tiles * b.k_tile), self.lhs_type) for m0, m_size in subs
            ]
            empty: list[SSAValue] = [
                em.insert(tile.EmptyOp(TileType((b.k_tile, tiles, m_size), self.lhs_type))).result for _, m_size in subs
            ]

            def transpose_step(e: LoopNestBuilder, t: Index, panel: list[SSAValue]) -> list[SSAValue]:
                updated: list[SSAValue] = []
                for row, part, (_, m_size) in zip(rows, panel, subs, strict=True):
                    block = window(e, row, [e.mul(t, b.k_tile)], (m_size, b.k_tile))
                    transposed = e.insert(tile.TransposeOp(block)).result
                    updated.append(e.insert(tile.InsertOp(transposed, part, [e.index(t), e.index(0)])).result)
                return updated

            full = carry(em, 0, tiles, 1, empty, transpose_step, always_loop=True)
        if rest:
            for m0, m_size in subs:
                rest_tiles.append(
                    _k_on_partitions(
                        em, self.lhs, batch, k_full * b.k_tile, k_rest, m0, m_size, rank - 1, rank - 2, self.lhs_type
                    )
                )
        return _Panel(full, rest_tiles)

    def build_resident(self, em: LoopNestBuilder, batch: list[Index], n: int, by_block: bool = False) -> None:
        """All of B with K on partitions, once for every block row: `resident` (and `resident_rest`)."""
        b = self.blocking
        k_full, k_rest = divmod(self.k, b.k_tile)
        if k_full and not self.rhs_transposed:
            self.resident = self.load_resident_rows(em, batch, k_full, n, by_block)
        elif k_full:
            self.resident = self.load_moving(em, batch, 0, k_full, 0, n)
        if k_rest:
            self.resident_rest = self.load_moving_rest(em, batch, 0, n)

    def load_resident_rows(
        self, em: LoopNestBuilder, batch: list[Index], k_tiles: int, n: int, by_block: bool = False
    ) -> SSAValue:
        """B's first `k_tiles` K tiles, [K_TILE, k_tiles, N], in DMAs of about `MOVING_CHUNK_BYTES` per partition.

        One transfer of all of B would hold back the first block's matmuls until its last byte arrived; pieces
        (granted bandwidth in program order) let the first K tiles' products start under the later pieces' loads.
        With `by_block` (B read by one block row, its blocks straight-line code) the pieces go in the order the
        blocks read them: a block's columns, its K tiles in order, then the next block's, so that each block
        waits for its own columns only. Pieces of whole rows made the first block wait for every K tile of all
        of B (its K loop reaches the last tile once all of B has arrived): c_attn's first block (768 -> 2304) paced
        its matmuls by B's loads. Each piece is loaded straight into its window of the whole
        (convert-tile-to-neuron)."""
        b = self.blocking
        rank = len(batch) + 2
        split = split_axis(em, self.rhs, rank - 2, k_tiles, b.k_tile)
        block_n = min(n, b.n_subs * b.n_tile) if by_block else n
        piece = max(1, MOVING_CHUNK_BYTES // (block_n * element_bytes(self.rhs_type)))
        if k_tiles <= piece and n <= block_n:  # one piece: the load is the whole
            return load(
                em, split, [*batch, 0, 0, 0], (b.k_tile, k_tiles, n), self.rhs_type, dims=(rank - 1, rank - 2, rank)
            )
        whole = em.insert(tile.EmptyOp(TileType((b.k_tile, k_tiles, n), self.rhs_type))).result
        for c0, columns in _split(n, block_n):
            for t0, tiles in _split(k_tiles, piece):
                rows = load(
                    em,
                    split,
                    [*batch, t0, 0, c0],
                    (b.k_tile, tiles, columns),
                    self.rhs_type,
                    dims=(rank - 1, rank - 2, rank),
                )
                whole = em.insert(tile.InsertOp(rows, whole, [em.index(t0), em.index(c0)])).result
        return whole

    def moving_chunk(
        self, em: LoopNestBuilder, batch: list[Index], t0: Index, tiles: int, n0: Index, n_size: int
    ) -> _Moving:
        """B over K tiles [t0, t0 + tiles) and columns [n0, n0 + n_size): loaded, or a window of the resident B."""
        if self.resident is not None:
            return _Moving(self.resident, t0, n0)
        return _Moving(self.load_moving(em, batch, t0, tiles, n0, n_size), 0, 0)

    def load_moving(
        self, em: LoopNestBuilder, batch: list[Index], t0: Index, tiles: int, n0: Index, n_size: int
    ) -> SSAValue:
        """B over K tiles [t0, t0 + tiles) and columns [n0, n0 + n_size) as one [K_TILE, tiles, n_size] tile.
        A K-contiguous B comes from DMA transposes where `_dma_transposable`, else from row loads and TensorE
        transposes."""
        b = self.blocking
        rank = len(batch) + 2
        if self.rhs_columns:
            blocked = _blocked_by_columns(em, self.rhs, b.k_tile, self.rhs_columns)
            return load(em, blocked, [*batch, n0, 0, t0, 0], (b.k_tile, tiles, n_size), self.rhs_type)
        if not self.rhs_transposed:
            split = split_axis(em, self.rhs, rank - 2, self.k // b.k_tile, b.k_tile)
            return load(
                em,
                split,
                [*batch, t0, 0, n0],
                (b.k_tile, tiles, n_size),
                self.rhs_type,
                dims=(rank - 1, rank - 2, rank),
            )
        chunk = em.insert(tile.EmptyOp(TileType((b.k_tile, tiles, n_size), self.rhs_type))).result
        k0 = em.mul(t0, b.k_tile)
        if _dma_transposable(em, self.rhs, self.rhs_type):
            for t in range(tiles):
                k_t = em.add(k0, t * b.k_tile)
                tile_t = load(em, self.rhs, [*batch, k_t, n0], (b.k_tile, n_size), self.rhs_type)
                chunk = em.insert(tile.InsertOp(tile_t, chunk, [em.index(t), em.index(0)])).result
            return chunk
        pieces = _split(n_size, b.m_tile)
        rows = [
            load(
                em,
                self.rhs,
                [*batch, k0, em.add(n0, c0)],
                (c_size, tiles * b.k_tile),
                self.rhs_type,
                dims=(rank - 1, rank - 2),
            )
            for c0, c_size in pieces
        ]

        def transpose_step(e: LoopNestBuilder, t: Index, values: list[SSAValue]) -> list[SSAValue]:
            [value] = values
            for row, (c0, c_size) in zip(rows, pieces, strict=True):
                block = window(e, row, [e.mul(t, b.k_tile)], (c_size, b.k_tile))
                transposed = e.insert(tile.TransposeOp(block)).result
                value = e.insert(tile.InsertOp(transposed, value, [e.index(t), e.index(c0)])).result
            return [value]

        transposed_chunk = carry(em, 0, tiles, 1, [chunk], transpose_step, always_loop=True)[0]
        if self.copy_to is not None and self.copy_columns:
            blocked = _blocked_by_columns(em, self.copy_to, b.k_tile, self.copy_columns)
            store(em, transposed_chunk, blocked, [*batch, n0, 0, t0, 0])
        elif self.copy_to is not None:
            store(em, transposed_chunk, self._copy_by_k_tiles(em), [*batch, 0, t0, n0])
        return transposed_chunk

    def _copy_by_k_tiles(self, em: LoopNestBuilder) -> SSAValue:
        """`copy_to` viewed as [..., K tile, K tiles, N]: a moving chunk [K tile, tiles, columns] stores to one
        window of it."""
        assert self.copy_to is not None
        layout = layout_of(self.copy_to)
        k_tile, k_tiles, row = self.blocking.k_tile, self.k // self.blocking.k_tile, layout.strides[-2]
        shape = (*layout.shape[:-2], k_tile, k_tiles, layout.shape[-1])
        return view(em, self.copy_to, Layout(shape, (*layout.strides[:-2], row, k_tile * row, 1), layout.offset))

    def moving_rest(self, em: LoopNestBuilder, batch: list[Index], n0: Index, n_size: int) -> _Moving:
        """B's partial last K tile, columns [n0, n0 + n_size): loaded, or a window of the resident one."""
        if self.resident_rest is not None:
            return _Moving(self.resident_rest, 0, n0)
        return _Moving(self.load_moving_rest(em, batch, n0, n_size), 0, 0)

    def load_moving_rest(self, em: LoopNestBuilder, batch: list[Index], n0: Index, n_size: int) -> SSAValue:
        """B's partial last K tile, columns [n0, n0 + n_size): [K % K_TILE, n_size]."""
        b = self.blocking
        rank = len(batch) + 2
        k0, k_rest = self.k // b.k_tile * b.k_tile, self.k % b.k_tile
        if not self.rhs_transposed or _dma_transposable(em, self.rhs, self.rhs_type):
            return load(em, self.rhs, [*batch, k0, n0], (k_rest, n_size), self.rhs_type)
        pieces = _split(n_size, b.m_tile)
        if len(pieces) == 1:
            rest = _k_on_partitions(em, self.rhs, batch, k0, k_rest, n0, n_size, rank - 2, rank - 1, self.rhs_type)
        else:
            rest = em.insert(tile.EmptyOp(TileType((k_rest, n_size), self.rhs_type))).result
            for c0, c_size in pieces:
                rows = load(
                    em,
                    self.rhs,
                    [*batch, k0, em.add(n0, c0)],
                    (c_size, k_rest),
                    self.rhs_type,
                    dims=(rank - 1, rank - 2),
                )
                transposed = em.insert(tile.TransposeOp(rows)).result
                rest = em.insert(tile.InsertOp(transposed, rest, [em.index(c0)])).result
        if self.copy_to is not None:
            store(em, rest, self.copy_to, [*batch, k0, n0])
        return rest

    def evacuate(self, em: LoopNestBuilder, product: SSAValue, indices: list[Index], result_type: TileType) -> SSAValue:
        """PSUM -> SBUF as one engine-neutral copy: neuron-balance-engines spreads a block's evacuations over
        VectorE and ScalarE so that they overlap each other and the next block's matmuls."""
        return to_sbuf(em, product, result_type.element_type)


def split_axis(em: LoopNestBuilder, tensor: SSAValue, k_dim: int, k_tiles: int, k_tile: int) -> SSAValue:
    """`tensor` viewed with its first `k_tiles * k_tile` rows of K as [k_tiles, k_tile] (two dims for one)."""
    layout = layout_of(tensor)
    shape = (*layout.shape[:k_dim], k_tiles, k_tile, *layout.shape[k_dim + 1 :])
    strides = (
        *layout.strides[:k_dim],
        k_tile * layout.strides[k_dim],
        layout.strides[k_dim],
        *layout.strides[k_dim + 1 :],
    )
    return view(em, tensor, Layout(shape, strides, layout.offset))


def _dma_transposable(em: LoopNestBuilder, tensor: SSAValue, element_type: Attribute) -> bool:
    """Whether tiles of `tensor` with its contiguous axis on partitions load by DMA transpose: the target has one
    and the elements are 2-byte ones the load does not convert (convert-tile-to-neuron's `_transposed_source`)."""
    return (
        bool(emitter_target(em).dma_transpose_hbm_efficiency)
        and element_type_of(tensor) == element_type
        and element_bytes(element_type) == 2
    )


def _k_contiguous(layout_strides: tuple[int, ...], shape: tuple[int, ...], k_dim: int, other_dim: int) -> bool:
    """Whether K is the contiguous axis (and the other is not): such tiles load row-wise and transpose on TensorE."""
    return layout_strides[k_dim] == 1 and shape[other_dim] > 1 and layout_strides[other_dim] != 1


def _k_on_partitions(
    em: LoopNestBuilder,
    tensor: SSAValue,
    batch: list[Index],
    k0: Index,
    k_size: int,
    other0: Index,
    other_size: int,
    k_dim: int,
    other_dim: int,
    element_type: Attribute | None = None,
) -> SSAValue:
    """The [K, other] SBUF tile of `tensor` with K on partitions, loaded the cheapest way its layout allows (as
    `element_type`, by default the tensor's).

    When K is the tensor's contiguous axis, a DMA with K on partitions would move one element per descriptor;
    instead the tile is loaded row-wise ([other, K], contiguous rows) and transposed on TensorE, then copied
    out of PSUM.
    """
    layout = layout_of(tensor)
    indices: list[Index] = [*batch, 0, 0]
    indices[k_dim], indices[other_dim] = k0, other0
    if _k_contiguous(layout.strides, layout.shape, k_dim, other_dim):
        rows = load(em, tensor, indices, (other_size, k_size), element_type, dims=(other_dim, k_dim))
        transposed = em.insert(tile.TransposeOp(rows)).result
        return to_sbuf(em, transposed)
    return load(em, tensor, indices, (k_size, other_size), element_type, dims=(k_dim, other_dim))


def broadcast_view(em: LoopNestBuilder, value: SSAValue, shape: tuple[int, ...]) -> SSAValue:
    """`value` viewed broadcast to `shape` (stride 0 on broadcast dims)."""
    return view(em, value, layout_of(value).broadcast_to(shape))


# ---- ATen ops ------------------------------------------------------------------------------------------------


def _mm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    rows = row_bound(em, op, layout_of(args["self"]).shape[-2])
    return [emit_matmul(em, args["self"], args["mat2"], result_element_type(op), rows=rows)]


def _addmm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`beta * self + alpha * (mat1 @ mat2)`: the bias joins as PSUM is evacuated."""
    lhs, args = _non_finite_alpha_into_lhs(em, args["mat1"], args)
    return [_scaled_product_plus(em, op, args["self"], lhs, args["mat2"], args)]


def _addbmm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`beta * self + alpha * sum_b batch1[b] @ batch2[b]`: one matmul contracting over (batch, K) in PSUM.

    batch1 [B, M, K] is viewed as [M, B * K] (a copy when its strides cannot merge B and K), batch2 as [B * K, N].
    """
    lhs, rhs = layout_of(args["batch1"]), layout_of(args["batch2"])
    batches, m, k = lhs.shape
    n = rhs.shape[-1]
    merged_lhs = _merged(em, args["batch1"], lhs.permute([1, 0, 2]), (m, batches * k))
    merged_rhs = _merged(em, args["batch2"], rhs, (batches * k, n))
    merged_lhs, args = _non_finite_alpha_into_lhs(em, merged_lhs, args)
    return [_scaled_product_plus(em, op, args["self"], merged_lhs, merged_rhs, args)]


def _non_finite_alpha_into_lhs(
    em: LoopNestBuilder, lhs: SSAValue, args: dict[str, Any]
) -> tuple[SSAValue, dict[str, Any]]:
    """For an infinite or NaN `alpha`, `alpha * lhs` (and alpha 1 left to apply), else `lhs` and `args` as they
    are.

    PyTorch's CPU addmm and addbmm hand alpha to the BLAS, where it enters depends on the BLAS and the processor:
    scaling the left operand's elements first, each element is sum_k (alpha * a_ik) * b_kj, so an infinite alpha
    makes NaN of any zero a_ik (inf * 0) and of infinite terms of both signs, where alpha * (a @ b) would be an
    infinity. This lowering fixes the first order, and the torch-level semantics states the same
    (`ir/semantics/torch.py`), so a result does not depend on the host. For a finite alpha the two orders differ
    by rounding only, and scaling the product as PSUM is evacuated costs no pass over an operand.
    """
    alpha = float(args.get("alpha", 1))
    if math.isfinite(alpha):
        return lhs, args
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise

    def scale(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return _times(e, tiles[0], alpha, result)

    shape = layout_of(lhs).shape
    scaled = emit_elementwise(em, shape, element_type_of(lhs), [lhs], scale)
    return scaled, {**args, "alpha": 1.0}


def _addmv(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`beta * self + alpha * (mat @ vec)` as an [M, K] @ [K, 1] matmul."""
    vec = layout_of(args["vec"])
    column = view(em, args["vec"], Layout((vec.shape[0], 1), (vec.strides[0], 0), vec.offset))
    bias = layout_of(args["self"])
    bias_column = view(em, args["self"], bias.expand((layout_of(args["mat"]).shape[0],)).unsqueeze(1))
    out = _scaled_product_plus(em, op, bias_column, args["mat"], column, args, (layout_of(args["mat"]).shape[0], 1))
    return [view(em, out, layout_of(out).reshape(result_shape(op)))]  # type: ignore[arg-type]


def _trilinear(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """`sum over sumdim of i1' * i2' * i3'`, each input unsqueezed at its `expand` dims (nn.functional.bilinear).

    The broadcast product is formed elementwise (VectorE) and reduced over `sumdim`: exact to the definition; it
    materialises the full product, which suits bilinear layers' small feature sizes.
    """
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise
    from neuron_mlir.lowering.convert_torch_to_tile.reduction import emit_reduce

    inputs = []
    for name, expand in (("i1", "expand1"), ("i2", "expand2"), ("i3", "expand3")):
        layout = layout_of(args[name])
        for dim in sorted(args[expand]):
            layout = layout.unsqueeze(dim)
        inputs.append((args[name], layout))
    rank = inputs[0][1].rank
    shape = tuple(max(layout.shape[d] for _, layout in inputs) for d in range(rank))
    views = [view(em, value, layout.expand(shape)) for value, layout in inputs]

    def product(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        work = TileType(result.get_shape(), f32, Memory.SBUF)
        first = e.insert(tile.BinaryOp(tiles[0], tiles[1], "multiply", work)).result
        return e.insert(tile.BinaryOp(first, tiles[2], "multiply", work)).result

    products = emit_elementwise(em, shape, f32, views, product)
    sumdim = sorted(args["sumdim"])
    if not sumdim:
        return [copy_to(em, products) if result_element_type(op) == f32 else _cast_copy(em, products, op)]
    return [emit_reduce(em, products, sumdim, False, "add", result_element_type(op))]


def _cast_copy(em: LoopNestBuilder, value: SSAValue, op: Operation) -> SSAValue:
    from neuron_mlir.lowering.convert_torch_to_tile.elementwise import emit_elementwise

    def cast(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        return e.insert(tile.CopyOp(tiles[0], result)).result

    return emit_elementwise(em, layout_of(value).shape, result_element_type(op), [value], cast)


def _merged(em: LoopNestBuilder, value: SSAValue, layout: Layout, shape: tuple[int, ...]) -> SSAValue:
    """`value` seen through `layout`, reshaped to `shape` (copied contiguous first when strides cannot say it)."""
    reshaped = layout.reshape(shape)
    if reshaped is None:
        copy = copy_to(em, view(em, value, layout))
        reshaped = layout_of(copy).reshape(shape)
        assert reshaped is not None
        value = copy
    return view(em, value, reshaped)


def _scaled_product_plus(
    em: LoopNestBuilder,
    op: Operation,
    bias_value: SSAValue,
    lhs: SSAValue,
    rhs: SSAValue,
    args: dict[str, Any],
    out_shape: tuple[int, ...] | None = None,
) -> SSAValue:
    """`beta * bias + alpha * (lhs @ rhs)` with the bias broadcast to the product's shape."""
    beta, alpha = float(args.get("beta", 1)), float(args.get("alpha", 1))
    rows = row_bound(em, op, layout_of(lhs).shape[0]) if out_shape is None else None
    out_shape = out_shape or result_shape(op)
    bias = broadcast_view(em, bias_value, out_shape)
    bias_layout = layout_of(bias)
    sixteen_bit = all(element_bytes(element_type_of(value)) == 2 for value in (bias, lhs, rhs))
    if beta == 1.0 and alpha == 1.0 and len(out_shape) == 2 and bias_layout.strides[0] == 0 and sixteen_bit:
        # The same bias for every row (a Linear layer's): TensorE adds it into PSUM, and the evacuation is a
        # plain copy, which VectorE or ScalarE may run. In 16-bit types the bias matmul costs a fifth of
        # VectorE's fp32 add of the bias from PSUM; in fp32 (a quarter of TensorE's rate) it would not.
        row = view(em, bias, Layout((1, out_shape[1]), bias_layout.strides, bias_layout.offset))
        return emit_matmul(em, lhs, rhs, result_element_type(op), bias_row=row, rows=rows)

    def epilogue(e: LoopNestBuilder, product: SSAValue, indices: list[Index], result_type: TileType) -> SSAValue:
        shape = result_type.get_shape()
        work = TileType(shape, f32, Memory.SBUF)
        bias_tile = load(e, bias, indices, shape)
        if beta == 0.0:
            return to_sbuf(e, _times(e, product, alpha, work), result_type.element_type)
        if beta != 1.0:
            bias_tile = _times(e, bias_tile, beta, work)
        if alpha != 1.0:
            product = _times(e, product, alpha, work)
        return e.insert(tile.BinaryOp(product, bias_tile, "add", result_type)).result

    return emit_matmul(em, lhs, rhs, result_element_type(op), epilogue, rows=rows)


def _times(em: LoopNestBuilder, value: SSAValue, factor: float, result_type: TileType) -> SSAValue:
    if factor == 1.0:
        return value
    return em.insert(tile.BinaryScalarOp(value, "multiply", result_type, scalar=factor)).result


def legal(op: Operation) -> str | None:
    """Matmul-shaped ops lower for any sizes and strides (K may be 0)."""
    return None


MATMUL_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.mm": _mm,
    "torch.aten.bmm": _mm,
    "torch.aten.addmm": _addmm,
    "torch.aten.addbmm": _addbmm,
    "torch.aten.addmv": _addmv,
    "torch.aten._trilinear": _trilinear,
}
