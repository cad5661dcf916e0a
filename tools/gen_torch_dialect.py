"""Generate the torch dialect's op classes (`ir/dialects/torch_ops.py`) from the ATen schemas.

    python -m neuron_mlir.tools.gen_torch_dialect            # rewrite ir/dialects/torch_ops.py
    python -m neuron_mlir.tools.gen_torch_dialect --check    # exit 1 when the checked-in file is stale

One class per overload: every overload tagged `torch.Tag.core`, plus `EXTRA_OVERLOADS`, the non-core ones that
survive AOTAutograd with `core_aten_decompositions()` in real graphs (found with `tools/discover_aten_ops.py`),
plus `COLLECTIVE_OVERLOADS`, the functional collectives (`_c10d_functional::*`) torch.compile puts in graphs of
distributed code, as `torch.c10d_functional.*` ops.
The per-family verifier tables (`SAME_SHAPE`, `BROADCAST`, `VIEW_SHAPE_RULES`, `RESULT_ELEMENT_TYPES`) live here
too. The output is sorted by op name and depends only on the torch version, so regenerating is a no-op until torch
or the generator changes.
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed._functional_collectives  # registers the _c10d_functional ops
from torchgen.model import BaseType, FunctionSchema, ListType, OptionalType, Type
from xdsl.irdl import IRDLOperation

# Non-core overloads the dialect offers, with where each was seen. "discover:" entries come from
# `python -m neuron_mlir.tools.discover_aten_ops` on torch 2.13 (model, and train = forward + backward graphs or
# eval = the no_grad inference graph); "opinfo:" entries from `python -m neuron_mlir.tools.opinfo_sweep` (the
# first op_db entry whose AOTAutograd graph holds the overload); "model zoo:" from examples/models/zoo.py;
# "real graphs:" and the others are known to survive in the AOTAutograd graphs of real models (as torch-mlir's
# users report too); docs/architecture.md#which-graphs-the-frontend-receives lists the notable ones.
EXTRA_OVERLOADS: dict[str, str] = {
    "aten::_adaptive_avg_pool3d_backward": "lowering: convert-torch-to-tile pooling.py, AdaptiveAvgPool3d backward",
    "aten::_assert_async.msg": "model zoo: mixtral (train, eval), torch._assert_async in the MoE routing",
    "aten::_batch_norm_with_update_functional": "opinfo: _batch_norm_with_update",
    "aten::_conj": "opinfo: fft.hfft",
    "aten::_conj_physical": "opinfo: fft.ihfft2",
    "aten::_embedding_bag_forward_only": "opinfo: nn.functional.embedding_bag",
    "aten::_fft_c2c": "opinfo: fft.fft2",
    "aten::_fused_rms_norm": (
        "lowering: convert-torch-to-tile normalization.py, RMSNorm as model code spells it "
        "(torch-recognize-rms-norm) and F.rms_norm"
    ),
    "aten::_fused_rms_norm_backward": (
        "lowering: convert-torch-to-tile normalization.py, the backward chain of a spelled-out RMSNorm "
        "(torch-recognize-rms-norm)"
    ),
    "aten::_histogramdd_bin_edges": "opinfo: histogramdd",
    "aten::_histogramdd_from_bin_cts": "opinfo: histogramdd",
    "aten::_histogramdd_from_bin_tensors": "opinfo: histogramdd",
    "aten::_linalg_check_errors": "opinfo: linalg.inv, inside with_effects (an effectful check, never dead code)",
    "aten::_linalg_det": "opinfo: linalg.det",
    "aten::_linalg_eigh": "opinfo: linalg.eigh",
    "aten::_linalg_slogdet": "opinfo: logdet",
    "aten::_linalg_solve_ex": "opinfo: linalg.solve",
    "aten::_linalg_svd": "opinfo: svd",
    "aten::_native_batch_norm_legit_functional": "discover: cnn (train), BatchNorm2d in training mode",
    "aten::_scaled_dot_product_flash_attention_for_cpu": (
        "discover: sdpa (train, eval), F.scaled_dot_product_attention once the frontend drops core-ATen's "
        "decomposition of it (wrong for training: frontend.backend.decompositions)"
    ),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "discover: sdpa (train)",
    "aten::_log_softmax_backward_data": (
        "lowering: convert-torch-to-tile softmax.py, kept whole by the frontend (one pass over each row)"
    ),
    "aten::_softmax_backward_data": (
        "lowering: convert-torch-to-tile softmax.py, kept whole by the frontend (one pass over each row)"
    ),
    "aten::_to_sparse": "opinfo: to_sparse",
    "aten::_to_sparse.sparse_dim": "opinfo: to_sparse",
    "aten::_transformer_encoder_layer_fwd": (
        "discover: transformer (eval), nn.TransformerEncoderLayer fast path, with core-ATen's decompositions alone "
        "(the frontend decomposes it further: frontend/decompositions.py)"
    ),
    "aten::_trilinear": "opinfo: nn.functional.bilinear",
    "aten::_unsafe_index.Tensor": "lowering: convert-torch-to-tile, the gather of upsampling decompositions",
    "aten::_unsafe_index_put": "lowering: convert-torch-to-tile, the scatter in the backward of _unsafe_index",
    "aten::_unsafe_view": "real graphs: reshape of a fresh matmul result",
    "aten::_upsample_bilinear2d_aa": "opinfo: _upsample_bilinear2d_aa",
    "aten::_weight_norm_interface": "weight-norm models; forward partner of the backward below",
    "aten::_weight_norm_interface_backward": "discover: weight_norm (train)",
    "aten::adaptive_max_pool2d": "opinfo: nn.functional.adaptive_max_pool1d",
    "aten::adaptive_max_pool3d": "opinfo: nn.functional.adaptive_max_pool3d",
    "aten::addbmm": "opinfo: addbmm",
    "aten::addmv": "opinfo: addmv",
    "aten::angle": "opinfo: angle",
    "aten::as_strided_copy": "opinfo: as_strided_copy",
    "aten::as_strided_scatter": "opinfo: as_strided_scatter",
    "aten::avg_pool3d_backward": "lowering: convert-torch-to-tile pooling.py, AvgPool3d backward",
    "aten::bernoulli.p": "opinfo: nn.functional.dropout2d",
    "aten::bucketize.Tensor": "opinfo: bucketize",
    "aten::cauchy": "opinfo: cauchy",
    "aten::cholesky": "opinfo: cholesky",
    "aten::cholesky_inverse": "opinfo: cholesky_inverse",
    "aten::cholesky_solve": "opinfo: cholesky_solve",
    "aten::complex": "opinfo: complex",
    "aten::copysign.Tensor": "opinfo: copysign",
    "aten::cummax": "opinfo: cummax",
    "aten::cummin": "opinfo: cummin",
    "aten::cumprod": "opinfo: cumprod",
    "aten::detach": "real graphs",
    "aten::diagonal_scatter": "opinfo: diagonal_scatter",
    "aten::digamma": "opinfo: digamma",
    "aten::dist": "opinfo: dist",
    "aten::embedding_renorm": "opinfo: nn.functional.embedding",
    "aten::empty_permuted": "discover: moe_routing (train, eval), empty_like of a transposed tensor (MoE routing)",
    "aten::erfc": "opinfo: erfc",
    "aten::erfinv": "opinfo: erfinv",
    "aten::exp2": "opinfo: logaddexp2",
    "aten::exponential": "opinfo: exponential",
    "aten::fmax": "opinfo: fmax",
    "aten::fmin": "opinfo: fmin",
    "aten::fractional_max_pool2d": "opinfo: nn.functional.fractional_max_pool2d",
    "aten::fractional_max_pool3d": "opinfo: nn.functional.fractional_max_pool3d",
    "aten::frexp.Tensor": "opinfo: frexp",
    "aten::gelu_backward": "lowering: convert-torch-to-tile activations.py, kept whole by the frontend (gelu_dx)",
    "aten::geometric": "opinfo: geometric",
    "aten::geqrf": "opinfo: geqrf",
    "aten::grid_sampler_3d": "opinfo: grid_sampler_3d",
    "aten::hash_tensor": "opinfo: hash_tensor",
    "aten::histc": "discover: moe_routing (train, eval), per-expert token counts (MoE routing)",
    "aten::histogram.bin_ct": "opinfo: histogram",
    "aten::histogram.bins_tensor": "opinfo: histogram",
    "aten::hypot": "opinfo: hypot",
    "aten::i0": "opinfo: i0",
    "aten::igamma": "opinfo: igamma",
    "aten::igammac": "opinfo: igammac",
    "aten::index_reduce": "opinfo: index_reduce.mean",
    "aten::kthvalue": "opinfo: kthvalue",
    "aten::ldexp.Tensor": "opinfo: ldexp",
    "aten::lgamma": "opinfo: mvlgamma.mvlgamma_p_1",
    "aten::lift_fresh_copy": "discover: constants (train, eval), torch.tensor(...) built inside forward",
    "aten::linalg_cholesky_ex": "opinfo: linalg.cholesky",
    "aten::linalg_eig": "opinfo: linalg.eig",
    "aten::linalg_householder_product": "opinfo: linalg.householder_product",
    "aten::linalg_inv_ex": "opinfo: linalg.inv",
    "aten::linalg_ldl_factor_ex": "opinfo: linalg.ldl_factor",
    "aten::linalg_ldl_solve": "opinfo: linalg.ldl_solve",
    "aten::linalg_lu": "opinfo: linalg.lu",
    "aten::linalg_lu_factor_ex": "opinfo: lu",
    "aten::linalg_lu_solve": "opinfo: lu_solve",
    "aten::linalg_matrix_exp": "opinfo: matrix_exp",
    "aten::linalg_pinv.atol_rtol_tensor": "opinfo: pinverse",
    "aten::linalg_qr": "opinfo: qr",
    "aten::linalg_solve_triangular": "opinfo: linalg.solve_triangular",
    "aten::linalg_vector_norm": "discover: weight_norm (train, eval), the norm of weight_norm's forward",
    "aten::log_normal": "opinfo: log_normal",
    "aten::logcumsumexp": "opinfo: logcumsumexp",
    "aten::lu_unpack": "opinfo: lu_unpack",
    "aten::max": "discover: moe_routing (train, eval), full reduction torch.max(t)",
    "aten::max_pool3d_with_indices_backward": "lowering: convert-torch-to-tile pooling.py, MaxPool3d backward",
    "aten::median": "opinfo: median",
    "aten::median.dim": "opinfo: median",
    "aten::min": "opinfo: min.reduction_no_dim",
    "aten::mkldnn_rnn_layer": "discover: lstm_gru (eval), nn.LSTM under no_grad",
    "aten::mode": "opinfo: mode",
    "aten::multinomial": "opinfo: multinomial",
    "aten::nanmedian": "opinfo: nanmedian",
    "aten::nanmedian.dim": "opinfo: masked.median",
    "aten::narrow_copy": "opinfo: narrow_copy",
    "aten::native_batch_norm_backward": "real graphs: batch norm backward",
    "aten::new_empty_strided": "discover: moe_routing (train), backward of a copy into a transposed buffer",
    "aten::nextafter": "opinfo: nextafter",
    "aten::nonzero_static": "opinfo: nonzero_static",
    "aten::nll_loss_backward": (
        "lowering: convert-torch-to-tile loss.py, kept whole by the frontend (the backward of cross-entropy and "
        "nll_loss; with the log-softmax backward reading it, one pass over the logits)"
    ),
    "aten::normal.Tensor_Tensor": "opinfo: normal",
    "aten::normal.Tensor_float": "opinfo: normal.number_mean",
    "aten::normal.float_float": "opinfo: normal.number_mean",
    "aten::normal_functional": "opinfo: normal.in_place",
    "aten::ormqr": "opinfo: ormqr",
    "aten::permute_copy": "opinfo: permute_copy",
    "aten::polar": "opinfo: polar",
    "aten::polygamma": "opinfo: polygamma.polygamma_n_0",
    "aten::put": "opinfo: put",
    "aten::randint": "opinfo: randint",
    "aten::randint.low": "opinfo: randint",
    "aten::randint_like": "opinfo: randint_like",
    "aten::randint_like.low_dtype": "opinfo: randint_like",
    "aten::randn_like": "opinfo: randn_like",
    "aten::repeat_interleave.Tensor": "opinfo: repeat_interleave",
    "aten::resize": "opinfo: resize_as_",
    "aten::round.decimals": "opinfo: round.decimals_0",
    "aten::rrelu_with_noise_functional": "opinfo: nn.functional.rrelu",
    "aten::scatter.reduce": "opinfo: scatter",
    "aten::searchsorted.Tensor": "opinfo: isin",
    "aten::segment_reduce": "opinfo: _segment_reduce.lengths",
    "aten::signbit": "opinfo: signbit",
    "aten::silu": "lowering: convert-torch-to-tile activations.py, kept whole by the frontend (one ScalarE function)",
    "aten::silu_backward": "lowering: convert-torch-to-tile activations.py, kept whole by the frontend (silu_dx)",
    "aten::sort.stable": "opinfo: sort",
    "aten::special_airy_ai": "opinfo: special.airy_ai",
    "aten::special_bessel_j0": "opinfo: special.bessel_j0",
    "aten::special_bessel_j1": "opinfo: special.bessel_j1",
    "aten::special_bessel_y0": "opinfo: special.bessel_y0",
    "aten::special_bessel_y1": "opinfo: special.bessel_y1",
    "aten::special_chebyshev_polynomial_t": "opinfo: special.chebyshev_polynomial_t",
    "aten::special_chebyshev_polynomial_u": "opinfo: special.chebyshev_polynomial_u",
    "aten::special_chebyshev_polynomial_v": "opinfo: special.chebyshev_polynomial_v",
    "aten::special_chebyshev_polynomial_w": "opinfo: special.chebyshev_polynomial_w",
    "aten::special_erfcx": "opinfo: special.log_ndtr",
    "aten::special_hermite_polynomial_h": "opinfo: special.hermite_polynomial_h",
    "aten::special_hermite_polynomial_he": "opinfo: special.hermite_polynomial_he",
    "aten::special_i0e": "opinfo: special.i0e",
    "aten::special_i1": "opinfo: special.i1",
    "aten::special_i1e": "opinfo: special.i1e",
    "aten::special_laguerre_polynomial_l": "opinfo: special.laguerre_polynomial_l",
    "aten::special_legendre_polynomial_p": "opinfo: special.legendre_polynomial_p",
    "aten::special_modified_bessel_i0": "opinfo: special.modified_bessel_i0",
    "aten::special_modified_bessel_i1": "opinfo: special.modified_bessel_i1",
    "aten::special_modified_bessel_k0": "opinfo: special.modified_bessel_k0",
    "aten::special_modified_bessel_k1": "opinfo: special.modified_bessel_k1",
    "aten::special_ndtri": "opinfo: special.ndtri",
    "aten::special_scaled_modified_bessel_k0": "opinfo: special.scaled_modified_bessel_k0",
    "aten::special_scaled_modified_bessel_k1": "opinfo: special.scaled_modified_bessel_k1",
    "aten::special_shifted_chebyshev_polynomial_t": "opinfo: special.shifted_chebyshev_polynomial_t",
    "aten::special_shifted_chebyshev_polynomial_u": "opinfo: special.shifted_chebyshev_polynomial_u",
    "aten::special_shifted_chebyshev_polynomial_v": "opinfo: special.shifted_chebyshev_polynomial_v",
    "aten::special_shifted_chebyshev_polynomial_w": "opinfo: special.shifted_chebyshev_polynomial_w",
    "aten::special_spherical_bessel_j0": "opinfo: special.spherical_bessel_j0",
    "aten::special_zeta": "opinfo: special.zeta",
    "aten::t": "real graphs",
    "aten::threshold_backward": "real graphs: ReLU backward",
    "aten::triangular_solve": "opinfo: triangular_solve",
    "aten::unbind_copy.int": "opinfo: unbind_copy",
    "aten::unfold": "opinfo: stft",
    "aten::uniform": "opinfo: uniform",
    "aten::var_mean.correction": "opinfo: var_mean",
    "aten::view_as_complex": "opinfo: view_as_complex",
    "aten::view_as_real": "opinfo: stft",
    "aten::view_copy": "opinfo: view_copy",
}


def _overloads(names: str) -> frozenset[str]:
    """`"add.Tensor mm"` -> {"aten::add.Tensor", "aten::mm"}."""
    return frozenset(f"aten::{name}" for name in names.split())


# Result shape rules the verifier checks (ShapeRule in ir/dialects/torch.py).
SAME_SHAPE = _overloads(
    "abs acos acosh asin asinh atan atanh bitwise_not ceil cos cosh erf exp expm1 floor isinf isnan log log10 "
    "log1p log2 logical_not neg reciprocal relu round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc "
    "gelu leaky_relu hardtanh elu clamp clone alias detach lift_fresh_copy _to_copy fill.Scalar full_like "
    "_softmax _log_softmax cumsum native_dropout copy silu gelu_backward silu_backward "
    "_softmax_backward_data _log_softmax_backward_data "
    "add.Scalar sub.Scalar mul.Scalar div.Scalar div.Scalar_mode fmod.Scalar remainder.Scalar "
    "pow.Tensor_Scalar pow.Scalar bitwise_and.Scalar bitwise_or.Scalar bitwise_xor.Scalar "
    "eq.Scalar ne.Scalar lt.Scalar le.Scalar gt.Scalar ge.Scalar "
    "scatter.value scatter.src scatter_add scatter_reduce.two index_put select_scatter slice_scatter _conj"
)
BROADCAST = _overloads(
    "add.Tensor sub.Tensor mul.Tensor div.Tensor div.Tensor_mode fmod.Tensor remainder.Tensor "
    "pow.Tensor_Tensor maximum minimum atan2 bitwise_and.Tensor bitwise_or.Tensor bitwise_xor.Tensor "
    "eq.Tensor ne.Tensor lt.Tensor le.Tensor gt.Tensor ge.Tensor logical_and logical_or logical_xor "
    "where.self clamp.Tensor threshold_backward"
)
# The view and reshaping ops, each with the rule that computes its result shapes from its arguments.
VIEW_SHAPE_RULES: dict[str, str] = {
    **dict.fromkeys(_overloads("permute permute_copy"), "PERMUTE"),
    **dict.fromkeys(_overloads("view view_copy _unsafe_view"), "RESHAPE"),
    **dict.fromkeys(_overloads("as_strided as_strided_copy"), "AS_STRIDED"),
    **dict.fromkeys(_overloads("squeeze.dim squeeze.dims"), "SQUEEZE"),
    "aten::expand": "EXPAND",
    "aten::t": "TRANSPOSE_2D",
    "aten::unsqueeze": "UNSQUEEZE",
    "aten::slice.Tensor": "SLICE",
    "aten::select.int": "SELECT",
    "aten::narrow_copy": "NARROW",
    "aten::diagonal": "DIAGONAL",
    "aten::unfold": "UNFOLD",
    "aten::split_with_sizes": "SPLIT",
    "aten::unbind_copy.int": "UNBIND",
    "aten::view_as_real": "VIEW_AS_REAL",
    "aten::view_as_complex": "VIEW_AS_COMPLEX",
}

# Result element types fixed by the op's nature: overload -> ((result index, element type), ...).
_BOOLEAN = _overloads(
    "eq.Tensor eq.Scalar ne.Tensor ne.Scalar lt.Tensor lt.Scalar le.Tensor le.Scalar gt.Tensor gt.Scalar "
    "ge.Tensor ge.Scalar logical_and logical_or logical_xor logical_not isinf isnan"
)
_INDEX_RESULT = _overloads("argmax argmin nonzero")
_VALUES_AND_INDICES = _overloads("sort topk max.dim min.dim max_pool2d_with_indices max_pool3d_with_indices")
RESULT_ELEMENT_TYPES: dict[str, tuple[tuple[int, str], ...]] = {
    **{name: ((0, "i1"),) for name in _BOOLEAN},
    **{name: ((0, "i64"),) for name in _INDEX_RESULT},
    **{name: ((1, "i64"),) for name in _VALUES_AND_INDICES},
    "aten::native_dropout": ((1, "i1"),),  # the keep mask
}

# The functional collectives the dialect offers (torch.distributed._functional_collectives, as torch.compile
# traces DTensor, tensor-parallel and FSDP2 code and direct calls). Their process group arrives as its name: the
# schemas' `Any group_name` is a string in every graph.
COLLECTIVE_OVERLOADS: dict[str, str] = {
    "_c10d_functional::all_gather_into_tensor": "functional all_gather_into_tensor; DTensor Shard -> Replicate",
    "_c10d_functional::all_reduce": "functional all_reduce; tensor parallel RowwiseParallel's output",
    "_c10d_functional::all_reduce_coalesced": "functional all_reduce_coalesced; several tensors in one call",
    "_c10d_functional::all_gather_into_tensor_coalesced": "functional all_gather_into_tensor_coalesced",
    "_c10d_functional::broadcast": "functional broadcast; a root rank's tensor to every rank",
    "_c10d_functional::reduce_scatter_tensor_coalesced": "functional reduce_scatter_tensor_coalesced",
    "_c10d_functional::all_to_all_single": "functional all_to_all_single; DTensor Shard(i) -> Shard(j)",
    "_c10d_functional::reduce_scatter_tensor": "functional reduce_scatter_tensor; DTensor Partial -> Shard",
    "_c10d_functional::wait_tensor": "the wait every asynchronous functional collective is followed by",
}
_COLLECTIVE_NAMESPACE = "_c10d_functional"

# Ops whose `dtype` argument is NOT the result's element type (a complex dtype gives a real norm).
DTYPE_NOT_RESULT: frozenset[str] = frozenset({"aten::linalg_vector_norm"})

# c10::ScalarType, Layout and MemoryFormat codes, as JIT schemas give defaults of those types.
_SCALAR_TYPE_NAMES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
    9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16",
}  # fmt: skip
_LAYOUT_NAMES = {0: "strided", 1: "sparse_coo"}
_MEMORY_FORMAT_NAMES = {0: "contiguous_format", 1: "preserve_format", 2: "channels_last", 3: "channels_last_3d"}

_PROPERTY_KINDS = {
    "int": "INT", "SymInt": "INT", "float": "FLOAT", "bool": "BOOL", "Scalar": "SCALAR", "str": "STR",
    "ScalarType": "SCALAR_TYPE", "Layout": "LAYOUT", "Device": "DEVICE", "MemoryFormat": "MEMORY_FORMAT",
    "Generator": "GENERATOR",
}  # fmt: skip
_LIST_KINDS = {"int": "INT_LIST", "SymInt": "INT_LIST", "float": "FLOAT_LIST", "bool": "BOOL_LIST"}
_RESULT_KINDS = {
    "SymInt": "SYM_INT", "int": "INT", "float": "FLOAT", "bool": "BOOL", "SymBool": "BOOL", "Scalar": "SCALAR",
}  # fmt: skip

# Names a generated field must not take: Python keywords, Operation/IRDLOperation members, and TorchOp's own.
_TORCH_OP_MEMBERS = {"SCHEMA", "from_args", "create", "arguments", "call_arguments", "parse", "print", "verify_"}
_RESERVED = set(keyword.kwlist) | set(dir(IRDLOperation)) | _TORCH_OP_MEMBERS


@dataclass(frozen=True)
class _Arg:
    name: str
    field: str
    kind: str  # ArgKind member
    prop: str | None = None  # PropKind member
    optional: bool = False
    default: object = None
    has_default: bool = False
    kwarg_only: bool = False
    length: int | None = None
    mutable: bool = False


@dataclass(frozen=True)
class _Result:
    name: str
    field: str
    kind: str  # ResultKind member


@dataclass(frozen=True)
class _OpModel:
    overload: str  # aten::add.Tensor
    op_name: str  # torch.aten.add.Tensor
    class_name: str  # AtenAddTensorOp
    signature: str
    args: tuple[_Arg, ...]
    results: tuple[_Result, ...]
    pure: bool


def _camel(text: str) -> str:
    """`_native_batch_norm` -> `_NativeBatchNorm`, `resize_` -> `Resize_` (outer underscores kept, as torch-mlir
    does)."""
    core = text.strip("_")
    leading = len(text) - len(text.lstrip("_"))
    trailing = len(text) - len(text.rstrip("_"))
    return "_" * leading + "".join(p[:1].upper() + p[1:] for p in core.split("_")) + "_" * trailing


def _field_name(name: str, taken: set[str]) -> str:
    field = name
    while field in _RESERVED or field in taken:
        field += "_"
    taken.add(field)
    return field


def _default_value(arg: torch._C.Argument, prop: str | None) -> object:
    value = arg.default_value
    if value is None:
        return None
    if prop == "SCALAR_TYPE":
        return _SCALAR_TYPE_NAMES[value]
    if prop == "LAYOUT":
        return _LAYOUT_NAMES[value]
    if prop == "MEMORY_FORMAT":
        return _MEMORY_FORMAT_NAMES[value]
    if prop == "FLOAT":
        return float(value)
    if prop == "FLOAT_LIST":
        return tuple(float(v) for v in value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _classify_arg(type_: Type, where: str) -> tuple[str, str | None, bool, int | None]:
    """(ArgKind, PropKind, optional, fixed length) of a torchgen argument type."""
    optional = isinstance(type_, OptionalType)
    inner = type_.elem if isinstance(type_, OptionalType) else type_
    if isinstance(inner, BaseType):
        base = inner.name.name
        if base == "Tensor":
            return ("OPTIONAL_TENSOR" if optional else "TENSOR"), None, False, None
        if base in _PROPERTY_KINDS:
            return "PROPERTY", _PROPERTY_KINDS[base], optional, None
    if isinstance(inner, ListType) and not optional:
        elem = inner.elem
        if isinstance(elem, BaseType) and elem.name.name == "Tensor":
            return "TENSOR_LIST", None, False, None
        if isinstance(elem, OptionalType) and isinstance(elem.elem, BaseType) and elem.elem.name.name == "Tensor":
            return "OPTIONAL_TENSOR_LIST", None, False, None
    if isinstance(inner, ListType) and isinstance(inner.elem, BaseType) and inner.elem.name.name in _LIST_KINDS:
        length = inner.size if inner.size is not None and inner.size >= 2 else None
        return "PROPERTY", _LIST_KINDS[inner.elem.name.name], optional, length
    raise NotImplementedError(f"{where}: argument type {type_} has no representation in the torch dialect")


def _classify_result(type_: Type, where: str) -> str:
    if isinstance(type_, BaseType):
        if type_.name.name == "Tensor":
            return "TENSOR"
        if type_.name.name in _RESULT_KINDS:
            return _RESULT_KINDS[type_.name.name]
    if isinstance(type_, ListType) and isinstance(type_.elem, BaseType) and type_.elem.name.name == "Tensor":
        return "TENSOR_LIST"
    raise NotImplementedError(f"{where}: result type {type_} has no representation in the torch dialect")


def describe(op: torch._ops.OpOverload) -> _OpModel:
    """The generator's model of one ATen overload."""
    schema = op._schema
    signature = str(schema).replace("Any group_name", "str group_name")  # a process group's name in graphs
    namespace = schema.name.split("::")[0]
    parsed = FunctionSchema.parse(signature.removeprefix(f"{namespace}::"))
    overload = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    name, _, overload_name = overload.removeprefix(f"{namespace}::").partition(".")
    dialect_namespace = namespace.lstrip("_")  # torch.aten.*, torch.c10d_functional.*
    class_prefix = "Aten" if namespace == "aten" else _camel(dialect_namespace)
    taken: set[str] = set()
    args = []
    for parsed_arg, jit_arg in zip(parsed.arguments.flat_all, schema.arguments, strict=True):
        kind, prop, optional, length = _classify_arg(parsed_arg.type, overload)
        args.append(
            _Arg(
                name=jit_arg.name,
                field=_field_name(jit_arg.name, taken),
                kind=kind,
                prop=prop,
                optional=optional,
                default=_default_value(jit_arg, prop) if jit_arg.has_default_value() else None,
                has_default=jit_arg.has_default_value(),
                kwarg_only=jit_arg.kwarg_only,
                length=length,
                mutable=parsed_arg.annotation is not None and parsed_arg.annotation.is_write,
            )
        )
    for arg in args:  # reserve the implied property names of Tensor?[] arguments
        if arg.kind == "OPTIONAL_TENSOR_LIST":
            _field_name(f"{arg.name}_none_positions", taken)
    results = []
    for index, ret in enumerate(parsed.returns):
        result_name = ret.name or ("result" if len(parsed.returns) == 1 else f"result{index}")
        results.append(_Result(result_name, _field_name(result_name, taken), _classify_result(ret.type, overload)))
    if sum(r.kind == "TENSOR_LIST" for r in results) > 1:
        raise NotImplementedError(f"{overload}: more than one Tensor[] result")
    return _OpModel(
        overload=overload,
        op_name=f"torch.{dialect_namespace}.{name}" + (f".{overload_name}" if overload_name else ""),
        class_name=f"{class_prefix}{_camel(name)}{_camel(overload_name)}Op",
        signature=signature,
        args=tuple(args),
        results=tuple(results),
        # an op without results exists for its effect (an assertion): never dead code; a collective is an exchange
        # every rank of its group must make, in the same order: never removed or merged either
        pure=torch.Tag.nondeterministic_seeded not in op.tags
        and bool(results)
        and (namespace != _COLLECTIVE_NAMESPACE or name == "wait_tensor"),
    )


