"""The `neuron` process-group backend: PyTorch's collectives on device tensors across processes launched by
torchrun, each rank with its own simulated NeuronCore, gloo carrying the bytes
(frontend/distributed/process_group.py). The ranks' code is in ranks.py."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support.neuron_pair import neuron_ranks
from torch._C._distributed_c10d import ReduceOp

RANKS = Path(__file__).with_name("ranks.py")
LAUNCH_TIMEOUT_SECONDS = 240  # each rank dumps its stacks and exits after 180 s (ranks.py), so a hang shows where


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _torchrun(scenario: str, eager: str, processes: int = 2, arguments: tuple[str, ...] = (), nodes: int = 1) -> None:
    """torchrun on this machine: one node (`--standalone`), or `nodes` nodes of `processes / nodes` ranks each, one
    torchrun agent per node meeting the others at node 0's TCP store, as on several machines."""
    environment = {**os.environ, "NEURON_MLIR_EAGER": eager}
    if nodes == 1:
        launches = [["--standalone", f"--nproc-per-node={processes}"]]
    else:
        port = _free_port()
        launches = [
            [
                *(f"--nnodes={nodes}", f"--node-rank={node}", f"--nproc-per-node={processes // nodes}"),
                *("--master-addr=127.0.0.1", f"--master-port={port}"),
            ]
            for node in range(nodes)
        ]
    agents = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", *launch, str(RANKS), scenario, *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for launch in launches
    ]
    outputs = []
    try:
        for agent in agents:
            outputs.append((agent, *agent.communicate(timeout=LAUNCH_TIMEOUT_SECONDS)))
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
    for node, (agent, stdout, stderr) in enumerate(outputs):
        where = f" (node {node} of {nodes})" if nodes > 1 else ""
        assert agent.returncode == 0, f"{scenario} failed{where}:\n{stdout[-4000:]}\n{stderr[-8000:]}"


# Every scenario of ranks.py, in the order one launch runs them (starting the ranks is most of a launch's time, so
# one launch per world size runs them all). The first calls init_process_group() without a backend; the fault
# scenarios come last: after the hang one group is abandoned, after the death a rank is gone.
SCENARIOS = (
    "default_backend",  # item 1: torch picks `neuron` for neuron tensors
    "collectives",  # item 1: every collective on device tensors, async work, batched p2p
    "data_parallel",  # items 3, 4: DDP
    "sharded_tensors",  # item 3: DeviceMesh and DTensor
    "tensor_parallel",  # items 3, 4: ColwiseParallel + RowwiseParallel on a 1-D mesh
    "compiled_collectives",  # item 2: functional collectives in a compiled graph, on the collective queue
    "compiled_tensor_parallel",  # items 2, 3: tensor parallelism under torch.compile
    "compiled_data_parallel",  # items 2, 3, 4: torch.compile(DDP(model))
    "fully_sharded",  # items 3, 4: FSDP2, fp32 and bf16-params/fp32-reduce
    "fully_sharded_compiled",  # items 3, 4: FSDP2 with torch.compile, three ways
    "sharded_checkpoint",  # item 3: torch.distributed.checkpoint of sharded state
    "sharded_checkpoint_compiled",  # item 3: the same for a model whose blocks are compiled
    "sharded_and_tensor_parallel",  # items 3, 4: FSDP2 x TP on a data x tensor mesh
    "sharded_and_sequence_parallel",  # items 3, 4: SequenceParallel on a data x tensor mesh, eager and compiled
    "shared_cache",  # item 6: ranks compiling one graph into one disk cache, one dying mid-write
    "example_training",  # examples/train_distributed.py --compile, FSDP2 and DDP
    "compiled_mismatch",  # item 6: mismatched compiled collectives
    "hangs_in_a_collective",  # item 6: a rank that hangs
    "dies_in_a_collective",  # item 6: a rank that dies mid-collective
)


