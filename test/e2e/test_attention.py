"""Scaled dot-product attention in inference graphs: one fused kernel (lowering/convert_torch_to_tile/attention.py)
against eager PyTorch, for causal and masked attention, ragged sizes, several key chunks, both SBUF plans, grouped
query heads and heads wider than one TensorE contraction."""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_golden
from support.compiled import check_compiled

import neuron_mlir
from neuron_mlir.lowering.convert_torch_to_tile import attention, attention_backward

pytestmark = pytest.mark.usefixtures("fresh_compiler")

FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


def _inputs(batch, heads, queries, keys, width, dtype):
    torch.manual_seed(0)
    return tuple(torch.randn(batch, heads, length, width, dtype=dtype) for length in (queries, keys, keys))


def _hbm_traffic_is_only_inputs_and_outputs():
    """No [L, S] intermediate reached HBM: the kernel moved its operands and results once."""
    [profile] = neuron_mlir.profiles().values()
    assert profile.hbm_bytes <= profile.io_bytes, (profile.hbm_bytes, profile.io_bytes)


@pytest.mark.parametrize(
    ("shape", "dtype", "causal"),
    [
        ((1, 2, 128, 128, 64), torch.float32, False),
        ((2, 3, 100, 77, 40), torch.float32, True),  # ragged: partial query tile and partial key block
        ((1, 2, 300, 700, 64), torch.float32, True),  # two key chunks, the second partial
        ((1, 1, 5, 1100, 16), torch.float32, False),  # three chunks: one in a loop, one partial
        ((1, 4, 256, 512, 64), torch.bfloat16, True),
        ((1, 2, 1, 9, 128), torch.bfloat16, False),  # one query (decoding), widest head
        # two groups of three heads, the last ending the kernel: its last trip's rows stored apart
        ((1, 6, 256, 256, 64), torch.bfloat16, True),
    ],
    ids=["square", "ragged-causal", "two-chunks-causal", "three-chunks", "bf16-causal", "one-query", "last-group"],
)
def test_attention_inference(shape: tuple[int, int, int, int, int], dtype, causal):
    inputs = _inputs(*shape, dtype)
    with torch.no_grad():
        check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), *inputs)
    _hbm_traffic_is_only_inputs_and_outputs()


@pytest.mark.parametrize(
    ("target", "transposes"),
    [("trn2", 2), ("trn1", 0)],
)
def test_bf16_attention_loads_keys_and_queries_transposed_by_dma(target: str, transposes: int):
    """On a target whose DMAs transpose 2-byte elements, K^T and Q^T of heads longer than one 128-row block load by a
    DMA transpose each (no row load, no TensorE transpose); trn1 transposes on TensorE. Both match eager."""
    inputs = _inputs(1, 1, 256, 256, 64, torch.bfloat16)
    with torch.no_grad():
        check_compiled(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), *inputs, options={"target": target}
        )
    [profile] = neuron_mlir.profiles().values()
    assert profile.opcode_counts.get("dma_transpose", 0) == transposes


@pytest.mark.parametrize(
    ("shape", "causal"),
    [
        ((1, 5, 384, 256, 32), True),  # a group of three heads, then two heads of one tile per trip
        ((2, 1, 300, 200, 48), False),  # one head per group: its tiles share trips, then the partial tile
        ((1, 4, 640, 700, 16), True),  # two key chunks in every trip
        # value as wide as a PSUM bank: the row sums come from a reduce (ATen's kernel takes Ev = E only, so the
        # keys are as wide: four contraction tiles)
        ((1, 2, 256, 512, 512), False),
    ],
    ids=["five-heads", "one-head", "four-heads-two-chunks", "widest-value"],
)
def test_attention_heads_and_tiles_share_trips(shape: tuple[int, int, int, int, int], causal):
    """Units of several heads, or several query tiles of one head, interleave in one loop trip: every
    grouping of heads and tiles (remainders included) gives the eager result."""
    q, k, v = _inputs(*shape, torch.float32)
    with torch.no_grad():
        check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("tokens", [256, 300], ids=["whole-blocks", "partial-block"])
def test_attention_of_projected_heads_loads_heads_together(tokens: int, causal: bool):
    """Heads split from one QKV projection lie beside the features in HBM ([B, L, H, E] seen as [B, H, L, E]): a
    trip's heads load in one DMA per matrix (three heads, then the remaining two one by one); rows that end in a
    partial block load head by head."""

    def attend(x, w):
        q, k, v = (x @ w).unflatten(-1, (3, 5, 32)).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    torch.manual_seed(0)
    x, w = torch.randn(1, tokens, 128, dtype=torch.bfloat16), torch.randn(128, 480, dtype=torch.bfloat16) / 12
    with torch.no_grad():
        check_compiled(attend, x, w)


