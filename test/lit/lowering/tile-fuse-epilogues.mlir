// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues | filecheck %s
// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-epilogues --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Elementwise nests reading a matmul's product run as the product's tiles leave PSUM (lowering/
// tile_fuse_epilogues.py); every case computes what the unfused nests compute.
// SEMANTICS-COUNT-11: all outputs match

// relu of a product: each evacuated tile is rectified and stored into relu's result; the product never reaches
// HBM and relu has no loop nest of its own.
// CHECK-LABEL: func.func @main(%a: memref<37x129xf32, #mem<hbm>>, %b: memref<129x130xf32, #mem<hbm>>) -> memref<37x130xf32
// CHECK:       %[[P:.*]] = tile.matmul {{.*}} acc {{.*}} -> !tile.tile<37x130xf32, psum>
// CHECK-NEXT:  %[[E:.*]] = tile.copy %[[P]] : (!tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xf32, sbuf>
// CHECK-NEXT:  %[[OUT:.*]] = memref.alloc() : memref<37x130xf32, #mem<hbm>>
// CHECK-NEXT:  %[[R:.*]] = tile.unary %[[E]] {fn = "relu"} : (!tile.tile<37x130xf32, sbuf>) -> !tile.tile<37x130xf32, sbuf>
// CHECK-NEXT:  tile.store %[[R]], %[[OUT]][%c0, %c0]
// CHECK-NOT:   memref.alloc
// CHECK-NOT:   tile.load
// CHECK:       func.return %[[OUT]]
func.func @main(%a: tensor<37x129xf32>, %b: tensor<129x130xf32>) -> tensor<37x130xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.relu %0 : (tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %1 : tensor<37x130xf32>
}

// -----

// A bf16 Linear layer and its residual, through a reshape to [2, 65, 200] (GPT-2's projections): the residual
// x is loaded at each stored tile's indices, seen through the product's shape [130, 200], and the bf16 product
// tile is added to it as the nest would have loaded it back. The last two rows are a tile of the same output
// block: after the block's evacuations, the two tiles' epilogues go step by step (each op for both tiles), so
// that in-order engines can work on one tile while another engine works on the other.
// CHECK-LABEL: func.func @main(%x: memref<2x65x200xbf16
// CHECK:       %[[E:.*]] = tile.copy %{{.*}} : (!tile.tile<128x200xf32, psum>) -> !tile.tile<128x200xbf16, sbuf>
// CHECK-NEXT:  %[[OUT:.*]] = memref.alloc() : memref<2x65x200xbf16, #mem<hbm>>
// CHECK-NEXT:  %[[XS:.*]] = tile.view %x : memref<2x65x200xbf16, #mem<hbm>> to memref<130x200xbf16, #mem<hbm>>
// CHECK-NEXT:  %[[OUTS:.*]] = tile.view %[[OUT]] : memref<2x65x200xbf16, #mem<hbm>> to memref<130x200xbf16, #mem<hbm>>
// CHECK-NEXT:  %[[E2:.*]] = tile.copy %{{.*}} : (!tile.tile<2x200xf32, psum>) -> !tile.tile<2x200xbf16, sbuf>
// CHECK-NEXT:  %[[T:.*]] = tile.load %[[XS]][%c0, %c0] : memref<130x200xbf16, #mem<hbm>> -> !tile.tile<128x200xbf16, sbuf>
// CHECK-NEXT:  %[[T2:.*]] = tile.load %[[XS]][%c128, %c0] : memref<130x200xbf16, #mem<hbm>> -> !tile.tile<2x200xbf16, sbuf>
// CHECK-NEXT:  %[[S:.*]] = tile.binary %[[E]], %[[T]] {op = "add"} : (!tile.tile<128x200xbf16, sbuf>, !tile.tile<128x200xbf16, sbuf>) -> !tile.tile<128x200xbf16, sbuf>
// CHECK-NEXT:  %[[S2:.*]] = tile.binary %[[E2]], %[[T2]] {op = "add"}
// CHECK-NEXT:  tile.store %[[S]], %[[OUTS]][%c0, %c0]
// CHECK-NEXT:  tile.store %[[S2]], %[[OUTS]][%c128, %c0]
// CHECK-NEXT:  func.return %[[OUT]]
func.func @main(%x: tensor<2x65x200xbf16>, %w: tensor<200x200xbf16>, %b: tensor<200xbf16>) -> tensor<2x65x200xbf16> {
  %0 = torch.aten.view %x {size = array<i64: 130, 200>} : (tensor<2x65x200xbf16>) -> tensor<130x200xbf16>
  %1 = torch.aten.addmm %b, %0, %w : (tensor<200xbf16>, tensor<130x200xbf16>, tensor<200x200xbf16>) -> tensor<130x200xbf16>
  %2 = torch.aten.view %1 {size = array<i64: 2, 65, 200>} : (tensor<130x200xbf16>) -> tensor<2x65x200xbf16>
  %3 = torch.aten.add.Tensor %2, %x : (tensor<2x65x200xbf16>, tensor<2x65x200xbf16>) -> tensor<2x65x200xbf16>
  func.return %3 : tensor<2x65x200xbf16>
}

