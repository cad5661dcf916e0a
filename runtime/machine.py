"""The state of one simulated NeuronCore: HBM, SBUF and PSUM as NumPy byte arrays.

SBUF is `partitions x sbuf_bytes_per_partition` bytes and PSUM `partitions x psum_bytes_per_partition` (8 banks
of 2 KiB per partition), both two-dimensional as in hardware: a buffer at `address` occupies the same byte
range of every partition it covers. HBM is flat. Every access lies inside a buffer of the memory plan (the
validator proves it), so the machine holds host memory only for the byte ranges the plan's buffers cover,
merged where buffers overlap: a buffer at a high address costs nothing below it, and an enlarged memory (the
`memory_sizes_override` of programs not yet placed within capacity) costs only what is used. Buffers that
share bytes share host memory, as they share the hardware's.

Fresh memory is filled with 0xFF bytes: every float type reads it as NaN and integers as -1, so a read of
memory nobody wrote shows in the results.

Buffers named `releasable` (HBM buffers sharing no byte with another, whose contents every run writes before
use: inputs bound in place, `runtime.bound_inputs`) get host memory of their own, mapped so that `release` can give
its pages back to the system between runs; a released buffer reads as zeros until written again.

Accesses become strided NumPy views of the byte arrays (no per-element Python work); a write through a view
lands in the simulated memory. Views do no bounds checking of their own beyond NumPy's buffer check: the
validator (`runtime.validate`) proves every access in bounds before a program runs.
"""

from __future__ import annotations

import bisect
import math
import mmap
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from neuron_mlir.runtime import dtypes
from neuron_mlir.runtime.hardware import Memory
from neuron_mlir.runtime.host_arena import HostArena, anonymous_mapping
from neuron_mlir.runtime.program import Access, BufferDecl, TensorBinding, row_major_strides
from neuron_mlir.runtime.validate import MemorySizes

FILL_BYTE = 0xFF
# Releasable buffers smaller than this keep their bytes in the ordinary arrays: giving back a few pages gains
# nothing.
_MAPPED_BYTES = 1 << 20

# Memory ids of footprints (race checking, dependency tracking), whose byte coordinates are the hardware's
# addresses: within a partition row on chip, absolute in HBM.
SBUF_ID = 0
PSUM_ID = 1
HBM_ID = 2
MEMORY_IDS = {Memory.SBUF: SBUF_ID, Memory.PSUM: PSUM_ID, Memory.HBM: HBM_ID}
MEMORY_NAMES = ("SBUF", "PSUM", "HBM")


@dataclass(frozen=True)
class Home:
    """Where a buffer lives: its host byte array, where its element 0 is in it, and its hardware address."""

    memory: Memory
    memory_id: int
    array: np.ndarray  # 1-D uint8: one merged range (on chip: partitions x range length, row-major)
    base: int  # byte offset in `array` of the buffer's element 0 (of partition 0 on chip)
    partition_stride: int  # bytes between partitions in `array`; 0 in HBM
    address: int  # the buffer's address: bytes within a partition row on chip, absolute in HBM
    dtype: np.dtype


