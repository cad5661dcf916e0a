// The whole default pipeline as one pass, on the MLP's forward and backward graphs, checked by execution
// (the synchronised result runs on the simulator with its race checker).
// RUN: neuron-opt %S/Inputs/mlp_forward.torch.mlir -p neuron-pipeline --check-semantics 2>&1 | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_backward.torch.mlir -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/mlp_forward.torch.mlir -p 'neuron-pipeline{until=tile}' | filecheck %s --check-prefix=UNTIL
// RUN: neuron-opt %S/Inputs/mlp_forward.torch.mlir -p 'neuron-pipeline{until=bogus}' --verify-diagnostics | filecheck %s --check-prefix=BAD

// CHECK:      check-semantics: 7 inputs, all outputs match
// CHECK-LABEL: func.func @main
// CHECK:      neuron.alloc {address = {{[0-9]+}} : i64}
// CHECK:      neuron.nc_matmul tensor {{.*}} id = {{[0-9]+}} : i64, waits = array<i64:
// Source locations survive every pass: print them to see the user's line on each instruction.
// RUN: neuron-opt %S/Inputs/mlp_forward.torch.mlir -p neuron-pipeline --print-debuginfo | filecheck %s --check-prefix=LOC
// LOC:        neuron.nc_matmul {{.*}} loc("model.layers.0"("examples/mlp.py":{{[0-9]+}}:0))
// LOC:        neuron.activation {{.*}} loc("examples/mlp.py":{{[0-9]+}}:0)

// SEMANTICS:  check-semantics: {{[0-9]+}} inputs, all outputs match

// UNTIL-LABEL: func.func @main
// UNTIL:      tile.matmul
// UNTIL-NOT:  neuron.alloc

// The torch stage alone, on GPT-2's forward: same results, fewer ops, module paths kept.
// RUN: neuron-opt %S/Inputs/gpt2_forward.torch.mlir -p 'neuron-pipeline{until=torch}' --check-semantics --print-debuginfo 2>&1 | filecheck %s --check-prefix=TORCH
// TORCH:      check-semantics: {{[0-9]+}} inputs, all outputs match
// TORCH-NOT:  torch.aten.clone
// TORCH:      loc("model.transformer.h.1.mlp.c_fc"(

// BAD:        unknown stage 'bogus' (stages: torch, tile, neuron, allocated, synchronised)
