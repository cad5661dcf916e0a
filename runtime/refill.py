"""Which bytes of the simulated memories a run reads before it writes them: all a later run must fill again.

Fresh memory reads as `machine.FILL_BYTE` (NaN, -1), and every run must see that wherever it reads memory it has
not written yet. Registers never depend on data, so every run of a program makes the same accesses in the same
order; the bytes one run read before writing them (inputs and constants count as written by loading; the outputs
are read at the end) are the only ones a later run needs set back to the fill byte, since it overwrites all the
others before reading them. `bytes_read_first` finds them from one run's accesses.

The answer may be too large, never too small: an access counts as all the bytes of its view, and a write that may
leave bytes of its view unwritten (matmul accumulation reads its destination; a scatter writes only the rows its
offsets choose) counts as a read and not as a write. Two kinds of access are skipped because they cannot change
the answer: any access inside a range loading overwrites completely, and reads of bytes no access of the run ever
writes. Most reads are of tiles written whole before: an access whose bytes are the same byte ranges in every
partition of a range (HBM: one row) is kept as those ranges, and a read inside the ranges written so far over a
partition range containing its own is settled by that alone. Only for an array with a read not settled so is
every byte tracked, in masks shaped like the array (all its earlier writes applied first), visited through views
of the accesses' own layout (a word per element where alignment allows).

`analysis_seconds` estimates what the analysis of a run's accesses costs, for the caller to decide when to do it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from neuron_mlir.runtime import isa
from neuron_mlir.runtime.addresses import Addresses, reach

# More separate byte ranges than this to fill in one memory array, and their hull is filled instead.
MAX_RUNS = 256
# Accesses with more contiguous runs than this are tracked in masks only; with more than _FEW_RUNS, ranges are
# merged and looked up with NumPy.
_MAX_RANGES = 1 << 16
_FEW_RUNS = 32


class _Written:
    """Byte ranges written so far (within a row), kept sorted and disjoint: touching or overlapping ones merge."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, lo: int, hi: int) -> None:
        starts, ends = self.starts, self.ends
        first = bisect.bisect_left(ends, lo)  # ranges ending at or after lo ...
        last = bisect.bisect_right(starts, hi)  # ... and starting at or before hi meet [lo, hi)
        if first < last:
            lo, hi = min(lo, starts[first]), max(hi, ends[last - 1])
        starts[first:last] = [lo]
        ends[first:last] = [hi]

    def covers(self, lo: int, hi: int) -> bool:
        position = bisect.bisect_right(self.starts, lo) - 1
        return position >= 0 and self.ends[position] >= hi

    def add_runs(self, starts: list[int], run: int) -> None:
        """`add` of [start, start + run) for every start, merged with NumPy when there are many."""
        if len(starts) <= _FEW_RUNS:
            for start in starts:
                self.add(start, start + run)
            return
        lows = np.concatenate((np.asarray(self.starts, dtype=np.int64), np.asarray(starts, dtype=np.int64)))
        highs = np.concatenate((np.asarray(self.ends, dtype=np.int64), np.asarray(starts, dtype=np.int64) + run))
        order = np.argsort(lows, kind="stable")
        lows, highs = lows[order], np.maximum.accumulate(highs[order])
        breaks = np.flatnonzero(lows[1:] > highs[:-1])
        self.starts = lows[np.concatenate(([0], breaks + 1))].tolist()
        self.ends = highs[np.concatenate((breaks, [highs.size - 1]))].tolist()

    def covers_runs(self, starts: list[int], run: int) -> bool:
        """`covers` of [start, start + run) for every start."""
        if len(starts) <= _FEW_RUNS:
            return all(self.covers(start, start + run) for start in starts)
        if not self.starts:
            return False
        lows = np.asarray(starts, dtype=np.int64)
        position = np.searchsorted(np.asarray(self.starts, dtype=np.int64), lows, side="right") - 1
        return bool((position >= 0).all() and (np.asarray(self.ends, dtype=np.int64)[position] >= lows + run).all())


