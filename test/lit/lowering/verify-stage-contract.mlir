// Each saved stage of the MLP meets its own contract (the invalid cases are in verify-stage-contract-invalid.mlir).
// RUN: neuron-opt %S/Inputs/mlp_forward.tile.mlir -p 'verify-stage-contract{stage=tile}' | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_forward.neuron.mlir -p 'verify-stage-contract{stage=neuron}' | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_forward.allocated.mlir -p 'verify-stage-contract{stage=allocated}' | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_backward.synchronised.mlir -p 'verify-stage-contract{stage=synchronised}' | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_forward.neuron.mlir -p 'verify-stage-contract{stage=allocated}' --verify-diagnostics | filecheck %s --check-prefix=EARLY

// CHECK-LABEL: func.func @main
// EARLY: neuron.alloc: buffer has no address after the 'allocated' stage
