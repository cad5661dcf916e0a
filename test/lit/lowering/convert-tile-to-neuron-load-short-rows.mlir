// RUN: neuron-opt %s -p convert-tile-to-neuron | filecheck %s
// RUN: neuron-opt %s -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A band of short rows between border columns (a pooling's padded rows: 56 bf16 elements, 112 bytes) would take
// a DMA of 112-byte chunks straight into its window, overhead-bound: the rows are loaded whole into a buffer of
// their own (one chunk of 448 bytes per partition) and copied into the window on chip. Rows of 256 bytes or more
// (the 200-wide band) still arrive straight into their window.
func.func @main(%x: memref<128x4x56xbf16, #mem<hbm>>, %w: memref<128x2x200xbf16, #mem<hbm>>, %y: memref<128x6x58xbf16, #mem<hbm>>, %z: memref<128x2x202xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %band = tile.fill {value = 0.0 : f64} : !tile.tile<128x6x58xbf16, sbuf>
  %rows = tile.load %x[%c0, %c0, %c0] : memref<128x4x56xbf16, #mem<hbm>> -> !tile.tile<128x4x56xbf16, sbuf>
  %filled = tile.insert %rows, %band[%c1, %c1] : !tile.tile<128x4x56xbf16, sbuf>, !tile.tile<128x6x58xbf16, sbuf>
  tile.store %filled, %y[%c0, %c0, %c0] : !tile.tile<128x6x58xbf16, sbuf>, memref<128x6x58xbf16, #mem<hbm>>
  %wide = tile.fill {value = 0.0 : f64} : !tile.tile<128x2x202xbf16, sbuf>
  %long = tile.load %w[%c0, %c0, %c0] : memref<128x2x200xbf16, #mem<hbm>> -> !tile.tile<128x2x200xbf16, sbuf>
  %placed = tile.insert %long, %wide[%c0, %c1] : !tile.tile<128x2x200xbf16, sbuf>, !tile.tile<128x2x202xbf16, sbuf>
  tile.store %placed, %z[%c0, %c0, %c0] : !tile.tile<128x2x202xbf16, sbuf>, memref<128x2x202xbf16, #mem<hbm>>
  func.return
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[BAND:.*]] = neuron.alloc : memref<128x6x58xbf16, #mem<sbuf>>
// CHECK-NEXT:  neuron.memset
// CHECK-NEXT:  %[[ROWS:.*]] = neuron.alloc : memref<128x4x56xbf16, #mem<sbuf>>
// CHECK-NEXT:  neuron.dma_copy dma dst %[[ROWS]][0:128, 0, [[56, 4], [1, 56]]], src %x
// CHECK-NEXT:  neuron.tensor_copy {{.*}} dst %[[BAND]][0:128, 59, [[58, 4], [1, 56]]], src %[[ROWS]]
// CHECK:       %[[WIDE:.*]] = neuron.alloc : memref<128x2x202xbf16, #mem<sbuf>>
// CHECK-NEXT:  neuron.memset
// CHECK-NEXT:  neuron.dma_copy dma dst %[[WIDE]][0:128, 1, [[202, 2], [1, 200]]], src %w

// SEMANTICS: all outputs match