@pytest.mark.parametrize(
    "shape",
    [
        (1, 2, 200, 384, 32),  # fewer queries than keys: the last tile's keys end at its block, not at S
        (1, 2, 384, 200, 32),  # more queries than keys: tiles past S see every key, with no mask at all
        (1, 3, 256, 300, 32),  # keys end in a partial block (inside the second tile's extent)
        (1, 1, 512, 512, 64),  # one head: tiles of different extents share trips
        (1, 2, 128, 128, 64),  # one query tile: only the diagonal block
        (1, 1, 1100, 1100, 16),  # tiles of one, two and three chunks in one trip, then a partial tile
    ],
    ids=["fewer-queries", "more-queries", "partial-key-block", "one-head-four-tiles", "one-tile", "three-chunks"],
)
def test_causal_attention_skips_keys_above_the_diagonal(shape: tuple[int, int, int, int, int]):
    """Causal query tiles read keys only up to their last row (top-left aligned, as PyTorch defines is_causal
    for L != S): every extent, chunk split and grouping of tiles gives the eager result."""
    q, k, v = _inputs(*shape, torch.float32)
    with torch.no_grad():
        check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)


def test_causal_attention_with_log_sum_exp_and_streamed_keys(monkeypatch):
    """Rows streamed from HBM (one unit per trip, query tiles known at compile time) and the log-sum-exp."""
    monkeypatch.setattr(attention, "body_budget_bytes", lambda em: 1024)
    q, k, v = _inputs(1, 2, 300, 700, 32, torch.float32)
    with torch.no_grad():
        check_compiled(lambda q, k, v: FLASH(q, k, v, is_causal=True), q, k, v)


def test_attention_log_sum_exp_without_mask():
    q, k, v = _inputs(1, 3, 256, 384, 32, torch.float32)
    with torch.no_grad():
        check_compiled(lambda q, k, v: FLASH(q, k, v, is_causal=True, scale=0.2), q, k, v)


def test_attention_with_additive_mask_and_scale():
    q, k, v = _inputs(2, 3, 130, 600, 32, torch.float32)
    mask = torch.randn(130, 600)
    with torch.no_grad():
        check_compiled(
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3), q, k, v, mask
        )


def test_attention_log_sum_exp_and_fully_masked_rows():
    """A row whose every key is masked gives zeros and a log-sum-exp of 0, as ATen's kernel does."""
    q, k, v = _inputs(1, 2, 40, 520, 16, torch.float32)
    mask = torch.zeros(40, 520)
    mask[3] = float("-inf")
    mask[7, 100:] = float("-inf")
    with torch.no_grad():
        [out, lse] = check_compiled(lambda q, k, v, m: FLASH(q, k, v, attn_mask=m), q, k, v, mask)
    assert torch.all(out[:, :, 3] == 0)
    assert torch.all(lse[:, :, 3] == 0)


def test_attention_streams_keys_when_they_do_not_fit(monkeypatch):
    """With a small SBUF share, keys and values are loaded and transposed per chunk: same results."""
    monkeypatch.setattr(attention, "body_budget_bytes", lambda em: 1024)
    q, k, v = _inputs(1, 2, 200, 1100, 32, torch.float32)
    with torch.no_grad():
        check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)


def test_attention_output_layout_makes_merging_heads_a_view():
    """The usual `transpose(1, 2).reshape(B, L, H * E)` after attention costs no copy."""

    def block(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)

    with torch.no_grad():
        check_compiled(block, *_inputs(2, 4, 128, 128, 32, torch.bfloat16))
    _hbm_traffic_is_only_inputs_and_outputs()


def _check_training(function, inputs, *, fused: bool, options: dict | None = None) -> None:
    """Output and input gradients of one forward and backward, compiled, against eager in the inputs' dtype and a
    float64 golden run; with `fused`, the backward graph is one kernel: no [L, S] intermediate reaches HBM."""
    torch.manual_seed(1)
    leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    grad_out = torch.randn(function(*leaves).shape).to(inputs[0].dtype)

    def run(fn, tensors):
        tensors = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in tensors]
        out = fn(*tensors)
        out.backward(grad_out.to(out.dtype))
        return [out.detach()] + [x.grad for x in tensors if x.requires_grad]

    compiled = run(torch.compile(function, backend="neuron-mlir", options=options), inputs)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        eager = run(function, inputs)
        golden = run(function, [x.double() if x.is_floating_point() else x for x in inputs])
    for name, ours, theirs, gold in zip(["output", "dq", "dk", "dv", "dmask"], compiled, eager, golden, strict=False):
        assert_close_to_golden(ours, theirs, gold, name)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    backward = [p for name, p in neuron_mlir.profiles().items() if "backward" in name]
    assert len(backward) == 1
    if fused:
        assert backward[0].hbm_bytes <= backward[0].io_bytes, (backward[0].hbm_bytes, backward[0].io_bytes)


