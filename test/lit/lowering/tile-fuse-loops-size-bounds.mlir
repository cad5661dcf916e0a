// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-prologues,tile-fuse-matmul-chains,tile-fuse-loops | filecheck %s

// Matmul nests fused by tile-fuse-loops (lowering/tile_fuse_loops.py) where their row loops share a bound computed
// from the call's sizes: a transformer's MLP over the token rows of a [4, 64] bucket's program (256 merged rows,
// run up to the last real row). The layer norm is computed in c_fc's prologue, GELU leaves PSUM into c_fc's
// stores, and c_proj (K = 128) transposes the hidden rows into its panel in a loop carrying the panel; K = 32 is
// below the 128 that tile-fuse-matmul-chains needs. The two nests become one, the vectors and weights loaded
// between them move above it, and the hidden activations never reach HBM: c_proj transposes the tile c_fc's
// evacuation computed in the same trip. Numbers are checked end to end in test/frontend/test_size_buckets.py
// (this form takes size arguments, which --check-semantics cannot supply).
// CHECK-LABEL: func.func @mlp(
// CHECK-NOT:   memref.alloc() : memref<256x128xf32
// CHECK:       %[[END:.*]] = arith.muli %{{.*}}, %c128 : index
// CHECK:       %[[G:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       %[[B:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       scf.for %[[ROW:.*]] = %c0 to %[[END]] step %c128 {
// CHECK-NEXT:    %[[X:.*]] = tile.load %{{.*}}[%[[ROW]], %c0] {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK:         tile.binary_scalar {{.*}} column %[[G]] {op = "multiply"}
// CHECK-NEXT:    tile.binary_scalar {{.*}} column %[[B]] {op = "add"} : {{.*}} -> !tile.tile<32x128xf32, sbuf>
// CHECK:         tile.matmul {{.*}} -> !tile.tile<128x128xf32, psum>
// CHECK:         %[[H:.*]] = tile.unary %{{.*}} {fn = "gelu_apprx_tanh"} : {{.*}} -> !tile.tile<128x128xf32, sbuf>
// CHECK-NOT:     tile.store
// CHECK-NOT:     tile.load %{{.*}} -> !tile.tile<128x128xf32, sbuf>
// CHECK:         scf.for {{.*}} iter_args
// CHECK-NEXT:      arith.muli
// CHECK-NEXT:      tile.extract %[[H]]
// CHECK:         tile.matmul {{.*}} -> !tile.tile<128x32xf32, psum>
// CHECK:         %[[OUT:.*]] = tile.binary %[[X]], %{{.*}} {op = "add"} : {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK-NEXT:    tile.store %[[OUT]], %{{.*}}[%[[ROW]], %c0] : !tile.tile<128x32xf32, sbuf>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @mlp(%x: tensor<4x64x32xf32>, %g: tensor<32xf32>, %h: tensor<32xf32>, %w1: tensor<32x128xf32>, %b1: tensor<128xf32>, %w2: tensor<128x32xf32>, %b2: tensor<32xf32>) -> tensor<4x64x32xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 64 : i64]]} {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %h {normalized_shape = array<i64: 32>, eps = 1.000000e-05 : f64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x64x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x64x32xf32>, tensor<4x64x1xf32>, tensor<4x64x1xf32>)
  %v = torch.aten.view %0 {size = array<i64: 256, 32>, neuron.size_bounds = ["s0*s1", ""]} : (tensor<4x64x32xf32>) -> tensor<256x32xf32>
  %3 = torch.aten.addmm %b1, %v, %w1 {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s0*s1", ""]} : (tensor<128xf32>, tensor<256x32xf32>, tensor<32x128xf32>) -> tensor<256x128xf32>
  %4 = torch.aten.gelu %3 {approximate = "tanh", neuron.size_bounds = ["s0*s1", ""]} : (tensor<256x128xf32>) -> tensor<256x128xf32>
  %5 = torch.aten.addmm %b2, %4, %w2 {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s0*s1", ""]} : (tensor<32xf32>, tensor<256x128xf32>, tensor<128x32xf32>) -> tensor<256x32xf32>
  %6 = torch.aten.view %5 {size = array<i64: 4, 64, 32>, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<256x32xf32>) -> tensor<4x64x32xf32>
  %7 = torch.aten.add.Tensor %x, %6 {alpha = 1 : i64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x32xf32>
  func.return %7 : tensor<4x64x32xf32>
}

// -----

// A second matmul that reads the first one's product as its moving operand: each of its trips loads every K tile
// of the product, not the tile the first nest's trip stored, so the nests stay apart although their row loops
// share a bound.
// CHECK-LABEL: func.func @product_as_weights(
// CHECK:       scf.for
// CHECK:         tile.store {{.*}} : !tile.tile<128x32xf32, sbuf>
// CHECK-NEXT:  }
// CHECK-NEXT:  scf.for
// CHECK:         tile.matmul {{.*}} acc
// CHECK:         tile.store
// CHECK-NEXT:  }
func.func @product_as_weights(%x: tensor<256x32xf32>, %w: tensor<32x32xf32>, %b: tensor<32xf32>, %y: tensor<256x256xf32>) -> tensor<256x32xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 64 : i64]]} {
  %0 = torch.aten.addmm %b, %x, %w {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s0*s1", ""]} : (tensor<32xf32>, tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
  %1 = torch.aten.mm %y, %0 {neuron.size_bounds = ["s0*s1", ""]} : (tensor<256x256xf32>, tensor<256x32xf32>) -> tensor<256x32xf32>
  func.return %1 : tensor<256x32xf32>
}

// -----

// A batch of one (Dynamo specialises it): the first Linear layer stores its rows as [256, 32], the layer norm in the
// second one's prologue loads them as [1, 256, 32]. A dimension of one element at index 0 moves nothing, so the two
// transfers move the same bytes, the nests fuse and the rows never reach HBM.
// CHECK-LABEL: func.func @one_batch(
// CHECK:       scf.for %[[ROW:.*]] = %c0 to %{{.*}} step %c128 {
// CHECK:         tile.matmul {{.*}} -> !tile.tile<128x32xf32, psum>
// CHECK-NOT:     tile.store
// CHECK-NOT:     tile.load %{{.*}} : memref<{{(1x)?}}256x32xf32, #mem<hbm>>
// CHECK:         tile.reduce
// CHECK:         tile.matmul {{.*}} -> !tile.tile<128x96xf32, psum>
// CHECK:         tile.store {{.*}}[%[[ROW]], %c0] : !tile.tile<128x96xf32, sbuf>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @one_batch(%x: tensor<256x32xf32>, %w1: tensor<32x32xf32>, %b1: tensor<32xf32>, %g: tensor<32xf32>, %h: tensor<32xf32>, %w2: tensor<32x96xf32>, %b2: tensor<96xf32>) -> tensor<256x96xf32> attributes {neuron.size_arguments = [["s1", 1 : i64, 256 : i64]]} {
  %0 = torch.aten.addmm %b1, %x, %w1 {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s1", ""]} : (tensor<32xf32>, tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
  %1 = torch.aten.view %0 {size = array<i64: 1, 256, 32>, neuron.size_bounds = ["", "s1", ""]} : (tensor<256x32xf32>) -> tensor<1x256x32xf32>
  %2, %3, %4 = torch.aten.native_layer_norm %1, %g, %h {normalized_shape = array<i64: 32>, eps = 1.000000e-05 : f64, neuron.size_bounds = ["", "s1", ""]} : (tensor<1x256x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<1x256x32xf32>, tensor<1x256x1xf32>, tensor<1x256x1xf32>)
  %5 = torch.aten.view %2 {size = array<i64: 256, 32>, neuron.size_bounds = ["s1", ""]} : (tensor<1x256x32xf32>) -> tensor<256x32xf32>
  %6 = torch.aten.addmm %b2, %5, %w2 {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s1", ""]} : (tensor<96xf32>, tensor<256x32xf32>, tensor<32x96xf32>) -> tensor<256x96xf32>
  func.return %6 : tensor<256x96xf32>
}
