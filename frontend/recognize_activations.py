"""Activation functions spelled out in model code, recognised in Dynamo's graph before AOTAutograd traces it.

Input contract: the FX graph Dynamo hands the backend (torch functions, operators and tensor methods on Python
scalars and tensors), before any tracing.

Output guarantee: each tanh approximation of GELU written out as arithmetic (GPT-2's `NewGELUActivation`,
`gelu_new`: `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))))`, products and sums in either
operand order, scalars on either side) becomes one `torch.nn.functional.gelu(x, approximate="tanh")` node with
the metadata (source line, module path) of the product it replaces. Intermediates that something else reads stay
for it; the rest of the chain is erased. Anything else is left alone.

Why before tracing: torch-recognize-activations does the same on the torch dialect, which is enough for
inference; in training AOTAutograd differentiates the chain op by op first, so the forward saves four
intermediates of the activation's size for a backward that is a dozen elementwise ops. Recognised here, the
forward computes one GELU and saves its input, and the backward is one `gelu_backward`, both lowered as single
passes. The function computes in fp32 and rounds once, where the chain rounds every step in a 16-bit dtype:
the two differ by a few units in the last place, within the dtype's tolerance.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715

_MULTIPLY: tuple[Callable[..., Any], ...] = (operator.mul, torch.mul)
_ADD: tuple[Callable[..., Any], ...] = (operator.add, torch.add)
_POWER: tuple[Callable[..., Any], ...] = (operator.pow, torch.pow)
_TANH: tuple[Callable[..., Any], ...] = (torch.tanh,)
_METHODS = {"mul": _MULTIPLY, "add": _ADD, "pow": _POWER, "tanh": _TANH}


def _is_call(node: Any, functions: tuple[Callable[..., Any], ...]) -> bool:
    """Whether `node` calls one of `functions`, as a function or as the tensor method of the same name."""
    if not isinstance(node, torch.fx.Node) or node.kwargs:
        return False
    if node.op == "call_function":
        return node.target in functions
    return node.op == "call_method" and _METHODS.get(str(node.target)) is functions


def _close(value: object, expected: float) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isclose(value, expected, rel_tol=1e-6)


def _scaled(node: Any, factor: float) -> torch.fx.Node | None:
    """t when `node` is `t * factor` or `factor * t`."""
    if not _is_call(node, _MULTIPLY) or len(node.args) != 2:
        return None
    first, second = node.args
    if _close(second, factor) and isinstance(first, torch.fx.Node):
        return first
    if _close(first, factor) and isinstance(second, torch.fx.Node):
        return second
    return None


def _tensor_sum(node: Any) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(a, b) when `node` is `a + b` of two graph values."""
    if not _is_call(node, _ADD) or len(node.args) != 2:
        return None
    first, second = node.args
    if isinstance(first, torch.fx.Node) and isinstance(second, torch.fx.Node):
        return first, second
    return None


def _cubed(node: Any) -> torch.fx.Node | None:
    """x when `node` is `pow(x, 3)` or `x ** 3`."""
    if not _is_call(node, _POWER) or len(node.args) != 2 or not _close(node.args[1], 3.0):
        return None
    return node.args[0] if isinstance(node.args[0], torch.fx.Node) else None


def _tanh_gelu_input(node: torch.fx.Node) -> torch.fx.Node | None:
    """x when `node` computes the tanh approximation of GELU of x as arithmetic, else None."""
    if not _is_call(node, _MULTIPLY) or len(node.args) != 2:
        return None
    for half_x, one_plus_tanh in (node.args, node.args[::-1]):
        x = _scaled(half_x, 0.5)
        tanh = _plus_one(one_plus_tanh)
        if x is None or tanh is None or not _is_call(tanh, _TANH) or len(tanh.args) != 1:
            continue
        terms = _tensor_sum(_scaled(tanh.args[0], _SQRT_2_OVER_PI))
        if terms is None:
            continue
        for linear, cubic_term in (terms, terms[::-1]):
            if linear is x and _cubed(_scaled(cubic_term, _CUBIC)) is x:
                return x
    return None


def _plus_one(node: Any) -> torch.fx.Node | None:
    """t when `node` is `t + 1` or `1 + t`."""
    if not _is_call(node, _ADD) or len(node.args) != 2:
        return None
    first, second = node.args
    if _close(second, 1.0) and isinstance(first, torch.fx.Node):
        return first
    if _close(first, 1.0) and isinstance(second, torch.fx.Node):
        return second
    return None


def recognize_activations(graph_module: torch.fx.GraphModule) -> int:
    """Replace every spelled-out tanh GELU of `graph_module` by one call; the number replaced."""
    graph = graph_module.graph
    replaced = 0
    for node in list(graph.nodes):
        x = _tanh_gelu_input(node)
        if x is None:
            continue
        with graph.inserting_before(node):
            gelu = graph.call_function(torch.nn.functional.gelu, (x,), {"approximate": "tanh"})
        gelu.meta = dict(node.meta)
        node.replace_all_uses_with(gelu)
        _erase_unused(graph, node, stop=x)
        replaced += 1
    if replaced:
        graph_module.recompile()
    return replaced


def _erase_unused(graph: torch.fx.Graph, node: torch.fx.Node, stop: torch.fx.Node) -> None:
    """Erase `node` and, transitively, the operands it was the last reader of, down to `stop` (the GELU's input).

    Only the chain's own arithmetic is erased (graph-wide dead-code elimination would also drop in-place method
    calls whose results are unused)."""
    pending, erased = [node], set()
    while pending:
        current = pending.pop()
        if current is stop or current in erased or current.users:
            continue
        if current.op not in ("call_function", "call_method"):
            continue
        operands = [arg for arg in current.args if isinstance(arg, torch.fx.Node)]
        graph.erase_node(current)
        erased.add(current)
        pending.extend(operands)
