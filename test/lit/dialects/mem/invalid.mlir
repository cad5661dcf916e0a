// RUN: neuron-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// A memory space is one of hbm, sbuf and psum (ir/dialects/memory.py); anything else is a parse error at its
// token naming the rule, never a Python exception.

func.func @unknown_space(%x: memref<4xf32, #mem<dram>>) {
  func.return
}
// CHECK: unknown memory space 'dram' (expected hbm, sbuf or psum)

// -----

func.func @space_with_parameters(%x: memref<4xf32, #mem<sbuf<1>>>) {
  func.return
}
// CHECK: Expected '>'

// -----

func.func @no_space(%x: memref<4xf32, #mem<>>) {
  func.return
}
// CHECK: Expected attribute name.
