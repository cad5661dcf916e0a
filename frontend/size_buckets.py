"""One program for many sizes: a graph with symbolic sizes compiled once per size bucket, its padding masked.

Input: an ATen FX graph (an AOTAutograd forward, backward or inference graph) whose tensors have symbolic sizes
(`torch.compile(dynamic=True)`, `torch._dynamo.mark_dynamic` with or without a range, Dynamo's automatic dynamic
sizes), each meta value a fake tensor of the graph's shape environment.

Output: `plan_buckets` either refuses the graph (a reason naming the node, its op and source line; the caller
then compiles it once per set of sizes, as before) or returns a `BucketPlan`: the graph rewritten so that every
value may be computed at larger sizes than the call's (a bucket) without its real elements changing, plus what
the host computes at each call (the call's actual extents as masks and numbers) and how to cut the results.

How a call runs (`BucketedGraph`): each size symbol takes its bucket (`bucket_of`: the top of its range when the
range is bounded, or for the graph's widest range the top of its lower or upper half, `split_symbols`; an
unbounded size, the top of the smallest program compiled so far that covers the call, else of a program covering
every size seen, `LearnedBuckets`), the tensor inputs are padded with zeros to the bucket's sizes,
the program compiled for that bucket runs, and each result is cut back to the call's sizes. Padding leaves
arbitrary values (even NaN) in the padded region of every intermediate; the rewrite keeps them out of the real
elements. The analysis tracks, per dimension of every tensor, its factors (a dimension made by merging others,
`[s0, s1, 32] -> [s0*s1, 32]`, keeps `(s0, s1)`): element `i` of a dimension is real iff each of its digits in
the factors' mixed radix is below that factor's actual extent. Then, per op:

* elementwise ops, views that split, merge, permute or broadcast whole factors, slices from a non-negative
  start, `cumsum` (each element reads only earlier ones) and layer norms over unpadded features keep the real
  elements real: nothing to do;
* a reduction over a padded dimension reads its input through a `where` with the reduction's identity (0 for
  sums, -inf for max, softmax and logsumexp, ...); a mean divides the masked sum by the actual count;
* a contraction over a padded extent (`mm`, `bmm`, `addmm`) zeroes both operands' padding; attention over
  padded keys adds -inf for them to its mask and has the kernel zero their key and value rows (or a pass, when
  the keys are not counted by one size); gathers (`embedding`, `index.Tensor`, `gather`) read index 0 at padded
  positions, so that no padded index points outside the table, unless their padding already lies inside it (an
  input's zeros, or `arange(s)` over a dimension of `s` or a table as long as `s`'s range);
* backward kernels that sum over rows (layer norm, softmax, embedding, nll_loss) read padded gradients as 0;
  a slice written back (`slice_scatter`) keeps the tensor's own values under the slice's padding;
* per-sample ops (convolution, pooling, inference batch norm) take a padded batch as it is;
* a symbolic size used as a number (`x / s0`) reads the actual extent, a host-computed input;
* anything else that touches a padded dimension (a negative index, a sort, a variance, a scatter, ...) refuses
  the graph: the per-size compilation never gives a wrong result.

Two tensors whose sizes Dynamo could not relate (tokens and labels marked separately) may meet where their
extents must agree: the rewrite takes those symbols as equal (`BucketPlan.assumed`), and a call that breaks
that runs the graph compiled for its own sizes.

Masks and numbers are inputs computed on the host from the call's extents, so one program serves every size in
its bucket, and takes the call's sizes as arguments: its loops over dimensions they bound run the call's trips
(docs/dynamic-shapes.md).
"""

from __future__ import annotations

import logging
import math
import operator
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import sympy  # type: ignore[import-untyped]
import torch

from neuron_mlir.frontend import stats as stats_module
from neuron_mlir.frontend.fx_importer import KEY_BLOCKS_READ, PADDED_KEYS, PADDING_WRITTEN, SIZE_FACTORS

if TYPE_CHECKING:
    from neuron_mlir.frontend.backend import CompileOptions

logger = logging.getLogger("neuron_mlir")

aten = torch.ops.aten

Factor: TypeAlias = Any  # an int, a torch.SymInt or a sympy expression: one extent of a dimension's factors
Dim: TypeAlias = tuple[Factor, ...]
Layout: TypeAlias = list[Dim]

# a marked range's split counts from this size: below it, fixed costs dominate (`range_split`)
SMALLEST_BUCKET = 8
# the smallest top an unbounded size learns (`LearnedBuckets`): a loop over up to SHORT_TRIPS (4) trips is
# unrolled into guarded copies (lowering/neuron_unroll_loops.py), so a program padded to 4 runs a call of 2 as fast as
# one of its own; 8 made such loops rolled
SMALLEST_TOP = 4
# the largest top at which a program's nests still follow a smaller call: up to SHORT_TRIPS (4) row tiles of 128 as
# guarded copies, masks' key columns in COLUMN_VARIANTS (4) widths of 128 (lowering/convert_torch_to_tile); an
# unbounded size's upper program is compiled at least this large, so growth below it costs no program
FOLLOWED_TOP = 512
# a bounded range above this many elements is bucketed by powers of two as an unbounded one is
LARGEST_RANGE_BUCKET = 1 << 16


class Refused(Exception):
    """The graph cannot be bucketed safely: the reason names the node, its op and its source line."""


def _expr(factor: Any) -> sympy.Expr:
    if isinstance(factor, torch.SymInt):
        return factor.node.expr
    if isinstance(factor, sympy.Expr):
        return factor
    return sympy.Integer(int(factor))


def _padded(dim: Dim) -> bool:
    return any(_expr(f).free_symbols for f in dim)


def _canonical(dim: Dim) -> list[sympy.Expr]:
    """A dimension's factors with runs of static ones multiplied together (only padded factors tell layouts
    apart: `(2, 16)` and `(32,)` are the same dimension)."""
    result: list[sympy.Expr] = []
    for factor in dim:
        expr = _expr(factor)
        if expr == 1:
            continue
        if expr.is_Integer and result and result[-1].is_Integer:
            result[-1] = result[-1] * expr
        else:
            result.append(expr)
    return result


def _is_one(factor: Any) -> bool:
    return _expr(factor) == 1


def _plain(value: torch.Tensor) -> Layout:
    return [(extent,) for extent in value.shape]


@dataclass
class HostInput:
    """An input the host computes at each call: a mask over one dimension (`dim`: its factors; True where the
    element is real, at the bucket's size) or a number (`expr` at the call's sizes, as a 0-d tensor)."""

    kind: str  # "mask" or "number"
    dim: Dim = ()
    expr: sympy.Expr | None = None
    dtype: torch.dtype = torch.bool


@dataclass
class BucketPlan:
    """What `plan_buckets` makes of a graph: the rewritten graph (its placeholders: the original ones, then one
    per host input), the size symbols and their ranges, and how to read, pad and cut each call's values."""

    graph_module: torch.fx.GraphModule
    symbols: list[sympy.Symbol]
    ranges: dict[sympy.Symbol, tuple[int, int | None]]
    # per original placeholder: its layout (tensor), its symbol expression (SymInt) or None (anything else)
    placeholders: list[Any]
    host_inputs: list[HostInput] = field(default_factory=list)
    # per flattened output: a layout (tensor, cut to the call's sizes), a sympy expression (SymInt) or None
    outputs: list[Any] = field(default_factory=list)
    # pairs of size symbols the rewrite took as equal (`_Rewriter.same`)
    assumed: list[tuple[sympy.Symbol, sympy.Symbol]] = field(default_factory=list)


def _args(node: torch.fx.Node) -> tuple[Any, ...]:
    """A node's arguments, untyped: each rule reads them as its op's schema says."""
    return tuple(node.args)


