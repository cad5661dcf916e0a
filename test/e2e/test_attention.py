"""Scaled dot-product attention in inference graphs: one fused kernel (lowering/convert_torch_to_tile/attention.py)
against eager PyTorch, for causal and masked attention, ragged sizes, several key chunks and both SBUF plans."""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch
from support.compiled import check_compiled

import neuron_mlir
from neuron_mlir.lowering.convert_torch_to_tile import attention

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
    ],
    ids=["square", "ragged-causal", "two-chunks-causal", "three-chunks", "bf16-causal", "one-query"],
)
def test_attention_inference(shape, dtype, causal):
    inputs = _inputs(*shape, dtype)
    with torch.no_grad():
        check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), *inputs)
    _hbm_traffic_is_only_inputs_and_outputs()


@pytest.mark.parametrize(
    ("shape", "causal"),
    [
        ((1, 5, 384, 256, 32), True),  # a group of three heads, then two heads of one tile per trip
        ((2, 1, 300, 200, 48), False),  # one head per group: its tiles share trips, then the partial tile
        ((1, 4, 640, 700, 16), True),  # two key chunks in every trip
        ((1, 2, 256, 512, 512), False),  # value as wide as a PSUM bank: the row sums come from a reduce
    ],
    ids=["five-heads", "one-head", "four-heads-two-chunks", "widest-value"],
)
def test_attention_heads_and_tiles_share_trips(shape, causal):
    """Units of several heads, or several query tiles of one head, interleave in one loop trip: every
    grouping of heads and tiles (remainders included) gives the eager result."""
    batch, heads, queries, keys, width = shape
    torch.manual_seed(0)
    q, k = (torch.randn(batch, heads, length, min(width, 128)) for length in (queries, keys))
    v = torch.randn(batch, heads, keys, width)
    with torch.no_grad():
        check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v)


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
def test_causal_attention_skips_keys_above_the_diagonal(shape):
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


def test_training_graphs_keep_the_math_path():
    """Gradients flow through plain ATen ops (the flash kernel's backward is not lowered)."""
    q, k, v = (x.requires_grad_() for x in _inputs(1, 2, 64, 64, 16, torch.float32))
    eager = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    eager.sum().backward()
    expected = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    compiled = torch.compile(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), backend="neuron-mlir"
    )
    out = compiled(q, k, v)
    out.sum().backward()
    assert_close_to_torch(out.detach(), eager.detach(), "output")
    for name, x, want in zip("qkv", (q, k, v), expected, strict=True):
        assert_close_to_torch(x.grad, want, f"gradient of {name}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
