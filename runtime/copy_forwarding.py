"""Copies a tape need not make: on-chip copies whose readers can read their source, and stores whose source's
producer can write their destination.

A program loads tiles from HBM into SBUF, evacuates PSUM into SBUF before its engines read them and stores its
results from SBUF to HBM; on the simulator each such transfer is a tape step copying bytes between two host arrays,
and a GPT-2 step's tapes make hundreds of them. Three kinds are left out:

* a copy into SBUF or PSUM, when every step that reads the copied tile (until the tile is written whole) reads
  exactly its elements and the source is not written in between: those steps read the source's elements where
  they are;
* a store to HBM, when the step that wrote its source tile wrote all of it, no step between them touches the
  destination or reads the source, and no later step reads the source before it is written whole: that step
  writes the destination's elements instead;
* a batched nest's write-back of its last lane's private bytes into SBUF or PSUM (`runtime.vectorize`), when no
  later step reads a byte of the tile before a step writes all of it: nothing reads what it writes.

Either way every step reads the same bytes in the layouts its results depend on, so it computes the same bits;
the tile's own bytes are read by no step of the run (an on-chip tile is no output, and the bytes a run reads
before writing them are filled again before every run, `runtime.refill`).

Input contract: a first run's steps, in order, and per step its maker and operand views (`bound_inputs.Source`:
`maker(views)` makes the same work over other memory holding the same bytes), and the machine whose memory the
views lie in. A step's maker tells its opcode and attributes (`tape.instance_step`, `tape.lane_step`), and so
which of its roles it reads and writes (`refill`'s classification: a role it may leave partly unwritten counts as
read as well); a lane write-back writes its tile whole; a step whose maker tells neither (a nest split across
threads) counts as reading and writing every view it has.

Output guarantee: `forward_copies` returns the steps and sources of a tape that writes the same bytes to every
byte any step reads, to HBM and to every on-chip byte but the tiles of the copies and stores left out. A copy step
(`tape._copy_into` of a `dma_copy` or `tensor_copy` between equal dtypes) into SBUF or PSUM is left out only when
every later step that reads a byte of it, before a step writes all of it, reads it through a view of exactly its
elements (in any shape a view gives) in a role it does not write, while no step has written a byte of the source
since the copy; a store from SBUF or PSUM to HBM only when the last step before it that writes a byte of its source
writes exactly the source's elements in a role it only writes, no step from that one to the store touches the
destination, none between them reads the source, and the first later step touching the source writes all of it;
a write-back (a step `dst[...] = shadow` recorded with no maker and its tile alone, which writes the tile whole and
reads only its shadow) into SBUF or PSUM only when the first later step touching a byte of the tile writes all of it
in every role that touches it, or none does.
Each step made again (its maker) over the other memory reads or writes it at the strides it had (an elementwise
step: at the same innermost stride), starts no two of its views at one address that did not before (nor, for a
matmul, the reverse), and is a step of the same form (a prepared step stays prepared, so the replay gets no
slower); else the steps stay as they are. Memory footprints are compared as rectangles of partitions and bytes
within a partition (on chip) or byte ranges (HBM), which contain the views' bytes: overlaps may be found where
there are none, which keeps a copy, never the reverse. Only the `REACH` nearest steps touching the memory arrays of
a copy's views are looked at, so the rewrite stays linear in the tape's length: a copy whose fate lies further
away stays.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from neuron_mlir.runtime import refill, tape
from neuron_mlir.runtime.addresses import Addresses
from neuron_mlir.runtime.hardware import Memory

# (array key, first partition, partition after the last, first byte, byte after the last): on chip, bytes within a
# partition row; in HBM and in memory outside the machine, one row of bytes (outside, absolute addresses, key -1)
Footprint = tuple[int, int, int, int, int]
# per role of a step: (role, "r" read, "w" written whole, "rw" both or a partial write, its footprint, its view)
_Role = tuple[str, str, Footprint, np.ndarray]
_UNBOUNDED = 1 << 62
_Address = Callable[[np.ndarray], int]  # a view's host address (`Addresses.of`)
_PLACES = ("", "chip", "hbm")  # where a view lies (`_Memory.footprint`), by number
# How many of the steps touching the memory arrays of a copy's two views are looked at, before or after it (the
# first run's rewrite stays linear in the tape's length): a copy whose tile, or store whose source, may be read or
# written further away stays.
REACH = 512
# A query of `_Index.near` compares up to so many views of one key in a loop, more with NumPy (whose calls cost
# more than a loop's visits of a few dozen).
_LOOPED_ROWS = 48


class _Memory:
    """Where views lie in the machine's arrays, as footprints."""

    def __init__(self, machine: Any, addresses: Addresses | None = None) -> None:
        self.addresses = addresses if addresses is not None else Addresses()
        self.address = self.addresses.of
        found = []
        for memory, arrays in machine.arrays.items():
            for (start, end), array in zip(machine.ranges[memory], arrays, strict=True):
                if array.size == 0:
                    continue
                row = _UNBOUNDED if memory is Memory.HBM else end - start
                low = self.address(array)
                found.append((low, low + array.nbytes, row, "hbm" if memory is Memory.HBM else "chip"))
        found.sort()
        self._lows = [low for low, _, _, _ in found]
        self._arrays = found
        self._footprints: dict[int, tuple[Footprint, str]] = {}  # id(view) -> `footprint(view)`

    def footprint(self, view: np.ndarray) -> tuple[Footprint, str]:
        """The view's footprint and where it lies: "chip" (SBUF or PSUM), "hbm", or "" (outside the machine)."""
        # (remembered per view: a view is asked about again when a step reading it or the step itself is made
        # again; the address memo keeps each view remembered, and so its id, alive)
        known = self._footprints.get(id(view))
        if known is not None:
            return known
        address = self.address(view)
        index = bisect.bisect_right(self._lows, address) - 1
        found: tuple[Footprint, str] | None = None
        if index >= 0:
            low, high, row, where = self._arrays[index]
            if address < high:
                found = _rectangle(index, address - low, view, row), where
        if found is None:
            # the byte hull at the address read above (`byte_bounds` would read the array interface again, which
            # costs more than the rest: most views of a first run's batched nests lie in their lane shadows, here)
            found = _rectangle(-1, address, view, _UNBOUNDED), ""
        self._footprints[id(view)] = found
        return found

    def prime(self, views: Sequence[np.ndarray]) -> None:
        """`footprint` of every view, worked out with NumPy for all of them at once and remembered (the same
        rectangles `_rectangle` gives one by one)."""
        known = self._footprints
        address = self.address
        if not self._arrays:  # (nothing to place them in: one by one, each its byte hull)
            for view in views:
                self.footprint(view)
            return
        by_rank: dict[int, list[tuple[np.ndarray, int]]] = {}
        for view in views:
            if id(view) not in known:
                by_rank.setdefault(view.ndim, []).append((view, address(view)))
        lows = np.array([entry[0] for entry in self._arrays], dtype=np.int64)
        highs = np.array([entry[1] for entry in self._arrays], dtype=np.int64)
        rows_of = np.array([entry[2] for entry in self._arrays], dtype=np.int64)
        chip = np.array([entry[3] == "chip" for entry in self._arrays], dtype=bool)
        for rank, found in by_rank.items():
            starts = np.array([start for _, start in found], dtype=np.int64)
            index = np.searchsorted(lows, starts, side="right") - 1
            inside = index >= 0
            inside[inside] = starts[inside] < highs[index[inside]]
            key = np.where(inside, index, -1)
            offset = np.where(inside, starts - lows[np.maximum(index, 0)], starts)
            row = np.where(inside, rows_of[np.maximum(index, 0)], _UNBOUNDED)
            itemsize = np.array([view.itemsize for view, _ in found], dtype=np.int64)
            shape = np.array([view.shape for view, _ in found], dtype=np.int64).reshape(len(found), rank)
            strides = np.array([view.strides for view, _ in found], dtype=np.int64).reshape(len(found), rank)
            reach = np.where(shape > 1, (shape - 1) * strides, 0)
            below, above = np.minimum(reach, 0), np.maximum(reach, 0)
            across = (reach != 0) & (strides % row[:, None] == 0)
            partition, column = np.divmod(offset, row)
            first_partition = partition + (np.where(across, below, 0) // row[:, None]).sum(axis=1)
            last_partition = partition + (np.where(across, above, 0) // row[:, None]).sum(axis=1)
            first = column + np.where(across, 0, below).sum(axis=1)
            last = column + np.where(across, 0, above).sum(axis=1) + itemsize
            all_low, all_high = offset + below.sum(axis=1), offset + above.sum(axis=1)
            exact = (first >= 0) & (last <= row)
            table = np.stack(
                (
                    key,
                    np.where(exact, first_partition, all_low // row),
                    np.where(exact, last_partition + 1, (all_high + itemsize - 1) // row + 1),
                    np.where(exact, first, 0),
                    np.where(exact, last, row),
                ),
                axis=1,
            ).tolist()
            places = np.where(inside, np.where(chip[np.maximum(index, 0)], 1, 2), 0).tolist()
            for (view, _), rectangle, place in zip(found, table, places, strict=True):
                known[id(view)] = tuple(rectangle), _PLACES[place]


class _Index:
    """Per footprint key, the positions of the steps with a view there, ascending, and the rectangles of those views:
    `near` gives the steps within the `REACH` nearest ones of some keys that touch some footprints, so that a copy's
    checks visit those alone. A step made again is added under its new keys and marked changed (`near` gives it
    whatever its rectangles); its old entries stay, harmless (its roles are looked at as they are then)."""

    def __init__(self, roles: Sequence[list[_Role] | None]) -> None:
        self._positions: dict[int, list[int]] = {}
        # per key, (position, first partition, partition after the last, first byte, byte after the last) of each
        # view there, in position order, with their positions apart for bisection; as a NumPy table once a query
        # meets more of them than a loop visits quicker (`near`)
        self._rows: dict[int, list[tuple[int, int, int, int, int]]] = {}
        self._row_positions: dict[int, list[int]] = {}
        self._tables: dict[int, np.ndarray] = {}
        for position, found in enumerate(roles):
            if found is not None:
                keys = set()
                for _, _, (key, p0, p1, low, high), _ in found:
                    keys.add(key)
                    rows = self._rows.get(key)
                    if rows is None:
                        rows = self._rows[key] = []
                        self._row_positions[key] = []
                    rows.append((position, p0, p1, low, high))
                    self._row_positions[key].append(position)
                for key in keys:
                    self._positions.setdefault(key, []).append(position)
        self._changed: list[int] = []  # positions of the steps made again, ascending

    def add(self, position: int, found: list[_Role] | None) -> None:
        for key in {where[0] for _, _, where, _ in found or ()}:
            positions = self._positions.setdefault(key, [])
            at = bisect.bisect_left(positions, position)
            if at == len(positions) or positions[at] != position:
                positions.insert(at, position)
        at = bisect.bisect_left(self._changed, position)
        if at == len(self._changed) or self._changed[at] != position:
            self._changed.insert(at, position)

    def nearest(self, position: int, keys: Iterable[int], limit: int, after: bool) -> list[int]:
        """The first `limit` steps after `position` (or before it, nearest first) with a view of one of `keys`."""
        lists = []
        for key in set(keys):
            positions = self._positions.get(key, [])
            if after:
                start = bisect.bisect_right(positions, position)
                lists.append(positions[start : start + limit])
            else:
                end = bisect.bisect_left(positions, position)
                lists.append(positions[max(0, end - limit) : end])
        # the first `limit` of the union come from the first `limit` of each list
        found = lists[0] if len(lists) == 1 else sorted(set().union(*lists))
        return found[:limit] if after else found[::-1][:limit]

    def near(
        self, position: int, keys: Iterable[int], limit: int, footprints: Sequence[Footprint], after: bool
    ) -> tuple[list[int], bool]:
        """Of the first `limit` steps after `position` (before it, nearest first) with a view of one of `keys`, those
        with a view whose rectangle meets one of `footprints` and those made again (a superset of the steps that
        touch the footprints), in that order; and whether there are more than `limit` such steps."""
        keys = set(keys)
        steps = self.nearest(position, keys, limit + 1, after)
        beyond = len(steps) > limit
        steps = steps[:limit]
        if not steps:
            return [], beyond
        low, high = (steps[0], steps[-1]) if after else (steps[-1], steps[0])
        found: set[int] = set()
        for key in keys:
            mine = [footprint for footprint in footprints if footprint[0] == key]
            if not mine or key not in self._rows:
                continue
            row_positions = self._row_positions[key]
            first, last = bisect.bisect_left(row_positions, low), bisect.bisect_right(row_positions, high)
            if last - first <= _LOOPED_ROWS:
                for row_position, p0, p1, start, end in self._rows[key][first:last]:
                    for _, q0, q1, other_start, other_end in mine:
                        if p0 < q1 and q0 < p1 and start < other_end and other_start < end:
                            found.add(row_position)
                            break
                continue
            table = self._tables.get(key)
            if table is None:
                table = self._tables[key] = np.array(self._rows[key], dtype=np.int64)
            rows = table[first:last]
            meets = np.zeros(len(rows), dtype=bool)
            for _, p0, p1, start, end in mine:
                meets |= (rows[:, 1] < p1) & (p0 < rows[:, 2]) & (rows[:, 3] < end) & (start < rows[:, 4])
            found.update(rows[meets, 0].tolist())
        changed = self._changed
        within = changed[bisect.bisect_left(changed, low) : bisect.bisect_right(changed, high)]
        if within:
            listed = set(steps)
            found.update(position for position in within if position in listed)
        return sorted(found, reverse=not after), beyond


def _rectangle(key: int, offset: int, view: np.ndarray, row: int) -> Footprint:
    """The partitions and bytes within a partition that a view at byte `offset` of an array of rows of `row`
    bytes touches: exact ranges when its dimensions each step whole partitions or stay within one row, else the
    whole rows of its byte hull."""
    partition, column = divmod(offset, row)
    first_partition = last_partition = partition
    first = last = column
    all_low = all_high = offset
    for extent, stride in zip(view.shape, view.strides, strict=True):
        if extent <= 1:
            continue
        reach = (extent - 1) * stride
        if reach < 0:
            all_low += reach
        else:
            all_high += reach
        if stride % row == 0:
            if reach < 0:
                first_partition += reach // row
            else:
                last_partition += reach // row
        elif reach < 0:
            first += reach
        else:
            last += reach
    last += view.itemsize
    if first >= 0 and last <= row:
        return key, first_partition, last_partition + 1, first, last
    return key, all_low // row, (all_high + view.itemsize - 1) // row + 1, 0, row


def _overlap(a: Footprint, b: Footprint) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]


def _covers(view: np.ndarray, a: Footprint, b: Footprint) -> bool:
    """Whether `view`, of footprint `a`, writes every byte of footprint `b`: `a` contains `b` and the view's
    elements, which do not overlap, fill `a`."""
    if not (a[0] == b[0] and a[1] <= b[1] and b[2] <= a[2] and a[3] <= b[3] and b[4] <= a[4]):
        return False
    if view.size * view.itemsize != (a[2] - a[1]) * (a[4] - a[3]):
        return False
    reach = view.itemsize
    for stride, extent in sorted((abs(s), n) for s, n in zip(view.strides, view.shape, strict=True) if n > 1):
        if stride < reach:
            return False  # elements may share bytes
        reach = stride * extent
    return True


def _reshaped(view: np.ndarray, tile: np.ndarray, address: _Address) -> bool:
    """Whether `view` is `tile` reshaped: the same elements in the same order."""
    if view.dtype != tile.dtype or view.size != tile.size:
        return False
    # (a reshape of a view starts where the view starts)
    if address(tile) != address(view):
        return False
    same = tape._view(tile, view.shape)
    if same is None:
        return False
    return all(a == b for a, b, n in zip(same.strides, view.strides, view.shape, strict=True) if n > 1)


def _opcode(maker: Any) -> tuple[str, Any] | None:
    """The opcode and attributes of a step made by `maker`, when its maker tells them."""
    if not isinstance(maker, functools.partial):
        return None
    attrs = maker.keywords.get("attrs") if maker.keywords else None
    if maker.func is tape.instance_step and len(maker.args) == 2:
        return maker.args[1], attrs
    if maker.func is tape.lane_step and len(maker.args) == 1:
        return maker.args[0], attrs
    return None


def _form(step: Any) -> Any:
    """What a step is, for telling a step made again from the one it replaces: its type and function."""
    function = step.func if isinstance(step, functools.partial) else step
    return type(step), getattr(function, "__qualname__", None) or getattr(function, "__name__", None)


def forward_copies(
    steps: Sequence[tape.Step], sources: Sequence[Any], machine: Any, addresses: Addresses | None = None
) -> tuple[list[tape.Step], list[Any]]:
    """The steps and sources of the tape with the copies left out that the module's rules allow; `addresses`,
    the views' addresses (shared with the first run's other analyses)."""
    memory = _Memory(machine, addresses if addresses is not None else Addresses())
    steps_left: list[Any] = list(steps)
    sources = list(sources)
    # the copies among the steps as recorded (a step made again below is looked at anew)
    copies = [_copy(step, source) for step, source in zip(steps_left, sources, strict=True)]
    memory.prime(
        [view for source in sources if source is not None for view in source[1].values() if _viewed(view)]
        + [view for copied in copies if copied is not None for view in copied if view.size]
    )
    roles: list[list[_Role] | None] = [_roles(memory, source) for source in sources]
    index = _Index(roles)
    left_out = False
    for position, step in enumerate(steps_left):
        if _write_back(step, sources[position]):
            # a batch's write-back into SBUF or PSUM that no later step reads: nothing of the run sees its bytes
            tile = step.func.__self__
            footprint, where = memory.footprint(tile)
            if where == "chip" and _unread(roles, index, position, footprint):
                steps_left[position] = sources[position] = roles[position] = None
                left_out = True
            continue
        copied = copies[position] if step is steps[position] else _copy(step, sources[position])
        if copied is None:
            continue
        tile, values = copied
        (tile_footprint, tile_memory), (source, source_memory) = memory.footprint(tile), memory.footprint(values)
        remade = None
        if tile_memory == "chip":
            readers = _readers(roles, index, position, tile, tile_footprint, source, memory.address)
            if readers is not None:
                remade = _remade(steps_left, sources, readers, values, memory.addresses)
        elif tile_memory == "hbm" and source_memory == "chip":
            remade = _producer_moved(
                steps_left, sources, roles, index, position, tile, tile_footprint, values, source, memory.addresses
            )
        if remade is None:
            continue
        for changed, (step_made, views) in remade.items():
            steps_left[changed], sources[changed] = step_made, (sources[changed][0], views)
            roles[changed] = _roles(memory, sources[changed])
            index.add(changed, roles[changed])
        steps_left[position] = sources[position] = roles[position] = None
        left_out = True
    if not left_out:
        return steps_left, sources
    kept = [position for position, step in enumerate(steps_left) if step is not None]
    return [steps_left[p] for p in kept], [sources[p] for p in kept]


def _copy(step: Any, source: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(destination, source values) of a copy step between equal dtypes (`tape._copy_into`), else None."""
    if not isinstance(step, functools.partial) or step.keywords or len(step.args) != 2:
        return None
    tile, values = getattr(step.func, "__self__", None), step.args[1]
    if not isinstance(tile, np.ndarray) or step.func != tile.__setitem__ or step.args[0] is not Ellipsis:
        return None
    if not isinstance(values, np.ndarray) or values.dtype != tile.dtype or values.shape != tile.shape:
        return None
    known = _opcode(source[0]) if source is not None else None
    if known is None or known[0] not in ("dma_copy", "tensor_copy") or tile.size == 0:
        return None
    return tile, values


def _write_back(step: Any, source: Any) -> bool:
    """Whether a step is a batched nest's write-back of a lane's private bytes (`tape.batch_steps`): a copy of
    the last lane's shadow into the real tile, `dst[...] = shadow`, recorded with no maker and the tile alone."""
    if source is None or source[0] is not None or not isinstance(step, functools.partial):
        return False
    views = source[1]
    tile = getattr(step.func, "__self__", None)
    return (
        len(views) == 1
        and views.get("dst") is tile
        and isinstance(tile, np.ndarray)
        and step.func == tile.__setitem__
        and len(step.args) == 2
        and step.args[0] is Ellipsis
        and not step.keywords
    )


def _unread(roles: list[list[_Role] | None], index: _Index, position: int, footprint: Footprint) -> bool:
    """Whether no step after `position` reads a byte of `footprint` (the tile's) before a step writes all of it;
    False when some later step may (reads it, writes part of it, or lies beyond `REACH` steps)."""
    # steps that do not touch the tile change nothing below: only the REACH nearest ones are looked at
    nearby, beyond = index.near(position, (footprint[0],), REACH, (footprint,), after=True)
    for later in nearby:
        covered = False
        for _, kind, where, view in roles[later] or ():
            if _overlap(where, footprint):
                if kind != "w" or not _covers(view, where, footprint):
                    return False  # read (in any of its roles), or written in part
                covered = True
        if covered:
            return True
    return not beyond  # (beyond: the tile may be read further on)


def _viewed(view: Any) -> bool:
    """Whether a step's operand is a view with elements (`_roles` gives it a footprint)."""
    return isinstance(view, np.ndarray) and view.size > 0


def _roles(memory: _Memory, source: Any) -> list[_Role] | None:
    if source is None:
        return None
    maker, views = source
    if maker is None and len(views) == 1 and "dst" in views:
        # a batch's write-back (`_write_back`): it writes its tile whole and reads only its shadow, which a step
        # made again never reads in place of another view (shadows hold nothing between batches)
        view = views["dst"]
        return [("dst", "w", memory.footprint(view)[0], view)] if isinstance(view, np.ndarray) and view.size else []
    known = _opcode(maker)
    writes, changed = refill._written(*known) if known is not None else (set(), None)
    found = []
    for role, view in views.items():
        if not isinstance(view, np.ndarray) or view.size == 0:
            continue
        if changed is None or role in changed:
            kind = "w" if role in writes else "rw"
        else:
            kind = "r"
        found.append((role, kind, memory.footprint(view)[0], view))
    return found


def _readers(
    roles: list[list[_Role] | None],
    index: _Index,
    position: int,
    tile: np.ndarray,
    footprint: Footprint,
    source: Footprint,
    address: _Address,
) -> dict[int, list[str]] | None:
    """Per later step reading the tile before it is written whole, the roles it reads it in; None when some step
    reads it otherwise (part of it, in a role it also writes, once the source has changed) or writes part of it."""
    readers: dict[int, list[str]] = {}
    source_changed = False
    # (`_overlap` written out: this loop visits every step near the copy that touches the tile or the source)
    tile_key, tile_p0, tile_p1, tile_low, tile_high = footprint
    source_key, source_p0, source_p1, source_low, source_high = source
    # steps that touch neither change nothing below: only the REACH nearest ones are looked at, and only those
    nearby, beyond = index.near(position, (tile_key, source_key), REACH, (footprint, source), after=True)
    for later in nearby:
        found = roles[later]
        if found is None:
            continue
        reads, whole, writes_source = [], False, False
        for role, kind, where, view in found:
            key, p0, p1, low, high = where
            if (
                kind != "r"
                and key == source_key
                and p0 < source_p1
                and source_p0 < p1
                and low < source_high
                and source_low < high
            ):
                writes_source = True
            if not (key == tile_key and p0 < tile_p1 and tile_p0 < p1 and low < tile_high and tile_low < high):
                continue
            if kind == "r":
                if not _reshaped(view, tile, address):
                    return None
                reads.append(role)
            elif kind == "w" and _covers(view, where, footprint):
                whole = True
            else:
                return None
        if reads:
            if source_changed or writes_source:
                return None
            readers[later] = reads
        if whole:
            return readers
        source_changed = source_changed or writes_source
    return None if beyond else readers  # (beyond: the tile may be read further on, and the copy stays)


def _remade(
    steps: list[Any], sources: list[Any], readers: dict[int, list[str]], values: np.ndarray, addresses: Addresses
) -> dict[int, tuple[Any, dict[str, np.ndarray]]] | None:
    """Each reader made again reading the copy's source, when each keeps its layout and form."""
    address = addresses.of
    remade = {}
    for reader, reads in readers.items():
        maker, views = sources[reader]
        if maker is None:
            return None
        views = dict(views)
        for role in reads:
            moved = tape._view(values, views[role].shape)
            if moved is None or not _same_layout(maker, views, moved, role):
                return None
            addresses.note(moved, address(values))  # (a reshape starts where its array starts)
            views[role] = moved
        if not _aliasing_kept(maker, sources[reader][1], views, address):
            return None
        made = maker(views)
        if _form(made) != _form(steps[reader]):
            return None
        remade[reader] = (made, views)
    return remade


# Opcodes that compute each element from the operands' elements at its position, with the same NumPy calls
# whatever the operands' outer strides: their operands may be read at other strides, each row keeping its innermost
# stride (which decides the loop NumPy runs: a vectorised transcendental function may round otherwise than its
# strided fallback). Reductions and products sum in an order the layout may decide (NumPy's pairwise sums follow
# contiguity; NumPy hands BLAS some layouts and not others): their operands keep every stride.
_ELEMENTWISE = frozenset(
    {"dma_copy", "tensor_copy", "tensor_tensor", "tensor_scalar", "scalar_tensor_tensor", "select", "activation"}
)


def _same_layout(maker: Any, views: dict[str, np.ndarray], moved: np.ndarray, role: str) -> bool:
    """Whether the reader `maker` makes computes the same bits reading `moved` in place of `views[role]`."""
    strides = [(a, b) for a, b, n in zip(moved.strides, views[role].strides, moved.shape, strict=True) if n > 1]
    if all(a == b for a, b in strides):
        return True
    known = _opcode(maker)
    elementwise = known is not None and known[0] in _ELEMENTWISE and "accumulate_dst" not in views
    return elementwise and strides[-1][0] == strides[-1][1]


def _aliasing_kept(maker: Any, before: dict[str, np.ndarray], after: dict[str, np.ndarray], address: _Address) -> bool:
    """Whether the step's views `after` start no two roles at one address that `before` did not (an operand
    passed twice, which a product takes as a matrix times its own transpose, another BLAS routine); for a matmul,
    nor the reverse."""
    pairs = []
    for views in (before, after):
        starts = {r: address(v) for r, v in views.items() if isinstance(v, np.ndarray)}
        pairs.append({(a, b) for a in starts for b in starts if a < b and starts[a] == starts[b]})
    known = _opcode(maker)
    if known is not None and known[0] == "nc_matmul":
        return pairs[0] == pairs[1]
    return pairs[1] <= pairs[0]


def _producer_moved(
    steps: list[Any],
    sources: list[Any],
    roles: list[list[_Role] | None],
    index: _Index,
    position: int,
    tile: np.ndarray,
    footprint: Footprint,
    values: np.ndarray,
    source: Footprint,
    addresses: Addresses,
) -> dict[int, tuple[Any, dict[str, np.ndarray]]] | None:
    """A copy from on chip to HBM (a store): the step that wrote its source whole, made again writing the copy's
    destination instead, when no step between them touches the destination or reads the source and no later step
    reads the source before it is written whole."""
    address = addresses.of
    producer = None
    # (steps touching neither the destination nor the source change nothing below)
    nearby, beyond = index.near(position, (footprint[0], source[0]), REACH, (footprint, source), after=False)
    for earlier in nearby:
        found = roles[earlier]
        if found is None:
            continue
        if any(_overlap(where, footprint) for _, _, where, _ in found):
            return None
        writes = [(role, kind, view) for role, kind, where, view in found if kind != "r" and _overlap(where, source)]
        if writes:
            if len(writes) != 1 or writes[0][1] != "w" or not _reshaped(writes[0][2], values, address):
                return None
            producer = (earlier, writes[0][0])
            break
        if any(_overlap(where, source) for _, _, where, _ in found):
            return None  # reads the source: the producer's values would no longer be there
    if producer is None:
        return None  # (also when no producer is among the REACH nearest steps)
    nearby, beyond = index.near(position, (source[0],), REACH, (source,), after=True)
    for later in nearby:
        found = roles[later]
        if found is None:
            continue
        touched = [(kind, where, view) for _, kind, where, view in found if _overlap(where, source)]
        if any(kind != "w" or not _covers(view, where, source) for kind, where, view in touched):
            return None
        if touched:
            break
    else:
        if beyond:
            return None  # the source may be read further on
    earlier, role = producer
    maker, views = sources[earlier]
    if maker is None:
        return None
    moved = tape._view(tile, views[role].shape)
    if moved is None or not _same_layout(maker, views, moved, role):
        return None
    addresses.note(moved, address(tile))  # (a reshape starts where its array starts)
    if not _aliasing_kept(maker, views, {**views, role: moved}, address):
        return None
    views = {**views, role: moved}
    made = maker(views)
    if _form(made) != _form(steps[earlier]):
        return None
    return {earlier: (made, views)}
