"""Random draws of a compiled graph made on the host by torch itself (the `fallback_random` option).

Compiled random ops draw from the compiler's counter-based generator (`lowering/convert_torch_to_tile/random.py`):
reproducible under `torch.manual_seed`, the right distribution, not eager PyTorch's numbers. Under
`fallback_random` every random op of a graph is drawn on the host instead, at each call, in the graph's order,
by the same ATen op with the same arguments, from torch's default CPU generator (for a graph of `neuron` tensors,
from the device generator, `frontend/device/random.py`, standing in for it as the device's host draws do). A
model compiled and run eagerly after the same `torch.manual_seed` then draws the same numbers, bit for bit, where
eager's op order is the graph's (AOTAutograd keeps the forward's; a backward has no random op of its own: a
dropout mask is saved by the forward).

Input contract: an AOTAutograd graph (forward, backward or inference) whose nodes carry fake-tensor metadata
(`meta["val"]`), traced with the random ops' decompositions left out (`without_random_decompositions`), so that
its random nodes are the ops eager calls (`exponential` for Gumbel noise, `native_dropout`, `bernoulli.p`, ...).
A random node is a call of one of `DRAWN_ON_HOST`'s ops.

Output guarantee (`lift_random_draws`): the graph has no random node left; each one's result is a new
placeholder after the graph's own, in the random nodes' order, which the returned `HostDraws` computes and
appends to the arguments of every call. `native_dropout` is split: its mask (the only drawn part, whose draw
depends on the input's shape and dtype alone) is the placeholder, and its output the product input * mask *
scale that ATen's kernel computes, in the graph, where the input is. Nothing else in the graph changes.
(Dropout of CPU tensors reaches the graph otherwise: eager's `F.dropout` runs ATen's CPU `_dropout`, not
`native_dropout`, so the backend traces it as that kernel computes it, `dropout_as_on_the_cpu`: a `bernoulli.p`
draw of the noise, drawn on the host like any other, and its products in the graph.)

A draw needs on the host the values it depends on. Tensor arguments whose values an op ignores (the `self` of the
functional forms of in-place draws, `exponential(x)`, `uniform(x)`, ..., and of the `*_like` factories) are
empty tensors of their shape, strides and dtype; sizes are the call's (symbolic sizes are bound from the
inputs). A tensor argument whose values the draw reads (`bernoulli`'s probabilities, `normal`'s means) is an
input of the graph, or computed from constants alone (a `full` of a probability, its views), which the host
computes again as eager does. One computed from the graph's inputs (`bernoulli(x.sigmoid())`) exists only on the
core, mid-program: there the graph is split (`compile_with_host_draws`). The cut follows the graph's node order,
not the capability partitioner's grouping (which could move an independent draw across the cut): region k holds
the nodes between the k-th and the (k+1)-th such draw, each such draw runs alone on the host between two
regions, and each region is compiled with its own draws lifted, so every draw is still made in the graph's
order. The regions are compiled programs like any other; only the split draws' arguments travel through the host.
A draw of a size the graph reads from a tensor's values (`.item()`) is refused with the op and its source line.

Eager makes every draw, read or not; AOTAutograd's trace keeps only what a graph's outputs need. So before the
trace the backend also makes the draws of Dynamo's graph whose results reach no output extra outputs of it
(`keep_dead_draws`), and drops them from the compiled callable's results (`without_extra_outputs`).
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.fx

logger = logging.getLogger("neuron_mlir")

# The ATen ops that draw (by packet): kept whole by the decompositions under `fallback_random` and drawn on the
# host. Composite ops tagged nondeterministic (attention, RNNs with dropout) decompose into these.
DRAWN_ON_HOST = frozenset(
    {
        "rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm",
        "bernoulli", "native_dropout", "uniform", "normal", "normal_functional", "exponential", "cauchy",
        "log_normal", "geometric", "random", "multinomial", "poisson", "binomial", "_standard_gamma",
        "_sample_dirichlet", "rrelu", "rrelu_with_noise", "rrelu_with_noise_functional",
    }
)  # fmt: skip

# Ops whose `self` gives only a shape, strides and dtype: the functional forms of in-place draws and the `*_like`
# factories (their values never reach the result)
_SHAPE_ONLY_SELF = frozenset(
    {
        "rand_like", "randn_like", "randint_like", "uniform", "normal_functional", "exponential", "cauchy",
        "log_normal", "geometric", "random",
    }
)  # fmt: skip


def _packet(node: torch.fx.Node) -> str | None:
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return None
    return target._schema.name.removeprefix("aten::")


def is_random(node: torch.fx.Node) -> bool:
    """Whether `node` is a draw that `fallback_random` makes on the host."""
    target = node.target
    return (
        _packet(node) in DRAWN_ON_HOST
        and isinstance(target, torch._ops.OpOverload)
        and torch.Tag.nondeterministic_seeded in target.tags
        and not (_packet(node) == "native_dropout" and node.args[2:3] == (False,))  # no draw out of training
    )


def without_random_decompositions(table: dict[Any, Any]) -> dict[Any, Any]:
    """`table` without the decompositions of the ops of `DRAWN_ON_HOST`, which would rewrite a draw as the
    compiler's (`rand` and an inverse CDF) where eager calls the op itself."""
    return {
        op: rule
        for op, rule in table.items()
        if not (isinstance(op, torch._ops.OpOverload) and op._schema.name.removeprefix("aten::") in DRAWN_ON_HOST)
    }


