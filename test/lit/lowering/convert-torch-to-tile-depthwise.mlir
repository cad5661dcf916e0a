// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Depthwise convolutions (convolution.py, emit_depthwise_convolution): the channels share the partitions and each
// kernel offset is one matmul whose stationary is diag(w[:, k]), built once per channel tile from an iota mask.

// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x6x7xf32>, %w: tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 3 : i64} : (tensor<1x3x6x7xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32>
  func.return %0 : tensor<1x3x6x7xf32>
}
// the filters as [channels, taps] columns, and the identity mask p - j == 0
// CHECK:       tile.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<3x9xf32, #mem<hbm>> -> !tile.tile<3x9xf32, sbuf>
// CHECK:       tile.iota {steps = array<i64: -1>, channel_multiplier = 1 : i64} : !tile.tile<3x3xf32, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 0.000000e+00 : f64}
// one diagonal per tap, inserted into a [channels, taps, channels] tile
// CHECK:       scf.for
// CHECK:         tile.binary_scalar %{{.*}} column %{{.*}} {op = "multiply"} : (!tile.tile<3x3xf32, sbuf>, !tile.tile<3x1xf32, sbuf>) -> !tile.tile<3x3xf32, sbuf>
// CHECK:         tile.insert %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : !tile.tile<3x3xf32, sbuf>, !tile.tile<3x9x3xf32, sbuf>
// the padded band is loaded once; every tap reads a window of it
// CHECK:       tile.load %{{.*}} : memref<1x3x8x9xf32, #mem<hbm>> -> !tile.tile<3x8x9xf32, sbuf>
// CHECK:       tile.extract %{{.*}}[%{{.*}}, %{{.*}}] : !tile.tile<3x9x3xf32, sbuf> -> !tile.tile<3x3xf32, sbuf>
// CHECK:       tile.extract %{{.*}}[%{{.*}}, %{{.*}}] : !tile.tile<3x8x9xf32, sbuf> -> !tile.tile<3x6x7xf32, sbuf>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<3x3xf32, sbuf>, !tile.tile<3x6x7xf32, sbuf>) -> !tile.tile<3x42xf32, psum>

// -----

// Its backward: the input gradient is the depthwise convolution with the filters flipped (a transposed
// convolution's), the weight gradient a per-channel dot product per tap, reduced along the free axes.
// CHECK-LABEL: func.func @main
func.func @main(%go: tensor<1x3x6x7xf32>, %x: tensor<1x3x6x7xf32>, %w: tensor<3x1x3x3xf32>) -> (tensor<1x3x6x7xf32>, tensor<3x1x3x3xf32>) {
  %gi, %gw, %gb = torch.aten.convolution_backward %go, %x, %w {bias_sizes = array<i64: 0>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 3 : i64, output_mask = array<i1: true, true, false>} : (tensor<1x3x6x7xf32>, tensor<1x3x6x7xf32>, tensor<3x1x3x3xf32>) -> (tensor<1x3x6x7xf32>, tensor<3x1x3x3xf32>, none)
  func.return %gi, %gw : tensor<1x3x6x7xf32>, tensor<3x1x3x3xf32>
}
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<3x3xf32, sbuf>, !tile.tile<3x6x7xf32, sbuf>) -> !tile.tile<3x42xf32, psum>
// CHECK:       tile.binary %{{.*}}, %{{.*}} {op = "multiply"} : (!tile.tile<3x6x7xf32, sbuf>, !tile.tile<3x6x7xf32, sbuf>) -> !tile.tile<3x6x7xf32, sbuf>
// CHECK:       tile.reduce %{{.*}} {op = "add", axes = 2 : i64} : (!tile.tile<3x6x7xf32, sbuf>) -> !tile.tile<3x1xf32, sbuf>

// SEMANTICS-COUNT-2: check-semantics: {{[0-9]+}} inputs, all outputs match
