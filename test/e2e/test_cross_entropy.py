"""Cross-entropy and nll_loss, forward and backward, against a float64 run: the fused log-softmax backward of
nll_loss_backward (one pass over the logits) and nll_loss_backward alone (label smoothing, nll_loss on given
log-probabilities), with ignored rows, class weights, every reduction, unbatched input, confident predictions and
real vocabularies, in fp32 and bf16."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from support import assert_close_to_golden

import neuron_mlir

pytestmark = pytest.mark.usefixtures("fresh_compiler")

BF16, F32 = torch.bfloat16, torch.float32


def _check_training(loss: Callable[..., torch.Tensor], logits: torch.Tensor, target: torch.Tensor) -> None:
    """Loss and logits gradient of the compiled `loss`, each as close to a float64 run as eager is, no node on
    the CPU."""
    runs = []
    for mode in ("golden", "eager", "compiled"):
        leaf = (logits.double() if mode == "golden" else logits).detach().clone().requires_grad_()
        fn = torch.compile(loss, backend="neuron-mlir") if mode == "compiled" else loss
        value = fn(leaf, target)
        seed = torch.Generator().manual_seed(5)
        gradient = torch.randn(value.shape, generator=seed).to(value.dtype)
        value.backward(gradient if value.dim() else None)
        runs.append((value.detach(), leaf.grad))
    (golden, golden_grad), (eager, eager_grad), (ours, our_grad) = runs
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    assert_close_to_golden(ours, eager, golden, "loss")
    assert_close_to_golden(our_grad, eager_grad, golden_grad, "logits gradient")


def _targets(rows: int, classes: int, ignored: tuple[int, ...] = (), ignore_index: int = -100) -> torch.Tensor:
    target = torch.randint(0, classes, (rows,))
    for row in ignored:
        target[row] = ignore_index
    return target


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_reductions(dtype, reduction):
    torch.manual_seed(1)
    logits = (torch.randn(130, 3000) * 3).to(dtype)
    target = _targets(130, 3000, ignored=(0, 77, 129))
    _check_training(lambda x, t: F.cross_entropy(x, t, reduction=reduction), logits, target)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_cross_entropy_real_vocabulary(dtype):
    """GPT-2's vocabulary: rows of 50257 classes span many column chunks; one row is ignored."""
    torch.manual_seed(2)
    logits = (torch.randn(130, 50257) * 2).to(dtype)
    _check_training(lambda x, t: F.cross_entropy(x, t), logits, _targets(130, 50257, ignored=(64,)))


def test_cross_entropy_class_weights_and_ignore_index():
    torch.manual_seed(3)
    weight = torch.rand(1000) + 0.5
    logits = torch.randn(64, 1000) * 2
    target = _targets(64, 1000, ignored=(5, 6), ignore_index=7)
    loss = lambda x, t: F.cross_entropy(x, t, weight=weight.to(x.dtype), ignore_index=7)  # noqa: E731
    _check_training(loss, logits, target)


def test_cross_entropy_confident_predictions():
    """Targets holding almost all the probability: their gradient c * (1 - p) cancels, and must not inherit the
    rounding of the dense c * p."""
    torch.manual_seed(4)
    target = _targets(96, 512)
    logits = torch.randn(96, 512)
    logits[torch.arange(96), target] += 12.0
    _check_training(lambda x, t: F.cross_entropy(x, t), logits.to(BF16), target)


def test_cross_entropy_unbatched():
    torch.manual_seed(5)
    _check_training(lambda x, t: F.cross_entropy(x, t), torch.randn(777), torch.tensor(300))


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_cross_entropy_label_smoothing(dtype):
    """The smoothing term joins the one-hot gradient before the log-softmax backward: nll_loss_backward is lowered
    on its own (a zero fill and a scatter)."""
    torch.manual_seed(6)
    logits = (torch.randn(70, 2000) * 2).to(dtype)
    target = _targets(70, 2000, ignored=(3,))
    _check_training(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), logits, target)


def test_nll_loss_of_log_probabilities():
    """nll_loss on log-probabilities computed elsewhere: its backward is a one-hot gradient on its own."""
    torch.manual_seed(7)
    logits = torch.randn(40, 300)
    target = _targets(40, 300, ignored=(1,))
    _check_training(lambda x, t: F.nll_loss(torch.sigmoid(x).log(), t, reduction="sum"), logits, target)


def test_cross_entropy_backward_past_131072_classes():
    """130 rows of 140000 classes: 128 rows of a tile would put the target elements' offsets past 2^24, so the
    gather and scatter of the backward take 65 rows to a tile. The backward graph runs alone, on the forward's
    real log-probabilities (the forward's own gather of the target's log-probability stops at that limit)."""
    from support import trace_aten_graphs

    from neuron_mlir.frontend.backend import CompileOptions
    from neuron_mlir.frontend.compile_graph import compile_graph

    torch.manual_seed(8)
    classes = 140000
    logits = torch.randn(130, classes).to(BF16).requires_grad_()
    target = _targets(130, classes, ignored=(100,))
    target[0] = classes - 1
    [_, (backward, example)] = trace_aten_graphs(lambda x, t: F.cross_entropy(x, t), logits, target, backward=True)
    # the backend's partition reads a saved value and its alias as one input (frontend.backend), as here
    placeholders = {node.name: node for node in backward.graph.nodes if node.op == "placeholder"}
    if "alias" in placeholders:
        placeholders["alias"].replace_all_uses_with(placeholders["_log_softmax"])
        backward.graph.erase_node(placeholders.pop("alias"))
        backward.recompile()
        example = [value for index, value in enumerate(example) if index != 2]
    assert list(placeholders) == ["primals_2", "_log_softmax", "_to_copy", "tangents_1"], list(placeholders)
    log_probabilities = torch.log_softmax(logits.detach(), -1)
    counted = torch.tensor(float((target != -100).sum()), dtype=BF16)
    inputs = [target, log_probabilities, counted, torch.tensor(1.0, dtype=BF16)]
    [ours, *_] = compile_graph(backward, example, CompileOptions(strict=True, cache=False), "backward")(list(inputs))
    [eager, *_] = backward(*inputs)
    kept = (target != -100).double()
    onehot = F.one_hot(target.clamp(min=0), classes).double()
    golden = -(kept / float(counted))[:, None] * (onehot - log_probabilities.double().exp())
    assert_close_to_golden(ours, eager, golden, "logits gradient")
