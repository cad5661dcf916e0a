"""Decompositions of ops without a lowering: eager's results (edge cases included), and graphs with no fallback."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch
from support.compiled import check_compiled

import neuron_mlir
from neuron_mlir.frontend import composite_decompositions as cd

NAN, INF = math.nan, math.inf
# NaN, infinities of both signs, zeros and ties, in the middle of a row and at its ends
EDGES = torch.tensor(
    [
        [1.0, 3.0, NAN, 2.0, NAN, 5.0, 0.5],
        [-INF, 2.0, INF, 2.0, -1.0, 0.0, INF],
        [2.0, 2.0, 1.0, 1.0, -3.0, -3.0, 4.0],
        [0.0, INF, 1.0, -2.0, 0.5, -INF, 3.0],
    ]
)


def _random(*shape: int) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(*shape)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scans_match_eager_on_nan_infinities_and_ties(dim: int) -> None:
    for x in (EDGES, _random(3, 37)):
        assert_close_to_torch(cd.cumprod(x, dim), torch.cumprod(x, dim), "cumprod")
        assert_close_to_torch(cd.cummax(x, dim), tuple(torch.cummax(x, dim)), "cummax")
        assert_close_to_torch(cd.cummin(x, dim), tuple(torch.cummin(x, dim)), "cummin")
        assert_close_to_torch(cd.logcumsumexp(x, dim), torch.logcumsumexp(x, dim), "logcumsumexp")


def test_integer_scans_keep_eager_dtypes() -> None:
    x = torch.tensor([[3, -1, 2, 2, 0, 5], [1, 1, 7, -4, 7, 2]], dtype=torch.int32)
    assert_close_to_torch(cd.cumprod(x, 1), torch.cumprod(x, 1), "cumprod")  # int64, as eager promotes
    assert_close_to_torch(cd.cumprod(x, 1, dtype=torch.float32), torch.cumprod(x, 1, dtype=torch.float32))
    assert_close_to_torch(cd.cummax(x, 1), tuple(torch.cummax(x, 1)), "cummax")
    assert_close_to_torch(cd.cummin(x > 1, 1), tuple(torch.cummin(x > 1, 1)), "cummin of bools")
    scalar = torch.tensor(2.5)
    assert_close_to_torch(cd.cumprod(scalar, 0), torch.cumprod(scalar, 0), "0-d cumprod")


def test_order_statistics_match_eager() -> None:
    rows = torch.tensor([[4.0, NAN, 1.0, 3.0, NAN], [5.0, 1.0, 2.0, 9.0, 0.0], [2.0, 7.0, NAN, 1.0, 6.0]])
    assert_close_to_torch(cd.median_dim(rows, 1), tuple(torch.median(rows, 1)), "median")
    assert_close_to_torch(cd.nanmedian_dim(rows, 1, True), tuple(torch.nanmedian(rows, 1, True)), "nanmedian")
    # a row of NaN only: NaN, at an index eager leaves to its selection algorithm
    assert torch.isnan(cd.nanmedian_dim(torch.full((2, 4), NAN), 1)[0]).all()
    assert_close_to_torch(cd.median(rows[1]), torch.median(rows[1]), "median of all")
    assert_close_to_torch(cd.nanmedian(rows[:2]), torch.nanmedian(rows[:2]), "nanmedian of all")
    distinct = _random(4, 9)
    assert_close_to_torch(cd.kthvalue(distinct, 3, 0), tuple(torch.kthvalue(distinct, 3, 0)), "kthvalue")
    assert_close_to_torch(cd.kthvalue(rows[:2], 5), tuple(torch.kthvalue(rows[:2], 5)), "kthvalue of NaN")
    # the most frequent value, the smallest of equally frequent ones, at its last occurrence
    counts = torch.tensor([[3.0, 1.0, 3.0, 1.0, 2.0, 2.0, 5.0], [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.0]])
    assert_close_to_torch(cd.mode(counts, 1), tuple(torch.mode(counts, 1)), "mode")
    assert_close_to_torch(cd.mode(counts.t(), 0, True), tuple(torch.mode(counts.t(), 0, True)), "mode, keepdim")


def test_searches_and_histograms_match_eager() -> None:
    sequence = torch.tensor([-2.0, 0.0, 0.0, 1.5, 3.0])
    values = torch.tensor([[-3.0, 0.0, 1.0], [3.0, 4.0, NAN]])
    for right in (False, True):
        expected = torch.searchsorted(sequence, values, right=right)
        assert_close_to_torch(cd.searchsorted(sequence, values, right=right), expected, f"right={right}")
        expected = torch.bucketize(values, sequence, right=right, out_int32=True)
        assert_close_to_torch(cd.bucketize(values, sequence, right=right, out_int32=True), expected)
    unsorted = _random(2, 6)
    sorter = torch.argsort(unsorted, dim=-1)
    probes = _random(2, 4)
    expected = torch.searchsorted(unsorted, probes, side="right", sorter=sorter)
    assert_close_to_torch(cd.searchsorted(unsorted, probes, side="right", sorter=sorter), expected, "sorter")
    data = torch.tensor([0.0, 1.0, 1.0, 2.5, 3.0, -1.0, 7.0, 2.999])
    assert_close_to_torch(cd.histc(data, 4, 0.0, 3.0), torch.histc(data, 4, 0.0, 3.0), "histc")
    assert_close_to_torch(cd.histc(data, 5), torch.histc(data, 5), "histc over the data's range")
    constant = torch.full((3,), 2.0)
    assert_close_to_torch(cd.histc(constant, 3), torch.histc(constant, 3), "histc of one value")


def test_copies_and_factories_match_eager() -> None:
    x = _random(2, 3, 4)
    assert cd.empty_permuted((2, 3, 4), (2, 0, 1)).stride() == torch.empty_permuted((2, 3, 4), (2, 0, 1)).stride()
    assert cd.permute_copy(x, (2, 0, 1)).is_contiguous()
    assert_close_to_torch(cd.as_strided_copy(x, (3, 2), (1, 3), 2), torch.as_strided_copy(x, (3, 2), (1, 3), 2))
    expected = torch.unbind_copy(x, 1)  # type: ignore[func-returns-value]  # the stub types the out= form
    assert_close_to_torch(cd.unbind_copy(x, 1), expected, "unbind_copy")
    index = torch.tensor([[0, -1], [5, 5]])
    source = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert_close_to_torch(cd.put(x, index, source, True), torch.put(x, index, source, True), "put, accumulated")
    assert_close_to_torch(cd.dist(x, x[0, 0], 3), torch.dist(x, x[0, 0], 3), "dist")
    expected = torch.logspace(-3, 2, 6, 2.0, dtype=torch.bfloat16)
    assert_close_to_torch(cd.logspace(-3, 2, 6, 2.0, dtype=torch.bfloat16), expected, "logspace")


@pytest.mark.usefixtures("fresh_compiler")
def test_decomposed_scans_and_order_statistics_compile_without_fallback() -> None:
    def scans(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.cumprod(x, 1), *torch.cummax(x, 0), torch.logcumsumexp(x, 1), *torch.median(x, 1))

    check_compiled(scans, EDGES)
    ties = torch.tensor(
        [[3.0, 1.0, 3.0, 1.0, 2.0, 2.0], [1.0, 1.0, 1.0, 2.0, 2.0, 0.0], [5.0, 4.0, 4.0, 5.0, 5.0, 4.0]]
    )

    def selections(x: torch.Tensor, ties: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.nanmedian(x), *torch.kthvalue(x, 2, 0), *torch.mode(ties, 1), *torch.mode(ties, 0)

    check_compiled(selections, _random(5, 7), ties)


@pytest.mark.usefixtures("fresh_compiler")
def test_integer_running_extremes_compile_exactly() -> None:
    # Grounding DINO finds each token's next delimiter by a flipped int64 cummin: a scan padded with int64's
    # largest value (a fill no float64 attribute holds) gave the type's smallest instead
    torch.manual_seed(0)
    x = torch.randint(-3, 9, (3, 11))
    check_compiled(lambda x: (*torch.cummin(x, 1), *torch.cummax(x, 0), *torch.cummin(x.to(torch.int32), 0)), x)


@pytest.mark.usefixtures("fresh_compiler")
def test_decomposed_searches_and_copies_compile_without_fallback() -> None:
    def searches(sequence: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.searchsorted(sequence, x),
            torch.bucketize(x, sequence, right=True),
            torch.isin(x, sequence),
            torch.histc(x, 6, -1.0, 1.0),
            torch.put(x, torch.tensor([0, -1]), sequence[:2]),
            torch.dist(x, sequence[0], 2),
        )

    check_compiled(searches, torch.tensor([-1.0, -0.5, 0.0, 0.25, 1.0]), _random(3, 4))


def _bits(x: torch.Tensor) -> torch.Tensor:
    """float32 bit patterns, every NaN as one pattern: exact comparison of floats."""
    return torch.where(torch.isnan(x), torch.nan, x).view(torch.int32)


# the ends of the float32 range (subnormals, the largest floats), powers of two, zeros, infinities, NaN
EXTREMES = torch.tensor(
    [0.0, -0.0, 1.0, -3.5, INF, -INF, NAN, 1e-40, -(2.0**-149), 2.0**-126, 3e38, 3.4028235e38, 0.75, 1.9999999, 4.0]
)


@pytest.mark.usefixtures("fresh_compiler")
def test_frexp_and_nextafter_are_bit_exact_compiled() -> None:
    torch.manual_seed(0)
    x = torch.cat([EXTREMES, torch.randn(200) * 1e5, torch.randn(200) * 1e-39])
    towards = torch.cat([torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0, 2.0, 1.0, INF, 0.0, 0.0, INF, 0.0, 0.75, 2.0, 0.0]),
                         torch.randn(400)])  # fmt: skip
    low = x.to(torch.bfloat16), towards.to(torch.bfloat16)  # its own neighbours, stepped in float32

    def bit_level(x: torch.Tensor, towards: torch.Tensor, *low: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*torch.frexp(x), torch.nextafter(x, towards), torch.nextafter(*low))

    expected = bit_level(x, towards, *low)
    decomposed = (*cd.frexp(x), cd.nextafter(x, towards), cd.nextafter(*low))
    compiled = torch.compile(bit_level, backend="neuron-mlir")(x, towards, *low)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    for results in (decomposed, compiled):
        assert torch.equal(results[1], expected[1])  # the exponents
        for index in (0, 2, 3):  # mantissas, float32 and bfloat16 neighbours
            assert torch.equal(_bits(results[index].float()), _bits(expected[index].float())), index
    half = x.to(torch.float16), towards.to(torch.float16)
    assert torch.equal(_bits(cd.nextafter(*half).float()), _bits(torch.nextafter(*half).float()))


@pytest.mark.usefixtures("fresh_compiler")
def test_logspace_from_tensors_compiles_without_fallback() -> None:
    check_compiled(lambda start: (torch.logspace(start, 2, 7, 2.0), torch.logspace(-1, start, 1)), torch.tensor(-3))


@pytest.mark.usefixtures("fresh_compiler")
def test_linspace_between_tensors_compiles_without_fallback() -> None:
    # log-spaced bins (CHMv2's depth bins): the reference decomposition widens the ends to float64
    def bins(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        low, high = torch.log(x.min()), torch.log(x.max())
        return torch.exp(torch.linspace(low, high, 9)), torch.linspace(low, 3.0, 4), torch.linspace(0.5, high, 1)

    check_compiled(bins, torch.rand(10) + 0.1)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_matches_eager_with_empty_segments_nan_and_initial(reduce: str) -> None:
    data = torch.tensor([1.0, 5.0, NAN, -2.0, 3.0])
    lengths, offsets = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 0, 1, 3, 5])
    for initial in (None, 2.0):
        expected = torch._segment_reduce(data, reduce, lengths=lengths, initial=initial)
        assert_close_to_torch(cd.segment_reduce(data, reduce, lengths=lengths, initial=initial), expected, reduce)
        assert_close_to_torch(cd.segment_reduce(data, reduce, offsets=offsets, initial=initial), expected, reduce)
    batched, batched_lengths = _random(2, 5, 3), torch.tensor([[2, 0, 3], [1, 1, 3]])
    expected = torch._segment_reduce(batched, reduce, lengths=batched_lengths, axis=1)
    assert_close_to_torch(cd.segment_reduce(batched, reduce, lengths=batched_lengths, axis=1), expected, "axis 1")


def test_histogram_and_nonzero_static_match_eager() -> None:
    x, weight = _random(50), torch.rand(50)
    for arguments in ({"bins": 7}, {"bins": 5, "range": (-1.0, 1.0)}, {"bins": 3, "weight": weight, "density": True}):
        assert_close_to_torch(cd.histogram_bin_ct(x, **arguments), tuple(torch.histogram(x, **arguments)))
    edges = torch.tensor([-1.0, -0.2, 0.0, 0.5, 2.0])
    assert_close_to_torch(cd.histogram_bins_tensor(x, edges), tuple(torch.histogram(x, edges)), "given edges")
    one_value = torch.tensor(3.0)  # a range of one value widens by 0.5 each way
    assert_close_to_torch(cd.histogram_bin_ct(one_value, 2), tuple(torch.histogram(one_value, 2)), "one value")
    no_value = torch.zeros(0)  # no data: [0, 1]
    assert_close_to_torch(cd.histogram_bin_ct(no_value, 2), tuple(torch.histogram(no_value, 2)), "no value")
    mask = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, -3.0]])
    for size, fill in ((0, -1), (2, -1), (5, 7)):
        expected = torch.nonzero_static(mask, size=size, fill_value=fill)
        assert_close_to_torch(cd.nonzero_static(mask, size=size, fill_value=fill), expected, f"size {size}")


def test_histogramdd_matches_eager() -> None:
    samples, weight = _random(40, 3), torch.rand(40)
    samples[3, 1] = samples[7, 1]  # a tie
    box = [-1.0, 1.0, -2.0, 2.0, 0.0, 5.0]
    cases: list[tuple[list[int], list[float] | None, torch.Tensor | None, bool]] = [
        ([2, 3, 4], None, None, False),
        ([3, 2, 2], box, weight, False),
        ([1, 2, 1], None, weight, True),
    ]
    for bins, box_range, weights, density in cases:
        what = f"bins {bins}, range {box_range}, weighted {weights is not None}, density {density}"
        expected = torch.histogramdd(samples, bins, range=box_range, weight=weights, density=density)
        edges = cd.histogramdd_bin_edges(samples, bins, range=box_range)
        assert_close_to_torch(edges, list(expected.bin_edges), f"edges, {what}")
        counts = cd.histogramdd_from_bin_cts(samples, bins, range=box_range, weight=weights, density=density)
        assert_close_to_torch(counts, expected.hist, what)
        given = torch.histogramdd(samples, list(expected.bin_edges), weight=weights, density=density)
        counts = cd.histogramdd_from_bin_tensors(samples, expected.bin_edges, weight=weights, density=density)
        assert_close_to_torch(counts, given.hist, f"given edges, {what}")
    empty = torch.zeros(0, 2)  # no samples: each dimension's edges span [0, 1]
    expected_empty = torch.histogramdd(empty, [2, 2])
    assert_close_to_torch(cd.histogramdd_bin_edges(empty, [2, 2]), list(expected_empty.bin_edges), "no samples")
    one_value = torch.ones(3, 1)  # a range of one value widens by 0.5 each way
    assert_close_to_torch(cd.histogramdd_from_bin_cts(one_value, [2]), torch.histogramdd(one_value, [2]).hist)


@pytest.mark.usefixtures("fresh_compiler")
def test_decomposed_segments_histograms_and_nonzero_compile_without_fallback() -> None:
    def counts(x: torch.Tensor, weight: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            *torch.histogram(x, 4, weight=weight, density=True),
            torch.histogramdd(x.reshape(6, 2), [2, 3], weight=weight[:6]).hist,
            *torch.histogramdd(x.reshape(6, 2), [2, 3], weight=weight[:6]).bin_edges,
            torch.nonzero_static(x > 0.5, size=6),
            torch._segment_reduce(x, "mean", lengths=lengths, initial=1.0),
        )

    check_compiled(counts, _random(12), torch.rand(12), torch.tensor([3, 0, 4, 5]))


@pytest.mark.parametrize(
    ("size", "align_corners", "scales"),
    [((3, 3), False, (None, None)), ((17, 18), False, (1.7, 0.9)), ((4, 31), True, (None, None)), ((1, 1), True, (None, None))],
    ids=["down", "scale-factors", "align-corners", "to-one"],
)  # fmt: skip
def test_antialiased_bilinear_resize_matches_eager(size, align_corners, scales) -> None:
    x = _random(2, 3, 10, 20)
    expected = torch.ops.aten._upsample_bilinear2d_aa(x, size, align_corners, *scales)
    assert_close_to_torch(cd.upsample_bilinear2d_aa(x, size, align_corners, *scales), expected)
    grad = _random(*expected.shape)
    expected = torch.ops.aten._upsample_bilinear2d_aa_backward(grad, size, x.shape, align_corners, *scales)
    got = cd.upsample_bilinear2d_aa_backward(grad, size, x.shape, align_corners, *scales)
    assert_close_to_torch(got, expected, "backward")


@pytest.mark.usefixtures("fresh_compiler")
def test_antialiased_interpolate_compiles_without_fallback() -> None:
    check_compiled(lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", antialias=True), _random(2, 3, 10, 20))


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_backward_matches_aten(dim: int) -> None:
    # weight-normed convolutions (wav2vec2's and HuBERT's positional convolution) train through this kernel
    torch.manual_seed(0)
    v, grad = torch.randn(6, 3, 5), torch.randn(6, 3, 5)
    g = torch.randn(6, 1, 1) if dim == 0 else torch.randn(1, 1, 5)
    _, norms = torch.ops.aten._weight_norm_interface(v, g, dim)
    expected = torch.ops.aten._weight_norm_interface_backward(grad, v, g, norms, dim)
    assert_close_to_torch(cd.weight_norm_interface_backward(grad, v, g, norms, dim), tuple(expected), "backward")


@pytest.mark.parametrize(
    ("shape", "padding"),
    [
        ((2, 3, 7), (2, 3)),
        ((2, 3, 7), (-2, 3)),  # a negative amount crops
        ((2, 3, 7), (2, -3)),
        ((2, 1, 1), (3, 2)),  # both edges are the one position
        ((2, 3, 5, 6), (1, 2, 3, 1)),
        ((2, 3, 5, 6), (-1, 2, 3, -2)),
        ((1, 2, 3, 4, 5), (1, 1, 2, 0, 0, 2)),
    ],
)
def test_replication_pad_backward_matches_aten(shape: tuple[int, ...], padding: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    x = torch.randn(*shape)
    grad = torch.randn(torch.nn.functional.pad(x, padding, mode="replicate").shape)
    op = {
        1: torch.ops.aten.replication_pad1d_backward,
        2: torch.ops.aten.replication_pad2d_backward,
        3: torch.ops.aten.replication_pad3d_backward,
    }[len(padding) // 2]
    expected = op(grad, x, list(padding))
    assert_close_to_torch(cd.replication_pad_backward(grad, x, list(padding)), expected, "backward")


@pytest.mark.usefixtures("fresh_compiler")
def test_replication_pad_by_amounts_read_from_tensor_values_trains_without_fallback() -> None:
    # Mimi pads its causal convolutions by amounts computed from tensors: the backward takes them as sizes the
    # host read, never known when the graph is traced
    def padded(x: torch.Tensor, amounts: torch.Tensor) -> torch.Tensor:
        left, right = int(amounts[0].item()), int(amounts[1].item())
        return torch.nn.functional.pad(x, (left, right), mode="replicate").sin()

    torch.manual_seed(0)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled = torch.compile(padded, backend="neuron-mlir")
        for amounts in ([3, 2], [2, -1]):
            x = torch.randn(2, 3, 7, requires_grad=True)
            mirror = x.detach().clone().requires_grad_()
            seed = torch.randn(2, 3, 7 + sum(amounts))
            out = compiled(x, torch.tensor(amounts))
            expected = padded(mirror, torch.tensor(amounts))
            assert_close_to_torch(out, expected, f"forward {amounts}")
            out.backward(seed)
            expected.backward(seed)
            assert_close_to_torch(x.grad, mirror.grad, f"gradient {amounts}")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


@pytest.mark.usefixtures("fresh_compiler")
def test_weight_normed_convolution_trains_without_fallback() -> None:
    import copy

    torch.manual_seed(0)
    eager = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, padding=1), dim=2)
    compiled = copy.deepcopy(eager)
    x = torch.randn(2, 4, 8)
    for run in (eager, torch.compile(compiled, backend="neuron-mlir")):
        (run(x) ** 2).sum().backward()
    stats = neuron_mlir.stats()
    assert stats["graphs_compiled"] >= 2
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    for (name, got), want in zip(compiled.named_parameters(), eager.parameters(), strict=True):
        assert_close_to_torch(got.grad, want.grad, name)


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_backward_matches_aten(rank: int, align_corners: bool) -> None:
    # coordinates beyond [-1, 1] exercise every padding mode's edges (dropped taps, clipped and folded positions)
    torch.manual_seed(0)
    x = torch.randn(2, 3, *((5, 7) if rank == 2 else (3, 4, 5)))
    grid = torch.rand(2, *((4, 6) if rank == 2 else (2, 3, 4)), rank) * 2.6 - 1.3
    grad = torch.randn(2, 3, *grid.shape[1:-1])
    op = torch.ops.aten.grid_sampler_2d_backward if rank == 2 else torch.ops.aten.grid_sampler_3d_backward
    bicubic = [(2, 0), (2, 1), (2, 2)] if rank == 2 else []  # ATen has no 3-D bicubic
    for interpolation, padding in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 2), *bicubic]:
        for mask in ([True, True], [False, True]):
            expected = op(grad, x, grid, interpolation, padding, align_corners, mask)
            got = cd.grid_sampler_backward(grad, x, grid, interpolation, padding, align_corners, mask)
            assert got[0] is None if not mask[0] else got[0] is not None
            for name, g, e in zip(("input", "grid"), got, expected, strict=True):
                if g is not None:
                    assert_close_to_torch(g, e, f"{name}: mode {interpolation}, padding {padding}")


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("mode", "padding"), [("bilinear", "zeros"), ("nearest", "border"), ("bicubic", "border")])
def test_grid_sample_trains_without_fallback(mode: str, padding: str) -> None:
    # deformable attention (Deformable DETR, Grounding DINO, D-FINE) samples its values this way; GLM-4V's vision
    # tower resizes its position embeddings bicubically
    torch.manual_seed(0)
    x = torch.randn(2, 16, 9, 11, requires_grad=True)
    grid = (torch.rand(2, 7, 8, 2) * 2.4 - 1.2).requires_grad_()
    weight = torch.randn(2, 16, 7, 8)

    def step(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return (F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=False) * weight).sum()

    expected = torch.autograd.grad(step(x, grid), (x, grid))
    got = torch.autograd.grad(torch.compile(step, backend="neuron-mlir")(x, grid), (x, grid))
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert_close_to_torch(got, expected, "gradients")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fractional_max_pooling_equals_aten_exactly(dtype: torch.dtype) -> None:
    # windows whose starts round differently in bf16, an output of one element, unbatched input, ties and NaN-free
    torch.manual_seed(0)
    cases = [
        (torch.ops.aten.fractional_max_pool2d.default, (2, 3, 9, 11), (3, 2), (4, 5)),
        (torch.ops.aten.fractional_max_pool2d.default, (3, 9, 9), (3, 3), (2, 1)),
        (torch.ops.aten.fractional_max_pool2d.default, (1, 2, 6, 6), (2, 2), (5, 5)),
        (torch.ops.aten.fractional_max_pool3d.default, (2, 3, 5, 6, 7), (2, 2, 3), (2, 3, 4)),
    ]
    for op, shape, kernel, output in cases:
        dims = len(kernel)
        for _ in range(6):
            x = torch.randint(-4, 5, shape).to(dtype)  # small integers: ties inside windows
            batch = 1 if len(shape) == dims + 1 else shape[0]
            samples = torch.rand(batch, shape[-dims - 1], dims).to(dtype)
            values, indices = cd.fractional_max_pool(x, kernel, output, samples)
            expected_values, expected_indices = op(x, kernel, output, samples)
            assert torch.equal(values, expected_values), (op, shape)
            assert torch.equal(indices, expected_indices), (op, shape)


@pytest.mark.usefixtures("fresh_compiler")
def test_randint_draws_on_the_device_within_its_range():
    # Informer's ProbSparse attention samples its keys with randint: drawn from the compiled uniform stream
    def draws(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randint(7, (n, 1000)), torch.randint(-3, 2, (n, 1000), dtype=torch.int32)

    compiled = torch.compile(draws, backend="neuron-mlir")
    torch.manual_seed(0)
    below_seven, around_zero = compiled(20)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert (below_seven.dtype, around_zero.dtype) == (torch.int64, torch.int32)
    for values, low, high in ((below_seven, 0, 7), (around_zero, -3, 2)):
        counts = torch.bincount((values - low).flatten().long(), minlength=high - low)
        assert counts.numel() == high - low  # nothing outside [low, high)
        expected = values.numel() / (high - low)
        assert (counts - expected).abs().max() < 5 * math.sqrt(expected), counts  # each value about as often
    torch.manual_seed(0)
    assert torch.equal(compiled(20)[0], below_seven)  # reproducible under the seed
    assert not torch.equal(compiled(20)[0], below_seven)  # and a new draw at the next call


def test_randint_keeps_atens_op_beyond_24_bits():
    assert cd.randint(2**25, (3,)) is NotImplemented
    assert cd.randint_low(0, 5, (3,), generator=torch.Generator()) is NotImplemented
