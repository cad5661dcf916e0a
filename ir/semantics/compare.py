"""How close is close enough: one tolerance per dtype, used by every numeric comparison in the project.

Results are compared elementwise with `|actual - expected| <= atol * scale + rtol * |expected|`, where `scale` is
the largest magnitude in `expected` (at least 1): rounding errors of a reduction grow with the size of what is
summed, not with the size of each result, so cancellation to near zero must not count as an error.

Where eager PyTorch is itself a poor reference (gradients of whole models, low-precision sums over thousands of
rows, where eager's own error can exceed any fixed tolerance), `golden_mismatch` judges against a float64 run
instead: our error from the golden result may be at most a small multiple of eager's error in the same dtype,
plus a few units of the dtype's precision. One evaluation's error is a sample, not a measure: where a result is
ill-conditioned (a ReLU whose mask flips with the last bit of its input, a sum with heavy cancellation), eager's
error on inputs one unit in the last place away can be twenty times its error on the given ones. The caller may
therefore pass more evaluations of eager, each with its own golden result, and eager's error is their largest.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# (rtol, atol) per dtype name, set by each format's precision: fp32 has 24 significant bits, but sums of a few
# thousand terms in a different order differ in the last ~10 bits; bf16 has 8 bits, fp16 11.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-7, 1e-7),
    "bfloat16": (2e-2, 2e-2),
    "float16": (2e-3, 2e-3),
    "float8_e4m3fn": (1.5e-1, 1.5e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
}


# Our error may be this many times eager's own error from the float64 golden result ...
GOLDEN_FACTOR = 8.0
# ... plus this many units of the dtype's precision (relative to the result's largest magnitude), so that a result
# eager happens to get exactly right still admits rounding.
GOLDEN_FLOOR_ULPS = 16.0


def tolerance(dtype: np.dtype | str) -> tuple[float, float]:
    """(rtol, atol) for values of `dtype`; integers and booleans must match exactly."""
    name = str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype
    name = name.removeprefix("torch.")
    return TOLERANCES.get(name, (0.0, 0.0))


def mismatch(actual: np.ndarray, expected: np.ndarray, precision: np.dtype | str | None = None) -> str | None:
    """None when `actual` matches `expected` within the dtype's tolerance, else a one-line description.

    `precision`: the dtype whose tolerance applies when it is not `expected`'s, for results computed in a
    narrower type than they are stored in (fp32 results of bf16 products, under the `auto_cast` option)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape} differs from expected {expected.shape}"
    rtol, atol = tolerance(expected.dtype if precision is None else precision)
    got, want = actual.astype(np.float64), expected.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    finite = np.isfinite(want)
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0.0)))
    with np.errstate(invalid="ignore"):  # inf - inf: judged below, by the infinities' equality
        error = np.abs(got - want)
    bad = ~both_nan & ~(error <= atol * scale + rtol * np.abs(want))
    bad &= ~(np.isinf(want) & (got == want))
    if not bad.any():
        return None
    index = np.unravel_index(int(np.argmax(np.where(bad, error, -1))), bad.shape) if bad.ndim else ()
    return (
        f"{int(bad.sum())} of {bad.size} elements differ (rtol={rtol}, atol={atol} x scale {scale:g}); "
        f"worst at {tuple(int(i) for i in index)}: got {got[index]!r}, expected {want[index]!r}"
    )


