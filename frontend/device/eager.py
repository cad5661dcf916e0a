"""Eager ops on device tensors: compiled single-op programs on the simulated NeuronCore, or the host.

Input contract: an ATen op that is neither memory management, a copy nor a view (`dispatch.neuron_fallback` serves
those), with its arguments as the dispatcher passed them.

Output guarantee: the op's results as device tensors, written arguments (in-place `self`, `out=`) updated in
device memory, with PyTorch's semantics; every call counted as native or host (`eager_stats`).

The native path traces the op alone into a functional FX graph of core ATen ops (in-place and `out=` forms become
their functional op writing a copy of the written argument), and compiles it with the same pipeline as
`torch.compile` (`frontend.compile_graph`, strict: every node must lower). Programs are kept per signature: the
op, every tensor operand's shape and dtype, and every other argument's value; strides do not enter it, because the
host side gathers every operand into the dense layout the program reads, and the program's results are scattered
into the written tensors' own strides. The compile cache (`frontend.cache`, in memory and on disk) keeps the
programs across processes. Complex64 operands and results are carried as float32 (real, imaginary) pairs, the
compiler's rule for complex values (`frontend.complex_pairs`): an FFT is DFT matmuls on TensorE. The simulated
time of every run accumulates on the current stream, and each program's latest profile is in
`neuron_mlir.profiles()` like a compiled graph's.

An op the compiler refuses (no lowering, a dtype the core cannot hold) runs on the host over aliases of the device
memory (`dispatch.run_on_host`), with one warning per op naming it and the user's line, or an error in strict mode
(NEURON_MLIR_STRICT=1). Random ops compile like the others, their programs seeded from the device generator; those
given a generator of the caller's own, or drawing a distribution the compiler does not, run on the host by design,
from that generator or the device's, without a warning.
NEURON_MLIR_EAGER=host runs every op on the host without warnings (to tell a compiler problem from the device's).
"""

from __future__ import annotations

import functools
import itertools
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_map_only, tree_unflatten

from neuron_mlir.frontend import stats
from neuron_mlir.frontend.device import bounded, dispatch, native, region, sources, storage, streams
from neuron_mlir.frontend.device.registration import hide_from_dynamo
from neuron_mlir.frontend.tensors import from_numpy, to_numpy, torch_dtype


class DeviceFallbackError(RuntimeError):
    """Strict mode: an op on device tensors that the NeuronCore does not run."""


@dataclass
class EagerStats:
    native_ops: Counter[str] = field(default_factory=Counter)
    host_ops: Counter[str] = field(default_factory=Counter)
    compiled_signatures: int = 0
    refused_signatures: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "native_ops": dict(self.native_ops),
            "host_ops": dict(self.host_ops),
            "native_calls": sum(self.native_ops.values()),
            "host_calls": sum(self.host_ops.values()),
            "compiled_signatures": self.compiled_signatures,
            "refused_signatures": self.refused_signatures,
            **streams.transfers,
            **region.REGION_STATS,
        }


EAGER_STATS = EagerStats()
_warned: set[str] = set()


# Ops that run on the host by design, besides random draws given a generator of the caller's own and those the
# compiler does not draw (`_given_generator`, `_draws_random_numbers`): these hand a value to the host.
_HOST_ONLY_PREFIXES = ("aten::_local_scalar_dense", "aten::is_nonzero", "aten::_to_cpu")


@dataclass
class _Program:
    """A compiled single-op program: its callable, which arguments it writes and how results map back."""

    compiled: Any
    tensor_positions: list[int]  # positions in the flattened (args, kwargs) of the tensor operands
    written_positions: list[int]  # positions of the written tensors, in the order of the program's first results
    name: str
    runs_arrays: bool  # `compiled` is a `CompiledGraph`, which runs on NumPy arrays (`run_arrays`)
    # indices among the op's declared returns of the results it leaves out (None), which the program does not
    # compute: a backward op's `output_mask` entries that are False. The mask is an argument of the signature.
    absent_returns: frozenset[int] = frozenset()
    # per declared return that is a list of tensors (`Tensor[]`: `_histogramdd_bin_edges`), its length: its
    # elements are consecutive fresh outputs of the program. Only the op's arguments decide it, as for `absent`.
    list_returns: dict[int, int] = field(default_factory=dict)
    # per output of the traced graph (the written tensors', then the fresh results'), the program output it is and
    # that output's shape and NumPy dtype, when no other graph output is the same program output: learned from the
    # first run (None before it), so that later runs write results straight into device memory (`_destinations`)
    layouts: list[tuple[int, tuple[int, ...], np.dtype] | None] | None = None
    # the traced single-op graph, which a deferred region stitches with its neighbours' (`region`), and per output
    # of it the shape and NumPy dtype the trace gives it
    graph_module: torch.fx.GraphModule | None = None
    results: list[tuple[tuple[int, ...], np.dtype]] | None = None
    # the fresh results' layouts as `storage.empty_arrays` takes them (shape, torch dtype, NumPy dtype), made from
    # `results` on first use: a recorded op's fresh results come from one native call
    fresh_layouts: list[tuple[tuple[int, ...], torch.dtype, np.dtype]] | None = None
    # whether a deferred region may record it: a program of arrays without a random seed, guards or checks of
    # its results (decided with its first run)
    deferrable: bool = False
    # whether its results depend on no operand's values, only on their shapes and dtypes (`fill_`, `zero_`: the
    # graph reads its operands only through `*_like` factories), so that every run gives the same outputs ...
    constant: bool = False
    # ... which, for a deferrable program, are kept from its first run alone: later calls outside a region write
    # them and account the run's simulated time without running the simulator again (`_replay`)
    memo: list[np.ndarray] | None = None
    # an op whose result size depends on its values: the program computes its results at their bound and the
    # count, which the host reads to cut them (`bounded`)
    bounded: bounded.BoundedKernel | None = None


@dataclass
class _Refusal:
    reason: str
    by_design: bool = False  # on the host by design (random draws), not a gap of the compiler: no warning


_programs: dict[tuple[Any, ...], _Program | _Refusal] = {}


def _mode() -> str:
    return storage.setting("NEURON_MLIR_EAGER", "compile")


def _strict() -> bool:
    return storage.setting("NEURON_MLIR_STRICT", "0") not in ("", "0")


@dataclass(eq=False)
class _OpFacts:
    """What every call of an op needs from its schema, read once per op. Compared and hashed by identity (one per
    op): it stands for its op in the programs' keys, where an `OpOverload`'s hash is a Python call."""

    name: str
    # per declared return: the (name, position) of the argument it returns when it returns a written argument
    # (in-place `self`, `out=`), else None (a fresh result)
    returned_arguments: list[tuple[str, int] | None]
    op: torch._ops.OpOverload


# by id(op): an OpOverload hashes by a Python method; ops live as long as the process (the facts keep theirs)
_op_facts: dict[int, _OpFacts] = {}


