"""Collectives between NeuronCores: what they compute (through an injected transport) and what they cost.

A collective instruction (`all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast` in `runtime.isa`)
runs on the core's collective queue and exchanges an HBM tensor with the other ranks of its replica group. The simulator
models one core, so the other ranks are reached through a `Transport`, injected around a run:

    with collectives.using(transport):
        run_program(program, inputs)

A transport knows the calling core's rank and moves flat NumPy arrays between ranks. In a process-group run it
is the frontend's, over torch.distributed (`frontend/distributed/transport.py`); `InProcessGroup` gives N
simulated ranks in one process, one thread per rank, for tests and tools. The injection is per thread
(`contextvars`), so ranks running in threads of one process each see their own. A program whose collectives
all have groups of one rank needs no transport: the result is the rank's own data.

Every rank of a group must issue the same collectives in the same order with the same element counts and
dtypes; a transport raises `CollectiveError` naming the collective when the ranks disagree.

**Cost.** `collective_ns` is the time of one collective on one rank by the best algorithm for the group's size
and placement (`ring_ns`, `tree_ns`, and across instances `hierarchical_ns`), with the link
each step crosses: NeuronLink within an instance, EFA between instances (`Target.cores_per_instance`).
Formulas, for n ranks, a message of S bytes per rank (all_reduce: the tensor; all_gather: the gathered result;
reduce_scatter, all_to_all and broadcast: the input), a per-step latency a and a per-rank bandwidth B (the slowest
link the algorithm crosses):

    ring   all_reduce      2 (n - 1) (a + S / (n B))          reduce-scatter then all-gather around the ring
           all_gather,
           reduce_scatter  (n - 1) (a + S / (n B))
           all_to_all      (n - 1) (a + S / (n B))            n - 1 pairwise exchanges of one block each
           broadcast       2 (n - 1) (a + S / (n B))          the root scatters n blocks, then a ring all-gather
    tree   all_reduce      2 ceil(log2 n) a + 2 S / B         reduce up a binary tree, broadcast down, pipelined
           all_gather,
           reduce_scatter  ceil(log2 n) a + (n - 1) S / (n B) recursive doubling / halving
           all_to_all      ceil(log2 n) (a + S / (2 B))       Bruck's algorithm: half the blocks per step
           broadcast       ceil(log2 n) (a + S / B)           a binomial tree: every holder sends the whole message

An uneven all_to_all (`uneven_all_to_all_cost`: the bytes sent to and received from each rank of the group) is
priced by what actually crosses the rank's link, sent_j and received_j bytes to and from the group's j-th rank,
the rank's own block (position p) staying on the core:

    direct         (n - 1) a + max(sum of sent_j, sum of received_j; j != p) / B
                   every pairwise send posted at once: the link's busier direction bounds the exchange
    padded Bruck   ceil(log2 n) (a + n m / (2 B))     m = the largest block sent or received, j != p
                   Bruck relays other ranks' blocks, so every block travels padded to the largest

Both reduce to the even formulas when every block is S / n. Two things a rank cannot see: its position (ranks
with the same counts share one program), so among the positions whose sent and received counts agree (the own
block is one of them) the one giving the highest price is taken; and the other ranks' exchanges, so a peer with
more to move finishes later than this price says, and this rank's profile does not show the wait.

B is a core's share of its chip's NeuronLink bandwidth when the group fits in one instance, else the smaller of
that and its share of the instance's EFA bandwidth; a is the NeuronLink or EFA step latency likewise. Over m
instances of k ranks each, all_reduce, all_gather and reduce_scatter may also run hierarchically, each phase by
the better of ring and tree: among the k ranks of an instance over NeuronLink on the whole message, and among a
rank's m peers in the other instances over EFA on its S / k block:

    hierarchical  all_reduce      reduce_scatter_NL(S, k) + all_reduce_EFA(S / k, m) + all_gather_NL(S, k)
                  all_gather      all_gather_EFA(S / k, m) + all_gather_NL(S, k)
                  reduce_scatter  reduce_scatter_NL(S, k) + reduce_scatter_EFA(S / k, m)

Figures and sources are in `runtime.hardware` and docs/hardware-sources.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from neuron_mlir.runtime.hardware import Target

# The reductions of all_reduce and reduce_scatter (c10d's names).
REDUCTIONS: frozenset[str] = frozenset({"sum", "avg", "product", "min", "max"})
COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


class CollectiveError(RuntimeError):
    """A collective cannot complete: no transport, a rank outside its group, ranks that disagree."""


class Transport(Protocol):
    """Moves one collective's data between the ranks of a group, for the calling rank.

    `group` is the sorted tuple of ranks taking part (the caller's replica group); arrays are flat and every rank
    passes the same element count and dtype. Results are new arrays of the input's dtype.
    """

    @property
    def rank(self) -> int: ...

    def all_reduce(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray: ...

    def all_gather(self, name: str, data: np.ndarray, group: tuple[int, ...]) -> np.ndarray: ...

    def reduce_scatter(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray: ...

    def all_to_all(
        self,
        name: str,
        data: np.ndarray,
        group: tuple[int, ...],
        input_splits: tuple[int, ...] = (),
        output_splits: tuple[int, ...] = (),
    ) -> np.ndarray:
        """Block j of `data` goes to the group's j-th rank: equal blocks, or (uneven) `input_splits` elements each;
        the result is the blocks received in rank order (`output_splits` elements each)."""
        ...

    def broadcast(self, name: str, data: np.ndarray, root: int, group: tuple[int, ...]) -> np.ndarray:
        """Every rank receives the data of the group's `root`-th rank (its position in `group`)."""
        ...


_CURRENT: contextvars.ContextVar[Transport | None] = contextvars.ContextVar("neuron_transport", default=None)


@contextlib.contextmanager
def using(transport: Transport | None) -> Iterator[None]:
    """Run the block's collectives through `transport` (None: only single-rank groups are allowed)."""
    token = _CURRENT.set(transport)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> Transport | None:
    """The transport injected for this thread's runs, if any."""
    return _CURRENT.get()


def reduce_arrays(arrays: Sequence[np.ndarray], reduction: str) -> np.ndarray:
    """The elementwise `reduction` of equally shaped arrays, computed in rank order in the arrays' dtype (as the
    process group computes it; floats of 16 bits accumulate in fp32 and round once)."""
    dtype = arrays[0].dtype
    wide = np.float32 if dtype.kind == "f" and dtype.itemsize < 4 else dtype
    result = arrays[0].astype(wide, copy=True)
    for other in arrays[1:]:
        other = other.astype(wide, copy=False)
        if reduction in ("sum", "avg"):
            result += other
        elif reduction == "product":
            result *= other
        elif reduction == "min":
            np.minimum(result, other, out=result)
        elif reduction == "max":
            np.maximum(result, other, out=result)
        else:
            raise CollectiveError(f"unknown reduction {reduction!r} (known: {', '.join(sorted(REDUCTIONS))})")
    if reduction == "avg":
        result = result / len(arrays) if dtype.kind == "f" else result // len(arrays)
    return result.astype(dtype)


def run(
    collective: str,
    data: np.ndarray,
    group: tuple[int, ...],
    reduction: str = "sum",
    name: str | None = None,
    root: int = 0,
    splits: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()),
) -> np.ndarray:
    """Execute one collective of the calling rank on the flat array `data` through the current transport (`root`:
    a broadcast's source, its position in `group`; `splits`: an uneven all_to_all's input and output counts)."""
    label = name or collective
    if len(group) == 1:  # a group of one: nothing to exchange
        return reduce_arrays([data], reduction) if collective in ("all_reduce", "reduce_scatter") else data.copy()
    if any(splits) and (len(splits[0]) != len(group) or len(splits[1]) != len(group)):
        raise CollectiveError(f"{label}: split counts {list(splits[0])}, {list(splits[1])} for {len(group)} ranks")
    transport = current()
    if transport is None:
        raise CollectiveError(
            f"{label}: the replica group {list(group)} has {len(group)} ranks but no transport is injected "
            "(run the program inside `collectives.using(transport)`, or under torch.distributed)"
        )
    if transport.rank not in group:
        raise CollectiveError(f"{label}: rank {transport.rank} is not in its replica group {list(group)}")
    if collective == "all_reduce":
        return transport.all_reduce(label, data, reduction, group)
    if collective == "all_gather":
        return transport.all_gather(label, data, group)
    if collective == "reduce_scatter":
        return transport.reduce_scatter(label, data, reduction, group)
    if collective == "all_to_all":
        if any(splits):
            return transport.all_to_all(label, data, group, splits[0], splits[1])
        return transport.all_to_all(label, data, group)
    if collective == "broadcast":
        if not 0 <= root < len(group):
            raise CollectiveError(f"{label}: root {root} is no position in the group {list(group)}")
        return transport.broadcast(label, data, root, group)
    raise CollectiveError(f"unknown collective {collective!r} (known: {', '.join(COLLECTIVES)})")


