// RUN: neuron-opt %s --split-input-file -p convert-tile-to-neuron | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Exact integer folds and scans (lowering/convert_tile_to_neuron.py: _integer_fold, _scan) on GpSimdE's
// integer lanes; --check-semantics runs each case against the tile dialect's exact integer semantics.
// SEMANTICS: all outputs match
// SEMANTICS: all outputs match

// Integer reductions are exact: GpSimdE folds halves of the reduced columns with tensor_tensor (VectorE's
// tensor_reduce would round through fp32). An odd middle column is copied beside the first half; later steps
// update the scratch buffer in place; the last one writes the result. With kept free axes every row folds at
// once (a [row stride, rows] dimension in each access).
// CHECK-LABEL: func.func @integer_fold
func.func @integer_fold(%x: memref<5x7xi64, #mem<hbm>>, %v: memref<5x2x3xi32, #mem<hbm>>) -> (memref<5x1xi64, #mem<hbm>>, memref<5x2xi32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<5x7xi64, #mem<hbm>> -> !tile.tile<5x7xi64, sbuf>
  %s = tile.reduce %t {op = "add"} : (!tile.tile<5x7xi64, sbuf>) -> !tile.tile<5x1xi64, sbuf>
  %y = memref.alloc() : memref<5x1xi64, #mem<hbm>>
  tile.store %s, %y[%c0, %c0] : !tile.tile<5x1xi64, sbuf>, memref<5x1xi64, #mem<hbm>>
  %u = tile.load %v[%c0, %c0, %c0] : memref<5x2x3xi32, #mem<hbm>> -> !tile.tile<5x2x3xi32, sbuf>
  %m = tile.reduce %u {op = "max"} : (!tile.tile<5x2x3xi32, sbuf>) -> !tile.tile<5x2xi32, sbuf>
  %z = memref.alloc() : memref<5x2xi32, #mem<hbm>>
  tile.store %m, %z[%c0, %c0] : !tile.tile<5x2xi32, sbuf>, memref<5x2xi32, #mem<hbm>>
  func.return %y, %z : memref<5x1xi64, #mem<hbm>>, memref<5x2xi32, #mem<hbm>>
}
// CHECK:       %[[T:.*]] = neuron.alloc : memref<5x7xi64, #mem<sbuf>>
// CHECK:       %[[S:.*]] = neuron.alloc : memref<5x1xi64, #mem<sbuf>>
// CHECK-NEXT:  %[[W:.*]] = neuron.alloc : memref<5x4xi64, #mem<sbuf>>
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[W]][0:5, 0, [[1, 3]]], in0 %[[T]][0:5, 0, [[1, 3]]], in1 %[[T]][0:5, 4, [[1, 3]]] {op = "add"}
// CHECK-NEXT:  neuron.tensor_copy gpsimd dst %[[W]][0:5, 3, [[1, 1]]], src %[[T]][0:5, 3, [[1, 1]]]
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[W]][0:5, 0, [[1, 2]]], in0 %[[W]][0:5, 0, [[1, 2]]], in1 %[[W]][0:5, 2, [[1, 2]]] {op = "add"}
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[S]][0:5, 0, [[1, 1]]], in0 %[[W]][0:5, 0, [[1, 1]]], in1 %[[W]][0:5, 1, [[1, 1]]] {op = "add"}
// CHECK-NOT:   neuron.tensor_reduce
// CHECK:       %[[U:.*]] = neuron.alloc : memref<5x2x3xi32, #mem<sbuf>>
// CHECK:       %[[M:.*]] = neuron.alloc : memref<5x2xi32, #mem<sbuf>>
// CHECK-NEXT:  %[[V:.*]] = neuron.alloc : memref<5x4xi32, #mem<sbuf>>
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[V]][0:5, 0, [[2, 2], [1, 1]]], in0 %[[U]][0:5, 0, [[3, 2], [1, 1]]], in1 %[[U]][0:5, 2, [[3, 2], [1, 1]]] {op = "max"}
// CHECK-NEXT:  neuron.tensor_copy gpsimd dst %[[V]][0:5, 1, [[2, 2], [1, 1]]], src %[[U]][0:5, 1, [[3, 2], [1, 1]]]
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[M]][0:5, 0, [[1, 2], [1, 1]]], in0 %[[V]][0:5, 0, [[2, 2], [1, 1]]], in1 %[[V]][0:5, 1, [[2, 2], [1, 1]]] {op = "max"}

