// Llama's RMSNorm in training, as AOTAutograd hands it over (the upcast and rstd saved for the backward), with a
// partial last row tile.
func.func @main(%x: tensor<130x64xbf16>, %w: tensor<64xbf16>) -> (tensor<130x64xbf16>, tensor<130x64xf32>, tensor<130x1xf32>, tensor<130x64xbf16>) {
  %up = torch.aten._to_copy %x {dtype = f32} : (tensor<130x64xbf16>) -> tensor<130x64xf32>
  %sq = torch.aten.pow.Tensor_Scalar %up {exponent = 2 : i64} : (tensor<130x64xf32>) -> tensor<130x64xf32>
  %mean = torch.aten.mean.dim %sq {dim = array<i64: -1>, keepdim = true} : (tensor<130x64xf32>) -> tensor<130x1xf32>
  %shifted = torch.aten.add.Scalar %mean {other = 1.000000e-05 : f64} : (tensor<130x1xf32>) -> tensor<130x1xf32>
  %rstd = torch.aten.rsqrt %shifted : (tensor<130x1xf32>) -> tensor<130x1xf32>
  %norm = torch.aten.mul.Tensor %up, %rstd : (tensor<130x64xf32>, tensor<130x1xf32>) -> tensor<130x64xf32>
  %down = torch.aten._to_copy %norm {dtype = bf16} : (tensor<130x64xf32>) -> tensor<130x64xbf16>
  %out = torch.aten.mul.Tensor %w, %down : (tensor<64xbf16>, tensor<130x64xbf16>) -> tensor<130x64xbf16>
  func.return %out, %up, %rstd, %down : tensor<130x64xbf16>, tensor<130x64xf32>, tensor<130x1xf32>, tensor<130x64xbf16>
}
