// RUN: neuron-opt %S/Inputs/mlp_forward.tile.mlir -p convert-tile-to-neuron | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_backward.tile.mlir -p convert-tile-to-neuron | filecheck %s --check-prefix=BACKWARD
// RUN: neuron-opt %S/Inputs/mlp_forward.tile.mlir -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/mlp_backward.tile.mlir -p convert-tile-to-neuron --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %s --split-input-file -p convert-tile-to-neuron | filecheck %s --check-prefix=CASES

// A loop-carried tile updated by an elementwise op is updated in place; one that is not gets copied back
// into the carried buffer before the next iteration.
// CASES-LABEL: func.func @carried_in_place
func.func @carried_in_place(%x: memref<4x1024xf32, #mem<hbm>>, %y: memref<4x1xf32, #mem<hbm>>) -> memref<4x1xf32, #mem<hbm>> {
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  %first = tile.load %x[%c0, %c0] : memref<4x1024xf32, #mem<hbm>> -> !tile.tile<4x256xf32, sbuf>
  %init = tile.reduce %first {op = "max"} : (!tile.tile<4x256xf32, sbuf>) -> !tile.tile<4x1xf32, sbuf>
  %r = scf.for %i = %c256 to %c1024 step %c256 iter_args(%acc = %init) -> (!tile.tile<4x1xf32, sbuf>) {
    %chunk = tile.load %x[%c0, %i] : memref<4x1024xf32, #mem<hbm>> -> !tile.tile<4x256xf32, sbuf>
    %part = tile.reduce %chunk {op = "max"} : (!tile.tile<4x256xf32, sbuf>) -> !tile.tile<4x1xf32, sbuf>
    %next = tile.binary %acc, %part {op = "max"} : (!tile.tile<4x1xf32, sbuf>, !tile.tile<4x1xf32, sbuf>) -> !tile.tile<4x1xf32, sbuf>
    scf.yield %next : !tile.tile<4x1xf32, sbuf>
  }
  tile.store %r, %y[%c0, %c0] : !tile.tile<4x1xf32, sbuf>, memref<4x1xf32, #mem<hbm>>
  func.return %y : memref<4x1xf32, #mem<hbm>>
}
// CASES:       %[[ACC:.*]] = neuron.alloc : memref<4x1xf32, #mem<sbuf>>
// CASES:       neuron.tensor_reduce vector dst %[[ACC]][0:4, 0, [[1, 1]]]
// The loop keeps its bounds and loses its iter_args: the accumulator lives in its buffer.
// CASES:       scf.for %[[I:.*]] = %c256 to %c1024 step %c256 {
// The dynamic column offset of the load is the loop index times the stride (1).
// CASES:         neuron.dma_copy dma dst %{{.*}}[0:4, 0, [[1, 256]]], src %x[%[[I]] + 0, [[1024, 4], [1, 256]]]
// CASES:         neuron.tensor_tensor vector dst %[[ACC]][0:4, 0, [[1, 1]]], in0 %[[ACC]][0:4, 0, [[1, 1]]], in1 %{{.*}} {op = "max"}
// CASES-NOT:     neuron.tensor_copy
// CASES:       neuron.dma_copy dma dst %y[0, [[1, 4], [1, 1]]], src %[[ACC]][0:4, 0, [[1, 1]]]

// -----

// CASES-LABEL: func.func @carried_copied_back
func.func @carried_copied_back(%x: memref<4x512xf32, #mem<hbm>>, %y: memref<4x256xf32, #mem<hbm>>) -> memref<4x256xf32, #mem<hbm>> {
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %c512 = arith.constant 512 : index
  %init = tile.load %x[%c0, %c0] : memref<4x512xf32, #mem<hbm>> -> !tile.tile<4x256xf32, sbuf>
  %r = scf.for %i = %c256 to %c512 step %c256 iter_args(%acc = %init) -> (!tile.tile<4x256xf32, sbuf>) {
    %next = tile.binary_scalar %acc {op = "multiply", scalar = 2.0 : f64} : (!tile.tile<4x256xf32, sbuf>) -> !tile.tile<4x256xf32, sbuf>
    scf.yield %next : !tile.tile<4x256xf32, sbuf>
  }
  tile.store %r, %y[%c0, %c0] : !tile.tile<4x256xf32, sbuf>, memref<4x256xf32, #mem<hbm>>
  func.return %y : memref<4x256xf32, #mem<hbm>>
}
// CASES:       %[[ACC:.*]] = neuron.alloc : memref<4x256xf32, #mem<sbuf>>
// CASES:       scf.for
// CASES:         %[[NEXT:.*]] = neuron.alloc : memref<4x256xf32, #mem<sbuf>>
// CASES:         neuron.tensor_scalar vector dst %[[NEXT]]{{.*}}, src %[[ACC]]
// CASES:         neuron.tensor_copy vector dst %[[ACC]][0:4, 0, [[1, 256]]], src %[[NEXT]][0:4, 0, [[1, 256]]]

