// RUN: neuron-opt %s -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A K-contiguous B that TensorE transposes (fp32 here, which the DMA engines do not transpose), too large to stay
// whole on chip and read by two block rows, is transposed once (lowering/convert_torch_to_tile/matmul.py,
// `_transpose_once`): the first block row stores each transposed chunk into a copy in HBM, the second reads it.
// Both walk B in blocks of 512 columns over whole K tiles, so the copy is stored by column blocks
// (`_blocked_by_columns`): a chunk [128, 8 K tiles, 512] is one run of 8 x 512 elements per partition, where a
// row-major copy gave runs of 512 only, written and read so.
// SEMANTICS: all outputs match

func.func @main(%a: tensor<640x1024xf32>, %w: tensor<2048x1024xf32>) -> tensor<640x2048xf32> {
  %wt = torch.aten.permute %w {dims = array<i64: 1, 0>} : (tensor<2048x1024xf32>) -> tensor<1024x2048xf32>
  %y = torch.aten.mm %a, %wt : (tensor<640x1024xf32>, tensor<1024x2048xf32>) -> tensor<640x2048xf32>
  func.return %y : tensor<640x2048xf32>
}
// CHECK-LABEL: func.func @main
// CHECK:       %[[COPY:.*]] = memref.alloc() : memref<1024x2048xf32, #mem<hbm>>
// The first block row: each block transposes its 512 columns of W (K tiles on partitions) and stores them.
// CHECK:       scf.for %[[N:.*]] = %c0 to %c2048 step %c512 {
// CHECK:         %[[STORED:.*]] = tile.view %[[COPY]] : memref<1024x2048xf32, #mem<hbm>> to memref<1537x128x8x512xf32, strided<[1024, 4096, 512, 1]>, #mem<hbm>>
// CHECK-NEXT:    tile.store %{{.*}}, %[[STORED]][%[[N]], %c0, %c0, %c0] : !tile.tile<128x8x512xf32, sbuf>, memref<1537x128x8x512xf32, strided<[1024, 4096, 512, 1]>, #mem<hbm>>
// The second block row (the last 128 rows) reads the copy's blocks in chunks of 4 K tiles.
// CHECK:       scf.for %[[M:.*]] = %c0 to %c2048 step %c512 {
// CHECK-NEXT:    %[[READ:.*]] = tile.view %[[COPY]] : memref<1024x2048xf32, #mem<hbm>> to memref<1537x128x8x512xf32, strided<[1024, 4096, 512, 1]>, #mem<hbm>>
// CHECK-NEXT:    tile.load %[[READ]][%[[M]], %c0, %c0, %c0] : memref<1537x128x8x512xf32, strided<[1024, 4096, 512, 1]>, #mem<hbm>> -> !tile.tile<128x4x512xf32, sbuf>
// CHECK:         tile.load %{{.*}}[%[[M]], %c0, %c4, %c0] : memref<1537x128x8x512xf32, strided<[1024, 4096, 512, 1]>, #mem<hbm>> -> !tile.tile<128x4x512xf32, sbuf>
