// RUN: neuron-opt %s -p neuron-unroll-loops,neuron-assign-dma-queues | filecheck %s

// After unrolling, the two copies of the body repeat queues 0 and 1; numbered in program order they get queues
// 0 to 3, so the second copy's load no longer waits behind the first one's on the same queue.
// CHECK-LABEL: func.func @scale_rows
// CHECK:       scf.for
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 0 : i64}
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 1 : i64}
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 2 : i64}
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 3 : i64}
// CHECK:       }
// Queues wrap around after the target's 16: the twentieth transfer is on queue 3.
// CHECK-LABEL: func.func @many
// CHECK-COUNT-16: {queue = {{[0-9]+}} : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 0 : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 1 : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 2 : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 3 : i64}
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @scale_rows(%x: memref<8x128x64xf32, #mem<hbm>>, %y: memref<8x128x64xf32, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c8192 = arith.constant 8192 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      %offset = arith.muli %i, %c8192 : index
      neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<8x128x64xf32, #mem<hbm>>
      neuron.activation scalar dst %t[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[%offset + 0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
    }
    func.return
  }
  func.func @many(%x: memref<20x64xf32, #mem<hbm>>, %y: memref<20x64xf32, #mem<hbm>>) {
    neuron.dma_copy dma dst %y[0, [[1, 64]]], src %x[0, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[64, [[1, 64]]], src %x[64, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[128, [[1, 64]]], src %x[128, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[192, [[1, 64]]], src %x[192, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[256, [[1, 64]]], src %x[256, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[320, [[1, 64]]], src %x[320, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[384, [[1, 64]]], src %x[384, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[448, [[1, 64]]], src %x[448, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[512, [[1, 64]]], src %x[512, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[576, [[1, 64]]], src %x[576, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[640, [[1, 64]]], src %x[640, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[704, [[1, 64]]], src %x[704, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[768, [[1, 64]]], src %x[768, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[832, [[1, 64]]], src %x[832, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[896, [[1, 64]]], src %x[896, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[960, [[1, 64]]], src %x[960, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[1024, [[1, 64]]], src %x[1024, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[1088, [[1, 64]]], src %x[1088, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[1152, [[1, 64]]], src %x[1152, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[1216, [[1, 64]]], src %x[1216, [[1, 64]]] {queue = 5 : i64} : memref<20x64xf32, #mem<hbm>>, memref<20x64xf32, #mem<hbm>>
    func.return
  }
}
