// RUN: neuron-opt %s -p torch-recognize-rms-norm --split-input-file | filecheck %s
// The recognised forward, and its fused lowering run on the simulator, compute what the chain computes.
// RUN: neuron-opt %S/Inputs/rms_norm_forward.torch.mlir -p torch-recognize-rms-norm --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/rms_norm_forward.torch.mlir -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %s -p torch-recognize-rms-norm,torch-fuse-rms-norm-neighbours,convert-torch-to-tile --split-input-file | filecheck %s --check-prefix=TILE

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// Llama's RMSNorm as AOTAutograd hands it over in training: the upcast and rstd are saved for the backward.
// The chain becomes one fused op reading the bf16 rows; its first result is the cast-back one, and the upcast
// follows it for its other reader.
// CHECK-LABEL: func.func @llama_rms_norm
// CHECK-NEXT:    %[[Y:.*]], %[[R:.*]] = torch.aten._fused_rms_norm %x, none {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x1xf32>)
// CHECK-NEXT:    %[[UP:.*]] = torch.aten._to_copy %x {dtype = f32}
// CHECK-NEXT:    %[[OUT:.*]] = torch.aten.mul.Tensor %w, %[[Y]]
// CHECK-NEXT:    func.return %[[OUT]], %[[UP]], %[[R]], %[[Y]]
// One pass over the rows: the fp32 upcast, the rows' sums of squares, rstd, the rounded rows, their product with
// the weight and rstd are all stored from the same row tile (4 rows: one tile, no loop); nothing else is left.
// TILE-LABEL: func.func @llama_rms_norm
// TILE-NOT:     scf.for
// TILE:         %[[X:.*]] = tile.load %x
// TILE-NEXT:    %[[UP:.*]] = tile.copy %[[X]] : (!tile.tile<4x8xbf16, sbuf>) -> !tile.tile<4x8xf32, sbuf>
// TILE-NEXT:    tile.store %[[UP]]
// TILE-NEXT:    %[[SQ:.*]] = tile.unary %[[X]] {fn = "square"}
// TILE-NEXT:    %[[SUM:.*]] = tile.reduce %[[SQ]] {op = "add"}
// TILE-NEXT:    %[[R:.*]] = tile.unary %[[SUM]] {fn = "rsqrt", scale = 1.250000e-01 : f64, bias_value = 1.000000e-05 : f64}
// TILE-NEXT:    %[[Y:.*]] = tile.binary_scalar %[[X]] column %[[R]] {op = "multiply"} : (!tile.tile<4x8xbf16, sbuf>, !tile.tile<4x1xf32, sbuf>) -> !tile.tile<4x8xbf16, sbuf>
// TILE-NEXT:    tile.store %[[Y]]
// TILE-NEXT:    %[[OUT:.*]] = tile.binary %[[Y]], %{{.*}} {op = "multiply"}
// TILE-NEXT:    tile.store %[[OUT]]
// TILE-NEXT:    tile.store %[[R]]
// TILE-NOT:     scf.for
func.func @llama_rms_norm(%x: tensor<4x8xbf16>, %w: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xbf16>) {
  %up = torch.aten._to_copy %x {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %sq = torch.aten.pow.Tensor_Scalar %up {exponent = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mean = torch.aten.mean.dim %sq {dim = array<i64: -1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %shifted = torch.aten.add.Scalar %mean {other = 1.000000e-05 : f64} : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %rstd = torch.aten.rsqrt %shifted : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %norm = torch.aten.mul.Tensor %up, %rstd : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %down = torch.aten._to_copy %norm {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %out = torch.aten.mul.Tensor %w, %down : (tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  func.return %out, %up, %rstd, %down : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xbf16>
}

// -----

// fp32 throughout, the square as a product, rsqrt first in the multiply: the fused op reads x itself.
// CHECK-LABEL: func.func @fp32_rms_norm
// CHECK-NEXT:    %[[Y:.*]], %{{.*}} = torch.aten._fused_rms_norm %x, none {normalized_shape = array<i64: 16>, eps = 1.000000e-06 : f64} : (tensor<2x3x16xf32>) -> (tensor<2x3x16xf32>, tensor<2x3x1xf32>)
// CHECK-NEXT:    func.return %[[Y]]
// TILE-LABEL: func.func @fp32_rms_norm
// TILE-NOT:     tile.copy
// TILE:         tile.unary %{{.*}} {fn = "square"}
func.func @fp32_rms_norm(%x: tensor<2x3x16xf32>) -> tensor<2x3x16xf32> {
  %sq = torch.aten.mul.Tensor %x, %x : (tensor<2x3x16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  %mean = torch.aten.mean.dim %sq {dim = array<i64: 2>, keepdim = true} : (tensor<2x3x16xf32>) -> tensor<2x3x1xf32>
  %shifted = torch.aten.add.Scalar %mean {other = 1.000000e-06 : f64} : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %rstd = torch.aten.rsqrt %shifted : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %norm = torch.aten.mul.Tensor %rstd, %x : (tensor<2x3x1xf32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  func.return %norm : tensor<2x3x16xf32>
}

// -----

// A mean over another dim, or a different power, is not an RMS norm: left alone.
// CHECK-LABEL: func.func @not_rms_norm
// CHECK-NOT:     torch.aten._fused_rms_norm
// CHECK:         torch.aten.rsqrt
// CHECK:         torch.aten.rsqrt
func.func @not_rms_norm(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %sq = torch.aten.pow.Tensor_Scalar %x {exponent = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mean = torch.aten.mean.dim %sq {dim = array<i64: 0>, keepdim = true} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %shifted = torch.aten.add.Scalar %mean {other = 1.000000e-05 : f64} : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %rstd = torch.aten.rsqrt %shifted : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %norm = torch.aten.mul.Tensor %x, %rstd : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %cube = torch.aten.pow.Tensor_Scalar %x {exponent = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mean2 = torch.aten.mean.dim %cube {dim = array<i64: -1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %shifted2 = torch.aten.add.Scalar %mean2 {other = 1.000000e-05 : f64} : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %rstd2 = torch.aten.rsqrt %shifted2 : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %norm2 = torch.aten.mul.Tensor %x, %rstd2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %norm, %norm2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// The backward chain autograd writes for it (Inputs/rms_norm_backward.torch.mlir, 130 rows): one fused op, placed
// before the weight gradient's product so that its pass can accumulate that too; grad_out * weight becomes its
// grad_out and weight operands.
// RUN: neuron-opt %S/Inputs/rms_norm_backward.torch.mlir -p torch-recognize-rms-norm | filecheck %s --check-prefix=BACKWARD
// RUN: neuron-opt %S/Inputs/rms_norm_backward.torch.mlir -p torch-recognize-rms-norm --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/rms_norm_backward.torch.mlir -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/rms_norm_backward.torch.mlir -p torch-recognize-rms-norm,torch-fuse-rms-norm-neighbours,convert-torch-to-tile | filecheck %s --check-prefix=BACKWARD-TILE
// BACKWARD-LABEL: func.func @main
// BACKWARD-NEXT:    %[[DX:.*]], %{{.*}} = torch.aten._fused_rms_norm_backward %t, %x, %rstd, %w {normalized_shape = array<i64: 64>, output_mask = array<i1: true, false>} : (tensor<130x64xbf16>, tensor<130x64xf32>, tensor<130x1xf32>, tensor<64xbf16>) -> (tensor<130x64xf32>, none)
// BACKWARD-NEXT:    %[[TN:.*]] = torch.aten.mul.Tensor %t, %normed
// BACKWARD-NEXT:    %[[DW:.*]] = torch.aten.sum.dim_IntList %[[TN]]
// BACKWARD-NEXT:    %[[DWV:.*]] = torch.aten.view %[[DW]]
// BACKWARD-NEXT:    %[[OUT:.*]] = torch.aten._to_copy %[[DX]] {dtype = bf16}
// BACKWARD-NEXT:    func.return %[[OUT]], %[[DWV]]
// One pass over the row tiles (a loop over the full 128-row tile, then the 2-row rest) carrying the weight
// gradient's PSUM accumulator: grad_out, x, rstd and the saved rows loaded once, the bf16 product summed by a
// ones-column matmul, grad_input stored rounded to bf16 only.
// BACKWARD-TILE-LABEL: func.func @main
// BACKWARD-TILE:         %[[ACC:.*]] = tile.fill {value = 0.000000e+00 : f64} : !tile.tile<1x64xf32, psum>
// BACKWARD-TILE:         tile.load %x
// BACKWARD-TILE:         tile.load %t
// BACKWARD-TILE:         tile.load %rstd
// BACKWARD-TILE:         tile.load %normed
// BACKWARD-TILE:         tile.matmul
// BACKWARD-TILE:         tile.reduce
// BACKWARD-TILE:         tile.store %{{.*}} : !tile.tile<128x64xbf16, sbuf>
// BACKWARD-TILE:         tile.load %x{{.*}} -> !tile.tile<2x64xf32, sbuf>
// BACKWARD-TILE:         tile.matmul
// BACKWARD-TILE:         tile.copy %{{.*}} : (!tile.tile<1x64xf32, psum>) -> !tile.tile<1x64xbf16, sbuf>
// BACKWARD-TILE-NOT:     scf.for
// BACKWARD-TILE-NOT:     tile.matmul
// BACKWARD-TILE:         func.return
