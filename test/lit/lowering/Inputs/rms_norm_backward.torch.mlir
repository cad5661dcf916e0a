// The backward of Llama's RMSNorm in training, as AOTAutograd hands it over (the forward's upcast x, rstd and
// rounded normalized rows saved), with a partial last row tile.
func.func @main(%w: tensor<64xbf16>, %x: tensor<130x64xf32>, %rstd: tensor<130x1xf32>, %normed: tensor<130x64xbf16>, %t: tensor<130x64xbf16>) -> (tensor<130x64xbf16>, tensor<64xbf16>) {
  %gw = torch.aten.mul.Tensor %t, %w : (tensor<130x64xbf16>, tensor<64xbf16>) -> tensor<130x64xbf16>
  %tn = torch.aten.mul.Tensor %t, %normed : (tensor<130x64xbf16>, tensor<130x64xbf16>) -> tensor<130x64xbf16>
  %dw = torch.aten.sum.dim_IntList %tn {dim = array<i64: 0>, keepdim = true} : (tensor<130x64xbf16>) -> tensor<1x64xbf16>
  %dwv = torch.aten.view %dw {size = array<i64: 64>} : (tensor<1x64xbf16>) -> tensor<64xbf16>
  %g = torch.aten._to_copy %gw {dtype = f32} : (tensor<130x64xbf16>) -> tensor<130x64xf32>
  %gx = torch.aten.mul.Tensor %g, %x : (tensor<130x64xf32>, tensor<130x64xf32>) -> tensor<130x64xf32>
  %direct = torch.aten.mul.Tensor %g, %rstd : (tensor<130x64xf32>, tensor<130x1xf32>) -> tensor<130x64xf32>
  %s = torch.aten.sum.dim_IntList %gx {dim = array<i64: 1>, keepdim = true} : (tensor<130x64xf32>) -> tensor<130x1xf32>
  %cube = torch.aten.pow.Tensor_Scalar %rstd {exponent = 3 : i64} : (tensor<130x1xf32>) -> tensor<130x1xf32>
  %half = torch.aten.mul.Scalar %s {other = -5.000000e-01 : f64} : (tensor<130x1xf32>) -> tensor<130x1xf32>
  %c = torch.aten.mul.Tensor %half, %cube : (tensor<130x1xf32>, tensor<130x1xf32>) -> tensor<130x1xf32>
  %e = torch.aten.expand %c {size = array<i64: 130, 64>} : (tensor<130x1xf32>) -> tensor<130x64xf32>
  %d = torch.aten.div.Scalar %e {other = 64 : i64} : (tensor<130x64xf32>) -> tensor<130x64xf32>
  %x2 = torch.aten.mul.Scalar %x {other = 2.000000e+00 : f64} : (tensor<130x64xf32>) -> tensor<130x64xf32>
  %corr = torch.aten.mul.Tensor %d, %x2 : (tensor<130x64xf32>, tensor<130x64xf32>) -> tensor<130x64xf32>
  %sum = torch.aten.add.Tensor %direct, %corr : (tensor<130x64xf32>, tensor<130x64xf32>) -> tensor<130x64xf32>
  %dx = torch.aten._to_copy %sum {dtype = bf16} : (tensor<130x64xf32>) -> tensor<130x64xbf16>
  func.return %dx, %dwv : tensor<130x64xbf16>, tensor<64xbf16>
}
