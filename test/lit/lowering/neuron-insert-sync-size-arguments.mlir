// RUN: neuron-opt %s --split-input-file -p neuron-insert-sync | filecheck %s

// neuron-insert-sync in a size bucket's program: loops whose bounds are computed from size arguments (index
// arguments ranged by `neuron.size_arguments`) count with the most trips those ranges allow, so an offset affine
// in their inductions keeps an exact footprint.

// An elementwise stream in a size bucket's program, over the call's rows: the loop's end is computed from the size
// argument %n, whose declared range (1..1024) bounds the induction, so the offsets stay exact (no 32-bit
// wrap-around): the stores of one iteration, and of different ones, still do not wait for each other.
// CHECK-LABEL: func.func @stream_over_the_calls_rows
func.func @stream_over_the_calls_rows(%x: memref<1024x64xf32, #mem<hbm>>, %y: memref<1024x64xf32, #mem<hbm>>, %n: index) attributes {neuron.size_arguments = [["n", 1 : i64, 1024 : i64]]} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c255 = arith.constant 255 : index
  %c256 = arith.constant 256 : index
  %rounded = arith.addi %n, %c255 : index
  %pairs = arith.floordivsi %rounded, %c256 : index
  %end = arith.muli %pairs, %c256 : index
  scf.for %i = %c0 to %end step %c256 {
    %a = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<sbuf>>
    %b = neuron.alloc {address = 256 : i64} : memref<128x64xf32, #mem<sbuf>>
    %o0 = arith.muli %i, %c64 : index
    %i1 = arith.addi %i, %c128 : index
    %o1 = arith.muli %i1, %c64 : index
    neuron.dma_copy dma dst %a[0:128, 0, [[1, 64]]], src %x[%o0 + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<1024x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[%o0 + 0, [[64, 128], [1, 64]]], src %a[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<1024x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %b[0:128, 0, [[1, 64]]], src %x[%o1 + 0, [[64, 128], [1, 64]]] {queue = 2 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<1024x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[%o1 + 0, [[64, 128], [1, 64]]], src %b[0:128, 0, [[1, 64]]] {queue = 3 : i64} : memref<1024x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 0 : i64, waits = array<i64: 1>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 1 : i64, waits = array<i64: 0>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 2 : i64, id = 2 : i64, waits = array<i64: 3>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 3 : i64, id = 3 : i64, waits = array<i64: 2>}

// -----

// A loop over the call's rows unrolled into two copies over its whole rounds, then the trip left: either loop may
// run no trip (one row tile: no round; an even count: no trip left). VectorE reads the weights %w in both; the
// GpSimdE memset that overwrites %w afterwards cannot trust the last of them to have been issued, so it waits for
// the tail's read, the rounds' reads and the read before the loops, where one wait (on the latest in program
// order) suffices after loops that surely run.
// CHECK-LABEL: func.func @reads_in_loops_that_may_not_run
func.func @reads_in_loops_that_may_not_run(%n: index) attributes {neuron.size_arguments = [["n", 1 : i64, 512 : i64]]} {
  %c0 = arith.constant 0 : index
  %c127 = arith.constant 127 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %rounded = arith.addi %n, %c127 : index
  %tiles = arith.floordivsi %rounded, %c128 : index
  %end = arith.muli %tiles, %c128 : index
  %rounds = arith.floordivsi %end, %c256 : index
  %rounds_end = arith.muli %rounds, %c256 : index
  %w = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<sbuf>>
  %y = neuron.alloc {address = 256 : i64} : memref<128x64xf32, #mem<sbuf>>
  neuron.memset gpsimd dst %w[0:128, 0, [[1, 64]]] {value = 1.0 : f64} : memref<128x64xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %y[0:128, 0, [[1, 64]]], src %w[0:128, 0, [[1, 64]]] : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  scf.for %i = %c0 to %rounds_end step %c256 {
    neuron.tensor_copy vector dst %y[0:128, 0, [[1, 64]]], src %w[0:128, 0, [[1, 64]]] : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  }
  scf.for %j = %rounds_end to %end step %c128 {
    neuron.tensor_copy vector dst %y[0:128, 0, [[1, 64]]], src %w[0:128, 0, [[1, 64]]] : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  }
  neuron.memset gpsimd dst %w[0:128, 0, [[1, 64]]] {value = 2.0 : f64} : memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK:       neuron.memset gpsimd {{.*}} {value = 2.000000e+00 : f64, id = 4 : i64, waits = array<i64: 1, 2, 3>}
