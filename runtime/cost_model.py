"""How long each instruction takes on a target: the published cost rules, computed from `runtime.hardware`.

Each rule is a published one or marked as assumed; `docs/hardware-sources.md` ("Compute cost rules", "DMA")
lists them with their sources, and defines the keys in square brackets below. Cycle counts are average
initiation intervals at the engine's own clock, so back-to-back instructions of one queue pipeline as the
published numbers describe. `N` is the number of free elements per partition an instruction streams (lanes are
partitions: fewer than 128 partitions cost the same [nki-arch-trn1, nki-perf]).

* TensorE `nc_matmul`: `max(N_moving, 64)` cycles, x4 when the inputs are fp32 [nki-arch-trn1, nki-perf], and
  /`matmul_fp8_speedup` when both are fp8 and contract a full 128-row tile (v3's double-row mode: 256 rows in the
  time of 128 [nki-arch-trn2]; none on v2, whose fp8 runs at the bf16 rate [nki-arch-trn1]). The
  stationary load runs in the background under the previous multiply [nki-arch-trn1], so it costs nothing.
  `is_transpose`: the same streaming cost, x`matmul_transpose_fp32_factor` for fp32 data (bit-exact transposes
  are 2x faster for fp32 from v3 on [nki-arch-trn2]). A matmul in a row tile (`row_tile_size`) costs the same
  cycles; what the row tiling mode changes is that matmuls in disjoint row tiles run at the same time [nki-isa],
  which is the timeline's to apply (`runtime/timeline.py`), not a duration.
* VectorE: about N cycles per streamed input (2N for two inputs), at least 64 [nki-arch-trn1, nki-isa-2.26]. On
  v3+ the hardware's performance modes divide that for all-16-bit operands: 4x for tensor_copy/tensor_scalar in
  SBUF with contiguous rows, 2x otherwise (tensor_tensor only for bf16 in SBUF) [nki-arch-trn2]. tensor_reduce of
  bf16 with add/max streams at N/2 [nki-isa-2.26].
  scalar_tensor_tensor has its own rule: 2N, or N when src and in1 are bf16, op0 is subtract, op1 multiply and N
  is even [nki-isa-2.26]. A tensor_scalar that also reduces into `accumulate_dst` (tensor_scalar_reduce) adds 64
  [nki-isa-2.26].
* ScalarE: `max(64, N)`, plus 64 when the activation also reduces into `accumulate_dst` [nki-isa-2.26]; v4 runs
  16-bit tensor_scalar/tensor_copy 2x [nki-arch-trn3].
* GpSimdE: `150 + N` (the iota/affine_select rule of [nki-isa-2.26], the only published GpSimd numbers); a
  `gpsimd_kernel` streams at `GPSIMD_KERNEL_CYCLES_PER_ELEMENT[kernel]` cycles per element instead of 1, and
  64-bit integer operands cost `gpsimd_int64_cycles_factor` times as much (both assumed).
* DMA: a fixed latency (`dma_fixed_latency_ns`: descriptors and semaphores; about 1300 ns published
  [nki-dma-bw], 2 us charged) then the bytes at up to `engines x dma_bytes_per_ns x efficiency`, with one engine
  per 8 partitions [nki-dma, nki-perf] and an efficiency that grows with the contiguous bytes per chunk: poor
  below 256 B, full at 4 KiB [nki-dma-bw].
  Concurrent transfers share the core's DMA engines and HBM bandwidth; the timeline arbitrates (see
  `timeline.py`), this module gives each transfer's demands.
* DMA transpose: the same fixed latency, then all the core's engines at 90% of a copy's rate from HBM, 50% from
  SBUF [nki-arch-trn2], times the part of the destination's [128 partitions, 16 elements] blocks it fills.

The timeline adds one dynamic rule: a compute instruction that reads what the previous instruction of its queue
wrote pays `dependent_op_penalty_cycles` (100 cycles when each instruction depends on the previous one
[nki-arch-trn1]).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neuron_mlir.runtime import collectives, dtypes
from neuron_mlir.runtime.hardware import GPSIMD_KERNEL_CYCLES_PER_ELEMENT, Engine, Memory, Target
from neuron_mlir.runtime.program import Access, BufferDecl, Instruction

_SIXTEEN_BIT = frozenset({"bf16", "f16"})


@dataclass(frozen=True)
class OperandShape:
    """What the cost rules need to know about one operand."""

    memory: Memory
    dtype: str
    partitions: int  # 0 in HBM
    free_shape: tuple[int, ...]
    steps: tuple[int, ...]  # element steps of the free dimensions, outermost first

    @property
    def free_count(self) -> int:
        return math.prod(self.free_shape)

    @property
    def itemsize(self) -> int:
        return dtypes.itemsize(self.dtype)

    @property
    def elements(self) -> int:
        return max(self.partitions, 1) * self.free_count

    def contiguous_bytes(self) -> int:
        """Bytes of the longest run of consecutive elements the pattern visits (within one partition)."""
        run = 1
        for step, num in zip(reversed(self.steps), reversed(self.free_shape), strict=True):
            if num == 1:
                continue
            if step != run:
                break
            run *= num
        return run * self.itemsize


def operand_shape(access: Access, buffer: BufferDecl) -> OperandShape:
    return OperandShape(
        buffer.memory,
        buffer.dtype,
        access.partitions,
        tuple(num for _, num in access.pattern),
        tuple(step for step, _ in access.pattern),
    )


@dataclass(frozen=True)
class DmaCost:
    """The demands of one DMA transfer; the simulator turns them into time under contention."""

    fixed_ns: float  # latency before data moves
    bytes: int  # bytes the DMA engines move (the larger side, when the dtype converts)
    hbm_bytes: int  # bytes read from plus written to HBM
    engines: int  # DMA engines the transfer spreads over (one per 8 partitions)
    chunk_bytes: int  # contiguous bytes per descriptor chunk (the smaller side's run)
    efficiency: float  # fraction of the engines' rate achieved with such chunks

    def engine_rate(self, target: Target) -> float:
        """Bytes/ns of DMA-engine time this transfer may occupy at most."""
        return self.engines * target.dma_bytes_per_ns

    def alone_ns(self, target: Target) -> float:
        """Duration with nothing else moving: latency + bytes at the best rate the engines and HBM allow."""
        rate = self.engine_rate(target) * self.efficiency
        if self.hbm_bytes:
            rate = min(rate, target.hbm_bandwidth_gbps * self.bytes / self.hbm_bytes)
        return self.fixed_ns + self.bytes / rate


def dma_efficiency(chunk_bytes: int, target: Target) -> float:
    """Payload efficiency by contiguous chunk size (assumed: a curve through the anchors of [nki-dma-bw]).

    Full rate from `dma_full_rate_bytes_per_partition` (4 KiB) up; from `dma_min_efficient_bytes_per_partition`
    (256 B, efficiency `dma_efficiency_at_min_bytes`) to 4 KiB linear in log2 of the size (2 KiB: 0.875); below
    256 B each chunk costs as much as a 256 B one (overhead-bound).
    """
    full, low, at_low = (
        target.dma_full_rate_bytes_per_partition,
        target.dma_min_efficient_bytes_per_partition,
        target.dma_efficiency_at_min_bytes,
    )
    if chunk_bytes >= full:
        return 1.0
    if chunk_bytes >= low:
        return at_low + (1.0 - at_low) * math.log2(chunk_bytes / low) / math.log2(full / low)
    return at_low * chunk_bytes / low


def indirect_dma_cost(ops: Mapping[str, OperandShape], attrs: Mapping[str, Any], target: Target) -> DmaCost:
    """An indirect (software-DGE) DMA: one descriptor per row, written by GpSimdE before the data moves.

    The indexed HBM side's pattern spans every row an offset may pick; only the chosen rows move: the SBUF side's
    bytes. The fixed part adds GpSimdE's startup and per-descriptor time to the DMA latency; chunks are rows,
    so short rows are overhead-bound [nki-dma-bw]. An accumulating scatter reads and writes each HBM row.
    """
    indexed = attrs["indirect"]
    table, other = ops[indexed], ops["dst" if indexed == "src" else "src"]
    rows = ops["offsets"].elements
    row_shape = OperandShape(table.memory, table.dtype, 0, table.free_shape[1:] or (1,), table.steps[1:] or (1,))
    moved = max(other.elements * other.itemsize, other.elements * table.itemsize)
    hbm = other.elements * table.itemsize * (2 if attrs.get("accumulate") else 1)
    chunk = min(row_shape.contiguous_bytes(), other.contiguous_bytes(), moved)
    engines = min(target.dma_queues, max(1, math.ceil(other.partitions / target.dma_partitions_per_engine)))
    descriptors_ns = (target.gpsimd_startup_cycles + rows * target.swdge_cycles_per_descriptor) / target.clock_ghz[
        Engine.GPSIMD
    ]
    return DmaCost(
        target.dma_fixed_latency_ns + descriptors_ns, moved, hbm, engines, chunk, dma_efficiency(chunk, target)
    )


def dma_cost(src: OperandShape, dst: OperandShape, target: Target) -> DmaCost:
    src_bytes, dst_bytes = src.elements * src.itemsize, dst.elements * dst.itemsize
    moved = max(src_bytes, dst_bytes)
    hbm = (src_bytes if src.memory is Memory.HBM else 0) + (dst_bytes if dst.memory is Memory.HBM else 0)
    chunk = min(src.contiguous_bytes(), dst.contiguous_bytes(), moved)
    on_chip = [side.partitions for side in (src, dst) if side.memory is not Memory.HBM]
    # HBM to HBM has no partitions: split it into full-rate chunks across engines (assumed).
    rows = max(on_chip) if on_chip else math.ceil(moved / target.dma_full_rate_bytes_per_partition)
    engines = min(target.dma_queues, max(1, math.ceil(rows / target.dma_partitions_per_engine)))
    return DmaCost(target.dma_fixed_latency_ns, moved, hbm, engines, chunk, dma_efficiency(chunk, target))


def dma_transpose_cost(src: OperandShape, dst: OperandShape, target: Target) -> DmaCost:
    """A DMA transpose: every engine of the core works on the destination's blocks of [128 partitions, 16
    elements] together, at `dma_transpose_hbm_efficiency` (from HBM) or `dma_transpose_sbuf_efficiency` (from
    SBUF) of a copy's rate [nki-arch-trn2], scaled by the part of each block the destination fills (assumed)."""
    moved = dst.elements * dst.itemsize
    hbm = moved if src.memory is Memory.HBM else 0
    rows, columns = dst.free_count, dst.partitions
    block_p, block_f = target.dma_transpose_block_partitions, target.dma_transpose_block_elements
    blocks = max(1, math.ceil(columns / block_p)) * block_p * max(1, math.ceil(rows / block_f)) * block_f
    filled = max(1, columns * rows) / blocks
    rate = target.dma_transpose_hbm_efficiency if src.memory is Memory.HBM else target.dma_transpose_sbuf_efficiency
    chunk = block_f * dst.itemsize
    return DmaCost(target.dma_fixed_latency_ns, moved, hbm, target.dma_queues, chunk, rate * filled)


