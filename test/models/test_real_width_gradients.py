"""Training at the widths of published checkpoints: every parameter's gradient equals eager's.

The model set (examples/models/zoo.py) shrinks each architecture to hidden sizes of 32-64, where a matmul has one
K tile and a weight gradient sums a few dozen rows. These cases keep the real widths, with random weights and few
layers: BERT-base (hidden 768 in 12 heads, intermediate 3072), ViT-B/16 at 224x224 (197 tokens) and one
Llama-3.2-1B decoder layer (hidden 2048, 32 query and 8 key-value heads, intermediate 8192, rotary positions), so
that forward and backward run matmuls over many K tiles and PSUM banks, with transposed operands, and weight and
bias gradients summed over several row tiles of batch x sequence.

The loss is the sum of the output times a fixed random tensor, never the mean square of the output. BertModel and
ViTModel end in a layer norm, LlamaModel in an RMSNorm, each with weight 1 and bias 0 when initialized, and for y =
layer_norm(x) the sum of y^2 over a row is n * var / (var + eps), independent of x up to eps / var (eps is 1e-12 for
BERT and ViT, 1e-6 for Llama). The mean square of such an output gives every parameter before that norm a gradient
that is zero, or nearly, in exact arithmetic: what eager and the compiled program return instead is rounding noise,
each its own, and no comparison of the two can find or rule out a miscompile. (For two BERT-base layers 35 of 37
gradients then differ from eager's by about twice their size, and eager's own differ from float64 eager's by some
5e4 times their size.) A projection gives every parameter a gradient of its own, and the sum, unlike a mean, keeps
the gradients large (0.7 and above here), so the fp32 tolerance, whose absolute part is scaled by a gradient's
largest element but never below 1, is close to relative for each of them. The one gradient that stays zero in exact
arithmetic, the key projection's bias (it adds q.b to every score of a query, which softmax ignores), is then
compared within the absolute part, as noise should be.
"""

import copy

import pytest
import torch
from support import assert_close_to_torch

import neuron_mlir


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _bert_base(layers: int, batch: int, seq: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=512, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12, intermediate_size=3072,
        max_position_embeddings=seq, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    model = BertModel._from_config(config, attn_implementation="sdpa", add_pooling_layer=False)
    return model, (torch.randint(0, config.vocab_size, (batch, seq)),)


def _vit_b16(layers: int, batch: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(
        image_size=224, patch_size=16, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12,
        intermediate_size=3072, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    model = ViTModel._from_config(config, attn_implementation="sdpa", add_pooling_layer=False)
    return model, (torch.randn(batch, 3, 224, 224),)


class _LlamaDecoderLayer(torch.nn.Module):
    """One decoder layer with its rotary embedding, as LlamaModel calls it (causal attention, positions 0..s-1)."""

    def __init__(self, config):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(config)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(hidden.shape[1]).unsqueeze(0)
        output = self.layer(hidden, position_ids=positions, position_embeddings=self.rotary(hidden, positions))
        return output[0] if isinstance(output, tuple) else output


def _llama_1b_layer(batch: int, seq: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        num_hidden_layers=1, max_position_embeddings=seq, rope_theta=500000.0,
    )  # fmt: skip
    config._attn_implementation = "sdpa"
    return _LlamaDecoderLayer(config), (torch.randn(batch, seq, config.hidden_size),)


def _output(result) -> torch.Tensor:
    if hasattr(result, "last_hidden_state"):
        return result.last_hidden_state
    return result[0] if isinstance(result, tuple | list) else result


def _check_gradients(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], what: str) -> None:
    model.train()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="neuron-mlir", options={"strict": True})
    projection = None
    for run in (reference, compiled):
        output = _output(run(*inputs))
        if projection is None:
            projection = torch.randn(output.shape, generator=torch.Generator().manual_seed(1))
        (output * projection).sum().backward()
    for (label, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert q.grad is not None, f"{what}: {label} has no gradient in eager"
        assert_close_to_torch(p.grad, q.grad, f"{what} grad of {label}")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0
    assert stats["graphs_compiled"] >= 2  # forward and backward


@pytest.mark.usefixtures("fresh_compiler")
def test_bert_base_width_gradients_match_eager():
    _check_gradients(*_bert_base(layers=1, batch=2, seq=128), "BERT-base width")


# The cases below take 45-70 s each on one core: slow, run with `-m slow`.
@pytest.mark.slow
@pytest.mark.usefixtures("fresh_compiler")
def test_bert_base_two_layers_gradients_match_eager():
    _check_gradients(*_bert_base(layers=2, batch=4, seq=128), "BERT-base, 2 layers")


@pytest.mark.slow
@pytest.mark.usefixtures("fresh_compiler")
def test_vit_b16_gradients_match_eager():
    _check_gradients(*_vit_b16(layers=2, batch=2), "ViT-B/16, 2 layers")


@pytest.mark.slow
@pytest.mark.usefixtures("fresh_compiler")
def test_llama_1b_decoder_layer_gradients_match_eager():
    _check_gradients(*_llama_1b_layer(batch=1, seq=256), "Llama-3.2-1B decoder layer")
