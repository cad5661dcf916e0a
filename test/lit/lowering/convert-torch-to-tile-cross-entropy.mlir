// RUN: neuron-opt %s --split-input-file -p torch-fuse-cross-entropy-backward,convert-torch-to-tile | filecheck %s

// nll_loss_backward (lowering/convert_torch_to_tile/loss.py): marked under the log-softmax backward of the same
// log-probabilities (cross-entropy's backward) no one-hot tensor is built; alone, a zero fill and one scatter.
// Values are checked end to end in test/e2e/test_cross_entropy.py.

func.func @cross_entropy_backward(%t: tensor<200xi64>, %y: tensor<200x3000xbf16>, %total: tensor<bf16>, %g: tensor<bf16>) -> tensor<200x3000xbf16> {
  %0 = torch.aten.nll_loss_backward %g, %y, %t, none, %total {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<bf16>, tensor<200x3000xbf16>, tensor<200xi64>, tensor<bf16>) -> tensor<200x3000xbf16>
  %1 = torch.aten._log_softmax_backward_data %0, %y {dim = 1 : i64, input_dtype = bf16} : (tensor<200x3000xbf16>, tensor<200x3000xbf16>) -> tensor<200x3000xbf16>
  func.return %1 : tensor<200x3000xbf16>
}
// The per-row coefficient c = -g / total (0 for ignored rows) as a [200, 1] column, then one pass over y that
// writes -c * exp(y) in row chunks, then the target element of each row gathered and overwritten.
// CHECK-LABEL: func.func @cross_entropy_backward
// CHECK-NOT:   tile.fill {value = 0.000000e+00
// CHECK:       tile.unary %{{.*}} {fn = "reciprocal"}
// CHECK:       %[[Y:.*]] = tile.load %y[%c0, %c0] {{.*}} -> !tile.tile<128x3000xbf16, sbuf>
// CHECK-NEXT:  %[[E:.*]] = tile.unary %[[Y]] {fn = "exp"} {{.*}} -> !tile.tile<128x3000xf32, sbuf>
// CHECK-NEXT:  %[[R:.*]] = tile.binary_scalar %[[E]] column %{{.*}} {op = "multiply"} {{.*}} -> !tile.tile<128x3000xbf16, sbuf>
// CHECK-NEXT:  tile.store %[[R]]
// CHECK:       tile.gather
// CHECK:       tile.scatter
// CHECK-NOT:   tile.fill {value = 0.000000e+00
// CHECK:       func.return

// -----

func.func @nll_loss_backward_alone(%t: tensor<200xi64>, %y: tensor<200x3000xf32>, %total: tensor<f32>, %g: tensor<f32>) -> tensor<200x3000xf32> {
  %0 = torch.aten.nll_loss_backward %g, %y, %t, none, %total {reduction = 2 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<200x3000xf32>, tensor<200xi64>, tensor<f32>) -> tensor<200x3000xf32>
  func.return %0 : tensor<200x3000xf32>
}
// Sum reduction: no division by the total weight; a zero fill, then one value per row scattered.
// CHECK-LABEL: func.func @nll_loss_backward_alone
// CHECK-NOT:   fn = "reciprocal"
// CHECK:       tile.fill {value = 0.000000e+00 : f64}
// CHECK:       tile.scatter
// CHECK-NOT:   tile.load %y
// CHECK:       func.return
