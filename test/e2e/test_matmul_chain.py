"""Matmul chains (lowering/tile_fuse_matmul_chains.py) against eager: `act(x @ W1 + b1) @ W2 (+ b2)`
with the hidden activations computed on chip as the second matmul's stationary panel, after a layer norm (as in
a transformer's MLP) or on a plain input, for each activation the chain absorbs, in bf16 and fp32; and the
chains that must not fuse or must fall back to the two ops' own lowerings (hidden size not a multiple of 128,
W1 stored transposed as nn.Linear keeps it, a second user of the activations, a single row, and a hidden size
too long for the second matmul's panel to stay on chip).
"""

import pytest
import torch
import torch.nn.functional as F
from support.compiled import check_compiled

ACTIVATIONS = {
    "gelu_tanh": lambda h: F.gelu(h, approximate="tanh"),
    "gelu": F.gelu,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def _mlp(activation: str = "gelu_tanh", norm: bool = True):
    act = ACTIVATIONS[activation]

    def fn(x, gamma, beta, w1, b1, w2, b2):
        if norm:
            x = F.layer_norm(x, x.shape[-1:], gamma, beta)
        rows = x.view(-1, x.shape[-1])
        hidden = act(torch.addmm(b1, rows, w1))
        return torch.addmm(b2, hidden, w2).view(*x.shape[:-1], -1)

    return fn


def _inputs(
    rows: tuple[int, ...], d: int, hidden: int, out: int | None = None, dtype: torch.dtype = torch.bfloat16
) -> list[torch.Tensor]:
    """Inputs already in `dtype`: a conversion between the two matmuls would be an op between them."""
    torch.manual_seed(0)
    out = out or d
    values = [
        torch.randn(*rows, d) * 2 + 0.5,
        torch.randn(d) * 0.5 + 1,
        torch.randn(d) * 0.5,
        torch.randn(d, hidden) / d**0.5,
        torch.randn(hidden) * 0.5,
        torch.randn(hidden, out) / hidden**0.5,
        torch.randn(out),
    ]
    return [value.to(dtype) for value in values]


CASES = [
    ("bf16_gpt2_like", torch.bfloat16, "gelu_tanh", True, (1, 130), 256, 1024, None),
    ("bf16_two_block_rows", torch.bfloat16, "gelu_tanh", True, (600,), 128, 640, 200),
    ("bf16_plain_input_relu", torch.bfloat16, "relu", False, (2, 65), 384, 512, 130),
    ("bf16_gelu_erf", torch.bfloat16, "gelu", True, (130,), 128, 384, None),
    ("bf16_sigmoid", torch.bfloat16, "sigmoid", True, (130,), 128, 256, None),
    ("fp32_tanh", torch.float32, "tanh", True, (130,), 256, 384, 70),
    ("bf16_hidden_not_tiled", torch.bfloat16, "gelu_tanh", True, (130,), 128, 200, None),
    ("bf16_single_row", torch.bfloat16, "gelu_tanh", True, (1,), 128, 256, None),
    # 2 x 197 rows over a long K1: the first matmul's 10 rows left over accumulate with the roles swapped
    ("bf16_swapped_remainder", torch.bfloat16, "gelu_tanh", False, (2, 197), 3072, 256, 70),
]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(
    ("name", "dtype", "activation", "norm", "rows", "d", "hidden", "out"), CASES, ids=[case[0] for case in CASES]
)
def test_mlp_chain(name, dtype, activation, norm, rows, d, hidden, out):
    check_compiled(_mlp(activation, norm), *_inputs(rows, d, hidden, out, dtype))


def _linear_weights(x, gamma, beta, w1, b1, w2, b2):
    # nn.Linear's layout, weights [out, in]: addmm reads W1^T, whose K is contiguous
    hidden = F.gelu(F.linear(x, w1, b1), approximate="tanh")
    return F.linear(hidden, w2, b2)


def _hidden_also_returned(x, gamma, beta, w1, b1, w2, b2):
    hidden = torch.relu(torch.addmm(b1, x, w1))
    return torch.addmm(b2, hidden, w2), hidden


@pytest.mark.usefixtures("fresh_compiler")
def test_mlp_linear_layout_not_chained():
    x, gamma, beta, w1, b1, w2, b2 = _inputs((130,), 128, 256)
    check_compiled(_linear_weights, x, gamma, beta, w1.t().contiguous(), b1, w2.t().contiguous(), b2)


@pytest.mark.usefixtures("fresh_compiler")
def test_mlp_hidden_returned_not_chained():
    check_compiled(_hidden_also_returned, *_inputs((130,), 128, 256))


@pytest.mark.usefixtures("fresh_compiler")
def test_mlp_chain_panel_too_long_falls_back():
    """A hidden size whose panel does not fit SBUF beside the rest: the two ops run on their own."""
    check_compiled(_mlp("relu", norm=False), *_inputs((2,), 128, 172 * 128, 128))
