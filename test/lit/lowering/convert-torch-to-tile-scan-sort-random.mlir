// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Branches of the scan, sort and random lowerings (lowering/convert_torch_to_tile/scan.py, sort.py, random.py):
// chunked cumsum with its carry, the two passes of a sort, and the seed argument with one stream per random op.

func.func @cumsum_with_carry(%x: tensor<300x5xi64>) -> tensor<300x5xf32> {
  %c = torch.aten.cumsum %x {dim = 0 : i64, dtype = f32} : (tensor<300x5xi64>) -> tensor<300x5xf32>
  func.return %c : tensor<300x5xf32>
}
// cumsum on TensorE: triangular ones (iota m - k >= 0, per chunk size) as the stationary operand with the scanned
// dim on partitions; from the second chunk on, a ones row times the carried column sums accumulates into the same
// PSUM tile, and the carry grows by a ones column times the chunk. Integers scanned into floats are scanned once
// (integer results scan exactly on GpSimdE instead: convert-torch-to-tile-integer.mlir).
// CHECK-LABEL: func.func @cumsum_with_carry
// CHECK:       %[[IOTA:.*]] = tile.iota {steps = array<i64: 1>, channel_multiplier = -1 : i64} : !tile.tile<128x128xf32, sbuf>
// CHECK:       %[[TRI:.*]] = tile.binary_scalar %[[IOTA]] {op = "is_ge", scalar = 0.000000e+00 : f64}
// CHECK:       tile.iota {steps = array<i64: 1>, channel_multiplier = -1 : i64} : !tile.tile<44x44xf32, sbuf>
// CHECK:       %[[ROW:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<1x128xf32, sbuf>
// CHECK:       %[[COLUMN:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<128x1xf32, sbuf>
// CHECK:       %[[X0:.*]] = tile.load %x[%c0, %c0] : memref<300x5xi64, #mem<hbm>> -> !tile.tile<128x5xf32, sbuf>
// CHECK-NEXT:  tile.matmul %[[TRI]], %[[X0]] : {{.*}} -> !tile.tile<128x5xf32, psum>
// CHECK:       tile.copy %{{.*}} : (!tile.tile<128x5xf32, psum>) -> !tile.tile<128x5xf32, sbuf>
// CHECK:       %[[TOTAL:.*]] = tile.matmul %[[COLUMN]], %[[X0]] : {{.*}} -> !tile.tile<1x5xf32, psum>
// CHECK:       %[[CARRY:.*]] = tile.copy %[[TOTAL]] : (!tile.tile<1x5xf32, psum>) -> !tile.tile<1x5xf32, sbuf>
// CHECK:       %[[X1:.*]] = tile.load %x[%c128, %c0]
// CHECK:       %[[P1:.*]] = tile.matmul %[[TRI]], %[[X1]]
// CHECK:       tile.matmul %[[ROW]], %[[CARRY]] acc %[[P1]]
// CHECK:       tile.binary %[[CARRY]], %{{.*}} {op = "add"} : (!tile.tile<1x5xf32, sbuf>, !tile.tile<1x5xf32, psum>)
// The last chunk (44 rows) takes the carry and computes none: a total no engine reads would leave an accumulation
// group in PSUM that nothing orders the next group's writes after.
// CHECK:       tile.load %x[%c256, %c0]
// CHECK:       tile.matmul %{{.*}} acc %{{.*}} -> !tile.tile<44x5xf32, psum>
// CHECK:       tile.store
// CHECK-NOT:   tile.matmul
// CHECK-NOT:   tile.select
// CHECK:       func.return

// -----

func.func @cumsum_one_chunk(%x: tensor<5x7xi64>) -> tensor<5x7xf32> {
  %c = torch.aten.cumsum %x {dim = 0 : i64, dtype = f32} : (tensor<5x7xi64>) -> tensor<5x7xf32>
  func.return %c : tensor<5x7xf32>
}
// A scan of one chunk has no carry to pass on: one matmul by the triangle, and no column sums, whose PSUM tile
// no engine would read.
// CHECK-LABEL: func.func @cumsum_one_chunk
// CHECK:       %[[X:.*]] = tile.load %x[%c0, %c0] : memref<5x7xi64, #mem<hbm>> -> !tile.tile<5x7xf32, sbuf>
// CHECK-NEXT:  %[[P:.*]] = tile.matmul %{{.*}}, %[[X]] : {{.*}} -> !tile.tile<5x7xf32, psum>
// CHECK-NOT:   tile.matmul
// CHECK:       func.return

// -----

func.func @cumsum_float_parts(%x: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %c = torch.aten.cumsum %x {dim = 0 : i64} : (tensor<6x5xf32>) -> tensor<6x5xf32>
  func.return %c : tensor<6x5xf32>
}
// A float cumsum scans its finite part (x - x == 0 selects it) and flags of NaN, +inf and -inf, then combines
// them: NaN after a NaN or infinities of both signs, +-inf after one sign's, the finite sum otherwise.
// A scan of one chunk is one matmul per part, with no carry.
// CHECK-LABEL: func.func @cumsum_float_parts
// CHECK:       %[[FINITE:.*]] = tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 0.000000e+00 : f64}
// CHECK:       %[[PART:.*]] = tile.select %[[FINITE]], %{{.*}}, %{{.*}}
// CHECK:       tile.matmul %{{.*}}, %[[PART]] : {{.*}} -> !tile.tile<6x5xf32, psum>
// CHECK-NOT:   -> !tile.tile<1x5xf32, psum>
// CHECK:       tile.binary %[[X:.*]], %[[X]] {op = "not_equal"}
// CHECK:       tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 0x7ff0000000000000 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 0xfff0000000000000 : f64}
// CHECK:       %[[INVALID:.*]] = tile.binary %{{.*}}, %{{.*}} {op = "logical_or"}
// CHECK:       tile.select %[[INVALID]], %{{.*}}, %{{.*}} : {{.*}} -> !tile.tile<30x1xf32, sbuf>

