"""Lowering coverage on PyTorch's OpInfo database: which ops run natively on the (simulated) NeuronCore.

    python -m neuron_mlir.tools.coverage_sweep                         # all of op_db -> docs/coverage.md
    python -m neuron_mlir.tools.coverage_sweep --ops add,cumsum,sort   # a few entries, report to stdout only
    make coverage

The "compile and compare" mode of `tools/opinfo_sweep.py` (which checks only the importer): it iterates the
same float32 CPU samples (`--max-samples` per entry), and runs each one through
`torch.compile(fn, backend="neuron-mlir")` against eager PyTorch, with `torch._dynamo.reset()` and
`neuron_mlir.reset()` between samples. Each entry is

    native     every sample compiled with no node falling back to the CPU, and matched eager
    fallback   every sample matched, but some node ran eagerly on the CPU (the ops are listed)
    failing    a sample raised or differed from eager beyond the dtype's tolerance (`ir/semantics/compare.py`)
    no graph   nothing to compile: no float32 samples, eager itself raised on every sample, or the call has no
               ATen op at all (e.g. `x.contiguous()` of a contiguous tensor)

Random ops (`RANDOM_ENTRIES`) cannot match eager's numbers: their samples are checked for properties instead
(shape and dtype as eager's, values in the distribution's range with plausible moments, dropout's output equal
to its input scaled or zero) and for reproducibility: two calls after the same `torch.manual_seed` agree. The
results of `torch.empty` and friends (`UNINITIALISED_ENTRIES`) are compared by dtype and shape only; complex
results as (real, imaginary) pairs and sparse ones densified. Eigen- and singular vectors are unique up to sign
only (`SIGN_FREE_VECTORS`): each vector's sign is aligned with eager's before the comparison (U's column and
V's jointly, so a mismatched pair still fails), as op_db's own tests compare them modulo sign.

The device mode (`--mode device`; `make coverage` runs both) runs the same entries eagerly on the `neuron`
device instead, in float32 and bfloat16: each sample's tensors moved there (a factory op's `device=` too), the op
called, the results compared with the CPU's. The device counts every op it sends to the host
(`frontend/device/eager.py`), so an entry is native only when no op of any sample went there; a fallback lists
the ops and the device's reason for each. Views and metadata ops move no data and count as native.

Failure reasons keep the exception's first line, without machine paths (`trim_reason`).

Results are cached per entry and mode in `--cache` (default `.coverage-cache/`, the device's in `device/`),
keyed by a fingerprint of the sources the mode depends on; `--reuse-stale` also takes results computed by older
sources (for iterating on a few ops), `--refresh` recomputes everything asked for. `--subset ci` selects the
fast representative entries the test suite runs (`CI_SUBSET`).

Coverage is reported over every entry, and separately for two families of ops (`FAMILIES`: elementwise and
reduction ops; matmul, convolution and indexing ops): percentage = native / (entries with a graph). Fallbacks whose
float32 samples give float64 or complex128 results (no NeuronCore storage type holds them) have a row of their own,
and the others one beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import multiprocessing
import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from neuron_mlir.tools.opinfo_sweep import _op_db, _short, _split_sample, entry_name

DEFAULT_MAX_SAMPLES = 3
ENTRY_TIME_BUDGET_S = 120.0
REPO = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = REPO / ".coverage-cache"
# Results that no NeuronCore storage type holds, and the reason an entry computing them falls back with
WIDE_DTYPES = (torch.float64, torch.complex128)
WIDE_FALLBACK = "float64 or complex128 results, ran on the CPU: "
DEFAULT_OUTPUT = REPO / "docs" / "coverage.md"

# The OpInfo entries of each family of ops the report counts apart (entry names as `entry_name` spells them).
FAMILIES: dict[str, frozenset[str]] = {
    # elementwise, activations, comparisons, casts, creation, RNG, reductions, softmax, normalization, scans, sort
    "elementwise": frozenset(
        {
            # arithmetic
            *("add", "sub", "mul", "rsub", "div.no_rounding_mode", "div.trunc_rounding", "div.floor_rounding"),
            *("true_divide", "floor_divide", "pow", "remainder", "fmod", "maximum", "minimum", "max.binary"),
            *("min.binary", "fmax", "fmin", "clamp", "clamp_min", "clamp_max", "where", "abs", "neg", "sign"),
            *("sgn", "square", "lerp", "addcmul", "addcdiv", "frac", "copysign", "hypot", "logaddexp", "xlogy"),
            # transcendental
            *("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos"),
            *("tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "atan2", "erf"),
            *("erfc", "sigmoid", "logit", "deg2rad", "rad2deg", "sinc"),
            # activations
            *("nn.functional.relu", "nn.functional.gelu", "nn.functional.elu", "nn.functional.leaky_relu"),
            *("nn.functional.hardtanh", "nn.functional.relu6", "nn.functional.silu", "nn.functional.mish"),
            *("nn.functional.softplus", "nn.functional.hardsigmoid", "nn.functional.hardswish"),
            *("nn.functional.logsigmoid", "nn.functional.selu", "nn.functional.celu", "nn.functional.threshold"),
            *("nn.functional.softsign", "nn.functional.tanhshrink", "nn.functional.hardshrink"),
            *("nn.functional.softshrink", "nn.functional.glu", "nn.functional.prelu"),
            # rounding and classification
            *("round", "round.decimals_0", "round.decimals_3", "round.decimals_neg_3", "floor", "ceil", "trunc"),
            *("isinf", "isnan", "isfinite", "isposinf", "isneginf", "signbit", "nan_to_num"),
            # comparisons, logical
            *("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not"),
            # casts
            *("to", "bfloat16", "bool", "float", "half", "int", "long", "byte", "char", "short"),
            # creation
            *("full", "full_like", "arange", "scalar_tensor", "fill", "clone", "zeros", "ones", "zeros_like"),
            *("ones_like", "new_zeros", "new_ones", "new_full"),
            # random
            *("randn", "randn_like", "rand_like", "nn.functional.dropout", "bernoulli"),
            # reductions
            *("sum", "mean", "prod", "amax", "amin", "aminmax", "max.reduction_with_dim", "max.reduction_no_dim"),
            *("min.reduction_with_dim", "min.reduction_no_dim", "argmax", "argmin", "any", "all", "var"),
            *("var.unbiased", "var_mean", "var_mean.unbiased", "std", "std.unbiased", "std_mean"),
            *("std_mean.unbiased", "count_nonzero", "nansum", "logsumexp"),
            # softmax
            *("softmax", "softmax.with_dtype", "log_softmax", "log_softmax.with_dtype", "_softmax_backward_data"),
            *("nn.functional.softmin", "nn.functional.softmin.with_dtype"),
            # normalization
            *("native_layer_norm", "nn.functional.layer_norm", "native_group_norm", "nn.functional.group_norm"),
            *("native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update"),
            *("nn.functional.batch_norm", "nn.functional.rms_norm", "nn.functional.instance_norm"),
            # scans, sort
            *("cumsum", "sort", "topk", "argsort", "msort"),
        }
    ),
    # matmul, convolution, pooling, embedding, indexing, scatter, views, padding
    "structured": frozenset(
        {
            *("mm", "bmm", "addmm", "addmm.decomposed", "addmv", "addbmm", "baddbmm", "dot", "vdot", "mv", "addr"),
            *("matmul", "linalg.vecdot", "inner", "outer", "einsum", "tensordot", "nn.functional.linear"),
            *("nn.functional.bilinear", "kron"),
            *("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d"),
            *("nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d"),
            *("nn.functional.avg_pool1d", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d"),
            *("nn.functional.max_pool1d", "nn.functional.max_pool2d", "nn.functional.max_pool3d"),
            *("nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool2d"),
            *("nn.functional.adaptive_avg_pool3d", "nn.functional.adaptive_max_pool1d"),
            *("nn.functional.adaptive_max_pool2d", "nn.functional.adaptive_max_pool3d"),
            *("nn.functional.embedding", "nn.functional.embedding_bag", "nn.functional.one_hot"),
            *("gather", "index_select", "index_add", "index_copy", "index_fill", "index_put", "take"),
            *("take_along_dim", "__getitem__", "_unsafe_masked_index", "masked_fill", "masked_scatter"),
            *("scatter", "scatter_add", "scatter_reduce.sum", "scatter_reduce.prod", "scatter_reduce.mean"),
            *("scatter_reduce.amin", "scatter_reduce.amax", "select_scatter", "slice_scatter", "diagonal_scatter"),
            *("view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "ravel", "permute", "transpose"),
            *("t", "T", "mT", "squeeze", "squeeze.multiple", "unsqueeze", "expand", "expand_as", "broadcast_to"),
            *("narrow", "select", "slice", "split", "split_with_sizes", "chunk", "unbind", "movedim", "diagonal"),
            *("cat", "stack", "hstack", "vstack", "dstack", "repeat", "tile", "flip", "fliplr", "flipud", "roll"),
            *("tril", "triu", "diag", "diag_embed", "as_strided", "unfold", "contiguous"),
            *("constant_pad_nd", "nn.functional.pad.constant", "nn.functional.pad.reflect"),
            *("nn.functional.pad.replicate", "nn.functional.pad.circular"),
            *("nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle"),
            *("nn.functional.scaled_dot_product_attention",),
        }
    ),
}

# A handful of entries covering each family cheaply; the test suite runs them (test/tools/test_coverage_sweep.py).
CI_SUBSET: tuple[str, ...] = (
    "add",
    "div.floor_rounding",
    "remainder",
    "tan",
    "nn.functional.gelu",
    "round",
    "lt",
    "long",
    "full_like",
    "sum",
    "argmax",
    "var",
    "log_softmax",
    "native_layer_norm",
    "cumsum",
    "topk",
    "nn.functional.dropout",
)


def _random_ops() -> dict[str, Callable[..., Any]]:
    """Entries whose values are random, with the function to call: their OpInfo ops wrap the call in
    `wrapper_set_seed`, which torch.compile cannot trace (it saves and restores the RNG state)."""
    return {
        "randn": torch.randn,
        "randn_like": torch.randn_like,
        "rand_like": torch.rand_like,
        "bernoulli": torch.bernoulli,
        "nn.functional.dropout": torch.nn.functional.dropout,
        **{name: getattr(torch.nn.functional, name.removeprefix("nn.functional.")) for name in DROPOUTS[1:]},
        "nn.functional.feature_alpha_dropout.with_train": torch.nn.functional.feature_alpha_dropout,
        "normal": torch.normal,
        "normal.number_mean": lambda std, mean, *args, **kwargs: torch.normal(mean, std, *args, **kwargs),
        "randint": torch.randint,
        "randint_like": torch.randint_like,
        "multinomial": torch.multinomial,
        **{name: getattr(torch.Tensor, method) for name, method in IN_PLACE_DRAWS.items()},
    }


# Entries that keep each element (or channel) as an affine function of the input or replace it by one constant:
# the dropouts (x / (1 - p), or 0) and the alpha dropouts (a x + b, or a constant keeping mean and variance).
DROPOUTS: tuple[str, ...] = (
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
)

# Entries that overwrite their input with draws from a distribution (the Tensor method each calls).
IN_PLACE_DRAWS: dict[str, str] = {
    "normal.in_place": "normal_",
    "uniform": "uniform_",
    "exponential": "exponential_",
    "cauchy": "cauchy_",
    "log_normal": "log_normal_",
    "geometric": "geometric_",
}
RANDOM_ENTRIES: frozenset[str] = frozenset(
    {"randn", "randn_like", "rand_like", "bernoulli", "nn.functional.dropout", "normal", "normal.number_mean"}
    | {"randint", "randint_like", *DROPOUTS, "nn.functional.feature_alpha_dropout.with_train", "multinomial"}
    | IN_PLACE_DRAWS.keys()
)


def _without_dropout(position: int | None = None) -> Callable[[Any], tuple[list[Any], dict[str, Any]]]:
    """A sample's arguments with its dropout probability 0: the keyword `dropout_p`, or argument `position`."""

    def fixed(sample: Any) -> tuple[list[Any], dict[str, Any]]:
        args, kwargs = list(sample.args), dict(sample.kwargs)
        if position is not None and position < len(args):
            args[position] = 0.0
        elif "dropout_p" in kwargs:
            kwargs["dropout_p"] = 0.0
        return args, kwargs

    return fixed


