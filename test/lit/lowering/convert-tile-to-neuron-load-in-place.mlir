// RUN: neuron-opt %s -p convert-tile-to-neuron | filecheck %s
// RUN: neuron-opt %s -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A tile filled by several loads, each inserted into its window: every load is a DMA straight into the whole
// tile's buffer (no copy), so each matmul waits only for the transfer of the K tiles it reads. A load inserted
// with a cast, or into a destination that is read again, keeps its own buffer and the copy.
func.func @pieces(%b: memref<384x64xbf16, #mem<hbm>>, %a: memref<384x32xbf16, #mem<hbm>>, %c: memref<128x64xf32, #mem<hbm>>, %y: memref<32x64xf32, #mem<hbm>>, %z: memref<128x2x64xbf16, #mem<hbm>>, %v: memref<128x64xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %empty = tile.empty : !tile.tile<128x3x64xbf16, sbuf>
  %first = tile.load %b[%c0, %c0] : memref<384x64xbf16, #mem<hbm>> -> !tile.tile<128x64xbf16, sbuf>
  %w0 = tile.insert %first, %empty[%c0, %c0] : !tile.tile<128x64xbf16, sbuf>, !tile.tile<128x3x64xbf16, sbuf>
  %rest = tile.load %b[%c128, %c0] : memref<384x64xbf16, #mem<hbm>> -> !tile.tile<128x64xbf16, sbuf>
  %w1 = tile.insert %rest, %w0[%c1, %c0] : !tile.tile<128x64xbf16, sbuf>, !tile.tile<128x3x64xbf16, sbuf>
  %cast = tile.load %c[%c0, %c0] : memref<128x64xf32, #mem<hbm>> -> !tile.tile<128x64xf32, sbuf>
  %w2 = tile.insert %cast, %w1[%c2, %c0] : !tile.tile<128x64xf32, sbuf>, !tile.tile<128x3x64xbf16, sbuf>
  %s0 = tile.load %a[%c0, %c0] : memref<384x32xbf16, #mem<hbm>> -> !tile.tile<128x32xbf16, sbuf>
  %s1 = tile.load %a[%c128, %c0] : memref<384x32xbf16, #mem<hbm>> -> !tile.tile<128x32xbf16, sbuf>
  %s2 = tile.load %a[%c256, %c0] : memref<384x32xbf16, #mem<hbm>> -> !tile.tile<128x32xbf16, sbuf>
  %m0 = tile.extract %w2[%c0, %c0] : !tile.tile<128x3x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
  %p0 = tile.matmul %s0, %m0 : (!tile.tile<128x32xbf16, sbuf>, !tile.tile<128x64xbf16, sbuf>) -> !tile.tile<32x64xf32, psum>
  %m1 = tile.extract %w2[%c1, %c0] : !tile.tile<128x3x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
  %p1 = tile.matmul %s1, %m1 acc %p0 : (!tile.tile<128x32xbf16, sbuf>, !tile.tile<128x64xbf16, sbuf>, !tile.tile<32x64xf32, psum>) -> !tile.tile<32x64xf32, psum>
  %m2 = tile.extract %w2[%c2, %c0] : !tile.tile<128x3x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
  %p2 = tile.matmul %s2, %m2 acc %p1 : (!tile.tile<128x32xbf16, sbuf>, !tile.tile<128x64xbf16, sbuf>, !tile.tile<32x64xf32, psum>) -> !tile.tile<32x64xf32, psum>
  %out = tile.copy %p2 : (!tile.tile<32x64xf32, psum>) -> !tile.tile<32x64xf32, sbuf>
  tile.store %out, %y[%c0, %c0] : !tile.tile<32x64xf32, sbuf>, memref<32x64xf32, #mem<hbm>>
  %other = tile.empty : !tile.tile<128x2x64xbf16, sbuf>
  %read = tile.load %b[%c0, %c0] : memref<384x64xbf16, #mem<hbm>> -> !tile.tile<128x64xbf16, sbuf>
  %o0 = tile.insert %read, %other[%c0, %c0] : !tile.tile<128x64xbf16, sbuf>, !tile.tile<128x2x64xbf16, sbuf>
  %again = tile.load %b[%c128, %c0] : memref<384x64xbf16, #mem<hbm>> -> !tile.tile<128x64xbf16, sbuf>
  %o1 = tile.insert %again, %o0[%c1, %c0] : !tile.tile<128x64xbf16, sbuf>, !tile.tile<128x2x64xbf16, sbuf>
  %slot = tile.extract %o0[%c0, %c0] : !tile.tile<128x2x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
  tile.store %slot, %v[%c0, %c0] : !tile.tile<128x64xbf16, sbuf>, memref<128x64xbf16, #mem<hbm>>
  tile.store %o1, %z[%c0, %c0, %c0] : !tile.tile<128x2x64xbf16, sbuf>, memref<128x2x64xbf16, #mem<hbm>>
  func.return
}
// CHECK-LABEL: func.func @pieces
// CHECK:       %[[WHOLE:.*]] = neuron.alloc : memref<128x3x64xbf16, #mem<sbuf>>
// CHECK-NEXT:  neuron.dma_copy dma dst %[[WHOLE]][0:128, 0, [[1, 64]]], src %b[0,
// CHECK-NEXT:  neuron.dma_copy dma dst %[[WHOLE]][0:128, 64, [[1, 64]]], src %b[8192,
// CHECK-NEXT:  %[[CAST:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:  neuron.dma_copy dma dst %[[CAST]]
// CHECK-NEXT:  neuron.tensor_copy {{.*}} dst %[[WHOLE]][0:128, 128, [[1, 64]]], src %[[CAST]]
// CHECK:       moving %[[WHOLE]][0:128, 0, [[1, 64]]]
// CHECK:       moving %[[WHOLE]][0:128, 64, [[1, 64]]]
// CHECK:       moving %[[WHOLE]][0:128, 128, [[1, 64]]]
// CHECK:       %[[OTHER:.*]] = neuron.alloc : memref<128x2x64xbf16, #mem<sbuf>>
// CHECK-NEXT:  neuron.dma_copy dma dst %[[OTHER]][0:128, 0, [[1, 64]]]
// CHECK-NEXT:  %[[AGAIN:.*]] = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
// CHECK-NEXT:  neuron.dma_copy dma dst %[[AGAIN]]
// CHECK:       neuron.tensor_copy {{.*}} src %[[AGAIN]]

// SEMANTICS: all outputs match
