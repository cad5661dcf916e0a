// What --check-semantics cannot run is a diagnostic at the op (or the function) it concerns, never a traceback:
// the input is reported at the ops as they were written (inputs found by the fuzzer, minimised).
// RUN: neuron-opt %s --split-input-file --verify-diagnostics -p torch-canonicalize --check-semantics | filecheck %s

// ATen checks what the verifier does not: its refusal is the op's.
func.func @main(%x: tensor<16x128xf32>, %g: tensor<128xf32>, %b: tensor<128xf32>) -> tensor<16x128xf32> {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %g, %b {normalized_shape = array<i64: 127>, eps = 1.000000e-05 : f64} : (tensor<16x128xf32>, tensor<128xf32>, tensor<128xf32>) -> (tensor<16x128xf32>, tensor<16x1xf32>, tensor<16x1xf32>)
  func.return %0 : tensor<16x128xf32>
}
// CHECK: check-semantics-errors.mlir:7:3: error: check-semantics: the input: torch.aten.native_layer_norm: ATen refuses its operands: Expected weight to be of same shape as normalized_shape
// CHECK-NEXT: {{^}}  %0, %1, %2 = torch.aten.native_layer_norm

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.aten._to_sparse %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: check-semantics-errors.mlir:16:3: error: check-semantics: the input: torch.aten._to_sparse: ATen returned a torch.sparse_coo tensor, the IR's are dense

// -----

// The function run is @main, or the only one.
func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
// CHECK: check-semantics-errors.mlir:24:1: error: check-semantics: no function to run: name one @main (or write only one)
// CHECK-NEXT: {{^}}func.func @first

// -----

func.func @only(%i: tensor<4xindex>) -> tensor<4xindex> {
  func.return %i : tensor<4xindex>
}
// CHECK: check-semantics-errors.mlir:35:1: error: check-semantics: the input: @only argument 0: element type index has no NeuronCore storage type
// CHECK-NEXT: {{^}}func.func @only

// -----

// A type may ask for terabytes: the random inputs are bounded.
func.func @main(%x: tensor<300x2147483648xf32>) -> tensor<300x2147483648xf32> {
  func.return %x : tensor<300x2147483648xf32>
}
// CHECK: check-semantics-errors.mlir:44:1: error: check-semantics: the input: @main arguments 0-0 alone take 4800.0 GiB of random values, more than the 2.0 GiB allowed

// -----

// A collective over more ranks than a lone run has (the program needs the other ranks' transport).
func.func @main() {
  %x = neuron.alloc : memref<8xf32, #mem<hbm>>
  %y = neuron.alloc : memref<8xf32, #mem<hbm>>
  neuron.all_reduce collective dst %y[0, [[1, 8]]], src %x[0, [[1, 8]]] {replica_groups = [array<i64: 0, 1>]} : memref<8xf32, #mem<hbm>>, memref<8xf32, #mem<hbm>>
  func.return
}
// CHECK: check-semantics-errors.mlir:52:1: error: check-semantics: the input: the program it denotes cannot run: all_reduce: the replica group [0, 1] has 2 ranks but no transport is injected

// -----

// A loop of more iterations than the interpreter runs is refused before it starts (a fuzz case ran for hours).
func.func @main() {
  %c0 = arith.constant -2147483648 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = scf.for %i = %c0 to %c4 step %c1 iter_args(%count = %c0) -> (index) {
    %next = arith.addi %count, %c1 : index
    scf.yield %next : index
  }
  func.return
}
// CHECK: check-semantics-errors.mlir:67:3: error: check-semantics: the input: scf.for: 2147483652 iterations (-2147483648 to 4 step 1) take the run beyond the 1000000 loop iterations the interpreter runs
