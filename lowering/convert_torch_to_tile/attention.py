"""Fused attention: `softmax(Q K^T * scale + mask) V` with the scores, the softmax and the product kept on chip.

Input contract: `torch.aten._scaled_dot_product_flash_attention_for_cpu` (what inference graphs trace attention to,
see `frontend.backend.attention_backends`) on float query [..., Hq, L, E], key [..., Hkv, S, E] and value
[..., Hkv, S, Ev], any strides, with equal batch dimensions but for the heads: Hq = g Hkv, where key/value head j
serves query heads [g j, g j + g) (grouped-query attention, as ATen's kernel reads differing head counts); an
optional float `attn_mask` broadcastable to [..., Hq, L, S]; `is_causal` (top-left aligned: query i sees keys
j <= i); `scale` (default 1/sqrt(E)). Dropout is refused (inference graphs carry none), as are values wider than
one PSUM bank (Ev > 512; ATen's kernel takes Ev = E only, so such heads are beyond every model's): those nodes run
on the CPU.

Output guarantee: the output [..., Hq, L, Ev] in the query's dtype and, when used, the log-sum-exp [..., Hq, L] in
fp32, each written once; no [L, S] intermediate reaches HBM. Per (batch, key/value head) the key (and per query
head, when it fits, the query) is transposed once into K^T [E, S] (and Q^T [E, L]): by a DMA transpose as it
loads where the target has one and the elements are 2-byte (`load_head_transposed`), else on TensorE from rows
loaded contiguously (a plain DMA with E on partitions would move one element per descriptor), and kept in SBUF
while every query tile of every query head of the group uses it. Heads wider than one TensorE contraction (E >
128: Gemma's 256) keep K^T and Q^T as one tile per 128 features, and the scores accumulate over them in PSUM. The
keys are walked in chunks of one PSUM bank (512 columns) with the online softmax:

    s     = Q K^T[:, chunk] * scale (+ mask)           TensorE into PSUM (scaled through Q^T, or evacuated scaled)
    m'    = max(m, rowmax(s))                          [P, 1] columns
    p     = exp(s - m'), l' = l * exp(m - m') + sum(p) p in the input dtype: the second matmul's operand
    O'    = O * exp(m - m') + p [V | 1][chunk]         p^T per 128 keys from TensorE transposes, PSUM accumulation
    out   = O / l, logsumexp = m + log(l)

The value rows carry a column of ones (when Ev < 512), so the row sums l come out of the second matmul beside O
instead of from a VectorE reduce of p. A log-sum-exp of 16-bit inputs instead sums the fp32 exponentials (a
reduce that neuron-fuse-instructions folds into the exponential, which then writes p in the input dtype itself:
ScalarE accumulates its fp32 results before rounding them), as ATen's kernel does: the sum of p rounded to
bf16 is off by the rounding of its largest term, which a row of few keys shows in the fp32 result.

Schedule. The engines are in-order queues, and one query tile's chain (scores, row max, exponentials, p^T, product)
leaves each engine idle while it waits for the previous link. Without a mask, with at least 128 queries, and when
a head's rows stay in SBUF, the work is cut into units (one head's query tile) and two or three units share a loop
trip (three when their PSUM fits: each holds a bank for its scores, one for its product, and its p^T blocks),
emitted stage by stage across the units, so that one unit's softmax on VectorE/ScalarE runs while TensorE
multiplies for another. The units of a trip are the same query tile of several heads (heads grouped by the trip's
unit count along the innermost batch dimension), or several query tiles of one head (the remainder heads). Such
trips hold no DMA, so neuron-unroll-loops leaves them alone (it would double their PSUM banks): outputs are
collected in SBUF, the (consecutive) heads' rows side by side, and stored in one DMA for all of them (a row of
those heads is one contiguous run of the output, which keeps the heads beside the features), each head's
log-sum-exp transposed into rows of queries and stored in one DMA; the partial last query tile runs in a loop of
its own for the same reason. With a mask, or rows streamed from HBM, each trip is one unit and stores its own rows
(neuron-unroll-loops then double-buffers the loads).

Grouped queries. A group holds as many key/value heads as keep their query heads within one trip's units (at least
one: a single key/value head once g exceeds half of them); a group's query heads share the trips as heads do
without grouping, all reading the K^T and value rows their key/value head built once. When one head's g query heads
outnumber a trip's units, they take turns in groups of that many (a loop after K^T is built, each turn transposing
its own queries), the remainder last. (Sharing trips unevenly, e.g. 2 query heads per key/value head over trips of
3 units, would need query-head indices that are not affine in the loop's.)
A decoding step (L = 1, not causal) goes further: the g query heads of a key/value head are viewed as g query rows
of that one head ([..., Hkv, g, E], a view of the query, the mask and the outputs), so they share every matmul,
exponential and transpose over its keys instead of each repeating them for one row.

One chunk (S <= 512) needs no rescaling; with more, m, l and O start at (-1e30, 0, 0) and every chunk runs in a
loop of its own, so one loop body never holds two chunks' PSUM banks. With a mask, the running maximum is floored
at -1e30 and row sums at 1e-30, so a row whose every key is masked with -inf gives 0 (and logsumexp 0), as ATen's
kernel does; without one every row sees a key and needs neither. Causal masking adds -1e30 above the diagonal
(from a GpSimdE iota of key minus query position, built once for all heads and added in PSUM by TensorE): the first
chunk always holds key 0, so the running maximum is a real score and those entries vanish exactly.

Causal trips know their query tiles at compile time (a loop of one trip per tile group, the heads still in a loop):
query tile t reads keys [0, min(S, 128 (t + 1))) only, so the keys above the diagonal cost nothing, and only the
chunk holding the tile's diagonal block gets the mask (none when every key precedes the tile's first row, L > S).
Chunks of equal widths for every unit of a trip share one loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import AnyFloat, IndexType, StringAttr, f32
from xdsl.ir import Attribute, Block, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.neuron import element_type_name, target_of
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.dialects.torch import PADDED_KEYS_ATTR
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    PARTITION_TILE,
    Lowering,
    alloc,
    arguments_of,
    body_budget_bytes,
    column_tile,
    element_type_of,
    emitter_target,
    layout_of,
    load,
    result_element_type,
    sbuf_tile,
    store,
    tensor_element_type,
    tensor_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import bounded_loop, bounded_tiles, size_bounds
from neuron_mlir.lowering.convert_torch_to_tile.matmul import carry, matmul_limits, split_axis, window
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import Memory, Target

OP_NAME = "torch.aten._scaled_dot_product_flash_attention_for_cpu"
# Floor of the running row maximum, and the causal mask's additive bias: far below any score, yet finite, so
# exp(m - m') and (masked - m) never meet inf - inf.
MASKED = -1.0e30
# Below any real row sum (which is at least 1: the maximum's own exp(0)), above 0: a fully masked row divides
# 0 by this and gives 0.
TINY_SUM = 1.0e-30
# Bytes per partition beyond the accumulators and transposes that each unit of a trip may leave in PSUM (its row
# sum's copy, with alignment).
UNIT_PSUM_SLACK = 128
# Pipelined head groups are emitted one after another, without a loop, up to this many: each group then has
# buffers of its own, so its loads and transposes start while the group before it computes, where in a loop
# they would wait for the previous trip through the body to release the same buffers.
UNROLLED_GROUPS = 8
# Key widths a kernel over padded keys is emitted for at most (one per 128-key block of the bucket): each is a
# copy of the heads' work, and a call runs the one of its own key blocks.
KEY_VARIANTS = 8


@dataclass(frozen=True)
class _Rows:
    """Consecutive rows of one head's [N, width] matrix in SBUF: full 128-row blocks as `full` [128, blocks, width]
    (block t at [:, t, :]), or, for rows loaded with those of neighbouring heads, [128, blocks, heads, width] with
    this head at `head`; and `last` [N % 128, width], the matrix's partial last block, when the rows reach it."""

    full: SSAValue | None
    last: SSAValue | None
    width: int
    first: Index = 0  # block index (within `full`) of the rows' block 0
    head: int | None = None  # this head's index in a `full` of several heads
    # instead of `full`, one [128, 1, heads, width] tile per block (`first_value_blocks`), read at constant blocks
    blocks: tuple[SSAValue, ...] | None = None

    def block(self, em: LoopNestBuilder, t: Index, size: int, columns: tuple[int, int] | None = None) -> SSAValue:
        """Block t of the rows, `size` rows long (less than 128 only for the matrix's partial last block): all of
        its columns, or `columns` (first, count)."""
        first_column, width = columns if columns is not None else (0, self.width)
        if size < PARTITION_TILE:
            assert self.last is not None
            return window(em, self.last, [first_column], (size, width))
        heads = [] if self.head is None else [self.head]
        if self.blocks is not None:
            index = em.add(self.first, t)
            assert isinstance(index, int), "rows kept per block are read at constant blocks"
            return window(em, self.blocks[index], [0, *heads, first_column], (PARTITION_TILE, width))
        assert self.full is not None
        return window(em, self.full, [em.add(self.first, t), *heads, first_column], (PARTITION_TILE, width))

    def shifted(self, first: Index) -> _Rows:
        return _Rows(self.full, self.last, self.width, first, self.head, self.blocks)


@dataclass(frozen=True)
class _KeyValue:
    """One key/value head kept in SBUF: its index, K^T as one [e, S] tile per contraction tile of the head's
    features (see `_Attention.feature_tiles`), and its value rows (with their ones column)."""

    batch: list[Index]
    keys_t: list[SSAValue]
    values: _Rows


@dataclass(frozen=True)
class _Head:
    """One (batch, query head): its index, its keys and values per chunk (K^T [e, n] per feature tile, value rows),
    Q^T [e, p] per feature tile of a query tile."""

    batch: list[Index]
    chunk_operands: Callable[[LoopNestBuilder, Index, int], tuple[list[SSAValue], _Rows]]
    query_t: Callable[[LoopNestBuilder, Index, int], list[SSAValue]]


@dataclass(frozen=True)
class _Unit:
    """One query tile of one head: tile t, its first row m0, p rows."""

    head: _Head
    t: Index
    m0: Index
    p: int


