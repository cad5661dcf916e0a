"""Matmul epilogues compiled for the simulated NeuronCore against eager: a 16-bit addmm's row bias added in PSUM
by TensorE, and elementwise ops of a matmul's result fused into its evacuation (lowering/convert_torch_to_tile/
epilogue.py), including through reshapes and when the product has other users (then nothing is fused).

Shapes avoid multiples of the tile sizes (128 partitions, 512-wide PSUM banks).
"""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_torch

import neuron_mlir


def _shared(p: torch.Tensor) -> torch.Tensor:
    return torch.relu(p) + p


CASES = [
    (
        "addmm_bf16_row_bias",
        lambda c, a, b: torch.addmm(c.bfloat16(), a.bfloat16(), b.bfloat16()),
        [(530,), (130, 300), (300, 530)],
    ),
    (
        "addmm_bf16_full_bias",
        lambda c, a, b: torch.addmm(c.bfloat16(), a.bfloat16(), b.bfloat16()),
        [(130, 530), (130, 300), (300, 530)],
    ),
    ("linear_gelu", lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"), [(130, 200), (600, 200), (600,)]),
    (
        "addmm_bf16_reshaped_gelu",
        lambda x, w, b: F.gelu(torch.addmm(b.bfloat16(), x.bfloat16().view(-1, 200), w.bfloat16()).view(2, 65, 600)),
        [(2, 65, 200), (200, 600), (600,)],
    ),
    ("mm_sigmoid", lambda a, b: torch.sigmoid(a @ b), [(37, 129), (129, 513)]),
    ("bmm_tanh", lambda a, b: torch.tanh(torch.bmm(a, b)), [(3, 5, 129), (3, 129, 7)]),
    ("mm_relu_shared", lambda a, b: _shared(a @ b), [(37, 129), (129, 130)]),
    ("mm_then_binary", lambda a, b, c: (a @ b) * c, [(37, 129), (129, 130), (37, 130)]),
]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "shapes"), CASES, ids=[case[0] for case in CASES])
def test_matmul_epilogue(name, fn, shapes):
    torch.manual_seed(0)
    inputs = [torch.randn(s) for s in shapes]
    out = torch.compile(fn, backend="neuron-mlir")(*inputs)
    assert_close_to_torch(out, fn(*inputs), name)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