// -----

// A bf16 product added to an fp32 tensor: the add reads the product's tile as the nest read it back from HBM,
// in bf16 (the evacuation rounds it as the store did), and the fp32 tensor's tile at the same indices.
// CHECK-LABEL: func.func @main(%a: memref<37x129xbf16
// CHECK:       %[[P:.*]] = tile.copy %{{.*}} : (!tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xbf16, sbuf>
// CHECK:       %[[C:.*]] = tile.load %c[%c0, %c0] : memref<37x130xf32, #mem<hbm>> -> !tile.tile<37x130xf32, sbuf>
// CHECK-NEXT:  tile.binary %[[P]], %[[C]] {op = "add"} : (!tile.tile<37x130xbf16, sbuf>, !tile.tile<37x130xf32, sbuf>) -> !tile.tile<37x130xf32, sbuf>
func.func @main(%a: tensor<37x129xbf16>, %b: tensor<129x130xbf16>, %c: tensor<37x130xf32>) -> tensor<37x130xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xbf16>, tensor<129x130xbf16>) -> tensor<37x130xbf16>
  %1 = torch.aten.add.Tensor %0, %c : (tensor<37x130xbf16>, tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %1 : tensor<37x130xf32>
}

// -----

// Two products added: the add runs in the epilogue of the later one, which reads the earlier one's result.
// CHECK-LABEL: func.func @main(%a: memref<37x129xf32, #mem<hbm>>, %b: memref<129x130xf32, #mem<hbm>>, %c: memref<129x130xf32
// CHECK:       %[[FIRST:.*]] = memref.alloc() : memref<37x130xf32
// CHECK:       tile.store %{{.*}}, %[[FIRST]]
// CHECK:       %[[SECOND:.*]] = tile.copy %{{.*}} : (!tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xf32, sbuf>
// CHECK-NEXT:  %[[SUM:.*]] = memref.alloc() : memref<37x130xf32
// CHECK-NEXT:  %[[T:.*]] = tile.load %[[FIRST]]
// CHECK-NEXT:  %[[S:.*]] = tile.binary %[[T]], %[[SECOND]] {op = "add"}
// CHECK-NEXT:  tile.store %[[S]], %[[SUM]]
func.func @main(%a: tensor<37x129xf32>, %b: tensor<129x130xf32>, %c: tensor<129x130xf32>) -> tensor<37x130xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.mm %a, %c : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %2 = torch.aten.add.Tensor %0, %1 : (tensor<37x130xf32>, tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %2 : tensor<37x130xf32>
}

// -----

