"""What a simulated run measured: time, engine busy time, bytes, FLOPs, MFU, roofline, and a trace.

A `Profile` is built by the simulator at the end of a run. Definitions:

* `total_ns`: completion time of the last instruction (the run starts at 0).
* `busy_ns[queue]`: sum of the durations of the instructions issued to that queue (tensor, vector, scalar,
  gpsimd, sync, dma0..dma15). A DMA's duration includes its fixed latency.
* `flops`: 2*K*M*N summed over non-transpose `nc_matmul` instances (TensorE work only: the peak it is compared
  with is TensorE's).
* `compute_bound_ns`: sum over dtype families of FLOPs / the target's peak for that family (`peak_flops`);
  `hbm_bound_ns`: the least HBM traffic the computation needs, its entry's inputs and outputs each moved once
  (`io_bytes`; capped at the traffic the run made, for inputs it never reads), over the HBM bandwidth;
  `roofline_ns` is the larger. No schedule can beat it, and traffic the program adds (re-reads, spills)
  shows up as time above it rather than raising the bound. `hbm_bytes` is the traffic the run did make.
* `mfu`: `compute_bound_ns / total_ns`, which is FLOPs / (time * peak) when one dtype family is used.
* `location_ns`: busy time per source location (`Program.locations`), so time can be pinned on the user's lines.

`write_chrome_trace(path)` writes Chrome/Perfetto JSON: one track (tid) per queue with a `thread_name` metadata
event, and one complete ("X") event per instruction instance named after its opcode, whose args hold the
instruction id and source location.
"""

from __future__ import annotations

import dataclasses
import json
import os
from array import array
from dataclasses import dataclass, field
from typing import Any, TypeVar

from neuron_mlir.runtime.hardware import TARGETS

QUEUE_NAMES: tuple[str, ...] = (
    "tensor",
    "vector",
    "scalar",
    "gpsimd",
    "sync",
    *(f"dma{q}" for q in range(max(target.dma_queues for target in TARGETS.values()))),
    "collective",
)
_TRACK_LABELS = {
    "tensor": "TensorE",
    "vector": "VectorE",
    "scalar": "ScalarE",
    "gpsimd": "GpSimdE",
    "sync": "SyncE",
    "collective": "Collectives",
}


@dataclass
class InstructionStats:
    """Totals for one static instruction over all its issued instances."""

    id: int
    opcode: str
    queue: str
    location: str
    count: int = 0
    busy_ns: float = 0.0
    flops: int = 0


@dataclass
class TraceEvents:
    """Every issued instance, in issue order: queue index, start, end and static instruction index."""

    queue: array[int] = field(default_factory=lambda: array("b"))
    start: array[float] = field(default_factory=lambda: array("d"))
    end: array[float] = field(default_factory=lambda: array("d"))
    instruction: array[int] = field(default_factory=lambda: array("l"))

    def __len__(self) -> int:
        return len(self.start)


KERNEL_LOCATION_PREFIX = "nki "
"""How the location of an NKI kernel's instruction inlined into a compiled program names the kernel's torch op:
`kernel.py:42 (nki mylib::rms_norm)`."""


def kernel_of_location(location: str) -> str | None:
    """The torch op of the NKI kernel an instruction at `location` (a profile's location string) comes from."""
    start = location.rfind("(" + KERNEL_LOCATION_PREFIX)
    if start < 0 or not location.endswith(")"):
        return None
    return location[start + 1 + len(KERNEL_LOCATION_PREFIX) : -1]


_Number = TypeVar("_Number", int, float)


def _by_kernel(by_location: dict[str, _Number]) -> dict[str, _Number]:
    """A per-location table summed per NKI kernel (locations outside kernels are left out)."""
    totals: dict[str, _Number] = {}
    for location, amount in by_location.items():
        kernel = kernel_of_location(location)
        if kernel is not None:
            totals[kernel] = totals[kernel] + amount if kernel in totals else amount
    return totals


