"""The simulated device's HBM as an allocator: where the data of device tensors lives, and how much of it is used.

Every block has an address in the target's HBM (`Target.hbm_bytes` of `runtime/hardware.py`, aligned to
`Target.hbm_alignment_bytes`) and holds its bytes in a NumPy array of exactly the requested size. Addresses are
handed out first fit from a free list that merges neighbouring holes when blocks are freed, so fragmentation is
modelled as on the device: a request larger than every hole fails even when the free bytes add up to more.

A block is freed explicitly (`DeviceMemory.free`) or when the last reference to it goes away, whichever comes
first, so the owner of a block (a tensor's storage) frees it by dying. The counters are exact: `allocated_bytes` is
the sum of the requested sizes of the live blocks, `reserved_bytes` the address space they occupy after alignment;
`peak_allocated_bytes` is the largest `allocated_bytes` since the last `reset_peak`. A request that does not fit
raises `DeviceOutOfMemoryError` naming the requested, free and largest contiguous free bytes.

This module stands alone on NumPy, as the rest of runtime/ does.
"""

from __future__ import annotations

import bisect
import sys
import threading
from typing import Any

import numpy as np

from neuron_mlir.runtime.hardware import Target


class DeviceOutOfMemoryError(MemoryError):
    """A request the device's HBM cannot hold: `requested`, `free` and `largest_free` are in bytes."""

    def __init__(self, requested: int, free: int, largest_free: int, capacity: int, target: str) -> None:
        self.requested = requested
        self.free = free
        self.largest_free = largest_free
        self.capacity = capacity
        super().__init__(
            f"out of device memory on the simulated {target} NeuronCore: tried to allocate {requested} bytes "
            f"({_human(requested)}) with {free} bytes ({_human(free)}) free of {capacity} ({_human(capacity)}); "
            f"the largest contiguous free range is {largest_free} bytes"
        )


class Block:
    """One allocation: `address` in HBM, `nbytes` requested, `data` its bytes (a uint8 array of `nbytes`)."""

    __slots__ = ("__weakref__", "_memory", "address", "data", "nbytes", "reserved")

    def __init__(self, address: int, nbytes: int, reserved: int, memory: DeviceMemory | None = None) -> None:
        self.address = address
        self.nbytes = nbytes
        self.reserved = reserved
        self.data = np.empty(nbytes, dtype=np.uint8)
        # the memory its range goes back to when it is freed or dies (None: freed, or not handed out yet)
        self._memory = memory

    @property
    def alive(self) -> bool:
        return self._memory is not None

    def _give_back(self) -> None:
        memory, self._memory = self._memory, None
        if memory is not None:
            memory._release(self.address, self.nbytes, self.reserved)

    # A method called as the object dies rather than a `weakref.finalize`, whose set-up costs more than the rest
    # of an allocation (every eager op on the device allocates its result). Not as the interpreter shuts down,
    # when the memory's counters no longer matter.
    def __del__(self, finalizing: Any = sys.is_finalizing) -> None:
        if not finalizing():
            self._give_back()

    def __repr__(self) -> str:
        return f"Block(address=0x{self.address:x}, nbytes={self.nbytes})"


