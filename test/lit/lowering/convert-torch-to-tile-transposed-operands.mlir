// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// An elementwise operand whose contiguous dimension lies on the partitions (whisper's stem: the convolution's
// [channels, positions] output permuted to [positions, channels] and added to the position embeddings) would
// load one element per descriptor. In fp32, which the DMA engines do not transpose, each tile is loaded as
// [128 columns, rows] blocks, contiguous runs per partition, transposed on TensorE and copied into the tile's
// columns (lowering/convert_torch_to_tile/elementwise.py, `transposes_on_chip`); the other operand and the
// store keep their plain tiles. A partial last block (768 = 6 x 128 here; 44 rows in the last row tile) is a
// narrower transpose.
// SEMANTICS: all outputs match
// SEMANTICS: all outputs match
// SEMANTICS: all outputs match
// SEMANTICS: all outputs match
// SEMANTICS: all outputs match
// SEMANTICS: all outputs match
// SEMANTICS: all outputs match

func.func @permuted_stem(%c: tensor<1x768x300xf32>, %pos: tensor<300x768xf32>) -> tensor<1x300x768xf32> {
  %p = torch.aten.permute %c {dims = array<i64: 0, 2, 1>} : (tensor<1x768x300xf32>) -> tensor<1x300x768xf32>
  %y = torch.aten.add.Tensor %p, %pos {alpha = 1 : i64} : (tensor<1x300x768xf32>, tensor<300x768xf32>) -> tensor<1x300x768xf32>
  func.return %y : tensor<1x300x768xf32>
}
// CHECK-LABEL: func.func @permuted_stem
// CHECK:       %[[P:.*]] = tile.view %{{.*}} to memref<300x768xf32, strided<[1, 300]>, #mem<hbm>>
// CHECK:       scf.for %[[R:.*]] = %c0 to %c256 step %c128 {
// CHECK-NEXT:    %[[WHOLE:.*]] = tile.empty : !tile.tile<128x768xf32, sbuf>
// CHECK-NEXT:    %[[ROWS:.*]] = tile.load %[[P]][%[[R]], %c0] {dims = array<i64: 1, 0>} : memref<300x768xf32, strided<[1, 300]>, #mem<hbm>> -> !tile.tile<128x128xf32, sbuf>
// CHECK-NEXT:    %[[BLOCK:.*]] = tile.transpose %[[ROWS]] : !tile.tile<128x128xf32, sbuf> -> !tile.tile<128x128xf32, psum>
// CHECK-NEXT:    %[[FIRST:.*]] = tile.insert %[[BLOCK]], %[[WHOLE]][%c0] : !tile.tile<128x128xf32, psum>, !tile.tile<128x768xf32, sbuf>
// CHECK-NEXT:    tile.load %[[P]][%[[R]], %c128] {dims = array<i64: 1, 0>}
// CHECK-NEXT:    tile.transpose
// CHECK-NEXT:    tile.insert %{{.*}}, %[[FIRST]][%c128]
// CHECK:         %[[LAST:.*]] = tile.insert %{{.*}}[%c640] : !tile.tile<128x128xf32, psum>, !tile.tile<128x768xf32, sbuf>
// CHECK-NEXT:    %[[POS:.*]] = tile.load %{{.*}}[%[[R]], %c0] : memref<300x768xf32, #mem<hbm>> -> !tile.tile<128x768xf32, sbuf>
// CHECK-NEXT:    tile.binary %[[LAST]], %[[POS]] {op = "add"}
// CHECK:       tile.load %[[P]][%c256, %c0] {dims = array<i64: 1, 0>} : memref<300x768xf32, strided<[1, 300]>, #mem<hbm>> -> !tile.tile<128x44xf32, sbuf>
// CHECK-NEXT:  tile.transpose %{{.*}} : !tile.tile<128x44xf32, sbuf> -> !tile.tile<44x128xf32, psum>
// CHECK-NOT:   tile.load %[[P]][%{{.*}}, %c0] : memref<300x768xf32, strided<[1, 300]>

// -----

// In bf16 the plain tile stays one load, which convert-tile-to-neuron makes a DMA transpose (faster by the cost
// model than six blocks through TensorE).
func.func @permuted_stem_bf16(%c: tensor<1x768x300xbf16>, %pos: tensor<300x768xbf16>) -> tensor<1x300x768xbf16> {
  %p = torch.aten.permute %c {dims = array<i64: 0, 2, 1>} : (tensor<1x768x300xbf16>) -> tensor<1x300x768xbf16>
  %y = torch.aten.add.Tensor %p, %pos {alpha = 1 : i64} : (tensor<1x300x768xbf16>, tensor<300x768xbf16>) -> tensor<1x300x768xbf16>
  func.return %y : tensor<1x300x768xbf16>
}
// CHECK-LABEL: func.func @permuted_stem_bf16
// CHECK-NOT:   tile.transpose
// CHECK:       tile.load %{{.*}} : memref<300x768xbf16, strided<[1, 300]>, #mem<hbm>> -> !tile.tile<128x768xbf16, sbuf>
// CHECK-NOT:   tile.transpose
// CHECK:       func.return

