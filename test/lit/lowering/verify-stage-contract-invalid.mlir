// RUN: neuron-opt %s --split-input-file -p 'verify-stage-contract{stage=tile}' --verify-diagnostics | filecheck %s --check-prefix=CHECK-TILE
// RUN: neuron-opt %s --split-input-file -p 'verify-stage-contract{stage=neuron}' --verify-diagnostics | filecheck %s --check-prefix=CHECK-NEURON
// RUN: neuron-opt %s --split-input-file -p 'verify-stage-contract{stage=allocated}' --verify-diagnostics | filecheck %s --check-prefix=CHECK-ALLOCATED
// RUN: neuron-opt %s --split-input-file -p 'verify-stage-contract{stage=synchronised}' --verify-diagnostics | filecheck %s --check-prefix=CHECK-SYNCHRONISED
// RUN: neuron-opt %s --split-input-file -p 'verify-stage-contract{stage=isa}' --verify-diagnostics | filecheck %s --check-prefix=CHECK-UNKNOWN

// Each stage's contract (lowering/verify_stage_contract.py) includes the earlier stages' contracts: every case
// is checked at the stage that first rejects it, at every later stage, and shown to pass the earlier ones.

// CHECK-UNKNOWN: unknown stage 'isa' (stages: tile, neuron, allocated, synchronised)

func.func @torch_op_remains(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.aten.relu %x : (tensor<4xf32>) -> tensor<4xf32> loc("model.l1"("model.py":12:0))
  func.return %0 : tensor<4xf32>
}
// CHECK-TILE: torch.aten.relu: torch op remains after the 'tile' stage (at model.py:12 (model.l1))
// CHECK-NEURON: torch.aten.relu: torch op remains after the 'neuron' stage (at model.py:12 (model.l1))
// CHECK-ALLOCATED: torch.aten.relu: torch op remains after the 'allocated' stage (at model.py:12 (model.l1))
// CHECK-SYNCHRONISED: torch.aten.relu: torch op remains after the 'synchronised' stage (at model.py:12 (model.l1))

// -----

func.func @tensor_argument_remains(%x: tensor<4xf32>) {
  func.return
}
// CHECK-TILE: func.func: tensor argument remains after the 'tile' stage
// CHECK-NEURON: func.func: tensor argument remains after the 'neuron' stage
// CHECK-ALLOCATED: func.func: tensor argument remains after the 'allocated' stage
// CHECK-SYNCHRONISED: func.func: tensor argument remains after the 'synchronised' stage

// -----

func.func @tile_argument_remains(%t: !tile.tile<4x4xf32, sbuf>) {
  func.return
}
// CHECK-NEURON: func.func: tile argument remains after the 'neuron' stage
// CHECK-ALLOCATED: func.func: tile argument remains after the 'allocated' stage
// CHECK-SYNCHRONISED: func.func: tile argument remains after the 'synchronised' stage

// -----

func.func @tensor_value_remains() {
  %c = arith.constant dense<1.0> : tensor<4xf32> loc("model.py":14:0)
  func.return
}
// CHECK-TILE: arith.constant: tensor value remains after the 'tile' stage (at model.py:14)
// CHECK-NEURON: arith.constant: tensor value remains after the 'neuron' stage (at model.py:14)
// CHECK-ALLOCATED: arith.constant: tensor value remains after the 'allocated' stage (at model.py:14)
// CHECK-SYNCHRONISED: arith.constant: tensor value remains after the 'synchronised' stage (at model.py:14)

// -----

func.func @loop_carries_values() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n = scf.for %i = %c0 to %c4 step %c1 iter_args(%count = %c0) -> (index) {
    %next = arith.addi %count, %c1 : index
    scf.yield %next : index
  } loc("model.l2"("model.py":16:0))
  func.return
}
// CHECK-TILE: func.func @loop_carries_values
// CHECK-NEURON: scf.for: loop still carries values after the 'neuron' stage (at model.py:16 (model.l2))
// CHECK-ALLOCATED: scf.for: loop still carries values after the 'allocated' stage (at model.py:16 (model.l2))
// CHECK-SYNCHRONISED: scf.for: loop still carries values after the 'synchronised' stage (at model.py:16 (model.l2))

// -----

func.func @not_a_neuron_level_op() {
  %t = tile.fill {value = 0.0 : f64} : !tile.tile<128x1xf32, sbuf> loc("model.l3"("model.py":18:0))
  func.return
}
// CHECK-TILE: func.func @not_a_neuron_level_op
// CHECK-NEURON: tile.fill: is not a neuron-level op after the 'neuron' stage (at model.py:18 (model.l3))
// CHECK-ALLOCATED: tile.fill: is not a neuron-level op after the 'allocated' stage (at model.py:18 (model.l3))
// CHECK-SYNCHRONISED: tile.fill: is not a neuron-level op after the 'synchronised' stage (at model.py:18 (model.l3))

// -----

func.func @buffer_has_no_address() {
  %a = neuron.alloc : memref<128x1xf32, #mem<sbuf>> loc("model.l4"("model.py":20:0))
  neuron.memset vector dst %a[0:128, 0, [[1, 1]]] {value = 1.0 : f64, id = 0 : i64} : memref<128x1xf32, #mem<sbuf>>
  func.return
}
// CHECK-TILE: func.func @buffer_has_no_address
// CHECK-NEURON: func.func @buffer_has_no_address
// CHECK-ALLOCATED: neuron.alloc: buffer has no address after the 'allocated' stage (at model.py:20 (model.l4))
// CHECK-SYNCHRONISED: neuron.alloc: buffer has no address after the 'synchronised' stage (at model.py:20 (model.l4))

// -----

func.func @instruction_has_no_id() {
  %a = neuron.alloc {address = 0 : i64} : memref<128x1xf32, #mem<sbuf>>
  neuron.memset vector dst %a[0:128, 0, [[1, 1]]] {value = 1.0 : f64} : memref<128x1xf32, #mem<sbuf>> loc("model.l5"("model.py":22:0))
  func.return
}
// CHECK-TILE: func.func @instruction_has_no_id
// CHECK-NEURON: func.func @instruction_has_no_id
// CHECK-ALLOCATED: func.func @instruction_has_no_id
// CHECK-SYNCHRONISED: neuron.memset: instruction has no id after the 'synchronised' stage (at model.py:22 (model.l5))
