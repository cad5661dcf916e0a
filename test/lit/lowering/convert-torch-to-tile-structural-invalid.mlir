// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --verify-diagnostics | filecheck %s

// Inputs the legality checks of the structural families rule out (convolution.py, pooling.py, indexing.py,
// movement.py, distance.py), before anything is converted:
// each diagnostic names the op, the rule and the source line.

// Convolutions need a batch and a channel dim around 1 to 3 spatial dims.
func.func @convolution_unbatched(%x: tensor<3x5xf32>, %w: tensor<2x3x3xf32>) -> tensor<2x3xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 1>, transposed = false, output_padding = array<i64: 0>, groups = 1 : i64} : (tensor<3x5xf32>, tensor<2x3x3xf32>) -> tensor<2x3xf32> loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<2x3xf32>
}
// CHECK: torch.aten.convolution: only batched 1-d, 2-d and 3-d convolutions lower (input rank 2) (at model.py:4 (model.conv))

// -----

func.func @convolution_backward_unbatched(%g: tensor<2x3xf32>, %x: tensor<3x5xf32>, %w: tensor<2x3x3xf32>) -> tensor<3x5xf32> {
  %0, %1, %2 = torch.aten.convolution_backward %g, %x, %w {bias_sizes = array<i64: 0>, stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 1>, transposed = false, output_padding = array<i64: 0>, groups = 1 : i64, output_mask = array<i1: true, false, false>} : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<2x3x3xf32>) -> (tensor<3x5xf32>, none, none) loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<3x5xf32>
}
// CHECK: torch.aten.convolution_backward: only batched 1-d, 2-d and 3-d convolutions lower (input rank 2) (at model.py:4 (model.conv))

// -----

// The result type must be the shape the convolution's parameters give.
func.func @convolution_wrong_result(%x: tensor<1x3x5xf32>, %w: tensor<2x3x3xf32>) -> tensor<1x2x4xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 1>, transposed = false, output_padding = array<i64: 0>, groups = 1 : i64} : (tensor<1x3x5xf32>, tensor<2x3x3xf32>) -> tensor<1x2x4xf32> loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<1x2x4xf32>
}
// CHECK: torch.aten.convolution: computed shape (1, 2, 3) differs from (1, 2, 4) (at model.py:4 (model.conv))

// -----

// A 1-d input with a 2-d kernel, and a 2-d convolution given three strides (fuzz cases crashed on both).
func.func @convolution_weight_rank(%x: tensor<1x3x7xf32>, %w: tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 3 : i64} : (tensor<1x3x7xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32> loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<1x3x6x7xf32>
}
// CHECK: torch.aten.convolution: the weight's rank 4 differs from the input's 3 (at model.py:4 (model.conv))

// -----

func.func @convolution_stride_count(%x: tensor<1x3x6x7xf32>, %w: tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 1, 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 3 : i64} : (tensor<1x3x6x7xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32> loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<1x3x6x7xf32>
}
// CHECK: torch.aten.convolution: stride has 3 values, for 2 spatial dimensions (at model.py:4 (model.conv))

// -----

