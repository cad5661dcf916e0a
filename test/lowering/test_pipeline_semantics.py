"""Every pass of the default pipeline, checked by execution: IR before and after computes the same outputs.

The corpus is real imported graphs (forward and backward): the MLP of the end-to-end test and small modules
exercising each lowering family's branches (broadcasting, scalars, reductions over each axis, views that fold
and views that copy, matmul shapes that are not multiples of the tile sizes, batched matmul, convolution and
pooling forward and backward, data movement, gathers and scatters).
"""

import sys
from collections.abc import Callable

import pytest
import torch
from support import REPO, capture_aten_graphs
from xdsl.context import Context

import neuron_mlir.backend_trn  # noqa: F401  (the neuron level's semantics: translate, then simulate)
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


class SmallCNN(torch.nn.Module):
    """Convolution (padded, strided, grouped), pooling (max with indices, average, adaptive) and a linear head."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.grouped = torch.nn.Conv2d(6, 6, 3, padding=1, groups=3, bias=False)
        self.head = torch.nn.Linear(6 * 2 * 2, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2, 2, ceil_mode=True)
        y = torch.nn.functional.avg_pool2d(self.grouped(y), 3, 1, 1, count_include_pad=False)
        return self.head(torch.nn.functional.adaptive_avg_pool2d(y, 2).flatten(1))


class Movement(torch.nn.Module):
    def forward(self, x, y):
        padded = torch.nn.functional.pad(x, (1, 2, -1, 1), value=0.5)
        reflected = torch.nn.functional.pad(x.unsqueeze(0), (2, 1), mode="reflect")
        parts = torch.split(torch.cat([x, y.flip(1)], 1), [2, 5], dim=1)
        return padded, reflected, parts[1] * 2, y.repeat(2, 1, 2), torch.diagonal(x, 1) + 1


class Gathers(torch.nn.Module):
    """Indices derived in the graph (arange), so that random inputs stay in range."""

    def forward(self, table, x):
        rows = torch.arange(0, 9, 2)
        taken = torch.nn.functional.embedding(rows.flip(0), table)
        picked = torch.index_select(x, 1, torch.arange(3, 0, -1)) + x[torch.arange(-2, 0)].sum()
        spread = torch.zeros(5, 4).scatter_add(0, rows.remainder(5).unsqueeze(1).expand(5, 4), taken[:, :4])
        return taken * 2, picked, torch.gather(x, 1, torch.arange(4).unsqueeze(0).expand(3, 4).flip(1)), spread


class Elementwise(torch.nn.Module):
    """Compositions of engine functions (tan, atan2, rounding), the GpSimd division family and exact integers."""

    def forward(self, x, y):
        i = (x * 40).to(torch.int32)
        return (
            torch.tan(x), torch.atan2(x, y), torch.round(x * 3), torch.floor(x), torch.remainder(x, y),
            torch.div(x, y, rounding_mode="floor"), torch.fmax(x, y), torch.erfc(x), i * 3 + i // 7, (i % 5) == 0,
        )  # fmt: skip


class Statistics(torch.nn.Module):
    """Arg-reductions, variances, any, and the scan and sort families."""

    def forward(self, x):
        return (
            x.argmax(1), x.max(0), torch.var_mean(x, 1), (x > 1).any(0), torch.cumsum(x, 0), torch.sort(x, 1),
            torch.topk(x, 3, 0),
        )  # fmt: skip


def _normalization():
    return torch.nn.Sequential(
        torch.nn.Linear(12, 16), torch.nn.LayerNorm(16), torch.nn.Unflatten(1, (4, 4)), torch.nn.BatchNorm1d(4),
        torch.nn.GroupNorm(2, 4),
    )  # fmt: skip


def _llama_mlp():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    return LlamaMLP(LlamaConfig(hidden_size=32, intermediate_size=64))


CASES: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], tuple[torch.Tensor, ...]], bool]] = {
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
    "small_cnn_training": (SmallCNN, lambda: (torch.randn(3, 3, 9, 9),), True),
    "movement": (Movement, lambda: (torch.randn(3, 4), torch.randn(3, 3)), False),
    "gathers": (Gathers, lambda: (torch.randn(10, 6), torch.randn(3, 5)), False),
    # a transformers module that lowers whole (SiLU-gated MLP), forward and backward
    "llama_mlp": (_llama_mlp, lambda: (torch.randn(2, 8, 32),), True),
    "elementwise": (Elementwise, lambda: (torch.randn(5, 130), torch.randn(5, 130)), False),
    "statistics": (Statistics, lambda: (torch.randn(140, 9),), False),
    "normalization_training": (_normalization, lambda: (torch.randn(6, 12),), True),
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


def _window_indices(module, inputs) -> None:
    """Replace random max-pool indices (arguments of a backward graph) by ones a forward computes.

    The backward's contract, as in PyTorch's CUDA kernel, is that each index lies in its own output position's
    window (pooling_bands.py gathers per window); random small integers do not."""
    function = next(op for op in module.walk() if op.name == "func.func")
    arguments = list(function.body.block.args)
    for op in module.walk():
        if op.name != "torch.aten.max_pool2d_with_indices_backward":
            continue
        indices, source = op.operands[2], op.operands[1]
        if indices not in arguments:
            continue
        attrs = {name: [int(v) for v in attr.get_values()] for name, attr in op.properties.items()
                 if name in ("kernel_size", "stride", "padding", "dilation")}  # fmt: skip
        shape = source.type.get_shape()
        ceil_mode = op.properties.get("ceil_mode")
        generator = torch.Generator().manual_seed(2)
        _, valid = torch.ops.aten.max_pool2d_with_indices(
            torch.randn(shape, generator=generator), attrs["kernel_size"], attrs.get("stride", []),
            attrs.get("padding", [0]), attrs.get("dilation", [1]), bool(ceil_mode and ceil_mode.value.data),
        )  # fmt: skip
        position = arguments.index(indices)
        inputs[position] = valid.numpy().astype(inputs[position].dtype)


@pytest.mark.parametrize("graph", list(_graphs()))
def test_each_pass_preserves_semantics(graph):
    module, _ = import_fx_graph(graph)
    module.verify()
    inputs = random_inputs(module, seed=1)
    _window_indices(module, inputs)
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
