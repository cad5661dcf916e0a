"""convert-torch-to-tile: torch-dialect graphs become tile loop nests over HBM tensors.

Input contract: `func.func`s whose bodies are flat lists of torch ops on statically shaped `tensor<...>` values
(as the FX importer produces), ending in `func.return`.

Output guarantee: no torch op and no `tensor` type remains. Function arguments are row-major HBM memrefs
(`#neuron.mem<hbm>`); each torch op became either a `tile.view` of its input (view ops) or a `memref.alloc`ed
HBM tensor filled by one loop nest of `tile` ops; results may be views of other tensors. Every created op carries
the location of the torch op it came from. An op without a lowering (for these arguments) fails the pass with a
`LoweringRefused` diagnostic naming the op, the reason and the user's source line, and carrying the op's result
name so that the frontend can run that node on the CPU instead.

Lowerings are grouped by family, each module exporting a `name -> lowering` table: views.py, elementwise.py,
matmul.py, reduction.py, softmax.py, attention.py, movement.py,
convolution.py, pooling.py, indexing.py, distance.py, sampling.py, activations.py, normalization.py, scan.py, sort.py,
random.py. An elementwise op taking a matmul's result (and nothing else using it) runs in the matmul's epilogue
(epilogue.py); a layer norm whose only user is a matmul runs in the matmul's prologue (prologue.py), and so
does a Linear layer and its activation read only by another Linear layer (matmul_chain.py). An op
whose results all hold no element lowers to views of a one-element allocation, whatever its
family. A function with random ops gets a trailing `%rng_seed: memref<1xi32>` argument (random.py).

What the lowerings of one function share (deferred producers, absorbed ops, index constants) lives in a
`ConversionContext` made for that function (context.py), never in module state: a conversion depends on its
input alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.locations import OpDiagnostic, describe_location
from neuron_mlir.ir.types import runtime_dtype_name
from neuron_mlir.lowering.convert_torch_to_tile.activations import ACTIVATION_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.attention import ATTENTION_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.common import Lowering, LoweringRefused, empty_tensor
from neuron_mlir.lowering.convert_torch_to_tile.context import ConversionContext
from neuron_mlir.lowering.convert_torch_to_tile.convolution import CONVOLUTION_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.distance import DISTANCE_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import ELEMENTWISE_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.epilogue import fuse_into_producer
from neuron_mlir.lowering.convert_torch_to_tile.indexing import INDEXING_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.matmul import MATMUL_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.matmul_chain import CHAIN_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.movement import MOVEMENT_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.normalization import NORMALIZATION_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.pooling import POOLING_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.prologue import MATMUL_CONSUMERS, absorber, materialize_operands
from neuron_mlir.lowering.convert_torch_to_tile.random import RANDOM_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.reduction import REDUCTION_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.sampling import SAMPLING_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.scan import SCAN_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.softmax import SOFTMAX_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.sort import SORT_LOWERINGS
from neuron_mlir.lowering.convert_torch_to_tile.views import VIEW_LOWERINGS
from neuron_mlir.lowering.emitter import Emitter
from neuron_mlir.runtime.dtypes import DTYPES

LOWERINGS: dict[str, Lowering] = {
    **VIEW_LOWERINGS,
    **ELEMENTWISE_LOWERINGS,
    **ACTIVATION_LOWERINGS,
    **NORMALIZATION_LOWERINGS,
    **SCAN_LOWERINGS,
    **SORT_LOWERINGS,
    **RANDOM_LOWERINGS,
    **MATMUL_LOWERINGS,
    **CHAIN_LOWERINGS,
    **REDUCTION_LOWERINGS,
    **SOFTMAX_LOWERINGS,
    **ATTENTION_LOWERINGS,
    **MOVEMENT_LOWERINGS,
    **CONVOLUTION_LOWERINGS,
    **POOLING_LOWERINGS,
    **INDEXING_LOWERINGS,
    **DISTANCE_LOWERINGS,
    **SAMPLING_LOWERINGS,
}


def is_lowerable(op_name: str) -> bool:
    """Whether convert-torch-to-tile has a lowering for the torch op called `op_name`."""
    return op_name in LOWERINGS


@dataclass(frozen=True)
class ConvertTorchToTilePass(ModulePass):
    name = "convert-torch-to-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            if not function.is_declaration:
                _convert_function(function)


def _diagnostic(op: Operation, reason: str) -> PassFailedException:
    where = describe_location(op.location)
    return OpDiagnostic(f"{op.name}: {reason}" + (f" (at {where})" if where else ""), op)


def _sole_use(value: SSAValue) -> bool:
    """Whether tensor `value` has one user and, when a view op produces it, that view op is the only user of each
    of its own tensor operands, recursively (so the producer under the views dies with the user)."""
    if not value.has_one_use():
        return False
    producer = value.owner
    if not isinstance(producer, Operation) or producer.name not in VIEW_LOWERINGS:
        return True
    tensors = [operand for operand in producer.operands if isinstance(operand.type, TensorType)]
    return bool(tensors) and all(_sole_use(operand) for operand in tensors)


def _value_name(op: Operation) -> str | None:
    return op.results[0].name_hint if op.results else None


def _refusal(op: Operation, reason: str) -> LoweringRefused:
    where = describe_location(op.location)
    return LoweringRefused(f"{op.name}: {reason}" + (f" (at {where})" if where else ""), _value_name(op), op)


def _hbm_for(value: SSAValue, op: Operation) -> tile.MemRefType:
    tensor_type = value.type
    assert isinstance(tensor_type, TensorType)
    try:
        name = runtime_dtype_name(tensor_type.element_type)
    except ValueError:
        name = str(tensor_type.element_type)
    if name not in DTYPES:
        raise _diagnostic(op, f"element type {tensor_type.element_type} has no NeuronCore storage type")
    return tile.hbm_type(tensor_type.get_shape(), tensor_type.element_type)


def _convert_function(function: func.FuncOp) -> None:
    block: Block = function.body.block
    mapping: dict[SSAValue, SSAValue] = {}
    old_args = [arg for arg in block.args if isinstance(arg.type, TensorType)]
    for arg in old_args:
        new_arg = block.insert_arg(_hbm_for(arg, function), len(block.args))
        new_arg.name_hint = arg.name_hint
        mapping[arg] = new_arg

    def mapped(value: Any) -> Any:
        if isinstance(value, SSAValue):
            return mapping.get(value, value)
        if isinstance(value, list | tuple):
            return [mapped(v) for v in value]
        return value

    context = ConversionContext()
    lowered: list[Operation] = []
    for op in list(block.ops):
        if isinstance(op, func.ReturnOp):
            new_return = func.ReturnOp(*[mapped(v) for v in op.operands])
            new_return.location = op.location
            block.insert_op_before(new_return, op)
            op.detach()
            op.erase()
            continue
        if not op.name.startswith("torch."):
            continue
        lowering = LOWERINGS.get(op.name)
        if lowering is None:
            raise _refusal(op, "no lowering to the tile dialect yet")
        tensor_results = [result for result in op.results if isinstance(result.type, TensorType)]
        for result in tensor_results:
            _hbm_for(result, op)
        arguments = {name: mapped(value) for name, value in op.arguments().items()}  # type: ignore[attr-defined]
        emitter = Emitter(block, op, op.location, context.constants, block, context)
        try:
            if tensor_results and all(0 in result.type.get_shape() for result in tensor_results):  # type: ignore[attr-defined]
                # nothing to compute: every result holds no element
                results = [
                    empty_tensor(emitter, r.type) if isinstance(r.type, TensorType) else None for r in op.results
                ]
            else:
                sole_uses = {
                    mapped(value) for value in op.operands if isinstance(value.type, TensorType) and _sole_use(value)
                }
                absorbing = absorber(emitter, op)
                if absorbing is not None:  # part of a deferred producer
                    results = absorbing(emitter, op, arguments)
                else:
                    if op.name not in VIEW_LOWERINGS and op.name not in MATMUL_CONSUMERS:
                        materialize_operands(emitter, arguments)  # deferred producers it reads
                    fused = fuse_into_producer(emitter, op, arguments, lowering, sole_uses)
                    results = fused if fused is not None else lowering(emitter, op, arguments)
        except LoweringRefused as refusal:
            refusal.value_name = _value_name(op)
            refusal.op = op
            raise
        except (ValueError, IndexError) as error:
            raise _refusal(op, str(error)) from error
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
