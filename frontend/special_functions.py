"""Special functions of `torch.special` (and their ATen aliases) as chains of natively lowered elementwise ops.

ATen computes these functions with scalar C++ loops that the NeuronCore has no instruction for, so without a
decomposition every graph holding one runs it on the CPU. Each function here is a fixed sequence of elementwise
arithmetic, exp, log, sqrt, sin, comparisons and selections: a series is unrolled to a fixed number of terms that
is enough for fp32 everywhere, a branch of a piecewise approximation is computed for every element and picked with
`where`, and a recurrence that eager runs until a data-dependent count either has a bounded count or is replaced
by an identity that has one (see `zeta`).

Input contract: a floating-point (bf16, fp16, fp32) or integer tensor; float64 stays with ATen's kernel (the
decomposition returns NotImplemented), since the NeuronCore has no float64 storage and an fp32 formula would lose
its precision. Output guarantee: eager's result dtype, computed in fp32 internally, within fp32 tolerance of eager
over the whole domain, including eager's values at poles, zeros and infinities; exceptions, where eager's own
fp32 value carries no information: Airy Ai below about -100, whose phase 2/3 |x|^(3/2) keeps too few fractional
bits (there the error from the exact value is of eager's size); subnormal arguments of the K functions,
where eager's scaled and unscaled forms disagree with each other; Chebyshev polynomials of degree above 8 within
about 1e-5 of x = -1 (eager's angle acos(x) ~ pi keeps fp32's absolute rounding, a relative error of 1e-4 in
sin(acos(x)); ours is within float64's value by the golden rule) or of degree in the thousands on (-1, 0) (n ulps of
that angle), and at NaN x from degree 2 on, where eager returns an uninitialised value and we return NaN (also
Laguerre and Legendre); Hermite, Laguerre and Legendre polynomials next to a root from degree ~13 on and within a
factor ~100 of fp32's overflow (see their section: eager's loop fuses multiply and subtract); Laguerre and
Legendre degrees above 64 in a tensor, which fail the call with a message (a Python-number degree above 64 keeps
ATen's kernel); igamma and igammac with a > 100 and x near a (see `_incomplete_gamma`), which fail likewise.

The approximations are the published ones eager itself uses where that keeps the match exact in edge cases:
Cephes (S. Moshier, Cephes Math Library, files named per function) for the Bessel functions, ndtri, zeta and
digamma; Abramowitz & Stegun (A&S) for the asymptotic series; Numerical Recipes' erfc fit for erfcx; M. Giles,
"Approximating the erfinv function" (GPU Computing Gems, 2011), single-precision version, for erfinv; Numerical
Recipes (W. Press et al., 2nd ed., 1992, section 6.2) for the incomplete gamma functions' series and continued
fraction, with the cancellation-free prefactor of Cephes igam.c.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import cast

import torch

Tensor = torch.Tensor


# ---- shared pieces -----------------------------------------------------------------------------------------------


def _result_dtype(*operands: Tensor | float) -> torch.dtype | None:
    """The dtype eager gives these operands' special function (integers promote to the default float type), or
    None for float64 and complex operands, which keep ATen's kernel."""
    tensors = cast(tuple[Tensor, ...], operands)  # a Python number may follow the first operand
    dtype = torch.result_type(*tensors) if len(tensors) > 1 else tensors[0].dtype
    if not dtype.is_floating_point:
        if dtype.is_complex:
            return None
        dtype = torch.get_default_dtype()
    return None if dtype == torch.float64 else dtype


def _polynomial_operands(x: Tensor | float, n: Tensor | float) -> tuple[torch.dtype, Tensor, Tensor] | None:
    """For a polynomial of degree `n` at `x` (either may be a Python number): the result's dtype, the tensor
    operand, and `x` as fp32 in that tensor's shape; None where ATen's kernel keeps the call (`_result_dtype`)."""
    dtype = _result_dtype(x, n)
    if dtype is None:
        return None
    like = x if isinstance(x, Tensor) else n
    assert isinstance(like, Tensor)
    x32 = x.to(torch.float32) if isinstance(x, Tensor) else torch.full_like(like, float(x), dtype=torch.float32)
    return dtype, like, x32


