// RUN: neuron-opt %s --split-input-file -p neuron-fuse-instructions | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-fuse-instructions --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Instruction pairs merged into one (lowering/neuron_fuse_instructions.py), and pairs left alone.
// SEMANTICS-COUNT-12: all outputs match

// A softmax row: the negation of the row maximum becomes the reduce's `negate`, and the sum of the fp32
// exponentials becomes the activation's accumulate (its [128, 1] buffer now allocated before the activation).
// CHECK-LABEL: func.func @softmax
// CHECK:       %[[MAX:.*]] = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
// CHECK-NEXT:  neuron.tensor_reduce vector dst %[[MAX]][0:128, 0, [[1, 1]]], src %{{.*}} {op = "max", negate = true}
// CHECK-NOT:   neuron.tensor_scalar vector dst %{{.*}}[0:128, 0, [[1, 1]]]
// CHECK:       %[[EXP:.*]] = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
// CHECK-NEXT:  %[[SUM:.*]] = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
// CHECK-NEXT:  neuron.activation scalar dst %[[EXP]][0:128, 0, [[1, 64]]], accumulate_dst %[[SUM]][0:128, 0, [[1, 1]]], src %{{.*}}, bias %[[MAX]][0:128, 0, [[1, 1]]] {func = "exp"}
// CHECK-NOT:   neuron.tensor_reduce
// CHECK:       neuron.activation scalar dst %{{.*}}, src %[[SUM]][0:128, 0, [[1, 1]]] {func = "reciprocal"}
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @softmax(%x: memref<128x64xbf16, #mem<hbm>>) -> memref<128x64xbf16, #mem<hbm>> {
    %0 = neuron.alloc : memref<128x64xbf16, #mem<hbm>>
    %1 = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %1[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<hbm>>
    %2 = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %2[0:128, 0, [[1, 1]]], src %1[0:128, 0, [[1, 64]]] {op = "max"} : memref<128x1xf32, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
    %3 = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %3[0:128, 0, [[1, 1]]], src %2[0:128, 0, [[1, 1]]] {op0 = "multiply", scalar0 = -1.000000e+00 : f64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %4 = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.activation scalar dst %4[0:128, 0, [[1, 64]]], src %1[0:128, 0, [[1, 64]]], bias %3[0:128, 0, [[1, 1]]] {func = "exp"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %5 = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %5[0:128, 0, [[1, 1]]], src %4[0:128, 0, [[1, 64]]] {op = "add"} : memref<128x1xf32, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
    %6 = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.activation scalar dst %6[0:128, 0, [[1, 1]]], src %5[0:128, 0, [[1, 1]]] {func = "reciprocal"} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %7 = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %7[0:128, 0, [[1, 64]]], src %4[0:128, 0, [[1, 64]]], operand0 %6[0:128, 0, [[1, 1]]] {op0 = "multiply"} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %0[0, [[64, 128], [1, 64]]], src %7[0:128, 0, [[1, 64]]] {queue = 1 : i64} : memref<128x64xbf16, #mem<hbm>>, memref<128x64xbf16, #mem<sbuf>>
    func.return %0 : memref<128x64xbf16, #mem<hbm>>
  }
}

// -----

// Normalising a row: (x - mean) into fp32 then * rstd becomes one two-step tensor_scalar from the bf16 tile
// to the bf16 result, and the fp32 intermediate is gone.
// CHECK-LABEL: func.func @normalise
// CHECK-NOT:   memref<64x96xf32, #mem<sbuf>>
// CHECK:       neuron.tensor_scalar vector dst %{{.*}}[0:64, 0, [[1, 96]]], src %{{.*}}[0:64, 0, [[1, 96]]], operand0 %{{.*}}, operand1 %{{.*}} {op0 = "subtract", op1 = "multiply"} : memref<64x96xbf16, #mem<sbuf>>, memref<64x96xbf16, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>
// CHECK-NOT:   neuron.tensor_scalar
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @normalise(%x: memref<64x96xbf16, #mem<hbm>>, %s: memref<64x2xf32, #mem<hbm>>) -> memref<64x96xbf16, #mem<hbm>> {
    %out = neuron.alloc : memref<64x96xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<64x96xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:64, 0, [[1, 96]]], src %x[0, [[96, 64], [1, 96]]] {queue = 0 : i64} : memref<64x96xbf16, #mem<sbuf>>, memref<64x96xbf16, #mem<hbm>>
    %mean = neuron.alloc : memref<64x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %mean[0:64, 0, [[1, 1]]], src %s[0, [[2, 64], [1, 1]]] {queue = 1 : i64} : memref<64x1xf32, #mem<sbuf>>, memref<64x2xf32, #mem<hbm>>
    %rstd = neuron.alloc : memref<64x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %rstd[0:64, 0, [[1, 1]]], src %s[1, [[2, 64], [1, 1]]] {queue = 2 : i64} : memref<64x1xf32, #mem<sbuf>>, memref<64x2xf32, #mem<hbm>>
    %c = neuron.alloc : memref<64x96xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c[0:64, 0, [[1, 96]]], src %t[0:64, 0, [[1, 96]]], operand0 %mean[0:64, 0, [[1, 1]]] {op0 = "subtract"} : memref<64x96xf32, #mem<sbuf>>, memref<64x96xbf16, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>
    %y = neuron.alloc : memref<64x96xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %y[0:64, 0, [[1, 96]]], src %c[0:64, 0, [[1, 96]]], operand0 %rstd[0:64, 0, [[1, 1]]] {op0 = "multiply"} : memref<64x96xbf16, #mem<sbuf>>, memref<64x96xf32, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[96, 64], [1, 96]]], src %y[0:64, 0, [[1, 96]]] {queue = 3 : i64} : memref<64x96xbf16, #mem<hbm>>, memref<64x96xbf16, #mem<sbuf>>
    func.return %out : memref<64x96xbf16, #mem<hbm>>
  }
}

