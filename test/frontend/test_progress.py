"""Progress of long compiles: when it is shown, what it says, and where it goes."""

from __future__ import annotations

import io
import logging
import time

import pytest
import torch

import neuron_mlir
from neuron_mlir.frontend import progress as progress_module
from neuron_mlir.frontend.backend import CompileOptions
from neuron_mlir.frontend.progress import CompileProgress, progress_enabled, progress_setting


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def own_stderr_output(monkeypatch):
    """No logging handler receives progress records, as in a script that configures no logging (pytest's own
    capture handlers aside): the reports are written to the stream. Logger levels are restored afterwards."""
    saved = {name: logging.getLogger(name).level for name in ("neuron_mlir", "neuron_mlir.progress")}
    monkeypatch.setattr(progress_module, "logging_has_handlers", lambda: False)
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    logging.disable(logging.NOTSET)


def test_the_setting_forces_or_leaves_the_choice(monkeypatch) -> None:
    assert [progress_setting(v) for v in ("1", "0", "", None, True, False, "off")] == [
        True, False, None, None, True, False, False,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="progress must be 0 or 1"):
        progress_setting("sometimes")
    monkeypatch.setenv("NEURON_MLIR_PROGRESS", "1")
    assert CompileOptions.from_user({}).progress is True
    assert CompileOptions.from_user({"progress": False}).progress is False  # the option beats the environment
    monkeypatch.setenv("NEURON_MLIR_PROGRESS", "0")
    assert CompileOptions.from_user({}).progress is False
    monkeypatch.delenv("NEURON_MLIR_PROGRESS")
    assert CompileOptions.from_user({}).progress is None


@pytest.mark.usefixtures("own_stderr_output")
def test_shown_on_a_terminal_unless_forced_off_or_silenced_by_logging() -> None:
    assert progress_enabled(None, Terminal())
    assert not progress_enabled(None, io.StringIO())  # not a terminal: quiet
    assert progress_enabled(True, io.StringIO())  # forced on
    assert not progress_enabled(False, Terminal())  # forced off
    logging.getLogger("neuron_mlir").setLevel(logging.WARNING)
    assert not progress_enabled(None, Terminal())
    assert progress_enabled(True, Terminal())  # forcing beats logging
    logging.getLogger("neuron_mlir.progress").setLevel(logging.INFO)  # the nearer logger decides
    assert progress_enabled(None, Terminal())
    logging.getLogger("neuron_mlir.progress").setLevel(logging.ERROR)
    assert not progress_enabled(None, Terminal())
    logging.getLogger("neuron_mlir.progress").setLevel(logging.NOTSET)
    logging.getLogger("neuron_mlir").setLevel(logging.NOTSET)
    logging.disable(logging.INFO)
    assert not progress_enabled(None, Terminal())


@pytest.mark.usefixtures("own_stderr_output")
def test_nothing_before_the_delay_then_one_line_per_step() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = CompileProgress(True, stream, delay=2.0, clock=clock)
    progress.step("graph0_forward: import")
    clock.now += 1.5
    progress.step("graph0_forward: stage torch, pass torch-canonicalize")
    assert stream.getvalue() == ""
    clock.now += 1.0
    progress.step("graph0_forward: stage tile, pass convert-torch-to-tile")
    clock.now += 0.25
    progress.step("graph0_forward: stage tile, pass tile-fuse-loops")
    progress.finish()
    assert stream.getvalue().splitlines() == [
        "neuron-mlir: graph0_forward: stage tile, pass convert-torch-to-tile (2.5 s)",
        "neuron-mlir: graph0_forward: stage tile, pass tile-fuse-loops (2.8 s)",
        "neuron-mlir: compiled in 2.8 s",
    ]


@pytest.mark.usefixtures("own_stderr_output")
def test_a_short_compile_prints_nothing_and_a_terminal_gets_one_rewritten_line() -> None:
    stream, clock = Terminal(), Clock()
    short = CompileProgress(True, stream, delay=2.0, clock=clock)
    short.step("graph0_forward: import")
    clock.now += 1.9
    short.finish()
    assert stream.getvalue() == ""
    progress = CompileProgress(True, stream, delay=2.0, clock=clock)
    clock.now += 3.0
    progress.step("graph1_backward: stage neuron, pass neuron-insert-sync")
    progress.finish()
    assert stream.getvalue() == (
        "\r\x1b[Kneuron-mlir: graph1_backward: stage neuron, pass neuron-insert-sync (3.0 s)"
        "\r\x1b[Kneuron-mlir: compiled in 3.0 s\n"
    )


@pytest.mark.usefixtures("own_stderr_output")
def test_a_long_step_is_reported_while_it_runs() -> None:
    stream = io.StringIO()
    progress = CompileProgress(True, stream, delay=0.05)
    progress.step("graph0_forward: stage tile, pass convert-torch-to-tile")
    deadline = time.monotonic() + 5.0
    while not stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    progress.finish()
    assert stream.getvalue().startswith("neuron-mlir: graph0_forward: stage tile, pass convert-torch-to-tile (")


def test_with_logging_configured_the_reports_are_its_records(caplog) -> None:
    stream, clock = io.StringIO(), Clock()
    # the root logger keeps its WARNING level: it does not hide a progress that was asked for
    assert logging.getLogger().getEffectiveLevel() == logging.WARNING
    progress = CompileProgress(True, stream, delay=2.0, clock=clock)
    clock.now += 2.0
    progress.step("graph0_forward: stage tile, pass convert-torch-to-tile")
    progress.finish()
    assert stream.getvalue() == ""
    records = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        ("neuron_mlir.progress", logging.INFO, "graph0_forward: stage tile, pass convert-torch-to-tile (2.0 s)"),
        ("neuron_mlir.progress", logging.INFO, "compiled in 2.0 s"),
    ]


@pytest.mark.usefixtures("fresh_compiler", "own_stderr_output")
def test_a_compile_reports_its_graphs_stages_and_passes(monkeypatch, capsys) -> None:
    monkeypatch.setattr(progress_module, "DELAY_SECONDS", 0.0)  # every compile is long enough
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU())
    x = torch.randn(3, 6)
    torch.compile(model, backend="neuron-mlir", options={"progress": True, "cache": False})(x).sum().backward()
    lines = capsys.readouterr().err.splitlines()
    for expected in (
        "neuron-mlir: trace (AOTAutograd) (",
        "neuron-mlir: graph0_forward: import (",
        "neuron-mlir: graph0_forward: stage tile, pass convert-torch-to-tile (",
        "neuron-mlir: graph0_forward: stage synchronised, pass neuron-insert-sync (",
        "neuron-mlir: graph0_forward: bundle (",
        "neuron-mlir: graph1_backward: stage torch, pass torch-canonicalize (",
        "neuron-mlir: compiled in ",
    ):
        assert any(line.startswith(expected) for line in lines), f"no line starting {expected!r} in {lines}"
    torch._dynamo.reset()
    neuron_mlir.reset()
    torch.compile(model, backend="neuron-mlir", options={"progress": False, "cache": False})(x)
    assert "neuron-mlir:" not in capsys.readouterr().err