def _facts(op: torch._ops.OpOverload) -> _OpFacts:
    facts = _op_facts.get(id(op))
    if facts is None:
        schema = op._schema
        returned: list[tuple[str, int] | None] = []
        for declared in schema.returns:
            alias = declared.alias_info
            source = None
            if alias is not None and alias.is_write:
                source = next(
                    (argument.name, index)
                    for index, argument in enumerate(schema.arguments)
                    if argument.alias_info is not None and argument.alias_info.before_set & alias.before_set
                )
            returned.append(source)
        facts = _op_facts[id(op)] = _OpFacts(str(op), returned, op)
    return facts


def run(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _run(op, args, kwargs, None)


def run_or(
    op: torch._ops.OpOverload,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    otherwise: Callable[[], Any],
    validate: Callable[[], None] | None = None,
    flat: list[Any] | None = None,
) -> Any:
    """`run`, but a call the compiler refuses runs `otherwise()` rather than `op` on the host (a foreach op's
    per-tensor ops, each of which may compile); `validate()`, called before a new signature is compiled, raises
    the user's error for arguments the op does not take (nothing of such a call is kept). `flat` is
    `_leaves(args, kwargs)` when the caller has it already."""
    return _run(op, args, kwargs, otherwise, validate, flat)


def _run(
    op: torch._ops.OpOverload,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    otherwise: Callable[[], Any] | None,
    validate: Callable[[], None] | None = None,
    flat: list[Any] | None = None,
    count_first: bool = True,
) -> Any:
    """`count_first=False`: a call of one of `bounded.COUNT_FIRST_OPS` at its size's bucket (`_count_first`),
    which runs as a plain op."""
    if flat is None:
        flat = _leaves(args, kwargs)
    facts = _facts(op)
    name = facts.name
    if _mode() == "host":
        dispatch.check_same_device(op, flat)
        EAGER_STATS.host_ops[name] += 1
        sources.record(name, 0.0, on_host=True)
        return dispatch.run_on_host(op, args, kwargs)
    kernel = None
    if id(op) in _MAY_BE_BOUNDED:
        dispatch.check_same_device(op, flat)
        counted = bounded.COUNT_FIRST_OPS.get(op)
        if counted is None:
            kernel = bounded.kernel_for(op, args)
        elif count_first:
            return _count_first(facts, counted, args, kwargs, flat)
    if kernel is not None:
        # `otherwise` (an op's composite steps) would size its results by the meta kernel, which has no size to give
        otherwise = None
        if bounded.has_no_elements(flat):
            EAGER_STATS.native_ops[name] += 1  # no elements, nothing to compute: the results' sizes alone
            return _fresh_results(facts, bounded.empty_results(op, args, kwargs))
    # the signature checks the operands' devices on the way (`dispatch.check_same_device`), once per call
    key = _signature(facts, args, kwargs, flat)
    entry = _programs.get(key) if key is not None else _Refusal(f"{op} has symbolic sizes or a sparse layout")
    if entry is None:
        if validate is not None and kernel is None:  # meta kernels refuse data-dependent sizes: the trace checks
            validate()
        entry = _host_only(op, flat) or _compile(op, args, kwargs, flat, kernel)
        if isinstance(entry, _Refusal) and _draws_random_numbers(op):
            # a distribution the compiler does not draw: the host draws it from the device generator
            entry = _Refusal(f"{entry.reason}; it draws from the device generator, on the host", by_design=True)
        # a refusal with `otherwise` is not a trip to the host: the ops `otherwise` runs count for themselves
        if isinstance(entry, _Refusal) and not entry.by_design and otherwise is None:
            EAGER_STATS.refused_signatures += 1
        if key is not None:
            _programs[key] = entry
    if isinstance(entry, _Program):
        EAGER_STATS.native_ops[name] += 1
        if entry.bounded is not None:
            return _run_bounded(entry, facts, args, kwargs, flat)
        return _run_program(entry, facts, args, kwargs, flat)
    if otherwise is not None:
        return otherwise()
    if not entry.by_design:
        _refused(name, entry.reason)
    EAGER_STATS.host_ops[name] += 1
    sources.record(name, 0.0, on_host=True)
    return dispatch.run_on_host(op, args, kwargs)


def bounded_kernel(op: torch._ops.OpOverload, args: tuple[Any, ...]) -> bounded.BoundedKernel | None:
    """How a call whose result size depends on its values runs (`bounded`), or None for any other call."""
    return bounded.kernel_for(op, args) if id(op) in _MAY_BE_BOUNDED else None


def _host_only(op: torch._ops.OpOverload, flat: list[Any]) -> _Refusal | None:
    """Why a call runs on the host without trying to compile it, if it does."""
    if _given_generator(op, flat):
        return _Refusal(f"{op} draws random numbers from the generator it is given, on the host", by_design=True)
    if op._schema.name.startswith(_HOST_ONLY_PREFIXES):
        return _Refusal(f"{op} exchanges data with the host", by_design=True)
    unstorable = next((v.dtype for v in flat if isinstance(v, torch.Tensor) and v.dtype in unstorable_dtypes()), None)
    if unstorable is not None:
        return _Refusal(f"{op}: {str(unstorable).removeprefix('torch.')} is not supported on the NeuronCore")
    if not any(isinstance(v, torch.Tensor) and storage.on_device(v) for v in flat):
        return _Refusal(f"{op} has no device tensor operand")
    return None


def _random_from(
    x: torch.Tensor, low: int, high: int | None = None, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    from neuron_mlir.frontend.composite_decompositions import random_between

    return x.copy_(random_between(x, low, high))


# ids of the ops `bounded.kernel_for` may serve: looked up on every call, where an OpOverload's own hash is a
# Python call
_MAY_BE_BOUNDED = frozenset(
    id(op) for op in (*bounded.BOUNDED_OPS, torch.ops.aten.index.Tensor, *bounded.COUNT_FIRST_OPS)
)


def _count_first(
    facts: _OpFacts, kernel: bounded.CountFirst, args: tuple[Any, ...], kwargs: dict[str, Any], flat: list[Any]
) -> Any:
    """A call of one of `bounded.COUNT_FIRST_OPS`: its size is the one the call gives, else the count program's
    result, read by the host; the result is computed at the size's bucket (`bounded.size_bucket`: one program
    serves every size up to it) and cut."""
    op = facts.op
    if not kernel.runs(args, kwargs):  # the CPU's kernel raises PyTorch's error for these (dtype, rank, sizes)
        EAGER_STATS.host_ops[facts.name] += 1
        sources.record(facts.name, 0.0, on_host=True)
        return dispatch.run_on_host(op, args, kwargs)
    if bounded.has_no_elements(flat):
        EAGER_STATS.native_ops[facts.name] += 1  # nothing to compute: the result's size alone
        return _fresh_results(facts, bounded.empty_results(op, args, kwargs))
    size = kernel.given(args, kwargs)
    if size is None:
        count = _count(facts, kernel, kernel.counted(args, kwargs))
        if count is None:  # the count program is refused: the op runs on the host, warned as any refusal
            EAGER_STATS.host_ops[facts.name] += 1
            sources.record(facts.name, 0.0, on_host=True)
            return dispatch.run_on_host(op, args, kwargs)
        size = kernel.size(count, args, kwargs)
    if size == 0:
        EAGER_STATS.native_ops[facts.name] += 1
        return _fresh_results(facts, bounded.empty_results(op, args, kwargs))
    bucket = bounded.size_bucket(size)
    at_args, at_kwargs = kernel.at(args, kwargs, bucket)
    result = _run(op, at_args, at_kwargs, None, count_first=False)
    return result if bucket == size else result[:size].clone()


def _count(facts: _OpFacts, kernel: bounded.CountFirst, counted: torch.Tensor) -> int | None:
    """The count of a count-first call, from the count program run on the device and read by the host; None
    when the compiler refuses the program."""
    key = (kernel, counted.shape, counted.dtype)
    entry = _programs.get(key)
    if entry is None:
        kind = "eager_" + str(facts.op).removeprefix("aten.").split(".")[0] + "_count"
        entry = _programs[key] = _compile(facts.op, (counted,), {}, [counted], kind=kind, traced=kernel.count)
        if isinstance(entry, _Refusal):
            EAGER_STATS.refused_signatures += 1
    if isinstance(entry, _Refusal):
        _refused(facts.name, entry.reason)
        return None
    # an op of the pending region like any other (its program then computes the count with the ops before it),
    # read as `.item()` reads: the region runs, and the host reads the one value
    result = _run_program(entry, _count_facts(facts), (counted,), {}, [counted])
    return int(result.item())


_counts_facts: dict[int, _OpFacts] = {}


def _count_facts(facts: _OpFacts) -> _OpFacts:
    """The facts of a count-first op's count program, an op of one fresh result named after the op's
    (`aten.bincount.default (count)`): its calls and time are reported apart from the op's own program's."""
    found = _counts_facts.get(id(facts.op))
    if found is None:
        found = _counts_facts[id(facts.op)] = _OpFacts(facts.name + " (count)", [None], facts.op)
    return found


def _matrix_rank(op: torch._ops.OpOverload) -> Callable[..., Any]:
    """`linalg_matrix_rank` by the compiler's decomposition, in the matrix's dtype: traced as itself, its implicit
    composite would make the tolerances float64 tensors. Where the decomposition declines, the op itself."""

    def traced(A: torch.Tensor, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> torch.Tensor:
        from neuron_mlir.frontend.linalg_decompositions import linalg_matrix_rank

        result = linalg_matrix_rank(A, atol, rtol, hermitian)
        return op(A, atol=atol, rtol=rtol, hermitian=hermitian) if result is NotImplemented else result

    return traced


# Ops traced as an equivalent call: FX cannot print `random_.from`'s functional form (`random.from`: `from` is a
# Python keyword), so the draw it stands for is traced instead; `linalg_matrix_rank` (`_matrix_rank`);
# the ops of `bounded.COUNT_FIRST_OPS` at a known size (`_count_first`), whose meta kernels have no size to give.
_TRACED_AS: dict[Any, Callable[..., Any]] = {
    getattr(torch.ops.aten.random_, "from"): _random_from,
    torch.ops.aten.linalg_matrix_rank.atol_rtol_tensor: _matrix_rank(
        torch.ops.aten.linalg_matrix_rank.atol_rtol_tensor
    ),
    torch.ops.aten.linalg_matrix_rank.atol_rtol_float: _matrix_rank(torch.ops.aten.linalg_matrix_rank.atol_rtol_float),
    **{op: kernel.traced for op, kernel in bounded.COUNT_FIRST_OPS.items()},
}


def _draws_random_numbers(op: torch._ops.OpOverload) -> bool:
    return any(a.name == "generator" for a in op._schema.arguments)


def _given_generator(op: torch._ops.OpOverload, flat: list[Any]) -> bool:
    """Whether a random op is called with a generator of the caller's own. Without one it draws from the device
    generator, which a compiled program follows (its seed is drawn from it, `CompiledGraph.seed_generator`); a
    given generator's numbers are the host's Mersenne Twister's, drawn there."""
    return _draws_random_numbers(op) and any(isinstance(v, torch.Generator) for v in flat)


@functools.cache
def unstorable_dtypes() -> frozenset[torch.dtype]:
    """dtypes the NeuronCore holds no element type for (the compiler's list: `compile_graph._UNSTORABLE`), but
    for complex64, which the compiler carries as float32 (real, imaginary) pairs (`complex_pairs`): a program on
    complex64 device tensors reads and writes their bytes as pairs. complex32 stays on the host: its results
    cross as NumPy arrays, and NumPy has no complex type of two float16 halves."""
    from neuron_mlir.frontend.compile_graph import _UNSTORABLE

    return frozenset(_UNSTORABLE) - {torch.complex64}


@functools.cache
def _decompositions() -> dict[Any, Any]:
    """torch.compile's decomposition table (building it takes a good part of a second: once per process)."""
    from neuron_mlir.frontend.backend import decompositions

    return decompositions()


@functools.cache
def _eager_decompositions() -> dict[Any, Any]:
    """The decomposition table of single-op tracing: torch.compile's, and each functional `_foreach_*` op as its
    per-tensor op over the lists' elements (`_foreach_add.List(xs, ys, alpha=a)` as `add(x, y, alpha=a)` per
    pair), so that a foreach call over a model's parameters is one program rather than one per tensor."""
    table = {**_reference_decompositions_of_unlowered(), **_decompositions()}
    # the registered names carry their overloads (`aten::_foreach_add_.List`): one per op packet
    for name in sorted({n.split(".")[0] for n in torch._C._dispatch_get_all_op_names()}):
        if not name.startswith("aten::_foreach_"):
            continue
        packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
        base = getattr(torch.ops.aten, name.removeprefix("aten::_foreach_"), None)
        if packet is None or base is None:
            continue
        for overload_name in packet.overloads():
            overload = getattr(packet, overload_name)
            if not overload._schema.is_mutable and overload not in table and dispatch.foreach_by_element(overload):
                table[overload] = functools.partial(per_element, overload, base)
    return table


def _reference_decompositions_of_unlowered() -> dict[Any, Any]:
    """torch's reference decompositions of the ops the compiler has no lowering for. torch.compile meets most of
    these already decomposed (AOTAutograd traces through their CompositeImplicit kernels, which torch writes in
    Python: `upsample_bilinear2d.vec`), the device meets them whole, as the functional form of the structured
    kernel those composites call (`upsample_bilinear2d.default`). Ops the compiler lowers stay whole: their
    lowering, not torch's decomposition, decides how they run; so do the complex ops computed on (real, imaginary)
    pairs (`complex_pairs`: `complex`, `polar`), whose decompositions write into views of a complex result."""
    from torch._decomp import decomposition_table

    from neuron_mlir.frontend.complex_pairs import has_pair_rule
    from neuron_mlir.ir.dialects.torch import op_class_for
    from neuron_mlir.lowering.convert_torch_to_tile import is_lowerable

    table = {}
    for op, rule in decomposition_table.items():
        # a CompositeImplicit op (`reshape`) decomposes by its own kernel while it is traced
        if not isinstance(op, torch._ops.OpOverload) or torch._C._dispatch_has_kernel_for_dispatch_key(
            op.name(), "CompositeImplicitAutograd"
        ):
            continue
        if has_pair_rule(op):
            continue
        op_class = op_class_for(str(op))
        if op_class is None or not is_lowerable(op_class.name):
            table[op] = rule
    return table


def per_element(op: torch._ops.OpOverload, base: Any, *args: Any, **kwargs: Any) -> list[Any]:
    """Foreach op `op` as `base` (its per-tensor op's packet, which picks the overload by the arguments) over the
    elements of its list arguments, its other arguments passed to every call. Arguments the foreach op takes by
    position beyond those the per-tensor op takes so are its keyword-only ones, in order (`_foreach_addcdiv_`'s
    `value` or `scalars` is `addcdiv_`'s `value`)."""
    limit, keyword_only = _per_tensor_arguments(base)
    positional = list(args[:limit])
    keywords = dict(kwargs)
    for value, name in zip(args[limit:], (n for n in keyword_only if n not in kwargs), strict=False):
        keywords[name] = value
    count = next(len(v) for v in (*positional, *keywords.values()) if isinstance(v, list | tuple))

    def element(value: Any, index: int) -> Any:
        return value[index] if isinstance(value, list | tuple) else value

    return [
        base(*(element(a, i) for a in positional), **{k: element(v, i) for k, v in keywords.items()})
        for i in range(count)
    ]


_per_tensor_facts: dict[Any, tuple[int, list[str]]] = {}


def _per_tensor_arguments(packet: Any) -> tuple[int, list[str]]:
    """The most arguments an overload of `packet` takes by position, and its keyword-only argument names."""
    facts = _per_tensor_facts.get(packet)
    if facts is None:
        limit, keyword_only = 0, []
        for overload in packet.overloads():
            arguments = getattr(packet, overload)._schema.arguments
            limit = max(limit, sum(not a.kwarg_only for a in arguments))
            keyword_only += [a.name for a in arguments if a.kwarg_only and a.name not in keyword_only]
        facts = _per_tensor_facts[packet] = (limit, keyword_only)
    return facts


def _signature(
    facts: _OpFacts, args: tuple[Any, ...], kwargs: dict[str, Any], flat: list[Any]
) -> tuple[Any, ...] | None:
    """The program cache key of a call of the op of `facts`, or None when no key can describe it (symbolic values,
    other layouts).

    The flattened values alone would be ambiguous: the dispatcher leaves out keyword arguments at their
    defaults, so `right=True` and `out_int32=True` flatten alike, and so do lists of other lengths. The key
    holds the keyword names and each argument's length too.

    Raises PyTorch's error for a device tensor next to a CPU tensor (`dispatch.check_same_device`, whose test it
    makes on the way over the tensors)."""
    native = _native_signature
    if native is not None:
        # the same key in one native call (every eager op asks), or the Python path's answer for the calls it leaves
        key = native(facts, args, kwargs, flat, _SYMBOLIC, _PYTHON_PATH)
        if key is not _PYTHON_PATH:
            return key
    sequence = _SEQUENCES
    structure = [len(v) if isinstance(v, sequence) else -1 for v in args]
    if kwargs:
        structure += [len(v) if isinstance(v, sequence) else -1 for v in kwargs.values()]
    parts: list[Any] = [facts, len(args), tuple(kwargs), tuple(structure)]
    append = parts.append
    tensor, strided, symbolic, on_device = torch.Tensor, torch.strided, _SYMBOLIC, storage.on_device
    host = device = False  # a CPU tensor of one dimension or more; a device tensor
    for value in flat:
        if isinstance(value, tensor):
            if value.layout != strided:
                dispatch.check_same_device(facts.op, flat)
                return None
            where = on_device(value)
            if where:
                device = True
            elif not host and value.is_cpu and value.dim() > 0:
                host = True
            # torch.Size is a tuple: it hashes and compares as one
            append((value.shape, value.dtype, where))
        elif isinstance(value, symbolic):
            dispatch.check_same_device(facts.op, flat)
            return None
        elif type(value) is float:
            # by its bits: 0.0 == -0.0 would give `fill_(-0.0)` the program of `fill_(0.0)`, and nan != nan a new
            # program per call
            append((float, value.hex()))
        else:
            append((type(value), value))
    if host and device:
        dispatch.check_same_device(facts.op, flat)  # raises
    return tuple(parts)


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
# the native hooks' maker of `_signature`'s keys (None without the hooks), and what it answers for the calls it
# leaves to the Python path
_native_signature: Callable[..., Any] | None = native.signature()
_PYTHON_PATH: Any = object()


def _leaves(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments flattened as `tree_flatten((args, kwargs))` orders them (on every call: no pytree machinery
    for the lists and dicts of plain values the dispatcher passes)."""
    flat: list[Any] = []
    sequence = _SEQUENCES
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, sequence):
            flat.extend(value)
        else:
            flat.append(value)
    return flat


# a tuple of types, not a union: `list | tuple` in a call makes a union object on every evaluation
_SEQUENCES = (list, tuple)


def _compile(
    op: torch._ops.OpOverload,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    flat: list[Any],
    kernel: bounded.BoundedKernel | None = None,
    kind: str | None = None,
    traced: Callable[..., Any] | None = None,
) -> _Program | _Refusal:
    """The program of a call (`kernel`: of a data-dependent op, `bounded`; `traced`: a function traced in the op's
    place, of the op's returns), named after `kind` (by default the op's name), or why there is none."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        FakeTensorMode,
    )
    from torch.fx.experimental.proxy_tensor import make_fx

    from neuron_mlir.frontend.backend import CompileOptions
    from neuron_mlir.frontend.compile_graph import CompiledGraph, NeuronCompileError, compile_graph

    pytree_flat, spec = tree_flatten((args, kwargs))
    if len(pytree_flat) != len(flat) or any(a is not b for a, b in zip(pytree_flat, flat, strict=True)):
        return _Refusal(f"{op} has nested arguments")
    tensor_positions = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
    written = _written_positions(op, args, kwargs, flat, spec)
    if any(p not in tensor_positions for p in written):
        return _Refusal(f"{op} writes an argument that is not a tensor")
    returns_views = any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns)
    if returns_views:
        return _Refusal(f"{op} returns a view of its operand")

    absent: set[int] = set()
    lists: dict[int, int] = {}

    def single_op(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values = list(flat)
        for position, tensor in zip(tensor_positions, tensors, strict=True):
            values[position] = tensor.clone() if position in written else tensor
        call_args, call_kwargs = tree_unflatten(values, spec)
        if kernel is not None:
            return kernel.padded(*call_args, **call_kwargs)
        result = (traced or _TRACED_AS.get(op, op))(*call_args, **call_kwargs)
        returns = len(op._schema.returns)
        # ops that only write their arguments return nothing (`_foreach_add_`)
        results = [result] if returns == 1 else list(result) if returns else []
        # a result left out (a backward op's output mask) is no output of the program: it is None at every call
        # of the signature, since only the op's non-tensor arguments (part of the signature) decide it
        absent.clear()
        absent.update(i for i, value in enumerate(results) if value is None)
        lists.clear()
        fresh: list[torch.Tensor] = []
        for index, (declared, value) in enumerate(zip(op._schema.returns, results, strict=True)):
            if declared.alias_info is not None or value is None:
                continue
            if isinstance(value, list | tuple):
                lists[index] = len(value)
                fresh.extend(value)
            else:
                fresh.append(value)
        return (*[values[p] for p in written], *fresh)

    examples = [_host_example(flat[p]) for p in tensor_positions]
    try:
        with _clean_dispatch_state(), FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fakes = [mode.from_tensor(e) for e in examples]
            # functional first, then decomposed: a decomposition may write in place (fill_ into copy_), and only
            # functionalization above it would turn that write into a value
            functional = make_fx(torch.func.functionalize(single_op, remove="mutations_and_views"))(*fakes)
            graph_module = make_fx(functional, decomposition_table=_eager_decompositions())(*fakes)
    except DynamicOutputShapeException:
        return _Refusal(f"{op}: its output's shape depends on its values, and programs have static shapes")
    except DataDependentOutputException:
        return _Refusal(f"{op}: it reads a tensor's value to decide its computation (a check or a size)")
    except Exception as error:  # an op the tracer cannot take alone: a refusal, not the user's error
        return _Refusal(f"{op} cannot be traced alone ({type(error).__name__}: {str(error).splitlines()[0]})")
    if not any(n.op == "call_function" for n in graph_module.graph.nodes):
        return _Refusal(f"{op} computes nothing the device runs")
    if any(not isinstance(o, torch.fx.Node) for o in _graph_outputs(graph_module)):
        return _Refusal(f"{op} returns values that are not tensors")
    options = CompileOptions.from_user({"strict": True, "progress": False})
    kind = kind or "eager_" + str(op).removeprefix("aten.").replace(".", "_")
    try:
        compiled = compile_graph(graph_module, examples, options, kind)
    except NeuronCompileError as error:
        lines = str(error).splitlines()
        detail = lines[1].strip() if len(lines) > 1 else lines[0]
        return _Refusal(f"{op} is not compiled ({detail})")
    EAGER_STATS.compiled_signatures += 1
    if isinstance(compiled, CompiledGraph):
        from neuron_mlir.frontend.device.random import device_generator

        compiled.seed_generator = device_generator()  # a random op's draws (dropout) follow the device's seed
    return _Program(
        compiled,
        tensor_positions,
        written,
        getattr(compiled, "name", kind),
        isinstance(compiled, CompiledGraph),
        frozenset(absent),
        dict(lists),
        graph_module=graph_module,
        results=_traced_results(graph_module),
        deferrable=isinstance(compiled, CompiledGraph)
        and not compiled._seeded
        and not compiled.signature.guards
        and not compiled.signature.assertions
        and not compiled.signature.linalg_checks,
        constant=kernel is None and _reads_no_values(graph_module),
        bounded=kernel,
    )


# ops whose first argument gives only its shape, dtype and layout to the result, not its values
_METADATA_READS = {
    torch.ops.aten.full_like.default,
    torch.ops.aten.empty_like.default,
    torch.ops.aten.zeros_like.default,
    torch.ops.aten.ones_like.default,
}


def _reads_no_values(graph_module: torch.fx.GraphModule) -> bool:
    """Whether no output of a traced single-op graph depends on the values of its inputs (placeholders)."""
    dependent: set[torch.fx.Node] = set()
    for node in graph_module.graph.nodes:
        if node.op == "placeholder":
            dependent.add(node)
        elif node.op == "output":
            return not any(n in dependent for n in node.all_input_nodes)
        else:
            inputs = node.all_input_nodes
            if node.target in _METADATA_READS:
                inputs = [n for n in inputs if n is not node.args[0]]
            if any(n in dependent for n in inputs):
                dependent.add(node)
    return False


def _traced_results(graph_module: torch.fx.GraphModule) -> list[tuple[tuple[int, ...], np.dtype]] | None:
    """Per output of a traced single-op graph, its shape and NumPy dtype (None when some output has no static
    tensor value)."""
    from neuron_mlir.frontend.tensors import numpy_dtype

    results = []
    for node in _graph_outputs(graph_module):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or any(not isinstance(s, int) for s in value.shape):
            return None
        results.append((tuple(int(s) for s in value.shape), np.dtype(numpy_dtype(value.dtype))))
    return results


def _clean_dispatch_state() -> Any:
    """The dispatcher's thread-local state for tracing one op: an op reaching the device from inside a tensor
    subclass's dispatch (DTensor's local ops) arrives with functionalization's, functorch's layers' and the
    Python modes' keys excluded, which the tracer needs; they are let back in, and the rest of the caller's
    state (inference mode's exclusions, say) is kept. Autocast stays excluded: it acted before the device."""
    exclude = torch._C._dispatch_tls_local_exclude_set()
    for name in _TRACER_KEYS:
        exclude = exclude.remove(getattr(torch._C.DispatchKey, name))
    for name in dir(torch._C.DispatchKey):
        if name.startswith("Autocast"):
            exclude = exclude.add(getattr(torch._C.DispatchKey, name))
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), exclude)


_TRACER_KEYS = (
    "Functionalize",
    "FuncTorchDynamicLayerFrontMode",
    "FuncTorchDynamicLayerBackMode",
    "PythonTLSSnapshot",
    "PreDispatch",
    "Python",
    "PythonDispatcher",
)


def _graph_outputs(graph_module: torch.fx.GraphModule) -> list[Any]:
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    return list(output.args[0])


def _host_example(value: torch.Tensor) -> torch.Tensor:
    return torch.empty(value.shape, dtype=value.dtype)


class _Written:
    """Marks the leaves of written arguments, to find their positions among the flattened arguments."""


def _written_positions(
    op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], flat: list[Any], spec: Any
) -> list[int]:
    """Positions in `flat` of the tensors the op writes, in schema order (found by position in the schema, not by
    identity: `x.mul_(y)` on a view may arrive as `mul.out(x, y, out=x)`, one tensor read and written)."""
    marked_args, marked_kwargs = list(args), dict(kwargs)
    order: list[int] = []
    for index, argument in enumerate(op._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        if argument.name in kwargs:
            marked_kwargs[argument.name] = tree_map_only(torch.Tensor, lambda _: _Written(), kwargs[argument.name])
        elif index < len(args):
            marked_args[index] = tree_map_only(torch.Tensor, lambda _: _Written(), args[index])
    marked, marked_spec = tree_flatten((tuple(marked_args), marked_kwargs))
    assert marked_spec == spec, "marking written arguments changed the argument structure"
    order = [position for position, value in enumerate(marked) if isinstance(value, _Written)]
    return order


def _run_program(
    program: _Program, facts: _OpFacts, args: tuple[Any, ...], kwargs: dict[str, Any], flat: list[Any]
) -> Any:
    alone = _check_overlap(program, flat, facts.name) if program.written_positions else []
    written = [flat[p] for p in program.written_positions]
    fresh_tensors: dict[int, torch.Tensor] = {}
    into: list[np.ndarray | None] = []
    # a constant program outside a region (the gradient of `loss.backward()` before a compiled backward graph):
    # replayed from its first run, which runs alone to keep its outputs; inside a region it is recorded, where
    # the region's program computes it on chip
    constant = program.constant and program.deferrable and not region.pending_ops()
    if constant and program.memo is not None and _replay(program, facts.name, written):
        return _results(program, facts, args, kwargs, fresh_tensors, program.memo)
    if program.deferrable and not constant and region.enabled():
        targets = _region_targets(program, written)
        if targets is not None and region.record(
            program, facts.name, [flat[p] for p in program.tensor_positions], targets, len(written)
        ):
            returned = facts.returned_arguments
            if len(returned) == 1 and returned[0] is None and not program.absent_returns and not program.list_returns:
                return targets[len(program.written_positions)][0]  # one fresh result (`_results`' first case)
            fresh_tensors = {position: tensor for position, (tensor, _) in enumerate(targets)}
            return _results(program, facts, args, kwargs, fresh_tensors, [])
    if program.layouts is not None:
        into = _destinations(program, written, alone, fresh_tensors)
    storage.observe()  # recorded ops run first: they may write this op's operands
    outputs = _simulate(program, flat, into)
    if program.runs_arrays and program.layouts is None:
        program.layouts = _layouts(program, outputs)
    if constant and program.memo is None:
        program.memo = [np.array(value, copy=True) for value in outputs]
    profile = getattr(program.compiled, "last_profile", None)
    simulated_ns = float(profile.total_ns) if profile is not None else 0.0
    streams.current_stream().add_run(simulated_ns)
    sources.record(facts.name, simulated_ns)
    for index, (tensor, value) in enumerate(zip(written, outputs, strict=False)):
        if index in fresh_tensors:
            continue  # written in place by the simulator
        if tensor.shape != value.shape:  # an out= tensor of another size is resized, as `resize_output` does
            if tensor.numel() != 0:
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape {list(tensor.shape)}, "
                    f"which does not match the required output shape {list(value.shape)}. This behavior is "
                    "deprecated, and in a future PyTorch release outputs will not be resized unless they have zero "
                    "elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                    "with t.resize_(0).",
                    stacklevel=2,
                )
            storage.resize(tensor, value.shape)
        _write(tensor, value)
    return _results(program, facts, args, kwargs, fresh_tensors, outputs)


