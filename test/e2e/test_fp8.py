"""fp8 tensors compiled for the simulated NeuronCore against eager: casts, fp8 matmuls, `torch._scaled_mm`.

Casts to fp8 must match PyTorch bit for bit (float8_e4m3fn saturates to +-448, float8_e5m2 overflows to
infinity); matmuls of fp8 operands run on TensorE in fp8 (the profile's flops are fp8's) and match eager within
the tolerance of their output dtype. Shapes avoid multiples of the tile sizes.
"""

from __future__ import annotations

import pytest
import torch
from support import assert_close_to_torch
from support.compiled import check_compiled, run_compiled

import neuron_mlir

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype
    equal = actual.view(torch.uint8) == expected.view(torch.uint8)
    both_nan = actual.float().isnan() & expected.float().isnan()  # NaN encodings may differ; both are NaN
    wrong = ~(equal | both_nan)
    assert not wrong.any(), f"{int(wrong.sum())} elements differ, first at {wrong.nonzero()[0].tolist()}"


def _fp8_flops_only() -> None:
    profiles = neuron_mlir.profiles().values()
    families = {family for profile in profiles for family, flops in profile.flops_by_family.items() if flops}
    assert families == {"fp8"}, f"TensorE ran {families}"


def test_casts_to_fp8_round_and_saturate_as_torch():
    special = [447.0, 448.0, 464.0, 479.9, 480.0, 661.0, 1e6, 57344.0, 61439.0, 61440.0, 7e4, 2.0**-10, 1e-12]
    special += [float("inf"), float("nan")]
    values = torch.tensor(special + [-v for v in special])
    x = torch.cat([values, torch.randn(300) * 300]).reshape(3, -1)

    def casts(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.to(E4M3), x.to(E5M2), x.to(torch.bfloat16).to(E4M3), x.to(E4M3).to(torch.float32)

    actual = run_compiled(casts, x)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    for got, want in zip(actual, casts(x), strict=True):
        _same_bits(got, want) if got.dtype in (E4M3, E5M2) else assert_close_to_torch(got, want)


def test_matmul_of_widened_fp8_runs_on_tensore_in_fp8():
    a = (torch.randn(70, 300) * 4).to(E4M3)
    b = torch.randn(300, 90).to(E5M2)  # e4m3 activations times e5m2 gradients, as fp8 training's backward has
    check_compiled(lambda a, b: a.float() @ b.float(), a, b)
    _fp8_flops_only()


def _fp8_operands(m: int, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """a [m, k] row-major and b [k, n] column-major, as `_scaled_mm` wants them."""
    a = (torch.randn(m, k) * 4).to(E4M3)
    b = (torch.randn(n, k) * 4).to(E4M3).t()
    return a, b


@pytest.mark.parametrize(
    ("scales", "out_dtype", "with_bias"),
    [("tensor", torch.float32, False), ("row", torch.bfloat16, True), ("tensor", E4M3, False)],
)
def test_scaled_mm_is_lowered_natively(scales, out_dtype, with_bias):
    m, k, n = 70, 300, 90
    a, b = _fp8_operands(m, k, n)
    if scales == "tensor":
        scale_a, scale_b = torch.tensor(0.37), torch.tensor(0.019)
    else:
        scale_a, scale_b = torch.rand(m, 1) + 0.5, (torch.rand(1, n) + 0.5) / 40
    bias = torch.randn(n).to(out_dtype) if with_bias else None

    def scaled(a, b, scale_a, scale_b, bias):
        return torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=True)

    check_compiled(scaled, a, b, scale_a, scale_b, bias)
    _fp8_flops_only()


def _transposes() -> int:
    """TensorE transposes the compiled programs ran: matmul instances that multiply nothing."""
    profiles = neuron_mlir.profiles().values()
    return sum(s.count for p in profiles for s in p.instructions if s.opcode == "nc_matmul" and not s.flops)


def test_scaled_mm_transposes_a_k_contiguous_weight_once():
    """A Linear layer's fp8 weight read as its transpose (K contiguous), too large to stay whole on chip, is
    transposed on TensorE once for both block rows (512 rows, then 128), not once per block row: as many
    transposes as A's and B's [128, 128] blocks (partial ones included). About the smallest such product: two
    block rows, and a B just past the quarter of trn2's SBUF a B kept whole may take (9 K tiles x 6500 columns
    of fp8: 57 KiB per partition).

    The reference is eager's product of the widened operands in fp32, which is what `_scaled_mm` computes (exact
    products, fp32 sums, then the scales): PyTorch's CPU kernel for fp8 is a scalar loop that takes minutes here
    (the natively lowered cases above compare with it)."""
    m, k, n = 640, 1100, 6500  # whole row tiles: a partial one over a long K runs swapped, transposed back
    a, b = _fp8_operands(m, k, n)
    scale_a, scale_b = torch.tensor(0.37), torch.tensor(0.019)

    def scaled(a, weight, scale_a, scale_b):
        return torch._scaled_mm(a, weight.t(), scale_a, scale_b, out_dtype=torch.float32)

    actual = run_compiled(scaled, a, b.t(), scale_a, scale_b)
    assert neuron_mlir.stats()["nodes_fallen_back"] == 0
    assert_close_to_torch(actual, (a.float() @ b.float()) * scale_a * scale_b)
    _fp8_flops_only()
    tiles = -(-k // 128)
    assert _transposes() == (-(-m // 128) + -(-n // 128)) * tiles


def test_scaled_mm_with_scale_result_is_refused_with_the_reason():
    a, b = _fp8_operands(16, 32, 24)

    def scaled(a, b):
        return torch._scaled_mm(a, b, torch.tensor(1.0), torch.tensor(1.0), scale_result=torch.tensor(2.0))

    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"_scaled_mm.*scale_result is not supported"):
        torch.compile(scaled, backend="neuron-mlir", options={"strict": True})(a, b)


def test_torchao_float8_training_compiles_natively():
    """torchao's float8 training: amax, scale (float64 steps narrowed exactly), saturating casts and `_scaled_mm`
    in the forward and both backward matmuls, all on the core; outputs and gradients as torchao's eager run."""
    import copy

    from torchao.float8 import convert_to_float8_training

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.GELU(), torch.nn.Linear(48, 40))
    convert_to_float8_training(model)
    eager_model = copy.deepcopy(model)
    x = torch.randn(40, 64)

    torch._dynamo.reset()
    neuron_mlir.reset()
    compiled = torch.compile(model, backend="neuron-mlir", options={"strict": True})
    out = compiled(x)
    out.square().mean().backward()
    expected = eager_model(x)
    expected.square().mean().backward()
    assert_close_to_torch(out, expected, "output")
    for (name, param), eager_param in zip(model.named_parameters(), eager_model.parameters(), strict=True):
        assert_close_to_torch(param.grad, eager_param.grad, f"{name}.grad")
    flops = {family for p in neuron_mlir.profiles().values() for family, n in p.flops_by_family.items() if n}
    assert "fp8" in flops


def test_torchao_float8_backward_reuses_the_forward_fp8_weight(monkeypatch):
    """The backward's second cast of the weight (torchao saves the fp32 weight and casts it again) reads the
    forward's fp8 weight and scale instead (frontend/reuse_fp8_casts.py): the backward graph takes the fp8 weight,
    in the weight's own order, as an input and takes no maximum over the weight; gradients as torchao's eager run.
    The 3-D input is cast whole in the forward and viewed as rows after, while the backward views the fp32 input
    first: its cast is recognised through the view too, so the backward receives no fp32 input and takes no
    maximum over one."""
    import copy

    from torchao.float8 import convert_to_float8_training

    from neuron_mlir.frontend import backend
    from neuron_mlir.frontend.compile_graph import compile_graph as original

    graphs: dict[str, torch.fx.GraphModule] = {}

    def recording(gm, example_inputs, config, kind):
        graphs[kind] = gm
        return original(gm, example_inputs, config, kind)

    monkeypatch.setattr(backend, "compile_graph", recording)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.Linear(48, 32))  # the second's dX needs its W
    convert_to_float8_training(model)
    eager_model = copy.deepcopy(model)
    x = torch.randn(2, 12, 64)
    torch._dynamo.reset()
    neuron_mlir.reset()
    torch.compile(model, backend="neuron-mlir", options={"strict": True})(x).square().mean().backward()
    eager_model(x).square().mean().backward()
    for (name, param), eager_param in zip(model.named_parameters(), eager_model.parameters(), strict=True):
        assert_close_to_torch(param.grad, eager_param.grad, f"{name}.grad")

    nodes = list(graphs["backward"].graph.nodes)
    inputs = [n.meta["val"] for n in nodes if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)]
    weight_shapes = {(32, 48), (48, 32)}  # the second layer's, as is or transposed
    fp8_weights = [v for v in inputs if v.dtype == E4M3 and tuple(v.shape) in weight_shapes]
    # in the weight's own order (as the forward stored it), not W^T made contiguous
    assert [tuple(v.shape) for v in fp8_weights] == [(32, 48)], [(v.dtype, v.shape) for v in inputs]
    weight_maxima = [
        n for n in nodes
        if n.op == "call_function" and n.target is torch.ops.aten.max.default
        and tuple(n.args[0].meta["val"].shape) in weight_shapes
    ]  # fmt: skip
    assert not weight_maxima, weight_maxima
    input_shapes = {(2, 12, 64), (24, 64), (2, 12, 48), (24, 48)}  # both layers' inputs, as is or as rows
    fp32_inputs = [v for v in inputs if v.dtype == torch.float32 and tuple(v.shape) in input_shapes]
    assert not fp32_inputs, [(v.dtype, v.shape) for v in inputs]
    input_maxima = [
        n for n in nodes
        if n.op == "call_function" and n.target is torch.ops.aten.max.default
        and any(tuple(a.meta["val"].shape) in {(2, 12, 64), (24, 64)} for a in n.args[0].all_input_nodes)
    ]  # fmt: skip
    assert not input_maxima, input_maxima
