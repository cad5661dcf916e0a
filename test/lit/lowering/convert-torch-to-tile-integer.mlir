// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Exact integer reductions and scans (lowering/convert_torch_to_tile/reduction.py and scan.py): integer results
// fold integer tiles of the result type, never fp32 ones.
// SEMANTICS-COUNT-5: all outputs match

// An int32 chunk loads as int32 (the DMA converts through fp32, inexact beyond 2^24) and GpSimdE widens it to
// int64; a bool chunk loads straight into int32 (0 and 1 are exact in fp32), whose sum over a chunk fits int32,
// and only its column widens to int64.
func.func @main(%x: tensor<6x300xi32>, %b: tensor<6x300xi1>) -> (tensor<6xi64>, tensor<6xi64>) {
  %s = torch.aten.sum.dim_IntList %x {dim = array<i64: 1>} : (tensor<6x300xi32>) -> tensor<6xi64>
  %c = torch.aten.sum.dim_IntList %b {dim = array<i64: 1>} : (tensor<6x300xi1>) -> tensor<6xi64>
  func.return %s, %c : tensor<6xi64>, tensor<6xi64>
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[X:.*]] = tile.load %x{{.*}} -> !tile.tile<6x300xi32, sbuf>
// CHECK-NEXT:  %[[W:.*]] = tile.copy %[[X]] : (!tile.tile<6x300xi32, sbuf>) -> !tile.tile<6x300xi64, sbuf>
// CHECK-NEXT:  %[[S:.*]] = tile.reduce %[[W]] {op = "add"} : (!tile.tile<6x300xi64, sbuf>) -> !tile.tile<6x1xi64, sbuf>
// CHECK-NEXT:  tile.store %[[S]]
// CHECK:       %[[B:.*]] = tile.load %b{{.*}} -> !tile.tile<6x300xi32, sbuf>
// CHECK-NEXT:  %[[C:.*]] = tile.reduce %[[B]] {op = "add"} : (!tile.tile<6x300xi32, sbuf>) -> !tile.tile<6x1xi32, sbuf>
// CHECK-NEXT:  tile.copy %[[C]] : (!tile.tile<6x1xi32, sbuf>) -> !tile.tile<6x1xi64, sbuf>

// -----

// Every element of a large tensor: the lanes fold their shares exactly, and the [lanes, 1] column reaches one
// partition through an HBM scratch tensor (stored as a column, loaded as a row) instead of a TensorE matmul.
func.func @main(%x: tensor<300x513xi64>) -> tensor<i64> {
  %s = torch.aten.sum.dim_IntList %x {dim = array<i64: 0, 1>} : (tensor<300x513xi64>) -> tensor<i64>
  func.return %s : tensor<i64>
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[COLUMN:.*]] = tile.reduce %{{.*}} {op = "add"} : (!tile.tile<114x1350xi64, sbuf>) -> !tile.tile<114x1xi64, sbuf>
// CHECK-NEXT:  %[[SCRATCH:.*]] = memref.alloc() : memref<114xi64, #mem<hbm>>
// CHECK-NEXT:  %[[AS_COLUMN:.*]] = tile.view %[[SCRATCH]] : memref<114xi64, #mem<hbm>> to memref<114x1xi64, #mem<hbm>>
// CHECK-NEXT:  tile.store %[[COLUMN]], %[[AS_COLUMN]]
// CHECK-NEXT:  %[[AS_ROW:.*]] = tile.view %[[SCRATCH]] : memref<114xi64, #mem<hbm>> to memref<1x114xi64, #mem<hbm>>
// CHECK-NEXT:  %[[ROW:.*]] = tile.load %[[AS_ROW]]
// CHECK-NEXT:  tile.reduce %[[ROW]] {op = "add"} : (!tile.tile<1x114xi64, sbuf>) -> !tile.tile<1x1xi64, sbuf>
// CHECK-NOT:   tile.matmul

// -----

// An integer cumsum scans on GpSimdE, never through fp32 PSUM: rows on partitions, the scanned dim read along
// the free axis (a transposed view), each chunk widened to the result type, scanned by tile.scan and offset by
// the carry column (the exact sum of the chunks before it), which the loop carries; the last chunk updates no
// carry.
func.func @main(%x: tensor<3x7000xi32>) -> tensor<3x7000xi64> {
  %c = torch.aten.cumsum %x {dim = 1 : i64} : (tensor<3x7000xi32>) -> tensor<3x7000xi64>
  func.return %c : tensor<3x7000xi64>
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[X0:.*]] = tile.load %{{.*}}[%c0, %c0] : memref<3x7000xi32, #mem<hbm>> -> !tile.tile<3x1024xi32, sbuf>
// CHECK-NEXT:  %[[W0:.*]] = tile.copy %[[X0]] : (!tile.tile<3x1024xi32, sbuf>) -> !tile.tile<3x1024xi64, sbuf>
// CHECK-NEXT:  %[[S0:.*]] = tile.scan %[[W0]] {op = "add"} : (!tile.tile<3x1024xi64, sbuf>) -> !tile.tile<3x1024xi64, sbuf>
// CHECK-NEXT:  tile.store %[[S0]]
// CHECK-NEXT:  %[[T0:.*]] = tile.reduce %[[W0]] {op = "add"} : (!tile.tile<3x1024xi64, sbuf>) -> !tile.tile<3x1xi64, sbuf>
// CHECK-NEXT:  %[[CARRY:.*]] = scf.for %[[F:.*]] = %c1024 to %c6144 step %c1024 iter_args(%[[C:.*]] = %[[T0]])
// CHECK:         %[[S:.*]] = tile.scan
// CHECK-NEXT:    %[[O:.*]] = tile.binary_scalar %[[S]] column %[[C]] {op = "add"}
// CHECK-NEXT:    tile.store %[[O]], %{{.*}}[%c0, %[[F]]]
// CHECK-NEXT:    %[[T:.*]] = tile.reduce
// CHECK-NEXT:    %[[NEXT:.*]] = tile.binary %[[C]], %[[T]] {op = "add"}
// CHECK-NEXT:    scf.yield %[[NEXT]]
// CHECK:       %[[SL:.*]] = tile.scan %{{.*}} : (!tile.tile<3x856xi64, sbuf>)
// CHECK-NEXT:  %[[OL:.*]] = tile.binary_scalar %[[SL]] column %[[CARRY]] {op = "add"}
// CHECK-NEXT:  tile.store %[[OL]]
// CHECK-NEXT:  func.return