def core_overloads() -> list[torch._ops.OpOverload]:
    """Every ATen overload tagged `torch.Tag.core`, sorted by qualified name.

    Enumerated from the dispatcher, not `dir(torch.ops.aten)`, which lists only the packets loaded so far and so
    depends on what the process did before (in a fresh process it misses four of torch 2.13's 193 core overloads:
    adaptive_avg_pool1d, avg_pool1d, resize_, sym_is_contiguous).
    """
    registered = [name for name in torch._C._dispatch_get_all_op_names() if name.startswith("aten::")]
    packet_names = sorted({name.removeprefix("aten::").split(".")[0] for name in registered})
    found = []
    for packet_name in packet_names:
        packet = getattr(torch.ops.aten, packet_name)
        for overload_name in packet.overloads():
            op = getattr(packet, overload_name)
            if torch.Tag.core in op.tags:
                found.append(op)
    return sorted(found, key=lambda op: op.name())


def selected_overloads() -> list[torch._ops.OpOverload]:
    """Every core overload plus the extras and the functional collectives, sorted by qualified name."""
    chosen = {op.name(): op for op in core_overloads()}
    for name in EXTRA_OVERLOADS:
        packet_name, _, overload_name = name.removeprefix("aten::").partition(".")
        op = getattr(getattr(torch.ops.aten, packet_name), overload_name or "default")
        if torch.Tag.core in op.tags:
            raise ValueError(f"{name} is core: remove it from EXTRA_OVERLOADS")
        chosen[op.name()] = op
    for name in COLLECTIVE_OVERLOADS:
        packet_name, _, overload_name = name.removeprefix(f"{_COLLECTIVE_NAMESPACE}::").partition(".")
        packet = getattr(getattr(torch.ops, _COLLECTIVE_NAMESPACE), packet_name)
        chosen[name] = getattr(packet, overload_name or "default")
    return [chosen[name] for name in sorted(chosen)]


