"""The lowering-coverage sweep (tools/coverage_sweep.py) on a fast representative subset of PyTorch's OpInfo
database: one float32 sample per entry through torch.compile(backend="neuron-mlir") against eager."""

import pytest
import torch

from neuron_mlir.tools import coverage_sweep
from neuron_mlir.tools.opinfo_sweep import _op_db as op_db
from neuron_mlir.tools.opinfo_sweep import entry_name


@pytest.mark.usefixtures("fresh_compiler")
def test_representative_entries_run_natively():
    results = coverage_sweep.sweep(coverage_sweep.CI_SUBSET, max_samples=1, exact=True)
    assert {r.name for r in results} == set(coverage_sweep.CI_SUBSET)
    problems = [f"{r.name}: {r.status} ({r.reason})" for r in results if r.status != "native"]
    assert not problems, "\n".join(problems)


def test_classification_and_report():
    results = [
        coverage_sweep.EntryResult("add", "native"),
        coverage_sweep.EntryResult(
            "cumsum", "fallback", "ran on the CPU: aten.cumsum.default", 1, ["aten.cumsum.default"]
        ),
        coverage_sweep.EntryResult("mm", "failing", "ValueError: boom"),
        coverage_sweep.EntryResult("float", "no graph", "no ATen op to compile"),
    ]
    wide = coverage_sweep.EntryResult(
        "double", "fallback", "float64 or complex128 results, ran on the CPU: aten._to_copy.default", 1
    )
    wide.wide_result = True
    text = coverage_sweep.report([*results, wide], 3)
    assert "| all of op_db | 5 | 1 | 2 | 1 | 1 | **25.0%** (1/4) |" in text
    assert "| float64 or complex128 results | 1 | 0 | 1 | 0 | 0 | **0.0%** (0/1) |" in text
    assert "| all but those | 4 | 1 | 1 | 1 | 1 | **33.3%** (1/3) |" in text
    assert "| elementwise ops | 3 | 1 | 1 | 0 | 1 | **50.0%** (1/2) |" in text
    assert "| structured ops | 1 | 0 | 0 | 1 | 0 | **0.0%** (0/1) |" in text
    assert "| `cumsum` | elementwise | fallback | ran on the CPU: aten.cumsum.default |" in text
    assert "- `aten.cumsum.default`: 1" in text


def test_random_properties_catch_wrong_draws():
    import torch

    assert coverage_sweep._random_properties("rand_like", torch.rand(3), torch.rand(3), []) is None
    assert coverage_sweep._random_properties("rand_like", torch.rand(3) + 1, torch.rand(3), []) is not None
    x = torch.randn(50)
    eager = torch.where(torch.rand(50) > 0.5, x / 0.5, torch.zeros(50))
    good = torch.where(torch.rand(50) > 0.5, x / 0.5, torch.zeros(50))
    unscaled = torch.where(good != 0, x, torch.zeros(50))
    assert coverage_sweep._random_properties("nn.functional.dropout", good, eager, [x]) is None
    assert coverage_sweep._random_properties("nn.functional.dropout", unscaled, eager, [x]) is not None
    # in-place draws: inside the support their parameters give, and not the input left as it was
    check = coverage_sweep._random_properties
    draws = torch.rand(20) * 4 - 1
    source = x[:20]
    assert check("uniform", draws, draws, [source], (source, -1, 3)) is None
    assert check("uniform", draws, draws, [source], (source, 0, 1)) is not None
    assert check("uniform", source, source, [source], (source, -9, 9)) is not None  # unchanged
    assert check("exponential", draws.abs(), draws, [source], (source, 0.5)) is None
    assert check("exponential", draws - 2, draws, [source], (source, 0.5)) is not None
    assert check("geometric", draws.abs().ceil() + 1, draws, [source], (source, 0.2)) is None
    assert check("geometric", draws.abs() + 1, draws, [source], (source, 0.2)) is not None
    # alpha dropout: kept elements a x + b, dropped ones one constant, both read off eager's result
    alpha = "nn.functional.alpha_dropout"
    eager_mask, mask = torch.rand(50) > 0.3, torch.rand(50) > 0.3
    eager = torch.where(eager_mask, 1.5 * x + 0.2, torch.full((50,), -0.7))
    assert check(alpha, torch.where(mask, 1.5 * x + 0.2, torch.full((50,), -0.7)), eager, [x]) is None
    assert check(alpha, torch.where(mask, 1.5 * x, torch.full((50,), -0.7)), eager, [x]) is not None
    integers = torch.randint(3, 10, (20,))
    assert check("randint", integers, integers, [], (3, 10, (20,))) is None
    assert check("randint", integers, integers, [], (9, (20,))) is not None
    assert check("randint_like", integers, integers, [source], (source, 3, 10)) is None
    assert check("randint_like", integers + 0.5, integers, [source], (source, 3, 11)) is not None