// -----

// Integer arg-reductions compare exactly (fp32 merges neighbouring integers beyond 2^24): int64 values fold as
// int64 on GpSimdE, positions are int32 iotas, the first index of the extreme is the minimum of the positions
// that equal it, and a later chunk wins only when strictly better. There is no NaN to track.
func.func @main(%x: tensor<6x5000xi64>) -> (tensor<6xi64>, tensor<6xi64>) {
  %v, %i = torch.aten.max.dim %x {dim = 1 : i64} : (tensor<6x5000xi64>) -> (tensor<6xi64>, tensor<6xi64>)
  func.return %v, %i : tensor<6xi64>, tensor<6xi64>
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[X:.*]] = tile.load %x[%c0, %c0] : memref<6x5000xi64, #mem<hbm>> -> !tile.tile<6x2048xi64, sbuf>
// CHECK-NEXT:  %[[M:.*]] = tile.reduce %[[X]] {op = "max"} : (!tile.tile<6x2048xi64, sbuf>) -> !tile.tile<6x1xi64, sbuf>
// CHECK-NEXT:  %[[HIT:.*]] = tile.binary_scalar %[[X]] column %[[M]] {op = "is_equal"} : (!tile.tile<6x2048xi64, sbuf>, !tile.tile<6x1xi64, sbuf>) -> !tile.tile<6x2048xi64, sbuf>
// CHECK-NEXT:  %[[POS:.*]] = tile.iota {steps = array<i64: 1>} : !tile.tile<6x2048xi32, sbuf>
// CHECK-NEXT:  %[[NEVER:.*]] = tile.fill
// CHECK-NEXT:  %[[CAND:.*]] = tile.select %[[HIT]], %[[POS]], %[[NEVER]]
// CHECK-NEXT:  %[[I0:.*]] = tile.reduce %[[CAND]] {op = "min"} : (!tile.tile<6x2048xi32, sbuf>) -> !tile.tile<6x1xi32, sbuf>
// CHECK:       %[[M1:.*]] = tile.reduce %{{.*}} {op = "max"} : (!tile.tile<6x2048xi64, sbuf>)
// CHECK:       %[[I1:.*]] = tile.reduce %{{.*}} {op = "min"} : (!tile.tile<6x2048xi32, sbuf>)
// CHECK-NEXT:  %[[WINS:.*]] = tile.binary %[[M1]], %[[M]] {op = "is_gt"} : (!tile.tile<6x1xi64, sbuf>, !tile.tile<6x1xi64, sbuf>) -> !tile.tile<6x1xi64, sbuf>
// CHECK-NEXT:  tile.select %[[WINS]], %[[M1]], %[[M]]
// CHECK-NEXT:  tile.select %[[WINS]], %[[I1]], %[[I0]]
// CHECK-NOT:   f32
// CHECK:       tile.copy %{{.*}} : (!tile.tile<6x1xi32, sbuf>) -> !tile.tile<6x1xi64, sbuf>

// -----

// A bool (or other input of up to 16 bits) cumsum scans each chunk in int32, which cannot overflow within a
// chunk, and widens the scan to the int64 result on GpSimdE before storing (the DMA's fp32 conversion would
// round counts beyond 2^24).
func.func @main(%x: tensor<4x300xi1>) -> tensor<4x300xi64> {
  %c = torch.aten.cumsum %x {dim = 1 : i64} : (tensor<4x300xi1>) -> tensor<4x300xi64>
  func.return %c : tensor<4x300xi64>
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[X:.*]] = tile.load %{{.*}} : memref<4x300xi1, #mem<hbm>> -> !tile.tile<4x300xi32, sbuf>
// CHECK-NEXT:  %[[S:.*]] = tile.scan %[[X]] {op = "add"} : (!tile.tile<4x300xi32, sbuf>) -> !tile.tile<4x300xi32, sbuf>
// CHECK-NEXT:  %[[W:.*]] = tile.copy %[[S]] : (!tile.tile<4x300xi32, sbuf>) -> !tile.tile<4x300xi64, sbuf>
// CHECK-NEXT:  tile.store %[[W]]