// The same sum in a training forward, which also returns the earlier product for its backward: returning it
// does not write it, so the add still runs in the later product's epilogue (a residual sum saved for the
// backward, as a Linear layer's input after the attention).
// CHECK-LABEL: func.func @main(%a: memref<37x129xf32, #mem<hbm>>, %b: memref<129x130xf32, #mem<hbm>>, %c: memref<129x130xf32
// CHECK:       %[[FIRST:.*]] = memref.alloc() : memref<37x130xf32
// CHECK:       tile.store %{{.*}}, %[[FIRST]]
// CHECK:       %[[SECOND:.*]] = tile.copy %{{.*}} : (!tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xf32, sbuf>
// CHECK-NEXT:  %[[SUM:.*]] = memref.alloc() : memref<37x130xf32
// CHECK-NEXT:  %[[T:.*]] = tile.load %[[FIRST]]
// CHECK-NEXT:  %[[S:.*]] = tile.binary %[[T]], %[[SECOND]] {op = "add"}
// CHECK-NEXT:  tile.store %[[S]], %[[SUM]]
// CHECK-NOT:   tile.load
// CHECK:       func.return %[[SUM]], %[[FIRST]]
func.func @main(%a: tensor<37x129xf32>, %b: tensor<129x130xf32>, %c: tensor<129x130xf32>) -> (tensor<37x130xf32>, tensor<37x130xf32>) {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.mm %a, %c : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %2 = torch.aten.add.Tensor %0, %1 : (tensor<37x130xf32>, tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %2, %0 : tensor<37x130xf32>, tensor<37x130xf32>
}

// -----

// An epilogue of an epilogue: once sigmoid runs as the product is stored, the multiply reading sigmoid's result
// runs there too.
// CHECK-LABEL: func.func @main(%a: memref<37x129xf32, #mem<hbm>>, %b: memref<129x130xf32, #mem<hbm>>) -> memref<37x130xf32
// CHECK:       %[[G:.*]] = tile.unary %{{.*}} {fn = "sigmoid"}
// CHECK-NEXT:  memref.alloc
// CHECK-NEXT:  %[[M:.*]] = tile.binary_scalar %[[G]] {op = "multiply", scalar = 3.000000e+00 : f64}
// CHECK-NEXT:  tile.store %[[M]]
// CHECK-NOT:   tile.load
// CHECK:       func.return
func.func @main(%a: tensor<37x129xf32>, %b: tensor<129x130xf32>) -> tensor<37x130xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.sigmoid %0 : (tensor<37x130xf32>) -> tensor<37x130xf32>
  %2 = torch.aten.mul.Scalar %1 {other = 3.000000e+00 : f64} : (tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %2 : tensor<37x130xf32>
}

// -----

// The product is also returned (a training forward saves a Linear layer's output for its activation's
// backward): each evacuated tile is stored into the product as before and, rectified, into relu's result; relu
// reads nothing back from HBM and has no loop nest of its own.
// CHECK-LABEL: func.func @main(%a: memref<37x129xf32, #mem<hbm>>, %b: memref<129x130xf32, #mem<hbm>>) -> (memref
// CHECK:       %[[PRODUCT:.*]] = memref.alloc() : memref<37x130xf32, #mem<hbm>>
// CHECK:       %[[P:.*]] = tile.matmul {{.*}} acc {{.*}} -> !tile.tile<37x130xf32, psum>
// CHECK-NEXT:  %[[E:.*]] = tile.copy %[[P]] : (!tile.tile<37x130xf32, psum>) -> !tile.tile<37x130xf32, sbuf>
// CHECK-NEXT:  %[[OUT:.*]] = memref.alloc() : memref<37x130xf32, #mem<hbm>>
// CHECK-NEXT:  tile.store %[[E]], %[[PRODUCT]][%c0, %c0]
// CHECK-NEXT:  %[[R:.*]] = tile.unary %[[E]] {fn = "relu"} : (!tile.tile<37x130xf32, sbuf>) -> !tile.tile<37x130xf32, sbuf>
// CHECK-NEXT:  tile.store %[[R]], %[[OUT]][%c0, %c0]
// CHECK-NOT:   tile.load
// CHECK:       func.return %[[PRODUCT]], %[[OUT]]
func.func @main(%a: tensor<37x129xf32>, %b: tensor<129x130xf32>) -> (tensor<37x130xf32>, tensor<37x130xf32>) {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.relu %0 : (tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %0, %1 : tensor<37x130xf32>, tensor<37x130xf32>
}

// -----

// Not fused: the other operand is computed after the product (its nest would have to run first).
// CHECK-LABEL: func.func @main(%a: memref<37x129xf32, #mem<hbm>>, %b: memref<129x130xf32, #mem<hbm>>, %c: memref<37x130xf32
// CHECK:       tile.matmul
// CHECK:       tile.unary %{{.*}} {fn = "relu"}
// CHECK:       tile.load
// CHECK:       tile.binary %{{.*}}, %{{.*}} {op = "add"}
func.func @main(%a: tensor<37x129xf32>, %b: tensor<129x130xf32>, %c: tensor<37x130xf32>) -> tensor<37x130xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.relu %c : (tensor<37x130xf32>) -> tensor<37x130xf32>
  %2 = torch.aten.add.Tensor %0, %1 : (tensor<37x130xf32>, tensor<37x130xf32>) -> tensor<37x130xf32>
  func.return %2 : tensor<37x130xf32>
}

// -----

// Not fused: the consumer is no elementwise nest over the product (a reduction of its rows).
// CHECK-LABEL: func.func @main(%a: memref<37x129xf32, #mem<hbm>>, %b: memref<129x130xf32, #mem<hbm>>) -> memref<37xf32
// CHECK:       tile.matmul
// CHECK:       tile.store
// CHECK:       tile.load
// CHECK:       tile.reduce
func.func @main(%a: tensor<37x129xf32>, %b: tensor<129x130xf32>) -> tensor<37xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<37x129xf32>, tensor<129x130xf32>) -> tensor<37x130xf32>
  %1 = torch.aten.sum.dim_IntList %0 {dim = array<i64: 1>} : (tensor<37x130xf32>) -> tensor<37xf32>
  func.return %1 : tensor<37xf32>
}

