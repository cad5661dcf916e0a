// RUN: neuron-opt %s -p neuron-unroll-loops,neuron-assign-dma-queues | filecheck %s

// After unrolling, the two copies of the body repeat queues 0 and 1. A DMA in a loop runs on its queue every
// trip, and each DMA of a loop nest takes a queue no earlier DMA of the nest holds: the body's four DMAs are on
// distinct queues (a load sharing the store's queue would wait for the trip before to end).
// CHECK-LABEL: func.func @scale_rows
// CHECK:       scf.for
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 0 : i64}
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 1 : i64}
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 2 : i64}
// CHECK:         neuron.dma_copy dma {{.*}} {queue = 3 : i64}
// CHECK:       }
// Twenty transfers ready at once: the first sixteen take a queue each, the next ones the queues that free first.
// CHECK-LABEL: func.func @many
// CHECK-COUNT-16: {queue = {{[0-9]+}} : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 0 : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 1 : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 2 : i64}
// CHECK-NEXT:  neuron.dma_copy dma {{.*}} {queue = 3 : i64}
// A store waits for three exponentials over its tile, then sixteen loads ready at once. The store takes the queue
// of the load it waits for anyway; the loads take the fifteen idle queues and then the one that frees first, and
// none queues behind the store. Dealt out round-robin, the seventeenth and eighteenth DMAs would be on the store's
// queue and behind it.
// CHECK-LABEL: func.func @store_behind_compute
// CHECK:       neuron.dma_copy dma dst %t{{.*}} {queue = 0 : i64}
// CHECK:       neuron.dma_copy dma dst %y{{.*}} {queue = 0 : i64}
// CHECK-NOT:   {queue = 0 : i64}
// CHECK:       neuron.dma_copy dma dst %w0{{.*}} {queue = 1 : i64}
// CHECK-NOT:   {queue = 0 : i64}
// CHECK:       neuron.dma_copy dma dst %w14{{.*}} {queue = 15 : i64}
// CHECK-NOT:   {queue = 0 : i64}
// CHECK:       neuron.dma_copy dma dst %w15{{.*}} {queue = 1 : i64}
// CHECK-NEXT:  func.return
// A store waits for three exponentials, fourteen loads follow it, then a loop copies rows. Numbered round-robin,
// the loop's first load would be the function's seventeenth DMA, on the store's queue and behind it every trip
// (41.2 us simulated, against 30.7 us as placed here). Its load takes the one idle queue, and none of the loop's
// DMAs goes on the store's queue.
// CHECK-LABEL: func.func @loop_after_store
// CHECK:       neuron.dma_copy dma dst %y{{.*}} {queue = 0 : i64}
// CHECK:       scf.for
// CHECK-NOT:   {queue = 0 : i64}
// CHECK:       neuron.dma_copy dma dst %u[{{.*}} {queue = 15 : i64}
// CHECK-NOT:   {queue = 0 : i64}
// CHECK:       neuron.dma_copy dma dst %o
// CHECK-NOT:   {queue = 0 : i64}
// CHECK:       func.return
// A buffer written in windows: row 0 at the start, rows 1 and 2 after an exponential, row 3 after three more.
// The load of row 0 waits for row 0's store only, so it takes an idle queue. Waiting for every window (the last
// store's end), it would take the queue that frees latest before then: row 1's, behind a store it does not
// depend on.
// CHECK-LABEL: func.func @windows
// CHECK:       neuron.dma_copy dma dst %h[64, {{.*}} {queue = 1 : i64}
// CHECK:       neuron.dma_copy dma dst %u[{{.*}} {queue = 2 : i64}
// A nest of more DMAs than queues shares queues, loads with loads and stores with stores: its seventeenth DMA, a
// load, goes behind a load although a store's queue frees first, since each trip would put it behind that store,
// which waits for the trip's compute.
// CHECK-LABEL: func.func @pairs_by_direction
// CHECK-COUNT-8: neuron.dma_copy dma dst %y{{.*}} {queue = {{[0-7]}} : i64}
// CHECK:       neuron.dma_copy dma dst %a0{{.*}} {queue = 8 : i64}
// CHECK:       neuron.dma_copy dma dst %b{{.*}} {queue = {{8|9|1[0-5]}} : i64}
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
  func.func @store_behind_compute(%x: memref<128x4096xf32, #mem<hbm>>, %y: memref<128x4096xf32, #mem<hbm>>, %w: memref<16x128x64xf32, #mem<hbm>>) {
    %t = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 4096]]], src %x[0, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<hbm>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[0, [[4096, 128], [1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    %w0 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w0[0:128, 0, [[1, 64]]], src %w[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w1 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w1[0:128, 0, [[1, 64]]], src %w[8192, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w2 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w2[0:128, 0, [[1, 64]]], src %w[16384, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w3 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w3[0:128, 0, [[1, 64]]], src %w[24576, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w4 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w4[0:128, 0, [[1, 64]]], src %w[32768, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w5 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w5[0:128, 0, [[1, 64]]], src %w[40960, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w6 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w6[0:128, 0, [[1, 64]]], src %w[49152, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w7 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w7[0:128, 0, [[1, 64]]], src %w[57344, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w8 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w8[0:128, 0, [[1, 64]]], src %w[65536, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w9 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w9[0:128, 0, [[1, 64]]], src %w[73728, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w10 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w10[0:128, 0, [[1, 64]]], src %w[81920, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w11 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w11[0:128, 0, [[1, 64]]], src %w[90112, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w12 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w12[0:128, 0, [[1, 64]]], src %w[98304, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w13 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w13[0:128, 0, [[1, 64]]], src %w[106496, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w14 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w14[0:128, 0, [[1, 64]]], src %w[114688, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w15 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w15[0:128, 0, [[1, 64]]], src %w[122880, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    func.return
  }
  func.func @loop_after_store(%x: memref<128x4096xf32, #mem<hbm>>, %y: memref<128x4096xf32, #mem<hbm>>, %w: memref<16x128x64xf32, #mem<hbm>>, %z: memref<8x128x64xf32, #mem<hbm>>, %o: memref<8x128x64xf32, #mem<hbm>>) {
    %t = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 4096]]], src %x[0, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<hbm>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %t[0:128, 0, [[1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[0, [[4096, 128], [1, 4096]]], src %t[0:128, 0, [[1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    %w0 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w0[0:128, 0, [[1, 64]]], src %w[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w1 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w1[0:128, 0, [[1, 64]]], src %w[8192, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w2 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w2[0:128, 0, [[1, 64]]], src %w[16384, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w3 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w3[0:128, 0, [[1, 64]]], src %w[24576, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w4 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w4[0:128, 0, [[1, 64]]], src %w[32768, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w5 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w5[0:128, 0, [[1, 64]]], src %w[40960, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w6 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w6[0:128, 0, [[1, 64]]], src %w[49152, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w7 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w7[0:128, 0, [[1, 64]]], src %w[57344, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w8 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w8[0:128, 0, [[1, 64]]], src %w[65536, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w9 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w9[0:128, 0, [[1, 64]]], src %w[73728, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w10 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w10[0:128, 0, [[1, 64]]], src %w[81920, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w11 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w11[0:128, 0, [[1, 64]]], src %w[90112, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w12 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w12[0:128, 0, [[1, 64]]], src %w[98304, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %w13 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %w13[0:128, 0, [[1, 64]]], src %w[106496, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<16x128x64xf32, #mem<hbm>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c8192 = arith.constant 8192 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %u = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      %offset = arith.muli %i, %c8192 : index
      neuron.dma_copy dma dst %u[0:128, 0, [[1, 64]]], src %z[%offset + 0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<8x128x64xf32, #mem<hbm>>
      neuron.dma_copy dma dst %o[%offset + 0, [[64, 128], [1, 64]]], src %u[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
    }
    func.return
  }
  func.func @windows(%x: memref<128x4096xf32, #mem<hbm>>) -> (memref<4x64xf32, #mem<hbm>>, memref<1x64xf32, #mem<hbm>>) {
    %h = neuron.alloc : memref<4x64xf32, #mem<hbm>>
    %out = neuron.alloc : memref<1x64xf32, #mem<hbm>>
    %a = neuron.alloc : memref<1x64xf32, #mem<sbuf>>
    neuron.memset vector dst %a[0:1, 0, [[1, 64]]] {value = 1.000000e+00 : f64} : memref<1x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %h[0, [[1, 64]]], src %a[0:1, 0, [[1, 64]]] {queue = 0 : i64} : memref<4x64xf32, #mem<hbm>>, memref<1x64xf32, #mem<sbuf>>
    %big = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %big[0:128, 0, [[1, 4096]]], src %x[0, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<hbm>>
    %e1 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %e1[0:128, 0, [[1, 4096]]], src %big[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %h[64, [[1, 64]]], src %e1[0:1, 0, [[1, 64]]] {queue = 0 : i64} : memref<4x64xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %h[128, [[1, 64]]], src %e1[0:1, 64, [[1, 64]]] {queue = 0 : i64} : memref<4x64xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    %e2 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %e2[0:128, 0, [[1, 4096]]], src %e1[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %e1[0:128, 0, [[1, 4096]]], src %e2[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.activation scalar dst %e2[0:128, 0, [[1, 4096]]], src %e1[0:128, 0, [[1, 4096]]] {func = "exp"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %h[192, [[1, 64]]], src %e2[0:1, 0, [[1, 64]]] {queue = 0 : i64} : memref<4x64xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    %u = neuron.alloc : memref<1x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %u[0:1, 0, [[1, 64]]], src %h[0, [[1, 64]]] {queue = 0 : i64} : memref<1x64xf32, #mem<sbuf>>, memref<4x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %out[0, [[1, 64]]], src %u[0:1, 0, [[1, 64]]] {queue = 0 : i64} : memref<1x64xf32, #mem<hbm>>, memref<1x64xf32, #mem<sbuf>>
    func.return %h, %out : memref<4x64xf32, #mem<hbm>>, memref<1x64xf32, #mem<hbm>>
  }
  func.func @pairs_by_direction(%x: memref<8x128x4096xf32, #mem<hbm>>, %y: memref<8x128x64xf32, #mem<hbm>>, %z: memref<128x64xf32, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c1 step %c1 {
      %s0 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %s0[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %s1 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[8192, [[64, 128], [1, 64]]], src %s1[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %s2 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[16384, [[64, 128], [1, 64]]], src %s2[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %s3 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[24576, [[64, 128], [1, 64]]], src %s3[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %s4 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[32768, [[64, 128], [1, 64]]], src %s4[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %s5 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[40960, [[64, 128], [1, 64]]], src %s5[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %s6 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[49152, [[64, 128], [1, 64]]], src %s6[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %s7 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %y[57344, [[64, 128], [1, 64]]], src %s7[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<8x128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
      %a0 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a0[0:128, 0, [[1, 4096]]], src %x[0, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %a1 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a1[0:128, 0, [[1, 4096]]], src %x[524288, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %a2 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a2[0:128, 0, [[1, 4096]]], src %x[1048576, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %a3 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a3[0:128, 0, [[1, 4096]]], src %x[1572864, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %a4 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a4[0:128, 0, [[1, 4096]]], src %x[2097152, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %a5 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a5[0:128, 0, [[1, 4096]]], src %x[2621440, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %a6 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a6[0:128, 0, [[1, 4096]]], src %x[3145728, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %a7 = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %a7[0:128, 0, [[1, 4096]]], src %x[3670016, [[4096, 128], [1, 4096]]] {queue = 0 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<8x128x4096xf32, #mem<hbm>>
      %b = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %b[0:128, 0, [[1, 64]]], src %z[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
    }
    func.return
  }
}
