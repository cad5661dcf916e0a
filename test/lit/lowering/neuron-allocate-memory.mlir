// RUN: neuron-opt %S/Inputs/mlp_forward.neuron.mlir -p neuron-allocate-memory | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_backward.neuron.mlir -p neuron-allocate-memory,verify-stage-contract{stage=allocated} --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %s --split-input-file -p neuron-allocate-memory | filecheck %s --check-prefix=CASES

// Buffers whose lifetimes overlap get disjoint addresses; a buffer dead before another is born shares its bytes.
// CASES-LABEL: func.func @reuse
func.func @reuse(%x: memref<128x512xf32, #neuron.mem<hbm>>) {
  %a = neuron.alloc : memref<128x512xf32, #neuron.mem<sbuf>>
  %b = neuron.alloc : memref<128x100xf32, #neuron.mem<sbuf>>
  neuron.dma_copy dma dst %a[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xf32, #neuron.mem<sbuf>>, memref<128x512xf32, #neuron.mem<hbm>>
  neuron.tensor_copy vector dst %b[0:128, 0, [[1, 100]]], src %a[0:128, 0, [[1, 100]]] : memref<128x100xf32, #neuron.mem<sbuf>>, memref<128x512xf32, #neuron.mem<sbuf>>
  %c = neuron.alloc : memref<128x16xf32, #neuron.mem<sbuf>>
  neuron.tensor_copy vector dst %c[0:128, 0, [[1, 16]]], src %b[0:128, 0, [[1, 16]]] : memref<128x16xf32, #neuron.mem<sbuf>>, memref<128x100xf32, #neuron.mem<sbuf>>
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x512xf32, #neuron.mem<sbuf>>
// %b follows %a, 64-byte aligned
// CASES:       neuron.alloc {address = 2048 : i64} : memref<128x100xf32, #neuron.mem<sbuf>>
// %a is dead when %c is born: %c reuses its bytes
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x16xf32, #neuron.mem<sbuf>>

// -----

// A buffer used inside a loop it was not allocated in stays live until the loop ends.
// CASES-LABEL: func.func @live_across_loop
func.func @live_across_loop(%x: memref<4x512xf32, #neuron.mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %acc = neuron.alloc : memref<4x128xf32, #neuron.mem<sbuf>>
  neuron.memset vector dst %acc[0:4, 0, [[1, 128]]] {value = 0.0 : f64} : memref<4x128xf32, #neuron.mem<sbuf>>
  scf.for %i = %c0 to %c4 step %c1 {
    %t = neuron.alloc : memref<4x128xf32, #neuron.mem<sbuf>>
    neuron.dma_copy dma dst %t[0:4, 0, [[1, 128]]], src %x[0, [[512, 4], [1, 128]]] {queue = 0 : i64} : memref<4x128xf32, #neuron.mem<sbuf>>, memref<4x512xf32, #neuron.mem<hbm>>
    neuron.tensor_tensor vector dst %acc[0:4, 0, [[1, 128]]], in0 %acc[0:4, 0, [[1, 128]]], in1 %t[0:4, 0, [[1, 128]]] {op = "add"} : memref<4x128xf32, #neuron.mem<sbuf>>, memref<4x128xf32, #neuron.mem<sbuf>>, memref<4x128xf32, #neuron.mem<sbuf>>
  }
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<4x128xf32, #neuron.mem<sbuf>>
// CASES:       scf.for
// CASES:         neuron.alloc {address = 512 : i64} : memref<4x128xf32, #neuron.mem<sbuf>>

// -----

// PSUM buffers start on 2 KiB banks, so no matmul output straddles two banks.
// CASES-LABEL: func.func @psum_banks
func.func @psum_banks(%s: memref<128x128xf32, #neuron.mem<hbm>>) {
  %a = neuron.alloc : memref<128x100xf32, #neuron.mem<psum>>
  %b = neuron.alloc : memref<128x100xf32, #neuron.mem<psum>>
  %w = neuron.alloc : memref<128x128xf32, #neuron.mem<sbuf>>
  neuron.dma_copy dma dst %w[0:128, 0, [[1, 128]]], src %s[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #neuron.mem<sbuf>>, memref<128x128xf32, #neuron.mem<hbm>>
  neuron.nc_matmul tensor dst %a[0:128, 0, [[1, 100]]], stationary %w[0:128, 0, [[1, 128]]], moving %w[0:128, 0, [[1, 100]]] : memref<128x100xf32, #neuron.mem<psum>>, memref<128x128xf32, #neuron.mem<sbuf>>, memref<128x128xf32, #neuron.mem<sbuf>>
  neuron.nc_matmul tensor dst %b[0:128, 0, [[1, 100]]], stationary %w[0:128, 0, [[1, 128]]], moving %w[0:128, 0, [[1, 100]]] : memref<128x100xf32, #neuron.mem<psum>>, memref<128x128xf32, #neuron.mem<sbuf>>, memref<128x128xf32, #neuron.mem<sbuf>>
  neuron.tensor_tensor vector dst %w[0:128, 0, [[1, 100]]], in0 %a[0:128, 0, [[1, 100]]], in1 %w[0:128, 0, [[1, 100]]] {op = "add"} : memref<128x128xf32, #neuron.mem<sbuf>>, memref<128x100xf32, #neuron.mem<psum>>, memref<128x128xf32, #neuron.mem<sbuf>>
  neuron.tensor_tensor vector dst %w[0:128, 0, [[1, 100]]], in0 %b[0:128, 0, [[1, 100]]], in1 %w[0:128, 0, [[1, 100]]] {op = "add"} : memref<128x128xf32, #neuron.mem<sbuf>>, memref<128x100xf32, #neuron.mem<psum>>, memref<128x128xf32, #neuron.mem<sbuf>>
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x100xf32, #neuron.mem<psum>>
// CASES:       neuron.alloc {address = 2048 : i64} : memref<128x100xf32, #neuron.mem<psum>>

// The MLP forward graph: every buffer gets an address; HBM scratch is laid out one after another.
// CHECK-LABEL: func.func @main
// CHECK:       %addmm = neuron.alloc {address = 0 : i64} : memref<37x520xf32, #neuron.mem<hbm>>
// CHECK:       neuron.alloc {address = {{[0-9]+}} : i64} : memref<37x128xf32, #neuron.mem<psum>>
// 37 x 520 x 4 bytes = 76960, rounded up to 64 bytes
// CHECK:       %relu = neuron.alloc {address = 76992 : i64} : memref<37x520xf32, #neuron.mem<hbm>>
// CHECK-NOT:   neuron.alloc :

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
