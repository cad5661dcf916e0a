"""The transformers model sweep (tools/model_sweep.py): enumeration, tiny configurations, inputs, the verdicts
of a run against eager, the child process's timeout, and its own section of docs/models.md. The backend here is
aot_eager (and a deliberately wrong one); the sweep itself (`make model-sweep`) runs neuron-mlir."""

import json
import os
from dataclasses import asdict

import pytest

from neuron_mlir.tools import doc_sections, model_sweep

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def every_architecture():
    return {a.name: a for a in model_sweep.architectures()}


def test_enumeration_from_the_auto_mappings(every_architecture):
    # hundreds of classes; each built from its own configuration, not another model type's that reuses the class
    assert len(every_architecture) > 1000
    assert every_architecture["LlamaForCausalLM"].model_type == "llama"
    assert every_architecture["GPT2LMHeadModel"].model_type == "gpt2"
    assert every_architecture["WhisperForConditionalGeneration"].model_type == "whisper"
    # every model type's preferred class comes before any type's second one
    ranks = [a.rank for a in model_sweep.architectures()]
    assert ranks == sorted(ranks)
    assert ranks[0] == 0
    chosen = model_sweep.select(every_architecture.values(), ["gpt2*"])
    assert {a.model_type for a in chosen} == {"gpt2"}


