"""The transport compiled collectives use under torch.distributed: the process groups the graph names.

A compiled graph's collectives (`runtime/collectives.py`) name their ranks as replica groups; the importer
resolves each process group a graph names to its ranks and registers the group here (`register_group`), so a
run finds the group again by its ranks. The bytes go through that process group's own collectives on host
tensors: for a `neuron` group, its gloo transport (`process_group.py`); for any other backend, that backend.

Before each exchange the ranks compare what they pass (element count and dtype, one small all-gather): ranks that
disagree all raise `CollectiveError` naming the collective, instead of handing the backend mismatched buffers.
The reductions are composed as the `neuron` group composes them for eager collectives (an average is a sum
divided by the group's size), so a compiled collective gives what the eager one gives. Arrays cross as torch
tensors of the same dtype (bf16 and fp8 included, `frontend/tensors.py`).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import numpy as np
import torch
import torch.distributed as dist

from neuron_mlir.frontend.tensors import from_numpy, to_numpy
from neuron_mlir.runtime.collectives import CollectiveError

# ranks (sorted) -> the process group over them, as the graphs compiled in this process named it
_GROUPS: dict[tuple[int, ...], dist.ProcessGroup] = {}

_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT}
_OPS |= {"min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}


def resolve_group(name: str) -> tuple[int, ...]:
    """The global ranks of the process group called `name` (as a graph names it), registered for runs."""
    if not dist.is_available() or not dist.is_initialized():
        raise CollectiveError(
            f"the graph names the process group '{name}' but torch.distributed is not initialized in this process"
        )
    from torch.distributed import distributed_c10d

    # how the functional collectives themselves find a group by its name (not in the module's public names)
    group = distributed_c10d._resolve_process_group(name)  # type: ignore[attr-defined, arg-type]
    ranks = tuple(sorted(dist.get_process_group_ranks(group)))
    register_group(ranks, group)
    return ranks


def register_group(ranks: tuple[int, ...], group: dist.ProcessGroup) -> None:
    """Make `group` the one runs use for its ranks. Two groups over the same ranks (a mesh dimension spanning the
    world, and the world) are interchangeable for an exchange; the latest registered is used (a group made after
    another was destroyed replaces it), so that every rank, compiling the same graphs in the same order, exchanges
    over the same group."""
    _GROUPS[tuple(sorted(ranks))] = group


def current_transport() -> ProcessGroupTransport | None:
    """The transport of this process when torch.distributed is initialized, else None."""
    if not dist.is_available() or not dist.is_initialized():
        return None
    return ProcessGroupTransport(dist.get_rank())


class ProcessGroupTransport:
    """`runtime.collectives.Transport` over the registered process groups (or `groups`: ranks -> group)."""

    def __init__(self, rank: int, groups: Mapping[tuple[int, ...], dist.ProcessGroup] | None = None) -> None:
        self._rank = rank
        self._groups = _GROUPS if groups is None else groups

    @property
    def rank(self) -> int:
        return self._rank

    def _group(
        self, name: str, ranks: tuple[int, ...], data: np.ndarray, splits: tuple[tuple[int, ...], ...] = ()
    ) -> dist.ProcessGroup:
        group = self._groups.get(tuple(sorted(ranks)))
        if group is None:
            raise CollectiveError(f"{name}: no process group over the ranks {list(ranks)} is known to this process")
        self._check_agreement(name, data, ranks, group, splits)
        return group

    def _check_agreement(
        self,
        name: str,
        data: np.ndarray,
        ranks: tuple[int, ...],
        group: dist.ProcessGroup,
        splits: tuple[tuple[int, ...], ...] = (),
    ) -> None:
        """Raise on every rank when the ranks pass different element counts or dtypes, or (an uneven all_to_all,
        `splits` = this rank's input and output counts) when a count sent is not the count its receiver expects."""
        n = len(ranks)
        counts = [count for side in splits for count in side] if splits else [-1] * (2 * n)
        mine = torch.tensor([data.size, zlib.crc32(str(data.dtype).encode()), *counts], dtype=torch.int64)
        everyone = torch.empty(n * mine.numel(), dtype=torch.int64)
        dist.all_gather_single(everyone, mine, group=group)
        facts = everyone.view(n, mine.numel()).tolist()
        if splits:
            for i, sender in enumerate(ranks):
                for j, receiver in enumerate(ranks):
                    sent, expected = facts[i][2 + j], facts[j][2 + n + i]
                    if sent != expected:
                        raise CollectiveError(
                            f"{name}: rank {sender} sends {sent} elements to rank {receiver}, which expects "
                            f"{expected}: every rank's input split for a peer is that peer's output split for it"
                        )
        first_count, first_dtype = facts[0][:2]
        for rank, (count, dtype, *_) in zip(ranks, facts, strict=True):
            if count != first_count and not splits:
                raise CollectiveError(
                    f"{name}: rank {rank} passes {count} elements, rank {ranks[0]} {first_count}: every rank of the "
                    "group passes the same element count"
                )
            if dtype != first_dtype:
                raise CollectiveError(
                    f"{name}: rank {rank} passes another dtype than rank {ranks[0]} (this rank's: {data.dtype}): every "
                    "rank of the group passes the same dtype"
                )

    def all_reduce(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        dist.all_reduce(tensor, op=_OPS[reduction], group=self._group(name, group, data))
        if reduction == "avg":
            tensor.div_(len(group)) if tensor.is_floating_point() else tensor.floor_divide_(len(group))
        return to_numpy(tensor)

    def all_gather(self, name: str, data: np.ndarray, group: tuple[int, ...]) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        output = torch.empty(len(group) * tensor.numel(), dtype=tensor.dtype)
        dist.all_gather_single(output, tensor, group=self._group(name, group, data))
        return to_numpy(output)

    def reduce_scatter(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray:
        # composed from an all-reduce and this rank's block, so that every backend serves
        whole = self.all_reduce(name, data, reduction, group)
        block = whole.size // len(group)
        position = group.index(self._rank)
        return whole[position * block : (position + 1) * block].copy()

    def all_to_all(
        self,
        name: str,
        data: np.ndarray,
        group: tuple[int, ...],
        input_splits: tuple[int, ...] = (),
        output_splits: tuple[int, ...] = (),
    ) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        if not (input_splits or output_splits):
            output = torch.empty_like(tensor)
            dist.all_to_all_single(output, tensor, group=self._group(name, group, data))
            return to_numpy(output)
        process_group = self._group(name, group, data, (input_splits, output_splits))
        output = torch.empty(sum(output_splits), dtype=tensor.dtype)
        dist.all_to_all_single(output, tensor, list(output_splits), list(input_splits), group=process_group)
        return to_numpy(output)

    def broadcast(self, name: str, data: np.ndarray, root: int, group: tuple[int, ...]) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        # a process group numbers its ranks in sorted order (new_group sorts them), as replica groups do
        dist.broadcast(tensor, group_src=root, group=self._group(name, group, data))
        return to_numpy(tensor)
