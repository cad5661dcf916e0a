// --check-semantics runs the reference semantics only on IR the passes took: ATen's own kernel crashes the
// process on this op (batch norm in eval mode without running statistics), the lowering refuses it with a rule.
// RUN: not neuron-opt %s -p neuron-pipeline --check-semantics 2>&1 | filecheck %s
func.func @batch_norm_without_statistics_in_eval_mode(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0, %1, %2 = torch.aten._native_batch_norm_legit.no_stats %x, none, none {training = false, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  func.return %0 : tensor<4x3xf32>
}
// CHECK: check-semantics-refused.mlir:5:3: error: torch.aten._native_batch_norm_legit.no_stats: without running statistics batch norm normalizes with batch statistics: training must be true
// CHECK-NOT: Traceback
