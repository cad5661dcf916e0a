// A pass that refuses its input reports the op's position in this file, the op, the rule and the source line,
// and exits with 1.
// RUN: not neuron-opt %s -p convert-torch-to-tile 2>&1 | filecheck %s
// RUN: not neuron-opt %s -p neuron-pipeline 2>&1 | filecheck %s
// CHECK: pass-error.mlir:10:3: error: torch.aten.special_airy_ai: no lowering to the tile dialect yet (at model.py:7 (model.head))
// CHECK-NEXT: {{^}}  %y = torch.aten.special_airy_ai %x
// CHECK-NEXT: {{^}}  ^{{$}}
// CHECK-NOT: Traceback
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = torch.aten.special_airy_ai %x : (tensor<4xf32>) -> tensor<4xf32> loc("model.head"("model.py":7:3))
  func.return %y : tensor<4xf32>
}
