"""Compiled collectives under torch.distributed in one process (frontend/distributed/transport.py): the importer
resolves a graph's process groups to ranks, the compile cache keys them, and a run goes through the group. The
multi-rank cases are torchrun scenarios (ranks.py); here a world of one rank, and a graph without a group."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from support.neuron_pair import neuron_pair
from torch.fx.experimental.proxy_tensor import make_fx

from neuron_mlir.frontend.fx_importer import GraphImportError, graph_key_text, import_fx_graph


def _all_reduce_graph(group_name: str) -> torch.fx.GraphModule:
    def step(x: torch.Tensor) -> torch.Tensor:
        reduced = torch.ops._c10d_functional.all_reduce.default(x * 2, "sum", group_name)
        return torch.ops._c10d_functional.wait_tensor.default(reduced) + 1

    return make_fx(step, tracing_mode="fake")(torch.randn(4, 3))


def test_a_group_that_cannot_be_resolved_is_named_with_its_node():
    assert not dist.is_initialized()
    graph = _all_reduce_graph("7")
    assert graph_key_text(graph) is None  # no key without the group's ranks: the import says why
    with pytest.raises(GraphImportError, match=r"FX node 'all_reduce'.*process group '7'.*not initialized"):
        import_fx_graph(graph)


@pytest.fixture
def world_of_one():
    from torch._C._distributed_c10d import HashStore

    store = HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_a_compiled_collective_runs_through_the_process_group(world_of_one):
    import neuron_mlir

    def step(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        total = funcol.all_reduce(torch.tanh(x), "avg", world_of_one)
        return total * 3, funcol.all_gather_single(x, 0, world_of_one)

    x = torch.randn(4, 6)
    expected = step(x)
    earlier = set(neuron_mlir.profiles())
    got = torch.compile(step, backend="neuron-mlir", options={"strict": True})(x)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    (profile,) = [p for name, p in neuron_mlir.profiles().items() if name not in earlier]
    assert profile.opcode_counts["all_reduce"] == profile.opcode_counts["all_gather"] == 1
    # the group's ranks, not only its name, are in the compile cache's key
    assert world_of_one is not None
    name = world_of_one.group_name
    key = graph_key_text(_all_reduce_graph(name))
    assert key is not None
    assert "ranks(0,)" in key


def _gloo_pair(work) -> list:
    """`work(transport, rank)` on two `neuron` ranks (gloo underneath), each through its own transport."""
    from neuron_mlir.frontend.distributed.transport import ProcessGroupTransport

    return neuron_pair(lambda group, rank: work(ProcessGroupTransport(rank, {(0, 1): group}), rank))


def test_the_process_group_transport_gives_what_the_in_process_group_gives():
    import numpy as np

    from neuron_mlir.runtime import collectives

    data = [np.arange(6, dtype=np.float32) * (rank + 1) - 2 for rank in (0, 1)]

    def exchange(transport, rank: int) -> list:
        pair = (0, 1)
        return [
            transport.all_reduce("all_reduce", data[rank], "avg", pair),
            transport.all_reduce("all_reduce", data[rank], "min", pair),
            transport.all_gather("all_gather", data[rank], pair),
            transport.reduce_scatter("reduce_scatter", data[rank], "sum", pair),
            transport.all_to_all("all_to_all", data[rank], pair),
            transport.broadcast("broadcast", data[rank], 1, pair),
        ]

    def reference(rank: int) -> list:
        pair = (0, 1)
        return [
            collectives.run("all_reduce", data[rank], pair, "avg"),
            collectives.run("all_reduce", data[rank], pair, "min"),
            collectives.run("all_gather", data[rank], pair),
            collectives.run("reduce_scatter", data[rank], pair, "sum"),
            collectives.run("all_to_all", data[rank], pair),
            collectives.run("broadcast", data[rank], pair, root=1),
        ]

    world = collectives.InProcessGroup(2)
    expected: list = [None, None]

    def in_process(rank: int) -> None:
        with collectives.using(world.endpoint(rank)):
            expected[rank] = reference(rank)

    import threading

    threads = [threading.Thread(target=in_process, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    got = _gloo_pair(exchange)
    for rank in (0, 1):
        for g, e in zip(got[rank], expected[rank], strict=True):
            np.testing.assert_array_equal(g, e)


def test_ranks_that_disagree_fail_on_every_rank_naming_the_collective():
    import numpy as np

    from neuron_mlir.runtime.collectives import CollectiveError

    def mismatched(transport, rank: int):
        return transport.all_gather("all_gather (model.py:3)", np.zeros(3 + rank, np.float32), (0, 1))

    for outcome in _gloo_pair(mismatched):
        assert isinstance(outcome, CollectiveError)
        assert "all_gather (model.py:3)" in str(outcome)
        assert "same element count" in str(outcome)


def test_an_uneven_all_to_all_goes_through_the_process_group_and_counts_that_disagree_fail():
    import numpy as np

    from neuron_mlir.runtime.collectives import CollectiveError

    data = [np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32) + 10]
    splits = {0: ((1, 3), (1, 2)), 1: ((2, 2), (3, 2))}
    got = _gloo_pair(lambda transport, rank: transport.all_to_all("all_to_all", data[rank], (0, 1), *splits[rank]))
    np.testing.assert_array_equal(got[0], [0, 10, 11])
    np.testing.assert_array_equal(got[1], [1, 2, 3, 12, 13])
    wrong = {0: ((1, 3), (1, 2)), 1: ((2, 2), (2, 2))}
    for outcome in _gloo_pair(lambda transport, rank: transport.all_to_all("a2a", data[rank], (0, 1), *wrong[rank])):
        assert isinstance(outcome, CollectiveError), outcome
        assert "a2a: rank 0 sends 3 elements to rank 1, which expects 2" in str(outcome)


class _CountedGloo:
    """A neuron group's gloo process group whose calls that move bytes are counted."""

    def __init__(self, gloo, counts: list) -> None:
        self._gloo, self._counts = gloo, counts

    def __getattr__(self, name: str):
        found = getattr(self._gloo, name)
        if name.startswith("_allgather") or name in (
            "allreduce",
            "allgather",
            "broadcast",
            "alltoall_base",
            "reduce_scatter",
        ):

            def counted(*args):
                self._counts.append(name)
                return found(*args)

            return counted
        return found


