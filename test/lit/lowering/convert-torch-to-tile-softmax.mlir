// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Branches of the softmax lowering (lowering/convert_torch_to_tile/softmax.py): rows that fit on chip in one
// pass (a loop of row tiles and a peeled remainder), log-softmax along a non-last dim, and rows too long for
// SBUF in two folded passes. Values are checked end to end in test/e2e/test_reductions.py.

func.func @softmax_rows(%x: tensor<300x64xbf16>) -> tensor<300x64xbf16> {
  %0 = torch.aten._softmax %x {dim = -1 : i64, half_to_float = false} : (tensor<300x64xbf16>) -> tensor<300x64xbf16>
  func.return %0 : tensor<300x64xbf16>
}
// One load in the input's dtype and one store per row tile: the max, exp(x - max) with -max as the bias, its
// sum, the reciprocal, and the multiply that rounds to bf16.
// CHECK-LABEL: func.func @softmax_rows
// CHECK:       scf.for %[[P:.*]] = %c0 to %c256 step %c128 {
// CHECK-NEXT:    %[[X:.*]] = tile.load %x[%[[P]], %c0] : memref<300x64xbf16, #mem<hbm>> -> !tile.tile<128x64xbf16, sbuf>
// CHECK-NEXT:    %[[MAX:.*]] = tile.reduce %[[X]] {op = "max"}
// CHECK-NEXT:    %[[NEG:.*]] = tile.binary_scalar %[[MAX]] {op = "multiply", scalar = -1.000000e+00 : f64}
// CHECK-NEXT:    %[[E:.*]] = tile.unary %[[X]] bias %[[NEG]] {fn = "exp"} : (!tile.tile<128x64xbf16, sbuf>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x64xf32, sbuf>
// CHECK-NEXT:    %[[S:.*]] = tile.reduce %[[E]] {op = "add"}
// CHECK-NEXT:    %[[R:.*]] = tile.unary %[[S]] {fn = "reciprocal"}
// CHECK-NEXT:    %[[Y:.*]] = tile.binary_scalar %[[E]] column %[[R]] {op = "multiply"} : {{.*}} -> !tile.tile<128x64xbf16, sbuf>
// CHECK-NEXT:    tile.store %[[Y]], %{{.*}}[%[[P]], %c0]
// CHECK-NEXT:  }
// CHECK:       tile.load %x[%c256, %c0] : memref<300x64xbf16, #mem<hbm>> -> !tile.tile<44x64xbf16, sbuf>
// CHECK-NOT:   tile.load

// -----

func.func @log_softmax_dim0(%x: tensor<5x130xf32>) -> tensor<5x130xf32> {
  %0 = torch.aten._log_softmax %x {dim = 0 : i64, half_to_float = false} : (tensor<5x130xf32>) -> tensor<5x130xf32>
  func.return %0 : tensor<5x130xf32>
}
// Along dim 0 the rows are x's columns (a strided view); log-softmax subtracts max + log(sum) from the tile.
// CHECK-LABEL: func.func @log_softmax_dim0
// CHECK:       %[[V:.*]] = tile.view %x : memref<5x130xf32, #mem<hbm>> to memref<130x5xf32, strided<[1, 130]>, #mem<hbm>>
// CHECK:       %[[X:.*]] = tile.load %[[V]][%c0, %c0] {{.*}} -> !tile.tile<128x5xf32, sbuf>
// CHECK:       %[[L:.*]] = tile.unary %{{.*}} {fn = "log"}
// CHECK-NEXT:  %[[SHIFT:.*]] = tile.binary %{{.*}}, %[[L]] {op = "add"}
// CHECK-NEXT:  tile.binary_scalar %[[X]] column %[[SHIFT]] {op = "subtract"}
// CHECK:       tile.load %[[V]][%c128, %c0] {{.*}} -> !tile.tile<2x5xf32, sbuf>

// -----

func.func @softmax_long(%x: tensor<2x20000xf32>) -> tensor<2x20000xf32> {
  %0 = torch.aten._softmax %x {dim = 1 : i64, half_to_float = false} : (tensor<2x20000xf32>) -> tensor<2x20000xf32>
  func.return %0 : tensor<2x20000xf32>
}
// 20000 fp32 elements need 234 KiB per partition: folded in five chunks of 4000 (as wide as the body's share
// holds, all of one width) with two passes over the row. The first carries the running maximum (never below
// -FLT_MAX) and sum of exponentials as two [2, 1] columns, rescaling the sum by exp(old max - new max); the
// second writes the result.
// CHECK-LABEL: func.func @softmax_long
// CHECK:       %[[FIRST:.*]] = tile.load %x[%c0, %c0] {{.*}} -> !tile.tile<2x4000xf32, sbuf>
// CHECK:       scf.for %{{.*}} = %c4000 to %c20000 step %c4000 iter_args(%[[M:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}) -> (!tile.tile<2x1xf32, sbuf>, !tile.tile<2x1xf32, sbuf>) {
// CHECK:         %[[CM:.*]] = tile.reduce %{{.*}} {op = "max"}
// CHECK-NEXT:    %[[FM:.*]] = tile.binary_scalar %[[CM]] {op = "max", scalar = -3.40{{.*}}e+38 : f64}
// CHECK-NEXT:    %[[NM:.*]] = tile.binary %[[M]], %[[FM]] {op = "max"}
// CHECK-NEXT:    %[[NEG:.*]] = tile.binary_scalar %[[NM]] {op = "multiply", scalar = -1.000000e+00 : f64}
// CHECK-NEXT:    %[[R:.*]] = tile.unary %[[M]] bias %[[NEG]] {fn = "exp"}
// CHECK-NEXT:    %[[KEPT:.*]] = tile.binary %[[S]], %[[R]] {op = "multiply"}
// CHECK-NEXT:    %[[E:.*]] = tile.unary %{{.*}} bias %[[NEG]] {fn = "exp"} {{.*}} -> !tile.tile<2x4000xf32, sbuf>
// CHECK-NEXT:    %[[CS:.*]] = tile.reduce %[[E]] {op = "add"}
// CHECK-NEXT:    %[[NS:.*]] = tile.binary %[[KEPT]], %[[CS]] {op = "add"}
// CHECK-NEXT:    scf.yield %[[NM]], %[[NS]]
// CHECK:       tile.unary %{{.*}} {fn = "reciprocal"}
// CHECK:       scf.for %{{.*}} = %c0 to %c20000 step %c4000 {
// CHECK:         tile.unary %{{.*}} bias %{{.*}} {fn = "exp"}
// CHECK:         tile.binary_scalar %{{.*}} column %{{.*}} {op = "multiply"}
// CHECK:         tile.store

