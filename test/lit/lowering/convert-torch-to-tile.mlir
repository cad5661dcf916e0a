// RUN: neuron-opt %S/Inputs/mlp_forward.torch.mlir -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %S/Inputs/mlp_backward.torch.mlir -p convert-torch-to-tile | filecheck %s --check-prefix=BACKWARD
// RUN: neuron-opt %S/Inputs/mlp_forward.torch.mlir -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %S/Inputs/mlp_backward.torch.mlir -p convert-torch-to-tile --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s --check-prefix=CASES

// A reshape that merges dimensions which are not contiguous together cannot be a view: it copies first.
// CASES-LABEL: func.func @reshape_needs_copy
func.func @reshape_needs_copy(%x: tensor<4x6x5xf32>) -> tensor<24x5xf32> {
  %t = torch.aten.permute %x {dims = array<i64: 1, 0, 2>} : (tensor<4x6x5xf32>) -> tensor<6x4x5xf32>
  %r = torch.aten.view %t {size = array<i64: 24, 5>} : (tensor<6x4x5xf32>) -> tensor<24x5xf32>
  func.return %r : tensor<24x5xf32>
}
// CASES:       %[[T:.*]] = tile.view %x : memref<4x6x5xf32, #mem<hbm>> to memref<6x4x5xf32, strided<[5, 30, 1]>, #mem<hbm>>
// CASES:       %[[COPY:.*]] = memref.alloc() : memref<6x4x5xf32, #mem<hbm>>
// CASES:       tile.store
// CASES:       %[[R:.*]] = tile.view %[[COPY]] : memref<6x4x5xf32, #mem<hbm>> to memref<24x5xf32, #mem<hbm>>
// CASES:       func.return %[[R]]

// -----

// Merging dims that are contiguous together stays a view, even of a permuted tensor.
// CASES-LABEL: func.func @permuted_reshape_is_view
func.func @permuted_reshape_is_view(%x: tensor<4x6x5xf32>) -> tensor<5x24xf32> {
  %t = torch.aten.permute %x {dims = array<i64: 2, 0, 1>} : (tensor<4x6x5xf32>) -> tensor<5x4x6xf32>
  %r = torch.aten.view %t {size = array<i64: 5, 24>} : (tensor<5x4x6xf32>) -> tensor<5x24xf32>
  func.return %r : tensor<5x24xf32>
}
// CASES-NOT:   memref.alloc
// CASES:       tile.view %{{.*}} to memref<5x24xf32, strided<[1, 5]>, #mem<hbm>>

// -----

// A reshape of a contiguous tensor is only a new description of the same memory.
// CASES-LABEL: func.func @reshape_is_view
func.func @reshape_is_view(%x: tensor<4x6x5xf32>) -> tensor<24x5xf32> {
  %r = torch.aten.view %x {size = array<i64: 24, 5>} : (tensor<4x6x5xf32>) -> tensor<24x5xf32>
  func.return %r : tensor<24x5xf32>
}
// CASES-NOT:   memref.alloc
// CASES:       %[[R:.*]] = tile.view %x : memref<4x6x5xf32, #mem<hbm>> to memref<24x5xf32, #mem<hbm>>
// CASES:       func.return %[[R]]

// -----

// Reducing the innermost dim keeps rows on partitions; a mean scales the folded column.
// CASES-LABEL: func.func @mean_last_dim
func.func @mean_last_dim(%x: tensor<300x4100xf32>) -> tensor<300x1xf32> {
  %m = torch.aten.mean.dim %x {dim = array<i64: -1>, keepdim = true} : (tensor<300x4100xf32>) -> tensor<300x1xf32>
  func.return %m : tensor<300x1xf32>
}
// 4100 elements per row are folded in chunks of 2048 (two) plus a remainder of 4.
// CASES:       tile.reduce %{{.*}} {op = "add"} : (!tile.tile<128x2048xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
// CASES:       tile.binary %{{.*}}, %{{.*}} {op = "add"} : (!tile.tile<128x1xf32, sbuf>, !tile.tile<128x1xf32, sbuf>)
// CASES:       tile.reduce %{{.*}} {op = "add"} : (!tile.tile<128x4xf32, sbuf>) -> !tile.tile<128x1xf32, sbuf>
// CASES:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = {{.*}} : f64}
// 300 rows are two full partition tiles in a loop and a remainder of 44.
// CASES:       tile.reduce %{{.*}} {op = "add"} : (!tile.tile<44x2048xf32, sbuf>)

