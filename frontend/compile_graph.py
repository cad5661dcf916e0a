"""Compile one AOTAutograd graph: import, lower, pack into a program, and wrap it as a callable.

Which nodes the NeuronCore runs is decided once, before compiling: a node without a torch-dialect op or a
lowering, on a dtype without storage, or sent to the CPU by `cpu_ops`, is found on the FX graph; the others are
imported and each op asked for its legality (`convert_torch_to_tile.legality`). The graph is then partitioned once
around the nodes that run on the CPU and each region compiled once. A compile that fails after that (a lowering
that raises on an op declared legal) is an error in strict and non-strict mode alike, never a silent fallback.
A call of an NKI kernel registered as a torch op (`neuron_mlir.as_torch_op`) is one `torch.nki_kernel` op whose
kernel's instructions the compiler inlines into the program; where the kernel does not trace for the call (its
legality), the graph is partitioned around it the same way, but it is no fallback: it runs as the kernel's own
program on the simulated core, so strict mode accepts it.
Under the `fallback_random` option a graph's random nodes are first lifted into inputs that the host draws by
torch at every call (`frontend.fallback_random`; a draw of values the graph computes cuts it into regions there),
and the graph without them is compiled as any other.
A graph with data-dependent sizes (`frontend.data_dependent`) is partitioned around its host nodes too (reads of
a count from a tensor, arithmetic on it, views cutting a buffer to it); a region whose inputs have such sizes is
compiled at its calls, once per set of sizes it meets, and an op its sizes rule out is an error naming it.

The callable converts its torch inputs to NumPy, runs the program on the simulated NeuronCore, and returns
torch tensors in the graph's output order (None where the graph returns None). The program is validated once,
when it is compiled or read back from the compile cache, not on every call. The cache is asked first, by the FX
graph's key (`frontend.cache`): a hit needs neither the import to IR nor the lowering package (not even for the
check for unsupported ops: a graph cached whole compiled whole). The profile of its latest run
is kept for `neuron_mlir.profiles()`. With a debug directory, each graph writes `fx_graph.py`, the IR after
every stage (`<n>_<stage>.mlir`, with locations, each reproducible with the `neuron-opt` command in
`reproduce.sh`), `program.bundle` and, after each run, `trace.json`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.printer import Printer

from neuron_mlir.frontend import stats as stats_module
from neuron_mlir.frontend.cache import cache_key, compile_cache  # every compile looks up the cache first
from neuron_mlir.frontend.fx_importer import (
    SIZE_ASSERTIONS,
    GraphSignature,
    describe_node,
    import_fx_graph,
    is_host_checked,
    is_shape_arithmetic,
    node_location,
)
from neuron_mlir.frontend.progress import CompileProgress, compile_progress
from neuron_mlir.frontend.tensors import from_numpy, to_numpy, torch_dtype
from neuron_mlir.ir.locations import describe_location
from neuron_mlir.runtime import heap
from neuron_mlir.runtime.collectives import COLLECTIVES

if TYPE_CHECKING:
    from neuron_mlir.frontend.backend import CompileOptions
    from neuron_mlir.runtime.validate import ValidatedProgram

logger = logging.getLogger("neuron_mlir")
_graph_counter = itertools.count()


class NeuronCompileError(RuntimeError):
    """A compile failure: names the stage, the op and the user's source line, and how to reproduce it."""


def ir_text(module: ModuleOp) -> str:
    """The module in custom syntax with source locations (so a dump re-parses with its locations)."""
    stream = StringIO()
    _Printer(stream=stream, print_debuginfo=True).print_op(module)
    return stream.getvalue() + "\n"


# xDSL's escaping of one byte in a bytes literal (constants' data), by byte value
_BYTE_TEXT = [
    "\\\\" if byte == 0x5C else f"\\{byte:02X}" if byte < 0x20 or byte > 0x7E or byte == 0x22 else chr(byte)
    for byte in range(256)
]


class _Printer(Printer):
    """xDSL's printer, with bytes literals written in one piece: the same text, without a Python call per byte
    (printing constants' bytes took half the time of printing a graph, which every compile-cache lookup does)."""

    def print_bytes_literal(self, bytestring: bytes) -> None:
        self.print_string('"' + "".join([_BYTE_TEXT[byte] for byte in bytestring]) + '"')


def unsupported_nodes(graph_module: torch.fx.GraphModule, cpu_ops: Sequence[str] = ()) -> list[torch.fx.Node]:
    """The nodes whose ATen op has no lowering yet, or that the user asked to run on the CPU (`cpu_ops`)."""
    import operator

    from neuron_mlir.ir.dialects.torch import op_class_for
    from neuron_mlir.lowering.convert_torch_to_tile import is_lowerable

    found = []
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem or is_shape_arithmetic(node):
            continue
        if is_host_checked(node) or str(node.target) in SIZE_ASSERTIONS:
            continue
        if _is_nki_kernel(node):  # inlined into the program where its kernel traces (its op's legality)
            continue
        op_class = op_class_for(str(node.target))
        forced = names_op(str(node.target), cpu_ops)
        if forced or op_class is None or not is_lowerable(op_class.name) or not _storable(node):
            found.append(node)
    return found


def _is_nki_kernel(node: torch.fx.Node) -> bool:
    """Whether the node calls an NKI kernel registered as a torch op (`neuron_mlir.as_torch_op`)."""
    nki_ops = sys.modules.get("neuron_mlir.frontend.nki_ops")  # no kernel op exists before that module is loaded
    return nki_ops is not None and nki_ops.kernel_op_of(node.target) is not None


def names_op(target: str, patterns: Sequence[str]) -> bool:
    """`aten.cumsum.default` matches "aten.cumsum", "aten.cumsum.default" and "cumsum"."""
    bare = target.removeprefix("aten.")
    packet = bare.removesuffix(".default").split(".")[0]
    return any(p.removeprefix("aten.") in (bare, packet, bare.removesuffix(".default")) for p in patterns)


# dtypes a NeuronCore has no storage type for, and why: its engines compute in FP32 at most and have no complex
# arithmetic, so nodes on these dtypes stay on the CPU
_UNSTORABLE = {
    torch.float64: "no fp64 engine datapath",
    # complex32 and complex64 values are carried as real pairs (`complex_pairs`): what remains has a reason there
    torch.complex32: "no complex arithmetic on its engines",
    torch.complex64: "no complex arithmetic on its engines",
    torch.complex128: "no fp64 engine datapath for its float64 halves",
}