// -----

// The division by a 0-d tensor fuses into the column sum's evacuation; the later add reads its 0-d operand through
// a 128-row broadcast view, more elements than the division's result holds: no view of the product's shape, so it
// stays a nest of its own (the pass once raised here).
// CHECK-LABEL: func.func @main(%x: memref<8x8xf32, #mem<hbm>>, %n: memref<f32, #mem<hbm>>, %m: memref<f32, #mem<hbm>>) -> memref<8xf32
// CHECK:       tile.matmul
// CHECK:       tile.binary {{.*}} {op = "multiply"}
// CHECK:       tile.binary_scalar {{.*}} {op = "add"}
func.func @main(%x: tensor<8x8xf32>, %n: tensor<f32>, %m: tensor<f32>) -> tensor<8xf32> {
  %0 = torch.aten.sum.dim_IntList %x {dim = array<i64: 0>} : (tensor<8x8xf32>) -> tensor<8xf32>
  %1 = torch.aten.div.Tensor %0, %n : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = torch.aten.add.Tensor %1, %m {alpha = 1.0 : f64} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  func.return %2 : tensor<8xf32>
}

// -----

// A scaled fp8 matmul (`_scaled_mm`'s per-tensor scales): each multiply by a 0-d tensor reads one element through
// a broadcast column view; it is loaded once per evacuation group as a column of the product tile's partitions,
// and both multiplies run as the tiles leave PSUM (tiles of 128 and of 72 rows). No nest of its own is left.
// CHECK-LABEL: func.func @main(%a: memref<200x384xf8E4M3FN, #mem<hbm>>, %b: memref<384x640xf8E4M3FN, #mem<hbm>>, %s: memref<f32, #mem<hbm>>, %t: memref<f32, #mem<hbm>>)
// CHECK:       tile.matmul
// CHECK:       %[[S:.*]] = tile.view %s : memref<f32, #mem<hbm>> to memref<128x1xf32, strided<[0, 0]>, #mem<hbm>>
// CHECK:       %[[SC:.*]] = tile.load %[[S]]{{.*}} -> !tile.tile<128x1xf32, sbuf>
// CHECK:       %[[SC72:.*]] = tile.load %[[S]]{{.*}} -> !tile.tile<72x1xf32, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} column %[[SC]] {op = "multiply"} : (!tile.tile<128x512xf32, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} column %[[SC72]] {op = "multiply"} : (!tile.tile<72x512xf32, sbuf>
// CHECK:       %[[T:.*]] = tile.view %t : memref<f32, #mem<hbm>> to memref<128x1xf32, strided<[0, 0]>, #mem<hbm>>
// CHECK:       %[[TC:.*]] = tile.load %[[T]]{{.*}} -> !tile.tile<128x1xf32, sbuf>
// CHECK:       %[[R:.*]] = tile.binary_scalar %{{.*}} column %[[TC]] {op = "multiply"} : (!tile.tile<128x512xf32, sbuf>
// CHECK:       tile.store %[[R]]
// CHECK-NOT:   scf.for
// CHECK:       func.return
func.func @main(%a: tensor<200x384xf8E4M3FN>, %b: tensor<384x640xf8E4M3FN>, %s: tensor<f32>, %t: tensor<f32>) -> tensor<200x640xf32> {
  %0 = torch.aten._to_copy %a {dtype = f32} : (tensor<200x384xf8E4M3FN>) -> tensor<200x384xf32>
  %1 = torch.aten._to_copy %b {dtype = f32} : (tensor<384x640xf8E4M3FN>) -> tensor<384x640xf32>
  %2 = torch.aten.mm %0, %1 : (tensor<200x384xf32>, tensor<384x640xf32>) -> tensor<200x640xf32>
  %3 = torch.aten.mul.Tensor %2, %s : (tensor<200x640xf32>, tensor<f32>) -> tensor<200x640xf32>
  %4 = torch.aten.mul.Tensor %3, %t : (tensor<200x640xf32>, tensor<f32>) -> tensor<200x640xf32>
  func.return %4 : tensor<200x640xf32>
}

