// A bf16 output that differs from ATen's bf16 run of the input is judged against a float64 run of it: ATen's
// layer norm backward sums the bias gradient's 600 rows in bf16, the compiled program in fp32, so eager is the
// one off (an input found by the fuzzer).
// RUN: neuron-opt %s -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s
func.func @layer_norm_backward_rows(%g: tensor<600x64xbf16>, %x: tensor<600x64xbf16>, %mean: tensor<600x1xbf16>, %rstd: tensor<600x1xbf16>, %w: tensor<64xbf16>, %b: tensor<64xbf16>) -> (tensor<600x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  %0, %1, %2 = torch.aten.native_layer_norm_backward %g, %x, %mean, %rstd, %w, %b {normalized_shape = array<i64: 64>, output_mask = array<i1: true, true, true>} : (tensor<600x64xbf16>, tensor<600x64xbf16>, tensor<600x1xbf16>, tensor<600x1xbf16>, tensor<64xbf16>, tensor<64xbf16>) -> (tensor<600x64xbf16>, tensor<64xbf16>, tensor<64xbf16>)
  func.return %0, %1, %2 : tensor<600x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}
// CHECK: check-semantics: 6 inputs, all outputs match
// CHECK-NOT: differ
