"""Elementwise ops through torch.compile(backend="neuron-mlir") against eager: transcendental functions and
activations, arithmetic with broadcasting and type promotion, exact integer arithmetic, rounding, comparisons,
logical and bitwise ops, casts and creation ops; 0-d, one and 128+ partitions, odd sizes."""

import math

import pytest
import torch
from support import assert_close_to_torch, capture_aten_graphs
from support.compiled import check_compiled, run_compiled

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")

SHAPES = {"0d": (), "one": (1,), "128x7": (128, 7), "odd": (3, 130, 5)}


def _math(x):
    positive = x.abs() + 0.5
    unit = torch.tanh(x) * 0.99
    return (
        torch.exp(x), torch.expm1(x), torch.exp2(x), torch.log(positive), torch.log1p(positive), torch.log2(positive),
        torch.log10(positive), torch.sqrt(positive), torch.rsqrt(positive), torch.reciprocal(positive),
        torch.sin(x), torch.cos(x), torch.tan(x), torch.atan(x), torch.asin(unit), torch.acos(unit),
        torch.sinh(x), torch.cosh(x), torch.tanh(x), torch.asinh(x), torch.acosh(positive + 1), torch.atanh(unit),
        torch.sigmoid(x), torch.erf(x), torch.erfc(x),
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_transcendental_functions(dtype, shape):
    torch.manual_seed(0)
    check_compiled(_math, (torch.randn(shape) * 2).to(dtype))


def _activations(x):
    f = torch.nn.functional
    return (
        f.relu(x), f.gelu(x), f.gelu(x, approximate="tanh"), f.elu(x), f.elu(x, alpha=0.5), f.selu(x), f.celu(x, 2.0),
        f.leaky_relu(x, 0.1), f.hardtanh(x, -0.5, 0.7), f.relu6(x * 4), f.silu(x), f.mish(x), f.softplus(x, 2.0),
        f.hardsigmoid(x), f.hardswish(x), f.logsigmoid(x), f.softsign(x), f.tanhshrink(x), f.hardshrink(x, 0.3),
        f.softshrink(x, 0.3), f.threshold(x, 0.1, -2.0),
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_activations(dtype):
    torch.manual_seed(1)
    check_compiled(_activations, (torch.randn(37, 130) * 3).to(dtype))


class _GatedActivations(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        return (f.gelu(x) + f.gelu(x * 0.5, approximate="tanh") + f.silu(x)) * w


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_activation_gradients(dtype):
    """GELU (exact and tanh-approximated) and SiLU backward reach the compiler whole (gelu_backward,
    silu_backward: one pass each, the derivative a ScalarE function) and match eager's gradients."""
    torch.manual_seed(7)
    x, w = (torch.randn(130, 257) * 3).to(dtype), torch.randn(130, 257).to(dtype)
    backward_ops = {
        str(node.target)
        for graph in capture_aten_graphs(_GatedActivations(), x.clone().requires_grad_(), w, backward=True)
        for node in graph.graph.nodes
    }
    assert {"aten.gelu_backward.default", "aten.silu_backward.default", "aten.silu.default"} <= backward_ops
    torch._dynamo.reset()
    grads = []
    for function in (_GatedActivations(), torch.compile(_GatedActivations(), backend="neuron-mlir")):
        leaf = x.clone().requires_grad_()
        function(leaf, w).float().sum().backward()
        grads.append(leaf.grad)
    assert_close_to_torch(grads[1], grads[0], "activation gradient")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_tan_near_its_poles_and_atan2_in_every_quadrant():
    poles = torch.tensor([math.pi / 2, -math.pi / 2, 3 * math.pi / 2, 4.71238, 7.85398, -1.5707, 100.0])
    y, x = torch.randn(5, 64), torch.randn(5, 64)
    y[0, :4], x[0, :4] = torch.tensor([0.0, 1.0, -1.0, 0.0]), torch.tensor([0.0, 0.0, 0.0, -1.0])
    check_compiled(lambda p, a, b: (torch.tan(p), torch.atan2(a, b)), poles, y, x)


def _rounding(x):
    return torch.round(x), torch.floor(x), torch.ceil(x), torch.trunc(x), torch.round(x, decimals=2), torch.sign(x)


def test_rounding_is_exact_with_ties_to_even_and_special_values():
    halves = torch.arange(-6, 6, dtype=torch.float32) + 0.5
    special = torch.tensor([0.0, -0.0, 1e10, -3e7, float("inf"), -float("inf"), float("nan"), 4194303.5, 2.5e-8])
    check_compiled(_rounding, torch.cat([halves, special, torch.randn(300) * 1000]))


def test_rounding_of_the_halves_between_2_22_and_2_23_is_exact():
    # fp32 still has halves up to 2^23; a relative tolerance would let 4194304.5 pass for 4194304.0
    x = torch.tensor([4194304.5, -4194304.5, 4194305.5, 6291456.5, -8388607.5, 8388607.0, 4194303.5, -2.5])
    compiled = torch.compile(lambda t: (torch.round(t), torch.floor(t), torch.ceil(t)), backend="neuron-mlir")
    for actual, expected in zip(compiled(x), (torch.round(x), torch.floor(x), torch.ceil(x)), strict=True):
        assert torch.equal(actual, expected), (actual - expected).abs().max()


def test_division_by_a_number_rounds_as_ieee_division():
    # x * fp32(1/3) is one ulp above x / 3 for a third of all x: a bias a sum of many quotients keeps (VITS's
    # decoder averages its residual blocks by / 3, and its saturated tanh amplifies the bias 100-fold in the
    # gradients). Powers of two keep the exact multiply; 16-bit floats multiply by the reciprocal as ATen does.
    torch.manual_seed(3)
    x = torch.randn(128, 300) * 10

    def quotients(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return t / 3, t / 7, t / 0.1, t / -2.5, t / 0.25, t / 0.0, t.to(torch.int32) / 3, t.bfloat16() / 3

    compiled = torch.compile(quotients, backend="neuron-mlir", options={"strict": True})
    for actual, expected in zip(compiled(x), quotients(x), strict=True):
        assert torch.equal(actual, expected), (actual.float() - expected.float()).abs().max()


def _arithmetic(a, b, s):
    return (
        a + b, a - b * 2, torch.add(a, b, alpha=-3), a * b, a / b, torch.div(a, b, rounding_mode="trunc"),
        torch.div(a, b, rounding_mode="floor"), a % b, torch.fmod(a, b), torch.pow(a.abs(), b), a ** 2, a ** 3,
        a ** 0.5, 2.0 ** b, torch.maximum(a, b), torch.minimum(a, b), torch.fmax(a, b), torch.fmin(a, b),
        torch.clamp(a, -0.5, 0.5), torch.clamp(a, min=b), torch.where(a > b, a, b), a + s, a * s, a / s, s - a,
        a // 0.7, a % -0.7, torch.hypot(a, b), torch.copysign(a, b), torch.lerp(a, b, 0.3), torch.lerp(a, b, 0.8),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("shape_a", "shape_b"), [((), ()), ((128, 7), (7,)), ((3, 1, 5), (4, 1)), ((2, 300), (2, 1))], ids=str
)
def test_arithmetic_with_broadcasting(shape_a, shape_b):
    torch.manual_seed(2)
    b = torch.randn(shape_b) * 3
    b = torch.where(b.abs() < 0.1, torch.ones_like(b), b)
    check_compiled(_arithmetic, torch.randn(shape_a) * 5, b, torch.tensor(1.7))


def test_nan_handling_of_minimum_maximum_fmax_and_clamp():
    a = torch.tensor([1.0, float("nan"), 3.0, float("nan"), -1.0])
    b = torch.tensor([float("nan"), 2.0, 1.0, float("nan"), -2.0])
    check_compiled(
        lambda x, y: (torch.maximum(x, y), torch.fmax(x, y), torch.fmin(x, y), torch.clamp(x, 0, 2), torch.sign(x)),
        a,
        b,
    )


def _integers(a, b):
    return (
        a + b, a - b, a * b, a // b, a % b, torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc"), -a, a.abs(),
        a.sign(), torch.maximum(a, b), torch.clamp(a, -1000, 1000), a * 3 + 7, a // -4, a % 5, a ** 2, a == b,
        a < b, a >= 3, a / b, a & b, a | b, a ^ b, ~a, torch.where(a > 0, a, b),
    )  # fmt: skip


@pytest.mark.parametrize(("dtype", "magnitude"), [(torch.int32, 2**30), (torch.int64, 2**40)], ids=["i32", "i64"])
def test_integer_arithmetic_is_exact(dtype, magnitude):
    """Magnitudes far beyond fp32's 24 bits (and, for int64, beyond 32 bits): any rounding through fp32 or
    narrowing to 32 bits shows; products wrap as in PyTorch."""
    torch.manual_seed(3)
    a = torch.randint(-magnitude, magnitude, (37, 65), dtype=dtype)
    a[0, :4] = torch.tensor([magnitude - 1, -magnitude, 7, -7], dtype=dtype)
    b = torch.randint(1, 2**10, (37, 65), dtype=dtype) * torch.where(torch.rand(37, 65) > 0.5, 1, -1).to(dtype)
    check_compiled(_integers, a, b)


def test_int32_arithmetic_wraps_like_pytorch():
    a = torch.tensor([2**31 - 1, -(2**31), 2**20], dtype=torch.int32)
    check_compiled(lambda x: (x + 1, x - 1, x * 4096), a)


_INT64_MAX, _INT64_MIN = torch.iinfo(torch.int64).max, torch.iinfo(torch.int64).min


def _int64_immediates(x, mask):
    return (
        torch.full((3, 130), 2**62 + 1, dtype=torch.int64),
        x + torch.full_like(x, 2**62 + 1),
        x.masked_fill(mask, _INT64_MAX),
        x.masked_fill(mask, _INT64_MIN),
        torch.where(mask, x, _INT64_MAX),
        torch.where(mask, _INT64_MIN, x),
        x + (2**53 + 1),
        x - _INT64_MAX,
        torch.maximum(x, torch.full_like(x, _INT64_MAX)),
        torch.nn.functional.pad(x, (1, 2), value=_INT64_MAX),
        x.scatter(1, torch.zeros(3, 1, dtype=torch.int64), _INT64_MIN + 1),
    )


def test_int64_immediates_keep_every_bit():
    """Fills, masked_fill and where with a scalar, padding, scatter of a value and scalar arithmetic on int64
    with values an f64 rounds (above 2^53) or carries out of range (int64's largest becomes 2^63)."""
    torch.manual_seed(5)
    x = torch.randint(-(2**40), 2**40, (3, 130), dtype=torch.int64)
    mask = torch.rand(3, 130) > 0.5
    check_compiled(_int64_immediates, x, mask)


def test_int64_aranges_and_truncated_division_beyond_fp32():
    x = torch.tensor([_INT64_MIN, _INT64_MAX, 2**62 + 1, -(2**62) - 3, 7], dtype=torch.int64)
    check_compiled(
        lambda t: (
            torch.arange(2**62 + 1, 2**62 + 6) + t,
            torch.arange(2**40, -(2**40), -(2**39 + 1)),
            torch.arange(2**24 + 1, 2**24 + 6, dtype=torch.int32),
            torch.div(t, 2**40 + 7, rounding_mode="trunc"),
        ),
        x,
    )


def test_int32_fills_beyond_two_to_the_24_are_exact():
    x = torch.arange(6, dtype=torch.int32)
    check_compiled(lambda t: (torch.full_like(t, 2**24 + 1), t.masked_fill(t > 2, 2**31 - 1), t + (2**30 + 1)), x)


def test_mixed_type_promotion():
    i = torch.randint(-50, 50, (5, 9), dtype=torch.int32)
    f = torch.randn(5, 9)
    h = torch.randn(5, 9).to(torch.bfloat16)
    check_compiled(lambda x, y, z: (x + y, x * 2.5, x / 3, y + z, z * x, x > y, (x > 0) + x), i, f, h)


def _logical(a, b):
    return (
        a == b, a != b, a < b, a <= b, a > b, a >= b, a > 0.5, a <= -0.5, torch.logical_and(a > 0, b > 0),
        torch.logical_or(a > 0, b > 0), torch.logical_xor(a > 0, b > 0), torch.logical_not(a > 0),
        torch.isinf(a / b), torch.isnan(torch.sqrt(a)), torch.isfinite(a / b), torch.signbit(a), (a > 0) & (b > 0),
        (a > 0) | (b > 0), ~(a > 0),
    )  # fmt: skip


def test_comparisons_logical_and_classification():
    torch.manual_seed(4)
    a, b = torch.randn(130, 33), torch.randn(130, 33)
    b[0, :3] = 0.0
    a[1, 0] = -0.0
    check_compiled(_logical, a, b)


@pytest.mark.parametrize("target", [torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool], ids=str)
def test_casts_from_float32(target):
    x = torch.randn(64, 33) * 100
    x[0, :4] = torch.tensor([0.0, -0.0, 2.5, -2.5])
    check_compiled(lambda t: (t.to(target), t.to(target).to(torch.float32)), x)


@pytest.mark.parametrize("source", [torch.bfloat16, torch.int32, torch.int64, torch.bool], ids=str)
def test_casts_to_float32_and_between_integers(source):
    x = (torch.randn(64, 33) * 1000).to(source)
    check_compiled(lambda t: (t.float(), t.to(torch.int32), t.to(torch.int64), t.bool()), x)


def test_creation_ops():
    x = torch.randn(5, 7)
    check_compiled(
        lambda t: (
            torch.full((3, 130), 2.5), torch.full_like(t, -1), torch.zeros_like(t, dtype=torch.int64),
            torch.ones(4, dtype=torch.bool), torch.scalar_tensor(3.0) + t, t.fill_(7.0), torch.arange(5) * 2,
        ),
        x,
    )  # fmt: skip


def test_empty_tensors():
    check_compiled(lambda t: (torch.exp(t), t + 1, t.sum(0)), torch.randn(0, 3))


def _choices(mask: torch.Tensor, x: torch.Tensor, single: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.where(mask, single, x), torch.where(mask, x, single), torch.where(mask, 0.0, x)


def test_where_with_a_single_element_choice():
    """A one-element choice (a ReLU's backward selects a 0-d zero) is read once per tile and spread on chip, not
    fetched element by element: eager's values on either side, signed zeros, infinities and NaN included, and the
    select costs about what a select between two whole tensors does."""
    torch.manual_seed(0)
    x = torch.randn(130, 700)
    x[0, :5] = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan])
    mask = torch.rand(130, 700) > 0.5
    for value in (-0.0, math.nan, -math.inf):
        single = torch.tensor(value)
        results = check_compiled(_choices, mask, x, single)
        expected = _choices(mask, x, single)
        for actual, wanted in zip(results, expected, strict=True):
            assert torch.equal(actual.signbit(), wanted.signbit())
            assert torch.equal(actual.isnan(), wanted.isnan())
    check_compiled(_choices, mask, x.bfloat16(), torch.tensor(2.5, dtype=torch.bfloat16))
    [profile] = neuron_mlir.profiles().values()
    run_compiled(lambda m, a, b: torch.where(m, a, b), mask, x.bfloat16(), x.bfloat16())
    [whole] = neuron_mlir.profiles().values()
    assert profile.total_ns <= 3 * whole.total_ns, (profile.total_ns, whole.total_ns)  # three selects against one


@pytest.mark.parametrize(
    ("shape", "other"),
    [((394, 768), (394, 768)), ((2, 197, 768), (768,)), ((100, 3000), (3000,)), ((130, 3000), (130, 1))],
    ids=["merged-394-rows", "row-vector", "one-partition-tile", "two-partition-tiles"],
)
def test_short_nests(shape, other):
    """Nests that would be two tiles along the free axis and nothing else run as four equal tiles
    (`SHORT_NEST_TILES`: [394, 768] as [128, 2364], [100, 3000] beside a broadcast row), the last one partial or
    not; with more than one partition tile (130 rows) the tiles keep their width."""
    torch.manual_seed(6)
    a = torch.randn(shape, dtype=torch.bfloat16)
    b = torch.randn(other, dtype=torch.bfloat16)
    check_compiled(lambda a, b: (a + b, a * b - a), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape", [(1, 768, 300), (2, 200, 130)], ids=["whisper-stem", "partial-blocks"])
def test_permuted_operands_transposed_on_chip(dtype, shape):
    """Operands read with their contiguous dimension on the partitions (a convolution's [channels, positions]
    output permuted to [positions, channels]): fp32 tiles are loaded as row blocks and transposed on TensorE,
    bf16 ones by DMA transpose; either way every element lands where it belongs, NaN and infinities included
    (an identity matmul would spread them over a row), whole blocks of 128 and partial ones alike."""
    torch.manual_seed(7)
    x = torch.randn(shape).to(dtype)
    x[0, 5, 17], x[-1, -1, -3], x[0, -2, 1] = math.nan, math.inf, -math.inf
    positions = torch.randn(shape[2], shape[1]).to(dtype)

    def stem(x, positions):
        permuted = x.permute(0, 2, 1)
        return permuted + positions, permuted.contiguous(), torch.nn.functional.gelu(permuted) * 2.0

    results = check_compiled(stem, x, positions)
    for actual, wanted in zip(results, stem(x, positions), strict=True):
        assert torch.equal(actual.isnan(), wanted.isnan())
    torch.testing.assert_close(results[1], x.permute(0, 2, 1), rtol=0, atol=0, equal_nan=True)  # moved, not computed
