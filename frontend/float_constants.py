"""Floats that Dynamo passes as graph inputs, compiled as the constants they were when traced.

Input: a Dynamo FX graph. Under `dynamic=True` Dynamo does not specialise Python floats
(`torch._dynamo.config.specialize_float` is False): a float read from a global or an attribute, such as the
`math.pi` of GPT-2's tanh GELU (`sqrt(2 / pi)`), becomes a 0-d float64 input of the graph (its placeholder's
`grapharg.pass_arg_as_tensor`), read with `.item()`, and the arithmetic on it host scalar ops. The graph then
scales by a value unknown when compiling: the GELU's arithmetic is no activation `recognize_activations` can
name, and its constant is computed on the CPU.

Output (`float_constants`, `specialise`): the floats whose placeholders are read only through `.item()` and whose
source is not an argument of the compiled function (an argument may change at every call, a module's constant
seldom does), each read replaced by the value seen, and the Python scalar arithmetic on such values folded. The
compiled graph is valid only while each such input keeps that value: `ValueSpecialised` checks the values at
every call and compiles the graph again for values it has not seen, with a note in
`neuron_mlir.stats()["size_notes"]`, so a call never runs with a stale constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from neuron_mlir.frontend import stats as stats_module

Number = int | float | bool


def zero_dim_inputs(graph_module: torch.fx.GraphModule) -> list[tuple[int, torch.fx.Node, Any, torch.Tensor]]:
    """The placeholders of `graph_module` whose traced example is a 0-d tensor: (position among the placeholders,
    node, Dynamo's graph argument, example); none for Dynamo's wrapper of nested inputs (`GmWrapper`)."""
    if not hasattr(graph_module, "graph"):
        return []
    found = []
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    for position, node in enumerate(placeholders):
        argument = node.meta.get("grapharg")
        example = getattr(argument, "example", None)
        if isinstance(example, torch.Tensor) and example.dim() == 0:
            found.append((position, node, argument, example))
    return found


def specialised_copy(
    graph_module: torch.fx.GraphModule, rewrite: Callable[[torch.fx.Graph, list[torch.fx.Node]], None]
) -> torch.fx.GraphModule:
    """A copy of `graph_module` whose graph `rewrite` changed (given the copy's graph and placeholders), with
    Dynamo's notes on the graph (parameter names, ...)."""
    graph = torch.fx.Graph()
    output = graph.graph_copy(graph_module.graph, {})
    graph.output(output)
    rewrite(graph, [n for n in graph.nodes if n.op == "placeholder"])
    specialised = torch.fx.GraphModule(graph_module, graph)
    specialised.meta = dict(graph_module.meta)
    return specialised


def float_constants(graph_module: torch.fx.GraphModule) -> dict[int, float]:
    """The floats of `graph_module` that `specialise` can make constants: placeholder position -> value seen."""
    from torch._dynamo.source import LocalSource

    found: dict[int, float] = {}
    for position, node, argument, example in zero_dim_inputs(graph_module):
        if not getattr(argument, "pass_arg_as_tensor", False) or not example.dtype.is_floating_point:
            continue
        if isinstance(argument.source, LocalSource):  # the function's own argument: it may change at each call
            continue
        if not node.users or not all(user.op == "call_method" and user.target == "item" for user in node.users):
            continue
        found[position] = float(example)
    return found


def specialise(graph_module: torch.fx.GraphModule, values: dict[int, float]) -> torch.fx.GraphModule:
    """A copy of `graph_module` whose float inputs at `values`'s positions read as those values, the scalar
    arithmetic on them folded. The placeholders stay (the caller still passes them), unused."""

    def fold(graph: torch.fx.Graph, placeholders: list[torch.fx.Node]) -> None:
        known: dict[torch.fx.Node, Number] = {}
        for position, value in values.items():
            for read in list(placeholders[position].users):
                known[read] = value
        _fold(graph, known)

    return specialised_copy(graph_module, fold)


def fold_scalar_arithmetic(graph_module: torch.fx.GraphModule) -> int:
    """Fold, in place, the Python scalar arithmetic of `graph_module` on constants: a trace that specialised
    `math.pi` may still hold `2.0 / 3.14159...` and `torch._sym_sqrt` of it as nodes. The number folded."""
    if not hasattr(graph_module, "graph"):  # Dynamo's wrapper of nested inputs (`GmWrapper`): left as it is
        return 0
    folded = _fold(graph_module.graph, {})
    if folded:
        graph_module.recompile()
    return folded


# functions of Python numbers only, without side effects: evaluated when every argument is known
_SCALAR_MODULES = ("_operator", "operator", "math")
_SCALAR_TORCH_FUNCTIONS = {"_sym_sqrt", "sym_float", "sym_int", "sym_max", "sym_min", "sym_not"}


def _scalar_function(target: Any) -> bool:
    module = getattr(target, "__module__", None)
    return module in _SCALAR_MODULES or (module == "torch" and target.__name__ in _SCALAR_TORCH_FUNCTIONS)


def _fold(graph: torch.fx.Graph, known: dict[torch.fx.Node, Number]) -> int:
    """Evaluate the scalar functions of `graph` whose arguments are numbers or nodes in `known` (node -> value),
    give their users the values and erase them; the number of nodes erased."""
    for node in list(graph.nodes):
        if node in known or node.op != "call_function":
            continue
        target = node.target
        if not _scalar_function(target):
            continue
        args = torch.fx.node.map_arg(node.args, lambda a: known.get(a, a))
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: known.get(a, a))
        leaves: list[Any] = []
        torch.fx.node.map_aggregate((args, kwargs), leaves.append)
        if not all(isinstance(leaf, (int, float, bool)) for leaf in leaves):
            continue
        try:
            result = target(*args, **kwargs)
        except (ArithmeticError, TypeError, ValueError):  # left to the graph, which raises it at run time as eager does
            continue
        if isinstance(result, (int, float, bool)):
            known[node] = result
    for node in known:  # each folded node's uses read its value
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda a: known.get(a, a))
            user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a: known.get(a, a))
    erased = 0
    for node in reversed(list(graph.nodes)):
        if node in known and not node.users:
            graph.erase_node(node)
            erased += 1
    graph.lint()
    return erased


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


