"""Eager ops whose result size depends on their values: a program of the bound's size, then a cut to the count.

Input contract: a call of one of the ops of `BOUNDED_OPS` (`nonzero`, `masked_select`, `_unique2`, `_unique`,
`unique_dim`, `unique_consecutive`), or of `index.Tensor` whose one index is a boolean mask after full slices
(`x[mask]`, `x[:, mask]`), on device tensors, as the dispatcher passes it to `frontend.device.eager`
(`kernel_for`); or of one of `COUNT_FIRST_OPS` (`repeat_interleave.Tensor`, `bincount`).

Output guarantee: results equal to the CPU's, element for element and in the same order, as device tensors of
their exact sizes.

A program has static shapes, but these ops' results have as many elements as their input has true (nonzero,
distinct) elements: at most the input's element count, which is known when the call's program is compiled. The
program computes each result into a buffer of that bound with ops of static shapes (the padded forms of
`frontend.data_dependent`, which compile mode uses too) and, as its last output, the number of valid entries.
The host reads that count as CUDA's `nonzero` does (a synchronisation: the program has run) and keeps the
valid prefix of each buffer as a new device tensor of its exact size. Operands with no elements give results
with none, made without a program: there is nothing to compute.

A few results have no bound in their operands' sizes (`COUNT_FIRST_OPS`: `repeat_interleave`'s is the repeats'
sum). They run count first: a program computes the size, the host reads it, and a program of the size's bucket
(`size_bucket`) computes the result, which is cut to the size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neuron_mlir.frontend.data_dependent import (
    bin_counts,
    bins_total,
    coordinates,
    nonzero_mask,
    padded_flat_positions,
    padded_unique,
    padded_unique_slices,
    repeat_positions,
    repeats_total,
)

Cut = Callable[[Sequence[np.ndarray], int, tuple[Any, ...], dict[str, Any]], list[np.ndarray]]


@dataclass(frozen=True)
class BoundedKernel:
    """How one op runs: `padded` is traced in the op's place (same arguments) and returns the results at their
    bound, then the count (0-d int64); `cut` turns the program's other outputs and the count into the op's
    results, given the call's arguments."""

    padded: Callable[..., tuple[torch.Tensor, ...]]
    cut: Cut


def _nonzero(values: torch.Tensor) -> tuple[torch.Tensor, ...]:
    mask = nonzero_mask(values)
    if values.dim() == 0:
        return (mask.to(torch.int64),)  # a 0-d tensor's indices have no columns: only the count is needed
    positions, count = padded_flat_positions(mask)
    return coordinates(positions, values.shape), count


def _cut_nonzero(
    outputs: Sequence[np.ndarray], count: int, args: tuple[Any, ...], _: dict[str, Any]
) -> list[np.ndarray]:
    if args[0].dim() == 0:
        return [np.zeros((count, 0), dtype=np.int64)]
    return [outputs[0][:count]]


