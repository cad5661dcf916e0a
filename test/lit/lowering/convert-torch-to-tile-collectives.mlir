// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-pipeline | filecheck %s --check-prefix=PIPELINE
// RUN: neuron-opt %S/Inputs/collectives_one_rank.torch.mlir -p neuron-pipeline --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// The functional collectives (lowering/convert_torch_to_tile/collectives.py): each becomes one tile.collective on
// whole HBM tensors, its replica group the ranks the module records for its process group, then one instruction
// on the collective queue; wait_tensor is its input.

builtin.module attributes {neuron.process_groups = {"tp" = array<i64: 2, 3>}} {
  func.func @all_reduce(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %y = torch.c10d_functional.all_reduce %x {reduce_op = "avg", group_name = "tp"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %z = torch.c10d_functional.wait_tensor %y : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %w = torch.aten.tanh %z : (tensor<8x4xf32>) -> tensor<8x4xf32>
    func.return %w : tensor<8x4xf32>
  }
}
// CHECK-LABEL: func.func @all_reduce
// CHECK:       %[[Y:.*]] = memref.alloc() : memref<8x4xf32, #mem<hbm>>
// CHECK-NEXT:  tile.collective %x into %[[Y]] {kind = "all_reduce", replica_groups = [array<i64: 2, 3>], reduce = "avg"}
// CHECK:       tile.view %[[Y]]
// The load of the reduced tensor waits for the collective, on its own queue.
// PIPELINE-LABEL: func.func @all_reduce
// PIPELINE:    neuron.all_reduce collective dst %y[0, {{\[}}[4, 8], [1, 4]]], src %x[0, {{\[}}[4, 8], [1, 4]]] {replica_groups = [array<i64: 2, 3>], reduce = "avg", id = [[ID:[0-9]+]] : i64}
// PIPELINE:    neuron.dma_copy dma {{.*}}src %y{{.*}}waits = array<i64: [[ID]]>

// -----

builtin.module attributes {neuron.process_groups = {"0" = array<i64: 0, 1, 2, 3>}} {
  func.func @gather_scatter_swap(%x: tensor<8x4xbf16>) -> (tensor<32x4xbf16>, tensor<2x4xbf16>, tensor<8x4xbf16>) {
    %g = torch.c10d_functional.all_gather_into_tensor %x {group_size = 4, group_name = "0"} : (tensor<8x4xbf16>) -> tensor<32x4xbf16>
    %s = torch.c10d_functional.reduce_scatter_tensor %x {reduce_op = "sum", group_size = 4, group_name = "0"} : (tensor<8x4xbf16>) -> tensor<2x4xbf16>
    %a = torch.c10d_functional.all_to_all_single %x {output_split_sizes = array<i64: 2, 2, 2, 2>, input_split_sizes = array<i64>, group_name = "0"} : (tensor<8x4xbf16>) -> tensor<8x4xbf16>
    func.return %g, %s, %a : tensor<32x4xbf16>, tensor<2x4xbf16>, tensor<8x4xbf16>
  }
}
// CHECK-LABEL: func.func @gather_scatter_swap
// CHECK:       tile.collective %x into %{{.*}} {kind = "all_gather", replica_groups = [array<i64: 0, 1, 2, 3>]} : memref<8x4xbf16, #mem<hbm>>, memref<32x4xbf16, #mem<hbm>>
// CHECK:       tile.collective %x into %{{.*}} {kind = "reduce_scatter", replica_groups = [array<i64: 0, 1, 2, 3>], reduce = "sum"} : memref<8x4xbf16, #mem<hbm>>, memref<2x4xbf16, #mem<hbm>>
// CHECK:       tile.collective %x into %{{.*}} {kind = "all_to_all", replica_groups = [array<i64: 0, 1, 2, 3>]} : memref<8x4xbf16, #mem<hbm>>, memref<8x4xbf16, #mem<hbm>>
// PIPELINE-LABEL: func.func @gather_scatter_swap
// PIPELINE:    neuron.all_gather collective {{.*}}replica_groups = [array<i64: 0, 1, 2, 3>]
// PIPELINE:    neuron.reduce_scatter collective {{.*}}reduce = "sum"
// PIPELINE:    neuron.all_to_all collective

// -----

// A broadcast takes its source's position in the group as the instruction's root; a coalesced call is one collective
// per tensor of its list, in the list's order.
builtin.module attributes {neuron.process_groups = {"dp" = array<i64: 0, 1>}} {
  func.func @broadcast_and_coalesced(%x: tensor<8x4xf32>, %v: tensor<6xbf16>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<6xbf16>, tensor<16x4xf32>, tensor<12xbf16>, tensor<4x4xf32>, tensor<3xbf16>) {
    %b = torch.c10d_functional.broadcast %x {src = 1, group_name = "dp"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %r:2 = torch.c10d_functional.all_reduce_coalesced [%x, %v] {reduce_op = "sum", group_name = "dp"} : (tensor<8x4xf32>, tensor<6xbf16>) -> (tensor<8x4xf32>, tensor<6xbf16>)
    %g:2 = torch.c10d_functional.all_gather_into_tensor_coalesced [%x, %v] {group_size = 2, group_name = "dp"} : (tensor<8x4xf32>, tensor<6xbf16>) -> (tensor<16x4xf32>, tensor<12xbf16>)
    %s:2 = torch.c10d_functional.reduce_scatter_tensor_coalesced [%x, %v] {reduce_op = "avg", group_size = 2, group_name = "dp"} : (tensor<8x4xf32>, tensor<6xbf16>) -> (tensor<4x4xf32>, tensor<3xbf16>)
    func.return %b, %r#0, %r#1, %g#0, %g#1, %s#0, %s#1 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<6xbf16>, tensor<16x4xf32>, tensor<12xbf16>, tensor<4x4xf32>, tensor<3xbf16>
  }
}
// CHECK-LABEL: func.func @broadcast_and_coalesced
// CHECK:       tile.collective %x into %{{.*}} {kind = "broadcast", replica_groups = [array<i64: 0, 1>], root = 1 : i64} : memref<8x4xf32, #mem<hbm>>, memref<8x4xf32, #mem<hbm>>
// CHECK:       tile.collective %x into %{{.*}} {kind = "all_reduce", replica_groups = [array<i64: 0, 1>], reduce = "sum"} : memref<8x4xf32, #mem<hbm>>, memref<8x4xf32, #mem<hbm>>
// CHECK:       tile.collective %v into %{{.*}} {kind = "all_reduce", replica_groups = [array<i64: 0, 1>], reduce = "sum"} : memref<6xbf16, #mem<hbm>>, memref<6xbf16, #mem<hbm>>
// CHECK:       tile.collective %x into %{{.*}} {kind = "all_gather", replica_groups = [array<i64: 0, 1>]} : memref<8x4xf32, #mem<hbm>>, memref<16x4xf32, #mem<hbm>>
// CHECK:       tile.collective %v into %{{.*}} {kind = "all_gather", replica_groups = [array<i64: 0, 1>]} : memref<6xbf16, #mem<hbm>>, memref<12xbf16, #mem<hbm>>
// CHECK:       tile.collective %x into %{{.*}} {kind = "reduce_scatter", replica_groups = [array<i64: 0, 1>], reduce = "avg"} : memref<8x4xf32, #mem<hbm>>, memref<4x4xf32, #mem<hbm>>
// CHECK:       tile.collective %v into %{{.*}} {kind = "reduce_scatter", replica_groups = [array<i64: 0, 1>], reduce = "avg"} : memref<6xbf16, #mem<hbm>>, memref<3xbf16, #mem<hbm>>
// PIPELINE-LABEL: func.func @broadcast_and_coalesced
// PIPELINE:    neuron.broadcast collective {{.*}}root = 1 : i64
// PIPELINE-COUNT-2: neuron.all_reduce collective
// PIPELINE-COUNT-2: neuron.all_gather collective
// PIPELINE-COUNT-2: neuron.reduce_scatter collective

// -----

// Uneven all_to_all_single: its row splits become element counts sent to and received from each rank.
builtin.module attributes {neuron.process_groups = {"ep" = array<i64: 0, 1>}} {
  func.func @uneven_all_to_all(%x: tensor<6x2xf32>) -> tensor<4x2xf32> {
    %a = torch.c10d_functional.all_to_all_single %x {output_split_sizes = array<i64: 1, 3>, input_split_sizes = array<i64: 2, 4>, group_name = "ep"} : (tensor<6x2xf32>) -> tensor<4x2xf32>
    func.return %a : tensor<4x2xf32>
  }
}
// CHECK-LABEL: func.func @uneven_all_to_all
// CHECK:       tile.collective %x into %{{.*}} {kind = "all_to_all", replica_groups = [array<i64: 0, 1>], input_splits = array<i64: 4, 8>, output_splits = array<i64: 2, 6>} : memref<6x2xf32, #mem<hbm>>, memref<4x2xf32, #mem<hbm>>
// PIPELINE-LABEL: func.func @uneven_all_to_all
// PIPELINE:    neuron.all_to_all collective {{.*}}input_splits = array<i64: 4, 8>, output_splits = array<i64: 2, 6>

// SEMANTICS: check-semantics: 2 inputs, all outputs match
