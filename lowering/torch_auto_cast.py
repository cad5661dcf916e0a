"""torch-auto-cast: fp32 graphs compute their matmuls (or nearly everything) in bf16, as the `auto_cast` option asks.

Input contract: torch-dialect functions (after torch-recognize-activations and torch-recognize-rms-norm, which
read the casts a model writes, not the ones this pass adds). The mode is the pass option `mode`, or else the
module's `neuron.auto_cast` string attribute (which the frontend sets from `options={"auto_cast": ...}`), or else
"none":

- "none": nothing changes; every op computes in the graph's own dtypes, as in eager.
- "matmul": each matmul-shaped op of fp32 operands and result (`MATMUL_OPERANDS`: mm, bmm, addmm, addbmm,
  convolution and its backward) reads its matrix operands rounded to bf16 and widened back to fp32 exactly,
  `_to_copy(_to_copy(x, bf16), f32)`; biases stay fp32 and so does the result. The products of bf16 values are
  exact in fp32, so the op computes what TensorE does on bf16 inputs with fp32 accumulation in PSUM; and
  convert-torch-to-tile, seeing an operand that is a widened 16-bit value, feeds TensorE the 16-bit value itself
  (at the bf16 rate) and never materialises the widened copy; the rounding itself it leaves to the DMAs that load
  the operand, when only matmuls read it.
- "all": every matmul-shaped op and every op of `BF16_OPS` (elementwise arithmetic and activations,
  concatenation, attention as one kernel) whose float operands and results are all fp32 computes in bf16, as
  under PyTorch's autocast: its float operands (biases too) are rounded to bf16 and its results are bf16 (a
  matmul's rounded from its fp32 accumulation), widened to fp32 for whichever reader is not itself such an op;
  views (`VIEWS`) of bf16 values are bf16 views. Reductions, normalizations and their statistics, softmax,
  losses, gathers and exp/log/pow-like functions keep fp32: they read the widened values. Chains of bf16 ops
  therefore pass bf16 tensors from one to the next (a rounding of a widened bf16 value is that value), and the
  graph's inputs and outputs keep their fp32 types.

In every mode, "none" included, a bf16 rounding of fp32 that reaches matmuls only through a `permute`
(`permute(_to_copy(w, bf16))`, as Dynamo writes an autocast region's Linear weight, and as torch-canonicalize
leaves a narrowing cast of a permuted weight) is moved after the permute: `_to_copy(permute(w), bf16)`. Rounding
commutes with reordering, so the values are the same; but a rounding that matmuls read directly is done by their
DMAs as they load (`CONVERTS_ON_LOAD`, convert-torch-to-tile), with no loop nest and no bf16 copy in HBM, where a
rounding read through a permute was a pass of its own. Only roundings to nearest move (not in a module compiled
with stochastic rounding, whose casts keep their loop nests).

Output guarantee: valid torch-dialect IR whose function signatures are unchanged, every added op carrying the
location of the op it serves. The rewritten graph's results differ from the input graph's by the rounding of
the operands named above to bf16 (the eager-vs-compiled comparison of such graphs uses bf16 tolerances); ops in
other dtypes (a bf16 or fp16 model, integer ops) are left alone. A mode the pass does not know is an error
naming it and the known modes; otherwise the pass never fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    ModuleOp,
    StringAttr,
    TensorType,
    bf16,
    f32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from neuron_mlir.ir.dialects.torch import TorchOp, op_class_for
from neuron_mlir.lowering.ir_queries import defined_functions

AUTO_CAST_ATTR = "neuron.auto_cast"
"""The module attribute holding the mode the frontend compiles with (`options={"auto_cast": ...}`)."""

MODES = ("none", "matmul", "all")

MATMUL_OPERANDS: dict[str, tuple[str, ...]] = {
    "torch.aten.mm": ("self", "mat2"),
    "torch.aten.bmm": ("self", "mat2"),
    "torch.aten.addmm": ("mat1", "mat2"),
    "torch.aten.addbmm": ("batch1", "batch2"),
    "torch.aten.convolution": ("input", "weight"),
    "torch.aten.convolution_backward": ("grad_output", "input", "weight"),
}
"""The ops TensorE computes, with the operands it multiplies (what "matmul" rounds to bf16)."""

CONVERTS_ON_LOAD = frozenset({"torch.aten.mm", "torch.aten.bmm", "torch.aten.addmm"})
"""Matmul-shaped ops whose lowering reads its multiplied operands through DMAs that may round fp32 to bf16 as they
load (convert-torch-to-tile's `matmul.emit_matmul`)."""

STOCHASTIC_ROUNDING_ATTR = "neuron.stochastic_rounding"
"""The module attribute (a unit attribute) under which casts from fp32 to bf16 round stochastically (the frontend
sets it from `options={"stochastic_rounding": True}`)."""

BF16_OPS = frozenset(
    {
        # elementwise arithmetic and activations, whose result dtype follows their float operands'
        "torch.aten.add.Tensor",
        "torch.aten.add.Scalar",
        "torch.aten.sub.Tensor",
        "torch.aten.sub.Scalar",
        "torch.aten.mul.Tensor",
        "torch.aten.mul.Scalar",
        "torch.aten.neg",
        "torch.aten.abs",
        "torch.aten.relu",
        "torch.aten.gelu",
        "torch.aten.silu",
        "torch.aten.sigmoid",
        "torch.aten.tanh",
        "torch.aten.maximum",
        "torch.aten.minimum",
        "torch.aten.clamp",
        "torch.aten.where.self",
        # data movement: a bf16 tensor moves half the bytes (views of bf16 values stay bf16: `VIEWS`)
        "torch.aten.cat",
        "torch.aten.clone",
        # attention as one kernel: its scores' softmax keeps fp32 statistics on chip, and its log-sum-exp is fp32
        "torch.aten._scaled_dot_product_flash_attention_for_cpu",
    }
)
"""The ops "all" computes in bf16 (the ops PyTorch's autocast lists keep in fp32 are not among them: sums and
means, norms, softmax, losses, exp, log, pow, reciprocal, rsqrt, cumulative ops). Gathers (embeddings) are not
either: the rows they gather are rounded, not the whole table."""

VIEWS = frozenset(
    {
        "torch.aten.view",
        "torch.aten._unsafe_view",
        "torch.aten.permute",
        "torch.aten.transpose.int",
        "torch.aten.t",
        "torch.aten.expand",
        "torch.aten.unsqueeze",
        "torch.aten.squeeze.dim",
        "torch.aten.squeeze.dims",
        "torch.aten.slice.Tensor",
        "torch.aten.select.int",
        "torch.aten.split_with_sizes",
        "torch.aten.alias",
    }
)
"""Views, which "all" makes bf16 when their operand is a bf16 value (a widening of one): a view of an fp32 tensor
(a Linear layer's transposed weight) stays fp32, and its readers round it, so that a matmul's DMAs may round it
as they load instead of a pass over the whole tensor."""

FP32_RESULTS: dict[str, tuple[int, ...]] = {"torch.aten._scaled_dot_product_flash_attention_for_cpu": (1,)}
"""Results that stay fp32 when their op computes in bf16 (as ATen computes them): attention's log-sum-exp."""

_NARROW_FLOATS = (BFloat16Type, Float16Type, Float8E4M3FNType, Float8E5M2Type)
# Types whose every value bf16 holds exactly (fp8's exponent range and mantissa fit inside bf16's): rounding their
# widening to bf16 changes nothing.
_WITHIN_BF16 = (BFloat16Type, Float8E4M3FNType, Float8E5M2Type)


def _element(value: SSAValue) -> Attribute | None:
    return value.type.element_type if isinstance(value.type, TensorType) else None


def _is_f32(value: SSAValue) -> bool:
    return isinstance(_element(value), Float32Type)


def is_plain_cast(op: Operation | None) -> bool:
    """Whether `op` is a `_to_copy` that changes nothing but the element type."""
    if not isinstance(op, TorchOp) or op.name != "torch.aten._to_copy":
        return False
    args = op.arguments()
    return args.get("layout") in (None, "strided") and args.get("memory_format") in (None, "preserve_format")


def widened_source(value: SSAValue) -> SSAValue | None:
    """The bf16, fp16 or fp8 tensor `value` is the exact fp32 widening of (`_to_copy(x, f32)`), or None."""
    owner = value.owner
    if not _is_f32(value) or not isinstance(owner, Operation) or not is_plain_cast(owner):
        return None
    assert isinstance(owner, Operation)
    source = owner.operands[0]
    return source if isinstance(_element(source), _NARROW_FLOATS) else None


def _cast_class() -> type[TorchOp]:
    cast_class = op_class_for("aten::_to_copy")
    assert cast_class is not None
    return cast_class


def _cast(value: SSAValue, element_type: Attribute, before: Operation) -> SSAValue:
    """`value` as `element_type`, by a `_to_copy` inserted before `before` (with its location)."""
    assert isinstance(value.type, TensorType)
    result_type = TensorType(element_type, value.type.get_shape())
    cast = _cast_class().from_args({"self": value, "dtype": element_type}, [result_type])
    cast.location = before.location
    block = before.parent_block()
    assert block is not None
    block.insert_op_before(cast, before)
    return cast.results[0]


class _Casts:
    """The casts added to one function, each made once: every reader of a value shares its rounding."""

    def __init__(self) -> None:
        self.rounded: dict[SSAValue, SSAValue] = {}
        self.widened: dict[SSAValue, SSAValue] = {}

    def rounded_to_bf16(self, value: SSAValue, before: Operation) -> SSAValue:
        """`value` (fp32) rounded to bf16: the bf16 tensor it widens when it is one, else a cast before `before`
        (the first reader's)."""
        source = widened_source(value)
        if source is not None and isinstance(_element(source), BFloat16Type):
            return source
        if value not in self.rounded:
            self.rounded[value] = _cast(value, bf16, before)
        return self.rounded[value]

    def widened_rounding(self, value: SSAValue, before: Operation) -> SSAValue:
        """`value` (fp32) rounded to bf16 and widened back to fp32 exactly: itself when it already is one."""
        if _widens_within_bf16(value):
            return value
        if value not in self.widened:
            self.widened[value] = _cast(self.rounded_to_bf16(value, before), f32, before)
        return self.widened[value]


def _round_matmul_operands(op: TorchOp, casts: _Casts) -> None:
    """Each multiplied operand of an fp32 matmul-shaped op becomes its bf16 rounding, widened back to fp32."""
    args = op.arguments()
    operands = [args.get(name) for name in MATMUL_OPERANDS[op.name]]
    tensors = [value for value in operands if isinstance(value, SSAValue)]
    if len(tensors) != len(operands) or not all(_is_f32(value) for value in tensors):
        return
    if not all(_is_f32(result) for result in op.results if isinstance(result.type, TensorType)):
        return
    for position, value in enumerate(op.operands):
        if any(value is operand for operand in tensors):
            op.operands[position] = casts.widened_rounding(value, op)


def _widens_bf16(value: SSAValue) -> bool:
    source = widened_source(value)
    return source is not None and isinstance(_element(source), BFloat16Type)


def _widens_within_bf16(value: SSAValue) -> bool:
    """Whether `value` widens a bf16 or fp8 tensor (so its bf16 rounding is itself)."""
    source = widened_source(value)
    return source is not None and isinstance(_element(source), _WITHIN_BF16)


def _compute_in_bf16(op: TorchOp, casts: _Casts) -> None:
    """An fp32 op of `BF16_OPS` (or a matmul-shaped one) computes in bf16; its readers get its results widened to
    fp32."""
    floats = [value for value in op.operands if isinstance(_element(value), Float32Type | BFloat16Type)]
    results = [result for result in op.results if isinstance(result.type, TensorType)]
    if not floats or not results or not all(_is_f32(value) for value in (*floats, *results)):
        return

    def narrowed(value: object) -> object:
        if isinstance(value, SSAValue) and _is_f32(value):
            return casts.rounded_to_bf16(value, op)
        if isinstance(value, list):
            return [narrowed(item) for item in value]
        return value

    arguments = {name: narrowed(value) for name, value in op.arguments().items()}
    kept = FP32_RESULTS.get(op.name, ())
    result_types = [
        TensorType(bf16, result.type.get_shape())
        if isinstance(result.type, TensorType) and index not in kept
        else result.type
        for index, result in enumerate(op.results)
    ]
    replacement = type(op).from_args(arguments, result_types, dict(op.attributes))
    replacement.location = op.location
    block = op.parent_block()
    assert block is not None
    block.insert_op_after(replacement, op)
    for old, new in zip(op.results, replacement.results, strict=True):
        if old.uses:
            anchor = replacement.next_op
            assert anchor is not None  # at least the op being replaced follows
            old.replace_all_uses_with(_cast(new, f32, anchor) if new.type != old.type else new)
    op.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
    op.erase()


def auto_cast_mode(module: ModuleOp, option: str | None = None) -> str:
    """The mode to compile `module` with: `option` when given, else its `neuron.auto_cast` attribute, else "none"."""
    mode = option
    if mode is None:
        attribute = module.attributes.get(AUTO_CAST_ATTR)
        mode = attribute.data if isinstance(attribute, StringAttr) else "none"
    if mode not in MODES:
        raise PassFailedException(f"torch-auto-cast: unknown mode '{mode}' (modes: {', '.join(MODES)})")
    return mode


def round_after_permutes(function: func.FuncOp) -> None:
    """Move each bf16 rounding of fp32 that matmuls of `CONVERTS_ON_LOAD` read only through a permute (as operands
    they multiply) after that permute, where their DMAs can do it (the module docstring says why)."""
    module = function.get_toplevel_object()
    if isinstance(module, ModuleOp) and STOCHASTIC_ROUNDING_ATTR in module.attributes:
        return
    for permute in list(function.body.block.ops):
        if not isinstance(permute, TorchOp) or permute.name != "torch.aten.permute":
            continue
        rounding = permute.operands[0].owner
        if not isinstance(rounding, TorchOp) or not is_plain_cast(rounding):
            continue
        if not _is_f32(rounding.operands[0]) or _element_type(rounding.results[0]) != bf16:
            continue
        result = permute.results[0]
        if not result.uses or not all(_multiplies_only(use.operation, result) for use in result.uses):
            continue
        result_type = result.type
        assert isinstance(result_type, TensorType)
        wide = permute.__class__.from_args(
            {**permute.arguments(), "self": rounding.operands[0]}, [TensorType(f32, result_type.get_shape())]
        )
        wide.location = permute.location
        moved = rounding.__class__.from_args({**rounding.arguments(), "self": wide.results[0]}, [result_type])
        moved.location = rounding.location
        block = permute.parent_block()
        assert block is not None
        block.insert_ops_before([wide, moved], permute)
        result.replace_all_uses_with(moved.results[0])
        permute.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
        permute.erase()
        if not rounding.results[0].uses:
            rounding.detach()  # type: ignore[no-untyped-call]  # unannotated in xDSL
            rounding.erase()


def _multiplies_only(op: Operation, value: SSAValue) -> bool:
    """Whether `op` is of `CONVERTS_ON_LOAD` and reads `value` only as operands it multiplies (not addmm's bias)."""
    if op.name not in CONVERTS_ON_LOAD:
        return False
    names = MATMUL_OPERANDS[op.name]
    arguments = op.arguments()  # type: ignore[attr-defined]
    return all(argument is not value or name in names for name, argument in arguments.items())


def _element_type(value: SSAValue) -> Attribute | None:
    return value.type.element_type if isinstance(value.type, TensorType) else None


def auto_cast_function(function: func.FuncOp, mode: str) -> None:
    """Rewrite `function` for `mode` ("matmul" or "all"; "none" changes nothing)."""
    if mode == "none":
        return
    casts = _Casts()
    for op in list(function.body.block.ops):
        if not isinstance(op, TorchOp):
            continue
        if mode == "all" and op.name in VIEWS and not _widens_bf16(op.operands[0]):
            continue  # a view of fp32 stays one: its bf16 readers round what they read (their DMAs may)
        if mode == "all" and (op.name in BF16_OPS or op.name in VIEWS or op.name in MATMUL_OPERANDS):
            _compute_in_bf16(op, casts)
        elif op.name in MATMUL_OPERANDS:
            _round_matmul_operands(op, casts)
    if mode == "all":
        _erase_unused_casts(function)


def _erase_unused_casts(function: func.FuncOp) -> None:
    """The widenings "all" added that every reader skipped (each reader being a bf16 op itself), last first."""
    for op in reversed(list(function.body.block.ops)):
        if is_plain_cast(op) and not op.results[0].uses:
            op.detach()
            op.erase()


@dataclass(frozen=True)
class TorchAutoCastPass(ModulePass):
    name = "torch-auto-cast"

    mode: str | None = None
    """"none", "matmul" or "all"; by default the module's `neuron.auto_cast` attribute says (else "none")."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        mode = auto_cast_mode(op, self.mode)
        for function in defined_functions(op):
            round_after_permutes(function)
            auto_cast_function(function, mode)