# --------------------------------------------------------------------------------------------------------------
# Rendering


def _literal(value: object) -> str:
    """A Python literal, with double-quoted strings unless the string holds a double quote (as ruff formats)."""
    if isinstance(value, str) and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return repr(value)


def _render_class(model: _OpModel) -> str:
    schema_args = []
    fields = []
    for arg in model.args:
        options = [_literal(arg.name), f"ArgKind.{arg.kind}"]
        if arg.prop:
            options.append(f"PropKind.{arg.prop}")
        if arg.optional:
            options.append("optional=True")
        if arg.has_default:
            options.append(f"default={_literal(arg.default)}")
        if arg.kwarg_only:
            options.append("kwarg_only=True")
        if arg.length is not None:
            options.append(f"length={arg.length}")
        if arg.mutable:
            options.append("mutable=True")
        if arg.field != arg.name:
            options.append(f"field={_literal(arg.field)}")
        schema_args.append(f"ArgSpec({', '.join(options)})")
        match arg.kind:
            case "TENSOR":
                fields.append(f"{arg.field} = operand_def(TensorType)")
            case "OPTIONAL_TENSOR":
                fields.append(f"{arg.field} = opt_operand_def(TensorType)")
            case "TENSOR_LIST" | "OPTIONAL_TENSOR_LIST":
                fields.append(f"{arg.field} = var_operand_def(TensorType)")
            case _:
                prop_options = [f"PropKind.{arg.prop}"]
                if arg.has_default and arg.default is not None:
                    prop_options.append(f"default={_literal(arg.default)}")
                if arg.optional:
                    prop_options.append("optional=True")
                if arg.field != arg.name:
                    prop_options.append(f"prop_name={_literal(arg.name)}")
                fields.append(f"{arg.field} = property_def({', '.join(prop_options)})")
    for arg in model.args:
        if arg.kind == "OPTIONAL_TENSOR_LIST":
            fields.append(f"{arg.name}_none_positions = none_positions_def()")
    for result in model.results:
        match result.kind:
            case "TENSOR":
                fields.append(f"{result.field} = result_def(TENSOR_RESULT)")
            case "TENSOR_LIST":
                fields.append(f"{result.field} = var_result_def(TensorType)")
            case _:
                fields.append(f"{result.field} = result_def(RESULT_CONSTRAINTS[ResultKind.{result.kind}])")

    schema_options = [
        _literal(model.signature),
        "args=(" + "".join(f"\n            {a}," for a in schema_args) + ("\n        )" if schema_args else ")"),
        "results=(" + " ".join(f'ResultSpec("{r.name}", ResultKind.{r.kind}),' for r in model.results) + ")",
    ]
    if model.overload in SAME_SHAPE:
        schema_options.append("shape_rule=ShapeRule.SAME")
    if model.overload in BROADCAST:
        schema_options.append("shape_rule=ShapeRule.BROADCAST")
    if model.overload in VIEW_SHAPE_RULES:
        schema_options.append(f"shape_rule=ShapeRule.{VIEW_SHAPE_RULES[model.overload]}")
    if model.overload in RESULT_ELEMENT_TYPES:
        pairs = " ".join(f"({i}, {t})," for i, t in RESULT_ELEMENT_TYPES[model.overload])
        schema_options.append(f"result_element_types=({pairs})")
    tensor_results = [r for r in model.results if r.kind == "TENSOR"]
    has_dtype = any(a.name == "dtype" and a.prop == "SCALAR_TYPE" for a in model.args)
    if has_dtype and len(model.results) == 1 and tensor_results and model.overload not in DTYPE_NOT_RESULT:
        schema_options.append("dtype_sets_result=True")

    variadic_operands = sum(a.kind != "TENSOR" for a in model.args if a.kind != "PROPERTY")
    lines = [
        "@irdl_op_definition",
        f"class {model.class_name}(TorchOp):",
        '    """`' + model.signature.replace("\\", "\\\\") + '`"""',
        "",
        f'    name = "{model.op_name}"',
        "    SCHEMA: ClassVar[OpSchema] = OpSchema(",
        *(f"        {option}," for option in schema_options),
        "    )",
    ]
    if model.pure:
        lines.append("    traits = traits_def(Pure())")
    if variadic_operands > 1:
        lines.append("    irdl_options = (AttrSizedOperandSegments(as_property=True),)")
    lines.append("")
    lines.extend(f"    {field}" for field in fields)
    return "\n".join(lines)


