"""Reductions and softmax through torch.compile(backend="neuron-mlir") against eager: along the partition axis,
the free axis, several and all dims, with and without keepdim; arg-reductions with ties, NaN and rows longer
than one free tile; variances; empty and 0-d inputs."""

import pytest
import torch
from support import assert_close_to_golden, assert_close_to_torch
from support.compiled import check_compiled

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _folds(x, dims, keepdim):
    return (
        x.sum(dims, keepdim=keepdim), x.mean(dims, keepdim=keepdim), x.amax(dims, keepdim=keepdim),
        x.amin(dims, keepdim=keepdim), (x * 0.5).prod(dims[0], keepdim=keepdim), (x > 0).any(dims[0], keepdim=keepdim),
        x.var(dims, keepdim=keepdim), x.std(dims, correction=0, keepdim=keepdim),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("shape", "dims"),
    [
        ((130, 7), (0,)),
        ((1100, 70), (0,)),
        ((130, 7), (1,)),
        ((5, 300, 9), (0, 2)),
        ((4, 2100), (-1,)),
        ((3, 4, 5), (0, 1, 2)),
    ],
    ids=["partition-axis", "partition-axis-groups-of-tiles", "free-axis", "outer-and-inner", "long-rows", "all"],
)
@pytest.mark.parametrize("keepdim", [False, True], ids=["", "keepdim"])
def test_reductions_over_any_dims(shape, dims, keepdim):
    torch.manual_seed(0)
    check_compiled(lambda t: _folds(t, dims, keepdim), torch.randn(shape))


@pytest.mark.parametrize(
    ("shape", "dims"),
    [
        ((1, 300, 96), (0,)),
        ((300, 1, 96), (1,)),
        ((2, 300, 96), (0,)),
        ((2, 3, 40, 50), (0, 1)),
        ((8, 130, 7), (0,)),
        ((23, 130, 7), (0,)),
        ((2, 32, 3, 50), (0, 1)),
    ],
    ids=["size-1-outer", "size-1-middle", "batch-of-2", "six-slabs", "eight-slabs", "three-passes", "64-slabs"],
)
@pytest.mark.parametrize("keepdim", [False, True], ids=["", "keepdim"])
def test_few_reduced_elements_fold_whole_slabs(shape, dims, keepdim):
    """Up to 64 reduced elements per kept one fold elementwise, slab by slab (eight per pass, later passes
    folding the partial result with the next seven); NaN and infinities come through the extremes."""
    torch.manual_seed(0)
    x = torch.randn(shape)
    x.view(-1)[7] = float("nan")
    x.view(-1)[-3] = float("-inf")
    check_compiled(lambda t: _folds(t, dims, keepdim)[:5], x)
    check_compiled(lambda t: _folds(t, dims, keepdim)[:4], x.bfloat16())


def test_reductions_over_size_1_dims_of_strided_and_integer_inputs():
    """One element per kept one: a copy, whatever the source's strides and dtype (int64 beyond fp32's integers)."""
    x = torch.randn(96, 1, 300)
    big = torch.randint(-(2**40), 2**40, (1, 70, 33))
    check_compiled(
        lambda t, i: (
            t.transpose(0, 2).sum(1),
            t.amax(1, keepdim=True),
            i.sum(0),
            i.to(torch.int32).sum(0),
            i.sum(0).float(),
        ),
        x,
        big,
    )


def test_full_reductions_and_0d():
    check_compiled(
        lambda x, s: (x.sum(), x.max(), x.min(), x.prod(), x.any(), x.all(), x.mean(), s.sum(), s.amax(0), s.argmax()),
        torch.randn(37, 11) * 0.3 + 1,
        torch.tensor(2.5),
    )


@pytest.mark.parametrize("target", ["trn2", "trn1"])
def test_full_reductions_of_large_tensors_on_every_lane(target):
    """All lanes fold a share and TensorE combines them (on trn1, whose transposes are not bit exact, only
    sums take that path); infinities and NaN come through."""
    x = torch.randn(300, 70)
    x[5, 6] = float("inf")
    y = torch.randn(5000)
    y[77] = float("nan")

    def fn(t, u):
        return t.sum(), t.mean(), t.amax(), t.min(), (t > 3).any(), t.var(), u.sum(), u.max()

    expected = fn(x, y)
    actual = torch.compile(fn, backend="neuron-mlir", options={"target": target})(x, y)
    for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert_close_to_torch(a, e, f"result {index}")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_largest_magnitudes(dtype):
    """max(abs(x)), fp8 scaling's amax, folds magnitudes as it loads (one norm): a negative extreme, NaN, and
    per-row maxima."""
    torch.manual_seed(3)
    x = torch.randn(300, 70).to(dtype)
    x[17, 3] = -40.0
    y = torch.randn(5000).to(dtype)
    y[77] = float("nan")
    check_compiled(lambda t, u: (t.abs().max(), t.abs().amax(1, keepdim=True), u.abs().max()), x, y)