def execute(
    collective: str,
    data: np.ndarray,
    replica_groups: Sequence[Sequence[int]],
    reduction: str = "sum",
    root: int = 0,
    splits: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()),
) -> np.ndarray:
    """One collective instruction's exchange for the calling rank: its group out of `replica_groups` (the
    transport's rank picks it; groups of one rank need no transport), then `run`."""
    if all(len(group) == 1 for group in replica_groups):
        return run(collective, data, (0,), reduction, root=root)
    transport = current()
    if transport is None:
        return run(collective, data, tuple(replica_groups[0]), reduction, root=root)  # raises: no transport
    group = group_of(transport.rank, replica_groups, collective)
    return run(collective, data, group, reduction, root=root, splits=splits)


def group_of(rank: int, replica_groups: Sequence[Sequence[int]], name: str) -> tuple[int, ...]:
    """The replica group holding `rank` (a single group applies to every rank it lists)."""
    for group in replica_groups:
        if rank in group:
            return tuple(sorted(group))
    raise CollectiveError(f"{name}: rank {rank} is in none of the replica groups {[list(g) for g in replica_groups]}")


# ---- N simulated ranks in one process ------------------------------------------------------------------------


class InProcessGroup:
    """N simulated ranks in one process: `endpoint(rank)` is the transport of one rank, each used from its own
    thread. Each collective is a rendezvous: every rank of the group deposits its array, the last one to arrive
    computes every rank's result, and all leave with theirs. Ranks that disagree on element count, dtype or the
    collective itself get a `CollectiveError` naming it; a rank that never arrives makes the others fail after
    `timeout` seconds instead of hanging."""

    def __init__(self, world_size: int, timeout: float = 60.0) -> None:
        self.world_size = world_size
        self.timeout = timeout
        self._condition = threading.Condition()
        self._pending: dict[tuple[tuple[int, ...], int], _Rendezvous] = {}
        self._issued: dict[tuple[tuple[int, ...], int], int] = {}  # (group, rank) -> collectives entered

    def endpoint(self, rank: int) -> InProcessTransport:
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside a world of {self.world_size}")
        return InProcessTransport(self, rank)

    def exchange(
        self,
        rank: int,
        kind: str,
        name: str,
        data: np.ndarray,
        group: tuple[int, ...],
        reduction: str,
        root: int = 0,
        splits: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()),
    ) -> np.ndarray:
        with self._condition:
            sequence = self._issued.get((group, rank), 0)
            self._issued[(group, rank)] = sequence + 1
            key = (group, sequence)
            meeting = self._pending.setdefault(key, _Rendezvous(kind, name, {}, {}, None, {}))
            meeting.arrays[rank] = np.array(data, copy=True)
            meeting.splits[rank] = splits
            if len(meeting.arrays) == len(group):
                try:
                    meeting.results = _compute(meeting, kind, name, group, reduction, root)
                except CollectiveError as error:
                    meeting.error = error
                del self._pending[key]
                self._condition.notify_all()
            elif not self._condition.wait_for(lambda: meeting.results or meeting.error, timeout=self.timeout):
                raise CollectiveError(
                    f"{name}: timed out after {self.timeout:g} s waiting for ranks "
                    f"{sorted(set(group) - set(meeting.arrays))} of the group {list(group)}"
                )
            if meeting.error is not None:
                raise CollectiveError(str(meeting.error))
            return meeting.results[rank]


