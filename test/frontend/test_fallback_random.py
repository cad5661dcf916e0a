"""`fallback_random`: a compiled graph's random ops drawn on the host by torch, so that compiled and eager runs
seeded alike draw the same numbers (frontend/fallback_random.py)."""

import copy
from typing import Any

import pytest
import torch
from support import assert_close_to_torch

import neuron_mlir
from neuron_mlir.frontend.backend import CompileOptions, decompositions
from neuron_mlir.frontend.fallback_random import without_random_decompositions

pytestmark = pytest.mark.usefixtures("fresh_compiler")

OPTIONS: dict[str, Any] = {"fallback_random": True}


def _calls(fn, *inputs, calls=2, seed=5, options=OPTIONS):
    """Eager's and the compiled function's results of `calls` consecutive calls, each run from `seed`."""
    compiled = torch.compile(fn, backend="neuron-mlir", options=options)
    torch.manual_seed(seed)
    eager = [fn(*inputs) for _ in range(calls)]
    torch.manual_seed(seed)
    actual = [compiled(*inputs) for _ in range(calls)]
    return eager, actual


def _leaves(results):
    return [value for result in results for value in (result if isinstance(result, tuple) else (result,))]


def _assert_equal(actual, eager):
    for index, (a, e) in enumerate(zip(_leaves(actual), _leaves(eager), strict=True)):
        assert a.dtype == e.dtype, index
        assert a.shape == e.shape, index
        assert torch.equal(a, e), f"result {index}: {(a.double() - e.double()).abs().max()}"


def _assert_calls_differ(results):
    first, second = results
    assert not any(torch.equal(a, b) for a, b in zip(_leaves([first]), _leaves([second]), strict=True))


def test_dropout_in_training_draws_eagers_mask():
    def dropout(x):
        return torch.nn.functional.dropout(x * 2, 0.3, training=True), torch.nn.functional.dropout(x, 0.5)

    eager, actual = _calls(dropout, torch.randn(40, 130))
    _assert_equal(actual, eager)
    _assert_calls_differ(actual)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert stats["host_random_draws"] == {"aten.bernoulli.p": 4}  # the CPU kernel's noise, as eager draws it
    assert stats["host_random_values"] == 4 * 40 * 130


# probabilities where the CPU kernel's x * (noise / (1 - p)) and native_dropout's x * mask * (1 / (1 - p)) round
# differently, and ones where they agree; 0 and 1 draw nothing
@pytest.mark.parametrize("p", [0.0, 0.1, 0.15, 0.45, 0.97, 1.0])
def test_dropout_output_and_gradient_are_eagers_bit_for_bit(p):
    x = torch.randn(64, 33, requires_grad=True)

    def dropout(x):
        return torch.nn.functional.dropout(x * 2, p, training=True) * 3 + torch.dropout(x, p, True)

    torch.manual_seed(0)
    expected = dropout(x)
    expected.sum().backward()
    expected_grad, x.grad = x.grad, None
    compiled = torch.compile(dropout, backend="neuron-mlir", options=OPTIONS)
    torch.manual_seed(0)
    actual = compiled(x)
    actual.sum().backward()
    _assert_equal([actual.detach(), x.grad], [expected.detach(), expected_grad])
    assert neuron_mlir.stats()["host_random_draws"] == ({"aten.bernoulli.p": 2} if 0 < p < 1 else {})


def test_native_dropout_called_itself_computes_as_its_kernel():
    def dropout(x):
        output, mask = torch.native_dropout(x, 0.45, True)
        return output, mask

    eager, actual = _calls(dropout, torch.randn(40, 130))
    _assert_equal(actual, eager)
    assert neuron_mlir.stats()["host_random_draws"] == {"aten.native_dropout.default": 2}


def test_rand_and_randn_in_a_compiled_function():
    def noisy(x):
        return x + torch.rand(4, 33) * torch.randn_like(x), torch.randn(7, dtype=torch.bfloat16), torch.rand_like(x.t())

    eager, actual = _calls(noisy, torch.randn(4, 33))
    _assert_equal(actual, eager)
    _assert_calls_differ(actual)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_gumbel_softmax_samples_eagers_categories():
    def gumbel(logits):
        return torch.nn.functional.gumbel_softmax(logits.sin(), tau=0.5, hard=True), torch.nn.functional.gumbel_softmax(
            logits, tau=2.0
        )

    eager, actual = _calls(gumbel, torch.randn(16, 40))
    # the sampled one-hot rows are eager's exactly; the soft samples are computed from eager's noise by the
    # compiler's log and softmax, within their dtype's tolerance
    for (hard, soft), (eager_hard, eager_soft) in zip(actual, eager, strict=True):
        assert torch.equal(hard, eager_hard)
        assert_close_to_torch(soft, eager_soft, "soft sample")
    assert not torch.equal(actual[0][0], actual[1][0])
    assert neuron_mlir.stats()["host_random_draws"] == {"aten.exponential.default": 4}


