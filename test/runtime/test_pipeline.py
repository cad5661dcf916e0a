"""A software-pipelined tiled matmul, as a compiler would schedule it: correct, race free, near the roofline.

C[M, N] = A[K, M]^T @ B[K, N] in fp32 on trn2. A's column block stays resident in SBUF (loaded over 4 DMA
queues); B tiles stream through `slots` SBUF buffers on their own queues, each load waiting only for the matmul
that last read its buffer; two PSUM accumulators alternate so that evicting one overlaps accumulating the other.
Every buffer slot has its own static instructions (the k loop is unrolled by `slots`), which is what lets a
wait on "the most recent instance" name the right producer.
"""

from __future__ import annotations

import numpy as np
import pytest

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.simulator import RaceError, run_program


def pipelined_matmul(m: int, k: int, n: int, slots: int = 4, reuse_waits: bool = True):
    b = ProgramBuilder("trn2")
    a_hbm, b_hbm = b.input("a", (k, m), "f32"), b.input("b", (k, n), "f32")
    c_hbm = b.output("c", (m, n), "f32")
    k_tiles = k // 128
    a_resident = b.sbuf("a_resident", (128, k_tiles * 128), "f32")
    b_slots = [b.sbuf(f"b{s}", (128, 512), "f32") for s in range(slots)]
    accumulators = [b.psum(f"acc{h}", (128, 512)) for h in range(2)]
    staging = [b.sbuf(f"out{h}", (128, 512), "f32") for h in range(2)]
    ids = iter(range(10_000))
    load_a = [next(ids) for _ in range(4)]
    load_b = [[next(ids) for _ in range(slots)] for _ in range(2)]
    matmul = [[next(ids) for _ in range(slots)] for _ in range(2)]
    evict = [next(ids) for _ in range(2)]
    store = [next(ids) for _ in range(2)]
    last_matmuls = [matmul[0][slots - 1], matmul[1][slots - 1]]
    with b.loop(0, m // 128) as mi:
        a_column = b.scalar(b.reg(), "mul", mi, 128)
        for queue in range(4):
            with b.loop(queue, k_tiles, 4) as ki:
                source = b.scalar(b.reg(), "mul", ki, 128 * m)
                b.scalar(source, "add", source, a_column)
                column = b.scalar(b.reg(), "mul", ki, 128)
                b.dma(
                    b.ap(a_resident, [(1, 128)], reg=column),
                    b.ap(a_hbm, [(m, 128), (1, 128)], reg=source),
                    queue=queue,
                    waits=last_matmuls if reuse_waits else [],
                    id=load_a[queue],
                )
        with b.loop(0, n // 1024) as pair:
            for half in range(2):
                n_column = b.scalar(b.reg(), "mul", pair, 1024)
                b.scalar(n_column, "add", n_column, 512 * half)
                with b.loop(0, k_tiles, slots) as k0:
                    for slot in range(slots):
                        ki = b.scalar(b.reg(), "add", k0, slot)
                        source = b.scalar(b.reg(), "mul", ki, 128 * n)
                        b.scalar(source, "add", source, n_column)
                        b.dma(
                            b.ap(b_slots[slot]),
                            b.ap(b_hbm, [(n, 128), (1, 512)], reg=source),
                            queue=4 + slot,
                            waits=[matmul[0][slot], matmul[1][slot]] if reuse_waits else [],
                            id=load_b[half][slot],
                        )
                        a_column_tile = b.scalar(b.reg(), "mul", ki, 128)
                        first = b.scalar(b.reg(), "ne", ki, 0)
                        b.inst(
                            "nc_matmul",
                            "tensor",
                            {
                                "dst": b.ap(accumulators[half]),
                                "stationary": b.ap(a_resident, [(1, 128)], reg=a_column_tile),
                                "moving": b.ap(b_slots[slot]),
                            },
                            {"accumulate": first},
                            waits=[load_b[half][slot], *load_a, evict[half]],
                            id=matmul[half][slot],
                        )
                b.inst(
                    "tensor_copy",
                    "vector" if half == 0 else "scalar",
                    {"dst": b.ap(staging[half]), "src": b.ap(accumulators[half])},
                    waits=[matmul[half][slots - 1], store[half]],
                    id=evict[half],
                )
                target = b.scalar(b.reg(), "mul", mi, 128 * n)
                b.scalar(target, "add", target, n_column)
                b.dma(
                    b.ap(c_hbm, [(n, 128), (1, 512)], reg=target),
                    b.ap(staging[half]),
                    queue=12 + half,
                    waits=[evict[half]],
                    id=store[half],
                )
    return b.build()


def test_pipelined_matmul_is_correct_race_free_and_near_the_roofline():
    rng = np.random.default_rng(0)
    m = k = n = 1024
    a = rng.standard_normal((k, m)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (c,), profile = run_program(pipelined_matmul(m, k, n), [a, b])
    np.testing.assert_allclose(c, a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    assert profile.total_ns >= profile.roofline_ns
    assert profile.mfu > 0.5  # the schedule overlaps loads, matmuls and evictions
    assert profile.utilisation("tensor") == pytest.approx(profile.mfu, rel=1e-4)  # peak 78.64 is rounded


def test_dropping_the_buffer_reuse_waits_is_a_race():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((512, 256)).astype(np.float32)
    b = rng.standard_normal((512, 1024)).astype(np.float32)
    with pytest.raises(RaceError, match=r"\(dma_copy, dma\d+ queue\) writes .* \(nc_matmul, tensor queue\) read"):
        run_program(pipelined_matmul(256, 512, 1024, reuse_waits=False), [a, b])
