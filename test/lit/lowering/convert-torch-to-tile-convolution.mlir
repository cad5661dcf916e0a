// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Strided convolutions (convolution.py, emit_banded_convolution): each output tile loads the band of input rows
// its positions read, channels on partitions, and each kernel tap reads a strided window of it in place. The
// weight's [ci, co] stationaries are transposed on chip from its rows, once per output-channel tile.

// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x40x9x11xf32>, %w: tensor<7x40x3x3xf32>) -> tensor<1x7x4x5xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x40x9x11xf32>, tensor<7x40x3x3xf32>) -> tensor<1x7x4x5xf32>
  func.return %0 : tensor<1x7x4x5xf32>
}
// the weight rows, and one [ci, co] block per tap: every 9th element from the tap on, transposed into the panel
// CHECK:       tile.load %{{.*}} : memref<7x360xf32, #mem<hbm>> -> !tile.tile<7x360xf32, sbuf>
// CHECK:       tile.extract %{{.*}}[%{{.*}}] {steps = array<i64: 9>} : !tile.tile<7x360xf32, sbuf> -> !tile.tile<7x40xf32, sbuf>
// CHECK:       tile.transpose %{{.*}} : !tile.tile<7x40xf32, sbuf> -> !tile.tile<40x7xf32, psum>
// the band: all 9 rows of 11 (positions 0..3 and 0..4 at stride 2 with a 3 x 3 kernel), loaded once
// CHECK:       tile.load %x[%c0, %c0, %c0, %c0] : memref<1x40x9x11xf32, #mem<hbm>> -> !tile.tile<40x9x11xf32, sbuf>
// CHECK:       tile.extract %{{.*}}[%c0, %c0] {steps = array<i64: 2, 2>} : !tile.tile<40x9x11xf32, sbuf> -> !tile.tile<40x4x5xf32, sbuf>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<40x7xf32, sbuf>, !tile.tile<40x4x5xf32, sbuf>) -> !tile.tile<7x20xf32, psum>
// CHECK-NOT:   memref<1x40x3x3x4x5xf32

// -----

// Few input channels (an RGB patch embedding): the input rows of each (channel, kernel row) pair are copied so
// that the pairs are one partition dim, and the convolution is one of a 1 x KW kernel over C * KH channels.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<2x3x8x12xf32>, %w: tensor<6x3x4x4xf32>, %b: tensor<6xf32>) -> tensor<2x6x2x3xf32> {
  %0 = torch.aten.convolution %x, %w, %b {stride = array<i64: 4, 4>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<2x3x8x12xf32>, tensor<6x3x4x4xf32>, tensor<6xf32>) -> tensor<2x6x2x3xf32>
  func.return %0 : tensor<2x6x2x3xf32>
}
// the rows: per output row (on partitions) its [kernel rows, width] block of each channel, whole rows read; so
// few output rows take one transfer per channel (each on its own DMA queue)
// CHECK:       tile.load %{{.*}}[%{{.*}}, %c0, %c0, %c0, %c0] {dims = array<i64: 1, 3, 4>} : memref<2x2x3x4x12xf32, strided<[288, 48, 96, 12, 1]>, #mem<hbm>> -> !tile.tile<2x4x12xf32, sbuf>
// CHECK:       tile.store %{{.*}}, %{{.*}}[%{{.*}}, %c0, %c0, %c0, %c0] {dims = array<i64: 1, 3, 4>} : !tile.tile<2x4x12xf32, sbuf>, memref<2x2x3x4x12xf32, #mem<hbm>>
// CHECK:       tile.load %{{.*}}[%{{.*}}, %c0, %c2, %c0, %c0] {dims = array<i64: 1, 3, 4>}
// 12 = 3 channels x 4 kernel rows contracted per matmul, one matmul per kernel column
// CHECK:       tile.load %{{.*}} : memref<2x12x2x12xf32, strided<[288, 12, 144, 1]>, #mem<hbm>> -> !tile.tile<12x2x12xf32, sbuf>
// CHECK:       tile.extract %{{.*}}[%c0, %c0] {steps = array<i64: 1, 4>} : !tile.tile<12x2x12xf32, sbuf> -> !tile.tile<12x2x3xf32, sbuf>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<12x6xf32, sbuf>, !tile.tile<12x2x3xf32, sbuf>) -> !tile.tile<6x6xf32, psum>

// -----

