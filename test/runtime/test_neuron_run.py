"""`neuron-run`: a bundle with given or random inputs, output statistics, the profile and the trace."""

from __future__ import annotations

import json

import numpy as np
import pytest

from neuron_mlir.runtime import bundle
from neuron_mlir.tools.neuron_run import main


@pytest.fixture
def bundle_path(rich_program, tmp_path):
    path = tmp_path / "model.neuronb"
    bundle.write_bundle(rich_program(), path)
    return path


def test_runs_with_given_inputs_and_writes_a_trace(bundle_path, tmp_path, capsys):
    x = np.full((256, 512), 0.5, np.float32)
    np.save(tmp_path / "x.npy", x)
    trace = tmp_path / "trace.json"
    saved = tmp_path / "out"
    code = main(
        [
            str(bundle_path),
            "--input",
            f"x={tmp_path / 'x.npy'}",
            "--trace",
            str(trace),
            "--save-outputs",
            str(saved),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "y: shape [256, 512] dtype f32 min" in out
    assert "z: shape [128, 512] dtype f32 min 0.5 max 0.5 mean 0.5" in out
    assert "total time" in out
    assert "MFU" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e["ph"] == "X" and e["name"] == "nc_matmul" for e in events)
    np.testing.assert_array_equal(np.load(saved / "z.npy"), x[128:])


def test_random_inputs(bundle_path, capsys):
    assert main([str(bundle_path), "--seed", "3"]) == 0
    assert "y: shape [256, 512]" in capsys.readouterr().out


def test_errors_are_reported_cleanly(bundle_path, tmp_path, capsys):
    broken = tmp_path / "broken.neuronb"
    broken.write_bytes(bundle_path.read_bytes()[:-1])
    assert main([str(broken)]) == 1
    assert "neuron-run: bundle is truncated" in capsys.readouterr().err
    np.save(tmp_path / "bad.npy", np.zeros((2, 2), np.float32))
    assert main([str(bundle_path), "--input", f"x={tmp_path / 'bad.npy'}"]) == 1
    assert "has shape [2, 2], the program expects [256, 512]" in capsys.readouterr().err
    assert main([str(bundle_path), "--input", "w=whatever.npy"]) == 1
    assert "unknown input 'w' (inputs: x)" in capsys.readouterr().err


def test_mlir_above_the_neuron_level_is_refused_with_the_command_that_lowers_it(tmp_path, capsys):
    source = tmp_path / "model.mlir"
    source.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %y = torch.aten.relu %x : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  func.return %y : tensor<4xf32>\n}\n"
    )
    assert main([str(source)]) == 1
    assert "holds torch-level IR; lower it first: neuron-opt" in capsys.readouterr().err