def _where(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    return f" ({lines[-1]})" if lines else ""


class _Rewriter:
    """The analysis and the rewrite, in one walk over the graph in order."""

    def __init__(self, graph_module: torch.fx.GraphModule):
        self.gm = graph_module
        self.graph = graph_module.graph
        vals = [n.meta.get("val") for n in self.graph.nodes if n.op == "placeholder"]
        from torch._guards import detect_fake_mode

        self.fake_mode: Any = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
        self.layouts: dict[torch.fx.Node, Any] = {}
        self.host_inputs: list[HostInput] = []
        self.host_nodes: dict[tuple[str, Any], torch.fx.Node] = {}
        # the partitioner places a region's inputs where they are first used: gathered at the front (their order,
        # the calling convention, unchanged), so that the host inputs after them come before any use
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        first = next(iter(self.graph.nodes))
        for node in placeholders:
            if node is not first:
                first.append(node)
            first = node
        self.last_placeholder = placeholders[-1]
        self.symbols: set[sympy.Symbol] = set()
        self.assumed: set[tuple[sympy.Symbol, sympy.Symbol]] = set()
        self.attention_masks: dict[tuple[Any, ...], torch.fx.Node] = {}
        # tensors whose padding is 0: the inputs (the host pads them with zeros) and their views and casts
        self.zero_padded: set[torch.fx.Node] = set()
        # integer tensors whose every element, padding included once they write it, lies below the bucket's
        # extent of a size symbol: `arange(s)`, what adds 0 to it and its views (the symbol, the nodes computing it)
        self.below: dict[torch.fx.Node, tuple[sympy.Symbol, list[torch.fx.Node]]] = {}

    def same(self, a: Dim, b: Dim) -> bool:
        """Whether two dimensions are laid out alike. Factors that are different size symbols are taken as equal
        (tensors whose sizes Dynamo could not relate, such as labels beside the tokens they label): an
        assumption each call checks (`BucketPlan.assumed`), computing a call that breaks it at its own sizes."""
        left, right = _canonical(a), _canonical(b)
        if len(left) != len(right):
            return False
        pairs = []
        for x, y in zip(left, right, strict=True):
            if sympy.expand(x - y) == 0:
                continue
            if len(x.free_symbols) != 1 or len(y.free_symbols) != 1:
                return False
            (a,), (b,) = x.free_symbols, y.free_symbols
            if sympy.expand(x.xreplace({a: b}) - y) != 0:  # the same extent of another symbol (`s - 1`)
                return False
            pairs.append((a, b) if str(a) < str(b) else (b, a))
        self.assumed.update(pairs)
        return True

    # -- building nodes ----------------------------------------------------------------------------------------

    def _call(
        self, target: Any, args: tuple[Any, ...], like: torch.fx.Node, kwargs: dict[str, Any] | None = None
    ) -> torch.fx.Node:
        node = self.graph.call_function(target, args, kwargs or {})
        # what the rewrite adds writes its padding: a program's loops bounded by the call's sizes skip none of it
        node.meta[PADDING_WRITTEN] = None
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in like.meta:
                node.meta[key] = like.meta[key]

        def meta(a: Any) -> Any:
            return a.meta["val"] if isinstance(a, torch.fx.Node) else a

        fake_args = torch.fx.node.map_aggregate(args, meta)
        fake_kwargs = torch.fx.node.map_aggregate(kwargs or {}, meta)
        with self.fake_mode:
            node.meta["val"] = target(*fake_args, **fake_kwargs)
        return node

    def _host_input(self, entry: HostInput, key: Any, size: Any) -> torch.fx.Node:
        found = self.host_nodes.get((entry.kind, key))
        if found is not None:
            return found
        with self.graph.inserting_after(self.last_placeholder):
            node = self.graph.placeholder(f"bucket_{entry.kind}{len(self.host_inputs)}")
        self.last_placeholder = node
        with self.fake_mode:
            node.meta["val"] = torch.empty(size, dtype=entry.dtype)
        self.host_inputs.append(entry)
        self.host_nodes[(entry.kind, key)] = node
        return node

    def mask(self, dim: Dim, extent: Any, rank: int, axis: int, like: torch.fx.Node) -> torch.fx.Node:
        """A bool tensor of `rank` dimensions, True at the real elements of dimension `axis` (`dim`, of `extent`
        elements)."""
        key = tuple(str(_expr(f)) for f in dim)
        node = self._host_input(HostInput("mask", dim=dim), key, (extent,))
        # unsqueezed rather than viewed: a view would hold the symbolic extent as a raw number in the graph
        for _ in range(axis):
            node = self._call(aten.unsqueeze.default, (node, 0), like)
        for _ in range(rank - axis - 1):
            node = self._call(aten.unsqueeze.default, (node, -1), like)
        return node

    def number(self, expr: sympy.Expr, dtype: torch.dtype) -> torch.fx.Node:
        return self._host_input(HostInput("number", expr=expr, dtype=dtype), (str(expr), dtype), ())

    def masked(self, x: torch.fx.Node, axes: Sequence[int], fill: Any, like: torch.fx.Node) -> torch.fx.Node:
        """`x` with the padding of its dimensions `axes` replaced by `fill`."""
        if x in self.zero_padded and fill == 0:
            return x  # its padding is already `fill`
        layout = self.layouts[x]
        value = x.meta["val"]
        for axis in axes:
            if not _padded(layout[axis]):
                continue
            with self.graph.inserting_before(like):
                condition = self.mask(layout[axis], value.shape[axis], value.dim(), axis, like)
                filler = self._call(aten.scalar_tensor.default, (fill,), like, {"dtype": value.dtype})
                masked = self._call(aten.where.self, (condition, x, filler), like)
            self.layouts[masked] = layout
            x = masked
        return x

    # -- the walk ----------------------------------------------------------------------------------------------

    def run(self) -> list[Any]:
        placeholders: list[Any] = []
        # the order symbols first appear in among the inputs (sizes, then tensor extents): a merged input
        # extent's factors are taken in this order (`_input_layout`)
        self.order: dict[sympy.Expr, int] = {}
        for node in self.graph.nodes:
            value = node.meta.get("val") if node.op == "placeholder" else None
            extents: list[Any] = [value] if isinstance(value, torch.SymInt) else []
            extents += list(value.shape) if isinstance(value, torch.Tensor) else []
            for extent in extents:
                if _expr(extent).is_Symbol:
                    self.order.setdefault(_expr(extent), len(self.order))
        for node in list(self.graph.nodes):
            value = node.meta.get("val")
            if node.op == "placeholder":
                if isinstance(value, torch.Tensor):
                    layout = self._input_layout(value.shape, node)
                    self.layouts[node] = layout
                    self.zero_padded.add(node)
                    placeholders.append(layout)
                elif isinstance(value, torch.SymInt):
                    self.symbols |= value.node.expr.free_symbols
                    placeholders.append(value.node.expr)
                elif isinstance(value, torch.SymFloat | torch.SymBool):
                    raise Refused(f"{node.name}: a symbolic {type(value).__name__} input")
                else:
                    placeholders.append(None)
            elif node.op == "call_function":
                self._visit(node)
            elif node.op == "get_attr":
                if isinstance(value, torch.Tensor):
                    self.layouts[node] = _plain(value)
            elif node.op == "output":
                self.outputs = self._outputs(node)
        return placeholders

    def _input_layout(self, shape: Sequence[Any], node: torch.fx.Node) -> Layout:
        """An input's layout: an extent that is a product of one-symbol extents (rows of a forward's merged
        dimensions, saved for the backward: `b*s`, `b*(s - 1)`) is taken as those factors in the order their
        symbols first appear among the inputs.
        The order is an assumption the uses check: a reshape splitting the extent in another order, or an operand
        merged otherwise, refuses."""
        layout: Layout = []
        for extent in shape:
            expr = _expr(extent)
            self.symbols |= expr.free_symbols
            if not expr.free_symbols or expr.is_Symbol:
                layout.append((extent,))
            elif expr.is_Mul and all(len(a.free_symbols) == 1 for a in expr.args):
                # each factor one symbol's extent (`s`, `s - 1`: a prefix of the padded extent)
                def first_seen(factor: sympy.Expr) -> tuple[int, str]:
                    (symbol,) = factor.free_symbols
                    return self.order.get(symbol, len(self.order)), str(factor)

                layout.append(tuple(sorted(expr.args, key=first_seen)))
            else:
                raise Refused(f"{node.name}: an input extent {expr} that is not a product of size symbols")
        return layout

    def _outputs(self, node: torch.fx.Node) -> list[Any]:
        values = _args(node)[0] if isinstance(_args(node)[0], list | tuple) else [_args(node)[0]]
        results: list[Any] = []
        for value in values:
            meta = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
            if isinstance(meta, torch.Tensor):
                results.append(self.layouts[value])
            elif isinstance(meta, torch.SymInt):
                results.append(meta.node.expr)
            else:
                results.append(None)
        return results

    def _refuse(self, node: torch.fx.Node, rule: str) -> Refused:
        return Refused(f"{node.name} = {node.target}: {rule}{_where(node)}")

    def _visit(self, node: torch.fx.Node) -> None:
        target = node.target
        value = node.meta.get("val")
        if target is operator.getitem:
            source, index = _args(node)
            if isinstance(source, torch.fx.Node) and source in self.layouts:
                layouts = self.layouts[source]
                if isinstance(layouts, list) and layouts and isinstance(layouts[0], list):
                    self.layouts[node] = layouts[index]
                    return
                if isinstance(value, torch.Tensor):
                    self.layouts[node] = layouts[index] if isinstance(layouts[index], list) else _plain(value)
                    return
            if not isinstance(value, torch.Tensor):
                return
            raise self._refuse(node, "an element of a value not analysed")
        if not isinstance(target, torch._ops.OpOverload):
            if isinstance(value, torch.SymInt | int | float | bool) or value is None:
                return  # size arithmetic, specialised by the importer at the bucket's sizes
            raise self._refuse(node, "a call that is not an ATen op")
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool | int | float | bool):
            if target in _SIZE_QUERIES:
                return
            raise self._refuse(node, "a number read from a tensor")
        self._replace_numbers(node)
        tensors = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        padded_in = any(any(_padded(d) for d in self.layouts[a]) for a in tensors if a in self.layouts)
        rule = _RULES.get(target)
        if rule is None and torch.Tag.pointwise in target.tags:
            rule = _pointwise
        if rule is not None:
            self.layouts[node] = rule(self, node)
            if target in _KEEPING_ZEROS and _args(node)[0] in self.zero_padded:
                self.zero_padded.add(node)
            self._track_below(node)
            return
        outputs = value if isinstance(value, list | tuple) else [value]
        padded_out = any(isinstance(v, torch.Tensor) and any(_expr(e).free_symbols for e in v.shape) for v in outputs)
        if padded_in or padded_out:
            raise self._refuse(node, "no rule keeps its padding out of its real elements")
        self.layouts[node] = [_plain(v) if isinstance(v, torch.Tensor) else None for v in outputs]
        if not isinstance(value, list | tuple):
            self.layouts[node] = self.layouts[node][0]

    def _track_below(self, node: torch.fx.Node) -> None:
        """Record `node` in `below` when it is `arange(s)` (from 0, step 1, an integer dtype), adds 0 to such a
        tensor (transformers' `arange(length) + offset` with no offset) or views one (a whole slice, `x[:, None]`
        with symbolic sizes, included)."""
        target, args = node.target, _args(node)
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or value.dtype not in (torch.int32, torch.int64):
            return
        if target in (aten.arange.default, aten.arange.start, aten.arange.start_step):
            start, end = (0, args[0]) if target is aten.arange.default else (args[0], args[1])
            step = args[2] if len(args) > 2 else node.kwargs.get("step", 1)
            size = end.meta.get("val") if isinstance(end, torch.fx.Node) else end
            if start == 0 and step == 1 and isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                self.below[node] = (size.node.expr, [node])
            return
        source = args[0] if args else None
        if not isinstance(source, torch.fx.Node) or source not in self.below:
            return
        adds_zero = target in (aten.add.Tensor, aten.add.Scalar) and len(args) == 2 and args[1] == 0
        if adds_zero or target in _VIEWS or _whole_slice(node):
            symbol, chain = self.below[source]
            self.below[node] = (symbol, [*chain, node])

    def in_range(self, index: torch.fx.Node, extent: Any) -> bool:
        """Whether every element of `index`, padding included, is a valid index into a dimension of `extent`
        (a static extent, or a layout's dimension) at every bucket: an index in `below` whose symbol is that
        dimension's one factor, or whose symbol's bounded range (its largest bucket) fits in the static extent.
        Then the nodes computing it are made to write their padding (`PADDING_WRITTEN`), and the gather needs no
        `where` setting its padded indices to 0."""
        if index not in self.below:
            return False
        symbol, chain = self.below[index]
        if isinstance(extent, int):
            known = self.fake_mode.shape_env.var_to_range.get(symbol)
            upper = known.upper if known is not None else None
            if not isinstance(upper, sympy.Integer) or int(upper) > min(extent, LARGEST_RANGE_BUCKET):
                return False
        elif not (isinstance(extent, tuple) and len(extent) == 1 and _expr(extent[0]) == symbol):
            return False
        for node in chain:
            node.meta[PADDING_WRITTEN] = None
        return True

    def _replace_numbers(self, node: torch.fx.Node) -> None:
        """Symbolic sizes passed as numbers to an elementwise op read their actual value (a host input)."""
        target = node.target
        assert isinstance(target, torch._ops.OpOverload)
        schema = target._schema
        new_args = list(_args(node))
        changed = False
        for position, (spec, argument) in enumerate(zip(schema.arguments, _args(node), strict=False)):
            if not isinstance(argument, torch.fx.Node) or not isinstance(argument.meta.get("val"), torch.SymInt):
                continue
            kind = str(spec.type)
            if target in _SIZE_ARGUMENTS and spec.name in _SIZE_ARGUMENTS[target]:
                continue  # a size: the bucket's
            if torch.Tag.pointwise not in target.tags or kind not in ("Tensor", "Scalar"):
                raise self._refuse(node, f"symbolic size used as its argument {spec.name}")
            tensor_dtypes = [
                a.meta["val"].dtype
                for a in _args(node)
                if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)
            ]
            dtype = _number_dtype(tensor_dtypes[0] if tensor_dtypes else torch.int64)
            new_args[position] = self.number(argument.meta["val"].node.expr, dtype)
            changed = True
        if not changed:
            return
        target_packet = target.overloadpacket
        if target._overloadname.startswith("Scalar") or "Scalar" in target._overloadname:
            name = target._overloadname.replace("Scalar", "Tensor")
            if name in target_packet.overloads():
                node.target = getattr(target_packet, name)
        node.args = tuple(new_args)


