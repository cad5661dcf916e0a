"""Decompositions of ATen ops without a NeuronCore lowering into ops that have one.

Input contract: each function is called by AOTAutograd (and the `neuron` device's tracer) with the arguments of
its ATen overload, on fake tensors of static shapes; shapes and Python scalars may steer the decomposition,
tensor values may not (no `.item()`).

Output guarantee: the op's results with its dtypes, shapes and edge cases (NaN, infinities, empty inputs, ties
where eager's choice is specified) as eager computes them, within the fp32 tolerance of eager where the
arithmetic is regrouped. A decomposition that cannot keep that promise for some arguments (float64 results,
which the core cannot hold) hands them to the reference decomposition, or returns NotImplemented.

The families:
- scans with an associative combine that TensorE's triangular matmul cannot compute (`cumprod`, `cummax`,
  `cummin`, `logcumsumexp`) run as a Hillis-Steele scan: log2(n) elementwise steps, each combining every element
  with the one `2^k` before it;
- order statistics (`median`, `nanmedian`, `kthvalue`, `mode`) read the stable sort the compiler lowers (NaN
  sorts last), at a position computed per row;
- searches (`searchsorted`, `bucketize`), `histc` and `segment_reduce` compare every element with the whole
  sequence (bin range, segment bounds) at once: one broadcast comparison, then a (masked) reduction;
- float32 bit-level ops (`frexp`, `nextafter`) normalise by exact powers of two, bit-exact without reading bits;
- antialiased bilinear resizing is two matmuls with interpolation matrices built from iotas;
- the grid sampler's backward (bilinear, trilinear, nearest) scatters and gathers whole pixels (rows of channels)
  at each tap, with ATen's coordinate derivatives for every padding mode;
- weight normalisation's backward (`_weight_norm_interface_backward`) is its closed form over the slices;
- replication padding's backward is a constant pad of the gradient plus the padding's sums on the edges;
- random distributions (`exponential`, `cauchy`, `log_normal`, `geometric`, `bernoulli` with a tensor of
  probabilities, `normal` with tensor parameters) by their inverse CDFs of the uniform and normal draws the
  compiler generates;
- creation and copies (`logspace` in the dtype asked for, `linspace` between 0-d tensors in float32,
  `rand_like`, `rand`/`randn` passed `generator=None`, `empty_permuted`, `new_empty_strided`, the `*_copy` ops)
  become the factory or view op they stand for.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

aten = torch.ops.aten

Combine = Callable[[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]]


# ---- scans --------------------------------------------------------------------------------------------------


def _shifted(value: torch.Tensor, dim: int, shift: int, fill: float | int | bool | None) -> torch.Tensor:
    """`value` moved `shift` places later along `dim`, the first `shift` places holding `fill` (None: their own
    values)."""
    length = value.shape[dim]
    if fill is None:
        pad = value.narrow(dim, 0, shift)
    else:
        pad_shape = list(value.shape)
        pad_shape[dim] = shift
        pad = torch.full(pad_shape, fill, dtype=value.dtype, device=value.device)
    return torch.cat([pad, value.narrow(dim, 0, length - shift)], dim)


def inclusive_scan(
    values: tuple[torch.Tensor, ...],
    dim: int,
    identities: tuple[float | int | bool, ...] | None,
    combine: Combine,
) -> tuple[torch.Tensor, ...]:
    """The running `combine` of same-shaped `values` along `dim` (Hillis-Steele): for shifts 1, 2, 4, ... below
    the length, every element combines with the one `shift` places before it, `identities` standing in before
    the first. `combine(earlier, later)` must be associative, and the identities neutral on its left. With
    `identities` None, `combine` must be idempotent (an element combined with itself is itself): the first
    elements combine with themselves."""
    length = values[0].shape[dim]
    shift = 1
    while shift < length:
        fills = identities if identities is not None else (None,) * len(values)
        earlier = tuple(_shifted(v, dim, shift, i) for v, i in zip(values, fills, strict=True))
        values = combine(earlier, values)
        shift *= 2
    return values


def _scan_input(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, int]:
    """A 0-d tensor scans as one element (dim 0 or -1); otherwise `dim` made non-negative."""
    if x.dim() == 0:
        return x.reshape(1), 0
    return x, dim % x.dim()


def cumprod(x: torch.Tensor, dim: int, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`aten.cumprod`: integers and bools multiply in int64 unless `dtype` says otherwise, as in eager."""
    if dtype is None and not (x.is_floating_point() or x.is_complex()):
        dtype = torch.int64
    source = x if dtype is None else x.to(dtype)
    scanned, axis = _scan_input(source, dim)
    (product,) = inclusive_scan((scanned,), axis, (1,), lambda a, b: (a[0] * b[0],))
    return product.reshape(x.shape)


