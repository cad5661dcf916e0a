"""`torch._scaled_mm` as ops the compiler lowers: an fp8 matmul on TensorE, then its scales, bias and cast.

`_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)` multiplies fp8 matrices
(float8_e4m3fn or float8_e5m2; b usually column-major) and returns `(a @ b) * scale_a * scale_b + bias` in
`out_dtype` (by default a's dtype). The scales are per tensor (one element each) or per row (`scale_a` [M, 1],
`scale_b` [1, N]), fp32.

The decomposition writes it as `mm(a.to(f32), b.to(f32))` followed by the scale multiplies, the bias add and
the cast. A widening of fp8 is exact, and so are products of fp8 values in fp32, so the matmul computes what
TensorE computes from the fp8 operands with fp32 accumulation in PSUM; convert-torch-to-tile sees operands that
are widened fp8 tensors and feeds TensorE the fp8 bytes themselves (at the fp8 rate, from a quarter of fp32's
bytes), so the widenings are never materialised. The scales and the bias are elementwise ops on the product,
which tile-fuse-epilogues folds into its PSUM evacuation.

Numerics against eager: PyTorch's CPU kernel scales the widened operands before its fp32 matmul; here the
product is scaled (as GPUs' fp8 matmuls do), so fp32 results differ by fp32 rounding only. `use_fast_accum`
(reduced-precision accumulation on some GPUs) is accepted and changes nothing: PSUM always accumulates in fp32.

`scale_result` (the scale of an fp8 output) is refused: the CPU kernel ignores it while GPU kernels multiply
the output by it, so there is no one meaning to reproduce; such a call stays whole and runs on the CPU, with the
reason (`refusal`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

_SCALED_MM = torch.ops.aten._scaled_mm.default


def scaled_mm(
    self: torch.Tensor,
    mat2: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: torch.Tensor | None = None,
    scale_result: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    use_fast_accum: bool = False,
) -> torch.Tensor:
    """`_scaled_mm` as a matmul of widened fp8 operands, scale multiplies, a bias add and a cast."""
    if scale_result is not None:
        return NotImplemented  # kept whole: `refusal` says why
    product = torch.mm(self.to(torch.float32), mat2.to(torch.float32))
    product = product * scale_a.to(torch.float32) * scale_b.to(torch.float32)
    if bias is not None:
        product = product + bias.to(torch.float32)
    return product.to(out_dtype if out_dtype is not None else self.dtype)


def refusal(node: torch.fx.Node) -> str | None:
    """Why a `_scaled_mm` node left whole by the decomposition is not lowered, or None for other nodes."""
    if node.target is not _SCALED_MM:
        return None
    if node.kwargs.get("scale_result") is not None or (len(node.args) > 5 and node.args[5] is not None):
        return (
            "scale_result is not supported: the CPU kernel ignores an fp8 output's scale and GPU kernels multiply "
            "by it; scale the result explicitly"
        )
    return None


def scaled_matmul_decompositions() -> dict[object, Callable[..., object]]:
    """The decompositions of this module, keyed by operator, for AOTAutograd's table."""
    return {_SCALED_MM: scaled_mm}
