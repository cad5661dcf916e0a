// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-prologues,tile-fuse-loops | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-prologues,tile-fuse-loops --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A load of what several stores just wrote, built on chip from their tiles (lowering/tile_fuse_loops.py,
// forwarding). A matmul's output blocks are 512 columns wide, so a 768-wide row of its product is stored as two
// tiles; a layer norm in the next matmul's prologue reads the whole row.
// SEMANTICS-COUNT-3: all outputs match

// The layer norm's row tiles come right after the first matmul's last stores: each is an empty tile with the
// two stored tiles inserted, h is then read by nothing and never reaches HBM.
// CHECK-LABEL: func.func @main(%x: memref<256x256xbf16
// CHECK-NOT:   memref.alloc() : memref<256x768xbf16
// CHECK:       %[[LEFT0:.*]] = tile.copy {{.*}} -> !tile.tile<128x512xbf16, sbuf>
// CHECK:       %[[LEFT1:.*]] = tile.copy {{.*}} -> !tile.tile<128x512xbf16, sbuf>
// CHECK:       %[[RIGHT0:.*]] = tile.copy {{.*}} -> !tile.tile<128x256xbf16, sbuf>
// CHECK:       %[[RIGHT1:.*]] = tile.copy {{.*}} -> !tile.tile<128x256xbf16, sbuf>
// CHECK:       %[[ROW0:.*]] = tile.empty : !tile.tile<128x768xbf16, sbuf>
// CHECK-NEXT:  %[[AT0:.*]] = arith.constant 0 : index
// CHECK-NEXT:  %[[HALF0:.*]] = tile.insert %[[LEFT0]], %[[ROW0]][%[[AT0]]] : !tile.tile<128x512xbf16, sbuf>, !tile.tile<128x768xbf16, sbuf>
// CHECK-NEXT:  %[[AT512:.*]] = arith.constant 512 : index
// CHECK-NEXT:  %{{.*}} = tile.insert %[[RIGHT0]], %[[HALF0]][%[[AT512]]] : !tile.tile<128x256xbf16, sbuf>, !tile.tile<128x768xbf16, sbuf>
// CHECK:       tile.insert %[[LEFT1]]
// CHECK:       tile.insert %[[RIGHT1]]
// CHECK-NOT:   tile.load {{.*}} -> !tile.tile<128x768xbf16, sbuf>
// CHECK:       tile.reduce
func.func @main(%x: tensor<256x256xbf16>, %w1: tensor<256x768xbf16>, %g: tensor<768xbf16>, %b: tensor<768xbf16>, %w2: tensor<768x128xbf16>) -> tensor<256x128xbf16> {
  %h = torch.aten.mm %x, %w1 : (tensor<256x256xbf16>, tensor<256x768xbf16>) -> tensor<256x768xbf16>
  %n, %mean, %rstd = torch.aten.native_layer_norm %h, %g, %b {normalized_shape = array<i64: 768>, eps = 1.000000e-05 : f64} : (tensor<256x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) -> (tensor<256x768xbf16>, tensor<256x1xbf16>, tensor<256x1xbf16>)
  %y = torch.aten.mm %n, %w2 : (tensor<256x768xbf16>, tensor<768x128xbf16>) -> tensor<256x128xbf16>
  func.return %y : tensor<256x128xbf16>
}

// -----

// Another matmul between the stores and the load: the stored tiles would stay live through it, so the layer norm
// loads its rows from HBM as before.
// CHECK-LABEL: func.func @main(%x: memref<256x256xbf16
// CHECK:       %[[H:.*]] = memref.alloc() : memref<256x768xbf16, #mem<hbm>>
// CHECK-COUNT-4: tile.store {{.*}}, %[[H]]
// CHECK:       %[[Z:.*]] = memref.alloc() : memref<256x512xbf16, #mem<hbm>>
// CHECK-COUNT-2: tile.store {{.*}}, %[[Z]]
// CHECK:       tile.load %[[H]][%c0, %c0] : memref<256x768xbf16, #mem<hbm>> -> !tile.tile<128x768xbf16, sbuf>
// CHECK:       tile.load %[[H]][%c128, %c0] : memref<256x768xbf16, #mem<hbm>> -> !tile.tile<128x768xbf16, sbuf>
func.func @main(%x: tensor<256x256xbf16>, %w1: tensor<256x768xbf16>, %w3: tensor<256x512xbf16>, %g: tensor<768xbf16>, %b: tensor<768xbf16>, %w2: tensor<768x128xbf16>) -> (tensor<256x128xbf16>, tensor<256x512xbf16>) {
  %h = torch.aten.mm %x, %w1 : (tensor<256x256xbf16>, tensor<256x768xbf16>) -> tensor<256x768xbf16>
  %z = torch.aten.mm %x, %w3 : (tensor<256x256xbf16>, tensor<256x512xbf16>) -> tensor<256x512xbf16>
  %n, %mean, %rstd = torch.aten.native_layer_norm %h, %g, %b {normalized_shape = array<i64: 768>, eps = 1.000000e-05 : f64} : (tensor<256x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) -> (tensor<256x768xbf16>, tensor<256x1xbf16>, tensor<256x1xbf16>)
  %y = torch.aten.mm %n, %w2 : (tensor<256x768xbf16>, tensor<768x128xbf16>) -> tensor<256x128xbf16>
  func.return %y, %z : tensor<256x128xbf16>, tensor<256x512xbf16>
}

