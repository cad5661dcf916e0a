"""float64 scalar steps between fp32 values computed in fp32, where that gives eager's result.

NeuronCore engines have no float64 datapath, so a node producing float64 runs on the CPU. Some graphs widen an
fp32 value to float64 only to compute one quotient and round it straight back, as torchao's float8 training
does for every scale: `scale = float(fp8_max / clamp(amax.double(), min=eps))`, traced as
`_to_copy(f64) -> clamp -> reciprocal -> mul(fp8_max) -> _to_copy(f32)`. This FX rewrite computes such regions
in fp32 when the result is provably the same:

* A region is a connected set of float64 nodes whose inputs are widenings (`_to_copy` to float64) of fp32 or
  narrower floats, Python numbers, or float64 `full`s of a Python number (the tolerance scalars of linalg's
  decompositions) that fp32 holds exactly or that only casts read (one rounding either way), and whose every
  reader outside the region is a plain cast to fp32 or narrower.
* Its ops are exact ones (clamp, abs, neg, maximum, minimum: their fp32 result is the float64 one, rounded) and
  at most one rounding arithmetic op (add, sub, mul, div, reciprocal), after `c * reciprocal(x)` (a Python
  number c) is rewritten as the one division `c / x`. One correctly rounded float64 operation rounded again to
  fp32 is the correctly rounded fp32 operation (double rounding is innocuous for +, -, *, / when the wider
  format has at least 2p + 2 significant bits, 53 >= 2 * 24 + 2: S. A. Figueroa, "When is double rounding
  innocuous?", ACM SIGNUM Newsletter 30(3), 1995), so the narrowed region returns eager's value bit for bit.
  One exception: a Python-number clamp bound that is not an fp32 value is rounded to fp32 first, which changes
  the result (by at most 2^-24 relative) only where the bound itself is chosen (torchao's eps = 1e-12 for an
  all-zero tensor).

Regions that do not qualify are left alone (and run on the CPU, as before).

Before that, float64 scalars computed from tensor constants alone, as `x * np.sqrt(d)` traces (a constant,
widened to float64, its square root), are evaluated once while compiling, by ATen on the CPU as eager would, and
where such a scalar is the second operand of an add, sub, mul or div whose result is fp32 or narrower, it becomes
that operand as a Python number: eager reads a 0-d float64 operand as a number of the operation's own precision,
as it does a Python number, so the op computes the same value (`fold_constant_scalars`). Likewise, float64
tables computed from sizes and constants alone and only cast or copied into fp32 or narrower tensors (D-FINE's
sinusoidal position table; VITS's `x[..., 0] = np.log(np.exp(1 - min_derivative) - 1)`, a setitem tracing as
`aten.copy` of the float64 value) are evaluated once while compiling and become tensor constants of the narrower
dtype, eager's values bit for bit (`fold_float64_tables`).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

aten = torch.ops.aten

_EXACT = frozenset({aten.clamp.default, aten.abs.default, aten.neg.default, aten.maximum.default, aten.minimum.default})
_ROUNDING = frozenset({aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.reciprocal.default})
_NARROW = (torch.float32, torch.bfloat16, torch.float16)


def _dtype(node: Any) -> torch.dtype | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value.dtype if isinstance(value, torch.Tensor) else None


def _is_cast(node: torch.fx.Node, dtypes: tuple[torch.dtype, ...]) -> bool:
    """A plain `_to_copy` to one of `dtypes`."""
    if node.op != "call_function" or node.target is not aten._to_copy.default:
        return False
    extra = set(node.kwargs) - {"dtype"}
    return not extra and len(node.args) == 1 and node.kwargs.get("dtype") in dtypes


def _exact_constant(node: torch.fx.Node) -> bool:
    """A float64 `full` of a Python number whose fp32 `full` gives eager's values: fp32 represents the number
    exactly, or only casts to fp32 or narrower read it (the cast rounds the number once, as the fp32 `full` does)."""
    if node.op != "call_function" or node.target is not aten.full.default or len(node.args) != 2:
        return False
    value = node.args[1]
    extra = set(node.kwargs) - {"dtype", "layout", "device", "pin_memory"}
    if extra or node.kwargs.get("dtype") is not torch.float64 or not isinstance(value, int | float):
        return False
    if math.isnan(value) or float(torch.tensor(float(value), dtype=torch.float32).item()) == float(value):
        return True
    return all(_is_cast(user, _NARROW) for user in node.users)


def _widens_narrow(node: torch.fx.Node) -> bool:
    source = node.args[0] if node.args else None
    return _is_cast(node, (torch.float64,)) and _dtype(source) in _NARROW


def _regions(graph: torch.fx.Graph) -> list[list[torch.fx.Node]]:
    """Connected float64 nodes (through producer and reader edges), in graph order."""
    wide = [node for node in graph.nodes if node.op == "call_function" and _dtype(node) is torch.float64]
    members = set(wide)
    seen: set[torch.fx.Node] = set()
    regions: list[list[torch.fx.Node]] = []
    for start in wide:
        if start in seen:
            continue
        region, stack = set(), [start]
        while stack:
            node = stack.pop()
            if node in region:
                continue
            region.add(node)
            neighbours = [*node.all_input_nodes, *node.users]
            stack.extend(n for n in neighbours if n in members and n not in region)
        seen |= region
        regions.append([node for node in wide if node in region])
    return regions


def _qualifies(region: list[torch.fx.Node]) -> bool:
    members = set(region)
    rounding = 0
    for node in region:
        if _widens_narrow(node) or _exact_constant(node):
            pass
        elif node.target in _EXACT or node.target in _ROUNDING:
            if any(arg not in members for arg in node.all_input_nodes):
                return False  # a float64 value from elsewhere (an input, a factory)
            if node.target in _ROUNDING and not _folds_into_division(node, members):
                rounding += 1
        else:
            return False
        if any(user not in members and not _is_cast(user, _NARROW) for user in node.users):
            return False
    return rounding <= 1


def _folds_into_division(node: torch.fx.Node, members: set[torch.fx.Node]) -> bool:
    """A reciprocal whose only reader multiplies it by a Python number (the pair becomes one division)."""
    if node.target is not aten.reciprocal.default or len(node.users) != 1:
        return False
    (user,) = node.users
    return user in members and _scaled_reciprocal(user) is not None


def _scaled_reciprocal(node: torch.fx.Node) -> tuple[float, torch.fx.Node] | None:
    """(c, x) when `node` is `mul(reciprocal(x), c)` or `mul(c, reciprocal(x))` for a Python number c."""
    if node.target is not aten.mul.Tensor or len(node.args) != 2:
        return None
    for first, second in (node.args, node.args[::-1]):
        if (
            isinstance(first, torch.fx.Node)
            and first.target is aten.reciprocal.default
            and isinstance(second, int | float)
            and len(first.users) == 1
        ):
            return float(second), first.args[0]  # type: ignore[return-value]
    return None


_SCALAR_OPERAND = frozenset({aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor})


def _constant_values(graph_module: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.Tensor]:
    """The nodes whose values are known while compiling: tensor constants (`get_attr`) of at most one element,
    and the deterministic, non-mutating ops on them with scalar results, evaluated by ATen."""
    values: dict[torch.fx.Node, torch.Tensor] = {}
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            value = getattr(graph_module, str(node.target), None)
            if isinstance(value, torch.Tensor) and value.numel() <= 1 and not value.requires_grad:
                values[node] = value
            continue
        target = node.target
        if (
            node.op != "call_function"
            or not isinstance(target, torch._ops.OpOverload)
            or target._schema.is_mutable
            or torch.Tag.nondeterministic_seeded in target.tags
            or not node.all_input_nodes
            or any(arg not in values for arg in node.all_input_nodes)
        ):
            continue
        recorded = node.meta.get("val")
        if not isinstance(recorded, torch.Tensor) or recorded.numel() > 1:
            continue
        args = torch.fx.node.map_arg(node.args, lambda n: values[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[n])
        result = target(*args, **kwargs)
        if isinstance(result, torch.Tensor):
            values[node] = result
    return values


def fold_constant_scalars(graph_module: torch.fx.GraphModule) -> int:
    """Replace float64 scalars computed from constants by Python numbers where an fp32 (or narrower) add, sub, mul
    or div reads them as its second operand (module docstring); returns how many operands were replaced."""
    graph = graph_module.graph
    with unset_fake_temporarily():  # AOTAutograd partitions its joint graph in its fake mode
        values = _constant_values(graph_module)
        numbers = {node: float(value.item()) for node, value in values.items() if value.dtype is torch.float64}
    replaced = 0
    for node, value in values.items():
        if value.dtype is not torch.float64 or value.dim() != 0:
            continue
        for user in list(node.users):
            if (
                user.target in _SCALAR_OPERAND
                and len(user.args) == 2
                and user.args[1] is node
                and not user.kwargs
                and _dtype(user) in _NARROW
                and _dtype(user.args[0]) == _dtype(user)
            ):
                user.update_arg(1, numbers[node])
                replaced += 1
    if replaced:
        for node in reversed(list(values)):  # the constants' chains no reader is left for
            if not node.users:
                graph.erase_node(node)
        graph.lint()
        graph_module.recompile()
    return replaced


# the largest float64 table computed from sizes alone that compiling evaluates (elements): positional tables
FOLDED_TABLE_ELEMENTS = 1 << 22


def _input_free_values(graph_module: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.Tensor]:
    """The values of the nodes that read no graph input: factory ops with static arguments (`arange`, `full`)
    and the deterministic, non-mutating ops on them and on tensor constants, evaluated by ATen on the CPU as eager
    would, up to `FOLDED_TABLE_ELEMENTS` elements each."""
    values: dict[torch.fx.Node, torch.Tensor] = {}
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            value = getattr(graph_module, str(node.target), None)
            if isinstance(value, torch.Tensor) and not value.requires_grad:
                values[node] = value
            continue
        target = node.target
        recorded = node.meta.get("val")
        if (
            node.op != "call_function"
            or not isinstance(target, torch._ops.OpOverload)
            or target._schema.is_mutable
            or torch.Tag.nondeterministic_seeded in target.tags
            or any(arg not in values for arg in node.all_input_nodes)
            or not isinstance(recorded, torch.Tensor)
            or recorded.device.type != "cpu"
            or any(not isinstance(size, int) for size in recorded.shape)
            or recorded.numel() > FOLDED_TABLE_ELEMENTS
        ):
            continue
        args = torch.fx.node.map_arg(node.args, lambda n: values[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[n])
        if any(isinstance(a, torch.SymInt | torch.SymFloat) for a in torch.utils._pytree.tree_leaves((args, kwargs))):
            continue
        result = target(*args, **kwargs)
        if isinstance(result, torch.Tensor):
            values[node] = result
    return values


def _narrowing_copy(node: torch.fx.Node) -> bool:
    """`aten.copy(dst, src)` writing a float64 `src` into an fp32 (or narrower) `dst`: as a setitem of a float64
    value traces (`x[..., 0] = np.log(...)`), the value cast to the destination's dtype."""
    return (
        node.op == "call_function"
        and node.target is aten.copy.default
        and len(node.args) == 2
        and not node.kwargs
        and isinstance(node.args[1], torch.fx.Node)
        and _dtype(node.args[1]) is torch.float64
        and _dtype(node) in _NARROW
    )


