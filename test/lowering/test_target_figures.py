"""Tiling choices of the torch -> tile lowerings follow the target's hardware figures, not literals.

The figures come from `runtime/hardware.py` through the module's target; a target with other figures must
change the choices that depend on them (and leave the others alone).
"""

from __future__ import annotations

import dataclasses

from neuron_mlir.lowering.convert_torch_to_tile.attention_backward import kernel_refusal, max_keys
from neuron_mlir.lowering.convert_torch_to_tile.matmul import (
    BLOCK_BANK_SHARE,
    MOVING_CHUNK_BYTES,
    Limits,
    choose_blocking,
)
from neuron_mlir.lowering.convert_torch_to_tile.rows import rows_per_partition
from neuron_mlir.runtime.hardware import TARGETS


def _limits(psum_banks: int) -> Limits:
    target = TARGETS["trn2"]
    return Limits(
        (target.matmul_max_k, target.matmul_max_stationary_free, target.matmul_max_moving_free),
        target.sbuf_bytes_per_partition,
        target.psum_bank_bytes,
        psum_banks,
    )


def test_an_output_block_takes_its_share_of_the_psum_banks() -> None:
    # a matmul with many output tiles both ways and a short K: the block is as large as its banks allow
    for banks in (4, 8, 16):
        blocking = choose_blocking(4096, 512, 4096, 2, False, False, _limits(banks))
        assert blocking.m_subs * blocking.n_subs == banks // BLOCK_BANK_SHARE


def test_row_groups_reach_the_full_rate_size_of_a_dma() -> None:
    target = TARGETS["trn2"]
    full_rate = target.dma_full_rate_bytes_per_partition
    # rows of 512 bytes: as many per partition as the full-rate size needs, when budget and rows allow
    assert rows_per_partition(512, 1024, 1 << 20, 1 << 20, full_rate) == full_rate // 512
    assert rows_per_partition(512, 1024, 1 << 20, 1 << 20, 2 * full_rate) == 2 * full_rate // 512
    # the budget and the row count still bound it
    assert rows_per_partition(512, 1024, 4 * 1024, 1 << 20, full_rate) == 4
    assert rows_per_partition(512, 1024, 1 << 20, 3 * 128, full_rate) == 3


def test_the_fused_attention_backward_takes_the_keys_one_psum_bank_holds() -> None:
    query, value = (1, 2, 128, 64), (1, 2, 256, 64)
    trn2 = TARGETS["trn2"]
    bank_keys = trn2.psum_bank_bytes // 4  # fp32 scores per partition of one bank
    assert kernel_refusal(query, (1, 2, bank_keys, 64), (1, 2, bank_keys, 64), 0.0, False, False, trn2) is None
    refusal = kernel_refusal(query, (1, 2, bank_keys + 1, 64), (1, 2, bank_keys + 1, 64), 0.0, False, False, trn2)
    assert refusal == f"more than {bank_keys} keys (one PSUM bank of scores per query tile) have no fused backward"
    # a target with banks half the size takes half the keys
    small_banks = dataclasses.replace(trn2, psum_banks=2 * trn2.psum_banks)
    assert max_keys(small_banks) == bank_keys // 2
    assert kernel_refusal(query, value, value, 0.0, False, False, small_banks) is None
    assert kernel_refusal(query, (1, 2, 384, 64), (1, 2, 384, 64), 0.0, False, False, small_banks) is not None
    # without a target (the frontend, before it knows one): what every target takes
    assert max_keys() == min(max_keys(target) for target in TARGETS.values())


def test_moving_chunks_in_flight_cover_the_dma_latency() -> None:
    # trn1, bf16 [4096, 8192] @ [8192, 8192] with A^T given: a chunk of 512-column rows takes longer to load
    # (fixed latency + 1 KiB runs) than its matmuls take, so more than two chunks are loaded at once
    target = TARGETS["trn1"]

    def blocking_on(chosen: object) -> int:
        limits = Limits(
            (target.matmul_max_k, target.matmul_max_stationary_free, target.matmul_max_moving_free),
            target.sbuf_bytes_per_partition,
            target.psum_bank_bytes,
            target.psum_banks,
            chosen,  # type: ignore[arg-type]
        )
        return choose_blocking(4096, 8192, 8192, 2, False, False, limits).chunks_in_flight

    assert blocking_on(target) == 4
    # without the DMA's fixed latency the load is shorter than the matmuls: double buffering suffices
    assert blocking_on(dataclasses.replace(target, dma_fixed_latency_ns=0.0)) == 2
    # no target, no timing: pairs
    assert blocking_on(None) == 2


def test_a_panel_read_from_hbm_takes_what_the_moving_operand_leaves() -> None:
    # trn1, bf16 [4096, 8192] @ [8192, 8192] with A row-major: its panel and the rows it is transposed from
    # take 2 x 65 K tiles x 256 bytes per 128 rows. A fusion may compute A's rows beside the panel, so an A
    # the function computes keeps the panel to its share (256-row block rows at this K); an A that is one of
    # the function's arguments has nothing beside it but the moving chunks and the evacuated blocks: 512 rows.
    target = TARGETS["trn1"]
    limits = Limits.of(target)
    computed = choose_blocking(4096, 8192, 8192, 2, True, False, limits)
    loaded = choose_blocking(4096, 8192, 8192, 2, True, False, limits, lhs_from_hbm=True)
    assert (computed.m_subs, loaded.m_subs) == (2, 4)
    assert computed.hoisted
    assert loaded.hoisted
    # the panel, the chunks in flight and two blocks of evacuated fp32 tiles fit SBUF together
    panel = loaded.m_subs * (8192 // 128 + 1) * 2 * 128 * 2
    moving = loaded.chunks_in_flight * loaded.chunk_tiles * loaded.n_subs * loaded.n_tile * 2
    evacuated = 2 * loaded.m_subs * loaded.n_subs * target.psum_bank_bytes
    assert panel + moving + evacuated <= target.sbuf_bytes_per_partition
    # the blocking of an A^T given (no rows beside the panel) does not change: it already fits
    assert choose_blocking(4096, 8192, 8192, 2, False, False, limits, lhs_from_hbm=True) == choose_blocking(
        4096, 8192, 8192, 2, False, False, limits
    )


def test_a_k_contiguous_weight_loads_rows_of_a_whole_moving_chunk() -> None:
    # x @ W^T of a Linear layer too large to keep whole (K = 2048, 32000 outputs, 256 rows): W's rows are
    # loaded a moving chunk's K tiles at a time, within the chunk's SBUF budget, not a PSUM bank's worth
    # (which was 256-byte runs in bf16 and in fp8: half the DMA rate)
    limits = _limits(8)
    for itemsize in (1, 2):
        blocking = choose_blocking(256, 2048, 32000, itemsize, False, True, limits)
        assert not blocking.resident
        block_n = blocking.n_subs * blocking.n_tile
        assert blocking.chunk_tiles * blocking.k_tile * itemsize >= 512
        # within a chunk's budget; a short K (fp8 here) is one chunk of all of K, at most two chunks' bytes
        budget = 2 * MOVING_CHUNK_BYTES if blocking.chunk_tiles == blocking.panel_tiles else MOVING_CHUNK_BYTES
        assert blocking.chunk_tiles * block_n * itemsize <= budget
