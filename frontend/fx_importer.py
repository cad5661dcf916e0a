"""The FX importer: an ATen-level `torch.fx.GraphModule` becomes a torch-dialect `func.func @main`.

Node by node:
    placeholder      a function argument (tensors), or a specialised Python value (SymInt, numbers: see below)
    get_attr         a tensor constant (`_tensor_constant0`, or a parameter/buffer of a symbolically traced
                     module): all elements equal -> an `aten.full` op in the IR; otherwise an extra trailing
                     argument whose value the caller supplies (`GraphSignature.constants`)
    call_function    an ATen overload -> the torch op of that overload (`op_class_for` + `from_args`);
                     `operator.getitem` picks an element of a multi-result op; shape arithmetic on SymInts
                     (`aten.sym_size.int`, `operator.mul`, ...) folds to its concrete value
    output           `func.return` of the tensor leaves; nested tuples/lists are flattened (`output_spec`)

Types. Every result's shape and dtype come from the node's fake-tensor metadata (`meta["val"]`), and each op is
verified as it is built: a mismatch with the op's verifier is an importer bug, reported with the node, its
ATen op and its source line like every other error here (`GraphImportError`). Tensor results ATen leaves
undefined (an output mask) have the type `none`; SymInt results `index`, Scalar results i64/f64/i1.

Arguments. Python numbers in Tensor positions (FX's wrapped numbers) select the op's `.Scalar` overload when
there is one and otherwise become a 0-d `aten.full` with the dtype PyTorch's promotion gives a wrapped number.
dtypes, devices, layouts and memory formats become properties (see `neuron_mlir.ir.dialects.torch`).

Symbolic sizes. The dialect's sizes and size arguments are static. A graph with SymInts (dynamic shapes from
Dynamo) is imported *specialised*: to the sizes of the `inputs` it is given (`import_fx_graph(..., inputs=)`),
otherwise to the sizes it was traced with (each backed symbol takes its hint). SymInt
placeholders become no argument at all, and `GraphSignature.guards` records the shape or value each
symbolic placeholder was specialised for; `GraphSignature.check_guards` refuses a call with other sizes (the
backend imports again per set of sizes: `compile_graph.ShapeSpecialisedGraph`). Size assertions the tracer
inserts (`_assert_scalar`, `sym_constrain_range*`) are dropped: they hold for the sizes imported. Data-dependent
sizes (unbacked symbols, e.g. after `nonzero`) have no hint: they become dynamic dimensions (`tensor<?x2xi64>`),
and using one as a static argument is an error naming the node. Limits: sizes do not become SSA `index` values
(the dialects have no dynamic sizes yet), so an op whose static argument depends on data cannot be imported
as such: the backend imports the part of a graph after a data-dependent size at its call, with `inputs=` binding
that size (an unbacked symbol of a placeholder) to the value the host read (`frontend.data_dependent`). Such a
placeholder may hold an expression of those symbols (`-u2`, `u2 + u3 + 7`): the call's values are solved for
the symbols (`solve_sizes`), or for as much of them as the region's sizes need.

Nodes that run on the CPU. `import_fx_graph(..., cpu_nodes=)` imports a graph some of whose nodes will not be
compiled, to ask the compiler about the others (`compile_graph`: which ops the NeuronCore lowers): each such node
contributes no op, and its tensor results enter as extra function arguments of their metadata's types.

Locations. Each op is located at the user's source line (the last frame of the node's `stack_trace` outside
torch's own files) and named by the module path that ran it (`model.layers.0.mlp`), so diagnostics and profiles
point at the model.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    LocationAttr,
    ModuleOp,
    NameLoc,
    NoneType,
    StringAttr,
    TensorType,
    UnitAttr,
    UnknownLoc,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir.dialects.neuron import TARGET_ATTR_NAME, TargetAttr
from neuron_mlir.ir.dialects.torch import (
    PADDED_KEYS_ATTR,
    PROCESS_GROUPS_ATTR,
    SIZE_ARGUMENTS_ATTR,
    SIZE_BOUNDS_ATTR,
    NkiKernelOp,
    ResultKind,
    TorchOp,
    element_type_for_dtype,
    op_class_for,
)
from neuron_mlir.ir.locations import describe_location, source_location

PADDING_WRITTEN = "neuron_padding_written"
"""A node's metadata key (set by the size-bucket rewrite on the nodes it adds): the dimensions of its result whose
padding it must write (a `where` setting padding to a reduction's identity), None for all of them. The importer
names no size bound (`SIZE_BOUNDS_ATTR`) for those dimensions, so the lowering writes their padding."""

KEY_BLOCKS_READ = "neuron_key_blocks_read"
"""A node's metadata key (set by the size-bucket rewrite on the key mask it folds for padded keys): its consumers
read the key columns only up to the end of the call's last 128-key block (a masked attention emitted per key
width). When the bucket's keys are whole blocks of 128 that an elementwise nest can follow
(`KEY_COLUMN_BLOCKS`), the importer names the key dimension's bound although its padding is written
(`PADDING_WRITTEN`): the nest then writes the call's whole blocks, padded keys in them included, and no more."""

# The bucket key extents, in 128-key blocks, for which the masked attention and the elementwise nests both follow
# the call's key blocks (attention's KEY_VARIANTS and elementwise's COLUMN_VARIANTS, the smaller of the two)
KEY_COLUMN_BLOCKS = range(2, 5)

PADDED_KEYS = "neuron_padded_keys"
"""A flash attention node's metadata key (set by the size-bucket rewrite): the size symbol counting its real keys.
The importer writes it as the op's `PADDED_KEYS_ATTR`, and the lowering zeroes the padded key and value rows on
chip instead of the graph zeroing them in passes of their own."""

SIZE_FACTORS = "neuron_size_factors"
"""A node's metadata key (set by the size-bucket rewrite): per dimension of its (first) result, the extents it is
merged from, major to minor: a size symbol's name or a static extent each (`[b, s, 32] -> [b*s, 32]` gives
`(("s0", "s1"), (32,))`). At the bucket's sizes element `i` of such a dimension is real iff each of its digits in
that mixed radix is below its factor's real extent, so the importer names a merged dimension's bound as its
factors (`"s0*s1"`, `SIZE_BOUNDS_ATTR`), which a lowering may split the dimension into."""

SymbolicNumber = torch.SymInt | torch.SymFloat | torch.SymBool
"""Symbolic values a node's metadata may hold."""


SIZE_ASSERTIONS = frozenset(
    {
        "aten._assert_scalar.default",
        "aten.sym_constrain_range.default",
        "aten.sym_constrain_range_for_size.default",
        "aten._assert_tensor_metadata.default",
    }
)
"""Runtime checks on sizes the tracer inserts; with sizes specialised they hold by construction (or involve a
data-dependent size the IR keeps dynamic), so the importer drops them."""

HOST_CHECKED_ASSERTIONS = frozenset({"aten._assert_async.msg", "aten._assert_async.default"})
"""Assertions on tensor values: the condition is computed on the core and returned, and the host raises the
message when it is false (`GraphSignature.check_assertions`)."""

HOST_CHECKED_LINALG_ERRORS = "aten._linalg_check_errors.default"
"""The error check of a factorization (`torch.linalg.cholesky` raising where `cholesky_ex` returns `info`), an
effectful op AOTAutograd threads through a token (`with_effects`): the core computes and returns `info`, and the
host raises PyTorch's own error from it (`GraphSignature.check_linalg_errors`)."""


