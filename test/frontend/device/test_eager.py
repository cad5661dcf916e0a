"""Eager ops through the compiler: compiled once per signature, counted native or host, refusals warned once with
the user's line (an error in strict mode), and a small MLP trained on the device matching the CPU."""

import warnings
from typing import Any

import pytest
import torch
from support import assert_close_to_torch

import neuron_mlir

# torch.neuron, which the device registers when torch is imported (no static attribute of torch)
neuron = torch.get_device_module("neuron")


@pytest.fixture
def compiled(monkeypatch, fresh_eager):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    monkeypatch.delenv("NEURON_MLIR_STRICT", raising=False)
    return fresh_eager


def test_an_op_compiles_once_per_signature_and_runs_natively(compiled, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_DEFER", "0")  # each op its own program, its time on the stream at once
    x = torch.randn(64, 32).to("neuron")
    y = torch.randn(64, 32).to("neuron")
    stream = neuron.current_stream()
    before = stream.simulated_ns
    first = x * y
    assert compiled.EAGER_STATS.compiled_signatures == 1
    second = y * x  # same signature: no new program
    assert compiled.EAGER_STATS.compiled_signatures == 1
    assert compiled.EAGER_STATS.native_ops["aten.mul.Tensor"] == 2  # the functional op itself, no out= form
    assert stream.simulated_ns > before  # the simulated time of both runs is on the stream
    assert_close_to_torch(first.cpu(), x.cpu() * y.cpu())
    assert_close_to_torch(second.cpu(), x.cpu() * y.cpu())
    x * torch.randn(64, 1).to("neuron")  # a new shape is a new signature
    assert compiled.EAGER_STATS.compiled_signatures == 2
    assert any(name.startswith("graph") and "eager_mul" in name for name in neuron_mlir.profiles())


def test_keyword_arguments_keep_their_names_in_the_signature(compiled):
    # the dispatcher drops keywords at their defaults: right=True and out_int32=True would flatten alike
    x, boundaries = torch.tensor([0.3, 1.0]), torch.tensor([-1.0, 0.0, 1.0])
    cases: list[dict[str, Any]] = [{"right": True}, {"out_int32": True}]
    for keywords in cases:
        result = torch.bucketize(x.to("neuron"), boundaries.to("neuron"), **keywords)
        assert_close_to_torch(result.cpu(), torch.bucketize(x, boundaries, **keywords), str(keywords))
    assert compiled.EAGER_STATS.compiled_signatures == 2


def test_float_arguments_are_told_apart_by_their_bits_in_the_signature(compiled, monkeypatch):
    # 0.0 == -0.0 and nan != nan: keyed by value, fill_(-0.0) ran fill_(0.0)'s program and each nan compiled anew
    monkeypatch.setenv("NEURON_MLIR_DEFER", "0")
    x = torch.ones(4, device="neuron")
    before = compiled.EAGER_STATS.compiled_signatures
    x.fill_(0.0)
    x.fill_(-0.0)
    assert torch.signbit(x.cpu()).all()
    x.fill_(0.0)
    assert not torch.signbit(x.cpu()).any()
    x.fill_(float("nan"))
    x.fill_(float("nan"))
    assert torch.isnan(x.cpu()).all()
    assert compiled.EAGER_STATS.compiled_signatures == before + 3  # 0.0, -0.0 and nan


def test_a_refused_op_runs_on_the_host_with_one_warning_naming_it(compiled):
    x = torch.randn(8, 8, dtype=torch.float64).to("neuron")
    with pytest.warns(UserWarning, match=r"aten\.mul\.out: float64 is not supported .*first seen at .*test_eager\.py:"):
        result = x * 2
    assert_close_to_torch(result.cpu(), x.cpu() * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x * 2  # warned once per op
    assert compiled.EAGER_STATS.host_ops["aten.mul.out"] == 2
    assert neuron.eager_stats()["refused_signatures"] == 1, neuron.eager_stats()


def test_strict_mode_makes_a_refusal_an_error(compiled, monkeypatch):
    from neuron_mlir.frontend.device.eager import DeviceFallbackError

    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")
    x = torch.ones(4, dtype=torch.float64).to("neuron")
    with pytest.raises(DeviceFallbackError, match=r"float64 is not supported.*at .*test_eager\.py:"):
        x + 1


def test_a_data_dependent_shape_without_a_device_form_is_a_refusal_saying_so(compiled):
    # a mask beside another index tensor broadcasts its true positions against that index: no padded form, so the
    # trace meets a size it cannot know and says so (the meta kernel's refusal is not the user's error)
    x, rows, mask = torch.arange(24.0).reshape(2, 3, 4), torch.tensor([1, 0]), torch.tensor([True, False, True])
    with pytest.warns(UserWarning, match=r"aten\.index\.Tensor: its output's shape depends on its values"):
        result = x.to("neuron")[rows.to("neuron"), mask.to("neuron")]
    assert torch.equal(result.cpu(), x[rows, mask])
    assert compiled.EAGER_STATS.host_ops["aten.index.Tensor"] == 1


def test_repeat_interleave_by_tensor_repeats_counts_first_on_the_device(compiled):
    # the result's length is the sum of the repeats, no bound from the operands' sizes: the device computes the
    # sum, the host reads it, and a program of that size's bucket computes the result
    x, repeats = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1, 0, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = torch.repeat_interleave(x.to("neuron"), repeats.to("neuron"))
    assert torch.equal(result.cpu(), torch.repeat_interleave(x, repeats))
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops
    assert compiled.EAGER_STATS.native_ops["aten.repeat_interleave.Tensor"] == 1


def test_fractional_max_pooling_runs_natively_with_the_cpus_windows(compiled):
    # the windows follow the samples exactly as ATen places them; without samples they are drawn on the device
    torch.manual_seed(0)
    x, samples = torch.randn(1, 2, 9, 9), torch.rand(1, 2, 2)
    expected = torch.nn.functional.fractional_max_pool2d(x, 3, output_size=4, _random_samples=samples)
    result = torch.nn.functional.fractional_max_pool2d(
        x.to("neuron"), 3, output_size=4, _random_samples=samples.to("neuron")
    )
    assert torch.equal(result.cpu(), expected)
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_rrelu_draws_its_slopes_on_the_device(compiled):
    x = torch.linspace(-3, 3, 64)
    lower, upper = 0.1, 0.3
    torch.manual_seed(0)
    first = torch.nn.functional.rrelu(x.to("neuron"), lower, upper, training=True).cpu()
    torch.manual_seed(0)
    again = torch.nn.functional.rrelu(x.to("neuron"), lower, upper, training=True).cpu()
    assert torch.equal(first, again)  # reproducible under torch.manual_seed
    assert torch.equal(first[x > 0], x[x > 0])
    slopes = first[x < 0] / x[x < 0]
    assert bool(((slopes >= lower) & (slopes <= upper)).all()), slopes
    assert len(slopes.unique()) > 1  # drawn per element
    evaluated = torch.nn.functional.rrelu(x.to("neuron"), lower, upper, training=False)
    assert_close_to_torch(evaluated.cpu(), torch.nn.functional.rrelu(x, lower, upper, training=False))
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_multinomial_draws_on_the_device_in_proportion(compiled):
    weights = torch.tensor([[0.1, 0.0, 0.5, 0.4], [1.0, 2.0, 3.0, 4.0]])
    torch.manual_seed(0)
    unique_draws = torch.multinomial(weights.to("neuron"), 3).cpu()
    assert all(len(row.unique()) == 3 for row in unique_draws)
    assert not bool((unique_draws[0] == 1).any())  # zero weight: drawn last, never among the first three
    torch.manual_seed(0)
    assert torch.equal(torch.multinomial(weights.to("neuron"), 3).cpu(), unique_draws)
    draws = torch.multinomial(weights.to("neuron"), 4000, replacement=True).cpu()
    for row, counts in zip(weights, draws, strict=True):
        frequencies = torch.bincount(counts, minlength=4) / 4000
        assert torch.allclose(frequencies, row / row.sum(), atol=0.03), frequencies  # about 4 standard errors
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_an_op_returning_a_list_of_tensors_runs_natively(compiled):
    # histogramdd's bin edges: `_histogramdd_bin_edges` returns Tensor[], one program for the whole list
    x = torch.tensor([[0.5, -1.0], [2.0, 3.0], [1.0, 0.25], [-0.5, 1.5]])
    expected = torch.histogramdd(x, bins=(2, 3))
    result = torch.histogramdd(x.to("neuron"), bins=(2, 3))
    assert torch.equal(result.hist.cpu(), expected.hist)
    assert len(result.bin_edges) == 2
    for edges, expected_edges in zip(result.bin_edges, expected.bin_edges, strict=True):
        assert_close_to_torch(edges.cpu(), expected_edges)
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_matrix_rank_runs_natively_in_the_matrixs_dtype(compiled):
    # its composite makes float64 tolerance tensors op by op; the whole op compiles in float32
    torch.manual_seed(0)
    A = torch.tensor([[1.0, 2.0], [2.0, 4.0]])  # rank 1
    assert torch.equal(torch.linalg.matrix_rank(A.to("neuron")).cpu(), torch.linalg.matrix_rank(A))
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def test_mlp_trains_on_the_device_like_on_the_cpu(compiled):
    torch.manual_seed(0)
    reference = _mlp()
    model = _mlp().to("neuron")
    model.load_state_dict(reference.state_dict())
    inputs, targets = torch.randn(16, 32), torch.randn(16, 8)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05, foreach=False) for m in (reference, model)]
    for _ in range(2):
        losses = []
        for module, optimizer, device in zip((reference, model), optimizers, ("cpu", "neuron"), strict=True):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(module(inputs.to(device)), targets.to(device))
            loss.backward()
            optimizer.step()
            losses.append(loss)
        assert_close_to_torch(losses[1].cpu(), losses[0])
    for (name, expected), actual in zip(reference.named_parameters(), model.parameters(), strict=True):
        assert actual.device.type == "neuron"
        assert_close_to_torch(actual.grad.cpu(), expected.grad, f"{name}.grad")
        assert_close_to_torch(actual.detach().cpu(), expected.detach(), name)
    stats = neuron.eager_stats()
    assert stats["native_calls"] > stats["host_calls"], stats


