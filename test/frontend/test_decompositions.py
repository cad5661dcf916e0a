"""Fused kernels the frontend decomposes: the same results as eager's kernel, and graphs without CPU fallback."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch
import torch.nn.functional as F
import torch.nn.modules.linear_cross_entropy  # registers the chunked ops in torch.ops.torch_nn
from support import assert_close_to_torch
from support.compiled import check_compiled
from torch import nn

import neuron_mlir
from neuron_mlir.frontend.decompositions import (
    linear_cross_entropy_batch_chunked,
    linear_cross_entropy_batch_chunked_no_reduction,
    take,
    transformer_encoder_layer_fwd,
)

pytestmark = pytest.mark.usefixtures("fresh_compiler")

BATCH, LENGTH = 2, 5
PADDING = torch.tensor([[0.0, 0.0, 0.0, 0.0, float("-inf")], [0.0, 0.0, 0.0, float("-inf"), float("-inf")]])
CAUSAL = torch.triu(torch.full((LENGTH, LENGTH), float("-inf")), diagonal=1)
# (mask, mask_type) as nn.MultiheadAttention.merge_masks hands them over, and the kernel's reading of a float mask
# as a boolean (nonzero masks out, whatever the value), a row with every key masked included
MASKS = {
    "none": (None, None),
    "key_padding": (PADDING, 1),
    "key_padding_bool": (PADDING != 0, 1),
    "key_padding_finite_values": (torch.tensor([[0.0, 0.0, 0.0, 0.0, -1.5], [0.0, 0.0, 0.0, 2.0, 0.0]]), 1),
    "attention_2d": (CAUSAL, 0),
    "merged_4d": (CAUSAL.expand(BATCH, 4, LENGTH, LENGTH) + PADDING.view(BATCH, 1, 1, LENGTH), 2),
    "every_key_masked": (torch.tensor([[0.0] * LENGTH, [1.0] * LENGTH]), 1),
}


# src, embed_dim, num_heads, the attention's weights and biases, use_gelu, norm_first, eps, the two norms' weights
# and biases, the feed-forward's
LayerArguments = tuple[
    torch.Tensor, int, int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, bool, bool, float,
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
]  # fmt: skip


def _layer_arguments(embed_dim: int, heads: int, use_gelu: bool, norm_first: bool) -> LayerArguments:
    torch.manual_seed(0)
    hidden = 24

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape) * 0.3

    return (
        torch.randn(BATCH, LENGTH, embed_dim), embed_dim, heads,
        weight(3 * embed_dim, embed_dim), weight(3 * embed_dim), weight(embed_dim, embed_dim), weight(embed_dim),
        use_gelu, norm_first, 1e-5,
        torch.randn(embed_dim), torch.randn(embed_dim), torch.randn(embed_dim), torch.randn(embed_dim),
        weight(hidden, embed_dim), weight(hidden), weight(embed_dim, hidden), weight(embed_dim),
    )  # fmt: skip


@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize(("use_gelu", "norm_first"), [(False, False), (True, True)])
@pytest.mark.parametrize(("embed_dim", "heads"), [(16, 2), (12, 4)])
def test_transformer_encoder_layer_decomposition_matches_the_kernel(
    mask_name: str, use_gelu: bool, norm_first: bool, embed_dim: int, heads: int
) -> None:
    mask, mask_type = MASKS[mask_name]
    if mask is not None and mask.dim() == 4:
        mask = mask[:, :heads]
    arguments = _layer_arguments(embed_dim, heads, use_gelu, norm_first)
    with torch.no_grad():
        expected = torch._transformer_encoder_layer_fwd(*arguments, mask, mask_type)
        actual = transformer_encoder_layer_fwd(*arguments, mask, mask_type)
    assert_close_to_torch(actual, expected)
    assert torch.equal(actual.isnan(), expected.isnan())


def _encoder(**layer_options) -> nn.TransformerEncoder:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True, **layer_options)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()


@pytest.mark.parametrize(
    ("layer_options", "call_options"),
    [
        ({}, {}),
        ({"norm_first": True, "activation": "gelu"}, {}),
        ({}, {"src_key_padding_mask": torch.tensor([[False] * 7, [False] * 5 + [True] * 2])}),
        ({}, {"mask": nn.Transformer.generate_square_subsequent_mask(7), "is_causal": True}),
    ],
    ids=["post_norm_relu", "pre_norm_gelu", "key_padding_mask", "causal_mask"],
)
def test_transformer_encoder_in_inference_compiles_without_fallback(layer_options: dict, call_options: dict) -> None:
    model = _encoder(**layer_options)
    x = torch.randn(2, 7, 32)
    # eval and no_grad: nn.TransformerEncoderLayer takes its fast path, one _transformer_encoder_layer_fwd per layer
    with torch.no_grad():
        check_compiled(lambda source: model(source, **call_options), x)


def test_angle_of_real_values_compiles_without_fallback() -> None:
    floats = torch.tensor([-1.5, 0.0, -0.0, 2.0, float("nan"), float("-inf"), float("inf")])
    integers = torch.tensor([-3, 0, 4], dtype=torch.int64)
    check_compiled(lambda x, i: (torch.angle(x), torch.angle(i)), floats, integers)


# Chunked linear cross-entropy (`F.linear_cross_entropy` with options): its two custom ops, against their kernels
LINEAR_CROSS_ENTROPY_OPTIONS = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=3, allow_retain_graph=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 2, 9], ids=["none_ignored", "in_range", "out_of_range"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("with_weight", [False, True], ids=["unweighted", "weighted"])
def test_chunked_linear_cross_entropy_decompositions_match_the_kernels(
    reduction: str, ignore_index: int, with_bias: bool, with_weight: bool
) -> None:
    generator = torch.Generator().manual_seed(0)
    x, linear_weight = torch.randn(8, 5, generator=generator), torch.randn(6, 5, generator=generator)
    bias = torch.randn(6, generator=generator) if with_bias else None
    weight = torch.rand(6, generator=generator) if with_weight else None
    target = torch.tensor([0, 2, 5, 2, 1, 3, 4, 2])
    ops = torch.ops.torch_nn
    if reduction == "none":
        arguments = (x, linear_weight, target, bias, weight, ignore_index, 3, "fp32", torch.float32)
        expected = ops._linear_cross_entropy_batch_chunked_no_reduction(*arguments)
        assert_close_to_torch(linear_cross_entropy_batch_chunked_no_reduction(*arguments), expected)
        return
    flags = (True, True, True, with_bias)
    arguments = (x, linear_weight, target, bias, weight, reduction, ignore_index, 0.0, 3, "fp32", torch.float32, *flags)
    expected = ops._linear_cross_entropy_batch_chunked(*arguments)
    assert_close_to_torch(list(linear_cross_entropy_batch_chunked(*arguments)), list(expected))


def test_chunked_linear_cross_entropy_trains_without_fallback() -> None:
    generator = torch.Generator().manual_seed(0)
    x, linear_weight = torch.randn(8, 5, generator=generator), torch.randn(6, 5, generator=generator)
    bias = torch.randn(6, generator=generator)
    target = torch.tensor([0, 2, 5, 2, 1, 3, 4, 2])

    def loss(x: torch.Tensor, linear_weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        options = LINEAR_CROSS_ENTROPY_OPTIONS
        mean = F.linear_cross_entropy(x, linear_weight, target, linear_bias=bias, ignore_index=2, options=options)
        rows = F.linear_cross_entropy(x, linear_weight, target, reduction="none", options=options)
        return mean + (rows * torch.arange(8.0)).sum()

    def gradients(function: Callable[..., torch.Tensor]) -> list[torch.Tensor]:
        leaves = [tensor.clone().requires_grad_() for tensor in (x, linear_weight, bias)]
        value = function(*leaves)
        value.backward()
        return [value.detach(), *(cast(torch.Tensor, leaf.grad) for leaf in leaves)]

    expected = gradients(loss)
    actual = gradients(torch.compile(loss, backend="neuron-mlir"))
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, f"fell back to the CPU: {stats['fallback_ops']}"
    assert_close_to_torch(actual, expected)


def test_take_compiles_without_fallback_and_refuses_indices_out_of_range() -> None:
    x = torch.randn(3, 4)
    index = torch.tensor([[0, -1, 5], [11, -12, 3]])
    compiled = torch.compile(torch.take, backend="neuron-mlir")
    assert torch.equal(compiled(x, index), torch.take(x, index))
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, f"fell back to the CPU: {stats['fallback_ops']}"
    with pytest.raises(RuntimeError, match="take: an index out of range for a tensor of 12 elements"):
        compiled(x, index + 1)
    with pytest.raises(IndexError, match="non-empty take"):
        take(torch.empty(0), torch.tensor([0]))
