// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile | filecheck %s

// Branches of the fused attention lowering (lowering/convert_torch_to_tile/attention.py) that show in the IR:
// grouped query heads sharing their key/value head's K^T, a decoding step's query heads stacked as one head's
// rows, and heads wider than one TensorE contraction. Values are checked end to end in test/e2e/test_attention.py.

builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @grouped_query_heads(%q: tensor<1x4x256x64xbf16>, %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>) -> tensor<1x4x256x64xbf16> {
    %0, %1 = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, none {is_causal = true} : (tensor<1x4x256x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>) -> (tensor<1x4x256x64xbf16>, tensor<1x4x256xf32>)
    func.return %0 : tensor<1x4x256x64xbf16>
  }
}
// Two query heads per key/value head, one straight-line group per key/value head (each with buffers of its own):
// the group loads its key/value head's keys once, the rows of its query heads 2 kv and 2 kv + 1 (each head's rows
// apart from the other's in HBM, so one load each), then its values; K^T is transposed once on TensorE (trn1's
// DMAs do not transpose: one transpose per 128 keys), and both query heads' scores read it.
// CHECK-LABEL: func.func @grouped_query_heads
// CHECK:       tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {{.*}} -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK:       tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {{.*}} -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK:       tile.load %{{.*}}[%c0, %c1, %c0, %c0, %c0] {{.*}} -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK:       tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {{.*}} -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK-NOT:   tile.load
// CHECK:       %[[KT:.*]] = scf.for {{.*}} -> (!tile.tile<64x256xbf16, sbuf>) {
// CHECK-NEXT:    tile.extract
// CHECK-NEXT:    tile.transpose
// CHECK-NEXT:    arith.muli
// CHECK-NEXT:    tile.insert
// CHECK-NEXT:    scf.yield
// CHECK-NEXT:  }
// Q^T of both query heads, side by side in one loop.
// CHECK:       scf.for {{.*}} -> (!tile.tile<64x256xbf16, sbuf>, !tile.tile<64x256xbf16, sbuf>) {
// CHECK:         scf.yield
// CHECK-NEXT:  }
// The causal trips are software-pipelined in straight-line code. The first query tile of both query heads shares
// a trip; each one's scores read key block 0 of the one K^T.
// CHECK-NOT:   scf.for
// CHECK:       %[[K0:.*]] = tile.extract %[[KT]][%c0] : !tile.tile<64x256xbf16, sbuf> -> !tile.tile<64x128xbf16, sbuf>
// CHECK-NEXT:  %[[K1:.*]] = tile.extract %[[KT]][%c0] : !tile.tile<64x256xbf16, sbuf> -> !tile.tile<64x128xbf16, sbuf>
// CHECK:       tile.matmul %{{.*}}, %[[K0]] :
// CHECK:       tile.matmul %{{.*}}, %[[K1]] :
// The second tile's scores read all of it, before the first tile's p^T and products.
// CHECK-NOT:   tile.transpose
// CHECK:       tile.matmul %{{.*}}, %[[KT]] :
// CHECK:       tile.matmul %{{.*}}, %[[KT]] :
// CHECK:       tile.transpose %{{.*}} : !tile.tile<128x128xbf16, sbuf> -> !tile.tile<128x128xbf16, psum>
// Both query heads' rows leave in one store, as [128, query tiles, heads * 64] (a row of the two heads is one
// run of the output's [256, 4 * 64] rows); then the second group loads key/value head 1's keys.
// CHECK:       tile.store %{{.*}}[%c0, %c0, %c0, %c0] {{.*}} : !tile.tile<128x2x128xbf16, sbuf>, memref<1x2x128x256xbf16
// CHECK:       tile.load %{{.*}}[%c0, %c1, %c0, %c0, %c0] {{.*}} -> !tile.tile<128x2x64xbf16, sbuf>
// The second group ends the kernel: its first trip's rows (query tile 0 of heads 2 and 3) leave before its last
// trip's p^T and products, and the last trip's rows (query tile 1) in a store of their own after them, so that the
// kernel's last DMA carries one trip's rows.
// CHECK:       tile.store %{{.*}}[%c0, %c0, %c0, %c128] {{.*}} : !tile.tile<128x1x128xbf16, sbuf>
// CHECK:       tile.transpose %{{.*}} : !tile.tile<128x128xbf16, sbuf> -> !tile.tile<128x128xbf16, psum>
// CHECK:       tile.store %{{.*}}[%c0, %c1, %c0, %c128] {{.*}} : !tile.tile<128x1x128xbf16, sbuf>
// CHECK-NOT:   tile.store

