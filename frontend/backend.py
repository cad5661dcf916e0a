"""The `neuron-mlir` torch.compile backend: AOTAutograd graphs compiled to bundles, run on the simulated core.

    model = torch.compile(model, backend="neuron-mlir", options={"target": "trn2"})

Dynamo hands over an FX graph, in which activations spelled out as arithmetic become one call
(`frontend.recognize_activations`: the backward then differentiates the function, not its arithmetic);
AOTAutograd traces its forward and backward with core-ATen decompositions, and each of those graphs is imported
into the torch dialect, lowered by the default pipeline, packed into a program and wrapped in a callable that
runs it on the simulator. A graph with an op that cannot be lowered yet runs eagerly on the CPU (with one
warning per op) unless strict mode asks for an error.

Options (`options={...}` of torch.compile, each also settable by environment variable):
    target     "trn1" | "trn2" | "trn3"        (NEURON_MLIR_TARGET, default trn2)
    strict     bool: a fallback is an error     (NEURON_MLIR_STRICT=1)
    debug_dir  dump FX graph, IR per stage, bundle and trace per graph   (NEURON_MLIR_DEBUG_DIR)
    check_races  bool: verify synchronisation on every run (default True)
    cpu_ops    ATen ops to run on the CPU even if the core could (e.g. ["aten.cumsum"]): bisecting a problem;
               a name that is no op of the torch dialect is an error naming the closest ones
    auto_cast  "none" (default, or False): every op computes in the graph's own dtypes, as in eager;
               "matmul": fp32 matmuls and convolutions multiply bf16-rounded operands on TensorE, accumulating
               and returning fp32; "all": bf16 everywhere except reductions, normalizations, softmax and losses
               (lowering/torch_auto_cast.py)
    stochastic_rounding  bool: casts from fp32 to bf16 round stochastically, each value to one of its two bf16
               neighbours with the probabilities that make the rounding unbiased (the Neuron runtime's
               NEURON_RT_STOCHASTIC_ROUNDING_EN=1, which also sets it); the random draws follow
               `torch.manual_seed` like compiled dropout's (lowering/convert_torch_to_tile/random.py)
    cache      bool: reuse compiled programs across calls and processes (NEURON_MLIR_CACHE_DIR, default True)
    time_passes  bool: print the time of every pass of each compile (NEURON_MLIR_TIME_PASSES=1)
    progress   bool: show graph, stage and pass of compiles longer than ~2 s on stderr (NEURON_MLIR_PROGRESS=0/1;
               by default on when stderr is a terminal and logging does not silence `neuron_mlir.progress`)

    compile_ahead  bool: compile a training graph's backward in a forked child while the forward compiles and
               runs, where that can pay (frontend/compile_ahead.py; NEURON_MLIR_COMPILE_AHEAD=0; default True)
    fallback_random  bool: random ops draw on the host, by torch itself, the numbers eager draws after the same
               `torch.manual_seed` (frontend/fallback_random.py; NEURON_MLIR_FALLBACK_RANDOM=1; default False)
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from neuron_mlir.frontend.compile_ahead import AheadCompile
from neuron_mlir.frontend.compile_graph import compile_graph, names_op
from neuron_mlir.frontend.data_dependent import specialise_split_points
from neuron_mlir.frontend.float_constants import ValueSpecialised, float_constants, fold_scalar_arithmetic
from neuron_mlir.frontend.linalg_decompositions import route_composite_calls
from neuron_mlir.frontend.progress import compile_progress, progress_setting
from neuron_mlir.frontend.recognize_activations import recognize_activations
from neuron_mlir.frontend.size_inputs import size_inputs, specialise_sizes

if TYPE_CHECKING:
    from torch._functorch._aot_autograd.schemas import AOTDispatchCompiler

logger = logging.getLogger("neuron_mlir")

_OPTION_NAMES = {
    "target", "strict", "debug_dir", "check_races", "auto_cast", "stochastic_rounding", "cpu_ops", "cache",
    "time_passes", "progress", "size_buckets", "verify", "compile_ahead", "fallback_random",
}  # fmt: skip

AUTO_CAST_MODES = ("none", "matmul", "all")


@dataclass(frozen=True)
class CompileOptions:
    target: str = "trn2"
    strict: bool = False
    debug_dir: str | None = None
    check_races: bool = True
    cpu_ops: tuple[str, ...] = ()
    cache: bool = True
    time_passes: bool = False
    progress: bool | None = None
    """Show the progress of long compiles: forced on or off, or None to decide by the terminal and logging."""
    auto_cast: str = "none"
    """Which fp32 ops compute in bf16: "none", "matmul" or "all" (torch-auto-cast)."""
    stochastic_rounding: bool = False
    """Whether casts from fp32 to bf16 round stochastically instead of to nearest even."""
    size_buckets: bool = True
    """Run a graph with symbolic sizes by one program per size bucket (`frontend.size_buckets`); False compiles
    it once per set of sizes, each program at the call's exact sizes."""
    verify: bool = False
    """Verify the IR after every stage of the pipeline. Off by default: the program each compile builds is
    validated against the instruction set whatever this says (`runtime.validate`), and verifying each stage was
    about a seventh of a large graph's compile; on in strict mode, with a debug directory, and in the test suite
    (`NEURON_MLIR_VERIFY=1`), so a pass that breaks an invariant fails at its own stage there."""
    compile_ahead: bool = True
    """Compile a training graph's backward in a forked child while the forward compiles and runs, where that can
    pay (`frontend.compile_ahead`)."""
    fallback_random: bool = False
    """Draw every random op of a graph on the host, by the ATen op eager calls, from torch's generator, so that
    compiled and eager runs draw the same numbers after the same seed (`frontend.fallback_random`); otherwise
    random ops draw from the compiler's counter-based generator."""

    @staticmethod
    def from_user(options: dict[str, Any] | None) -> CompileOptions:
        options = dict(options or {})
        unknown = set(options) - _OPTION_NAMES
        if unknown:
            known = ", ".join(sorted(_OPTION_NAMES))
            raise ValueError(f"neuron-mlir: unknown option(s) {', '.join(sorted(unknown))} (known: {known})")
        auto_cast = _checked_auto_cast(options.get("auto_cast"))
        from neuron_mlir.runtime.hardware import DEFAULT_TARGET, get_target

        target = str(options.get("target", os.environ.get("NEURON_MLIR_TARGET", DEFAULT_TARGET)))
        get_target(target)  # a clear error for unknown targets
        strict = bool(options.get("strict", os.environ.get("NEURON_MLIR_STRICT", "0") not in ("", "0")))
        debug_dir = options.get("debug_dir", os.environ.get("NEURON_MLIR_DEBUG_DIR") or None)
        verify = bool(options.get("verify", strict or bool(debug_dir) or _flag("NEURON_MLIR_VERIFY")))
        return CompileOptions(
            target=target,
            strict=strict,
            debug_dir=str(debug_dir) if debug_dir else None,
            check_races=bool(options.get("check_races", True)),
            cpu_ops=_checked_cpu_ops(options.get("cpu_ops", ())),
            cache=bool(options.get("cache", True)),
            time_passes=bool(options.get("time_passes", _flag("NEURON_MLIR_TIME_PASSES"))),
            progress=progress_setting(options.get("progress", os.environ.get("NEURON_MLIR_PROGRESS"))),
            auto_cast=auto_cast,
            stochastic_rounding=bool(options.get("stochastic_rounding", _flag("NEURON_RT_STOCHASTIC_ROUNDING_EN"))),
            size_buckets=bool(options.get("size_buckets", True)),
            verify=verify,
            compile_ahead=bool(options.get("compile_ahead", os.environ.get("NEURON_MLIR_COMPILE_AHEAD", "1") != "0")),
            fallback_random=bool(options.get("fallback_random", _flag("NEURON_MLIR_FALLBACK_RANDOM"))),
        )


