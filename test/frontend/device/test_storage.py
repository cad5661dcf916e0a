"""Device memory from torch: exact accounting, freeing with the last tensor, no leak over training steps, OOM."""

import gc

import pytest
import torch

from neuron_mlir.frontend.device import storage
from neuron_mlir.runtime.device_memory import DeviceMemory
from neuron_mlir.runtime.hardware import get_target

ALL_DTYPES = [
    torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2,
]  # fmt: skip

# torch.neuron, which the device registers when torch is imported (no static attribute of torch)
neuron = torch.get_device_module("neuron")


def test_memory_allocated_is_exact_and_freed_with_the_last_view(host_mode):
    gc.collect()
    before = neuron.memory_allocated()
    x = torch.empty(1000, dtype=torch.float32, device="neuron")
    assert neuron.memory_allocated() - before == 4000
    view = x[10:20].view(2, 5).t()
    detached = view.detach()
    del x, view
    gc.collect()
    assert neuron.memory_allocated() - before == 4000  # a view keeps its base's storage alive
    del detached
    gc.collect()
    assert neuron.memory_allocated() == before


def test_peak_and_its_reset(host_mode):
    neuron.reset_peak_memory_stats()
    base = neuron.memory_allocated()
    x = torch.empty(256, 256, device="neuron")
    del x
    gc.collect()
    assert neuron.max_memory_allocated() - base >= 256 * 256 * 4
    neuron.reset_peak_memory_stats()
    assert neuron.max_memory_allocated() == neuron.memory_allocated()


def test_data_lives_at_the_block_address(host_mode):
    x = torch.arange(8, dtype=torch.int32, device="neuron")
    block = storage.block_of(x)
    assert x.data_ptr() == block.data.ctypes.data
    assert block.data.view("int32").tolist() == list(range(8))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_keeps_every_dtype_bit_exact(host_mode, dtype):
    source = torch.randn(3, 5).to(dtype) if dtype.is_floating_point or dtype.is_complex else torch.arange(15)
    source = source.reshape(3, 5).to(dtype)
    on_device = source.to("neuron")
    assert on_device.dtype == dtype
    assert on_device.shape == source.shape
    back = on_device.cpu()
    assert (
        torch.equal(back.view(torch.uint8), source.view(torch.uint8))
        if dtype.itemsize == 1
        else torch.equal(back, source)
    )
    assert torch.equal(on_device.t().cpu(), source.t())


def test_training_steps_hold_memory_steady(eager_mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("neuron")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(8, 16, device="neuron"), torch.randn(8, 4, device="neuron")
    usage = []
    for _ in range(6):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        gc.collect()
        usage.append(neuron.memory_allocated())
    assert usage[2:] == [usage[2]] * 4, usage  # after the first steps create grads and momentum, no growth


def test_out_of_memory_is_torchs_error_naming_the_bytes(host_mode, monkeypatch):
    small = DeviceMemory(get_target("trn2"), capacity=1 << 20)
    monkeypatch.setattr(storage, "_memory", small)
    kept = torch.empty(128 * 1024, dtype=torch.float32, device="neuron")  # 512 KiB
    with pytest.raises(torch.OutOfMemoryError, match=r"tried to allocate 1048576 bytes .* with 524288 bytes"):
        torch.empty(256 * 1024, dtype=torch.float32, device="neuron")
    del kept
    gc.collect()
    assert small.allocated_bytes == 0
    torch.empty(256 * 1024, dtype=torch.float32, device="neuron")  # fits once the first tensor is gone


def test_on_device_tells_device_tensors_from_others(host_mode):
    on_device = torch.ones(3, device="neuron")
    assert storage.on_device(on_device)
    assert storage.on_device(on_device[1:])  # a view
    assert not storage.on_device(torch.ones(3))
    assert not storage.on_device(torch.ones(3, device="meta"))


def test_setting_follows_every_change_of_the_environment(monkeypatch):
    name = "NEURON_MLIR_TEST_SETTING"
    monkeypatch.delenv(name, raising=False)
    assert storage.setting(name, "default") == "default"
    assert storage.setting(name, "other") == "other"  # the default of this call, not the first one's
    monkeypatch.setenv(name, "1")
    assert storage.setting(name, "default") == "1"
    monkeypatch.setenv(name, "0")
    assert storage.setting(name, "default") == "0"
    monkeypatch.setenv(name, "0")  # the same value set again
    assert storage.setting(name, "default") == "0"
    monkeypatch.delenv(name)
    assert storage.setting(name, "default") == "default"