def fold_float64_tables(graph_module: torch.fx.GraphModule) -> int:
    """Evaluate float64 tables computed from sizes and constants alone and only rounded to fp32 or narrower
    (sinusoidal position tables computed in float64, as D-FINE's are; a float64 scalar written into an fp32 tensor,
    as VITS's spline writes `np.log(np.exp(1 - min_derivative) - 1)` into its edge derivatives) once while
    compiling, each cast or copied value becoming a tensor constant of the narrower dtype: eager's values bit for
    bit, where the core, without a float64 datapath, would leave the table's ops to the CPU. Returns how many casts
    and copies were folded."""
    graph = graph_module.graph
    narrowing = (
        node
        for node in graph.nodes
        if (_is_cast(node, _NARROW) and _dtype(node.args[0]) is torch.float64) or _narrowing_copy(node)
    )
    if next(narrowing, None) is None:  # most graphs: evaluate nothing while compiling
        return 0
    with unset_fake_temporarily():
        values = _input_free_values(graph_module)
    folded = 0

    def constant(value: torch.Tensor, like: torch.fx.Node, recorded: Any) -> torch.fx.Node:
        """A constant holding `value`, inserted before `like`, whose metadata is `like`'s with `recorded` as its
        value."""
        nonlocal folded
        name = f"_float64_table_{folded}"
        while hasattr(graph_module, name):
            name += "_"
        graph_module.register_buffer(name, value.contiguous(), persistent=False)
        with graph.inserting_before(like):
            node = graph.get_attr(name)
        node.meta = {**like.meta, "val": recorded}
        folded += 1
        return node

    for node, value in values.items():
        source = node.args[0] if node.args else None
        if (
            node.op != "call_function"
            or not _is_cast(node, _NARROW)
            or not isinstance(source, torch.fx.Node)
            or _dtype(source) is not torch.float64
            or source.op == "get_attr"
            or source.target is aten.full.default  # a number: the regions below make it an fp32 `full`
        ):
            continue
        node.replace_all_uses_with(constant(value, node, node.meta.get("val")))
    for node in list(graph.nodes):
        if not _narrowing_copy(node) or node.args[1] not in values:
            continue
        wide = node.args[1]
        assert isinstance(wide, torch.fx.Node)
        dtype = _dtype(node)
        assert dtype is not None
        # the value rounded once, as copy_ rounds it
        node.update_arg(1, constant(values[wide].to(dtype), node, wide.meta["val"].to(dtype)))
    if folded:
        graph.eliminate_dead_code()
        graph.lint()
        graph_module.recompile()
    return folded


