// --print-between-passes shows the IR after each pass inside neuron-pipeline, in the pipeline's order, as if the
// passes had been listed one by one (the last pass's IR is the output itself).
// RUN: neuron-opt %s -p 'neuron-pipeline{until=neuron}' --print-between-passes | filecheck %s
// RUN: neuron-opt %s -p 'neuron-pipeline{until=tile},cse' --print-between-passes | filecheck %s --check-prefix=THEN
// RUN: neuron-opt %s -p 'neuron-pipeline{until=torch}' --time-passes | filecheck %s --check-prefix=TIME
func.func @main(%a: tensor<3x130xf32>) -> tensor<3x130xf32> {
  %r = torch.aten.relu %a : (tensor<3x130xf32>) -> tensor<3x130xf32>
  func.return %r : tensor<3x130xf32>
}
// CHECK:      IR after torch-canonicalize:
// CHECK-NEXT: builtin.module {
// CHECK:      torch.aten.relu
// CHECK:      IR after torch-fold-constants:
// CHECK:      IR after torch-recognize-activations:
// CHECK:      IR after cse:
// CHECK:      IR after dce:
// CHECK:      IR after convert-torch-to-tile:
// CHECK-NOT:  torch.aten
// CHECK:      IR after tile-fuse-loops:
// CHECK:      IR after tile-unroll-streaming-loops:
// CHECK:      IR after convert-tile-to-neuron:
// CHECK:      IR after neuron-fuse-instructions:
// CHECK:      IR after neuron-balance-engines:
// CHECK:      IR after neuron-unroll-loops:
// CHECK-NOT:  IR after
// CHECK:      neuron.

// THEN: IR after dce:
// THEN: IR after convert-torch-to-tile:
// THEN: IR after tile-fuse-loops:
// THEN: IR after tile-unroll-streaming-loops:
// THEN-NOT: IR after

// TIME: Pass torch-canonicalize took {{.*}} seconds
// TIME: Pass dce took {{.*}} seconds
// TIME: Pass neuron-pipeline took {{.*}} seconds
