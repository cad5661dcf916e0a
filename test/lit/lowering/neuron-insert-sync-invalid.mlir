// RUN: neuron-opt %s --split-input-file -p neuron-insert-sync --verify-diagnostics | filecheck %s

// neuron-insert-sync tracks on-chip accesses by address (lowering/neuron_insert_sync.py), so it refuses on-chip
// buffers that have none.

// An on-chip buffer not yet allocated.
func.func @unallocated_buffer(%x: memref<128x64xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>> loc("model.l1"("model.py":12:0))
  func.return
}
// CHECK: neuron.dma_copy: on-chip buffers need addresses before synchronisation; run neuron-allocate-memory first (at model.py:12 (model.l1))

// -----

// An on-chip buffer that is not a neuron.alloc at all (a function argument) has no address either.
func.func @on_chip_argument(%t: memref<128x64xf32, #mem<sbuf>>) {
  %y = neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %y[0:128, 0, [[1, 64]]], src %t[0:128, 0, [[1, 64]]] : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_copy: on-chip buffers need addresses before synchronisation; run neuron-allocate-memory first{{$}}
