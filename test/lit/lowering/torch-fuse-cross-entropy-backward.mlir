// RUN: neuron-opt %s --split-input-file -p torch-fuse-cross-entropy-backward | filecheck %s
// RUN: neuron-opt %s --split-input-file -p torch-fuse-cross-entropy-backward,convert-torch-to-tile | filecheck %s --check-prefix=TILE

// Cross-entropy's backward: nll_loss_backward read only by the log-softmax backward of its own log-probabilities,
// along the class dim. The mark is the decision; convert-torch-to-tile computes the pair as one pass.
// CHECK-LABEL: func.func @cross_entropy_backward
// CHECK:         torch.aten.nll_loss_backward {{.*}}neuron.fuse = "log_softmax_backward"}
// CHECK:         torch.aten._log_softmax_backward_data
// TILE-LABEL:   func.func @cross_entropy_backward
// TILE-NOT:       tile.fill {value = 0.000000e+00
// TILE:           func.return
func.func @cross_entropy_backward(%t: tensor<16xi64>, %y: tensor<16x40xf32>, %total: tensor<f32>, %g: tensor<f32>) -> tensor<16x40xf32> {
  %0 = torch.aten.nll_loss_backward %g, %y, %t, none, %total {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x40xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x40xf32>
  %1 = torch.aten._log_softmax_backward_data %0, %y {dim = -1 : i64, input_dtype = f32} : (tensor<16x40xf32>, tensor<16x40xf32>) -> tensor<16x40xf32>
  func.return %1 : tensor<16x40xf32>
}

// -----

// The one-hot gradient is also returned: it must exist, so nothing is marked.
// CHECK-LABEL: func.func @gradient_also_returned
// CHECK-NOT:     neuron.fuse
// CHECK:         func.return
func.func @gradient_also_returned(%t: tensor<16xi64>, %y: tensor<16x40xf32>, %total: tensor<f32>, %g: tensor<f32>) -> (tensor<16x40xf32>, tensor<16x40xf32>) {
  %0 = torch.aten.nll_loss_backward %g, %y, %t, none, %total {reduction = 2 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x40xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x40xf32>
  %1 = torch.aten._log_softmax_backward_data %0, %y {dim = 1 : i64, input_dtype = f32} : (tensor<16x40xf32>, tensor<16x40xf32>) -> tensor<16x40xf32>
  func.return %1, %0 : tensor<16x40xf32>, tensor<16x40xf32>
}

// -----

// The log-softmax backward of other log-probabilities is not cross-entropy's backward: not marked.
// CHECK-LABEL: func.func @other_log_probabilities
// CHECK-NOT:     neuron.fuse
// CHECK:         func.return
func.func @other_log_probabilities(%t: tensor<16xi64>, %y: tensor<16x40xf32>, %z: tensor<16x40xf32>, %total: tensor<f32>, %g: tensor<f32>) -> tensor<16x40xf32> {
  %0 = torch.aten.nll_loss_backward %g, %y, %t, none, %total {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x40xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x40xf32>
  %1 = torch.aten._log_softmax_backward_data %0, %z {dim = 1 : i64, input_dtype = f32} : (tensor<16x40xf32>, tensor<16x40xf32>) -> tensor<16x40xf32>
  func.return %1 : tensor<16x40xf32>
}

// -----

// A stale mark (the IR changed: the log-softmax backward runs along the rows) is dropped, and the conversion
// lowers both ops on their own.
// CHECK-LABEL: func.func @stale_mark_dropped
// CHECK-NOT:     neuron.fuse
// CHECK:         func.return
// TILE-LABEL:   func.func @stale_mark_dropped
// TILE:           tile.fill {value = 0.000000e+00
func.func @stale_mark_dropped(%t: tensor<16xi64>, %y: tensor<16x40xf32>, %total: tensor<f32>, %g: tensor<f32>) -> tensor<16x40xf32> {
  %0 = torch.aten.nll_loss_backward %g, %y, %t, none, %total {reduction = 1 : i64, ignore_index = -100 : i64, neuron.fuse = "log_softmax_backward"} : (tensor<f32>, tensor<16x40xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x40xf32>
  %1 = torch.aten._log_softmax_backward_data %0, %y {dim = 0 : i64, input_dtype = f32} : (tensor<16x40xf32>, tensor<16x40xf32>) -> tensor<16x40xf32>
  func.return %1 : tensor<16x40xf32>
}
