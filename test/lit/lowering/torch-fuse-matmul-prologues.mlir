// RUN: neuron-opt %s --split-input-file -p torch-fuse-matmul-prologues | filecheck %s
// RUN: neuron-opt %s --split-input-file -p torch-fuse-matmul-prologues,convert-torch-to-tile | filecheck %s --check-prefix=TILE
// RUN: neuron-opt %s --split-input-file -p torch-fuse-matmul-prologues,convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// The conversion alone follows only marks the IR bears out (the stale one below is not).
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Which layer norms run in the prologue of the matmul reading them (lowering/torch_fuse_matmul_prologues.py),
// and what convert-torch-to-tile makes of the marks: every case computes what the unfused ops compute.
// SEMANTICS-COUNT-6: all outputs match

// Read only by an addmm as A, through a view: marked. The layer norm's result never reaches HBM: the matmul
// normalizes the rows it loads from x.
// CHECK-LABEL: func.func @main(%x:
// CHECK:       torch.aten.native_layer_norm {{.*}} {normalized_shape = array<i64: 200>, eps = 1.000000e-05 : f64, neuron.fuse = "matmul_prologue"}
// TILE-LABEL: func.func @main(%x:
// TILE-NOT:    memref.alloc() : memref<1x130x200xbf16
// TILE:        tile.view %x : memref<1x130x200xbf16, #mem<hbm>> to memref<130x200xbf16, #mem<hbm>>
// TILE:        tile.reduce
// TILE:        tile.transpose
// TILE:        tile.matmul
// TILE-NOT:    memref.alloc
// TILE:        func.return
func.func @main(%x: tensor<1x130x200xbf16>, %g: tensor<200xbf16>, %b: tensor<200xbf16>, %w: tensor<200x70xbf16>, %c: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %b {normalized_shape = array<i64: 200>, eps = 1.000000e-05 : f64} : (tensor<1x130x200xbf16>, tensor<200xbf16>, tensor<200xbf16>) -> (tensor<1x130x200xbf16>, tensor<1x130x1xbf16>, tensor<1x130x1xbf16>)
  %v = torch.aten.view %0 {size = array<i64: 130, 200>} : (tensor<1x130x200xbf16>) -> tensor<130x200xbf16>
  %r = torch.aten.addmm %c, %v, %w : (tensor<70xbf16>, tensor<130x200xbf16>, tensor<200x70xbf16>) -> tensor<130x70xbf16>
  func.return %r : tensor<130x70xbf16>
}

// -----

// Not marked: the normalized result is also returned.
// CHECK-LABEL: func.func @main(%also:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
// TILE-LABEL: func.func @main(%also:
// TILE:        memref.alloc() : memref<130x256xf32, #mem<hbm>>
// TILE:        tile.matmul
func.func @main(%also: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> (tensor<130x64xf32>, tensor<130x256xf32>) {
  %n, %mean, %rstd = torch.aten.native_layer_norm %also, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %p = torch.aten.mm %n, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p, %n : tensor<130x64xf32>, tensor<130x256xf32>
}

// -----

// Not marked: the statistics are read (a training graph saves them for the backward).
// CHECK-LABEL: func.func @main(%stats:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%stats: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> (tensor<130x64xf32>, tensor<130x1xf32>) {
  %n, %mean, %rstd = torch.aten.native_layer_norm %stats, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %p = torch.aten.mm %n, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p, %rstd : tensor<130x64xf32>, tensor<130x1xf32>
}

// -----

// Not marked: the matmul reads the layer norm as B, not as A.
// CHECK-LABEL: func.func @main(%asb:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%asb: tensor<64x130xf32>, %y: tensor<130x64xf32>) -> tensor<130x130xf32> {
  %n, %mean, %rstd = torch.aten.native_layer_norm %asb, none, none {normalized_shape = array<i64: 130>, eps = 1.000000e-05 : f64} : (tensor<64x130xf32>) -> (tensor<64x130xf32>, tensor<64x1xf32>, tensor<64x1xf32>)
  %p = torch.aten.mm %y, %n : (tensor<130x64xf32>, tensor<64x130xf32>) -> tensor<130x130xf32>
  func.return %p : tensor<130x130xf32>
}

// -----

// Not marked: an op that is not a view stands between the layer norm and its matmul.
// CHECK-LABEL: func.func @main(%between:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%between: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> (tensor<130x64xf32>, tensor<130x256xf32>) {
  %n, %mean, %rstd = torch.aten.native_layer_norm %between, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %e = torch.aten.exp %between : (tensor<130x256xf32>) -> tensor<130x256xf32>
  %p = torch.aten.mm %n, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p, %e : tensor<130x64xf32>, tensor<130x256xf32>
}

// -----

// A stale mark (the layer norm is also returned) is dropped; the conversion would not follow it either.
// CHECK-LABEL: func.func @main(%stale:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%stale: tensor<130x256xf32>, %w: tensor<256x64xf32>) -> (tensor<130x64xf32>, tensor<130x256xf32>) {
  %n, %mean, %rstd = torch.aten.native_layer_norm %stale, none, none {normalized_shape = array<i64: 256>, eps = 1.000000e-05 : f64, neuron.fuse = "matmul_prologue"} : (tensor<130x256xf32>) -> (tensor<130x256xf32>, tensor<130x1xf32>, tensor<130x1xf32>)
  %p = torch.aten.mm %n, %w : (tensor<130x256xf32>, tensor<256x64xf32>) -> tensor<130x64xf32>
  func.return %p, %n : tensor<130x64xf32>, tensor<130x256xf32>
}
