// RUN: neuron-opt --version | filecheck %s
// CHECK: neuron-opt {{[0-9]+\.[0-9]+\.[0-9]+}} (xdsl 0.75.0)