# Dynamo's spelling of the draws (functions and tensor methods), for draws whose result nothing reads
_DYNAMO_DRAWS = frozenset(
    {
        "rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "bernoulli", "normal",
        "poisson", "multinomial", "binomial", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
        "feature_alpha_dropout", "rrelu", "native_dropout",
    }
)  # fmt: skip
_DYNAMO_DRAWING_METHODS = frozenset(
    {
        "bernoulli", "bernoulli_", "uniform_", "normal_", "exponential_", "cauchy_", "log_normal_", "geometric_",
        "random_", "multinomial",
    }
)  # fmt: skip


def eager_cpu_dropout(input: torch.Tensor, p: float = 0.5, training: bool = True) -> torch.Tensor:
    """Dropout as ATen's CPU kernel computes it (`_dropout`, which `F.dropout` and `torch.dropout` of CPU tensors
    run): noise = bernoulli(1 - p) in the input's dtype, divided by 1 - p, times the input, so that the backward
    is the gradient times that noise; no draw out of training or at p = 0, the input times a zero at p = 1.
    AOTAutograd traces dropout as `native_dropout` instead, whose mask is the same draw but whose output
    (input * mask * (1 / (1 - p))) and gradient round differently for some p (0.15, 0.45, ...)."""
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input * torch.zeros((), dtype=input.dtype)
    noise = torch.bernoulli(torch.empty_like(input), 1 - p)
    return input * (noise / (1 - p))


def dropout_as_on_the_cpu(graph_module: torch.fx.GraphModule) -> int:
    """Make the dropouts of a Dynamo graph of CPU tensors calls of `eager_cpu_dropout`; returns their number.
    Calls whose probability or training flag is a graph value, and in-place ones, are left alone."""
    count = 0
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target not in (torch.nn.functional.dropout, torch.dropout):
            continue
        names = (
            ("input", "p", "training", "inplace")
            if node.target is torch.nn.functional.dropout
            else ("input", "p", "train")
        )
        arguments = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
        p, training = arguments.get("p", 0.5), arguments.get("training", arguments.get("train", True))
        example = node.meta.get("example_value")
        if (
            not isinstance(p, int | float)
            or not isinstance(training, bool)
            or arguments.get("inplace", False) is not False
            or not isinstance(example, torch.Tensor)
            or example.device.type != "cpu"
        ):
            continue
        node.target = eager_cpu_dropout
        node.args, node.kwargs = (arguments["input"], float(p), training), {}
        count += 1
    if count:
        graph_module.recompile()
    return count