class DeviceMemory:
    """The HBM of one simulated NeuronCore of `target`: allocation, freeing and the usage counters."""

    def __init__(self, target: Target, capacity: int | None = None) -> None:
        self.target = target
        self.capacity = target.hbm_bytes if capacity is None else capacity
        self.alignment = target.hbm_alignment_bytes
        # free ranges as two parallel sorted lists (starts, sizes): first fit walks them in address order
        self._free_starts: list[int] = [0]
        self._free_sizes: list[int] = [self.capacity]
        self._lock = threading.Lock()
        # Allocating inside the lock can run the garbage collector, and a block it collects gives its range back
        # from `__del__` on this same thread: waiting for the lock there would wait forever. Such ranges are kept
        # here and returned before the lock is let go, so the counters are exact whenever no one holds it.
        self._holder: int | None = None
        self._deferred: list[tuple[int, int, int]] = []
        self.allocated_bytes = 0
        self.reserved_bytes = 0
        self.peak_allocated_bytes = 0
        self.peak_reserved_bytes = 0
        self.allocations = 0
        self.frees = 0
        self.live_blocks = 0
        self.out_of_memory_errors = 0

    def allocate(self, nbytes: int) -> Block:
        """A new block of `nbytes` (its contents undefined), or DeviceOutOfMemoryError."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        # a zero-byte request still takes one aligned slot, so every live block has its own address
        reserved = max(self.alignment, -(-nbytes // self.alignment) * self.alignment)
        self._acquire()
        try:
            index = next((i for i, size in enumerate(self._free_sizes) if size >= reserved), None)
            if index is None:
                free = sum(self._free_sizes)
                largest = max(self._free_sizes, default=0)
                self.out_of_memory_errors += 1
                raise DeviceOutOfMemoryError(nbytes, free, largest, self.capacity, self.target.name)
            address = self._free_starts[index]
            if self._free_sizes[index] == reserved:
                del self._free_starts[index], self._free_sizes[index]
            else:
                self._free_starts[index] += reserved
                self._free_sizes[index] -= reserved
            self.allocated_bytes += nbytes
            self.reserved_bytes += reserved
            self.peak_allocated_bytes = max(self.peak_allocated_bytes, self.allocated_bytes)
            self.peak_reserved_bytes = max(self.peak_reserved_bytes, self.reserved_bytes)
            self.allocations += 1
            self.live_blocks += 1
        finally:
            self._let_go()
        try:
            block = Block(address, nbytes, reserved)
        except MemoryError:
            self._release(address, nbytes, reserved)
            raise
        block._memory = self
        return block

    def free(self, block: Block) -> None:
        """Give `block`'s range back now (freeing a block twice is an error)."""
        if block._memory is not self:
            raise ValueError(f"{block!r} is not allocated")
        block._give_back()

    def _acquire(self) -> None:
        self._lock.acquire()
        self._holder = threading.get_ident()

    def _let_go(self) -> None:
        """Return the ranges deferred while the lock was held (collecting may defer more meanwhile), then release."""
        try:
            while self._deferred:
                self._return_range(*self._deferred.pop())
        finally:
            self._holder = None
            self._lock.release()

    def _release(self, address: int, nbytes: int, reserved: int) -> None:
        if self._holder == threading.get_ident():  # a block collected while this thread is inside the lock
            self._deferred.append((address, nbytes, reserved))
            return
        self._acquire()
        try:
            self._return_range(address, nbytes, reserved)
        finally:
            self._let_go()

    def _return_range(self, address: int, nbytes: int, reserved: int) -> None:
        index = bisect.bisect_left(self._free_starts, address)
        starts, sizes = self._free_starts, self._free_sizes
        merges_previous = index > 0 and starts[index - 1] + sizes[index - 1] == address
        merges_next = index < len(starts) and address + reserved == starts[index]
        if merges_previous and merges_next:
            sizes[index - 1] += reserved + sizes[index]
            del starts[index], sizes[index]
        elif merges_previous:
            sizes[index - 1] += reserved
        elif merges_next:
            starts[index] = address
            sizes[index] += reserved
        else:
            starts.insert(index, address)
            sizes.insert(index, reserved)
        self.allocated_bytes -= nbytes
        self.reserved_bytes -= reserved
        self.frees += 1
        self.live_blocks -= 1

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.reserved_bytes

    def largest_free_range(self) -> int:
        self._acquire()
        try:
            return max(self._free_sizes, default=0)
        finally:
            self._let_go()

    def reset_peak(self) -> None:
        """Start measuring the peaks from the current usage."""
        self._acquire()
        try:
            self.peak_allocated_bytes = self.allocated_bytes
            self.peak_reserved_bytes = self.reserved_bytes
        finally:
            self._let_go()

    def stats(self) -> dict[str, int]:
        """The counters, named as torch names its allocator statistics (`torch.cuda.memory_stats`)."""
        self._acquire()
        try:
            return {
                "allocated_bytes.all.current": self.allocated_bytes,
                "allocated_bytes.all.peak": self.peak_allocated_bytes,
                "reserved_bytes.all.current": self.reserved_bytes,
                "reserved_bytes.all.peak": self.peak_reserved_bytes,
                "allocation.all.allocated": self.allocations,
                "allocation.all.freed": self.frees,
                "allocation.all.current": self.live_blocks,
                "num_ooms": self.out_of_memory_errors,
                "capacity_bytes": self.capacity,
            }
        finally:
            self._let_go()


def _human(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"
