// neuron-run executes neuron-level IR directly (the program it denotes), with the race checker once synchronised.
// RUN: neuron-run %S/../../lowering/Inputs/mlp_forward.synchronised.mlir --seed 3 | filecheck %s
// RUN: neuron-run %S/../../lowering/Inputs/mlp_forward.neuron.mlir | filecheck %s --check-prefix=UNALLOCATED
// RUN: not neuron-run %S/../../lowering/Inputs/mlp_forward.torch.mlir 2>&1 | filecheck %s --check-prefix=TORCH

// CHECK:      out0: shape [37, 10] dtype f32
// CHECK:      simulated trn2 (NeuronCore-v3)
// CHECK:      matmul FLOPs
// CHECK:      examples/mlp.py:{{[0-9]+}} (model.layers.0)

// UNALLOCATED: out0: shape [37, 10] dtype f32

// TORCH: holds torch-level IR; lower it first: neuron-opt {{.*}}mlp_forward.torch.mlir -p neuron-pipeline
