"""Inputs bound in place: a steady run's tape reads an input from the caller's array instead of a copy in HBM.

A run used to copy every input, parameters included, into the simulated HBM before the tape ran, and the tape
read the copy. An input *bound* in place is not copied: the tape steps that read it are made again for the run
(`tape.Maker`) over views of the caller's array with the strides and byte offsets their views of the HBM buffer
had. The bytes are the same, so are the steps' results; the simulated memory of the input is not needed between
runs, and the machine gives its host pages back (`Machine.release`).

Input contract: a program's machine and plans, and the first run's recorded steps with, per step, its maker and
operand views (`None` as maker for a step that cannot be made again, such as a nest split across threads).

Guarantees: an input is bound only when binding it cannot change a result:

* the input covers its whole HBM buffer in row-major order (its bytes are the buffer's bytes, in order) and is
  the only input bound to that buffer;
* no other buffer or constant shares a byte with that buffer, and no instruction writes it (what a program
  writes into an input must stay in the simulated memory: the caller's tensor keeps its values, as when it was
  copied); an output of that buffer (a graph returning its input) is copied out of the caller's array;
* every recorded step that reads it can be made again, and reads it through a view that lies inside it;
* per run, the caller's array is C-contiguous (its bytes in the buffer's order); any other array is copied into
  HBM for that run, as before, and the steps keep reading HBM. So is a small array (the simulator's
  `_BIND_MIN_BYTES`): copying it costs less than making the steps that read it again.

An input that fails a static condition is copied on every run. The first run (the walk with the timeline, the
race checker and the recording) and every run that walks the program again copy all inputs.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neuron_mlir.runtime import dtypes, tape
from neuron_mlir.runtime.addresses import Addresses, reach
from neuron_mlir.runtime.hardware import Memory
from neuron_mlir.runtime.program import Program, row_major_strides

# A recorded step's maker (None: it cannot be made again) and the operand views it was made of.
Source = tuple[tape.Maker | None, Mapping[str, np.ndarray]]


def bindable_inputs(program: Program) -> dict[int, int]:
    """Input position -> its buffer, for the inputs the program's declarations allow to bind (the first two
    conditions of the module's contract but the writes, which the plans know)."""
    buffers = program.buffers
    extents = [
        (buffer.address, buffer.address + buffer.elements_per_row * dtypes.itemsize(buffer.dtype)) for buffer in buffers
    ]
    per_buffer: dict[int, list[int]] = {}
    for position, binding in enumerate(program.inputs):
        per_buffer.setdefault(binding.buffer, []).append(position)
    kept = set(program.constants)
    # HBM's non-empty byte ranges by start, with the furthest end among those starting so far: whether a buffer
    # shares a byte with another, in a bisection rather than a pass over every buffer
    ranges = sorted(
        extent
        for buffer, extent in zip(buffers, extents, strict=True)
        if buffer.memory is Memory.HBM and extent[0] != extent[1]
    )
    starts = [start for start, _ in ranges]
    reach: list[int] = []
    for _, end in ranges:
        reach.append(max(end, reach[-1]) if reach else end)
    found = {}
    for index, positions in per_buffer.items():
        buffer = buffers[index]
        if len(positions) != 1 or index in kept or buffer.memory is not Memory.HBM:
            continue
        binding = program.inputs[positions[0]]
        start, end = extents[index]
        if (
            start == end
            or binding.offset != 0
            or tuple(binding.shape) != tuple(buffer.shape)
            or tuple(binding.strides) != row_major_strides(buffer.shape)
        ):
            continue
        # another range starting before this one and ending after its start, or starting within it (this one is
        # among those: it starts within itself)
        first, past = bisect.bisect_left(starts, start), bisect.bisect_left(starts, end)
        shared = (first > 0 and reach[first - 1] > start) or past - first > 1
        if not shared:
            found[positions[0]] = index
    return found


def _byte_hull(view: np.ndarray, address: int) -> tuple[int, int]:
    """The bytes [low, high) a view at `address` spans."""
    low, high = reach(view)
    return address + low, address + high


@dataclass(frozen=True)
class _Rebind:
    """A step that reads bound inputs: where it is in the tape, how to make it, and, per role reading one,
    (input position, byte offset of the view's element 0 from the start of the input)."""

    position: int
    maker: tape.Maker
    views: Mapping[str, np.ndarray]
    roles: tuple[tuple[str, int, int], ...]


class InputBinding:
    """Which inputs a program's steady runs read in place, and the tape steps that read them."""

    def __init__(self, inputs: dict[int, int], rebinds: list[_Rebind]) -> None:
        self.inputs = inputs  # input position -> its buffer
        self._rebinds = rebinds

    @classmethod
    def build(
        cls,
        candidates: Mapping[int, np.ndarray],
        buffers: Mapping[int, int],
        sources: Sequence[Source],
        addresses: Addresses | None = None,
    ) -> InputBinding:
        """The binding of the `candidates` (input position -> the host array holding exactly its buffer) that
        every recorded step allows; `buffers` maps input positions to buffers; `addresses`, the views' addresses
        (shared with the first run's other analyses)."""
        address = (addresses if addresses is not None else Addresses()).of
        hulls = sorted((_byte_hull(array, address(array)), position) for position, array in candidates.items())
        lows = [low for (low, _), _ in hulls]
        refused: set[int] = set()
        found: list[tuple[int, tape.Maker | None, Mapping[str, np.ndarray], list[tuple[str, int, int]]]] = []
        for step_position, (maker, views) in enumerate(sources):
            roles = []
            for role, view in views.items():
                if not isinstance(view, np.ndarray) or view.size == 0:
                    continue
                start_address = address(view)
                low, high = _byte_hull(view, start_address)
                index = bisect.bisect_right(lows, low) - 1
                for near in (index, index + 1):
                    if not 0 <= near < len(hulls):
                        continue
                    (start, end), input_position = hulls[near]
                    if high <= start or end <= low:
                        continue
                    if maker is None or low < start or high > end:
                        refused.add(input_position)  # cannot be made again, or reaches past the input
                    else:
                        roles.append((role, input_position, start_address - start))
            if roles:
                found.append((step_position, maker, views, roles))
        rebinds = []
        for step_position, maker, views, roles in found:
            kept = tuple(role for role in roles if role[1] not in refused)
            if kept:
                assert maker is not None
                rebinds.append(_Rebind(step_position, maker, views, kept))
        bound = {position: buffers[position] for position in candidates if position not in refused}
        return cls(bound, rebinds)

    def steps(self, steps: list[tape.Step], arrays: Mapping[int, np.ndarray]) -> list[tape.Step]:
        """The tape's `steps` with those that read an input of `arrays` (input position -> the caller's
        C-contiguous array) made again over it; the others are the tape's own. Holds nothing of `arrays` after the
        caller drops the list."""
        if not arrays:
            return steps
        raw = {position: array.reshape(-1).view(np.uint8) for position, array in arrays.items()}
        made = list(steps)
        for rebind in self._rebinds:
            views = None
            for role, position, offset in rebind.roles:
                data = raw.get(position)
                if data is None:
                    continue
                if views is None:
                    views = dict(rebind.views)
                old = views[role]
                views[role] = np.ndarray(old.shape, old.dtype, buffer=data, offset=offset, strides=old.strides)
            if views is not None:
                made[rebind.position] = rebind.maker(views)
        return made
