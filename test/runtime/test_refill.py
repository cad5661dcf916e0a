"""runtime.refill against the definition, byte by byte: the bytes a run reads before it writes them."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_mlir.runtime import refill


def _random_view(rng: np.random.Generator, array: np.ndarray, row: int) -> np.ndarray:
    """A random strided view of `array` (bytes), as an accesses' operand: on chip [partitions, free...] with the
    partition stride `row`, in HBM flat; itemsize 1, 2 or 4; sometimes a stride-0 (broadcast) dimension."""
    itemsize = int(rng.choice([1, 2, 4]))
    dtype = {1: np.uint8, 2: np.uint16, 4: np.float32}[itemsize]
    shape: list[int] = []
    strides: list[int] = []
    if row:
        partitions = int(rng.integers(1, array.size // row + 1))
        first = int(rng.integers(0, array.size // row - partitions + 1))
        shape.append(partitions)
        strides.append(row)
        limit = row
    else:
        first, limit = 0, array.size
    dims = int(rng.integers(1, 3))
    for _ in range(dims):
        shape.append(int(rng.integers(1, 5)))
        strides.append(int(rng.choice([itemsize, itemsize * int(rng.integers(1, 6)), 0])))
    # the free dimensions fit in the row (or the array) from a random start
    span = sum(s * (n - 1) for s, n in zip(strides[1 if row else 0 :], shape[1 if row else 0 :], strict=True))
    span += itemsize
    if span > limit:
        return _random_view(rng, array, row)
    start = int(rng.integers(0, limit - span + 1))
    offset = first * row + start
    return np.ndarray(tuple(shape), dtype, buffer=array, offset=offset, strides=tuple(strides))


def _byte_indices(view: np.ndarray, base: np.ndarray) -> np.ndarray:
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    index = np.full(view.shape, start, dtype=np.int64)
    for axis, (stride, extent) in enumerate(zip(view.strides, view.shape, strict=True)):
        shape = [1] * view.ndim
        shape[axis] = extent
        index = index + (stride * np.arange(extent)).reshape(shape)
    return np.unique((index.reshape(-1, 1) + np.arange(view.itemsize)).reshape(-1))


@pytest.mark.parametrize("seed", range(150))
def test_bytes_read_before_written_match_a_byte_by_byte_run(seed):
    rng = np.random.default_rng(seed)
    rows = [16, 0, 24]  # an on-chip array of 4 partitions x 16 bytes, a flat one, 3 partitions x 24 bytes
    arrays = [np.zeros(64, np.uint8), np.zeros(96, np.uint8), np.zeros(72, np.uint8)]
    # loading writes parts of the flat array, completely: one inside another, two that touch, one apart
    loaded = [arrays[1][:16], arrays[1][4:8], arrays[1][16:24], arrays[1][40:56]]
    accesses = []
    for _ in range(int(rng.integers(1, 30))):
        index = int(rng.integers(len(arrays)))
        views = {"dst": _random_view(rng, arrays[index], rows[index])}
        if rng.random() < 0.7:
            source = int(rng.integers(len(arrays)))
            views["src"] = _random_view(rng, arrays[source], rows[source])
        opcode = "tensor_copy" if "src" in views else "memset"
        attrs = {}
        if rng.random() < 0.15:  # an accumulating matmul: its destination is read, not (only) written
            opcode, attrs = "nc_matmul", {"accumulate": True}
            views = {"dst": views["dst"], "stationary": views.get("src", views["dst"]), "moving": views["dst"]}
        accesses.append((opcode, views, attrs))
    outputs = [arrays[0][:8], arrays[2][40:72]]

    # the definition: per byte, was its first access a read (loading and fully written roles write)
    state = [np.zeros(a.size, np.int8) for a in arrays]  # 0 untouched, 1 written first, 2 read first

    def touch(view: np.ndarray, kind: int) -> None:
        for position, array in enumerate(arrays):
            offset = view.__array_interface__["data"][0] - array.__array_interface__["data"][0]
            if 0 <= offset < array.size:
                bytes_of = _byte_indices(view, array)
                fresh = state[position][bytes_of] == 0
                state[position][bytes_of[fresh]] = kind

    for view in loaded:
        touch(view, 1)
    for _, views, attrs in accesses:
        written = {"dst"} if not attrs.get("accumulate") else set()
        for role, view in views.items():
            if role not in written:
                touch(view, 2)
        for role, view in views.items():
            if role in written:
                touch(view, 1)
    for view in outputs:
        touch(view, 2)
    ever_written = [np.zeros(a.size, bool) for a in arrays]
    for view in loaded:
        ever_written[1][_byte_indices(view, arrays[1])] = True
    for _, views, _ in accesses:
        for role, view in views.items():
            if role == "dst":  # written in full or, accumulating, in part: changed either way
                for position, array in enumerate(arrays):
                    offset = view.__array_interface__["data"][0] - array.__array_interface__["data"][0]
                    if 0 <= offset < array.size:
                        ever_written[position][_byte_indices(view, array)] = True
    # bytes read first and written at some point are the ones a later run must find fresh again; bytes never
    # written stay fresh anyway (the analysis may leave them out)
    must = [(s == 2) & w for s, w in zip(state, ever_written, strict=True)]
    may = [s == 2 for s in state]

    fills = refill.bytes_read_first(arrays, rows, accesses, loaded, loaded, outputs)
    found = [np.zeros(a.size, bool) for a in arrays]
    for view in fills:
        for position, array in enumerate(arrays):
            offset = view.__array_interface__["data"][0] - array.__array_interface__["data"][0]
            if 0 <= offset < array.size:
                found[position][offset : offset + view.size] = True
    for position in range(len(arrays)):
        assert not (must[position] & ~found[position]).any(), f"array {position}: a byte read first is not filled"
        assert not (found[position] & ~may[position]).any(), f"array {position}: a byte not read first is filled"
