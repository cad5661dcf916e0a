// RUN: neuron-opt %s -p torch-auto-cast --split-input-file | filecheck %s
// RUN: neuron-opt %s -p 'torch-auto-cast{mode=all}' --split-input-file | filecheck %s --check-prefix=ALL
// RUN: neuron-opt %s -p 'torch-auto-cast{mode=none}' --split-input-file | filecheck %s --check-prefix=NONE
// RUN: neuron-opt %s -p 'torch-auto-cast{mode=bf16}' --verify-diagnostics | filecheck %s --check-prefix=UNKNOWN
// The casts lower: the whole pipeline on the rewritten IR of a real graph computes what that IR says (bf16-rounded
// operands, fp32 accumulation; in the MLP's backward the matmuls read fp32 gradients through DMAs that round
// them, and the bias gradients' sums of the same tiles must not read those roundings), and so does "all".
// RUN: neuron-opt %S/Inputs/mlp_backward.torch.mlir -p 'torch-auto-cast{mode=matmul}' -o %t.matmul.mlir
// RUN: neuron-opt %t.matmul.mlir -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/mlp_forward.torch.mlir -p 'torch-auto-cast{mode=all}' -o %t.all.mlir
// RUN: neuron-opt %t.all.mlir -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
// UNKNOWN: torch-auto-cast: unknown mode 'bf16' (modes: none, matmul, all)

// The mode comes from the module (the frontend's auto_cast option): a Linear layer's input and transposed
// weight are rounded to bf16 and widened back, the bias and the result stay fp32. "all" computes the layer
// in bf16 (bias included, as under torch.autocast; the view of the fp32 weight stays fp32, its rounding follows)
// and widens the result for the graph's output; "none" is the input unchanged.
// CHECK-LABEL: func.func @linear_layer
// CHECK-NEXT:    %t = torch.aten.t %w
// CHECK-NEXT:    %[[XH:.*]] = torch.aten._to_copy %x {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[X:.*]] = torch.aten._to_copy %[[XH]] {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[TH:.*]] = torch.aten._to_copy %t {dtype = bf16} : (tensor<8x16xf32>) -> tensor<8x16xbf16>
// CHECK-NEXT:    %[[T:.*]] = torch.aten._to_copy %[[TH]] {dtype = f32} : (tensor<8x16xbf16>) -> tensor<8x16xf32>
// CHECK-NEXT:    %y = torch.aten.addmm %b, %[[X]], %[[T]] : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %y
// ALL-LABEL: func.func @linear_layer
// ALL-NEXT:    %t = torch.aten.t %w : (tensor<16x8xf32>) -> tensor<8x16xf32>
// ALL-NEXT:    %[[BH:.*]] = torch.aten._to_copy %b {dtype = bf16}
// ALL-NEXT:    %[[XH:.*]] = torch.aten._to_copy %x {dtype = bf16}
// ALL-NEXT:    %[[TH:.*]] = torch.aten._to_copy %t {dtype = bf16}
// ALL-NEXT:    %[[YH:.*]] = torch.aten.addmm %[[BH]], %[[XH]], %[[TH]] : (tensor<16xbf16>, tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
// ALL-NEXT:    %y = torch.aten._to_copy %[[YH]] {dtype = f32}
// ALL-NEXT:    func.return %y
// NONE-LABEL: func.func @linear_layer
// NONE-NEXT:    %t = torch.aten.t %w
// NONE-NEXT:    %y = torch.aten.addmm %b, %x, %t
// NONE-NEXT:    func.return %y
builtin.module attributes {neuron.auto_cast = "matmul"} {
  func.func @linear_layer(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
    %t = torch.aten.t %w : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %y = torch.aten.addmm %b, %x, %t : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    func.return %y : tensor<4x16xf32>
  }
}

// -----