# -- the rules: each returns the node's layout (a list of layouts for ops with several results) -----------------


def _whole_slice(node: torch.fx.Node) -> bool:
    """Whether `node` is `slice(x, dim, 0, end)` with step 1 and an end no dimension reaches (Python's `x[:]`,
    which traces so when the sizes are symbolic): the tensor itself."""
    if node.target is not aten.slice.Tensor:
        return False
    args = _args(node)
    start = args[2] if len(args) > 2 else node.kwargs.get("start")
    end = args[3] if len(args) > 3 else node.kwargs.get("end")
    step = args[4] if len(args) > 4 else node.kwargs.get("step", 1)
    return bool(start in (0, None) and step == 1 and (end is None or (isinstance(end, int) and end >= sys.maxsize)))


def _number_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of a size passed as a 0-d tensor beside a tensor of `dtype`: a 0-d operand does not change the
    result's dtype, and sizes up to 2^24 are exact in float32 (not in a 16-bit float)."""
    if dtype.is_floating_point:
        return torch.float64 if dtype == torch.float64 else torch.float32
    return torch.int64


def _layout(rw: _Rewriter, arg: Any) -> Layout:
    if isinstance(arg, torch.fx.Node) and arg in rw.layouts:
        return rw.layouts[arg]
    if isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("val"), torch.Tensor):
        return _plain(arg.meta["val"])
    return []


def _broadcast(rw: _Rewriter, node: torch.fx.Node, layouts: list[Layout]) -> Layout:
    value = node.meta["val"]
    rank = value.dim()
    result: Layout = []
    for axis in range(rank):
        chosen: Dim | None = None
        for layout in layouts:
            offset = axis - (rank - len(layout))
            if offset < 0:
                continue
            dim = layout[offset]
            if all(_is_one(f) for f in dim):
                continue
            if chosen is None:
                chosen = dim
            elif not rw.same(chosen, dim):
                raise rw._refuse(node, f"operands' dimension {axis} are laid out differently")
        result.append(chosen if chosen is not None else (value.shape[axis],))
    return result


