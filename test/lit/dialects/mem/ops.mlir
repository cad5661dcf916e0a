// RUN: NEURON_ROUNDTRIP

// The memory spaces of the `mem` dialect (ir/dialects/memory.py) on memrefs of both levels: custom syntax ->
// generic -> custom. `#mem.sbuf`, the same attribute in xDSL's pretty form, reads the same and prints as
// `#mem<sbuf>`.

// CHECK-LABEL: func.func @every_space
// CHECK-SAME: memref<4x8xf32, #mem<hbm>>
// CHECK-SAME: memref<128x8xbf16, #mem<sbuf>>
// CHECK-SAME: memref<128x512xf32, #mem<psum>>
func.func @every_space(%x: memref<4x8xf32, #mem<hbm>>, %s: memref<128x8xbf16, #mem<sbuf>>, %p: memref<128x512xf32, #mem<psum>>) {
  func.return
}

// -----

// CHECK-LABEL: func.func @pretty_form
// CHECK-SAME: memref<128x8xf32, #mem<sbuf>>
func.func @pretty_form(%s: memref<128x8xf32, #mem.sbuf>) {
  func.return
}

// -----

// A strided HBM view keeps its space after the layout.
// CHECK-LABEL: func.func @strided
// CHECK-SAME: memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
func.func @strided(%w: memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>) {
  func.return
}

// -----

// Neuron buffers and tile-level tiles name the same spaces.
// CHECK-LABEL: func.func @buffers
// CHECK: neuron.alloc : memref<128x4xf32, #mem<sbuf>>
// CHECK: neuron.alloc : memref<128x4xf32, #mem<psum>>
func.func @buffers() {
  %s = neuron.alloc : memref<128x4xf32, #mem<sbuf>>
  %p = neuron.alloc : memref<128x4xf32, #mem<psum>>
  func.return
}
