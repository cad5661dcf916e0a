"""PyTorch's semantics on the device: views alias, in-place writes reach base and views, out=, strides, promotion,
scalars, copies across devices, conversions, printing, save/load, and the same-device rule."""

import io

import numpy as np
import pytest
import torch
from support import assert_close_to_torch

BASE = torch.arange(24, dtype=torch.float32).reshape(4, 6)


def same(device_value, expected):
    assert device_value.device.type == "neuron"
    actual = device_value.cpu()
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert torch.equal(actual, expected), f"{actual}\n!=\n{expected}"


VIEWS = {
    "slice": lambda t: t[1:3, ::2],
    "select": lambda t: t[:, 1],
    "view": lambda t: t.view(6, 4),
    "t": lambda t: t.t(),
    "transpose": lambda t: t.transpose(0, 1),
    "diagonal": lambda t: t.diagonal(),
    "as_strided": lambda t: t.as_strided((2, 2), (1, 6), 1),
    "unfold": lambda t: t.unfold(1, 2, 2),
    "expand": lambda t: t[0:1].expand(3, 6),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "reshape": lambda t: t.reshape(2, 12),
    "split": lambda t: t.split(2)[1],
    "view_dtype": lambda t: t.view(torch.int32),
}


@pytest.mark.parametrize("name", VIEWS)
def test_views_alias_their_base(host_mode, name):
    make = VIEWS[name]
    device = BASE.to("neuron")
    view = make(device)
    same(view, make(BASE))
    assert view.untyped_storage().data_ptr() == device.untyped_storage().data_ptr()
    assert view.stride() == make(BASE).stride()
    assert view.storage_offset() == make(BASE).storage_offset()


def test_in_place_through_views_updates_base_and_back(eager_mode):
    expected = BASE.clone()
    device = expected.to("neuron")
    view = device[1:3, 2:4]
    view.mul_(10)
    expected[1:3, 2:4].mul_(10)
    same(device, expected)
    device.add_(1)
    expected.add_(1)
    same(view, expected[1:3, 2:4])
    device.t()[0].fill_(7)
    expected.t()[0].fill_(7)
    same(device, expected)
    device.diagonal().zero_()
    expected.diagonal().zero_()
    same(device, expected)


def test_out_variants_resize_and_write_in_place(eager_mode):
    device = BASE.to("neuron")
    out = torch.empty(0, device="neuron")
    assert torch.add(device, 1, out=out) is out
    same(out, BASE + 1)
    same_size = torch.empty(4, 6, device="neuron")
    pointer = same_size.data_ptr()
    torch.mul(device, 2, out=same_size)
    same(same_size, BASE * 2)
    assert same_size.data_ptr() == pointer
    strided = torch.zeros(6, 4, device="neuron").t()
    torch.sub(device, 1, out=strided)
    same(strided, BASE - 1)
    assert strided.stride() == (1, 4)


def test_non_contiguous_operands_and_promotion(eager_mode):
    device = BASE.to("neuron")
    same(device.t() * device.t(), BASE.t() * BASE.t())
    same(device[:, ::2] + device[:, 1::2], BASE[:, ::2] + BASE[:, 1::2])
    integers = torch.arange(6, device="neuron")
    same(integers + 1.5, torch.arange(6) + 1.5)
    same(integers * 2, torch.arange(6) * 2)
    same(device + torch.tensor(2.0), BASE + 2)  # a 0-d CPU tensor is a scalar
    same(device * torch.tensor(3, device="neuron"), BASE * 3)
    same(torch.where(device > 10, device, 0.0), torch.where(BASE > 10, BASE, 0.0))


def test_scalars_item_tolist_and_printing(host_mode):
    device = BASE.to("neuron")
    assert device.sum().item() == BASE.sum().item()
    assert device[1].tolist() == BASE[1].tolist()
    assert bool(device[0, 1] == 1)
    assert repr(device[:2, :2]) == "tensor([[0., 1.],\n        [6., 7.]], device='neuron:0')"


def test_copies_across_devices_and_conversions(host_mode):
    device = torch.zeros(4, 6, device="neuron")
    device.copy_(BASE)
    same(device, BASE)
    host = torch.empty(6, 4)
    host.copy_(device.t())
    assert torch.equal(host, BASE.t())
    other = torch.empty(6, 4, device="neuron").t()
    other.copy_(device)
    same(other, BASE)
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool, torch.float64):
        same(device.to(dtype), BASE.to(dtype))
    same(device.to("cpu").to("neuron", torch.int8), BASE.to(torch.int8))