def _given_offsets(dims: int) -> Callable[[Any], tuple[list[Any], dict[str, Any]]]:
    """A fractional max pooling sample's arguments with the pooling regions' offsets given (`_random_samples`,
    [batch, channels, dims] in [0, 1)), drawn on the CPU from a generator of their own."""

    def fixed(sample: Any) -> tuple[list[Any], dict[str, Any]]:
        source = sample.input
        batch = 1 if source.dim() == dims + 1 else source.shape[0]
        offsets = torch.rand(batch, source.shape[-dims - 1], dims, generator=torch.Generator().manual_seed(1))
        return list(sample.args), {**sample.kwargs, "_random_samples": offsets.to(source.dtype)}

    return fixed


# Entries whose random draws enter through one argument: dropout's probability in attention, the regions' offsets
# in fractional max pooling (drawn when not given), rrelu's training flag (which draws the negative slopes). With
# that argument fixed (no dropout; offsets drawn on the CPU and given to both; evaluation mode) a sample is
# deterministic and its result is compared with eager's as any other's; the call as op_db makes it is checked for
# properties (`_drawn_problem`) and for equal draws after equal seeds. Its function is op_db's own. On the device
# only: torch.compile cannot trace op_db's seeding wrapper.
FIXED_DRAWS: dict[str, Callable[[Any], tuple[list[Any], dict[str, Any]]]] = {
    "nn.functional.scaled_dot_product_attention": _without_dropout(),
    # multi_head_attention_forward(query, key, value, embed_dim, num_heads, in_proj_weight, in_proj_bias, bias_k,
    # bias_v, add_zero_attn, dropout_p, ...): the sample's input is the query
    "nn.functional.multi_head_attention_forward": _without_dropout(9),
    "nn.functional.fractional_max_pool2d": _given_offsets(2),
    "nn.functional.fractional_max_pool3d": _given_offsets(3),
    "nn.functional.rrelu": lambda sample: (list(sample.args), {**sample.kwargs, "training": False}),
}


