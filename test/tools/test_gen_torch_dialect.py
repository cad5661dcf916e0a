"""The generated torch dialect is fresh, complete, and its extra (non-core) overloads are the ones graphs use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from neuron_mlir.ir.dialects import torch_ops
from neuron_mlir.ir.dialects.torch import all_op_classes, op_class_for
from neuron_mlir.tools import gen_torch_dialect

FRESH_PROCESS_CORE = """
import torch
for name in dir(torch.ops.aten):
    packet = getattr(torch.ops.aten, name)
    if isinstance(packet, torch._ops.OpOverloadPacket):
        for overload in packet.overloads():
            if torch.Tag.core in getattr(packet, overload).tags:
                print(getattr(packet, overload))
"""


def test_checked_in_module_is_fresh() -> None:
    checked_in = gen_torch_dialect.generated_path().read_text()
    assert checked_in == gen_torch_dialect.render(), (
        "ir/dialects/torch_ops.py is stale: run `python -m neuron_mlir.tools.gen_torch_dialect`"
    )


def test_check_mode_reports_staleness(tmp_path) -> None:
    stale = tmp_path / "torch_ops.py"
    stale.write_text("# stale\n")
    assert gen_torch_dialect.main(["--check", "--output", str(stale)]) == 1
    assert gen_torch_dialect.main(["--output", str(stale)]) == 0
    assert gen_torch_dialect.main(["--check", "--output", str(stale)]) == 0


def test_every_core_overload_has_a_class() -> None:
    core = gen_torch_dialect.core_overloads()
    assert len(core) == 193  # torch 2.13, all registered ATen ops
    for op in core:
        cls = op_class_for(str(op))
        assert cls is not None, op
        assert cls.SCHEMA.signature == str(op._schema)
    # Iterating dir(torch.ops.aten) in a fresh process sees 189 of them (packets load lazily): all there too. The
    # process is torch alone: the `neuron` device's autoload would touch one more packet as it registers.
    environment = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    listed = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS_CORE], capture_output=True, text=True, check=True, env=environment
    )
    fresh = listed.stdout.split()
    assert len(fresh) == 189
    assert set(fresh) <= {str(op) for op in core}


def test_extras_are_non_core_and_present() -> None:
    for name in gen_torch_dialect.EXTRA_OVERLOADS:
        cls = op_class_for(name)
        assert cls is not None, name
        packet, _, overload = name.removeprefix("aten::").partition(".")
        assert torch.Tag.core not in getattr(getattr(torch.ops.aten, packet), overload or "default").tags
    collectives = gen_torch_dialect.COLLECTIVE_OVERLOADS
    assert all(op_class_for(name) is not None for name in collectives)
    assert (
        len(all_op_classes())
        == len(torch_ops.ALL_OPS)
        == 193 + len(gen_torch_dialect.EXTRA_OVERLOADS) + len(collectives)
    )


def test_generated_module_is_lint_clean(tmp_path) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    result = subprocess.run(
        [ruff, "check", "--stdin-filename", "ir/dialects/torch_ops.py", "-"],
        input=gen_torch_dialect.render(),
        capture_output=True,
        text=True,
        cwd=gen_torch_dialect.generated_path().parents[2],
    )
    assert result.returncode == 0, result.stdout


def test_discovered_non_core_overloads_are_all_offered() -> None:
    from neuron_mlir.tools import discover_aten_ops

    seen = discover_aten_ops.discover()
    aten = [name for name in seen if name.startswith("aten.")]
    assert "aten._native_batch_norm_legit_functional.default" in aten
    missing = [name for name in aten if op_class_for(name) is None]
    assert not missing, f"add to EXTRA_OVERLOADS: {missing}"