@pytest.mark.parametrize(
    ("shape", "dtype", "causal"),
    [
        ((1, 2, 128, 128, 64), torch.float32, False),
        ((2, 3, 100, 77, 40), torch.float32, True),  # ragged: partial query tile and partial key block
        ((1, 2, 197, 197, 64), torch.bfloat16, False),  # ViT's 197 tokens: a partial tile on both axes
        ((1, 4, 256, 512, 64), torch.bfloat16, True),  # more keys than queries: the last ones get no gradient
        ((1, 2, 384, 256, 32), torch.bfloat16, True),  # more queries than keys: every key block seen
        ((1, 1, 1024, 512, 128), torch.bfloat16, True),  # the kernel's limits: 8 query tiles, 512 keys, E = 128
        ((1, 17, 128, 128, 32), torch.bfloat16, False),  # sixteen heads share a trip (MAX_TRIP_TILES), then one
        # the forward's last group of three heads stores its last trip's rows apart, its log-sum-exp whole
        ((1, 6, 256, 256, 64), torch.bfloat16, True),
    ],
    ids=[
        "square",
        "ragged-causal",
        "vit-bf16",
        "long-keys-causal-bf16",
        "long-queries-causal-bf16",
        "largest-bf16",
        "heads-share-trips-bf16",
        "last-group-causal-bf16",
    ],
)
def test_attention_training_backward_is_one_kernel(shape: tuple[int, int, int, int, int], dtype, causal):
    """Training graphs keep attention as the flash op: the forward kernel saves the log-sum-exp and the backward
    (`_scaled_dot_product_flash_attention_for_cpu_backward`) recomputes the probabilities on chip
    (lowering/convert_torch_to_tile/attention_backward.py)."""
    _check_training(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), _inputs(*shape, dtype), fused=True
    )


@pytest.mark.parametrize(
    ("shape", "dtype", "causal"),
    [
        ((1, 12, 512, 512, 64), torch.bfloat16, True),  # GPT-2's attention: six trips of two heads
        ((1, 4, 512, 512, 64), torch.float32, False),
    ],
    ids=["gpt2-causal-bf16", "512-fp32"],
)
def test_attention_backward_at_real_sizes(shape: tuple[int, int, int, int, int], dtype, causal):
    """Real sequence lengths: V loads runs of four rows per partition and its transposes go back in place, and the
    trips over the heads follow each other without a loop."""
    _check_training(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), _inputs(*shape, dtype), fused=True
    )


@pytest.mark.parametrize(("target", "dma_transposes", "tensor_transposes"), [("trn2", 4, 4), ("trn1", 0, 12)])
def test_bf16_attention_backward_loads_inputs_transposed_by_dma(target: str, dma_transposes: int, tensor_transposes):
    """On a target whose DMAs transpose 2-byte elements, the backward loads K^T, Q^T, dO^T and V^T by a DMA
    transpose per head, and TensorE makes K's, Q's and dO's rows by plain matmuls against an identity
    (`narrow_transpose`), so its only transposes per causal head of two query tiles are dS^T's three blocks and
    the log-sum-exp's; trn1 loads rows and transposes them on TensorE (K, Q, dO and V: two blocks each). Both
    match eager."""
    heads = 2
    _check_training(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        _inputs(1, heads, 256, 256, 64, torch.bfloat16),
        fused=True,
        options={"target": target},
    )
    [backward] = [p for name, p in neuron_mlir.profiles().items() if "backward" in name]
    assert backward.opcode_counts.get("dma_transpose", 0) == dma_transposes * heads
    # transpose-mode matmuls count no FLOPs (runtime.profile)
    transposes = sum(s.count for s in backward.instructions if s.opcode == "nc_matmul" and not s.flops)
    assert transposes == tensor_transposes * heads


def test_attention_backward_of_projected_heads():
    """Heads split from a projection ([B, L, H, E] seen as [B, H, L, E]): a head's rows are not contiguous, so V
    loads row by row, like the other inputs."""

    def attend(x, w):
        q, k, v = (x @ w).unflatten(-1, (3, 4, 32)).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    torch.manual_seed(0)
    x, w = torch.randn(1, 256, 128, dtype=torch.bfloat16), torch.randn(128, 384, dtype=torch.bfloat16) / 12
    _check_training(attend, (x, w), fused=False)