// -----

// Scalar operands of elementwise ops are immediates; broadcasting operands are stride-0 views.
// CASES-LABEL: func.func @scalar_and_broadcast
func.func @scalar_and_broadcast(%a: tensor<5x130xf32>, %b: tensor<130xf32>) -> tensor<5x130xf32> {
  %s = torch.aten.mul.Scalar %a {other = 2.500000e+00 : f64} : (tensor<5x130xf32>) -> tensor<5x130xf32>
  %r = torch.aten.sub.Tensor %s, %b : (tensor<5x130xf32>, tensor<130xf32>) -> tensor<5x130xf32>
  func.return %r : tensor<5x130xf32>
}
// CASES:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 2.500000e+00 : f64}
// CASES:       tile.view %b : memref<130xf32, #mem<hbm>> to memref<5x130xf32, strided<[0, 1]>, #mem<hbm>>
// CASES:       tile.binary %{{.*}}, %{{.*}} {op = "subtract"}

// -----

// A Linear layer's bf16 weight [N, K] has K contiguous. Where DMAs transpose 2-byte elements (trn2), each K tile
// of it, the partial last one too, loads with K on partitions straight into the resident B: the DMA transposes
// as it moves, and TensorE transposes only A's rows. On trn1 (next case) the weight's rows go through TensorE.
// CASES-LABEL: func.func @linear_weight_trn2
// CASES:       %[[WT:.*]] = tile.view %w : memref<300x200xbf16, #mem<hbm>> to memref<200x300xbf16, strided<[1, 200]>, #mem<hbm>>
// CASES-COUNT-4: tile.transpose %{{.*}} : !tile.tile<{{[0-9]+}}x{{[0-9]+}}xbf16, sbuf> -> !tile.tile<{{[0-9]+}}x{{[0-9]+}}xbf16, psum>
// CASES-NOT:   tile.transpose
// CASES:       %[[FULL:.*]] = tile.load %[[WT]][%c0, %c0] : memref<200x300xbf16, strided<[1, 200]>, #mem<hbm>> -> !tile.tile<128x300xbf16, sbuf>
// CASES-NEXT:  tile.insert %[[FULL]], %{{.*}}[%c0, %c0] : !tile.tile<128x300xbf16, sbuf>, !tile.tile<128x1x300xbf16, sbuf>
// CASES-NEXT:  tile.load %[[WT]][%c128, %c0] : memref<200x300xbf16, strided<[1, 200]>, #mem<hbm>> -> !tile.tile<72x300xbf16, sbuf>
// CASES-NOT:   tile.transpose
// CASES:       func.return
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @linear_weight_trn2(%x: tensor<130x200xbf16>, %w: tensor<300x200xbf16>) -> tensor<130x300xbf16> {
    %0 = torch.aten.permute %w {dims = array<i64: 1, 0>} : (tensor<300x200xbf16>) -> tensor<200x300xbf16>
    %1 = torch.aten.mm %x, %0 : (tensor<130x200xbf16>, tensor<200x300xbf16>) -> tensor<130x300xbf16>
    func.return %1 : tensor<130x300xbf16>
  }
}

// -----