def _unary(function: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """`function` of an fp32 tensor as the decomposition of an ATen op: in fp32, the result in eager's dtype."""

    def decomposition(x: Tensor) -> Tensor:
        dtype = _result_dtype(x)
        if dtype is None:
            return NotImplemented
        return function(x.to(torch.float32)).to(dtype)

    decomposition.__name__ = function.__name__.lstrip("_")
    decomposition.__doc__ = function.__doc__
    return decomposition


def _polynomial(x: Tensor, coefficients: Sequence[float]) -> Tensor:
    """The polynomial with `coefficients` from the highest power down, by Horner's rule (Cephes polevl)."""
    result = x * coefficients[0] + coefficients[1]
    for coefficient in coefficients[2:]:
        result = result * x + coefficient
    return result


def _chebyshev_series(x: Tensor, coefficients: Sequence[float]) -> Tensor:
    """sum_i c_i T_i(x / 2) - c_0 / 2, the coefficients from the highest order down, by Clenshaw's recurrence
    (Cephes chbevl); the first two steps run on Python numbers."""
    before: Tensor | float = 0.0
    previous: Tensor | float = 0.0
    current: Tensor | float = coefficients[0]
    for coefficient in coefficients[1:]:
        before, previous = previous, current
        current = x * previous - before + coefficient
    return 0.5 * (current - before)  # type: ignore[return-value]


def _cos(x: Tensor) -> Tensor:
    """cos(x) to within a few fp32 units of 1 for any x, as 1 - 2 sin^2(x/2): the backend's cosine shifts x by
    pi/2 first, which rounds away the phase of large arguments (Bessel functions keep their amplitude there)."""
    half_sine = torch.sin(0.5 * x)
    return 1.0 - 2.0 * half_sine * half_sine


def _remainder_to_nearest_integer(x: Tensor) -> Tensor:
    """x minus its nearest integer, in [-1/2, 1/2], exactly. From fmod, which is exact for every fp32, rather
    than from a rounding: the half-integers of [2^22, 2^23) are no integers, and rounding by adding 1.5 * 2^23
    cannot see them."""
    fraction = torch.fmod(x, 1.0)
    return fraction - (fraction > 0.5).to(x.dtype) + (fraction < -0.5).to(x.dtype)


def _floor(x: Tensor) -> Tensor:
    """floor(x), exactly for every fp32 (see `_remainder_to_nearest_integer`); inf and NaN give NaN."""
    fraction = torch.fmod(x, 1.0)
    return x - fraction - (fraction < 0.0).to(x.dtype)


INFINITY = math.inf
NAN = math.nan


# ---- gamma family ------------------------------------------------------------------------------------------------

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_LOG_PI = math.log(math.pi)
_LOG_TWO = math.log(2.0)


def _lgamma_positive(y: Tensor) -> Tensor:
    """log Gamma(y) for y > 0: Stirling's series (A&S 6.1.41, four terms) at z >= 8, where its next term is below
    1e-11; below 8 it runs at z = y + 8 and the recurrence Gamma(y + 8) = y (y+1) ... (y+7) Gamma(y) (A&S 6.1.16)
    takes the product's logarithm off."""
    shifted = y < 8.0
    near = torch.where(shifted, y, 1.0)
    # (y+1) ... (y+7) apart from y: a subnormal y times 5040 would lose the bits its logarithm needs
    product = near + 1.0
    for step in range(2, 8):
        product = product * (near + float(step))
    z = torch.where(shifted, y + 8.0, y)
    log_z = torch.log(z)
    inverse = 1.0 / z
    inverse_squared = inverse * inverse
    series = inverse * (1 / 12 - inverse_squared * (1 / 360 - inverse_squared * (1 / 1260 - inverse_squared / 1680)))
    # z (log z - 1) rather than (z - 1/2) log z - z: no intermediate overflows before the result does
    stirling = z * (log_z - 1.0) - 0.5 * log_z + _HALF_LOG_TWO_PI + series
    return torch.where(shifted, stirling - torch.log(near) - torch.log(product), stirling)


def _lgamma(x: Tensor) -> Tensor:
    """log |Gamma(x)|. Negative x by the reflection Gamma(x) Gamma(1 - x) = pi / sin(pi x) (A&S 6.1.17), the sine
    taken of the remainder to the nearest integer (exact in fp32), so every integer x <= 0 is a pole (+inf)."""
    reflected = x < 0.0
    positive = _lgamma_positive(torch.where(reflected, 1.0 - x, x))
    sine = torch.abs(torch.sin(math.pi * _remainder_to_nearest_integer(x)))
    reflection = _LOG_PI - torch.log(sine) - positive
    result = torch.where(reflected, torch.where(sine == 0.0, INFINITY, reflection), positive)
    return torch.where(torch.isinf(x), INFINITY, result)


# Cephes psi.c, A: the asymptotic series' Bernoulli terms B_2k / 2k, highest order first
_DIGAMMA_A = (
    8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3, -4.16666666666666666667e-3,
    3.96825396825396825397e-3, -8.33333333333333333333e-3, 8.33333333333333333333e-2,
)  # fmt: skip


def _digamma_positive(y: Tensor) -> Tensor:
    """psi(y) for y > 0 (Cephes psi.c): the recurrence psi(y) = psi(y + 1) - 1/y (A&S 6.3.5) up to y >= 10, then
    the asymptotic series (A&S 6.3.18)."""
    shift = torch.zeros_like(y)
    for _ in range(10):
        below = y < 10.0
        shift = shift + torch.where(below, 1.0 / y, 0.0)
        y = torch.where(below, y + 1.0, y)
    inverse_squared = 1.0 / (y * y)
    return torch.log(y) - 0.5 / y - inverse_squared * _polynomial(inverse_squared, _DIGAMMA_A) - shift


def _digamma(x: Tensor) -> Tensor:
    """psi(x) = d/dx log Gamma(x). Negative x by the reflection psi(x) = psi(1 - x) - pi / tan(pi x) (A&S 6.3.7),
    the tangent (of period 1) taken of the remainder to the nearest integer: exact in fp32, it keeps pi r accurate
    next to a pole, where pi x would have lost it. Negative integers are NaN and +-0 gives -+inf, as in eager."""
    negative = x < 0.0
    positive = _digamma_positive(torch.where(negative, 1.0 - x, x))
    fraction = _remainder_to_nearest_integer(x)
    reflection = positive - math.pi / torch.tan(math.pi * fraction)
    result = torch.where(negative, torch.where(fraction == 0.0, NAN, reflection), positive)
    return torch.where(x == 0.0, torch.where(torch.signbit(x), INFINITY, -INFINITY), result)


def _trigamma(x: Tensor) -> Tensor:
    """psi'(x): below 1/2 by the reflection psi'(1 - x) + psi'(x) = pi^2 / sin^2(pi x) (A&S 6.4.7), then six steps
    of psi'(x) = psi'(x + 1) + 1/x^2 (A&S 6.4.6) and the asymptotic series (A&S 6.4.12). The sine is of pi x
    rounded to fp32, as eager takes it, so that the poles give eager's values."""
    reflected = x < 0.5
    sine = torch.sin(math.pi * x)
    y = torch.where(reflected, 1.0 - x, x)
    total = torch.zeros_like(y)
    for _ in range(6):
        total = total + 1.0 / (y * y)
        y = y + 1.0
    inverse_squared = 1.0 / (y * y)
    series = 1.0 + 0.5 / y + inverse_squared * (1 / 6 - inverse_squared * (1 / 30 - inverse_squared / 42))
    total = total + series / y
    return torch.where(reflected, (math.pi * math.pi) / (sine * sine) - total, total)


# Cephes zeta.c, A: (2k)! / B_2k for k = 1 ... 12, the Euler-Maclaurin remainder's denominators
_ZETA_A = (
    12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
    -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
    -7.1661652561756670113e18,
)  # fmt: skip


def _zeta_positive(x: Tensor | float, q: Tensor) -> Tensor:
    """The Hurwitz zeta function sum_k (q + k)^-x for x > 1, q > 0 (Cephes zeta.c): ten terms directly, the rest
    by the Euler-Maclaurin formula at w = q + 9 with twelve Bernoulli terms (A&S 23.1.30). Each remainder term is
    the previous one times (x + 2i - 1)(x + 2i) / w^2, so no power of x is formed that fp32 cannot hold. A Python
    number x (polygamma's order) keeps those factors constants."""
    total = torch.pow(q, -x)
    for step in range(1, 10):
        total = total + torch.pow(q + float(step), -x)
    w = q + 9.0
    last = torch.pow(w, -x)
    total = total + last * w / (x - 1.0) - 0.5 * last
    term = x * last / w
    total = total + term / _ZETA_A[0]
    w_squared = w * w
    for index in range(1, len(_ZETA_A)):
        term = term * ((x + float(2 * index - 1)) * (x + float(2 * index))) / w_squared
        total = total + term / _ZETA_A[index]
    return total


def _zeta(x: Tensor | float, q: Tensor) -> Tensor:
    """The Hurwitz zeta function zeta(x, q) with eager's domain: +inf at x = 1 and at integers q <= 0, NaN for
    x < 1 and for q < 0 with x not an integer.

    A negative q = r - m (r in (0, 1), m a positive integer) with integer x needs no sum of m terms: the terms
    (r - k)^-x = (-1)^x (k - r)^-x of k = 1 ... m add up to (-1)^x (zeta(x, 1 - r) - zeta(x, 1 - r + m)), so
    zeta(x, q) = (-1)^x (zeta(x, 1 - r) - zeta(x, 1 - r + m)) + zeta(x, r), all at positive arguments.
    """
    positive = q > 0.0
    floor_q = torch.where(torch.isinf(q), q, _floor(q))
    count = torch.where(positive, 1.0, -floor_q)
    # 1 - r = -(q + m - 1), exact in fp32 (Sterbenz), where r = q + m itself rounds to 1 for a q just below 0
    one_minus_fraction = torch.where(positive, 0.5, -(q + (count - 1.0)))
    # one evaluation serves q itself and, for negative q, r
    direct = _zeta_positive(x, torch.where(positive, q, q + count))
    finite_sum = _zeta_positive(x, one_minus_fraction) - _zeta_positive(x, one_minus_fraction + count)
    if isinstance(x, Tensor):
        parity = x - 2.0 * _floor(0.5 * x)  # 0 or 1 for integer x
        finite_sum = (1.0 - 2.0 * parity) * finite_sum
    elif x % 2 == 1:
        finite_sum = -finite_sum
    result = torch.where(positive, direct, finite_sum + direct)
    if isinstance(x, Tensor):
        result = torch.where(~positive & (torch.fmod(x, 1.0) != 0.0), NAN, result)
    elif x != math.floor(x):
        result = torch.where(positive, result, NAN)
    result = torch.where(~positive & (q == floor_q), INFINITY, result)
    if isinstance(x, Tensor):
        # x = +inf as eager has it: q^-inf is inf below 1 and 1 at 1; above 1 its remainder terms are inf * 0
        at_infinity = torch.where(q == 1.0, 1.0, torch.where(q > 1.0, NAN, INFINITY))
        result = torch.where(x == INFINITY, at_infinity, result)
        return torch.where(x == 1.0, INFINITY, torch.where(x < 1.0, NAN, result))
    if x <= 1.0:
        return torch.full_like(q, INFINITY if x == 1.0 else NAN)
    return result


def zeta(x: Tensor | float, q: Tensor | float) -> Tensor:
    """`aten.special_zeta` (and its overloads with a Python number for either operand)."""
    dtype = _result_dtype(x, q)
    if dtype is None:
        return NotImplemented
    like = x if isinstance(x, Tensor) else q
    assert isinstance(like, Tensor)

    def as_float32(value: Tensor | float) -> Tensor:
        if isinstance(value, Tensor):
            return value.to(torch.float32)
        return torch.full_like(like, float(value), dtype=torch.float32)

    x32, q32 = torch.broadcast_tensors(as_float32(x), as_float32(q))  # type: ignore[no-untyped-call]  # unannotated in torch
    return _zeta(x32, q32).to(dtype)


def polygamma(n: int, x: Tensor) -> Tensor:
    """`aten.polygamma`: psi^(n)(x), the n-th derivative of digamma; from n = 2 on (-1)^(n+1) n! zeta(n + 1, x)
    (A&S 6.4.10), as eager computes it. A negative n keeps ATen's kernel (and its error)."""
    dtype = _result_dtype(x)
    if dtype is None or n < 0:
        return NotImplemented
    x32 = x.to(torch.float32)
    if n == 0:
        return _digamma(x32).to(dtype)
    if n == 1:
        return _trigamma(x32).to(dtype)
    factorial = math.factorial(n)
    scale = (1.0 if n % 2 else -1.0) * (float(factorial) if factorial.bit_length() <= 1024 else INFINITY)
    return (_zeta(float(n + 1), x32) * scale).to(dtype)


# ---- regularised incomplete gamma functions ----------------------------------------------------------------------

# Terms of the power series and depth of the continued fraction, and the largest a for which they reach fp32's
# rounding everywhere: next to x = a + 1, the slowest point of both, the series needs about sqrt(33 a) terms (its
# terms fall as prod x / (a + k) ~ exp(-n^2 / 2a)) and the fraction about 24 levels at a = 100 (both counted in
# float64 until the next step changes the sum by less than 2^-24).
_IGAMMA_SERIES_TERMS = 64
_IGAMMA_FRACTION_DEPTH = 32
IGAMMA_MAX_A = 100.0
_FP32_ROUNDING = 2.0**-24


def _log1p_minus(s: Tensor) -> Tensor:
    """log(1 + s) - s for |s| <= 1/2 (elsewhere directly) with a small relative error where the two cancel:
    log(1 + s) = 2 atanh(t), t = s / (2 + s) (A&S 4.1.27), and 2 t - s = -s^2 / (2 + s) leaves the odd powers of
    t, summed to t^15 (t^2 <= 1/9, so the next term is below 2^-24 of the sum)."""
    near = torch.abs(s) <= 0.5
    s_near = torch.where(near, s, 0.0)
    t = s_near / (2.0 + s_near)
    t_squared = t * t
    odd_powers = t * t_squared * _polynomial(t_squared, [2.0 / k for k in range(15, 1, -2)])
    return torch.where(near, odd_powers - s_near * s_near / (2.0 + s_near), torch.log(1.0 + s) - s)


def _log_power_over_gamma(a: Tensor, x: Tensor) -> Tensor:
    """log(x^a e^-x / Gamma(a + 1)) for a > 0, x > 0. From a = 8 on, with Stirling's series for log Gamma(a + 1)
    (A&S 6.1.41, the terms `_lgamma_positive` uses), as a (log(1 + s) - s) - log(2 pi a) / 2 - series(a),
    s = (x - a) / a: the terms a log x, x and log Gamma(a + 1), each a hundred times the result near x = a and
    each rounded, cancel exactly instead (the way Cephes' igam_fac arranges it)."""
    small = a < 8.0
    direct = a * torch.log(x) - x - _lgamma_positive(torch.where(small, a, 1.0) + 1.0)
    large_a = torch.where(small, 8.0, a)
    inverse = 1.0 / large_a
    inverse_squared = inverse * inverse
    series = inverse * (1 / 12 - inverse_squared * (1 / 360 - inverse_squared * (1 / 1260 - inverse_squared / 1680)))
    s = (x - large_a) / large_a
    # below x = a / 2 the direct log(x / a) - s: 1 + s, rounded, would lose the digits of a small x / a
    spread = large_a * torch.where(s < -0.5, torch.log(x / large_a) - s, _log1p_minus(s))
    return torch.where(small, direct, spread - 0.5 * torch.log(2.0 * math.pi * large_a) - series)


def _igamma_series(a: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
    """(P(a, x), whether the series reached fp32's rounding) for a > 0, 0 < x: the power series
    P(a, x) = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n)) (A&S 6.5.29; Numerical Recipes, 2nd ed.,
    6.2, gser), unrolled to `_IGAMMA_SERIES_TERMS` terms. Its terms fall from the first on where x < a + 1."""
    term = torch.ones_like(x)
    total = term
    for n in range(1, _IGAMMA_SERIES_TERMS):
        term = term * x / (a + float(n))
        total = total + term
    return torch.exp(_log_power_over_gamma(a, x)) * total, term <= _FP32_ROUNDING * total


def _igammac_fraction(a: Tensor, x: Tensor) -> Tensor:
    """Q(a, x) for a > 0, x >= a + 1 by Legendre's continued fraction
    Q(a, x) = x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...)))
    (A&S 6.5.31 in its even form; Numerical Recipes, 2nd ed., 6.2, gcf), cut at depth `_IGAMMA_FRACTION_DEPTH` and
    evaluated from the bottom up: the same convergents as the modified Lentz method, with no data-dependent stop."""
    shifted = x - a
    denominator = shifted + float(2 * _IGAMMA_FRACTION_DEPTH + 1)
    for i in range(_IGAMMA_FRACTION_DEPTH, 0, -1):
        denominator = shifted + float(2 * i - 1) + float(i) * (a - float(i)) / denominator
    return torch.exp(_log_power_over_gamma(a, x) + torch.log(a)) / denominator


def _incomplete_gamma(a: Tensor, x: Tensor, upper: bool) -> Tensor:
    """The regularised lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a) (`upper` False, eager's
    igamma) or the upper one Q(a, x) = 1 - P(a, x) (igammac), for fp32 a and x of one shape.

    The series gives P where x < a + 1 and the continued fraction Q elsewhere, the other as the complement
    (Numerical Recipes, 2nd ed., 6.2, gammp/gammq): both are unrolled to fixed counts that reach fp32's rounding
    for a <= `IGAMMA_MAX_A` and, for any a, wherever the series' last term is below the rounding of its sum or
    x >= 2 a (the fraction then needs at most 5 levels). Other elements (a > 100, x close to a) fail the call
    with a message (`torch._assert_async`: computed on the core, raised by the host). The complement loses the
    relative precision of a result far below 1 (as eager's own float32 kernel does in part of the plane): its
    error is then absolute. Measured against float64 over 0 < a <= 100, 0 < x <= 200: absolute error below
    5e-6 (eager's fp32 kernel: 1e-6), from the rounding of log Gamma(a + 1) and a log x for a < 8. Eager's special
    cases, tested in eager's order (which decides NaN operands): NaN where a < 0 or x < 0; at a = 0, P = 1 for
    x > 0 and NaN otherwise; P = 0 at x = 0; at a = inf, NaN for an infinite x and P = 0 otherwise; P = 1 at
    x = inf (Q likewise complemented)."""
    domain = (a > 0.0) & (x > 0.0) & torch.isfinite(a) & torch.isfinite(x)
    a_in = torch.where(domain, a, 1.0)
    x_in = torch.where(domain, x, 1.0)
    by_series = x_in < a_in + 1.0
    lower, converged = _igamma_series(a_in, torch.where(by_series, x_in, 0.5 * a_in))
    upper_value = _igammac_fraction(a_in, torch.where(by_series, a_in + 1.0, x_in))
    torch._assert_async(
        torch.all(~domain | (a_in <= IGAMMA_MAX_A) | (by_series & converged) | (x_in >= 2.0 * a_in)),
        f"{'igammac' if upper else 'igamma'}: a above {IGAMMA_MAX_A:g} with x near a, beyond the reach of "
        'the compiled series and continued fraction; run it on the CPU instead (the backend option cpu_ops=["'
        f'{"igammac" if upper else "igamma"}"])',
    )
    inside = (
        torch.where(by_series, 1.0 - lower, upper_value) if upper else torch.where(by_series, lower, 1.0 - upper_value)
    )
    # eager's boundary values (Cephes igam.c), in its order of tests, which decides where an operand is NaN
    zero, one = (1.0, 0.0) if upper else (0.0, 1.0)
    result = torch.where(domain, inside, NAN)
    result = torch.where(torch.isinf(x), one, result)
    result = torch.where(torch.isinf(a), torch.where(torch.isinf(x), NAN, zero), result)
    result = torch.where(x == 0.0, zero, result)
    result = torch.where(a == 0.0, torch.where(x > 0.0, one, NAN), result)
    return torch.where((a < 0.0) | (x < 0.0), NAN, result)


def _incomplete_gamma_decomposition(upper: bool) -> Callable[[Tensor, Tensor], Tensor]:
    """`aten.igamma` (`upper` False) or `aten.igammac`: the operands broadcast and computed in fp32."""

    def decomposition(a: Tensor, x: Tensor) -> Tensor:
        dtype = _result_dtype(a, x)
        if dtype is None:
            return NotImplemented
        a32, x32 = torch.broadcast_tensors(a.to(torch.float32), x.to(torch.float32))  # type: ignore[no-untyped-call]  # unannotated in torch
        return _incomplete_gamma(a32, x32, upper).to(dtype)

    decomposition.__name__ = "igammac" if upper else "igamma"
    return decomposition


# ---- error function family ---------------------------------------------------------------------------------------

# Cephes ndtri.c: P0/Q0 for |y - 1/2| <= 3/8, P1/Q1 for sqrt(-2 log y) in [2, 8), P2/Q2 for [8, 64]
_NDTRI_P0 = (
    -59.96335010141079,
    98.00107541859997,
    -56.67628574690703,
    13.931260938727968,
    -1.2391658386738125,
)
_NDTRI_Q0 = (
    1.0,
    1.9544885833814176,
    4.676279128988815,
    86.36024213908905,
    -225.46268785411937,
    200.26021238006066,
    -82.03722561683334,
    15.90562251262117,
    -1.1833162112133,
)
_NDTRI_P1 = (
    4.0554489230596245,
    31.525109459989388,
    57.16281922464213,
    44.08050738932008,
    14.684956192885803,
    2.1866330685079025,
    -0.1402560791713545,
    -0.03504246268278482,
    -0.0008574567851546854,
)
_NDTRI_Q1 = (
    1.0,
    15.779988325646675,
    45.39076351288792,
    41.3172038254672,
    15.04253856929075,
    2.504649462083094,
    -0.14218292285478779,
    -0.03808064076915783,
    -0.0009332594808954574,
)
_NDTRI_P2 = (
    3.2377489177694603,
    6.915228890689842,
    3.9388102529247444,
    1.3330346081580755,
    0.20148538954917908,
    0.012371663481782003,
    0.00030158155350823543,
    2.6580697468673755e-06,
    6.239745391849833e-09,
)
_NDTRI_Q2 = (
    1.0,
    6.02427039364742,
    3.6798356385616087,
    1.3770209948908132,
    0.21623699359449663,
    0.013420400608854318,
    0.00032801446468212774,
    2.8924786474538068e-06,
    6.790194080099813e-09,
)
_EXP_MINUS_TWO = 0.13533528323661269189
_SQRT_TWO_PI = math.sqrt(2.0 * math.pi)


def _ndtri(y: Tensor) -> Tensor:
    """The standard normal quantile, the x with Phi(x) = y (Cephes ndtri.c): a rational function of y - 1/2 in
    the middle, of 1 / sqrt(-2 log y) in the tails (y or 1 - y below exp(-2))."""
    upper = y > 1.0 - _EXP_MINUS_TWO
    tail_y = torch.where(upper, 1.0 - y, y)
    central = tail_y > _EXP_MINUS_TWO
    offset = y - 0.5
    offset_squared = offset * offset
    ratio = _polynomial(offset_squared, _NDTRI_P0) / _polynomial(offset_squared, _NDTRI_Q0)
    middle = (offset + offset * (offset_squared * ratio)) * _SQRT_TWO_PI
    root = torch.sqrt(-2.0 * torch.log(torch.where(central, 0.5, tail_y)))
    inverse = 1.0 / root
    correction = torch.where(
        root < 8.0,
        inverse * _polynomial(inverse, _NDTRI_P1) / _polynomial(inverse, _NDTRI_Q1),
        inverse * _polynomial(inverse, _NDTRI_P2) / _polynomial(inverse, _NDTRI_Q2),
    )
    tail = root - torch.log(root) / root - correction
    result = torch.where(central, middle, torch.where(upper, tail, -tail))
    result = torch.where((y < 0.0) | (y > 1.0), NAN, result)
    result = torch.where(y == 0.0, -INFINITY, result)
    return torch.where(y == 1.0, INFINITY, result)


# Giles' single-precision erfinv: a polynomial in w - 5/2 for w = -log(1 - y^2) < 5, in sqrt(w) - 3 beyond
_ERFINV_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
    0.246640727, 1.50140941,
)  # fmt: skip
_ERFINV_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
    1.00167406, 2.83297682,
)  # fmt: skip
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erfinv(y: Tensor) -> Tensor:
    """The inverse error function: Giles' approximation, then one Newton step on erf(x) = y; +-inf at y = +-1,
    NaN beyond."""
    w = -torch.log((1.0 - y) * (1.0 + y))
    central = w < 5.0
    near = _polynomial(torch.where(central, w, 2.5) - 2.5, _ERFINV_CENTRAL)
    far = _polynomial(torch.sqrt(torch.where(central, 9.0, w)) - 3.0, _ERFINV_TAIL)
    x = torch.where(central, near, far) * y
    x = x - (torch.erf(x) - y) / (_TWO_OVER_SQRT_PI * torch.exp(-x * x))
    magnitude = torch.abs(y)
    x = torch.where(magnitude > 1.0, NAN, x)
    return torch.where(magnitude == 1.0, torch.where(y > 0.0, INFINITY, -INFINITY), x)


