"""Train a small MLP on the `neuron` device with device-agnostic PyTorch code: no neuron-mlir import, no
torch.compile. Every op runs on the simulated NeuronCore as a compiled single-op program.

    python examples/train_on_device.py [--steps 5]

The same code trains on CUDA or on the CPU: the device comes from `torch.accelerator`. Prints each step's loss
next to the same model trained on the CPU, then device memory, the ops that ran natively and on the host, and the
simulated device time the steps took.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from mlp import MLP


def train(device: torch.device, steps: int) -> list[float]:
    torch.manual_seed(0)
    model = MLP((64, 128, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    inputs, labels = torch.randn(32, 64), torch.randint(0, 10, (32,))
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs.to(device)), labels.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    steps = parser.parse_args().steps
    device = torch.accelerator.current_accelerator()
    if device is None:
        raise SystemExit("no accelerator: is neuron-mlir installed (its `torch.backends` entry point)?")
    module = torch.get_device_module(device)
    start, end = module.Event(enable_timing=True), module.Event(enable_timing=True)
    start.record()
    on_device = train(device, steps)
    end.record()
    on_cpu = train(torch.device("cpu"), steps)
    print(f"training on {device} ({module.get_device_name()}) and on the CPU, {steps} steps")
    for step, (ours, reference) in enumerate(zip(on_device, on_cpu, strict=True)):
        print(f"  step {step}: loss {ours:.6f} on {device.type}, {reference:.6f} on the CPU")
    print(f"device memory: {module.memory_allocated()} bytes held, peak {module.max_memory_allocated()}")
    stats = module.eager_stats()
    print(f"ops: {stats['native_calls']} compiled on the core, {stats['host_calls']} on the host")
    print(f"simulated device time of the steps: {start.elapsed_time(end):.3f} ms")


if __name__ == "__main__":
    main()
