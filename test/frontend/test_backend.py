"""The torch.compile backend: options, fallback and strict mode, debug dumps, and the trace of a run."""

import copy
import json
import re
import shlex
import subprocess
import sys
import warnings
from typing import Any

import pytest
import torch
from support import REPO, assert_close_to_torch

import neuron_mlir
from neuron_mlir.frontend.backend import _OPTION_NAMES, AUTO_CAST_MODES, CompileOptions

sys.path.insert(0, str(REPO / "examples"))
from mlp import MLP

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _mlp_run(options=None):
    torch.manual_seed(0)
    model = MLP((30, 40, 5))
    compiled = torch.compile(model, backend="neuron-mlir", options=options or {})
    x = torch.randn(3, 30)
    out = compiled(x)
    out.sum().backward()
    return model, x, out


def test_target_option_reaches_the_compiler():
    _mlp_run({"target": "trn1"})
    profiles = neuron_mlir.profiles()
    assert {p.target for p in profiles.values()} == {"trn1"}


def test_unknown_options_are_refused_by_name():
    model = torch.compile(torch.nn.Linear(2, 2), backend="neuron-mlir", options={"tagret": "trn2"})
    with pytest.raises(Exception, match=r"unknown option.*tagret"):
        model(torch.randn(1, 2))


def test_a_misspelled_cpu_op_is_an_error_naming_the_closest_ops():
    options: dict[str, Any] = {"cpu_ops": ["aten.cumsun"]}
    compiled = torch.compile(WithCumsum(), backend="neuron-mlir", options=options)
    with pytest.raises(Exception, match=r"cpu_ops: unknown op 'aten.cumsun' .*closest known: aten.cumsum"):
        compiled(torch.randn(4, 5))
    with pytest.raises(ValueError, match=re.escape("'aten.linear' never reaches the compiler")):
        CompileOptions.from_user({"cpu_ops": ["aten.linear"]})
    for spelling in ("aten.cumsum", "cumsum", "aten.cumsum.default", "aten.add", "aten.add.Tensor"):
        assert CompileOptions.from_user({"cpu_ops": [spelling]}).cpu_ops == (spelling,)


def test_auto_cast_takes_its_modes_and_refuses_anything_else():
    for off in (False, "none", None):
        assert CompileOptions.from_user({"auto_cast": off}).auto_cast == "none"
    assert CompileOptions.from_user({}).auto_cast == "none"
    for mode in ("matmul", "all"):
        assert CompileOptions.from_user({"auto_cast": mode}).auto_cast == mode
    for wrong in ("bf16", True, "Matmul"):
        with pytest.raises(ValueError, match="auto_cast") as info:
            CompileOptions.from_user({"auto_cast": wrong})
        assert str(info.value) == (
            f'neuron-mlir: auto_cast={wrong!r}: not a mode (modes: "none", "matmul", "all"; False means "none")'
        )
    assert all(f'`"{mode}"`' in _readme_option("auto_cast") for mode in AUTO_CAST_MODES)


def _readme_option(name: str) -> str:
    return next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith(f"| `{name}` |"))


def test_the_readme_options_table_lists_exactly_the_accepted_options():
    readme = (REPO / "README.md").read_text()
    table = readme.split("Options (`options={...}`", 1)[1].split("\n\n", 2)[1]
    listed = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    assert listed == _OPTION_NAMES


class WithCumsum(torch.nn.Module):
    def forward(self, x):
        a = torch.relu(x) * 2.0
        b = torch.cumsum(a, dim=1)  # forced onto the CPU below
        return torch.tanh(b) + a


# torch.compile annotates option values as scalars or callables; this backend also takes a list of op names
FORCE_CUMSUM: dict[str, Any] = {"cpu_ops": ["aten.cumsum"]}


def test_an_unsupported_op_runs_in_place_on_the_cpu_and_the_rest_compiles():
    x = torch.randn(4, 5)
    compiled = torch.compile(WithCumsum(), backend="neuron-mlir", options=FORCE_CUMSUM)
    with pytest.warns(UserWarning, match=r"aten.cumsum.default is sent to the CPU.*test_backend.py:\d+"):
        out = compiled(x)
    assert_close_to_torch(out, WithCumsum()(x))
    stats = neuron_mlir.stats()
    assert stats["fallback_ops"] == {"aten.cumsum.default": 1}
    assert stats["nodes_fallen_back"] == 1
    # the nodes before and after the CPU node compiled into two regions, both run on the simulated core
    assert stats["graphs_compiled"] == 2
    assert len(neuron_mlir.profiles()) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning per op, not per call
        assert_close_to_torch(compiled(x), WithCumsum()(x))


