"""Dense linear algebra as ATen ops the NeuronCore runs: factorizations unrolled over the matrix order.

AOTAutograd and the device's single-op tracer apply these while they trace (`backend.decompositions()` adds
them to its table), so `torch.linalg.cholesky` and friends reach the compiler as batched elementwise ops,
reductions, matmuls and index ops instead of one LAPACK call that runs on the CPU.

Input contract: float32 matrices of static shape whose order (the longer matrix side) is at most
`MAX_UNROLLED_ORDER` (`MAX_TRIANGULAR_ORDER` for a triangular solve alone); every other call (float64 and complex
tensors, larger matrices) returns NotImplemented and the kernel stays whole, running on the CPU as before. Loops
run over the matrix order at trace time, so the graph grows linearly with n (Jacobi sweeps: with n times the
sweep count), never with the batch.

Output guarantee: the kernel's results as LAPACK computes them, up to fp32 rounding, following its conventions
where they decide a result: partial pivoting takes the first row of largest magnitude (pivots 1-based int32, as
getrf writes them), Householder reflectors take beta = -sign(alpha) ||x|| (R's diagonal may be negative, as
geqrf's), the symmetric indefinite LDL^T takes sytf2's Bunch-Kaufman pivots (1x1 and 2x2 blocks, the same
thresholds and first-largest choices), `info` is the first failing column (1-based, 0 when none: potrf's
non-positive leading minor, getrf's zero pivot, sytf2's zero column). Only the triangle LAPACK reads is read.
Eigen- and singular vectors are unique up to sign only; they come out of Jacobi rotations, not LAPACK's
tridiagonal or bidiagonal reductions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

MAX_UNROLLED_ORDER = 16
"""The largest matrix order decomposed: the graph holds a few ops per column (an n = 16 inverse ~1000 nodes),
and larger orders run as one kernel on the CPU instead."""
MAX_JACOBI_ORDER = 8
"""The largest order of the Jacobi methods (eigh, SVD and what builds on them), whose graphs hold a rotation
step per pair of columns per sweep: ~1500 nodes at n = 5 or 6, ~2100 at 8, ~5400 at 16."""


MAX_TRIANGULAR_ORDER = 128
"""The largest order of a triangular solve alone: by blocks of `SUBSTITUTION_BLOCK` rows, one matmul per block
for what the solved rows contribute, so ~65 nodes per block (n = 64, the chunk of Qwen3-Next's gated delta rule:
~260 nodes)."""
SUBSTITUTION_BLOCK = 16


def _refused(*tensors: torch.Tensor, largest: int = MAX_UNROLLED_ORDER) -> bool:
    """Whether the kernel stays whole: a dtype the NeuronCore computes no factorization in, or too large a
    matrix to unroll (order above `largest`)."""
    for tensor in tensors:
        if tensor.dtype != torch.float32:
            return True
        if tensor.dim() >= 2 and max(tensor.shape[-2:]) > largest:
            return True
    return False


def _batch_broadcast(first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both matrices expanded to their common batch shape (the trailing two dims are each one's own)."""
    batch = torch.broadcast_shapes(first.shape[:-2], second.shape[:-2])  # type: ignore[no-untyped-call]
    return first.expand(*batch, *first.shape[-2:]), second.expand(*batch, *second.shape[-2:])


def _identity(n: int, like: torch.Tensor) -> torch.Tensor:
    return torch.eye(n, dtype=like.dtype, device=like.device)


# -- triangular systems ------------------------------------------------------------------------------------------


def _substitute(triangle: torch.Tensor, rhs: torch.Tensor, lower: bool, unit_diagonal: bool) -> torch.Tensor:
    """X with triangle @ X = rhs, by blocks of `SUBSTITUTION_BLOCK` rows (forward substitution for a lower
    triangle, backward for an upper one): a block's right-hand side less what the solved rows contribute (one
    matmul), then the block's own rows one by one. Only the triangle and, unless `unit_diagonal`, its diagonal
    are read. Batch dims must agree."""
    n = triangle.shape[-1]
    if n == 0:
        return rhs.clone()
    starts = list(range(0, n, SUBSTITUTION_BLOCK))
    blocks: dict[int, torch.Tensor] = {}  # block start -> its solved rows
    for start in starts if lower else reversed(starts):
        stop = min(start + SUBSTITUTION_BLOCK, n)
        block = rhs[..., start:stop, :]
        # the solved rows are contiguous: [0, start) below a lower triangle's diagonal, [stop, n) for an upper one
        known_start, known_stop = (0, start) if lower else (stop, n)
        if known_stop > known_start:
            known = torch.cat([blocks[k] for k in sorted(blocks)], dim=-2)
            block = block - triangle[..., start:stop, known_start:known_stop] @ known
        blocks[start] = _substitute_rows(triangle[..., start:stop, start:stop], block, lower, unit_diagonal)
    return torch.cat([blocks[k] for k in sorted(blocks)], dim=-2)


def _substitute_rows(triangle: torch.Tensor, rhs: torch.Tensor, lower: bool, unit_diagonal: bool) -> torch.Tensor:
    """`_substitute` for one block, row by row."""
    n = triangle.shape[-1]
    rows: dict[int, torch.Tensor] = {}
    order = range(n) if lower else range(n - 1, -1, -1)
    for i in order:
        row = rhs[..., i : i + 1, :]
        solved = sorted(rows)
        if solved:
            start, stop = solved[0], solved[-1] + 1
            known = torch.cat([rows[k] for k in range(start, stop)], dim=-2)
            row = row - triangle[..., i : i + 1, start:stop] @ known
        if not unit_diagonal:
            row = row / triangle[..., i : i + 1, i : i + 1]
        rows[i] = row
    return torch.cat([rows[k] for k in range(n)], dim=-2)


