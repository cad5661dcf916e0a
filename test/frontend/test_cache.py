"""The compile cache: memory and disk, validated on the way back, keyed by everything that shapes the code."""

import numpy as np

from neuron_mlir.frontend.cache import CompileCache, cache_key
from neuron_mlir.runtime.hardware import Engine, Memory
from neuron_mlir.runtime.program import Access, BufferDecl, Instruction, Program, TensorBinding
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
    body = [
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
