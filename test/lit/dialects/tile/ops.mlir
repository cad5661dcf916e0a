// RUN: NEURON_ROUNDTRIP

// Custom syntax -> generic -> custom for every op of the tile dialect (ir/dialects/tile.py) and the
// `!tile.tile<...>` type. One function per case; HBM tensors are memref arguments in #mem<hbm>.

// ---- tile.view ------------------------------------------------------------------------------------------------

// CHECK-LABEL: func.func @view_transpose
// CHECK-SAME: (%[[W:[^:]+]]: memref<520x300xf32, #mem<hbm>>
func.func @view_transpose(%w: memref<520x300xf32, #mem<hbm>>) -> memref<300x520xf32, strided<[1, 300]>, #mem<hbm>> {
  // CHECK: %[[V:.*]] = tile.view %[[W]] : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
  %0 = tile.view %w : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
  // CHECK: func.return %[[V]]
  func.return %0 : memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
}

// CHECK-LABEL: func.func @view_broadcast_offset
// CHECK-SAME: (%[[B:[^:]+]]: memref<1040xf32, #mem<hbm>>
func.func @view_broadcast_offset(%b: memref<1040xf32, #mem<hbm>>) -> memref<37x520xf32, strided<[0, 1], offset: 520>, #mem<hbm>> {
  // A broadcast (stride 0) of the second half of the buffer (offset 520).
  // CHECK: %[[V:.*]] = tile.view %[[B]] : memref<1040xf32, #mem<hbm>> to memref<37x520xf32, strided<[0, 1], offset: 520>, #mem<hbm>>
  %0 = tile.view %b : memref<1040xf32, #mem<hbm>> to memref<37x520xf32, strided<[0, 1], offset: 520>, #mem<hbm>>
  // CHECK: func.return %[[V]]
  func.return %0 : memref<37x520xf32, strided<[0, 1], offset: 520>, #mem<hbm>>
}

// ---- tile.load / tile.store -----------------------------------------------------------------------------------

// CHECK-LABEL: func.func @load_default_dims
// CHECK-SAME: (%[[X:[^:]+]]: memref<37x300xf32, #mem<hbm>>{{.*}}, %[[I:[^:]+]]: index
func.func @load_default_dims(%x: memref<37x300xf32, #mem<hbm>>, %i: index) -> !tile.tile<37x300xf32, sbuf> {
  // CHECK: %[[C0:.*]] = arith.constant 0 : index
  %c0 = arith.constant 0 : index
  // Without `dims` the tile walks the tensor's last dimensions in order: no `dims` is printed.
  // CHECK: %[[T:.*]] = tile.load %[[X]][%[[I]], %[[C0]]] : memref<37x300xf32, #mem<hbm>> -> !tile.tile<37x300xf32, sbuf>
  %t = tile.load %x[%i, %c0] : memref<37x300xf32, #mem<hbm>> -> !tile.tile<37x300xf32, sbuf>
  // CHECK: func.return %[[T]]
  func.return %t : !tile.tile<37x300xf32, sbuf>
}

// CHECK-LABEL: func.func @load_transposed_dims
// CHECK-SAME: (%[[X:[^:]+]]: memref<37x300xf32, #mem<hbm>>{{.*}}, %[[K:[^:]+]]: index
func.func @load_transposed_dims(%x: memref<37x300xf32, #mem<hbm>>, %k: index) -> !tile.tile<128x37xf32, sbuf> {
  // CHECK: %[[C0:.*]] = arith.constant 0 : index
  %c0 = arith.constant 0 : index
  // CHECK: %[[T:.*]] = tile.load %[[X]][%[[C0]], %[[K]]] {dims = array<i64: 1, 0>} : memref<37x300xf32, #mem<hbm>> -> !tile.tile<128x37xf32, sbuf>
  %t = tile.load %x[%c0, %k] {dims = array<i64: 1, 0>} : memref<37x300xf32, #mem<hbm>> -> !tile.tile<128x37xf32, sbuf>
  // CHECK: func.return %[[T]]
  func.return %t : !tile.tile<128x37xf32, sbuf>
}