def test_tiny_configurations():
    llama = model_sweep.tiny_config("llama")
    assert (llama.hidden_size, llama.num_attention_heads, llama.num_hidden_layers) == (32, 2, 2)
    assert llama.vocab_size == 128
    assert llama.intermediate_size == 64
    assert llama.use_cache is False
    assert all(t is None or 0 <= t < 128 for t in (llama.bos_token_id, llama.eos_token_id, llama.pad_token_id))
    swin = model_sweep.tiny_config("swin")
    assert swin.embed_dim == 32
    assert set(swin.depths) == {1}
    assert max(swin.num_heads) <= 2
    assert model_sweep._scaled_sections([16, 24, 24], 8) == [2, 3, 3]  # multimodal rotary sections
    whisper = model_sweep.tiny_config("whisper")
    assert whisper.d_model == 32
    assert whisper.max_source_positions == 16
    assert whisper.num_mel_bins == 16
    cvt = model_sweep.tiny_config("cvt")  # dropout and stochastic depth given per stage
    assert [list(cvt.drop_path_rate), list(cvt.drop_rate), list(cvt.attention_drop_rate)] == [[0.0] * 3] * 3
    grounding_dino = model_sweep.tiny_config("grounding-dino")  # stochastic depth of its fusion layers
    assert grounding_dino.fusion_droppath == 0.0
    assert model_sweep.tiny_config("efficientnet").drop_connect_rate == 0.0
    vits = model_sweep.tiny_config("vits")  # the noise it samples for its prior and durations, like dropout, off
    assert (vits.noise_scale, vits.noise_scale_duration) == (0.0, 0.0)
    gemma4 = model_sweep.tiny_config("gemma4_text")  # per-layer input embeddings: 262,144 x 256 by default
    assert (gemma4.vocab_size_per_layer_input, gemma4.hidden_size_per_layer_input) == (128, 32)
    dinov3 = model_sweep.tiny_config("dinov3_vit")  # its RoPE's random training augmentations, like dropout, off
    assert (dinov3.pos_embed_shift, dinov3.pos_embed_jitter, dinov3.pos_embed_rescale) == (None, None, None)
    qwen3_next = model_sweep.tiny_config("qwen3_next")  # its linear attention's heads, as the attention's
    assert (qwen3_next.linear_num_key_heads, qwen3_next.linear_num_value_heads) == (2, 2)
    assert (qwen3_next.linear_key_head_dim, qwen3_next.linear_value_head_dim) == (16, 16)
    # a sparse-attention indexer its defaults enable but leave unsized (Qwen4-Exp's QSA), sized when completed
    qwen4_exp = model_sweep.tiny_config("qwen4_exp_text", complete=True)
    assert (qwen4_exp.indexer_kv_heads, qwen4_exp.indexer_head_dim) == (1, model_sweep.HEAD_DIM)
    assert qwen4_exp.indexer_budget % qwen4_exp.indexer_compress_ratio == 0
    bamba = model_sweep.tiny_config("bamba")  # Mamba's heads must divide its expanded width
    assert (bamba.mamba_expand * bamba.hidden_size) % bamba.mamba_n_heads == 0
    # multimodal rotary sections the model's code defaults to (sized for its full head) are named, for the shrunk
    # head's rotated half: all of it (GLM-4V), half of it (GLM-4V-MoE's partial rotary factor 0.5)
    glm4v = model_sweep.tiny_config("glm4v").text_config
    assert sum(glm4v.rope_parameters["mrope_section"]) == model_sweep.HEAD_DIM // 2
    glm4v_moe = model_sweep.tiny_config("glm4v_moe").text_config
    assert sum(glm4v_moe.rope_parameters["mrope_section"]) == model_sweep.HEAD_DIM // 4
    # a model mixing kinds of layers keeps one of each (Gemma 3's full attention every sixth layer; OLMo-hybrid's
    # linear attention with a full one), and its per-layer overrides follow the kept layers (NeoMME's)
    assert model_sweep.tiny_config("gemma3_text").layer_types == ["sliding_attention", "full_attention"]
    assert model_sweep.tiny_config("olmo_hybrid").layer_types == ["linear_attention", "full_attention"]
    neomme = model_sweep.tiny_config("neomme")
    assert neomme._heterogeneity_spec.per_layer_overrides == {1: {"sliding_window": None}}
    assert model_sweep.kept_layers(["a", "a", "b", "a", "c"], 5) == [0, 2]
    assert model_sweep.kept_layers(None, 12) == [0, 1]
    # HGNetV2's stage widths with its hidden sizes, so its classifier reads what its last stage gives; the DETR
    # family's encoder width and object queries, as many as a tiny image's positions allow top-k to pick
    hgnet = model_sweep.tiny_config("hgnet_v2")
    assert max(hgnet.stage_out_channels) == max(hgnet.hidden_sizes) == 32
    d_fine = model_sweep.tiny_config("d_fine")
    assert (d_fine.encoder_hidden_dim, d_fine.num_queries, max(d_fine.encoder_in_channels)) == (32, 8, 32)
    # a depth head's four feature maps from its ViT backbone's layers 9-12: four layers, all of them outputs
    backbone = model_sweep.tiny_config("depth_anything").backbone_config
    assert (backbone.num_hidden_layers, backbone.out_features) == (4, ["stage1", "stage2", "stage3", "stage4"])
    # group normalisation's groups divide a bottleneck's shrunk width (BiT); a depthwise upsampling over the
    # hidden width stays depthwise (Mimi); a time series' context and a video's frames shrink like an image
    assert model_sweep.tiny_config("bit").num_groups == model_sweep.NORM_GROUPS
    mimi = model_sweep.tiny_config("mimi")
    assert mimi.upsample_groups == mimi.hidden_size == model_sweep.WIDTH
    assert model_sweep.tiny_config("patchtst").context_length == 32
    assert model_sweep.tiny_config("timesfm").context_length == model_sweep.CONTEXT
    assert model_sweep.tiny_config("vivit").num_frames == model_sweep.FRAMES
    # Mamba-2's heads tile its expanded width; a hierarchical model keeps a per-stage list per stage (Swin V2);
    # a windowed ViT's windows fit a tiny image (LW-DETR)
    mamba2 = model_sweep.tiny_config("mamba2")
    assert mamba2.hidden_size * mamba2.expand == mamba2.num_heads * mamba2.head_dim
    assert mamba2.num_heads % mamba2.n_groups == 0
    swinv2 = model_sweep.tiny_config("swinv2")
    assert len(swinv2.pretrained_window_sizes) == len(swinv2.depths)
    assert model_sweep.tiny_config("lw_detr_vit").num_windows == 4


def test_a_timm_backbone_becomes_transformers_resnet():
    # the DETR family defaults to timm's ResNet-50, and timm is no dependency: transformers' own ResNet, with the
    # same feature maps, shrunk like any backbone
    backbone = model_sweep.tiny_config("detr").backbone_config
    assert backbone.model_type == "resnet"
    assert backbone.out_indices == [1, 2, 3, 4]
    assert max(backbone.hidden_sizes) == model_sweep.WIDTH


