// Running out of on-chip memory names the buffer's position in this file, the buffer, what was live and the
// source line, like every other pass diagnostic.
// RUN: not neuron-opt %s -p neuron-allocate-memory 2>&1 | filecheck %s
// CHECK: alloc-error.mlir:12:3: error: neuron.alloc: out of SBUF on trn2: a buffer of 204800 bytes per partition does not fit next to 1 live buffers (204800 of 229376 bytes per partition in use) (at model.py:13 (model.l2))
// CHECK-NEXT: {{^}}  %b = neuron.alloc
// CHECK-NEXT: {{^}}  ^{{$}}
// CHECK-NOT: Traceback
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
func.func @main() {
  %a = neuron.alloc : memref<128x51200xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[1, 51200]]] {value = 0.0 : f64} : memref<128x51200xf32, #mem<sbuf>>
  %b = neuron.alloc : memref<128x51200xf32, #mem<sbuf>> loc("model.l2"("model.py":13:0))
  neuron.tensor_copy vector dst %b[0:128, 0, [[1, 51200]]], src %a[0:128, 0, [[1, 51200]]] : memref<128x51200xf32, #mem<sbuf>>, memref<128x51200xf32, #mem<sbuf>>
  func.return
}
}