def _checked_auto_cast(value: Any) -> str:
    """The auto_cast mode named by `value` (None and False are "none")."""
    if value is None or value is False:
        return "none"
    if isinstance(value, str) and value in AUTO_CAST_MODES:
        return value
    modes = ", ".join(f'"{mode}"' for mode in AUTO_CAST_MODES)
    raise ValueError(f'neuron-mlir: auto_cast={value!r}: not a mode (modes: {modes}; False means "none")')


def _checked_cpu_ops(value: Any) -> tuple[str, ...]:
    """The `cpu_ops` names, each checked to name an op of the torch dialect (the ops compiled graphs hold): a
    misspelled name would otherwise match nothing and be ignored."""
    import difflib

    from neuron_mlir.ir.dialects.torch import all_op_classes

    names = (value,) if isinstance(value, str) else tuple(str(op) for op in value)
    overloads = {cls.name.removeprefix("torch.") for cls in all_op_classes()}
    known = overloads | {name.rsplit(".", 1)[0] for name in overloads if name.count(".") == 2}
    known |= {f"{name}.default" for name in overloads if name.count(".") == 1}
    for name in names:
        spelled = "aten." + name.removeprefix("aten.")  # "cumsum" and "aten.cumsum" name the same ops
        if spelled in known:
            continue
        close = difflib.get_close_matches(spelled, sorted(known), n=3, cutoff=0.6)
        hint = f"; closest known: {', '.join(close)}" if close else ""
        if hasattr(torch.ops.aten, spelled.split(".")[1]):
            raise ValueError(
                f"neuron-mlir: cpu_ops: '{name}' never reaches the compiler: graphs are decomposed into core ATen "
                f"ops first{hint}"
            )
        raise ValueError(
            f"neuron-mlir: cpu_ops: unknown op '{name}' (name an ATen op as in 'aten.cumsum' or "
            f"'aten.add.Tensor'{hint})"
        )
    return names