// -----

// A square of the first step's result, (s + c) * (s + c): the second reads the intermediate as its per-partition
// operand too, so the intermediate must be written, and the pair stays two instructions.
// CHECK-LABEL: func.func @square_of_sum
// CHECK:       neuron.tensor_scalar vector dst %[[T:.*]][0:64, 0, [[1, 1]]], src %{{.*}}, operand0 %{{.*}} {op0 = "add"}
// CHECK-NEXT:  %{{.*}} = neuron.alloc
// CHECK-NEXT:  neuron.tensor_scalar vector dst %{{.*}}[0:64, 0, [[1, 1]]], src %[[T]][0:64, 0, [[1, 1]]], operand0 %[[T]][0:64, 0, [[1, 1]]] {op0 = "multiply"}
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @square_of_sum(%s: memref<64x2xf32, #mem<hbm>>) -> memref<64x1xf32, #mem<hbm>> {
    %out = neuron.alloc : memref<64x1xf32, #mem<hbm>>
    %a = neuron.alloc : memref<64x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %a[0:64, 0, [[1, 1]]], src %s[0, [[2, 64], [1, 1]]] {queue = 0 : i64} : memref<64x1xf32, #mem<sbuf>>, memref<64x2xf32, #mem<hbm>>
    %c = neuron.alloc : memref<64x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %c[0:64, 0, [[1, 1]]], src %s[1, [[2, 64], [1, 1]]] {queue = 1 : i64} : memref<64x1xf32, #mem<sbuf>>, memref<64x2xf32, #mem<hbm>>
    %t = neuron.alloc : memref<64x1xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %t[0:64, 0, [[1, 1]]], src %a[0:64, 0, [[1, 1]]], operand0 %c[0:64, 0, [[1, 1]]] {op0 = "add"} : memref<64x1xf32, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>
    %y = neuron.alloc : memref<64x1xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %y[0:64, 0, [[1, 1]]], src %t[0:64, 0, [[1, 1]]], operand0 %t[0:64, 0, [[1, 1]]] {op0 = "multiply"} : memref<64x1xf32, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>, memref<64x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[1, 64], [1, 1]]], src %y[0:64, 0, [[1, 1]]] {queue = 2 : i64} : memref<64x1xf32, #mem<hbm>>, memref<64x1xf32, #mem<sbuf>>
    func.return %out : memref<64x1xf32, #mem<hbm>>
  }
}

// -----

