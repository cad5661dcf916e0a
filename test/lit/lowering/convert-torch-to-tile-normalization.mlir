// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Branches of the normalization lowerings (lowering/convert_torch_to_tile/normalization.py): statistics over
// trailing dims (layer norm) or all but the channel (batch norm), training with the running-statistics update,
// and eval mode. Gradients are checked end to end in test/e2e/test_normalization.py.

func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>) {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %w, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  func.return %0, %1, %2 : tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
}
// Layer norm of rows that fit on chip: one pass over x. The weight and bias are loaded once as
// partition-broadcast tiles; per row tile (one here: at most four take the shifted-data form) the squares of
// c - x, c each row's first element as the per-partition bias (scale -1), and their sum, the row sum and -mean, eps - (mean - c)^2 as the per-partition bias
// of rsqrt(sum / 8 + bias), then (x - mean) * rstd with the [4, 1] statistics as per-partition scalars, the
// affine parameters, and the saved statistics stored as [4, 1] columns.
// CHECK-LABEL: func.func @layer_norm
// CHECK:       %[[OUT:.*]] = memref.alloc() : memref<4x8xf32, #mem<hbm>>
// CHECK-NEXT:  %[[MEAN:.*]] = memref.alloc() : memref<4x1xf32, #mem<hbm>>
// CHECK-NEXT:  %[[RSTD:.*]] = memref.alloc() : memref<4x1xf32, #mem<hbm>>
// CHECK-NEXT:  %[[WV:.*]] = tile.view %w : memref<8xf32, #mem<hbm>> to memref<4x8xf32, strided<[0, 1]>, #mem<hbm>>
// CHECK-NEXT:  %[[W:.*]] = tile.load %[[WV]][%c0, %c0]
// CHECK-NEXT:  %[[BV:.*]] = tile.view %b
// CHECK-NEXT:  %[[B:.*]] = tile.load %[[BV]][%c0, %c0]
// CHECK-NEXT:  %[[X:.*]] = tile.load %x[%c0, %c0] : memref<4x8xf32, #mem<hbm>> -> !tile.tile<4x8xf32, sbuf>
// CHECK-NEXT:  %[[FIRST:.*]] = tile.extract %[[X]][%c0] : !tile.tile<4x8xf32, sbuf> -> !tile.tile<4x1xf32, sbuf>
// CHECK-NEXT:  %[[SQ:.*]] = tile.unary %[[X]] bias %[[FIRST]] {fn = "square", scale = -1.000000e+00 : f64}
// CHECK-NEXT:  %[[DEV:.*]] = tile.reduce %[[SQ]] {op = "add"}
// CHECK-NEXT:  %[[SUM:.*]] = tile.reduce %[[X]] {op = "add"}
// CHECK-NEXT:  %[[NEG:.*]] = tile.binary_scalar %[[SUM]] {op = "multiply", scalar = -1.250000e-01 : f64}
// CHECK-NEXT:  %[[AVERAGE:.*]] = tile.binary_scalar %[[SUM]] {op = "multiply", scalar = 1.250000e-01 : f64}
// CHECK-NEXT:  %[[OFFSET:.*]] = tile.binary_scalar %[[AVERAGE]] column %[[FIRST]] {op = "subtract"}
// CHECK-NEXT:  %[[SQUARED:.*]] = tile.binary_scalar %[[OFFSET]] column %[[OFFSET]] {op = "multiply"}
// CHECK-NEXT:  %[[BIAS:.*]] = tile.binary_scalar %[[SQUARED]] {op = "subtract", scalar = 1.000000e-05 : f64, reverse = true}
// CHECK-NEXT:  %[[R:.*]] = tile.unary %[[DEV]] bias %[[BIAS]] {fn = "rsqrt", scale = 1.250000e-01 : f64}
// CHECK-NEXT:  %[[C:.*]] = tile.binary_scalar %[[X]] column %[[NEG]] {op = "add"}
// CHECK-NEXT:  %[[N:.*]] = tile.binary_scalar %[[C]] column %[[R]] {op = "multiply"}
// CHECK-NEXT:  %[[WEIGHTED:.*]] = tile.binary %[[N]], %[[W]] {op = "multiply"}
// CHECK-NEXT:  %[[Y:.*]] = tile.binary %[[WEIGHTED]], %[[B]] {op = "add"}
// CHECK-NEXT:  tile.store %[[Y]], %[[OUT]][%c0, %c0]
// CHECK-NEXT:  %[[M:.*]] = tile.binary_scalar %[[NEG]] {op = "multiply", scalar = -1.000000e+00 : f64}
// CHECK-NEXT:  tile.store %[[M]], %[[MEAN]][%c0, %c0]
// CHECK-NEXT:  tile.store %[[R]], %[[RSTD]][%c0, %c0]

