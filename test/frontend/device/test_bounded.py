"""Ops whose result size depends on their values, run on the device as a program of the bound's size cut to the
count, or count first (`repeat_interleave` by a tensor): results equal to the CPU's exactly (values, order, shape
and dtype), empty and full results included, and no op on the host."""

import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from support import REPO, assert_close_to_torch

sys.path.insert(0, str(REPO / "examples"))
from models.routing import route_tokens


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
    # past 256 elements the padded positions are scattered rather than searched
    "nonzero of a mask past the searched sizes": (torch.nonzero, (torch.arange(400).reshape(20, 20) % 7 == 3,)),
    "masked_select past the searched sizes": (
        torch.masked_select,
        (torch.arange(300.0).reshape(3, 100), torch.arange(300).reshape(3, 100) % 3 == 0),
    ),
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
    "torch._unique": (lambda x: torch._unique(x, return_inverse=True), (torch.tensor([[3, 1, 3], [-2, 1, 7]]),)),
    "unique rows": (
        lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True),
        (torch.tensor([[1, 2], [0, 1], [1, 2], [0, 3], [0, 1]]),),
    ),
    "unique slices of the last dimension": (
        lambda x: torch.unique(x, dim=-1, return_inverse=True, return_counts=True),
        (torch.tensor([[[1, 0, 1], [2, 2, 2]], [[3, 4, 3], [0, 0, 0]]]),),
    ),
    "unique float rows": (lambda x: torch.unique(x, dim=0), (_VALUES[[2, 0, 2, 1]],)),
    "unique boolean columns": (
        lambda x: torch.unique(x, dim=1, return_counts=True),
        (torch.tensor([[True, False, True, True], [False, False, False, True]]),),
    ),
    "unique bfloat16 rows": (lambda x: torch.unique(x, dim=0, return_inverse=True), (_VALUES[[1, 1, 0]].bfloat16(),)),
    "unique_consecutive rows": (
        lambda x: torch.unique_consecutive(x, dim=0, return_inverse=True, return_counts=True),
        (torch.tensor([[1, 2], [1, 2], [0, 1], [1, 2], [1, 2], [1, 2]]),),
    ),
    "unique_consecutive columns": (lambda x: torch.unique_consecutive(x, dim=1), (_VALUES[:, [0, 0, 1, 3, 3]],)),
}


@pytest.mark.parametrize("case", CASES)
def test_data_dependent_results_equal_the_cpu_and_run_natively(compiled, case):
    function, arguments = CASES[case]
    expected = function(*arguments)
    actual = function(*[a.to("neuron") for a in arguments])
    _assert_same(actual, expected, case)
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def _assign(x, mask, values):
    x[mask] = values
    return x


def _assign_columns(x, mask, values):
    x[:, mask] = values
    return x


def _add_at(x, mask, values):
    x[mask] += values
    return x


WRITE_CASES: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "x[mask] = values": (_assign, (_VALUES, _VALUES > 0, -torch.arange(5.0))),
    "x[mask] = one value": (_assign, (_VALUES, _VALUES > 0, torch.tensor([7.0]))),
    "x[mask] = no values": (_assign, (_VALUES, _VALUES > 5, torch.zeros(0))),
    "x[mask] = rows": (_assign, (_VALUES, torch.tensor([True, False, True]), -torch.ones(2, 4))),
    "x[:, mask] = columns": (_assign_columns, (_VALUES, _VALUES[0] != 0, torch.arange(6.0).reshape(3, 2))),
    "x[mask] += values": (_add_at, (_VALUES, _VALUES < 0, torch.tensor([10.0, 20.0]))),
    "integers, index_put_ accumulating": (
        lambda x, m, v: x.index_put_((m,), v, accumulate=True),
        (torch.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4) % 5 == 0, torch.tensor([1, 2, 3])),
    ),
}