Access = tuple[str, Mapping[str, np.ndarray], Mapping[str, Any]]  # (opcode, operand views, attributes)

_WORDS: dict[int, np.dtype[Any]] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    8: np.dtype(np.uint64),
}
_ONES = {size: np.array(int.from_bytes(b"\x01" * size, "little"), dtype) for size, dtype in _WORDS.items()}


class _Masks:
    """Per memory array, which bytes are written so far and which were read before being written."""

    def __init__(self, arrays: Sequence[np.ndarray], rows: Sequence[int], addresses: Addresses) -> None:
        self.address = addresses.of
        self.arrays = list(arrays)
        self.rows = list(rows)  # bytes per partition row of each array (0: one flat row)
        starts = [self.address(array) for array in self.arrays]
        order = sorted(range(len(self.arrays)), key=starts.__getitem__)
        self.order = order
        self.starts = [starts[i] for i in order]
        self.written: dict[int, np.ndarray] = {}
        self.needed: dict[int, np.ndarray] = {}
        # per array, per partition range: the byte ranges (within a row) written in all its partitions so far
        # (sorted, disjoint); and the writes of an array not yet in its mask
        self.boxes: dict[int, dict[tuple[int, int], _Written]] = {}
        self.pending: dict[int, list[tuple[np.ndarray, int]]] = {}
        # per view layout: its `ranges` apart from where it starts (`_ranges_layout`), and the reach of its bytes
        # around element 0 (`hull`)
        self.layouts: dict[tuple[Any, ...], tuple[int, list[int] | None, int, int] | None] = {}
        self.reaches: dict[tuple[Any, ...], tuple[int, int]] = {}

    def ranges(self, index: int, view: np.ndarray, offset: int) -> tuple[int, int, list[int], int] | None:
        """The view's bytes as (first partition, end partition, first bytes of its runs within a row, run length):
        the same byte ranges in every partition of the range. None when they do not have that form (or have too
        many runs)."""
        row = self.rows[index]
        # (worked out once per layout: views of one layout differ only in where they start)
        key = (row, view.shape, view.strides, view.itemsize)
        if key in self.layouts:
            layout = self.layouts[key]
        else:
            layout = self.layouts[key] = _ranges_layout(row, view)
        if layout is None:
            return None
        partitions, relative, furthest, run = layout
        first, start = divmod(offset, row) if row else (0, offset)
        if row and start + furthest + run > row:
            return None
        starts = [start] if relative is None else [start + at for at in relative]
        return first, first + partitions, starts, run

    def note_write(self, index: int, view: np.ndarray, offset: int) -> None:
        found = self.ranges(index, view, offset)
        if found is not None:
            p0, p1, starts, run = found
            written = self.boxes.setdefault(index, {}).get((p0, p1))
            if written is None:
                written = self.boxes[index][(p0, p1)] = _Written()
            written.add_runs(starts, run)
        if index in self.written:
            self.write(index, view, offset)
        else:
            self.pending.setdefault(index, []).append((view, offset))

    def note_read(self, index: int, view: np.ndarray, offset: int) -> None:
        found = self.ranges(index, view, offset)
        if found is not None:
            p0, p1, starts, run = found
            for (q0, q1), written in self.boxes.get(index, {}).items():
                if q0 <= p0 and p1 <= q1 and written.covers_runs(starts, run):
                    return  # every byte of it was written before
        if index not in self.written:  # track this array byte by byte from now on
            self.mask(self.written, index)
            for earlier, earlier_offset in self.pending.pop(index, ()):
                self.write(index, earlier, earlier_offset)
        self.read(index, view, offset)

    def locate(self, view: np.ndarray) -> tuple[int, int, int] | None:
        """(array index, byte offset of the view's element 0, byte hull [lo, hi) end) or None (not simulated)."""
        if view.size == 0:
            return None
        address = self.address(view)
        position = bisect.bisect_right(self.starts, address) - 1
        if position < 0:
            return None
        index = self.order[position]
        offset = address - self.starts[position]
        if offset >= self.arrays[index].size:
            return None
        return index, offset, view.itemsize

    def hull(self, view: np.ndarray, offset: int) -> tuple[int, int]:
        key = (view.shape, view.strides, view.itemsize)
        spanned = self.reaches.get(key)
        if spanned is None:
            spanned = self.reaches[key] = reach(view)
        return offset + spanned[0], offset + spanned[1]

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


