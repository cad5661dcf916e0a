"""Matmuls and convolutions compiled for the simulated NeuronCore against eager, forward and backward.

Shapes avoid multiples of the tile sizes (128 partitions, 512-wide PSUM banks), batches are 1 and odd, and
channel counts 1, 3 and 130 (more than one partition tile).
"""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch

import neuron_mlir


def _compiled_matches_eager(fn, *inputs, grads: bool = False):
    inputs = [None if x is None else x.detach().clone().requires_grad_(grads and x.is_floating_point()) for x in inputs]
    mirror = [None if x is None else x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    out = torch.compile(fn, backend="neuron-mlir")(*inputs)
    expected = fn(*mirror)
    assert_close_to_torch(out, expected, "forward")
    if grads:
        seed = torch.randn_like(expected)
        out.backward(seed)
        expected.backward(seed)
        for index, (a, b) in enumerate(zip(inputs, mirror, strict=True)):
            if b is not None and b.requires_grad:
                assert a is not None
                assert_close_to_torch(a.grad, b.grad, f"grad of input {index}")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


MATMULS = [
    ("mm_k_tiles", lambda a, b: a @ b, [(1, 257), (257, 130)]),
    ("mm_n_tiles", lambda a, b: a @ b, [(37, 3), (3, 513)]),
    ("mm_k_contiguous_rhs", lambda a, b: a @ b.t(), [(5, 130), (129, 130)]),
    ("bmm_batch_1", torch.bmm, [(1, 130, 7), (1, 7, 3)]),
    ("bmm_batch_3", torch.bmm, [(3, 5, 129), (3, 129, 1)]),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), [(130,), (3, 131), (131, 130)]),
    ("mm_empty_k", lambda a, b: a @ b, [(5, 0), (0, 7)]),
    (
        "addbmm_batch_3",
        lambda c, a, b: torch.addbmm(c, a, b, beta=0.5, alpha=1.5),
        [(1, 130), (3, 5, 43), (3, 43, 130)],
    ),
    ("addmv", lambda c, a, v: torch.addmv(c, a, v, alpha=-2.0), [(130,), (130, 129), (129,)]),
    ("bilinear", lambda x1, x2, w, b: torch.nn.functional.bilinear(x1, x2, w, b), [(3, 5), (3, 4), (7, 5, 4), (7,)]),
    # Blocked matmuls (lowering/convert_torch_to_tile/matmul.py): block rows of several m sub-tiles with a partial
    # last one, K in pairs of chunks plus a partial tile, output blocks with a partial last one.
    ("mm_blocked", lambda a, b: a @ b, [(300, 1100), (1100, 700)]),
    ("mm_blocked_bf16", lambda a, b: a.bfloat16() @ b.bfloat16(), [(600, 390), (390, 1100)]),
    ("mm_blocked_lhs_k_strided", lambda a, b: a.t() @ b, [(1100, 260), (1100, 130)]),
    ("mm_blocked_k_contiguous_rhs", lambda a, b: a @ b.t(), [(130, 600), (700, 600)]),
    ("mm_k_longer_than_a_panel", lambda a, b: a @ b, [(3, 45000), (45000, 5)]),
]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "shapes"), MATMULS, ids=[case[0] for case in MATMULS])
def test_matmul(name, fn, shapes):
    torch.manual_seed(0)
    _compiled_matches_eager(fn, *[torch.randn(s) for s in shapes], grads=name in ("mm_k_tiles", "bmm_batch_3"))


