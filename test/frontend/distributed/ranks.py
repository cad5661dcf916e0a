"""One rank of a distributed scenario, launched by torchrun from test_process_group.py:

    torchrun --standalone --nproc-per-node 2 ranks.py <scenario>

Each scenario checks the `neuron` backend's results on device tensors against the same computation on the host;
a failed check exits the rank with its traceback, which torchrun reports."""

import sys

import torch
import torch.distributed as dist


def collectives(rank: int, world: int) -> None:
    device = torch.device("neuron")
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    mine = base + 10 * rank
    everyone = [base + 10 * r for r in range(world)]

    for op, expected in (
        (dist.ReduceOp.SUM, sum(everyone)),
        (dist.ReduceOp.AVG, sum(everyone) / world),
        (dist.ReduceOp.MAX, torch.stack(everyone).amax(0)),
        (dist.ReduceOp.MIN, torch.stack(everyone).amin(0)),
        (dist.ReduceOp.PRODUCT, torch.stack(everyone).prod(0)),
    ):
        tensor = mine.to(device)
        work = dist.all_reduce(tensor, op=op, async_op=True)
        work.wait()
        assert tensor.device.type == "neuron"
        torch.testing.assert_close(tensor.cpu(), expected, msg=f"all_reduce {op}")

    tensor = mine.to(device)
    dist.broadcast(tensor, src=1)
    torch.testing.assert_close(tensor.cpu(), everyone[1])

    gathered = [torch.empty(2, 3, device=device) for _ in range(world)]
    dist.all_gather(gathered, mine.to(device))
    for got, want in zip(gathered, everyone, strict=True):
        torch.testing.assert_close(got.cpu(), want)

    flat = torch.empty(2 * world, 3, device=device)
    dist.all_gather_into_tensor(flat, mine.to(device))
    torch.testing.assert_close(flat.cpu(), torch.cat(everyone))

    shard = torch.empty(1, 3, device=device)
    dist.reduce_scatter_tensor(shard, mine.to(device), op=dist.ReduceOp.SUM)
    torch.testing.assert_close(shard.cpu(), sum(e[:1] for e in everyone) if rank == 0 else sum(e[1:] for e in everyone))

    sent = torch.arange(world * 2, dtype=torch.float32) + 100 * rank
    received = torch.empty(world * 2, device=device)
    dist.all_to_all_single(received, sent.to(device))
    expected = torch.cat(
        [torch.arange(world * 2, dtype=torch.float32)[2 * rank : 2 * rank + 2] + 100 * r for r in range(world)]
    )
    torch.testing.assert_close(received.cpu(), expected)

    if rank == 0:
        dist.send(mine.to(device), dst=1)
    else:
        box = torch.empty(2, 3, device=device)
        dist.recv(box, src=0)
        torch.testing.assert_close(box.cpu(), everyone[0])
    dist.barrier()


def data_parallel(rank: int, world: int) -> None:
    """DDP over the ranks, each with its share of the batch, equals one process training on the whole batch."""
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model.load_state_dict(reference.state_dict())
    replica = torch.nn.parallel.DistributedDataParallel(model.to("neuron"))
    optimizer = torch.optim.SGD(replica.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    inputs, targets = torch.randn(4 * world, 8), torch.randn(4 * world, 4)
    share = slice(4 * rank, 4 * (rank + 1))
    for _ in range(3):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(replica(inputs[share].to("neuron")), targets[share].to("neuron")).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(inputs), targets).backward()
        reference_optimizer.step()
    for (name, expected), got in zip(reference.named_parameters(), model.parameters(), strict=True):
        assert got.device.type == "neuron", name
        torch.testing.assert_close(got.detach().cpu(), expected.detach(), msg=name)


def default_backend(rank: int, world: int) -> None:
    """init_process_group() with no backend: torch picks `neuron` for neuron tensors, and CPU tensors still work."""
    for device in ("neuron", "cpu"):
        tensor = torch.full((3,), float(rank + 1), device=device)
        dist.all_reduce(tensor)
        torch.testing.assert_close(tensor.cpu(), torch.full((3,), float(sum(range(1, world + 1)))), msg=device)


def sharded_tensors(rank: int, world: int) -> None:
    """A DeviceMesh of neuron ranks and DTensors on it: sharding, redistribution and a sharded matmul."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("neuron", (world,))
    torch.manual_seed(0)
    full, weight = torch.randn(2 * world, 6), torch.randn(6, 3)
    rows = distribute_tensor(full.to("neuron"), mesh, [Shard(0)])
    assert rows.to_local().shape == (2, 6)
    assert rows.to_local().device.type == "neuron"
    torch.testing.assert_close(rows.full_tensor().cpu(), full)
    doubled = rows * 2
    assert isinstance(doubled, DTensor)
    torch.testing.assert_close(doubled.redistribute(mesh, [Replicate()]).to_local().cpu(), full * 2)
    product = torch.mm(rows, distribute_tensor(weight.to("neuron"), mesh, [Replicate()]))
    assert isinstance(product, DTensor)
    torch.testing.assert_close(product.full_tensor().cpu(), full @ weight)


def tensor_parallel(rank: int, world: int) -> None:
    """An MLP split column-wise then row-wise over the ranks (parallelize_module) trains as the whole one does."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("neuron", (world,))
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model.load_state_dict(reference.state_dict())
    model = parallelize_module(model.to("neuron"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    inputs, targets = torch.randn(4, 8), torch.randn(4, 4)
    for _ in range(2):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs.to("neuron")), targets.to("neuron"))
        loss.backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        expected = torch.nn.functional.mse_loss(reference(inputs), targets)
        expected.backward()
        reference_optimizer.step()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach())
    for (name, expected_parameter), parameter in zip(reference.named_parameters(), model.parameters(), strict=True):
        assert isinstance(parameter, DTensor), name
        torch.testing.assert_close(parameter.full_tensor().cpu(), expected_parameter.detach(), msg=name)


