"""The IR: the torch, tile and neuron dialects, their verifiers and their reference semantics."""