def keep_dead_draws(graph_module: torch.fx.GraphModule) -> int:
    """Make the draws of a Dynamo graph whose results reach no output extra outputs of it (after its own), and
    return their number. Eager makes such a draw and advances the generator; AOTAutograd's trace keeps only what
    its outputs need, so without this every later draw would start from another state than eager's (UniSpeech's
    replacement mask feeds logits its forward does not return)."""
    graph = graph_module.graph
    output = next(node for node in graph.nodes if node.op == "output")
    live: set[torch.fx.Node] = set()
    pending = [output]
    while pending:
        node = pending.pop()
        if node not in live:
            live.add(node)
            pending.extend(node.all_input_nodes)
    dead = [
        node
        for node in graph.nodes
        if node not in live
        and (
            (node.op == "call_function" and node.target is eager_cpu_dropout)
            or (node.op == "call_function" and getattr(node.target, "__name__", None) in _DYNAMO_DRAWS)
            or (node.op == "call_method" and node.target in _DYNAMO_DRAWING_METHODS)
        )
    ]
    if not dead:
        return 0
    values = output.args[0]
    if not isinstance(values, list | tuple):
        return 0  # a single output, which Dynamo never makes: nothing to append to
    output.args = (type(values)([*values, *dead]),)
    graph.lint()
    graph_module.recompile()
    return len(dead)


def without_extra_outputs(compiled: Callable[..., Any], extra: int) -> Callable[..., Any]:
    """`compiled` (called as Dynamo calls a backend's result) without its last `extra` outputs."""

    def call(*args: Any) -> Any:
        outputs = compiled(*args)
        return type(outputs)(outputs[:-extra]) if isinstance(outputs, list | tuple) else outputs

    return functools.update_wrapper(call, compiled)  # its calling convention and attributes


class FallbackRandomError(RuntimeError):
    """A random op whose draw cannot be made on the host (module docstring)."""


class _ComputedInGraph(FallbackRandomError):
    """A draw reading values the graph computes from its inputs: the graph is split before it."""


@dataclass(frozen=True)
class _Input:
    """The value of the call's argument at `index`."""

    index: int


