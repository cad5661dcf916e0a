// RUN: neuron-opt %s --split-input-file -p 'neuron-allocate-memory{hbm_spare_bytes=0}' | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-allocate-memory | filecheck %s --check-prefix=SPARE

// HBM placement within first fit's plan (no spare bytes): each buffer takes the free range whose bytes were freed
// longest ago, bytes no buffer has held counting as the oldest, so a writer rarely waits for the readers of the
// buffer that held its bytes just before.

// First fit lets %b share %a's bytes and puts %c after them: a 64 KiB plan. In the same 64 KiB, %b, first written
// as %a dies, takes the bytes nobody has held yet, and %c the bytes %a freed before %b was born.
// CHECK-LABEL: func.func @fresh_bytes_first
// SPARE-LABEL: func.func @fresh_bytes_first
func.func @fresh_bytes_first(%x: memref<128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
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
// CHECK:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// With the default spare bytes (16 MiB) all three get bytes of their own.
// SPARE:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// SPARE-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// SPARE-NEXT:  neuron.alloc {address = 65536 : i64} : memref<128x64xf32, #mem<hbm>>

// -----

// %a and %b are live together; %b dies first, then %a, then %c is born. First fit would give %c the lowest
// address (%a's bytes, freed last); %c takes %b's, freed longer ago.
// CHECK-LABEL: func.func @least_recently_freed
// SPARE-LABEL: func.func @least_recently_freed
func.func @least_recently_freed(%x: memref<128x64xf32, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %b = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %c = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %a[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %b[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %b[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %a[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %c[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %c[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %y[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// SPARE:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// SPARE-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// SPARE-NEXT:  neuron.alloc {address = 65536 : i64} : memref<128x64xf32, #mem<hbm>>

// -----

// A range is as old as its newest byte: %c (64 KiB) is born after %a (32 KiB, freed first) and %b (64 KiB) died.
// %a's bytes alone are too few, every range that fits holds bytes of %b, so all are as recent as %b's death and
// the lowest address wins.
// CHECK-LABEL: func.func @range_as_old_as_its_newest_byte
func.func @range_as_old_as_its_newest_byte(%x: memref<128x128xf32, #mem<hbm>>, %y: memref<128x128xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %b = neuron.alloc : memref<128x128xf32, #mem<hbm>>
  %c = neuron.alloc : memref<128x128xf32, #mem<hbm>>
  %t = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 128]]], src %x[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  neuron.dma_copy dma dst %a[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %b[0, [[128, 128], [1, 128]]], src %t[0:128, 0, [[1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %a[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 128]]], src %b[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  neuron.dma_copy dma dst %c[0, [[128, 128], [1, 128]]], src %t[0:128, 0, [[1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 128]]], src %c[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  neuron.dma_copy dma dst %y[0, [[128, 128], [1, 128]]], src %t[0:128, 0, [[1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  func.return
}
// first fit: %b after %a (at 32768), %c at 0 over both; in its 96 KiB plan %c fits at 0 or at 32768
// CHECK:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x128xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 0 : i64} : memref<128x128xf32, #mem<hbm>>

// -----

// When the order of freed ranges fragments the budget, the function keeps first fit's placement. First fit puts
// %b on %a's bytes and %c (64 KiB, born while %b is live) after them: 96 KiB. Placing %b on bytes nobody held
// (32768) would leave %c two 32 KiB holes in those 96 KiB, so all three go where first fit puts them.
// CHECK-LABEL: func.func @fragmented_budget_keeps_first_fit
// SPARE-LABEL: func.func @fragmented_budget_keeps_first_fit
func.func @fragmented_budget_keeps_first_fit(%x: memref<128x128xf32, #mem<hbm>>, %y: memref<128x128xf32, #mem<hbm>>) {
  %a = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %b = neuron.alloc : memref<128x64xf32, #mem<hbm>>
  %c = neuron.alloc : memref<128x128xf32, #mem<hbm>>
  %t = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 128]]], src %x[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  neuron.dma_copy dma dst %a[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %a[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %b[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 0 : i64} : memref<128x64xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %c[0, [[128, 128], [1, 128]]], src %t[0:128, 0, [[1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %b[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x64xf32, #mem<hbm>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 128]]], src %c[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
  neuron.dma_copy dma dst %y[0, [[128, 128], [1, 128]]], src %t[0:128, 0, [[1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
  func.return
}
// CHECK:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// CHECK-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x128xf32, #mem<hbm>>
// With the spare bytes there is room: each gets bytes of its own.
// SPARE:       neuron.alloc {address = 0 : i64} : memref<128x64xf32, #mem<hbm>>
// SPARE-NEXT:  neuron.alloc {address = 32768 : i64} : memref<128x64xf32, #mem<hbm>>
// SPARE-NEXT:  neuron.alloc {address = 65536 : i64} : memref<128x128xf32, #mem<hbm>>