def _is_checks_token(node: torch.fx.Node) -> bool:
    """Whether a placeholder is an effect token that only host-checked factorization errors thread through."""
    return bool(node.users) and all(is_host_checked(user) and user.args[0] is node for user in node.users)


def is_host_checked(node: torch.fx.Node) -> bool:
    """Whether a node is a check the host makes on a value the core returns (an assertion, a factorization's
    error check), rather than a computation."""
    if str(node.target) in HOST_CHECKED_ASSERTIONS:
        return True
    return (
        node.target is torch.ops.higher_order.with_effects
        and len(node.args) > 1
        and str(node.args[1]) == HOST_CHECKED_LINALG_ERRORS
    )


@dataclass(frozen=True)
class DataDependent:
    """The value of a size that depends on data (an unbacked symbol such as `u0`): usable only as a `?` dim."""

    symbol: str


class GraphImportError(RuntimeError):
    """A graph the importer cannot represent; the message names the node, its op and the source line."""


@dataclass
class GraphSignature:
    """How the imported function's arguments and results map to the FX graph's inputs and outputs."""

    num_inputs: int
    """FX placeholders, in order."""
    inputs: list[int | None] = field(default_factory=list)
    """Per FX placeholder: the function argument it is, or None (a specialised SymInt or number)."""
    constants: list[torch.Tensor] = field(default_factory=list)
    """Values of the trailing arguments that follow the placeholders' (tensor constants)."""
    constant_names: list[str] = field(default_factory=list)
    """The `get_attr` target of each of `constants` (how `from_json` finds their values again)."""
    outputs: list[int | None] = field(default_factory=list)
    """Per flattened FX output: the index of the function result that carries it, or None (see `output_values`)."""
    output_values: dict[int, object] = field(default_factory=dict)
    """Flattened FX outputs that are Python values rather than results (None, specialised SymInts)."""
    output_names: list[str] = field(default_factory=list)
    output_spec: Any = None
    """The pytree spec of the FX output (how the flat outputs nest), None for a flat tuple."""
    guards: dict[int, tuple[int, ...] | int | float | bool] = field(default_factory=dict)
    """FX placeholder index -> the shape (tensor) or value (SymInt) a symbolic placeholder was specialised for."""
    assertions: list[tuple[int, str]] = field(default_factory=list)
    """(function result, message) per `aten._assert_async`: the condition is computed on the core and returned;
    the caller raises the message when it is false, as PyTorch would (`check_assertions`)."""
    linalg_checks: list[tuple[int, str, bool]] = field(default_factory=list)
    """(function result, api name, is_matrix) per `aten._linalg_check_errors`: the result is a factorization's
    `info`, from which the caller raises PyTorch's error (`check_linalg_errors`)."""

    def check_assertions(self, values: list[Any]) -> None:
        """Raise RuntimeError with the assertion's message when a returned condition is false, and PyTorch's
        error for a factorization whose returned `info` reports a failure."""
        for index, message in self.assertions:
            if not bool(values[index].reshape(-1)[0]):
                raise RuntimeError(message or "assertion failed (torch._assert_async)")
        for index, api_name, is_matrix in self.linalg_checks:
            info = torch.as_tensor(values[index])
            torch.ops.aten._linalg_check_errors(info, api_name, is_matrix=is_matrix)

    def arguments(self, inputs: list[Any]) -> list[Any]:
        """The function's leading arguments for a call with the FX graph's `inputs`; `constants` follow them."""
        return [value for value, index in zip(inputs, self.inputs, strict=True) if index is not None]

    def check_guards(self, inputs: list[Any]) -> None:
        """Raise ValueError when `inputs` differ from the sizes a symbolic graph was specialised for."""
        for position, expected in self.guards.items():
            value = inputs[position]
            found = tuple(value.shape) if isinstance(value, torch.Tensor) else value
            if found != expected:
                raise ValueError(
                    f"input {position} is {found}, but the graph was specialised for {expected}: "
                    "recompile for these sizes"
                )

    def results(self, values: list[Any]) -> list[Any]:
        """The flat FX outputs from the function's results (`values`), Python values filled in."""
        return [
            self.output_values.get(position) if index is None else values[index]
            for position, index in enumerate(self.outputs)
        ]

    def to_json(self) -> str | None:
        """Everything but the constants' values, as JSON; None when a field holds a value JSON cannot carry
        exactly. The compile cache keeps it with a program so that a hit needs no import (`from_json`)."""
        try:
            document = {
                "num_inputs": self.num_inputs,
                "inputs": self.inputs,
                "constant_names": self.constant_names,
                "outputs": self.outputs,
                "output_values": [[position, *_tagged(value)] for position, value in self.output_values.items()],
                "output_names": self.output_names,
                "output_spec": None if self.output_spec is None else pytree.treespec_dumps(self.output_spec),
                "guards": [
                    [position, "shape", list(value)] if isinstance(value, tuple) else [position, *_tagged(value)]
                    for position, value in self.guards.items()
                ],
                "assertions": [[index, message] for index, message in self.assertions],
                "linalg_checks": [[index, api_name, is_matrix] for index, api_name, is_matrix in self.linalg_checks],
            }
            return json.dumps(document)
        except (TypeError, ValueError):
            return None

    @staticmethod
    def from_json(text: str, graph_module: torch.fx.GraphModule) -> GraphSignature:
        """The signature `to_json` wrote, its constants read from `graph_module` (the graph it was imported from,
        or one with the same cache key). Raises ValueError for a document that is not exactly such a signature:
        it comes from a file, and is checked like a bundle, never trusted."""
        try:
            document = json.loads(text)
            signature = GraphSignature(
                num_inputs=_checked(document["num_inputs"], int),
                inputs=[_checked(i, int, type(None)) for i in _checked(document["inputs"], list)],
                constant_names=[_checked(n, str) for n in _checked(document["constant_names"], list)],
                outputs=[_checked(i, int, type(None)) for i in _checked(document["outputs"], list)],
                output_values={
                    _checked(position, int): _untagged(kind, value)
                    for position, kind, value in _checked(document["output_values"], list)
                },
                output_names=[_checked(n, str) for n in _checked(document["output_names"], list)],
                guards={
                    _checked(position, int): (
                        tuple(_checked(v, int) for v in _checked(value, list))
                        if kind == "shape"
                        else _untagged(kind, value)
                    )
                    for position, kind, value in _checked(document["guards"], list)
                },
                assertions=[
                    (_checked(index, int), _checked(message, str))
                    for index, message in _checked(document["assertions"], list)
                ],
                linalg_checks=[
                    (_checked(index, int), _checked(api_name, str), _checked(is_matrix, bool))
                    for index, api_name, is_matrix in _checked(document["linalg_checks"], list)
                ],
            )
            spec = _checked(document["output_spec"], str, type(None))
            signature.output_spec = None if spec is None else pytree.treespec_loads(spec)
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as error:
            raise ValueError(f"not a graph signature: {error}") from error
        if len(signature.inputs) != signature.num_inputs or len(signature.output_names) != len(signature.outputs):
            raise ValueError("not a graph signature: inconsistent lengths")
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # compiled inside AOTAutograd's fake mode: the constants are real tensors
            for name in signature.constant_names:
                try:
                    value = operator.attrgetter(name)(graph_module)
                except AttributeError as error:
                    raise ValueError(f"the graph module has no constant {name}") from error
                if not isinstance(value, torch.Tensor):
                    raise ValueError(f"the graph module's {name} is not a tensor")
                signature.constants.append(value.detach())
        return signature


