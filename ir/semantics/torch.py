"""Reference semantics of the torch dialect: each op calls its ATen overload (`torch.ops.aten.<name>.<overload>`).

    outputs = run_torch_function(module, [x, w])           # NumPy in, NumPy out

The entry `func.func` may hold torch ops, `arith.constant` (dense tensor or scalar values) and `func.return`.
Arguments of each call are rebuilt from the op's operands and properties (`TorchOp.call_arguments`). Each
result is checked against its IR type, so an op whose type disagrees with what ATen computes is an error here
rather than a silent difference later. bfloat16 (and fp8) arrays are ml_dtypes NumPy arrays.

torch is imported inside the functions: loading this module (or `neuron-opt`) never imports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    ComplexType,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from neuron_mlir.ir.dialects.torch import (
    COALESCED_COLLECTIVE_KINDS,
    COLLECTIVE_KINDS,
    ArgSpec,
    PropKind,
    ResultKind,
    TorchOp,
    all_to_all_splits,
    dtype_name_for,
    process_group_ranks,
)
from neuron_mlir.ir.semantics.structured import InterpretationError
from neuron_mlir.runtime import collectives


class TorchInterpretationError(InterpretationError):
    """The function cannot be run: an unsupported op, or an op whose result disagrees with its type."""


_NUMPY_DTYPES: dict[str, Any] = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float32": np.float32,
    "float64": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
_ML_DTYPES = {"bfloat16": np.int16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8}
"""Types NumPy itself lacks, and the same-width integer type they cross the NumPy/torch border as."""


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The NumPy dtype of a builtin element type (ml_dtypes for bf16 and fp8)."""
    return np.dtype(_NUMPY_DTYPES[dtype_name_for(element_type)])


def to_torch(array: np.ndarray) -> Any:
    """A NumPy array as a torch tensor (a copy); ml_dtypes arrays go through a same-width integer view."""
    import torch  # noqa: TID251

    array = np.array(array, copy=True, order="C")
    for name, carrier in _ML_DTYPES.items():
        if array.dtype == np.dtype(_NUMPY_DTYPES[name]):
            return torch.from_numpy(array.view(carrier)).view(getattr(torch, name))
    return torch.from_numpy(array)


def to_numpy(tensor: Any) -> np.ndarray:
    """A torch tensor as a NumPy array (a copy), bf16 and fp8 as ml_dtypes arrays."""
    import torch  # noqa: TID251

    tensor = tensor.detach().cpu().contiguous()
    name = str(tensor.dtype).removeprefix("torch.")
    if name in _ML_DTYPES:
        carrier = {np.int16: torch.int16, np.uint8: torch.uint8}[_ML_DTYPES[name]]
        return tensor.view(carrier).numpy().view(_NUMPY_DTYPES[name]).copy()
    return tensor.numpy().copy()


def _torch_value(spec: ArgSpec, value: object) -> object:
    """A property's Python value as ATen expects it (dtypes, layouts, memory formats, devices)."""
    import torch  # noqa: TID251

    match spec.prop:
        case PropKind.SCALAR_TYPE:
            assert isinstance(value, Attribute)
            return getattr(torch, dtype_name_for(value))
        case PropKind.LAYOUT | PropKind.MEMORY_FORMAT:
            return getattr(torch, str(value))
        case PropKind.DEVICE:
            return torch.device(str(value))
        case _:
            return value


def _constant(op: arith.ConstantOp) -> Any:
    value = op.value
    if isinstance(value, DenseIntOrFPElementsAttr):
        element_type = value.get_element_type()
        values = np.array(value.get_values())
        if isinstance(element_type, ComplexType):
            values = values[..., 0] + 1j * values[..., 1]
        array = values.astype(numpy_dtype(element_type)).reshape(value.get_shape())
        return to_torch(array)
    if isinstance(value, IntegerAttr | FloatAttr):
        return value.value.data
    raise TorchInterpretationError(f"arith.constant: unsupported value {value}", op)


_RESHAPING_VIEWS = frozenset({"aten::view", "aten::_unsafe_view"})


# Products whose `alpha` ATen hands to the BLAS with the factors: where a non-finite alpha enters depends on the
# BLAS and the CPU (MKL scales the first factor's elements on some processors, the product on others: NaN from
# inf * 0 and from infinities of both signs on one, an infinity on the other). The semantics fixes one order,
# the lowering's: alpha scales the first factor's elements (`convert_torch_to_tile/matmul.py`), the same on
# every host.
_ALPHA_SCALED_FACTOR = {"aten::addmm": "mat1", "aten::addbmm": "batch1"}


