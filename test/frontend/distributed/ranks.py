"""One rank of a distributed scenario, launched by torchrun from test_process_group.py:

    torchrun --standalone --nproc-per-node 2 ranks.py <scenario>[,<scenario>...] [<checkpoint directory>]

Each scenario checks the `neuron` backend's results on device tensors against the same computation on the host;
a failed check exits the rank with its traceback, which torchrun reports."""

import contextlib
import faulthandler
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, cast

import torch
import torch.distributed as dist


def collectives(rank: int, world: int) -> None:
    """Every collective of item 1 on device tensors, against the same computation on the host."""
    device = torch.device("neuron")
    base = torch.arange(3 * world, dtype=torch.float32).reshape(world, 3)
    mine = base + 10 * rank
    everyone = [base + 10 * r for r in range(world)]
    total = sum(everyone)
    assert isinstance(total, torch.Tensor)

    for op, expected in (
        (dist.ReduceOp.SUM, total),
        (dist.ReduceOp.AVG, total / world),
        (dist.ReduceOp.MAX, torch.stack(everyone).amax(0)),
        (dist.ReduceOp.MIN, torch.stack(everyone).amin(0)),
        (dist.ReduceOp.PRODUCT, torch.stack(everyone).prod(0)),
    ):
        tensor = mine.to(device)
        work = dist.all_reduce(tensor, op=op, async_op=True)
        assert work is not None
        work.wait()
        assert tensor.device.type == "neuron"
        torch.testing.assert_close(tensor.cpu(), expected, msg=f"all_reduce {op}")

    tensor = mine.to(device)
    dist.broadcast(tensor, src=world - 1)
    torch.testing.assert_close(tensor.cpu(), everyone[-1])

    gathered = [torch.empty(world, 3, device=device) for _ in range(world)]
    dist.all_gather(gathered, mine.to(device))
    for got, want in zip(gathered, everyone, strict=True):
        torch.testing.assert_close(got.cpu(), want)

    flat = torch.empty(world * world, 3, device=device)
    dist.all_gather_into_tensor(flat, mine.to(device))
    torch.testing.assert_close(flat.cpu(), torch.cat(everyone))

    shard = torch.empty(1, 3, device=device)
    dist.reduce_scatter_tensor(shard, mine.to(device), op=dist.ReduceOp.SUM)
    torch.testing.assert_close(shard.cpu(), total[rank : rank + 1])
    rows = torch.empty(3, device=device)  # the list form: one input per rank
    dist.reduce_scatter(rows, list(mine.to(device).unbind()), op=dist.ReduceOp.MAX)
    torch.testing.assert_close(rows.cpu(), torch.stack(everyone).amax(0)[rank])

    sent = torch.arange(world * 2, dtype=torch.float32) + 100 * rank
    received = torch.empty(world * 2, device=device)
    dist.all_to_all_single(received, sent.to(device))
    expected = torch.cat(
        [torch.arange(world * 2, dtype=torch.float32)[2 * rank : 2 * rank + 2] + 100 * r for r in range(world)]
    )
    torch.testing.assert_close(received.cpu(), expected)
    blocks = [torch.empty(3, device=device) for _ in range(world)]  # the list form: row r of mine goes to rank r
    dist.all_to_all(blocks, list(mine.to(device).unbind()))
    for peer, block in enumerate(blocks):
        torch.testing.assert_close(block.cpu(), everyone[peer][rank], msg=f"all_to_all from rank {peer}")

    # point to point around a ring: a blocking pair between ranks 0 and 1, then every rank at once, batched
    if rank == 0:
        dist.send(mine.to(device), dst=1)
    elif rank == 1:
        box = torch.empty(world, 3, device=device)
        dist.recv(box, src=0)
        torch.testing.assert_close(box.cpu(), everyone[0])
    after, before = (rank + 1) % world, (rank - 1) % world
    box = torch.empty(world, 3, device=device)
    works = dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, mine.to(device), after), dist.P2POp(dist.irecv, box, before)]
    )
    for work in works:
        work.wait()
    torch.testing.assert_close(box.cpu(), everyone[before], msg="batched p2p")
    dist.barrier()


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Environment variables set for a block (the device reads its eager mode per op)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def data_parallel_on_compiled_ops(rank: int, world: int) -> None:
    """`data_parallel` with every eager op of the ranks compiled as a single-op program and run on the rank's
    simulated core (the device's compiled eager mode, where the other scenarios compute device ops as the host
    does): DDP's buckets all-reduce gradients the compiled programs computed."""
    with _environment(NEURON_MLIR_EAGER="compile"):
        data_parallel(rank, world)


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
    """init_process_group() with no backend (the launch's first scenario): torch picks `neuron` for neuron tensors,
    and CPU tensors still work."""
    print("backend config", dist.get_backend_config(), flush=True)
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
    # DTensor hands its local ops to the device from inside its dispatch: they compile like any other op
    # (strictly: a refusal would be an error), in place as optimizers write them
    with _environment(NEURON_MLIR_EAGER="compile", NEURON_MLIR_STRICT="1"):
        rows.mul_(3.0).add_(doubled)
    torch.testing.assert_close(rows.full_tensor().cpu(), full * 5)
    # attention over DTensors takes the composite's ops, which have sharding rules (the device's fused choice of
    # plain tensors would need one for the CPU's fused op, which torch does not have)
    query = torch.randn(2, 2 * world, 4, 8)
    heads = distribute_tensor(query.to("neuron"), mesh, [Shard(1)])
    attended = torch.nn.functional.scaled_dot_product_attention(heads, heads, heads)
    assert isinstance(attended, DTensor)
    expected = torch.nn.functional.scaled_dot_product_attention(query, query, query)
    torch.testing.assert_close(attended.full_tensor().cpu(), expected)


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
        broadcast = funcol.broadcast(h, 1, group)
        coalesced = funcol.all_reduce_coalesced([h, x], "sum", group)
        gathered_pair = funcol.all_gather_into_tensor_coalesced([h, x], group)
        scattered_pair = funcol.reduce_scatter_tensor_coalesced([h, x], "avg", [0, 0], group)
        return (
            total * 0.5 + 1, mean, gathered, shard, swapped, narrow, broadcast,
            *coalesced, *gathered_pair, *scattered_pair,
        )  # fmt: skip

    torch.manual_seed(rank)
    x, w = torch.randn(4 * world, 8), torch.randn(8, 6)
    expected = step(x, w)
    earlier = set(neuron_mlir.profiles())
    compiled = torch.compile(step, backend="neuron-mlir", options={"strict": True})
    got = compiled(x, w)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(g, e, msg=f"result {index}")
    (profile,) = [p for name, p in neuron_mlir.profiles().items() if name not in earlier]  # one graph: no split
    # a coalesced call is one collective per tensor of its list
    expected_counts = {"all_reduce": 5, "all_gather": 3, "reduce_scatter": 3, "all_to_all": 1, "broadcast": 1}
    assert {op: profile.opcode_counts.get(op) for op in expected_counts} == expected_counts, profile.opcode_counts

    # uneven all_to_all_single: rank i sends i + j + 1 rows to rank j (each rank's graph has its own counts)
    sent = [rank + peer + 1 for peer in range(world)]
    received = [peer + rank + 1 for peer in range(world)]

    def exchange(y: torch.Tensor) -> torch.Tensor:
        return funcol.all_to_all_single(torch.sin(y), received, sent, group) * 2

    y = torch.randn(sum(sent), 3)
    expected_exchange = exchange(y)
    assert expected_exchange.shape == (sum(received), 3)
    earlier = set(neuron_mlir.profiles())
    got_exchange = torch.compile(exchange, backend="neuron-mlir", options={"strict": True})(y)
    torch.testing.assert_close(got_exchange, expected_exchange, msg="uneven all_to_all_single")
    (profile,) = [p for name, p in neuron_mlir.profiles().items() if name not in earlier]
    assert profile.opcode_counts.get("all_to_all") == 1, profile.opcode_counts
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


