"""Complex tensors on the device: conjugate and negative views (their bits, resolved by copies and by host
kernels), and complex ops run as programs on (real, imaginary) pairs."""

import torch


def _complex_pair(shape=(2, 3)):
    host = torch.randn(shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    return host, host.to("neuron")


def test_conjugate_views_resolve_on_the_device(host_mode):
    host, device = _complex_pair()
    view = device.conj()
    assert view.is_conj()
    assert view.device.type == "neuron"
    assert torch.equal(view.resolve_conj().cpu(), host.conj().resolve_conj())
    assert torch.equal(view.cpu(), host.conj())  # the copy to the host resolves the bit
    assert torch.equal(view.t().contiguous().cpu(), host.conj().t().contiguous())
    # `conj().imag` is a negative view of real values
    imaginary = view.imag
    assert imaginary.is_neg()
    assert torch.equal(imaginary.resolve_neg().cpu(), host.conj().imag.resolve_neg())
    assert torch.equal((imaginary * 2).cpu(), host.conj().imag * 2)


def test_a_copy_into_a_conjugate_view_writes_conjugated_values(host_mode):
    host, device = _complex_pair()
    written = torch.zeros_like(device)
    written.conj().copy_(device)
    assert torch.equal(written.cpu(), host.conj())
