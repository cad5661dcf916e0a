// RUN: neuron-opt %s | filecheck %s

// Every view op of the torch dialect with a result type its arguments give, ATen's edge cases included (negative
// dimensions, -1 sizes, clamped slice bounds): the verifier accepts them all. invalid-views.mlir holds the
// rejected forms.

// CHECK-LABEL: func.func @views
func.func @views(%x: tensor<2x3x4xf32>, %m: tensor<5x7xf32>, %c: tensor<4x3xcomplex<f32>>, %r: tensor<4x3x2xf32>, %d: tensor<?x4xf32>) {
  // CHECK: torch.aten.permute
  %0 = torch.aten.permute %x {dims = array<i64: -1, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = torch.aten.permute_copy %x {dims = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  // CHECK: torch.aten.view
  %2 = torch.aten.view %x {size = array<i64: -1, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %3 = torch.aten._unsafe_view %x {size = array<i64: 24>} : (tensor<2x3x4xf32>) -> tensor<24xf32>
  %4 = torch.aten.view_copy %x {size = array<i64: 2, 12>} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
  %5 = torch.aten.view %d {size = array<i64: -1>} : (tensor<?x4xf32>) -> tensor<?xf32>
  // CHECK: torch.aten.expand
  %6 = torch.aten.expand %r {size = array<i64: 6, -1, 3, 2>} : (tensor<4x3x2xf32>) -> tensor<6x4x3x2xf32>
  %7 = torch.aten.t %m : (tensor<5x7xf32>) -> tensor<7x5xf32>
  %8 = torch.aten.squeeze.dim %6 {dim = 0 : i64} : (tensor<6x4x3x2xf32>) -> tensor<6x4x3x2xf32>
  %9 = torch.aten.unsqueeze %m {dim = -1 : i64} : (tensor<5x7xf32>) -> tensor<5x7x1xf32>
  %10 = torch.aten.squeeze.dims %9 {dim = array<i64: 0, 2>} : (tensor<5x7x1xf32>) -> tensor<5x7xf32>
  // CHECK: torch.aten.slice.Tensor
  %11 = torch.aten.slice.Tensor %m {dim = 1 : i64, start = -3 : i64, end = 9223372036854775807 : i64, step = 2 : i64} : (tensor<5x7xf32>) -> tensor<5x2xf32>
  %12 = torch.aten.slice.Tensor %m {start = 4 : i64, end = 2 : i64} : (tensor<5x7xf32>) -> tensor<0x7xf32>
  %13 = torch.aten.select.int %x {dim = -2 : i64, index = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %14 = torch.aten.narrow_copy %m {dim = 1 : i64, start = 2 : i64, length = 5 : i64} : (tensor<5x7xf32>) -> tensor<5x5xf32>
  // CHECK: torch.aten.as_strided
  %15 = torch.aten.as_strided %m {size = array<i64: 4, 4>, stride = array<i64: 8, 1>, storage_offset = 3 : i64} : (tensor<5x7xf32>) -> tensor<4x4xf32>
  %16 = torch.aten.as_strided_copy %m {size = array<i64: 5>, stride = array<i64: 7>} : (tensor<5x7xf32>) -> tensor<5xf32>
  %17 = torch.aten.diagonal %x {offset = 1 : i64, dim1 = 2 : i64, dim2 = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x2xf32>
  %18 = torch.aten.unfold %m {dimension = 1 : i64, size = 3 : i64, step = 2 : i64} : (tensor<5x7xf32>) -> tensor<5x3x3xf32>
  %19:2 = torch.aten.split_with_sizes %x {split_sizes = array<i64: 1, 3>, dim = -1 : i64} : (tensor<2x3x4xf32>) -> (tensor<2x3x1xf32>, tensor<2x3x3xf32>)
  %20:2 = torch.aten.unbind_copy.int %x : (tensor<2x3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
  // CHECK: torch.aten.view_as_real
  %21 = torch.aten.view_as_real %c : (tensor<4x3xcomplex<f32>>) -> tensor<4x3x2xf32>
  %22 = torch.aten.view_as_complex %r : (tensor<4x3x2xf32>) -> tensor<4x3xcomplex<f32>>
  %23 = torch.aten.alias %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %24 = torch.aten._conj %c : (tensor<4x3xcomplex<f32>>) -> tensor<4x3xcomplex<f32>>
  func.return
}