CONVOLUTIONS = [
    # name, function, input shape, weight shape, bias size (None: no bias)
    ("conv2d_batch1_c1_to_c3", lambda x, w, b: F.conv2d(x, w, b, padding=1), (1, 1, 9, 11), (3, 1, 3, 3), 3),
    ("conv2d_batch3_c3_to_c130_strided", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=(1, 2)),
     (3, 3, 10, 13), (130, 3, 3, 2), 130),
    ("conv2d_c130_to_c1_dilated", lambda x, w, b: F.conv2d(x, w, b, dilation=2), (1, 130, 7, 8), (1, 130, 2, 3), 1),
    ("conv2d_grouped", lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), groups=3), (3, 6, 5, 9), (9, 2, 3, 3), None),
    ("conv2d_wide_rows", lambda x, w, b: F.conv2d(x, w, b), (1, 1, 4, 600), (3, 1, 2, 2), 3),
    ("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=3, padding=2), (3, 3, 37), (130, 3, 5), 130),
    ("conv3d", lambda x, w, b: F.conv3d(x, w, b, padding=1, stride=(1, 2, 1)), (1, 3, 4, 5, 6), (3, 3, 3, 3, 2), 3),
    ("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
     (3, 3, 5, 4), (3, 130, 3, 3), 130),
    ("conv_transpose1d_grouped", lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, groups=3, dilation=2),
     (1, 3, 7), (3, 1, 3), None),
    # strided: input bands read by strided windows; several output-channel tiles sharing each band; grouped
    ("conv2d_strided_c130_to_c300", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), (2, 130, 11, 12),
     (300, 130, 3, 3), 300),
    ("conv1d_strided_grouped", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, groups=2), (1, 260, 37),
     (260, 130, 3), None),
    # few input channels, strided: (channel, kernel row) pairs on the partitions; rows too wide to copy per
    # output row go with the kernel rows on the partitions
    ("conv2d_row_packed_wide_rows", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 3), padding=(1, 0)),
     (1, 16, 20, 80), (5, 16, 8, 3), 5),
    # depthwise: one channel per group, 128 channels per matmul through diagonal stationaries
    ("depthwise_7x7", lambda x, w, b: F.conv2d(x, w, b, padding=3, groups=130), (2, 130, 9, 11), (130, 1, 7, 7), 130),
    ("depthwise_strided", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=5), (1, 5, 10, 13),
     (5, 1, 3, 3), None),
    ("depthwise_dilated", lambda x, w, b: F.conv2d(x, w, b, dilation=(2, 1), padding=2, groups=3), (1, 3, 8, 7),
     (3, 1, 3, 3), 3),
    ("depthwise_wide_rows", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), (1, 2, 3, 700), (2, 1, 3, 3), None),
    ("depthwise_causal_conv1d", lambda x, w, b: F.conv1d(x, w, b, padding=3, groups=130)[..., :37], (2, 130, 37),
     (130, 1, 4), 130),
    ("depthwise_long_kernel_conv1d", lambda x, w, b: F.conv1d(x, w, b, padding=64, groups=130), (1, 130, 40),
     (130, 1, 130), None),
]  # fmt: skip


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "x_shape", "w_shape", "bias"), CONVOLUTIONS, ids=[c[0] for c in CONVOLUTIONS])
def test_convolution_forward(name, fn, x_shape, w_shape, bias):
    torch.manual_seed(1)
    _compiled_matches_eager(fn, torch.randn(x_shape), torch.randn(w_shape), None if bias is None else torch.randn(bias))


BACKWARD = [c for c in CONVOLUTIONS if c[0] in ("conv2d_batch3_c3_to_c130_strided", "conv2d_grouped", "conv1d",
                                                 "conv2d_strided_c130_to_c300", "conv1d_strided_grouped",
                                                 "conv2d_row_packed_wide_rows",
                                                 "conv3d", "conv_transpose2d", "depthwise_7x7", "depthwise_strided",
                                                 "depthwise_dilated", "depthwise_causal_conv1d")]  # fmt: skip

# Backward only (their forward is the general strided path's): the weight gradient from transposed panels (two
# channel tiles per DMA, a block of two position tiles, the second partial, dilated rows), and windows that do not
# overlap (kernel <= stride), whose input gradient is one product per tap, zeros where no window reaches (kernel <
# stride, input rows past the last window), in several blocks of output rows.
BACKWARD += [
    ("conv2d_strided_dilated_c256", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=(2, 1)),
     (1, 256, 80, 10), (256, 256, 3, 3), 256),
    ("conv2d_1x1_strided_c130_to_c260", lambda x, w, b: F.conv2d(x, w, b, stride=2), (1, 130, 9, 11),
     (260, 130, 1, 1), 260),
    ("conv2d_disjoint_uneven", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 3)), (1, 5, 13, 16), (7, 5, 2, 2), None),
    ("conv2d_patches_row_blocks", lambda x, w, b: F.conv2d(x, w, b, stride=2), (1, 4, 66, 64), (8, 4, 2, 2), 8),
    ("conv1d_disjoint", lambda x, w, b: F.conv1d(x, w, b, stride=4), (2, 6, 30), (9, 6, 3), 9),
    # ConvNeXt's block: a channels-last map seen as [N, C, H, W], its gradient permuted back the same way; the
    # depthwise lowering reads both through contiguous copies (`contiguous_if_transposed`)
    ("depthwise_channels_last",
     lambda x, w, b: F.conv2d(x.permute(0, 3, 1, 2), w, b, padding=3, groups=130).permute(0, 2, 3, 1),
     (2, 9, 11, 130), (130, 1, 7, 7), 130),
    # ConvNeXt's downsampling of a channels-last map, and its stem whose gradient comes back channels-last: both
    # read through contiguous copies (the input in every path, the gradient where the weight gradient contracts
    # output rows)
    ("conv2d_channels_last_downsample", lambda x, w, b: F.conv2d(x.permute(0, 3, 1, 2), w, b, stride=2),
     (2, 12, 12, 96), (192, 96, 2, 2), 192),
    ("conv2d_stem_channels_last_gradient", lambda x, w, b: F.conv2d(x, w, b, stride=4).permute(0, 2, 3, 1),
     (2, 3, 64, 64), (96, 3, 4, 4), 96),
]  # fmt: skip


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "x_shape", "w_shape", "bias"), BACKWARD, ids=[c[0] for c in BACKWARD])
def test_convolution_backward(name, fn, x_shape, w_shape, bias):
    """convolution_backward: grad_input (transposed convolution), grad_weight (correlation), grad_bias."""
    torch.manual_seed(2)
    b = None if bias is None else torch.randn(bias)
    _compiled_matches_eager(fn, torch.randn(x_shape), torch.randn(w_shape), b, grads=True)