def _unstorable_dtype(node: torch.fx.Node) -> torch.dtype | None:
    """The first dtype of a tensor the node reads or produces that has no NeuronCore element type, if any."""
    import torch.utils._pytree as pytree

    values = [node.meta.get("val")] + [arg.meta.get("val") for arg in node.all_input_nodes]
    tensors = [v for v in pytree.tree_leaves(values) if isinstance(v, torch.Tensor)]
    return next((t.dtype for t in tensors if t.dtype in _UNSTORABLE), None)


def _storable(node: torch.fx.Node) -> bool:
    """Whether every tensor the node reads or produces has a NeuronCore element type."""
    return _unstorable_dtype(node) is None


def fallback_reason(node: torch.fx.Node, cpu_ops: Sequence[str] = (), illegal: dict[str, str] | None = None) -> str:
    """Why an unsupported node runs on the CPU, naming its op, by the first cause that applies: the user asked
    for it, its op's legality rules these arguments out (`illegal`: FX node name -> the rule broken), a dtype the
    core cannot hold, or an op without any lowering."""
    from neuron_mlir.ir.dialects.torch import op_class_for
    from neuron_mlir.lowering.convert_torch_to_tile import is_lowerable

    op_name = str(node.target)
    if names_op(op_name, cpu_ops):
        return f"{op_name} is sent to the CPU by the cpu_ops option"
    if illegal and node.name in illegal:
        return f"{op_name} cannot be lowered here ({illegal[node.name]})"
    from neuron_mlir.frontend.complex_pairs import REFUSAL

    if REFUSAL in node.meta:  # a complex node that could not be carried as real pairs
        rest = node.meta[REFUSAL]
        return f"{op_name}{rest}" if rest.startswith(":") else f"{op_name} {rest}"
    from neuron_mlir.frontend.scaled_matmul import refusal

    refused = refusal(node)
    if refused is not None:
        return f"{op_name} cannot be lowered here ({refused})"
    op_class = op_class_for(op_name)
    dtype = _unstorable_dtype(node)
    if dtype is not None and op_class is not None and is_lowerable(op_class.name):
        dtype_name = str(dtype).removeprefix("torch.")
        return f"{op_name}: {dtype_name} is not supported on the NeuronCore ({_UNSTORABLE[dtype]})"
    return f"{op_name} has no NeuronCore lowering yet"


def reset_graph_names() -> None:
    """Start numbering graphs from 0 again (after torch._dynamo.reset(), names cannot clash)."""
    global _graph_counter
    _graph_counter = itertools.count()


def compile_graph(
    graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any], options: CompileOptions, kind: str
) -> Callable[[list[Any]], list[Any]]:
    """The boxed callable that runs `graph_module` on the simulated NeuronCore (partitioned if it must be).

    Nodes the NeuronCore does not run (module docstring) run on the CPU between compiled regions; in strict mode
    they are an error listing each with its reason.
    """
    if options.fallback_random:
        from neuron_mlir.frontend.fallback_random import FallbackRandomError, compile_with_host_draws

        try:
            # random ops drawn on the host, their results inputs (or the graph cut before draws of its values)
            compiled = compile_with_host_draws(
                graph_module,
                lambda lifted: _compile_graph_module(lifted, options, kind),
                lambda region: compile_graph(region, (), options, kind),
            )
        except FallbackRandomError as error:
            raise NeuronCompileError(str(error)) from None
        if compiled is not None:
            return compiled
    return _compile_graph_module(graph_module, options, kind)


def _compile_graph_module(
    graph_module: torch.fx.GraphModule, options: CompileOptions, kind: str
) -> Callable[[list[Any]], list[Any]]:
    from neuron_mlir.frontend.complex_pairs import complex_as_pairs, has_complex_values, has_symbolic_sizes

    if has_complex_values(graph_module) and has_symbolic_sizes(graph_module):
        return ComplexGraphPerSizes(graph_module, options, kind)
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # AOTAutograd calls its compilers inside its fake-tensor mode; the compile itself computes with real tensors
    # (constant folding evaluates ATen ops on constants, and reads their values)
    with heap.compiling(), unset_fake_temporarily():  # heap: the collector kept off the older heap meanwhile
        from neuron_mlir.frontend.narrow_float64 import narrow_float64

        narrow_float64(graph_module)  # float64 scalar steps that fp32 computes exactly (fp8 scales)
        rewritten = complex_as_pairs(graph_module)  # complex values become real pairs
        if rewritten is None:
            return _compile_graph(graph_module, options, kind)
        pairs_module, boundary = rewritten
        return boundary.wrap(_compile_graph(pairs_module, options, kind))


def _compile_graph(
    graph_module: torch.fx.GraphModule, options: CompileOptions, kind: str, name: str | None = None
) -> Callable[[list[Any]], list[Any]]:
    name = name or f"graph{next(_graph_counter)}_{kind}"
    debug_dir = Path(options.debug_dir) / name if options.debug_dir else None
    if debug_dir is not None:
        debug_dir.mkdir(parents=True, exist_ok=True)
        (debug_dir / "fx_graph.py").write_text(graph_module.print_readable(print_output=False))
    from neuron_mlir.frontend.data_dependent import has_unbacked_inputs, host_nodes

    host = host_nodes(graph_module)
    if host or has_unbacked_inputs(graph_module):
        return _compile_around_host_nodes(graph_module, name, options, kind, debug_dir, host)
    bucketed = _bucketed(graph_module, options, name, debug_dir)
    if bucketed is not None:
        return bucketed
    # A graph found whole in the compile cache compiled whole with this very compiler (the key holds its
    # fingerprint): every node was legal, so the legality check (which imports the graph and the lowering
    # package) can wait for a miss. Nodes the user sends to the CPU (`cpu_ops`) are the exception.
    looked_up: _Lookup | None = None
    if not any(_is_forced_to_cpu(node, options.cpu_ops) for node in graph_module.graph.nodes):
        started = time.perf_counter()
        looked_up = _look_up(graph_module, options, debug_dir)
        if looked_up.hit is not None:
            return _wrap_cached(graph_module, name, options, looked_up, started)
        stats_module.record_compile_seconds(time.perf_counter() - started)
    missing = unsupported_nodes(graph_module, options.cpu_ops)
    (imported, imported_text), illegal = _legality(graph_module, options, missing)
    missing += [node for node in graph_module.graph.nodes if node.name in illegal and node not in missing]
    if not missing:
        return _compile_whole(graph_module, name, options, debug_dir, looked_up, imported)
    # NKI kernel ops that cannot be inlined run between the compiled regions as the kernel's own simulated
    # program: not a fallback
    kernels = [node for node in missing if _is_nki_kernel(node)]
    on_cpu = [node for node in missing if node not in kernels]
    if on_cpu:
        _report_fallback(on_cpu, options, name, illegal, imported_text if illegal else None, debug_dir)
    unsupported = {node.name for node in missing}
    regions: list[str] = []

    def compile_region(region: torch.fx.GraphModule, submodule: str) -> Callable[[list[Any]], list[Any]]:
        region_name = f"{name}_{submodule}"
        regions.append(region_name)
        region_dir = debug_dir / submodule if debug_dir is not None else None
        if region_dir is not None:
            region_dir.mkdir(parents=True, exist_ok=True)
        bucketed = _bucketed(region, options, region_name, region_dir, legal=True)
        if bucketed is not None:
            return bucketed
        return _compile_whole(region, region_name, options, region_dir)

    run, count = _run_partitioned(graph_module, lambda node: node.name not in unsupported, compile_region, debug_dir)
    logger.info("%s: %d region(s), %d kernel op(s), %d CPU node(s)", name, count, len(kernels), len(on_cpu))
    return run


