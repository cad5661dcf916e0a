// RUN: neuron-opt %s --split-input-file -p neuron-balance-engines | filecheck %s
// RUN: neuron-opt %s --split-input-file -p neuron-balance-engines --check-semantics -o /dev/null 2>&1 | filecheck %s --check-prefix=SEMANTICS
// RUN: neuron-opt %s --split-input-file -p neuron-balance-engines,neuron-allocate-memory | filecheck %s --check-prefix=ALLOCATED

// Work any of several engines can do goes where the block finishes earliest (lowering/neuron_balance_engines.py).
// SEMANTICS-COUNT-15: all outputs match

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
// CHECK:       neuron.tensor_tensor
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


// -----

// A matmul block's four PSUM evacuations (fp32 -> bf16, 512 columns: 457 ns on VectorE, 366 ns on ScalarE) where
// TensorE is the busiest engine (64 matmuls, 11.7 us; the converter's VectorE work, an fp32 multiply of 7.3 us
// and the copies of 1.8 us, is less): a bank freed late stalls TensorE, so the copies split into halves, second and fourth placed first (ScalarE, the
// cheaper), first and third on VectorE, and two banks drain at once.
// CHECK-LABEL: func.func @tensor_bound
// CHECK-COUNT-64: neuron.nc_matmul tensor
// CHECK-NEXT:  neuron.alloc
// CHECK-NEXT:  neuron.tensor_copy vector
// CHECK:       neuron.tensor_copy scalar
// CHECK:       neuron.tensor_copy vector
// CHECK:       neuron.tensor_copy scalar
// CHECK:       neuron.tensor_tensor
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @tensor_bound(%a: memref<128x2048xbf16, #mem<hbm>>, %b: memref<128x2048xbf16, #mem<hbm>>, %x: memref<128x4096xf32, #mem<hbm>>) -> (memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x4096xf32, #mem<hbm>>) {
    %s = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %s[0:128, 0, [[1, 2048]]], src %a[0, [[2048, 128], [1, 2048]]] {queue = 0 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %m = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %m[0:128, 0, [[1, 2048]]], src %b[0, [[2048, 128], [1, 2048]]] {queue = 1 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %p0 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p1 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p2 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p3 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    %e0 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e0[0:128, 0, [[1, 512]]], src %p0[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o0 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o0[0, [[512, 128], [1, 512]]], src %e0[0:128, 0, [[1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e1 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e1[0:128, 0, [[1, 512]]], src %p1[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o1 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o1[0, [[512, 128], [1, 512]]], src %e1[0:128, 0, [[1, 512]]] {queue = 3 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e2 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e2[0:128, 0, [[1, 512]]], src %p2[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o2 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o2[0, [[512, 128], [1, 512]]], src %e2[0:128, 0, [[1, 512]]] {queue = 4 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e3 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e3[0:128, 0, [[1, 512]]], src %p3[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o3 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o3[0, [[512, 128], [1, 512]]], src %e3[0:128, 0, [[1, 512]]] {queue = 5 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %t = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 4096]]], src %x[0, [[4096, 128], [1, 4096]]] {queue = 6 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<hbm>>
    %u = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %u[0:128, 0, [[1, 4096]]], in0 %t[0:128, 0, [[1, 4096]]], in1 %t[0:128, 0, [[1, 4096]]] {op = "multiply"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    %y = neuron.alloc : memref<128x4096xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[0, [[4096, 128], [1, 4096]]], src %u[0:128, 0, [[1, 4096]]] {queue = 7 : i64} : memref<128x4096xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    func.return %o0, %o1, %o2, %o3, %y : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x4096xf32, #mem<hbm>>
  }
}

// -----

// The same block with each evacuation scaling its tile as it leaves PSUM (a tensor_scalar reading the PSUM tile:
// an fp8 product's per-tensor scales, folded by neuron-fuse-instructions): such a pass releases a bank as a copy
// does, so the four split into halves over VectorE and ScalarE like the copies instead of moving together.
// CHECK-LABEL: func.func @tensor_bound_scaled
// CHECK-COUNT-64: neuron.nc_matmul tensor
// CHECK-NEXT:  neuron.alloc
// CHECK-NEXT:  neuron.tensor_scalar vector
// CHECK:       neuron.tensor_scalar scalar
// CHECK:       neuron.tensor_scalar vector
// CHECK:       neuron.tensor_scalar scalar
// CHECK:       neuron.tensor_tensor
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @tensor_bound_scaled(%a: memref<128x2048xbf16, #mem<hbm>>, %b: memref<128x2048xbf16, #mem<hbm>>, %x: memref<128x4096xf32, #mem<hbm>>) -> (memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x4096xf32, #mem<hbm>>) {
    %s = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %s[0:128, 0, [[1, 2048]]], src %a[0, [[2048, 128], [1, 2048]]] {queue = 0 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %m = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %m[0:128, 0, [[1, 2048]]], src %b[0, [[2048, 128], [1, 2048]]] {queue = 1 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %p0 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p1 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p2 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p3 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] {accumulate = true} : memref<128x512xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    %e0 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e0[0:128, 0, [[1, 512]]], src %p0[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o0 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o0[0, [[512, 128], [1, 512]]], src %e0[0:128, 0, [[1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e1 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e1[0:128, 0, [[1, 512]]], src %p1[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o1 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o1[0, [[512, 128], [1, 512]]], src %e1[0:128, 0, [[1, 512]]] {queue = 3 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e2 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e2[0:128, 0, [[1, 512]]], src %p2[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o2 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o2[0, [[512, 128], [1, 512]]], src %e2[0:128, 0, [[1, 512]]] {queue = 4 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e3 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e3[0:128, 0, [[1, 512]]], src %p3[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o3 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o3[0, [[512, 128], [1, 512]]], src %e3[0:128, 0, [[1, 512]]] {queue = 5 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %t = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 4096]]], src %x[0, [[4096, 128], [1, 4096]]] {queue = 6 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<hbm>>
    %u = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %u[0:128, 0, [[1, 4096]]], in0 %t[0:128, 0, [[1, 4096]]], in1 %t[0:128, 0, [[1, 4096]]] {op = "multiply"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    %y = neuron.alloc : memref<128x4096xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[0, [[4096, 128], [1, 4096]]], src %u[0:128, 0, [[1, 4096]]] {queue = 7 : i64} : memref<128x4096xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    func.return %o0, %o1, %o2, %o3, %y : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x4096xf32, #mem<hbm>>
  }
}

// -----

// The same with accumulators of half a bank ([128, 256], as attention's scores are): such passes are steps of
// chains rather than an output block's release of its banks, so the four move together, as copies of one
// instruction do (split, attention's made a Llama layer's forward slower).
// CHECK-LABEL: func.func @tensor_bound_half_banks
// CHECK-COUNT-4: neuron.tensor_scalar scalar dst %e
// CHECK:       neuron.tensor_tensor
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @tensor_bound_half_banks(%a: memref<128x2048xbf16, #mem<hbm>>, %b: memref<128x2048xbf16, #mem<hbm>>, %x: memref<128x1024xf32, #mem<hbm>>) -> (memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<hbm>>, memref<128x1024xf32, #mem<hbm>>) {
    %s = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %s[0:128, 0, [[1, 2048]]], src %a[0, [[2048, 128], [1, 2048]]] {queue = 0 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %m = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %m[0:128, 0, [[1, 2048]]], src %b[0, [[2048, 128], [1, 2048]]] {queue = 1 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %p0 = neuron.alloc : memref<128x256xf32, #mem<psum>>
    %p1 = neuron.alloc : memref<128x256xf32, #mem<psum>>
    %p2 = neuron.alloc : memref<128x256xf32, #mem<psum>>
    %p3 = neuron.alloc : memref<128x256xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 128, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 256, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 384, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 512, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 640, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 768, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 896, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1024, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1152, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1280, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1408, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1536, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1664, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1792, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 256]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 0, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 256]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 512, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 256]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 1024, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 256]]], stationary %s[0:128, 1920, [[1, 128]]], moving %m[0:128, 1536, [[1, 256]]] {accumulate = true} : memref<128x256xf32, #mem<psum>>, memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    %e0 = neuron.alloc : memref<128x256xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e0[0:128, 0, [[1, 256]]], src %p0[0:128, 0, [[1, 256]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x256xbf16, #mem<sbuf>>, memref<128x256xf32, #mem<psum>> loc("model.py":7:0)
    %o0 = neuron.alloc : memref<128x256xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o0[0, [[256, 128], [1, 256]]], src %e0[0:128, 0, [[1, 256]]] {queue = 2 : i64} : memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<sbuf>>
    %e1 = neuron.alloc : memref<128x256xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e1[0:128, 0, [[1, 256]]], src %p1[0:128, 0, [[1, 256]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x256xbf16, #mem<sbuf>>, memref<128x256xf32, #mem<psum>> loc("model.py":7:0)
    %o1 = neuron.alloc : memref<128x256xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o1[0, [[256, 128], [1, 256]]], src %e1[0:128, 0, [[1, 256]]] {queue = 3 : i64} : memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<sbuf>>
    %e2 = neuron.alloc : memref<128x256xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e2[0:128, 0, [[1, 256]]], src %p2[0:128, 0, [[1, 256]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x256xbf16, #mem<sbuf>>, memref<128x256xf32, #mem<psum>> loc("model.py":7:0)
    %o2 = neuron.alloc : memref<128x256xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o2[0, [[256, 128], [1, 256]]], src %e2[0:128, 0, [[1, 256]]] {queue = 4 : i64} : memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<sbuf>>
    %e3 = neuron.alloc : memref<128x256xbf16, #mem<sbuf>>
    neuron.tensor_scalar vector dst %e3[0:128, 0, [[1, 256]]], src %p3[0:128, 0, [[1, 256]]] {op0 = "multiply", scalar0 = 2.000000e+00 : f64} : memref<128x256xbf16, #mem<sbuf>>, memref<128x256xf32, #mem<psum>> loc("model.py":7:0)
    %o3 = neuron.alloc : memref<128x256xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o3[0, [[256, 128], [1, 256]]], src %e3[0:128, 0, [[1, 256]]] {queue = 5 : i64} : memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<sbuf>>
    %t = neuron.alloc : memref<128x1024xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 1024]]], src %x[0, [[1024, 128], [1, 1024]]] {queue = 6 : i64} : memref<128x1024xf32, #mem<sbuf>>, memref<128x1024xf32, #mem<hbm>>
    %u = neuron.alloc : memref<128x1024xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %u[0:128, 0, [[1, 1024]]], in0 %t[0:128, 0, [[1, 1024]]], in1 %t[0:128, 0, [[1, 1024]]] {op = "multiply"} : memref<128x1024xf32, #mem<sbuf>>, memref<128x1024xf32, #mem<sbuf>>, memref<128x1024xf32, #mem<sbuf>>
    %y = neuron.alloc : memref<128x1024xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[0, [[1024, 128], [1, 1024]]], src %u[0:128, 0, [[1, 1024]]] {queue = 7 : i64} : memref<128x1024xf32, #mem<hbm>>, memref<128x1024xf32, #mem<sbuf>>
    func.return %o0, %o1, %o2, %o3, %y : memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<hbm>>, memref<128x256xbf16, #mem<hbm>>, memref<128x1024xf32, #mem<hbm>>
  }
}


// -----

// The same block where TensorE is not the busiest engine (4 matmuls, 0.7 us, against VectorE's 7.3 us multiply):
// the evacuations, copies of one instruction, move together, to ScalarE.
// CHECK-LABEL: func.func @vector_bound
// CHECK-COUNT-4: neuron.tensor_copy scalar
// CHECK-NOT:   neuron.tensor_copy vector
// CHECK:       neuron.tensor_tensor
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @vector_bound(%a: memref<128x128xbf16, #mem<hbm>>, %b: memref<128x2048xbf16, #mem<hbm>>, %x: memref<128x4096xf32, #mem<hbm>>) -> (memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x4096xf32, #mem<hbm>>) {
    %s = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %s[0:128, 0, [[1, 128]]], src %a[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xbf16, #mem<sbuf>>, memref<128x128xbf16, #mem<hbm>>
    %m = neuron.alloc : memref<128x2048xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %m[0:128, 0, [[1, 2048]]], src %b[0, [[2048, 128], [1, 2048]]] {queue = 1 : i64} : memref<128x2048xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
    %p0 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p1 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p2 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    %p3 = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 512, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1024, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 512]]], stationary %s[0:128, 0, [[1, 128]]], moving %m[0:128, 1536, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<sbuf>> loc("model.py":7:0)
    %e0 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e0[0:128, 0, [[1, 512]]], src %p0[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o0 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o0[0, [[512, 128], [1, 512]]], src %e0[0:128, 0, [[1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e1 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e1[0:128, 0, [[1, 512]]], src %p1[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o1 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o1[0, [[512, 128], [1, 512]]], src %e1[0:128, 0, [[1, 512]]] {queue = 3 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e2 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e2[0:128, 0, [[1, 512]]], src %p2[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o2 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o2[0, [[512, 128], [1, 512]]], src %e2[0:128, 0, [[1, 512]]] {queue = 4 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %e3 = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %e3[0:128, 0, [[1, 512]]], src %p3[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>> loc("model.py":7:0)
    %o3 = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    neuron.dma_copy dma dst %o3[0, [[512, 128], [1, 512]]], src %e3[0:128, 0, [[1, 512]]] {queue = 5 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %t = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 4096]]], src %x[0, [[4096, 128], [1, 4096]]] {queue = 6 : i64} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<hbm>>
    %u = neuron.alloc : memref<128x4096xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %u[0:128, 0, [[1, 4096]]], in0 %t[0:128, 0, [[1, 4096]]], in1 %t[0:128, 0, [[1, 4096]]] {op = "multiply"} : memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>, memref<128x4096xf32, #mem<sbuf>>
    %y = neuron.alloc : memref<128x4096xf32, #mem<hbm>>
    neuron.dma_copy dma dst %y[0, [[4096, 128], [1, 4096]]], src %u[0:128, 0, [[1, 4096]]] {queue = 7 : i64} : memref<128x4096xf32, #mem<hbm>>, memref<128x4096xf32, #mem<sbuf>>
    func.return %o0, %o1, %o2, %o3, %y : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<hbm>>, memref<128x4096xf32, #mem<hbm>>
  }
}

// -----

// (x - s) * p with p in PSUM: the tensor_tensor stays on VectorE (GpSimdE cannot read PSUM), so the
// tensor_scalar feeding it an fp32 tile merges into it: one scalar_tensor_tensor, and the fp32 tile is gone.
// CHECK-LABEL: func.func @merged_pair
// CHECK-NOT:   neuron.tensor_scalar
// CHECK-NOT:   memref<128x512xf32, #mem<sbuf>>
// CHECK:       neuron.scalar_tensor_tensor vector dst %[[R:.*]][0:128, 0, [[1, 512]]], src %[[T:.*]][0:128, 0, [[1, 512]]], in1 %[[P:.*]][0:128, 0, [[1, 512]]], operand0 %[[C:.*]][0:128, 0, [[1, 1]]] {op0 = "subtract", op1 = "multiply"}
// CHECK-NOT:   neuron.tensor_tensor
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @merged_pair(%x: memref<128x512xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) -> memref<128x512xbf16, #mem<hbm>> {
    %o = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %c = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %c[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %p = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.tensor_copy vector dst %p[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x512xbf16, #mem<sbuf>>
    %d = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %d[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]], operand0 %c[0:128, 0, [[1, 1]]] {op0 = "subtract"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %r = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_tensor vector dst %r[0:128, 0, [[1, 512]]], in0 %d[0:128, 0, [[1, 512]]], in1 %p[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>
    neuron.dma_copy dma dst %o[0, [[512, 128], [1, 512]]], src %r[0:128, 0, [[1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    func.return %o : memref<128x512xbf16, #mem<hbm>>
  }
}

// -----

// The same pair with the tensor's operand first and the result copied into the second row of a group tile:
// the merged instruction reverses its second operator (p - (...)) and writes the window itself.
// CHECK-LABEL: func.func @merged_into_window
// CHECK:       %[[G:.*]] = neuron.alloc : memref<128x2x512xbf16, #mem<sbuf>>
// CHECK:       neuron.scalar_tensor_tensor vector dst %[[G]][0:128, 512, [[1, 512]]], src %{{.*}}, in1 %{{.*}}, operand0 %{{.*}} {op0 = "multiply", op1 = "subtract", reverse1 = true}
// CHECK-NOT:   neuron.tensor_copy {{.*}} dst %[[G]]
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @merged_into_window(%x: memref<128x512xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) -> memref<128x2x512xbf16, #mem<hbm>> {
    %o = neuron.alloc : memref<128x2x512xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %c = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %c[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %g = neuron.alloc : memref<128x2x512xbf16, #mem<sbuf>>
    neuron.tensor_copy vector dst %g[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]] : memref<128x2x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    %p = neuron.alloc : memref<128x512xf32, #mem<psum>>
    neuron.tensor_copy vector dst %p[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x512xbf16, #mem<sbuf>>
    %d = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %d[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]], operand0 %c[0:128, 0, [[1, 1]]] {op0 = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %r = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_tensor vector dst %r[0:128, 0, [[1, 512]]], in0 %p[0:128, 0, [[1, 512]]], in1 %d[0:128, 0, [[1, 512]]] {op = "subtract"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>, memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %g[0:128, 512, [[1, 512]]], src %r[0:128, 0, [[1, 512]]] : memref<128x2x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %o[0, [[1024, 128], [1, 1024]]], src %g[0:128, 0, [[1, 1024]]] {queue = 2 : i64} : memref<128x2x512xbf16, #mem<hbm>>, memref<128x2x512xbf16, #mem<sbuf>>
    func.return %o : memref<128x2x512xbf16, #mem<hbm>>
  }
}

// -----

// A pair the assignment spreads stays apart: with both inputs in SBUF the fp32 tensor_tensor costs 1067 ns on
// VectorE against 552 ns on GpSimdE, and one VectorE pass of both steps, (x + s) * t, would cost the 1067 ns.
// CHECK-LABEL: func.func @pair_apart
// CHECK:       neuron.tensor_scalar
// CHECK:       neuron.tensor_tensor gpsimd
// CHECK-NOT:   neuron.scalar_tensor_tensor
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @pair_apart(%x: memref<128x512xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>) -> memref<128x512xbf16, #mem<hbm>> {
    %o = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %c = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %c[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %d = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %d[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]], operand0 %c[0:128, 0, [[1, 1]]] {op0 = "add"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %r = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_tensor vector dst %r[0:128, 0, [[1, 512]]], in0 %d[0:128, 0, [[1, 512]]], in1 %t[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %o[0, [[512, 128], [1, 512]]], src %r[0:128, 0, [[1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    func.return %o : memref<128x512xbf16, #mem<hbm>>
  }
}

// -----

// (x - s) * t with x and t bf16 is one VectorE pass at one element per cycle (533 ns), less than the
// tensor_scalar and the tensor_tensor cost on their cheapest engines together (ScalarE 427 ns, GpSimdE 552 ns).
// Beside four fp32 scalings (427 ns at best, on ScalarE), the block's bound is a third of all the work, which
// merging lowers (918 -> 769 ns): the pair merges before the assignment, which then weighs the one instruction.
// Costed apart, its tensor_tensor would go to GpSimdE and the pair would stay two passes.
// CHECK-LABEL: func.func @fast_pair_merged
// CHECK-NOT:   neuron.tensor_scalar
// CHECK:       neuron.scalar_tensor_tensor vector dst %{{.*}}, src %[[T:.*]][0:128, 0, [[1, 512]]], in1 %[[T]][0:128, 0, [[1, 512]]], operand0 %{{.*}} {op0 = "subtract", op1 = "multiply"}
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @fast_pair_merged(%x: memref<128x512xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>, %f: memref<128x512xf32, #mem<hbm>>) -> (memref<128x512xbf16, #mem<hbm>>, memref<128x1xf32, #mem<hbm>>) {
    %o = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %c = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %c[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %u = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %u[0:128, 0, [[1, 512]]], src %f[0, [[512, 128], [1, 512]]] {queue = 3 : i64} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<hbm>>
    %d = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %d[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]], operand0 %c[0:128, 0, [[1, 1]]] {op0 = "subtract"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %r = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_tensor vector dst %r[0:128, 0, [[1, 512]]], in0 %d[0:128, 0, [[1, 512]]], in1 %t[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %o[0, [[512, 128], [1, 512]]], src %r[0:128, 0, [[1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %p0 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %p0[0:128, 0, [[1, 512]]], src %u[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 2.0 : f64} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %p1 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %p1[0:128, 0, [[1, 512]]], src %u[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 3.0 : f64} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %p2 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %p2[0:128, 0, [[1, 512]]], src %u[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 4.0 : f64} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %p3 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %p3[0:128, 0, [[1, 512]]], src %u[0:128, 0, [[1, 512]]] {op0 = "multiply", scalar0 = 5.0 : f64} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %q = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %q[0:128, 0, [[1, 1]]], src %p3[0:128, 0, [[1, 8]]] {op = "add"} : memref<128x1xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %qo = neuron.alloc : memref<128x1xf32, #mem<hbm>>
    neuron.dma_copy dma dst %qo[0, [[1, 128], [1, 1]]], src %q[0:128, 0, [[1, 1]]] {queue = 4 : i64} : memref<128x1xf32, #mem<hbm>>, memref<128x1xf32, #mem<sbuf>>
    func.return %o, %qo : memref<128x512xbf16, #mem<hbm>>, memref<128x1xf32, #mem<hbm>>
  }
}

// -----

// The same pair beside a row sum only VectorE runs (533 ns of its own, which bounds the block): merged, the pair
// would be VectorE's too (1067 ns), so it stays apart for the assignment to spread.
// CHECK-LABEL: func.func @fast_pair_beside_vector_work
// CHECK:       neuron.tensor_scalar
// CHECK:       neuron.tensor_tensor
// CHECK-NOT:   neuron.scalar_tensor_tensor
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @fast_pair_beside_vector_work(%x: memref<128x512xbf16, #mem<hbm>>, %s: memref<128x1xf32, #mem<hbm>>, %f: memref<128x512xf32, #mem<hbm>>) -> (memref<128x512xbf16, #mem<hbm>>, memref<128x1xf32, #mem<hbm>>) {
    %o = neuron.alloc : memref<128x512xbf16, #mem<hbm>>
    %t = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %t[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<hbm>>
    %c = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %c[0:128, 0, [[1, 1]]], src %s[0, [[1, 128], [1, 1]]] {queue = 1 : i64} : memref<128x1xf32, #mem<sbuf>>, memref<128x1xf32, #mem<hbm>>
    %u = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %u[0:128, 0, [[1, 512]]], src %f[0, [[512, 128], [1, 512]]] {queue = 3 : i64} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<hbm>>
    %d = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %d[0:128, 0, [[1, 512]]], src %t[0:128, 0, [[1, 512]]], operand0 %c[0:128, 0, [[1, 1]]] {op0 = "subtract"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x1xf32, #mem<sbuf>>
    %r = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
    neuron.tensor_tensor vector dst %r[0:128, 0, [[1, 512]]], in0 %d[0:128, 0, [[1, 512]]], in1 %t[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %o[0, [[512, 128], [1, 512]]], src %r[0:128, 0, [[1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<hbm>>, memref<128x512xbf16, #mem<sbuf>>
    %q = neuron.alloc : memref<128x1xf32, #mem<sbuf>>
    neuron.tensor_reduce vector dst %q[0:128, 0, [[1, 1]]], src %u[0:128, 0, [[1, 512]]] {op = "add"} : memref<128x1xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %qo = neuron.alloc : memref<128x1xf32, #mem<hbm>>
    neuron.dma_copy dma dst %qo[0, [[1, 128], [1, 1]]], src %q[0:128, 0, [[1, 1]]] {queue = 4 : i64} : memref<128x1xf32, #mem<hbm>>, memref<128x1xf32, #mem<sbuf>>
    func.return %o, %qo : memref<128x512xbf16, #mem<hbm>>, memref<128x1xf32, #mem<hbm>>
  }
}

// -----

// Four independent chains of three fp32 multiplies (unrolled copies, one tile each): 1067 ns a copy on VectorE,
// 547 ns on GpSimdE. Copies kept together would leave each step of all four chains to one engine, the next step
// waiting on it; placed one by one where each finishes soonest, copies of one instruction go to both engines
// and the chains overlap (simulated span of the block shorter by more than 3%).
// CHECK-LABEL: func.func @independent_chains
// CHECK-COUNT-4: neuron.dma_copy
// CHECK:       neuron.tensor_tensor gpsimd dst %s0[
// CHECK:       neuron.tensor_tensor vector dst %s0_1
// CHECK:       neuron.tensor_tensor gpsimd dst %s0_2
// CHECK:       neuron.tensor_tensor gpsimd dst %s0_3
// CHECK:       neuron.tensor_tensor vector dst %s1[
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @independent_chains(%x: memref<4x128x512xf32, #mem<hbm>>) -> memref<4x128x512xf32, #mem<hbm>> {
    %o = neuron.alloc : memref<4x128x512xf32, #mem<hbm>>
    %x0 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %x0[0:128, 0, [[1, 512]]], src %x[0, [[512, 128], [1, 512]]] {queue = 0 : i64} : memref<128x512xf32, #mem<sbuf>>, memref<4x128x512xf32, #mem<hbm>>
    %x1 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %x1[0:128, 0, [[1, 512]]], src %x[65536, [[512, 128], [1, 512]]] {queue = 1 : i64} : memref<128x512xf32, #mem<sbuf>>, memref<4x128x512xf32, #mem<hbm>>
    %x2 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %x2[0:128, 0, [[1, 512]]], src %x[131072, [[512, 128], [1, 512]]] {queue = 2 : i64} : memref<128x512xf32, #mem<sbuf>>, memref<4x128x512xf32, #mem<hbm>>
    %x3 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %x3[0:128, 0, [[1, 512]]], src %x[196608, [[512, 128], [1, 512]]] {queue = 3 : i64} : memref<128x512xf32, #mem<sbuf>>, memref<4x128x512xf32, #mem<hbm>>
    %s0_0 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s0_0[0:128, 0, [[1, 512]]], in0 %x0[0:128, 0, [[1, 512]]], in1 %x0[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s0_1 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s0_1[0:128, 0, [[1, 512]]], in0 %x1[0:128, 0, [[1, 512]]], in1 %x1[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s0_2 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s0_2[0:128, 0, [[1, 512]]], in0 %x2[0:128, 0, [[1, 512]]], in1 %x2[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s0_3 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s0_3[0:128, 0, [[1, 512]]], in0 %x3[0:128, 0, [[1, 512]]], in1 %x3[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s1_0 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s1_0[0:128, 0, [[1, 512]]], in0 %s0_0[0:128, 0, [[1, 512]]], in1 %x0[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s1_1 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s1_1[0:128, 0, [[1, 512]]], in0 %s0_1[0:128, 0, [[1, 512]]], in1 %x1[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s1_2 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s1_2[0:128, 0, [[1, 512]]], in0 %s0_2[0:128, 0, [[1, 512]]], in1 %x2[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s1_3 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s1_3[0:128, 0, [[1, 512]]], in0 %s0_3[0:128, 0, [[1, 512]]], in1 %x3[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s2_0 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s2_0[0:128, 0, [[1, 512]]], in0 %s1_0[0:128, 0, [[1, 512]]], in1 %x0[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s2_1 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s2_1[0:128, 0, [[1, 512]]], in0 %s1_1[0:128, 0, [[1, 512]]], in1 %x1[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s2_2 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s2_2[0:128, 0, [[1, 512]]], in0 %s1_2[0:128, 0, [[1, 512]]], in1 %x2[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    %s2_3 = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
    neuron.tensor_tensor vector dst %s2_3[0:128, 0, [[1, 512]]], in0 %s1_3[0:128, 0, [[1, 512]]], in1 %x3[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[0, [[512, 128], [1, 512]]], src %s2_0[0:128, 0, [[1, 512]]] {queue = 4 : i64} : memref<4x128x512xf32, #mem<hbm>>, memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[65536, [[512, 128], [1, 512]]], src %s2_1[0:128, 0, [[1, 512]]] {queue = 5 : i64} : memref<4x128x512xf32, #mem<hbm>>, memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[131072, [[512, 128], [1, 512]]], src %s2_2[0:128, 0, [[1, 512]]] {queue = 6 : i64} : memref<4x128x512xf32, #mem<hbm>>, memref<128x512xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[196608, [[512, 128], [1, 512]]], src %s2_3[0:128, 0, [[1, 512]]] {queue = 7 : i64} : memref<4x128x512xf32, #mem<hbm>>, memref<128x512xf32, #mem<sbuf>>
    func.return %o : memref<4x128x512xf32, #mem<hbm>>
  }
}

// -----

// A loop body whose matmul result leaves PSUM before a chain of ScalarE functions that does not need it: with
// the evacuation first in ScalarE's queue, the next trip's chain would wait behind it, and it behind this trip's
// last reader of the same tile. Moved down to just before its first reader, the chain of the next trip starts
// while this one's products finish (the simulated span of two trips is shorter by more than 1%).
// CHECK-LABEL: func.func @sink
// CHECK:       neuron.nc_matmul
// CHECK:       neuron.dma_copy
// CHECK:       neuron.activation scalar {{.*}} {func = "tanh"}
// CHECK:       neuron.activation scalar {{.*}} {func = "sigmoid"}
// CHECK:       neuron.activation scalar {{.*}} {func = "exp"}
// CHECK-NEXT:  neuron.alloc
// CHECK-NEXT:  neuron.tensor_copy scalar dst %g
// CHECK-NEXT:  neuron.tensor_tensor {{.*}} in0 %g
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @sink(%w: memref<128x128xbf16, #mem<hbm>>, %m: memref<128x2048xbf16, #mem<hbm>>, %x: memref<128x2048xbf16, #mem<hbm>>) -> memref<128x2048xf32, #mem<hbm>> {
    %c0 = arith.constant 0 : index
    %c512 = arith.constant 512 : index
    %c2048 = arith.constant 2048 : index
    %o = neuron.alloc : memref<128x2048xf32, #mem<hbm>>
    %ws = neuron.alloc : memref<128x128xbf16, #mem<sbuf>>
    neuron.dma_copy dma dst %ws[0:128, 0, [[1, 128]]], src %w[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xbf16, #mem<sbuf>>, memref<128x128xbf16, #mem<hbm>>
    scf.for %i = %c0 to %c2048 step %c512 {
      %ms = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
      neuron.dma_copy dma dst %ms[0:128, 0, [[1, 512]]], src %m[%i + 0, [[2048, 128], [1, 512]]] {queue = 1 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
      %p = neuron.alloc : memref<128x512xf32, #mem<psum>>
      neuron.nc_matmul tensor dst %p[0:128, 0, [[1, 512]]], stationary %ws[0:128, 0, [[1, 128]]], moving %ms[0:128, 0, [[1, 512]]] : memref<128x512xf32, #mem<psum>>, memref<128x128xbf16, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
      %g = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
      neuron.tensor_copy scalar dst %g[0:128, 0, [[1, 512]]], src %p[0:128, 0, [[1, 512]]] : memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<psum>>
      %xs = neuron.alloc : memref<128x512xbf16, #mem<sbuf>>
      neuron.dma_copy dma dst %xs[0:128, 0, [[1, 512]]], src %x[%i + 0, [[2048, 128], [1, 512]]] {queue = 2 : i64} : memref<128x512xbf16, #mem<sbuf>>, memref<128x2048xbf16, #mem<hbm>>
      %a = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
      neuron.activation scalar dst %a[0:128, 0, [[1, 512]]], src %xs[0:128, 0, [[1, 512]]] {func = "tanh"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>
      %b = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
      neuron.activation scalar dst %b[0:128, 0, [[1, 512]]], src %a[0:128, 0, [[1, 512]]] {func = "sigmoid"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
      %c = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
      neuron.activation scalar dst %c[0:128, 0, [[1, 512]]], src %b[0:128, 0, [[1, 512]]] {func = "exp"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
      %d = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
      neuron.tensor_tensor vector dst %d[0:128, 0, [[1, 512]]], in0 %g[0:128, 0, [[1, 512]]], in1 %c[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xbf16, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
      %e = neuron.alloc : memref<128x512xf32, #mem<sbuf>>
      neuron.tensor_tensor vector dst %e[0:128, 0, [[1, 512]]], in0 %d[0:128, 0, [[1, 512]]], in1 %c[0:128, 0, [[1, 512]]] {op = "multiply"} : memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>, memref<128x512xf32, #mem<sbuf>>
      neuron.dma_copy dma dst %o[%i + 0, [[2048, 128], [1, 512]]], src %e[0:128, 0, [[1, 512]]] {queue = 3 : i64} : memref<128x2048xf32, #mem<hbm>>, memref<128x512xf32, #mem<sbuf>>
    }
    func.return %o : memref<128x2048xf32, #mem<hbm>>
  }
}

// -----

// Nine accumulators of the function's body, each copied out of PSUM before two chains the copies' engines run
// (pinned there: `power`, `tanh`), their tiles first read by stores after the chains. Sunk to those stores, the
// copies would let the chains start at once, but all nine tiles would then live at once: nine banks of trn2's
// eight. The copies move as far as PSUM holds their tiles (eight), so the function still allocates.
// CHECK-LABEL: func.func @sink_within_psum
// CHECK-COUNT-7: neuron.nc_matmul
// CHECK-NOT:     neuron.tensor_copy
// CHECK:         neuron.nc_matmul tensor dst %p7
// CHECK-NEXT:    neuron.alloc
// CHECK-NEXT:    neuron.tensor_copy {{.*}} src %p7
// CHECK:         neuron.nc_matmul tensor dst %p8
// CHECK-NOT:     neuron.tensor_copy
// CHECK:         neuron.activation
// CHECK-COUNT-7: neuron.tensor_copy
// CHECK:         neuron.tensor_copy {{.*}} src %p8
// ALLOCATED-LABEL: func.func @sink_within_psum
// ALLOCATED:       %p8 = neuron.alloc {address = {{[0-9]+}} : i64} : memref<128x128xf32, #mem<psum>>
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @sink_within_psum(%w: memref<128x128xf32, #mem<hbm>>) -> (memref<9x128x128xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>) {
    %o = neuron.alloc : memref<9x128x128xf32, #mem<hbm>>
    %r = neuron.alloc : memref<128x2048xf32, #mem<hbm>>
    %q = neuron.alloc : memref<128x2048xf32, #mem<hbm>>
    %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.memset gpsimd dst %eye[0:128, 0, [[1, 128]]] {value = 1.000000e+00 : f64} : memref<128x128xf32, #mem<sbuf>>
    %ws = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %ws[0:128, 0, [[1, 128]]], src %w[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
    %p0 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s0 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s0[0:128, 0, [[1, 128]]], src %p0[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p1 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s1 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s1[0:128, 0, [[1, 128]]], src %p1[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p2 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s2 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s2[0:128, 0, [[1, 128]]], src %p2[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p3 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s3 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s3[0:128, 0, [[1, 128]]], src %p3[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p4 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p4[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s4 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s4[0:128, 0, [[1, 128]]], src %p4[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p5 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p5[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s5 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s5[0:128, 0, [[1, 128]]], src %p5[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p6 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p6[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s6 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s6[0:128, 0, [[1, 128]]], src %p6[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p7 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p7[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s7 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s7[0:128, 0, [[1, 128]]], src %p7[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p8 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p8[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s8 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s8[0:128, 0, [[1, 128]]], src %p8[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %c0 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.memset vector dst %c0[0:128, 0, [[1, 2048]]] {value = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>
    %c1 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c1[0:128, 0, [[1, 2048]]], src %c0[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %c2 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c2[0:128, 0, [[1, 2048]]], src %c1[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %c3 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c3[0:128, 0, [[1, 2048]]], src %c2[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %c4 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c4[0:128, 0, [[1, 2048]]], src %c3[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d0 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.memset gpsimd dst %d0[0:128, 0, [[1, 2048]]] {value = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>
    %d1 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d1[0:128, 0, [[1, 2048]]], src %d0[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d2 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d2[0:128, 0, [[1, 2048]]], src %d1[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d3 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d3[0:128, 0, [[1, 2048]]], src %d2[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d4 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d4[0:128, 0, [[1, 2048]]], src %d3[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %q[0, [[2048, 128], [1, 2048]]], src %d4[0:128, 0, [[1, 2048]]] {queue = 0 : i64} : memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %r[0, [[2048, 128], [1, 2048]]], src %c4[0:128, 0, [[1, 2048]]] {queue = 1 : i64} : memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[0, [[128, 128], [1, 128]]], src %s0[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[16384, [[128, 128], [1, 128]]], src %s1[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[32768, [[128, 128], [1, 128]]], src %s2[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[49152, [[128, 128], [1, 128]]], src %s3[0:128, 0, [[1, 128]]] {queue = 5 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[65536, [[128, 128], [1, 128]]], src %s4[0:128, 0, [[1, 128]]] {queue = 6 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[81920, [[128, 128], [1, 128]]], src %s5[0:128, 0, [[1, 128]]] {queue = 7 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[98304, [[128, 128], [1, 128]]], src %s6[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[114688, [[128, 128], [1, 128]]], src %s7[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[131072, [[128, 128], [1, 128]]], src %s8[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<9x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    func.return %o, %r, %q : memref<9x128x128xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>
  }
}

// -----

// The same with 33 transposes of 512 bytes (a convolution's filter panels, four to a bank): sunk together they
// would hold 33 tiles where PSUM holds 32. The moves that fit leave the first chain's engine blocked by the rest,
// which the simulated span does not repay, so none moves and the function allocates.
// CHECK-LABEL: func.func @sink_transposes_within_psum
// CHECK:       neuron.tensor_copy {{.*}} src %p32
// CHECK-NOT:   neuron.tensor_copy
// CHECK:       neuron.tensor_scalar
// ALLOCATED-LABEL: func.func @sink_transposes_within_psum
// ALLOCATED:       %p32 = neuron.alloc {address = {{[0-9]+}} : i64} : memref<128x128xf32, #mem<psum>>
builtin.module attributes {neuron.target = #neuron.target<trn2>} {
  func.func @sink_transposes_within_psum(%w: memref<128x128xf32, #mem<hbm>>) -> (memref<33x128x128xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>) {
    %o = neuron.alloc : memref<33x128x128xf32, #mem<hbm>>
    %r = neuron.alloc : memref<128x2048xf32, #mem<hbm>>
    %q = neuron.alloc : memref<128x2048xf32, #mem<hbm>>
    %eye = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.memset gpsimd dst %eye[0:128, 0, [[1, 128]]] {value = 1.000000e+00 : f64} : memref<128x128xf32, #mem<sbuf>>
    %ws = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %ws[0:128, 0, [[1, 128]]], src %w[0, [[128, 128], [1, 128]]] {queue = 0 : i64} : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<hbm>>
    %p0 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p0[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s0 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s0[0:128, 0, [[1, 128]]], src %p0[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p1 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p1[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s1 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s1[0:128, 0, [[1, 128]]], src %p1[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p2 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p2[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s2 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s2[0:128, 0, [[1, 128]]], src %p2[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p3 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p3[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s3 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s3[0:128, 0, [[1, 128]]], src %p3[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p4 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p4[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s4 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s4[0:128, 0, [[1, 128]]], src %p4[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p5 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p5[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s5 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s5[0:128, 0, [[1, 128]]], src %p5[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p6 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p6[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s6 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s6[0:128, 0, [[1, 128]]], src %p6[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p7 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p7[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s7 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s7[0:128, 0, [[1, 128]]], src %p7[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p8 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p8[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s8 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s8[0:128, 0, [[1, 128]]], src %p8[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p9 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p9[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s9 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s9[0:128, 0, [[1, 128]]], src %p9[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p10 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p10[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s10 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s10[0:128, 0, [[1, 128]]], src %p10[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p11 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p11[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s11 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s11[0:128, 0, [[1, 128]]], src %p11[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p12 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p12[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s12 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s12[0:128, 0, [[1, 128]]], src %p12[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p13 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p13[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s13 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s13[0:128, 0, [[1, 128]]], src %p13[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p14 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p14[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s14 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s14[0:128, 0, [[1, 128]]], src %p14[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p15 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p15[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s15 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s15[0:128, 0, [[1, 128]]], src %p15[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p16 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p16[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s16 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s16[0:128, 0, [[1, 128]]], src %p16[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p17 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p17[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s17 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s17[0:128, 0, [[1, 128]]], src %p17[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p18 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p18[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s18 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s18[0:128, 0, [[1, 128]]], src %p18[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p19 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p19[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s19 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s19[0:128, 0, [[1, 128]]], src %p19[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p20 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p20[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s20 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s20[0:128, 0, [[1, 128]]], src %p20[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p21 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p21[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s21 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s21[0:128, 0, [[1, 128]]], src %p21[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p22 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p22[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s22 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s22[0:128, 0, [[1, 128]]], src %p22[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p23 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p23[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s23 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s23[0:128, 0, [[1, 128]]], src %p23[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p24 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p24[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s24 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s24[0:128, 0, [[1, 128]]], src %p24[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p25 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p25[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s25 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s25[0:128, 0, [[1, 128]]], src %p25[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p26 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p26[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s26 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s26[0:128, 0, [[1, 128]]], src %p26[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p27 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p27[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s27 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s27[0:128, 0, [[1, 128]]], src %p27[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p28 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p28[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s28 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s28[0:128, 0, [[1, 128]]], src %p28[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p29 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p29[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s29 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s29[0:128, 0, [[1, 128]]], src %p29[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p30 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p30[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s30 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s30[0:128, 0, [[1, 128]]], src %p30[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p31 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p31[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s31 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s31[0:128, 0, [[1, 128]]], src %p31[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %p32 = neuron.alloc : memref<128x128xf32, #mem<psum>>
    neuron.nc_matmul tensor dst %p32[0:128, 0, [[1, 128]]], stationary %eye[0:128, 0, [[1, 128]]], moving %ws[0:128, 0, [[1, 128]]] {is_transpose = true} : memref<128x128xf32, #mem<psum>>, memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<sbuf>>
    %s32 = neuron.alloc : memref<128x128xf32, #mem<sbuf>>
    neuron.tensor_copy vector dst %s32[0:128, 0, [[1, 128]]], src %p32[0:128, 0, [[1, 128]]] : memref<128x128xf32, #mem<sbuf>>, memref<128x128xf32, #mem<psum>>
    %c0 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.memset vector dst %c0[0:128, 0, [[1, 2048]]] {value = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>
    %c1 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c1[0:128, 0, [[1, 2048]]], src %c0[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %c2 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c2[0:128, 0, [[1, 2048]]], src %c1[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %c3 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c3[0:128, 0, [[1, 2048]]], src %c2[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %c4 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.tensor_scalar vector dst %c4[0:128, 0, [[1, 2048]]], src %c3[0:128, 0, [[1, 2048]]] {op0 = "power", scalar0 = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d0 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.memset gpsimd dst %d0[0:128, 0, [[1, 2048]]] {value = 1.000000e+00 : f64} : memref<128x2048xf32, #mem<sbuf>>
    %d1 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d1[0:128, 0, [[1, 2048]]], src %d0[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d2 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d2[0:128, 0, [[1, 2048]]], src %d1[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d3 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d3[0:128, 0, [[1, 2048]]], src %d2[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    %d4 = neuron.alloc : memref<128x2048xf32, #mem<sbuf>>
    neuron.activation scalar dst %d4[0:128, 0, [[1, 2048]]], src %d3[0:128, 0, [[1, 2048]]] {func = "tanh"} : memref<128x2048xf32, #mem<sbuf>>, memref<128x2048xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %q[0, [[2048, 128], [1, 2048]]], src %d4[0:128, 0, [[1, 2048]]] {queue = 0 : i64} : memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %r[0, [[2048, 128], [1, 2048]]], src %c4[0:128, 0, [[1, 2048]]] {queue = 1 : i64} : memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[0, [[128, 128], [1, 128]]], src %s0[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[16384, [[128, 128], [1, 128]]], src %s1[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[32768, [[128, 128], [1, 128]]], src %s2[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[49152, [[128, 128], [1, 128]]], src %s3[0:128, 0, [[1, 128]]] {queue = 5 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[65536, [[128, 128], [1, 128]]], src %s4[0:128, 0, [[1, 128]]] {queue = 6 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[81920, [[128, 128], [1, 128]]], src %s5[0:128, 0, [[1, 128]]] {queue = 7 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[98304, [[128, 128], [1, 128]]], src %s6[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[114688, [[128, 128], [1, 128]]], src %s7[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[131072, [[128, 128], [1, 128]]], src %s8[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[147456, [[128, 128], [1, 128]]], src %s9[0:128, 0, [[1, 128]]] {queue = 5 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[163840, [[128, 128], [1, 128]]], src %s10[0:128, 0, [[1, 128]]] {queue = 6 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[180224, [[128, 128], [1, 128]]], src %s11[0:128, 0, [[1, 128]]] {queue = 7 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[196608, [[128, 128], [1, 128]]], src %s12[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[212992, [[128, 128], [1, 128]]], src %s13[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[229376, [[128, 128], [1, 128]]], src %s14[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[245760, [[128, 128], [1, 128]]], src %s15[0:128, 0, [[1, 128]]] {queue = 5 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[262144, [[128, 128], [1, 128]]], src %s16[0:128, 0, [[1, 128]]] {queue = 6 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[278528, [[128, 128], [1, 128]]], src %s17[0:128, 0, [[1, 128]]] {queue = 7 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[294912, [[128, 128], [1, 128]]], src %s18[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[311296, [[128, 128], [1, 128]]], src %s19[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[327680, [[128, 128], [1, 128]]], src %s20[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[344064, [[128, 128], [1, 128]]], src %s21[0:128, 0, [[1, 128]]] {queue = 5 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[360448, [[128, 128], [1, 128]]], src %s22[0:128, 0, [[1, 128]]] {queue = 6 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[376832, [[128, 128], [1, 128]]], src %s23[0:128, 0, [[1, 128]]] {queue = 7 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[393216, [[128, 128], [1, 128]]], src %s24[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[409600, [[128, 128], [1, 128]]], src %s25[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[425984, [[128, 128], [1, 128]]], src %s26[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[442368, [[128, 128], [1, 128]]], src %s27[0:128, 0, [[1, 128]]] {queue = 5 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[458752, [[128, 128], [1, 128]]], src %s28[0:128, 0, [[1, 128]]] {queue = 6 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[475136, [[128, 128], [1, 128]]], src %s29[0:128, 0, [[1, 128]]] {queue = 7 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[491520, [[128, 128], [1, 128]]], src %s30[0:128, 0, [[1, 128]]] {queue = 2 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[507904, [[128, 128], [1, 128]]], src %s31[0:128, 0, [[1, 128]]] {queue = 3 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    neuron.dma_copy dma dst %o[524288, [[128, 128], [1, 128]]], src %s32[0:128, 0, [[1, 128]]] {queue = 4 : i64} : memref<33x128x128xf32, #mem<hbm>>, memref<128x128xf32, #mem<sbuf>>
    func.return %o, %r, %q : memref<33x128x128xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>, memref<128x2048xf32, #mem<hbm>>
  }
}