def test_a_training_step_through_a_partitioned_graph_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 6), WithCumsum())
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="neuron-mlir", options=FORCE_CUMSUM)
    x = torch.randn(3, 5)
    with pytest.warns(UserWarning, match="cumsum"):
        compiled(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert_close_to_torch(p.grad, q.grad, f"grad of {name}")


def _scale_and_shift(x, y):
    return x * y + x


@pytest.mark.parametrize(
    ("dtype", "cause"),
    [
        (torch.float64, "float64 is not supported on the NeuronCore (no fp64 engine datapath)"),
        (
            torch.complex128,
            "complex128 is not supported on the NeuronCore (no fp64 engine datapath for its float64 halves)",
        ),
    ],
)
def test_a_fallback_for_a_dtype_names_the_dtype_as_the_cause(dtype, cause):
    x, y = torch.randn(4, 3, dtype=dtype), torch.randn(4, 3, dtype=dtype)
    compiled = torch.compile(_scale_and_shift, backend="neuron-mlir")
    with pytest.warns(UserWarning, match="is not supported on the NeuronCore") as caught:
        out = compiled(x, y)
    expected = _scale_and_shift(x, y)
    actual, reference = (torch.view_as_real(t) if t.is_complex() else t for t in (out, expected))
    assert_close_to_torch(actual, reference)
    messages = [str(w.message) for w in caught if "neuron-mlir" in str(w.message)]
    assert f"neuron-mlir: aten.mul.Tensor: {cause}; it runs eagerly on the CPU" in "\n".join(messages)
    assert not any("no NeuronCore lowering" in m for m in messages)
    strict = torch.compile(_scale_and_shift, backend="neuron-mlir", options={"strict": True})
    torch._dynamo.reset()
    with pytest.raises(Exception, match=re.escape("(aten.mul.Tensor) at ") + ".*" + re.escape(cause)):
        strict(x, y)


def test_strict_mode_turns_a_fallback_into_an_error_naming_op_and_line():
    compiled = torch.compile(WithCumsum(), backend="neuron-mlir", options={"strict": True, **FORCE_CUMSUM})
    with pytest.raises(Exception, match=r"(?s)strict.*cumsum.*test_backend.py:\d+"):
        compiled(torch.randn(4, 5))


def test_strict_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")
    compiled = torch.compile(WithCumsum(), backend="neuron-mlir", options=FORCE_CUMSUM)
    with pytest.raises(Exception, match="strict"):
        compiled(torch.randn(4, 5))


def test_default_backend_can_be_neuron_mlir():
    torch.compiler.set_default_backend("neuron-mlir")
    try:
        model = torch.nn.Linear(5, 3)
        x = torch.randn(2, 5)
        assert_close_to_torch(torch.compile(model)(x), model(x))
    finally:
        torch.compiler.set_default_backend(None)
    assert neuron_mlir.stats()["graphs_compiled"] == 1


def test_a_second_compile_of_the_same_graph_hits_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path))
    _mlp_run()
    first = neuron_mlir.stats()
    assert first["cache_misses"] == 2
    assert first["cache_hits"] == 0
    assert len(list(tmp_path.glob("*.bundle"))) == 2
    torch._dynamo.reset()
    from neuron_mlir.frontend.cache import clear_memory

    clear_memory()  # as in a new process: only the disk remains
    _mlp_run()
    assert neuron_mlir.stats()["cache_hits"] == 2