class _NormedMlp(torch.nn.Module):
    """A transformer's MLP sublayer: layer norm, then up and down projections."""

    def __init__(self, width: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up, self.down = torch.nn.Linear(width, hidden), torch.nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.tanh(self.up(self.norm(x))))


def sharded_and_sequence_parallel(rank: int, world: int) -> None:
    """Sequence parallelism as Megatron-style models use it, on a 2-D mesh (data x tensor, 1 x 2 on two ranks):
    over the tensor dimension the layer norm runs on each rank's part of the sequence (SequenceParallel), the up
    projection gathers the sequence and splits its features (ColwiseParallel from a sequence-sharded input), the
    down projection reduce-scatters back to sequence shards (RowwiseParallel to a sequence-sharded output); FSDP2
    shards the result over the data dimension. Each rank feeds its data group's share of the batch and its slice
    of the sequence; training equals one process on the whole batch, in eager and compiled by neuron-mlir (whose
    graphs then hold the all_gather and the reduce_scatter, FSDP2's hooks running eagerly around them)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    import neuron_mlir

    assert world % 2 == 0, world
    mesh = init_device_mesh("neuron", (world // 2, 2), mesh_dim_names=("data", "tensor"))
    groups, data_rank, tensor_rank = world // 2, mesh["data"].get_local_rank(), mesh["tensor"].get_local_rank()
    plan = {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
    }
    torch.manual_seed(2)
    inputs, targets = torch.randn(2 * groups, 4, 8), torch.randn(2 * groups, 4, 8)
    mine = (slice(2 * data_rank, 2 * data_rank + 2), slice(2 * tensor_rank, 2 * tensor_rank + 2))
    for compiled in (False, True):
        torch._dynamo.reset()
        torch.manual_seed(0)
        reference, model = _NormedMlp(), _NormedMlp()
        model.load_state_dict(reference.state_dict())
        parallelize_module(model.to("neuron"), mesh["tensor"], plan)
        fully_shard(model, mesh=mesh["data"])
        run: Any = torch.compile(model, backend="neuron-mlir") if compiled else model
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        before, earlier = neuron_mlir.stats(), set(neuron_mlir.profiles())
        how = "compiled" if compiled else "eager"
        for step in range(2):
            optimizer.zero_grad()
            output = run(inputs[mine].to("neuron"))
            assert not isinstance(output, DTensor), type(output)
            assert output.shape == (2, 2, 8), output.shape
            # the whole batch's mean squared error, of which FSDP2 averages the data groups' gradients and the
            # tensor dimension sums its ranks' parts
            loss = (output - targets[mine].to("neuron")).square().sum() * groups / targets.numel()
            loss.backward()
            optimizer.step()
            reference_optimizer.zero_grad()
            expected = reference(inputs)
            torch.nn.functional.mse_loss(expected, targets).backward()
            reference_optimizer.step()
            _assert_close(output.detach().cpu(), expected[mine].detach(), torch.float32, f"{how} step {step}")
        for (name, expected_parameter), parameter in zip(reference.named_parameters(), model.parameters(), strict=True):
            assert isinstance(parameter, DTensor), name
            assert parameter.device_mesh.ndim == 2, name
            _assert_close(_full(parameter), expected_parameter, torch.float32, f"{how} {name}")
        if compiled:  # the forward and the backward: every node in neuron programs
            grown = {key: neuron_mlir.stats()[key] - before[key] for key in ("graphs_compiled", "nodes_fallen_back")}
            assert grown["graphs_compiled"] >= 2, grown
            assert grown["nodes_fallen_back"] == 0, grown
            counts = {
                op: sum(p.opcode_counts.get(op, 0) for name, p in neuron_mlir.profiles().items() if name not in earlier)
                for op in ("all_gather", "reduce_scatter")
            }
            # the sequence's gather and the reduce-scatter back to shards, in the forward and in the backward
            assert counts == {"all_gather": 2, "reduce_scatter": 2}, counts


def _mlp() -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _shard(model: torch.nn.Sequential, **options: Any) -> None:
    """FSDP2 as models use it: each layer its own group, the root holding the rest."""
    from torch.distributed.fsdp import fully_shard

    for layer in (model[0], model[2]):
        fully_shard(layer, **options)
    fully_shard(model, **options)


def fully_sharded(rank: int, world: int) -> None:
    """FSDP2 (fully_shard per layer and at the root, parameters resharded after forward) over the ranks, each
    with its share of the batch, equals one process training on the whole batch: in fp32, and with bf16
    parameters and fp32 gradient reduction (MixedPrecisionPolicy) against one process computing in bf16."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from torch.distributed.tensor import DTensor

    torch.manual_seed(0)
    inputs, targets = torch.randn(4 * world, 8), 4 * torch.randn(4 * world, 4)
    share = slice(4 * rank, 4 * (rank + 1))
    for precision in (torch.float32, torch.bfloat16):
        reference = _mlp()
        model = _mlp()
        model.load_state_dict(reference.state_dict())
        model.to("neuron")
        policy = MixedPrecisionPolicy(param_dtype=precision, reduce_dtype=torch.float32)
        _shard(model, reshard_after_forward=True, mp_policy=policy)
        for name, parameter in model.named_parameters():
            assert isinstance(parameter, DTensor), name
            assert parameter.to_local().device.type == "neuron", name
            assert parameter.to_local().shape[0] == parameter.shape[0] // world, name  # dim-0 shards
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        for step in range(3):
            optimizer.zero_grad()
            output = model(inputs[share].to("neuron"))
            assert output.dtype == precision, output.dtype
            loss = torch.nn.functional.mse_loss(output.float(), targets[share].to("neuron"))
            loss.backward()
            # after backward every unsharded parameter is freed again (its storage resized to 0 bytes)
            unsharded = [
                fsdp_parameter._unsharded_param
                for layer in (model[0], model[2])
                for fsdp_parameter in cast(Any, layer)._get_fsdp_state()._fsdp_param_group.fsdp_params
            ]
            assert len(unsharded) == 4
            assert all(p.untyped_storage().nbytes() == 0 for p in unsharded)
            _reference_step(reference, reference_optimizer, inputs, targets, precision)
            gradients = {name: _full(p.grad) for name, p in model.named_parameters()}
            optimizer.step()
            for name, parameter in reference.named_parameters():
                assert gradients[name].dtype == torch.float32, (name, gradients[name].dtype)  # reduced in fp32
                expected = cast(torch.Tensor, parameter.grad)
                _assert_close(gradients[name], expected, precision, f"{precision} step {step} grad {name}")
        for name, parameter in reference.named_parameters():
            got = _full(dict(model.named_parameters())[name])
            _assert_close(got, parameter.detach(), precision, f"{precision} parameter {name}")