// CHECK-LABEL: func.func @load_converting_rank3
// CHECK-SAME: (%[[X:[^:]+]]: memref<4x64x96xf32, #mem<hbm>>{{.*}}, %[[B:[^:]+]]: index
func.func @load_converting_rank3(%x: memref<4x64x96xf32, #mem<hbm>>, %b: index) -> !tile.tile<64x96xbf16, sbuf> {
  // CHECK: %[[C0:.*]] = arith.constant 0 : index
  %c0 = arith.constant 0 : index
  // A leading dimension fixed at its index, and an f32 -> bf16 conversion by the DMA.
  // CHECK: %[[T:.*]] = tile.load %[[X]][%[[B]], %[[C0]], %[[C0]]] : memref<4x64x96xf32, #mem<hbm>> -> !tile.tile<64x96xbf16, sbuf>
  %t = tile.load %x[%b, %c0, %c0] : memref<4x64x96xf32, #mem<hbm>> -> !tile.tile<64x96xbf16, sbuf>
  // CHECK: func.return %[[T]]
  func.return %t : !tile.tile<64x96xbf16, sbuf>
}

// CHECK-LABEL: func.func @store_default_dims
// CHECK-SAME: (%[[T:[^:]+]]: !tile.tile<37x520xf32, sbuf>{{.*}}, %[[Y:[^:]+]]: memref<37x520xf32, #mem<hbm>>
func.func @store_default_dims(%t: !tile.tile<37x520xf32, sbuf>, %y: memref<37x520xf32, #mem<hbm>>) {
  // CHECK: %[[C0:.*]] = arith.constant 0 : index
  %c0 = arith.constant 0 : index
  // CHECK: tile.store %[[T]], %[[Y]][%[[C0]], %[[C0]]] : !tile.tile<37x520xf32, sbuf>, memref<37x520xf32, #mem<hbm>>
  tile.store %t, %y[%c0, %c0] : !tile.tile<37x520xf32, sbuf>, memref<37x520xf32, #mem<hbm>>
  func.return
}

// CHECK-LABEL: func.func @store_transposed_dims
// CHECK-SAME: (%[[T:[^:]+]]: !tile.tile<128x37xf32, sbuf>{{.*}}, %[[Y:[^:]+]]: memref<37x300xf32, #mem<hbm>>{{.*}}, %[[K:[^:]+]]: index
func.func @store_transposed_dims(%t: !tile.tile<128x37xf32, sbuf>, %y: memref<37x300xf32, #mem<hbm>>, %k: index) {
  // CHECK: %[[C0:.*]] = arith.constant 0 : index
  %c0 = arith.constant 0 : index
  // CHECK: tile.store %[[T]], %[[Y]][%[[C0]], %[[K]]] {dims = array<i64: 1, 0>} : !tile.tile<128x37xf32, sbuf>, memref<37x300xf32, #mem<hbm>>
  tile.store %t, %y[%c0, %k] {dims = array<i64: 1, 0>} : !tile.tile<128x37xf32, sbuf>, memref<37x300xf32, #mem<hbm>>
  func.return
}

// ---- tile.load_transpose --------------------------------------------------------------------------------------

// CHECK-LABEL: func.func @load_transpose_patches
func.func @load_transpose_patches(%x: memref<2x3x14x16x14x16xbf16, #mem<hbm>>, %n: index) -> !tile.tile<128x14x14xbf16, sbuf> {
  %c0 = arith.constant 0 : index
  // CHECK: tile.load_transpose %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] {row_dims = array<i64: 2, 4>, row_sizes = array<i64: 14, 14>, column_dims = array<i64: 3, 5>, column_sizes = array<i64: 8, 16>} : memref<2x3x14x16x14x16xbf16, #mem<hbm>> -> !tile.tile<128x14x14xbf16, sbuf>
  %p = tile.load_transpose %x[%n, %c0, %c0, %c0, %c0, %c0] {row_dims = array<i64: 2, 4>, row_sizes = array<i64: 14, 14>, column_dims = array<i64: 3, 5>, column_sizes = array<i64: 8, 16>} : memref<2x3x14x16x14x16xbf16, #mem<hbm>> -> !tile.tile<128x14x14xbf16, sbuf>
  func.return %p : !tile.tile<128x14x14xbf16, sbuf>
}

// ---- tile.matmul / tile.transpose -----------------------------------------------------------------------------

// CHECK-LABEL: func.func @matmul_no_acc
// CHECK-SAME: (%[[S:[^:]+]]: !tile.tile<128x37xf32, sbuf>{{.*}}, %[[M:[^:]+]]: !tile.tile<128x512xf32, sbuf>
func.func @matmul_no_acc(%s: !tile.tile<128x37xf32, sbuf>, %m: !tile.tile<128x512xf32, sbuf>) -> !tile.tile<37x512xf32, psum> {
  // CHECK: %[[P:.*]] = tile.matmul %[[S]], %[[M]] : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x512xf32, sbuf>) -> !tile.tile<37x512xf32, psum>
  %p = tile.matmul %s, %m : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x512xf32, sbuf>) -> !tile.tile<37x512xf32, psum>
  // CHECK: func.return %[[P]]
  func.return %p : !tile.tile<37x512xf32, psum>
}

