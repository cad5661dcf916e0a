"""Every model class of transformers, tiny and with random weights, through the backend against eager.

    python -m neuron_mlir.tools.model_sweep                      # every class -> docs/models.md's sweep section
    python -m neuron_mlir.tools.model_sweep --only 'llama*'      # classes whose name or model type matches
    python -m neuron_mlir.tools.model_sweep --list               # the classes, without running them
    make model-sweep

The classes are enumerated from transformers' auto mappings (`MODEL_MAPPING_NAMES`, `MODEL_FOR_CAUSAL_LM_...`,
every `MODEL_*_MAPPING_NAMES` of `transformers.models.auto.modeling_auto`), one row per class. Each is built
offline (HF_HUB_OFFLINE; nothing is downloaded, `from_pretrained` is never called) from its configuration class's
defaults, shrunk by `shrink_config`: width 32, 2 heads, 2 layers, vocabulary 128, 32-pixel images (128 for models
with batch norm, `BATCH_NORM_IMAGE`), short audio,
dropout, stochastic depth and random augmentations off. Its inputs are made from the model's main input name and
the required arguments of its `forward` (`make_inputs`). Then, in a process of its own per class (`--timeout` in
CPU seconds, `--memory-gib` as an address-space limit, both set by `resource.setrlimit`), forked from a server that
imported torch, transformers and the compiler once:

1. eager: a forward under `torch.no_grad()`, and a training step: forward, the loss sum(output * R) over the
   first floating output with a fixed random R, backward;
2. the same two through `torch.compile(model, backend="aot_eager")`: the ceiling, what Dynamo and AOTAutograd
   can capture of the model at all;
3. the same two through `torch.compile(model, backend="neuron-mlir", options={"fallback_random": True})`
   (`COMPILE_OPTIONS`): random ops the model still draws (Gumbel-softmax quantizers sample in training) are drawn
   on the host by torch, so eager's numbers are the compiled run's, as in Inductor's accuracy runs.

Outputs and parameter gradients are compared with eager within the tolerance of their dtype
(`ir/semantics/compare.py`); where that comparison fails, against a float64 run of the same step
(`golden_mismatch`: at most a small multiple of eager's own error, measured also on copies of the model whose
parameters moved by about one unit in float32's last place, where a result turns out to be that sensitive to
rounding). A class is **native** when both steps match
and no node ran on the CPU, **fallback** when they match but some nodes did (the ops are listed), **failing**
otherwise (the first line of the error, a mismatch, a timeout or the memory limit).

Results are cached per class in `--cache` (build/model-sweep/), written as each backend finishes, so an
interrupted sweep continues where it stopped; a cached result counts when it was computed by the current sources
(a fingerprint of the compiler's packages and this file), or always with `--reuse-stale`. The server imports a
copy of the packages taken when the sweep starts, so edits to the checkout during a long run change nothing.
A whole sweep takes hours of CPU, more than a machine's cache may live: `--results` keeps a record of every
class's result (docs/model-sweep.jsonl, with the commit and fingerprint that produced it), read into the cache
where it has nothing and rewritten after each run, so a sweep continues on another machine and the report can be
regenerated from the record alone (`--report-only --reuse-stale`).
The report is the generated section "model-sweep" of docs/models.md (`tools/doc_sections.py`), next to the
real-width set's section, which `make models` writes.
"""

from __future__ import annotations

import argparse
import compileall
import concurrent.futures
import contextlib
import copy
import datetime
import fnmatch
import hashlib
import importlib.util
import inspect
import json
import math
import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = REPO / "build" / "model-sweep"
DEFAULT_OUTPUT = REPO / "docs" / "models.md"
SECTION = "model-sweep"
BACKENDS = ("aot_eager", "neuron-mlir")
# Random ops drawn on the host by torch (`frontend/fallback_random.py`): a model sampling in its forward is compared
# with eager by value, as Inductor's accuracy runs compare with `torch._inductor.config.fallback_random`
COMPILE_OPTIONS: dict[str, Any] = {"fallback_random": True}
UNFINISHED = "did not finish"  # a backend's verdict while it runs: its process was killed if it stays
CPU_GRACE_SECONDS = 10  # after the CPU limit's SIGXCPU, the seconds until the kernel's SIGKILL
WALL_LIMIT_FACTOR = 4  # a class's wall-clock limit, in multiples of its CPU limit

BATCH = 2
SEQUENCE = 8
WIDTH = 32
FFN_WIDTH = 64
HEADS = 2
HEAD_DIM = WIDTH // HEADS
QUERIES = 8
LAYERS = 2
VOCAB = 128
IMAGE = 32
# Models with batch norm see larger images: at 32 pixels a backbone's last stages are 1 x 1, so its batch norm
# normalises two values per channel, and the gradients through it are cancellation noise in float32 (eager's own
# error from float64 reaches 7-86% of the largest gradient), which no comparison can judge; at 128 the last stage
# (stride 32) is 4 x 4: 32 values.
BATCH_NORM_IMAGE = 128
PATCH = 8
MEL_BINS = 16
AUDIO_POSITIONS = 16  # encoder positions of audio models: Whisper-like models take twice as many frames
AUDIO_SAMPLES = 1600  # raw waveform samples (wav2vec2's feature encoder strides by 320)
MAX_POSITIONS = 512
FRAMES = 4  # a video's frames
CONTEXT = 64  # a time series' past values
NORM_GROUPS = 4  # divides WIDTH and a bottleneck's WIDTH // 4
PARAMETER_NOISE = 0.02  # the standard deviation of the noise added to every initialised parameter (`build`)
ROUNDING_TWINS = 4  # eager's evaluations on parameters moved by about one float32 ulp (`_rounding_twins`)


# -- which classes -------------------------------------------------------------------------------------------------

# Mappings whose classes are a model type's preferred representative, in order: the sweep runs every model type's
# first class before any second one, so a partial run covers as many model types as it can.
PREFERRED_MAPPINGS = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_CTC_MAPPING_NAMES",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_MAPPING_NAMES",
)


@dataclass(frozen=True)
class Architecture:
    """One model class of transformers and where the auto mappings list it."""

    name: str  # the class name, e.g. "LlamaForCausalLM"
    model_type: str  # the configuration's model type, e.g. "llama"
    mapping: str  # the first auto mapping listing it
    rank: int  # the class's place among its model type's classes (0: the preferred one)


def architectures() -> list[Architecture]:
    """Every model class in transformers' auto mappings, each model type's preferred class first (see
    `PREFERRED_MAPPINGS`), then its others; classes whose configuration has no registered class are left out."""
    # torch first: importing it runs its backends' autoload (the `neuron` device), which must not happen halfway
    # through transformers' own imports
    import torch  # noqa: F401
    from transformers.models.auto import configuration_auto, modeling_auto

    mappings = sorted(
        name
        for name in dir(modeling_auto)
        if name.startswith("MODEL")
        and name.endswith("_MAPPING_NAMES")
        and isinstance(getattr(modeling_auto, name), dict)
    )
    order = [m for m in PREFERRED_MAPPINGS if m in mappings] + [m for m in mappings if m not in PREFERRED_MAPPINGS]
    # a class may be listed under several model types (e.g. LlamaForCausalLM under "llama" and others that reuse
    # it): it is built from its own configuration, the one whose class name starts as the model class's does
    listings: dict[str, list[tuple[str, str]]] = {}
    for mapping in order:
        for model_type, names in getattr(modeling_auto, mapping).items():
            if model_type not in configuration_auto.CONFIG_MAPPING_NAMES:
                continue
            for name in (names,) if isinstance(names, str) else names:
                listings.setdefault(name, []).append((model_type, mapping))

    def own(name: str, candidates: list[tuple[str, str]]) -> tuple[str, str]:
        def prefix(model_type: str) -> int:
            stem = configuration_auto.CONFIG_MAPPING_NAMES[model_type].removesuffix("Config")
            return len(stem) if stem and name.startswith(stem) else -1

        def named(model_type: str) -> bool:  # "gpt2" over "gpt-sw3", which reuses GPT2Config
            stem = configuration_auto.CONFIG_MAPPING_NAMES[model_type].removesuffix("Config")
            return model_type.replace("-", "").replace("_", "") == stem.lower()

        return max(candidates, key=lambda c: (prefix(c[0]), named(c[0]), -candidates.index(c)))

    chosen = {name: own(name, candidates) for name, candidates in listings.items()}
    per_type: Counter[str] = Counter()
    result = []
    for name in sorted(chosen, key=lambda n: (order.index(chosen[n][1]), n)):
        model_type, mapping = chosen[name]
        result.append(Architecture(name, model_type, mapping, per_type[model_type]))
        per_type[model_type] += 1
    return sorted(result, key=lambda a: (a.rank, a.model_type, a.name))


