// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Branches of the reduction lowerings (lowering/convert_torch_to_tile/reduction.py): chunk transforms, the
// arg-reduction fold with its loop-carried pair, two-pass variances and reductions over no element.

func.func @any_folds_nonzero_flags(%x: tensor<6x300xf32>) -> tensor<6xi1> {
  %a = torch.aten.any.dim %x {dim = 1 : i64} : (tensor<6x300xf32>) -> tensor<6xi1>
  func.return %a : tensor<6xi1>
}
// any reduces `x != 0` flags with max, then casts the [P, 1] column to i1.
// CHECK-LABEL: func.func @any_folds_nonzero_flags
// CHECK:       %[[X:.*]] = tile.load
// CHECK:       %[[NZ:.*]] = tile.binary_scalar %[[X]] {op = "not_equal", scalar = 0.000000e+00 : f64}
// CHECK:       %[[M:.*]] = tile.reduce %[[NZ]] {op = "max"}
// CHECK:       tile.copy %[[M]] : (!tile.tile<6x1xf32, sbuf>) -> !tile.tile<6x1xi1, sbuf>

// -----

func.func @argmax_over_chunks(%x: tensor<6x7000xf32>) -> tensor<6xi64> {
  %i = torch.aten.argmax %x {dim = 1 : i64} : (tensor<6x7000xf32>) -> tensor<6xi64>
  func.return %i : tensor<6xi64>
}
// argmax carries (maximum, index) columns over chunks of 2048: within a chunk the smallest position (an iota
// from the chunk's offset, a loop index inside the loop) that equals the maximum or is NaN; across chunks a
// later chunk wins only when strictly greater, or NaN over a number.
// CHECK-LABEL: func.func @argmax_over_chunks
// CHECK:       tile.iota {steps = array<i64: 1>} : !tile.tile<6x2048xf32, sbuf>
// CHECK:       %{{.*}}, %{{.*}} = scf.for %[[F0:.*]] = %c2048 to %c6144 step %c2048 iter_args(%[[BEST:.*]] = %{{.*}}, %[[INDEX:.*]] = %{{.*}})
// CHECK:         %[[MAX:.*]] = tile.reduce %{{.*}} {op = "max"}
// CHECK:         tile.binary_scalar %{{.*}} column %[[MAX]] {op = "is_equal"}
// CHECK:         tile.iota %[[F0]] {steps = array<i64: 1>} : !tile.tile<6x2048xf32, sbuf>
// CHECK:         %[[FIRST:.*]] = tile.reduce %{{.*}} {op = "min"}
// CHECK:         %[[WINS:.*]] = tile.binary %[[MAX]], %[[BEST]] {op = "is_gt"}
// CHECK:         %[[TAKE:.*]] = tile.binary %[[WINS]], %{{.*}} {op = "logical_or"}
// CHECK:         %[[NEWBEST:.*]] = tile.select %[[TAKE]], %[[MAX]], %[[BEST]]
// CHECK:         %[[NEWINDEX:.*]] = tile.select %[[TAKE]], %[[FIRST]], %[[INDEX]]
// CHECK:         scf.yield %[[NEWBEST]], %[[NEWINDEX]]
// CHECK:       tile.iota {steps = array<i64: 1>, base = 6144 : i64} : !tile.tile<6x856xf32, sbuf>
// CHECK:       tile.copy %{{.*}} : (!tile.tile<6x1xf32, sbuf>) -> !tile.tile<6x1xi64, sbuf>

// -----

func.func @variance_two_passes(%x: tensor<6x300xf32>) -> tensor<300xf32> {
  %v = torch.aten.var.correction %x {dim = array<i64: 0>, correction = 1 : i64} : (tensor<6x300xf32>) -> tensor<300xf32>
  func.return %v : tensor<300xf32>
}
// A variance reduces twice: the mean (scaled by 1/6) into an fp32 tensor, then the squared deviations from
// its column, scaled by 1/(N - correction) = 1/5. Reducing dim 0 reads the input transposed through a view.
// CHECK-LABEL: func.func @variance_two_passes
// CHECK:       tile.view %x : memref<6x300xf32, #mem<hbm>> to memref<300x6xf32, strided<[1, 300]>, #mem<hbm>>
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 0.16666666666666666 : f64}
// CHECK:       %[[MEAN:.*]] = tile.load %{{.*}} : memref<300x1xf32, #mem<hbm>> -> !tile.tile<128x1xf32, sbuf>
// CHECK:       %[[D:.*]] = tile.binary_scalar %{{.*}} column %[[MEAN]] {op = "subtract"}
// CHECK:       %[[SQ:.*]] = tile.unary %[[D]] {fn = "square"}
// CHECK:       %[[S:.*]] = tile.reduce %[[SQ]] {op = "add"}
// CHECK:       tile.binary_scalar %[[S]] {op = "multiply", scalar = 2.000000e-01 : f64}

// -----

func.func @empty_sum_is_zero(%x: tensor<4x0xf32>) -> tensor<4xf32> {
  %s = torch.aten.sum.dim_IntList %x {dim = array<i64: 1>} : (tensor<4x0xf32>) -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}
// A sum over no element is the identity: the result is filled with 0.
// CHECK-LABEL: func.func @empty_sum_is_zero
// CHECK-NOT:   tile.reduce
// CHECK:       tile.fill {value = 0.000000e+00 : f64} : !tile.tile<4x1xf32, sbuf>