def narrow_float64(graph_module: torch.fx.GraphModule) -> int:
    """Rewrite the qualifying float64 regions of `graph_module` in place to fp32 (the constant scalars and
    tables first: `fold_constant_scalars`, `fold_float64_tables`); returns how many regions."""
    fold_constant_scalars(graph_module)
    fold_float64_tables(graph_module)
    graph = graph_module.graph
    narrowed = 0
    for region in _regions(graph):
        if not _qualifies(region):
            continue
        members = set(region)
        replacement: dict[torch.fx.Node, torch.fx.Node] = {}
        for node in region:
            if _folds_into_division(node, members):
                continue  # its reader becomes the division
            if _widens_narrow(node):
                source = node.args[0]
                assert isinstance(source, torch.fx.Node)
                replacement[node] = _in_fp32(graph, node, source)
                continue
            scaled = _scaled_reciprocal(node)
            with graph.inserting_before(node):
                if _exact_constant(node):
                    new = graph.call_function(aten.full.default, node.args, {**node.kwargs, "dtype": torch.float32})
                elif scaled is not None:
                    numerator, denominator = scaled
                    constant = graph.call_function(
                        aten.full.default, ([], numerator), {"dtype": torch.float32, "device": _device(node)}
                    )
                    constant.meta["val"] = torch.full([], numerator, dtype=torch.float32, device="meta")
                    new = graph.call_function(aten.div.Tensor, (constant, replacement[denominator]))
                else:
                    args = torch.fx.node.map_arg(node.args, lambda n, table=replacement: table.get(n, n))  # type: ignore[misc]
                    new = graph.call_function(node.target, args, dict(node.kwargs))  # type: ignore[arg-type]
            new.meta = {**node.meta, "val": _meta_result(new)}
            replacement[node] = new
        for node in region:
            for user in [user for user in node.users if user not in members]:  # the casts leaving the region
                if user.kwargs["dtype"] is torch.float32:
                    user.replace_all_uses_with(replacement[node])
                    graph.erase_node(user)
                else:
                    user.replace_input_with(node, replacement[node])
        for node in reversed(region):
            graph.erase_node(node)
        narrowed += 1
    if narrowed:
        graph.lint()
        graph_module.recompile()
    return narrowed


def _in_fp32(graph: torch.fx.Graph, widening: torch.fx.Node, source: torch.fx.Node) -> torch.fx.Node:
    """The fp32 value a widening stands for: its source, widened to fp32 when narrower."""
    if _dtype(source) is torch.float32:
        return source
    with graph.inserting_before(widening):
        cast = graph.call_function(aten._to_copy.default, (source,), {"dtype": torch.float32})
    cast.meta = {**widening.meta, "val": _meta_result(cast)}
    return cast


def _device(node: torch.fx.Node) -> torch.device:
    value = node.meta.get("val")
    return value.device if isinstance(value, torch.Tensor) else torch.device("cpu")


def _meta_result(node: torch.fx.Node) -> torch.Tensor:
    """The node's result on the meta device, from its arguments' recorded values."""

    def meta(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            recorded = value.meta["val"]
            return torch.empty(recorded.shape, dtype=recorded.dtype, device="meta")
        return value

    args = torch.fx.node.map_aggregate(node.args, meta)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, meta)
    if "device" in kwargs:
        kwargs = {**kwargs, "device": "meta"}
    result = node.target(*args, **kwargs)  # type: ignore[operator]
    return result if not isinstance(result, tuple) else operator.getitem(result, 0)