def _run_on_cpu(aten_op: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The overload's result on the CPU: its own kernel, or, for the few ops ATen only has for accelerators
    (`_fused_rms_norm_backward`), its registered decomposition, which states what the op computes."""
    from torch._decomp import decomposition_table  # noqa: TID251

    factor = _ALPHA_SCALED_FACTOR.get(aten_op._schema.name)
    alpha = kwargs.get("alpha", 1)
    if factor is not None and not math.isfinite(alpha):
        position = next(i for i, a in enumerate(aten_op._schema.arguments) if a.name == factor)
        args = [alpha * a if i == position else a for i, a in enumerate(args)]
        kwargs = {**kwargs, "alpha": 1}
    try:
        return aten_op(*args, **kwargs)
    except NotImplementedError:
        decomposition = decomposition_table.get(aten_op)
        if decomposition is None:
            raise
        return decomposition(*args, **kwargs)


def _call(op: TorchOp, operand_values: Sequence[object], widened: bool = False) -> list[object]:
    """Run one torch op by calling its ATen overload; returns one value per result (a float result of any width
    where the IR says float when `widened`, see `run_torch_function`)."""
    import torch  # noqa: TID251

    schema = op.SCHEMA
    if schema.overload_name.startswith("_c10d_functional::"):
        return _collective(op, operand_values)
    packet_name, _, overload = schema.overload_name.removeprefix("aten::").partition(".")
    aten_op = getattr(getattr(torch.ops.aten, packet_name), overload or "default")
    if schema.overload_name in _RESHAPING_VIEWS:
        # Value semantics: strides are not part of a value, so a view of what ATen left strided (once a copy
        # before it was folded away) means the reshape it is; other ops see ATen's own layouts, bit for bit.
        operand_values = [v.contiguous() if isinstance(v, torch.Tensor) else v for v in operand_values]
    args, kwargs = op.call_arguments(operand_values, _torch_value)
    # Value semantics: an argument ATen writes to (`Tensor(a!)`) gets a copy, so the SSA value stays unchanged.
    for position, spec in enumerate(a for a in schema.args if not a.kwarg_only):
        if spec.mutable and isinstance(argument := args[position], torch.Tensor):
            args[position] = argument.clone()
    for spec in schema.args:
        if spec.mutable and spec.kwarg_only and isinstance(argument := kwargs[spec.name], torch.Tensor):
            kwargs[spec.name] = argument.clone()
    try:
        returned = _run_on_cpu(aten_op, args, kwargs)
    except (RuntimeError, ValueError, TypeError, IndexError) as error:
        # ATen checks what the op's verifier does not (values, and some shape rules): its refusal is this op's
        raise TorchInterpretationError(f"{op.name}: ATen refuses its operands: {_first_line(error)}", op) from error
    if not schema.results:
        return []  # an op run for its effect (an assertion)
    if len(schema.results) == 1 and schema.results[0].kind is not ResultKind.TENSOR_LIST:
        returned = [returned]
    elif len(schema.results) == 1:
        returned = list(returned)
    else:
        returned = [v for r, group in zip(schema.results, returned, strict=True) for v in _flatten(r.kind, group)]
    if len(returned) != len(op.results):
        raise TorchInterpretationError(
            f"{op.name}: ATen returned {len(returned)} values for {len(op.results)} results", op
        )
    for result, value in zip(op.results, returned, strict=True):
        _check_result(op, result, value, widened)
    return returned


def _collective(op: TorchOp, operand_values: Sequence[object]) -> list[object]:
    """A functional collective: the exchange through the injected transport (`runtime.collectives`), with the
    ranks the module records for its group; `wait_tensor` is its input; a coalesced form exchanges each tensor
    of its list in turn."""
    import torch  # noqa: TID251

    tensors = [v for v in operand_values if isinstance(v, torch.Tensor)]  # a coalesced form's list, flattened
    kind = COLLECTIVE_KINDS.get(op.name) or COALESCED_COLLECTIVE_KINDS.get(op.name)
    if kind is None:  # wait_tensor
        return [tensors[0]]
    arguments = op.arguments()
    ranks = process_group_ranks(op, str(arguments["group_name"]))
    if ranks is None:
        name = arguments["group_name"]
        raise TorchInterpretationError(f"{op.name}: the module names no ranks for the group '{name}'", op)
    reduction = str(arguments.get("reduce_op", "sum")).lower()
    root = int(str(arguments["src"])) if kind == "broadcast" else 0
    splits = (all_to_all_splits(op) if kind == "all_to_all" else None) or ((), ())
    results: list[object] = []
    for index, value in enumerate(tensors):
        try:
            flat = collectives.execute(kind, to_numpy(value).reshape(-1), (ranks,), reduction, root, splits)
        except collectives.CollectiveError as error:
            raise TorchInterpretationError(f"{op.name}: {error}", op) from error
        result_type = op.results[index].type
        assert isinstance(result_type, TensorType)
        returned = to_torch(flat.reshape(result_type.get_shape()))
        _check_result(op, op.results[index], returned)
        results.append(returned)
    return results


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def evaluate_op(op: TorchOp, operand_values: Sequence[object]) -> list[object]:
    """One op's results (torch values) on torch operand values, by calling its ATen overload; each result is
    checked against its IR type. Constant folding uses this."""
    return _call(op, operand_values)


def _flatten(kind: ResultKind, value: Any) -> list[Any]:
    return list(value) if kind is ResultKind.TENSOR_LIST else [value]


def _check_result(op: Operation, result: SSAValue, value: Any, widened: bool = False) -> None:
    import torch  # noqa: TID251

    result_type = result.type
    if not isinstance(result_type, TensorType) or value is None:
        return  # None: ATen's undefined tensor for a result it did not compute (e.g. an RNN workspace in eval)
    if not isinstance(value, torch.Tensor):
        raise TorchInterpretationError(f"{op.name}: ATen returned {type(value).__name__} for a tensor result", op)
    if value.layout != torch.strided:
        raise TorchInterpretationError(f"{op.name}: ATen returned a {value.layout} tensor, the IR's are dense", op)
    expected_dtype = getattr(torch, dtype_name_for(result_type.get_element_type()))
    shape = tuple(result_type.get_shape())
    matches = len(shape) == value.dim() and all(e < 0 or e == f for e, f in zip(shape, value.shape, strict=True))
    same_kind = widened and value.dtype.is_floating_point and expected_dtype.is_floating_point
    if (value.dtype != expected_dtype and not same_kind) or not matches:
        raise TorchInterpretationError(
            f"{op.name}: ATen computed {tuple(value.shape)} {value.dtype}, the IR says {result_type}", op
        )


def _output(value: Any, result_type: Attribute) -> np.ndarray:
    import torch  # noqa: TID251

    if isinstance(value, torch.Tensor):
        return to_numpy(value)
    if isinstance(result_type, IndexType):
        return np.asarray(value, dtype=np.int64)
    if isinstance(result_type, TensorType):
        raise TorchInterpretationError(f"a {result_type} result holds {type(value).__name__}, not a tensor")
    return np.asarray(value, dtype=numpy_dtype(result_type))


def run_torch_function(
    module: ModuleOp, inputs: Sequence[np.ndarray], entry: str = "main", widened: bool = False
) -> list[np.ndarray]:
    """Run `func.func @<entry>` of `module` on NumPy inputs by calling each op's ATen overload.

    `widened`: the float inputs in float64 and each op on what its operands are (a float result of any width
    where the IR says float): the float64 golden run that low-precision results are judged against
    (`compare.golden_mismatch`), where ATen's own bf16 kernels round more than the compiled program does."""
    function = next(
        (op for op in module.walk() if isinstance(op, func.FuncOp) and op.sym_name.data == entry),
        None,
    )
    if function is None:
        raise TorchInterpretationError(f"no func.func @{entry} in the module")
    block = function.body.block
    if len(inputs) != len(block.args):
        raise TorchInterpretationError(f"@{entry} takes {len(block.args)} arguments, got {len(inputs)}")
    values: dict[SSAValue, Any] = {}
    for index, (argument, array) in enumerate(zip(block.args, inputs, strict=True)):
        array = np.asarray(array)
        if isinstance(argument.type, TensorType):
            expected = numpy_dtype(argument.type.get_element_type())
            if widened and _is_float(expected):
                array, expected = array.astype(np.float64), np.dtype(np.float64)
            shape = argument.type.get_shape()
            fits = len(shape) == array.ndim and all(e < 0 or e == f for e, f in zip(shape, array.shape, strict=True))
            if array.dtype != expected or not fits:
                raise TorchInterpretationError(
                    f"@{entry} argument {index} is {argument.type}, got a {array.shape} {array.dtype} array"
                )
        values[argument] = to_torch(array)
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            return [_output(values[v], v.type) for v in op.arguments]
        if isinstance(op, arith.ConstantOp):
            values[op.result] = _constant(op)
        elif isinstance(op, TorchOp):
            results = _call(op, [values[v] for v in op.operands], widened)
            values.update(zip(op.results, results, strict=True))
        else:
            raise TorchInterpretationError(f"{op.name} has no torch-level semantics", op)
    raise TorchInterpretationError(f"@{entry} does not end with func.return")


def _is_float(dtype: np.dtype) -> bool:
    """Whether a NumPy dtype (ml_dtypes' too) is a real floating-point type."""
    try:
        np.finfo(dtype)
    except ValueError:
        return False
    return dtype.kind != "c"
