"""Registration: `import torch` alone makes the `neuron` device, torch.accelerator and torch.neuron work."""

import subprocess
import sys

import pytest
import torch

# torch.neuron, which the device registers when torch is imported (no static attribute of torch)
neuron = torch.get_device_module("neuron")


def test_import_torch_alone_registers_the_device():
    script = (
        "import sys, torch\n"
        "cheap = 'neuron_mlir.frontend.device' in sys.modules and 'xdsl' not in sys.modules"
        " and 'neuron_mlir.frontend.device.eager' not in sys.modules\n"
        "x = torch.empty(3, device='neuron')\n"
        "print(cheap, x.device, torch.accelerator.is_available(), torch.accelerator.current_accelerator(),"
        " torch.accelerator.device_count(), torch.get_device_module('neuron') is sys.modules['torch.neuron'])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    # registering imports no compiler module, nor the eager layer (they load with the first op that computes)
    assert result.stdout.split() == ["True", "neuron:0", "True", "neuron", "1", "True"]


def test_autoload_can_be_turned_off():
    script = "import torch\nprint(hasattr(torch, 'neuron'), torch._C._get_privateuse1_backend_name())\n"
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PATH": ""}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    assert result.stdout.split() == ["False", "privateuseone"]


def test_device_module_api():
    assert neuron.is_available()
    assert neuron.device_count() == 1
    assert neuron.current_device() == 0
    neuron.set_device(0)
    neuron.set_device("neuron:0")
    with pytest.raises(ValueError, match="one NeuronCore per process"):
        neuron.set_device(1)
    neuron.synchronize()
    assert isinstance(neuron.current_stream(), neuron.Stream)
    assert set(neuron.memory_stats()) >= {"allocated_bytes.all.current", "allocated_bytes.all.peak"}
    neuron.empty_cache()
    free, total = neuron.mem_get_info()
    assert 0 < free <= total
    assert sys.modules["torch.neuron"] is neuron


def test_tensor_and_module_methods(host_mode):
    x = torch.arange(4.0)
    # methods torch generates for a renamed PrivateUse1 backend
    assert x.neuron().device == torch.device("neuron", 0)  # type: ignore[attr-defined]
    assert x.to("neuron").is_neuron  # type: ignore[attr-defined]
    module = torch.nn.Linear(3, 2).to("neuron")
    assert module.weight.device.type == "neuron"
    assert module.bias.device.type == "neuron"
    assert torch.device("neuron").type == "neuron"


def test_rng_is_seeded_by_torch_manual_seed(host_mode):
    torch.manual_seed(7)
    first = torch.randn(5, device="neuron").cpu()
    torch.manual_seed(7)
    assert torch.equal(torch.randn(5, device="neuron").cpu(), first)
    state = neuron.get_rng_state()
    a = torch.rand(3, device="neuron").cpu()
    neuron.set_rng_state(state)
    assert torch.equal(torch.rand(3, device="neuron").cpu(), a)
    # drawing on the device leaves the CPU generator alone, as on CUDA
    torch.manual_seed(3)
    expected = torch.randn(2)
    torch.manual_seed(3)
    torch.randn(4, device="neuron")
    assert torch.equal(torch.randn(2), expected)


RANDOM_OPS = {
    "rand": lambda: torch.rand(4, 5, device="neuron"),
    "randn": lambda: torch.randn(4, 5, device="neuron"),
    "randint": lambda: torch.randint(0, 10, (4, 5), device="neuron"),
    "randperm": lambda: torch.randperm(9, device="neuron"),
    "dropout": lambda: torch.nn.functional.dropout(torch.ones(4, 5, device="neuron"), 0.5),
    "bernoulli": lambda: torch.bernoulli(torch.full((4, 5), 0.3, device="neuron")),
    "normal_": lambda: torch.empty(4, 5, device="neuron").normal_(),
    "uniform_": lambda: torch.empty(4, 5, device="neuron").uniform_(),
}


@pytest.mark.parametrize("name", RANDOM_OPS)
def test_random_ops_follow_the_device_generator(eager_mode, name):
    draw = RANDOM_OPS[name]
    torch.manual_seed(11)
    first = draw().cpu()
    torch.manual_seed(11)
    assert torch.equal(draw().cpu(), first)
    neuron.manual_seed(11)
    assert torch.equal(draw().cpu(), first)
    neuron.manual_seed(12)
    assert not torch.equal(draw().cpu(), first)
    state = neuron.get_rng_state()
    drawn = draw().cpu()
    neuron.set_rng_state(state)
    assert torch.equal(draw().cpu(), drawn)
    # the device's draws, compiled ones included (dropout), leave the CPU generator alone
    torch.manual_seed(3)
    expected = torch.randn(2)
    torch.manual_seed(3)
    draw()
    assert torch.equal(torch.randn(2), expected)


def test_autocast_accepts_the_device():
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("neuron")


def test_events_measure_simulated_time(fresh_eager, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    x = torch.ones(128, 64, device="neuron")
    start, end = neuron.Event(enable_timing=True), neuron.Event(enable_timing=True)
    start.record()
    y = x * 2
    end.record()
    assert neuron.eager_stats()["native_ops"]
    assert start.elapsed_time(end) > 0
    del y
