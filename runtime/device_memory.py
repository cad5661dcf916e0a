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

The ranges and counters live in an address space (`PythonAddressSpace` here); the `neuron` device passes its
native library's, which behaves the same and takes and gives back a block without running Python code. This module
stands alone on NumPy, as the rest of runtime/ does.
"""

from __future__ import annotations

import bisect
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

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

    __slots__ = ("__weakref__", "_space", "address", "data", "nbytes", "reserved")

    def __init__(self, address: int, nbytes: int, reserved: int, space: PythonAddressSpace | None = None) -> None:
        self.address = address
        self.nbytes = nbytes
        self.reserved = reserved
        self.data = np.empty(nbytes, dtype=np.uint8)
        # the space its range goes back to when it is released or dies (None: released, or not handed out yet)
        self._space = space

    @property
    def alive(self) -> bool:
        return self._space is not None

    @property
    def space(self) -> PythonAddressSpace | None:
        """The address space its range is taken from, None once given back."""
        return self._space

    def release(self) -> None:
        """Give the block's range back now (nothing when it is given back already)."""
        space, self._space = self._space, None
        if space is not None:
            space._release(self.address, self.nbytes, self.reserved)

    # A method called as the object dies rather than a `weakref.finalize`, whose set-up costs more than the rest
    # of an allocation (every eager op on the device allocates its result). Not as the interpreter shuts down,
    # when the counters no longer matter.
    def __del__(self, finalizing: Any = sys.is_finalizing) -> None:
        if not finalizing():
            self.release()

    def __repr__(self) -> str:
        return f"Block(address=0x{self.address:x}, nbytes={self.nbytes})"


class AddressSpace(Protocol):
    """The free ranges and counters of one HBM: what `DeviceMemory` hands blocks out of. `PythonAddressSpace` is
    one; the device's native library has another with the same behaviour (`DeviceMemory`'s `address_space`)."""

    capacity: int
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    allocations: int
    frees: int
    live_blocks: int

    def allocate(self, nbytes: int) -> Any:
        """A new block of `nbytes` (a non-negative count), or None when no free range holds it."""

    def largest_free(self) -> int: ...

    def reset_peak(self) -> None: ...

    def free_ranges(self) -> list[tuple[int, int]]:
        """(start, size) of every free range, in address order."""


class PythonAddressSpace:
    """First-fit address ranges of `capacity` bytes in multiples of `alignment`, in Python."""

    def __init__(self, capacity: int, alignment: int) -> None:
        self.capacity = capacity
        self.alignment = alignment
        # free ranges as two parallel sorted lists (starts, sizes): first fit walks them in address order
        self._free_starts: list[int] = [0] if capacity else []
        self._free_sizes: list[int] = [capacity] if capacity else []
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

    def allocate(self, nbytes: int) -> Block | None:
        # a zero-byte request still takes one aligned slot, so every live block has its own address
        reserved = max(self.alignment, -(-nbytes // self.alignment) * self.alignment)
        self._acquire()
        try:
            index = next((i for i, size in enumerate(self._free_sizes) if size >= reserved), None)
            if index is None:
                return None
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
        block._space = self
        return block

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

    def largest_free(self) -> int:
        self._acquire()
        try:
            return max(self._free_sizes, default=0)
        finally:
            self._let_go()

    def reset_peak(self) -> None:
        self._acquire()
        try:
            self.peak_allocated_bytes = self.allocated_bytes
            self.peak_reserved_bytes = self.reserved_bytes
        finally:
            self._let_go()

    def free_ranges(self) -> list[tuple[int, int]]:
        self._acquire()
        try:
            return list(zip(self._free_starts, self._free_sizes, strict=True))
        finally:
            self._let_go()


class DeviceMemory:
    """The HBM of one simulated NeuronCore of `target`: allocation, freeing and the usage counters.

    `address_space(capacity, alignment)` makes the ranges it hands blocks out of (`PythonAddressSpace` by
    default; the device passes its native library's, which allocates and frees without running Python code)."""

    def __init__(
        self,
        target: Target,
        capacity: int | None = None,
        address_space: Callable[[int, int], AddressSpace] | None = None,
    ) -> None:
        self.target = target
        self.capacity = target.hbm_bytes if capacity is None else capacity
        self.alignment = target.hbm_alignment_bytes
        self.space: AddressSpace = (address_space or PythonAddressSpace)(self.capacity, self.alignment)
        self.out_of_memory_errors = 0

    def allocate(self, nbytes: int) -> Any:
        """A new block of `nbytes` (its contents undefined), or DeviceOutOfMemoryError."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        block = self.space.allocate(nbytes)
        if block is None:
            self.out_of_memory_errors += 1
            space = self.space
            free = self.capacity - space.reserved_bytes
            raise DeviceOutOfMemoryError(nbytes, free, space.largest_free(), self.capacity, self.target.name)
        return block

    def free(self, block: Any) -> None:
        """Give `block`'s range back now (freeing a block twice is an error)."""
        if block.space is not self.space:
            raise ValueError(f"{block!r} is not allocated")
        block.release()

    # the counters, read from the address space
    @property
    def allocated_bytes(self) -> int:
        return self.space.allocated_bytes

    @property
    def reserved_bytes(self) -> int:
        return self.space.reserved_bytes

    @property
    def peak_allocated_bytes(self) -> int:
        return self.space.peak_allocated_bytes

    @property
    def peak_reserved_bytes(self) -> int:
        return self.space.peak_reserved_bytes

    @property
    def live_blocks(self) -> int:
        return self.space.live_blocks

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.space.reserved_bytes

    def largest_free_range(self) -> int:
        return self.space.largest_free()

    def reset_peak(self) -> None:
        """Start measuring the peaks from the current usage."""
        self.space.reset_peak()

    def stats(self) -> dict[str, int]:
        """The counters, named as torch names its allocator statistics (`torch.cuda.memory_stats`)."""
        space = self.space
        return {
            "allocated_bytes.all.current": space.allocated_bytes,
            "allocated_bytes.all.peak": space.peak_allocated_bytes,
            "reserved_bytes.all.current": space.reserved_bytes,
            "reserved_bytes.all.peak": space.peak_reserved_bytes,
            "allocation.all.allocated": space.allocations,
            "allocation.all.freed": space.frees,
            "allocation.all.current": space.live_blocks,
            "num_ooms": self.out_of_memory_errors,
            "capacity_bytes": self.capacity,
        }


def _human(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"
