"""From allocated, synchronised neuron IR to a bundle file the runtime executes."""
