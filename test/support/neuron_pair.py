"""`neuron` process-group ranks on threads of one process, for tests of collectives and their faults.

Each rank has its own `NeuronProcessGroup` over one in-memory store, with gloo carrying the bytes as between
processes, so a test sees every rank's outcome (result or exception) without a torchrun launch.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from typing import Any


def neuron_ranks(work: Callable[[Any, int], Any], world: int, timeout_seconds: float = 30.0) -> list:
    """`work(group, rank)` on `world` threads, one rank each; each rank's result or exception, by rank."""
    from torch._C._distributed_c10d import HashStore, PrefixStore

    from neuron_mlir.frontend.distributed.process_group import NeuronProcessGroup

    store = HashStore()
    results: list = [None] * world

    def run(rank: int) -> None:
        timeout = datetime.timedelta(seconds=timeout_seconds)
        group = NeuronProcessGroup(PrefixStore("ranks/", store), rank, world, timeout)
        try:
            results[rank] = work(group, rank)
        except Exception as error:  # each rank's own outcome
            results[rank] = error

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def neuron_pair(work: Callable[[Any, int], Any], timeout_seconds: float = 30.0) -> list:
    """`work(group, rank)` on two ranks (`neuron_ranks`)."""
    return neuron_ranks(work, 2, timeout_seconds)