@dataclass
class Profile:
    target: str
    core_version: str
    total_ns: float
    busy_ns: dict[str, float]
    opcode_counts: dict[str, int]
    dma_bytes: int
    hbm_bytes: int
    flops: int
    flops_by_family: dict[str, int]
    peak_flops_by_family: dict[str, float]
    hbm_bandwidth_bytes_per_ns: float
    instructions: list[InstructionStats]
    events: TraceEvents
    location_ns: dict[str, float] = field(default_factory=dict)
    location_counts: dict[str, int] = field(default_factory=dict)
    io_bytes: int = 0  # bytes of the entry's inputs and outputs

    def copy(self) -> Profile:
        """A copy sharing nothing mutable with this profile."""
        events = self.events
        return dataclasses.replace(
            self,
            busy_ns=dict(self.busy_ns),
            opcode_counts=dict(self.opcode_counts),
            flops_by_family=dict(self.flops_by_family),
            peak_flops_by_family=dict(self.peak_flops_by_family),
            instructions=[
                InstructionStats(s.id, s.opcode, s.queue, s.location, s.count, s.busy_ns, s.flops)
                for s in self.instructions
            ],
            events=TraceEvents(events.queue[:], events.start[:], events.end[:], events.instruction[:]),
            location_ns=dict(self.location_ns),
            location_counts=dict(self.location_counts),
        )

    # ---- derived numbers -----------------------------------------------------------------------------------

    @property
    def total_us(self) -> float:
        return self.total_ns / 1e3

    @property
    def compute_bound_ns(self) -> float:
        return sum(flops / self.peak_flops_by_family[family] * 1e9 for family, flops in self.flops_by_family.items())

    @property
    def hbm_bound_ns(self) -> float:
        return min(self.io_bytes, self.hbm_bytes) / self.hbm_bandwidth_bytes_per_ns

    @property
    def roofline_ns(self) -> float:
        return max(self.compute_bound_ns, self.hbm_bound_ns)

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation of TensorE against the target's peak for the matmul dtypes used."""
        return self.compute_bound_ns / self.total_ns if self.total_ns > 0 else 0.0

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / (self.total_ns * 1e-9) if self.total_ns > 0 else 0.0

    def kernel_ns(self) -> dict[str, float]:
        """Busy time (summed over the engines and queues) of each NKI kernel inlined into the program, by its
        torch op's name, and the same for the instructions each ran (`kernel_counts`)."""
        return _by_kernel(self.location_ns)

    def kernel_counts(self) -> dict[str, int]:
        return _by_kernel(self.location_counts)

    @property
    def instruction_count(self) -> int:
        return sum(self.opcode_counts.values())

    def engine_busy_ns(self) -> dict[str, float]:
        """Busy time per engine: the compute engines and SyncE as their queues, `dma` summed over its queues."""
        busy: dict[str, float] = {}
        for queue, ns in self.busy_ns.items():
            engine = "dma" if queue.startswith("dma") else queue
            busy[engine] = busy.get(engine, 0.0) + ns
        return busy

    def utilisation(self, queue: str) -> float:
        return self.busy_ns.get(queue, 0.0) / self.total_ns if self.total_ns > 0 else 0.0

    def dma_active_ns(self) -> float:
        """Time during which at least one DMA queue was busy."""
        intervals = sorted(
            (s, e)
            for q, s, e in zip(self.events.queue, self.events.start, self.events.end, strict=True)
            if QUEUE_NAMES[q].startswith("dma")
        )
        covered, reach = 0.0, float("-inf")
        for start, end in intervals:
            if end <= reach:
                continue
            covered += end - max(start, reach)
            reach = end
        return covered

    # ---- reports -------------------------------------------------------------------------------------------

    def summary(self, top_locations: int = 10) -> str:
        """A readable table of the run."""
        lines = [f"simulated {self.target} ({self.core_version})"]
        total = self.total_ns
        lines.append(f"  total time        {_us(total):>12}")
        roofline = self.roofline_ns
        share = f"{roofline / total:6.1%} of roofline" if total > 0 else ""
        lines.append(
            f"  roofline bound    {_us(roofline):>12}   (compute {_us(self.compute_bound_ns)}, "
            f"HBM {_us(self.hbm_bound_ns)})  {share}"
        )
        if self.flops:
            families = ", ".join(
                f"{family} {self.peak_flops_by_family[family] / 1e12:.1f}" for family in sorted(self.flops_by_family)
            )
            lines.append(
                f"  matmul FLOPs      {self.flops / 1e9:>9.3f} G   achieved {self.achieved_flops_per_s / 1e12:.2f} "
                f"TFLOP/s   MFU {self.mfu:.1%}   (peak TFLOP/s: {families})"
            )
        hbm_rate = self.hbm_bytes / total if total > 0 else 0.0
        lines.append(
            f"  DMA bytes         {_bytes(self.dma_bytes):>12}   HBM bytes {_bytes(self.hbm_bytes)} "
            f"({hbm_rate:.1f} GB/s, {hbm_rate / self.hbm_bandwidth_bytes_per_ns:.1%} of HBM bandwidth)"
        )
        lines.append("")
        lines.append(f"  {'queue':<8} {'busy':>12} {'util':>7} {'instructions':>13}")
        counts: dict[str, int] = {}
        for stats in self.instructions:
            counts[stats.queue] = counts.get(stats.queue, 0) + stats.count
        for queue in QUEUE_NAMES:
            if queue in self.busy_ns or queue in ("tensor", "vector", "scalar", "gpsimd"):
                busy = self.busy_ns.get(queue, 0.0)
                lines.append(f"  {queue:<8} {_us(busy):>12} {self.utilisation(queue):>7.1%} {counts.get(queue, 0):>13}")
        if any(q.startswith("dma") for q in self.busy_ns):
            active = self.dma_active_ns()
            lines.append(f"  {'dma any':<8} {_us(active):>12} {active / total if total else 0:>7.1%}")
        lines.append("")
        lines.append(f"  {'opcode':<16} {'count':>10}")
        for opcode, count in sorted(self.opcode_counts.items(), key=lambda item: -item[1]):
            lines.append(f"  {opcode:<16} {count:>10}")
        kernels = self.kernel_ns()
        if kernels:
            counts_by_kernel = self.kernel_counts()
            lines.append("")
            lines.append(f"  {'busy':>12} {'count':>8}  NKI kernel")
            for kernel, busy in sorted(kernels.items(), key=lambda item: -item[1]):
                lines.append(f"  {_us(busy):>12} {counts_by_kernel.get(kernel, 0):>8}  {kernel}")
        if self.location_ns:
            lines.append("")
            lines.append(f"  {'busy':>12} {'count':>8}  source location")
            ranked = sorted(self.location_ns.items(), key=lambda item: -item[1])[:top_locations]
            for location, busy in ranked:
                lines.append(f"  {_us(busy):>12} {self.location_counts.get(location, 0):>8}  {location}")
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The trace as a Chrome/Perfetto JSON object (timestamps in microseconds)."""
        used = sorted(set(self.events.queue))
        events: list[dict[str, Any]] = [
            {
                "name": "process_name",
                "ph": "M",
                "pid": 0,
                "tid": 0,
                "args": {"name": f"NeuronCore ({self.target})"},
            }
        ]
        for queue in used:
            name = QUEUE_NAMES[queue]
            label = _TRACK_LABELS.get(name, f"DMA queue {name[3:]}")
            events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": queue, "args": {"name": label}})
            events.append(
                {
                    "name": "thread_sort_index",
                    "ph": "M",
                    "pid": 0,
                    "tid": queue,
                    "args": {"sort_index": queue},
                }
            )
        table = self.instructions
        for queue, start, end, index in zip(
            self.events.queue, self.events.start, self.events.end, self.events.instruction, strict=True
        ):
            stats = table[index]
            events.append(
                {
                    "name": stats.opcode,
                    "ph": "X",
                    "pid": 0,
                    "tid": queue,
                    "ts": start / 1e3,
                    "dur": (end - start) / 1e3,
                    "args": {"id": stats.id, "location": stats.location},
                }
            )
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def write_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.chrome_trace(), handle)


_EVENT_COLUMNS = (("queue", "b"), ("start", "d"), ("end", "d"), ("instruction", "l"))
_PROFILE_SCALARS: dict[str, type | tuple[type, ...]] = {
    "target": str,
    "core_version": str,
    "total_ns": (int, float),
    "dma_bytes": int,
    "hbm_bytes": int,
    "flops": int,
    "hbm_bandwidth_bytes_per_ns": (int, float),
    "io_bytes": int,
}
_PROFILE_TABLES: dict[str, type | tuple[type, ...]] = {
    "busy_ns": (int, float),
    "opcode_counts": int,
    "flops_by_family": int,
    "peak_flops_by_family": (int, float),
    "location_ns": (int, float),
    "location_counts": int,
}
_INSTRUCTION_FIELDS: tuple[type | tuple[type, ...], ...] = (int, str, str, str, int, (int, float), int)


def encode_profile(profile: Profile) -> bytes:
    """`profile` as bytes `decode_profile` reads back equal: the length of a JSON header (8 bytes, little-endian),
    the header (every field but the trace's columns), then the trace's four columns in machine byte order."""
    events = profile.events
    columns = [getattr(events, name) for name, _ in _EVENT_COLUMNS]
    header: dict[str, Any] = {name: getattr(profile, name) for name in (*_PROFILE_SCALARS, *_PROFILE_TABLES)}
    header["instructions"] = [dataclasses.astuple(stats) for stats in profile.instructions]
    header["events"] = len(events)
    text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return len(text).to_bytes(8, "little") + text + b"".join(column.tobytes() for column in columns)


def decode_profile(data: bytes) -> Profile:
    """The profile `encode_profile` wrote; `ValueError` for bytes that are not one (checked field by field, as
    a bundle is: the bytes come from another process)."""
    try:
        length = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"not a profile: {error}") from None
    if not isinstance(header, dict) or set(header) != {*_PROFILE_SCALARS, *_PROFILE_TABLES, "instructions", "events"}:
        raise ValueError("not a profile: unexpected header fields")
    for name, kind in _PROFILE_SCALARS.items():
        if not isinstance(header[name], kind) or isinstance(header[name], bool):
            raise ValueError(f"not a profile: field {name!r}")
    for name, kind in _PROFILE_TABLES.items():
        table = header[name]
        if not isinstance(table, dict) or not all(isinstance(value, kind) for value in table.values()):
            raise ValueError(f"not a profile: field {name!r}")
    instructions = header["instructions"]
    if not isinstance(instructions, list) or not all(
        isinstance(row, list)
        and len(row) == len(_INSTRUCTION_FIELDS)
        and all(isinstance(value, kind) for value, kind in zip(row, _INSTRUCTION_FIELDS, strict=True))
        for row in instructions
    ):
        raise ValueError("not a profile: field 'instructions'")
    count = header["events"]
    columns: dict[str, array[Any]] = {}
    offset = 8 + length
    for name, code in _EVENT_COLUMNS:
        column = array(code)
        size = column.itemsize * count if isinstance(count, int) and count >= 0 else -1
        if size < 0 or offset + size > len(data):
            raise ValueError("not a profile: its trace is cut short")
        column.frombytes(data[offset : offset + size])
        columns[name] = column
        offset += size
    if offset != len(data):
        raise ValueError("not a profile: bytes after its trace")
    return Profile(
        **{name: header[name] for name in (*_PROFILE_SCALARS, *_PROFILE_TABLES)},
        instructions=[InstructionStats(*row) for row in instructions],
        events=TraceEvents(**columns),
    )


def _us(ns: float) -> str:
    return f"{ns / 1e3:.3f} us"


def _bytes(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count} B"
