"""convert-torch-to-tile as a function of its input alone: conversions in one process do not see each other.

The lowerings of a function share a `ConversionContext` made for that function (deferred prologues, absorbed
activations, index constants), so a module converts to the same IR whatever was converted before it, in whatever
order, and also after a conversion that failed half-way with deferred producers pending.
"""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.context import Context
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException

from neuron_mlir.ir.context import make_context
from neuron_mlir.lowering.convert_torch_to_tile import ConvertTorchToTilePass

# A layer norm deferred into its matmul's prologue, a Linear -> GELU -> Linear chain, and a matmul whose result
# an elementwise op reads: every kind of state one op's lowering leaves for another's.
FUSED = """
func.func @block(%x: tensor<130x256xbf16>, %g: tensor<256xbf16>, %b: tensor<256xbf16>, %w1: tensor<256x512xbf16>,
                 %b1: tensor<512xbf16>, %w2: tensor<512x256xbf16>, %b2: tensor<256xbf16>) -> tensor<130x256xbf16> {
  %n, %mean, %rstd = torch.aten.native_layer_norm %x, %g, %b {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xbf16>, tensor<256xbf16>, tensor<256xbf16>) -> (tensor<130x256xbf16>, tensor<130x1xbf16>, tensor<130x1xbf16>)
  %h = torch.aten.addmm %b1, %n, %w1 : (tensor<512xbf16>, tensor<130x256xbf16>, tensor<256x512xbf16>) -> tensor<130x512xbf16>
  %a = torch.aten.gelu %h {approximate = "tanh"} : (tensor<130x512xbf16>) -> tensor<130x512xbf16>
  %o = torch.aten.addmm %b2, %a, %w2 : (tensor<256xbf16>, tensor<130x512xbf16>, tensor<512x256xbf16>) -> tensor<130x256xbf16>
  %r = torch.aten.add.Tensor %o, %x : (tensor<130x256xbf16>, tensor<130x256xbf16>) -> tensor<130x256xbf16>
  func.return %r : tensor<130x256xbf16>
}
"""

PLAIN = """
func.func @head(%x: tensor<70x130xf32>, %w: tensor<130x33xf32>) -> tensor<70x33xf32> {
  %p = torch.aten.mm %x, %w : (tensor<70x130xf32>, tensor<130x33xf32>) -> tensor<70x33xf32>
  %s = torch.aten.sigmoid %p : (tensor<70x33xf32>) -> tensor<70x33xf32>
  %m = torch.aten._softmax %s {dim = 1 : i64, half_to_float = false} : (tensor<70x33xf32>) -> tensor<70x33xf32>
  func.return %m : tensor<70x33xf32>
}
"""

# Fails after its layer norm was deferred into the matmul that reads it (and before that matmul is lowered).
FAILING = """
func.func @broken(%x: tensor<130x256xbf16>, %w: tensor<256x64xbf16>) -> tensor<130x64xbf16> {
  %n, %mean, %rstd = torch.aten.native_layer_norm %x, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xbf16>) -> (tensor<130x256xbf16>, tensor<130x1xbf16>, tensor<130x1xbf16>)
  %y = torch.aten.special_airy_ai %x : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %p = torch.aten.mm %n, %w : (tensor<130x256xbf16>, tensor<256x64xbf16>) -> tensor<130x64xbf16>
  func.return %p : tensor<130x64xbf16>
}
"""


def _convert(text: str) -> str:
    module = Parser(make_context(), text).parse_module()
    ConvertTorchToTilePass().apply(Context(), module)
    module.verify()
    stream = StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue()


def test_conversions_do_not_depend_on_their_order():
    fused_first, plain_second = _convert(FUSED), _convert(PLAIN)
    plain_first, fused_second = _convert(PLAIN), _convert(FUSED)
    assert fused_first == fused_second
    assert plain_first == plain_second
    assert "tile.matmul" in fused_first
    assert "tile.matmul" in plain_first


def test_a_failed_conversion_leaves_nothing_behind():
    clean = _convert(FUSED)
    with pytest.raises(DiagnosticException, match="special_airy_ai"):
        _convert(FAILING)
    assert _convert(FUSED) == clean