_SCALAR_TAGS: dict[str, type] = {"bool": bool, "int": int, "float": float}


def _tagged(value: Any) -> tuple[str, Any]:
    """A Python number as (type name, value): it reads back as the same type (an int-valued float stays a float)."""
    for tag, kind in _SCALAR_TAGS.items():
        if type(value) is kind:
            return tag, value
    raise TypeError(f"{type(value).__name__} values are not kept in a cached signature")


def _untagged(tag: Any, value: Any) -> Any:
    kind = _SCALAR_TAGS.get(tag) if isinstance(tag, str) else None
    if kind is None:
        raise ValueError(f"unknown value tag {tag!r}")
    if kind is float and type(value) is int:
        value = float(value)
    return _checked(value, kind)


def _checked(value: Any, *kinds: type) -> Any:
    """`value` when its exact type is one of `kinds` (bool is not taken for int), else ValueError."""
    if type(value) not in kinds:
        raise ValueError(f"expected {' or '.join(k.__name__ for k in kinds)}, got {type(value).__name__}")
    return value


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
# Frames of the project's own call wrappers that Dynamo traces through on the way to an op: a call of an NKI
# kernel op passes `NkiTorchOp.__call__`, whose line is not the user's
_WRAPPER_FILES = frozenset({str(Path(__file__).with_name("nki_ops.py"))})
# Frames of torch's own Python functions Dynamo inlines (the functional collectives, DTensor's redistributions):
# the user's line is the innermost frame outside them
_TORCH_DIRECTORY = str(Path(torch.__file__).parent) + "/"


def node_location(node: torch.fx.Node) -> LocationAttr:
    """`loc("model.l1"("file.py":12:0))` from a node's stack trace and module stack (unknown if absent)."""
    frame = _last_frame(node.meta.get("stack_trace") or "")
    module_path = _module_path(node)
    if frame is None:
        return NameLoc(StringAttr(module_path), UnknownLoc()) if module_path else UnknownLoc()
    filename, line = frame
    return source_location(filename, int(line), 0, module_path)


# Nodes traced from one source line share its stack trace (and nodes of one module its path): both are parsed
# once per text, not once per node (the cache key and the importer spell every node's location).
@functools.lru_cache(maxsize=4096)
def _last_frame(trace: str) -> tuple[str, str] | None:
    """(file, line) of the innermost frame of a stack trace outside the project's call wrappers and, where the
    trace has one, outside torch's own files; None if it has none."""
    frames = [frame for frame in _FRAME.findall(trace) if frame[0] not in _WRAPPER_FILES]
    outside_torch = [frame for frame in frames if not frame[0].startswith(_TORCH_DIRECTORY)]
    return (outside_torch or frames)[-1] if frames else None


def _module_path(node: torch.fx.Node) -> str | None:
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
    if not stack:
        return None
    return _spelled_module_path(str(list(stack.values())[-1][0]))


@functools.lru_cache(maxsize=4096)
def _spelled_module_path(path: str) -> str:
    # Dynamo spells paths like "L['self'].layers[0].mlp": the root module is `model`
    path = re.sub(r"^L\['[^']*'\]", "model", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    return re.sub(r"\['([^']*)'\]", r".\1", path)


def _target_name(node: torch.fx.Node) -> str:
    if isinstance(node.target, torch._ops.OpOverload):
        return str(node.target)  # aten.add.Tensor
    return getattr(node.target, "__name__", str(node.target))


def describe_node(node: torch.fx.Node) -> str:
    """`FX node 'add' (aten.add.Tensor) at model.py:12 (model.layers.0)`: how every error names a node."""
    where = describe_location(node_location(node))
    return f"FX node '{node.name}' ({_target_name(node)})" + (f" at {where}" if where else "")


def concrete(value: Any, bindings: dict[Any, Any] | None = None) -> Any:
    """A symbolic number's value: from `bindings` (symbol -> size, or an expression of other symbols:
    `solve_sizes`) when they determine it, with hints for the symbols they leave, else its hint (the value it was
    traced with); other values unchanged. None when unbacked (data-dependent)."""
    if not isinstance(value, SymbolicNumber):
        return value
    python_type = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(value)]
    bound = value.node.expr
    if bindings and hasattr(bound, "xreplace"):
        bound = bound.xreplace(bindings)
    if not getattr(bound, "free_symbols", None):
        return python_type(bound)  # bound, or a constant (sizes derived from unbacked ones may simplify to one)
    if bindings and bound != value.node.expr:
        # partly bound: the symbols left take their hints
        hints = getattr(value.node.shape_env, "var_to_val", {})
        hinted = bound.xreplace({s: hints[s] for s in bound.free_symbols if s in hints})
        if not hinted.free_symbols:
            return python_type(hinted)
    if not value.node.has_hint():
        return None
    return python_type(value.node.hint)


def _size_equations(value: Any, real: Any) -> list[tuple[Any, int]]:
    """(symbolic expression, the size it is at this call) for a placeholder's SymInt or each symbolic extent of
    its tensor, given the value it is called with."""
    pairs: list[tuple[Any, Any]] = [(value, real)] if isinstance(value, torch.SymInt) else []
    if isinstance(value, torch.Tensor) and isinstance(real, torch.Tensor) and value.dim() == real.dim():
        pairs = list(zip(value.shape, real.shape, strict=True))
    return [(symbolic.node.expr, int(size)) for symbolic, size in pairs if isinstance(symbolic, torch.SymInt)]


def solve_sizes(equations: Sequence[tuple[Any, int]]) -> dict[Any, Any]:
    """Symbol -> its size (an int) or, where the equations fix only a sum of symbols, an expression of the
    symbols left free, from equations `expression == size`.

    A placeholder's size is a symbol (`s0`) or, in a region cut from a graph after a data-dependent size, an
    expression of symbols the region may never see alone (`-u2`, `u3 + 1600`, `u2 + u3 + 7`, `s33 + u3`): an
    equation linear in a symbol not yet known (coefficient 1 or -1, or any integer dividing the size when it is
    the equation's only unknown) is solved for it, data-dependent symbols first, and every earlier solution is
    rewritten in the symbols still free. So `u2 + u3 + 7 == 13` binds `u2` to `6 - u3`, and every size written
    as `u2 + u3 + 7` is 13. An equation of another form (`u0 // 2 == 3`) binds nothing."""
    import sympy  # type: ignore[import-untyped]
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    solved: dict[Any, Any] = {}
    pending = [(expression, size) for expression, size in equations if getattr(expression, "free_symbols", None)]
    while pending:
        rewritten = [(expression.xreplace(solved), size) for expression, size in pending]
        # an equation with one unknown first: it fixes a size rather than a sum
        rewritten.sort(key=lambda equation: len(equation[0].free_symbols))
        expression, size = rewritten[0]
        pending = [(e, n) for e, n in rewritten[1:] if e.free_symbols]
        if not expression.free_symbols:
            continue
        unbacked = free_unbacked_symbols(expression)
        for symbol in sorted(expression.free_symbols, key=lambda s: (s not in unbacked, str(s))):
            solution = _linear_solution(expression, symbol, size, alone=len(expression.free_symbols) == 1)
            if solution is not None:
                solved = {s: sympy.expand(v.xreplace({symbol: solution})) for s, v in solved.items()}
                solved[symbol] = solution
                break
    return {symbol: int(value) if value.is_Integer else value for symbol, value in solved.items()}