// -----

func.func @layer_norm_unused_statistics(%x: tensor<300x3x5xbf16>) -> tensor<300x3x5xbf16> {
  %0, %1, %2 = torch.aten.native_layer_norm %x, none, none {normalized_shape = array<i64: 3, 5>, eps = 1.000000e-05 : f64} : (tensor<300x3x5xbf16>) -> (tensor<300x3x5xbf16>, tensor<300x1x1xbf16>, tensor<300x1x1xbf16>)
  func.return %0 : tensor<300x3x5xbf16>
}
// Two normalized dims merge into rows of 15; 300 rows are two tiles of 128 in a loop and a peeled 44. The
// statistics nobody reads are not stored, and without affine parameters the normalised tile is the result.
// CHECK-LABEL: func.func @layer_norm_unused_statistics
// CHECK:       tile.view %x : memref<300x3x5xbf16, #mem<hbm>> to memref<300x15xbf16, #mem<hbm>>
// CHECK:       scf.for %[[P:.*]] = %c0 to %c256 step %c128 {
// CHECK:         tile.load %{{.*}}[%[[P]], %c0] : memref<300x15xbf16, #mem<hbm>> -> !tile.tile<128x15xbf16, sbuf>
// CHECK:         tile.binary_scalar %{{.*}} column %{{.*}} {op = "multiply"} : (!tile.tile<128x15xf32, sbuf>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x15xbf16, sbuf>
// CHECK-NEXT:    tile.store
// CHECK-NEXT:  }
// CHECK:       tile.load %{{.*}}[%c256, %c0] : memref<300x15xbf16, #mem<hbm>> -> !tile.tile<44x15xbf16, sbuf>
// CHECK:       tile.store
// CHECK-NOT:   tile.store

// -----

func.func @layer_norm_long_rows(%x: tensor<4x30000xf32>, %w: tensor<30000xf32>, %b: tensor<30000xf32>) -> (tensor<4x30000xf32>, tensor<4x1xf32>, tensor<4x1xf32>) {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %w, %b {normalized_shape = array<i64: 30000>, eps = 1.000000e-05 : f64} : (tensor<4x30000xf32>, tensor<30000xf32>, tensor<30000xf32>) -> (tensor<4x30000xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  func.return %0, %1, %2 : tensor<4x30000xf32>, tensor<4x1xf32>, tensor<4x1xf32>
}
// Rows too long for SBUF: the mean, the variance of the deviations from it (both / 30000), rsqrt(var + eps) on
// ScalarE with eps as the bias, then one pass over x whose statistics ([4, 1]) and affine parameters are stride-0
// views.
// CHECK-LABEL: func.func @layer_norm_long_rows
// CHECK:       %[[MEAN:.*]] = memref.alloc() : memref<4x1xf32, #mem<hbm>>
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 3.3333333333333335e-05 : f64}
// CHECK:       tile.binary_scalar %{{.*}} column %{{.*}} {op = "subtract"}
// CHECK:       tile.unary %{{.*}} {fn = "square"}
// CHECK:       tile.unary %{{.*}} {fn = "rsqrt", bias_value = 1.000000e-05 : f64}
// CHECK:       tile.view %[[MEAN]] : memref<4x1xf32, #mem<hbm>> to memref<4x30000xf32, strided<[1, 0]>, #mem<hbm>>
// CHECK:       tile.view %w : memref<30000xf32, #mem<hbm>> to memref<4x30000xf32, strided<[0, 1]>, #mem<hbm>>
// CHECK:       %[[CENTRED:.*]] = tile.binary %{{.*}}, %{{.*}} {op = "subtract"}
// CHECK:       %[[SCALED:.*]] = tile.binary %[[CENTRED]], %{{.*}} {op = "multiply"}
// CHECK:       %[[WEIGHTED:.*]] = tile.binary %[[SCALED]], %{{.*}} {op = "multiply"}
// CHECK:       tile.binary %[[WEIGHTED]], %{{.*}} {op = "add"}

