"""Matmul epilogues compiled for the simulated NeuronCore against eager: a 16-bit addmm's row bias added in PSUM
by TensorE, and elementwise ops of a matmul's result fused into its evacuation (lowering/tile_fuse_epilogues.py),
including through reshapes, with further operands (a residual, broadcast, transposed or sliced
operands, an input also returned, another product) and when fusing is not allowed (the product has other users,
or another operand is computed after the matmul).

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
    (
        "linear_residual_bf16",
        lambda x, w, b: F.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()) + x.bfloat16(),
        [(2, 65, 200), (200, 200), (200,)],
    ),
    ("mm_plus_broadcast_row", lambda a, b, c: torch.add(a @ b, c, alpha=0.5), [(37, 129), (129, 530), (530,)]),
    ("mm_plus_broadcast_column", lambda a, b, c: c - a @ b, [(130, 129), (129, 70), (130, 1)]),
    ("mm_plus_transposed", lambda a, b, c: (a @ b) + c.t(), [(130, 129), (129, 70), (70, 130)]),
    ("bmm_times_sliced", lambda a, b, c: torch.bmm(a, b) * c[:, ::2], [(3, 5, 129), (3, 129, 7), (3, 10, 7)]),
    ("mm_bf16_plus_fp32", lambda a, b, c: (a.bfloat16() @ b.bfloat16()) + c, [(37, 129), (129, 130), (37, 130)]),
    ("mm_plus_returned_input", lambda a, b, c: ((a @ b) + c, c), [(37, 129), (129, 130), (37, 130)]),
    ("two_products", lambda a, b, c: (a @ b) + (a @ c), [(37, 129), (129, 130), (129, 130)]),
    ("later_operand", lambda a, b, c: (a @ b) + torch.relu(c), [(37, 129), (129, 130), (37, 130)]),
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


@pytest.mark.usefixtures("fresh_compiler")
def test_a_shared_transposed_convolutions_weight_gradients_add_where_stored():
    # a ConvTranspose2d applied twice (VidEoMT's upscaling, once per frame): its two weight gradients are stored
    # one kernel position at a time, walking the channel dims of the 4-D weight, and their sum is fused into those
    # stores: the fused loads and stores must walk the same dims (they walked the last two and did not verify)
    torch.manual_seed(0)
    conv = torch.nn.ConvTranspose2d(32, 32, kernel_size=2, stride=2)
    first, second = torch.randn(2, 32, 4, 4), torch.randn(2, 32, 4, 4)

    def loss(a, b):
        return F.gelu(conv(a)).square().sum() + F.gelu(conv(b)).square().sum()

    def gradients() -> list[torch.Tensor | None]:
        return [None if p.grad is None else p.grad.clone() for p in conv.parameters()]

    torch.compile(loss, backend="neuron-mlir")(first, second).backward()
    compiled = gradients()
    conv.zero_grad()
    loss(first, second).backward()
    assert_close_to_torch(compiled, gradients(), "weight and bias gradients")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


@pytest.mark.usefixtures("fresh_compiler")
def test_bias_matmuls_run_in_the_row_tiles_of_the_pe_array(tmp_path):
    """A bf16 Linear layer's bias matmuls (a ones row against the bias row, K = 1) that start its accumulators take
    the copies of the bias row on partitions 0, 32, 64 and 96 in turn, each on its own row tile of trn2's PE array,
    the 4 rows past the last full row tile (run with the roles swapped) included, and the result is eager's."""
    torch.manual_seed(0)
    x, w, b = torch.randn(516, 512).bfloat16(), torch.randn(640, 512).bfloat16(), torch.randn(640).bfloat16()

    def fn(x, w, b):
        return F.linear(x, w, b)

    compiled = torch.compile(fn, backend="neuron-mlir", options={"debug_dir": str(tmp_path), "target": "trn2"})
    assert_close_to_torch(compiled(x, w, b), fn(x, w, b), "linear")
    neuron = (next(tmp_path.glob("*inference*")) / "3_neuron.mlir").read_text()
    starts = [
        int(line.split("row_tile_start = ")[1].split(" ")[0])
        for line in neuron.splitlines()
        if "neuron.nc_matmul" in line and "row_tile_size = 32" in line
    ]
    assert sorted(set(starts)) == [0, 32, 64, 96]
    assert len(starts) >= 8  # four full row tiles, two column chunks of 640 features