# Entries whose results are uninitialised memory: only their dtype and shape are defined.
UNINITIALISED_ENTRIES: frozenset[str] = frozenset(
    {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
)


# Entries returning eigen- or singular vectors, unique up to sign: the result positions of (U, V) whose columns
# (rows for Vh, `True`) flip together, for `_align_signs`.
SIGN_FREE_VECTORS: dict[str, tuple[tuple[int, bool], ...]] = {
    "linalg.eigh": ((1, False),),
    "linalg.svd": ((0, False), (2, True)),
    "svd": ((0, False), (2, False)),
}


def _align_signs(name: str, actual: Any, expected: Any) -> Any:
    """`actual` with each vector of a sign-free entry flipped to point as eager's does (the sign of its dot
    product with eager's, taken from the first of the entry's flipped-together results)."""
    positions = SIGN_FREE_VECTORS.get(name)
    if positions is None or not isinstance(actual, tuple | list) or len(actual) != len(expected):
        return actual
    results = list(actual)
    first, first_transposed = positions[0]
    got, want = results[first], expected[first]
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.numel() == 0:
        return actual
    columns = (got.mT if first_transposed else got), (want.mT if first_transposed else want)
    signs = torch.where((columns[0] * columns[1]).sum(-2, keepdim=True) < 0, -1.0, 1.0).to(got.dtype)
    for position, transposed in positions:
        value = results[position]
        if isinstance(value, torch.Tensor) and value.shape == expected[position].shape:
            results[position] = (value.mT * signs).mT if transposed else value * signs
    return type(actual)(*results) if hasattr(actual, "_fields") else type(actual)(results)


@dataclass
class EntryResult:
    """The verdict on one op_db entry."""

    name: str
    status: str  # "native", "fallback", "failing" or "no graph"
    reason: str = ""
    samples: int = 0
    fallback_ops: list[str] = field(default_factory=list)
    seconds: float = 0.0
    fingerprint: str = ""
    max_samples: int = DEFAULT_MAX_SAMPLES  # results of older caches, which did not record it, used the default
    # eager's result of a float32 sample is float64 or complex128 (`x.double()`, `softmax(x, dtype=float64)`): a
    # fallback by design, since the NeuronCore has no such storage type; reported in a row of its own
    wide_result: bool = False


# -- one sample ----------------------------------------------------------------------------------------------


def _leaves(value: Any) -> list[Any]:
    import torch.utils._pytree as pytree

    return pytree.tree_leaves(value)


def _comparable(tensor: torch.Tensor) -> torch.Tensor:
    """A dense real tensor with the same values: sparse tensors densified, complex ones as (real, imag) pairs."""
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor.resolve_conj())
    return tensor.detach()


def _compare(actual: Any, expected: Any, uninitialised: bool = False) -> str | None:
    """None when the compiled result matches eager's (tensors within the dtype tolerance), else why not; results
    of `uninitialised` entries (torch.empty and friends) are compared by dtype and shape only."""
    from neuron_mlir.frontend.tensors import to_numpy
    from neuron_mlir.ir.semantics.compare import mismatch

    got, want = _leaves(actual), _leaves(expected)
    if len(got) != len(want):
        return f"{len(got)} results, eager gave {len(want)}"
    for index, (a, e) in enumerate(zip(got, want, strict=True)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"result {index}: {type(a).__name__}, eager gave a tensor"
            if a.dtype != e.dtype:
                return f"result {index}: dtype {a.dtype}, eager gave {e.dtype}"
            if a.shape != e.shape:
                return f"result {index}: shape {tuple(a.shape)}, eager gave {tuple(e.shape)}"
            if uninitialised:
                continue
            a, e = _comparable(a), _comparable(e)
            problem = mismatch(to_numpy(a), to_numpy(e))
            if problem is not None:
                return f"result {index}: {problem}"
        elif a != e and not (isinstance(a, float) and isinstance(e, float) and a != a and e != e):
            return f"result {index}: {a!r}, eager gave {e!r}"
    return None


def _random_properties(
    name: str, actual: Any, expected: Any, inputs: list[torch.Tensor], args: tuple[Any, ...] = ()
) -> str | None:
    """Checks of a random op's compiled result that hold whatever numbers were drawn; `args` are the sample's
    input and arguments (a distribution's parameters among them)."""
    got, want = _leaves(actual), _leaves(expected)
    if len(got) != len(want):
        return f"{len(got)} results, eager gave {len(want)}"
    for index, (a, e) in enumerate(zip(got, want, strict=True)):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
            return (
                f"result {index}: {getattr(a, 'dtype', type(a))} {tuple(getattr(a, 'shape', ()))}, eager gave "
                f"{e.dtype} {tuple(e.shape)}"
            )
        values = a.double()
        if not torch.isfinite(values).all() and torch.isfinite(e.double()).all():
            return f"result {index}: non-finite values"
    first = got[0] if got else None
    if not isinstance(first, torch.Tensor) or first.numel() == 0:
        return None
    values = first.double()
    if name == "rand_like" and not bool(((values >= 0) & (values < 1)).all()):
        return "rand_like: values outside [0, 1)"
    if name in ("randn", "randn_like") and values.numel() >= 1000:
        mean, std = float(values.mean()), float(values.std())
        if abs(mean) > 0.2 or abs(std - 1) > 0.2:
            return f"{name}: mean {mean:.3f}, std {std:.3f} of {values.numel()} draws"
    if name == "bernoulli" and not bool(((values == 0) | (values == 1)).all()):
        return "bernoulli: values other than 0 and 1"
    if name in IN_PLACE_DRAWS:
        return _support_problem(name, values, inputs[0].double() if inputs else None, args[1:])
    if name in ("randint", "randint_like"):
        # randint(high, size) or randint(low, high, size); randint_like(x, high) or randint_like(x, low, high)
        bounds = [a for a in (args if name == "randint" else args[1:]) if type(a) is int]
        low, high = (0, *bounds)[-2:]
        if not bool(((values >= low) & (values < high) & (values == values.floor())).all()):
            return f"{name}: values other than whole numbers in [{low}, {high})"
    if name == "multinomial":
        return _multinomial_problem(first, *args)
    if (name in DROPOUTS or name.startswith("nn.functional.feature_alpha_dropout")) and inputs:
        return _dropout_problem(name, first, inputs[0], _leaves(expected)[0])
    return None


def _multinomial_problem(
    drawn: torch.Tensor, weights: torch.Tensor, samples: int = 1, replacement: bool = False, *_: Any
) -> str | None:
    """Whether multinomial's draws include something other than a category of its row, a category of zero weight
    while others remained, or (without replacement) one category twice in a row."""
    rows = weights.detach().reshape(-1, weights.shape[-1]).double()
    draws = drawn.reshape(rows.shape[0], -1)
    if drawn.dtype != torch.int64 or bool(((draws < 0) | (draws >= rows.shape[1])).any()):
        return "multinomial: draws that are not categories"
    for row, categories in zip(rows, draws, strict=True):
        positive = int((row > 0).sum())
        weightless = row[categories] == 0
        if bool(weightless[: positive if not replacement else len(categories)].any()):
            return "multinomial: a category of zero weight drawn before the others"
        if not replacement and len(categories.unique()) != len(categories):
            return "multinomial: a category drawn twice without replacement"
    return None


def _dropout_problem(name: str, actual: torch.Tensor, source: torch.Tensor, reference: torch.Tensor) -> str | None:
    """Whether a dropout's result has an element that is neither the dropped constant nor the kept affine image
    of its input, both read off eager's result: the dropped constant is its most common value (0 for dropout),
    and the kept map a x + b is the least-squares line through its other elements (1 / (1 - p) and 0 for
    dropout), within the tolerance of the result's dtype."""
    from neuron_mlir.frontend.tensors import to_numpy
    from neuron_mlir.ir.semantics.compare import tolerance

    if not source.shape == actual.shape == reference.shape or reference.numel() == 0:
        return None
    rtol, atol = tolerance(to_numpy(reference[:0]).dtype)
    x, eager, values = source.double().flatten(), reference.double().flatten(), actual.double().flatten()
    dropped = eager.mode().values
    eager_kept = ~torch.isclose(eager, dropped, rtol, atol)
    if int(eager_kept.sum()) < 2 or bool((x[eager_kept] == x[eager_kept][0]).all()):
        return None  # eager kept too little to tell the line
    design = torch.stack([x[eager_kept], torch.ones_like(x[eager_kept])], dim=1)
    slope, offset = torch.linalg.lstsq(design, eager[eager_kept].unsqueeze(1)).solution.flatten().tolist()
    scale = max(1.0, float(eager.abs().max()))
    kept = torch.isclose(values, slope * x + offset, rtol, atol * scale)
    if not bool((kept | torch.isclose(values, dropped, rtol, atol * scale)).all()):
        return f"{name}: values neither dropped ({float(dropped):.4g}) nor {slope:.4g} x + {offset:.4g}"
    return None


def _support_problem(name: str, values: torch.Tensor, source: torch.Tensor | None, args: tuple[Any, ...]) -> str | None:
    """Whether an in-place draw left values outside its distribution's support (the parameters from `args`, at
    their defaults when absent) or left its input as it was."""
    if source is not None and source.shape == values.shape and values.numel() > 1 and torch.equal(source, values):
        return f"{name}: the input came back unchanged"
    if name == "uniform":
        low, high = (*args, 0.0, 1.0)[:2] if len(args) != 1 else (args[0], 1.0)
        if not bool(((values >= low) & (values <= high)).all()):
            return f"uniform: values outside [{low}, {high}]"
    if name in ("exponential", "log_normal") and not bool((values >= 0).all()):
        return f"{name}: negative values"
    if name == "geometric" and not bool(((values >= 1) & (values == values.floor())).all()):
        return "geometric: values that are not whole numbers of trials >= 1"
    return None


def describe_error(error: BaseException) -> str:
    """The innermost cause of a compile or run failure, on one line (Dynamo wraps the backend's error)."""
    while error.__cause__ is not None or getattr(error, "inner_exception", None) is not None:
        error = error.__cause__ or error.inner_exception  # type: ignore[attr-defined]
    return trim_reason(f"{type(error).__name__}: {str(error).strip() or type(error).__name__}")


_MACHINE_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.+-]+)+[/\\]([\w.+-]+\.\w+)")