@pytest.mark.parametrize(("processes", "nodes"), [(2, 1), (4, 2)], ids=["2 ranks", "4 ranks on 2 nodes"])
def test_every_scenario_on_neuron_ranks(processes, nodes, tmp_path):
    """Each item of the distributed stack on 2 and on 4 ranks, each rank a process with its own simulated
    NeuronCore (ranks.py: each scenario checks itself against one process computing the same). The 4 ranks are
    launched as two nodes of two, each node's torchrun meeting the other at a TCP store as on two machines (the
    ranks' local and global ranks differ; the disk cache and checkpoint directory are shared). On 2 ranks the
    data x tensor meshes are 1 x 2; on 4, 2 x 2. On 2 ranks DDP also runs with every eager op compiled as a
    program of its own (the device's compiled eager mode; the other scenarios compute eager device ops as the
    host does, which is what a collective's bytes depend on), and the example script trains. After the launch: every compile cache entry the
    ranks wrote at once into one directory is whole, and the rank that stopped mid-write left only its
    temporary file."""
    from neuron_mlir.frontend.cache import CompileCache

    scenarios = list(SCENARIOS)
    if processes == 2:
        scenarios.insert(scenarios.index("data_parallel") + 1, "data_parallel_on_compiled_ops")
    else:  # the example is what the README launches on 2 ranks; its FSDP2 and DDP run above on 4 as well
        scenarios.remove("example_training")
    checkpoint = str(tmp_path / "checkpoint")
    _torchrun(",".join(scenarios), eager="host", processes=processes, arguments=(checkpoint,), nodes=nodes)
    directory = tmp_path / "shared-cache"
    entries = sorted(directory.glob("*.bundle"))
    assert entries, sorted(path.name for path in directory.iterdir())
    for path in entries:  # whole: the bundle validates, the metadata is there
        assert CompileCache(directory).get_entry(path.stem, with_metadata=True) is not None, path.name
    assert list(directory.glob("*.tmp")), "the stopped rank left its half-written temporary file"


def _all_reduce(group, tensor, op=None):
    from torch._C._distributed_c10d import AllreduceOptions, ReduceOp

    options = AllreduceOptions()
    options.reduceOp = ReduceOp(ReduceOp.SUM if op is None else op)
    group.allreduce([tensor], options).wait()
    return tensor


def _broadcast(group, tensor):
    from torch._C._distributed_c10d import BroadcastOptions

    group.broadcast([tensor], BroadcastOptions()).wait()
    return tensor


def _all_to_all(group, input_splits, output_splits):
    from torch._C._distributed_c10d import AllToAllOptions

    output, input = torch.empty(sum(output_splits)), torch.ones(sum(input_splits))
    group.all_to_all_single(output, input, output_splits, input_splits, AllToAllOptions()).wait()
    return output


def _everyone_but_rank_0_to_rank_1(group, rank: int, world: int):
    """An all_to_all_single of one element per pair of ranks, except that rank 0 sends rank 1 three elements
    where rank 1 expects two."""
    sent, expected = [1] * world, [1] * world
    if rank == 0:
        sent[1] = 3
    if rank == 1:
        expected[0] = 2
    return _all_to_all(group, sent, expected)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize(
    ("call", "diagnostic"),
    [
        (
            lambda group, rank, world: _all_reduce(group, torch.ones(3 + rank)),
            r"all_reduce: rank \d passes \d elements",
        ),
        (
            lambda group, rank, world: _all_reduce(
                group, torch.ones(3, dtype=torch.int32 if rank == 1 else torch.float32)
            ),
            r"all_reduce: rank \d passes (float32|int32), rank \d (int32|float32): every rank of the group passes "
            "the same dtype",
        ),
        (
            lambda group, rank, world: _all_reduce(group, torch.ones(3)) if rank else _broadcast(group, torch.ones(3)),
            r"rank \d calls (broadcast|all_reduce) where rank \d calls (all_reduce|broadcast)",
        ),
        (
            lambda group, rank, world: _all_reduce(group, torch.ones(3), ReduceOp.MAX if rank == 1 else ReduceOp.SUM),
            r"all_reduce: rank \d's reduction is (SUM|MAX), rank \d's (MAX|SUM)",
        ),
        (_everyone_but_rank_0_to_rank_1, r"all_to_all: rank 0 sends 3 elements to rank 1, which expects 2"),
    ],
    ids=["element count", "dtype", "collective", "reduction", "all_to_all splits"],
)
def test_ranks_that_disagree_fail_on_every_rank_naming_the_collective_and_the_line(call, diagnostic, world):
    """gloo alone gives one rank a wrong result and the other a closed connection (or both wrong values, for a
    dtype mismatch): the ranks compare what they pass first, and each raises."""
    from neuron_mlir.runtime.collectives import CollectiveError

    for outcome in neuron_ranks(lambda group, rank: call(group, rank, world), world):
        assert isinstance(outcome, CollectiveError), outcome
        assert re.search(diagnostic, str(outcome)), str(outcome)
        assert "test_process_group.py:" in str(outcome)  # the user's line that called the collective
    # and ranks that agree still exchange
    results = neuron_ranks(lambda group, rank: _all_reduce(group, torch.full((3,), float(rank + 1))), world)
    for result in results:
        torch.testing.assert_close(result, torch.full((3,), float(sum(range(1, world + 1)))))


