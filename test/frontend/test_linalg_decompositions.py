"""Factorizations the frontend unrolls into ATen ops: LAPACK's results (pivots, info and signs included) on
random well-conditioned batches, and compiled graphs with no CPU fallback."""

from __future__ import annotations

import pytest
import torch
from support import assert_close_to_torch
from support.compiled import check_compiled, run_compiled

import neuron_mlir
from neuron_mlir.frontend import linalg_decompositions as linalg
from neuron_mlir.frontend.fx_importer import GraphSignature

ORDERS = [1, 3, 8, 16]
BATCH = 2


def _orthogonal(*shape: int, generator: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(*shape, generator=generator, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)).float()


def well_conditioned(n: int, columns: int | None = None, seed: int = 0) -> torch.Tensor:
    """[BATCH, n, columns] with singular values in [1, 2]: rows need pivoting, and fp32 keeps ~6 digits."""
    generator = torch.Generator().manual_seed(seed)
    columns = n if columns is None else columns
    k = min(n, columns)
    left, right = _orthogonal(BATCH, n, k, generator=generator), _orthogonal(BATCH, columns, k, generator=generator)
    singular = 1 + torch.rand(BATCH, k, generator=generator)
    return (left * singular.unsqueeze(-2)) @ right.mT


def positive_definite(n: int, seed: int = 0) -> torch.Tensor:
    a = well_conditioned(n, seed=seed)
    return a @ a.mT