def _masked_select(values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    shape = torch.broadcast_shapes(values.shape, mask.shape)  # type: ignore[no-untyped-call]  # unannotated in torch
    positions, count = padded_flat_positions(mask.expand(shape))
    return values.expand(shape).reshape(-1)[positions], count


def _prefix(outputs: Sequence[np.ndarray], count: int, *_: Any) -> list[np.ndarray]:
    return [outputs[0][:count]]


def _unique(
    values: torch.Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[torch.Tensor, ...]:
    # the CPU sorts whether asked to or not (`sorted=False` only permits another order): sorted results equal its
    return _asked(padded_unique(values, True, return_inverse, return_counts), return_inverse, return_counts)


def _unique_consecutive(
    values: torch.Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> tuple[torch.Tensor, ...]:
    if dim is not None:
        return padded_unique_slices(values, dim, False)
    return _asked(padded_unique(values, False, return_inverse, return_counts), return_inverse, return_counts)


def _unique_dim(
    values: torch.Tensor, dim: int, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[torch.Tensor, ...]:
    # the CPU sorts whether asked to or not, and returns the inverse and counts whether asked for or not
    return padded_unique_slices(values, dim, True)


def _unique_legacy(values: torch.Tensor, sorted: bool = True, return_inverse: bool = False) -> tuple[torch.Tensor, ...]:
    """`torch._unique`: `unique` without counts."""
    distinct, indices, _, count = padded_unique(values, True, return_inverse, False)
    return (distinct, *([indices] if return_inverse else []), count)


def _cut_unique_legacy(
    outputs: Sequence[np.ndarray], count: int, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[np.ndarray]:
    inverse = bool(kwargs.get("return_inverse", args[2] if len(args) > 2 else False))
    return [outputs[0][:count], outputs[1] if inverse else np.zeros(0, dtype=np.int64)]


def _dim_of(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    """The dimension a `unique` call works along (`unique_dim`'s second argument, `unique_consecutive`'s `dim`),
    made non-negative, or None for the flattened input."""
    if op is torch.ops.aten.unique_dim.default:
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    else:
        dim = kwargs.get("dim", args[3] if len(args) > 3 else None)
    return None if dim is None else dim % max(args[0].dim(), 1)


def _cut_slices(op: Any) -> Cut:
    """The cut of `unique` along a dimension: the distinct slices and their counts cut to the count, the inverse
    whole (the CPU returns all three, asked for or not)."""

    def cut(
        outputs: Sequence[np.ndarray], count: int, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> list[np.ndarray]:
        distinct, inverse, tallies = outputs
        dim = _dim_of(op, args, kwargs)
        return [np.take(distinct, np.arange(count), axis=dim), inverse, tallies[:count]]

    return cut


def _asked(results: tuple[torch.Tensor, ...], inverse: bool, counts: bool) -> tuple[torch.Tensor, ...]:
    """The outputs of a `unique` program: the results asked for (the others are empty, made by the cut) and the
    count."""
    distinct, indices, tallies, count = results
    return (distinct, *([indices] if inverse else []), *([tallies] if counts else []), count)


def _unique_cut(inverse_at: int) -> Cut:
    """The cut of a `unique` op whose `return_inverse` and `return_counts` are its arguments `inverse_at` and the
    next: the distinct values and counts cut to the count, the inverse whole, the results not asked for empty."""

    def cut(
        outputs: Sequence[np.ndarray], count: int, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> list[np.ndarray]:
        inverse, counts = (
            bool(kwargs.get(name, args[position] if position < len(args) else False))
            for position, name in ((inverse_at, "return_inverse"), (inverse_at + 1, "return_counts"))
        )
        given = iter(outputs)
        distinct = next(given)[:count]
        empty = np.zeros(0, dtype=np.int64)
        return [distinct, next(given) if inverse else empty, next(given)[:count] if counts else empty]

    return cut


def _masked_index(values: torch.Tensor, indices: Sequence[torch.Tensor | None]) -> tuple[torch.Tensor, ...]:
    """`x[mask]` after full slices: the mask's dimensions replaced by its true positions, gathered at their padded
    coordinates (index 0 past the count, a valid one)."""
    where = len(indices) - 1
    mask = indices[where]
    assert mask is not None
    positions, count = padded_flat_positions(nonzero_mask(mask))
    columns = list(coordinates(positions, mask.shape).unbind(1))
    return torch.ops.aten.index.Tensor(values, [None] * where + columns), count


def _cut_masked_index(
    outputs: Sequence[np.ndarray], count: int, args: tuple[Any, ...], _: dict[str, Any]
) -> list[np.ndarray]:
    return [np.take(outputs[0], np.arange(count), axis=len(args[1]) - 1)]


_MASKED_INDEX = BoundedKernel(_masked_index, _cut_masked_index)

BOUNDED_OPS: dict[Any, BoundedKernel] = {
    torch.ops.aten.nonzero.default: BoundedKernel(_nonzero, _cut_nonzero),
    torch.ops.aten.masked_select.default: BoundedKernel(_masked_select, _prefix),
    torch.ops.aten._unique2.default: BoundedKernel(_unique, _unique_cut(2)),
    torch.ops.aten.unique_consecutive.default: BoundedKernel(_unique_consecutive, _unique_cut(1)),
    torch.ops.aten._unique.default: BoundedKernel(_unique_legacy, _cut_unique_legacy),
    torch.ops.aten.unique_dim.default: BoundedKernel(_unique_dim, _cut_slices(torch.ops.aten.unique_dim.default)),
}

# `unique_consecutive` along a dimension: its results are all three, cut as `unique_dim`'s
_CONSECUTIVE_SLICES = BoundedKernel(_unique_consecutive, _cut_slices(torch.ops.aten.unique_consecutive.default))


def kernel_for(op: torch._ops.OpOverload, args: tuple[Any, ...]) -> BoundedKernel | None:
    """How a call of `op` runs here, if it does: the ops of `BOUNDED_OPS`, and indexing by one boolean mask after
    full slices (other indices with a mask would broadcast against its count, which the padded form does not
    have)."""
    if op is torch.ops.aten.index.Tensor:
        indices = args[1] if len(args) > 1 else ()
        mask = indices[-1] if indices else None
        if (
            isinstance(mask, torch.Tensor)
            and mask.dtype in (torch.bool, torch.uint8)
            and mask.dim() > 0
            and all(index is None for index in indices[:-1])
        ):
            return _MASKED_INDEX
        return None
    if op is torch.ops.aten.unique_consecutive.default and _dim_of(op, args, {}) is not None:
        return _CONSECUTIVE_SLICES
    return BOUNDED_OPS.get(op)


@dataclass(frozen=True)
class CountFirst:
    """How an op whose result size no operand's size bounds runs: count first. A program computes the size alone
    (`count`, of the tensor `counted` picks: -1 for values the op refuses), the host reads it as `.item()` would,
    and the op's call at the size's bucket (`at`, traced as `traced`) computes the result, cut to the size.

    `runs`: whether the device takes the call (else the CPU's kernel raises PyTorch's error for it); `given`: the
    size the call states itself (`output_size=`), which needs no count; `size`: the result's size from the count
    read, raising PyTorch's error for -1."""

    runs: Callable[[tuple[Any, ...], dict[str, Any]], bool]
    given: Callable[[tuple[Any, ...], dict[str, Any]], int | None]
    counted: Callable[[tuple[Any, ...], dict[str, Any]], torch.Tensor]
    count: Callable[[torch.Tensor], torch.Tensor]
    size: Callable[[int, tuple[Any, ...], dict[str, Any]], int]
    at: Callable[[tuple[Any, ...], dict[str, Any], int], tuple[tuple[Any, ...], dict[str, Any]]]
    traced: Callable[..., torch.Tensor]


def _repeats_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    # the CPU's kernel takes 1-D int32 or int64 repeats, and no output_size= but 0 for no repeats
    repeats = args[0]
    return (
        isinstance(repeats, torch.Tensor)
        and repeats.dim() == 1
        and repeats.dtype in (torch.int32, torch.int64)
        and (repeats.numel() > 0 or not kwargs.get("output_size"))
    )


def _repeats_size(count: int, *_: Any) -> int:
    if count < 0:
        raise RuntimeError("repeats can not be negative")
    return count


def repeat_indices(repeats: torch.Tensor, *, output_size: int) -> torch.Tensor:
    """`repeat_interleave(repeats, output_size=n)` traced with the size known: the first n indices, each
    position's index among the running sums."""
    return repeat_positions(repeats, output_size)


_NON_NEGATIVE = "bincount only supports 1-d non-negative integral inputs."


def _bins_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    # the CPU's checks: 1-D integers (not booleans), weights of their length, a minlength of at least 0
    values = args[0]
    weights = args[1] if len(args) > 1 else kwargs.get("weights")
    minlength = args[2] if len(args) > 2 else kwargs.get("minlength", 0)
    return (
        isinstance(values, torch.Tensor)
        and values.dim() == 1
        and not values.dtype.is_floating_point
        and not values.dtype.is_complex
        and values.dtype != torch.bool
        and (weights is None or (weights.dim() == 1 and weights.shape == values.shape))
        and minlength >= 0
    )


def _bins_size(count: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    if count < 0:
        raise RuntimeError(_NON_NEGATIVE)
    return max(count, args[2] if len(args) > 2 else kwargs.get("minlength", 0))


def _bins_at(args: tuple[Any, ...], kwargs: dict[str, Any], bucket: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    weights = args[1] if len(args) > 1 else kwargs.get("weights")
    return (args[0], weights, bucket), {}


# Ops whose result's size no operand's size bounds: `repeat_interleave` by a tensor of repeats (the repeats' sum,
# -1 for a negative repeat; CUDA's kernel reads it too, unless given `output_size=`) and `bincount` (the largest
# value and one, at least `minlength`; CUDA's reads the largest value).
COUNT_FIRST_OPS: dict[Any, CountFirst] = {
    torch.ops.aten.repeat_interleave.Tensor: CountFirst(
        runs=_repeats_run,
        given=lambda _, kwargs: kwargs.get("output_size"),
        counted=lambda args, _: args[0],
        count=repeats_total,
        size=_repeats_size,
        at=lambda args, _, bucket: ((args[0],), {"output_size": bucket}),
        traced=repeat_indices,
    ),
    torch.ops.aten.bincount.default: CountFirst(
        runs=_bins_run,
        given=lambda *_: None,
        counted=lambda args, _: args[0],
        count=bins_total,
        size=_bins_size,
        at=_bins_at,
        traced=bin_counts,
    ),
}


def size_bucket(size: int) -> int:
    """The length a data-dependent size is computed at: the next power of two, at least `SMALLEST_BUCKET` (sizes
    below it cost about what it costs), so sizes up to n share at most log2(n) - 2 programs and the padding is
    less than the size itself."""
    from neuron_mlir.frontend.size_buckets import SMALLEST_BUCKET

    return max(SMALLEST_BUCKET, 1 << max(size - 1, 0).bit_length())


def empty_results(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[np.ndarray]:
    """The results of a call with an operand of no elements: the op itself on host tensors of the operands'
    shapes and dtypes, whose values no result reads (every result is empty, or the input's shape of indices)."""
    from torch.utils._pytree import tree_map_only

    from neuron_mlir.frontend.tensors import to_numpy

    stand_ins = tree_map_only(torch.Tensor, lambda t: torch.zeros(t.shape, dtype=t.dtype), (args, kwargs))
    results = op(*stand_ins[0], **stand_ins[1])
    return [to_numpy(r) for r in (results if isinstance(results, tuple | list) else [results])]


def has_no_elements(flat: Sequence[Any]) -> bool:
    return any(isinstance(v, torch.Tensor) and v.numel() == 0 for v in flat)