def pointwise_mismatch(actual: np.ndarray, expected: np.ndarray) -> str | None:
    """As `mismatch`, but every element is judged at its own magnitude (the scale of `atol` is max(1, |expected|)
    per element, not the array's largest): for values spanning many decades, such as a function checked over its
    whole domain, where a large value must not excuse an error in a small one."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape} differs from expected {expected.shape}"
    rtol, atol = tolerance(expected.dtype)
    got, want = actual.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore"):
        error = np.abs(got - want)
        allowed = atol * np.maximum(1.0, np.abs(want)) + rtol * np.abs(want)
        close = np.isfinite(want) & (error <= allowed)
        bad = ~(close | (got == want) | (np.isnan(got) & np.isnan(want)))
    if not bad.any():
        return None
    index = np.unravel_index(int(np.argmax(np.where(bad, np.nan_to_num(error, nan=np.inf), -1))), bad.shape)
    return (
        f"{int(bad.sum())} of {bad.size} elements differ (rtol={rtol}, atol={atol} x max(1, |expected|) each); "
        f"worst at {tuple(int(i) for i in index)}: got {got[index]!r}, expected {want[index]!r}"
    )


def compare_all(
    actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], precision: np.dtype | str | None = None
) -> list[str]:
    """One description per output that does not match (empty when all do); `precision` as for `mismatch`."""
    if len(actual) != len(expected):
        return [f"{len(actual)} outputs, expected {len(expected)}"]
    problems = []
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        problem = mismatch(got, want, precision)
        if problem is not None:
            problems.append(f"output {index}: {problem}")
    return problems


def golden_mismatch(
    actual: np.ndarray,
    eager: np.ndarray,
    golden: np.ndarray,
    other_evaluations: Sequence[tuple[np.ndarray, np.ndarray]] = (),
) -> str | None:
    """None when `actual` is as close to the float64 `golden` result as `eager` (computed in `actual`'s dtype) is,
    within `GOLDEN_FACTOR` and `GOLDEN_FLOOR_ULPS`; errors are maxima relative to the golden result's largest
    magnitude. Else a one-line description. `other_evaluations` are (eager, golden) pairs of the same computation
    on slightly moved inputs (the module docstring says why); eager's error is the largest of all its pairs."""
    actual, eager, golden = np.asarray(actual), np.asarray(eager), np.asarray(golden, dtype=np.float64)
    if actual.shape != golden.shape or eager.shape != golden.shape:
        return f"shape {actual.shape} (eager {eager.shape}) differs from the golden {golden.shape}"
    try:
        precision = float(np.finfo(eager.dtype).eps)  # ml_dtypes registers its float types with finfo
    except ValueError:  # integers and booleans: exact
        return mismatch(actual, eager)
    finite = np.isfinite(golden)
    scale = float(np.max(np.abs(golden[finite]), initial=0.0)) or 1.0
    if not np.array_equal(np.isfinite(actual), finite):
        return "non-finite values where the golden result is finite (or the reverse)"
    ours_special, golden_special = actual[~finite].astype(np.float64), golden[~finite]
    if not np.all((np.isnan(ours_special) & np.isnan(golden_special)) | (ours_special == golden_special)):
        return "non-finite values other than the golden result's (nan against an infinity, or the sign of one)"
    ours_error = _error(actual, golden)
    # eager's own error first, so that max keeps a nan there (eager's nan where the golden result is finite): no
    # result passes against an eager that failed
    eager_error = max([_error(eager, golden)] + [_error(*pair) for pair in other_evaluations])
    allowed = GOLDEN_FACTOR * eager_error + GOLDEN_FLOOR_ULPS * precision
    if ours_error <= allowed:
        return None
    return (
        f"error {ours_error:.3g} (relative to the golden result's largest magnitude {scale:g}) exceeds "
        f"{allowed:.3g} = {GOLDEN_FACTOR:g} x eager's {eager_error:.3g} + {GOLDEN_FLOOR_ULPS:g} ulps"
    )


def _error(result: np.ndarray, golden: np.ndarray) -> float:
    """`result`'s largest error from `golden` where that is finite, relative to its largest magnitude there."""
    golden = np.asarray(golden, dtype=np.float64)
    finite = np.isfinite(golden)
    scale = float(np.max(np.abs(golden[finite]), initial=0.0)) or 1.0
    with np.errstate(invalid="ignore"):  # a nan where the golden result is finite: a nan error
        error = np.abs(np.asarray(result)[finite].astype(np.float64) - golden[finite])
    return float(np.max(error, initial=0.0)) / scale
