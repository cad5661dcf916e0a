"""What the ranks' agreement check costs: before every collective of a `neuron` process group the ranks all-gather
what they call (frontend/distributed/process_group.py), one small exchange more per collective.

    python bench/bench_collective_agreement.py              # launches 2 ranks with torchrun, prints the table
    python bench/bench_collective_agreement.py --steps 40

Per scenario, on each of 2 ranks (one process each, gloo carrying the bytes over the loopback): the exchanges
gloo makes per step, counted at the group's gloo process group (collectives and agreement checks apart); the
step's wall and CPU time (the process's, gloo's threads included) with the eager agreement check and without it,
alternate steps, medians over the measured steps after warm-up steps; and the wall time spent inside the checks
(which includes waiting for a late peer, a wait the collective would otherwise take). Scenarios: an eager DDP
training step (the MLP of examples/train_distributed.py on the device, its ops compiled single-op programs, one
gradient bucket), an eager FSDP2 step of the same model (every block and the root sharded: all-gathers and
reduce-scatters), and a compiled function holding one all_reduce (its collective runs through the compiled
collectives' transport, whose check cannot be switched off: its two columns differ only by noise). Wall times
depend on the machine's load, CPU times much less: the ratios are what to read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# gloo calls that move bytes between the ranks
_EXCHANGES = frozenset(
    {
        "allreduce",
        "allreduce_coalesced",
        "allgather",
        "_allgather_base",
        "reduce_scatter",
        "_reduce_scatter_base",
        "broadcast",
        "reduce",
        "gather",
        "scatter",
        "alltoall",
        "alltoall_base",
        "send",
        "recv",
        "barrier",
    }
)


class _Counted:
    """A gloo process group whose exchanges are counted (in `counts`: "agreement" inside an agreement check)."""

    def __init__(self, inner: Any, counts: Counter[str], checking: list[int]) -> None:
        self._inner, self._counts, self._checking = inner, counts, checking

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name not in _EXCHANGES:
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counts["agreement" if self._checking[0] else "collective"] += 1
            return found(*args, **kwargs)

        return counted


def _instrument(counts: Counter[str], agreement_ns: list[int], switch: list[bool]) -> None:
    """Count every neuron group's gloo exchanges and time its agreement checks: the eager collectives' `_agree`
    and the compiled transport's all-gather of what it passes (an int64 all-gather issued from transport.py). While
    `switch[0]` is False the eager check is skipped (the compiled transport's cannot be: it is its own exchange)."""
    import torch
    import torch.distributed as dist

    from neuron_mlir.frontend.distributed import process_group

    depth = [0]  # agreement checks in progress (a check's all-gather may itself be checked)
    original_init = process_group.NeuronProcessGroup.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._transport = _Counted(self._transport, counts, depth)

    def timed(function: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter_ns()
            depth[0] += 1
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    agreement_ns.append(time.perf_counter_ns() - started)

        return run

    process_group.NeuronProcessGroup.__init__ = init  # type: ignore[method-assign]
    checked_agree = timed(process_group.NeuronProcessGroup._agree)

    def agree(*args: Any, **kwargs: Any) -> None:
        if switch[0]:
            checked_agree(*args, **kwargs)

    process_group.NeuronProcessGroup._agree = agree  # type: ignore[method-assign]
    original_all_gather_single = dist.all_gather_single
    timed_all_gather_single = timed(original_all_gather_single)

    def all_gather_single(output: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_code.co_filename
        if input.dtype == torch.int64 and caller.endswith("transport.py"):
            return timed_all_gather_single(output, input, *args, **kwargs)
        return original_all_gather_single(output, input, *args, **kwargs)

    dist.all_gather_single = all_gather_single  # type: ignore[assignment]  # for the measurement only


def _model() -> Any:
    sys.path.insert(0, str(REPO / "examples"))
    import train_distributed

    return train_distributed.make_model()


def _measure(
    name: str, step: Any, counts: Counter[str], agreement_ns: list[int], warm: int, steps: int, switch: list[bool]
) -> dict:
    """Medians over `steps` steps with the eager agreement check and as many without it (`switch`), alternated so
    that the machine's load weighs on both alike."""
    import torch.distributed as dist

    for _ in range(warm):
        step()
    walls: dict[bool, list[int]] = {True: [], False: []}
    cpus: dict[bool, list[int]] = {True: [], False: []}
    agreements, per_step = [], []
    for index in range(2 * steps):
        switch[0] = checked = index % 2 == 0
        dist.barrier()  # the ranks start each step together: waiting for a late peer is not the step's
        counts.clear()
        agreement_ns.clear()
        started, cpu = time.perf_counter_ns(), time.process_time_ns()
        step()
        walls[checked].append(time.perf_counter_ns() - started)
        cpus[checked].append(time.process_time_ns() - cpu)
        if checked:
            agreements.append(sum(agreement_ns))
            per_step.append(dict(counts))
    switch[0] = True
    return {
        "scenario": name,
        "step_us": statistics.median(walls[True]) / 1e3,
        "unchecked_us": statistics.median(walls[False]) / 1e3,
        "cpu_us": statistics.median(cpus[True]) / 1e3,
        "unchecked_cpu_us": statistics.median(cpus[False]) / 1e3,
        "agreement_us": statistics.median(agreements) / 1e3,
        "collectives": per_step[-1].get("collective", 0),
        "agreements": per_step[-1].get("agreement", 0),
    }


def rank_main(steps: int, warm: int) -> None:
    import torch
    import torch.distributed as dist

    counts: Counter[str] = Counter()
    agreement_ns: list[int] = []
    switch = [True]
    _instrument(counts, agreement_ns, switch)
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    inputs, labels = torch.randn(8, 32).to("neuron"), torch.randint(0, 10, (8,)).to("neuron")
    rows = []

    ddp = torch.nn.parallel.DistributedDataParallel(_model().to("neuron"))
    ddp_optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)

    def ddp_step() -> None:
        ddp_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(inputs), labels).backward()
        ddp_optimizer.step()

    rows.append(_measure("eager DDP step", ddp_step, counts, agreement_ns, warm, steps, switch))

    from torch.distributed.fsdp import fully_shard

    sharded = _model().to("neuron")
    for block in sharded.blocks:
        fully_shard(block)
    fully_shard(sharded)
    fsdp_optimizer = torch.optim.SGD(sharded.parameters(), lr=0.01)

    def fsdp_step() -> None:
        fsdp_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(sharded(inputs), labels).backward()
        fsdp_optimizer.step()

    rows.append(_measure("eager FSDP2 step", fsdp_step, counts, agreement_ns, warm, steps, switch))

    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD

    def reduce(x: torch.Tensor) -> torch.Tensor:
        return funcol.all_reduce(torch.tanh(x), "sum", group) * 2

    compiled = torch.compile(reduce, backend="neuron-mlir", options={"strict": True})
    host = torch.randn(64, 64)
    call = "compiled all_reduce call"
    rows.append(_measure(call, lambda: compiled(host), counts, agreement_ns, warm, steps, switch))
    dist.destroy_process_group()
    if rank == 0:
        print(f"{world} ranks, medians of {steps} steps after {warm} warm-up steps")
        print(
            f"{'scenario':<26} {'exchanges':>9} {'checks':>6} {'wall us':>9} {'unchecked':>9} {'ratio':>6} "
            f"{'CPU us':>9} {'unchecked':>9} {'ratio':>6} {'in checks':>9}"
        )
        for row in rows:
            exchanges = row["collectives"] + row["agreements"]
            print(
                f"{row['scenario']:<26} {exchanges:>9} {row['agreements']:>6} {row['step_us']:>9.0f} "
                f"{row['unchecked_us']:>9.0f} {row['step_us'] / row['unchecked_us']:6.2f} {row['cpu_us']:>9.0f} "
                f"{row['unchecked_cpu_us']:>9.0f} {row['cpu_us'] / row['unchecked_cpu_us']:6.2f} "
                f"{row['agreement_us']:>9.0f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)  # one rank, under torchrun
    args = parser.parse_args()
    if args.rank:
        rank_main(args.steps, args.warm)
        return
    with tempfile.TemporaryDirectory() as cache:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", __file__]
        arguments = ["--rank", "--steps", str(args.steps), "--warm", str(args.warm)]
        environment = {**os.environ, "NEURON_MLIR_CACHE_DIR": cache}
        subprocess.run([*command, *arguments], check=True, env=environment)


if __name__ == "__main__":
    main()