// -----

// Reducing every element of a large contiguous tensor uses every lane: 21000 elements as [125, 168], each
// partition folds its share, then TensorE combines the column: a matmul with ones for sums, a transpose (bit
// exact on trn2) for the other operators.
func.func @full_reductions_on_every_lane(%x: tensor<300x70xf32>) -> (tensor<f32>, tensor<f32>) {
  %s = torch.aten.sum.dim_IntList %x : (tensor<300x70xf32>) -> tensor<f32>
  %m = torch.aten.amax %x : (tensor<300x70xf32>) -> tensor<f32>
  func.return %s, %m : tensor<f32>, tensor<f32>
}
// CHECK-LABEL: func.func @full_reductions_on_every_lane
// CHECK:       tile.view %x : memref<300x70xf32, #mem<hbm>> to memref<125x168xf32, #mem<hbm>>
// CHECK:       %[[SUMS:.*]] = tile.reduce %{{.*}} {op = "add"} : (!tile.tile<125x168xf32, sbuf>) -> !tile.tile<125x1xf32, sbuf>
// CHECK:       %[[ONES:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<125x1xf32, sbuf>
// CHECK:       tile.matmul %[[SUMS]], %[[ONES]] : (!tile.tile<125x1xf32, sbuf>, !tile.tile<125x1xf32, sbuf>) -> !tile.tile<1x1xf32, psum>
// CHECK:       %[[MAXES:.*]] = tile.reduce %{{.*}} {op = "max"} : (!tile.tile<125x168xf32, sbuf>) -> !tile.tile<125x1xf32, sbuf>
// CHECK:       %[[ROW:.*]] = tile.transpose %[[MAXES]] : !tile.tile<125x1xf32, sbuf> -> !tile.tile<1x125xf32, psum>
// CHECK:       tile.reduce %[[ROW]] {op = "max"} : (!tile.tile<1x125xf32, psum>) -> !tile.tile<1x1xf32, sbuf>

// -----

// A sum over a dim of size 1 is a copy in the kept elements' own layout (not a [128, 1] column per 128 of them),
// and a sum over a batch of 2 with the kept elements contiguous adds the two slabs elementwise (not a TensorE row
// sum contracting over 2 of its 128 rows).
func.func @few_reduced_elements_fold_slabs(%x: tensor<1x300x96xf32>, %y: tensor<2x300x96xf32>) -> (tensor<300x96xf32>, tensor<1x300x96xf32>) {
  %s = torch.aten.sum.dim_IntList %x {dim = array<i64: 0>} : (tensor<1x300x96xf32>) -> tensor<300x96xf32>
  %t = torch.aten.sum.dim_IntList %y {dim = array<i64: 0>, keepdim = true} : (tensor<2x300x96xf32>) -> tensor<1x300x96xf32>
  func.return %s, %t : tensor<300x96xf32>, tensor<1x300x96xf32>
}
// CHECK-LABEL: func.func @few_reduced_elements_fold_slabs
// CHECK-NOT:   tile.reduce
// CHECK-NOT:   tile.matmul
// The 28800 elements of a slab fill the 128 partitions, 225 contiguous ones each.
// CHECK:       %[[X:.*]] = tile.load %{{.*}} -> !tile.tile<128x225xf32, sbuf>
// CHECK-NEXT:  tile.store %[[X]]
// CHECK:       %[[A:.*]] = tile.load %{{.*}} : memref<128x225xf32, #mem<hbm>> -> !tile.tile<128x225xf32, sbuf>
// CHECK-NEXT:  %[[B:.*]] = tile.load %{{.*}} : memref<128x225xf32, strided<[225, 1], offset: 28800>, #mem<hbm>> -> !tile.tile<128x225xf32, sbuf>
// CHECK-NEXT:  tile.binary %[[A]], %[[B]] {op = "add"}
// CHECK-NOT:   tile.reduce
// CHECK-NOT:   tile.matmul

// -----

func.func @bf16_sum_folds_chunks_as_loaded(%x: tensor<2x8x30x30xbf16>, %y: tensor<2x8x30x30xbf16>) -> (tensor<8xbf16>, tensor<8xf32>) {
  %s = torch.aten.sum.dim_IntList %x {dim = array<i64: 0, 2, 3>} : (tensor<2x8x30x30xbf16>) -> tensor<8xbf16>
  %v = torch.aten.var.correction %y {dim = array<i64: 0, 2, 3>, correction = 0.0 : f64} : (tensor<2x8x30x30xbf16>) -> tensor<8xf32>
  func.return %s, %v : tensor<8xbf16>, tensor<8xf32>
}
// A sum of bf16 (a convolution's bias gradient) reduces its chunks in the type they load in: the engines sum
// in fp32 whatever they read, so the DMAs move half the bytes of fp32 chunks for the same column. A chunk
// transform (the variance's squared deviations) computes in fp32 and loads fp32.
// CHECK-LABEL: func.func @bf16_sum_folds_chunks_as_loaded
// CHECK:       %[[C:.*]] = tile.load %{{.*}} -> !tile.tile<8x900xbf16, sbuf>
// CHECK:       tile.reduce %[[C]] {op = "add"} : (!tile.tile<8x900xbf16, sbuf>) -> !tile.tile<8x1xf32, sbuf>
// CHECK:       tile.load %{{.*}} -> !tile.tile<8x900xf32, sbuf>