def _full(tensor: torch.Tensor | None) -> torch.Tensor:
    """The whole of a sharded DTensor (a parameter or its gradient), on the host."""
    from torch.distributed.tensor import DTensor

    assert isinstance(tensor, DTensor), type(tensor)
    return tensor.full_tensor().cpu()


class _Block(torch.nn.Module):
    """A residual MLP block defined in user code, as a transformer's blocks are: Dynamo compiles the frames of user
    code it meets after a graph break, never those of torch.nn's own modules (a bare Linear or Sequential)."""

    def __init__(self, width: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(width, hidden), torch.nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(x)))


class _Net(torch.nn.Module):
    """Blocks, then a head the root module itself applies."""

    def __init__(self, width: int = 8, hidden: int = 16, outputs: int = 4) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Block(width, hidden) for _ in range(2)])
        self.head = torch.nn.Linear(width, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _train_against_reference(
    model: torch.nn.Module, run: Any, reference: _Net, rank: int, world: int, what: str, steps: int = 2
) -> dict[str, Any]:
    """`steps` SGD steps of `run` (the model or a compiled form of it) on this rank's share of a batch, and of
    `reference` on the whole batch; returns the compiler's counters' growth over the steps."""
    import neuron_mlir

    width, outputs = reference.head.in_features, reference.head.out_features
    torch.manual_seed(1)
    inputs, targets = torch.randn(4 * world, width), torch.randn(4 * world, outputs)
    share = slice(4 * rank, 4 * (rank + 1))
    before = neuron_mlir.stats()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(run(inputs[share].to("neuron")), targets[share].to("neuron")).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(inputs), targets).backward()
        reference_optimizer.step()
    after = neuron_mlir.stats()
    from torch.distributed.tensor import DTensor

    # a block compiled before sharding is held by its compiled wrapper (`_orig_mod`)
    parameters = {name.replace("._orig_mod", ""): p for name, p in model.named_parameters()}
    for name, expected in reference.named_parameters():
        got = parameters[name]
        got = _full(got) if isinstance(got, DTensor) else got.detach().cpu()
        _assert_close(got, expected, torch.float32, f"{what}: parameter {name}")
    return {key: after[key] - before[key] for key in ("graphs_compiled", "nodes_compiled", "nodes_fallen_back")}


