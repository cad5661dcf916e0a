"""The device's random number generator: what `torch.manual_seed` and `torch.neuron.manual_seed` seed.

Random ops on device tensors draw from this generator (a CPU `torch.Generator`, the Mersenne Twister, owned by the
device), so a program seeded with `torch.manual_seed(s)` draws the same numbers on every run, and
drawing on the device does not advance the CPU's default generator (as on CUDA).
"""

from __future__ import annotations

import torch

_DEFAULT_SEED = 67280421310721  # torch's own default seed, for a device nobody has seeded
_generator: torch.Generator | None = None


def device_generator() -> torch.Generator:
    global _generator
    if _generator is None:
        _generator = torch.Generator()
        _generator.manual_seed(_DEFAULT_SEED)
    return _generator


def manual_seed(seed: int) -> None:
    device_generator().manual_seed(int(seed))


def seed() -> int:
    return device_generator().seed()


def initial_seed() -> int:
    return device_generator().initial_seed()


def get_rng_state() -> torch.Tensor:
    return device_generator().get_state()


def set_rng_state(state: torch.Tensor) -> None:
    device_generator().set_state(state.cpu())
