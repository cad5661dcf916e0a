"""The state of one simulated NeuronCore: HBM, SBUF and PSUM as NumPy byte arrays.

SBUF is `partitions x sbuf_bytes_per_partition` bytes and PSUM `partitions x psum_bytes_per_partition` (8 banks
of 2 KiB per partition), both two-dimensional as in hardware: a buffer at `address` occupies the same byte range
of every partition it covers. HBM is flat; the machine holds only the byte ranges the memory plan uses (the
buffers' extents, merged where they overlap), so a buffer at a high address costs no host memory below it.

Fresh memory is filled with 0xFF bytes: every float type reads it as NaN and integers as -1, so a read of
memory nobody wrote shows in the results.

Accesses become strided NumPy views of the byte arrays (no per-element Python work); a write through a view
lands in the simulated memory. Views do no bounds checking of their own beyond NumPy's buffer check: the
validator (`runtime.validate`) proves every access in bounds before a program runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuron_mlir.runtime import dtypes
from neuron_mlir.runtime.hardware import Memory
from neuron_mlir.runtime.program import Access, BufferDecl, TensorBinding
from neuron_mlir.runtime.validate import MemorySizes

FILL_BYTE = 0xFF

# Memory ids for footprints: SBUF, PSUM, then one per merged HBM range.
SBUF_ID = 0
PSUM_ID = 1


@dataclass(frozen=True)
class Home:
    """Where a buffer lives: a flat byte array, the buffer's first byte in it, and the partition stride."""

    memory: Memory
    memory_id: int
    array: np.ndarray  # 1-D uint8
    base: int  # byte offset of the buffer's element 0 (of partition 0 on chip)
    partition_stride: int  # bytes between partitions; 0 in HBM
    dtype: np.dtype


class Machine:
    """HBM, SBUF and PSUM for one run of a program's memory plan."""

    def __init__(self, buffers: list[BufferDecl], sizes: MemorySizes) -> None:
        self.sizes = sizes
        self.sbuf = np.full((sizes.partitions, sizes.sbuf_bytes_per_partition), FILL_BYTE, np.uint8)
        self.psum = np.full((sizes.partitions, sizes.psum_bytes_per_partition), FILL_BYTE, np.uint8)
        self.hbm_ranges: list[tuple[int, int]] = []  # merged [start, end) byte ranges
        self.hbm_arrays: list[np.ndarray] = []
        self._place_hbm(buffers)
        self.homes: list[Home] = [self._home(buffer) for buffer in buffers]

    def _place_hbm(self, buffers: list[BufferDecl]) -> None:
        extents = sorted(
            (b.address, b.address + b.elements_per_row * dtypes.itemsize(b.dtype))
            for b in buffers
            if b.memory is Memory.HBM
        )
        for start, end in extents:
            if self.hbm_ranges and start < self.hbm_ranges[-1][1]:
                last_start, last_end = self.hbm_ranges[-1]
                self.hbm_ranges[-1] = (last_start, max(last_end, end))
            else:
                self.hbm_ranges.append((start, end))
        self.hbm_arrays = [np.full(end - start, FILL_BYTE, np.uint8) for start, end in self.hbm_ranges]

    def _home(self, buffer: BufferDecl) -> Home:
        dtype = dtypes.numpy_dtype(buffer.dtype)
        if buffer.memory is Memory.SBUF:
            return Home(
                buffer.memory, SBUF_ID, self.sbuf.reshape(-1), buffer.address, self.sbuf.shape[1], dtype
            )
        if buffer.memory is Memory.PSUM:
            return Home(
                buffer.memory, PSUM_ID, self.psum.reshape(-1), buffer.address, self.psum.shape[1], dtype
            )
        for index, (start, end) in enumerate(self.hbm_ranges):
            if start <= buffer.address < end:
                return Home(
                    buffer.memory, 2 + index, self.hbm_arrays[index], buffer.address - start, 0, dtype
                )
        raise AssertionError(f"HBM buffer '{buffer.name}' has no placed range")

    @property
    def hbm_bytes_held(self) -> int:
        return sum(array.size for array in self.hbm_arrays)

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
        strides = []
        step = itemsize
        for extent in reversed(shape):
            strides.append(step)
            step *= extent
        strides.reverse()
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
