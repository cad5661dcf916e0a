// A malformed op is a diagnostic with the file position and exit code 1, never a Python traceback.
// RUN: not neuron-opt %s 2>&1 | filecheck %s
// CHECK: parse-error.mlir:7:23
// CHECK-NEXT: %b = arith.addi %a, : i32
// CHECK: operand expected
// CHECK-NOT: Traceback
  %b = arith.addi %a, : i32