def _run_bounded(
    program: _Program, facts: _OpFacts, args: tuple[Any, ...], kwargs: dict[str, Any], flat: list[Any]
) -> Any:
    """A data-dependent op's run (`bounded`): the program's outputs at their bound, the count read by the host
    once the program has run (a synchronisation, as the count's `.item()` would be), the results cut to it."""
    assert program.bounded is not None
    if program.deferrable and program.results is not None and region.enabled():
        # an op of the pending region like any other: its program computes the results at their bound and the
        # count with the ops before it; the count's read runs the region, and the host cuts the results
        padded = _run_program(program, _bounded_facts(facts, program), args, kwargs, flat)
        if isinstance(padded, torch.Tensor):
            padded = (padded,)  # the count alone (a 0-d tensor's nonzero)
        count = int(padded[-1].item())
        outputs = [_array_of(tensor) for tensor in padded[:-1]]
    else:
        storage.observe()  # recorded ops run first: they may write this op's operands
        outputs = _simulate(
            program, flat, [None] * len(program.compiled.program.outputs) if program.runs_arrays else []
        )
        profile = getattr(program.compiled, "last_profile", None)
        simulated_ns = float(profile.total_ns) if profile is not None else 0.0
        streams.current_stream().add_run(simulated_ns)
        sources.record(facts.name, simulated_ns)
        count = int(np.asarray(outputs[-1]).reshape(()))
        outputs = outputs[:-1]
    return _fresh_results(facts, program.bounded.cut(outputs, count, args, kwargs))


