"""The transport compiled collectives use under torch.distributed: the process groups the graph names.

A compiled graph's collectives (`runtime/collectives.py`) name their ranks as replica groups; the importer
resolves each process group a graph names to its ranks and registers the group here (`register_group`), so a
run finds the group again by its ranks. The bytes go through that process group's own collectives on host
tensors: for a `neuron` group, its gloo transport (`process_group.py`); for any other backend, that backend.

Before each exchange the ranks compare what they pass (the collective, its element count, dtype, reduction or
root and an all_to_all's block sizes: one small all-gather, the same comparison as the `neuron` group's eager
collectives): ranks that disagree all raise `CollectiveError` naming the collective, instead of handing the
backend mismatched buffers. Over a `neuron` group that comparison is the only one: its exchange runs inside the
group's `agreed`, so neither the comparing all-gather nor the collective compares again (two exchanges per
collective, not four). A failure of the backend (a peer gone, a timeout) is raised naming the collective.
The reductions are composed as the `neuron` group composes them for eager collectives (an average is a sum
divided by the group's size), so a compiled collective gives what the eager one gives. Arrays cross as torch
tensors of the same dtype (bf16 and fp8 included, `frontend/tensors.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import numpy as np
import torch
import torch.distributed as dist

from neuron_mlir.frontend.distributed.process_group import NeuronProcessGroup, agreement_facts, disagreement
from neuron_mlir.frontend.tensors import from_numpy, to_numpy, torch_dtype
from neuron_mlir.runtime.collectives import CollectiveError

# ranks (sorted) -> the process group over them, as the graphs compiled in this process named it
_GROUPS: dict[tuple[int, ...], dist.ProcessGroup] = {}

_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT}
_OPS |= {"min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
# what the ranks compare of a reduction (an average is exchanged as a sum, but is not one)
_REDUCTION_CODES: dict[str, int] = {name: op.value for name, op in _OPS.items()} | {"avg": dist.ReduceOp.AVG.value}


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

    @contextlib.contextmanager
    def _exchange(
        self,
        kind: str,
        name: str,
        ranks: tuple[int, ...],
        data: np.ndarray,
        setting: int = 0,
        setting_name: str = "",
        blocks: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
    ) -> Iterator[dist.ProcessGroup]:
        """The process group over `ranks`, once the ranks agree on the collective (`kind`, called `name` in
        diagnostics: its element count, dtype, `setting` and an all_to_all's `blocks`); the block's exchange and
        any failure of the backend are named after it."""
        group = self._groups.get(tuple(sorted(ranks)))
        if group is None:
            raise CollectiveError(f"{name}: no process group over the ranks {list(ranks)} is known to this process")
        # a `neuron` group compares nothing more: its collectives in the block run as this one's exchange
        carried = group.agreed(name) if isinstance(group, NeuronProcessGroup) else contextlib.nullcontext()
        try:
            with carried:
                count = -1 if blocks is not None else data.size
                mine = agreement_facts(kind, count, torch_dtype(data.dtype), setting, blocks, len(ranks))
                everyone = torch.empty(len(ranks) * mine.numel(), dtype=torch.int64)
                dist.all_gather_single(everyone, mine, group=group)
                facts = everyone.view(len(ranks), mine.numel()).tolist()
                position = sorted(ranks).index(self._rank)
                problem = disagreement(name, facts, position, setting_name, sorted(ranks))
                if problem is not None:
                    raise CollectiveError(problem)
                yield group
        except CollectiveError:
            raise
        except RuntimeError as error:
            raise CollectiveError(f"{name} on rank {self._rank} failed: {error}") from error

    def all_reduce(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        with self._exchange("all_reduce", name, group, data, _REDUCTION_CODES[reduction], "reduction") as pg:
            dist.all_reduce(tensor, op=_OPS[reduction], group=pg)
        if reduction == "avg":
            tensor.div_(len(group)) if tensor.is_floating_point() else tensor.floor_divide_(len(group))
        return to_numpy(tensor)

    def all_gather(self, name: str, data: np.ndarray, group: tuple[int, ...]) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        output = torch.empty(len(group) * tensor.numel(), dtype=tensor.dtype)
        with self._exchange("all_gather", name, group, data) as pg:
            dist.all_gather_single(output, tensor, group=pg)
        return to_numpy(output)

    def reduce_scatter(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray:
        # the backend's own reduce-scatter (gloo's for a `neuron` group, as its eager reduce_scatter uses): each rank
        # receives only its block, and sums in the order the eager collective sums
        tensor = from_numpy(np.array(data, copy=True))
        output = torch.empty(tensor.numel() // len(group), dtype=tensor.dtype)
        with self._exchange("reduce_scatter", name, group, data, _REDUCTION_CODES[reduction], "reduction") as pg:
            dist.reduce_scatter_single(output, tensor, op=_OPS[reduction], group=pg)
        if reduction == "avg":
            output.div_(len(group)) if output.is_floating_point() else output.floor_divide_(len(group))
        return to_numpy(output)

    def all_to_all(
        self,
        name: str,
        data: np.ndarray,
        group: tuple[int, ...],
        input_splits: tuple[int, ...] = (),
        output_splits: tuple[int, ...] = (),
    ) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        n = len(group)
        sent = input_splits or (data.size // n,) * n
        received = output_splits or (data.size // n,) * n
        with self._exchange("all_to_all", name, group, data, blocks=(sent, received)) as pg:
            if not (input_splits or output_splits):
                output = torch.empty_like(tensor)
                dist.all_to_all_single(output, tensor, group=pg)
            else:
                output = torch.empty(sum(output_splits), dtype=tensor.dtype)
                dist.all_to_all_single(output, tensor, list(output_splits), list(input_splits), group=pg)
        return to_numpy(output)

    def broadcast(self, name: str, data: np.ndarray, root: int, group: tuple[int, ...]) -> np.ndarray:
        tensor = from_numpy(np.array(data, copy=True))
        # a process group numbers its ranks in sorted order (new_group sorts them), as replica groups do
        with self._exchange("broadcast", name, group, data, root, "root") as pg:
            dist.broadcast(tensor, group_src=root, group=pg)
        return to_numpy(tensor)
