// RUN: neuron-opt %s --split-input-file -p neuron-unroll-loops | filecheck %s
// RUN: neuron-opt %s --split-input-file -p 'neuron-unroll-loops{factor=2}' | filecheck %s --check-prefix=TWO
// RUN: neuron-opt %s --split-input-file -p 'neuron-unroll-loops{max-copies=2}' | filecheck %s --check-prefix=TWO
// RUN: neuron-opt %S/Inputs/mlp_backward.neuron.mlir -p neuron-unroll-loops,neuron-allocate-memory,neuron-insert-sync --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: not neuron-opt %s --split-input-file -p 'neuron-unroll-loops{max-copies=1}' 2>&1 | filecheck %s --check-prefix=BAD

// BAD: neuron-unroll-loops: max-copies must be at least 2, got 1

// An innermost loop that moves data runs several copies of its body per iteration, each with its own buffers.
// This body is latency-bound (a 32 KiB load, 64 ScalarE elements per partition and a store: the ~2 us fixed
// cost of each DMA dominates), so three copies are in flight. Three divide the 6 trips: no copy follows the loop.
// CHECK-LABEL: func.func @scale_rows
// TWO-LABEL:   func.func @scale_rows
func.func @scale_rows(%x: memref<6x128x64xf32, #mem<hbm>>, %y: memref<6x128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c8192 = arith.constant 8192 : index
  scf.for %i = %c0 to %c6 step %c1 {
    %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    %offset = arith.muli %i, %c8192 : index
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<6x128x64xf32, #mem<hbm>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%offset + 0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<6x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       scf.for %[[I:.*]] = %c0 to %c6 step %c3 {
// CHECK-NEXT:    %[[A:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:    %[[OA:.*]] = arith.muli %[[I]], %c8192 : index
// CHECK:         neuron.activation scalar dst %[[A]]
// CHECK:         %[[NEXT:.*]] = arith.addi %[[I]], %c1 : index
// CHECK-NEXT:    %[[B:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:    %[[OB:.*]] = arith.muli %[[NEXT]], %c8192 : index
// CHECK:         neuron.activation scalar dst %[[B]]
// CHECK:         %[[LAST:.*]] = arith.addi %[[I]], %c2 : index
// CHECK-NEXT:    %[[C:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:    %[[OC:.*]] = arith.muli %[[LAST]], %c8192 : index
// CHECK:         neuron.activation scalar dst %[[C]]
// CHECK-NEXT:    neuron.dma_copy
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return

// With the number of copies fixed at two (or capped at two), double buffering.
// TWO:         scf.for %{{.*}} = %c0 to %c6 step %c2 {
// TWO-COUNT-2:   neuron.activation
// TWO-NOT:       neuron.activation
// TWO:         func.return

// -----

// Three copies must divide the trip count: 7 trips would leave copies after the loop, so two, and the seventh
// trip follows the loop.
// CHECK-LABEL: func.func @seven_trips
// TWO-LABEL:   func.func @seven_trips
func.func @seven_trips(%x: memref<7x128x64xf32, #mem<hbm>>, %y: memref<7x128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c8192 = arith.constant 8192 : index
  scf.for %i = %c0 to %c7 step %c1 {
    %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    %offset = arith.muli %i, %c8192 : index
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<7x128x64xf32, #mem<hbm>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%offset + 0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<7x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       scf.for %{{.*}} = %c0 to %c6 step %c2 {
// CHECK-COUNT-2: neuron.activation
// CHECK:       }
// CHECK:       neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:  arith.muli %c6, %c8192 : index
// CHECK-NOT:   scf.for
// TWO:         scf.for %{{.*}} = %c0 to %c6 step %c2 {

// -----

// The same latency-bound body (16 KiB per partition a copy) next to a buffer that holds 220000 of the 229376
// bytes of a trn2 SBUF partition from before the loop until after it: a third copy would not fit, so two.
// CHECK-LABEL: func.func @too_big_for_three
// TWO-LABEL:   func.func @too_big_for_three
func.func @too_big_for_three(%x: memref<6x128x1024xf32, #mem<hbm>>, %y: memref<6x128x1024xf32, #mem<hbm>>, %z: memref<128x55000xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c131072 = arith.constant 131072 : index
  %keep = neuron.alloc : memref<128x55000xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %keep[0:128, 0, [[1, 55000]]], src %z[0, [[55000, 128], [1, 55000]]] {queue = 0 : i64} : memref<128x55000xf32, #mem<sbuf>>, memref<128x55000xf32, #mem<hbm>>
  scf.for %i = %c0 to %c6 step %c1 {
    %t = neuron.alloc : memref<128x1024xf32, #mem<sbuf>>
    %offset = arith.muli %i, %c131072 : index
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 1024]]], src %x[%offset + 0, [[1024, 128], [1, 1024]]] {queue = 0 : i64} : memref<128x1024xf32, #mem<sbuf>>, memref<6x128x1024xf32, #mem<hbm>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 1024]]], src %t[0:128, 0, [[1, 1024]]] {func = "exp"} : memref<128x1024xf32, #mem<sbuf>>, memref<128x1024xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%offset + 0, [[1024, 128], [1, 1024]]], src %t[0:128, 0, [[1, 1024]]] {queue = 1 : i64} : memref<6x128x1024xf32, #mem<hbm>>, memref<128x1024xf32, #mem<sbuf>>
  }
  neuron.dma_copy dma dst %z[0, [[55000, 128], [1, 55000]]], src %keep[0:128, 0, [[1, 55000]]] {queue = 0 : i64} : memref<128x55000xf32, #mem<hbm>>, memref<128x55000xf32, #mem<sbuf>>
  func.return
}
// CHECK:       scf.for %{{.*}} = %c0 to %c6 step %c2 {
// CHECK-COUNT-2: neuron.activation
// CHECK:       }
// CHECK-NOT:   scf.for
// TWO:         scf.for %{{.*}} = %c0 to %c6 step %c2 {

// -----

// A body whose 4 MiB load and store keep the DMA engines busy for most of its chain is bandwidth-bound: a third
// copy would buy nothing, so two, though three would fit.
// CHECK-LABEL: func.func @bandwidth_bound
// TWO-LABEL:   func.func @bandwidth_bound
func.func @bandwidth_bound(%x: memref<6x128x16384xbf16, #mem<hbm>>, %y: memref<6x128x16384xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c2097152 = arith.constant 2097152 : index
  scf.for %i = %c0 to %c6 step %c1 {
    %t = neuron.alloc : memref<128x16384xbf16, #mem<sbuf>>
    %offset = arith.muli %i, %c2097152 : index
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 16384]]], src %x[%offset + 0, [[16384, 128], [1, 16384]]] {queue = 0 : i64} : memref<128x16384xbf16, #mem<sbuf>>, memref<6x128x16384xbf16, #mem<hbm>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 16384]]], src %t[0:128, 0, [[1, 16384]]] {func = "exp"} : memref<128x16384xbf16, #mem<sbuf>>, memref<128x16384xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%offset + 0, [[16384, 128], [1, 16384]]], src %t[0:128, 0, [[1, 16384]]] {queue = 1 : i64} : memref<6x128x16384xbf16, #mem<hbm>>, memref<128x16384xbf16, #mem<sbuf>>
  }
  func.return
}
// CHECK:       scf.for %{{.*}} = %c0 to %c6 step %c2 {
// CHECK-COUNT-2: neuron.activation
// CHECK:       }
// CHECK-NOT:   scf.for
// TWO:         scf.for %{{.*}} = %c0 to %c6 step %c2 {