def _bucketed(
    graph_module: torch.fx.GraphModule,
    options: CompileOptions,
    name: str,
    debug_dir: Path | None,
    legal: bool = False,
) -> Any:
    """A graph with symbolic sizes whose every node the core runs, as one program per size bucket
    (`frontend.size_buckets`); None for any other graph (static, partitioned, on the `neuron` device, or one
    whose padding the bucketing cannot keep out of its results: compiled once per size). `legal`: every node
    is known to lower (a region of a partitioned graph). `debug_dir`: the graph's debug directory, where each
    program gets a directory of its own."""
    from neuron_mlir.frontend.complex_pairs import has_symbolic_sizes

    if not options.size_buckets or not has_symbolic_sizes(graph_module) or _device_outputs(graph_module) is not None:
        return None
    from neuron_mlir.frontend.size_buckets import bucketed_graph

    if not legal and unsupported_nodes(graph_module, options.cpu_ops):
        return None
    bucketed = bucketed_graph(graph_module, options, name, debug_dir)
    # the legality check imports the graph: only for a plan that will be used
    if bucketed is None or (not legal and _legality(graph_module, options, [])[1]):
        return None
    return bucketed


def _compile_around_host_nodes(
    graph_module: torch.fx.GraphModule,
    name: str,
    options: CompileOptions,
    kind: str,
    debug_dir: Path | None,
    host: set[torch.fx.Node],
) -> Callable[[list[Any]], list[Any]]:
    """A graph with data-dependent sizes (`frontend.data_dependent`): partitioned around its host nodes (reads
    of a count, arithmetic on it, the views cutting a buffer to it) and the nodes the core cannot run. A region
    whose inputs have sizes known only at its call is compiled at each call for the sizes it meets (and kept for
    them); the others are compiled now, as any graph is."""
    missing = [node for node in unsupported_nodes(graph_module, options.cpu_ops) if node not in host]
    if missing:
        _report_fallback(missing, options, name, {}, None, debug_dir)
    if not host and not missing:
        return ShapeSpecialisedGraph(graph_module, None, options, name, debug_dir=debug_dir)
    off_core = {node.name for node in missing} | {node.name for node in host}

    from neuron_mlir.frontend.data_dependent import has_unbacked_inputs

    def compile_region(region: torch.fx.GraphModule, submodule: str) -> Callable[[list[Any]], list[Any]]:
        region_name = f"{name}_{submodule}"
        if has_unbacked_inputs(region):
            region_dir = debug_dir / submodule if debug_dir is not None else None
            return ShapeSpecialisedGraph(region, None, options, region_name, debug_dir=region_dir)
        return _compile_graph(region, options, kind, region_name)

    run, count = _run_partitioned(graph_module, lambda node: node.name not in off_core, compile_region, debug_dir)
    logger.info("%s: %d region(s), %d node(s) on the host, %d on the CPU", name, count, len(host), len(missing))
    return run


def _run_partitioned(
    graph_module: torch.fx.GraphModule,
    on_core: Callable[[torch.fx.Node], bool],
    compile_region: Callable[[torch.fx.GraphModule, str], Callable[[list[Any]], list[Any]]],
    debug_dir: Path | None,
) -> tuple[Callable[[list[Any]], list[Any]], int]:
    """The graph split into regions of the nodes `on_core` (each compiled by `compile_region`) and the nodes
    between them, which run as they are; the callable runs the whole, and the count is the regions'."""
    from neuron_mlir.frontend.partition import boxed_call, partition

    outer, count = partition(graph_module, on_core, compile_region)
    if debug_dir is not None:
        (debug_dir / "partitioned_graph.py").write_text(outer.print_readable(print_output=False))
    return boxed_call(outer), count


_Imported = tuple[ModuleOp, GraphSignature]


def _legality(
    graph_module: torch.fx.GraphModule, options: CompileOptions, cpu_nodes: list[torch.fx.Node]
) -> tuple[tuple[_Imported | None, str], dict[str, str]]:
    """Ask the legality of every op of the graph, once, on its import with `cpu_nodes` as arguments.

    Returns ((the import, to compile when no node runs on the CPU; its text), FX node name -> why the NeuronCore
    does not lower that node's op)."""
    from neuron_mlir.frontend.fx_importer import ssa_name
    from neuron_mlir.lowering.convert_torch_to_tile import legality

    module, signature = import_fx_graph(
        graph_module,
        options.target,
        cpu_nodes=cpu_nodes,
        auto_cast=options.auto_cast,
        stochastic_rounding=options.stochastic_rounding,
    )
    text = ir_text(module)
    nodes = {ssa_name(node.name): node for node in graph_module.graph.nodes if node.op == "call_function"}
    illegal: dict[str, str] = {}
    for op in module.walk():
        if not op.name.startswith("torch.") or (reason := legality(op)) is None:
            continue
        node = _node_of(op, nodes)
        if node is not None:
            illegal.setdefault(node.name, reason)
    return ((None if cpu_nodes else (module, signature)), text), illegal