class Machine:
    """HBM, SBUF and PSUM for one run of a program's memory plan."""

    def __init__(
        self,
        buffers: list[BufferDecl],
        sizes: MemorySizes,
        releasable: Collection[int] = (),
        arena: HostArena | None = None,
    ) -> None:
        self.sizes = sizes
        self.ranges: dict[Memory, list[tuple[int, int]]] = {}  # merged [start, end) byte ranges per memory
        self.arrays: dict[Memory, list[np.ndarray]] = {}
        # the mappings of releasable buffers' ranges, by their [start, end) in HBM
        self._mappings: dict[tuple[int, int], mmap.mmap] = {}
        mapped = {
            (buffers[index].address, buffers[index].address + _row_bytes(buffers[index]))
            for index in releasable
            if buffers[index].memory is Memory.HBM and _row_bytes(buffers[index]) >= _MAPPED_BYTES
        }
        for memory in Memory:
            self.ranges[memory] = _merged(b for b in buffers if b.memory is memory)
        # The other ranges' host arrays: the arena's memory (the caller holds its claim), or arrays of their own.
        wanted = [
            (memory, position, (1 if memory is Memory.HBM else sizes.partitions) * (end - start))
            for memory in Memory
            for position, (start, end) in enumerate(self.ranges[memory])
            if memory is not Memory.HBM or (start, end) not in mapped
        ]
        shared: dict[tuple[Memory, int], np.ndarray] = {}
        # the host addresses of arrays whose addresses are known without asking NumPy: (array, address)
        self.known_addresses: list[tuple[np.ndarray, int]] = []
        if arena is not None:
            addresses: list[int] = []
            carved = arena.carve([size for _, _, size in wanted], addresses)
            shared = {(memory, position): array for (memory, position, _), array in zip(wanted, carved, strict=True)}
            self.known_addresses = list(zip(carved, addresses, strict=True))
        for memory in Memory:
            arrays = []
            for position, (start, end) in enumerate(self.ranges[memory]):
                array = shared.get((memory, position))
                if memory is Memory.HBM and (start, end) in mapped:
                    array = self._mapped(start, end)
                elif array is None:
                    rows = 1 if memory is Memory.HBM else sizes.partitions
                    array = np.full(rows * (end - start), FILL_BYTE, np.uint8)
                else:
                    array.fill(FILL_BYTE)
                arrays.append(array)
            self.arrays[memory] = arrays
        self.homes: list[Home] = [self._home(buffer) for buffer in buffers]
        self._clear_key: tuple[tuple[Memory, int, int], ...] | None = None
        self._bytes_held: int | None = None
        self._clear_views: list[np.ndarray] = []

    def _mapped(self, start: int, end: int) -> np.ndarray:
        mapping = anonymous_mapping(end - start)
        self._mappings[(start, end)] = mapping
        array = np.frombuffer(mapping, np.uint8)
        array.fill(FILL_BYTE)
        return array

    def release(self, buffer: int) -> None:
        """Give the host pages of a releasable buffer back to the system (a no-op for other buffers): its bytes
        read as zeros until written again. For a buffer every run writes before use (an input), between runs."""
        home = self.homes[buffer]
        mapping = self._mappings.get((home.address, home.address + home.array.size))
        if mapping is not None and home.base == 0:
            mapping.madvise(mmap.MADV_DONTNEED)

    def _home(self, buffer: BufferDecl) -> Home:
        dtype = dtypes.numpy_dtype(buffer.dtype)
        ranges = self.ranges[buffer.memory]
        index = bisect.bisect_right(ranges, (buffer.address, math.inf)) - 1
        if index >= 0:
            start, end = ranges[index]
            if start <= buffer.address < end:
                stride = 0 if buffer.memory is Memory.HBM else end - start
                array = self.arrays[buffer.memory][index]
                return Home(
                    buffer.memory,
                    MEMORY_IDS[buffer.memory],
                    array,
                    buffer.address - start,
                    stride,
                    buffer.address,
                    dtype,
                )
        raise AssertionError(f"buffer '{buffer.name}' has no placed range")

    def clear(self, overwritten: Sequence[tuple[Memory, int, int]] = ()) -> None:
        """Every byte back to `FILL_BYTE`, as a fresh machine has them (for the next run of the same plan),
        except the [start, end) address ranges of `overwritten` (HBM: bytes the caller rewrites before any use)."""
        key = tuple(overwritten)
        if self._clear_key != key:
            self._clear_views = self._views_to_clear(key)
            self._clear_key = key
        for view in self._clear_views:
            view.fill(FILL_BYTE)

    def _views_to_clear(self, overwritten: Sequence[tuple[Memory, int, int]]) -> list[np.ndarray]:
        """The parts of the host arrays `clear` fills (worked out once per `overwritten`: runs repeat it)."""
        views = []
        for memory, arrays in self.arrays.items():
            skip = sorted((start, end) for m, start, end in overwritten if m is memory and memory is Memory.HBM)
            for (range_start, range_end), array in zip(self.ranges[memory], arrays, strict=True):
                position = range_start
                for start, end in skip:
                    start, end = max(start, range_start), min(end, range_end)
                    if start >= end:
                        continue
                    if start > position:
                        views.append(array[position - range_start : start - range_start])
                    position = max(position, end)
                if position == range_start:
                    views.append(array)
                elif position < range_end:
                    views.append(array[position - range_start :])
        return views

    @property
    def bytes_held(self) -> int:
        """Host bytes the simulated memories occupy."""
        if self._bytes_held is None:  # the arrays never change size
            self._bytes_held = sum(array.size for arrays in self.arrays.values() for array in arrays)
        return self._bytes_held

    def view(self, buffer: int, access: Access, dynamic_offset: int = 0) -> np.ndarray:
        """The elements `access` covers, as a writable strided view of shape `access.shape`."""
        home = self.homes[buffer]
        itemsize = home.dtype.itemsize
        start = home.base + (access.offset + dynamic_offset) * itemsize
        shape = [num for _, num in access.pattern]
        strides = [step * itemsize for step, _ in access.pattern]
        if home.memory is not Memory.HBM:
            start += access.partition_start * home.partition_stride
            shape.insert(0, access.partitions)
            strides.insert(0, home.partition_stride)
        return np.ndarray(tuple(shape), home.dtype, buffer=home.array, offset=start, strides=tuple(strides))

    def buffer_view(self, buffer: int, shape: tuple[int, ...]) -> np.ndarray:
        """A whole buffer as an array of its declared shape (row-major; on chip: [partitions, free...])."""
        home = self.homes[buffer]
        itemsize = home.dtype.itemsize
        strides = [itemsize * stride for stride in row_major_strides(shape)]
        if home.memory is not Memory.HBM and shape:
            strides[0] = home.partition_stride
        return np.ndarray(shape, home.dtype, buffer=home.array, offset=home.base, strides=tuple(strides))

    def binding_view(self, binding: TensorBinding) -> np.ndarray:
        """An entry tensor as a strided view of its HBM buffer."""
        home = self.homes[binding.buffer]
        itemsize = home.dtype.itemsize
        if 0 in binding.shape:
            return np.zeros(binding.shape, home.dtype)
        return np.ndarray(
            binding.shape,
            home.dtype,
            buffer=home.array,
            offset=home.base + binding.offset * itemsize,
            strides=tuple(s * itemsize for s in binding.strides),
        )


def _merged(buffers: Iterable[BufferDecl]) -> list[tuple[int, int]]:
    """The [start, end) byte ranges the buffers cover, overlapping ones merged, in address order."""
    ranges: list[tuple[int, int]] = []
    for start, end in sorted((b.address, b.address + _row_bytes(b)) for b in buffers):
        if ranges and start < ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], end))
        else:
            ranges.append((start, end))
    return ranges


def _row_bytes(buffer: BufferDecl) -> int:
    """Bytes of one partition row (on chip) or of the whole buffer (HBM)."""
    return buffer.elements_per_row * dtypes.itemsize(buffer.dtype)