// Without the attribute the mode is "none". An operand read twice is rounded once; a matmul in bf16 already is
// left alone.
// CHECK-LABEL: func.func @shared_operand_and_other_dtypes
// CHECK-NEXT:    %p = torch.aten.bmm %a, %b
// CHECK-NEXT:    %q = torch.aten.bmm %p, %p
// ALL-LABEL:   func.func @shared_operand_and_other_dtypes
// ALL-NEXT:      %[[AH:.*]] = torch.aten._to_copy %a {dtype = bf16}
// ALL-NEXT:      %[[BH:.*]] = torch.aten._to_copy %b {dtype = bf16}
// ALL-NEXT:      %[[PH:.*]] = torch.aten.bmm %[[AH]], %[[BH]] : (tensor<3x4x5xbf16>, tensor<3x5x4xbf16>) -> tensor<3x4x4xbf16>
// ALL-NEXT:      %[[QH:.*]] = torch.aten.bmm %[[PH]], %[[PH]] : (tensor<3x4x4xbf16>, tensor<3x4x4xbf16>) -> tensor<3x4x4xbf16>
// ALL-NEXT:      %q = torch.aten._to_copy %[[QH]] {dtype = f32}
// ALL-NEXT:      %r = torch.aten.mm %h, %k : (tensor<4x5xbf16>, tensor<5x4xbf16>) -> tensor<4x4xbf16>
// ALL-NEXT:      func.return %q, %r
func.func @shared_operand_and_other_dtypes(%a: tensor<3x4x5xf32>, %b: tensor<3x5x4xf32>, %h: tensor<4x5xbf16>, %k: tensor<5x4xbf16>) -> (tensor<3x4x4xf32>, tensor<4x4xbf16>) {
  %p = torch.aten.bmm %a, %b : (tensor<3x4x5xf32>, tensor<3x5x4xf32>) -> tensor<3x4x4xf32>
  %q = torch.aten.bmm %p, %p : (tensor<3x4x4xf32>, tensor<3x4x4xf32>) -> tensor<3x4x4xf32>
  %r = torch.aten.mm %h, %k : (tensor<4x5xbf16>, tensor<5x4xbf16>) -> tensor<4x4xbf16>
  func.return %q, %r : tensor<3x4x4xf32>, tensor<4x4xbf16>
}

// -----

// A convolution's input and weight are rounded, its bias is not; an operand that already is a widened bf16 value
// is not rounded again.
// CHECK-LABEL: func.func @convolution
// CHECK-NEXT:    %w = torch.aten._to_copy %wh {dtype = f32}
// CHECK-NEXT:    %[[XH:.*]] = torch.aten._to_copy %x {dtype = bf16}
// CHECK-NEXT:    %[[X:.*]] = torch.aten._to_copy %[[XH]] {dtype = f32}
// CHECK-NEXT:    %y = torch.aten.convolution %[[X]], %w, %b
// CHECK-NEXT:    func.return %y
builtin.module attributes {neuron.auto_cast = "matmul"} {
  func.func @convolution(%x: tensor<1x3x8x8xf32>, %wh: tensor<4x3x3x3xbf16>, %b: tensor<4xf32>) -> tensor<1x4x6x6xf32> {
    %w = torch.aten._to_copy %wh {dtype = f32} : (tensor<4x3x3x3xbf16>) -> tensor<4x3x3x3xf32>
    %y = torch.aten.convolution %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
    func.return %y : tensor<1x4x6x6xf32>
  }
}

// -----