@pytest.mark.parametrize(
    ("optimizer", "options"),
    [(torch.optim.Adam, {"lr": 0.01}), (torch.optim.AdamW, {"lr": 0.01, "fused": True})],
    ids=["adam_foreach", "adamw_fused"],
)
def test_optimizers_default_and_fused_kernels_match_the_cpu(compiled, optimizer, options):
    """torch.optim picks its foreach kernels for the device by default; fused AdamW's kernel writes its arguments
    and returns nothing."""
    torch.manual_seed(1)
    reference = torch.nn.Linear(8, 4)
    model = torch.nn.Linear(8, 4).to("neuron")
    model.load_state_dict(reference.state_dict())
    inputs = torch.randn(5, 8)
    pairs = [(reference, optimizer(reference.parameters(), **options), "cpu")]
    pairs.append((model, optimizer(model.parameters(), **options), "neuron"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fused kernel runs on the host
        for _ in range(2):
            for module, step, device in pairs:
                step.zero_grad()
                module(inputs.to(device)).square().mean().backward()
                step.step()
    assert_close_to_torch(model.weight.detach().cpu(), reference.weight.detach())
    assert_close_to_torch(model.bias.detach().cpu(), reference.bias.detach())


def test_a_foreach_call_is_one_program_over_all_its_tensors(compiled):
    shapes = [(8, 16), (16,), (3, 5)]
    generator = torch.Generator().manual_seed(0)
    host = [[torch.randn(s, generator=generator) for s in shapes] for _ in range(3)]
    host[2] = [z.abs() + 1 for z in host[2]]
    xs, ys, zs = ([t.to("neuron") for t in tensors] for tensors in host)
    torch._foreach_add_(xs, ys, alpha=0.5)
    torch._foreach_addcdiv_(xs, ys, zs, [0.1, 0.2, 0.3])  # the scalars are `addcdiv_`'s keyword `value`
    torch._foreach_mul_(ys, 2.0)
    expected = [x + 0.5 * y for x, y in zip(host[0], host[1], strict=True)]
    torch._foreach_addcdiv_(expected, host[1], host[2], [0.1, 0.2, 0.3])
    for actual, want, doubled, base in zip(xs, expected, ys, host[1], strict=True):
        assert_close_to_torch(actual.cpu(), want)
        assert_close_to_torch(doubled.cpu(), base * 2.0)
    native = compiled.EAGER_STATS.native_ops
    assert native["aten._foreach_add_.List"] == 1, native
    assert native["aten._foreach_mul_.Scalar"] == 1, native
    assert not any(name.startswith(("aten.add", "aten.mul")) for name in native), native  # no per-tensor op


def test_a_refused_foreach_call_runs_its_per_tensor_ops(compiled):
    # float64 has no NeuronCore storage: the call is refused, and each tensor's op goes its own way (the host)
    host = [torch.randn(4, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)]
    xs = [t.to("neuron") for t in host]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch._foreach_mul_(xs, 3.0)
    for actual, want in zip(xs, host, strict=True):
        assert_close_to_torch(actual.cpu(), want * 3.0)
    assert compiled.EAGER_STATS.host_ops["aten.mul.out"] == 2, compiled.EAGER_STATS.host_ops
    assert "aten._foreach_mul_.Scalar" not in compiled.EAGER_STATS.host_ops


def test_a_structured_op_is_one_program_of_its_functional_form(compiled):
    """Not `empty` then the out= form: the functional op itself, with the CPU's result strides and errors."""
    x = torch.randn(6, 4).to("neuron")
    w = torch.randn(5, 4).to("neuron")
    product = x @ w.t()  # a transposed operand, a contiguous result
    assert_close_to_torch(product.cpu(), x.cpu() @ w.cpu().t())
    assert compiled.EAGER_STATS.native_ops["aten.mm.default"] == 1, compiled.EAGER_STATS.native_ops
    shifted = x.t() + 1  # an elementwise op of a transpose keeps its strides, as on the CPU
    assert shifted.stride() == (x.cpu().t() + 1).stride()
    assert_close_to_torch(shifted.cpu(), x.cpu().t() + 1)
    with pytest.raises(RuntimeError, match=r"size of tensor a \(6\) must match the size of tensor b \(5\)"):
        x + w


def test_a_layer_norm_training_step_runs_its_backward_on_the_device(compiled):
    """The first layer's input needs no gradient, so autograd asks native_layer_norm_backward for the weight's and
    bias's gradients only (output mask [False, True, True]): a program of the two present results, not the host."""
    torch.manual_seed(0)

    def model() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))

    reference, device_model = model(), model().to("neuron")
    device_model.load_state_dict(reference.state_dict())
    inputs = torch.randn(8, 16)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="neuron-mlir")
        for module, device in ((reference, "cpu"), (device_model, "neuron")):
            module(inputs.to(device)).square().mean().backward()
    assert compiled.EAGER_STATS.native_ops["aten.native_layer_norm_backward.default"] == 1
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops
    for (name, expected), actual in zip(reference.named_parameters(), device_model.parameters(), strict=True):
        grad = actual.grad
        assert grad is not None, name
        assert grad.device.type == "neuron", name
        assert_close_to_torch(grad.cpu(), expected.grad, f"{name}.grad")


