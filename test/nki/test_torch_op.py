"""NKI kernels as torch custom ops (`neuron_mlir.as_torch_op`): eager on CPU and `neuron` tensors, under torch.compile as
one node that is no CPU fallback, in training with a user backward, and the check of the declared shapes."""

import copy
import sys
from pathlib import Path

import pytest
import torch
from support import REPO, assert_close_to_torch

import neuron_mlir
import neuron_mlir.nki as nki
import neuron_mlir.nki.language as nl

sys.path.insert(0, str(REPO / "examples"))

from kernels.nki_transformer import make_run, rms_norm_op, train
from kernels.normalization import reference_rms_norm


def _torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@pytest.fixture
def inputs():
    generator = torch.Generator().manual_seed(3)
    return torch.randn(200, 96, generator=generator), torch.randn(96, generator=generator)


def test_schema_from_the_kernel_signature():
    schema = rms_norm_op.op._schema
    assert schema.name == "nki_examples::rms_norm"
    arguments = [(a.name, str(a.type), a.default_value) for a in schema.arguments]
    assert arguments == [("x", "Tensor", None), ("weight", "Tensor", None), ("eps", "float", 1e-6)]
    assert [str(r.type) for r in schema.returns] == ["Tensor"]


def test_eager_on_cpu(inputs):
    x, weight = inputs
    result = rms_norm_op(x, weight)
    assert isinstance(result, torch.Tensor)
    assert result.shape == x.shape
    assert_close_to_torch(result, torch.from_numpy(reference_rms_norm(x.numpy(), weight.numpy())))


def test_opcheck(inputs):
    """The schema, the fake implementation and the autograd registration agree with the real kernel."""
    x, weight = inputs
    torch.library.opcheck(
        rms_norm_op.custom_op, (x[:32], weight.requires_grad_()), test_utils=("test_schema", "test_faketensor")
    )


def test_backward_matches_autograd_of_the_formula(inputs):
    x, weight = (t.clone().requires_grad_() for t in inputs)
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(4))
    rms_norm_op(x, weight).backward(grad)
    x_ref, weight_ref = (t.detach().clone().requires_grad_() for t in (x, weight))
    _torch_rms_norm(x_ref, weight_ref).backward(grad)
    assert_close_to_torch(x.grad, x_ref.grad, "grad x")
    assert_close_to_torch(weight.grad, weight_ref.grad, "grad weight")


def test_eager_on_the_neuron_device(inputs):
    from neuron_mlir.frontend.device import eager

    x, weight = inputs
    eager.reset()
    result = rms_norm_op(x.to("neuron"), weight.to("neuron"))
    assert result.device.type == "neuron"
    assert eager.EAGER_STATS.native_ops["nki_examples::rms_norm"] == 1
    assert eager.EAGER_STATS.host_ops == {}
    assert_close_to_torch(result.cpu(), rms_norm_op(x, weight))


def test_compiled_is_one_node_and_no_fallback(inputs, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")  # a CPU fallback would be an error

    def layer(x, weight):
        return torch.tanh(rms_norm_op(x * 2.0, weight)) + 1.0

    x, weight = inputs
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(layer, backend="neuron-mlir")
    assert_close_to_torch(compiled(x, weight), layer(x, weight))
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0, stats["fallback_ops"]
    assert stats["graphs_compiled"] >= 1


def _one_program_with_the_kernel(op_name: str) -> dict[str, float]:
    """The kernel's busy time in each compiled program, after checking that no graph was partitioned (the
    kernel ran inside a program, not as a program of its own between regions)."""
    profiles = neuron_mlir.profiles()
    assert profiles
    assert not any("submod" in name for name in profiles), list(profiles)
    return {name: profile.kernel_ns().get(op_name, 0.0) for name, profile in profiles.items()}


def test_compiled_program_inlines_the_kernel(monkeypatch):
    """The kernel's instructions are placed in the compiled program (a strided operand is first made row-major):
    one program, whose profile has the kernel's row, and the kernel's lines among its source locations."""
    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")

    def layer(x, weight):
        return torch.tanh(rms_norm_op(x.t(), weight)) + 1.0  # x.t(): a transposed view of the input (the call)

    generator = torch.Generator().manual_seed(3)
    x, weight = torch.randn(96, 40, generator=generator), torch.randn(96, generator=generator)
    torch._dynamo.reset()
    neuron_mlir.reset()
    assert_close_to_torch(torch.compile(layer, backend="neuron-mlir")(x, weight), layer(x, weight))
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    busy = _one_program_with_the_kernel("nki_examples::rms_norm")
    assert len(busy) == 1
    assert all(ns > 0 for ns in busy.values()), busy
    (profile,) = neuron_mlir.profiles().values()
    assert "nki_examples::rms_norm" in profile.summary()
    assert any(location.startswith("normalization.py:") for location in map(_file_of, profile.location_ns))
    # the row-major copy of the operand is located at the call in the model's code, not in the op's wrapper
    lines = Path(__file__).read_text().splitlines()
    call = next(i for i, text in enumerate(lines, 1) if "a transposed view of the input (the call)" in text)
    files = {_file_of(location) for location in profile.location_ns}
    assert f"test_torch_op.py:{call}" in files, files
    assert not any(name.startswith("nki_ops.py") for name in files), files
    # the kernel alone on the same core: the inlined instructions do the same work, so take about as long
    alone = rms_norm_op.kernel.simulate(x.t().contiguous().numpy(), weight.numpy(), target="trn2")[1]
    assert profile.kernel_counts()["nki_examples::rms_norm"] >= alone.instruction_count - 2


def _file_of(location: str) -> str:
    return Path(location.split(" ")[0]).name


@nki.jit
def _sums_rows(x):
    rows = x.shape[0]
    out = nl.ndarray((rows, 1), dtype=x.dtype, buffer=nl.shared_hbm)  # the line the diagnostic names
    nl.store(out, nl.sum(nl.load(x), axis=1, keepdims=True))
    return out


_declared_wrong = neuron_mlir.as_torch_op(_sums_rows, name="nki_tests::sums_rows", out_shape=lambda x: (x.shape[0],))


def test_declared_shape_that_the_kernel_does_not_return():
    lines = Path(__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "the line the diagnostic names" in text)
    with pytest.raises(nki.NkiError) as caught:
        _declared_wrong(torch.ones(8, 4))
    message = str(caught.value)
    assert "nki_tests::sums_rows" in message
    assert "[8, 1] f32, but out_shape/out_dtype declare [8] f32" in message
    assert f"test_torch_op.py:{line} (_sums_rows)" in message
    # under torch.compile the declaration is checked while Dynamo traces with fake tensors, before any compile
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: _declared_wrong(x) + 1.0, backend="neuron-mlir")
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError, match=rf"nki_tests::sums_rows.*test_torch_op.py:{line}"):
        compiled(torch.ones(8, 4))