// -----

func.func @sort_descending(%x: tensor<3x40xf32>) -> (tensor<3x40xf32>, tensor<3x40xi64>) {
  %0, %1 = torch.aten.sort %x {dim = 1 : i64, descending = true} : (tensor<3x40xf32>) -> (tensor<3x40xf32>, tensor<3x40xi64>)
  func.return %0, %1 : tensor<3x40xf32>, tensor<3x40xi64>
}
// sort: ranks with i on partitions (own value a [P, 1] column, the row spread over partitions with a stride-0
// view), NaN flags compared first, ties broken by position; then each output position r picks the value whose
// rank is r with a select and a sum.
// CHECK-LABEL: func.func @sort_descending
// CHECK:       memref.alloc() : memref<3x40xf32, #mem<hbm>>
// CHECK-NEXT:  memref.alloc() : memref<3x40xi64, #mem<hbm>>
// CHECK-NEXT:  %[[RANKS:.*]] = memref.alloc() : memref<3x40xf32, #mem<hbm>>
// CHECK:       scf.for %[[ROW:.*]] = %c0 to %c3 step %c1 {
// CHECK:         %[[OWN:.*]] = tile.load %{{.*}}[%[[ROW]], %c0, %c0] : memref<3x40x1xf32, #mem<hbm>> -> !tile.tile<40x1xf32, sbuf>
// CHECK:         tile.view %x : memref<3x40xf32, #mem<hbm>> to memref<3x40x40xf32, strided<[40, 0, 1]>, #mem<hbm>>
// CHECK:         tile.binary_scalar %{{.*}} column %{{.*}} {op = "is_gt"}
// CHECK:         tile.binary_scalar %{{.*}} column %{{.*}} {op = "is_lt"}
// CHECK:         tile.reduce %{{.*}} {op = "add"} : (!tile.tile<40x40xf32, sbuf>) -> !tile.tile<40x1xf32, sbuf>
// CHECK:       scf.for
// CHECK:         %[[TARGET:.*]] = tile.iota {steps = array<i64: 0>, channel_multiplier = 1 : i64} : !tile.tile<40x1xf32, sbuf>
// CHECK:         tile.view %[[RANKS]] : memref<3x40xf32, #mem<hbm>> to memref<3x40x40xf32, strided<[40, 0, 1]>, #mem<hbm>>
// CHECK:         %[[HIT:.*]] = tile.binary_scalar %{{.*}} column %[[TARGET]] {op = "is_equal"}
// CHECK:         tile.select %[[HIT]]
// CHECK:         tile.copy %{{.*}} : (!tile.tile<40x1xf32, sbuf>) -> !tile.tile<40x1xi64, sbuf>

// -----

func.func @random_streams(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi1>) {
  %r = torch.aten.rand {size = array<i64: 4, 8>, device = "cpu", pin_memory = false} : () -> tensor<4x8xf32>
  %0, %1 = torch.aten.native_dropout %x {p = 5.000000e-01 : f64, train = true} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  func.return %r, %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi1>
}
// Random ops append the seed argument; each draws Philox values for element counters (an iota of flat indices)
// under its own key: the seed, plus k * 0x9E3779B9 for the k-th random op (here k = 1: -1640531527).
// CHECK-LABEL: func.func @random_streams(%x: memref<4x8xf32, #mem<hbm>>, %rng_seed: memref<1xi32, #mem<hbm>>)
// CHECK:       %[[SEED:.*]] = tile.view %rng_seed : memref<1xi32, #mem<hbm>> to memref<128x1xi32, strided<[0, 0]>, #mem<hbm>>
// CHECK:       %[[COUNTERS:.*]] = tile.iota {steps = array<i64: 1>, channel_multiplier = 1 : i64} : !tile.tile<32x1xi32, sbuf>
// CHECK:       %[[KEY:.*]] = tile.load %[[SEED]]
// CHECK:       tile.kernel %[[COUNTERS]], %[[KEY]] {kernel = "uniform"}
// CHECK:       tile.binary_scalar %{{.*}} {op = "add", scalar = -1640531527 : i64} : (!tile.tile<32x1xi32, sbuf>) -> !tile.tile<32x1xi32, sbuf>
// CHECK:       %[[U:.*]] = tile.kernel %{{.*}}, %{{.*}} {kernel = "uniform"}
// CHECK:       tile.binary_scalar %[[U]] {op = "is_lt", scalar = 5.000000e-01 : f64} : (!tile.tile<32x1xf32, sbuf>) -> !tile.tile<32x1xi1, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 2.000000e+00 : f64}

// -----

builtin.module attributes {neuron.stochastic_rounding} {
  func.func @stochastic_cast(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
    %r = torch.aten._to_copy %x {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
    func.return %r : tensor<4x8xbf16>
  }
}
// Under the module's neuron.stochastic_rounding a cast from fp32 to bf16 draws a uniform per element from the
// function's seeded stream (the seed argument is appended) and rounds with GpSimdE's stochastic_round_bf16.
// CHECK-LABEL: func.func @stochastic_cast
// CHECK-SAME:  %rng_seed: memref<1xi32, #mem<hbm>>
// CHECK:       %[[X:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       %[[U:.*]] = tile.kernel %{{.*}}, %{{.*}} {kernel = "uniform"}
// CHECK-NEXT:  tile.kernel %[[X]], %[[U]] {kernel = "stochastic_round_bf16"} : (!tile.tile<32x1xf32, sbuf>, !tile.tile<32x1xf32, sbuf>) -> !tile.tile<32x1xbf16, sbuf>