def fully_sharded_compiled(rank: int, world: int) -> None:
    """FSDP2 with torch.compile in the three ways models combine them, each training as one process does on the
    whole batch with every node of the compiled graphs in neuron programs: each block compiled before it is
    sharded; each block compiled after sharding (`block.compile()`); the whole sharded model compiled. FSDP2's
    hooks always run eagerly (PyTorch disables Dynamo in them): after sharding they break the graph where a
    sharded module is called, and Dynamo compiles the blocks' forward as frames of their
    own, whose backward graphs compile too."""
    from torch.distributed.fsdp import fully_shard

    for pattern in ("compiled, then sharded", "sharded, then block.compile()", "sharded, then torch.compile(model)"):
        torch._dynamo.reset()  # Dynamo keeps the blocks' compiled frames on their code: each pattern traces anew
        torch.manual_seed(0)
        reference, model = _Net(), _Net()
        model.load_state_dict(reference.state_dict())
        model.to("neuron")
        if pattern.startswith("compiled"):
            for index, block in enumerate(model.blocks):
                model.blocks[index] = cast(torch.nn.Module, torch.compile(block, backend="neuron-mlir"))
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        run: Any = model
        if pattern.endswith("block.compile()"):
            for block in model.blocks:
                block.compile(backend="neuron-mlir")
        elif pattern.endswith("torch.compile(model)"):
            run = torch.compile(model, backend="neuron-mlir")
        grown = _train_against_reference(model, run, reference, rank, world, pattern)
        # each block's forward and backward; the root's own head runs eagerly in every pattern (compiling the whole
        # model, the block calls break the graph inside the root's loop over its blocks, and Dynamo runs that frame
        # eagerly: PyTorch's behaviour, whatever the backend)
        assert grown["graphs_compiled"] >= 4, (pattern, grown)
        assert grown["nodes_fallen_back"] == 0, (pattern, grown)


def compiled_data_parallel(rank: int, world: int) -> None:
    """torch.compile(DDP(model)): Dynamo's DDP optimizer splits the forward graph where DDP's gradient buckets
    end (1 MiB here, so each block's parameters fill one), each piece's forward and backward compile, and DDP's
    bucketed all-reduces run between the backward pieces. Training equals one process on the whole batch."""
    torch.manual_seed(0)
    reference, model = _Net(256, 512, 4), _Net(256, 512, 4)  # a block's parameters: 1 MiB
    model.load_state_dict(reference.state_dict())
    replica = torch.nn.parallel.DistributedDataParallel(model.to("neuron"), bucket_cap_mb=1)
    grown = _train_against_reference(
        model, torch.compile(replica, backend="neuron-mlir"), reference, rank, world, "compiled DDP"
    )
    assert grown["graphs_compiled"] >= 4, grown  # split: at least two pieces, each a forward and a backward
    assert grown["nodes_fallen_back"] == 0, grown


def _reference_step(reference, optimizer, inputs, targets, precision) -> None:
    """One step of the whole model on the whole batch, its forward and backward in `precision` (the parameters'
    copies cast to it, as FSDP2's policy does), the gradients and the update in fp32."""
    optimizer.zero_grad()
    low = {name: p.detach().to(precision).requires_grad_() for name, p in reference.named_parameters()}
    output = torch.func.functional_call(reference, low, (inputs.to(precision),))
    torch.nn.functional.mse_loss(output.float(), targets).backward()
    for name, parameter in reference.named_parameters():
        parameter.grad = low[name].grad.float()
    optimizer.step()


