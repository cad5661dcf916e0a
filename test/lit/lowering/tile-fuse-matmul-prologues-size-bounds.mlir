// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-prologues | filecheck %s

// A layer norm over token rows a size bucket pads, read only by a Linear layer with K = 32 (below one tile), in a
// [4, 64] bucket's program (lowering/tile_fuse_matmul_prologues.py): the matmul computes the rows where it loads
// them (apart, the layer norm's nest stores its normalized rows for the matmul's nest to load, and the weight
// and bias apply over [rows, 32] tiles instead of per partition of the transposed ones). Numbers are checked end to end in test/frontend/test_size_buckets.py (this
// form takes size arguments, which --check-semantics cannot supply).
// CHECK-LABEL: func.func @short_rows(
// CHECK-NOT:   memref.alloc() : memref<4x64x32xf32
// CHECK:       %[[END:.*]] = arith.muli %{{.*}}, %c128 : index
// CHECK:       %[[X:.*]] = tile.view %x : memref<4x64x32xf32, #mem<hbm>> to memref<256x32xf32, #mem<hbm>>
// CHECK:       %[[G:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       %[[B:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       scf.for %[[ROW:.*]] = %c0 to %[[END]] step %c128 {
// CHECK-NEXT:    tile.load %[[X]][%[[ROW]], %c0] {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK:         tile.reduce
// CHECK:         tile.transpose
// CHECK:         tile.binary_scalar {{.*}} column %[[B]] {op = "add"} : {{.*}} -> !tile.tile<32x128xf32, sbuf>
// CHECK:         tile.matmul
// CHECK:         tile.store {{.*}} : !tile.tile<128x96xf32, sbuf>
// CHECK-NEXT:  }
// CHECK-NOT:   tile.store %{{.*}}, %{{.*}} : !tile.tile<128x32xf32
func.func @short_rows(%x: tensor<4x64x32xf32>, %g: tensor<32xf32>, %h: tensor<32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>) -> tensor<256x96xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 64 : i64]]} {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %h {normalized_shape = array<i64: 32>, eps = 1.000000e-05 : f64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x64x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x64x32xf32>, tensor<4x64x1xf32>, tensor<4x64x1xf32>)
  %v = torch.aten.view %0 {size = array<i64: 256, 32>, neuron.size_bounds = ["s0*s1", ""]} : (tensor<4x64x32xf32>) -> tensor<256x32xf32>
  %r = torch.aten.addmm %b, %v, %w {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s0*s1", ""]} : (tensor<96xf32>, tensor<256x32xf32>, tensor<32x96xf32>) -> tensor<256x96xf32>
  func.return %r : tensor<256x96xf32>
}

// -----

// Token rows of 256 per batch, in a [4, 256] bucket's program: the layer norm splits its rows back into
// [b, s] (a loop over the call's batches, its row tiles in each), and so does the matmul; every store and load
// of the normalized rows sees them as [4, 256, 32], so a row tile is picked by the batch and row indices, and
// the matmul computes it from x at those indices.
// CHECK-LABEL: func.func @batched_rows(
// CHECK-NOT:   memref.alloc() : memref<4x256x32xf32
// CHECK:       %[[X:.*]] = tile.view %{{.*}} : memref<1024x32xf32, #mem<hbm>> to memref<4x256x32xf32, #mem<hbm>>
// CHECK:       scf.for %[[B:.*]] = %c0 to %s0 step %c1 {
// CHECK-NEXT:    scf.for %[[ROW:.*]] = %c0 to %{{.*}} step %c128 {
// CHECK-NEXT:      tile.load %[[X]][%[[B]], %[[ROW]], %c0] {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK:           tile.transpose
// CHECK:           tile.matmul
// CHECK:           tile.store {{.*}} : !tile.tile<128x96xf32, sbuf>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NOT:   tile.store %{{.*}}, %{{.*}} : !tile.tile<128x32xf32
func.func @batched_rows(%x: tensor<4x256x32xf32>, %g: tensor<32xf32>, %h: tensor<32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>) -> tensor<1024x96xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 256 : i64]]} {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %h {normalized_shape = array<i64: 32>, eps = 1.000000e-05 : f64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x256x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x256x32xf32>, tensor<4x256x1xf32>, tensor<4x256x1xf32>)
  %v = torch.aten.view %0 {size = array<i64: 1024, 32>, neuron.size_bounds = ["s0*s1", ""]} : (tensor<4x256x32xf32>) -> tensor<1024x32xf32>
  %r = torch.aten.addmm %b, %v, %w {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s0*s1", ""]} : (tensor<96xf32>, tensor<1024x32xf32>, tensor<32x96xf32>) -> tensor<1024x96xf32>
  func.return %r : tensor<1024x96xf32>
}

// -----

// A batch of one (Dynamo specialises it): the layer norm stores its rows as [1, 256, 32], the matmul loads them
// as [256, 32]; a dimension of one element picks no rows, so both index the same row tiles.
// CHECK-LABEL: func.func @one_batch(
// CHECK-NOT:   memref.alloc() : memref<1x256x32xf32
// CHECK:       %[[X:.*]] = tile.view %{{.*}} : memref<256x32xf32, #mem<hbm>> to memref<1x256x32xf32, #mem<hbm>>
// CHECK:       scf.for %[[ROW:.*]] = %c0 to %{{.*}} step %c128 {
// CHECK-NEXT:    tile.load %[[X]][%c0, %[[ROW]], %c0] {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK:         tile.matmul
// CHECK-NOT:   tile.store %{{.*}}, %{{.*}} : !tile.tile<128x32xf32
func.func @one_batch(%x: tensor<1x256x32xf32>, %g: tensor<32xf32>, %h: tensor<32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>) -> tensor<256x96xf32> attributes {neuron.size_arguments = [["s1", 1 : i64, 256 : i64]]} {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %h {normalized_shape = array<i64: 32>, eps = 1.000000e-05 : f64, neuron.size_bounds = ["", "s1", ""]} : (tensor<1x256x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<1x256x32xf32>, tensor<1x256x1xf32>, tensor<1x256x1xf32>)
  %v = torch.aten.view %0 {size = array<i64: 256, 32>, neuron.size_bounds = ["s1", ""]} : (tensor<1x256x32xf32>) -> tensor<256x32xf32>
  %r = torch.aten.addmm %b, %v, %w {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s1", ""]} : (tensor<96xf32>, tensor<256x32xf32>, tensor<32x96xf32>) -> tensor<256x96xf32>
  func.return %r : tensor<256x96xf32>
}
