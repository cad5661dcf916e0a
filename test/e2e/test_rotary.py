"""Rotary embeddings, grouped key/value heads and the head reshapes around attention, forward and backward.

These are the ops of every RoPE/GQA decoder (Llama, Mistral, Qwen, Mixtral): the heads are a permuted view of
the projections, rotate_half slices, negates and concatenates half rows, repeat_kv expands the key/value heads
(its gradient sums over each group), and the attention output goes back to [tokens, hidden]. Their loop nests
walk permuted or half-row layouts, whose tiles gather several dimensions into the free axis.
"""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch
from support.compiled import check_compiled

import neuron_mlir


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    batch, heads, tokens, dim = x.shape
    if groups == 1:
        return x
    return x[:, :, None].expand(batch, heads, groups, tokens, dim).reshape(batch, heads * groups, tokens, dim)


def _rope_attention(heads: int, kv_heads: int, head_dim: int):
    def attend(q_in, k_in, v_in, cos, sin):
        batch, tokens, _ = q_in.shape
        q = q_in.view(batch, tokens, heads, head_dim).transpose(1, 2)
        k = k_in.view(batch, tokens, kv_heads, head_dim).transpose(1, 2)
        v = v_in.view(batch, tokens, kv_heads, head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        groups = heads // kv_heads
        out = F.scaled_dot_product_attention(q, _repeat_kv(k, groups), _repeat_kv(v, groups), is_causal=True)
        return out.transpose(1, 2).reshape(batch, tokens, heads * head_dim)

    return attend


def _rotary_tables(tokens: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(tokens, dtype=torch.float32), inverse)
    table = torch.cat((angles, angles), dim=-1)[None]
    return table.cos(), table.sin()


# (heads, key/value heads, head dim, tokens): odd head counts, head dims 64 and 128, GQA groups 1, 3, 4 and 8, and
# a token count that leaves a partial partition tile
SHAPES = [
    (3, 3, 64, 128),
    (8, 2, 128, 128),
    (8, 1, 64, 160),
    (6, 2, 64, 128),
]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("heads", "kv_heads", "head_dim", "tokens"), SHAPES, ids=lambda value: str(value))
def test_rope_gqa_attention_forward_and_backward(heads, kv_heads, head_dim, tokens):
    torch.manual_seed(0)
    fn = _rope_attention(heads, kv_heads, head_dim)
    cos, sin = _rotary_tables(tokens, head_dim)
    widths = (heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)
    inputs = [torch.randn(1, tokens, width, requires_grad=True) for width in widths]
    mirror = [x.detach().clone().requires_grad_() for x in inputs]
    out = torch.compile(fn, backend="neuron-mlir")(*inputs, cos, sin)
    expected = fn(*mirror, cos, sin)
    assert_close_to_torch(out, expected, "output")
    seed = torch.randn_like(expected)
    out.backward(seed)
    expected.backward(seed)
    for name, ours, eager in zip(("dq", "dk", "dv"), inputs, mirror, strict=True):
        assert_close_to_torch(ours.grad, eager.grad, name)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


# Nests whose last dimension strides cannot merge with the others: permuted heads (tokens x heads x dim), the
# halves of rows, and a copy of permuted heads into [tokens, hidden]
NARROW_CASES = [
    ("permuted_heads_times_table", lambda x, t: x.view(1, 256, 6, 64).transpose(1, 2) * t, [(1, 256, 384), (256, 64)]),
    ("heads_to_hidden", lambda x: x.transpose(1, 2).reshape(1, 256, 5 * 32) + 1, [(1, 5, 256, 32)]),
    ("rotate_half_rows", lambda x: _rotate_half(x) * 2, [(2, 3, 200, 64)]),
    ("half_row_sum", lambda x: x[..., :48] + x[..., 48:], [(4, 130, 96)]),
]  # fmt: skip


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "shapes"), NARROW_CASES, ids=[case[0] for case in NARROW_CASES])
def test_narrow_rows_forward_and_backward(name, fn, shapes):
    torch.manual_seed(1)
    inputs = [torch.randn(s, requires_grad=True) for s in shapes]
    mirror = [x.detach().clone().requires_grad_() for x in inputs]
    out = torch.compile(fn, backend="neuron-mlir")(*inputs)
    expected = fn(*mirror)
    assert_close_to_torch(out, expected, "forward")
    seed = torch.randn_like(expected)
    out.backward(seed)
    expected.backward(seed)
    for ours, eager in zip(inputs, mirror, strict=True):
        assert_close_to_torch(ours.grad, eager.grad, "grad")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


@pytest.mark.usefixtures("fresh_compiler")
def test_gpsimd_kernels_with_scalar_columns_on_wide_tiles():
    """The division family's [P, 1] scalar column meets a tile with several free dimensions."""
    torch.manual_seed(2)
    x = torch.randint(-50, 50, (256, 6, 64), dtype=torch.int32)
    y = torch.randn(256, 6, 64) * 10
    fn = lambda a, b: (a.transpose(0, 1) % 3, torch.div(b.transpose(0, 1), 3.0, rounding_mode="floor"))  # noqa: E731
    ours = torch.compile(fn, backend="neuron-mlir")(x, y)
    for got, want, name in zip(ours, fn(x, y), ("remainder", "floor division"), strict=True):
        assert_close_to_torch(got, want, name)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


# (heads, positions, head dim): heads times a table broadcast over them, as the rotary products of a decoder with
# its cos/sin tables. The nest's tiling is chosen by its cost: with few heads the positions go on the partitions
# and the heads join the free axis ([128, 8 x 64] and [69, 8 x 2 x 48] tiles), with many the plain rows stay
# ([32, 2048]); the position counts leave a partial tile either way.
BROADCAST_TABLE_SHAPES = [(8, 130, 64), (32, 130, 64), (8, 394, 48), (32, 394, 48)]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("heads", "positions", "head_dim"), BROADCAST_TABLE_SHAPES, ids=lambda value: str(value))
def test_heads_times_a_broadcast_table(heads, positions, head_dim):
    torch.manual_seed(3)
    x = torch.randn(heads, positions, head_dim, dtype=torch.bfloat16)
    cos, sin = (table.to(torch.bfloat16) for table in _rotary_tables(positions, head_dim))
    check_compiled(lambda x, cos, sin: (x * cos, x * cos + _rotate_half(x) * sin), x, cos, sin)
