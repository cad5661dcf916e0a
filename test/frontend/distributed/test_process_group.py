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
from support.neuron_pair import neuron_pair
from torch._C._distributed_c10d import ReduceOp

RANKS = Path(__file__).with_name("ranks.py")
LAUNCH_TIMEOUT_SECONDS = 240  # each rank dumps its stacks and exits after 180 s (ranks.py), so a hang shows where


def _torchrun(scenario: str, eager: str, processes: int = 2, arguments: tuple[str, ...] = ()) -> None:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"]
    environment = {**os.environ, "NEURON_MLIR_EAGER": eager}
    result = subprocess.run(
        [*command, str(RANKS), scenario, *arguments],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_SECONDS,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, f"{scenario} failed:\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}"


def test_collectives_dtensors_and_tensor_parallel_training_on_neuron_ranks():
    """In one launch (starting the ranks is most of each test's time): the collectives on device tensors match
    the host (the device's semantics; the bytes are what is tested), a DeviceMesh of neuron ranks shards and
    redistributes DTensors, and an MLP split column- then row-wise trains as the whole one does; then, compiled
    by neuron-mlir on the same ranks, all_reduce (sum, avg), all_gather, reduce_scatter and all_to_all in one
    graph, on the collective queue, through the process group's transport, and ColwiseParallel + RowwiseParallel
    under torch.compile, whose forward and backward graphs hold the all_reduces; torch.compile of a DDP model,
    split by Dynamo where DDP's buckets end; and FSDP2 with torch.compile (blocks compiled before or after
    sharding, or the whole sharded model), each training as one process does on the whole batch."""
    scenarios = (
        "collectives,sharded_tensors,tensor_parallel,compiled_collectives,compiled_tensor_parallel,"
        "compiled_data_parallel,fully_sharded_compiled"
    )
    _torchrun(scenarios, eager="host")


def test_data_parallel_training_equals_one_process_on_the_whole_batch():
    """DDP's bucketed all-reduce of gradients computed by compiled single-op programs on each rank's core."""
    _torchrun("data_parallel", eager="compile")


def test_torch_picks_the_neuron_backend_for_neuron_tensors():
    _torchrun("default_backend", eager="host")


def test_fully_sharded_training_its_checkpoint_and_a_data_by_tensor_mesh(tmp_path):
    """On 4 ranks, in one launch: FSDP2 training equals one process on the whole batch (it frees and
    re-materialises unsharded parameters by resizing their device storages: the native hooks);
    torch.distributed.checkpoint saves and loads its sharded state; FSDP2 over the data dimension of a 2 x 2 mesh
    with tensor parallelism over the other trains as one process does. Last, the four ranks compile one graph
    into one disk cache at once, one dying halfway through writing its entry: the others run the right program,
    and no entry on disk is torn (each is written to a temporary file and renamed)."""
    from neuron_mlir.frontend.cache import CompileCache

    scenarios = "fully_sharded,sharded_checkpoint,sharded_and_tensor_parallel,shared_cache"
    _torchrun(scenarios, eager="host", processes=4, arguments=(str(tmp_path / "checkpoint"),))
    directory = tmp_path / "shared-cache"
    entries = sorted(directory.glob("*.bundle"))
    assert entries, sorted(path.name for path in directory.iterdir())
    for path in entries:  # whole: the bundle validates, the metadata is there
        assert CompileCache(directory).get_entry(path.stem, with_metadata=True) is not None, path.name
    assert list(directory.glob("*.tmp")), "the dying rank left its half-written temporary file"


def test_the_example_compiled_and_faults_of_compiled_collectives_between_processes():
    """In one launch: examples/train_distributed.py --compile (FSDP2 blocks compiled after sharding, the DDP
    model compiled) trains as one process does; ranks whose compiled graphs call mismatched collectives all raise
    naming the collective and their line, then exchange again; and a rank whose process ends inside a compiled
    all_reduce makes the other fail within the group's timeout, naming the collective (last: a rank is gone)."""
    _torchrun("example_training,compiled_mismatch,dies_in_a_collective", eager="host")


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


@pytest.mark.parametrize(
    ("call", "diagnostic"),
    [
        (lambda group, rank: _all_reduce(group, torch.ones(3 + rank)), r"all_reduce: rank \d passes \d elements"),
        (
            lambda group, rank: _all_reduce(group, torch.ones(3, dtype=(torch.float32, torch.int32)[rank])),
            r"all_reduce: rank \d passes (float32|int32), rank \d (int32|float32): every rank of the group passes "
            "the same dtype",
        ),
        (
            lambda group, rank: _all_reduce(group, torch.ones(3)) if rank else _broadcast(group, torch.ones(3)),
            r"rank \d calls (broadcast|all_reduce) where rank \d calls (all_reduce|broadcast)",
        ),
        (
            lambda group, rank: _all_reduce(group, torch.ones(3), (ReduceOp.SUM, ReduceOp.MAX)[rank]),
            r"all_reduce: rank \d's reduction is (SUM|MAX), rank \d's (MAX|SUM)",
        ),
        (  # rank 0 sends 3 elements to rank 1, which expects 2
            lambda group, rank: _all_to_all(group, ([1, 3], [2, 2])[rank], ([1, 2], [2, 2])[rank]),
            r"all_to_all: rank 0 sends 3 elements to rank 1, which expects 2",
        ),
    ],
    ids=["element count", "dtype", "collective", "reduction", "all_to_all splits"],
)
def test_ranks_that_disagree_fail_on_every_rank_naming_the_collective_and_the_line(call, diagnostic):
    """gloo alone gives one rank a wrong result and the other a closed connection (or both wrong values, for a
    dtype mismatch): the ranks compare what they pass first, and each raises."""
    from neuron_mlir.runtime.collectives import CollectiveError

    for outcome in neuron_pair(call):
        assert isinstance(outcome, CollectiveError), outcome
        assert re.search(diagnostic, str(outcome)), str(outcome)
        assert "test_process_group.py:" in str(outcome)  # the user's line that called the collective
    # and ranks that agree still exchange
    results = neuron_pair(lambda group, rank: _all_reduce(group, torch.full((3,), float(rank + 1))))
    for result in results:
        torch.testing.assert_close(result, torch.full((3,), 3.0))


def test_a_rank_that_hangs_or_leaves_makes_the_other_fail_within_the_timeout():
    """A peer that does not arrive fails the collective after the group's timeout, naming it; a peer whose group
    is gone (its process died) fails it at once."""
    import time

    from neuron_mlir.runtime.collectives import CollectiveError

    timeout = 1.0

    def hangs(group, rank: int):
        if rank == 1:
            time.sleep(timeout + 1.5)  # arrives after the other rank gave up
            return None
        started = time.monotonic()
        try:
            _all_reduce(group, torch.ones(3))
        except CollectiveError as error:
            return error, time.monotonic() - started
        return None

    outcome, waited = neuron_pair(hangs, timeout_seconds=timeout)[0]
    assert "all_reduce on rank 0 of the neuron process group (2 ranks) failed" in str(outcome), str(outcome)
    assert "Timed out" in str(outcome) or "timed out" in str(outcome), str(outcome)
    assert timeout <= waited < timeout + 5, waited

    def leaves(group, rank: int):
        _all_reduce(group, torch.ones(3))  # both ranks connected
        if rank == 1:
            group._transport = None  # its connections close, as when its process dies
            del group
            return None
        started = time.monotonic()
        try:
            _broadcast(group, torch.ones(3))
        except CollectiveError as error:
            return error, time.monotonic() - started
        return None

    outcome, waited = neuron_pair(leaves, timeout_seconds=30.0)[0]
    assert "broadcast on rank 0" in str(outcome), str(outcome)
    assert waited < 10, waited  # long before the 30 s timeout