def triangle(n: int, upper: bool, seed: int = 0) -> torch.Tensor:
    """A triangular matrix with a dominant diagonal (random triangles are exponentially ill-conditioned)."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(BATCH, n, n, generator=generator) / n + torch.diag_embed(2 + torch.rand(BATCH, n))
    return values.triu() if upper else values.tril()


def rhs(n: int, k: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.randn(BATCH, n, k, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_its_solves_match_lapack(n: int, upper: bool) -> None:
    a = positive_definite(n)
    factor, info = linalg.linalg_cholesky_ex(a, upper=upper)
    assert_close_to_torch((factor, info), torch.linalg.cholesky_ex(a, upper=upper), "cholesky_ex")
    assert_close_to_torch(linalg.cholesky(a, upper), torch.cholesky(a, upper), "cholesky")
    exact = torch.linalg.cholesky(a, upper=upper)
    b = rhs(n)
    assert_close_to_torch(linalg.cholesky_solve(b, exact, upper), torch.cholesky_solve(b, exact, upper))
    assert_close_to_torch(linalg.cholesky_inverse(exact[0], upper), torch.cholesky_inverse(exact[0], upper))


def test_cholesky_reads_one_triangle_and_reports_the_first_bad_minor() -> None:
    a = positive_definite(4)
    a_lower_only = a.tril() + 100 * a.triu(1)  # garbage above the diagonal is never read
    assert_close_to_torch(linalg.linalg_cholesky_ex(a_lower_only), torch.linalg.cholesky_ex(a_lower_only))
    indefinite = a.clone()
    indefinite[0, 2, 2] = -50.0  # the third leading minor of the first matrix is not positive definite
    _, info = linalg.linalg_cholesky_ex(indefinite)
    assert info.dtype == torch.int32
    assert info.tolist() == torch.linalg.cholesky_ex(indefinite).info.tolist() == [3, 0]


@pytest.mark.parametrize("n", [*ORDERS, 17, 64, linalg.MAX_TRIANGULAR_ORDER])  # blocks of rows beyond 16
@pytest.mark.parametrize("upper", [False, True])
def test_triangular_solves_match_lapack(n: int, upper: bool) -> None:
    t, b = triangle(n, upper), rhs(n)
    for left in (True, False):
        for unit in (False, True):
            operand = b if left else b.mT
            expected = torch.linalg.solve_triangular(t, operand, upper=upper, left=left, unitriangular=unit)
            actual = linalg.linalg_solve_triangular(t, operand, upper=upper, left=left, unitriangular=unit)
            assert_close_to_torch(actual, expected, f"solve_triangular left={left} unit={unit}")
    for transpose in (False, True):
        expected = torch.triangular_solve(b, t[:1], upper, transpose)  # the coefficient broadcast to the batch
        assert_close_to_torch(linalg.triangular_solve(b, t[:1], upper, transpose), expected, "triangular_solve")


# square, wider (or taller) by 2 and narrower by 1, where that stays within the unrolled orders
RECTANGULAR = [
    (n, extra)
    for n in ORDERS
    for extra in (0, 2, -1)
    if n + extra >= 1 and n + max(extra, 0) <= linalg.MAX_UNROLLED_ORDER
]


@pytest.mark.parametrize(("n", "extra_columns"), RECTANGULAR)
def test_lu_with_partial_pivoting_matches_getrf(n: int, extra_columns: int) -> None:
    a = well_conditioned(n, n + extra_columns)
    assert_close_to_torch(linalg.linalg_lu_factor_ex(a), torch.linalg.lu_factor_ex(a), "lu_factor_ex")
    assert_close_to_torch(linalg.linalg_lu(a), torch.linalg.lu(a), "lu")
    packed, pivots = torch.linalg.lu_factor(a)
    assert_close_to_torch(linalg.lu_unpack(packed, pivots), torch.lu_unpack(packed, pivots), "lu_unpack")
    for unpack_data, unpack_pivots in ((False, True), (True, False)):
        actual = linalg.lu_unpack(packed, pivots, unpack_data, unpack_pivots)
        assert_close_to_torch(actual, torch.lu_unpack(packed, pivots, unpack_data, unpack_pivots), "lu_unpack")


@pytest.mark.parametrize("n", ORDERS)
def test_solves_inverse_and_determinants_match_lapack(n: int) -> None:
    a, b = well_conditioned(n), rhs(n)
    packed, pivots = torch.linalg.lu_factor(a)
    for left in (True, False):
        for adjoint in (False, True):
            operand = b if left else b.mT
            expected = torch.linalg.lu_solve(packed, pivots, operand, left=left, adjoint=adjoint)
            actual = linalg.linalg_lu_solve(packed, pivots, operand, left=left, adjoint=adjoint)
            assert_close_to_torch(actual, expected, f"lu_solve left={left} adjoint={adjoint}")
        operand = b if left else b.mT
        expected = torch.ops.aten._linalg_solve_ex(a, operand, left=left)
        assert_close_to_torch(linalg.linalg_solve_ex(a, operand, left=left), expected, f"solve_ex left={left}")
    vector = b[..., 0]  # linalg.solve's batch of vectors
    assert_close_to_torch(linalg.linalg_solve_ex(a, vector), torch.ops.aten._linalg_solve_ex(a, vector), "vector")
    assert_close_to_torch(linalg.linalg_inv_ex(a), torch.linalg.inv_ex(a), "inv_ex")
    assert_close_to_torch(linalg.linalg_det(a), torch.ops.aten._linalg_det(a), "det")
    assert_close_to_torch(linalg.linalg_slogdet(a), torch.ops.aten._linalg_slogdet(a), "slogdet")


def test_singular_matrices_report_the_first_zero_pivot() -> None:
    a = well_conditioned(4)
    a[1, :, 2] = 0.0  # the third column of the second matrix is zero
    _, _, info = linalg.linalg_lu_factor_ex(a)
    assert info.tolist() == torch.linalg.lu_factor_ex(a).info.tolist() == [0, 3]
    sign, log_magnitude, _, _ = linalg.linalg_slogdet(a)
    assert sign[1] == 0
    assert log_magnitude[1] == float("-inf")
    assert linalg.linalg_det(a)[0][1] == 0


@pytest.mark.parametrize(("n", "extra_rows"), RECTANGULAR)
def test_householder_qr_matches_geqrf_signs_included(n: int, extra_rows: int) -> None:
    a = well_conditioned(n + extra_rows, n)
    assert_close_to_torch(linalg.geqrf(a), torch.geqrf(a), "geqrf")
    for mode in ("reduced", "complete", "r"):
        assert_close_to_torch(linalg.linalg_qr(a, mode), torch.linalg.qr(a, mode), f"qr {mode}")
    factors, tau = torch.geqrf(a)
    if extra_rows >= 0:
        expected = torch.linalg.householder_product(factors, tau)
        assert_close_to_torch(linalg.linalg_householder_product(factors, tau), expected, "householder_product")
    for left in (True, False):
        for transpose in (False, True):
            other = rhs(a.shape[-2]) if left else rhs(a.shape[-2]).mT
            expected = torch.ormqr(factors, tau, other, left, transpose)
            assert_close_to_torch(linalg.ormqr(factors, tau, other, left, transpose), expected, "ormqr")


def test_a_column_zero_below_the_diagonal_gets_no_reflector() -> None:
    a = well_conditioned(4)
    a[0, 1:, 0] = 0.0
    factors, tau = linalg.geqrf(a)
    assert tau[0, 0] == 0
    assert_close_to_torch((factors, tau), torch.geqrf(a))


@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("norm", [0.1, 4.0, 40.0])
def test_matrix_exponential_matches_eager(n: int, norm: float) -> None:
    a = torch.randn(BATCH, n, n, generator=torch.Generator().manual_seed(n))
    a = a * norm / torch.linalg.matrix_norm(a, 1).unsqueeze(-1).unsqueeze(-1)  # 2^0 to 2^6 squarings
    assert_close_to_torch(linalg.linalg_matrix_exp(a), torch.linalg.matrix_exp(a))


def _canonical_signs(vectors: torch.Tensor) -> torch.Tensor:
    """Columns with their largest-magnitude entry made positive: vectors are unique up to sign only."""
    largest = torch.gather(vectors, -2, vectors.abs().argmax(-2, keepdim=True))
    return vectors * torch.sign(largest)


@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_jacobi_eigh_matches_lapack_up_to_the_vectors_signs(n: int, uplo: str) -> None:
    a = torch.randn(BATCH, n, n, generator=torch.Generator().manual_seed(n))
    # the other triangle holds garbage: only the triangle UPLO names is read
    a = (a + a.mT).tril() + 50 * torch.ones(n, n).triu(1) if uplo == "L" else (a + a.mT).triu() - 7 * a.tril(-1)
    values, vectors = linalg.linalg_eigh(a, uplo)
    expected_values, expected_vectors = torch.linalg.eigh(a, uplo)
    assert_close_to_torch(values, expected_values, "eigenvalues")
    assert_close_to_torch(_canonical_signs(vectors), _canonical_signs(expected_vectors), "eigenvectors")
    assert_close_to_torch(linalg.linalg_eigh(a, uplo, compute_v=False)[0], expected_values, "eigvalsh")


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (5, 2), (3, 7), (8, 8)])
def test_jacobi_svd_matches_lapack_up_to_the_vectors_signs(shape: tuple[int, int]) -> None:
    a = torch.randn(BATCH, *shape, generator=torch.Generator().manual_seed(sum(shape)))
    u, s, vh = linalg.linalg_svd(a, full_matrices=False)
    expected_u, expected_s, expected_vh = torch.linalg.svd(a, full_matrices=False)
    assert_close_to_torch(s, expected_s, "singular values")
    flips = torch.sign(torch.gather(u, -2, u.abs().argmax(-2, keepdim=True)))
    expected_flips = torch.sign(torch.gather(expected_u, -2, u.abs().argmax(-2, keepdim=True)))
    assert_close_to_torch(u * flips, expected_u * expected_flips, "U")
    assert_close_to_torch(vh * flips.mT, expected_vh * expected_flips.mT, "Vh")
    assert_close_to_torch(linalg.linalg_pinv(a), torch.linalg.pinv(a), "pinv")
    assert_close_to_torch(linalg.linalg_pinv(a, rtol=0.4), torch.linalg.pinv(a, rtol=0.4), "pinv with rtol")
    # linalg.pinv hands Python tolerances over as float64 scalars
    float64_rtol = torch.tensor(0.4, dtype=torch.float64)
    assert_close_to_torch(linalg.linalg_pinv(a, rtol=float64_rtol), torch.linalg.pinv(a, rtol=0.4), "float64 rtol")
    assert linalg.linalg_matrix_rank(a).tolist() == torch.linalg.matrix_rank(a).tolist()


@pytest.mark.parametrize("shape", [(5, 2), (2, 5), (4, 1)])
def test_full_svd_of_a_non_square_matrix_completes_the_basis(shape: tuple[int, int]) -> None:
    # the complement's basis is not unique (LAPACK's is one of many): checked by its properties, not by eager's
    a = torch.randn(BATCH, *shape, generator=torch.Generator().manual_seed(sum(shape)))
    u, s, vh = linalg.linalg_svd(a, full_matrices=True)
    m, n = shape
    assert u.shape == (BATCH, m, m)
    assert vh.shape == (BATCH, n, n)
    diagonal = torch.zeros(BATCH, m, n)
    diagonal[:, range(min(m, n)), range(min(m, n))] = s
    assert_close_to_torch(u @ diagonal @ vh, a, "U S Vh")
    assert_close_to_torch(u.mT @ u, torch.eye(m).expand(BATCH, m, m), "U^T U")
    assert_close_to_torch(vh @ vh.mT, torch.eye(n).expand(BATCH, n, n), "Vh Vh^T")
    assert_close_to_torch(s, torch.linalg.svdvals(a), "singular values")


def test_rank_deficient_matrices_keep_their_rank_and_pseudo_inverse() -> None:
    thin = torch.randn(BATCH, 6, 2, generator=torch.Generator().manual_seed(0))
    a = thin @ thin.mT  # rank 2, symmetric
    assert linalg.linalg_matrix_rank(a).tolist() == [2, 2]
    assert linalg.linalg_matrix_rank(a, hermitian=True).tolist() == [2, 2]
    assert_close_to_torch(linalg.linalg_pinv(a), torch.linalg.pinv(a))
    assert_close_to_torch(linalg.linalg_pinv(a, hermitian=True), torch.linalg.pinv(a, hermitian=True))


def test_other_dtypes_and_large_matrices_stay_whole() -> None:
    assert linalg.linalg_inv_ex(well_conditioned(3).double()) is NotImplemented
    too_large = linalg.MAX_UNROLLED_ORDER + 1
    assert linalg.linalg_cholesky_ex(torch.eye(too_large)) is NotImplemented
    assert linalg.linalg_lu_factor_ex(torch.randn(2, too_large)) is NotImplemented
    jacobi_too_large = torch.eye(linalg.MAX_JACOBI_ORDER + 1)
    assert linalg.linalg_eigh(jacobi_too_large) is NotImplemented
    assert linalg.linalg_svd(jacobi_too_large, full_matrices=False) is NotImplemented


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_factorizations_run_on_the_core() -> None:
    def factorizations(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        factor, info = torch.linalg.cholesky_ex(a)
        packed, pivots, lu_info = torch.linalg.lu_factor_ex(a)
        return (
            factor,
            info,
            torch.linalg.solve_triangular(factor, b, upper=False),
            packed,
            pivots,
            lu_info,
            torch.linalg.lu_solve(packed, pivots, b),
            *torch.linalg.qr(a),
        )

    check_compiled(factorizations, positive_definite(2), rhs(2))


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_jacobi_sweeps_run_on_the_core() -> None:
    check_compiled(torch.linalg.eigvalsh, positive_definite(2))


def indefinite(n: int, batch: int = 16, seed: int = 0) -> torch.Tensor:
    """Random symmetric-indefinite batches whose small diagonals make Bunch-Kaufman choose 2x2 blocks and
    interchanges, one matrix with a zero column (info > 0), the upper triangles garbage (sytrf reads the lower)."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(batch, n, n, generator=generator)
    a[: batch // 2].diagonal(dim1=-2, dim2=-1).mul_(0.01)
    if n > 2:
        a[-1, :, 1] = 0.0
        a[-1, 1, :] = 0.0
    return a


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_bunch_kaufman_ldl_matches_sytrf_pivots_included(n: int) -> None:
    a = indefinite(n)
    factors, pivots, info = linalg.linalg_ldl_factor_ex(a)
    expected_factors, expected_pivots, expected_info = torch.linalg.ldl_factor_ex(a)
    assert torch.equal(pivots, expected_pivots)
    assert torch.equal(info, expected_info)
    assert_close_to_torch(factors, expected_factors, "LD")
    if n >= 5:
        assert (pivots < 0).any(), "the batch should hold 2x2 blocks"
        assert (info > 0).any(), "the batch should hold a zero column"
    solvable = info == 0
    b = rhs(n, seed=2)[:1].expand(len(a), n, 3)[solvable]
    x = linalg.linalg_ldl_solve(expected_factors[solvable], expected_pivots[solvable], b)
    assert_close_to_torch(x, torch.linalg.ldl_solve(expected_factors[solvable], expected_pivots[solvable], b), "X")


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_ldl_factor_and_solve_run_on_the_core() -> None:
    # order 2 for a small graph (each step adds ~200 nodes): one 1x1 pair of steps, one 2x2 block
    a = indefinite(2, batch=2)
    assert torch.linalg.ldl_factor_ex(a)[1].tolist() == [[-2, -2], [1, 2]]

    def factor_and_solve(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        factors, pivots, info = torch.linalg.ldl_factor_ex(a)
        return factors, pivots, info, torch.linalg.ldl_solve(factors, pivots, b)

    check_compiled(factor_and_solve, a, rhs(2))


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_matrix_rank_runs_on_the_core() -> None:
    # ATen expands matrix_rank before the tracer's table is asked, into float64 tolerance arithmetic: the backend
    # routes the call to the decomposition instead; the second matrix has rank 1
    a = torch.stack([well_conditioned(2)[0], torch.tensor([[1.0, 2.0], [2.0, 4.0]])])

    def ranks(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.linalg.matrix_rank(a),
            torch.linalg.matrix_rank(a, hermitian=True),
            torch.linalg.matrix_rank(a, atol=torch.tensor([1.5, 1e-3]), rtol=torch.tensor(0.0)),
        )

    check_compiled(ranks, a)


def test_matrix_rank_calls_are_routed_unless_cpu_ops_names_them() -> None:
    graph_module = torch.fx.symbolic_trace(lambda a: torch.linalg.matrix_rank(a, hermitian=True))
    assert linalg.route_composite_calls(graph_module, cpu_ops=("linalg_matrix_rank",)) == 0
    assert linalg.route_composite_calls(graph_module) == 1
    assert [node.target for node in graph_module.graph.nodes if node.op == "call_function"] == [linalg.matrix_rank]
    a = torch.stack([well_conditioned(3)[0], torch.ones(3, 3)])
    a = a + a.mT
    assert graph_module(a).tolist() == torch.linalg.matrix_rank(a, hermitian=True).tolist() == [3, 1]


LINALG_CALLS = {
    "cholesky_inverse": lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a)),
    "det": torch.linalg.det,
    "slogdet": torch.linalg.slogdet,
    "inv": torch.linalg.inv,
    "lu": torch.linalg.lu,
    "lu_unpack": lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)),
    "householder_product": lambda a: torch.linalg.householder_product(*torch.geqrf(a)),
    "ormqr": lambda a: torch.ormqr(*torch.geqrf(a), a),
    "matrix_exp": torch.linalg.matrix_exp,
    "eigh": torch.linalg.eigh,
    "svd": lambda a: torch.linalg.svd(a, full_matrices=False),
    # traced as the full factorization of which only S is read
    "svdvals_of_a_non_square_matrix": lambda a: torch.linalg.svdvals(a[..., :2]),
    "pinv": torch.linalg.pinv,
    "pinv_hermitian": lambda a: torch.linalg.pinv(a, hermitian=True),
}