// Left alone: the intermediate is bf16 (merging would skip its rounding), the exponentials are read by the
// sum through a different pattern (half of them), and the negated maximum is read again.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-2: neuron.tensor_scalar vector
// CHECK:       neuron.tensor_reduce vector {{.*}} {op = "max"}
// CHECK:       neuron.tensor_scalar vector {{.*}} {op0 = "multiply", scalar0 = -1.000000e+00 : f64}
// CHECK:       neuron.activation scalar dst %{{.*}}, src %{{.*}}, bias %{{.*}} {func = "exp"}
// CHECK:       neuron.tensor_reduce vector {{.*}} {op = "add"}
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @kept(%x: memref<32x64xbf16, #mem<hbm>>) -> (memref<32x64xbf16, #mem<hbm>>, memref<32x1xf32, #mem<hbm>>, memref<32x1xf32, #mem<hbm>>) {
    %out = neuron.alloc : memref<32x64xbf16, #mem<hbm>>
    %sums = neuron.alloc : memref<32x1xf32, #mem<hbm>>
    %maxima = neuron.alloc : memref<32x1xf32, #mem<hbm>>
    %t = neuron.alloc : memref<32x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:32, 0, [[1, 64]]], src %x[0, [[64, 32], [1, 64]]] {queue = 0 : i64} : memref<32x64xbf16, #mem<sbuf>>, memref<32x64xbf16, #mem<hbm>>
    %a = neuron.alloc : memref<32x64xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %a[0:32, 0, [[1, 64]]], src %t[0:32, 0, [[1, 64]]] {op0 = "multiply", scalar0 = 3.000000e+00 : f64} : memref<32x64xbf16, #mem<sbuf>>, memref<32x64xbf16, #mem<sbuf>>
    %b = neuron.alloc : memref<32x64xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %b[0:32, 0, [[1, 64]]], src %a[0:32, 0, [[1, 64]]] {op0 = "add", scalar0 = 1.000000e+00 : f64} : memref<32x64xbf16, #mem<sbuf>>, memref<32x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[64, 32], [1, 64]]], src %b[0:32, 0, [[1, 64]]] {queue = 1 : i64} : memref<32x64xbf16, #mem<hbm>>, memref<32x64xbf16, #mem<sbuf>>
    %m = neuron.alloc : memref<32x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %m[0:32, 0, [[1, 1]]], src %t[0:32, 0, [[1, 64]]] {op = "max"} : memref<32x1xf32, #mem<sbuf>>, memref<32x64xbf16, #mem<sbuf>>
    %n = neuron.alloc : memref<32x1xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %n[0:32, 0, [[1, 1]]], src %m[0:32, 0, [[1, 1]]] {op0 = "multiply", scalar0 = -1.000000e+00 : f64} : memref<32x1xf32, #mem<sbuf>>, memref<32x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %maxima[0, [[1, 32], [1, 1]]], src %m[0:32, 0, [[1, 1]]] {queue = 2 : i64} : memref<32x1xf32, #mem<hbm>>, memref<32x1xf32, #mem<sbuf>>
    %e = neuron.alloc : memref<32x64xf32, #mem<sbuf>>
    neuron.activation scalar dst %e[0:32, 0, [[1, 64]]], src %t[0:32, 0, [[1, 64]]], bias %n[0:32, 0, [[1, 1]]] {func = "exp"} : memref<32x64xf32, #mem<sbuf>>, memref<32x64xbf16, #mem<sbuf>>, memref<32x1xf32, #mem<sbuf>>
    %s = neuron.alloc : memref<32x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %s[0:32, 0, [[1, 1]]], src %e[0:32, 0, [[1, 32]]] {op = "add"} : memref<32x1xf32, #mem<sbuf>>, memref<32x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %sums[0, [[1, 32], [1, 1]]], src %s[0:32, 0, [[1, 1]]] {queue = 3 : i64} : memref<32x1xf32, #mem<hbm>>, memref<32x1xf32, #mem<sbuf>>
    func.return %out, %sums, %maxima : memref<32x64xbf16, #mem<hbm>>, memref<32x1xf32, #mem<hbm>>, memref<32x1xf32, #mem<hbm>>
  }
}

// -----

