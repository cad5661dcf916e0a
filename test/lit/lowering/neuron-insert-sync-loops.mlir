// RUN: neuron-opt %s --split-input-file -p neuron-insert-sync | filecheck %s
// The simulator's race checker runs on the synchronised IR: the fewer waits are still enough.
// RUN: neuron-opt %s --split-input-file -p neuron-insert-sync --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// neuron-insert-sync traces a dynamic offset through the arith ops that compute it: an offset affine in loop
// inductions gives an exact footprint per iteration, so accesses to disjoint parts of one buffer are not
// ordered, while those of different iterations that do overlap still are (loop-carried dependences).

// An elementwise stream with two tiles in flight per iteration, on four DMA queues: the two stores write
// disjoint rows of %y in every iteration and across iterations, so neither waits for the other (they did
// when a loop-dependent offset covered the whole buffer). Each still waits for the load that filled its source.
// CHECK-LABEL: func.func @disjoint_stream_stores
func.func @disjoint_stream_stores(%x: memref<1024x64xf32, #mem<hbm>>, %y: memref<1024x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  scf.for %i = %c0 to %c1024 step %c256 {
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
// the next iteration's load overwrites %a only after this iteration's store has read it (write after read)
// CHECK:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 0 : i64, waits = array<i64: 1>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 1 : i64, waits = array<i64: 0>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 2 : i64, id = 2 : i64, waits = array<i64: 3>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 3 : i64, id = 3 : i64, waits = array<i64: 2>}

// -----

// The output tiles of a matmul-like nest: tile (i, j) is rows i..i+127 and columns j..j+127 of a 256x1024
// matrix, and two queues store the two column halves of each 256-wide step. Their byte ranges interleave row
// by row, but no element is common to two tiles: the stores wait only for the memsets of their sources.
// CHECK-LABEL: func.func @disjoint_output_tiles
func.func @disjoint_output_tiles(%y: memref<256x1024xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  %t = neuron.alloc {address = 0 : i64} : memref<128x128xf32, #mem<sbuf>>
  %u = neuron.alloc {address = 512 : i64} : memref<128x128xf32, #mem<sbuf>>
  neuron.memset vector dst %t[0:128, 0, [[1, 128]]] {value = 1.0 : f64} : memref<128x128xf32, #mem<sbuf>>
  neuron.memset gpsimd dst %u[0:128, 0, [[1, 128]]] {value = 2.0 : f64} : memref<128x128xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c256 step %c128 {
    %row = arith.muli %i, %c1024 : index
    scf.for %j = %c0 to %c1024 step %c256 {
      %o0 = arith.addi %row, %j : index
      %o1 = arith.addi %o0, %c128 : index
      neuron.dma_copy dma dst %y[%o0 + 0, [[1024, 128], [1, 128]]], src %t[0:128, 0, [[1, 128]]] {queue = 0 : i64} : memref<256x1024xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[%o1 + 0, [[1024, 128], [1, 128]]], src %u[0:128, 0, [[1, 128]]] {queue = 1 : i64} : memref<256x1024xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    }
  }
  func.return
}
// CHECK:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 2 : i64, waits = array<i64: 0>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 3 : i64, waits = array<i64: 1>}

// -----

// True loop-carried dependences through HBM stay. Iteration i stores row i of %y; it reads row i - 1, which
// the previous iteration stored (read after write), and row i + 1, which the next iteration overwrites (write
// after read); row i + 8 is never written by the loop, so its load waits for nothing.
// CHECK-LABEL: func.func @loop_carried_through_hbm
func.func @loop_carried_through_hbm(%y: memref<16x64xf32, #mem<hbm>>) {
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c64 = arith.constant 64 : index
  %c512 = arith.constant 512 : index
  %t = neuron.alloc {address = 0 : i64} : memref<1x64xf32, #mem<sbuf>>
  %u = neuron.alloc {address = 256 : i64} : memref<1x64xf32, #mem<sbuf>>
  %v = neuron.alloc {address = 512 : i64} : memref<1x64xf32, #mem<sbuf>>
  %w = neuron.alloc {address = 768 : i64} : memref<1x64xf32, #mem<sbuf>>
  neuron.memset vector dst %t[0:1, 0, [[1, 64]]] {value = 1.0 : f64} : memref<1x64xf32, #mem<sbuf>>
  scf.for %i = %c1 to %c7 step %c1 {
    %next = arith.addi %i, %c1 : index
    %next_row = arith.muli %next, %c64 : index
    neuron.dma_copy dma dst %v[0:1, 0, [[1, 64]]], src %y[%next_row + 0, [[1, 64]]] {queue = 3 : i64} : memref<1x64xf32, #mem<sbuf>>, memref<16x64xf32, #mem<hbm>>
    %row = arith.muli %i, %c64 : index
    neuron.dma_copy dma dst %y[%row + 0, [[1, 64]]], src %t[0:1, 0, [[1, 64]]] {queue = 1 : i64} : memref<16x64xf32, #mem<hbm>>, memref<1x64xf32, #mem<sbuf>>
    %previous = arith.subi %i, %c1 : index
    %previous_row = arith.muli %previous, %c64 : index
    neuron.dma_copy dma dst %u[0:1, 0, [[1, 64]]], src %y[%previous_row + 0, [[1, 64]]] {queue = 2 : i64} : memref<1x64xf32, #mem<sbuf>>, memref<16x64xf32, #mem<hbm>>
    %far_row = arith.addi %row, %c512 : index
    neuron.dma_copy dma dst %w[0:1, 0, [[1, 64]]], src %y[%far_row + 0, [[1, 64]]] {queue = 4 : i64} : memref<1x64xf32, #mem<sbuf>>, memref<16x64xf32, #mem<hbm>>
  }
  func.return
}
// CHECK:       neuron.memset {{.*}} id = 0 : i64}
// the load of row i + 1 does not wait for the store of row i: they are disjoint
// CHECK:       neuron.dma_copy {{.*}} {queue = 3 : i64, id = 1 : i64}
// the store of row i waits until the previous iteration's load of that row has read it
// CHECK:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 2 : i64, waits = array<i64: 0, 1>}
// the load of row i - 1 waits for the previous iteration's store (the latest instance of id 2 is later still)
// CHECK:       neuron.dma_copy {{.*}} {queue = 2 : i64, id = 3 : i64, waits = array<i64: 2>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 4 : i64, id = 4 : i64}

// -----

// Windows that overlap the next iteration's: queue 0 stores rows i, i+1 and queue 1 rows i+2, i+3 (i = 0, 2, ...). In
// one iteration the two are disjoint, so queue 1 does not wait for queue 0; but queue 0's next store rewrites
// the rows queue 1 just stored (write after write across iterations), so it waits for it.
// CHECK-LABEL: func.func @overlapping_windows
func.func @overlapping_windows(%y: memref<16x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c12 = arith.constant 12 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %t = neuron.alloc {address = 0 : i64} : memref<2x64xf32, #mem<sbuf>>
  neuron.memset vector dst %t[0:2, 0, [[1, 64]]] {value = 1.0 : f64} : memref<2x64xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c12 step %c2 {
    %o0 = arith.muli %i, %c64 : index
    %o1 = arith.addi %o0, %c128 : index
    neuron.dma_copy dma dst %y[%o0 + 0, [[64, 2], [1, 64]]], src %t[0:2, 0, [[1, 64]]] {queue = 0 : i64} : memref<16x64xf32, #mem<hbm>>, memref<2x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%o1 + 0, [[64, 2], [1, 64]]], src %t[0:2, 0, [[1, 64]]] {queue = 1 : i64} : memref<16x64xf32, #mem<hbm>>, memref<2x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 1 : i64, waits = array<i64: 0, 2>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 2 : i64, waits = array<i64: 0>}

// -----

// An offset that is not affine in the inductions (a remainder) may be anywhere in its buffer: the store that
// uses it is ordered against the other store of %y even though the two never meet at run time.
// CHECK-LABEL: func.func @non_affine_offset
func.func @non_affine_offset(%y: memref<8x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %t = neuron.alloc {address = 0 : i64} : memref<1x64xf32, #mem<sbuf>>
  neuron.memset vector dst %t[0:1, 0, [[1, 64]]] {value = 1.0 : f64} : memref<1x64xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c4 step %c1 {
    %r = arith.remsi %i, %c4 : index
    %o0 = arith.muli %r, %c64 : index
    %i1 = arith.addi %i, %c4 : index
    %o1 = arith.muli %i1, %c64 : index
    neuron.dma_copy dma dst %y[%o0 + 0, [[1, 64]]], src %t[0:1, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x64xf32, #mem<hbm>>, memref<1x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%o1 + 0, [[1, 64]]], src %t[0:1, 0, [[1, 64]]] {queue = 1 : i64} : memref<8x64xf32, #mem<hbm>>, memref<1x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 1 : i64, waits = array<i64: 0, 2>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 2 : i64, waits = array<i64: 0, 1>}

// -----

// A loop of one iteration has no earlier iteration: reusing %t carries no dependence (compare
// @loop_carried_reuse in neuron-insert-sync.mlir, where the load waits for the previous iteration's add).
// CHECK-LABEL: func.func @single_iteration
func.func @single_iteration(%x: memref<128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %acc = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<sbuf>>
  neuron.memset vector dst %acc[0:128, 0, [[1, 64]]] {value = 0.0 : f64} : memref<128x64xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c1 step %c1 {
    %t = neuron.alloc {address = 256 : i64} : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
    neuron.tensor_tensor vector dst %acc[0:128, 0, [[1, 64]]], in0 %acc[0:128, 0, [[1, 64]]], in1 %t[0:128, 0, [[1, 64]]] {op = "add"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  }
  neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %acc[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 1 : i64}
// CHECK:       neuron.tensor_tensor {{.*}} {op = "add", id = 2 : i64, waits = array<i64: 1>}
// CHECK:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 3 : i64, waits = array<i64: 2>}

// SEMANTICS-COUNT-6: check-semantics: {{[0-9]+}} inputs, all outputs match