@dataclass(frozen=True)
class _Empty:
    """An empty CPU tensor of a value's shape, strides and dtype (sizes possibly symbolic)."""

    shape: tuple[Any, ...]
    stride: tuple[Any, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class _Size:
    """A symbolic size, evaluated from the call's arguments."""

    expression: Any


@dataclass(frozen=True)
class _Value:
    """The result of an earlier host call, by its node's name."""

    name: str


@dataclass
class _Call:
    """One node's host call: a draw (`drawn`: counted, its result appended to the arguments) or a step computing
    a draw's constant argument; `part` picks one result of a tuple (native_dropout's mask)."""

    op: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    part: int | None
    name: str
    drawn: bool = True


class HostDraws:
    """The draws lifted out of a graph, made at each call and appended to its arguments (module docstring)."""

    def __init__(self, calls: list[_Call], bindings: list[tuple[Any, int, int | None]], on_device: bool):
        self.calls = calls
        self.drawn = [call for call in calls if call.drawn]
        # symbol -> (argument index, dimension or None for an integer argument)
        self.bindings = bindings
        self.on_device = on_device

    def wrap(self, compiled: Callable[[list[Any]], list[Any]]) -> Callable[[list[Any]], list[Any]]:
        """The boxed callable that draws and then calls `compiled` with the draws after the graph's arguments."""

        def with_draws(args: list[Any]) -> list[Any]:
            args.extend(self.draw(args))
            return compiled(args)

        with_draws._boxed_call = True  # type: ignore[attr-defined]
        return with_draws

    def draw(self, args: Sequence[Any]) -> list[torch.Tensor]:
        """This call's random values, in the graph's order, counted in `neuron_mlir.stats()`."""
        from neuron_mlir.frontend import stats

        symbols = self._symbols(args)
        values: dict[str, Any] = {}

        def value(item: Any) -> Any:
            if isinstance(item, _Value):
                return values[item.name]
            if isinstance(item, _Input):
                argument = args[item.index]
                return argument.cpu() if isinstance(argument, torch.Tensor) else argument
            if isinstance(item, _Empty):
                shape = [_evaluated(size, symbols) for size in item.shape]
                stride = [_evaluated(size, symbols) for size in item.stride]
                return torch.empty_strided(shape, stride, dtype=item.dtype)
            if isinstance(item, _Size):
                return _evaluated(item.expression, symbols)
            if isinstance(item, list | tuple):
                return type(item)(value(element) for element in item)
            return item

        results = []
        with _drawing_from(self.on_device):
            for call in self.calls:
                result = call.op(*value(call.args), **{key: value(item) for key, item in call.kwargs.items()})
                if call.part is not None:
                    result = result[call.part]
                values[call.name] = result
                if call.drawn:
                    stats.record_host_random_draw(str(call.op), result.numel())
                    results.append(result.to("neuron") if self.on_device else result)
        return results

    def _symbols(self, args: Sequence[Any]) -> dict[Any, int]:
        symbols = {}
        for symbol, index, dimension in self.bindings:
            argument = args[index]
            symbols[symbol] = int(argument.shape[dimension] if dimension is not None else argument)
        return symbols


def _evaluated(size: Any, symbols: dict[Any, int]) -> Any:
    if isinstance(size, torch.SymInt):
        return int(size.node.expr.xreplace(symbols))
    return size


class _drawing_from:
    """Torch's default generator, or for a graph of device tensors the device generator standing in for it."""

    def __init__(self, on_device: bool):
        self.on_device = on_device
        self.context: Any = None

    def __enter__(self) -> None:
        if self.on_device:
            from neuron_mlir.frontend.device.random import as_default_generator

            self.context = as_default_generator()
            self.context.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self.context is not None:
            self.context.__exit__(*exc)


class _RandomGraph(NamedTuple):
    """A graph's random nodes, its placeholders with their positions, and where its size symbols come from."""

    random_nodes: list[torch.fx.Node]
    placeholders: list[torch.fx.Node]
    position: dict[torch.fx.Node, int]
    bindings: list[tuple[Any, int, int | None]]

    @staticmethod
    def of(graph_module: torch.fx.GraphModule) -> _RandomGraph | None:
        """None for a graph without a random node."""
        nodes = graph_module.graph.nodes
        random_nodes = [node for node in nodes if is_random(node)]
        if not random_nodes:
            return None
        placeholders = [node for node in nodes if node.op == "placeholder"]
        position = {node: index for index, node in enumerate(placeholders)}
        return _RandomGraph(random_nodes, placeholders, position, _symbol_bindings(placeholders))


def compile_with_host_draws(
    graph_module: torch.fx.GraphModule,
    compile_lifted: Callable[[torch.fx.GraphModule], Callable[[list[Any]], list[Any]]],
    compile_region: Callable[[torch.fx.GraphModule], Callable[[list[Any]], list[Any]]],
) -> Callable[[list[Any]], list[Any]] | None:
    """The boxed callable running `graph_module` with its draws made on the host, or None when it has no random
    node. `compile_lifted` compiles the graph once its draws are inputs; a graph with draws that read values it
    computes from its inputs is cut into consecutive regions before and after each such draw instead, each region
    compiled by `compile_region` (which lifts the region's own draws) and each of those draws made on the host
    between them (module docstring)."""
    found = _RandomGraph.of(graph_module)
    if found is None:
        return None
    random_nodes, placeholders, position, bindings = found
    cut = []
    for node in random_nodes:
        try:
            _draw_of(node, position, bindings, {})
        except _ComputedInGraph:
            cut.append(node)
    if not cut:
        draws = lift_random_draws(graph_module)
        assert draws is not None
        logger.info("fallback_random: %d random op(s) of a graph drawn on the host", len(draws.drawn))
        return draws.wrap(compile_lifted(graph_module))
    logger.info("fallback_random: a graph cut at %d draw(s) of values it computes", len(cut))
    return _split_at(graph_module, cut, compile_region, _on_device(placeholders, random_nodes))


def _on_device(placeholders: list[torch.fx.Node], random_nodes: list[torch.fx.Node]) -> bool:
    return any(
        isinstance(val := node.meta.get("val"), torch.Tensor) and val.device.type == "neuron"
        for node in [*placeholders, *random_nodes]
    )


def _split_at(
    graph_module: torch.fx.GraphModule,
    cut: list[torch.fx.Node],
    compile_region: Callable[[torch.fx.GraphModule], Callable[[list[Any]], list[Any]]],
    on_device: bool,
) -> Callable[[list[Any]], list[Any]]:
    """`graph_module` as consecutive regions of its node order, each draw of `cut` a region of its own that runs
    on the host. Region k holds the nodes between the k-th and the (k+1)-th such draw, so every draw, lifted
    from its region or made between regions, is made in the graph's order."""
    from torch.fx.passes.split_module import split_module

    from neuron_mlir.frontend.partition import CompiledRegion, _copy_input_metadata, boxed_call

    cut_nodes = set(cut)
    region_of: dict[torch.fx.Node, int] = {}
    index = 0
    for node in graph_module.graph.nodes:
        if node in cut_nodes:
            region_of[node] = 2 * index + 1
            index += 1
        else:
            region_of[node] = 2 * index
    split = split_module(graph_module, graph_module, region_of.__getitem__, keep_original_order=True)
    for node in list(split.graph.nodes):
        if node.op != "call_module":
            continue
        region = split.get_submodule(str(node.target))
        assert isinstance(region, torch.fx.GraphModule)
        _copy_input_metadata(split, node, region)
        output = next(n for n in region.graph.nodes if n.op == "output")
        returns_tuple = isinstance(output.args[0], list | tuple)
        if int(str(node.target).rsplit("_", 1)[1]) % 2:
            setattr(split, str(node.target), _HostDraw(region, on_device, returns_tuple))
        else:
            setattr(split, str(node.target), CompiledRegion(compile_region(region), returns_tuple))
    split.recompile()
    return boxed_call(split)


class _HostDraw(torch.nn.Module):
    """One draw reading values the graph computed, made on the host between two compiled regions."""

    def __init__(self, region: torch.fx.GraphModule, on_device: bool, returns_tuple: bool):
        super().__init__()
        self.region = region
        self.on_device = on_device
        self.returns_tuple = returns_tuple
        self.name = next(str(n.target) for n in region.graph.nodes if n.op == "call_function" and is_random(n))

    def forward(self, *args: Any) -> Any:
        from neuron_mlir.frontend import stats

        host = [arg.cpu() if isinstance(arg, torch.Tensor) else arg for arg in args]
        with _drawing_from(self.on_device):
            result = self.region(*host)
        values = list(result) if isinstance(result, list | tuple) else [result]
        stats.record_host_random_draw(self.name, sum(v.numel() for v in values if isinstance(v, torch.Tensor)))
        if self.on_device:
            values = [v.to("neuron") if isinstance(v, torch.Tensor) else v for v in values]
        return tuple(values) if isinstance(result, list | tuple) else values[0]


def lift_random_draws(graph_module: torch.fx.GraphModule) -> HostDraws | None:
    """Rewrite `graph_module` so that its random nodes' results are inputs (module docstring); the draws that
    compute them, or None when the graph has no random node (then it is left as it is). Raises
    `FallbackRandomError` for a draw that reads values computed in the graph."""
    found = _RandomGraph.of(graph_module)
    if found is None:
        return None
    random_nodes, placeholders, position, bindings = found
    graph = graph_module.graph
    on_device = _on_device(placeholders, random_nodes)
    calls: dict[str, _Call] = {}  # the draws and the steps computing their constant arguments, in order
    for node in random_nodes:
        _draw_of(node, position, bindings, calls)
    last = placeholders[-1] if placeholders else None
    for node in random_nodes:
        # the draws' placeholders follow the graph's own, in the draws' order (the order `HostDraws` appends them)
        where = graph.inserting_after(last) if last is not None else graph.inserting_before(next(iter(graph.nodes)))
        with where:
            drawn = graph.placeholder(f"host_draw_{node.name}")
        last = drawn
        if _packet(node) == "native_dropout":
            _replace_dropout(graph, node, drawn)
        else:
            drawn.meta.update({k: v for k, v in node.meta.items() if k in ("val", "tensor_meta")})
            node.replace_all_uses_with(drawn)
            graph.erase_node(node)
    graph.lint()
    graph_module.recompile()
    used = {symbol for call in calls.values() for symbol in _free_symbols(call)}
    return HostDraws(list(calls.values()), [binding for binding in bindings if binding[0] in used], on_device)


def _symbol_bindings(placeholders: list[torch.fx.Node]) -> list[tuple[Any, int, int | None]]:
    """Where each plain symbol of the graph's sizes comes from: an integer input, or a dimension of an input."""
    import sympy  # type: ignore[import-untyped]

    bindings: list[tuple[Any, int, int | None]] = []
    seen: set[Any] = set()
    for index, node in enumerate(placeholders):
        val = node.meta.get("val")
        sizes: list[tuple[Any, int | None]] = []
        if isinstance(val, torch.SymInt):
            sizes = [(val, None)]
        elif isinstance(val, torch.Tensor):
            sizes = [(size, dimension) for dimension, size in enumerate(val.shape)]
        for size, dimension in sizes:
            symbol = size.node.expr if isinstance(size, torch.SymInt) else None
            if isinstance(symbol, sympy.Symbol) and symbol not in seen:
                seen.add(symbol)
                bindings.append((symbol, index, dimension))
    return bindings


def _free_symbols(call: _Call) -> set[Any]:
    symbols: set[Any] = set()

    def visit(item: Any) -> None:
        if isinstance(item, torch.SymInt):
            symbols.update(item.node.expr.free_symbols)
        elif isinstance(item, _Size):
            visit(item.expression)
        elif isinstance(item, _Empty):
            for size in (*item.shape, *item.stride):
                visit(size)
        elif isinstance(item, list | tuple):
            for element in item:
                visit(element)

    visit(call.args)
    visit(list(call.kwargs.values()))
    return symbols


def _draw_of(
    node: torch.fx.Node,
    position: dict[torch.fx.Node, int],
    bindings: list[tuple[Any, int, int | None]],
    calls: dict[str, _Call],
) -> None:
    """Add the host call that draws `node`'s result to `calls`, after the steps computing its constant arguments."""
    packet = _packet(node)
    assert isinstance(node.target, torch._ops.OpOverload)
    bound = {binding[0] for binding in bindings}
    constant: dict[torch.fx.Node, bool] = {}

    def template(item: Any, name: str | None) -> Any:
        if isinstance(item, torch.fx.Node):
            val = item.meta.get("val")
            shape_only = (
                (name == "self" and packet in _SHAPE_ONLY_SELF)
                or (name == "self" and packet == "bernoulli" and _has_p(node))
                # the mask's draw depends on the input's shape and dtype only
                or (name == "input" and packet == "native_dropout")
            )
            if isinstance(val, torch.Tensor) and shape_only:
                return _Empty(tuple(val.shape), tuple(val.stride()), val.dtype)
            if item in position:
                return _Input(position[item])
            return value_of(item)
        if isinstance(item, list | tuple):
            return type(item)(template(element, None) for element in item)
        return _on_host(item)

    def value_of(item: torch.fx.Node) -> Any:
        """A size, or the value of a tensor the graph computes from constants alone (UniSpeech's probabilities,
        a `full` of the replacement probability): computed on the host as eager computes it."""
        val = item.meta.get("val")
        if isinstance(val, torch.SymInt | int) and not isinstance(val, bool):
            if isinstance(val, torch.SymInt) and not val.node.expr.free_symbols <= bound:
                raise _unbound(node, item)
            return _Size(val)
        if not _from_constants(item, constant):
            raise _computed_in_graph(node, item)
        if item.name not in calls:
            args = tuple(step_template(arg) for arg in item.args)
            kwargs = {key: step_template(arg) for key, arg in item.kwargs.items()}
            assert callable(item.target)
            calls[item.name] = _Call(item.target, args, kwargs, None, item.name, drawn=False)
        return _Value(item.name)

    def step_template(item: Any) -> Any:
        if isinstance(item, torch.fx.Node):
            return value_of(item)
        if isinstance(item, list | tuple):
            return type(item)(step_template(element) for element in item)
        return _on_host(item)

    names = [argument.name for argument in node.target._schema.arguments]
    args = tuple(template(arg, names[i] if i < len(names) else None) for i, arg in enumerate(node.args))
    kwargs = {key: template(value, key) for key, value in node.kwargs.items()}
    calls[node.name] = _Call(node.target, args, kwargs, 1 if packet == "native_dropout" else None, node.name)


def _on_host(item: Any) -> Any:
    """A device argument of a factory names the CPU: the host draws there."""
    if isinstance(item, torch.device) and item.type != "cpu":
        return torch.device("cpu")
    return item


def _from_constants(node: torch.fx.Node, known: dict[torch.fx.Node, bool]) -> bool:
    """Whether `node`'s value depends on no input's values and no draw: deterministic ops over constants and sizes."""
    if node not in known:
        known[node] = False  # (an FX graph has no cycles; this only stops a second visit)
        target = node.target
        deterministic = (
            isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded not in target.tags
        ) or target is operator.getitem
        known[node] = (
            node.op == "call_function"
            and deterministic
            and all(
                isinstance(argument.meta.get("val"), torch.SymInt | int) or _from_constants(argument, known)
                for argument in node.all_input_nodes
            )
        )
    return known[node]


def _has_p(node: torch.fx.Node) -> bool:
    """`bernoulli.p` and `bernoulli.Tensor`: `self` gives the shape, `p` the probabilities."""
    assert isinstance(node.target, torch._ops.OpOverload)
    return node.target._overloadname in ("p", "Tensor")


def _replace_dropout(graph: torch.fx.Graph, node: torch.fx.Node, mask: torch.fx.Node) -> None:
    """native_dropout(input, p, train) -> (input * mask * (1 / (1 - p)), mask) with `mask` drawn on the host:
    ATen's CPU kernel computes its output so, from the mask it draws."""
    from torch._guards import detect_fake_mode

    source, p = node.args[0], float(node.args[1])  # type: ignore[arg-type]
    assert isinstance(source, torch.fx.Node)
    output_val, mask_val = node.meta["val"]
    mask.meta["val"] = mask_val
    keep = 1.0 - p
    scale = 1.0 / keep if keep != 0 else 0.0
    fake_mode = detect_fake_mode([output_val])
    with graph.inserting_after(node):
        kept = graph.call_function(torch.ops.aten.mul.Tensor, (source, mask))
        with graph.inserting_after(kept):
            output = graph.call_function(torch.ops.aten.mul.Tensor, (kept, scale))
    for new in (kept, output):
        new.meta.update({k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta")})
    if fake_mode is not None:
        with fake_mode:
            kept.meta["val"] = torch.ops.aten.mul.Tensor(source.meta["val"], mask_val)
    else:
        kept.meta["val"] = output_val
    output.meta["val"] = output_val
    for user in list(node.users):
        if user.target is operator.getitem:
            user.replace_all_uses_with(output if user.args[1] == 0 else mask)
            graph.erase_node(user)
    graph.erase_node(node)


def _describe(node: torch.fx.Node) -> str:
    from neuron_mlir.frontend.fx_importer import node_location
    from neuron_mlir.ir.locations import describe_location

    where = describe_location(node_location(node))
    return f"{node.target}" + (f" at {where}" if where else "")


def _computed_in_graph(node: torch.fx.Node, argument: torch.fx.Node) -> FallbackRandomError:
    # (caught by `compile_with_host_draws`, which cuts the graph before such a draw)
    return _ComputedInGraph(f"{node.name} draws from {argument.name}, which the graph computes from its inputs")


def _unbound(node: torch.fx.Node, argument: torch.fx.Node) -> FallbackRandomError:
    return FallbackRandomError(
        f"neuron-mlir: fallback_random: {_describe(node)} draws a size ({argument.name}) that no input of the graph "
        "gives; compile without fallback_random"
    )