// -----

// Exact integer arithmetic (every tile operand and the result integer), power and integer-to-integer copies
// run on GpSimdE; float arithmetic and conversions from float on VectorE.
// CASES-LABEL: func.func @engines_by_dtype
func.func @engines_by_dtype(%a: memref<4x8xi32, #mem<hbm>>, %f: memref<4x8xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %x = tile.load %a[%c0, %c0] : memref<4x8xi32, #mem<hbm>> -> !tile.tile<4x8xi32, sbuf>
  %y = tile.load %f[%c0, %c0] : memref<4x8xf32, #mem<hbm>> -> !tile.tile<4x8xf32, sbuf>
  %i = tile.binary %x, %x {op = "multiply"} : (!tile.tile<4x8xi32, sbuf>, !tile.tile<4x8xi32, sbuf>) -> !tile.tile<4x8xi32, sbuf>
  %m = tile.binary %x, %y {op = "multiply"} : (!tile.tile<4x8xi32, sbuf>, !tile.tile<4x8xf32, sbuf>) -> !tile.tile<4x8xf32, sbuf>
  %p = tile.binary %y, %y {op = "power"} : (!tile.tile<4x8xf32, sbuf>, !tile.tile<4x8xf32, sbuf>) -> !tile.tile<4x8xf32, sbuf>
  %s = tile.binary_scalar %x {op = "add", scalar = 3.0 : f64} : (!tile.tile<4x8xi32, sbuf>) -> !tile.tile<4x8xi32, sbuf>
  %h = tile.binary_scalar %x {op = "add", scalar = 0.5 : f64} : (!tile.tile<4x8xi32, sbuf>) -> !tile.tile<4x8xi32, sbuf>
  %l = tile.copy %x : (!tile.tile<4x8xi32, sbuf>) -> !tile.tile<4x8xi64, sbuf>
  %t = tile.copy %y : (!tile.tile<4x8xf32, sbuf>) -> !tile.tile<4x8xi32, sbuf>
  func.return
}
// CASES:       neuron.tensor_tensor gpsimd {{.*}} {op = "multiply"} : memref<4x8xi32, #mem<sbuf>>
// CASES:       neuron.tensor_tensor vector {{.*}} {op = "multiply"} : memref<4x8xf32, #mem<sbuf>>
// CASES:       neuron.tensor_tensor gpsimd {{.*}} {op = "power"}
// CASES:       neuron.tensor_scalar gpsimd {{.*}} {op0 = "add", scalar0 = 3.000000e+00 : f64}
// A fractional immediate is not integer arithmetic.
// CASES:       neuron.tensor_scalar vector {{.*}} {op0 = "add", scalar0 = 5.000000e-01 : f64}
// CASES:       neuron.tensor_copy gpsimd dst {{.*}} : memref<4x8xi64, #mem<sbuf>>, memref<4x8xi32, #mem<sbuf>>
// CASES:       neuron.tensor_copy vector dst {{.*}} : memref<4x8xi32, #mem<sbuf>>, memref<4x8xf32, #mem<sbuf>>

// -----