// -----

// Stored tiles of another view of the tensor: attention collects each group of three heads' rows as [128, query
// tiles, 3 * 64] and stores them through a view of its output as [query tiles, 128, 6 * 64]; the projection loads
// the output's rows [128, 384] per query tile. Each row tile is built from a window of each group's tile (its
// query tile, all of the group's columns), each window copied right after its group's rows are whole (the store's
// place), so the first group's copies run while the second group computes; the attention output never reaches
// HBM, and the projection's transposes read the built rows.
// CHECK-LABEL: func.func @main(%q: memref<1x6x256x64xbf16
// CHECK-NOT:   tile.store
// CHECK:       %[[G0:.*]] = tile.insert %{{.*}}, %{{.*}}[%c1, %c128] : !tile.tile<128x64xbf16, sbuf>, !tile.tile<128x2x192xbf16, sbuf>
// CHECK-NEXT:  %[[ROW0:.*]] = tile.empty : !tile.tile<128x384xbf16, sbuf>
// CHECK-NEXT:  %[[ROW1:.*]] = tile.empty : !tile.tile<128x384xbf16, sbuf>
// CHECK:       %[[LEFT1:.*]] = tile.extract %[[G0]][%{{.*}}, %{{.*}}] : !tile.tile<128x2x192xbf16, sbuf> -> !tile.tile<128x192xbf16, sbuf>
// CHECK:       %[[HALF1:.*]] = tile.insert %[[LEFT1]], %[[ROW1]][%{{.*}}] : !tile.tile<128x192xbf16, sbuf>, !tile.tile<128x384xbf16, sbuf>
// CHECK:       %[[LEFT0:.*]] = tile.extract %[[G0]][%{{.*}}, %{{.*}}] : !tile.tile<128x2x192xbf16, sbuf> -> !tile.tile<128x192xbf16, sbuf>
// CHECK:       %[[HALF0:.*]] = tile.insert %[[LEFT0]], %[[ROW0]][%{{.*}}] : !tile.tile<128x192xbf16, sbuf>, !tile.tile<128x384xbf16, sbuf>
// CHECK:       tile.transpose
// CHECK:       %[[G1:.*]] = tile.insert %{{.*}}, %{{.*}}[%c0, %c128] : !tile.tile<128x64xbf16, sbuf>, !tile.tile<128x1x192xbf16, sbuf>
// CHECK:       %[[RIGHT0:.*]] = tile.extract %[[G1]][%{{.*}}, %{{.*}}] : !tile.tile<128x1x192xbf16, sbuf> -> !tile.tile<128x192xbf16, sbuf>
// CHECK:       %[[WHOLE0:.*]] = tile.insert %[[RIGHT0]], %[[HALF0]][%{{.*}}] : !tile.tile<128x192xbf16, sbuf>, !tile.tile<128x384xbf16, sbuf>
// CHECK:       %[[G2:.*]] = tile.insert %{{.*}}, %{{.*}}[%c0, %c128] : !tile.tile<128x64xbf16, sbuf>, !tile.tile<128x1x192xbf16, sbuf>
// CHECK:       %[[RIGHT1:.*]] = tile.extract %[[G2]][%{{.*}}, %{{.*}}] : !tile.tile<128x1x192xbf16, sbuf> -> !tile.tile<128x192xbf16, sbuf>
// CHECK:       %[[WHOLE1:.*]] = tile.insert %[[RIGHT1]], %[[HALF1]][%{{.*}}] : !tile.tile<128x192xbf16, sbuf>, !tile.tile<128x384xbf16, sbuf>
// CHECK-NOT:   tile.load {{.*}} -> !tile.tile<128x384xbf16, sbuf>
// CHECK:       tile.extract %[[WHOLE0]][%{{.*}}] : !tile.tile<128x384xbf16, sbuf> -> !tile.tile<128x128xbf16, sbuf>
// CHECK-NEXT:  tile.transpose
// CHECK-NOT:   tile.store {{.*}} memref<1x{{[0-9]}}x128x384xbf16
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @main(%q: tensor<1x6x256x64xbf16>, %k: tensor<1x6x256x64xbf16>, %v: tensor<1x6x256x64xbf16>, %w: tensor<384x128xbf16>) -> tensor<256x128xbf16> {
    %o, %lse = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, none {is_causal = true} : (tensor<1x6x256x64xbf16>, tensor<1x6x256x64xbf16>, tensor<1x6x256x64xbf16>) -> (tensor<1x6x256x64xbf16>, tensor<1x6x256xf32>)
    %p = torch.aten.permute %o {dims = array<i64: 0, 2, 1, 3>} : (tensor<1x6x256x64xbf16>) -> tensor<1x256x6x64xbf16>
    %rows = torch.aten.view %p {size = array<i64: 256, 384>} : (tensor<1x256x6x64xbf16>) -> tensor<256x384xbf16>
    %y = torch.aten.mm %rows, %w : (tensor<256x384xbf16>, tensor<384x128xbf16>) -> tensor<256x128xbf16>
    func.return %y : tensor<256x128xbf16>
  }
}
