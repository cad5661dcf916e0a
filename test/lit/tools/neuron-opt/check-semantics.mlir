// --check-semantics runs the input and the output on the same random inputs and compares them.
// RUN: neuron-opt %s -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s
// CHECK: check-semantics: 2 inputs, all outputs match
func.func @main(%a: tensor<3x130xf32>, %b: tensor<130xf32>) -> tensor<3x130xf32> {
  %s = torch.aten.add.Tensor %a, %b {alpha = 2 : i64} : (tensor<3x130xf32>, tensor<130xf32>) -> tensor<3x130xf32>
  %r = torch.aten.relu %s : (tensor<3x130xf32>) -> tensor<3x130xf32>
  func.return %r : tensor<3x130xf32>
}