def test_empty_reductions_give_the_identity():
    check_compiled(lambda x: (x.sum(1), x.prod(1), x.mean(1), x.any(1)), torch.randn(4, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=["f32", "bf16", "i32"])
def test_arg_reductions_take_the_first_extreme(dtype):
    torch.manual_seed(1)
    x = (torch.randn(130, 6) * 3).to(dtype)
    x[0] = torch.tensor([1, 5, 5, 2, 5, 0]).to(dtype)  # ties: the first index wins
    check_compiled(
        lambda t: (t.argmax(1), t.argmin(0), t.max(1), t.min(0, keepdim=True), t.argmax(), t.argmin(1, keepdim=True)),
        x,
    )


def test_arg_reductions_with_nan_and_rows_longer_than_a_tile():
    torch.manual_seed(2)
    x = torch.randn(3, 5000)
    x[1, 4100] = 100.0  # the maximum in the last chunk
    x[2, 10], x[2, 3000] = float("nan"), float("nan")  # NaN is the extreme; the first one
    check_compiled(lambda t: (t.argmax(1), t.max(1), t.argmin(1)), x)


def test_variance_corrections():
    torch.manual_seed(3)
    x = torch.randn(9, 130)
    check_compiled(
        lambda t: (
            t.var(1, correction=0),
            t.var(0, correction=2),
            torch.var_mean(t, 1),
            torch.std_mean(t, 0),
            t[:1].var(0),
        ),
        x,
    )


@pytest.mark.parametrize(("shape", "dim"), [((130, 33), -1), ((4, 2100, 3), 1), ((130, 5), 0)], ids=str)
def test_softmax_and_log_softmax(shape, dim):
    torch.manual_seed(4)
    check_compiled(
        lambda t: (torch.softmax(t, dim), torch.log_softmax(t, dim), torch.softmax(-t, dim)), torch.randn(shape) * 4
    )


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((7, 40), torch.float32), ((130, 300), torch.bfloat16), ((3, 20000), torch.float32)],
    ids=["small", "bf16", "long-rows"],
)
def test_softmax_backward(shape, dtype):
    """_softmax_backward_data and _log_softmax_backward_data (kept whole): rows along the last and the first
    dimension; rows longer than one loop body's SBUF share take a pass for the sum and one that writes."""
    torch.manual_seed(5)
    # scores spread enough that a few entries of each row dominate: the gradients are then large against the
    # tolerance's absolute part
    x, weights = (torch.randn(shape) * 4).to(dtype), torch.randn(shape).to(dtype)

    def loss(s, t, w):
        return (torch.softmax(s, -1) * w).float().sum() + (torch.log_softmax(t, 0) * w).float().sum()

    grads = []
    for function in (loss, torch.compile(loss, backend="neuron-mlir")):
        leaves = [x.clone().requires_grad_(), x.clone().requires_grad_()]
        function(leaves[0], leaves[1], weights).backward()
        grads.append([leaf.grad for leaf in leaves])
    assert_close_to_torch(grads[1][0], grads[0][0], "softmax gradient")
    assert_close_to_torch(grads[1][1], grads[0][1], "log_softmax gradient")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("width", [512, 1024, 2048, 4096])
def test_softmax_backward_at_real_widths(width, dtype):
    """Softmax and log-softmax backward over row groups (several rows per partition per DMA) at the widths of
    attention scores and vocabularies, with rows that fill whole groups, then whole 128-row tiles, then a partial
    tile: the gradients within a small multiple of eager's own error from float64."""
    rows = 4 * 128 + 128 + 19
    torch.manual_seed(6)
    x, weights = torch.randn(rows, width) * 4, torch.randn(rows, width)

    def loss(s, t, w):
        return (torch.softmax(s, -1) * w).sum() + (torch.log_softmax(t, -1) * w).sum()

    runs = []
    for precision, function in (
        (dtype, loss),
        (dtype, torch.compile(loss, backend="neuron-mlir")),
        (torch.float64, loss),
    ):
        leaves = [x.to(dtype).to(precision).clone().requires_grad_() for _ in range(2)]
        function(leaves[0], leaves[1], weights.to(dtype).to(precision)).backward()
        runs.append([leaf.grad for leaf in leaves])
    for name, eager, ours, golden in zip(("softmax", "log_softmax"), *runs, strict=True):
        assert_close_to_golden(ours, eager, golden, f"{name} gradient (width {width})")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_vector_norms():
    torch.manual_seed(6)
    x = torch.randn(9, 130)
    check_compiled(
        lambda t: (
            torch.linalg.vector_norm(t, dim=1), torch.linalg.vector_norm(t, 1, dim=0), torch.linalg.vector_norm(t, float("inf")),
            torch.linalg.vector_norm(t, 0, dim=1), torch.linalg.vector_norm(t, 3.5, dim=1, keepdim=True),
            torch.nn.functional.normalize(t, dim=1),
        ),
        x,
    )  # fmt: skip
