// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --verify-diagnostics | filecheck %s

// Inputs convert-torch-to-tile refuses (lowering/convert_torch_to_tile), all of them before converting anything:
// an op without a lowering, a tensor without a storage type, or arguments its family's `legal` check rules out.
// Each diagnostic names the op, the rule and, when the op has one, its source location.

func.func @no_lowering(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.aten.special_airy_ai %x : (tensor<4xf32>) -> tensor<4xf32> loc("model.l1"("model.py":12:0))
  func.return %0 : tensor<4xf32>
}
// CHECK: torch.aten.special_airy_ai: no lowering to the tile dialect yet (at model.py:12 (model.l1))

// -----

// f64 has no on-chip storage type: an argument of the function ...
func.func @argument_element_type(%x: tensor<4xf64>) -> tensor<4xf64> {
  func.return %x : tensor<4xf64>
} loc("model.py":3:0)
// CHECK: func.func: element type f64 has no NeuronCore storage type (at model.py:3)

// -----

// ... or the result of an op.
func.func @result_element_type(%x: tensor<4xf32>) -> tensor<4xf64> {
  %0 = torch.aten._to_copy %x {dtype = f64} : (tensor<4xf32>) -> tensor<4xf64> loc("model.cast"("model.py":20:0))
  func.return %0 : tensor<4xf64>
}
// CHECK: torch.aten._to_copy: element type f64 has no NeuronCore storage type (at model.py:20 (model.cast))

// -----

// Views whose arguments do not give their result type never reach the pass: the torch dialect's verifier
// refuses them first.
func.func @expand_non_unit_dimension(%x: tensor<3x4xf32>) -> tensor<5x4xf32> {
  %0 = torch.aten.expand %x {size = array<i64: 5, 4>} : (tensor<3x4xf32>) -> tensor<5x4xf32> loc("model.l2"("model.py":14:0))
  func.return %0 : tensor<5x4xf32>
}
// CHECK: torch.aten.expand: 'size' [5, 4] cannot expand the operand shape (3, 4)

// -----

func.func @view_element_count(%x: tensor<3x4xf32>) -> tensor<5xf32> {
  %0 = torch.aten.view %x {size = array<i64: 5>} : (tensor<3x4xf32>) -> tensor<5xf32>
  func.return %0 : tensor<5xf32>
}
// CHECK: torch.aten.view: 'size' [5] has 5 elements, the operand 12

// -----

func.func @unsqueeze_out_of_range(%x: tensor<4x5xf32>) -> tensor<4x5x1xf32> {
  %y = torch.aten.unsqueeze %x {dim = 7 : i64} : (tensor<4x5xf32>) -> tensor<4x5x1xf32> loc("model.py":9:0)
  func.return %y : tensor<4x5x1xf32>
}
// CHECK: torch.aten.unsqueeze: 'dim' 7 is out of range for 3 dimension(s)

// -----