@pytest.mark.parametrize("world", [2, 4])
def test_a_rank_that_hangs_or_leaves_makes_the_others_fail_within_the_timeout(world):
    """A peer that does not arrive fails the collective on every other rank within the group's timeout, naming it;
    a peer whose group is gone (its process died) fails it at once on the ranks connected to it, and on every
    other rank within the timeout."""
    import time

    from neuron_mlir.runtime.collectives import CollectiveError

    last = world - 1
    timeout = 1.0

    def hangs(group, rank: int):
        if rank == last:
            time.sleep(timeout + 1.5)  # arrives after the others gave up
            return None
        started = time.monotonic()
        try:
            _all_reduce(group, torch.ones(3))
        except CollectiveError as error:
            return error, time.monotonic() - started
        return None

    timed_out = 0
    for rank, outcome in enumerate(neuron_ranks(hangs, world, timeout_seconds=timeout)[:last]):
        assert isinstance(outcome, tuple), outcome
        error, waited = outcome
        assert f"all_reduce on rank {rank} of the neuron process group ({world} ranks) failed" in str(error), error
        # a rank connected to the late one times out; another may see that peer close its connection instead
        timed_out += "timed out" in str(error).lower()
        assert "timed out" in str(error).lower() or "Connection closed" in str(error), str(error)
        assert timeout - 0.5 <= waited < timeout + 5, waited
    assert timed_out >= 1

    # two ranks wait the long timeout never (they are connected); among four, ranks not connected to the dead one
    # wait for the group's timeout
    timeout = 30.0 if world == 2 else 2.0

    def leaves(group, rank: int):
        _all_reduce(group, torch.ones(3))  # every rank connected
        if rank == last:
            group._transport = None  # its connections close, as when its process dies
            del group
            return None
        started = time.monotonic()
        try:
            _broadcast(group, torch.ones(3))
        except CollectiveError as error:
            return error, time.monotonic() - started
        return None

    waits = []
    for rank, outcome in enumerate(neuron_ranks(leaves, world, timeout_seconds=timeout)[:last]):
        assert isinstance(outcome, tuple), outcome
        error, waited = outcome
        assert f"broadcast on rank {rank}" in str(error), str(error)
        assert waited < timeout + 3, waited
        waits.append(waited)
    assert min(waits) < min(timeout / 2, 10), waits  # a rank connected to the dead one: long before the timeout


@pytest.mark.parametrize("world", [2, 4])
def test_every_rank_sends_before_it_receives_around_a_ring(world, monkeypatch):
    """gloo completes a send only once the peer posts its receive: a send's work is returned in flight, so ranks
    that all send first and then receive (batch_isend_irecv's order) do not wait on each other forever. The
    received values are written back into the device tensor when the receive is waited for."""
    # the ranks are threads here: device ops computed as the host does, each at once (no tracing, no regions)
    monkeypatch.setenv("NEURON_MLIR_EAGER", "host")
    monkeypatch.setenv("NEURON_MLIR_DEFER", "0")

    def ring(group, rank: int):
        mine = torch.full((3,), float(rank), device="neuron")
        box = torch.zeros(3, device="neuron")
        sent = group.send([mine], (rank + 1) % world, 0)
        received = group.recv([box], (rank - 1) % world, 0)
        for work in (sent, received):
            work.wait()
        return box.cpu()

    for rank, got in enumerate(neuron_ranks(ring, world, timeout_seconds=10.0)):
        assert isinstance(got, torch.Tensor), got  # not a timeout
        torch.testing.assert_close(got, torch.full((3,), float((rank - 1) % world)))