@pytest.mark.parametrize("name", LINALG_CALLS)
def test_every_decomposition_traces_to_ops_the_core_lowers(name: str) -> None:
    # the compiled tests above run a few end to end; tracing is enough to see that no node would fall back
    from torch.fx.experimental.proxy_tensor import make_fx

    from neuron_mlir.frontend.backend import decompositions
    from neuron_mlir.frontend.compile_graph import unsupported_nodes

    graph = make_fx(LINALG_CALLS[name], decomposition_table=decompositions(), tracing_mode="fake")(positive_definite(3))
    # error checks trace as plain calls here; AOTAutograd threads them through a token, and they become host
    # checks (test_compiled_checks_raise_eagers_error_from_the_host)
    unsupported = [str(node.target) for node in unsupported_nodes(graph)]
    assert [target for target in unsupported if target != "aten._linalg_check_errors.default"] == []


@pytest.mark.usefixtures("fresh_compiler")
def test_compiled_checks_raise_eagers_error_from_the_host() -> None:
    indefinite = positive_definite(3)
    indefinite[1, 0, 0] = -1.0
    with pytest.raises(RuntimeError) as expected:  # torch.linalg.LinAlgError
        torch.linalg.cholesky(indefinite)
    with pytest.raises(RuntimeError) as raised:
        run_compiled(torch.linalg.cholesky, indefinite)
    assert str(raised.value) == str(expected.value)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_linalg_checks_survive_the_signatures_json() -> None:
    signature = GraphSignature(num_inputs=1, inputs=[0], outputs=[0], output_names=["inverse"])
    signature.linalg_checks.append((1, "linalg.inv", True))
    text = signature.to_json()
    assert text is not None
    again = GraphSignature.from_json(text, torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph()))
    assert again.linalg_checks == [(1, "linalg.inv", True)]


