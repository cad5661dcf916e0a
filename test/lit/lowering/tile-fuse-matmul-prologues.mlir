// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-prologues | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-prologues --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Layer norms that only a matmul reads, as A (lowering/tile_fuse_matmul_prologues.py), and those left alone:
// every case computes what the unfused nests compute.
// SEMANTICS-COUNT-8: all outputs match

// Read only by an addmm as A, through a view: the layer norm's result never reaches HBM. The matmul normalizes
// the rows of x where it loaded the layer norm's rows, transposes them, and applies weight and bias per
// partition (a feature) as each transposed tile leaves PSUM.
// CHECK-LABEL: func.func @main(%x: memref<1x300x256xbf16
// CHECK-NOT:   memref.alloc() : memref<1x300x256xbf16
// CHECK:       %[[ROWS:.*]] = tile.view %x : memref<1x300x256xbf16, #mem<hbm>> to memref<300x256xbf16, #mem<hbm>>
// CHECK:       %[[G:.*]] = tile.view %g : memref<256xbf16, #mem<hbm>> to memref<128x2xbf16, strided<[1, 128]>, #mem<hbm>>
// CHECK:       %[[G_COLUMNS:.*]] = tile.load %[[G]][%c0, %c0] {{.*}} -> !tile.tile<128x2xbf16, sbuf>
// CHECK:       %[[B:.*]] = tile.view %b : memref<256xbf16, #mem<hbm>> to memref<128x2xbf16, strided<[1, 128]>, #mem<hbm>>
// CHECK:       %[[B_COLUMNS:.*]] = tile.load %[[B]][%c0, %c0] {{.*}} -> !tile.tile<128x2xbf16, sbuf>
// CHECK:       %[[X0:.*]] = tile.load %[[ROWS]][%c0, %c0] {{.*}} -> !tile.tile<128x256xbf16, sbuf>
// Each row squared about its first element; a tile's load and passes over its rows ahead of the tile before's
// column ops (its rsqrt), so that the next square does not queue behind them, and each load just before its
// tile's passes, so that copies building forwarded rows do not queue ahead of the earlier tiles' passes.
// CHECK:       tile.extract %[[X0]][%c0] : !tile.tile<128x256xbf16, sbuf> -> !tile.tile<128x1xbf16, sbuf>
// CHECK:       %[[SQUARES0:.*]] = tile.unary %[[X0]] bias %{{.*}} {fn = "square", scale = -1.000000e+00 : f64}
// CHECK:       %[[DEVIATION0:.*]] = tile.reduce %[[SQUARES0]]
// CHECK:       tile.reduce %[[X0]]
// CHECK:       %[[X1:.*]] = tile.load %[[ROWS]][%c128, %c0] {{.*}} -> !tile.tile<128x256xbf16, sbuf>
// CHECK:       tile.unary %[[X1]] bias %{{.*}} {fn = "square", scale = -1.000000e+00 : f64}
// CHECK:       tile.reduce %[[X1]]
// CHECK:       tile.unary %[[DEVIATION0]] bias %{{.*}} {fn = "rsqrt"
// CHECK:       %[[N0:.*]] = tile.binary_scalar {{.*}} column {{.*}} {op = "multiply"} : {{.*}} -> !tile.tile<128x256xbf16, sbuf>
// CHECK:       scf.for %[[T:.*]] = %c0 to %c2 step %c1
// CHECK:         %[[TILE:.*]] = tile.extract %[[N0]]
// CHECK:         %[[TRANSPOSED:.*]] = tile.transpose %[[TILE]] : !tile.tile<128x128xbf16, sbuf> -> !tile.tile<128x128xbf16, psum>
// CHECK:         %[[G_T:.*]] = tile.extract %[[G_COLUMNS]][%[[T]]]
// CHECK:         %[[SCALED:.*]] = tile.binary_scalar %[[TRANSPOSED]] column %[[G_T]] {op = "multiply"} : {{.*}} -> !tile.tile<128x128xf32, sbuf>
// CHECK:         %[[B_T:.*]] = tile.extract %[[B_COLUMNS]][%[[T]]]
// CHECK:         %[[AFFINE:.*]] = tile.binary_scalar %[[SCALED]] column %[[B_T]] {op = "add"} : {{.*}} -> !tile.tile<128x128xbf16, sbuf>
// CHECK:         tile.insert %[[AFFINE]]
// CHECK:       tile.matmul
// CHECK-NOT:   memref.alloc() : memref<1x300x256xbf16
// CHECK:       func.return
func.func @main(%x: tensor<1x300x256xbf16>, %g: tensor<256xbf16>, %b: tensor<256xbf16>, %w1: tensor<256x128xbf16>, %b1: tensor<128xbf16>) -> tensor<300x128xbf16> {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %b {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<1x300x256xbf16>, tensor<256xbf16>, tensor<256xbf16>) -> (tensor<1x300x256xbf16>, tensor<1x300x1xbf16>, tensor<1x300x1xbf16>)
  %v = torch.aten.view %0 {size = array<i64: 300, 256>} : (tensor<1x300x256xbf16>) -> tensor<300x256xbf16>
  %h = torch.aten.addmm %b1, %v, %w1 : (tensor<128xbf16>, tensor<300x256xbf16>, tensor<256x128xbf16>) -> tensor<300x128xbf16>
  func.return %h : tensor<300x128xbf16>
}

