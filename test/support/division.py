"""Signed index division as MLIR defines it, and the operand pairs that exercise every rounding case.

MLIR defines arith.divsi and arith.remsi as rounding toward zero (C's `/` and `%`) and arith.floordivsi toward
negative infinity; the register ALU's floordiv and rem round toward negative infinity (`runtime.isa`, as NKI's
floor_divide and mod). Every level that executes index arithmetic must give MLIR's answers on these pairs.
"""

from __future__ import annotations

import itertools

# (dividend, divisor) with every sign combination, exact and inexact quotients, and magnitudes beyond 2^53
# (where a quotient computed through a float would be wrong)
DIVISION_PAIRS = [
    (a, b) for a, b in itertools.product([7, -7, 6, -6, 0, 1, -1, 2**60 + 1, -(2**60) - 1], [3, -3, 1, -1, 2**31 - 1])
]


def c_division(a: int, b: int) -> tuple[int, int]:
    """C's (and MLIR's divsi/remsi) quotient and remainder, by the definition: |q| = |a| // |b|, a = q*b + r."""
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return quotient, a - quotient * b
