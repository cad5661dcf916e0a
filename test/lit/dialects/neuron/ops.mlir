// RUN: NEURON_ROUNDTRIP

// Custom syntax -> generic -> custom for the neuron dialect (ir/dialects/neuron.py): its attributes, buffers
// and every instruction op, on the trn2 target unless a case says otherwise.

// CHECK: builtin.module attributes {neuron.target = #neuron.target<trn2>}
builtin.module attributes {neuron.target = #neuron.target<trn2>} {

  // ---- attributes ---------------------------------------------------------------------------------------------

  // CHECK-LABEL: func.func @attributes
  // CHECK-SAME: mem = [#mem<hbm>, #mem<sbuf>, #mem<psum>]
  // CHECK-SAME: engine = [#neuron.engine<tensor>, #neuron.engine<vector>, #neuron.engine<scalar>, #neuron.engine<gpsimd>, #neuron.engine<sync>, #neuron.engine<dma>]
  // CHECK-SAME: target = [#neuron.target<trn1>, #neuron.target<trn2>, #neuron.target<trn3>]
  // CHECK-SAME: ap = [#neuron.ap<0:128, 0, [[1, 512]]>, #neuron.ap<32:64, 7, [[64, 4], [-1, 8]]>, #neuron.ap<300, [[300, 37], [1, 300]]>, #neuron.ap<0, [[0, 37], [1, 512]]>]
  func.func @attributes() attributes {
      mem = [#mem<hbm>, #mem<sbuf>, #mem<psum>],
      engine = [#neuron.engine<tensor>, #neuron.engine<vector>, #neuron.engine<scalar>, #neuron.engine<gpsimd>, #neuron.engine<sync>, #neuron.engine<dma>],
      target = [#neuron.target<trn1>, #neuron.target<trn2>, #neuron.target<trn3>],
      ap = [#neuron.ap<0:128, 0, [[1, 512]]>, #neuron.ap<32:64, 7, [[64, 4], [-1, 8]]>, #neuron.ap<300, [[300, 37], [1, 300]]>, #neuron.ap<0, [[0, 37], [1, 512]]>]} {
    func.return
  }

  // ---- buffers ------------------------------------------------------------------------------------------------

  // CHECK-LABEL: func.func @alloc_with_and_without_address
  func.func @alloc_with_and_without_address() {
    // CHECK: %[[A:.*]] = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    %a = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    // CHECK: %[[B:.*]] = neuron.alloc {address = 2048 : i64} : memref<37x512xf32, #mem<sbuf>>
    %b = neuron.alloc {address = 2048 : i64} : memref<37x512xf32, #mem<sbuf>>
    // CHECK: %[[P:.*]] = neuron.alloc {address = 14336 : i64} : memref<128x2x256xf32, #mem<psum>>
    %p = neuron.alloc {address = 14336 : i64} : memref<128x2x256xf32, #mem<psum>>
    // HBM scratch: no partition axis, the address is absolute.
    // CHECK: %[[H:.*]] = neuron.alloc {address = 4096 : i64} : memref<520xbf16, #mem<hbm>>
    %h = neuron.alloc {address = 4096 : i64} : memref<520xbf16, #mem<hbm>>
    // A whole trn2 partition (224 KiB).
    // CHECK: %[[FULL:.*]] = neuron.alloc {address = 0 : i64} : memref<128x57344xf32, #mem<sbuf>>
    %full = neuron.alloc {address = 0 : i64} : memref<128x57344xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @view_of_argument
  // CHECK-SAME: (%[[W:[^:]+]]: memref<520x300xf32, #mem<hbm>>
  func.func @view_of_argument(%w: memref<520x300xf32, #mem<hbm>>) -> memref<300x520xf32, strided<[1, 300]>, #mem<hbm>> {
    // CHECK: %[[T:.*]] = neuron.view %[[W]] : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
    %t = neuron.view %w : memref<520x300xf32, #mem<hbm>> to memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
    // CHECK: func.return %[[T]]
    func.return %t : memref<300x520xf32, strided<[1, 300]>, #mem<hbm>>
  }

  // ---- nc_matmul ----------------------------------------------------------------------------------------------

  // CHECK-LABEL: func.func @nc_matmul_static_accumulate
  func.func @nc_matmul_static_accumulate() {
    // CHECK: %[[P:.*]] = neuron.alloc
    %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
    // CHECK: %[[S:.*]] = neuron.alloc
    %s = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
    // CHECK: %[[M:.*]] = neuron.alloc
    %m = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    // CHECK: neuron.nc_matmul tensor dst %[[P]][0:37, 0, [[1, 512]]], stationary %[[S]][0:128, 0, [[1, 37]]], moving %[[M]][0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    // CHECK: neuron.nc_matmul tensor dst %[[P]][0:37, 0, [[1, 512]]], stationary %[[S]][0:128, 0, [[1, 37]]], moving %[[M]][0:128, 0, [[1, 512]]] {accumulate = true} : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<37x512xf32, #mem<psum>>, memref<128x37xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @nc_matmul_dynamic_accumulate
  // CHECK-SAME: (%[[FIRST:[^:]+]]: i1
  func.func @nc_matmul_dynamic_accumulate(%first: i1) {
    // bf16 inputs, fp32 dst in the second PSUM bank (element offset 512 of a 1024-wide buffer).
    // CHECK: %[[P:.*]] = neuron.alloc
    %p = neuron.alloc : memref<64x1024xf32, #mem<psum>>
    // CHECK: %[[S:.*]] = neuron.alloc
    %s = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    // CHECK: %[[M:.*]] = neuron.alloc
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    // CHECK: neuron.nc_matmul tensor dst %[[P]][0:64, 512, [[1, 512]]], stationary %[[S]][0:128, 0, [[1, 64]]], moving %[[M]][0:128, 0, [[1, 512]]], accumulate %[[FIRST]] : memref<64x1024xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:64, 512, [[1, 512]]], stationary %s[0:128, 0, [[1, 64]]], moving %m[0:128, 0, [[1, 512]]], accumulate %first : memref<64x1024xf32, #mem<psum>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @nc_matmul_is_transpose
  func.func @nc_matmul_is_transpose() {
    // CHECK: %[[P:.*]] = neuron.alloc
    %p = neuron.alloc : memref<128x128xbf16, #mem<psum>>
    // CHECK: %[[EYE:.*]] = neuron.alloc
    %eye = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    // CHECK: %[[M:.*]] = neuron.alloc
    %m = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    // CHECK: neuron.nc_matmul tensor dst %[[P]][0:128, 0, [[1, 128]]], stationary %[[EYE]][0:128, 0, [[1, 128]]], moving %[[M]][0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xbf16, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x128xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xbf16, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x128xbf16, #mem<sbuf>>
    func.return
  }

  // Row tiling: two heads' products of 64 contraction rows, on partitions 0..63 and 64..127, in the PE array's two
  // row tiles of 64 rows.
  // CHECK-LABEL: func.func @nc_matmul_row_tiles
  func.func @nc_matmul_row_tiles() {
    // CHECK: %[[P:.*]] = neuron.alloc
    %p = neuron.alloc : memref<128x1024xf32, #mem<psum>>
    // CHECK: %[[S:.*]] = neuron.alloc
    %s = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    // CHECK: %[[M:.*]] = neuron.alloc
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    // CHECK: neuron.nc_matmul tensor dst %[[P]][0:128, 0, [[1, 512]]], stationary %[[S]][0:64, 0, [[1, 128]]], moving %[[M]][0:64, 0, [[1, 512]]] {row_tile_start = 0 : i64, row_tile_size = 64 : i64} : memref<128x1024xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 512]]], stationary %s[0:64, 0, [[1, 128]]], moving %m[0:64, 0, [[1, 512]]] {row_tile_start = 0 : i64, row_tile_size = 64 : i64} : memref<128x1024xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    // CHECK: neuron.nc_matmul tensor dst %[[P]][0:128, 512, [[1, 512]]], stationary %[[S]][64:128, 0, [[1, 128]]], moving %[[M]][64:128, 0, [[1, 512]]] {row_tile_start = 64 : i64, row_tile_size = 64 : i64} : memref<128x1024xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:128, 512, [[1, 512]]], stationary %s[64:128, 0, [[1, 128]]], moving %m[64:128, 0, [[1, 512]]] {row_tile_start = 64 : i64, row_tile_size = 64 : i64} : memref<128x1024xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    // A quarter of the array: 32 rows at 96 (trn2 and newer).
    // CHECK: neuron.nc_matmul tensor dst %[[P]][0:128, 0, [[1, 512]]], stationary %[[S]][96:128, 0, [[1, 128]]], moving %[[M]][96:128, 0, [[1, 512]]] {row_tile_start = 96 : i64, row_tile_size = 32 : i64} : memref<128x1024xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 512]]], stationary %s[96:128, 0, [[1, 128]]], moving %m[96:128, 0, [[1, 512]]] {row_tile_start = 96 : i64, row_tile_size = 32 : i64} : memref<128x1024xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }

  // ---- ScalarE ------------------------------------------------------------------------------------------------

  // CHECK-LABEL: func.func @activation_bias_scale_vector_accumulate_dst
  func.func @activation_bias_scale_vector_accumulate_dst() {
    // CHECK: %[[Y:.*]] = neuron.alloc
    %y = neuron.alloc : memref<37x520xf32, #mem<sbuf>>
    // CHECK: %[[SUM:.*]] = neuron.alloc
    %sum = neuron.alloc : memref<37x1xf32, #mem<sbuf>>
    // CHECK: %[[P:.*]] = neuron.alloc
    %p = neuron.alloc : memref<37x520xf32, #mem<psum>>
    // CHECK: %[[B:.*]] = neuron.alloc
    %b = neuron.alloc : memref<37x2xf32, #mem<sbuf>>
    // Roles in the opcode's order: dst, accumulate_dst, src, bias, scale_vector.
    // CHECK: neuron.activation scalar dst %[[Y]][0:37, 0, [[1, 520]]], accumulate_dst %[[SUM]][0:37, 0, [[1, 1]]], src %[[P]][0:37, 0, [[1, 520]]], bias %[[B]][0:37, 0, [[1, 1]]], scale_vector %[[B]][0:37, 1, [[1, 1]]] {func = "gelu"} : memref<37x520xf32, #mem<sbuf>>, memref<37x1xf32, #mem<sbuf>>, memref<37x520xf32, #mem<psum>>, memref<37x2xf32, #mem<sbuf>>, memref<37x2xf32, #mem<sbuf>>
    neuron.activation scalar dst %y[0:37, 0, [[1, 520]]], accumulate_dst %sum[0:37, 0, [[1, 1]]], src %p[0:37, 0, [[1, 520]]], bias %b[0:37, 0, [[1, 1]]], scale_vector %b[0:37, 1, [[1, 1]]] {func = "gelu"} : memref<37x520xf32, #mem<sbuf>>, memref<37x1xf32, #mem<sbuf>>, memref<37x520xf32, #mem<psum>>, memref<37x2xf32, #mem<sbuf>>, memref<37x2xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @activation_immediates
  func.func @activation_immediates() {
    // CHECK: %[[Y:.*]] = neuron.alloc
    %y = neuron.alloc : memref<128x64xbf16, #mem<psum>>
    // CHECK: %[[X:.*]] = neuron.alloc
    %x = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    // CHECK: neuron.activation scalar dst %[[Y]][0:128, 0, [[1, 64]]], src %[[X]][0:128, 0, [[1, 64]]] {func = "exp", scale = 5.000000e-01 : f64, bias_value = -1.000000e+00 : f64, alpha = 0.000000e+00 : f64} : memref<128x64xbf16, #mem<psum>>, memref<128x64xf32, #mem<sbuf>>
    neuron.activation scalar dst %y[0:128, 0, [[1, 64]]], src %x[0:128, 0, [[1, 64]]] {func = "exp", scale = 0.5 : f64, bias_value = -1.0 : f64, alpha = 0.0 : f64} : memref<128x64xbf16, #mem<psum>>, memref<128x64xf32, #mem<sbuf>>
    func.return
  }

  // ---- VectorE / GpSimdE --------------------------------------------------------------------------------------

  // CHECK-LABEL: func.func @tensor_tensor_psum_operand
  func.func @tensor_tensor_psum_operand() {
    // CHECK: %[[D:.*]] = neuron.alloc
    %d = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
    // CHECK: %[[A:.*]] = neuron.alloc
    %a = neuron.alloc : memref<37x512xf32, #mem<psum>>
    // CHECK: %[[B:.*]] = neuron.alloc
    %b = neuron.alloc : memref<37x512xf32, #mem<sbuf>>
    // CHECK: neuron.tensor_tensor vector dst %[[D]][0:37, 0, [[1, 512]]], in0 %[[A]][0:37, 0, [[1, 512]]], in1 %[[B]][0:37, 0, [[1, 512]]] {op = "add"} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>, memref<37x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %d[0:37, 0, [[1, 512]]], in0 %a[0:37, 0, [[1, 512]]], in1 %b[0:37, 0, [[1, 512]]] {op = "add"} : memref<37x512xf32, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>, memref<37x512xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @tensor_tensor_gpsimd_quadrant
  func.func @tensor_tensor_gpsimd_quadrant() {
    // 32 partitions starting at partition 96; a 4-d free pattern (the hardware's maximum).
    // CHECK: %[[D:.*]] = neuron.alloc
    %d = neuron.alloc : memref<128x2x3x4x5xi32, #mem<sbuf>>
    // CHECK: neuron.tensor_tensor gpsimd dst %[[D]][96:128, 0, [[60, 2], [20, 3], [5, 4], [1, 5]]], in0 %[[D]][96:128, 0, [[60, 2], [20, 3], [5, 4], [1, 5]]], in1 %[[D]][0:32, 0, [[1, 120]]] {op = "bitwise_xor"} : memref<128x2x3x4x5xi32, #mem<sbuf>>, memref<128x2x3x4x5xi32, #mem<sbuf>>, memref<128x2x3x4x5xi32, #mem<sbuf>>
    neuron.tensor_tensor gpsimd dst %d[96:128, 0, [[60, 2], [20, 3], [5, 4], [1, 5]]], in0 %d[96:128, 0, [[60, 2], [20, 3], [5, 4], [1, 5]]], in1 %d[0:32, 0, [[1, 120]]] {op = "bitwise_xor"} : memref<128x2x3x4x5xi32, #mem<sbuf>>, memref<128x2x3x4x5xi32, #mem<sbuf>>, memref<128x2x3x4x5xi32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @tensor_scalar_operand0
  func.func @tensor_scalar_operand0() {
    // CHECK: %[[Y:.*]] = neuron.alloc
    %y = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
    // CHECK: %[[X:.*]] = neuron.alloc
    %x = neuron.alloc : memref<128x37xf32, #mem<psum>>
    // CHECK: %[[C:.*]] = neuron.alloc
    %c = neuron.alloc : memref<128x2xf32, #mem<sbuf>>
    // CHECK: neuron.tensor_scalar vector dst %[[Y]][0:128, 0, [[1, 37]]], src %[[X]][0:128, 0, [[1, 37]]], operand0 %[[C]][0:128, 0, [[1, 1]]], operand1 %[[C]][0:128, 1, [[1, 1]]] {op0 = "subtract", op1 = "multiply"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<psum>>, memref<128x2xf32, #mem<sbuf>>, memref<128x2xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %y[0:128, 0, [[1, 37]]], src %x[0:128, 0, [[1, 37]]], operand0 %c[0:128, 0, [[1, 1]]], operand1 %c[0:128, 1, [[1, 1]]] {op0 = "subtract", op1 = "multiply"} : memref<128x37xf32, #mem<sbuf>>, memref<128x37xf32, #mem<psum>>, memref<128x2xf32, #mem<sbuf>>, memref<128x2xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @scalar_tensor_tensor_operand0
  func.func @scalar_tensor_tensor_operand0() {
    // CHECK: %[[D:.*]] = neuron.alloc
    %d = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    // CHECK: %[[Y:.*]] = neuron.alloc
    %y = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    // CHECK: %[[G:.*]] = neuron.alloc
    %g = neuron.alloc : memref<128x512xf32, #mem<psum>>
    // CHECK: %[[S:.*]] = neuron.alloc
    %s = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    // CHECK: neuron.scalar_tensor_tensor vector dst %[[D]][0:128, 0, [[1, 512]]], src %[[G]][0:128, 0, [[1, 512]]], in1 %[[Y]][0:128, 0, [[1, 512]]], operand0 %[[S]][0:128, 0, [[1, 1]]] {op0 = "subtract", op1 = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    neuron.scalar_tensor_tensor vector dst %d[0:128, 0, [[1, 512]]], src %g[0:128, 0, [[1, 512]]], in1 %y[0:128, 0, [[1, 512]]], operand0 %s[0:128, 0, [[1, 1]]] {op0 = "subtract", op1 = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @scalar_tensor_tensor_immediate_reversed
  func.func @scalar_tensor_tensor_immediate_reversed() {
    // CHECK: %[[A:.*]] = neuron.alloc
    %a = neuron.alloc : memref<37x2x64xf32, #mem<sbuf>>
    // CHECK: neuron.scalar_tensor_tensor vector dst %[[A]][0:37, 0, [[64, 2], [1, 64]]], src %[[A]][0:37, 0, [[1, 128]]], in1 %[[A]][0:37, 0, [[64, 2], [1, 64]]] {op0 = "multiply", scalar0 = -5.000000e-01 : f64, reverse0 = true, op1 = "add", reverse1 = true} : memref<37x2x64xf32, #mem<sbuf>>, memref<37x2x64xf32, #mem<sbuf>>, memref<37x2x64xf32, #mem<sbuf>>
    neuron.scalar_tensor_tensor vector dst %a[0:37, 0, [[64, 2], [1, 64]]], src %a[0:37, 0, [[1, 128]]], in1 %a[0:37, 0, [[64, 2], [1, 64]]] {op0 = "multiply", scalar0 = -0.5 : f64, reverse0 = true, op1 = "add", reverse1 = true} : memref<37x2x64xf32, #mem<sbuf>>, memref<37x2x64xf32, #mem<sbuf>>, memref<37x2x64xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @tensor_scalar_immediates
  func.func @tensor_scalar_immediates() {
    // CHECK: %[[Y:.*]] = neuron.alloc
    %y = neuron.alloc : memref<37x520xbf16, #mem<sbuf>>
    // CHECK: %[[X:.*]] = neuron.alloc
    %x = neuron.alloc : memref<37x520xf32, #mem<sbuf>>
    // CHECK: neuron.tensor_scalar scalar dst %[[Y]][0:37, 0, [[1, 520]]], src %[[X]][0:37, 0, [[1, 520]]] {op0 = "subtract", scalar0 = 1.000000e+00 : f64, reverse0 = true, op1 = "max", scalar1 = 0.000000e+00 : f64, reverse1 = false} : memref<37x520xbf16, #mem<sbuf>>, memref<37x520xf32, #mem<sbuf>>
    neuron.tensor_scalar scalar dst %y[0:37, 0, [[1, 520]]], src %x[0:37, 0, [[1, 520]]] {op0 = "subtract", scalar0 = 1.0 : f64, reverse0 = true, op1 = "max", scalar1 = 0.0 : f64, reverse1 = false} : memref<37x520xbf16, #mem<sbuf>>, memref<37x520xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @tensor_reduce_axes
  func.func @tensor_reduce_axes() {
    // CHECK: %[[S:.*]] = neuron.alloc
    %s = neuron.alloc : memref<64x4xf32, #mem<sbuf>>
    // CHECK: %[[X:.*]] = neuron.alloc
    %x = neuron.alloc : memref<64x4x8x16xf32, #mem<psum>>
    // CHECK: neuron.tensor_reduce vector dst %[[S]][0:64, 0, [[1, 4]]], src %[[X]][0:64, 0, [[128, 4], [16, 8], [1, 16]]] {op = "max", axes = 2 : i64, negate = true} : memref<64x4xf32, #mem<sbuf>>, memref<64x4x8x16xf32, #mem<psum>>
    neuron.tensor_reduce vector dst %s[0:64, 0, [[1, 4]]], src %x[0:64, 0, [[128, 4], [16, 8], [1, 16]]] {op = "max", axes = 2 : i64, negate = true} : memref<64x4xf32, #mem<sbuf>>, memref<64x4x8x16xf32, #mem<psum>>
    // CHECK: neuron.tensor_reduce vector dst %[[S]][0:64, 0, [[1, 1]]], src %[[X]][0:64, 0, [[1, 512]]] {op = "add"} : memref<64x4xf32, #mem<sbuf>>, memref<64x4x8x16xf32, #mem<psum>>
    neuron.tensor_reduce vector dst %s[0:64, 0, [[1, 1]]], src %x[0:64, 0, [[1, 512]]] {op = "add"} : memref<64x4xf32, #mem<sbuf>>, memref<64x4x8x16xf32, #mem<psum>>
    func.return
  }

  // CHECK-LABEL: func.func @tensor_copy_psum_to_sbuf
  func.func @tensor_copy_psum_to_sbuf() {
    // CHECK: %[[Y:.*]] = neuron.alloc
    %y = neuron.alloc : memref<37x512xbf16, #mem<sbuf>>
    // CHECK: %[[P:.*]] = neuron.alloc
    %p = neuron.alloc : memref<37x512xf32, #mem<psum>>
    // Same elements, different free shapes: the copy pairs them row-major within each partition.
    // CHECK: neuron.tensor_copy vector dst %[[Y]][0:37, 0, [[1, 512]]], src %[[P]][0:37, 0, [[256, 2], [1, 256]]] : memref<37x512xbf16, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
    neuron.tensor_copy vector dst %y[0:37, 0, [[1, 512]]], src %p[0:37, 0, [[256, 2], [1, 256]]] : memref<37x512xbf16, #mem<sbuf>>, memref<37x512xf32, #mem<psum>>
    func.return
  }

  // CHECK-LABEL: func.func @select_gpsimd
  func.func @select_gpsimd() {
    // CHECK: %[[D:.*]] = neuron.alloc
    %d = neuron.alloc : memref<37x130xf32, #mem<sbuf>>
    // CHECK: %[[MASK:.*]] = neuron.alloc
    %mask = neuron.alloc : memref<37x130xf32, #mem<sbuf>>
    // CHECK: %[[A:.*]] = neuron.alloc
    %a = neuron.alloc : memref<37x130xf32, #mem<sbuf>>
    // CHECK: neuron.select gpsimd dst %[[D]][0:37, 0, [[1, 130]]], predicate %[[MASK]][0:37, 0, [[1, 130]]], on_true %[[A]][0:37, 0, [[1, 130]]], on_false %[[D]][0:37, 0, [[1, 130]]] : memref<37x130xf32, #mem<sbuf>>, memref<37x130xf32, #mem<sbuf>>, memref<37x130xf32, #mem<sbuf>>, memref<37x130xf32, #mem<sbuf>>
    neuron.select gpsimd dst %d[0:37, 0, [[1, 130]]], predicate %mask[0:37, 0, [[1, 130]]], on_true %a[0:37, 0, [[1, 130]]], on_false %d[0:37, 0, [[1, 130]]] : memref<37x130xf32, #mem<sbuf>>, memref<37x130xf32, #mem<sbuf>>, memref<37x130xf32, #mem<sbuf>>, memref<37x130xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @memset_column
  func.func @memset_column() {
    // CHECK: %[[ONES:.*]] = neuron.alloc
    %ones = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    // CHECK: neuron.memset vector dst %[[ONES]][0:128, 0, [[1, 1]]] {value = 1.000000e+00 : f64} : memref<128x1xf32, #mem<sbuf>>
    neuron.memset vector dst %ones[0:128, 0, [[1, 1]]] {value = 1.0 : f64} : memref<128x1xf32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @memset_int64_smallest
  func.func @memset_int64_smallest() {
    // CHECK: %[[LOW:.*]] = neuron.alloc
    %low = neuron.alloc : memref<128x1xi64, #mem<sbuf>>
    // CHECK: neuron.memset vector dst %[[LOW]][0:128, 0, [[1, 1]]] {value = -9223372036854775808 : i64} : memref<128x1xi64, #mem<sbuf>>
    neuron.memset vector dst %low[0:128, 0, [[1, 1]]] {value = -9223372036854775808 : i64} : memref<128x1xi64, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @iota_pattern
  func.func @iota_pattern() {
    // CHECK: %[[I:.*]] = neuron.alloc
    %i = neuron.alloc : memref<128x4x32xi32, #mem<sbuf>>
    // CHECK: neuron.iota gpsimd dst %[[I]][0:128, 0, [[32, 4], [1, 32]]] {base = 5 : i64, channel_multiplier = 128 : i64, pattern = array<i64: 32, 4, 1, 32>} : memref<128x4x32xi32, #mem<sbuf>>
    neuron.iota gpsimd dst %i[0:128, 0, [[32, 4], [1, 32]]] {base = 5 : i64, channel_multiplier = 128 : i64, pattern = array<i64: 32, 4, 1, 32>} : memref<128x4x32xi32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @iota_base_from_a_register
  func.func @iota_base_from_a_register(%off: index) {
    // CHECK: %[[I:.*]] = neuron.alloc
    %i = neuron.alloc : memref<128x32xi32, #mem<sbuf>>
    // CHECK: neuron.iota gpsimd dst %[[I]][0:128, 0, [[1, 32]]], base %off {pattern = array<i64: 1, 32>} : memref<128x32xi32, #mem<sbuf>>
    neuron.iota gpsimd dst %i[0:128, 0, [[1, 32]]], base %off {pattern = array<i64: 1, 32>} : memref<128x32xi32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @gpsimd_kernel_binary_and_column
  func.func @gpsimd_kernel_binary_and_column() {
    // CHECK: %[[A:.*]] = neuron.alloc
    %a = neuron.alloc : memref<64x37xi32, #mem<sbuf>>
    // CHECK: %[[K:.*]] = neuron.alloc
    %k = neuron.alloc : memref<64x1xi32, #mem<sbuf>>
    // CHECK: %[[Q:.*]] = neuron.alloc
    %q = neuron.alloc : memref<64x37xf32, #mem<sbuf>>
    // CHECK: neuron.gpsimd_kernel gpsimd dst %[[Q]][0:64, 0, [[1, 37]]], in0 %[[A]][0:64, 0, [[1, 37]]], in1 %[[A]][0:64, 0, [[1, 37]]] {kernel = "divide_floor"} : memref<64x37xf32, #mem<sbuf>>, memref<64x37xi32, #mem<sbuf>>, memref<64x37xi32, #mem<sbuf>>
    neuron.gpsimd_kernel gpsimd dst %q[0:64, 0, [[1, 37]]], in0 %a[0:64, 0, [[1, 37]]], in1 %a[0:64, 0, [[1, 37]]] {kernel = "divide_floor"} : memref<64x37xf32, #mem<sbuf>>, memref<64x37xi32, #mem<sbuf>>, memref<64x37xi32, #mem<sbuf>>
    // CHECK: neuron.gpsimd_kernel gpsimd dst %[[Q]][0:64, 0, [[1, 37]]], in0 %[[A]][0:64, 0, [[1, 37]]], in1 %[[K]][0:64, 0, [[1, 1]]] {kernel = "uniform"}
    neuron.gpsimd_kernel gpsimd dst %q[0:64, 0, [[1, 37]]], in0 %a[0:64, 0, [[1, 37]]], in1 %k[0:64, 0, [[1, 1]]] {kernel = "uniform"} : memref<64x37xf32, #mem<sbuf>>, memref<64x37xi32, #mem<sbuf>>, memref<64x1xi32, #mem<sbuf>>
    func.return
  }

  // CHECK-LABEL: func.func @affine_select_identity
  func.func @affine_select_identity() {
    // CHECK: %[[EYE:.*]] = neuron.alloc
    %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    // CHECK: %[[ONES:.*]] = neuron.alloc
    %ones = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    // CHECK: neuron.affine_select gpsimd dst %[[EYE]][0:128, 0, [[1, 128]]], on_true %[[ONES]][0:128, 0, [[1, 128]]] {cmp = "is_equal", channel_multiplier = 1 : i64, pattern = array<i64: -1, 128>, on_false_value = 0.000000e+00 : f64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    neuron.affine_select gpsimd dst %eye[0:128, 0, [[1, 128]]], on_true %ones[0:128, 0, [[1, 128]]] {cmp = "is_equal", channel_multiplier = 1 : i64, pattern = array<i64: -1, 128>, on_false_value = 0.0 : f64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    func.return
  }

  // ---- DMA ----------------------------------------------------------------------------------------------------

  // CHECK-LABEL: func.func @dma_copy_dynamic_offsets
  // CHECK-SAME: (%[[X:[^:]+]]: memref<37x300xf32, #mem<hbm>>{{.*}}, %[[Y:[^:]+]]: memref<37x300xbf16, #mem<hbm>>{{.*}}, %[[OFF:[^:]+]]: index
  func.func @dma_copy_dynamic_offsets(%x: memref<37x300xf32, #mem<hbm>>, %y: memref<37x300xbf16, #mem<hbm>>, %off: index) {
    // CHECK: %[[T:.*]] = neuron.alloc
    %t = neuron.alloc : memref<128x37xf32, #mem<sbuf>>
    // HBM -> SBUF through a transposing pattern, at a dynamic + static offset.
    // CHECK: neuron.dma_copy dma dst %[[T]][0:128, 0, [[1, 37]]], src %[[X]][%[[OFF]] + 128, [[1, 128], [300, 37]]] {queue = 3 : i64, id = 0 : i64} : memref<128x37xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 37]]], src %x[%off + 128, [[1, 128], [300, 37]]] {queue = 3 : i64, id = 0 : i64} : memref<128x37xf32, #mem<sbuf>>, memref<37x300xf32, #mem<hbm>>
    // SBUF (dynamic offset, a start partition compute engines may not use) -> HBM, converting to bf16.
    // CHECK: neuron.dma_copy dma dst %[[Y]][%[[OFF]] + 0, [[1, 37]]], src %[[T]][5:6, %[[OFF]] + 0, [[1, 37]]] {queue = 15 : i64, id = 1 : i64, waits = array<i64: 0>} : memref<37x300xbf16, #mem<hbm>>, memref<128x37xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %y[%off + 0, [[1, 37]]], src %t[5:6, %off + 0, [[1, 37]]] {queue = 15 : i64, id = 1 : i64, waits = array<i64: 0>} : memref<37x300xbf16, #mem<hbm>>, memref<128x37xf32, #mem<sbuf>>
    func.return
  }

  // Indirect DMA: a gather of 128 rows chosen by per-partition offsets, and an accumulating scatter back.
  // CHECK-LABEL: func.func @dma_copy_indirect
  func.func @dma_copy_indirect(%table: memref<1000x64xf32, #mem<hbm>>) {
    %o = neuron.alloc : memref<128x1xi32, #mem<sbuf>>
    %t = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    // CHECK: neuron.dma_copy dma dst %{{.*}}[0:128, 0, [[1, 64]]], src %{{.*}}[0, [[64, 1000], [1, 64]]], offsets %{{.*}}[0:128, 0, [[1, 1]]] {queue = 2 : i64, indirect = "src"}
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 64]]], src %table[0, [[64, 1000], [1, 64]]], offsets %o[0:128, 0, [[1, 1]]] {queue = 2 : i64, indirect = "src"} : memref<128x64xf32, #mem<sbuf>>, memref<1000x64xf32, #mem<hbm>>, memref<128x1xi32, #mem<sbuf>>
    // CHECK: neuron.dma_copy dma dst %{{.*}}[0, [[64, 1000], [1, 64]]], src %{{.*}}[0:128, 0, [[1, 64]]], offsets %{{.*}}[0:128, 0, [[1, 1]]] {queue = 3 : i64, indirect = "dst", accumulate = true}
    neuron.dma_copy dma dst %table[0, [[64, 1000], [1, 64]]], src %t[0:128, 0, [[1, 64]]], offsets %o[0:128, 0, [[1, 1]]] {queue = 3 : i64, indirect = "dst", accumulate = true} : memref<1000x64xf32, #mem<hbm>>, memref<128x64xf32, #mem<sbuf>>, memref<128x1xi32, #mem<sbuf>>
    func.return
  }

  // DMA transposes: a [512, 64] head from HBM into [64, 512], and a [128, 64] SBUF block into [64, 128].
  // CHECK-LABEL: func.func @dma_transpose
  func.func @dma_transpose(%k: memref<512x64xbf16, #mem<hbm>>) {
    %kt = neuron.alloc : memref<64x512xbf16, #mem<sbuf>>
    %rows = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    // CHECK: neuron.dma_transpose dma dst %{{.*}}[0:64, 0, [[1, 512]]], src %{{.*}}[0, [[64, 512], [1, 64]]] {queue = 0 : i64}
    neuron.dma_transpose dma dst %kt[0:64, 0, [[1, 512]]], src %k[0, [[64, 512], [1, 64]]] {queue = 0 : i64} : memref<64x512xbf16, #mem<sbuf>>, memref<512x64xbf16, #mem<hbm>>
    // CHECK: neuron.dma_transpose dma dst %{{.*}}[0:64, 128, [[1, 128]]], src %{{.*}}[0:128, 0, [[1, 64]]] {queue = 1 : i64}
    neuron.dma_transpose dma dst %kt[0:64, 128, [[1, 128]]], src %rows[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<64x512xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
    func.return
  }

  // Collectives on the collective queue: HBM tensors, replica groups, the reduction.
  // CHECK-LABEL: func.func @collectives
  func.func @collectives(%x: memref<8x4xf32, #mem<hbm>>, %y: memref<32xf32, #mem<hbm>>) {
    %r = neuron.alloc : memref<8x4xf32, #mem<hbm>>
    // CHECK: neuron.all_reduce collective dst %{{.*}}[0, [[4, 8], [1, 4]]], src %{{.*}}[0, [[4, 8], [1, 4]]] {replica_groups = [array<i64: 0, 1>, array<i64: 2, 3>], reduce = "avg", id = 0 : i64} : memref<8x4xf32, #mem<hbm>>, memref<8x4xf32, #mem<hbm>>
    neuron.all_reduce collective dst %r[0, [[4, 8], [1, 4]]], src %x[0, [[4, 8], [1, 4]]] {replica_groups = [array<i64: 0, 1>, array<i64: 2, 3>], reduce = "avg", id = 0 : i64} : memref<8x4xf32, #mem<hbm>>, memref<8x4xf32, #mem<hbm>>
    // CHECK: neuron.all_gather collective dst %{{.*}}[0, [[1, 32]]], src %{{.*}}[0, [[4, 2], [1, 4]]] {replica_groups = [array<i64: 0, 1, 2, 3>]}
    neuron.all_gather collective dst %y[0, [[1, 32]]], src %r[0, [[4, 2], [1, 4]]] {replica_groups = [array<i64: 0, 1, 2, 3>]} : memref<32xf32, #mem<hbm>>, memref<8x4xf32, #mem<hbm>>
    // CHECK: neuron.reduce_scatter collective dst %{{.*}}[0, [[1, 8]]], src %{{.*}}[0, [[1, 32]]] {replica_groups = [array<i64: 0, 1, 2, 3>], reduce = "max"}
    neuron.reduce_scatter collective dst %x[0, [[1, 8]]], src %y[0, [[1, 32]]] {replica_groups = [array<i64: 0, 1, 2, 3>], reduce = "max"} : memref<8x4xf32, #mem<hbm>>, memref<32xf32, #mem<hbm>>
    // CHECK: neuron.all_to_all collective dst %{{.*}}[0, [[1, 32]]], src %{{.*}}[0, [[1, 32]]] {replica_groups = [array<i64: 0, 1, 2, 3>]}
    neuron.all_to_all collective dst %y[0, [[1, 32]]], src %y[0, [[1, 32]]] {replica_groups = [array<i64: 0, 1, 2, 3>]} : memref<32xf32, #mem<hbm>>, memref<32xf32, #mem<hbm>>
    func.return
  }

  // CHECK-LABEL: func.func @generic_form_prints_custom
  func.func @generic_form_prints_custom() {
    // CHECK: %[[A:.*]] = neuron.alloc
    %a = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    // CHECK: neuron.tensor_copy scalar dst %[[A]][64:128, 0, [[1, 64]]], src %[[A]][0:64, 0, [[1, 64]]] {id = 7 : i64} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
    "neuron.tensor_copy"(%a, %a) <{engine = #neuron.engine<scalar>, id = 7 : i64, dst_ap = #neuron.ap<64:128, 0, [[1, 64]]>, src_ap = #neuron.ap<0:64, 0, [[1, 64]]>, operandSegmentSizes = array<i32: 1, 0, 1, 0>}> : (memref<128x64xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>) -> ()
    func.return
  }
}

// -----

// The target sets the limits: trn3 has 256 KiB of SBUF per partition (trn2: 224 KiB).

// CHECK: builtin.module attributes {neuron.target = #neuron.target<trn3>}
builtin.module attributes {neuron.target = #neuron.target<trn3>} {
  // CHECK-LABEL: func.func @alloc_trn3_sbuf_capacity
  func.func @alloc_trn3_sbuf_capacity() {
    // CHECK: %[[BIG:.*]] = neuron.alloc {address = 0 : i64} : memref<128x61440xf32, #mem<sbuf>>
    %big = neuron.alloc {address = 0 : i64} : memref<128x61440xf32, #mem<sbuf>>
    func.return
  }

  // trn3's TensorE may write bf16 to PSUM (trn1/trn2: fp32 only).
  // CHECK-LABEL: func.func @matmul_bf16_psum_trn3
  func.func @matmul_bf16_psum_trn3() {
    %p = neuron.alloc : memref<37x512xbf16, #mem<psum>>
    %s = neuron.alloc : memref<128x37xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    // CHECK: neuron.nc_matmul tensor dst %{{.*}}[0:37, 0, [[1, 512]]], {{.*}} : memref<37x512xbf16, #mem<psum>>
    neuron.nc_matmul tensor dst %p[0:37, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 37]]], moving %m[0:128, 0, [[1, 512]]] : memref<37x512xbf16, #mem<psum>>, memref<128x37xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    func.return
  }
}

// -----

// Without a neuron.target the module is compiled for trn2.

// CHECK-LABEL: func.func @alloc_default_target
func.func @alloc_default_target() {
  // CHECK: %[[A:.*]] = neuron.alloc : memref<128x57344xf32, #mem<sbuf>>
  %a = neuron.alloc : memref<128x57344xf32, #mem<sbuf>>
  func.return
}
