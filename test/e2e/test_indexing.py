"""Gathers, scatters and distances compiled for the simulated NeuronCore (indirect DMA) against eager."""

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_golden, assert_close_to_torch

import neuron_mlir


def _compiled_matches_eager(fn, *inputs, grad_of: int | None = None):
    inputs = [x.detach().clone() for x in inputs]
    mirror = [x.detach().clone() for x in inputs]
    if grad_of is not None:
        inputs[grad_of].requires_grad_(True)
        mirror[grad_of].requires_grad_(True)
    out = torch.compile(fn, backend="neuron-mlir")(*inputs)
    expected = fn(*mirror)
    assert_close_to_torch(out, expected, "forward")
    if grad_of is not None:
        seed = torch.randn_like(expected)
        out.backward(seed)
        expected.backward(seed)
        assert_close_to_torch(inputs[grad_of].grad, mirror[grad_of].grad, "grad")
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]


def _ints(high, shape, low=0):
    return torch.randint(low, high, shape)


CASES = [
    # rows of 130 (more than a partition tile of tokens: 3 x 50), duplicate tokens
    ("embedding", lambda w, i: F.embedding(i, w), lambda: (torch.randn(37, 130), _ints(37, (3, 50)))),
    ("index_select_rows", lambda x, i: torch.index_select(x, 0, i), lambda: (torch.randn(9, 5, 4), torch.tensor([3, 0, 8, 3]))),
    ("index_select_inner", lambda x, i: torch.index_select(x, 2, i), lambda: (torch.randn(3, 5, 7), torch.tensor([6, 0, 1]))),
    ("gather", lambda x, i: torch.gather(x, 1, i), lambda: (torch.randn(4, 6, 3), _ints(6, (4, 2, 3)))),
    ("gather_transposed_source", lambda x, i: torch.gather(x.t(), 0, i), lambda: (torch.randn(5, 7), _ints(7, (3, 5)))),
    ("index_negative", lambda x, i, j: x[i, :, j], lambda: (torch.randn(5, 6, 7), _ints(5, (3, 4), -5), _ints(7, (4,)))),
    ("index_separated", lambda x, i, j: x[i, :, j], lambda: (torch.randn(5, 6, 7), _ints(5, (2,)), _ints(7, (2,)))),
    ("index_middle", lambda x, i: x[:, i], lambda: (torch.randn(5, 6, 130), _ints(6, (2, 3), -6))),
    ("scatter", lambda x, i, s: x.scatter(1, i, s), lambda: (torch.randn(4, 6), torch.tensor([[0, 2], [1, 5], [5, 3], [4, 0]]),
                                                             torch.randn(4, 2))),
    ("scatter_value", lambda x, i: x.scatter(0, i, 2.5), lambda: (torch.randn(4, 3), torch.tensor([[3, 0, 1]]))),
    ("scatter_add_duplicates", lambda x, i, s: x.scatter_add(0, i, s), lambda: (torch.randn(3, 5), _ints(3, (6, 5)), torch.randn(6, 5))),
    ("scatter_reduce_mean", lambda x, i, s: x.scatter_reduce(0, i, s, "mean", include_self=False),
     lambda: (torch.randn(3, 5), _ints(3, (6, 5)), torch.randn(6, 5))),
    ("scatter_reduce_amax", lambda x, i, s: x.scatter_reduce(1, i, s, "amax"), lambda: (torch.randn(3, 4), _ints(4, (3, 7)), torch.randn(3, 7))),
    ("scatter_reduce_prod_no_self", lambda x, i, s: x.scatter_reduce(0, i, s, "prod", include_self=False),
     lambda: (torch.randn(5), _ints(5, (8,)), torch.randn(8))),
    ("index_reduce_amin", lambda x, i, s: x.index_reduce(1, i, s, "amin", include_self=False),
     lambda: (torch.randn(3, 5), torch.tensor([4, 0, 4, 2]), torch.randn(3, 4))),
    ("index_reduce_mean", lambda x, i, s: x.index_reduce(0, i, s, "mean"), lambda: (torch.randn(4, 3), torch.tensor([3, 3, 0]),
                                                                                    torch.randn(3, 3))),
    ("index_put_accumulate", lambda x, i, v: x.index_put((i,), v, accumulate=True),
     lambda: (torch.randn(5, 3), torch.tensor([0, 4, 0, 2, 0]), torch.randn(5, 3))),
    ("index_put_mask", lambda x, m, v: x.index_put((m,), v), lambda: (torch.randn(5, 3), torch.tensor([True, False, True, True, False]),
                                                                      torch.randn(3))),
    ("masked_scatter", lambda x, m, s: x.masked_scatter(m, s), lambda: (torch.randn(3, 130), torch.rand(130) > 0.4,
                                                                       torch.randn(400))),
    ("grid_sample_bilinear_zeros", lambda x, g: F.grid_sample(x, g, align_corners=False),
     lambda: (torch.randn(1, 3, 5, 7), torch.rand(1, 4, 6, 2) * 2.4 - 1.2)),
    ("grid_sample_nearest_reflection", lambda x, g: F.grid_sample(x, g, "nearest", "reflection", align_corners=True),
     lambda: (torch.randn(3, 1, 4, 5), torch.rand(3, 2, 3, 2) * 3 - 1.5)),
    ("grid_sample_bicubic_border", lambda x, g: F.grid_sample(x, g, "bicubic", "border", align_corners=False),
     lambda: (torch.randn(1, 2, 5, 4), torch.rand(1, 3, 3, 2) * 2.4 - 1.2)),
    ("embedding_bag_weighted_sum", lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
     lambda: (torch.randn(10, 130), _ints(10, (7,)), torch.tensor([0, 0, 3, 6]), torch.randn(7))),
    ("embedding_bag_mean_padding", lambda w, i, o: F.embedding_bag(i, w, o, mode="mean", padding_idx=4),
     lambda: (torch.randn(10, 5), torch.tensor([4, 1, 4, 2, 3, 4]), torch.tensor([0, 2, 3]))),
    ("embedding_bag_max", lambda w, i, o: F.embedding_bag(i, w, o, mode="max"),
     lambda: (torch.randn(10, 130), _ints(10, (7,)), torch.tensor([0, 3, 3]))),
    ("embedding_max_norm", lambda w, i: F.embedding(i, w.clone(), max_norm=1.5) * 2,
     lambda: (torch.randn(12, 6), _ints(12, (2, 5)))),
    ("grid_sample_3d_trilinear_border", lambda x, g: F.grid_sample(x, g, "bilinear", "border", align_corners=True),
     lambda: (torch.randn(1, 3, 3, 4, 5), torch.rand(1, 2, 3, 2, 3) * 2.4 - 1.2)),
    ("cdist_direct_p1", lambda a, b: torch.cdist(a, b, p=1), lambda: (torch.randn(3, 5, 4), torch.randn(3, 7, 4))),
    ("cdist_broadcast_batches_mm", lambda a, b: torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
     lambda: (torch.randn(2, 1, 3, 4), torch.randn(5, 2, 4))),
    ("cdist_p_inf", lambda a, b: torch.cdist(a, b, p=float("inf")), lambda: (torch.randn(5, 3), torch.randn(7, 3))),
    ("cdist_p_1_5", lambda a, b: torch.cdist(a, b, p=1.5), lambda: (torch.randn(5, 3), torch.randn(7, 3))),
    ("cdist_matmul", lambda a, b: torch.cdist(a, b), lambda: (torch.randn(130, 3), torch.randn(7, 3))),
    ("pdist", lambda a: torch.pdist(a), lambda: (torch.randn(7, 5),)),
    ("pdist_p0", lambda a: torch.pdist(a.round(), p=0), lambda: (torch.randn(6, 3),)),
]  # fmt: skip


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "fn", "make"), CASES, ids=[case[0] for case in CASES])
def test_indexing(name, fn, make):
    torch.manual_seed(0)
    _compiled_matches_eager(fn, *make())


