"""Integer tensors that a graph reads as sizes, compiled as the values they had when traced.

Input: a Dynamo FX graph whose tracing by AOTAutograd failed because a size came from a tensor's value: a 0-d
integer tensor input given to a factory or a size argument (`torch.arange(0, height)` with `height` a tensor, as
SAM 3's box position bias builds its grid from `spatial_shapes` entries). AOTAutograd reads such a value as an
unbacked size, and a later op that must decide something about it (`view(..., -1, ...)` asks whether the element
count is zero) cannot be traced: without this pass the whole graph runs eagerly on the CPU.

Output (`size_inputs`, `specialise_sizes`): those inputs' values as constants where they are read as sizes (their
other uses, tensor arithmetic, still read the input), so the graph traces with static sizes. The compiled graph
is valid only while each such input keeps its value: `ValueSpecialised` reads the values at every call (a host
read of one element each, which eager's own `arange` makes too) and compiles the graph again for values it has
not seen, with a note in `neuron_mlir.stats()["size_notes"]`.

Only graphs that cannot be traced otherwise are specialised (`backend._compile_dynamo_graph` tries this after the
trace fails): a size read from a tensor that traces is compiled with the data-dependent path
(frontend/data_dependent.py), which needs no recompilation when the value changes.
"""

from __future__ import annotations

from typing import Any

import torch

from neuron_mlir.frontend.float_constants import specialised_copy, zero_dim_inputs

# where a number is a size: factories whose positional and `start`/`end`/`step`/`size` arguments are sizes, and
# tensor methods whose arguments after the tensor are
_SIZE_FUNCTIONS = frozenset(
    {torch.arange, torch.range, torch.zeros, torch.ones, torch.empty, torch.full, torch.rand, torch.randn}
)
_SIZE_KEYWORDS = frozenset({"start", "end", "step", "size"})
_SIZE_METHODS = frozenset(
    {"view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "new_full", "narrow"}
)


def _read_as_size(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    """Whether `user` reads `node` as a size (directly, or inside a list or tuple of sizes)."""
    if user.op == "call_function" and user.target in _SIZE_FUNCTIONS:
        positional = user.args[:2] if user.target is torch.full else user.args
        in_size_keyword = any(_mentions(user.kwargs.get(k), node) for k in _SIZE_KEYWORDS)
        return any(_mentions(a, node) for a in positional) or in_size_keyword
    if user.op == "call_method" and user.target in _SIZE_METHODS:
        return any(_mentions(a, node) for a in user.args[1:])
    return False


def _mentions(argument: Any, node: torch.fx.Node) -> bool:
    if isinstance(argument, list | tuple):
        return any(_mentions(a, node) for a in argument)
    return argument is node


def size_inputs(graph_module: torch.fx.GraphModule) -> dict[int, int]:
    """The 0-d integer tensor inputs of `graph_module` that some op reads as a size: placeholder position ->
    the value traced (the example Dynamo recorded)."""
    found: dict[int, int] = {}
    for position, node, _, example in zero_dim_inputs(graph_module):
        if example.dtype.is_floating_point or example.dtype.is_complex or example.dtype == torch.bool:
            continue
        if any(_read_as_size(node, user) for user in node.users):
            found[position] = int(example)
    return found


def specialise_sizes(graph_module: torch.fx.GraphModule, values: dict[int, Any]) -> torch.fx.GraphModule:
    """A copy of `graph_module` whose integer inputs at `values`'s positions are those values where ops read them
    as sizes; their other uses and the placeholders stay (the caller still passes them)."""

    def substitute(graph: torch.fx.Graph, placeholders: list[torch.fx.Node]) -> None:
        for position, value in values.items():
            node = placeholders[position]
            for user in list(node.users):
                if not _read_as_size(node, user):
                    continue
                if user.op == "call_method":  # the tensor itself is the first argument, kept
                    user.args = (user.args[0], *_substituted(user.args[1:], node, int(value)))
                else:
                    user.args = _substituted(user.args, node, int(value))
                user.kwargs = {k: _substituted(v, node, int(value)) for k, v in user.kwargs.items()}
        graph.lint()

    return specialised_copy(graph_module, substitute)


def _substituted(argument: Any, node: torch.fx.Node, value: int) -> Any:
    if isinstance(argument, list | tuple):
        return type(argument)(_substituted(a, node, value) for a in argument)
    return value if argument is node else argument
