"""The `neuron` device: a native PyTorch device whose tensors live in the simulated NeuronCore's memory.

registration  PrivateUse1 renamed `neuron`, hooks, device guard, `torch.neuron`; the autoload entry point
storage       device storages over blocks of the simulated HBM (`runtime/device_memory.py`), host aliases
dispatch      the PrivateUse1 kernels and fallback: memory, copies, views, then `eager`
eager         each other op as a compiled single-op program on the simulator, or on the host
torch_neuron  the `torch.neuron` module; random (the device generator), streams (streams, events, simulated time,
              copies between device tensors as DMAs)
sources       the user's source line of each eager op; simulated time per op and line for `neuron_mlir.report()`
"""