// -----

func.func @batch_norm_training(%x: tensor<4x3x5xf32>, %rm: tensor<3xf32>, %rv: tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %0, %1, %2, %3, %4 = torch.aten._native_batch_norm_legit_functional %x, none, none, %rm, %rv {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  func.return %0, %1, %2, %3, %4 : tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
// Batch norm in training: one nest over channel tiles (channels on partitions). Its chunks (one per image here)
// fit on chip, so both passes are straight-line code over the same loaded tiles: x is loaded once. The shift f is
// the mean of each channel's first run of values (x[0, c, :], one scaled activation summed); the first pass sums
// each channel's differences from f (VectorE) and their squares (ScalarE, -f its per-partition bias); m = f + s/N,
// the residual r = (f - m) + s/N and var = q/N - (s/N)^2 stay in the channel tile's columns. The running mean
// becomes 0.9 * old + 0.1 * mean and the running variance 0.9 * old + 0.1 * (20/19) * var (the unbiased variance
// of 20 values per channel), both written from the columns before the second pass, which normalizes the kept
// tiles with tensor_scalar operands, r taken out of the shift (fp32: (x - m) * scale + shift).
// CHECK-LABEL: func.func @batch_norm_training
// CHECK:       tile.view %x : memref<4x3x5xf32, #mem<hbm>> to memref<3x5xf32, #mem<hbm>>
// CHECK-COUNT-4: memref.alloc() : memref<3xf32, #mem<hbm>>
// CHECK-NOT:   memref.alloc
// CHECK:       tile.load
// CHECK:       %[[SCALED:.*]] = tile.unary %{{.*}} {fn = "copy", scale = 2.000000e-01 : f64}
// CHECK-NEXT:  %[[F:.*]] = tile.reduce %[[SCALED]] {op = "add"}
// CHECK:       %[[NEG:.*]] = tile.binary_scalar %[[F]] {op = "multiply", scalar = -1.000000e+00 : f64}
// CHECK:       %[[X0:.*]] = tile.load %x[%c0, %c0, %c0]
// CHECK-NEXT:  tile.binary_scalar %[[X0]] column %[[F]] {op = "subtract"}
// CHECK-NEXT:  tile.unary %[[X0]] bias %[[NEG]] {fn = "square"}
// CHECK:       %[[X3:.*]] = tile.load %x[%c3, %c0, %c0]
// CHECK-NOT:   scf.for
// CHECK:       %[[OFFSET:.*]] = tile.binary_scalar %{{.*}} {op = "multiply", scalar = 5.000000e-02 : f64}
// CHECK:       %[[M:.*]] = tile.binary %[[F]], %[[OFFSET]] {op = "add"}
// CHECK:       %[[LOST:.*]] = tile.binary %[[F]], %[[M]] {op = "subtract"}
// CHECK:       tile.binary %[[LOST]], %[[OFFSET]] {op = "add"}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 5.000000e-02 : f64}
// CHECK:       tile.binary %[[OFFSET]], %[[OFFSET]] {op = "multiply"}
// CHECK:       tile.unary %{{.*}} {fn = "rsqrt", bias_value = 1.000000e-05 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 9.000000e-01 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 1.000000e-01 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 9.000000e-01 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 0.10526315789473684 : f64}
// CHECK-COUNT-4: tile.store %{{.*}} : !tile.tile<3x1xf32, sbuf>
// CHECK-NOT:   tile.load %x
// CHECK:       tile.binary_scalar %[[X0]] column %[[M]] {op = "subtract"}
// CHECK-NEXT:  tile.binary_scalar %{{.*}} column %{{.*}} {op = "multiply"}
// CHECK-NEXT:  tile.binary_scalar %{{.*}} column %{{.*}} {op = "add"}
// CHECK:       tile.binary_scalar %[[X3]] column %[[M]] {op = "subtract"}
// CHECK-NOT:   tile.load
// CHECK:       func.return

// -----

func.func @batch_norm_eval(%x: tensor<4x3x5xf32>, %w: tensor<3xf32>, %b: tensor<3xf32>, %rm: tensor<3xf32>, %rv: tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<0xf32>, tensor<0xf32>) {
  %0, %1, %2 = torch.aten._native_batch_norm_legit_no_training %x, %w, %b, %rm, %rv {momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<0xf32>, tensor<0xf32>)
  func.return %0, %1, %2 : tensor<4x3x5xf32>, tensor<0xf32>, tensor<0xf32>
}
// In eval mode the running statistics normalize and the saved statistics are empty.
// CHECK-LABEL: func.func @batch_norm_eval
// CHECK:       tile.view %rv : memref<3xf32, #mem<hbm>> to memref<3x1xf32, #mem<hbm>>
// CHECK:       tile.unary %{{.*}} {fn = "rsqrt", bias_value = 1.000000e-05 : f64}
// CHECK:       tile.view %rm : memref<3xf32, #mem<hbm>> to memref<1x3x1xf32, strided<[0, 1, 0]>, #mem<hbm>>
// CHECK-NOT:   tile.reduce
// CHECK:       tile.view %{{.*}} : memref<1xf32, #mem<hbm>> to memref<0xf32, strided<[0]>, #mem<hbm>>

// -----

func.func @layer_norm_backward_rows(%g: tensor<600x64xbf16>, %x: tensor<600x64xbf16>, %mean: tensor<600x1xbf16>, %rstd: tensor<600x1xbf16>, %w: tensor<64xbf16>, %b: tensor<64xbf16>) -> (tensor<600x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  %0, %1, %2 = torch.aten.native_layer_norm_backward %g, %x, %mean, %rstd, %w, %b {normalized_shape = array<i64: 64>, output_mask = array<i1: true, true, true>} : (tensor<600x64xbf16>, tensor<600x64xbf16>, tensor<600x1xbf16>, tensor<600x1xbf16>, tensor<64xbf16>, tensor<64xbf16>) -> (tensor<600x64xbf16>, tensor<64xbf16>, tensor<64xbf16>)
  func.return %0, %1, %2 : tensor<600x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}
// One pass over row groups (lowering/convert_torch_to_tile/rows.py): 512 rows as 4 per partition, each operand
// one DMA of [128, 4, 64] (the statistics as fp32 columns); the 4 rows of every partition computed in
// straight-line code in wavefront order (the engines overlap the rows), each row read in place
// from the group's tile, grad_input rounded into the group's result tile and stored at once; the weight gradient
// accumulated in PSUM as rstd^T ((x - mean) grad) (each row's rstd column the stationary), the bias gradient as
// ones^T grad_out, both started from zero; then the last 88 rows as one row per partition; one store of each
// gradient. grad_input's row sums: sum(g) of a ScalarE copy of g = grad_out * weight, sum((x - mean) grad_out
// weight), times rstd^3 computed for the group's rows at once.
// CHECK-LABEL: func.func @layer_norm_backward_rows
// CHECK:       %[[ONES:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<128x1xbf16, sbuf>
// CHECK:       %[[W0:.*]] = tile.fill {value = 0.000000e+00 : f64} : !tile.tile<1x64xf32, psum>
// CHECK-NEXT:  %[[B0:.*]] = tile.fill {value = 0.000000e+00 : f64} : !tile.tile<1x64xf32, psum>
// CHECK:       %[[X:.*]] = tile.load %{{.*}}[%c0, %c0, %c0] : memref<150x4x64xbf16, #mem<hbm>> -> !tile.tile<128x4x64xbf16, sbuf>
// CHECK:       %[[G:.*]] = tile.load %{{.*}}[%c0, %c0, %c0] : memref<150x4x64xbf16, #mem<hbm>> -> !tile.tile<128x4x64xbf16, sbuf>
// CHECK:       tile.load %{{.*}}[%c0, %c0] : memref<150x4xbf16, #mem<hbm>> -> !tile.tile<128x4xf32, sbuf>
// CHECK:       %[[RSTD:.*]] = tile.load %{{.*}}[%c0, %c0] : memref<150x4xbf16, #mem<hbm>> -> !tile.tile<128x4xf32, sbuf>
// CHECK:       %[[SQUARES:.*]] = tile.binary %[[RSTD]], %[[RSTD]] {op = "multiply"} : (!tile.tile<128x4xf32, sbuf>
// CHECK-NEXT:  tile.binary %[[SQUARES]], %[[RSTD]] {op = "multiply"} : (!tile.tile<128x4xf32, sbuf>
// CHECK:       %[[X0:.*]] = tile.extract %[[X]][%c0, %c0] : !tile.tile<128x4x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
// CHECK:       %[[G3:.*]] = tile.extract %[[G]][%c3, %c0] : !tile.tile<128x4x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
// CHECK:       %[[R0:.*]] = tile.extract %[[RSTD]][%c0] : !tile.tile<128x4xf32, sbuf> -> !tile.tile<128x1xf32, sbuf>
// CHECK:       %[[D0:.*]] = tile.binary_scalar %[[X0]] column %{{.*}} {op = "subtract"}
// CHECK-NEXT:  %[[U0:.*]] = tile.binary %[[D0]], %{{.*}} {op = "multiply"} : (!tile.tile<128x64xf32, sbuf>, !tile.tile<128x64xbf16, sbuf>) -> !tile.tile<128x64xf32, sbuf>
// CHECK:       %[[C:.*]] = tile.unary %{{.*}} {fn = "copy"} : (!tile.tile<128x64xf32, sbuf>) -> !tile.tile<128x64xf32, sbuf>
// CHECK-NEXT:  tile.reduce %[[C]] {op = "add"}
// CHECK:       tile.insert %{{.*}}, %{{.*}}[%c0, %c0]
// CHECK:       %[[WA:.*]] = tile.matmul %[[R0]], %[[U0]] acc %[[W0]] : (!tile.tile<128x1xf32, sbuf>, !tile.tile<128x64xf32, sbuf>, !tile.tile<1x64xf32, psum>) -> !tile.tile<1x64xf32, psum>
// CHECK-NEXT:  tile.matmul %[[ONES]], %{{.*}} acc %[[B0]]
// CHECK:       tile.matmul %{{.*}}, %{{.*}} acc %[[WA]]
// CHECK:       %[[DX:.*]] = tile.insert %{{.*}}, %{{.*}}[%c3, %c0]
// CHECK:       tile.store %[[DX]], %{{.*}}[%c0, %c0, %c0] : !tile.tile<128x4x64xbf16, sbuf>, memref<150x4x64xbf16, #mem<hbm>>
// CHECK:       tile.load {{.*}} -> !tile.tile<88x1x64xbf16, sbuf>
// CHECK:       tile.store {{.*}} : !tile.tile<88x1x64xbf16, sbuf>
// CHECK:       tile.copy %{{.*}} : (!tile.tile<1x64xf32, psum>) -> !tile.tile<1x64xbf16, sbuf>
// CHECK:       tile.copy %{{.*}} : (!tile.tile<1x64xf32, psum>) -> !tile.tile<1x64xbf16, sbuf>

// -----

func.func @layer_norm_few_row_tiles(%x: tensor<394x768xbf16>, %w: tensor<768xbf16>, %b: tensor<768xbf16>) -> (tensor<394x768xbf16>, tensor<394x1xf32>, tensor<394x1xf32>) {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %w, %b {normalized_shape = array<i64: 768>, eps = 1.000000e-12 : f64} : (tensor<394x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) -> (tensor<394x768xbf16>, tensor<394x1xf32>, tensor<394x1xf32>)
  func.return %0, %1, %2 : tensor<394x768xbf16>, tensor<394x1xf32>, tensor<394x1xf32>
}
// 394 rows (ViT-B/16's 2 x 197 tokens) are too few for two groups of several rows per partition, but make four
// row tiles: each a group of one row per partition, all in one wavefront in straight-line code (not a loop whose
// trips each wait for the engines to finish the trip before): every tile's rows load, and the later tiles'
// statistics start, before the first tile's result is stored.
// CHECK-LABEL: func.func @layer_norm_few_row_tiles
// CHECK-NOT:   scf.for
// CHECK:       tile.load {{.*}} : memref<394x1x768xbf16, #mem<hbm>> -> !tile.tile<128x1x768xbf16, sbuf>
// CHECK:       tile.reduce
// CHECK:       tile.load {{.*}} -> !tile.tile<128x1x768xbf16, sbuf>
// CHECK:       tile.load {{.*}} -> !tile.tile<10x1x768xbf16, sbuf>
// CHECK:       tile.store {{.*}} : !tile.tile<128x1x768xbf16, sbuf>, memref<394x1x768xbf16, #mem<hbm>>
// CHECK:       tile.store {{.*}} : !tile.tile<10x1x768xbf16, sbuf>, memref<10x1x768xbf16, {{.*}}>
// CHECK-NOT:   scf.for

// -----

func.func @batch_norm_backward(%g: tensor<4x3x5xf32>, %x: tensor<4x3x5xf32>, %w: tensor<3xf32>, %rm: tensor<3xf32>, %rv: tensor<3xf32>, %sm: tensor<3xf32>, %si: tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>) {
  %0, %1, %2 = torch.aten.native_batch_norm_backward %g, %x, %w, %rm, %rv, %sm, %si {train = true, eps = 1.000000e-05 : f64, output_mask = array<i1: true, true, true>} : (tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
  func.return %0, %1, %2 : tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>
}
// Batch norm's backward in training, channels on partitions: one pass over the batch sums dy, x - m (an
// activation with -m as its bias) and dy * (x - m); the residual r = mean(x - m) counts only where it is m's
// rounding (|r| <= |m| * 2^-23); a second pass writes grad_input = (dy - offset) * scale - (x - m) * slope, dy's
// mean taken off first, from the x and dy tiles the first pass loaded (they fit on chip: no loop, no reload).
// CHECK-LABEL: func.func @batch_norm_backward
// CHECK-NOT:   memref<1x3x1xf32
// CHECK:       %[[M:.*]] = tile.load %{{.*}}[%c0, %c0] : memref<3x1xf32, strided<[1, 0]>, #mem<hbm>> -> !tile.tile<3x1xf32, sbuf>
// CHECK:       %[[NEG:.*]] = tile.binary_scalar %[[M]] {op = "multiply", scalar = -1.000000e+00 : f64}
// CHECK:       %[[X0:.*]] = tile.load %x[%c0, %c0, %c0]
// CHECK-NEXT:  %[[G0:.*]] = tile.load %g[%c0, %c0, %c0]
// CHECK-NEXT:  tile.unary %[[X0]] bias %[[NEG]] {fn = "copy"}
// CHECK-NOT:   scf.for
// CHECK:       tile.load %g[%c3, %c0, %c0]
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 5.000000e-02 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 1.1920928955078125e-07 : f64}
// CHECK-NEXT:  tile.binary %{{.*}}, %{{.*}} {op = "is_le"}
// CHECK-NOT:   tile.load
// CHECK:       %[[CENTRED:.*]] = tile.binary_scalar %[[X0]] column %[[M]] {op = "subtract"}
// CHECK-NEXT:  %[[SLOPED:.*]] = tile.binary_scalar %[[CENTRED]] column %{{.*}} {op = "multiply"}
// CHECK-NEXT:  %[[SHIFTED:.*]] = tile.binary_scalar %[[G0]] column %{{.*}} {op = "subtract"}
// CHECK-NEXT:  %[[SCALED:.*]] = tile.binary_scalar %[[SHIFTED]] column %{{.*}} {op = "multiply"}
// CHECK-NEXT:  tile.binary %[[SCALED]], %[[SLOPED]] {op = "subtract"}
// CHECK-NOT:   tile.load
// CHECK:       func.return

// -----

func.func @batch_norm_training_channels_split(%x: tensor<2x64x16x32xf32>, %rm: tensor<64xf32>, %rv: tensor<64xf32>) -> (tensor<2x64x16x32xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %0, %1, %2, %3, %4 = torch.aten._native_batch_norm_legit_functional %x, none, none, %rm, %rv {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<2x64x16x32xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x64x16x32xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
  func.return %0, %1, %2, %3, %4 : tensor<2x64x16x32xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}
// 64 channels of 512 values per image fill the partitions two to a channel: x as [2, 128, 256] rows, partition
// 2c + j holding the j-th half of channel c. The 0/1 matrix of "same channel" (spread^T spread, spread[c, q] = 1
// for q - 2c in [0, 2)) turns the halves' sums into their channel's on both halves: the shift f (the halves'
// pilots averaged), the sums about it; the statistics leave from each channel's first half (first[q, c] = 1 for
// q = 2c), and the normalization pass runs over the 128 partitions.
// CHECK-LABEL: func.func @batch_norm_training_channels_split
// CHECK:       %[[ROWS:[^ ]*]] = tile.view %x : memref<2x64x16x32xf32, #mem<hbm>> to memref<2x128x256xf32, #mem<hbm>>
// CHECK:       tile.view %x : memref<2x64x16x32xf32, #mem<hbm>> to memref<128x64xf32, strided<[256, 1]>, #mem<hbm>>
// CHECK:       tile.iota {steps = array<i64: 1>, channel_multiplier = -2 : i64} : !tile.tile<64x128xf32, sbuf>
// CHECK:       %[[SPREAD:[^ ]*]] = tile.binary %{{.*}}, %{{.*}} {op = "multiply"}
// CHECK:       %[[SAME_PSUM:[^ ]*]] = tile.matmul %[[SPREAD]], %[[SPREAD]] : {{.*}} -> !tile.tile<128x128xf32, psum>
// CHECK:       %[[SAME:[^ ]*]] = tile.copy %[[SAME_PSUM]]
// CHECK:       tile.iota {steps = array<i64: -2>, channel_multiplier = 1 : i64} : !tile.tile<128x64xf32, sbuf>
// CHECK:       %[[FIRST:[^ ]*]] = tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 0.000000e+00 : f64}
// CHECK:       %[[PILOTS:[^ ]*]] = tile.reduce
// CHECK:       tile.matmul %[[SAME]], %[[PILOTS]] : {{.*}} -> !tile.tile<128x1xf32, psum>
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 5.000000e-01 : f64}
// CHECK:       %[[X0:[^ ]*]] = tile.load %[[ROWS]][%c0, %c0, %c0] : memref<2x128x256xf32, #mem<hbm>> -> !tile.tile<128x256xf32, sbuf>
// CHECK:       %[[S:[^ ]*]] = tile.binary %{{.*}}, %{{.*}} {op = "add"} : (!tile.tile<128x1xf32, sbuf>
// CHECK:       tile.matmul %[[SAME]], %[[S]]
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 0.0009765625 : f64}
// CHECK:       tile.matmul %[[FIRST]], %{{.*}} : {{.*}} -> !tile.tile<64x1xf32, psum>
// CHECK-COUNT-4: tile.store %{{.*}} : !tile.tile<64x1xf32, sbuf>, memref<64x1xf32, strided<[1, 0]>, #mem<hbm>>
// CHECK-NOT:   tile.load %[[ROWS]]
// CHECK:       tile.binary_scalar %[[X0]] column %{{.*}} {op = "subtract"} : (!tile.tile<128x256xf32, sbuf>
