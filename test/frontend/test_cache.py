"""The compile cache: memory and disk, validated on the way back, keyed by everything that shapes the code."""

from typing import Any

import numpy as np
import pytest

from neuron_mlir.frontend.cache import CompileCache, cache_key
from neuron_mlir.runtime.hardware import Engine, Memory
from neuron_mlir.runtime.program import Access, BufferDecl, Instruction, Node, Program, TensorBinding
from neuron_mlir.runtime.simulator import run_program


def _program() -> Program:
    buffers = [
        BufferDecl("x", Memory.HBM, 0, (4, 8), "f32"),
        BufferDecl("y", Memory.HBM, 128, (4, 8), "f32"),
        BufferDecl("t", Memory.SBUF, 0, (4, 8), "f32"),
    ]
    rows = Access(0, ((8, 4), (1, 8)))
    out_rows = Access(1, ((8, 4), (1, 8)))
    tile = Access(2, ((1, 8),), partitions=4)
    body: list[Node] = [
        Instruction(0, "dma_copy", Engine.DMA, {"dst": tile, "src": rows}, queue=0),
        Instruction(1, "activation", Engine.SCALAR, {"dst": tile, "src": tile}, {"func": "exp"}, waits=(0,)),
        Instruction(2, "dma_copy", Engine.DMA, {"dst": out_rows, "src": tile}, queue=1, waits=(1,)),
    ]
    return Program(
        "trn2", buffers, [TensorBinding("x", 0, (4, 8), (8, 1))], [TensorBinding("y", 1, (4, 8), (8, 1))], body
    )


def test_keys_change_with_any_part():
    assert cache_key("ir", "trn2") == cache_key("ir", "trn2")
    assert cache_key("ir", "trn2") != cache_key("ir", "trn1")
    assert cache_key("ir", "a", "b") != cache_key("ir", "ab")


def test_disk_round_trip_runs_the_same(tmp_path):
    cache = CompileCache(tmp_path)
    program = _program()
    cache.put("k", program)
    fresh = CompileCache(tmp_path)  # a second process
    loaded = fresh.get("k")
    assert loaded is not None
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    (expected,), _ = run_program(program, [x])
    (actual,), _ = run_program(loaded, [x])
    np.testing.assert_array_equal(actual, expected)


def test_corrupt_entries_are_dropped_not_trusted(tmp_path):
    cache = CompileCache(tmp_path)
    cache.put("k", _program())
    path = tmp_path / "k.bundle"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert CompileCache(tmp_path).get("k") is None
    assert not path.exists()


def _rewritten_entry(path, edit) -> None:
    """Apply `edit` to the manifest of the bundle at `path` and write it back with a valid checksum: a file
    that is intact as a file but says something wrong (a stale or hand-made entry, not a torn write)."""
    from neuron_mlir.runtime import bundle

    manifest, data = bundle.unpack(path.read_bytes())
    edit(manifest)
    path.write_bytes(bundle.pack(manifest, data))


@pytest.mark.parametrize(
    ("edit", "diagnostic"),
    [
        (lambda m: m["body"][1]["operands"]["dst"].update(offset="0"), "instruction 1, operand 'dst': offset"),
        (lambda m: m["body"][1]["operands"]["src"]["pattern"].append([1]), "operand 'src': pattern[1]"),
        (lambda m: m["body"][2].update(engine="warp"), "instruction 2: unknown engine 'warp'"),
        (lambda m: m["body"][0].update(waits=[0.5]), "instruction 0: waits[0]: expected an integer"),
        (lambda m: m["memory_plan"][2].update(memory="l3"), "memory_plan[2].memory: unknown memory 'l3'"),
        (
            lambda m: m["body"][1]["attrs"].update(func="sparkle"),
            "attribute 'func': unknown activation function 'sparkle'",
        ),
        (lambda m: m["body"][1]["operands"]["dst"].update(partitions=200), "200 partitions"),
    ],
)
def test_a_well_formed_file_with_a_wrong_field_is_refused_with_a_diagnostic(tmp_path, caplog, edit, diagnostic):
    cache = CompileCache(tmp_path)
    cache.put("k", _program())
    path = tmp_path / "k.bundle"
    _rewritten_entry(path, edit)
    with caplog.at_level("WARNING", logger="neuron_mlir"):
        assert CompileCache(tmp_path).get("k") is None
    assert diagnostic in caplog.text
    assert not path.exists()  # dropped, so the next compile writes a good one


def test_a_bundle_read_back_equals_the_program_written(tmp_path):
    from neuron_mlir.runtime import bundle

    program = _program()
    CompileCache(tmp_path).put("k", program)
    loaded = CompileCache(tmp_path).get("k")
    assert loaded is not None
    assert bundle.programs_equal(loaded.program, program)


def test_memory_only_cache(tmp_path):
    cache = CompileCache(None)
    cache.put("k", _program())
    assert cache.get("k") is not None
    assert CompileCache(None).get("k") is None