def test_device_verdicts_enter_the_report():
    results = [coverage_sweep.EntryResult("add", "native"), coverage_sweep.EntryResult("nonzero", "fallback")]
    host = coverage_sweep.EntryResult(
        "nonzero", "fallback", "on the host: data-dependent shape", 1, ["aten.nonzero.default"]
    )
    device = [
        coverage_sweep.DeviceEntryResult(
            "add",
            {
                "float32": coverage_sweep.EntryResult("add", "native"),
                "bfloat16": coverage_sweep.EntryResult("add", "native"),
            },
        ),
        coverage_sweep.DeviceEntryResult("nonzero", {"float32": host, "bfloat16": host}),
    ]
    text = coverage_sweep.report(results, 3, device)
    assert "| device, float32 | 2 | 1 | 1 | 0 | 0 | **50.0%** (1/2) |" in text
    # an entry torch.compile found giving float64 results counts in the device's float64 row, not beside it
    results[1].wide_result = True
    wide_text = coverage_sweep.report(results, 3, device)
    assert "| device, float32, float64 or complex128 results | 1 | 0 | 1 | 0 | 0 | **0.0%** (0/1) |" in wide_text
    assert "| device, float32, all but those | 1 | 1 | 0 | 0 | 0 | **100.0%** (1/1) |" in wide_text
    assert "| device, bfloat16, elementwise ops | 1 | 1 | 0 | 0 | 0 | **100.0%** (1/1) |" in text
    assert "| `add` | elementwise | native |  | native | native |" in text
    assert "| `nonzero` | fallback | on the host: data-dependent shape |" in text
    assert "- `aten.nonzero.default`: 1" in text


def test_failure_reasons_lose_tracebacks_and_machine_paths():
    reason = (
        "DataDependentOutputException: aten._local_scalar_dense.default While executing %narrow : [num_users=1] "
        'Original traceback: File "/home/ci/repo/tools/coverage_sweep.py", line 312'
    )
    assert coverage_sweep.trim_reason(reason) == "DataDependentOutputException: aten._local_scalar_dense.default"
    assert (
        coverage_sweep.trim_reason("ValueError: no rule in /opt/x/lowering/a.py\nmore") == "ValueError: no rule in a.py"
    )


@pytest.mark.usefixtures("fresh_compiler")
def test_device_mode_counts_host_ops_from_the_dispatch():
    results = coverage_sweep.device_sweep(["add", "float_power"], max_samples=1, exact=True)
    add, power = sorted(results, key=lambda r: r.name)
    assert add.by_dtype["float32"].status == "native", add
    verdict = power.by_dtype["float32"]  # float64 has no storage type on the core
    assert verdict.status == "fallback", verdict
    assert verdict.fallback_ops == ["aten.pow.Tensor_Tensor_out"]
    assert "aten.pow.Tensor_Tensor_out" in verdict.reason


def _sample(name, dtype=torch.float32):
    op = next(o for o in op_db() if entry_name(o) == name)
    return op, next(s for s in op.sample_inputs("cpu", dtype) if s.kwargs.get("dropout_p", 0.5) > 0)


@pytest.fixture
def host_mode(monkeypatch):
    """The device's eager ops on the host: its semantics and generator without compiling (fast)."""
    monkeypatch.setenv("NEURON_MLIR_EAGER", "host")


def test_fixed_draws_catch_a_wrong_kernel_and_a_missing_draw(host_mode):
    # eager attention with dropout; the sample's call is checked for properties, its dropout-free call against eager
    name = "nn.functional.scaled_dot_product_attention"
    op, sample = _sample(name)
    assert coverage_sweep.run_device_sample(op, sample, name).problem is None

    class Wrong:  # right on the CPU, off by one on the device: the dropout-free comparison finds it
        @staticmethod
        def op(query, *args, **kwargs):
            result = op.op(query, *args, **kwargs)
            return result + 1 if query.device.type == "neuron" else result

    assert "with fixed draws" in str(coverage_sweep.run_device_sample(Wrong, sample, name).problem)
    fixed_args, fixed_kwargs = coverage_sweep.FIXED_DRAWS[name](sample)
    assert fixed_kwargs["dropout_p"] == 0.0
    assert sample.kwargs["dropout_p"] > 0
    without = torch.nn.functional.scaled_dot_product_attention(sample.input, *fixed_args, **fixed_kwargs)
    # a draw that dropped nothing: the result equals the one without dropout
    assert "left the result" in str(coverage_sweep._drawn_problem(name, sample, without, without))
    assert (
        coverage_sweep._drawn_problem(name, sample, op.op(sample.input, *sample.args, **sample.kwargs), without) is None
    )


