"""Complex values as real pairs: an FX rewrite that keeps the dialects real.

A NeuronCore has no complex storage type and no complex arithmetic. A complex tensor of shape [d0, ..., dk] is
therefore carried as a real tensor of shape [d0, ..., dk, 2] holding (real, imaginary) in its trailing dimension:
`torch.view_as_real`'s layout, so a complex graph input or output crosses the host boundary as a view, never a
copy. complex64 values become float32 pairs, complex32 values float16 pairs.

Input contract: an ATen-level FX graph as AOTAutograd hands it to the backend (fake-tensor metadata in
`meta["val"]` of every node, static sizes), possibly with complex values.

Output guarantee (`complex_as_pairs`): a graph module computing the same values in which every complex value an
op has a pair rule for (`_RULES`) is a real pair tensor; the rules emit only real ATen ops the importer knows,
each located at the source line of the node it replaces. Placeholders and outputs that were complex are pairs,
and `PairBoundary.wrap` converts at the call. A node without a rule for its arguments keeps its complex values:
`view_as_complex` nodes feed it and `view_as_real` nodes carry its results on, so it runs on the CPU between
compiled regions, with the reason in `meta[REFUSAL]`. complex128 (no fp64 datapath) is never rewritten. A graph
with symbolic sizes is not rewritten either (the DFT matrices are sized constants): the caller `specialise`s it to
each call's sizes first (`compile_graph.ComplexGraphPerSizes`, a `compile_graph.PerSizes`).

FFTs (`_fft_r2c`, `_fft_c2c`, `_fft_c2r`) become DFT matmuls on TensorE, one per transformed dimension: the
dimension is moved next to the pair dimension and flattened with it, so one real matmul by a [2n, 2m] matrix of
cosines and sines (a compile-time constant, with the normalisation folded in) computes the complex product.
Multi-dimensional transforms are successive 1-D ones, except that a real signal's last two dimensions take two
matmuls with no transposition between them (`_transform_last_two`). Complex matmuls are one real matmul with a
block matrix. The DFT matrices grow as n^2: a Cooley-Tukey split into transforms of at most 128 points is the
step that makes long signals cheap, and is not done here.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

REFUSAL = "complex_pairs_refusal"
"""Key of the node metadata that says why a complex node was left to the CPU, as the rest of a sentence that
begins with the op's name (`compile_graph.fallback_reason`)."""

PAIR_DTYPES = {torch.complex64: torch.float32, torch.complex32: torch.float16}
"""Complex dtypes carried as pairs, and the real dtype of their halves."""

_COMPLEX_REFUSALS = {torch.complex128: "no fp64 engine datapath for its float64 halves"}

# metadata a replacement node inherits from the node it replaces: source line, module path, provenance
_INHERITED_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node", "seq_nr", "partitioner_tag")


class PairRuleError(RuntimeError):
    """A rule raised on arguments it accepted (a bug of the rule); names the node, its op and source line."""


class NoPairRule(Exception):
    """The op's rule does not cover these arguments; the message says which rule is broken."""


@dataclass(frozen=True)
class Pair:
    """A complex value during the rewrite: the fake tensor of its real pair (trailing dimension 2)."""

    tensor: torch.Tensor
    real_source: torch.Tensor | None = None
    """The real tensor this value was cast from, when its imaginary half is known to be zero: a transform can
    contract the real values alone (half the work, and no pair to assemble)."""

    @property
    def rank(self) -> int:
        """The rank of the complex value."""
        return self.tensor.dim() - 1

    @property
    def real(self) -> torch.Tensor:
        return aten.select.int(self.tensor, -1, 0)

    @property
    def imag(self) -> torch.Tensor:
        return aten.select.int(self.tensor, -1, 1)


def _pair_of(real: torch.Tensor, imag: torch.Tensor) -> Pair:
    real, imag = torch.broadcast_tensors(real, imag)  # type: ignore[no-untyped-call]  # unannotated in torch
    return Pair(aten.cat.default([aten.unsqueeze.default(real, -1), aten.unsqueeze.default(imag, -1)], -1))


# -- recording the rules' ATen calls as FX nodes -----------------------------------------------------------------


class _Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]  # unannotated in torch
    """Runs the rules on fake tensors and appends each ATen call they make to `graph` as a node whose arguments
    are the nodes of the fake tensors passed (by identity) and whose metadata is its result and the `origin`
    node's source information."""

    def __init__(self, graph: torch.fx.Graph):
        super().__init__()  # type: ignore[no-untyped-call]  # unannotated in torch
        self.graph = graph
        self.nodes: dict[int, tuple[torch.Tensor, torch.fx.Node]] = {}  # id(fake) -> (fake kept alive, node)
        self.origin: torch.fx.Node | None = None

    def bind(self, value: torch.Tensor, node: torch.fx.Node) -> None:
        self.nodes[id(value)] = (value, node)

    def node_of(self, value: torch.Tensor) -> torch.fx.Node:
        entry = self.nodes.get(id(value))
        if entry is None:
            raise RuntimeError("a pair rule used a tensor that no node of the graph computes")
        return entry[1]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        # a composite op (`reshape`, `broadcast_tensors`) reaches the mode whole where autograd's keys are
        # excluded (a device op compiled from inside the dispatcher): its decomposition is recorded instead, as
        # AOTAutograd's graphs hold it
        if func.namespace == "aten" and torch._C._dispatch_has_kernel_for_dispatch_key(
            func.name(), "CompositeImplicitAutograd"
        ):
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        result = func(*args, **kwargs)
        if not any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves(result)):
            return result  # a query of metadata (prim.device, sizes): nothing to compute
        node_args, node_kwargs = pytree.tree_map_only(torch.Tensor, self.node_of, (args, kwargs))
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        self.annotate(node, result)
        if isinstance(result, torch.Tensor):
            self.bind(result, node)
        elif isinstance(result, list | tuple):
            for index, item in enumerate(result):
                if isinstance(item, torch.Tensor):
                    item_node = self.graph.call_function(operator.getitem, (node, index))
                    self.annotate(item_node, item)
                    self.bind(item, item_node)
        return result

    def annotate(self, node: torch.fx.Node, value: Any) -> None:
        node.meta["val"] = value
        if self.origin is not None:
            for key in _INHERITED_META:
                if key in self.origin.meta:
                    node.meta[key] = self.origin.meta[key]


# -- the rewrite -------------------------------------------------------------------------------------------------


@dataclass
class PairBoundary:
    """Which graph inputs and outputs were complex: they cross into and out of the rewritten graph as pairs."""

    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def wrap(self, compiled: Callable[[list[Any]], list[Any]]) -> Callable[[list[Any]], list[Any]]:
        """The boxed callable taking and returning complex tensors around `compiled`, which takes pairs."""
        return _PairCall(self, compiled)


