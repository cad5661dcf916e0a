"""The device memory allocator: addresses, exact counters, freeing by death, merging holes, out of memory; each
with the Python address space and the device's native one."""

import gc
import threading
from collections.abc import Callable
from typing import Any

import pytest

from neuron_mlir.runtime.device_memory import DeviceMemory, DeviceOutOfMemoryError, PythonAddressSpace
from neuron_mlir.runtime.hardware import Target, get_target

TRN2 = get_target("trn2")


def _native_space(capacity: int, alignment: int) -> Any:
    import torch  # noqa: F401  (registers the device, which loads its native library)

    from neuron_mlir.frontend.device import native

    space = native.address_space(capacity, alignment)
    assert space is not None, native.unavailable_reason()
    return space


@pytest.fixture(params=["python", "native"])
def make_memory(request: pytest.FixtureRequest) -> Callable[..., DeviceMemory]:
    space = PythonAddressSpace if request.param == "python" else _native_space

    def make(target: Target = TRN2, capacity: int | None = None) -> DeviceMemory:
        return DeviceMemory(target, capacity, space)

    return make


def test_default_capacity_is_the_targets_hbm(make_memory: Callable[..., DeviceMemory]):
    assert make_memory().capacity == TRN2.hbm_bytes
    assert make_memory(get_target("trn1")).capacity == get_target("trn1").hbm_bytes


def test_blocks_get_aligned_disjoint_addresses_and_exact_counts(make_memory: Callable[..., DeviceMemory]):
    memory = make_memory(capacity=1 << 20)
    a, b, c = memory.allocate(10), memory.allocate(100), memory.allocate(0)
    assert [a.address, b.address, c.address] == [0, 64, 192]
    assert a.data.nbytes == 10
    assert b.data.nbytes == 100
    assert memory.allocated_bytes == 110
    assert memory.reserved_bytes == 64 + 128 + 64
    assert memory.peak_allocated_bytes == 110
    memory.free(b)
    assert memory.allocated_bytes == 10
    assert memory.peak_allocated_bytes == 110
    memory.reset_peak()
    assert memory.peak_allocated_bytes == 10
    with pytest.raises(ValueError, match="not allocated"):
        memory.free(b)


def test_a_block_is_freed_when_its_last_reference_dies(make_memory: Callable[..., DeviceMemory]):
    memory = make_memory(capacity=1 << 20)
    block = memory.allocate(1000)
    assert memory.live_blocks == 1
    del block
    gc.collect()
    assert memory.allocated_bytes == 0
    assert memory.live_blocks == 0
    assert memory.stats()["allocation.all.freed"] == 1


def test_a_block_collected_while_allocating_gives_its_range_back():
    """Allocating inside the allocator's lock can run the garbage collector, which may free a block on the same
    thread: its range goes back once the allocation lets go of the lock (it waited for that lock forever before)."""
    space = PythonAddressSpace(1 << 20, TRN2.hbm_alignment_bytes)
    memory = DeviceMemory(TRN2, 1 << 20, lambda capacity, alignment: space)
    dying = [memory.allocate(1000)]
    second: list = []

    def free_inside_the_lock(phase: str, info: dict) -> None:
        if phase == "start" and dying and space._lock.locked():
            dying.clear()  # the block's last reference: it dies here, in the collection inside allocate

    def allocate_collecting() -> None:
        thresholds = gc.get_threshold()
        gc.set_threshold(1)  # every new container object of the allocator starts a collection
        try:
            second.append(memory.allocate(100))
        finally:
            gc.set_threshold(*thresholds)

    gc.callbacks.append(free_inside_the_lock)
    try:
        worker = threading.Thread(target=allocate_collecting, daemon=True)
        worker.start()
        worker.join(timeout=10)
    finally:
        gc.callbacks.remove(free_inside_the_lock)
    assert not dying, "no collection ran inside the allocator's lock: the test did not test it"
    assert not worker.is_alive(), "allocate waited for the lock its own thread held"
    assert memory.stats()["allocation.all.freed"] == 1
    assert memory.allocated_bytes == 100
    assert memory.free_bytes == (1 << 20) - 128  # the dead block's range is free again


def test_freed_neighbours_merge_into_one_hole(make_memory: Callable[..., DeviceMemory]):
    memory = make_memory(capacity=4 * 64)
    blocks = [memory.allocate(64) for _ in range(4)]
    for index in (0, 2, 1, 3):  # frees that merge on the left, the right and both sides
        memory.free(blocks[index])
    assert memory.largest_free_range() == 4 * 64
    assert memory.allocate(4 * 64).address == 0


def test_out_of_memory_names_requested_and_free_bytes(make_memory: Callable[..., DeviceMemory]):
    memory = make_memory(capacity=1024)
    kept = memory.allocate(512)
    with pytest.raises(DeviceOutOfMemoryError, match=r"tried to allocate 1000 bytes .* with 512 bytes .* free") as info:
        memory.allocate(1000)
    assert (info.value.requested, info.value.free) == (1000, 512)
    assert memory.stats()["num_ooms"] == 1
    assert memory.allocated_bytes == 512  # the failed request changed nothing
    del kept


def test_fragmentation_refuses_a_request_the_free_bytes_would_hold(make_memory: Callable[..., DeviceMemory]):
    memory = make_memory(capacity=4 * 64)
    blocks = [memory.allocate(64) for _ in range(4)]
    memory.free(blocks[0])
    memory.free(blocks[2])
    with pytest.raises(DeviceOutOfMemoryError, match="largest contiguous free range is 64 bytes"):
        memory.allocate(128)


def test_released_blocks_keep_their_bytes_and_leave_the_space(make_memory: Callable[..., DeviceMemory]):
    """A block given back by `free` keeps its array (views of it stay valid) but no longer counts, nor frees again
    when it dies; blocks of one memory are refused by another."""
    memory, other = make_memory(capacity=1 << 20), make_memory(capacity=1 << 20)
    block = memory.allocate(256)
    view = block.data[:16]
    view[:] = 7
    assert block.alive
    assert block.space is memory.space
    with pytest.raises(ValueError, match="not allocated"):
        other.free(block)
    memory.free(block)
    released: tuple[Any, Any] = (block.alive, block.space)
    assert released == (False, None)
    assert memory.stats()["allocation.all.freed"] == 1
    assert (view == 7).all()
    del block
    gc.collect()
    assert memory.stats()["allocation.all.freed"] == 1
    assert memory.space.free_ranges() == [(0, 1 << 20)]


def test_the_native_space_hands_out_what_the_python_one_does():
    """The same sequence of allocations and frees (interleaved, of many sizes) gives the same addresses, counters
    and free ranges in both spaces."""
    import random

    memories = [DeviceMemory(TRN2, 1 << 16, space) for space in (PythonAddressSpace, _native_space)]
    draws = random.Random(0)
    live: list[list[Any]] = [[], []]
    for _ in range(400):
        size, index = draws.randrange(0, 3000), draws.random()
        for memory, blocks in zip(memories, live, strict=True):
            if blocks and index < 0.45:
                memory.free(blocks.pop(int(index / 0.45 * len(blocks))))
            else:
                try:
                    blocks.append(memory.allocate(size))
                except DeviceOutOfMemoryError:
                    blocks.append(None)
            if blocks and blocks[-1] is None:
                blocks.pop()
        python, native = memories
        assert [b.address for b in live[0]] == [b.address for b in live[1]]
        assert python.stats() == native.stats()
        assert python.space.free_ranges() == native.space.free_ranges()
        assert python.peak_reserved_bytes == native.peak_reserved_bytes