def test_debug_dir_holds_every_stage_and_reproduces(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_DEBUG_DIR", str(tmp_path))
    model, x, out = _mlp_run()
    forward = tmp_path / "graph0_forward"
    names = {p.name for p in forward.iterdir()}
    assert {"fx_graph.py", "0_imported.mlir", "1_torch.mlir", "2_tile.mlir", "3_neuron.mlir"} <= names
    assert {"4_allocated.mlir", "5_synchronised.mlir", "program.bundle", "trace.json", "reproduce.sh"} <= names
    # each stage's IR carries source locations and reproduces the next stage with neuron-opt
    assert "mlp.py" in (forward / "3_neuron.mlir").read_text()
    neuron_opt = str(REPO / ".venv" / "bin" / "neuron-opt") if (REPO / ".venv").exists() else "neuron-opt"
    run = subprocess.run(
        [neuron_opt, str(forward / "0_imported.mlir"), "-p", "neuron-pipeline"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    # reproduce.sh runs from any shell, without the virtual environment on PATH, and writes each stage's IR
    # exactly as the compiler saved it
    for graph in (forward, tmp_path / "graph1_backward"):
        script = subprocess.run(
            ["/bin/sh", str(graph / "reproduce.sh")],
            capture_output=True,
            text=True,
            cwd=tmp_path.parent,
            env={"PATH": "/usr/bin:/bin", "NEURON_MLIR_CACHE_DIR": "off"},
        )
        assert script.returncode == 0, script.stdout + script.stderr
        for stage in ("1_torch", "2_tile", "3_neuron", "4_allocated", "5_synchronised"):
            reproduced = (graph / f"{stage}.reproduced.mlir").read_bytes()
            assert reproduced == (graph / f"{stage}.mlir").read_bytes(), f"{graph.name}: {stage} differs"
    # the bundle on disk runs and gives the same forward output
    from neuron_mlir.runtime.bundle import read_bundle
    from neuron_mlir.runtime.simulator import run_program

    program = read_bundle(forward / "program.bundle")
    params = [p.detach().numpy() for p in model.parameters()]
    inputs = {
        "primals1": params[0],
        "primals2": params[1],
        "primals3": x.numpy(),
        "primals4": params[2],
        "primals5": params[3],
    }
    outputs, _ = run_program(program, [inputs[b.name] for b in program.inputs])
    assert_close_to_torch(torch.from_numpy(outputs[0]), out.detach())


def test_trace_has_one_track_per_engine_and_events_name_the_source_line():
    _mlp_run()
    for profile in neuron_mlir.profiles().values():
        trace = json.loads(json.dumps(profile.chrome_trace()))  # valid JSON, round trip
        events = trace["traceEvents"]
        tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
        assert len(set(tracks.values())) == len(tracks), "one named track per queue"
        work = [e for e in events if e.get("ph") == "X"]
        assert work
        assert {e["tid"] for e in work} <= set(tracks)
        assert {"TensorE", "VectorE"} <= {name.split(" ")[0] for name in tracks.values()}
        located = [e for e in work if "mlp.py:" in e["args"].get("location", "")]
        assert len(located) == len(work), "every instruction names the user's source line"
        assert all(e["dur"] > 0 for e in work)


def test_tensor_assertions_are_checked_after_the_run():
    def guarded(x):
        torch._assert_async((x > -100).all(), "x is too small")
        return x * 2

    compiled = torch.compile(guarded, backend="neuron-mlir", options={"strict": True})
    x = torch.randn(4)
    assert_close_to_torch(compiled(x), guarded(x))
    with pytest.raises(RuntimeError, match="x is too small"):
        compiled(torch.full((4,), -1000.0))


class ManyBags(torch.nn.Module):
    """An embedding bag with more bags than the lowering handles: it refuses these arguments."""

    def __init__(self):
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(10, 4, mode="sum")

    def forward(self, tokens, offsets):
        return self.bag(tokens, offsets).tanh() * 2.0


BAG_INPUTS = (torch.randint(0, 10, (400,), generator=torch.Generator().manual_seed(0)), torch.arange(0, 400, 2))


def test_a_node_whose_lowering_refuses_its_arguments_runs_on_the_cpu():
    model = ManyBags()
    compiled = torch.compile(model, backend="neuron-mlir")
    with pytest.warns(UserWarning, match=r"_embedding_bag.default cannot be lowered here \(.*200 bags"):
        out = compiled(*BAG_INPUTS)
    assert_close_to_torch(out, model(*BAG_INPUTS))
    stats = neuron_mlir.stats()
    assert stats["fallback_ops"] == {"aten._embedding_bag.default": 1}
    assert stats["graphs_compiled"] >= 1  # the tanh and the scaling after it still run on the core


def test_strict_mode_names_the_node_its_line_the_rule_and_a_command_that_shows_it():
    compiled = torch.compile(ManyBags(), backend="neuron-mlir", options={"strict": True})
    with pytest.raises(
        Exception, match=r"(?s)strict.*_embedding_bag.*test_backend.py:\d+ \(model\.bag\).*200 bags of 400 tokens"
    ) as info:
        compiled(*BAG_INPUTS)
    command = shlex.split(str(info.value).split("reproduce with:\n")[1].split("\n")[0])
    assert command[1:3] == ["-m", "neuron_mlir.tools.neuron_opt"], "runs from any shell: no PATH needed"
    run = subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 1
    assert "at most 128 bags" in run.stderr


def test_legality_is_decided_once_and_each_region_compiles_once(monkeypatch):
    """The node the lowering cannot take is found before compiling: no compile fails and starts over."""
    from neuron_mlir.frontend import compile_graph as module

    lowered: list[str] = []
    original = module._lower

    def counting(ir_module, name, *args, **kwargs):
        lowered.append(name)
        return original(ir_module, name, *args, **kwargs)

    monkeypatch.setattr(module, "_lower", counting)
    model = ManyBags()
    compiled = torch.compile(model, backend="neuron-mlir", options={"cache": False})
    with pytest.warns(UserWarning, match="cannot be lowered here"):
        assert_close_to_torch(compiled(*BAG_INPUTS), model(*BAG_INPUTS))
    assert len(lowered) == len(set(lowered)) == neuron_mlir.stats()["graphs_compiled"] >= 1


@pytest.mark.parametrize("strict", [False, True])
def test_a_lowering_that_raises_on_a_legal_op_is_an_internal_error_not_a_fallback(monkeypatch, strict):
    from neuron_mlir.lowering.convert_torch_to_tile import LOWERINGS

    def broken(em, op, args):
        raise ValueError("a bug in this lowering")

    monkeypatch.setitem(LOWERINGS, "torch.aten.tanh", broken)
    compiled = torch.compile(WithCumsum(), backend="neuron-mlir", options={"strict": strict, "cache": False})
    pattern = (
        r"(?s)torch\.aten\.tanh: internal compiler error.*ValueError: a bug in this lowering"
        r".*test_backend\.py:\d+.*please report it.*cpu_ops.*aten\.tanh"
    )
    with pytest.raises(Exception, match=pattern):
        compiled(torch.randn(4, 5))
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_time_per_pass_is_reported_by_a_flag(capsys):
    _mlp_run({"time_passes": True, "cache": False})  # a cache hit would lower nothing
    printed = capsys.readouterr().err
    for pass_name in (
        "convert-torch-to-tile",
        "convert-tile-to-neuron",
        "neuron-allocate-memory",
        "neuron-insert-sync",
    ):
        assert pass_name in printed
    assert set(neuron_mlir.stats()["pass_seconds"]) >= {"convert-torch-to-tile", "neuron-insert-sync"}


def test_verification_after_each_stage_is_on_where_asked_for(monkeypatch, tmp_path):
    monkeypatch.delenv("NEURON_MLIR_VERIFY", raising=False)
    monkeypatch.delenv("NEURON_MLIR_STRICT", raising=False)
    monkeypatch.delenv("NEURON_MLIR_DEBUG_DIR", raising=False)
    assert not CompileOptions.from_user({}).verify
    assert CompileOptions.from_user({"strict": True}).verify
    assert CompileOptions.from_user({"debug_dir": str(tmp_path)}).verify
    assert not CompileOptions.from_user({"strict": True, "verify": False}).verify
    monkeypatch.setenv("NEURON_MLIR_VERIFY", "1")
    assert CompileOptions.from_user({}).verify


@pytest.mark.parametrize("verify", [False, True])
def test_the_verify_option_decides_whether_each_stage_is_verified(monkeypatch, verify):
    from neuron_mlir.lowering import pipelines

    verified: list[Any] = []
    monkeypatch.setattr(pipelines, "verify_module", verified.append)
    model, x, out = _mlp_run({"verify": verify, "cache": False})  # a cache hit would lower nothing
    assert_close_to_torch(out, model(x))
    stages = len(pipelines.DEFAULT_PIPELINE)
    assert len(verified) == (2 * stages if verify else 0)  # the forward and the backward graph


def test_debug_dir_of_a_failing_compile_reproduces_it_with_the_printed_command(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_DEBUG_DIR", str(tmp_path))
    compiled = torch.compile(ManyBags(), backend="neuron-mlir", options={"strict": True})
    with pytest.raises(Exception, match="reproduce with") as info:
        compiled(*BAG_INPUTS)
    command = shlex.split(str(info.value).split("reproduce with:\n")[1].split("\n")[0])
    assert command[3].startswith(str(tmp_path)), "the command runs on the files of the debug directory"
    run = subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 1
    assert "at most 128 bags" in run.stderr


def test_a_new_batch_size_traces_a_symbolic_graph_that_one_program_runs_and_keeps_matching():
    torch.manual_seed(0)
    model = MLP((30, 40, 5))
    compiled = torch.compile(model, backend="neuron-mlir", options={"strict": True})
    for batch in (3, 5, 7, 5):
        x = torch.randn(batch, 30)
        assert_close_to_torch(compiled(x), model(x), f"batch {batch}")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0
    # Dynamo retraces symbolically after the second size: batches 5 and 7 share that graph's bucket of 8 rows
    assert stats["graphs_compiled"] == 2
    assert stats["recompilations"] == 0


def _narrow_by_tensor(x, start):
    return torch.narrow(x, 0, start, 2) * 2.0  # the start is read from a tensor (an .item() in the trace)


def test_a_size_read_from_a_tensor_is_read_on_the_host():
    x = torch.randn(5, 3)
    compiled = torch.compile(_narrow_by_tensor, backend="neuron-mlir", options={"strict": True})
    for start in (1, 3):
        assert_close_to_torch(compiled(x, torch.tensor(start)), _narrow_by_tensor(x, torch.tensor(start)))
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def _relu_twice(x):
    return torch.relu(x) * 2.0


@pytest.fixture
def _relu_branching_on_a_value(monkeypatch):
    """A decomposition that branches on a tensor's value: no static graph can follow both ways."""
    from neuron_mlir.frontend import backend

    table = backend.decompositions()

    def branching_relu(x):
        return x.clamp(min=0) if x.sum().item() > 0 else torch.maximum(x, torch.zeros_like(x))

    monkeypatch.setattr(
        backend, "decompositions", lambda cpu_ops=(): {**table, torch.ops.aten.relu.default: branching_relu}
    )


@pytest.mark.usefixtures("_relu_branching_on_a_value")
def test_a_graph_whose_shapes_depend_on_values_runs_eagerly_with_a_warning():
    x = torch.randn(5, 3)
    compiled = torch.compile(_relu_twice, backend="neuron-mlir")
    with pytest.warns(UserWarning, match="depends on tensor values for its shapes"):
        out = compiled(x)
    assert_close_to_torch(out, _relu_twice(x))
    assert neuron_mlir.stats()["nodes_fallen_back"] >= 1


@pytest.mark.usefixtures("_relu_branching_on_a_value")
def test_strict_mode_refuses_a_graph_whose_shapes_depend_on_values():
    compiled = torch.compile(_relu_twice, backend="neuron-mlir", options={"strict": True})
    with pytest.raises(Exception, match=r"(?s)strict.*cannot be traced to static shapes.*test_backend.py"):
        compiled(torch.randn(5, 3))


def _prefixed_mask(x):
    return torch.cat([torch.ones(12, dtype=torch.bool)[:1], x > 0]).float()  # a slice of a constant: folded


def test_constants_fold_with_real_tensors_inside_the_tracer():
    # the compiler runs inside AOTAutograd's fake-tensor mode; folding reads the values of real constants
    x = torch.randn(5)
    compiled = torch.compile(_prefixed_mask, backend="neuron-mlir", options={"strict": True})
    assert_close_to_torch(compiled(x), _prefixed_mask(x))


def test_parameters_updated_in_place_or_replaced_are_seen_by_the_next_call():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    compiled = torch.compile(model, backend="neuron-mlir")
    x = torch.randn(2, 8)
    with torch.no_grad():
        compiled(x)
        model.weight.mul_(2.0)  # in place: the memory the kept view shows
        assert_close_to_torch(compiled(x), model(x))
        model.weight.data = torch.randn(4, 8)  # replaced: other memory
        assert_close_to_torch(compiled(x), model(x))
        model.bias.data = torch.randn(8)[::2]  # replaced by a strided tensor (converted, never kept)
        assert_close_to_torch(compiled(x), model(x))
        model.bias.add_(1.0)
        assert_close_to_torch(compiled(x), model(x))


def test_a_compile_leaves_the_older_heap_frozen() -> None:
    # In a fresh process: freezing is for the whole process (runtime/heap.py).
    script = """
import gc
import torch

before = object()
compiled = torch.compile(lambda x: x * 2 + 1, backend="neuron-mlir")
assert torch.equal(compiled(torch.ones(4)), torch.full((4,), 3.0))
assert gc.get_freeze_count() > 0
assert not any(found is before for found in gc.get_objects())  # out of the collector's reach
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr


def _partitioned_graphs(module: torch.nn.Module, *inputs: torch.Tensor) -> list[torch.fx.GraphModule]:
    """The forward and backward graphs of one training step, as the backend's partition splits them."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    from neuron_mlir.frontend.backend import decompositions, partition_without_aliases

    graphs: list[torch.fx.GraphModule] = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm)

    def backend(gm, example_inputs):
        return aot_module_simplified(
            gm,
            example_inputs,
            fw_compiler=keep,
            bw_compiler=keep,
            partition_fn=partition_without_aliases,
            decompositions=decompositions(),
        )

    torch._dynamo.reset()
    torch.compile(module, backend=backend)(*inputs).sum().backward()
    torch._dynamo.reset()
    return graphs


def test_the_backward_reads_a_linear_weight_itself_not_a_saved_copy_of_its_transpose():
    """dX = dY W: the forward's `permute(weight)` is replayed in the backward, which receives the weight (a
    parameter, no copy) and so can read it row-major instead of a contiguous W^T."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 96)
    forward, backward = _partitioned_graphs(layer, torch.randn(2, 5, 64, requires_grad=True))
    outputs = forward.graph.output_node().args[0]
    assert isinstance(outputs, tuple | list)
    saved = [node for node in outputs[1:] if isinstance(node, torch.fx.Node)]
    assert all(node.target is not torch.ops.aten.permute.default for node in saved), saved
    inputs = [tuple(node.meta["val"].shape) for node in backward.graph.nodes if node.op == "placeholder"]
    assert (96, 64) in inputs, inputs
    assert (64, 96) not in inputs, inputs
    permutes = [node for node in backward.graph.nodes if node.target is torch.ops.aten.permute.default]
    weight = next(n for n in backward.graph.nodes if n.op == "placeholder" and n.meta["val"].shape == (96, 64))
    assert any(node.args[0] is weight for node in permutes), "the backward transposes the weight it receives"


def test_the_replayed_view_joins_the_backward_and_the_forward_keeps_its_own():
    """The copy of a view chain goes before its first backward reader: the forward graph is unchanged (one
    transpose of the weight, for its own product) and saves no view of an input."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 96)
    forward, backward = _partitioned_graphs(layer, torch.randn(5, 64, requires_grad=True))
    forward_permutes = [node for node in forward.graph.nodes if node.target is torch.ops.aten.permute.default]
    assert len(forward_permutes) == 1
    assert not any(user.op == "output" for user in forward_permutes[0].users)
    assert len(backward.graph.find_nodes(op="call_function", target=torch.ops.aten.permute.default)) >= 1


def test_a_linear_step_with_the_weight_read_in_the_backward_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(40, 300), torch.nn.GELU(), torch.nn.Linear(300, 24))
    reference = copy.deepcopy(model)
    x = torch.randn(3, 130, 40)
    compiled = torch.compile(model, backend="neuron-mlir")
    compiled(x.clone().requires_grad_()).square().sum().backward()
    reference(x.clone().requires_grad_()).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert_close_to_torch(p.grad, q.grad, f"grad of {name}")


def test_constants_fold_under_aot_autograds_fake_mode():
    # torch-fold-constants evaluates exp(full) with ATen: inside the backend's fake mode that once raised a
    # data-dependent error and sent the whole graph to the CPU
    torch._dynamo.reset()
    neuron_mlir.reset()
    x = torch.randn(4)
    out = torch.compile(lambda v: v + torch.full((4,), 2.0).exp(), backend="neuron-mlir")(x)
    assert_close_to_torch(out, x + torch.full((4,), 2.0).exp())
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