// -----

// K = 200, not a multiple of 128: the full K tile goes through the panel loop, the partial last one of 72 is
// transposed after it, its affine applied with the last 72 features' columns.
// CHECK-LABEL: func.func @main(%rest: memref<1x130x200xbf16
// CHECK-NOT:   memref.alloc() : memref<1x130x200xbf16
// CHECK:       %[[ROWS:.*]] = tile.view %rest : memref<1x130x200xbf16, #mem<hbm>> to memref<130x200xbf16, #mem<hbm>>
// CHECK:       %[[GAMMA:.*]] = tile.load %{{.*}} -> !tile.tile<128x1xbf16, sbuf>
// CHECK:       %[[GAMMA_REST:.*]] = tile.load %{{.*}} -> !tile.tile<72x1xbf16, sbuf>
// CHECK:       %[[BETA:.*]] = tile.load %{{.*}} -> !tile.tile<128x1xbf16, sbuf>
// CHECK:       %[[BETA_REST:.*]] = tile.load %{{.*}} -> !tile.tile<72x1xbf16, sbuf>
// CHECK:       %[[X0:.*]] = tile.load %[[ROWS]][%c0, %c0] {{.*}} -> !tile.tile<128x200xbf16, sbuf>
// CHECK:       tile.reduce %[[X0]]
// CHECK:       %[[X1:.*]] = tile.load %[[ROWS]][%c128, %c0] {{.*}} -> !tile.tile<2x200xbf16, sbuf>
// CHECK:       tile.reduce %[[X1]]
// CHECK:       %[[N0:.*]] = tile.binary_scalar {{.*}} {op = "multiply"} : {{.*}} -> !tile.tile<128x200xbf16, sbuf>
// CHECK:       scf.for %[[K:.*]] = %c0 to %c1 step %c1 iter_args
// CHECK:         %[[BLOCK:.*]] = tile.extract %[[N0]]
// CHECK:         %[[T:.*]] = tile.transpose %[[BLOCK]] : !tile.tile<128x128xbf16, sbuf> -> !tile.tile<128x128xbf16, psum>
// CHECK:         %[[G:.*]] = tile.extract %[[GAMMA]][%[[K]]] : !tile.tile<128x1xbf16, sbuf> -> !tile.tile<128x1xbf16, sbuf>
// CHECK:         %[[SCALED:.*]] = tile.binary_scalar %[[T]] column %[[G]] {op = "multiply"}
// CHECK:         %[[B:.*]] = tile.extract %[[BETA]][%[[K]]]
// CHECK:         %[[AFFINE:.*]] = tile.binary_scalar %[[SCALED]] column %[[B]] {op = "add"} : {{.*}} -> !tile.tile<128x128xbf16, sbuf>
// CHECK:         tile.insert %[[AFFINE]]
// CHECK:       tile.transpose {{.*}} -> !tile.tile<72x128xbf16, psum>
// CHECK:       tile.binary_scalar {{.*}} column %[[GAMMA_REST]] {op = "multiply"}
// CHECK:       tile.binary_scalar {{.*}} column %[[BETA_REST]] {op = "add"}
// CHECK:       tile.matmul
// CHECK-NOT:   memref.alloc() : memref<1x130x200xbf16
// CHECK:       func.return
func.func @main(%rest: tensor<1x130x200xbf16>, %g: tensor<200xbf16>, %b: tensor<200xbf16>, %w: tensor<200x70xbf16>, %c: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %0, %1, %2 = torch.aten.native_layer_norm %rest, %g, %b {normalized_shape = array<i64: 200>, eps = 1.000000e-05 : f64} : (tensor<1x130x200xbf16>, tensor<200xbf16>, tensor<200xbf16>) -> (tensor<1x130x200xbf16>, tensor<1x130x1xbf16>, tensor<1x130x1xbf16>)
  %v = torch.aten.view %0 {size = array<i64: 130, 200>} : (tensor<1x130x200xbf16>) -> tensor<130x200xbf16>
  %r = torch.aten.addmm %c, %v, %w : (tensor<70xbf16>, tensor<130x200xbf16>, tensor<200x70xbf16>) -> tensor<130x70xbf16>
  func.return %r : tensor<130x70xbf16>
}

