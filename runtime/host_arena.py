"""Host memory that the simulators of a process share, one run at a time.

A simulator's memories hold nothing from one of its runs to the next: each run loads the constants and inputs,
fills again the bytes it reads before writing them (`runtime.refill`; all of them until that is known) and copies
its outputs out before it ends. So the memories of the simulators of different programs (a training step's
forward and backward graphs, the single-op programs of eager execution) need not be apart: they can be the same
host bytes, as long as no two runs use them at once. At real widths that is most of a simulator's resident size:
the HBM scratch, outputs and constants, SBUF and PSUM, and the lane shadows of batched loop nests
(`runtime.vectorize`), hundreds of MiB per graph, which a step of separate memories holds for every graph at once.

The arena is one large anonymous mapping (`_RESERVE_BYTES` of address space, of which only the pages some run
touches become resident, so the resident size is the largest machine's rather than the sum). A machine's arrays
are carved from its start in the order asked for, the lane shadows of batched nests from its end; a machine larger
than the mapping gets a new mapping of its own size or more, which later machines use (the older mapping stays
with the machines carved from it).

A run that uses arena memory holds the arena's claim from before its machine is made or its memory touched until
its outputs are copied out (`claim`, a lock taken without waiting). A run that finds the arena claimed (a run on
another thread, or one nested in a run on the same thread) uses a simulator of memories of its own instead, so
runs never wait for each other and cannot deadlock.
"""

from __future__ import annotations

import errno
import mmap
import resource
import threading

import numpy as np

# Address space reserved for the arena. Pages never touched cost nothing but page-table entries; where the
# process's address space is limited (RLIMIT_AS), a quarter of the limit at most.
_RESERVE_BYTES = 16 << 30
# Arrays start at page boundaries: a machine's arrays never share a page, and views are aligned for every dtype.
_ALIGN = mmap.PAGESIZE


def _reserve(minimum: int) -> int:
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    wanted = _RESERVE_BYTES if limit == resource.RLIM_INFINITY else min(_RESERVE_BYTES, limit // 4)
    return max(minimum, wanted)


class HostArena:
    """Memory for the machines and lane shadows of simulators whose runs never overlap (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mapping: np.ndarray | None = None
        self._carved = 0  # bytes from the mapping's start that machines use (the largest machine carved from it)
        self._slot = 0  # bytes of each worker's lane shadows at the mapping's end (`shadow_space`)

    def claim(self) -> bool:
        """Take the arena for one run, without waiting; False when another run holds it."""
        return self._lock.acquire(blocking=False)

    def release(self) -> None:
        """Give back the claim `claim` took."""
        self._lock.release()

    def carve(self, sizes: list[int], addresses: list[int] | None = None) -> list[np.ndarray]:
        """1-D uint8 arrays of `sizes` bytes, disjoint from one another, from the arena's current mapping (a new
        one when they do not fit); `addresses`, if given, gets each array's host address. The caller holds the
        claim; the arrays' contents are whatever the last run left there."""
        starts, total = [], 0
        for size in sizes:
            starts.append(total)
            total += -(-size // _ALIGN) * _ALIGN
        if self._mapping is None or self._mapping.size < total:
            try:
                self._mapping = _mapped(_reserve(total))
            except (MemoryError, OSError):  # the system refuses to promise that much address space (strict overcommit)
                self._mapping = _mapped(total)
            self._carved = self._slot = 0
        self._carved = max(self._carved, total)
        mapping = self._mapping
        if addresses is not None:
            base = mapping.__array_interface__["data"][0]
            addresses.extend(base + start for start in starts)
        return [mapping[start : start + size] for start, size in zip(starts, sizes, strict=True)]

    def shadow_space(self, worker: int, size: int) -> np.ndarray | None:
        """At least `size` bytes for the lane shadows of `worker` (`runtime.vectorize`), the same bytes for every
        simulator: worker w's slot ends w slots below the mapping's end, slots as large as the largest size asked.
        None when the slots would reach the machines' bytes. The caller holds the claim.

        A batch keeps the views it was built with after the slots grow: its workers' slots, disjoint from one
        another, keep lying above the machine it runs with, and only one batch runs at a time."""
        mapping = self._mapping
        slot = max(self._slot, -(-size // _ALIGN) * _ALIGN)
        if mapping is None or (worker + 1) * slot > mapping.size - self._carved:
            return None
        self._slot = slot
        end = mapping.size - worker * slot
        return mapping[end - slot : end]


def anonymous_mapping(size: int) -> mmap.mmap:
    """`size` bytes of private anonymous memory. A mapping the kernel refuses (ENOMEM: the address-space limit,
    strict overcommit) raises the MemoryError NumPy raises for an allocation that fails, so that callers see one
    kind of out-of-memory."""
    try:
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError as error:
        if error.errno != errno.ENOMEM:
            raise
        raise MemoryError(
            f"the simulated memories need {size} bytes of host memory, which the process cannot map"
        ) from error


def _mapped(size: int) -> np.ndarray:
    mapping = anonymous_mapping(size)
    # ordinary pages: a huge page would make a machine touching a few bytes of it resident for 2 MiB, and its
    # first touch may wait for the kernel to compact memory (`runtime.heap`, `small_pages`)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        mapping.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(mapping, np.uint8)


# The process's arena: every simulator run of `runtime.simulator` that can claim it uses it.
SHARED = HostArena()