def _assert_close(actual: torch.Tensor, expected: torch.Tensor, precision: torch.dtype, what: str) -> None:
    from neuron_mlir.ir.semantics.compare import mismatch

    actual, expected = actual.detach().float().numpy(), expected.detach().float().numpy()
    problem = mismatch(actual, expected, str(precision).removeprefix("torch."))
    assert problem is None, f"{what}: {problem}"


def sharded_checkpoint(rank: int, world: int) -> None:
    """torch.distributed.checkpoint saves an FSDP2 model's and its optimizer's sharded state from neuron ranks
    (each rank writes its shards) and loads it into a model initialised otherwise, which then trains on exactly
    as the saved one does; the model's shards also load whole into an unsharded model on one device."""
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.checkpoint.state_dict_loader import load
    from torch.distributed.checkpoint.state_dict_saver import save
    from torch.distributed.tensor import DTensor

    directory = sys.argv[2]
    inputs, targets = torch.randn(4, 8), torch.randn(4, 4)

    def sharded(seed: int) -> tuple[torch.nn.Sequential, torch.optim.Optimizer]:
        torch.manual_seed(seed)
        model = _mlp().to("neuron")
        _shard(model)
        return model, torch.optim.Adam(model.parameters(), lr=0.01)

    def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs.to("neuron")), targets.to("neuron")).backward()
        optimizer.step()

    saved, saved_optimizer = sharded(0)
    for _ in range(2):
        step(saved, saved_optimizer)
    model_state, optimizer_state = get_state_dict(saved, saved_optimizer)
    for name, value in model_state.items():
        assert isinstance(value, DTensor), name
        assert value.to_local().device.type == "neuron", name
    save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=directory)

    loaded, loaded_optimizer = sharded(1)
    assert not torch.equal(_full(loaded[0].get_parameter("weight")), _full(saved[0].get_parameter("weight")))
    model_state, optimizer_state = get_state_dict(loaded, loaded_optimizer)
    load({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=directory)  # in place
    set_state_dict(loaded, loaded_optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)
    for (name, expected), got in zip(saved.named_parameters(), loaded.parameters(), strict=True):
        assert isinstance(got, DTensor), name
        assert got.to_local().device.type == "neuron", name
        assert torch.equal(_full(got), _full(expected)), name
        moments, expected_moments = loaded_optimizer.state[got], saved_optimizer.state[expected]
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(_full(moments[key]), _full(expected_moments[key])), (name, key)
        assert int(moments["step"]) == int(expected_moments["step"]) == 2, name
    # the shards also load whole into an unsharded model on one device, as for inference after training
    whole = _mlp().to("neuron")
    whole_state = whole.state_dict()
    load({"model": whole_state}, checkpoint_id=directory, no_dist=True)
    whole.load_state_dict(whole_state)
    for (name, expected), got in zip(saved.named_parameters(), whole.parameters(), strict=True):
        assert got.device.type == "neuron", name
        assert torch.equal(got.detach().cpu(), _full(expected)), f"{name} loaded whole"
    step(saved, saved_optimizer)
    step(loaded, loaded_optimizer)
    for (name, expected), got in zip(saved.named_parameters(), loaded.parameters(), strict=True):
        assert torch.equal(_full(got), _full(expected)), f"{name} after a step"


def sharded_checkpoint_compiled(rank: int, world: int) -> None:
    """`sharded_checkpoint` for a model whose blocks are compiled by neuron-mlir after sharding (`block.compile()`):
    its sharded state saves, loads in place into a compiled model initialised otherwise, whose compiled blocks then
    train on exactly as the saved model's do (the parameters are the programs' inputs, not baked in)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.checkpoint.state_dict_loader import load
    from torch.distributed.checkpoint.state_dict_saver import save
    from torch.distributed.fsdp import fully_shard

    import neuron_mlir

    directory = sys.argv[2] + "-compiled"
    inputs, targets = torch.randn(4, 8), torch.randn(4, 4)

    def sharded(seed: int) -> tuple[_Net, torch.optim.Optimizer]:
        torch.manual_seed(seed)
        model = _Net().to("neuron")
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        for block in model.blocks:
            block.compile(backend="neuron-mlir")
        return model, torch.optim.Adam(model.parameters(), lr=0.01)

    def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs.to("neuron")), targets.to("neuron")).backward()
        optimizer.step()

    torch._dynamo.reset()
    before = neuron_mlir.stats()
    saved, saved_optimizer = sharded(0)
    for _ in range(2):
        step(saved, saved_optimizer)
    grown = {key: neuron_mlir.stats()[key] - before[key] for key in ("graphs_compiled", "nodes_fallen_back")}
    assert grown["graphs_compiled"] >= 2, grown  # the blocks' forward and backward
    assert grown["nodes_fallen_back"] == 0, grown
    model_state, optimizer_state = get_state_dict(saved, saved_optimizer)
    save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=directory)

    loaded, loaded_optimizer = sharded(1)
    step(loaded, loaded_optimizer)  # its compiled blocks run (and its optimizer has state) before the load
    model_state, optimizer_state = get_state_dict(loaded, loaded_optimizer)
    load({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=directory)
    set_state_dict(loaded, loaded_optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)
    for (name, expected), got in zip(saved.named_parameters(), loaded.parameters(), strict=True):
        assert torch.equal(_full(got), _full(expected)), name
        moments, expected_moments = loaded_optimizer.state[got], saved_optimizer.state[expected]
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(_full(moments[key]), _full(expected_moments[key])), (name, key)
    step(saved, saved_optimizer)
    step(loaded, loaded_optimizer)
    for (name, expected), got in zip(saved.named_parameters(), loaded.parameters(), strict=True):
        assert torch.equal(_full(got), _full(expected)), f"{name} after a compiled step"


def sharded_and_tensor_parallel(rank: int, world: int) -> None:
    """A 2-D mesh (data x tensor): the MLP split column- then row-wise over the tensor dimension and FSDP2 over
    the data dimension, each data group with its share of the batch, trains as one process on the whole batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    assert world % 2 == 0, world
    mesh = init_device_mesh("neuron", (world // 2, 2), mesh_dim_names=("data", "tensor"))
    data_rank, groups = mesh["data"].get_local_rank(), world // 2
    torch.manual_seed(0)
    reference = _mlp()
    model = _mlp()
    model.load_state_dict(reference.state_dict())
    parallelize_module(model.to("neuron"), mesh["tensor"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh["data"])
    fully_shard(model, mesh=mesh["data"])
    for name, parameter in model.named_parameters():
        assert isinstance(parameter, DTensor), name
        assert parameter.device_mesh.ndim == 2, (name, parameter.placements)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    inputs, targets = torch.randn(4 * groups, 8), torch.randn(4 * groups, 4)
    share = slice(4 * data_rank, 4 * (data_rank + 1))
    for step in range(3):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs[share].to("neuron")), targets[share].to("neuron")).backward()
        gradients = {name: _full(p.grad) for name, p in model.named_parameters()}
        optimizer.step()
        reference_optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(inputs), targets).backward()
        reference_optimizer.step()
        for name, parameter in reference.named_parameters():
            expected = cast(torch.Tensor, parameter.grad)
            _assert_close(gradients[name], expected, torch.float32, f"step {step} grad {name}")
    for (name, expected_parameter), parameter in zip(reference.named_parameters(), model.parameters(), strict=True):
        _assert_close(_full(parameter), expected_parameter, torch.float32, name)


class _DiedWriting(BaseException):
    """Ends a rank's compile where its process would die: not an Exception, so nothing on the way catches it."""


def shared_cache(rank: int, world: int) -> None:
    """The ranks compile the same graph at once into one disk cache directory (beside the checkpoint directory),
    and the last rank stops dead halfway through writing its entry, its temporary file cut to half and never
    renamed, as when its process dies there: every other rank runs the right program, whether it found the entry
    or compiled it. The launching test then checks that every entry on disk is whole. (The stopped rank unwinds
    instead of exiting, so that the launch's later scenarios still have every rank: the others see only the disk,
    which is the same either way.)"""
    from pathlib import Path

    import neuron_mlir.frontend.cache as cache

    saved = os.environ.get("NEURON_MLIR_CACHE_DIR")
    os.environ["NEURON_MLIR_CACHE_DIR"] = str(Path(sys.argv[2]).parent / "shared-cache")
    dies = rank == world - 1
    real_replace, real_get_entry = os.replace, cache.CompileCache.get_entry

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ w) * 2 + 1

    if dies:

        def die_halfway(source: Any, destination: Any) -> None:
            if not str(destination).endswith((".bundle", ".meta")):  # not an entry (the fingerprint's memo)
                real_replace(source, destination)
                return
            # the temporary file holds the whole entry now: cut it to half, as if the process died writing it
            with open(source, "r+b") as handle:
                handle.truncate(os.path.getsize(source) // 2)
            raise _DiedWriting

        os.replace = die_halfway  # type: ignore[assignment]  # the cache's atomic writes end in a rename
        # it looks in no cache, as if it came first: it compiles and writes, whatever the others did
        cache.CompileCache.get_entry = lambda self, key, with_metadata=False: None  # type: ignore[method-assign]
    dist.barrier()  # all start together
    x, w = torch.linspace(-1, 1, 32).reshape(4, 8), torch.linspace(-0.5, 0.5, 48).reshape(8, 6)
    torch._dynamo.reset()
    try:
        got = torch.compile(step, backend="neuron-mlir", options={"strict": True})(x, w)
    except _DiedWriting:
        assert dies
    else:
        assert not dies, "the dying rank wrote its entry whole"
        _assert_close(got, step(x, w), torch.float32, f"rank {rank}'s compiled step")
    finally:
        os.replace, cache.CompileCache.get_entry = real_replace, real_get_entry  # type: ignore[method-assign]
        if saved is None:
            del os.environ["NEURON_MLIR_CACHE_DIR"]
        else:
            os.environ["NEURON_MLIR_CACHE_DIR"] = saved
    dist.barrier()  # the others compiled, or read an entry, before the launching test looks at the directory


def example_training(rank: int, world: int) -> None:
    """examples/train_distributed.py with --compile trains as one process does on the whole batch: FSDP2 with
    each block compiled after sharding, and torch.compile of the DDP model; every node of the compiled graphs
    in neuron programs."""
    from pathlib import Path

    import neuron_mlir

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    import train_distributed

    for parallel, least_graphs in (("fsdp", 4), ("ddp", 2)):  # each block's forward and backward; the model's
        torch._dynamo.reset()
        before = neuron_mlir.stats()
        args = train_distributed.arguments(["--parallel", parallel, "--compile", "--steps", "2"])
        parameters = train_distributed.train(args)
        after = neuron_mlir.stats()
        for name, (mine, theirs) in parameters.items():
            _assert_close(mine, theirs, torch.float32, f"{parallel} --compile: parameter {name}")
        grown = {key: after[key] - before[key] for key in ("graphs_compiled", "nodes_fallen_back")}
        assert grown["graphs_compiled"] >= least_graphs, (parallel, grown)
        assert grown["nodes_fallen_back"] == 0, (parallel, grown)


def _line_of(function: Any, text: str) -> int:
    """The line of `function`'s source holding `text` (where a collective is called)."""
    import inspect

    lines, first = inspect.getsourcelines(function)
    (offset,) = [i for i, line in enumerate(lines) if text in line]
    return first + offset


def compiled_mismatch(rank: int, world: int) -> None:
    """Ranks whose compiled graphs call different collectives, or pass different element counts: every rank raises
    a CollectiveError naming the collective, what differs and the line of the graph's source that called it;
    nothing is exchanged, so the group still serves the ranks' next collectives."""
    import re

    import torch.distributed._functional_collectives as funcol

    from neuron_mlir.runtime.collectives import CollectiveError

    group = dist.group.WORLD

    def reduce(x: torch.Tensor) -> torch.Tensor:
        return funcol.all_reduce(torch.tanh(x), "sum", group) * 2

    def reduce_or_gather(x: torch.Tensor) -> torch.Tensor:
        if rank == 0:
            return funcol.all_reduce(torch.tanh(x), "sum", group) * 2
        return funcol.all_gather_single(torch.tanh(x), 0, group)[: x.shape[0]] * 2

    cases = (
        (reduce, torch.ones(2 + rank, 3), r"all_reduce: rank \d passes \d+ elements, rank \d \d+", "all_reduce("),
        (
            reduce_or_gather,
            torch.ones(2, 3),
            r"(all_reduce|all_gather): rank \d calls (all_reduce|all_gather) where rank \d calls (all_gather|all_reduce)",
            "all_reduce(" if rank == 0 else "all_gather_single(",
        ),
    )
    for function, x, diagnostic, call in cases:
        torch._dynamo.reset()
        compiled = torch.compile(function, backend="neuron-mlir", options={"strict": True})
        try:
            compiled(x)
        except CollectiveError as error:
            message = str(error)
        else:
            raise AssertionError(f"{function.__name__}: the ranks disagree but the collective ran")
        assert re.search(diagnostic, message), message
        assert f"ranks.py:{_line_of(function, call)}" in message, message  # the user's line of the collective
    x = torch.full((2, 3), float(rank + 1))  # ranks that agree exchange as before
    torch._dynamo.reset()
    got = torch.compile(reduce, backend="neuron-mlir", options={"strict": True})(x)
    _assert_close(got, reduce(x), torch.float32, "after the refused collectives")


def _failed_all_reduce(compiled: Any, x: torch.Tensor, step: Any, peer: str) -> tuple[str, float]:
    """Calls `compiled(x)`, whose all_reduce must fail for `peer`: the error and the seconds it took, checked to
    name the collective and the line of `step` that called it."""
    import time

    from neuron_mlir.runtime.collectives import CollectiveError

    started = time.monotonic()
    try:
        compiled(x)
    except CollectiveError as error:
        message, waited = str(error), time.monotonic() - started
    else:
        raise AssertionError(f"a collective with {peer} completed")
    assert "all_reduce" in message, message
    assert f"ranks.py:{_line_of(step, 'all_reduce(')}" in message, message
    return message, waited


def hangs_in_a_collective(rank: int, world: int) -> None:
    """The last rank does not arrive at a compiled all_reduce (it sleeps past the group's timeout, as a rank stuck
    in a long computation or a deadlock would): every other rank fails within the timeout with a CollectiveError
    naming the collective and the user's line, instead of hanging. The ranks gloo connects to the late one time
    out; a rank whose peer timed out and closed its connection may fail by that instead, as early. The late rank
    then leaves that group alone and meets the others again on the world group, which still serves them."""
    import datetime
    import time

    import torch.distributed._functional_collectives as funcol

    timeout = 2.0
    group = dist.new_group(backend="neuron", timeout=datetime.timedelta(seconds=timeout))

    def step(x: torch.Tensor) -> torch.Tensor:
        return funcol.all_reduce(torch.tanh(x), "sum", group) * 2

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="neuron-mlir", options={"strict": True})
    x = torch.ones(2, 3)
    _assert_close(compiled(x), step(x), torch.float32, "before the hang")  # compiled, exchanged once
    timed_out = 0
    if rank == world - 1:
        time.sleep(timeout + 1.0)  # arrives after every other rank gave up
    else:
        message, waited = _failed_all_reduce(compiled, x, step, "a hung peer")
        timed_out = int("timed out" in message.lower())
        assert timed_out or "Connection closed" in message, message
        assert timeout - 0.5 <= waited < timeout + 3, (waited, message)
    # the world group is untouched by the other group's failure: every rank meets there, and some rank saw the
    # timeout itself (a closed connection is a peer's timeout passed on)
    outcomes = torch.tensor([timed_out], dtype=torch.int64, device="neuron")
    dist.all_reduce(outcomes)
    assert int(outcomes.item()) >= 1, "no rank timed out"
    dist.destroy_process_group(group)


