"""Shared pytest setup: the `support` helpers importable from every test, the IR verified after every stage of
every compile, a clean torch.compile state, and the `--real-width` option that adds the slow cases of the real-width model set (`make models`)."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# every compile of the suite, and of the processes it starts, verifies the IR after each stage: a pass that breaks
# an invariant fails at its own stage (the `verify` option, off by default)
os.environ.setdefault("NEURON_MLIR_VERIFY", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-width",
        action="store_true",
        default=False,
        help="also run the cases marked real_width: every model of examples/models/real_width.py (make models)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --real-width, cases marked `real_width` (minutes and gigabytes each) are deselected, not skipped:
    the suite `make test` runs is the fast subset, and its count says so."""
    if config.getoption("--real-width"):
        return
    deselected = [item for item in items if item.get_closest_marker("real_width") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.get_closest_marker("real_width") is None]


def pytest_terminal_summary(terminalreporter) -> None:
    """The peak resident memory of each case that ran in a process of its own (the real-width models)."""
    rows = [
        (report.nodeid, value)
        for outcome in ("passed", "failed")
        for report in terminalreporter.getreports(outcome)
        if report.when == "call"
        for name, value in report.user_properties
        if name == "peak_rss_gib"
    ]
    if rows:
        terminalreporter.section("peak resident memory of each case's own process")
        for nodeid, gib in rows:
            terminalreporter.write_line(f"{gib:6.2f} GiB  {nodeid}")


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    """Tests compile into a cache of their own, never the user's ~/.cache/neuron-mlir."""
    import os

    os.environ["NEURON_MLIR_CACHE_DIR"] = str(tmp_path_factory.mktemp("neuron-mlir-cache"))


@pytest.fixture
def fresh_compiler():
    """A torch.compile cache and neuron-mlir stats that no other test has touched."""
    import torch

    import neuron_mlir

    torch._dynamo.reset()
    neuron_mlir.reset()
    yield
    torch._dynamo.reset()
    neuron_mlir.reset()
