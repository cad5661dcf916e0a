// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// The structural lowerings (convolution.py, pooling.py, indexing.py, movement.py, distance.py, matmul.py): one
// case per branch, each also checked by execution against the torch-level semantics on random inputs.

// Padded, strided, grouped 2-d convolution with a bias: the input is zero-padded once into a fresh tensor (each
// row written whole with the zeros beside it built on chip, rows on the partitions for so few channels; the rows
// above and below filled alone), groups are a loop, each group's [ci, co] stationaries are transposed on chip
// from the weight's rows, each output tile loads its input band once and every kernel offset reads a strided
// window of it; PSUM accumulates over kernel offsets and the bias joins as a per-partition column when PSUM is
// evacuated.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x4x7x9xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) -> tensor<1x6x4x5xf32> {
  %0 = torch.aten.convolution %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 2 : i64} : (tensor<1x4x7x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x5xf32>
  func.return %0 : tensor<1x6x4x5xf32>
}
// CHECK:       memref.alloc() : memref<1x4x9x11xf32, #mem<hbm>>
// CHECK:       tile.load %x[%c0, %{{.*}}, %c0, %c0] : memref<1x4x7x9xf32, #mem<hbm>> -> !tile.tile<7x9xf32, sbuf>
// CHECK-NEXT:  tile.fill {value = 0.000000e+00 : f64} : !tile.tile<7x11xf32, sbuf>
// CHECK-NEXT:  tile.insert %{{.*}}, %{{.*}}[%c1] : !tile.tile<7x9xf32, sbuf>, !tile.tile<7x11xf32, sbuf>
// CHECK:       tile.fill {value = 0.000000e+00 : f64} : !tile.tile<4x11xf32, sbuf>
// CHECK:       scf.for
// CHECK:         tile.load %{{.*}} : memref<6x18xf32, #mem<hbm>> -> !tile.tile<3x18xf32, sbuf>
// CHECK:         tile.transpose %{{.*}} : !tile.tile<3x2xf32, sbuf> -> !tile.tile<2x3xf32, psum>
// CHECK:         tile.load %{{.*}} : memref<1x4x9x11xf32, #mem<hbm>> -> !tile.tile<2x9x11xf32, sbuf>
// CHECK:         tile.extract %{{.*}}[%c0, %c0] {steps = array<i64: 2, 2>} : !tile.tile<2x9x11xf32, sbuf> -> !tile.tile<2x4x5xf32, sbuf>
// CHECK:         tile.matmul
// CHECK:         scf.for {{.*}} iter_args
// CHECK:           scf.for {{.*}} iter_args
// CHECK:             tile.matmul %{{.*}}, %{{.*}} acc
// CHECK:         tile.binary_scalar %{{.*}} column %{{.*}} {op = "add"}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Rows longer than one PSUM bank: the output is tiled by 512 columns instead of merging whole rows; no padding,
// no bias: PSUM is copied out.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<3x1x600xf32>, %w: tensor<2x1x3xf32>) -> tensor<3x2x598xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 1>, transposed = false, output_padding = array<i64: 0>, groups = 1 : i64} : (tensor<3x1x600xf32>, tensor<2x1x3xf32>) -> tensor<3x2x598xf32>
  func.return %0 : tensor<3x2x598xf32>
}
// CHECK-NOT:   tile.fill
// CHECK:       tile.matmul {{.*}} -> !tile.tile<2x512xf32, psum>
// CHECK:       tile.copy {{.*}}!tile.tile<2x512xf32, psum>
// CHECK:       tile.matmul {{.*}} -> !tile.tile<2x86xf32, psum>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// A transposed convolution: zeros inserted between input elements (each tile of whole rows spread on chip by a
// strided insert into a zero tile, then stored as whole rows) and the flipped, channel-swapped weight make it a
// stride-1 direct convolution; its stationaries are windows of the weight's rows as they are, the flipped tap's
// every 9th element.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x2x3x4xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<1x3x5x7xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = true, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x2x3x4xf32>, tensor<2x3x3x3xf32>) -> tensor<1x3x5x7xf32>
  func.return %0 : tensor<1x3x5x7xf32>
}
// CHECK:       memref.alloc() : memref<1x2x7x9xf32, #mem<hbm>>
// CHECK:       tile.insert %{{.*}}, %{{.*}}[%c0, %c0] {steps = array<i64: 2, 2>} : !tile.tile<2x3x4xf32, sbuf>, !tile.tile<2x5x7xf32, sbuf>
// CHECK:       tile.store %{{.*}}, %{{.*}}[%c0, %c0, %c1, %c1] {dims = array<i64: 1, 2, 3>} : !tile.tile<2x5x7xf32, sbuf>, memref<1x2x7x9xf32, #mem<hbm>>
// CHECK:       tile.extract %{{.*}}[%c0, %c8] {steps = array<i64: 9>} : !tile.tile<2x1x27xf32, sbuf> -> !tile.tile<2x3xf32, sbuf>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<2x3xf32, sbuf>, !tile.tile<2x5x7xf32, sbuf>) -> !tile.tile<3x35xf32, psum>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// convolution_backward: grad_weight contracts over positions on the partition axis, grad_output blocks transposed
// on chip first and the input's tap windows put there by selector matmuls, all taps into one PSUM tile (here on
// the kernel-row packed input of the forward: 2 channels x 3 kernel rows, 3 kernel columns: 18 columns), its
// products after grad_input; grad_input per residue modulo the stride
// (each a stride-1 convolution of grad_output, zero-padded by one position on chip, with the taps that reach it);
// the bias gradient is masked out and stays undefined.
// CHECK-LABEL: func.func @main
func.func @main(%g: tensor<1x3x2x2xf32>, %x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) {
  %0, %1, %2 = torch.aten.convolution_backward %g, %x, %w {bias_sizes = array<i64: 0>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: true, true, false>} : (tensor<1x3x2x2xf32>, tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, none)
  func.return %0, %1 : tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>
}
// CHECK:       tile.fill {value = 0.000000e+00 : f64} : !tile.tile<3x1x4x4xf32, sbuf>
// CHECK-NEXT:  tile.load %g[%c0, %c0, %c0, %c0] : memref<1x3x2x2xf32, #mem<hbm>> -> !tile.tile<3x2x2xf32, sbuf>
// CHECK:       memref.alloc() : memref<1x2x2x3x5xf32, #mem<hbm>>
// CHECK:       tile.iota {steps = array<i64: 1>, base = -2 : i64, channel_multiplier = -3 : i64} : !tile.tile<6x18xf32, sbuf>
// CHECK:       tile.transpose %{{.*}} : !tile.tile<3x2x2xf32, sbuf> -> !tile.tile<4x3xf32, psum>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<6x2x2xf32, sbuf>, !tile.tile<6x18xf32, sbuf>) -> !tile.tile<4x18xf32, psum>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} acc %{{.*}} : (!tile.tile<6x2x2xf32, sbuf>, !tile.tile<6x18xf32, sbuf>, !tile.tile<4x18xf32, psum>) -> !tile.tile<4x18xf32, psum>
// CHECK:       tile.view %{{.*}} : memref<3x6x1x3xf32, #mem<hbm>> to memref<3x2x3x3xf32, #mem<hbm>>
// CHECK-NOT:   memref.alloc() : memref<1x3x4x4xf32, #mem<hbm>>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<3x2xf32, sbuf>, !tile.tile<3x3x3xf32, sbuf>) -> !tile.tile<2x9xf32, psum>
// CHECK:       tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<4x3xf32, sbuf>, !tile.tile<4x18xf32, sbuf>) -> !tile.tile<3x18xf32, psum>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Average pooling that excludes the padding: the counts per position come from pooling a plane of ones.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x7x7xf32>) -> tensor<1x3x4x4xf32> {
  %0 = torch.aten.avg_pool2d %x {kernel_size = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, count_include_pad = false} : (tensor<1x3x7x7xf32>) -> tensor<1x3x4x4xf32>
  func.return %0 : tensor<1x3x4x4xf32>
}
// CHECK:       memref.alloc() : memref<1x9x9xf32, #mem<hbm>>
// CHECK:       tile.fill {value = 1.000000e+00 : f64}
// CHECK:       tile.unary %{{.*}} {fn = "reciprocal"}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Without padding every window counts the kernel volume: one immediate scale, no count plane.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x6x6xf32>) -> tensor<1x3x3x3xf32> {
  %0 = torch.aten.avg_pool2d %x {kernel_size = array<i64: 2, 2>} : (tensor<1x3x6x6xf32>) -> tensor<1x3x3x3xf32>
  func.return %0 : tensor<1x3x3x3xf32>
}
// CHECK-NOT:   tile.unary
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 2.500000e-01 : f64}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Max pooling with indices over a row band (pooling_bands.py): the planes' rows loaded once into SBUF, each
// kernel column's taps a strided window of the band, then each kernel row's a strided window of the column
// maxima; a strict `>` keeps the first maximum, the winning column offset and then row displacement are carried
// alongside and added to an iota map of window origins.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x6x5xf32>) -> (tensor<1x3x3x2xf32>, tensor<1x3x3x2xi64>) {
  %0, %1 = torch.aten.max_pool2d_with_indices %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>} : (tensor<1x3x6x5xf32>) -> (tensor<1x3x3x2xf32>, tensor<1x3x3x2xi64>)
  func.return %0, %1 : tensor<1x3x3x2xf32>, tensor<1x3x3x2xi64>
}
// CHECK:       tile.load %{{.*}} -> !tile.tile<3x6x5xf32, sbuf>
// CHECK:       tile.extract %{{.*}}[%c0, %c1] {steps = array<i64: 1, 2>} : !tile.tile<3x6x5xf32, sbuf> -> !tile.tile<3x6x2xf32, sbuf>
// CHECK:       tile.binary %{{.*}}, %{{.*}} {op = "is_gt"}
// CHECK:       tile.binary %{{.*}}, %{{.*}} {op = "max"}
// CHECK:       tile.extract %{{.*}}[%c1, %c0] {steps = array<i64: 2, 1>} : !tile.tile<3x6x2xf32, sbuf> -> !tile.tile<3x3x2xf32, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} {op = "add", scalar = 5.000000e+00 : f64}
// CHECK:       tile.select
// CHECK:       tile.iota {steps = array<i64: 10, 2>} : !tile.tile<3x3x2xf32, sbuf>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Max-pool backward over row bands: per kernel tap, grad_output where the saved index minus the window origin is
// the tap's displacement, shifted into its stride phase and summed there; no scatter.
// (The indices come from the forward op so that the execution check sees valid ones.)
// CHECK-LABEL: func.func @main
func.func @main(%g: tensor<1x3x3x4xf32>, %x: tensor<1x3x4x5xf32>) -> tensor<1x3x4x5xf32> {
  %v, %i = torch.aten.max_pool2d_with_indices %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 1, 1>} : (tensor<1x3x4x5xf32>) -> (tensor<1x3x3x4xf32>, tensor<1x3x3x4xi64>)
  %0 = torch.aten.max_pool2d_with_indices_backward %g, %x, %i {kernel_size = array<i64: 2, 2>, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x3x3x4xf32>, tensor<1x3x4x5xf32>, tensor<1x3x3x4xi64>) -> tensor<1x3x4x5xf32>
  func.return %0 : tensor<1x3x4x5xf32>
}
// CHECK:       tile.load %{{.*}} -> !tile.tile<3x3x4xf32, sbuf>
// CHECK:       tile.iota {steps = array<i64: 5, 1>} : !tile.tile<3x3x4xf32, sbuf>
// CHECK:       tile.binary %{{.*}}, %{{.*}} {op = "subtract"} : (!tile.tile<3x3x4xf32, sbuf>, !tile.tile<3x3x4xf32, sbuf>) -> !tile.tile<3x3x4xbf16, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 6.000000e+00 : f64}
// CHECK:       tile.select
// CHECK:       tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 0.000000e+00 : f64}
// CHECK-NOT:   tile.scatter
// CHECK:       tile.store %{{.*}} : !tile.tile<3x4x5xf32, sbuf>, memref<3x4x5xf32, #mem<hbm>>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Adaptive pooling whose sizes do not divide: one reduction per output position over its own window.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x5x7xf32>) -> tensor<1x3x2x3xf32> {
  %0 = torch.aten._adaptive_avg_pool2d %x {output_size = array<i64: 2, 3>} : (tensor<1x3x5x7xf32>) -> tensor<1x3x2x3xf32>
  func.return %0 : tensor<1x3x2x3xf32>
}
// CHECK:       tile.reduce %{{.*}} {op = "add", axes = 2 : i64} : (!tile.tile<3x3x3xf32, sbuf>)
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// cat writes each input into its slice of the output; flip is a negative-stride view; a pad that only crops on
// one side and pads on the other fills before copying.
// CHECK-LABEL: func.func @main
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x7xf32> {
  %flip = torch.aten.flip %b {dims = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %cat = torch.aten.cat [%a, %flip] {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x7xf32>
  %pad = torch.aten.constant_pad_nd %cat {pad = array<i64: 1, -1>, value = 0.000000e+00 : f64} : (tensor<2x7xf32>) -> tensor<2x7xf32>
  func.return %pad : tensor<2x7xf32>
}
// CHECK:       tile.view %b : memref<2x4xf32, #mem<hbm>> to memref<2x4xf32, strided<[4, -1], offset: 3>, #mem<hbm>>
// CHECK:       tile.view %{{.*}} to memref<2x4xf32, strided<[7, 1], offset: 3>, #mem<hbm>>
// CHECK:       tile.fill {value = 0.000000e+00 : f64}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// cdist with p = 1 and few rows: ATen computes it directly, and so does the lowering (abs, add-reduce).
// CHECK-LABEL: func.func @main
func.func @main(%a: tensor<5x3xf32>, %b: tensor<4x3xf32>) -> tensor<5x4xf32> {
  %0 = torch.aten._cdist_forward %a, %b {p = 1.000000e+00 : f64} : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
  func.return %0 : tensor<5x4xf32>
}
// CHECK-NOT:   tile.matmul
// CHECK:       tile.unary %{{.*}} {fn = "abs"}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// cdist p = 2 with compute_mode 1 (use_mm_for_euclid_dist): the augmented matmul, sqrt(max(., 0)) on evacuation.
// CHECK-LABEL: func.func @main
func.func @main(%a: tensor<5x3xf32>, %b: tensor<4x3xf32>) -> tensor<5x4xf32> {
  %0 = torch.aten._cdist_forward %a, %b {p = 2.000000e+00 : f64, compute_mode = 1 : i64} : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
  func.return %0 : tensor<5x4xf32>
}
// CHECK:       tile.matmul
// CHECK:       tile.binary_scalar %{{.*}} {op = "max", scalar = 0.000000e+00 : f64}
// CHECK:       tile.unary %{{.*}} {fn = "sqrt"}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// pdist writes row i's distances to rows i+1.. into the condensed output.
// CHECK-LABEL: func.func @main
func.func @main(%a: tensor<4x3xf32>) -> tensor<6xf32> {
  %0 = torch.aten._pdist_forward %a : (tensor<4x3xf32>) -> tensor<6xf32>
  func.return %0 : tensor<6xf32>
}
// CHECK-COUNT-3: tile.reduce
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// An empty contraction: the product is a zero tile, nothing is loaded.
// CHECK-LABEL: func.func @main
func.func @main(%a: tensor<5x0xf32>, %b: tensor<0x7xf32>) -> tensor<5x7xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<5x0xf32>, tensor<0x7xf32>) -> tensor<5x7xf32>
  func.return %0 : tensor<5x7xf32>
}
// CHECK-NOT:   tile.matmul
// CHECK:       tile.fill {value = 0.000000e+00 : f64} : !tile.tile<5x7xf32, sbuf>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// repeat: the output viewed as (repeat, size) pairs receives one broadcast (stride-0) view of the input.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<3x1x5xf32>) -> tensor<2x3x3x15xf32> {
  %0 = torch.aten.repeat %x {repeats = array<i64: 2, 1, 3, 3>} : (tensor<3x1x5xf32>) -> tensor<2x3x3x15xf32>
  func.return %0 : tensor<2x3x3x15xf32>
}
// CHECK:       tile.view %x : memref<3x1x5xf32, #mem<hbm>> to memref<2x1x1x3x3x1x3x5xf32, strided<[0, 0, 0, 5, 0, 5, 0, 1]>, #mem<hbm>>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// arange: GpSimdE counts, VectorE scales and shifts, one static block at a time.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<7xf32>) -> tensor<7xf32> {
  %r = torch.aten.arange.start_step {start = 2.5 : f64, end = 6.0 : f64, step = 0.5 : f64, dtype = f32} : () -> tensor<7xf32>
  %0 = torch.aten.add.Tensor %x, %r : (tensor<7xf32>, tensor<7xf32>) -> tensor<7xf32>
  func.return %0 : tensor<7xf32>
}
// CHECK:       tile.iota {steps = array<i64: 1>, channel_multiplier = 7 : i64} : !tile.tile<1x7xf32, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 5.000000e-01 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "add", scalar = 2.500000e+00 : f64}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// as_strided of a permuted view: its strides count elements of the storage underneath (the view's allocation),
// so it is one more view of %x, as are split_with_sizes and diagonal.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<4x6xf32>) -> (tensor<3x2xf32>, tensor<4x2xf32>, tensor<3xf32>) {
  %t = torch.aten.permute %x {dims = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %a = torch.aten.as_strided %t {size = array<i64: 3, 2>, stride = array<i64: 5, 1>} : (tensor<6x4xf32>) -> tensor<3x2xf32>
  %s:2 = torch.aten.split_with_sizes %x {split_sizes = array<i64: 4, 2>, dim = 1 : i64} : (tensor<4x6xf32>) -> (tensor<4x4xf32>, tensor<4x2xf32>)
  %d = torch.aten.diagonal %x {offset = 2 : i64} : (tensor<4x6xf32>) -> tensor<4xf32>
  %d3 = torch.aten.slice.Tensor %d {dim = 0 : i64, start = 1 : i64, end = 4 : i64} : (tensor<4xf32>) -> tensor<3xf32>
  func.return %a, %s#1, %d3 : tensor<3x2xf32>, tensor<4x2xf32>, tensor<3xf32>
}
// CHECK-NOT:   memref.alloc
// CHECK:       tile.view %{{.*}} to memref<3x2xf32, strided<[5, 1]>, #mem<hbm>>
// CHECK:       tile.view %x : memref<4x6xf32, #mem<hbm>> to memref<4x2xf32, strided<[6, 1], offset: 4>, #mem<hbm>>
// CHECK:       tile.view %x : memref<4x6xf32, #mem<hbm>> to memref<4xf32, strided<[7], offset: 2>, #mem<hbm>>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Adaptive pooling whose sizes divide is regular pooling (kernel = stride = size / output), one immediate scale.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x6x4xf32>) -> tensor<1x3x3x2xf32> {
  %0 = torch.aten._adaptive_avg_pool2d %x {output_size = array<i64: 3, 2>} : (tensor<1x3x6x4xf32>) -> tensor<1x3x3x2xf32>
  func.return %0 : tensor<1x3x3x2xf32>
}
// CHECK-NOT:   tile.reduce
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 2.500000e-01 : f64}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Average-pool backward with padding excluded: each kernel offset adds grad / count into the padded gradient's
// window view (read, add, write back), then the interior is the result.
// CHECK-LABEL: func.func @main
func.func @main(%g: tensor<1x2x3x3xf32>, %x: tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32> {
  %0 = torch.aten.avg_pool2d_backward %g, %x {kernel_size = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, ceil_mode = false, count_include_pad = false} : (tensor<1x2x3x3xf32>, tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
  func.return %0 : tensor<1x2x5x5xf32>
}
// CHECK:       memref.alloc() : memref<2x7x7xf32, #mem<hbm>>
// CHECK:       tile.unary %{{.*}} {fn = "reciprocal"}
// CHECK:       tile.store %{{.*}}, %{{.*}} {dims = array<i64: 0, 3, 4>}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Adaptive-pool backward with uneven windows: each output position's share is added over its own window.
// CHECK-LABEL: func.func @main
func.func @main(%g: tensor<1x2x2x3xf32>, %x: tensor<1x2x5x7xf32>) -> tensor<1x2x5x7xf32> {
  %0 = torch.aten._adaptive_avg_pool2d_backward %g, %x : (tensor<1x2x2x3xf32>, tensor<1x2x5x7xf32>) -> tensor<1x2x5x7xf32>
  func.return %0 : tensor<1x2x5x7xf32>
}
// CHECK:       tile.binary_scalar %{{.*}} column %{{.*}} {op = "add"} : (!tile.tile<2x3x3xf32, sbuf>, !tile.tile<2x1xf32, sbuf>)
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// col2im: each kernel offset's slab of columns is added into its window of the padded output.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x12x9xf32>) -> tensor<1x2x5x6xf32> {
  %0 = torch.aten.col2im %x {output_size = array<i64: 5, 6>, kernel_size = array<i64: 2, 3>, dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x12x9xf32>) -> tensor<1x2x5x6xf32>
  func.return %0 : tensor<1x2x5x6xf32>
}
// CHECK:       memref.alloc() : memref<2x7x8xf32, #mem<hbm>>
// CHECK-COUNT-6: tile.binary %{{.*}}, %{{.*}} {op = "add"}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// addbmm contracts over (batch, K) in one PSUM accumulation: batch1 [B, M, K] viewed as [M, B*K] needs a copy
// (B and K are not adjacent in memory), batch2 [B, K, N] merges to [B*K, N] for free.
// CHECK-LABEL: func.func @main
func.func @main(%c: tensor<5x7xf32>, %a: tensor<3x5x4xf32>, %b: tensor<3x4x7xf32>) -> tensor<5x7xf32> {
  %0 = torch.aten.addbmm %c, %a, %b {beta = 5.000000e-01 : f64, alpha = 2.000000e+00 : f64} : (tensor<5x7xf32>, tensor<3x5x4xf32>, tensor<3x4x7xf32>) -> tensor<5x7xf32>
  func.return %0 : tensor<5x7xf32>
}
// CHECK:       memref.alloc() : memref<5x3x4xf32, #mem<hbm>>
// CHECK:       tile.view %b : memref<3x4x7xf32, #mem<hbm>> to memref<12x7xf32, #mem<hbm>>
// CHECK:       tile.matmul {{.*}} -> !tile.tile<5x7xf32, psum>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// An infinite alpha scales batch1's elements before the products (where the BLAS under PyTorch's CPU addbmm applies
// it depends on the processor; the semantics fixes this order): inf * 0 terms and infinities of both signs in one
// sum give NaN, where inf * (the sum) would not.
// CHECK-LABEL: func.func @main
func.func @main(%c: tensor<5x7xf32>, %a: tensor<3x5x4xf32>, %b: tensor<3x4x7xf32>) -> tensor<5x7xf32> {
  %0 = torch.aten.addbmm %c, %a, %b {beta = 5.000000e-01 : f64, alpha = 0x7FF0000000000000 : f64} : (tensor<5x7xf32>, tensor<3x5x4xf32>, tensor<3x4x7xf32>) -> tensor<5x7xf32>
  func.return %0 : tensor<5x7xf32>
}
// CHECK:       tile.binary_scalar {{.*}} {op = "multiply", scalar = 0x7ff0000000000000 : f64}
// CHECK:       tile.matmul {{.*}} -> !tile.tile<5x7xf32, psum>
// CHECK-NOT:   0x7ff0000000000000
// CHECK:       func.return
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// addmm likewise: a NaN or infinite alpha multiplies mat1 before the product.
// CHECK-LABEL: func.func @main
func.func @main(%c: tensor<5x7xf32>, %a: tensor<5x4xf32>, %b: tensor<4x7xf32>) -> tensor<5x7xf32> {
  %0 = torch.aten.addmm %c, %a, %b {beta = 1.000000e+00 : f64, alpha = 0xFFF0000000000000 : f64} : (tensor<5x7xf32>, tensor<5x4xf32>, tensor<4x7xf32>) -> tensor<5x7xf32>
  func.return %0 : tensor<5x7xf32>
}
// CHECK:       tile.binary_scalar {{.*}} {op = "multiply", scalar = 0xfff0000000000000 : f64}
// CHECK:       tile.matmul {{.*}} -> !tile.tile<5x7xf32, psum>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// addmv: the vector is a one-column moving operand.
// CHECK-LABEL: func.func @main
func.func @main(%c: tensor<5xf32>, %a: tensor<5x4xf32>, %v: tensor<4xf32>) -> tensor<5xf32> {
  %0 = torch.aten.addmv %c, %a, %v : (tensor<5xf32>, tensor<5x4xf32>, tensor<4xf32>) -> tensor<5xf32>
  func.return %0 : tensor<5xf32>
}
// CHECK:       tile.matmul {{.*}} -> !tile.tile<5x1xf32, psum>
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// Adaptive max pooling with uneven windows: per output position a max, then the smallest flat index holding it.
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x5x7xf32>) -> (tensor<1x3x2x3xf32>, tensor<1x3x2x3xi64>) {
  %0, %1 = torch.aten.adaptive_max_pool2d %x {output_size = array<i64: 2, 3>} : (tensor<1x3x5x7xf32>) -> (tensor<1x3x2x3xf32>, tensor<1x3x2x3xi64>)
  func.return %0, %1 : tensor<1x3x2x3xf32>, tensor<1x3x2x3xi64>
}
// CHECK:       tile.reduce %{{.*}} {op = "max", axes = 2 : i64}
// CHECK:       tile.iota {steps = array<i64: 7, 1>} : !tile.tile<3x3x3xf32, sbuf>
// CHECK:       tile.reduce %{{.*}} {op = "min", axes = 2 : i64}
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match

// -----

// _trilinear (nn.functional.bilinear): the broadcast product of the unsqueezed inputs, reduced over sumdim.
// CHECK-LABEL: func.func @main
func.func @main(%x1: tensor<3x5xf32>, %w: tensor<7x5x4xf32>, %x2: tensor<3x4xf32>) -> tensor<3x7xf32> {
  %0 = torch.aten._trilinear %x1, %w, %x2 {expand1 = array<i64: 1, 3>, expand2 = array<i64: 0>, expand3 = array<i64: 1, 2>, sumdim = array<i64: 2, 3>, unroll_dim = 1 : i64} : (tensor<3x5xf32>, tensor<7x5x4xf32>, tensor<3x4xf32>) -> tensor<3x7xf32>
  func.return %0 : tensor<3x7xf32>
}
// CHECK:       memref.alloc() : memref<3x7x5x4xf32, #mem<hbm>>
// CHECK:       tile.reduce
// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