_padded_facts: dict[tuple[int, int], _OpFacts] = {}


def _bounded_facts(facts: _OpFacts, program: _Program) -> _OpFacts:
    """The facts of a data-dependent op's program as an op of its own: as many fresh results as the program has
    outputs (the results at their bound, the count), under the op's name."""
    outputs = len(program.results or ())
    found = _padded_facts.get((id(facts.op), outputs))
    if found is None:
        found = _padded_facts[(id(facts.op), outputs)] = _OpFacts(facts.name, [None] * outputs, facts.op)
    return found


def _array_of(tensor: torch.Tensor) -> np.ndarray:
    """A device tensor's values, which no op is pending on, as an array."""
    array = storage.dense_array(tensor)
    return array if array is not None else to_numpy(storage.host_alias(tensor))


def _fresh_results(facts: _OpFacts, values: list[np.ndarray]) -> Any:
    """An op's fresh results (no written arguments) as new device tensors holding `values`."""
    results = [storage.from_array(np.ascontiguousarray(value)) for value in values]
    return results[0] if len(facts.returned_arguments) == 1 else tuple(results)


def _replay(program: _Program, name: str, written: list[torch.Tensor]) -> bool:
    """A constant program's run from its kept outputs (`_Program.memo`): its written tensors receive them, its
    simulated time goes on the stream and to the op's line, and its profile counts a run, as a run of it would
    leave them (fresh results are made from the kept outputs by `_results`). False, with nothing done, when a
    written tensor is not of its output's shape (an out= tensor the run would resize)."""
    outputs = program.memo
    assert outputs is not None
    if any(tensor.shape != value.shape for tensor, value in zip(written, outputs, strict=False)):
        return False
    for tensor, value in zip(written, outputs, strict=False):
        _write(tensor, value)
    _account_replay(program, name)
    return True


