"""Host addresses of NumPy views, looked up once each for the analyses that follow a first run.

A first run's tape is analysed three times over the same views: which bytes later runs must fill again
(`runtime.refill`), which copies the tape need not make (`runtime.copy_forwarding`) and which inputs steady runs
read in place (`runtime.bound_inputs`). Each needs the address of every view's element 0, and NumPy gives it only
through the array interface, a dictionary built afresh per call (about a microsecond, as much as the rest of an
analysis's work on a view). `Addresses` remembers the address of each view it was asked about, or was told by
whoever made the view (`note`: a first run's recorder, from the instruction plans' operands).

Guarantee: `Addresses().of(view)` is `view.__array_interface__["data"][0]`, given that every address `note` was
told is the view's. The memo holds a reference to every view it answers for, so an id it keys on never passes to
another object while the memo lives; drop it with the analyses.
"""

from __future__ import annotations

import numpy as np


class Addresses:
    """`of(view)`: the host address of `view`'s element 0, remembered per view (module docstring)."""

    __slots__ = ("_held", "_known")

    def __init__(self) -> None:
        self._known: dict[int, int] = {}  # id(view) -> address
        self._held: list[np.ndarray] = []  # the views keyed on, alive as long as their ids are keys

    def copy(self) -> Addresses:
        """A memo that knows what this one knows, and learns apart from it."""
        copied = Addresses()
        copied._known = dict(self._known)
        copied._held = list(self._held)
        return copied

    def note(self, view: np.ndarray, address: int) -> None:
        """Tell the memo `view`'s address, known where the view was made (an instruction plan's operand)."""
        if id(view) not in self._known:
            self._known[id(view)] = address
            self._held.append(view)

    def of(self, view: np.ndarray) -> int:
        """The host address of `view`'s element 0."""
        address = self._known.get(id(view))
        if address is None:
            address = self._known[id(view)] = view.__array_interface__["data"][0]
            self._held.append(view)
        return address


def reach(view: np.ndarray) -> tuple[int, int]:
    """The bytes [low, high) `view` spans around its element 0's address (NumPy's `byte_bounds` less that address,
    without reading the array interface)."""
    low = high = 0
    if view.size == 0:
        return 0, 0
    for stride, extent in zip(view.strides, view.shape, strict=True):
        step = stride * (extent - 1)
        if step < 0:
            low += step
        else:
            high += step
    return low, high + view.itemsize
