// RUN: neuron-opt %s --split-input-file -p torch-fuse-batch-norm-casts | filecheck %s
// RUN: neuron-opt %s --split-input-file -p torch-fuse-batch-norm-casts,convert-torch-to-tile | filecheck %s --check-prefix=TILE
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s --check-prefix=UNMARKED

// A bf16 BatchNorm2d in training, as AOTAutograd writes it: the running statistics come out in fp32 and are cast
// back to the module's bf16 buffers. The casts are marked; the channel nest then writes them from the channel
// tile's columns (bf16 [3, 1] stores beside the fp32 ones, before the normalization's second pass), and no nest of
// their own loads the fp32 vectors back. Unmarked, each cast keeps its own nest.
// CHECK-LABEL: func.func @running_statistics_cast_back
// CHECK:         torch.aten._native_batch_norm_legit_functional
// CHECK-NEXT:    torch.aten._to_copy %rm32 {{.*}}neuron.fuse = "batch_norm_columns"}
// CHECK-NEXT:    torch.aten._to_copy %rv32 {{.*}}neuron.fuse = "batch_norm_columns"}
// TILE-LABEL:  func.func @running_statistics_cast_back
// TILE-COUNT-2: tile.store %{{.*}} : !tile.tile<3x1xbf16, sbuf>, memref<3x1xbf16, strided<[1, 0]>, #mem<hbm>>
// TILE:         tile.store %{{.*}} : !tile.tile<3x5xbf16, sbuf>, memref<4x3x5xbf16, #mem<hbm>>
// TILE-NOT:     tile.load %{{.*}} : memref<3x1xf32
// TILE:         func.return
// UNMARKED-LABEL: func.func @running_statistics_cast_back
// UNMARKED:       tile.store %{{.*}} : !tile.tile<3x5xbf16, sbuf>, memref<4x3x5xbf16, #mem<hbm>>
// UNMARKED:       tile.load %{{.*}} -> !tile.tile<3x1xf32, sbuf>
func.func @running_statistics_cast_back(%x: tensor<4x3x5xbf16>, %rm: tensor<3xbf16>, %rv: tensor<3xbf16>) -> (tensor<4x3x5xbf16>, tensor<3xbf16>, tensor<3xbf16>) {
  %out, %mean, %rstd, %rm32, %rv32 = torch.aten._native_batch_norm_legit_functional %x, none, none, %rm, %rv {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<4x3x5xbf16>, tensor<3xbf16>, tensor<3xbf16>) -> (tensor<4x3x5xbf16>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  %rm16 = torch.aten._to_copy %rm32 {dtype = bf16, layout = "strided"} : (tensor<3xf32>) -> tensor<3xbf16>
  %rv16 = torch.aten._to_copy %rv32 {dtype = bf16, layout = "strided"} : (tensor<3xf32>) -> tensor<3xbf16>
  func.return %out, %rm16, %rv16 : tensor<4x3x5xbf16>, tensor<3xbf16>, tensor<3xbf16>
}

// -----

// Outside training a batch norm's results hold no batch statistics: nothing is marked, and a cast that is not a
// plain element type change (to another layout) is never marked.
// CHECK-LABEL: func.func @eval_mode
// CHECK-NOT:     neuron.fuse
func.func @eval_mode(%x: tensor<4x3x5xf32>, %rm: tensor<3xf32>, %rv: tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xbf16>) {
  %out, %mean, %rstd, %rm2, %rv2 = torch.aten._native_batch_norm_legit_functional %x, none, none, %rm, %rv {training = false, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<0xf32>, tensor<0xf32>, tensor<3xf32>, tensor<3xf32>)
  %c = torch.aten._to_copy %rm2 {dtype = bf16, layout = "strided"} : (tensor<3xf32>) -> tensor<3xbf16>
  func.return %out, %c : tensor<4x3x5xf32>, tensor<3xbf16>
}
