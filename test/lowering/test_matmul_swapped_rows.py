"""The rows a matmul's 128-row tiles leave over, accumulated with the operand roles swapped
(lowering/convert_torch_to_tile/matmul.py, `_Kernel.swapped`).

A sub-tile of few rows costs TensorE as much per K step as a full one (the moving side's columns set the time);
over a long K it runs as 128-column pieces of B stationary against its rows moving, and each [128, rows]
accumulator is transposed back as it leaves PSUM. These tests check where that is chosen (the tile IR's
matmuls) and that the product is PyTorch's, at row counts with a remainder of 10 (2 x 197 tokens) and of 2.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import numpy_close
from support.compiled import check_compiled
from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.ir.semantics import random_inputs, run_function
from neuron_mlir.lowering.convert_torch_to_tile import ConvertTorchToTilePass
from neuron_mlir.lowering.pipelines import pass_class


def _mm_module(m: int, k: int, n: int, target: str) -> str:
    return f"""
builtin.module attributes {{neuron.target = #neuron.target<{target}>}} {{
  func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
    %c = torch.aten.mm %a, %b : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
    func.return %c : tensor<{m}x{n}xf32>
  }}
}}
"""


def _shapes(matmul: tile.MatmulOp) -> tuple[int, int]:
    """(stationary free size, moving free size) of a tile.matmul."""
    stationary, moving = matmul.stationary.type, matmul.moving.type
    assert isinstance(stationary, TileType)
    assert isinstance(moving, TileType)
    return stationary.free_size, moving.free_size


def _converted(m: int, k: int, n: int, target: str = "trn2") -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """The (stationary, moving) free sizes of the converted mm's matmuls, its result and PyTorch's."""
    text = _mm_module(m, k, n, target)
    inputs = random_inputs(Parser(make_context(), text).parse_module())
    module = Parser(make_context(), text).parse_module()
    ConvertTorchToTilePass().apply(Context(), module)
    shapes = [_shapes(op) for op in module.walk() if isinstance(op, tile.MatmulOp)]
    [got] = run_function(module, inputs)
    a, b = (torch.from_numpy(np.asarray(x)) for x in inputs)
    return shapes, np.asarray(got), (a @ b).numpy()


@pytest.mark.parametrize(("m", "n", "rest"), [(394, 768, 10), (130, 512, 2)])
def test_a_remainder_over_a_long_k_runs_swapped(m: int, n: int, rest: int) -> None:
    shapes, got, expected = _converted(m, 3072, n)
    # the remainder's rows are the moving side of 128-column pieces of B, never the stationary of a full bank
    assert (128, rest) in shapes, shapes
    assert not [shape for shape in shapes if shape[0] == rest], shapes
    numpy_close(got, expected, f"[{m}, 3072] @ [3072, {n}]")


def test_a_swap_that_would_take_every_psum_bank_is_not_taken() -> None:
    # 130 rows in one block of 768 columns: 2 banks for the full sub-tile, 6 pieces for the 2 rows left over
    shapes, got, expected = _converted(130, 3072, 768)
    assert (128, 2) not in shapes, shapes
    numpy_close(got, expected, "[130, 3072] @ [3072, 768]")


def test_a_remainder_over_a_short_k_keeps_its_rows_stationary() -> None:
    # 6 K steps save less TensorE time than the transposes and the per-piece evacuations and stores cost
    shapes, got, expected = _converted(394, 768, 768)
    assert (10, 512) in shapes, shapes
    assert (128, 10) not in shapes, shapes
    numpy_close(got, expected, "[394, 768] @ [768, 768]")


def test_no_swap_where_transposes_are_not_bit_exact() -> None:
    # trn1 transposes through the array's arithmetic (an infinity would spread over its column): rows stay rows
    shapes, got, expected = _converted(394, 3072, 768, "trn1")
    assert (128, 10) not in shapes, shapes
    numpy_close(got, expected, "[394, 3072] @ [3072, 768] on trn1")


@pytest.mark.parametrize(("m", "n"), [(394, 768), (130, 512)])
def test_swapped_rows_through_a_linear_layer_and_its_epilogue(m: int, n: int) -> None:
    # bf16 Linear (bias row added in PSUM) whose GELU and residual add are fused into the evacuation
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(m, 3072, generator=generator).to(torch.bfloat16)
    w = (torch.randn(n, 3072, generator=generator) / 3072**0.5).to(torch.bfloat16)
    bias = torch.randn(n, generator=generator).to(torch.bfloat16)
    residual = torch.randn(m, n, generator=generator).to(torch.bfloat16)

    def layer(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(torch.nn.functional.linear(x, w, bias)) + residual

    check_compiled(layer, x, w, bias, residual)


def test_a_chain_whose_first_matmul_runs_swapped_still_fuses() -> None:
    # tanh(x @ W1 + b1) @ W2 over 394 rows and K1 = 3072: the first matmul's 10 rows left over accumulate
    # transposed, and tile-fuse-matmul-chains still builds the second matmul's panel on chip (H never stored)
    m, k, hidden, out = 394, 3072, 256, 70
    text = f"""
builtin.module attributes {{neuron.target = #neuron.target<trn2>}} {{
  func.func @main(%x: tensor<{m}x{k}xf32>, %w1: tensor<{k}x{hidden}xf32>, %b1: tensor<{hidden}xf32>,
                  %w2: tensor<{hidden}x{out}xf32>) -> tensor<{m}x{out}xf32> {{
    %h = torch.aten.addmm %b1, %x, %w1 : (tensor<{hidden}xf32>, tensor<{m}x{k}xf32>, tensor<{k}x{hidden}xf32>) -> tensor<{m}x{hidden}xf32>
    %a = torch.aten.tanh %h : (tensor<{m}x{hidden}xf32>) -> tensor<{m}x{hidden}xf32>
    %r = torch.aten.mm %a, %w2 : (tensor<{m}x{hidden}xf32>, tensor<{hidden}x{out}xf32>) -> tensor<{m}x{out}xf32>
    func.return %r : tensor<{m}x{out}xf32>
  }}
}}
"""
    inputs = random_inputs(Parser(make_context(), text).parse_module())
    converted = Parser(make_context(), text).parse_module()
    ConvertTorchToTilePass().apply(Context(), converted)
    assert (128, 10) in [_shapes(op) for op in converted.walk() if isinstance(op, tile.MatmulOp)]
    module = Parser(make_context(), text).parse_module()
    for name in ("convert-torch-to-tile", "tile-fuse-epilogues", "tile-fuse-matmul-chains"):
        pass_class(name)().apply(Context(), module)
    hidden_shapes = [
        op for op in module.walk() if isinstance(op, memref.AllocOp) and op.memref.type.get_shape() == (m, hidden)
    ]
    assert not hidden_shapes, "the hidden activations still go through HBM"
    [got] = run_function(module, inputs)
    x, w1, b1, w2 = (torch.from_numpy(np.asarray(value)) for value in inputs)
    numpy_close(np.asarray(got), (torch.tanh(torch.addmm(b1, x, w1)) @ w2).numpy(), "the fused chain")