def _node_of(op: Operation, nodes: dict[str | None, torch.fx.Node]) -> torch.fx.Node | None:
    """The FX node an imported op comes from: the one its first result is named after, or for the constants the
    importer makes of a node's wrapped numbers (unnamed), the node that uses them."""
    while op.results:
        node = nodes.get(op.results[0].name_hint)
        if node is not None or not op.results[0].uses:
            return node
        op = next(iter(op.results[0].uses)).operation
    return None


def _is_forced_to_cpu(node: torch.fx.Node, cpu_ops: Sequence[str]) -> bool:
    return bool(cpu_ops) and node.op == "call_function" and names_op(str(node.target), cpu_ops)


class _Lookup:
    """A compile-cache lookup by the FX graph's key (`fx_importer.graph_key_text`): the key (None when the graph
    has no such key or the cache is off) and the entry found (the program and its graph signature), if any."""

    __slots__ = ("hit", "key")

    def __init__(self, key: str | None, hit: tuple[ValidatedProgram, GraphSignature] | None) -> None:
        self.key = key
        self.hit = hit


def _look_up(graph_module: torch.fx.GraphModule, options: CompileOptions, debug_dir: Path | None) -> _Lookup:
    """Find `graph_module` in the compile cache by its FX key, without importing it (no lookups with a debug
    directory: its files come from compiling)."""
    if not options.cache:
        return _Lookup(None, None)
    from neuron_mlir import __version__
    from neuron_mlir.frontend.fx_importer import graph_key_text

    text = graph_key_text(graph_module)
    if text is None:
        return _Lookup(None, None)
    # (`fallback_random` needs no part of the key: a graph whose draws it lifted has them as placeholders, another
    # text, and a graph without draws compiles to the same program either way)
    precision = (options.auto_cast, *(["stochastic_rounding"] if options.stochastic_rounding else []))
    key = cache_key(text, "fx-graph", options.target, *precision, __version__, torch.__version__)
    if debug_dir is not None:
        return _Lookup(key, None)
    cache = compile_cache()
    entry = cache.get_entry(key, with_metadata=True)
    if entry is None:
        return _Lookup(key, None)
    program, metadata = entry
    assert metadata is not None
    try:
        signature = GraphSignature.from_json(metadata, graph_module)
    except ValueError as error:
        logger.warning("neuron-mlir: ignoring a cache entry with an unreadable graph signature: %s", error)
        cache.discard(key)
        return _Lookup(key, None)
    return _Lookup(key, (program, signature))


def _wrap_cached(
    graph_module: torch.fx.GraphModule, name: str, options: CompileOptions, looked_up: _Lookup, started: float
) -> Callable[[list[Any]], list[Any]]:
    assert looked_up.hit is not None
    assert looked_up.key is not None
    program, signature = looked_up.hit
    stats_module.record_found_in_cache(looked_up.key)
    return _wrapped(graph_module, name, program, signature, options, None, started)


def _wrapped(
    graph_module: torch.fx.GraphModule,
    name: str,
    program: ValidatedProgram,
    signature: GraphSignature,
    options: CompileOptions,
    debug_dir: Path | None,
    started: float,
) -> Callable[[list[Any]], list[Any]]:
    compiled: Any = CompiledGraph(name, program, signature, options, debug_dir, _device_outputs(graph_module))
    if signature.guards:
        compiled = ShapeSpecialisedGraph(graph_module, compiled, options, debug_dir=debug_dir)
    nodes = sum(1 for n in graph_module.graph.nodes if n.op == "call_function")
    stats_module.record_compile(nodes, time.perf_counter() - started)
    logger.info("compiled %s: %d nodes in %.2f s", name, nodes, time.perf_counter() - started)
    return compiled


def _compile_whole(
    graph_module: torch.fx.GraphModule,
    name: str,
    options: CompileOptions,
    debug_dir: Path | None,
    looked_up: _Lookup | None = None,
    imported: _Imported | None = None,
) -> Callable[[list[Any]], list[Any]]:
    """Import, lower (or find in the compile cache) and wrap one graph whose every node the core can run.

    `looked_up`: the FX-key lookup of this graph already made (and missed) by the caller; `imported`: the graph's
    import, when the caller has made it."""
    from neuron_mlir import __version__

    started = time.perf_counter()
    if looked_up is None:
        looked_up = _look_up(graph_module, options, debug_dir)
        if looked_up.hit is not None:
            return _wrap_cached(graph_module, name, options, looked_up, started)
    with compile_progress(options.progress) as progress:
        progress.step(f"{name}: import")
        module, signature = (
            imported
            if imported is not None
            else import_fx_graph(
                graph_module,
                options.target,
                auto_cast=options.auto_cast,
                stochastic_rounding=options.stochastic_rounding,
            )
        )
        imported_text = ir_text(module)
        cache = compile_cache() if options.cache else None
        key, metadata = looked_up.key, signature.to_json()
        program = None
        if cache is not None and (key is None or metadata is None):
            # no FX key, or a signature the cache cannot keep: key by the imported IR (a hit needs no signature)
            key, metadata = cache_key(imported_text, options.target, __version__), None
            program = cache.get(key) if debug_dir is None else None
        if program is not None and key is not None:
            stats_module.record_found_in_cache(key)
        else:
            program = _lower(module, name, debug_dir, imported_text, options.time_passes, progress, options.verify)
            if cache is not None and key is not None:
                cache.put(key, program, metadata)
                stats_module.record_cache_miss()
    return _wrapped(graph_module, name, program, signature, options, debug_dir, started)


def _stage_names() -> list[str]:
    from neuron_mlir.lowering.pipelines import DEFAULT_PIPELINE

    return ["imported", *[stage for stage, _ in DEFAULT_PIPELINE]]