def select(all_architectures: Iterable[Architecture], patterns: list[str] | None) -> list[Architecture]:
    """The architectures whose class name or model type matches one of `patterns` (shell patterns, or substrings
    when a pattern has no wildcard; case-insensitive); all of them without patterns."""
    if not patterns:
        return list(all_architectures)

    def matches(text: str, pattern: str) -> bool:
        text, pattern = text.lower(), pattern.lower()
        return fnmatch.fnmatchcase(text, pattern) if any(c in pattern for c in "*?[") else pattern in text

    return [a for a in all_architectures if any(matches(a.name, p) or matches(a.model_type, p) for p in patterns)]


# -- tiny configurations --------------------------------------------------------------------------------------------

_WIDTH_NAMES = frozenset(
    {
        *("hidden_size", "d_model", "n_embd", "n_embed", "embed_dim", "model_dim", "dim", "d_embed", "hidden_dim"),
        *("word_embed_proj_dim", "embedding_size", "embedding_dim", "projection_dim", "emb_dim", "text_embed_dim"),
        *("vision_embed_dim", "encoder_hidden_size", "decoder_hidden_size", "proj_dim", "d_latents", "codebook_dim"),
        *("encoder_hidden_dim",),  # the DETR family's hybrid encoder (RT-DETR, D-FINE, PP-DocLayout)
    }
)
_FFN_NAMES = frozenset(
    {
        *("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff", "d_inner"),
        *("dim_feedforward", "inner_dim", "intermediate_dim", "mlp_dim", "ffn_hidden_size", "moe_intermediate_size"),
        *("shared_expert_intermediate_size", "decoder_intermediate_size", "encoder_intermediate_size"),
    }
)
_LAYER_NAMES = frozenset(
    {
        *("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers", "depth"),
        *("num_encoder_layers", "num_decoder_layers", "decoder_num_layers", "num_decoder_blocks", "num_blocks"),
    }
)
_HEAD_NAMES = frozenset(
    {
        *("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads"),
        *("decoder_attention_heads", "decoder_num_attention_heads", "num_decoder_attention_heads"),
    }
)
# the model's own width and heads, where a configuration also names its parts' (in order of preference)
_MAIN_WIDTH_NAMES = ("hidden_size", "d_model", "n_embd", "dim")
_MAIN_HEAD_NAMES = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_KV_HEAD_NAMES = frozenset({"num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"})
_HEAD_DIM_NAMES = frozenset(
    {"head_dim", "attention_head_dim", "d_kv", "kv_channels", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}
    | {"rotary_dim"}
)
_RANK_NAMES = frozenset({"q_lora_rank", "kv_lora_rank"})
_EXPERT_NAMES = frozenset({"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"})
_TOP_K_NAMES = frozenset({"num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts"})
_POSITION_NAMES = frozenset({"max_position_embeddings", "n_positions", "max_target_positions", "n_ctx"})
# per-stage lists of hierarchical vision models (ResNet, ConvNeXt, Swin, ...)
_STAGE_WIDTH_NAMES = frozenset(
    {
        *("hidden_sizes", "embed_dims", "dims", "widths", "channels", "conv_dim", "neck_hidden_sizes"),
        # HGNetV2's stages and stem, and the detection encoders that read its last stages (D-FINE, PP-DocLayout):
        # all cut to the same width, so that each stage still takes what the one before gives
        *("stem_channels", "stage_in_channels", "stage_mid_channels", "stage_out_channels"),
        *("encoder_in_channels", "decoder_in_channels"),
    }
)
_STAGE_DEPTH_NAMES = frozenset({"depths", "num_layers_per_stage", "layers", "stage_depths"})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scaled_sections(sections: list[int], total: int) -> list[int]:
    """`sections` scaled to sum to `total`, each at least 1 (the last takes the rounding)."""
    whole = sum(sections)
    scaled = [max(1, round(v * total / whole)) for v in sections[:-1]]
    return [*scaled, max(1, total - sum(scaled))]


# Training-time random augmentations a configuration switches on (DINOv3's RoPE coordinates shifted, jittered and
# rescaled by random draws): like dropout, off, since eager's random numbers are not the device's
_RANDOM_AUGMENTATIONS = frozenset({"pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale"})


def _is_sampling_noise(name: str) -> bool:
    """A configuration attribute that scales noise a model samples in its forward (VITS's prior and durations):
    like dropout, off, since eager's random numbers are not the device's; the model is deterministic at 0."""
    return name == "noise_scale" or name.startswith("noise_scale_")


def _is_dropout(name: str) -> bool:
    """A configuration attribute that is a dropout or stochastic-depth probability (a float, or one per stage)."""
    return (
        "dropout" in name or name.endswith("pdrop") or name.endswith("drop_rate")
        or name in ("layerdrop", "drop_path_rate") or name.endswith("_layerdrop")
        or name.endswith("droppath") or name == "drop_connect_rate"  # Grounding DINO's fusion, EfficientNet's
        or (name.startswith("mask_") and name.endswith("_prob"))
    )  # fmt: skip


def kept_layers(layer_types: Any, layers_before: int) -> list[int]:
    """The layers a shrunk configuration keeps, in order: the first layer of each kind (`layer_types`: sliding
    and full attention, linear attention, Mamba) before the first layers, so that a model mixing kinds keeps
    them mixed; the first `LAYERS` where all layers are alike or their kinds are not named."""
    if not (isinstance(layer_types, list | tuple) and len(layer_types) == layers_before):
        return list(range(min(LAYERS, layers_before)))
    firsts = list({kind: index for index, kind in reversed(list(enumerate(layer_types)))}.values())
    chosen = sorted(firsts)[:LAYERS]
    chosen += [i for i in range(layers_before) if i not in chosen][: max(0, LAYERS - len(chosen))]
    return sorted(chosen)