def trim_reason(text: str) -> str:
    """A failure's first line, without machine paths (a file keeps its name): Dynamo appends the traced source
    and a traceback, and paths name the machine that ran the sweep, not the op."""
    first = next((line.strip() for line in text.strip().splitlines() if line.strip()), "")
    # Dynamo's appended context, when an older cache joined the lines into one
    first = re.split(r" (?:While executing|Original traceback:|Use tlparse|from user code:) ", first)[0]
    return _MACHINE_PATH.sub(r"\1", first)[:300]


@dataclass
class SampleOutcome:
    problem: str | None = None  # a failure description
    fallback_ops: list[str] = field(default_factory=list)
    compiled_nodes: int = 0
    skipped: bool = False  # eager raised: the sample is not a test of the compiler
    wide_result: bool = False  # eager's result holds a float64 or complex128 tensor


def run_sample(op: Any, sample: Any, name: str) -> SampleOutcome:
    """Compile one sample with the neuron-mlir backend and compare it with eager."""
    import neuron_mlir

    tensors, rebuild = _split_sample(sample)
    random = name in RANDOM_ENTRIES
    function = _random_ops()[name] if random else op.op

    def call(*values: torch.Tensor) -> Any:
        first, args, kwargs = rebuild(list(values))
        return function(first, *args, **kwargs)

    try:
        torch.manual_seed(0)
        expected = call(*[t.clone() for t in tensors])
    except Exception:
        return SampleOutcome(skipped=True)
    torch._dynamo.reset()
    neuron_mlir.reset()
    backend_errors: list[BaseException] = []

    def backend(graph_module: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
        # the registered neuron-mlir backend; Dynamo turns some backend exceptions into a silent graph break
        # (the graph then runs eagerly), which must count as a failure, not as "nothing to compile"
        from neuron_mlir.frontend.backend import neuron_mlir_backend

        try:
            return neuron_mlir_backend(graph_module, example_inputs, **kwargs)
        except Exception as error:
            backend_errors.append(error)
            raise

    compiled = torch.compile(call, backend=backend)
    try:
        torch.manual_seed(0)
        actual = compiled(*[t.clone() for t in tensors])
        if random:
            torch.manual_seed(0)
            again = compiled(*[t.clone() for t in tensors])
    except Exception as error:
        return SampleOutcome(problem=describe_error(error))
    finally:
        stats = neuron_mlir.stats()
        torch._dynamo.reset()
    if backend_errors:
        return SampleOutcome(problem=describe_error(backend_errors[0]))
    outcome = SampleOutcome(fallback_ops=sorted(stats["fallback_ops"]), compiled_nodes=stats["nodes_compiled"])
    outcome.wide_result = any(
        isinstance(leaf, torch.Tensor) and leaf.dtype in WIDE_DTYPES for leaf in _leaves(expected)
    )
    if random:
        outcome.problem = _random_properties(name, actual, expected, tensors, (sample.input, *sample.args))
        if outcome.problem is None and _compare(again, actual) is not None:
            outcome.problem = "two calls after the same torch.manual_seed drew different values"
    else:
        outcome.problem = _compare(_align_signs(name, actual, expected), expected, name in UNINITIALISED_ENTRIES)
    return outcome


# -- one entry -------------------------------------------------------------------------------------------------


def run_samples(
    op: Any, dtype: torch.dtype, max_samples: int, run: Callable[[Any, Any, str], SampleOutcome]
) -> tuple[EntryResult, int]:
    """Run up to `max_samples` CPU samples of `dtype` of one op_db entry through `run` (a sample, its verdict),
    and count the nodes they compiled. The first failing sample decides the entry; otherwise the result stays "no
    graph" with its samples and the ops that fell back over all of them, for the caller to call it "fallback" or
    "native" in its mode's own words."""
    name = entry_name(op)
    started = time.perf_counter()
    result = EntryResult(name, "no graph")
    if dtype not in op.supported_dtypes("cpu"):
        result.reason = f"no {str(dtype).removeprefix('torch.')} support on CPU"
        return result, 0
    try:
        samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), max_samples))
    except Exception as error:
        result.reason = f"sample_inputs failed: {_short(error)}"
        return result, 0
    fallback: set[str] = set()
    compiled_nodes = 0
    for sample in samples:
        if time.perf_counter() - started > ENTRY_TIME_BUDGET_S:
            break
        outcome = run(op, sample, name)
        if outcome.skipped:
            continue
        result.samples += 1
        fallback |= set(outcome.fallback_ops)
        result.wide_result |= outcome.wide_result
        compiled_nodes += outcome.compiled_nodes
        if outcome.problem is not None:
            result.status, result.reason = "failing", outcome.problem
            break
    result.fallback_ops = sorted(fallback)
    result.seconds = round(time.perf_counter() - started, 2)
    if result.status != "failing" and result.samples == 0:
        result.reason = "eager raised on every sample" if samples else "no samples"
    return result, compiled_nodes