// Inserting into a panel, K tile by K tile: the per-partition affine's result, read by nothing but the copy
// into the panel's window (at an offset computed after it, which moves up), is written into the window
// directly. A result another copy reads too keeps its copies (only stores move to the window, below).
// CHECK-LABEL: func.func @insert
// CHECK:       scf.for %[[T:.*]] = %c0 to %c2 step %c1 {
// CHECK-NEXT:    %[[OFFSET:.*]] = arith.muli %[[T]], %c64 : index
// CHECK-NEXT:    neuron.tensor_scalar vector dst %[[PANEL:[a-z0-9_]+]][0:128, %[[OFFSET]] + 0, [[1, 64]]], src %{{.*}}, operand0 %{{.*}}[0:128, %[[T]] + 0, [[1, 1]]] {op0 = "multiply"}
// CHECK-NOT:     neuron.tensor_copy vector dst %[[PANEL]]
// CHECK:         neuron.tensor_scalar vector dst %[[KEPT:[a-z0-9_]+]][0:128, 0, [[1, 64]]]
// CHECK-NEXT:    arith.muli
// CHECK-NEXT:    neuron.tensor_copy scalar dst %panel2[0:128, %offset2 + 0, [[1, 64]]], src %[[KEPT]][0:128, 0, [[1, 64]]]
// CHECK-NEXT:    neuron.tensor_copy vector dst %last[0:128, 0, [[1, 64]]], src %[[KEPT]]
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @insert(%x: memref<128x64xbf16, #mem<hbm>>, %w: memref<128x2xbf16, #mem<hbm>>) -> (memref<128x128xbf16, #mem<hbm>>, memref<128x128xbf16, #mem<hbm>>, memref<128x64xbf16, #mem<hbm>>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %out = neuron.alloc : memref<128x128xbf16, #mem<hbm>>
    %out2 = neuron.alloc : memref<128x128xbf16, #mem<hbm>>
    %out3 = neuron.alloc : memref<128x64xbf16, #mem<hbm>>
    %rows = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %rows[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<hbm>>
    %cols = neuron.alloc : memref<128x2xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %cols[0:128, 0, [[1, 2]]], src %w[0, [[2, 128], [1, 2]]] {queue = 1 : i64} : memref<128x2xbf16, #mem<sbuf>>, memref<128x2xbf16, #mem<hbm>>
    %panel = neuron.alloc : memref<128x2x64xbf16, #mem<sbuf>>
    %panel2 = neuron.alloc : memref<128x2x64xbf16, #mem<sbuf>>
    %last = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    scf.for %t = %c0 to %c2 step %c1 {
      %tmp = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
      neuron.tensor_scalar vector dst %tmp[0:128, 0, [[1, 64]]], src %rows[0:128, 0, [[1, 64]]], operand0 %cols[0:128, %t + 0, [[1, 1]]] {op0 = "multiply"} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x2xbf16, #mem<sbuf>>
      %offset = arith.muli %t, %c64 : index
      neuron.tensor_copy vector dst %panel[0:128, %offset + 0, [[1, 64]]], src %tmp[0:128, 0, [[1, 64]]] : memref<128x2x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
      %kept = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
      neuron.tensor_scalar vector dst %kept[0:128, 0, [[1, 64]]], src %rows[0:128, 0, [[1, 64]]], operand0 %cols[0:128, %t + 0, [[1, 1]]] {op0 = "add"} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x2xbf16, #mem<sbuf>>
      %offset2 = arith.muli %t, %c64 : index
      neuron.tensor_copy scalar dst %panel2[0:128, %offset2 + 0, [[1, 64]]], src %kept[0:128, 0, [[1, 64]]] : memref<128x2x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
      neuron.tensor_copy vector dst %last[0:128, 0, [[1, 64]]], src %kept[0:128, 0, [[1, 64]]] : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
    }
    neuron.dma_copy dma dst %out[0, [[128, 128], [1, 128]]], src %panel[0:128, 0, [[64, 2], [1, 64]]] {queue = 2 : i64} : memref<128x128xbf16, #mem<hbm>>, memref<128x2x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %out2[0, [[128, 128], [1, 128]]], src %panel2[0:128, 0, [[64, 2], [1, 64]]] {queue = 3 : i64} : memref<128x128xbf16, #mem<hbm>>, memref<128x2x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %out3[0, [[64, 128], [1, 64]]], src %last[0:128, 0, [[1, 64]]] {queue = 4 : i64} : memref<128x64xbf16, #mem<hbm>>, memref<128x64xbf16, #mem<sbuf>>
    func.return %out, %out2, %out3 : memref<128x128xbf16, #mem<hbm>>, memref<128x128xbf16, #mem<hbm>>, memref<128x64xbf16, #mem<hbm>>
  }
}

// -----

