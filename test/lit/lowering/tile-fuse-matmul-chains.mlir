// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-chains | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-chains --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// The same with the layer norm computed in the first matmul's prologue: the chain clones its row computation.
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues,tile-fuse-matmul-prologues,tile-fuse-matmul-chains --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// A Linear layer and its activation read only by another Linear layer (lowering/tile_fuse_matmul_chains.py):
// the hidden activations never reach HBM. The first matmul runs with its operands swapped, W1's [128, 128]
// column tiles stationary and x^T (its own panel, built again for the second matmul's rows) moving, so each
// PSUM tile holds 128 hidden features of every row; one activation adds b1 per partition and applies the GELU
// as it evacuates the tile into the second matmul's stationary panel. Every case computes what the unfused ops
// compute.
// SEMANTICS-COUNT-8: all outputs match
// CHECK-LABEL: func.func @main(%x: memref<130x128xbf16
// CHECK-NOT:   memref.alloc() : memref<130x256xbf16
// CHECK:       %[[W1:.*]] = tile.view %w1 : memref<128x256xbf16, #mem<hbm>> to memref<1x128x256xbf16, #mem<hbm>>
// CHECK:       %[[COLUMNS:.*]] = tile.view %b1 : memref<256xbf16, #mem<hbm>> to memref<128x2xbf16, strided<[1, 128]>, #mem<hbm>>
// CHECK:       %[[BIASES:.*]] = tile.load %[[COLUMNS]][%c0, %c0] : {{.*}} -> !tile.tile<128x2xbf16, sbuf>
// CHECK:       tile.load %x[%c0, %c0]
// CHECK:       tile.load %x[%c128, %c0]
// CHECK:       %[[XT:.*]], %[[XT_REST:.*]] = scf.for
// CHECK:         tile.transpose
// CHECK:       %[[WEIGHTS:.*]] = tile.load %[[W1]][%c0, %c0, %c0] {dims = array<i64: 1, 0, 2>} {{.*}} -> !tile.tile<128x1x256xbf16, sbuf>
// CHECK:       %[[H:.*]], %[[H_REST:.*]] = scf.for %[[T:.*]] = %c0 to %c2 step %c1 iter_args(%[[P:.*]] = %{{.*}}, %[[P_REST:.*]] = %{{.*}})
// CHECK:         %[[B:.*]] = tile.extract %[[BIASES]][%[[T]]] : !tile.tile<128x2xbf16, sbuf> -> !tile.tile<128x1xbf16, sbuf>
// CHECK:         %[[STATIONARY:.*]] = tile.extract %[[WEIGHTS]]
// CHECK:         %[[MOVING:.*]] = tile.extract %[[XT]]
// CHECK:         %[[PRODUCT:.*]] = tile.matmul %[[STATIONARY]], %[[MOVING]] : {{.*}} -> !tile.tile<128x128xf32, psum>
// CHECK:         %[[ACT:.*]] = tile.unary %[[PRODUCT]] bias %[[B]] {fn = "gelu_apprx_tanh"} : {{.*}} -> !tile.tile<128x128xbf16, sbuf>
// CHECK:         tile.insert %[[ACT]], %[[P]][%[[T]], %c0]
// CHECK:         tile.matmul {{.*}} -> !tile.tile<128x2xf32, psum>
// CHECK:         tile.unary {{.*}} bias %[[B]] {fn = "gelu_apprx_tanh"}
// CHECK:       tile.extract %[[H]][%c0, %c0] : !tile.tile<128x2x128xbf16, sbuf> -> !tile.tile<128x128xbf16, sbuf>
// CHECK:       tile.matmul
// CHECK-NOT:   memref.alloc() : memref<130x256xbf16
// CHECK:       func.return
func.func @main(%x: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>, %b2: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.gelu %h {approximate = "tanh"} : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xbf16>, tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %r : tensor<130x70xbf16>
}

// -----