def _lower(
    module: ModuleOp,
    name: str,
    debug_dir: Path | None,
    imported: str | None = None,
    time_passes: bool = False,
    progress: CompileProgress | None = None,
    verify: bool = True,
) -> ValidatedProgram:
    """The program of `module`, validated once here: its runs do not validate it again. `progress` hears of
    each stage and pass; `verify` verifies the IR after each stage (the imported module is verified either way)."""
    from xdsl.utils.exceptions import DiagnosticException

    from neuron_mlir import __version__
    from neuron_mlir.backend_trn.translate import build_program
    from neuron_mlir.ir.verification import verify_module
    from neuron_mlir.lowering.pipelines import DEFAULT_PIPELINE, run_pipeline
    from neuron_mlir.runtime.validate import validate_program

    stages = _stage_names()
    completed = {"name": "imported"}
    stage_of = {pass_name: stage for stage, passes in DEFAULT_PIPELINE for pass_name in passes}

    def before_pass(pass_name: str, current: ModuleOp) -> None:
        if progress is not None:
            progress.step(f"{name}: stage {stage_of[pass_name]}, pass {pass_name}")

    def dump(stage: str, current: ModuleOp) -> None:
        completed["name"] = stage
        if debug_dir is not None:
            (debug_dir / f"{stages.index(stage)}_{stage}.mlir").write_text(ir_text(current))

    if imported is None:
        imported = ir_text(module)
    dump("imported", module)
    timings: dict[str, float] = {}
    try:
        verify_module(module)
        run_pipeline(
            Context(), module, after_stage=dump, timings=timings, before_pass=before_pass, verify_stages=verify
        )
        if progress is not None:
            progress.step(f"{name}: bundle")
        started = time.perf_counter()
        program = build_program(module, require_allocated=True, compiler_version=__version__)
        timings["build-program"] = time.perf_counter() - started
    except DiagnosticException as error:
        files = debug_dir if debug_dir is not None else _reproducer_files(imported, name)
        raise NeuronCompileError(_failure_message(name, completed["name"], stages, error, files)) from error
    started = time.perf_counter()
    validated = validate_program(program)
    timings["validate"] = time.perf_counter() - started
    stats_module.record_pass_times(timings)
    if time_passes:
        width = max(len(p) for p in timings)
        lines = [f"  {p:<{width}} {seconds * 1e3:9.1f} ms" for p, seconds in timings.items()]
        print(f"neuron-mlir: time per pass for {name}:\n" + "\n".join(lines), file=sys.stderr)
    if debug_dir is not None:
        from neuron_mlir.backend_trn.emit_bundle import write_bundle

        write_bundle(validated, debug_dir / "program.bundle")
        _write_reproducer(debug_dir, stages)
    return validated


def _reproducer_files(imported: str, name: str) -> Path | None:
    """After a failure without a debug directory: the IR before each stage up to the failing one, in a new
    temporary directory, so that the printed neuron-opt command reproduces the failure."""
    import tempfile

    from xdsl.parser import Parser
    from xdsl.utils.exceptions import DiagnosticException

    from neuron_mlir.ir.context import make_context
    from neuron_mlir.lowering.pipelines import run_pipeline

    directory = Path(tempfile.mkdtemp(prefix=f"neuron-mlir-{name}-"))
    stages = _stage_names()
    try:
        module = Parser(make_context(), imported).parse_module()
        (directory / "0_imported.mlir").write_text(imported)

        def dump(stage: str, current: ModuleOp) -> None:
            (directory / f"{stages.index(stage)}_{stage}.mlir").write_text(ir_text(current))

        run_pipeline(Context(), module, after_stage=dump)
    except DiagnosticException:
        return directory  # failed again, at the same stage: the files so far reproduce it
    except Exception:  # the original error is the one to report
        return None
    return directory


def _failure_message(name: str, after: str, stages: list[str], error: Exception, files: Path | None) -> str:
    from neuron_mlir.lowering.pipelines import DEFAULT_PIPELINE

    index = stages.index(after)
    next_stage = DEFAULT_PIPELINE[index] if index < len(DEFAULT_PIPELINE) else None
    message = f"neuron-mlir: compiling {name} failed"
    if next_stage is not None:
        message += f" in stage '{next_stage[0]}' ({', '.join(next_stage[1])})"
    message += f":\n  {error}"
    if files is not None and next_stage is not None:
        source = files / f"{index}_{after}.mlir"
        message += f"\nreproduce with:\n  {neuron_opt_command()} {source} -p {','.join(next_stage[1])}"
    return message


def neuron_opt_command() -> str:
    """A shell command that runs `neuron-opt` from any shell: this very interpreter (the one with neuron-mlir
    installed) runs its module, so neither an activated virtual environment nor PATH is needed."""
    import shlex

    return f"{shlex.quote(sys.executable)} -m neuron_mlir.tools.neuron_opt"


def _write_reproducer(debug_dir: Path, stages: list[str]) -> None:
    """`reproduce.sh`: runs each stage's passes with neuron-opt on the IR saved before the stage and checks that
    the IR it writes (`<n>_<stage>.reproduced.mlir`) is the saved IR of the stage, byte for byte."""
    from neuron_mlir.lowering.pipelines import DEFAULT_PIPELINE

    lines = [
        "#!/bin/sh",
        "# Re-run each stage of the pipeline on the IR saved before it, and compare with the IR saved after it.",
        'cd "$(dirname "$0")" || exit 1',
        "set -e",
        "differ=0",
    ]
    for index, (stage, passes) in enumerate(DEFAULT_PIPELINE):
        source, expected = f"{index}_{stages[index]}.mlir", f"{index + 1}_{stage}.mlir"
        reproduced = f"{index + 1}_{stage}.reproduced.mlir"
        lines += [
            f"{neuron_opt_command()} {source} -p {','.join(passes)} --print-debuginfo -o {reproduced}",
            f'cmp -s {reproduced} {expected} || {{ echo "{reproduced} differs from {expected}"; differ=1; }}',
        ]
    lines.append('[ "$differ" = 0 ] && echo "every stage reproduced its saved IR"')
    lines.append('exit "$differ"')
    (debug_dir / "reproduce.sh").write_text("\n".join(lines) + "\n")


def _report_fallback(
    missing: list[torch.fx.Node],
    options: CompileOptions,
    name: str,
    illegal: dict[str, str],
    imported: str | None,
    debug_dir: Path | None,
) -> None:
    """Strict mode: one error listing every node (and, when an op's legality ruled it out, the neuron-opt command
    that shows that on `imported`, the graph's import); otherwise one warning per op, and the counts in stats()."""
    if options.strict:
        lines = [f"{describe_node(node)}: {fallback_reason(node, options.cpu_ops, illegal)}" for node in missing]
        message = f"neuron-mlir (strict): {len(missing)} node(s) of {name} would run on the CPU:\n  " + "\n  ".join(
            lines
        )
        if imported is not None:
            import tempfile

            directory = debug_dir if debug_dir is not None else Path(tempfile.mkdtemp(prefix=f"neuron-mlir-{name}-"))
            source = directory / "0_imported.mlir"
            source.write_text(imported)
            message += f"\nreproduce with:\n  {neuron_opt_command()} {source} -p convert-torch-to-tile"
        raise NeuronCompileError(message)
    for node in missing:
        op_name = str(node.target)
        if stats_module.record_fallback(op_name):
            where = describe_location(node_location(node))
            warnings.warn(
                f"neuron-mlir: {fallback_reason(node, options.cpu_ops, illegal)}; it runs eagerly on the CPU between "
                "compiled regions" + (f" (first seen at {where})" if where else ""),
                stacklevel=2,
            )


