"""Decompositions of the kernels of mixture-of-experts routing, into ATen ops with static shapes.

AOTAutograd applies them while it traces (`backend.decompositions()` adds them to its table), so a MoE layer
reaches the compiler as ordinary ATen ops that lower natively, in its forward and its backward, instead of
nodes that run on the CPU between compiled regions. Each reproduces the kernel's results as eager computes them.

The other kernels routing uses, `histc` (per-expert token counts, from the sorted expert ids) and
`empty_permuted`, are general ops decomposed in `frontend.composite_decompositions`.

- `transformers::grouped_mm_fallback` and its backward (transformers' grouped expert matmul when
  `torch._grouped_mm` cannot serve it: fp32 weights under torch.compile): rows sorted by expert, the rows of
  expert e being [offs[e-1], offs[e]), each multiplied by its expert's weight matrix. The loop over experts
  with a host read of the offsets becomes one batched matmul of every row with every expert's weights on
  TensorE, [E, S, K] x [E, K, N], and a selection of each row's own expert: static shapes whatever the routing,
  at E times the multiply-adds of the grouped product (E experts, S routed rows), which is what keeps a
  data-dependent row split out of the program. Rows past the last offset belong to no expert and come out zero,
  as the kernel leaves them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _expert_of_rows(offs: torch.Tensor, rows: int) -> torch.Tensor:
    """[E, S, 1] booleans: row s belongs to expert e, the rows of expert e being [offs[e-1], offs[e])."""
    row = torch.arange(rows, device=offs.device, dtype=offs.dtype)
    expert = (offs.unsqueeze(-1) <= row).sum(0)  # experts whose rows all lie before row s
    experts = torch.arange(offs.shape[0], device=offs.device, dtype=expert.dtype)
    return (expert == experts.unsqueeze(-1)).unsqueeze(-1)


def grouped_mm(input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """`transformers::grouped_mm_fallback(input [S, K], weight [E, K, N], offs [E]) -> [S, N]`: row s times
    the weight of its expert (offs: cumulative row counts, non-decreasing as a cumsum of counts is)."""
    mine = _expert_of_rows(offs, input.shape[0])
    products = torch.matmul(input.unsqueeze(0), weight)  # [E, S, N]: every row by every expert
    return torch.where(mine, products, torch.zeros_like(products)).sum(0)


def grouped_mm_backward(
    input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor, grad_output: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`transformers::grouped_mm_fallback_backward`: (dInput, dWeight) of `grouped_mm`. Row s's gradient is
    dOut[s] W[e]^T for its expert e; expert e's weight gradient sums input[s]^T dOut[s] over its rows only (the
    other rows are selected out, not multiplied by zero, so a non-finite value in them reaches no other expert)."""
    mine = _expert_of_rows(offs, input.shape[0])
    row_gradients = torch.matmul(grad_output.unsqueeze(0), weight.transpose(-2, -1))  # [E, S, K]
    grad_input = torch.where(mine, row_gradients, torch.zeros_like(row_gradients)).sum(0)
    own_inputs = torch.where(mine, input.unsqueeze(0), input.new_zeros(()))
    own_grads = torch.where(mine, grad_output.unsqueeze(0), grad_output.new_zeros(()))
    grad_weight = torch.matmul(own_inputs.transpose(-2, -1), own_grads)  # [E, K, N]
    return grad_input, grad_weight


def routing_decompositions() -> dict[object, Callable[..., object]]:
    """The decompositions of this module, keyed by operator, for AOTAutograd's table. transformers' grouped
    matmul ops are included once transformers has registered them (its MoE integration is imported with any
    MoE model)."""
    table: dict[object, Callable[..., object]] = {}
    if torch._C._dispatch_has_kernel("transformers::grouped_mm_fallback"):
        table[torch.ops.transformers.grouped_mm_fallback.default] = grouped_mm
    if torch._C._dispatch_has_kernel("transformers::grouped_mm_fallback_backward"):
        table[torch.ops.transformers.grouped_mm_fallback_backward.default] = grouped_mm_backward
    return table
