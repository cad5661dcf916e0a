// ATen's distance kernels take p in the inputs' element type: a p of 1e127 is inf in float32, so cdist and pdist
// are the max norm there, and a p of 1e-50 is 0, a count of differing elements (an input found by the fuzzer: the
// general power path made x^(1/p) of it, 1 everywhere).
// RUN: neuron-opt %s --split-input-file -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s
func.func @cdist_p_beyond_float32(%a: tensor<5x3xf32>, %b: tensor<4x3xf32>) -> tensor<5x4xf32> {
  %0 = torch.aten._cdist_forward %a, %b {p = 1.000000e+127 : f64} : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
  func.return %0 : tensor<5x4xf32>
}
// CHECK: check-semantics: 2 inputs, all outputs match

// -----

func.func @cdist_p_below_float32(%a: tensor<5x3xf32>, %b: tensor<4x3xf32>) -> tensor<5x4xf32> {
  %0 = torch.aten._cdist_forward %a, %b {p = 1.000000e-50 : f64} : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
  func.return %0 : tensor<5x4xf32>
}
// CHECK: check-semantics: 2 inputs, all outputs match

// -----

func.func @pdist_p_beyond_float32(%x: tensor<6x3xf32>) -> tensor<15xf32> {
  %0 = torch.aten._pdist_forward %x {p = 1.000000e+127 : f64} : (tensor<6x3xf32>) -> tensor<15xf32>
  func.return %0 : tensor<15xf32>
}
// CHECK: check-semantics: 1 inputs, all outputs match
// CHECK-NOT: differ