# Numerical Recipes (2nd ed., 6.2) erfcc: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), relative error below
# 1.2e-7 for z >= 0; P's coefficients here from the highest power down
_ERFC_FIT = (
    0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368,
    -1.26551223,
)  # fmt: skip


def _erfcx(x: Tensor) -> Tensor:
    """The scaled complementary error function exp(x^2) erfc(x): t exp(P(t)) from the fit of erfc, which never
    forms the underflowing erfc(x) of large x; negative x by erfcx(x) = 2 exp(x^2) - erfcx(-x)."""
    t = 1.0 / (1.0 + 0.5 * torch.abs(x))
    scaled = t * torch.exp(_polynomial(t, _ERFC_FIT))
    return torch.where(x < 0.0, 2.0 * torch.exp(x * x) - scaled, scaled)


# ---- modified Bessel functions -----------------------------------------------------------------------------------

# Cephes i0.c: A, Chebyshev coefficients of exp(-x) I0(x) on [0, 8]; B, of exp(-x) sqrt(x) I0(x) on [8, inf)
_I0_A = (
    -4.4153416464793395e-18,
    3.3307945188222384e-17,
    -2.431279846547955e-16,
    1.715391285555133e-15,
    -1.1685332877993451e-14,
    7.676185498604936e-14,
    -4.856446783111929e-13,
    2.95505266312964e-12,
    -1.726826291441556e-11,
    9.675809035373237e-11,
    -5.189795601635263e-10,
    2.6598237246823866e-09,
    -1.300025009986248e-08,
    6.046995022541919e-08,
    -2.670793853940612e-07,
    1.1173875391201037e-06,
    -4.4167383584587505e-06,
    1.6448448070728896e-05,
    -5.754195010082104e-05,
    0.00018850288509584165,
    -0.0005763755745385824,
    0.0016394756169413357,
    -0.004324309995050576,
    0.010546460394594998,
    -0.02373741480589947,
    0.04930528423967071,
    -0.09490109704804764,
    0.17162090152220877,
    -0.3046826723431984,
    0.6767952744094761,
)
_I0_B = (
    -7.233180487874754e-18,
    -4.830504485944182e-18,
    4.46562142029676e-17,
    3.461222867697461e-17,
    -2.8276239805165836e-16,
    -3.425485619677219e-16,
    1.7725601330565263e-15,
    3.8116806693526224e-15,
    -9.554846698828307e-15,
    -4.150569347287222e-14,
    1.54008621752141e-14,
    3.8527783827421426e-13,
    7.180124451383666e-13,
    -1.7941785315068062e-12,
    -1.3215811840447713e-11,
    -3.1499165279632416e-11,
    1.1889147107846439e-11,
    4.94060238822497e-10,
    3.3962320257083865e-09,
    2.266668990498178e-08,
    2.0489185894690638e-07,
    2.8913705208347567e-06,
    6.889758346916825e-05,
    0.0033691164782556943,
    0.8044904110141088,
)