def test_a_reduced_svd_of_a_non_square_matrix_traces_to_reduced_factors() -> None:
    # the dispatcher leaves out full_matrices=False, the schema's default: the decomposition must default to it
    from torch.fx.experimental.proxy_tensor import make_fx

    from neuron_mlir.frontend.backend import decompositions

    a = torch.randn(3, 2)
    graph = make_fx(lambda a: torch.linalg.svd(a, full_matrices=False), decomposition_table=decompositions())(a)
    assert [tuple(t.shape) for t in graph(a)] == [(3, 2), (2,), (2, 2)]


def test_every_decomposition_defaults_its_arguments_as_the_schema_does() -> None:
    # an argument at its schema default may reach a decomposition left out, and the function's own default decides
    import inspect

    from torch._decomp import core_aten_decompositions

    from neuron_mlir.frontend.backend import decompositions

    core = core_aten_decompositions()
    differing = []
    for op, rule in decompositions().items():
        if core.get(op) is rule or not getattr(rule, "__module__", "").startswith("neuron_mlir"):
            continue
        parameters = inspect.signature(rule).parameters
        for argument in op._schema.arguments:
            parameter = parameters.get(argument.name)
            if not argument.has_default_value() or parameter is None:
                continue
            if parameter.default is inspect.Parameter.empty or parameter.default != argument.default_value:
                differing.append(f"{op} {argument.name}: {parameter.default} for {argument.default_value}")
    assert differing == []


@pytest.mark.usefixtures("fresh_compiler")
def test_a_gated_delta_rule_chunk_solves_on_the_device() -> None:
    # Qwen3-Next's gated delta rule solves a unit lower triangle of its 64-token chunk: four blocks of 16 rows
    def solve(system: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return torch.linalg.solve_triangular(system, values, upper=False, unitriangular=True)

    system = triangle(64, upper=False).unsqueeze(1).expand(BATCH, 2, 64, 64)
    values = torch.randn(BATCH, 2, 64, 16, generator=torch.Generator().manual_seed(2))
    actual = torch.compile(solve, backend="neuron-mlir")(system, values)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert_close_to_torch(actual, solve(system, values))
