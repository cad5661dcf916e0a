"""Our dialects, by namespace, as lazy factories so that tools load only what the input needs.

Loading the torch dialect never imports torch: its op classes are generated ahead of time
(`tools/gen_torch_dialect.py`).
"""

from collections.abc import Callable

from xdsl.ir import Dialect


def _memory() -> Dialect:
    from neuron_mlir.ir.dialects.memory import Mem

    return Mem


def _torch() -> Dialect:
    from neuron_mlir.ir.dialects.torch import Torch

    return Torch


def _tile() -> Dialect:
    from neuron_mlir.ir.dialects.tile import Tile

    return Tile


def _neuron() -> Dialect:
    from neuron_mlir.ir.dialects.neuron import Neuron

    return Neuron


ALL_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "mem": _memory,
    "torch": _torch,
    "tile": _tile,
    "neuron": _neuron,
}
