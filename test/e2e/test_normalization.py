"""Layer, group and batch norm through torch.compile(backend="neuron-mlir"): forward, every gradient and the
running statistics against eager, in training and eval mode."""

import copy
from collections.abc import Callable

import pytest
import torch
from support import assert_close_to_golden, assert_close_to_torch

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _train_step(make, x, weight_seed=0):
    torch.manual_seed(weight_seed)
    eager = make()
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="neuron-mlir")
    outputs, grads = [], []
    for run in (eager, compiled):
        leaf = x.clone().requires_grad_()
        out = run(leaf)
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        outputs.append(out.detach())
        grads.append(leaf.grad)
    assert_close_to_torch(outputs[1], outputs[0], "output")
    assert_close_to_torch(grads[1], grads[0], "input gradient")
    for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters(), strict=True):
        assert_close_to_torch(p.grad, q.grad, f"gradient of {name}")
    for (name, p), (_, q) in zip(model.named_buffers(), eager.named_buffers(), strict=True):
        assert_close_to_torch(p, q, f"buffer {name}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]


@pytest.mark.parametrize(
    ("make", "shape"),
    [
        (lambda: torch.nn.LayerNorm(37), (5, 3, 37)),
        (lambda: torch.nn.LayerNorm([6, 7], elementwise_affine=False), (130, 6, 7)),
        (lambda: torch.nn.LayerNorm(2100), (3, 2100)),
        (lambda: torch.nn.GroupNorm(3, 6), (4, 6, 5, 3)),
        (lambda: torch.nn.GroupNorm(1, 4, affine=False), (2, 4, 9)),
        (lambda: torch.nn.BatchNorm2d(5), (4, 5, 6, 3)),
        (lambda: torch.nn.BatchNorm1d(140), (9, 140)),
        (lambda: torch.nn.BatchNorm2d(5, affine=False), (3, 5, 4, 7)),
        (lambda: torch.nn.BatchNorm3d(4, track_running_stats=False), (2, 4, 3, 5, 6)),
        (lambda: torch.nn.InstanceNorm1d(5, affine=True), (3, 5, 11)),
    ],
    ids=[
        "layer",
        "layer-2d-no-affine",
        "layer-long-rows",
        "group",
        "group-one-no-affine",
        "batch2d",
        "batch1d-140",
        "batch2d-no-affine",
        "batch3d-no-running-stats",
        "instance",
    ],
)
def test_normalization_training_step(make, shape):
    torch.manual_seed(1)
    _train_step(make, torch.randn(shape) * 2 + 0.5)


def test_batch_norm_eval_mode_uses_running_statistics():
    def make():
        module = torch.nn.BatchNorm2d(5)
        assert module.running_mean is not None  # tracked by default
        assert module.running_var is not None
        module.running_mean.uniform_(-1, 1)
        module.running_var.uniform_(0.5, 2)
        return module.eval()

    _train_step(make, torch.randn(3, 5, 4, 4))


@pytest.mark.parametrize(
    ("width", "shape", "dtype"),
    [
        (64, (3, 300, 64), torch.float32),
        (96, (8, 400, 96), torch.bfloat16),
        (768, (2, 260, 768), torch.float32),
        (32, (2, 2100, 32), torch.bfloat16),
    ],
    ids=["groups-of-7-rows", "bf16-groups-and-tiles", "two-psum-chunks", "loop-over-groups"],
)
def test_layer_norm_backward_row_groups(width, shape, dtype):
    """native_layer_norm_backward (kept whole) in one pass over row groups: several rows per partition per DMA,
    then the whole 128-row tiles left, then a partial tile; weight and bias gradients accumulated in PSUM over all
    rows, in one or two 512-wide chunks. Up to `rows.PIPELINED_ROW_TILES` row tiles the groups are straight-line
    code in one wavefront; beyond (4200 rows), a loop over the groups. The gradients sum thousands of rows, which eager bf16 gets wrong by
    several percent (its weight gradient here is off by 4.6 of 111), so they are judged against float64."""

    def make(precision: torch.dtype) -> torch.nn.Module:
        torch.manual_seed(0)
        norm = torch.nn.LayerNorm(width)
        with torch.no_grad():
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
        return norm.to(dtype).to(precision)  # the same (bf16-rounded) parameters in every precision

    torch.manual_seed(3)
    x = (torch.randn(shape) * 2 + 0.5).to(dtype)
    projection = torch.linspace(-1, 1, x.numel()).reshape(shape)
    runs = []
    for precision, compile_it in ((dtype, False), (dtype, True), (torch.float64, False)):
        module = make(precision)
        run = torch.compile(module, backend="neuron-mlir") if compile_it else module
        leaf = x.to(precision).clone().requires_grad_()
        (run(leaf) * projection.to(precision)).sum().backward()
        runs.append([leaf.grad, module.weight.grad, module.bias.grad])
    for name, eager, ours, golden in zip(("input", "weight", "bias"), *runs, strict=True):
        assert_close_to_golden(ours, eager, golden, f"gradient of {name}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def _eager_compiled_golden(
    make: Callable[[torch.dtype], torch.nn.Module], x: torch.Tensor, projection: torch.Tensor, dtype: torch.dtype
) -> list[list[torch.Tensor]]:
    """One step of the norm `make` builds, eager in `dtype`, compiled in `dtype` and eager in float64: per run its
    output and the gradients of the input and of each parameter (weight, then bias if it has one), for the loss
    sum(output * projection)."""
    runs = []
    for precision, compile_it in ((dtype, False), (dtype, True), (torch.float64, False)):
        module = make(precision)
        run = torch.compile(module, backend="neuron-mlir") if compile_it else module
        leaf = x.to(precision).clone().requires_grad_()
        out = run(leaf)
        (out * projection.to(precision)).sum().backward()
        runs.append([out.detach(), leaf.grad, *(p.grad for p in module.parameters())])
    return runs


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("width", [768, 1024, 2048, 4096])
def test_layer_norm_trains_at_real_widths(width, dtype):
    """Layer norm forward (row groups, several rows per partition per DMA) and backward (native_layer_norm_backward
    in one pass) at the widths of real models, with rows that fill whole groups, then whole 128-row tiles, then a
    partial tile: the output and every gradient within a small multiple of eager's own error from float64."""
    rows = 6 * 128 + 128 + 45  # groups of several rows per partition (3 or 2 at 768 wide, bf16), a tile, a partial tile

    def make(precision: torch.dtype) -> torch.nn.Module:
        torch.manual_seed(1)
        norm = torch.nn.LayerNorm(width)
        with torch.no_grad():
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
        return norm.to(dtype).to(precision)

    torch.manual_seed(2)
    x = (torch.randn(rows, width) * 3 + 1.0).to(dtype)
    projection = torch.randn(rows, width)
    runs = _eager_compiled_golden(make, x, projection, dtype)
    for name, eager, ours, golden in zip(("output", "input", "weight", "bias"), *runs, strict=True):
        assert_close_to_golden(ours, eager, golden, f"{name} (width {width})")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("rows", [394, 300, 130])
def test_layer_norm_forward_few_row_tiles(rows, dtype):
    """Layer norm over fewer rows than two groups of several rows per partition: three or four row tiles (ViT-B/16's
    2 x 197 tokens, 300) run as groups of one row per partition in one wavefront, the partial last tile among
    them; two (130) keep a loop. The output and the saved statistics' effect (through the backward) within a
    small multiple of eager's own error from float64."""

    def make(precision: torch.dtype) -> torch.nn.Module:
        torch.manual_seed(4)
        norm = torch.nn.LayerNorm(768)
        with torch.no_grad():
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
        return norm.to(dtype).to(precision)

    torch.manual_seed(5)
    x = (torch.randn(rows, 768) * 3 + 1.0).to(dtype)
    projection = torch.randn(rows, 768)
    runs = [run[:2] for run in _eager_compiled_golden(make, x, projection, dtype)]
    for name, eager, ours, golden in zip(("output", "input"), *runs, strict=True):
        assert_close_to_golden(ours, eager, golden, f"{name} ({rows} rows)")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_layer_norm_bf16():
    torch.manual_seed(2)
    x = torch.randn(4, 64).to(torch.bfloat16)
    w, b = torch.randn(64).to(torch.bfloat16), torch.randn(64).to(torch.bfloat16)
    from support.compiled import check_compiled

    check_compiled(lambda t, weight, bias: torch.nn.functional.layer_norm(t, (64,), weight, bias), x, w, b)


class _LlamaRMSNorm(torch.nn.Module):
    """RMSNorm as Llama and Mistral spell it: statistics in fp32, the weight applied after the cast back."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        upcast = hidden.to(torch.float32)
        upcast = upcast * torch.rsqrt(upcast.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * upcast.to(hidden.dtype)


@pytest.mark.parametrize(
    ("width", "shape", "dtype"),
    [
        (96, (2, 200, 96), torch.float32),
        (2048, (300, 2048), torch.bfloat16),
        (64, (3, 5, 64), torch.bfloat16),
        (4096, (130, 4096), torch.bfloat16),
        (8192, (3, 8192), torch.bfloat16),
    ],
    ids=["fp32-partial-tile", "bf16-llama-width", "bf16-one-tile", "bf16-upcast-apart", "bf16-rows-off-chip"],
)
def test_rms_norm_training_step(width, shape, dtype):
    """The spelled-out RMSNorm (torch-recognize-rms-norm: one pass over the rows that also writes the saved fp32
    upcast and the weighted output, and one backward pass that also sums the weight gradient) and its gradients,
    judged against float64. At 4096 features the upcast no longer fits beside the pass and keeps its own nest; at
    8192 a row does not fit at all and both directions fall back to reductions and elementwise nests."""

    def make(precision: torch.dtype) -> torch.nn.Module:
        torch.manual_seed(0)
        norm = _LlamaRMSNorm(width, 1e-5)
        with torch.no_grad():
            norm.weight.normal_(1.0, 0.3)
        return norm.to(dtype).to(precision)

    torch.manual_seed(4)
    x = (torch.randn(shape) * 2 + 0.5).to(dtype)
    projection = torch.linspace(-1, 1, x.numel()).reshape(shape)
    runs = _eager_compiled_golden(make, x, projection, dtype)
    for name, eager, ours, golden in zip(("output", "input gradient", "weight gradient"), *runs, strict=True):
        assert_close_to_golden(ours, eager, golden, name)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_rms_norm_op(dtype):
    """aten._fused_rms_norm itself, with and without a weight and eps, both results (rstd in fp32)."""
    from support.compiled import check_compiled

    torch.manual_seed(5)
    x = (torch.randn(3, 130, 40) * 2).to(dtype)
    w = torch.randn(40).to(dtype)
    check_compiled(lambda t, weight: torch.ops.aten._fused_rms_norm(t, [40], weight, 1e-6), x, w)
    check_compiled(lambda t: torch.ops.aten._fused_rms_norm(t, [40], None, None), x)


def test_rms_norm_fuses_in_both_directions(tmp_path):
    """The forward and backward graphs of Llama's RMSNorm each reach the tile stage as one fused op: the
    partition hands the backward one rstd (not the rsqrt and an alias of it), so its chain is recognised too."""
    torch.manual_seed(6)
    module = _LlamaRMSNorm(64, 1e-6).to(torch.bfloat16)
    compiled = torch.compile(module, backend="neuron-mlir", options={"debug_dir": str(tmp_path)})
    x = torch.randn(8, 64, dtype=torch.bfloat16, requires_grad=True)
    compiled(x).float().sum().backward()
    forward = (next(tmp_path.glob("*forward*")) / "1_torch.mlir").read_text()
    backward = (next(tmp_path.glob("*backward*")) / "1_torch.mlir").read_text()
    assert "torch.aten._fused_rms_norm " in forward
    assert "torch.aten.rsqrt" not in forward
    assert "torch.aten._fused_rms_norm_backward" in backward
    assert "torch.aten.pow" not in backward


def _batch_norm_against_golden(eager: torch.nn.Module, x: torch.Tensor, projection: torch.Tensor) -> None:
    """A training step of the batch norm `eager` on `x` (its input's dtype: float64 values are rounded to fp32),
    compiled, against eager and a float64 copy within the golden criterion: output, every gradient and the running
    statistics."""
    dtype = torch.float32 if x.dtype == torch.float64 else x.dtype

    def step(module, call, values):
        leaf = values.clone().requires_grad_()
        out = call(leaf)
        (out * projection.to(out.dtype)).sum().backward()
        return [out.detach(), leaf.grad, module.weight.grad, module.bias.grad, module.running_mean, module.running_var]

    model, wide = copy.deepcopy(eager).to(dtype), copy.deepcopy(eager).double()
    eager = eager.to(dtype)
    ours = step(model, torch.compile(model, backend="neuron-mlir"), x.to(dtype))
    expected = step(eager, eager, x.to(dtype))
    golden = step(wide, wide, x.to(dtype).double())
    names = ["output", "input gradient", "weight gradient", "bias gradient", "running mean", "running variance"]
    for name, got, want, exact in zip(names, ours, expected, golden, strict=True):
        assert_close_to_golden(got, want, exact, name)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]


@pytest.mark.parametrize("batch", [3, 4, 6, 7])
def test_batch_norm_training_few_values_close_to_their_mean(batch):
    """Batch norm in training on `batch` values per channel (1x1 images) a few units in the last place apart about
    a mean near 1.5, which is exactly representable in fp32 (as eager's double sums find it): a mean rounded while
    it is summed is off by a fraction of the spread itself, which the normalized values and every gradient
    inherit. Forward and backward against float64, within the golden criterion."""
    torch.manual_seed(0)
    channels, unit = 24, 2.0**-23
    centre = 1.5 + torch.randint(-(2**20), 2**20, (channels,)).double() * unit
    spread = torch.randint(1, 64, (channels,)).double() * unit
    # symmetric about 0 (2i - (batch - 1)), in a different order per channel
    offsets = torch.stack([2 * torch.randperm(batch) - (batch - 1) for _ in range(channels)], 1).double()
    x = (centre + spread * offsets).reshape(batch, channels, 1, 1)
    assert torch.equal(x.float().double(), x), "the values are fp32 numbers"
    assert torch.equal(x.mean((0, 2, 3)), centre), "their mean too"
    projection = torch.randn(x.shape, dtype=torch.float64)

    torch.manual_seed(1)
    eager = torch.nn.BatchNorm2d(channels)
    with torch.no_grad():
        eager.weight.uniform_(0.5, 1.5)
        eager.bias.uniform_(-1, 1)
    _batch_norm_against_golden(eager, x, projection)


def test_batch_norm_training_mean_small_against_the_spread():
    """Batch norm in training on a stem convolution's map (2 x 64 x 64 values per channel, spread about 1, means
    of a few thousandths): a mean found by summing differences from one of the values sums terms that all share
    that value, and rounds against the size of their sum rather than the spread, tens of times eager's error in
    the mean and in the running mean updated from it. Forward, backward and running statistics against float64,
    within the golden criterion."""
    torch.manual_seed(0)
    channels = 32
    x = torch.randn(2, channels, 64, 64) + 0.004 * torch.randn(1, channels, 1, 1)
    projection = torch.randn(x.shape)

    eager = torch.nn.BatchNorm2d(channels)
    _batch_norm_against_golden(eager, x, projection)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize(("channels", "parts"), [(64, 2), (24, 4), (96, 1)])
def test_batch_norm_training_channels_over_several_partitions(channels, parts, dtype):
    """Batch norm in training with fewer channels than half the partitions: each channel's values are spread over
    `parts` partitions (`_ChannelSplit`), whose sums become the channel's by a matmul and whose statistics leave
    from the channel's first part. Means far from zero against the spread, forward, backward and running
    statistics against float64, within the golden criterion."""
    from neuron_mlir.lowering.convert_torch_to_tile.normalization import _ChannelSplit

    shape = (2, channels, 32, 32)
    assert _ChannelSplit.of(shape).parts == parts
    torch.manual_seed(0)
    x = torch.randn(shape) * torch.rand(1, channels, 1, 1) + 4 * torch.randn(1, channels, 1, 1)
    eager = torch.nn.BatchNorm2d(channels)
    with torch.no_grad():
        eager.weight.uniform_(0.5, 1.5)
        eager.bias.uniform_(-1, 1)
    _batch_norm_against_golden(eager, x.to(dtype), torch.randn(shape))


def test_batch_norm_training_without_autograd_channels_split():
    """A batch norm in training mode run without autograd (a model left in train mode under `torch.no_grad()`):
    the graph returns the output and the running statistics, not the batch's rstd, so the matmul that would
    gather rstd from each channel's first part has no reader and goes with its store; left behind, it held its
    PSUM accumulator in flight while the next batch norm's products reused the bank, and the program failed
    validation. Output and running statistics against eager."""
    from neuron_mlir.lowering.convert_torch_to_tile.normalization import _ChannelSplit

    shape = (2, 16, 32, 32)
    assert _ChannelSplit.of(shape).parts > 1
    torch.manual_seed(0)
    norms = [torch.nn.BatchNorm2d(16) for _ in range(3)]
    eager = torch.nn.Sequential(norms[0], torch.nn.ReLU(), norms[1], torch.nn.Hardswish(), norms[2]).train()
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="neuron-mlir")
    x = torch.randn(shape) + 2
    with torch.no_grad():
        expected, actual = eager(x), compiled(x)
    assert_close_to_torch(actual, expected, "output")
    for (name, p), (_, q) in zip(model.named_buffers(), eager.named_buffers(), strict=True):
        assert_close_to_torch(p, q, f"buffer {name}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]


class _ChannelsFirstLayerNorm(torch.nn.LayerNorm):
    """ConvNeXt's layer norm of an [N, C, H, W] map over its channels: a permuted view normalized and permuted
    back."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_layer_norm_of_permuted_channels(dtype):
    """The normalized dimension strided, the rows contiguous: the rows are copied contiguous first (their tiles
    transposed on chip in fp32), in the forward and for the input and output gradient of the backward; results
    and gradients as eager's, judged against float64."""

    def make(precision: torch.dtype) -> torch.nn.Module:
        torch.manual_seed(0)
        norm = _ChannelsFirstLayerNorm(96, eps=1e-6)
        with torch.no_grad():
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
        return norm.to(dtype).to(precision)

    torch.manual_seed(4)
    x = (torch.randn(2, 96, 20, 21) * 2 + 0.5).to(dtype)
    projection = torch.linspace(-1, 1, x.numel()).reshape(x.shape)
    runs = _eager_compiled_golden(make, x, projection, dtype)
    names = ("output", "gradient of the input", "gradient of the weight", "gradient of the bias")
    for name, eager, ours, golden in zip(names, *runs, strict=True):
        assert_close_to_golden(ours, eager, golden, name)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
