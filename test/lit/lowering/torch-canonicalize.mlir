// RUN: neuron-opt %s -p torch-canonicalize --split-input-file | filecheck %s
// A real graph (GPT-2's forward) computes the same after the pass, and its module paths survive it.
// RUN: neuron-opt %S/Inputs/gpt2_forward.torch.mlir -p torch-canonicalize --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/gpt2_forward.torch.mlir -p torch-canonicalize --print-debuginfo | filecheck %s --check-prefix=LOC

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
// LOC-LABEL: func.func @main
// LOC:       torch.aten.addmm {{.*}} loc("model.transformer.h.0.attn.c_attn"("transformers/pytorch_utils.py":{{[0-9]+}}:0))
// LOC:       torch.aten._scaled_dot_product_flash_attention_for_cpu {{.*}} loc("model.transformer.h.0.attn"(

// CHECK-LABEL: func.func @copies_are_their_operand
// CHECK-NEXT:    func.return %x, %x, %x, %x, %x : tensor<2x3xf32>
func.func @copies_are_their_operand(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %a = torch.aten.clone %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = torch.aten.alias %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = torch.aten.detach %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %d = torch.aten.lift_fresh_copy %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = torch.aten._to_copy %x {dtype = f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %a, %b, %c, %d, %e : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @conversions_and_reshapes_that_change_something_stay
// CHECK-NEXT:    %[[HALF:.*]] = torch.aten._to_copy %x {dtype = f16}
// CHECK-NEXT:    %[[FLAT:.*]] = torch.aten.view %x {size = array<i64: 6>}
// CHECK-NEXT:    func.return %[[HALF]], %[[FLAT]]
func.func @conversions_and_reshapes_that_change_something_stay(%x: tensor<2x3xf32>) -> (tensor<2x3xf16>, tensor<6xf32>) {
  %h = torch.aten._to_copy %x {dtype = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  %v = torch.aten.view %x {size = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
  func.return %h, %v : tensor<2x3xf16>, tensor<6xf32>
}

// -----

// CHECK-LABEL: func.func @views_that_change_nothing
// CHECK-NEXT:    func.return %x, %x, %x, %x, %x : tensor<2x3xf32>
func.func @views_that_change_nothing(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %v = torch.aten.view %x {size = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %p = torch.aten.permute %x {dims = array<i64: 0, -1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = torch.aten.squeeze.dim %x {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = torch.aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 9223372036854775807 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = torch.aten.expand %x {size = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %v, %p, %t, %s, %e : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @arithmetic_identities
// CHECK-NEXT:    %[[TWICE:.*]] = torch.aten.mul.Scalar %x {other = 2 : i64}
// CHECK-NEXT:    func.return %x, %x, %x, %[[TWICE]]
func.func @arithmetic_identities(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %m = torch.aten.mul.Scalar %x {other = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %a = torch.aten.add.Scalar %x {other = 0.000000e+00 : f64, alpha = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %p = torch.aten.pow.Tensor_Scalar %x {exponent = 1.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %k = torch.aten.mul.Scalar %x {other = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %m, %a, %p, %k : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// An integer tensor times 1.0 is a float tensor: not an identity.
// CHECK-LABEL: func.func @identity_only_when_the_type_is_kept
// CHECK-NEXT:    torch.aten.mul.Scalar %x {other = 1.000000e+00 : f64} : (tensor<4xi64>) -> tensor<4xf32>
func.func @identity_only_when_the_type_is_kept(%x: tensor<4xi64>) -> tensor<4xf32> {
  %m = torch.aten.mul.Scalar %x {other = 1.000000e+00 : f64} : (tensor<4xi64>) -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}

// -----

// Bitwise identities: a boolean `& True` (transformers' `and_masks` starts from it), `| False`, `^ False`; an integer
// `& -1`, `| 0`, `^ 0`. An integer `& True` is `& 1`, and a boolean `& 1` an integer: both stay.
// CHECK-LABEL: func.func @bitwise_identities
// CHECK-NEXT:    %[[LOW_BIT:.*]] = torch.aten.bitwise_and.Scalar %n {other = true}
// CHECK-NEXT:    %[[WIDENED:.*]] = torch.aten.bitwise_and.Scalar %b {other = 1 : i64}
// CHECK-NEXT:    func.return %b, %b, %b, %n, %n, %n, %[[LOW_BIT]], %[[WIDENED]]
func.func @bitwise_identities(%b: tensor<4xi1>, %n: tensor<4xi64>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) {
  %a = torch.aten.bitwise_and.Scalar %b {other = true} : (tensor<4xi1>) -> tensor<4xi1>
  %o = torch.aten.bitwise_or.Scalar %b {other = false} : (tensor<4xi1>) -> tensor<4xi1>
  %x = torch.aten.bitwise_xor.Scalar %b {other = false} : (tensor<4xi1>) -> tensor<4xi1>
  %ia = torch.aten.bitwise_and.Scalar %n {other = -1 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %io = torch.aten.bitwise_or.Scalar %n {other = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %ix = torch.aten.bitwise_xor.Scalar %n {other = false} : (tensor<4xi64>) -> tensor<4xi64>
  %low = torch.aten.bitwise_and.Scalar %n {other = true} : (tensor<4xi64>) -> tensor<4xi64>
  %wide = torch.aten.bitwise_and.Scalar %b {other = 1 : i64} : (tensor<4xi1>) -> tensor<4xi64>
  func.return %a, %o, %x, %ia, %io, %ix, %low, %wide : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @view_pairs_cancel
// CHECK-NEXT:    func.return %x, %x, %x, %x : tensor<2x3xf32>
func.func @view_pairs_cancel(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %t1 = torch.aten.t %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %t2 = torch.aten.t %t1 : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %a = torch.aten.permute %x {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %b = torch.aten.permute %a {dims = array<i64: -1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %f = torch.aten.view %x {size = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
  %g = torch.aten._unsafe_view %f {size = array<i64: 2, 3>} : (tensor<6xf32>) -> tensor<2x3xf32>
  %u = torch.aten.unsqueeze %x {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
  %s = torch.aten.squeeze.dim %u {dim = 0 : i64} : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
  func.return %t2, %b, %g, %s : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @views_compose
// CHECK-NEXT:    %[[P:.*]] = torch.aten.permute %x {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %[[E:.*]] = torch.aten.expand %y {size = array<i64: 5, 2, 3>} : (tensor<1x3xf32>) -> tensor<5x2x3xf32>
// CHECK-NEXT:    func.return %[[P]], %[[E]]
func.func @views_compose(%x: tensor<2x3x4xf32>, %y: tensor<1x3xf32>) -> (tensor<4x2x3xf32>, tensor<5x2x3xf32>) {
  %p1 = torch.aten.permute %x {dims = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %p2 = torch.aten.permute %p1 {dims = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  %e1 = torch.aten.expand %y {size = array<i64: 2, 3>} : (tensor<1x3xf32>) -> tensor<2x3xf32>
  %e2 = torch.aten.expand %e1 {size = array<i64: 5, 2, 3>} : (tensor<2x3xf32>) -> tensor<5x2x3xf32>
  func.return %p2, %e2 : tensor<4x2x3xf32>, tensor<5x2x3xf32>
}

// -----

// rotate_half's gradient as AOTAutograd spells it: each half scattered into zeros, then the sum, is one cat.
// CHECK-LABEL: func.func @complementary_slice_scatters
// CHECK:         %[[N:.*]] = torch.aten.neg %a
// CHECK-NEXT:    %[[C:.*]] = torch.aten.cat [%b, %[[N]]] {dim = 2 : i64} : (tensor<2x5x3xf32>, tensor<2x5x3xf32>) -> tensor<2x5x6xf32>
// CHECK-NEXT:    func.return %[[C]]
func.func @complementary_slice_scatters(%a: tensor<2x5x3xf32>, %b: tensor<2x5x3xf32>) -> tensor<2x5x6xf32> {
  %n = torch.aten.neg %a : (tensor<2x5x3xf32>) -> tensor<2x5x3xf32>
  %z = torch.aten.full {size = array<i64: 2, 5, 6>, fill_value = 0 : i64, dtype = f32} : () -> tensor<2x5x6xf32>
  %s1 = torch.aten.slice_scatter %z, %n {dim = -1 : i64, start = 3 : i64, end = 9223372036854775807 : i64} : (tensor<2x5x6xf32>, tensor<2x5x3xf32>) -> tensor<2x5x6xf32>
  %s2 = torch.aten.slice_scatter %z, %b {dim = 2 : i64, start = 0 : i64, end = 3 : i64} : (tensor<2x5x6xf32>, tensor<2x5x3xf32>) -> tensor<2x5x6xf32>
  %r = torch.aten.add.Tensor %s1, %s2 : (tensor<2x5x6xf32>, tensor<2x5x6xf32>) -> tensor<2x5x6xf32>
  func.return %r : tensor<2x5x6xf32>
}

// -----

// Scatters into a non-zero tensor, or slices that overlap, keep their sum.
// CHECK-LABEL: func.func @other_slice_scatters_stay
// CHECK-COUNT-4: torch.aten.slice_scatter
// CHECK-NOT:     torch.aten.cat
func.func @other_slice_scatters_stay(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>) {
  %z = torch.aten.full {size = array<i64: 2, 6>, fill_value = 1 : i64, dtype = f32} : () -> tensor<2x6xf32>
  %s1 = torch.aten.slice_scatter %z, %a {dim = 1 : i64, start = 3 : i64, end = 6 : i64} : (tensor<2x6xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %s2 = torch.aten.slice_scatter %z, %b {dim = 1 : i64, start = 0 : i64, end = 3 : i64} : (tensor<2x6xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %r = torch.aten.add.Tensor %s1, %s2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %y = torch.aten.full {size = array<i64: 2, 6>, fill_value = 0 : i64, dtype = f32} : () -> tensor<2x6xf32>
  %s3 = torch.aten.slice_scatter %y, %a {dim = 1 : i64, start = 2 : i64, end = 5 : i64} : (tensor<2x6xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %s4 = torch.aten.slice_scatter %y, %b {dim = 1 : i64, start = 0 : i64, end = 3 : i64} : (tensor<2x6xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %q = torch.aten.add.Tensor %s3, %s4 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  func.return %r, %q : tensor<2x6xf32>, tensor<2x6xf32>
}

// -----

// fp8 training's transposed weight: the magnitudes' maximum (one norm: |w| is not a tensor of its own), the
// scaling, the clamp and the cast compute in the weight's own order, and only the fp8 result is permuted (a view
// the matmul reads as a transposed weight).
// CHECK-LABEL: func.func @scaled_transposed_weight
// CHECK-NEXT:    %[[M:.*]] = torch.aten.linalg_vector_norm %w {ord = 0x7ff0000000000000 : f64} : (tensor<48x64xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[X:.*]] = torch.aten.mul.Tensor %w, %s : (tensor<48x64xf32>, tensor<f32>) -> tensor<48x64xf32>
// CHECK-NEXT:    %[[C:.*]] = torch.aten.clamp %[[X]]
// CHECK-NEXT:    %[[Q:.*]] = torch.aten._to_copy %[[C]] {dtype = f8E4M3FN} : (tensor<48x64xf32>) -> tensor<48x64xf8E4M3FN>
// CHECK-NEXT:    %[[T:.*]] = torch.aten.permute %[[Q]] {dims = array<i64: 1, 0>}
// CHECK-NEXT:    func.return %[[T]], %[[M]]
func.func @scaled_transposed_weight(%w: tensor<48x64xf32>, %s: tensor<f32>) -> (tensor<64x48xf8E4M3FN>, tensor<f32>) {
  %t = torch.aten.permute %w {dims = array<i64: 1, 0>} : (tensor<48x64xf32>) -> tensor<64x48xf32>
  %a = torch.aten.abs %t : (tensor<64x48xf32>) -> tensor<64x48xf32>
  %m = torch.aten.max %a : (tensor<64x48xf32>) -> tensor<f32>
  %x = torch.aten.mul.Tensor %t, %s : (tensor<64x48xf32>, tensor<f32>) -> tensor<64x48xf32>
  %c = torch.aten.clamp %x {min = -4.480000e+02 : f64, max = 4.480000e+02 : f64} : (tensor<64x48xf32>) -> tensor<64x48xf32>
  %q = torch.aten._to_copy %c {dtype = f8E4M3FN} : (tensor<64x48xf32>) -> tensor<64x48xf8E4M3FN>
  func.return %q, %m : tensor<64x48xf8E4M3FN>, tensor<f32>
}

// -----

// The largest magnitude is one reduction that folds |x| as it loads; an abs that something else reads stays.
// CHECK-LABEL: func.func @magnitude_maximum
// CHECK-NEXT:    %[[M:.*]] = torch.aten.linalg_vector_norm %x {ord = 0x7ff0000000000000 : f64} : (tensor<48x64xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[N:.*]] = torch.aten.linalg_vector_norm %x {ord = 0x7ff0000000000000 : f64, dim = array<i64: 1>, keepdim = true} : (tensor<48x64xf32>) -> tensor<48x1xf32>
// CHECK-NEXT:    %[[A:.*]] = torch.aten.abs %y
// CHECK-NEXT:    %[[K:.*]] = torch.aten.max %[[A]]
// CHECK-NEXT:    %[[S:.*]] = torch.aten.sum.dim_IntList %[[A]]
// CHECK-NEXT:    func.return %[[M]], %[[N]], %[[K]], %[[S]]
func.func @magnitude_maximum(%x: tensor<48x64xf32>, %y: tensor<48x64xf32>) -> (tensor<f32>, tensor<48x1xf32>, tensor<f32>, tensor<f32>) {
  %a = torch.aten.abs %x : (tensor<48x64xf32>) -> tensor<48x64xf32>
  %m = torch.aten.max %a : (tensor<48x64xf32>) -> tensor<f32>
  %b = torch.aten.abs %x : (tensor<48x64xf32>) -> tensor<48x64xf32>
  %n = torch.aten.amax %b {dim = array<i64: 1>, keepdim = true} : (tensor<48x64xf32>) -> tensor<48x1xf32>
  %c = torch.aten.abs %y : (tensor<48x64xf32>) -> tensor<48x64xf32>
  %k = torch.aten.max %c : (tensor<48x64xf32>) -> tensor<f32>
  %s = torch.aten.sum.dim_IntList %c {dim = array<i64: 0, 1>} : (tensor<48x64xf32>) -> tensor<f32>
  func.return %m, %n, %k, %s : tensor<f32>, tensor<48x1xf32>, tensor<f32>, tensor<f32>
}
