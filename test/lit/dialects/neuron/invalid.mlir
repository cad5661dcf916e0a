// RUN: neuron-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per diagnostic of the neuron dialect (ir/dialects/neuron.py): attribute verifiers, buffers, the
// checks every instruction shares (engine, queue, memories, accesses) and each opcode's own rules. The
// instruction rules are runtime/isa.py's check_instruction, which the bundle validator applies too.

// ---- attributes -----------------------------------------------------------------------------------------------

// The custom instruction syntax cannot spell an unknown engine; the generic form can.
func.func @unknown_engine() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  "neuron.memset"(%a) <{engine = #neuron.engine<vectr>, dst_ap = #neuron.ap<0:128, 0, [[1, 1]]>, value = 1.0 : f64, operandSegmentSizes = array<i32: 1, 0>}> : (memref<128x1xf32, #mem<sbuf>>) -> ()
  func.return
}
// CHECK: unknown engine 'vectr'

// -----

builtin.module attributes {neuron.target = #neuron.target<trn9>} {
}
// CHECK: unknown target 'trn9' (known: trn1, trn2, trn3)

// -----

func.func @access_negative_partition_count() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.memset vector dst %a[64:32, 0, [[1, 1]]] {value = 1.0 : f64} : memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: access partitions must be non-negative

// -----

func.func @access_empty_dimension() {
  %a = neuron.alloc : memref<128x4xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[1, 0]]] {value = 1.0 : f64} : memref<128x4xf32, #mem<sbuf>>
  func.return
}
// CHECK: access-pattern dimension has non-positive size 0

// -----

// ---- neuron.alloc ---------------------------------------------------------------------------------------------

func.func @alloc_no_memory_space() {
  %a = neuron.alloc : memref<128x4xf32> loc("model.l1"("model.py":12:0))
  func.return
}
// CHECK: neuron.alloc: buffer type needs a #mem<...> memory space (at model.py:12 (model.l1))

// -----