@dataclass
class _Rendezvous:
    kind: str
    name: str
    arrays: dict[int, np.ndarray]
    results: dict[int, np.ndarray]
    error: CollectiveError | None
    splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]


def _compute(
    meeting: _Rendezvous, kind: str, name: str, group: tuple[int, ...], reduction: str, root: int = 0
) -> dict[int, np.ndarray]:
    arrays = meeting.arrays
    first = arrays[group[0]]
    if kind == "all_to_all" and any(any(splits) for splits in meeting.splits.values()):
        return _uneven_all_to_all(meeting, name, group)
    for rank in group:
        got = arrays[rank]
        if got.size != first.size or got.dtype != first.dtype:
            raise CollectiveError(
                f"{name}: rank {rank} passes {got.size} elements of {got.dtype}, rank {group[0]} {first.size} of "
                f"{first.dtype}: every rank of a {kind} passes the same count and dtype"
            )
    ordered = [arrays[rank] for rank in group]
    n = len(group)
    if kind == "all_reduce":
        total = reduce_arrays(ordered, reduction)
        return {rank: total.copy() for rank in group}
    if kind == "all_gather":
        gathered = np.concatenate(ordered)
        return {rank: gathered.copy() for rank in group}
    if kind == "broadcast":
        return {rank: ordered[root].copy() for rank in group}
    if first.size % n:
        raise CollectiveError(f"{name}: {first.size} elements do not split into {n} equal blocks for a {kind}")
    if kind == "reduce_scatter":
        total = reduce_arrays(ordered, reduction)
        return {rank: block.copy() for rank, block in zip(group, np.split(total, n), strict=True)}
    if kind == "all_to_all":
        blocks = [np.split(array, n) for array in ordered]
        return {rank: np.concatenate([blocks[src][dst] for src in range(n)]) for dst, rank in enumerate(group)}
    raise CollectiveError(f"unknown collective {kind!r}")


