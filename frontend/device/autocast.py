"""`torch.autocast("neuron", dtype=...)`: the casts of PyTorch's autocast, for the `neuron` device.

torch routes an op inside an autocast region of a PrivateUse1 device through the AutocastPrivateUse1 dispatch key,
but ships no kernels for it (CUDA's and CPU's op lists are C++ registrations for their own keys): without these,
every op in a `neuron` autocast region fails to dispatch. `register` adds, for AutocastPrivateUse1:

* a fallthrough for every op not listed below: it runs in the types it is given;
* `LOWER_PRECISION` (matmuls, convolutions, attention): fp32 tensors on the device are cast to the region's dtype
  (`torch.get_autocast_dtype("neuron")`, bf16 unless set otherwise: the NeuronCore's native type; fp16 too);
* `FP32` (exp/log/pow-like functions, softmax, norms, losses, reductions whose sums lose precision in 16 bits):
  16-bit tensors on the device are cast to fp32;
* `PROMOTE` (ops of several tensors that must agree: cat, stack, addcmul ...): all to the widest floating type
  among them.

These follow PyTorch's autocast op lists for CUDA (`aten/src/ATen/autocast_mode.cpp`), overload by overload
where an op has several. As there, only floating tensors on the autocast device are cast, never fp64 ones, and
the op then runs with the autocast key excluded (each cast op once, outside of any region).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from neuron_mlir.frontend.device.storage import DEVICE_TYPE

LOWER_PRECISION = (
    "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linear", "addbmm",
    "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "scaled_dot_product_attention",
)  # fmt: skip
FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm", "frobenius_norm", "nuclear_norm",
    "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp", "softmax", "log_softmax",
    "cross_entropy_loss", "prod", "cumprod", "cumsum", "sum", "linalg_vector_norm", "norm",
)  # fmt: skip
PROMOTE = (
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put", "scatter_add",
    "tensordot", "cat", "stack",
)  # fmt: skip

_AUTOCAST_KEY = torch._C.DispatchKey.AutocastPrivateUse1  # type: ignore[attr-defined]  # missing from torch's stubs
_libraries: list[torch.library.Library] = []


def _eligible(value: object) -> bool:
    """A floating tensor on the device that autocast may cast (fp64 never is)."""
    return (
        isinstance(value, torch.Tensor)
        and value.device.type == DEVICE_TYPE
        and value.is_floating_point()
        and value.dtype != torch.float64
    )


def _cast_all(args: tuple[Any, ...], kwargs: dict[str, Any], dtype: torch.dtype) -> tuple[Any, Any]:
    def cast(value: Any) -> Any:
        return value.to(dtype) if _eligible(value) and value.dtype != dtype else value

    return pytree.tree_map(cast, (args, kwargs))


def _target_dtype(policy: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.dtype | None:
    """The dtype `policy` casts the eligible tensors of a call to (None: leave them)."""
    if policy == "lower":
        return torch.get_autocast_dtype(DEVICE_TYPE)
    if policy == "fp32":
        return torch.float32
    dtypes = [value.dtype for value in pytree.tree_leaves((args, kwargs)) if _eligible(value)]
    return max(dtypes, key=lambda dtype: torch.finfo(dtype).bits) if dtypes else None


def _kernel(op: torch._ops.OpOverload, policy: str) -> Callable[..., Any]:
    def autocast_kernel(*args: Any, **kwargs: Any) -> Any:
        dtype = _target_dtype(policy, args, kwargs)
        if dtype is not None:
            args, kwargs = _cast_all(args, kwargs, dtype)
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_AUTOCAST_KEY)):
            return op(*args, **kwargs)

    return autocast_kernel


def _overloads(name: str) -> list[torch._ops.OpOverload]:
    """The overloads of aten::`name` that take a tensor (none for a name this torch lacks)."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return []
    found = []
    for overload_name in packet.overloads():
        overload = getattr(packet, overload_name)
        if any("Tensor" in str(arg.type) for arg in overload._schema.arguments):  # Tensor, Tensor?, Tensor[]
            found.append(overload)
    return found


def policies() -> dict[torch._ops.OpOverload, str]:
    """Every overload with an autocast kernel, and its policy ("lower", "fp32" or "promote")."""
    table: dict[torch._ops.OpOverload, str] = {}
    for names, policy in ((LOWER_PRECISION, "lower"), (FP32, "fp32"), (PROMOTE, "promote")):
        for name in names:
            for overload in _overloads(name):
                if not overload._schema.is_mutable:  # autocast leaves in-place and out= variants alone
                    table[overload] = policy
    return table


def register() -> None:
    """Give AutocastPrivateUse1 its kernels (once per process), and make bf16 the device's autocast dtype."""
    if _libraries:
        return
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    kernels = torch.library.Library("aten", "IMPL")
    for overload, policy in policies().items():
        name = overload._schema.name.removeprefix("aten::")
        if overload._overloadname != "default":
            name += f".{overload._overloadname}"
        kernel = _kernel(overload, policy)
        kernels.impl(name, kernel, "AutocastPrivateUse1")
    from neuron_mlir.frontend.device.registration import hide_from_dynamo

    hide_from_dynamo(kernel)  # every kernel is a closure of the one code object
    _libraries.extend((fallthrough, kernels))
    torch.set_autocast_dtype(DEVICE_TYPE, torch.bfloat16)