func.func @alloc_empty_dimension() {
  %a = neuron.alloc : memref<128x0xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.alloc: buffer shape (128, 0) has a non-positive dimension

// -----

func.func @alloc_on_chip_rank_1() {
  %a = neuron.alloc : memref<128xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.alloc: on-chip buffer needs [partitions, free...] dimensions, got (128,)

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @alloc_too_many_partitions() {
    %a = neuron.alloc : memref<129x4xf32, #mem<psum>>
    func.return
  }
}
// CHECK: neuron.alloc: 129 partitions exceed the 128 of trn2

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @alloc_over_sbuf_capacity() {
    // 224 KiB + 4 bytes per partition.
    %a = neuron.alloc : memref<128x57345xf32, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.alloc: 229380 bytes per partition exceed SBUF capacity of 229376 bytes per partition on trn2

// -----

// 200 KiB per partition fits trn2's 224 KiB but not trn1's 192 KiB.
builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @alloc_over_sbuf_capacity_trn1() {
    %a = neuron.alloc : memref<128x51200xf32, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.alloc: 204800 bytes per partition exceed SBUF capacity of 196608 bytes per partition on trn1

// -----

func.func @alloc_over_psum_capacity() {
  %a = neuron.alloc : memref<128x8x1025xbf16, #mem<psum>>
  func.return
}
// CHECK: neuron.alloc: 16400 bytes per partition exceed PSUM capacity of 16384 bytes per partition on trn2

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @alloc_address_out_of_range() {
    %a = neuron.alloc {address = 229120 : i64} : memref<128x128xf32, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.alloc: buffer at address 229120 with 512 bytes per partition does not fit in SBUF (229376 bytes per partition on trn2)

// -----

func.func @alloc_negative_hbm_address() {
  %a = neuron.alloc {address = -64 : i64} : memref<520xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.alloc: negative HBM address -64

// -----

// ---- neuron.view ----------------------------------------------------------------------------------------------

func.func @view_of_sbuf() {
  %a = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  %v = neuron.view %a : memref<128x64xf32, #mem<sbuf>> to memref<64x128xf32, strided<[1, 64]>, #mem<hbm>>
  func.return
}
// CHECK: neuron.view: views are of HBM memrefs

// -----

// A view keeps the element type, as tile.view's does (the same rule): the runtime reads a view as its buffer's type.
func.func @view_element_type(%w: memref<4x2xf32, #mem<hbm>>) -> memref<8xi32, #mem<hbm>> {
  %v = neuron.view %w : memref<4x2xf32, #mem<hbm>> to memref<8xi32, #mem<hbm>>
  func.return %v : memref<8xi32, #mem<hbm>>
}
// CHECK: neuron.view: a view keeps the element type (f32 vs i32)

// -----

func.func @view_dynamic_stride(%w: memref<520x300xf32, #mem<hbm>>) {
  %v = neuron.view %w : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[1, ?]>, #mem<hbm>>
  func.return
}
// CHECK: neuron.view: a view's strides and offset are static, got strided<[1, ?]>

// -----

// ---- checks shared by every instruction -----------------------------------------------------------------------

func.func @engine_not_allowed() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.memset scalar dst %a[0:128, 0, [[1, 1]]] {value = 1.0 : f64} : memref<128x1xf32, #mem<sbuf>> loc("model.l1"("model.py":12:0))
  func.return
}
// CHECK: neuron.memset: cannot run on the scalar engine (allowed: gpsimd, vector) (at model.py:12 (model.l1))

// -----

func.func @dma_without_queue(%x: memref<37x300xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<37x300xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:37, 0, [[1, 300]]], src %x[0, [[300, 37], [1, 300]]] : memref<37x300xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_copy: a DMA instruction needs a queue

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @dma_queue_out_of_range(%x: memref<37x300xf32, #mem<hbm>>) {
    %t = neuron.alloc : memref<37x300xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:37, 0, [[1, 300]]], src %x[0, [[300, 37], [1, 300]]] {queue = 16 : i64} : memref<37x300xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
    func.return
  }
}
// CHECK: neuron.dma_copy: DMA queue 16 is outside 0..15

// -----

func.func @dma_transpose_of_4_byte_elements(%x: memref<512x64xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<64x512xf32, #mem<sbuf>>
  neuron.dma_transpose dma dst %t[0:64, 0, [[1, 512]]], src %x[0, [[64, 512], [1, 64]]] {queue = 0 : i64} : memref<64x512xf32, #mem<sbuf>>, memref<512x64xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_transpose: transposes 2-byte elements only, got f32

// -----

func.func @dma_transpose_rows_not_the_partitions(%x: memref<512x64xbf16, #mem<hbm>>) {
  %t = neuron.alloc : memref<64x512xbf16, #mem<sbuf>>
  neuron.dma_transpose dma dst %t[0:64, 0, [[1, 512]]], src %x[0, [[1, 64], [64, 512]]] {queue = 0 : i64} : memref<64x512xbf16, #mem<sbuf>>, memref<512x64xbf16, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_transpose: src's pattern [(1, 64), (64, 512)] does not end in rows of 64 elements (dst's partitions)

// -----

func.func @dma_transpose_into_hbm(%x: memref<512x64xbf16, #mem<hbm>>, %y: memref<64x512xbf16, #mem<hbm>>) {
  neuron.dma_transpose dma dst %y[0, [[512, 64], [1, 512]]], src %x[0, [[64, 512], [1, 64]]] {queue = 0 : i64} : memref<64x512xbf16, #mem<hbm>>, memref<512x64xbf16, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_transpose: reads HBM or SBUF and writes SBUF, not hbm to hbm

// -----

builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @dma_transpose_on_trn1(%x: memref<512x64xbf16, #mem<hbm>>) {
    %t = neuron.alloc : memref<64x512xbf16, #mem<sbuf>>
    neuron.dma_transpose dma dst %t[0:64, 0, [[1, 512]]], src %x[0, [[64, 512], [1, 64]]] {queue = 0 : i64} : memref<64x512xbf16, #mem<sbuf>>, memref<512x64xbf16, #mem<hbm>>
    func.return
  }
}
// CHECK: neuron.dma_transpose: trn1 (NeuronCore-v2) has no DMA transpose

// -----

func.func @queue_on_compute_engine() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[1, 1]]] {value = 1.0 : f64, queue = 0 : i64} : memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: only DMA instructions have a queue (engine is vector)

// -----

func.func @waits_without_id() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[1, 1]]] {value = 1.0 : f64, waits = array<i64: 0>} : memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: an instruction with `waits` needs an `id`

// -----

// TensorE writes only PSUM: a matmul into SBUF fails here, before nc_matmul's own "dst must be in PSUM" check.
func.func @engine_cannot_write() {
  %d = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %d[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: dst: the tensor engine cannot write SBUF

// -----

func.func @engine_cannot_read() {
  %d = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
  neuron.tensor_copy gpsimd dst %d[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[1, 512]]] : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
  func.return
}
// CHECK: neuron.tensor_copy: src: the gpsimd engine cannot read PSUM

// -----

func.func @hbm_access_with_partitions(%x: memref<37x300xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<37x300xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:37, 0, [[1, 300]]], src %x[0:37, 0, [[1, 300]]] {queue = 0 : i64} : memref<37x300xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_copy: src: an HBM access has no partition range

// -----

func.func @sbuf_access_without_partitions(%x: memref<37x300xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<37x300xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0, [[300, 37], [1, 300]]], src %x[0, [[300, 37], [1, 300]]] {queue = 0 : i64} : memref<37x300xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_copy: dst: an SBUF access needs a partition range

// -----

func.func @partitions_beyond_buffer() {
  %a = neuron.alloc : memref<64x4xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[1, 4]]] {value = 0.0 : f64} : memref<64x4xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: dst: partitions 0:128 exceed the buffer's 64 partitions

// -----

func.func @disallowed_start_partition() {
  %a = neuron.alloc : memref<128x4xf32, #mem<sbuf>>
  neuron.memset vector dst %a[32:96, 0, [[1, 4]]] {value = 0.0 : f64} : memref<128x4xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: dst: an access of 64 partitions cannot start at partition 32 (allowed: 0, 64)

// -----

func.func @too_many_free_dims() {
  %a = neuron.alloc : memref<128x2x2x2x2x2xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[16, 2], [8, 2], [4, 2], [2, 2], [1, 2]]] {value = 0.0 : f64} : memref<128x2x2x2x2x2xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: dst: 5 free dimensions exceed the hardware's 4