def _ranges_layout(row: int, view: np.ndarray) -> tuple[int, list[int] | None, int, int] | None:
    """`_Masks.ranges` of a view of arrays of `row` bytes per partition (0: one flat row) apart from where it starts:
    (partitions, the runs' first bytes from the first one's, None for one run; the furthest of them; run length),
    or None when its bytes do not have that form wherever it starts."""
    # (a dimension of stride 0 repeats the same bytes)
    dims = [(s, n) for s, n in zip(view.strides, view.shape, strict=True) if n > 1 and s]
    partitions = 1
    if row:
        across = [dim for dim in dims if dim[0] == row]
        if len(across) > 1:
            return None
        if across:
            partitions = across[0][1]
            dims.remove(across[0])
    run = view.itemsize
    dims.sort()
    while dims and dims[0][0] == run:
        run *= dims.pop(0)[1]
    if not dims:
        return partitions, None, 0, run
    count = math.prod(extent for _, extent in dims)
    if count > _MAX_RANGES or dims[0][0] < 0:
        return None
    grid = np.zeros(1, dtype=np.int64)
    for stride, extent in dims:
        grid = (grid[:, None] + stride * np.arange(extent, dtype=np.int64)[None, :]).reshape(-1)
    relative = grid.tolist()
    return partitions, relative, max(relative), run


