// RUN: neuron-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier message of the torch dialect (ir/dialects/torch.py, TorchOp.verify_).

func.func @broadcast_result(%x: tensor<37x520xf32>, %b: tensor<10xf32>) -> tensor<37x520xf32> {
  %0 = torch.aten.add.Tensor %x, %b : (tensor<37x520xf32>, tensor<10xf32>) -> tensor<37x520xf32>
  func.return %0 : tensor<37x520xf32>
}
// CHECK: torch.aten.add.Tensor: result shape (37, 520) is not the broadcast of operand shapes (37, 520) and (10,)

// -----

func.func @same_shape_result(%x: tensor<4x3xf32>) -> tensor<3x4xf32> {
  %0 = torch.aten.relu %x : (tensor<4x3xf32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}
// CHECK: torch.aten.relu: result shape (3, 4) is not the operand shape (4, 3)

// -----

func.func @comparison_result_type(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.aten.eq.Tensor %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: torch.aten.eq.Tensor: result 'result' element type must be i1, found f32

// -----

func.func @indices_result_type(%x: tensor<4x8xf32>) -> tensor<4xi32> {
  %0:2 = torch.aten.max.dim %x {dim = 1 : i64} : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xi32>)
  func.return %0#1 : tensor<4xi32>
}
// CHECK: torch.aten.max.dim: result 'indices' element type must be i64, found i32

// -----

func.func @dtype_result_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.aten._to_copy %x {dtype = f16} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: torch.aten._to_copy: result element type must be f16 as 'dtype' says, found f32

// -----

func.func @fixed_length_list(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %0 = torch.aten.avg_pool2d %x {kernel_size = array<i64: 2, 2, 2>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
  func.return %0 : tensor<1x3x4x4xf32>
}
// CHECK: torch.aten.avg_pool2d: 'kernel_size' must have 2 elements, found 3

// -----

func.func @none_positions(%x: tensor<4x6xf32>, %i: tensor<3xi64>) -> tensor<4x3xf32> {
  %0 = "torch.aten.index.Tensor"(%x, %i) <{indices_none_positions = array<i64: 0, 5>}> : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  func.return %0 : tensor<4x3xf32>
}
// CHECK: torch.aten.index.Tensor: 'indices_none_positions' must hold increasing positions below 3 (the length of 'indices'), found [0, 5]

// -----

// The schema's own constraints come from the IRDL definitions: property kinds, required properties, result kinds.

func.func @property_kind(%x: tensor<4x3xf32>) -> tensor<4xf32> {
  %0 = torch.aten.sum.dim_IntList %x {dim = 1 : i64} : (tensor<4x3xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: 1 : i64 should be of base attribute array

// -----

func.func @missing_property(%x: tensor<4x3xf32>) -> index {
  %0 = torch.aten.sym_size.int %x : (tensor<4x3xf32>) -> index
  func.return %0 : index
}
// CHECK: property 'dim' expected in operation 'torch.aten.sym_size.int'

// -----

func.func @symint_result(%x: tensor<4x3xf32>) -> i64 {
  %0 = torch.aten.sym_size.int %x {dim = 0 : i64} : (tensor<4x3xf32>) -> i64
  func.return %0 : i64
}
// CHECK: i64 should be of base attribute index

// -----

func.func @fill_beyond_an_integer_type() -> tensor<i8> {
  %0 = torch.aten.scalar_tensor {s = 0xfff0000000000000 : f64, dtype = i8} : () -> tensor<i8>
  func.return %0 : tensor<i8>
}
// CHECK: torch.aten.scalar_tensor: 's' -inf cannot be converted to i8 without overflow

// -----

// A layout torch has no name for (a fuzz case: the reference semantics looked it up on torch and raised).
func.func @unknown_layout() -> tensor<f32> {
  %0 = torch.aten.scalar_tensor {s = 0 : i64, dtype = f32, layout = "none", device = "cpu"} : () -> tensor<f32>
  func.return %0 : tensor<f32>
}
// CHECK: torch.aten.scalar_tensor: 'layout' "none" names no torch layout (_mkldnn, jagged, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided)

// -----

func.func @unknown_memory_format(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = torch.aten.clone %x {memory_format = "channels_first"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
// CHECK: torch.aten.clone: 'memory_format' "channels_first" names no torch memory format (channels_last, channels_last_3d, contiguous_format, legacy_contiguous_format, preserve_format)

// -----

func.func @fill_rounding_into_an_integer_type() -> tensor<2xui8> {
  %0 = torch.aten.full {size = array<i64: 2>, fill_value = 2.555000e+02 : f64, dtype = ui8} : () -> tensor<2xui8>
  func.return %0 : tensor<2xui8>
}
// CHECK: torch.aten.full: 'fill_value' 255.5 cannot be converted to ui8 without overflow

// -----

func.func @fill_beyond_float32(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = torch.aten.fill.Scalar %x {value = 1.000000e+39 : f64} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: torch.aten.fill.Scalar: 'value' 1e+39 cannot be converted to f32 without overflow
