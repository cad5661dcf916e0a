"""The float64-golden criterion (`compare.golden_mismatch`): errors against a golden result, non-finite values."""

import ml_dtypes
import numpy as np

from neuron_mlir.ir.semantics.compare import golden_mismatch


def test_a_result_closer_to_the_golden_result_than_eager_passes() -> None:
    golden = np.array([16.3, 1.0, -2.0])
    eager = np.array([16.25, 1.0, -2.0], dtype=ml_dtypes.bfloat16)  # bf16 sums rounded along the way
    ours = np.array([16.375, 1.0, -2.0], dtype=ml_dtypes.bfloat16)
    assert golden_mismatch(ours, eager, golden) is None
    far = np.array([20.0, 1.0, -2.0], dtype=ml_dtypes.bfloat16)
    problem = golden_mismatch(far, eager, golden)
    assert problem is not None
    assert "exceeds" in problem


def test_non_finite_values_must_be_the_golden_results() -> None:
    golden = np.array([1.0, np.inf, np.nan, -np.inf])
    same = np.array([1.0, np.inf, np.nan, -np.inf], dtype=np.float32)
    assert golden_mismatch(same, same, golden) is None
    # each was taken for a match while both sides were merely non-finite
    for ours in ([1.0, np.inf, np.inf, -np.inf], [1.0, -np.inf, np.nan, -np.inf], [1.0, np.nan, np.nan, -np.inf]):
        problem = golden_mismatch(np.array(ours, dtype=np.float32), same, golden)
        assert problem is not None, ours
        assert "non-finite" in problem


def test_eagers_error_is_the_largest_over_its_evaluations() -> None:
    # eager exact on the given inputs sets a bar of a few ulps; its evaluation on inputs an ulp away, 2e-4 off its
    # own golden result, shows how sensitive the result is, and the bar is set by that
    golden = np.array([1.0, 2.0])
    eager = np.array([1.0, 2.0], dtype=np.float32)
    ours = np.array([1.0, 2.002], dtype=np.float32)
    assert golden_mismatch(ours, eager, golden) is not None
    twin_golden = np.array([1.0, 2.5])
    twin = np.array([1.0, 2.5005], dtype=np.float32)
    assert golden_mismatch(ours, eager, golden, [(twin, twin_golden)]) is None
    farther = np.array([1.0, 2.02], dtype=np.float32)
    problem = golden_mismatch(farther, eager, golden, [(twin, twin_golden)])
    assert problem is not None
    assert "x eager's 0.0002 " in problem


def test_eagers_nan_fails_whatever_its_other_evaluations() -> None:
    golden = np.array([1.0, 2.0])
    eager = np.array([1.0, np.nan], dtype=np.float32)
    ours = np.array([1.0, 2.0], dtype=np.float32)
    twin = (np.array([1.0, 2.5], dtype=np.float32), np.array([1.0, 2.5]))
    assert golden_mismatch(ours, eager, golden, [twin]) is not None
