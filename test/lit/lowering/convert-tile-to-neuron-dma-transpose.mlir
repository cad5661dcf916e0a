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
