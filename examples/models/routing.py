"""A mixture of experts routed eagerly, as MoE code written for any accelerator routes its tokens: the device's
data-dependent ops (top-k, `torch.where`, `nonzero`, boolean gathers, `index_add_`, `bincount`) in one step."""

from __future__ import annotations

import torch


def route_tokens(x: torch.Tensor, gate: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """Each token's top-2 experts, per expert the tokens it was chosen by (`torch.where` of the choices, `nonzero`
    of the tokens using it), their rows gathered, the expert's matmul and the weighted rows added back at their
    tokens (`index_add_`); a load-balancing term from the tokens per expert (`bincount`)."""
    probs = (x @ gate).softmax(-1)
    chosen = probs.topk(2, dim=-1).indices
    weights = torch.gather(probs, 1, chosen)
    out = torch.zeros(x.shape[0], experts.shape[2], device=x.device)
    for expert in range(experts.shape[0]):
        tokens, slots = torch.where(chosen == expert)
        rows = (x[tokens] @ experts[expert]).relu()
        out.index_add_(0, tokens, rows * weights[tokens, slots].unsqueeze(-1))
    first = (chosen[:, 0] == 0).nonzero().squeeze(1)
    load = torch.bincount(chosen.flatten(), minlength=experts.shape[0]).float() / chosen.numel()
    return out + out.index_select(0, first).sum(0) + (load * probs.mean(0)).sum()