// -----

func.func @grouped_query_heads_dma_transposes(%q: tensor<1x4x256x64xbf16>, %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>) -> tensor<1x4x256x64xbf16> {
  %0, %1 = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, none {is_causal = true} : (tensor<1x4x256x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>) -> (tensor<1x4x256x64xbf16>, tensor<1x4x256xf32>)
  func.return %0 : tensor<1x4x256x64xbf16>
}
// The same on trn2, whose DMAs transpose 2-byte elements: the group loads its key/value head's K^T and each query
// head's Q^T transposed (features on partitions: dims 3, 2), scaled once, then its value rows; no TensorE
// transpose before the scores, which read the one K^T.
// CHECK-LABEL: func.func @grouped_query_heads_dma_transposes
// CHECK:       %[[KT:.*]] = tile.load %k[%c0, %c0, %c0, %c0] {dims = array<i64: 3, 2>} : memref<1x2x256x64xbf16, #mem<hbm>> -> !tile.tile<64x256xbf16, sbuf>
// CHECK-NEXT:  tile.load %q[%c0, %c0, %c0, %c0] {dims = array<i64: 3, 2>} : memref<1x4x256x64xbf16, #mem<hbm>> -> !tile.tile<64x256xbf16, sbuf>
// CHECK-NEXT:  tile.binary_scalar
// CHECK-NEXT:  tile.load %q[%c0, %c1, %c0, %c0] {dims = array<i64: 3, 2>} : memref<1x4x256x64xbf16, #mem<hbm>> -> !tile.tile<64x256xbf16, sbuf>
// CHECK-NEXT:  tile.binary_scalar
// CHECK:       tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {{.*}} -> !tile.tile<128x2x64xbf16, sbuf>
// CHECK-NOT:   tile.transpose
// CHECK:       %[[K0:.*]] = tile.extract %[[KT]][%c0] : !tile.tile<64x256xbf16, sbuf> -> !tile.tile<64x128xbf16, sbuf>
// CHECK:       tile.matmul %{{.*}}, %[[K0]] :

// -----

func.func @grouped_decoding_step(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x300x64xf32>, %v: tensor<1x2x300x64xf32>) -> tensor<1x8x1x64xf32> {
  %0, %1 = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, none : (tensor<1x8x1x64xf32>, tensor<1x2x300x64xf32>, tensor<1x2x300x64xf32>) -> (tensor<1x8x1x64xf32>, tensor<1x8x1xf32>)
  func.return %0 : tensor<1x8x1x64xf32>
}
// One query per head: the four query heads of a key/value head are viewed as four query rows of that head, so
// one [64, 4] Q^T meets the keys in one matmul and the output rows leave in one store.
// CHECK-LABEL: func.func @grouped_decoding_step
// CHECK:       %[[QV:.*]] = tile.view %q : memref<1x8x1x64xf32, #mem<hbm>> to memref<1x2x4x64xf32, #mem<hbm>>
// CHECK:       %[[OV:.*]] = tile.view %{{.*}} to memref<1x2x4x64xf32, #mem<hbm>>
// CHECK:       scf.for %[[KV:.*]] = %c0 to %c2 step %c1 {
// CHECK:         tile.load %[[QV]][%c0, %[[KV]], %c0, %c0] : memref<1x2x4x64xf32, #mem<hbm>> -> !tile.tile<4x64xf32, sbuf>
// CHECK:         tile.matmul %{{.*}}, %{{.*}} : (!tile.tile<64x4xf32, sbuf>, !tile.tile<64x300xf32, sbuf>) -> !tile.tile<4x300xf32, psum>
// CHECK-NOT:     tile.matmul %{{.*}}, %{{.*}} : ({{.*}}) -> !tile.tile<{{[0-9]+}}x300xf32, psum>
// CHECK:         tile.store %{{.*}}, %[[OV]][%c0, %[[KV]], %c0, %c0] : !tile.tile<4x64xf32, sbuf>, memref<1x2x4x64xf32, #mem<hbm>>
// CHECK-NEXT:  }

