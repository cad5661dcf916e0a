"""Decompositions of fused ATen kernels the core-ATen table keeps whole, into the ops they compute.

AOTAutograd applies them while it traces (`backend.decompositions()` adds them to its table), so a graph holding
one of these kernels reaches the compiler as ordinary ATen ops that lower natively instead of one node that runs
on the CPU. Each reproduces the kernel's results as eager computes them, edge cases included.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def transformer_encoder_layer_fwd(
    src: torch.Tensor,
    embed_dim: int,
    num_heads: int,
    qkv_weight: torch.Tensor,
    qkv_bias: torch.Tensor,
    proj_weight: torch.Tensor,
    proj_bias: torch.Tensor,
    use_gelu: bool,
    norm_first: bool,
    eps: float,
    norm_weight_1: torch.Tensor,
    norm_bias_1: torch.Tensor,
    norm_weight_2: torch.Tensor,
    norm_bias_2: torch.Tensor,
    ffn_weight_1: torch.Tensor,
    ffn_bias_1: torch.Tensor,
    ffn_weight_2: torch.Tensor,
    ffn_bias_2: torch.Tensor,
    mask: torch.Tensor | None = None,
    mask_type: int | None = None,
) -> torch.Tensor:
    """`aten._transformer_encoder_layer_fwd`: nn.TransformerEncoderLayer's inference fast path (eval mode, no
    gradient, batch-first input).

    Self-attention over `src` [batch, length, embed_dim] with the packed `qkv_weight`, then the feed-forward block
    (relu, or the exact gelu when `use_gelu`), each with its residual and layer norm, before (`norm_first`) or
    after. `mask` is the layer's merged mask: [batch, length] key padding (`mask_type` 1), [length, length]
    (`mask_type` 0) or one broadcasting to [batch, heads, length, length] (`mask_type` 2). The kernel reads it as
    a boolean, true (any nonzero value, whatever the dtype) masking the score out, so a row of queries with every
    key masked gives NaN, as in eager.
    """
    if src.numel() == 0:
        return src.clone()
    batch, length, _ = src.shape

    def norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    def self_attention(x: torch.Tensor) -> torch.Tensor:
        head_dim = embed_dim // num_heads
        qkv = F.linear(x, qkv_weight, qkv_bias).view(batch, length, 3, num_heads, head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each [batch, heads, length, head_dim]
        if mask is None:
            attended = F.scaled_dot_product_attention(query, key, value)
        else:
            masked = mask if mask.dtype == torch.bool else mask != 0
            if mask_type == 1:
                masked = masked.view(batch, 1, 1, length)
            scores = (query @ key.transpose(-2, -1)) * head_dim**-0.5
            weights = torch.softmax(scores.masked_fill(masked, float("-inf")), dim=-1)
            attended = weights @ value
        return F.linear(attended.transpose(1, 2).reshape(batch, length, embed_dim), proj_weight, proj_bias)

    def feed_forward(x: torch.Tensor) -> torch.Tensor:
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        hidden = F.gelu(hidden) if use_gelu else F.relu(hidden)
        return F.linear(hidden, ffn_weight_2, ffn_bias_2)

    x = src
    if norm_first:
        x = x + self_attention(norm(x, norm_weight_1, norm_bias_1))
        return x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    x = norm(x + self_attention(x), norm_weight_1, norm_bias_1)
    return norm(x + feed_forward(x), norm_weight_2, norm_bias_2)


def fused_kernel_decompositions() -> dict[object, object]:
    """The decompositions of this module, keyed by ATen overload, for AOTAutograd's table."""
    return {torch.ops.aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer_fwd}
