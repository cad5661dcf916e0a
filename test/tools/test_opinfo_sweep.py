"""The OpInfo sweep harness on a representative handful of op_db entries (the full sweep is
`make importer-coverage`): elementwise with scalars, reductions, list arguments and results, multi-result ops,
optional arguments, integer outputs, a factory with no tensor input, an effect token, and an entry without a
graph."""

from neuron_mlir.tools import opinfo_sweep
from neuron_mlir.tools.opinfo_sweep import EntryResult

REPRESENTATIVE = [
    "add", "mul", "sum", "softmax", "cat", "split", "max.reduction_with_dim", "nn.functional.conv2d",
    "nn.functional.layer_norm", "nn.functional.avg_pool2d", "index_put", "argmax", "where", "clamp", "full",
    "linalg.inv",
]  # fmt: skip


def test_representative_entries_import_verify_round_trip_and_reproduce():
    results = {r.name: r for r in opinfo_sweep.sweep([*REPRESENTATIVE, "nonzero"], max_samples=2)}
    failures = {name: r.reason for name, r in results.items() if r.status == "fail"}
    assert not failures
    assert all(results[name].status == "pass" for name in REPRESENTATIVE)
    assert all(r.graphs >= 1 for name, r in results.items() if name != "nonzero")
    mismatches = {name: r.semantics for name, r in results.items() if r.semantics}
    assert not mismatches
    # an entry AOTAutograd has no graph for is counted apart, with its reason
    assert results["nonzero"].status == "no graph"
    assert "nonzero" in results["nonzero"].reason
    passed, failed, without, percent = opinfo_sweep.coverage(list(results.values()))
    assert (passed, failed, without, percent) == (len(results) - 1, 0, 1, 100.0)


def test_the_report_lists_totals_failures_mismatches_and_no_graph_reasons():
    results = [
        EntryResult("add", "pass", graphs=2, aten_ops=["aten.add.Tensor"]),
        EntryResult("bernoulli", "pass", graphs=1, semantics="semantics: output 0: 3 of 4 elements differ"),
        EntryResult("made.up", "fail", "import: no op for aten.made_up.default", graphs=1),
        EntryResult("nonzero", "no graph", "DynamicOutputShapeException: aten.nonzero.default"),
        EntryResult("unique", "no graph", "DynamicOutputShapeException: aten._unique2.default"),
    ]
    text = opinfo_sweep.report(results, max_samples=2, seconds=1.0)
    assert "| pass | 2 |" in text
    assert "| fail | 1 |" in text
    assert "| no graph from AOTAutograd | 2 |" in text
    assert "**66.7%**" in text
    assert "| `made.up` | import: no op for aten.made_up.default |" in text
    assert "| `bernoulli` | semantics: output 0: 3 of 4 elements differ |" in text
    assert "| DynamicOutputShapeException: aten.nonzero.default | `nonzero` |" in text
    assert "`aten.add.Tensor`" in text