def check_entry(op: Any, max_samples: int = DEFAULT_MAX_SAMPLES) -> EntryResult:
    """Run up to `max_samples` float32 samples of one op_db entry through the backend."""
    result, compiled_nodes = run_samples(op, torch.float32, max_samples, run_sample)
    if result.status == "failing" or result.samples == 0:
        return result
    if result.fallback_ops:
        prefix = WIDE_FALLBACK if result.wide_result else "ran on the CPU: "
        result.status, result.reason = "fallback", prefix + ", ".join(result.fallback_ops)
    elif compiled_nodes == 0:
        result.reason = "no ATen op to compile"
    else:
        result.status = "native"
    return result


# -- the device's eager mode ---------------------------------------------------------------------------------------

DEVICE_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16)


def _on_device(value: Any) -> Any:
    """A sample's tensors on the `neuron` device with their storages: a view keeps its offset, strides and the
    bytes around it (`as_strided` samples address the storage, not the view), and views of one storage stay
    views of one device storage."""
    from torch.utils._pytree import tree_map_only

    storages: dict[int, torch.Tensor] = {}

    def move(tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        if tensor.layout != torch.strided or tensor.is_conj() or tensor.is_neg():
            return tensor.to("neuron")
        host_storage = tensor.untyped_storage()
        key = host_storage.data_ptr()
        if key not in storages or storages[key].dtype != tensor.dtype:
            elements = host_storage.nbytes() // tensor.element_size()
            whole = torch.empty(0, dtype=tensor.dtype).set_(host_storage, 0, (elements,), (1,))
            storages[key] = whole.to("neuron")
        return storages[key].as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())

    return tree_map_only(torch.Tensor, move, value)


def _on_host(value: Any) -> Any:
    from torch.utils._pytree import tree_map_only

    return tree_map_only(torch.Tensor, lambda t: t.cpu() if t.device.type == "neuron" else t, value)


# Positional arguments that op_db builds on the CPU whatever device it tests (`torch.tensor(...)` rather than
# `make_tensor(device=...)`), because the op takes them there: tensor_split's tensor of indices or sections.
HOST_ARGUMENTS: dict[str, frozenset[int]] = {"tensor_split": frozenset({0})}


def _device_sample(sample: Any, name: str = "") -> tuple[Any, list[Any], dict[str, Any]]:
    """A sample's (input, args, kwargs) on the device, a factory op's `device=` pointed at it; the arguments of
    `HOST_ARGUMENTS` stay where op_db makes them."""
    device_input, args, kwargs = _on_device((sample.input, list(sample.args), dict(sample.kwargs)))
    for position in HOST_ARGUMENTS.get(name, ()):
        if position < len(args):
            args[position] = sample.args[position]
    if kwargs.get("device") is not None:
        kwargs["device"] = torch.device("neuron")
    return device_input, args, kwargs


