"""neuron-balance-engines' cost in a block's length and its move-by-move improvement of a straight-line block (the
assignments and moves themselves: test/lit/lowering).

Each PSUM evacuation may sink to just before the first op that touches its tile. Finding that op by walking the
block forward from the evacuation made the pass quadratic in a block whose evacuations are read late: n tiles
evacuated as they are computed and stored after all n looked at about n * n / 2 ops. The pass now numbers the
block once and asks each buffer's users.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from xdsl.context import Context
from xdsl.ir import Operation
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import neuron
from neuron_mlir.lowering import neuron_balance_engines
from neuron_mlir.lowering.neuron_balance_engines import InstructionCosts, NeuronBalanceEnginesPass

_SBUF, _PSUM = "#mem<sbuf>", "#mem<psum>"


def _evacuated_then_stored(tiles: int) -> str:
    """`tiles` PSUM tiles, each computed and evacuated to SBUF, then every SBUF tile stored after all of them."""
    out = f"memref<128x{64 * tiles}xf32, #mem<hbm>>"
    lines = [
        "builtin.module attributes {neuron.target = #neuron.target<trn2>} {",
        f"  func.func @tiles(%x: memref<128x64xbf16, #mem<hbm>>) -> {out} {{",
        f"    %out = neuron.alloc : {out}",
        f"    %t = neuron.alloc : memref<128x64xbf16, {_SBUF}>",
        "    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64}"
        f" : memref<128x64xbf16, {_SBUF}>, memref<128x64xbf16, #mem<hbm>>",
    ]
    for tile in range(tiles):
        lines += [
            f"    %p{tile} = neuron.alloc : memref<128x64xf32, {_PSUM}>",
            f"    neuron.activation scalar dst %p{tile}[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]]"
            f' {{func = "exp"}} : memref<128x64xf32, {_PSUM}>, memref<128x64xbf16, {_SBUF}>',
            f"    %s{tile} = neuron.alloc : memref<128x64xf32, {_SBUF}>",
            f"    neuron.tensor_copy vector dst %s{tile}[0:128, 0, [[1, 64]]], src %p{tile}[0:128, 0, [[1, 64]]]"
            f" : memref<128x64xf32, {_SBUF}>, memref<128x64xf32, {_PSUM}>",
        ]
    for tile in range(tiles):
        lines.append(
            f"    neuron.dma_copy dma dst %out[{64 * tile}, [[{64 * tiles}, 128], [1, 64]]],"
            f" src %s{tile}[0:128, 0, [[1, 64]]] {{queue = {tile % 4} : i64}}"
            f" : {out}, memref<128x64xf32, {_SBUF}>"
        )
    lines += [f"    func.return %out : {out}", "  }", "}"]
    return "\n".join(lines)


def _walks(tiles: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """How many ops' walks the pass started, and how many instructions it left."""
    walks = 0
    walk = Operation.walk

    def counted(self: Operation, *args: Any, **kwargs: Any) -> Iterator[Operation]:
        nonlocal walks
        walks += 1
        return walk(self, *args, **kwargs)

    module = Parser(make_context(), _evacuated_then_stored(tiles)).parse_module()
    monkeypatch.setattr(Operation, "walk", counted)
    NeuronBalanceEnginesPass().apply(Context(), module)
    monkeypatch.setattr(Operation, "walk", walk)
    module.verify()
    return walks, sum(1 for op in module.walk() if isinstance(op, neuron.InstructionOp))


def test_work_grows_linearly_with_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    small, small_instructions = _walks(40, monkeypatch)
    large, large_instructions = _walks(160, monkeypatch)
    assert (small_instructions, large_instructions) == (1 + 3 * 40, 1 + 3 * 160)
    # four times the block, about four times the walks (a forward walk per evacuation started sixteen times as many)
    assert large <= 5 * small


def _summed_taps(taps: int, width: int) -> str:
    """A max pool backward's phase in miniature: per tap a compare of the offsets, a select of grad_output by it
    and an add into the running sum, all bf16 (compares, selects and adds VectorE and GpSimdE share)."""
    tile, hbm = f"memref<128x{width}xbf16, {_SBUF}>", f"memref<128x{width}xbf16, #mem<hbm>>"
    whole = f"[0:128, 0, [[1, {width}]]]"
    lines = [
        "builtin.module attributes {neuron.target = #neuron.target<trn2>} {",
        f"  func.func @taps(%x: {hbm}) -> {hbm} {{",
        f"    %out = neuron.alloc : {hbm}",
        f"    %g = neuron.alloc : {tile}",
        f"    %z = neuron.alloc : {tile}",
        f"    neuron.dma_copy dma dst %g{whole}, src %x[0, [[{width}, 128], [1, {width}]]] {{queue = 0 : i64}}"
        f" : {tile}, {hbm}",
        f"    neuron.memset vector dst %z{whole} {{value = 0.0 : f64}} : {tile}",
    ]
    total = ""
    for tap in range(taps):
        lines += [
            f"    %h{tap} = neuron.alloc : {tile}",
            f"    neuron.tensor_scalar vector dst %h{tap}{whole}, src %g{whole}"
            f' {{op0 = "is_equal", scalar0 = {float(tap)} : f64}} : {tile}, {tile}',
            f"    %s{tap} = neuron.alloc : {tile}",
            f"    neuron.select vector dst %s{tap}{whole}, predicate %h{tap}{whole}, on_true %g{whole},"
            f" on_false %z{whole} : {tile}, {tile}, {tile}, {tile}",
        ]
        if total:
            lines += [
                f"    %a{tap} = neuron.alloc : {tile}",
                f"    neuron.tensor_tensor vector dst %a{tap}{whole}, in0 {total}{whole}, in1 %s{tap}{whole}"
                f' {{op = "add"}} : {tile}, {tile}, {tile}',
            ]
        total = f"%a{tap}" if total else f"%s{tap}"
    lines += [
        f"    neuron.dma_copy dma dst %out[0, [[{width}, 128], [1, {width}]]], src {total}{whole} {{queue = 1 : i64}}"
        f" : {hbm}, {tile}",
        f"    func.return %out : {hbm}",
        "  }",
        "}",
    ]
    return "\n".join(lines)


def _balanced_span(text: str) -> tuple[float, list[str]]:
    """The estimated span of the function's block after the pass, and its instructions' engines."""
    module = Parser(make_context(), text).parse_module()
    NeuronBalanceEnginesPass().apply(Context(), module)
    module.verify()
    block = next(op for op in module.walk() if op.name == "func.func").regions[0].block
    costs = InstructionCosts(neuron.target_of(module))
    span = neuron_balance_engines._span_ns(neuron_balance_engines._steps(block, costs), {}, 1, costs)
    return span, [op.engine_kind.name for op in block.ops if isinstance(op, neuron.InstructionOp)]


def test_moves_shorten_a_straight_line_block(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _summed_taps(6, 512)
    improved, engines = _balanced_span(text)
    monkeypatch.setattr(neuron_balance_engines, "_MOVES_BUDGET", 0)
    assigned, before = _balanced_span(text)
    # both assignments left GpSimdE waiting behind chains that VectorE could have taken a step of
    assert improved < assigned * neuron_balance_engines._BETTER
    assert engines != before
