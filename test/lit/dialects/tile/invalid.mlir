// RUN: neuron-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per diagnostic of the tile dialect's verifiers (ir/dialects/tile.py: TileType.verify and the ops'
// verify_). Ops whose custom syntax would make the parser reject the input are written in generic form.

// ---- !tile.tile -----------------------------------------------------------------------------------------------

func.func @tile_type_rank_1(%t: !tile.tile<128xf32, sbuf>) {
  func.return
}
// CHECK: a tile has a partition axis and at least one free axis, got shape (128,)

// -----

func.func @tile_type_zero_extent(%t: !tile.tile<128x0xf32, sbuf>) {
  func.return
}
// CHECK: tile shape (128, 0) has a non-positive dimension

// -----

// ---- tile.view ------------------------------------------------------------------------------------------------

func.func @view_element_type(%w: memref<520x300xf32, #mem<hbm>>) {
  %0 = tile.view %w : memref<520x300xf32, #mem<hbm>> to memref<300x520xbf16, strided<[1, 300]>, #mem<hbm>>
  func.return
}
// CHECK: tile.view: a view keeps the element type (f32 vs bf16)

// -----

func.func @view_on_chip(%w: memref<128x64xf32, #mem<sbuf>>) {
  %0 = tile.view %w : memref<128x64xf32, #mem<sbuf>> to memref<64x128xf32, strided<[1, 64]>, #mem<hbm>>
  func.return
}
// CHECK: tile.view: views are of HBM memrefs

// -----

func.func @view_dynamic_stride(%w: memref<520x300xf32, #mem<hbm>>) {
  %0 = tile.view %w : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[?, 300]>, #mem<hbm>>
  func.return
}
// CHECK: tile.view: a view's strides and offset are static, got strided<[?, 300]>

// -----

func.func @view_dynamic_offset(%w: memref<520x300xf32, #mem<hbm>>) {
  %0 = tile.view %w : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[1, 300], offset: ?>, #mem<hbm>>
  func.return
}
// CHECK: tile.view: a view's strides and offset are static, got strided<[1, 300], offset: ?>

// -----

// ---- tile.load / tile.store -----------------------------------------------------------------------------------

func.func @load_index_count(%x: memref<4x37x300xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<4x37x300xf32, #mem<hbm>> -> !tile.tile<37x300xf32, sbuf> loc("model.l1"("model.py":12:0))
  func.return
}
// CHECK: tile.load: expected 3 indices for a rank-3 tensor, got 2 (at model.py:12 (model.l1))

// -----

func.func @load_dims_count(%x: memref<4x37x300xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0, %c0] {dims = array<i64: 2>} : memref<4x37x300xf32, #mem<hbm>> -> !tile.tile<37x300xf32, sbuf>
  func.return
}
// CHECK: tile.load: dims [2] must name one tensor dimension per tile dimension

// -----

func.func @load_dims_repeated(%x: memref<300x300xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] {dims = array<i64: 1, 1>} : memref<300x300xf32, #mem<hbm>> -> !tile.tile<128x128xf32, sbuf>
  func.return
}
// CHECK: tile.load: dims [1, 1] must be distinct dimensions of the rank-2 tensor

// -----

