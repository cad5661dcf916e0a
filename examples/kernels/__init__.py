"""NKI kernels of the documentation's tutorials, written against neuron_mlir.nki."""