def _all_16bit(shapes: list[OperandShape]) -> bool:
    return all(shape.dtype in _SIXTEEN_BIT for shape in shapes)


# Operand roles that stream a full tile through the engine (per-partition [P, 1] scalars do not).
_STREAMED_READS: dict[str, tuple[str, ...]] = {
    "activation": ("src",),
    "tensor_tensor": ("in0", "in1"),
    "tensor_scalar": ("src",),
    "scalar_tensor_tensor": ("src", "in1"),
    "tensor_reduce": ("src",),
    "tensor_copy": ("src",),
    "select": ("predicate", "on_true", "on_false"),
    "memset": (),
    "iota": (),
    "affine_select": ("on_true",),
    "gpsimd_kernel": ("in0",),
}


def _scalar_tensor_tensor_speedup(
    ops: Mapping[str, OperandShape], attrs: Mapping[str, Any], n: int, target: Target
) -> int:
    """scalar_tensor_tensor's own published rule: 2N, or N for a bf16 (x - s) * y over an even N. It has no
    other 16-bit performance mode [nki-isa-2.26]."""
    bf16 = ops["src"].dtype == "bf16" and ops["in1"].dtype == "bf16"
    if bf16 and n % 2 == 0 and attrs.get("op0") == "subtract" and attrs.get("op1") == "multiply":
        return target.vector_subtract_multiply_bf16_speedup
    return 1