def _linear_solution(expression: Any, symbol: Any, size: int, alone: bool) -> Any:
    """The `symbol` that makes `expression == size` when the expression is linear in it with an integer
    coefficient (1 or -1 unless `alone`, the only symbol: then any coefficient dividing what it must), else None."""
    import sympy

    try:
        coefficient = sympy.diff(expression, symbol)
        rest = sympy.expand(expression - coefficient * symbol)
    except (TypeError, ValueError, NotImplementedError, AttributeError):  # a form sympy does not differentiate
        return None
    if not coefficient.is_Integer or coefficient == 0 or symbol in rest.free_symbols:
        return None
    if abs(int(coefficient)) != 1 and not alone:
        return None
    solution = sympy.expand((sympy.Integer(size) - rest) / coefficient)
    if alone and not solution.is_Integer:
        return None
    return solution


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | bool | SymbolicNumber)


def tensor_type(value: Any, node: torch.fx.Node, bindings: dict[Any, Any] | None = None) -> TensorType:
    """The builtin tensor type of a (fake) tensor; symbolic sizes are specialised (`concrete`), unbacked ones
    are `?`."""
    if not isinstance(value, torch.Tensor):
        raise GraphImportError(f"{describe_node(node)}: expected a tensor value, got {type(value).__name__}")
    shape = []
    for extent in value.shape:
        size = concrete(extent, bindings)
        shape.append(DYNAMIC_INDEX if size is None else int(size))
    try:
        element_type = element_type_for_dtype(value.dtype)
    except ValueError as error:
        raise GraphImportError(f"{describe_node(node)}: {error}") from error
    return TensorType(element_type, shape)


def _scalar_type(value: Any, kind: ResultKind, node: torch.fx.Node) -> Attribute:
    if kind is ResultKind.SYM_INT:
        return IndexType()
    if kind is ResultKind.INT:
        return i64
    if kind is ResultKind.FLOAT:
        return f64
    if kind is ResultKind.BOOL:
        return i1
    if isinstance(value, bool | torch.SymBool):
        return i1
    if isinstance(value, int | torch.SymInt):
        return i64
    if isinstance(value, float | torch.SymFloat):
        return f64
    raise GraphImportError(f"{describe_node(node)}: a Scalar result holding {type(value).__name__}")