def _cumulative_extreme(x: torch.Tensor, dim: int, largest: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """cummax / cummin with eager's indices: the latest element that is NaN, else the latest that equals the
    running extreme (eager updates on >= for cummax, <= for cummin, and on every NaN)."""
    scanned, axis = _scan_input(x, dim)
    shape = [1] * scanned.dim()
    shape[axis] = scanned.shape[axis]
    positions = torch.arange(scanned.shape[axis], device=x.device).reshape(shape).expand(scanned.shape)
    floating = scanned.is_floating_point()

    def combine(earlier: tuple[torch.Tensor, ...], later: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        (a, a_index), (b, b_index) = earlier, later
        beats = b >= a if largest else b <= a
        if floating:
            beats = torch.isnan(b) | (~torch.isnan(a) & beats)
        return torch.where(beats, b, a), torch.where(beats, b_index, a_index)

    # idempotent: no identity needed, so none at the type's bounds (int64's largest is not a float64 fill value)
    values, indices = inclusive_scan((scanned, positions), axis, None, combine)
    return values.reshape(x.shape), indices.reshape(x.shape)


def cummax(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.cummax`: running maxima and the index each was last reached at."""
    return _cumulative_extreme(x, dim, largest=True)


def cummin(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.cummin`: running minima and the index each was last reached at."""
    return _cumulative_extreme(x, dim, largest=False)


def _log_add_exp(earlier: tuple[torch.Tensor, ...], later: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """log(exp(a) + exp(b)) without overflow: max + log1p(exp(-|a - b|)); equal infinities give themselves
    (their difference is NaN), and NaN propagates, as in eager's scan."""
    a, b = earlier[0], later[0]
    largest = torch.maximum(a, b)
    same_infinity = torch.isinf(largest) & (a == b)
    return (torch.where(same_infinity, a, largest + torch.log1p(torch.exp(-(a - b).abs()))),)


def logcumsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """`aten.logcumsumexp` (and `_logcumsumexp`, its kernel): a scan of log-add-exp, each step stable."""
    if not x.is_floating_point():
        return NotImplemented
    scanned, axis = _scan_input(x, dim)
    (result,) = inclusive_scan((scanned,), axis, (-math.inf,), _log_add_exp)
    return result.reshape(x.shape)


# ---- order statistics ---------------------------------------------------------------------------------------


def _pick(
    x: torch.Tensor, dim: int, position: Callable[[int, torch.Tensor], torch.Tensor], keepdim: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The element of each row of `x` along `dim` at a position of its stable ascending sort (NaN last), and
    its index in `x`; `position(length, nan_count)` gives the position, with `nan_count` kept on `dim`."""
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    ordered, order = torch.sort(x, dim=dim, stable=True)
    if x.is_floating_point():
        nans = torch.isnan(x).sum(dim, keepdim=True)
    else:
        nans = torch.zeros([*x.shape[:dim], 1, *x.shape[dim + 1 :]], dtype=torch.int64, device=x.device)
    at = position(x.shape[dim], nans)
    values, indices = torch.gather(ordered, dim, at), torch.gather(order, dim, at)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def _median_position(length: int, nans: torch.Tensor) -> torch.Tensor:
    """The lower median, or the first NaN (NaN propagates): sorted NaN sit at length - nans onwards."""
    return torch.where(nans > 0, length - nans, (length - 1) // 2)


def _nanmedian_position(length: int, nans: torch.Tensor) -> torch.Tensor:
    """The lower median of the numbers; a row of NaN only gives NaN (its index is left to eager's selection
    algorithm, which no rule reproduces)."""
    return torch.clamp(torch.div(length - nans - 1, 2, rounding_mode="floor"), min=0)


def median_dim(x: torch.Tensor, dim: int, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.median.dim`: the lower median of each row and its index; NaN if the row holds one."""
    return _pick(x, dim, _median_position, keepdim)


def median(x: torch.Tensor) -> torch.Tensor:
    """`aten.median`: the lower median of all elements, NaN if one is NaN."""
    return _pick(x.reshape(-1), 0, _median_position, False)[0]


def nanmedian_dim(x: torch.Tensor, dim: int, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.nanmedian.dim`: the lower median of each row's numbers, ignoring NaN."""
    return _pick(x, dim, _nanmedian_position, keepdim)


def nanmedian(x: torch.Tensor) -> torch.Tensor:
    """`aten.nanmedian`: the lower median of all elements that are numbers."""
    return _pick(x.reshape(-1), 0, _nanmedian_position, False)[0]


def kthvalue(x: torch.Tensor, k: int, dim: int = -1, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.kthvalue`: the k-th smallest element of each row (NaN counting as the largest) and its index."""
    length = x.shape[dim] if x.dim() else 1
    torch._check(  # type: ignore[no-untyped-call]  # unannotated in torch
        1 <= k <= length, lambda: f"kthvalue(): selected number k out of range for dimension {dim}"
    )
    return _pick(x, dim, lambda n, nans: torch.full_like(nans, k - 1), keepdim)


def mode(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.mode`: the most frequent value of each row (the smallest of equally frequent ones) and the index of
    its last occurrence, as eager's kernel picks them. In the sorted row equal values form runs; a running
    maximum of the runs' first positions gives every element its place in its run, and the first element to
    reach the longest run's length ends the run of the mode: the last occurrence, the sort being stable. NaN
    sorts last and equals nothing, each a run of its own (eager's comparison sort leaves NaN unordered, so its
    choice among rows holding NaN follows no rule)."""
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    rows = x.movedim(dim, -1)
    length = rows.shape[-1]
    ordered, order = torch.sort(rows, dim=-1, stable=True)
    positions = torch.arange(length, device=x.device).expand(rows.shape)
    starts = torch.cat([torch.ones_like(ordered[..., :1], dtype=torch.bool), ordered[..., 1:] != ordered[..., :-1]], -1)
    (run_start,) = inclusive_scan(
        (torch.where(starts, positions, 0),), rows.dim() - 1, (0,), lambda a, b: (torch.maximum(a[0], b[0]),)
    )
    # argmax takes the first of equal maxima: the smallest value, the sort being ascending
    end = torch.argmax(positions - run_start, dim=-1, keepdim=True)
    value, index = torch.gather(ordered, -1, end), torch.gather(order, -1, end)
    value, index = value.movedim(-1, dim), index.movedim(-1, dim)
    if not keepdim:
        value, index = value.squeeze(dim), index.squeeze(dim)
    return value, index


# ---- searches and counts ------------------------------------------------------------------------------------


def _count_before(boundaries: torch.Tensor, values: torch.Tensor, right: bool, out_int32: bool) -> torch.Tensor:
    """For each value, how many boundaries (the last dim of `boundaries`, which broadcasts against `values`'
    leading dims) it comes after: those with !(b >= v) (!(b > v) when `right`), the count eager's binary search
    finds on a sorted sequence, with NaN values after every boundary."""
    b, v = boundaries.unsqueeze(-2), values.unsqueeze(-1)
    after = ~(b > v) if right else ~(b >= v)
    return after.sum(-1, dtype=torch.int32 if out_int32 else torch.int64)


def searchsorted(
    sorted_sequence: torch.Tensor,
    values: torch.Tensor,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: torch.Tensor | None = None,
) -> torch.Tensor:
    """`aten.searchsorted.Tensor`: insertion points of `values` in the last dim of `sorted_sequence` (read
    through `sorter` when given); a 1-d sequence serves every value."""
    if sorter is not None:
        sorted_sequence = torch.gather(sorted_sequence, -1, sorter)
    right = right or side == "right"
    if sorted_sequence.dim() == 1 and values.dim() != 1:
        counted = _count_before(sorted_sequence, values.reshape(-1), right, out_int32)
        return counted.reshape(values.shape)
    return _count_before(sorted_sequence, values, right, out_int32)


def bucketize(
    x: torch.Tensor, boundaries: torch.Tensor, *, out_int32: bool = False, right: bool = False
) -> torch.Tensor:
    """`aten.bucketize.Tensor`: the bucket of each element among the 1-d `boundaries`."""
    return _count_before(boundaries, x.reshape(-1), right, out_int32).reshape(x.shape)


def histc(x: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    """`aten.histc`: counts of the elements in `bins` equal bins over [min, max] (the data's range when both are
    0, widened by 1 on each side when that range is one value), elements outside it ignored, the upper edge in
    the last bin. Bins are found as eager's kernel finds them, (x - lo) * bins / (hi - lo) truncated."""
    flat = x.reshape(-1)
    if min == max and flat.numel() > 0:
        low, high = torch.aminmax(flat)
        degenerate = low == high
        low, high = torch.where(degenerate, low - 1, low), torch.where(degenerate, high + 1, high)
    else:
        low = torch.full((), min, dtype=x.dtype, device=x.device)
        high = torch.full((), max, dtype=x.dtype, device=x.device)
    inside = (flat >= low) & (flat <= high)
    position = torch.trunc((flat - low) * bins / (high - low))
    position = torch.where(position == bins, position - 1, position)
    edges = torch.arange(bins, device=x.device, dtype=x.dtype)
    hits = (position.unsqueeze(-1) == edges) & inside.unsqueeze(-1)
    return hits.sum(0, dtype=x.dtype)


def segment_reduce(
    data: torch.Tensor,
    reduce: str,
    *,
    lengths: torch.Tensor | None = None,
    indices: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    axis: int = 0,
    unsafe: bool = False,
    initial: float | None = None,
) -> torch.Tensor:
    """`aten.segment_reduce`: `data` reduced over consecutive segments of dim `axis`, sized by `lengths` or
    delimited by `offsets` ([*data.shape[:axis], segments (+ 1)]). Each segment is a mask over the dim ([...,
    segments, n]), so the reduction is one masked reduction: `initial` joins every segment (an empty one is
    `initial`, else 0 for sums, 1 for products, -inf / inf for max / min and NaN for means), as in eager."""
    if indices is not None or (lengths is None) == (offsets is None):
        return NotImplemented
    axis = axis % data.dim()
    if offsets is not None:
        starts, ends = offsets[..., :-1], offsets[..., 1:]
    else:
        assert lengths is not None
        ends = torch.cumsum(lengths, -1)
        starts = ends - lengths
    positions = torch.arange(data.shape[axis], device=data.device)
    member = (starts.unsqueeze(-1) <= positions) & (positions < ends.unsqueeze(-1))  # [..., segments, n]
    trailing = data.dim() - axis - 1
    member = member.reshape(*member.shape, *([1] * trailing))
    values = data.unsqueeze(axis)  # [..., 1, n, ...]
    identity = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}[reduce]
    masked = torch.where(member, values, identity)
    dim = axis + 1
    if reduce in ("sum", "mean"):
        result = masked.sum(dim)
    elif reduce == "prod":
        result = masked.prod(dim)
    else:
        result = masked.amax(dim) if reduce == "max" else masked.amin(dim)
    if initial is not None:
        combine: dict[str, Callable[..., torch.Tensor]] = {
            "sum": torch.add, "mean": torch.add, "prod": torch.mul, "max": torch.maximum, "min": torch.minimum,
        }  # fmt: skip
        result = combine[reduce](result, torch.full_like(result, initial))
    if reduce == "mean":
        count = member.sum(dim).to(data.dtype)
        empty_value = math.nan if initial is None else initial
        result = torch.where(count > 0, result / count, empty_value)
    return result


def _edges_between(low: torch.Tensor, high: torch.Tensor, bins: int) -> torch.Tensor:
    """bins + 1 evenly spaced edges from `low` to `high` (0-d tensors), as ATen's linspace places them: from the
    low end in the first half, from the high end in the second."""
    index = torch.arange(bins + 1, device=low.device, dtype=low.dtype)
    step = (high - low) / bins
    return torch.where(index < (bins + 1) / 2, low + step * index, high - step * (bins - index))


def _histogram_counts(x: torch.Tensor, edges: torch.Tensor, weight: torch.Tensor | None, density: bool) -> torch.Tensor:
    """Counts (or summed weights) of the elements of `x` per bin of the 1-d `edges`: bin i holds
    edges[i] <= x < edges[i + 1], the last bin its upper edge too, elements outside (and NaN) none."""
    flat = x.reshape(-1)
    bins = edges.shape[0] - 1
    inside = (flat >= edges[0]) & (flat <= edges[-1])
    position = (edges[1:-1] <= flat.unsqueeze(-1)).sum(-1)  # interior edges passed: the bin, the top edge's last
    hits = (position.unsqueeze(-1) == torch.arange(bins, device=x.device)) & inside.unsqueeze(-1)
    amounts = hits.to(x.dtype) if weight is None else hits * weight.reshape(-1, 1).to(x.dtype)
    counts = amounts.sum(0)
    if density:
        counts = counts / (counts.sum() * (edges[1:] - edges[:-1]))
    return counts


def histogram_bin_ct(
    x: torch.Tensor,
    bins: int = 100,
    *,
    range: Sequence[float] | None = None,
    weight: torch.Tensor | None = None,
    density: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.histogram.bin_ct`: `bins` equal bins over `range` (the data's, widened by 0.5 on each side when it
    is one value, as NumPy does), and their edges."""
    if range is not None:
        low = torch.full((), range[0], dtype=x.dtype, device=x.device)
        high = torch.full((), range[1], dtype=x.dtype, device=x.device)
    elif x.numel() > 0:
        low, high = torch.aminmax(x.reshape(-1))
    else:  # no data: [0, 1], as eager
        low, high = torch.zeros((), dtype=x.dtype, device=x.device), torch.ones((), dtype=x.dtype, device=x.device)
    degenerate = low == high
    low, high = torch.where(degenerate, low - 0.5, low), torch.where(degenerate, high + 0.5, high)
    edges = _edges_between(low, high, bins)
    return _histogram_counts(x, edges, weight, density), edges


def histogram_bins_tensor(
    x: torch.Tensor, bins: torch.Tensor, *, weight: torch.Tensor | None = None, density: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.histogram.bins_tensor`: the bins between the given (increasing) edges, and a copy of the edges."""
    return _histogram_counts(x, bins, weight, density), bins.clone()


def _histogramdd_outer_edges(
    x: torch.Tensor, dims: int, range: Sequence[float] | None
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(leftmost, rightmost) edge per dimension of the [N, dims] samples `x`: `range`'s pairs, else each column's
    minimum and maximum ([0, 1] for no samples), widened by 0.5 on each side where they are equal, as ATen does."""
    outer = []
    for dim in builtins.range(dims):  # `range` is the op's argument here
        if range is not None:
            low = torch.full((), range[2 * dim], dtype=x.dtype, device=x.device)
            high = torch.full((), range[2 * dim + 1], dtype=x.dtype, device=x.device)
        elif x.shape[0] > 0:
            low, high = torch.aminmax(x[:, dim])
        else:  # no samples: [0, 1], as eager
            low, high = torch.zeros((), dtype=x.dtype, device=x.device), torch.ones((), dtype=x.dtype, device=x.device)
        degenerate = low == high
        outer.append((torch.where(degenerate, low - 0.5, low), torch.where(degenerate, high + 0.5, high)))
    return outer


def _histogramdd_counts(
    x: torch.Tensor, edges: Sequence[torch.Tensor], weight: torch.Tensor | None, density: bool
) -> torch.Tensor:
    """The D-dimensional histogram of the samples `x` ([..., D], one sample per row) over per-dimension `edges`:
    a sample lands in the bin of each coordinate as `_histogram_counts` places it (the last bin closed), and only
    when every coordinate is inside its edges; `density` divides by the total and each bin's volume."""
    dims = len(edges)
    samples = x.reshape(-1, dims)
    shape = [edge.shape[0] - 1 for edge in edges]
    inside = torch.ones(samples.shape[0], dtype=torch.bool, device=x.device)
    flat_bin = torch.zeros(samples.shape[0], dtype=torch.int64, device=x.device)
    for dim, edge in enumerate(edges):
        column = samples[:, dim]
        inside = inside & (column >= edge[0]) & (column <= edge[-1])
        position = (edge[1:-1] <= column.unsqueeze(-1)).sum(-1)  # interior edges passed: the bin
        flat_bin = flat_bin * shape[dim] + position
    total = math.prod(shape)
    hits = (flat_bin.unsqueeze(-1) == torch.arange(total, device=x.device)) & inside.unsqueeze(-1)
    amounts = hits.to(x.dtype) if weight is None else hits * weight.reshape(-1, 1).to(x.dtype)
    counts = amounts.sum(0).reshape(shape)
    if density:
        volume = torch.ones(shape, dtype=x.dtype, device=x.device)
        for dim, edge in enumerate(edges):
            view = [1] * dims
            view[dim] = shape[dim]
            volume = volume * (edge[1:] - edge[:-1]).reshape(view)
        counts = counts / (counts.sum() * volume)
    return counts


def histogramdd_bin_edges(
    x: torch.Tensor,
    bins: Sequence[int],
    *,
    range: Sequence[float] | None = None,
    weight: torch.Tensor | None = None,
    density: bool = False,
) -> list[torch.Tensor]:
    """`aten._histogramdd_bin_edges`: per dimension of the samples ([..., D]), bins[d] + 1 evenly spaced edges
    between its outer edges (`_histogramdd_outer_edges`), placed as ATen's linspace places them."""
    samples = x.reshape(-1, len(bins))
    outer = _histogramdd_outer_edges(samples, len(bins), range)
    return [_edges_between(low, high, count) for (low, high), count in zip(outer, bins, strict=True)]


def histogramdd_from_bin_cts(
    x: torch.Tensor,
    bins: Sequence[int],
    *,
    range: Sequence[float] | None = None,
    weight: torch.Tensor | None = None,
    density: bool = False,
) -> torch.Tensor:
    """`aten._histogramdd_from_bin_cts`: the histogram over `histogramdd_bin_edges`' edges."""
    edges = histogramdd_bin_edges(x, bins, range=range)
    return _histogramdd_counts(x, edges, weight, density)


def histogramdd_from_bin_tensors(
    x: torch.Tensor,
    bins: Sequence[torch.Tensor],
    *,
    weight: torch.Tensor | None = None,
    density: bool = False,
) -> torch.Tensor:
    """`aten._histogramdd_from_bin_tensors`: the histogram over the given (increasing) edges per dimension."""
    return _histogramdd_counts(x, bins, weight, density)


def nonzero_static(x: torch.Tensor, *, size: int, fill_value: int = -1) -> torch.Tensor:
    """`aten.nonzero_static`: the coordinates of the first `size` nonzero elements in row-major order, as
    [size, x.dim()] int64, rows past the last nonzero element holding `fill_value`. The k-th nonzero element is
    the one whose running count of nonzeros is k + 1: one comparison of every output row with every element."""
    flat = (x != 0).reshape(-1)
    if x.dim() == 0 or size == 0:
        return torch.full((size, x.dim()), fill_value, dtype=torch.int64, device=x.device)
    rank = torch.cumsum(flat.to(torch.int64), 0) - 1
    wanted = torch.arange(size, device=x.device).unsqueeze(-1)
    hit = (rank == wanted) & flat  # [size, numel]: one element per row at most
    position = (hit * torch.arange(flat.shape[0], device=x.device)).sum(-1)
    strides = [math.prod(x.shape[d + 1 :]) for d in range(x.dim())]
    coordinates = torch.stack(
        [torch.remainder(torch.div(position, stride, rounding_mode="floor"), extent)
         for stride, extent in zip(strides, x.shape, strict=True)],
        -1,
    )  # fmt: skip
    return torch.where(hit.any(-1, keepdim=True), coordinates, fill_value)


# ---- elementwise and indexing -------------------------------------------------------------------------------


def ldexp(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """`aten.ldexp.Tensor`: x * 2^other, as ATen computes it."""
    return torch.mul(x, torch.pow(2.0, other))


def put(x: torch.Tensor, index: torch.Tensor, source: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
    """`aten.put`: `source` written (or added) at the flat positions `index` of `x`, negative ones from the end."""
    flat_index = index.reshape(-1)
    flat_index = torch.where(flat_index < 0, flat_index + x.numel(), flat_index)
    written = torch.index_put(x.reshape(-1), (flat_index,), source.reshape(-1), accumulate)
    return written.reshape(x.shape)


def dist(x: torch.Tensor, other: torch.Tensor, p: float = 2) -> torch.Tensor:
    """`aten.dist`: the p-norm of the broadcast difference."""
    return torch.linalg.vector_norm(x - other, ord=p)


def weight_norm_interface_backward(
    grad_w: torch.Tensor, saved_v: torch.Tensor, saved_g: torch.Tensor, saved_norms: torch.Tensor, dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten._weight_norm_interface_backward`: the gradients of w = v * g / ||v|| (the norm over every dimension
    but `dim`, kept as `saved_norms`), as ATen's differentiable backward writes them: with p = sum(grad_w * v)
    per slice, grad_g = p / ||v|| and grad_v = g / ||v|| * (grad_w - v * p / ||v||^2)."""
    dim = dim % saved_v.dim()
    axes = [d for d in range(saved_v.dim()) if d != dim]
    product = (grad_w * saved_v).sum(axes, keepdim=True)
    grad_v = (saved_g / saved_norms) * (grad_w - saved_v * (product / (saved_norms * saved_norms)))
    return grad_v, (product / saved_norms).reshape(saved_g.shape)


def replication_pad_backward(grad_output: torch.Tensor, x: torch.Tensor, padding: Sequence[Any]) -> torch.Tensor:
    """`aten.replication_pad{1,2,3}d_backward`: per padded dimension (the last first, as `padding` lists them),
    each input position gets the output position it was copied to, and the first and last positions also the
    sum of the copies of them the left and right padding made. A negative amount (a crop) drops the positions
    it cut: a constant pad by the negated amounts puts each output position on its input position, zeros
    where none was. The amounts may be sizes read from tensor values, so no branch asks their sign."""
    grad = grad_output
    for k in range(len(padding) // 2):
        dim = x.dim() - 1 - k
        left, right = padding[2 * k], padding[2 * k + 1]
        length, padded = x.shape[dim], grad.shape[dim]
        trailing = [0, 0] * (x.dim() - 1 - dim)
        copies_left, copies_right = (torch.sym_max(a, 0) for a in (left, right))  # type: ignore[no-untyped-call]
        first = grad.narrow(dim, 0, copies_left).sum(dim, keepdim=True)
        last = grad.narrow(dim, padded - copies_right, copies_right).sum(dim, keepdim=True)
        grad = (
            aten.constant_pad_nd(grad, [*trailing, -left, -right])
            + aten.constant_pad_nd(first, [*trailing, 0, length - 1])
            + aten.constant_pad_nd(last, [*trailing, length - 1, 0])
        )
    return grad


# Binary normalisation by exact powers of two: each step halves the distance to [1, 2) in the exponent, 2^64
# twice at the bottom to reach the subnormals (down to 2^-149)
_SCALE_STEPS = (64, 32, 16, 8, 4, 2, 1)


def _normalized(magnitude: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, e) with magnitude = m * 2^e and 1 <= m < 2, for positive finite float32 magnitudes, subnormals
    included. Exact: every step multiplies by a power of two (the estimate of a logarithm would be one off next
    to powers of two, and powers computed by `pow` are not exact at the ends of the range)."""
    m, e = magnitude, torch.zeros_like(magnitude)
    for b in _SCALE_STEPS:
        large = m >= 2.0**b
        m, e = torch.where(large, m * 2.0**-b, m), torch.where(large, e + b, e)
    for b in (64, *_SCALE_STEPS):
        small = m < 2.0 ** (1 - b)
        m, e = torch.where(small, m * 2.0**b, m), torch.where(small, e - b, e)
    return m, e


def _scaled(m: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """m * 2^e for integral e in [-126, 127] and a normal result (or one that overflows to infinity), exact."""
    for b in (64, *_SCALE_STEPS):
        up, down = e >= b, e <= -b
        m = torch.where(up, m * 2.0**b, torch.where(down, m * 2.0**-b, m))
        e = torch.where(up, e - b, torch.where(down, e + b, e))
    return m


def frexp(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.frexp.Tensor`: x = mantissa * 2^exponent with 0.5 <= |mantissa| < 1 and an int32 exponent; zeros,
    infinities and NaN are their own mantissa with exponent 0."""
    regular = torch.isfinite(x) & (x != 0)
    m, e = _normalized(torch.where(regular, x.abs(), 1.0).float())
    mantissa = torch.where(regular, torch.where(x < 0, -m, m).to(x.dtype) * 0.5, x)
    return mantissa, torch.where(regular, e + 1, 0).to(torch.int32)


def nextafter(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """`aten.nextafter`: the float next to x towards `other` (`other` itself when equal, NaN from NaN), in x's
    format (float32, bfloat16 or float16, with p bits after the point: 23, 7, 10). A normal |x| = m 2^e steps to
    (m +- 2^-p) 2^e (m - 2^-(p+1) from an exact power of two towards zero), among the subnormals (and from the
    smallest normal down) by the smallest subnormal, from infinity to the largest float. Computed in float32,
    where every such neighbour is exact; float64 has no NeuronCore storage."""
    dtype = torch.result_type(x, other)
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return NotImplemented
    info = torch.finfo(dtype)
    x, other = torch.broadcast_tensors(  # type: ignore[no-untyped-call]  # unannotated in torch
        x.to(dtype).float(), other.to(dtype).float()
    )
    magnitude = x.abs()
    away = ((other > x) & (x >= 0)) | ((other < x) & (x <= 0))  # |x| grows (from 0, either way)
    m, e = _normalized(torch.where((magnitude > 0) & torch.isfinite(magnitude), magnitude, 1.0))
    bits = round(-math.log2(info.eps))  # after the point
    up, down = 2.0**-bits, 2.0 ** -(bits + 1)
    stepped = torch.where(away, m + up, torch.where(m == 1.0, m - down, m - up))
    moved = _scaled(stepped, e)
    subnormal = (magnitude < info.tiny) | ((magnitude == info.tiny) & ~away)
    smallest = info.smallest_normal * 2.0**-bits
    moved = torch.where(subnormal, torch.where(away, magnitude + smallest, magnitude - smallest), moved)
    moved = torch.where(torch.isinf(magnitude), info.max, moved)
    sign = torch.where(x == 0, torch.where(other > 0, 1.0, -1.0), torch.where(x > 0, 1.0, -1.0))
    result = torch.where(x == other, other, moved * sign)
    return torch.where(torch.isnan(x) | torch.isnan(other), x + other, result).to(dtype)


def _antialias_weights(
    input_size: int, output_size: int, align_corners: bool, scale_factor: float | None, device: torch.device
) -> torch.Tensor:
    """[output_size, input_size] float32 weights of antialiased linear interpolation along one dim, as ATen
    computes them (in float32 too): output i centred at scale (i + 1/2) in the input, a triangle filter stretched
    by the scale when downsampling (its support grows with it), the taps of each output normalised to sum 1."""
    if align_corners:
        scale = (input_size - 1) / (output_size - 1) if output_size > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor else input_size / output_size
    support, stretch = (scale, 1.0 / scale) if scale >= 1.0 else (1.0, 1.0)
    center = (torch.arange(output_size, dtype=torch.float32, device=device) + 0.5).unsqueeze(-1) * scale
    first = torch.clamp(torch.trunc(center - support + 0.5), min=0)
    end = torch.clamp(torch.trunc(center + support + 0.5), max=input_size)
    inputs = torch.arange(input_size, dtype=torch.float32, device=device)
    weights = torch.clamp(1.0 - ((inputs - center + 0.5) * stretch).abs(), min=0.0)
    weights = torch.where((inputs >= first) & (inputs < end), weights, 0.0)
    total = weights.sum(-1, keepdim=True)
    return torch.where(total != 0, weights / total, weights)


def upsample_bilinear2d_aa(
    x: torch.Tensor,
    output_size: Sequence[int],
    align_corners: bool,
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> torch.Tensor:
    """`aten._upsample_bilinear2d_aa`: antialiased bilinear resizing of [N, C, H, W] as two matmuls with the
    interpolation matrices of the height and the width, computed from iotas."""
    if not x.is_floating_point():
        return NotImplemented
    height, width = x.shape[-2:]
    along_height = _antialias_weights(height, output_size[0], align_corners, scales_h, x.device)
    along_width = _antialias_weights(width, output_size[1], align_corners, scales_w, x.device)
    resized = torch.matmul(torch.matmul(along_height, x.float()), along_width.t())
    return resized.to(x.dtype)


def upsample_bilinear2d_aa_backward(
    grad_output: torch.Tensor,
    output_size: Sequence[int],
    input_size: Sequence[int],
    align_corners: bool,
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> torch.Tensor:
    """`aten._upsample_bilinear2d_aa_backward`: the transposed resize, W_h^T @ grad @ W_w."""
    if not grad_output.is_floating_point():
        return NotImplemented
    height, width = input_size[-2:]
    along_height = _antialias_weights(height, output_size[0], align_corners, scales_h, grad_output.device)
    along_width = _antialias_weights(width, output_size[1], align_corners, scales_w, grad_output.device)
    grad = torch.matmul(torch.matmul(along_height.t(), grad_output.float()), along_width)
    return grad.to(grad_output.dtype)


def _grid_source_index(
    coord: torch.Tensor, size: int, padding_mode: int, align_corners: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """A grid coordinate in [-1, 1] as a position in input pixels, and the position's derivative by the coordinate,
    as ATen's grid sampler computes both (`grid_sampler_compute_source_index_set_grad`): unnormalise; border padding
    clips into [0, size - 1] with derivative 0 on and beyond the edges; reflection folds the position back into the
    image (derivative +-1 by the number of folds), then clips."""
    position, derivative = _unnormalised(coord, size, align_corners)
    return _padded(position, torch.full_like(position, derivative), size, padding_mode, align_corners)


def _unnormalised(coord: torch.Tensor, size: int, align_corners: bool) -> tuple[torch.Tensor, float]:
    """A grid coordinate in [-1, 1] as a position in input pixels, and the position's derivative by it."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _padded(
    position: torch.Tensor, grad: torch.Tensor, size: int, padding_mode: int, align_corners: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """`position` (with derivative `grad`) moved into the image as the padding mode reads beyond its edges."""
    if padding_mode == 2:
        twice_low, twice_high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        if twice_low == twice_high:
            return torch.zeros_like(position), torch.zeros_like(position)
        low, span = twice_low / 2, (twice_high - twice_low) / 2
        shifted = position - low
        distance = shifted.abs()
        extra = torch.fmod(distance, span)
        even = torch.fmod(torch.floor(distance / span), 2) == 0
        sign = torch.where(shifted < 0, -1.0, 1.0)
        position = torch.where(even, extra + low, span - extra + low)
        grad = grad * torch.where(even, sign, -sign)
    if padding_mode in (1, 2):
        # NaN compares false both ways: it stays NaN with derivative 1, as in ATen
        below, above = position <= 0, position >= size - 1
        position = torch.where(below, 0.0, torch.where(above, float(size - 1), position))
        grad = torch.where(below | above, 0.0, grad)
    return position, grad


def grid_sampler_backward(
    grad_output: torch.Tensor,
    x: torch.Tensor,
    grid: torch.Tensor,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    output_mask: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """`aten.grid_sampler_2d_backward` / `grid_sampler_3d_backward`, bilinear (trilinear) and nearest: the input's
    gradient scatters each output's gradient, times its tap's weight, onto the tap's pixel (taps outside the image
    dropped); the grid's is, per coordinate, the sum over channels and taps of gradient x pixel x the weight's
    derivative, times the position's derivative. Pixels are rows of channels (channels last), so one tap of a
    whole output position is one row gathered or scattered. Bicubic (2-D) taps a 4 x 4 neighbourhood with the
    cubic convolution weights of ATen's upsampling (A = -0.75), each tap moved into the image by the padding mode
    (`_bicubic_grid_sampler_backward`). float64 keeps ATen's kernel."""
    if interpolation_mode == 2 and x.dim() == 4 and x.is_floating_point() and x.dtype != torch.float64:
        return _bicubic_grid_sampler_backward(grad_output, x, grid, padding_mode, align_corners, output_mask)
    if interpolation_mode not in (0, 1) or not x.is_floating_point() or x.dtype == torch.float64:
        return NotImplemented
    batch, channels, *spatial = x.shape
    rank = len(spatial)
    out_spatial = list(grid.shape[1:-1])
    points = batch * math.prod(out_spatial)
    pixels = x.float().movedim(1, -1).reshape(-1, channels)
    grad_rows = grad_output.float().movedim(1, -1).reshape(points, channels)
    # grid component k addresses spatial dim rank - 1 - k (x the width, y the height, z the depth)
    sizes = spatial[::-1]
    strides = [math.prod(sizes[:k]) for k in range(rank)]
    located = [
        _grid_source_index(grid[..., k].float().reshape(points), sizes[k], padding_mode, align_corners)
        for k in range(rank)
    ]
    first_pixel = torch.arange(batch, device=x.device).repeat_interleave(points // batch) * math.prod(spatial)

    def tap(corner: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of a tap at integral positions (float): whether it is inside the image, and its row index."""
        inside = torch.ones_like(corner[0], dtype=torch.bool)
        for k in range(rank):
            inside = inside & (corner[k] >= 0) & (corner[k] <= sizes[k] - 1)
        row = first_pixel
        for k in range(rank):
            row = row + torch.where(inside, corner[k], 0.0).to(torch.int64) * strides[k]
        return inside, row

    grad_pixels = torch.zeros_like(pixels) if output_mask[0] else None
    if interpolation_mode == 1:
        inside, row = tap([torch.round(position) for position, _ in located])
        if grad_pixels is not None:
            grad_pixels = aten.index_put.default(
                grad_pixels, [row], torch.where(inside.unsqueeze(-1), grad_rows, 0.0), True
            )
        grad_grid = torch.zeros_like(grid) if output_mask[1] else None
    else:
        lows = [torch.floor(position) for position, _ in located]
        # the weights of the lower and upper tap along each component
        factors = [((low + 1) - position, position - low) for low, (position, _) in zip(lows, located, strict=True)]
        coordinate_grads = [torch.zeros(points, device=x.device) for _ in range(rank)]
        for bits in itertools.product((0, 1), repeat=rank):
            inside, row = tap([low + bit for low, bit in zip(lows, bits, strict=True)])
            weight = functools.reduce(operator.mul, [factors[k][bits[k]] for k in range(rank)])
            if grad_pixels is not None:
                contribution = torch.where(inside.unsqueeze(-1), grad_rows * weight.unsqueeze(-1), 0.0)
                grad_pixels = aten.index_put.default(grad_pixels, [row], contribution, True)
            if output_mask[1]:
                weighted = (torch.where(inside.unsqueeze(-1), pixels[row], 0.0) * grad_rows).sum(-1)
                for j in range(rank):
                    others = math.prod(factors[k][bits[k]] for k in range(rank) if k != j)
                    step = weighted * others
                    coordinate_grads[j] = coordinate_grads[j] + step if bits[j] else coordinate_grads[j] - step
        grad_grid = None
        if output_mask[1]:
            grad_grid = (
                torch.stack([coordinate_grads[k] * located[k][1] for k in range(rank)], dim=-1)
                .reshape(grid.shape)
                .to(grid.dtype)
            )
    if grad_pixels is not None:
        grad_pixels = grad_pixels.reshape(batch, *spatial, channels).movedim(-1, 1).contiguous().to(x.dtype)
    return grad_pixels, grad_grid


CUBIC_A = -0.75  # the cubic convolution's free parameter in ATen's bicubic upsampling and grid sampler


def _cubic_weights(t: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The weights of the taps at -1, 0, 1 and 2 from a position whose fraction past tap 0 is `t`, and their
    derivatives by `t`: Keys' cubic convolution kernel, (A + 2)|x|^3 - (A + 3)|x|^2 + 1 within 1 and
    A|x|^3 - 5A|x|^2 + 8A|x| - 4A within 2, at distances 1 + t, t, 1 - t and 2 - t."""
    a = CUBIC_A

    def near(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return ((a + 2) * x - (a + 3)) * x * x + 1, (3 * (a + 2) * x - 2 * (a + 3)) * x

    def far(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, (3 * a * x - 10 * a) * x + 8 * a

    (w0, d0), (w1, d1), (w2, d2), (w3, d3) = far(1 + t), near(t), near(1 - t), far(2 - t)
    # d/dt of a weight at distance c + t is its kernel's slope, at distance c - t minus it
    return [w0, w1, w2, w3], [d0, d1, -d2, -d3]


def _bicubic_grid_sampler_backward(
    grad_output: torch.Tensor,
    x: torch.Tensor,
    grid: torch.Tensor,
    padding_mode: int,
    align_corners: bool,
    output_mask: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """`aten.grid_sampler_2d_backward`, bicubic: 16 taps per output position, rows of channels as for bilinear."""
    batch, channels, height, width = x.shape
    points = batch * math.prod(grid.shape[1:-1])
    pixels = x.float().movedim(1, -1).reshape(-1, channels)
    grad_rows = grad_output.float().movedim(1, -1).reshape(points, channels)
    first_pixel = torch.arange(batch, device=x.device).repeat_interleave(points // batch) * (height * width)
    ix, x_derivative = _unnormalised(grid[..., 0].float().reshape(points), width, align_corners)
    iy, y_derivative = _unnormalised(grid[..., 1].float().reshape(points), height, align_corners)
    x0, y0 = torch.floor(ix), torch.floor(iy)
    x_weights, x_slopes = _cubic_weights(ix - x0)
    y_weights, y_slopes = _cubic_weights(iy - y0)
    grad_pixels = torch.zeros_like(pixels) if output_mask[0] else None
    grad_x = torch.zeros(points, device=x.device)
    grad_y = torch.zeros(points, device=x.device)
    # the taps x0 - 1 + i and y0 - 1 + j, each moved into the image by the padding (outside it after that: no tap)
    taps_x = [_padded(x0 + (i - 1), torch.zeros_like(ix), width, padding_mode, align_corners)[0] for i in range(4)]
    taps_y = [_padded(y0 + (j - 1), torch.zeros_like(iy), height, padding_mode, align_corners)[0] for j in range(4)]
    for i, j in itertools.product(range(4), repeat=2):
        tap_x, tap_y = taps_x[i], taps_y[j]
        inside = (tap_x >= 0) & (tap_x <= width - 1) & (tap_y >= 0) & (tap_y <= height - 1)
        row = first_pixel + (
            torch.where(inside, tap_y, 0.0).to(torch.int64) * width + torch.where(inside, tap_x, 0.0).to(torch.int64)
        )
        if grad_pixels is not None:
            weight = (x_weights[i] * y_weights[j]).unsqueeze(-1)
            contribution = torch.where(inside.unsqueeze(-1), grad_rows * weight, 0.0)
            grad_pixels = aten.index_put.default(grad_pixels, [row], contribution, True)
        if output_mask[1]:
            weighted = (torch.where(inside.unsqueeze(-1), pixels[row], 0.0) * grad_rows).sum(-1)
            grad_x = grad_x + weighted * x_slopes[i] * y_weights[j]
            grad_y = grad_y + weighted * x_weights[i] * y_slopes[j]
    grad_grid = None
    if output_mask[1]:
        grad_grid = torch.stack([grad_x * x_derivative, grad_y * y_derivative], dim=-1).reshape(grid.shape)
        grad_grid = grad_grid.to(grid.dtype)
    if grad_pixels is not None:
        grad_pixels = grad_pixels.reshape(batch, height, width, channels).movedim(-1, 1).contiguous().to(x.dtype)
    return grad_pixels, grad_grid


# ---- creation and copies ------------------------------------------------------------------------------------


def logspace(
    start: float,
    end: float,
    steps: int,
    base: float = 10.0,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
) -> torch.Tensor:
    """`aten.logspace`: base ** linspace(start, end, steps), the exponents in the float dtype asked for. The
    reference decomposition computes in float64, which the core does not hold; a float64 or integer result keeps
    it."""
    dtype = dtype or torch.get_default_dtype()
    if not dtype.is_floating_point or dtype == torch.float64:
        return torch._refs.logspace(start, end, steps, base, dtype=dtype, device=device)
    exponents = torch.linspace(start, end, steps, dtype=torch.float32, device=device)
    return torch.pow(base, exponents).to(dtype)


def logspace_tensor(
    start: torch.Tensor | float,
    end: torch.Tensor | float,
    steps: int,
    base: float = 10.0,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
) -> torch.Tensor:
    """`aten.logspace` with 0-d tensors for `start` or `end`: the same, the exponents computed from the tensors."""
    dtype = dtype or torch.get_default_dtype()
    if not dtype.is_floating_point or dtype == torch.float64:
        return NotImplemented
    return torch.pow(base, _linspace_f32(start, end, steps, device)).to(dtype)


def linspace_tensor(
    start: torch.Tensor | float,
    end: torch.Tensor | float,
    steps: int,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
) -> torch.Tensor:
    """`aten.linspace` with 0-d tensors for `start` or `end` (log-spaced bins: linspace(log(a), log(b))) in a float
    dtype, computed in float32: the reference decomposition widens the tensors to float64, which the core does not
    hold; a float64 or integer result keeps it."""
    dtype = dtype or torch.get_default_dtype()
    if not dtype.is_floating_point or dtype == torch.float64:
        return NotImplemented
    return _linspace_f32(start, end, steps, device).to(dtype)


def _linspace_f32(
    start: torch.Tensor | float, end: torch.Tensor | float, steps: int, device: torch.device | None
) -> torch.Tensor:
    """linspace(start, end, steps) in float32, either end a number or a 0-d tensor."""
    tensors = [t for t in (start, end) if isinstance(t, torch.Tensor)]
    device = device or (tensors[0].device if tensors else None)
    first = start.to(torch.float32) if isinstance(start, torch.Tensor) else torch.full((), start, device=device)
    last = end.to(torch.float32) if isinstance(end, torch.Tensor) else torch.full((), end, device=device)
    if steps == 1:
        return first.reshape(1)
    # linspace's symmetric form, as ATen's kernel: from the start in the first half, from the end after it
    index = torch.arange(steps, device=device, dtype=torch.float32)
    step = (last - first) / (steps - 1)
    return torch.where(index < steps / 2, first + step * index, last - step * (steps - 1 - index))


def rand_like(x: torch.Tensor, *, dtype: torch.dtype | None = None, device: torch.device | None = None,
              **factory: Any) -> torch.Tensor:  # fmt: skip
    """`aten.rand_like`: uniform draws of `x`'s shape, from the same stream as `rand`."""
    return torch.rand(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def rand_generator(size: Sequence[int], *, generator: torch.Generator | None = None,
                   **factory: Any) -> torch.Tensor:  # fmt: skip
    """`aten.rand.generator` passed no generator (a model handing on its optional `generator=None`): `rand`."""
    if generator is not None:
        return NotImplemented
    return torch.rand(size, **factory)


def randn_generator(size: Sequence[int], *, generator: torch.Generator | None = None,
                    **factory: Any) -> torch.Tensor:  # fmt: skip
    """`aten.randn.generator` passed no generator: `randn`."""
    if generator is not None:
        return NotImplemented
    return torch.randn(size, **factory)


# ---- random distributions ---------------------------------------------------------------------------------
# Drawn from the uniform and normal streams the compiler generates (`rand`, `randn`: Philox on GpSimdE), by the
# inverse of each distribution's CDF, in float32 and rounded once to the result's dtype (a 16-bit uniform may
# round up to 1, where the inverse CDFs below are infinite). A caller's own generator keeps the op whole.


def _uniform_like(x: torch.Tensor) -> torch.Tensor:
    """Uniform draws in [0, 1) of `x`'s shape, in float32."""
    return torch.rand(x.shape, dtype=torch.float32, device=x.device)


def exponential(x: torch.Tensor, lambd: float = 1.0, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """`aten.exponential`: -log(1 - u) / lambd, which is >= 0 and finite for u in [0, 1)."""
    if generator is not None or not x.dtype.is_floating_point or x.dtype == torch.float64:
        return NotImplemented
    return (torch.log1p(-_uniform_like(x)) * (-1.0 / lambd)).to(x.dtype)


def cauchy(
    x: torch.Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """`aten.cauchy`: median + sigma * tan(pi * (u - 1/2))."""
    if generator is not None or not x.dtype.is_floating_point or x.dtype == torch.float64:
        return NotImplemented
    return (torch.tan((_uniform_like(x) - 0.5) * math.pi) * sigma + median).to(x.dtype)


def log_normal(
    x: torch.Tensor, mean: float = 1.0, std: float = 2.0, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """`aten.log_normal`: exp(mean + std * z) for standard normal z."""
    if generator is not None or not x.dtype.is_floating_point or x.dtype == torch.float64:
        return NotImplemented
    normal = torch.randn(x.shape, dtype=torch.float32, device=x.device)
    return torch.exp(normal * std + mean).to(x.dtype)


def geometric(x: torch.Tensor, p: float, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """`aten.geometric`: the number of Bernoulli(p) trials up to the first success, floor(log(1 - u) / log(1 - p))
    + 1, which is >= 1 for u in [0, 1)."""
    if generator is not None or x.dtype in (torch.float64, torch.bool) or x.is_complex():
        return NotImplemented
    trials = torch.floor(torch.log1p(-_uniform_like(x)) / math.log1p(-p)) + 1
    return trials.to(x.dtype)


RANDINT_SPAN_LIMIT = 2**24  # integers a 24-bit uniform draw (the `rand` stream's) tells apart


def randint_low(
    low: int,
    high: int,
    size: Sequence[int],
    *,
    dtype: torch.dtype | int | None = 4,  # the schema's default: ScalarType 4, int64
    generator: torch.Generator | None = None,
    **factory: Any,
) -> torch.Tensor:
    """`aten.randint.low`: low + floor((high - low) * u), the span's integers about equally likely for a 24-bit
    uniform u (its 2^24 values spread over at most 2^24 integers); a wider span, a generator or a float64 result
    keeps ATen's op."""
    dtype = torch.int64 if dtype is None or isinstance(dtype, int) else dtype
    span = int(high) - int(low)
    if generator is not None or span <= 0 or span > RANDINT_SPAN_LIMIT or dtype == torch.float64:
        return NotImplemented
    u = torch.rand(size, dtype=torch.float32, device=factory.get("device"))
    # a product rounded up to the span itself would be one past the range
    draws = torch.clamp(torch.floor(u * span), max=span - 1) + int(low)
    return draws.to(dtype)


def randint(high: int, size: Sequence[int], **factory: Any) -> torch.Tensor:
    """`aten.randint`: `randint.low` from 0."""
    return randint_low(0, high, size, **factory)


def rrelu_with_noise_functional(
    x: torch.Tensor,
    noise: torch.Tensor,
    lower: float = 0.125,
    upper: float = 1.0 / 3.0,
    training: bool = False,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.rrelu_with_noise_functional`: in training, each element x <= 0 times a slope drawn uniform in [lower,
    upper), the others kept (slope 1), and the slopes as the new noise; otherwise leaky ReLU with the mean slope,
    the noise unchanged."""
    if generator is not None or not x.dtype.is_floating_point or x.dtype == torch.float64:
        return NotImplemented
    if not training:
        return aten.leaky_relu.default(x, (float(lower) + float(upper)) / 2), noise.clone()
    slopes = (_uniform_like(x) * (float(upper) - float(lower)) + float(lower)).to(x.dtype)
    negative = x <= 0
    drawn = torch.where(negative, slopes, torch.ones_like(slopes))
    return torch.where(negative, x * slopes, x), drawn.to(noise.dtype)


def multinomial(
    probabilities: torch.Tensor,
    num_samples: int,
    replacement: bool = False,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """`aten.multinomial`, rows of category weights drawn from as ATen does. Without replacement (or one draw): the
    categories of the `num_samples` largest p / q for exponential q (the exponential form of the Gumbel trick:
    each category in proportion to its weight, none twice, zero weights last). With replacement: each draw the
    first category whose normalised cumulative weight reaches a uniform u. The weights' values are not checked
    (negative, non-finite or all-zero rows), as a device kernel leaves them to the caller."""
    if generator is not None or not probabilities.dtype.is_floating_point or probabilities.dtype == torch.float64:
        return NotImplemented
    categories = probabilities.shape[-1]
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    weights = probabilities.to(torch.float32)
    if not replacement or num_samples == 1:
        scores = weights / (-torch.log1p(-_uniform_like(weights)))
        if num_samples == 1:
            return torch.argmax(scores, -1, keepdim=True)
        return torch.topk(scores, num_samples, -1).indices
    cumulative = torch.cumsum(weights, -1)
    cumulative = cumulative / cumulative[..., -1:]
    draws = torch.rand((*weights.shape[:-1], num_samples), dtype=torch.float32, device=weights.device)
    return torch.clamp(torch.searchsorted(cumulative, draws), max=categories - 1)


MAX_EXACT_RANGE = 2**24
"""The widest integer range drawn from one float32 uniform: every integer below it is a float32, and the 24 random
bits of a draw reach each of them."""


def random_between(x: torch.Tensor, low: int, high: int | None = None) -> torch.Tensor:
    """What `random_.from` writes into `x`: integers uniform in [low, high), low + floor(u * (high - low)),
    computed in float32 and clipped below `high` (the product may round up to it). Ranges a float32 draw does not
    span evenly (wider than `MAX_EXACT_RANGE`, or open-ended: `high` None) raise NotImplementedError, and the
    op draws on the host."""
    if high is None or not 0 < high - low <= MAX_EXACT_RANGE or max(abs(low), abs(high)) > MAX_EXACT_RANGE:
        raise NotImplementedError(f"random_ over [{low}, {high}) needs more than a float32 draw's 24 bits")
    steps = torch.floor(_uniform_like(x) * float(high - low))
    return (torch.clamp(steps, max=float(high - low - 1)) + float(low)).to(x.dtype)


def normal_tensor(
    mean: torch.Tensor | float, std: torch.Tensor | float = 1.0, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """`aten.normal` with a tensor mean, a tensor std or both: mean + std * z over their broadcast shape, in their
    promoted dtype (a zero std gives the mean exactly)."""
    tensors = [t for t in (mean, std) if isinstance(t, torch.Tensor)]
    dtype = torch.result_type(mean, std)
    if generator is not None or not dtype.is_floating_point or dtype == torch.float64:
        return NotImplemented
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))  # type: ignore[no-untyped-call]
    normal = torch.randn(shape, dtype=torch.float32, device=tensors[0].device)
    as_float = [t.to(torch.float32) if isinstance(t, torch.Tensor) else t for t in (mean, std)]
    return (normal * as_float[1] + as_float[0]).to(dtype)


def bernoulli_tensor(x: torch.Tensor, p: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """`aten.bernoulli.Tensor`: 1 where a uniform draw falls below the probability (broadcast to `x`), else 0."""
    if generator is not None or x.dtype == torch.float64 or p.dtype == torch.float64:
        return NotImplemented
    return (_uniform_like(x) < p.to(torch.float32)).to(x.dtype)


def empty_permuted(
    size: Sequence[int],
    physical_layout: Sequence[int],
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    **factory: Any,
) -> torch.Tensor:
    """`aten.empty_permuted`: an empty tensor laid out in `physical_layout` order, a permuted view of a dense one."""
    dense = torch.empty([size[d] for d in physical_layout], dtype=dtype, device=device)
    inverse = [0] * len(physical_layout)
    for position, d in enumerate(physical_layout):
        inverse[d] = position
    return dense.permute(inverse)


def new_empty_strided(
    x: torch.Tensor,
    size: Sequence[int],
    stride: Sequence[int],
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    **factory: Any,
) -> torch.Tensor:
    """`aten.new_empty_strided`: `empty_strided` in `x`'s dtype and device unless given."""
    return torch.empty_strided(size, stride, dtype=dtype or x.dtype, device=device or x.device)


def view_copy(x: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """`aten.view_copy`: the view, copied."""
    return aten.view.default(x, size).clone()


def permute_copy(x: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    """`aten.permute_copy`: the permuted view, copied (contiguous)."""
    return x.permute(list(dims)).clone(memory_format=torch.contiguous_format)


def slice_copy(
    x: torch.Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> torch.Tensor:
    """`aten.slice_copy.Tensor`: the slice, copied (what functionalization leaves of a slice it removes)."""
    return aten.slice.Tensor(x, dim, start, end, step).clone()


def fractional_max_pool(
    x: torch.Tensor, kernel_size: Sequence[int], output_size: Sequence[int], random_samples: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.fractional_max_pool2d` / `3d`: each output element the maximum of a window of `kernel_size` whose start
    along every spatial axis follows the plane's sample u in [0, 1): with a = (in - k) / (out - 1) in the input's
    dtype, window i starts at int((i + u) a) - int(u a) and the last at in - k (PyTorch's pseudo-random
    intervals); the index is the window's first maximum as a flat position in the plane. `random_samples` is
    [batch, channels, dims], its entries (W, H) for 2-D pooling and (T, H, W) for 3-D, as ATen reads them."""
    dims = len(kernel_size)
    source = x if x.dim() == dims + 2 else x.unsqueeze(0)
    batch, channels, sizes = source.shape[0], source.shape[1], source.shape[2:]
    sample_of_axis = [1, 0] if dims == 2 else list(range(dims))
    positions = torch.zeros((), dtype=torch.int64, device=x.device)
    stride = 1
    for axis in reversed(range(dims)):
        starts = _fractional_starts(
            random_samples[:, :, sample_of_axis[axis]], sizes[axis], output_size[axis], kernel_size[axis]
        )
        offsets = starts.unsqueeze(-1) + torch.arange(kernel_size[axis], device=x.device)  # [n, c, out, k]
        shape = [batch, channels] + [1] * (2 * dims)
        shape[2 + axis], shape[2 + dims + axis] = output_size[axis], kernel_size[axis]
        positions = positions + offsets.reshape(shape) * stride
        stride *= sizes[axis]
    windows = math.prod(kernel_size)
    positions = positions.expand(batch, channels, *output_size, *kernel_size).reshape(batch, channels, -1)
    values = torch.gather(source.reshape(batch, channels, -1), 2, positions)
    values = values.reshape(batch, channels, *output_size, windows)
    largest = torch.amax(values, -1)
    first = torch.argmax(values, -1, keepdim=True)
    indices = torch.gather(positions.reshape(batch, channels, *output_size, windows), -1, first).squeeze(-1)
    if x.dim() != dims + 2:
        largest, indices = largest.squeeze(0), indices.squeeze(0)
    return largest, indices


def _fractional_starts(sample: torch.Tensor, size: int, outputs: int, pool: int) -> torch.Tensor:
    """[n, c, outputs] int64: the window starts of fractional max pooling along one axis for samples [n, c]. The
    step a is rounded as ATen computes it, a division in float32 rounded to the input's dtype."""
    last = torch.full((*sample.shape, 1), size - pool, dtype=torch.int64, device=sample.device)
    if outputs == 1:
        return last
    import ml_dtypes

    # on the host, with NumPy: the trace's tensors are fake, and the step is a constant of the sizes; 16-bit types
    # divide in float32, as their C++ operators do
    wide = np.float64 if sample.dtype == torch.float64 else np.float32
    rounded = {torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16}.get(sample.dtype, wide)
    step = float(rounded(wide(size - pool) / wide(outputs - 1)))
    steps = torch.arange(outputs - 1, dtype=sample.dtype, device=sample.device)
    starts = ((steps + sample.unsqueeze(-1)) * step).to(torch.int64) - (sample * step).to(torch.int64).unsqueeze(-1)
    return torch.cat([starts, last], -1)


def select_copy(x: torch.Tensor, dim: int, index: int) -> torch.Tensor:
    """`aten.select_copy.int`: the selected slice, copied."""
    return aten.select.int(x, dim, index).clone()


def expand_copy(x: torch.Tensor, size: Sequence[int], *, implicit: bool = False) -> torch.Tensor:
    """`aten.expand_copy`: the expanded view, copied (contiguous)."""
    return aten.expand.default(x, size, implicit=implicit).clone(memory_format=torch.contiguous_format)


def unbind_copy(x: torch.Tensor, dim: int = 0) -> tuple[torch.Tensor, ...]:
    """`aten.unbind_copy.int`: each slice along `dim`, copied."""
    return tuple(part.clone() for part in x.unbind(dim))


def as_strided_copy(
    x: torch.Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> torch.Tensor:
    """`aten.as_strided_copy`: the strided view, copied (contiguous)."""
    return x.as_strided(size, stride, storage_offset).clone(memory_format=torch.contiguous_format)


def index_put_impl(
    x: torch.Tensor,
    indices: Sequence[torch.Tensor | None],
    values: torch.Tensor,
    accumulate: bool = False,
    unsafe: bool = False,
) -> torch.Tensor:
    """`aten._index_put_impl` (what `index_put_` calls on a tensor): `index_put`; `unsafe` only lets ATen skip its
    bounds check of the indices, which changes no result of valid ones."""
    return aten.index_put.default(x, list(indices), values, accumulate)


def composite_decompositions() -> dict[object, object]:
    """The decompositions of this module, keyed by ATen overload, for AOTAutograd's table."""
    return {
        aten.cumprod.default: cumprod,
        aten.cummax.default: cummax,
        aten.cummin.default: cummin,
        aten.logcumsumexp.default: logcumsumexp,
        aten._logcumsumexp.default: logcumsumexp,
        aten.median.default: median,
        aten.median.dim: median_dim,
        aten.nanmedian.default: nanmedian,
        aten.nanmedian.dim: nanmedian_dim,
        aten.kthvalue.default: kthvalue,
        aten.mode.default: mode,
        aten.searchsorted.Tensor: searchsorted,
        aten.bucketize.Tensor: bucketize,
        aten.histc.default: histc,
        aten.segment_reduce.default: segment_reduce,
        aten.histogram.bin_ct: histogram_bin_ct,
        aten.histogram.bins_tensor: histogram_bins_tensor,
        aten._histogramdd_bin_edges.default: histogramdd_bin_edges,
        aten._histogramdd_from_bin_cts.default: histogramdd_from_bin_cts,
        aten._histogramdd_from_bin_tensors.default: histogramdd_from_bin_tensors,
        aten.nonzero_static.default: nonzero_static,
        aten._upsample_bilinear2d_aa.default: upsample_bilinear2d_aa,
        aten._upsample_bilinear2d_aa_backward.default: upsample_bilinear2d_aa_backward,
        aten.grid_sampler_2d_backward.default: grid_sampler_backward,
        aten.grid_sampler_3d_backward.default: grid_sampler_backward,
        aten.ldexp.Tensor: ldexp,
        aten.put.default: put,
        aten._index_put_impl.default: index_put_impl,
        aten.dist.default: dist,
        aten._weight_norm_interface_backward.default: weight_norm_interface_backward,
        aten.replication_pad1d_backward.default: replication_pad_backward,
        aten.replication_pad2d_backward.default: replication_pad_backward,
        aten.replication_pad3d_backward.default: replication_pad_backward,
        aten.logspace.default: logspace,
        aten.logspace.Tensor_Tensor: logspace_tensor,
        aten.logspace.Tensor_Scalar: logspace_tensor,
        aten.logspace.Scalar_Tensor: logspace_tensor,
        aten.linspace.Tensor_Tensor: linspace_tensor,
        aten.linspace.Tensor_Scalar: linspace_tensor,
        aten.linspace.Scalar_Tensor: linspace_tensor,
        aten.frexp.Tensor: frexp,
        aten.nextafter.default: nextafter,
        aten.rand_like.default: rand_like,
        aten.randint.default: randint,
        aten.randint.low: randint_low,
        aten.rand.generator: rand_generator,
        aten.randn.generator: randn_generator,
        aten.exponential.default: exponential,
        aten.rrelu_with_noise_functional.default: rrelu_with_noise_functional,
        aten.multinomial.default: multinomial,
        aten.cauchy.default: cauchy,
        aten.log_normal.default: log_normal,
        aten.geometric.default: geometric,
        aten.bernoulli.Tensor: bernoulli_tensor,
        aten.normal.Tensor_Tensor: normal_tensor,
        aten.normal.Tensor_float: normal_tensor,
        aten.normal.float_Tensor: normal_tensor,
        aten.empty_permuted.default: empty_permuted,
        aten.new_empty_strided.default: new_empty_strided,
        aten.view_copy.default: view_copy,
        aten.permute_copy.default: permute_copy,
        aten.fractional_max_pool2d.default: fractional_max_pool,
        aten.fractional_max_pool3d.default: fractional_max_pool,
        aten.slice_copy.Tensor: slice_copy,
        aten.select_copy.int: select_copy,
        aten.expand_copy.default: expand_copy,
        aten.unbind_copy.int: unbind_copy,
        aten.as_strided_copy.default: as_strided_copy,
    }