// The backward of a strided convolution: the input gradient is split by residue modulo the stride (each residue
// a stride-1 convolution of grad_output with the taps that reach it, shifted windows of grad_output padded by one
// position), each phase's rows inserted into a tile of whole input rows with the stride as step; the weight
// gradient transposes grad_output and the taps' strided windows once each into panels with positions on the
// partitions (emitted before the input gradient), then one matmul per position tile accumulates every [co, 512]
// block (emitted after it). Both read grad_output from one copy on chip, its padding written there.
// CHECK-LABEL: func.func @main
func.func @main(%go: tensor<1x7x4x5xf32>, %x: tensor<1x40x9x11xf32>, %w: tensor<7x40x3x3xf32>) -> (tensor<1x40x9x11xf32>, tensor<7x40x3x3xf32>) {
  %gi, %gw, %gb = torch.aten.convolution_backward %go, %x, %w {bias_sizes = array<i64: 0>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: true, true, false>} : (tensor<1x7x4x5xf32>, tensor<1x40x9x11xf32>, tensor<7x40x3x3xf32>) -> (tensor<1x40x9x11xf32>, tensor<7x40x3x3xf32>, none)
  func.return %gi, %gw : tensor<1x40x9x11xf32>, tensor<7x40x3x3xf32>
}
// grad_output loaded once into a zero tile with the margin the input gradient's phases read
// CHECK:       tile.fill {value = 0.000000e+00 : f64} : !tile.tile<7x1x6x7xf32, sbuf>
// CHECK-NEXT:  tile.load %go[%c0, %c0, %c0, %c0] : memref<1x7x4x5xf32, #mem<hbm>> -> !tile.tile<7x4x5xf32, sbuf>
// CHECK-NEXT:  tile.insert %{{.*}}, %{{.*}}[%c0, %c1, %c1] : !tile.tile<7x4x5xf32, sbuf>, !tile.tile<7x1x6x7xf32, sbuf>
// CHECK-NOT:   tile.load %go
// the weight gradient first: each operand transposed once into its panel
// CHECK:       tile.load %x[%c0, %c0, %c0, %c0] : memref<1x40x9x11xf32, #mem<hbm>> -> !tile.tile<40x9x11xf32, sbuf>
// CHECK:       tile.transpose %{{.*}} : !tile.tile<7x4x5xf32, sbuf> -> !tile.tile<20x7xf32, psum>
// CHECK:       tile.extract %{{.*}}[%c0, %c0] {steps = array<i64: 2, 2>} : !tile.tile<40x9x11xf32, sbuf> -> !tile.tile<40x4x5xf32, sbuf>
// CHECK:       tile.transpose %{{.*}} : !tile.tile<40x4x5xf32, sbuf> -> !tile.tile<20x40xf32, psum>
// CHECK:       tile.insert %{{.*}}, %{{.*}}[%c0, %c0] {steps = array<i64: 9>} : !tile.tile<20x40xf32, psum>, !tile.tile<20x1x360xf32, sbuf>
// then the input gradient; the weight's rows as they are: tap k's [co, c] stationary is every 9th element from k
// CHECK:       tile.load %{{.*}}[%c0, %c0] : memref<7x360xf32, #mem<hbm>> -> !tile.tile<7x360xf32, sbuf>
// grad_output's padded rows: the image's window of the copy on chip
// CHECK:       tile.extract %{{.*}}[%c0, %c0, %c0] : !tile.tile<7x1x6x7xf32, sbuf> -> !tile.tile<7x6x7xf32, sbuf>
// residue (0, 0): taps 0 and 2 along each dim, four products into one PSUM tile of 5 x 6 positions
// CHECK:       tile.extract %{{.*}}[%c0] {steps = array<i64: 9>} : !tile.tile<7x360xf32, sbuf> -> !tile.tile<7x40xf32, sbuf>
// CHECK:       tile.extract %{{.*}}[%c1, %c1] : !tile.tile<7x6x7xf32, sbuf> -> !tile.tile<7x5x6xf32, sbuf>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<7x40xf32, sbuf>, !tile.tile<7x5x6xf32, sbuf>) -> !tile.tile<40x30xf32, psum>
// CHECK-COUNT-3: tile.matmul %{{.*}}, %{{.*}} acc %{{.*}} : (!tile.tile<7x40xf32, sbuf>, !tile.tile<7x5x6xf32, sbuf>, !tile.tile<40x30xf32, psum>) -> !tile.tile<40x30xf32, psum>
// the phase's 5 rows of 6 leave PSUM in one copy, every second input row and column from the residue
// CHECK-NEXT:  tile.insert %{{.*}}, %{{.*}}[%c0, %c0] {steps = array<i64: 2, 2>, window = array<i64: 5, 6>} : !tile.tile<40x30xf32, psum>, !tile.tile<40x9x11xf32, sbuf>
// CHECK:       tile.store %{{.*}}, %{{.*}}[%c0, %c0, %c0, %c0] {dims = array<i64: 1, 2, 3>} : !tile.tile<40x9x11xf32, sbuf>, memref<1x40x9x11xf32, #mem<hbm>>
// the weight gradient's products last
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<20x7xf32, sbuf>, !tile.tile<20x360xf32, sbuf>) -> !tile.tile<7x360xf32, psum>
// CHECK:       tile.store %{{.*}}, %{{.*}}[%c0, %c0] : !tile.tile<7x360xf32, sbuf>, memref<7x360xf32, #mem<hbm>>

// SEMANTICS-COUNT-3: check-semantics: {{[0-9]+}} inputs, all outputs match