@functools.cache
def _run_validated() -> Callable[..., Any]:
    """`runtime.simulator.run_validated`, imported with the first run (compiling alone does not need it)."""
    from neuron_mlir.runtime.simulator import run_validated

    return run_validated


class CompiledGraph:
    """A compiled graph: call with the graph's inputs (a list, boxed), get its outputs as torch tensors."""

    # AOTAutograd's boxed calling convention: one list argument, which the callee may clear
    _boxed_call = True

    def __init__(
        self,
        name: str,
        program: ValidatedProgram,
        signature: GraphSignature,
        options: CompileOptions,
        debug_dir: Path | None,
        device_outputs: list[bool] | None = None,
    ):
        self.name = name
        # per graph output: whether it belongs on the `neuron` device (None: none does)
        self.device_outputs = device_outputs
        self.validated = program  # validated once (compiled or read back): runs do not check it again
        self.program = program.program
        self.signature = signature
        self.options = options
        self.debug_dir = debug_dir
        self.constants = [to_numpy(c).copy() for c in signature.constants]  # real: compile_graph left fake mode
        self.last_profile: Any = None
        self._seeded = bool(self.program.inputs) and self.program.inputs[-1].name == "rng_seed"
        # the generator random ops' seeds come from: the `neuron` device's for a graph on the device, so that
        # torch.neuron's seed and RNG state govern its draws as torch.cuda's do a CUDA graph's; else torch's default
        self.seed_generator: torch.Generator | None = None
        if self._seeded and device_outputs is not None:
            from neuron_mlir.frontend.device.random import device_generator

            self.seed_generator = device_generator()
        # a program without collectives runs without looking up torch.distributed's state (once per eager op)
        self._collectives = any(inst.opcode in COLLECTIVES for inst in program.instructions)
        # argument position -> (parameter, data_ptr, shape, strides, dtype, its NumPy view), see `_arrays`
        self._parameter_views: dict[int, tuple[Any, ...]] = {}
        # the program outputs that are one device output of the graph each, and their shapes, torch and NumPy
        # dtypes, as the first call returned them (None before it); later calls have the simulator write them into
        # new device memory, made for all of them at once
        self._device_layouts: tuple[list[int], list[tuple[tuple[int, ...], torch.dtype, np.dtype]]] | None = None

    def _draw_seed(self) -> torch.Tensor:
        if self.seed_generator is None or self.seed_generator.device.type == "cpu":
            return torch.randint(0, 2**31 - 1, (1,), dtype=torch.int64, generator=self.seed_generator)
        from neuron_mlir.frontend.device.random import on_host

        with on_host(self.seed_generator) as generator:  # the device's generator, drawn through a CPU stand-in
            return torch.randint(0, 2**31 - 1, (1,), dtype=torch.int64, generator=generator)

    def __call__(self, args: list[Any]) -> list[Any]:
        return self.call_sized(args, None)

    def call_sized(self, args: list[Any], sizes: Mapping[str, int] | None) -> list[Any]:
        """A call whose program takes size arguments (`Program.scalars`): `sizes` gives their values by name."""
        signature = self.signature
        if signature.guards:
            signature.check_guards(args)
        arrays = self._arrays(signature.arguments(args))
        args.clear()  # boxed calling convention: let the inputs be freed early
        if self.device_outputs is None:
            return signature.results([from_numpy(o) for o in self.run_arrays(arrays, sizes)])
        from neuron_mlir.frontend.device import storage, streams

        # outputs on the device are written by the simulator into new device memory (once their layouts are
        # known) or copied there from its arrays, the others viewed
        tensors: dict[int, torch.Tensor] = {}
        into: list[np.ndarray | None] = []
        if self._device_layouts is not None and self._device_layouts[0] and sizes is None:
            into = [None] * len(self.program.outputs)
            # every device output's block, storage, tensor and array in one call (dozens per call of a training
            # step's graphs)
            indices, layouts = self._device_layouts
            for index, (tensor, array) in zip(indices, storage.empty_arrays(layouts), strict=True):
                tensors[index], into[index] = tensor, array
        outputs = self.run_arrays(arrays, sizes, into)
        streams.current_stream().add_run(float(self.last_profile.total_ns))  # device work: on the device's clock
        if self._device_layouts is None:
            self._device_layouts = self._layouts_of(outputs)
        return [
            tensors[index]
            if index in tensors
            else (storage.from_array(r) if on_device else from_numpy(r))
            if isinstance(r, np.ndarray)
            else r
            for r, on_device, index in zip(
                signature.results(outputs), self.device_outputs, signature.outputs, strict=True
            )
        ]

    def _layouts_of(self, outputs: list[Any]) -> tuple[list[int], list[tuple[tuple[int, ...], torch.dtype, np.dtype]]]:
        """The program outputs that exactly one graph output returns, on the device, and per such output its shape,
        torch dtype and NumPy dtype (`storage.empty_arrays`' layouts)."""
        assert self.device_outputs is not None
        uses = Counter(index for index in self.signature.outputs if index is not None)
        indices = [
            index
            for index, on_device in zip(self.signature.outputs, self.device_outputs, strict=True)
            if index is not None and on_device and uses[index] == 1 and isinstance(outputs[index], np.ndarray)
        ]
        layouts = [
            (tuple(outputs[index].shape), torch_dtype(outputs[index].dtype), outputs[index].dtype) for index in indices
        ]
        return indices, layouts

    def run_arrays(
        self, arrays: list[Any], sizes: Mapping[str, int] | None = None, into: Sequence[np.ndarray | None] = ()
    ) -> list[Any]:
        """One run on the simulator of the function's arguments as NumPy arrays (the graph's tensor inputs in
        order, no Python values, sizes as compiled): the program's outputs as NumPy arrays, before
        `signature.results` maps them to the graph's outputs. The run's profile is `last_profile`. `sizes` gives
        the program's size arguments their values; `into`, per program output, an array to write it to (None: a
        new array), as `runtime.simulator.run_validated` takes it."""
        inputs = arrays + self.constants
        if self._seeded:
            # random ops draw from a counter-based generator keyed by a seed from torch's own generator, so
            # torch.manual_seed makes runs repeat (lowering/convert_torch_to_tile/random.py)
            seed = self._draw_seed()
            inputs.append(seed.numpy().astype("int32"))
        # the profile is the program's stored one (no copy per call); neuron_mlir.profiles() hands out copies;
        # collectives reach the other ranks through torch.distributed's process groups
        run_context: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        if self._collectives:
            from neuron_mlir.frontend.distributed.transport import current_transport
            from neuron_mlir.runtime import collectives

            run_context = collectives.using(current_transport())
        with run_context:
            outputs, profile = _run_validated()(
                self.validated,
                inputs,
                check_races=self.options.check_races,
                share_profile=True,
                scalars=self._scalar_values(sizes),
                into=into,
            )
        self.last_profile = profile
        stats_module.record_run(self.name, profile)
        if self.debug_dir is not None:
            profile.write_chrome_trace(self.debug_dir / "trace.json")
        if self.signature.assertions or self.signature.linalg_checks:
            self.signature.check_assertions(outputs)
        return outputs

    def _scalar_values(self, sizes: Mapping[str, int] | None) -> tuple[int, ...]:
        declared = self.program.scalars
        if not declared:
            return ()
        missing = [s.name for s in declared if sizes is None or s.name not in sizes]
        if missing:
            raise ValueError(f"neuron-mlir: {self.name}: the program takes the sizes {missing}, which the call lacks")
        assert sizes is not None
        return tuple(int(sizes[s.name]) for s in declared)

    def _arrays(self, arguments: list[Any]) -> list[Any]:
        """The arguments as NumPy arrays (`to_numpy`).

        Parameters come back call after call as the same tensors, and converting one costs several times more
        than checking that it is still where it was: the NumPy view of a contiguous CPU or device parameter is kept and
        reused while the parameter keeps its storage address, shape, strides and dtype (in-place updates write
        the memory the view shows; anything that moves or reshapes the data changes one of those). The view
        keeps nothing alive that the parameter does not; other tensors (activations) are converted every call.
        """
        from neuron_mlir.frontend.device.storage import kept_arrays, observe

        observe()  # parameters viewed in place: recorded eager ops that write them run first
        views = self._parameter_views
        arrays = []
        # a graph of device tensors: the arrays kept on their storages (a backward graph's saved activations, the
        # parameters), found in one call
        kept = kept_arrays(arguments) if self.device_outputs is not None else None
        for position, value in enumerate(arguments):
            if kept is not None:
                found = kept[position]
                if found is not None:
                    arrays.append(found)
                    continue
            if type(value) is not torch.nn.Parameter:
                arrays.append(to_numpy(value))
                continue
            entry = views.get(position)
            if (
                entry is not None
                and entry[0] is value
                and value.data_ptr() == entry[1]
                and value.shape == entry[2]
                and value.stride() == entry[3]
                and value.dtype is entry[4]
            ):
                arrays.append(entry[5])
                continue
            array = to_numpy(value)
            # then `array` is a view of the parameter's memory (the device's memory is host memory too)
            if (value.is_cpu or value.device.type == "neuron") and value.is_contiguous():
                views[position] = (value, value.data_ptr(), value.shape, value.stride(), value.dtype, array)
            arrays.append(array)
        return arrays


