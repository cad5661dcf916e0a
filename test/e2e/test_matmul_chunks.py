"""A matmul whose moving chunks load in groups of more than two (`matmul.chunks_in_flight`) computes the same
product: every chunk of every group is multiplied once, at its own K offset."""

from __future__ import annotations

import pytest
import torch
from support import assert_close_to_torch
from support.compiled import check_compiled, run_compiled

import neuron_mlir
from neuron_mlir.lowering.convert_torch_to_tile.matmul import Limits, choose_blocking
from neuron_mlir.runtime.hardware import DEFAULT_TARGET, TARGETS


def test_chunks_loaded_in_groups_of_four_give_the_product() -> None:
    k, m, n = 2560, 512, 512
    limits = Limits.of(TARGETS[DEFAULT_TARGET])
    # A^T given (K on partitions, no transposes); B row-major with 512-column runs per chunk row
    blocking = choose_blocking(m, k, n, 2, False, False, limits)
    assert blocking.chunks_in_flight == 4, blocking
    generator = torch.Generator().manual_seed(0)
    lhs_t = torch.randn(k, m, generator=generator).to(torch.bfloat16)
    rhs = torch.randn(k, n, generator=generator).to(torch.bfloat16)
    check_compiled(lambda a_t, b: a_t.t() @ b, lhs_t, rhs)


def test_a_row_major_argument_in_full_block_rows_gives_the_product() -> None:
    # trn1, K = 8192 in bf16: A, a function argument, is transposed into a panel of 512 rows
    # (`stationary_budget`); the same product with A computed by a layer norm first keeps the panel to the
    # share a fused prologue leaves, and both compile and match
    k, m, n = 8192, 512, 256
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(torch.bfloat16)
    b = (torch.randn(k, n, generator=generator) / k**0.5).to(torch.bfloat16)
    check_compiled(lambda a, b: a @ b, a, b, options={"target": "trn1"})
    check_compiled(lambda a, b: torch.nn.functional.layer_norm(a, (k,)) @ b, a, b, options={"target": "trn1"})


def test_a_single_block_row_of_more_than_two_blocks_keeps_b_whole() -> None:
    # one block row (256 rows), a short K: with three blocks of columns B is loaded whole ahead of them, with two
    # each block loads its own columns (`choose_blocking`); both products match
    k, m = 256, 256
    limits = Limits.of(TARGETS[DEFAULT_TARGET])
    block_n = choose_blocking(m, k, 512, 2, True, False, limits).n_subs * limits.matmul[2]
    assert choose_blocking(m, k, 3 * block_n, 2, True, False, limits).resident
    assert not choose_blocking(m, k, 2 * block_n, 2, True, False, limits).resident
    assert not choose_blocking(m, k, 3 * block_n, 2, True, False, limits, lhs_from_hbm=True).resident
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(torch.bfloat16)
    for n in (2 * block_n, 3 * block_n):
        b = (torch.randn(k, n, generator=generator) / k**0.5).to(torch.bfloat16)
        check_compiled(lambda a, b: torch.relu(a) @ b, a, b)


def test_a_short_k_contiguous_b_is_one_chunk_per_block() -> None:
    # fp8 Linear weights (B = W^T, K contiguous) up to K = 2048: each block loads and transposes all of K as one
    # chunk, so its block loop is the innermost loop with DMAs; a longer K, or bf16 at K = 2048, keeps a chunk loop
    limits = Limits.of(TARGETS[DEFAULT_TARGET])
    short = choose_blocking(256, 2048, 8192, 1, True, True, limits)
    assert short.chunk_tiles == short.panel_tiles == 16, short
    long = choose_blocking(256, 8192, 2048, 1, True, True, limits)
    assert long.chunk_tiles < long.panel_tiles, long
    wide = choose_blocking(256, 2048, 8192, 2, True, True, limits)
    assert wide.chunk_tiles < wide.panel_tiles, wide
    # sizes off the tiles (a partial last K tile, a partial last block of columns), B too large to keep whole
    m, k, n = 130, 1000, 7400
    blocking = choose_blocking(m, k, n, 1, True, True, limits)
    assert not blocking.resident, blocking
    assert blocking.chunk_tiles == k // limits.matmul[0], blocking
    generator = torch.Generator().manual_seed(0)
    a = (torch.randn(m, k, generator=generator) * 4).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, generator=generator) * 4).to(torch.float8_e4m3fn)
    check_compiled(lambda a, w: a.float() @ w.float().t(), a, w)


@pytest.mark.parametrize("shape", [(640, 1100, 3300), (640, 1024, 2048)])
@pytest.mark.parametrize("auto_cast", ["none", "matmul"])
def test_a_k_contiguous_b_is_transposed_once_for_every_block_row(auto_cast: str, shape: tuple[int, int, int]) -> None:
    # x @ W^T with an fp32 W [n, k] (K contiguous) too large to stay whole on chip, in fp32 and rounded to bf16
    # as its DMAs load it (`auto_cast="matmul"`, which the DMA engines cannot also transpose): the first of the two
    # block rows (512 rows, then 128) transposes W on TensorE and stores it for the second (`_transpose_once`),
    # so TensorE transposes each [128, 128] block of W once and those of x once per row. The copy is row-major
    # (a partial K tile, a partial block of columns) or stored by blocks of 512 columns (whole K tiles and blocks:
    # `_blocked_by_columns`)
    m, k, n = shape
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(m, k, generator=generator)
    weight = torch.randn(n, k, generator=generator) / k**0.5
    actual = run_compiled(lambda x, w: x @ w.t(), x, weight, options={"auto_cast": auto_cast})
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    if auto_cast == "matmul":  # the exact statement: bf16 products of the rounded operands, fp32 sums
        x, weight = x.to(torch.bfloat16).float(), weight.to(torch.bfloat16).float()
    assert_close_to_torch(actual, x @ weight.t())
    profiles = neuron_mlir.profiles().values()
    transposes = sum(s.count for p in profiles for s in p.instructions if s.opcode == "nc_matmul" and not s.flops)
    assert transposes == (-(-m // 128) + -(-n // 128)) * -(-k // 128)
