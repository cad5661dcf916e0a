// RUN: neuron-opt %s --split-input-file -p neuron-allocate-memory --verify-diagnostics | filecheck %s

// On-chip memory runs out (lowering/neuron_allocate_memory.py): the diagnostic names the buffer that does not
// fit, its source line and what was live.

// Three buffers of 200 KiB per partition read or written by one instruction: the second already does not fit
// next to the first in trn2's 224 KiB.
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @out_of_sbuf() {
    %a = neuron.alloc : memref<128x51200xf32, #mem<sbuf>> loc("model.l1"("model.py":12:0))
    %b = neuron.alloc : memref<128x51200xf32, #mem<sbuf>> loc("model.l2"("model.py":13:0))
    %c = neuron.alloc : memref<128x51200xf32, #mem<sbuf>> loc("model.l3"("model.py":14:0))
    neuron.tensor_tensor vector dst %c[0:128, 0, [[1, 51200]]], in0 %a[0:128, 0, [[1, 51200]]], in1 %b[0:128, 0, [[1, 51200]]] {op = "add"} : memref<128x51200xf32, #mem<sbuf>>, memref<128x51200xf32, #mem<sbuf>>, memref<128x51200xf32, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.alloc: out of SBUF on trn2: a buffer of 204800 bytes per partition does not fit next to 1 live buffers (204800 of 229376 bytes per partition in use) (at model.py:13 (model.l2))

// -----

// Two buffers of 100 KiB fit trn2's 224 KiB per partition but not trn1's 192 KiB.
builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @out_of_sbuf_trn1() {
    %a = neuron.alloc : memref<128x25600xf32, #mem<sbuf>>
    %b = neuron.alloc : memref<128x25600xf32, #mem<sbuf>> loc("model.l2"("model.py":13:0))
    neuron.tensor_copy vector dst %b[0:128, 0, [[1, 25600]]], src %a[0:128, 0, [[1, 25600]]] : memref<128x25600xf32, #mem<sbuf>>, memref<128x25600xf32, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.alloc: out of SBUF on trn1: a buffer of 102400 bytes per partition does not fit next to 1 live buffers (102400 of 196608 bytes per partition in use) (at model.py:13 (model.l2))

// -----

// PSUM has eight 2 KiB banks per partition: nine bank-sized buffers cannot be live together.
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @out_of_psum() {
    %p0 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p1 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p2 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p3 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p4 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p5 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p6 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p7 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p8 = neuron.alloc : memref<128x512xf32, #mem<psum>> loc("model.l9"("model.py":21:0))
    neuron.memset vector dst %p0[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p1[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p2[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p3[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p4[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p5[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p6[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p7[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    neuron.memset vector dst %p8[0:128, 0, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<psum>>
    func.return
  }
}
// CHECK: neuron.alloc: out of PSUM on trn2: a buffer of 2048 bytes per partition does not fit next to 8 live buffers (16384 of 16384 bytes per partition in use) (at model.py:21 (model.l9))

// -----

// A buffer read in a loop it was allocated outside stays live to the end of the loop (the next iteration reads it
// again): %c cannot reuse %a's memory as it could without the loop, and three 80 KiB buffers exceed 224 KiB.
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @live_until_loop_end() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %a = neuron.alloc : memref<128x20480xf32, #mem<sbuf>>
    scf.for %i = %c0 to %c4 step %c1 {
      %b = neuron.alloc : memref<128x20480xf32, #mem<sbuf>>
      neuron.tensor_copy vector dst %b[0:128, 0, [[1, 20480]]], src %a[0:128, 0, [[1, 20480]]] : memref<128x20480xf32, #mem<sbuf>>, memref<128x20480xf32, #mem<sbuf>>
      %c = neuron.alloc : memref<128x20480xf32, #mem<sbuf>> loc("model.l4"("model.py":30:0))
      neuron.tensor_copy vector dst %c[0:128, 0, [[1, 20480]]], src %b[0:128, 0, [[1, 20480]]] : memref<128x20480xf32, #mem<sbuf>>, memref<128x20480xf32, #mem<sbuf>>
    }
    func.return
  }
}
// CHECK: neuron.alloc: out of SBUF on trn2: a buffer of 81920 bytes per partition does not fit next to 2 live buffers (163840 of 229376 bytes per partition in use) (at model.py:30 (model.l4))
