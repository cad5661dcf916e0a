"""`Module.to("neuron")`, `.cpu()` and `.neuron()` keep a parameter shared by several modules shared.

A module's conversion (`nn.Module._apply`) changes a CPU or CUDA parameter in place (`param.data = ...`), so a
parameter held by two modules (GPT-2's token embedding and its output projection, every transformers model with
tied word embeddings) stays one object. For a PrivateUse1 device torch cannot change the tensor in place (its
tensors' types are not "shallow-copy compatible" with the CPU's) and makes a new Parameter for every module that
holds the old one: the tie breaks silently, each copy gets half of the gradient and the two drift apart in
training. `install` wraps `_apply` so that, after the outermost call of a conversion, every slot (parameter or
buffer) that held one tensor before holds the first slot's new tensor again. When the conversion kept the tie
(CPU and CUDA conversions) nothing is reassigned.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import torch

_Slot = tuple[torch.nn.Module, str, str]  # module, "_parameters" or "_buffers", key

_converting = threading.local()


def _shared_slots(root: torch.nn.Module) -> list[list[_Slot]]:
    """The slots of `root`'s tree holding the same tensor, one list per tensor held by more than one slot."""
    by_tensor: dict[int, list[_Slot]] = {}
    for module in root.modules():
        for table in ("_parameters", "_buffers"):
            for key, value in getattr(module, table).items():
                if value is not None:
                    by_tensor.setdefault(id(value), []).append((module, table, key))
    return [slots for slots in by_tensor.values() if len(slots) > 1]


def _retie(groups: list[list[_Slot]]) -> None:
    for (first_module, first_table, first_key), *others in groups:
        converted = getattr(first_module, first_table)[first_key]
        for module, table, key in others:
            if getattr(module, table)[key] is not converted:
                getattr(module, table)[key] = converted


def install() -> None:
    """Wrap `torch.nn.Module._apply` (once) so that conversions keep shared parameters and buffers shared."""
    original: Callable[..., Any] = torch.nn.Module._apply
    if getattr(original, "keeps_shared_tensors", False):
        return

    @functools.wraps(original)
    def _apply(self: torch.nn.Module, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        if getattr(_converting, "active", False) or not recurse:  # a child's part of the outermost conversion
            return original(self, fn, recurse)
        groups = _shared_slots(self)
        _converting.active = True
        try:
            result = original(self, fn, recurse)
        finally:
            _converting.active = False
        _retie(groups)
        return result

    _apply.keeps_shared_tensors = True  # type: ignore[attr-defined]
    torch.nn.Module._apply = _apply  # type: ignore[method-assign]