def _uneven_all_to_all(meeting: _Rendezvous, name: str, group: tuple[int, ...]) -> dict[int, np.ndarray]:
    """Rank i's j-th block (input_splits[j] elements) becomes rank j's i-th block, in rank order; each
    count sent must be the count its receiver expects."""
    blocks: dict[tuple[int, int], np.ndarray] = {}
    for i, sender in enumerate(group):
        sent, _ = meeting.splits[sender]
        if len(sent) != len(group) or sum(sent) != meeting.arrays[sender].size:
            raise CollectiveError(f"{name}: rank {sender}'s input splits {list(sent)} do not split its input")
        if meeting.arrays[sender].dtype != meeting.arrays[group[0]].dtype:
            raise CollectiveError(f"{name}: rank {sender} passes another dtype than rank {group[0]}")
        for j, piece in enumerate(np.split(meeting.arrays[sender], np.cumsum(sent)[:-1])):
            blocks[i, j] = piece
    results = {}
    for j, receiver in enumerate(group):
        _, expected = meeting.splits[receiver]
        for i, sender in enumerate(group):
            if expected[i] != blocks[i, j].size:
                raise CollectiveError(
                    f"{name}: rank {sender} sends {blocks[i, j].size} elements to rank {receiver}, which expects "
                    f"{expected[i]}: every rank's input split for a peer is that peer's output split for it"
                )
        results[receiver] = np.concatenate([blocks[i, j] for i in range(len(group))])
    return results


