"""Ops whose output size depends on tensor values, computed on the core into buffers of their upper bound.

`nonzero`, `masked_select` and indexing with boolean masks return as many elements as their input has true (or
nonzero) elements, `unique` as many as it has distinct values: at most the input's element count, which is
static. These decompositions, which AOTAutograd applies while it traces, compute the result into a buffer of
that bound with ops of static shapes (a running count of the true elements gives each one its slot; the others
write a slot past the end that is cut off), plus the count as a 0-d tensor. The count is then read by the host
(`aten._local_scalar_dense`, an unbacked size `u0` in the graph) and the buffer's valid prefix taken as a view
(`aten.slice`), so the graph continues with the result's exact size. `host_nodes` finds these reads and cuts
(and the arithmetic on their sizes) for `frontend.compile_graph`, which runs them on the host and compiles what
follows once per value of the count it meets. `unique` along a dimension compares every pair of slices at
once. `repeat_interleave` with tensor repeats and `bincount` have no bound in their inputs' sizes: the host reads
the size first (the repeats' sum; the largest value and one), then each output position finds its index among the
repeats' running sums, and each value adds into its bin.

`tensor_split` by a tensor of sections or indices is the other kind: its number of results depends on the values,
which Dynamo reads while it traces, guarding on them; `specialise_split_points` writes them into the graph as
constants before AOTAutograd traces it.

Dynamo passes such ops to a backend only when asked to (`torch._dynamo.config.capture_dynamic_output_shape_ops`;
`.item()` with `capture_scalar_outputs`); otherwise it runs them itself between graphs. Traces without a
symbolic-shape environment (the `neuron` device's single-op compiles) keep the ops whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

_MASK_DTYPES = (torch.bool, torch.uint8)


def _fake_mode(*tensors: torch.Tensor) -> Any:
    """The fake-tensor mode of the trace when it tracks symbolic shapes (Dynamo's does), else None."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(tensors)
    return fake_mode if getattr(fake_mode, "shape_env", None) is not None else None


def _traced(*tensors: torch.Tensor) -> Any:
    """The fake-tensor mode of the trace, with or without symbolic shapes, or None outside a trace."""
    from torch._guards import detect_fake_mode

    return detect_fake_mode(tensors)


def _valid_prefix(buffer: torch.Tensor, count: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """The first `count` entries of `buffer` along `dim`, `count` read by the host (an unbacked size).

    The read is an `.item()` that the trace records whether or not Dynamo was asked to capture the user's own
    (`capture_scalar_outputs`): the op being decomposed already has a data-dependent size."""
    bound = buffer.shape[dim]
    fake_mode = _fake_mode(count)
    allowed = fake_mode.allow_scalar_outputs
    fake_mode.allow_scalar_outputs = True
    try:
        size = count.item()
    finally:
        fake_mode.allow_scalar_outputs = allowed
    torch._check(size >= 0)  # type: ignore[no-untyped-call]  # unannotated in torch
    torch._check(size <= bound)  # type: ignore[no-untyped-call]
    return buffer.narrow(dim, 0, cast(int, size))  # an unbacked SymInt: int() would specialise it


# The number of (slot, element) pairs up to which a padded result's slots search running counts (a comparison
# each: `padded_flat_positions`, `repeat_positions`); beyond it a scatter places the elements, whose fixed cost is
# higher (simulated on trn2: 128 repeats over 256 positions, 27.1 us searching against 32.6; 512 over 1024, 97.3
# against 70.7).
_SEARCHED_PAIRS = 1 << 16


def padded_flat_positions(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """([n] int64: the row-major flat positions of the true elements of `mask`, in order, then zeros; the
    number of true elements, 0-d int64), n = mask.numel().

    The inclusive running count of true elements is each one's slot plus one. Up to `_SEARCHED_PAIRS` (slot,
    element) pairs each slot counts the elements whose running count is at most its index; beyond, true elements
    write their position to their slot and false ones to slot n, one past the buffer, which is dropped (a scatter,
    whose DMA costs more than the comparisons of small masks: simulated on trn2, `nonzero` of 128 elements 21.2
    us against 32.0)."""
    flat = mask.reshape(-1)
    bound = flat.shape[0]
    running = torch.cumsum(flat.to(torch.int64), 0)
    if isinstance(bound, int) and bound * bound <= _SEARCHED_PAIRS:
        # slot k holds the number of elements whose running count is at most k: the (k+1)-th true one's position
        # (a comparison per slot and element instead of a scatter); slots past the count hold 0
        slot = torch.arange(bound, dtype=torch.int64, device=mask.device)
        found = (running.unsqueeze(0) <= slot.unsqueeze(1)).sum(1)
        return torch.where(slot < running[-1], found, 0), running[-1]
    slots = torch.where(flat, running - 1, torch.full_like(running, bound))
    positions = torch.arange(bound, dtype=torch.int64, device=mask.device)
    buffer = torch.zeros(bound + 1, dtype=torch.int64, device=mask.device)
    buffer = torch.index_put(buffer, (slots,), positions)
    return buffer[:bound], running[-1]


def coordinates(flat_positions: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """[n, len(shape)]: the index of each row-major flat position in a tensor of `shape`."""
    columns = []
    stride = 1
    for size in reversed(shape):
        columns.append(torch.remainder(torch.div(flat_positions, stride, rounding_mode="floor"), size))
        stride *= size
    return torch.stack(columns[::-1], dim=1)


def nonzero_mask(values: torch.Tensor) -> torch.Tensor:
    return values if values.dtype == torch.bool else values != 0


def nonzero(values: torch.Tensor) -> torch.Tensor:
    """`aten.nonzero`: [count, ndim] int64 indices of the nonzero elements, in row-major order."""
    if values.dim() == 0 or values.numel() == 0 or values.is_complex() or _fake_mode(values) is None:
        return NotImplemented
    positions, count = padded_flat_positions(nonzero_mask(values))
    return _valid_prefix(coordinates(positions, values.shape), count)


def masked_select(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`aten.masked_select`: the elements of `values` where `mask` (broadcast together) is true, flattened."""
    shape = torch.broadcast_shapes(values.shape, mask.shape)  # type: ignore[no-untyped-call]  # unannotated in torch
    if len(shape) == 0 or values.numel() == 0 or mask.numel() == 0 or _fake_mode(values, mask) is None:
        return NotImplemented
    positions, count = padded_flat_positions(mask.expand(shape))
    chosen = values.expand(shape).reshape(-1)[positions]
    return _valid_prefix(chosen, count)


def index_with_masks(values: torch.Tensor, indices: Sequence[torch.Tensor | None]) -> torch.Tensor:
    """`aten.index.Tensor` whose one index is a boolean mask after full slices (`x[mask]`, `x[:, mask]`): the
    mask's dimensions are replaced by its true positions, gathered at their padded coordinates (index 0 past the
    count, a valid one), and the result cut to the count along the masked dimension."""
    where = len(indices) - 1
    mask = indices[where]
    if mask is None or mask.dtype not in _MASK_DTYPES or any(index is not None for index in indices[:where]):
        return NotImplemented
    if mask.dim() == 0 or mask.numel() == 0 or _fake_mode(values, mask) is None:
        return NotImplemented
    positions, count = padded_flat_positions(nonzero_mask(mask))
    columns = list(coordinates(positions, mask.shape).unbind(1))
    gathered = torch.ops.aten.index.Tensor(values, [None] * where + columns)
    return _valid_prefix(gathered, count, dim=where)


def index_put_with_masks(
    destination: torch.Tensor,
    indices: Sequence[torch.Tensor | None],
    values: torch.Tensor,
    accumulate: bool = False,
) -> torch.Tensor:
    """`aten.index_put` whose one index is a boolean mask after full slices and whose values have one row per
    true element along the masked dimension: the values go to the mask's true positions, the first `count` of
    the padded ones, an ordinary scatter once the count is known. The count is data-dependent (the backward of
    `x[mask]` and of `masked_select`), or static where the values come from a graph before a break
    (`x[mask] += y` in Python between graphs); a static count is the mask's only when the call says so, which a
    host-checked assertion states (`torch._assert_async`), as eager's shape check does. A single row goes to
    every true element (PyTorch broadcasts it), a select; no rows leave the destination as it is when the mask
    has no true element."""
    where = len(indices) - 1
    mask = indices[where]
    if mask is None or mask.dtype not in _MASK_DTYPES or any(index is not None for index in indices[:where]):
        return NotImplemented
    if mask.dim() == 0 or values.dim() != destination.dim() - mask.dim() + 1:
        return NotImplemented
    count = values.shape[where]
    if not _unbacked_symbols(count):
        # a static count needs no symbolic sizes: the `neuron` device's single-op traces take this form too
        if not isinstance(count, int) or _traced(destination, mask, values) is None:
            return NotImplemented
        if count == 1:  # one row for every true element, however many: a select
            chosen_mask = nonzero_mask(mask).reshape(
                (1,) * where + tuple(mask.shape) + (1,) * (values.dim() - where - 1)
            )
            row = values.reshape(values.shape[:where] + (1,) * mask.dim() + values.shape[where + 1 :])
            return torch.where(chosen_mask, destination + row if accumulate else row, destination)
        positions, true_count = padded_flat_positions(nonzero_mask(mask))
        torch._assert_async(
            true_count == count,
            f"index_put: shape mismatch: {count} values for the true elements of a boolean mask index",
        )
        if count == 0:
            return destination.clone()
    else:
        positions, _ = padded_flat_positions(nonzero_mask(mask))
    chosen = list(coordinates(positions.narrow(0, 0, count), mask.shape).unbind(1))
    return torch.ops.aten.index_put.default(destination, [None] * where + chosen, values, accumulate)


def unique_sorted(
    values: torch.Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten._unique2` with sorted output (torch.unique's default): the distinct values in ascending order, each
    element's index among them (`return_inverse`, in the input's shape) and each value's number of occurrences
    (`return_counts`); an output not asked for is empty, as ATen returns it."""
    if not sorted or values.numel() == 0 or values.is_complex() or _fake_mode(values) is None:
        return NotImplemented
    distinct, inverse, tallies, count = padded_unique(values, True, return_inverse, return_counts)
    result = _valid_prefix(distinct, count)
    counts = tallies.narrow(0, 0, result.shape[0]) if return_counts else tallies
    return result, inverse, counts


def padded_unique(
    values: torch.Tensor, sort: bool, return_inverse: bool, return_counts: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(distinct values then zeros, [n]; each element's index among them in the input's shape, or empty; each
    value's number of occurrences then zeros, [n], or empty; the number of distinct values, 0-d int64), n =
    values.numel() > 0. Sorted first (`unique`) or in the input's order (`unique_consecutive`), the elements
    start a new value where they differ from their predecessor; the running count of those starts numbers the
    values, the first element of each run writes its value to that slot, every element adds one to its slot's
    count and its number goes back to its unsorted position."""
    flat = values.reshape(-1)
    bound = flat.shape[0]
    if sort:
        ordered, order = torch.sort(flat)
    else:
        ordered, order = flat, None
    starts = torch.ones(bound, dtype=torch.bool, device=values.device)
    starts = torch.cat([starts[:1], ordered[1:] != ordered[:-1]])
    running = torch.cumsum(starts.to(torch.int64), 0)
    number = running - 1
    slots = torch.where(starts, number, torch.full_like(number, bound))
    distinct = torch.index_put(torch.zeros(bound + 1, dtype=values.dtype, device=values.device), (slots,), ordered)
    inverse = torch.empty(0, dtype=torch.int64, device=values.device)
    if return_inverse:
        unsorted = number if order is None else torch.index_put(torch.zeros_like(number), (order,), number)
        inverse = unsorted.reshape(values.shape)
    tallies = torch.empty(0, dtype=torch.int64, device=values.device)
    if return_counts:
        ones = torch.ones_like(number)
        tallies = torch.index_put(torch.zeros_like(number), (number,), ones, accumulate=True)
    return distinct[:bound], inverse, tallies, running[-1]


def padded_unique_slices(
    values: torch.Tensor, dim: int, sort: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the distinct slices of `values` along `dim`, then zeros, in `values`' shape; each slice's index among them,
    [n]; each distinct slice's number of occurrences then zeros, [n]; the number of distinct slices, 0-d int64),
    n = values.shape[dim] > 0 and slices of at least one element. Sorted lexicographically as the CPU sorts them
    (`unique(dim=)`: the first element where one slice is below the other decides, an element beside a NaN
    decides nothing, and slices nothing decides keep the input's order), or in the input's order
    (`unique_consecutive(dim=)`). A slice holding a NaN equals none.

    Sorted, the pairs are compared all at once ([n, n, slice size] comparisons): a slice's slot is the number of
    distinct slices before it, counted among the first slice of each class of equal ones."""
    moved = values.movedim(dim, 0)
    bound = moved.shape[0]
    rows = moved.reshape(bound, -1)
    if sort:
        mine_all, theirs_all = rows.unsqueeze(1), rows.unsqueeze(0)  # [i, j, column]
        differ = (mine_all != theirs_all).any(-1)
        # the CPU's order: the first column where one is below the other decides (a NaN is neither)
        ordered = (mine_all < theirs_all) | (mine_all > theirs_all)
        decided = ordered.any(-1)
        column = ordered.to(torch.int32).argmax(-1)
        mine = torch.gather(rows, 1, column)  # [i, j]: row i at that column
        theirs = torch.gather(rows, 1, column.transpose(0, 1)).transpose(0, 1)  # row j at that column
        order = torch.arange(bound, device=values.device)
        before = order.unsqueeze(1) < order.unsqueeze(0)  # [i, j]: i before j
        # undecided slices that differ (by NaNs) keep the input's order
        below = (decided & (mine < theirs)) | (~decided & differ & before)
        first = ~(~differ & before.transpose(0, 1)).any(1)  # no equal slice before it
        number = (below.transpose(0, 1) & first.unsqueeze(0)).sum(1)  # the distinct slices below each
    else:
        starts = torch.cat([torch.ones(1, dtype=torch.bool, device=values.device), (rows[1:] != rows[:-1]).any(1)])
        first = starts
        number = torch.cumsum(starts.to(torch.int64), 0) - 1
    slots = torch.where(first, number, torch.full_like(number, bound))
    distinct = torch.index_put(
        torch.zeros(bound + 1, rows.shape[1], dtype=values.dtype, device=values.device), (slots,), rows
    )
    distinct = distinct[:bound].reshape(moved.shape).movedim(0, dim)
    tallies = torch.index_put(torch.zeros_like(number), (number,), torch.ones_like(number), accumulate=True)
    return distinct, number, tallies, first.to(torch.int64).sum()


def unique_slices(
    values: torch.Tensor, dim: int, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten.unique_dim`: the distinct slices along `dim` in the CPU's order, each slice's index among them and
    each distinct slice's number of occurrences (all three, asked for or not, as ATen returns them)."""
    if values.numel() == 0 or values.is_complex() or _fake_mode(values) is None:
        return NotImplemented
    dim = dim % values.dim()
    distinct, inverse, tallies, count = padded_unique_slices(values, dim, True)
    result = _valid_prefix(distinct, count, dim=dim)
    return result, inverse, tallies.narrow(0, 0, result.shape[dim])


def bins_total(values: torch.Tensor, minlength: int = 0) -> torch.Tensor:
    """0-d int64: the number of bins `bincount(values, minlength=minlength)` needs, its largest value and one (at
    least one value) or `minlength` if more, or -1 when a value is negative (which eager refuses)."""
    needed = torch.clamp(values.max().to(torch.int64) + 1, min=minlength)
    return torch.where((values < 0).any(), -1, needed)


def bin_counts(values: torch.Tensor, weights: torch.Tensor | None = None, minlength: Any = 0) -> torch.Tensor:
    """`bincount(values, weights, minlength)` with every value below `minlength`: each value's count (or the sum
    of its weights), a scatter-add into `minlength` bins. Float32 weights give float32 sums, others the float64
    the CPU gives."""
    if weights is None:
        added, dtype = torch.ones(values.shape, dtype=torch.int64, device=values.device), torch.int64
    else:
        dtype = torch.float32 if weights.dtype == torch.float32 else torch.float64
        added = weights.to(dtype)
    bins = torch.zeros(minlength, dtype=dtype, device=values.device)
    return torch.index_put(bins, (values.to(torch.int64),), added, accumulate=True)


def bincount(values: torch.Tensor, weights: torch.Tensor | None = None, minlength: int = 0) -> torch.Tensor:
    """`aten.bincount`: as many bins as the largest value and one (at least `minlength`), a size no input's
    bounds: the host reads it first (a sync, as CUDA's kernel makes), then the values are added into their bins."""
    integral = not (values.dtype.is_floating_point or values.dtype.is_complex or values.dtype == torch.bool)
    if values.dim() != 1 or not integral or values.numel() == 0 or _fake_mode(values) is None:
        return NotImplemented
    if weights is not None and (weights.dtype != torch.float32 or weights.shape != values.shape):
        return NotImplemented  # float64 sums, which the core does not hold, or eager's error
    fake_mode = _fake_mode(values)
    allowed = fake_mode.allow_scalar_outputs
    fake_mode.allow_scalar_outputs = True
    try:
        size = bins_total(values, minlength).item()
    finally:
        fake_mode.allow_scalar_outputs = allowed
    torch._check(size >= 0, lambda: "bincount only supports 1-d non-negative integral inputs.")  # type: ignore[no-untyped-call]
    return bin_counts(values, weights, size)


def repeat_interleave_counts(repeats: torch.Tensor, *, output_size: int | None = None) -> torch.Tensor:
    """`aten.repeat_interleave.Tensor`: each index i repeated `repeats[i]` times. Its size, the repeats' sum, has no
    bound in the input's sizes: the host reads the sum first (a sync, as CUDA's kernel makes), then each output
    position finds its index among the running sums."""
    if repeats.dim() != 1 or repeats.is_floating_point() or repeats.is_complex() or _fake_mode(repeats) is None:
        return NotImplemented
    size: Any = output_size
    if size is None:
        fake_mode = _fake_mode(repeats)
        allowed = fake_mode.allow_scalar_outputs
        fake_mode.allow_scalar_outputs = True
        try:
            size = repeats_total(repeats).item() if repeats.numel() else 0
        finally:
            fake_mode.allow_scalar_outputs = allowed
        torch._check(size >= 0, lambda: "repeat_interleave: repeats can not be negative")  # type: ignore[no-untyped-call]
    return repeat_positions(repeats, size)


def repeats_total(repeats: torch.Tensor) -> torch.Tensor:
    """0-d int64: the sum of the 1-D integer `repeats` (at least one), or -1 when a repeat is negative (which eager
    refuses): the size of `repeat_interleave`'s result and its validity in the one value the host reads."""
    return torch.where((repeats < 0).any(), -1, repeats.sum(dtype=torch.int64))


def repeat_positions(repeats: torch.Tensor, size: Any) -> torch.Tensor:
    """[size] of `repeats`' dtype: the index each of the first `size` positions of `repeat_interleave(repeats)`
    holds, the number of running sums of the repeats at or below the position. Positions from the repeats' sum on
    hold `repeats.numel()`, past every index (a size bucket's padding)."""
    ends = torch.cumsum(repeats, 0)
    if isinstance(size, int) and repeats.numel() * size > _SEARCHED_PAIRS:
        # each running sum adds one at its position (those at or past the end, none); a running sum over the
        # positions then counts the sums at or below each. Clamped, a size below the sum (a wrong `output_size=`,
        # which CUDA does not check either) still writes within the buffer.
        marks = torch.zeros(size + 1, dtype=ends.dtype, device=repeats.device)
        marks = torch.index_put(marks, (torch.clamp(ends, 0, size),), torch.ones_like(ends), accumulate=True)
        return torch.cumsum(marks[:size], 0).to(repeats.dtype)
    positions = torch.arange(size, device=repeats.device, dtype=ends.dtype)
    return torch.searchsorted(ends, positions, right=True).to(repeats.dtype)


def data_dependent_decompositions() -> dict[object, Callable[..., object]]:
    """The decompositions of this module, keyed by ATen overload, for AOTAutograd's table."""
    return {
        torch.ops.aten.nonzero.default: nonzero,
        torch.ops.aten.masked_select.default: masked_select,
        torch.ops.aten.index.Tensor: index_with_masks,
        torch.ops.aten.index_put.default: index_put_with_masks,
        torch.ops.aten._unique2.default: unique_sorted,
        torch.ops.aten.repeat_interleave.Tensor: repeat_interleave_counts,
        torch.ops.aten.unique_dim.default: unique_slices,
        torch.ops.aten.bincount.default: bincount,
    }


def _unbacked_symbols(value: object) -> set[object]:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return set(free_unbacked_symbols(value)) if value is not None else set()


def host_nodes(graph_module: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The nodes that run on the host because they handle data-dependent sizes, not data: reads of a scalar
    from a tensor (`aten._local_scalar_dense`, the source of every unbacked size), arithmetic and assertions on
    unbacked sizes, and the views that cut a buffer to one (`aten.slice`/`narrow` of a static tensor to `u0`
    rows). None of them moves or computes tensor data; compiled regions run everything else."""
    from neuron_mlir.frontend.fx_importer import SIZE_ASSERTIONS

    found: set[torch.fx.Node] = set()
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        value = node.meta.get("val")
        reads_a_count = node.target is torch.ops.aten._local_scalar_dense.default
        size_arithmetic = isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool) and bool(
            _unbacked_symbols(value)
        )
        checks_a_count = str(node.target) in SIZE_ASSERTIONS and any(arg in found for arg in node.all_input_nodes)
        if reads_a_count or size_arithmetic or checks_a_count or _cuts_to_unbacked_size(node, value):
            found.add(node)
    return found


def _cuts_to_unbacked_size(node: torch.fx.Node, value: object) -> bool:
    """A view whose result has an unbacked size that its tensor input does not have."""
    if not isinstance(node.target, torch._ops.OpOverload) or not node.target.is_view:
        return False
    source = node.args[0].meta.get("val") if node.args and isinstance(node.args[0], torch.fx.Node) else None
    return bool(_unbacked_symbols(value) - _unbacked_symbols(source))


def has_unbacked_inputs(graph_module: torch.fx.GraphModule) -> bool:
    """Whether a placeholder's value (a size, or a tensor's shape) holds an unbacked size: the graph can only be
    compiled once that size is known, at its call."""
    return any(
        _unbacked_symbols(node.meta.get("val", node.meta.get("example_value")))
        for node in graph_module.graph.nodes
        if node.op == "placeholder"
    )


_TENSOR_SPLITS: tuple[object, ...] = (torch.tensor_split, torch.Tensor.tensor_split)
_SPLIT_KEYWORDS = ("indices_or_sections", "tensor_indices_or_sections", "sections", "indices")


def specialise_split_points(graph_module: torch.fx.GraphModule) -> int:
    """Give each `tensor_split` of Dynamo's graph whose sections or indices are a tensor the split points its
    traced results show, as a list of integers; returns how many it rewrote.

    Dynamo traces such a call with the tensor's value (the number of results depends on it) and guards on that
    value, so a call with another value traces again: the graph is specialised already, and the list says so
    where AOTAutograd can see it. Traced with the tensor, the op reads its value (`.item()` / `.tolist()`), which
    a fake tensor cannot give. A result with a symbolic size along the split axis leaves the call as it is."""
    rewritten = 0
    for node in graph_module.graph.nodes:
        method = node.op == "call_method" and node.target == "tensor_split"
        if not (method or (node.op == "call_function" and node.target in _TENSOR_SPLITS)):
            continue
        keyword = next((key for key in _SPLIT_KEYWORDS if key in node.kwargs), None)
        split = node.args[1] if len(node.args) > 1 else node.kwargs.get(keyword) if keyword else None
        if not isinstance(split, torch.fx.Node) or not isinstance(split.meta.get("example_value"), torch.Tensor):
            continue  # a list, or a size (SymInt) of the graph: nothing Dynamo read from a tensor
        results = node.meta.get("example_value")
        source = node.args[0].meta.get("example_value") if isinstance(node.args[0], torch.fx.Node) else None
        if not isinstance(results, tuple | list) or not isinstance(source, torch.Tensor):
            continue
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        if not isinstance(dim, int):
            continue
        sizes = [result.shape[dim] for result in results]
        if not all(isinstance(size, int) for size in sizes):
            continue
        points, offset = [], 0
        for size in sizes[:-1]:
            offset += size
            points.append(offset)
        node.args = (node.args[0], points, *node.args[2:])
        node.kwargs = {key: value for key, value in node.kwargs.items() if key != keyword}
        rewritten += 1
    if rewritten:
        graph_module.recompile()
    return rewritten