def run_device_sample(op: Any, sample: Any, name: str) -> SampleOutcome:
    """Run one sample eagerly on the `neuron` device and compare it with the CPU: the ops that went to the host
    are read from the device's own count of host calls (`eager.EAGER_STATS.host_ops`)."""
    from neuron_mlir.frontend.device import eager

    random = name in RANDOM_ENTRIES or name in FIXED_DRAWS
    function = _random_ops()[name] if name in RANDOM_ENTRIES else op.op
    # moved before the CPU runs, which may write their inputs (in-place entries)
    device_input, device_args, device_kwargs = _device_sample(sample, name)
    again_sample = _device_sample(sample, name) if random else None
    # the input as given: an in-place draw's CPU run overwrites it
    original = [sample.input.clone()] if random and isinstance(sample.input, torch.Tensor) else []
    try:
        torch.manual_seed(0)
        expected = function(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        return SampleOutcome(skipped=True)
    before = Counter(eager.EAGER_STATS.host_ops)
    native_before = sum(eager.EAGER_STATS.native_ops.values())
    try:
        torch.manual_seed(0)
        actual = _on_host(function(device_input, *device_args, **device_kwargs))
        if random:
            torch.manual_seed(0)
            assert again_sample is not None
            again_input, again_args, again_kwargs = again_sample
            again = _on_host(function(again_input, *again_args, **again_kwargs))
        if name in FIXED_DRAWS:
            fixed_args, fixed_kwargs = FIXED_DRAWS[name](sample)
            fixed_expected = function(sample.input, *fixed_args, **fixed_kwargs)
            fixed_input, fixed_device_args, fixed_device_kwargs = _on_device((sample.input, fixed_args, fixed_kwargs))
            fixed = _on_host(function(fixed_input, *fixed_device_args, **fixed_device_kwargs))
    except Exception as error:
        return SampleOutcome(problem=describe_error(error))
    host = Counter(eager.EAGER_STATS.host_ops)
    host.subtract(before)
    outcome = SampleOutcome(
        fallback_ops=sorted(op_name for op_name, calls in host.items() if calls > 0),
        compiled_nodes=sum(eager.EAGER_STATS.native_ops.values()) - native_before,
        wide_result=any(isinstance(leaf, torch.Tensor) and leaf.dtype in WIDE_DTYPES for leaf in _leaves(expected)),
    )
    if random:
        outcome.problem = _random_properties(name, actual, expected, original, (sample.input, *sample.args))
        if outcome.problem is None and name in FIXED_DRAWS:
            problem = _compare(fixed, fixed_expected)
            outcome.problem = f"with fixed draws: {problem}" if problem else _drawn_problem(name, sample, actual, fixed)
        if outcome.problem is None and _compare(again, actual) is not None:
            outcome.problem = "two calls after the same torch.manual_seed drew different values"
    else:
        outcome.problem = _compare(_align_signs(name, actual, expected), expected, name in UNINITIALISED_ENTRIES)
    return outcome


def _drawn_problem(name: str, sample: Any, actual: Any, fixed: Any) -> str | None:
    """Whether a `FIXED_DRAWS` entry's random result (`actual`) breaks what its draws cannot change: attention with
    dropout must differ from its result without (`fixed`, already checked against eager's); every fractional max
    pooling output is an element of its (batch, channel) plane of the input."""
    result, reference = _leaves(actual)[0], _leaves(fixed)[0]
    if "attention" in name:
        if "multi_head" in name:
            probability = sample.args[9] if len(sample.args) > 9 else 0.0
        else:
            probability = sample.kwargs.get("dropout_p", 0.0)
        if probability > 0 and sample.kwargs.get("training", True) and _compare(result, reference) is None:
            return f"{name}: dropout (p = {probability}) left the result as without it"
        return None
    if name == "nn.functional.rrelu":
        return _rrelu_problem(sample, result)
    dims = 3 if name.endswith("3d") else 2
    source = sample.input.detach()
    channels = source.shape[-dims - 1]
    planes = source.reshape(-1, channels, math.prod(source.shape[-dims:])).double()
    values = result.reshape(planes.shape[0], channels, -1).double()
    present = (values.unsqueeze(-1) == planes.unsqueeze(-2)).any(-1)
    if not bool(present.all()):
        return f"{name}: {int((~present).sum())} outputs are no element of their plane of the input"
    return None


def _rrelu_problem(sample: Any, result: torch.Tensor) -> str | None:
    """Whether rrelu's result keeps a positive element other than as it is, or scales a negative one by a slope
    outside [lower, upper] (within the tolerance of the result's dtype)."""
    from neuron_mlir.frontend.tensors import numpy_dtype
    from neuron_mlir.ir.semantics.compare import tolerance

    lower, upper = float(sample.kwargs.get("lower", 1 / 8)), float(sample.kwargs.get("upper", 1 / 3))
    x, values = sample.input.detach().double(), result.double()
    rtol, atol = tolerance(numpy_dtype(result.dtype))
    kept = torch.isclose(values, x, rtol, atol)
    low, high = x * upper - atol - rtol * x.abs(), x * lower + atol + rtol * x.abs()
    scaled = (values >= low) & (values <= high)
    wrong = torch.where(x > 0, ~kept, ~scaled)
    if bool(wrong.any()):
        return f"nn.functional.rrelu: {int(wrong.sum())} elements neither kept (x > 0) nor x times [{lower}, {upper}]"
    return None


def host_reasons() -> dict[str, str]:
    """Why each op that ran on the host did: the device's refusal of its single-op program (by op name)."""
    from neuron_mlir.frontend.device import eager

    return eager.host_reasons()


def check_device_entry(op: Any, dtype: torch.dtype, max_samples: int = DEFAULT_MAX_SAMPLES) -> EntryResult:
    """Run up to `max_samples` CPU samples of `dtype` of one op_db entry eagerly on the device."""
    result, _ = run_samples(op, dtype, max_samples, run_device_sample)
    if result.status == "failing" or result.samples == 0:
        return result
    if result.fallback_ops:
        reasons = host_reasons()
        result.status = "fallback"
        result.reason = "on the host: " + "; ".join(reasons.get(o, o) for o in result.fallback_ops)
    else:
        result.status = "native"
    return result


# -- caching and running ----------------------------------------------------------------------------------------

MODES = ("compile", "device")


@dataclass
class DeviceEntryResult:
    """The verdicts on one op_db entry run eagerly on the device, one per dtype of `DEVICE_DTYPES`."""

    name: str
    by_dtype: dict[str, EntryResult] = field(default_factory=dict)


def source_fingerprint(mode: str = "compile") -> str:
    """A hash of the sources a mode's results depend on: cached results from other sources are stale. The
    `neuron` device (frontend/device/) does not enter torch.compile of CPU tensors, only the device's mode."""
    digest = hashlib.sha256()
    device_sources = REPO / "frontend" / "device"
    for folder in ("frontend", "ir", "lowering", "runtime", "backend_trn"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if mode == "compile" and path.is_relative_to(device_sources):
                continue
            digest.update(path.relative_to(REPO).as_posix().encode())
            digest.update(path.read_bytes())
    digest.update(mode.encode())
    digest.update((REPO / "tools" / "coverage_sweep.py").read_bytes())
    return digest.hexdigest()[:16]


def _cache_path(cache: Path, name: str, mode: str = "compile") -> Path:
    folder = cache / "device" if mode == "device" else cache
    return folder / (name.replace("/", "_") + ".json")


def _load(mode: str, data: dict[str, Any]) -> EntryResult | DeviceEntryResult:
    if mode == "device":
        by_dtype = {dtype: EntryResult(**result) for dtype, result in data["by_dtype"].items()}
        return DeviceEntryResult(data["name"], by_dtype)
    return EntryResult(**data)


def _verdicts(result: EntryResult | DeviceEntryResult) -> list[EntryResult]:
    return list(result.by_dtype.values()) if isinstance(result, DeviceEntryResult) else [result]


def _cached(
    cache: Path | None, name: str, fingerprint: str, reuse_stale: bool, max_samples: int, mode: str = "compile"
) -> EntryResult | DeviceEntryResult | None:
    if cache is None:
        return None
    path = _cache_path(cache, name, mode)
    if not path.exists():
        return None
    try:
        result = _load(mode, json.loads(path.read_text()))
    except (ValueError, TypeError, KeyError):
        return None
    verdicts = _verdicts(result)
    if not verdicts or any(v.max_samples != max_samples for v in verdicts):
        return None
    return result if reuse_stale or all(v.fingerprint == fingerprint for v in verdicts) else None


def _quietly(function: Callable[..., Any], *args: Any) -> Any:
    import logging

    logging.getLogger("torch").setLevel(logging.ERROR)
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        return function(*args)


def _check_device(op: Any, max_samples: int) -> DeviceEntryResult:
    result = DeviceEntryResult(entry_name(op))
    for dtype in DEVICE_DTYPES:
        dtype_name = str(dtype).removeprefix("torch.")
        try:
            result.by_dtype[dtype_name] = _quietly(check_device_entry, op, dtype, max_samples)
        except Exception as error:  # a harness bug must not lose the whole sweep
            result.by_dtype[dtype_name] = EntryResult(result.name, "failing", f"harness: {describe_error(error)}")
    return result


def _worker(task: tuple[int, int, str, str | None, str]) -> EntryResult | DeviceEntryResult:
    index, max_samples, fingerprint, cache, mode = task
    op = _op_db()[index]
    result: EntryResult | DeviceEntryResult
    if mode == "device":
        result = _check_device(op, max_samples)
    else:
        try:
            result = _quietly(check_entry, op, max_samples)
        except Exception as error:  # a harness bug must not lose the whole sweep
            result = EntryResult(entry_name(op), "failing", f"harness: {type(error).__name__}: {_short(error)}")
    for verdict in _verdicts(result):
        verdict.fingerprint, verdict.max_samples = fingerprint, max_samples
    if cache is not None:
        path = _cache_path(Path(cache), result.name, mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(result)))
    return result


def select_entries(names: Iterable[str] | None, exact: bool = False) -> list[tuple[int, str]]:
    """(index in op_db, entry name) of every entry, or of those whose entry name (or, unless `exact`, op name)
    is in `names`."""
    wanted = set(names) if names is not None else None
    return [
        (i, entry_name(op))
        for i, op in enumerate(_op_db())
        if wanted is None or entry_name(op) in wanted or (not exact and op.name in wanted)
    ]


def _run(
    mode: str,
    names: Iterable[str] | None,
    max_samples: int,
    jobs: int,
    cache: Path | None,
    refresh: bool,
    reuse_stale: bool,
    progress: bool,
    exact: bool,
    cached_only: bool = False,
) -> list[Any]:
    fingerprint = source_fingerprint(mode)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    entries = select_entries(names, exact)
    results: dict[str, Any] = {}
    tasks = []
    for index, name in entries:
        hit = None if refresh else _cached(cache, name, fingerprint, reuse_stale, max_samples, mode)
        if hit is not None:
            results[name] = hit
        elif not cached_only:
            tasks.append((index, max_samples, fingerprint, str(cache) if cache is not None else None, mode))
    if tasks:
        if jobs <= 1:
            fresh: Iterable[Any] = map(_worker, tasks)
        else:
            context = multiprocessing.get_context("spawn")
            pool = context.Pool(jobs, maxtasksperchild=20)
            fresh = pool.imap_unordered(_worker, tasks)
        for count, result in enumerate(fresh, 1):
            results[result.name] = result
            if progress:
                verdicts = " ".join(f"{v.status} {v.reason[:60]}" for v in _verdicts(result))
                print(f"[{count}/{len(tasks)}] {mode} {result.name}: {verdicts}", file=sys.stderr)
        if jobs > 1:
            pool.close()
            pool.join()
    return [results[name] for _, name in entries if name in results]


def sweep(
    names: Iterable[str] | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    jobs: int = 1,
    cache: Path | None = None,
    refresh: bool = False,
    reuse_stale: bool = False,
    progress: bool = False,
    exact: bool = False,
) -> list[EntryResult]:
    """Check every selected op_db entry (`select_entries`) through torch.compile, `jobs` processes in parallel,
    reusing cached verdicts when fresh."""
    return _run("compile", names, max_samples, jobs, cache, refresh, reuse_stale, progress, exact)


def device_sweep(
    names: Iterable[str] | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    jobs: int = 1,
    cache: Path | None = None,
    refresh: bool = False,
    reuse_stale: bool = False,
    progress: bool = False,
    exact: bool = False,
    cached_only: bool = False,
) -> list[DeviceEntryResult]:
    """Run every selected op_db entry eagerly on the `neuron` device in each dtype of `DEVICE_DTYPES`, as
    `sweep` does through torch.compile; `cached_only`: only the entries the cache holds, computing none."""
    return _run("device", names, max_samples, jobs, cache, refresh, reuse_stale, progress, exact, cached_only)


# -- reporting ---------------------------------------------------------------------------------------------------


def coverage(results: Iterable[EntryResult]) -> dict[str, int]:
    counts = Counter(r.status for r in results)
    return {status: counts.get(status, 0) for status in ("native", "fallback", "failing", "no graph")}


def percentage(counts: dict[str, int]) -> float:
    graphs = counts["native"] + counts["fallback"] + counts["failing"]
    return 100.0 * counts["native"] / max(1, graphs)


def wide_fallbacks(results: Iterable[EntryResult]) -> list[EntryResult]:
    """The fallbacks whose results are float64 or complex128, which no NeuronCore storage type holds."""
    return [r for r in results if r.status == "fallback" and r.wide_result]


def summary_line(label: str, results: list[EntryResult]) -> str:
    counts = coverage(results)
    graphs = counts["native"] + counts["fallback"] + counts["failing"]
    return (
        f"| {label} | {len(results)} | {counts['native']} | {counts['fallback']} | {counts['failing']} | "
        f"{counts['no graph']} | **{percentage(counts):.1f}%** ({counts['native']}/{graphs}) |"
    )


# What "native" means where the numbers cannot be eager's bit for bit (kept with the generator, so the report
# states it next to the numbers).
NOTES: tuple[str, ...] = (
    "- Random ops draw from the device's counter-based generator (Philox-4x32-10 on GpSimdE, keyed by a seed "
    "that the frontend draws from torch's CPU generator at every call): reproducible under `torch.manual_seed`, "
    "but not eager's numbers. Their entries pass on properties: shape and dtype, range and moments of the "
    "distribution, dropout's kept values equal to the input times 1/(1-p), and equal draws after equal seeds. "
    "On the device, random ops compile the same way, seeded from the device generator, and their entries pass on "
    "the same properties (in-place draws also on their distribution's support; every dropout's elements either "
    "its dropped constant or its kept affine image of the input, both read off eager's result; multinomial's "
    "draws categories of the row, zero weights only once the others are drawn, none twice without replacement); "
    "the host draws only where the caller passes a generator or the compiler has no such distribution "
    "(`randperm`). Entries whose draws enter through one argument (attention's dropout, fractional max "
    "pooling's window offsets) are also run with it fixed (no dropout; offsets drawn on the CPU and given to both) "
    "and compared with eager's result exactly as other entries are; their random results must differ from the "
    "dropout-free ones, each pooled value must be an element of its plane of the input, and rrelu's must keep "
    "positive elements and scale the others by slopes in [lower, upper]. rrelu's fixed form is its evaluation "
    "mode.",
    "- Entries that return uninitialised memory (`torch.empty` and friends) are compared by dtype and shape only.",
    "- Integer and boolean arithmetic is exact (GpSimdE integer lanes, 64-bit for int64, wrapping as PyTorch), "
    "and so are integer reductions and scans (sums, products, extremes, arg-reductions, cumsum): they fold on "
    "GpSimdE's integer lanes, never through fp32.",
    "- float64 and complex128 tensors have no NeuronCore storage type: graphs using them run on the CPU (fallback); "
    "complex64 and complex32 values are carried as real (real, imaginary) pairs (docs/complex-and-fft.md). Entries "
    "whose float32 samples give float64 or complex128 results (`x.double()`, `softmax(x, dtype=torch.float64)`) "
    "are such fallbacks by design: they are counted in a row of their own, and the coverage of the others beside.",
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def family_of(name: str) -> str:
    for family, names in FAMILIES.items():
        if name in names:
            return family
    return ""


def report(results: list[EntryResult], max_samples: int, device: list[DeviceEntryResult] | None = None) -> str:
    """The markdown of docs/coverage.md: torch.compile's verdicts, and the device's when `device` is given."""
    version = torch.__version__.split("+")[0]
    device_by_name = {d.name: d for d in device or []}
    dtypes = [str(d).removeprefix("torch.") for d in DEVICE_DTYPES] if device else []
    wide = wide_fallbacks(results)
    lines = [
        "# Lowering coverage on PyTorch's OpInfo database",
        "",
        "Generated by `make coverage` (`python -m neuron_mlir.tools.coverage_sweep`); do not edit.",
        "",
        f"torch {version}, {len(results)} entries of `op_db`, up to {max_samples} float32 CPU samples each, "
        'each through `torch.compile(fn, backend="neuron-mlir")` and compared with eager within the tolerance '
        "of the result's dtype (`ir/semantics/compare.py`). **native**: every sample ran on the simulated "
        "NeuronCore and matched; **fallback**: matched, but some node ran on the CPU; **failing**: an error or "
        "a mismatch; **no graph**: nothing to compile (no float32 samples, eager raised, or no ATen op). Random "
        "ops are checked for properties and reproducibility under `torch.manual_seed` instead of eager's values. "
        "Coverage = native / (native + fallback + failing).",
        "",
        "| entries | total | native | fallback | failing | no graph | coverage |",
        "|---|---|---|---|---|---|---|",
        summary_line("all of op_db", results),
        summary_line("float64 or complex128 results", wide),
        summary_line("all but those", [r for r in results if not (r.status == "fallback" and r.wide_result)]),
    ]
    for family, names in FAMILIES.items():
        subset = [r for r in results if r.name in names]
        if subset:
            lines.append(summary_line(f"{family} ops", subset))
    if device:
        lines += [
            "",
            "## On the `neuron` device, eagerly",
            "",
            f"The same entries with up to {max_samples} CPU samples of each dtype, the tensors moved to the `neuron` "
            "device (a factory op's `device=` too) and the op called eagerly there, compared with the CPU within "
            "the tolerance of the result's dtype. **native**: every ATen op of every sample ran as a compiled "
            "program on the simulated NeuronCore (views and metadata ops, which move no data, included); "
            "**fallback**: matched, but some op ran on the host, as counted by the device's dispatch (the ops "
            "and the device's reason are listed below); **failing**: an error or a mismatch; **no graph**: no "
            "samples of the dtype, or the CPU raised on every one."
            + (
                f" This run of the device's sweep covers {len(device)} of the {len(results)} entries; the others "
                "have no device verdict yet."
                if len(device) < len(results)
                else ""
            ),
            "",
            "| entries | total | native | fallback | failing | no graph | coverage |",
            "|---|---|---|---|---|---|---|",
        ]
        for dtype in dtypes:
            verdicts = [d.by_dtype[dtype] for d in device if dtype in d.by_dtype]
            lines.append(summary_line(f"device, {dtype}", verdicts))
            if dtype == "float32":
                # the entries whose float32 samples give float64 or complex128 results (as the device's run or
                # torch.compile's verdicts tell them): such results are host work by design on the device too
                wide_names = {r.name for r in wide}
                held = [v for v in verdicts if v.status == "fallback" and (v.wide_result or v.name in wide_names)]
                lines.append(summary_line("device, float32, float64 or complex128 results", held))
                lines.append(summary_line("device, float32, all but those", [v for v in verdicts if v not in held]))
            for family, names in FAMILIES.items():
                subset = [v for v in verdicts if v.name in names]
                if subset:
                    lines.append(summary_line(f"device, {dtype}, {family} ops", subset))
    lines += ["", "## Notes", "", *NOTES]
    header = "| entry | family | status | reason |" + "".join(f" device {d} |" for d in dtypes)
    lines += ["", "## Per entry", "", header, "|---|---|---|---|" + "---|" * len(dtypes)]
    order = {"failing": 0, "fallback": 1, "native": 2, "no graph": 3}
    for r in sorted(results, key=lambda r: (family_of(r.name) == "", family_of(r.name), order[r.status], r.name)):
        on_device = device_by_name.get(r.name)
        cells = "".join(
            f" {on_device.by_dtype[d].status if on_device and d in on_device.by_dtype else ''} |" for d in dtypes
        )
        lines.append(f"| `{r.name}` | {family_of(r.name)} | {r.status} | {_cell(_reason(r))} |{cells}")
    fallen = Counter(op for r in results for op in r.fallback_ops)
    if fallen:
        lines += ["", "## Ops that fell back to the CPU, by entries", ""]
        lines += [f"- `{op}`: {count}" for op, count in fallen.most_common()]
    for dtype in dtypes:
        verdicts = sorted(
            (d.by_dtype[dtype] for d in device or [] if dtype in d.by_dtype), key=lambda v: (order[v.status], v.name)
        )
        troubled = [v for v in verdicts if v.status in ("failing", "fallback")]
        if troubled:
            lines += ["", f"## Device entries, {dtype}, not native", "", "| entry | status | reason |", "|---|---|---|"]
            lines += [f"| `{v.name}` | {v.status} | {_cell(_reason(v))} |" for v in troubled]
        hosted = Counter(op for v in verdicts for op in v.fallback_ops)
        if hosted:
            lines += ["", f"## Ops the device ran on the host, {dtype}, by entries", ""]
            lines += [f"- `{op}`: {count}" for op, count in hosted.most_common()]
    return "\n".join(lines) + "\n"


def _reason(result: EntryResult) -> str:
    return trim_reason(result.reason) if result.status == "failing" else result.reason


def compile_results_of_report(path: Path) -> list[EntryResult]:
    """The torch.compile verdicts of a report this module wrote (its per-entry table), for refreshing only the
    device's columns: the compile sweep takes hours where the device's takes minutes."""
    results = []
    in_table = False
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            in_table = line == "## Per entry"
            continue
        match = re.match(r"\| `([^`]+)` \| [^|]* \| (native|fallback|failing|no graph) \| ((?:[^|\\]|\\.)*)\|", line)
        if in_table and match:
            reason = match.group(3).strip().replace("\\|", "|")
            wide = reason.startswith(WIDE_FALLBACK)
            ops = reason.removeprefix(WIDE_FALLBACK if wide else "ran on the CPU: ")
            fallback_ops = ops.split(", ") if match.group(2) == "fallback" else []
            results.append(
                EntryResult(match.group(1), match.group(2), reason, fallback_ops=fallback_ops, wide_result=wide)
            )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated op or entry names (default: all of op_db)")
    parser.add_argument("--subset", choices=["ci", *FAMILIES], help="a named subset of entries")
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both", help="torch.compile, the device, or both")
    parser.add_argument("--max-samples", type=int, default=DEFAULT_MAX_SAMPLES)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="per-entry result cache directory")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    parser.add_argument("--refresh", action="store_true", help="recompute even fresh cached entries")
    parser.add_argument("--reuse-stale", action="store_true", help="accept cached results of older sources")
    parser.add_argument(
        "--cached-only", action="store_true", help="the device mode reports the cached entries only, computing none"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="write the markdown report here; with --mode device, the torch.compile columns of the report already "
        "there are kept",
    )
    options = parser.parse_args(argv)
    names: list[str] | None = options.ops.split(",") if options.ops else None
    if options.subset == "ci":
        names = list(CI_SUBSET)
    elif options.subset is not None:
        names = sorted(FAMILIES[options.subset])
    started = time.perf_counter()
    cache = None if options.no_cache else options.cache
    exact = options.subset is not None
    run = (options.max_samples, options.jobs, cache, options.refresh, options.reuse_stale, True, exact)
    results = sweep(names, *run) if options.mode in ("compile", "both") else []
    device = device_sweep(names, *run, options.cached_only) if options.mode in ("device", "both") else None
    seconds = time.perf_counter() - started
    if options.output is not None:
        kept = compile_results_of_report(options.output) if not results and options.output.exists() else results
        if not kept:
            parser.error(f"{options.output} holds no torch.compile results to keep: run the compile mode too")
        options.output.write_text(report(kept, options.max_samples, device))
        results = [] if kept is not results else results
    for r in results:
        if r.status in ("failing", "fallback"):
            print(f"{r.status.upper()} {r.name}: {_reason(r)}")
    if results:
        counts = coverage(results)
        print(f"coverage: {percentage(counts):.1f}% {counts}")
        wide = wide_fallbacks(results)
        if wide:
            rest = coverage(r for r in results if not (r.status == "fallback" and r.wide_result))
            print(f"float64 or complex128 results: {len(wide)}; the others: {percentage(rest):.1f}% {rest}")
        for family, subset_names in FAMILIES.items():
            subset = coverage(r for r in results if r.name in subset_names)
            if sum(subset.values()):
                print(f"{family} ops: {percentage(subset):.1f}% {subset}")
    for dtype in (str(d).removeprefix("torch.") for d in DEVICE_DTYPES if device is not None):
        verdicts = [d.by_dtype[dtype] for d in device or [] if dtype in d.by_dtype]
        for v in verdicts:
            if v.status in ("failing", "fallback"):
                print(f"DEVICE {dtype} {v.status.upper()} {v.name}: {_reason(v)}")
        counts = coverage(verdicts)
        print(f"device {dtype}: {percentage(counts):.1f}% {counts}")
    print(f"in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
