"""Graph partitioning: supported regions compiled, the rest in place on the CPU, same results."""

import torch
from support import assert_close_to_torch, capture_aten_graphs

from neuron_mlir.frontend.partition import CompiledRegion, partition


class Mixed(torch.nn.Module):
    def forward(self, x, y):
        a = torch.relu(x) + y
        b = torch.cumsum(a, 1)  # the op we pretend is unsupported
        c = b * 2.0 - y
        return c.sum(0), torch.cumsum(c, 0)


def test_regions_between_unsupported_nodes_compile_and_results_match():
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    (graph,) = capture_aten_graphs(Mixed(), x, y)
    compiled_regions = []

    def compile_region(region, name):
        compiled_regions.append(name)
        for placeholder in (n for n in region.graph.nodes if n.op == "placeholder"):
            assert "val" in placeholder.meta, "regions keep the fake-tensor metadata of their inputs"

        def run(args):
            result = region(*args)
            return list(result) if isinstance(result, tuple) else [result]

        return run

    def supported(node):
        return node.target is not torch.ops.aten.cumsum.default

    outer, regions = partition(graph, supported, compile_region)
    assert regions == len(compiled_regions) == 2
    assert sum(isinstance(m, CompiledRegion) for m in outer.children()) == 2
    left_in_place = [n.target for n in outer.graph.nodes if n.op == "call_function" and n.target is not getattr]
    assert torch.ops.aten.cumsum.default in left_in_place
    expected = Mixed()(x, y)
    actual = outer(x, y)
    assert_close_to_torch(list(actual), list(expected))
