"""neuron-balance-engines' cost in a block's length (the assignments and moves themselves: test/lit/lowering).

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
from neuron_mlir.lowering.neuron_balance_engines import NeuronBalanceEnginesPass

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