def test_attention_backward_trips_in_a_loop(monkeypatch):
    """Beyond UNROLLED_TRIPS the trips over the heads run as a loop: same results."""
    monkeypatch.setattr(attention_backward, "UNROLLED_TRIPS", 1)
    _check_training(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        _inputs(1, 6, 256, 256, 32, torch.bfloat16),
        fused=True,
    )


@pytest.mark.parametrize(
    ("shape", "dtype", "causal"),
    [
        ((1, 2, 1500, 1500, 64), torch.float32, False),  # whisper-small's encoder: 2 x 3 blocks
        ((1, 2, 1300, 700, 32), torch.float32, False),  # more queries than keys, partial blocks on both axes
        ((1, 3, 1100, 1100, 64), torch.bfloat16, True),  # causal: blocks of 384, the diagonal ones causal
    ],
    ids=["whisper", "ragged", "causal-bf16"],
)
def test_long_attention_backward_is_fused_by_blocks(shape: tuple[int, int, int, int, int], dtype, causal):
    """More queries or keys than the fused backward takes: one kernel per block of queries and block of keys,
    their gradients summed, never the decomposition's [L, S] matrices in HBM: the backward moves fewer bytes than
    the fp32 scores of its heads written and read once (the decomposition writes and reads four such matrices)."""
    batch, heads, queries, keys, _ = shape
    _check_training(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), _inputs(*shape, dtype), fused=False
    )
    [backward] = [p for name, p in neuron_mlir.profiles().items() if "backward" in name]
    assert backward.hbm_bytes < 2 * batch * heads * queries * keys * 4, backward.hbm_bytes


def test_attention_backward_with_mask_decomposes():
    """A mask has no fused backward: the frontend decomposes the backward into ATen ops (matmuls, exp) that
    recompute the probabilities from the log-sum-exp; the forward stays one kernel."""
    q, k, v = _inputs(1, 2, 64, 96, 16, torch.float32)
    mask = torch.randn(64, 96)
    _check_training(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), (q, k, v, mask), fused=False
    )


@pytest.mark.parametrize(
    ("shape", "causal"),
    [((1, 8, 2, 256, 256, 64), True), ((2, 6, 2, 100, 100, 32), False)],
    ids=["g4-causal", "g3-ragged"],
)
def test_grouped_query_attention_backward_is_one_kernel(shape: tuple[int, int, int, int, int, int], causal):
    """Grouped key/value heads: each key/value head's dK and dV sum the query tiles of all the query heads it
    serves, which share its K^T and V^T."""
    inputs = _grouped_inputs(*shape, torch.bfloat16)
    _check_training(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True), inputs, fused=True
    )


def test_grouped_query_attention_backward_with_mask_decomposes():
    """Grouped heads and a mask: the decomposition sums each key/value head's gradient over the query heads it
    serves."""
    q, k, v = _grouped_inputs(1, 4, 2, 64, 64, 16, torch.float32)
    mask = torch.randn(64, 64)
    _check_training(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
        (q, k, v, mask),
        fused=False,
    )


