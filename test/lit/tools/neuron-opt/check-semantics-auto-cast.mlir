// Under a module's auto_cast mode the pipeline computes fp32 matmuls and convolutions from bf16-rounded operands while
// the input runs as written: --check-semantics compares them at bf16's tolerance (fp32's flagged this convolution).
// RUN: neuron-opt %s -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s
// CHECK: check-semantics: {{[0-9]+}} inputs, all outputs match

builtin.module attributes {neuron.auto_cast = "matmul"} {
  func.func @convolution(%x: tensor<1x3x8x8xf32>, %wh: tensor<4x3x3x3xbf16>, %b: tensor<4xf32>) -> tensor<1x4x6x6xf32> {
    %w = torch.aten._to_copy %wh {dtype = f32} : (tensor<4x3x3x3xbf16>) -> tensor<4x3x3x3xf32>
    %y = torch.aten.convolution %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
    func.return %y : tensor<1x4x6x6xf32>
  }
}