// -----

// A free axis narrower than NARROW_FREE would gather the batch into wider tiles ([128, 2, 200]), which would load
// the permuted operand one element per descriptor again: the nest keeps the plain [rows, 200] tiles instead, the
// permuted operand in a block of 128 columns and one of 72.
func.func @permuted_narrow(%c: tensor<2x200x130xf32>, %pos: tensor<130x200xf32>) -> tensor<2x130x200xf32> {
  %p = torch.aten.permute %c {dims = array<i64: 0, 2, 1>} : (tensor<2x200x130xf32>) -> tensor<2x130x200xf32>
  %y = torch.aten.add.Tensor %p, %pos {alpha = 1 : i64} : (tensor<2x130x200xf32>, tensor<130x200xf32>) -> tensor<2x130x200xf32>
  func.return %y : tensor<2x130x200xf32>
}
// CHECK-LABEL: func.func @permuted_narrow
// CHECK:       scf.for %[[B:.*]] = %c0 to %c2 step %c1 {
// CHECK:         tile.load %{{.*}}[%[[B]], %c0, %c0] {dims = array<i64: 2, 1>} : memref<2x130x200xf32, strided<[26000, 1, 130]>, #mem<hbm>> -> !tile.tile<128x128xf32, sbuf>
// CHECK:         tile.load %{{.*}}[%[[B]], %c0, %c128] {dims = array<i64: 2, 1>} : memref<2x130x200xf32, strided<[26000, 1, 130]>, #mem<hbm>> -> !tile.tile<72x128xf32, sbuf>
// CHECK-NEXT:    tile.transpose %{{.*}} : !tile.tile<72x128xf32, sbuf> -> !tile.tile<128x72xf32, psum>
// CHECK:         tile.store %{{.*}} : !tile.tile<128x200xf32, sbuf>, memref<2x130x200xf32, #mem<hbm>>

// -----

// A layer norm over a permuted map's channels (ConvNeXt's [N, C, H, W] output normalized as [N, H, W, C]): the
// normalized dimension strided, the rows contiguous. Its rows are first copied contiguous, by the elementwise
// nest above (each [rows, 96] tile one transposed block), and the layer norm's row loads read the copy
// (`contiguous_if_transposed` of lowering/convert_torch_to_tile/elementwise.py).
func.func @layer_norm_of_permuted_channels(%c: tensor<2x96x16x16xf32>, %w: tensor<96xf32>, %b: tensor<96xf32>) -> (tensor<2x16x16x96xf32>, tensor<2x16x16x1xf32>, tensor<2x16x16x1xf32>) {
  %p = torch.aten.permute %c {dims = array<i64: 0, 2, 3, 1>} : (tensor<2x96x16x16xf32>) -> tensor<2x16x16x96xf32>
  %y:3 = torch.aten.native_layer_norm %p, %w, %b {normalized_shape = array<i64: 96>, eps = 1.0e-06 : f64} : (tensor<2x16x16x96xf32>, tensor<96xf32>, tensor<96xf32>) -> (tensor<2x16x16x96xf32>, tensor<2x16x16x1xf32>, tensor<2x16x16x1xf32>)
  func.return %y#0, %y#1, %y#2 : tensor<2x16x16x96xf32>, tensor<2x16x16x1xf32>, tensor<2x16x16x1xf32>
}
// CHECK-LABEL: func.func @layer_norm_of_permuted_channels
// CHECK:       %[[COPY:.*]] = memref.alloc() : memref<2x16x16x96xf32, #mem<hbm>>
// CHECK:       tile.load %{{.*}} {dims = array<i64: 2, 1>} : memref<2x256x96xf32, strided<[24576, 1, 256]>, #mem<hbm>> -> !tile.tile<96x128xf32, sbuf>
// CHECK-NEXT:  tile.transpose %{{.*}} : !tile.tile<96x128xf32, sbuf> -> !tile.tile<128x96xf32, psum>
// CHECK:       %[[ROWS:.*]] = tile.view %[[COPY]] : memref<2x16x16x96xf32, #mem<hbm>> to memref<512x96xf32, #mem<hbm>>
// CHECK-NOT:   strided<[24576, 1, 256]>
// CHECK:       tile.load %{{.*}} : memref<512x1x96xf32, #mem<hbm>> -> !tile.tile<128x1x96xf32, sbuf>
// CHECK:       func.return

// -----