// GpSimd kernels take their second input as a tile or a per-partition column; an iota whose offset is a loop
// index gets its base from a register.
// CASES-LABEL: func.func @kernels_and_iota_base
func.func @kernels_and_iota_base(%a: memref<4x1024xf32, #mem<hbm>>, %k: memref<4x1xi32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  %key = tile.load %k[%c0, %c0] : memref<4x1xi32, #mem<hbm>> -> !tile.tile<4x1xi32, sbuf>
  scf.for %i = %c0 to %c1024 step %c256 {
    %x = tile.load %a[%c0, %i] : memref<4x1024xf32, #mem<hbm>> -> !tile.tile<4x256xf32, sbuf>
    %q = tile.kernel %x, %x {kernel = "divide_floor"} : (!tile.tile<4x256xf32, sbuf>, !tile.tile<4x256xf32, sbuf>) -> !tile.tile<4x256xf32, sbuf>
    %n = tile.iota %i {base = 7 : i64, channel_multiplier = 1024 : i64, steps = array<i64: 1>} : !tile.tile<4x256xi32, sbuf>
    %u = tile.kernel %n, %key {kernel = "uniform"} : (!tile.tile<4x256xi32, sbuf>, !tile.tile<4x1xi32, sbuf>) -> !tile.tile<4x256xf32, sbuf>
    scf.yield
  }
  func.return
}
// CASES:       scf.for %[[I:.*]] = %c0 to %c1024 step %c256 {
// CASES:         neuron.gpsimd_kernel gpsimd dst {{.*}}, in0 %[[X:.*]][0:4, 0, [[1, 256]]], in1 %[[X]][0:4, 0, [[1, 256]]] {kernel = "divide_floor"}
// CASES:         %[[BASE:.*]] = arith.addi %[[I]], %c7 : index
// CASES:         neuron.iota gpsimd dst %[[N:.*]][0:4, 0, [[1, 256]]], base %[[BASE]] {pattern = array<i64: 1, 256>, channel_multiplier = 1024 : i64}
// CASES:         neuron.gpsimd_kernel gpsimd dst {{.*}}, in0 %[[N]][0:4, 0, [[1, 256]]], in1 %{{.*}}[0:4, 0, [[1, 1]]] {kernel = "uniform"}

// The MLP forward graph at the tile level.
// CHECK-LABEL: func.func @main
// TensorE transposes multiply by an identity that GpSimdE builds once, at the top of the function.
// CHECK:       %[[ONES:.*]] = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
// CHECK:       %[[EYE:.*]] = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
// CHECK:       neuron.memset gpsimd dst %[[ONES]][0:128, 0, [[1, 128]]] {value = 1.000000e+00 : f64}
// CHECK:       neuron.affine_select gpsimd dst %[[EYE]][0:128, 0, [[1, 128]]], on_true %[[ONES]][0:128, 0, [[1, 128]]] {cmp = "is_equal", channel_multiplier = 1 : i64, pattern = array<i64: -1, 128>, on_false_value = 0.000000e+00 : f64}
// The stationary panel of the first layer: one DMA of x's rows (contiguous), then a loop of transposes (nc_matmul
// in transpose mode) whose results are copied into the panel's slots at a dynamic offset.
// CHECK:       %[[ROWS:.*]] = neuron.alloc : memref<37x256xf32, #mem<sbuf>>
// CHECK:       neuron.dma_copy dma dst %[[ROWS]][0:37, 0, [[1, 256]]], src %primals3[0, [[300, 37], [1, 256]]] {queue = 0 : i64}
// CHECK:       %[[PANEL:.*]] = neuron.alloc : memref<128x2x37xf32, #mem<sbuf>>
// CHECK:       scf.for %[[T:.*]] = %c0 to %c2 step %c1 {
// CHECK:         %[[COLUMN:.*]] = arith.muli %[[T]], %c128 : index
// CHECK:         %[[XT:.*]] = neuron.alloc : memref<128x37xf32, #mem<psum>>
// CHECK:         neuron.nc_matmul tensor dst %[[XT]][0:128, 0, [[1, 37]]], stationary %[[EYE]][0:37, 0, [[1, 37]]], moving %[[ROWS]][0:37, %[[COLUMN]] + 0, [[1, 128]]] {is_transpose = true}
// CHECK:         %[[SLOT:.*]] = arith.muli %[[T]], %c37 : index
// CHECK:         neuron.tensor_copy vector dst %[[PANEL]][0:128, %[[SLOT]] + 0, [[1, 37]]], src %[[XT]][0:128, 0, [[1, 37]]]
// CHECK:       }
// The weight's rows (K contiguous) are loaded 128 at a time and transposed into a chunk of 512 columns; copies
// into that chunk run on ScalarE, those into the panel on VectorE.
// CHECK:       %[[CHUNK:.*]] = neuron.alloc : memref<128x1x512xf32, #mem<sbuf>>
// CHECK:       neuron.dma_copy dma dst %{{.*}}[0:128, 0, [[1, 128]]], src %primals1[0, [[300, 128], [1, 128]]]
// CHECK:       neuron.tensor_copy scalar dst %[[CHUNK]][0:128, %{{.*}} + 0, [[1, 128]]], src %{{.*}}[0:128, 0, [[1, 128]]]
// CHECK:       neuron.tensor_copy scalar dst %[[CHUNK]][0:128, %{{.*}} + 384, [[1, 128]]], src %{{.*}}[0:128, 0, [[1, 128]]]
// The matmuls read windows of the panel and of the chunks: the first starts the PSUM accumulation, later K
// tiles accumulate in place (the second at a dynamic offset of the panel, the remainder of 44 last).
// CHECK:       %[[ACC:.*]] = neuron.alloc : memref<37x512xf32, #mem<psum>>
// CHECK:       neuron.nc_matmul tensor dst %[[ACC]][0:37, 0, [[1, 512]]], stationary %[[PANEL]][0:128, 0, [[1, 37]]], moving %[[CHUNK]][0:128, 0, [[1, 512]]] :
// CHECK:       neuron.nc_matmul tensor dst %[[ACC]][0:37, 0, [[1, 512]]], stationary %[[PANEL]][0:128, %{{.*}} + 0, [[1, 37]]], moving {{.*}} {accumulate = true}
// CHECK:       neuron.nc_matmul tensor dst %[[ACC]][0:37, 0, [[1, 512]]], stationary %{{.*}}[0:44, 0, [[1, 37]]], moving %{{.*}}[0:44, 0, [[1, 512]]] {accumulate = true}
// The broadcast bias is a DMA with a stride-0 partition step; the add reads PSUM directly (evacuation).
// CHECK:       neuron.dma_copy dma dst %{{.*}}[0:37, 0, [[1, 512]]], src %primals2[0, [[0, 37], [1, 512]]]
// CHECK:       neuron.tensor_tensor vector dst %{{.*}}, in0 %[[ACC]][0:37, 0, [[1, 512]]], in1 %{{.*}} {op = "add"}
// Activations run on ScalarE.
// CHECK:       neuron.activation scalar dst %{{.*}}[0:104, 0, [[1, 185]]], src %{{.*}}[0:104, 0, [[1, 185]]] {func = "relu"}
// A transposed weight returned for the backward pass leaves as a view of the argument.
// CHECK:       %[[VIEW:.*]] = neuron.view %primals4 : memref<130x520xf32, #mem<hbm>> to memref<520x130xf32, strided<[1, 520]>, #mem<hbm>>
// CHECK:       func.return {{.*}}%[[VIEW]]
// CHECK-NOT:   tile.