def linalg_solve_triangular(
    A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> torch.Tensor:
    """`aten.linalg_solve_triangular`: X with A X = B (X A = B when not `left`), A triangular."""
    if _refused(A, B, largest=MAX_TRIANGULAR_ORDER):
        return NotImplemented
    A, B = _batch_broadcast(A, B)
    if left:
        return _substitute(A, B, lower=not upper, unit_diagonal=unitriangular)
    # X A = B is A^T X^T = B^T, whose triangle is the other one
    return _substitute(A.mT, B.mT, lower=upper, unit_diagonal=unitriangular).mT


def triangular_solve(
    B: torch.Tensor, A: torch.Tensor, upper: bool = True, transpose: bool = False, unitriangular: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.triangular_solve`: (X with op(A) X = B, op transposing when `transpose`; A's copy), both with the
    common batch shape."""
    if _refused(A, B, largest=MAX_TRIANGULAR_ORDER):
        return NotImplemented
    A, B = _batch_broadcast(A, B)
    triangle, lower = (A.mT, upper) if transpose else (A, not upper)
    return _substitute(triangle, B, lower=lower, unit_diagonal=unitriangular), A.clone()


# -- Cholesky ----------------------------------------------------------------------------------------------------


def _cholesky_lower(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, info) with L L^T = A from A's lower triangle, column by column (Cholesky-Crout).

    info is potrf's: the order of the first leading minor that is not positive definite (its pivot is not
    positive, or NaN), 0 when there is none. Past such a column the factor is not meaningful (LAPACK stops
    there; here the columns go on from a NaN pivot).
    """
    n = A.shape[-1]
    columns: list[torch.Tensor] = []
    pivots: list[torch.Tensor] = []
    for j in range(n):
        # rows j.. of column j; the rows above the diagonal are zero
        column = A[..., j:, j]
        if columns:
            done = torch.stack(columns, dim=-1)  # [..., n - j + ..., j] rows j.. of the columns so far
            column = column - (done[..., j:, :] @ done[..., j, :].unsqueeze(-1)).squeeze(-1)
        pivot = column[..., :1]
        pivots.append(pivot)
        root = torch.sqrt(pivot)
        scaled = torch.cat([root, column[..., 1:] / root], dim=-1)
        columns.append(torch.nn.functional.pad(scaled, (j, 0)))
    if n == 0:
        return torch.zeros_like(A), torch.zeros(A.shape[:-2], dtype=torch.int32, device=A.device)
    return torch.stack(columns, dim=-1), _first_failure(~(torch.cat(pivots, dim=-1) > 0))


def _first_failure(failed: torch.Tensor) -> torch.Tensor:
    """LAPACK's info from per-step failures [..., k]: the first failing step, 1-based, 0 when none (int32)."""
    failed = failed.to(torch.int32)
    first = torch.argmax(failed, dim=-1).to(torch.int32) + 1
    return first * failed.amax(dim=-1)


def linalg_cholesky_ex(
    A: torch.Tensor, *, upper: bool = False, check_errors: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.linalg_cholesky_ex`: (L with L L^H = A, info), or U = L^H when `upper` (then A's upper triangle is
    read, as potrf with uplo 'U' does)."""
    if _refused(A) or check_errors:
        return NotImplemented
    lower, info = _cholesky_lower(A.mT if upper else A)
    return (lower.mT.contiguous() if upper else lower), info


def cholesky(A: torch.Tensor, upper: bool = False) -> torch.Tensor:
    """`aten.cholesky` (the deprecated spelling): the factor alone."""
    if _refused(A):
        return NotImplemented
    factor, _ = linalg_cholesky_ex(A, upper=upper)
    return factor


def _cholesky_solve(B: torch.Tensor, factor: torch.Tensor, upper: bool) -> torch.Tensor:
    """X with A X = B where A = L L^T (`factor` is L) or U^T U (`factor` is U, when `upper`)."""
    B, factor = _batch_broadcast(B, factor)
    lower = factor.mT if upper else factor
    halfway = _substitute(lower, B, lower=True, unit_diagonal=False)
    return _substitute(lower.mT, halfway, lower=False, unit_diagonal=False)


def cholesky_solve(B: torch.Tensor, factor: torch.Tensor, upper: bool = False) -> torch.Tensor:
    """`aten.cholesky_solve` (and `_cholesky_solve_helper`, on broadcast operands): X with A X = B from A's
    Cholesky factor."""
    if _refused(B, factor):
        return NotImplemented
    return _cholesky_solve(B, factor, upper)


def cholesky_inverse(factor: torch.Tensor, upper: bool = False) -> torch.Tensor:
    """`aten.cholesky_inverse`: A^-1 from A's Cholesky factor."""
    if _refused(factor):
        return NotImplemented
    identity = _identity(factor.shape[-1], factor).expand(factor.shape)
    return _cholesky_solve(identity, factor, upper)


# -- LU with partial pivoting --------------------------------------------------------------------------------------


def _lu_factor(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(LU, pivots, info, permutation) of getrf: A = P L U with L unit lower (below LU's diagonal) and U upper
    (on and above it). pivots[j] (1-based int32) is the row swapped with row j at step j: the first row of
    largest magnitude in the column, as idamax picks it. info is the first zero pivot's column (1-based), 0 when
    none; such a column is left unscaled, as getrf leaves it (it is zero below the pivot). permutation[i] is the
    row of A that row i of L U is (float, exact)."""
    m, n = A.shape[-2:]
    steps = min(m, n)
    # the row order rides along as an extra column, so each row swap is done once for both
    rows = torch.arange(m, device=A.device)
    order = rows.to(A.dtype).expand(*A.shape[:-2], m)
    work = torch.cat([A, order.unsqueeze(-1)], dim=-1)
    # the masks of every step, made once: step j reads row j of each
    columns = torch.arange(n + 1, device=A.device)
    eligible = rows.unsqueeze(-1) <= rows  # [j, i]: i >= j
    below = (rows.unsqueeze(-1) < rows).to(A.dtype)  # [j, i]: i > j
    trailing = ((rows.unsqueeze(-1) < columns) & (columns < n)).to(A.dtype)  # [j, c]: j < c < n
    unit_rows = torch.eye(m, dtype=A.dtype, device=A.device)
    unit_columns = torch.eye(m, n + 1, dtype=A.dtype, device=A.device)
    chosen_rows: list[torch.Tensor] = []
    for j in range(steps):
        # rows above j take no part: -1 is below any magnitude
        candidates = torch.where(eligible[j], work[..., :, j].abs(), -1.0)
        chosen = torch.argmax(candidates, dim=-1, keepdim=True)  # the first largest, as idamax
        chosen_rows.append(chosen)
        # rows j and `chosen` exchanged: work - d (d^T work) with d = e_j - e_chosen
        exchange = (unit_rows[j] - (rows == chosen).to(A.dtype)).unsqueeze(-1)
        work = work - exchange * (exchange * work).sum(-2, keepdim=True)
        column = work[..., :, j]
        pivot = column[..., j : j + 1]
        # a zero pivot leaves the (zero) column below it as it is, as getrf does
        safe_pivot = pivot + (pivot == 0).to(A.dtype)
        below_pivot = column * below[j]
        multipliers = below_pivot / safe_pivot
        pivot_row = work[..., j, :] * trailing[j]
        # the trailing block's update, and the multipliers replacing the column below the pivot
        work = (
            work
            - multipliers.unsqueeze(-1) * pivot_row.unsqueeze(-2)
            + (multipliers - below_pivot).unsqueeze(-1) * unit_columns[j]
        )
    lu, permutation = work[..., :n], work[..., n]
    if steps == 0:
        empty = torch.zeros(*A.shape[:-2], 0, dtype=torch.int32, device=A.device)
        return lu, empty, torch.zeros(A.shape[:-2], dtype=torch.int32, device=A.device), permutation
    pivots = (torch.cat(chosen_rows, dim=-1) + 1).to(torch.int32)
    diagonal = torch.diagonal(lu, dim1=-2, dim2=-1)[..., :steps]
    return lu, pivots, _first_failure(diagonal == 0), permutation


def _permutation_matrix(permutation: torch.Tensor) -> torch.Tensor:
    """P with A = P L U, when row i of L U is row permutation[i] of A: P[r, i] = 1 where permutation[i] = r."""
    m = permutation.shape[-1]
    rows = torch.arange(m, device=permutation.device).to(permutation.dtype)
    return (rows.unsqueeze(-1) == permutation.unsqueeze(-2)).to(permutation.dtype)


def _permutation_of_pivots(pivots: torch.Tensor, m: int, dtype: torch.dtype) -> torch.Tensor:
    """The row order getrf's `pivots` (1-based swaps, applied in order) make of m rows, as floats."""
    rows = torch.arange(m, device=pivots.device)
    order = rows.to(dtype).expand(*pivots.shape[:-1], m)
    for j in range(pivots.shape[-1]):
        # exchange entries j and pivots[j] - 1: order - d (d . order) with d = e_j - e_pivot
        exchange = (rows == j).to(dtype) - (rows == pivots[..., j : j + 1] - 1).to(dtype)
        order = order - exchange * (exchange * order).sum(-1, keepdim=True)
    return order


def linalg_lu_factor_ex(
    A: torch.Tensor, *, pivot: bool = True, check_errors: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten.linalg_lu_factor_ex`: (LU, pivots, info) as getrf computes them."""
    if _refused(A) or not pivot or check_errors:
        return NotImplemented  # without pivoting the CPU kernel refuses; checks raise from the kernel
    lu, pivots, info, _ = _lu_factor(A)
    return lu, pivots, info


def _unpacked(lu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(L [..., m, k], U [..., k, n]) of a packed LU factorization, k = min(m, n)."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower = torch.tril(lu[..., :, :k], diagonal=-1) + torch.eye(m, k, dtype=lu.dtype, device=lu.device)
    return lower, torch.triu(lu[..., :k, :])


def linalg_lu(A: torch.Tensor, *, pivot: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten.linalg_lu`: (P, L, U) with A = P L U."""
    if _refused(A) or not pivot:
        return NotImplemented
    lu, _, _, permutation = _lu_factor(A)
    lower, upper = _unpacked(lu)
    return _permutation_matrix(permutation), lower, upper


def lu_unpack(
    LU_data: torch.Tensor, LU_pivots: torch.Tensor, unpack_data: bool = True, unpack_pivots: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten.lu_unpack`: (P, L, U) of a packed factorization and its pivots; what is not unpacked is empty."""
    if _refused(LU_data):
        return NotImplemented
    m = LU_data.shape[-2]
    empty = LU_data.new_empty(0)
    lower, upper = _unpacked(LU_data) if unpack_data else (empty, empty)
    if not unpack_pivots:
        return empty, lower, upper
    permutation = _permutation_of_pivots(LU_pivots, m, LU_data.dtype)
    return _permutation_matrix(permutation), lower, upper


def _lu_solve(lu: torch.Tensor, permutation: torch.Tensor, B: torch.Tensor, adjoint: bool) -> torch.Tensor:
    """X with A X = B (A^T X = B when `adjoint`), A = P L U given as its packed factors and row order."""
    lu, B = _batch_broadcast(lu, B)
    permutation = permutation.expand(*lu.shape[:-2], permutation.shape[-1])
    P = _permutation_matrix(permutation)
    if not adjoint:
        # L U X = P^T B
        halfway = _substitute(lu, P.mT @ B, lower=True, unit_diagonal=True)
        return _substitute(lu, halfway, lower=False, unit_diagonal=False)
    # U^T L^T P^T X = B
    halfway = _substitute(lu.mT, B, lower=True, unit_diagonal=False)
    return P @ _substitute(lu.mT, halfway, lower=False, unit_diagonal=True)


def linalg_lu_solve(
    LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, *, left: bool = True, adjoint: bool = False
) -> torch.Tensor:
    """`aten.linalg_lu_solve`: X with A X = B (A^H X = B when `adjoint`; X A = B, X A^H = B when not `left`)."""
    if _refused(LU, B):
        return NotImplemented
    permutation = _permutation_of_pivots(pivots, LU.shape[-1], LU.dtype)
    if left:
        return _lu_solve(LU, permutation, B, adjoint)
    # X A = B is A^T X^T = B^T
    return _lu_solve(LU, permutation, B.mT, not adjoint).mT


def _is_vector_rhs(A: torch.Tensor, B: torch.Tensor) -> bool:
    """linalg.solve's rule: B is a (batch of) vector(s) when 1-d, or when it has A's shape without the last dim."""
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def linalg_solve_ex(
    A: torch.Tensor, B: torch.Tensor, *, left: bool = True, check_errors: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten._linalg_solve_ex`: (X, LU, pivots, info) with A X = B (X A = B when not `left`).

    LU and pivots (which autograd reads) are A's factorization, as eager returns them.
    """
    if _refused(A, B) or check_errors:
        return NotImplemented
    vector = _is_vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B
    lu, pivots, info, permutation = _lu_factor(A)
    if left:
        solution = _lu_solve(lu, permutation, rhs, adjoint=False)
    else:
        solution = _lu_solve(lu, permutation, rhs.mT, adjoint=True).mT
    return (solution.squeeze(-1) if vector else solution), lu, pivots, info


def linalg_inv_ex(A: torch.Tensor, *, check_errors: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.linalg_inv_ex`: (A^-1, info), A's inverse by the LU solve of A X = I."""
    if _refused(A) or check_errors:
        return NotImplemented
    identity = _identity(A.shape[-1], A).expand(A.shape)
    lu, _, info, permutation = _lu_factor(A)
    return _lu_solve(lu, permutation, identity, adjoint=False), info


def _permutation_sign(pivots: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(-1)^(number of actual row swaps) of getrf's pivots."""
    steps = torch.arange(1, pivots.shape[-1] + 1, device=pivots.device, dtype=pivots.dtype)
    swaps = (pivots != steps).to(dtype).sum(-1)
    return 1.0 - 2.0 * torch.remainder(swaps, 2.0)


def linalg_det(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten._linalg_det`: (det A, LU, pivots): the product of U's diagonal, signed by the row swaps. As in
    eager, A^T is factored (det A^T = det A), and its LU and pivots returned."""
    if _refused(A):
        return NotImplemented
    lu, pivots, _, _ = _lu_factor(A.mT)
    diagonal = torch.diagonal(lu, dim1=-2, dim2=-1)
    return _permutation_sign(pivots, A.dtype) * diagonal.prod(-1), lu, pivots


def linalg_slogdet(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten._linalg_slogdet`: (sign, log |det A|, LU, pivots); a singular A has sign 0 and -inf. A^T is
    factored, as in eager."""
    if _refused(A):
        return NotImplemented
    lu, pivots, _, _ = _lu_factor(A.mT)
    diagonal = torch.diagonal(lu, dim1=-2, dim2=-1)
    sign = _permutation_sign(pivots, A.dtype) * torch.sign(diagonal).prod(-1)
    return sign, torch.log(diagonal.abs()).sum(-1), lu, pivots


# -- QR by Householder reflections --------------------------------------------------------------------------------


def _reflector(factors: torch.Tensor, j: int, unit_rows: torch.Tensor, below: torch.Tensor) -> torch.Tensor:
    """v of reflector j, as geqrf stores it in column j of `factors`: 1 at row j, the stored tail below."""
    return unit_rows[j] + factors[..., :, j] * below[j]


def _row_masks(m: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(I_m, [j, i] = i > j) in `like`'s dtype: the one-hot rows and the below-row-j masks of every step."""
    rows = torch.arange(m, device=like.device)
    return torch.eye(m, dtype=like.dtype, device=like.device), (rows.unsqueeze(-1) < rows).to(like.dtype)


def geqrf(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.geqrf`: (R above the diagonal and the reflectors' tails below it, tau), column by column.

    Each reflector H = I - tau v v^T maps column j's [alpha; x] to [beta; 0] with beta = -sign(alpha) ||[alpha; x]||
    and tau = (beta - alpha) / beta, v = [1; x / (alpha - beta)], as LAPACK's larfg; a column already zero below
    the diagonal gets tau = 0 (H = I) and keeps its alpha.
    """
    if _refused(A):
        return NotImplemented
    m, n = A.shape[-2:]
    steps = min(m, n)
    unit_rows, below = _row_masks(m, A)
    columns = torch.arange(n, device=A.device)
    trailing = (torch.arange(m, device=A.device).unsqueeze(-1) < columns).to(A.dtype)  # [j, c]: c > j
    unit_columns = torch.eye(m, n, dtype=A.dtype, device=A.device)
    on_and_below = below + unit_rows
    work = A
    taus: list[torch.Tensor] = []
    for j in range(steps):
        column = work[..., :, j]
        alpha = column[..., j : j + 1]
        tail = column * below[j]
        tail_norm = torch.linalg.vector_norm(tail, dim=-1, keepdim=True)
        reflects = tail_norm != 0
        beta = -torch.copysign(torch.hypot(alpha, tail_norm), alpha)
        safe_beta = torch.where(reflects, beta, 1.0)
        tau = torch.where(reflects, (beta - alpha) / safe_beta, 0.0)
        scale = torch.where(reflects, 1.0 / torch.where(reflects, alpha - beta, 1.0), 0.0)
        taus.append(tau)
        v = unit_rows[j] + tail * scale
        # H applied to the columns right of j; column j becomes [beta; v's tail]
        projections = (v.unsqueeze(-1) * work).sum(-2) * trailing[j]
        work = work - (tau * v).unsqueeze(-1) * projections.unsqueeze(-2)
        new_column = unit_rows[j] * torch.where(reflects, beta, alpha) + tail * scale
        work = work + (new_column - column * on_and_below[j]).unsqueeze(-1) * unit_columns[j]
    if steps == 0:
        return A.clone(), A.new_zeros(*A.shape[:-2], 0)
    return work, torch.cat(taus, dim=-1)


def linalg_householder_product(A: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """`aten.linalg_householder_product` (orgqr): the first n columns of H_0 H_1 ... H_{k-1}, the reflectors
    stored below A's diagonal as geqrf leaves them."""
    if _refused(A, tau):
        return NotImplemented
    m, n = A.shape[-2:]
    unit_rows, below = _row_masks(m, A)
    product = torch.eye(m, n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], m, n)
    for j in reversed(range(tau.shape[-1])):
        v = _reflector(A, j, unit_rows, below)
        projections = (v.unsqueeze(-1) * product).sum(-2)
        product = product - (tau[..., j : j + 1] * v).unsqueeze(-1) * projections.unsqueeze(-2)
    return product


def linalg_qr(A: torch.Tensor, mode: str = "reduced") -> tuple[torch.Tensor, torch.Tensor]:
    """`aten.linalg_qr`: (Q, R) from geqrf's reflectors; Q is empty in mode 'r', square in 'complete'."""
    if _refused(A):
        return NotImplemented
    m, n = A.shape[-2:]
    k = min(m, n)
    factors, tau = geqrf(A)
    if mode == "r":
        return A.new_empty(0), torch.triu(factors[..., :k, :])
    if mode == "complete" and m > n:
        padded = torch.cat([factors, factors.new_zeros(*factors.shape[:-1], m - n)], dim=-1)
        return linalg_householder_product(padded, tau), torch.triu(factors)
    return linalg_householder_product(factors[..., :, :k], tau), torch.triu(factors[..., :k, :])


def ormqr(
    A: torch.Tensor, tau: torch.Tensor, C: torch.Tensor, left: bool = True, transpose: bool = False
) -> torch.Tensor:
    """`aten.ormqr`: C multiplied by Q = H_0 ... H_{k-1} (Q^T when `transpose`), from the left or the right,
    one reflector at a time."""
    if _refused(A, tau, C):
        return NotImplemented
    unit_rows, below = _row_masks(A.shape[-2], A)
    steps = range(tau.shape[-1])
    # Q C and C Q^T apply the last reflector first
    order = reversed(steps) if left != transpose else steps
    result = C
    for j in order:
        v = _reflector(A, j, unit_rows, below)
        scaled = tau[..., j : j + 1] * v
        if left:
            result = result - scaled.unsqueeze(-1) * (v.unsqueeze(-1) * result).sum(-2, keepdim=True)
        else:
            result = result - (result * v.unsqueeze(-2)).sum(-1, keepdim=True) * scaled.unsqueeze(-2)
    return result


# -- Jacobi rotations ----------------------------------------------------------------------------------------------


def jacobi_sweeps(n: int) -> int:
    """Sweeps of cyclic Jacobi for an order-n matrix: one more than fp32 needs. Convergence is quadratic once the
    off-diagonal mass is small; over 200 random symmetric matrices per order the eigenvalues stop improving (at
    ~1e-6 of the largest) after 3 sweeps for n <= 4, 4 for n <= 8 and 5 for n <= 16."""
    return 4 if n <= 4 else 5 if n <= 8 else 6


def _round_robin(order: int) -> list[int]:
    """The shuffle of the round-robin tournament on `order` (even) slots whose pairs sit side by side, (0, 1),
    (2, 3), ...: after a round, slot t takes what slot shuffle[t] held, so that the next round's pairs sit side
    by side again; order - 1 rounds pair every two indices once."""
    half = order // 2
    # circle method: position 0 stays, positions 1 .. order-1 rotate by one each round; pair i is (i, order-1-i)
    slot_of_position = {}
    for i in range(half):
        slot_of_position[i] = 2 * i
        slot_of_position[order - 1 - i] = 2 * i + 1
    position_of_slot = {slot: position for position, slot in slot_of_position.items()}

    def previous(position: int) -> int:
        return 0 if position == 0 else order - 1 if position == 1 else position - 1

    return [slot_of_position[previous(position_of_slot[t])] for t in range(order)]


def _index_constant(values: list[int], device: torch.device) -> torch.Tensor:
    """An int64 index vector of the graph, from splat constants (tensor literals cannot be traced here)."""
    return torch.cat([torch.full((1,), value, dtype=torch.int64, device=device) for value in values])


def _rotations(
    diagonal_first: torch.Tensor, diagonal_second: torch.Tensor, off_diagonal: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(c, s) of the Jacobi rotations [[c, s], [-s, c]] that diagonalise the symmetric 2 x 2 blocks
    [[a, b], [b, d]]: t = s / c is the smaller root of t^2 + 2 t (d - a) / (2 b) - 1 = 0, written so that b = 0
    gives t = 0 (no rotation) and a = d rotates by 45 degrees."""
    difference = diagonal_second - diagonal_first
    direction = torch.where(difference >= 0, 1.0, -1.0)
    denominator = difference.abs() + torch.hypot(difference, 2 * off_diagonal)
    tangent = 2 * off_diagonal * direction / torch.where(denominator == 0, 1.0, denominator)
    cosine = torch.rsqrt(1 + tangent * tangent)
    return cosine, tangent * cosine


def _rotation_step(
    cosine: torch.Tensor, sine: torch.Tensor, block_identity: torch.Tensor, shuffle: torch.Tensor
) -> torch.Tensor:
    """K = J S: the block-diagonal rotation J (pair (2i, 2i + 1) rotated by [[c_i, s_i], [-s_i, c_i]]) followed
    by the round-robin's column shuffle S, as one [..., order, order] matrix."""
    blocks = torch.stack([cosine, sine, -sine, cosine], dim=-1)
    blocks = blocks.reshape(*blocks.shape[:-1], 2, 2)  # [..., half, 2, 2]
    rotation = (blocks.unsqueeze(-2) * block_identity).flatten(-4, -3).flatten(-2, -1)
    return rotation.index_select(-1, shuffle)


def _jacobi_eigh(A: torch.Tensor, compute_vectors: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(eigenvalues ascending, eigenvectors or None) of the symmetric A by cyclic Jacobi sweeps, each pass of
    the round-robin rotating order/2 disjoint pairs at once. An odd order gets a zero row and column, which no
    rotation touches (its off-diagonal entries are exactly zero) and which is dropped at the end."""
    n = A.shape[-1]
    order = n + n % 2
    matrix = torch.nn.functional.pad(A, (0, order - n, 0, order - n)) if order != n else A
    vectors = _identity(order, A).expand(matrix.shape) if compute_vectors else None
    following = _round_robin(order)
    shuffle = _index_constant(following, A.device)
    block_identity = _identity(order // 2, A).unsqueeze(-2).unsqueeze(-1)  # [half, 1, half, 1]
    slot_of = list(range(order))
    for _ in range(jacobi_sweeps(n)):
        for _ in range(order - 1):
            paired = matrix.reshape(*matrix.shape[:-2], order // 2, 2, order // 2, 2)
            blocks = torch.diagonal(paired, dim1=-4, dim2=-2)
            cosine, sine = _rotations(blocks[..., 0, 0, :], blocks[..., 1, 1, :], blocks[..., 0, 1, :])
            step = _rotation_step(cosine, sine, block_identity, shuffle)
            matrix = step.mT @ matrix @ step
            if vectors is not None:
                vectors = vectors @ step
            slot_of = [following.index(slot) for slot in slot_of]
    kept = [slot_of[i] for i in range(n)] if order != n else None
    eigenvalues = torch.diagonal(matrix, dim1=-2, dim2=-1)
    if kept is not None:
        index = _index_constant(kept, A.device)
        eigenvalues = eigenvalues.index_select(-1, index)
        if vectors is not None:
            vectors = vectors[..., :n, :].index_select(-1, index)
    eigenvalues, ascending = torch.sort(eigenvalues, dim=-1)
    if vectors is None:
        return eigenvalues, None
    return eigenvalues, torch.gather(vectors, -1, ascending.unsqueeze(-2).expand(vectors.shape))


def linalg_eigh(A: torch.Tensor, UPLO: str = "L", compute_v: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """`aten._linalg_eigh`: (eigenvalues ascending, eigenvectors as columns; empty unless `compute_v`) of the
    symmetric matrix whose lower (UPLO 'L') or upper triangle A holds. Eigenvectors are unique up to sign (and
    within repeated eigenvalues): these are the Jacobi rotations', not LAPACK's."""
    if _refused(A) or A.shape[-1] > MAX_JACOBI_ORDER:
        return NotImplemented
    n = A.shape[-1]
    if n == 0:
        return A.new_zeros(A.shape[:-1]), (A.clone() if compute_v else A.new_empty(0))
    triangle = torch.tril(A) if UPLO == "L" else torch.triu(A)
    symmetric = triangle + triangle.mT - torch.diag_embed(torch.diagonal(A, dim1=-2, dim2=-1))
    eigenvalues, vectors = _jacobi_eigh(symmetric, compute_v)
    return eigenvalues, (vectors if vectors is not None else A.new_empty(0))


def _jacobi_svd(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(U [..., m, n], S descending, V [..., n, n]) of A [..., m, n], m >= n, by one-sided Jacobi: rotations of
    column pairs make the columns orthogonal (each diagonalises the pair's 2 x 2 Gram matrix), the same
    round-robin as `_jacobi_eigh`. A column of zero norm gets a zero column of U."""
    n = A.shape[-1]
    order = n + n % 2
    matrix = torch.nn.functional.pad(A, (0, order - n)) if order != n else A
    vectors = _identity(order, A).expand(*A.shape[:-2], order, order)
    following = _round_robin(order)
    shuffle = _index_constant(following, A.device)
    block_identity = _identity(order // 2, A).unsqueeze(-2).unsqueeze(-1)
    slot_of = list(range(order))
    for _ in range(jacobi_sweeps(n)):
        for _ in range(order - 1):
            pairs = matrix.reshape(*matrix.shape[:-1], order // 2, 2)
            first, second = pairs[..., 0], pairs[..., 1]
            gram = [(first * first).sum(-2), (second * second).sum(-2), (first * second).sum(-2)]
            step = _rotation_step(*_rotations(*gram), block_identity, shuffle)
            matrix = matrix @ step
            vectors = vectors @ step
            slot_of = [following.index(slot) for slot in slot_of]
    if order != n:
        kept = _index_constant([slot_of[i] for i in range(n)], A.device)
        matrix, vectors = matrix.index_select(-1, kept), vectors[..., :n, :].index_select(-1, kept)
    norms = torch.linalg.vector_norm(matrix, dim=-2)
    singular_values, descending = torch.sort(norms, dim=-1, descending=True)
    matrix = torch.gather(matrix, -1, descending.unsqueeze(-2).expand(matrix.shape))
    vectors = torch.gather(vectors, -1, descending.unsqueeze(-2).expand(vectors.shape))
    safe = torch.where(singular_values == 0, 1.0, singular_values)
    return matrix / safe.unsqueeze(-2), singular_values, vectors


def linalg_svd(
    A: torch.Tensor, full_matrices: bool = False, compute_uv: bool = True, driver: str | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten._linalg_svd`: (U, S descending, Vh) with A = U diag(S) Vh. Singular vectors are unique up to sign
    (and within repeated values): these are one-sided Jacobi's, not LAPACK's. Full U or Vh of a non-square
    matrix add an orthonormal basis of the complement of the reduced one's span, from the complete Householder QR
    of the reduced factor; like LAPACK's, that basis is one of many (any rotation of it is as valid)."""
    if _refused(A) or min(A.shape[-2:]) > MAX_JACOBI_ORDER:
        return NotImplemented
    m, n = A.shape[-2:]
    if min(m, n) == 0:
        k = min(m, n)
        empty = A.new_empty(0)
        if not compute_uv:
            return empty, A.new_zeros(*A.shape[:-2], k), empty
        rows, columns = (m, n) if full_matrices else (k, k)
        u = _identity(m, A)[:, :rows].expand(*A.shape[:-2], m, rows)
        vh = _identity(n, A)[:columns, :].expand(*A.shape[:-2], columns, n)
        return u.clone(), A.new_zeros(*A.shape[:-2], k), vh.clone()
    if m >= n:
        u, singular_values, v = _jacobi_svd(A)
    else:  # A^T = V S U^T
        v, singular_values, u = _jacobi_svd(A.mT)
    if not compute_uv:
        return A.new_empty(0), singular_values, A.new_empty(0)
    if full_matrices and m != n:
        if m > n:
            u = _completed(u)
        else:
            v = _completed(v)
    return u, singular_values, v.mT


def _completed(columns: torch.Tensor) -> torch.Tensor:
    """Orthonormal columns [..., m, k] (k < m) followed by an orthonormal basis of their complement: the last
    m - k columns of the complete Q of their Householder QR, which are orthogonal to the span of the first k."""
    k = columns.shape[-1]
    q, _ = linalg_qr(columns, "complete")
    return torch.cat([columns, q[..., k:]], dim=-1)


def _tolerances(
    A: torch.Tensor, atol: torch.Tensor | float | None, rtol: torch.Tensor | float | None
) -> tuple[torch.Tensor | float, torch.Tensor | float]:
    """linalg's (atol, rtol) defaults: atol 0; rtol eps * max(m, n) when neither is given, 0 when only a
    positive atol is."""
    default_rtol = torch.finfo(A.dtype).eps * max(A.shape[-2:])
    if rtol is None:
        if atol is None:
            rtol = default_rtol
        elif isinstance(atol, torch.Tensor):
            rtol = torch.where(atol > 0, 0.0, default_rtol)
        else:
            rtol = 0.0 if atol > 0 else default_rtol
    return (0.0 if atol is None else atol), rtol


def _threshold(
    values: torch.Tensor, atol: torch.Tensor | float, rtol: torch.Tensor | float, largest: torch.Tensor
) -> torch.Tensor:
    """max(atol, rtol * largest) per matrix, broadcast against `values` [..., k]."""
    atol = atol.unsqueeze(-1) if isinstance(atol, torch.Tensor) and atol.dim() > 0 else atol
    rtol = rtol.unsqueeze(-1) if isinstance(rtol, torch.Tensor) and rtol.dim() > 0 else rtol
    relative = rtol * largest
    if isinstance(atol, torch.Tensor) or atol != 0:
        return torch.maximum(torch.as_tensor(atol, dtype=values.dtype), relative)
    return relative


def linalg_pinv(
    A: torch.Tensor,
    atol: torch.Tensor | float | None = None,
    rtol: torch.Tensor | float | None = None,
    hermitian: bool = False,
) -> torch.Tensor:
    """`aten.linalg_pinv` (atol_rtol_tensor, atol_rtol_float): the pseudo-inverse V diag(1/s) U^T over the
    singular values (eigenvalue magnitudes when `hermitian`) above max(atol, rtol * the largest). Tolerance
    tensors are taken in A's dtype (linalg.pinv's Python floats arrive as float64 scalars)."""
    if _refused(A) or min(A.shape[-2:]) > MAX_JACOBI_ORDER:
        return NotImplemented
    if A.numel() == 0:
        return A.new_zeros(*A.shape[:-2], A.shape[-1], A.shape[-2])
    atol, rtol = (t.to(A.dtype) if isinstance(t, torch.Tensor) else t for t in (atol, rtol))
    atol, rtol = _tolerances(A, atol, rtol)
    if hermitian:
        values, vectors = linalg_eigh(A)
        magnitudes = values.abs()
        threshold = _threshold(values, atol, rtol, magnitudes.amax(-1, keepdim=True))
        inverses = torch.where(magnitudes > threshold, 1.0 / values, 0.0)
        return (vectors * inverses.unsqueeze(-2)) @ vectors.mT
    u, values, vh = linalg_svd(A, full_matrices=False)
    threshold = _threshold(values, atol, rtol, values[..., :1])
    inverses = torch.where(values > threshold, 1.0 / values, 0.0)
    return (vh.mT * inverses.unsqueeze(-2)) @ u.mT


def linalg_matrix_rank(
    A: torch.Tensor,
    atol: torch.Tensor | float | None = None,
    rtol: torch.Tensor | float | None = None,
    hermitian: bool = False,
) -> torch.Tensor:
    """`aten.linalg_matrix_rank` (atol_rtol_tensor, atol_rtol_float): the number of singular values (eigenvalue
    magnitudes when `hermitian`) above max(atol, rtol * the largest), as int64."""
    if _refused(A) or min(A.shape[-2:]) > MAX_JACOBI_ORDER:
        return NotImplemented
    if A.numel() == 0:
        return torch.zeros(A.shape[:-2], dtype=torch.int64, device=A.device)
    atol, rtol = (t.to(A.dtype) if isinstance(t, torch.Tensor) else t for t in (atol, rtol))
    atol, rtol = _tolerances(A, atol, rtol)
    values = linalg_eigh(A, compute_v=False)[0].abs() if hermitian else linalg_svd(A, compute_uv=False)[1]
    threshold = _threshold(values, atol, rtol, values.amax(-1, keepdim=True))
    return (values > threshold).sum(-1)


def matrix_rank(
    A: torch.Tensor,
    tol: torch.Tensor | float | None = None,
    hermitian: bool = False,
    *,
    atol: torch.Tensor | float | None = None,
    rtol: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """`torch.linalg.matrix_rank` (the legacy `tol` is an atol with rtol 0) by `linalg_matrix_rank`, or by
    torch's own where that returns NotImplemented."""
    if tol is not None:
        atol, rtol = tol, 0.0
    result = linalg_matrix_rank(A, atol, rtol, hermitian)
    if result is NotImplemented:
        return torch.linalg.matrix_rank(A, atol=atol, rtol=rtol, hermitian=hermitian)
    return result


def route_composite_calls(graph_module: torch.fx.GraphModule, cpu_ops: Sequence[str] = ()) -> int:
    """Point the calls of Dynamo's graph whose ATen op is a composite with a decomposition here at that
    decomposition, before AOTAutograd traces the graph; returns how many (those `cpu_ops` names keep torch's).

    `linalg_matrix_rank` is CompositeImplicitAutograd: ATen expands it before any tracer's table is asked, into
    SVD and a threshold that its float64 tolerance scalars (`atol` 0, `rtol` eps max(m, n)) turn into float64
    arithmetic and a mixed comparison, which has no NeuronCore datapath. A call with `out=` is left alone."""
    from neuron_mlir.frontend.compile_graph import names_op

    if names_op("aten.linalg_matrix_rank.atol_rtol_tensor", cpu_ops):
        return 0
    routed = 0
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is torch.linalg.matrix_rank and "out" not in node.kwargs:
            node.target = matrix_rank
            routed += 1
    if routed:
        graph_module.recompile()
    return routed


# -- symmetric indefinite LDL^T (Bunch-Kaufman) --------------------------------------------------------------------

BUNCH_KAUFMAN_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0
"""The pivot threshold of Bunch and Kaufman's partial pivoting, which bounds the growth of the factors' entries
(J. R. Bunch, L. Kaufman, "Some stable methods for calculating inertia and solving symmetric linear systems",
Math. Comp. 31, 1977; LAPACK sytf2 uses the same constant)."""


def _select(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """values[..., index, :] of matrices [..., n, m] (or values[..., index] of vectors [..., n]) with a per-matrix
    index [...]: a one-hot masked sum, exact (the other entries are replaced, not multiplied, so their infinities
    and NaNs stay out)."""
    vector = values.dim() == index.dim() + 1
    positions = torch.arange(values.shape[-1 if vector else -2], device=values.device)
    hot = positions == index.unsqueeze(-1)  # [..., n]
    return torch.where(hot, values, 0.0).sum(-1) if vector else torch.where(hot.unsqueeze(-1), values, 0.0).sum(-2)


def _swap_indices(n: int, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """[..., n] int64: 0 ... n-1 with entries `first` and `second` exchanged, per matrix."""
    positions = torch.arange(n, device=first.device)
    first, second = first.unsqueeze(-1), second.unsqueeze(-1)
    return torch.where(positions == first, second, torch.where(positions == second, first, positions))


def _ldl_factor(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(LD, pivots, info) of A's lower triangle as LAPACK sytf2 (uplo L) computes them: A = L D L^T with
    Bunch-Kaufman partial pivoting, D of 1x1 and 2x2 blocks, L unit lower, both in LD's lower triangle (a 2x2
    block's off-diagonal entry below its first diagonal entry), LD's upper triangle zero. pivots (1-based int32):
    k + 1 for a 1x1 block at step k without interchange, p + 1 for one that exchanged rows and columns k and p,
    -(p + 1) twice for a 2x2 block at steps k, k + 1 that exchanged k + 1 and p. info: the first step whose
    column is zero (1-based), 0 when none; such a step leaves its column as it is.

    The steps are unrolled over the order; each matrix of the batch takes its own pivots, so a step is a 1x1
    block, a 2x2 block or (the step after a 2x2 block) nothing, chosen per matrix by `where`. The working matrix
    is kept symmetric (both triangles) for the row reads of the pivot search; the interchanges are gathers."""
    n = A.shape[-1]
    batch = A.shape[:-2]
    rows = torch.arange(n, device=A.device)
    row_grid, column_grid = rows.unsqueeze(-1), rows.unsqueeze(-2)
    work = torch.tril(A) + torch.tril(A, -1).mT
    factors = torch.zeros_like(A)
    skip = torch.zeros(batch, dtype=torch.bool, device=A.device)
    info = torch.zeros(batch, dtype=torch.int32, device=A.device)
    pivots: list[torch.Tensor] = []
    alpha = BUNCH_KAUFMAN_ALPHA
    for k in range(n):
        active = ~skip
        column = work[..., :, k]
        diagonal = work[..., k, k].abs()
        if k < n - 1:
            candidates = torch.where(rows > k, column.abs(), -1.0)
            largest = candidates.amax(-1)
            other = torch.argmax(candidates, dim=-1)  # the first largest, as idamax
        else:
            largest = torch.zeros_like(diagonal)
            other = torch.full_like(info, k, dtype=torch.int64)
        zero = (torch.maximum(diagonal, largest) == 0.0) | torch.isnan(diagonal)
        other_row = _select(work, other)
        off_row = torch.where((rows >= k) & (rows != other.unsqueeze(-1)), other_row.abs(), -1.0).amax(-1)
        other_diagonal = _select(other_row, other).abs()
        keep = zero | (diagonal >= alpha * largest) | (diagonal >= alpha * largest * (largest / off_row))
        two = active & ~keep & ~(other_diagonal >= alpha * off_row)
        one = active & ~zero & ~two
        partner = torch.where(keep, k, other)  # the row and column exchanged with k (k + 1 for a 2x2 block)
        target = k + two.to(torch.int64)
        order = _swap_indices(n, target, torch.where(active, partner, target))
        work = work.gather(-2, order.unsqueeze(-1).expand(*batch, n, n))
        work = work.gather(-1, order.unsqueeze(-2).expand(*batch, n, n))
        pivot_value = work[..., k, k]
        column = work[..., :, k]
        below = rows > k
        # a 1x1 block: the multipliers x / d and the rank-1 update of the trailing block
        inverse = 1.0 / pivot_value
        multipliers = torch.where(below, column * inverse.unsqueeze(-1), 0.0)
        single = work - torch.where(below, column, 0.0).unsqueeze(-1) * multipliers.unsqueeze(-2)
        single_column = torch.where(below, multipliers, torch.where(rows == k, pivot_value.unsqueeze(-1), 0.0))
        trailing = (row_grid > k) & (column_grid > k)
        new_work = torch.where(one.unsqueeze(-1).unsqueeze(-1) & trailing, single, work)
        new_factors = torch.where(
            (column_grid == k) & one.unsqueeze(-1).unsqueeze(-1), single_column.unsqueeze(-1), factors
        )
        if k < n - 1:
            # a 2x2 block [[a, b], [b, c]] at k, k + 1: sytf2's scaled inverse, then the rank-2 update
            off = work[..., k + 1, k]
            scaled_c = work[..., k + 1, k + 1] / off
            scaled_a = pivot_value / off
            scale = (1.0 / (scaled_c * scaled_a - 1.0)) / off
            beyond = rows > k + 1
            first = torch.where(beyond, column, 0.0)
            second = torch.where(beyond, work[..., :, k + 1], 0.0)
            first_weights = scale.unsqueeze(-1) * (scaled_c.unsqueeze(-1) * first - second)
            second_weights = scale.unsqueeze(-1) * (scaled_a.unsqueeze(-1) * second - first)
            double = (
                work
                - first.unsqueeze(-1) * first_weights.unsqueeze(-2)
                - second.unsqueeze(-1) * second_weights.unsqueeze(-2)
            )
            first_column = torch.where(beyond, first_weights, torch.where(rows == k, pivot_value.unsqueeze(-1), 0.0))
            first_column = torch.where(rows == k + 1, off.unsqueeze(-1), first_column)
            second_column = torch.where(
                beyond, second_weights, torch.where(rows == k + 1, work[..., k + 1, k + 1].unsqueeze(-1), 0.0)
            )
            pair = two.unsqueeze(-1).unsqueeze(-1)
            new_work = torch.where(pair & (row_grid > k + 1) & (column_grid > k + 1), double, new_work)
            new_factors = torch.where(pair & (column_grid == k), first_column.unsqueeze(-1), new_factors)
            new_factors = torch.where(pair & (column_grid == k + 1), second_column.unsqueeze(-1), new_factors)
        # a zero column stays as it is
        kept_column = torch.where(rows >= k, column, 0.0).unsqueeze(-1)
        new_factors = torch.where(
            (column_grid == k) & (active & zero).unsqueeze(-1).unsqueeze(-1), kept_column, new_factors
        )
        work, factors = new_work, new_factors
        pivot = torch.where(two, -(partner + 1), partner + 1)
        pivots.append(torch.where(skip, pivots[-1] if pivots else pivot, pivot))
        info = torch.where((info == 0) & active & zero, k + 1, info)
        skip = two
    if n == 0:
        return factors, torch.zeros(*batch, 0, dtype=torch.int32, device=A.device), info
    return factors, torch.stack(pivots, dim=-1).to(torch.int32), info


def linalg_ldl_factor_ex(
    A: torch.Tensor, *, hermitian: bool = False, check_errors: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`aten.linalg_ldl_factor_ex`: (LD, pivots, info) as sytrf computes them for A's lower triangle (`hermitian`
    changes nothing for real matrices)."""
    if _refused(A) or check_errors:
        return NotImplemented
    return _ldl_factor(A)


def _ldl_solve(factors: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """X with A X = B from sytrf's (LD, pivots) of A, as LAPACK sytrs (uplo L) solves: L D Y = P B step by step
    forward (each block's interchange, its column's elimination, its D block's solve), then L^T X = Y backward
    with the interchanges undone. `pivots` says per matrix which steps are 1x1 blocks and which pairs are 2x2."""
    n = factors.shape[-1]
    batch = factors.shape[:-2]
    columns = B.shape[-1]
    rows = torch.arange(n, device=B.device)
    pivots = pivots.to(torch.int64)
    # second[k]: step k is the second of a 2x2 block
    second = [torch.zeros(batch, dtype=torch.bool, device=B.device)]
    for k in range(1, n):
        second.append(~second[-1] & (pivots[..., k - 1] < 0))

    def swap(values: torch.Tensor, first: torch.Tensor | int, other: torch.Tensor) -> torch.Tensor:
        order = _swap_indices(n, torch.as_tensor(first, device=B.device).expand_as(other), other)
        return values.gather(-2, order.unsqueeze(-1).expand(*batch, n, columns))

    def row(values: torch.Tensor, index: int) -> torch.Tensor:
        return values[..., index : index + 1, :]

    for k in range(n):
        one = ~second[k] & (pivots[..., k] > 0)
        two = ~second[k] & (pivots[..., k] < 0)
        mask_one, mask_two = one.unsqueeze(-1).unsqueeze(-1), two.unsqueeze(-1).unsqueeze(-1)
        partner = pivots[..., k].abs() - 1
        # 1x1: interchange k and partner, eliminate below, divide by d
        swapped = swap(B, k, torch.where(one, partner, k))
        below = (rows > k).unsqueeze(-1)
        single = swapped - torch.where(below, factors[..., :, k : k + 1], 0.0) * row(swapped, k)
        single = torch.where((rows == k).unsqueeze(-1), single / factors[..., k : k + 1, k : k + 1], single)
        result = torch.where(mask_one, single, B)
        if k < n - 1:
            swapped = swap(B, k + 1, torch.where(two, partner, k + 1))
            beyond = (rows > k + 1).unsqueeze(-1)
            double = (
                swapped
                - torch.where(beyond, factors[..., :, k : k + 1], 0.0) * row(swapped, k)
                - torch.where(beyond, factors[..., :, k + 1 : k + 2], 0.0) * row(swapped, k + 1)
            )
            off = factors[..., k + 1 : k + 2, k : k + 1]
            scaled_a = factors[..., k : k + 1, k : k + 1] / off
            scaled_c = factors[..., k + 1 : k + 2, k + 1 : k + 2] / off
            denominator = scaled_a * scaled_c - 1.0
            first, other = row(double, k) / off, row(double, k + 1) / off
            double = torch.where((rows == k).unsqueeze(-1), (scaled_c * first - other) / denominator, double)
            double = torch.where((rows == k + 1).unsqueeze(-1), (scaled_a * other - first) / denominator, double)
            result = torch.where(mask_two, double, result)
        B = result
    for k in range(n - 1, -1, -1):
        # the step that closes a block: a 1x1 block, or the second step of a 2x2 one (which also does k - 1)
        closes_one = ~second[k] & (pivots[..., k] > 0)
        closes_two = second[k]
        partner = pivots[..., k].abs() - 1
        below = (rows > k).unsqueeze(-1)
        tail = torch.where(below, B, 0.0)
        updated = B - torch.where(
            (rows == k).unsqueeze(-1), (factors[..., :, k : k + 1] * tail).sum(-2, keepdim=True), 0.0
        )
        if k > 0:
            pair = updated - torch.where(
                (rows == k - 1).unsqueeze(-1), (factors[..., :, k - 1 : k] * tail).sum(-2, keepdim=True), 0.0
            )
            updated = torch.where(closes_two.unsqueeze(-1).unsqueeze(-1), pair, updated)
        closes = closes_one | closes_two
        updated = swap(updated, k, torch.where(closes, partner, k))
        B = torch.where(closes.unsqueeze(-1).unsqueeze(-1), updated, B)
    return B


def linalg_ldl_solve(
    LD: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, *, hermitian: bool = False
) -> torch.Tensor:
    """`aten.linalg_ldl_solve`: X with A X = B from sytrf's factorization of A (`hermitian` changes nothing
    for real matrices); the batch dimensions broadcast."""
    if _refused(LD, B):
        return NotImplemented
    batch = torch.broadcast_shapes(LD.shape[:-2], pivots.shape[:-1], B.shape[:-2])  # type: ignore[no-untyped-call]  # unannotated in torch
    n = LD.shape[-1]
    LD = LD.expand(*batch, n, n)
    pivots = pivots.expand(*batch, n)
    B = B.expand(*batch, *B.shape[-2:])
    return _ldl_solve(LD, pivots, B)


# -- matrix exponential ------------------------------------------------------------------------------------------

EXP_TAYLOR_DEGREE = 12
"""The Taylor polynomial's degree, for matrices scaled to 1-norm at most 1: its remainder, at most
e / 13! < 1e-9 relative, is far below fp32's rounding."""
EXP_MAX_SQUARINGS = 32
"""Squarings undo the scaling of matrices of 1-norm up to 2^32; a larger norm gives NaN rather than a result
whose scaled Taylor series was not accurate."""


def linalg_matrix_exp(A: torch.Tensor) -> torch.Tensor:
    """`aten.linalg_matrix_exp`: exp(A) by scaling and squaring, per matrix of the batch.

    Each matrix is scaled by 2^-s, s the smallest count with 1-norm / 2^s <= 1, its Taylor polynomial evaluated by
    Paterson-Stockmeyer (six matmuls), and the result squared s times: the graph squares EXP_MAX_SQUARINGS times,
    each squaring kept only by the matrices whose s asks for it.
    """
    if _refused(A):
        return NotImplemented
    n = A.shape[-1]
    if n == 0:
        return A.clone()
    norm = A.abs().sum(-2).amax(-1, keepdim=True).unsqueeze(-1)  # [..., 1, 1]
    squarings = torch.clamp(torch.ceil(torch.log2(norm)), min=0.0)
    scaled = A * torch.exp2(-squarings)
    identity = _identity(n, A)
    powers = [identity, scaled]
    for _ in range(2, 5):
        powers.append(powers[-1] @ scaled)
    coefficients = [1.0 / math.factorial(k) for k in range(EXP_TAYLOR_DEGREE + 1)]
    blocks = []
    for i in range(0, EXP_TAYLOR_DEGREE + 1, 4):
        block = coefficients[i] * powers[0]
        for r in range(1, min(4, EXP_TAYLOR_DEGREE + 1 - i)):
            block = block + coefficients[i + r] * powers[r]
        blocks.append(block)
    result = blocks[-1]
    for block in reversed(blocks[:-1]):
        result = result @ powers[4] + block
    for step in range(EXP_MAX_SQUARINGS):
        result = torch.where(squarings > step, result @ result, result)
    return torch.where(squarings > EXP_MAX_SQUARINGS, float("nan"), result)


def linalg_decompositions() -> dict[object, object]:
    """The decompositions of this module, keyed by ATen overload, for the tracers' table."""
    aten = torch.ops.aten
    return {
        aten.linalg_solve_triangular.default: linalg_solve_triangular,
        aten.triangular_solve.default: triangular_solve,
        aten.linalg_cholesky_ex.default: linalg_cholesky_ex,
        aten.cholesky.default: cholesky,
        aten.cholesky_solve.default: cholesky_solve,
        aten._cholesky_solve_helper.default: cholesky_solve,
        aten.cholesky_inverse.default: cholesky_inverse,
        aten.linalg_lu_factor_ex.default: linalg_lu_factor_ex,
        aten.linalg_lu.default: linalg_lu,
        aten.lu_unpack.default: lu_unpack,
        aten.linalg_lu_solve.default: linalg_lu_solve,
        aten._linalg_solve_ex.default: linalg_solve_ex,
        aten.linalg_inv_ex.default: linalg_inv_ex,
        aten._linalg_det.default: linalg_det,
        aten._linalg_slogdet.default: linalg_slogdet,
        aten.geqrf.default: geqrf,
        aten.linalg_householder_product.default: linalg_householder_product,
        aten.linalg_qr.default: linalg_qr,
        aten.ormqr.default: ormqr,
        aten.linalg_matrix_exp.default: linalg_matrix_exp,
        aten.linalg_ldl_factor_ex.default: linalg_ldl_factor_ex,
        aten.linalg_ldl_solve.default: linalg_ldl_solve,
        aten._linalg_eigh.default: linalg_eigh,
        aten._linalg_svd.default: linalg_svd,
        aten.linalg_pinv.atol_rtol_tensor: linalg_pinv,
        aten.linalg_pinv.atol_rtol_float: linalg_pinv,
        aten.linalg_matrix_rank.atol_rtol_tensor: linalg_matrix_rank,
        aten.linalg_matrix_rank.atol_rtol_float: linalg_matrix_rank,
    }