def test_bernoulli_of_input_probabilities_and_of_a_scalar():
    def coins(x, p):
        return x * torch.bernoulli(p), torch.bernoulli(x, 0.25), x.clone().bernoulli_(p)

    eager, actual = _calls(coins, torch.randn(32, 50), torch.rand(32, 50))
    _assert_equal(actual, eager)
    _assert_calls_differ(actual)


def test_probabilities_computed_from_constants_are_computed_on_the_host():
    # UniSpeechForPreTraining's replacement mask: bernoulli of a `full` of the probability, transposed
    def replaced(x):
        probabilities = torch.full((x.size(0), x.size(1)), 0.3).transpose(0, 1)
        mask = torch.bernoulli(probabilities).bool().transpose(0, 1).unsqueeze(-1)
        return x.masked_fill(mask, 0.0)

    eager, actual = _calls(replaced, torch.randn(2, 8, 4))
    _assert_equal(actual, eager)
    assert neuron_mlir.stats()["host_random_draws"] == {"aten.bernoulli.default": 2}


@pytest.mark.parametrize("training", [False, True])
def test_a_draw_nothing_reads_is_still_made(training):
    # eager draws the mask and advances the generator; the trace alone would drop it (UniSpeech's unreturned logits)
    def noisy(x):
        mask = torch.bernoulli(torch.full((2, 3), 0.5))
        unused = x * mask  # noqa: F841
        torch.nn.functional.dropout(x, 0.5, training=True)
        return x + torch.rand(2, 3)

    eager, actual = _calls(noisy, torch.randn(2, 3, requires_grad=training))
    _assert_equal([a.detach() for a in actual], [e.detach() for e in eager])
    assert neuron_mlir.stats()["host_random_draws"] == {
        "aten.bernoulli.default": 2,
        "aten.bernoulli.p": 2,
        "aten.rand.default": 2,
    }


def test_other_distributions_and_integers():
    def draws(x):
        return (
            torch.empty_like(x).uniform_(-2, 3),
            torch.empty_like(x).normal_(1, 2),
            torch.empty_like(x).exponential_(3.0),
            torch.randint(0, 10, (5, 6)),
            torch.randint_like(x, 3, 9),
        )

    eager, actual = _calls(draws, torch.zeros(20, 30))
    _assert_equal(actual, eager)
    _assert_calls_differ(actual)


def test_the_composite_distributions_and_draws_from_input_tensors():
    # the ops the compiler otherwise writes as inverse CDFs of its own draws (frontend/composite_decompositions.py)
    def draws(x, weights, mean):
        return (
            torch.empty_like(x).cauchy_(0.5, 2.0),
            torch.empty_like(x).log_normal_(0.0, 0.5),
            torch.empty_like(x).geometric_(0.3),
            torch.empty_like(x).random_(3, 17),
            torch.multinomial(weights, 4),
            torch.multinomial(weights, 7, replacement=True),
            torch.normal(mean, 2.0),
        )

    eager, actual = _calls(draws, torch.zeros(20, 30), torch.rand(6, 9), torch.randn(5, 4))
    _assert_equal(actual, eager)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0


def test_dropout_models_gradients_match_eagers():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.25), torch.nn.Linear(32, 8), torch.nn.Dropout(0.5)
    )
    twin = copy.deepcopy(model)
    compiled = torch.compile(twin, backend="neuron-mlir", options=OPTIONS)
    x = torch.randn(10, 16)
    for step in range(2):
        torch.manual_seed(11 + step)
        expected = model(x)
        expected.sum().backward()
        torch.manual_seed(11 + step)
        actual = compiled(x)
        actual.sum().backward()
        # the masks are eager's exactly: the same elements dropped; the values within fp32's tolerance
        assert torch.equal(actual == 0, expected == 0)
        assert_close_to_torch(actual, expected, f"step {step} output")
        for (name, parameter), compiled_parameter in zip(model.named_parameters(), twin.parameters(), strict=True):
            grad, expected_grad = compiled_parameter.grad, parameter.grad
            assert grad is not None, name
            assert expected_grad is not None, name
            assert torch.equal(grad == 0, expected_grad == 0), name
            assert_close_to_torch(grad, expected_grad, f"step {step} {name}.grad")
        model.zero_grad()
        twin.zero_grad()
    assert neuron_mlir.stats()["host_random_draws"] == {"aten.bernoulli.p": 4}


def test_a_graph_on_the_device_draws_from_the_device_generator():
    def noisy(x):
        return torch.nn.functional.dropout(x, 0.4, training=True), torch.rand(6, 7, device=x.device)

    x = torch.randn(20, 30)
    torch.manual_seed(3)
    expected = noisy(x)
    compiled = torch.compile(noisy, backend="neuron-mlir", options=OPTIONS)
    torch.manual_seed(3)  # seeds the device generator too
    cpu_before = torch.default_generator.get_state()
    actual = compiled(x.to("neuron"))
    assert all(value.device.type == "neuron" for value in actual)
    _assert_equal([tuple(value.cpu() for value in actual)], [expected])
    # the draws advanced the device generator alone, as the device's own draws do
    assert torch.equal(torch.default_generator.get_state(), cpu_before)