def _written(opcode: str, attrs: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(the roles an access writes completely, the roles it may change at all); unknown opcodes write 'dst'.
    Every role not written completely counts as read. The sets are shared: callers must not change them."""
    if opcode not in _DEPENDS_ON_ATTRIBUTES:
        found = _WRITTEN.get(opcode)
        if found is None:
            found = _WRITTEN[opcode] = _written_by(opcode, attrs)
        return found
    # kept per value of the attributes that decide, when those are plain Python values (a batch's attributes may
    # be arrays of the lanes' values)
    accumulate, indirect = attrs.get("accumulate", False), attrs.get("indirect")
    if type(accumulate) is bool and (indirect is None or type(indirect) is str):
        key = (opcode, accumulate, indirect)
        found = _WRITTEN_BY_ATTRIBUTES.get(key)
        if found is None:
            found = _WRITTEN_BY_ATTRIBUTES[key] = _written_by(opcode, attrs)
        return found
    return _written_by(opcode, attrs)


# Opcodes whose written roles depend on their attributes (`_written_by`); the others' are kept per opcode.
_DEPENDS_ON_ATTRIBUTES = frozenset({"nc_matmul", "dma_copy"})
_WRITTEN: dict[str, tuple[set[str], set[str]]] = {}
_WRITTEN_BY_ATTRIBUTES: dict[tuple[str, bool, str | None], tuple[set[str], set[str]]] = {}


def _written_by(opcode: str, attrs: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    spec = isa.OPCODES.get(opcode)
    changed = set(spec.writes + spec.optional_writes) if spec is not None else {"dst"}
    writes = set(changed)
    if opcode == "nc_matmul" and np.any(attrs.get("accumulate", False)):
        writes.discard("dst")  # accumulation reads the destination
    if opcode == "dma_copy" and attrs.get("indirect") == "dst":
        writes.discard("dst")  # a scatter writes only the rows its offsets choose
    return writes, changed


# About what `bytes_read_first` spends per access on a CPU core when masks are not needed.
SECONDS_PER_ACCESS = 40e-6


def analysis_seconds(accesses: Sequence[Access]) -> float:
    """A rough estimate of `bytes_read_first`'s time for `accesses`."""
    return SECONDS_PER_ACCESS * sum(len(views) for _, views, _ in accesses)


def bytes_read_first(
    arrays: Sequence[np.ndarray],
    rows: Sequence[int],
    accesses: Iterable[Access],
    loaded: Sequence[np.ndarray],
    overwritten: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    addresses: Addresses | None = None,
) -> list[np.ndarray]:
    """Views of `arrays` (the machine's memories) covering every byte the run read before writing it.

    `rows` are the arrays' bytes per partition row (0 for HBM); `accesses` the run's instances (or batched steps)
    in order; `loaded` the views loading writes (constants and inputs); `overwritten` parts of `arrays` loading
    writes completely, byte for byte; `outputs` the views read after the run; `addresses` the views' addresses
    (shared with the run's other analyses)."""
    masks = _Masks(arrays, rows, addresses if addresses is not None else Addresses())
    parts: dict[int, list[tuple[int, int]]] = {}
    for part in overwritten:
        found = masks.locate(part)
        if found is not None:
            parts.setdefault(found[0], []).append(masks.hull(part, found[1]))
    # per array, the parts sorted by start and the furthest end among each prefix of them: [low, high) lies in
    # one part iff some part starting at or before low ends at or after high
    skip: dict[int, tuple[list[int], list[int]]] = {}
    for index, found_parts in parts.items():
        found_parts.sort()
        ends, furthest = [], -1
        for _, end in found_parts:
            furthest = max(furthest, end)
            ends.append(furthest)
        skip[index] = ([start for start, _ in found_parts], ends)

    def skipped(index: int, low: int, high: int) -> bool:
        entry = skip.get(index)
        if entry is None:
            return False
        position = bisect.bisect_right(entry[0], low) - 1
        return position >= 0 and entry[1][position] >= high

    # The accesses, located once (views repeat: a static operand is the same view in every instance), reads of
    # an access before its writes; and per array the hull of every byte the run changes.
    located: list[tuple[int, int, int, int, np.ndarray, bool]] = []  # (array, offset, lo, hi, view, is_write)
    written_hull: dict[int, list[int]] = {}
    places: dict[int, tuple[int, int, int, int] | None] = {}  # id(view) -> (array, offset, lo, hi); None: skip
    for opcode, views, attrs in accesses:
        writes, changed = _written(opcode, attrs)
        for is_write in (False, True):
            for role, view in views.items():
                if (role in writes) != is_write:
                    continue
                key = id(view)
                if key in places:
                    place = places[key]
                else:
                    place = None
                    found = masks.locate(view)
                    if found is not None:
                        index, offset, _ = found
                        low, high = masks.hull(view, offset)
                        if not skipped(index, low, high):
                            place = (index, offset, low, high)
                    places[key] = place
                if place is None:
                    continue
                index, offset, low, high = place
                located.append((index, offset, low, high, view, is_write))
                if role in changed:  # written in full or in part: these bytes change
                    hull = written_hull.setdefault(index, [low, high])
                    hull[0], hull[1] = min(hull[0], low), max(hull[1], high)
    for view in loaded:
        found = masks.locate(view)
        if found is not None:
            masks.note_write(found[0], view, found[1])
    for index, offset, low, high, view, is_write in located:
        if is_write:
            masks.note_write(index, view, offset)
            continue
        written = written_hull.get(index)
        if written is None or high <= written[0] or written[1] <= low:
            continue  # bytes nothing writes: they read fresh (or loaded) on every run anyway
        masks.note_read(index, view, offset)
    for view in outputs:
        found = masks.locate(view)
        if found is not None:
            masks.note_read(found[0], view, found[1])
    fills: list[np.ndarray] = []
    for index, needed in masks.needed.items():
        if not needed.any():
            continue
        # int8 bounds keep the difference int8: a Python 0 would make it int64, eight bytes per byte of HBM
        zero = np.int8(0)
        edges = np.flatnonzero(np.diff(needed.view(np.int8), prepend=zero, append=zero))
        runs = list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
        if len(runs) > MAX_RUNS:  # many small pieces: one fill of their hull is quicker
            runs = [(runs[0][0], runs[-1][1])]
        fills.extend(masks.arrays[index][start:end] for start, end in runs)
    return fills