// BACKWARD-LABEL: func.func @main
// PSUM results that leave the matmul unchanged are evacuated to SBUF on VectorE.
// BACKWARD:       neuron.tensor_copy vector dst %{{.*}}, src %{{.*}} : memref<{{.*}}, #mem<sbuf>>, memref<{{.*}}, #mem<psum>>
// BACKWARD:       neuron.tensor_reduce vector dst %{{.*}}[0:10, 0, [[1, 1]]], src %{{.*}}[0:10, 0, [[1, 37]]] {op = "add"}
// BACKWARD:       neuron.select vector
// BACKWARD-NOT:   tile.

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Windows of tiles (tile.extract) are read in place through access patterns, at a dynamic offset inside a loop;
// inserts into a loop-carried tile write its buffer in place; a window an ordinary op reads is copied out first.
// CASES-LABEL: func.func @windows
func.func @windows(%a: memref<40x256xbf16, #mem<hbm>>, %b: memref<256x300xbf16, #mem<hbm>>, %y: memref<40x300xf32, #mem<hbm>>, %z: memref<40x128xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %rows = tile.load %a[%c0, %c0] : memref<40x256xbf16, #mem<hbm>> -> !tile.tile<40x256xbf16, sbuf>
  %e = tile.empty : !tile.tile<128x2x40xbf16, sbuf>
  %panel = scf.for %t = %c0 to %c2 step %c1 iter_args(%p = %e) -> (!tile.tile<128x2x40xbf16, sbuf>) {
    %k = arith.muli %t, %c128 : index
    %blk = tile.extract %rows[%k] : !tile.tile<40x256xbf16, sbuf> -> !tile.tile<40x128xbf16, sbuf>
    %bt = tile.transpose %blk : !tile.tile<40x128xbf16, sbuf> -> !tile.tile<128x40xbf16, psum>
    %next = tile.insert %bt, %p[%t, %c0] : !tile.tile<128x40xbf16, psum>, !tile.tile<128x2x40xbf16, sbuf>
    scf.yield %next : !tile.tile<128x2x40xbf16, sbuf>
  }
  %b0 = tile.load %b[%c0, %c0] : memref<256x300xbf16, #mem<hbm>> -> !tile.tile<128x300xbf16, sbuf>
  %b1 = tile.load %b[%c128, %c0] : memref<256x300xbf16, #mem<hbm>> -> !tile.tile<128x300xbf16, sbuf>
  %s0 = tile.extract %panel[%c0, %c0] : !tile.tile<128x2x40xbf16, sbuf> -> !tile.tile<128x40xbf16, sbuf>
  %p0 = tile.matmul %s0, %b0 : (!tile.tile<128x40xbf16, sbuf>, !tile.tile<128x300xbf16, sbuf>) -> !tile.tile<40x300xf32, psum>
  %s1 = tile.extract %panel[%c1, %c0] : !tile.tile<128x2x40xbf16, sbuf> -> !tile.tile<128x40xbf16, sbuf>
  %p1 = tile.matmul %s1, %b1 acc %p0 : (!tile.tile<128x40xbf16, sbuf>, !tile.tile<128x300xbf16, sbuf>, !tile.tile<40x300xf32, psum>) -> !tile.tile<40x300xf32, psum>
  %out = tile.copy %p1 : (!tile.tile<40x300xf32, psum>) -> !tile.tile<40x300xf32, sbuf>
  tile.store %out, %y[%c0, %c0] : !tile.tile<40x300xf32, sbuf>, memref<40x300xf32, #mem<hbm>>
  %first = tile.extract %rows[%c0] : !tile.tile<40x256xbf16, sbuf> -> !tile.tile<40x128xbf16, sbuf>
  tile.store %first, %z[%c0, %c0] : !tile.tile<40x128xbf16, sbuf>, memref<40x128xbf16, #mem<hbm>>
  func.return
}
// CASES:       %[[ROWS:.*]] = neuron.alloc : memref<40x256xbf16, #mem<sbuf>>
// CASES:       %[[PANEL:.*]] = neuron.alloc : memref<128x2x40xbf16, #mem<sbuf>>
// CASES:       scf.for %[[T:.*]] = %c0 to %c2 step %c1 {
// CASES:         %[[K:.*]] = arith.muli %[[T]], %c128 : index
// CASES:         %[[BT:.*]] = neuron.alloc : memref<128x40xbf16, #mem<psum>>
// CASES:         neuron.nc_matmul tensor dst %[[BT]][0:128, 0, [[1, 40]]], stationary %{{.*}}[0:40, 0, [[1, 40]]], moving %[[ROWS]][0:40, %[[K]] + 0, [[1, 128]]] {is_transpose = true}
// CASES:         %[[SLOT:.*]] = arith.muli %[[T]], %c40 : index
// CASES:         neuron.tensor_copy vector dst %[[PANEL]][0:128, %[[SLOT]] + 0, [[1, 40]]], src %[[BT]][0:128, 0, [[1, 40]]]
// CASES-NOT:     neuron.tensor_copy
// CASES:       }
// CASES:       neuron.nc_matmul tensor dst %[[ACC:.*]][0:40, 0, [[1, 300]]], stationary %[[PANEL]][0:128, 0, [[1, 40]]], moving
// CASES:       neuron.nc_matmul tensor dst %[[ACC]][0:40, 0, [[1, 300]]], stationary %[[PANEL]][0:128, 40, [[1, 40]]], moving {{.*}} {accumulate = true}
// CASES:       %[[FIRST:.*]] = neuron.alloc : memref<40x128xbf16, #mem<sbuf>>
// CASES:       neuron.tensor_copy vector dst %[[FIRST]][0:40, 0, [[1, 128]]], src %[[ROWS]][0:40, 0, [[1, 128]]]
// CASES:       neuron.dma_copy dma dst %z[0, [[128, 40], [1, 128]]], src %[[FIRST]]