// A row computed into its row group's tile: the tensor_tensor writing the row, read by nothing but the copy into
// the group's window, writes the window itself (fp32 arithmetic rounded once to bf16, as the copy rounded).
// CHECK-LABEL: func.func @tensor_tensor_into_window
// CHECK:       neuron.tensor_tensor vector dst %[[GROUP:[a-z0-9_]+]][0:128, 64, [[1, 64]]], in0 %{{.*}}, in1 %{{.*}} {op = "multiply"}
// CHECK-NOT:   neuron.tensor_copy
// CHECK:       neuron.dma_copy dma dst %out{{.*}}, src %[[GROUP]]
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @tensor_tensor_into_window(%x: memref<128x64xbf16, #mem<hbm>>) -> memref<128x128xbf16, #mem<hbm>> {
    %out = neuron.alloc : memref<128x128xbf16, #mem<hbm>>
    %rows = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %rows[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<hbm>>
    %group = neuron.alloc : memref<128x2x64xbf16, #mem<sbuf>>
    neuron.memset vector dst %group[0:128, 0, [[1, 64]]] {value = 0.0 : f64} : memref<128x2x64xbf16, #mem<sbuf>>
    %row = neuron.alloc : memref<128x64xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %row[0:128, 0, [[1, 64]]], in0 %rows[0:128, 0, [[1, 64]]], in1 %rows[0:128, 0, [[1, 64]]] {op = "multiply"} : memref<128x64xf32, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %group[0:128, 64, [[1, 64]]], src %row[0:128, 0, [[1, 64]]] : memref<128x2x64xbf16, #mem<sbuf>>, memref<128x64xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[128, 128], [1, 128]]], src %group[0:128, 0, [[64, 2], [1, 64]]] {queue = 1 : i64} : memref<128x128xbf16, #mem<hbm>>, memref<128x2x64xbf16, #mem<sbuf>>
    func.return %out : memref<128x128xbf16, #mem<hbm>>
  }
}

// -----

// Attention's probabilities: fp32 exponentials copied to bf16 for a matmul before their sum is taken. Once the
// sum is the activation's accumulate, the copy is its only reader, so the activation writes the bf16 tile
// itself: ScalarE sums its fp32 results before the write rounds them, so the sum is the fp32 one it was.
// CHECK-LABEL: func.func @exp_sum_and_copy
// CHECK:       %[[SUM:.*]] = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
// CHECK-NEXT:  %[[P:.*]] = neuron.alloc : memref<128x96xbf16, #mem<sbuf>>
// CHECK-NEXT:  neuron.activation scalar dst %[[P]][0:128, 0, [[1, 96]]], accumulate_dst %[[SUM]][0:128, 0, [[1, 1]]], src %{{.*}} {func = "exp"}
// CHECK-NOT:   neuron.tensor_copy
// CHECK-NOT:   neuron.tensor_reduce
// CHECK-NOT:   memref<128x96xf32, #mem<sbuf>>
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @exp_sum_and_copy(%x: memref<128x96xbf16, #mem<hbm>>) -> (memref<128x96xbf16, #mem<hbm>>, memref<128x1xf32, #mem<hbm>>) {
    %out = neuron.alloc : memref<128x96xbf16, #mem<hbm>>
    %sums = neuron.alloc : memref<128x1xf32, #mem<hbm>>
    %t = neuron.alloc : memref<128x96xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 96]]], src %x[0, [[96, 128], [1, 96]]] {queue = 0 : i64} : memref<128x96xbf16, #mem<sbuf>>, memref<128x96xbf16, #mem<hbm>>
    %e = neuron.alloc : memref<128x96xf32, #mem<sbuf>>
    neuron.activation scalar dst %e[0:128, 0, [[1, 96]]], src %t[0:128, 0, [[1, 96]]] {func = "exp"} : memref<128x96xf32, #mem<sbuf>>, memref<128x96xbf16, #mem<sbuf>>
    %p = neuron.alloc : memref<128x96xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %p[0:128, 0, [[1, 96]]], src %e[0:128, 0, [[1, 96]]] : memref<128x96xbf16, #mem<sbuf>>, memref<128x96xf32, #mem<sbuf>>
    %s = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %s[0:128, 0, [[1, 1]]], src %e[0:128, 0, [[1, 96]]] {op = "add"} : memref<128x1xf32, #mem<sbuf>>, memref<128x96xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[96, 128], [1, 96]]], src %p[0:128, 0, [[1, 96]]] {queue = 1 : i64} : memref<128x96xbf16, #mem<hbm>>, memref<128x96xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %sums[0, [[1, 128], [1, 1]]], src %s[0:128, 0, [[1, 1]]] {queue = 2 : i64} : memref<128x1xf32, #mem<hbm>>, memref<128x1xf32, #mem<sbuf>>
    func.return %out, %sums : memref<128x96xbf16, #mem<hbm>>, memref<128x1xf32, #mem<hbm>>
  }
}

// -----

