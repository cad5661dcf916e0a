// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile --verify-diagnostics | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-insert-sync --verify-diagnostics | filecheck %s --check-prefix=SYNC

// A size bucket's function declares its size arguments as `neuron.size_arguments = [["name", lower, upper], ...]`:
// a table any pass reads is checked where it is read, and a malformed one is refused at the function.

// Bounds are integers.
func.func @float_bounds(%x: tensor<256x16xf32>) -> tensor<256x16xf32> attributes {neuron.size_arguments = [["s1", 1 : bf16, 256 : bf16]]} {
  %0 = torch.aten.relu %x : (tensor<256x16xf32>) -> tensor<256x16xf32>
  func.return %0 : tensor<256x16xf32>
}
// CHECK: @float_bounds: neuron.size_arguments entry 0 must be ["name", lower, upper] with integer bounds

// -----

// A call's size lies in [lower, upper], and a size is at least 1.
func.func @empty_range(%x: tensor<256x16xf32>) -> tensor<256x16xf32> attributes {neuron.size_arguments = [["s1", 8 : i64, 4 : i64]]} {
  %0 = torch.aten.relu %x : (tensor<256x16xf32>) -> tensor<256x16xf32>
  func.return %0 : tensor<256x16xf32>
}
// CHECK: @empty_range: neuron.size_arguments entry 0 (s1) must have 1 <= lower <= upper, not [8, 4]

// -----

// Each size argument is one `index` argument of the function: names are unique.
func.func @same_name_twice(%x: tensor<256x16xf32>) -> tensor<256x16xf32> attributes {neuron.size_arguments = [["s1", 1 : i64, 4 : i64], ["s1", 1 : i64, 8 : i64]]} {
  %0 = torch.aten.relu %x : (tensor<256x16xf32>) -> tensor<256x16xf32>
  func.return %0 : tensor<256x16xf32>
}
// CHECK: @same_name_twice: neuron.size_arguments names s1 twice

// -----

// The engine-level passes read the same table, through the same check (and convert-torch-to-tile checks every
// function's table, whatever its body).
func.func @engine_level(%x: memref<1024x64xf32, #mem<hbm>>, %n: index) attributes {neuron.size_arguments = [["n", 1.0 : f32, 1024 : i64]]} {
  func.return
}
// CHECK: @engine_level: neuron.size_arguments entry 0 must be ["name", lower, upper] with integer bounds
// SYNC: @engine_level: neuron.size_arguments entry 0 must be ["name", lower, upper] with integer bounds