@dataclass(frozen=True)
class _Pending:
    """Units of one chunk whose exponentials are computed and whose products are not (`begin_units`)."""

    units: list[_Unit]
    widths: list[int]
    values: list[_Rows]
    maxima: list[tuple[SSAValue, SSAValue]]
    probabilities: list[SSAValue]
    summands: list[SSAValue]


class _Attention:
    """One attention op's kernel; `emit` writes its loop nest."""

    def __init__(self, em: LoopNestBuilder, op: Operation, args: dict[str, Any]):
        self.query, self.key, self.value = args["query"], args["key"], args["value"]
        q_layout, k_layout, v_layout = layout_of(self.query), layout_of(self.key), layout_of(self.value)
        self.batch = q_layout.shape[:-2]
        self.key_batch = k_layout.shape[:-2]
        # Grouped-query attention: key/value head j serves query heads [g j, g j + g) (ATen's kernel, like
        # `repeat_interleave(g, dim=-3)` of the keys and values).
        self.groups = _query_groups(q_layout.shape, k_layout.shape)
        self.length, self.head = q_layout.shape[-2:]
        self.keys = k_layout.shape[-2]
        self.value_head = v_layout.shape[-1]
        k_limit, _, n_limit = matmul_limits(em)
        # Scores contract over the head's features in tiles of at most one TensorE contraction, accumulated in PSUM.
        self.feature_tiles = [(e0, min(k_limit, self.head - e0)) for e0 in range(0, self.head, k_limit)]
        self.chunk = n_limit
        scale = args.get("scale")
        self.scale = float(scale) if scale is not None else 1.0 / math.sqrt(self.head) if self.head else 1.0
        # Without a mask to add, scores stay unscaled (the matmul's PSUM result is read as it is) and the scale
        # joins each exponential, exp(scale * s - scale * m); a mask is added to scaled scores.
        self.exp_scale = 1.0 if args.get("attn_mask") is not None else self.scale
        self.causal = bool(args.get("is_causal"))
        mask = args.get("attn_mask")
        self.mask = None
        if mask is not None:
            shape = (*self.batch, self.length, self.keys)
            self.mask = view(em, mask, layout_of(mask).broadcast_to(shape))
        self.element_type = element_type_of(self.query)
        self.out_type = result_element_type(op, 0)
        self.out = self.allocate_output(em)
        wants_lse = bool(op.results[1].uses)
        self.lse = alloc(em, (*self.batch, self.length, 1), f32) if wants_lse else None
        self.result_values: tuple[SSAValue, SSAValue | None] = (self.out, self.lse)
        self.result_shape = (*self.batch, self.length)
        # In a size bucket's program, the call's extents of the batch dimensions and of the queries (the size
        # arguments bounding the output's dimensions): padded batches and query tiles past the call's are skipped,
        # their output rows left unwritten (docs/dynamic-shapes.md)
        bounds = size_bounds(em, op) or (None,) * (len(self.batch) + 2)
        self.batch_bounds: tuple[SSAValue | None, ...] = bounds[: len(self.batch)]
        self.query_bound = bounds[len(self.batch)] if self.length % PARTITION_TILE == 0 else None
        # Keys a size bucket pads (`PADDED_KEYS_ATTR`): the call's key count, past which key and value rows are
        # padding the kernel sets to 0 as it loads them (their mask entries are -inf, but 0 * NaN is NaN)
        self.key_count: SSAValue | None = None
        padded = op.attributes.get(PADDED_KEYS_ATTR)
        if isinstance(padded, StringAttr):
            arguments = em.context.size_arguments if em.context is not None else {}
            if padded.data not in arguments:
                raise ValueError(f"{PADDED_KEYS_ATTR} names {padded.data}, not a size argument of the function")
            self.key_count = arguments[padded.data]
        if self.groups > 1 and self.length == 1 and not self.causal:
            self.stack_query_heads(em)
            self.query_bound = None
        itemsize = max(1, getattr(self.element_type, "bitwidth", 32) // 8)
        # Bytes per partition of a transposed [E, N] matrix per 128 of N: E itself within one contraction tile,
        # whole partitions of every feature tile beyond.
        transposed = self.head if len(self.feature_tiles) == 1 else PARTITION_TILE * len(self.feature_tiles)
        # One head's key rows, K^T and value rows stay in SBUF when they take at most half of a loop body's share
        # (about S * (2 E + Ev) / 128 * itemsize bytes per partition); longer keys are loaded and transposed per
        # chunk, again for every query tile.
        width = self.head + transposed + self.value_head
        kept = (self.keys + 2 * PARTITION_TILE) * itemsize * width // PARTITION_TILE
        self.keep_keys = kept <= body_budget_bytes(em) // 2
        queries = (self.length + PARTITION_TILE) * itemsize * transposed // PARTITION_TILE
        self.keep_queries = queries <= body_budget_bytes(em) // 4
        # The log-sum-exp is fp32 whatever the inputs: with 16-bit inputs its row sums add the exponentials as
        # computed (fp32), as ATen's kernel does, not as rounded for the second matmul (a row of few keys would be
        # off by the rounding of its largest term).
        self.fp32_sums = wants_lse and self.element_type != f32
        # The row sums come out of the second matmul (a ones column beside the values) when one more column fits.
        self.sum_column = self.value_head < n_limit and not self.fp32_sums
        # Units of several heads (or query tiles) share a loop trip when nothing in the trip moves data: a trip
        # with a DMA would be unrolled by neuron-unroll-loops, doubling its PSUM banks.
        self.pipelined = self.keep_keys and self.keep_queries and self.mask is None and self.length >= PARTITION_TILE
        self.units_per_trip = self.trip_units(em) if self.pipelined else 1
        # Pipelined heads keep Q^T scaled (one multiply of the head's query rows before their transposes instead
        # of one per score row), so the exponentials' bias is -rowmax: the reduce's own negation. Not for an fp32
        # log-sum-exp of 16-bit queries, unless the scale is a power of two (an exact product): a bf16 query times
        # 1/sqrt(E) loses low bits of the scores that the output's own rounding hides but the log-sum-exp shows.
        self.query_scale = 1.0
        exact = math.frexp(self.exp_scale)[0] == 0.5 or not self.fp32_sums
        if self.pipelined and exact:
            self.query_scale, self.exp_scale = self.exp_scale, 1.0

    def stack_query_heads(self, em: LoopNestBuilder) -> None:
        """One query per head (a decoding step) under grouped keys: the g query heads of a key/value head become the
        g query rows of one head, [..., Hkv, g, E] (a view), so they share every matmul, exponential and transpose
        of that head's keys instead of each repeating them for one row. Without a causal mask every row sees the
        same keys, so nothing else changes."""
        groups = self.groups

        def regrouped(tensor: SSAValue) -> SSAValue:
            layout = layout_of(tensor)
            *outer, heads, _, width = layout.shape
            *outer_strides, head_stride, _, width_stride = layout.strides
            shape = (*outer, heads // groups, groups, width)
            strides = (*outer_strides, groups * head_stride, head_stride, width_stride)
            return view(em, tensor, Layout(shape, strides, layout.offset))

        self.query, self.out = regrouped(self.query), regrouped(self.out)
        self.lse = None if self.lse is None else regrouped(self.lse)
        self.mask = None if self.mask is None else regrouped(self.mask)
        self.batch = self.key_batch
        self.length, self.groups = groups, 1

    @staticmethod
    def target(em: LoopNestBuilder) -> Target:
        return emitter_target(em)

    def trip_units(self, em: LoopNestBuilder) -> int:
        """Units per pipelined trip: three when their PSUM fits (each unit holds a bank for its scores, one for its
        product, and its p^T blocks; a loop body's buffers are all live at once), else two."""
        target = self.target(em)
        bank = target.psum_bank_bytes
        itemsize = max(1, getattr(self.element_type, "bitwidth", 32) // 8)
        blocks = -(-min(self.keys, self.chunk) // PARTITION_TILE)
        per_unit = 2 * bank + blocks * PARTITION_TILE * itemsize + UNIT_PSUM_SLACK
        # A quarter bank stays free for what the head's own transposes may still hold.
        return 3 if 3 * per_unit <= target.psum_bytes_per_partition - bank // 4 else 2

    def results(self, em: LoopNestBuilder) -> list[SSAValue]:
        """The output, and the log-sum-exp [..., L] (a tensor left unwritten when nothing reads it)."""
        out, lse = self.result_values
        if lse is None:
            return [out, alloc(em, self.result_shape, f32)]
        layout = layout_of(lse)
        return [out, view(em, lse, Layout(layout.shape[:-1], layout.strides[:-1], layout.offset))]

    def allocate_output(self, em: LoopNestBuilder) -> SSAValue:
        return heads_beside_features(em, self.batch, self.length, self.value_head, self.out_type)

    # ---- structure -------------------------------------------------------------------------------------------

    def emit(self, em: LoopNestBuilder) -> None:
        self.causal_biases = self.identity = None
        self.first_group = True
        self.held_values: list[tuple[int, Operation]] = []
        tiles = -(-self.length // PARTITION_TILE)
        itemsize = max(1, getattr(self.element_type, "bitwidth", 32) // 8)
        if self.causal and tiles * self.keys * itemsize <= body_budget_bytes(em) // 4:
            # Every query tile's causal bias, built once for all heads ([128, tile, key] from key - (128 tile +
            # row)), and added to the scores in PSUM by TensorE as identity^T @ bias: VectorE, the busiest engine
            # of the kernel, does no masking.
            biases = sbuf_tile((PARTITION_TILE, tiles, self.keys), self.element_type)
            positions = tile.IotaOp(biases, steps=[-PARTITION_TILE, 1], channel_multiplier=-1)
            self.causal_biases = self.future_to_bias(em, em.insert(positions).result)
            square = sbuf_tile((PARTITION_TILE, PARTITION_TILE), self.element_type)
            offsets = em.insert(tile.IotaOp(square, steps=[1], channel_multiplier=-1)).result
            self.identity = em.insert(tile.BinaryScalarOp(offsets, "is_equal", square, scalar=0.0)).result
        variants = self.key_variants()
        if not variants:
            self.emit_heads(em)
            assert not self.held_values, "every value block's copy is emitted before its products"
            return
        # The call's keys in whole blocks: one copy of the heads' work per key width of 128 * j, in a loop of one
        # trip when the call's ceil(keys / 128) is j and of none otherwise, so that scores, exponentials,
        # transposes and products run over the call's key blocks only (an access pattern's extents are fixed, so
        # a width cannot come from a register)
        assert self.key_count is not None
        keys, count = self.keys, variants
        key_tiles = bounded_tiles(em, self.key_count, PARTITION_TILE)

        # 1 when the call has j key blocks or more (it has 1 to `count`): (blocks + count - j) // count
        at_least: list[Index] = [1, 1]
        for j in range(2, count + 1):
            shifted = em.index(em.add(key_tiles, count - j))
            at_least.append(em.insert(arith.FloorDivSIOp(shifted, em.index(count))).result)
        at_least.append(0)
        for j in range(1, count + 1):
            trips = em.add(at_least[j], em.mul(at_least[j + 1], -1))
            block = Block(arg_types=[IndexType()])
            em.insert(scf.ForOp(em.index(0), em.index(trips), em.index(1), [], block))
            inner = em.nested(block)
            self.keys = j * PARTITION_TILE
            self.emit_heads(inner)
            inner.insert(scf.YieldOp())
        self.keys = keys

    def key_variants(self) -> int:
        """How many key widths the kernel is emitted for (`emit`): the bucket's 128-key blocks when its keys are
        padded (`key_count`), masked, not causal, whole blocks and at most `KEY_VARIANTS` of them; else 0 (one
        kernel over every key)."""
        if self.key_count is None or self.mask is None or self.causal or self.pipelined:
            return 0
        blocks, rest = divmod(self.keys, PARTITION_TILE)
        return blocks if not rest and 1 < blocks <= KEY_VARIANTS else 0

    def emit_heads(self, em: LoopNestBuilder) -> None:
        """Every head's work over `self.keys` keys."""
        # Key/value heads per group: `units_per_trip` heads without grouped queries (each a trip's unit), fewer
        # with them, so that a group's query heads still fill about one trip.
        group = max(1, self.units_per_trip // self.groups)

        def heads(e: LoopNestBuilder, dims: tuple[int, ...], outer: list[Index], once: bool = True) -> None:
            # `once`: every loop around these heads has a single trip, so that their last group ends the kernel.
            if len(dims) > 1:
                bound = self.batch_bounds[len(outer)]
                if bound is not None:  # the call's batches only
                    bounded_loop(e, bound, 1, lambda inner, i, _: heads(inner, dims[1:], [*outer, i], False))
                else:
                    single = once and dims[0] == 1
                    e.for_each(dims[0], lambda inner, i: heads(inner, dims[1:], [*outer, i], single))
                return
            if not dims:
                _finish(self.head_group(e, outer, None))
                return
            pairs, odd = divmod(dims[0], group)
            if self.pipelined and pairs <= UNROLLED_GROUPS:
                # Each group's undone end is emitted within the next group (`query_heads`).
                previous: Callable[[], None] | None = None
                for i in range(pairs):
                    ends = once and i == pairs - 1 and not odd
                    previous = self.head_group(e, outer, [i * group + j for j in range(group)], previous, ends)
                _finish(previous)
            else:
                e.for_each(
                    pairs,
                    lambda inner, i: _finish(
                        self.head_group(inner, outer, [inner.add(inner.mul(i, group), j) for j in range(group)])
                    ),
                )
            for j in range(odd):
                _finish(self.head_group(e, outer, [pairs * group + j]))

        heads(em, tuple(self.key_batch), [])

    def head_group(
        self,
        em: LoopNestBuilder,
        outer: list[Index],
        key_heads: list[Index] | None,
        previous: Callable[[], None] | None = None,
        ends_kernel: bool = False,
    ) -> Callable[[], None] | None:
        """Key/value heads `key_heads` of batch `outer` (None: inputs without a head dimension) with their query
        heads. K^T and the value rows of each are built once; when a head's query heads outnumber a trip's units,
        they take turns in groups of `units_per_trip` (a loop), all reading that one K^T.

        `previous` emits what the group before left undone (its last trip's second half and its stores, see
        `query_heads`); the result is what this group leaves undone, when it does. `ends_kernel`: the group ends the
        kernel (`query_heads`)."""
        g = self.groups
        if key_heads is None:
            key_batches, queries = [outer], [(outer, 0)]
        else:
            key_batches = [[*outer, kv] for kv in key_heads]
            queries = [([*outer, em.add(em.mul(kv, g), j)], i) for i, kv in enumerate(key_heads) for j in range(g)]
        size = self.units_per_trip
        if len(queries) <= size:
            return self.query_heads(em, self.prepare_heads(em, key_batches, queries), previous, ends_kernel)
        if previous is not None:
            previous()
        assert key_heads is not None
        [kv] = key_heads  # one key/value head per group once its query heads fill a trip
        shared = self.prepare_key_values(em, key_batches)

        def query_group(e: LoopNestBuilder, first: Index, count: int) -> list[SSAValue]:
            """Query heads [first, first + count) of the key/value head (nothing carried between turns)."""
            group = [([*outer, e.add(e.mul(kv, g), e.add(first, j))], 0) for j in range(count)]
            _finish(self.query_heads(e, self.prepare_heads(e, key_batches, group, shared)))
            return []

        full, rest = divmod(g, size)
        carry(em, 0, full * size, size, [], lambda e, first, _: query_group(e, first, size))
        if rest:
            query_group(em, full * size, rest)
        return None

    def prepare_key_values(self, em: LoopNestBuilder, batches: list[list[Index]]) -> list[_KeyValue] | None:
        """The key/value heads kept in SBUF (None when their rows are streamed per chunk): rows loaded once (one
        DMA per matrix), K^T built once, the ones column beside the values."""
        if not self.keep_keys:
            return None
        key_rows = self.real_rows(em, self.load_heads(em, self.key, batches, self.keys, self.head))
        value_rows = self.real_rows(em, self.load_heads(em, self.value, batches, self.keys, self.value_head))
        keys_t = self.transpose_rows(em, key_rows, self.keys)
        return [
            _KeyValue(batch, head_keys_t, rows)
            for batch, head_keys_t, rows in zip(batches, keys_t, self.with_ones(em, value_rows), strict=True)
        ]

    def prepare_heads(
        self,
        em: LoopNestBuilder,
        key_batches: list[list[Index]],
        queries: list[tuple[list[Index], int]],
        shared: list[_KeyValue] | None = None,
    ) -> list[_Head]:
        """The query heads' operands (`queries`: each one's index and the position of its key/value head in
        `key_batches`). Rows are loaded once (one DMA per matrix), then K^T and Q^T built once, the heads' transposes
        side by side in one loop (separate PSUM buffers, so each one's evacuation overlaps the next). Key/value
        heads already built (`shared`) are only read."""
        blocks = self.chunk // PARTITION_TILE
        key_values: list[_KeyValue] | None = shared
        queries_t: list[list[SSAValue] | None] = [None] * len(queries)
        keep_keys = shared is None and self.keep_keys
        # K^T and Q^T straight from the DMA engines where they transpose (`load_head_transposed`), for heads of more
        # than one 128-row block: a single block takes one TensorE transpose per head from rows that load with
        # their neighbouring heads in one DMA, where a DMA transpose per head pays each transfer's fixed cost
        # (BERT-base's 48 heads of 128 tokens: its training step 675.0 us without, 688.6 with; ViT-B/16's 197
        # tokens 713.8 -> 702.6, the GPT-2 block's 512 179.1 -> 169.4).
        target = self.target(em)
        query_batches = [batch for batch, _ in queries]
        transposed_keys = (
            keep_keys and self.keys > PARTITION_TILE and dma_transposable(self.key, self.element_type, target)
        )
        transposed_queries = (
            self.keep_queries
            and self.length > PARTITION_TILE
            and dma_transposable(self.query, self.element_type, target)
        )
        if transposed_keys:
            keys_t = [
                [self.real_columns(em, load_head_transposed(em, self.key, batch, self.keys))] for batch in key_batches
            ]
        if keep_keys and not transposed_keys:
            key_rows = self.real_rows(em, self.load_heads(em, self.key, key_batches, self.keys, self.head))
        if self.keep_queries and transposed_queries:
            queries_t = []
            for batch in query_batches:
                query_t = load_head_transposed(em, self.query, batch)
                queries_t.append([self.scaled_tile(em, query_t, self.query_scale)])
        elif self.keep_queries:
            # Q^T of the whole head, like K^T, when the queries stay: no transpose waits inside the units' work.
            query_rows = self.load_heads(em, self.query, query_batches, self.length, self.head)
        blockwise = self.first_value_blocks(em, key_batches) if keep_keys else None
        if keep_keys and blockwise is None:
            value_rows = self.real_rows(em, self.load_heads(em, self.value, key_batches, self.keys, self.value_head))
        if keep_keys and not transposed_keys:
            keys_t = self.transpose_rows(em, key_rows, self.keys)
        if self.keep_queries and not transposed_queries:
            if self.query_scale != 1.0:
                query_rows = self.scaled(em, query_rows, self.query_scale)
            queries_t = list(self.transpose_rows(em, query_rows, self.length))
        if keep_keys:
            # The ones columns after the transposes: their copies wait for the value loads, and an engine queue that
            # reached them first would hold back the transposes' evacuations behind them.
            values = blockwise if blockwise is not None else self.with_ones(em, value_rows)
            key_values = [
                _KeyValue(batch, head_keys_t, rows)
                for batch, head_keys_t, rows in zip(key_batches, keys_t, values, strict=True)
            ]

        def head(
            batch: list[Index],
            key_batch: list[Index],
            key_value: _KeyValue | None,
            head_queries_t: list[SSAValue] | None,
        ) -> _Head:
            def chunk_operands(e: LoopNestBuilder, k: Index, n: int) -> tuple[list[SSAValue], _Rows]:
                first = e.mul(k, blocks)
                if key_value is not None:
                    c0 = e.mul(k, self.chunk)
                    chunk_keys_t = [
                        window(e, part, [c0], (size, n)) for part, (_, size) in self.tiled(key_value.keys_t)
                    ]
                    return chunk_keys_t, key_value.values.shifted(first)
                chunk_keys = self.load_rows(e, self.key, key_batch, first, n, self.head)
                chunk_values = self.load_rows(e, self.value, key_batch, first, n, self.value_head)
                [chunk_keys, chunk_values] = self.real_rows(e, [chunk_keys, chunk_values], first)
                [chunk_keys_t] = self.transpose_rows(e, [chunk_keys], n)
                [chunk_values] = self.with_ones(e, [chunk_values])
                return chunk_keys_t, chunk_values

            def query_t(e: LoopNestBuilder, t: Index, p: int) -> list[SSAValue]:
                m0 = e.mul(t, PARTITION_TILE)
                if head_queries_t is not None:
                    return [window(e, part, [m0], (size, p)) for part, (_, size) in self.tiled(head_queries_t)]
                rows = load(e, self.query, [*batch, m0, 0], (p, self.head))
                return [
                    to_sbuf(e, e.insert(tile.TransposeOp(window(e, rows, [e0], (p, size)))).result)
                    for e0, size in self.feature_tiles
                ]

            return _Head(batch, chunk_operands, query_t)

        # Streamed keys (no key_values): each query head loads its key/value head's chunks itself.
        return [
            head(batch, key_batches[position], None if key_values is None else key_values[position], head_queries_t)
            for (batch, position), head_queries_t in zip(queries, queries_t, strict=True)
        ]

    def first_value_blocks(self, em: LoopNestBuilder, batches: list[list[Index]]) -> list[_Rows] | None:
        """The kernel's first group's value rows, one DMA per 128-row block into a tile of its own (with the ones
        column), when its trips are causal and software-pipelined: query tile t multiplies by value blocks 0 to t
        only. The first group's values are what the op before the kernel has just stored (a fused QKV projection's
        output, stored block by block), so each block's product waits for that block alone; and each block's copy
        beside its ones column is emitted just before the first trip that multiplies by it (`release_values`),
        so that no engine queue holds the first trips' exponentials behind the copies of blocks still loading.
        Later groups' values have long arrived when they start, and load in one DMA. None when the rows do not
        load that way (`load_heads`: consecutive heads beside the features, whole blocks)."""
        if not self.first_group:
            return None
        self.first_group = False
        width = self.value_head
        blocks, rest = divmod(self.keys, PARTITION_TILE)
        strides = layout_of(self.value).strides
        beside = len(strides) >= 3 and strides[-1] == 1 and strides[-3] == width
        if not (self.pipelined and self.causal and self.keys <= self.chunk and self.key_count is None):
            return None
        if not (blocks > 1 and not rest and len(batches) > 1 and beside):
            return None
        rank = len(batches[0]) + 2
        split = split_axis(em, self.value, rank - 2, blocks, PARTITION_TILE)
        heads = len(batches)
        columns = self.product_width if self.sum_column else width
        zero = em.index(0)
        tiles: list[SSAValue] = []
        for b in range(blocks):
            rows = load(
                em,
                split,
                [*batches[0], b, 0, 0],
                (PARTITION_TILE, 1, heads, width),
                dims=(rank - 1, rank - 2, rank - 3, rank),
            )
            if self.sum_column:
                ones = em.insert(tile.FillOp(1.0, sbuf_tile((PARTITION_TILE, 1, heads, columns), self.element_type)))
                copy = tile.InsertOp(rows, ones.result, [zero, zero, zero])
                self.held_values.append((b, copy))  # emitted by `release_values`
                rows = copy.result
            tiles.append(rows)
        return [_Rows(None, None, columns, 0, h, tuple(tiles)) for h in range(heads)]

    def release_values(self, em: LoopNestBuilder, last_block: int | None = None) -> None:
        """The held value blocks' copies (`first_value_blocks`) up to `last_block` (all of them: None)."""
        while self.held_values and (last_block is None or self.held_values[0][0] <= last_block):
            em.insert(self.held_values.pop(0)[1])

    def tiled(self, parts: list[SSAValue]) -> list[tuple[SSAValue, tuple[int, int]]]:
        """Each feature tile's part of a transposed matrix, with the tile's (first feature, size)."""
        return list(zip(parts, self.feature_tiles, strict=True))

    def query_heads(
        self,
        em: LoopNestBuilder,
        heads: list[_Head],
        previous: Callable[[], None] | None = None,
        ends_kernel: bool = False,
    ) -> Callable[[], None] | None:
        """The query tiles of up to `units_per_trip` heads, that many (head, query tile) units per trip.

        `previous` (the group before's undone end) is emitted after this group's first trip's first half when the
        trips are software-pipelined, else first. Software-pipelined trips of heads whose rows fill whole blocks
        return their last trip's second half and the stores undone, for the next group to emit after its own first
        half (`head_group`).

        When the group ends the kernel (`ends_kernel`), its causal trips' rows leave in two stores: the trips but
        the last one's as soon as they are collected, while the last trip computes, and the last trip's alone, so
        that the kernel ends about one DMA's latency after its last rows (the 12 causal heads of 512 queries,
        bf16, trn2: forward 38.6 -> 37.9 us, the last of four trips' rows of three heads being 48 KiB where all
        four trips' rows, 192 KiB, were stored after the last; the GPT-2 block 167.5 -> 166.4 us). The
        log-sum-exp columns still leave once, after the last trip: splitting them too took 38.2 us, since each
        store's transposes and evacuations run on VectorE, the forward's busiest engine, and the GPT-2 block's
        training step 625.0 -> 628.6. Other groups keep one store: their stores overlap the groups after them
        (38.6 -> 39.3 us with every group's rows and log-sum-exp split)."""
        full, rest = divmod(self.length, PARTITION_TILE)
        per_head = self.units_per_trip // len(heads)
        trips, extra = divmod(full, per_head)
        software_pipelined = self.pipelined and self.keys <= self.chunk and (self.causal or (trips == 1 and not extra))
        if not software_pipelined:
            self.release_values(em)
        if previous is not None and not software_pipelined:
            previous()
            previous = None
        # The kernel's last group collects its last trip's rows apart and stores them alone, after the rows of the
        # trips before it have left (`tail`): the kernel's end then waits for one trip's rows only.
        tail = ends_kernel and software_pipelined and self.causal and trips > 1 and not extra and not rest
        first_tail = (trips - 1) * per_head if tail else full
        collected: list[SSAValue] = self.collection(em, heads, first_tail, full) if self.pipelined and full else []

        def trip(e: LoopNestBuilder, t0: Index, count: int, values: list[SSAValue]) -> list[SSAValue]:
            spec = [(head, e.add(t0, j)) for head in heads for j in range(count)]
            results = self.query_tiles(e, spec, PARTITION_TILE)
            for (head, t), (out, lse) in zip(spec, results, strict=True):
                if self.pipelined:
                    values = self.collect(e, values, heads.index(head), t, out, lse)
                else:
                    self.store_unit(e, head.batch, e.mul(t, PARTITION_TILE), out, lse)
            return values

        # Other pipelined trips stay loops: a loop body's PSUM banks live for the whole body, and a head body that
        # held them directly would be unrolled (and its banks doubled) by neuron-unroll-loops.
        if software_pipelined:
            # Causal trips know their query tiles at compile time: a tile's keys end at its last row, so the keys
            # above the diagonal are never multiplied, exponentiated or transposed. With every unit's keys in one
            # chunk the causal trips (or a group's single trip) are software-pipelined in straight-line code: trip
            # k + 1's scores, maxima and exponentials are emitted before trip k's p^T, products and normalisation,
            # so that TensorE computes the next scores while VectorE and ScalarE finish this trip (engine queues run
            # in program order). The PSUM stays within two trips' halves: the next scores take the banks this
            # trip's exponentials have read, beside this trip's p^T and products.
            pending: _Pending | None = None
            for t0 in range(0, trips * per_head, per_head):
                spec = [(head, em.add(t0, j)) for head in heads for j in range(per_head)]
                started = self.begin_units(em, spec, PARTITION_TILE)
                if previous is not None:
                    previous()
                    previous = None
                if pending is not None:
                    self.release_values(em, t0 - 1)  # the blocks of this trip's last query tile
                    collected = self.end_trip(em, heads, pending, collected)
                pending = started
            self.release_values(em)
            if tail and pending is not None:
                self.store_rows(em, collected[0], self.out, heads[0].batch, first_tail)
                last_rows = self.collection(em, heads, per_head, 0)
                collected = self.end_trip(em, heads, pending, last_rows + collected[1:], first_tail)
                self.store_collected(em, heads, collected, first_tail)
                return None
            if previous is not None:
                previous()
                previous = None
            if pending is not None and not extra and not rest and not self.causal:
                # A group of one trip (and no causal trips to pipeline within it) overlaps the next group instead:
                # measured with causal groups of several trips too, that was slower (attention backward 12 x 512 x
                # 64 causal: 104.1 -> 104.3 us, the GPT-2 block 179.1 -> 179.5), so causal groups end their own.
                final = pending

                def undone() -> None:
                    self.store_collected(em, heads, self.end_trip(em, heads, final, collected))

                return undone
            if pending is not None:
                collected = self.end_trip(em, heads, pending, collected)
        elif self.causal:
            # Each trip is a loop of one trip, so that its PSUM buffers are released before the next tile's.
            for t0 in range(0, trips * per_head, per_head):

                def causal_trip(e: LoopNestBuilder, _: Index, values: list[SSAValue], t0: int = t0) -> list[SSAValue]:
                    return trip(e, t0, per_head, values)

                collected = carry(em, t0, t0 + 1, 1, collected, causal_trip, always_loop=True)
        elif self.query_bound is not None and not self.pipelined and not extra:
            # the call's query tiles only: ceil(L / 128) trips of one tile (the bucket's L a multiple of 128)
            block = Block(arg_types=[IndexType()])
            count = bounded_tiles(em, self.query_bound, PARTITION_TILE)
            em.insert(scf.ForOp(em.index(0), count, em.index(1), [], block))
            inner = em.nested(block)
            trip(inner, block.args[0], 1, [])
            inner.insert(scf.YieldOp())
        else:
            collected = carry(
                em,
                0,
                trips * per_head,
                per_head,
                collected,
                lambda e, t0, values: trip(e, t0, per_head, values),
                always_loop=self.pipelined,
            )
        if extra:
            collected = carry(
                em,
                trips * per_head,
                trips * per_head + 1,
                1,
                collected,
                lambda e, _, values: trip(e, trips * per_head, extra, values),
                always_loop=self.pipelined or self.causal,
            )
        if rest:

            def last(e: LoopNestBuilder, _: Index, values: list[SSAValue]) -> list[SSAValue]:
                results = self.query_tiles(e, [(head, full) for head in heads], rest)
                for head, (out, lse) in zip(heads, results, strict=True):
                    self.store_unit(e, head.batch, full * PARTITION_TILE, out, lse)
                return values

            carry(em, 0, 1, 1, [], last, always_loop=self.pipelined or self.causal)
        self.store_collected(em, heads, collected)
        return None

    def collection(self, em: LoopNestBuilder, heads: list[_Head], blocks: int, columns: int) -> list[SSAValue]:
        """Empty tiles collecting the heads' query tiles: every head's output rows of `blocks` tiles in one tile
        (head h at [:, :, h Ev : (h + 1) Ev], stored in one DMA), then, with `columns`, each head's log-sum-exp
        columns of that many tiles. The heads' features are one free dimension, as the rows lie in the output
        (`heads_beside_features`): a query tile of the collected heads is then a window of the output's rows
        [128, H Ev], which tile-fuse-loops can hand to a later load of those rows (the attention projection's)
        without the HBM round trip."""
        rows = sbuf_tile((PARTITION_TILE, blocks, len(heads) * self.value_head), self.out_type)
        collected: list[SSAValue] = [em.insert(tile.EmptyOp(rows)).result]
        if self.lse is not None and columns:
            for _ in heads:
                collected.append(em.insert(tile.EmptyOp(sbuf_tile((PARTITION_TILE, columns)))).result)
        return collected

    def store_collected(
        self, em: LoopNestBuilder, heads: list[_Head], collected: list[SSAValue], first: int = 0
    ) -> None:
        """The pipelined trips' collected output rows from query tile `first` on, and log-sum-exp columns of every
        query tile, stored."""
        if not collected:
            return
        blocks = collected[0].type.get_shape()[1]  # type: ignore[attr-defined]
        # The heads of a group are consecutive (`head_group`): their rows leave in one DMA.
        self.store_rows(em, collected[0], self.out, heads[0].batch, blocks, first)
        if self.lse is not None:
            layout = layout_of(self.lse)  # [..., L, 1] seen as [..., L]
            lse = view(em, self.lse, Layout(layout.shape[:-1], layout.strides[:-1], layout.offset))
            for head, columns in zip(heads, collected[1:], strict=True):
                store_log_sum_exp(em, columns, lse, head.batch)

    def end_trip(
        self, em: LoopNestBuilder, heads: list[_Head], pending: _Pending, values: list[SSAValue], first: int = 0
    ) -> list[SSAValue]:
        """The second half of a software-pipelined trip (`end_units`), its units collected into `values` (whose
        rows collect query tiles from `first` on)."""
        for unit, (out, lse) in zip(pending.units, self.end_units(em, pending), strict=True):
            values = self.collect(em, values, heads.index(unit.head), unit.t, out, lse, first)
        return values

    def collect(
        self,
        em: LoopNestBuilder,
        values: list[SSAValue],
        h: int,
        t: Index,
        out: SSAValue,
        lse: SSAValue | None,
        first: int = 0,
    ) -> list[SSAValue]:
        """`values` (every head's output rows [128, tiles, heads Ev] of the query tiles from `first` on, then per
        head its log-sum-exp [128, tiles] when used) with query tile t of head h written in."""
        values = list(values)
        block = em.index(em.add(t, -first))
        at = [block, em.index(h * self.value_head)]
        values[0] = em.insert(tile.InsertOp(out, values[0], at)).result
        if lse is not None:
            values[1 + h] = em.insert(tile.InsertOp(lse, values[1 + h], [em.index(t)])).result
        return values

    def store_unit(
        self, em: LoopNestBuilder, batch: list[Index], m0: Index, out: SSAValue, lse: SSAValue | None
    ) -> None:
        store(em, out, self.out, [*batch, m0, 0])
        if lse is not None and self.lse is not None:
            store(em, lse, self.lse, [*batch, m0, 0])

    def store_rows(
        self, em: LoopNestBuilder, rows: SSAValue, tensor: SSAValue, batch: list[Index], blocks: int, first: int = 0
    ) -> None:
        store_head_rows(em, rows, tensor, batch, blocks, first)

    def load_rows(
        self, em: LoopNestBuilder, tensor: SSAValue, batch: list[Index], first: Index, count: int, width: int
    ) -> _Rows:
        return load_head_rows(em, tensor, batch, first, count, width)

    def load_heads(
        self, em: LoopNestBuilder, tensor: SSAValue, batches: list[list[Index]], count: int, width: int
    ) -> list[_Rows]:
        """Rows [0, count) of consecutive heads (`batches` differ only in their last index, by one from each to the
        next, as `head_group` builds them): the 128-row blocks of all of them in one DMA, where a row of the
        heads is one run of `heads * width` elements when the heads lie beside the features (the output of a
        fused QKV projection viewed as heads); a DMA's rate grows with its runs (one head's 64 bf16 features, 128
        bytes, move at a quarter of the engines' rate). Heads stored apart ([..., H, L, E] row-major) load one
        DMA each: one DMA of several gains no longer runs, and the first head's work would wait for every head's
        rows. So do rows ending in a partial block (ViT-B/16's 197 tokens: its training step took 3.9 us longer
        with the heads' full blocks together and their last blocks apart)."""
        blocks, rest = divmod(count, PARTITION_TILE)
        strides = layout_of(tensor).strides
        beside = len(strides) >= 3 and strides[-1] == 1 and strides[-3] == width
        if len(batches) < 2 or not blocks or rest or not beside:
            return [self.load_rows(em, tensor, batch, 0, count, width) for batch in batches]
        rank = len(batches[0]) + 2
        total = layout_of(tensor).shape[-2]
        split = split_axis(em, tensor, rank - 2, total // PARTITION_TILE, PARTITION_TILE)
        shape = (PARTITION_TILE, blocks, len(batches), width)
        full = load(em, split, [*batches[0], 0, 0, 0], shape, dims=(rank - 1, rank - 2, rank - 3, rank))
        return [_Rows(full, None, width, 0, h) for h in range(len(batches))]

    def real_rows(self, em: LoopNestBuilder, rows: list[_Rows], first: Index = 0) -> list[_Rows]:
        """Key or value rows (block 0 of each at key block `first`) with the rows of padded keys (at and past the
        call's key count, `key_count`) set to 0; the rows themselves without padded keys."""
        if self.key_count is None or not rows:
            return rows

        def full(value: SSAValue) -> SSAValue:  # [128, blocks, (heads,) width]: block j holds keys 128 (first + j) + p
            rank = len(value.type.get_shape())  # type: ignore[attr-defined]
            return self.real_only(em, value, [PARTITION_TILE] + [0] * (rank - 2), 1, em.mul(first, PARTITION_TILE))

        def last(value: SSAValue) -> SSAValue:  # [rest, width]: the matrix's partial last block
            rest = value.type.get_shape()[0]  # type: ignore[attr-defined]
            return self.real_only(em, value, [0], 1, self.keys - rest)

        return _each_matrix(rows, full, last, rows[0].width)

    def real_columns(self, em: LoopNestBuilder, keys_t: SSAValue) -> SSAValue:
        """K^T [E, S] with the columns of padded keys set to 0."""
        if self.key_count is None:
            return keys_t
        return self.real_only(em, keys_t, [1], 0, 0)

    def real_only(
        self, em: LoopNestBuilder, value: SSAValue, steps: list[int], per_partition: int, first_key: Index
    ) -> SSAValue:
        """`value` with 0 where its key position (`first_key` + partition * `per_partition` + the free indices
        times `steps`) is at or past the call's key count: a select, so that NaN padding does not pass."""
        assert self.key_count is not None
        value_type = value.type
        assert isinstance(value_type, TileType)
        shape = value_type.get_shape()
        offset = em.index(em.add(first_key, em.mul(self.key_count, -1)))
        positions = em.insert(
            tile.IotaOp(sbuf_tile(shape), steps, channel_multiplier=per_partition, offset=offset)
        ).result
        real = em.insert(tile.BinaryScalarOp(positions, "is_lt", sbuf_tile(shape), scalar=0.0)).result
        zeros = em.insert(tile.FillOp(0.0, sbuf_tile(shape, value_type.element_type))).result
        return em.insert(tile.SelectOp(real, value, zeros, sbuf_tile(shape, value_type.element_type))).result

    def scaled_tile(self, em: LoopNestBuilder, value: SSAValue, scale: float) -> SSAValue:
        """`value` times `scale` in its dtype (itself when the scale is 1)."""
        if scale == 1.0:
            return value
        result = sbuf_tile(value.type.get_shape(), self.element_type)  # type: ignore[attr-defined]
        return em.insert(tile.BinaryScalarOp(value, "multiply", result, scalar=scale)).result

    def scaled(self, em: LoopNestBuilder, rows: list[_Rows], scale: float) -> list[_Rows]:
        """The rows times `scale`, in their dtype: one multiply per DMA'd matrix, before the transposes, instead of
        one per transposed block between its PSUM evacuation and its copy into the transposed tile (the transpose
        is exact, so the product rounds to the same values either way)."""

        def times(value: SSAValue) -> SSAValue:
            result = sbuf_tile(value.type.get_shape(), self.element_type)  # type: ignore[attr-defined]
            return em.insert(tile.BinaryScalarOp(value, "multiply", result, scalar=scale)).result

        return _each_matrix(rows, times, times, rows[0].width if rows else 0)

    def transpose_rows(self, em: LoopNestBuilder, rows: list[_Rows], count: int) -> list[list[SSAValue]]:
        """K^T [E, count] of each key rows, as one SBUF tile per feature tile ([e, count]): one TensorE transpose
        per 128 keys and feature tile."""
        transposed: list[list[SSAValue]] = [
            [
                em.insert(tile.EmptyOp(sbuf_tile((size, count), self.element_type))).result
                for _, size in self.feature_tiles
            ]
            for _ in rows
        ]
        parts = len(self.feature_tiles)
        blocks, rest = divmod(count, PARTITION_TILE)

        def piece(
            e: LoopNestBuilder, rows: _Rows, t: Index, size: int, columns: tuple[int, int], value: SSAValue
        ) -> SSAValue:
            block = e.insert(tile.TransposeOp(rows.block(e, t, size, columns))).result
            return e.insert(tile.InsertOp(block, value, [e.index(e.mul(t, PARTITION_TILE))])).result

        def pieces(e: LoopNestBuilder, t: Index, size: int, values: list[SSAValue]) -> list[SSAValue]:
            return [
                piece(e, r, t, size, columns, values[i * parts + j])
                for i, r in enumerate(rows)
                for j, columns in enumerate(self.feature_tiles)
            ]

        flat = [value for per_rows in transposed for value in per_rows]
        if blocks:
            flat = carry(em, 0, blocks, 1, flat, lambda e, t, values: pieces(e, t, PARTITION_TILE, values))
        if rest:
            flat = pieces(em, blocks, rest, flat)
        return [flat[i * parts : (i + 1) * parts] for i in range(len(rows))]

    def query_tiles(
        self, em: LoopNestBuilder, spec: list[tuple[_Head, Index]], p: int
    ) -> list[tuple[SSAValue, SSAValue | None]]:
        """Units (head, query tile t of p rows), emitted stage by stage across the units: each engine's queue then
        alternates between units, so one unit's softmax (VectorE, ScalarE) runs while TensorE multiplies for the
        other, where one unit alone would leave every engine waiting on the previous one."""
        units = [_Unit(head, t, em.mul(t, PARTITION_TILE), p) for head, t in spec]
        size = self.state_size
        extents = [self.extent(unit) for unit in units]

        def step(
            e: LoopNestBuilder, k: Index, stop: int, widths: tuple[int, ...], state: list[SSAValue] | None
        ) -> list[SSAValue]:
            """Chunk k (of a run of chunks ending before `stop`) of every unit whose keys reach it (`widths[u]` keys;
            0: unit u's keys ended before it)."""
            active = [u for u, n in enumerate(widths) if n]
            operands = [units[u].head.chunk_operands(e, k, widths[u]) for u in active]
            c0 = e.mul(k, self.chunk)
            scores = [
                self.scores(e, units[u], keys_t, c0, widths[u], self.masks_chunk(units[u], stop))
                for u, (keys_t, _) in zip(active, operands, strict=True)
            ]
            olds: list[list[SSAValue] | None] = [None] * len(active)
            if state is not None:
                olds = [state[size * u : size * u + size] for u in active]
            active_units = [units[u] for u in active]
            maxima, probabilities, summands = self.exponentials(
                e, active_units, scores, olds, [widths[u] for u in active]
            )
            products = self.products(
                e, active_units, probabilities, [values for _, values in operands], [widths[u] for u in active]
            )
            new_state: list[SSAValue] = list(state) if state is not None else [None] * (size * len(units))  # type: ignore[list-item]
            for u, unit, (new_max, negative), terms, product, old in zip(
                active, active_units, maxima, summands, products, olds, strict=True
            ):
                new_state[size * u : size * u + size] = self.combine(e, unit.p, new_max, negative, terms, product, old)
            return new_state

        single = max(extents) <= self.chunk
        if single:
            state = step(em, 0, 1, tuple(extents), None)
        else:
            # Every chunk runs in a loop of its own (chunks of equal widths for every unit share one): a loop body's
            # PSUM buffers live for the whole body, so two chunks in one body would need twice the banks.
            state = []
            for _ in units:
                state.append(em.insert(tile.FillOp(MASKED, column_tile(p))).result)
                if not self.sum_column:
                    state.append(em.insert(tile.FillOp(0.0, column_tile(p))).result)
                state.append(em.insert(tile.FillOp(0.0, sbuf_tile((p, self.product_width)))).result)
            chunks = -(-max(extents) // self.chunk)
            runs: list[tuple[int, int, tuple[int, ...]]] = []
            for k in range(chunks):
                widths = tuple(max(0, min(self.chunk, extent - k * self.chunk)) for extent in extents)
                if runs and runs[-1][2] == widths:
                    runs[-1] = (runs[-1][0], k + 1, widths)
                else:
                    runs.append((k, k + 1, widths))
            for start, stop, widths in runs:

                def run_step(
                    e: LoopNestBuilder, k: Index, s: list[SSAValue], w: tuple[int, ...] = widths, z: int = stop
                ) -> list[SSAValue]:
                    return step(e, k, z, w, s)

                state = carry(em, start, stop, 1, state, run_step, always_loop=True)
        negated = single and self.negated_max
        return [self.finish(em, unit.p, state[size * u : size * u + size], negated) for u, unit in enumerate(units)]

    def begin_units(self, em: LoopNestBuilder, spec: list[tuple[_Head, Index]], p: int) -> _Pending:
        """The first half of `query_tiles` for units whose keys fit one chunk: scores, maxima and exponentials."""
        units = [_Unit(head, t, em.mul(t, PARTITION_TILE), p) for head, t in spec]
        widths = [self.extent(unit) for unit in units]
        assert max(widths) <= self.chunk
        operands = [unit.head.chunk_operands(em, 0, n) for unit, n in zip(units, widths, strict=True)]
        scores = [
            self.scores(em, unit, keys_t, 0, n, self.masks_chunk(unit, 1))
            for unit, (keys_t, _), n in zip(units, operands, widths, strict=True)
        ]
        maxima, probabilities, summands = self.exponentials(em, units, scores, [None] * len(units), widths)
        return _Pending(units, widths, [values for _, values in operands], maxima, probabilities, summands)

    def end_units(self, em: LoopNestBuilder, pending: _Pending) -> list[tuple[SSAValue, SSAValue | None]]:
        """The second half: p^T, the products and each unit's output rows and log-sum-exp (`finish`)."""
        products = self.products(em, pending.units, pending.probabilities, pending.values, pending.widths)
        results = []
        for unit, (new_max, negative), terms, product in zip(
            pending.units, pending.maxima, pending.summands, products, strict=True
        ):
            state = self.combine(em, unit.p, new_max, negative, terms, product, None)
            results.append(self.finish(em, unit.p, state, self.negated_max))
        return results

    # ---- one chunk of keys -----------------------------------------------------------------------------------

    def extent(self, unit: _Unit) -> int:
        """Keys a unit reads: all of them, or with a causal mask and a query tile known at compile time, those up
        to the end of the tile's 128-row block (a whole block: a partial block of keys is always the last one)."""
        if self.causal and isinstance(unit.t, int):
            return min(self.keys, (unit.t + 1) * PARTITION_TILE)
        return self.keys

    def masks_chunk(self, unit: _Unit, stop: int) -> bool:
        """Whether a run of chunks ending before `stop` needs the causal mask for `unit`: only the chunk with the
        tile's diagonal block does (its last), and none when every key comes before the tile's first row."""
        if not self.causal:
            return False
        if not isinstance(unit.t, int):
            return True
        extent = self.extent(unit)
        return stop == -(-extent // self.chunk) and extent > unit.t * PARTITION_TILE

    @property
    def product_width(self) -> int:
        """Columns of P @ V: the value's, and the row sum's when it comes from a ones column of the values."""
        return self.value_head + 1 if self.sum_column else self.value_head

    @property
    def state_size(self) -> int:
        """Values of one unit's running state: (max, output with sum column) or (max, sum, output)."""
        return 2 if self.sum_column else 3

    def with_ones(self, em: LoopNestBuilder, rows: list[_Rows]) -> list[_Rows]:
        """Value rows with a column of ones after the last: P @ [V | 1] puts the row sums of P beside P @ V, so
        TensorE computes them for one more column instead of VectorE reducing P."""
        if not self.sum_column:
            return rows

        def ones_beside(value: SSAValue) -> SSAValue:
            *outer, _ = value.type.get_shape()  # type: ignore[attr-defined]
            ones = em.insert(tile.FillOp(1.0, sbuf_tile((*outer, self.product_width), self.element_type))).result
            return em.insert(tile.InsertOp(value, ones, [em.index(0)] * len(outer[1:]) + [em.index(0)])).result

        return _each_matrix(rows, ones_beside, ones_beside, self.product_width)

    def exponentials(
        self,
        em: LoopNestBuilder,
        units: list[_Unit],
        scores: list[SSAValue],
        states: list[list[SSAValue] | None],
        widths: list[int],
    ) -> tuple[list[tuple[SSAValue, SSAValue]], list[SSAValue], list[SSAValue]]:
        """Every unit's (m', -scale m'), then every unit's p = exp(s - m') in the input dtype, and what its row sum
        adds up (p itself, or with `fp32_sums` the exponentials before their rounding to p's dtype)."""
        maxima = [self.running_max(em, u.p, s, old) for u, s, old in zip(units, scores, states, strict=True)]
        exp_type = f32 if self.fp32_sums else self.element_type
        summands: list[SSAValue] = [
            em.insert(tile.UnaryOp(s, "exp", sbuf_tile((u.p, n), exp_type), scale=self.exp_scale, bias=negative)).result
            for u, s, (_, negative), n in zip(units, scores, maxima, widths, strict=True)
        ]
        probabilities = [to_sbuf(em, terms, self.element_type) for terms in summands]
        return maxima, probabilities, summands

    def products(
        self,
        em: LoopNestBuilder,
        units: list[_Unit],
        probabilities: list[SSAValue],
        values: list[_Rows],
        widths: list[int],
    ) -> list[SSAValue]:
        """Every unit's p^T, then every unit's p @ V (with its sum column) in PSUM."""
        transposed = [
            self.transposed(em, probs, u.p, n) for u, probs, n in zip(units, probabilities, widths, strict=True)
        ]
        return [
            self.times_values(em, probs_t, rows, u.p, n)
            for u, probs_t, rows, n in zip(units, transposed, values, widths, strict=True)
        ]

    def scores(
        self, em: LoopNestBuilder, unit: _Unit, keys_t: list[SSAValue], c0: Index, n: int, causal: bool
    ) -> SSAValue:
        """Q K^T[:, chunk] (+ mask, + the causal mask when `causal`) of one unit, accumulated over the feature tiles:
        in PSUM unscaled, or scaled in SBUF when a mask is added."""
        p = unit.p
        scores_type = TileType((p, n), f32, Memory.PSUM)
        scores: SSAValue | None = None
        for query_part, keys_part in zip(unit.head.query_t(em, unit.t, p), keys_t, strict=True):
            scores = em.insert(tile.MatmulOp(query_part, keys_part, scores_type, scores)).result
        assert scores is not None
        if self.mask is not None:
            scores = em.insert(tile.BinaryScalarOp(scores, "multiply", sbuf_tile((p, n)), scalar=self.scale)).result
            mask = load(em, self.mask, [*unit.head.batch, unit.m0, c0], (p, n))
            scores = em.insert(tile.BinaryOp(scores, mask, "add", sbuf_tile((p, n)))).result
        if causal and self.mask is None and self.identity is not None:
            identity = window(em, self.identity, [0], (p, p))
            bias = self.causal_bias(em, unit.t, unit.m0, c0, p, n)
            scores = em.insert(tile.MatmulOp(identity, bias, scores_type, scores)).result
        elif causal:
            bias = self.causal_bias(em, unit.t, unit.m0, c0, p, n)
            scores = em.insert(tile.BinaryOp(scores, bias, "add", sbuf_tile((p, n)))).result
        return scores

    def running_max(
        self, em: LoopNestBuilder, p: int, scores: SSAValue, state: list[SSAValue] | None
    ) -> tuple[SSAValue, SSAValue]:
        """m' = max(m, rowmax(s)) (floored at MASKED), and -scale m', the exponentials' bias. A single chunk
        without a mask or a scale in its exponentials gives -m' for both (`negated_max`): the negation is then the
        reduce's own (neuron-fuse-instructions), off the chain from the maximum to the exponentials, and the
        log-sum-exp subtracts -m' rather than adding m'."""
        chunk_max = em.insert(tile.ReduceOp(scores, "max", column_tile(p))).result
        if state is None and self.negated_max:
            negative = em.insert(tile.BinaryScalarOp(chunk_max, "multiply", column_tile(p), scalar=-1.0)).result
            return negative, negative
        if state is None and self.mask is None:
            # Every row sees a key (key 0 at least when causal): its maximum is a real score, no floor needed.
            new_max = chunk_max
        elif state is None:
            new_max = em.insert(tile.BinaryScalarOp(chunk_max, "max", column_tile(p), scalar=MASKED)).result
        else:
            new_max = em.insert(tile.BinaryOp(state[0], chunk_max, "max", column_tile(p))).result
        negative_max = em.insert(
            tile.BinaryScalarOp(new_max, "multiply", column_tile(p), scalar=-self.exp_scale)
        ).result
        return new_max, negative_max

    def combine(
        self,
        em: LoopNestBuilder,
        p: int,
        new_max: SSAValue,
        negative_max: SSAValue,
        summands: SSAValue,
        product: SSAValue,
        state: list[SSAValue] | None,
    ) -> list[SSAValue]:
        """The running state after one chunk: (m', [l' =] l exp(m - m') + sum(p), O exp(m - m') + p V)."""
        chunk_sum = None if self.sum_column else em.insert(tile.ReduceOp(summands, "add", column_tile(p))).result
        if state is None:
            # One chunk: the product stays in PSUM, read once by the normalisation.
            return [new_max, product] if chunk_sum is None else [new_max, chunk_sum, product]
        old_max, old_out = state[0], state[-1]
        correction = em.insert(
            tile.UnaryOp(old_max, "exp", column_tile(p), scale=self.exp_scale, bias=negative_max)
        ).result
        out_type = sbuf_tile((p, self.product_width))
        scaled_out = em.insert(tile.BinaryScalarOp(old_out, "multiply", out_type, column=correction)).result
        new_out = em.insert(tile.BinaryOp(scaled_out, product, "add", out_type)).result
        if chunk_sum is None:
            return [new_max, new_out]
        scaled_sum = em.insert(tile.BinaryScalarOp(state[1], "multiply", column_tile(p), column=correction)).result
        new_sum = em.insert(tile.BinaryOp(scaled_sum, chunk_sum, "add", column_tile(p))).result
        return [new_max, new_sum, new_out]

    def causal_bias(self, em: LoopNestBuilder, t: Index, m0: Index, c0: Index, p: int, n: int) -> SSAValue:
        """[p, n]: MASKED where key position c0 + j exceeds query position m0 + i, else 0 (query tile t)."""
        if self.causal_biases is not None:
            return window(em, self.causal_biases, [t, c0], (p, n))
        relative = em.add(c0, em.mul(m0, -1))  # key minus query position at [0, 0]
        offset = relative if not isinstance(relative, int) else None
        base = relative if isinstance(relative, int) else 0
        positions = tile.IotaOp(sbuf_tile((p, n)), steps=[1], base=base, channel_multiplier=-1, offset=offset)
        return self.future_to_bias(em, em.insert(positions).result)

    @staticmethod
    def future_to_bias(em: LoopNestBuilder, positions: SSAValue) -> SSAValue:
        """MASKED where a key-minus-query position is positive, else 0 (one two-step tensor_scalar)."""
        result_type = positions.type
        assert isinstance(result_type, TileType)
        future = em.insert(tile.BinaryScalarOp(positions, "is_gt", result_type, scalar=0.0)).result
        return em.insert(tile.BinaryScalarOp(future, "multiply", result_type, scalar=MASKED)).result

    def transposed(self, em: LoopNestBuilder, probabilities: SSAValue, p: int, n: int) -> SSAValue:
        """p^T as [128, blocks, p] (key block j at [:, j, :]): all TensorE transposes of a chunk before its
        multiplies, so that each PSUM evacuation overlaps the next transpose instead of stalling TensorE.

        Each block leaves PSUM through an exact multiply by 1 rather than an insert's plain copy: an insert's copy
        runs on the engine its destination was given (VectorE or ScalarE, alternating between destinations, so
        about half of these evacuations ran on ScalarE, the kernel's busiest engine, at 128 cycles where VectorE
        takes 64), while the multiply, which neuron-fuse-instructions writes straight into the block's window, is
        placed by neuron-balance-engines against the trip's other VectorE and ScalarE work (the evacuations of
        one key block index across the trip's units together, each block index on its own)."""
        blocks = -(-n // PARTITION_TILE)
        parts = min(n, PARTITION_TILE)
        result = em.insert(tile.EmptyOp(sbuf_tile((parts, blocks, p), self.element_type))).result
        for j in range(blocks):
            width = min(PARTITION_TILE, n - j * PARTITION_TILE)
            part = window(em, probabilities, [j * PARTITION_TILE], (p, width))
            part_t = em.insert(tile.TransposeOp(part)).result
            evacuated = sbuf_tile((width, p), self.element_type)
            part_t = em.insert(tile.BinaryScalarOp(part_t, "multiply", evacuated, scalar=1.0)).result
            result = em.insert(tile.InsertOp(part_t, result, [em.index(j), em.index(0)])).result
        return result

    def times_values(self, em: LoopNestBuilder, transposed: SSAValue, values: _Rows, p: int, n: int) -> SSAValue:
        """p [p, n] @ the chunk's value rows (with their ones column), accumulated in PSUM from p^T's blocks."""
        result_type = TileType((p, self.product_width), f32, Memory.PSUM)
        product: SSAValue | None = None
        for j in range(-(-n // PARTITION_TILE)):
            width = min(PARTITION_TILE, n - j * PARTITION_TILE)
            part_t = window(em, transposed, [j, 0], (width, p))
            block = values.block(em, j, width)
            product = em.insert(tile.MatmulOp(part_t, block, result_type, product)).result
        assert product is not None
        return product

    @property
    def negated_max(self) -> bool:
        """Whether a single chunk's state holds -m rather than m (`running_max`)."""
        return self.mask is None and self.exp_scale == 1.0

    def finish(
        self, em: LoopNestBuilder, p: int, state: list[SSAValue], negated: bool = False
    ) -> tuple[SSAValue, SSAValue | None]:
        """The unit's output rows O / l in the output dtype, and its log-sum-exp column when it is used (`negated`:
        the state holds -m, see `running_max`)."""
        row_max, out = state[0], state[-1]
        row_sum = window(em, out, [self.value_head], (p, 1)) if self.sum_column else state[1]
        guarded = row_sum
        if self.mask is not None:  # without one, every row sums to at least 1 (its maximum's exp(0))
            guarded = em.insert(tile.BinaryScalarOp(row_sum, "max", column_tile(p), scalar=TINY_SUM)).result
        if guarded is row_sum and self.sum_column and self.product_width <= 2 * self.target(em).scalar_min_cycles:
            # The reciprocal of the whole (narrow) product, read where TensorE left it, costs about what the sum
            # column's own reciprocal does, where that column would first be copied out of PSUM; only its last
            # column (1 / l) is used, as the scalar column the multiply reads in place.
            inverses = em.insert(tile.UnaryOp(out, "reciprocal", sbuf_tile((p, self.product_width)))).result
            inverse = window(em, inverses, [self.value_head], (p, 1))
        else:
            inverse = em.insert(tile.UnaryOp(guarded, "reciprocal", column_tile(p))).result
        # Only the value columns are normalised (not the sum column beside them), so that the product is all that
        # a pipelined unit's insert into its trip's output tile reads, and it writes that tile's window itself.
        values = window(em, out, [0], (p, self.value_head))
        out_type = sbuf_tile((p, self.value_head), self.out_type)
        result: SSAValue = em.insert(tile.BinaryScalarOp(values, "multiply", out_type, column=inverse)).result
        if self.lse is None:
            return result, None
        log_sum = em.insert(tile.UnaryOp(guarded, "log", column_tile(p))).result
        if negated:
            lse = em.insert(tile.BinaryOp(log_sum, row_max, "subtract", column_tile(p))).result
        else:
            if self.exp_scale != 1.0:
                row_max = em.insert(
                    tile.BinaryScalarOp(row_max, "multiply", column_tile(p), scalar=self.exp_scale)
                ).result
            lse = em.insert(tile.BinaryOp(row_max, log_sum, "add", column_tile(p))).result
        if self.mask is None:
            return result, lse
        attended = em.insert(tile.BinaryScalarOp(row_sum, "is_gt", column_tile(p), scalar=0.0)).result
        zero = em.insert(tile.FillOp(0.0, column_tile(p))).result
        lse = em.insert(tile.SelectOp(attended, lse, zero, column_tile(p))).result
        return result, lse


def _finish(undone: Callable[[], None] | None) -> None:
    """Emit what a head group left undone (`_Attention.query_heads`), if anything."""
    if undone is not None:
        undone()


def heads_beside_features(
    em: LoopNestBuilder, batch: tuple[int, ...], rows: int, width: int, element_type: Attribute
) -> SSAValue:
    """A new [..., H, rows, width] tensor stored as [..., rows, H, width], as ATen's kernels lay attention's outputs
    out: the usual next step (heads moved back beside the features and merged, `transpose(1, 2).reshape(B, L, H *
    E)`) is then a view, not a copy."""
    if not batch:
        return alloc(em, (rows, width), element_type)
    *outer, heads = batch
    storage = alloc(em, (*outer, rows, heads, width), element_type)
    layout = layout_of(storage)
    rank = len(outer)
    order = (*range(rank), rank + 1, rank, rank + 2)
    return view(em, storage, Layout(tuple(layout.shape[d] for d in order), tuple(layout.strides[d] for d in order)))


def store_head_rows(
    em: LoopNestBuilder, rows: SSAValue, tensor: SSAValue, batch: list[Index], blocks: int, first: int = 0
) -> None:
    """[128, blocks, heads * width] rows (block t at [:, t, :], head h at columns [h width, (h + 1) width)) into
    rows [128 first, 128 (first + blocks)) of consecutive heads (`batch` indexes the first; one head without a head
    dimension): one DMA. The heads lie beside the features in HBM (`heads_beside_features`), so a row of those
    heads is one contiguous run, and a DMA's rate grows with its runs (one head's 64 bf16 features, 128 bytes,
    move at a quarter of the DMA engines' rate)."""
    if not batch:
        split = split_axis(em, tensor, 0, first + blocks, PARTITION_TILE)
        em.insert(tile.StoreOp(rows, split, [em.index(i) for i in (first, 0, 0)], dims=(1, 0, 2)))
        return
    layout = layout_of(tensor)
    *outer, heads, length, width = layout.shape
    *outer_strides, head_stride, row_stride, width_stride = layout.strides
    if head_stride != width or width_stride != 1 or row_stride != heads * width:
        raise ValueError(f"attention rows are stored with the heads beside the features, not as {layout}")
    merged = view(em, tensor, Layout((*outer, length, heads * width), (*outer_strides, row_stride, 1), layout.offset))
    rank = len(outer)
    split = split_axis(em, merged, rank, first + blocks, PARTITION_TILE)
    *outer_index, head = batch
    indices = [em.index(i) for i in (*outer_index, first, 0, em.mul(head, width))]
    em.insert(tile.StoreOp(rows, split, indices, dims=(rank + 1, rank, rank + 2)))


def store_log_sum_exp(em: LoopNestBuilder, columns: SSAValue, tensor: SSAValue, batch: list[Index]) -> None:
    """[128, blocks] fp32 columns (query tile t in column t) into rows [0, 128 blocks) of one head's [..., L]
    log-sum-exp: transposed on TensorE first, so that the DMA moves rows of 128 queries (512 bytes)
    rather than one 4-byte value per partition and block, which costs the DMA engines as much as a transfer a
    hundred times larger."""
    partitions, blocks = columns.type.get_shape()  # type: ignore[attr-defined]
    rows = to_sbuf(em, em.insert(tile.TransposeOp(columns)).result)
    rank = len(batch) + 1
    split = split_axis(em, tensor, rank - 1, blocks, partitions)
    store(em, rows, split, [*batch, 0, 0])


def load_head_rows(
    em: LoopNestBuilder, tensor: SSAValue, batch: list[Index], first: Index, count: int, width: int
) -> _Rows:
    """Rows [first * 128, first * 128 + count) of one head's [N, width] matrix: the full 128-row blocks in one DMA
    (contiguous rows on partitions), the partial last block of the matrix in another."""
    rank = len(batch) + 2
    total = layout_of(tensor).shape[-2]
    blocks, rest = divmod(count, PARTITION_TILE)
    full = None
    if blocks:
        split = split_axis(em, tensor, rank - 2, total // PARTITION_TILE, PARTITION_TILE)
        shape = (PARTITION_TILE, blocks, width)
        full = load(em, split, [*batch, first, 0, 0], shape, dims=(rank - 1, rank - 2, rank))
    last = load(em, tensor, [*batch, total - rest, 0], (rest, width)) if rest else None
    return _Rows(full, last, width)


def dma_transposable(tensor: SSAValue, element_type: Attribute, target: Target) -> bool:
    """Whether `load_head_transposed` may load the heads of `tensor` ([..., N, width]) as `element_type`: the
    target's DMAs transpose, the features are contiguous in HBM and at most one partition tile wide, and the
    elements are 2-byte and loaded as they are stored (a DMA transpose does not convert)."""
    layout = layout_of(tensor)
    count, width = layout.shape[-2:]
    stored = element_type_of(tensor)
    return (
        bool(target.dma_transpose_hbm_efficiency)
        and layout.strides[-1] == 1
        and 1 < width <= PARTITION_TILE
        and count > 1
        and stored == element_type
        and itemsize(element_type_name(stored)) == 2
    )


def load_head_transposed(
    em: LoopNestBuilder, tensor: SSAValue, batch: list[Index], count: int | None = None
) -> SSAValue:
    """One head's [N, width] matrix (its first `count` rows) as its transpose [width, N], moved by one DMA
    transpose (`dma_transposable`): the DMA engines do what a row load, a TensorE transpose per 128 rows and the
    evacuations of their PSUM tiles did."""
    rows, width = layout_of(tensor).shape[-2:]
    count = rows if count is None else count
    rank = len(batch) + 2
    return load(em, tensor, [*batch, 0, 0], (width, count), dims=(rank - 1, rank - 2))


def _each_matrix(
    rows: list[_Rows], full: Callable[[SSAValue], SSAValue], last: Callable[[SSAValue], SSAValue], width: int
) -> list[_Rows]:
    """`rows` with `full` applied to each distinct full-block tile (once to a tile that several heads' rows share)
    and `last` to each partial last block, each now `width` columns wide."""
    done: dict[SSAValue, SSAValue] = {}
    result = []
    for r in rows:
        new_full = None
        if r.full is not None:
            if r.full not in done:
                done[r.full] = full(r.full)
            new_full = done[r.full]
        new_last = last(r.last) if r.last is not None else None
        result.append(_Rows(new_full, new_last, width, r.first, r.head))
    return result


def _query_groups(query_shape: tuple[int, ...], key_shape: tuple[int, ...]) -> int:
    """Query heads per key/value head: 1 when the batch dimensions agree, else g where the query has g times
    the key's heads (dimension -3) and every other batch dimension agrees (`legal` checks that they do)."""
    query_batch, key_batch = query_shape[:-2], key_shape[:-2]
    return 1 if query_batch == key_batch else query_batch[-1] // key_batch[-1]


def legal(op: Operation) -> str | None:
    """Attention lowers without dropout, on float query, key and value whose batch dims agree but for grouped key
    and value heads, with values no wider than one PSUM bank and at least one key (module docstring)."""
    args = arguments_of(op)
    if float(args.get("dropout_p") or 0.0) != 0.0:
        return "dropout inside attention is not lowered (inference graphs carry none)"
    for name in ("query", "key", "value"):
        if not isinstance(tensor_element_type(args[name]), AnyFloat):
            return f"{name} must be a float tensor, got {tensor_element_type(args[name])}"
    query, key, value = (tensor_shape(args[name]) for name in ("query", "key", "value"))
    if value[:-2] != key[:-2]:
        return f"key and value must have equal batch dimensions, got {key} and {value}"
    query_batch, key_batch = query[:-2], key[:-2]
    if query_batch != key_batch:
        if len(query_batch) != len(key_batch) or not query_batch or query_batch[:-1] != key_batch[:-1]:
            return f"query {query} and key {key} must have equal batch dimensions, but for the heads (dimension -3)"
        if key_batch[-1] == 0 or query_batch[-1] % key_batch[-1]:
            return (
                f"the query's {query_batch[-1]} heads must be a multiple of the key's and value's {key_batch[-1]} "
                "(grouped-query attention)"
            )
    if key[-1] != query[-1] or value[-2] != key[-2]:
        return "key must be [..., S, E] and value [..., S, Ev] for a query [..., L, E]"
    n_limit = target_of(op).matmul_max_moving_free
    if value[-1] > n_limit:
        return f"values wider than one PSUM bank ({n_limit} fp32 columns) are not lowered, got Ev = {value[-1]}"
    if key[-2] == 0:
        return "attention over zero keys is not lowered"
    return None


def _flash_attention(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    kernel = _Attention(em, op, args)
    kernel.emit(em)
    return kernel.results(em)


ATTENTION_LOWERINGS: dict[str, Lowering] = {OP_NAME: _flash_attention}