// CHECK-LABEL: func.func @matmul_acc
// CHECK-SAME: (%[[S:[^:]+]]: !tile.tile<44x37xbf16, sbuf>{{.*}}, %[[M:[^:]+]]: !tile.tile<44x8xbf16, sbuf>{{.*}}, %[[ACC:[^:]+]]: !tile.tile<37x8xf32, psum>
func.func @matmul_acc(%s: !tile.tile<44x37xbf16, sbuf>, %m: !tile.tile<44x8xbf16, sbuf>, %acc: !tile.tile<37x8xf32, psum>) -> !tile.tile<37x8xf32, psum> {
  // CHECK: %[[P:.*]] = tile.matmul %[[S]], %[[M]] acc %[[ACC]] : (!tile.tile<44x37xbf16, sbuf>, !tile.tile<44x8xbf16, sbuf>, !tile.tile<37x8xf32, psum>) -> !tile.tile<37x8xf32, psum>
  %p = tile.matmul %s, %m acc %acc : (!tile.tile<44x37xbf16, sbuf>, !tile.tile<44x8xbf16, sbuf>, !tile.tile<37x8xf32, psum>) -> !tile.tile<37x8xf32, psum>
  // CHECK: func.return %[[P]]
  func.return %p : !tile.tile<37x8xf32, psum>
}

// CHECK-LABEL: func.func @transpose_to_psum
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<37x128xf32, sbuf>
func.func @transpose_to_psum(%x: !tile.tile<37x128xf32, sbuf>) -> !tile.tile<128x37xf32, psum> {
  // CHECK: %[[T:.*]] = tile.transpose %[[X]] : !tile.tile<37x128xf32, sbuf> -> !tile.tile<128x37xf32, psum>
  %t = tile.transpose %x : !tile.tile<37x128xf32, sbuf> -> !tile.tile<128x37xf32, psum>
  // CHECK: func.return %[[T]]
  func.return %t : !tile.tile<128x37xf32, psum>
}

// ---- elementwise ----------------------------------------------------------------------------------------------

