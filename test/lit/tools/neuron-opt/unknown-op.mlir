// A misspelled op name is an error at the name, in MLIR's form (`file:line:col: error:`, the line, a caret), naming
// the closest ops of its dialect (or the closest dialects), with exit code 1; never xDSL's "is not registered"
// pointing past the name.
// RUN: not neuron-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=FIRST
// RUN: neuron-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @misspelled(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = torch.aten.cumsun %x {dim = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// FIRST: unknown-op.mlir:8:8: error: unknown op 'torch.aten.cumsun' (closest known: torch.aten.cumsum,
// FIRST-NEXT: {{^}}  %r = torch.aten.cumsun %x
// FIRST-NEXT: {{^}}       ^{{$}}
// FIRST-NOT: is not registered
// FIRST-NOT: Traceback
// CHECK: unknown-op.mlir:8:8: error: unknown op 'torch.aten.cumsun' (closest known: torch.aten.cumsum,

// -----

// Without a dialect, the name is looked up in the enclosing ops' dialects.
func.func @short(%x: tensor<4xf32>) -> tensor<4xf32> {
  retrun %x : tensor<4xf32>
}
// CHECK: unknown-op.mlir:22:3: error: unknown op 'retrun' (closest known: return)
// CHECK-NEXT: {{^}}  retrun %x
// CHECK-NEXT: {{^}}  ^{{$}}

// -----

// In the generic form the caret is on the quoted name; a dialect that does not exist is named as such.
func.func @generic() {
  %a = "troch.aten.relu"() : () -> tensor<4xf32>
  func.return
}
// CHECK: unknown-op.mlir:32:9: error: unknown op 'troch.aten.relu'; no dialect 'troch' (closest known: torch)
// CHECK-NOT: Traceback
