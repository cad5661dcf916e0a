"""float64 scalar steps narrowed to fp32 only where that gives eager's value bit for bit (frontend/narrow_float64.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
from support import assert_close_to_torch, trace_aten_graphs

from neuron_mlir.frontend.narrow_float64 import fold_constant_scalars, narrow_float64


def _dtypes(gm: torch.fx.GraphModule) -> set[torch.dtype]:
    values = [node.meta.get("val") for node in gm.graph.nodes]
    return {value.dtype for value in values if isinstance(value, torch.Tensor)}


def _fp8_scale(x: torch.Tensor) -> torch.Tensor:
    """torchao's tensorwise scale: fp8_max / max(amax, eps), computed in float64 and rounded to fp32."""
    amax = x.abs().max().to(torch.float64)
    return (448.0 / torch.clamp(amax, min=1e-12)).to(torch.float32)


def test_one_division_between_fp32_values_is_narrowed_and_exact():
    x = torch.exp(torch.randn(4096) * 6).reshape(64, 64)
    [(gm, _)] = trace_aten_graphs(_fp8_scale, x)
    assert torch.float64 in _dtypes(gm)
    assert narrow_float64(gm) == 1
    assert torch.float64 not in _dtypes(gm)
    targets = {node.target for node in gm.graph.nodes if node.op == "call_function"}
    assert torch.ops.aten.div.Tensor in targets
    assert torch.ops.aten.reciprocal.default not in targets
    for scale in torch.exp(torch.linspace(-80, 80, 2001)):  # amax over 70 binades: equal bits each time
        sample = torch.full((64, 64), float(scale))
        (narrowed,) = gm(sample)
        assert torch.equal(narrowed, _fp8_scale(sample)), float(scale)


def test_two_rounding_steps_stay_float64():
    def two_steps(x: torch.Tensor) -> torch.Tensor:
        wide = x.sum().to(torch.float64)
        return (wide * 3.0 + 0.1).to(torch.float32)

    [(gm, _)] = trace_aten_graphs(two_steps, torch.randn(8, 8))
    assert narrow_float64(gm) == 0
    assert torch.float64 in _dtypes(gm)


def test_float64_results_leaving_the_graph_stay_float64():
    [(gm, _)] = trace_aten_graphs(lambda x: x.max().to(torch.float64).clamp(min=1.0), torch.randn(8, 8))
    assert narrow_float64(gm) == 0


