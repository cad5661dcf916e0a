// A verifier failure is reported MLIR's way: `file:line:col: error: <message>`, then the offending op alone (its
// line and a caret), never the whole module in generic form, and exit code 1. --verify-diagnostics prints the
// same to stdout for every chunk of --split-input-file, each at its line in this file.
// RUN: not neuron-opt %s --split-input-file 2>&1 | filecheck %s
// RUN: neuron-opt %s --split-input-file --verify-diagnostics | filecheck %s --check-prefix=DIAG

func.func @main(%x: tensor<4x3xf32>) -> tensor<3x4xf32> {
  %a = torch.aten.relu %x : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %b = torch.aten.permute %a {dims = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x5xf32>
  %c = torch.aten.relu %b : (tensor<3x5xf32>) -> tensor<3x5xf32>
  func.return %c : tensor<3x5xf32>
}
// CHECK: verify-error.mlir:9:3: error: torch.aten.permute: result shape (3, 5) is not (3, 4), the shape its arguments give for operand shape (4, 3)
// CHECK-NEXT: {{^}}  %b = torch.aten.permute %a {dims = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x5xf32>{{$}}
// CHECK-NEXT: {{^}}  ^{{$}}
// CHECK-NOT: builtin.module
// CHECK-NOT: torch.aten.relu
// CHECK-NOT: Traceback
// DIAG: verify-error.mlir:9:3: error: torch.aten.permute: result shape (3, 5) is not (3, 4)
// DIAG-NEXT: {{^}}  %b = torch.aten.permute
// DIAG-NEXT: {{^}}  ^{{$}}
// DIAG-NOT: builtin.module

// -----

// An op with a source location names it too, after the rule; an op in a region is found where it is.
func.func @nested(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = scf.execute_region -> (tensor<4xf32>) {
    %y = torch.aten.neg %x : (tensor<4xf32>) -> tensor<2xf32> loc("model.head"("model.py":7:3))
    scf.yield %x : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
// DIAG: verify-error.mlir:29:5: error: torch.aten.neg: result shape (2,) is not the operand shape (4,) (at model.py:7 (model.head))
// DIAG-NEXT: {{^}}    %y = torch.aten.neg
// DIAG-NEXT: {{^}}    ^{{$}}

// -----

// Constraints of the op definitions (xDSL's own messages, which do not name the op) are prefixed with its name.
func.func @constraint(%x: tensor<4x3xf32>) -> i64 {
  %0 = torch.aten.sym_size.int %x {dim = 0 : i64} : (tensor<4x3xf32>) -> i64
  func.return %0 : i64
}
// DIAG: verify-error.mlir:42:3: error: torch.aten.sym_size.int: result 'result' at position 0 does not verify:
// DIAG-NEXT: i64 should be of base attribute index

// -----

// A region's structure (an empty body where a terminator must be) is reported at the op holding it.
func.func @empty_body(%x: tensor<4xf32>) -> tensor<4xf32> {
}
// DIAG: verify-error.mlir:51:1: error: func.func: Operation func.func contains empty block in single-block region that expects at least a terminator
