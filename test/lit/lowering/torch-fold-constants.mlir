// RUN: neuron-opt %s -p torch-fold-constants --split-input-file | filecheck %s
// A real graph (GPT-2's forward: scalar_tensor and full constants in the attention mask) computes the same.
// RUN: neuron-opt %S/Inputs/gpt2_forward.torch.mlir -p torch-fold-constants --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/gpt2_forward.torch.mlir -p torch-fold-constants | filecheck %s --check-prefix=GPT2

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
// GPT2-LABEL: func.func @main
// GPT2-NOT:   torch.aten.scalar_tensor

// CHECK-LABEL: func.func @constant_operands_become_scalars
// CHECK-NEXT:    %[[MUL:.*]] = torch.aten.mul.Scalar %x {other = 5.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[ADD:.*]] = torch.aten.add.Scalar %x {other = 2 : i64, alpha = 3 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[SWAPPED:.*]] = torch.aten.mul.Scalar %x {other = 5.000000e-01 : f64}
// CHECK-NEXT:    func.return %[[MUL]], %[[ADD]], %[[SWAPPED]]
func.func @constant_operands_become_scalars(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %half = torch.aten.full {size = array<i64>, fill_value = 5.000000e-01 : f64, dtype = f32} : () -> tensor<f32>
  %two = torch.aten.full {size = array<i64: 1, 3>, fill_value = 2 : i64, dtype = i64} : () -> tensor<1x3xi64>
  %m = torch.aten.mul.Tensor %x, %half : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %a = torch.aten.add.Tensor %x, %two {alpha = 3 : i64} : (tensor<2x3xf32>, tensor<1x3xi64>) -> tensor<2x3xf32>
  %s = torch.aten.mul.Tensor %half, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %m, %a, %s : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// The scalar form keeps the op's size bounds (its result has the same shape), and a scalar form that is an
// identity is its operand: transformers' mask code starts `and_masks` from `True & mask`, which was a pass over
// the whole [b, 1, s, s] mask.
// CHECK-LABEL: func.func @identities_and_size_bounds
// CHECK-NEXT:    %[[TWICE:.*]] = torch.aten.mul.Scalar %x {other = 2.000000e+00 : f64, neuron.size_bounds = ["s0", ""]}
// CHECK-NEXT:    func.return %mask, %[[TWICE]], %x
func.func @identities_and_size_bounds(%mask: tensor<2x3xi1>, %x: tensor<2x3xf32>) -> (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) attributes {neuron.size_arguments = [["s0", 1 : i64, 2 : i64]]} {
  %true = torch.aten.full {size = array<i64>, fill_value = true, dtype = i1} : () -> tensor<i1>
  %two = torch.aten.full {size = array<i64>, fill_value = 2.000000e+00 : f64, dtype = f32} : () -> tensor<f32>
  %one = torch.aten.full {size = array<i64>, fill_value = 1.000000e+00 : f64, dtype = f32} : () -> tensor<f32>
  %a = torch.aten.bitwise_and.Tensor %true, %mask {neuron.size_bounds = ["s0", ""]} : (tensor<i1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %m = torch.aten.mul.Tensor %x, %two {neuron.size_bounds = ["s0", ""]} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %o = torch.aten.mul.Tensor %one, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %a, %m, %o : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// A constant first: symmetric ops as they are, comparisons mirrored, `c - x` as `neg(x) + c` (SiLU's backward
// computes `1 - sigmoid(x)`); with alpha, `c - alpha * x` stays.
// CHECK-LABEL: func.func @constant_first_operands
// CHECK-NEXT:    %[[ONE:.*]] = torch.aten.full
// CHECK-NEXT:    %[[NEG:.*]] = torch.aten.neg %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[SUB:.*]] = torch.aten.add.Scalar %[[NEG]] {other = 1.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[LT:.*]] = torch.aten.gt.Scalar %x {other = 1.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:    %[[EQ:.*]] = torch.aten.eq.Scalar %x {other = 1.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:    %[[ALPHA:.*]] = torch.aten.sub.Tensor %[[ONE]], %x {alpha = 2 : i64}
// CHECK-NEXT:    func.return %[[SUB]], %[[LT]], %[[EQ]], %[[ALPHA]]
func.func @constant_first_operands(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xf32>) {
  %one = torch.aten.full {size = array<i64>, fill_value = 1.000000e+00 : f64, dtype = f32} : () -> tensor<f32>
  %s = torch.aten.sub.Tensor %one, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = torch.aten.lt.Tensor %one, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %e = torch.aten.eq.Tensor %one, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %a = torch.aten.sub.Tensor %one, %x {alpha = 2 : i64} : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %s, %l, %e, %a : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xf32>
}

// -----

// A constant of a wider dtype of the same kind with dimensions promotes: f32 + f64[3] is f64, f32 + 1.0 is f32.
// A constant that broadcasts the tensor to a bigger shape is no scalar either.
// CHECK-LABEL: func.func @constants_that_promote_or_broadcast_stay
// CHECK-NEXT:    torch.aten.full
// CHECK-NEXT:    torch.aten.full
// CHECK-NEXT:    torch.aten.add.Tensor
// CHECK-NEXT:    torch.aten.mul.Tensor
func.func @constants_that_promote_or_broadcast_stay(%x: tensor<3xf32>) -> (tensor<3xf64>, tensor<2x3xf32>) {
  %wide = torch.aten.full {size = array<i64: 3>, fill_value = 1.000000e+00 : f64, dtype = f64} : () -> tensor<3xf64>
  %big = torch.aten.full {size = array<i64: 2, 3>, fill_value = 2.000000e+00 : f64, dtype = f32} : () -> tensor<2x3xf32>
  %a = torch.aten.add.Tensor %x, %wide : (tensor<3xf32>, tensor<3xf64>) -> tensor<3xf64>
  %m = torch.aten.mul.Tensor %x, %big : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %a, %m : tensor<3xf64>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @ops_on_constants_are_evaluated
// CHECK-NEXT:    %[[C:.*]] = torch.aten.full {size = array<i64: 4>, fill_value = 2.500000e+00 : f64, dtype = f32} : () -> tensor<4xf32>
// CHECK-NEXT:    %[[M:.*]] = torch.aten.full {size = array<i64: 4>, fill_value = true, dtype = i1} : () -> tensor<4xi1>
// CHECK-NEXT:    func.return %[[C]], %[[M]]
func.func @ops_on_constants_are_evaluated() -> (tensor<4xf32>, tensor<4xi1>) {
  %s = torch.aten.scalar_tensor {s = 1.500000e+00 : f64, dtype = f32} : () -> tensor<f32>
  %o = torch.aten.full {size = array<i64: 4>, fill_value = 1 : i64, dtype = f32} : () -> tensor<4xf32>
  %c = torch.aten.add.Tensor %o, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %m = torch.aten.gt.Scalar %c {other = 0 : i64} : (tensor<4xf32>) -> tensor<4xi1>
  func.return %c, %m : tensor<4xf32>, tensor<4xi1>
}

// -----

// Random ops are never evaluated at compile time.
// CHECK-LABEL: func.func @random_ops_stay
// CHECK:         torch.aten.bernoulli.p
func.func @random_ops_stay() -> tensor<4xf32> {
  %o = torch.aten.full {size = array<i64: 4>, fill_value = 1 : i64, dtype = f32} : () -> tensor<4xf32>
  %r = torch.aten.bernoulli.p %o {p = 5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
