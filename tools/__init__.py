"""Command-line entry points: neuron-opt, neuron-run, and the torch dialect generator."""