# Cephes i1.c: A, of exp(-x) I1(x) / x on [0, 8]; B, of exp(-x) sqrt(x) I1(x) on [8, inf)
_I1_A = (
    2.7779141127610464e-18,
    -2.111421214358166e-17,
    1.5536319577362005e-16,
    -1.1055969477353862e-15,
    7.600684294735408e-15,
    -5.042185504727912e-14,
    3.223793365945575e-13,
    -1.9839743977649436e-12,
    1.1736186298890901e-11,
    -6.663489723502027e-11,
    3.625590281552117e-10,
    -1.8872497517228294e-09,
    9.381537386495773e-09,
    -4.445059128796328e-08,
    2.0032947535521353e-07,
    -8.568720264695455e-07,
    3.4702513081376785e-06,
    -1.3273163656039436e-05,
    4.781565107550054e-05,
    -0.00016176081582589674,
    0.0005122859561685758,
    -0.0015135724506312532,
    0.004156422944312888,
    -0.010564084894626197,
    0.024726449030626516,
    -0.05294598120809499,
    0.1026436586898471,
    -0.17641651835783406,
    0.25258718644363365,
)
_I1_B = (
    7.517296310842105e-18,
    4.414348323071708e-18,
    -4.6503053684893586e-17,
    -3.209525921993424e-17,
    2.96262899764595e-16,
    3.3082023109209285e-16,
    -1.8803547755107825e-15,
    -3.8144030724370075e-15,
    1.0420276984128802e-14,
    4.272440016711951e-14,
    -2.1015418427726643e-14,
    -4.0835511110921974e-13,
    -7.198551776245908e-13,
    2.0356285441470896e-12,
    1.4125807436613782e-11,
    3.2526035830154884e-11,
    -1.8974958123505413e-11,
    -5.589743462196584e-10,
    -3.835380385964237e-09,
    -2.6314688468895196e-08,
    -2.512236237870209e-07,
    -3.882564808877691e-06,
    -0.00011058893876262371,
    -0.009761097491361469,
    0.7785762350182801,
)

# Cephes k0.c: A, of K0(x) + log(x/2) I0(x) on [0, 2]; B, of exp(x) sqrt(x) K0(x) on [2, inf)
_K0_A = (
    1.374465435613523e-16,
    4.25981614279661e-14,
    1.0349695257633842e-11,
    1.904516377220209e-09,
    2.5347910790261494e-07,
    2.286212103119452e-05,
    0.001264615411446926,
    0.0359799365153615,
    0.3442898999246285,
    -0.5353273932339028,
)
_K0_B = (
    5.300433772686263e-18,
    -1.6475804301524212e-17,
    5.2103915050390274e-17,
    -1.678231096805412e-16,
    5.512055978524319e-16,
    -1.848593377343779e-15,
    6.3400764774050706e-15,
    -2.2275133269916698e-14,
    8.032890775363575e-14,
    -2.9800969231727303e-13,
    1.140340588208475e-12,
    -4.514597883373944e-12,
    1.8559491149547177e-11,
    -7.957489244477107e-11,
    3.577397281400301e-10,
    -1.69753450938906e-09,
    8.574034017414225e-09,
    -4.660489897687948e-08,
    2.766813639445015e-07,
    -1.8317555227191195e-06,
    1.39498137188765e-05,
    -0.00012849549581627802,
    0.0015698838857300533,
    -0.0314481013119645,
    2.4403030820659555,
)

# Cephes k1.c: A, of x (K1(x) - log(x/2) I1(x)) on [0, 2]; B, of exp(x) sqrt(x) K1(x) on [2, inf)
_K1_A = (
    -7.023863479386288e-18,
    -2.427449850519366e-15,
    -6.666901694199329e-13,
    -1.4114883926335278e-10,
    -2.213387630734726e-08,
    -2.4334061415659684e-06,
    -0.0001730288957513052,
    -0.006975723859639864,
    -0.12261118082265715,
    -0.3531559607765449,
    1.5253002273389478,
)
_K1_B = (
    -5.756744483665017e-18,
    1.7940508731475592e-17,
    -5.689462558442859e-17,
    1.838093544366639e-16,
    -6.057047248373319e-16,
    2.038703165624334e-15,
    -7.019837090418314e-15,
    2.4771544244813043e-14,
    -8.976705182324994e-14,
    3.3484196660784293e-13,
    -1.2891739609510289e-12,
    5.13963967348173e-12,
    -2.1299678384275683e-11,
    9.218315187605006e-11,
    -4.1903547593418965e-10,
    2.015049755197033e-09,
    -1.0345762465678097e-08,
    5.7410841254500495e-08,
    -3.5019606030878126e-07,
    2.406484947837217e-06,
    -1.936197974166083e-05,
    0.00019521551847135162,
    -0.002857816859622779,
    0.10392373657681724,
    2.7206261904844427,
)


def _i0e_near(a: Tensor) -> Tensor:
    """exp(-a) I0(a) for 0 <= a <= 8."""
    return _chebyshev_series(0.5 * a - 2.0, _I0_A)


def _i1e_near(a: Tensor) -> Tensor:
    """exp(-a) I1(a) for 0 <= a <= 8."""
    return _chebyshev_series(0.5 * a - 2.0, _I1_A) * a


def _scaled_i0_of_magnitude(a: Tensor) -> Tensor:
    """exp(-a) I0(a) for a = |x| >= 0 (Cephes i0e)."""
    near = a <= 8.0
    small = _i0e_near(torch.where(near, a, 8.0))
    far_a = torch.where(near, 8.0, a)
    large = _chebyshev_series(32.0 / far_a - 2.0, _I0_B) / torch.sqrt(far_a)
    return torch.where(near, small, large)


def _scaled_i1_of_magnitude(a: Tensor) -> Tensor:
    """exp(-a) I1(a) for a = |x| >= 0 (Cephes i1e)."""
    near = a <= 8.0
    small = _i1e_near(torch.where(near, a, 8.0))
    far_a = torch.where(near, 8.0, a)
    large = _chebyshev_series(32.0 / far_a - 2.0, _I1_B) / torch.sqrt(far_a)
    return torch.where(near, small, large)


