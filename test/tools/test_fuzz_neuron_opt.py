"""The neuron-opt fuzzer: cases are reproducible, outcomes are classified as the tool behaved, and a short seeded
run over the small inputs of the lit corpus finds no traceback, hang or unplaced diagnostic (`make fuzz` runs
10,000 cases over the whole corpus)."""

from __future__ import annotations

import random

import pytest

from neuron_mlir.tools import fuzz_neuron_opt as fuzz

# corpus chunks up to this size keep the short run within its time budget
SMALL_SEED_CHARS = 1200
SHORT_RUN_CASES = 150


@pytest.fixture(scope="module")
def small_corpus() -> list[fuzz.Seed]:
    return fuzz.load_corpus(max_chars=SMALL_SEED_CHARS)


def test_the_corpus_is_every_chunk_of_the_lit_tests_without_comments() -> None:
    corpus = fuzz.load_corpus()
    names = {seed.name.split("#")[0] for seed in corpus}
    assert "test/lit/lowering/Inputs/mlp_forward.synchronised.mlir" in names  # model IR of every stage
    assert any(name.startswith("test/lit/dialects/torch/") for name in names)
    assert all("// CHECK" not in seed.text and "// RUN" not in seed.text for seed in corpus)


def test_a_case_is_the_same_whatever_ran_before(small_corpus: list[fuzz.Seed]) -> None:
    ops = fuzz.op_names_by_dialect(small_corpus)
    first = [fuzz.make_case(7, index, small_corpus, ops) for index in range(20)]
    again = [fuzz.make_case(7, index, small_corpus, ops) for index in reversed(range(20))][::-1]
    assert first == again
    assert len({case.text for case in first}) > 15  # and the cases differ from each other


def test_each_mutation_changes_what_it_names() -> None:
    text = (
        "func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
        "  %0 = torch.aten.softmax.int %x {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>\n"
        "  func.return %0 : tensor<4x8xf32>\n"
        "}\n"
    )
    ops = {"torch": ["torch.aten.relu", "torch.aten.softmax.int"]}
    for mutation, _weight in fuzz.MUTATIONS:
        changed = [mutation(random.Random(seed), text, ops) != text for seed in range(10)]
        assert any(changed), mutation.__name__
    shapes = {fuzz.change_shape(random.Random(seed), text, ops) for seed in range(30)}
    assert any("tensor<4xf32>" in s or "x8x" in s.replace("4x8xf32", "") for s in shapes)  # ranks change too


def test_outcomes_are_classified_as_the_tool_behaved(tmp_path) -> None:
    path = tmp_path / "case.mlir"
    valid = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n}\n"
    assert fuzz.run_neuron_opt(valid, ["-p", "neuron-pipeline"], path).kind == fuzz.ACCEPTED
    invalid = (
        "func.func @main(%x: tensor<4xf32>) -> tensor<5xf32> {\n"
        "  %0 = torch.aten.relu %x : (tensor<4xf32>) -> tensor<5xf32>\n"
        "  func.return %0 : tensor<5xf32>\n}\n"
    )
    diagnosed = fuzz.run_neuron_opt(invalid, ["-p", "neuron-pipeline"], path)
    assert diagnosed.kind == fuzz.DIAGNOSED
    assert diagnosed.signature.startswith(f"{path}:2:3: error: torch.aten.relu: result shape")
    # a case that outlives its time limit is a hang, and the next case runs as usual
    big = (tmp_path / "big").with_suffix(".mlir")
    text = fuzz.load_corpus([fuzz.LIT_ROOT / "lowering/Inputs/mlp_backward.torch.mlir"])[0].text
    assert fuzz.run_neuron_opt(text, ["-p", "neuron-pipeline"], big, timeout=0.01).kind == fuzz.HANG
    assert fuzz.run_neuron_opt(valid, ["-p", "neuron-pipeline"], path, timeout=30).kind == fuzz.ACCEPTED


def test_a_crash_is_grouped_by_the_frame_that_raised() -> None:
    def failing() -> None:
        [][1]

    try:
        failing()
    except IndexError as error:
        site = fuzz.crash_site(error)
    assert site.startswith("IndexError at test/tools/test_fuzz_neuron_opt.py:")
    assert site.endswith("(failing)")


def test_a_short_seeded_run_finds_no_traceback_hang_or_unplaced_diagnostic(small_corpus) -> None:
    ops = fuzz.op_names_by_dialect(small_corpus)
    cases = [fuzz.make_case(0, index, small_corpus, ops) for index in range(SHORT_RUN_CASES)]
    summary = fuzz.Summary()
    for case, outcome in fuzz.run_cases(cases, jobs=1, timeout=60):
        summary.add(case, outcome)
    assert summary.cases == SHORT_RUN_CASES
    assert summary.failed == 0, summary.render(seed=0)
    assert summary.kinds[fuzz.ACCEPTED] > 0
    assert summary.kinds[fuzz.DIAGNOSED] > 0
