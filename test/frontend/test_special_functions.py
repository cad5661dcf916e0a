"""Special functions the frontend decomposes into natively lowered ops: eager's fp32 values over each function's
whole domain (poles, signed zeros, infinities, arguments from 1e-30 to 1e30), and graphs without CPU fallback.

The domain sweeps evaluate the decompositions on the CPU, op for op what the compiled graph computes, so that
~10^4 points per function cost milliseconds; the compiled checks run a few of them through the backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import pytest
import torch
from support import assert_close_to_golden
from support.compiled import run_compiled

import neuron_mlir
from neuron_mlir.frontend import special_functions as special
from neuron_mlir.frontend.tensors import to_numpy
from neuron_mlir.ir.semantics.compare import GOLDEN_FACTOR, GOLDEN_FLOOR_ULPS, pointwise_mismatch, tolerance

SPECIAL_VALUES = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, 2.0, 3.0, 0.5, 8.0, 5.0, 2.0])


def _real_line() -> torch.Tensor:
    """Both signs of 1e-30 ... 1e30 by decades, -40 ... 40 densely (every integer, the poles, included), a few
    fp32 steps either side of each integer and the special values."""
    decades = torch.logspace(-30, 30, 2000)
    near = torch.linspace(0.0, 40.0, 2001)
    integers = torch.arange(0.0, 41.0)
    beside = torch.cat([integers.nextafter(integers + 1), integers.nextafter(integers - 1), integers + 1e-5])
    # no subnormals: eager's kernels disagree with themselves there (K0 finite but exp(x) K0(x) infinite at 1e-45)
    beside = beside[beside.abs() >= torch.finfo(torch.float32).tiny]
    half_integers = torch.tensor([2.0**22 + 0.5, 5e6 + 0.5, 2.0**23 - 0.5])
    positive = torch.cat([decades, near, beside, half_integers, SPECIAL_VALUES])
    return torch.cat([positive, -positive, torch.linspace(-40.0, 0.0, 2000) + 0.25])


REAL_LINE = _real_line()


def _unit_interval_with_tails(low: float) -> torch.Tensor:
    """[low, 1] densely, the tails towards 0 and 1 by decades down to 1e-38 (and 6e-8 below 1), and outside."""
    dense = torch.linspace(low, 1.0, 6001)
    to_zero = torch.logspace(-38, -1, 2000)
    to_one = 1.0 - torch.logspace(math.log10(6e-8), -1, 1000)
    edges = torch.tensor([0.0, -0.0, 1.0, -1.0, 1.5, -1.5, math.inf, -math.inf, math.nan])
    points = torch.cat([dense, to_zero, to_one, edges])
    return torch.cat([points, -points]) if low < 0 else points


# name: (eager, decomposition, points); log_ndtr, which core ATen decomposes through erfcx, is checked compiled
UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor], torch.Tensor]] = {
    "lgamma": (torch.lgamma, special.lgamma, REAL_LINE),
    "digamma": (torch.digamma, special.digamma, REAL_LINE),
    "erfinv": (torch.erfinv, special.erfinv, _unit_interval_with_tails(-1.0)),
    "ndtri": (torch.special.ndtri, special.ndtri, _unit_interval_with_tails(0.0)),
    "erfcx": (torch.special.erfcx, special.erfcx, REAL_LINE),
    "i0": (torch.i0, special.i0, REAL_LINE),
    "i0e": (torch.special.i0e, special.i0e, REAL_LINE),
    "i1": (torch.special.i1, special.i1, REAL_LINE),
    "i1e": (torch.special.i1e, special.i1e, REAL_LINE),
    "modified_bessel_i0": (torch.special.modified_bessel_i0, special.i0, REAL_LINE),
    "modified_bessel_i1": (torch.special.modified_bessel_i1, special.i1, REAL_LINE),
    "modified_bessel_k0": (torch.special.modified_bessel_k0, special.modified_bessel_k0, REAL_LINE),
    "modified_bessel_k1": (torch.special.modified_bessel_k1, special.modified_bessel_k1, REAL_LINE),
    "scaled_modified_bessel_k0": (torch.special.scaled_modified_bessel_k0, special.scaled_modified_bessel_k0, REAL_LINE),
    "scaled_modified_bessel_k1": (torch.special.scaled_modified_bessel_k1, special.scaled_modified_bessel_k1, REAL_LINE),
    "bessel_j0": (torch.special.bessel_j0, special.bessel_j0, REAL_LINE),
    "bessel_j1": (torch.special.bessel_j1, special.bessel_j1, REAL_LINE),
    "bessel_y0": (torch.special.bessel_y0, special.bessel_y0, REAL_LINE),
    "bessel_y1": (torch.special.bessel_y1, special.bessel_y1, REAL_LINE),
    "spherical_bessel_j0": (torch.special.spherical_bessel_j0, special.spherical_bessel_j0, REAL_LINE),
    # below -100 the phase 2/3 |x|^(3/2) keeps too few fractional bits in fp32 for eager's own value to mean
    # anything: that range is judged against float64 (test_airy_ai_of_large_negative_arguments_is_as_good_as_eager)
    "airy_ai": (torch.special.airy_ai, special.airy_ai, REAL_LINE[REAL_LINE.isnan() | (REAL_LINE >= -100.0)]),
}  # fmt: skip


@pytest.mark.parametrize("name", UNARY)
def test_decomposition_matches_eager_over_the_domain(name: str) -> None:
    eager, decomposition, points = UNARY[name]
    problem = pointwise_mismatch(to_numpy(decomposition(points)), to_numpy(eager(points)))
    assert problem is None, f"{name}: {problem}"


# eager sums zeta's series term by term from a negative x up to 9, |x| steps: its own run time bounds the range
POLYGAMMA_LINE = REAL_LINE[REAL_LINE.isnan() | (REAL_LINE >= -1e4)]


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4, 7])
def test_polygamma_matches_eager_over_the_domain(order: int) -> None:
    ours, eager = special.polygamma(order, POLYGAMMA_LINE), torch.polygamma(order, POLYGAMMA_LINE)
    problem = pointwise_mismatch(to_numpy(ours), to_numpy(eager))
    assert problem is None, f"polygamma({order}): {problem}"


def test_zeta_matches_eager_over_both_arguments() -> None:
    # x: the pole at 1, below it, integers and fractions up to where the terms underflow; q of both signs
    x = torch.tensor([0.5, 1.0, 1.0001, 1.5, 2.0, 3.0, 4.5, 5.0, 7.0, 12.0, 30.0, 90.0, math.inf, math.nan])
    q = torch.cat([torch.logspace(-20, 20, 300), torch.linspace(-30.0, 0.0, 241), -torch.logspace(-20, 5, 100)])
    x, q = (grid.reshape(-1) for grid in torch.meshgrid(x, q, indexing="ij"))
    problem = pointwise_mismatch(to_numpy(special.zeta(x, q)), to_numpy(torch.special.zeta(x, q)))
    assert problem is None, f"zeta: {problem}"
    scalar_x = pointwise_mismatch(to_numpy(special.zeta(3.0, q)), to_numpy(torch.special.zeta(3.0, q)))
    assert scalar_x is None, f"zeta(3, q): {scalar_x}"


# a and x of the incomplete gamma functions: both signs, the edges, 1e-30 ... 1e30 by two decades and 0 ... 120 by 3/4
# (x close to a, the slowest point of both the series and the continued fraction, for every a up to the reach)
INCOMPLETE_GAMMA_AXIS = torch.cat(
    [
        torch.tensor([0.0, -0.0, -1.0, math.inf, -math.inf, math.nan]),
        torch.logspace(-30, 30, 31),
        torch.linspace(0.0, 120.0, 161),
    ]
)


@pytest.mark.parametrize("upper", [False, True], ids=["igamma", "igammac"])
def test_incomplete_gamma_matches_eager_over_both_arguments(upper: bool) -> None:
    a, x = (grid.reshape(-1) for grid in torch.meshgrid(INCOMPLETE_GAMMA_AXIS, INCOMPLETE_GAMMA_AXIS, indexing="ij"))
    # beyond the reach (a > 100 with x near a) the call fails (test_incomplete_gamma_refuses_arguments_beyond_reach)
    inside = ~((a > special.IGAMMA_MAX_A) & (x > 0.5 * a) & (x < 2.0 * a) & torch.isfinite(a))
    a, x = a[inside], x[inside]
    ours = special.special_function_decompositions()[
        torch.ops.aten.igammac.default if upper else torch.ops.aten.igamma.default
    ]
    eager = torch.igammac if upper else torch.igamma
    problem = pointwise_mismatch(to_numpy(ours(a, x)), to_numpy(eager(a, x)))  # type: ignore[operator]
    assert problem is None, f"{eager.__name__}: {problem}"


def test_incomplete_gamma_refuses_arguments_beyond_reach() -> None:
    # on the CPU the host-checked assertion raises at once; compiled, the host raises it after the run (as the
    # Legendre polynomial's test shows)
    igamma = special.special_function_decompositions()[torch.ops.aten.igamma.default]
    a = torch.tensor([150.0, 150.0, 150.0, 1e6])
    x = torch.tensor([20.0, 400.0, 1.0, 2e6])  # a converged series; x >= 2 a
    assert pointwise_mismatch(to_numpy(igamma(a, x)), to_numpy(torch.igamma(a, x))) is None  # type: ignore[operator]
    with pytest.raises(RuntimeError, match=r'igamma: a above 100 with x near a, .* cpu_ops=\["igamma"\]'):
        igamma(a, torch.where(x == 1.0, 150.0, x))  # type: ignore[operator]


def test_airy_ai_of_large_negative_arguments_is_as_good_as_eager() -> None:
    x = -torch.logspace(2, 12, 4000)
    assert_close_to_golden(special.airy_ai(x), torch.special.airy_ai(x), torch.special.airy_ai(x.double()))


def test_float64_keeps_aten_kernel() -> None:
    assert special.lgamma(torch.ones(3, dtype=torch.float64)) is NotImplemented
    assert special.polygamma(-1, torch.ones(3)) is NotImplemented


def test_integer_input_gives_the_default_float_type() -> None:
    n = torch.arange(1, 20)
    assert special.lgamma(n).dtype == torch.float32
    assert pointwise_mismatch(to_numpy(special.lgamma(n)), to_numpy(torch.lgamma(n))) is None


# Chebyshev polynomials: x over and beyond [-1, 1] (its ends and their fp32 neighbours, the overflow of large |x|,
# infinities, NaN), degrees across eager's switch from its recurrence to the closed forms (6 and 8), negative,
# fractional (truncated), NaN and infinite (int64 conversions that make them negative), and up to overflow
CHEBYSHEV_X = torch.cat(
    [
        torch.linspace(-3.0, 3.0, 601),
        torch.tensor([1.0, -1.0, 0.0, 1.0 + 2**-23, -1.0 - 2**-23, 1.0 - 2**-24, -1.0 + 2**-24, 1.0 - 2**-23]),
        torch.tensor([1.0001, -1.0001, 30.0, -30.0, 1e20, -1e20, math.inf, -math.inf, math.nan]),
    ]
)
CHEBYSHEV_N = torch.tensor(
    [
        -3.0,
        -0.5,
        0.0,
        0.7,
        1.0,
        2.0,
        3.0,
        5.0,
        6.0,
        7.0,
        8.0,
        8.9,
        9.0,
        10.0,
        13.0,
        25.0,
        40.0,
        1e19,
        math.nan,
        math.inf,
    ]
)


@pytest.mark.parametrize("shifted", [False, True], ids=["plain", "shifted"])
@pytest.mark.parametrize("kind", ["t", "u", "v", "w"])
def test_chebyshev_polynomials_match_eager(kind: str, shifted: bool) -> None:
    x, n = (grid.reshape(-1) for grid in torch.meshgrid(CHEBYSHEV_X, CHEBYSHEV_N, indexing="ij"))
    name = f"{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"
    eager = getattr(torch.special, name)
    table = special.special_function_decompositions()
    ours = cast(Callable[..., torch.Tensor], table[getattr(torch.ops.aten, f"special_{name}").default])
    # Left out: NaN x from degree 2 on, where eager's loop stops before its first step and returns an
    # uninitialised value; and x within 1e-5 above -1 from degree 9 on, where eager's angle acos(x) ~ pi carries
    # fp32's absolute rounding into sin(theta) ~ 1e-3: there ours is judged against float64
    trusted = ~(torch.isnan(x) & ~(n < 2.0)) & ~((x < -1.0 + 1e-5) & (x > -1.0) & (n >= 9.0))
    golden = (x > -1.0) & (x < -1.0 + 1e-5) & (n >= 9.0) & (n <= 40.0)
    if shifted:
        x = (x + 1.0) / 2.0
    for degree in (n, n.nan_to_num().clamp(-5, 50).long()):
        problem = pointwise_mismatch(to_numpy(ours(x, degree)[trusted]), to_numpy(eager(x, degree)[trusted]))
        assert problem is None, f"{name}, {degree.dtype} n: {problem}"
    if not shifted:  # x + x - 1 rounds the points next to -1 away
        ours_near, eager_near = ours(x[golden], n[golden]), eager(x[golden], n[golden])
        assert_close_to_golden(ours_near, eager_near, eager(x[golden].double(), n[golden].double()))


# Hermite, Laguerre and Legendre polynomials: x densely over [-12, 12] (the ends of Legendre's interval and their
# fp32 neighbours, Laguerre's zero of both signs, the overflow of large |x|, infinities, NaN) and every degree up
# to past the recurrence's reach (Hermite's NaN horizon, Laguerre's and Legendre's largest degree)
ORTHOGONAL_X = torch.cat(
    [
        torch.linspace(-12.0, 12.0, 601),
        torch.tensor([1.0, -1.0, 0.0, -0.0, 1.0 + 2**-23, -1.0 - 2**-23, 1.0 - 2**-24, -1.0 + 2**-24]),
        torch.tensor([30.0, -30.0, 1e20, -1e20, math.inf, -math.inf, math.nan]),
    ]
)
ORTHOGONAL_TOP_DEGREE = 70
ORTHOGONAL_N = torch.cat(
    [torch.arange(-2.0, ORTHOGONAL_TOP_DEGREE + 1.0), torch.tensor([0.5, 8.9, -0.5, 1e19, math.nan, math.inf])]
)


def _degree_rows_mismatch(ours: torch.Tensor, eager: torch.Tensor, golden: torch.Tensor, n: torch.Tensor) -> str | None:
    """None when, for each degree, ours is within fp32 tolerance of the float64 polynomial or as close to it as
    eager (within `GOLDEN_FACTOR` and `GOLDEN_FLOOR_ULPS`), errors relative to the degree's largest magnitude over
    x (the measure of `golden_mismatch`, one degree at a time: next to a root the recurrence's cancellation leaves
    eager's own values few correct digits)."""
    if not torch.isfinite(ours[torch.isfinite(golden)]).all():
        return "non-finite values where the float64 polynomial is finite"
    finite = torch.isfinite(golden)
    rows = n[finite].long()
    width = int(rows.max()) + 1 if rows.numel() else 1

    def row_max(values: torch.Tensor) -> torch.Tensor:
        return torch.zeros(width, dtype=torch.float64).scatter_reduce(0, rows, values[finite], "amax")

    scale = row_max(golden.abs()).clamp(min=1.0)
    ours_error = row_max((ours.double() - golden).abs()) / scale
    eager_error = row_max((eager.double() - golden).abs()) / scale
    rtol, _ = tolerance("float32")
    allowed = torch.clamp(GOLDEN_FACTOR * eager_error + GOLDEN_FLOOR_ULPS * torch.finfo(torch.float32).eps, min=rtol)
    if (ours_error <= allowed).all():
        return None
    degree = int(torch.argmax(ours_error - allowed))
    return f"degree {degree}: error {float(ours_error[degree]):.3g} of its largest magnitude, allowed {float(allowed[degree]):.3g}"


# Up to this degree the recurrence cancels too little for rounding to show: eager's values within fp32 tolerance
ORTHOGONAL_WELL_CONDITIONED_DEGREE = 12


@pytest.mark.parametrize("name", sorted(special.ORTHOGONAL_POLYNOMIALS))
def test_orthogonal_polynomials_match_eager(name: str) -> None:
    """Eager's fp32 values up to degree 12 (and everywhere at the special cases); above, where the recurrence
    cancels digits next to the roots, within fp32 tolerance of the float64 polynomial or as close as eager
    (`_degree_rows_mismatch`)."""
    x, n = (grid.reshape(-1) for grid in torch.meshgrid(ORTHOGONAL_X, ORTHOGONAL_N, indexing="ij"))
    reach = special.ORTHOGONAL_POLYNOMIALS[name].last
    if name.startswith(("laguerre", "legendre")):
        x, n = x[~(n > reach)], n[~(n > reach)]  # above the reach a tensor degree fails the call (below)
    eager = getattr(torch.special, name)
    table = special.special_function_decompositions()
    ours = cast(Callable[..., torch.Tensor], table[getattr(torch.ops.aten, f"special_{name}").default])
    # Left out: values within a factor 1e2 of fp32's largest, where eager's loop (its multiply and subtract fused
    # into one rounding) and ours (rounding the product first) overflow at different steps, so that one gives
    # +-inf or NaN where the other still has a finite value; and, for Laguerre and Legendre, NaN x from degree 2
    # on, where eager's loop stops before its first step and returns an uninitialised value
    golden = eager(x.double(), n.double())
    trusted = ~(golden.abs() > 3e36)
    if name.startswith(("laguerre", "legendre")):
        trusted &= ~(torch.isnan(x) & (n >= 2.0))
    x, n, golden = x[trusted], n[trusted], golden[trusted]
    for degree in (n, n.nan_to_num().clamp(-5, ORTHOGONAL_TOP_DEGREE).long()):
        got, want = ours(x, degree), eager(x, degree)
        # where eager's own recurrence overflowed (a finite float64 value), ours overflows too
        assert not torch.isfinite(got[~torch.isfinite(want)]).any(), f"{name}: finite where eager overflowed"
        high = (n > ORTHOGONAL_WELL_CONDITIONED_DEGREE) & (n <= ORTHOGONAL_TOP_DEGREE)
        exact = ~high | ~torch.isfinite(want) | ~torch.isfinite(golden)
        problem = pointwise_mismatch(to_numpy(got[exact]), to_numpy(want[exact]))
        assert problem is None, f"{name}, {degree.dtype} n: {problem}"
    problem = _degree_rows_mismatch(ours(x, n)[~exact], eager(x, n)[~exact], golden[~exact], n[~exact])
    assert problem is None, f"{name}: {problem}"
    scalar = cast(Callable[..., torch.Tensor], table[getattr(torch.ops.aten, f"special_{name}").n_scalar])
    values = ORTHOGONAL_X[~torch.isnan(ORTHOGONAL_X) & (ORTHOGONAL_X.abs() < 20.0)]
    for degree_number in (-1, 0, 1, 2, 7, 8.9):
        problem = pointwise_mismatch(to_numpy(scalar(values, degree_number)), to_numpy(eager(values, degree_number)))
        assert problem is None, f"{name}, n = {degree_number}: {problem}"
    high = scalar(values, reach), eager(values, reach), eager(values.double(), float(reach))
    kept = high[2].abs() <= 3e36
    reached = torch.full_like(values[kept], float(reach))
    problem = _degree_rows_mismatch(high[0][kept], high[1][kept], high[2][kept], reached)
    assert problem is None, f"{name}, n = {reach}: {problem}"


def test_hermite_polynomials_are_nan_above_their_horizon() -> None:
    # eager's values past the horizon are NaN at every fp32 x (its recurrence has overflowed): a dense sample
    x = torch.cat([torch.linspace(-20.0, 20.0, 400001), torch.logspace(-38, 1, 4000), -torch.logspace(-38, 1, 4000)])
    for name in ("hermite_polynomial_h", "hermite_polynomial_he"):
        beyond = float(special.ORTHOGONAL_POLYNOMIALS[name].last + 1)
        assert torch.isnan(getattr(torch.special, name)(x, torch.tensor(beyond))).all(), name


def test_a_python_number_degree_beyond_the_reach_keeps_aten_kernel() -> None:
    table = special.special_function_decompositions()
    reach = special.ORTHOGONAL_POLYNOMIALS["legendre_polynomial_p"].last
    legendre = cast(Callable[..., object], table[torch.ops.aten.special_legendre_polynomial_p.n_scalar])
    assert legendre(torch.zeros(3), reach + 1) is NotImplemented
    hermite = cast(Callable[..., torch.Tensor], table[torch.ops.aten.special_hermite_polynomial_h.n_scalar])
    assert torch.isnan(hermite(torch.zeros(3), 100)).all()


# ---- through the backend -----------------------------------------------------------------------------------------


# One graph per family with one function of each kind of formula (compiling every function takes minutes; the
# coverage sweep's op_db entries run each of them through the backend)
def _gamma_family(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.lgamma(x), torch.digamma(x), torch.polygamma(2, x)


def _error_family(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.erfinv(x / 30.0), torch.special.ndtri((x + 30.0) / 60.0), torch.special.log_ndtr(x)


def _bessel_family(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.special.bessel_y1(x), torch.special.airy_ai(x)


# half-integers of [2^22, 2^23), the fp32 range where a rounding by 1.5 * 2^23 takes them for integers
LARGE_HALF_INTEGERS = -torch.tensor([2.0**22 + 0.5, 5e6 + 0.5, 2.0**23 - 0.5])


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(
    ("family", "extra"),
    [(_gamma_family, LARGE_HALF_INTEGERS), (_error_family, None), (_bessel_family, None)],
    ids=["gamma", "error", "bessel"],
)
def test_compiled_special_functions_run_natively(
    family: Callable[[torch.Tensor], tuple[torch.Tensor, ...]], extra: torch.Tensor | None
) -> None:
    x = torch.cat([torch.linspace(-30.0, 30.0, 1201), SPECIAL_VALUES, *([] if extra is None else [extra])])
    expected = family(x)
    actual = run_compiled(family, x)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, f"fell back to the CPU: {stats['fallback_ops']}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        problem = pointwise_mismatch(to_numpy(got), to_numpy(want))
        assert problem is None, f"result {index}: {problem}"


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_chebyshev_polynomial_runs_natively() -> None:
    # V has both kinds of closed form (cos over cos, sin over sin by reflection) and the recurrence
    x, n = torch.meshgrid(CHEBYSHEV_X[::12], torch.tensor([-1.0, 0.0, 2.0, 7.0, 9.0, 40.0, math.nan]), indexing="ij")
    actual = run_compiled(torch.special.chebyshev_polynomial_v, x, n)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    problem = pointwise_mismatch(to_numpy(actual), to_numpy(torch.special.chebyshev_polynomial_v(x, n)))
    assert problem is None, problem


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_legendre_polynomial_runs_natively_and_refuses_degrees_beyond_its_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the recurrence's reach lowered to 6 for a small graph (64 steps take most of a minute to compile); the
    # coverage sweep's op_db entries compile the full reach of all four families
    monkeypatch.setattr(special.ORTHOGONAL_POLYNOMIALS["legendre_polynomial_p"], "last", 6)
    x, n = torch.meshgrid(
        torch.tensor([-3.0, -1.0, -0.6, 0.0, 0.3, 1.0, 2.5, math.nan]),
        torch.tensor([-1.0, 0.0, 1.0, 2.0, 5.0, 6.7, 1e19, math.nan]),
        indexing="ij",
    )
    compiled = torch.compile(torch.special.legendre_polynomial_p, backend="neuron-mlir")
    actual = compiled(x, n)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    trusted = ~(torch.isnan(x) & (n >= 2.0))  # eager's uninitialised value
    expected = torch.special.legendre_polynomial_p(x, n)
    assert pointwise_mismatch(to_numpy(actual[trusted]), to_numpy(expected[trusted])) is None
    with pytest.raises(RuntimeError, match=r"legendre_polynomial_p: a degree above 6, .* cpu_ops"):
        compiled(x, n + 1.0)


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_incomplete_gamma_runs_natively(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the unrolled counts and their reach lowered for a small graph (the full counts take a quarter of a minute to
    # compile); the domain test above checks the full counts, and the coverage sweep's op_db entries compile them
    monkeypatch.setattr(special, "_IGAMMA_SERIES_TERMS", 16)
    monkeypatch.setattr(special, "_IGAMMA_FRACTION_DEPTH", 10)
    monkeypatch.setattr(special, "IGAMMA_MAX_A", 1.0)
    a, x = torch.meshgrid(
        torch.tensor([-1.0, 0.0, 1e-3, 0.5, 1.0, 20.0, math.inf, math.nan]),
        torch.tensor([0.0, 1e-3, 0.2, 0.9, 7.0, 50.0, math.inf, math.nan]),
        indexing="ij",
    )
    # igammac: both of its branches are complements (1 - P below x = a + 1, P = 1 - Q above in igamma)
    compiled = torch.compile(torch.igammac, backend="neuron-mlir")
    actual = compiled(a, x)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    assert pointwise_mismatch(to_numpy(actual), to_numpy(torch.igammac(a, x))) is None


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_bfloat16_computes_in_float32() -> None:
    x = torch.linspace(0.1, 12.0, 300).to(torch.bfloat16)
    actual = run_compiled(torch.lgamma, x)
    assert actual.dtype == torch.bfloat16
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    problem = pointwise_mismatch(to_numpy(actual), to_numpy(torch.lgamma(x)))
    assert problem is None, problem


@pytest.mark.usefixtures("fresh_compiler")
def test_cpu_ops_keeps_a_special_function_whole_for_the_cpu() -> None:
    x = torch.linspace(0.5, 4.0, 16)
    compiled = torch.compile(lambda t: torch.lgamma(t) * 2.0, backend="neuron-mlir", options={"cpu_ops": ["lgamma"]})  # type: ignore[dict-item]
    with pytest.warns(UserWarning, match="sent to the CPU by the cpu_ops option"):
        actual = compiled(x)
    assert neuron_mlir.stats()["fallback_ops"] == {"aten.lgamma.default": 1}
    assert pointwise_mismatch(to_numpy(actual), to_numpy(torch.lgamma(x) * 2.0)) is None