class InProcessTransport:
    """One rank's side of an `InProcessGroup`."""

    def __init__(self, world: InProcessGroup, rank: int) -> None:
        self._world = world
        self._rank = rank

    @property
    def rank(self) -> int:
        return self._rank

    def all_reduce(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray:
        return self._world.exchange(self._rank, "all_reduce", name, data, group, reduction)

    def all_gather(self, name: str, data: np.ndarray, group: tuple[int, ...]) -> np.ndarray:
        return self._world.exchange(self._rank, "all_gather", name, data, group, "sum")

    def reduce_scatter(self, name: str, data: np.ndarray, reduction: str, group: tuple[int, ...]) -> np.ndarray:
        return self._world.exchange(self._rank, "reduce_scatter", name, data, group, reduction)

    def all_to_all(
        self,
        name: str,
        data: np.ndarray,
        group: tuple[int, ...],
        input_splits: tuple[int, ...] = (),
        output_splits: tuple[int, ...] = (),
    ) -> np.ndarray:
        splits = (input_splits, output_splits)
        return self._world.exchange(self._rank, "all_to_all", name, data, group, "sum", splits=splits)

    def broadcast(self, name: str, data: np.ndarray, root: int, group: tuple[int, ...]) -> np.ndarray:
        return self._world.exchange(self._rank, "broadcast", name, data, group, "sum", root)


# ---- cost ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """What one step of an algorithm over a group pays: latency (ns) and a rank's bandwidth (bytes/ns)."""

    step_ns: float
    bytes_per_ns: float
    name: str


def link_for(group: Sequence[int], target: Target) -> Link:
    """The slowest link a group's algorithms cross: NeuronLink when every rank is in one instance (ranks numbered
    consecutively, `cores_per_instance` to an instance), else EFA (bounded by NeuronLink too)."""
    per_instance = target.cores_per_instance
    instances = {rank // per_instance for rank in group}
    neuronlink = target.neuronlink_core_bytes_per_ns
    if len(instances) <= 1:
        return Link(target.neuronlink_step_ns, neuronlink, "neuronlink")
    return Link(target.efa_step_ns, min(neuronlink, target.efa_core_bytes_per_ns), "efa")


def ring_ns(collective: str, message_bytes: float, ranks: int, link: Link) -> float:
    """A ring algorithm's time (module docstring); 0 for one rank."""
    n = ranks
    if n <= 1:
        return 0.0
    step = link.step_ns + message_bytes / (n * link.bytes_per_ns)
    return (2 * (n - 1) if collective in ("all_reduce", "broadcast") else n - 1) * step


def tree_ns(collective: str, message_bytes: float, ranks: int, link: Link) -> float:
    """A tree (logarithmic) algorithm's time (module docstring); 0 for one rank."""
    n = ranks
    if n <= 1:
        return 0.0
    depth = math.ceil(math.log2(n))
    bandwidth = link.bytes_per_ns
    if collective == "all_reduce":
        return 2 * depth * link.step_ns + 2 * message_bytes / bandwidth
    if collective == "all_to_all":
        return depth * (link.step_ns + message_bytes / (2 * bandwidth))
    if collective == "broadcast":
        return depth * (link.step_ns + message_bytes / bandwidth)
    return depth * link.step_ns + (n - 1) * message_bytes / (n * bandwidth)


@dataclass(frozen=True)
class CollectiveCost:
    ns: float
    algorithm: str  # "ring", "tree" or "hierarchical"
    link: str  # "neuronlink" or "efa"


def hierarchical_ns(collective: str, message_bytes: float, group: Sequence[int], target: Target) -> float | None:
    """An all_reduce, all_gather or reduce_scatter across instances in phases within and between instances
    (module docstring); None for an all_to_all, a group within one instance, or instances holding unequal numbers
    of its ranks."""
    per_instance = target.cores_per_instance
    counts: dict[int, int] = {}
    for rank in group:
        counts[rank // per_instance] = counts.get(rank // per_instance, 0) + 1
    if len(counts) <= 1 or len(set(counts.values())) != 1:
        return None
    k, m = next(iter(counts.values())), len(counts)
    neuronlink = Link(target.neuronlink_step_ns, target.neuronlink_core_bytes_per_ns, "neuronlink")
    efa = Link(target.efa_step_ns, min(target.neuronlink_core_bytes_per_ns, target.efa_core_bytes_per_ns), "efa")

    def best(kind: str, size: float, ranks: int, link: Link) -> float:
        return min(ring_ns(kind, size, ranks, link), tree_ns(kind, size, ranks, link))

    block = message_bytes / k  # what each core exchanges with its peers in the other instances
    if collective == "all_reduce":
        return (
            best("reduce_scatter", message_bytes, k, neuronlink)
            + best("all_reduce", block, m, efa)
            + best("all_gather", message_bytes, k, neuronlink)
        )
    if collective == "all_gather":  # message: the gathered result
        return best("all_gather", block, m, efa) + best("all_gather", message_bytes, k, neuronlink)
    if collective == "reduce_scatter":  # message: the input
        return best("reduce_scatter", message_bytes, k, neuronlink) + best("reduce_scatter", block, m, efa)
    return None


def collective_cost(collective: str, message_bytes: float, group: Sequence[int], target: Target) -> CollectiveCost:
    """The fastest of the ring, the tree and (across instances) the hierarchical algorithm for one collective of
    `message_bytes` over `group` on `target`."""
    link = link_for(group, target)
    candidates = [
        CollectiveCost(ring_ns(collective, message_bytes, len(group), link), "ring", link.name),
        CollectiveCost(tree_ns(collective, message_bytes, len(group), link), "tree", link.name),
    ]
    if (hierarchical := hierarchical_ns(collective, message_bytes, group, target)) is not None:
        candidates.append(CollectiveCost(hierarchical, "hierarchical", link.name))
    return min(candidates, key=lambda cost: cost.ns)


def collective_ns(collective: str, message_bytes: float, group: Sequence[int], target: Target) -> float:
    return collective_cost(collective, message_bytes, group, target).ns


def uneven_all_to_all_cost(
    sent_bytes: Sequence[float], received_bytes: Sequence[float], group: Sequence[int], target: Target
) -> CollectiveCost:
    """An all_to_all whose blocks differ: `sent_bytes[j]` go to and `received_bytes[j]` come from the group's j-th
    rank (module docstring). An even exchange has one price however it is written: equal counts cost what
    `collective_cost("all_to_all", ...)` says for the whole input."""
    n = len(group)
    if len(sent_bytes) != n or len(received_bytes) != n:
        raise CollectiveError(f"all_to_all: {len(sent_bytes)} and {len(received_bytes)} block sizes for {n} ranks")
    link = link_for(group, target)
    if n <= 1:
        return CollectiveCost(0.0, "ring", link.name)
    depth = math.ceil(math.log2(n))

    def priced(own: int) -> CollectiveCost:
        peers = [j for j in range(n) if j != own]
        outgoing = sum(sent_bytes[j] for j in peers)
        incoming = sum(received_bytes[j] for j in peers)
        largest = max(max(sent_bytes[j], received_bytes[j]) for j in peers)
        direct = (n - 1) * link.step_ns + max(outgoing, incoming) / link.bytes_per_ns
        bruck = depth * (link.step_ns + n * largest / (2 * link.bytes_per_ns))
        return min(CollectiveCost(direct, "ring", link.name), CollectiveCost(bruck, "tree", link.name), key=_ns)

    # the rank's own block is one it both sends and receives; which one the program does not say
    own_candidates = [j for j in range(n) if sent_bytes[j] == received_bytes[j]] or list(range(n))
    return max((priced(own) for own in own_candidates), key=_ns)


def _ns(cost: CollectiveCost) -> float:
    return cost.ns
