"""The `stochastic_rounding` option: casts from fp32 to bf16 round to a random neighbour, unbiased on average.

A bf16 weight update too small for round-to-nearest (it would leave every weight unchanged) must move the
weights by the update on average, each weight landing on one of its two bf16 neighbours; the draws repeat under
`torch.manual_seed` and differ from call to call.
"""

from __future__ import annotations

import math

import pytest
import torch

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _update(weight: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    return (weight.float() - 1e-3 * grad).to(torch.bfloat16)


def test_small_bf16_updates_are_unbiased_and_reproducible():
    weight = torch.ones(100, 300, dtype=torch.bfloat16)
    grad = torch.full((100, 300), 0.3)
    exact = weight.float() - 1e-3 * grad  # 0.9997: bf16's neighbours are 1 - 2^-8 and 1
    assert torch.equal(_update(weight, grad).float(), weight.float())  # round to nearest loses the update

    compiled = torch.compile(_update, backend="neuron-mlir", options={"stochastic_rounding": True, "strict": True})
    torch.manual_seed(3)
    rounded = compiled(weight, grad)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    values = rounded.float()
    below, above = 1 - 2**-8, 1.0
    assert bool(((values == below) | (values == above)).all())
    p = (float(exact[0, 0]) - below) / (above - below)
    bound = 5 * (above - below) * math.sqrt(p * (1 - p) / values.numel())  # 5 standard errors of the mean
    assert abs(values.double().mean().item() - float(exact[0, 0])) <= bound

    torch.manual_seed(3)
    assert torch.equal(compiled(weight, grad), rounded)
    assert not torch.equal(compiled(weight, grad), rounded)