class FxImporter:
    def __init__(
        self,
        graph_module: torch.fx.GraphModule,
        target: str = "trn2",
        name: str = "main",
        inputs: list[Any] | None = None,
        cpu_nodes: Collection[torch.fx.Node] = (),
        auto_cast: str = "none",
        stochastic_rounding: bool = False,
        size_arguments: Sequence[str] = (),
    ):
        self.graph_module = graph_module
        # size symbols whose value at each call the program takes as an integer argument (`SIZE_ARGUMENTS_ATTR`)
        self.size_arguments = list(size_arguments)
        self.target = target
        self.auto_cast = auto_cast
        self.stochastic_rounding = stochastic_rounding
        self.name = name
        self.inputs = inputs
        self.cpu_nodes = set(cpu_nodes)
        self.assertions: list[tuple[SSAValue, str]] = []
        self.linalg_checks: list[tuple[SSAValue, str, bool]] = []
        # symbol -> the size it takes (or an expression of symbols left free: `solve_sizes`): from `inputs` when
        # given (else symbols take their hints)
        self.bindings: dict[Any, Any] = {}
        # FX node -> an SSA value, a list of them (multi-result ops), or a Python value (specialised SymInts)
        self.values: dict[torch.fx.Node, Any] = {}
        self.block = Block()
        # process group name -> its ranks, for every group a collective of the graph names
        self.process_groups: dict[str, tuple[int, ...]] = {}

    def import_graph(self) -> tuple[ModuleOp, GraphSignature]:
        graph = self.graph_module.graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        signature = GraphSignature(num_inputs=len(placeholders))
        if self.inputs is not None and len(self.inputs) != len(placeholders):
            raise GraphImportError(f"the graph has {len(placeholders)} inputs, {len(self.inputs)} values were given")
        if self.inputs is not None:
            # every placeholder's symbols before any type: a tensor's size may be an expression (2*u1) of a symbol
            # that only a later placeholder (the SymInt argument u1) binds
            equations: list[tuple[Any, int]] = []
            for node, real in zip(placeholders, self.inputs, strict=True):
                equations += _size_equations(node.meta.get("val"), real)
            self.bindings.update(solve_sizes(equations))
        for position, node in enumerate(placeholders):
            self._placeholder(node, position, signature)
        constants = [n for n in graph.nodes if n.op == "get_attr"]
        for node in constants:
            self._get_attr(node, signature)
        results: list[SSAValue] = []
        for node in graph.nodes:
            if node.op == "call_function":
                self._call_function(node)
            elif node.op == "output":
                results = self._output(node, signature)
            elif node.op not in ("placeholder", "get_attr"):
                raise GraphImportError(f"{describe_node(node)}: FX '{node.op}' nodes are not supported")
        block = self.block
        return_op = func.ReturnOp(*results)
        block.add_op(return_op)
        function = func.FuncOp(self.name, ([a.type for a in block.args], [r.type for r in results]), Region(block))
        module = ModuleOp([function])
        module.attributes[TARGET_ATTR_NAME] = TargetAttr(self.target)
        module.attributes["neuron.source"] = StringAttr("fx")
        if self.auto_cast != "none":  # read by torch-auto-cast
            module.attributes["neuron.auto_cast"] = StringAttr(self.auto_cast)
        if self.process_groups:  # read by convert-torch-to-tile's collectives
            module.attributes[PROCESS_GROUPS_ATTR] = DictionaryAttr(
                {name: DenseArrayBase.from_list(i64, list(ranks)) for name, ranks in self.process_groups.items()}
            )
        if self.stochastic_rounding:  # read by convert-torch-to-tile's casts
            module.attributes["neuron.stochastic_rounding"] = UnitAttr()
        bounded = self._bounded_symbols()
        if bounded:  # read by convert-torch-to-tile, which makes them the function's index arguments
            function.attributes[SIZE_ARGUMENTS_ATTR] = ArrayAttr(
                [ArrayAttr([StringAttr(name), IntegerAttr(1, i64), IntegerAttr(top, i64)]) for name, top in bounded]
            )
        return module, signature

    def _bounded_symbols(self) -> list[tuple[str, int]]:
        """The size arguments with the size each is compiled for (the top of its range): symbols the inputs bind."""
        by_name = {str(symbol): size for symbol, size in self.bindings.items() if isinstance(size, int)}
        return [(name, by_name[name]) for name in self.size_arguments if by_name.get(name, 0) >= 1]

    def _mark_size_bounds(self, op: Operation, node: torch.fx.Node, value: Any) -> None:
        """Name, on `op`, the size argument bounding each dimension of its first result that is exactly one, or
        the factors of a dimension merged from size arguments and static extents (`SIZE_FACTORS`: `"s0*s1"`)."""
        if not self.size_arguments or not isinstance(value, torch.Tensor):
            return
        written = node.meta.get(PADDING_WRITTEN, ())
        if written is None:
            return
        factors = node.meta.get(SIZE_FACTORS)
        names = []
        shape: Sequence[Any] = value.shape  # SymInts where the graph's sizes are symbolic
        for dim, extent in enumerate(shape):
            if not isinstance(extent, torch.SymInt) or (dim in written and not self._key_blocks_read(node, dim)):
                names.append("")
                continue
            expr = extent.node.expr
            if expr.is_Symbol:
                names.append(str(expr) if str(expr) in self.size_arguments else "")
                continue
            merged = factors[dim] if isinstance(factors, list | tuple) and dim < len(factors) else ()
            named = [f for f in merged if isinstance(f, str)]
            # every factor a size argument or a static extent: the lowering can split the dimension into them
            usable = len(merged) > 1 and named and all(f in self.size_arguments for f in named)
            names.append("*".join(str(f) for f in merged) if usable else "")
        if any(names):
            op.attributes[SIZE_BOUNDS_ATTR] = ArrayAttr([StringAttr(n) for n in names])

    def _key_blocks_read(self, node: torch.fx.Node, dim: int) -> bool:
        """Whether `node` is a folded key mask (`KEY_BLOCKS_READ`) whose last dimension `dim`, padded keys written,
        may still follow the call's key blocks: the bucket's keys are `KEY_COLUMN_BLOCKS` whole 128-key blocks."""
        value = node.meta.get("val")
        if not node.meta.get(KEY_BLOCKS_READ) or not isinstance(value, torch.Tensor) or dim != value.dim() - 1:
            return False
        extent: Any = value.shape[dim]  # a SymInt where the graph's sizes are symbolic
        if not isinstance(extent, torch.SymInt) or not extent.node.expr.is_Symbol:
            return False
        sizes = {str(symbol): size for symbol, size in self.bindings.items() if isinstance(size, int)}
        size = sizes.get(str(extent.node.expr), 0)
        blocks, rest = divmod(size, 128)
        return not rest and blocks in KEY_COLUMN_BLOCKS

    # -- inputs ------------------------------------------------------------------------------------------------

    def _placeholder(self, node: torch.fx.Node, position: int, signature: GraphSignature) -> None:
        value = node.meta["val"] if "val" in node.meta else node.meta.get("example_value")
        if value is None or _is_checks_token(node):
            # an input that is always None (AOTAutograd's effect tokens are None at run time too)
            signature.inputs.append(None)
            self.values[node] = None
            return
        if (group_name := process_group_name(value)) is not None or _is_opaque(value):
            # a process group or device mesh passed to the graph (DTensor's): a group is named in the IR, the
            # others are Python values; neither is an argument of the function
            signature.inputs.append(None)
            self.values[node] = group_name if group_name is not None else value
            return
        if _is_number(value):
            number = concrete(value, self.bindings)
            if number is None:
                raise GraphImportError(f"{describe_node(node)}: an input symbol without a hint cannot be specialised")
            if isinstance(value, SymbolicNumber):
                signature.guards[position] = number
            signature.inputs.append(None)
            self.values[node] = number
            return
        arg_type = tensor_type(value, node, self.bindings)
        if any(isinstance(extent, torch.SymInt) for extent in value.shape):
            signature.guards[position] = tuple(arg_type.get_shape())
        signature.inputs.append(len(self.block.args))
        self.values[node] = self._add_argument(arg_type, node)

    def _add_argument(self, arg_type: Attribute, node: torch.fx.Node) -> SSAValue:
        argument = self.block.insert_arg(arg_type, len(self.block.args))
        argument.name_hint = ssa_name(node.name)
        return argument

    def _get_attr(self, node: torch.fx.Node, signature: GraphSignature) -> None:
        try:
            value = operator.attrgetter(str(node.target))(self.graph_module)
        except AttributeError as error:
            raise GraphImportError(f"{describe_node(node)}: the graph module has no attribute {node.target}") from error
        if not isinstance(value, torch.Tensor):
            raise GraphImportError(
                f"{describe_node(node)}: get_attr of a {type(value).__name__} (only tensor constants are imported)"
            )
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # a backend compiles inside AOTAutograd's fake mode; constants are real
            value = value.detach()
            fill = _splat_value(value)
        if fill is not None:
            user = next(iter(node.users), node)
            self.values[node] = self._full(list(value.shape), fill, value.dtype, user, ssa_name(node.name))
            return
        signature.constants.append(value)
        signature.constant_names.append(str(node.target))
        self.values[node] = self._add_argument(tensor_type(value, node), node)

    def _full(
        self, shape: list[int], fill: object, dtype: torch.dtype, node: torch.fx.Node, name: str | None
    ) -> SSAValue:
        """An `aten.full` of `fill`: how the IR spells a constant whose elements are all equal."""
        op_class = op_class_for("aten::full")
        assert op_class is not None
        result_type = TensorType(element_type_for_dtype(dtype), shape)
        op = op_class.from_args({"size": shape, "fill_value": fill, "dtype": dtype}, [result_type])
        op.location = node_location(node)
        self.block.add_op(op)
        op.results[0].name_hint = name
        return op.results[0]

    # -- operations --------------------------------------------------------------------------------------------

    def _value(self, argument: Any, node: torch.fx.Node) -> Any:
        if isinstance(argument, torch.fx.Node):
            if argument not in self.values:
                raise GraphImportError(f"{describe_node(argument)} is used before it is defined")
            value = self.values[argument]
            if isinstance(value, DataDependent):
                raise GraphImportError(
                    f"{describe_node(node)}: the data-dependent size {value.symbol} cannot be a static argument"
                )
            return value
        if isinstance(argument, list | tuple):
            return [self._value(a, node) for a in argument]
        if isinstance(argument, SymbolicNumber):
            number = concrete(argument, self.bindings)
            if number is None:
                raise GraphImportError(f"{describe_node(node)}: data-dependent value {argument} as an argument")
            return number
        return argument

    def _call_function(self, node: torch.fx.Node) -> None:
        value = node.meta.get("val")
        if node in self.cpu_nodes:
            self.values[node] = self._cpu_results(node, value)
            return
        if node.target is operator.getitem:
            source, index = node.args
            values = self.values[source]  # type: ignore[index]
            if not isinstance(values, list | tuple):
                raise GraphImportError(f"{describe_node(node)}: indexing a value that is not a list of results")
            self.values[node] = values[index]  # type: ignore[index]
            return
        if is_shape_arithmetic(node):
            number = concrete(value, self.bindings)
            self.values[node] = DataDependent(str(value)) if number is None else number
            return
        if str(node.target) in SIZE_ASSERTIONS:
            return  # checked by the tracer on the sizes the graph is specialised for; nothing to run
        if str(node.target) in HOST_CHECKED_ASSERTIONS:
            condition = self._value(node.args[0], node)
            message = node.args[1] if len(node.args) > 1 else node.kwargs.get("assert_msg", "")
            self.assertions.append((condition, str(message)))
            return
        if node.target is torch.ops.higher_order.with_effects:
            # an effectful op threaded through a token: the op itself, with the token passed through
            token, inner, *inner_args = node.args
            if isinstance(inner, torch._ops.OpOverload) and str(inner) == HOST_CHECKED_LINALG_ERRORS:
                checked = _named_arguments(inner, inner_args, node.kwargs)
                self.linalg_checks.append(
                    (self._value(checked["info"], node), str(checked["api_name"]), bool(checked["is_matrix"]))
                )
                self.values[node] = [None, None]  # the token: None at run time, as it came in
                return
            if not isinstance(inner, torch._ops.OpOverload):
                raise GraphImportError(f"{describe_node(node)}: only ATen operators are imported, got {inner}")
            if not isinstance(value, list | tuple):
                raise GraphImportError(f"{describe_node(node)}: the node has no fake-tensor metadata (meta['val'])")
            inner_value = value[1] if len(value) == 2 else tuple(value[1:])
            result = self._import_overload(node, inner, _named_arguments(inner, inner_args, node.kwargs), inner_value)
            self.values[node] = [self._value(token, node), result]
            return
        kernel_call = kernel_call_of(node.target)
        if kernel_call is not None:
            self.values[node] = self._import_kernel_call(node, kernel_call, value)
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise GraphImportError(f"{describe_node(node)}: only ATen operators are imported")
        arguments = _named_arguments(node.target, node.args, node.kwargs)
        self.values[node] = self._import_overload(node, node.target, arguments, value)

    def _import_kernel_call(self, node: torch.fx.Node, call: Any, value: Any) -> Any:
        """A call of an NKI kernel registered as a torch op: one `torch.nki_kernel` (`call`: its `KernelCall`)."""
        from xdsl.dialects.builtin import FloatAttr, IntegerAttr

        assert isinstance(node.target, torch._ops.OpOverload)
        arguments = _named_arguments(node.target, node.args, node.kwargs)
        inputs: list[SSAValue] = []
        scalars: dict[str, Attribute] = {}
        for name in call.parameters:
            argument = self._value(arguments.get(name, call.defaults.get(name)), node)
            if name in call.tensor_parameters:
                if not isinstance(argument, SSAValue):
                    raise GraphImportError(f"{describe_node(node)}: argument {name!r} of {call.name} is not a tensor")
                inputs.append(argument)
            elif isinstance(argument, bool):
                scalars[name] = IntegerAttr(int(argument), i1)
            elif isinstance(argument, int):
                scalars[name] = IntegerAttr(argument, i64)
            elif isinstance(argument, float):
                scalars[name] = FloatAttr(argument, f64)
            else:
                raise GraphImportError(f"{describe_node(node)}: argument {name!r} of {call.name} is {argument!r}")
        values = list(value) if isinstance(value, list | tuple) else [value]
        result_types = [tensor_type(v, node, self.bindings) for v in values]
        op = NkiKernelOp(call.name, inputs, result_types, scalars, call.fingerprint)
        op.location = node_location(node)
        self.block.add_op(op)
        results = list(op.results)
        if results:
            results[0].name_hint = ssa_name(node.name)
        return results if isinstance(value, list | tuple) else results[0]

    def _cpu_results(self, node: torch.fx.Node, value: Any) -> Any:
        """A CPU node's results as later nodes see them: a new argument per tensor (None stays None)."""
        if isinstance(value, list | tuple):
            return [self._cpu_results(node, item) for item in value]
        if isinstance(value, torch.Tensor):
            return self._add_argument(tensor_type(value, node, self.bindings), node)
        if value is None and "val" not in node.meta:
            raise GraphImportError(f"{describe_node(node)}: the node has no fake-tensor metadata (meta['val'])")
        return concrete(value, self.bindings) if _is_number(value) else value

    def _import_overload(self, node: torch.fx.Node, overload: Any, raw: dict[str, Any], value: Any) -> Any:
        """Import one ATen call whose results the metadata `value` describes; returns what later nodes see."""
        if not isinstance(overload, torch._ops.OpOverload):
            raise GraphImportError(f"{describe_node(node)}: only ATen operators are imported, got {overload}")
        target, raw_arguments = _with_scalar_overload(overload, raw)
        op_class = op_class_for(str(target))
        if op_class is None:
            raise GraphImportError(f"{describe_node(node)}: the torch dialect has no op for {target}")
        arguments = {name: self._value(v, node) for name, v in raw_arguments.items()}
        self._materialise_wrapped_numbers(op_class, arguments, node)
        if op_class.name.startswith("torch.c10d_functional.") and "group_name" in arguments:
            self._record_process_group(str(arguments["group_name"]), node)
        try:
            op = op_class.from_args(arguments, self._result_types(op_class, node, value))
        except (ValueError, TypeError, AssertionError) as error:
            raise GraphImportError(f"{describe_node(node)}: {error}") from error
        op.location = node_location(node)
        self._mark_size_bounds(op, node, value[0] if isinstance(value, list | tuple) and value else value)
        padded_keys = node.meta.get(PADDED_KEYS)
        if padded_keys is not None:
            if padded_keys not in self.size_arguments:
                raise GraphImportError(
                    f"{describe_node(node)}: padded keys counted by {padded_keys}, not a size argument"
                )
            op.attributes[PADDED_KEYS_ATTR] = StringAttr(padded_keys)
        try:
            op.verify()
        except VerifyException as error:
            raise GraphImportError(
                f"{describe_node(node)}: the imported op does not verify (an importer bug: the node's metadata and "
                f"the op disagree): {error}"
            ) from error
        self.block.add_op(op)
        return self._node_value(op, node)

    def _record_process_group(self, name: str, node: torch.fx.Node) -> None:
        """Resolve the process group a collective names to its ranks (the module's table of groups)."""
        if name in self.process_groups:
            return
        from neuron_mlir.frontend.distributed.transport import resolve_group
        from neuron_mlir.runtime.collectives import CollectiveError

        try:
            self.process_groups[name] = resolve_group(name)
        except (CollectiveError, ValueError, KeyError, RuntimeError) as error:
            raise GraphImportError(
                f"{describe_node(node)}: the process group '{name}' cannot be resolved: {error}"
            ) from error

    def _materialise_wrapped_numbers(
        self, op_class: type[TorchOp], arguments: dict[str, Any], node: torch.fx.Node
    ) -> None:
        """Numbers left in Tensor positions (no Scalar overload took them) become 0-d `aten.full` constants."""
        tensor_args = [spec for spec in op_class.SCHEMA.operand_args if spec.name in arguments]
        others = [arguments[s.name] for s in tensor_args if isinstance(arguments[s.name], SSAValue)]
        for spec in tensor_args:
            number = arguments[spec.name]
            if isinstance(number, int | float | bool):
                dtype = _wrapped_number_dtype(number, [v.type for v in others])
                arguments[spec.name] = self._full([], number, dtype, node, None)

    def _result_types(self, op_class: type[TorchOp], node: torch.fx.Node, value: Any) -> list[Attribute]:
        specs = op_class.SCHEMA.results
        if specs and value is None and "val" not in node.meta:
            raise GraphImportError(f"{describe_node(node)}: the node has no fake-tensor metadata (meta['val'])")
        values = list(value) if len(specs) > 1 else [value] if specs else []
        if len(values) != len(specs):
            raise GraphImportError(
                f"{describe_node(node)}: {len(values)} values in the metadata for {len(specs)} results"
            )
        types: list[Attribute] = []
        for spec, item in zip(specs, values, strict=True):
            if spec.kind is ResultKind.TENSOR_LIST:
                types.extend(tensor_type(v, node, self.bindings) for v in item)
            elif spec.kind is ResultKind.TENSOR:
                types.append(NoneType() if item is None else tensor_type(item, node, self.bindings))
            else:
                types.append(_scalar_type(item, spec.kind, node))
        return types

    def _node_value(self, op: TorchOp, node: torch.fx.Node) -> Any:
        """What later nodes see: the single result, or the results grouped as the metadata nests them."""
        specs = op.SCHEMA.results
        results = list(op.results)
        if not specs:
            return None
        if results:  # the FX node's name: how diagnostics (and the frontend's fallback) find the node again
            results[0].name_hint = ssa_name(node.name)
        if len(specs) == 1 and specs[0].kind is not ResultKind.TENSOR_LIST:
            return results[0]
        if len(specs) == 1:
            return results
        grouped: list[Any] = []
        flat = iter(results)
        variadic = len(results) - (len(specs) - 1)
        for spec in specs:
            grouped.append([next(flat) for _ in range(variadic)] if spec.kind is ResultKind.TENSOR_LIST else next(flat))
        return grouped

    # -- outputs -----------------------------------------------------------------------------------------------

    def _output(self, node: torch.fx.Node, signature: GraphSignature) -> list[SSAValue]:
        (outputs,) = node.args
        structure = pytree.tree_map(self._output_structure, outputs)
        leaves, spec = pytree.tree_flatten(structure)
        if not (isinstance(outputs, tuple | list) and all(not isinstance(o, list | tuple) for o in outputs)):
            signature.output_spec = spec
        names = pytree.tree_leaves(pytree.tree_map(self._output_names, outputs))
        results: list[SSAValue] = []
        for position, leaf in enumerate(leaves):
            signature.output_names.append(names[position])
            if isinstance(leaf, SSAValue):
                signature.outputs.append(len(results))
                results.append(leaf)
            else:
                signature.outputs.append(None)
                if leaf is not None:
                    signature.output_values[position] = leaf
        for condition, message in self.assertions:
            signature.assertions.append((len(results), message))
            results.append(condition)
        for info, api_name, is_matrix in self.linalg_checks:
            signature.linalg_checks.append((len(results), api_name, is_matrix))
            results.append(info)
        return results

    def _output_names(self, output: Any) -> Any:
        """Names parallel to `_output_structure`: the node's, `name[i]` for the elements of a tuple-valued node."""
        if not isinstance(output, torch.fx.Node):
            return str(output)
        value = self.values[output]
        if isinstance(value, list | tuple):
            return _indexed_names(output.name, value)
        return output.name

    def _output_structure(self, output: Any) -> Any:
        if isinstance(output, torch.fx.Node):
            return self.values[output]
        if isinstance(output, SymbolicNumber):
            return concrete(output, self.bindings)
        return output