// "all": the activation and the product stay bf16 from op to op; softmax and the sum read fp32 widenings and
// compute in fp32; the softmax's result is rounded for the product. The outputs keep their fp32 types.
// ALL-LABEL: func.func @softmax_and_sum_stay_fp32
// ALL:         %[[YH:.*]] = torch.aten.addmm {{.*}} -> tensor<4x16xbf16>
// ALL-NEXT:    %[[GH:.*]] = torch.aten.gelu %[[YH]] : (tensor<4x16xbf16>) -> tensor<4x16xbf16>
// ALL-NEXT:    %g = torch.aten._to_copy %[[GH]] {dtype = f32}
// ALL-NEXT:    %s = torch.aten._softmax %g {{.*}} : (tensor<4x16xf32>) -> tensor<4x16xf32>
// ALL-NEXT:    %[[SH:.*]] = torch.aten._to_copy %s {dtype = bf16}
// ALL-NEXT:    %[[RH:.*]] = torch.aten.mul.Tensor %[[SH]], %[[GH]] : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
// ALL-NEXT:    %r = torch.aten._to_copy %[[RH]] {dtype = f32}
// ALL-NEXT:    %m = torch.aten.sum.dim_IntList %r {{.*}} : (tensor<4x16xf32>) -> tensor<4xf32>
// ALL-NEXT:    func.return %r, %m : tensor<4x16xf32>, tensor<4xf32>
func.func @softmax_and_sum_stay_fp32(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>) {
  %t = torch.aten.t %w : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %y = torch.aten.addmm %b, %x, %t : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %g = torch.aten.gelu %y : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %s = torch.aten._softmax %g {dim = -1 : i64, half_to_float = false} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = torch.aten.mul.Tensor %s, %g : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = torch.aten.sum.dim_IntList %r {dim = array<i64: -1>, keepdim = false} : (tensor<4x16xf32>) -> tensor<4xf32>
  func.return %r, %m : tensor<4x16xf32>, tensor<4xf32>
}

// -----

// In every mode, a bf16 rounding of fp32 that matmuls multiply only through a permute (an autocast region's
// Linear weight, as Dynamo writes it) is moved after the permute, where the matmul's DMAs round it as they load.
// CHECK-LABEL: func.func @autocast_weight
// CHECK-NEXT:    %xh = torch.aten._to_copy %x {dtype = bf16}
// CHECK-NEXT:    %[[WT:.*]] = torch.aten.permute %w {dims = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    %[[WTH:.*]] = torch.aten._to_copy %[[WT]] {dtype = bf16} : (tensor<8x16xf32>) -> tensor<8x16xbf16>
// CHECK-NEXT:    %y = torch.aten.mm %xh, %[[WTH]]
// NONE-LABEL: func.func @autocast_weight
// NONE:          torch.aten.permute %w
// NONE:          torch.aten.mm %xh
// ALL-LABEL: func.func @autocast_weight
// ALL:           torch.aten.permute %w
// ALL:           torch.aten.mm %xh
func.func @autocast_weight(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xbf16> {
  %xh = torch.aten._to_copy %x {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %wh = torch.aten._to_copy %w {dtype = bf16} : (tensor<16x8xf32>) -> tensor<16x8xbf16>
  %wt = torch.aten.permute %wh {dims = array<i64: 1, 0>} : (tensor<16x8xbf16>) -> tensor<8x16xbf16>
  %y = torch.aten.mm %xh, %wt : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  func.return %y : tensor<4x16xbf16>
}

// -----

// A permuted rounding that anything but a multiplied operand reads stays as it is: here addmm's bias.
// CHECK-LABEL: func.func @permuted_rounding_read_as_a_bias
// CHECK-NEXT:    %wh = torch.aten._to_copy %w {dtype = bf16}
// CHECK-NEXT:    %wt = torch.aten.permute %wh
// CHECK-NEXT:    %y = torch.aten.addmm %wt, %a, %b
func.func @permuted_rounding_read_as_a_bias(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %w: tensor<4x4xf32>) -> tensor<4x4xbf16> {
  %wh = torch.aten._to_copy %w {dtype = bf16} : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  %wt = torch.aten.permute %wh {dims = array<i64: 1, 0>} : (tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %y = torch.aten.addmm %wt, %a, %b : (tensor<4x4xbf16>, tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  func.return %y : tensor<4x4xbf16>
}