def test_sizes_the_defaults_leave_unset_are_given_only_where_needed(every_architecture):
    # ESM leaves its vocabulary and Ministral its head width to a checkpoint: their defaults build no model, so
    # the sweep completes them; Gemma 4 builds as it is, and its unset expert count (no mixture of experts) stays
    assert model_sweep.tiny_config("esm").vocab_size is None
    esm = model_sweep.tiny_config("esm", complete=True)
    assert (esm.vocab_size, esm.pad_token_id) == (model_sweep.VOCAB, 1)  # its position ids skip the padding
    assert model_sweep.tiny_config("ministral", complete=True).head_dim == model_sweep.HEAD_DIM
    nemotron = model_sweep.tiny_config("nemotron", complete=True)  # unset key/value heads: one per query head
    assert nemotron.num_key_value_heads == nemotron.num_attention_heads
    for name in ("EsmForMaskedLM", "MinistralForCausalLM"):
        model, config = model_sweep.build(every_architecture[name])
        assert model_sweep.make_inputs(model, config, every_architecture[name])
    _, gemma4 = model_sweep.build(every_architecture["Gemma4ForCausalLM"])
    assert gemma4.num_experts is None
    # DeepSeek-V2 names its experts but not how many a token takes: a tiny top-k, or its router's top-k fails
    assert model_sweep.tiny_config("deepseek_v2").num_experts_per_tok == 2


def test_a_vision_tower_of_flattened_patches_gets_them_with_their_grid(every_architecture):
    # Qwen3-VL's vision tower takes each image's patches flattened over channels, frames and pixels, and the
    # images' (time, height, width) in patches: two merged patches a side
    architecture = every_architecture["Qwen3VLVisionModel"]
    model, config = model_sweep.build(architecture)
    inputs = model_sweep.make_inputs(model, config, architecture)
    side = 2 * config.spatial_merge_size
    assert inputs["grid_thw"].tolist() == [[1, side, side]] * 2
    flattened = config.in_channels * config.temporal_patch_size * config.patch_size**2
    assert tuple(inputs["hidden_states"].shape) == (2 * side * side, flattened)
    model(**inputs)  # eager runs it


def test_time_series_and_video_inputs(every_architecture):
    patchtst = every_architecture["PatchTSTModel"]
    model, config = model_sweep.build(patchtst)
    assert tuple(model_sweep.make_inputs(model, config, patchtst)["past_values"].shape) == (2, 32, 1)
    timesfm = every_architecture["TimesFmModel"]
    model, config = model_sweep.build(timesfm)
    inputs = model_sweep.make_inputs(model, config, timesfm)
    assert tuple(inputs["past_values"].shape) == tuple(inputs["past_values_padding"].shape) == (2, 64)
    assert tuple(inputs["freq"].shape) == (2, 1)
    # a forecaster without a horizon in its defaults gets one; its past reaches back over its lags too
    forecaster = every_architecture["TimeSeriesTransformerModel"]
    model, config = model_sweep.build(forecaster)
    inputs = model_sweep.make_inputs(model, config, forecaster)
    assert config.prediction_length == model_sweep.SEQUENCE
    past = config.context_length + max(config.lags_sequence)
    assert tuple(inputs["past_values"].shape) == tuple(inputs["past_observed_mask"].shape) == (2, past)
    assert tuple(inputs["past_time_features"].shape) == (2, past, config.num_time_features)
    model(**inputs)  # eager runs it
    vjepa2 = every_architecture["VJEPA2Model"]
    model, config = model_sweep.build(vjepa2)
    assert tuple(model_sweep.make_inputs(model, config, vjepa2)["pixel_values_videos"].shape) == (2, 4, 3, 32, 32)


def test_inputs_by_argument_name(every_architecture):
    model, config = model_sweep.build(every_architecture["WhisperForConditionalGeneration"])
    inputs = model_sweep.make_inputs(model, config, every_architecture["WhisperForConditionalGeneration"])
    assert tuple(inputs["input_features"].shape) == (2, 16, 32)
    assert tuple(inputs["decoder_input_ids"].shape) == (2, 8)
    assert sum(p.numel() for p in model.parameters()) < 200_000