// -----

// Float elementwise ops and reductions read windows in place too (a row of a row group, at a dynamic offset), and
// a window of a window is a window of the same buffer.
// CASES-LABEL: func.func @row_windows
func.func @row_windows(%x: memref<128x2x64xbf16, #mem<hbm>>, %y: memref<128x64xf32, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %group = tile.load %x[%c0, %c0, %c0] : memref<128x2x64xbf16, #mem<hbm>> -> !tile.tile<128x2x64xbf16, sbuf>
  %r0 = tile.extract %group[%c0, %c0] : !tile.tile<128x2x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
  %r1 = tile.extract %group[%c1, %c0] : !tile.tile<128x2x64xbf16, sbuf> -> !tile.tile<128x64xbf16, sbuf>
  %sum = tile.reduce %r1 {op = "add"} : (!tile.tile<128x64xbf16, sbuf>) -> !tile.tile<128x1xf32, sbuf>
  %half = tile.extract %r1[%c32] : !tile.tile<128x64xbf16, sbuf> -> !tile.tile<128x32xbf16, sbuf>
  %e = tile.unary %half {fn = "exp"} : (!tile.tile<128x32xbf16, sbuf>) -> !tile.tile<128x32xf32, sbuf>
  %p = tile.binary %r0, %r1 {op = "multiply"} : (!tile.tile<128x64xbf16, sbuf>, !tile.tile<128x64xbf16, sbuf>) -> !tile.tile<128x64xf32, sbuf>
  %q = tile.binary_scalar %p column %sum {op = "subtract"} : (!tile.tile<128x64xf32, sbuf>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x64xf32, sbuf>
  tile.store %q, %y[%c0, %c0] : !tile.tile<128x64xf32, sbuf>, memref<128x64xf32, #mem<hbm>>
  %t = tile.reduce %e {op = "add"} : (!tile.tile<128x32xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
  tile.store %t, %s[%c0, %c0] : !tile.tile<128x1xf32, sbuf>, memref<128x1xf32, #mem<hbm>>
  func.return
}
// CASES:       %[[G:.*]] = neuron.alloc : memref<128x2x64xbf16, #mem<sbuf>>
// CASES-NOT:   neuron.tensor_copy
// CASES:       neuron.tensor_reduce vector dst %{{.*}}, src %[[G]][0:128, 64, [[1, 64]]] {op = "add"}
// CASES:       neuron.activation scalar dst %{{.*}}, src %[[G]][0:128, 96, [[1, 32]]] {func = "exp"}
// CASES:       neuron.tensor_tensor vector dst %{{.*}}, in0 %[[G]][0:128, 0, [[1, 64]]], in1 %[[G]][0:128, 64, [[1, 64]]] {op = "multiply"}
// CASES-NOT:   neuron.tensor_copy
// CASES:       func.return

// -----
// A float select reads its predicate and both choices through windows as well (a pooling backward's shifted
// taps): strided windows of its operands' buffers, no copies.
// CASES-LABEL: func.func @select_windows
func.func @select_windows(%m: memref<128x6x8xbf16, #mem<hbm>>, %g: memref<128x6x8xbf16, #mem<hbm>>, %y: memref<128x5x4xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %mask = tile.load %m[%c0, %c0, %c0] : memref<128x6x8xbf16, #mem<hbm>> -> !tile.tile<128x6x8xbf16, sbuf>
  %grad = tile.load %g[%c0, %c0, %c0] : memref<128x6x8xbf16, #mem<hbm>> -> !tile.tile<128x6x8xbf16, sbuf>
  %zeros = tile.fill {value = 0.0 : f64} : !tile.tile<128x6x8xbf16, sbuf>
  %hit = tile.extract %mask[%c1, %c1] {steps = array<i64: 1, 2>} : !tile.tile<128x6x8xbf16, sbuf> -> !tile.tile<128x5x4xbf16, sbuf>
  %share = tile.extract %grad[%c0, %c0] {steps = array<i64: 1, 2>} : !tile.tile<128x6x8xbf16, sbuf> -> !tile.tile<128x5x4xbf16, sbuf>
  %none = tile.extract %zeros[%c0, %c0] : !tile.tile<128x6x8xbf16, sbuf> -> !tile.tile<128x5x4xbf16, sbuf>
  %picked = tile.select %hit, %share, %none : (!tile.tile<128x5x4xbf16, sbuf>, !tile.tile<128x5x4xbf16, sbuf>, !tile.tile<128x5x4xbf16, sbuf>) -> !tile.tile<128x5x4xbf16, sbuf>
  tile.store %picked, %y[%c0, %c0, %c0] : !tile.tile<128x5x4xbf16, sbuf>, memref<128x5x4xbf16, #mem<hbm>>
  func.return
}
// CASES:       %[[MASK:.*]] = neuron.alloc : memref<128x6x8xbf16, #mem<sbuf>>
// CASES:       %[[GRAD:.*]] = neuron.alloc : memref<128x6x8xbf16, #mem<sbuf>>
// CASES:       %[[ZEROS:.*]] = neuron.alloc : memref<128x6x8xbf16, #mem<sbuf>>
// CASES-NOT:   neuron.tensor_copy
// CASES:       neuron.select vector dst %{{.*}}, predicate %[[MASK]][0:128, 9, [[8, 5], [2, 4]]], on_true %[[GRAD]][0:128, 0, [[8, 5], [2, 4]]], on_false %[[ZEROS]][0:128, 0, [[8, 5], [1, 4]]]
// CASES-NOT:   neuron.tensor_copy
// CASES:       func.return

// -----

// A strided window (tile.extract with steps) is an access pattern whose steps are the band's times the window's:
// the moving operand of a stride-2 convolution's tap, read in place from the input band.
// CASES-LABEL: func.func @strided_window
func.func @strided_window(%x: memref<64x9x33xbf16, #mem<hbm>>, %w: memref<64x32xbf16, #mem<hbm>>, %y: memref<32x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %band = tile.load %x[%c0, %c0, %c0] : memref<64x9x33xbf16, #mem<hbm>> -> !tile.tile<64x9x33xbf16, sbuf>
  %s = tile.load %w[%c0, %c0] : memref<64x32xbf16, #mem<hbm>> -> !tile.tile<64x32xbf16, sbuf>
  %tap = tile.extract %band[%c1, %c2] {steps = array<i64: 2, 2>} : !tile.tile<64x9x33xbf16, sbuf> -> !tile.tile<64x4x16xbf16, sbuf>
  %p = tile.matmul %s, %tap : (!tile.tile<64x32xbf16, sbuf>, !tile.tile<64x4x16xbf16, sbuf>) -> !tile.tile<32x64xf32, psum>
  %out = tile.copy %p : (!tile.tile<32x64xf32, psum>) -> !tile.tile<32x64xf32, sbuf>
  tile.store %out, %y[%c0, %c0] : !tile.tile<32x64xf32, sbuf>, memref<32x64xf32, #mem<hbm>>
  func.return
}
// CASES:       %[[BAND:.*]] = neuron.alloc : memref<64x9x33xbf16, #mem<sbuf>>
// CASES:       neuron.nc_matmul tensor dst %{{.*}}[0:32, 0, [[1, 64]]], stationary %{{.*}}[0:64, 0, [[1, 32]]], moving %[[BAND]][0:64, 35, [[66, 4], [2, 16]]]

// -----

// Before v3 (trn1) a transpose goes through the array's fp32 arithmetic: a bf16 tile transposes into fp32 PSUM,
// and the copy out of PSUM converts back (exactly: the values are bf16 values).
module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @transpose_bf16_on_trn1(%x: memref<40x128xbf16, #mem<hbm>>, %y: memref<128x40xbf16, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    %t = tile.load %x[%c0, %c0] : memref<40x128xbf16, #mem<hbm>> -> !tile.tile<40x128xbf16, sbuf>
    %p = tile.transpose %t : !tile.tile<40x128xbf16, sbuf> -> !tile.tile<128x40xbf16, psum>
    %s = tile.copy %p : (!tile.tile<128x40xbf16, psum>) -> !tile.tile<128x40xbf16, sbuf>
    tile.store %s, %y[%c0, %c0] : !tile.tile<128x40xbf16, sbuf>, memref<128x40xbf16, #mem<hbm>>
    func.return
  }
}
// CASES-LABEL: func.func @transpose_bf16_on_trn1
// CASES:       %[[P:.*]] = neuron.alloc : memref<128x40xf32, #mem<psum>>
// CASES:       neuron.nc_matmul tensor dst %[[P]][0:128, 0, [[1, 40]]], {{.*}} {is_transpose = true}
// CASES:       neuron.tensor_copy vector dst %{{.*}}, src %[[P]][0:128, 0, [[1, 40]]] : memref<128x40xbf16, #mem<sbuf>>, memref<128x40xf32, #mem<psum>>
