"""A backward that casts a forward value to fp8 again reads the forward's cast instead.

Float8 training with dynamic scales (torchao's `Float8Linear`) keeps the high-precision input and weight for the
backward and casts them to fp8 a second time there: the same maximum of magnitudes, the same scale, the same
scaled, clamped cast, of the same tensors. In the joint graph both casts read the same nodes, so the second is a
copy of the first; AOTAutograd's default partition keeps it in the backward, which then reads the whole fp32
weight twice more per step (the maximum, then the cast) to rebuild fp8 bytes the forward already had.

`reuse_forward_fp8_casts` replaces, in the joint graph before partitioning, every backward node that is the same
call as a forward node (same target, same arguments after this replacement, deterministic) and that an fp8 cast
of the backward is computed from, by that forward node. The partition then hands the forward's fp8 tensor (a
quarter of the fp32 bytes) and its scale to the backward as saved values. A Linear layer's fp8 weight is the cast
of `weight.t()`, stored column-major (in the weight's own order); a saved value arrives in the backward as a
row-major copy, which would be W^T laid out anew, so such a value is handed over as its transpose (the tensor as
stored) and the backward reads it through a transpose: W again, rows on partitions for dX = dY W. The values are
the ones the backward would have computed, bit for bit (the same deterministic ops on the same inputs), so
training numerics do not change. Nothing else is merged: a recomputation that does not feed an fp8 cast stays
where the graph put it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

_FP8 = frozenset({torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz})


def _is_fp8_cast(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return (
        node.op == "call_function"
        and node.target in (torch.ops.aten._to_copy.default, torch.ops.prims.convert_element_type.default)
        and isinstance(value, torch.Tensor)
        and value.dtype in _FP8
    )


def _deterministic(node: torch.fx.Node) -> bool:
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags and not target._schema.is_mutable


def _key(node: torch.fx.Node, same: dict[torch.fx.Node, torch.fx.Node]) -> Any:
    def canonical(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return ("node", id(same.get(value, value)))
        if isinstance(value, list | tuple):
            return (type(value).__name__, tuple(canonical(v) for v in value))
        if isinstance(value, dict):
            return ("dict", tuple(sorted((k, canonical(v)) for k, v in value.items())))
        return ("value", type(value).__name__, repr(value))

    return (node.target, canonical(node.args), canonical(node.kwargs))


def reuse_forward_fp8_casts(graph: torch.fx.Graph, in_forward: list[bool]) -> int:
    """Replace the backward's repeated fp8 casts of forward values (and the scale computations they read) by the
    forward's; `in_forward[i]` tells whether the graph's i-th node belongs to the forward. Returns how many
    nodes were replaced."""
    nodes = list(graph.nodes)
    forward_calls: dict[Any, torch.fx.Node] = {}
    same: dict[torch.fx.Node, torch.fx.Node] = {}  # backward node -> the forward node computing the same value
    for node, forward in zip(nodes, in_forward, strict=True):
        if not _deterministic(node):
            continue
        key = _key(node, same)
        if forward:
            forward_calls.setdefault(key, node)
        elif key in forward_calls:
            same[node] = forward_calls[key]
    if not same:
        return 0
    feeds_cast: set[torch.fx.Node] = set()
    for node, forward in zip(reversed(nodes), reversed(in_forward), strict=True):
        if forward:
            continue
        if _is_fp8_cast(node) or any(user in feeds_cast for user in node.users):
            feeds_cast.add(node)
    replaced = 0
    handed_over: set[torch.fx.Node] = set()
    for node in reversed(nodes):
        if node in same and node in feeds_cast:
            node.replace_all_uses_with(same[node])
            graph.erase_node(node)
            handed_over.add(same[node])
            replaced += 1
    for node in handed_over:
        if _is_fp8_cast(node) and _transposed(node):
            _hand_over_in_storage_order(graph, node, set(nodes[: in_forward.count(True)]))
    return replaced


def _transposed(node: torch.fx.Node) -> bool:
    """Whether the node's value is a 2-D tensor stored column-major (a cast of a Linear layer's `weight.t()`)."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dim() != 2 or min(value.shape) < 2:
        return False
    return tuple(value.stride()) == (1, value.shape[0])


def _hand_over_in_storage_order(graph: torch.fx.Graph, node: torch.fx.Node, forward: set[torch.fx.Node]) -> None:
    """Make the backward read `node` (a column-major forward value) through the transpose of its row-major
    transpose: the value handed over (saved) is then the tensor as it is stored, and the backward's view of it
    is W again, not a transposed copy that its matmuls would transpose back tile by tile."""
    readers = [user for user in node.users if user not in forward]
    if not readers:
        return
    with graph.inserting_after(node):
        stored = graph.call_function(torch.ops.aten.permute.default, (node, [1, 0]))
    stored.meta = {**node.meta, "val": node.meta["val"].permute(1, 0)}
    first = min(readers, key=lambda user: list(graph.nodes).index(user))
    with graph.inserting_before(first):
        view = graph.call_function(torch.ops.aten.permute.default, (stored, [1, 0]))
    view.meta = {key: value for key, value in node.meta.items() if key != "partitioner_tag"}
    view.meta["val"] = node.meta["val"]
    for reader in readers:
        reader.replace_input_with(node, view)