def _fp8_full_tile(ops: Mapping[str, OperandShape], transpose: bool, target: Target) -> bool:
    """Whether a matmul runs at TensorE's fp8 rate: both operands fp8, a full contraction tile, not a transpose
    (the double-row mode pairs full tiles and cannot transpose [nki-arch-trn2])."""
    stationary, moving = ops["stationary"], ops["moving"]
    fp8 = dtypes.matmul_family(stationary.dtype) == "fp8" and dtypes.matmul_family(moving.dtype) == "fp8"
    return fp8 and not transpose and stationary.partitions == target.matmul_max_k


def compute_cycles(
    opcode: str, engine: Engine, ops: Mapping[str, OperandShape], attrs: Mapping[str, Any], target: Target
) -> float:
    """Engine cycles of one compute instruction (the rules in the module docstring)."""
    if opcode == "nc_matmul":
        moving = ops["moving"]
        cycles: float = max(moving.free_count, target.matmul_min_cycles)
        transpose = bool(attrs.get("is_transpose"))
        if moving.dtype == "f32":
            cycles *= target.matmul_transpose_fp32_factor if transpose else target.matmul_fp32_factor
        elif _fp8_full_tile(ops, transpose, target):
            cycles /= target.matmul_fp8_speedup
        return float(cycles)
    streamed = [ops[role] for role in _STREAMED_READS[opcode] if role in ops]
    n = max([shape.free_count for shape in streamed] + [ops["dst"].free_count])
    if engine is Engine.GPSIMD:
        per_element = GPSIMD_KERNEL_CYCLES_PER_ELEMENT[attrs["kernel"]] if opcode == "gpsimd_kernel" else 1
        if any(shape.dtype in ("i64", "u64") for shape in ops.values()):
            per_element *= target.gpsimd_int64_cycles_factor
        return float(target.gpsimd_startup_cycles + n * per_element)
    involved = [*streamed, ops["dst"]]
    if engine is Engine.SCALAR:
        speedup = 1
        if opcode in ("tensor_scalar", "tensor_copy") and _all_16bit(involved):
            speedup = target.scalar_16bit_speedup
        cycles = max(float(target.scalar_min_cycles), n / speedup)
        if opcode == "activation" and "accumulate_dst" in ops:
            cycles += target.scalar_accumulate_cycles
        return cycles
    # VectorE
    streams = n * max(1, len(streamed))
    if opcode == "scalar_tensor_tensor":
        return max(float(target.vector_min_cycles), streams / _scalar_tensor_tensor_speedup(ops, attrs, n, target))
    speedup = 1
    if _all_16bit(involved):
        in_sbuf = all(shape.memory is Memory.SBUF for shape in involved)
        contiguous = all(not shape.steps or shape.steps[-1] == 1 for shape in involved)
        if opcode in ("tensor_copy", "tensor_scalar") and in_sbuf and contiguous:
            speedup = target.vector_16bit_copy_speedup
        elif opcode == "tensor_tensor":
            if in_sbuf and all(shape.dtype == "bf16" for shape in streamed):
                speedup = target.vector_16bit_speedup
        else:
            speedup = target.vector_16bit_speedup
    if opcode == "tensor_reduce" and ops["src"].dtype == "bf16" and attrs.get("op") in ("add", "max"):
        speedup = max(speedup, target.vector_reduce_16bit_speedup)
    cycles = max(float(target.vector_min_cycles), streams / speedup)
    if "accumulate_dst" in ops:
        cycles += target.vector_accumulate_cycles
    return cycles