@pytest.mark.usefixtures("fresh_compiler")
def test_embedding_backward_accumulates_duplicates_and_skips_padding():
    """embedding_dense_backward: every duplicate token's gradient row is added (an accumulating scatter)."""
    torch.manual_seed(1)
    tokens = torch.tensor([[1, 4, 1, 0, 1], [4, 4, 2, 0, 3]])
    _compiled_matches_eager(lambda w, i: F.embedding(i, w, padding_idx=0) * 1.5, torch.randn(6, 130), tokens, grad_of=0)


@pytest.mark.usefixtures("fresh_compiler")
def test_bf16_embedding_backward_is_one_fill_and_one_scatter():
    """embedding_dense_backward stays whole (frontend KEPT_WHOLE): the bf16 table is zero-filled once and the rows
    scattered with fp32 adds, where the decomposition would fill, copy and cast an fp32 table. Duplicate tokens
    accumulate as in a float64 run, within eager bf16's own error."""
    torch.manual_seed(4)
    table = torch.randn(3000, 96, dtype=torch.bfloat16)
    tokens = torch.cat([torch.tensor([7, 7, 7, 2999, 0]), _ints(3000, (59,))]).view(4, 16)
    grad_out = torch.randn(4, 16, 96).to(torch.bfloat16)

    def gradient(function, weight):
        weight = weight.detach().clone().requires_grad_()
        function(tokens, weight).backward(grad_out.to(weight.dtype))
        return weight.grad

    ours = gradient(torch.compile(F.embedding, backend="neuron-mlir"), table)
    assert_close_to_golden(ours, gradient(F.embedding, table), gradient(F.embedding, table.double()), "table gradient")
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    [backward] = [profile for name, profile in neuron_mlir.profiles().items() if "backward" in name]
    table_bytes = table.numel() * table.element_size()
    assert backward.hbm_bytes < 1.5 * table_bytes, (backward.hbm_bytes, table_bytes)