def _account_replay(program: _Program, name: str, line: str | None = None) -> None:
    """What a replayed run of a constant program leaves besides its outputs: its simulated time on the stream and
    the op's line (`line`, when the caller found it already), and a run of its profile."""
    compiled = program.compiled
    profile = compiled.last_profile
    simulated_ns = float(profile.total_ns)
    streams.current_stream().add_run(simulated_ns)
    sources.record(name, simulated_ns, line=line)
    stats.record_run(compiled.name, profile)


_FILL = torch.ops.aten.fill_.Scalar
_FILL_NAME = str(_FILL)


def _replay_fill(program: _Program) -> bool:
    """The native `fill_.Scalar` kernel's call before it writes a kept fill (`kept_fill`) into a contiguous
    tensor: the replay's accounting, as `_run` and `_replay` do it, when the fill may replay now (the device's
    eager mode compiles and no deferred region is pending, in which it would be recorded); else False, nothing
    done, and the kernel takes the Python path."""
    if _mode() == "host" or region.pending_ops():
        return False
    # the issuing frame is this function's caller (or above the frame a device kernel running this fill marked), so
    # the walk from here finds the user's line without marking a frame (`sources.entered`)
    line = sources.user_line()
    EAGER_STATS.native_ops[_FILL_NAME] += 1
    _account_replay(program, _FILL_NAME, line)
    return True