@nki.jit
def _scale(x, factor=1.0):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), factor))
    return out


def _scale_backward(ctx, grad):
    return _scale_op(grad, ctx.scalars["factor"]), None


_scale_op = neuron_mlir.as_torch_op(
    name="nki_tests::scale", out_shape=lambda x, factor=1.0: x.shape, backward=_scale_backward
)(_scale)


def test_backward_that_is_a_kernel_op_trains_alike_compiled(monkeypatch):
    """The backward graph holds a kernel op as well; strict mode: neither graph falls back."""
    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")

    def loss_of(x, weight):
        return (torch.relu(_scale_op(x @ weight, 3.0)) ** 2).sum()

    generator = torch.Generator().manual_seed(5)
    x, weight = torch.randn(16, 8, generator=generator), torch.randn(8, 32, generator=generator)
    eager_weight = weight.clone().requires_grad_()
    eager_loss = loss_of(x, eager_weight)
    eager_loss.backward()
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled_weight = weight.clone().requires_grad_()
    compiled_loss = torch.compile(loss_of, backend="neuron-mlir")(x, compiled_weight)
    compiled_loss.backward()
    assert neuron_mlir.stats()["graphs_compiled"] >= 2  # forward and backward
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    assert_close_to_torch(compiled_loss.detach(), eager_loss.detach(), "loss")
    assert_close_to_torch(compiled_weight.grad, eager_weight.grad, "grad weight")


@nki.jit
def _sum_and_product(a, b):
    total = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    product = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    left, right = nl.load(a), nl.load(b)
    nl.store(total, nl.add(left, right))
    nl.store(product, nl.multiply(left, right, dtype=nl.float32))
    return total, product


_two_outputs = neuron_mlir.as_torch_op(
    _sum_and_product,
    name="nki_tests::sum_and_product",
    outputs=2,
    out_shape=lambda a, b: (a.shape, a.shape),
    out_dtype=lambda a, b: (a.dtype, torch.float32),
)


def test_kernel_with_two_outputs_of_two_dtypes():
    generator = torch.Generator().manual_seed(6)
    a, b = (torch.randn(16, 8, generator=generator).to(torch.bfloat16) for _ in range(2))
    total, product = _two_outputs(a, b)
    assert_close_to_torch(total, a + b, "sum")
    assert_close_to_torch(product, a.float() * b.float(), "product")
    torch.library.opcheck(_two_outputs.custom_op, (a, b), test_utils=("test_schema", "test_faketensor"))


def test_tiny_transformer_trains_alike_in_eager_and_compiled():
    model, batches = make_run(width=32, heads=2, layers=1, steps=2, length=8)
    compiled_model = copy.deepcopy(model)
    eager_losses = train(model, batches, learning_rate=0.1)
    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled_losses = train(torch.compile(compiled_model, backend="neuron-mlir"), batches, learning_rate=0.1)  # type: ignore[arg-type]
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0, neuron_mlir.stats()["fallback_ops"]
    # the forward programs hold the RMSNorm kernel (the backward is torch ops): no graph was split around it
    busy = _one_program_with_the_kernel("nki_examples::rms_norm")
    assert any(ns > 0 for name, ns in busy.items() if "forward" in name), busy
    assert eager_losses[-1] < eager_losses[0]
    assert_close_to_torch(torch.tensor(compiled_losses), torch.tensor(eager_losses), "losses")
    for (name, trained), compiled_parameter in zip(model.named_parameters(), compiled_model.parameters(), strict=True):
        assert_close_to_torch(compiled_parameter.detach(), trained.detach(), name)