def test_a_masked_autoencoder_is_given_its_noise(every_architecture):
    # ViT-MAE ranks its patches by noise it draws unless given it: the sweep gives it, one value per patch, so
    # eager and the device mask the same patches
    architecture = every_architecture["ViTMAEModel"]
    model, config = model_sweep.build(architecture)
    inputs = model_sweep.make_inputs(model, config, architecture)
    patches = (config.image_size // config.patch_size) ** 2
    assert tuple(inputs["noise"].shape) == (model_sweep.BATCH, patches)
    whisper = every_architecture["WhisperForConditionalGeneration"]
    model, config = model_sweep.build(whisper)
    assert "noise" not in model_sweep.make_inputs(model, config, whisper)


def test_a_vision_language_model_runs_on_its_text_alone(every_architecture):
    # its images must agree with placeholder tokens in its text, in a form each family defines: eager rejects the
    # sweep's pixels, and the model runs on its text, marked so
    architecture = every_architecture["AyaVisionModel"]
    model, config = model_sweep.build(architecture)
    assert "pixel_values" in model_sweep.make_inputs(model, config, architecture)
    assert "pixel_values" not in model_sweep.make_inputs(model, config, architecture, model_sweep.TEXT_ONLY)
    result = model_sweep.run_architecture(architecture, lambda result: None, backends=())
    assert (result.error, result.inputs) == ("", "text only")
    # a model without image tokens keeps its pixels in every variant
    clip = every_architecture["CLIPModel"]
    model, config = model_sweep.build(clip)
    assert "pixel_values" in model_sweep.make_inputs(model, config, clip, model_sweep.TEXT_ONLY)


def test_a_model_with_batch_norm_sees_larger_images(every_architecture):
    # at 32 pixels a ResNet's last stage is 1 x 1 and its batch norm normalises two values per channel: the
    # gradients through it are float32 noise; the sweep builds such models for larger images
    resnet = every_architecture["ResNetModel"]
    result = model_sweep.run_architecture(resnet, lambda result: None, backends=())
    assert (result.error, result.inputs) == ("", f"{model_sweep.BATCH_NORM_IMAGE}-pixel images")
    model, config = model_sweep.build(resnet, model_sweep.BATCH_NORM_IMAGE)
    pixels = model_sweep.make_inputs(model, config, resnet, image=model_sweep.BATCH_NORM_IMAGE)["pixel_values"]
    assert pixels.shape[-2:] == (model_sweep.BATCH_NORM_IMAGE, model_sweep.BATCH_NORM_IMAGE)
    # a model without batch norm keeps the small images
    vit = every_architecture["ViTModel"]
    assert model_sweep.run_architecture(vit, lambda result: None, backends=()).inputs == ""


class _TinyLanguageModel:
    """Stands in for a transformers class in the verdict test: an embedding, a layer norm and a head (a real
    class costs a minute of Dynamo tracing on a loaded machine; the sweep itself runs them all)."""

    @staticmethod
    def build(architecture):
        import torch
        from transformers import PretrainedConfig

        class Model(torch.nn.Module):
            main_input_name = "input_ids"

            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(128, 16)
                self.norm = torch.nn.LayerNorm(16)
                self.head = torch.nn.Linear(16, 128)
                self.unused = torch.nn.Linear(4, 4)  # no gradient in eager, maybe zeros elsewhere: the same

            def forward(self, input_ids):
                return (self.head(self.norm(self.embed(input_ids))),)

        torch.manual_seed(0)
        return Model(), PretrainedConfig(vocab_size=128)


def test_verdicts_against_eager(every_architecture, monkeypatch):
    import torch

    # a backend whose forward is off by 1% must fail the comparison that aot_eager passes
    def wrong(graph_module, example_inputs):
        def run(*args):
            outputs = graph_module(*args)
            first = outputs[0] if isinstance(outputs, tuple | list) else outputs
            if isinstance(first, torch.Tensor) and first.is_floating_point():
                first = first * 1.01
            return (first, *outputs[1:]) if isinstance(outputs, tuple | list) else first

        return run

    monkeypatch.setattr(model_sweep, "build", _TinyLanguageModel.build)
    saved: list[model_sweep.ArchitectureResult] = []
    result = model_sweep.run_architecture(every_architecture["GPT2LMHeadModel"], saved.append, ["aot_eager", wrong])
    assert result.built
    assert not result.error
    assert saved[-1] is result
    assert result.backends["aot_eager"].status == "pass", result.backends["aot_eager"].error
    assert result.backends["wrong"].status == "failing"
    assert result.backends["wrong"].error.startswith("forward output 0: "), result.backends["wrong"].error
    assert model_sweep.classify(result) == ("pass", "not run")


def test_a_child_that_times_out_keeps_what_it_saved(every_architecture, tmp_path, monkeypatch):
    # a server that imports nothing ahead: the child imports what it needs, within its 1 s
    monkeypatch.setattr(model_sweep, "preload_modules", lambda: [])
    options = model_sweep.Options(1.0, 0.0, ["aot_eager"], None, "f", "c")
    result = model_sweep.run_child(every_architecture["GPT2LMHeadModel"], tmp_path, options)
    # on a loaded machine the child may not get its CPU second before the wall-clock limit (4 s): either kills it
    errors = result.error + "".join(b.error for b in result.backends.values())
    assert "over the CPU limit (1 s)" in errors or "over the wall-clock limit (4 s)" in errors, errors
    assert model_sweep.load_cached(tmp_path, "GPT2LMHeadModel") is not None
    assert model_sweep.classify(result)[1] != "native"


def test_each_generator_rewrites_only_its_section(tmp_path):
    page = tmp_path / "models.md"
    doc_sections.replace_section(page, "real-width", "## Real width\n\nold", title="# Models")
    doc_sections.replace_section(page, "model-sweep", "## Sweep\n\nfirst")
    doc_sections.replace_section(page, "real-width", "## Real width\n\nnew")
    text = page.read_text()
    assert text.startswith("# Models\n")
    assert doc_sections.read_section(page, "real-width") == "## Real width\n\nnew"
    assert doc_sections.read_section(page, "model-sweep") == "## Sweep\n\nfirst"
    assert text.index("Real width") < text.index("Sweep")
    assert "old" not in text


def test_the_results_record_seeds_the_cache_and_keeps_other_classes(tmp_path):
    record, cache = tmp_path / "record.jsonl", tmp_path / "cache"
    passing = model_sweep.BackendResult("pass")
    first = model_sweep.ArchitectureResult("AModel", "a", built=True, backends={"aot_eager": passing}, commit="c1")
    second = model_sweep.ArchitectureResult("BModel", "b", error="not built: no", commit="c1")
    model_sweep.export_results(record, {"BModel": second, "AModel": first})
    assert [line.split('"name": ')[1][:8] for line in record.read_text().splitlines()] == ['"AModel"', '"BModel"']

    # a run of one class replaces that class's record and leaves the other's
    rerun = model_sweep.ArchitectureResult("BModel", "b", built=True, backends={"aot_eager": passing}, commit="c2")
    model_sweep.export_results(record, {"BModel": rerun})
    # a result still running (a backend without a verdict) is not recorded
    running = model_sweep.ArchitectureResult(
        "CModel", "c", built=True, backends={"aot_eager": model_sweep.BackendResult("failing", model_sweep.UNFINISHED)}
    )
    model_sweep.export_results(record, {"CModel": running})

    # an existing cache entry wins over the record's
    cache.mkdir()
    model_sweep.cache_path(cache, "AModel").write_text(json.dumps(asdict(rerun) | {"name": "AModel", "commit": "c3"}))
    assert model_sweep.import_results(record, cache) == 1
    kept = model_sweep.load_cached(cache, "AModel")
    assert kept is not None
    assert kept.commit == "c3"
    assert model_sweep.load_cached(cache, "BModel") == rerun
    assert model_sweep.load_cached(cache, "CModel") is None


def test_the_float64_reference_widens_what_a_model_makes_in_float32():
    # SLANet's decoder makes its state and one-hot tokens in float32 whatever its weights: under the reference
    # run's mode they are float64 too, so the reference exists
    import torch

    class MakesFloat32(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            state = torch.zeros(x.shape, dtype=torch.float32)
            tokens = torch.nn.functional.one_hot(x.argmax(-1), 4).float()
            return self.linear(state + tokens.to(torch.float32)) + x

    model = MakesFloat32().double()
    with pytest.raises(RuntimeError):
        model(torch.randn(2, 4, dtype=torch.float64))
    with model_sweep._float32_as_float64():
        assert model(torch.randn(2, 4, dtype=torch.float64)).dtype == torch.float64


def test_an_audio_codec_gets_a_waveform_with_its_channels(every_architecture):
    # speech encoders take (batch, samples); the codecs (EnCodec, DAC, Mimi) (batch, channels, samples): tried next
    architecture = every_architecture["EncodecModel"]
    model, config = model_sweep.build(architecture)
    assert model_sweep.make_inputs(model, config, architecture)["input_values"].dim() == 2
    waveform = model_sweep.make_inputs(model, config, architecture, variant=1)["input_values"]
    assert tuple(waveform.shape) == (2, config.audio_channels, model_sweep.AUDIO_SAMPLES)
    model(input_values=waveform)  # eager runs it


def test_tiny_configurations_have_lists_as_checkpoint_files_give_them():
    # ConvNeXt's default hidden sizes are a tuple, which its backbone concatenates to a list
    convnext = model_sweep.tiny_config("convnext")
    assert isinstance(convnext.hidden_sizes, list)
    model, _ = model_sweep.build(
        model_sweep.Architecture("ConvNextBackbone", "convnext", "MODEL_FOR_BACKBONE_MAPPING_NAMES", 0)
    )
    assert model.num_features == [convnext.hidden_sizes[0], *convnext.hidden_sizes]


def test_the_float64_reference_of_fused_experts(every_architecture):
    # a mixture of experts runs its experts through grouped_mm, which has no float64 version: the reference copy
    # loops over them instead, and computes what the float32 model computes
    import torch

    model, config = model_sweep.build(every_architecture["PhimoeModel"])
    tokens = torch.randint(0, config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    with pytest.raises(RuntimeError, match="mat_a"):
        model.double()(input_ids=tokens)
    model.float().eval()  # training routes by sampling
    double = model_sweep.float64_copy(model)
    assert next(model.parameters()).dtype == torch.float32
    with torch.no_grad():
        expected = model(input_ids=tokens).last_hidden_state
        got = double(input_ids=tokens).last_hidden_state
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.float(), expected, rtol=1e-4, atol=1e-4)


def test_rounding_twins_raise_the_bar_only_for_results_that_need_them():
    import torch

    def step(*values, dtype=torch.float32):
        return model_sweep.Step([torch.tensor(v, dtype=dtype) for v in values], [], {})

    golden = step([1.0, 2.0], [3.0], dtype=torch.float64)
    eager = step([1.0, 2.0], [3.0])
    # an ulp-moved copy of the model that eager gets 2e-4 (of the largest magnitude) wrong
    twin = (step([1.0, 2.5005], [3.0006]), step([1.0, 2.5], [3.0], dtype=torch.float64))
    asked = []

    def twins():
        asked.append(True)
        return [twin]

    assert model_sweep._compare_step(step([1.0, 2.0], [3.0]), eager, lambda: golden, twins) is None
    assert not asked  # matching eager within the dtype's tolerance needs no float64 run, nor twins
    assert model_sweep._compare_step(step([1.0, 2.002], [3.003]), eager, lambda: golden, twins) is None
    assert len(asked) == 1  # computed once for both outputs
    problem = model_sweep._compare_step(step([1.0, 2.02], [3.0]), eager, lambda: golden, twins)
    assert problem is not None
    assert problem.startswith("forward output 0: error"), problem
    problem = model_sweep._compare_step(step([1.0, 2.002], [3.0]), eager, lambda: golden)
    assert problem is not None, "without twins eager's exact result leaves a few ulps"