def _device_outputs(graph_module: torch.fx.GraphModule) -> list[bool] | None:
    """Per output of the graph, whether its value is a `neuron` tensor (traced from device inputs); None when no
    output is, so graphs of CPU tensors pay nothing."""
    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    values = output.args[0] if isinstance(output.args[0], list | tuple) else [output.args[0]]
    on_device = [
        isinstance(value, torch.fx.Node)
        and isinstance(value.meta.get("val"), torch.Tensor)
        and value.meta["val"].device.type == "neuron"
        for value in values
    ]
    return on_device if any(on_device) else None


class PerSizes:
    """A graph compiled once per set of sizes of its arguments, each compilation kept for the next call with
    those sizes: the first counts as a graph compiled (`_compile` records it), each later one as a
    recompilation. Subclasses say what the sizes of a call are (`_sizes`) and how to compile for them."""

    _boxed_call = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.by_sizes: dict[tuple[Any, ...], Callable[[list[Any]], list[Any]]] = {}

    def _sizes(self, args: list[Any]) -> tuple[Any, ...]:
        raise NotImplementedError

    def _compile(self, args: list[Any], name: str) -> Callable[[list[Any]], list[Any]]:
        raise NotImplementedError

    def __call__(self, args: list[Any]) -> list[Any]:
        return self._compiled(args)(args)

    def _compiled(self, args: list[Any]) -> Callable[[list[Any]], list[Any]]:
        """The compilation for `args`' sizes, compiled now if there is none yet."""
        sizes = self._sizes(args)
        compiled = self.by_sizes.get(sizes)
        if compiled is None:
            compiled = self._compile(args, f"{self.name}_{len(self.by_sizes)}")
            if self.by_sizes:
                stats_module.record_recompilation()
            self.by_sizes[sizes] = compiled
            logger.info("compiled %s for sizes %s", self.name, sizes)
        return compiled