# the native fill kernel calls it from C++, while eager code that a compiled function runs may be running
hide_from_dynamo(_replay_fill)


def kept_fill(tensor: torch.Tensor, value: Any) -> tuple[Callable[[], bool], np.ndarray] | None:
    """After `fill_(tensor, value)` ran by the Python path: the replay's accounting (`_replay_fill` of its program)
    and its kept output when the program is a constant one with an output of `tensor`'s shape and dtype kept
    (`_Program.memo`), which the native kernel then writes itself on later calls of the signature; else None."""
    flat = [tensor, value]
    try:
        key = _signature(_facts(_FILL), (tensor, value), {}, flat)
    except RuntimeError:
        return None
    program = _programs.get(key) if key is not None else None
    if not isinstance(program, _Program) or not (program.constant and program.deferrable) or program.memo is None:
        return None
    if len(program.memo) != 1 or program.written_positions != [0]:
        return None
    memo = program.memo[0]
    from neuron_mlir.frontend.tensors import numpy_dtype

    if memo.shape != tuple(tensor.shape) or memo.dtype != np.dtype(numpy_dtype(tensor.dtype)):
        return None
    return functools.partial(_replay_fill, program), memo


def _results(
    program: _Program,
    facts: _OpFacts,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    fresh_tensors: dict[int, torch.Tensor],
    outputs: list[np.ndarray],
) -> Any:
    """The op's returns: written arguments as themselves, fresh results as the device tensors `fresh_tensors`
    holds by graph output (the simulator wrote them) or new ones holding `outputs`' arrays."""
    returned = facts.returned_arguments
    if len(returned) == 1 and returned[0] is None and not program.absent_returns and not program.list_returns:
        return _fresh_result(len(program.written_positions), fresh_tensors, outputs)  # one fresh result
    fresh = itertools.count(len(program.written_positions))
    results: list[torch.Tensor | list[torch.Tensor] | None] = []
    for index, source in enumerate(facts.returned_arguments):
        if index in program.absent_returns:
            results.append(None)
        elif index in program.list_returns:
            results.append(
                [_fresh_result(next(fresh), fresh_tensors, outputs) for _ in range(program.list_returns[index])]
            )
        elif source is None:
            results.append(_fresh_result(next(fresh), fresh_tensors, outputs))
        else:
            name, position = source
            results.append(kwargs[name] if name in kwargs else args[position])
    if not results:
        return None
    return results[0] if len(results) == 1 else tuple(results)


