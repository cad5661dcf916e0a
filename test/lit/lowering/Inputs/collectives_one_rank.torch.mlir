// Collectives over groups of one rank (no transport needed): their reference semantics at every level agree.
builtin.module attributes {neuron.process_groups = {"0" = array<i64: 0>}} {
  func.func @main(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>) -> (tensor<8x6xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x6xf32>, tensor<8x4xf32>) {
    %h = torch.aten.mm %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %r = torch.c10d_functional.all_reduce %h {reduce_op = "max", group_name = "0"} : (tensor<8x6xf32>) -> tensor<8x6xf32>
    %g = torch.c10d_functional.all_gather_into_tensor %x {group_size = 1, group_name = "0"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %b = torch.c10d_functional.broadcast %x {src = 0, group_name = "0"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %c:2 = torch.c10d_functional.all_reduce_coalesced [%h, %x] {reduce_op = "sum", group_name = "0"} : (tensor<8x6xf32>, tensor<8x4xf32>) -> (tensor<8x6xf32>, tensor<8x4xf32>)
    %rw = torch.c10d_functional.wait_tensor %r : (tensor<8x6xf32>) -> tensor<8x6xf32>
    %gw = torch.c10d_functional.wait_tensor %g : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %t = torch.aten.tanh %rw : (tensor<8x6xf32>) -> tensor<8x6xf32>
    func.return %t, %gw, %b, %c#0, %c#1 : tensor<8x6xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x6xf32>, tensor<8x4xf32>
  }
}