// -----

// Engine access patterns hold uint16 sizes and int16 steps.
func.func @engine_pattern_step_too_large() {
  %a = neuron.alloc : memref<128x40001xbf16, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[40000, 2]]] {value = 1.0 : f64} : memref<128x40001xbf16, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: dst: (step 40000, num 2) does not fit an engine access pattern (num at most 65535, step within int16)

// -----

func.func @written_pattern_overlaps_itself() {
  %a = neuron.alloc : memref<128x4xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[0, 4]]] {value = 1.0 : f64} : memref<128x4xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: dst: the written pattern [(0, 4)] touches some elements twice

// -----

func.func @hbm_access_too_many_dimensions(%x: memref<4xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<1x4xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:1, 0, [[1, 4]]], src %x[0, [[0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [1, 4]]] {queue = 0 : i64} : memref<1x4xf32, #mem<sbuf>>, memref<4xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_copy: src: 9 free dimensions exceed the 8 of an HBM access

// -----

func.func @access_outside_on_chip_buffer() {
  %a = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 256, [[1, 512]]] {value = 0.0 : f64} : memref<128x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.memset: dst: elements 256..767 of the access lie outside the buffer's 512 elements per partition

// -----

func.func @access_outside_hbm_buffer(%x: memref<37x300xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<37x300xf32, #mem<sbuf>>
  // A negative step walking back from element 0.
  neuron.dma_copy dma dst %t[0:37, 0, [[1, 300]]], src %x[0, [[300, 37], [-1, 300]]] {queue = 0 : i64} : memref<37x300xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_copy: src: elements -299..10800 of the access lie outside the buffer's 11100 elements{{$}}

// -----

// ---- nc_matmul ------------------------------------------------------------------------------------------------

func.func @matmul_contraction_mismatch() {
  %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
  %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<64x512xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:64, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<64x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: stationary and moving contract over different partition counts (128 vs 64)

// -----

// An on-chip buffer of more than 128 partitions can only come in as an argument (neuron.alloc refuses it). No
// access may cover more than 128 partitions, which is also TensorE's contraction limit.
func.func @matmul_contraction_too_large(%s: memref<256x37xf32, #mem<sbuf>>, %m: memref<256x512xf32, #mem<sbuf>>) {
  %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
  neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:256, 0, [[1, 37]]], moving %m[0:256, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<256x37xf32, #mem<sbuf>>, memref<256x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: stationary: 256 partitions; an on-chip access covers 1..128

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_stationary_too_wide() {
    %p = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x256xf32, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 256]]], moving %m[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x256xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: stationary: free size 256 exceeds 128 on trn2

// -----

// trn3 keeps N <= 512 (one PSUM bank) until multi-bank accumulation is lowered.
builtin.module attributes {neuron.target = #neuron.target<trn3>} {
  func.func @matmul_moving_too_wide() {
    %p = neuron.alloc : memref<37x1024xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
    %m = neuron.alloc : memref<128x1024xf32, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 1024]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 1024]]] : memref<37x1024xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x1024xf32, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: moving: free size 1024 exceeds 512 on trn3

// -----

func.func @matmul_dst_shape() {
  %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
  %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<64x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: dst: is [64, 512] but the product is [37, 512]

// -----

// Row tiling [nki-isa]: 2 tiles of 64 rows from NeuronCore-v2 (trn1), also 4 of 32 from NeuronCore-v3 (trn2).
builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @matmul_row_tile_size_trn1() {
    %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[0:32, 0, [[1, 64]]], moving %m[0:32, 0, [[1, 512]]] {row_tile_start = 0 : i64, row_tile_size = 32 : i64} : memref<64x512xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: row tile size 32 is not one trn1 has (row tile sizes: 64)

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_row_tile_size_unknown() {
    %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[0:64, 0, [[1, 64]]], moving %m[0:64, 0, [[1, 512]]] {row_tile_start = 0 : i64, row_tile_size = 48 : i64} : memref<64x512xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: row tile size 48 is not one trn2 has (row tile sizes: 32, 64)

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_row_tile_start_unaligned() {
    %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[32:64, 0, [[1, 64]]], moving %m[32:64, 0, [[1, 512]]] {row_tile_start = 32 : i64, row_tile_size = 64 : i64} : memref<64x512xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: row tile start 32 is not a multiple of the row tile size 64 within the 128 PE rows

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_row_tile_start_outside() {
    %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[0:64, 0, [[1, 64]]], moving %m[0:64, 0, [[1, 512]]] {row_tile_start = 128 : i64, row_tile_size = 64 : i64} : memref<64x512xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: row tile start 128 is not a multiple of the row tile size 64 within the 128 PE rows

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_row_tile_start_without_size() {
    %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[64:128, 0, [[1, 64]]], moving %m[64:128, 0, [[1, 512]]] {row_tile_start = 64 : i64} : memref<64x512xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: row_tile_start 64 needs a row_tile_size

// -----

// The contraction may not exceed the row tile, and the operands lie on its partitions: row p reads partition p.
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_row_tile_contraction_too_large() {
    %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[0:64, 0, [[1, 64]]], moving %m[0:64, 0, [[1, 512]]] {row_tile_start = 0 : i64, row_tile_size = 32 : i64} : memref<64x512xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: stationary: partitions 0..63 lie outside the row tile's rows 0..31 (partitions feed the PE rows one to one)

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_row_tile_operand_elsewhere() {
    %p = neuron.alloc : memref<64x512xf32, #mem<psum>>
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 512]]], stationary %s[64:128, 0, [[1, 64]]], moving %m[0:64, 0, [[1, 512]]] {row_tile_start = 64 : i64, row_tile_size = 64 : i64} : memref<64x512xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: moving: partitions 0..63 lie outside the row tile's rows 64..127 (partitions feed the PE rows one to one)

// -----

func.func @matmul_mixed_f32_bf16() {
  %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
  %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: inputs must both be f32 or both narrower, got f32 and bf16

// -----

func.func @matmul_integer_inputs() {
  %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
  %s = neuron.alloc : memref<128x37xi32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x512xi32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xi32, #mem<sbuf>>, memref<128x512xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: stationary: TensorE reads float inputs, got i32

// -----

builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @matmul_dst_dtype() {
    %p = neuron.alloc : memref<37x512xbf16, #mem<psum>>
    %s = neuron.alloc : memref<128x37xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xbf16, #mem<psum>>, memref<128x37xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}
// CHECK: neuron.nc_matmul: dst: PSUM accumulation on trn2 writes f32, dst is bf16

// -----

func.func @matmul_psum_bank_crossing() {
  %p = neuron.alloc : memref<37x1024xf32, #mem<psum>>
  %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:37, 256, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x1024xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: dst: bytes 1024..3071 of each partition cross a 2048-byte PSUM bank boundary

// -----

// Once placed, the buffer's own address counts: row bytes 1024..3071 of PSUM, from offset 0 of a buffer at 1024.
func.func @matmul_psum_bank_crossing_at_its_address() {
  %p = neuron.alloc {address = 1024 : i64} : memref<37x512xf32, #mem<psum>>
  %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: dst: bytes 1024..3071 of each partition cross a 2048-byte PSUM bank boundary

// -----

// ---- activation -----------------------------------------------------------------------------------------------

func.func @activation_unknown_function() {
  %y = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  neuron.activation scalar dst %y[0:37, 0, [[1, 512]]], src %y[0:37, 0, [[1, 512]]] {func = "softmax"} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.activation: attribute 'func': unknown activation function 'softmax' (known: abs, arctan, copy, erf, exp, gelu, gelu_apprx_tanh, gelu_dx, log, mish, reciprocal, relu, rsqrt, sigmoid, sign, silu, silu_dx, sin, softplus, sqrt, square, tanh)

// -----

func.func @activation_shape_mismatch() {
  %y = neuron.alloc : memref<37x520xf32, #mem<sbuf>>
  %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
  neuron.activation scalar dst %y[0:37, 0, [[1, 520]]], src %p[0:37, 0, [[1, 512]]] {func = "relu"} : memref<37x520xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
  func.return
}
// CHECK: neuron.activation: dst is [37, 520] but src is [37, 512] (partitions, elements per partition)

// -----

func.func @activation_column_operand() {
  %y = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  %b = neuron.alloc : memref<37x2xf32, #mem<sbuf>>
  neuron.activation scalar dst %y[0:37, 0, [[1, 512]]], src %y[0:37, 0, [[1, 512]]], scale_vector %b[0:37, 0, [[1, 2]]] {func = "relu"} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<sbuf>>, memref<37x2xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.activation: scale_vector: must be a per-partition column [37, 1], got [37, 2]

// -----

// ---- tensor_tensor / tensor_scalar ----------------------------------------------------------------------------

func.func @tensor_tensor_unknown_operator() {
  %a = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  neuron.tensor_tensor vector dst %a[0:37, 0, [[1, 512]]], in0 %a[0:37, 0, [[1, 512]]], in1 %a[0:37, 0, [[1, 512]]] {op = "divide"} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_tensor: attribute 'op': unknown ALU operator 'divide' (known: abs_max, abs_min, add, bitwise_and, bitwise_or, bitwise_xor, is_equal, is_ge, is_gt, is_le, is_lt, left_shift, logical_and, logical_or, logical_xor, max, min, multiply, not_equal, power, right_shift, subtract)

// -----

func.func @tensor_tensor_shape_mismatch() {
  %a = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  neuron.tensor_tensor vector dst %a[0:37, 0, [[1, 512]]], in0 %a[0:37, 0, [[1, 512]]], in1 %a[0:32, 0, [[1, 512]]] {op = "add"} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_tensor: dst is [37, 512] but in1 is [32, 512] (partitions, elements per partition)

// -----

func.func @tensor_tensor_two_psum_inputs() {
  %d = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
  neuron.tensor_tensor vector dst %d[0:37, 0, [[1, 512]]], in0 %p[0:37, 0, [[1, 512]]], in1 %p[0:37, 0, [[1, 512]]] {op = "add"} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>, memref<37x512xf32, #mem<psum>>
  func.return
}
// CHECK: neuron.tensor_tensor: at most one input may be in PSUM

// -----

func.func @tensor_scalar_unknown_second_operator() {
  %a = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
  neuron.tensor_scalar vector dst %a[0:37, 0, [[1, 512]]], src %a[0:37, 0, [[1, 512]]] {op0 = "add", scalar0 = 1.0 : f64, op1 = "modulo", scalar1 = 2.0 : f64} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_scalar: attribute 'op1': unknown ALU operator 'modulo' (known: abs_max, abs_min, add, bitwise_and, bitwise_or, bitwise_xor, is_equal, is_ge, is_gt, is_le, is_lt, left_shift, logical_and, logical_or, logical_xor, max, min, multiply, not_equal, power, right_shift, subtract)

// -----

func.func @tensor_scalar_column_operand() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %c = neuron.alloc : memref<64x1xf32, #mem<sbuf>>
  neuron.tensor_scalar vector dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 37]]], operand0 %c[0:64, 0, [[1, 1]]] {op0 = "add"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_scalar: operand0: must be a per-partition column [128, 1], got [64, 1]

// -----

func.func @tensor_scalar_operand1_without_op1() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %c = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.tensor_scalar vector dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 37]]], operand1 %c[0:128, 0, [[1, 1]]] {op0 = "add"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_scalar: operand1: given without op1

// -----

// Only VectorE's tensor_scalar sums its results as it writes them.
func.func @tensor_scalar_accumulates_on_gpsimd() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %s = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.tensor_scalar gpsimd dst %a[0:128, 0, [[1, 37]]], accumulate_dst %s[0:128, 0, [[1, 1]]], src %a[0:128, 0, [[1, 37]]] {op0 = "add", scalar0 = 1.0 : f64} : memref<128x37xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_scalar: accumulate_dst: only the vector engine has it, not the gpsimd engine

// -----

func.func @tensor_scalar_accumulates_two_steps() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %s = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  neuron.tensor_scalar vector dst %a[0:128, 0, [[1, 37]]], accumulate_dst %s[0:128, 0, [[1, 1]]], src %a[0:128, 0, [[1, 37]]] {op0 = "add", scalar0 = 1.0 : f64, op1 = "multiply", scalar1 = 2.0 : f64} : memref<128x37xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_scalar: attribute 'op1': a tensor_scalar that reduces has one operator (no op1)

// -----

// ---- scalar_tensor_tensor -------------------------------------------------------------------------------------

func.func @scalar_tensor_tensor_on_gpsimd() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  neuron.scalar_tensor_tensor gpsimd dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 37]]], in1 %a[0:128, 0, [[1, 37]]] {op0 = "add", op1 = "multiply"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.scalar_tensor_tensor: cannot run on the gpsimd engine (allowed: vector)

// -----

func.func @scalar_tensor_tensor_without_op1() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  neuron.scalar_tensor_tensor vector dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 37]]], in1 %a[0:128, 0, [[1, 37]]] {op0 = "add"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.scalar_tensor_tensor: property 'op1' expected in operation 'neuron.scalar_tensor_tensor'

// -----

func.func @scalar_tensor_tensor_unknown_operator() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  neuron.scalar_tensor_tensor vector dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 37]]], in1 %a[0:128, 0, [[1, 37]]] {op0 = "add", op1 = "divide"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.scalar_tensor_tensor: attribute 'op1': unknown ALU operator 'divide'

// -----

func.func @scalar_tensor_tensor_src_shape() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  neuron.scalar_tensor_tensor vector dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 36]]], in1 %a[0:128, 0, [[1, 37]]] {op0 = "add", op1 = "multiply"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.scalar_tensor_tensor: dst is [128, 37] but src is [128, 36] (partitions, elements per partition)

// -----

func.func @scalar_tensor_tensor_in1_shape() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  neuron.scalar_tensor_tensor vector dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 37]]], in1 %a[0:64, 0, [[1, 37]]] {op0 = "add", op1 = "multiply"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.scalar_tensor_tensor: dst is [128, 37] but in1 is [64, 37] (partitions, elements per partition)

// -----

func.func @scalar_tensor_tensor_column_operand() {
  %a = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %c = neuron.alloc : memref<128x2xf32, #mem<sbuf>>
  neuron.scalar_tensor_tensor vector dst %a[0:128, 0, [[1, 37]]], src %a[0:128, 0, [[1, 37]]], in1 %a[0:128, 0, [[1, 37]]], operand0 %c[0:128, 0, [[1, 2]]] {op0 = "add", op1 = "multiply"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>, memref<128x2xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.scalar_tensor_tensor: operand0: must be a per-partition column [128, 1], got [128, 2]

// -----

func.func @scalar_tensor_tensor_two_psum_inputs() {
  %d = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  %p = neuron.alloc : memref<128x37xf32, #mem<psum>>
  neuron.scalar_tensor_tensor vector dst %d[0:128, 0, [[1, 37]]], src %p[0:128, 0, [[1, 37]]], in1 %p[0:128, 0, [[1, 37]]] {op0 = "add", op1 = "multiply"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<psum>>, memref<128x37xf32, #mem<psum>>
  func.return
}
// CHECK: neuron.scalar_tensor_tensor: src and in1 cannot both be in PSUM

// -----

// ---- tensor_reduce --------------------------------------------------------------------------------------------

func.func @tensor_reduce_unknown_reduction() {
  %s = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  %x = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  neuron.tensor_reduce vector dst %s[0:128, 0, [[1, 1]]], src %x[0:128, 0, [[1, 37]]] {op = "mean"} : memref<128x1xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_reduce: attribute 'op': unknown reduction 'mean' (known: abs_max, add, max, min, multiply)

// -----

func.func @tensor_reduce_too_many_axes() {
  %s = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  %x = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
  neuron.tensor_reduce vector dst %s[0:128, 0, [[1, 1]]], src %x[0:128, 0, [[1, 37]]] {op = "add", axes = 2 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x37xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_reduce: attribute 'axes': cannot reduce 2 axes of a 1-d free pattern

// -----

func.func @tensor_reduce_dst_shape() {
  %s = neuron.alloc : memref<64x8xf32, #mem<sbuf>>
  %x = neuron.alloc : memref<64x4x8xf32, #mem<sbuf>>
  neuron.tensor_reduce vector dst %s[0:64, 0, [[1, 8]]], src %x[0:64, 0, [[8, 4], [1, 8]]] {op = "add"} : memref<64x8xf32, #mem<sbuf>>, memref<64x4x8xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.tensor_reduce: dst: is [64, 8] but src reduced over 1 axes is [64, 4]

// -----

// ---- iota / affine_select -------------------------------------------------------------------------------------

func.func @iota_pattern_not_pairs() {
  %i = neuron.alloc : memref<128x128xi32, #mem<sbuf>>
  neuron.iota gpsimd dst %i[0:128, 0, [[1, 128]]] {pattern = array<i64: 1, 128, 1>} : memref<128x128xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.iota: pattern must hold (step, num) pairs

// -----

func.func @iota_pattern_shape() {
  %i = neuron.alloc : memref<128x128xi32, #mem<sbuf>>
  neuron.iota gpsimd dst %i[0:128, 0, [[1, 128]]] {pattern = array<i64: 16, 8, 1, 16>} : memref<128x128xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.iota: attribute 'pattern': covers the free shape [8, 16], dst's is [128]

// -----

func.func @iota_pattern_too_many_dimensions() {
  %i = neuron.alloc : memref<128x2xi32, #mem<sbuf>>
  neuron.iota gpsimd dst %i[0:128, 0, [[1, 2]]] {pattern = array<i64: 1, 1, 1, 1, 1, 1, 1, 1, 1, 2>} : memref<128x2xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.iota: attribute 'pattern': 5 (step, num) pairs; a pattern has 1 to 4

// -----

func.func @iota_pattern_empty_dimension() {
  %i = neuron.alloc : memref<128x2xi32, #mem<sbuf>>
  neuron.iota gpsimd dst %i[0:128, 0, [[1, 2]]] {pattern = array<i64: 1, 0>} : memref<128x2xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.iota: attribute 'pattern': pattern entry (step 1, num 0) is out of range

// -----

func.func @affine_select_unknown_comparison() {
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.affine_select gpsimd dst %eye[0:128, 0, [[1, 128]]], on_true %eye[0:128, 0, [[1, 128]]] {cmp = "add", pattern = array<i64: -1, 128>, on_false_value = 0.0 : f64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.affine_select: attribute 'cmp': unknown comparison 'add' (known: is_equal, is_ge, is_gt, is_le, is_lt, not_equal)

// -----

func.func @affine_select_pattern_shape() {
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.affine_select gpsimd dst %eye[0:128, 0, [[1, 128]]], on_true %eye[0:128, 0, [[1, 128]]] {cmp = "is_equal", pattern = array<i64: -1, 64>, on_false_value = 0.0 : f64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.affine_select: attribute 'pattern': covers the free shape [64], dst's is [128]

// -----

// ---- dma_copy -------------------------------------------------------------------------------------------------

func.func @dma_element_count(%x: memref<37x300xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<37x300xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:37, 0, [[1, 300]]], src %x[0, [[300, 36], [1, 300]]] {queue = 0 : i64} : memref<37x300xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_copy: dst has 11100 elements but src has 10800

// -----

func.func @affine_select_odd_pattern() {
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  neuron.affine_select gpsimd dst %eye[0:128, 0, [[1, 128]]], on_true %eye[0:128, 0, [[1, 128]]] {cmp = "is_equal", pattern = array<i64: -1, 128, 5>, on_false_value = 0.0 : f64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.affine_select: pattern must hold (step, num) pairs

// -----

func.func @alloc_unstorable_dtype() {
  %t = neuron.alloc : memref<128x4xf64, #mem<sbuf>>
  func.return
}
// CHECK: neuron.alloc: element type f64 has no NeuronCore storage type

// -----

// ---- nc_matmul in transpose mode: the stationary is a [K, K] identity, dst receives moving^T ----------------

func.func @transpose_not_square() {
  %p = neuron.alloc : memref<64x128xf32, #mem<psum>>
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 64]]], moving %m[0:128, 0, [[1, 64]]] {is_transpose = true} : memref<64x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: stationary: a transpose needs a square identity, got [128, 64]

// -----

func.func @transpose_dst_shape() {
  %p = neuron.alloc : memref<128x64xf32, #mem<psum>>
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 64]]], stationary %eye[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 64]]] {is_transpose = true} : memref<128x64xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: dst: the transpose of moving [128, 64] is [64, 128], dst is [128, 64]

// -----

func.func @transpose_dtype() {
  %p = neuron.alloc : memref<64x128xf32, #mem<psum>>
  %eye = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
  %m = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 64]]] {is_transpose = true} : memref<64x128xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: dst: a transpose on trn2 writes bf16, dst is f32

// -----

func.func @transpose_accumulates() {
  %p = neuron.alloc : memref<64x128xf32, #mem<psum>>
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 64]]] {is_transpose = true, accumulate = true} : memref<64x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: a transpose cannot accumulate

// -----

// Whether a register-given accumulate is set is known only when the transpose issues: refused as well.
func.func @transpose_accumulates_from_a_register(%first: i1) {
  %p = neuron.alloc : memref<64x128xf32, #mem<psum>>
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:64, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 64]]], accumulate %first {is_transpose = true} : memref<64x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: a transpose cannot accumulate

// -----

func.func @transpose_too_many_partitions() {
  %p = neuron.alloc : memref<128x128xf32, #mem<psum>>
  %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
  %m = neuron.alloc : memref<128x256xf32, #mem<sbuf>>
  neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x256xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.nc_matmul: dst: the transpose of moving [128, 256] is [256, 128], dst is [128, 128]

// -----

func.func @iota_base_twice(%off: index) {
  %i = neuron.alloc : memref<128x32xi32, #mem<sbuf>>
  neuron.iota gpsimd dst %i[0:128, 0, [[1, 32]]], base %off {base = 3 : i64, pattern = array<i64: 1, 32>} : memref<128x32xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.iota: give base as an immediate or as a register, not both

// -----

// ---- gpsimd_kernel ----------------------------------------------------------------------------------------------

func.func @gpsimd_kernel_unknown() {
  %a = neuron.alloc : memref<4x8xf32, #mem<sbuf>>
  neuron.gpsimd_kernel gpsimd dst %a[0:4, 0, [[1, 8]]], in0 %a[0:4, 0, [[1, 8]]], in1 %a[0:4, 0, [[1, 8]]] {kernel = "cosh"} : memref<4x8xf32, #mem<sbuf>>, memref<4x8xf32, #mem<sbuf>>, memref<4x8xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.gpsimd_kernel: attribute 'kernel': unknown GpSimd kernel 'cosh' (known: divide, divide_floor, divide_trunc, fmod, normal, remainder, stochastic_round_bf16, uniform)

// -----

func.func @gpsimd_kernel_arity() {
  %a = neuron.alloc : memref<4x8xf32, #mem<sbuf>>
  neuron.gpsimd_kernel gpsimd dst %a[0:4, 0, [[1, 8]]], in0 %a[0:4, 0, [[1, 8]]] {kernel = "divide"} : memref<4x8xf32, #mem<sbuf>>, memref<4x8xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.gpsimd_kernel: kernel 'divide' takes 2 input(s)

// -----

func.func @gpsimd_kernel_second_input_shape() {
  %a = neuron.alloc : memref<4x8xf32, #mem<sbuf>>
  %b = neuron.alloc : memref<4x2xf32, #mem<sbuf>>
  neuron.gpsimd_kernel gpsimd dst %a[0:4, 0, [[1, 8]]], in0 %a[0:4, 0, [[1, 8]]], in1 %b[0:4, 0, [[1, 2]]] {kernel = "fmod"} : memref<4x8xf32, #mem<sbuf>>, memref<4x8xf32, #mem<sbuf>>, memref<4x2xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.gpsimd_kernel: dst is [4, 8] but in1 is [4, 2] (partitions, elements per partition)

// -----

func.func @gpsimd_kernel_on_vector() {
  %a = neuron.alloc : memref<4x8xf32, #mem<sbuf>>
  neuron.gpsimd_kernel vector dst %a[0:4, 0, [[1, 8]]], in0 %a[0:4, 0, [[1, 8]]], in1 %a[0:4, 0, [[1, 8]]] {kernel = "fmod"} : memref<4x8xf32, #mem<sbuf>>, memref<4x8xf32, #mem<sbuf>>, memref<4x8xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.gpsimd_kernel: cannot run on the vector engine (allowed: gpsimd)

// -----

// ---- indirect dma_copy ---------------------------------------------------------------------------------------

func.func @indirect_bad_side(%table: memref<1000x64xf32, #mem<hbm>>) {
  %o = neuron.alloc : memref<128x1xi32, #mem<sbuf>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]], offsets %o[0:128, 0, [[1, 1]]] {queue = 2 : i64, indirect = "both"} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>, memref<128x1xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: attribute 'indirect': unknown indirect side 'both' (known: '', dst, src)

// -----

func.func @indirect_without_offsets(%table: memref<1000x64xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]] {queue = 2 : i64, indirect = "src"} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.dma_copy: an indirect dma_copy needs an 'offsets' operand

// -----

func.func @dma_offsets_without_indirect(%x: memref<100x64xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  %o = neuron.alloc : memref<128x1xi32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %x[0, [[64, 100], [1, 64]]], offsets %o[0:128, 0, [[1, 1]]] {queue = 0 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<100x64xf32, #mem<hbm>>, memref<128x1xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: an 'offsets' operand needs indirect = 'src' or 'dst'

// -----

func.func @accumulating_gather(%table: memref<1000x64xf32, #mem<hbm>>) {
  %o = neuron.alloc : memref<128x1xi32, #mem<sbuf>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]], offsets %o[0:128, 0, [[1, 1]]] {queue = 2 : i64, indirect = "src", accumulate = true} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>, memref<128x1xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: accumulate needs indirect = 'dst' (a scatter)

// -----

func.func @accumulate_without_indirect(%table: memref<128x64xf32, #mem<hbm>>) {
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %table[0, [[64, 128], [1, 64]]], src %t[0:128, 0, [[1, 64]]] {queue = 2 : i64, accumulate = true} : memref<128x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: accumulate needs an indirect (scatter) dma_copy

// -----

func.func @indirect_table_in_sbuf(%table: memref<1000x64xf32, #mem<hbm>>) {
  %o = neuron.alloc : memref<128x1xi32, #mem<sbuf>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]], offsets %o[0:128, 0, [[1, 1]]] {queue = 2 : i64, indirect = "dst"} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>, memref<128x1xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: the indexed side 'dst' must be in HBM, 'src' and 'offsets' in SBUF

// -----

func.func @indirect_float_offsets(%table: memref<1000x64xf32, #mem<hbm>>) {
  %o = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]], offsets %o[0:128, 0, [[1, 1]]] {queue = 2 : i64, indirect = "src"} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>, memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: offsets: must be i32, got f32

// -----

func.func @indirect_row_count(%table: memref<1000x64xf32, #mem<hbm>>) {
  %o = neuron.alloc : memref<128x2xi32, #mem<sbuf>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]], offsets %o[0:128, 0, [[1, 2]]] {queue = 2 : i64, indirect = "src"} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>, memref<128x2xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: 'dst' holds 64 elements per partition, but 2 offsets per partition of 64-element rows make 128

// -----

func.func @indirect_partitions(%table: memref<1000x64xf32, #mem<hbm>>) {
  %o = neuron.alloc : memref<64x2xi32, #mem<sbuf>>
  %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
  neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]], offsets %o[0:64, 0, [[1, 2]]] {queue = 2 : i64, indirect = "src"} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>, memref<64x2xi32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.dma_copy: offsets: 64 partitions of offsets for 128 of 'dst'

// -----

// ---- collectives ----------------------------------------------------------------------------------------------

func.func @collective_on_a_compute_engine() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_reduce vector dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.all_reduce: cannot run on the vector engine (allowed: collective)

// -----

func.func @collective_reads_sbuf() {
  %x = neuron.alloc : memref<8x1xf32, #mem<sbuf>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_reduce collective dst %y[0, [[1, 8]]], src %x[0:8, 0, [[1, 1]]] {replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8x1xf32, #mem<sbuf>>
  func.return
}
// CHECK: neuron.all_reduce: src: the collective engine cannot read SBUF

// -----

func.func @collective_gather_count() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_gather collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.all_gather: dst has 8 elements but 2 ranks of 8 gather 16

// -----

func.func @collective_broadcast_root() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.broadcast collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {root = 3 : i64, replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.broadcast: {{.*}}root 3 is no position in a replica group of 2 ranks

// -----

func.func @collective_split_counts() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_to_all collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {input_splits = array<i64: 1, 2, 5>, output_splits = array<i64: 4, 4>, replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.all_to_all: {{.*}}3 counts for a replica group of 2 ranks

// -----

func.func @collective_scatter_count() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.reduce_scatter collective dst %y[0, [[1, 3]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.reduce_scatter: src has 8 elements but 2 ranks of 3 scatter 6

// -----

func.func @collective_converts() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xbf16, #mem<hbm>>
  neuron.all_to_all collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>]} : memref<8xbf16, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.all_to_all: src is f32 but dst is bf16: a collective does not convert

// -----

func.func @collective_groups_of_different_sizes() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_reduce collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>, array<i64: 2>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.all_reduce: attribute 'replica_groups': groups of different sizes [2, 1]: every group of a collective has as many ranks

// -----

func.func @collective_rank_twice() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_reduce collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>, array<i64: 1, 2>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.all_reduce: attribute 'replica_groups': rank(s) [1] appear twice

// -----

func.func @collective_unknown_reduction() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_reduce collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>], reduce = "mean"} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: neuron.all_reduce: attribute 'reduce': unknown collective reduction 'mean' (known: avg, max, min, product, sum)
