// RUN: neuron-opt %s --split-input-file -p neuron-balance-engines | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-balance-engines --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS

// Work any of several engines can do goes where the block finishes earliest (lowering/neuron_balance_engines.py).
// SEMANTICS-COUNT-2: all outputs match

// A softmax row of 2048: VectorE reduces (1067 ns in bf16) and ScalarE exponentiates (1760 ns), so the final
// fp32 multiply (2133 ns on VectorE, 1832 ns on GpSimdE, 1707 ns on ScalarE) goes to GpSimdE.
// CHECK-LABEL: func.func @softmax
// CHECK:       neuron.tensor_reduce vector
// CHECK:       neuron.activation scalar
// CHECK:       neuron.activation scalar {{.*}} {func = "reciprocal"}
// CHECK:       neuron.tensor_scalar gpsimd dst %{{.*}}[0:128, 0, [[1, 2048]]]
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @softmax(%x: memref<128x2048xbf16, #mem<hbm>>) -> memref<128x2048xbf16, #mem<hbm>> {
    %0 = neuron.alloc : memref<128x2048xbf16, #mem<hbm>>
    %1 = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %1[0:128, 0, [[1, 2048]]], src %x[0, [[2048, 128], [1, 2048]]] {queue = 0 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %2 = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %2[0:128, 0, [[1, 1]]], src %1[0:128, 0, [[1, 2048]]] {op = "max", negate = true} : memref<128x1xf32, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>>
    %3 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    %4 = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.activation scalar dst %3[0:128, 0, [[1, 2048]]], accumulate_dst %4[0:128, 0, [[1, 1]]], src %1[0:128, 0, [[1, 2048]]], bias %2[0:128, 0, [[1, 1]]] {func = "exp"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %5 = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.activation scalar dst %5[0:128, 0, [[1, 1]]], src %4[0:128, 0, [[1, 1]]] {func = "reciprocal"} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %6 = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %6[0:128, 0, [[1, 2048]]], src %3[0:128, 0, [[1, 2048]]], operand0 %5[0:128, 0, [[1, 1]]] {op0 = "multiply"} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %0[0, [[2048, 128], [1, 2048]]], src %6[0:128, 0, [[1, 2048]]] {queue = 1 : i64} : memref<128x2048xbf16, #mem<hbm>>, memref<128x2048xbf16, #mem<sbuf>>
    func.return %0 : memref<128x2048xbf16, #mem<hbm>>
  }
}

// -----

// What stays on VectorE: a tensor_tensor reading PSUM (GpSimdE cannot) and integer work (the converter chose
// VectorE's rounding or GpSimdE's exact lanes on purpose). That leaves VectorE 1600 ns of work, so the two
// 16-bit tensor_scalars (133 ns each there) still finish earlier elsewhere: one on GpSimdE, one on ScalarE.
// CHECK-LABEL: func.func @stays
// CHECK:       neuron.tensor_tensor vector
// CHECK:       neuron.tensor_copy vector
// CHECK:       neuron.tensor_scalar gpsimd
// CHECK:       neuron.tensor_scalar scalar
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @stays(%x: memref<128x512xbf16, #mem<hbm>>, %k: memref<128x512xi32, #mem<hbm>>) -> (memref<128x512xf32, #mem<hbm>>, memref<128x512xi32, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>) {
    %o1 = neuron.alloc : memref<128x512xf32, #mem<hbm>>
    %o2 = neuron.alloc : memref<128x512xi32, #mem<hbm>>
    %o3 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %p = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.activation scalar dst %p[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]] {func = "exp"} : memref<128x512xf32, #mem<psum>>, memref<128x512xbf16, #mem<sbuf>>
    %s = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s[0:128, 0, [[1, 512]]], in0 %p[0:128, 0, [[1, 512]]], in1 %t[0:128, 0, [[1, 512]]] {op = "add"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %o1[0, [[512, 128], [1, 512]]], src %s[0:128, 0, [[1, 512]]] {queue = 1 : i64} : memref<128x512xf32, #mem<hbm>>, memref<128x512xf32, #mem<sbuf>>
    %i = neuron.alloc : memref<128x512xi32, #mem<sbuf>>
    neuron.dma_copy dma dst %i[0:128, 0, [[1, 512]]], src %k[0, [[512, 128], [1, 512]]] {queue = 2 : i64} : memref<128x512xi32, #mem<sbuf>>, memref<128x512xi32, #mem<hbm>>
    %j = neuron.alloc : memref<128x512xi32, #mem<sbuf>>
    neuron.tensor_copy vector dst %j[0:128, 0, [[1, 512]]], src %i[0:128, 0, [[1, 512]]] : memref<128x512xi32, #mem<sbuf>>, memref<128x512xi32, #mem<sbuf>>
    neuron.dma_copy dma dst %o2[0, [[512, 128], [1, 512]]], src %j[0:128, 0, [[1, 512]]] {queue = 3 : i64} : memref<128x512xi32, #mem<hbm>>, memref<128x512xi32, #mem<sbuf>>
    %a = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %a[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    %b = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %b[0:128, 0, [[1, 512]]], src %a[0:128, 0, [[1, 512]]] {op0 = "add", scalar0 = 1.000000e+00 : f64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %o3[0, [[512, 128], [1, 512]]], src %b[0:128, 0, [[1, 512]]] {queue = 4 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    func.return %o1, %o2, %o3 : memref<128x512xf32, #mem<hbm>>, memref<128x512xi32, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>
  }
}