def dies_in_a_collective(rank: int, world: int) -> None:
    """The last rank's process ends inside a compiled all_reduce: the ranks have compared what they call, and it
    exits where gloo would send its bytes (status 0, so that torchrun lets the others finish). The others fail
    within the group's timeout with a CollectiveError naming the collective and the user's line, instead of
    hanging. Last in its launch: a rank is gone after it."""
    import datetime

    import torch.distributed._functional_collectives as funcol

    timeout = 5.0
    group = dist.new_group(backend="neuron", timeout=datetime.timedelta(seconds=timeout))

    def step(x: torch.Tensor) -> torch.Tensor:
        return funcol.all_reduce(torch.tanh(x), "sum", group) * 2

    compiled = torch.compile(step, backend="neuron-mlir", options={"strict": True})
    x = torch.ones(2, 3)
    _assert_close(compiled(x), step(x), torch.float32, "before the death")  # compiled, exchanged once
    if rank == world - 1:

        class Dying:
            """gloo's process group of `group`, whose all_reduce ends the process instead."""

            def __init__(self, gloo: Any) -> None:
                self._gloo = gloo

            def __getattr__(self, name: str) -> Any:
                return getattr(self._gloo, name)

            def allreduce(self, *args: Any) -> None:
                os._exit(0)

        backend = cast(Any, group)
        backend._transport = Dying(backend._transport)
        compiled(x)
        raise AssertionError("the dying rank's collective completed")
    _, waited = _failed_all_reduce(compiled, x, step, "a dead peer")
    assert waited < timeout + 2, waited


