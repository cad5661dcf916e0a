// RUN: neuron-opt %s --split-input-file -p torch-fuse-rms-norm-neighbours | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s --check-prefix=UNMARKED

// An RMS norm's neighbours that its row pass writes from the rows it holds are marked: the fp32 upcast of its
// input and the product with a weight vector. The conversion follows only the marks (test/lit/lowering/
// torch-recognize-rms-norm.mlir shows the fused nest); unmarked, each neighbour keeps its own loop nest.
// CHECK-LABEL: func.func @forward_neighbours
// CHECK:         torch.aten._fused_rms_norm
// CHECK-NEXT:    torch.aten._to_copy %x {{.*}}neuron.fuse = "rms_norm_rows"}
// CHECK-NEXT:    torch.aten.mul.Tensor %w, %down {{.*}}neuron.fuse = "rms_norm_rows"}
// UNMARKED-LABEL: func.func @forward_neighbours
// UNMARKED:       tile.load %down
func.func @forward_neighbours(%x: tensor<4x8xbf16>, %w: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x1xf32>) {
  %down, %rstd = torch.aten._fused_rms_norm %x, none {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x1xf32>)
  %up = torch.aten._to_copy %x {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %out = torch.aten.mul.Tensor %w, %down : (tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  func.return %out, %up, %rstd : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

// The backward's neighbours: the bf16 cast of grad_input and the weight gradient's column sum.
// CHECK-LABEL: func.func @backward_neighbours
// CHECK:         torch.aten.mul.Tensor %t, %normed :
// CHECK-NEXT:    torch.aten.sum.dim_IntList %tn {{.*}}neuron.fuse = "rms_norm_rows"}
// CHECK-NEXT:    torch.aten._to_copy %dx32 {{.*}}neuron.fuse = "rms_norm_rows"}
func.func @backward_neighbours(%w: tensor<64xbf16>, %x: tensor<130x64xf32>, %rstd: tensor<130x1xf32>, %normed: tensor<130x64xbf16>, %t: tensor<130x64xbf16>) -> (tensor<130x64xbf16>, tensor<1x64xbf16>) {
  %dx32, %none = torch.aten._fused_rms_norm_backward %t, %x, %rstd, %w {normalized_shape = array<i64: 64>, output_mask = array<i1: true, false>} : (tensor<130x64xbf16>, tensor<130x64xf32>, tensor<130x1xf32>, tensor<64xbf16>) -> (tensor<130x64xf32>, none)
  %tn = torch.aten.mul.Tensor %t, %normed : (tensor<130x64xbf16>, tensor<130x64xbf16>) -> tensor<130x64xbf16>
  %dw = torch.aten.sum.dim_IntList %tn {dim = array<i64: 0>, keepdim = true} : (tensor<130x64xbf16>) -> tensor<1x64xbf16>
  %dx = torch.aten._to_copy %dx32 {dtype = bf16} : (tensor<130x64xf32>) -> tensor<130x64xbf16>
  func.return %dx, %dw : tensor<130x64xbf16>, tensor<1x64xbf16>
}

// -----

// Not neighbours: an upcast that comes before the norm, a product with a full tensor, a sum over the row.
// A stale mark is dropped.
// CHECK-LABEL: func.func @not_neighbours
// CHECK-NOT:     neuron.fuse
// CHECK:         func.return
func.func @not_neighbours(%x: tensor<4x8xbf16>, %y: tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x1xbf16>) {
  %up = torch.aten._to_copy %x {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %down, %rstd = torch.aten._fused_rms_norm %x, none {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x1xf32>)
  %out = torch.aten.mul.Tensor %y, %down {neuron.fuse = "rms_norm_rows"} : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %s = torch.aten.sum.dim_IntList %down {dim = array<i64: 1>, keepdim = true} : (tensor<4x8xbf16>) -> tensor<4x1xbf16>
  func.return %up, %out, %s : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x1xbf16>
}