class ShapeSpecialisedGraph(PerSizes):
    """A graph with symbolic sizes, compiled once per set of concrete sizes.

    The importer specialises symbolic sizes (`GraphSignature.guards`); the first compilation used the sizes the
    graph was traced with. A call with other sizes imports the graph again specialised to them, compiles it and
    keeps it for the next call with those sizes. A graph whose inputs have data-dependent sizes (unbacked: no
    traced value) starts with no compilation (`first` None) and compiles at its first call.
    """

    def __init__(
        self,
        graph_module: torch.fx.GraphModule,
        first: CompiledGraph | None,
        options: CompileOptions,
        name: str | None = None,
        size_arguments: Sequence[str] = (),
        debug_dir: Path | None = None,
    ):
        super().__init__(first.name if first is not None else str(name))
        self.graph_module = graph_module
        self.options = options
        # the graph's debug directory: each program compiled here dumps its IR, bundle and trace in a directory
        # of its own, named after the program
        self.debug_dir = debug_dir
        # size symbols each program takes as integer arguments (a size bucket's): its loops over dimensions they
        # bound run the call's trips
        self.size_arguments = list(size_arguments)
        if first is not None:
            self.positions = list(first.signature.guards)
            self.by_sizes[tuple(first.signature.guards[p] for p in self.positions)] = first
        else:
            assert name is not None
            placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
            self.positions = [p for p, node in enumerate(placeholders) if _is_symbolic(node.meta.get("val"))]

    def _sizes(self, args: list[Any]) -> tuple[Any, ...]:
        return tuple(tuple(args[p].shape) if isinstance(args[p], torch.Tensor) else args[p] for p in self.positions)

    def call_sized(self, args: list[Any], size_values: Mapping[str, int]) -> list[Any]:
        """A call of a program taking size arguments (`size_arguments`): `size_values` gives the call's values."""
        compiled = self._compiled(args)
        assert isinstance(compiled, CompiledGraph)
        return compiled.call_sized(args, size_values)

    def _compile(self, args: list[Any], name: str) -> Callable[[list[Any]], list[Any]]:
        from neuron_mlir import __version__

        # a size read from tensor values (a count the host read) that gives a tensor a negative extent: the
        # graph's own check of it runs after this region, so refuse here, before such a shape is imported. A
        # value read for another use (a negative pad crops) is no size and passes.
        negative = _negative_extent(self.graph_module, args, self.positions)
        if negative is not None:
            raise RuntimeError(
                f"{name}: a size read from tensor values is {negative}, and a size cannot be negative "
                "(repeat_interleave's repeats, a count passed to arange or a view)"
            )
        started = time.perf_counter()
        with compile_progress(self.options.progress) as progress:
            progress.step(f"{name}: import")
            module, signature = import_fx_graph(
                self.graph_module,
                self.options.target,
                inputs=list(args),
                auto_cast=self.options.auto_cast,
                stochastic_rounding=self.options.stochastic_rounding,
                size_arguments=self.size_arguments,
            )
            _refuse_illegal(module, name)
            # keyed by the specialised import (as `_compile_whole` keys a graph without an FX key): a size
            # bucket's program is found again by the next process that meets it
            imported_text = ir_text(module)
            program_dir = self.debug_dir / name if self.debug_dir is not None else None
            if program_dir is not None:
                program_dir.mkdir(parents=True, exist_ok=True)
            cache = compile_cache() if self.options.cache else None
            key = cache_key(imported_text, self.options.target, __version__)
            # with a debug directory the files come from compiling, as for a whole graph
            program = cache.get(key) if cache is not None and program_dir is None else None
            if program is not None:
                stats_module.record_cache_hit()
            else:
                program = _lower(
                    module, name, program_dir, imported_text, progress=progress, verify=self.options.verify
                )
                if cache is not None:
                    cache.put(key, program, None)
                    stats_module.record_cache_miss()
        if not self.by_sizes:
            nodes = sum(1 for n in self.graph_module.graph.nodes if n.op == "call_function")
            stats_module.record_compile(nodes, time.perf_counter() - started)
        return CompiledGraph(name, program, signature, self.options, program_dir, _device_outputs(self.graph_module))


class ComplexGraphPerSizes(PerSizes):
    """A graph with complex values and symbolic sizes, compiled once per set of concrete sizes.

    Its complex values become real pairs and its FFTs matmuls by DFT matrices of the transforms' sizes, so the
    graph is traced again at each call's sizes (`complex_pairs.specialise`) and compiled like a static graph. A
    graph that cannot be traced at concrete sizes (sizes that depend on data) is compiled as it is, once: its
    complex nodes then run on the CPU, each with that reason.
    """

    def __init__(self, graph_module: torch.fx.GraphModule, options: CompileOptions, kind: str):
        super().__init__(f"complex_{kind}")
        self.graph_module = graph_module
        self.options = options
        self.kind = kind
        self.as_traced: Callable[[list[Any]], list[Any]] | None = None

    def _sizes(self, args: list[Any]) -> tuple[Any, ...]:
        return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)

    def __call__(self, args: list[Any]) -> list[Any]:
        if self.as_traced is not None:
            return self.as_traced(args)
        return super().__call__(args)

    def _compile(self, args: list[Any], name: str) -> Callable[[list[Any]], list[Any]]:
        from torch._subclasses.fake_tensor import DataDependentOutputException
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

        from neuron_mlir.frontend.complex_pairs import specialise

        try:
            specialised = specialise(self.graph_module, args)
        except (DataDependentOutputException, GuardOnDataDependentSymNode):
            from neuron_mlir.frontend.complex_pairs import complex_as_pairs

            with heap.compiling():
                complex_as_pairs(self.graph_module)  # not rewritten: marks its complex nodes with the reason
                self.as_traced = _compile_graph(self.graph_module, self.options, self.kind)
            return self.as_traced
        return compile_graph(specialised, args, self.options, self.kind)


def _negative_extent(graph_module: torch.fx.GraphModule, args: list[Any], positions: list[int]) -> int | None:
    """The first negative extent a tensor of `graph_module` has with its integer inputs at `positions` given
    `args`' values (sizes the host read from tensor values), or None."""
    import sympy  # type: ignore[import-untyped]

    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    values = {}
    for p in positions:
        symbol = placeholders[p].meta.get("val")
        if isinstance(symbol, torch.SymInt) and isinstance(args[p], int):
            values[symbol.node.expr] = sympy.Integer(args[p])
    if not any(value < 0 for value in values.values()):
        return None
    for node in graph_module.graph.nodes:
        value = node.meta.get("val")
        for tensor in value if isinstance(value, list | tuple) else (value,):
            if not isinstance(tensor, torch.Tensor):
                continue
            for extent in tensor.shape:
                node_of_extent = getattr(extent, "node", None)  # a SymInt's; a plain int extent has none
                if node_of_extent is not None:
                    expression = sympy.sympify(node_of_extent.expr).xreplace(values)
                    if expression.is_number and int(expression) < 0:
                        return int(expression)
    return None


def _is_symbolic(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return any(isinstance(extent, torch.SymInt) for extent in value.shape)
    return isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool)


def _refuse_illegal(module: ModuleOp, name: str) -> None:
    """Raise for an op whose legality rules out the arguments it has at these sizes: a graph compiled at its call
    was partitioned before its sizes were known, so no CPU fallback is planned for it."""
    from neuron_mlir.lowering.convert_torch_to_tile import legality

    for op in module.walk():
        if op.name.startswith("torch.") and (reason := legality(op)) is not None:
            where = describe_location(op.location)
            raise NeuronCompileError(
                f"neuron-mlir: compiling {name}: {op.name} cannot be lowered at the sizes of this call ({reason})"
                + (f" at {where}" if where else "")
            )