def _i0(x: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 0 (Cephes i0.c)."""
    a = torch.abs(x)
    return torch.exp(a) * _scaled_i0_of_magnitude(a)


def _i0e(x: Tensor) -> Tensor:
    """exp(-|x|) I0(x) (Cephes i0e)."""
    return _scaled_i0_of_magnitude(torch.abs(x))


def _i1(x: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 1 (Cephes i1.c), odd in x."""
    a = torch.abs(x)
    value = torch.exp(a) * _scaled_i1_of_magnitude(a)
    return torch.where(x < 0.0, -value, value)


def _i1e(x: Tensor) -> Tensor:
    """exp(-|x|) I1(x) (Cephes i1e), odd in x."""
    value = _scaled_i1_of_magnitude(torch.abs(x))
    return torch.where(x < 0.0, -value, value)


def _k_domain(x: Tensor, value: Tensor) -> Tensor:
    """K0, K1 and their scaled forms: +inf at 0 and NaN for negative x, as eager."""
    value = torch.where(x < 0.0, NAN, value)
    return torch.where(x == 0.0, INFINITY, value)


def _k0_parts(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(near, far, near mask) of K0 (Cephes k0.c): near is K0(x) for x <= 2, far is exp(x) K0(x) beyond."""
    near = x <= 2.0
    xn = torch.where(near, x, 1.0)
    small = _chebyshev_series(xn * xn - 2.0, _K0_A) - (torch.log(xn) - _LOG_TWO) * torch.exp(xn) * _i0e_near(xn)
    xf = torch.where(near, 4.0, x)
    large = _chebyshev_series(8.0 / xf - 2.0, _K0_B) / torch.sqrt(xf)
    return small, large, near


def _k1_parts(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(near, far, near mask) of K1 (Cephes k1.c): near is K1(x) for x <= 2, far is exp(x) K1(x) beyond."""
    near = x <= 2.0
    xn = torch.where(near, x, 1.0)
    small = (torch.log(xn) - _LOG_TWO) * torch.exp(xn) * _i1e_near(xn) + _chebyshev_series(xn * xn - 2.0, _K1_A) / xn
    xf = torch.where(near, 4.0, x)
    large = _chebyshev_series(8.0 / xf - 2.0, _K1_B) / torch.sqrt(xf)
    return small, large, near


def _k0(x: Tensor) -> Tensor:
    """The modified Bessel function of the second kind of order 0."""
    small, large, near = _k0_parts(x)
    return _k_domain(x, torch.where(near, small, torch.exp(-x) * large))


def _k1(x: Tensor) -> Tensor:
    """The modified Bessel function of the second kind of order 1."""
    small, large, near = _k1_parts(x)
    return _k_domain(x, torch.where(near, small, torch.exp(-x) * large))


def _scaled_k0(x: Tensor) -> Tensor:
    """exp(x) K0(x)."""
    small, large, near = _k0_parts(x)
    return _k_domain(x, torch.where(near, small * torch.exp(torch.where(near, x, 0.0)), large))


def _scaled_k1(x: Tensor) -> Tensor:
    """exp(x) K1(x)."""
    small, large, near = _k1_parts(x)
    return _k_domain(x, torch.where(near, small * torch.exp(torch.where(near, x, 0.0)), large))


# ---- Bessel functions --------------------------------------------------------------------------------------------

# Cephes j0.c: RP/RQ, J0(x) / ((x^2 - r1^2)(x^2 - r2^2)) on [0, 5] in x^2 (r1, r2 its first two zeros); YP/YQ,
# Y0(x) - (2/pi) log(x) J0(x) on [0, 5]; PP/PQ and QP/QQ, the modulus and phase terms of Hankel's asymptotic form
# (A&S 9.2.5) in 25 / x^2 beyond 5
_J0_RP = (
    -4794432209.782018,
    1956174919465.5657,
    -249248344360967.72,
    9708622510473064.0,
)
_J0_RQ = (
    499.563147152651,
    173785.4016763747,
    48440965.83399621,
    11185553704.535683,
    2112775201154.892,
    310518229857422.56,
    3.1812195594320496e16,
    1.7108629408104315e18,
)
_Y0_YP = (
    15592.436785523574,
    -14663929.59039716,
    5435264770.518765,
    -982136065717.9115,
    87590639439536.7,
    -3466283033847297.0,
    4.4273326857256984e16,
    -1.8495080043698668e16,
)
_Y0_YQ = (
    1041.2835366425984,
    626107.330137135,
    268919633.39381415,
    86400248710.3935,
    20297961275010.555,
    3171577528429750.5,
    2.5059625617265306e17,
)
_J0_PP = (
    0.0007969367292973471,
    0.08283523921074408,
    1.239533716464143,
    5.447250030587687,
    8.74716500199817,
    5.303240382353949,
    1.0,
)
_J0_PQ = (
    0.0009244088105588637,
    0.08562884743544745,
    1.2535274390105895,
    5.470977403304171,
    8.761908832370695,
    5.306052882353947,
    1.0,
)
_J0_QP = (
    -0.011366383889846916,
    -1.2825271867050931,
    -19.553954425773597,
    -93.20601521237683,
    -177.68116798048806,
    -147.07750515495118,
    -51.41053267665993,
    -6.050143506007285,
)
_J0_QQ = (
    64.3178256118178,
    856.4300259769806,
    3882.4018360540163,
    7240.467741956525,
    5930.727011873169,
    2062.0933166032783,
    242.0057402402914,
)
_J0_ZERO_1_SQUARED = 5.78318596294678452118
_J0_ZERO_2_SQUARED = 30.4712623436620863991

# Cephes j1.c, the same forms for order 1 (RP/RQ divide J1(x) / x by its zeros' factors; YP/YQ give
# Y1(x) - (2/pi) (J1(x) log(x) - 1/x), divided by x)
_J1_RP = (
    -899971225.7055594,
    452228297998.19403,
    -72749424522181.83,
    3682957328638529.0,
)
_J1_RQ = (
    620.8364781180543,
    256987.25675774884,
    83514679.14319493,
    22151159547.97925,
    4749141220799.914,
    784369607876235.9,
    8.952223361846274e16,
    5.322786203326801e18,
)
_Y1_YP = (
    1263204747.9017804,
    -647355876379.1603,
    114509511541823.73,
    -8127702555013251.0,
    2.024394757135949e17,
    -7.788771962659501e17,
)
_Y1_YQ = (
    594.3015923461282,
    235564.09294306856,
    73481194.44597217,
    18760131610.870617,
    3882312774962.3857,
    620557727146953.8,
    6.871410873553005e16,
    3.9727060811656064e18,
)
_J1_PP = (
    0.0007621256162081731,
    0.07313970569409176,
    1.1271960812968493,
    5.112079511468076,
    8.424045901417724,
    5.214515986823615,
    1.0,
)
_J1_PQ = (
    0.0005713231280725487,
    0.06884559087544954,
    1.105142326340617,
    5.073863861286015,
    8.399855543276042,
    5.209828486823619,
    1.0,
)
_J1_QP = (
    0.05108625947501766,
    4.982138729512334,
    75.82382841325453,
    366.7796093601508,
    710.8563049989261,
    597.4896124006136,
    211.68875710057213,
    25.207020585802372,
)
_J1_QQ = (
    74.23732770356752,
    1056.4488603826283,
    4986.410583376536,
    9562.318924047562,
    7997.041604473507,
    2826.1927851763908,
    336.0936078106983,
)
_J1_ZERO_1_SQUARED = 14.6819706421238932572
_J1_ZERO_2_SQUARED = 49.2184563216946036703
_SQRT_TWO_OVER_PI = math.sqrt(2.0 / math.pi)
_TWO_OVER_PI = 2.0 / math.pi


def _hankel(x: Tensor, order: int) -> tuple[Tensor, Tensor, Tensor]:
    """(P, Q, phase) of the asymptotic form J(x) = sqrt(2 / (pi x)) (P cos(phase) - 5/x Q sin(phase)),
    Y(x) = sqrt(2 / (pi x)) (P sin(phase) + 5/x Q cos(phase)), phase = x - (2 order + 1) pi / 4, for x > 5."""
    pp, pq, qp, qq = (_J0_PP, _J0_PQ, _J0_QP, _J0_QQ) if order == 0 else (_J1_PP, _J1_PQ, _J1_QP, _J1_QQ)
    five_over_x = 5.0 / x
    w = five_over_x * five_over_x
    p = _polynomial(w, pp) / _polynomial(w, pq)
    q = _polynomial(w, qp) / _polynomial(w, qq)
    return p, q, x - (2 * order + 1) * math.pi / 4


def _bessel_j_far(x: Tensor, order: int) -> Tensor:
    p, q, phase = _hankel(x, order)
    return (p * _cos(phase) - 5.0 / x * q * torch.sin(phase)) * _SQRT_TWO_OVER_PI / torch.sqrt(x)


def _bessel_y_far(x: Tensor, order: int) -> Tensor:
    p, q, phase = _hankel(x, order)
    return (p * torch.sin(phase) + 5.0 / x * q * _cos(phase)) * _SQRT_TWO_OVER_PI / torch.sqrt(x)


def _j0_near(a: Tensor) -> Tensor:
    """J0 on [0, 5] (1 - x^2/4 below 1e-5, as Cephes)."""
    z = a * a
    value = (z - _J0_ZERO_1_SQUARED) * (z - _J0_ZERO_2_SQUARED) * _polynomial(z, _J0_RP) / _polynomial(z, _J0_RQ)
    return torch.where(a < 1e-5, 1.0 - 0.25 * z, value)


def _j1_near(x: Tensor) -> Tensor:
    """J1 on [-5, 5]."""
    z = x * x
    ratio = _polynomial(z, _J1_RP) / _polynomial(z, _J1_RQ)
    return ratio * x * (z - _J1_ZERO_1_SQUARED) * (z - _J1_ZERO_2_SQUARED)


def _bessel_j0(x: Tensor) -> Tensor:
    """The Bessel function of the first kind of order 0 (Cephes j0.c)."""
    a = torch.abs(x)
    near = a <= 5.0
    return torch.where(near, _j0_near(torch.where(near, a, 1.0)), _bessel_j_far(torch.where(near, 10.0, a), 0))


def _bessel_j1(x: Tensor) -> Tensor:
    """The Bessel function of the first kind of order 1 (Cephes j1.c), odd in x."""
    a = torch.abs(x)
    near = a <= 5.0
    far = _bessel_j_far(torch.where(near, 10.0, a), 1)
    return torch.where(near, _j1_near(torch.where(near, x, 1.0)), torch.where(x < 0.0, -far, far))


def _bessel_y0(x: Tensor) -> Tensor:
    """The Bessel function of the second kind of order 0 (Cephes j0.c y0): -inf at 0, NaN for negative x."""
    near = x <= 5.0
    xn = torch.where(near & (x > 0.0), x, 1.0)
    small = _polynomial(xn * xn, _Y0_YP) / _polynomial(xn * xn, _Y0_YQ) + _TWO_OVER_PI * torch.log(xn) * _j0_near(xn)
    value = torch.where(near, small, _bessel_y_far(torch.where(near, 10.0, x), 0))
    value = torch.where(x < 0.0, NAN, value)
    return torch.where(x == 0.0, -INFINITY, value)


def _bessel_y1(x: Tensor) -> Tensor:
    """The Bessel function of the second kind of order 1 (Cephes j1.c y1): -inf at 0, NaN for negative x."""
    near = x <= 5.0
    xn = torch.where(near & (x > 0.0), x, 1.0)
    ratio = _polynomial(xn * xn, _Y1_YP) / _polynomial(xn * xn, _Y1_YQ)
    small = xn * ratio + _TWO_OVER_PI * (_j1_near(xn) * torch.log(xn) - 1.0 / xn)
    value = torch.where(near, small, _bessel_y_far(torch.where(near, 10.0, x), 1))
    value = torch.where(x < 0.0, NAN, value)
    return torch.where(x == 0.0, -INFINITY, value)


def _spherical_bessel_j0(x: Tensor) -> Tensor:
    """sin(x) / x, by its Maclaurin series below |x| = 1/2 (where the quotient loses digits); 0 at +-inf."""
    z = x * x
    series = _polynomial(z, (1 / 6227020800, -1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6, 1.0))
    near = torch.abs(x) < 0.5
    xf = torch.where(near, 1.0, x)
    value = torch.where(near, series, torch.sin(xf) / xf)
    return torch.where(torch.isinf(x), 0.0, value)


# Cephes airy.c: AN/AD, the asymptotic Ai(x) of x >= 2.09 in 1 / zeta (zeta = 2/3 x^(3/2)); AFN/AFD and AGN/AGD,
# the modulus terms of the oscillating asymptotic form for x < -2.09, in 1 / zeta^2
_AIRY_AN = (
    0.346538101525629,
    12.007595273964581,
    76.27960536152345,
    168.08922493463058,
    159.75639135016442,
    70.53609068404442,
    14.026469116338967,
    1.0,
)
_AIRY_AD = (
    0.5675945326387702,
    14.75625625848472,
    84.51389701414746,
    177.31808814540045,
    164.2346928715297,
    71.47784008255756,
    14.095913560783403,
    1.0,
)
_AIRY_AFN = (
    -0.1316963234183318,
    -0.6264565444319123,
    -0.6931580360369335,
    -0.2797799815451191,
    -0.04919001326095003,
    -0.004062659235948854,
    -0.0001592764962392621,
    -2.776491081552329e-06,
    -1.6778769848911465e-08,
)
_AIRY_AFD = (
    13.356042070655324,
    32.682503279522464,
    26.736704094149957,
    9.187074029072596,
    1.4752914677166642,
    0.11568717379518804,
    0.004402916416152112,
    7.547203482874142e-05,
    4.5185009297058035e-07,
)
_AIRY_AGN = (
    0.01973399320916857,
    0.39110302961568827,
    1.0657989759959559,
    0.9391692298166502,
    0.35146565610554764,
    0.06338889196289255,
    0.005858041130483885,
    0.000282851600836737,
    6.98793669997261e-06,
    8.117892395543892e-08,
    3.415517847659236e-10,
)
_AIRY_AGD = (
    9.30892908077442,
    19.835292871831214,
    15.564662893286462,
    5.476860694229755,
    0.9542936116189619,
    0.08645808263523921,
    0.004126565238242226,
    0.00010125908511650914,
    1.1716673321441352e-06,
    4.9183457006293e-09,
)
_ONE_OVER_SQRT_PI = 1.0 / math.sqrt(math.pi)
# Ai(0) and -Ai'(0) (A&S 10.4.4-10.4.5)
_AIRY_C1 = 0.355028053887817239260
_AIRY_C2 = 0.258819403792806798405
# Terms of the Maclaurin series: on |x| < 2.09, term k is at most 9.13^k / (3k)!, below fp32's epsilon from 11 on
_AIRY_SERIES_TERMS = 12


def _airy_ai(x: Tensor) -> Tensor:
    """The Airy function Ai (Cephes airy.c): the Maclaurin series Ai = c1 f - c2 g (A&S 10.4.2) on |x| < 2.09,
    asymptotic forms beyond (A&S 10.4.59, 10.4.60); 0 above 103.892, NaN at +-inf, as eager."""
    negative = x < -2.09
    xn = torch.where(negative, x, -4.0)
    root = torch.sqrt(-xn)
    # a true division by 3, as eager rounds it (a scalar divisor would become a product with 1/3): the phase zeta
    # of large |x| keeps few fractional bits, and one unit of rounding there moves the result visibly
    zeta = -2.0 * xn * root / torch.full_like(xn, 3.0)
    z = 1.0 / zeta
    zz = z * z
    modulus = 1.0 + zz * _polynomial(zz, _AIRY_AFN) / _polynomial(zz, _AIRY_AFD)
    phase_term = z * _polynomial(zz, _AIRY_AGN) / _polynomial(zz, _AIRY_AGD)
    theta = zeta + 0.25 * math.pi
    oscillating = _ONE_OVER_SQRT_PI / torch.sqrt(root) * (torch.sin(theta) * modulus - _cos(theta) * phase_term)

    positive = x >= 2.09
    xp = torch.where(positive, x, 4.0)
    zeta_p = 2.0 * xp * torch.sqrt(xp) / 3.0
    inverse = 1.0 / zeta_p
    ratio = _polynomial(inverse, _AIRY_AN) / _polynomial(inverse, _AIRY_AD)
    decaying = _ONE_OVER_SQRT_PI * ratio / (2.0 * torch.sqrt(torch.sqrt(xp)) * torch.exp(zeta_p))

    xs = torch.where(negative | positive, 0.0, x)
    cube = xs * xs * xs
    f = torch.ones_like(xs)
    g = xs
    f_term = torch.ones_like(xs)
    g_term = xs
    k = 1.0
    for _ in range(_AIRY_SERIES_TERMS):
        f_term = f_term * cube / ((k + 1.0) * (k + 2.0))
        g_term = g_term * cube / ((k + 2.0) * (k + 3.0))
        f = f + f_term
        g = g + g_term
        k += 3.0
    series = _AIRY_C1 * f - _AIRY_C2 * g

    value = torch.where(negative, oscillating, torch.where(positive, decaying, series))
    value = torch.where(x > 103.892, 0.0, value)
    return torch.where(torch.isinf(x), NAN, value)


# ---- Chebyshev polynomials ---------------------------------------------------------------------------------------

# Eager evaluates T_n, U_n, V_n, W_n (and the shifted ones, at 2x - 1) by the three-term recurrence
# r_k = 2x r_(k-1) - r_(k-2), n steps of it, except inside (-1, 1) above a small n, where it takes the
# trigonometric closed form. n is per element, so its loop count is data: here the recurrence is unrolled to
# _CHEBYSHEV_RECURRENCE_STEPS and every larger n takes a closed form, trigonometric inside (-1, 1) and hyperbolic
# outside (J. C. Mason and D. C. Handscomb, "Chebyshev Polynomials", CRC 2003, sections 1.2-1.3; with
# x = cos(theta), resp. cosh(t): T_n = cos(n theta), U_n = sin((n+1) theta) / sin(theta),
# V_n = cos((n+1/2) theta) / cos(theta/2), W_n = sin((n+1/2) theta) / sin(theta/2)).
_CHEBYSHEV_RECURRENCE_STEPS = 8
# log(FLT_MAX): eager's fp32 recurrence overflows to inf where the polynomial's magnitude passes it, and two
# steps later computes inf - inf
_LOG_FLOAT32_MAX = math.log(torch.finfo(torch.float32).max)
# static_cast<int64_t> of eager: NaN and magnitudes from 2^63 on become INT64_MIN, a negative degree
_INT64_LIMIT = 2.0**63


class _Chebyshev:
    """One kind: its first-degree polynomial (a, b: a x + b), the offset c of its angle's multiplier n + c, and
    which closed form it has."""

    def __init__(self, linear: tuple[float, float], offset: float, cosine_at_positive: bool) -> None:
        self.linear = linear
        self.offset = offset
        # whether the closed form at x >= 0 has a cosine (cosh) numerator; x < 0 is reflected,
        # X_n(-x) = (-1)^n X'_n(x), where V and W swap and T, U stay themselves
        self.cosine_at_positive = cosine_at_positive


_CHEBYSHEV = {
    "t": _Chebyshev((1.0, 0.0), 0.0, True),
    "u": _Chebyshev((2.0, 0.0), 1.0, False),
    "v": _Chebyshev((2.0, -1.0), 0.5, True),
    "w": _Chebyshev((2.0, 1.0), 0.5, False),
}


def _degree(n: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(n truncated towards zero as fp32, whether eager's int64 conversion makes it negative, n's parity as 0/1)."""
    if n.dtype.is_floating_point:
        n32 = n.to(torch.float32)
        degree = torch.trunc(n32)
        negative = (degree < 0.0) | torch.isnan(n32) | (torch.abs(degree) >= _INT64_LIMIT)
        parity = torch.abs(torch.fmod(degree, 2.0))
        return degree, negative, parity
    degree = n.to(torch.float32)
    return degree, n < 0, torch.remainder(n, 2).to(torch.float32)


def _chebyshev(kind: str, x: Tensor, n: Tensor, trig_above: int, snap_to_parity: bool = False) -> Tensor:
    """The Chebyshev polynomial of `kind` at fp32 x, degree n (any dtype), as eager computes it.

    Up to _CHEBYSHEV_RECURRENCE_STEPS eager's recurrence, step for step; above that eager's own trigonometric form
    inside (-1, 1) (it switches above `trig_above`). Outside [-1, 1] the hyperbolic form replaces eager's n steps:
    with t = acosh|x|, the numerator e^(m t) +- e^(-m t) (m = n + c) over the kind's denominator, where
    sinh(t) = sqrt((|x| - 1)(|x| + 1)), cosh(t/2) = sqrt((|x| + 1) / 2) and sinh(t/2) = sqrt((|x| - 1) / 2) come
    from |x| without cancellation. Its logarithm tells where eager's recurrence overflows: inf from the degree
    whose magnitude passes fp32's largest value, NaN (inf - inf) two degrees later. Negative x by reflection, so
    that the angle theta = acos|x| lies in [0, pi/2], where the half-angle denominators keep their precision.
    """
    chebyshev = _CHEBYSHEV[kind]
    degree, negative_degree, parity = _degree(n)
    x, degree = torch.broadcast_tensors(x, degree)  # type: ignore[no-untyped-call]  # unannotated in torch
    sign = torch.where((x < 0.0) & (parity == 1.0), -1.0, 1.0)

    # eager's recurrence, unrolled; the value of degree k is picked where n == k
    a, b = chebyshev.linear
    twice = x + x
    previous = torch.ones_like(x)
    current = a * x + b if b != 0.0 else (twice if a == 2.0 else x)
    recurred = torch.where(degree == 0.0, previous, current)
    for k in range(2, _CHEBYSHEV_RECURRENCE_STEPS + 1):
        previous, current = current, twice * current - previous
        recurred = torch.where(degree == float(k), current, recurred)

    magnitude = torch.abs(x)
    inside = magnitude < 1.0
    cosine = torch.full_like(x, chebyshev.cosine_at_positive, dtype=torch.bool)
    if kind in ("v", "w"):
        cosine = cosine == (x >= 0.0)
    multiplier = degree + chebyshev.offset

    # inside (-1, 1): theta in [0, pi/2]
    theta = torch.acos(torch.where(inside, magnitude, 0.5))
    angle = multiplier * theta
    trig_numerator = torch.where(cosine, _cos(angle), torch.sin(angle))
    if kind == "t":
        trig_denominator: Tensor | float = 1.0
    elif kind == "u":
        trig_denominator = torch.sin(theta)
    else:
        trig_denominator = torch.where(cosine, _cos(0.5 * theta), torch.sin(0.5 * theta))
    trigonometric = sign * trig_numerator / trig_denominator
    if kind in ("v", "w"):
        # where cos(theta/2) rounds to 1 in fp32 (|x| >= 1 - 2^-23) eager returns the limit 2n + 1, except
        # for shifted W, which returns (-1)^n there (`snap_to_parity`)
        snapped = ~cosine & (magnitude >= 1.0 - 2.0**-23)
        limit = 1.0 - 2.0 * parity if snap_to_parity else sign * (2.0 * degree + 1.0)
        trigonometric = torch.where(snapped, limit, trigonometric)

    # outside [-1, 1]: t = acosh|x| = log1p((|x| - 1) + sqrt((|x| - 1)(|x| + 1)))
    outer = torch.where(inside, 2.0, magnitude)
    below, above = torch.sqrt(outer - 1.0), torch.sqrt(outer + 1.0)
    t = torch.log1p((outer - 1.0) + below * above)
    if kind == "t":
        log_denominator: Tensor | float = _LOG_TWO  # cosh(m t) = (e^(m t) + e^(-m t)) / 2
    elif kind == "u":
        log_denominator = _LOG_TWO + torch.log(below) + torch.log(above)
    else:
        half = torch.where(cosine, above, below)  # sqrt(2) cosh(t/2), resp. sqrt(2) sinh(t/2)
        log_denominator = 0.5 * _LOG_TWO + torch.log(half)
    growth = multiplier * t - log_denominator
    decay = torch.exp(-multiplier * t - log_denominator)
    hyperbolic = sign * torch.where(cosine, torch.exp(growth) + decay, torch.exp(growth) - decay)
    hyperbolic = torch.where(growth > _LOG_FLOAT32_MAX, sign * INFINITY, hyperbolic)
    hyperbolic = torch.where((multiplier - 2.0) * t - log_denominator > _LOG_FLOAT32_MAX, NAN, hyperbolic)

    value = torch.where(inside, trigonometric, hyperbolic)
    value = torch.where(
        (degree <= float(_CHEBYSHEV_RECURRENCE_STEPS)) & ~(inside & (degree > trig_above)), recurred, value
    )
    # x = +-1: eager's exact values (the closed forms divide 0 by 0 there)
    at_one = {"t": 1.0, "u": degree + 1.0, "v": 1.0, "w": 2.0 * degree + 1.0}[kind]
    at_minus_one = {"t": 1.0, "u": degree + 1.0, "v": 2.0 * degree + 1.0, "w": 1.0}[kind]
    value = torch.where(x == 1.0, at_one, torch.where(x == -1.0, sign * at_minus_one, value))
    return torch.where(negative_degree, 0.0, value)


def _chebyshev_decomposition(kind: str, shifted: bool) -> Callable[[Tensor | float, Tensor | float], Tensor]:
    """`aten.special_[shifted_]chebyshev_polynomial_<kind>` and its Python-number overloads. The shifted
    polynomials are eager's own at 2x - 1 (x + x - 1 in fp32, as eager rounds it); eager leaves its recurrence
    for the trigonometric form above n = 6 for T, U, V shifted or not, above n = 8 for unshifted U, V, W and above
    n = 4 for shifted W."""
    trig_above = (4 if kind == "w" else 6) if shifted else (6 if kind == "t" else 8)

    def decomposition(x: Tensor | float, n: Tensor | float) -> Tensor:
        operands = _polynomial_operands(x, n)
        if operands is None:
            return NotImplemented
        dtype, like, x32 = operands
        degree = n if isinstance(n, Tensor) else torch.full_like(like, float(n), dtype=torch.float32)
        if shifted:
            x32 = x32 + x32 - 1.0
        return _chebyshev(kind, x32, degree, trig_above, snap_to_parity=shifted and kind == "w").to(dtype)

    decomposition.__name__ = f"{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"
    return decomposition


# ---- Hermite, Laguerre and Legendre polynomials ------------------------------------------------------------------

# Eager evaluates each of these by its three-term recurrence in fp32 (A&S 22.7.10-13; with k the degree reached):
#   Hermite H     H_(k+1) = 2x H_k - 2k H_(k-1)                        H_0 = 1, H_1 = 2x
#   Hermite He    He_(k+1) = x He_k - k He_(k-1)                       He_0 = 1, He_1 = x
#   Laguerre      L_(k+1) = ((2k + 1 - x) L_k - k L_(k-1)) / (k + 1)   L_0 = 1, L_1 = 1 - x
#   Legendre      P_(k+1) = ((2k + 1) x P_k - k P_(k-1)) / (k + 1)     P_0 = 1, P_1 = x
# running n - 1 steps for an element of degree n, a count the data decides. Here the recurrence is unrolled to a
# fixed number of steps, each step's value picked where the degree equals it, with eager's operations in eager's
# order (so the values are eager's, not merely close to them).
#
# Eager's loop is compiled with each step's multiply and subtract fused into one rounding; ours rounds the product
# first. Where the polynomial is well conditioned the two agree to a few ulps; next to a root, where the
# recurrence cancels digits, both lose digits in proportion (ours within fp32 tolerance of the float64
# polynomial, relative to the degree's largest magnitude over x, or as close to it as eager); and within a
# factor ~100 of fp32's largest value, the two overflow at different steps, so one may give +-inf or NaN where the
# other still has a finite value.
#
# Hermite: eager returns NaN above degree 128, and its recurrence is NaN for every x well before that: once a
# value overflows to +-inf, the next is inf too and the one after is inf - inf (at x = 0 already 0 x inf). The
# orthonormal values He_k / sqrt(k!) (resp. H_k / sqrt(2^k k!)) stay of order one at one of every two
# consecutive degrees (A&S 22.14.17 bounds them above; the recurrence keeps them from falling together), so
# the unnormalised ones pass fp32's largest value once sqrt(k!) does, at k ~ 57. Eager's last degree with any
# value other than NaN, on a dense sample of x (every 1.5e-5 of [-15, 15], 10^6 normal draws, and both signs of
# 1e-40 ... 10 by 10^5 decades), is 52 for H and 60 for He; the recurrence here runs to those degrees and gives
# NaN above them.
_HERMITE_H_LAST_FINITE_DEGREE = 52
_HERMITE_HE_LAST_FINITE_DEGREE = 60
# Laguerre and Legendre stay finite at any degree inside their intervals of orthogonality (|P_n(x)| <= 1 on
# [-1, 1], |L_n(x)| <= e^(x/2) for x >= 0: A&S 22.14.7, 22.14.12), so no degree is NaN everywhere. A graph
# computes them to this degree; a larger degree in a tensor fails the call with a message naming the function
# (checked on the core, raised by the host), and a larger Python-number degree leaves the op to the CPU.
ORTHOGONAL_POLYNOMIAL_MAX_DEGREE = 64


def _unrolled_recurrence(
    x: Tensor,
    degree: Tensor,
    first: Tensor,
    step: Callable[[float, Tensor, Tensor], Tensor],
    last: int,
) -> Tensor:
    """The value of degree `degree` (fp32, truncated; negative handled by the caller) for degrees 0 ... `last`:
    1, `first` and then `step(k, P_(k-1), P_k)` = P_(k+1); larger degrees keep degree 1's value (callers replace
    them)."""
    previous = torch.ones_like(x)
    current = first
    value = torch.where(degree == 0.0, previous, current)
    for k in range(1, last):
        previous, current = current, step(float(k), previous, current)
        value = torch.where(degree == float(k + 1), current, value)
    return value


def _hermite_h_step(x: Tensor) -> Callable[[float, Tensor, Tensor], Tensor]:
    twice = x + x
    return lambda k, previous, current: twice * current - (k + k) * previous


def _hermite_he_step(x: Tensor) -> Callable[[float, Tensor, Tensor], Tensor]:
    return lambda k, previous, current: x * current - k * previous


def _laguerre_step(x: Tensor) -> Callable[[float, Tensor, Tensor], Tensor]:
    one_minus_x = 1.0 - x
    return lambda k, previous, current: ((k + k + one_minus_x) * current - k * previous) / (k + 1.0)


def _legendre_step(x: Tensor) -> Callable[[float, Tensor, Tensor], Tensor]:
    return lambda k, previous, current: ((k + k + 1.0) * x * current - k * previous) / (k + 1.0)


class _Orthogonal:
    """One family: its degree-1 polynomial, its step, the largest degree the unrolled recurrence reaches and
    whether eager's values above it are NaN (Hermite) rather than unreached (Laguerre, Legendre)."""

    def __init__(
        self,
        first: Callable[[Tensor], Tensor],
        step: Callable[[Tensor], Callable[[float, Tensor, Tensor], Tensor]],
        last: int,
        nan_above: bool,
    ) -> None:
        self.first = first
        self.step = step
        self.last = last
        self.nan_above = nan_above


ORTHOGONAL_POLYNOMIALS = {
    "hermite_polynomial_h": _Orthogonal(lambda x: x + x, _hermite_h_step, _HERMITE_H_LAST_FINITE_DEGREE, True),
    "hermite_polynomial_he": _Orthogonal(lambda x: x, _hermite_he_step, _HERMITE_HE_LAST_FINITE_DEGREE, True),
    "laguerre_polynomial_l": _Orthogonal(lambda x: 1.0 - x, _laguerre_step, ORTHOGONAL_POLYNOMIAL_MAX_DEGREE, False),
    "legendre_polynomial_p": _Orthogonal(lambda x: x, _legendre_step, ORTHOGONAL_POLYNOMIAL_MAX_DEGREE, False),
}


def _orthogonal_polynomial(name: str, x: Tensor, n: Tensor | int) -> Tensor:
    """`name`'s polynomial at fp32 x of degree n (a tensor of any dtype, or a Python integer the recurrence is
    unrolled for exactly), as eager computes it, with eager's special cases: 0 at negative degrees (and at NaN
    or infinite ones, which eager's int64 conversion makes negative), Laguerre 1 at x = +-0, Legendre +-1 at
    x = +-1 (-1 only for odd degree at x = -1). A tensor degree above the reach of a family without a NaN
    horizon fails the call (`torch._assert_async`: computed on the core, raised by the host)."""
    family = ORTHOGONAL_POLYNOMIALS[name]
    if isinstance(n, int):
        last = max(1, min(n, family.last))
        degree = torch.full_like(x, float(n))
        negative_degree = torch.full_like(x, n < 0, dtype=torch.bool)
        parity = torch.full_like(x, float(n % 2))
    else:
        degree, negative_degree, parity = _degree(n)
        x, degree, negative_degree, parity = torch.broadcast_tensors(x, degree, negative_degree, parity)  # type: ignore[no-untyped-call]  # unannotated in torch
        last = family.last
        if not family.nan_above:
            torch._assert_async(
                torch.all(negative_degree | (degree <= float(last))),
                f"special.{name}: a degree above {last}, the largest its compiled recurrence reaches; run it "
                f'on the CPU instead (the backend option cpu_ops=["special_{name}"])',
            )
    value = _unrolled_recurrence(x, degree, family.first(x), family.step(x), last)
    if family.nan_above:
        value = torch.where(degree > float(family.last), NAN, value)
    if name == "laguerre_polynomial_l":
        value = torch.where(x == 0.0, 1.0, value)
    elif name == "legendre_polynomial_p":
        at_minus_one = 1.0 - 2.0 * parity
        value = torch.where(x == 1.0, 1.0, torch.where(x == -1.0, at_minus_one, value))
    return torch.where(negative_degree, 0.0, value)


def _orthogonal_decomposition(name: str) -> Callable[[Tensor | float, Tensor | float], Tensor]:
    """`aten.special_<name>` and its Python-number overloads; a Python-number degree above the reach of Laguerre's
    or Legendre's recurrence returns NotImplemented (ATen's kernel runs it)."""
    family = ORTHOGONAL_POLYNOMIALS[name]

    def decomposition(x: Tensor | float, n: Tensor | float) -> Tensor:
        operands = _polynomial_operands(x, n)
        if operands is None:
            return NotImplemented
        dtype, _, x32 = operands
        if isinstance(n, Tensor):
            return _orthogonal_polynomial(name, x32, n).to(dtype)
        # eager converts the number as it does a tensor's elements: NaN, infinities and |n| >= 2^63 are negative
        degree = int(n) if math.isfinite(n) and abs(n) < _INT64_LIMIT else -1
        if degree > family.last and not family.nan_above:
            return NotImplemented
        return _orthogonal_polynomial(name, x32, degree).to(dtype)

    decomposition.__name__ = name
    return decomposition


# ---- the table ---------------------------------------------------------------------------------------------------

lgamma = _unary(_lgamma)
digamma = _unary(_digamma)
erfinv = _unary(_erfinv)
ndtri = _unary(_ndtri)
erfcx = _unary(_erfcx)
i0 = _unary(_i0)
i0e = _unary(_i0e)
i1 = _unary(_i1)
i1e = _unary(_i1e)
modified_bessel_k0 = _unary(_k0)
modified_bessel_k1 = _unary(_k1)
scaled_modified_bessel_k0 = _unary(_scaled_k0)
scaled_modified_bessel_k1 = _unary(_scaled_k1)
bessel_j0 = _unary(_bessel_j0)
bessel_j1 = _unary(_bessel_j1)
bessel_y0 = _unary(_bessel_y0)
bessel_y1 = _unary(_bessel_y1)
spherical_bessel_j0 = _unary(_spherical_bessel_j0)
airy_ai = _unary(_airy_ai)


def special_function_decompositions() -> dict[object, object]:
    """The decompositions of this module, keyed by ATen overload, for AOTAutograd's table."""
    aten = torch.ops.aten
    return {
        aten.lgamma.default: lgamma,
        aten.digamma.default: digamma,
        aten.polygamma.default: polygamma,
        aten.igamma.default: _incomplete_gamma_decomposition(upper=False),
        aten.igammac.default: _incomplete_gamma_decomposition(upper=True),
        aten.special_zeta.default: zeta,
        aten.special_zeta.self_scalar: zeta,
        aten.special_zeta.other_scalar: zeta,
        aten.erfinv.default: erfinv,
        aten.special_ndtri.default: ndtri,
        aten.special_erfcx.default: erfcx,
        aten.i0.default: i0,
        aten.special_i0e.default: i0e,
        aten.special_i1.default: i1,
        aten.special_i1e.default: i1e,
        aten.special_modified_bessel_i0.default: i0,
        aten.special_modified_bessel_i1.default: i1,
        aten.special_modified_bessel_k0.default: modified_bessel_k0,
        aten.special_modified_bessel_k1.default: modified_bessel_k1,
        aten.special_scaled_modified_bessel_k0.default: scaled_modified_bessel_k0,
        aten.special_scaled_modified_bessel_k1.default: scaled_modified_bessel_k1,
        aten.special_bessel_j0.default: bessel_j0,
        aten.special_bessel_j1.default: bessel_j1,
        aten.special_bessel_y0.default: bessel_y0,
        aten.special_bessel_y1.default: bessel_y1,
        aten.special_spherical_bessel_j0.default: spherical_bessel_j0,
        aten.special_airy_ai.default: airy_ai,
        **{
            getattr(getattr(aten, f"special_{prefix}chebyshev_polynomial_{kind}"), overload): (
                _chebyshev_decomposition(kind, bool(prefix))
            )
            for prefix in ("", "shifted_")
            for kind in _CHEBYSHEV
            for overload in ("default", "x_scalar", "n_scalar")
        },
        **{
            getattr(getattr(aten, f"special_{name}"), overload): _orthogonal_decomposition(name)
            for name in ORTHOGONAL_POLYNOMIALS
            for overload in ("default", "x_scalar", "n_scalar")
        },
    }
