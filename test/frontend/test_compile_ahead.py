"""The backward compiled ahead in a forked child: the same programs, taken from the cache, and nothing left behind
when the child fails, stalls or is not needed."""

import gc
import logging
import os
import time

import pytest
import torch

import neuron_mlir
from neuron_mlir.frontend import compile_ahead
from neuron_mlir.frontend.backend import CompileOptions
from neuron_mlir.frontend.cache import clear_memory
from neuron_mlir.runtime import profile, simulator
from neuron_mlir.runtime.timeline import Timeline


@pytest.fixture
def small_graphs_ahead(monkeypatch, tmp_path):
    """Compile ahead on for the small graphs of these tests, each run with a cache of its own."""
    monkeypatch.setattr(compile_ahead, "MIN_NODES", 1)
    monkeypatch.setenv("NEURON_MLIR_COMPILE_AHEAD", "1")
    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path / "first"))
    clear_memory()
    torch._dynamo.reset()
    neuron_mlir.reset()
    yield
    torch._dynamo.reset()
    neuron_mlir.reset()
    clear_memory()
    assert not compile_ahead._CHILDREN  # every child collected or abandoned


def _training_step() -> dict[str, torch.Tensor]:
    """Gradients of one compiled training step of a small MLP (fixed weights and data)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    torch.compile(model, backend="neuron-mlir")(x).square().sum().backward()
    return {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}


def _fresh_cache(monkeypatch, directory) -> None:
    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(directory))
    clear_memory()
    torch._dynamo.reset()
    neuron_mlir.reset()


def test_the_backward_compiled_ahead_gives_the_same_gradients(small_graphs_ahead, monkeypatch, tmp_path):
    ahead = _training_step()
    stats = neuron_mlir.stats()
    assert stats["compiled_ahead"] == 1  # the backward's program, taken from the child
    assert stats["cache_misses"] == 1  # the forward, compiled here
    assert stats["cache_hits"] == 0

    _fresh_cache(monkeypatch, tmp_path / "second")
    monkeypatch.setenv("NEURON_MLIR_COMPILE_AHEAD", "0")
    here = _training_step()
    assert neuron_mlir.stats()["compiled_ahead"] == 0
    assert neuron_mlir.stats()["cache_misses"] == 2
    assert ahead.keys() == here.keys()
    for name in here:
        assert torch.equal(ahead[name], here[name]), name  # the same program


def test_a_failed_child_leaves_the_compile_to_the_process(small_graphs_ahead, monkeypatch, tmp_path):
    expected = _training_step()
    _fresh_cache(monkeypatch, tmp_path / "second")
    monkeypatch.setattr(compile_ahead, "_child_main", lambda *arguments: os._exit(1))
    actual = _training_step()
    assert neuron_mlir.stats()["compiled_ahead"] == 0
    assert neuron_mlir.stats()["cache_misses"] == 2
    for name in expected:
        assert torch.equal(actual[name], expected[name]), name


def test_a_stalled_child_is_killed_and_the_process_compiles(small_graphs_ahead, monkeypatch, tmp_path, caplog):
    def stall(*arguments) -> None:
        time.sleep(600)  # no CPU time: the parent takes it for stuck
        os._exit(0)

    monkeypatch.setattr(compile_ahead, "_child_main", stall)
    monkeypatch.setattr(compile_ahead, "STALL_SECONDS", 0.3)
    with caplog.at_level(logging.WARNING, logger="neuron_mlir"):
        gradients = _training_step()
    assert "stopped progressing" in caplog.text
    assert neuron_mlir.stats()["compiled_ahead"] == 0
    assert neuron_mlir.stats()["cache_misses"] == 2
    assert all(torch.isfinite(gradient).all() for gradient in gradients.values())


@pytest.fixture
def timelines(monkeypatch) -> list[object]:
    """The timelines this process makes (a run that times itself makes one; a child's are its own)."""
    made: list[object] = []

    class CountedTimeline(Timeline):
        def __init__(self, *arguments, **keywords) -> None:
            super().__init__(*arguments, **keywords)
            made.append(self)

    monkeypatch.setattr(simulator, "Timeline", CountedTimeline)
    return made


def test_the_backward_s_first_run_takes_the_child_s_analysis(small_graphs_ahead, timelines, monkeypatch, tmp_path):
    ahead = _training_step()
    assert neuron_mlir.stats()["compiled_ahead"] == 1
    assert len(timelines) == 1  # the forward's first run timed itself; the backward's took the child's
    ahead_profiles = neuron_mlir.profiles()

    _fresh_cache(monkeypatch, tmp_path / "second")
    monkeypatch.setenv("NEURON_MLIR_COMPILE_AHEAD", "0")
    here = _training_step()
    assert len(timelines) == 3
    here_profiles = neuron_mlir.profiles()
    assert ahead_profiles.keys() == here_profiles.keys()
    for name, found in here_profiles.items():
        assert ahead_profiles[name] == found, name
    for name in here:
        assert torch.equal(ahead[name], here[name]), name


def test_an_analysis_still_being_made_is_waited_for(small_graphs_ahead, timelines, monkeypatch):
    analyse = simulator.analyse_validated

    def slowly(*arguments):  # (in the child) still analysing when the parent reads the programs
        time.sleep(1.0)
        return analyse(*arguments)

    monkeypatch.setattr(simulator, "analyse_validated", slowly)
    _training_step()
    assert neuron_mlir.stats()["compiled_ahead"] == 1
    assert len(timelines) == 1  # the backward's first run waited for the child's analysis


@pytest.mark.parametrize("failure", ["race", "bad bytes"])
def test_a_child_without_an_analysis_leaves_it_to_the_first_run(
    small_graphs_ahead, timelines, monkeypatch, tmp_path, caplog, failure
):
    expected = _training_step()
    _fresh_cache(monkeypatch, tmp_path / "second")
    timelines.clear()
    if failure == "race":  # what the child's analysis gives for a racy program
        monkeypatch.setattr(simulator, "analyse_validated", lambda *arguments: None)
    else:
        monkeypatch.setattr(profile, "encode_profile", lambda found: b"not a profile")
    with caplog.at_level(logging.WARNING, logger="neuron_mlir"):
        actual = _training_step()
    assert neuron_mlir.stats()["compiled_ahead"] == 1
    assert len(timelines) == 2  # the backward's first run timed and checked itself
    assert ("ignoring a first run's analysis" in caplog.text) == (failure == "bad bytes")
    for name in expected:
        assert torch.equal(actual[name], expected[name]), name


def test_a_backward_never_asked_for_is_abandoned(small_graphs_ahead):
    graph = torch.fx.symbolic_trace(lambda x: torch.ops.aten.mul.Tensor(x, x))
    for node in graph.graph.nodes:
        if node.op == "placeholder":
            node.meta["val"] = torch.empty(4, 4)
    ahead = compile_ahead.AheadCompile(CompileOptions())
    ahead.remember(graph)
    ahead.start()
    child = ahead.child
    assert child is not None
    pid, directory = child.pid, child.directory
    assert directory.is_dir()
    del ahead, child
    gc.collect()
    assert pid not in compile_ahead._CHILDREN
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(pid, os.WNOHANG)
    assert not directory.exists()


@pytest.mark.parametrize(
    "options",
    [
        CompileOptions(debug_dir="/tmp/debug"),  # its files come from compiling in the process
        CompileOptions(time_passes=True),  # so do the printed pass times
        CompileOptions(cache=False),  # the child's programs come back through the cache
    ],
)
def test_compile_ahead_is_off_where_it_cannot_pay(options):
    assert not compile_ahead.enabled(options)


def test_the_option_the_environment_and_one_core_turn_compile_ahead_off(monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_COMPILE_AHEAD", "1")
    assert CompileOptions.from_user({}).compile_ahead
    assert not compile_ahead.enabled(CompileOptions.from_user({"compile_ahead": False}))
    monkeypatch.setenv("NEURON_MLIR_COMPILE_AHEAD", "0")
    assert not compile_ahead.enabled(CompileOptions.from_user({}))
    monkeypatch.setenv("NEURON_MLIR_COMPILE_AHEAD", "1")
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert not compile_ahead.enabled(CompileOptions.from_user({}))
