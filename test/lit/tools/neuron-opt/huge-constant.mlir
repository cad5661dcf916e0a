// A dense constant too large to hold in memory (2^40 elements: xDSL expands a splat element by element) is an error
// at the op, in MLIR's form, with exit code 1; never a MemoryError traceback.
// RUN: not neuron-opt %s 2>&1 | filecheck %s

func.func @huge() {
  %c = arith.constant dense<1.0> : tensor<1099511627776xf32>
  func.return
}
// CHECK: huge-constant.mlir:6:3: error: arith.constant: its attributes hold more elements than this process can allocate
// CHECK-NOT: Traceback
// CHECK-NOT: MemoryError
