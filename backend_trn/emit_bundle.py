"""Emit a bundle: a fully allocated, synchronised neuron-level module becomes the file the runtime runs.

Input contract: the output of the default pipeline (stage `synchronised`): only neuron instructions, buffers
with addresses, index arithmetic and loops. The program is the one `translate.py` builds, the same the neuron
level's reference semantics run, so the bundle runs exactly what `neuron-opt --check-semantics` checked; the
runtime's validator accepts it before it is written, so an invalid program is never shipped.
"""

from __future__ import annotations

from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from neuron_mlir.backend_trn.translate import build_program
from neuron_mlir.lowering.verify_stage_contract import check_stage_contract
from neuron_mlir.runtime import bundle
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.validate import ValidatedProgram


def program_from_module(module: ModuleOp, entry: str = "main") -> Program:
    """The program of a synchronised neuron-level module (contract checked first)."""
    from neuron_mlir import __version__

    check_stage_contract(module, "synchronised")
    return build_program(module, entry, require_allocated=True, compiler_version=__version__)


def write_bundle(program: Program | ValidatedProgram, path: str | Path) -> None:
    """Validate `program` (unless it was) and write it as a bundle file."""
    Path(path).write_bytes(bundle.encode_bundle(program))


def emit_bundle(module: ModuleOp, path: str | Path, entry: str = "main") -> Program:
    program = program_from_module(module, entry)
    write_bundle(program, path)
    return program