# The strided convolutions of real-width models at their own shapes: ViT-B/16's patch embedding and ConvNeXt-T's
# stem (stride = kernel, 3 input channels: kernel rows packed onto the partitions), ResNet-50's 7x7 stem (packed,
# overlapping rows), whisper-small's second conv, ResNet's 3x3 and 1x1 stride-2 convs and ConvNeXt's
# downsampling (input bands read by strided windows). A stem's input is an image, which takes no gradient.
REAL_STRIDED = [
    ("vit_patch_embed", lambda: torch.nn.Conv2d(3, 768, 16, 16), (2, 3, 224, 224)),
    ("convnext_stem", lambda: torch.nn.Conv2d(3, 96, 4, 4), (2, 3, 224, 224)),
    ("resnet_stem", lambda: torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False), (2, 3, 224, 224)),
    ("whisper_conv2", lambda: torch.nn.Conv1d(768, 768, 3, stride=2, padding=1), (1, 768, 3000)),
    ("resnet_3x3_s2", lambda: torch.nn.Conv2d(256, 256, 3, 2, 1, bias=False), (2, 256, 28, 28)),
    ("resnet_1x1_s2", lambda: torch.nn.Conv2d(512, 1024, 1, 2, bias=False), (2, 512, 28, 28)),
    ("convnext_downsample", lambda: torch.nn.Conv2d(96, 192, 2, 2), (2, 96, 56, 56)),
]


def _step(module: torch.nn.Module, x: torch.Tensor, seed: torch.Tensor) -> list[torch.Tensor]:
    out = module(x)
    out.backward(seed.to(out.dtype))
    grads = [p.grad for p in module.parameters()]
    return [out.detach(), *([x.grad] if x.requires_grad else []), *grads]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize(("name", "build", "x_shape"), REAL_STRIDED, ids=[c[0] for c in REAL_STRIDED])
def test_strided_convolution_at_real_size(name, build, x_shape, dtype):
    """Forward and gradients against a float64 run, within a small multiple of eager's own error."""
    from support import assert_close_to_golden

    torch.manual_seed(3)
    module = build().to(dtype)
    image = x_shape[1] == 3
    x = torch.randn(x_shape, dtype=dtype)
    seed = torch.randn(module(x).shape)

    def fresh(m: torch.nn.Module, tensor: torch.Tensor) -> tuple[torch.nn.Module, torch.Tensor]:
        import copy

        return copy.deepcopy(m), tensor.detach().clone().requires_grad_(not image)

    golden = _step(*fresh(module.double(), x.double()), seed.double())
    module = module.to(dtype)
    eager = _step(*fresh(module, x), seed)
    compiled_module, compiled_x = fresh(module, x)
    got = _step(torch.compile(compiled_module, backend="neuron-mlir"), compiled_x, seed)  # type: ignore[arg-type]  # compiling a Module gives a Module
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    names = ["output", *(["grad of input"] if not image else []), "grad of weight", "grad of bias"]
    for what, a, e, g in zip(names, got, eager, golden, strict=False):
        assert_close_to_golden(a, e, g, what)


# Kernel = stride in 16-bit (patch embeddings): the patches come onto the partitions by DMA transposes
# (`emit_patch_convolution`, `emit_patch_weight_gradient`). Rows and columns past the last whole patch, two output-
# channel tiles (the second partial), channels sharing a chunk of the contraction (4 x 16 kernels, 64 rows per
# channel, the last chunk partial), and several tiles of output rows in both directions with one full output-
# channel tile.
PATCHES = [
    ("rows_past_the_last_patch", (2, 3, 40, 35), (130, 3, 16, 16), (16, 16)),
    ("channels_share_a_chunk", (1, 5, 12, 336), (7, 5, 4, 16), (4, 16)),
    ("several_position_tiles", (1, 2, 256, 640), (128, 2, 16, 16), (16, 16)),
]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize(("name", "x_shape", "w_shape", "stride"), PATCHES, ids=[c[0] for c in PATCHES])
def test_patch_convolution(monkeypatch, name, x_shape, w_shape, stride, dtype):
    """Forward and the three gradients against eager in the same dtype, through the patch path."""
    from neuron_mlir.lowering.convert_torch_to_tile import convolution

    taken: list[str] = []
    for function in ("emit_patch_convolution", "emit_patch_weight_gradient"):
        original = getattr(convolution, function)

        def recording(*args, _original=original, _name=function, **kwargs):
            taken.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(convolution, function, recording)
    torch.manual_seed(4)
    x, w, b = torch.randn(x_shape), torch.randn(w_shape) / 16, torch.randn(w_shape[0])
    fn = lambda x, w, b: F.conv2d(x, w, b, stride=stride)  # noqa: E731
    _compiled_matches_eager(fn, x.to(dtype), w.to(dtype), b.to(dtype), grads=True)
    assert sorted(set(taken)) == ["emit_patch_convolution", "emit_patch_weight_gradient"], taken