func.func @store_dims_out_of_range(%t: !tile.tile<37x300xf32, sbuf>, %y: memref<37x300xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  tile.store %t, %y[%c0, %c0] {dims = array<i64: 0, 2>} : !tile.tile<37x300xf32, sbuf>, memref<37x300xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.store: dims [0, 2] must be distinct dimensions of the rank-2 tensor

// -----

func.func @load_tile_larger_than_tensor(%x: memref<37x300xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<37x300xf32, #mem<hbm>> -> !tile.tile<64x300xf32, sbuf>
  func.return
}
// CHECK: tile.load: tile dimension 0 (64) is larger than tensor dimension 0 (37)

// -----

func.func @load_too_many_partitions(%x: memref<256x4xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<256x4xf32, #mem<hbm>> -> !tile.tile<129x4xf32, sbuf>
  func.return
}
// CHECK: tile.load: the tile has 129 partitions, more than the 128 the hardware has

// -----

func.func @load_from_sbuf(%x: memref<128x64xf32, #mem<sbuf>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<128x64xf32, #mem<sbuf>> -> !tile.tile<128x64xf32, sbuf>
  func.return
}
// CHECK: tile.load: tiles move between HBM tensors and on-chip memory

// -----

func.func @load_into_psum(%x: memref<128x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<128x64xf32, #mem<hbm>> -> !tile.tile<128x64xf32, psum>
  func.return
}
// CHECK: tile.load: tiles are loaded into SBUF

// -----

func.func @store_from_psum(%t: !tile.tile<37x512xf32, psum>, %y: memref<37x512xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  tile.store %t, %y[%c0, %c0] : !tile.tile<37x512xf32, psum>, memref<37x512xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.store: tiles are stored from SBUF (copy PSUM tiles to SBUF first)

// -----

// ---- tile.load_transpose --------------------------------------------------------------------------------------

func.func @load_transpose_repeated_dim(%x: memref<4x16x16xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load_transpose %x[%c0, %c0, %c0] {row_dims = array<i64: 1>, row_sizes = array<i64: 16>, column_dims = array<i64: 1, 2>, column_sizes = array<i64: 4, 16>} : memref<4x16x16xbf16, #mem<hbm>> -> !tile.tile<64x16xbf16, sbuf>
  func.return
}
// CHECK: tile.load_transpose: row and column dims [1, 1, 2] must be distinct dimensions of the rank-3 tensor

// -----

func.func @load_transpose_result_shape(%x: memref<4x16x16xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load_transpose %x[%c0, %c0, %c0] {row_dims = array<i64: 0>, row_sizes = array<i64: 4>, column_dims = array<i64: 1, 2>, column_sizes = array<i64: 4, 16>} : memref<4x16x16xbf16, #mem<hbm>> -> !tile.tile<64x8xbf16, sbuf>
  func.return
}
// CHECK: tile.load_transpose: result must be [64, 4], got !tile.tile<64x8xbf16, sbuf>

// -----

func.func @load_transpose_four_byte(%x: memref<4x16x16xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load_transpose %x[%c0, %c0, %c0] {row_dims = array<i64: 0>, row_sizes = array<i64: 4>, column_dims = array<i64: 1, 2>, column_sizes = array<i64: 4, 16>} : memref<4x16x16xf32, #mem<hbm>> -> !tile.tile<64x4xf32, sbuf>
  func.return
}
// CHECK: tile.load_transpose: DMAs transpose 2-byte elements, not f32

// -----

func.func @load_transpose_converting(%x: memref<4x16x16xbf16, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load_transpose %x[%c0, %c0, %c0] {row_dims = array<i64: 0>, row_sizes = array<i64: 4>, column_dims = array<i64: 1, 2>, column_sizes = array<i64: 4, 16>} : memref<4x16x16xbf16, #mem<hbm>> -> !tile.tile<64x4xf16, sbuf>
  func.return
}
// CHECK: tile.load_transpose: a DMA transpose does not convert: bf16 into !tile.tile<64x4xf16, sbuf>

// -----

builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @load_transpose_on_trn1(%x: memref<4x16x16xbf16, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    %t = tile.load_transpose %x[%c0, %c0, %c0] {row_dims = array<i64: 0>, row_sizes = array<i64: 4>, column_dims = array<i64: 1, 2>, column_sizes = array<i64: 4, 16>} : memref<4x16x16xbf16, #mem<hbm>> -> !tile.tile<64x4xbf16, sbuf>
    func.return
  }
}
// CHECK: tile.load_transpose: trn1's DMAs do not transpose

// -----

// ---- tile.matmul ----------------------------------------------------------------------------------------------

func.func @matmul_contraction_mismatch(%s: !tile.tile<128x37xf32, sbuf>, %m: !tile.tile<64x512xf32, sbuf>) {
  %p = tile.matmul %s, %m : (!tile.tile<128x37xf32, sbuf>, !tile.tile<64x512xf32, sbuf>) -> !tile.tile<37x512xf32, psum>
  func.return
}
// CHECK: tile.matmul: stationary and moving contract over different sizes (128 vs 64)

// -----

// `rows` picks the partitions both inputs contract over: inside both, at a start the hardware allows.
func.func @matmul_rows_outside(%s: !tile.tile<128x37xbf16, sbuf>, %m: !tile.tile<64x512xbf16, sbuf>) {
  %p = tile.matmul %s, %m {rows = array<i64: 64, 64>} : (!tile.tile<128x37xbf16, sbuf>, !tile.tile<64x512xbf16, sbuf>) -> !tile.tile<37x512xf32, psum>
  func.return
}
// CHECK: tile.matmul: rows [64, 128) lie outside the inputs' partitions (128 and 64)

// -----

func.func @matmul_rows_start(%s: !tile.tile<128x37xbf16, sbuf>, %m: !tile.tile<128x512xbf16, sbuf>) {
  %p = tile.matmul %s, %m {rows = array<i64: 32, 64>} : (!tile.tile<128x37xbf16, sbuf>, !tile.tile<128x512xbf16, sbuf>) -> !tile.tile<37x512xf32, psum>
  func.return
}
// CHECK: tile.matmul: rows of 64 partitions cannot start at partition 32 (allowed: 0, 64)

// -----

func.func @matmul_moving_too_wide(%s: !tile.tile<128x37xf32, sbuf>, %m: !tile.tile<128x1024xf32, sbuf>) {
  %p = tile.matmul %s, %m : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x1024xf32, sbuf>) -> !tile.tile<37x1024xf32, psum>
  func.return
}
// CHECK: tile.matmul: matmul of K=128, M=37, N=1024 exceeds trn2's limits (K <= 128, M <= 128, N <= 512)