class _PairCall:
    """`PairBoundary.wrap`'s boxed callable. Its other attributes are those of the callable it wraps (a compiled
    graph's name and latest profile, which the device's eager ops account on the stream)."""

    _boxed_call = True

    def __init__(self, boundary: PairBoundary, compiled: Callable[[list[Any]], list[Any]]):
        self._boundary = boundary
        self._compiled = compiled

    def __call__(self, args: list[Any]) -> list[Any]:
        for position in self._boundary.inputs:
            value = args[position]
            if isinstance(value, torch.Tensor):  # a view of the same memory (a conjugate view resolved first)
                args[position] = torch.view_as_real(value.resolve_conj().resolve_neg())
        results = list(self._compiled(args))
        for position in self._boundary.outputs:
            value = results[position]
            if isinstance(value, torch.Tensor):
                results[position] = torch.view_as_complex(_complex_viewable(value))
        return results

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_boundary", "_compiled"):
            raise AttributeError(name)
        return getattr(self._compiled, name)


def _complex_viewable(pair: torch.Tensor) -> torch.Tensor:
    """`pair`, or a copy of it where its layout cannot be viewed as complex (pairs not adjacent in memory)."""
    strides_even = all(stride % 2 == 0 for stride in pair.stride()[:-1])
    if pair.stride(-1) == 1 and strides_even and pair.storage_offset() % 2 == 0:
        return pair
    return pair.contiguous()


def has_complex_values(graph_module: torch.fx.GraphModule) -> bool:
    """Whether any node of the graph produces a complex tensor."""
    return any(_is_complex(node.meta.get("val")) for node in graph_module.graph.nodes)


def _is_complex(value: Any) -> bool:
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in pytree.tree_leaves(value))


def complex_as_pairs(graph_module: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, PairBoundary] | None:
    """The graph with its complex values as real pairs (module docstring), and its boundary; None when the graph
    has no complex value or has symbolic sizes (then its complex nodes stay on the CPU)."""
    if not has_complex_values(graph_module):
        return None
    values = [node.meta.get("val") for node in graph_module.graph.nodes]
    if any(_is_symbolic(value) for value in values):
        for node in graph_module.graph.nodes:
            if _is_complex(node.meta.get("val")):
                node.meta[REFUSAL] = "stays complex: a graph with symbolic sizes keeps its complex values"
        return None
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode([v for v in pytree.tree_leaves(values) if isinstance(v, torch.Tensor)])
    if fake_mode is None:
        return None
    return _Rewrite(graph_module, fake_mode).run()


def has_symbolic_sizes(graph_module: torch.fx.GraphModule) -> bool:
    """Whether a value of the graph has a symbolic size (a graph Dynamo traced with dynamic shapes)."""
    return any(_is_symbolic(node.meta.get("val")) for node in graph_module.graph.nodes)


def specialise(graph_module: torch.fx.GraphModule, inputs: Sequence[Any]) -> torch.fx.GraphModule:
    """The graph traced again at the sizes of `inputs` (real tensors and numbers): every size static, every node
    with its metadata and source line. A graph with complex values is rewritten into pairs per set of sizes,
    because its DFT matrices are sized constants."""
    import torch.fx.traceback as fx_traceback
    from torch.fx.experimental.proxy_tensor import make_fx

    with fx_traceback.preserve_node_meta():
        return make_fx(torch.fx.Interpreter(graph_module).run, tracing_mode="fake")(*inputs)


def _is_symbolic(value: Any) -> bool:
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.SymInt | torch.SymFloat | torch.SymBool):
            return True
        if isinstance(leaf, torch.Tensor) and any(isinstance(extent, torch.SymInt) for extent in leaf.shape):
            return True
    return False


