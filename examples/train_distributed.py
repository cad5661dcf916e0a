"""Data-parallel training over `neuron` ranks with PyTorch's own APIs: DDP or FSDP2, launched by torchrun.

    torchrun --standalone --nproc-per-node 2 examples/train_distributed.py --parallel fsdp
    torchrun --standalone --nproc-per-node 2 examples/train_distributed.py --parallel ddp --steps 5
    torchrun --standalone --nproc-per-node 2 examples/train_distributed.py --parallel fsdp --checkpoint /tmp/ckpt
    torchrun --standalone --nproc-per-node 2 examples/train_distributed.py --parallel fsdp --compile
    torchrun --standalone --nproc-per-node 2 examples/train_distributed.py --parallel ddp --compile

Each rank drives one simulated NeuronCore (`neuron:0` of its process) and trains on its share of every global
batch; gloo carries the collectives' bytes. `--parallel fsdp` shards every block and the root with
`fully_shard` (parameters resharded after forward, bf16 compute with fp32 gradient reduction under
`--bf16`); `--parallel ddp` replicates the model with DistributedDataParallel. Rank 0 prints each step's loss
next to one process training on the whole batch on the CPU (the same numbers within the dtype's tolerance),
and every rank its device memory. `--checkpoint DIR` saves the sharded model and optimizer state with
torch.distributed.checkpoint, then loads it back into a freshly initialised model. `--compile` compiles the
model as users of each API do: under FSDP2 each block after it is sharded (`block.compile()`, FSDP2's hooks
gathering and freeing its parameters around the compiled forward and backward; the root's head runs eagerly), under
DDP the wrapped model (`torch.compile(DDP(model))`, which Dynamo splits where DDP's gradient buckets end).
"""

from __future__ import annotations

import argparse
import copy
import os
from typing import Any, cast

import torch
import torch.distributed as dist


class Block(torch.nn.Module):
    """A layer and its activation, in user code as a transformer's blocks are: Dynamo compiles frames of user code,
    never those of torch.nn's own modules."""

    def __init__(self, inputs: int, outputs: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(inputs, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x))


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(32, 64), Block(64, 64)])
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_model() -> Model:
    return Model()


def parallelise(model: Model, how: str, bf16: bool, compile: bool = False) -> torch.nn.Module:
    if how == "ddp":
        replica = torch.nn.parallel.DistributedDataParallel(model)
        return cast(torch.nn.Module, torch.compile(replica, backend="neuron-mlir")) if compile else replica
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=True, mp_policy=policy)
    fully_shard(model, mp_policy=policy)  # the root: the head's parameters
    if compile:  # after sharding, in place: the parameters' names and the state dict stay the model's own
        for block in model.blocks:
            block.compile(backend="neuron-mlir")
    return model


def full_parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter whole and on the host (FSDP2's are DTensor shards), by its name in the plain model."""
    from torch.distributed.tensor import DTensor

    return {
        name.removeprefix("_orig_mod.").removeprefix("module."): (p.full_tensor() if isinstance(p, DTensor) else p)
        .detach()
        .cpu()
        for name, p in model.named_parameters()
    }


def checkpoint_round_trip(model: torch.nn.Module, optimizer: torch.optim.Optimizer, args: Any) -> None:
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.checkpoint.state_dict_loader import load
    from torch.distributed.checkpoint.state_dict_saver import save

    model_state, optimizer_state = get_state_dict(model, optimizer)
    save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=args.checkpoint)
    torch.manual_seed(1)  # other weights, replaced by the checkpoint's
    fresh = parallelise(make_model().to("neuron"), args.parallel, args.bf16, args.compile)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    model_state, optimizer_state = get_state_dict(fresh, fresh_optimizer)
    load({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=args.checkpoint)
    set_state_dict(fresh, fresh_optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)
    loaded, saved = full_parameters(fresh), full_parameters(model)
    same = all(torch.equal(loaded[name], saved[name]) for name in saved)
    if dist.get_rank() == 0:
        print(f"checkpoint in {args.checkpoint}: loaded into a fresh model, parameters equal: {same}")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", choices=("fsdp", "ddp"), default="fsdp")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8, help="samples per rank and step")
    parser.add_argument("--bf16", action="store_true", help="FSDP2: bf16 parameters in compute, fp32 reduction")
    parser.add_argument("--checkpoint", help="save and reload the sharded state in this directory")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (neuron-mlir backend)")
    return parser.parse_args(argv)


def train(args: argparse.Namespace) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Train on this rank's share of each global batch beside one process on the whole batch; each parameter at
    the end, whole and on the host: as the ranks trained it, as the one process did."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    reference = make_model()
    model = parallelise(copy.deepcopy(reference).to("neuron"), args.parallel, args.bf16, args.compile)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    inputs = torch.randn(args.steps, args.batch * world, 32)
    labels = torch.randint(0, 10, (args.steps, args.batch * world))
    mine = slice(rank * args.batch, (rank + 1) * args.batch)
    if rank == 0:
        print(f"{args.parallel} on {world} neuron ranks, {args.batch} samples per rank and step")
    for step in range(args.steps):
        optimizer.zero_grad()
        logits = model(inputs[step, mine].to("neuron")).float()
        loss = torch.nn.functional.cross_entropy(logits, labels[step, mine].to("neuron"))
        loss.backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        expected = torch.nn.functional.cross_entropy(reference(inputs[step]), labels[step])
        expected.backward()
        reference_optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)  # the global batch's loss: the mean of the shares'
        if rank == 0:
            print(f"  step {step}: loss {mean_loss.item():.6f} over the ranks, {expected.item():.6f} in one process")
    ours = full_parameters(model)
    pairs = {name: (ours[name], p.detach()) for name, p in reference.named_parameters()}
    worst = max(float((mine - theirs).abs().max()) for mine, theirs in pairs.values())
    module: Any = torch.get_device_module("neuron")
    print(
        f"rank {rank}: largest parameter difference to one process {worst:.2e}; device memory "
        f"{module.memory_allocated()} bytes, peak {module.max_memory_allocated()}"
    )
    if args.checkpoint:
        checkpoint_round_trip(model, optimizer, args)
    return pairs


def main() -> None:
    args = arguments()
    dist.init_process_group("neuron")  # torchrun's environment: rank, world size, rendezvous
    try:
        train(args)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__" and "LOCAL_RANK" not in os.environ:
    raise SystemExit("launch with torchrun, e.g. torchrun --standalone --nproc-per-node 2 " + __file__)
if __name__ == "__main__":
    main()