// CASES-LABEL: func.func @linear_weight_trn1
// CASES-COUNT-4: tile.transpose %{{.*}} : !tile.tile<{{[0-9]+}}x{{[0-9]+}}xbf16, sbuf> -> !tile.tile<{{[0-9]+}}x{{[0-9]+}}xbf16, psum>
// CASES:       tile.load %{{.*}}[%c0, %c0] {dims = array<i64: 1, 0>} : memref<200x300xbf16, strided<[1, 200]>, #mem<hbm>> -> !tile.tile<128x128xbf16, sbuf>
// CASES:       tile.transpose %{{.*}} : !tile.tile<128x128xbf16, sbuf> -> !tile.tile<128x128xbf16, psum>
builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @linear_weight_trn1(%x: tensor<130x200xbf16>, %w: tensor<300x200xbf16>) -> tensor<130x300xbf16> {
    %0 = torch.aten.permute %w {dims = array<i64: 1, 0>} : (tensor<300x200xbf16>) -> tensor<200x300xbf16>
    %1 = torch.aten.mm %x, %0 : (tensor<130x200xbf16>, tensor<200x300xbf16>) -> tensor<130x300xbf16>
    func.return %1 : tensor<130x300xbf16>
  }
}

// The MLP of examples/mlp.py (37x300 -> 520 -> 130 -> 10), forward graph as AOTAutograd hands it over.
// Arguments become HBM memrefs; the weight transpose and the bias broadcast are free strided views.
// CHECK-LABEL: func.func @main(%primals1: memref<520x300xf32, #mem<hbm>>
// CHECK:         %[[WT:.*]] = tile.view %primals1 : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
// CHECK:         %[[BIAS:.*]] = tile.view %primals2 : memref<520xf32, #mem<hbm>> to memref<37x520xf32, strided<[0, 1]>, #mem<hbm>>
// Both operands have K contiguous in memory, so their K-on-partition tiles come from TensorE transposes of
// row-wise loads. The stationary panel of x (K = 300: two full tiles, then a remainder of 44) is built once per
// block of rows: one DMA of the rows, then a loop transposes each 128-column block into its slot of the panel.
// CHECK:         %[[ROWS:.*]] = tile.load %primals3[%c0, %c0] : memref<37x300xf32, #mem<hbm>> -> !tile.tile<37x256xf32, sbuf>
// CHECK:         %[[EMPTY:.*]] = tile.empty : !tile.tile<128x2x37xf32, sbuf>
// CHECK:         %[[PANEL:.*]] = scf.for %[[T:.*]] = %c0 to %c2 step %c1 iter_args(%[[P:.*]] = %[[EMPTY]]) -> (!tile.tile<128x2x37xf32, sbuf>) {
// CHECK:           %[[BLOCK:.*]] = tile.extract %[[ROWS]][%{{.*}}] : !tile.tile<37x256xf32, sbuf> -> !tile.tile<37x128xf32, sbuf>
// CHECK:           %[[BT:.*]] = tile.transpose %[[BLOCK]] : !tile.tile<37x128xf32, sbuf> -> !tile.tile<128x37xf32, psum>
// CHECK:           tile.insert %[[BT]], %[[P]][%[[T]], %c0] : !tile.tile<128x37xf32, psum>, !tile.tile<128x2x37xf32, sbuf>
// CHECK:         }
// CHECK:         tile.load %primals3[%c0, %c256] : {{.*}} -> !tile.tile<37x44xf32, sbuf>
// The weight (K contiguous as well) is kept whole on chip, built after x's panel so that DMA bandwidth goes to
// the panel first: one load of whole rows of K per 128 of its 520 columns, and a loop that transposes each K tile
// into its slot; its partial last K tile (44 rows) is transposed the same way.
// CHECK:         %[[WHOLE:.*]] = tile.empty : !tile.tile<128x2x520xf32, sbuf>
// CHECK:         tile.load %[[WT]][%c0, %c0] {dims = array<i64: 1, 0>} : {{.*}} -> !tile.tile<128x256xf32, sbuf>
// CHECK:         tile.load %[[WT]][%c0, %c512] {dims = array<i64: 1, 0>} : {{.*}} -> !tile.tile<8x256xf32, sbuf>
// CHECK:         %[[B:.*]] = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args(%{{.*}} = %[[WHOLE]]) -> (!tile.tile<128x2x520xf32, sbuf>) {
// CHECK:         tile.empty : !tile.tile<44x520xf32, sbuf>
// The first K tile starts the PSUM accumulation, every later one (the remainder of 44 last) adds to it; each
// matmul reads its operands as windows of the panel and of the whole weight, all 520 columns in one block.
// CHECK:         %[[S0:.*]] = tile.extract %[[PANEL]][%c0, %c0] : !tile.tile<128x2x37xf32, sbuf> -> !tile.tile<128x37xf32, sbuf>
// CHECK:         %[[M0:.*]] = tile.extract %[[B]][%c0, %c0] : !tile.tile<128x2x520xf32, sbuf> -> !tile.tile<128x512xf32, sbuf>
// CHECK:         %[[P0:.*]] = tile.matmul %[[S0]], %[[M0]] : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x512xf32, sbuf>) -> !tile.tile<37x512xf32, psum>
// CHECK:         %[[P1:.*]] = tile.matmul %{{.*}}, %{{.*}} acc %[[P0]] : (!tile.tile<128x37xf32, sbuf>, !tile.tile<128x512xf32, sbuf>, !tile.tile<37x512xf32, psum>)
// CHECK:         %[[P2:.*]] = tile.matmul %{{.*}}, %{{.*}} acc %[[P1]] : (!tile.tile<44x37xf32, sbuf>, !tile.tile<44x512xf32, sbuf>, !tile.tile<37x512xf32, psum>)
// CHECK:         tile.matmul %{{.*}}, %{{.*}} acc %{{.*}} : (!tile.tile<44x37xf32, sbuf>, !tile.tile<44x8xf32, sbuf>, !tile.tile<37x8xf32, psum>)
// The bias joins as PSUM is evacuated.
// CHECK:         %[[B:.*]] = tile.load %[[BIAS]][%c0, %c0] {{.*}} -> !tile.tile<37x512xf32, sbuf>
// CHECK:         tile.binary %[[P2]], %[[B]] {op = "add"} : (!tile.tile<37x512xf32, psum>, !tile.tile<37x512xf32, sbuf>)
// The remaining 8 columns are the block's second accumulator.
// CHECK:         tile.store %{{.*}}, %addmm[%c0, %c512]
// relu has a loop nest of its own here, over the product seen as [104, 185] (its elements split over the
// partitions); tile-fuse-epilogues then runs it on each tile of the product as it is stored.
// CHECK:         %relu = memref.alloc() : memref<37x520xf32, #mem<hbm>>
// CHECK:         tile.unary %{{.*}} {fn = "relu"} : (!tile.tile<104x185xf32, sbuf>) -> !tile.tile<104x185xf32, sbuf>
// K = 520 has four full tiles, read from the whole weight in two halves: the first half's products inlined
// (the first starts the accumulation), a loop over the second half's carries the PSUM accumulator.
// CHECK:         scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args(%{{.*}} = %{{.*}}) -> (!tile.tile<37x130xf32, psum>)
// CHECK-NOT:     torch.aten

// The backward graph: the bias gradient sums the gradient's 37 rows (dim 0) on TensorE, a ones column as the
// stationary and 10 contiguous features per row as the moving operand.
// BACKWARD-LABEL: func.func @main
// BACKWARD:       %[[ONES:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<37x1xf32, sbuf>
// BACKWARD:       tile.matmul %[[ONES]], %{{.*}} : (!tile.tile<37x1xf32, sbuf>, !tile.tile<37x10xf32, sbuf>) -> !tile.tile<1x10xf32, psum>
// threshold_backward of relu became a comparison and a select.
// BACKWARD:       tile.binary_scalar %{{.*}} {op = "is_le", scalar = 0.000000e+00 : f64}
// BACKWARD:       tile.select
// BACKWARD-NOT:   torch.aten

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
