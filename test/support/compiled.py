"""Compile a function with the neuron-mlir backend and compare it with eager PyTorch (not collected: no test_ prefix)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

import neuron_mlir
from support import assert_close_to_torch


def run_compiled(fn: Callable[..., Any], *inputs: Any, options: dict[str, Any] | None = None) -> Any:
    """`fn(*inputs)` through `torch.compile(fn, backend="neuron-mlir", options=options)`, on fresh clones of the
    inputs."""
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(fn, backend="neuron-mlir", options=options)
    return compiled(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])


def check_compiled(
    fn: Callable[..., Any],
    *inputs: Any,
    skip: Callable[[int], bool] | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """Every result of the compiled `fn` (compiled with `options`) equals eager's within the tolerance of its
    dtype (`skip(i)` leaves out result i), and no node ran on the CPU. Returns the compiled results."""
    expected = fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    actual = run_compiled(fn, *inputs, options=options)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, f"fell back to the CPU: {stats['fallback_ops']}"
    assert stats["graphs_compiled"] >= 1
    got, want = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    assert len(got) == len(want), f"{len(got)} results, eager gave {len(want)}"
    for index, (a, e) in enumerate(zip(got, want, strict=True)):
        if skip is not None and skip(index):
            continue
        assert_close_to_torch(a, e, f"result {index}")
    return actual
