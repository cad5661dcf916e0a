"""Strided layouts of HBM tensors, and the view algebra that keeps reshapes, transposes and broadcasts free.

A `Layout` is (shape, strides, offset) in elements relative to an allocation, like a PyTorch tensor's
metadata or an MLIR strided memref. Every ATen view op maps to a function here; when a view cannot be expressed
over the existing memory (a reshape that mixes non-contiguous dims), the function returns None and the caller
materialises a contiguous copy first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neuron_mlir.runtime.program import row_major_strides


def normalize_dim(dim: int, rank: int) -> int:
    """A dimension index in range, allowing PyTorch's negative indices (and rank 0 as rank 1)."""
    bound = max(rank, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"dimension {dim} is out of range for rank {rank}")
    return dim % bound


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def contiguous(shape: Sequence[int]) -> Layout:
        return Layout(tuple(shape), row_major_strides(shape), 0)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        count = 1
        for extent in self.shape:
            count *= extent
        return count

    def is_contiguous(self) -> bool:
        """Row-major dense (size-1 dimensions may have any stride)."""
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True

    # ---- ATen view ops -------------------------------------------------------------------------------------

    def permute(self, dims: Sequence[int]) -> Layout:
        order = [normalize_dim(d, self.rank) for d in dims]
        return Layout(tuple(self.shape[d] for d in order), tuple(self.strides[d] for d in order), self.offset)

    def transpose(self, dim0: int, dim1: int) -> Layout:
        order = list(range(self.rank))
        a, b = normalize_dim(dim0, self.rank), normalize_dim(dim1, self.rank)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def expand(self, sizes: Sequence[int]) -> Layout:
        """Broadcast to `sizes` (new leading dims and size-1 dims get stride 0; -1 keeps a size)."""
        lead = len(sizes) - self.rank
        if lead < 0:
            raise ValueError(f"cannot expand shape {self.shape} to fewer dimensions {tuple(sizes)}")
        shape: list[int] = []
        strides: list[int] = []
        for index, size in enumerate(sizes):
            if index < lead:
                shape.append(size)
                strides.append(0)
                continue
            own, stride = self.shape[index - lead], self.strides[index - lead]
            if size == -1 or size == own:
                shape.append(own)
                strides.append(stride)
            elif own == 1:
                shape.append(size)
                strides.append(0)
            else:
                raise ValueError(f"cannot expand dimension of size {own} to {size}")
        return Layout(tuple(shape), tuple(strides), self.offset)

    def broadcast_to(self, shape: Sequence[int]) -> Layout:
        return self.expand(shape)

    def reshape(self, sizes: Sequence[int]) -> Layout | None:
        """A view with shape `sizes` over the same elements in row-major order, or None if strides can't say it.

        Walking the source dimensions from the innermost, each maximal run of dimensions that is contiguous in
        memory (a chunk) may be re-divided freely; a target dimension that would straddle two chunks is not
        expressible. This is the rule PyTorch's `view` follows.
        """
        new_shape = _infer_size(sizes, self.num_elements)
        if self.num_elements == 0 or self.rank == 0:
            return Layout(new_shape, row_major_strides(new_shape), self.offset)
        new_strides = [0] * len(new_shape)
        view_dim = len(new_shape) - 1
        chunk_stride = self.strides[-1]
        chunk_elements = view_elements = 1
        for dim in range(self.rank - 1, -1, -1):
            chunk_elements *= self.shape[dim]
            chunk_ends = dim == 0 or (
                self.shape[dim - 1] != 1 and self.strides[dim - 1] != chunk_elements * chunk_stride
            )
            if not chunk_ends:
                continue
            while view_dim >= 0 and (view_elements < chunk_elements or new_shape[view_dim] == 1):
                new_strides[view_dim] = view_elements * chunk_stride
                view_elements *= new_shape[view_dim]
                view_dim -= 1
            if view_elements != chunk_elements:
                return None
            if dim > 0:
                chunk_stride = self.strides[dim - 1]
                chunk_elements = view_elements = 1
        if view_dim != -1:
            return None
        return Layout(new_shape, tuple(new_strides), self.offset)

    def split_dim(self, dim: int, outer: int) -> Layout:
        """Split dimension `dim` of extent n into (outer, n // outer); always expressible."""
        extent, stride = self.shape[dim], self.strides[dim]
        if extent % outer:
            raise ValueError(f"cannot split a dimension of {extent} into {outer} parts")
        inner = extent // outer
        shape = (*self.shape[:dim], outer, inner, *self.shape[dim + 1 :])
        strides = (*self.strides[:dim], stride * inner, stride, *self.strides[dim + 1 :])
        return Layout(shape, strides, self.offset)

    def select(self, dim: int, index: int) -> Layout:
        dim = normalize_dim(dim, self.rank)
        index = index + self.shape[dim] if index < 0 else index
        shape = self.shape[:dim] + self.shape[dim + 1 :]
        strides = self.strides[:dim] + self.strides[dim + 1 :]
        return Layout(shape, strides, self.offset + index * self.strides[dim])

    def slice(self, dim: int, start: int | None, end: int | None, step: int = 1) -> Layout:
        dim = normalize_dim(dim, self.rank)
        extent = self.shape[dim]
        first, last, _ = slice(start, end, step).indices(extent)
        count = max(0, (last - first + step - 1) // step)
        shape = (*self.shape[:dim], count, *self.shape[dim + 1 :])
        strides = (*self.strides[:dim], self.strides[dim] * step, *self.strides[dim + 1 :])
        return Layout(shape, strides, self.offset + first * self.strides[dim])

    def flip(self, dims: Sequence[int]) -> Layout:
        """Reverse `dims`: negative strides, the offset moved to each flipped dimension's last element."""
        strides, offset = list(self.strides), self.offset
        for dim in {normalize_dim(d, self.rank) for d in dims}:
            if self.shape[dim] > 1:
                offset += (self.shape[dim] - 1) * strides[dim]
                strides[dim] = -strides[dim]
        return Layout(self.shape, tuple(strides), offset)

    def diagonal(self, offset: int, dim1: int, dim2: int) -> Layout:
        """The diagonal of (dim1, dim2) shifted by `offset` as a new last dimension (stride s1 + s2)."""
        a, b = normalize_dim(dim1, self.rank), normalize_dim(dim2, self.rank)
        if a == b:
            raise ValueError(f"diagonal dimensions must differ, got {dim1} and {dim2}")
        start = self.offset + (offset * self.strides[b] if offset >= 0 else -offset * self.strides[a])
        length = max(0, min(self.shape[a] + min(offset, 0), self.shape[b] - max(offset, 0)))
        if length == 0:
            start = self.offset
        keep = [i for i in range(self.rank) if i not in (a, b)]
        shape = (*(self.shape[i] for i in keep), length)
        strides = (*(self.strides[i] for i in keep), self.strides[a] + self.strides[b])
        return Layout(shape, strides, start)

    def unfold(self, dim: int, size: int, step: int) -> Layout:
        """Windows of `size` every `step` along `dim`: that dim counts windows, a new last dim walks one."""
        if self.rank == 0:
            return Layout((size,), (1,), self.offset)
        dim = normalize_dim(dim, self.rank)
        count = (self.shape[dim] - size) // step + 1
        shape = (*self.shape[:dim], count, *self.shape[dim + 1 :], size)
        strides = (*self.strides[:dim], self.strides[dim] * step, *self.strides[dim + 1 :], self.strides[dim])
        return Layout(shape, strides, self.offset)

    def unsqueeze(self, dim: int) -> Layout:
        if not -self.rank - 1 <= dim <= self.rank:
            raise IndexError(f"dimension {dim} is out of range for unsqueezing a rank-{self.rank} tensor")
        dim = dim + self.rank + 1 if dim < 0 else dim
        stride = self.strides[dim] * self.shape[dim] if dim < self.rank else 1
        return Layout(
            (*self.shape[:dim], 1, *self.shape[dim:]), (*self.strides[:dim], stride, *self.strides[dim:]), self.offset
        )

    def squeeze(self, dims: Sequence[int] | None = None) -> Layout:
        chosen = {normalize_dim(d, self.rank) for d in dims} if dims is not None else set(range(self.rank))
        keep = [i for i in range(self.rank) if not (i in chosen and self.shape[i] == 1)]
        return Layout(tuple(self.shape[i] for i in keep), tuple(self.strides[i] for i in keep), self.offset)


def _infer_size(sizes: Sequence[int], count: int) -> tuple[int, ...]:
    sizes = list(sizes)
    if sizes.count(-1) > 1:
        raise ValueError("only one dimension can be inferred")
    known = 1
    for extent in sizes:
        if extent != -1:
            known *= extent
    if -1 in sizes:
        sizes[sizes.index(-1)] = count // known if known else 0
    total = 1
    for extent in sizes:
        total *= extent
    if total != count:
        raise ValueError(f"shape {tuple(sizes)} does not hold {count} elements")
    return tuple(sizes)


def collapse(shape: Sequence[int], layouts: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge adjacent dimensions that are contiguous in every one of `layouts` (lists of strides).

    Returns the collapsed shape and each layout's collapsed strides; element order is unchanged, so loops over
    the collapsed shape visit the same elements in the same order. Size-1 dimensions are dropped.
    """
    keep = [i for i, extent in enumerate(shape) if extent != 1]
    dims: list[int] = []
    per_layout: list[list[int]] = [[] for _ in layouts]
    for i in keep:
        if dims and all(
            strides[-1] == layout[i] * shape[i] for strides, layout in zip(per_layout, layouts, strict=True)
        ):
            dims[-1] *= shape[i]
            for strides, layout in zip(per_layout, layouts, strict=True):
                strides[-1] = layout[i]
            continue
        dims.append(shape[i])
        for strides, layout in zip(per_layout, layouts, strict=True):
            strides.append(layout[i])
    return tuple(dims), [tuple(strides) for strides in per_layout]