SCENARIOS = {
    "fully_sharded_compiled": fully_sharded_compiled,
    "sharded_and_tensor_parallel": sharded_and_tensor_parallel,
    "sharded_checkpoint": sharded_checkpoint,
    "sharded_checkpoint_compiled": sharded_checkpoint_compiled,
    "fully_sharded": fully_sharded,
    "collectives": collectives,
    "tensor_parallel": tensor_parallel,
    "sharded_and_sequence_parallel": sharded_and_sequence_parallel,
    "data_parallel": data_parallel,
    "data_parallel_on_compiled_ops": data_parallel_on_compiled_ops,
    "default_backend": default_backend,
    "sharded_tensors": sharded_tensors,
    "compiled_collectives": compiled_collectives,
    "compiled_tensor_parallel": compiled_tensor_parallel,
    "compiled_data_parallel": compiled_data_parallel,
    "shared_cache": shared_cache,
    "example_training": example_training,
    "compiled_mismatch": compiled_mismatch,
    "hangs_in_a_collective": hangs_in_a_collective,
    "dies_in_a_collective": dies_in_a_collective,
}
# a launch whose first scenario is one of these calls init_process_group() without a backend: torch picks `neuron`
LEFT_TO_TORCH = {"default_backend"}
# a launch takes 10-40 s on a loaded machine; the launching test waits a minute longer than a rank may live
RANK_TIMEOUT_SECONDS = 180


def main() -> None:
    from neuron_mlir.frontend.distributed.process_group import NeuronProcessGroup

    # a rank that hangs prints every thread's stack and exits, so the launch fails showing where it stopped
    faulthandler.dump_traceback_later(RANK_TIMEOUT_SECONDS, exit=True)
    scenarios = sys.argv[1].split(",")  # several share one launch: starting the ranks is most of a test's time
    dist.init_process_group(None if scenarios[0] in LEFT_TO_TORCH else "neuron")  # env:// from torchrun
    try:
        # torch makes the `neuron` group the world group itself, chosen or left to torch
        assert isinstance(dist.group.WORLD, NeuronProcessGroup), type(dist.group.WORLD)
        for scenario in scenarios:
            started = time.monotonic()
            SCENARIOS[scenario](dist.get_rank(), dist.get_world_size())
            print(f"rank {dist.get_rank()}: {scenario} {time.monotonic() - started:.1f} s", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
