"""convert-torch-to-tile: torch-dialect graphs become tile loop nests over HBM tensors.

Input contract: `func.func`s whose bodies are flat lists of torch ops on statically shaped `tensor<...>` values
(as the FX importer produces), ending in `func.return`.

Output guarantee: no torch op and no `tensor` type remains. Function arguments are row-major HBM memrefs
(`#mem<hbm>`); each torch op became either a `tile.view` of its input (view ops) or a `memref.alloc`ed
HBM tensor filled by one loop nest of `tile` ops; results may be views of other tensors. Every created op carries
the location of the torch op it came from.

Legality is decided before anything is converted: `legality(op)` says whether the pass lowers a torch op, from
the op alone (a lowering for its name, storage types for its tensors, and its family's `legal` check of its
arguments), and the pass asks it of every op first. An illegal op fails the pass with a `NotLowerable`
diagnostic naming the op, the rule it breaks and the user's source line (the frontend asks the same question of
every node before compiling, and sends the illegal ones to the CPU). A lowering that then raises anyway has a
bug: the pass fails with a `LoweringInternalError` naming the op, its line and the exception.

Lowerings are grouped by family, each module exporting a `name -> lowering` table and its `legal` check (`FAMILIES`
lists them): views.py, elementwise.py, activations.py, normalization.py, scan.py, sort.py, random.py, matmul.py,
reduction.py, softmax.py, attention.py, attention_backward.py, movement.py, convolution.py, pooling.py, indexing.py,
loss.py, distance.py, sampling.py, collectives.py (the functional collectives, as `tile.collective`s), kernels.py
(calls of NKI kernels registered as torch ops, as `tile.nki_kernel`s). The pass decides no fusion between ops; it
follows two kinds of mark the torch stage left, where the IR still bears them out and the tile level's limits allow:
the ops an RMS norm computes from the rows it holds (its input's upcast, its result's scaling:
torch-fuse-rms-norm-neighbours, normalization.py), and cross-entropy's backward, where the log-softmax backward
computes the nll_loss_backward it alone reads without that tensor ever existing (torch-fuse-cross-entropy-backward,
loss.py). And it reads through exact widenings: a matmul or convolution whose multiplied operands are fp32 widenings
of 16-bit values (`_to_copy(x16, f32)`, torch-auto-cast's casts) multiplies the 16-bit values, and a bf16 rounding
of fp32 that only such matmuls read is done by their DMAs (`narrowed_operands`): neither cast gets a loop nest of
its own. Otherwise each op gets its own loop nest, which tile-level passes then fuse (tile-fuse-epilogues folds an
elementwise op of a matmul's result into the matmul's stores, tile-fuse-matmul-prologues computes a layer norm that
only a matmul reads in that matmul's panel, tile-fuse-matmul-chains a Linear layer and its activation in the next
Linear layer's panel). An op whose results all hold no element lowers to views of a one-element allocation, whatever
its family. A function with random ops gets a trailing `%rng_seed: memref<1xi32>` argument (random.py). A
function with size arguments (`neuron.size_arguments`, from a size bucket) gets one `index` argument per size after its
tensors; the elementwise family bounds its loops over a dimension an op's `neuron.size_bounds` names by that
argument, so it writes the real rows only (elementwise.py), and a 2-D matmul whose rows are merged from size
arguments (`"s0*s1"`: token rows `[b*s, h]`) loops over their factors, each bounded by its argument (matmul.py).

What the lowerings of one function share (absorbed ops, index constants) lives in a
`ConversionContext` made for that function (context.py), never in module state: a conversion depends on its
input alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    Float8E4M3FNType,
    Float8E5M2Type,
    FunctionType,
    IndexType,
    MemRefType,
    ModuleOp,
    TensorType,
    bf16,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.torch import size_arguments
from neuron_mlir.ir.locations import at_source
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.convert_torch_to_tile import (
    activations,
    attention,
    attention_backward,
    collectives,
    convolution,
    distance,
    elementwise,
    indexing,
    kernels,
    loss,
    matmul,
    movement,
    normalization,
    pooling,
    random,
    reduction,
    sampling,
    scan,
    softmax,
    sort,
    views,
)
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Legality,
    Lowering,
    LoweringInternalError,
    NotLowerable,
    empty_tensor,
)
from neuron_mlir.lowering.convert_torch_to_tile.context import ConversionContext, absorber
from neuron_mlir.lowering.convert_torch_to_tile.views import VIEW_LOWERINGS
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.lowering.loop_nests import LoopNestBuilder
from neuron_mlir.lowering.torch_auto_cast import CONVERTS_ON_LOAD, MATMUL_OPERANDS, is_plain_cast, widened_source
from neuron_mlir.runtime.dtypes import DTYPES

# (lowerings, legality) of each family, in the order their tables overlay each other
FAMILIES: tuple[tuple[dict[str, Lowering], Legality], ...] = (
    (VIEW_LOWERINGS, views.legal),
    (elementwise.ELEMENTWISE_LOWERINGS, elementwise.legal),
    (activations.ACTIVATION_LOWERINGS, activations.legal),
    (normalization.NORMALIZATION_LOWERINGS, normalization.legal),
    (scan.SCAN_LOWERINGS, scan.legal),
    (sort.SORT_LOWERINGS, sort.legal),
    (random.RANDOM_LOWERINGS, random.legal),
    (matmul.MATMUL_LOWERINGS, matmul.legal),
    (reduction.REDUCTION_LOWERINGS, reduction.legal),
    (softmax.SOFTMAX_LOWERINGS, softmax.legal),
    (attention.ATTENTION_LOWERINGS, attention.legal),
    (attention_backward.ATTENTION_BACKWARD_LOWERINGS, attention_backward.legal),
    (movement.MOVEMENT_LOWERINGS, movement.legal),
    (convolution.CONVOLUTION_LOWERINGS, convolution.legal),
    (pooling.POOLING_LOWERINGS, pooling.legal),
    (indexing.INDEXING_LOWERINGS, indexing.legal),
    (loss.LOSS_LOWERINGS, loss.legal),
    (distance.DISTANCE_LOWERINGS, distance.legal),
    (sampling.SAMPLING_LOWERINGS, sampling.legal),
    (collectives.COLLECTIVE_LOWERINGS, collectives.legal),
    (kernels.KERNEL_LOWERINGS, kernels.legal),
)

LOWERINGS: dict[str, Lowering] = {name: lowering for table, _ in FAMILIES for name, lowering in table.items()}
LEGALITY: dict[str, Legality] = {name: legal for table, legal in FAMILIES for name in table}


def is_lowerable(op_name: str) -> bool:
    """Whether convert-torch-to-tile has a lowering for the torch op called `op_name` (for some arguments)."""
    return op_name in LOWERINGS


def _storage_problem(value_type: object) -> str | None:
    """Why a tensor of `value_type` cannot live in HBM (its element type has no NeuronCore storage type)."""
    if not isinstance(value_type, TensorType):
        return None
    try:
        name = runtime_dtype_name(value_type.element_type)
    except ValueError:
        name = str(value_type.element_type)
    return None if name in DTYPES else f"element type {value_type.element_type} has no NeuronCore storage type"


def legality(op: Operation) -> str | None:
    """Why convert-torch-to-tile does not lower the torch op `op` (None when it does): no lowering for its name,
    a tensor without a storage type, or the rule of its family's `legal` check it breaks. Pure: it reads the op's
    types and attributes (and the module's target), nothing that other ops lower to."""
    if op.name not in LOWERINGS:
        return "no lowering to the tile dialect yet"
    for value in (*op.results, *op.operands):
        if (problem := _storage_problem(value.type)) is not None:
            return problem
    tensor_results = [result for result in op.results if isinstance(result.type, TensorType)]
    if tensor_results and all(0 in result.type.get_shape() for result in tensor_results):  # type: ignore[attr-defined]
        return None  # nothing to compute: every result lowers to a view of a one-element allocation
    return LEGALITY[op.name](op)


def _check_legality(module: ModuleOp) -> None:
    """Fail on the first op (or function argument) the pass does not lower, before converting anything."""
    for function in defined_functions(module):
        size_arguments(function)  # a malformed table is refused at the function
        for argument in function.body.block.args:
            if (problem := _storage_problem(argument.type)) is not None:
                raise _not_lowerable(function, problem)
        for op in function.body.block.ops:
            if op.name.startswith("torch."):
                if (problem := legality(op)) is not None:
                    raise _not_lowerable(op, problem)
            elif not isinstance(op, func.ReturnOp) and (op.regions or _touches_tensors(op)):
                # the conversion rewrites the torch ops and the return only: anything else that reads a tensor
                # would be left reading a value that no longer exists
                raise _not_lowerable(
                    op,
                    "convert-torch-to-tile lowers a flat list of torch ops: an op of another dialect may neither "
                    "read nor make tensors, nor hold regions",
                )


def _touches_tensors(op: Operation) -> bool:
    return any(isinstance(value.type, TensorType) for value in (*op.operands, *op.results))


@dataclass(frozen=True)
class ConvertTorchToTilePass(ModulePass):
    name = "convert-torch-to-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _check_legality(op)
        for function in defined_functions(op):
            _convert_function(function)


def _not_lowerable(op: Operation, reason: str) -> NotLowerable:
    return NotLowerable(f"{op.name}: {reason}{at_source(op)}", op)


def _hbm_for(value: SSAValue) -> MemRefType:
    tensor_type = value.type
    assert isinstance(tensor_type, TensorType)
    return tile.hbm_type(tensor_type.get_shape(), tensor_type.element_type)


@dataclass
class NarrowedOperands:
    """How matmul-shaped ops read operands that are fp32 widenings of 16-bit values (`narrowed_operands`)."""

    sources: dict[Operation, dict[str, SSAValue]]
    """op -> operand name -> the tensor it reads instead of the widening."""
    converted: dict[Operation, dict[SSAValue, Attribute]]
    """op -> fp32 tensor among its `sources` -> the 16-bit type its DMAs convert it to (the rounding is skipped)."""
    unneeded: set[Operation]
    """Widenings and roundings no reader needs any more: they are not lowered."""


def narrowed_operands(block: Block) -> NarrowedOperands:
    """Matmul-shaped ops that TensorE can feed 16-bit operands, and the casts that then need no loop nest.

    When every multiplied operand of an fp32 matmul-shaped op (`torch_auto_cast.MATMUL_OPERANDS`) is the exact
    fp32 widening of a tensor of one 16-bit float type or of fp8 types (`_to_copy(x16, f32)`, as torch-auto-cast
    writes them, or `_to_copy(x8, f32)`, as a scaled fp8 matmul decomposes), the products are those of the narrow
    values, exact in fp32: TensorE computes the same result from the narrow tensors themselves, at their rate and
    from a half or a quarter of the bytes, and the widenings nothing else reads are not
    lowered. When such a 16-bit tensor, or a multiplied operand of a bf16 matmul, is the bf16 rounding of an fp32
    tensor (`_to_copy(x32, bf16)`) that only ops of `CONVERTS_ON_LOAD` multiply (directly or through skipped
    widenings), those ops read the fp32 tensor and their DMAs round it as they load: the rounding gets no loop
    nest (no HBM round trip) either."""
    sources: dict[Operation, dict[str, SSAValue]] = {}
    for op in block.ops:
        names = MATMUL_OPERANDS.get(op.name)
        if names is None:
            continue
        arguments = op.arguments()
        values = [arguments.get(name) for name in names]
        narrow = [widened_source(value) if isinstance(value, SSAValue) else None for value in values]
        if any(source is None for source in narrow):
            continue
        if not _one_matmul_family({source.type.element_type for source in narrow}):  # type: ignore[union-attr]
            continue
        sources[op] = {name: source for name, source in zip(names, narrow, strict=True)}  # type: ignore[misc]
    unneeded: set[Operation] = set()
    for op, operands in sources.items():
        arguments = op.arguments()  # type: ignore[attr-defined]
        for name in operands:
            widening = arguments[name].owner
            if all(_reads_narrowed(use.operation, widening.results[0], sources) for use in widening.results[0].uses):
                unneeded.add(widening)
    converted: dict[Operation, dict[SSAValue, Attribute]] = {}
    roundings = {source.owner for operands in sources.values() for source in operands.values()}
    for op in block.ops:
        if op.name in CONVERTS_ON_LOAD:
            arguments = op.arguments()
            roundings |= {arguments[name].owner for name in MATMUL_OPERANDS[op.name]}
    for rounding in roundings:
        readers = _readers_of_rounding(rounding, unneeded)
        if readers is None:
            continue
        assert isinstance(rounding, Operation)
        unneeded.add(rounding)
        wide, narrow_type = rounding.operands[0], rounding.results[0].type.element_type  # type: ignore[attr-defined]
        for reader in readers:
            operands = sources.setdefault(reader, {})
            arguments = reader.arguments()  # type: ignore[attr-defined]
            for name in MATMUL_OPERANDS[reader.name]:
                if rounding.results[0] in (arguments[name], operands.get(name)):
                    operands[name] = wide
            converted.setdefault(reader, {})[wide] = narrow_type
    return NarrowedOperands(sources, converted, unneeded)


def _one_matmul_family(types: set[Attribute]) -> bool:
    """Whether TensorE multiplies operands of these 16- or 8-bit types together: one type, or fp8 types only (an
    e4m3 activation times an e5m2 gradient, as fp8 training's backward has)."""
    return len(types) == 1 or all(isinstance(t, Float8E4M3FNType | Float8E5M2Type) for t in types)


def _readers_of_rounding(rounding: Operation | Block, unneeded: set[Operation]) -> list[Operation] | None:
    """The matmuls that read `rounding`, a bf16 rounding of fp32, when they are all it has (as a multiplied operand,
    directly or through widenings in `unneeded`) and all of `CONVERTS_ON_LOAD`; else None."""
    if not _rounds_fp32(rounding):
        return None
    assert isinstance(rounding, Operation)
    readers: list[Operation] = []
    for use in rounding.results[0].uses:
        user = use.operation
        if user in unneeded:  # a widening whose readers all read `rounding` instead
            readers.extend(widening_use.operation for widening_use in user.results[0].uses)
        elif user.name in CONVERTS_ON_LOAD and _multiplies_only(user, rounding.results[0]):
            readers.append(user)
        else:
            return None
    return readers if all(reader.name in CONVERTS_ON_LOAD for reader in readers) else None


def _multiplies_only(op: Operation, value: SSAValue) -> bool:
    """Whether `op` reads `value` only as operands it multiplies (not as addmm's bias)."""
    names = MATMUL_OPERANDS[op.name]
    arguments = op.arguments()  # type: ignore[attr-defined]
    return all(argument is not value or name in names for name, argument in arguments.items())


def _rounds_fp32(op: Operation | Block) -> bool:
    """Whether `op` is a plain `_to_copy` of an fp32 tensor to bf16 that rounds to nearest (a DMA's conversion; a
    stochastically rounded cast keeps its loop nest)."""
    if not isinstance(op, Operation) or not is_plain_cast(op) or random.rounds_stochastically(op):
        return False
    wide, narrow = op.operands[0].type, op.results[0].type
    return (
        isinstance(wide, TensorType)
        and isinstance(narrow, TensorType)
        and wide.element_type == f32
        and (narrow.element_type == bf16)
    )


def _reads_narrowed(reader: Operation, widened: SSAValue, sources: dict[Operation, dict[str, SSAValue]]) -> bool:
    """Whether every operand of `reader` that is `widened` is one it reads narrowed."""
    operands = sources.get(reader)
    if operands is None:
        return False
    arguments = reader.arguments()  # type: ignore[attr-defined]
    return all(value is not widened or name in operands for name, value in arguments.items())


def _convert_function(function: func.FuncOp) -> None:
    block: Block = function.body.block
    narrowed = narrowed_operands(block)
    context = ConversionContext()
    mapping = context.lowered
    old_args = [arg for arg in block.args if isinstance(arg.type, TensorType)]
    for arg in old_args:
        new_arg = block.insert_arg(_hbm_for(arg), len(block.args))
        new_arg.name_hint = arg.name_hint
        mapping[arg] = new_arg
    for size in size_arguments(function):
        # after the tensors: the translation makes them the program's scalar inputs, in this order
        size_arg = block.insert_arg(IndexType(), len(block.args))
        size_arg.name_hint = size.name
        context.size_arguments[size.name] = size_arg
        context.size_extents[size.name] = size.upper

    def mapped(value: Any) -> Any:
        if isinstance(value, SSAValue):
            return mapping.get(value, value)
        if isinstance(value, list | tuple):
            return [mapped(v) for v in value]
        return value

    lowered: list[Operation] = []
    for op in list(block.ops):
        if isinstance(op, func.ReturnOp):
            returned = {str(index): mapped(v) for index, v in enumerate(op.operands)}
            new_return = func.ReturnOp(*returned.values())
            new_return.location = op.location
            block.insert_op_before(new_return, op)
            op.detach()
            op.erase()
            continue
        if not op.name.startswith("torch."):
            continue
        if op in narrowed.unneeded:  # a cast whose readers read its operand instead
            lowered.append(op)
            continue
        lowering = LOWERINGS[op.name]
        tensor_results = [result for result in op.results if isinstance(result.type, TensorType)]
        arguments = {name: mapped(value) for name, value in op.arguments().items()}  # type: ignore[attr-defined]
        arguments |= {name: mapping[source] for name, source in narrowed.sources.get(op, {}).items()}
        context.narrow_loads = {mapping[wide]: narrow for wide, narrow in narrowed.converted.get(op, {}).items()}
        emitter = LoopNestBuilder(block, op, op.location, context.constants, block, context)
        results: Sequence[SSAValue | None]
        try:
            if tensor_results and all(0 in result.type.get_shape() for result in tensor_results):  # type: ignore[attr-defined]
                # nothing to compute: every result holds no element
                results = [
                    empty_tensor(emitter, r.type) if isinstance(r.type, TensorType) else None for r in op.results
                ]
            else:
                absorbing = absorber(emitter, op)
                if absorbing is not None:  # computed by an earlier op's loop nest
                    results = absorbing(emitter, op, arguments)
                else:
                    results = lowering(emitter, op, arguments)
        except Exception as error:  # the op was legal: whatever its lowering raised is a bug of the compiler
            raise LoweringInternalError(op, error) from error
        for old, new in zip(op.results, results, strict=True):
            if new is None:  # a result ATen leaves undefined (type `none`)
                continue
            if old.name_hint and new.name_hint is None:
                new.name_hint = old.name_hint
            mapping[old] = new
        lowered.append(op)

    for op in reversed(lowered):
        op.detach()
        op.erase(safe_erase=False)
    for arg in old_args:
        block.erase_arg(arg, safe_erase=False)
    terminator = block.last_op
    outputs = [v.type for v in terminator.operands] if isinstance(terminator, func.ReturnOp) else []
    function.properties["function_type"] = FunctionType.from_lists([a.type for a in block.args], outputs)
