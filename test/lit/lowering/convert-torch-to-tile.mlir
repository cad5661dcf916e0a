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
// CASES:       %[[T:.*]] = tile.view %x : memref<4x6x5xf32, #neuron.mem<hbm>> to memref<6x4x5xf32, strided<[5, 30, 1]>, #neuron.mem<hbm>>
// CASES:       %[[COPY:.*]] = memref.alloc() : memref<6x4x5xf32, #neuron.mem<hbm>>
// CASES:       tile.store
// CASES:       %[[R:.*]] = tile.view %[[COPY]] : memref<6x4x5xf32, #neuron.mem<hbm>> to memref<24x5xf32, #neuron.mem<hbm>>
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
// CASES:       tile.view %{{.*}} to memref<5x24xf32, strided<[1, 5]>, #neuron.mem<hbm>>

// -----

// A reshape of a contiguous tensor is only a new description of the same memory.
// CASES-LABEL: func.func @reshape_is_view
func.func @reshape_is_view(%x: tensor<4x6x5xf32>) -> tensor<24x5xf32> {
  %r = torch.aten.view %x {size = array<i64: 24, 5>} : (tensor<4x6x5xf32>) -> tensor<24x5xf32>
  func.return %r : tensor<24x5xf32>
}
// CASES-NOT:   memref.alloc
// CASES:       %[[R:.*]] = tile.view %x : memref<4x6x5xf32, #neuron.mem<hbm>> to memref<24x5xf32, #neuron.mem<hbm>>
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
// CASES:       tile.view %b : memref<130xf32, #neuron.mem<hbm>> to memref<5x130xf32, strided<[0, 1]>, #neuron.mem<hbm>>
// CASES:       tile.binary %{{.*}}, %{{.*}} {op = "subtract"}

// The MLP of examples/mlp.py (37x300 -> 520 -> 130 -> 10), forward graph as AOTAutograd hands it over.
// Arguments become HBM memrefs; the weight transpose and the bias broadcast are free strided views.
// CHECK-LABEL: func.func @main(%primals1: memref<520x300xf32, #neuron.mem<hbm>>
// CHECK:         %[[WT:.*]] = tile.view %primals1 : memref<520x300xf32, #neuron.mem<hbm>> to memref<300x520xf32, strided<[1, 300]>, #neuron.mem<hbm>>
// CHECK:         %[[BIAS:.*]] = tile.view %primals2 : memref<520xf32, #neuron.mem<hbm>> to memref<37x520xf32, strided<[0, 1]>, #neuron.mem<hbm>>
// Both operands have K contiguous in memory: tiles are loaded row-wise and transposed on TensorE so that K
// lies on partitions. The weight needs a transpose per moving tile, so N is tiled by 128: four tiles of 520
// in a loop, and a remainder of 8.
// CHECK:         scf.for %[[N:.*]] = %c0 to %c512 step %c128 {
// CHECK:           %[[X:.*]] = tile.load %primals3[%c0, %c0] : memref<37x300xf32, #neuron.mem<hbm>> -> !tile.tile<37x128xf32, sbuf>
// CHECK:           %[[XT:.*]] = tile.transpose %[[X]] : !tile.tile<37x128xf32, sbuf> -> !tile.tile<128x37xf32, psum>
// CHECK:           %[[XS:.*]] = tile.copy %[[XT]] : (!tile.tile<128x37xf32, psum>) -> !tile.tile<128x37xf32, sbuf>
// CHECK:           %[[W:.*]] = tile.load %[[WT]][%c0, %[[N]]] {dims = array<i64: 1, 0>} : {{.*}} -> !tile.tile<128x128xf32, sbuf>
// CHECK:           %[[WTT:.*]] = tile.transpose %[[W]]
// CHECK:           %[[WS:.*]] = tile.copy %[[WTT]]
// CHECK:           %[[P0:.*]] = tile.matmul %[[XS]], %[[WS]] : {{.*}} -> !tile.tile<37x128xf32, psum>
// K = 300 is two tiles of 128 and a peeled remainder of 44, accumulated in the same PSUM tile.
// CHECK:           %[[P1:.*]] = tile.matmul %{{.*}}, %{{.*}} acc %[[P0]]
// CHECK:           tile.load %primals3[%c0, %c256] : {{.*}} -> !tile.tile<37x44xf32, sbuf>
// CHECK:           %[[P2:.*]] = tile.matmul %{{.*}}, %{{.*}} acc %[[P1]]
// The bias joins as PSUM is evacuated.
// CHECK:           %[[B:.*]] = tile.load %[[BIAS]][%c0, %[[N]]] {{.*}} -> !tile.tile<37x128xf32, sbuf>
// CHECK:           tile.binary %[[P2]], %[[B]] {op = "add"} : (!tile.tile<37x128xf32, psum>, !tile.tile<37x128xf32, sbuf>)
// CHECK:         }
// CHECK:         tile.matmul {{.*}} -> !tile.tile<37x8xf32, psum>
// relu of a contiguous 37x520 tensor is viewed as 104 partitions x 185 elements, so every lane works.
// CHECK:         tile.unary %{{.*}} {fn = "relu"} : (!tile.tile<104x185xf32, sbuf>) -> !tile.tile<104x185xf32, sbuf>
// K = 520 has more than two full tiles: a loop carries the PSUM accumulator.
// CHECK:         scf.for %{{.*}} = %c128 to %c512 step %c128 iter_args(%{{.*}} = %{{.*}}) -> (!tile.tile<37x128xf32, psum>)
// CHECK-NOT:     torch.aten

// The backward graph: sum over the batch (dim 0) reads the gradient transposed, reducing along the free axis.
// BACKWARD-LABEL: func.func @main
// BACKWARD:       tile.reduce %{{.*}} {op = "add"} : (!tile.tile<10x37xf32, sbuf>) -> !tile.tile<10x1xf32, sbuf>
// threshold_backward of relu became a comparison and a select.
// BACKWARD:       tile.binary_scalar %{{.*}} {op = "is_le", scalar = 0.000000e+00 : f64}
// BACKWARD:       tile.select
// BACKWARD-NOT:   torch.aten

// SEMANTICS: check-semantics: {{[0-9]+}} inputs, all outputs match
