"""Fused attention backward: the gradients of `softmax(Q K^T * scale) V` with the probabilities recomputed on chip.

Input contract: `torch.aten._scaled_dot_product_flash_attention_for_cpu_backward` (what training graphs trace the
backward of attention to, see `frontend.backend.attention_backends`) on float grad_out [..., Hq, L, Ev], query
[..., Hq, L, E], key [..., Hkv, S, E], value [..., Hkv, S, Ev], out [..., Hq, L, Ev] and the forward's fp32
logsumexp [..., Hq, L], any strides, with equal batch dimensions but for grouped key/value heads (Hq = g Hkv,
key/value head j serving query heads [g j, g j + g), as in the forward kernel); `is_causal` (top-left aligned:
query i sees keys j <= i) and `scale` (default 1/sqrt(E)). The kernel takes heads of at most one TensorE contraction
(E, Ev <= 128), at most `max_keys` keys (a query tile's fp32 scores fill one PSUM bank) and `MAX_QUERY_TILES` query
tiles (unrolled); dropout and an attention mask are refused (`kernel_refusal`): the frontend then decomposes the op
into ATen ops instead (`frontend.decompositions.flash_attention_backward`), so those cases still compile. More
queries or keys than the kernel takes reach it as one op per block of queries and block of keys, which the frontend
splits the op into (`frontend.decompositions._flash_attention_backward_by_blocks`; a causal one only with as many
queries as keys).

Output guarantee: grad_query, grad_key and grad_value in their inputs' dtypes, each written once; no [L, S]
intermediate reaches HBM. Per (batch, head), Q, K, V, dO and O are loaded once: where the target's DMAs transpose
2-byte elements, K, Q and dO as K^T, Q^T and dO^T (their rows made on TensorE, `narrow_transpose`) and V of more
than one 128-row block (and no grouped heads) as V^T, else as rows (V^T then built by TensorE transposes); O as
rows. Then for each query tile i (128 queries, p rows), over all the keys it sees at once (n <= 512: one PSUM
bank), and for each key block j (128 keys, w rows) of those:

    s     = Q_i K^T                           TensorE (a Q^T block, K^T), PSUM [p, n]
    P     = exp(scale s - lse_i)              ScalarE, lse a per-partition bias: the forward's softmax, recomputed
    dP    = dO_i V^T                          TensorE (a dO^T block, V^T), PSUM [p, n]
    dS    = P scale (dP - D_i)                ScalarE leaves PSUM with scale (dP - D_i), -scale D_i a per-partition
                                              bias (D_i = rowsum(dO_i O_i) once per query tile); VectorE multiplies
    dV_j += P_j^T dO_i,  dK_j += dS_j^T Q_i   TensorE: P and dS, queries on partitions, are the stationary operands
    dQ_i += dS_j K_j                          TensorE from dS_j^T (one transpose per key block), in PSUM

dS carries the scale that dQ and dK both take, so every gradient leaves PSUM as a plain copy, straight into the
tile its DMA stores. dQ_i leaves PSUM after its last key block. dK_j and dV_j accumulate in PSUM over the query
tiles of a stage (one accumulation group per key block and key/value head); when the stage holds every query tile
the key/value head serves they leave PSUM once, as the gradients, else they add to fp32 SBUF sums over the
stages. Causal attention skips the key blocks after a query tile's last row and adds a -1e30 bias (built
once for all heads from a GpSimdE iota, added in PSUM by TensorE) to the scores of the diagonal block of the tiles
that straddle the diagonal: their keys before the tile's first row have scores of their own in another PSUM tile,
so TensorE adds the bias over one block, not over all the keys. The query tiles of a trip (one or more key/value
heads with all their query heads, consecutive heads) are emitted stage by stage, four query tiles at a time;
unrolled trips are software-pipelined by stage (a stage's P before the previous stage's products, its dS before
them too or, causal, after them), and each head's transposes are emitted just before its first scores, after the
loads of its whole trip.

DMA runs. A DMA's rate grows with its contiguous runs: 128 bytes (one head's row of 64 bf16) move at a quarter of
the DMA engines' rate, a 4-byte run costs as much as 128 bytes. Each gradient's full 128-row blocks of all the
trip's heads leave in one DMA (pipelined trips: of two trips' heads, the last trip's alone, `STORE_TRIPS`): stored
with the heads beside the features, a row of those heads is one contiguous run. The log-sum-exp loads as rows of
128 queries (a head's tiles on partitions) and is transposed on TensorE into the per-partition columns the
exponentials take as their bias.

The matmul operands (P, dS and the inputs' rows) are in the inputs' dtype, as the forward kernel's P is, and so is
scale (dP - D), rounded once before its product with P (the product runs at VectorE's 16-bit rate); the
exponentials, dP - D and every accumulation are fp32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import AnyFloat, f32
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.neuron import target_of
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.attention import (
    _Attention,
    _Rows,
    dma_transposable,
    heads_beside_features,
    load_head_rows,
    load_head_transposed,
)
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    PARTITION_TILE,
    Lowering,
    arguments_of,
    element_type_of,
    layout_of,
    load,
    result_element_type,
    sbuf_tile,
    tensor_element_type,
    tensor_shape,
    to_sbuf,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.matmul import split_axis, window
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.dtypes import itemsize
from neuron_mlir.runtime.hardware import TARGETS, Memory, Target

OP_NAME = "torch.aten._scaled_dot_product_flash_attention_for_cpu_backward"
# The query tiles of a head are unrolled. Longer sequences reach the kernel in blocks (the frontend splits them).
MAX_QUERY_TILES = 8
# Query tiles emitted stage by stage together (`_AttentionBackward.scores`, `products`): each holds two PSUM banks
# (its scores, then dP) and one for its dQ, which the allocator reuses across the stage's tiles as they die. With
# unrolled trips pipelined by stage, smaller stages interleave each engine's queue more finely: the 12 causal heads
# of 512 queries (bf16, trn2) take 50.8 us in stages of 4 against 52.8 in stages of 8 (55.0 at 2, 51.5 at 3, 54.6
# at 6), and the training steps gain too (BERT-base 622.1 -> 620.2 us, GPT-2 690.2 -> 683.4, ViT-B/16 620.3 ->
# 616.7, the Llama layer unchanged at 2471.3).
TILES_PER_STAGE = 4
# Scores per trip over the heads, in 128-query rows of keys (query tiles times the keys each sees, over the trip's
# heads): the 12 causal heads of 512 queries, bf16, take 59.9 us at trips of two heads (2560 columns: one stage of
# 8 query tiles), 63.1 us in two stages of 4, 74.3 us at trips of four heads (5120), 75.8 us at three heads in one
# stage, with the trips unrolled; ViT-B/16's 24 heads of 197 queries and keys (394 columns each) take 715.3 us at
# trips of four heads (its training step), 711.1 us at trips of eight (3152 columns) and 707.9 us at twelve (4728),
# but any limit above 3840 gives the causal heads of 512 queries trips of three (in stages of 4, with their rows made
# by `narrow_transpose`: 51.3 us at three heads, 50.8 at two, 58.9 at one).
TRIP_SCORE_COLUMNS = 3200
# And at most this many query tiles per trip, whose heads' rows, transposes and gradients all stay in SBUF until the
# trip stores: short sequences have few scores per head, and a trip of hundreds of them would not fit.
MAX_TRIP_TILES = 16
# Trips over the heads are emitted one after another, without a loop, up to this many: each trip then has buffers
# of its own, so its loads start while the trips before it compute, where a loop's double buffering makes each
# trip's loads wait until the trip two before has released its buffers (the 12 causal heads of 512 queries, bf16:
# 67.7 -> 59.9 us).
UNROLLED_TRIPS = 8
# The trips of a pipelined kernel store their gradients in groups of this many trips (all but the last trip, which
# stores alone): a DMA of more heads moves longer runs (stored with the heads beside the features). The 12 causal
# heads of 512 queries (bf16, trn2, trips of two heads: 256-byte runs) take 46.0 -> 44.9 us in pairs of trips
# (512-byte runs), 45.1 in threes, 47.4 with all but the last trip in one group.
STORE_TRIPS = 2
# The next stage's heads have their rows and -lse made before this stage's dS (`pipelined_trips`) when there are at
# most this many of them: the 12 causal heads of 512 queries (bf16, trn2) take 48.0 -> 46.0 us with it (one head a
# stage), ViT-B/16's training step 527.6 -> 526.3 (two), BERT-base's 519.9 -> 523.3 with four ahead (so none).
AHEAD_HEADS = 2


def _psum(shape: tuple[int, ...]) -> TileType:
    return TileType(shape, f32, Memory.PSUM)


def _tiles(n: int) -> int:
    return -(-n // PARTITION_TILE)


def _evacuated(em: LoopNestBuilder, value: SSAValue, element_type: Attribute) -> SSAValue:
    """A PSUM tile copied to SBUF in `element_type` by an exact multiply by 1 rather than a plain copy: a copy
    into a window of a larger tile runs on the engine its destination was given (VectorE or ScalarE by turns, and
    ScalarE takes twice VectorE's time for 16-bit data), while the multiply, which neuron-fuse-instructions writes
    straight into the window, is placed by neuron-balance-engines against the other VectorE and ScalarE work."""
    shape = value.type.get_shape()  # type: ignore[attr-defined]
    return em.insert(tile.BinaryScalarOp(value, "multiply", sbuf_tile(shape, element_type), scalar=1.0)).result


def max_keys(target: Target | None = None) -> int:
    """The most keys the kernel takes: a query tile's scores over all its keys, in fp32, fill one PSUM bank of a
    partition. With no target, the fewest any target takes (what the frontend may keep whole before it knows
    which target compiles the graph)."""
    targets = TARGETS.values() if target is None else (target,)
    return min(t.psum_bank_bytes for t in targets) // itemsize("f32")


def kernel_refusal(
    query: Sequence[int],
    key: Sequence[int],
    value: Sequence[int],
    dropout_p: float,
    has_mask: bool,
    is_causal: bool,
    target: Target | None = None,
    lengths: bool = True,
) -> str | None:
    """Why the fused kernel does not take an attention backward of these shapes on `target` (None: it does). The
    frontend asks this before tracing, to keep the op whole, split it or decompose it, without a target
    (`max_keys`); without `lengths`, whether it would take the shapes but for their numbers of queries and keys
    (so that it takes blocks of them)."""
    if dropout_p != 0.0:
        return "dropout inside attention has no fused backward"
    if has_mask:
        return "an attention mask has no fused backward"
    if len(query) < 2 or len(query) != len(key) or tuple(value[:-2]) != tuple(key[:-2]):
        return f"query {tuple(query)}, key {tuple(key)} and value {tuple(value)} must have equal batch dimensions"
    if tuple(query[:-2]) != tuple(key[:-2]):
        grouped = len(query) > 2 and tuple(query[:-3]) == tuple(key[:-3]) and key[-3] > 0 and query[-3] % key[-3] == 0
        if not grouped:
            return (
                f"query {tuple(query)} and key {tuple(key)} must have equal batch dimensions, but for grouped "
                "key/value heads (dimension -3)"
            )
    (length, head), (keys, key_head), (value_keys, value_head) = query[-2:], key[-2:], value[-2:]
    if key_head != head or value_keys != keys:
        return "key must be [..., S, E] and value [..., S, Ev] for a query [..., L, E]"
    if not 0 < head <= PARTITION_TILE or not 0 < value_head <= PARTITION_TILE:
        return f"heads wider than one TensorE contraction ({PARTITION_TILE}) have no fused backward"
    if length == 0 or keys == 0:
        return "attention over no queries or keys has no fused backward"
    if not lengths:
        return None
    if keys > (limit := max_keys(target)):
        return f"more than {limit} keys (one PSUM bank of scores per query tile) have no fused backward"
    if _tiles(length) > MAX_QUERY_TILES:
        return f"more than {MAX_QUERY_TILES * PARTITION_TILE} queries have no fused backward"
    return None


def legal(op: Operation) -> str | None:
    """The fused backward lowers float attention without dropout or mask, heads of at most one TensorE
    contraction, at most `max_keys` keys and MAX_QUERY_TILES query tiles (module docstring)."""
    args = arguments_of(op)
    for name in ("grad_out", "query", "key", "value", "out"):
        if not isinstance(tensor_element_type(args[name]), AnyFloat):
            return f"{name} must be a float tensor, got {tensor_element_type(args[name])}"
    query, key, value = (tensor_shape(args[name]) for name in ("query", "key", "value"))
    return kernel_refusal(
        query,
        key,
        value,
        float(args.get("dropout_p") or 0.0),
        args.get("attn_mask") is not None,
        bool(args.get("is_causal")),
        target_of(op),
    )


@dataclass(eq=False)
class _KeyValue:
    """One (batch, key/value head) of the kernel: its index, its key rows and K^T, V^T in SBUF, and its dK and dV
    sums per key block over the query tiles of every query head it serves."""

    batch: list[Index]
    position: int
    gathered: list[_Gathered]
    # What remains to emit of its preparation once its loads are emitted (`_AttentionBackward.ready`).
    pending: Callable[[LoopNestBuilder], None] | None
    # V as `load_value` loaded it, and what loads it until its first query head does (`prepare_head`).
    value: _Rows | _Runs | SSAValue | None = None
    load_value: Callable[[], _Rows | _Runs | SSAValue] | None = None
    key: _Rows = field(init=False)
    key_t: SSAValue = field(init=False)
    value_t: SSAValue = field(init=False)
    grad_keys: dict[int, SSAValue] = field(default_factory=dict)
    grad_values: dict[int, SSAValue] = field(default_factory=dict)
    stored: set[int] = field(default_factory=set)


@dataclass(eq=False)
class _Head:
    """One (batch, query head) of the kernel: its index, its key/value head, its rows and their transposes in
    SBUF, the per-query-tile columns (-lse, D), and its dQ per query tile."""

    batch: list[Index]
    kv: _KeyValue
    position: int
    pending: Callable[[LoopNestBuilder], None] | None
    # What remains after `pending`: -lse and D as per-partition columns (`ready`).
    pending_columns: Callable[[LoopNestBuilder], None] | None = None
    query: _Rows = field(init=False)
    grad_out: _Rows = field(init=False)
    query_t: SSAValue = field(init=False)
    grad_out_t: SSAValue = field(init=False)
    columns: list[tuple[SSAValue, SSAValue]] = field(init=False)


@dataclass(frozen=True)
class _Runs:
    """One head's [b 128, width] matrix loaded as runs of consecutive rows: partition p holds rows [p b, p b + b)
    as `tile` [128, b, width]."""

    tile: SSAValue


@dataclass
class _Scores:
    """A stage's query tiles after their first half: (rows, first key of the causal diagonal, keys seen) per
    tile, P, scale (dP - D) and, once `_AttentionBackward.multiplied` has run, dS."""

    shapes: list[tuple[int, int, int]]
    probabilities: list[SSAValue]
    centred: list[SSAValue]
    grad_scores: list[SSAValue] = field(default_factory=list)


class _Gathered:
    """One gradient of consecutive heads in SBUF, as it is stored: the full 128-row blocks of all the heads in one
    [128, blocks, heads, width] tile, the partial last blocks in one [rest, heads, width] tile (the heads axis only
    with batch dimensions). Blocks are inserted as they are computed, straight from PSUM, in the gradient's dtype:
    each block is copied once."""

    def __init__(self, em: LoopNestBuilder, heads: int, count: int, width: int, element_type: Attribute, batched: bool):
        self.full_blocks, self.rest = divmod(count, PARTITION_TILE)
        self.batched = batched
        heads_dim = (heads,) if batched else ()
        self.full: SSAValue | None = None
        self.last: SSAValue | None = None
        if self.full_blocks:
            full_type = sbuf_tile((PARTITION_TILE, self.full_blocks, *heads_dim, width), element_type)
            self.full = em.insert(tile.EmptyOp(full_type)).result
        if self.rest:
            self.last = em.insert(tile.EmptyOp(sbuf_tile((self.rest, *heads_dim, width), element_type))).result

    def insert(self, em: LoopNestBuilder, head: int, block: int, value: SSAValue) -> None:
        """Block `block` of head `head` (its position among the gathered heads), cast to the gradient's dtype."""
        heads_at = [em.index(head)] if self.batched else []
        if block < self.full_blocks:
            assert self.full is not None
            self.full = em.insert(tile.InsertOp(value, self.full, [em.index(block), *heads_at, em.index(0)])).result
        else:
            assert self.last is not None
            self.last = em.insert(tile.InsertOp(value, self.last, [*heads_at, em.index(0)])).result

    def store(self, em: LoopNestBuilder, tensor: SSAValue, batch: list[Index]) -> None:
        """Both tiles to the gradient, whose heads lie beside the features (`heads_beside_features`): a row of all
        the gathered heads is one contiguous run in HBM, so a DMA of more heads moves longer runs, at a higher
        rate. `batch` indexes the first head."""
        rank = len(batch) + 2
        head_dims = (rank - 3,) if self.batched else ()
        if self.full is not None:
            split = split_axis(em, tensor, rank - 2, self.full_blocks, PARTITION_TILE)
            indices = [em.index(i) for i in (*batch, 0, 0, 0)]
            em.insert(tile.StoreOp(self.full, split, indices, dims=(rank - 1, rank - 2, *head_dims, rank)))
        if self.last is not None:
            indices = [em.index(i) for i in (*batch, self.full_blocks * PARTITION_TILE, 0)]
            em.insert(tile.StoreOp(self.last, tensor, indices, dims=(rank - 2, *head_dims, rank - 1)))


@dataclass
class _StoreGroup:
    """Consecutive trips whose gradients are gathered and stored together: the gathered gradients of all their
    heads, and the query and key/value heads begun so far, in order."""

    gathered: list[_Gathered]
    heads: list[_Head] = field(default_factory=list)
    key_values: list[_KeyValue] = field(default_factory=list)


@dataclass(frozen=True)
class _Trip:
    """One trip over the heads: its query heads, key/value heads, store group and query-tile stages."""

    heads: list[_Head]
    key_values: list[_KeyValue]
    group: _StoreGroup
    stages: list[list[tuple[_Head, int]]]


class _AttentionBackward:
    """One attention backward op's kernel; `emit` writes its loop nest over the heads."""

    def __init__(self, em: LoopNestBuilder, op: Operation, args: dict[str, Any]):
        self.grad_out, self.query, self.key = args["grad_out"], args["query"], args["key"]
        self.value, self.out = args["value"], args["out"]
        q_layout = layout_of(self.query)
        self.batch = q_layout.shape[:-2]
        self.key_batch = layout_of(self.key).shape[:-2]
        # Grouped-query attention: key/value head j serves query heads [g j, g j + g) (as the forward kernel).
        self.groups = self.batch[-1] // self.key_batch[-1] if self.batch != self.key_batch else 1
        self.length, self.head = q_layout.shape[-2:]
        self.keys = layout_of(self.key).shape[-2]
        self.value_head = layout_of(self.value).shape[-1]
        scale = args.get("scale")
        self.scale = float(scale) if scale is not None else 1.0 / math.sqrt(self.head)
        self.causal = bool(args.get("is_causal"))
        lse = args["logsumexp"]
        lse_layout = layout_of(lse)  # [..., L] seen as [..., 1, L]: one row of queries
        self.lse = view(
            em, lse, Layout((*lse_layout.shape[:-1], 1, self.length), (*lse_layout.strides, 1), lse_layout.offset)
        )
        self.element_type = element_type_of(self.query)
        self.target = target_of(op)
        # Stored with the heads beside the features, as the forward's output: the gradients then merge their heads
        # for the projections' backward (`transpose(1, 2).reshape(B, L, H * E)`) as views.
        self.results = [
            heads_beside_features(em, self.batch, self.length, self.head, result_element_type(op, 0)),
            heads_beside_features(em, self.key_batch, self.keys, self.head, result_element_type(op, 1)),
            heads_beside_features(em, self.key_batch, self.keys, self.value_head, result_element_type(op, 2)),
        ]

    def rows_in(self, count: int, t: int) -> int:
        return min(PARTITION_TILE, count - t * PARTITION_TILE)

    def emit(self, em: LoopNestBuilder) -> None:
        # Each query tile's causal bias over the keys it sees, built once for all heads and added to the scores in
        # PSUM by TensorE (identity^T @ bias): VectorE and GpSimdE stay off the scores' critical path.
        self.biases: dict[int, SSAValue] = {}
        self.identity: SSAValue | None = None
        # An identity in the inputs' dtype, for the causal bias's matmuls and `narrow_transpose`'s.
        self.eye: SSAValue | None = None
        narrow = any(
            dma_transposable(tensor, self.element_type, self.target) for tensor in (self.key, self.query, self.grad_out)
        )
        if self.causal or narrow:
            square = sbuf_tile((PARTITION_TILE, PARTITION_TILE), self.element_type)
            offsets = em.insert(tile.IotaOp(square, steps=[1], channel_multiplier=-1)).result
            self.eye = em.insert(tile.BinaryScalarOp(offsets, "is_equal", square, scalar=0.0)).result
            self.identity = self.eye if self.causal else None
        by_shape: dict[tuple[int, int], SSAValue] = {}
        for i in range(_tiles(self.length)):
            if self.causal and self.straddles(i):
                # Over the tile's diagonal keys only (from its first row's position on): the keys before it are
                # all visible. Tiles of one shape share the bias: key minus query position is the same.
                shape = (self.rows_in(self.length, i), self.extent(i) - i * PARTITION_TILE)
                if shape not in by_shape:
                    positions = tile.IotaOp(sbuf_tile(shape, self.element_type), steps=[1], channel_multiplier=-1)
                    by_shape[shape] = _Attention.future_to_bias(em, em.insert(positions).result)
                self.biases[i] = by_shape[shape]

        # Key/value heads whose query heads have few scores share a loop trip (up to TRIP_SCORE_COLUMNS), their query
        # tiles emitted stage by stage together.
        columns = self.groups * sum(self.extent(i) for i in range(_tiles(self.length)))
        group = max(1, min(TRIP_SCORE_COLUMNS // columns, MAX_TRIP_TILES // (self.groups * _tiles(self.length))))

        def heads(e: LoopNestBuilder, dims: tuple[int, ...], outer: list[Index]) -> None:
            if len(dims) > 1:
                e.for_each(dims[0], lambda inner, h: heads(inner, dims[1:], [*outer, h]))
                return
            if not dims:
                self.head_group(e, [outer])
                return
            trips, odd = divmod(dims[0], group)
            if trips <= UNROLLED_TRIPS:
                batches = [[[*outer, t * group + h] for h in range(group)] for t in range(trips)]
                if odd:
                    batches.append([[*outer, trips * group + h] for h in range(odd)])
                self.pipelined_trips(e, batches)
                return
            else:
                e.for_each(
                    trips,
                    lambda inner, t: self.head_group(
                        inner, [[*outer, inner.add(inner.mul(t, group), h)] for h in range(group)]
                    ),
                )
            if odd:
                self.head_group(e, [[*outer, trips * group + h] for h in range(odd)])

        heads(em, tuple(self.key_batch), [])

    def extent(self, i: int) -> int:
        """Keys query tile i reads: all, or with a causal mask the whole key blocks up to the tile's last row."""
        if not self.causal:
            return self.keys
        last_query = min(self.length, (i + 1) * PARTITION_TILE) - 1
        return min(self.keys, _tiles(last_query + 1) * PARTITION_TILE)

    def straddles(self, i: int) -> bool:
        """Whether query tile i reads a key after its first row (so the causal mask touches its scores)."""
        return self.extent(i) - 1 > i * PARTITION_TILE

    def transposed(self, em: LoopNestBuilder, rows: _Rows, count: int) -> SSAValue:
        """[width, count]: the rows' transpose, one TensorE transpose per 128 rows. The blocks leave PSUM as plain
        copies: through `_evacuated` the BERT-base training step's backward (48 heads of one query tile) took
        404.3 -> 409.0 us, for 1.0 us less in the 12 causal heads of 512 queries."""
        result = em.insert(tile.EmptyOp(sbuf_tile((rows.width, count), self.element_type))).result
        for t in range(_tiles(count)):
            block = em.insert(tile.TransposeOp(rows.block(em, t, self.rows_in(count, t)))).result
            result = em.insert(tile.InsertOp(block, result, [em.index(t * PARTITION_TILE)])).result
        return result

    def load_lse(self, em: LoopNestBuilder, batch: list[Index]) -> tuple[SSAValue | None, SSAValue | None]:
        """The log-sum-exp of one head's queries as rows: [tiles, 128] for the full query tiles and [1, rest] for a
        partial last one (`negated_lse` makes them columns)."""
        full, rest = divmod(self.length, PARTITION_TILE)
        rank = len(batch) + 2
        rows: list[SSAValue | None] = []
        for blocks, width, first in ((full, PARTITION_TILE, 0), (1 if rest else 0, rest, full * PARTITION_TILE)):
            if not blocks:
                rows.append(None)
                continue
            if width == PARTITION_TILE:
                split = split_axis(em, self.lse, rank - 1, full, PARTITION_TILE)
                indices, dims = [*batch, 0, 0, 0], (rank - 1, rank)
            else:
                split, indices, dims = self.lse, [*batch, 0, first], (rank - 2, rank - 1)
            rows.append(load(em, split, indices, (blocks, width), dims=dims))
        return rows[0], rows[1]

    @staticmethod
    def negated_lse(
        em: LoopNestBuilder, rows: tuple[SSAValue | None, SSAValue | None]
    ) -> tuple[SSAValue | None, SSAValue | None]:
        """-lse of one head's queries as per-partition columns: [128, tiles] for the full query tiles (tile t in
        column t) and [rest, 1] for a partial last one. The log-sum-exp loads with the queries on the free axis
        (`load_lse`) and is transposed on TensorE: loaded one query per partition, each DMA descriptor would move 4
        bytes, which costs the DMA engines as much as a transfer a hundred times larger."""
        columns: list[SSAValue | None] = []
        for row in rows:
            if row is None:
                columns.append(None)
                continue
            blocks, width = row.type.get_shape()  # type: ignore[attr-defined]
            column = em.insert(tile.TransposeOp(row)).result
            columns.append(
                em.insert(tile.BinaryScalarOp(column, "multiply", sbuf_tile((width, blocks)), scalar=-1.0)).result
            )
        return columns[0], columns[1]

    def row_columns(
        self, em: LoopNestBuilder, grad_out: _Rows, out: _Rows, lse: tuple[SSAValue | None, SSAValue | None]
    ) -> list[tuple[SSAValue, SSAValue]]:
        """Per query tile, -lse and -scale D (D = rowsum(dO O)) as [p, 1] columns, D computed for all the head's
        full tiles in one instruction (and once more for the partial last tile)."""
        columns = []
        full, rest = divmod(self.length, PARTITION_TILE)
        for rows_count, part in ((full, "full"), (1 if rest else 0, "last")):
            if not rows_count:
                continue
            p = PARTITION_TILE if part == "full" else rest
            shape = (p, full, self.value_head) if part == "full" else (p, self.value_head)
            dot_shape = (p, full) if part == "full" else (p, 1)
            products = em.insert(
                tile.BinaryOp(getattr(grad_out, part), getattr(out, part), "multiply", sbuf_tile(shape))
            ).result
            dots = em.insert(tile.ReduceOp(products, "add", sbuf_tile(dot_shape))).result
            dots = em.insert(tile.BinaryScalarOp(dots, "multiply", sbuf_tile(dot_shape), scalar=-self.scale)).result
            negated = lse[0] if part == "full" else lse[1]
            assert negated is not None
            for t in range(rows_count):
                if part == "full":
                    columns.append((window(em, negated, [t], (p, 1)), window(em, dots, [t], (p, 1))))
                else:
                    columns.append((negated, dots))
        return columns

    def head_group(self, em: LoopNestBuilder, key_batches: list[list[Index]]) -> None:
        """The key/value heads `key_batches` with their query heads: each one's rows loaded and transposed, then all
        the query heads' query tiles in stages of TILES_PER_STAGE, then the gradients stored (dK and dV summed over
        the query heads a key/value head serves)."""
        trip = self.begin_trip(em, key_batches)
        for units in trip.stages:
            self.products(em, units, self.multiplied(em, self.scores(em, units)))
        self.finish_trip(em, trip)

    def pipelined_trips(self, em: LoopNestBuilder, trips: list[list[list[Index]]]) -> None:
        """Trips over the heads in straight-line code, software-pipelined by stage: a stage's scores, P and
        scale (dP - D) are emitted before the previous stage's products, so that each engine's queue alternates
        between two stages (ScalarE's exponentials of one while TensorE multiplies for the other) and a trip's loads
        start before the trip before it computes its gradients. Measured against trips one after another (K and dO
        loaded by DMA transposes in both): the ViT-B/16 step 683.5 -> 677.2 us, the Llama layer 2558.0 -> 2547.1,
        GPT-2's 717.8 -> 716.9.

        In causal kernels the stage's dS (`multiplied`) follows the previous stage's products and the next trip's
        loads. The engines run their queues in order, and VectorE's share of the products (the dS^T evacuations the
        dQ products wait for) does not depend on this stage's exponentials, where its dS does: emitted first, dS
        held VectorE until ScalarE had finished the stage's exponentials and scale (dP - D), then ScalarE waited for
        the next scores behind the products VectorE had not yet evacuated. Measured (bf16, trn2) on the 12 causal
        heads of 512 queries: backward 49.9 -> 48.0 us; the GPT-2 block's training step 567.2 -> 566.6 (backward
        393.0 -> 392.5), the Llama layer's 2112.1 -> 2111.6. The kernels without a mask keep dS first: after the
        products, the ViT-B/16 step took 527.6 -> 528.8 us and BERT-base's backward 329.9 -> 330.0.

        Before the stage's dS, the next stage's heads get their rows and -lse (`ready` without D) when they are at
        most AHEAD_HEADS: at their first scores, the rows' PSUM evacuations and -lse queued on VectorE behind this
        stage's dS, and TensorE's next scores behind them (the narrow transposes reuse the PSUM those evacuations
        read). D stays at the first scores: it waits for O, whose load comes last, and ahead of dS it held the
        engine that computes dS (GPT-2's backward 392.5 -> 402.9 us with D ahead too). The causal case 48.0 ->
        46.0 us, ViT-B/16's step 527.6 -> 526.3, the Llama layer 2111.6 -> 2111.3, GPT-2 unchanged; BERT-base's
        stages of four heads of one query tile would prepare four heads ahead, which took its step 519.9 -> 523.3."""
        # Trip t's store group: the trips before the last in groups of STORE_TRIPS, the last alone, so that the
        # kernel's end waits for the last trip's rows only.
        bounds = [(first, min(first + STORE_TRIPS, len(trips) - 1)) for first in range(0, len(trips) - 1, STORE_TRIPS)]
        bounds.append((len(trips) - 1, len(trips)))
        key_heads = {first: sum(len(trips[t]) for t in range(first, stop)) for first, stop in bounds}
        group_ends = {stop - 1 for _, stop in bounds}
        begun: list[_Trip] = []
        stores: dict[int, bool] = {}

        def begin(key_batches: list[list[Index]]) -> _Trip:
            t = len(begun)
            group = None if t in key_heads else begun[-1].group
            trip = self.begin_trip(em, key_batches, group, key_heads.get(t, 0))
            begun.append(trip)
            stores[id(trip)] = t in group_ends
            return trip

        pending: tuple[_Trip, list[tuple[_Head, int]], _Scores, bool, bool] | None = None
        remaining = list(trips)
        trip = begin(remaining.pop(0))
        while True:
            following: _Trip | None = None
            for index, units in enumerate(trip.stages):
                scores = self.scores(em, units)
                if not self.causal:
                    self.multiplied(em, scores)
                if pending is not None:
                    self.finish_stage(em, *pending)
                last = index == len(trip.stages) - 1
                if last and remaining:
                    following = begin(remaining.pop(0))
                upcoming = trip.stages[index + 1] if not last else following.stages[0] if following else []
                unprepared = list({head: None for head, _ in upcoming if head.pending is not None})
                if len(unprepared) <= AHEAD_HEADS:
                    for head in unprepared:
                        self.ready(em, head, columns=False)
                if self.causal:
                    self.multiplied(em, scores)
                pending = (trip, units, scores, last, stores[id(trip)])
            if following is None:
                break
            trip = following
        if pending is not None:
            self.finish_stage(em, *pending)

    def finish_stage(
        self,
        em: LoopNestBuilder,
        trip: _Trip,
        units: list[tuple[_Head, int]],
        scores: _Scores,
        last: bool,
        store: bool = True,
    ) -> None:
        self.products(em, units, scores)
        if last:
            self.finish_trip(em, trip, store)

    def begin_trip(
        self, em: LoopNestBuilder, key_batches: list[list[Index]], group: _StoreGroup | None = None, key_heads: int = 0
    ) -> _Trip:
        """The trip's rows loaded and its gradients' place in `group` (a new group of `key_heads` key/value heads,
        at least the trip's, when None)."""
        if group is None:
            batched = bool(key_batches[0])
            count = max(key_heads, len(key_batches))
            types = [element_type_of(result) for result in self.results]
            group = _StoreGroup(
                [
                    _Gathered(em, count * self.groups, self.length, self.head, types[0], batched),
                    _Gathered(em, count, self.keys, self.head, types[1], batched),
                    _Gathered(em, count, self.keys, self.value_head, types[2], batched),
                ]
            )
        heads: list[_Head] = []
        key_values: list[_KeyValue] = []
        for key_batch in key_batches:
            key_value = self.prepare_key_value(em, key_batch, len(group.key_values), group.gathered)
            key_values.append(key_value)
            group.key_values.append(key_value)
            *outer, kv = key_batch
            query_batches = (
                [key_batch]
                if self.groups == 1
                else [[*outer, em.add(em.mul(kv, self.groups), j)] for j in range(self.groups)]
            )
            for batch in query_batches:
                head = self.prepare_head(em, batch, key_value, len(group.heads))
                heads.append(head)
                group.heads.append(head)
        units = [(head, i) for head in heads for i in range(_tiles(self.length))]
        stages = [units[first : first + TILES_PER_STAGE] for first in range(0, len(units), TILES_PER_STAGE)]
        return _Trip(heads, key_values, group, stages)

    def finish_trip(self, em: LoopNestBuilder, trip: _Trip, store: bool = True) -> None:
        """The trip's remaining dK and dV blocks gathered, then, with `store`, its group's three gradients stored."""
        for key_value in trip.key_values:
            self.finish_key_value(em, key_value)
        if not store:
            return
        group = trip.group
        group.gathered[0].store(em, self.results[0], group.heads[0].batch)
        group.gathered[1].store(em, self.results[1], group.key_values[0].batch)
        group.gathered[2].store(em, self.results[2], group.key_values[0].batch)

    def prepare_key_value(
        self, em: LoopNestBuilder, batch: list[Index], position: int, gathered: list[_Gathered]
    ) -> _KeyValue:
        """K loaded; V is loaded by the first query head's preparation, after that head's Q (`prepare_head`)."""
        loaded = self.load_rows_or_transposed(em, self.key, batch, self.keys, self.head)
        key_value = _KeyValue(batch, position, gathered, None, load_value=lambda: self.load_value(em, batch))

        def convert(e: LoopNestBuilder) -> None:
            assert key_value.value is not None
            key_value.key, key_value.key_t = self.both_ways(e, loaded, self.keys)
            key_value.value_t = self.value_transposed(e, key_value.value)

        key_value.pending = convert
        return key_value

    @staticmethod
    def ready(em: LoopNestBuilder, head: _Head, columns: bool = True) -> None:
        """Emits what remains of the preparation of `head` and its key/value head (the transposes after their
        loads), once, just before their first use: a trip's first scores then wait only for their own head's
        loads, not for every head of the trip. Without `columns`, all but D = rowsum(dO O), which waits for O
        (`pipelined_trips` prepares the next stage's heads so, one stage ahead)."""
        for prepared in (head.kv, head):
            if prepared.pending is not None:
                pending, prepared.pending = prepared.pending, None
                pending(em)
        if columns and head.pending_columns is not None:
            emit_columns, head.pending_columns = head.pending_columns, None
            emit_columns(em)

    def load_rows_or_transposed(
        self, em: LoopNestBuilder, tensor: SSAValue, batch: list[Index], count: int, width: int
    ) -> tuple[_Rows | None, SSAValue | None]:
        """One head's matrix the kernel reads both as rows and transposed: its transpose by one DMA transpose when
        the target's DMAs can (`dma_transposable`), else its rows (`both_ways` makes the other form
        on TensorE). A head's rows of 64 2-byte features are 128-byte runs, a quarter of a copy's DMA rate, where
        a DMA transpose of such a head moves at 0.45 of it; TensorE then makes the rows (`rows_of`), at the same
        64 cycles per 128-row block as a row block's transpose (`narrow_transpose`). In the 12 causal heads of 512
        queries (bf16, trn2) the backward took 59.3 us with K, Q and dO as rows, 57.9 to 58.3 with one of them by
        DMA, 57.8 with Q and dO, 58.2 with all three (the rows then made by transposes of 128 cycles a block);
        with each head's transposes emitted at its first use (`ready`) and the trips pipelined, 56.0 with K and dO
        and 55.5 with all three, which the training steps (BERT-base, GPT-2, the Llama layer, ViT-B/16) also
        prefer; 54.1 with the rows made by `narrow_transpose`."""
        if dma_transposable(tensor, self.element_type, self.target):
            return None, load_head_transposed(em, tensor, batch, count)
        return load_head_rows(em, tensor, batch, 0, count, width), None

    def both_ways(
        self, em: LoopNestBuilder, loaded: tuple[_Rows | None, SSAValue | None], count: int
    ) -> tuple[_Rows, SSAValue]:
        """The rows and the transpose of a matrix `load_rows_or_transposed` loaded in one of the two forms."""
        rows, transposed = loaded
        if rows is not None:
            return rows, self.transposed(em, rows, count)
        assert transposed is not None
        return self.rows_of(em, transposed, count), transposed

    def rows_of(self, em: LoopNestBuilder, transposed: SSAValue, count: int) -> _Rows:
        """The rows of a [width, count] transpose, one TensorE transpose per 128 rows, in `load_head_rows`'s
        layout."""
        width = transposed.type.get_shape()[0]  # type: ignore[attr-defined]
        blocks, rest = divmod(count, PARTITION_TILE)
        full: SSAValue | None = None
        last: SSAValue | None = None
        if blocks:
            full = em.insert(tile.EmptyOp(sbuf_tile((PARTITION_TILE, blocks, width), self.element_type))).result
            for t in range(blocks):
                part = window(em, transposed, [t * PARTITION_TILE], (width, PARTITION_TILE))
                block = self.narrow_transpose(em, part)
                full = em.insert(tile.InsertOp(block, full, [em.index(t), em.index(0)])).result
        if rest:
            part = window(em, transposed, [blocks * PARTITION_TILE], (width, rest))
            last = to_sbuf(em, self.narrow_transpose(em, part), self.element_type)
        return _Rows(full, last, width)

    def narrow_transpose(self, em: LoopNestBuilder, part: SSAValue) -> SSAValue:
        """[F, P] in PSUM from a [P, F] SBUF tile of fewer partitions than columns, as a plain matmul with the tile
        as the stationary operand and a [P, P] identity as the moving one (part^T I): TensorE streams the moving
        operand's P columns, where a transpose-mode matmul streams the tile's F columns. A head of 64 features
        turns each 128-row block of its transpose back into rows in 64 cycles instead of 128; the products are
        exact (each output sums one product by 1), so finite rows are the loaded values. A NaN or Inf spreads over
        its row, as in trn1's transposes (docs/hardware-sources.md); a non-finite K, Q or dO makes dS, and with it
        dQ and dK, non-finite in eager too."""
        partitions, columns = part.type.get_shape()  # type: ignore[attr-defined]
        if partitions >= columns or self.eye is None:
            return em.insert(tile.TransposeOp(part)).result
        eye = window(em, self.eye, [0], (partitions, partitions))
        return em.insert(tile.MatmulOp(part, eye, _psum((columns, partitions)))).result

    @staticmethod
    def runs_per_partition(tensor: SSAValue) -> bool:
        """Whether one head's rows are contiguous in HBM and fill two or more whole 128-row blocks, so that each
        partition can load a run of consecutive rows."""
        layout = layout_of(tensor)
        count, width = layout.shape[-2:]
        blocks, rest = divmod(count, PARTITION_TILE)
        return not rest and blocks > 1 and layout.strides[-1] == 1 and layout.strides[-2] == width

    def load_value(self, em: LoopNestBuilder, batch: list[Index]) -> _Rows | _Runs | SSAValue:
        """V, which the kernel reads only transposed: V^T by one DMA transpose where the target's DMAs transpose
        (`dma_transposable`) and the head has more than one 128-row block, else its rows in order (`_Rows`) or as
        runs of consecutive rows per partition (`_Runs`), which `value_transposed` turns into V^T on TensorE. The
        DMA transpose moves a head of 64 2-byte features at 0.45 of a copy's rate where the runs of four 128-byte
        rows move at 0.625, and saves TensorE its transposes and VectorE or ScalarE their PSUM evacuations (bf16,
        trn2): the 12 causal heads of 512 queries took 54.1 -> 52.8 us, the GPT-2 block's training step 695.0
        -> 690.2, ViT-B/16's (197 rows) 622.5 -> 620.3. A head of one block keeps its row load and TensorE
        transpose (64 cycles): by DMA transposes, BERT-base's step (48 heads of 128 rows) took 622.1 -> 622.8.
        Grouped key/value heads keep the TensorE path too: their V^T serves several query heads, so its transposes
        are a small share of TensorE's work (the Llama layer, four query heads per key/value head: 2471.3 ->
        2471.4 by DMA transposes)."""
        count, width = layout_of(self.value).shape[-2:]
        by_dma = count > PARTITION_TILE and self.groups == 1
        if by_dma and dma_transposable(self.value, self.element_type, self.target):
            return load_head_transposed(em, self.value, batch, count)
        if not self.runs_per_partition(self.value):
            return load_head_rows(em, self.value, batch, 0, count, width)
        blocks = count // PARTITION_TILE
        rank = len(batch) + 2
        runs = split_axis(em, self.value, rank - 2, PARTITION_TILE, blocks)
        return _Runs(load(em, runs, [*batch, 0, 0, 0], (PARTITION_TILE, blocks, width)))

    def value_transposed(self, em: LoopNestBuilder, loaded: _Rows | _Runs | SSAValue) -> SSAValue:
        """[width, count]: V transposed, as `load_value` loaded it or made on TensorE.

        When its rows are contiguous in HBM and fill whole 128-row blocks, partition p loads the consecutive rows
        [p b, p b + b) (b blocks): one run of b rows per partition, which moves at a higher DMA rate than a row per
        descriptor. Row r of every partition then transposes to the columns {p b + r}, which the copy out of PSUM
        puts in place (every b-th column from r), so the result is the same as from rows loaded in order."""
        count, width = layout_of(self.value).shape[-2:]
        if isinstance(loaded, _Rows):
            return self.transposed(em, loaded, count)
        if not isinstance(loaded, _Runs):
            return loaded
        blocks = count // PARTITION_TILE
        result = em.insert(tile.EmptyOp(sbuf_tile((width, count), self.element_type))).result
        for r in range(blocks):
            part = window(em, loaded.tile, [r, 0], (PARTITION_TILE, width))
            block = _evacuated(em, em.insert(tile.TransposeOp(part)).result, self.element_type)
            result = em.insert(tile.InsertOp(block, result, [em.index(r)], steps=[blocks])).result
        return result

    def prepare_head(self, em: LoopNestBuilder, batch: list[Index], key_value: _KeyValue, position: int) -> _Head:
        """The head's loads in the order of their first use, with its key/value head's V among them when it is
        the first query head of that key/value head: the log-sum-exp and Q (with K, loaded before, the scores and
        the exponentials), V and dO (dP), then O (D, for dS). DMA bandwidth goes to transfers in program order, so
        the first exponentials wait for three transfers rather than six (K, V, Q, dO, O, then the log-sum-exp:
        the 12 causal heads of 512 queries, bf16, trn2, took 50.8 -> 49.9 us)."""
        lse_rows = self.load_lse(em, batch)
        loaded_query = self.load_rows_or_transposed(em, self.query, batch, self.length, self.head)
        if key_value.load_value is not None:
            key_value.value, key_value.load_value = key_value.load_value(), None
        loaded_grad_out = self.load_rows_or_transposed(em, self.grad_out, batch, self.length, self.value_head)
        out = load_head_rows(em, self.out, batch, 0, self.length, self.value_head)
        head = _Head(batch, key_value, position, None)

        def convert(e: LoopNestBuilder) -> None:
            lse = self.negated_lse(e, lse_rows)
            head.query, head.query_t = self.both_ways(e, loaded_query, self.length)
            head.grad_out, head.grad_out_t = self.both_ways(e, loaded_grad_out, self.length)

            def columns(e2: LoopNestBuilder) -> None:
                head.columns = self.row_columns(e2, head.grad_out, out, lse)

            head.pending_columns = columns

        head.pending = convert
        return head

    def finish_key_value(self, em: LoopNestBuilder, key_value: _KeyValue) -> None:
        """dK and dV blocks of one key/value head not yet gathered: the fp32 sums over several stages, or zeros for
        blocks no query sees (causal, more keys than queries)."""
        for j in range(_tiles(self.keys)):
            if j in key_value.stored:
                continue
            w = self.rows_in(self.keys, j)
            for gathered, sums, width in (
                (1, key_value.grad_keys, self.head),
                (2, key_value.grad_values, self.value_head),
            ):
                block = sums.get(j)
                if block is None:
                    block = em.insert(
                        tile.FillOp(0.0, sbuf_tile((w, width), element_type_of(self.results[gathered])))
                    ).result
                key_value.gathered[gathered].insert(em, key_value.position, j, block)

    def scores(self, em: LoopNestBuilder, units: list[tuple[_Head, int]]) -> _Scores:
        """The first half of the query tiles `units` (head, tile): P and dS of each, emitted step by step across
        them, so that each engine's queue alternates between tiles (one tile's exponentials on ScalarE while
        TensorE multiplies for another) where one tile alone would leave every engine waiting on the previous link
        of its chain."""
        shapes = [(self.rows_in(self.length, i), i * PARTITION_TILE, self.extent(i)) for _, i in units]
        probabilities: list[SSAValue] = []
        for (head, i), (p, m0, n) in zip(units, shapes, strict=True):
            self.ready(em, head)
            if i not in self.biases:
                probabilities.append(self.exponentials(em, head, i, p, 0, n))
                continue
            # A tile across the diagonal: its keys before its first row in one PSUM tile, its diagonal keys with the
            # causal bias in another, so that TensorE adds the bias over the diagonal block only.
            if not m0:
                probabilities.append(self.exponentials(em, head, i, p, 0, n, self.biases[i]))
                continue
            probs: SSAValue = em.insert(tile.EmptyOp(sbuf_tile((p, n), self.element_type))).result
            probs = em.insert(tile.InsertOp(self.exponentials(em, head, i, p, 0, m0), probs, [em.index(0)])).result
            diagonal = self.exponentials(em, head, i, p, m0, n - m0, self.biases[i])
            probabilities.append(em.insert(tile.InsertOp(diagonal, probs, [em.index(m0)])).result)
        centred_tiles: list[SSAValue] = []
        for (head, i), (p, m0, n) in zip(units, shapes, strict=True):
            grad_out_block_t = window(em, head.grad_out_t, [m0], (self.value_head, p))
            values_t = window(em, head.kv.value_t, [0], (self.value_head, n))
            grad_probabilities = em.insert(tile.MatmulOp(grad_out_block_t, values_t, _psum((p, n)))).result
            # dS carries the scale (dQ and dK both take it): scale (dP - D) leaves PSUM in one ScalarE pass, with
            # -scale D as the per-partition bias, in the inputs' dtype, so that the product with P runs at VectorE's
            # 16-bit rate.
            _, scaled_row_dot = head.columns[i]
            centred = em.insert(
                tile.UnaryOp(
                    grad_probabilities,
                    "copy",
                    sbuf_tile((p, n), self.element_type),
                    scale=self.scale,
                    bias=scaled_row_dot,
                )
            ).result
            centred_tiles.append(centred)
        return _Scores(shapes, probabilities, centred_tiles)

    def multiplied(self, em: LoopNestBuilder, scores: _Scores) -> _Scores:
        """dS = P scale (dP - D) of each tile of the stage."""
        for (p, _, n), centred, probs in zip(scores.shapes, scores.centred, scores.probabilities, strict=True):
            product = tile.BinaryOp(centred, probs, "multiply", sbuf_tile((p, n), self.element_type))
            scores.grad_scores.append(em.insert(product).result)
        return scores

    def products(self, em: LoopNestBuilder, units: list[tuple[_Head, int]], scores: _Scores) -> None:
        """The second half: each tile's dQ into its trip's gathered gradient, its dK and dV parts into the key/value
        heads' sums."""
        shapes, probabilities, grad_scores = scores.shapes, scores.probabilities, scores.grad_scores
        # dV's products need only P: on TensorE they run while dS is computed. dS^T's transposes before dK's
        # products: their evacuations overlap those products on TensorE.
        self.key_value_products(em, units, shapes, probabilities, keys=False)
        transposed = []
        for (p, _, n), scores_grad in zip(shapes, grad_scores, strict=True):
            blocks = []
            for j in range(_tiles(n)):
                part = window(em, scores_grad, [j * PARTITION_TILE], (p, self.rows_in(self.keys, j)))
                blocks.append(to_sbuf(em, em.insert(tile.TransposeOp(part)).result))
            transposed.append(blocks)
        self.key_value_products(em, units, shapes, grad_scores, keys=True)
        for (head, i), (p, _, _), blocks in zip(units, shapes, transposed, strict=True):
            grad_query: SSAValue | None = None
            for j, block_t in enumerate(blocks):
                key_rows = head.kv.key.block(em, j, self.rows_in(self.keys, j))
                grad_query = em.insert(tile.MatmulOp(block_t, key_rows, _psum((p, self.head)), grad_query)).result
            assert grad_query is not None  # every query tile sees key block 0
            head.kv.gathered[0].insert(em, head.position, i, grad_query)

    def exponentials(
        self, em: LoopNestBuilder, head: _Head, i: int, p: int, first: int, count: int, bias: SSAValue | None = None
    ) -> SSAValue:
        """P of query tile i over keys [first, first + count): exp(scale Q_i K^T - lse_i) (the causal `bias` added
        to the scores in PSUM by TensorE), in the inputs' dtype."""
        query_block_t = window(em, head.query_t, [i * PARTITION_TILE], (self.head, p))
        keys_t = window(em, head.kv.key_t, [first], (self.head, count))
        scores = em.insert(tile.MatmulOp(query_block_t, keys_t, _psum((p, count)))).result
        if bias is not None:
            assert self.identity is not None
            identity = window(em, self.identity, [0], (p, p))
            scores = em.insert(tile.MatmulOp(identity, bias, _psum((p, count)), scores)).result
        negative_lse, _ = head.columns[i]
        result_type = sbuf_tile((p, count), self.element_type)
        return em.insert(tile.UnaryOp(scores, "exp", result_type, scale=self.scale, bias=negative_lse)).result

    def key_value_products(
        self,
        em: LoopNestBuilder,
        units: list[tuple[_Head, int]],
        shapes: list[tuple[int, int, int]],
        stationary: list[SSAValue],
        keys: bool,
    ) -> None:
        """dV_j = sum P_ij^T dO_i (`stationary` the stage's P) or, with `keys`, dK_j = sum dS_ij^T Q_i (`stationary`
        its dS) over the stage's query tiles i of each key/value head, one PSUM accumulation group per key block:
        the sum leaves PSUM once per stage instead of once per query tile. When the stage holds every query tile the
        key/value head serves, the sums are final and leave PSUM straight into the gathered gradient; otherwise
        they add to fp32 SBUF sums."""
        width = self.head if keys else self.value_head
        members: dict[_KeyValue, list[int]] = {}
        for index, (head, _) in enumerate(units):
            members.setdefault(head.kv, []).append(index)
        for key_value, indices in members.items():
            sums = key_value.grad_keys if keys else key_value.grad_values
            final = not sums and len(indices) == self.groups * _tiles(self.length)
            for j in range(_tiles(max(shapes[index][2] for index in indices))):
                w, k0 = self.rows_in(self.keys, j), j * PARTITION_TILE
                total: SSAValue | None = None
                for index in indices:
                    head, i = units[index]
                    p, _, n = shapes[index]
                    if k0 >= n:
                        continue
                    rows = (head.query if keys else head.grad_out).block(em, i, p)
                    part = window(em, stationary[index], [k0], (p, w))
                    total = em.insert(tile.MatmulOp(part, rows, _psum((w, width)), total)).result
                assert total is not None
                if not final:
                    sums[j] = self.accumulate(em, sums.get(j), total)
                    continue
                key_value.gathered[1 if keys else 2].insert(em, key_value.position, j, total)
                key_value.stored.add(j)

    @staticmethod
    def accumulate(em: LoopNestBuilder, total: SSAValue | None, part: SSAValue) -> SSAValue:
        """total + part in fp32 SBUF (the part copied out of PSUM the first time)."""
        if total is None:
            return to_sbuf(em, part)
        shape = part.type.get_shape()  # type: ignore[attr-defined]
        return em.insert(tile.BinaryOp(total, part, "add", sbuf_tile(shape))).result


def _flash_attention_backward(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    kernel = _AttentionBackward(em, op, args)
    kernel.emit(em)
    return kernel.results


ATTENTION_BACKWARD_LOWERINGS: dict[str, Lowering] = {OP_NAME: _flash_attention_backward}