// -----

// The limits are the module's target's (trn3 keeps N <= 512 until multi-bank accumulation is lowered).
builtin.module attributes {neuron.target = #neuron.target<trn3>} {
  func.func @matmul_stationary_too_wide(%s: !tile.tile<128x256xf32, sbuf>, %m: !tile.tile<128x512xf32, sbuf>) {
    %p = tile.matmul %s, %m : (!tile.tile<128x256xf32, sbuf>, !tile.tile<128x512xf32, sbuf>) -> !tile.tile<256x512xf32, psum>
    func.return
  }
}
// CHECK: tile.matmul: matmul of K=128, M=256, N=512 exceeds trn3's limits (K <= 128, M <= 128, N <= 512)

// -----

func.func @matmul_result_in_sbuf(%s: !tile.tile<128x37xf32, sbuf>, %m: !tile.tile<128x512xf32, sbuf>) {
  %p = tile.matmul %s, %m : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.matmul: result must be !tile.tile<37x512xf32, psum>, got !tile.tile<37x512xf32, sbuf>

// -----

func.func @matmul_acc_type(%s: !tile.tile<128x37xf32, sbuf>, %m: !tile.tile<128x512xf32, sbuf>, %acc: !tile.tile<37x256xf32, psum>) {
  %p = tile.matmul %s, %m acc %acc : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x512xf32, sbuf>, !tile.tile<37x256xf32, psum>) -> !tile.tile<37x512xf32, psum>
  func.return
}
// CHECK: tile.matmul: accumulator type !tile.tile<37x256xf32, psum> differs from the result type !tile.tile<37x512xf32, psum>

// -----

// ---- tile.transpose -------------------------------------------------------------------------------------------

func.func @transpose_rank_3(%x: !tile.tile<4x8x16xf32, sbuf>) {
  %t = tile.transpose %x : !tile.tile<4x8x16xf32, sbuf> -> !tile.tile<8x16x4xf32, psum>
  func.return
}
// CHECK: tile.transpose: result must be [128, 4] in psum, got !tile.tile<8x16x4xf32, psum>

// -----

func.func @transpose_result_shape(%x: !tile.tile<37x128xf32, sbuf>) {
  %t = tile.transpose %x : !tile.tile<37x128xf32, sbuf> -> !tile.tile<37x128xf32, psum>
  func.return
}
// CHECK: tile.transpose: result must be [128, 37] in psum, got !tile.tile<37x128xf32, psum>

// -----

func.func @transpose_too_large(%x: !tile.tile<37x256xf32, sbuf>) {
  %t = tile.transpose %x : !tile.tile<37x256xf32, sbuf> -> !tile.tile<256x37xf32, psum>
  func.return
}
// CHECK: tile.transpose: a [37, 256] tile is too large to transpose in one pass

// -----

// ---- tile.extract / tile.insert ------------------------------------------------------------------------------