def _indexed_names(name: str, value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_indexed_names(f"{name}[{i}]", v) for i, v in enumerate(value)]
    return name


def process_group_name(value: Any) -> str | None:
    """The name of a process group given as a graph value (a node holding one, the fake object tracing made of
    it, or the group itself); None when `value` is no process group."""
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val", value.meta.get("example_value"))
    value = getattr(value, "real_obj", value)  # tracing's FakeScriptObject wraps the group
    if isinstance(value, torch.distributed.ProcessGroup):
        return str(value.group_name)
    return None


def _is_opaque(value: Any) -> bool:
    """Whether a graph input is an object torch passes through graphs opaquely (a DeviceMesh, a script object)."""
    from torch._library.fake_class_registry import FakeScriptObject
    from torch._opaque_base import OpaqueBase

    return isinstance(value, FakeScriptObject | OpaqueBase | torch.ScriptObject)


def is_shape_arithmetic(node: torch.fx.Node) -> bool:
    """A node computing a number from sizes only (`sym_size`, `operator.mul` on SymInts, ...): the importer
    specialises it to its traced value, so it needs no op (and no lowering)."""
    if node.op != "call_function" or not _is_number(node.meta.get("val")):
        return False
    tensor_operands = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
    return not tensor_operands or str(node.target).startswith("aten.sym_")


