"""Integer reductions and scans through torch.compile(backend="neuron-mlir") are exact: sums, products,
extremes and running sums of int32/int64 (and bool -> int64 counts) whose values and partial results lie far
beyond fp32's 24 significant bits, over the partition axis, the free axis, several and all dims, with keepdim
and row counts that are not multiples of 128. Results are compared with eager bit for bit (`torch.equal`),
never with a tolerance."""

from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _odd_large(shape, dtype=torch.int64, low=-(2**26), high=2**26, seed=0):
    """Values whose sums exceed 2^24 and which are odd, so no fp32 rounding can land on them by chance."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randint(low, high, shape, generator=generator, dtype=torch.int64) | 1).to(dtype)


def _check_exact(fn, *inputs, target: str | None = None):
    expected = fn(*[x.clone() for x in inputs])
    options: dict[str, Any] | None = {"target": target} if target else None
    actual = torch.compile(fn, backend="neuron-mlir", options=options)(*[x.clone() for x in inputs])
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, f"fell back to the CPU: {stats['fallback_ops']}"
    expected, actual = pytree.tree_leaves(expected), pytree.tree_leaves(actual)
    assert len(actual) == len(expected)
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert got.dtype == want.dtype, f"result {index}: dtype {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"result {index}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
        if not torch.equal(got, want):
            wrong = (got != want).nonzero()[0].tolist()
            raise AssertionError(
                f"result {index}: {int((got != want).sum())} of {want.numel()} elements differ; first at {wrong}: "
                f"got {got[tuple(wrong)].item()}, expected {want[tuple(wrong)].item()}"
            )


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=["i64", "i32"])
@pytest.mark.parametrize("target", ["trn2", "trn1"])
def test_full_sum_beyond_two_to_the_24(dtype, target):
    """Every element of a large tensor (all lanes fold a share, then the shares combine) and of a small one."""
    _check_exact(lambda t, u: (t.sum(), u.sum()), _odd_large((300, 513), dtype), _odd_large((7, 5), dtype, seed=1),
                 target=target)  # fmt: skip


@pytest.mark.parametrize(
    ("shape", "dims"),
    [((130, 7), (0,)), ((130, 2100), (1,)), ((5, 300, 9), (0, 2)), ((3, 4, 5), (0, 1, 2)), ((257, 33), (-1,))],
    ids=["partition-axis", "long-rows", "outer-and-inner", "all", "rows-not-multiple-of-128"],
)
@pytest.mark.parametrize("keepdim", [False, True], ids=["", "keepdim"])
def test_sums_and_extremes_over_dims(shape, dims, keepdim):
    x = _odd_large(shape)

    def fn(t):
        return (
            t.sum(dims, keepdim=keepdim), t.amax(dims, keepdim=keepdim), t.amin(dims, keepdim=keepdim),
            t.to(torch.int32).sum(dims, keepdim=keepdim), (t + 2**40).sum(dims, keepdim=keepdim),
        )  # fmt: skip

    _check_exact(fn, x)


def test_int32_sums_widen_to_int64_and_wrap_only_in_int64():
    """torch sums int32 into int64: totals beyond 2^31 are exact; an explicit int32 result wraps as torch's."""
    x = _odd_large((260, 300), torch.int32, low=2**30, high=2**31 - 1)
    _check_exact(lambda t: (t.sum(), t.sum(1), t.sum(0, dtype=torch.int32), t.sum(dtype=torch.int32)), x)


def test_products_wrap_as_torch_does():
    x = _odd_large((130, 9), low=-3000, high=3000)
    _check_exact(lambda t: (t.prod(1), t.prod(0, keepdim=True), t[:4, :4].prod(), t.to(torch.int32).prod(1)), x)


def test_bool_and_narrow_integer_sums():
    torch.manual_seed(3)
    x = torch.randn(300, 700)
    small = torch.randint(-128, 127, (129, 2100), dtype=torch.int8)
    _check_exact(
        lambda t, s: ((t > 0).sum(), (t > 0).sum(1), (t > 0).sum(0, keepdim=True), s.sum(1), s.sum()), x, small
    )


def test_narrow_chunks_fold_in_int32_and_totals_in_int64():
    """A chunk of int16 or uint8 values sums in int32 (it cannot overflow there) and the chunks' columns add in
    int64: extreme values over rows longer than a chunk give totals far beyond 2^24."""
    wide = torch.full((129, 4200), 32767, dtype=torch.int16)
    wide[5] = -32768
    bytes_ = torch.full((3, 300, 701), 255, dtype=torch.uint8)
    _check_exact(lambda t, u: (t.sum(1), t.sum(), t.amax(1), t.amin(), u.sum(), u.sum((0, 2)), u.amax()), wide, bytes_)


def test_extremes_of_values_beyond_two_to_the_24():
    """Neighbouring large integers round to the same fp32: only an exact comparison tells them apart."""
    x = torch.full((130, 40), 2**24 + 1, dtype=torch.int64)
    x[7, 13] = 2**24 + 3
    x[100, 2] = 2**24 - 1
    _check_exact(lambda t: (t.amax(1), t.amin(0), t.max(), t.min(), t.to(torch.int32).amax(0)), x)


@pytest.mark.parametrize(
    ("shape", "dim"),
    [((300, 7), 0), ((3, 260, 600), 1), ((5, 2500), -1), ((257,), 0), ((130, 3000), 1)],
    ids=["partition-dim", "middle-dim", "last-dim-over-chunks", "1d", "rows-not-multiple-of-128"],
)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=["i64", "i32"])
def test_cumsum_beyond_two_to_the_24(shape, dim, dtype):
    x = _odd_large(shape, dtype)
    _check_exact(lambda t: torch.cumsum(t, dim), x)


def test_cumsum_of_bools_and_explicit_int32_results():
    torch.manual_seed(4)
    x = torch.randn(40, 3000)
    y = _odd_large((6, 50), torch.int32, low=2**29, high=2**30)
    z = torch.full((5, 3000), 32767, dtype=torch.int16)  # chunks scan in int32, the carry grows past 2^24 in int64
    _check_exact(
        lambda t, u, v: (torch.cumsum(t > 0, 1), torch.cumsum(u, 1, dtype=torch.int32), torch.cumsum(v, 1)), x, y, z
    )


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=["i64", "i32"])
def test_arg_reductions_compare_exactly(dtype):
    """2^24 and 2^24 + 1 are one fp32 value: only an exact comparison finds the later, larger one; ties still
    give the first index, also across chunks of rows longer than one tile."""
    x = torch.full((130, 40), 2**24, dtype=torch.int64)
    x[3, 17] = 2**24 + 1
    x[4, 5] = 2**24 - 1
    x[100, 30], x[100, 31] = 2**24 + 1, 2**24 + 1
    long = torch.full((3, 5000), -(2**25), dtype=torch.int64)
    long[0, 4100] = -(2**25) + 1
    long[1, 10], long[1, 3000] = 2**25 + 3, 2**25 + 3
    long[2, 2500] = -(2**25) - 1
    _check_exact(
        lambda t, u: (t.argmax(1), t.argmin(1), t.max(1), t.min(0, keepdim=True), t.argmax(), u.argmax(1),
                      u.argmin(1), u.max(1)),
        x.to(dtype), long.to(dtype),
    )  # fmt: skip