def _grouped_inputs(batch, query_heads, key_heads, queries, keys, width, dtype):
    torch.manual_seed(0)
    q = torch.randn(batch, query_heads, queries, width, dtype=dtype)
    k, v = (torch.randn(batch, key_heads, keys, width, dtype=dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize(
    ("shape", "dtype", "causal"),
    [
        ((1, 8, 4, 129, 129, 32), torch.float32, True),  # Mistral's grouping: two query heads per key head
        ((2, 6, 2, 200, 300, 64), torch.float32, False),  # three per key head: exactly one trip
        ((1, 8, 2, 300, 700, 64), torch.bfloat16, True),  # four: a trip of three heads, then one head's tiles
        ((1, 8, 1, 256, 256, 32), torch.float32, True),  # multi-query: the query heads take turns in a loop
        ((1, 4, 2, 100, 77, 40), torch.float32, True),  # fewer queries than a tile: one unit per trip
        ((1, 12, 4, 1, 600, 64), torch.bfloat16, False),  # decoding: the query heads are one head's rows
        ((2, 8, 4, 1, 129, 32), torch.float32, True),  # decoding, causal: query 0 sees key 0 only
    ],
    ids=["g2-causal", "g3", "g4-two-chunks-bf16", "multi-query", "g2-partial-tile", "decode-g3-bf16", "decode-causal"],
)
def test_grouped_query_attention(shape: tuple[int, int, int, int, int, int], dtype, causal):
    """Key/value head j serves query heads [g j, g j + g) (`enable_gqa`, as ATen's kernel reads fewer key heads):
    the kernel takes the grouped heads as they are, without repeating the keys and values."""
    inputs = _grouped_inputs(*shape, dtype)
    with torch.no_grad():
        check_compiled(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True), *inputs
        )
    _hbm_traffic_is_only_inputs_and_outputs()


def test_grouped_query_attention_with_mask_and_log_sum_exp():
    q, k, v = _grouped_inputs(2, 6, 2, 130, 600, 32, torch.float32)
    mask = torch.randn(2, 1, 130, 600)
    with torch.no_grad():
        check_compiled(lambda q, k, v, m: FLASH(q, k, v, attn_mask=m, scale=0.3), q, k, v, mask)


def test_grouped_query_decoding_with_mask_and_log_sum_exp():
    """One query per head with a per-head mask: the stacked query rows read their own heads' mask rows."""
    q, k, v = _grouped_inputs(1, 8, 2, 1, 300, 64, torch.float32)
    mask = torch.randn(1, 8, 1, 300)
    mask[0, 5, 0, 7:] = float("-inf")
    with torch.no_grad():
        check_compiled(lambda q, k, v, m: FLASH(q, k, v, attn_mask=m), q, k, v, mask)


def test_grouped_query_attention_streams_keys_when_they_do_not_fit(monkeypatch):
    """Streamed keys: each query head loads its own key/value head's chunks."""
    monkeypatch.setattr(attention, "body_budget_bytes", lambda em: 1024)
    q, k, v = _grouped_inputs(1, 6, 2, 200, 1100, 32, torch.float32)
    with torch.no_grad():
        check_compiled(lambda q, k, v: FLASH(q, k, v, is_causal=True), q, k, v)


@pytest.mark.parametrize(
    ("shape", "dtype", "causal"),
    [
        ((1, 2, 200, 300, 160), torch.float32, True),  # 128 + 32 features
        ((2, 3, 300, 700, 192), torch.bfloat16, True),  # two key chunks
        ((1, 4, 256, 256, 256), torch.bfloat16, False),  # Gemma's heads: two full contraction tiles
        ((1, 2, 1, 600, 256), torch.float32, False),  # one query
    ],
    ids=["e160-causal", "e192-two-chunks-bf16", "e256-bf16", "e256-one-query"],
)
def test_attention_heads_wider_than_one_contraction(shape: tuple[int, int, int, int, int], dtype, causal):
    """Heads of more than 128 features: Q^T and K^T in tiles of 128 features, the scores accumulated over them."""
    inputs = _inputs(*shape, dtype)
    with torch.no_grad():
        check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), *inputs)
    _hbm_traffic_is_only_inputs_and_outputs()


def test_wide_grouped_heads_with_mask_streamed(monkeypatch):
    """Wide heads, grouped, masked and streamed from HBM: every query tile transposes its own query rows in two
    feature tiles."""
    monkeypatch.setattr(attention, "body_budget_bytes", lambda em: 1024)
    q, k, v = _grouped_inputs(1, 4, 2, 140, 600, 192, torch.float32)
    mask = torch.randn(140, 600)
    with torch.no_grad():
        check_compiled(
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True), q, k, v, mask
        )


@pytest.mark.parametrize("width", [64, 128, 256])
def test_log_sum_exp_of_bf16_inputs_is_fp32_accurate(width):
    """The fp32 log-sum-exp of bf16 inputs matches ATen's (which sums unrounded exponentials), also where the scale
    1/sqrt(E) is not a power of two and early causal rows see few keys."""
    q, k, v = _inputs(1, 3, 256, 256, width, torch.bfloat16)
    with torch.no_grad():
        check_compiled(lambda q, k, v: FLASH(q, k, v, is_causal=True), q, k, v)


def test_mistral_layer_runs_grouped_attention_on_the_core(monkeypatch):
    """transformers' Mistral passes its 4 key/value heads for 8 query heads straight to SDPA (`enable_gqa`): the
    whole layer compiles to one graph, with no attention node left to the CPU."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import MistralConfig, MistralModel

    torch.manual_seed(0)
    config = MistralConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=1,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=1000,
    )
    model = MistralModel(config).eval()
    ids = torch.randint(0, 1000, (1, 129))
    with torch.no_grad():
        check_compiled(lambda ids: model(ids).last_hidden_state, ids)
    assert neuron_mlir.stats()["graphs_compiled"] == 1
