// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Gathers and scatters (indexing.py): one case per branch. Random index inputs would be out of range, so these
// are checked by execution in test/e2e/test_indexing.py rather than with --check-semantics here.

// Embedding: the last dim does not depend on the index, so one offset per partition gathers a whole row. The
// offsets count rows (the table steps by the row stride, 6), so they are the token ids whatever the table's size.
// CHECK-LABEL: func.func @main
func.func @main(%w: tensor<10x6xf32>, %i: tensor<3x4xi64>) -> tensor<3x4x6xf32> {
  %0 = torch.aten.embedding %w, %i : (tensor<10x6xf32>, tensor<3x4xi64>) -> tensor<3x4x6xf32>
  func.return %0 : tensor<3x4x6xf32>
}
// CHECK:       tile.gather %{{.*}}, %{{.*}} {dim = 1 : i64, dims = array<i64: 2>} : memref<1x10x6xf32, strided<[1, 6, 1]>, #mem<hbm>>, !tile.tile<4x1xi32, sbuf> -> !tile.tile<4x6xf32, sbuf>

// -----
// gather: every element has its own index: [P, F] offsets, one element each.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<4x5xf32>, %i: tensor<4x3xi64>) -> tensor<4x3xf32> {
  %0 = torch.aten.gather %x, %i {dim = 1 : i64} : (tensor<4x5xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  func.return %0 : tensor<4x3xf32>
}
// CHECK:       tile.iota {steps = array<i64: 0>, channel_multiplier = 5 : i64} : !tile.tile<4x3xf32, sbuf>
// CHECK:       tile.gather %{{.*}}, %{{.*}} {dim = 1 : i64} : memref<1x20xf32, strided<[1, 1]>, #mem<hbm>>, !tile.tile<4x3xi32, sbuf> -> !tile.tile<4x3xf32, sbuf>

// -----
// index.Tensor: negative indices wrap (index + size where index < 0).
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<5x3xf32>, %i: tensor<4xi64>) -> tensor<4x3xf32> {
  %0 = torch.aten.index.Tensor %x, [%i] : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  func.return %0 : tensor<4x3xf32>
}
// CHECK:       tile.binary_scalar %{{.*}} {op = "is_lt", scalar = 0.000000e+00 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 5.000000e+00 : f64}
// CHECK:       tile.gather

// -----
// scatter_add: a copy of self, then an accumulating scatter (duplicates add up).
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = torch.aten.scatter_add %x, %i, %s {dim = 0 : i64} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}
// CHECK:       tile.scatter {{.*}} {dim = 1 : i64, accumulate}

// -----
// scatter_reduce amax: compare-and-select over the index dim, no scatter.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = torch.aten.scatter_reduce.two %x, %i, %s {dim = 0 : i64, reduce = "amax"} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}
// CHECK-NOT:   tile.scatter
// CHECK:       tile.iota {steps = array<i64: 1, 0>} : !tile.tile<4x3x5xf32, sbuf>
// CHECK:       tile.reduce %{{.*}} {op = "max"}

// -----

// masked_scatter: exclusive prefix counts of the mask on TensorE (within rows against a strictly triangular
// matrix, across rows against the row totals), then a gather of the source at those counts and a select.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<5x5xf32>, %m: tensor<5x5xi1>, %s: tensor<30xf32>) -> tensor<5x5xf32> {
  %0 = torch.aten.masked_scatter %x, %m, %s : (tensor<5x5xf32>, tensor<5x5xi1>, tensor<30xf32>) -> tensor<5x5xf32>
  func.return %0 : tensor<5x5xf32>
}
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<25x1xf32, sbuf>, !tile.tile<25x25xf32, sbuf>) -> !tile.tile<1x25xf32, psum>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<1x1xf32, sbuf>, !tile.tile<1x1xf32, sbuf>) -> !tile.tile<1x1xf32, psum>
// CHECK:       tile.binary_scalar %{{.*}} {op = "min", scalar = 2.900000e+01 : f64}
// CHECK:       tile.gather
// CHECK:       tile.select

// -----

// grid_sampler_2d, bilinear with reflection padding: coordinates folded with fmod/floor on GpSimdE, then four
// corner taps gathered (rows of one element) and weighted.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x2x5x7xf32>, %g: tensor<1x3x4x2xf32>) -> tensor<1x2x3x4xf32> {
  %0 = torch.aten.grid_sampler_2d %x, %g {interpolation_mode = 0 : i64, padding_mode = 2 : i64, align_corners = false} : (tensor<1x2x5x7xf32>, tensor<1x3x4x2xf32>) -> tensor<1x2x3x4xf32>
  func.return %0 : tensor<1x2x3x4xf32>
}
// CHECK:       tile.kernel %{{.*}}, %{{.*}} {kernel = "fmod"}
// CHECK:       tile.kernel %{{.*}}, %{{.*}} {kernel = "divide_floor"}
// CHECK-COUNT-4: tile.gather

// -----

// embedding_bag (sum with per-sample weights): rows gathered, then a [bags x tokens] membership matrix built from
// an iota compared with start/end columns, weighted, and multiplied on TensorE.
// CHECK-LABEL: func.func @main
func.func @main(%w: tensor<10x5xf32>, %i: tensor<6xi64>, %o: tensor<2xi64>, %p: tensor<6xf32>) -> tensor<2x5xf32> {
  %0, %1, %2, %3 = torch.aten._embedding_bag_forward_only %w, %i, %o, %p : (tensor<10x5xf32>, tensor<6xi64>, tensor<2xi64>, tensor<6xf32>) -> (tensor<2x5xf32>, tensor<0xi64>, tensor<2xi64>, tensor<2xi64>)
  func.return %0 : tensor<2x5xf32>
}
// CHECK:       tile.gather
// CHECK:       tile.iota {steps = array<i64: 1>} : !tile.tile<2x6xf32, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} column %{{.*}} {op = "is_ge"}
// CHECK:       tile.binary_scalar %{{.*}} column %{{.*}} {op = "is_lt"}
// CHECK:       tile.matmul
