// RUN: neuron-opt %s -p convert-tile-to-neuron | filecheck %s
// RUN: neuron-opt %s -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// tile.gather / tile.scatter become indirect dma_copys: the indexed HBM side's pattern starts with the indexed
// dimension over every row an offset may reach (here from row 3: 997 rows), then the row's own pattern.

// CHECK-LABEL: func.func @main
func.func @main(%w: memref<1000x64xf32, #mem<hbm>>, %dw: memref<1000x64xf32, #mem<hbm>>, %out: memref<128x64xf32, #mem<hbm>>, %x: memref<4096xf32, #mem<hbm>>, %out2: memref<64x7xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %zero = tile.fill {value = 0.0 : f64} : !tile.tile<128x1xf32, sbuf>
  %i = tile.copy %zero : (!tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x1xi32, sbuf>
  // CHECK: neuron.dma_copy dma dst %{{.*}}[0:128, 0, [[1, 32]]], src %{{.*}}[200, [[64, 997], [1, 32]]], offsets %{{.*}}[0:128, 0, [[1, 1]]] {indirect = "src"
  %rows = tile.gather %w[%c3, %c8], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x32xf32, sbuf>
  // CHECK: neuron.dma_copy dma dst %{{.*}}[8, [[64, 1000], [1, 32]]], src %{{.*}}[0:128, 0, [[1, 32]]], offsets %{{.*}}[0:128, 0, [[1, 1]]] {indirect = "dst", accumulate = true
  tile.scatter %rows, %dw[%c0, %c8], %i {dim = 0 : i64, dims = array<i64: 1>, accumulate} : !tile.tile<128x32xf32, sbuf>, memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf>
  tile.store %rows, %out[%c0, %c0] : !tile.tile<128x32xf32, sbuf>, memref<128x64xf32, #mem<hbm>>
  // One element per offset: no row pattern beyond the indexed dimension's.
  %ramp = tile.iota {steps = array<i64: 1>, channel_multiplier = 7 : i64} : !tile.tile<64x7xi32, sbuf>
  // CHECK: neuron.dma_copy dma dst %{{.*}}[0:64, 0, [[1, 7]]], src %{{.*}}[0, [[1, 4096]]], offsets %{{.*}}[0:64, 0, [[1, 7]]] {indirect = "src"
  %e = tile.gather %x[%c0], %ramp {dim = 0 : i64} : memref<4096xf32, #mem<hbm>>, !tile.tile<64x7xi32, sbuf> -> !tile.tile<64x7xf32, sbuf>
  tile.store %e, %out2[%c0, %c0] : !tile.tile<64x7xf32, sbuf>, memref<64x7xf32, #mem<hbm>>
  func.return
}

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
