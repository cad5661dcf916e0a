// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-unroll-streaming-loops | filecheck %s
// RUN: neuron-opt %s --split-input-file -p 'convert-torch-to-tile,tile-unroll-streaming-loops{factor=3}' | filecheck %s --check-prefix=THREE
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-unroll-streaming-loops --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Streaming loops unrolled at the tile level (lowering/tile_unroll_streaming_loops.py).
// SEMANTICS-COUNT-3: all outputs match

// exp over 128 x 11264 fp32: five tiles of 2048 and a remainder of 1024. Two copies per iteration for the first
// four tiles, the fifth as a straight copy after the loop, then the remainder.
// CHECK-LABEL: func.func @main
// CHECK:       scf.for %[[F:.*]] = %c0 to %c8192 step %c4096 {
// CHECK-NEXT:    tile.load %{{.*}}[%c0, %[[F]]]
// CHECK-NEXT:    tile.unary
// CHECK-NEXT:    tile.store
// CHECK-NEXT:    %[[NEXT:.*]] = arith.addi %[[F]], %c2048 : index
// CHECK-NEXT:    tile.load %{{.*}}[%c0, %[[NEXT]]]
// CHECK-NEXT:    tile.unary
// CHECK-NEXT:    tile.store
// CHECK-NEXT:  }
// CHECK-NEXT:  tile.load %{{.*}}[%c0, %c8192] {{.*}} -> !tile.tile<128x2048xf32, sbuf>
// CHECK:       tile.load %{{.*}}[%c0, %c10240] {{.*}} -> !tile.tile<128x1024xf32, sbuf>
// With a factor of 3 five tiles are fewer than two unrolled iterations: the loop stays.
// THREE-LABEL: func.func @main
// THREE:       scf.for %{{.*}} = %c0 to %c10240 step %c2048 {
// THREE-COUNT-1: tile.unary
// THREE-NEXT:    tile.store
// THREE-NEXT:  }
func.func @main(%x: tensor<128x11264xf32>) -> tensor<128x11264xf32> {
  %0 = torch.aten.exp %x : (tensor<128x11264xf32>) -> tensor<128x11264xf32>
  func.return %0 : tensor<128x11264xf32>
}

// -----

// Three tiles are too few to unroll (the neuron-level double buffering needs loops of two iterations).
// CHECK-LABEL: func.func @main
// CHECK:       scf.for %{{.*}} = %c0 to %c6144 step %c2048 {
// CHECK-COUNT-1: tile.unary
// CHECK-NEXT:    tile.store
// CHECK-NEXT:  }
func.func @main(%x: tensor<128x6144xf32>) -> tensor<128x6144xf32> {
  %0 = torch.aten.exp %x : (tensor<128x6144xf32>) -> tensor<128x6144xf32>
  func.return %0 : tensor<128x6144xf32>
}

// -----

// Row loops with reductions (softmax here) stay as they are: their tiles grow with the row.
// CHECK-LABEL: func.func @main
// CHECK:       scf.for %{{.*}} = %c0 to %c512 step %c128 {
// CHECK-COUNT-1: tile.store
// CHECK-NEXT:  }
func.func @main(%x: tensor<512x64xf32>) -> tensor<512x64xf32> {
  %0 = torch.aten._softmax %x {dim = -1 : i64, half_to_float = false} : (tensor<512x64xf32>) -> tensor<512x64xf32>
  func.return %0 : tensor<512x64xf32>
}