def test_fractional_pooling_outputs_must_be_elements_of_their_plane(host_mode):
    name = "nn.functional.fractional_max_pool2d"
    op, sample = _sample(name)
    assert coverage_sweep.run_device_sample(op, sample, name).problem is None
    result = op.op(sample.input, *sample.args, **sample.kwargs)
    assert coverage_sweep._drawn_problem(name, sample, result, result) is None
    # another plane's maximum: an element of the input, but not of this plane
    moved = result.clone()
    moved[0, 0] = sample.input[0, 1].max()
    assert "no element of their plane" in str(coverage_sweep._drawn_problem(name, sample, moved, result))


def test_rrelu_properties_catch_a_changed_positive_and_a_slope_out_of_range():
    name = "nn.functional.rrelu"
    _, sample = _sample(name)
    x = sample.input
    slopes = torch.full_like(x, 0.25)
    good = torch.where(x <= 0, x * slopes, x)
    assert coverage_sweep._drawn_problem(name, sample, good, good) is None
    steep = torch.where(x <= 0, x * 1.5, x)  # a slope above `upper`
    assert "neither kept" in str(coverage_sweep._drawn_problem(name, sample, steep, good))
    shifted = torch.where(x <= 0, x * slopes, x + 1)  # positive elements changed
    assert "neither kept" in str(coverage_sweep._drawn_problem(name, sample, shifted, good))


def test_multinomial_properties_catch_impossible_draws():
    check = coverage_sweep._random_properties
    weights = torch.tensor([[0.2, 0.0, 0.8], [0.5, 0.5, 0.0]])
    expected = torch.tensor([[2, 0], [1, 0]])
    assert check("multinomial", torch.tensor([[0, 2], [0, 1]]), expected, [weights], (weights, 2)) is None
    problems = {
        "not categories": torch.tensor([[0, 3], [0, 1]]),
        "zero weight": torch.tensor([[1, 2], [0, 1]]),
        "twice": torch.tensor([[2, 2], [0, 1]]),
    }
    for words, drawn in problems.items():
        assert words in str(check("multinomial", drawn, expected, [weights], (weights, 2))), words


def test_a_reports_compile_verdicts_read_back(tmp_path):
    results = [
        coverage_sweep.EntryResult("add", "native"),
        coverage_sweep.EntryResult("cumsum", "fallback", "ran on the CPU: aten.a.default, aten.b.default", 1),
        coverage_sweep.EntryResult("mm", "failing", "ValueError: a | b"),
        coverage_sweep.EntryResult("float", "no graph", "no ATen op to compile"),
        coverage_sweep.EntryResult(
            "double", "fallback", "float64 or complex128 results, ran on the CPU: aten._to_copy.default", 1
        ),
    ]
    results[-1].wide_result = True
    path = tmp_path / "coverage.md"
    path.write_text(coverage_sweep.report(results, 3))
    read = {r.name: r for r in coverage_sweep.compile_results_of_report(path)}
    assert [(read[r.name].status, read[r.name].reason) for r in results] == [(r.status, r.reason) for r in results]
    assert read["cumsum"].fallback_ops == ["aten.a.default", "aten.b.default"]
    assert read["double"].wide_result
    assert read["double"].fallback_ops == ["aten._to_copy.default"]
    assert not read["cumsum"].wide_result


def test_sign_free_vectors_are_aligned_with_eagers_and_flip_together():
    import torch

    a = torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(0))
    values, vectors = torch.linalg.eigh(a + a.mT)
    flips = torch.tensor([1.0, -1.0, -1.0, 1.0])
    flipped = (values, vectors * flips)
    assert coverage_sweep._compare(flipped, (values, vectors)) is not None
    assert (
        coverage_sweep._compare(
            coverage_sweep._align_signs("linalg.eigh", flipped, (values, vectors)), (values, vectors)
        )
        is None
    )
    u, s, vh = torch.linalg.svd(a)
    together = (u * flips, s, (vh.mT * flips).mT)
    assert coverage_sweep._compare(coverage_sweep._align_signs("linalg.svd", together, (u, s, vh)), (u, s, vh)) is None
    # U flipped without V is another matrix: still a mismatch
    alone = (u * flips, s, vh)
    assert coverage_sweep._compare(coverage_sweep._align_signs("linalg.svd", alone, (u, s, vh)), (u, s, vh)) is not None
