// RUN: neuron-opt %s -p convert-torch-to-tile | filecheck %s

// The fused attention backward (lowering/convert_torch_to_tile/attention_backward.py): per head, each input's
// rows load once, each query tile's scores and dP over the keys it sees fill one PSUM tile, the probabilities are
// recomputed from the log-sum-exp, and the gradients leave in one store each. Values are checked end to end in
// test/e2e/test_attention.py.

func.func @causal_backward(%g: tensor<1x16x256x64xbf16>, %q: tensor<1x16x256x64xbf16>, %k: tensor<1x16x256x64xbf16>, %v: tensor<1x16x256x64xbf16>, %o: tensor<1x16x256x64xbf16>, %lse: tensor<1x16x256xf32>) -> (tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>) {
  %dq, %dk, %dv = torch.aten._scaled_dot_product_flash_attention_for_cpu_backward %g, %q, %k, %v, %o, %lse, none {dropout_p = 0.000000e+00 : f64, is_causal = true} : (tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>, tensor<1x16x256xf32>) -> (tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>)
  func.return %dq, %dk, %dv : tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>, tensor<1x16x256x64xbf16>
}
// The causal bias is built before the loop over the heads, once: both query tiles straddle the diagonal, and it
// covers their diagonal blocks only (key minus query position, [128, 128] for each).
// CHECK-LABEL: func.func @causal_backward
// CHECK:       %[[IDENTITY:.*]] = tile.binary_scalar %{{.*}} {op = "is_equal", scalar = 0.000000e+00 : f64} : (!tile.tile<128x128xbf16, sbuf>)
// CHECK-NEXT:  tile.iota {steps = array<i64: 1>, channel_multiplier = -1 : i64} : !tile.tile<128x128xbf16, sbuf>
// CHECK-NEXT:  tile.binary_scalar
// CHECK-NEXT:  %[[BIAS:.*]] = tile.binary_scalar %{{.*}} {op = "multiply", scalar = -1.000000e+30 : f64} : (!tile.tile<128x128xbf16, sbuf>)
// CHECK-NOT:   tile.iota
// Eight heads of two query tiles each share a trip (TRIP_SCORE_COLUMNS: 384 columns of scores per head, heads 8 t
// to 8 t + 7), and the two trips follow each other without a loop (UNROLLED_TRIPS), so that each has buffers of its
// own.
// CHECK-NOT:   scf.for
// Six loads per head, all of a trip's loads before any of its transposes, in the order of first use: K^T and the
// log-sum-exp and Q^T (the scores and their exponentials), then V^T and dO^T (dP), then O (D, for dS). DMA bandwidth
// goes to transfers in program order, so the first exponentials wait for three loads instead of six. K, Q and dO,
// read both as rows and transposed, load by a DMA transpose each (trn2's DMAs transpose 2-byte elements: a head
// moves at 0.45 of a copy's rate where its 128-byte rows move at 0.25), and TensorE makes their rows. V, only read
// transposed, loads as V^T by a DMA transpose too. O loads its rows in order, all of them in one. The log-sum-exp
// loads as rows of 128 queries, one per query tile.
// CHECK:       %[[KT0:.*]] = tile.load %k[%c0, %c0, %c0, %c0] {dims = array<i64: 3, 2>} : memref<1x16x256x64xbf16, #mem<hbm>> -> !tile.tile<64x256xbf16, sbuf>
// CHECK-NEXT:  tile.view
// CHECK-NEXT:  %[[LSE0:.*]] = tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] : memref<1x16x1x2x128xf32, strided<[4096, 256, 1, 128, 1]>, #mem<hbm>> -> !tile.tile<2x128xf32, sbuf>
// CHECK-NEXT:  tile.load %q[%c0, %c0, %c0, %c0] {dims = array<i64: 3, 2>} : memref<1x16x256x64xbf16, #mem<hbm>> -> !tile.tile<64x256xbf16, sbuf>
// CHECK-NEXT:  tile.load %v[%c0, %c0, %c0, %c0] {dims = array<i64: 3, 2>} : memref<1x16x256x64xbf16, #mem<hbm>> -> !tile.tile<64x256xbf16, sbuf>
// CHECK-NEXT:  tile.load %g[%c0, %c0, %c0, %c0] {dims = array<i64: 3, 2>} : memref<1x16x256x64xbf16, #mem<hbm>> -> !tile.tile<64x256xbf16, sbuf>
// CHECK-NEXT:  tile.view %o
// CHECK-NEXT:  tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {dims = array<i64: 3, 2, 4>} : memref<1x16x2x128x64xbf16, #mem<hbm>> -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK-NEXT:  tile.load %k[%c0, %c1, %c0, %c0] {dims = array<i64: 3, 2>}
// CHECK-NOT:   tile.transpose
// CHECK:       tile.load %{{.*}}[%c0, %c7, %c0, %c0, %c0] {dims = array<i64: 3, 2, 4>} : memref<1x16x2x128x64xbf16
// Then each head's transposes, just before its first scores: K's rows from K^T, each 128-row block a plain matmul
// with the block of K^T as the stationary operand and a [64, 64] identity as the moving one (TensorE streams 64
// columns, where a transpose of the [64, 128] block would stream 128); the log-sum-exp's per-partition columns.
// CHECK-NEXT:  tile.empty : !tile.tile<128x2x64xbf16, sbuf>
// CHECK-NEXT:  %[[K00:.*]] = tile.extract %[[KT0]][%c0] : !tile.tile<64x256xbf16, sbuf> -> !tile.tile<64x128xbf16, sbuf>
// CHECK-NEXT:  %[[EYE:.*]] = tile.extract %[[IDENTITY]][%c0] : !tile.tile<128x128xbf16, sbuf> -> !tile.tile<64x64xbf16, sbuf>
// CHECK-NEXT:  tile.matmul %[[K00]], %[[EYE]] : (!tile.tile<64x128xbf16, sbuf>, !tile.tile<64x64xbf16, sbuf>) -> !tile.tile<128x64xf32, psum>
// CHECK-NEXT:  tile.insert %{{.*}}, %{{.*}}[%c0, %c0] : !tile.tile<128x64xf32, psum>, !tile.tile<128x2x64xbf16, sbuf>
// CHECK-NEXT:  tile.extract %[[KT0]][%c128]
// CHECK-NEXT:  tile.extract %[[IDENTITY]][%c0]
// CHECK-NEXT:  tile.matmul
// CHECK-NEXT:  tile.insert %{{.*}}, %{{.*}}[%c1, %c0] : !tile.tile<128x64xf32, psum>, !tile.tile<128x2x64xbf16, sbuf>
// CHECK-NEXT:  tile.transpose %[[LSE0]] : !tile.tile<2x128xf32, sbuf> -> !tile.tile<128x2xf32, psum>
// The first stage's query tiles (both tiles of the heads 8 t and 8 t + 1: TILES_PER_STAGE): tile 0 over its 128 keys with the causal
// bias added in PSUM; tile 1 over keys [0, 128) in one PSUM tile and its diagonal keys [128, 256) with the bias in
// another, both exponentials writing one [128, 256] tile of probabilities.
// CHECK:         %[[S0:.*]] = tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<64x128xbf16, sbuf>, !tile.tile<64x128xbf16, sbuf>) -> !tile.tile<128x128xf32, psum>
// CHECK-NEXT:    %[[S0B:.*]] = tile.matmul %[[IDENTITY]], %[[BIAS]] acc %[[S0]]
// CHECK-NEXT:    tile.unary %[[S0B]] bias %{{.*}} {fn = "exp", scale = 1.250000e-01 : f64} : (!tile.tile<128x128xf32, psum>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x128xbf16, sbuf>
// CHECK-NEXT:    %[[P1:.*]] = tile.empty : !tile.tile<128x256xbf16, sbuf>
// CHECK-NEXT:    %[[Q1:.*]] = tile.extract %{{.*}}[%c128] : !tile.tile<64x256xbf16, sbuf> -> !tile.tile<64x128xbf16, sbuf>
// CHECK-NEXT:    %[[K0:.*]] = tile.extract %{{.*}}[%c0] : !tile.tile<64x256xbf16, sbuf> -> !tile.tile<64x128xbf16, sbuf>
// CHECK-NEXT:    %[[S1:.*]] = tile.matmul %[[Q1]], %[[K0]] : (!tile.tile<64x128xbf16, sbuf>, !tile.tile<64x128xbf16, sbuf>) -> !tile.tile<128x128xf32, psum>
// CHECK-NEXT:    %[[E1:.*]] = tile.unary %[[S1]]
// CHECK-NEXT:    %[[P1A:.*]] = tile.insert %[[E1]], %[[P1]][%c0]
// CHECK-NEXT:    tile.extract
// CHECK-NEXT:    %[[K1:.*]] = tile.extract %{{.*}}[%c128] : !tile.tile<64x256xbf16, sbuf> -> !tile.tile<64x128xbf16, sbuf>
// CHECK-NEXT:    %[[D1:.*]] = tile.matmul %{{.*}}, %[[K1]]
// CHECK-NEXT:    %[[D1B:.*]] = tile.matmul %[[IDENTITY]], %[[BIAS]] acc %[[D1]]
// CHECK-NEXT:    %[[E1D:.*]] = tile.unary %[[D1B]]
// CHECK-NEXT:    tile.insert %[[E1D]], %[[P1A]][%c128] : !tile.tile<128x128xbf16, sbuf>, !tile.tile<128x256xbf16, sbuf>
// dS carries the scale: scale (dP - D) leaves PSUM in one activation (-scale D its per-partition bias), in bf16,
// and its product with P is bf16 too, emitted after the stage's last scale (dP - D) and after the next stage's two
// heads have their rows and -lse (the log-sum-exp's transpose).
// CHECK:         %[[CENTRED:.*]] = tile.unary %{{.*}} bias %{{.*}} {fn = "copy", scale = 1.250000e-01 : f64} : (!tile.tile<128x256xf32, psum>, !tile.tile<128x1xf32, sbuf>) -> !tile.tile<128x256xbf16, sbuf>
// CHECK-NOT:     tile.binary %[[CENTRED]]
// CHECK:         tile.transpose %{{.*}} : !tile.tile<2x128xf32, sbuf> -> !tile.tile<128x2xf32, psum>
// CHECK-NOT:     tile.binary %[[CENTRED]]
// CHECK:         tile.transpose %{{.*}} : !tile.tile<2x128xf32, sbuf> -> !tile.tile<128x2xf32, psum>
// CHECK:         tile.binary %[[CENTRED]], %{{.*}} {op = "multiply"} : (!tile.tile<128x256xbf16, sbuf>, !tile.tile<128x256xbf16, sbuf>) -> !tile.tile<128x256xbf16, sbuf>
// The trips are software-pipelined by stage: the second trip (heads 8 to 15) loads and computes its first stage's P
// and scale (dP - D) before the first trip's last products and its stores; causal, its dS follows them.
// CHECK-NOT:     tile.store
// CHECK:         tile.load %{{.*}}[%c0, %c8, %c0, %c0, %c0] {dims = array<i64: 3, 2, 4>}
// CHECK-NOT:     tile.store
// CHECK:         %[[CENTRED8:.*]] = tile.unary %{{.*}} bias %{{.*}} {fn = "copy", scale = 1.250000e-01 : f64}
// CHECK-NOT:     tile.binary %[[CENTRED8]], %{{.*}} {op = "multiply"}
// CHECK-COUNT-3: tile.store %{{.*}}[%c0, %c0, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>}
// CHECK-NOT:     tile.store
// CHECK:         tile.binary %[[CENTRED8]], %{{.*}} {op = "multiply"}
// No [L, S] tile reaches HBM: the trip's three gradients leave in one store each, all eight heads' rows together,
// into tensors stored [B, L, H, E] (as the forward's output), so that a row of the eight heads is one contiguous run
// and merging the heads afterwards is a view.
// CHECK-COUNT-3: tile.store %{{.*}}[%c0, %c8, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} : !tile.tile<128x2x8x64xbf16, sbuf>, memref<1x16x2x128x64xbf16, strided<[262144, 64, 131072, 1024, 1]>, #mem<hbm>>
// CHECK-NOT:     tile.store
// CHECK:       func.return

