// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Branches of the elementwise lowerings (lowering/convert_torch_to_tile/elementwise.py, activations.py): integer
// versus float computation, special cases of pow, exact rounding, dtype-rounded scalars, NaN-aware fmax, the tan
// reduction, and empty results. Numbers are checked end to end in test/e2e/test_elementwise.py.

func.func @integer_arithmetic_is_exact(%a: tensor<4x8xi32>, %b: tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>) {
  %add = torch.aten.add.Tensor %a, %b {alpha = 3 : i64} : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  %div = torch.aten.div.Tensor_mode %a, %b {rounding_mode = "floor"} : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  %rem = torch.aten.remainder.Scalar %a {other = 3 : i64} : (tensor<4x8xi32>) -> tensor<4x8xi32>
  func.return %add, %div, %rem : tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>
}
// Integer results from integer operands stay integer tiles (GpSimdE computes them exactly; no fp32 detour),
// floor division is a GpSimd kernel, and a scalar divisor is a [P, 1] column of the integer type.
// CHECK-LABEL: func.func @integer_arithmetic_is_exact
// CHECK:       tile.load
// CHECK-NEXT:  %[[B:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xi32, sbuf>
// CHECK:       %[[SCALED:.*]] = tile.binary_scalar %[[B]] {op = "multiply", scalar = 3 : i64} : (!tile.tile<32x1xi32, sbuf>) -> !tile.tile<32x1xi32, sbuf>
// CHECK:       tile.binary %{{.*}}, %[[SCALED]] {op = "add"} : (!tile.tile<32x1xi32, sbuf>, !tile.tile<32x1xi32, sbuf>) -> !tile.tile<32x1xi32, sbuf>
// CHECK:       tile.kernel %{{.*}}, %{{.*}} {kernel = "divide_floor"} : (!tile.tile<32x1xi32, sbuf>, !tile.tile<32x1xi32, sbuf>) -> !tile.tile<32x1xi32, sbuf>
// CHECK:       %[[THREE:.*]] = tile.fill {value = 3 : i64} : !tile.tile<32x1xi32, sbuf>
// CHECK:       tile.kernel %{{.*}}, %[[THREE]] {kernel = "remainder"}

// -----

