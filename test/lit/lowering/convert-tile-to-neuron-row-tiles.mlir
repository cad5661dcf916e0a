// RUN: neuron-opt %s -p convert-tile-to-neuron | filecheck %s
// RUN: neuron-opt %s -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Two heads of 64 features share a [128, n] tile of Q^T and one of K^T (head 0 on partitions 0..63, head 1 on
// 64..127): each head's scores contract over its own rows, in its own row tile of the PE array, so the two
// products stream together. A product over 32 rows takes a row tile of 32 on trn2; no row tile holds 96 rows,
// so a product over them runs on the whole array.
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @two_heads(%q: memref<128x128xbf16, #mem<hbm>>, %k: memref<128x256xbf16, #mem<hbm>>, %s: memref<4x128x256xf32, #mem<hbm>>) -> memref<4x128x256xf32, #mem<hbm>> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %qt = tile.load %q[%c0, %c0] : memref<128x128xbf16, #mem<hbm>> -> !tile.tile<128x128xbf16, sbuf>
    %kt = tile.load %k[%c0, %c0] : memref<128x256xbf16, #mem<hbm>> -> !tile.tile<128x256xbf16, sbuf>
    %s0 = tile.matmul %qt, %kt {rows = array<i64: 0, 64>} : (!tile.tile<128x128xbf16, sbuf>, !tile.tile<128x256xbf16, sbuf>) -> !tile.tile<128x256xf32, psum>
    %s1 = tile.matmul %qt, %kt {rows = array<i64: 64, 64>} : (!tile.tile<128x128xbf16, sbuf>, !tile.tile<128x256xbf16, sbuf>) -> !tile.tile<128x256xf32, psum>
    %s2 = tile.matmul %qt, %kt {rows = array<i64: 96, 32>} : (!tile.tile<128x128xbf16, sbuf>, !tile.tile<128x256xbf16, sbuf>) -> !tile.tile<128x256xf32, psum>
    %s3 = tile.matmul %qt, %kt {rows = array<i64: 0, 96>} : (!tile.tile<128x128xbf16, sbuf>, !tile.tile<128x256xbf16, sbuf>) -> !tile.tile<128x256xf32, psum>
    %o0 = tile.copy %s0 : (!tile.tile<128x256xf32, psum>) -> !tile.tile<128x256xf32, sbuf>
    %o1 = tile.copy %s1 : (!tile.tile<128x256xf32, psum>) -> !tile.tile<128x256xf32, sbuf>
    %o2 = tile.copy %s2 : (!tile.tile<128x256xf32, psum>) -> !tile.tile<128x256xf32, sbuf>
    %o3 = tile.copy %s3 : (!tile.tile<128x256xf32, psum>) -> !tile.tile<128x256xf32, sbuf>
    tile.store %o0, %s[%c0, %c0, %c0] : !tile.tile<128x256xf32, sbuf>, memref<4x128x256xf32, #mem<hbm>>
    tile.store %o1, %s[%c1, %c0, %c0] : !tile.tile<128x256xf32, sbuf>, memref<4x128x256xf32, #mem<hbm>>
    tile.store %o2, %s[%c2, %c0, %c0] : !tile.tile<128x256xf32, sbuf>, memref<4x128x256xf32, #mem<hbm>>
    tile.store %o3, %s[%c3, %c0, %c0] : !tile.tile<128x256xf32, sbuf>, memref<4x128x256xf32, #mem<hbm>>
    func.return %s : memref<4x128x256xf32, #mem<hbm>>
  }
}
// CHECK: neuron.nc_matmul tensor dst %{{.*}}[0:128, 0, [[1, 256]]], stationary %[[Q:.*]][0:64, 0, [[1, 128]]], moving %[[K:.*]][0:64, 0, [[1, 256]]] {row_tile_start = 0 : i64, row_tile_size = 64 : i64}
// CHECK: neuron.nc_matmul tensor dst %{{.*}}[0:128, 0, [[1, 256]]], stationary %[[Q]][64:128, 0, [[1, 128]]], moving %[[K]][64:128, 0, [[1, 256]]] {row_tile_start = 64 : i64, row_tile_size = 64 : i64}
// CHECK: neuron.nc_matmul tensor dst %{{.*}}[0:128, 0, [[1, 256]]], stationary %[[Q]][96:128, 0, [[1, 128]]], moving %[[K]][96:128, 0, [[1, 256]]] {row_tile_start = 96 : i64, row_tile_size = 32 : i64}
// CHECK: neuron.nc_matmul tensor dst %{{.*}}[0:128, 0, [[1, 256]]], stationary %[[Q]][0:96, 0, [[1, 128]]], moving %[[K]][0:96, 0, [[1, 256]]] :
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