// A row scaled by a per-partition column (a layer norm backward's rstd * g) and summed: the product becomes
// ScalarE's copy with that column as its scale, summing what it writes; the scaled row keeps its other reader.
// CHECK-LABEL: func.func @scaled_sum
// CHECK:       neuron.activation scalar dst %[[ROW:.*]][0:128, 0, [[1, 96]]], accumulate_dst %[[SUM:.*]][0:128, 0, [[1, 1]]], src %t[0:128, 0, [[1, 96]]], scale_vector %rstd[0:128, 0, [[1, 1]]] {func = "copy"}
// CHECK-NOT:   neuron.tensor_reduce
// CHECK-NOT:   neuron.tensor_scalar vector dst %[[ROW]]
// CHECK:       neuron.tensor_scalar vector dst %{{.*}}, src %[[ROW]][0:128, 0, [[1, 96]]], operand0 %[[SUM]]
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @scaled_sum(%x: memref<128x96xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) -> memref<128x96xbf16, #mem<hbm>> {
    %out = neuron.alloc : memref<128x96xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<128x96xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 96]]], src %x[0, [[96, 128], [1, 96]]] {queue = 0 : i64} : memref<128x96xbf16, #mem<sbuf>>, memref<128x96xbf16, #mem<hbm>>
    %rstd = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %rstd[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %row = neuron.alloc : memref<128x96xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %row[0:128, 0, [[1, 96]]], src %t[0:128, 0, [[1, 96]]], operand0 %rstd[0:128, 0, [[1, 1]]] {op0 = "multiply"} : memref<128x96xf32, #mem<sbuf>>, memref<128x96xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %sum = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %sum[0:128, 0, [[1, 1]]], src %row[0:128, 0, [[1, 96]]] {op = "add"} : memref<128x1xf32, #mem<sbuf>>, memref<128x96xf32, #mem<sbuf>>
    %y = neuron.alloc : memref<128x96xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %y[0:128, 0, [[1, 96]]], src %row[0:128, 0, [[1, 96]]], operand0 %sum[0:128, 0, [[1, 1]]] {op0 = "add"} : memref<128x96xbf16, #mem<sbuf>>, memref<128x96xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[96, 128], [1, 96]]], src %y[0:128, 0, [[1, 96]]] {queue = 2 : i64} : memref<128x96xbf16, #mem<hbm>>, memref<128x96xbf16, #mem<sbuf>>
    func.return %out : memref<128x96xbf16, #mem<hbm>>
  }
}

// -----

// A row less a per-partition shift, then summed (a batch norm's sum of x - f): VectorE's tensor_scalar sums what it
// writes into accumulate_dst (the ISA's tensor_scalar_reduce), where the reduce streamed the row again.
// CHECK-LABEL: func.func @shift_sum
// CHECK:       neuron.tensor_scalar vector dst %{{.*}}[0:128, 0, [[1, 96]]], accumulate_dst %[[SUM:.*]][0:128, 0, [[1, 1]]], src %t[0:128, 0, [[1, 96]]], operand0 %f[0:128, 0, [[1, 1]]] {op0 = "subtract"}
// CHECK-NOT:   neuron.tensor_reduce
// CHECK:       neuron.dma_copy dma dst %{{.*}}, src %[[SUM]][0:128, 0, [[1, 1]]]
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @shift_sum(%x: memref<128x96xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) -> memref<128x1xf32, #mem<hbm>> {
    %out = neuron.alloc : memref<128x1xf32, #mem<hbm>>
    %t = neuron.alloc : memref<128x96xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 96]]], src %x[0, [[96, 128], [1, 96]]] {queue = 0 : i64} : memref<128x96xbf16, #mem<sbuf>>, memref<128x96xbf16, #mem<hbm>>
    %f = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %f[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %row = neuron.alloc : memref<128x96xf32, #mem<sbuf>>
    neuron.tensor_scalar gpsimd dst %row[0:128, 0, [[1, 96]]], src %t[0:128, 0, [[1, 96]]], operand0 %f[0:128, 0, [[1, 1]]] {op0 = "subtract"} : memref<128x96xf32, #mem<sbuf>>, memref<128x96xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %sum = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %sum[0:128, 0, [[1, 1]]], src %row[0:128, 0, [[1, 96]]] {op = "add"} : memref<128x1xf32, #mem<sbuf>>, memref<128x96xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[1, 128], [1, 1]]], src %sum[0:128, 0, [[1, 1]]] {queue = 2 : i64} : memref<128x1xf32, #mem<hbm>>, memref<128x1xf32, #mem<sbuf>>
    func.return %out : memref<128x1xf32, #mem<hbm>>
  }
}

// -----

