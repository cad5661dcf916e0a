"""Ops whose result size depends on their values, run on the device as a program of the bound's size cut to the
count: results equal to the CPU's exactly (values, order, shape and dtype), empty and full results included, and
no op on the host."""

from collections.abc import Callable
from typing import Any

import pytest
import torch


@pytest.fixture
def compiled(monkeypatch, fresh_eager):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    monkeypatch.delenv("NEURON_MLIR_STRICT", raising=False)
    return fresh_eager


def _assert_same(actual, expected, what):
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected), what
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert got.device.type == "neuron", f"{what}: result {index} on {got.device}"
        got = got.cpu()
        assert got.dtype == want.dtype, f"{what}: result {index}: {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"{what}: result {index}: {got}, expected {want}"
        assert torch.equal(got, want), f"{what}: result {index}: {got}, expected {want}"


_VALUES = torch.tensor([[0.0, 1.5, -2.0, 0.0], [3.0, 0.0, 0.0, 1.5], [1.5, 2.0, 0.0, -2.0]])

CASES: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "nonzero": (torch.nonzero, (_VALUES,)),
    "nonzero of nothing nonzero": (torch.nonzero, (torch.zeros(2, 3),)),
    "nonzero of a 0-d tensor": (torch.nonzero, (torch.tensor(2.0),)),
    "argwhere of integers": (torch.argwhere, (torch.tensor([[0, 4], [7, 0], [0, 0]]),)),
    "masked_select": (torch.masked_select, (_VALUES, _VALUES > 0)),
    "masked_select, every element": (torch.masked_select, (_VALUES, torch.ones(3, 4, dtype=torch.bool))),
    "masked_select, broadcast mask": (torch.masked_select, (_VALUES, torch.tensor([True, False, False, True]))),
    "boolean indexing": (lambda x, m: x[m], (_VALUES, _VALUES.sum(1) > 0)),
    "boolean indexing of a later dimension": (lambda x, m: x[:, m], (_VALUES, _VALUES[0] != 0)),
    "boolean indexing by a strided mask": (lambda x, m: x[m[:, 0]], (_VALUES, _VALUES != 0)),
    "unique": (
        lambda x: torch.unique(x, return_inverse=True, return_counts=True),
        (torch.tensor([[3, 1, 3], [-2, 1, 7]]),),
    ),
    "unique, unsorted": (lambda x: torch.unique(x, sorted=False), (_VALUES,)),
    "unique_consecutive": (
        lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
        (torch.tensor([2.0, 2.0, -1.0, 2.0, 5.0, 5.0, 5.0]),),
    ),
    "unique of no elements": (lambda x: torch.unique(x, return_counts=True), (torch.zeros(0, 3),)),
}


@pytest.mark.parametrize("case", CASES)
def test_data_dependent_results_equal_the_cpu_and_run_natively(compiled, case):
    function, arguments = CASES[case]
    expected = function(*arguments)
    actual = function(*[a.to("neuron") for a in arguments])
    _assert_same(actual, expected, case)
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_one_program_serves_every_count(compiled):
    # the program's shapes are the bound's: another number of true elements reuses it
    results = [torch.nonzero(torch.tensor([[0.0, 1.0], [0.0, 0.0]]).fill_(v).to("neuron")) for v in (0.0, 1.0)]
    assert [tuple(r.shape) for r in results] == [(0, 2), (4, 2)]
    assert compiled.EAGER_STATS.compiled_signatures == 1
    assert compiled.EAGER_STATS.native_ops["aten.nonzero.default"] == 2


def test_a_dtype_the_core_cannot_hold_runs_on_the_host_with_the_cpus_result(compiled):
    # float64 has no storage type on the core: the masked index is refused with a warning, not an error
    values = _VALUES.double()
    with pytest.warns(UserWarning, match=r"aten\.index\.Tensor: float64 is not supported"):
        result = values.to("neuron")[(values > 0).to("neuron")]
    assert torch.equal(result.cpu(), values[values > 0])
