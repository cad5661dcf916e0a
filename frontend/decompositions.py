"""Decompositions of fused ATen kernels the core-ATen table keeps whole, into the ops they compute (and of
PyTorch's custom ops of the same kind: the chunked linear cross-entropy), and of ops it leaves alone that are
simple arithmetic or a gather on real tensors (`angle`, `take`).

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
    convert-torch-to-tile refuses it (`attention_backward.kernel_refusal`: a mask, dropout, wide heads; the op is
    kept whole otherwise, and split into blocks the kernel takes where only its sequences are too long,
    `_flash_attention_backward_by_blocks`): the gradients of flash attention from its saved output
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
    blocks = kernel_refusal(query.shape, key.shape, value.shape, dropout_p, False, is_causal, lengths=False) is None
    if blocks and attn_mask is None and (not is_causal or query.shape[-2] == key.shape[-2]):
        return _flash_attention_backward_by_blocks(grad_out, query, key, value, out, logsumexp, is_causal, scale)
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


def _blocks(length: int, most: int) -> list[tuple[int, int]]:
    """[start, end) of the fewest blocks of at most `most` rows covering `length`, all but the last of one size, a
    multiple of the 128 partitions where that keeps their number."""
    count = -(-length // most)
    size = -(-length // count)
    size = min(most, -(-size // 128) * 128)
    return [(start, min(start + size, length)) for start in range(0, length, size)]


def _flash_attention_backward_by_blocks(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    logsumexp: torch.Tensor,
    is_causal: bool,
    scale: float | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The flash attention backward of more queries or keys than the fused kernel takes, as one kernel per block
    of queries and block of keys: the gradients split exactly along both. With the forward's log-sum-exp each
    block's probabilities are the whole softmax's, exp(s - lse), and rowsum(dO O) is a property of the queries
    alone; so dV and dK of a key block are the sums over the query blocks of their kernels' dV and dK, and dQ of
    a query block the sum over the key blocks of theirs (summed in fp32). Causal attention (top-left aligned, as
    many queries as keys) takes the same blocks on both axes: a block of keys after the queries' is skipped (it
    sees none of them), one before them is plain attention, and the diagonal block is causal attention of its own.
    Every [L, S] intermediate stays on chip, as in the kernel; the extra cost is the inputs read once per block of
    the other axis and the gradients' sums."""
    from neuron_mlir.lowering.convert_torch_to_tile.attention_backward import MAX_QUERY_TILES, max_keys

    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    query_step, key_step = MAX_QUERY_TILES * 128, max_keys()
    if is_causal:
        query_step = key_step = min(query_step, key_step)
    query_blocks, key_blocks = _blocks(query.shape[-2], query_step), _blocks(key.shape[-2], key_step)
    grad_keys: list[list[torch.Tensor]] = [[] for _ in key_blocks]
    grad_values: list[list[torch.Tensor]] = [[] for _ in key_blocks]
    grad_queries = []
    for q0, q1 in query_blocks:
        parts = []
        for j, (k0, k1) in enumerate(key_blocks):
            if is_causal and k0 > q0:
                continue
            grad_query, grad_key, grad_value = kernel(
                grad_out[..., q0:q1, :], query[..., q0:q1, :], key[..., k0:k1, :], value[..., k0:k1, :],
                out[..., q0:q1, :], logsumexp[..., q0:q1], 0.0, is_causal and k0 == q0, scale=scale,
            )  # fmt: skip
            parts.append(grad_query)
            grad_keys[j].append(grad_key)
            grad_values[j].append(grad_value)
        grad_queries.append(_sum_as(parts, query.dtype))
    return (
        torch.cat(grad_queries, dim=-2),
        torch.cat([_sum_as(parts, key.dtype) for parts in grad_keys], dim=-2),
        torch.cat([_sum_as(parts, value.dtype) for parts in grad_values], dim=-2),
    )