// Three trips of eight heads: the gradients of the first two trips are gathered in one tile each and leave in one
// store each after the second trip (16 heads: a row is one 2 KiB run), the last trip's alone at the end (STORE_TRIPS).
func.func @grouped_stores_backward(%g: tensor<1x24x256x64xbf16>, %q: tensor<1x24x256x64xbf16>, %k: tensor<1x24x256x64xbf16>, %v: tensor<1x24x256x64xbf16>, %o: tensor<1x24x256x64xbf16>, %lse: tensor<1x24x256xf32>) -> (tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>) {
  %dq, %dk, %dv = torch.aten._scaled_dot_product_flash_attention_for_cpu_backward %g, %q, %k, %v, %o, %lse, none {dropout_p = 0.000000e+00 : f64, is_causal = true} : (tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>, tensor<1x24x256xf32>) -> (tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>)
  func.return %dq, %dk, %dv : tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>, tensor<1x24x256x64xbf16>
}
// CHECK-LABEL: func.func @grouped_stores_backward
// CHECK-NOT:     tile.store
// CHECK:         tile.load %k[%c0, %c8, %c0, %c0]
// CHECK-NOT:     tile.store
// CHECK:         tile.load %k[%c0, %c16, %c0, %c0]
// CHECK-COUNT-3: tile.store %{{.*}}[%c0, %c0, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} : !tile.tile<128x2x16x64xbf16, sbuf>
// CHECK-COUNT-3: tile.store %{{.*}}[%c0, %c16, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} : !tile.tile<128x2x8x64xbf16, sbuf>
// CHECK-NOT:     tile.store
// CHECK:       func.return