def _fresh_result(position: int, fresh_tensors: dict[int, torch.Tensor], outputs: list[np.ndarray]) -> torch.Tensor:
    """Graph output `position` as a device tensor: the one the simulator wrote, or a new one holding its array."""
    tensor = fresh_tensors.get(position)
    return storage.from_array(outputs[position]) if tensor is None else tensor


# Ops whose every element written gets the same value whatever the order, which PyTorch lets write a tensor whose
# elements share memory (`x.expand(2, 3).fill_(5)`: ATen's scalar fill turns its overlap check off; a fill from a
# tensor keeps it)
_IDEMPOTENT_WRITES = frozenset({"aten.fill_.Scalar", "aten.zero_.default"})
# the native hooks' `native.overlap_alone()` (None without them)
_native_overlap_alone: Callable[..., list[bool] | None] | None = native.overlap_alone()


def _check_overlap(program: _Program, flat: list[Any], name: str) -> list[bool]:
    """PyTorch's checks before a write (TensorIterator's): no written tensor whose elements share memory (an
    expanded tensor; but see `_IDEMPOTENT_WRITES`), and none that partly overlaps an operand it reads; both dense,
    as PyTorch decides them. A program reads every operand before it writes, so a full overlap (`x.add_(x)`) is
    safe.

    Returns, per written tensor, whether it is the only operand over its storage (`_destinations`)."""
    native = _native_overlap_alone
    if native is not None:
        # the common call, every written tensor contiguous and alone over its storage, told in one native call (a
        # foreach op over a model's parameters writes dozens of tensors)
        answered = native(flat, program.tensor_positions, program.written_positions)
        if answered is not None:
            return answered
    if len(program.tensor_positions) == 1:  # the written tensor alone (`fill_`, `zero_`, `relu_`): no other operand
        if name not in _IDEMPOTENT_WRITES:
            _check_internal_overlap(flat[program.written_positions[0]])
        return [True]
    # only tensors over one storage can overlap: the pairs are looked for per storage (a foreach op over a
    # model's parameters writes dozens of tensors, each read beside dozens of others); a storage is told by its
    # device (the device's, or a CPU scalar's) and address
    by_storage: dict[tuple[bool, int], list[torch.Tensor]] = {}
    for position in program.tensor_positions:
        operand = flat[position]
        by_storage.setdefault((operand.is_cpu, operand.untyped_storage().data_ptr()), []).append(operand)
    alone: list[bool] = []
    for position in program.written_positions:
        written = flat[position]
        if name not in _IDEMPOTENT_WRITES:
            _check_internal_overlap(written)
        others = by_storage[(written.is_cpu, written.untyped_storage().data_ptr())]
        # the written tensor counts once: passed again, or another view of its storage, it is not alone
        alone.append(len(others) == 1)
        for other in others:
            # the written tensor itself, passed again (`mul.out(x, y, out=x)`), overlaps it fully: safe
            if other is not written and _partly_overlap(written, other):
                raise RuntimeError(
                    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                    "single memory location. Please clone() the tensor before performing the operation."
                )
    return alone


def _check_internal_overlap(written: torch.Tensor) -> None:
    if written.is_contiguous():
        return  # non-overlapping and dense, as PyTorch's check says first
    # PyTorch's sure case of internal overlap: a dimension of stride 0 (others are too hard to tell)
    if any(stride == 0 and size > 1 for size, stride in zip(written.shape, written.stride(), strict=True)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation."
        )