def _with_constant(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return x * torch.full((), value, dtype=torch.float64).to(torch.float32)

    return scaled


def test_a_float64_constant_fp32_holds_becomes_an_fp32_constant():
    # linalg.pinv's decomposition makes its tolerances so: float64 fulls cast straight to fp32
    x = torch.randn(8, 8)
    [(gm, _)] = trace_aten_graphs(_with_constant(0.5), x)
    assert narrow_float64(gm) == 1
    assert torch.float64 not in _dtypes(gm)
    (narrowed,) = gm(x)
    assert torch.equal(narrowed, _with_constant(0.5)(x))


def test_a_float64_constant_fp32_cannot_hold_stays_float64_in_arithmetic():
    def product(x: torch.Tensor) -> torch.Tensor:  # x * 0.1 rounded once in float64, then to fp32: not fp32's
        return (x.to(torch.float64) * torch.full((), 0.1, dtype=torch.float64)).to(torch.float32)

    [(gm, _)] = trace_aten_graphs(product, torch.randn(8, 8))
    assert narrow_float64(gm) == 0
    assert torch.float64 in _dtypes(gm)


def test_a_float64_constant_only_cast_becomes_the_rounded_fp32_constant():
    # torch.pinverse's rcond: 1e-15 is no fp32 value, but the cast rounds it once, as an fp32 constant does
    def rcond(x: torch.Tensor) -> torch.Tensor:
        return torch.maximum(x, torch.full((), 1e-15, dtype=torch.float64).to(torch.float32))

    x = torch.randn(8, 8) * 1e-15
    [(gm, _)] = trace_aten_graphs(rcond, x)
    assert narrow_float64(gm) == 1
    assert torch.float64 not in _dtypes(gm)
    (narrowed,) = gm(x)
    assert torch.equal(narrowed, rcond(x))


class _NumpyScaled(torch.nn.Module):
    """transformers' CTRL: `inputs_embeds *= np.sqrt(self.d_model_size)`, which Dynamo traces as a float64 square
    root of a tensor constant."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y *= np.sqrt(32)
        return y / np.float64(3.0)


def test_float64_scalars_of_constants_become_numbers_of_their_fp32_readers():
    module, x = _NumpyScaled(), torch.randn(4, 16)
    with torch.no_grad():  # one inference graph (a training forward would return the scalars for its backward)
        [(gm, _)] = trace_aten_graphs(module, x)
    assert torch.float64 in _dtypes(gm)
    assert fold_constant_scalars(gm) == 2
    assert torch.float64 not in _dtypes(gm)
    assert not [node for node in gm.graph.nodes if node.op == "get_attr"]
    with torch.no_grad():
        (folded,) = gm(*module.parameters(), x)  # the graph's inputs: the lifted parameters, then x
        assert torch.equal(folded, module(x))


def test_a_training_step_with_float64_scalars_of_constants_runs_natively():
    import neuron_mlir

    module, x = _NumpyScaled(), torch.randn(4, 16, requires_grad=True)
    reference = copy.deepcopy(module)
    neuron_mlir.reset()
    compiled = torch.compile(module, backend="neuron-mlir")
    compiled(x).square().sum().backward()
    x_reference = x.detach().clone().requires_grad_()
    reference(x_reference).square().sum().backward()
    assert neuron_mlir.stats()["fallback_ops"] == {}
    assert_close_to_torch(x.grad, x_reference.grad)
    assert_close_to_torch(module.linear.weight.grad, reference.linear.weight.grad)


def _sinusoidal_table(height: int, width: int, dim: int) -> torch.Tensor:
    """A 2-d sine/cosine position table computed in float64 and cast to fp32, as D-FINE builds its own."""
    omega = 1.0 / 10000.0 ** (torch.arange(dim // 4, dtype=torch.float64) / (dim // 4))
    rows, columns = torch.meshgrid(
        torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64), indexing="ij"
    )
    by_row, by_column = rows.flatten().outer(omega), columns.flatten().outer(omega)
    return torch.cat([by_row.sin(), by_row.cos(), by_column.sin(), by_column.cos()], dim=1).to(torch.float32)


def test_a_float64_table_of_sizes_alone_is_evaluated_once_and_exact():
    import neuron_mlir

    def embed(x: torch.Tensor) -> torch.Tensor:
        return x + _sinusoidal_table(4, 5, 16)

    x = torch.randn(2, 20, 16)
    neuron_mlir.reset()
    got = torch.compile(embed, backend="neuron-mlir", options={"strict": True})(x)
    assert neuron_mlir.stats()["fallback_ops"] == {}
    assert torch.equal(got, embed(x))  # eager's float64 values, rounded once


def test_a_float64_scalar_of_constants_written_into_fp32_is_folded_exact():
    # VITS's spline writes np.log(np.exp(1 - min_derivative) - 1), computed in float64, into its edge derivatives
    import neuron_mlir

    def edged(x: torch.Tensor) -> torch.Tensor:
        edge = np.log(np.exp(1 - 1e-3) - 1)
        x = torch.nn.functional.pad(x, (1, 1))
        x[..., 0] = edge
        x[..., -1] = edge
        return x * 3

    torch.manual_seed(0)
    x = torch.randn(4, 5, requires_grad=True)
    mirror = x.detach().clone().requires_grad_()
    neuron_mlir.reset()
    got = torch.compile(edged, backend="neuron-mlir", options={"strict": True})(x)
    expected = edged(mirror)
    assert torch.equal(got, expected)  # the scalar rounded once, as copy_ rounds it
    got.sum().backward()
    expected.sum().backward()
    assert x.grad is not None
    assert mirror.grad is not None
    assert torch.equal(x.grad, mirror.grad)
    assert neuron_mlir.stats()["fallback_ops"] == {}
