"""`python -m neuron_mlir.frontend.device.native`: build the device's native hooks now (`make venv` does)."""

from neuron_mlir.frontend.device.native import build

print(build(verbose=True))