def _partly_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    if (
        a.numel() == 0
        or b.numel() == 0
        or not (dispatch._non_overlapping_and_dense(a) and dispatch._non_overlapping_and_dense(b))
    ):
        return False
    a_begin, b_begin = a.data_ptr(), b.data_ptr()
    a_end, b_end = a_begin + a.numel() * a.element_size(), b_begin + b.numel() * b.element_size()
    if (a_begin, a_end) == (b_begin, b_end):
        return a.stride() != b.stride()
    return a_begin < b_end and b_begin < a_end


def _layouts(program: _Program, outputs: list[np.ndarray]) -> list[tuple[int, tuple[int, ...], np.dtype] | None]:
    """`_Program.layouts` from a run's outputs (those of the traced graph)."""
    indices = program.compiled.signature.outputs
    uses = Counter(indices)
    return [
        (index, tuple(value.shape), value.dtype)
        if index is not None and uses[index] == 1 and isinstance(value, np.ndarray)
        else None
        for index, value in zip(indices, outputs, strict=True)
    ]


def _region_targets(program: _Program, written: list[torch.Tensor]) -> list[tuple[torch.Tensor, np.ndarray]] | None:
    """Per output of the traced graph, the device tensor a deferred region stores it to and the array over its
    bytes: a written tensor itself when it is of the result's shape and dtype and dense in some order of its
    dimensions (a strided array over its bytes, then), else new device memory; None when some output has no such
    place (the op then runs alone). Unlike a run's own destinations, a written tensor passed again as an operand
    qualifies: the region reads its operands before it writes."""
    results = program.results
    if results is None:
        return None
    places: list[np.ndarray] = []
    for position, (shape, dtype) in enumerate(results[: len(written)]):
        tensor = written[position]
        if tensor.shape != shape:
            # an empty out= tensor is resized to its result, as the op alone does (`arange(..., out=)`), here
            # without running the region when the region does not write its storage (whose bytes a resize keeps)
            if tensor.numel() != 0 or not region.settled(tensor):
                return None
            storage.resize(tensor, shape, observed=False)
        target = storage.dense_array(tensor)
        if target is None:
            target = region.permuted_array(tensor)
        if target is None or target.dtype != dtype:
            return None
        places.append(target)
    targets: list[tuple[torch.Tensor, np.ndarray]] = list(zip(written, places, strict=True))
    fresh = program.fresh_layouts
    if fresh is None:
        fresh = program.fresh_layouts = [(shape, torch_dtype(dtype), dtype) for shape, dtype in results[len(written) :]]
    if fresh:
        targets += storage.empty_arrays(fresh)
    return targets


def _destinations(
    program: _Program, written: list[torch.Tensor], alone: list[bool], tensors: dict[int, torch.Tensor]
) -> list[np.ndarray | None]:
    """Per program output, the device memory the simulator is to write it to (None: an array of its own): a
    written tensor's own bytes when it is contiguous, of the result's shape and dtype, and `alone` says it shares
    its storage with no other operand (whose value a later output might read from it); new device memory for a
    fresh result. `tensors` receives, per output of the traced graph so served, the device tensor it is."""
    assert program.layouts is not None
    into: list[np.ndarray | None] = [None] * len(program.compiled.program.outputs)
    for position, layout in enumerate(program.layouts):
        if layout is None:
            continue
        index, shape, dtype = layout
        if position < len(written):
            tensor = written[position]
            if tensor.shape != shape or not alone[position]:
                continue
            target = storage.dense_array(tensor)
            if target is None or target.dtype != dtype:
                continue
            tensors[position], into[index] = tensor, target
        else:
            tensors[position], into[index] = storage.empty_array(shape, dtype)
    return into


def _simulate(program: _Program, flat: list[Any], into: list[np.ndarray | None]) -> list[np.ndarray]:
    """The program's outputs for the operands in `flat`, as NumPy arrays: dense device operands reach the
    simulator as arrays over the device bytes themselves, without a torch tensor in between; outputs `into` gives
    memory for are written there."""
    compiled = program.compiled
    if program.runs_arrays:
        signature = compiled.signature
        arrays = [_operand_array(flat[p]) for p in program.tensor_positions]
        return list(signature.results(compiled.run_arrays(signature.arguments(arrays), None, into)))
    return [to_numpy(o) for o in compiled([_host_operand(flat[p]) for p in program.tensor_positions])]


def _operand_array(value: torch.Tensor) -> np.ndarray:
    if not value.is_cpu:
        array = storage.dense_array(value)
        if array is not None:
            return array
    return to_numpy(value)  # a strided device operand gathered dense, or a CPU scalar tensor


def _write(tensor: torch.Tensor, value: np.ndarray) -> None:
    """Store a program's output `value` into device tensor `tensor` (of its shape), in `tensor`'s own strides."""
    if not tensor.is_contiguous() and any(
        stride == 0 and size > 1 for size, stride in zip(tensor.shape, tensor.stride(), strict=True)
    ):
        # an idempotent write into an expanded tensor (`_IDEMPOTENT_WRITES`): its elements along a stride-0
        # dimension are one memory location and all equal, so the first of each stands for the rest
        first = tuple(slice(0, 1) if stride == 0 else slice(None) for stride in tensor.stride())
        tensor, value = tensor[first], value[first]
    target = storage.dense_array(tensor)
    if target is not None and target.dtype == value.dtype:
        np.copyto(target, value)
    else:
        storage.host_alias(tensor).copy_(from_numpy(value))


def _host_operand(value: torch.Tensor) -> torch.Tensor:
    return storage.host_alias(value) if storage.on_device(value) else value


def _refused(op_name: str, reason: str) -> None:
    if _strict():
        raise DeviceFallbackError(f"neuron-mlir (strict): {reason}; the op would run on the host" + _where(" (at {})"))
    if op_name in _warned:
        return
    _warned.add(op_name)
    warnings.warn(
        f"neuron-mlir: {reason}; it runs on the host with copies" + _where(" (first seen at {})"), stacklevel=2
    )


def _where(template: str) -> str:
    """The user's source line that issued the current op (`sources.user_line`), in `template`; '' if none."""
    line = sources.user_line()
    return template.format(line) if line else ""


def host_reasons() -> dict[str, str]:
    """Why ops went to the host, by op name: the first refusal of each op's single-op programs."""
    reasons: dict[str, str] = {}
    for key, entry in _programs.items():
        if isinstance(entry, _Refusal):
            reasons.setdefault(key[0].name, entry.reason)
    return reasons


def reset() -> None:
    """Forget the compiled programs, the counts, the time per op and line, and which ops were warned about."""
    region.reset()
    _programs.clear()
    from neuron_mlir.frontend.device import native

    native.forget_fills()  # the native fill kernel's kept programs go with them
    _warned.clear()
    sources.reset()
    EAGER_STATS.__init__()  # type: ignore[misc]
    for counter in streams.transfers:
        streams.transfers[counter] = 0


__all__ = ["EAGER_STATS", "DeviceFallbackError", "host_reasons", "reset", "run"]
