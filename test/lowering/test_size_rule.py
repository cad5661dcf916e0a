"""The size rule (docs/architecture.md#the-size-rule): programs grow with ops and loop nests, never with tiles.

Each case is compiled at two sizes whose tile counts differ by 4x or more, both large enough to take the same
code path (several tiles in every tiled dimension). The static instruction count of the program and the op count
of the lowered IR must be the same at both sizes: a lowering that unrolls per tile fails here long before it
makes compiles slow.
"""

from __future__ import annotations

import pytest
import torch
from support import capture_aten_graphs_with_inputs

from neuron_mlir.frontend.backend import CompileOptions
from neuron_mlir.frontend.compile_graph import CompiledGraph, compile_graph

BF16 = torch.bfloat16


def _program_size(fn, *inputs: torch.Tensor) -> tuple[int, int]:
    """(static instructions, bundle buffers) of the one graph `fn` compiles to."""
    [(graph, example)] = capture_aten_graphs_with_inputs(fn, *inputs)
    compiled = compile_graph(graph, example, CompileOptions(strict=True, cache=False), "forward")
    assert isinstance(compiled, CompiledGraph), "the case must compile as one region"
    program = compiled.program
    return len(program.instructions()), len(program.buffers)


# Matmuls choose their path by size (a B kept whole on chip when it fits, a stationary panel hoisted when all of K
# fits, block rows paired when two panels fit): their rows grow 4x and K and N stay where one path holds.
CASES = {
    "matmul": (
        lambda a, b: a @ b,
        lambda n: (torch.randn(n * n // 512, 2048, dtype=BF16), torch.randn(2048, 2048, dtype=BF16)),
    ),
    "linear with bias": (
        lambda x, w, b: torch.nn.functional.linear(x, w, b),
        lambda n: (torch.randn(n * n // 512, 2048), torch.randn(2048, 2048), torch.randn(2048)),
    ),
    # 8192 and 32768 rows: the block rows (1024 rows a trip, paired) are a loop at both sizes, which
    # neuron-unroll-loops unrolls as a whole (at 2048 rows there are two, straight-line code, and no loop)
    "linear, weight on chip": (
        lambda x, w: torch.nn.functional.linear(x, w),
        lambda n: (torch.randn(n * n // 128, 768, dtype=BF16), torch.randn(768, 768, dtype=BF16)),
    ),
    "softmax": (lambda x: torch.softmax(x, -1), lambda n: (torch.randn(n, n, dtype=BF16),)),
    "layer norm": (lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)), lambda n: (torch.randn(n, n),)),
    "elementwise chain": (
        lambda x: torch.nn.functional.gelu(x * 2.0 + 1.0) * x,
        lambda n: (torch.randn(n, n, dtype=BF16),),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_program_size_does_not_grow_with_tile_count(case):
    fn, make_inputs = CASES[case]
    small = _program_size(fn, *make_inputs(1024))
    large = _program_size(fn, *make_inputs(2048))
    assert large == small, f"{case}: (instructions, buffers) {small} at 1024 but {large} at 2048"