def _splat_value(value: torch.Tensor) -> object | None:
    """The one value all elements of a real (non-complex) tensor share, else None."""
    if value.is_complex() or value.is_sparse or value.numel() == 0:
        return None
    try:
        element_type_for_dtype(value.dtype)
    except ValueError:
        return None
    flat = value.reshape(-1)
    first = flat[0]
    same = bool(torch.all((flat == first) | (torch.isnan(flat) & torch.isnan(first))))
    return first.item() if same else None


_CATEGORY = {bool: 0, int: 1, float: 2}


def _wrapped_number_dtype(number: int | float | bool, others: list[Attribute]) -> torch.dtype:
    """The dtype PyTorch gives a wrapped number: the other tensor's, unless the number's kind is higher."""
    category = _CATEGORY[type(number)]
    for other in others:
        if not isinstance(other, TensorType):
            continue
        dtype = _torch_dtype(other.get_element_type())
        kind = 0 if dtype == torch.bool else 2 if (dtype.is_floating_point or dtype.is_complex) else 1
        if kind >= category:
            return dtype
    return {0: torch.bool, 1: torch.int64, 2: torch.get_default_dtype()}[category]


def _torch_dtype(element_type: Attribute) -> torch.dtype:
    from neuron_mlir.ir.dialects.torch import dtype_name_for

    return getattr(torch, dtype_name_for(element_type))


def kernel_call_of(target: Any) -> Any:
    """The `nki.KernelCall` of an FX node's target when it is an NKI kernel registered as a torch op."""
    import sys

    nki_ops = sys.modules.get("neuron_mlir.frontend.nki_ops")  # no kernel op exists before that module is loaded
    registered = nki_ops.kernel_op_of(target) if nki_ops is not None else None
    return registered.call if registered is not None else None


