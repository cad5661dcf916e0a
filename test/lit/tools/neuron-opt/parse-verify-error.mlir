// Attributes, types and ops that xDSL verifies while parsing them are reported at their position in the file,
// named, as every verifier failure is: never a message that says nowhere where (inputs found by
// `python -m neuron_mlir.tools.fuzz_neuron_opt`, minimised).
// RUN: neuron-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not neuron-opt %s -p neuron-pipeline 2>&1 | filecheck %s --check-prefix=EXIT

func.func @tile_of_rank_one(%t: !tile.tile<128xf32, sbuf>) {
  func.return
}
// CHECK: parse-verify-error.mlir:7:33: error: !tile.tile: a tile has a partition axis and at least one free axis, got shape (128,)
// CHECK-NEXT: {{^}}func.func @tile_of_rank_one(%t: !tile.tile<128xf32, sbuf>) {{{$}}
// CHECK-NEXT: {{^}}                                ^{{$}}
// EXIT: parse-verify-error.mlir:7:33: error: !tile.tile: a tile has a partition axis
// EXIT-NOT: Traceback

// -----

func.func @kernel_name_of_the_wrong_kind(%a: !tile.tile<4x8xf32, sbuf>) {
  %q = tile.kernel %a, %a {kernel = false} : (!tile.tile<4x8xf32, sbuf>, !tile.tile<4x8xf32, sbuf>) -> !tile.tile<4x8xf32, sbuf>
  func.return
}
// CHECK: parse-verify-error.mlir:19:3: error: tile.kernel: false should be of base attribute string
// CHECK-NEXT: {{^}}  %q = tile.kernel

// -----

func.func @integer_attribute_out_of_range(%g: tensor<f32>, %y: tensor<8x3xf32>, %t: tensor<8xi64>) -> tensor<8x3xf32> {
  %0 = torch.aten.nll_loss_backward %g, %y, %t, none, %g {reduction = 2 : i1, ignore_index = -100 : i64} : (tensor<f32>, tensor<8x3xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x3xf32>
  func.return %0 : tensor<8x3xf32>
}
// CHECK: parse-verify-error.mlir:28:3: error: torch.aten.nll_loss_backward: Integer value 2 is out of range for type i1

// -----

func.func @loop_body_without_yield(%m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c4 step %c1 {
    func.return
  }
  func.return
}
// CHECK: parse-verify-error.mlir:39:3: error: scf.for: 'scf.for' terminates with operation func.return instead of scf.yield

