// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Elementwise nests whose last dimension strides cannot merge with the others (permuted attention heads, the
// halves of a row that rotate_half slices) gather more dimensions into the free axis of one tile
// (`wide_tiling` in lowering/convert_torch_to_tile/elementwise.py): whole loop dimensions, and several rows per
// partition, so each DMA walks a whole tile instead of a [128, 64] piece. Numbers are checked end to end in
// test/e2e/test_rotary.py.

func.func @permuted_heads(%x: tensor<1x256x6x64xbf16>, %t: tensor<256x64xbf16>) -> tensor<1x6x256x64xbf16> {
  %q = torch.aten.permute %x {dims = array<i64: 0, 2, 1, 3>} : (tensor<1x256x6x64xbf16>) -> tensor<1x6x256x64xbf16>
  %y = torch.aten.mul.Tensor %q, %t : (tensor<1x6x256x64xbf16>, tensor<256x64xbf16>) -> tensor<1x6x256x64xbf16>
  func.return %y : tensor<1x6x256x64xbf16>
}
// Tokens go on partitions (two per lane), the six heads and the head dim on the free axes: one tile, no loop.
// CHECK-LABEL: func.func @permuted_heads
// CHECK-NOT:   scf.for
// CHECK:       %[[Q:.*]] = tile.view %{{.*}} to memref<6x128x2x64xbf16, strided<[64, 768, 384, 1]>, #mem<hbm>>
// CHECK:       tile.load %[[Q]][%c0, %c0, %c0, %c0] {dims = array<i64: 1, 0, 2, 3>} {{.*}} -> !tile.tile<128x6x2x64xbf16, sbuf>
// CHECK:       tile.load %{{.*}} {dims = array<i64: 1, 0, 2, 3>} : memref<6x128x2x64xbf16, strided<[0, 128, 64, 1]>, #mem<hbm>> -> !tile.tile<128x6x2x64xbf16, sbuf>
// CHECK:       tile.binary {{.*}} -> !tile.tile<128x6x2x64xbf16, sbuf>
// CHECK:       tile.store {{.*}} {dims = array<i64: 1, 0, 2, 3>} : !tile.tile<128x6x2x64xbf16, sbuf>, memref<6x128x2x64xbf16, #mem<hbm>>
// CHECK-NOT:   tile.load

// -----

func.func @half_rows(%x: tensor<4096x64xf32>) -> tensor<4096x32xf32> {
  %a = torch.aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 32 : i64} : (tensor<4096x64xf32>) -> tensor<4096x32xf32>
  %n = torch.aten.neg %a : (tensor<4096x32xf32>) -> tensor<4096x32xf32>
  func.return %n : tensor<4096x32xf32>
}
// 32 consecutive half rows per partition: [128, 32, 32] in one transfer each way.
// CHECK-LABEL: func.func @half_rows
// CHECK-NOT:   scf.for
// CHECK:       tile.load %{{.*}} : memref<128x32x32xf32, strided<[2048, 64, 1]>, #mem<hbm>> -> !tile.tile<128x32x32xf32, sbuf>
// CHECK:       tile.binary_scalar {{.*}} -> !tile.tile<128x32x32xf32, sbuf>
// CHECK:       tile.store %{{.*}}, %{{.*}}[%c0, %c0, %c0] : !tile.tile<128x32x32xf32, sbuf>, memref<128x32x32xf32, #mem<hbm>>

// -----

func.func @heads_to_hidden(%x: tensor<1x8x256x64xbf16>) -> tensor<256x512xbf16> {
  %p = torch.aten.permute %x {dims = array<i64: 0, 2, 1, 3>} : (tensor<1x8x256x64xbf16>) -> tensor<1x256x8x64xbf16>
  %v = torch.aten.view %p {size = array<i64: 256, 512>} : (tensor<1x256x8x64xbf16>) -> tensor<256x512xbf16>
  func.return %v : tensor<256x512xbf16>
}
// The reshape strides cannot say copies once, in one tile: two tokens per partition, every head of each.
// CHECK-LABEL: func.func @heads_to_hidden
// CHECK-NOT:   scf.for
// CHECK:       tile.load {{.*}} : memref<128x2x8x64xbf16, strided<[128, 64, 16384, 1]>, #mem<hbm>> -> !tile.tile<128x2x8x64xbf16, sbuf>
// CHECK-NEXT:  tile.store {{.*}} : !tile.tile<128x2x8x64xbf16, sbuf>, memref<128x2x8x64xbf16, #mem<hbm>>
// CHECK-NOT:   tile.load

// -----

func.func @wide_rows_keep_plain_tiles(%x: tensor<300x520xf32>) -> tensor<300x520xf32> {
  %y = torch.aten.neg %x : (tensor<300x520xf32>) -> tensor<300x520xf32>
  func.return %y : tensor<300x520xf32>
}
// A contiguous tensor merges into one dimension and keeps the plain [P, F] tiles.
// CHECK-LABEL: func.func @wide_rows_keep_plain_tiles
// CHECK:       tile.load {{.*}} : memref<125x1248xf32, #mem<hbm>> -> !tile.tile<125x1248xf32, sbuf>
// CHECK-NOT:   dims =

