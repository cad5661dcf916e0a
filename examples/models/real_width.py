"""Real architectures at the widths of published checkpoints, for tests and `make models`: one builder per model.

    from models.real_width import REAL_WIDTH_MODELS   # with examples/ on sys.path
    model, inputs = REAL_WIDTH_MODELS["bert-base"]()  # a torch.nn.Module in eval mode and a tuple of inputs

The conventions are examples/models/zoo.py's: `transformers` configs with random weights (nothing is downloaded),
torch seeded first so every call builds the same weights and inputs, and a model that returns its first output
(logits, or the encoder's last hidden state) as a tensor. What is real: hidden sizes, head counts and head widths,
feed-forward widths, vocabularies, image and audio sizes, batch and sequence lengths of a typical fine-tuning
step. What is cut: the number of layers (one or two: every layer of a stack is the same graph, so more layers
add simulator time and nothing new to compile), the depth of convolutional stages, and where noted a vocabulary or
the width of the experts: the tests' check of a training step holds the model in float64 and the gradients of
three runs, about six times the parameters' fp32 bytes, next to the simulator's own memory.

    bert-base        BERT-base: hidden 768, 12 heads, FFN 3072, 2 layers, vocabulary 30522, MLM head; 4 x 128
                     tokens with padding
    gpt2-small       GPT-2 small: 768, 12 heads, 2 layers, vocabulary 50257, LM head; 2 x 256 tokens
    llama-1b-layer   one Llama-3.2-1B decoder layer: hidden 2048, 32 query and 8 key-value heads of 64, SwiGLU
                     8192, RoPE theta 500000, tied embedding and LM head; 1 x 256 tokens. The vocabulary is
                     Llama 2's 32000, not Llama 3's 128256: at 128256 the tied embedding alone is 263M parameters,
                     eager's own training step peaks at 5.2 GB and the float64 check would need about 8 GB more
    vit-b16          ViT-B/16 at 224 x 224 (197 tokens): 768, 12 heads, FFN 3072, 2 layers (`layers=`), 1000
                     classes; batch 2
    resnet50         ResNet-50's bottleneck stages (64-wide stem, 256/512/1024/2048 channels, 1000 classes), one
                     block per stage instead of 3/4/6/3; batch 2 at 224 x 224
    convnext-t       ConvNeXt-T's stages (96/192/384/768 channels, 7 x 7 depthwise convolutions, layer norms,
                     4 x 4 patchify stem), one block per stage instead of 3/3/9/3; batch 2 at 224 x 224
    whisper-small    Whisper-small's encoder: two 1-d convolutions over 80 mel bins of 30 s (3000 frames), then
                     1500 positions of hidden 768, 12 heads, FFN 3072; 2 layers; batch 1
    mixtral          a Mixtral-style sparse decoder: hidden 4096, 32 query and 8 key-value heads of 128, 8 experts
                     of which 2 per token; 1 layer; 1 x 128 tokens. Cut: the experts from 14336 to 1024 wide (at
                     14336 they are 1.4G parameters) and the vocabulary from 32000 to 8192 (the untied embedding
                     and LM head would be 262M parameters: 405M in all, 9.7 GB for the float64 check)

`transformers` is a test dependency (`pip install -e .[test]`); it is imported inside the builders.
"""

from __future__ import annotations

import torch
from torch import nn

from .zoo import ModelBuilder, from_config


def _tokens(vocab: int, batch: int, seq: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq))


def bert_base() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    batch, seq = 4, 128
    config = BertConfig(
        vocab_size=30522, hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072,
        max_position_embeddings=512, type_vocab_size=2,
    )  # fmt: skip
    tokens = _tokens(config.vocab_size, batch, seq)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, seq - 40 :] = 0  # padding at the end of two of the sequences
    mask[3, seq - 7 :] = 0
    return from_config(BertForMaskedLM, config, attn_implementation="sdpa"), (tokens, mask)


def gpt2_small() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=2, n_head=12)
    return from_config(GPT2LMHeadModel, config, attn_implementation="sdpa"), (_tokens(config.vocab_size, 2, 256),)


def llama_1b_layer() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=1, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, max_position_embeddings=8192, rope_theta=500000.0,
        tie_word_embeddings=True, rms_norm_eps=1e-5,
    )  # fmt: skip
    return from_config(LlamaForCausalLM, config, attn_implementation="sdpa"), (_tokens(config.vocab_size, 1, 256),)


def vit_b16(layers: int = 2) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(
        image_size=224, patch_size=16, num_channels=3, hidden_size=768, num_hidden_layers=layers,
        num_attention_heads=12, intermediate_size=3072, num_labels=1000,
    )  # fmt: skip
    model = from_config(ViTForImageClassification, config, attn_implementation="sdpa")
    return model, (torch.randn(2, 3, 224, 224),)


def resnet50() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    config = ResNetConfig(
        num_channels=3, embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[1, 1, 1, 1],
        layer_type="bottleneck", hidden_act="relu", num_labels=1000,
    )  # fmt: skip
    return from_config(ResNetForImageClassification, config), (torch.randn(2, 3, 224, 224),)


def convnext_t() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import ConvNextConfig, ConvNextForImageClassification

    torch.manual_seed(0)
    # A layer scale of 1e-6 (the initialisation for training from scratch) would leave each block's branch a
    # millionth of its residual, so the output would show nothing the blocks compute: trained ConvNeXt-T layer
    # scales are of order 0.1-1.
    config = ConvNextConfig(
        num_channels=3, patch_size=4, hidden_sizes=[96, 192, 384, 768], depths=[1, 1, 1, 1], hidden_act="gelu",
        layer_scale_init_value=0.5, image_size=224, num_labels=1000,
    )  # fmt: skip
    return from_config(ConvNextForImageClassification, config), (torch.randn(2, 3, 224, 224),)


def whisper_small_encoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    config = WhisperConfig(
        num_mel_bins=80, d_model=768, encoder_layers=2, encoder_attention_heads=12, encoder_ffn_dim=3072,
        decoder_layers=2, decoder_attention_heads=12, decoder_ffn_dim=3072, max_source_positions=1500,
        encoder_layerdrop=0.0,
    )  # fmt: skip
    model = from_config(WhisperEncoder, config, attn_implementation="sdpa")
    return model, (torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions),)


def mixtral() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=8192, hidden_size=4096, intermediate_size=1024, num_hidden_layers=1, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, num_local_experts=8, num_experts_per_tok=2,
        max_position_embeddings=4096, rope_theta=1e6,
    )  # fmt: skip
    model = from_config(MixtralForCausalLM, config, attn_implementation="sdpa")
    # the experts loop over the experts hit, as before transformers' grouped experts compiled whole: the golden
    # float64 run of the tests cannot use torch's grouped matmul (no float64 kernel on the CPU), and the grouped
    # path at this width is not measured yet
    model.set_experts_implementation("eager")  # type: ignore[operator]  # a transformers model's method
    return model, (_tokens(config.vocab_size, 1, 128),)


REAL_WIDTH_MODELS: dict[str, ModelBuilder] = {
    "bert-base": bert_base,
    "gpt2-small": gpt2_small,
    "llama-1b-layer": llama_1b_layer,
    "vit-b16": vit_b16,
    "resnet50": resnet50,
    "convnext-t": convnext_t,
    "whisper-small": whisper_small_encoder,
    "mixtral": mixtral,
}
"""Every model of the real-width set, by name."""