// A backward whose grad_output is not the forward's result (a fuzz case: a stride of 2^31 made the phase analysis
// walk 2^31 residues).
func.func @convolution_backward_grad_shape(%g: tensor<1x3x2x2xf32>, %x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x2x5x5xf32> {
  %0, %1, %2 = torch.aten.convolution_backward %g, %x, %w {bias_sizes = array<i64: 0>, stride = array<i64: 2147483648, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: true, false, false>} : (tensor<1x3x2x2xf32>, tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> (tensor<1x2x5x5xf32>, none, none) loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<1x2x5x5xf32>
}
// CHECK: torch.aten.convolution_backward: grad_output's shape (1, 3, 2, 2) differs from the computed (1, 3, 1, 2) (at model.py:4 (model.conv))

// -----

// A zero stride (the output size divides by it; a fuzz case crashed there), and a zero dilation of a backward.
func.func @convolution_zero_stride(%x: tensor<1x3x6x7xf32>, %w: tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32> {
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 0, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 3 : i64} : (tensor<1x3x6x7xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x6x7xf32> loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<1x3x6x7xf32>
}
// CHECK: torch.aten.convolution: a stride must be positive, found [0, 1] (at model.py:4 (model.conv))

// -----

func.func @convolution_backward_zero_dilation(%g: tensor<1x2x3xf32>, %x: tensor<1x3x5xf32>, %w: tensor<2x3x3xf32>) -> tensor<1x3x5xf32> {
  %0, %1, %2 = torch.aten.convolution_backward %g, %x, %w {bias_sizes = array<i64: 0>, stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 0>, transposed = false, output_padding = array<i64: 0>, groups = 1 : i64, output_mask = array<i1: true, false, false>} : (tensor<1x2x3xf32>, tensor<1x3x5xf32>, tensor<2x3x3xf32>) -> (tensor<1x3x5xf32>, none, none) loc("model.conv"("model.py":4:0))
  func.return %0 : tensor<1x3x5xf32>
}
// CHECK: torch.aten.convolution_backward: a dilation must be positive, found [0] (at model.py:4 (model.conv))

// -----

// Pooling needs a channel dim in front of its spatial dims.
func.func @pool_without_channels(%x: tensor<6x6xf32>) -> tensor<3x3xf32> {
  %0 = torch.aten.avg_pool2d %x {kernel_size = array<i64: 2, 2>} : (tensor<6x6xf32>) -> tensor<3x3xf32> loc("model.pool"("model.py":9:0))
  func.return %0 : tensor<3x3xf32>
}
// CHECK: torch.aten.avg_pool2d: the input needs a channel dimension and 2 spatial dimensions (at model.py:9 (model.pool))

// -----

// A pooling's windows follow PyTorch's shape check: a kernel taller than the input gives no output.
func.func @pool_kernel_past_the_input(%x: tensor<1x3x6x5xf32>) -> (tensor<1x3x3x2xf32>, tensor<1x3x3x2xi64>) {
  %0, %1 = torch.aten.max_pool2d_with_indices %x {kernel_size = array<i64: 4096, 2>, stride = array<i64: 2, 2>} : (tensor<1x3x6x5xf32>) -> (tensor<1x3x3x2xf32>, tensor<1x3x3x2xi64>) loc("model.pool"("model.py":9:0))
  func.return %0, %1 : tensor<1x3x3x2xf32>, tensor<1x3x3x2xi64>
}
// CHECK: torch.aten.max_pool2d_with_indices: the kernel [4096, 2] does not fit the input [6, 5] (output size [-2044, 2]) (at model.py:9 (model.pool))

// -----

// Padding is at most half the kernel.
func.func @pool_padding_past_half(%x: tensor<1x3x6x6xf32>) -> tensor<1x3x8x8xf32> {
  %0 = torch.aten.avg_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 1, 1>, padding = array<i64: 2, 2>} : (tensor<1x3x6x6xf32>) -> tensor<1x3x8x8xf32> loc("model.pool"("model.py":9:0))
  func.return %0 : tensor<1x3x8x8xf32>
}
// CHECK: torch.aten.avg_pool2d: padding [2, 2] must be at most half of the kernel [2, 2] (at model.py:9 (model.pool))

// -----

// The result has the size the windows give.
func.func @pool_wrong_output(%x: tensor<1x3x6x6xf32>) -> tensor<1x3x4x3xf32> {
  %0 = torch.aten.avg_pool2d %x {kernel_size = array<i64: 2, 2>} : (tensor<1x3x6x6xf32>) -> tensor<1x3x4x3xf32> loc("model.pool"("model.py":9:0))
  func.return %0 : tensor<1x3x4x3xf32>
}
// CHECK: torch.aten.avg_pool2d: the output's spatial size [4, 3] is not the [3, 3] the windows give (at model.py:9 (model.pool))

// -----

// as_strided's strides count storage elements: negative ones are invalid ...
func.func @as_strided_negative(%x: tensor<12xf32>) -> tensor<3x2xf32> {
  %0 = torch.aten.as_strided %x {size = array<i64: 3, 2>, stride = array<i64: -2, 1>} : (tensor<12xf32>) -> tensor<3x2xf32> loc("model.py":11:0)
  func.return %0 : tensor<3x2xf32>
}
// CHECK: torch.aten.as_strided: negative strides [-2, 1] are not valid for as_strided (at model.py:11)

// -----

// ... and the view must stay inside the input's storage.
func.func @as_strided_too_far(%x: tensor<12xf32>) -> tensor<4x3xf32> {
  %0 = torch.aten.as_strided %x {size = array<i64: 4, 3>, stride = array<i64: 3, 2>} : (tensor<12xf32>) -> tensor<4x3xf32> loc("model.py":11:0)
  func.return %0 : tensor<4x3xf32>
}
// CHECK: torch.aten.as_strided: sizes [4, 3] and strides [3, 2] reach past the 12 elements of the input's storage (at model.py:11)

// -----

// Offsets are computed in fp32, relative to each tile's origin and in steps of the largest stride dividing them:
// an embedding's offsets are row numbers at any table size, but a per-element gather along dim 0 steps by single
// elements across rows of 4096, and a tile of it reaches past 2^24.
func.func @gather_too_large(%w: tensor<4097x4096xf32>, %i: tensor<2x4096xi64>) -> tensor<2x4096xf32> {
  %0 = torch.aten.gather %w, %i {dim = 0 : i64} : (tensor<4097x4096xf32>, tensor<2x4096xi64>) -> tensor<2x4096xf32> loc("model.gather"("model.py":2:0))
  func.return %0 : tensor<2x4096xf32>
}
// CHECK: torch.aten.gather: offsets within a tile reach 16777728 (in steps of 1 element(s)): fp32 offsets are exact only below 2^24 (at model.py:2 (model.gather))

// -----

// A boolean mask selects a data-dependent number of elements.
func.func @index_with_mask(%x: tensor<5x3xf32>, %m: tensor<5xi1>) -> tensor<2x3xf32> {
  %0 = torch.aten.index.Tensor %x, [%m] : (tensor<5x3xf32>, tensor<5xi1>) -> tensor<2x3xf32> loc("model.py":6:0)
  func.return %0 : tensor<2x3xf32>
}
// CHECK: torch.aten.index.Tensor: boolean mask indices select a data-dependent number of elements (at model.py:6)

// -----

func.func @index_shapes_do_not_broadcast(%x: tensor<5x3xf32>, %i: tensor<4xi64>, %j: tensor<2xi64>) -> tensor<4xf32> {
  %0 = torch.aten.index.Tensor %x, [%i, %j] : (tensor<5x3xf32>, tensor<4xi64>, tensor<2xi64>) -> tensor<4xf32> loc("model.py":6:0)
  func.return %0 : tensor<4xf32>
}
// CHECK: torch.aten.index.Tensor: index shapes [(4,), (2,)] do not broadcast (at model.py:6)

// -----

// Three indices (two of them None) into two dimensions (a fuzz case indexed past the source's strides).
func.func @index_too_many(%x: tensor<4x6xf32>, %i: tensor<3xi64>) -> tensor<4x3xf32> {
  %0 = "torch.aten.index.Tensor"(%x, %i) <{indices_none_positions = array<i64: 0, 1>}> : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x3xf32> loc("model.py":6:0)
  func.return %0 : tensor<4x3xf32>
}
// CHECK: torch.aten.index.Tensor: too many indices for a tensor of dimension 2 (got 3) (at model.py:6)

// -----

func.func @index_wrong_result(%x: tensor<5x3xf32>, %i: tensor<4xi64>) -> tensor<3x4xf32> {
  %0 = torch.aten.index.Tensor %x, [%i] : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<3x4xf32> loc("model.py":6:0)
  func.return %0 : tensor<3x4xf32>
}
// CHECK: torch.aten.index.Tensor: computed shape (4, 3) differs from the result's (3, 4) (at model.py:6)

// -----

func.func @scatter_reduce_unknown(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = torch.aten.scatter_reduce.two %x, %i, %s {dim = 0 : i64, reduce = "median"} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32> loc("model.py":8:0)
  func.return %0 : tensor<3x4xf32>
}
// CHECK: torch.aten.scatter_reduce.two: unknown reduction 'median' (at model.py:8)

// -----

func.func @scatter_unknown_reduce(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = torch.aten.scatter.reduce %x, %i, %s {dim = 0 : i64, reduce = "max"} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32> loc("model.py":8:0)
  func.return %0 : tensor<3x4xf32>
}
// CHECK: torch.aten.scatter.reduce: unknown reduction 'max' (add or multiply) (at model.py:8)

// -----

func.func @embedding_backward_by_frequency(%g: tensor<3x6xf32>, %i: tensor<3xi64>) -> tensor<10x6xf32> {
  %0 = torch.aten.embedding_dense_backward %g, %i {num_weights = 10 : i64, padding_idx = -1 : i64, scale_grad_by_freq = true} : (tensor<3x6xf32>, tensor<3xi64>) -> tensor<10x6xf32> loc("model.embed"("model.py":2:0))
  func.return %0 : tensor<10x6xf32>
}
// CHECK: torch.aten.embedding_dense_backward: scale_grad_by_freq needs per-index counts (not lowered) (at model.py:2 (model.embed))

// -----

func.func @embedding_backward_shapes(%g: tensor<4x6xf32>, %i: tensor<3xi64>) -> tensor<10x6xf32> {
  %0 = torch.aten.embedding_dense_backward %g, %i {num_weights = 10 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<10x6xf32> loc("model.embed"("model.py":2:0))
  func.return %0 : tensor<10x6xf32>
}
// CHECK: torch.aten.embedding_dense_backward: grad_output of shape (4, 6) does not match indices x 6 (at model.py:2 (model.embed))

// -----

func.func @cdist_batches_differ(%a: tensor<2x5x3xf32>, %b: tensor<3x4x3xf32>) -> tensor<2x5x4xf32> {
  %0 = torch.aten._cdist_forward %a, %b {p = 1.000000e+00 : f64} : (tensor<2x5x3xf32>, tensor<3x4x3xf32>) -> tensor<2x5x4xf32> loc("model.py":5:0)
  func.return %0 : tensor<2x5x4xf32>
}
// CHECK: torch.aten._cdist_forward: batch shapes (2,) and (3,) do not broadcast (at model.py:5)

// -----

func.func @pdist_rank(%a: tensor<2x4x3xf32>) -> tensor<6xf32> {
  %0 = torch.aten._pdist_forward %a : (tensor<2x4x3xf32>) -> tensor<6xf32> loc("model.py":5:0)
  func.return %0 : tensor<6xf32>
}
// CHECK: torch.aten._pdist_forward: pdist takes a 2-d input, got rank 3 (at model.py:5)

// -----

func.func @index_without_tensors(%x: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %0 = torch.aten.index.Tensor %x, [none] : (tensor<5x3xf32>) -> tensor<5x3xf32> loc("model.py":6:0)
  func.return %0 : tensor<5x3xf32>
}
// CHECK: torch.aten.index.Tensor: indexing without any index tensor (at model.py:6)

// -----

// masked_scatter's prefix counts use one tile of at most 128 rows.
func.func @masked_scatter_too_large(%x: tensor<16899xf32>, %m: tensor<16899xi1>, %s: tensor<16899xf32>) -> tensor<16899xf32> {
  %0 = torch.aten.masked_scatter %x, %m, %s : (tensor<16899xf32>, tensor<16899xi1>, tensor<16899xf32>) -> tensor<16899xf32> loc("model.py":3:0)
  func.return %0 : tensor<16899xf32>
}
// CHECK: torch.aten.masked_scatter: 16899 elements need 393 rows of prefix counts, more than one tile of 128 (at model.py:3)

// -----

// as_strided_scatter writes through its view: a view that reaches an element twice has no defined result.
func.func @as_strided_scatter_overlapping(%x: tensor<12xf32>, %s: tensor<3x3xf32>) -> tensor<12xf32> {
  %0 = torch.aten.as_strided_scatter %x, %s {size = array<i64: 3, 3>, stride = array<i64: 2, 1>} : (tensor<12xf32>, tensor<3x3xf32>) -> tensor<12xf32> loc("model.py":11:0)
  func.return %0 : tensor<12xf32>
}
// CHECK: torch.aten.as_strided_scatter: sizes [3, 3] and strides [2, 1] write some elements twice (at model.py:11)

// -----

// grid_sampler_2d's interpolation modes are 0 (bilinear), 1 (nearest) and 2 (bicubic).
func.func @grid_sampler_unknown_mode(%x: tensor<1x2x5x7xf32>, %g: tensor<1x3x4x2xf32>) -> tensor<1x2x3x4xf32> {
  %0 = torch.aten.grid_sampler_2d %x, %g {interpolation_mode = 3 : i64, padding_mode = 0 : i64, align_corners = false} : (tensor<1x2x5x7xf32>, tensor<1x3x4x2xf32>) -> tensor<1x2x3x4xf32> loc("model.py":13:0)
  func.return %0 : tensor<1x2x3x4xf32>
}
// CHECK: torch.aten.grid_sampler_2d: needs a 4-d input, interpolation in [0, 1, 2] and padding in 0..2, got interpolation 3, padding 0 (at model.py:13)

// -----

// embedding_bag's modes are 0 (sum), 1 (mean) and 2 (max).
func.func @embedding_bag_max(%w: tensor<10x5xf32>, %i: tensor<6xi64>, %o: tensor<2xi64>) -> tensor<2x5xf32> {
  %0, %1, %2, %3 = torch.aten._embedding_bag_forward_only %w, %i, %o, none {mode = 3 : i64} : (tensor<10x5xf32>, tensor<6xi64>, tensor<2xi64>) -> (tensor<2x5xf32>, tensor<6xi64>, tensor<2xi64>, tensor<2x5xi64>) loc("model.bag"("model.py":3:0))
  func.return %0 : tensor<2x5xf32>
}
// CHECK: torch.aten._embedding_bag_forward_only: unknown mode 3 (0 sum, 1 mean, 2 max) (at model.py:3 (model.bag))

// -----

func.func @embedding_bag_2d_indices(%w: tensor<10x5xf32>, %i: tensor<2x3xi64>, %o: tensor<2xi64>) -> tensor<2x5xf32> {
  %0, %1, %2, %3 = torch.aten._embedding_bag_forward_only %w, %i, %o, none : (tensor<10x5xf32>, tensor<2x3xi64>, tensor<2xi64>) -> (tensor<2x5xf32>, tensor<0xi64>, tensor<2xi64>, tensor<2xi64>) loc("model.bag"("model.py":3:0))
  func.return %0 : tensor<2x5xf32>
}
// CHECK: torch.aten._embedding_bag_forward_only: indices and offsets must be 1-d, got ranks 2 and 1 (at model.py:3 (model.bag))

// -----

func.func @embedding_bag_too_many_bags(%w: tensor<10x5xf32>, %i: tensor<6xi64>, %o: tensor<130xi64>) -> tensor<130x5xf32> {
  %0, %1, %2, %3 = torch.aten._embedding_bag_forward_only %w, %i, %o, none : (tensor<10x5xf32>, tensor<6xi64>, tensor<130xi64>) -> (tensor<130x5xf32>, tensor<0xi64>, tensor<130xi64>, tensor<130xi64>) loc("model.bag"("model.py":3:0))
  func.return %0 : tensor<130x5xf32>
}
// CHECK: torch.aten._embedding_bag_forward_only: 130 bags of 6 tokens: at most 128 bags of 1 to 2048 tokens lower (at model.py:3 (model.bag))

// -----

func.func @embedding_renorm_rank(%w: tensor<2x10x5xf32>, %i: tensor<6xi64>) -> tensor<2x10x5xf32> {
  %0 = torch.aten.embedding_renorm %w, %i {max_norm = 1.0 : f64, norm_type = 2.0 : f64} : (tensor<2x10x5xf32>, tensor<6xi64>) -> tensor<2x10x5xf32> loc("model.py":3:0)
  func.return %0 : tensor<2x10x5xf32>
}
// CHECK: torch.aten.embedding_renorm: the weight must be 2-d, got rank 3 (at model.py:3)

// -----

func.func @embedding_renorm_wide(%w: tensor<10x4097xf32>, %i: tensor<6xi64>) -> tensor<10x4097xf32> {
  %0 = torch.aten.embedding_renorm %w, %i {max_norm = 1.0 : f64, norm_type = 2.0 : f64} : (tensor<10x4097xf32>, tensor<6xi64>) -> tensor<10x4097xf32> loc("model.py":3:0)
  func.return %0 : tensor<10x4097xf32>
}
// CHECK: torch.aten.embedding_renorm: rows of 4097 elements: at most 2048 (one tile per row) lower (at model.py:3)

// -----

// col2im's input must hold channels x kernel columns for every block of the output.
func.func @col2im_wrong_blocks(%x: tensor<1x12x8xf32>) -> tensor<1x2x5x6xf32> {
  %0 = torch.aten.col2im %x {output_size = array<i64: 5, 6>, kernel_size = array<i64: 2, 3>, dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x12x8xf32>) -> tensor<1x2x5x6xf32> loc("model.fold"("model.py":3:0))
  func.return %0 : tensor<1x2x5x6xf32>
}
// CHECK: torch.aten.col2im: input (1, 12, 8) does not hold 2 x [2, 3] columns of (3, 3) blocks (at model.py:3 (model.fold))

// -----

// A zero stride (the block count divides by it; a fuzz case crashed there).
func.func @col2im_zero_stride(%x: tensor<1x12x8xf32>) -> tensor<1x2x5x6xf32> {
  %0 = torch.aten.col2im %x {output_size = array<i64: 5, 6>, kernel_size = array<i64: 2, 3>, dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 0, 2>} : (tensor<1x12x8xf32>) -> tensor<1x2x5x6xf32> loc("model.fold"("model.py":3:0))
  func.return %0 : tensor<1x2x5x6xf32>
}
// CHECK: torch.aten.col2im: kernel_size [2, 3], stride [0, 2] and dilation [1, 1] must be positive, padding [1, 1] >= 0 (at model.py:3 (model.fold))

// -----

// PyTorch has no bicubic 3-d sampling.
func.func @grid_sampler_3d_bicubic(%x: tensor<1x2x3x4x5xf32>, %g: tensor<1x2x2x2x3xf32>) -> tensor<1x2x2x2x2xf32> {
  %0 = torch.aten.grid_sampler_3d %x, %g {interpolation_mode = 2 : i64, padding_mode = 0 : i64, align_corners = false} : (tensor<1x2x3x4x5xf32>, tensor<1x2x2x2x3xf32>) -> tensor<1x2x2x2x2xf32> loc("model.py":13:0)
  func.return %0 : tensor<1x2x2x2x2xf32>
}
// CHECK: torch.aten.grid_sampler_3d: needs a 5-d input, interpolation in [0, 1] and padding in 0..2, got interpolation 2, padding 0 (at model.py:13)

// -----

func.func @index_reduce_unknown(%x: tensor<3x4xf32>, %i: tensor<2xi64>, %s: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = torch.aten.index_reduce %x, %i, %s {dim = 0 : i64, reduce = "sum"} : (tensor<3x4xf32>, tensor<2xi64>, tensor<2x4xf32>) -> tensor<3x4xf32> loc("model.py":8:0)
  func.return %0 : tensor<3x4xf32>
}
// CHECK: torch.aten.index_reduce: unknown reduction 'sum' (at model.py:8)