// Short heads have few scores each (16 queries of 16 keys): a trip takes as many heads as its scores allow
// (TRIP_SCORE_COLUMNS) but at most 16 query tiles (MAX_TRIP_TILES), whose rows all stay in SBUF until it stores:
// heads 0 to 15, then the remaining 8.
func.func @short_heads_backward(%g: tensor<1x24x16x32xbf16>, %q: tensor<1x24x16x32xbf16>, %k: tensor<1x24x16x32xbf16>, %v: tensor<1x24x16x32xbf16>, %o: tensor<1x24x16x32xbf16>, %lse: tensor<1x24x16xf32>) -> (tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>) {
  %dq, %dk, %dv = torch.aten._scaled_dot_product_flash_attention_for_cpu_backward %g, %q, %k, %v, %o, %lse, none {dropout_p = 0.000000e+00 : f64, is_causal = false} : (tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>, tensor<1x24x16xf32>) -> (tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>)
  func.return %dq, %dk, %dv : tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>, tensor<1x24x16x32xbf16>
}
// CHECK-LABEL: func.func @short_heads_backward
// CHECK-NOT:     scf.for
// CHECK-COUNT-3: tile.store %{{.*}}[%c0, %c0, %c0, %c0] {dims = array<i64: 2, 1, 3>} : !tile.tile<16x16x32xbf16, sbuf>
// CHECK-COUNT-3: tile.store %{{.*}}[%c0, %c16, %c0, %c0] {dims = array<i64: 2, 1, 3>} : !tile.tile<16x8x32xbf16, sbuf>
// CHECK-NOT:     tile.store
// CHECK:       func.return
