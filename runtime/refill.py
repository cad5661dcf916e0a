"""Which bytes of the simulated memories a run reads before it writes them: all a later run must fill again.

Fresh memory reads as `machine.FILL_BYTE` (NaN, -1), and every run must see that wherever it reads memory it has
not written yet. Registers never depend on data, so every run of a program makes the same accesses in the same
order; the bytes one run read before writing them (inputs and constants count as written by loading; the outputs
are read at the end) are the only ones a later run needs set back to the fill byte, since it overwrites all the
others before reading them. `bytes_read_first` finds them from one run's accesses.

The answer may be too large, never too small: an access counts as all the bytes of its view, and a write that may
leave bytes of its view unwritten (matmul accumulation reads its destination; a scatter writes only the rows its
offsets choose) counts as a read and not as a write. Bytes are tracked one by one in masks shaped like the memory
arrays, visited through views of the accesses' own layout (a word per element where alignment allows), and two
kinds of access are skipped because they cannot change the answer: any access inside a range loading overwrites
completely, and reads of bytes no access of the run ever writes.

The analysis costs about as much as the accesses it visits, once; filling all memory costs its size, every run.
`worth_analysing` says which is cheaper for a program: when filling everything (as a fresh machine would have it)
costs a later run no more than a few percent of its own data work, later runs do that instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from neuron_mlir.runtime import isa

# More separate byte ranges than this to fill in one memory array, and their hull is filled instead.
MAX_RUNS = 256

Access = tuple[str, Mapping[str, np.ndarray], Mapping[str, Any]]  # (opcode, operand views, attributes)

_WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_ONES = {size: np.array(int.from_bytes(b"\x01" * size, "little"), dtype) for size, dtype in _WORDS.items()}


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class _Masks:
    """Per memory array, which bytes are written so far and which were read before being written."""

    def __init__(self, arrays: Sequence[np.ndarray]) -> None:
        self.arrays = list(arrays)
        order = sorted(range(len(self.arrays)), key=lambda i: _address(self.arrays[i]))
        self.order = order
        self.starts = [_address(self.arrays[i]) for i in order]
        self.written: dict[int, np.ndarray] = {}
        self.needed: dict[int, np.ndarray] = {}

    def locate(self, view: np.ndarray) -> tuple[int, int, int] | None:
        """(array index, byte offset of the view's element 0, byte hull [lo, hi) end) or None (not simulated)."""
        if view.size == 0:
            return None
        address = _address(view)
        position = bisect.bisect_right(self.starts, address) - 1
        if position < 0:
            return None
        index = self.order[position]
        offset = address - self.starts[position]
        if offset >= self.arrays[index].size:
            return None
        return index, offset, view.itemsize

    @staticmethod
    def hull(view: np.ndarray, offset: int) -> tuple[int, int]:
        low = offset + sum(min(0, s * (n - 1)) for s, n in zip(view.strides, view.shape, strict=True))
        high = offset + sum(max(0, s * (n - 1)) for s, n in zip(view.strides, view.shape, strict=True))
        return low, high + view.itemsize

    @staticmethod
    def layout(mask: np.ndarray, view: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
        """The bytes of `view` as the same view of `mask`: a word per element when aligned, else an extra byte
        axis; and the value whose bytes are all 1 in that layout."""
        size = view.itemsize
        if size in _WORDS and offset % size == 0 and all(s % size == 0 for s in view.strides):
            dtype = _WORDS[size]
            return np.ndarray(view.shape, dtype, buffer=mask, offset=offset, strides=view.strides), _ONES[size]
        return (
            np.ndarray((*view.shape, size), np.uint8, buffer=mask, offset=offset, strides=(*view.strides, 1)),
            _ONES[1],
        )

    def mask(self, masks: dict[int, np.ndarray], index: int) -> np.ndarray:
        found = masks.get(index)
        if found is None:
            found = masks[index] = np.zeros(self.arrays[index].size, np.uint8)
        return found

    def write(self, index: int, view: np.ndarray, offset: int) -> None:
        target, ones = self.layout(self.mask(self.written, index), view, offset)
        target[...] = ones

    def read(self, index: int, view: np.ndarray, offset: int) -> None:
        written, ones = self.layout(self.mask(self.written, index), view, offset)
        needed, _ = self.layout(self.mask(self.needed, index), view, offset)
        # each byte of `written` is 0 or 1, so ones - written is 1 exactly where a byte is unwritten (no borrow)
        np.bitwise_or(needed, np.subtract(ones, written), out=needed)


def _roles(opcode: str, attrs: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(roles written completely, roles that may be read) of an access; unknown opcodes write 'dst'."""
    spec = isa.OPCODES.get(opcode)
    writes = set(spec.writes + spec.optional_writes) if spec is not None else {"dst"}
    partial: set[str] = set()
    if opcode == "nc_matmul" and np.any(attrs.get("accumulate", False)):
        partial.add("dst")  # accumulation reads the destination
    if opcode == "dma_copy" and attrs.get("indirect") == "dst":
        partial.add("dst")  # a scatter writes only the rows its offsets choose
    return writes - partial, partial


# Rough costs on a CPU core, for choosing between the two: a step of data work (a NumPy call), a byte an access
# covers, a byte filled. Filling everything is chosen when it costs at most FILL_SHARE of a run's data work.
STEP_NS = 3000.0
ACCESS_NS_PER_BYTE = 0.3
FILL_NS_PER_BYTE = 0.1
FILL_SHARE = 0.05


def worth_analysing(accesses: Sequence[Access], steps: int, memory_bytes: int) -> bool:
    """Is `bytes_read_first` worth its cost, against filling `memory_bytes` on every later run of a tape of
    `steps` steps making `accesses`?"""
    budget = FILL_SHARE * STEP_NS * steps
    fill = FILL_NS_PER_BYTE * memory_bytes
    covered = 0
    for _, views, _ in accesses:
        for view in views.values():
            covered += view.nbytes
        if fill <= budget + FILL_SHARE * ACCESS_NS_PER_BYTE * covered:
            return False
    return True


def bytes_read_first(
    arrays: Sequence[np.ndarray],
    accesses: Iterable[Access],
    loaded: Sequence[np.ndarray],
    overwritten: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
) -> list[np.ndarray]:
    """Views of `arrays` (the machine's memories) covering every byte the run read before writing it.

    `accesses` are the run's instances (or batched steps) in order; `loaded` the views loading writes (constants
    and inputs); `overwritten` parts of `arrays` loading writes completely, byte for byte; `outputs` the views read
    after the run."""
    masks = _Masks(arrays)
    skip: dict[int, list[tuple[int, int]]] = {}
    for part in overwritten:
        found = masks.locate(part)
        if found is not None:
            skip.setdefault(found[0], []).append(masks.hull(part, found[1]))

    def skipped(index: int, low: int, high: int) -> bool:
        return any(start <= low and high <= end for start, end in skip.get(index, ()))

    # The accesses, located once; and per array the hull of everything written in it.
    located: list[tuple[int, int, np.ndarray, bool]] = []  # (array, offset, view, is_write) in order
    written_hull: dict[int, list[int]] = {}
    for opcode, views, attrs in accesses:
        writes, partial = _roles(opcode, attrs)
        reads_first = [(role, view) for role, view in views.items() if role not in writes or role in partial]
        for is_write, chosen in ((False, reads_first), (True, [(r, v) for r, v in views.items() if r in writes])):
            for _, view in chosen:
                found = masks.locate(view)
                if found is None:
                    continue
                index, offset, _ = found
                low, high = masks.hull(view, offset)
                if skipped(index, low, high):
                    continue
                located.append((index, offset, view, is_write))
                if is_write:
                    hull = written_hull.setdefault(index, [low, high])
                    hull[0], hull[1] = min(hull[0], low), max(hull[1], high)
    for view in loaded:
        found = masks.locate(view)
        if found is not None:
            masks.write(found[0], view, found[1])
    for index, offset, view, is_write in located:
        if is_write:
            masks.write(index, view, offset)
            continue
        hull = written_hull.get(index)
        low, high = masks.hull(view, offset)
        if hull is None or high <= hull[0] or hull[1] <= low:
            continue  # bytes nothing writes: they read fresh (or loaded) on every run anyway
        masks.read(index, view, offset)
    for view in outputs:
        found = masks.locate(view)
        if found is not None:
            masks.read(found[0], view, found[1])
    fills: list[np.ndarray] = []
    for index, needed in masks.needed.items():
        if not needed.any():
            continue
        edges = np.flatnonzero(np.diff(needed.view(np.int8), prepend=0, append=0))
        runs = list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
        if len(runs) > MAX_RUNS:  # many small pieces: one fill of their hull is quicker
            runs = [(runs[0][0], runs[-1][1])]
        fills.extend(masks.arrays[index][start:end] for start, end in runs)
    return fills
