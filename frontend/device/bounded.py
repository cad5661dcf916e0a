"""Eager ops whose result size depends on their values: a program of the bound's size, then a cut to the count.

Input contract: a call of one of the ops of `BOUNDED_OPS` (`nonzero`, `masked_select`, `_unique2`,
`unique_consecutive`), or of `index.Tensor` whose one index is a boolean mask after full slices (`x[mask]`,
`x[:, mask]`), on device tensors, as the dispatcher passes it to `frontend.device.eager` (`kernel_for`).

Output guarantee: results equal to the CPU's, element for element and in the same order, as device tensors of
their exact sizes.

A program has static shapes, but these ops' results have as many elements as their input has true (nonzero,
distinct) elements: at most the input's element count, which is known when the call's program is compiled. The
program computes each result into a buffer of that bound with ops of static shapes (the padded forms of
`frontend.data_dependent`, which compile mode uses too) and, as its last output, the number of valid entries.
The host reads that count as CUDA's `nonzero` does (a synchronisation: the program has run) and keeps the
valid prefix of each buffer as a new device tensor of its exact size. Operands with no elements give results
with none, made without a program: there is nothing to compute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neuron_mlir.frontend.data_dependent import (
    coordinates,
    nonzero_mask,
    padded_flat_positions,
    padded_unique,
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
        raise NotImplementedError("unique_consecutive along a dimension")
    return _asked(padded_unique(values, False, return_inverse, return_counts), return_inverse, return_counts)


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
}


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
    return BOUNDED_OPS.get(op)


# `repeat_interleave` by a tensor of repeats: its result's size is the repeats' sum, which no operand's size
# bounds. It runs count first: a program computes the sum (or -1 for a negative repeat), the host reads it as
# `.item()` would (CUDA's kernel reads it too, unless given `output_size=`), and a program of the size's bucket
# computes the indices, cut to the size.
REPEAT_INTERLEAVE = torch.ops.aten.repeat_interleave.Tensor


def repeats_take_the_count_first(repeats: Any) -> bool:
    """Whether a call's repeats are ones the device runs: a 1-D tensor of int32 or int64, as the CPU's kernel
    takes them (any other raises the CPU's error on the host)."""
    return isinstance(repeats, torch.Tensor) and repeats.dim() == 1 and repeats.dtype in (torch.int32, torch.int64)


def repeat_count(repeats: torch.Tensor) -> tuple[torch.Tensor]:
    """The count program of `repeat_interleave(repeats)` (at least one repeat): the result's size, or -1 when a
    repeat is negative."""
    return (repeats_total(repeats),)


def repeat_indices(repeats: torch.Tensor, *, output_size: int) -> torch.Tensor:
    """`repeat_interleave(repeats, output_size=n)` traced with the size known: the first n indices, each
    position's index among the running sums."""
    return repeat_positions(repeats, output_size)


REPEAT_COUNT = BoundedKernel(repeat_count, lambda *_: [])  # its one output is the count


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