def _flag(variable: str) -> bool:
    return os.environ.get(variable, "0") not in ("", "0")


# Kernels that core-ATen decomposes into chains of elementwise ops and reductions, kept whole because
# convert-torch-to-tile lowers each as one pass over its operands (one ScalarE function or derivative, or one row
# tile's statistics kept on chip), where the decomposed chain computes more and may round-trip fp32
# intermediates through HBM. embedding_dense_backward becomes one zero fill of the table in its own dtype and one
# accumulating scatter of the rows; its decomposition fills an fp32 table, copies it into index_put's result
# and casts that back, three passes over a table that dwarfs the rows.
# nll_loss_backward is a zero fill and one scatter of a value per row, and under cross-entropy's log-softmax
# backward no tensor at all (the gradient comes from the log-probabilities in one pass); its decomposition
# fills, scatters and multiplies the whole [rows, classes] tensor.
# native_batch_norm_backward is two passes over x and dy per channel tile, centred on the exact batch mean (the
# saved mean's rounding measured and taken out); its decomposition materializes fp32 intermediates in HBM and
# centres on the saved mean, whose rounding dominates the gradients of channels with few values close together.
KEPT_WHOLE = (
    torch.ops.aten.silu.default,
    torch.ops.aten.gelu_backward.default,
    torch.ops.aten.silu_backward.default,
    torch.ops.aten.native_layer_norm_backward.default,
    torch.ops.aten.native_batch_norm_backward.default,
    torch.ops.aten._softmax_backward_data.default,
    torch.ops.aten._log_softmax_backward_data.default,
    torch.ops.aten.embedding_dense_backward.default,
    torch.ops.aten.nll_loss_backward.default,
)


def decompositions(cpu_ops: Sequence[str] = ()) -> dict[Any, Any]:
    """Core-ATen decompositions, minus the ones known to be wrong for training and the kernels lowered whole
    (`KEPT_WHOLE`), plus one that traces, the fused kernels of `frontend.decompositions`
    (nn.TransformerEncoderLayer's inference fast path), the ops without a lowering that
    `frontend.composite_decompositions` computes from lowered ones (scans, order statistics, searches, ...), the
    MoE routing kernels of `frontend.routing`, fp8 scaled matmuls (`frontend.scaled_matmul`), the factorizations
    of `frontend.linalg_decompositions` and the
    special functions of `frontend.special_functions`, except those `cpu_ops` names: they reach the graph whole,
    to run on the CPU as asked. (Under `fallback_random` the backend leaves the random ops' decompositions out,
    `fallback_random.without_random_decompositions`: the graph keeps the ops eager calls, to draw on the host.)

    `_scaled_dot_product_flash_attention_for_cpu`'s decomposition hands the attention matrix to the
    (undecomposed) backward where logsumexp belongs, so gradients come out silently wrong; without it the math
    attention path is traced instead.
    """
    from torch._decomp import core_aten_decompositions

    from neuron_mlir.frontend.composite_decompositions import composite_decompositions
    from neuron_mlir.frontend.data_dependent import data_dependent_decompositions
    from neuron_mlir.frontend.decompositions import fused_kernel_decompositions
    from neuron_mlir.frontend.linalg_decompositions import linalg_decompositions
    from neuron_mlir.frontend.routing import routing_decompositions
    from neuron_mlir.frontend.scaled_matmul import scaled_matmul_decompositions
    from neuron_mlir.frontend.special_functions import special_function_decompositions

    table = dict(core_aten_decompositions())
    table.pop(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default, None)
    for kernel in KEPT_WHOLE:
        table.pop(kernel, None)
    table[torch.ops.aten.lerp.Scalar] = _lerp_scalar
    table.update(fused_kernel_decompositions())
    table.update(composite_decompositions())
    table.update({op: rule for op, rule in special_function_decompositions().items() if not names_op(str(op), cpu_ops)})
    table.update(routing_decompositions())
    table.update(data_dependent_decompositions())
    table.update(linalg_decompositions())
    table.update(scaled_matmul_decompositions())
    return table