def test_entries_are_validated_once_and_run_without_validating_again(tmp_path, monkeypatch):
    from neuron_mlir.runtime import simulator
    from neuron_mlir.runtime.validate import ValidatedProgram

    stored = CompileCache(tmp_path).put("k", _program())
    loaded = CompileCache(tmp_path).get("k")  # read back: validated while reading
    assert isinstance(stored, ValidatedProgram)
    assert isinstance(loaded, ValidatedProgram)

    def refuse(*args, **kwargs):
        raise AssertionError("validated again")

    monkeypatch.setattr(simulator, "validate_program", refuse)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    for _ in range(3):
        (out,), _ = run_program(loaded, [x])
        np.testing.assert_array_equal(out, np.exp(x))


def test_the_key_text_prints_bytes_literals_as_xdsl_does():
    import random
    from io import StringIO

    from xdsl.printer import Printer

    from neuron_mlir.frontend.compile_graph import _Printer

    data = bytes(range(256)) + bytes(random.Random(0).randrange(256) for _ in range(4096))
    expected, actual = StringIO(), StringIO()
    Printer(stream=expected).print_bytes_literal(data)
    _Printer(stream=actual).print_bytes_literal(data)
    assert actual.getvalue() == expected.getvalue()


# ---- keys from the FX graph ------------------------------------------------------------------------------


