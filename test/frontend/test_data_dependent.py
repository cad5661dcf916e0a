"""Ops whose output size depends on tensor values, captured in graphs (Dynamo's capture_dynamic_output_shape_ops
and capture_scalar_outputs) and run on the simulated NeuronCore: computed into a buffer of the input's size plus
a count, the valid prefix taken by the host, and what follows compiled for the count each call meets."""

import pytest
import torch
from support import assert_close_to_torch

import neuron_mlir
from neuron_mlir.frontend.compile_graph import NeuronCompileError

pytestmark = pytest.mark.usefixtures("fresh_compiler")


@pytest.fixture(autouse=True)
def _capture_data_dependent_ops():
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        yield


def _compiled(fn):
    return torch.compile(fn, backend="neuron-mlir", options={"strict": True})


def _check(fn, *inputs):
    expected = fn(*inputs)
    actual = _compiled(fn)(*inputs)
    assert_close_to_torch(actual, expected, fn.__name__)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_nonzero_and_where_of_a_condition():
    def positions(x):
        return torch.nonzero(x > 0.2), torch.where(x < -0.5)[1] + 1

    torch.manual_seed(0)
    _check(positions, torch.randn(6, 7))


def test_boolean_indexing_and_masked_select():
    def selected(x, mask):
        return x[mask] * 2, x[:, mask[0]].sum(0), torch.masked_select(x, x > 0)

    torch.manual_seed(1)
    x = torch.randn(5, 6)
    _check(selected, x, x.abs() > 0.7)


def test_unique_with_inverse_and_counts():
    def distinct(x):
        values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        return values * 2, inverse, counts, torch.unique(x[0])

    torch.manual_seed(4)
    _check(distinct, torch.randint(0, 6, (3, 4)).float())


def test_unique_rows_with_inverse_and_counts():
    def distinct_rows(x):
        rows, inverse, counts = torch.unique(x, dim=0, return_inverse=True, return_counts=True)
        return rows * 2, inverse, counts, torch.unique(x, dim=1)

    torch.manual_seed(5)
    _check(distinct_rows, torch.randint(0, 2, (9, 3)))


def test_bincount_reads_its_size_first():
    def histogram(values, weights):
        return torch.bincount(values) + 1, torch.bincount(values, weights, minlength=9) * 2

    compiled = _compiled(histogram)
    weights = torch.linspace(-1.0, 1.0, 6)
    for values in ([1, 4, 4, 0, 2, 4], [0, 0, 0, 0, 0, 0], [3, 1, 4, 1, 5, 9]):
        counted = torch.tensor(values)
        assert_close_to_torch(compiled(counted, weights), histogram(counted, weights), f"histogram({values})")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    # a negative value makes the size read -1: the graph's check of it fails, as eager refuses the value
    with pytest.raises(RuntimeError, match=r"assertion failed for expression u\d+ >= 0"):
        compiled(torch.tensor([1, -2, 0, 0, 0, 0]), weights)


def test_item_sizes_a_tensor():
    def ramp(x):
        count = (x > 0).sum().item()
        return torch.arange(count, dtype=torch.float32) + x.sum()

    torch.manual_seed(2)
    _check(ramp, torch.randn(4, 5))


def test_a_new_count_compiles_what_follows_again():
    def doubled(x):
        return x[x > 0] * 2

    compiled = _compiled(doubled)
    for values in ([1.0, -1.0, 2.0, 3.0], [-1.0, -2.0, -3.0, -4.0], [1.0, 2.0, 3.0, 4.0], [5.0, -1.0, 6.0, 7.0]):
        x = torch.tensor(values)
        assert_close_to_torch(compiled(x), doubled(x), f"doubled({values})")
    assert neuron_mlir.stats()["recompilations"] == 2  # counts 3, 0 and 4; the second 3 is compiled already


def test_repeat_interleave_by_tensor_repeats():
    def spread(x, repeats):
        return torch.repeat_interleave(x, repeats, dim=0) * 2, torch.repeat_interleave(repeats) + 1

    compiled = _compiled(spread)
    x = torch.arange(10.0).reshape(5, 2)
    for repeats in ([1, 0, 2, 3, 1], [0, 0, 0, 0, 0], [2, 2, 0, 1, 2]):
        counts = torch.tensor(repeats)
        assert_close_to_torch(compiled(x, counts), spread(x, counts), f"spread({repeats})")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert stats["recompilations"] == 1  # totals 7, 0 and 7: the last is compiled already
    with pytest.raises(RuntimeError, match="cannot be negative"):
        compiled(x, torch.tensor([3, -1, 0, 0, 1]))


