"""Real architectures at tiny sizes, for tests and benchmarks: one builder per architecture.

    from models.zoo import MODELS          # with examples/ on sys.path
    model, inputs = MODELS["llama"]()      # a torch.nn.Module in eval mode and a tuple of example inputs

Transformer architectures come from `transformers` configs with random weights (`from_config`; nothing is
downloaded: the builders set HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE), shrunk to hidden size 32-64, 2 layers,
2-4 heads, vocabulary 64-128, sequence 8-16 and batch 2, so a forward and backward trace takes seconds. Each
builder seeds torch first, so the weights and inputs are the same on every call. The model returns a tensor or
a tuple of tensors (`return_dict=False`); the first output is the one a training loss would use.

Architectures and what each brings to the graphs:
    gpt2     learned positions, Conv1D (addmm), tanh GELU, causal SDPA attention
    llama    RMSNorm, rotary embeddings, grouped-query attention, SiLU-gated MLP
    mixtral  sparse mixture of experts: router top-k, per-expert token routing
    mamba    selective state-space model: causal depthwise conv1d, a sequential scan (the slow path on CPU)
    bert     bidirectional attention with padding mask, token types, LayerNorm, erf GELU, MLM head
    vit      patch embedding (conv2d stride = patch), CLS token, image classification head
    resnet   conv2d + BatchNorm + ReLU residual stages, max and adaptive average pooling
    cnn      a small hand-written CNN: conv2d, BatchNorm2d, max pooling, dropout, linear
    mlp      examples/mlp.py's multilayer perceptron

`without_dropout(model)` sets every dropout probability to 0, for training steps compared with eager.
examples/models/real_width.py holds the same architectures and more at the widths of published checkpoints.

`transformers` is a test dependency (`pip install -e .[test]`); it is imported inside the builders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

BATCH = 2
SEQ = 12
VOCAB = 96

ModelBuilder = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _tokens(vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(0, vocab, (BATCH, SEQ))


def _returning_first_output(model_class: type[Any]) -> type[Any]:
    """A subclass of a transformers model whose forward returns its first output (the logits) as a tensor.

    A subclass rather than a wrapper module keeps the module paths the model's own (`model.transformer.h.0`).
    """

    def forward(self, *inputs):
        return model_class.forward(self, *inputs, return_dict=False)[0]

    subclass = type(model_class.__name__, (model_class,), {"forward": forward, "__module__": __name__})
    # transformers reads the source of a model's module to decide whether it may choose the experts
    # implementation (grouped_mm by default for MoE models); this file is the subclass's module, so the subclass
    # takes its base class's answer and runs the experts as the model itself does
    if hasattr(model_class, "_can_set_experts_implementation"):
        subclass._can_set_experts_implementation_cached_value = (  # type: ignore[attr-defined]  # transformers' cache
            model_class._can_set_experts_implementation()
        )
    return subclass


def from_config(model_class: type[Any], config, **options) -> nn.Module:
    """A `model_class` with random weights from `config`, in eval mode, returning its first output as a tensor."""
    _offline()
    config.use_cache = False
    model = _returning_first_output(model_class)._from_config(config, **options)
    return model.eval()


def without_dropout(model: nn.Module) -> nn.Module:
    """`model` with every dropout probability 0 (modules, attributes and configs), so that a training step is
    deterministic and comparable with eager (the compiled program draws from the core's generator, not torch's)."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        for attribute, value in list(vars(module).items()):
            if "dropout" in attribute and isinstance(value, float):
                setattr(module, attribute, 0.0)
        config = getattr(module, "config", None)
        for attribute, value in list(vars(config).items()) if config is not None else []:
            if ("dropout" in attribute or attribute.endswith("pdrop")) and isinstance(value, float):
                setattr(config, attribute, 0.0)
    return model


def gpt2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return from_config(GPT2LMHeadModel, config, attn_implementation="sdpa"), (_tokens(),)


def llama() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    return from_config(LlamaForCausalLM, config, attn_implementation="sdpa"), (_tokens(),)


def mixtral() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=32,
    )  # fmt: skip
    return from_config(MixtralForCausalLM, config, attn_implementation="sdpa"), (_tokens(),)


def mamba() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import MambaConfig, MambaForCausalLM

    torch.manual_seed(0)
    config = MambaConfig(
        vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4,
        time_step_rank=4, use_mambapy=False,
    )  # fmt: skip
    return from_config(MambaForCausalLM, config), (_tokens(),)


def bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=32, type_vocab_size=2,
    )  # fmt: skip
    tokens = _tokens()
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 3 :] = 0  # padding at the end of the second sequence
    return from_config(BertForMaskedLM, config, attn_implementation="sdpa"), (tokens, mask)


def vit() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, num_labels=10,
    )  # fmt: skip
    model = from_config(ViTForImageClassification, config, attn_implementation="sdpa")
    return model, (torch.randn(BATCH, 3, 16, 16),)


def resnet() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    config = ResNetConfig(
        num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=10,
    )  # fmt: skip
    return from_config(ResNetForImageClassification, config), (torch.randn(BATCH, 3, 32, 32),)


class SmallCNN(nn.Module):
    """conv -> BatchNorm -> ReLU -> max pool, twice, then dropout and a linear classifier."""

    def __init__(self, channels: int = 3, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(torch.flatten(self.features(x), 1)))


def cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return SmallCNN().eval(), (torch.randn(BATCH, 3, 16, 16),)


def mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from mlp import MLP

    torch.manual_seed(0)
    return MLP((30, 40, 20, 5)).eval(), (torch.randn(BATCH * 4, 30),)


MODELS: dict[str, ModelBuilder] = {
    "gpt2": gpt2,
    "llama": llama,
    "mixtral": mixtral,
    "mamba": mamba,
    "bert": bert,
    "vit": vit,
    "resnet": resnet,
    "cnn": cnn,
    "mlp": mlp,
}
"""Every architecture of the set, by name."""
