// Malformed instruction syntax is a parse error at the offending token, never a Python exception.
// RUN: neuron-opt %s --split-input-file --parsing-diagnostics | filecheck %s

func.func @pattern_triple(%x: memref<4xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<4x1xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:4, 0, [[1, 1]]], src %x[0, [[1, 4, 9]]] {queue = 0 : i64} : memref<4x1xf32, #mem<sbuf>>, memref<4xf32, #mem<hbm>>
  func.return
}
// CHECK: an access-pattern dimension is a [step, num] pair, got 3 numbers

// -----

func.func @unknown_engine() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.memset vectr dst %a[0:128, 0, [[1, 1]]] {value = 1.0 : f64} : memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: unknown engine 'vectr' (neuron.memset runs on: gpsimd, vector)

// -----

func.func @role_twice() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %a[0:128, 0, [[1, 1]]], dst %a[0:128, 0, [[1, 1]]] : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: operand role 'dst' given twice
