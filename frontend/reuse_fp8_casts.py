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

The backward may reach the same cast through a view: a Linear layer's input [B, S, K] is cast whole in the
forward and viewed as [B * S, K] after, while the backward views the fp32 input first and casts the view. An
elementwise op of a view of a tensor is the same view of the op of the tensor, and a maximum over every element
does not depend on the shape, so such a chain matches the forward's chain on the tensor itself, and its cast
becomes a view of the forward's fp8 tensor (the backward then receives 1 byte per element instead of the fp32
input, and neither takes the maximum nor casts again).
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


def _key(node: torch.fx.Node, same: dict[torch.fx.Node, torch.fx.Node], first: torch.fx.Node | None = None) -> Any:
    """What the node computes, as a key equal for equal calls; `first` replaces its first argument."""

    def canonical(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return ("node", id(same.get(value, value)))
        if isinstance(value, list | tuple):
            return (type(value).__name__, tuple(canonical(v) for v in value))
        if isinstance(value, dict):
            return ("dict", tuple(sorted((k, canonical(v)) for k, v in value.items())))
        return ("value", type(value).__name__, repr(value))

    args = node.args if first is None else (first, *node.args[1:])
    return (node.target, canonical(args), canonical(node.kwargs))


_VIEWS = frozenset({torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default})
_FULL_MAXIMA = frozenset({torch.ops.aten.max.default, torch.ops.aten.min.default})


def _value(node: Any) -> torch.Tensor | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _contiguous_view(node: torch.fx.Node) -> bool:
    """Whether the node views a contiguous tensor as another shape of the same elements."""
    source = node.args[0] if node.args else None
    value, base = _value(node), _value(source)
    return (
        node.op == "call_function"
        and node.target in _VIEWS
        and value is not None
        and base is not None
        and base.is_contiguous()
        and value.numel() == base.numel()
    )


def _viewed_equal(
    node: torch.fx.Node, viewed: dict[torch.fx.Node, torch.fx.Node], forward_calls: dict[Any, torch.fx.Node], same: Any
) -> tuple[str, torch.fx.Node] | None:
    """For a backward call whose first argument is a view of forward tensor F: ("view", G) when the call is an
    elementwise op and the forward computes the same op G of F (so the call is G viewed), ("same", G) when it is
    the maximum or minimum of every element and the forward takes G of F. Other arguments must not be views."""
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node) or source not in viewed:
        return None
    if any(isinstance(arg, torch.fx.Node) and arg in viewed for arg in (*node.args[1:], *node.kwargs.values())):
        return None
    match = forward_calls.get(_key(node, same, first=viewed[source]))
    value, base, result = _value(node), _value(source), _value(match)
    if match is None or value is None or base is None or result is None:
        return None
    if node.target in _FULL_MAXIMA and len(node.args) == 1 and not node.kwargs and value.dim() == 0:
        return "same", match
    forward_base = _value(viewed[source])
    elementwise = value.shape == base.shape and forward_base is not None and result.shape == forward_base.shape
    if elementwise and result.is_contiguous():
        return "view", match
    return None


def reuse_forward_fp8_casts(graph: torch.fx.Graph, in_forward: list[bool]) -> int:
    """Replace the backward's repeated fp8 casts of forward values (and the scale computations they read) by the
    forward's; `in_forward[i]` tells whether the graph's i-th node belongs to the forward. Returns how many
    nodes were replaced."""
    nodes = list(graph.nodes)
    forward_calls: dict[Any, torch.fx.Node] = {}
    same: dict[torch.fx.Node, torch.fx.Node] = {}  # backward node -> the forward node computing the same value
    viewed: dict[torch.fx.Node, torch.fx.Node] = {}  # backward node -> forward node F: the node is a view of F
    forward_nodes: set[torch.fx.Node] = set()
    for node, forward in zip(nodes, in_forward, strict=True):
        if forward:
            forward_nodes.add(node)
        if not _deterministic(node):
            continue
        key = _key(node, same)
        if forward:
            forward_calls.setdefault(key, node)
        elif key in forward_calls:
            same[node] = forward_calls[key]
        elif _contiguous_view(node):
            source = node.args[0]
            assert isinstance(source, torch.fx.Node)
            origin = same.get(source, source)
            if origin in forward_nodes:
                viewed[node] = origin
        else:
            equal = _viewed_equal(node, viewed, forward_calls, same)
            if equal is not None:
                (same if equal[0] == "same" else viewed)[node] = equal[1]
    if not same and not viewed:
        return 0
    feeds_cast: set[torch.fx.Node] = set()  # on the graph as it came: a cast replaced by a view still counts
    for node, forward in zip(reversed(nodes), reversed(in_forward), strict=True):
        if forward:
            continue
        if _is_fp8_cast(node) or any(user in feeds_cast for user in node.users):
            feeds_cast.add(node)
    replaced = _cast_views(graph, viewed, forward_nodes)
    handed_over: set[torch.fx.Node] = set()
    for node in reversed(nodes):
        if node in same and node in feeds_cast:
            node.replace_all_uses_with(same[node])
            graph.erase_node(node)
            handed_over.add(same[node])
            replaced += 1
    for node in reversed(list(viewed)):  # the viewed chains whose casts became views of the forward's
        if not node.users:
            graph.erase_node(node)
    for node in handed_over:
        if _is_fp8_cast(node) and _transposed(node):
            _hand_over_in_storage_order(graph, node, set(nodes[: in_forward.count(True)]))
    return replaced


def _cast_views(graph: torch.fx.Graph, viewed: dict[torch.fx.Node, torch.fx.Node], forward: set[torch.fx.Node]) -> int:
    """Make each backward fp8 cast that is a view of a forward cast read that view instead (the forward's own view
    node of the same shape when it has one). Returns how many casts were replaced."""
    replaced = 0
    for node, origin in viewed.items():
        if not _is_fp8_cast(node):
            continue
        shape = list(node.meta["val"].shape)
        existing = [
            user for user in origin.users
            if user in forward and user.target in _VIEWS and list(user.meta["val"].shape) == shape
        ]  # fmt: skip
        if existing:
            view = existing[0]
        else:
            with graph.inserting_before(node):
                view = graph.call_function(torch.ops.aten.view.default, (origin, shape))
            view.meta = {key: value for key, value in node.meta.items() if key != "partitioner_tag"}
        node.replace_all_uses_with(view)
        replaced += 1
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
