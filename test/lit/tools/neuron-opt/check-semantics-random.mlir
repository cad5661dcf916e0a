// Random ops get a seed argument from the passes: --check-semantics says their outputs cannot be compared,
// rather than run the output without it (an input found by the fuzzer).
// RUN: not neuron-opt %s -p convert-torch-to-tile --check-semantics 2>&1 | filecheck %s
func.func @random_ops_stay() -> tensor<4xf32> {
  %o = torch.aten.full {size = array<i64: 4>, fill_value = 1 : i64, dtype = f32} : () -> tensor<4xf32>
  %r = torch.aten.bernoulli.p %o {p = 5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// CHECK: check-semantics-random.mlir:4:1: error: check-semantics: @random_ops_stay takes 1 arguments after the passes, 0 before (a seed for its random ops): the outputs cannot be compared
// CHECK-NOT: Traceback