func.func @extract_index_count(%x: !tile.tile<128x2x40xbf16, sbuf>, %i: index) {
  %w = tile.extract %x[%i] : !tile.tile<128x2x40xbf16, sbuf> -> !tile.tile<128x40xbf16, sbuf>
  func.return
}
// CHECK: tile.extract: expected 2 indices, one per free dimension of !tile.tile<128x2x40xbf16, sbuf>, got 1

// -----

func.func @extract_too_wide(%x: !tile.tile<128x2x40xbf16, sbuf>, %i: index) {
  %w = tile.extract %x[%i, %i] : !tile.tile<128x2x40xbf16, sbuf> -> !tile.tile<128x80xbf16, sbuf>
  func.return
}
// CHECK: tile.extract: the window !tile.tile<128x80xbf16, sbuf> does not fit in the trailing free dimensions of !tile.tile<128x2x40xbf16, sbuf>

// -----

func.func @extract_steps_too_wide(%x: !tile.tile<64x9x33xbf16, sbuf>, %i: index) {
  %w = tile.extract %x[%i, %i] {steps = array<i64: 2, 3>} : !tile.tile<64x9x33xbf16, sbuf> -> !tile.tile<64x4x12xbf16, sbuf>
  func.return
}
// CHECK: tile.extract: the window !tile.tile<64x4x12xbf16, sbuf> (steps [2, 3]) does not fit in the trailing free dimensions of !tile.tile<64x9x33xbf16, sbuf>

// -----

func.func @extract_steps_count(%x: !tile.tile<64x9x33xbf16, sbuf>, %i: index) {
  %w = tile.extract %x[%i, %i] {steps = array<i64: 2>} : !tile.tile<64x9x33xbf16, sbuf> -> !tile.tile<64x4x12xbf16, sbuf>
  func.return
}
// CHECK: tile.extract: steps [2] must give one positive step per free dimension of !tile.tile<64x4x12xbf16, sbuf>

// -----

func.func @insert_steps_too_wide(%v: !tile.tile<7x4x5xf32, sbuf>, %d: !tile.tile<7x7x9xf32, sbuf>, %i: index) {
  %w = tile.insert %v, %d[%i, %i] {steps = array<i64: 2, 3>} : !tile.tile<7x4x5xf32, sbuf>, !tile.tile<7x7x9xf32, sbuf>
  func.return
}
// CHECK: tile.insert: the value !tile.tile<7x4x5xf32, sbuf> (steps [2, 3]) does not fit in the trailing free dimensions of !tile.tile<7x7x9xf32, sbuf>

// -----

func.func @extract_rank(%x: !tile.tile<64x40xbf16, sbuf>, %i: index) {
  %w = tile.extract %x[%i] : !tile.tile<64x40xbf16, sbuf> -> !tile.tile<64x2x20xbf16, sbuf>
  func.return
}
// CHECK: tile.extract: the window !tile.tile<64x2x20xbf16, sbuf> has more free dimensions than !tile.tile<64x40xbf16, sbuf>

// -----

func.func @extract_partitions(%x: !tile.tile<64x40xbf16, sbuf>, %i: index) {
  %w = tile.extract %x[%i] : !tile.tile<64x40xbf16, sbuf> -> !tile.tile<128x20xbf16, sbuf>
  func.return
}
// CHECK: tile.extract: the window !tile.tile<128x20xbf16, sbuf> has more partitions than !tile.tile<64x40xbf16, sbuf>

// -----

func.func @extract_type(%x: !tile.tile<64x40xbf16, sbuf>, %i: index) {
  %w = tile.extract %x[%i] : !tile.tile<64x40xbf16, sbuf> -> !tile.tile<64x20xf32, sbuf>
  func.return
}
// CHECK: tile.extract: a window keeps the element type and memory of !tile.tile<64x40xbf16, sbuf>, got !tile.tile<64x20xf32, sbuf>

// -----

func.func @insert_into_psum(%v: !tile.tile<64x20xf32, sbuf>, %x: !tile.tile<64x40xf32, psum>, %i: index) {
  %w = tile.insert %v, %x[%i] : !tile.tile<64x20xf32, sbuf>, !tile.tile<64x40xf32, psum>
  func.return
}
// CHECK: tile.insert: tiles are inserted into SBUF tiles, got !tile.tile<64x40xf32, psum>

// -----

