"""PyTorch's distributed stack on `neuron` tensors: the `neuron` process-group backend (`process_group.py`)."""