// After a layer norm, over more rows than one block row of either matmul (their block rows differ: the second
// goes two per trip): the panel of each of the second matmul's row tiles is built from the layer norm's rows
// of the same index. In fp32, the bias joins the product as an add at the first matmul's evacuation, and the
// chain adds it per partition instead.
// CHECK-LABEL: func.func @main(%x: memref<1100x128xf32
// CHECK-NOT:   memref.alloc() : memref<1100x256xf32
// CHECK:       tile.unary {{.*}} bias {{.*}} {fn = "tanh"} : (!tile.tile<128x128xf32, psum>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x128xf32, sbuf>
// CHECK-NOT:   memref.alloc() : memref<1100x256xf32
// CHECK:       func.return
func.func @main(%x: tensor<1100x128xf32>, %g: tensor<128xf32>, %b: tensor<128xf32>, %w1: tensor<128x256xf32>, %b1: tensor<256xf32>, %w2: tensor<256x70xf32>, %b2: tensor<70xf32>) -> tensor<1100x70xf32> {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %b {normalized_shape = array<i64: 128>, eps = 1.000000e-05 : f64} : (tensor<1100x128xf32>, tensor<128xf32>, tensor<128xf32>) -> (tensor<1100x128xf32>, tensor<1100x1xf32>, tensor<1100x1xf32>)
  %h = torch.aten.addmm %b1, %0, %w1 : (tensor<256xf32>, tensor<1100x128xf32>, tensor<128x256xf32>) -> tensor<1100x256xf32>
  %a = torch.aten.tanh %h : (tensor<1100x256xf32>) -> tensor<1100x256xf32>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xf32>, tensor<1100x256xf32>, tensor<256x70xf32>) -> tensor<1100x70xf32>
  func.return %r : tensor<1100x70xf32>
}

// -----

// Over more rows than one block row, the first matmul keeps W1 whole on chip, loaded in pieces of a few K tiles
// (here two, 8 and 2 of its 10) into one tile: the chain reads W1's view through the pieces.
// CHECK-LABEL: func.func @main(%x: memref<1100x1280xf32
// CHECK-NOT:   memref.alloc() : memref<1100x256xf32
// CHECK:       tile.unary {{.*}} bias {{.*}} {fn = "tanh"} : (!tile.tile<128x128xf32, psum>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x128xf32, sbuf>
// CHECK-NOT:   memref.alloc() : memref<1100x256xf32
// CHECK:       func.return
func.func @main(%x: tensor<1100x1280xf32>, %w1: tensor<1280x256xf32>, %b1: tensor<256xf32>, %w2: tensor<256x70xf32>, %b2: tensor<70xf32>) -> tensor<1100x70xf32> {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<256xf32>, tensor<1100x1280xf32>, tensor<1280x256xf32>) -> tensor<1100x256xf32>
  %a = torch.aten.tanh %h : (tensor<1100x256xf32>) -> tensor<1100x256xf32>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xf32>, tensor<1100x256xf32>, tensor<256x70xf32>) -> tensor<1100x70xf32>
  func.return %r : tensor<1100x70xf32>
}

// -----

// Left alone: the hidden activations are also returned, so they reach HBM anyway.
// CHECK-LABEL: func.func @main(%x: memref<130x128xbf16
// CHECK:       %[[H:.*]] = memref.alloc() : memref<130x256xbf16
// CHECK:       tile.store {{.*}}, %[[H]]
// CHECK:       tile.load %[[H]]
// CHECK:       func.return %{{.*}}, %[[H]]
func.func @main(%x: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>, %b2: tensor<70xbf16>) -> (tensor<130x70xbf16>, tensor<130x256xbf16>) {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.relu %h : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xbf16>, tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %r, %a : tensor<130x70xbf16>, tensor<130x256xbf16>
}

// -----