def _named_arguments(target: torch._ops.OpOverload, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    arguments = {spec.name: value for spec, value in zip(target._schema.arguments, args, strict=False)}
    arguments.update(kwargs)
    return arguments


def _with_scalar_overload(target: torch._ops.OpOverload, arguments: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Python numbers in Tensor positions (FX's wrapped numbers) select the op's Scalar overload.

    `aten.mul.Tensor(x, 2.0)` is `aten.mul.Scalar(x, 2.0)`: PyTorch promotes wrapped numbers exactly as scalars.
    """
    schema = target._schema
    wrapped = {
        spec.name
        for spec in schema.arguments
        if isinstance(arguments.get(spec.name), int | float | bool) and str(spec.type) == "Tensor"
    }
    if not wrapped:
        return target, arguments
    packet = target.overloadpacket
    for overload_name in packet.overloads():
        candidate = getattr(packet, overload_name)
        specs = {spec.name: str(spec.type) for spec in candidate._schema.arguments}
        if set(specs) != {spec.name for spec in schema.arguments}:
            continue
        takes_scalars = all(specs[name] in ("Scalar", "number") for name in wrapped)
        rest_same = all(specs[spec.name] == str(spec.type) for spec in schema.arguments if spec.name not in wrapped)
        if takes_scalars and rest_same and op_class_for(str(candidate)) is not None:
            return candidate, arguments
    return target, arguments


def ssa_name(name: str) -> str | None:
    # xDSL treats a trailing "_<n>" as a uniquing suffix and drops it; "addmm_1" stays readable as "addmm1"
    cleaned = re.sub(r"_(\d+)$", r"\1", re.sub(r"[^A-Za-z0-9_]", "_", name))
    if not cleaned or cleaned[0].isdigit():
        cleaned = "v" + cleaned
    return cleaned


def import_fx_graph(
    graph_module: torch.fx.GraphModule,
    target: str = "trn2",
    name: str = "main",
    inputs: list[Any] | None = None,
    cpu_nodes: Collection[torch.fx.Node] = (),
    auto_cast: str = "none",
    stochastic_rounding: bool = False,
    size_arguments: Sequence[str] = (),
) -> tuple[ModuleOp, GraphSignature]:
    """Import an ATen-level FX graph (see the module docstring); symbolic sizes are specialised to those of
    `inputs` (the values of the placeholders) when given, else to the sizes the graph was traced with.
    `cpu_nodes` import as arguments holding their results (to ask about the other nodes, not to compile).
    `auto_cast` other than "none" becomes the module's `neuron.auto_cast` attribute, the mode torch-auto-cast
    compiles it with; `stochastic_rounding` its `neuron.stochastic_rounding` unit attribute (fp32 -> bf16 casts
    round stochastically). `size_arguments` names size symbols the program takes as integer arguments at each
    call (`SIZE_ARGUMENTS_ATTR`, `SIZE_BOUNDS_ATTR`)."""
    return FxImporter(
        graph_module, target, name, inputs, cpu_nodes, auto_cast, stochastic_rounding, size_arguments
    ).import_graph()


# ---- the compile cache's key -------------------------------------------------------------------------------


class _Unkeyable(Exception):
    """A value `graph_key_text` has no exact spelling for."""


def graph_key_text(graph_module: torch.fx.GraphModule) -> str | None:
    """A canonical text of everything in `graph_module` that `import_fx_graph` (without `inputs`) reads, or None
    when the graph holds a value this spelling does not cover.

    Equal texts import to equal IR (given the same compiler, torch and target), so the text can key the compile
    cache instead of the printed IR, at a fraction of the cost of importing and printing. Per node: its kind,
    name (the IR's value names), target, arguments and keyword arguments (nodes by name; numbers with their exact
    type; SymInts by the value they specialise to), the shapes and dtypes of its metadata value, its source
    location (the last frame of the stack trace and the module path) and, for a constant, its dtype, shape and
    a digest of its bytes (an all-equal constant is a literal in the IR). The text may say more than the IR
    (a node's every argument, even ones the importer drops): that only costs a cache miss, never a wrong hit.
    """
    lines = []
    try:
        for node in graph_module.graph.nodes:
            lines.append(_node_key(node, graph_module))
    except _Unkeyable:
        return None
    return "\n".join(lines)


def _node_key(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> str:
    meta = node.meta
    if node.op == "placeholder":
        value = meta["val"] if "val" in meta else meta.get("example_value")
        group_name = process_group_name(value)
        if group_name is not None:
            described = f"group:{group_name}"
        elif _is_opaque(value):  # a device mesh: no op reads it (its groups' ranks are keyed at the collectives)
            described = f"opaque:{type(value).__name__}"
        else:
            described = _value_key(value)
    elif node.op == "get_attr":
        described = _constant_key(node, graph_module)
    else:
        described = _value_key(meta["val"]) if "val" in meta else "noval"
    frame = _last_frame(meta.get("stack_trace") or "")
    location = f"{frame[0]}:{frame[1]}" if frame is not None else ""
    groups = ""
    if str(node.target).startswith("_c10d_functional.") and "group_name" in str(node.target._schema):  # type: ignore[union-attr]
        # a group's name may stand for other ranks in another run: the ranks are what the IR holds (the key is
        # per process: the compile cache holds IR, never the transport)
        from neuron_mlir.frontend.distributed.transport import resolve_group
        from neuron_mlir.runtime.collectives import CollectiveError

        name = _named_arguments(node.target, node.args, node.kwargs).get("group_name")  # type: ignore[arg-type]
        try:
            groups = f" ranks{resolve_group(process_group_name(name) or str(name))}"
        except (CollectiveError, ValueError, KeyError, RuntimeError) as error:
            raise _Unkeyable(name) from error  # the import names the group that cannot be resolved
    return (
        f"{node.op} {node.name} {_target_key(node.target)} {_argument_key(node.args)} "
        f"{_argument_key(node.kwargs)} : {described} @{location}|{_module_path(node)}{groups}"
    )


def _target_key(target: Any) -> str:
    if isinstance(target, str):  # get_attr, placeholder, output
        return target
    if isinstance(target, torch._ops.OpOverload | torch._ops.HigherOrderOperator):
        return f"{type(target).__name__}:{target}"
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if module is not None and name is not None:  # operator.getitem, math.* and similar Python functions
        return f"{module}.{name}"
    raise _Unkeyable(target)


def _argument_key(value: Any) -> str:
    # type checks in order: bool before int (a bool is an int), SymInts before everything numeric
    if isinstance(value, torch.fx.Node):
        return "%" + value.name
    if value is None or type(value) in (bool, int, str):
        return repr(value)
    if type(value) is float:
        return f"float({value!r})"  # repr round-trips floats, -0.0, inf and nan included
    if isinstance(value, SymbolicNumber):
        return f"sym({concrete(value)!r})"
    if isinstance(value, tuple | list):
        inner = ",".join(_argument_key(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{_argument_key(v)}" for k, v in value.items()) + "}"
    if isinstance(value, torch.dtype | torch.device | torch.layout | torch.memory_format):
        return f"{type(value).__name__}:{value}"
    if isinstance(value, torch._ops.OpOverload):  # the inner op of with_effects
        return f"OpOverload:{value}"
    raise _Unkeyable(value)


def _value_key(value: Any) -> str:
    """A metadata value as the importer reads it: tensors by dtype and (specialised) shape."""
    if isinstance(value, torch.Tensor):
        shape = ",".join(repr(concrete(extent)) for extent in value.shape)
        return f"{value.dtype}[{shape}]"
    if isinstance(value, tuple | list):
        inner = ",".join(_value_key(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return _argument_key(value)


def _constant_key(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> str:
    import hashlib

    from neuron_mlir.frontend.tensors import to_numpy

    try:
        value = operator.attrgetter(str(node.target))(graph_module)
    except AttributeError:
        raise _Unkeyable(node.target) from None
    if not isinstance(value, torch.Tensor) or value.is_sparse or value.dtype in (torch.complex32,):
        raise _Unkeyable(node.target)
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():  # a backend compiles inside AOTAutograd's fake mode; constants are real
        try:
            data = to_numpy(value)
        except (TypeError, RuntimeError):  # a dtype NumPy cannot hold
            raise _Unkeyable(node.target) from None
        digest = hashlib.sha256(data.reshape(-1).view("u1").data).hexdigest()
    # the literal of an all-equal constant is located at its first user
    user = next(iter(node.users), node)
    return f"{value.dtype}{list(value.shape)} sha256:{digest} first-user:{user.name}"
