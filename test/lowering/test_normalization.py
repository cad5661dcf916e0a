"""Normalization backwards as convert-torch-to-tile lowers them (lowering/convert_torch_to_tile/normalization.py).

Each batch norm case runs the converted tile IR against ATen's own kernel (the torch level's semantics) on the same
inputs: with saved statistics that are not the batch's (train: the lowering centres on the batch mean only where
the saved one is its rounding) and with the running ones (eval), with and without a weight, every gradient asked
for. The layer norm
backward's one-wavefront form (rows of three row groups and more) is checked the same way, with and without a
weight and for each set of gradients the output mask asks for.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.ir import Operation
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.semantics import check_semantics, random_inputs
from neuron_mlir.lowering.convert_torch_to_tile import ConvertTorchToTilePass

X = "tensor<3x5x4x6xf32>"
C = "tensor<5xf32>"


def _module(train: bool, weight: bool) -> str:
    names = ["%g", "%x", *(["%w"] if weight else []), "%rm", "%rv", *(["%sm", "%si"] if train else [])]
    arguments = ", ".join(f"{name}: {X if name in ('%g', '%x') else C}" for name in names)
    operands = ["%g", "%x", "%w" if weight else "none", "%rm", "%rv", "%sm" if train else "none"]
    operands.append("%si" if train else "none")
    types = ", ".join(X if name in ("%g", "%x") else C for name in names)
    return f"""
func.func @main({arguments}) -> ({X}, {C}, {C}) {{
  %r:3 = torch.aten.native_batch_norm_backward {", ".join(operands)} {{train = {str(train).lower()}, eps = 1.0e-05 : f64, output_mask = array<i1: true, true, true>}} : ({types}) -> ({X}, {C}, {C})
  func.return %r#0, %r#1, %r#2 : {X}, {C}, {C}
}}
"""


@pytest.mark.parametrize("weight", [True, False], ids=["weight", "no_weight"])
@pytest.mark.parametrize("train", [True, False], ids=["batch_statistics", "running_statistics"])
def test_batch_norm_backward_matches_aten(train, weight):
    text = _module(train, weight)
    before = Parser(make_context(), text).parse_module()
    after = Parser(make_context(), text).parse_module()
    ConvertTorchToTilePass().apply(Context(), after)
    inputs = random_inputs(before)
    running_var = 3 if weight else 2
    inputs[running_var] = np.abs(inputs[running_var]) + 0.5  # a variance: 1 / sqrt(var + eps) must be finite
    assert check_semantics(before, after, inputs) == []


def _layer_norm_module(weight: bool, mask: tuple[bool, bool, bool]) -> str:
    rows, width = 768, 768  # three groups of two rows per partition: one wavefront (`rows.pipelined_row_groups`)
    x, stats, vector = f"tensor<{rows}x{width}xf32>", f"tensor<{rows}x1xf32>", f"tensor<{width}xf32>"
    names = ["%g", "%x", "%mean", "%rstd", *(["%w", "%b"] if weight else [])]
    types = [x, x, stats, stats, *([vector, vector] if weight else [])]
    arguments = ", ".join(f"{name}: {type_}" for name, type_ in zip(names, types, strict=True))
    operands = ", ".join(["%g", "%x", "%mean", "%rstd", *(["%w", "%b"] if weight else ["none", "none"])])
    flags = ", ".join(str(flag).lower() for flag in mask)
    wanted = [type_ for type_, flag in zip((x, vector, vector), mask, strict=True) if flag]
    results = ", ".join(type_ if flag else "none" for type_, flag in zip((x, vector, vector), mask, strict=True))
    returned = ", ".join(f"%r#{index}" for index, flag in enumerate(mask) if flag)
    return f"""
func.func @main({arguments}) -> ({", ".join(wanted)}) {{
  %r:3 = torch.aten.native_layer_norm_backward {operands} {{normalized_shape = array<i64: {width}>, output_mask = array<i1: {flags}>}} : ({", ".join(types)}) -> ({results})
  func.return {returned} : {", ".join(wanted)}
}}
"""


@pytest.mark.parametrize(
    ("weight", "mask"),
    [(True, (True, True, True)), (True, (False, True, True)), (False, (True, False, False))],
    ids=["all", "parameters_only", "no_weight"],
)
def test_layer_norm_backward_in_one_wavefront_matches_aten(weight, mask):
    text = _layer_norm_module(weight, mask)
    before = Parser(make_context(), text).parse_module()
    after = Parser(make_context(), text).parse_module()
    ConvertTorchToTilePass().apply(Context(), after)
    inputs = random_inputs(before)
    inputs[3] = np.abs(inputs[3]) + 0.5  # rstd
    assert check_semantics(before, after, inputs) == []


def _layer_norm_forward_module(rows: int, width: int) -> str:
    x, vector = f"tensor<{rows}x{width}xf32>", f"tensor<{width}xf32>"
    stats = f"tensor<{rows}x1xf32>"
    return f"""
func.func @main(%x: {x}, %w: {vector}, %b: {vector}) -> {x} {{
  %r:3 = torch.aten.native_layer_norm %x, %w, %b {{normalized_shape = array<i64: {width}>, eps = 1.0e-05 : f64}} : ({x}, {vector}, {vector}) -> ({x}, {stats}, {stats})
  func.return %r#0 : {x}
}}
"""


def _square_shifts(module) -> list[str]:
    """Where each layer norm square's bias column comes from: an extract of x's rows (the shifted form) or the op
    that `tile.binary_scalar` negates into -mean."""
    shifts = []
    for op in module.walk():
        if isinstance(op, tile.UnaryOp) and op.fn.data == "square" and op.bias is not None:
            source = op.bias.owner
            if isinstance(source, tile.BinaryScalarOp):
                source = source.input.owner
            assert isinstance(source, Operation)
            shifts.append(source.name)
    return shifts


@pytest.mark.parametrize(("rows", "shift"), [(256, "tile.extract"), (1024, "tile.reduce")], ids=["few", "many"])
def test_layer_norm_forward_statistics_shift(rows, shift):
    """Up to four row tiles square about each row's first element (the shifted-data variance), so the squares do
    not wait for the sum; more row tiles square about the mean. Rows far from zero against their spread check that
    the shifted form keeps its precision: E[x^2] - mean^2 in fp32 would not pass here."""
    text = _layer_norm_forward_module(rows, 200)
    before = Parser(make_context(), text).parse_module()
    after = Parser(make_context(), text).parse_module()
    ConvertTorchToTilePass().apply(Context(), after)
    assert set(_square_shifts(after)) == {shift}
    inputs = random_inputs(before)
    inputs[0] = (1000.0 + inputs[0]).astype(np.float32)
    assert check_semantics(before, after, inputs) == []
