"""neuron-fuse-instructions' cost in a block's length (the merges themselves: test/lit/lowering).

A merge asks for the closest earlier writer of a buffer and whether anything between two instructions touches
one. Walking the block backwards for each made the pass quadratic in a block's instructions: a block of n
row computations, each copied into its window of one tile after all n were computed (as an unrolled pooling or
a panel of rows is), looked at about n * n / 2 instructions. The pass now asks the buffers' own users.
"""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import neuron
from neuron_mlir.lowering import neuron_fuse_instructions
from neuron_mlir.lowering.neuron_fuse_instructions import NeuronFuseInstructionsPass

_SBUF = "#mem<sbuf>"


def _rows_then_copies(rows: int) -> str:
    """A tile scaled into `rows` fp32 tiles, then each copied into its window of one bf16 panel."""
    panel = f"memref<128x{64 * rows}xbf16, {_SBUF}>"
    lines = [
        "builtin.module attributes {neuron.target = #neuron.target<trn2>} {",
        f"  func.func @rows(%x: memref<128x64xbf16, #mem<hbm>>) -> memref<128x{64 * rows}xbf16, #mem<hbm>> {{",
        f"    %out = neuron.alloc : memref<128x{64 * rows}xbf16, #mem<hbm>>",
        f"    %t = neuron.alloc : memref<128x64xbf16, {_SBUF}>",
        "    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64}"
        f" : memref<128x64xbf16, {_SBUF}>, memref<128x64xbf16, #mem<hbm>>",
    ]
    for row in range(rows):
        lines += [
            f"    %s{row} = neuron.alloc : memref<128x64xf32, {_SBUF}>",
            f"    neuron.tensor_scalar vector dst %s{row}[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]]"
            f' {{op0 = "multiply", scalar0 = {row + 1}.0 : f64}}'
            f" : memref<128x64xf32, {_SBUF}>, memref<128x64xbf16, {_SBUF}>",
        ]
    lines.append(f"    %panel = neuron.alloc : {panel}")
    for row in range(rows):
        lines.append(
            f"    neuron.tensor_copy vector dst %panel[0:128, {64 * row}, [[1, 64]]], src %s{row}[0:128, 0, [[1, 64]]]"
            f" : {panel}, memref<128x64xf32, {_SBUF}>"
        )
    lines += [
        f"    neuron.dma_copy dma dst %out[0, [[{64 * rows}, 128], [1, {64 * rows}]]],"
        f" src %panel[0:128, 0, [[1, {64 * rows}]]] {{queue = 1 : i64}}"
        f" : memref<128x{64 * rows}xbf16, #mem<hbm>>, {panel}",
        f"    func.return %out : memref<128x{64 * rows}xbf16, #mem<hbm>>",
        "  }",
        "}",
    ]
    return "\n".join(lines)


def _merged(rows: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[neuron.InstructionOp], int]:
    """The instructions after the pass, and how many times it asked whether an op writes a buffer."""
    asked = 0
    writes = neuron_fuse_instructions._writes

    def counted(op: Operation, buffer: SSAValue) -> bool:
        nonlocal asked
        asked += 1
        return writes(op, buffer)

    monkeypatch.setattr(neuron_fuse_instructions, "_writes", counted)
    module = Parser(make_context(), _rows_then_copies(rows)).parse_module()
    NeuronFuseInstructionsPass().apply(Context(), module)
    return [op for op in module.walk() if isinstance(op, neuron.InstructionOp)], asked


def test_rows_computed_apart_from_their_copies_write_their_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    instructions, _ = _merged(4, monkeypatch)
    assert not any(isinstance(op, neuron.TensorCopyOp) for op in instructions)
    scaled = [op for op in instructions if isinstance(op, neuron.TensorScalarOp)]
    assert [op.access("dst")[1].offset.data for op in scaled] == [0, 64, 128, 192]  # type: ignore[index]
    assert {str(op.dst.type) for op in scaled} == {str(scaled[0].dst.type)}  # the panel's, bf16
    assert "bf16" in str(scaled[0].dst.type)


def test_work_grows_linearly_with_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    _, small = _merged(60, monkeypatch)
    _, large = _merged(240, monkeypatch)
    # each merge looks at the few users of its buffers: four times the block, about four times the questions
    # (a backwards walk asked sixteen times as many)
    assert large <= 5 * small
