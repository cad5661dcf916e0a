"""tile-fuse-loops' test of whether two stored tiles share an element of a tensor's storage.

The forwarding asks it of every stored tile of another view of the tensor that a load may read (attention's rows
per group of heads against the projection's rows of a query tile), so it must be exact (a tile wrongly taken as
disjoint would be assembled from stale pieces) and cheap for tiles of a few hundred thousand elements.
"""

from __future__ import annotations

import itertools
import random
import time

import numpy as np
import pytest

from neuron_mlir.lowering.tile_fuse_loops import _Footprint


def _elements(footprint: _Footprint) -> set[int]:
    return {
        footprint.base + sum(i * step for i, step in zip(index, footprint.steps, strict=True))
        for index in itertools.product(*(range(extent) for extent in footprint.shape))
    }


def _random_footprint(rng: random.Random) -> _Footprint:
    rank = rng.randint(1, 3)
    shape = tuple(rng.randint(1, 6) for _ in range(rank))
    steps = tuple(rng.choice([1, 2, 3, 5, 8, 64, 1000, 5000]) for _ in range(rank))
    return _Footprint(rng.randint(0, 200), steps, shape)


def test_meets_is_the_intersection_of_the_elements() -> None:
    """Random tiles, dense and strided, narrow and spread over a wide span (both ways of marking): the answer is
    whether the two sets of elements meet, each way round."""
    rng = random.Random(7)
    met = 0
    for _ in range(3000):
        first, second = _random_footprint(rng), _random_footprint(rng)
        expected = bool(_elements(first) & _elements(second))
        assert first.meets(second) is expected, (first, second)
        assert second.meets(first) is expected, (first, second)
        met += expected
    assert 300 < met < 2700  # both answers are exercised


@pytest.mark.parametrize("offset", [0, 1, 1535, 1536, 2304])
def test_interleaved_views_of_rows(offset: int) -> None:
    """A [128, 2, 768] tile holding the first two of every four 768-element rows against a [128, 768] tile of one
    row in four starting `offset` elements in: they meet only where that row starts inside the first two."""
    rows = _Footprint(0, (4 * 768, 768, 1), (128, 2, 768))
    other = _Footprint(offset, (4 * 768, 1), (128, 768))
    expected = bool(_elements(rows) & _elements(other))
    assert expected is (offset < 1536)
    assert rows.meets(other) is expected
    assert other.meets(rows) is expected


def test_meets_is_linear_in_the_tiles() -> None:
    """Tiles of the sizes tile-fuse-loops compares at real widths ([128, 2, 768] against [128, 768]): well
    under the tens of milliseconds that sorting their offsets took."""
    first = _Footprint(0, (1536, 768, 1), (128, 2, 768))
    second = _Footprint(384, (1536, 1), (128, 768))
    started = time.process_time()
    for _ in range(20):
        assert first.meets(second)
    per_call = (time.process_time() - started) / 20
    reference = time.process_time()
    for _ in range(20):
        np.sort(np.concatenate([first.offsets().ravel(), second.offsets().ravel()]))
    sorting = (time.process_time() - reference) / 20
    assert per_call < 2 * sorting + 1e-3