// -----

func.func @wide_heads(%q: tensor<1x1x128x192xf32>, %k: tensor<1x1x128x192xf32>, %v: tensor<1x1x128x192xf32>) -> tensor<1x1x128x192xf32> {
  %0, %1 = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, none : (tensor<1x1x128x192xf32>, tensor<1x1x128x192xf32>, tensor<1x1x128x192xf32>) -> (tensor<1x1x128x192xf32>, tensor<1x1x128xf32>)
  func.return %0 : tensor<1x1x128x192xf32>
}
// 192 features: K^T and Q^T as a [128, N] tile of features 0-127 and a [64, N] tile of features 128-191 (each
// block of rows transposed in two column windows); the scores accumulate both contractions in PSUM.
// CHECK-LABEL: func.func @wide_heads
// CHECK:       %[[KROWS:.*]] = tile.load {{.*}} -> !tile.tile<128x1x192xf32, sbuf>
// CHECK:       tile.extract %[[KROWS]][%c0, %c0] : !tile.tile<128x1x192xf32, sbuf> -> !tile.tile<128x128xf32, sbuf>
// CHECK-NEXT:  tile.transpose %{{.*}} : !tile.tile<128x128xf32, sbuf> -> !tile.tile<128x128xf32, psum>
// CHECK-NEXT:  %[[KT0:.*]] = tile.insert
// CHECK-NEXT:  tile.extract %[[KROWS]][%c0, %c128] : !tile.tile<128x1x192xf32, sbuf> -> !tile.tile<128x64xf32, sbuf>
// CHECK-NEXT:  tile.transpose %{{.*}} : !tile.tile<128x64xf32, sbuf> -> !tile.tile<64x128xf32, psum>
// CHECK-NEXT:  %[[KT1:.*]] = tile.insert
// CHECK:       %[[S0:.*]] = tile.matmul %{{.*}}, %[[KT0]] : (!tile.tile<128x128xf32, sbuf>, !tile.tile<128x128xf32, sbuf>) -> !tile.tile<128x128xf32, psum>
// CHECK-NEXT:  tile.matmul %{{.*}}, %[[KT1]] acc %[[S0]] : (!tile.tile<64x128xf32, sbuf>, !tile.tile<64x128xf32, sbuf>, !tile.tile<128x128xf32, psum>) -> !tile.tile<128x128xf32, psum>

// -----

