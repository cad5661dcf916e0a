// An op's custom syntax checks what it builds from (the number of results, the roles an instruction needs), and
// a value may only be used where its definition reaches: each a parse error at its position, never a traceback
// (inputs found by `python -m neuron_mlir.tools.fuzz_neuron_opt`, minimised).
// RUN: neuron-opt %s --split-input-file --parsing-diagnostics --verify-diagnostics | filecheck %s
// RUN: not neuron-opt %s -p neuron-pipeline 2>&1 | filecheck %s --check-prefix=EXIT

func.func @fewer_result_types_than_results(%x: tensor<130x200xf32>) -> tensor<130x200xf32> {
  %0 = torch.aten._linalg_svd %x {full_matrices = true, compute_uv = true} : (tensor<130x200xf32>) -> tensor<130x200xf32>
  func.return %0 : tensor<130x200xf32>
}
// CHECK: parse-error-builders.mlir:8:{{[0-9]+}}
// CHECK: torch.aten._linalg_svd has 3 results but 1 result types

// -----

func.func @instruction_without_a_required_role() {
  %a = neuron.alloc : memref<128x2xf32, #mem<sbuf>>
  neuron.gpsimd_kernel gpsimd dst %a[0:128, 0, [[1, 2]]] {kernel = "divide"} : memref<128x2xf32, #mem<sbuf>>
  func.return
}
// CHECK: parse-error-builders.mlir:18:{{[0-9]+}}
// CHECK: neuron.gpsimd_kernel needs operand role(s) in0 (roles: dst, in0, in1)

// -----

// A value used before the op that defines it: xDSL's parser accepts it, and its verifier checks no dominance.
func.func @initial_value_defined_after_the_loop(%m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (index) {
    scf.yield %acc : index
  }
  %init = arith.constant 0 : index
  func.return
}
// CHECK: parse-error-builders.mlir:31:3: error: scf.for: operand 3 is used where its definition does not reach

// -----

// A value of a loop's body used after the loop: the parser's own error.
func.func @value_of_a_loop_body_used_outside(%m: memref<4xf32>) -> index {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %inner = arith.addi %i, %c1 : index
    scf.yield
  }
  func.return %inner : index
}
// CHECK: values used but not defined: [%inner]
// EXIT: parse-error-builders.mlir:8:{{[0-9]+}}
// EXIT-NOT: Traceback