// A two-step tensor_scalar ((x - s) * r) is no product ScalarE's copy computes: the sum of its result stays a
// reduce.
// CHECK-LABEL: func.func @shifted_sum
// CHECK:       neuron.tensor_scalar vector dst %[[ROW:.*]][0:128, 0, [[1, 96]]], src %{{.*}}, operand0 %{{.*}}, operand1 %{{.*}} {op0 = "subtract", op1 = "multiply"}
// CHECK:       neuron.tensor_reduce vector dst %{{.*}}, src %[[ROW]][0:128, 0, [[1, 96]]] {op = "add"}
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @shifted_sum(%x: memref<128x96xbf16, #mem<hbm>>, %s: memref<128x2xf32, #mem<hbm>>) -> memref<128x1xf32, #mem<hbm>> {
    %out = neuron.alloc : memref<128x1xf32, #mem<hbm>>
    %t = neuron.alloc : memref<128x96xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 96]]], src %x[0, [[96, 128], [1, 96]]] {queue = 0 : i64} : memref<128x96xbf16, #mem<sbuf>>, memref<128x96xbf16, #mem<hbm>>
    %mean = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %mean[0:128, 0, [[1, 1]]], src %s[0, [[2, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x2xf32, #mem<hbm>>
    %rstd = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %rstd[0:128, 0, [[1, 1]]], src %s[1, [[2, 128], [1, 1]]] {queue = 2 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x2xf32, #mem<hbm>>
    %row = neuron.alloc : memref<128x96xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %row[0:128, 0, [[1, 96]]], src %t[0:128, 0, [[1, 96]]], operand0 %mean[0:128, 0, [[1, 1]]], operand1 %rstd[0:128, 0, [[1, 1]]] {op0 = "subtract", op1 = "multiply"} : memref<128x96xf32, #mem<sbuf>>, memref<128x96xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %sum = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %sum[0:128, 0, [[1, 1]]], src %row[0:128, 0, [[1, 96]]] {op = "add"} : memref<128x1xf32, #mem<sbuf>>, memref<128x96xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[1, 128], [1, 1]]], src %sum[0:128, 0, [[1, 1]]] {queue = 3 : i64} : memref<128x1xf32, #mem<hbm>>, memref<128x1xf32, #mem<sbuf>>
    func.return %out : memref<128x1xf32, #mem<hbm>>
  }
}

// -----

// An evacuated tile stored and then inserted into a row (a matmul's output block that the next nest reads back
// as part of whole rows): the add writes the row's window, and the store reads the window.
// CHECK-LABEL: func.func @store_and_insert
// CHECK:       neuron.tensor_tensor vector dst %row[0:128, 64, [[1, 64]]], in0 %a[0:128, 0, [[1, 64]]], in1 %b[0:128, 0, [[1, 64]]] {op = "add"}
// CHECK-NEXT:  neuron.dma_copy dma dst %out[0, [[64, 128], [1, 64]]], src %row[0:128, 64, [[1, 64]]]
// CHECK-NOT:   neuron.tensor_copy
// CHECK:       neuron.dma_copy dma dst %out2
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @store_and_insert(%x: memref<128x64xbf16, #mem<hbm>>, %y: memref<128x64xbf16, #mem<hbm>>) -> (memref<128x64xbf16, #mem<hbm>>, memref<128x128xbf16, #mem<hbm>>) {
    %out = neuron.alloc : memref<128x64xbf16, #mem<hbm>>
    %out2 = neuron.alloc : memref<128x128xbf16, #mem<hbm>>
    %a = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %a[0:128, 0, [[1, 64]]], src %x[0, [[64, 128], [1, 64]]] {queue = 0 : i64} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<hbm>>
    %b = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %b[0:128, 0, [[1, 64]]], src %y[0, [[64, 128], [1, 64]]] {queue = 1 : i64} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<hbm>>
    %row = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    neuron.tensor_copy scalar dst %row[0:128, 0, [[1, 64]]], src %a[0:128, 0, [[1, 64]]] : memref<128x128xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
    %sum = neuron.alloc : memref<128x64xbf16, #mem<sbuf>>
    neuron.tensor_tensor vector dst %sum[0:128, 0, [[1, 64]]], in0 %a[0:128, 0, [[1, 64]]], in1 %b[0:128, 0, [[1, 64]]] {op = "add"} : memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[64, 128], [1, 64]]], src %sum[0:128, 0, [[1, 64]]] {queue = 2 : i64} : memref<128x64xbf16, #mem<hbm>>, memref<128x64xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %row[0:128, 64, [[1, 64]]], src %sum[0:128, 0, [[1, 64]]] : memref<128x128xbf16, #mem<sbuf>>, memref<128x64xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %out2[0, [[128, 128], [1, 128]]], src %row[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<128x128xbf16, #mem<hbm>>, memref<128x128xbf16, #mem<sbuf>>
    func.return %out, %out2 : memref<128x64xbf16, #mem<hbm>>, memref<128x128xbf16, #mem<hbm>>
  }
}