// -----

func.func @softmax_backward_rows(%g: tensor<300x64xbf16>, %y: tensor<300x64xbf16>) -> tensor<300x64xbf16> {
  %0 = torch.aten._softmax_backward_data %g, %y {dim = -1 : i64, input_dtype = bf16} : (tensor<300x64xbf16>, tensor<300x64xbf16>) -> tensor<300x64xbf16>
  func.return %0 : tensor<300x64xbf16>
}
// The gradient (g - sum(g * y)) * y in one pass over row groups (rows.py): the first 256 rows as 2 per
// partition, each operand one DMA of [128, 2, 64]; the rows' steps in wavefront order (so that the engines
// overlap the rows), the sums [128, 1] columns, the results rounded to bf16 into the group's tile and
// stored at once; then the last 44 rows as one row per partition.
// CHECK-LABEL: func.func @softmax_backward_rows
// CHECK:       %[[G:.*]] = tile.load %{{.*}}[%c0, %c0, %c0] : memref<150x2x64xbf16, #mem<hbm>> -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK:       %[[Y:.*]] = tile.load %{{.*}}[%c0, %c0, %c0] : memref<150x2x64xbf16, #mem<hbm>> -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK:       %[[G0:.*]] = tile.extract %[[G]][%c0, %c0]
// CHECK-NEXT:  %[[G1:.*]] = tile.extract %[[G]][%c1, %c0]
// CHECK-NEXT:  %[[Y0:.*]] = tile.extract %[[Y]][%c0, %c0]
// CHECK-NEXT:  %[[Y1:.*]] = tile.extract %[[Y]][%c1, %c0]
// CHECK-NEXT:  %[[GY0:.*]] = tile.binary %[[G0]], %[[Y0]] {op = "multiply"}
// CHECK-NEXT:  %[[GY1:.*]] = tile.binary %[[G1]], %[[Y1]] {op = "multiply"}
// CHECK-NEXT:  %[[S0:.*]] = tile.reduce %[[GY0]] {op = "add"} : (!tile.tile<128x64xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
// CHECK-NEXT:  %[[S1:.*]] = tile.reduce %[[GY1]] {op = "add"}
// CHECK-NEXT:  %[[C0:.*]] = tile.binary_scalar %[[G0]] column %[[S0]] {op = "subtract"}
// CHECK-NEXT:  %[[C1:.*]] = tile.binary_scalar %[[G1]] column %[[S1]] {op = "subtract"}
// CHECK-NEXT:  %[[R0:.*]] = tile.binary %[[C0]], %[[Y0]] {op = "multiply"} : {{.*}} -> !tile.tile<128x64xbf16, sbuf>
// CHECK-NEXT:  %[[I0:.*]] = tile.insert %[[R0]], %{{.*}}[%c0, %c0]
// CHECK-NEXT:  %[[R1:.*]] = tile.binary %[[C1]], %[[Y1]] {op = "multiply"}
// CHECK-NEXT:  %[[I1:.*]] = tile.insert %[[R1]], %[[I0]][%c1, %c0]
// CHECK:       tile.store %[[I1]], %{{.*}}[%c0, %c0, %c0] : !tile.tile<128x2x64xbf16, sbuf>, memref<150x2x64xbf16, #mem<hbm>>
// CHECK-COUNT-2: tile.load %{{.*}}[%c0, %c0, %c0] {{.*}} -> !tile.tile<44x1x64xbf16, sbuf>
// CHECK-NOT:   tile.load

// -----

func.func @log_softmax_backward_long(%g: tensor<2x20000xf32>, %y: tensor<2x20000xf32>) -> tensor<2x20000xf32> {
  %0 = torch.aten._log_softmax_backward_data %g, %y {dim = 1 : i64, input_dtype = f32} : (tensor<2x20000xf32>, tensor<2x20000xf32>) -> tensor<2x20000xf32>
  func.return %0 : tensor<2x20000xf32>
}
// Rows too long for one pass: a loop summing g over 2048-wide chunks, then a loop writing g - exp(y) * sum.
// CHECK-LABEL: func.func @log_softmax_backward_long
// CHECK:       %[[SUM:.*]] = scf.for {{.*}} iter_args
// CHECK:         tile.reduce %{{.*}} {op = "add"}
// CHECK:       scf.for
// CHECK:         tile.unary %{{.*}} {fn = "exp"}
// CHECK-NEXT:    tile.binary_scalar %{{.*}} column %{{.*}} {op = "multiply"}
// CHECK-NEXT:    tile.binary %{{.*}}, %{{.*}} {op = "subtract"}
