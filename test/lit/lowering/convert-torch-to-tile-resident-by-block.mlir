// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A B kept whole on chip (lowering/convert_torch_to_tile/matmul.py, `load_resident_rows`) for a single block row:
// its pieces load in the order the blocks read them, the blocks are straight-line code, and the bias row loads
// whole ahead of B, so that each block waits for its own columns of B only.
// SEMANTICS-COUNT-2: all outputs match

// 256 rows (one block row of two stationary tiles), 1536 columns (three blocks of 512), K = 256: B's pieces are
// its three column blocks, each [128, 2 K tiles, 512]; the first block's matmuls read the first piece only.
// CHECK-LABEL: func.func @main(%x: memref<256x256xbf16
// CHECK:       %[[BIAS:.*]] = tile.load %{{.*}}[%c0, %c0] : memref<1x1536xbf16, strided<[0, 1]>, #mem<hbm>> -> !tile.tile<1x1536xbf16, sbuf>
// CHECK:       %[[W:.*]] = tile.view %w : memref<256x1536xbf16, #mem<hbm>> to memref<2x128x1536xbf16, #mem<hbm>>
// CHECK-NEXT:  %[[EMPTY:.*]] = tile.empty : !tile.tile<128x2x1536xbf16, sbuf>
// CHECK-NEXT:  %[[P0:.*]] = tile.load %[[W]][%c0, %c0, %c0] {dims = array<i64: 1, 0, 2>} : memref<2x128x1536xbf16, #mem<hbm>> -> !tile.tile<128x2x512xbf16, sbuf>
// CHECK-NEXT:  %[[B0:.*]] = tile.insert %[[P0]], %[[EMPTY]][%c0, %c0]
// CHECK-NEXT:  %[[P1:.*]] = tile.load %[[W]][%c0, %c0, %c512] {dims = array<i64: 1, 0, 2>} : memref<2x128x1536xbf16, #mem<hbm>> -> !tile.tile<128x2x512xbf16, sbuf>
// CHECK-NEXT:  %[[B1:.*]] = tile.insert %[[P1]], %[[B0]][%c0, %c512]
// CHECK-NEXT:  %[[P2:.*]] = tile.load %[[W]][%c0, %c0, %c1024] {dims = array<i64: 1, 0, 2>} : memref<2x128x1536xbf16, #mem<hbm>> -> !tile.tile<128x2x512xbf16, sbuf>
// CHECK-NEXT:  %[[B:.*]] = tile.insert %[[P2]], %[[B1]][%c0, %c1024]
// CHECK-NOT:   scf.for
// CHECK:       tile.extract %[[BIAS]][%c0] : !tile.tile<1x1536xbf16, sbuf> -> !tile.tile<1x512xbf16, sbuf>
// CHECK:       tile.extract %[[B]][%c0, %c0] : !tile.tile<128x2x1536xbf16, sbuf> -> !tile.tile<128x512xbf16, sbuf>
// CHECK:       tile.store %{{.*}}, %y[%c0, %c0]
// CHECK:       tile.store %{{.*}}, %y[%c128, %c0]
// CHECK:       tile.extract %[[B]][%c0, %c512] : !tile.tile<128x2x1536xbf16, sbuf> -> !tile.tile<128x512xbf16, sbuf>
// CHECK:       tile.store %{{.*}}, %y[%c0, %c512]
// CHECK:       tile.extract %[[B]][%c0, %c1024] : !tile.tile<128x2x1536xbf16, sbuf> -> !tile.tile<128x512xbf16, sbuf>
// CHECK:       tile.store %{{.*}}, %y[%c128, %c1024]
// CHECK-NOT:   tile.load
// CHECK:       func.return
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @main(%x: tensor<256x256xbf16>, %w: tensor<256x1536xbf16>, %b: tensor<1536xbf16>) -> tensor<256x1536xbf16> {
    %a = torch.aten.neg %x : (tensor<256x256xbf16>) -> tensor<256x256xbf16>
    %y = torch.aten.addmm %b, %a, %w : (tensor<1536xbf16>, tensor<256x256xbf16>, tensor<256x1536xbf16>) -> tensor<256x1536xbf16>
    func.return %y : tensor<256x1536xbf16>
  }
}

// -----

// Several block rows read B: it loads as whole rows once, each row's blocks are a loop, and each block's bias
// matmul, its first, reads its piece of the bias row, loaded whole ahead of B.
// CHECK-LABEL: func.func @main(%x: memref<1024x256xbf16
// CHECK:       %[[BIAS:.*]] = tile.load %{{.*}}[%c0, %c0] : memref<1x1536xbf16, strided<[0, 1]>, #mem<hbm>> -> !tile.tile<1x1536xbf16, sbuf>
// CHECK:       tile.load %{{.*}}[%c0, %c0, %c0] {dims = array<i64: 1, 0, 2>} : memref<2x128x1536xbf16, #mem<hbm>> -> !tile.tile<128x2x1536xbf16, sbuf>
// CHECK-NEXT:  scf.for %[[N:.*]] = %c0 to %c1536 step %c512 {
// CHECK-NEXT:    %[[PIECE:.*]] = tile.extract %[[BIAS]][%[[N]]] : !tile.tile<1x1536xbf16, sbuf> -> !tile.tile<1x512xbf16, sbuf>
// CHECK-NEXT:    tile.matmul %{{.*}}, %[[PIECE]] : (!tile.tile<1x128xbf16, sbuf>, !tile.tile<1x512xbf16, sbuf>) -> !tile.tile<128x512xf32, psum>
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @main(%x: tensor<1024x256xbf16>, %w: tensor<256x1536xbf16>, %b: tensor<1536xbf16>) -> tensor<1024x1536xbf16> {
    %a = torch.aten.neg %x : (tensor<1024x256xbf16>) -> tensor<1024x256xbf16>
    %y = torch.aten.addmm %b, %a, %w : (tensor<1536xbf16>, tensor<1024x256xbf16>, tensor<256x1536xbf16>) -> tensor<1024x1536xbf16>
    func.return %y : tensor<1024x1536xbf16>
  }
}
