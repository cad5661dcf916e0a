// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-loops | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-loops --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Loop nests of consecutive ops fused, stores forwarded to loads, dead stores dropped
// (lowering/tile_fuse_loops.py).
// SEMANTICS-COUNT-4: all outputs match

// gelu(2x + 1) * x over 2x300x2100: each op's nest is a loop of four 2048-wide tiles and a peeled 1808-wide
// remainder. The four nests become one loop and one remainder block; x is loaded once per tile (the final
// multiply reuses the first load), the result of 2x is still stored because it is returned, and 2x + 1 and the
// gelu never reach HBM. Each op keeps its own rounding to bf16.
// CHECK-LABEL: func.func @main(%x: memref<2x300x2100xbf16
// CHECK:       %[[TWICE:.*]] = memref.alloc() : memref<2x300x2100xbf16, #mem<hbm>>
// CHECK:       %[[OUT:.*]] = memref.alloc() : memref<2x300x2100xbf16, #mem<hbm>>
// CHECK-NOT:   memref.alloc
// CHECK:       scf.for %[[F:.*]] = %c0 to %c8192 step %c2048 {
// CHECK-NEXT:    %[[X:.*]] = tile.load %{{.*}}[%c0, %[[F]]] : memref<126x10000xbf16, #mem<hbm>> -> !tile.tile<126x2048xbf16, sbuf>
// CHECK-NEXT:    %[[A:.*]] = tile.binary_scalar %[[X]] {op = "multiply", scalar = 2.000000e+00 : f64} : {{.*}} -> !tile.tile<126x2048xbf16, sbuf>
// CHECK-NEXT:    tile.store %[[A]], %{{.*}}[%c0, %[[F]]]
// CHECK-NEXT:    %[[B:.*]] = tile.binary_scalar %[[A]] {op = "add", scalar = 1.000000e+00 : f64}
// CHECK-NEXT:    %[[G:.*]] = tile.unary %[[B]] {fn = "gelu"}
// CHECK-NEXT:    %[[Y:.*]] = tile.binary %[[G]], %[[X]] {op = "multiply"}
// CHECK-NEXT:    tile.store %[[Y]], %{{.*}}[%c0, %[[F]]]
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[XR:.*]] = tile.load %{{.*}}[%c0, %c8192] {{.*}} -> !tile.tile<126x1808xbf16, sbuf>
// CHECK-COUNT-2: tile.store
// CHECK-NOT:   tile.load
// CHECK:       func.return %[[TWICE]], %[[OUT]]
func.func @main(%x: tensor<2x300x2100xbf16>) -> (tensor<2x300x2100xbf16>, tensor<2x300x2100xbf16>) {
  %0 = torch.aten.mul.Scalar %x {other = 2.000000e+00 : f64} : (tensor<2x300x2100xbf16>) -> tensor<2x300x2100xbf16>
  %1 = torch.aten.add.Scalar %0 {other = 1.000000e+00 : f64} : (tensor<2x300x2100xbf16>) -> tensor<2x300x2100xbf16>
  %2 = torch.aten.gelu %1 : (tensor<2x300x2100xbf16>) -> tensor<2x300x2100xbf16>
  %3 = torch.aten.mul.Tensor %2, %x : (tensor<2x300x2100xbf16>, tensor<2x300x2100xbf16>) -> tensor<2x300x2100xbf16>
  func.return %0, %3 : tensor<2x300x2100xbf16>, tensor<2x300x2100xbf16>
}

// -----

// A cast at the end of a chain: the bf16 negation is forwarded into the fp32 copy in the same iteration.
// CHECK-LABEL: func.func @main(%x: memref<300x40xbf16
// CHECK:       tile.load
// CHECK-NEXT:  tile.binary_scalar %{{.*}} {op = "multiply", scalar = -1.000000e+00 : f64}
// CHECK:       tile.copy %{{.*}} : (!tile.tile<125x96xbf16, sbuf>) -> !tile.tile<125x96xf32, sbuf>
// CHECK-NEXT:  tile.store
// CHECK-NOT:   tile.load
func.func @main(%x: tensor<300x40xbf16>) -> tensor<300x40xf32> {
  %0 = torch.aten.neg %x : (tensor<300x40xbf16>) -> tensor<300x40xbf16>
  %1 = torch.aten._to_copy %0 {dtype = f32} : (tensor<300x40xbf16>) -> tensor<300x40xf32>
  func.return %1 : tensor<300x40xf32>
}

// -----

// Nests over different tilings of the same tensor stay apart: the bias add walks [37, 130] rows (the bias is a
// stride-0 view), the relu the contiguous tensor as [74, 65], so the relu loads what the add stored. The
// sigmoid-times-x pair shares its tiling and fuses, loading x once.
// CHECK-LABEL: func.func @main(%x: memref<37x130xf32
// CHECK:       tile.binary %{{.*}}, %{{.*}} {op = "add"}
// CHECK-NEXT:  tile.store
// CHECK:       tile.load %{{.*}} : memref<74x65xf32, #mem<hbm>> -> !tile.tile<74x65xf32, sbuf>
// CHECK-NEXT:  tile.unary %{{.*}} {fn = "relu"}
// CHECK-NEXT:  tile.store
// CHECK:       %[[X:.*]] = tile.load
// CHECK-NEXT:  %[[S:.*]] = tile.unary %[[X]] {fn = "sigmoid"}
// CHECK:       tile.binary %[[S]], %[[X]] {op = "multiply"}
// CHECK-NEXT:  tile.store
// CHECK-NOT:   tile.load
func.func @main(%x: tensor<37x130xf32>, %b: tensor<130xf32>) -> (tensor<37x130xf32>, tensor<37x130xf32>) {
  %0 = torch.aten.add.Tensor %x, %b : (tensor<37x130xf32>, tensor<130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.relu %0 : (tensor<37x130xf32>) -> tensor<37x130xf32>
  %2 = torch.aten.sigmoid %x : (tensor<37x130xf32>) -> tensor<37x130xf32>
  %3 = torch.aten.mul.Tensor %2, %x : (tensor<37x130xf32>, tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %1, %3 : tensor<37x130xf32>, tensor<37x130xf32>
}

// -----

// Reading the intermediate transposed is not the tile that was stored: it stays in HBM and is loaded again.
// CHECK-LABEL: func.func @main(%x: memref<64x64xf32
// CHECK:       tile.unary %{{.*}} {fn = "exp"}
// CHECK-NEXT:  tile.store
// CHECK:       tile.load %{{.*}} : memref<64x64xf32, strided<[1, 64]>, #mem<hbm>> -> !tile.tile<64x64xf32, sbuf>
func.func @main(%x: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %0 = torch.aten.exp %x : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %1 = torch.aten.t %0 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %2 = torch.aten.add.Tensor %1, %x : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %0, %2 : tensor<64x64xf32>, tensor<64x64xf32>
}
