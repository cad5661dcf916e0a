"""A matmul whose moving chunks load in groups of more than two (`matmul.chunks_in_flight`) computes the same
product: every chunk of every group is multiplied once, at its own K offset."""

from __future__ import annotations

import torch
from support.compiled import check_compiled

from neuron_mlir.lowering.convert_torch_to_tile.matmul import Limits, choose_blocking
from neuron_mlir.runtime.hardware import DEFAULT_TARGET, TARGETS


def test_chunks_loaded_in_groups_of_four_give_the_product() -> None:
    k, m, n = 2560, 512, 512
    target = TARGETS[DEFAULT_TARGET]
    limits = Limits(
        (target.matmul_max_k, target.matmul_max_stationary_free, target.matmul_max_moving_free),
        target.sbuf_bytes_per_partition,
        target.psum_bank_bytes,
        target.psum_banks,
        target,
    )
    # A^T given (K on partitions, no transposes); B row-major with 512-column runs per chunk row
    blocking = choose_blocking(m, k, n, 2, False, False, limits)
    assert blocking.chunks_in_flight == 4, blocking
    generator = torch.Generator().manual_seed(0)
    lhs_t = torch.randn(k, m, generator=generator).to(torch.bfloat16)
    rhs = torch.randn(k, n, generator=generator).to(torch.bfloat16)
    check_compiled(lambda a_t, b: a_t.t() @ b, lhs_t, rhs)
