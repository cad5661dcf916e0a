// RUN: neuron-opt %s --split-input-file -p neuron-unroll-loops | filecheck %s
// RUN: neuron-opt %s --split-input-file -p 'neuron-unroll-loops{factor=3}' | filecheck %s --check-prefix=THREE
// RUN: neuron-opt %S/Inputs/mlp_backward.neuron.mlir -p neuron-unroll-loops,neuron-allocate-memory,neuron-insert-sync --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// An innermost loop that moves data runs two copies of its body per iteration, each with its own buffers;
// an odd trip count leaves one copy after the loop.
// CHECK-LABEL: func.func @scale_rows
func.func @scale_rows(%x: memref<7x128x64xf32, #mem<hbm>>, %y: memref<7x128x64xf32, #mem<hbm>>) {
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
// CHECK:       scf.for %[[I:.*]] = %c0 to %c6 step %c2 {
// CHECK-NEXT:    %[[A:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:    %[[OA:.*]] = arith.muli %[[I]], %c8192 : index
// CHECK:         neuron.activation scalar dst %[[A]]
// CHECK:         %[[NEXT:.*]] = arith.addi %[[I]], %c1 : index
// CHECK-NEXT:    %[[B:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:    %[[OB:.*]] = arith.muli %[[NEXT]], %c8192 : index
// CHECK:         neuron.activation scalar dst %[[B]]
// CHECK:       }
// the seventh iteration, after the loop
// CHECK:       neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:  arith.muli %c6, %c8192 : index
// CHECK-NOT:   scf.for

// THREE-LABEL: func.func @scale_rows
// THREE:       scf.for %{{.*}} = %c0 to %c6 step %c3 {
// THREE-COUNT-3: neuron.activation
// THREE:       }
// THREE:       arith.muli %c6, %c8192 : index
// THREE-NOT:   scf.for

// -----

// A loop without data movement has nothing to overlap and stays as it is.
// CHECK-LABEL: func.func @no_dma
// THREE-LABEL: func.func @no_dma
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