def test_symbolic_sizes_are_bound_at_the_call():
    def noisy(x):
        return torch.nn.functional.dropout(x, 0.5, training=True), torch.rand(x.shape[0], 3)

    compiled = torch.compile(noisy, backend="neuron-mlir", options=OPTIONS, dynamic=True)
    for rows in (5, 9):
        x = torch.randn(rows, 3)
        torch.manual_seed(1)
        expected = noisy(x)
        torch.manual_seed(1)
        _assert_equal([compiled(x)], [expected])


def test_a_draw_from_values_the_graph_computes_splits_the_graph_in_its_order():
    def coins(x, y):
        dropped = torch.nn.functional.dropout(x, 0.5, training=True)
        first = torch.bernoulli(x.sigmoid())  # probabilities computed on the core: a cut
        noise = torch.rand_like(y)  # independent of the cut, drawn after it as in eager
        second = torch.bernoulli(torch.sigmoid(first * y))
        return dropped, first, noise, second, torch.randn(3)

    eager, actual = _calls(coins, torch.randn(8, 16), torch.randn(8, 16))
    _assert_equal(actual, eager)
    _assert_calls_differ(actual)
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert stats["host_random_draws"] == {
        "aten.bernoulli.p": 2,
        "aten.bernoulli.default": 4,
        "aten.rand_like.default": 2,
        "aten.randn.default": 2,
    }
    assert stats["graphs_compiled"] == 3  # the regions before, between and after the two cuts


def test_a_split_graph_on_the_device_draws_from_the_device_generator():
    def coins(x):
        return torch.bernoulli(x.sigmoid()), torch.rand_like(x)

    x = torch.randn(8, 16)
    torch.manual_seed(4)
    expected = coins(x)
    compiled = torch.compile(coins, backend="neuron-mlir", options=OPTIONS)
    torch.manual_seed(4)
    actual = compiled(x.to("neuron"))
    assert all(value.device.type == "neuron" for value in actual)
    _assert_equal([tuple(value.cpu() for value in actual)], [expected])


def test_a_draw_of_a_size_no_input_gives_is_refused():
    # a size read from a tensor's value inside the graph: the host cannot know it before the program runs
    def noisy(x, n):
        return x + torch.rand(int(n.sum().item()), 3).sum()

    torch._dynamo.config.capture_scalar_outputs = True
    try:
        compiled = torch.compile(noisy, backend="neuron-mlir", options=OPTIONS)
        with pytest.raises(Exception, match=r"fallback_random: aten\.rand\.default at \S*test_fallback_random\.py:\d+"):
            compiled(torch.randn(2, 3), torch.tensor([2, 3]))
    finally:
        torch._dynamo.config.capture_scalar_outputs = False


def test_off_by_default_the_compiler_draws():
    def noisy(x):
        return x + torch.rand(4, 33)

    eager, actual = _calls(noisy, torch.zeros(4, 33), calls=1, options=None)
    assert not torch.equal(actual[0], eager[0])  # another generator: the same distribution, other numbers
    assert neuron_mlir.stats()["host_random_draws"] == {}


def test_option_and_environment_variable(monkeypatch):
    assert CompileOptions.from_user({}).fallback_random is False
    assert CompileOptions.from_user({"fallback_random": True}).fallback_random is True
    monkeypatch.setenv("NEURON_MLIR_FALLBACK_RANDOM", "1")
    assert CompileOptions.from_user({}).fallback_random is True
    assert CompileOptions.from_user({"fallback_random": False}).fallback_random is False


def test_random_decompositions_are_left_out():
    kept = without_random_decompositions(decompositions())
    assert torch.ops.aten.exponential.default in decompositions()
    assert torch.ops.aten.exponential.default not in kept
    assert torch.ops.aten.rand_like.default not in kept
    assert torch.ops.aten.bernoulli.default not in kept
    # composites that decompose into draws stay decomposed
    assert torch.ops.aten.scaled_dot_product_attention.default in kept


def test_the_cache_keeps_one_program_per_graph_whatever_the_option(tmp_path, monkeypatch):
    """A graph without draws compiles to the same program with the option or without (one cache entry); a graph
    with a draw lifted on the host is another graph, so the program compiled without the option is not taken."""
    monkeypatch.setenv("NEURON_MLIR_CACHE_DIR", str(tmp_path))

    def double(x):
        return x * 2

    def noisy(x):
        return x + torch.rand_like(x)

    x = torch.randn(3, 4)
    for fn in (double, noisy):
        torch.compile(fn, backend="neuron-mlir")(x)
    torch._dynamo.reset()
    neuron_mlir.reset()
    torch.compile(double, backend="neuron-mlir", options=OPTIONS)(x)
    assert neuron_mlir.stats()["cache_hits"] == 1
    torch._dynamo.reset()
    neuron_mlir.reset()
    torch.manual_seed(0)
    compiled = torch.compile(noisy, backend="neuron-mlir", options=OPTIONS)(x)
    assert neuron_mlir.stats()["cache_hits"] == 0
    assert neuron_mlir.stats()["cache_misses"] == 1
    torch.manual_seed(0)
    assert torch.equal(compiled, noisy(x))