def _shrunk_value(
    name: str, value: Any, original: dict[str, Any], layers_before: int | None, image: int = IMAGE
) -> Any:
    """The tiny value of one configuration attribute, or `value` itself when the attribute is not a size."""
    if _is_sampling_noise(name) and isinstance(value, float):
        return 0.0
    if _is_dropout(name):
        if isinstance(value, float):
            return 0.0
        if isinstance(value, list | tuple) and value and all(isinstance(v, float) for v in value):
            return type(value)([0.0] * len(value))  # per stage (CvT's drop_path_rate (0.0, 0.0, 0.1))
    if name in _RANDOM_AUGMENTATIONS:
        return None
    if _is_int(value):
        if name in _WIDTH_NAMES or (name.endswith("_hidden_size") and "intermediate" not in name):
            return min(value, WIDTH)
        if name in _FFN_NAMES or name.endswith("intermediate_size"):
            return min(value, FFN_WIDTH)
        if name in _LAYER_NAMES:
            return min(value, LAYERS)
        if name in _HEAD_NAMES:
            return min(value, HEADS)
        if name in _KV_HEAD_NAMES:
            heads = next((original[h] for h in _HEAD_NAMES if _is_int(original.get(h))), value)
            return 1 if value < heads else min(value, HEADS)
        if name in _HEAD_DIM_NAMES:
            return min(value, HEAD_DIM)
        # the heads of a model's other attentions and mixers (linear attention, a sparse-attention indexer,
        # Mamba's): `linear_num_value_heads`, `index_n_heads`, `mamba_head_dim`, ...
        if name.endswith("_heads"):
            return min(value, HEADS)
        if name.endswith("_head_dim"):
            return min(value, HEAD_DIM)
        if name in _RANK_NAMES:
            return min(value, HEAD_DIM)
        if name in _EXPERT_NAMES:
            return min(value, 4)
        if name in _TOP_K_NAMES:
            return min(value, 2)
        # Gemma 3n's and 4's per-layer input embeddings: `vocab_size_per_layer_input` (262,144 rows by default)
        if name == "vocab_size" or name.endswith("_vocab_size") or name.startswith("vocab_size_"):
            return min(value, VOCAB)
        if name.startswith("hidden_size_"):
            return min(value, WIDTH)
        if name in _POSITION_NAMES:
            return min(value, MAX_POSITIONS)
        if name == "max_source_positions":
            return min(value, AUDIO_POSITIONS)
        if name in ("image_size", "crop_size"):
            return min(value, image)
        if name in ("num_frames", "frames_per_clip"):
            return min(value, FRAMES)
        if name == "patch_size":
            return min(value, PATCH)
        if name == "context_length":
            return min(value, CONTEXT)
        if name == "num_mel_bins":
            return min(value, MEL_BINS)
        if name == "num_queries":
            # object queries a DETR-like decoder picks by top-k among the encoder's positions: a tiny image has
            # a few dozen
            return min(value, QUERIES)
        if name == "num_windows":
            # a windowed ViT's windows (LW-DETR's): a square count whose side divides a tiny image's patches
            return min(value, 4)
        if name == "num_groups":
            # group normalisation's groups (BiT) must divide every shrunk width, down to a bottleneck's quarter
            return min(value, NORM_GROUPS)
        if name.endswith("_groups") and value > 1 and value == original.get("hidden_size"):
            # a depthwise convolution over the hidden width (Mimi's upsampling): as wide as the shrunk width
            return min(value, WIDTH)
    if isinstance(value, dict) and isinstance(value.get("mrope_section"), list | tuple):
        # multimodal rotary sections (time, height, width) split half the head's width: scaled with it
        return {**value, "mrope_section": _scaled_sections(list(value["mrope_section"]), HEAD_DIM // 2)}
    if isinstance(value, list | tuple) and value and all(_is_int(v) for v in value):
        if name == "image_size":
            return type(value)(min(v, image) for v in value)
        if name in _STAGE_WIDTH_NAMES:
            return type(value)(min(v, WIDTH) for v in value)
        if name in _STAGE_DEPTH_NAMES:
            return type(value)(min(v, 1) for v in value)
        if name in _HEAD_NAMES:
            return type(value)(min(v, HEADS) for v in value)
    if layers_before is not None and isinstance(value, list | tuple) and len(value) == layers_before > LAYERS:
        # per-layer settings (layer_types, ...) follow the kept layers
        return type(value)(value[i] for i in kept_layers(original.get("layer_types"), layers_before))
    return value


def _without_timm(config: Any) -> Any:
    """`config`, or where it is a timm backbone's and timm is not installed (it is no dependency of the project:
    the DETR family defaults to timm's ResNet-50), transformers' own ResNet with the same feature maps."""
    if getattr(config, "model_type", None) != "timm_backbone" or importlib.util.find_spec("timm") is not None:
        return config
    from transformers import ResNetConfig

    return ResNetConfig(num_channels=config.num_channels, out_indices=list(config.out_indices))


def _completed_value(name: str, original: dict[str, Any]) -> Any:
    """A tiny model's value of a size that a configuration's defaults leave unset for a checkpoint to give (ESM's
    vocabulary, Dots1's experts, the head width Ministral's code reads), or None."""
    if name == "vocab_size":
        return VOCAB
    if name == "pad_token_id" and "vocab_size" in original:
        return 1  # a vocabulary given here has a padding token too (ESM's position ids skip it)
    if name in _EXPERT_NAMES:
        return 4
    if name in _KV_HEAD_NAMES:  # unset: as many as the queries' (Nemotron)
        return next((original[h] for h in _MAIN_HEAD_NAMES if _is_int(original.get(h))), None)
    if name in _TOP_K_NAMES:
        return 2
    if name == "n_shared_experts":
        return 1
    if name == "prediction_length":  # a forecaster's horizon (the time series transformers)
        return SEQUENCE
    # a sparse-attention token indexer the defaults name but do not size (Qwen4-Exp's QSA): one key head of the
    # main heads' width, a budget of half the sequence in blocks of two tokens
    if name == "indexer_kv_heads":
        return 1
    if name == "indexer_n_heads":
        return next((original[h] for h in _MAIN_HEAD_NAMES if _is_int(original.get(h))), None)
    if name == "indexer_head_dim":
        return HEAD_DIM
    if name == "indexer_budget":
        return SEQUENCE // 2
    if name == "indexer_compress_ratio":
        return 2
    if name == "head_dim":
        heads = next((original[h] for h in _MAIN_HEAD_NAMES if _is_int(original.get(h))), None)
        width = next((original[w] for w in _MAIN_WIDTH_NAMES if _is_int(original.get(w))), None)
        return width // heads if heads and width else None
    return None


def shrink_config(config: Any, image: int = IMAGE, complete: bool = False) -> dict[str, Any]:
    """The keyword arguments that build a tiny `type(config)`: every size attribute of `config` (and of its
    sub-configurations, recursively) cut by `_shrunk_value`, images to `image` pixels, dropout off, the cache off.
    With `complete`, sizes the defaults leave unset are given too (`_completed_value`): for configurations whose
    defaults do not build a model; a configuration that builds as it is keeps its unset sizes, which may mean
    a feature is off (Gemma 4's experts)."""
    from transformers import PretrainedConfig

    original = {k: v for k, v in vars(config).items() if not k.startswith("_")}
    layers_before = next(
        (original[n] for n in ("num_hidden_layers", "num_layers", "n_layer") if _is_int(original.get(n))), None
    )
    # a hierarchical model's per-stage lists (Swin V2's `pretrained_window_sizes`) are as long as its layer count
    # (`num_layers`, the length of its `depths`): the stages stay, each one block deep, and so do those lists
    if any(isinstance(original.get(n), list | tuple) for n in _STAGE_DEPTH_NAMES):
        layers_before = None
    changed: dict[str, Any] = {}
    for name, value in original.items():
        if isinstance(value, PretrainedConfig):
            value = _without_timm(value)
            sub = value.to_dict()
            sub.update(shrink_config(value, image, complete))
            changed[name] = sub
            continue
        new = _shrunk_value(name, value, original, layers_before, image)
        if new is not value and new != value:
            changed[name] = new
    # Mamba-2's heads tile its expanded width (hidden size x expand = heads x head width) and its groups divide
    # its heads: the head width follows the shrunk sizes
    sizes = {**original, **changed}
    if all(_is_int(sizes.get(n)) for n in ("hidden_size", "expand", "num_heads", "head_dim")) and (
        original["hidden_size"] * original["expand"] == original["num_heads"] * original["head_dim"]
    ):
        changed["head_dim"] = sizes["hidden_size"] * sizes["expand"] // sizes["num_heads"]
        if _is_int(original.get("n_groups")):
            changed["n_groups"] = math.gcd(original["n_groups"], sizes["num_heads"])
    # a mixture of experts whose defaults name the experts but not how many a token takes (DeepSeek-V2)
    if any(_is_int(original.get(n)) for n in _EXPERT_NAMES):
        for name in _TOP_K_NAMES & {n for n, v in original.items() if v is None}:
            changed[name] = 2
    if complete:
        for name, value in original.items():
            filled = _completed_value(name, {**original, **changed}) if value is None else None
            if filled is not None:
                changed[name] = filled
    # special tokens beyond the shrunk vocabulary move to its end (distinct ids, so pad stays apart from eos)
    vocab = changed.get("vocab_size", original.get("vocab_size"))
    if isinstance(vocab, int):
        spare = iter(range(vocab - 1, 0, -1))
        moved: dict[int, int] = {}
        for name, value in original.items():
            if name.endswith(("_token_id", "_token_index")) and _is_int(value) and value >= vocab:
                changed[name] = moved.setdefault(value, next(spare))
            elif name.endswith("_token_id") and isinstance(value, list) and all(_is_int(v) for v in value):
                changed[name] = [moved.setdefault(v, next(spare)) if v >= vocab else v for v in value]
    # Per-layer overrides of a heterogeneous configuration (Gemma 4's wider heads in its full-attention layers),
    # kept for the kept layers, renumbered and shrunk like the attributes they override
    overrides = getattr(getattr(config, "_heterogeneity_spec", None), "per_layer_overrides", None)
    if layers_before is not None and isinstance(overrides, dict) and overrides:
        kept = kept_layers(original.get("layer_types"), layers_before)
        changed["per_layer_config"] = {
            new: {key: _shrunk_value(key, value, original, None, image) for key, value in overrides[old].items()}
            for new, old in enumerate(kept)
            if old in overrides
        }
    # A backbone's outputs taken from layers the shrunk depth no longer has (a ViT backbone's stages 9-12 for a
    # depth head's four feature maps): as many layers as outputs, the outputs the last of them, in order.
    outputs = getattr(config, "out_indices", None)  # a property over a private attribute
    depth = next((n for n in ("num_hidden_layers", "num_layers", "n_layer") if _is_int(original.get(n))), None)
    if (
        depth is not None
        and isinstance(getattr(config, "stage_names", None), list)
        and isinstance(outputs, list | tuple)
        and outputs
        and all(_is_int(i) for i in outputs)
        and max(outputs) > changed.get(depth, original[depth])
    ):
        layers = max(changed.get(depth, original[depth]), len(outputs))
        changed[depth] = layers
        changed["stage_names"] = ["stem"] + [f"stage{i}" for i in range(1, layers + 1)]
        changed["out_indices"] = list(range(layers - len(outputs) + 1, layers + 1))
        changed["out_features"] = [f"stage{i}" for i in changed["out_indices"]]
    # Multimodal rotary sections the model defaults to in its code when the configuration names none (sized for
    # the full head): named here, split evenly over half the shrunk head's rotated part.
    rope = changed.get("rope_parameters", original.get("rope_parameters"))
    sectioned = "mrope_section" in getattr(config, "ignore_keys_at_rope_validation", ())
    if sectioned and isinstance(rope, dict) and "rope_type" in rope and "mrope_section" not in rope:
        rotated = int(HEAD_DIM * rope.get("partial_rotary_factor", original.get("partial_rotary_factor") or 1.0))
        changed["rope_parameters"] = {**rope, "mrope_section": _scaled_sections([1, 1, 1], rotated // 2)}
    if "use_cache" in original:
        changed["use_cache"] = False
    return changed


def _as_loaded(value: Any) -> Any:
    """`value` as a checkpoint's config.json gives it: JSON has lists, not tuples. Some defaults are tuples that
    the model's own code concatenates to lists (ConvNeXt's backbone: `[hidden_sizes[0]] + hidden_sizes`), which
    only a configuration built from a checkpoint's file can construct."""
    if isinstance(value, tuple):
        return [_as_loaded(v) for v in value]
    if isinstance(value, list):
        return [_as_loaded(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_loaded(v) for k, v in value.items()}
    return value


def tiny_config(model_type: str, image: int = IMAGE, complete: bool = False) -> Any:
    """The configuration class of `model_type` at its defaults, shrunk (`shrink_config`), with its sequences as
    lists, as a checkpoint's file gives them (`_as_loaded`)."""
    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type)
    return type(default)(**_as_loaded(shrink_config(default, image, complete)))


# -- inputs ------------------------------------------------------------------------------------------------------


def _setting(config: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` set on `config` or on one of its sub-configurations (vision, audio, text, encoder)."""
    from transformers import PretrainedConfig

    configs = [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]
    for candidate in configs:
        for name in names:
            value = getattr(candidate, name, None)
            if value is not None:
                return value
    return default


def _tokens(config: Any, generator: Any, shape: tuple[int, ...]) -> Any:
    import torch

    vocab = _setting(config, "vocab_size", default=VOCAB)
    return torch.randint(0, min(int(vocab), VOCAB), shape, generator=generator)


def _image(config: Any, generator: Any, image: int) -> Any:
    import torch

    channels = _setting(config, "num_channels", "in_channels", "in_chans", default=3)
    size = _setting(config, "image_size", "img_size", default=image)
    height, width = (size, size) if _is_int(size) else tuple(size)[:2]
    return torch.randn(BATCH, int(channels), int(height), int(width), generator=generator)


def _audio_features(config: Any, generator: Any, frames_last: bool) -> Any:
    """Log-mel features: (batch, mel bins, frames) for Whisper-like encoders (`frames_last`, twice their positions
    in frames), else (batch, frames, features) as the conformers and Speech2Text take them."""
    import torch

    mel_bins = _setting(config, "num_mel_bins")
    if mel_bins is not None:
        frames = 2 * int(_setting(config, "max_source_positions", default=AUDIO_POSITIONS))
        shape = (BATCH, int(mel_bins), frames) if frames_last else (BATCH, frames, int(mel_bins))
        return torch.randn(*shape, generator=generator)
    per_channel = _setting(config, "input_feat_per_channel", "feature_size", default=MEL_BINS)
    channels = _setting(config, "input_channels", default=1)
    return torch.randn(BATCH, 4 * AUDIO_POSITIONS, int(per_channel) * int(channels), generator=generator)


def _patch_grid(config: Any) -> Any:
    """(time, height, width) in patches of each of a batch of images, for vision towers that take their images as
    flattened patches (Qwen2-VL and the models built like it): a square of two merged patches a side."""
    import torch

    side = 2 * int(_setting(config, "spatial_merge_size", "merge_size", default=1))
    return torch.tensor([[1, side, side]] * BATCH)


def _flat_patches(config: Any, generator: Any) -> Any:
    """The patches `_patch_grid` counts, each flattened over channels, frames and pixels."""
    import torch

    channels = int(_setting(config, "in_channels", "num_channels", default=3))
    frames = int(_setting(config, "temporal_patch_size", default=1))
    patch = int(_setting(config, "patch_size", default=PATCH))
    patches = int(_patch_grid(config).prod(dim=1).sum())
    return torch.randn(patches, channels * frames * patch * patch, generator=generator)


def _time_series(config: Any, generator: Any, padding: bool = False) -> Any:
    import torch

    # with the lags a forecaster reads before its context (the time series transformers' `lags_sequence`)
    context = int(_setting(config, "context_length", "prediction_length", default=SEQUENCE))
    context += max(_setting(config, "lags_sequence", default=[0]))
    channels = _setting(config, "num_input_channels")
    shape = (BATCH, context) if channels is None or padding else (BATCH, context, int(channels))
    return torch.zeros(shape) if padding else torch.randn(*shape, generator=generator)


# Layouts `make_inputs` can try, in order, until eager accepts one: the argument names do not say whether audio
# features put the frames last (Whisper) or the features (conformers), nor whether a waveform has a channel
# dimension (the codecs'); the last variant is a vision-language model's text alone (`TEXT_ONLY`).
INPUT_VARIANTS = 3
TEXT_ONLY = 2


def _has_image_tokens(config: Any) -> bool:
    """Whether `config` is a vision-language model's, whose images stand in its text as placeholder tokens: its
    pixel inputs must agree with those tokens (and often a grid of patches per image) in a way each family
    defines, so the sweep gives such a model its text alone where the images cannot be made."""
    return _setting(config, "image_token_id", "image_token_index") is not None


def make_inputs(
    model: Any, config: Any, architecture: Architecture, variant: int = 0, image: int = IMAGE
) -> dict[str, Any]:
    """Keyword inputs for `model`'s forward: its main input and every required argument, by name; a
    sequence-to-sequence model also gets `decoder_input_ids`. Raises ValueError for an argument it cannot make.
    `variant` (below `INPUT_VARIANTS`) picks another layout where the name leaves it open; `TEXT_ONLY` leaves a
    vision-language model's images out. Images are `image` pixels square where the configuration gives no size."""
    import torch

    generator = torch.Generator().manual_seed(1)
    parameters = inspect.signature(model.forward).parameters
    wanted = [model.main_input_name] + [
        name
        for name, p in parameters.items()
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in parameters:
        wanted.append("decoder_input_ids")
    from transformers import PretrainedConfig

    # dual encoders (CLIP-like: a text and a vision configuration) embed both their inputs
    parts = {name for name, value in vars(config).items() if isinstance(value, PretrainedConfig)}
    pairs = [("text_config", "input_ids"), ("vision_config", "pixel_values")]
    if variant == TEXT_ONLY and _has_image_tokens(config):
        pairs = pairs[:1]
    for part, argument in pairs:
        if {"text_config", "vision_config"} <= parts and argument in parameters and part in parts:
            wanted.append(argument)
    multiple_choice = "MultipleChoice" in architecture.name
    inputs: dict[str, Any] = {}
    for name in dict.fromkeys(wanted):
        if name in ("input_ids", "decoder_input_ids"):
            inputs[name] = _tokens(config, generator, (BATCH, 2, SEQUENCE) if multiple_choice else (BATCH, SEQUENCE))
        elif name == "pixel_values":
            inputs[name] = _image(config, generator, image)
        elif name == "input_features":
            inputs[name] = _audio_features(config, generator, frames_last=variant == 0)
        elif name == "input_values":
            # a waveform: (batch, samples) for speech encoders, or with its channels (batch, channels, samples) for
            # the audio codecs (EnCodec, DAC, Mimi), the second layout tried
            channels = int(_setting(config, "audio_channels", default=1))
            shape = (BATCH, channels, AUDIO_SAMPLES) if variant == 1 else (BATCH, AUDIO_SAMPLES)
            inputs[name] = torch.randn(*shape, generator=generator)
        elif name == "hidden_states" and "grid_thw" in parameters:
            inputs[name] = _flat_patches(config, generator)
        elif name in ("grid_thw", "image_grid_thw"):
            inputs[name] = _patch_grid(config)
        elif name == "pixel_values_videos":
            frames = int(_setting(config, "num_frames", "frames_per_clip", default=FRAMES))
            inputs[name] = torch.stack([_image(config, generator, image) for _ in range(frames)], dim=1)
        elif name in ("past_values", "past_values_padding"):
            # a time series: (batch, context, channels) where the model forecasts several channels, else
            # (batch, context); the padding of each position (none) beside it
            inputs[name] = _time_series(config, generator, padding=name == "past_values_padding")
        elif name in ("past_time_features", "past_observed_mask"):
            series = _time_series(config, generator)
            if name == "past_observed_mask":
                inputs[name] = torch.ones_like(series)
            else:
                features = int(_setting(config, "num_time_features", default=0))
                inputs[name] = torch.randn(*series.shape[:2], features, generator=generator)
        elif name == "freq":
            inputs[name] = torch.zeros(BATCH, 1, dtype=torch.long)  # the series' frequency class (high)
        elif name == "inputs_embeds":
            inputs[name] = torch.randn(
                BATCH, SEQUENCE, int(_setting(config, "hidden_size", default=WIDTH)), generator=generator
            )
        else:
            raise ValueError(f"no input made for the argument {name!r} of {architecture.name}.forward")
    patches = _masked_patches(config)
    if "noise" in parameters and patches is not None:
        # a masked autoencoder ranks its patches by uniform noise it draws unless given it: given, eager and the
        # device keep the same patches
        inputs["noise"] = torch.rand(BATCH, patches, generator=generator)
    return inputs


def _masked_patches(config: Any) -> int | None:
    """The patches a masked autoencoder (ViT-MAE: a `mask_ratio` over square patches) ranks by noise, else None."""
    size, patch = _setting(config, "image_size", default=None), _setting(config, "patch_size", default=None)
    if getattr(config, "mask_ratio", None) is None or not (_is_int(size) and _is_int(patch)):
        return None
    return (int(size) // int(patch)) ** 2


# -- one architecture, in its own process ------------------------------------------------------------------------------


@dataclass
class BackendResult:
    """One backend's verdict on one architecture."""

    status: str  # "pass", "fallback" or "failing" (aot_eager: "pass" or "failing")
    error: str = ""
    fallback_ops: dict[str, int] = field(default_factory=dict)
    graphs: int = 0
    graph_breaks: int = 0
    seconds: float = 0.0


@dataclass
class ArchitectureResult:
    """The verdicts on one architecture: whether it was built, and each backend's (`BACKENDS`)."""

    name: str
    model_type: str
    built: bool = False
    error: str = ""  # why it was not built or run (no inputs, eager raised)
    inputs: str = ""  # which inputs it ran on, where not all it takes: "text only"
    parameters: int = 0
    backends: dict[str, BackendResult] = field(default_factory=dict)
    fingerprint: str = ""
    commit: str = ""
    seconds: float = 0.0

    @staticmethod
    def load(data: dict[str, Any]) -> ArchitectureResult:
        backends = {name: BackendResult(**value) for name, value in data.pop("backends", {}).items()}
        return ArchitectureResult(**data, backends=backends)


def first_line(error: BaseException) -> str:
    """The innermost cause of an error on one line, without machine paths (Dynamo wraps the backend's error)."""
    from neuron_mlir.tools.coverage_sweep import describe_error

    return describe_error(error)


def _flat_tensors(value: Any) -> list[Any]:
    import torch
    import torch.utils._pytree as pytree

    if hasattr(value, "to_tuple"):  # a ModelOutput: its set fields, in order
        value = value.to_tuple()
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _first_differentiable(outputs: list[Any]) -> int:
    for index, tensor in enumerate(outputs):
        if tensor.is_floating_point() and tensor.requires_grad:
            return index
    raise ValueError("no floating output depends on the parameters: nothing to train")


@dataclass
class Step:
    """What one run of the two steps produced: the forward's outputs, then the training step's outputs and the
    parameters' gradients (by name)."""

    inference: list[Any]
    training: list[Any]
    gradients: dict[str, Any]


def _run_steps(model: Any, call: Callable[..., Any], inputs: dict[str, Any], projection: list[Any]) -> Step:
    """The forward under no_grad, then the training step: forward, sum(output * R), backward."""
    import torch

    with torch.no_grad():
        inference = [t.detach() for t in _flat_tensors(call(**inputs))]
    model.zero_grad(set_to_none=True)
    outputs = _flat_tensors(call(**inputs))
    index = _first_differentiable(outputs)
    if not projection:
        generator = torch.Generator().manual_seed(2)
        projection.append(torch.randn(outputs[index].shape, generator=generator).to(outputs[index].dtype))
    (outputs[index] * projection[0]).sum().backward()
    gradients = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return Step(inference, [t.detach() for t in outputs], gradients)


def _zeros_like(tensor: Any) -> Any:
    import torch

    return torch.zeros_like(tensor)


def _pick(step: Step, where: tuple[str, int | str], like: Any) -> Any:
    """The tensor of `step` at `where` (as `_compare_step` names it); zeros like `like` for a missing gradient."""
    part, key = where
    if isinstance(key, str):
        return step.gradients[key] if key in step.gradients else _zeros_like(like)
    return (step.inference if part == "inference" else step.training)[key]


def _compare_step(
    actual: Step,
    expected: Step,
    golden: Callable[[], Step],
    twins: Callable[[], list[tuple[Step, Step]]] = list,
) -> str | None:
    """None when `actual` matches eager's `expected` (within the dtype's tolerance, or, where not, within a small
    multiple of eager's own error from the float64 run `golden()`, that error taken also over the (eager, float64)
    steps of `twins()`, which are computed only for a result that fails without them), else what differs."""
    from neuron_mlir.frontend.tensors import to_numpy
    from neuron_mlir.ir.semantics.compare import golden_mismatch, mismatch

    # (what, ours, eager's, where in a Step to find the float64 reference)
    pairs: list[tuple[str, Any, Any, tuple[str, int | str]]] = []
    for phase, got, want in (
        ("inference", actual.inference, expected.inference),
        ("training", actual.training, expected.training),
    ):
        if len(got) != len(want):
            return f"{phase}: {len(got)} outputs, eager gave {len(want)}"
        label = "forward" if phase == "inference" else phase
        pairs += [(f"{label} output {i}", a, e, (phase, i)) for i, (a, e) in enumerate(zip(got, want, strict=True))]
    # a parameter the loss does not reach has no gradient in one run and a zero one in another: the same step
    for n in sorted(set(expected.gradients) | set(actual.gradients)):
        want = expected.gradients[n] if n in expected.gradients else _zeros_like(actual.gradients[n])
        got = actual.gradients[n] if n in actual.gradients else _zeros_like(want)
        pairs.append((f"gradient of {n}", got, want, ("gradients", n)))
    reference: list[Step] = []
    twin_steps: list[list[tuple[Step, Step]]] = []  # computed at most once, when a result first needs them
    for what, got, want, pick in pairs:
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"{what}: {got.dtype} {tuple(got.shape)}, eager gave {want.dtype} {tuple(want.shape)}"
        if not want.is_floating_point():
            if not bool((got == want).all()):
                return f"{what}: integer results differ"
            continue
        problem = mismatch(to_numpy(got), to_numpy(want))
        if problem is None:
            continue
        if not reference:
            try:
                reference.append(golden())
            except Exception as error:  # a kernel without a float64 version: eager's verdict stands
                return f"{what}: {problem} (no float64 reference: {first_line(error)[:80]})"
        golden_result = to_numpy(_pick(reference[0], pick, want).double())
        problem = golden_mismatch(to_numpy(got), to_numpy(want), golden_result)
        if problem is not None:
            if not twin_steps:
                twin_steps.append(twins())
            evaluations = [
                (to_numpy(_pick(twin, pick, want)), to_numpy(_pick(twin_golden, pick, want).double()))
                for twin, twin_golden in twin_steps[0]
            ]
            problem = golden_mismatch(to_numpy(got), to_numpy(want), golden_result, evaluations)
        if problem is not None:
            return f"{what}: {problem}"
    return None


def _rounding_twin(model: Any, seed: int) -> Any:
    """A copy of `model` whose floating parameters moved by about one unit in their dtype's last place: an equally
    valid evaluation of eager in the same dtype, whose error from its own float64 run shows how much of eager's
    error on `model` itself was luck. A gradient through a ReLU whose mask flips with an input's last bit, or a sum
    with heavy cancellation, has errors twenty times apart between such twins (MobileNetV2's stem convolution)."""
    import torch

    twin = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        for parameter in twin.parameters():
            if parameter.is_floating_point():
                ulp = torch.finfo(parameter.dtype).eps
                noise = torch.randn(parameter.shape, generator=generator).to(parameter.dtype)
                parameter.mul_(1 + ulp * noise)
    return twin


def float64_copy(model: Any) -> Any:
    """A float64 copy of `model` for the reference run. Experts that run as one fused kernel (`grouped_mm`, which
    has no float64 version) switch to transformers' own loop over the experts, the same function."""
    double = copy.deepcopy(model).double()
    if hasattr(double, "set_experts_implementation") and double._can_set_experts_implementation():
        double.set_experts_implementation("eager")
    return double


def _graph_breaks() -> int:
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def _check_backend(
    backend: str | Callable[..., Any],
    model: Any,
    inputs: dict[str, Any],
    expected: Step,
    golden: Callable[[], Step],
    projection: list[Any],
    twins: Callable[[], list[tuple[Step, Step]]] = list,
) -> BackendResult:
    import torch

    import neuron_mlir

    torch._dynamo.reset()
    neuron_mlir.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    started = time.perf_counter()
    compiled_model = copy.deepcopy(model)
    options = COMPILE_OPTIONS if backend == "neuron-mlir" else None
    compiled = torch.compile(compiled_model, backend=backend, options=options)
    try:
        torch.manual_seed(0)
        actual = _run_steps(compiled_model, compiled, inputs, projection)
    except Exception as error:
        traceback.print_exc()
        result = BackendResult("failing", first_line(error))
    else:
        problem = _compare_step(actual, expected, golden, twins)
        result = BackendResult("failing", problem) if problem else BackendResult("pass")
    stats = neuron_mlir.stats()
    result.graph_breaks = _graph_breaks()
    result.seconds = round(time.perf_counter() - started, 1)
    if backend == "neuron-mlir":
        result.graphs = stats["graphs_compiled"]
        result.fallback_ops = dict(sorted(stats["fallback_ops"].items()))
        if result.status == "pass" and result.graphs == 0:
            # Dynamo may give up on a frame and run it eagerly: matching eager then proves nothing
            result.status, result.error = "failing", "no graph reached the backend (Dynamo ran the model eagerly)"
        elif result.status == "pass" and result.fallback_ops:
            result.status = "fallback"
    torch._dynamo.reset()
    return result


def build(architecture: Architecture, image: int = IMAGE) -> tuple[Any, Any]:
    """The tiny model (train mode, random weights seeded) and its configuration, for `image`-pixel images."""
    import torch
    import transformers

    model_class = getattr(transformers, architecture.name)

    def constructed(complete: bool) -> tuple[Any, Any]:
        config = tiny_config(architecture.model_type, image, complete)
        wanted = getattr(model_class, "config_class", None)
        if isinstance(wanted, type) and not isinstance(config, wanted):
            # a part of a composite model (a vision tower): built from the sub-configuration of its class
            config = next((v for v in vars(config).values() if isinstance(v, wanted)), config)
        torch.manual_seed(0)
        return model_class(config), config

    try:
        model, config = constructed(complete=False)
    except Exception as error:
        try:  # defaults that leave a size for a checkpoint to give: given
            model, config = constructed(complete=True)
        except Exception:
            raise error from None
    model.train()
    # Weights some models initialise to a constant (zero router gates, unit scales) would leave ties, e.g. equal
    # scores for top-k routing, whose order eager leaves unspecified: every parameter gets a little noise.
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.is_floating_point():
                noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
                parameter.add_(noise * PARAMETER_NOISE)
    for module in model.modules():  # dropout probabilities that live outside the configuration
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model, config


def _float32_as_float64() -> Any:
    """A torch function mode under which code that names float32 gets float64 (`dtype=torch.float32`,
    `.float()`, `.to(torch.float32)`): the float64 reference run of a model that makes float32 tensors of its own
    (SLANet's decoder state, its one-hot tokens) is then float64 throughout, as `.double()` makes its weights."""
    import torch
    from torch.overrides import TorchFunctionMode

    def wider(value: Any) -> Any:
        return torch.float64 if value is torch.float32 else value

    class Float32AsFloat64(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = {k: wider(v) for k, v in (kwargs or {}).items()}
            if func is torch.Tensor.float:
                func = torch.Tensor.double
            elif func is torch.Tensor.to:
                args = tuple(wider(a) for a in args)
            return func(*args, **kwargs)

    return Float32AsFloat64()


def _normalises_batches(model: Any) -> bool:
    import torch

    return any(isinstance(module, torch.nn.modules.batchnorm._BatchNorm) for module in model.modules())


def run_architecture(
    architecture: Architecture,
    save: Callable[[ArchitectureResult], None],
    backends: Iterable[str | Callable[..., Any]] = BACKENDS,
) -> ArchitectureResult:
    """Build one architecture, run eager, then each backend; `save` is called after every stage, so that a
    process killed by the timeout or the memory limit leaves what it finished."""
    import torch

    started = time.perf_counter()
    result = ArchitectureResult(architecture.name, architecture.model_type)
    try:
        model, config = build(architecture)
        inputs = make_inputs(model, config, architecture)
        result.parameters = sum(p.numel() for p in model.parameters())
        result.built = True
    except Exception as error:
        traceback.print_exc()
        result.error = f"not built: {first_line(error)}"
        save(result)
        return result
    # (model, configuration, image size, inputs of the first variant), tried in order until eager runs one
    builds = [(model, config, IMAGE, inputs)]
    if _normalises_batches(model):
        try:
            larger, larger_config = build(architecture, BATCH_NORM_IMAGE)
            larger_inputs = make_inputs(larger, larger_config, architecture, image=BATCH_NORM_IMAGE)
            builds.insert(0, (larger, larger_config, BATCH_NORM_IMAGE, larger_inputs))
        except Exception:
            traceback.print_exc()  # the small images stand
    projection: list[Any] = []
    eager_error = None
    for model, config, image, inputs in builds:
        projection, eager_error = [], None
        for variant in range(INPUT_VARIANTS):
            try:
                if variant:
                    changed = make_inputs(model, config, architecture, variant, image)
                    same = changed.keys() == inputs.keys()
                    if same and all(changed[k].shape == v.shape for k, v in inputs.items()):
                        continue  # the same inputs as a variant tried already
                    inputs, projection = changed, []
                notes = [f"{image}-pixel images" if image != IMAGE else "", "text only" if variant == TEXT_ONLY else ""]
                result.inputs = ", ".join(note for note in notes if note)
                torch.manual_seed(0)
                eager_model = copy.deepcopy(model)
                expected = _run_steps(eager_model, eager_model, inputs, projection)
                eager_error = None
                break
            except Exception as error:
                traceback.print_exc()
                eager_error = eager_error or error
        if eager_error is None:
            result.parameters = sum(p.numel() for p in model.parameters())
            break
    if eager_error is not None:
        result.error = f"eager: {first_line(eager_error)}"
        save(result)
        return result

    def golden_of(source: Any) -> Step:
        double = float64_copy(source)
        inputs64 = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
        torch.manual_seed(0)
        with _float32_as_float64():
            return _run_steps(double, double, inputs64, [projection[0].double()])

    def golden() -> Step:
        return golden_of(model)

    def twins() -> list[tuple[Step, Step]]:
        steps = []
        for seed in range(ROUNDING_TWINS):
            twin = _rounding_twin(model, seed)
            try:
                torch.manual_seed(0)
                eager_twin = copy.deepcopy(twin)
                steps.append((_run_steps(eager_twin, eager_twin, inputs, projection), golden_of(twin)))
            except Exception:  # eager's own error from the given parameters stands alone
                traceback.print_exc()
        return steps

    save(result)
    for backend in backends:
        name = backend if isinstance(backend, str) else getattr(backend, "__name__", "custom")
        result.backends[name] = BackendResult("failing", UNFINISHED)  # replaced unless killed
        save(result)
        result.backends[name] = _check_backend(backend, model, inputs, expected, golden, projection, twins)
        result.seconds = round(time.perf_counter() - started, 1)
        save(result)
    return result


def _forked_child(
    fields: tuple[str, str, str, int],
    output: Path,
    log: Path,
    memory_gib: float,
    cpu_seconds: float,
    backends: list[str],
    stamp: tuple[str, str],
) -> None:
    """One architecture, in a process forked from the sweep's server (`_server`): its output to `log`, its verdicts
    saved to `output` as each stage ends; exit status 3 when it ran out of memory, SIGXCPU when it used more than
    `cpu_seconds`."""
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for stream in (1, 2):
        os.dup2(descriptor, stream)
    os.close(descriptor)
    limit = max(1, math.ceil(cpu_seconds))
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + CPU_GRACE_SECONDS))
    if memory_gib > 0:
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import logging

    import torch

    torch.set_num_threads(1)
    logging.getLogger("torch").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    fingerprint, commit = stamp

    def save(result: ArchitectureResult) -> None:
        result.fingerprint, result.commit = fingerprint, commit
        partial = output.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(result)))
        partial.replace(output)

    with contextlib.redirect_stdout(sys.stderr):
        try:
            run_architecture(Architecture(*fields), save, backends)
        except MemoryError:
            sys.exit(3)
    print(f"CPU seconds since the fork: {time.process_time():.1f}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()


# -- the parent: a process per architecture -------------------------------------------------------------------------


def source_fingerprint() -> str:
    """A hash of the sources a verdict depends on: the compiler's packages (not the `neuron` device, which
    torch.compile of CPU tensors does not use), this file and transformers' version."""
    import transformers

    digest = hashlib.sha256()
    device = REPO / "frontend" / "device"
    for folder in ("frontend", "ir", "lowering", "runtime", "backend_trn"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if not path.is_relative_to(device):
                digest.update(path.relative_to(REPO).as_posix().encode())
                digest.update(path.read_bytes())
    digest.update(Path(__file__).read_bytes())
    digest.update(transformers.__version__.encode())
    return digest.hexdigest()[:16]


def _commit() -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()


def snapshot_packages(directory: Path) -> None:
    """Copy the packages (pyproject's package-dir layout) under `directory`, compiled to bytecode: child processes
    that import them run the code as it was when the parent started, whatever is edited meanwhile."""
    layout = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(layout.items()):
        target = directory.joinpath(*package.split("."))
        shutil.copytree(REPO / folder, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    compileall.compile_dir(directory, quiet=1)


def cache_path(cache: Path, name: str) -> Path:
    return cache / f"{name}.json"


def import_results(results_file: Path, cache: Path) -> int:
    """Copy the results of a JSON Lines record (`export_results`) into `cache` for the classes the cache has no
    result of; the number copied. A sweep takes hours and its cache is local to a machine: the record, kept next to
    the report, lets a sweep continue elsewhere and the report be regenerated from what was run."""
    if not results_file.exists():
        return 0
    cache.mkdir(parents=True, exist_ok=True)
    copied = 0
    for line in results_file.read_text().splitlines():
        if not line.strip():
            continue
        data = json.loads(line)
        path = cache_path(cache, data["name"])
        if not path.exists():
            path.write_text(json.dumps(data))
            copied += 1
    return copied


def export_results(results_file: Path, results: dict[str, ArchitectureResult]) -> None:
    """Add the finished `results` to the record (replacing its results of the same classes, keeping the others'),
    one JSON object a line in class-name order, so that the record's diffs show what changed."""
    record = {}
    if results_file.exists():
        record = {json.loads(line)["name"]: line for line in results_file.read_text().splitlines() if line.strip()}
    for name, result in results.items():
        if finished(result):
            record[name] = json.dumps(asdict(result), sort_keys=True)
    results_file.write_text("".join(record[name] + "\n" for name in sorted(record)))


def load_cached(cache: Path, name: str) -> ArchitectureResult | None:
    path = cache_path(cache, name)
    if not path.exists():
        return None
    try:
        return ArchitectureResult.load(json.loads(path.read_text()))
    except (ValueError, TypeError, KeyError):
        return None


@dataclass
class Options:
    timeout: float
    memory_gib: float
    backends: list[str]
    snapshot: Path | None
    fingerprint: str
    commit: str


# What every class's process imports: the server imports it once and each class's process starts from there. Not
# this module: run as `python -m`, a child imports it afresh as its `__mp_main__`, and runpy warns when it finds
# the module imported already.
_PRELOAD = (
    "torch", "transformers", "transformers.modeling_utils", "torch._dynamo", "torch._functorch.aot_autograd",
    "neuron_mlir.frontend.backend",
)  # fmt: skip
_CHILD_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "NEURON_MLIR_CACHE_DIR": "off",
    "NEURON_MLIR_PROGRESS": "0",
    "OMP_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
_server_context: multiprocessing.context.ForkServerContext | None = None


def preload_modules() -> list[str]:
    """What the server imports before it forks a class's process: `_PRELOAD` and the modules of the pipeline's
    passes."""
    from neuron_mlir.lowering.pipelines import pass_class, pipeline_passes

    return [*_PRELOAD, *sorted({pass_class(n).__module__ for n in pipeline_passes()})]


def _server(snapshot: Path | None) -> multiprocessing.context.ForkServerContext:
    """The process every class's process is forked from, started on first use: a fresh interpreter, under the
    children's environment and importing the packages from `snapshot` when given, that imported `_PRELOAD` and the
    pipeline's passes once (about 6 CPU seconds a class saved). Its snapshot and environment are the first call's
    for the rest of this process's life."""
    global _server_context
    if _server_context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(preload_modules())
        saved = dict(os.environ)
        os.environ.update(_CHILD_ENVIRONMENT)
        if snapshot is not None:
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(snapshot), saved.get("PYTHONPATH")]))
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _server_context = context
    return _server_context


def run_child(architecture: Architecture, cache: Path, options: Options) -> ArchitectureResult:
    """One architecture in a process of its own; what it saved before a timeout or death is kept, the unfinished
    backend marked failing with the reason."""
    output = cache_path(cache, architecture.name)
    output.unlink(missing_ok=True)
    log = cache / "logs" / f"{architecture.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    fields = (architecture.name, architecture.model_type, architecture.mapping, architecture.rank)
    stamp = (options.fingerprint, options.commit)
    # the module by its import name: run as `python -m`, this file's own functions would pickle as `__main__`'s
    from neuron_mlir.tools import model_sweep

    child = _server(options.snapshot).Process(
        target=model_sweep._forked_child,
        args=(fields, output, log, options.memory_gib, options.timeout, list(options.backends), stamp),
        name=f"model-sweep {architecture.name}",
    )
    child.start()
    # the limit counts the child's CPU seconds, which the machine's other work does not inflate; the wall clock
    # only stops a child that waits instead of computing
    wall_limit = WALL_LIMIT_FACTOR * options.timeout
    child.join(wall_limit)
    reason = ""
    if child.exitcode is None:
        child.kill()
        child.join()
        reason = f"over the wall-clock limit ({wall_limit:.0f} s)"
    elif child.exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        reason = f"over the CPU limit ({options.timeout:.0f} s)"
    elif child.exitcode == 3:
        reason = f"out of memory (address space limited to {options.memory_gib:g} GiB)"
    elif child.exitcode != 0:
        last = (log.read_text(errors="replace").strip().splitlines() or [""])[-1][:200]
        reason = f"the process died (exit status {child.exitcode}: {last})"
    child.close()
    result = load_cached(cache, architecture.name) or ArchitectureResult(architecture.name, architecture.model_type)
    result.fingerprint, result.commit = options.fingerprint, options.commit
    if reason:
        unfinished = [b for b, r in result.backends.items() if r.error == UNFINISHED]
        for backend in unfinished:
            result.backends[backend] = BackendResult("failing", reason)
        if not unfinished and not result.error and len(result.backends) < len(options.backends):
            result.error = f"{'eager' if result.built else 'not built'}: {reason}"
    output.write_text(json.dumps(asdict(result)))
    return result


def finished(result: ArchitectureResult) -> bool:
    """False for the result of a child still running (or of one whose parent was killed): a backend that
    started and has no verdict yet."""
    return all(r.error != UNFINISHED for r in result.backends.values())


def _verdict(result: ArchitectureResult) -> str:
    ours = result.backends.get("neuron-mlir")
    ceiling = result.backends.get("aot_eager")
    text = f"aot_eager {ceiling.status if ceiling else '-'}, neuron-mlir {ours.status if ours else '-'}"
    if result.error:
        text = result.error
    elif ours is not None and ours.status == "failing":
        text += f": {ours.error[:100]}"
    elif ours is not None and ours.fallback_ops:
        text += ": " + ", ".join(ours.fallback_ops)
    return f"{text} ({result.seconds:.0f} s)"


def sweep(
    selected: list[Architecture],
    cache: Path,
    options: Options,
    jobs: int = 1,
    refresh: bool = False,
    reuse_stale: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, ArchitectureResult]:
    """Run every selected architecture not already cached (fresh, or any with `reuse_stale`), `jobs` processes
    at a time; the results by class name."""
    cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, ArchitectureResult] = {}
    todo = []
    for architecture in selected:
        hit = None if refresh else load_cached(cache, architecture.name)
        complete = hit is not None and finished(hit) and (hit.error or all(b in hit.backends for b in options.backends))
        if hit is not None and complete and (reuse_stale or hit.fingerprint == options.fingerprint):
            results[architecture.name] = hit
        else:
            todo.append(architecture)
    if progress is not None:
        progress(f"{len(selected)} architectures: {len(results)} cached, {len(todo)} to run")
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = {pool.submit(run_child, a, cache, options): a for a in todo}
        for count, future in enumerate(concurrent.futures.as_completed(futures), 1):
            result = future.result()
            results[result.name] = result
            if progress is not None:
                progress(f"[{count}/{len(todo)}] {result.name}: {_verdict(result)}")
    return {a.name: results[a.name] for a in selected if a.name in results}


# -- the report ---------------------------------------------------------------------------------------------------


def classify(result: ArchitectureResult | None) -> tuple[str, str]:
    """(column aot_eager, column neuron-mlir) of a result: "native", "fallback", "failing", "pass", or why the
    architecture did not get that far ("not built", "no inputs", "eager failed", "not run")."""
    if result is None:
        return "not run", "not run"
    if not result.built:
        kind = "no inputs" if "no input made" in result.error else "not built"
        return kind, kind
    if result.error:
        return "eager failed", "eager failed"
    ceiling, ours = result.backends.get("aot_eager"), result.backends.get("neuron-mlir")
    return (ceiling.status if ceiling else "not run"), (
        {"pass": "native"}.get(ours.status, ours.status) if ours else "not run"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def _detail(result: ArchitectureResult | None) -> str:
    if result is None:
        return ""
    if result.error:
        return _cell(result.error[:200])
    ran_on = f"{result.inputs}; " if result.inputs else ""
    ours = result.backends.get("neuron-mlir")
    if ours is None:
        return ran_on.rstrip("; ")
    if ours.status == "failing":
        return ran_on + _cell(ours.error[:200])
    if ours.fallback_ops:
        return ran_on + "ran on the CPU: " + ", ".join(f"`{op}` ({count})" for op, count in ours.fallback_ops.items())
    return ran_on.rstrip("; ")


def summary(selected: list[Architecture], results: dict[str, ArchitectureResult]) -> dict[str, Any]:
    """The counts the report leads with."""
    columns = {a.name: classify(results.get(a.name)) for a in selected}
    ceiling_pass = [n for n, (c, _) in columns.items() if c == "pass"]
    native = [n for n in ceiling_pass if columns[n][1] == "native"]
    return {
        "architectures": len(selected),
        "model_types": len({a.model_type for a in selected}),
        "run": sum(1 for a in selected if a.name in results),
        "ceiling": Counter(c for c, _ in columns.values()),
        "ours": Counter(o for _, o in columns.values()),
        "ceiling_pass": len(ceiling_pass),
        "native_of_ceiling": len(native),
        "ours_of_ceiling": Counter(columns[n][1] for n in ceiling_pass),
        "text_only_of_ceiling": sum(1 for n in ceiling_pass if results[n].inputs == "text only"),
    }


def report(selected: list[Architecture], results: dict[str, ArchitectureResult], options: Options) -> str:
    """The markdown of docs/models.md's model-sweep section."""
    import torch
    import transformers

    counts = summary(selected, results)
    share = 100.0 * counts["native_of_ceiling"] / max(1, counts["ceiling_pass"])
    commits = sorted({r.commit for r in results.values() if r.commit})
    written = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    ours = counts["ours_of_ceiling"]
    lines = [
        "## Every transformers architecture",
        "",
        "Generated by `make model-sweep` (`python -m neuron_mlir.tools.model_sweep`); do not edit.",
        "",
        f"transformers {transformers.__version__}, torch {torch.__version__}: every model class of transformers' auto "
        f"mappings ({counts['architectures']} classes of {counts['model_types']} model types), built offline from its "
        f"configuration class's defaults shrunk to width {WIDTH}, {HEADS} heads, {LAYERS} layers, vocabulary {VOCAB}, "
        f"{IMAGE}-pixel images ({BATCH_NORM_IMAGE} for models with batch norm, whose last stages would otherwise "
        "normalise two values per channel) and short audio, with random weights (where the defaults build no "
        "model, the sizes they leave for a checkpoint to give are given; a timm backbone, timm not being installed, "
        f"is transformers' ResNet with the same feature maps); batch {BATCH}, sequence {SEQUENCE}. Each class "
        "runs in its own process: a forward under no_grad and a training step (forward, sum(output * R), backward) "
        'eagerly, through `backend="aot_eager"` (the ceiling: what Dynamo and AOTAutograd capture) and through '
        '`backend="neuron-mlir"` with `options={"fallback_random": True}` (random ops drawn on the host by torch, '
        "so a model that samples in its forward draws eager's numbers, as Inductor's accuracy runs do with its "
        "`fallback_random`; models without random ops compile as without it); outputs and gradients are compared "
        "with eager within the dtype's tolerance (or, "
        "where not, with a float64 run: at most a small multiple of eager's own error, the largest of its errors "
        f"on the model and on {ROUNDING_TWINS} copies whose parameters moved by about one unit in the last place, "
        "which show how much of eager's error was luck where a result is that sensitive to rounding). "
        f"Per class: a limit of {options.timeout:.0f} CPU seconds ({WALL_LIMIT_FACTOR} times as many of wall time) "
        f"and a {options.memory_gib:g} GiB address-space limit.",
        "",
        "- **aot_eager**: `pass` or `failing`. **neuron-mlir**: `native` (matched, no node on the CPU), `fallback` "
        "(matched; the ops that ran on the CPU, by node count), `failing` (the first line of the error). "
        "**not built**: the class cannot be constructed from its configuration offline (a missing optional "
        "package, a configuration whose defaults do not build); **no inputs**: its forward requires an argument "
        "the sweep does not make; **eager failed**: eager PyTorch itself raised on the inputs; these are outside "
        "the goal's denominator.",
        "- **text only**: a vision-language model whose images eager cannot take from the sweep (they must agree "
        "with image placeholder tokens in the text, and often with a grid of patches, in a form each family "
        "defines) runs on its text alone; its language model is checked, its vision tower is not.",
        "- **breaks**: graph breaks under neuron-mlir (the code between the graphs runs eagerly in Python).",
        "",
        f"Written {written}, results of commit{'s' if len(commits) > 1 else ''} {', '.join(commits) or '-'}; "
        f"{counts['run']} of {counts['architectures']} classes run.",
        "",
        "| | classes |",
        "|---|---|",
        f"| enumerated | {counts['architectures']} |",
        f"| run | {counts['run']} |",
        *(
            f"| {kind} | {counts['ceiling'][kind]} |"
            for kind in ("not built", "no inputs", "eager failed")
            if counts["ceiling"][kind]
        ),
        f"| aot_eager pass | {counts['ceiling_pass']} |",
        *([f"| of them, text only | {counts['text_only_of_ceiling']} |"] if counts["text_only_of_ceiling"] else []),
        f"| aot_eager failing | {counts['ceiling']['failing']} |",
        f"| of the aot_eager passes: neuron-mlir native | **{counts['native_of_ceiling']}** "
        f"({share:.1f}%, goal >= 95%) |",
        f"| of the aot_eager passes: neuron-mlir fallback | {ours['fallback']} |",
        f"| of the aot_eager passes: neuron-mlir failing | {ours['failing']} |",
        "",
    ]
    fallen = Counter(
        op
        for r in results.values()
        for op in (r.backends["neuron-mlir"].fallback_ops if "neuron-mlir" in r.backends else {})
    )
    if fallen:
        lines += [
            "Ops that ran on the CPU, by classes: " + ", ".join(f"`{op}` {n}" for op, n in fallen.most_common()) + ".",
            "",
        ]
    lines += [
        "| class | model type | parameters | aot_eager | neuron-mlir | graphs | breaks | s "
        "| fallback ops or first error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    order = {"failing": 0, "fallback": 1, "native": 2}
    ran = [a for a in selected if a.name in results]  # the classes not run yet are counted above, not listed
    for architecture in sorted(ran, key=lambda a: (order.get(classify(results[a.name])[1], 3), a.model_type, a.name)):
        result = results.get(architecture.name)
        ceiling, mine = classify(result)
        ours_result = result.backends.get("neuron-mlir") if result else None
        cells = [
            f"`{architecture.name}`",
            architecture.model_type,
            str(result.parameters) if result and result.built else "",
            ceiling,
            mine,
            str(ours_result.graphs) if ours_result else "",
            str(ours_result.graph_breaks) if ours_result else "",
            f"{result.seconds:.0f}" if result else "",
            _detail(result),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="class names or model types (shell patterns); repeatable")
    parser.add_argument("--list", action="store_true", help="list the selected classes and stop")
    parser.add_argument("--jobs", type=int, default=1, help="architectures at a time (the machine may be shared)")
    parser.add_argument("--timeout", type=float, default=900.0, help="CPU seconds per architecture")
    parser.add_argument("--memory-gib", type=float, default=8.0, help="address-space limit per architecture, 0: none")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="per-architecture results")
    parser.add_argument("--refresh", action="store_true", help="run even architectures with fresh cached results")
    parser.add_argument("--reuse-stale", action="store_true", help="take cached results of older sources too")
    parser.add_argument("--limit", type=int, help="run at most this many architectures (in the sweep's order)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=argparse.SUPPRESS)
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="the Markdown file of the report ('-': stdout)"
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="a JSON Lines record of the results: read into the cache where it has no result "
        "of a class, rewritten at the end with every result known",
    )
    parser.add_argument("--no-report", action="store_true", help="run, but leave the report alone")
    parser.add_argument("--report-only", action="store_true", help="run nothing: the report of the cached results")
    options = parser.parse_args(argv)
    backends = [b for b in options.backends.split(",") if b]
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    every = architectures()
    selected = select(every, options.only)
    if options.list:
        for a in selected:
            print(f"{a.name}\t{a.model_type}\t{a.mapping}")
        return 0
    if options.results is not None:
        copied = import_results(options.results, options.cache)
        print(f"{copied} results taken from {options.results}", file=sys.stderr)
    to_run = [] if options.report_only else selected[: options.limit] if options.limit is not None else selected
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as snapshot:
        snapshot_packages(Path(snapshot))
        run_options = Options(
            options.timeout, options.memory_gib, backends, Path(snapshot), source_fingerprint(), _commit()
        )
        results = sweep(
            to_run, options.cache, run_options, options.jobs, options.refresh, options.reuse_stale,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )  # fmt: skip
    # the report covers every selected class, with what the cache holds for those this run did not reach
    for architecture in selected:
        if architecture.name not in results:
            cached = load_cached(options.cache, architecture.name)
            if cached is not None and finished(cached):
                results[architecture.name] = cached
    if options.results is not None:
        export_results(options.results, results)
    counts = summary(selected, results)
    print(
        f"{counts['run']} of {counts['architectures']} run; aot_eager pass {counts['ceiling_pass']}, of which "
        f"neuron-mlir native {counts['native_of_ceiling']}, {dict(counts['ours_of_ceiling'])}; "
        f"in {time.perf_counter() - started:.0f} s"
    )
    if not options.no_report:
        text = report(selected, results, run_options)
        if str(options.output) == "-":
            print(text)
        else:
            from neuron_mlir.tools.doc_sections import replace_section

            replace_section(options.output, SECTION, text, title="# Models")
            print(f"wrote {options.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