func.func @insert_too_wide(%v: !tile.tile<64x50xf32, psum>, %x: !tile.tile<64x40xf32, sbuf>, %i: index) {
  %w = tile.insert %v, %x[%i] : !tile.tile<64x50xf32, psum>, !tile.tile<64x40xf32, sbuf>
  func.return
}
// CHECK: tile.insert: the value !tile.tile<64x50xf32, psum> does not fit in the trailing free dimensions of !tile.tile<64x40xf32, sbuf>

// -----

func.func @insert_window_count(%v: !tile.tile<7x20xf32, psum>, %d: !tile.tile<7x7x9xf32, sbuf>, %i: index) {
  %w = tile.insert %v, %d[%i, %i] {window = array<i64: 4, 4>} : !tile.tile<7x20xf32, psum>, !tile.tile<7x7x9xf32, sbuf>
  func.return
}
// CHECK: tile.insert: a window of [4, 4] does not hold the 20 elements of !tile.tile<7x20xf32, psum>

// -----

func.func @insert_window_too_wide(%v: !tile.tile<7x20xf32, psum>, %d: !tile.tile<7x7x9xf32, sbuf>, %i: index) {
  %w = tile.insert %v, %d[%i, %i] {window = array<i64: 2, 10>} : !tile.tile<7x20xf32, psum>, !tile.tile<7x7x9xf32, sbuf>
  func.return
}
// CHECK: tile.insert: the value !tile.tile<7x2x10xf32, psum> does not fit in the trailing free dimensions of !tile.tile<7x7x9xf32, sbuf>

// -----

// ---- elementwise ----------------------------------------------------------------------------------------------

func.func @elementwise_too_many_partitions(%x: !tile.tile<129x4xf32, sbuf>) {
  %r = tile.copy %x : (!tile.tile<129x4xf32, sbuf>) -> !tile.tile<129x4xf32, sbuf>
  func.return
}
// CHECK: tile.copy: the result has 129 partitions, more than the 128 the hardware has

// -----