def test_a_compiled_collective_over_a_neuron_group_is_compared_once():
    """One all-gather of what the ranks pass, then the collective: the group does not compare the comparison's
    all-gather or the collective again. Ranks calling different collectives are told so, on both ranks."""
    import numpy as np

    from neuron_mlir.frontend.distributed.transport import ProcessGroupTransport
    from neuron_mlir.runtime.collectives import CollectiveError

    def counted_all_reduce(group, rank: int):
        counts: list = []
        group._transport = _CountedGloo(group._transport, counts)
        transport = ProcessGroupTransport(rank, {(0, 1): group})
        result = transport.all_reduce("all_reduce", np.full(4, rank + 1.0, np.float32), "sum", (0, 1))
        return result, counts

    for result, counts in neuron_pair(counted_all_reduce):
        np.testing.assert_array_equal(result, np.full(4, 3.0, np.float32))
        assert counts == ["_allgather_base", "allreduce"], counts

    def reduce_or_gather(transport, rank: int):
        data = np.zeros(4, np.float32)
        if rank == 0:
            return transport.all_reduce("all_reduce (model.py:7)", data, "sum", (0, 1))
        return transport.all_gather("all_gather (model.py:8)", data, (0, 1))

    for rank, outcome in enumerate(_gloo_pair(reduce_or_gather)):
        assert isinstance(outcome, CollectiveError), outcome
        mine, theirs = ("all_reduce", "all_gather")[rank], ("all_gather", "all_reduce")[rank]
        assert f"(model.py:{7 + rank}): rank {rank} calls {mine} where rank {1 - rank} calls {theirs}" in str(outcome)


def test_a_compiled_reduce_scatter_is_gloos_and_sums_as_the_eager_one():
    """The compiled transport's reduce_scatter over a `neuron` group is gloo's reduce-scatter (each rank receives
    its block only, not the whole all-reduced tensor), and its sums are bit for bit the eager collective's."""
    import numpy as np
    from torch._C._distributed_c10d import ReduceScatterOptions

    from neuron_mlir.frontend.distributed.transport import ProcessGroupTransport

    data = [np.random.default_rng(rank).standard_normal(1000).astype(np.float32) for rank in (0, 1)]

    def both(group, rank: int):
        counts: list = []
        group._transport = _CountedGloo(group._transport, counts)
        transport = ProcessGroupTransport(rank, {(0, 1): group})
        compiled = transport.reduce_scatter("reduce_scatter", data[rank], "sum", (0, 1))
        exchanged = list(counts)
        eager = torch.empty(500)
        group.reduce_scatter_single(eager, torch.from_numpy(data[rank]), ReduceScatterOptions()).wait()
        return compiled, exchanged, eager.numpy()

    for rank, (compiled, exchanged, eager) in enumerate(neuron_pair(both)):
        assert exchanged == ["_allgather_base", "reduce_scatter"], exchanged
        np.testing.assert_array_equal(compiled, eager)
        np.testing.assert_array_equal(compiled, (data[0] + data[1])[500 * rank : 500 * (rank + 1)])