@pytest.mark.parametrize("case", WRITE_CASES)
def test_writes_through_a_mask_equal_the_cpu_and_run_natively(compiled, case):
    # the values have as many rows as the mask has true elements: a size the call fixes, so a program of static
    # shapes scatters them, and checks on the core that the counts agree
    function, arguments = WRITE_CASES[case]
    expected = function(*[a.clone() for a in arguments])
    actual = function(*[a.to("neuron") for a in arguments])
    _assert_same(actual, expected, case)
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_a_write_of_too_few_values_through_a_mask_is_an_error(compiled):
    with pytest.raises(RuntimeError, match="shape mismatch"):
        _assign(_VALUES.clone(), _VALUES > 0, torch.ones(3))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        _assign(_VALUES.to("neuron"), (_VALUES > 0).to("neuron"), torch.ones(3).to("neuron"))


def test_unique_slices_holding_nans_are_distinct_in_the_cpus_order(compiled):
    # a NaN equals nothing, and an element beside a NaN decides nothing of the order: the CPU's comparison
    nan = float("nan")
    values = torch.tensor([[nan, 1.0], [0.0, 2.0], [nan, 1.0], [0.0, 2.0], [0.0, nan]])
    expected = torch.unique(values, dim=0, return_inverse=True, return_counts=True)
    actual = torch.unique(values.to("neuron"), dim=0, return_inverse=True, return_counts=True)
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        got = got.cpu()
        assert got.shape == want.shape, f"result {index}: {got}, expected {want}"
        assert torch.equal(got.isnan(), want.isnan()), f"result {index}: {got}, expected {want}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {index}: {got}, expected {want}"
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_a_data_dependent_op_joins_the_pending_region(compiled, monkeypatch):
    # the ops before it and its program at the bound run as one region, whose run the count's read makes
    from neuron_mlir.frontend.device import region

    monkeypatch.setenv("NEURON_MLIR_DEFER", "1")
    x = torch.tensor([[0.5, -1.0, 3.0], [2.0, 0.0, -4.0]])
    region.flush()
    for _ in range(2):  # the second call's region is compiled already
        before = dict(region.REGION_STATS)
        actual = torch.nonzero(x.to("neuron") * 2 > 0)
        ran = {key: region.REGION_STATS[key] - before[key] for key in ("regions_run", "region_ops")}
        assert ran == {"regions_run": 1, "region_ops": 3}, ran  # the product, the comparison, the nonzero
        _assert_same(actual, torch.nonzero(x * 2 > 0), "nonzero of a pending comparison")
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


_ROWS = torch.arange(12.0).reshape(3, 4)

REPEAT_CASES: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "rows of a 2-d input": (lambda x, r: torch.repeat_interleave(x, r, dim=0), (_ROWS, torch.tensor([1, 0, 2]))),
    "columns by int32 repeats": (
        lambda x, r: x.repeat_interleave(r, dim=1),
        (_ROWS, torch.tensor([2, 0, 1, 3], dtype=torch.int32)),
    ),
    "a 3-d bfloat16 input": (
        lambda x, r: torch.repeat_interleave(x, r, dim=1),
        (torch.linspace(-2, 2, 24).reshape(2, 3, 4).bfloat16(), torch.tensor([3, 1, 0])),
    ),
    "a 3-d integer input, last dimension": (
        lambda x, r: torch.repeat_interleave(x, r, dim=-1),
        (torch.arange(24).reshape(2, 3, 4), torch.tensor([0, 2, 1, 1])),
    ),
    "flattened (dim=None)": (torch.repeat_interleave, (_ROWS, torch.arange(12) % 3)),
    "a 0-d repeat": (lambda x, r: torch.repeat_interleave(x, r, dim=1), (_ROWS, torch.tensor(2))),
    "a 1-element repeat": (lambda x, r: torch.repeat_interleave(x, r, dim=0), (_ROWS, torch.tensor([3]))),
    "every repeat 0": (lambda x, r: torch.repeat_interleave(x, r, dim=0), (_ROWS, torch.zeros(3, dtype=torch.int64))),
    "output_size given": (
        lambda x, r: torch.repeat_interleave(x, r, dim=0, output_size=5),
        (_ROWS, torch.tensor([4, 0, 1])),
    ),
    "the index form": (torch.repeat_interleave, (torch.tensor([2, 0, 3, 1]),)),
    "the index form, int32": (torch.repeat_interleave, (torch.tensor([0, 5, 1], dtype=torch.int32),)),
    "the index form, no repeats": (torch.repeat_interleave, (torch.zeros(0, dtype=torch.int64),)),
    "the index form past the searched sizes": (torch.repeat_interleave, (torch.arange(300) % 5,)),
}


