"""Aliasing on the device, compiled and on the host: views of views, in-place writes through transposed and
strided views, `out=` of the wrong size, overlapping `as_strided` views; and no device memory leaks from a loop of
such steps."""

import gc

import pytest
import torch

neuron = torch.get_device_module("neuron")
# every test both with eager ops recorded into deferred regions and with each op its own program
pytestmark = pytest.mark.usefixtures("deferral")


def _pair(shape=(4, 6)):
    host = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    return host, host.to("neuron")


def _same(device_value, expected):
    assert device_value.device.type == "neuron"
    actual = device_value.cpu()
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    assert torch.equal(actual, expected), f"{actual}\n!=\n{expected}"


def _shares_storage(view, base):
    return view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


def test_views_of_views_alias_the_base_and_write_through(eager_mode):
    host, device = _pair((4, 6))

    def chain(t):
        return t.t()[1:5:2].unsqueeze(0).transpose(1, 2)[0, ::2]

    view, expected_view = chain(device), chain(host)
    _same(view, expected_view)
    assert _shares_storage(view, device)
    assert (view.stride(), view.storage_offset()) == (expected_view.stride(), expected_view.storage_offset())
    view.mul_(-1)
    expected_view.mul_(-1)
    _same(device, host)
    device.add_(100)  # a write to the base reaches the view of views
    host.add_(100)
    _same(view, expected_view)


def test_in_place_through_a_transpose(eager_mode):
    host, device = _pair((3, 5))
    device.t().add_(torch.arange(3.0, device="neuron"))  # broadcast along the transposed rows
    host.t().add_(torch.arange(3.0))
    _same(device, host)
    device.t()[3:5].mul_(device[:, 0:2].t())  # reads a strided view of the storage it writes, disjointly
    host.t()[3:5].mul_(host[:, 0:2].t())
    _same(device, host)
    device.t().mul_(device.t())  # reads exactly what it writes
    host.t().mul_(host.t())
    _same(device, host)
    device.t().clamp_(max=50.0)
    host.t().clamp_(max=50.0)
    _same(device, host)


def test_out_of_the_wrong_size_is_resized(eager_mode):
    host, device = _pair((4, 6))
    too_big = torch.full((7, 7), -1.0, device="neuron")
    assert torch.mul(device, 2, out=too_big) is too_big
    _same(too_big, host * 2)
    too_small = torch.empty(2, device="neuron")
    torch.sum(device, dim=1, out=too_small)
    _same(too_small, host.sum(dim=1))
    with pytest.warns(UserWarning, match="resized"):  # PyTorch's warning for resizing a non-empty out=
        torch.exp(device, out=torch.empty(5, device="neuron"))


def test_out_that_aliases_an_input(eager_mode):
    host, device = _pair((4, 6))
    torch.add(device, device, out=device)
    _same(device, host + host)
    torch.neg(device.t(), out=device.t())
    _same(device, -(host + host))
    flat = device.view(-1)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        torch.add(flat[:20], 1, out=flat[4:])  # partly overlapping: PyTorch refuses it
    _same(device, -(host + host))


def test_overlapping_as_strided_reads_and_refuses_writes(eager_mode):
    host, device = _pair((12,))
    windows, expected = device.as_strided((4, 3), (2, 1)), host.as_strided((4, 3), (2, 1))  # rows overlap
    _same(windows * 1, expected * 1)
    _same(windows.sum(dim=1), expected.sum(dim=1))
    _same(windows.contiguous(), expected.contiguous())
    _same(torch.mm(windows.t(), windows), torch.mm(expected.t(), expected))
    repeated = device.as_strided((3, 4), (0, 1))  # every row the same memory: PyTorch refuses writes
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        repeated.add_(1)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        repeated.relu_()  # the written tensor its only operand
    _same(device, host)  # the refused write left the storage alone
    disjoint = device.as_strided((2, 3), (6, 2), 1)  # not overlapping: writable
    disjoint.fill_(-1)
    host.as_strided((2, 3), (6, 2), 1).fill_(-1)
    _same(device, host)


def test_fills_write_expanded_tensors_as_pytorch_does(eager_mode):
    # a fill gives every element the same value whatever the order, so PyTorch lets it write an expanded tensor
    host, device = _pair((4, 1))
    for fill in (lambda t: t.fill_(5.0), lambda t: t.zero_()):
        fill(device[1:3].expand(2, 6))
        fill(host[1:3].expand(2, 6))
        _same(device, host)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        device[1:3].expand(2, 6).fill_(torch.tensor(-2.0, device="neuron"))  # as on the CPU: a tensor's fill checks
    _same(device, host)
    pending = device * 3  # a region still recording when the fill comes
    device.as_strided((3, 4), (1, 0)).fill_(7.0)
    host_pending = host * 3
    host.as_strided((3, 4), (1, 0)).fill_(7.0)
    _same(pending, host_pending)
    _same(device, host)


def test_a_loop_of_views_and_in_place_steps_leaks_no_device_memory(eager_mode):
    gc.collect()
    start = neuron.memory_allocated()
    weight = torch.randn(8, 8, device="neuron")
    for _ in range(4):
        view = weight.t()[::2]
        view.mul_(0.5)
        activations = torch.relu(weight @ weight.t()).view(4, 16)
        torch.add(activations[:, :8], 1, out=torch.empty(0, device="neuron"))
        weight.add_(activations.view(8, 8).t(), alpha=0.1)
        weight.to(torch.bfloat16).float()
        del view, activations
    del weight
    gc.collect()
    assert neuron.memory_allocated() == start
