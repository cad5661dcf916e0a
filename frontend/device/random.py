"""The device's random number generator: what `torch.manual_seed` and `torch.neuron.manual_seed` seed.

Random ops on device tensors draw from this generator (a CPU `torch.Generator`, the Mersenne Twister, owned by the
device), so a program seeded with `torch.manual_seed(s)` draws the same numbers on every run, and
drawing on the device does not advance the CPU's default generator (as on CUDA). Compiled programs with random
ops (`rand`, `normal_`, `bernoulli`, dropout, ... compiled eagerly or in a graph on the device) take their seed from
it. On the host (random ops the compiler does not draw, `randperm`), ops with a `generator` argument
are given it; random ops without one run with it standing in for torch's default generator
(`as_default_generator`).

With the device's native hooks (`native/`), this generator is torch's default generator of the device (a
`torch.Generator` on `neuron`, `torch.neuron.default_generators[0]`), and `torch.Generator(device="neuron")` makes
others; both are the CPU's Mersenne Twister labelled with the device. Host kernels accept only CPU generators, so
a device generator draws through a CPU stand-in carrying its state (`on_host`), which is written back after.
Without the native hooks the generator is a plain CPU `torch.Generator` owned by the device.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch._compile import _disable_dynamo

_DEFAULT_SEED = 67280421310721  # torch's own default seed, for a device nobody has seeded
_generator: torch.Generator | None = None


def device_generator() -> torch.Generator:
    global _generator
    if _generator is None:
        from neuron_mlir.frontend.device import native

        _generator = native.default_generator()
        if _generator is None:
            _generator = torch.Generator()
            _generator.manual_seed(_DEFAULT_SEED)
    return _generator


@contextmanager
def on_host(generator: torch.Generator) -> Iterator[torch.Generator]:
    """A CPU generator drawing `generator`'s numbers within the block; `generator` advances by what was drawn."""
    if generator.device.type == "cpu":
        yield generator
        return
    stand_in = torch.Generator()
    stand_in.set_state(generator.get_state())
    try:
        yield stand_in
    finally:
        generator.set_state(stand_in.get_state())


def manual_seed(seed: int) -> None:
    device_generator().manual_seed(int(seed))


def seed() -> int:
    return device_generator().seed()


def initial_seed() -> int:
    return device_generator().initial_seed()


# Code under torch.compile saves and restores the accelerator's state (`torch.testing`'s `freeze_rng_state`,
# `torch.random.fork_rng`): Dynamo runs these eagerly, as it runs torch.cuda's, instead of tracing a generator's
# state (Dynamo is imported at the first call, not with the device).
@_disable_dynamo
def get_rng_state() -> torch.Tensor:
    return device_generator().get_state()


@_disable_dynamo
def set_rng_state(state: torch.Tensor) -> None:
    device_generator().set_state(state.cpu())


@contextmanager
def as_default_generator() -> Iterator[None]:
    """Within the block, torch's default CPU generator draws the device generator's numbers, and the device
    generator advances by what was drawn; the default generator is left as it was."""
    default = torch.default_generator
    saved = default.get_state()
    default.set_state(device_generator().get_state())
    try:
        yield
    finally:
        device_generator().set_state(default.get_state())
        default.set_state(saved)