@pytest.mark.usefixtures("fresh_compiler")
def test_embedding_of_a_table_past_two_to_the_24_elements():
    """A [65536, 257] table holds more than 2^24 elements, which fp32 offsets cannot address one by one: the
    gather and the accumulating scatter of the backward step by rows, so their offsets are the token ids."""
    torch.manual_seed(3)
    tokens = torch.cat([torch.tensor([65535, 0, 65535]), _ints(65536, (61,))]).view(4, 16)
    _compiled_matches_eager(lambda w, i: F.embedding(i, w) * 1.5, torch.randn(65536, 257), tokens, grad_of=0)


@pytest.mark.usefixtures("fresh_compiler")
def test_gather_backward_is_a_scatter_add():
    torch.manual_seed(2)
    _compiled_matches_eager(lambda x, i: torch.gather(x, 1, i).sin(), torch.randn(3, 5), _ints(5, (3, 8)), grad_of=0)


@pytest.mark.usefixtures("fresh_compiler")
def test_nonzero_breaks_the_graph_and_the_pieces_compile():
    """nonzero's output size depends on the data: Dynamo runs it between two compiled graphs (a graph break),
    and the results are exact."""

    def fn(x):
        found = torch.nonzero(x * 2 > 1)
        return found.float().sum(0) + x.sum(), found

    x = torch.randn(5, 7)
    got, expected = torch.compile(fn, backend="neuron-mlir")(x), fn(x)
    assert_close_to_torch(got[0], expected[0], "sum")
    assert torch.equal(got[1], expected[1])
    stats = neuron_mlir.stats()
    assert stats["graphs_compiled"] == 2
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