@pytest.mark.parametrize(
    "mask", [[True, False, False], [False, True, False], [True, False, True]], ids=["input", "weight", "input_bias"]
)
def test_a_backward_op_returns_none_where_its_output_mask_says_so(compiled, mask):
    """The results the mask asks for equal the CPU's; the others are None, as the op's meta kernel says (the CPU
    kernel may compute the weight's gradient with the input's unasked, which no caller reads)."""
    x, grad = torch.randn(2, 3, 5, 5), torch.randn(2, 4, 3, 3)
    weight = torch.randn(4, 3, 3, 3)
    arguments = ([4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)
    expected = torch.ops.aten.convolution_backward(grad, x, weight, *arguments)
    actual = torch.ops.aten.convolution_backward(grad.to("neuron"), x.to("neuron"), weight.to("neuron"), *arguments)
    assert [a is None for a in actual] == [not m for m in mask]
    for index, wanted in enumerate(mask):
        if wanted:
            assert_close_to_torch(actual[index].cpu(), expected[index], f"{mask}[{index}]")
    assert compiled.EAGER_STATS.native_ops["aten.convolution_backward.default"] == 1
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_results_are_written_straight_into_device_memory(compiled, arrays_copied_in, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_DEFER", "0")  # each op its own program (test_region.py covers regions)
    a, b = torch.randn(16, 8), torch.randn(16, 8)
    x, y = a.to("neuron"), b.to("neuron")
    copied = arrays_copied_in

    def ops():
        written = x.clone()
        written.mul_(y)  # in place: the simulator writes `written`'s own bytes
        rows = x.clone()
        rows[0].add_(rows[1])  # a view sharing its storage with an operand: written after the run
        values, indices = x.max(dim=1)  # two fresh results
        return written, rows, values, indices, x.to(torch.bfloat16)

    first = ops()
    assert copied  # the first run of each program learns its outputs' layouts
    copied.clear()
    second = ops()
    assert not copied  # fresh results go straight into new device memory
    expected_rows = a.clone()
    expected_rows[0] += expected_rows[1]
    maxima = a.max(dim=1)
    expected = (a * b, expected_rows, maxima.values, maxima.indices, a.to(torch.bfloat16))
    for run in (first, second):
        for name, actual, wanted in zip(("mul_", "rows", "max", "argmax", "cast"), run, expected, strict=True):
            assert actual.device.type == "neuron", name
            assert actual.dtype == wanted.dtype, name
            assert_close_to_torch(actual.cpu(), wanted, name)


# In-place draws of each distribution with its parameters, and a check of its support and moments over 4096 draws
# (bounds of about five standard errors: a wrong distribution fails, a right one does not by chance).
DISTRIBUTIONS = {
    "uniform_": (lambda t: t.uniform_(-2.0, 3.0), lambda v: bool(((v >= -2) & (v <= 3)).all()), 0.5, 2.5 / 3**0.5),
    "normal_": (lambda t: t.normal_(1.0, 3.0), lambda v: True, 1.0, 3.0),
    "exponential_": (lambda t: t.exponential_(2.0), lambda v: bool((v >= 0).all()), 0.5, 0.5),
    "geometric_": (lambda t: t.geometric_(0.5), lambda v: bool(((v >= 1) & (v == v.floor())).all()), 2.0, 2**0.5),
    "log_normal_": (lambda t: t.log_normal_(0.0, 0.25), lambda v: bool((v > 0).all()), 1.0315, 0.2611),
    "bernoulli_": (
        lambda t: t.bernoulli_(torch.full_like(t, 0.3)),
        lambda v: bool(((v == 0) | (v == 1)).all()),
        0.3,
        0.21**0.5,
    ),
}


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_random_draws_run_natively_from_the_device_generator(compiled, name):
    draw, in_support, mean, std = DISTRIBUTIONS[name]
    torch.manual_seed(5)
    values = draw(torch.empty(4096, device="neuron")).cpu().double()
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops
    assert in_support(values)
    assert abs(values.mean().item() - mean) < 5 * std / 64
    assert abs(values.std().item() - std) < 0.1 * std
    torch.manual_seed(5)
    assert torch.equal(draw(torch.empty(4096, device="neuron")).cpu().double(), values)


def test_cauchy_and_normal_of_tensors_draw_natively(compiled):
    torch.manual_seed(2)
    draws = torch.empty(4096, device="neuron").cauchy_(1.0, 2.0).cpu()
    assert abs(draws.median().item() - 1.0) < 0.2  # the median, and half the interquartile range, are the params
    assert abs((draws.quantile(0.75) - draws.quantile(0.25)).item() / 2 - 2.0) < 0.3
    mean = torch.linspace(-3, 3, 4096)
    exact = torch.normal(mean.to("neuron"), torch.zeros(4096, device="neuron"))
    assert torch.equal(exact.cpu(), mean)  # no spread: the mean itself
    spread = torch.normal(mean.to("neuron"), 2.0).cpu() - mean
    assert abs(spread.mean().item()) < 5 * 2 / 64
    assert abs(spread.std().item() - 2) < 0.2
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops


def test_a_callers_generator_draws_on_the_host_as_the_cpu_does(compiled):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # on the host by design: no warning
        drawn = torch.empty(16, device="neuron").exponential_(generator=torch.Generator().manual_seed(3))
    assert torch.equal(drawn.cpu(), torch.empty(16).exponential_(generator=torch.Generator().manual_seed(3)))
    assert compiled.EAGER_STATS.host_ops["aten.exponential_.default"] == 1


def test_randint_draws_natively_within_a_float32_draws_range(compiled):
    torch.manual_seed(4)
    values = torch.randint(3, 10, (4096,), device="neuron").cpu()
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops
    assert values.dtype == torch.int64
    counts = torch.bincount(values, minlength=10)
    assert counts[:3].sum() == 0
    assert bool((abs(counts[3:] - 4096 / 7) < 5 * (4096 / 7) ** 0.5).all()), counts
    torch.manual_seed(4)
    assert torch.equal(torch.randint(3, 10, (4096,), device="neuron").cpu(), values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # wider than 24 random bits reach evenly: the host draws it, by design
        wide = torch.randint(0, 2**40, (8,), device="neuron").cpu()
    assert bool(((wide >= 0) & (wide < 2**40)).all())
    assert compiled.EAGER_STATS.host_ops["aten.random_.from"] == 1


def test_an_op_without_a_lowering_runs_by_torchs_decomposition(compiled):
    # bilinear upsampling reaches the device as upsample_bilinear2d, which torch.compile meets decomposed
    x = torch.randn(1, 2, 5, 6)
    result = torch.nn.functional.interpolate(x.to("neuron"), scale_factor=2, mode="bilinear")
    assert not compiled.EAGER_STATS.host_ops, compiled.EAGER_STATS.host_ops
    assert compiled.EAGER_STATS.native_ops["aten.upsample_bilinear2d.default"] == 1, compiled.EAGER_STATS.native_ops
    assert_close_to_torch(result.cpu(), torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear"))