func.func @elementwise_shape_mismatch(%a: !tile.tile<37x512xf32, sbuf>, %b: !tile.tile<37x256xf32, sbuf>) {
  %s = tile.binary %a, %b {op = "add"} : (!tile.tile<37x512xf32, sbuf>, !tile.tile<37x256xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf> loc("model.l1"("model.py":12:0))
  func.return
}
// CHECK: tile.binary: operand 'rhs' has shape (37, 256), result has (37, 512) (at model.py:12 (model.l1))

// -----

func.func @unary_unknown_function(%x: !tile.tile<37x512xf32, sbuf>) {
  %r = tile.unary %x {fn = "softmax"} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.unary: unknown activation function 'softmax'

// -----

func.func @unary_bias_not_column(%x: !tile.tile<37x512xf32, sbuf>, %b: !tile.tile<37x2xf32, sbuf>) {
  %r = tile.unary %x bias %b {fn = "relu"} : (!tile.tile<37x512xf32, sbuf>, !tile.tile<37x2xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.unary: bias must be a [37, 1] per-partition column, got (37, 2)

// -----

func.func @binary_unknown_operator(%a: !tile.tile<37x512xf32, sbuf>, %b: !tile.tile<37x512xf32, sbuf>) {
  %s = tile.binary %a, %b {op = "divide"} : (!tile.tile<37x512xf32, sbuf>, !tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.binary: unknown ALU operator 'divide'

// -----

func.func @binary_two_psum_operands(%a: !tile.tile<37x512xf32, psum>, %b: !tile.tile<37x512xf32, psum>) {
  %s = tile.binary %a, %b {op = "add"} : (!tile.tile<37x512xf32, psum>, !tile.tile<37x512xf32, psum>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.binary: at most one operand may be in PSUM

// -----

func.func @binary_scalar_unknown_operator(%x: !tile.tile<37x512xf32, sbuf>) {
  %y = tile.binary_scalar %x {op = "divide", scalar = 2.0 : f64} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.binary_scalar: unknown ALU operator 'divide'

// -----

func.func @binary_scalar_neither_scalar_nor_column(%x: !tile.tile<37x512xf32, sbuf>) {
  %y = tile.binary_scalar %x {op = "add"} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.binary_scalar: give exactly one of an immediate `scalar` or a `column` operand

// -----

func.func @binary_scalar_column_not_column(%x: !tile.tile<128x37xf32, sbuf>, %c: !tile.tile<64x1xf32, sbuf>) {
  %z = tile.binary_scalar %x column %c {op = "add"} : (!tile.tile<128x37xf32, sbuf>, !tile.tile<64x1xf32, sbuf>) -> !tile.tile<128x37xf32, sbuf>
  func.return
}
// CHECK: tile.binary_scalar: column must be a [128, 1] per-partition column, got (64, 1)

// -----

func.func @binary_scalar_integer_immediate_of_floats(%x: !tile.tile<37x512xf32, sbuf>) {
  %y = tile.binary_scalar %x {op = "add", scalar = 2 : i64} : (!tile.tile<37x512xf32, sbuf>) -> !tile.tile<37x512xf32, sbuf>
  func.return
}
// CHECK: tile.binary_scalar: an integer `scalar` needs integer elements, but the input holds f32

// -----

// ---- tile.fill / tile.reduce ----------------------------------------------------------------------------------

func.func @fill_integer_value_of_floats() {
  %ones = tile.fill {value = 1 : i64} : !tile.tile<128x1xf32, sbuf>
  func.return
}
// CHECK: tile.fill: an integer `value` needs integer elements, but the tile holds f32

// -----

func.func @fill_integer_value_not_i64() {
  %ones = tile.fill {value = 1 : i32} : !tile.tile<128x1xi32, sbuf>
  func.return
}
// CHECK: tile.fill: Expected attribute i64 but got i32

// -----

func.func @fill_too_many_partitions() {
  %ones = tile.fill {value = 1.0 : f64} : !tile.tile<256x1xf32, sbuf>
  func.return
}
// CHECK: tile.fill: the tile has 256 partitions, more than the 128 the hardware has

// -----

func.func @reduce_unknown_operator(%x: !tile.tile<128x37xf32, sbuf>) {
  %s = tile.reduce %x {op = "mean"} : (!tile.tile<128x37xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
  func.return
}
// CHECK: tile.reduce: unknown reduction 'mean'

// -----

func.func @reduce_too_many_axes(%x: !tile.tile<128x37xf32, sbuf>) {
  %s = tile.reduce %x {op = "add", axes = 2 : i64} : (!tile.tile<128x37xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
  func.return
}
// CHECK: tile.reduce: cannot reduce 2 free axes of a tile of shape (128, 37)

// -----

func.func @reduce_result_shape(%x: !tile.tile<64x4x8xf32, sbuf>) {
  %s = tile.reduce %x {op = "max"} : (!tile.tile<64x4x8xf32, sbuf>) -> !tile.tile<64x1xf32, sbuf>
  func.return
}
// CHECK: tile.reduce: result shape (64, 1) should be (64, 4)

// -----

func.func @integer_reduce_widens(%x: !tile.tile<64x8xi32, sbuf>) {
  %s = tile.reduce %x {op = "add"} : (!tile.tile<64x8xi32, sbuf>) -> !tile.tile<64x1xi64, sbuf>
  func.return
}
// CHECK: tile.reduce: an integer tile.reduce keeps its element type (i32 -> i64); widen the input with tile.copy first

// -----

func.func @integer_reduce_in_psum(%x: !tile.tile<64x8xi32, psum>) {
  %s = tile.reduce %x {op = "add"} : (!tile.tile<64x8xi32, psum>) -> !tile.tile<64x1xi32, sbuf>
  func.return
}
// CHECK: tile.reduce: an integer tile.reduce works in SBUF (GpSimdE cannot reach PSUM)

// -----

// ---- tile.scan ----------------------------------------------------------------------------------------------

func.func @scan_unknown_operator(%x: !tile.tile<64x8xi32, sbuf>) {
  %s = tile.scan %x {op = "subtract"} : (!tile.tile<64x8xi32, sbuf>) -> !tile.tile<64x8xi32, sbuf>
  func.return
}
// CHECK: tile.scan: unknown scan 'subtract' (expected one of ['add', 'max', 'min', 'multiply'])

// -----

func.func @scan_result_shape(%x: !tile.tile<64x8xi32, sbuf>) {
  %s = tile.scan %x {op = "add"} : (!tile.tile<64x8xi32, sbuf>) -> !tile.tile<64x4xi32, sbuf>
  func.return
}
// CHECK: tile.scan: result shape (64, 4) should be (64, 8)

// -----

func.func @scan_of_floats(%x: !tile.tile<64x8xf32, sbuf>) {
  %s = tile.scan %x {op = "add"} : (!tile.tile<64x8xf32, sbuf>) -> !tile.tile<64x8xf32, sbuf>
  func.return
}
// CHECK: tile.scan: tile.scan scans integer tiles (floats scan on TensorE)

// -----

func.func @scan_widens(%x: !tile.tile<64x8xi32, sbuf>) {
  %s = tile.scan %x {op = "add"} : (!tile.tile<64x8xi32, sbuf>) -> !tile.tile<64x8xi64, sbuf>
  func.return
}
// CHECK: tile.scan: an integer tile.scan keeps its element type (i32 -> i64); widen the input with tile.copy first

// -----

// ---- tile.iota --------------------------------------------------------------------------------------------------

func.func @iota_steps_per_free_axis() {
  %i = tile.iota {steps = array<i64: 1>} : !tile.tile<5x3x2xf32, sbuf>
  func.return
}
// CHECK: tile.iota: steps [1] must give one step per free axis of (5, 3, 2)

// -----

func.func @iota_in_psum() {
  %i = tile.iota {steps = array<i64: 1>} : !tile.tile<5x3xf32, psum>
  func.return
}
// CHECK: tile.iota: iota writes SBUF (GpSimdE)

// -----

func.func @iota_too_many_partitions() {
  %i = tile.iota {steps = array<i64: 1>} : !tile.tile<256x3xf32, sbuf>
  func.return
}
// CHECK: tile.iota: the tile has 256 partitions, more than the 128 the hardware has

// -----

// ---- tile.kernel ------------------------------------------------------------------------------------------------

func.func @kernel_unknown(%a: !tile.tile<4x8xf32, sbuf>) {
  %q = tile.kernel %a, %a {kernel = "tan"} : (!tile.tile<4x8xf32, sbuf>, !tile.tile<4x8xf32, sbuf>) -> !tile.tile<4x8xf32, sbuf>
  func.return
}
// CHECK: tile.kernel: unknown GpSimd kernel 'tan'

// -----

func.func @kernel_arity(%a: !tile.tile<4x8xf32, sbuf>) {
  %q = tile.kernel %a {kernel = "fmod"} : (!tile.tile<4x8xf32, sbuf>) -> !tile.tile<4x8xf32, sbuf>
  func.return
}
// CHECK: tile.kernel: kernel 'fmod' takes 2 input(s)

// -----

func.func @kernel_other_shape(%a: !tile.tile<4x8xf32, sbuf>, %b: !tile.tile<4x2xf32, sbuf>) {
  %q = tile.kernel %a, %b {kernel = "fmod"} : (!tile.tile<4x8xf32, sbuf>, !tile.tile<4x2xf32, sbuf>) -> !tile.tile<4x8xf32, sbuf>
  func.return
}
// CHECK: tile.kernel: other must be a [4, 1] per-partition column, got (4, 2)

// -----

func.func @kernel_reads_psum(%a: !tile.tile<4x8xf32, psum>) {
  %q = tile.kernel %a, %a {kernel = "fmod"} : (!tile.tile<4x8xf32, psum>, !tile.tile<4x8xf32, psum>) -> !tile.tile<4x8xf32, sbuf>
  func.return
}
// CHECK: tile.kernel: GpSimd kernels read SBUF tiles

// -----

// ---- tile.gather / tile.scatter ---------------------------------------------------------------------------------

func.func @gather_float_offsets(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x1xf32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xf32, sbuf> -> !tile.tile<128x64xf32, sbuf>
  func.return
}
// CHECK: tile.gather: offsets must be a [P, R] i32 SBUF tile, got !tile.tile<128x1xf32, sbuf>

// -----

func.func @gather_index_count(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x1xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf>
  func.return
}
// CHECK: tile.gather: expected 2 indices for a rank-2 tensor, got 1

// -----

func.func @gather_bad_dim(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x1xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0, %c0], %i {dim = 2 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf>
  func.return
}
// CHECK: tile.gather: dim 2 is not a dimension of the rank-2 tensor

// -----

func.func @gather_partitions(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<64x1xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<64x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf>
  func.return
}
// CHECK: tile.gather: the rows tile must be in SBUF with the 64 partitions of offsets

// -----

func.func @gather_row_dims(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x1xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 0>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf>
  func.return
}
// CHECK: tile.gather: dims [0] must be distinct dimensions other than dim 0

// -----

func.func @gather_row_shape(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x1xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x8x8xf32, sbuf>
  func.return
}
// CHECK: tile.gather: rows of shape (8, 8) do not walk dims [1] (one extent each)

// -----

func.func @gather_row_too_long(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x1xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x65xf32, sbuf>
  func.return
}
// CHECK: tile.gather: a row of 65 along dimension 1 exceeds its size 64

// -----

func.func @gather_elements_with_dims(%w: memref<1000x64xf32, #mem<hbm>>, %i: !tile.tile<128x2xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  %rows = tile.gather %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x2xi32, sbuf> -> !tile.tile<128x2xf32, sbuf>
  func.return
}
// CHECK: tile.gather: with 2 offsets per partition each row is one element: rows must be (128, 2) with no dims

// -----

func.func @scatter_into_sbuf(%w: memref<1000x64xf32, #mem<sbuf>>, %v: !tile.tile<128x64xf32, sbuf>, %i: !tile.tile<128x1xi32, sbuf>) {
  %c0 = arith.constant 0 : index
  tile.scatter %v, %w[%c0, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : !tile.tile<128x64xf32, sbuf>, memref<1000x64xf32, #mem<sbuf>>, !tile.tile<128x1xi32, sbuf>
  func.return
}
// CHECK: tile.scatter: the indexed tensor is in HBM

// -----

func.func @collective_kind(%x: memref<8xf32, #mem<hbm>>, %y: memref<8xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "gather", replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: unknown collective 'gather' (known: all_gather, all_reduce, all_to_all, broadcast, reduce_scatter)

// -----

func.func @collective_broadcast_without_root(%x: memref<8xf32, #mem<hbm>>, %y: memref<8xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "broadcast", replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: a broadcast names its root

// -----

func.func @collective_root_of_a_reduction(%x: memref<8xf32, #mem<hbm>>, %y: memref<8xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "all_reduce", root = 0 : i64, replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: all_reduce takes no root

// -----

func.func @collective_root_outside_the_group(%x: memref<8xf32, #mem<hbm>>, %y: memref<8xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "broadcast", root = 2 : i64, replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: broadcast: attribute 'root': root 2 is no position in a replica group of 2 ranks

// -----

func.func @collective_broadcast_counts(%x: memref<8xf32, #mem<hbm>>, %y: memref<16xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "broadcast", root = 1 : i64, replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<16xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: broadcast: dst has 16 elements but src has 8

// -----

func.func @collective_splits_of_a_reduction(%x: memref<8xf32, #mem<hbm>>, %y: memref<8xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "all_reduce", input_splits = array<i64: 4, 4>, output_splits = array<i64: 4, 4>, replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: all_reduce takes no split counts

// -----

func.func @collective_uneven_splits(%x: memref<8xf32, #mem<hbm>>, %y: memref<6xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "all_to_all", input_splits = array<i64: 2, 6>, output_splits = array<i64: 2, 2>, replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<6xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: all_to_all: attribute 'output_splits': the counts add up to 4 but dst has 6 elements

// -----

func.func @collective_reduction_of_a_gather(%x: memref<8xf32, #mem<hbm>>, %y: memref<16xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "all_gather", reduce = "sum", replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<16xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: all_gather takes no reduction

// -----

func.func @collective_counts(%x: memref<8xf32, #mem<hbm>>, %y: memref<8xf32, #mem<hbm>>) {
  tile.collective %x into %y {kind = "all_gather", replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.collective: all_gather: dst has 8 elements but 2 ranks of 8 gather 16

// -----

// A kernel's HBM arguments are row-major tensors: convert-torch-to-tile copies a strided view first.
func.func @nki_kernel_strided_input(%x: memref<32x8xf32, strided<[1, 32]>, #mem<hbm>>, %y: memref<32x8xf32, #mem<hbm>>) {
  tile.nki_kernel (%x) into (%y) {kernel = "mylib::k", scalars = {}, fingerprint = ""} : memref<32x8xf32, strided<[1, 32]>, #mem<hbm>> into memref<32x8xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.nki_kernel: an input of a kernel call is a row-major tensor, got memref<32x8xf32, strided<[1, 32]>, #mem<hbm>>
