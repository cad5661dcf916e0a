"""Graphs with symbolic sizes run by one program per size bucket: inputs padded, padding masked out of every
reduction and contraction, results cut; what the rules cannot prove safe is compiled per size, with a note."""

import re

import pytest
import sympy  # type: ignore[import-untyped]
import torch
import torch.nn.functional as F
from support import assert_close_to_torch

import neuron_mlir
from neuron_mlir.frontend import stats as stats_module
from neuron_mlir.frontend.fx_importer import KEY_BLOCKS_READ
from neuron_mlir.frontend.size_buckets import (
    FOLLOWED_TOP,
    SMALLEST_TOP,
    BucketedGraph,
    LearnedBuckets,
    bucket_of,
    range_split,
    split_symbols,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import COLUMN_VARIANTS
from neuron_mlir.lowering.neuron_unroll_loops import SHORT_TRIPS

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _programs() -> int:
    stats = neuron_mlir.stats()
    return stats["graphs_compiled"] + stats["recompilations"]


def _marked(x: torch.Tensor, dim: int, low: int, high: int) -> torch.Tensor:
    torch._dynamo.mark_dynamic(x, dim, min=low, max=high)
    return x


def test_a_bounded_range_is_one_bucket():
    assert bucket_of(5, 2, 40) == 40
    assert bucket_of(40, 2, 40) == 40


# a decoder's (batch, sequence) sizes, batches of 1 being a graph of their own (Dynamo specialises 1)
DECODER_SIZES = [
    (2, 7), (4, 512), (3, 45), (1, 100), (2, 333), (4, 19), (3, 260), (2, 2), (4, 128),
    (1, 17), (3, 400), (2, 61), (4, 250), (3, 5),
]  # fmt: skip


def _learned_programs(sizes: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[int]]:
    """The programs `LearnedBuckets` compiles for a batched graph and a batch-of-one graph called at `sizes`."""
    batch, seq = sympy.symbols("b s")
    # the sequence is the minor factor of the token rows `[b*s, h]`
    batched, single = LearnedBuckets({batch: 2, seq: 2}, inner=frozenset({seq})), LearnedBuckets({seq: 2})
    for b, s in sizes:
        if b == 1:
            single.bucket({seq: s}, {})
        else:
            tops = batched.bucket({batch: b, seq: s}, {})
            assert min(tops[batch] - b, tops[seq] - s) >= 0  # the program covers the call
    return [(t[batch], t[seq]) for t in batched.compiled], [t[seq] for t in single.compiled]


@pytest.mark.parametrize("order", ["as given", "increasing", "decreasing", "largest first"])
def test_unbounded_sizes_learn_at_most_two_programs_per_graph_in_any_order(order):
    sizes = {
        "as given": DECODER_SIZES,
        "increasing": sorted(DECODER_SIZES, key=lambda size: size[::-1]),
        "decreasing": sorted(DECODER_SIZES, key=lambda size: size[::-1], reverse=True),
        "largest first": [DECODER_SIZES[1], *DECODER_SIZES[2:], DECODER_SIZES[0]],  # automatic dynamic's order
    }[order]
    batched, single = _learned_programs(sizes)
    # the sequence, the widest range, splits at sqrt(8 * FOLLOWED_TOP) = 64; batches up to SMALLEST_TOP share one
    assert sorted(batched) == [(SMALLEST_TOP, 64), (SMALLEST_TOP, FOLLOWED_TOP)]
    assert sorted(single) == [64, FOLLOWED_TOP]


def test_a_batch_of_2_to_4_beside_a_sequence_that_has_not_changed_yet_is_not_split():
    batch, seq = sympy.symbols("b s")
    learned = LearnedBuckets({batch: 2, seq: 2})
    for b, s in ((2, 7), (4, 8), (3, 100), (4, 5)):
        learned.bucket({batch: b, seq: s}, {})
    # the batch's range (2..4) is the wider at the second call, but one top of 4 covers it: split at the middle
    # it would have compiled a 64 x 8 program
    assert [(t[batch], t[seq]) for t in learned.compiled] == [(4, 64), (4, 512)]


def test_a_size_beyond_every_program_compiles_one_covering_every_size_seen():
    batch, seq = sympy.symbols("b s")
    learned = LearnedBuckets({batch: 2, seq: 2})
    for b, s in ((2, 7), (3, 700), (2, 600), (6, 9), (2, 3000), (3, 2000)):
        learned.bucket({batch: b, seq: s}, {})
    tops = [(t[batch], t[seq]) for t in learned.compiled]
    # beyond FOLLOWED_TOP the top is the next power of two of the largest size seen; a batch beyond SMALLEST_TOP
    # wants its own power of two, in the lower bucket as in the upper
    assert tops == [(4, 64), (4, 1024), (8, 64), (8, 4096)]
    assert FOLLOWED_TOP == SHORT_TRIPS * 128 == COLUMN_VARIANTS * 128  # the widths a program's nests follow


def test_the_widest_bounded_range_splits_into_two_buckets_at_its_geometric_middle():
    # the range counts from SMALLEST_BUCKET: sqrt(8 * 512) = 64
    assert range_split(2, 512) == 64
    assert (bucket_of(7, 2, 512, split=True), bucket_of(64, 2, 512, split=True)) == (64, 64)
    assert (bucket_of(65, 2, 512, split=True), bucket_of(7, 2, 512)) == (512, 512)
    assert range_split(2, 12) is None  # sqrt(8 * 12) rounds up to 16, above the top: one bucket
    assert bucket_of(5, 2, 12, split=True) == 12
    batch, seq, labels, other = sympy.symbols("b s t o")
    ranges = {batch: (2, 4), seq: (2, 512), labels: (2, 512), other: (2, None)}
    assert split_symbols(ranges, []) == {seq}  # one split per graph: at most two programs
    assert split_symbols(ranges, [(labels, seq)]) == {seq, labels}  # sizes taken as one share the split
    assert split_symbols({batch: (2, 4)}, []) == set()


def _call_ns(compiled, *args):
    stats_module.STATS.latest_profiles.clear()
    result = compiled(*args)
    return result, sum(float(p.total_ns) for p in stats_module.STATS.latest_profiles.values())


def test_a_call_in_the_lower_bucket_runs_the_smaller_program():
    def scores(x, w):
        h = torch.relu(x @ w)
        return torch.softmax(h @ h.transpose(1, 2), dim=-1).sum(1)

    compiled = torch.compile(scores, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(5)
    w = torch.randn(8, 8)
    times = {}
    for seq in (5, 40, 20):  # range 2..64 splits at 32
        x = _marked(torch.randn(2, seq, 8), 1, 2, 64)
        result, times[seq] = _call_ns(compiled, x, w)
        assert_close_to_torch(result, scores(x, w), f"seq {seq}")
    assert _programs() == 2
    assert times[5] == times[20]  # one program per bucket
    assert times[5] < times[40]


def test_elementwise_loops_over_bucketed_dimensions_run_the_calls_rows():
    # batch (2..3, bucket 3) and sequence (2..256, upper bucket 256): both are loop or row-tile dimensions of the
    # elementwise nests, bounded by the call's sizes, so one program's time follows the call
    def gate(x, y):
        return torch.where(x > y, x * y, y - 0.5 * x)

    compiled = torch.compile(gate, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(2)
    times = {}
    for batch, seq in ((2, 70), (2, 200), (3, 200)):
        x = _marked(_marked(torch.randn(batch, seq, 512), 0, 2, 3), 1, 2, 256)
        y = _marked(_marked(torch.randn(batch, seq, 512), 0, 2, 3), 1, 2, 256)
        result, times[batch, seq] = _call_ns(compiled, x, y)
        assert_close_to_torch(result, gate(x, y), f"batch {batch}, seq {seq}")
    assert _programs() == 1
    assert times[2, 70] < times[2, 200] < times[3, 200]


def test_token_rows_shorter_than_a_tile_run_up_to_the_last_real_row():
    # [b, s, 64] rows, batch 2..4 and sequence 2..64 (upper bucket 64): 256 token rows, fewer than a tile per
    # batch, stay merged, and the Linear layer and the layer norm run the merged rows' tiles up to the last real
    # row, (b - 1) * 64 + s: one tile at 2 x 40 (104 rows), both at 4 x 60 (252)
    def linear_norm(x, w, b, g, h):
        y = x.reshape(-1, x.shape[-1]) @ w + b
        return F.layer_norm(y.view(x.shape[0], x.shape[1], -1), (96,), g, h)

    compiled = torch.compile(linear_norm, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(6)
    w, b, g, h = torch.randn(64, 96), torch.randn(96), torch.randn(96), torch.randn(96)
    matmul = {}
    for batch, seq in ((2, 40), (4, 60)):
        x = _marked(_marked(torch.randn(batch, seq, 64), 0, 2, 4), 1, 2, 64)
        result, _ = _call_ns(compiled, x, w, b, g, h)
        matmul[batch, seq] = sum(p.busy_ns.get("tensor", 0.0) for p in stats_module.STATS.latest_profiles.values())
        assert_close_to_torch(result, linear_norm(x, w, b, g, h), f"batch {batch}, seq {seq}")
    assert _programs() == 1
    assert 0.0 < matmul[2, 40] < matmul[4, 60]


def test_a_layer_norm_over_token_rows_is_computed_by_the_linear_layer_reading_it():
    # GPT-2's ln_1 -> c_attn over [b, s, 32] tokens, K = 32 below one tile (lowering/tile_fuse_matmul_prologues.py):
    # the matmul's row tiles compute the layer norm where they load it. Batch 2..4, sequence 2..256: the lower
    # bucket's [4*64] merged rows (one tile at 2 x 40, both at 4 x 60), the upper bucket's rows split back into
    # [b, 256] (a row tile picked by batch and row); then a batch of one, traced by Dynamo as a graph of its own,
    # whose layer norm stores [1, s, 32] rows the matmul loads as [s, 32]
    def norm_linear(x, g, h, w, b):
        y = F.layer_norm(x, (32,), g, h)
        return (y.reshape(-1, 32) @ w + b).view(x.shape[0], x.shape[1], -1)

    compiled = torch.compile(norm_linear, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(8)
    g, h, w, b = torch.randn(32) * 0.5 + 1, torch.randn(32), torch.randn(32, 96), torch.randn(96)
    for batch, seq in ((2, 40), (4, 60), (3, 200), (2, 130), (1, 100)):
        x = torch.randn(batch, seq, 32) * 3 + 1
        if batch > 1:
            _marked(x, 0, 2, 4)
        _marked(x, 1, 2, 256)
        result, _ = _call_ns(compiled, x, g, h, w, b)
        assert_close_to_torch(result, norm_linear(x, g, h, w, b), f"batch {batch}, seq {seq}")
    assert _programs() == 3


def test_an_mlp_over_token_rows_keeps_its_hidden_rows_on_chip(tmp_path):
    # GPT-2's ln_2 -> c_fc -> GELU -> c_proj + residual over [b, s, 32] tokens (K = 32, below the 128 that
    # tile-fuse-matmul-chains needs), batch 2..4 and sequence 2..256: both Linear layers' row loops run to the
    # same bound from the call's sizes, so tile-fuse-loops makes them one nest and c_proj reads the hidden rows
    # c_fc computed in the same trip: neither bucket's program has an HBM tensor for the [rows, 128] activations
    def mlp(x, g, h, w1, b1, w2, b2):
        y = F.layer_norm(x, (32,), g, h).reshape(-1, 32)
        hidden = F.gelu(y @ w1 + b1, approximate="tanh")
        return x + (hidden @ w2 + b2).view(x.shape)

    compiled = torch.compile(
        mlp, backend="neuron-mlir", options={"strict": True, "cache": False, "debug_dir": str(tmp_path)}
    )
    torch.manual_seed(9)
    g, h = torch.randn(32) * 0.5 + 1, torch.randn(32)
    w1, b1, w2, b2 = torch.randn(32, 128) / 6, torch.randn(128), torch.randn(128, 32) / 11, torch.randn(32)
    for batch, seq in ((2, 7), (4, 60), (3, 200), (2, 130)):
        x = _marked(_marked(torch.randn(batch, seq, 32) * 3 + 1, 0, 2, 4), 1, 2, 256)
        assert_close_to_torch(compiled(x, g, h, w1, b1, w2, b2), mlp(x, g, h, w1, b1, w2, b2), f"{batch} x {seq}")
    assert _programs() == 2
    (graph,) = tmp_path.iterdir()
    programs = sorted(p for p in graph.iterdir() if p.is_dir())
    assert len(programs) == 2
    for program in programs:
        tile_ir = (program / "2_tile.mlir").read_text()
        assert "tile.matmul" in tile_ir
        assert re.search(r"memref\.alloc\(\) : memref<[0-9x]*x128xf32", tile_ir) is None, program.name


def test_key_columns_of_a_mask_run_the_calls_column_blocks():
    # transformers' mask construction over [b, 1, s, s] (sequence 2..512, upper bucket 512): the rows run the
    # call's row tiles and the key columns one tile of the call's 128-column blocks (3, then 1, of the bucket's 4),
    # so VectorE's work grows with the square of the blocks, not only with the rows. The mask folded with the
    # padded keys (`allowed & real`) writes the call's blocks only, which is what the attention reads: at 300
    # keys, keys 300 to 383 of the third block are -inf
    def attend(positions, keep, qkv):
        allowed = positions[:, None, :, None] >= positions[:, None, None, :]
        mask = torch.where(allowed & keep[:, None, None, :], 0.0, float("-inf"))
        return mask, F.scaled_dot_product_attention(qkv, qkv * 0.5, qkv + 1.0, attn_mask=mask)

    compiled = torch.compile(attend, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(7)
    vector = {}
    for seq in (300, 100):
        positions = _marked(torch.arange(seq).repeat(2, 1), 1, 2, 512)
        keep = _marked(torch.rand(2, seq) > 0.2, 1, 2, 512)
        keep[:, 0] = True  # every query sees a key
        qkv = _marked(torch.randn(2, 1, seq, 16), 2, 2, 512)
        result, _ = _call_ns(compiled, positions, keep, qkv)
        vector[seq] = sum(p.busy_ns.get("vector", 0.0) for p in stats_module.STATS.latest_profiles.values())
        assert_close_to_torch(result, attend(positions, keep, qkv), f"seq {seq}")
    assert _programs() == 1
    # one block in rows and columns against three: a ninth of the work (a third with the bucket's whole columns)
    assert 0.0 < 5 * vector[100] < vector[300]


def test_gathers_over_bucketed_dimensions_run_the_calls_rows():
    # an embedding and gathers of positions by index tensors ([b, 1, s, 1] and [b, 1, 1, s], as transformers'
    # mask code indexes position ids): their loops run the call's batches, row tiles and column tiles, so one
    # program's time follows the call
    def look_up(table, tokens, positions):
        rows = positions.shape[1]
        batch = torch.arange(tokens.shape[0])[:, None, None, None]
        queries = positions[batch, torch.arange(rows)[None, None, :, None]]
        keys = positions[batch, torch.arange(rows)[None, None, None, :]]
        return F.embedding(tokens, table), queries, keys

    compiled = torch.compile(look_up, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(6)
    table = torch.randn(96, 32)
    times = {}
    for batch, seq in ((2, 70), (2, 200), (3, 200)):
        tokens = _marked(_marked(torch.randint(0, 96, (batch, seq)), 0, 2, 3), 1, 2, 256)
        positions = _marked(_marked(torch.randint(0, 512, (batch, seq)), 0, 2, 3), 1, 2, 256)
        result, times[batch, seq] = _call_ns(compiled, table, tokens, positions)
        assert_close_to_torch(result, look_up(table, tokens, positions), f"batch {batch}, seq {seq}")
    assert _programs() == 1
    assert times[2, 70] < times[2, 200] < times[3, 200]


def test_a_linear_layer_over_merged_token_rows_runs_the_calls_rows():
    # [b, s, 64] -> [b*s, 64] rows (batch 2..3, bucket 3; sequence 2..256, upper bucket 256): the product's rows
    # loop over the call's batch and its ceil(s / 128) row tiles, so one program's work follows the call. TensorE's
    # busy time counts that work; the call's time need not grow with it one for one: the batches' copies overlap,
    # and which DMA queues a call's copies share is fixed at compile time (2 x 70 and 2 x 200 run different copies)
    def linear(x, w, b):
        h = x.reshape(-1, x.shape[-1]) @ w + b
        return torch.relu(h).view(x.shape[0], x.shape[1], -1)

    compiled = torch.compile(linear, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(4)
    w, b = torch.randn(64, 96), torch.randn(96)
    times, matmul = {}, {}
    for batch, seq in ((2, 70), (2, 200), (3, 200)):
        x = _marked(_marked(torch.randn(batch, seq, 64), 0, 2, 3), 1, 2, 256)
        result, times[batch, seq] = _call_ns(compiled, x, w, b)
        matmul[batch, seq] = sum(p.busy_ns.get("tensor", 0.0) for p in stats_module.STATS.latest_profiles.values())
        assert_close_to_torch(result, linear(x, w, b), f"batch {batch}, seq {seq}")
    assert _programs() == 1
    assert matmul[2, 70] < matmul[2, 200] < matmul[3, 200]
    assert times[2, 70] < times[3, 200]
    assert times[2, 200] < times[3, 200]


def test_masked_attention_runs_the_calls_batches_and_query_tiles():
    # batch 2..3 (bucket 3), sequence 2..256 (upper bucket 256): the attention loops over the call's batches and
    # its ceil(s / 128) query tiles, so one program's time follows the call; padded keys still see -inf
    def attend(q, k, v, allowed):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.where(allowed, 0.0, float("-inf")))

    compiled = torch.compile(attend, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(5)
    times = {}
    for batch, seq in ((2, 70), (2, 200), (3, 200)):
        q, k, v = (_marked(_marked(torch.randn(batch, 2, seq, 32), 0, 2, 3), 2, 2, 256) for _ in range(3))
        allowed = torch.ones(seq, seq, dtype=torch.bool).tril().expand(batch, 1, seq, seq).contiguous()
        allowed = _marked(_marked(_marked(allowed, 0, 2, 3), 2, 2, 256), 3, 2, 256)
        result, times[batch, seq] = _call_ns(compiled, q, k, v, allowed)
        assert_close_to_torch(result, attend(q, k, v, allowed), f"batch {batch}, seq {seq}")
    assert _programs() == 1
    assert times[2, 70] < times[2, 200] < times[3, 200]


def test_attention_over_keys_whose_padding_a_bounded_nest_left_unwritten_matches_eager():
    # the scaled keys' padded rows past the call's row tile stay unwritten (NaN in fresh memory: 100 keys of 256
    # write one row tile): a -inf score times a NaN value would be NaN, so the kernel sets padded keys and values
    # to 0 as it loads them
    def attend(q, x):
        kv = (x * 0.5).view(x.shape[0], x.shape[1], 8, 64).transpose(1, 2)
        return F.scaled_dot_product_attention(q, kv, kv + 1.0)

    compiled = torch.compile(attend, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(3)
    q = _marked(torch.randn(2, 8, 150, 64), 2, 2, 256)
    x = _marked(torch.randn(2, 100, 512), 1, 2, 256)
    assert_close_to_torch(compiled(q, x), attend(q, x))


def test_attention_over_padded_keys_and_means_over_a_padded_batch_match_eager_with_one_program():
    # no causal mask: every real query would see the padded keys if they were not masked
    def attend(q, kv):
        out = F.scaled_dot_product_attention(q, kv, kv * 0.5)
        return out.mean(0), torch.logsumexp(out, dim=2), out.amax(dim=2)

    compiled = torch.compile(attend, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(0)
    for batch, queries, keys in ((3, 5, 4), (2, 11, 12)):
        q = _marked(_marked(torch.randn(batch, 2, queries, 8), 0, 2, 4), 2, 2, 12)
        kv = _marked(_marked(torch.randn(batch, 2, keys, 8), 0, 2, 4), 2, 2, 12)
        assert_close_to_torch(compiled(q, kv), attend(q, kv), f"batch {batch}, {queries} queries, {keys} keys")
    assert _programs() == 1
    assert neuron_mlir.stats()["size_notes"] == []


def test_an_additive_mask_takes_the_key_mask_into_its_condition(monkeypatch):
    # where(allowed, 0, -inf), as transformers builds masks: the padded keys join `allowed` (a pass over booleans
    # that fuses with the mask's own) instead of a `where` over the whole float mask
    plans = _plans(monkeypatch)

    def attend(q, kv):
        positions = torch.arange(q.shape[2])
        allowed = positions[None, :] <= positions[:, None] + 2  # the last real queries would see padded keys
        mask = torch.where(allowed[None, None].expand(q.shape[0], 1, -1, -1), 0.0, float("-inf"))
        return F.scaled_dot_product_attention(q, kv, kv * 0.5, attn_mask=mask)

    compiled = torch.compile(attend, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(4)
    for batch, seq in ((3, 5), (2, 9)):
        q = _marked(_marked(torch.randn(batch, 2, seq, 8), 0, 2, 4), 2, 2, 12)
        kv = _marked(_marked(torch.randn(batch, 2, seq, 8), 0, 2, 4), 2, 2, 12)
        assert_close_to_torch(compiled(q, kv), attend(q, kv), f"batch {batch}, seq {seq}")
    assert _programs() == 1
    (plan,) = plans
    (attention,) = [n for n in plan.graph_module.graph.nodes if "attention" in str(n.target)]
    folded = attention.kwargs["attn_mask"]
    assert folded.target is torch.ops.aten.where.default or folded.target is torch.ops.aten.where.self
    assert folded.args[0].target is torch.ops.aten.bitwise_and.Tensor
    # the kernel, masked and not causal, reads the call's key blocks only: the mask writes no more than those
    assert folded.meta[KEY_BLOCKS_READ]
    assert folded.args[0].meta[KEY_BLOCKS_READ]


def test_merged_padded_dimensions_are_masked_by_each_factor():
    # [b, s, 8] -> [b*s, 8]: the mean over all tokens and the sum over s read the merged rows' real elements
    def tokens(x, w):
        rows = torch.tanh(x.reshape(-1, 8) @ w)
        per_sequence = rows.reshape(x.shape[0], x.shape[1], -1).sum(1)
        weights = torch.softmax(x.sum(2), dim=1)  # over the padded sequence
        return rows.mean(), per_sequence, weights, rows.t() @ rows  # the last contracts over the b*s rows

    compiled = torch.compile(tokens, backend="neuron-mlir", options={"strict": True, "cache": False})
    w = torch.randn(8, 4)
    torch.manual_seed(1)
    for batch, seq in ((2, 3), (3, 7), (2, 6)):
        x = _marked(_marked(torch.randn(batch, seq, 8), 0, 2, 3), 1, 2, 7)
        assert_close_to_torch(compiled(x, w), tokens(x, w), f"batch {batch}, seq {seq}")
    assert _programs() == 1


def test_sizes_used_as_numbers_read_the_calls_size():
    def scaled(x):
        return x.sum(0) / x.shape[0] + x.shape[1]

    compiled = torch.compile(scaled, backend="neuron-mlir", dynamic=True, options={"strict": True, "cache": False})
    for rows in (3, 7, 6, 12):
        x = torch.randn(rows, 5)
        assert_close_to_torch(compiled(x), scaled(x), f"{rows} rows")


def test_int64_minima_over_padded_rows_ignore_the_padding_exactly():
    # the padding rows of a minimum hold int64's largest: neither rounded to 2^63 (which wraps to the smallest
    # value and wins every minimum) nor to a neighbour of the largest, which a column of largests would return
    imax, imin = torch.iinfo(torch.int64).max, torch.iinfo(torch.int64).min

    def extremes(x):
        return x.amin(0), x.amax(0), x.min(0).values, x.argmin(0)

    compiled = torch.compile(extremes, backend="neuron-mlir", dynamic=True, options={"strict": True, "cache": False})
    for rows in (3, 7, 6, 12):
        x = torch.full((rows, 4), imax, dtype=torch.int64)
        x[rows - 1, 0] = imax - 1
        x[0, 1] = imin
        x[1, 2] = 2**62 + 1
        for index, (got, want) in enumerate(zip(compiled(x), extremes(x), strict=True)):
            assert_close_to_torch(got, want, f"{rows} rows, result {index}")
    assert _programs() <= 2


_WEIGHT = torch.randn(8, 8, generator=torch.Generator().manual_seed(3))


def _scores(x):
    h = torch.relu(x @ _WEIGHT)  # a constant weight: only the batch and the sequence are sizes that vary
    return torch.softmax(h @ h.transpose(1, 2), dim=-1).sum(1)


def test_dynamic_true_runs_sequences_of_3_to_300_with_two_programs():
    compiled = torch.compile(_scores, backend="neuron-mlir", dynamic=True, options={"strict": True, "cache": False})
    torch.manual_seed(3)
    times = {}
    for batch, seq in ((2, 5), (3, 9), (2, 40), (4, 70), (3, 300), (2, 130), (4, 3)):
        x = torch.randn(batch, seq, 8)
        result, times[batch, seq] = _call_ns(compiled, x)
        assert_close_to_torch(result, _scores(x), f"batch {batch}, seq {seq}")
    # powers of two (at least 8) took six: here the sequence up to 64 runs one program, the rest the other
    assert _programs() == 2
    assert times[2, 40] < times[2, 130]


def test_automatic_dynamic_sizes_after_a_size_change_run_two_programs():
    compiled = torch.compile(_scores, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(4)
    for batch, seq in ((2, 6), (3, 200), (2, 9), (4, 33), (3, 100)):
        x = torch.randn(batch, seq, 8)
        assert_close_to_torch(compiled(x), _scores(x), f"batch {batch}, seq {seq}")
    # the first size's static graph, then Dynamo's graph with both sizes symbolic: its 4 x 512 and 4 x 64
    # programs (powers of two took four)
    stats = neuron_mlir.stats()
    assert (stats["graphs_compiled"], stats["recompilations"]) == (2, 1), stats


def test_the_debug_directory_holds_each_bucket_programs_ir_bundle_and_trace(tmp_path):
    def scaled(x, w):
        return torch.relu(x @ w).sum(-1)

    compiled = torch.compile(scaled, backend="neuron-mlir", options={"strict": True, "debug_dir": str(tmp_path)})
    w = torch.randn(16, 8)
    for rows in (5, 40):  # range 2..64 splits at 32: one program per bucket
        x = _marked(torch.randn(rows, 16), 0, 2, 64)
        assert_close_to_torch(compiled(x, w), scaled(x, w), f"{rows} rows")
    (graph,) = tmp_path.iterdir()
    assert {"fx_graph.py", "bucketed_fx_graph.py"} <= {p.name for p in graph.iterdir()}
    programs = sorted(p for p in graph.iterdir() if p.is_dir())
    assert len(programs) == 2
    for program in programs:
        files = {p.name for p in program.iterdir()}
        assert {"0_imported.mlir", "program.bundle", "trace.json", "reproduce.sh"} <= files, files
        assert "neuron.size_arguments" in (program / "0_imported.mlir").read_text()  # read by its loops


def test_size_buckets_off_compiles_each_size_exactly():
    compiled = torch.compile(
        lambda x: x.sum(0), backend="neuron-mlir", dynamic=True, options={"size_buckets": False, "cache": False}
    )
    for rows in (3, 5):
        x = torch.randn(rows, 4)
        assert_close_to_torch(compiled(x), x.sum(0), f"{rows} rows")
    assert neuron_mlir.stats()["recompilations"] == 1


def test_a_size_outside_the_marked_range_is_traced_again_with_a_note():
    compiled = torch.compile(lambda x: x.sum(0), backend="neuron-mlir", options={"cache": False})
    x = _marked(torch.randn(4, 3), 0, 2, 8)
    assert_close_to_torch(compiled(x), x.sum(0))
    assert neuron_mlir.stats()["size_notes"] == []
    y = torch.randn(12, 3)
    assert_close_to_torch(compiled(y), y.sum(0))
    notes = neuron_mlir.stats()["size_notes"]
    assert len(notes) == 1, notes
    assert "traced again by Dynamo" in notes[0], notes
    assert "<= 8" in notes[0], notes


def test_a_graph_the_rules_cannot_prove_safe_is_compiled_per_size_with_the_reason():
    def last_token(x):
        return x[:, -1] * 2  # the last element of a padded dimension would be padding

    compiled = torch.compile(last_token, backend="neuron-mlir", dynamic=True, options={"cache": False})
    for seq in (4, 6):
        x = torch.randn(2, seq)
        assert_close_to_torch(compiled(x), last_token(x), f"seq {seq}")
    notes = neuron_mlir.stats()["size_notes"]
    assert len(notes) == 1, notes
    assert "compiled per size" in notes[0], notes[0]
    assert "aten.select.int" in notes[0], notes[0]
    assert "test_size_buckets.py" in notes[0], "the note names the user's source line"
    assert neuron_mlir.stats()["recompilations"] == 1


def test_inputs_that_shared_a_size_when_traced_must_share_it_at_each_call(monkeypatch):
    from neuron_mlir.frontend.backend import CompileOptions
    from neuron_mlir.frontend.compile_graph import NeuronCompileError, compile_graph

    captured = []

    def backend(graph_module, example_inputs):
        from torch._functorch.aot_autograd import aot_module_simplified

        def keep(gm, _):
            captured.append(gm)
            return gm

        return aot_module_simplified(graph_module, example_inputs, fw_compiler=keep)

    torch.compile(lambda x, y: (x + y).sum(0), backend=backend, dynamic=True)(torch.randn(4, 3), torch.randn(4, 3))
    program = compile_graph(captured[0], [], CompileOptions(cache=False), "inference")
    assert isinstance(program, BucketedGraph)
    sizes = [n.meta["val"] for n in captured[0].graph.nodes if n.op == "placeholder"]
    symbols = [int(v.node.hint) if isinstance(v, torch.SymInt) else None for v in sizes]
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    good = [*[s for s in symbols if s is not None], x, y]
    assert_close_to_torch(program(list(good))[0], (x + y).sum(0))
    bad = [s if s is not None else torch.randn(4 if i == len(symbols) - 1 else 5, 3) for i, s in enumerate(symbols)]
    with pytest.raises(ValueError, match=r"size s\d+ is \d and \d in the same call"):
        program(list(bad))

    # a bucket whose program does not compile (a lowering's limit the bucket's sizes exceed) runs its calls
    # with programs compiled for their own sizes
    def refuse(_args, _sizes):
        raise NeuronCompileError("neuron-mlir: compiling graph: too large at these sizes")

    monkeypatch.setattr(program.programs, "call_sized", refuse)
    x, y = torch.randn(9, 3), torch.randn(9, 3)
    bigger = [*[9 if s == 4 else s for s in symbols if s is not None], x, y]
    assert_close_to_torch(program(list(bigger))[0], (x + y).sum(0))
    assert (
        "does not compile (neuron-mlir: compiling graph: too large at these sizes)"
        in neuron_mlir.stats()["size_notes"][-1]
    )


def test_a_training_step_with_labels_beside_the_tokens_is_one_program_per_graph():
    import copy

    from torch import nn

    torch.manual_seed(2)
    model = nn.Sequential(nn.Embedding(20, 8), nn.LayerNorm(8), nn.Linear(8, 20))

    def loss_of(m, x, y):
        # next-token cross-entropy over the batch's merged tokens: a mean over both padded extents, a slice of
        # the padded sequence (whose backward writes it back into zeros: slice_scatter)
        return F.cross_entropy(m(x)[:, :-1].reshape(-1, 20), y[:, 1:].reshape(-1))

    compiled = torch.compile(loss_of, backend="neuron-mlir", options={"strict": True, "cache": False})
    # marked separately, the labels' sizes are other symbols than the tokens': taken as equal, checked per call
    for batch, seq in ((2, 5), (4, 3)):
        # sequences from 3: the slice makes Dynamo guard against 2, whose slice has 1 element
        x = _marked(_marked(torch.randint(0, 20, (batch, seq)), 0, 2, 4), 1, 3, 8)
        y = _marked(_marked(torch.randint(0, 20, (batch, seq)), 0, 2, 4), 1, 3, 8)
        ours, eager = copy.deepcopy(model), copy.deepcopy(model)
        loss = compiled(ours, x, y)
        loss.backward()
        expected = loss_of(eager, x, y)
        expected.backward()
        assert_close_to_torch(loss.detach(), expected.detach(), f"loss at {batch}x{seq}")
        for (name, p), q in zip(ours.named_parameters(), eager.parameters(), strict=True):
            assert_close_to_torch(p.grad, q.grad, f"{name}.grad at {batch}x{seq}")
    assert _programs() == 2  # the forward's and the backward's
    assert neuron_mlir.stats()["size_notes"] == []


def test_a_call_breaking_an_assumed_equality_of_sizes_runs_a_program_for_its_sizes():
    def dot(x, y):  # eager needs only equal element counts; the program takes x's extents as y's
        return (x.reshape(-1) * y.reshape(-1)).sum()

    compiled = torch.compile(dot, backend="neuron-mlir", options={"strict": True, "cache": False})
    for left, right in (((2, 3), (2, 3)), ((3, 4), (3, 4)), ((2, 6), (3, 4))):
        x = _marked(_marked(torch.randn(left), 0, 2, 4), 1, 2, 8)
        y = _marked(_marked(torch.randn(right), 0, 2, 4), 1, 2, 8)
        assert_close_to_torch(compiled(x, y), dot(x, y), f"{left} by {right}")
    notes = neuron_mlir.stats()["size_notes"]
    assert len(notes) == 1, notes
    assert "differ where the program takes them as one size" in notes[0], notes
    assert _programs() == 2  # the bucket's, then the last call's sizes


def test_a_16_bit_mean_over_a_padded_dimension_divides_in_float32():
    def pooled(x):
        return x.mean(1), x / x.shape[1]  # 333 is no bfloat16: the count stays exact

    compiled = torch.compile(pooled, backend="neuron-mlir", options={"strict": True, "cache": False})
    for length in (333, 257):
        x = _marked(torch.randn(2, length, dtype=torch.bfloat16), 1, 2, 400)
        assert_close_to_torch(compiled(x), pooled(x), f"length {length}")
    assert _programs() == 1


def test_convolutions_and_pooling_over_a_padded_batch_are_one_program():
    from torch import nn

    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2)).eval()
    compiled = torch.compile(model, backend="neuron-mlir", options={"strict": True, "cache": False})
    with torch.no_grad():
        for batch in (2, 5):
            x = _marked(torch.randn(batch, 3, 6, 6), 0, 2, 6)
            assert_close_to_torch(compiled(x), model(x), f"batch {batch}")
    assert _programs() == 1
    assert neuron_mlir.stats()["size_notes"] == []


def _plans(monkeypatch) -> list:
    plans = []
    keep = BucketedGraph.__init__

    def init(self, graph_module, plan, *rest):
        plans.append(plan)
        keep(self, graph_module, plan, *rest)

    monkeypatch.setattr(BucketedGraph, "__init__", init)
    return plans


def _wheres(plan) -> int:
    return sum(node.target is torch.ops.aten.where.self for node in plan.graph_module.graph.nodes)


def test_indices_that_are_inputs_or_aranges_of_the_bucket_need_no_padding_where(monkeypatch):
    # the host pads the tokens with zeros, and arange(s) over the bucket's s indexes a dimension of s (or a table
    # at least as long as s's range) within bounds: none of the gathers needs its padded indices set to 0
    plans = _plans(monkeypatch)

    def look_up(table, positions_table, tokens, positions):
        batch = torch.arange(positions.shape[0])[:, None, None, None]
        keys = positions[batch, (torch.arange(positions.shape[1]) + 0)[None, None, None, :]]
        embedded = F.embedding(tokens, table) + F.embedding(torch.arange(tokens.shape[1])[None], positions_table)
        return embedded, keys

    compiled = torch.compile(look_up, backend="neuron-mlir", options={"strict": True, "cache": False})
    torch.manual_seed(7)
    table, positions_table = torch.randn(96, 32), torch.randn(200, 32)
    for batch, seq in ((2, 70), (3, 130), (2, 5)):
        tokens = _marked(_marked(torch.randint(0, 96, (batch, seq)), 0, 2, 3), 1, 2, 200)
        positions = _marked(_marked(torch.randint(0, 512, (batch, seq)), 0, 2, 3), 1, 2, 200)
        result = compiled(table, positions_table, tokens, positions)
        assert_close_to_torch(result, look_up(table, positions_table, tokens, positions), f"{batch} x {seq}")
    assert _programs() == 2
    assert [_wheres(plan) for plan in plans] == [0]


def test_aranges_through_whole_slices_need_no_padding_where_under_dynamic_true(monkeypatch):
    # with symbolic sizes `[:, None]` traces as a slice from 0 to the largest int, then an unsqueeze: the
    # slice is the arange itself, and the gathers of transformers' mask code keep no `where`
    plans = _plans(monkeypatch)

    def keys_of(positions):
        batch = torch.arange(positions.shape[0])[:, None, None, None]
        return positions[batch, torch.arange(positions.shape[1])[None, None, None, :]]

    compiled = torch.compile(keys_of, backend="neuron-mlir", dynamic=True, options={"strict": True, "cache": False})
    torch.manual_seed(8)
    for batch, seq in ((2, 70), (3, 130), (2, 5)):
        positions = torch.randint(0, 512, (batch, seq))
        assert_close_to_torch(compiled(positions), keys_of(positions), f"{batch} x {seq}")
    slices = [n for n in plans[0].graph_module.graph.nodes if n.target is torch.ops.aten.slice.Tensor]
    assert slices, "the whole slice is traced"
    assert [_wheres(plan) for plan in plans] == [0]


def test_an_arange_longer_than_the_table_it_indexes_keeps_its_padding_where(monkeypatch):
    # positions up to 150 in a table of 100 rows: the bucket's padded positions would lie outside the table
    plans = _plans(monkeypatch)

    def look_up(positions_table, tokens):
        return F.embedding(torch.arange(tokens.shape[1])[None], positions_table) * tokens[..., None]

    compiled = torch.compile(look_up, backend="neuron-mlir", options={"strict": True, "cache": False})
    positions_table = torch.randn(100, 8)
    tokens = _marked(torch.randn(2, 30), 1, 2, 150)
    assert_close_to_torch(compiled(positions_table, tokens), look_up(positions_table, tokens), "2 x 30")
    assert [_wheres(plan) for plan in plans] == [1]