builtin.module attributes {neuron.target = #neuron.target<trn1>} {
  func.func @heads_beside_features(%qkv: tensor<1x256x3x6x64xbf16>) -> tensor<1x6x256x64xbf16> {
    %q = torch.aten.select.int %qkv {dim = 2 : i64, index = 0 : i64} : (tensor<1x256x3x6x64xbf16>) -> tensor<1x256x6x64xbf16>
    %k = torch.aten.select.int %qkv {dim = 2 : i64, index = 1 : i64} : (tensor<1x256x3x6x64xbf16>) -> tensor<1x256x6x64xbf16>
    %v = torch.aten.select.int %qkv {dim = 2 : i64, index = 2 : i64} : (tensor<1x256x3x6x64xbf16>) -> tensor<1x256x6x64xbf16>
    %qh = torch.aten.permute %q {dims = array<i64: 0, 2, 1, 3>} : (tensor<1x256x6x64xbf16>) -> tensor<1x6x256x64xbf16>
    %kh = torch.aten.permute %k {dims = array<i64: 0, 2, 1, 3>} : (tensor<1x256x6x64xbf16>) -> tensor<1x6x256x64xbf16>
    %vh = torch.aten.permute %v {dims = array<i64: 0, 2, 1, 3>} : (tensor<1x256x6x64xbf16>) -> tensor<1x6x256x64xbf16>
    %0, %1 = torch.aten._scaled_dot_product_flash_attention_for_cpu %qh, %kh, %vh, none {is_causal = true} : (tensor<1x6x256x64xbf16>, tensor<1x6x256x64xbf16>, tensor<1x6x256x64xbf16>) -> (tensor<1x6x256x64xbf16>, tensor<1x6x256xf32>)
    func.return %0 : tensor<1x6x256x64xbf16>
  }
}
// Heads viewed out of a fused QKV projection's output lie beside the features: a trip's consecutive heads load
// their keys, queries and values in one DMA each, a row of those heads being one run (head h at [:, :, h, :]); on
// trn1, where keys and queries are not loaded by DMA transposes.
// The two groups of three heads are straight-line code, the second group's heads from 3 on. The first group's
// values are what the projection before the kernel has just stored: they load one 128-row block per DMA, each
// block into a tile of its own beside its ones column; each block's copy comes after the exponentials of the
// trips before it, block 1's after the first trip's products (query tile 0 multiplies by block 0 alone).
// CHECK-LABEL: func.func @heads_beside_features
// CHECK:       tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} {{.*}} -> !tile.tile<128x2x3x64xbf16, sbuf>
// CHECK-NEXT:  tile.view
// CHECK-NEXT:  tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} {{.*}} -> !tile.tile<128x2x3x64xbf16, sbuf>
// CHECK-NEXT:  tile.view
// CHECK-NEXT:  %[[V0:.*]] = tile.load %{{.*}}[%c0, %c0, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} {{.*}} -> !tile.tile<128x1x3x64xbf16, sbuf>
// CHECK-NEXT:  %[[ONES0:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<128x1x3x65xbf16, sbuf>
// CHECK-NEXT:  %[[V1:.*]] = tile.load %{{.*}}[%c0, %c0, %c1, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} {{.*}} -> !tile.tile<128x1x3x64xbf16, sbuf>
// CHECK-NEXT:  %[[ONES1:.*]] = tile.fill {value = 1.000000e+00 : f64} : !tile.tile<128x1x3x65xbf16, sbuf>
// CHECK:       tile.unary {{.*}} {fn = "exp"
// CHECK:       tile.insert %[[V0]], %[[ONES0]][%c0, %c0, %c0]
// CHECK:       tile.matmul {{.*}} -> !tile.tile<128x65xf32, psum>
// CHECK:       tile.insert %[[V1]], %[[ONES1]][%c0, %c0, %c0]
// CHECK-NOT:   tile.load %{{.*}}[%c0, %c1,
// CHECK:       tile.load %{{.*}}[%c0, %c3, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} {{.*}} -> !tile.tile<128x2x3x64xbf16, sbuf>
// CHECK-NEXT:  tile.view
// CHECK-NEXT:  tile.load %{{.*}}[%c0, %c3, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} {{.*}} -> !tile.tile<128x2x3x64xbf16, sbuf>
// CHECK-NEXT:  tile.view
// CHECK-NEXT:  tile.load %{{.*}}[%c0, %c3, %c0, %c0, %c0] {dims = array<i64: 3, 2, 1, 4>} {{.*}} -> !tile.tile<128x2x3x64xbf16, sbuf>