def _sum_as(parts: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """The sum of `parts` in fp32, in `dtype` (one part as it is)."""
    if len(parts) == 1:
        return parts[0].to(dtype)
    total = parts[0].float()
    for part in parts[1:]:
        total = total + part.float()
    return total.to(dtype)


def angle(x: torch.Tensor) -> torch.Tensor:
    """`aten.angle` of a real tensor: pi for negative elements, 0 otherwise, NaN for NaN (in the default float
    dtype for integers, as eager). A complex tensor keeps the op, which `frontend.complex_pairs` computes as
    atan2 of its halves."""
    if x.is_complex():
        return NotImplemented
    dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
    negative = torch.where(x < 0, math.pi, 0.0).to(dtype)
    return torch.where(torch.isnan(x), x.to(dtype), negative) if x.is_floating_point() else negative


def take(input: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`aten.take`: the elements of `input`, read as one row-major vector, at `index` (negative indices count from
    the end), in `index`'s shape. Eager checks every index against the element count before reading; here the check
    is a host-checked assertion (`torch._assert_async`: computed on the core with the gather, raised by the host
    after the call), so an index out of range still fails the call with a message naming the op. An empty input
    with indices raises as eager does, from the shapes alone."""
    count = input.numel()
    if count == 0 and index.numel() > 0:
        raise IndexError("take: cannot do a non-empty take() from an empty tensor")
    flat_index = index.reshape(-1)
    torch._assert_async(
        torch.all((flat_index >= -count) & (flat_index < count)),
        f"take: an index out of range for a tensor of {count} elements",
    )
    # clamped so that the gather of a call the assertion fails stays in bounds: the message is then the error
    wrapped = torch.where(flat_index < 0, flat_index + count, flat_index).clamp(0, max(count - 1, 0))
    return input.reshape(-1).index_select(0, wrapped).reshape(index.shape)


def _chunked_cross_entropy_terms(
    input: torch.Tensor,
    linear_weight: torch.Tensor,
    target: torch.Tensor,
    linear_bias: torch.Tensor | None,
    weight: torch.Tensor | None,
    ignore_index: int,
    acc_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits shifted by their row maximum, each row's loss -log_softmax at its target, the row's class weight
    (0 where the target is `ignore_index`), the gathered target) of the chunked linear cross-entropy, in
    `acc_dtype`, as its accumulator computes them: a target equal to an `ignore_index` outside the classes is
    read as class 0 (its weight is 0 anyway)."""
    num_classes = linear_weight.shape[0]
    logits = input.to(acc_dtype) @ linear_weight.to(acc_dtype).T
    if linear_bias is not None:
        logits = logits + linear_bias.to(acc_dtype)
    shifted = logits - logits.amax(dim=1, keepdim=True)
    ignored = target == ignore_index
    gathered = torch.where(ignored, 0, target) if not 0 <= ignore_index < num_classes else target
    target_logit = shifted.gather(1, gathered.unsqueeze(1)).squeeze(1)
    row_loss = torch.log(torch.exp(shifted).sum(dim=1)) - target_logit
    if weight is None:
        row_weight = (~ignored).to(acc_dtype)
    else:
        row_weight = torch.where(ignored, 0.0, weight.to(acc_dtype).index_select(0, gathered))
    return shifted, row_loss, row_weight, gathered


def linear_cross_entropy_batch_chunked(
    input: torch.Tensor,
    linear_weight: torch.Tensor,
    target: torch.Tensor,
    linear_bias: torch.Tensor | None,
    weight: torch.Tensor | None,
    reduction: str,
    ignore_index: int,
    label_smoothing: float,
    batch_chunk_size: int,
    acc_policy: str,
    acc_dtype: torch.dtype,
    allow_retain_graph: bool,
    compute_input_grad: bool,
    compute_linear_weight_grad: bool,
    compute_linear_bias_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`torch_nn._linear_cross_entropy_batch_chunked`, the "mean"/"sum" form of `F.linear_cross_entropy` with
    chunking options: (loss, grad_input, grad_linear_weight, grad_linear_bias), the gradients computed with the
    loss (the op's backward scales them by the upstream gradient), each an empty tensor unless asked for.

    The batch chunks only bound the eager kernel's memory; the whole batch at once computes the same sums.
    logits z = x W^T + b, loss = sum_n c_n (log sum_j exp z_nj - z_n,t_n) with c_n the target's class weight
    (0 for `ignore_index`), over sum_n c_n for "mean" (NaN when that is 0); dL/dz_n = c_n (softmax(z_n) -
    onehot(t_n)) with the same normalisation, so grad_input = dz W, grad_linear_weight = dz^T x, grad_linear_bias
    = sum_n dz_n. Label smoothing, which the op refuses, keeps it whole (ATen's error)."""
    if label_smoothing > 0.0 or reduction not in ("mean", "sum"):
        return NotImplemented
    dtype = input.dtype
    shifted, row_loss, row_weight, gathered = _chunked_cross_entropy_terms(
        input, linear_weight, target, linear_bias, weight, ignore_index, acc_dtype
    )
    if reduction == "mean":
        total = row_weight.sum()
        row_weight = row_weight / torch.where(total == 0.0, math.nan, total)
    loss = (row_weight * row_loss).sum().to(dtype)
    empty_matrix = input.new_empty((0, 0))
    grad_input, grad_linear_weight = empty_matrix, empty_matrix.to(linear_weight.device)
    grad_linear_bias = input.new_empty((0,))
    if compute_input_grad or compute_linear_weight_grad or compute_linear_bias_grad:
        num_classes = linear_weight.shape[0]
        probabilities = torch.exp(shifted) / torch.exp(shifted).sum(dim=1, keepdim=True)
        onehot = (torch.arange(num_classes, device=target.device) == gathered.unsqueeze(1)).to(shifted.dtype)
        grad_logits = row_weight.unsqueeze(1) * (probabilities - onehot)
        if compute_input_grad:
            grad_input = (grad_logits @ linear_weight.to(shifted.dtype)).to(dtype)
        if compute_linear_weight_grad:
            grad_linear_weight = (grad_logits.T @ input.to(shifted.dtype)).to(dtype)
        if compute_linear_bias_grad:
            grad_linear_bias = grad_logits.sum(dim=0).to(dtype)
    return loss, grad_input, grad_linear_weight, grad_linear_bias


def linear_cross_entropy_batch_chunked_no_reduction(
    input: torch.Tensor,
    linear_weight: torch.Tensor,
    target: torch.Tensor,
    linear_bias: torch.Tensor | None,
    weight: torch.Tensor | None,
    ignore_index: int,
    batch_chunk_size: int,
    acc_policy: str,
    acc_dtype: torch.dtype,
) -> torch.Tensor:
    """`torch_nn._linear_cross_entropy_batch_chunked_no_reduction`, the "none" form: each row's loss times its
    target's class weight (0 for `ignore_index`), in the input's dtype (its backward recomputes the gradients)."""
    _, row_loss, row_weight, _ = _chunked_cross_entropy_terms(
        input, linear_weight, target, linear_bias, weight, ignore_index, acc_dtype
    )
    return (row_weight * row_loss).to(input.dtype)


def fused_kernel_decompositions() -> dict[object, object]:
    """The decompositions of this module, keyed by ATen overload, for AOTAutograd's table."""
    return {
        torch.ops.aten.angle.default: angle,
        torch.ops.aten.take.default: take,
        torch.ops.aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer_fwd,
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default: flash_attention_backward,
        **_linear_cross_entropy_decompositions(),
    }


def _linear_cross_entropy_decompositions() -> dict[object, object]:
    """The chunked linear cross-entropy ops, where this PyTorch defines them (their module registers them when
    imported, which `F.linear_cross_entropy` does only at its first call)."""
    try:
        import torch.nn.modules.linear_cross_entropy
    except ImportError:
        return {}
    namespace = getattr(torch.ops, "torch_nn", None)
    table: dict[object, object] = {}
    for name, rule in (
        ("_linear_cross_entropy_batch_chunked", linear_cross_entropy_batch_chunked),
        ("_linear_cross_entropy_batch_chunked_no_reduction", linear_cross_entropy_batch_chunked_no_reduction),
    ):
        packet = getattr(namespace, name, None) if namespace is not None else None
        if packet is not None:
            table[packet.default] = rule
    return table
