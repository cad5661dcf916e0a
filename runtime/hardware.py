"""The NeuronCore generations we target: every hardware limit and cost constant, in one table.

Each number names its public source by a key in square brackets (`[nki-arch-trn1]`), defined in
`docs/hardware-sources.md`, which also lists every figure with its source in one place. *derived* marks a value
computed from published ones (the arithmetic is given); *assumed* marks a modelling choice with no published
figure behind it. Assumed values are the first to revisit when measurements on the hardware become available.

Everything else in the project (dialect verifiers, the allocator, the cost model, the bundle validator) reads
its limits from here, so a target is described in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Memory(str, Enum):  # noqa: UP042  (a StrEnum would change str() of members others may format)
    """The three address spaces a NeuronCore instruction can touch."""

    HBM = "hbm"
    SBUF = "sbuf"
    PSUM = "psum"


class Engine(str, Enum):  # noqa: UP042  (see Memory)
    """The instruction queues of one NeuronCore [nki-arch-trn1].

    Four compute engines with their own sequencers, the sync engine that triggers DMAs, the DMA queues (one
    `Engine.DMA` value; the queue number is an attribute of the instruction), and the collective queue: the
    chip's CC-cores [nki-arch-trn2] run collectives between cores over NeuronLink and EFA, beside the core's own
    queues, so a collective overlaps the compute that does not depend on it.
    """

    TENSOR = "tensor"
    VECTOR = "vector"
    SCALAR = "scalar"
    GPSIMD = "gpsimd"
    SYNC = "sync"
    DMA = "dma"
    COLLECTIVE = "collective"


# Which engine may read / write which memory [nki-arch-trn1, nki-memory]: TensorE reads SBUF and writes PSUM;
# VectorE and ScalarE read and write SBUF and PSUM; GpSimdE only SBUF; DMA moves between HBM and SBUF (and
# HBM<->HBM, SBUF<->SBUF). Compute engines never touch HBM.
ENGINE_READS: dict[Engine, frozenset[Memory]] = {
    Engine.TENSOR: frozenset({Memory.SBUF}),
    Engine.VECTOR: frozenset({Memory.SBUF, Memory.PSUM}),
    Engine.SCALAR: frozenset({Memory.SBUF, Memory.PSUM}),
    Engine.GPSIMD: frozenset({Memory.SBUF}),
    Engine.SYNC: frozenset(),
    Engine.DMA: frozenset({Memory.HBM, Memory.SBUF}),
    Engine.COLLECTIVE: frozenset({Memory.HBM}),  # collectives move HBM tensors between cores
}
ENGINE_WRITES: dict[Engine, frozenset[Memory]] = {
    Engine.TENSOR: frozenset({Memory.PSUM}),
    Engine.VECTOR: frozenset({Memory.SBUF, Memory.PSUM}),
    Engine.SCALAR: frozenset({Memory.SBUF, Memory.PSUM}),
    Engine.GPSIMD: frozenset({Memory.SBUF}),
    Engine.SYNC: frozenset(),
    Engine.DMA: frozenset({Memory.HBM, Memory.SBUF}),
    Engine.COLLECTIVE: frozenset({Memory.HBM}),
}

KIB = 1024
MIB = 1024 * 1024
GIB = 1024 * MIB

# SBUF/PSUM partitions and PE-array rows, the same on every generation [nki-arch-trn1, nki-arch-trn2,
# nki-arch-trn3]: the tile height of code that runs before a target is chosen.
PARTITIONS = 128

# An engine access pattern's free dimensions: each size is a uint16 and each step an int16, counted in elements
# [nki-arch-trn1].
ACCESS_PATTERN_MAX_NUM = 2**16 - 1
ACCESS_PATTERN_STEP_RANGE = (-(2**15), 2**15 - 1)


@dataclass(frozen=True)
class Target:
    """One NeuronCore generation: limits (verifiers, allocator) and cost constants (simulator)."""

    name: str
    core_version: str

    # --- structure -------------------------------------------------------------------------------------------
    partitions: int  # SBUF/PSUM partitions and PE-array rows: `PARTITIONS` on all three
    # 192 KiB [nki-arch-trn1], 224 KiB [nki-arch-trn2]; trn3: 32 MiB [nki-arch-trn3] / 128, derived
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int  # 16 KiB on all three [nki-arch-trn1, nki-arch-trn3]
    psum_banks: int  # 8 banks of 2 KiB per partition [nki-arch-trn1, nki-tile-size]
    hbm_bytes: int  # per-core share of the chip's HBM that the simulator models (derived: chip capacity / cores)
    dma_queues: int  # 16 DMA engines per core [nki-dma], modelled as one queue each (assumed)
    max_free_dims: int  # up to 4-D free-axis access patterns [nki-arch-trn1, nki-aps]
    # TensorE tile limits [nki-arch-trn1, nki-tile-size]: K and M at most 128, the moving free size at most one
    # PSUM bank of fp32.
    matmul_max_k: int
    matmul_max_stationary_free: int
    matmul_max_moving_free: int
    # TensorE row tiling mode [nki-isa] (nc_matmul's tile_position / tile_size): the PE array's 128 rows split into
    # 2 tiles of 64 (NeuronCore-v2 and newer) or 4 of 32 (NeuronCore-v3 and newer), and matmuls in disjoint row
    # tiles run at the same time. The row tile sizes a matmul may name; empty: no row tiling.
    matmul_row_tile_sizes: tuple[int, ...] = (64,)

    # --- placement: start alignment of the buffers the compiler places, in bytes ------------------------------
    # Assumed: NKI reads minimum alignments at run time (`tile_size.sbuf_min_align`, `psum_min_align`,
    # [nki-tile-size]) but publishes no values; 64 bytes is our choice.
    on_chip_alignment_bytes: int = 64  # SBUF and PSUM, within a partition
    hbm_alignment_bytes: int = 64

    # --- clocks (GHz) [nki-arch-trn1, nki-arch-trn2, nki-arch-trn3] ------------------------------------------
    clock_ghz: dict[Engine, float] = field(default_factory=dict)

    # --- throughput (PE-array peak, used for MFU and the roofline) --------------------------------------------
    tensor_peak_tflops: dict[str, float] = field(default_factory=dict)  # per input dtype family
    hbm_bandwidth_gbps: float = 0.0  # per-core HBM bandwidth, GB/s (derived: chip / cores)
    # Rate of ONE DMA engine: 17/23/33 B/ns on trn1/trn2/trn3 [nki-dma-bw] (x16 engines = 272/368/528 GB/s per
    # core); a trn2 profile shows one engine moving 32 KiB in 1416 ns = 23.1 B/ns [nki-dma]. The core's
    # aggregate DMA rate is `dma_aggregate_bytes_per_ns`.
    dma_bytes_per_ns: float = 0.0

    # --- per-instruction cost rules (applied in runtime/cost_model.py) -----------------------------------------
    matmul_min_cycles: int = 64  # matmul initiation interval max(N, 64) cycles [nki-arch-trn1, nki-perf]
    matmul_fp32_factor: int = 4  # fp32 inputs cost 4x [nki-arch-trn1]
    # fp8 x fp8 matmuls over a full 128-row contraction tile: TensorE's fp8 rate over its bf16 rate. NeuronCore-v2
    # runs fp8 at the bf16 rate [nki-arch-trn1]; v3's double-row mode contracts 256 rows in the time of 128
    # [nki-arch-trn2], which the model charges as half the cycles per full tile (pairs of consecutive tiles of one
    # accumulation); v4 publishes 4x only for MX formats [nki-arch-trn3], whose per-32-element scales per-tensor or
    # per-row scaled fp8 does not have, so v4 keeps v3's 2x (assumed).
    matmul_fp8_speedup: int = 1
    vector_min_cycles: int = 64  # VectorE minimum initiation interval, about 64 cycles [nki-isa-2.26]
    scalar_min_cycles: int = 64  # ScalarE activation max(64, N) [nki-isa-2.26]
    gpsimd_startup_cycles: int = 150  # GpSimdE instructions: about 150 cycles of startup [nki-isa-2.26]
    # int64 on GpSimdE: each 64-bit value takes two 32-bit lanes (16 x 32-bit lanes per processor,
    # [nki-arch-trn1]), and carries/products take extra instructions (assumed)
    gpsimd_int64_cycles_factor: int = 2
    # Static overhead to start a tensor access, "approximately 60 cycles" on NeuronCore-v2 [nki-arch-trn1]; not
    # charged by the cost model.
    access_bubble_cycles: int = 60
    # Extra cycles when each instruction depends on the one before it: 100 [nki-arch-trn1]
    dependent_op_penalty_cycles: int = 100
    # Per DMA: descriptor and semaphore cost. The published figure is about 1300 ns across engines
    # [nki-dma-bw]; the model charges 2 us (assumed).
    dma_fixed_latency_ns: float = 2000.0
    dma_full_rate_bytes_per_partition: int = 4096  # >= 4 KiB per partition saturates [nki-dma-bw, nki-dma]
    dma_min_efficient_bytes_per_partition: int = 256  # below 256 B per partition overhead-bound [nki-dma-bw]
    # Efficiency of a transfer whose contiguous chunks are exactly `dma_min_efficient_bytes_per_partition` long
    # (assumed): [nki-dma-bw] calls that size the edge of the overhead-bound region, so half the bytes/ns of a
    # saturating one.
    dma_efficiency_at_min_bytes: float = 0.5
    # One DMA engine serves 8 partitions; 128 partitions use all 16 [nki-dma, nki-perf]
    dma_partitions_per_engine: int = 8
    # DMA transposes (the DMA engines transpose 2-byte elements while they move them, from NeuronCore-v3 on): the
    # fraction of a copy's DMA throughput they reach from HBM into SBUF (up to 90%) and from SBUF to SBUF (up to
    # 50%) [nki-arch-trn2]. 0: the model gives the target no DMA transpose (NeuronCore-v2 publishes no figure).
    dma_transpose_hbm_efficiency: float = 0.0
    dma_transpose_sbuf_efficiency: float = 0.0
    # The engines of a DMA transpose work together on blocks of [128 partitions, 16 contiguous elements] of the
    # destination; sizes that are not multiples of these reach less of the rate [nki-arch-trn2] (the model: in
    # proportion to the part of each block that holds data, assumed).
    dma_transpose_block_partitions: int = 128
    dma_transpose_block_elements: int = 16
    # is_transpose matmuls: bit-exact pass-through, 2x faster for fp32 than without the transpose mode, from v3
    # on [nki-arch-trn2]; on v2 the transpose goes through the array arithmetic at the fp32 matmul rate (assumed).
    matmul_transpose_fp32_factor: int = 4
    scalar_accumulate_cycles: int = 64  # activation with a free-axis reduce: max(64, N) + 64 [nki-isa-2.26]
    # tensor_scalar with a free-axis reduce (the ISA's tensor_scalar_reduce): max(64, N) + 64 [nki-isa-2.26]
    vector_accumulate_cycles: int = 64
    # VectorE performance modes, chosen by the hardware from v3 on [nki-arch-trn2]: 4x for tensor_copy and
    # tensor_scalar with all operands 16-bit, in SBUF and contiguous; 2x for other all-16-bit cases
    # (tensor_tensor only for bf16 in SBUF). v4 keeps at least v3's VectorE datapath widths [nki-arch-trn3], so
    # the same modes (assumed).
    vector_16bit_copy_speedup: int = 1
    vector_16bit_speedup: int = 1
    vector_reduce_16bit_speedup: int = 2  # tensor_reduce N/2 cycles for bf16 add/max [nki-isa-2.26]
    # scalar_tensor_tensor streams src and in1 in 2N cycles, N when both are bf16, op0 is subtract, op1 multiply
    # and N is even [nki-isa-2.26]
    vector_subtract_multiply_bf16_speedup: int = 2
    scalar_16bit_speedup: int = 1  # v4 ScalarE: tensor_scalar/tensor_copy up to 2x for 16-bit [nki-arch-trn3]
    # is_transpose is a bit-exact pass-through from v3 on; on v2 it goes through the array arithmetic, so NaN/Inf
    # spread and the output is fp32 [nki-arch-trn2].
    matmul_transpose_bit_exact: bool = True
    matmul_bf16_psum_output: bool = False  # v4 TensorE may write BF16 to PSUM [nki-arch-trn3]; v2/v3 FP32 only
    # Indirect DMA goes through the software DGE: GpSimdE writes one descriptor per gathered/scattered row before
    # the transfer starts [nki-isa (dma_copy), nki-dge]. Cycles per descriptor (assumed: a few 512-bit stores of
    # address arithmetic per row on a GpSimd core; no published number), after `gpsimd_startup_cycles`.
    swdge_cycles_per_descriptor: int = 16

    # --- collectives between cores (runtime/collectives.py) ---------------------------------------------------
    # Cores per chip and chips per instance: an instance is the domain NeuronLink connects; EFA joins instances.
    cores_per_chip: int = 1
    chips_per_instance: int = 1
    # NeuronLink bandwidth of one chip, GB/s (all its links together), shared by the chip's cores.
    neuronlink_chip_gbps: float = 0.0
    # EFA bandwidth of one instance, GB/s, shared by the instance's cores.
    efa_instance_gbps: float = 0.0
    # Latency of one step of a collective algorithm (one message and its synchronisation), ns. Assumed: no public
    # per-hop figure; a NeuronLink step costs about one DMA's fixed latency (`dma_fixed_latency_ns`), an EFA step
    # a network round trip of the order of 10 us.
    neuronlink_step_ns: float = 2000.0
    efa_step_ns: float = 10000.0

    @property
    def cores_per_instance(self) -> int:
        return self.cores_per_chip * self.chips_per_instance

    @property
    def neuronlink_core_bytes_per_ns(self) -> float:
        """One core's share of its chip's NeuronLink bandwidth when every core communicates (derived)."""
        return self.neuronlink_chip_gbps / self.cores_per_chip

    @property
    def efa_core_bytes_per_ns(self) -> float:
        """One core's share of its instance's EFA bandwidth when every core communicates (derived)."""
        return self.efa_instance_gbps / self.cores_per_instance

    @property
    def dma_aggregate_bytes_per_ns(self) -> float:
        """All DMA engines of the core together: 16 engines x the per-engine rate [nki-dma-bw]."""
        return self.dma_queues * self.dma_bytes_per_ns

    @property
    def sbuf_bytes(self) -> int:
        return self.partitions * self.sbuf_bytes_per_partition

    @property
    def psum_bank_bytes(self) -> int:
        return self.psum_bytes_per_partition // self.psum_banks

    def clock_hz(self, engine: Engine) -> float:
        return self.clock_ghz[engine] * 1e9

    def peak_flops(self, dtype_family: str) -> float:
        """TensorE peak FLOP/s for matmul inputs of `dtype_family` ('fp32', 'bf16', 'fp8')."""
        return self.tensor_peak_tflops[dtype_family] * 1e12


# GpSimdE kernels (`isa.GPSIMD_KERNELS`): cycles per element per partition after the startup (assumed). No public
# number exists; each lane runs a software routine of about this many SIMD instructions per element: a divide
# is a reciprocal estimate refined by Newton steps plus the rounding fix-up (~6), Philox-4x32-10 is 10 rounds
# of two 32x32 multiplies and xors shared by four words (~8 per word), Box-Muller adds a log, a sqrt and a cos;
# stochastic rounding to bf16 is a mask, an add, a compare and a select on the bit pattern (~4).
GPSIMD_KERNEL_CYCLES_PER_ELEMENT: dict[str, int] = {
    "divide": 6,
    "divide_trunc": 6,
    "divide_floor": 8,
    "fmod": 8,
    "remainder": 8,
    "uniform": 8,
    "normal": 24,
    "stochastic_round_bf16": 4,
}


def _clocks(tensor: float, vector: float, scalar: float, gpsimd: float) -> dict[Engine, float]:
    # The sync engine, the DMA queues and the collective queue have no published clock; they are timed in
    # nanoseconds, and we give them ScalarE's clock (assumed) so that any cycle-denominated overhead on them stays
    # comparable.
    return {
        Engine.TENSOR: tensor,
        Engine.VECTOR: vector,
        Engine.SCALAR: scalar,
        Engine.GPSIMD: gpsimd,
        Engine.SYNC: scalar,
        Engine.DMA: scalar,
        Engine.COLLECTIVE: scalar,
    }


TRN1 = Target(
    name="trn1",
    core_version="NeuronCore-v2",
    partitions=PARTITIONS,
    sbuf_bytes_per_partition=192 * KIB,
    psum_bytes_per_partition=16 * KIB,
    psum_banks=8,
    hbm_bytes=16 * GIB,  # derived: 32 GiB per chip [nki-arch-trn1, chip-trn1] / 2 cores
    dma_queues=16,
    max_free_dims=4,
    matmul_max_k=128,
    matmul_max_stationary_free=128,
    matmul_max_moving_free=512,
    clock_ghz=_clocks(tensor=2.8, vector=1.12, scalar=1.4, gpsimd=1.4),
    # 92 TFLOPS bf16/fp16/tf32 [nki-arch-trn1] (derived exactly: 128 x 128 x 2 x 2.8 GHz = 91.75); cFP8 at the
    # same rate; fp32 at 1/4 (published: 23).
    tensor_peak_tflops={"bf16": 91.75, "fp8": 91.75, "fp32": 91.75 / 4},
    hbm_bandwidth_gbps=410.0,  # derived: 820 GB/s per chip [nki-arch-trn1] / 2 cores
    dma_bytes_per_ns=17.0,  # 17 B/ns per engine (272 GB/s per core) [nki-dma-bw]
    matmul_transpose_bit_exact=False,
    # trn1.32xlarge: 16 chips of 2 cores; NeuronLink-v2 384 GB/s per chip; EFA 800 Gbps = 100 GB/s per instance
    # [inst-trn1, chip-trn1]
    cores_per_chip=2,
    chips_per_instance=16,
    neuronlink_chip_gbps=384.0,
    efa_instance_gbps=100.0,
)

TRN2 = Target(
    name="trn2",
    core_version="NeuronCore-v3",
    partitions=PARTITIONS,
    sbuf_bytes_per_partition=224 * KIB,
    psum_bytes_per_partition=16 * KIB,
    psum_banks=8,
    hbm_bytes=12 * GIB,  # derived: 96 GiB per chip [chip-trn2, lnc] / 8 cores
    dma_queues=16,
    max_free_dims=4,
    matmul_max_k=128,
    matmul_max_stationary_free=128,
    matmul_max_moving_free=512,
    clock_ghz=_clocks(tensor=2.4, vector=0.96, scalar=1.2, gpsimd=1.2),
    # 79 TFLOPS bf16 dense [nki-arch-trn2] (derived exactly: 128 x 128 x 2 x 2.4 GHz = 78.64); fp8 158 in the
    # double-row mode; fp32 20 (1/4 rate).
    tensor_peak_tflops={"bf16": 78.64, "fp8": 157.29, "fp32": 78.64 / 4},
    hbm_bandwidth_gbps=362.5,  # derived: 2.9 TB/s per chip [chip-trn2] / 8 cores
    dma_bytes_per_ns=23.0,  # 23 B/ns per engine (368 GB/s per core) [nki-dma-bw]
    matmul_row_tile_sizes=(32, 64),
    matmul_transpose_fp32_factor=2,
    matmul_fp8_speedup=2,
    vector_16bit_copy_speedup=4,
    vector_16bit_speedup=2,
    dma_transpose_hbm_efficiency=0.9,
    dma_transpose_sbuf_efficiency=0.5,
    # trn2.48xlarge: 16 chips of 8 cores in a 4x4 torus [inst-trn2]; NeuronLink-v3 1.28 TB/s per chip
    # [chip-trn2]; EFAv3 3.2 Tbps = 400 GB/s per instance (assumed: the figure AWS gives for the instance, not
    # in the stored copy of [inst-trn2]'s table)
    cores_per_chip=8,
    chips_per_instance=16,
    neuronlink_chip_gbps=1280.0,
    efa_instance_gbps=400.0,
)

TRN3 = Target(
    name="trn3",
    core_version="NeuronCore-v4",
    partitions=PARTITIONS,
    sbuf_bytes_per_partition=256 * KIB,  # derived: 32 MiB [nki-arch-trn3] / 128 partitions
    psum_bytes_per_partition=16 * KIB,
    psum_banks=8,
    hbm_bytes=18 * GIB,  # derived: 144 GiB per chip [nki-arch-trn3, chip-trn3] / 8 cores
    dma_queues=16,
    max_free_dims=4,
    matmul_max_k=128,
    matmul_max_stationary_free=128,
    # The hardware allows moving free sizes up to 4096 (fp32 dst) across all 8 banks [nki-isa]; we keep one bank
    # per matmul until the lowering learns multi-bank accumulation.
    matmul_max_moving_free=512,
    clock_ghz=_clocks(tensor=2.4, vector=1.2, scalar=1.2, gpsimd=1.2),
    # 79 TFLOPS dense bf16, 315 MXFP8/MXFP4, 20 fp32 [nki-arch-trn3]
    tensor_peak_tflops={"bf16": 78.64, "fp8": 314.6, "fp32": 78.64 / 4},
    hbm_bandwidth_gbps=612.5,  # derived: 4.9 TB/s per chip [chip-trn3] / 8 cores
    dma_bytes_per_ns=33.0,  # 33 B/ns per engine (528 GB/s per core) [nki-dma-bw]
    matmul_row_tile_sizes=(32, 64),
    matmul_transpose_fp32_factor=2,
    matmul_fp8_speedup=2,
    vector_16bit_copy_speedup=4,
    vector_16bit_speedup=2,
    # DMA transposes: trn2's figures (assumed: [nki-arch-trn3] publishes none of its own)
    dma_transpose_hbm_efficiency=0.9,
    dma_transpose_sbuf_efficiency=0.5,
    scalar_16bit_speedup=2,
    matmul_bf16_psum_output=True,
    # a Trn3 Gen1 server: 16 chips of 8 cores [inst-trn3]; NeuronLink-v4 2.56 TB/s per chip [chip-trn3]; EFA
    # per instance as trn2's (assumed: no published figure)
    cores_per_chip=8,
    chips_per_instance=16,
    neuronlink_chip_gbps=2560.0,
    efa_instance_gbps=400.0,
)

TARGETS: dict[str, Target] = {t.name: t for t in (TRN1, TRN2, TRN3)}
DEFAULT_TARGET = "trn2"


def get_target(name: str) -> Target:
    """The target called `name`; a clear error names the known ones."""
    try:
        return TARGETS[name]
    except KeyError:
        known = ", ".join(TARGETS)
        raise ValueError(f"unknown target '{name}' (known targets: {known})") from None


def allowed_partition_starts(partitions: int) -> tuple[int, ...]:
    """Start partitions the hardware allows for an access of `partitions` lanes [nki-arch-trn1].

    65-128 lanes start at 0; 33-64 at 0 or 64; 1-32 at 0, 32, 64 or 96.
    """
    if partitions > 64:
        return (0,)
    if partitions > 32:
        return (0, 64)
    return (0, 32, 64, 96)