def _pointwise(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    layouts = [_layout(rw, a) for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
    return _broadcast(rw, node, layouts)


def _same_layout(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    return list(_layout(rw, _args(node)[0]))


def _reshape(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = _layout(rw, _args(node)[0])
    factors: list[Factor] = [f for dim in source for f in dim if not _is_one(f)]
    result: Layout = []
    index = 0
    for size in node.meta["val"].shape:
        wanted = _expr(size)
        group: list[Factor] = []
        product: sympy.Expr = sympy.Integer(1)
        while sympy.expand(product - wanted) != 0:
            if index >= len(factors):
                raise rw._refuse(node, "a reshape whose extents do not match its input's")
            factor = factors[index]
            quotient = sympy.cancel(wanted / (product * _expr(factor)))
            if quotient.as_numer_denom()[1] == 1 and not quotient.is_negative:
                group.append(factor)
                product = product * _expr(factor)
                index += 1
                continue
            rest = sympy.cancel(wanted / product)
            if _expr(factor).is_Integer and rest.is_Integer and int(_expr(factor)) % int(rest) == 0:
                group.append(int(rest))
                factors[index] = int(_expr(factor)) // int(rest)
                product = wanted
                continue
            raise rw._refuse(node, "a reshape that splits a padded extent")
        result.append(tuple(group) if group else (size,))
    if any(not _is_one(f) for f in factors[index:]):
        raise rw._refuse(node, "a reshape whose extents do not match its input's")
    return result


def _permute(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = _layout(rw, _args(node)[0])
    order = [d % len(source) for d in _args(node)[1]] if source else []
    return [source[d] for d in order]


def _transpose(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = list(_layout(rw, _args(node)[0]))
    if not source:
        return source
    a, b = (d % len(source) for d in _args(node)[1:3])
    source[a], source[b] = source[b], source[a]
    return source


def _t(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    return list(reversed(_layout(rw, _args(node)[0])))


def _unsqueeze(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = list(_layout(rw, _args(node)[0]))
    axis = _args(node)[1] % (len(source) + 1)
    source.insert(axis, (1,))
    return source


def _squeeze(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = _layout(rw, _args(node)[0])
    shape = _args(node)[0].meta["val"].shape
    axes = _args(node)[1] if len(_args(node)) > 1 else list(range(len(source)))
    axes = [axes] if isinstance(axes, int) else axes
    removed = {a % max(len(source), 1) for a in axes if _expr(shape[a % len(source)]) == 1}
    return [d for i, d in enumerate(source) if i not in removed]


def _expand(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = _layout(rw, _args(node)[0])
    shape = node.meta["val"].shape
    lead = len(shape) - len(source)
    result: Layout = []
    for axis, extent in enumerate(shape):
        if axis < lead:
            result.append((extent,))
            continue
        dim = source[axis - lead]
        result.append((extent,) if all(_is_one(f) for f in dim) else dim)
    return result


def _slice(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = list(_layout(rw, _args(node)[0]))
    args = list(_args(node)) + [None] * (5 - len(_args(node)))
    axis = (args[1] or 0) % len(source)
    start, step = args[2] or 0, args[4] or 1
    dim = source[axis]
    extent = node.meta["val"].shape[axis]
    if not _padded(dim):
        source[axis] = (extent,)
        return source
    if isinstance(start, torch.fx.Node) or start < 0 or step != 1:
        raise rw._refuse(node, "a slice of a padded dimension from its end or with a step")
    if len(dim) > 1 and not (start == 0 and _expr(extent) == sympy.Mul(*[_expr(f) for f in dim])):
        raise rw._refuse(node, "a slice of merged padded dimensions")
    source[axis] = dim if len(dim) > 1 else (extent,)
    return source


def _select(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = list(_layout(rw, _args(node)[0]))
    axis, index = _args(node)[1] % len(source), _args(node)[2]
    if _padded(source[axis]) and (not isinstance(index, int) or index < 0 or len(source[axis]) > 1):
        raise rw._refuse(node, "a select on a padded dimension by a negative or symbolic index")
    del source[axis]
    return source


def _slice_scatter(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    """slice_scatter(input, src, dim, start, end): a slice's backward. At the bucket's sizes the slice is longer
    than the call's, so src's padding would overwrite real elements of input: it reads input's there instead."""
    args = list(_args(node)) + [None] * (6 - len(_args(node)))
    base, src = args[0], args[1]
    assert isinstance(base, torch.fx.Node)
    assert isinstance(src, torch.fx.Node)
    layout, written = list(_layout(rw, base)), _layout(rw, src)
    axis = (args[2] or 0) % len(layout)
    start, step = args[3] or 0, args[5] or 1
    for i, (dim, other) in enumerate(zip(layout, written, strict=True)):
        if i != axis and not rw.same(dim, other):
            raise rw._refuse(node, "a slice written back into a tensor laid out otherwise")
    if not _padded(written[axis]) and not _padded(layout[axis]):
        return layout
    if isinstance(start, torch.fx.Node) or start < 0 or step != 1 or len(written[axis]) > 1:
        raise rw._refuse(node, "a slice written back into a padded dimension from its end or with a step")
    if _padded(written[axis]):
        value = src.meta["val"]
        with rw.graph.inserting_before(node):
            underneath = rw._call(aten.slice.Tensor, (base, axis, start, args[4]), node)
            real = rw.mask(written[axis], value.shape[axis], value.dim(), axis, node)
            kept = rw._call(aten.where.self, (real, src, underneath), node)
        rw.layouts[underneath] = rw.layouts[kept] = list(written)
        node.replace_input_with(src, kept)
    return layout


def _split(rw: _Rewriter, node: torch.fx.Node) -> list[Layout]:
    source = _layout(rw, _args(node)[0])
    axis = (_args(node)[2] if len(_args(node)) > 2 else 0) % len(source)
    if _padded(source[axis]):
        raise rw._refuse(node, "a split along a padded dimension")
    results = []
    for value in node.meta["val"]:
        layout = list(source)
        layout[axis] = (value.shape[axis],)
        results.append(layout)
    return results


def _cat(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    inputs = [a for a in _args(node)[0] if isinstance(a, torch.fx.Node)]
    value = node.meta["val"]
    axis = (_args(node)[1] if len(_args(node)) > 1 else 0) % value.dim()
    layouts = [_layout(rw, a) for a in inputs if a.meta["val"].dim() == value.dim()]
    for layout in layouts[:-1]:
        if _padded(layout[axis]):
            raise rw._refuse(node, "a concatenation after a padded operand along its dimension")
    if layouts and len(layouts[-1][axis]) > 1 and _padded(layouts[-1][axis]):
        raise rw._refuse(node, "a concatenation along merged padded dimensions")
    others = [[d if i != axis else (1,) for i, d in enumerate(layout)] for layout in layouts]
    result = _broadcast(rw, node, others) if others else _plain(value)
    result[axis] = (value.shape[axis],)
    return result


def _creation(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    if node.target in (aten.arange.start_step, aten.arange.start):
        start = _args(node)[0]
        step = _args(node)[2] if len(_args(node)) > 2 else node.kwargs.get("step", 1)
        if not isinstance(start, int) or not isinstance(step, int) or step <= 0:
            raise rw._refuse(node, "an arange with a symbolic or negative start or step")
    value = node.meta["val"]
    return _plain(value)


def _reduction(identity: Callable[[torch.dtype], Any]) -> Callable[[_Rewriter, torch.fx.Node], Any]:
    def rule(rw: _Rewriter, node: torch.fx.Node) -> Any:
        x = _args(node)[0]
        assert isinstance(x, torch.fx.Node)
        source = _layout(rw, x)
        rank = len(source)
        axes = _reduced_axes(node, rank)
        padded = [a for a in axes if _padded(source[a])]
        if padded:
            masked = rw.masked(x, padded, identity(x.meta["val"].dtype), node)
            node.replace_input_with(x, masked)
        keepdim = _keepdim(node)
        if node.target in (aten._softmax.default, aten._log_softmax.default, aten.cumsum.default):
            return list(source)
        result = (
            [(1,) if i in axes else d for i, d in enumerate(source)]
            if keepdim
            else [d for i, d in enumerate(source) if i not in axes]
        )
        value = node.meta["val"]
        if isinstance(value, list | tuple):
            return [result for _ in value]
        return result

    return rule


def _reduced_axes(node: torch.fx.Node, rank: int) -> list[int]:
    names = [spec.name for spec in node.target._schema.arguments]  # type: ignore[union-attr]
    arguments = dict(zip(names, _args(node), strict=False)) | dict(node.kwargs)
    dims = arguments.get("dim")
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted({d % max(rank, 1) for d in dims})


def _keepdim(node: torch.fx.Node) -> bool:
    names = [spec.name for spec in node.target._schema.arguments]  # type: ignore[union-attr]
    arguments = dict(zip(names, _args(node), strict=False)) | dict(node.kwargs)
    return bool(arguments.get("keepdim", False))


def _lowest(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point:
        return -math.inf
    return False if dtype == torch.bool else torch.iinfo(dtype).min


def _highest(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point:
        return math.inf
    return True if dtype == torch.bool else torch.iinfo(dtype).max


def _cumulative(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    source = _layout(rw, _args(node)[0])
    axis = _args(node)[1] % len(source)
    if len(source[axis]) > 1 and _padded(source[axis]):
        raise rw._refuse(node, "a scan along merged padded dimensions")
    return list(source)


def _mean(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    x = _args(node)[0]
    assert isinstance(x, torch.fx.Node)
    source = _layout(rw, x)
    axes = _reduced_axes(node, len(source))
    if not any(_padded(source[a]) for a in axes):
        return _reduction(lambda _: 0)(rw, node)
    if not x.meta["val"].dtype.is_floating_point or node.kwargs.get("dtype") is not None:
        raise rw._refuse(node, "a mean over a padded dimension of an integer or recast input")
    masked = rw.masked(x, axes, 0.0, node)
    count = sympy.Mul(*[_expr(f) for a in axes for f in source[a]])
    keepdim = _keepdim(node)
    dtype = x.meta["val"].dtype
    wide = _number_dtype(dtype)
    with rw.graph.inserting_before(node):
        # summed and divided in float32 at least, rounded once, as ATen's mean of a 16-bit float does
        total = rw._call(aten.sum.dim_IntList, (masked, axes, keepdim), node, {"dtype": wide})
        divisor = rw.number(count, wide)
        divided = rw._call(aten.div.Tensor, (total, divisor), node)
        quotient = divided
        if wide != dtype:
            quotient = rw._call(aten._to_copy.default, (divided,), node, {"dtype": dtype})
    node.replace_all_uses_with(quotient)
    result = (
        [(1,) if i in axes else d for i, d in enumerate(source)]
        if keepdim
        else [d for i, d in enumerate(source) if i not in axes]
    )
    for made in (total, divided, quotient):
        rw.layouts[made] = result
    return result


def _layer_norm(rw: _Rewriter, node: torch.fx.Node) -> list[Layout]:
    source = _layout(rw, _args(node)[0])
    normalized = len(_args(node)[1])
    if any(_padded(d) for d in source[len(source) - normalized :]):
        raise rw._refuse(node, "a layer norm over a padded dimension")
    stats = list(source[: len(source) - normalized]) + [(1,)] * normalized
    return [list(source), stats, stats]


def _mm(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    offset = 1 if node.target in (aten.addmm.default, aten.baddbmm.default) else 0
    a, b = _args(node)[offset], _args(node)[offset + 1]
    assert isinstance(a, torch.fx.Node)
    assert isinstance(b, torch.fx.Node)
    la, lb = _layout(rw, a), _layout(rw, b)
    k_a, k_b = len(la) - 1, len(lb) - 2
    if not rw.same(la[k_a], lb[k_b]):
        raise rw._refuse(node, "a contraction over differently laid out extents")
    if len(la) == 3 and not rw.same(la[0], lb[0]):
        raise rw._refuse(node, "a batched product over differently laid out batches")
    if _padded(la[k_a]):
        node.replace_input_with(a, rw.masked(a, [k_a], 0.0, node))
        node.replace_input_with(b, rw.masked(b, [k_b], 0.0, node))
    product: Layout = ([la[0]] if len(la) == 3 else []) + [la[-2], lb[-1]]
    if offset:
        return _broadcast(rw, node, [_layout(rw, _args(node)[0]), product])
    return product


def _gather_rows(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    """embedding(weight, indices): padded indices read row 0."""
    weight, indices = _args(node)[0], _args(node)[1]
    assert isinstance(weight, torch.fx.Node)
    assert isinstance(indices, torch.fx.Node)
    if any(_padded(d) for d in _layout(rw, weight)):
        raise rw._refuse(node, "an embedding table with a padded dimension")
    layout = _layout(rw, indices)
    padded = [i for i, d in enumerate(layout) if _padded(d)]
    if padded and not rw.in_range(indices, weight.meta["val"].shape[0]):
        node.replace_input_with(indices, rw.masked(indices, padded, 0, node))
    return [*list(layout), _layout(rw, weight)[-1]]


def _gather(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    """gather(x, dim, index): padded index elements read element 0; x's other dimensions as the index's."""
    x, axis, index = _args(node)[:3]
    assert isinstance(x, torch.fx.Node)
    assert isinstance(index, torch.fx.Node)
    source, layout = _layout(rw, x), _layout(rw, index)
    axis = axis % len(source)
    for i, dim in enumerate(layout):
        if i != axis and _padded(dim) and not rw.same(dim, source[i]):
            raise rw._refuse(node, f"a gather whose index is laid out unlike its input ({dim} vs {source[i]})")
    padded = [i for i, d in enumerate(layout) if _padded(d)]
    if padded:
        node.replace_input_with(index, rw.masked(index, padded, 0, node))
    return list(layout)


def _nll_loss_backward(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    """nll_loss_backward(grad, input, target, ...): padded targets pick class 0 (the rows are padding)."""
    x, target = _args(node)[1], _args(node)[2]
    assert isinstance(x, torch.fx.Node)
    assert isinstance(target, torch.fx.Node)
    source, layout = _layout(rw, x), _layout(rw, target)
    if layout and not rw.same(layout[0], source[0]):
        raise rw._refuse(node, "targets laid out unlike the rows they label")
    padded = [i for i, d in enumerate(layout) if _padded(d)]
    if padded:
        node.replace_input_with(target, rw.masked(target, padded, 0, node))
    return list(source)


def _softmax_backward(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    """(log_)softmax's backward sums the gradient along its dimension: padded gradients read 0 there."""
    grad, output = _args(node)[0], _args(node)[1]
    assert isinstance(grad, torch.fx.Node)
    layout = _broadcast(rw, node, [_layout(rw, grad), _layout(rw, output)])
    axis = _args(node)[2] % len(layout)
    if _padded(layout[axis]):
        node.replace_input_with(grad, rw.masked(grad, [axis], 0.0, node))
    return layout


def _layer_norm_backward(rw: _Rewriter, node: torch.fx.Node) -> list[Layout]:
    """The weight and bias gradients sum over the rows: padded rows' gradients read 0."""
    grad, x = _args(node)[0], _args(node)[1]
    assert isinstance(grad, torch.fx.Node)
    source = _broadcast(rw, x, [_layout(rw, grad), _layout(rw, x)])
    normalized = len(_args(node)[2])
    rows = len(source) - normalized
    if any(_padded(d) for d in source[rows:]):
        raise rw._refuse(node, "a layer norm over a padded dimension")
    padded = [i for i in range(rows) if _padded(source[i])]
    if padded:
        node.replace_input_with(grad, rw.masked(grad, padded, 0.0, node))
    weight: Layout = [(e,) for e in _args(node)[2]]
    return [source, weight, weight]


def _embedding_backward(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    """The table's gradient adds the rows' gradients by index: padded rows add 0 to row 0."""
    grad, indices = _args(node)[0], _args(node)[1]
    assert isinstance(grad, torch.fx.Node)
    assert isinstance(indices, torch.fx.Node)
    layout = _layout(rw, indices)
    padded = [i for i, d in enumerate(layout) if _padded(d)]
    if padded:
        node.replace_input_with(grad, rw.masked(grad, padded, 0.0, node))
        node.replace_input_with(indices, rw.masked(indices, padded, 0, node))
    return _plain(node.meta["val"])


def _per_sample(rw: _Rewriter, node: torch.fx.Node) -> Any:
    """Ops that compute each sample of their first operand's batch (dimension 0) alone (convolutions, pooling,
    inference batch norm): a padded batch is safe, any other padded dimension refuses."""
    x = _args(node)[0]
    batch = _layout(rw, x)[0] if _layout(rw, x) else (1,)
    for operand in node.all_input_nodes:
        layout = _layout(rw, operand)
        if any(_padded(d) for d in layout[1 if operand is x else 0 :]):
            raise rw._refuse(node, "a padded dimension other than the batch of a per-sample op")
    value = node.meta["val"]
    results = value if isinstance(value, list | tuple) else [value]
    layouts: list[Layout | None] = []
    for result in results:
        if not isinstance(result, torch.Tensor):
            layouts.append(None)
            continue
        layout = _plain(result)
        if layout and _expr(result.shape[0]) == _expr(x.meta["val"].shape[0]):
            layout[0] = batch  # the batch's factors carry over
        if any(_padded(d) for d in layout[1:]):
            raise rw._refuse(node, "a per-sample op with a result padded beyond its batch")
        layouts.append(layout)
    return layouts if isinstance(value, list | tuple) else layouts[0]


def _index(rw: _Rewriter, node: torch.fx.Node) -> Layout:
    """x[i0, i1, ...] with index tensors on x's leading dimensions: padded index elements read element 0."""
    x, indices = _args(node)[0], _args(node)[1]
    assert isinstance(x, torch.fx.Node)
    if any(i is None for i in indices):
        raise rw._refuse(node, "an advanced index after a full slice")
    source = _layout(rw, x)
    layouts = []
    for index, extent in zip(indices, source, strict=False):
        if index.meta["val"].dtype == torch.bool:
            raise rw._refuse(node, "a boolean index")
        layout = _layout(rw, index)
        padded = [i for i, d in enumerate(layout) if _padded(d)]
        if padded and not rw.in_range(index, extent):
            node.replace_input_with(index, rw.masked(index, padded, 0, node))
        layouts.append(layout)
    value = node.meta["val"]
    rest = source[len(indices) :]
    rank = value.dim() - len(rest)
    front = _broadcast(rw, node, [list(layout) + [(1,)] * len(rest) for layout in layouts])[:rank]
    return front + list(rest)


def _is_minus_infinity(value: Any) -> bool:
    """Whether `value` (an argument of a node) is the number -inf, or a 0-d tensor made from it."""
    if isinstance(value, torch.fx.Node):
        if value.target is not aten.scalar_tensor.default:
            return False
        value = value.args[0]
    return isinstance(value, float) and value == -math.inf


def _fold_key_mask(
    rw: _Rewriter, mask: torch.fx.Node, real: torch.fx.Node, keys: Dim, like: torch.fx.Node, blocks_read: bool
) -> torch.fx.Node | None:
    """An additive mask made by `where(allowed, x, -inf)` (transformers' masks are) masked for padded keys as
    `where(allowed & real, x, -inf)`: the key mask joins the boolean condition, whose pass the mask's own
    elementwise work fuses with, rather than a `where` over the whole float mask. None for any other mask."""
    if mask.target is not aten.where.self or len(mask.args) != 3 or mask.kwargs:
        return None
    allowed, x, other = mask.args
    if not isinstance(allowed, torch.fx.Node) or not _is_minus_infinity(other):
        return None
    condition = allowed.meta.get("val")
    if not isinstance(condition, torch.Tensor) or condition.dtype != torch.bool or condition.dim() != 4:
        return None
    both = rw._call(aten.bitwise_and.Tensor, (allowed, real), like)
    rw.layouts[both] = _broadcast(rw, both, [_layout(rw, allowed), [(1,), (1,), (1,), keys]])
    folded = rw._call(aten.where.self, (both, x, other), like)
    rw.layouts[folded] = _broadcast(
        rw, folded, [rw.layouts[both], *(_layout(rw, a) for a in (x, other) if isinstance(a, torch.fx.Node))]
    )
    # only the padded keys must be -inf: the padded queries' rows are padding (the keys are the mask's last axis)
    both.meta[PADDING_WRITTEN] = folded.meta[PADDING_WRITTEN] = (3,)
    if blocks_read:  # the attention reads the call's key blocks only: they are all the padding it must write
        both.meta[KEY_BLOCKS_READ] = folded.meta[KEY_BLOCKS_READ] = True
    return folded


def _attention(rw: _Rewriter, node: torch.fx.Node) -> list[Layout]:
    """Flash attention: padded keys get -inf added to the mask (scores of real queries never reach them), and
    their keys and values are set to 0 (padding may be NaN, and 0 * NaN is NaN)."""
    q, k, v = _args(node)[:3]
    assert isinstance(q, torch.fx.Node)
    assert isinstance(k, torch.fx.Node)
    assert isinstance(v, torch.fx.Node)
    lq, lk, lv = _layout(rw, q), _layout(rw, k), _layout(rw, v)
    if any(_padded(layout[-1]) for layout in (lq, lk, lv)) or not rw.same(lk[-2], lv[-2]):
        raise rw._refuse(node, "attention over padded features or keys laid out unlike values")
    kwargs = dict(node.kwargs)
    names = [spec.name for spec in node.target._schema.arguments]  # type: ignore[union-attr]
    arguments = dict(zip(names, _args(node), strict=False)) | kwargs
    if arguments.get("dropout_p", 0.0):
        raise rw._refuse(node, "attention with dropout")
    if _padded(lk[-2]):
        keys = lk[-2]
        mask = arguments.get("attn_mask")
        if mask is not None and mask.meta["val"].dtype == torch.bool:
            raise rw._refuse(node, "attention with a boolean mask over padded keys")
        # layers sharing one mask share its masked form (one pass over the mask, not one per layer)
        # keys counted by one size symbol are zeroed by the kernel (`PADDED_KEYS`), which with a mask and no causal
        # bias is emitted per key width and reads the call's key blocks only (KEY_BLOCKS_READ)
        counted = [f for f in keys if not _is_one(f)]
        counted_once = len(counted) == 1 and _expr(counted[0]).is_Symbol
        blocks_read = counted_once and not arguments.get("is_causal")
        cache_key = (mask, tuple(str(_expr(f)) for f in keys), q.meta["val"].dtype, blocks_read)
        new_mask = rw.attention_masks.get(cache_key)
        if new_mask is None:
            with rw.graph.inserting_before(mask.next if mask is not None and mask.op != "placeholder" else node):
                real = rw.mask(keys, k.meta["val"].shape[-2], 4, 3, node)
                folded = _fold_key_mask(rw, mask, real, keys, node, blocks_read) if mask is not None else None
                if folded is not None:
                    new_mask = folded
                else:
                    if mask is None:
                        zero = rw._call(aten.scalar_tensor.default, (0.0,), node, {"dtype": q.meta["val"].dtype})
                        base: torch.fx.Node = zero
                    else:
                        base = mask
                    minus = rw._call(aten.scalar_tensor.default, (-math.inf,), node, {"dtype": q.meta["val"].dtype})
                    new_mask = rw._call(aten.where.self, (real, base, minus), node)
                    if mask is not None:
                        rw.layouts[new_mask] = _broadcast(rw, new_mask, [_layout(rw, mask), [(1,), (1,), (1,), keys]])
            rw.attention_masks[cache_key] = new_mask
        if "attn_mask" in kwargs or len(_args(node)) <= names.index("attn_mask"):
            node.kwargs = {**kwargs, "attn_mask": new_mask}
        else:
            args = list(_args(node))
            args[names.index("attn_mask")] = new_mask
            node.args = tuple(args)
        if arguments.get("is_causal") and not rw.same(lq[-2], lk[-2]):
            raise rw._refuse(node, "causal attention with queries laid out unlike keys")
        # a padded key's -inf score still meets its key and value: 0 * NaN is NaN, so they must be finite. Keys
        # counted by one size symbol are zeroed by the kernel as it loads them (`PADDED_KEYS`), others by a pass
        if counted_once:
            node.meta[PADDED_KEYS] = str(_expr(counted[0]))
            return [[*list(lq[:-1]), lv[-1]], list(lq[:-1])]
        for operand in dict.fromkeys((k, v)):  # one pass when keys and values are one tensor
            masked = rw.masked(operand, [operand.meta["val"].dim() - 2], 0.0, node)
            if masked is not operand:
                masked.meta[PADDING_WRITTEN] = (operand.meta["val"].dim() - 2,)
                node.replace_input_with(operand, masked)
    out = [*list(lq[:-1]), lv[-1]]
    logsumexp = list(lq[:-1])
    return [out, logsumexp]


_SIZE_QUERIES = {aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int, aten.sym_storage_offset.default}

_SIZE_ARGUMENTS: dict[Any, set[str]] = {
    aten.view.default: {"size"},
    aten._unsafe_view.default: {"size"},
    aten.reshape.default: {"shape"},
    aten.expand.default: {"size"},
    aten.slice.Tensor: {"start", "end"},
    aten.arange.default: {"end"},
    aten.arange.start: {"end"},
    aten.arange.start_step: {"end"},
    aten.full.default: {"size"},
    aten.zeros.default: {"size"},
    aten.ones.default: {"size"},
    aten.empty.memory_format: {"size"},
    aten.new_zeros.default: {"size"},
    aten.new_ones.default: {"size"},
    aten.new_empty.default: {"size"},
    aten.new_full.default: {"size"},
}

# Views: each element of the result is an element of the input, a padded one where the result's is padded
_VIEWS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.expand.default,
    aten.clone.default,
    aten.alias.default,
    aten.detach.default,
}

# Views and casts: each element of the result is an element of the input, a padded one where the result's is
# padded (the layouts track whole factors), so zero padding stays zero.
_KEEPING_ZEROS = _VIEWS | {aten._to_copy.default, torch.ops.prims.convert_element_type.default}

_SUM = _reduction(lambda dtype: False if dtype == torch.bool else 0)

_RULES: dict[Any, Callable[[_Rewriter, torch.fx.Node], Any]] = {
    aten.view.default: _reshape,
    aten._unsafe_view.default: _reshape,
    aten.reshape.default: _reshape,
    aten.permute.default: _permute,
    aten.transpose.int: _transpose,
    aten.t.default: _t,
    aten.unsqueeze.default: _unsqueeze,
    aten.squeeze.dim: _squeeze,
    aten.squeeze.dims: _squeeze,
    aten.squeeze.default: _squeeze,
    aten.expand.default: _expand,
    aten.slice.Tensor: _slice,
    aten.select.int: _select,
    aten.slice_scatter.default: _slice_scatter,
    aten.split_with_sizes.default: _split,
    aten.split.Tensor: _split,
    aten.cat.default: _cat,
    aten.clone.default: _same_layout,
    aten.alias.default: _same_layout,
    aten._to_copy.default: _same_layout,
    aten.detach.default: _same_layout,
    aten.lift_fresh_copy.default: _same_layout,
    aten.triu.default: _same_layout,
    aten.tril.default: _same_layout,
    torch.ops.prims.convert_element_type.default: _same_layout,
    aten.arange.default: _creation,
    aten.arange.start: _creation,
    aten.arange.start_step: _creation,
    aten.full.default: _creation,
    aten.zeros.default: _creation,
    aten.ones.default: _creation,
    aten.empty.memory_format: _creation,
    aten.scalar_tensor.default: _creation,
    aten.new_zeros.default: _creation,
    aten.new_ones.default: _creation,
    aten.new_empty.default: _creation,
    aten.new_full.default: _creation,
    aten.sum.dim_IntList: _SUM,
    aten.sum.default: _SUM,
    aten.mean.dim: _mean,
    aten.mean.default: _mean,
    aten.amax.default: _reduction(_lowest),
    aten.amin.default: _reduction(_highest),
    aten.max.dim: _reduction(_lowest),
    aten.min.dim: _reduction(_highest),
    aten.argmax.default: _reduction(_lowest),
    aten.argmin.default: _reduction(_highest),
    aten.prod.dim_int: _reduction(lambda dtype: 1),
    aten.any.dim: _reduction(lambda dtype: False),
    aten.any.dims: _reduction(lambda dtype: False),
    aten.all.dim: _reduction(lambda dtype: True),
    aten.logsumexp.default: _reduction(_lowest),
    aten._softmax.default: _reduction(_lowest),
    aten._log_softmax.default: _reduction(_lowest),
    aten.cumsum.default: _cumulative,
    aten.native_layer_norm.default: _layer_norm,
    aten.mm.default: _mm,
    aten.bmm.default: _mm,
    aten.addmm.default: _mm,
    aten.embedding.default: _gather_rows,
    aten.index.Tensor: _index,
    aten.gather.default: _gather,
    aten.nll_loss_backward.default: _nll_loss_backward,
    aten._softmax_backward_data.default: _softmax_backward,
    aten._log_softmax_backward_data.default: _softmax_backward,
    aten.native_layer_norm_backward.default: _layer_norm_backward,
    aten.embedding_dense_backward.default: _embedding_backward,
    aten._scaled_dot_product_flash_attention_for_cpu.default: _attention,
    aten.convolution.default: _per_sample,
    aten.max_pool2d_with_indices.default: _per_sample,
    aten.avg_pool2d.default: _per_sample,
    aten._adaptive_avg_pool2d.default: _per_sample,
    aten._native_batch_norm_legit_no_training.default: _per_sample,
}


def plan_buckets(graph_module: torch.fx.GraphModule) -> BucketPlan | str:
    """`graph_module` rewritten to run at bucket sizes (module docstring), or why it cannot be."""
    copied = torch.fx.GraphModule(graph_module, _copy_graph(graph_module.graph))
    try:
        rewriter = _Rewriter(copied)
        if rewriter.fake_mode is None or rewriter.fake_mode.shape_env is None:
            return "no shape environment"
        placeholders = rewriter.run()
    except Refused as refusal:
        return str(refusal)
    if not rewriter.symbols:
        return "no symbolic sizes"
    bound = {e for e in placeholders if isinstance(e, sympy.Expr) and e.is_Symbol}
    for layout in placeholders:
        if isinstance(layout, list):
            bound |= {_expr(f) for dim in layout for f in dim if _expr(f).is_Symbol}
    unbound = rewriter.symbols - bound
    if unbound:
        return f"sizes {sorted(map(str, unbound))} not given by any input"
    shape_env = rewriter.fake_mode.shape_env
    ranges: dict[sympy.Symbol, tuple[int, int | None]] = {}
    for symbol in rewriter.symbols:
        known = shape_env.var_to_range.get(symbol)
        lower = int(known.lower) if known is not None and isinstance(known.lower, sympy.Integer) else 0
        upper = int(known.upper) if known is not None and isinstance(known.upper, sympy.Integer) else None
        ranges[symbol] = (lower, upper)
    _record_factors(rewriter)
    copied.graph.eliminate_dead_code()
    copied.graph.lint()
    copied.recompile()
    return BucketPlan(
        graph_module=copied,
        symbols=sorted(rewriter.symbols, key=str),
        ranges=ranges,
        placeholders=placeholders,
        host_inputs=rewriter.host_inputs,
        outputs=rewriter.outputs,
        assumed=sorted(rewriter.assumed, key=str),
    )


def _record_factors(rw: _Rewriter) -> None:
    """Each node's result layout as the importer reads it (`SIZE_FACTORS`): per dimension, its factors as size
    symbols' names and static extents (a factor that is another expression, `s - 1`, leaves the dimension out)."""
    for node, layout in rw.layouts.items():
        if node.op != "call_function" or not isinstance(layout, list) or not layout:
            continue
        if isinstance(layout[0], list):  # several results: the importer bounds the first
            layout = layout[0]
        if not isinstance(layout, list) or not all(isinstance(dim, tuple) for dim in layout):
            continue
        dims: list[tuple[str | int, ...]] = []
        for dim in layout:
            factors: list[str | int] = []
            for factor in dim:
                expr = _expr(factor)
                if expr.is_Integer:
                    if int(expr) != 1:
                        factors.append(int(expr))
                elif expr.is_Symbol:
                    factors.append(str(expr))
                else:
                    factors = []
                    break
            dims.append(tuple(factors))
        node.meta[SIZE_FACTORS] = tuple(dims)


def _copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    copied = torch.fx.Graph()
    output = copied.graph_copy(graph, {})
    copied.output(output)
    return copied


def range_split(lower: int, upper: int) -> int | None:
    """The top of the lower of a bounded range's two buckets, or None when the range keeps one bucket.

    For sizes spread evenly on a log scale and a time growing as a power of the size, the split that minimises
    the mean log of (bucket's time / size's time) is the geometric middle of the range. Sizes below
    `SMALLEST_BUCKET` cost about the same as it (fixed costs dominate), so the range counts from there; the
    middle is rounded up to a power of two."""
    middle = math.sqrt(max(lower, SMALLEST_BUCKET) * upper)
    split = 1 << max(math.ceil(middle) - 1, 0).bit_length()
    return split if lower <= split < upper else None


def bucket_of(value: int, lower: int, upper: int, split: bool = False) -> int:
    """The size a symbol of bounded range [lower, upper] is compiled for when it is `value`: the range's top (one
    program for the range; with `split`, two: up to `range_split`'s size and up to the top). Unbounded sizes take
    their buckets from the sizes seen (`LearnedBuckets`)."""
    middle = range_split(lower, upper) if split else None
    return middle if middle is not None and value <= middle else upper


def split_symbols(
    ranges: dict[sympy.Symbol, tuple[int, int | None]], assumed: Sequence[tuple[sympy.Symbol, sympy.Symbol]]
) -> set[sympy.Symbol]:
    """The symbols whose bounded range takes two buckets: those of the widest range (largest top / bottom) that
    `range_split` splits, with every symbol taken as equal to them, so that a graph has at most two programs per
    range bucketing whatever its number of symbols."""
    widths = {
        symbol: upper / max(lower, 1)
        for symbol, (lower, upper) in ranges.items()
        if upper is not None and upper <= LARGEST_RANGE_BUCKET and range_split(lower, upper) is not None
    }
    if not widths:
        return set()
    chosen = {max(widths, key=lambda symbol: widths[symbol])}  # the first of equally wide ranges
    grew = True
    while grew:  # the symbols taken as equal, transitively, share the split (their buckets must agree)
        grew = False
        for a, b in assumed:
            if (a in chosen) != (b in chosen):
                chosen |= {a, b}
                grew = True
    return chosen


def _minor_factors(plan: BucketPlan) -> frozenset[sympy.Symbol]:
    """The size symbols that are the last factor of a dimension merged from two or more sizes."""
    by_name = {str(s): s for s in plan.symbols}
    minor: set[sympy.Symbol] = set()
    for node in plan.graph_module.graph.nodes:
        for factors in node.meta.get(SIZE_FACTORS, ()):
            names = [f for f in factors if isinstance(f, str)]
            if len(names) >= 2 and factors[-1] in by_name:
                minor.add(by_name[factors[-1]])
    return frozenset(minor)


def _power_of_two(value: int) -> int:
    return 1 << max(value - 1, 0).bit_length()


class LearnedBuckets:
    """The buckets of a graph's unbounded sizes (`dynamic=True`, automatic dynamic), learned from its calls.

    Each call wants a program whose tops cover every size seen so far: each size the next power of two of the
    largest seen (at least `SMALLEST_TOP`), except the size of the widest range seen (largest / smallest, then a
    minor factor of merged rows, then largest; of those seen above `SMALLEST_TOP` if any), which is split as a
    marked range of [its lower bound, `FOLLOWED_TOP`] is: a call up to the geometric middle (`range_split`: 64
    from 2) wants the middle, one above it `FOLLOWED_TOP`, or the next power of two of the largest size seen
    once sizes exceed `FOLLOWED_TOP`. The call runs the smallest program compiled so far that covers its sizes
    with no more padded work than the wanted one (the program's loops follow the call, so a larger program runs
    it at a fraction of its own sizes' cost), else compiles the wanted one. While one size varies up to
    `FOLLOWED_TOP` and the others stay within their first tops, a graph has at most two programs (the middle's
    and `FOLLOWED_TOP`'s); each size beyond every program's top costs one more (docs/dynamic-shapes.md).
    """

    def __init__(
        self,
        lowers: dict[sympy.Symbol, int],
        assumed: Sequence[tuple[sympy.Symbol, sympy.Symbol]] = (),
        inner: frozenset[sympy.Symbol] = frozenset(),
    ):
        self.lowers = lowers
        # sizes that are the minor factor of a merged dimension (the sequence of `[b*s, h]` token rows): of
        # equally wide ranges, the one whose padding costs least (a row tile's rows run up to the last real one)
        self.inner = inner
        self.assumed = [(a, b) for a, b in assumed if a in lowers and b in lowers]
        self.seen: dict[sympy.Symbol, tuple[int, int]] = {}
        # the full buckets of the programs compiled so far, in order
        self.compiled: list[dict[sympy.Symbol, int]] = []

    def bucket(self, values: dict[sympy.Symbol, int], fixed: dict[sympy.Symbol, int]) -> dict[sympy.Symbol, int]:
        """The tops of `values`'s sizes for this call; `fixed`: the buckets of the graph's other sizes (a program
        covers the call only if it has the same)."""
        for symbol, value in values.items():
            low, high = self.seen.get(symbol, (value, value))
            self.seen[symbol] = (min(low, value), max(high, value))
        wanted = self._wanted(values)

        def work(tops: dict[sympy.Symbol, int]) -> int:
            return math.prod(tops[s] for s in values)

        covering = [
            tops
            for tops in self.compiled
            if all(tops[s] == b for s, b in fixed.items())
            and all(v <= tops[s] for s, v in values.items())
            and work(tops) <= work(wanted)
        ]
        if covering:  # the least padded work; the first compiled of equals
            chosen = min(covering, key=work)
            return {s: chosen[s] for s in values}
        self.compiled.append({**fixed, **wanted})
        return wanted

    def _wanted(self, values: dict[sympy.Symbol, int]) -> dict[sympy.Symbol, int]:
        """The tops of a program compiled for this call: every size seen covered, the widest range split."""

        def width(symbol: sympy.Symbol) -> tuple[float, bool, int]:
            low, high = self.seen[symbol]
            return (high / max(low, 1), symbol in self.inner, high)

        tops = {s: max(SMALLEST_TOP, _power_of_two(self.seen[s][1])) for s in values}
        # a size seen only up to SMALLEST_TOP has one top for all its sizes: split, it would be padded to the
        # middle (a batch of 2 to 4 beside a sequence that has not changed yet)
        varying = [s for s in values if self.seen[s][1] > SMALLEST_TOP] or list(values)
        # at the first call every range is one size: the split goes to a minor factor, else to the largest size
        widest = max(varying, key=width)
        high = self.seen[widest][1]
        middle = range_split(self.lowers[widest], FOLLOWED_TOP)
        if middle is not None and values[widest] <= middle:
            tops[widest] = middle
        else:
            tops[widest] = max(FOLLOWED_TOP, _power_of_two(high))
        return self._shared(tops)

    def _shared(self, tops: dict[sympy.Symbol, int]) -> dict[sympy.Symbol, int]:
        for a, b in self.assumed:  # sizes the program takes as one share their top
            tops[a] = tops[b] = max(tops[a], tops[b])
        return tops


class BucketedGraph:
    """A graph with symbolic sizes run by one program per size bucket (module docstring).

    A call whose size lies outside a symbol's range (Dynamo's guards normally prevent it) compiles a program for
    its exact sizes, noted in `neuron_mlir.stats()["size_notes"]`.
    """

    _boxed_call = True

    def __init__(
        self,
        graph_module: torch.fx.GraphModule,
        plan: BucketPlan,
        options: CompileOptions,
        name: str,
        debug_dir: Path | None = None,
    ):
        from neuron_mlir.frontend.compile_graph import ShapeSpecialisedGraph

        self.plan = plan
        # calls that break an assumption of the rewrite run the graph as traced, compiled for their sizes
        self.per_size = ShapeSpecialisedGraph(graph_module, None, options, f"{name}_sized", debug_dir=debug_dir)
        self.name = name
        self.options = options
        # the bucketed sizes are the programs' size arguments: loops over a dimension they bound run the call's trips
        self.programs = ShapeSpecialisedGraph(
            plan.graph_module,
            None,
            options,
            name,
            size_arguments=[str(s) for s in plan.symbols],
            debug_dir=debug_dir,
        )
        if debug_dir is not None:  # the graph as rewritten for buckets, beside the graph as traced (fx_graph.py)
            (debug_dir / "bucketed_fx_graph.py").write_text(plan.graph_module.print_readable(print_output=False))
        self.placeholder_count = len(plan.placeholders)
        self._buckets_seen: set[tuple[int, ...]] = set()
        self._failed: set[tuple[int, ...]] = set()
        self._noted: set[str] = set()
        self._split = split_symbols(plan.ranges, plan.assumed)
        self._learned = LearnedBuckets(
            {s: lower for s, (lower, upper) in plan.ranges.items() if upper is None or upper > LARGEST_RANGE_BUCKET},
            plan.assumed,
            _minor_factors(plan),
        )

    def _note(self, note: str) -> None:
        """A size note, once per graph however many calls meet it."""
        if note not in self._noted:
            self._noted.add(note)
            stats_module.record_size_note(note)

    def _bindings(self, args: list[Any]) -> dict[sympy.Symbol, int]:
        bindings: dict[sympy.Symbol, int] = {}
        for layout, arg in zip(self.plan.placeholders, args, strict=True):
            if isinstance(layout, sympy.Expr) and layout.is_Symbol:
                bindings[layout] = int(arg)
            elif isinstance(layout, list):
                for dim, extent in zip(layout, arg.shape, strict=True):
                    expr = _expr(dim[0])
                    if len(dim) == 1 and expr.is_Symbol and bindings.setdefault(expr, int(extent)) != int(extent):
                        raise ValueError(
                            f"neuron-mlir: {self.name}: size {expr} is {bindings[expr]} and {int(extent)} "
                            "in the same call (inputs that shared a size when traced differ)"
                        )
        return bindings

    def _buckets(self, actual: dict[sympy.Symbol, int]) -> dict[sympy.Symbol, int]:
        buckets: dict[sympy.Symbol, int] = {}
        learned: dict[sympy.Symbol, int] = {}
        for symbol, value in actual.items():
            lower, upper = self.plan.ranges[symbol]
            if value < lower or (upper is not None and value > upper):
                self._note(
                    f"{self.name}: {symbol} = {value} is outside its range [{lower}, {upper}]: compiled for this size"
                )
                buckets[symbol] = value
            elif symbol in self._learned.lowers:
                learned[symbol] = value
            else:
                assert upper is not None  # unbounded sizes are learned
                buckets[symbol] = bucket_of(value, lower, upper, symbol in self._split)
        if learned:
            buckets.update(self._learned.bucket(learned, buckets))
        return buckets

    def __call__(self, args: list[Any]) -> list[Any]:
        inputs = list(args)
        args.clear()
        actual = self._bindings(inputs)
        buckets = self._buckets(actual)
        broken = [(a, b) for a, b in self.plan.assumed if actual[a] != actual[b] or buckets[a] != buckets[b]]
        if broken:
            a, b = broken[0]
            self._note(
                f"{self.name}: {a} = {actual[a]} and {b} = {actual[b]} differ where the program takes them as one "
                "size: compiled for this call's sizes"
            )
            return self.per_size(inputs)
        padded: list[Any] = []
        for layout, arg in zip(self.plan.placeholders, inputs, strict=True):
            if isinstance(layout, sympy.Expr):
                padded.append(int(layout.xreplace(buckets)))
            elif isinstance(layout, list) and any(_padded(d) for d in layout):
                padded.append(_pad(arg, layout, actual, buckets))
            else:
                padded.append(arg)
        for host in self.plan.host_inputs:
            padded.append(_host_value(host, actual, buckets))
        key = tuple(buckets[s] for s in self.plan.symbols)
        if key in self._failed:
            return self.per_size(inputs)
        if key not in self._buckets_seen:
            self._buckets_seen.add(key)
            logger.info("%s: bucket %s for sizes %s", self.name, key, tuple(actual[s] for s in self.plan.symbols))
        from neuron_mlir.frontend.compile_graph import NeuronCompileError

        try:
            results = self.programs.call_sized(padded, {str(s): actual[s] for s in self.plan.symbols})
        except NeuronCompileError as error:
            # a lowering whose limits the bucket's sizes exceed (the call's may not): this bucket's calls are
            # compiled for their own sizes
            self._failed.add(key)
            reason = str(error).splitlines()[0]
            self._note(f"{self.name}: bucket {key} does not compile ({reason}): compiled per size")
            return self.per_size(inputs)
        return [_cut(r, layout, actual, buckets) for r, layout in zip(results, self.plan.outputs, strict=True)]


def _pad(
    tensor: torch.Tensor, layout: Layout, actual: dict[sympy.Symbol, int], buckets: dict[sympy.Symbol, int]
) -> torch.Tensor:
    """`tensor` (at the call's sizes) zero-padded to the bucket's, each factor of each dimension padded."""
    factors = [f for dim in layout for f in dim]
    at_actual = [int(_expr(f).xreplace(actual)) for f in factors]
    at_bucket = [int(_expr(f).xreplace(buckets)) for f in factors]
    shape = [math.prod(int(_expr(f).xreplace(buckets)) for f in dim) for dim in layout]
    if at_actual == at_bucket:
        return tensor
    padded = tensor.new_zeros(at_bucket)
    padded[tuple(slice(0, extent) for extent in at_actual)] = tensor.reshape(at_actual)
    return padded.reshape(shape)


def _host_value(host: HostInput, actual: dict[sympy.Symbol, int], buckets: dict[sympy.Symbol, int]) -> torch.Tensor:
    if host.kind == "number":
        assert host.expr is not None
        return torch.tensor(int(host.expr.xreplace(actual)), dtype=host.dtype)
    mask = torch.ones((), dtype=torch.bool)
    for factor in host.dim:
        expr = _expr(factor)
        real = torch.arange(int(expr.xreplace(buckets))) < int(expr.xreplace(actual))
        mask = (mask.reshape(-1, 1) & real.reshape(1, -1)).reshape(-1)
    return mask.reshape(-1)


def _cut(result: Any, layout: Any, actual: dict[sympy.Symbol, int], buckets: dict[sympy.Symbol, int]) -> Any:
    if isinstance(layout, sympy.Expr):
        return int(layout.xreplace(actual))
    if not isinstance(layout, list) or not isinstance(result, torch.Tensor):
        return result
    if not any(_padded(d) for d in layout):
        return result
    factors = [f for dim in layout for f in dim]
    at_bucket = [int(_expr(f).xreplace(buckets)) for f in factors]
    at_actual = [int(_expr(f).xreplace(actual)) for f in factors]
    sizes = [math.prod(int(_expr(f).xreplace(actual)) for f in dim) for dim in layout]
    cut = result.reshape(at_bucket)[tuple(slice(0, n) for n in at_actual)]
    return cut.reshape(sizes).contiguous()


def bucketed_graph(
    graph_module: torch.fx.GraphModule, options: CompileOptions, name: str, debug_dir: Path | None = None
) -> BucketedGraph | None:
    """A `BucketedGraph` for `graph_module`, or None (why: logged and noted in stats) when it cannot be one.
    `debug_dir`: the graph's debug directory (each bucket's program dumps its files in a directory of its own)."""
    started = time.perf_counter()
    plan = plan_buckets(graph_module)
    if isinstance(plan, str):
        if plan not in ("no symbolic sizes",):
            stats_module.record_size_note(f"{name}: compiled per size: {plan}")
            logger.info("%s: compiled once per size: %s", name, plan)
        return None
    logger.info("%s: bucketed over %s (planned in %.2f s)", name, plan.symbols, time.perf_counter() - started)
    return BucketedGraph(graph_module, plan, options, name, debug_dir)
