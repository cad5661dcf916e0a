// RUN: neuron-opt %s --split-input-file -p convert-tile-to-neuron | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A transposed tile load (its partitions walk the tensor's contiguous dimension) of 2-byte elements it does not
// convert is a DMA transpose on a target whose DMAs transpose: the source read as rows [free, partitions]. A
// 4-byte or converting load, or one on trn1, stays a dma_copy through the transposing pattern.
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  // CHECK-LABEL: func.func @transposed_loads
  func.func @transposed_loads(%k: memref<2x512x64xbf16, #mem<hbm>>, %x: memref<256x32xf32, #mem<hbm>>, %y: memref<64x512xbf16, #mem<hbm>>, %z: memref<32x256xf32, #mem<hbm>>, %w: memref<64x512xf32, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    // CHECK: neuron.dma_transpose dma dst %{{.*}}[0:64, 0, [[1, 512]]], src %{{.*}}[32768, [[64, 512], [1, 64]]]
    %kt = tile.load %k[%c1, %c0, %c0] {dims = array<i64: 2, 1>} : memref<2x512x64xbf16, #mem<hbm>> -> !tile.tile<64x512xbf16, sbuf>
    tile.store %kt, %y[%c0, %c0] : !tile.tile<64x512xbf16, sbuf>, memref<64x512xbf16, #mem<hbm>>
    // CHECK: neuron.dma_copy dma dst %{{.*}}[0:32, 0, [[1, 256]]], src %{{.*}}[0, [[1, 32], [32, 256]]]
    %xt = tile.load %x[%c0, %c0] {dims = array<i64: 1, 0>} : memref<256x32xf32, #mem<hbm>> -> !tile.tile<32x256xf32, sbuf>
    tile.store %xt, %z[%c0, %c0] : !tile.tile<32x256xf32, sbuf>, memref<32x256xf32, #mem<hbm>>
    // CHECK: neuron.dma_copy dma dst %{{.*}}[0:64, 0, [[1, 512]]], src %{{.*}}[0, [[1, 64], [64, 512]]]
    %widened = tile.load %k[%c0, %c0, %c0] {dims = array<i64: 2, 1>} : memref<2x512x64xbf16, #mem<hbm>> -> !tile.tile<64x512xf32, sbuf>
    tile.store %widened, %w[%c0, %c0] : !tile.tile<64x512xf32, sbuf>, memref<64x512xf32, #mem<hbm>>
    func.return
  }
}
// SEMANTICS: check-semantics: 5 inputs, all outputs match

// -----

builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  // CHECK-LABEL: func.func @no_dma_transpose_on_trn1
  func.func @no_dma_transpose_on_trn1(%k: memref<512x64xbf16, #mem<hbm>>, %y: memref<64x512xbf16, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    // CHECK-NOT: neuron.dma_transpose
    // CHECK: neuron.dma_copy dma dst %{{.*}}[0:64, 0, [[1, 512]]], src %{{.*}}[0, [[1, 64], [64, 512]]]
    %kt = tile.load %k[%c0, %c0] {dims = array<i64: 1, 0>} : memref<512x64xbf16, #mem<hbm>> -> !tile.tile<64x512xbf16, sbuf>
    tile.store %kt, %y[%c0, %c0] : !tile.tile<64x512xbf16, sbuf>, memref<64x512xbf16, #mem<hbm>>
    func.return
  }
}

// -----

// A tile.load_transpose is one DMA transpose whose source walks the row dims, then the column dims: here the
// patches of a 16 x 16 / 16 convolution, (kernel row, kernel column) on the partitions, (output row, output
// column) on the free axes, and a chunk of whole channels' 4 x 4 patches.
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  // CHECK-LABEL: func.func @patches
  func.func @patches(%x: memref<2x3x14x16x14x16xbf16, #mem<hbm>>, %y: memref<128x14x14xbf16, #mem<hbm>>, %s: memref<2x3x5x4x7x4xbf16, #mem<hbm>>, %z: memref<48x10x7xbf16, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    // CHECK: neuron.dma_transpose dma dst %{{.*}}[0:128, 0, [[14, 14], [1, 14]]], src %{{.*}}[252672, [[3584, 14], [16, 14], [224, 8], [1, 16]]]
    %p = tile.load_transpose %x[%c1, %c2, %c0, %c8, %c0, %c0] {row_dims = array<i64: 2, 4>, row_sizes = array<i64: 14, 14>, column_dims = array<i64: 3, 5>, column_sizes = array<i64: 8, 16>} : memref<2x3x14x16x14x16xbf16, #mem<hbm>> -> !tile.tile<128x14x14xbf16, sbuf>
    tile.store %p, %y[%c0, %c0, %c0] : !tile.tile<128x14x14xbf16, sbuf>, memref<128x14x14xbf16, #mem<hbm>>
    // CHECK: neuron.dma_transpose dma dst %{{.*}}[0:48, 0, [[35, 2], [7, 5], [1, 7]]], src %{{.*}}[0, [[1680, 2], [112, 5], [4, 7], [560, 3], [28, 4], [1, 4]]]
    %q = tile.load_transpose %s[%c0, %c0, %c0, %c0, %c0, %c0] {row_dims = array<i64: 0, 2, 4>, row_sizes = array<i64: 2, 5, 7>, column_dims = array<i64: 1, 3, 5>, column_sizes = array<i64: 3, 4, 4>} : memref<2x3x5x4x7x4xbf16, #mem<hbm>> -> !tile.tile<48x2x5x7xbf16, sbuf>
    %r = tile.extract %q[%c1, %c0, %c0] : !tile.tile<48x2x5x7xbf16, sbuf> -> !tile.tile<48x5x7xbf16, sbuf>
    %u = tile.extract %q[%c0, %c0, %c0] : !tile.tile<48x2x5x7xbf16, sbuf> -> !tile.tile<48x5x7xbf16, sbuf>
    %e = tile.empty : !tile.tile<48x10x7xbf16, sbuf>
    %e1 = tile.insert %u, %e[%c0, %c0] : !tile.tile<48x5x7xbf16, sbuf>, !tile.tile<48x10x7xbf16, sbuf>
    %c5 = arith.constant 5 : index
    %e2 = tile.insert %r, %e1[%c5, %c0] : !tile.tile<48x5x7xbf16, sbuf>, !tile.tile<48x10x7xbf16, sbuf>
    tile.store %e2, %z[%c0, %c0, %c0] : !tile.tile<48x10x7xbf16, sbuf>, memref<48x10x7xbf16, #mem<hbm>>
    func.return
  }
}
// SEMANTICS: check-semantics: 4 inputs, all outputs match
