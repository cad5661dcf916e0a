"""Decompositions of fused ATen kernels the core-ATen table keeps whole, into the ops they compute, and of ops
it leaves alone that are simple arithmetic on real tensors (`angle`).

AOTAutograd applies them while it traces (`backend.decompositions()` adds them to its table), so a graph holding
one of these kernels reaches the compiler as ordinary ATen ops that lower natively instead of one node that runs
on the CPU. Each reproduces the kernel's results as eager computes them, edge cases included.
"""

from __future__ import annotations

import math

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


def flash_attention_backward(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    logsumexp: torch.Tensor,
    dropout_p: float,
    is_causal: bool,
    *,
    attn_mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten._scaled_dot_product_flash_attention_for_cpu_backward`, where the fused backward kernel of
    convert-torch-to-tile refuses it (`attention_backward.kernel_refusal`: a mask, dropout, wide heads, long
    sequences; the op is kept whole otherwise): the gradients of flash attention from its saved output
    and log-sum-exp, as ATen's kernel computes them (fp32 accumulation, results in the inputs' dtype).

    The probabilities are recomputed from the scores and the log-sum-exp (P = exp(s - lse)) rather than saved by
    the forward, which thus stays one fused kernel; then dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)),
    dQ = dS K scale and dK = dS^T Q scale. Grouped-query heads (fewer key/value heads than query heads, head j
    serving query heads [g j, g j + g)) get the sum of their query heads' gradients. Causal masking is top-left
    aligned (query i sees keys j <= i), as in the forward kernel. Dropout has no backward here: the forward never
    traces the flash kernel with it (`attention_backends`).
    """
    from neuron_mlir.lowering.convert_torch_to_tile.attention_backward import kernel_refusal

    refusal = kernel_refusal(query.shape, key.shape, value.shape, dropout_p, attn_mask is not None, is_causal)
    if refusal is None or not query.is_floating_point():
        return NotImplemented  # kept whole: convert-torch-to-tile lowers it as one fused kernel
    if dropout_p != 0.0:
        raise NotImplementedError("flash attention backward with dropout")
    dtype = query.dtype
    q, k, v, d_out, o = (t.float() for t in (query, key, value, grad_out, out))
    groups = q.shape[-3] // k.shape[-3]
    if groups != 1:
        k, v = (t.repeat_interleave(groups, dim=-3) for t in (k, v))
    factor = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * factor
    if attn_mask is not None:
        scores = scores + attn_mask.float()
    if is_causal:
        length, keys = scores.shape[-2:]
        visible = torch.ones(length, keys, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~visible, float("-inf"))
    probabilities = torch.exp(scores - logsumexp.float().unsqueeze(-1))
    grad_value = probabilities.transpose(-2, -1) @ d_out
    grad_probabilities = d_out @ v.transpose(-2, -1)
    row_dot = (d_out * o).sum(-1, keepdim=True)
    grad_scores = probabilities * (grad_probabilities - row_dot) * factor
    grad_query = grad_scores @ k
    grad_key = grad_scores.transpose(-2, -1) @ q
    if groups != 1:
        unflat = (*grad_key.shape[:-3], grad_key.shape[-3] // groups, groups, *grad_key.shape[-2:])
        grad_key = grad_key.reshape(unflat).sum(-3)
        grad_value = grad_value.reshape(unflat).sum(-3)
    return grad_query.to(dtype), grad_key.to(key.dtype), grad_value.to(value.dtype)


def angle(x: torch.Tensor) -> torch.Tensor:
    """`aten.angle` of a real tensor: pi for negative elements, 0 otherwise, NaN for NaN (in the default float
    dtype for integers, as eager). A complex tensor keeps the op, which `frontend.complex_pairs` computes as
    atan2 of its halves."""
    if x.is_complex():
        return NotImplemented
    dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
    negative = torch.where(x < 0, math.pi, 0.0).to(dtype)
    return torch.where(torch.isnan(x), x.to(dtype), negative) if x.is_floating_point() else negative


def fused_kernel_decompositions() -> dict[object, object]:
    """The decompositions of this module, keyed by ATen overload, for AOTAutograd's table."""
    return {
        torch.ops.aten.angle.default: angle,
        torch.ops.aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer_fwd,
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default: flash_attention_backward,
    }
