// RUN: neuron-opt %s --split-input-file -p torch-fuse-matmul-chains | filecheck %s
// RUN: neuron-opt %s --split-input-file -p torch-fuse-matmul-chains,convert-torch-to-tile | filecheck %s --check-prefix=TILE
// RUN: neuron-opt %s --split-input-file -p torch-fuse-matmul-chains,convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// The conversion alone follows only marks the IR bears out (the stale one below is not).
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Which Linear -> activation -> Linear chains keep the hidden activations on chip
// (lowering/torch_fuse_matmul_chains.py), and what convert-torch-to-tile makes of the marks: every case computes
// what the unfused ops compute.
// SEMANTICS-COUNT-6: all outputs match

// Linear, ReLU, Linear: the first addmm is marked. Its product and the ReLU's result never reach HBM: the only
// allocation is the second matmul's result.
// CHECK-LABEL: func.func @main(%x:
// CHECK:       torch.aten.addmm %b1, %x, %w1 {neuron.fuse = "matmul_chain"}
// CHECK:       torch.aten.addmm %b2, %a, %w2 :
// TILE-LABEL:  func.func @main(%x:
// TILE-NOT:    memref.alloc() : memref<130x256xbf16
// TILE:        tile.unary %{{.*}} {fn = "relu"}
// TILE:        memref.alloc() : memref<130x70xbf16
// TILE-NOT:    memref.alloc
// TILE:        func.return
func.func @main(%x: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>, %b2: tensor<70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %x, %w1 : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.relu %h : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %o = torch.aten.addmm %b2, %a, %w2 : (tensor<70xbf16>, tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %o : tensor<130x70xbf16>
}

// -----

// Not marked: the hidden width 200 is no multiple of 128 (the panel's K tiles are whole partitions).
// CHECK-LABEL: func.func @main(%width:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%width: tensor<130x128xbf16>, %w1: tensor<128x200xbf16>, %b1: tensor<200xbf16>, %w2: tensor<200x70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %width, %w1 : (tensor<200xbf16>, tensor<130x128xbf16>, tensor<128x200xbf16>) -> tensor<130x200xbf16>
  %a = torch.aten.gelu %h : (tensor<130x200xbf16>) -> tensor<130x200xbf16>
  %o = torch.aten.mm %a, %w2 : (tensor<130x200xbf16>, tensor<200x70xbf16>) -> tensor<130x70xbf16>
  func.return %o : tensor<130x70xbf16>
}

// -----

// Not marked: the activation's result is also returned.
// CHECK-LABEL: func.func @main(%returned:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%returned: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>) -> (tensor<130x70xbf16>, tensor<130x256xbf16>) {
  %h = torch.aten.addmm %b1, %returned, %w1 : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.tanh %h : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %o = torch.aten.mm %a, %w2 : (tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %o, %a : tensor<130x70xbf16>, tensor<130x256xbf16>
}

// -----

// Not marked: no activation the evacuation can apply (exp) between the two Linear layers.
// CHECK-LABEL: func.func @main(%other:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%other: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %other, %w1 : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.exp %h : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %o = torch.aten.mm %a, %w2 : (tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %o : tensor<130x70xbf16>
}

// -----

// Not marked: beta = 0.5 scales the bias, which the evacuation adds as it is.
// CHECK-LABEL: func.func @main(%scaled:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%scaled: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>) -> tensor<130x70xbf16> {
  %h = torch.aten.addmm %b1, %scaled, %w1 {beta = 5.000000e-01 : f64} : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.sigmoid %h : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %o = torch.aten.mm %a, %w2 : (tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %o : tensor<130x70xbf16>
}

// -----

// A stale mark (the product is also returned) is dropped; the conversion would not follow it either.
// CHECK-LABEL: func.func @main(%stale:
// CHECK-NOT:   neuron.fuse
// CHECK:       func.return
func.func @main(%stale: tensor<130x128xbf16>, %w1: tensor<128x256xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x70xbf16>) -> (tensor<130x70xbf16>, tensor<130x256xbf16>) {
  %h = torch.aten.addmm %b1, %stale, %w1 {neuron.fuse = "matmul_chain"} : (tensor<256xbf16>, tensor<130x128xbf16>, tensor<128x256xbf16>) -> tensor<130x256xbf16>
  %a = torch.aten.relu %h : (tensor<130x256xbf16>) -> tensor<130x256xbf16>
  %o = torch.aten.mm %a, %w2 : (tensor<130x256xbf16>, tensor<256x70xbf16>) -> tensor<130x70xbf16>
  func.return %o, %h : tensor<130x70xbf16>, tensor<130x256xbf16>
}
