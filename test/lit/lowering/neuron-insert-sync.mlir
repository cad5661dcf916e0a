// RUN: neuron-opt %S/Inputs/mlp_forward.allocated.mlir -p neuron-insert-sync | filecheck %s
// The simulator's race checker runs on synchronised IR: check-semantics also proves the waits sufficient.
// RUN: neuron-opt %S/Inputs/mlp_backward.allocated.mlir -p neuron-insert-sync --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %s --split-input-file -p neuron-insert-sync | filecheck %s --check-prefix=CASES

// Read after write across queues waits; the same queue runs in order and never waits on itself.
// CASES-LABEL: func.func @producer_consumer
func.func @producer_consumer(%x: memref<128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
  %a = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<sbuf>>
  %b = neuron.alloc {address = 256 : i64} : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %a[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.activation scalar dst %b[0:128, 0, [[1, 64]]], src %a[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  neuron.activation scalar dst %b[0:128, 0, [[1, 64]]], src %b[0:128, 0, [[1, 64]]] {func = "relu"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %b[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CASES:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 0 : i64}
// CASES:       neuron.activation {{.*}} {func = "exp", id = 1 : i64, waits = array<i64: 0>}
// CASES:       neuron.activation {{.*}} {func = "relu", id = 2 : i64}
// only the latest producer on the scalar queue is named
// CASES:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 3 : i64, waits = array<i64: 2>}

// -----

// A buffer reused by every loop iteration: the next iteration's load must wait until this iteration's
// consumer has read it (write after read), found by analysing the body twice.
// CASES-LABEL: func.func @loop_carried_reuse
func.func @loop_carried_reuse(%x: memref<8x128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c8192 = arith.constant 8192 : index
  %acc = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<sbuf>>
  neuron.memset vector dst %acc[0:128, 0, [[1, 64]]] {value = 0.0 : f64} : memref<128x64xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c8 step %c1 {
    %t = neuron.alloc {address = 256 : i64} : memref<128x64xf32, #mem<sbuf>>
    %offset = arith.muli %i, %c8192 : index
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<8x128x64xf32, #mem<hbm>>
    neuron.tensor_tensor vector dst %acc[0:128, 0, [[1, 64]]], in0 %acc[0:128, 0, [[1, 64]]], in1 %t[0:128, 0, [[1, 64]]] {op = "add"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  }
  neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %acc[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CASES:       neuron.memset {{.*}} {value = 0.000000e+00 : f64, id = 0 : i64}
// the load waits for the add of the previous iteration (id 2), which reads the buffer it overwrites
// CASES:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 1 : i64, waits = array<i64: 2>}
// CASES:       neuron.tensor_tensor {{.*}} {op = "add", id = 2 : i64, waits = array<i64: 1>}
// CASES:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 3 : i64, waits = array<i64: 2>}

// -----

// HBM scratch buffers that share bytes (neuron-allocate-memory reuses HBM by liveness) are ordered by address:
// %b's write on queue 2 waits until queue 1 has read %a, whose bytes it overwrites (write after read) and
// queue 0 has written them (write after write), although the two are different buffers and %s2 is ready.
// Scratch at other addresses, like %c, is not ordered against them.
// CASES-LABEL: func.func @hbm_shared_bytes
func.func @hbm_shared_bytes(%x: memref<128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
  %s0 = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<sbuf>>
  %s1 = neuron.alloc {address = 256 : i64} : memref<128x64xf32, #mem<sbuf>>
  %s2 = neuron.alloc {address = 512 : i64} : memref<128x64xf32, #mem<sbuf>>
  %a = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
  %b = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
  %c = neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %s0[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %s2[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 2 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %a[0, [[64, 128], [1, 64]]], src %s0[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %s1[0:128, 0, [[1, 64]]], src %a[0, [[64, 128], [1, 64]]] {queue = 1 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %c[0, [[64, 128], [1, 64]]], src %s2[0:128, 0, [[1, 64]]] {queue = 3 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %b[0, [[64, 128], [1, 64]]], src %s2[0:128, 0, [[1, 64]]] {queue = 2 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %s1[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CASES:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 0 : i64}
// CASES:       neuron.dma_copy {{.*}} {queue = 2 : i64, id = 1 : i64}
// CASES:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 2 : i64}
// CASES:       neuron.dma_copy {{.*}} {queue = 1 : i64, id = 3 : i64, waits = array<i64: 2>}
// %c shares no byte with %a or %b: it waits only for %s2's load
// CASES:       neuron.dma_copy {{.*}} {queue = 3 : i64, id = 4 : i64, waits = array<i64: 1>}
// CASES:       neuron.dma_copy {{.*}} {queue = 2 : i64, id = 5 : i64, waits = array<i64: 2, 3>}

// The MLP forward graph: every instruction gets an id in program order.
// CHECK-LABEL: func.func @main
// CHECK:       neuron.memset gpsimd {{.*}} id = 0 : i64}
// the identity is built on GpSimdE in order: no wait between the two
// CHECK:       neuron.affine_select gpsimd {{.*}} id = 1 : i64}
// the rows of the first layer's stationary panel load once, before its loop of transposes: nothing to wait for
// CHECK:       neuron.dma_copy {{.*}} {queue = 0 : i64, id = 2 : i64}
// in the loop, the transpose waits for the identity, for the rows' load, and until the previous iteration's copy
// into the panel has read the PSUM bank it overwrites; that copy waits for the transpose
// CHECK:       neuron.nc_matmul tensor {{.*}} {is_transpose = true, id = 3 : i64, waits = array<i64: 1, 2, 4>}
// CHECK:       neuron.tensor_copy vector {{.*}} {id = 4 : i64, waits = array<i64: 3>}

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