def _lerp_scalar(start: torch.Tensor, end: torch.Tensor, weight: float) -> torch.Tensor:
    """lerp with a Python weight, as ATen computes it (near the closer end for precision). The core-ATen
    decomposition makes the weight a 0-d tensor and then branches on its value, which tracing cannot do."""
    if abs(weight) >= 0.5:
        return (weight - 1) * (end - start) + end
    return weight * (end - start) + start


def partition_without_aliases(joint_module: torch.fx.GraphModule, joint_inputs: Any, **options: Any) -> Any:
    """AOTAutograd's default partition of the joint graph, after every `aten.alias` that is not a graph output
    reads its input instead.

    In the functional joint graph an alias is its input; but when a forward value and an alias of it are both
    needed by the backward (rsqrt's backward reads its result through an alias, RMSNorm's through the rsqrt
    too), the partition saves both, and the backward graph receives one tensor as two unrelated inputs. Read as
    one value, the backward's torch-level passes can see it is (torch-recognize-rms-norm's backward chain).
    A backward's repeated fp8 casts of forward values read the forward's (`frontend.reuse_fp8_casts`), and float64
    scalars computed from constants are folded into their fp32 readers in both halves before the partition
    would save them for the backward (`frontend.narrow_float64.fold_constant_scalars`)."""
    from torch._functorch.partitioners import default_partition

    from neuron_mlir.frontend.narrow_float64 import fold_constant_scalars
    from neuron_mlir.frontend.reuse_fp8_casts import reuse_forward_fp8_casts

    graph = joint_module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.aten.alias.default:
            continue
        if any(user.op == "output" for user in node.users):
            continue
        node.replace_all_uses_with(node.args[0])
        graph.erase_node(node)
    fold_constant_scalars(joint_module)
    nodes = list(graph.nodes)
    forward_end = _forward_end(nodes)
    reuse_forward_fp8_casts(graph, [i <= forward_end for i in range(len(nodes))])
    backward_views_from_inputs(graph)
    joint_module.recompile()
    return default_partition(joint_module, joint_inputs, **options)


def backward_views_from_inputs(graph: torch.fx.Graph) -> None:
    """Give the backward its own copy of every view chain of a forward input that it reads.

    A forward value that the backward needs is saved: handed over as a graph output and received as a new,
    contiguous input. For a view of an input (a Linear layer's `permute(weight)`), that input is a copy in
    another layout: dX = dY W would then contract over the contiguous axis of W^T and transpose every weight
    tile on TensorE. Replayed in the backward, the chain saves the input itself (a parameter, no copy), and the
    lowering sees the view for what it is: W, row-major, its rows on partitions.

    The default partition places nodes where the joint graph has them: the forward is everything up to its last
    node (tagged `is_forward`, or a primal input), so each copy goes right before its first backward reader.
    """
    from torch._functorch._aot_autograd.utils import _is_primal

    nodes = list(graph.nodes)
    forward_end = _forward_end(nodes)
    position = {node: i for i, node in enumerate(nodes)}
    input_views: set[torch.fx.Node] = set()
    for node in nodes[: forward_end + 1]:
        if _is_view_op(node) and node.args and isinstance(node.args[0], torch.fx.Node):
            base = node.args[0]
            if _is_primal(base) or base in input_views:
                input_views.add(node)
    for node in nodes[: forward_end + 1]:
        readers = [user for user in node.users if position.get(user, -1) > forward_end]
        if node not in input_views or not readers:
            continue
        with graph.inserting_before(min(readers, key=position.__getitem__)):
            replayed = _replay(graph, node, input_views, {})
        for reader in readers:
            reader.replace_input_with(node, replayed)


