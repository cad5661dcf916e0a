// RUN: neuron-opt %s --split-input-file -p convert-tile-to-neuron --verify-diagnostics | filecheck %s

// Inputs convert-tile-to-neuron refuses (lowering/convert_tile_to_neuron.py).

// Only tiles may be loop-carried: they get a buffer; an index has nowhere to live.
func.func @loop_carried_index(%x: memref<4x128xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = scf.for %i = %c0 to %c4 step %c1 iter_args(%count = %c0) -> (index) {
    %next = arith.addi %count, %c1 : index
    scf.yield %next : index
  } loc("model.l2"("model.py":14:0))
  func.return
}
// CHECK: scf.for: loop-carried value of type index is not a tile (at model.py:14 (model.l2))

// -----

// PSUM accumulation updates the accumulator's buffer in place, so the accumulator may not be read afterwards.
func.func @accumulator_used_twice(%x: memref<128x37xf32, #mem<hbm>>, %w: memref<128x64xf32, #mem<hbm>>, %y: memref<37x64xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %s = tile.load %x[%c0, %c0] : memref<128x37xf32, #mem<hbm>> -> !tile.tile<128x37xf32, sbuf>
  %m = tile.load %w[%c0, %c0] : memref<128x64xf32, #mem<hbm>> -> !tile.tile<128x64xf32, sbuf>
  %p0 = tile.matmul %s, %m : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x64xf32, sbuf>) -> !tile.tile<37x64xf32, psum>
  %p1 = tile.matmul %s, %m acc %p0 : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x64xf32, sbuf>, !tile.tile<37x64xf32, psum>) -> !tile.tile<37x64xf32, psum> loc("model.l3"("model.py":16:0))
  %first = tile.copy %p0 : (!tile.tile<37x64xf32, psum>) -> !tile.tile<37x64xf32, sbuf>
  tile.store %first, %y[%c0, %c0] : !tile.tile<37x64xf32, sbuf>, memref<37x64xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.matmul: the accumulator of a matmul must have no other use (it is updated in place) (at model.py:16 (model.l3))

// -----

// Tiles are born inside the function (loads, fills, compute): a tile argument has no buffer.
func.func @tile_argument(%t: !tile.tile<128x4xf32, sbuf>, %y: memref<128x4xf32, #mem<hbm>>) {
  %c0 = arith.constant 0 : index
  %s = tile.copy %t : (!tile.tile<128x4xf32, sbuf>) -> !tile.tile<128x4xf32, sbuf> loc("model.py":3:0)
  tile.store %s, %y[%c0, %c0] : !tile.tile<128x4xf32, sbuf>, memref<128x4xf32, #mem<hbm>>
  func.return
}
// CHECK: tile.copy: tile operand %t is not produced by a tile op in this function (at model.py:3)

// -----

// An indirect DMA's indexed dimension needs a static start: the rows its offsets may reach must be known.
func.func @gather_dynamic_start(%w: memref<1000x64xf32, #mem<hbm>>, %ids: memref<128x1xi32, #mem<hbm>>, %s: index) {
  %c0 = arith.constant 0 : index
  %i = tile.load %ids[%c0, %c0] : memref<128x1xi32, #mem<hbm>> -> !tile.tile<128x1xi32, sbuf>
  %rows = tile.gather %w[%s, %c0], %i {dim = 0 : i64, dims = array<i64: 1>} : memref<1000x64xf32, #mem<hbm>>, !tile.tile<128x1xi32, sbuf> -> !tile.tile<128x64xf32, sbuf> loc("model.embed"("model.py":7:0))
  func.return
}
// CHECK: tile.gather: the index of the indexed dimension 0 must be a constant (at model.py:7 (model.embed))

// -----

// A kernel call is replaced by the kernel's traced instructions: the kernel must be registered in the process
// (by `neuron_mlir.as_torch_op`), which a module read from a file cannot provide.
func.func @unregistered_kernel(%x: memref<8x32xf32, #mem<hbm>>, %y: memref<8x32xf32, #mem<hbm>>) {
  tile.nki_kernel (%x) into (%y) {kernel = "mylib::absent", scalars = {}, fingerprint = ""} : memref<8x32xf32, #mem<hbm>> into memref<8x32xf32, #mem<hbm>> loc("model.py":7:0)
  func.return
}
// CHECK: tile.nki_kernel: the kernel of torch op mylib::absent is not registered in this process (neuron_mlir.as_torch_op) (at model.py:7)
