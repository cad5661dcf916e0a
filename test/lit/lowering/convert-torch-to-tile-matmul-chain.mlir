// RUN: neuron-opt %s -p torch-fuse-matmul-chains,convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s -p torch-fuse-matmul-chains,convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A Linear layer, its GELU, and a Linear layer reading it (lowering/convert_torch_to_tile/matmul_chain.py): the
// hidden activations never reach HBM. The first matmul runs with its operands swapped, W1's [K, 128] column
// tiles stationary and x^T (its own A^T panel) moving, so each PSUM tile holds 128 hidden features of every
// token; one activation adds b1 per partition and applies the GELU as it evacuates the tile into the second
// matmul's stationary panel, which that matmul then reads as if it had built it.
// SEMANTICS: all outputs match
func.func @main(%x: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>, %b2: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.gelu %h {approximate = "tanh"} : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xbf16>, tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %r : tensor<130x70xbf16>
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   memref.alloc() : memref<130x256xbf16
// CHECK:       %[[BIASES:.*]] = tile.load %{{.*}} -> !tile.tile<128x2xbf16, sbuf>
// CHECK:       %[[XT:.*]], %[[XT_REST:.*]] = scf.for
// CHECK:         tile.transpose
// CHECK:       %[[W1:.*]] = tile.load %{{.*}} {dims = array<i64: 1, 0, 2>} {{.*}} -> !tile.tile<128x1x256xbf16, sbuf>
// CHECK:       %[[H:.*]], %[[H_REST:.*]] = scf.for %[[T:.*]] = %c0 to %c2 step %c1 iter_args(%[[P:.*]] = %{{.*}}, %[[P_REST:.*]] = %{{.*}})
// CHECK:         %[[B:.*]] = tile.extract %[[BIASES]][%[[T]]] : !tile.tile<128x2xbf16, sbuf> -> !tile.tile<128x1xbf16, sbuf>
// CHECK:         %[[COLUMNS:.*]] = tile.extract %[[W1]]
// CHECK:         %[[ROWS:.*]] = tile.extract %[[XT]]
// CHECK:         %[[PRODUCT:.*]] = tile.matmul %[[COLUMNS]], %[[ROWS]] : {{.*}} -> !tile.tile<128x128xf32, psum>
// CHECK:         %[[ACT:.*]] = tile.unary %[[PRODUCT]] bias %[[B]] {fn = "gelu_apprx_tanh"} : {{.*}} -> !tile.tile<128x128xbf16, sbuf>
// CHECK:         tile.insert %[[ACT]], %[[P]][%[[T]], %c0]
// CHECK:         tile.matmul {{.*}} -> !tile.tile<128x2xf32, psum>
// CHECK:         tile.unary {{.*}} bias %[[B]] {fn = "gelu_apprx_tanh"}
// CHECK:       tile.extract %[[H]][%c0, %c0] : !tile.tile<128x2x128xbf16, sbuf> -> !tile.tile<128x128xbf16, sbuf>
// CHECK:       tile.matmul
// CHECK-NOT:   memref.alloc
// CHECK:       func.return