def _forward_end(nodes: list[torch.fx.Node]) -> int:
    """The index of the joint graph's last forward node: the default partition's forward is every node up to it."""
    from torch._functorch._aot_autograd.utils import _is_fwd_seed_offset, _is_primal
    from torch._functorch.partitioners import _has_tag_is_forward

    in_forward = [_has_tag_is_forward(node) or _is_primal(node) or _is_fwd_seed_offset(node) for node in nodes]
    return max((i for i, forward in enumerate(in_forward) if forward), default=-1)


def _replay(
    graph: torch.fx.Graph,
    view: torch.fx.Node,
    input_views: set[torch.fx.Node],
    copies: dict[torch.fx.Node, torch.fx.Node],
) -> torch.fx.Node:
    """A copy of the view chain ending at `view`, at the graph's insertion point (a backward node: untagged)."""
    if view not in copies:
        copy = graph.node_copy(
            view, lambda arg: _replay(graph, arg, input_views, copies) if arg in input_views else arg
        )
        copy.meta.pop("partitioner_tag", None)
        copies[view] = copy
    return copies[view]


def _is_view_op(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and node.target.is_view


def neuron_mlir_backend(
    graph_module: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any] | None = None,
    **_: Any,
) -> Any:
    """The backend registered as `neuron-mlir` (entry point `torch_dynamo_backends`)."""
    from torch._dynamo.utils import counters

    config = CompileOptions.from_user(options)
    # Dynamo's DDP graph splitter (DDPOptimizer) reads this count to learn that AOTAutograd compiled a piece: only
    # then does it make the fake first call that AOTAutograd answers with fake outputs when it propagates shapes
    # between the pieces. Uncounted, that fake answer would be handed to the first real call instead.
    counters["aot_autograd"]["total"] += 1
    _note_recompilation()
    constants = float_constants(graph_module)
    if constants:  # compiled with the floats as constants, again for other values (frontend/float_constants.py)
        return ValueSpecialised(graph_module, constants, lambda gm: _compile_dynamo_graph(gm, example_inputs, config))
    fold_scalar_arithmetic(graph_module)
    return _compile_dynamo_graph(graph_module, example_inputs, config)


def _compile_dynamo_graph(
    graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any], config: CompileOptions
) -> Any:
    if config.fallback_random:
        from neuron_mlir.frontend.fallback_random import dropout_as_on_the_cpu, keep_dead_draws, without_extra_outputs

        dropout_as_on_the_cpu(graph_module)  # eager's arithmetic around the mask, forward and backward
        # a draw whose result nothing reads still advances eager's generator: kept as an output, dropped after
        extra = keep_dead_draws(graph_module)
        if extra:
            return without_extra_outputs(_compile_traced(graph_module, example_inputs, config), extra)
    return _compile_traced(graph_module, example_inputs, config)


