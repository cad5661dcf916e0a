"""The `neuron` process-group backend: PyTorch's collectives on device tensors across processes launched by
torchrun, each rank with its own simulated NeuronCore, gloo carrying the bytes
(frontend/distributed/process_group.py). The ranks' code is in ranks.py."""

import os
import subprocess
import sys
from pathlib import Path

RANKS = Path(__file__).with_name("ranks.py")


def _torchrun(scenario: str, eager: str, processes: int = 2, arguments: tuple[str, ...] = ()) -> None:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"]
    environment = {**os.environ, "NEURON_MLIR_EAGER": eager}
    result = subprocess.run(
        [*command, str(RANKS), scenario, *arguments],
        capture_output=True,
        text=True,
        timeout=600,
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
    with tensor parallelism over the other trains as one process does."""
    scenarios = "fully_sharded,sharded_checkpoint,sharded_and_tensor_parallel"
    _torchrun(scenarios, eager="host", processes=4, arguments=(str(tmp_path / "checkpoint"),))
