"""convert-torch-to-tile as a function of its input alone, with legality decided before converting.

The lowerings of a function share a `ConversionContext` made for that function (absorbed ops, index constants),
so a module converts to the same IR whatever was converted before it, in whatever order, and also after a
conversion that failed half-way. Whether an op lowers is
its family's `legal` check of the op alone, asked of every op before any is converted.
"""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.context import Context
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException

from neuron_mlir.ir.context import make_context
from neuron_mlir.lowering.convert_torch_to_tile import ConvertTorchToTilePass, legality
from neuron_mlir.lowering.convert_torch_to_tile.common import NotLowerable

# A layer norm read by a matmul, a Linear -> GELU -> Linear chain, and a matmul whose result an elementwise op
# reads: ops whose loop nests the tile-level passes fuse.
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
    """The module converted, after the torch-level passes that mark what the conversion fuses."""
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


# ---- legality, decided before converting ---------------------------------------------------------------------

LEGAL_THEN_ILLEGAL = """
func.func @late(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %p = torch.aten.mm %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %s = torch.aten.sum.dim_IntList %p {dim = array<i64: 5>} : (tensor<4x3xf32>) -> tensor<4xf32> loc("model.py":7:0)
  func.return %p : tensor<4x3xf32>
}
"""


def _parse(text: str):
    return Parser(make_context(), text).parse_module()


def test_an_illegal_op_fails_the_pass_before_anything_is_converted():
    module = _parse(LEGAL_THEN_ILLEGAL)
    before = str(module)
    with pytest.raises(NotLowerable, match=r"torch\.aten\.sum\.dim_IntList: dimension 5 is out of range for rank 2 "
                                           r"\(at model\.py:7\)"):  # fmt: skip
        ConvertTorchToTilePass().apply(Context(), module)
    assert str(module) == before


def test_legality_reads_the_op_alone():
    """The same answer for an op whatever was converted before it or around it: a function of its types."""
    module = _parse(LEGAL_THEN_ILLEGAL)
    mm, total = [op for op in module.walk() if op.name.startswith("torch.")]
    assert legality(mm) is None
    assert legality(total) == "dimension 5 is out of range for rank 2"
    assert legality(total) == legality(total.clone())


# A gather from a slice of a wide tensor: over the row-major slice that `legal` measures, each tile's offsets
# reach 64 * 170 elements; through the slice's own strides (rows 100,000 apart) they would reach past 2^24, which
# fp32 offsets cannot count exactly, so the conversion copies the slice row-major first.
STRIDED_GATHER = """
func.func @gather(%x: tensor<170x100000xf32>, %i: tensor<4x64xi64>) -> tensor<4x64xf32> {
  %s = torch.aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 64 : i64} : (tensor<170x100000xf32>) -> tensor<170x64xf32>
  %g = torch.aten.gather %s, %i {dim = 0 : i64} : (tensor<170x64xf32>, tensor<4x64xi64>) -> tensor<4x64xf32>
  func.return %g : tensor<4x64xf32>
}
"""


def test_a_gather_whose_strides_would_break_exactness_copies_its_source():
    module = _parse(STRIDED_GATHER)
    assert all(legality(op) is None for op in module.walk() if op.name.startswith("torch."))
    converted = _convert(STRIDED_GATHER)
    assert "memref.alloc() : memref<170x64xf32" in converted
    assert "tile.gather" in converted
