// RUN: neuron-opt %s -p convert-torch-to-tile --split-input-file | filecheck %s
// RUN: neuron-opt %s -p neuron-pipeline --split-input-file -o /dev/null

// Matmul-shaped ops whose multiplied operands are fp32 widenings of bf16 values (torch-auto-cast's casts) feed
// TensorE the bf16 values. A rounding of fp32 that only such matmuls read is done by their loads (the DMA
// converts): neither cast gets a loop nest, and the only tensor allocated is the product.
// CHECK-LABEL: func.func @rounded_by_the_loads
// CHECK-NOT:     tile.copy
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<4x16xf32, #mem<hbm>>
// CHECK-NOT:     memref.alloc
// CHECK:         tile.load %x{{.*}} : memref<4x8xf32, #mem<hbm>> -> !tile.tile<{{.*}}xbf16, sbuf>
// CHECK:         tile.load %w{{.*}} : memref<8x16xf32, #mem<hbm>> -> !tile.tile<{{.*}}xbf16, sbuf>
// CHECK:         tile.matmul {{.*}} : (!tile.tile<{{.*}}xbf16, sbuf>, !tile.tile<{{.*}}xbf16, sbuf>) -> !tile.tile<4x16xf32, psum>
// CHECK:         func.return %[[OUT]] : memref<4x16xf32, #mem<hbm>>
func.func @rounded_by_the_loads(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %xh = torch.aten._to_copy %x {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %xw = torch.aten._to_copy %xh {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %wh = torch.aten._to_copy %w {dtype = bf16} : (tensor<8x16xf32>) -> tensor<8x16xbf16>
  %ww = torch.aten._to_copy %wh {dtype = f32} : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %y = torch.aten.mm %xw, %ww : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// -----

// A rounding something else reads (here the function's result) is stored once, and the matmul reads it; a widening
// read elsewhere too (the bias of addmm, the result) is lowered for that reader alone.
// CHECK-LABEL: func.func @roundings_and_widenings_read_elsewhere
// CHECK:         %[[XH:.*]] = memref.alloc() : memref<4x8xbf16, #mem<hbm>>
// CHECK:         %[[WW:.*]] = memref.alloc() : memref<8x16xf32, #mem<hbm>>
// CHECK:         tile.load %[[XH]]{{.*}} : memref<4x8xbf16, #mem<hbm>> -> !tile.tile<{{.*}}xbf16, sbuf>
// CHECK:         tile.load %wh{{.*}} : memref<8x16xbf16, #mem<hbm>> -> !tile.tile<{{.*}}xbf16, sbuf>
// CHECK:         tile.matmul {{.*}} : (!tile.tile<{{.*}}xbf16, sbuf>, !tile.tile<{{.*}}xbf16, sbuf>) -> !tile.tile<4x16xf32, psum>
// CHECK:         func.return %{{.*}}, %[[XH]], %[[WW]]
func.func @roundings_and_widenings_read_elsewhere(%x: tensor<4x8xf32>, %wh: tensor<8x16xbf16>) -> (tensor<4x16xf32>, tensor<4x8xbf16>, tensor<8x16xf32>) {
  %xh = torch.aten._to_copy %x {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %xw = torch.aten._to_copy %xh {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %ww = torch.aten._to_copy %wh {dtype = f32} : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %y = torch.aten.mm %xw, %ww : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %y, %xh, %ww : tensor<4x16xf32>, tensor<4x8xbf16>, tensor<8x16xf32>
}

// -----

// Operands widened from different 16-bit types, or one operand left fp32, keep the fp32 matmul.
// CHECK-LABEL: func.func @mixed_operands_stay_fp32
// CHECK:         tile.matmul {{.*}} : (!tile.tile<{{.*}}xf32, sbuf>, !tile.tile<{{.*}}xf32, sbuf>) -> !tile.tile<4x16xf32, psum>
// CHECK:         tile.matmul {{.*}} : (!tile.tile<{{.*}}xf32, sbuf>, !tile.tile<{{.*}}xf32, sbuf>) -> !tile.tile<4x16xf32, psum>
func.func @mixed_operands_stay_fp32(%xh: tensor<4x8xbf16>, %wf: tensor<8x16xf16>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %xw = torch.aten._to_copy %xh {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %ww = torch.aten._to_copy %wf {dtype = f32} : (tensor<8x16xf16>) -> tensor<8x16xf32>
  %y = torch.aten.mm %xw, %ww : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %z = torch.aten.mm %xw, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %y, %z : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Widened fp8 operands (a scaled fp8 matmul's): TensorE multiplies the fp8 values, e4m3 by e5m2 as fp8 training's
// backward does; no widened copy is allocated.
// CHECK-LABEL: func.func @fp8_operands
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<4x16xf32, #mem<hbm>>
// CHECK-NOT:     memref.alloc
// CHECK:         tile.matmul {{.*}} : (!tile.tile<8x4xf8E4M3FN, sbuf>, !tile.tile<8x16xf8E5M2, sbuf>) -> !tile.tile<4x16xf32, psum>
func.func @fp8_operands(%a: tensor<4x8xf8E4M3FN>, %b: tensor<8x16xf8E5M2>) -> tensor<4x16xf32> {
  %aw = torch.aten._to_copy %a {dtype = f32} : (tensor<4x8xf8E4M3FN>) -> tensor<4x8xf32>
  %bw = torch.aten._to_copy %b {dtype = f32} : (tensor<8x16xf8E5M2>) -> tensor<8x16xf32>
  %mm = torch.aten.mm %aw, %bw : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %mm : tensor<4x16xf32>
}
