"""Complex tensors on the device: conjugate and negative views (their bits, resolved by copies and by host
kernels), and complex ops run as programs on (real, imaginary) pairs."""

import pytest
import torch
from support import assert_close_to_torch


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


def _fft_cases(signal, spectrum):
    return {
        "rfft": lambda: torch.fft.rfft(signal),
        "fft": lambda: torch.fft.fft(spectrum, norm="ortho"),
        "ifft2": lambda: torch.fft.ifft2(spectrum),
        "irfft": lambda: torch.fft.irfft(spectrum, n=10),
        "hfft": lambda: torch.fft.hfft(spectrum.conj()),  # a conjugate view into a program
        "ihfft": lambda: torch.fft.ihfft(signal, dim=0),
    }


@pytest.mark.parametrize("name", list(_fft_cases(None, None)))
def test_ffts_run_on_the_device_as_programs_of_pairs(name, fresh_eager, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")  # a trip to the host is an error
    signal = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    spectrum, device_spectrum = _complex_pair((3, 8))
    expected = _fft_cases(signal, spectrum)[name]()
    actual = _fft_cases(signal.to("neuron"), device_spectrum)[name]()
    assert actual.device.type == "neuron"
    assert_close_to_torch(actual.cpu(), expected, name)
    assert fresh_eager.EAGER_STATS.host_ops == {}
    assert any("fft" in op for op in fresh_eager.EAGER_STATS.native_ops), fresh_eager.EAGER_STATS.native_ops


def test_complex_results_and_fills_are_programs_of_pairs(fresh_eager, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")
    magnitude = torch.rand(4, 5, generator=torch.Generator().manual_seed(2))
    angle = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    on_device = magnitude.to("neuron"), angle.to("neuron")
    assert_close_to_torch(torch.polar(*on_device).cpu(), torch.polar(magnitude, angle))
    assert_close_to_torch(torch.complex(*on_device).cpu(), torch.complex(magnitude, angle))
    filled = torch.zeros(2, 3, dtype=torch.complex64, device="neuron").fill_(1 - 2j)
    assert torch.equal(filled.cpu(), torch.full((2, 3), 1 - 2j, dtype=torch.complex64))
    assert fresh_eager.EAGER_STATS.host_ops == {}


def test_a_program_reads_and_writes_conjugate_views_by_their_values(fresh_eager, monkeypatch):
    """`mm` passes the Conjugate key (BLAS takes conjugate operands): the program gets the view itself."""
    monkeypatch.setenv("NEURON_MLIR_STRICT", "1")
    host, device = _complex_pair((3, 4))
    other, device_other = _complex_pair((4, 2))
    assert_close_to_torch(torch.mm(device.conj(), device_other).cpu(), torch.mm(host.conj(), other))
    written = torch.empty(3, 2, dtype=torch.complex64, device="neuron")
    torch.mm(device, device_other, out=written.conj())
    assert_close_to_torch(written.cpu(), torch.mm(host, other).conj())
    assert fresh_eager.EAGER_STATS.native_ops["aten.mm.default"] == 1
    assert fresh_eager.EAGER_STATS.host_ops == {}


def test_a_compiled_fft_takes_and_returns_device_tensors(fresh_eager):
    """torch.compile over complex device tensors: the DFT matrices are constants of a graph on the device."""

    def spectrum(signal, values):
        # fft2 of a real signal casts it to complex: a zero imaginary half made on the device
        return torch.fft.rfft(signal) * 2, torch.fft.ifft(values.conj()), torch.fft.fft2(signal).real

    signal = torch.randn(4, 16, generator=torch.Generator().manual_seed(4))
    values, device_values = _complex_pair((4, 16))
    compiled = torch.compile(spectrum, backend="neuron-mlir", options={"strict": True})
    actual = compiled(signal.to("neuron"), device_values)
    assert all(result.device.type == "neuron" for result in actual)
    assert_close_to_torch([result.cpu() for result in actual], spectrum(signal, values))
    assert fresh_eager.EAGER_STATS.host_ops == {}


def test_a_cast_to_a_real_dtype_keeps_the_real_part_and_warns(fresh_eager, monkeypatch):
    from neuron_mlir.frontend.device import dispatch

    monkeypatch.setattr(dispatch, "_complex_to_real_warned", False)  # once per process, as PyTorch's
    host, device = _complex_pair()
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        real = device.to(torch.float32)
    assert torch.equal(real.cpu(), host.real)
    assert fresh_eager.EAGER_STATS.native_ops["aten._to_copy.default"] == 1