def compute_ns(
    opcode: str, engine: Engine, ops: Mapping[str, OperandShape], attrs: Mapping[str, Any], target: Target
) -> float:
    return compute_cycles(opcode, engine, ops, attrs, target) / target.clock_ghz[engine]


def instruction_cost(inst: Instruction, buffers: list[BufferDecl], target: Target) -> float | DmaCost:
    """The cost of one instruction: nanoseconds for a compute engine, a `DmaCost` for a DMA.

    Register-valued attributes do not change any cost, so the cost is a property of the static instruction.
    """
    ops = {role: operand_shape(access, buffers[access.buffer]) for role, access in inst.operands.items()}
    if inst.engine is Engine.COLLECTIVE:
        return collective_instruction_ns(inst.opcode, ops, inst.attrs, target)
    if inst.engine is Engine.DMA:
        if inst.attrs.get("indirect"):
            return indirect_dma_cost(ops, inst.attrs, target)
        if inst.opcode == "dma_transpose":
            return dma_transpose_cost(ops["src"], ops["dst"], target)
        return dma_cost(ops["src"], ops["dst"], target)
    return compute_ns(inst.opcode, inst.engine, ops, inst.attrs, target)


def collective_instruction_ns(
    opcode: str, ops: Mapping[str, OperandShape], attrs: Mapping[str, Any], target: Target
) -> float:
    """A collective's time on its queue (`runtime.collectives.collective_cost`): the message is the all_reduce's
    tensor, the all_gather's gathered result, the reduce_scatter's and all_to_all's input. An uneven all_to_all is
    priced by the blocks it sends and receives (`uneven_all_to_all_cost`): an even one of the same input would
    hide a block much larger than the others, which every rank then waits for."""
    groups = attrs["replica_groups"]
    sent, received = attrs.get("input_splits") or (), attrs.get("output_splits") or ()
    if opcode == "all_to_all" and (sent or received):
        itemsize = ops["src"].itemsize
        return collectives.uneven_all_to_all_cost(
            [count * itemsize for count in sent], [count * itemsize for count in received], groups[0], target
        ).ns
    message = ops["dst"] if opcode == "all_gather" else ops["src"]
    return collectives.collective_ns(opcode, message.elements * message.itemsize, groups[0], target)


def matmul_flops(inst: Instruction) -> int:
    """2*K*M*N for a multiply, 0 for a transpose (it moves data, the PE array does no useful math)."""
    if inst.opcode != "nc_matmul" or inst.attrs.get("is_transpose"):
        return 0
    stationary, moving = inst.operands["stationary"], inst.operands["moving"]
    k = stationary.partitions
    m = math.prod(num for _, num in stationary.pattern)
    n = math.prod(num for _, num in moving.pattern)
    return 2 * k * m * n