class _Rewrite:
    def __init__(self, graph_module: torch.fx.GraphModule, fake_mode: Any):
        self.source = graph_module
        self.fake_mode = fake_mode
        self.graph = torch.fx.Graph()
        self.recorder = _Recorder(self.graph)
        self.env: dict[torch.fx.Node, Any] = {}  # source node -> its value: a fake tensor, Pair, or list of them
        self.new_nodes: dict[torch.fx.Node, torch.fx.Node] = {}  # source node -> its copy, for non-tensor values
        self.attributes: dict[str, Any] = {}  # get_attr target -> value, for the new module
        self.constants: dict[tuple[Any, ...], torch.Tensor] = {}  # DFT matrices by their parameters
        self.boundary = PairBoundary()

    def run(self) -> tuple[torch.fx.GraphModule, PairBoundary]:
        with self.fake_mode:  # the rules' factory ops (zeros, fills) make fake tensors too
            self._rewrite_nodes()
        self.graph.eliminate_dead_code()  # parts a rule assembled that no one reads (a pair only transformed)
        module = torch.fx.GraphModule(self.attributes, self.graph, class_name=type(self.source).__name__)
        module.meta.update(self.source.meta)
        return module, self.boundary

    def _rewrite_nodes(self) -> None:
        placeholders = 0
        for node in self.source.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node, placeholders)
                placeholders += 1
            elif node.op == "get_attr":
                self._get_attr(node)
            elif node.op == "call_function":
                self._call_function(node)
            elif node.op == "output":
                self._output(node)
            else:
                raise RuntimeError(f"FX '{node.op}' nodes are not expected in an ATen graph")

    # -- nodes ---------------------------------------------------------------------------------------------------

    def _placeholder(self, node: torch.fx.Node, position: int) -> None:
        value = node.meta.get("val")
        new = self.graph.placeholder(node.name)
        new.meta.update(node.meta)
        if isinstance(value, torch.Tensor) and value.dtype in PAIR_DTYPES:
            with self.fake_mode:
                value = torch.view_as_real(value.resolve_conj().resolve_neg())
            new.meta["val"] = value
            self.boundary.inputs.append(position)
            self._bind(node, Pair(value), new)
            return
        self._bind(node, value, new)

    def _get_attr(self, node: torch.fx.Node) -> None:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        target = str(node.target)
        value = operator.attrgetter(target)(self.source)
        fake = node.meta.get("val")
        if isinstance(value, torch.Tensor) and value.dtype in PAIR_DTYPES:
            with unset_fake_temporarily():
                value = torch.view_as_real(value.detach().resolve_conj().resolve_neg()).clone()
            target = f"{target.replace('.', '_')}_as_pairs"
            fake = self.fake_mode.from_tensor(value, static_shapes=True)
            self.attributes[target] = value
            new = self.graph.get_attr(target)
            new.meta.update(node.meta)
            new.meta["val"] = fake
            self._bind(node, Pair(fake), new)
            return
        self.attributes[target] = value
        new = self.graph.get_attr(target)
        new.meta.update(node.meta)
        if fake is None and isinstance(value, torch.Tensor):
            fake = self.fake_mode.from_tensor(value, static_shapes=True)
            new.meta["val"] = fake
        self._bind(node, fake, new)

    def _call_function(self, node: torch.fx.Node) -> None:
        source = node.args[0] if node.target is operator.getitem else None
        if isinstance(source, torch.fx.Node) and isinstance(self.env.get(source), list | tuple):
            self.env[node] = self.env[source][node.args[1]]
            return
        touches_complex = _is_complex(node.meta.get("val")) or any(
            _is_complex(arg.meta.get("val")) for arg in node.all_input_nodes
        )
        if not touches_complex:
            self._copy(node)
            return
        refusal = unpairable = self._unpairable_dtype(node)
        rule = _RULES.get(node.target) if refusal is None else None
        if refusal is None and rule is None:
            refusal = "no rule computes it on (real, imaginary) pairs"
        if rule is not None:
            args, kwargs = pytree.tree_map_only(torch.fx.Node, self.env.__getitem__, (node.args, node.kwargs))
            self.recorder.origin = node
            mark = len(self.graph.nodes)
            try:
                with self.recorder:
                    result = rule(_Site(node, self), *args, **kwargs)
                self.env[node] = result
                return
            except NoPairRule as error:
                refusal = f"its pair rule does not cover {error}"
                if len(self.graph.nodes) != mark:
                    self._erase_after(mark)
            except Exception as error:  # a rule that fails on arguments it accepted has a bug: say where
                from neuron_mlir.frontend.fx_importer import describe_node

                raise PairRuleError(
                    f"{describe_node(node)}: its rule for complex pairs failed: {type(error).__name__}: {error}"
                ) from error
            finally:
                self.recorder.origin = None
        assert refusal is not None
        self._on_cpu(node, refusal, dtype_refusal=rule is None and refusal == unpairable)

    def _unpairable_dtype(self, node: torch.fx.Node) -> str | None:
        for value in [node.meta.get("val")] + [arg.meta.get("val") for arg in node.all_input_nodes]:
            for leaf in pytree.tree_leaves(value):
                if isinstance(leaf, torch.Tensor) and leaf.is_complex() and leaf.dtype not in PAIR_DTYPES:
                    why = _COMPLEX_REFUSALS.get(leaf.dtype, "no real dtype for its halves")
                    return f"{str(leaf.dtype).removeprefix('torch.')} is not supported on the NeuronCore ({why})"
        return None

    def _erase_after(self, mark: int) -> None:
        for new in reversed(list(self.graph.nodes)[mark:]):
            self.recorder.nodes.pop(id(new.meta.get("val")), None)
            self.graph.erase_node(new)

    def _copy(self, node: torch.fx.Node) -> None:
        new = self.graph.node_copy(node, self._new_node)
        self._bind_results(node, node.meta.get("val"), new)

    def _on_cpu(self, node: torch.fx.Node, refusal: str, dtype_refusal: bool = False) -> None:
        """The node as it was, its complex arguments viewed as complex again and its complex results as pairs."""
        conversion = f"converts pairs for {node.target}, which stays complex ({refusal})"

        def complex_argument(arg: torch.fx.Node) -> torch.fx.Node:
            value = self.env[arg]
            if not isinstance(value, Pair):
                return self._new_node(arg)
            converted = self._record(node, aten.view_as_complex.default, value.tensor)
            converted.meta[REFUSAL] = conversion
            return converted

        new = self.graph.node_copy(node, complex_argument)
        new.meta[REFUSAL] = f": {refusal}" if dtype_refusal else f"stays complex: {refusal}"
        self._bind_results(node, node.meta.get("val"), new, conversion)

    def _record(self, origin: torch.fx.Node, op: Any, *args: Any) -> torch.fx.Node:
        """The node of one ATen call on fake tensors of the graph, located at `origin`."""
        self.recorder.origin = origin
        try:
            with self.recorder:
                result = op(*args)
        finally:
            self.recorder.origin = None
        return self.recorder.node_of(result)

    def _bind_results(self, node: torch.fx.Node, value: Any, new: torch.fx.Node, refusal: str | None = None) -> None:
        """Bind the results of `new`, a copy of `node`: complex results (of a node left on the CPU) through a
        `view_as_real` to pairs, the items of a list through getitem nodes made here (the graph's own getitem
        nodes of `node` then pick these)."""
        if isinstance(value, list | tuple):
            items: list[Any] = []
            for index, item in enumerate(value):
                if not isinstance(item, torch.Tensor):
                    items.append(item)
                    continue
                item_node = self.graph.call_function(operator.getitem, (new, index))
                item_node.meta.update(new.meta)
                item_node.meta["val"] = item
                items.append(self._pair_result(node, item, item_node, refusal))
            self.env[node] = items
            self.new_nodes[node] = new
            return
        if isinstance(value, torch.Tensor):
            self.env[node] = self._pair_result(node, value, new, refusal)
            return
        self.env[node] = value
        self.new_nodes[node] = new

    def _pair_result(self, node: torch.fx.Node, value: torch.Tensor, new: torch.fx.Node, refusal: str | None) -> Any:
        self.recorder.bind(value, new)
        if value.dtype not in PAIR_DTYPES:
            return value
        pair = self._record(node, aten.view_as_real.default, value)
        if refusal is not None:
            pair.meta[REFUSAL] = refusal
        return Pair(pair.meta["val"])

    def _output(self, node: torch.fx.Node) -> None:
        outputs = node.args[0]
        flat = outputs if isinstance(outputs, list | tuple) else [outputs]
        mapped = []
        for position, item in enumerate(flat):
            if isinstance(item, torch.fx.Node) and isinstance(self.env.get(item), Pair):
                self.boundary.outputs.append(position)
            mapped.append(self._new_node(item) if isinstance(item, torch.fx.Node) else item)
        result = type(outputs)(mapped) if isinstance(outputs, list | tuple) else mapped[0]
        new = self.graph.output(result)
        new.meta.update(node.meta)

    # -- values --------------------------------------------------------------------------------------------------

    def _bind(self, node: torch.fx.Node, value: Any, new: torch.fx.Node) -> None:
        self.env[node] = value
        self.new_nodes[node] = new
        if isinstance(value, Pair):
            self.recorder.bind(value.tensor, new)
        elif isinstance(value, torch.Tensor):
            self.recorder.bind(value, new)

    def _new_node(self, node: torch.fx.Node) -> torch.fx.Node:
        """The node of the new graph that computes the value of the source graph's `node`."""
        value = self.env[node]
        if isinstance(value, Pair):
            return self.recorder.node_of(value.tensor)
        if isinstance(value, torch.Tensor):
            return self.recorder.node_of(value)
        return self.new_nodes[node]

    def constant(self, key: tuple[Any, ...], build: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The fake tensor of a constant of the graph (a get_attr node), made once per `key`."""
        from torch.utils._python_dispatch import _disable_current_modes

        origin = self.recorder.origin
        value_of_origin = origin.meta.get("val") if origin is not None else None
        # the device of the node being rewritten: a graph of `neuron` tensors computes its constants there too
        device = value_of_origin.device if isinstance(value_of_origin, torch.Tensor) else torch.device("cpu")
        key = (*key, device)
        if key not in self.constants:
            with _disable_current_modes():  # real values, not recorded: neither the recorder nor fake mode
                value = build()
                if device.type == "cpu":
                    fake = self.fake_mode.from_tensor(value, static_shapes=True)
                else:  # the value stays a host constant of the program; its fake is on the graph's device
                    with self.fake_mode:
                        fake = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=device)
            name = f"_complex_pairs_constant{len(self.constants)}"
            self.attributes[name] = value
            new = self.graph.get_attr(name)
            self.recorder.annotate(new, fake)
            self.recorder.bind(fake, new)
            self.constants[key] = fake
        return self.constants[key]


# -- the rules: complex ATen ops as real ops on pairs -------------------------------------------------------------
#
# Each rule takes the node and its arguments (complex ones as `Pair`s, real tensors as fake tensors, the rest as
# they are) and returns its result the same way, computing it with real ATen ops (recorded by `_Recorder`). A
# rule raises NoPairRule for arguments it does not cover.


@dataclass(frozen=True)
class _Site:
    """Where a rule runs: the node it replaces and the rewrite (for constants)."""

    node: torch.fx.Node
    rewrite: _Rewrite

    @property
    def target(self) -> Any:
        return self.node.target

    @property
    def meta(self) -> dict[str, Any]:
        return self.node.meta


_Rule = Callable[..., Any]
_RULES: dict[Any, _Rule] = {}


def _rule(*ops: Any) -> Callable[[_Rule], _Rule]:
    def register(function: _Rule) -> _Rule:
        for op in ops:
            _RULES[op] = function
        return function

    return register


def has_pair_rule(op: Any) -> bool:
    """Whether ATen op `op` (an overload) has a rule computing it on (real, imaginary) pairs."""
    return op in _RULES


def _result_dtype(site: _Site) -> torch.dtype:
    value = site.meta["val"]
    return value.dtype


def _half_dtype(site: _Site) -> torch.dtype:
    """The real dtype of the halves of the node's complex result."""
    return PAIR_DTYPES[_result_dtype(site)]


def _as_pair(value: Any, dtype: torch.dtype) -> Pair:
    """A complex operand as a pair with halves of `dtype`: real tensors get a zero imaginary part."""
    if isinstance(value, Pair):
        return value if value.tensor.dtype == dtype else Pair(aten._to_copy.default(value.tensor, dtype=dtype))
    if isinstance(value, torch.Tensor):
        real = value if value.dtype == dtype else aten._to_copy.default(value, dtype=dtype)
        return _pair_of(real, _zeros(real))
    raise NoPairRule(f"a {type(value).__name__} operand")


def _zeros(like: torch.Tensor) -> torch.Tensor:
    return aten.full.default(list(like.shape), 0.0, dtype=like.dtype, device=like.device)


def _parts(value: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    """(real, imaginary) of an operand of a complex op: tensors of `dtype` or Python numbers, None for a zero
    imaginary part."""
    if isinstance(value, Pair):
        return _cast(value.real, dtype), _cast(value.imag, dtype)
    if isinstance(value, torch.Tensor):
        return _cast(value, dtype), None
    if isinstance(value, complex):
        return value.real, (value.imag or None)
    if isinstance(value, bool | int | float):
        return value, None
    raise NoPairRule(f"a {type(value).__name__} operand")


def _cast(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return value if value.dtype == dtype else aten._to_copy.default(value, dtype=dtype)


def _times(a: Any, b: Any) -> Any:
    """a * b of tensors or numbers, None standing for zero."""
    if a is None or b is None:
        return None
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return aten.mul.Tensor(a, b)
    return a * b


def _plus(a: Any, b: Any, sign: float = 1) -> Any:
    """a + sign b of tensors or numbers, None standing for zero."""
    if b is None:
        return a
    if a is None:
        return aten.neg.default(b) if sign == -1 and isinstance(b, torch.Tensor) else b if sign == 1 else -b
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return aten.sub.Tensor(a, b) if sign == -1 else aten.add.Tensor(a, b)
    return a - b if sign == -1 else a + b


def _assembled(site: _Site, real: Any, imag: Any) -> Pair:
    """The pair of the node's result from its parts (tensors, numbers or None for zero), broadcast to its shape."""
    value = site.meta["val"]
    shape, half = list(value.shape), PAIR_DTYPES[value.dtype]

    def full(part: Any) -> torch.Tensor:
        if isinstance(part, torch.Tensor):
            return aten.expand.default(_cast(part, half), shape) if list(part.shape) != shape else _cast(part, half)
        return aten.full.default(shape, 0.0 if part is None else part, dtype=half, device=value.device)

    return _pair_of(full(real), full(imag))


def _dim(dim: int, rank: int) -> int:
    """A dimension of a complex value of `rank`, as a non-negative dimension of its pair."""
    if rank == 0 and dim in (0, -1):
        raise NoPairRule("a dimension of a 0-d complex value")
    if not -rank <= dim < rank:
        raise NoPairRule(f"dimension {dim} is out of range for rank {rank}")
    return dim % rank


def _dims(dims: Sequence[int] | None, rank: int) -> list[int]:
    return list(range(rank)) if not dims else [_dim(d, rank) for d in dims]


def _complex_operand(value: Any) -> Pair:
    if not isinstance(value, Pair):
        raise NoPairRule("a real operand where a complex one is expected")
    return value


def _elementwise_dtype(site: _Site) -> torch.dtype:
    if not _result_dtype(site).is_complex:
        raise NoPairRule("a complex operation with a real result")
    return _half_dtype(site)


@_rule(aten.add.Tensor, aten.sub.Tensor, aten.add.Scalar, aten.sub.Scalar)
def _add(site: _Site, a: Any, b: Any, alpha: Any = 1) -> Pair:
    dtype = _elementwise_dtype(site)
    if isinstance(alpha, complex):
        raise NoPairRule("a complex alpha")
    (a_real, a_imag), (b_real, b_imag) = _parts(a, dtype), _parts(b, dtype)
    if alpha != 1:
        b_real, b_imag = _times(b_real, alpha), _times(b_imag, alpha)
    sign = -1 if site.target in (aten.sub.Tensor, aten.sub.Scalar) else 1
    return _assembled(site, _plus(a_real, b_real, sign), _plus(a_imag, b_imag, sign))


@_rule(aten.mul.Tensor, aten.mul.Scalar)
def _mul(site: _Site, a: Any, b: Any) -> Pair:
    dtype = _elementwise_dtype(site)
    if isinstance(a, Pair) and not isinstance(b, Pair) and _parts(b, dtype)[1] is None:
        factor = aten.unsqueeze.default(_cast(b, dtype), -1) if isinstance(b, torch.Tensor) else b
        return Pair(aten.mul.Tensor(a.tensor, factor))  # a real factor scales both halves at once
    (a_real, a_imag), (b_real, b_imag) = _parts(a, dtype), _parts(b, dtype)
    real = _plus(_times(a_real, b_real), _times(a_imag, b_imag), -1)
    imag = _plus(_times(a_real, b_imag), _times(a_imag, b_real))
    return _assembled(site, real, imag)


@_rule(aten.div.Tensor, aten.div.Scalar)
def _div(site: _Site, a: Any, b: Any) -> Pair:
    dtype = _elementwise_dtype(site)
    (a_real, a_imag), (b_real, b_imag) = _parts(a, dtype), _parts(b, dtype)
    if b_imag is None:
        if isinstance(a, Pair):
            divisor = aten.unsqueeze.default(b_real, -1) if isinstance(b_real, torch.Tensor) else b_real
            return Pair(aten.div.Tensor(a.tensor, divisor))
        return _assembled(site, _quotient(a_real, b_real), _quotient(a_imag, b_real))
    # (a + bi) / (c + di) = ((ac + bd) + (bc - ad) i) / (c^2 + d^2)
    norm = _plus(_times(b_real, b_real), _times(b_imag, b_imag))
    real = _plus(_times(a_real, b_real), _times(a_imag, b_imag))
    imag = _plus(_times(a_imag, b_real), _times(a_real, b_imag), -1)
    return _assembled(site, _quotient(real, norm), _quotient(imag, norm))


def _quotient(a: Any, b: Any) -> Any:
    if a is None:
        return None
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return aten.div.Tensor(a, b)
    return a / b


@_rule(aten.neg.default, aten._neg_view.default)
def _neg(site: _Site, a: Any) -> Pair:
    return Pair(aten.neg.default(_complex_operand(a).tensor))


@_rule(aten._conj.default, aten._conj_physical.default, aten.conj_physical.default)
def _conj(site: _Site, a: Any) -> Pair:
    a = _complex_operand(a)
    return _pair_of(a.real, aten.neg.default(a.imag))


@_rule(
    aten.resolve_conj.default,
    aten.resolve_neg.default,
    aten.clone.default,
    aten.alias.default,
    aten.lift_fresh_copy.default,
    aten.detach.default,
)
def _identity(site: _Site, a: Any, **kwargs: Any) -> Pair:
    # pairs hold every value resolved (a conjugate or negative view is computed when it is taken): a copy
    return Pair(aten.clone.default(_complex_operand(a).tensor))


@_rule(aten.abs.default)
def _abs(site: _Site, a: Any) -> torch.Tensor:
    a = _complex_operand(a)
    return aten.hypot.default(a.real, a.imag)


@_rule(aten.angle.default)
def _angle(site: _Site, a: Any) -> torch.Tensor:
    a = _complex_operand(a)
    return aten.atan2.default(a.imag, a.real)


@_rule(aten.exp.default)
def _exp(site: _Site, a: Any) -> Pair:
    # exp(x + iy) = e^x (cos y + i sin y)
    a = _complex_operand(a)
    magnitude = aten.exp.default(a.real)
    return _pair_of(
        aten.mul.Tensor(magnitude, aten.cos.default(a.imag)), aten.mul.Tensor(magnitude, aten.sin.default(a.imag))
    )


@_rule(aten.log.default)
def _log(site: _Site, a: Any) -> Pair:
    # log z = log |z| + i arg z
    a = _complex_operand(a)
    return _pair_of(aten.log.default(aten.hypot.default(a.real, a.imag)), aten.atan2.default(a.imag, a.real))


@_rule(aten.reciprocal.default)
def _reciprocal(site: _Site, a: Any) -> Pair:
    # 1 / z = conj(z) / |z|^2
    a = _complex_operand(a)
    norm = aten.add.Tensor(aten.mul.Tensor(a.real, a.real), aten.mul.Tensor(a.imag, a.imag))
    return _pair_of(aten.div.Tensor(a.real, norm), aten.div.Tensor(aten.neg.default(a.imag), norm))


@_rule(aten.sgn.default)
def _sgn(site: _Site, a: Any) -> Pair:
    # z / |z|, and 0 for 0
    a = _complex_operand(a)
    magnitude = aten.unsqueeze.default(aten.hypot.default(a.real, a.imag), -1)
    quotient = aten.div.Tensor(a.tensor, magnitude)
    return Pair(aten.where.self(aten.eq.Scalar(magnitude, 0), aten.full_like.default(quotient, 0.0), quotient))


def _swapped(pair: Pair) -> torch.Tensor:
    """i z as a pair: (-imaginary, real)."""
    return _pair_of(aten.neg.default(pair.imag), pair.real).tensor


@_rule(aten.mm.default, aten.bmm.default)
def _matmul(site: _Site, a: Any, b: Any) -> Pair:
    """One real matmul with twice the contraction: the rows of `a` as (re, im) pairs times the block matrix of
    `b` whose row (k, re) holds b[k] and row (k, im) holds i b[k]."""
    half = _half_dtype(site)
    a, b = _as_pair(a, half), _as_pair(b, half)
    *batch, rows, inner = a.tensor.shape[:-1]
    columns = b.tensor.shape[-2]
    block = aten.cat.default([aten.unsqueeze.default(b.tensor, -3), aten.unsqueeze.default(_swapped(b), -3)], -3)
    left = a.tensor.reshape([*batch, rows, 2 * inner])
    right = block.reshape([*batch, 2 * inner, 2 * columns])
    product = site.target(left, right)
    return Pair(product.reshape([*batch, rows, columns, 2]))


@_rule(aten.real.default)
def _real(site: _Site, a: Any) -> torch.Tensor:
    return _complex_operand(a).real


@_rule(aten.imag.default)
def _imag(site: _Site, a: Any) -> torch.Tensor:
    return _complex_operand(a).imag


@_rule(aten.view_as_real.default)
def _view_as_real(site: _Site, a: Any) -> torch.Tensor:
    return _complex_operand(a).tensor


@_rule(aten.view_as_complex.default)
def _view_as_complex(site: _Site, a: Any) -> Pair:
    if not isinstance(a, torch.Tensor):
        raise NoPairRule("an operand that is no real tensor")
    return Pair(a)


@_rule(aten.complex.default)
def _complex(site: _Site, real: Any, imag: Any) -> Pair:
    if not isinstance(real, torch.Tensor) or not isinstance(imag, torch.Tensor):
        raise NoPairRule("operands that are not real tensors")
    return _pair_of(real, imag)


@_rule(aten.polar.default)
def _polar(site: _Site, magnitude: Any, angle: Any) -> Pair:
    if not isinstance(magnitude, torch.Tensor) or not isinstance(angle, torch.Tensor):
        raise NoPairRule("operands that are not real tensors")
    return _pair_of(
        aten.mul.Tensor(magnitude, aten.cos.default(angle)), aten.mul.Tensor(magnitude, aten.sin.default(angle))
    )


@_rule(aten._to_copy.default)
def _to_copy(site: _Site, a: Any, **kwargs: Any) -> Any:
    target = _result_dtype(site)
    options = {k: v for k, v in kwargs.items() if k not in ("dtype", "memory_format", "non_blocking")}
    if options.get("device") is not None and torch.device(options["device"]) != site.meta["val"].device:
        raise NoPairRule("a copy to another device")
    options = {k: v for k, v in options.items() if k in ("layout", "device", "pin_memory")}
    if not target.is_complex:  # a complex value cast to a real dtype keeps its real part, as in eager
        return aten._to_copy.default(_complex_operand(a).real, dtype=target, **options)
    half = PAIR_DTYPES[target]
    if isinstance(a, Pair):
        return Pair(aten._to_copy.default(a.tensor, dtype=half, **options))
    real = aten._to_copy.default(a, dtype=half, **options)
    return Pair(_pair_of(real, _zeros(real)).tensor, real_source=real)


@_rule(aten.copy.default)
def _copy(site: _Site, destination: Any, source: Any, non_blocking: bool = False) -> Pair:
    destination = _complex_operand(destination)
    source = _as_pair(source, destination.tensor.dtype)
    return Pair(aten.clone.default(aten.expand.default(source.tensor, list(destination.tensor.shape))))


@_rule(aten.zeros_like.default, aten.empty_like.default, aten.ones_like.default)
def _like(site: _Site, a: Any, **kwargs: Any) -> Pair:
    shape = list(site.meta["val"].shape)
    half = _half_dtype(site)
    fill = 1.0 if site.target is aten.ones_like.default else 0.0
    device = site.meta["val"].device
    return _pair_of(
        aten.full.default(shape, fill, dtype=half, device=device),
        aten.full.default(shape, 0.0, dtype=half, device=device),
    )


@_rule(aten.full.default)
def _full(site: _Site, size: Sequence[int], fill: Any, **kwargs: Any) -> Pair:
    half, device = _half_dtype(site), site.meta["val"].device
    real, imag = _parts(fill, half)
    return _pair_of(
        aten.full.default(list(size), real, dtype=half, device=device),
        aten.full.default(list(size), imag or 0.0, dtype=half, device=device),
    )


@_rule(aten.full_like.default)
def _full_like(site: _Site, a: Any, fill: Any, **kwargs: Any) -> Pair:
    return _full(site, list(site.meta["val"].shape), fill)


@_rule(aten.scalar_tensor.default)
def _scalar_tensor(site: _Site, value: Any, **kwargs: Any) -> Pair:
    half = _half_dtype(site)
    real, imag = _parts(value, half)
    device = site.meta["val"].device
    return _pair_of(
        aten.full.default([], real, dtype=half, device=device),
        aten.full.default([], imag or 0.0, dtype=half, device=device),
    )


@_rule(aten.where.self)
def _where(site: _Site, condition: Any, a: Any, b: Any) -> Pair:
    half = _half_dtype(site)
    a, b = _as_pair(a, half), _as_pair(b, half)
    return Pair(aten.where.self(aten.unsqueeze.default(condition, -1), a.tensor, b.tensor))


@_rule(aten.sum.dim_IntList, aten.mean.dim)
def _reduce(site: _Site, a: Any, dims: Sequence[int] | None, keepdim: bool = False, **kwargs: Any) -> Pair:
    if kwargs.get("dtype") is not None:
        raise NoPairRule("a reduction to another dtype")
    a = _complex_operand(a)
    return Pair(site.target(a.tensor, _dims(dims, a.rank), keepdim))


@_rule(aten.sum.default)
def _sum(site: _Site, a: Any, dtype: Any = None) -> Pair:
    if dtype is not None:
        raise NoPairRule("a reduction to another dtype")
    a = _complex_operand(a)
    return Pair(aten.sum.dim_IntList(a.tensor, list(range(a.rank))))


# -- views and data movement: the same op on the pair, its dimensions those of the complex value ---------------


@_rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(site: _Site, a: Any, size: Sequence[int]) -> Pair:
    a = _complex_operand(a)
    return Pair(site.target(a.tensor, [*size, 2]))


@_rule(aten.expand.default)
def _expand(site: _Site, a: Any, size: Sequence[int], implicit: bool = False) -> Pair:
    return Pair(aten.expand.default(_complex_operand(a).tensor, [*size, 2]))


@_rule(aten.permute.default)
def _permute(site: _Site, a: Any, dims: Sequence[int]) -> Pair:
    a = _complex_operand(a)
    return Pair(aten.permute.default(a.tensor, [*_dims(dims, a.rank), a.rank]))


@_rule(aten.transpose.int)
def _transpose(site: _Site, a: Any, first: int, second: int) -> Pair:
    a = _complex_operand(a)
    return Pair(aten.transpose.int(a.tensor, _dim(first, a.rank), _dim(second, a.rank)))


@_rule(aten.t.default)
def _t(site: _Site, a: Any) -> Pair:
    a = _complex_operand(a)
    if a.rank < 2:
        return Pair(aten.clone.default(a.tensor))
    return Pair(aten.permute.default(a.tensor, [1, 0, 2]))


@_rule(aten.unsqueeze.default)
def _unsqueeze(site: _Site, a: Any, dim: int) -> Pair:
    a = _complex_operand(a)
    return Pair(aten.unsqueeze.default(a.tensor, dim % (a.rank + 1)))


@_rule(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(site: _Site, a: Any, dims: Any = None) -> Pair:
    a = _complex_operand(a)
    if dims is None:
        chosen = [d for d in range(a.rank) if a.tensor.shape[d] == 1]
    elif isinstance(dims, int):
        chosen = [] if a.rank == 0 else [_dim(dims, a.rank)]
    else:
        chosen = [] if a.rank == 0 else _dims(dims, a.rank)
    return Pair(aten.squeeze.dims(a.tensor, chosen))


@_rule(aten.select.int)
def _select(site: _Site, a: Any, dim: int, index: int) -> Pair:
    a = _complex_operand(a)
    return Pair(aten.select.int(a.tensor, _dim(dim, a.rank), index))


@_rule(aten.slice.Tensor)
def _slice(site: _Site, a: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Pair:
    a = _complex_operand(a)
    return Pair(aten.slice.Tensor(a.tensor, _dim(dim, a.rank), start, end, step))


@_rule(aten.slice_scatter.default)
def _slice_scatter(
    site: _Site, a: Any, source: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Pair:
    half = _half_dtype(site)
    a, source = _as_pair(a, half), _as_pair(source, half)
    return Pair(aten.slice_scatter.default(a.tensor, source.tensor, _dim(dim, a.rank), start, end, step))


@_rule(aten.select_scatter.default)
def _select_scatter(site: _Site, a: Any, source: Any, dim: int, index: int) -> Pair:
    half = _half_dtype(site)
    a, source = _as_pair(a, half), _as_pair(source, half)
    return Pair(aten.select_scatter.default(a.tensor, source.tensor, _dim(dim, a.rank), index))


@_rule(aten.flip.default)
def _flip(site: _Site, a: Any, dims: Sequence[int]) -> Pair:
    a = _complex_operand(a)
    return Pair(aten.flip.default(a.tensor, _dims(dims, a.rank)))


@_rule(aten.roll.default)
def _roll(site: _Site, a: Any, shifts: Sequence[int], dims: Sequence[int] = ()) -> Pair:
    a = _complex_operand(a)
    if not dims:
        raise NoPairRule("a roll of the flattened tensor")
    return Pair(aten.roll.default(a.tensor, list(shifts), _dims(dims, a.rank)))


@_rule(aten.cat.default)
def _cat(site: _Site, tensors: Sequence[Any], dim: int = 0) -> Pair:
    half = _half_dtype(site)
    pairs = [_as_pair(t, half) for t in tensors]
    rank = site.meta["val"].dim()
    return Pair(aten.cat.default([p.tensor for p in pairs if p.rank == rank], _dim(dim, rank)))


@_rule(aten.constant_pad_nd.default)
def _pad(site: _Site, a: Any, pad: Sequence[int], value: Any = 0) -> Pair:
    if value not in (0, 0.0):
        raise NoPairRule("padding with a value other than zero")
    return Pair(aten.constant_pad_nd.default(_complex_operand(a).tensor, [0, 0, *pad], 0.0))


@_rule(aten.index_select.default)
def _index_select(site: _Site, a: Any, dim: int, index: torch.Tensor) -> Pair:
    a = _complex_operand(a)
    return Pair(aten.index_select.default(a.tensor, _dim(dim, a.rank), index))


@_rule(aten.index.Tensor)
def _index(site: _Site, a: Any, indices: Sequence[Any]) -> Pair:
    # indices address the leading dimensions: the pair dimension follows the indexed ones
    return Pair(aten.index.Tensor(_complex_operand(a).tensor, list(indices)))


@_rule(aten.split.Tensor, aten.split_with_sizes.default)
def _split(site: _Site, a: Any, sizes: Any, dim: int = 0) -> list[Pair]:
    a = _complex_operand(a)
    return [Pair(part) for part in site.target(a.tensor, sizes, _dim(dim, a.rank))]


@_rule(aten.unbind.int)
def _unbind(site: _Site, a: Any, dim: int = 0) -> list[Pair]:
    a = _complex_operand(a)
    return [Pair(part) for part in aten.unbind.int(a.tensor, _dim(dim, a.rank))]


@_rule(aten.unfold.default)
def _unfold(site: _Site, a: Any, dim: int, size: int, step: int) -> Pair:
    a = _complex_operand(a)
    windows = aten.unfold.default(a.tensor, _dim(dim, a.rank), size, step)  # [..., 2, size]: the pair goes last
    order = [*range(a.rank), a.rank + 1, a.rank]
    return Pair(aten.permute.default(windows, order))


# -- FFTs: DFT matmuls on TensorE --------------------------------------------------------------------------------

_BY_ROOT_N, _BY_N = 1, 2  # ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n


def _norm_scale(normalization: int, n: int) -> float:
    if normalization == _BY_ROOT_N:
        return 1.0 / math.sqrt(n)
    if normalization == _BY_N:
        return 1.0 / n
    return 1.0


def _angles(rows: int, columns: int, n: int) -> torch.Tensor:
    """2 pi j k / n for j < rows, k < columns, from (j k mod n) in integers: exact before the cosine."""
    j = torch.arange(rows, dtype=torch.int64).unsqueeze(1)
    k = torch.arange(columns, dtype=torch.int64).unsqueeze(0)
    return (j * k % n).to(torch.float64) * (2 * math.pi / n)


def _c2c_matrix(n: int, sign: int, scale: float) -> torch.Tensor:
    """[2n, 2n]: the pair row (re x_j, im x_j) times it is the pair of sum_j x_j exp(sign 2 pi i j k / n)."""
    angles = _angles(n, n, n)
    cos, sin = torch.cos(angles) * scale, torch.sin(angles) * (sign * scale)
    matrix = torch.empty(n, 2, n, 2, dtype=torch.float64)
    matrix[:, 0, :, 0], matrix[:, 0, :, 1] = cos, sin  # from re x_j: re += re cos, im += re sin
    matrix[:, 1, :, 0], matrix[:, 1, :, 1] = -sin, cos  # from im x_j: re -= im sin, im += im cos
    return matrix.reshape(2 * n, 2 * n).to(torch.float32)


def _r2c_matrix(n: int, outputs: int, scale: float, sign: int = -1) -> torch.Tensor:
    """[n, 2 outputs]: real x times it is the pair of the first `outputs` terms of sum_j x_j exp(sign 2 pi i j k
    / n), the forward DFT by default."""
    angles = _angles(n, outputs, n)
    matrix = torch.stack([torch.cos(angles), sign * torch.sin(angles)], dim=-1) * scale
    return matrix.reshape(n, 2 * outputs).to(torch.float32)


def _c2r_matrix(inputs: int, n: int, scale: float) -> torch.Tensor:
    """[2 inputs, n]: the first half of a Hermitian spectrum (pairs) times it is the real inverse DFT of length n.

    Terms k and n - k are conjugates, so each term 0 < k < n/2 counts twice; the imaginary parts of the terms 0
    and n/2 (n even) meet sines that vanish, so they are ignored, as in ATen. Terms past n/2 do not exist."""
    used = min(inputs, n // 2 + 1)
    angles = _angles(used, n, n)
    weights = torch.full((used, 1), 2.0, dtype=torch.float64)
    weights[0] = 1.0
    if n % 2 == 0 and used > n // 2:
        weights[n // 2] = 1.0
    matrix = torch.zeros(inputs, 2, n, dtype=torch.float64)
    matrix[:used, 0] = torch.cos(angles) * weights * scale
    matrix[:used, 1] = -torch.sin(angles) * weights * scale
    return matrix.reshape(2 * inputs, n).to(torch.float32)


def _transform(values: torch.Tensor, dim: int, matrix: torch.Tensor, pair_in: bool, pair_out: bool) -> torch.Tensor:
    """`values` with its dimension `dim` (and the pair dimension that follows it, for `pair_in`) contracted
    with `matrix`: one matmul, the transformed dimension moved last and flattened with the pair dimension."""
    rank = values.dim() - (1 if pair_in else 0)
    order = [d for d in range(rank) if d != dim] + [dim] + ([rank] if pair_in else [])
    moved = aten.permute.default(values, order)
    batch = list(moved.shape[: rank - 1])
    rows = math.prod(batch)
    product = aten.mm.default(moved.reshape(rows, matrix.shape[0]), matrix)
    out_size = matrix.shape[1] // 2 if pair_out else matrix.shape[1]
    result = product.reshape([*batch, out_size, 2] if pair_out else [*batch, out_size])
    back = list(range(rank - 1))
    back.insert(dim, rank - 1)
    return aten.permute.default(result, back + ([rank] if pair_out else []))


def _transform_last_two(
    rewrite: _Rewrite, real: torch.Tensor, sign: int, scales: tuple[float, float], outputs: int
) -> torch.Tensor:
    """The 2-D DFT of a real signal over its last two dimensions (all terms of the first, the first `outputs` of
    the second) as pairs, in two matmuls and no transposition.

    The first contracts rows: a constant [(k1, c), n1] times each [n1, n2] slice gives the terms of the first
    dimension with the pair index *before* the second dimension, [k1, (c, j2)]; the second matmul contracts
    (c, j2) with the complex DFT matrix of the second dimension whose rows are ordered likewise (real parts,
    then imaginary), which returns the natural layout [k1, (k2, c')]. Moving a transformed dimension next to the
    pair dimension instead would transpose the pairs between the two matmuls."""
    *batch, first, second = real.shape
    count = math.prod(batch)
    scale1, scale2 = scales
    rows = rewrite.constant(
        ("r2c-rows", first, sign, scale1), lambda: _r2c_matrix(first, first, scale1, sign).t().contiguous()
    )
    planar = rewrite.constant(
        ("c2c-planar", second, outputs, sign, scale2),
        lambda: (
            _c2c_matrix(second, sign, scale2)
            .view(second, 2, 2 * second)
            .transpose(0, 1)[:, :, : 2 * outputs]
            .reshape(2 * second, 2 * outputs)
        ),
    )
    signal = real.reshape(count, first, second)
    if count == 1:
        terms = aten.mm.default(rows, signal.reshape(first, second))
    else:
        terms = aten.bmm.default(aten.expand.default(rows, [count, 2 * first, first]), signal)
    product = aten.mm.default(terms.reshape(count * first, 2 * second), planar)
    return product.reshape([*batch, first, outputs, 2])


def _check_fft_operand(value: Any, dtype: torch.dtype) -> None:
    if value.dtype != dtype:
        raise NoPairRule(f"an FFT of {value.dtype} values (the DFT matrices are float32)")


@_rule(aten._fft_c2c.default)
def _fft_c2c(site: _Site, a: Any, dim: Sequence[int], normalization: int, forward: bool) -> Pair:
    a = _complex_operand(a)
    _check_fft_operand(a.tensor, torch.float32)
    rewrite = site.rewrite
    values = a.tensor
    sign = -1 if forward else 1
    dims = _dims(dim, a.rank) if dim else []
    last_two = {a.rank - 2, a.rank - 1}
    source = a.real_source
    if source is not None and source.dtype == torch.float32 and a.rank >= 2 and last_two <= set(dims):
        # a real signal cast to complex, transformed over its last two dimensions (FNet's fft2)
        scales = (_norm_scale(normalization, source.shape[-2]), _norm_scale(normalization, source.shape[-1]))
        values = _transform_last_two(rewrite, source, sign, scales, source.shape[-1])
        dims = [d for d in dims if d not in last_two]
    elif dims and source is not None and source.dtype == torch.float32:
        # a real signal cast to complex: its first transform contracts the real values alone
        n = source.shape[dims[0]]
        scale = _norm_scale(normalization, n)
        matrix = rewrite.constant(("r2c", n, n, sign, scale), lambda: _r2c_matrix(n, n, scale, sign))
        values = _transform(source, dims[0], matrix, pair_in=False, pair_out=True)
        dims = dims[1:]
    elif not dims:
        values = aten.clone.default(values)
    for d in dims:
        n = values.shape[d]
        scale = _norm_scale(normalization, n)
        matrix = rewrite.constant(("c2c", n, sign, scale), functools.partial(_c2c_matrix, n, sign, scale))
        values = _transform(values, d, matrix, pair_in=True, pair_out=True)
    return Pair(values)


@_rule(aten._fft_r2c.default)
def _fft_r2c(site: _Site, a: Any, dim: Sequence[int], normalization: int, onesided: bool) -> Pair:
    if not isinstance(a, torch.Tensor) or isinstance(a, Pair):
        raise NoPairRule("an operand that is no real tensor")
    _check_fft_operand(a, torch.float32)
    if not dim:
        raise NoPairRule("a transform over no dimension")
    rewrite = site.rewrite
    dims = _dims(dim, a.dim())
    last = dims[-1]
    n = a.shape[last]
    outputs = n // 2 + 1 if onesided else n
    scale = _norm_scale(normalization, n)
    rest = dims[:-1]
    if last == a.dim() - 1 and a.dim() - 2 in rest:  # the last two dimensions (rfft2): no transposition
        scales = (_norm_scale(normalization, a.shape[-2]), scale)
        values = _transform_last_two(rewrite, a, -1, scales, outputs)
        rest = [d for d in rest if d != a.dim() - 2]
    else:
        matrix = rewrite.constant(("r2c", n, outputs, -1, scale), lambda: _r2c_matrix(n, outputs, scale))
        values = _transform(a, last, matrix, pair_in=False, pair_out=True)
    for d in reversed(rest):
        size = values.shape[d]
        step = _norm_scale(normalization, size)
        square = rewrite.constant(("c2c", size, -1, step), functools.partial(_c2c_matrix, size, -1, step))
        values = _transform(values, d, square, pair_in=True, pair_out=True)
    return Pair(values)


@_rule(aten._fft_c2r.default)
def _fft_c2r(site: _Site, a: Any, dim: Sequence[int], normalization: int, last_dim_size: int) -> Any:
    a = _complex_operand(a)
    _check_fft_operand(a.tensor, torch.float32)
    if not dim:
        raise NoPairRule("a transform over no dimension")
    rewrite = site.rewrite
    dims = _dims(dim, a.rank)
    values = a.tensor
    for d in dims[:-1]:
        size = values.shape[d]
        step = _norm_scale(normalization, size)
        square = rewrite.constant(("c2c", size, 1, step), functools.partial(_c2c_matrix, size, 1, step))
        values = _transform(values, d, square, pair_in=True, pair_out=True)
    last, n = dims[-1], last_dim_size
    inputs = values.shape[last]
    scale = _norm_scale(normalization, n)
    matrix = rewrite.constant(("c2r", inputs, n, scale), lambda: _c2r_matrix(inputs, n, scale))
    return _transform(values, last, matrix, pair_in=True, pair_out=False)