func.func @pow_special_exponents(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %p2 = torch.aten.pow.Tensor_Scalar %x {exponent = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %p27 = torch.aten.pow.Tensor_Scalar %x {exponent = 2.700000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %exp2 = torch.aten.pow.Scalar %x {self = 2.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %p2, %p27, %exp2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
// pow with exponent 2 is ScalarE's square; a general exponent is the ALU's power; a positive scalar base
// b^x is exp(x * ln b) with the free scale.
// CHECK-LABEL: func.func @pow_special_exponents
// CHECK:       tile.unary %{{.*}} {fn = "square"}
// CHECK:       tile.binary_scalar %{{.*}} {op = "power", scalar = 2.700000e+00 : f64}
// CHECK:       tile.unary %{{.*}} {fn = "exp", scale = 0.69314718055994529 : f64}

// -----

func.func @rounding(%x: tensor<4x8xf32>, %i: tensor<4x8xi32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi32>) {
  %r = torch.aten.round %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %f = torch.aten.floor %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %fi = torch.aten.floor %i : (tensor<4x8xi32>) -> tensor<4x8xi32>
  func.return %r, %f, %fi : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi32>
}
// Round half to even adds and removes 2^23 (0x4160...) with x's sign, and keeps x where |x| >= 2^23;
// floor subtracts 1 where that rounded up; integers round to themselves.
// CHECK-LABEL: func.func @rounding
// CHECK:       %[[X:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK:       %[[NEG:.*]] = tile.binary_scalar %[[X]] {op = "is_lt", scalar = 0.000000e+00 : f64}
// CHECK:       %[[M2:.*]] = tile.binary_scalar %[[NEG]] {op = "multiply", scalar = 0xC170000000000000 : f64}
// CHECK:       %[[MAGIC:.*]] = tile.binary_scalar %[[M2]] {op = "add", scalar = 0x4160000000000000 : f64}
// CHECK:       %[[UP:.*]] = tile.binary %[[X]], %[[MAGIC]] {op = "add"}
// CHECK:       %[[R:.*]] = tile.binary %[[UP]], %[[MAGIC]] {op = "subtract"}
// CHECK:       %[[ABS:.*]] = tile.unary %[[X]] {fn = "abs"}
// CHECK:       %[[SMALL:.*]] = tile.binary_scalar %[[ABS]] {op = "is_lt", scalar = 0x4160000000000000 : f64}
// CHECK:       tile.select %[[SMALL]], %[[R]], %[[X]]
// CHECK:       %[[RF:.*]] = tile.select
// CHECK:       %[[OVER:.*]] = tile.binary %[[RF]], %{{.*}} {op = "is_gt"}
// CHECK:       tile.binary %[[RF]], %[[OVER]] {op = "subtract"}
// CHECK:       tile.copy %{{.*}} : (!tile.tile<32x1xi32, sbuf>) -> !tile.tile<32x1xi32, sbuf>

// -----

func.func @scalars_round_to_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xi1> {
  %lt = torch.aten.lt.Scalar %x {other = 3.000000e-01 : f64} : (tensor<4x8xbf16>) -> tensor<4x8xi1>
  func.return %lt : tensor<4x8xi1>
}
// A bf16 tensor meets a Python scalar rounded to bf16, as PyTorch's type promotion does (0.3 -> 0.30078125).
// CHECK-LABEL: func.func @scalars_round_to_bf16
// CHECK:       tile.binary_scalar %{{.*}} {op = "is_lt", scalar = 0.30078125 : f64} : (!tile.tile<32x1xbf16, sbuf>) -> !tile.tile<32x1xi1, sbuf>

// -----

func.func @fmax_ignores_nan(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = torch.aten.fmax %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %m : tensor<4x8xf32>
}
// fmax: the maximum, then the other operand wherever one is NaN (x != x).
// CHECK-LABEL: func.func @fmax_ignores_nan
// CHECK:       %[[X:.*]] = tile.load
// CHECK:       %[[Y:.*]] = tile.load
// CHECK:       %[[M:.*]] = tile.binary %[[X]], %[[Y]] {op = "max"}
// CHECK:       %[[XNAN:.*]] = tile.binary %[[X]], %[[X]] {op = "not_equal"}
// CHECK:       %[[M2:.*]] = tile.select %[[XNAN]], %[[Y]], %[[M]]
// CHECK:       %[[YNAN:.*]] = tile.binary %[[Y]], %[[Y]] {op = "not_equal"}
// CHECK:       tile.select %[[YNAN]], %[[X]], %[[M2]]

// -----

func.func @tan_and_gelu(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %t = torch.aten.tan %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = torch.aten.gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %t, %g : tensor<4x8xf32>, tensor<4x8xf32>
}
// tan: quadrant n = round(x * 2/pi), a Cody-Waite remainder d in three steps, sin(d) and cos(d) = sin(pi/2 - |d|)
// swapped (and negated) for odd n by the parity from a GpSimd fmod; gelu's tanh approximation is one activation.
// CHECK-LABEL: func.func @tan_and_gelu
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 0.63661977236758138 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 1.5703125 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 0.00048375129699707031 : f64}
// CHECK:       tile.binary_scalar %{{.*}} {op = "multiply", scalar = 7.5497899548918824e-08 : f64}
// CHECK:       tile.unary %{{.*}} {fn = "sin"}
// CHECK:       tile.unary %{{.*}} {fn = "sin", scale = -1.000000e+00 : f64, bias_value = 1.5707963267948966 : f64}
// CHECK:       tile.kernel %{{.*}}, %{{.*}} {kernel = "fmod"}
// CHECK:       tile.unary %{{.*}} {fn = "reciprocal"}
// CHECK:       tile.unary %{{.*}} {fn = "gelu_apprx_tanh"}

// -----

func.func @gelu_tanh_backward(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %d = torch.aten.gelu_backward %g, %x {approximate = "tanh"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %d : tensor<4x8xf32>
}
// The tanh GELU's derivative through s = sigmoid(2u): s (1 + 6kc (1 - s) x (x^2 + 1/3c)), 1 - s a second sigmoid
// of the same product (scale -2kc); ten passes before the gradient's product, no tanh and no 1 - tanh^2.
// CHECK-LABEL: func.func @gelu_tanh_backward
// CHECK-NOT:   fn = "tanh"
// CHECK:       %[[G:.*]] = tile.load
// CHECK:       %[[X:.*]] = tile.load
// CHECK:       %[[X2:.*]] = tile.unary %[[X]] {fn = "square"}
// CHECK:       %[[A:.*]] = tile.binary_scalar %[[X2]] {op = "add", scalar = 22.363860002236386 : f64}
// CHECK:       %[[W:.*]] = tile.binary %[[X]], %[[A]] {op = "multiply"}
// CHECK:       %[[S:.*]] = tile.unary %[[W]] {fn = "sigmoid", scale = 0.071354816272600249 : f64}
// CHECK:       %[[SN:.*]] = tile.unary %[[W]] {fn = "sigmoid", scale = -0.071354816272600249 : f64}
// CHECK:       %[[B:.*]] = tile.binary_scalar %[[X2]] {op = "add", scalar = 7.4546200007454626 : f64}
// CHECK:       %[[SLOPE:.*]] = tile.binary %[[X]], %[[B]] {op = "multiply"}
// CHECK:       %[[P:.*]] = tile.binary %[[SN]], %[[SLOPE]] {op = "multiply"}
// CHECK:       %[[Q:.*]] = tile.binary_scalar %[[P]] {op = "multiply", scalar = 0.21406444881780073 : f64}
// CHECK:       %[[R:.*]] = tile.binary_scalar %[[Q]] {op = "add", scalar = 1.000000e+00 : f64}
// CHECK:       %[[D:.*]] = tile.binary %[[S]], %[[R]] {op = "multiply"}
// CHECK:       tile.binary %[[G]], %[[D]] {op = "multiply"}
// CHECK-NOT:   tile.unary

// -----

func.func @empty_result(%x: tensor<0x3xf32>) -> tensor<0x3xf32> {
  %e = torch.aten.exp %x : (tensor<0x3xf32>) -> tensor<0x3xf32>
  func.return %e : tensor<0x3xf32>
}
// A result without elements computes nothing: a zero-stride view of a one-element allocation.
// CHECK-LABEL: func.func @empty_result
// CHECK:       %[[ONE:.*]] = memref.alloc() : memref<1xf32, #mem<hbm>>
// CHECK-NEXT:  %[[E:.*]] = tile.view %[[ONE]] : memref<1xf32, #mem<hbm>> to memref<0x3xf32, strided<[0, 0]>, #mem<hbm>>
// CHECK-NEXT:  func.return %[[E]]

// -----

func.func @fp8_casts(%x: tensor<4x8xf32>) -> (tensor<4x8xf8E4M3FN>, tensor<4x8xf8E5M2>, tensor<4x8xf8E4M3FN>) {
  %e4 = torch.aten._to_copy %x {dtype = f8E4M3FN} : (tensor<4x8xf32>) -> tensor<4x8xf8E4M3FN>
  %e5 = torch.aten._to_copy %x {dtype = f8E5M2} : (tensor<4x8xf32>) -> tensor<4x8xf8E5M2>
  %c = torch.aten.clamp %x {min = -4.480000e+02 : f64, max = 4.480000e+02 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e4c = torch.aten._to_copy %c {dtype = f8E4M3FN} : (tensor<4x8xf32>) -> tensor<4x8xf8E4M3FN>
  func.return %e4, %e5, %e4c : tensor<4x8xf8E4M3FN>, tensor<4x8xf8E5M2>, tensor<4x8xf8E4M3FN>
}
// PyTorch's cast to float8_e4m3fn saturates: a clamp to +-448 in fp32, then the conversion on the last op's output;
// to float8_e5m2 a plain conversion (overflow is infinity); an operand already clamped into range is converted
// without a second clamp.
// CHECK-LABEL: func.func @fp8_casts
// CHECK:       %[[X:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK-NEXT:  %[[LOW:.*]] = tile.binary_scalar %[[X]] {op = "max", scalar = -4.480000e+02 : f64} : (!tile.tile<32x1xf32, sbuf>) -> !tile.tile<32x1xf32, sbuf>
// CHECK-NEXT:  tile.binary_scalar %[[LOW]] {op = "min", scalar = 4.480000e+02 : f64} : (!tile.tile<32x1xf32, sbuf>) -> !tile.tile<32x1xf8E4M3FN, sbuf>
// CHECK:       tile.copy %{{.*}} : (!tile.tile<32x1xf32, sbuf>) -> !tile.tile<32x1xf8E5M2, sbuf>
// CHECK:       tile.binary_scalar %{{.*}} {op = "min", scalar = 4.480000e+02 : f64} : (!tile.tile<32x1xf32, sbuf>) -> !tile.tile<32x1xf32, sbuf>
// CHECK:       %[[CLAMPED:.*]] = tile.load %{{.*}} -> !tile.tile<32x1xf32, sbuf>
// CHECK-NEXT:  tile.copy %[[CLAMPED]] : (!tile.tile<32x1xf32, sbuf>) -> !tile.tile<32x1xf8E4M3FN, sbuf>

// -----

// A 0-d operand (transformers' `where(mask, 0.0, -inf)`) is one value broadcast everywhere: loaded as one element
// per partition and spread along the free axis on chip, not by a DMA of one element per descriptor. (The nest
// would be two tiles of 2048 and nothing else, so it runs as four of 1024: SHORT_NEST_TILES.)
// CHECK-LABEL: func.func @zero_dimensional_operands
// CHECK:       %[[ZERO:.*]] = tile.view %zero : memref<f32, #mem<hbm>> to memref<128x4096xf32, strided<[0, 0]>, #mem<hbm>>
// CHECK:       %[[LOWEST:.*]] = tile.view %lowest
// CHECK:       %[[ZCOL:.*]] = tile.load %[[ZERO]][%c0, %c0] {{.*}} -> !tile.tile<128x1xf32, sbuf>
// CHECK:       %[[LCOL:.*]] = tile.load %[[LOWEST]][%c0, %c0] {{.*}} -> !tile.tile<128x1xf32, sbuf>
// CHECK:       scf.for
// CHECK-NEXT:    tile.load {{.*}} -> !tile.tile<128x1024xi1, sbuf>
// CHECK-NEXT:    tile.fill
// CHECK-NEXT:    tile.binary_scalar %{{.*}} column %[[ZCOL]] {op = "add"}
// CHECK-NEXT:    tile.fill
// CHECK-NEXT:    tile.binary_scalar %{{.*}} column %[[LCOL]] {op = "add"}
// CHECK-NEXT:    tile.select
// CHECK-NEXT:    tile.store
func.func @zero_dimensional_operands(%mask: tensor<2x512x512xi1>, %zero: tensor<f32>, %lowest: tensor<f32>) -> tensor<2x512x512xf32> {
  %where = torch.aten.where.self %mask, %zero, %lowest : (tensor<2x512x512xi1>, tensor<f32>, tensor<f32>) -> tensor<2x512x512xf32>
  func.return %where : tensor<2x512x512xf32>
}

// -----

// A boolean column broadcast along the free axis (a size bucket's mask of real keys, `where(real[s, None], k, 0)`)
// is spread on chip like a float one: one element per partition, then -0 + column (in integer mode for
// booleans and integers: exact), not a DMA of one element per descriptor.
// CHECK-LABEL: func.func @boolean_column
// CHECK:       %[[REAL:.*]] = tile.view %real : memref<1x1x512x1xi1, #mem<hbm>> to memref<8x512x64xi1, strided<[0, 1, 0]>, #mem<hbm>>
// CHECK:       scf.for
// CHECK:         %[[COLUMN:.*]] = tile.load %[[REAL]][{{.*}}] {{.*}} -> !tile.tile<128x1xi1, sbuf>
// CHECK:         %[[FILLED:.*]] = tile.fill {value = 0 : i64} : !tile.tile<128x64xi1, sbuf>
// CHECK-NEXT:    %[[SPREAD:.*]] = tile.binary_scalar %[[FILLED]] column %[[COLUMN]] {op = "add"} {{.*}} -> !tile.tile<128x64xi1, sbuf>
// CHECK:         tile.select %[[SPREAD]]
func.func @boolean_column(%keys: tensor<4x2x512x64xf32>, %real: tensor<1x1x512x1xi1>, %zero: tensor<f32>) -> tensor<4x2x512x64xf32> {
  %where = torch.aten.where.self %real, %keys, %zero : (tensor<1x1x512x1xi1>, tensor<4x2x512x64xf32>, tensor<f32>) -> tensor<4x2x512x64xf32>
  func.return %where : tensor<4x2x512x64xf32>
}

// -----

// A nest that would be two tiles and nothing else ([394, 768] merged and split as [128, 2364]: a tile of 2048 and
// one of 316) runs as four equal tiles instead, so that its loads, compute and stores overlap.
// CHECK-LABEL: func.func @short_nest_in_four_tiles
// CHECK:       tile.view %a : memref<394x768xbf16, #mem<hbm>> to memref<128x2364xbf16, #mem<hbm>>
// CHECK:       scf.for %{{.*}} = %c0 to %c2364 step %c591 {
// CHECK-NEXT:    tile.load {{.*}} -> !tile.tile<128x591xbf16, sbuf>
// CHECK-NEXT:    tile.load {{.*}} -> !tile.tile<128x591xbf16, sbuf>
// CHECK-NEXT:    tile.binary {{.*}} {op = "add"}
// CHECK-NEXT:    tile.store
func.func @short_nest_in_four_tiles(%a: tensor<394x768xbf16>, %b: tensor<394x768xbf16>) -> tensor<394x768xbf16> {
  %sum = torch.aten.add.Tensor %a, %b : (tensor<394x768xbf16>, tensor<394x768xbf16>) -> tensor<394x768xbf16>
  func.return %sum : tensor<394x768xbf16>
}

// -----

// One tile, or more than two, keep tiles of 2048.
// CHECK-LABEL: func.func @one_or_many_tiles_keep_their_width
// CHECK:       tile.load {{.*}} -> !tile.tile<128x1536xbf16, sbuf>
// CHECK:       scf.for %{{.*}} = %c0 to %c6144 step %c2048 {
// CHECK-NEXT:    tile.load {{.*}} -> !tile.tile<128x2048xbf16, sbuf>
func.func @one_or_many_tiles_keep_their_width(%a: tensor<256x768xbf16>, %b: tensor<1024x768xbf16>) -> (tensor<256x768xbf16>, tensor<1024x768xbf16>) {
  %0 = torch.aten.neg %a : (tensor<256x768xbf16>) -> tensor<256x768xbf16>
  %1 = torch.aten.neg %b : (tensor<1024x768xbf16>) -> tensor<1024x768xbf16>
  func.return %0, %1 : tensor<256x768xbf16>, tensor<1024x768xbf16>
}
