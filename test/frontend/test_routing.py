"""MoE routing compiles whole: the decompositions of frontend.routing against the kernels they replace, and a
transformers sparse-MoE block (top-k router, sorted tokens, per-expert counts, grouped expert matmul) forward and
backward on the simulated NeuronCore with no node on the CPU."""

import copy

import pytest
import torch
from support import assert_close_to_torch

import neuron_mlir
from neuron_mlir.frontend.composite_decompositions import empty_permuted, histc
from neuron_mlir.frontend.routing import grouped_mm, grouped_mm_backward


@pytest.mark.parametrize(
    ("values", "bins", "low", "high"),
    [
        (torch.tensor([0.0, 3, 1, 3, 2, 0, 0, 3]), 4, 0.0, 3.0),  # expert ids: the last one lands in the last bin
        (torch.linspace(-2.0, 3.0, 101), 7, -1.5, 2.0),  # values outside the range are not counted
        (torch.tensor([float("nan"), 0.5, 1.0, 0.0]), 2, 0.0, 1.0),  # NaN is not counted
    ],
)
def test_histc_counts_as_eager(values, bins, low, high):
    assert torch.equal(histc(values, bins, low, high), torch.histc(values, bins, low, high))


def test_histc_over_the_data_range_counts_as_eager():
    values = torch.randn(5)
    assert torch.equal(histc(values, 3, 0.0, 0.0), torch.histc(values, 3, 0.0, 0.0))


def test_empty_permuted_has_the_physical_layout():
    made = empty_permuted([2, 3, 4], [2, 0, 1], dtype=torch.float32)
    expected = torch.empty_permuted([2, 3, 4], [2, 0, 1])
    assert (made.shape, made.stride()) == (expected.shape, expected.stride())


def _moe_kernels():
    pytest.importorskip("transformers")
    import transformers.integrations.moe  # noqa: F401  (registers the grouped matmul ops)

    return torch.ops.transformers.grouped_mm_fallback, torch.ops.transformers.grouped_mm_fallback_backward


@pytest.mark.parametrize("offsets", [[3, 3, 8], [0, 10, 10], [2, 5, 7]])  # empty experts; rows past the last
def test_grouped_mm_matches_the_kernel(offsets):
    forward, backward = _moe_kernels()
    torch.manual_seed(0)
    rows, weight, grad = torch.randn(10, 5), torch.randn(3, 5, 6), torch.randn(10, 6)
    offs = torch.tensor(offsets, dtype=torch.int32)
    assert_close_to_torch(grouped_mm(rows, weight, offs), forward(rows, weight, offs), "grouped_mm")
    assert_close_to_torch(
        grouped_mm_backward(rows, weight, offs, grad), backward(rows, weight, offs, grad), "grouped_mm backward"
    )


def _sparse_moe_block():
    pytest.importorskip("transformers")
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    config = MixtralConfig(hidden_size=16, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2)
    config._experts_implementation = "grouped_mm"  # transformers' default for MoE models
    torch.manual_seed(0)
    block = MixtralSparseMoeBlock(config)
    for parameter in block.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    return block, torch.randn(2, 6, 16)


@pytest.mark.usefixtures("fresh_compiler")
def test_sparse_moe_block_trains_with_no_node_on_the_cpu():
    block, x = _sparse_moe_block()
    reference = copy.deepcopy(block)
    compiled = torch.compile(block, backend="neuron-mlir", options={"strict": True})
    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected, actual = reference(x_eager), compiled(x_compiled)
    assert_close_to_torch(actual, expected, "MoE block output")
    grad = torch.randn_like(expected)
    expected.backward(grad)
    actual.backward(grad)
    assert_close_to_torch(x_compiled.grad, x_eager.grad, "grad of the input")
    for (name, p), q in zip(block.named_parameters(), reference.parameters(), strict=True):
        assert_close_to_torch(p.grad, q.grad, f"grad of {name}")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0
    assert stats["graphs_compiled"] == 2  # one forward and one backward: no graph break