// -----

// An integer scan (Hillis-Steele): for shifts 1, 2, 4 each column combines with the one `shift` before it and
// the first `shift` columns are copied, alternating buffers so that the last shift lands in the result. A
// single column is a copy.
// CHECK-LABEL: func.func @integer_scan
func.func @integer_scan(%x: memref<5x7xi64, #mem<hbm>>, %w: memref<5x1xi32, #mem<hbm>>) -> (memref<5x7xi64, #mem<hbm>>, memref<5x1xi32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<5x7xi64, #mem<hbm>> -> !tile.tile<5x7xi64, sbuf>
  %c = tile.scan %t {op = "add"} : (!tile.tile<5x7xi64, sbuf>) -> !tile.tile<5x7xi64, sbuf>
  %y = memref.alloc() : memref<5x7xi64, #mem<hbm>>
  tile.store %c, %y[%c0, %c0] : !tile.tile<5x7xi64, sbuf>, memref<5x7xi64, #mem<hbm>>
  %o = tile.load %w[%c0, %c0] : memref<5x1xi32, #mem<hbm>> -> !tile.tile<5x1xi32, sbuf>
  %d = tile.scan %o {op = "max"} : (!tile.tile<5x1xi32, sbuf>) -> !tile.tile<5x1xi32, sbuf>
  %z = memref.alloc() : memref<5x1xi32, #mem<hbm>>
  tile.store %d, %z[%c0, %c0] : !tile.tile<5x1xi32, sbuf>, memref<5x1xi32, #mem<hbm>>
  func.return %y, %z : memref<5x7xi64, #mem<hbm>>, memref<5x1xi32, #mem<hbm>>
}
// CHECK:       %[[T:.*]] = neuron.alloc : memref<5x7xi64, #mem<sbuf>>
// CHECK:       %[[C:.*]] = neuron.alloc : memref<5x7xi64, #mem<sbuf>>
// CHECK-NEXT:  %[[W:.*]] = neuron.alloc : memref<5x7xi64, #mem<sbuf>>
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[C]][0:5, 1, [[1, 6]]], in0 %[[T]][0:5, 1, [[1, 6]]], in1 %[[T]][0:5, 0, [[1, 6]]] {op = "add"}
// CHECK-NEXT:  neuron.tensor_copy gpsimd dst %[[C]][0:5, 0, [[1, 1]]], src %[[T]][0:5, 0, [[1, 1]]]
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[W]][0:5, 2, [[1, 5]]], in0 %[[C]][0:5, 2, [[1, 5]]], in1 %[[C]][0:5, 0, [[1, 5]]] {op = "add"}
// CHECK-NEXT:  neuron.tensor_copy gpsimd dst %[[W]][0:5, 0, [[1, 2]]], src %[[C]][0:5, 0, [[1, 2]]]
// CHECK-NEXT:  neuron.tensor_tensor gpsimd dst %[[C]][0:5, 4, [[1, 3]]], in0 %[[W]][0:5, 4, [[1, 3]]], in1 %[[W]][0:5, 0, [[1, 3]]] {op = "add"}
// CHECK-NEXT:  neuron.tensor_copy gpsimd dst %[[C]][0:5, 0, [[1, 4]]], src %[[W]][0:5, 0, [[1, 4]]]
// CHECK:       %[[O:.*]] = neuron.alloc : memref<5x1xi32, #mem<sbuf>>
// CHECK:       %[[D:.*]] = neuron.alloc : memref<5x1xi32, #mem<sbuf>>
// CHECK-NEXT:  neuron.tensor_copy gpsimd dst %[[D]][0:5, 0, [[1, 1]]], src %[[O]][0:5, 0, [[1, 1]]]
