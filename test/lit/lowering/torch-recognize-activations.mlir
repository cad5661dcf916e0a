// RUN: neuron-opt %s -p torch-recognize-activations --split-input-file | filecheck %s
// GPT-2's forward (its MLP spells out the tanh GELU) computes the same after the pass.
// RUN: neuron-opt %S/Inputs/gpt2_forward.torch.mlir -p torch-recognize-activations --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/gpt2_forward.torch.mlir -p torch-recognize-activations,dce | filecheck %s --check-prefix=GPT2

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
// GPT2:     torch.aten.gelu {{.*}}{approximate = "tanh"}
// GPT2-NOT: torch.aten.tanh

// CHECK-LABEL: func.func @tanh_gelu_written_out
// CHECK-NEXT:    %[[G:.*]] = torch.aten.gelu %x {approximate = "tanh"} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT:    func.return %[[G]]
func.func @tanh_gelu_written_out(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %half = torch.aten.mul.Scalar %x {other = 5.000000e-01 : f64} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %cube = torch.aten.pow.Tensor_Scalar %x {exponent = 3.000000e+00 : f64} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %scaled = torch.aten.mul.Scalar %cube {other = 4.471500e-02 : f64} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %sum = torch.aten.add.Tensor %x, %scaled : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %inner = torch.aten.mul.Scalar %sum {other = 0.79788456080286541 : f64} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %t = torch.aten.tanh %inner : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %one = torch.aten.add.Scalar %t {other = 1.000000e+00 : f64} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %r = torch.aten.mul.Tensor %one, %half : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  func.return %r : tensor<4x8xbf16>
}

// -----

// The cube as products (x * x * x), the inner sum with the cubic term first: the same function.
// CHECK-LABEL: func.func @tanh_gelu_cube_as_products
// CHECK-NEXT:    %[[G:.*]] = torch.aten.gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[G]]
func.func @tanh_gelu_cube_as_products(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = torch.aten.mul.Scalar %x {other = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %square = torch.aten.mul.Tensor %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %cube = torch.aten.mul.Tensor %square, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %scaled = torch.aten.mul.Scalar %cube {other = 4.471500e-02 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = torch.aten.add.Tensor %scaled, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %inner = torch.aten.mul.Scalar %sum {other = 0.79788456080286541 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = torch.aten.tanh %inner : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = torch.aten.add.Scalar %t {other = 1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = torch.aten.mul.Tensor %half, %one : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

// x * x * y is not a cube of x: left alone.
// CHECK-LABEL: func.func @not_a_cube_stays
// CHECK-NOT:     torch.aten.gelu
// CHECK:         torch.aten.tanh
func.func @not_a_cube_stays(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = torch.aten.mul.Scalar %x {other = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %square = torch.aten.mul.Tensor %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %cube = torch.aten.mul.Tensor %square, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %scaled = torch.aten.mul.Scalar %cube {other = 4.471500e-02 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = torch.aten.add.Tensor %scaled, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %inner = torch.aten.mul.Scalar %sum {other = 0.79788456080286541 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = torch.aten.tanh %inner : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = torch.aten.add.Scalar %t {other = 1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = torch.aten.mul.Tensor %half, %one : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

// A different constant is a different function: left alone.
// CHECK-LABEL: func.func @other_constants_stay
// CHECK-NOT:     torch.aten.gelu
// CHECK:         torch.aten.tanh
func.func @other_constants_stay(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = torch.aten.mul.Scalar %x {other = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %cube = torch.aten.pow.Tensor_Scalar %x {exponent = 3.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %scaled = torch.aten.mul.Scalar %cube {other = 5.000000e-02 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = torch.aten.add.Tensor %scaled, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %inner = torch.aten.mul.Scalar %sum {other = 0.79788456080286541 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = torch.aten.tanh %inner : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = torch.aten.add.Scalar %t {other = 1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = torch.aten.mul.Tensor %half, %one : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

// An intermediate another op reads stays for it; the GELU is still one op.
// CHECK-LABEL: func.func @shared_intermediate_stays
// CHECK:         %[[T:.*]] = torch.aten.tanh
// CHECK:         %[[G:.*]] = torch.aten.gelu %x {approximate = "tanh"}
// CHECK:         func.return %[[G]], %[[T]]
func.func @shared_intermediate_stays(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %half = torch.aten.mul.Scalar %x {other = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %cube = torch.aten.pow.Tensor_Scalar %x {exponent = 3.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %scaled = torch.aten.mul.Scalar %cube {other = 4.471500e-02 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = torch.aten.add.Tensor %scaled, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %inner = torch.aten.mul.Scalar %sum {other = 0.79788456080286541 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = torch.aten.tanh %inner : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %one = torch.aten.add.Scalar %t {other = 1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = torch.aten.mul.Tensor %half, %one : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r, %t : tensor<4x8xf32>, tensor<4x8xf32>
}