// A depthwise convolution of a channels-last map seen as [N, C, H, W] (ConvNeXt's blocks, whose gradient comes
// back permuted from the layer norm): its channels lie on partitions and its rows along them, so the map is first
// copied contiguous, [C, H W] tiles transposed on chip, and the padded input is made from the copy.
func.func @depthwise_of_channels_last(%x: tensor<1x14x14x192xf32>, %w: tensor<192x1x7x7xf32>) -> tensor<1x192x14x14xf32> {
  %p = torch.aten.permute %x {dims = array<i64: 0, 3, 1, 2>} : (tensor<1x14x14x192xf32>) -> tensor<1x192x14x14xf32>
  %y = torch.aten.convolution %p, %w, none {stride = array<i64: 1, 1>, padding = array<i64: 3, 3>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 192 : i64} : (tensor<1x192x14x14xf32>, tensor<192x1x7x7xf32>) -> tensor<1x192x14x14xf32>
  func.return %y : tensor<1x192x14x14xf32>
}
// CHECK-LABEL: func.func @depthwise_of_channels_last
// CHECK:       %[[COPY:.*]] = memref.alloc() : memref<1x192x14x14xf32, #mem<hbm>>
// CHECK:       tile.load %{{.*}} {dims = array<i64: 1, 0>} : memref<192x196xf32, strided<[1, 192]>, #mem<hbm>> -> !tile.tile<128x128xf32, sbuf>
// CHECK-NEXT:  tile.transpose %{{.*}} : !tile.tile<128x128xf32, sbuf> -> !tile.tile<128x128xf32, psum>
// CHECK:       tile.load %{{.*}}[%c128, %c128] {dims = array<i64: 1, 0>} : memref<192x196xf32, strided<[1, 192]>, #mem<hbm>> -> !tile.tile<68x64xf32, sbuf>
// CHECK-NOT:   strided<[1, 192]>
// CHECK-NOT:   strided<[37632, 1, 2688, 192]>
// CHECK:       func.return

// -----

// ConvNeXt's downsampling reads the channels-first layer norm's output, a channels-last map seen as
// [N, C, H, W]: every convolution path reads whole rows of a map's channels, so the input is copied contiguous
// first, its [C, H W] tiles transposed on chip.
func.func @downsampling_of_channels_last(%x: tensor<2x12x12x96xf32>, %w: tensor<192x96x2x2xf32>) -> tensor<2x192x6x6xf32> {
  %p = torch.aten.permute %x {dims = array<i64: 0, 3, 1, 2>} : (tensor<2x12x12x96xf32>) -> tensor<2x96x12x12xf32>
  %y = torch.aten.convolution %p, %w, none {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<2x96x12x12xf32>, tensor<192x96x2x2xf32>) -> tensor<2x192x6x6xf32>
  func.return %y : tensor<2x192x6x6xf32>
}
// CHECK-LABEL: func.func @downsampling_of_channels_last
// CHECK:       memref.alloc() : memref<2x96x12x12xf32, #mem<hbm>>
// CHECK:       tile.load %{{.*}} {dims = array<i64: 2, 1>} : memref<2x96x144xf32, strided<[13824, 1, 96]>, #mem<hbm>> -> !tile.tile<128x96xf32, sbuf>
// CHECK-NEXT:  tile.transpose %{{.*}} : !tile.tile<128x96xf32, sbuf> -> !tile.tile<96x128xf32, psum>
// CHECK:       tile.load %{{.*}} {dims = array<i64: 2, 1>} : memref<2x96x144xf32, strided<[13824, 1, 96]>, #mem<hbm>> -> !tile.tile<16x96xf32, sbuf>
// CHECK-NOT:   strided<[13824, 1, 96]>
// CHECK-NOT:   strided<[13824, 1, 1152, 96]>
// CHECK:       func.return

// -----

// A stem whose gradient comes back channels-last (ConvNeXt's, from its channels-first layer norm): the weight
// gradient that contracts output rows loads the gradient's rows with channels on partitions, so it reads a
// contiguous copy.
func.func @stem_weight_gradient_of_channels_last(%go: tensor<2x16x16x96xf32>, %x: tensor<2x3x64x64xf32>, %w: tensor<96x3x4x4xf32>) -> (tensor<96x3x4x4xf32>, tensor<96xf32>) {
  %p = torch.aten.permute %go {dims = array<i64: 0, 3, 1, 2>} : (tensor<2x16x16x96xf32>) -> tensor<2x96x16x16xf32>
  %gi, %gw, %gb = torch.aten.convolution_backward %p, %x, %w {bias_sizes = array<i64: 96>, stride = array<i64: 4, 4>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: false, true, true>} : (tensor<2x96x16x16xf32>, tensor<2x3x64x64xf32>, tensor<96x3x4x4xf32>) -> (none, tensor<96x3x4x4xf32>, tensor<96xf32>)
  func.return %gw, %gb : tensor<96x3x4x4xf32>, tensor<96xf32>
}
// CHECK-LABEL: func.func @stem_weight_gradient_of_channels_last
// CHECK:       %[[COPY:.*]] = memref.alloc() : memref<2x96x16x16xf32, #mem<hbm>>
// CHECK:       tile.load %{{.*}} {dims = array<i64: 2, 1>} : memref<2x96x256xf32, strided<[24576, 1, 96]>, #mem<hbm>> -> !tile.tile<128x96xf32, sbuf>
// CHECK-NEXT:  tile.transpose %{{.*}} : !tile.tile<128x96xf32, sbuf> -> !tile.tile<96x128xf32, psum>
// CHECK:       %[[GW:.*]] = memref.alloc() : memref<96x3x4x4xf32, #mem<hbm>>
// CHECK:       tile.view %[[COPY]]
// CHECK:       func.return