class ValueSpecialised:
    """A Dynamo graph compiled once per set of values of some of its inputs: `values` maps an input's position to
    the value it had when traced, `specialise(graph_module, values)` makes the graph for a set of values, `read`
    reads an input's value at a call (`float` for this module's floats), and `compile` compiles a graph module
    with the same inputs into what Dynamo calls with the graph's inputs as arguments. A call whose inputs hold
    values not compiled yet compiles the graph again for them, with a note in `stats()["size_notes"]`."""

    def __init__(
        self,
        graph_module: torch.fx.GraphModule,
        values: Mapping[int, Number],
        compile: Callable[[torch.fx.GraphModule], Any],
        specialise: Callable[[torch.fx.GraphModule, dict[int, Any]], torch.fx.GraphModule] = specialise,
        read: Callable[[Any], Number] = float,
        what: str = "float inputs",
    ):
        self.graph_module = graph_module
        self.positions = sorted(values)
        self.compile = compile
        self.specialise = specialise
        self.read = read
        self.what = what
        self.by_values: dict[tuple[Number, ...], Any] = {}
        self.first = tuple(values[p] for p in self.positions)
        self.by_values[self.first] = compile(specialise(graph_module, dict(values)))

    def __call__(self, *args: Any) -> Any:
        seen = tuple(self.read(args[p]) for p in self.positions)
        compiled = next((c for key, c in self.by_values.items() if all(map(_same, key, seen))), None)
        if compiled is None:
            stats_module.record_size_note(
                f"{self.what} {self.first} of a graph compiled as constants are {seen}: compiled again for them"
            )
            values = dict(zip(self.positions, seen, strict=True))
            compiled = self.compile(self.specialise(self.graph_module, values))
            self.by_values[seen] = compiled
        return compiled(*args)
