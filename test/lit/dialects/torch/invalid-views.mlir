// RUN: neuron-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The result types of view ops follow from their operand and arguments (ir/dialects/torch.py, ShapeRule): a
// result type that disagrees, or arguments ATen refuses, are verifier errors. views.mlir holds accepted forms.

func.func @permute_result(%x: tensor<16x32xf32>) -> tensor<32x17xf32> {
  %0 = torch.aten.permute %x {dims = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x17xf32>
  func.return %0 : tensor<32x17xf32>
}
// CHECK: torch.aten.permute: result shape (32, 17) is not (32, 16), the shape its arguments give for operand shape (16, 32)

// -----

func.func @permute_dims(%x: tensor<16x32xf32>) -> tensor<16x16xf32> {
  %0 = torch.aten.permute %x {dims = array<i64: 0, 0>} : (tensor<16x32xf32>) -> tensor<16x16xf32>
  func.return %0 : tensor<16x16xf32>
}
// CHECK: torch.aten.permute: 'dims' [0, 0] is not a permutation of 2 dimension(s)

// -----

func.func @view_element_count(%x: tensor<2x3x4xf32>) -> tensor<5x5xf32> {
  %0 = torch.aten.view %x {size = array<i64: 5, 5>} : (tensor<2x3x4xf32>) -> tensor<5x5xf32>
  func.return %0 : tensor<5x5xf32>
}
// CHECK: torch.aten.view: 'size' [5, 5] has 25 elements, the operand 24

// -----

func.func @view_inferred(%x: tensor<2x3x4xf32>) -> tensor<4x4xf32> {
  %0 = torch.aten._unsafe_view %x {size = array<i64: -1, 4>} : (tensor<2x3x4xf32>) -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}
// CHECK: torch.aten._unsafe_view: result shape (4, 4) is not (6, 4), the shape its arguments give for operand shape (2, 3, 4)

// -----

func.func @view_element_type(%x: tensor<2x3xf32>) -> tensor<6xf16> {
  %0 = torch.aten.view %x {size = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf16>
  func.return %0 : tensor<6xf16>
}
// CHECK: torch.aten.view: result element type must be f32, found f16

// -----

func.func @expand_size(%x: tensor<4x2xf32>) -> tensor<4x3xf32> {
  %0 = torch.aten.expand %x {size = array<i64: 4, 3>} : (tensor<4x2xf32>) -> tensor<4x3xf32>
  func.return %0 : tensor<4x3xf32>
}
// CHECK: torch.aten.expand: 'size' [4, 3] cannot expand the operand shape (4, 2)

// -----

func.func @t_rank(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %0 = torch.aten.t %x : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  func.return %0 : tensor<4x3x2xf32>
}
// CHECK: torch.aten.t: the operand has 3 dimensions; t takes at most 2

// -----

func.func @squeeze_result(%x: tensor<1x3xf32>) -> tensor<1x3xf32> {
  %0 = torch.aten.squeeze.dim %x {dim = 0 : i64} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  func.return %0 : tensor<1x3xf32>
}
// CHECK: torch.aten.squeeze.dim: result shape (1, 3) is not (3,), the shape its arguments give for operand shape (1, 3)

// -----

func.func @unsqueeze_dim(%x: tensor<5x7xf32>) -> tensor<5x7x1xf32> {
  %0 = torch.aten.unsqueeze %x {dim = 3 : i64} : (tensor<5x7xf32>) -> tensor<5x7x1xf32>
  func.return %0 : tensor<5x7x1xf32>
}
// CHECK: torch.aten.unsqueeze: 'dim' 3 is out of range for 3 dimension(s)

// -----

func.func @slice_result(%x: tensor<5x7xf32>) -> tensor<5x3xf32> {
  %0 = torch.aten.slice.Tensor %x {dim = 1 : i64, start = -3 : i64, step = 2 : i64} : (tensor<5x7xf32>) -> tensor<5x3xf32>
  func.return %0 : tensor<5x3xf32>
}
// CHECK: torch.aten.slice.Tensor: result shape (5, 3) is not (5, 2), the shape its arguments give for operand shape (5, 7)

// -----

func.func @select_index(%x: tensor<2x3xf32>) -> tensor<3xf32> {
  %0 = torch.aten.select.int %x {dim = 0 : i64, index = 2 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: torch.aten.select.int: 'index' 2 is out of range for dimension 0 of size 2

// -----

func.func @as_strided_strides(%x: tensor<5x7xf32>) -> tensor<4x4xf32> {
  %0 = torch.aten.as_strided %x {size = array<i64: 4, 4>, stride = array<i64: 8>} : (tensor<5x7xf32>) -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}
// CHECK: torch.aten.as_strided: 'size' [4, 4] and 'stride' [8] differ in length

// -----

func.func @split_sizes(%x: tensor<2x4xf32>) -> tensor<2x1xf32> {
  %0:2 = torch.aten.split_with_sizes %x {split_sizes = array<i64: 1, 2>, dim = 1 : i64} : (tensor<2x4xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>)
  func.return %0#0 : tensor<2x1xf32>
}
// CHECK: torch.aten.split_with_sizes: 'split_sizes' [1, 2] must add up to the size 4 of dimension 1

// -----

func.func @unbind_count(%x: tensor<3x4xf32>) -> tensor<4xf32> {
  %0:2 = torch.aten.unbind_copy.int %x : (tensor<3x4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  func.return %0#0 : tensor<4xf32>
}
// CHECK: torch.aten.unbind_copy.int: 2 tensor results, but its arguments make 3

// -----

func.func @view_as_real_operand(%x: tensor<4x3xf32>) -> tensor<4x3x2xf32> {
  %0 = torch.aten.view_as_real %x : (tensor<4x3xf32>) -> tensor<4x3x2xf32>
  func.return %0 : tensor<4x3x2xf32>
}
// CHECK: torch.aten.view_as_real: the operand must be complex, found f32