@pytest.mark.parametrize("case", REPEAT_CASES)
def test_repeat_interleave_by_tensor_repeats_runs_natively(compiled, case):
    function, arguments = REPEAT_CASES[case]
    expected = function(*arguments)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no refusal warned
        actual = function(*[a.to("neuron") for a in arguments])
    _assert_same(actual, expected, case)
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops
    assert compiled.EAGER_STATS.native_ops["aten.repeat_interleave.Tensor"] == 1


def test_a_negative_repeat_is_pytorchs_error(compiled):
    repeats = torch.tensor([2, -1, 3])
    with pytest.raises(RuntimeError, match=r"^repeats can not be negative$"):
        torch.repeat_interleave(repeats)
    with pytest.raises(RuntimeError, match=r"^repeats can not be negative$"):
        torch.repeat_interleave(torch.ones(3, 2).to("neuron"), repeats.to("neuron"), dim=0)
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


@pytest.mark.parametrize(
    ("repeats", "error", "message"),
    [
        (torch.tensor([1.0, 2.0]), NotImplementedError, r"not implemented for 'Float'"),
        (torch.tensor([[1, 2]]), RuntimeError, r"^repeat_interleave only accept 1D vector as repeat$"),
    ],
    ids=["float repeats", "2-d repeats"],
)
def test_repeats_the_cpu_refuses_raise_its_error(compiled, repeats, error, message):
    with pytest.raises(error, match=message):
        torch.repeat_interleave(repeats)
    with pytest.raises(error, match=message):
        torch.repeat_interleave(repeats.to("neuron"))


_BINS = torch.tensor([1, 3, 3, 0, 7, 3, 1])

BINCOUNT_CASES: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "counts": (torch.bincount, (_BINS,)),
    "counts of int32 values, at least minlength": (lambda v: torch.bincount(v, minlength=12), (_BINS.int(),)),
    "counts of uint8 values": (torch.bincount, (_BINS.to(torch.uint8),)),
    "float32 weights": (torch.bincount, (_BINS, torch.linspace(-1, 2, 7))),
    "float32 weights by keyword": (lambda v, w: torch.bincount(v, weights=w, minlength=2), (_BINS, torch.rand(7))),
    "one value, past the searched sizes": (torch.bincount, (torch.full((40,), 700),)),
    "no values, minlength": (lambda v: torch.bincount(v, minlength=4), (torch.zeros(0, dtype=torch.int64),)),
}