// -----

// A matmul's evacuation into fp32, then its scale (an fp8 product's per-tensor scales, rounded to bf16): the
// tensor_scalar reads the PSUM tile itself, and the copy and its fp32 tile are gone.
// CHECK-LABEL: func.func @scaled_evacuation
// CHECK:       %[[P:.*]] = neuron.alloc : memref<128x512xf32, #mem<psum>>
// CHECK:       neuron.nc_matmul
// CHECK-NOT:   neuron.tensor_copy
// CHECK-NOT:   memref<128x512xf32, #mem<sbuf>>
// CHECK:       neuron.tensor_scalar vector dst %{{.*}}[0:128, 0, [[1, 512]]], src %[[P]][0:128, 0, [[1, 512]]], operand0 %{{.*}} {op0 = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @scaled_evacuation(%a: memref<128x128xbf16, #mem<hbm>>, %b: memref<128x512xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) -> memref<128x512xbf16, #mem<hbm>> {
    %out = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    %sa = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %sa[0:128, 0, [[1, 128]]], src %a[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xbf16, #mem<sbuf>>, memref<128x128xbf16, #mem<hbm>>
    %sb = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %sb[0:128, 0, [[1, 512]]], src %b[0, [[512, 128], [1, 512]]] {queue = 1 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %p = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 512]]], stationary %sa[0:128, 0, [[1, 128]]], moving %sb[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    %e = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %e[0:128, 0, [[1, 512]]], src %p[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>
    %scale = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %scale[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 2 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %y = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %y[0:128, 0, [[1, 512]]], src %e[0:128, 0, [[1, 512]]], operand0 %scale[0:128, 0, [[1, 1]]] {op0 = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[512, 128], [1, 512]]], src %y[0:128, 0, [[1, 512]]] {queue = 3 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    func.return %out : memref<128x512xbf16, #mem<hbm>>
  }
}

// -----

// The same with another accumulator written between the two: reading the first tile later would hold both banks
// at once where the copy released one before the second matmul, so the pair stays.
// CHECK-LABEL: func.func @evacuation_before_psum_work
// CHECK:       neuron.tensor_copy vector dst %{{.*}}, src %{{.*}} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>
// CHECK:       neuron.nc_matmul
// CHECK:       neuron.tensor_scalar vector dst %{{.*}}, src %{{.*}}, operand0 %{{.*}} {op0 = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @evacuation_before_psum_work(%a: memref<128x128xbf16, #mem<hbm>>, %b: memref<128x512xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) -> (memref<128x512xbf16, #mem<hbm>>, memref<128x512xf32, #mem<hbm>>) {
    %out = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    %out2 = neuron.alloc : memref<128x512xf32, #mem<hbm>>
    %sa = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %sa[0:128, 0, [[1, 128]]], src %a[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xbf16, #mem<sbuf>>, memref<128x128xbf16, #mem<hbm>>
    %sb = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %sb[0:128, 0, [[1, 512]]], src %b[0, [[512, 128], [1, 512]]] {queue = 1 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %p = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 512]]], stationary %sa[0:128, 0, [[1, 128]]], moving %sb[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    %e = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %e[0:128, 0, [[1, 512]]], src %p[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>
    %q = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %q[0:128, 0, [[1, 512]]], stationary %sa[0:128, 0, [[1, 128]]], moving %sb[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    %f = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %f[0:128, 0, [[1, 512]]], src %q[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>
    neuron.dma_copy dma dst %out2[0, [[512, 128], [1, 512]]], src %f[0:128, 0, [[1, 512]]] {queue = 4 : i64} : memref<128x512xf32, #mem<hbm>>, memref<128x512xf32, #mem<sbuf>>
    %scale = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %scale[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 2 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %y = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %y[0:128, 0, [[1, 512]]], src %e[0:128, 0, [[1, 512]]], operand0 %scale[0:128, 0, [[1, 1]]] {op0 = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %out[0, [[512, 128], [1, 512]]], src %y[0:128, 0, [[1, 512]]] {queue = 3 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    func.return %out, %out2 : memref<128x512xbf16, #mem<hbm>>, memref<128x512xf32, #mem<hbm>>
  }
}