def _compile_traced(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any], config: CompileOptions) -> Any:
    from torch._functorch.aot_autograd import aot_module_simplified

    recognize_activations(graph_module)
    specialise_split_points(graph_module)
    route_composite_calls(graph_module, config.cpu_ops)

    # The backward compiles in a child process while the forward compiles and runs (`frontend.compile_ahead`)
    ahead = AheadCompile(config)

    def compiler(kind: str) -> AOTDispatchCompiler:
        def compile_fn(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
            if kind == "forward":
                ahead.start()
            elif kind == "backward":
                ahead.collect()
            return compile_graph(gm, example_inputs, config, kind)

        return compile_fn

    def partition_fn(joint_module: torch.fx.GraphModule, joint_inputs: Any, **partition_options: Any) -> Any:
        forward, backward = partition_without_aliases(joint_module, joint_inputs, **partition_options)
        ahead.remember(backward)
        return forward, backward

    from torch.nn.attention import sdpa_kernel

    table = decompositions(config.cpu_ops)
    if config.fallback_random:  # random ops kept as eager calls them, to be drawn on the host
        from neuron_mlir.frontend.fallback_random import without_random_decompositions

        table = without_random_decompositions(table)
    try:
        backends = attention_backends(graph_module, example_inputs)
        with sdpa_kernel(backends), scalar_reads_traced(example_inputs), compile_progress(config.progress) as progress:
            progress.step("trace (AOTAutograd)")
            return aot_module_simplified(
                graph_module,
                list(example_inputs),
                fw_compiler=compiler("forward"),
                bw_compiler=compiler("backward"),
                inference_compiler=compiler("inference"),
                partition_fn=partition_fn,
                decompositions=table,
            )
    except _untraceable_errors() as error:
        sizes = size_inputs(graph_module)
        if sizes:  # sizes read from integer inputs: compiled as their values (frontend/size_inputs.py)
            return ValueSpecialised(
                graph_module,
                sizes,
                lambda gm: _compile_dynamo_graph(gm, example_inputs, config),
                specialise=specialise_sizes,
                read=int,
                what="integer inputs read as sizes",
            )
        return _run_untraceable_eagerly(graph_module, error, config)


def _note_recompilation() -> None:
    """When Dynamo compiles a function again because a guard failed (a size outside the range
    `torch._dynamo.mark_dynamic` gave, a size that was specialised), say which in `stats()["size_notes"]`: a
    graph with symbolic sizes runs every size of its range with the programs it has (`frontend.size_buckets`),
    so a new trace of it is worth a note."""
    from torch._dynamo.utils import get_metrics_context

    from neuron_mlir.frontend import stats

    context = get_metrics_context()
    reason = context._metrics.get("recompile_reason") if context.in_progress() else None  # Dynamo's own record
    if reason:
        stats.record_size_note(f"traced again by Dynamo: {str(reason).split('  #')[0].strip()}")


@contextlib.contextmanager
def scalar_reads_traced(example_inputs: Sequence[Any]) -> Iterator[None]:
    """Let AOTAutograd trace reads of a tensor's value (`.item()`, `aten._local_scalar_dense`) that decompositions
    make (`narrow` with a tensor start, `index_fill` with a tensor value, ...) into unbacked sizes of the graph,
    which `compile_graph` reads on the host, instead of refusing the whole graph. A decomposition that then
    branches on such a value still cannot be traced, and its graph runs eagerly as before."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(list(example_inputs))
    if fake_mode is None or fake_mode.shape_env is None:
        yield
        return
    allowed = fake_mode.allow_scalar_outputs
    fake_mode.allow_scalar_outputs = True
    try:
        yield
    finally:
        fake_mode.allow_scalar_outputs = allowed


def attention_backends(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any]:
    """Which `scaled_dot_product_attention` implementations AOTAutograd may trace, chosen before it traces.

    Attention is kept as one `_scaled_dot_product_flash_attention_for_cpu` op wherever ATen's CPU dispatcher
    takes the flash kernel, in inference and in training alike: convert-torch-to-tile lowers it as one fused
    kernel (scores, softmax and the product with V stay on chip; grouped-query heads included: `enable_gqa`
    reaches it with the key/value heads as they are), which also returns the log-sum-exp a training graph saves.
    The backward (`_scaled_dot_product_flash_attention_for_cpu_backward`) is the fused backward kernel too, or one
    such kernel per block of a long sequence, or else decomposed (`frontend.decompositions.flash_attention_backward`
    decides), each recomputing the probabilities from that log-sum-exp.
    An attention the flash kernel does not take (dropout, a boolean mask, value heads narrower or wider than the
    keys') traces the math path (matmuls and a softmax), as in eager.
    """
    from torch.nn.attention import SDPBackend

    return [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]


def _untraceable_errors() -> tuple[type[BaseException], ...]:
    """What AOTAutograd raises for graphs whose values decide their own shapes (an `.item()` in a kernel's
    decomposition, a data-dependent output size): no static graph exists, so there is nothing to compile."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return (DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode)


def _run_untraceable_eagerly(graph_module: torch.fx.GraphModule, error: BaseException, config: CompileOptions) -> Any:
    import warnings

    from neuron_mlir.frontend import stats
    from neuron_mlir.frontend.compile_graph import NeuronCompileError
    from neuron_mlir.frontend.fx_importer import node_location
    from neuron_mlir.ir.locations import describe_location

    calls = [n for n in graph_module.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    places = [describe_location(node_location(n)) for n in calls]
    where = next((place for place in places if place), "")
    summary = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if config.strict:
        raise NeuronCompileError(
            f"neuron-mlir (strict): a graph of {len(calls)} call(s) cannot be traced to static shapes ({summary})"
            + (f" at {where}" if where else "")
        ) from error
    for node in calls:
        stats.record_fallback(getattr(node.target, "__name__", str(node.target)))
    warnings.warn(
        f"neuron-mlir: a graph of {len(calls)} call(s) depends on tensor values for its shapes ({summary}); "
        "it runs eagerly on the CPU",
        stacklevel=2,
    )
    return graph_module.forward