// -----

// K = 32, below one tile: no panel loop, each row tile's [m, 32] rows are the matmul's stationary operand whole,
// transposed to [32, m] on their own. The rows are normalized where they were loaded, every tile's loads and
// statistics before any tile's normalization, and weight and bias applied per partition as the transposes
// leave PSUM, with [32, 1] columns of the vectors.
// CHECK-LABEL: func.func @main(%short: memref<130x32xf32
// CHECK-NOT:   memref.alloc() : memref<130x32xf32
// CHECK:       %[[G:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       %[[B:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       %[[X0:.*]] = tile.load %short[%c0, %c0] {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK:       tile.reduce %[[X0]]
// CHECK:       %[[X1:.*]] = tile.load %short[%c128, %c0] {{.*}} -> !tile.tile<2x32xf32, sbuf>
// CHECK:       tile.reduce %[[X1]]
// CHECK:       %[[N0:.*]] = tile.binary_scalar {{.*}} {op = "multiply"} : {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK:       %[[N1:.*]] = tile.binary_scalar {{.*}} {op = "multiply"} : {{.*}} -> !tile.tile<2x32xf32, sbuf>
// CHECK:       %[[T0:.*]] = tile.transpose %[[N0]] : !tile.tile<128x32xf32, sbuf> -> !tile.tile<32x128xf32, psum>
// CHECK-NEXT:  %[[S0:.*]] = tile.binary_scalar %[[T0]] column %[[G]] {op = "multiply"}
// CHECK-NEXT:  %[[A0:.*]] = tile.binary_scalar %[[S0]] column %[[B]] {op = "add"} : {{.*}} -> !tile.tile<32x128xf32, sbuf>
// CHECK:       %[[T1:.*]] = tile.transpose %[[N1]] : !tile.tile<2x32xf32, sbuf> -> !tile.tile<32x2xf32, psum>
// CHECK:       %[[A1:.*]] = tile.binary_scalar {{.*}} column %[[B]] {op = "add"} : {{.*}} -> !tile.tile<32x2xf32, sbuf>
// CHECK:       tile.matmul %[[A0]]
// CHECK:       tile.matmul %[[A1]]
// CHECK-NOT:   memref.alloc() : memref<130x32xf32
// CHECK:       func.return
func.func @main(%short: tensor<130x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>, %w: tensor<32x70xf32>, %c: tensor<70xf32>) -> tensor<130x70xf32> {
  %0, %1, %2 = torch.aten.native_layer_norm %short, %g, %b {normalized_shape = array<i64: 32>, eps = 1.000000e-05 : f64} : (tensor<130x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<130x32xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %r = torch.aten.addmm %c, %0, %w : (tensor<70xf32>, tensor<130x32xf32>, tensor<32x70xf32>) -> tensor<130x70xf32>
  func.return %r : tensor<130x70xf32>
}

// -----

// Without an affine, in fp32: the normalized rows are transposed as they are.
// CHECK-LABEL: func.func @main(%plain: memref<130x256xf32
// CHECK-NOT:   memref.alloc() : memref<130x256xf32
// CHECK:       tile.transpose
// CHECK-NOT:   tile.binary_scalar
// CHECK:       tile.insert
// CHECK:       tile.matmul
func.func @main(%plain: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> tensor<130x64xf32> {
  %n, %mean, %rstd = torch.aten.native_layer_norm %plain, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %p = torch.aten.mm %n, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p : tensor<130x64xf32>
}

// -----

// Left alone: the normalized result is also returned.
// CHECK-LABEL: func.func @main(%also:
// CHECK:       %[[N:.*]] = memref.alloc() : memref<130x256xf32, #mem<hbm>>
// CHECK:       tile.store {{.*}}, %[[N]]
// CHECK:       tile.load %[[N]]
// CHECK:       tile.matmul
func.func @main(%also: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> (tensor<130x64xf32>, tensor<130x256xf32>) {
  %n, %mean, %rstd = torch.aten.native_layer_norm %also, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %p = torch.aten.mm %n, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p, %n : tensor<130x64xf32>, tensor<130x256xf32>
}

// -----

// Left alone: the statistics are stored too (a training graph saves them for the backward), so the layer norm
// keeps its nest, and computing the rows twice would cost more than loading them.
// CHECK-LABEL: func.func @main(%stats:
// CHECK:       %[[N:.*]] = memref.alloc() : memref<130x256xf32, #mem<hbm>>
// CHECK:       tile.store {{.*}}, %[[N]]
// CHECK:       tile.load %[[N]]
func.func @main(%stats: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> (tensor<130x64xf32>, tensor<130x1xf32>) {
  %n, %mean, %rstd = torch.aten.native_layer_norm %stats, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %p = torch.aten.mm %n, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p, %rstd : tensor<130x64xf32>, tensor<130x1xf32>
}

// -----

// Left alone: the matmul reads the layer norm as B, whose K tiles are loaded with K on partitions.
// CHECK-LABEL: func.func @main(%asb:
// CHECK:       %[[N:.*]] = memref.alloc() : memref<64x256xf32, #mem<hbm>>
// CHECK:       tile.store {{.*}}, %[[N]]
// CHECK:       tile.load %{{.*}}
func.func @main(%asb: tensor<64x256xf32>, %y: tensor<130x64xf32>) -> tensor<130x256xf32> {
  %n, %mean, %rstd = torch.aten.native_layer_norm %asb, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<64x256xf32>) -> (tensor<64x256xf32>, tensor<64x1xf32>, tensor<64x1xf32>)
  %p = torch.aten.mm %y, %n : (tensor<130x64xf32>, tensor<64x256xf32>) -> tensor<130x256xf32>
  func.return %p : tensor<130x256xf32>
}

// -----

// Left alone: an elementwise op between the layer norm and the matmul, whose nest walks the elements in its own
// tiling, not the matmul's rows.
// CHECK-LABEL: func.func @main(%between:
// CHECK:       %[[N:.*]] = memref.alloc() : memref<130x256xf32, #mem<hbm>>
// CHECK:       %[[E:.*]] = memref.alloc() : memref<130x256xf32, #mem<hbm>>
// CHECK:       tile.load %[[E]]
// CHECK:       tile.matmul
func.func @main(%between: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> tensor<130x64xf32> {
  %n, %mean, %rstd = torch.aten.native_layer_norm %between, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %e = torch.aten.exp %n : (tensor<130x256xf32>) -> tensor<130x256xf32>
  %p = torch.aten.mm %e, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p : tensor<130x64xf32>
}