def test_a_negative_pad_read_from_tensor_values_crops_as_in_eager():
    # EnCodec pads its frames by amounts computed from tensors: a negative amount crops, no size is negative
    def padded(x, extra):
        return torch.nn.functional.pad(x, (0, int(extra.sum().item()))) * 2

    compiled = _compiled(padded)
    x = torch.arange(24.0).reshape(2, 12)
    for extra in ([2, 1], [-3, -3], [0, 0]):
        amounts = torch.tensor(extra)
        assert_close_to_torch(compiled(x, amounts), padded(x, amounts), f"padded by {sum(extra)}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_a_reflect_pad_by_amounts_read_from_tensor_values():
    # EnCodec's reflect padding: the compiled region after the reads takes -left and the padded length as inputs
    def padded(x, left, right):
        return torch.nn.functional.pad(x, (int(left.item()), int(right.sum().item())), mode="reflect") * 2

    compiled = _compiled(padded)
    x = torch.arange(24.0).reshape(2, 1, 12)
    for left, right in ((3, [2, 1]), (2, [-3, -1]), (0, [0, 0])):
        amounts = (torch.tensor(left), torch.tensor(right))
        assert_close_to_torch(compiled(x, *amounts), padded(x, *amounts), f"padded by {left}, {sum(right)}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_boolean_indexing_trains():
    def loss(x, weight):
        return (x[x.sum(-1) > 0] @ weight).tanh().sum() + torch.masked_select(x, x > 0.5).square().sum()

    torch.manual_seed(3)
    x, weight = torch.randn(8, 5), torch.randn(5, 3)
    eager = [t.clone().requires_grad_() for t in (x, weight)]
    compiled = [t.clone().requires_grad_() for t in (x, weight)]
    expected, actual = loss(*eager), _compiled(loss)(*compiled)
    expected.backward()
    actual.backward()
    assert_close_to_torch(actual, expected, "loss")
    for name, mine, theirs in zip(("x", "weight"), compiled, eager, strict=True):
        assert_close_to_torch(mine.grad, theirs.grad, f"grad of {name}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_boolean_index_put_of_rows_from_an_earlier_graph():
    # values of a static count, one row per true element of the mask (`x[mask] += y` across a graph break)
    def scattered(x, mask, rows):
        x = x.clone()
        x[mask] = rows * 2
        return x

    torch.manual_seed(5)
    x, mask = torch.randn(4, 6, 3), torch.rand(4, 6) > 0.5
    rows = torch.randn(int(mask.sum()), 3)
    _check(scattered, x, mask, rows)
    _check(scattered, x, mask, torch.randn(1, 3))  # one row broadcast to every true element
    _check(scattered, x, torch.zeros_like(mask), torch.randn(0, 3))  # no true element, no row
    accumulated = torch.compile(
        lambda x, mask, rows: x.index_put((mask,), rows, accumulate=True), backend="neuron-mlir"
    )
    for values in (rows, torch.randn(1, 3)):
        assert_close_to_torch(accumulated(x, mask, values), x.index_put((mask,), values, accumulate=True), "sum")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    static = torch.compile(scattered, backend="neuron-mlir", dynamic=False, options={"strict": True})
    with pytest.raises(Exception, match="shape mismatch"):  # as eager: the count must be the mask's
        static(x, mask, torch.randn(int(mask.sum()) + 1, 3))


def test_an_op_refused_at_the_sizes_of_a_call_is_named():
    def filled(x):
        rows = (x > 0).sum().item()
        grid = torch.zeros(rows, 200)
        return grid.masked_scatter(grid == 0, torch.ones(rows * 200))

    filled_ = _compiled(filled)
    assert_close_to_torch(filled_(torch.ones(3)), filled(torch.ones(3)), "3 rows")
    with pytest.raises(Exception, match=r"masked_scatter cannot be lowered at the sizes of this call") as raised:
        filled_(torch.ones(100))  # 20000 elements: more prefix counts than one tile holds
    error = raised.value if isinstance(raised.value, NeuronCompileError) else raised.value.__cause__
    assert isinstance(error, NeuronCompileError)
    assert "test_data_dependent.py" in str(error)  # the user's source line


def test_tensor_split_by_a_tensor_takes_the_split_points_dynamo_traced():
    # Dynamo traces the sections' value and guards on it: a new value traces (and compiles) again
    def halves_doubled(x, sections):
        return [part * 2.0 for part in torch.tensor_split(x, sections, dim=1)]

    x = torch.randn(3, 7, 2)
    compiled = _compiled(halves_doubled)
    for sections in (torch.tensor(3), torch.tensor(2)):
        actual = compiled(x, sections)
        assert [part.shape[1] for part in actual] == [part.shape[1] for part in halves_doubled(x, sections)]
        assert_close_to_torch(actual, halves_doubled(x, sections), f"tensor_split into {int(sections)}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
