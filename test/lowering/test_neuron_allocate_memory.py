"""neuron-allocate-memory's HBM placement (`_least_recently_freed`) against its definition, computed the slow way."""

import random
from typing import Any

import pytest

from neuron_mlir.lowering.neuron_allocate_memory import _align, _FreedBytes, _least_recently_freed


def _by_definition(
    active: list[tuple[int, int, Any]], freed: _FreedBytes, size: int, alignment: int, limit: int
) -> int | None:
    """Every aligned edge tried, each against every active buffer and every freed range."""
    taken = [(address, address + length) for address, length, _ in active]
    edges = [0, *(edge for start, end, _ in freed.ranges for edge in (start, end)), *(end for _, end in taken)]
    best = None
    for address in sorted({_align(edge, alignment) for edge in edges}):
        end = address + size
        if end > limit or any(start < end and address < stop for start, stop in taken):
            continue
        latest = max((when for start, stop, when in freed.ranges if start < end and address < stop), default=-1)
        if best is None or (latest, address) < best:
            best = (latest, address)
    return None if best is None else best[1]


@pytest.mark.parametrize("seed", range(20))
def test_least_recently_freed_is_its_definition(seed):
    """Random buffers placed, freed and placed again as the pass does, each choice the definition's."""
    rng = random.Random(seed)
    alignment, limit = 64, 64 * 400
    active: list[tuple[int, int, Any]] = []
    freed = _FreedBytes()
    for step in range(300):
        if active and rng.random() < 0.45:
            address, length, _ = active.pop(rng.randrange(len(active)))
            freed.free(address, address + length, step)
            continue
        size = _align(rng.randint(1, 64 * 40), alignment)
        expected = _by_definition(active, freed, size, alignment, limit)
        assert _least_recently_freed(active, freed, size, alignment, limit) == expected
        if expected is not None:
            active.append((expected, size, None))