// Left alone: a hidden size that is not a multiple of 128 (the panel's last K tile would be partial).
// CHECK-LABEL: func.func @main(%x: memref<130x128xbf16
// CHECK:       %[[H:.*]] = memref.alloc() : memref<130x200xbf16
// CHECK:       tile.store {{.*}}, %[[H]]
// CHECK:       tile.load %[[H]]
func.func @main(%x: tensor<130x128xbf16>, %w1: tensor<128x200xbf16>, %b1: tensor<200xbf16>, %w2: tensor<200x70xbf16>, %b2: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<200xbf16>, tensor<130x128xbf16>, tensor<128x200xbf16>) -> tensor<130x200xbf16>
  %a = torch.aten.gelu %h {approximate = "tanh"} : (tensor<130x200xbf16>) -> tensor<130x200xbf16>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xbf16>, tensor<130x200xbf16>, tensor<200x70xbf16>) -> tensor<130x70xbf16>
  func.return %r : tensor<130x70xbf16>
}

// -----

// Left alone: an activation that is not one ScalarE function of each element (softmax normalizes along the
// hidden features, which the panel holds on partitions).
// CHECK-LABEL: func.func @main(%x: memref<130x128xbf16
// CHECK:       memref.alloc() : memref<130x256xbf16
// CHECK:       tile.load %{{.*}} : memref<130x256xbf16
func.func @main(%x: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>, %b2: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten._softmax %h {dim = 1 : i64, half_to_float = false} : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xbf16>, tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %r : tensor<130x70xbf16>
}

// -----

// Left alone: a hidden size too long for the second matmul's panel to stay on chip (it is built per K range
// inside each block, from loads that are not whole rows).
// CHECK-LABEL: func.func @main(%x: memref<130x128xbf16
// CHECK:       memref.alloc() : memref<130x22016xbf16
// CHECK:       tile.load %{{.*}} : memref<130x22016xbf16
func.func @main(%x: tensor<130x128xbf16>, %w1: tensor<128x22016xbf16>, %b1: tensor<22016xbf16>, %w2: tensor<22016x70xbf16>, %b2: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<22016xbf16>, tensor<130x128xbf16>, tensor<128x22016xbf16>) -> tensor<130x22016xbf16>
  %a = torch.aten.relu %h : (tensor<130x22016xbf16>) -> tensor<130x22016xbf16>
  %r = torch.aten.addmm %b2, %a, %w2 : (tensor<70xbf16>, tensor<130x22016xbf16>, tensor<22016x70xbf16>) -> tensor<130x70xbf16>
  func.return %r : tensor<130x70xbf16>
}

// -----

// A single block row whose W1 (1536 hidden features: three blocks) is kept whole on chip and loaded by column
// blocks, with its bias row loaded whole ahead of it (convert-torch-to-tile's matmul): the chain still reads W1
// and b1 through those pieces, and H never reaches HBM.
// CHECK-LABEL: func.func @main(%x: memref<256x256xbf16
// CHECK-NOT:   memref.alloc() : memref<256x1536xbf16
// CHECK:       tile.unary %{{.*}} bias %{{.*}} {fn = "gelu_apprx_tanh"} : (!tile.tile<128x128xf32, psum>, !tile.tile<128x1xbf16, sbuf>) -> !tile.tile<128x128xbf16, sbuf>
// CHECK-NOT:   memref<256x1536xbf16, #mem<hbm>>
// CHECK:       func.return
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @main(%x: tensor<256x256xbf16>, %w1: tensor<256x1536xbf16>, %b1: tensor<1536xbf16>, %w2: tensor<1536x256xbf16>) -> tensor<256x256xbf16> {
    %a = torch.aten.neg %x : (tensor<256x256xbf16>) -> tensor<256x256xbf16>
    %h = torch.aten.addmm %b1, %a, %w1 : (tensor<1536xbf16>, tensor<256x256xbf16>, tensor<256x1536xbf16>) -> tensor<256x1536xbf16>
    %g = torch.aten.gelu %h {approximate = "tanh"} : (tensor<256x1536xbf16>) -> tensor<256x1536xbf16>
    %y = torch.aten.mm %g, %w2 : (tensor<256x1536xbf16>, tensor<1536x256xbf16>) -> tensor<256x256xbf16>
    func.return %y : tensor<256x256xbf16>
  }
}