def _traced(function, *example_inputs):
    """The ATen graph of `function` with fake-tensor metadata (as AOTAutograd hands it to the backend)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(function, tracing_mode="fake", _allow_non_fake_inputs=True)(*example_inputs)


def _calls(graph_module):
    return [node for node in graph_module.graph.nodes if node.op == "call_function"]


def _key(graph_module):
    from neuron_mlir.frontend.fx_importer import graph_key_text

    return graph_key_text(graph_module)


def test_the_graph_key_is_the_same_for_the_same_graph_and_changes_with_what_shapes_the_ir():
    import torch

    def scaled(x, y):
        return torch.relu(x * 2.0 + y)

    x, y = torch.randn(4, 8), torch.randn(4, 8)
    key = _key(_traced(scaled, x, y))
    assert key is not None
    assert _key(_traced(scaled, x, y)) == key  # a second trace, as in a second process
    assert _key(_traced(scaled, torch.randn(4, 9), torch.randn(4, 9))) != key  # shapes
    assert _key(_traced(scaled, x.half(), y.half())) != key  # dtypes
    assert _key(_traced(lambda x, y: torch.relu(x * 3.0 + y), x, y)) != key  # a scalar argument
    assert _key(_traced(lambda x, y: torch.relu(x * 2 + y), x, y)) != key  # an int where a float was
    assert _key(_traced(lambda x, y: torch.sigmoid(x * 2.0 + y), x, y)) != key  # an op


def test_the_graph_key_holds_source_lines_and_constant_values():
    import torch

    x = torch.randn(4, 8)
    graph = _traced(lambda x: x + 1.0, x)
    _calls(graph)[0].meta["stack_trace"] = '  File "model.py", line 3, in forward\n'
    key = _key(graph)
    _calls(graph)[0].meta["stack_trace"] = '  File "model.py", line 4, in forward\n'
    assert _key(graph) != key  # profiles name the line: another line is another program

    table = torch.arange(8.0)
    with_constant = _traced(lambda x: x + table, x)
    key = _key(with_constant)
    (constant,) = with_constant.graph.find_nodes(op="get_attr")
    getattr(with_constant, constant.target).fill_(1.0)  # all equal now: a literal in the IR
    assert _key(with_constant) != key


def test_a_graph_the_key_cannot_spell_has_none():
    import torch

    graph = _traced(lambda x: x + 1.0, torch.randn(2))
    node = _calls(graph)[0]
    node.args = (*node.args[:1], object())
    assert _key(graph) is None


def test_signatures_round_trip_through_json_and_malformed_ones_are_refused():
    import pytest
    import torch

    from neuron_mlir.frontend.fx_importer import GraphSignature, import_fx_graph

    table = torch.arange(8.0)
    graph = _traced(lambda x: (x + table, None, x.shape[0]), torch.randn(4, 8))
    _, signature = import_fx_graph(graph)
    text = signature.to_json()
    assert text is not None
    restored = GraphSignature.from_json(text, graph)
    for name in ("num_inputs", "inputs", "constant_names", "outputs", "output_values", "output_names", "guards"):
        assert getattr(restored, name) == getattr(signature, name), name
    assert restored.output_spec == signature.output_spec
    assert len(restored.constants) == 1
    assert torch.equal(restored.constants[0], signature.constants[0])
    for broken in ("", "[]", text.replace('"inputs": [0]', '"inputs": ["0"]'), text.replace("num_inputs", "n")):
        with pytest.raises(ValueError, match="not a graph signature"):
            GraphSignature.from_json(broken, graph)


def test_a_warm_hit_neither_imports_the_graph_nor_checks_for_unsupported_ops(tmp_path, monkeypatch):
    import torch

    import neuron_mlir
    from neuron_mlir.frontend import compile_graph
    from neuron_mlir.frontend.cache import clear_memory

    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path))
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    x = torch.randn(2, 8)
    torch._dynamo.reset()
    neuron_mlir.reset()
    expected = torch.compile(model, backend="neuron-mlir")(x)
    assert neuron_mlir.stats()["cache_misses"] == 1  # the forward graph (the backward compiles when run)
    assert len(list(tmp_path.glob("*.meta"))) == 1

    def refuse(*args, **kwargs):
        raise AssertionError("a hit should not need this")

    monkeypatch.setattr(compile_graph, "import_fx_graph", refuse)
    monkeypatch.setattr(compile_graph, "unsupported_nodes", refuse)
    torch._dynamo.reset()
    neuron_mlir.reset()
    clear_memory()  # as in a new process: only the disk remains
    actual = torch.compile(model, backend="neuron-mlir")(x)
    assert neuron_mlir.stats()["cache_hits"] == 1
    assert torch.equal(actual, expected)
    torch._dynamo.reset()
    neuron_mlir.reset()


def test_an_entry_with_a_corrupt_signature_is_dropped_and_compiled_again(tmp_path, monkeypatch):
    import torch

    import neuron_mlir
    from neuron_mlir.frontend.cache import clear_memory

    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path))
    model = torch.nn.Linear(8, 4)
    x = torch.randn(2, 8)
    torch._dynamo.reset()
    neuron_mlir.reset()
    with torch.no_grad():
        expected = torch.compile(model, backend="neuron-mlir")(x)
        for path in tmp_path.glob("*.meta"):
            path.write_text('{"num_inputs": "many"}')
        torch._dynamo.reset()
        neuron_mlir.reset()
        clear_memory()
        actual = torch.compile(model, backend="neuron-mlir")(x)
    assert neuron_mlir.stats()["cache_misses"] == 1
    assert neuron_mlir.stats()["cache_hits"] == 0
    assert torch.equal(actual, expected)
    torch._dynamo.reset()
    neuron_mlir.reset()


def test_cpu_ops_are_honoured_even_when_the_whole_graph_is_cached(tmp_path, monkeypatch):
    import warnings

    import torch

    import neuron_mlir
    from neuron_mlir.frontend.cache import clear_memory

    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path))
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    x = torch.randn(2, 8)
    torch._dynamo.reset()
    neuron_mlir.reset()
    with torch.no_grad():
        torch.compile(model, backend="neuron-mlir")(x)
        torch._dynamo.reset()
        neuron_mlir.reset()
        clear_memory()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            options: dict[str, Any] = {"cpu_ops": ["aten.relu"]}  # a list, where torch's annotation has scalars
            torch.compile(model, backend="neuron-mlir", options=options)(x)
    assert neuron_mlir.stats()["fallback_ops"] == {"aten.relu.default": 1}
    torch._dynamo.reset()
    neuron_mlir.reset()


def test_the_compiler_fingerprint_is_remembered_until_a_source_file_changes(tmp_path, monkeypatch):
    from neuron_mlir.frontend import cache

    package = tmp_path / "src" / "package"
    package.mkdir(parents=True)
    source = package / "module.py"
    source.write_text("x = 1\n")
    monkeypatch.setattr(cache, "_compiler_roots", lambda: [package])
    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_FINGERPRINT", None)
    first = cache.compiler_fingerprint()
    (memo,) = (tmp_path / "cache").glob("fingerprint-*")
    assert memo.read_text() == first

    monkeypatch.setattr(cache, "_FINGERPRINT", None)  # a new process reads the memo, not the sources
    memo.write_text("f" * 64)
    assert cache.compiler_fingerprint() == "f" * 64

    monkeypatch.setattr(cache, "_FINGERPRINT", None)
    source.write_text("x = 22\n")  # an edit: another size (and modification time)
    edited = cache.compiler_fingerprint()
    assert edited not in (first, "f" * 64)

    monkeypatch.setattr(cache, "_FINGERPRINT", None)
    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", "off")  # no directory, no memo: the digest of the sources
    assert cache.compiler_fingerprint() == edited


def test_the_fingerprint_lists_each_source_once_when_packages_nest(tmp_path, monkeypatch):
    """An installed layout holds the subpackages inside the top package: both roots reach them, once each."""
    from neuron_mlir.frontend import cache

    top = tmp_path / "neuron_mlir"
    sub = top / "runtime"
    (sub / "__pycache__").mkdir(parents=True)
    (top / "__init__.py").write_text("")
    (sub / "__init__.py").write_text("")
    (sub / "bundle.py").write_text("x = 1\n")
    (sub / "__pycache__" / "stale.py").write_text("")  # not a source
    monkeypatch.setattr(cache, "_compiler_roots", lambda: [top, sub])
    names = [name for _, name in cache._source_files()]
    assert names == ["neuron_mlir/__init__.py", "neuron_mlir/runtime/__init__.py", "neuron_mlir/runtime/bundle.py"]

    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_FINGERPRINT", None)
    first = cache.compiler_fingerprint()
    monkeypatch.setattr(cache, "_FINGERPRINT", None)
    (sub / "bundle.py").write_text("x = 22\n")  # an edit in the nested package changes the compiler
    assert cache.compiler_fingerprint() != first