def compiled_collectives(rank: int, world: int) -> None:
    """Functional collectives inside a graph compiled by neuron-mlir give what they give in eager, and run on the
    core's collective queue (no graph split, no host fallback)."""
    import torch.distributed._functional_collectives as funcol

    import neuron_mlir

    group = dist.group.WORLD

    def step(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = torch.tanh(x @ w)
        total = funcol.all_reduce(h, "sum", group)
        mean = funcol.all_reduce(h * 2, "avg", group)
        gathered = funcol.all_gather_single(h, 0, group)
        shard = funcol.reduce_scatter_single(h, "sum", 0, group)
        swapped = funcol.all_to_all_single(h, None, None, group)
        narrow = funcol.all_reduce(h.to(torch.bfloat16), "max", group)
        return total * 0.5 + 1, mean, gathered, shard, swapped, narrow

    torch.manual_seed(rank)
    x, w = torch.randn(4 * world, 8), torch.randn(8, 6)
    expected = step(x, w)
    earlier = set(neuron_mlir.profiles())
    compiled = torch.compile(step, backend="neuron-mlir", options={"strict": True})
    got = compiled(x, w)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(g, e, msg=f"result {index}")
    (profile,) = [p for name, p in neuron_mlir.profiles().items() if name not in earlier]  # one graph: no split
    assert profile.opcode_counts.get("all_reduce") == 3, profile.opcode_counts
    for opcode in ("all_gather", "reduce_scatter", "all_to_all"):
        assert profile.opcode_counts.get(opcode) == 1, profile.opcode_counts
    assert profile.busy_ns.get("collective", 0.0) > 0, profile.busy_ns


def compiled_tensor_parallel(rank: int, world: int) -> None:
    """A column- then row-parallel MLP (parallelize_module) on neuron tensors, compiled by neuron-mlir, computes
    what the whole MLP computes: DTensor's redistributions arrive in the graph as functional collectives."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    import neuron_mlir

    mesh = init_device_mesh("neuron", (world,))
    torch.manual_seed(0)
    whole = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model.load_state_dict(whole.state_dict())
    model = parallelize_module(model.to("neuron"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    whole_inputs = torch.randn(4, 8, requires_grad=True)
    inputs = whole_inputs.detach().to("neuron").requires_grad_()
    earlier = set(neuron_mlir.profiles())
    compiled = torch.compile(model, backend="neuron-mlir", options={"strict": True})
    got = compiled(inputs)
    expected = whole(whole_inputs)
    torch.testing.assert_close(got.cpu(), expected)
    got.square().sum().backward()  # the input's gradient sums the column shards' parts: an all_reduce
    expected.square().sum().backward()
    assert inputs.grad is not None
    torch.testing.assert_close(inputs.grad.cpu(), whole_inputs.grad)
    for (name, expected_parameter), parameter in zip(whole.named_parameters(), model.parameters(), strict=True):
        assert isinstance(parameter.grad, DTensor), name
        torch.testing.assert_close(parameter.grad.full_tensor().cpu(), expected_parameter.grad, msg=name)
    counts = {
        name: profile.opcode_counts.get("all_reduce", 0)
        for name, profile in neuron_mlir.profiles().items()
        if name not in earlier
    }
    assert sum(counts.values()) == 2, counts  # the output's in the forward, the input gradient's in the backward


SCENARIOS = {
    "collectives": collectives,
    "tensor_parallel": tensor_parallel,
    "data_parallel": data_parallel,
    "default_backend": default_backend,
    "sharded_tensors": sharded_tensors,
    "compiled_collectives": compiled_collectives,
    "compiled_tensor_parallel": compiled_tensor_parallel,
}
BACKENDS = {"default_backend": None}


def main() -> None:
    scenario = sys.argv[1]
    dist.init_process_group(BACKENDS.get(scenario, "neuron"))  # env:// from torchrun
    try:
        if scenario not in BACKENDS:  # (a default-backend scenario runs alone)
            assert dist.get_backend() == "neuron", dist.get_backend()
        for name in scenario.split(","):  # several scenarios share one launch
            SCENARIOS[name](dist.get_rank(), dist.get_world_size())
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
