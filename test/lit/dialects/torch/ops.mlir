// RUN: NEURON_ROUNDTRIP

// Custom syntax -> generic -> custom: every shape of argument the shared syntax handles.

// CHECK-LABEL: func.func @addmm_defaults_elided
func.func @addmm_defaults_elided(%b: tensor<520xf32>, %x: tensor<37x300xf32>, %w: tensor<300x520xf32>) -> tensor<37x520xf32> {
  // beta and alpha are given with their schema default (1): printed without them.
  // CHECK: %[[R:.*]] = torch.aten.addmm %b, %x, %w : (tensor<520xf32>, tensor<37x300xf32>, tensor<300x520xf32>) -> tensor<37x520xf32>
  %0 = torch.aten.addmm %b, %x, %w {beta = 1 : i64, alpha = 1 : i64} : (tensor<520xf32>, tensor<37x300xf32>, tensor<300x520xf32>) -> tensor<37x520xf32>
  // CHECK: func.return %[[R]]
  func.return %0 : tensor<37x520xf32>
}

// -----

// CHECK-LABEL: func.func @scalar_properties
func.func @scalar_properties(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // Scalar as int, float and bool; float; bool.
  // CHECK: %[[A:.*]] = torch.aten.add.Tensor %x, %y {alpha = 2 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %0 = torch.aten.add.Tensor %x, %y {alpha = 2 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: torch.aten.sub.Scalar %[[A]] {other = 5.000000e-01 : f64, alpha = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = torch.aten.sub.Scalar %0 {other = 0.5 : f64, alpha = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: torch.aten.leaky_relu %x {negative_slope = 2.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = torch.aten.leaky_relu %x {negative_slope = 0.2 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: torch.aten.fill.Scalar %x {value = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = torch.aten.fill.Scalar %x {value = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1, %2, %3, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @optional_operands
func.func @optional_operands(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>) -> (tensor<1x8x6x6xf32>, tensor<1x8x3x3xf32>) {
  // An absent Tensor? prints as `none`; int[] and bool properties.
  // CHECK: torch.aten.convolution %x, %w, none {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  %0 = torch.aten.convolution %x, %w, none {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  // CHECK: torch.aten.convolution %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<1x8x3x3xf32>
  %1 = torch.aten.convolution %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<1x8x3x3xf32>
  func.return %0, %1 : tensor<1x8x6x6xf32>, tensor<1x8x3x3xf32>
}

// -----

// CHECK-LABEL: func.func @several_optional_operands
func.func @several_optional_operands(%g: tensor<2x4xf32>, %x: tensor<2x4xf32>, %m: tensor<4xf32>) -> tensor<2x4xf32> {
  // Five Tensor? arguments, some present: operand segment sizes are implied by the syntax.
  // CHECK: %[[GX:.*]], %[[GW:.*]], %[[GB:.*]] = torch.aten.native_batch_norm_backward %g, %x, none, %m, %m, none, none {train = false, eps = 1.000000e-05 : f64, output_mask = array<i1: true, false, false>} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %0:3 = torch.aten.native_batch_norm_backward %g, %x, none, %m, %m, none, none {train = false, eps = 1.0e-05 : f64, output_mask = array<i1: true, false, false>} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  func.return %0#0 : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @tensor_lists
func.func @tensor_lists(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> (tensor<2x8xf32>, tensor<2x3xf32>, tensor<2x5xf32>) {
  // CHECK: %[[C:.*]] = torch.aten.cat [%a, %b] {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %0 = torch.aten.cat [%a, %b] {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  // A Tensor[] result: variadic results.
  // CHECK: %[[S0:.*]], %[[S1:.*]] = torch.aten.split_with_sizes %[[C]] {split_sizes = array<i64: 3, 5>, dim = 1 : i64} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x5xf32>)
  %1:2 = torch.aten.split_with_sizes %0 {split_sizes = array<i64: 3, 5>, dim = 1 : i64} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x5xf32>)
  // CHECK: func.return %[[C]], %[[S0]], %[[S1]]
  func.return %0, %1#0, %1#1 : tensor<2x8xf32>, tensor<2x3xf32>, tensor<2x5xf32>
}

// -----

// CHECK-LABEL: func.func @optional_tensor_lists
func.func @optional_tensor_lists(%x: tensor<4x6xf32>, %i: tensor<3xi64>, %v: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<4x6xf32>) {
  // Tensor?[] keeps its None entries in place.
  // CHECK: torch.aten.index.Tensor %x, [none, %i] : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  %0 = torch.aten.index.Tensor %x, [none, %i] : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  // CHECK: torch.aten.index.Tensor %x, [%i, %i] : (tensor<4x6xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xf32>
  %1 = torch.aten.index.Tensor %x, [%i, %i] : (tensor<4x6xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xf32>
  // CHECK: torch.aten.index_put %x, [none, %i], %v {accumulate = true} : (tensor<4x6xf32>, tensor<3xi64>, tensor<4x3xf32>) -> tensor<4x6xf32>
  %2 = torch.aten.index_put %x, [none, %i], %v {accumulate = true} : (tensor<4x6xf32>, tensor<3xi64>, tensor<4x3xf32>) -> tensor<4x6xf32>
  func.return %0, %1, %2 : tensor<4x3xf32>, tensor<3xf32>, tensor<4x6xf32>
}

// -----

// CHECK-LABEL: func.func @list_properties
func.func @list_properties(%x: tensor<2x3x4xf32>, %m: tensor<2x3x8x8xf32>) -> (tensor<4x2x3xf32>, tensor<6x4xf32>, tensor<2x3x16x16xf32>) {
  // CHECK: torch.aten.permute %x {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %0 = torch.aten.permute %x {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: torch.aten.view %x {size = array<i64: -1, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = torch.aten.view %x {size = array<i64: -1, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // float[]? present, SymInt[]? absent.
  // CHECK: torch.aten.upsample_nearest2d.vec %m {scale_factors = array<f64: 2.000000e+00, 2.000000e+00>} : (tensor<2x3x8x8xf32>) -> tensor<2x3x16x16xf32>
  %2 = torch.aten.upsample_nearest2d.vec %m {scale_factors = array<f64: 2.0, 2.0>} : (tensor<2x3x8x8xf32>) -> tensor<2x3x16x16xf32>
  func.return %0, %1, %2 : tensor<4x2x3xf32>, tensor<6x4xf32>, tensor<2x3x16x16xf32>
}

// -----

// CHECK-LABEL: func.func @dtype_and_string_properties
func.func @dtype_and_string_properties(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3xf16>, tensor<5xi32>, tensor<5xi64>, tensor<5xi64>) {
  // CHECK: torch.aten._to_copy %x {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %0 = torch.aten._to_copy %x {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  // CHECK: torch.aten.gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = torch.aten.gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: torch.aten.div.Tensor_mode %x, %y {rounding_mode = "floor"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = torch.aten.div.Tensor_mode %x, %y {rounding_mode = "floor"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // Layout, Device and MemoryFormat are strings.
  // CHECK: torch.aten.empty.memory_format {size = array<i64: 2, 3>, dtype = f16, layout = "strided", device = "cpu", pin_memory = false, memory_format = "contiguous_format"} : () -> tensor<2x3xf16>
  %3 = torch.aten.empty.memory_format {size = array<i64: 2, 3>, dtype = f16, layout = "strided", device = "cpu", pin_memory = false, memory_format = "contiguous_format"} : () -> tensor<2x3xf16>
  // randperm's dtype defaults to int64 (elided); an explicit None is `none`.
  // CHECK: torch.aten.randperm {n = 5 : i64, dtype = i32} : () -> tensor<5xi32>
  %4 = torch.aten.randperm {n = 5 : i64, dtype = i32} : () -> tensor<5xi32>
  // CHECK: torch.aten.randperm {n = 5 : i64} : () -> tensor<5xi64>
  %5 = torch.aten.randperm {n = 5 : i64, dtype = i64} : () -> tensor<5xi64>
  // CHECK: torch.aten.randperm {n = 5 : i64, dtype = none} : () -> tensor<5xi64>
  %6 = torch.aten.randperm {n = 5 : i64, dtype = none} : () -> tensor<5xi64>
  func.return %0, %1, %2, %3, %4, %5, %6 : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3xf16>, tensor<5xi32>, tensor<5xi64>, tensor<5xi64>
}

// -----

// CHECK-LABEL: func.func @element_types
func.func @element_types(%a: tensor<3xf64>, %b: tensor<3xf16>, %c: tensor<3xi32>, %d: tensor<3xi16>, %e: tensor<3xi8>, %f: tensor<3xui8>, %g: tensor<3xi1>, %h: tensor<3xcomplex<f32>>) -> (tensor<3xf64>, tensor<3xf16>, tensor<3xi32>, tensor<3xi16>, tensor<3xi8>, tensor<3xui8>, tensor<3xi1>, tensor<3xcomplex<f32>>) {
  // CHECK: torch.aten.neg %a : (tensor<3xf64>) -> tensor<3xf64>
  %0 = torch.aten.neg %a : (tensor<3xf64>) -> tensor<3xf64>
  // CHECK: torch.aten.neg %b : (tensor<3xf16>) -> tensor<3xf16>
  %1 = torch.aten.neg %b : (tensor<3xf16>) -> tensor<3xf16>
  // CHECK: torch.aten.neg %c : (tensor<3xi32>) -> tensor<3xi32>
  %2 = torch.aten.neg %c : (tensor<3xi32>) -> tensor<3xi32>
  // CHECK: torch.aten.neg %d : (tensor<3xi16>) -> tensor<3xi16>
  %3 = torch.aten.neg %d : (tensor<3xi16>) -> tensor<3xi16>
  // CHECK: torch.aten.neg %e : (tensor<3xi8>) -> tensor<3xi8>
  %4 = torch.aten.neg %e : (tensor<3xi8>) -> tensor<3xi8>
  // CHECK: torch.aten.bitwise_not %f : (tensor<3xui8>) -> tensor<3xui8>
  %5 = torch.aten.bitwise_not %f : (tensor<3xui8>) -> tensor<3xui8>
  // CHECK: torch.aten.logical_not %g : (tensor<3xi1>) -> tensor<3xi1>
  %6 = torch.aten.logical_not %g : (tensor<3xi1>) -> tensor<3xi1>
  // CHECK: torch.aten.neg %h : (tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>>
  %7 = torch.aten.neg %h : (tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>>
  func.return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<3xf64>, tensor<3xf16>, tensor<3xi32>, tensor<3xi16>, tensor<3xi8>, tensor<3xui8>, tensor<3xi1>, tensor<3xcomplex<f32>>
}

// -----

// CHECK-LABEL: func.func @zero_d_and_scalar_results
func.func @zero_d_and_scalar_results(%x: tensor<4x8xf32>) -> (tensor<f32>, f64, index, tensor<f32>) {
  // CHECK: %[[S:.*]] = torch.aten.sum.dim_IntList %x {dim = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  %0 = torch.aten.sum.dim_IntList %x {dim = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  // A Scalar result is a builtin f64 / i64 / i1 value; SymInt is index.
  // CHECK: torch.aten._local_scalar_dense %[[S]] : (tensor<f32>) -> f64
  %1 = torch.aten._local_scalar_dense %0 : (tensor<f32>) -> f64
  // CHECK: torch.aten.sym_size.int %x {dim = 1 : i64} : (tensor<4x8xf32>) -> index
  %2 = torch.aten.sym_size.int %x {dim = 1 : i64} : (tensor<4x8xf32>) -> index
  // Non-finite floats print as their bit pattern.
  // CHECK: torch.aten.scalar_tensor {s = 0xfff0000000000000 : f64, dtype = f32} : () -> tensor<f32>
  %3 = torch.aten.scalar_tensor {s = 0xFFF0000000000000 : f64, dtype = f32} : () -> tensor<f32>
  func.return %0, %1, %2, %3 : tensor<f32>, f64, index, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @multi_result
func.func @multi_result(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4xf32>, tensor<4xi64>, tensor<4x8xf32>) {
  // CHECK: %[[V:.*]], %[[I:.*]] = torch.aten.max.dim %x {dim = 1 : i64} : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xi64>)
  %0:2 = torch.aten.max.dim %x {dim = 1 : i64, keepdim = false} : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xi64>)
  // CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = torch.aten.native_layer_norm %x, %w, none {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %1:3 = torch.aten.native_layer_norm %x, %w, none {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  // CHECK: func.return %[[V]], %[[I]], %[[Y]]
  func.return %0#0, %0#1, %1#0 : tensor<4xf32>, tensor<4xi64>, tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @locations_and_discardable_attributes
func.func @locations_and_discardable_attributes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: torch.aten.relu %x {neuron.source = "model.py:12"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":12:8)
  %0 = torch.aten.relu %x {neuron.source = "model.py:12"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.py":12:8)
  // CHECK: torch.aten.add.Scalar %{{.*}} {other = 1 : i64, neuron.module = "layer1.act"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc(fused["model.py":13:4, "layer1.act"])
  %1 = torch.aten.add.Scalar %0 {other = 1 : i64, neuron.module = "layer1.act"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc(fused["model.py":13:4, "layer1.act"])
  func.return %1 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @mutating_overloads_have_value_semantics
func.func @mutating_overloads_have_value_semantics(%x: tensor<3xf32>, %y: tensor<3xf32>, %out: tensor<3xf32>) -> (tensor<3xf32>, i1) {
  // `Tensor(a!) out` is an ordinary operand; a SymBool result is i1.
  // CHECK: torch.aten.atan2.out %x, %y, %out : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %0 = torch.aten.atan2.out %x, %y, %out : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // CHECK: torch.aten.sym_is_contiguous %[[V:.*]] : (tensor<3xf32>) -> i1
  %1 = torch.aten.sym_is_contiguous %0 : (tensor<3xf32>) -> i1
  func.return %0, %1 : tensor<3xf32>, i1
}
