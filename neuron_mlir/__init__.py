"""neuron-mlir: a PyTorch compiler for AWS Trainium NeuronCores that runs without the hardware.

    model = torch.compile(model, backend="neuron-mlir")

The backend is found through the `torch_dynamo_backends` entry point, so no import is needed. This module is
the public Python API; the compiler itself lives in the subpackages (ir, frontend, lowering, backend_trn,
runtime, tools), see README.md.
"""

__version__ = "0.1.0"