def test_save_and_load_with_map_location(host_mode):
    buffer = io.BytesIO()
    torch.save({"weight": BASE.to("neuron")}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)["weight"]
    same(loaded, BASE)
    buffer.seek(0)
    on_host = torch.load(buffer, map_location="cpu")["weight"]
    assert on_host.device.type == "cpu"
    assert torch.equal(on_host, BASE)
    buffer = io.BytesIO()
    torch.save(BASE, buffer)
    buffer.seek(0)
    same(torch.load(buffer, map_location="neuron"), BASE)


def test_mixing_devices_is_pytorchs_error(host_mode):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        BASE.to("neuron") + BASE


def test_mixing_devices_is_pytorchs_error_on_the_compiled_path_too(fresh_eager):
    """The compiled path checks the operands' devices as it makes a call's signature: a CPU tensor of one dimension
    or more next to a device tensor is PyTorch's error in either order, once the op's program exists too; a 0-d CPU
    tensor is a scalar."""
    device = BASE.to("neuron")
    same(device + device, BASE + BASE)
    for a, b in ((device, BASE), (BASE, device)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            a + b
    same(device + torch.tensor(2.0), BASE + 2.0)


def test_index_tensors_may_stay_on_the_host(host_mode):
    """As on CUDA: indexing accepts CPU index tensors; writing through them reaches the device tensor."""
    device = BASE.to("neuron")
    same(device[torch.tensor([0, 2])], BASE[torch.tensor([0, 2])])
    same(device[torch.tensor([3, 1], device="neuron")], BASE[torch.tensor([3, 1])])
    expected = BASE.clone()
    expected[torch.tensor([1])] = -1.0
    device[torch.tensor([1])] = -1.0
    same(device, expected)


def test_equal_compares_on_the_device(eager_mode, fresh_eager):
    device = BASE.to("neuron")
    assert torch.equal(device, device.clone())
    assert not torch.equal(device, device + 1)
    assert not torch.equal(device, device.reshape(6, 4))  # other sizes
    assert torch.equal(device, BASE.long().to("neuron"))  # values compare after promotion, as on the CPU
    nan = torch.tensor([float("nan")], device="neuron")
    assert not torch.equal(nan, nan)
    assert fresh_eager.EAGER_STATS.host_ops.get("aten.equal.default", 0) == 0


def test_cummax_and_cummin_run_on_the_device(monkeypatch, fresh_eager):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    x = torch.tensor([[1.0, 3.0, float("nan"), 2.0, 3.0], [4.0, -1.0, 4.0, 0.5, -2.0]])
    device = x.to("neuron")
    for scan in (torch.cummax, torch.cummin):
        assert_close_to_torch(tuple(t.cpu() for t in scan(device, 1)), tuple(scan(x, 1)), scan.__name__)
    assert not fresh_eager.EAGER_STATS.host_ops
    assert fresh_eager.EAGER_STATS.native_ops["aten.cummax.default"] == 1


def test_a_structured_op_returning_a_list_fills_its_out_variant(eager_mode, fresh_eager):
    split = torch.ops.aten.split_with_sizes_copy.default  # torch's stub of the Python function returns None
    parts = split(BASE.to("neuron"), [1, 3], 0)
    for part, expected in zip(parts, split(BASE, [1, 3], 0), strict=True):
        same(part, expected)


def test_an_out_variant_calling_its_functional_op_back_runs_on_the_host(monkeypatch, fresh_eager):
    # pinverse's float64 tolerance keeps linalg_pinv off the core, and its out= kernel calls the functional op again
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    x = torch.randn(4, 3)
    with pytest.warns(UserWarning, match="linalg_pinv"):
        result = torch.pinverse(x.to("neuron"))
    assert_close_to_torch(result.cpu(), torch.pinverse(x))
    assert fresh_eager.EAGER_STATS.host_ops["aten.linalg_pinv.atol_rtol_tensor"] == 1


def test_a_composites_scalar_operand_reaches_a_structured_kernel_as_a_number(monkeypatch, fresh_eager):
    # take_along_dim's C++ composite calls remainder(indices, size) with the size as a wrapped-number tensor
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    indices = torch.tensor([[0, -1], [3, -4], [5, 2], [1, -6]])
    result = torch.take_along_dim(BASE.to("neuron"), indices.to("neuron"), dim=1)
    same(result, torch.take_along_dim(BASE, indices, dim=1))
    assert not fresh_eager.EAGER_STATS.host_ops, fresh_eager.EAGER_STATS.host_ops


def test_a_number_operand_becomes_one_tensor_per_value_and_default_dtype(monkeypatch, fresh_eager):
    """A scalar operand that reaches a structured kernel as a number is made a 0-d tensor once per value: the same
    value again finds it, while -0.0 and 0.0, a NaN, an int, a bool and another default dtype each get their own,
    and the ops give what the CPU gives with each."""
    from neuron_mlir.frontend.device import dispatch

    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    monkeypatch.setattr(dispatch, "_number_tensors", {})
    first = dispatch._numbers_as_tensors((BASE, 0.5), [0, 1])[1]
    again = dispatch._numbers_as_tensors((BASE, 0.5), [0, 1])[1]
    assert first is again
    negative = dispatch._number_tensor(-0.0)
    assert negative is not dispatch._number_tensor(0.0)
    assert torch.signbit(negative)
    assert not torch.signbit(dispatch._number_tensor(0.0))
    assert torch.isnan(dispatch._number_tensor(float("nan")))
    assert dispatch._number_tensor(1).dtype == torch.int64
    assert dispatch._number_tensor(True).dtype == torch.bool
    assert dispatch._number_tensor(1.0).dtype == torch.float32
    assert dispatch._number_tensor(np.float64(1.0)).dtype == torch.float64
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert dispatch._number_tensor(1.0).dtype == torch.float64
        assert dispatch._number_tensor(1j).dtype == torch.complex128
    finally:
        torch.set_default_dtype(previous)
    assert dispatch._number_tensor(1.0).dtype == torch.float32
    with torch.device("meta"):  # a function mode: what torch.tensor makes under it, made anew
        assert dispatch._number_tensor(0.5).is_meta
    assert dispatch._number_tensor(0.5) is first
    # a composite's wrapped numbers, the same value twice and then another
    indices = torch.tensor([[0, -1], [3, -4], [5, 2], [1, -6]])
    for _ in range(2):
        result = torch.take_along_dim(BASE.to("neuron"), indices.to("neuron"), dim=1)
        same(result, torch.take_along_dim(BASE, indices, dim=1))
    same(
        torch.take_along_dim(BASE[:, :5].to("neuron"), indices.to("neuron"), dim=1),
        torch.take_along_dim(BASE[:, :5], indices, dim=1),
    )


def test_index_put_in_place_runs_on_the_device(monkeypatch, fresh_eager):
    # index_put_ reaches the device as _index_put_impl_, whose functional form is index_put with a bounds-check flag
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    rows, values = torch.tensor([0, 2, 2]), torch.arange(18, dtype=torch.float32).reshape(3, 6)
    device = BASE.to("neuron")
    device.index_put_((rows.to("neuron"),), values.to("neuron"), accumulate=True)
    same(device, BASE.clone().index_put_((rows,), values, accumulate=True))
    assert not fresh_eager.EAGER_STATS.host_ops, fresh_eager.EAGER_STATS.host_ops


@pytest.mark.parametrize(
    ("dtype", "number"),
    [(torch.bfloat16, 0.5), (torch.float16, 0.25), (torch.int32, 3), (torch.int32, 2.5), (torch.float32, 1j)],
)
def test_a_number_beside_0d_tensors_promotes_as_a_wrapped_number(monkeypatch, fresh_eager, dtype, number):
    # `x * 0.5` reaches the device's kernel with the number where the schema takes a tensor; beside 0-d tensors
    # a 0-d float32 stand-in would outrank the bf16 operand, where the number does not
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    x = torch.tensor(3, dtype=dtype)
    for result, expected in ((x.to("neuron") * number, x * number), (number - x.to("neuron"), number - x)):
        assert result.dtype == expected.dtype
        assert_close_to_torch(result.cpu(), expected)
    assert not fresh_eager.EAGER_STATS.host_ops, fresh_eager.EAGER_STATS.host_ops


def test_a_number_beside_a_tensor_with_dimensions_keeps_its_own_dtype(monkeypatch, fresh_eager):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    x, y = torch.tensor([1.5, 2.5], dtype=torch.bfloat16), torch.tensor(2.0)
    result = torch.trapezoid(x.to("neuron"), dx=0.5), x.to("neuron") * y.to("neuron") * 0.5
    assert [r.dtype for r in result] == [torch.trapezoid(x, dx=0.5).dtype, (x * y * 0.5).dtype]
