"""Activation functions spelled out in model code, recognised in Dynamo's graph before AOTAutograd traces it.

Input contract: the FX graph Dynamo hands the backend (torch functions, operators and tensor methods on Python
scalars and tensors), before any tracing.

Output guarantee: each tanh approximation of GELU written out as arithmetic (GPT-2's `NewGELUActivation`,
`gelu_new`, in the spellings `ir/activation_patterns.py` accepts) becomes one
`torch.nn.functional.gelu(x, approximate="tanh")` node with the metadata (source line, module path) of the
product it replaces. Intermediates that something else reads stay
for it; the rest of the chain is erased. Anything else is left alone.

Why before tracing: torch-recognize-activations does the same on the torch dialect, which is enough for
inference; in training AOTAutograd differentiates the chain op by op first, so the forward saves four
intermediates of the activation's size for a backward that is a dozen elementwise ops. Recognised here, the
forward computes one GELU and saves its input, and the backward is one `gelu_backward`, both lowered as single
passes. The function computes in fp32 and rounds once, where the chain rounds every step in a 16-bit dtype:
the two differ by a few units in the last place, within the dtype's tolerance.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from neuron_mlir.ir.activation_patterns import Operand, tanh_gelu_input

_MULTIPLY: tuple[Callable[..., Any], ...] = (operator.mul, torch.mul)
_ADD: tuple[Callable[..., Any], ...] = (operator.add, torch.add)
_POWER: tuple[Callable[..., Any], ...] = (operator.pow, torch.pow)
_TANH: tuple[Callable[..., Any], ...] = (torch.tanh,)
_METHODS = {"mul": _MULTIPLY, "add": _ADD, "pow": _POWER, "tanh": _TANH}


def _call_arguments(node: Operand, functions: tuple[Callable[..., Any], ...]) -> tuple[Any, ...] | None:
    """The positional arguments when `node` calls one of `functions` (as a function, or as the tensor method of
    the same name) without keyword arguments, else None."""
    if not isinstance(node, torch.fx.Node) or node.kwargs:
        return None
    if node.op == "call_function" and node.target in functions:
        return node.args
    if node.op == "call_method" and _METHODS.get(str(node.target)) is functions:
        return node.args
    return None


def _pair(arguments: tuple[Any, ...] | None) -> tuple[Operand, Operand] | None:
    return (arguments[0], arguments[1]) if arguments is not None and len(arguments) == 2 else None


class _FxArithmetic:
    """Dynamo's spelling of the operations the activation patterns read: operators, torch functions and tensor
    methods."""

    def product(self, value: Operand) -> tuple[Operand, Operand] | None:
        return _pair(_call_arguments(value, _MULTIPLY))

    def sum(self, value: Operand) -> tuple[Operand, Operand] | None:
        return _pair(_call_arguments(value, _ADD))

    def power(self, value: Operand) -> tuple[Operand, Operand] | None:
        return _pair(_call_arguments(value, _POWER))

    def tanh(self, value: Operand) -> Operand | None:
        arguments = _call_arguments(value, _TANH)
        return arguments[0] if arguments is not None and len(arguments) == 1 else None


def recognize_activations(graph_module: torch.fx.GraphModule) -> int:
    """Replace every spelled-out tanh GELU of `graph_module` by one call; the number replaced."""
    graph = graph_module.graph
    replaced = 0
    for node in list(graph.nodes):
        x = tanh_gelu_input(_FxArithmetic(), node)
        if not isinstance(x, torch.fx.Node):
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
