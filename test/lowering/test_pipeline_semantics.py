"""Every pass of the default pipeline, checked by execution: IR before and after computes the same outputs.

The corpus is real imported graphs (forward and backward): the MLP of the end-to-end test and small modules
exercising each lowering family's branches (broadcasting, scalars, reductions over each axis, views that fold
and views that copy, matmul shapes that are not multiples of the tile sizes, batched matmul).
"""

import sys

import pytest
import torch
from support import REPO, capture_aten_graphs
from xdsl.context import Context

from neuron_mlir.frontend.fx_importer import import_fx_graph
from neuron_mlir.ir.semantics import check_semantics, random_inputs
from neuron_mlir.lowering.pipelines import DEFAULT_PIPELINE, pass_class
from neuron_mlir.lowering.verify_stage_contract import STAGES, check_stage_contract

sys.path.insert(0, str(REPO / "examples"))
from mlp import MLP


class Broadcasting(torch.nn.Module):
    def forward(self, a, b, c):
        return (a + b * 2.0 - c) * 0.5, torch.relu(a - 1.5), torch.where(a > b, a, c), a / (b.abs() + 1.0)


class Reductions(torch.nn.Module):
    def forward(self, x):
        return x.sum(0), x.sum(-1, keepdim=True), x.mean((0, 2)), x.amax(1), x.sum()


class Views(torch.nn.Module):
    def forward(self, x, y):
        t = x.permute(2, 0, 1)  # a strided view
        flat = t.reshape(t.shape[0], -1)  # merges non-contiguous dims: needs a copy
        return flat * 1.0, x.view(-1, x.shape[-1]) + y, y.expand(3, *y.shape).sum(0), x.transpose(0, 1)[1:, :2]


class Matmuls(torch.nn.Module):
    def forward(self, a, b, c, bias):
        return a @ b, torch.addmm(bias, a, b, beta=0.5, alpha=2.0), torch.bmm(c, c.transpose(1, 2))


class Softmaxes(torch.nn.Module):
    def forward(self, x, y):
        return torch.softmax(x, -1), torch.log_softmax(x, 1), torch.softmax(y, 0)


def _llama_mlp():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    return LlamaMLP(LlamaConfig(hidden_size=32, intermediate_size=64))


CASES = {
    "mlp": (lambda: MLP(), lambda: (torch.randn(37, 300),), True),
    "broadcasting": (Broadcasting, lambda: (torch.randn(5, 130), torch.randn(130), torch.randn(5, 1)), False),
    "reductions": (Reductions, lambda: (torch.randn(7, 130, 9),), False),
    "views": (Views, lambda: (torch.randn(4, 6, 5), torch.randn(5)), False),
    "matmuls": (
        Matmuls,
        lambda: (torch.randn(130, 200), torch.randn(200, 600), torch.randn(2, 9, 140), torch.randn(600)),
        False,
    ),
    "softmax": (Softmaxes, lambda: (torch.randn(3, 2100, 4) * 4, torch.randn(130, 5)), False),
    "softmax_training": (
        lambda: torch.nn.Sequential(torch.nn.Linear(20, 33), torch.nn.Softmax(-1)),
        lambda: (torch.randn(5, 20),),
        True,
    ),
    # a transformers module that lowers whole (SiLU-gated MLP), forward and backward
    "llama_mlp": (_llama_mlp, lambda: (torch.randn(2, 8, 32),), True),
    "linear_training": (
        lambda: torch.nn.Sequential(torch.nn.Linear(65, 129), torch.nn.ReLU(), torch.nn.Linear(129, 3)),
        lambda: (torch.randn(2, 65),),
        True,
    ),
}


def _graphs():
    for name, (make_module, make_inputs, backward) in CASES.items():
        torch.manual_seed(0)
        module = make_module()
        for index, graph in enumerate(capture_aten_graphs(module, *make_inputs(), backward=backward)):
            yield pytest.param(graph, id=f"{name}-{['forward', 'backward'][index]}")


@pytest.mark.parametrize("graph", list(_graphs()))
def test_each_pass_preserves_semantics(graph):
    module, _ = import_fx_graph(graph)
    module.verify()
    inputs = random_inputs(module, seed=1)
    ctx = Context()
    for stage, passes in DEFAULT_PIPELINE:
        for pass_name in passes:
            before = module.clone()
            pass_class(pass_name)().apply(ctx, module)
            module.verify()
            problems = check_semantics(before, module, inputs)
            assert not problems, f"{pass_name} changed the results:\n" + "\n".join(problems)
        if stage in STAGES:
            check_stage_contract(module, stage)