// Dimension arguments out of range (the reduction family's `legal`).
func.func @reduce_dimension_out_of_range(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  %0 = torch.aten.sum.dim_IntList %x {dim = array<i64: 9>} : (tensor<3x4xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: torch.aten.sum.dim_IntList: dimension 9 is out of range for rank 2

// -----

// Families whose `legal` checks scalar arguments (elementwise.py, activations.py, sort.py, normalization.py).
func.func @unknown_rounding_mode(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.aten.div.Tensor_mode %x, %y {rounding_mode = "ceil"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("model.py":30:0)
  func.return %0 : tensor<4xf32>
}
// CHECK: torch.aten.div.Tensor_mode: unknown rounding_mode 'ceil' (at model.py:30)

// -----

func.func @unknown_gelu_approximation(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.aten.gelu %x {approximate = "erf"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":31:0)
  func.return %0 : tensor<4xf32>
}
// CHECK: torch.aten.gelu: unknown gelu approximation 'erf' (at model.py:31)

// -----

func.func @topk_k_out_of_range(%x: tensor<3x4xf32>) -> (tensor<3x5xf32>, tensor<3x5xi64>) {
  %0, %1 = torch.aten.topk %x {k = 5 : i64} : (tensor<3x4xf32>) -> (tensor<3x5xf32>, tensor<3x5xi64>) loc("model.py":32:0)
  func.return %0, %1 : tensor<3x5xf32>, tensor<3x5xi64>
}
// CHECK: torch.aten.topk: k = 5 is out of range for a dimension of 4 (at model.py:32)

// -----

func.func @batch_norm_eval_saving_statistics(%x: tensor<4x3xf32>, %rm: tensor<3xf32>, %rv: tensor<3xf32>) -> tensor<3xf32> {
  %0, %1, %2 = torch.aten._native_batch_norm_legit_no_training %x, none, none, %rm, %rv {momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) loc("model.py":33:0)
  func.return %1 : tensor<3xf32>
}
// CHECK: torch.aten._native_batch_norm_legit_no_training: result 1 has shape (3,), but batch norm saves no statistics here (shape (0,)) (at model.py:33)

// -----

func.func @batch_norm_without_statistics_in_eval_mode(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0, %1, %2 = torch.aten._native_batch_norm_legit.no_stats %x, none, none {training = false, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : (tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) loc("model.py":34:0)
  func.return %0 : tensor<4x3xf32>
}
// CHECK: torch.aten._native_batch_norm_legit.no_stats: without running statistics batch norm normalizes with batch statistics: training must be true (at model.py:34)

// -----

// An integer result must be exact: a reduction that scales (a mean) or transforms its chunks cannot round
// through fp32, so it is refused (the node runs on the CPU) rather than computed inexactly.
func.func @integer_mean(%x: tensor<4x8xi64>) -> tensor<4xi64> {
  %0 = torch.aten.mean.dim %x {dim = array<i64: 1>} : (tensor<4x8xi64>) -> tensor<4xi64> loc("model.avg"("model.py":30:0))
  func.return %0 : tensor<4xi64>
}
// CHECK: torch.aten.mean.dim: a scaled reduction with an integer result (i64) has no exact lowering (it would round through fp32) (at model.py:30 (model.avg))

// -----

// Attention (attention.py): grouped key/value heads must divide the query heads ...
func.func @attention_heads_not_grouped(%q: tensor<1x8x16x32xf32>, %k: tensor<1x3x16x32xf32>, %v: tensor<1x3x16x32xf32>) -> tensor<1x8x16x32xf32> {
  %0, %1 = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, none : (tensor<1x8x16x32xf32>, tensor<1x3x16x32xf32>, tensor<1x3x16x32xf32>) -> (tensor<1x8x16x32xf32>, tensor<1x8x16xf32>) loc("model.attn"("model.py":40:0))
  func.return %0 : tensor<1x8x16x32xf32>
}
// CHECK: torch.aten._scaled_dot_product_flash_attention_for_cpu: the query's 8 heads must be a multiple of the key's and value's 3 (grouped-query attention) (at model.py:40 (model.attn))

// -----

// ... and the output rows of one query tile must fit a PSUM bank.
func.func @attention_values_wider_than_a_bank(%q: tensor<1x2x16x640xf32>, %k: tensor<1x2x16x640xf32>, %v: tensor<1x2x16x640xf32>) -> tensor<1x2x16x640xf32> {
  %0, %1 = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, none : (tensor<1x2x16x640xf32>, tensor<1x2x16x640xf32>, tensor<1x2x16x640xf32>) -> (tensor<1x2x16x640xf32>, tensor<1x2x16xf32>) loc("model.attn"("model.py":41:0))
  func.return %0 : tensor<1x2x16x640xf32>
}
// CHECK: torch.aten._scaled_dot_product_flash_attention_for_cpu: values wider than one PSUM bank (512 fp32 columns) are not lowered, got Ev = 640 (at model.py:41 (model.attn))

// -----

// A collective whose process group the module does not name: the frontend records every group a graph names.
func.func @collective_unknown_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = torch.c10d_functional.all_reduce %x {reduce_op = "sum", group_name = "7"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":21:0)
  func.return %0 : tensor<4xf32>
}
// CHECK: torch.c10d_functional.all_reduce: the process group '7' is not in the module's neuron.process_groups (the frontend records the ranks of every group a graph names) (at model.py:21)

// -----

builtin.module attributes {neuron.process_groups = {"0" = array<i64: 0, 1>}} {
  func.func @collective_bad_reduction(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = torch.c10d_functional.all_reduce %x {reduce_op = "bitwise_or", group_name = "0"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":22:0)
    func.return %0 : tensor<4xf32>
  }
}
// CHECK: torch.c10d_functional.all_reduce: reduction 'bitwise_or' is not one of avg, max, min, product, sum (at model.py:22)

// -----

builtin.module attributes {neuron.process_groups = {"0" = array<i64: 0, 1>}} {
  func.func @collective_group_size(%x: tensor<4xf32>) -> tensor<16xf32> {
    %0 = torch.c10d_functional.all_gather_into_tensor %x {group_size = 4, group_name = "0"} : (tensor<4xf32>) -> tensor<16xf32> loc("model.py":23:0)
    func.return %0 : tensor<16xf32>
  }
}
// CHECK: torch.c10d_functional.all_gather_into_tensor: group_size 4 but the group '0' has 2 ranks (at model.py:23)

// -----

// A rank a program cannot hold (a fuzz case: the bundle's validation refused the compiled program), and one twice.
builtin.module attributes {neuron.process_groups = {"0" = array<i64: 1099511627776>}} {
  func.func @collective_rank_range(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = torch.c10d_functional.all_reduce %x {reduce_op = "sum", group_name = "0"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":23:0)
    func.return %0 : tensor<4xf32>
  }
}
// CHECK: torch.c10d_functional.all_reduce: the process group '0' has ranks [1099511627776]: distinct ranks in [0, 2^31) only (at model.py:23)

// -----

builtin.module attributes {neuron.process_groups = {"0" = array<i64: 1, 1>}} {
  func.func @collective_rank_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = torch.c10d_functional.all_reduce %x {reduce_op = "sum", group_name = "0"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":23:0)
    func.return %0 : tensor<4xf32>
  }
}
// CHECK: torch.c10d_functional.all_reduce: the process group '0' has ranks [1, 1]: distinct ranks in [0, 2^31) only (at model.py:23)

// -----

builtin.module attributes {neuron.process_groups = {"0" = array<i64: 0, 1>}} {
  func.func @collective_uneven_splits(%x: tensor<6x2xf32>) -> tensor<6x2xf32> {
    %0 = torch.c10d_functional.all_to_all_single %x {output_split_sizes = array<i64: 2, 3>, input_split_sizes = array<i64: 3, 3>, group_name = "0"} : (tensor<6x2xf32>) -> tensor<6x2xf32> loc("model.py":24:0)
    func.return %0 : tensor<6x2xf32>
  }
}
// CHECK: torch.c10d_functional.all_to_all_single: output_split_sizes [2, 3] add up to 5 rows, not the 6 of its tensor (at model.py:24)

// -----

builtin.module attributes {neuron.process_groups = {"0" = array<i64: 0, 1>}} {
  func.func @collective_split_count(%x: tensor<6x2xf32>) -> tensor<6x2xf32> {
    %0 = torch.c10d_functional.all_to_all_single %x {output_split_sizes = array<i64>, input_split_sizes = array<i64: 1, 2, 3>, group_name = "0"} : (tensor<6x2xf32>) -> tensor<6x2xf32> loc("model.py":26:0)
    func.return %0 : tensor<6x2xf32>
  }
}
// CHECK: torch.c10d_functional.all_to_all_single: input_split_sizes [1, 2, 3] give 3 counts for a group of 2 ranks (at model.py:26)

// -----

builtin.module attributes {neuron.process_groups = {"0" = array<i64: 0, 1>}} {
  func.func @collective_broadcast_source(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = torch.c10d_functional.broadcast %x {src = 2, group_name = "0"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":25:0)
    func.return %0 : tensor<4xf32>
  }
}
// CHECK: torch.c10d_functional.broadcast: source rank 2 is not a rank of the group '0' (2 ranks) (at model.py:25)

// -----

// The conversion rewrites torch ops and the return: another op reading or making a tensor, or holding a region,
// breaks its input contract and is refused by name (it would be left reading a tensor that no longer exists).
func.func @region_of_tensors(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = scf.execute_region -> (tensor<4xf32>) {
    scf.yield %x : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
// CHECK: scf.execute_region: convert-torch-to-tile lowers a flat list of torch ops: an op of another dialect may neither read nor make tensors, nor hold regions

// -----

func.func @tensor_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant dense<1.0> : tensor<4xf32> loc("model.py":14:0)
  %r = torch.aten.add.Tensor %x, %c {alpha = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// CHECK: arith.constant: convert-torch-to-tile lowers a flat list of torch ops: an op of another dialect may neither read nor make tensors, nor hold regions (at model.py:14)