// -----

// A loop nested in the body that only computes (a matmul's K loop over the chunk the body loaded) does not keep
// the body from being unrolled: the nested loop is copied with it, so the next trip's load goes to a buffer of its
// own instead of waiting for the compute of this one. Four trips: two copies.
// CHECK-LABEL: func.func @nested_compute_loop
// TWO-LABEL:   func.func @nested_compute_loop
func.func @nested_compute_loop(%x: memref<4x128x64xf32, #mem<hbm>>, %y: memref<4x128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8192 = arith.constant 8192 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    %offset = arith.muli %i, %c8192 : index
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<4x128x64xf32, #mem<hbm>>
    scf.for %j = %c0 to %c3 step %c1 {
      neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
    }
    neuron.dma_copy dma dst %y[%offset + 0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<4x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       scf.for %{{.*}} = %c0 to %c4 step %c2 {
// CHECK-NEXT:    %[[A:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK:         neuron.dma_copy dma dst %[[A]]
// CHECK-NEXT:    scf.for %{{.*}} = %c0{{.*}} to %c3 step %c1{{.*}} {
// CHECK-NEXT:      neuron.activation scalar dst %[[A]]
// CHECK-NEXT:    }
// CHECK:         %[[B:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK:         neuron.dma_copy dma dst %[[B]]
// CHECK-NEXT:    scf.for %{{.*}} = %c0{{.*}} to %c3 step %c1{{.*}} {
// CHECK-NEXT:      neuron.activation scalar dst %[[B]]
// CHECK-NEXT:    }
// CHECK-NEXT:    neuron.dma_copy dma dst %y
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
// TWO:         scf.for %{{.*}} = %c0 to %c4 step %c2 {

// -----

// A loop nested in the body that moves data is the one unrolled; the loop around it stays rolled.
// CHECK-LABEL: func.func @nested_moving_loop
func.func @nested_moving_loop(%x: memref<4x128x64xf32, #mem<hbm>>, %y: memref<4x128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8192 = arith.constant 8192 : index
  %c16384 = arith.constant 16384 : index
  scf.for %i = %c0 to %c2 step %c1 {
    %base = arith.muli %i, %c16384 : index
    scf.for %j = %c0 to %c2 step %c1 {
      %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      %row = arith.muli %j, %c8192 : index
      %offset = arith.addi %base, %row : index
      neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<4x128x64xf32, #mem<hbm>>
      neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[%offset + 0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<4x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
    }
  }
  func.return
}
// CHECK:       scf.for %{{.*}} = %c0{{.*}} to %c2 step %c1{{.*}} {
// CHECK-NOT:     scf.for
// CHECK-COUNT-2: neuron.activation
// CHECK-NOT:     neuron.activation
// CHECK:       func.return

// -----

// A loop without data movement has nothing to overlap and stays as it is.
// CHECK-LABEL: func.func @no_dma
// TWO-LABEL:   func.func @no_dma
func.func @no_dma() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c4 step %c1 {
    neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       scf.for %{{.*}} = %c0 to %c4 step %c1 {

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// A loop whose upper bound is computed at run time (a size bucket's row tiles: ceil(n / 128) * 128 from the
// size argument %n) gets two copies over its whole rounds; the trips left (none or one) run in the loop itself,
// now starting where the rounds end.
// CHECK-LABEL: func.func @call_rows
func.func @call_rows(%x: memref<512x64xf32, #mem<hbm>>, %y: memref<512x64xf32, #mem<hbm>>, %n: index) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c127 = arith.constant 127 : index
  %c128 = arith.constant 128 : index
  %rounded = arith.addi %n, %c127 : index
  %tiles = arith.floordivsi %rounded, %c128 : index
  %end = arith.muli %tiles, %c128 : index
  scf.for %i = %c0 to %end step %c128 {
    %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    %offset = arith.muli %i, %c64 : index
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<512x64xf32, #mem<hbm>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%offset + 0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<512x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  }
  func.return
}
// CHECK:       %[[END:.*]] = arith.muli %tiles, %c128{{.*}} : index
// CHECK-NEXT:  %[[ROUNDS:.*]] = arith.floordivsi %[[END]], %c256 : index
// CHECK-NEXT:  %[[COVERED:.*]] = arith.muli %[[ROUNDS]], %c256 : index
// CHECK-NEXT:  scf.for %[[I:.*]] = %c0{{.*}} to %[[COVERED]] step %c256 {
// CHECK-COUNT-2: neuron.activation
// CHECK-NEXT:    neuron.dma_copy
// CHECK-NEXT:  }
// CHECK-NEXT:  scf.for %{{.*}} = %[[COVERED]] to %[[END]] step %c128{{.*}} {
// CHECK-NEXT:    neuron.alloc
// CHECK-NEXT:    arith.muli
// CHECK-NEXT:    neuron.dma_copy
// CHECK-NEXT:    neuron.activation
// CHECK-NEXT:    neuron.dma_copy
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return

// -----

// A size bucket's nest over the call's batches (%b, 1..4) and the 128-row tiles of its sequence (%s, 1..512): each
// loop may run at most four trips, so each becomes one copy per trip. The tiles' loop (innermost) first: tile 0
// always runs (s >= 1) and is plain code, tiles 1 to 3 each in a loop from 128 j to min(end, 128 (j + 1)), one trip
// or none; then the batches' loop around them the same way, four copies of the expanded body, 16 tile bodies in
// all. Every copy's induction is a constant and allocates its own buffers, so the copies overlap.
// CHECK-LABEL: func.func @short_call_loops
func.func @short_call_loops(%x: memref<4x512x64xf32, #mem<hbm>>, %y: memref<4x512x64xf32, #mem<hbm>>, %b: index, %s: index) attributes {neuron.size_arguments = [["b", 1 : i64, 4 : i64], ["s", 1 : i64, 512 : i64]]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c127 = arith.constant 127 : index
  %c128 = arith.constant 128 : index
  %c32768 = arith.constant 32768 : index
  %rounded = arith.addi %s, %c127 : index
  %tiles = arith.floordivsi %rounded, %c128 : index
  %end = arith.muli %tiles, %c128 : index
  scf.for %i = %c0 to %b step %c1 {
    scf.for %j = %c0 to %end step %c128 {
      %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      %batch = arith.muli %i, %c32768 : index
      %row = arith.muli %j, %c64 : index
      %offset = arith.addi %batch, %row : index
      neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<4x512x64xf32, #mem<hbm>>
      neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[%offset + 0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<4x512x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
    }
  }
  func.return
}
// CHECK-NOT:   scf.for %{{.*}} = %c0
// CHECK:       neuron.activation
// CHECK:       %[[E1:.*]] = arith.minsi %end, %c256{{.*}} : index
// CHECK-NEXT:  scf.for %{{.*}} = %c128{{.*}} to %[[E1]] step %c128{{.*}} {
// CHECK-NEXT:    neuron.alloc
// CHECK-NEXT:    arith.muli %c0
// CHECK-NEXT:    arith.muli %c128
// CHECK:       arith.minsi %end, %c384
// CHECK:       arith.minsi %end, %c512
// Batch 0 always runs (b >= 1): plain code, above; batches 1 to 3 each in a loop of one trip or none
// CHECK:       %[[B1:.*]] = arith.minsi %b, %c2{{.*}} : index
// CHECK-NEXT:  scf.for %{{.*}} = %c1{{.*}} to %[[B1]] step %c1{{.*}} {
// CHECK-COUNT-4: neuron.activation
// CHECK:       }
// CHECK:       arith.minsi %b, %c3
// CHECK:       arith.minsi %b, %c4
// CHECK-COUNT-4: neuron.activation
// CHECK-NOT:   neuron.activation
// CHECK:       func.return