// -----

// A product of 128 elements plus a 0-d tensor: the add's own nest runs on [128, 1] tiles, in which the scalar's
// broadcast is a per-partition column of the same shape as the product's elements. Fused, the scalar stays a
// column ([8, 1], loaded once), not a whole tile of the product's shape.
// CHECK-LABEL: func.func @main(%a: memref<8x32xf32, #mem<hbm>>, %b: memref<32x16xf32, #mem<hbm>>, %s: memref<f32, #mem<hbm>>)
// CHECK:       %[[E:.*]] = tile.copy {{.*}} : (!tile.tile<8x16xf32, psum>) -> !tile.tile<8x16xf32, sbuf>
// CHECK:       %[[V:.*]] = tile.view %s : memref<f32, #mem<hbm>> to memref<8x1xf32, strided<[0, 0]>, #mem<hbm>>
// CHECK:       %[[C:.*]] = tile.load %[[V]]{{.*}} -> !tile.tile<8x1xf32, sbuf>
// CHECK-NEXT:  tile.binary_scalar %[[E]] column %[[C]] {op = "add"} : (!tile.tile<8x16xf32, sbuf>, !tile.tile<8x1xf32, sbuf>) -> !tile.tile<8x16xf32, sbuf>
func.func @main(%a: tensor<8x32xf32>, %b: tensor<32x16xf32>, %s: tensor<f32>) -> tensor<8x16xf32> {
  %0 = torch.aten.mm %a, %b : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %1 = torch.aten.add.Tensor %0, %s : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  func.return %1 : tensor<8x16xf32>
}