// -----

func.func @row_scale_keeps_plain_tiles(%x: tensor<6144x256xf32>, %s: tensor<6144x1xf32>) -> tensor<6144x256xf32> {
  %y = torch.aten.sub.Tensor %x, %s {alpha = 1 : i64} : (tensor<6144x256xf32>, tensor<6144x1xf32>) -> tensor<6144x256xf32>
  func.return %y : tensor<6144x256xf32>
}
// An operand repeated along the row (a softmax-backward row sum) is loaded as one column per partition and spread
// on chip; a wide tile would fetch it one element per descriptor, so the row keeps the plain tiles.
// CHECK-LABEL: func.func @row_scale_keeps_plain_tiles
// CHECK:       tile.load {{.*}} : memref<6144x256xf32, strided<[1, 0]>, #mem<hbm>> -> !tile.tile<128x1xf32, sbuf>
// CHECK-NOT:   dims =

// -----

func.func @batch_beside_a_broadcast(%x: tensor<4x64x32xf32>, %p: tensor<1x64x32xf32>) -> tensor<4x64x32xf32> {
  %y = torch.aten.add.Tensor %x, %p : (tensor<4x64x32xf32>, tensor<1x64x32xf32>) -> tensor<4x64x32xf32>
  func.return %y : tensor<4x64x32xf32>
}
// The broadcast keeps the batch from merging with the rest ([4, 2048]: a tile of 4 lanes by 2048 elements); split
// back at the features, the 64 positions go on the partitions and the batch joins the free axis: one [64, 4 x 32]
// tile, 128 elements per lane.
// CHECK-LABEL: func.func @batch_beside_a_broadcast
// CHECK-NOT:   scf.for
// CHECK:       tile.load {{.*}} : memref<4x64x32xf32, #mem<hbm>> -> !tile.tile<64x4x32xf32, sbuf>
// CHECK:       tile.load {{.*}} : memref<4x64x32xf32, strided<[0, 32, 1]>, #mem<hbm>> -> !tile.tile<64x4x32xf32, sbuf>
// CHECK:       tile.binary {{.*}} -> !tile.tile<64x4x32xf32, sbuf>
// CHECK:       tile.store {{.*}} : !tile.tile<64x4x32xf32, sbuf>, memref<4x64x32xf32, #mem<hbm>>
// CHECK-NOT:   tile.load

// -----

func.func @many_heads_beside_a_broadcast(%x: tensor<32x256x64xbf16>, %s: tensor<1x256x64xbf16>) -> tensor<32x256x64xbf16> {
  %y = torch.aten.mul.Tensor %x, %s : (tensor<32x256x64xbf16>, tensor<1x256x64xbf16>) -> tensor<32x256x64xbf16>
  func.return %y : tensor<32x256x64xbf16>
}
// A rotary product of 32 heads: split back at the head dim, tiles of [128, 32 x 64] would fill the lanes, but
// every operand would move in runs of 64 elements (128 bytes, a quarter of the DMA rate) where the plain tiles
// of [32, 2048] move whole rows: the loads cost more than the lanes save, and the plain tiles stay.
// CHECK-LABEL: func.func @many_heads_beside_a_broadcast
// CHECK:       scf.for
// CHECK:       tile.load {{.*}} : memref<32x16384xbf16, #mem<hbm>> -> !tile.tile<32x2048xbf16, sbuf>
// CHECK:       tile.load {{.*}} : memref<32x16384xbf16, strided<[0, 1]>, #mem<hbm>> -> !tile.tile<32x2048xbf16, sbuf>
// CHECK:       tile.binary {{.*}} -> !tile.tile<32x2048xbf16, sbuf>

// -----

func.func @few_heads_beside_a_broadcast(%x: tensor<8x256x64xbf16>, %s: tensor<1x256x64xbf16>) -> tensor<8x256x64xbf16> {
  %y = torch.aten.mul.Tensor %x, %s : (tensor<8x256x64xbf16>, tensor<1x256x64xbf16>) -> tensor<8x256x64xbf16>
  func.return %y : tensor<8x256x64xbf16>
}
// With 8 heads the plain tiles' 8 lanes make the product eight [8, 2048] VectorE passes, and the split tiles'
// slower loads (two positions per lane: runs of 128 elements) cost less than the lanes save: one tile of
// [128, 8 x 2 x 64].
// CHECK-LABEL: func.func @few_heads_beside_a_broadcast
// CHECK-NOT:   scf.for
// CHECK:       tile.load {{.*}} {dims = array<i64: 1, 0, 2, 3>} : memref<8x128x2x64xbf16, #mem<hbm>> -> !tile.tile<128x8x2x64xbf16, sbuf>
// CHECK:       tile.load {{.*}} {dims = array<i64: 1, 0, 2, 3>} : memref<8x128x2x64xbf16, strided<[0, 128, 64, 1]>, #mem<hbm>> -> !tile.tile<128x8x2x64xbf16, sbuf>
// CHECK:       tile.binary {{.*}} -> !tile.tile<128x8x2x64xbf16, sbuf>