_IMPORTABLE = {
    "typing": ["ClassVar"],
    "xdsl.dialects.builtin": ["TensorType", "i1", "i64"],
    "xdsl.irdl": [
        "AttrSizedOperandSegments", "irdl_op_definition", "operand_def", "opt_operand_def", "result_def",
        "traits_def", "var_operand_def", "var_result_def",
    ],
    "xdsl.traits": ["Pure"],
    "neuron_mlir.ir.dialects.torch": [
        "RESULT_CONSTRAINTS", "TENSOR_RESULT", "ArgKind", "ArgSpec", "OpSchema", "PropKind", "ResultKind",
        "ResultSpec", "ShapeRule",
        "TorchOp", "none_positions_def", "property_def", "register_op_classes",
    ],
}  # fmt: skip


def _import_line(module: str, names: list[str]) -> str:
    """One `from` import ordered as ruff's isort does (constants, classes, then functions); several names go one
    per line with a trailing comma, which isort keeps whatever the configured line length."""
    ordered = sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    if len(ordered) == 1:
        return f"from {module} import {ordered[0]}"
    return f"from {module} import (\n" + "".join(f"    {n},\n" for n in ordered) + ")"


def render(overloads: list[torch._ops.OpOverload] | None = None) -> str:
    """The text of `ir/dialects/torch_ops.py`."""
    models = [describe(op) for op in (overloads if overloads is not None else selected_overloads())]
    known = {m.overload for m in models}
    for table in (SAME_SHAPE, BROADCAST, set(VIEW_SHAPE_RULES), set(RESULT_ELEMENT_TYPES), DTYPE_NOT_RESULT):
        if missing := sorted(set(table) - known):
            raise ValueError(f"verifier tables name overloads the dialect lacks: {missing}")
    shape_tables = (SAME_SHAPE, BROADCAST, set(VIEW_SHAPE_RULES))
    if twice := sorted(name for name in known if sum(name in table for table in shape_tables) > 1):
        raise ValueError(f"overloads with more than one shape rule: {twice}")
    class_names = [m.class_name for m in models]
    if len(set(class_names)) != len(class_names):
        raise ValueError("two overloads map to the same class name")
    extras = sum(m.overload in EXTRA_OVERLOADS for m in models)
    collectives = sum(m.overload in COLLECTIVE_OVERLOADS for m in models)
    body = "\n\n\n".join(_render_class(m) for m in models)
    footer = "ALL_OPS: tuple[type[TorchOp], ...] = (\n" + "".join(f"    {c},\n" for c in class_names) + ")\n"
    footer += "\nregister_op_classes(ALL_OPS)\n"
    used_text = body + footer
    groups = []
    sections = (["typing"], ["xdsl.dialects.builtin", "xdsl.irdl", "xdsl.traits"], ["neuron_mlir.ir.dialects.torch"])
    for section in sections:
        lines = []
        for module in section:
            names = [n for n in _IMPORTABLE[module] if re.search(rf"\b{n}\b", used_text)]
            if names:
                lines.append(_import_line(module, names))
        if lines:
            groups.append("\n".join(lines))
    version = torch.__version__.split("+")[0]
    header = (
        f'"""The torch dialect\'s op classes: GENERATED by tools/gen_torch_dialect.py, do not edit.\n\n'
        f"One class per ATen overload of torch {version}: {len(models) - extras - collectives} tagged core and "
        f"{extras} more that\nsurvive core-ATen decomposition in real graphs; and "
        f"{collectives} functional collectives (_c10d_functional).\n"
        "Regenerate after changing the generator or torch:\n\n"
        "    python -m neuron_mlir.tools.gen_torch_dialect\n\n"
        "The conventions (properties, syntax, builders) are in `neuron_mlir.ir.dialects.torch`.\n"
        '"""\n\n'
    )
    return header + "\n\n".join(groups) + "\n\n\n" + body + "\n\n\n" + footer


def generated_path() -> Path:
    """Where the generated module lives (ir/dialects/torch_ops.py), found without importing the dialect."""
    spec = importlib.util.find_spec("neuron_mlir.ir.dialects")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations))) / "torch_ops.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the checked-in file is not up to date")
    parser.add_argument("--output", type=Path, default=None, help="write here instead of ir/dialects/torch_ops.py")
    options = parser.parse_args(argv)
    path = options.output or generated_path()
    text = render()
    if options.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run `python -m neuron_mlir.tools.gen_torch_dialect`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.write_text(text)
    print(f"wrote {path} ({text.count('@irdl_op_definition')} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
