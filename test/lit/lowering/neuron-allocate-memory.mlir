// RUN: neuron-opt %S/Inputs/mlp_forward.neuron.mlir -p neuron-allocate-memory | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_backward.neuron.mlir -p neuron-allocate-memory,verify-stage-contract{stage=allocated} --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %s --split-input-file -p neuron-allocate-memory | filecheck %s --check-prefix=CASES

// Buffers whose lifetimes overlap get disjoint addresses. Placement is next-fit: a new buffer goes after the
// previous one even when earlier bytes are free, so freed memory is reused as late as possible.
// CASES-LABEL: func.func @reuse
func.func @reuse(%x: memref<128x512xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
  %b = neuron.alloc : memref<128x100xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %a[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<hbm>>
  neuron.tensor_copy vector dst %b[0:128, 0, [[1, 100]]], src %a[0:128, 0, [[1, 100]]] : memref<128x100xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
  %c = neuron.alloc : memref<128x16xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %c[0:128, 0, [[1, 16]]], src %b[0:128, 0, [[1, 16]]] : memref<128x16xf32, #mem<sbuf>>, memref<128x100xf32, #mem<sbuf>>
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x512xf32, #mem<sbuf>>
// %b follows %a, 64-byte aligned
// CASES:       neuron.alloc {address = 2048 : i64} : memref<128x100xf32, #mem<sbuf>>
// %a is dead when %c is born, but %c still goes after %b (2048 + 400, rounded up to 64 bytes)
// CASES:       neuron.alloc {address = 2496 : i64} : memref<128x16xf32, #mem<sbuf>>

// -----

// When the space after the previous buffer runs out, placement wraps around to the freed bytes at the start.
// CASES-LABEL: func.func @wrap_around
func.func @wrap_around(%x: memref<128x40000xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x40000xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %a[0:128, 0, [[1, 40000]]], src %x[0, [[40000, 128], [1, 40000]]] {queue = 0 : i64} : memref<128x40000xf32, #mem<sbuf>>, memref<128x40000xf32, #mem<hbm>>
  %b = neuron.alloc : memref<128x16000xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %b[0:128, 0, [[1, 16000]]], src %a[0:128, 0, [[1, 16000]]] : memref<128x16000xf32, #mem<sbuf>>, memref<128x40000xf32, #mem<sbuf>>
  %c = neuron.alloc : memref<128x16000xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %c[0:128, 0, [[1, 16000]]], src %b[0:128, 0, [[1, 16000]]] : memref<128x16000xf32, #mem<sbuf>>, memref<128x16000xf32, #mem<sbuf>>
  func.return
}
// 160000 + 64000 bytes fill the 229376 of a trn2 partition; %c (64000) no longer fits after %b and wraps to 0
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x40000xf32, #mem<sbuf>>
// CASES:       neuron.alloc {address = 160000 : i64} : memref<128x16000xf32, #mem<sbuf>>
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x16000xf32, #mem<sbuf>>

// -----

// A buffer used inside a loop it was not allocated in stays live until the loop ends; buffers allocated in a loop
// body live for the whole body, so two of them never share bytes (the next iteration may start early).
// CASES-LABEL: func.func @live_across_loop
func.func @live_across_loop(%x: memref<4x512xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %acc = neuron.alloc : memref<4x128xf32, #mem<sbuf>>
  neuron.memset vector dst %acc[0:4, 0, [[1, 128]]] {value = 0.0 : f64} : memref<4x128xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c4 step %c1 {
    %t = neuron.alloc : memref<4x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:4, 0, [[1, 128]]], src %x[0, [[512, 4], [1, 128]]] {queue = 0 : i64} : memref<4x128xf32, #mem<sbuf>>, memref<4x512xf32, #mem<hbm>>
    neuron.tensor_tensor vector dst %acc[0:4, 0, [[1, 128]]], in0 %acc[0:4, 0, [[1, 128]]], in1 %t[0:4, 0, [[1, 128]]] {op = "add"} : memref<4x128xf32, #mem<sbuf>>, memref<4x128xf32, #mem<sbuf>>, memref<4x128xf32, #mem<sbuf>>
  }
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<4x128xf32, #mem<sbuf>>
// CASES:       scf.for
// CASES:         neuron.alloc {address = 512 : i64} : memref<4x128xf32, #mem<sbuf>>

// -----

// A matmul accumulator gets a PSUM bank (2 KiB) of its own: one accumulation group per bank.
// CASES-LABEL: func.func @psum_banks
func.func @psum_banks(%s: memref<128x128xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x100xf32, #mem<psum>>
  %b = neuron.alloc : memref<128x100xf32, #mem<psum>>
  %w = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %w[0:128, 0, [[1, 128]]], src %s[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  neuron.nc_matmul tensor dst %a[0:128, 0, [[1, 100]]], stationary %w[0:128, 0, [[1, 128]]], moving %w[0:128, 0, [[1, 100]]] : memref<128x100xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %b[0:128, 0, [[1, 100]]], stationary %w[0:128, 0, [[1, 128]]], moving %w[0:128, 0, [[1, 100]]] : memref<128x100xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.tensor_tensor vector dst %w[0:128, 0, [[1, 100]]], in0 %a[0:128, 0, [[1, 100]]], in1 %w[0:128, 0, [[1, 100]]] {op = "add"} : memref<128x128xf32, #mem<sbuf>>, memref<128x100xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>
  neuron.tensor_tensor vector dst %w[0:128, 0, [[1, 100]]], in0 %b[0:128, 0, [[1, 100]]], in1 %w[0:128, 0, [[1, 100]]] {op = "add"} : memref<128x128xf32, #mem<sbuf>>, memref<128x100xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x100xf32, #mem<psum>>
// CASES:       neuron.alloc {address = 2048 : i64} : memref<128x100xf32, #mem<psum>>

// -----

// Transposes do not accumulate: their PSUM buffers share a bank, but none straddles two.
// CASES-LABEL: func.func @psum_transposes
func.func @psum_transposes(%s: memref<128x128xf32, #mem<hbm>>) {
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  %x = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %x[0:128, 0, [[1, 128]]], src %s[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  %t0 = neuron.alloc : memref<100x128xf32, #mem<psum>>
  %t1 = neuron.alloc : memref<100x128xf32, #mem<psum>>
  %t2 = neuron.alloc : memref<100x128xf32, #mem<psum>>
  %t3 = neuron.alloc : memref<100x128xf32, #mem<psum>>
  %t4 = neuron.alloc : memref<100x128xf32, #mem<psum>>
  neuron.nc_matmul tensor dst %t0[0:100, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] {is_transpose = true} : memref<100x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %t1[0:100, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] {is_transpose = true} : memref<100x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %t2[0:100, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] {is_transpose = true} : memref<100x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %t3[0:100, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] {is_transpose = true} : memref<100x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %t4[0:100, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] {is_transpose = true} : memref<100x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %x[0:100, 0, [[1, 128]]], src %t0[0:100, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<100x128xf32, #mem<psum>>
  neuron.tensor_copy vector dst %x[0:100, 0, [[1, 128]]], src %t1[0:100, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<100x128xf32, #mem<psum>>
  neuron.tensor_copy vector dst %x[0:100, 0, [[1, 128]]], src %t2[0:100, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<100x128xf32, #mem<psum>>
  neuron.tensor_copy vector dst %x[0:100, 0, [[1, 128]]], src %t3[0:100, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<100x128xf32, #mem<psum>>
  neuron.tensor_copy vector dst %x[0:100, 0, [[1, 128]]], src %t4[0:100, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<100x128xf32, #mem<psum>>
  func.return
}
// four 512-byte transposes fill bank 0; the fifth starts bank 1
// CASES:       neuron.alloc {address = 0 : i64} : memref<100x128xf32, #mem<psum>>
// CASES:       neuron.alloc {address = 512 : i64} : memref<100x128xf32, #mem<psum>>
// CASES:       neuron.alloc {address = 1024 : i64} : memref<100x128xf32, #mem<psum>>
// CASES:       neuron.alloc {address = 1536 : i64} : memref<100x128xf32, #mem<psum>>
// CASES:       neuron.alloc {address = 2048 : i64} : memref<100x128xf32, #mem<psum>>

// -----

// Three 100 KiB buffers allocated in one loop body do not fit trn2's 224 KiB when each lives for the whole body,
// so the body is made tight: %a dies at the first copy and %c, born after it, takes its bytes (next fit wraps).
// CASES-LABEL: func.func @tight_body
func.func @tight_body() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %a = neuron.alloc : memref<128x25600xf32, #mem<sbuf>>
    neuron.memset vector dst %a[0:128, 0, [[1, 25600]]] {value = 1.0 : f64} : memref<128x25600xf32, #mem<sbuf>>
    %b = neuron.alloc : memref<128x25600xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %b[0:128, 0, [[1, 25600]]], src %a[0:128, 0, [[1, 25600]]] : memref<128x25600xf32, #mem<sbuf>>, memref<128x25600xf32, #mem<sbuf>>
    %c = neuron.alloc : memref<128x25600xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %c[0:128, 0, [[1, 25600]]], src %b[0:128, 0, [[1, 25600]]] : memref<128x25600xf32, #mem<sbuf>>, memref<128x25600xf32, #mem<sbuf>>
  }
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x25600xf32, #mem<sbuf>>
// CASES:       neuron.alloc {address = 102400 : i64} : memref<128x25600xf32, #mem<sbuf>>
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x25600xf32, #mem<sbuf>>

// -----

// HBM scratch may share bytes by liveness, but a plan may grow by a few spare MiB beyond first fit's to keep a
// buffer off bytes just freed: %b is first written right after the last read of %a, and takes bytes no buffer has
// held (32768) rather than %a's, whose readers its writer would wait for; %c, written while %b is still to be
// read, goes after it. (neuron-allocate-memory-hbm.mlir has the placement without spare bytes, where %b and %c
// share first fit's 64 KiB.) An HBM buffer's range starts at its first use, not at its alloc.
// CASES-LABEL: func.func @hbm_reuse
func.func @hbm_reuse(%x: memref<128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %b = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %c = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %a[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %a[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %b[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %c[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %b[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %c[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// 128 x 64 x 4 bytes
// CASES-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// CASES-NEXT:  neuron.alloc {address = 65536 : i64} : memref<128x64xf32, #mem<hbm>>

// -----

// A buffer the function returns keeps bytes of its own for the whole function, even those of a buffer dead
// before its first write; so does one it returns through a view.
// CASES-LABEL: func.func @hbm_results_keep_their_place
func.func @hbm_results_keep_their_place(%x: memref<128x64xf32, #mem<hbm>>) -> (memref<128x64xf32, #mem<hbm>>, memref<64x128xf32, strided<[1, 64]>, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %a[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %a[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  %r = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %r[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  %s = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %s[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  %v = neuron.view %s : memref<128x64xf32, #mem<hbm>> to memref<64x128xf32, strided<[1, 64]>, #mem<hbm>>
  func.return %r, %v : memref<128x64xf32, #mem<hbm>>, memref<64x128xf32, strided<[1, 64]>, #mem<hbm>>
}
// CASES:       neuron.alloc {address = 65536 : i64} : memref<128x64xf32, #mem<hbm>>
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// CASES:       neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>

// -----

// A use inside a loop the buffer was not allocated in keeps it live over the whole loop: %a is last read in the
// loop body before %b's first write there, but the next iteration reads %a again, so they do not share bytes.
// %c, used after the loop, could take %a's; the spare bytes give it its own (without them it takes %a's:
// neuron-allocate-memory-hbm.mlir).
// CASES-LABEL: func.func @hbm_live_across_loop
func.func @hbm_live_across_loop(%x: memref<128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %b = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %c = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %a[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  scf.for %i = %c0 to %c4 step %c1 {
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %a[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
    neuron.dma_copy dma dst %b[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  }
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %b[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %c[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %c[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// CASES-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// CASES-NEXT:  neuron.alloc {address = 65536 : i64} : memref<128x64xf32, #mem<hbm>>

// The MLP forward graph: every buffer gets an address. The results (%relu, %relu1, %addmm2: the output and what
// the backward keeps) hold bytes of their own from address 0, largest first; 37 x 520 x 4 bytes = 76960,
// rounded up to 64 bytes, then 37 x 130 x 4 = 19240 -> 19264. The intermediates go after them; %addmm1, first
// written once the first layer's ReLU has read %addmm, takes bytes of its own after %addmm's (97792 + 76960,
// rounded up) rather than the ones just freed.
// CHECK-LABEL: func.func @main
// CHECK:       %addmm = neuron.alloc {address = 97792 : i64} : memref<37x520xf32, #mem<hbm>>
// The accumulator of the first layer's output block starts on a PSUM bank boundary (a bank of its own).
// CHECK:       neuron.alloc {address = {{(0|2048|4096|6144|8192|10240|12288|14336)}} : i64} : memref<37x512xf32, #mem<psum>>
// CHECK:       %relu = neuron.alloc {address = 0 : i64} : memref<37x520xf32, #mem<hbm>>
// CHECK:       %addmm1 = neuron.alloc {address = 174784 : i64} : memref<37x130xf32, #mem<hbm>>
// CHECK:       %relu1 = neuron.alloc {address = 76992 : i64} : memref<37x130xf32, #mem<hbm>>
// CHECK:       %addmm2 = neuron.alloc {address = 96256 : i64} : memref<37x10xf32, #mem<hbm>>
// CHECK-NOT:   neuron.alloc :

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Next fit can scatter buffers so that a large one finds no gap wide enough although enough bytes are free: %c
// (102400 bytes) fits neither after %b (at 163840) nor between %a and %b. With no loop body left to make tight,
// placement starts over largest first, each buffer at the lowest address free over its whole live range.
// CASES-LABEL: func.func @largest_first
func.func @largest_first(%x: memref<128x20480xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x20480xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %a[0:128, 0, [[1, 20480]]], src %x[0, [[20480, 128], [1, 20480]]] {queue = 0 : i64} : memref<128x20480xf32, #mem<sbuf>>, memref<128x20480xf32, #mem<hbm>>
  %t = neuron.alloc : memref<128x20480xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %t[0:128, 0, [[1, 20480]]], src %a[0:128, 0, [[1, 20480]]] : memref<128x20480xf32, #mem<sbuf>>, memref<128x20480xf32, #mem<sbuf>>
  %b = neuron.alloc : memref<128x10240xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %b[0:128, 0, [[1, 10240]]], src %t[0:128, 0, [[1, 10240]]] : memref<128x10240xf32, #mem<sbuf>>, memref<128x20480xf32, #mem<sbuf>>
  %c = neuron.alloc : memref<128x25600xf32, #mem<sbuf>>
  neuron.tensor_tensor vector dst %c[0:128, 0, [[1, 10240]]], in0 %a[0:128, 0, [[1, 10240]]], in1 %b[0:128, 0, [[1, 10240]]] {op = "add"} : memref<128x25600xf32, #mem<sbuf>>, memref<128x20480xf32, #mem<sbuf>>, memref<128x10240xf32, #mem<sbuf>>
  func.return
}
// %c first (at 0), then %a above it, %t below %a (dead before %c is born), %b above %a
// CASES:       neuron.alloc {address = 102400 : i64} : memref<128x20480xf32, #mem<sbuf>>
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x20480xf32, #mem<sbuf>>
// CASES:       neuron.alloc {address = 184320 : i64} : memref<128x10240xf32, #mem<sbuf>>
// CASES:       neuron.alloc {address = 0 : i64} : memref<128x25600xf32, #mem<sbuf>>

// -----

// A matmul whose PSUM output nothing reads is erased with its buffer: its group would count as in flight for good
// (only another engine's read ends one), so its bytes could never go to another group (a fuzz case: the copy out
// of the first of 33 transposes deleted, the pass gave its bytes to a later transpose and validation refused it).
// CASES-LABEL: func.func @unread_products
func.func @unread_products(%s: memref<128x128xf32, #mem<hbm>>) {
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  %x = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %x[0:128, 0, [[1, 128]]], src %s[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  %unread = neuron.alloc : memref<100x128xf32, #mem<psum>>
  neuron.nc_matmul tensor dst %unread[0:100, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] {is_transpose = true} : memref<100x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  %product = neuron.alloc : memref<128x100xf32, #mem<psum>>
  neuron.nc_matmul tensor dst %product[0:128, 0, [[1, 100]]], stationary %x[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] : memref<128x100xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  %read = neuron.alloc : memref<100x128xf32, #mem<psum>>
  neuron.nc_matmul tensor dst %read[0:100, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %x[0:128, 0, [[1, 100]]] {is_transpose = true} : memref<100x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  neuron.tensor_copy vector dst %x[0:100, 0, [[1, 128]]], src %read[0:100, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<100x128xf32, #mem<psum>>
  func.return
}
// CASES:       neuron.dma_copy
// CASES-NEXT:  neuron.alloc {address = 0 : i64} : memref<100x128xf32, #mem<psum>>
// CASES-NEXT:  neuron.nc_matmul tensor dst
// CASES-NEXT:  neuron.tensor_copy
// CASES-NEXT:  func.return