// CHECK-LABEL: func.func @unary_bias_column
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<37x512xf32, psum>{{.*}}, %[[B:[^:]+]]: !tile.tile<37x1xf32, sbuf>
func.func @unary_bias_column(%x: !tile.tile<37x512xf32, psum>, %b: !tile.tile<37x1xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf> {
  // CHECK: %[[R:.*]] = tile.unary %[[X]] bias %[[B]] {fn = "relu"} : (!tile.tile<37x512xf32, psum>, !tile.tile<37x1xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  %r = tile.unary %x bias %b {fn = "relu"} : (!tile.tile<37x512xf32, psum>, !tile.tile<37x1xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  // CHECK: func.return %[[R]]
  func.return %r : !tile.tile<37x512xf32, sbuf>
}

// CHECK-LABEL: func.func @unary_immediates
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<128x64xf32, sbuf>
func.func @unary_immediates(%x: !tile.tile<128x64xf32, sbuf>) -> !tile.tile<128x64xbf16, sbuf> {
  // scale, bias_value and alpha as immediates; the result type converts to bf16.
  // CHECK: %[[R:.*]] = tile.unary %[[X]] {fn = "exp", scale = 5.000000e-01 : f64, bias_value = -1.000000e+00 : f64, alpha = 2.000000e-01 : f64} : (!tile.tile<128x64xf32, sbuf>) -> !tile.tile<128x64xbf16, sbuf>
  %r = tile.unary %x {fn = "exp", scale = 0.5 : f64, bias_value = -1.0 : f64, alpha = 0.2 : f64} : (!tile.tile<128x64xf32, sbuf>) -> !tile.tile<128x64xbf16, sbuf>
  // CHECK: func.return %[[R]]
  func.return %r : !tile.tile<128x64xbf16, sbuf>
}

// CHECK-LABEL: func.func @binary_psum_sbuf
// CHECK-SAME: (%[[A:[^:]+]]: !tile.tile<37x512xf32, psum>{{.*}}, %[[B:[^:]+]]: !tile.tile<37x512xf32, sbuf>
func.func @binary_psum_sbuf(%a: !tile.tile<37x512xf32, psum>, %b: !tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf> {
  // CHECK: %[[S:.*]] = tile.binary %[[A]], %[[B]] {op = "add"} : (!tile.tile<37x512xf32, psum>, !tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  %s = tile.binary %a, %b {op = "add"} : (!tile.tile<37x512xf32, psum>, !tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  // CHECK: func.return %[[S]]
  func.return %s : !tile.tile<37x512xf32, sbuf>
}

// CHECK-LABEL: func.func @binary_scalar_immediate
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<37x512xf32, sbuf>
func.func @binary_scalar_immediate(%x: !tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf> {
  // CHECK: %[[Y:.*]] = tile.binary_scalar %[[X]] {op = "multiply", scalar = 5.000000e-01 : f64} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  %y = tile.binary_scalar %x {op = "multiply", scalar = 0.5 : f64} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  // CHECK: func.return %[[Y]]
  func.return %y : !tile.tile<37x512xf32, sbuf>
}

// CHECK-LABEL: func.func @binary_scalar_int64_immediate
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<8x1xi64, sbuf>
func.func @binary_scalar_int64_immediate(%x: !tile.tile<8x1xi64, sbuf>) -> !tile.tile<8x1xi64, sbuf> {
  // CHECK: %[[Y:.*]] = tile.binary_scalar %[[X]] {op = "add", scalar = 4611686018427387905 : i64} : (!tile.tile<8x1xi64, sbuf>) -> !tile.tile<8x1xi64, sbuf>
  %y = tile.binary_scalar %x {op = "add", scalar = 4611686018427387905 : i64} : (!tile.tile<8x1xi64, sbuf>) -> !tile.tile<8x1xi64, sbuf>
  // CHECK: func.return %[[Y]]
  func.return %y : !tile.tile<8x1xi64, sbuf>
}

// CHECK-LABEL: func.func @binary_scalar_column
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<128x37xf32, sbuf>{{.*}}, %[[C:[^:]+]]: !tile.tile<128x1xf32, sbuf>
func.func @binary_scalar_column(%x: !tile.tile<128x37xf32, sbuf>, %c: !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x37xf32, sbuf> {
  // CHECK: %[[Z:.*]] = tile.binary_scalar %[[X]] column %[[C]] {op = "add"} : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x37xf32, sbuf>
  %z = tile.binary_scalar %x column %c {op = "add"} : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x37xf32, sbuf>
  // CHECK: func.return %[[Z]]
  func.return %z : !tile.tile<128x37xf32, sbuf>
}

// CHECK-LABEL: func.func @binary_scalar_reverse
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<37x512xf32, sbuf>
func.func @binary_scalar_reverse(%x: !tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf> {
  // `1.0 - x`: the scalar is the left operand.
  // CHECK: %[[Y:.*]] = tile.binary_scalar %[[X]] {op = "subtract", scalar = 1.000000e+00 : f64, reverse = true} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  %y = tile.binary_scalar %x {op = "subtract", scalar = 1.0 : f64, reverse = true} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  // CHECK: func.return %[[Y]]
  func.return %y : !tile.tile<37x512xf32, sbuf>
}

// CHECK-LABEL: func.func @select_i1_predicate
// CHECK-SAME: (%[[P:[^:]+]]: !tile.tile<37x130xi1, sbuf>{{.*}}, %[[A:[^:]+]]: !tile.tile<37x130xf32, sbuf>{{.*}}, %[[B:[^:]+]]: !tile.tile<37x130xf32, psum>
func.func @select_i1_predicate(%p: !tile.tile<37x130xi1, sbuf>, %a: !tile.tile<37x130xf32, sbuf>, %b: !tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xf32, sbuf> {
  // CHECK: %[[R:.*]] = tile.select %[[P]], %[[A]], %[[B]] : (!tile.tile<37x130xi1, sbuf>, !tile.tile<37x130xf32, sbuf>, !tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xf32, sbuf>
  %r = tile.select %p, %a, %b : (!tile.tile<37x130xi1, sbuf>, !tile.tile<37x130xf32, sbuf>, !tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xf32, sbuf>
  // CHECK: func.return %[[R]]
  func.return %r : !tile.tile<37x130xf32, sbuf>
}

// CHECK-LABEL: func.func @copy_psum_to_sbuf_bf16
// CHECK-SAME: (%[[P:[^:]+]]: !tile.tile<37x512xf32, psum>
func.func @copy_psum_to_sbuf_bf16(%p: !tile.tile<37x512xf32, psum>) -> !tile.tile<37x512xbf16, sbuf> {
  // PSUM evacuation and an f32 -> bf16 conversion in one copy.
  // CHECK: %[[S:.*]] = tile.copy %[[P]] : (!tile.tile<37x512xf32, psum>) -> !tile.tile<37x512xbf16, sbuf>
  %s = tile.copy %p : (!tile.tile<37x512xf32, psum>) -> !tile.tile<37x512xbf16, sbuf>
  // CHECK: func.return %[[S]]
  func.return %s : !tile.tile<37x512xbf16, sbuf>
}

// ---- tile.fill / tile.reduce ----------------------------------------------------------------------------------

// CHECK-LABEL: func.func @fill_column
func.func @fill_column() -> !tile.tile<128x1xf32, sbuf> {
  // CHECK: %[[ONES:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<128x1xf32, sbuf>
  %ones = tile.fill {value = 1.0 : f64} : !tile.tile<128x1xf32, sbuf>
  // CHECK: func.return %[[ONES]]
  func.return %ones : !tile.tile<128x1xf32, sbuf>
}

// An integer tile's fill is an i64: exact to int64's extremes, which an f64 rounds to 2^63.
// CHECK-LABEL: func.func @fill_int64_largest
func.func @fill_int64_largest() -> !tile.tile<128x1xi64, sbuf> {
  // CHECK: %[[TOP:.*]] = tile.fill {value = 9223372036854775807 : i64} : !tile.tile<128x1xi64, sbuf>
  %top = tile.fill {value = 9223372036854775807 : i64} : !tile.tile<128x1xi64, sbuf>
  // CHECK: func.return %[[TOP]]
  func.return %top : !tile.tile<128x1xi64, sbuf>
}

// CHECK-LABEL: func.func @reduce_default_axes
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<128x37xf32, sbuf>
func.func @reduce_default_axes(%x: !tile.tile<128x37xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf> {
  // CHECK: %[[S:.*]] = tile.reduce %[[X]] {op = "add"} : (!tile.tile<128x37xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
  %s = tile.reduce %x {op = "add"} : (!tile.tile<128x37xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
  // CHECK: func.return %[[S]]
  func.return %s : !tile.tile<128x1xf32, sbuf>
}

// CHECK-LABEL: func.func @reduce_axes
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<64x4x8x16xf32, psum>
func.func @reduce_axes(%x: !tile.tile<64x4x8x16xf32, psum>) -> (!tile.tile<64x4xf32, sbuf>, !tile.tile<64x1xf32, sbuf>) {
  // Two of three free axes (the kept one stays), then all three (a [P, 1] column).
  // CHECK: %[[TWO:.*]] = tile.reduce %[[X]] {op = "max", axes = 2 : i64} : (!tile.tile<64x4x8x16xf32, psum>) -> !tile.tile<64x4xf32, sbuf>
  %two = tile.reduce %x {op = "max", axes = 2 : i64} : (!tile.tile<64x4x8x16xf32, psum>) -> !tile.tile<64x4xf32, sbuf>
  // CHECK: %[[ALL:.*]] = tile.reduce %[[X]] {op = "abs_max", axes = 3 : i64} : (!tile.tile<64x4x8x16xf32, psum>) -> !tile.tile<64x1xf32, sbuf>
  %all = tile.reduce %x {op = "abs_max", axes = 3 : i64} : (!tile.tile<64x4x8x16xf32, psum>) -> !tile.tile<64x1xf32, sbuf>
  // CHECK: func.return %[[TWO]], %[[ALL]]
  func.return %two, %all : !tile.tile<64x4xf32, sbuf>, !tile.tile<64x1xf32, sbuf>
}

// CHECK-LABEL: func.func @integer_reduce_and_scan
// CHECK-SAME: (%[[X:[^:]+]]: !tile.tile<128x600xi64, sbuf>
func.func @integer_reduce_and_scan(%x: !tile.tile<128x600xi64, sbuf>) -> (!tile.tile<128x1xi64, sbuf>, !tile.tile<128x600xi64, sbuf>) {
  // Integer tiles of one element type: an exact fold and an exact running sum.
  // CHECK: %[[S:.*]] = tile.reduce %[[X]] {op = "add"} : (!tile.tile<128x600xi64, sbuf>) -> !tile.tile<128x1xi64, sbuf>
  %s = tile.reduce %x {op = "add"} : (!tile.tile<128x600xi64, sbuf>) -> !tile.tile<128x1xi64, sbuf>
  // CHECK: %[[C:.*]] = tile.scan %[[X]] {op = "add"} : (!tile.tile<128x600xi64, sbuf>) -> !tile.tile<128x600xi64, sbuf>
  %c = tile.scan %x {op = "add"} : (!tile.tile<128x600xi64, sbuf>) -> !tile.tile<128x600xi64, sbuf>
  // CHECK: func.return %[[S]], %[[C]]
  func.return %s, %c : !tile.tile<128x1xi64, sbuf>, !tile.tile<128x600xi64, sbuf>
}

// ---- loop-carried tiles (PSUM accumulation over K) -------------------------------------------------------------

// CHECK-LABEL: func.func @matmul_acc_loop_carried
// CHECK-SAME: (%[[X:[^:]+]]: memref<37x512xf32, #mem<hbm>>{{.*}}, %[[W:[^:]+]]: memref<512x64xf32, #mem<hbm>>{{.*}}, %[[Y:[^:]+]]: memref<37x64xf32, #mem<hbm>>
func.func @matmul_acc_loop_carried(%x: memref<37x512xf32, #mem<hbm>>, %w: memref<512x64xf32, #mem<hbm>>, %y: memref<37x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %c512 = arith.constant 512 : index
  // CHECK: %[[INIT:.*]] = tile.fill {value = 0.000000e+00 : f64} : !tile.tile<37x64xf32, psum>
  %init = tile.fill {value = 0.0 : f64} : !tile.tile<37x64xf32, psum>
  // CHECK: %[[SUM:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (!tile.tile<37x64xf32, psum>) {
  %sum = scf.for %k = %c0 to %c512 step %c128 iter_args(%acc = %init) -> (!tile.tile<37x64xf32, psum>) {
    // CHECK: %[[S:.*]] = tile.load %[[X]][%{{.*}}, %[[K]]] {dims = array<i64: 1, 0>} : memref<37x512xf32, #mem<hbm>> -> !tile.tile<128x37xf32, sbuf>
    %s = tile.load %x[%c0, %k] {dims = array<i64: 1, 0>} : memref<37x512xf32, #mem<hbm>> -> !tile.tile<128x37xf32, sbuf>
    // CHECK: %[[M:.*]] = tile.load %[[W]][%[[K]], %{{.*}}] : memref<512x64xf32, #mem<hbm>> -> !tile.tile<128x64xf32, sbuf>
    %m = tile.load %w[%k, %c0] : memref<512x64xf32, #mem<hbm>> -> !tile.tile<128x64xf32, sbuf>
    // CHECK: %[[P:.*]] = tile.matmul %[[S]], %[[M]] acc %[[ACC]] : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x64xf32, sbuf>, !tile.tile<37x64xf32, psum>) -> !tile.tile<37x64xf32, psum>
    %p = tile.matmul %s, %m acc %acc : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x64xf32, sbuf>, !tile.tile<37x64xf32, psum>) -> !tile.tile<37x64xf32, psum>
    // CHECK: scf.yield %[[P]] : !tile.tile<37x64xf32, psum>
    scf.yield %p : !tile.tile<37x64xf32, psum>
  }
  // CHECK: %[[OUT:.*]] = tile.copy %[[SUM]] : (!tile.tile<37x64xf32, psum>) -> !tile.tile<37x64xf32, sbuf>
  %out = tile.copy %sum : (!tile.tile<37x64xf32, psum>) -> !tile.tile<37x64xf32, sbuf>
  // CHECK: tile.store %[[OUT]], %[[Y]][%{{.*}}, %{{.*}}] : !tile.tile<37x64xf32, sbuf>, memref<37x64xf32, #mem<hbm>>
  tile.store %out, %y[%c0, %c0] : !tile.tile<37x64xf32, sbuf>, memref<37x64xf32, #mem<hbm>>
  func.return
}

// ---- tile.iota --------------------------------------------------------------------------------------------------

// CHECK-LABEL: func.func @iota_index_map
func.func @iota_index_map() -> !tile.tile<5x3x2xf32, sbuf> {
  // CHECK: %[[I:.*]] = tile.iota {base = -1 : i64, channel_multiplier = 7 : i64, steps = array<i64: 2, 1>} : !tile.tile<5x3x2xf32, sbuf>
  %i = tile.iota {base = -1 : i64, channel_multiplier = 7 : i64, steps = array<i64: 2, 1>} : !tile.tile<5x3x2xf32, sbuf>
  // CHECK: func.return %[[I]]
  func.return %i : !tile.tile<5x3x2xf32, sbuf>
}

// ---- tile.kernel ------------------------------------------------------------------------------------------------

// CHECK-LABEL: func.func @kernel_tile_and_column
func.func @kernel_tile_and_column(%a: !tile.tile<37x64xi32, sbuf>, %k: !tile.tile<37x1xi32, sbuf>) -> (!tile.tile<37x64xi32, sbuf>, !tile.tile<37x64xf32, sbuf>) {
  // CHECK: %[[Q:.*]] = tile.kernel %a, %a {kernel = "divide_floor"} : (!tile.tile<37x64xi32, sbuf>, !tile.tile<37x64xi32, sbuf>) -> !tile.tile<37x64xi32, sbuf>
  %q = tile.kernel %a, %a {kernel = "divide_floor"} : (!tile.tile<37x64xi32, sbuf>, !tile.tile<37x64xi32, sbuf>) -> !tile.tile<37x64xi32, sbuf>
  // CHECK: %[[U:.*]] = tile.kernel %a, %k {kernel = "uniform"} : (!tile.tile<37x64xi32, sbuf>, !tile.tile<37x1xi32, sbuf>) -> !tile.tile<37x64xf32, sbuf>
  %u = tile.kernel %a, %k {kernel = "uniform"} : (!tile.tile<37x64xi32, sbuf>, !tile.tile<37x1xi32, sbuf>) -> !tile.tile<37x64xf32, sbuf>
  func.return %q, %u : !tile.tile<37x64xi32, sbuf>, !tile.tile<37x64xf32, sbuf>
}

// ---- tile.empty / tile.extract / tile.insert --------------------------------------------------------------------

// CHECK-LABEL: func.func @windows
// CHECK-SAME: (%[[ROWS:[^:]+]]: !tile.tile<40x256xbf16, sbuf>{{.*}}, %[[T:[^:]+]]: index
func.func @windows(%rows: !tile.tile<40x256xbf16, sbuf>, %t: index) -> !tile.tile<128x2x40xbf16, sbuf> {
  %c0 = arith.constant 0 : index
  // CHECK: %[[E:.*]] = tile.empty : !tile.tile<128x2x40xbf16, sbuf>
  %e = tile.empty : !tile.tile<128x2x40xbf16, sbuf>
  // CHECK: %[[B:.*]] = tile.extract %[[ROWS]][%[[T]]] : !tile.tile<40x256xbf16, sbuf> -> !tile.tile<40x128xbf16, sbuf>
  %b = tile.extract %rows[%t] : !tile.tile<40x256xbf16, sbuf> -> !tile.tile<40x128xbf16, sbuf>
  %bt = tile.transpose %b : !tile.tile<40x128xbf16, sbuf> -> !tile.tile<128x40xbf16, psum>
  // CHECK: %[[I:.*]] = tile.insert %{{.*}}, %[[E]][%[[T]], %{{.*}}] : !tile.tile<128x40xbf16, psum>, !tile.tile<128x2x40xbf16, sbuf>
  %i = tile.insert %bt, %e[%t, %c0] : !tile.tile<128x40xbf16, psum>, !tile.tile<128x2x40xbf16, sbuf>
  // CHECK: func.return %[[I]]
  func.return %i : !tile.tile<128x2x40xbf16, sbuf>
}

// A strided window: every second column of a band, from column 1 (a stride-2 convolution's tap)
// CHECK-LABEL: func.func @strided_window
func.func @strided_window(%band: !tile.tile<64x9x33xbf16, sbuf>) -> !tile.tile<64x4x16xbf16, sbuf> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  // CHECK: tile.extract %{{.*}}[%{{.*}}, %{{.*}}] {steps = array<i64: 2, 2>} : !tile.tile<64x9x33xbf16, sbuf> -> !tile.tile<64x4x16xbf16, sbuf>
  %tap = tile.extract %band[%c1, %c2] {steps = array<i64: 2, 2>} : !tile.tile<64x9x33xbf16, sbuf> -> !tile.tile<64x4x16xbf16, sbuf>
  func.return %tap : !tile.tile<64x4x16xbf16, sbuf>
}

// A strided insert spreads a tile over every second element (zero insertion); a band window transposes as the
// matrix of its flattened free axes
// CHECK-LABEL: func.func @strided_insert_and_transpose
func.func @strided_insert_and_transpose(%go: !tile.tile<7x4x5xf32, sbuf>, %zeros: !tile.tile<7x7x9xf32, sbuf>) -> (!tile.tile<7x7x9xf32, sbuf>, !tile.tile<20x7xf32, psum>) {
  %c0 = arith.constant 0 : index
  // CHECK: tile.insert %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {steps = array<i64: 2, 2>} : !tile.tile<7x4x5xf32, sbuf>, !tile.tile<7x7x9xf32, sbuf>
  %spread = tile.insert %go, %zeros[%c0, %c0] {steps = array<i64: 2, 2>} : !tile.tile<7x4x5xf32, sbuf>, !tile.tile<7x7x9xf32, sbuf>
  // a flat [7, 20] product written as the 4 x 5 window of rows it holds, every second row and column
  // CHECK: tile.insert %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {steps = array<i64: 2, 2>, window = array<i64: 4, 5>} : !tile.tile<7x20xf32, psum>, !tile.tile<7x7x9xf32, sbuf>
  %flat = tile.empty : !tile.tile<7x20xf32, psum>
  %rows = tile.insert %flat, %zeros[%c0, %c0] {steps = array<i64: 2, 2>, window = array<i64: 4, 5>} : !tile.tile<7x20xf32, psum>, !tile.tile<7x7x9xf32, sbuf>
  // CHECK: tile.transpose %{{.*}} : !tile.tile<7x4x5xf32, sbuf> -> !tile.tile<20x7xf32, psum>
  %t = tile.transpose %go : !tile.tile<7x4x5xf32, sbuf> -> !tile.tile<20x7xf32, psum>
  func.return %spread, %t : !tile.tile<7x7x9xf32, sbuf>, !tile.tile<20x7xf32, psum>
}

// ---- tile.gather / tile.scatter ---------------------------------------------------------------------------------

// CHECK-LABEL: func.func @gather_scatter_rows
func.func @gather_scatter_rows(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x1xi32, sbuf>) -> !tile.tile<128x64xf32, sbuf> {
  %c0 = arith.constant 0 : index
  // CHECK: %[[R:.*]] = tile.gather %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}} {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf>
  %rows = tile.gather %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf>
  // CHECK: tile.scatter %[[R]], %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}} {dim = 0 : i64, dims = array<i64: 1>, accumulate} : !tile.tile<128x64xf32, sbuf>, memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf>
  tile.scatter %rows, %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>, accumulate} : !tile.tile<128x64xf32, sbuf>, memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf>
  func.return %rows : !tile.tile<128x64xf32, sbuf>
}

// CHECK-LABEL: func.func @gather_elements
func.func @gather_elements(%x: memref<4096xf32, #mem<hbm>>, %i: !tile.tile<64x7xi32, sbuf>) -> !tile.tile<64x7xf32, sbuf> {
  %c0 = arith.constant 0 : index
  // CHECK: tile.gather %{{.*}}[%{{.*}}], %{{.*}} {dim = 0 : i64} : memref<4096xf32, #mem<hbm>>, !tile.tile<64x7xi32, sbuf> -> !tile.tile<64x7xf32, sbuf>
  %e = tile.gather %x[%c0], %i {dim = 0 : i64} : memref<4096xf32, #mem<hbm>>, !tile.tile<64x7xi32, sbuf> -> !tile.tile<64x7xf32, sbuf>
  func.return %e : !tile.tile<64x7xf32, sbuf>
}

// ---- tile.nki_kernel ------------------------------------------------------------------------------------------

// CHECK-LABEL: func.func @nki_kernel
func.func @nki_kernel(%x: memref<8x32xf32, #mem<hbm>>, %w: memref<32xf32, #mem<hbm>>, %y: memref<8x32xf32, #mem<hbm>>) {
  // CHECK: tile.nki_kernel(%{{.*}}, %{{.*}}) into(%{{.*}}) {kernel = "mylib::rms_norm", scalars = {eps = 1.000000e-06 : f64}, fingerprint = "0123"} : memref<8x32xf32, #mem<hbm>>, memref<32xf32, #mem<hbm>> into memref<8x32xf32, #mem<hbm>>
  tile.nki_kernel (%x, %w) into (%y) {kernel = "mylib::rms_norm", scalars = {eps = 1.0e-06 : f64}, fingerprint = "0123"} : memref<8x32xf32, #mem<hbm>>, memref<32xf32, #mem<hbm>> into memref<8x32xf32, #mem<hbm>>
  func.return
}