@pytest.mark.parametrize("case", BINCOUNT_CASES)
def test_bincount_runs_natively_count_first(compiled, case):
    # the result is as long as the largest value and one: the device computes that, the host reads it
    function, arguments = BINCOUNT_CASES[case]
    expected = function(*arguments)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        actual = function(*[a.to("neuron") for a in arguments])
    assert actual.device.type == "neuron"
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), (actual, expected)
    assert_close_to_torch(actual.cpu(), expected, case)  # weights' sums in another order: within float32's
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_bincount_of_a_negative_value_is_pytorchs_error(compiled):
    values = torch.tensor([2, -1, 0])
    with pytest.raises(RuntimeError, match=r"^bincount only supports 1-d non-negative integral inputs\.$"):
        torch.bincount(values)
    with pytest.raises(RuntimeError, match=r"^bincount only supports 1-d non-negative integral inputs\.$"):
        torch.bincount(values.to("neuron"))
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_repeat_interleave_trains_through_its_input(compiled):
    # the gradient of the repeated rows is their segment sum (index_select's backward), rows repeated 0 times none
    torch.manual_seed(0)
    x, weight, repeats = torch.randn(5, 3), torch.randn(8, 3), torch.tensor([2, 0, 3, 1, 2])
    on_cpu = x.clone().requires_grad_()
    (torch.repeat_interleave(on_cpu, repeats, dim=0) * weight).square().sum().backward()
    on_device = x.to("neuron").requires_grad_()
    (torch.repeat_interleave(on_device, repeats.to("neuron"), dim=0) * weight.to("neuron")).square().sum().backward()
    assert on_device.grad is not None
    assert_close_to_torch(on_device.grad.cpu(), on_cpu.grad, "x.grad")
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_sizes_share_a_program_per_bucket(compiled, monkeypatch):
    # one count program for the repeats' shape, and one program of indices per power-of-two bucket of the sum:
    # sums of 1 to 40 need buckets 8, 16, 32 and 64, not one program per sum
    monkeypatch.setenv("NEURON_MLIR_DEFER", "0")
    for total in range(1, 41):
        repeats = torch.tensor([total // 2, 0, total - total // 2])
        _assert_same(torch.repeat_interleave(repeats.to("neuron")), torch.repeat_interleave(repeats), f"sum {total}")
    assert compiled.EAGER_STATS.compiled_signatures == 1 + 4
    assert compiled.EAGER_STATS.native_ops["aten.repeat_interleave.Tensor"] == 40


def _count_calls() -> int:
    from neuron_mlir.frontend.device import sources

    return sum(entry.calls for (name, _), entry in sources.EAGER_TIMES.items() if name.endswith(" (count)"))


def test_output_size_needs_no_count(compiled):
    # the user's size is the result's: no count program runs, so the host reads nothing
    repeats = torch.tensor([1, 3, 0, 2])
    actual = torch.repeat_interleave(repeats.to("neuron"), output_size=6)
    _assert_same(actual, torch.repeat_interleave(repeats, output_size=6), "output_size=6")
    assert _count_calls() == 0
    assert compiled.EAGER_STATS.compiled_signatures == 1
    torch.repeat_interleave(repeats.to("neuron"))  # without it, the count program runs first
    assert _count_calls() == 1


def test_the_count_is_reported_apart_from_the_result(compiled, monkeypatch):
    from neuron_mlir.frontend.device import sources

    monkeypatch.setenv("NEURON_MLIR_DEFER", "0")  # each program's time on its line as it runs
    repeats = torch.tensor([3, 0, 5]).to("neuron")  # a sum of 8, a bucket: no cut, whose copy is timed apart
    torch.repeat_interleave(repeats)
    sources.reset()
    stream = torch.get_device_module("neuron").current_stream()
    before = stream.simulated_ns
    torch.repeat_interleave(repeats)
    entries = {name: entry for (name, _), entry in sources.EAGER_TIMES.items()}
    assert sorted(entries) == ["aten.repeat_interleave.Tensor", "aten.repeat_interleave.Tensor (count)"]
    assert [(entry.calls, entry.host_calls) for entry in entries.values()] == [(1, 0), (1, 0)]
    total = sum(entry.simulated_ns for entry in entries.values())
    assert total == pytest.approx(stream.simulated_ns - before)  # the count's and the indices' programs
    assert compiled.EAGER_STATS.native_ops["aten.repeat_interleave.Tensor"] == 2  # a call each


def _route(x, gate, experts):
    return route_tokens(x, gate, experts)


def test_moe_routing_trains_on_the_device(compiled):
    torch.manual_seed(0)
    parameters = [torch.randn(16, 8), torch.randn(8, 4), torch.randn(4, 8, 6) / 3]
    on_cpu = [p.clone().requires_grad_() for p in parameters]
    on_device = [p.to("neuron").requires_grad_() for p in parameters]
    expected, actual = _route(*on_cpu), _route(*on_device)
    assert_close_to_torch(actual.cpu(), expected, "routed rows")
    expected.square().sum().backward()
    actual.square().sum().backward()
    for name, mine, theirs in zip(("x", "gate", "experts"), on_device, on_cpu, strict=True):
        assert mine.grad is not None
        assert theirs.grad is not None
        assert_close_to_torch(mine.grad.cpu(), theirs.grad, f"grad of {name}")
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops
