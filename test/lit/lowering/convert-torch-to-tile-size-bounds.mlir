// RUN: neuron-opt %s --split-input-file -p convert-torch-to-tile,tile-fuse-loops | filecheck %s

// Elementwise nests over dimensions bounded by the call's sizes (`neuron.size_arguments`, `neuron.size_bounds`:
// lowering/convert_torch_to_tile/elementwise.py). Numbers and trip counts are checked end to end in
// test/frontend/test_size_buckets.py.

// A size bucket's [4, 256, 512] program: the batch and sequence stay dimensions of their own, the batch loop
// runs the call's s0 trips and the rows run ceil(s1 / 128) row tiles, whose end is computed once at the top so
// that the two nests, bounded alike, fuse.
// CHECK-LABEL: func.func @main(%x: memref<4x256x512xf32, #mem<hbm>>, %s0: index, %s1: index)
// CHECK:       %[[ROUNDED:.*]] = arith.addi %s1, %c127 : index
// CHECK-NEXT:  %[[TILES:.*]] = arith.floordivsi %[[ROUNDED]], %c128 : index
// CHECK-NEXT:  %[[END:.*]] = arith.muli %[[TILES]], %c128 : index
// CHECK:       scf.for %[[B:.*]] = %c0 to %s0 step %c1 {
// CHECK-NEXT:    scf.for %[[ROW:.*]] = %c0 to %[[END]] step %c128 {
// CHECK-NEXT:      tile.load %x[%[[B]], %[[ROW]], %c0] {{.*}} -> !tile.tile<128x512xf32, sbuf>
// CHECK-NEXT:      tile.binary_scalar
// CHECK-NEXT:      tile.binary_scalar
// CHECK-NEXT:      tile.store
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NOT:   scf.for
func.func @main(%x: tensor<4x256x512xf32>) -> tensor<4x256x512xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 256 : i64]]} {
  %0 = torch.aten.mul.Scalar %x {other = 2.000000e+00 : f64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x256x512xf32>) -> tensor<4x256x512xf32>
  %1 = torch.aten.add.Scalar %0 {other = 1.000000e+00 : f64, alpha = 1 : i64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x256x512xf32>) -> tensor<4x256x512xf32>
  func.return %1 : tensor<4x256x512xf32>
}

// -----

// Rows of 64 elements would make [128, 64] tiles: the op runs merged over its whole extent, as without bounds
// (the size argument is still the function's).
// CHECK-LABEL: func.func @narrow(%x: memref<4x256x64xf32, #mem<hbm>>, %s1: index)
// CHECK-NOT:   %s1
// CHECK:       func.return
func.func @narrow(%x: tensor<4x256x64xf32>) -> tensor<4x256x64xf32> attributes {neuron.size_arguments = [["s1", 1 : i64, 256 : i64]]} {
  %0 = torch.aten.mul.Scalar %x {other = 2.000000e+00 : f64, neuron.size_bounds = ["", "s1", ""]} : (tensor<4x256x64xf32>) -> tensor<4x256x64xf32>
  func.return %0 : tensor<4x256x64xf32>
}

// -----

// A Linear layer over token rows [b*s, 64] (`"s0*s1"`: rows merged from the batch and the sequence, padded per
// factor): M is viewed as [2, 1024], the batch loop runs the call's s0 trips and each runs ceil(s1 / 128) block
// rows of one m tile, two per trip over the whole pairs (one panel for both, the next pair's loads under this
// pair's blocks), then the tile left, as the rows are more tiles than neuron-unroll-loops copies (`SHORT_TRIPS`);
// B, the same for every batch, loads once before the loops.
// CHECK-LABEL: func.func @token_rows(%x: memref<2048x64xf32, #mem<hbm>>, %w: memref<64x96xf32, #mem<hbm>>, %b: memref<96xf32, #mem<hbm>>, %s0: index, %s1: index)
// CHECK:       %[[ROUNDED:.*]] = arith.addi %s1, %c127 : index
// CHECK-NEXT:  %[[TILES:.*]] = arith.floordivsi %[[ROUNDED]], %c128 : index
// CHECK-NEXT:  %[[END:.*]] = arith.muli %[[TILES]], %c128 : index
// CHECK-NEXT:  %[[PAIRS:.*]] = arith.floordivsi %[[END]], %c256 : index
// CHECK-NEXT:  %[[PAIRS_END:.*]] = arith.muli %[[PAIRS]], %c256 : index
// CHECK:       %[[OUT:.*]] = memref.alloc() : memref<2048x96xf32, #mem<hbm>>
// CHECK-NEXT:  %[[X:.*]] = tile.view %x : memref<2048x64xf32, #mem<hbm>> to memref<2x1024x64xf32, #mem<hbm>>
// CHECK-NEXT:  %[[W:.*]] = tile.view %w : memref<64x96xf32, #mem<hbm>> to memref<2x64x96xf32, strided<[0, 96, 1]>, #mem<hbm>>
// CHECK-NEXT:  %[[Y:.*]] = tile.view %[[OUT]] : memref<2048x96xf32, #mem<hbm>> to memref<2x1024x96xf32, #mem<hbm>>
// CHECK-NEXT:  %[[B:.*]] = tile.load %[[W]][%c0, %c0, %c0] {{.*}} -> !tile.tile<64x96xf32, sbuf>
// CHECK-NEXT:  scf.for %[[BATCH:.*]] = %c0 to %s0 step %c1 {
// CHECK-NEXT:    scf.for %[[ROW:.*]] = %c0 to %[[PAIRS_END]] step %c256 {
// CHECK-NEXT:      %[[SECOND:.*]] = arith.addi %[[ROW]], %c128 : index
// CHECK-NEXT:      tile.load %[[X]][%[[BATCH]], %[[ROW]], %c0] {{.*}} -> !tile.tile<128x64xf32, sbuf>
// CHECK:           tile.load %[[X]][%[[BATCH]], %[[SECOND]], %c0] {{.*}} -> !tile.tile<128x64xf32, sbuf>
// CHECK:           tile.matmul %{{.*}}, %[[B]]
// CHECK:           tile.store %{{.*}}, %[[Y]][%[[BATCH]], %[[ROW]], %c0]
// CHECK:           tile.matmul %{{.*}}, %[[B]]
// CHECK:           tile.store %{{.*}}, %[[Y]][%[[BATCH]], %[[SECOND]], %c0]
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.for %[[LAST:.*]] = %[[PAIRS_END]] to %[[END]] step %c128 {
// CHECK-NEXT:      tile.load %[[X]][%[[BATCH]], %[[LAST]], %c0] {{.*}} -> !tile.tile<128x64xf32, sbuf>
// CHECK:           tile.matmul %{{.*}}, %[[B]]
// CHECK:           tile.store %{{.*}}, %[[Y]][%[[BATCH]], %[[LAST]], %c0]
// CHECK-NEXT:    }
// CHECK-NEXT:  }
func.func @token_rows(%x: tensor<2048x64xf32>, %w: tensor<64x96xf32>, %b: tensor<96xf32>) -> tensor<2048x96xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 2 : i64], ["s1", 1 : i64, 1024 : i64]]} {
  %0 = torch.aten.addmm %b, %x, %w {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s0*s1", ""]} : (tensor<96xf32>, tensor<2048x64xf32>, tensor<64x96xf32>) -> tensor<2048x96xf32>
  func.return %0 : tensor<2048x96xf32>
}

// -----

// The zeroing of padded keys in a size bucket's program: rows of 16 elements, as narrow bounded as merged (the
// mask broadcasts along the free axis, so no wider tiling applies), so the batch loop runs the call's s0 trips
// over the same [128, 16] tiles instead of every batch of the bucket.
// CHECK-LABEL: func.func @narrow_as_merged
// CHECK:       scf.for %[[B:.*]] = %c0 to %s0 step %c1 {
// CHECK-NEXT:    scf.for %[[H:.*]] = %c0 to %c2 step %c1 {
// CHECK-NEXT:      scf.for %[[ROW:.*]] = %c0 to %c512 step %c128 {
// CHECK:             tile.load %keys[%[[B]], %[[H]], %[[ROW]], %c0] {{.*}} -> !tile.tile<128x16xf32, sbuf>
// CHECK:             tile.store %{{.*}}, %where[%[[B]], %[[H]], %[[ROW]], %c0] : !tile.tile<128x16xf32, sbuf>
func.func @narrow_as_merged(%keys: tensor<4x2x512x16xf32>, %real: tensor<1x1x512x1xi1>, %zero: tensor<f32>) -> tensor<4x2x512x16xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64]]} {
  %where = torch.aten.where.self %real, %keys, %zero {neuron.size_bounds = ["s0", "", "", ""]} : (tensor<1x1x512x1xi1>, tensor<4x2x512x16xf32>, tensor<f32>) -> tensor<4x2x512x16xf32>
  func.return %where : tensor<4x2x512x16xf32>
}

// -----

// A layer norm over token rows [b, s, 32] (rows of 32 features, merged to [1024, 32] for the nest) in a size
// bucket's program: its rows split back to [4, 256], the batch loop runs the call's s0 trips and each runs
// ceil(s1 / 128) row tiles.
// CHECK-LABEL: func.func @token_rows_norm
// CHECK:       %[[END:.*]] = arith.muli %{{.*}}, %c128 : index
// CHECK:       %[[X:.*]] = tile.view %{{.*}} : memref<1024x32xf32, #mem<hbm>> to memref<4x256x32xf32, #mem<hbm>>
// CHECK:       scf.for %[[B:.*]] = %c0 to %s0 step %c1 {
// CHECK-NEXT:    scf.for %[[ROW:.*]] = %c0 to %[[END]] step %c128 {
// CHECK-NEXT:      tile.load %[[X]][%[[B]], %[[ROW]], %c0] {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK:           tile.store
// CHECK-NEXT:    }
// CHECK-NEXT:  }
func.func @token_rows_norm(%x: tensor<4x256x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<4x256x32xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 256 : i64]]} {
  %0, %1, %2 = torch.aten.native_layer_norm %x, %w, %b {normalized_shape = array<i64: 32>, eps = 1.000000e-05 : f64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x256x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x256x32xf32>, tensor<4x256x1xf32>, tensor<4x256x1xf32>)
  func.return %0 : tensor<4x256x32xf32>
}

// -----

// Token rows shorter than a tile per batch ([4, 64] rows, a lower bucket's program): the rows stay merged, and the
// merged rows' tiles run up to the last real row, (s0 - 1) * 64 + s1 (`real_prefix`, computed once at the
// function's top): one tile of the two at a call of 2 x 7 tokens. Both the Linear layer and the layer norm, one
// tile per trip (no pairs: neuron-unroll-loops gives each of the two trips a copy, the first one plain code); the
// two loops share their bounds, so tile-fuse-loops makes them one and the product's rows never reach HBM.
// CHECK-LABEL: func.func @short_token_rows
// CHECK:       %[[LESS1:.*]] = arith.subi %s1, %c1 : index
// CHECK-NEXT:  %[[LESS0:.*]] = arith.subi %s0, %c1 : index
// CHECK-NEXT:  %[[BATCHES:.*]] = arith.muli %[[LESS0]], %c64 : index
// CHECK-NEXT:  %[[SUM:.*]] = arith.addi %[[LESS1]], %[[BATCHES]] : index
// CHECK-NEXT:  %[[PREFIX:.*]] = arith.addi %[[SUM]], %c1 : index
// CHECK-NEXT:  %[[ROUNDED:.*]] = arith.addi %[[PREFIX]], %c127 : index
// CHECK-NEXT:  %[[TILES:.*]] = arith.floordivsi %[[ROUNDED]], %c128 : index
// CHECK-NEXT:  %[[END:.*]] = arith.muli %[[TILES]], %c128 : index
// CHECK:       scf.for %[[ROW:.*]] = %c0 to %[[END]] step %c128 {
// CHECK-NEXT:    tile.load %{{.*}}[%[[ROW]], %c0] {{.*}} -> !tile.tile<128x64xf32, sbuf>
// CHECK:         tile.matmul
// CHECK-NOT:     tile.matmul
// CHECK:         %[[PRODUCT:.*]] = tile.binary %{{.*}}, %{{.*}} {op = "add"} : {{.*}} -> !tile.tile<128x96xf32, sbuf>
// CHECK-NEXT:    tile.extract %[[PRODUCT]][%c0]
// CHECK:         tile.reduce %[[PRODUCT]] {op = "add"}
// CHECK-NOT:     tile.load
// CHECK:         tile.store {{.*}}[%[[ROW]], %c0] : !tile.tile<128x96xf32, sbuf>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @short_token_rows(%x: tensor<256x64xf32>, %w: tensor<64x96xf32>, %b: tensor<96xf32>, %g: tensor<96xf32>, %h: tensor<96xf32>) -> tensor<4x64x96xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 64 : i64]]} {
  %0 = torch.aten.addmm %b, %x, %w {beta = 1 : i64, alpha = 1 : i64, neuron.size_bounds = ["s0*s1", ""]} : (tensor<96xf32>, tensor<256x64xf32>, tensor<64x96xf32>) -> tensor<256x96xf32>
  %1 = torch.aten.view %0 {size = array<i64: 4, 64, 96>, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<256x96xf32>) -> tensor<4x64x96xf32>
  %2, %3, %4 = torch.aten.native_layer_norm %1, %g, %h {normalized_shape = array<i64: 96>, eps = 1.000000e-05 : f64, neuron.size_bounds = ["s0", "s1", ""]} : (tensor<4x64x96xf32>, tensor<96xf32>, tensor<96xf32>) -> (tensor<4x64x96xf32>, tensor<4x64x1xf32>, tensor<4x64x1xf32>)
  func.return %2 : tensor<4x64x96xf32>
}

// -----

// Attention over keys a size bucket pads (`neuron.padded_keys`: the call's s1 keys, padded to 256): the heads'
// work is emitted once per key width (128 and 256 keys), each in a loop of one trip when the call's
// ceil(s1 / 128) key blocks are that many and of none otherwise, and the key and value rows of padded keys are
// set to 0 as they load (a select on key position - s1 < 0), so that unwritten padding (NaN) never meets a -inf
// score.
// CHECK-LABEL: func.func @padded_keys(%q: memref<2x256x16xf32, #mem<hbm>>, %k: memref<2x256x16xf32, #mem<hbm>>, %v: memref<2x256x16xf32, #mem<hbm>>, %mask: memref<1x1x256xf32, #mem<hbm>>, %s1: index)
// CHECK:       %[[ROUNDED:.*]] = arith.addi %s1, %c127 : index
// CHECK-NEXT:  %[[TILES:.*]] = arith.floordivsi %[[ROUNDED]], %c128 : index
// CHECK-NEXT:  %[[END:.*]] = arith.muli %[[TILES]], %c128 : index
// CHECK-NEXT:  %[[BLOCKS:.*]] = arith.floordivsi %[[END]], %c128 : index
// CHECK:       %[[TWO:.*]] = arith.floordivsi %[[BLOCKS]], %c2 : index
// CHECK-NEXT:  %[[NOT_TWO:.*]] = arith.muli %[[TWO]], %c_neg1 : index
// CHECK-NEXT:  %[[ONE:.*]] = arith.addi %c1, %[[NOT_TWO]] : index
// CHECK-NEXT:  scf.for %{{.*}} = %c0 to %[[ONE]] step %c1 {
// CHECK-NEXT:    scf.for %[[B:.*]] = %c0 to %c2 step %c1 {
// CHECK:           %[[KEYS:.*]] = tile.load %{{.*}}[%[[B]], %c0, %c0, %c0] {{.*}} -> !tile.tile<128x1x16xf32, sbuf>
// CHECK-NEXT:      %[[NEG:.*]] = arith.muli %s1, %c_neg1 : index
// CHECK-NEXT:      %[[POSITIONS:.*]] = tile.iota %[[NEG]] {steps = array<i64: 128, 0>, channel_multiplier = 1 : i64} : !tile.tile<128x1x16xf32, sbuf>
// CHECK-NEXT:      %[[REAL:.*]] = tile.binary_scalar %[[POSITIONS]] {op = "is_lt", scalar = 0.000000e+00 : f64}
// CHECK-NEXT:      %[[ZEROS:.*]] = tile.fill {value = 0.000000e+00 : f64} : !tile.tile<128x1x16xf32, sbuf>
// CHECK-NEXT:      tile.select %[[REAL]], %[[KEYS]], %[[ZEROS]]
// CHECK:           tile.select
// CHECK:           tile.matmul {{.*}} -> !tile.tile<128x128xf32, psum>
// CHECK:           tile.load %{{.*}} : memref<2x256x256xf32, strided<[0, 0, 1]>, #mem<hbm>> -> !tile.tile<128x128xf32, sbuf>
// CHECK:       scf.for %{{.*}} = %c0 to %[[TWO]] step %c1 {
// CHECK-NEXT:    scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK:           tile.load {{.*}} -> !tile.tile<128x2x16xf32, sbuf>
// CHECK:           tile.select
// CHECK:           tile.matmul {{.*}} -> !tile.tile<128x256xf32, psum>
// CHECK:           tile.load %{{.*}} : memref<2x256x256xf32, strided<[0, 0, 1]>, #mem<hbm>> -> !tile.tile<128x256xf32, sbuf>
func.func @padded_keys(%q: tensor<2x256x16xf32>, %k: tensor<2x256x16xf32>, %v: tensor<2x256x16xf32>, %mask: tensor<1x1x256xf32>) -> tensor<2x256x16xf32> attributes {neuron.size_arguments = [["s1", 1 : i64, 256 : i64]]} {
  %out, %lse = torch.aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v, %mask {neuron.size_bounds = ["", "s1", ""], neuron.padded_keys = "s1"} : (tensor<2x256x16xf32>, tensor<2x256x16xf32>, tensor<2x256x16xf32>, tensor<1x1x256xf32>) -> (tensor<2x256x16xf32>, tensor<2x256xf32>)
  func.return %out : tensor<2x256x16xf32>
}

// -----

// A gather (here an embedding of [4, 256] token ids) whose output dimensions are bounded: the batch loop runs the
// call's s0 trips and the token rows ceil(s1 / 128) row tiles, each an indirect DMA of 128 rows.
// CHECK-LABEL: func.func @gathered_rows(%w: memref<96x32xf32, #mem<hbm>>, %i: memref<4x256xi64, #mem<hbm>>, %s0: index, %s1: index)
// CHECK:       %[[ROUNDED:.*]] = arith.addi %s1, %c127 : index
// CHECK-NEXT:  %[[TILES:.*]] = arith.floordivsi %[[ROUNDED]], %c128 : index
// CHECK-NEXT:  %[[END:.*]] = arith.muli %[[TILES]], %c128 : index
// CHECK:       scf.for %[[B:.*]] = %c0 to %s0 step %c1 {
// CHECK-NEXT:    scf.for %[[ROW:.*]] = %c0 to %[[END]] step %c128 {
// CHECK:           tile.gather {{.*}} -> !tile.tile<128x32xf32, sbuf>
// CHECK-NEXT:      tile.store %{{.*}}, %{{.*}}[%[[B]], %[[ROW]], %c0]
// CHECK-NEXT:    }
// CHECK-NEXT:  }
func.func @gathered_rows(%w: tensor<96x32xf32>, %i: tensor<4x256xi64>) -> tensor<4x256x32xf32> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 256 : i64]]} {
  %0 = torch.aten.embedding %w, %i {neuron.size_bounds = ["s0", "s1", ""]} : (tensor<96x32xf32>, tensor<4x256xi64>) -> tensor<4x256x32xf32>
  func.return %0 : tensor<4x256x32xf32>
}

// -----

// A [b, s, s] comparison (transformers' mask construction) whose key columns are bounded too: the bucket's 512
// columns are four 128-column blocks, so each row tile runs one tile as wide as the call's blocks, the tile loop
// emitted once per width (128 to 512) in a loop of one trip when the call's ceil(s1 / 128) is that many blocks
// and of none otherwise: [c >= j] is (c + 4 - j) // 4 for a count c in 1..4.
// CHECK-LABEL: func.func @key_columns(%x: memref<2x512x512xf32, #mem<hbm>>, %s0: index, %s1: index)
// CHECK:       %[[ROUNDED:.*]] = arith.addi %s1, %c127 : index
// CHECK-NEXT:  %[[TILES:.*]] = arith.floordivsi %[[ROUNDED]], %c128 : index
// CHECK-NEXT:  %[[END:.*]] = arith.muli %[[TILES]], %c128 : index
// CHECK-NEXT:  %[[COUNT:.*]] = arith.floordivsi %[[END]], %c128 : index
// CHECK-NEXT:  %[[SHIFT2:.*]] = arith.addi %[[COUNT]], %c2 : index
// CHECK-NEXT:  %[[AT2:.*]] = arith.floordivsi %[[SHIFT2]], %c4 : index
// CHECK-NEXT:  %[[SHIFT3:.*]] = arith.addi %[[COUNT]], %c1 : index
// CHECK-NEXT:  %[[AT3:.*]] = arith.floordivsi %[[SHIFT3]], %c4 : index
// CHECK-NEXT:  %[[AT4:.*]] = arith.floordivsi %[[COUNT]], %c4 : index
// CHECK-NEXT:  %[[ONE:.*]] = arith.subi %c1, %[[AT2]] : index
// CHECK-NEXT:  %[[TWO:.*]] = arith.subi %[[AT2]], %[[AT3]] : index
// CHECK-NEXT:  %[[THREE:.*]] = arith.subi %[[AT3]], %[[AT4]] : index
// CHECK:       scf.for %[[B:.*]] = %c0 to %s0 step %c1 {
// CHECK-NEXT:    scf.for %[[ROW:.*]] = %c0 to %[[END]] step %c128 {
// CHECK-NEXT:      scf.for %{{.*}} = %c0 to %[[ONE]] step %c1 {
// CHECK-NEXT:        tile.load %x[%[[B]], %[[ROW]], %c0] {{.*}} -> !tile.tile<128x128xf32, sbuf>
// CHECK-NEXT:        tile.binary_scalar {{.*}} -> !tile.tile<128x128xi1, sbuf>
// CHECK-NEXT:        tile.store
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.for %{{.*}} = %c0 to %[[TWO]] step %c1 {
// CHECK-NEXT:        tile.load {{.*}} -> !tile.tile<128x256xf32, sbuf>
// CHECK:           scf.for %{{.*}} = %c0 to %[[THREE]] step %c1 {
// CHECK-NEXT:        tile.load {{.*}} -> !tile.tile<128x384xf32, sbuf>
// CHECK:           scf.for %{{.*}} = %c0 to %[[AT4]] step %c1 {
// CHECK-NEXT:        tile.load {{.*}} -> !tile.tile<128x512xf32, sbuf>
// CHECK-NEXT:        tile.binary_scalar
// CHECK-NEXT:        tile.store
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
func.func @key_columns(%x: tensor<2x512x512xf32>) -> tensor<2x512x512xi1> attributes {neuron.size_arguments = [["s0", 1 : i64, 2 : i64], ["s1", 1 : i64, 512 : i64]]} {
  %0 = torch.aten.gt.Scalar %x {other = 0.000000e+00 : f64, neuron.size_bounds = ["s0", "s1", "s1"]} : (tensor<2x512x512xf32>) -> tensor<2x512x512xi1>
  func.return %0 : tensor<2x512x512xi1>
}

// -----

// A lower bucket's [b, 1, 64, 64] attention mask (transformers' mask code): the comparison of broadcast positions
// can only tile it a batch per trip, [64, 64] blocks under a loop over the call's s0 batches, and the `&` of two
// such masks, whose free axis of 64 columns is narrow, keeps the same blocks (`BLOCK_SIDE`) instead of running
// merged [128, 128] tiles over the whole bucket: the two nests fuse and the comparison never reaches HBM.
// CHECK-LABEL: func.func @mask_blocks(
// CHECK:       scf.for %[[B:.*]] = %c0 to %s0 step %c1 {
// CHECK:         %[[EQ:.*]] = tile.binary %{{.*}}, %{{.*}} {op = "is_equal"} : {{.*}} -> !tile.tile<64x64xi1, sbuf>
// CHECK-NEXT:    %[[M:.*]] = tile.load %{{.*}}[%[[B]], %c0, %c0] {{.*}} -> !tile.tile<64x64xi1, sbuf>
// CHECK-NEXT:    %[[AND:.*]] = tile.binary %[[M]], %[[EQ]] {op = "bitwise_and"}
// CHECK-NEXT:    tile.store %[[AND]], %{{.*}}[%[[B]], %c0, %c0] : !tile.tile<64x64xi1, sbuf>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @mask_blocks(%i: tensor<4x1x64x1xi64>, %j: tensor<4x1x1x64xi64>, %m: tensor<4x1x64x64xi1>) -> tensor<4x1x64x64xi1> attributes {neuron.size_arguments = [["s0", 1 : i64, 4 : i64], ["s1", 1 : i64, 64 : i64]]} {
  %0 = torch.aten.eq.Tensor %i, %j {neuron.size_bounds = ["s0", "", "s1", "s1"]} : (tensor<4x1x64x1xi64>, tensor<4x1x1x64xi64>) -> tensor<4x1x64x64xi1>
  %1 = torch.aten.bitwise_and.Tensor %m, %0 {neuron.size_bounds = ["s0", "", "s1", "s1"]} : (tensor<4x1x64x64xi1>, tensor<4x1x64x64xi1>) -> tensor<4x1x64x64xi1>
  func.return %1 : tensor<4x1x64x64xi1>
}

// -----

// The same mask for a batch of one (Dynamo specialises it): no dimension can follow the call (64 rows are less
// than a row tile), and the `&` still takes the comparison's [64, 64] block rather than merged [128, 32] tiles,
// so the comparison's tile reaches it in straight-line code without a store and a load.
// CHECK-LABEL: func.func @mask_block_of_one(
// CHECK-NOT:   scf.for
// CHECK:       %[[EQ:.*]] = tile.binary %{{.*}}, %{{.*}} {op = "is_equal"} : {{.*}} -> !tile.tile<64x64xi1, sbuf>
// CHECK-NOT:   tile.store
// CHECK:       %[[M:.*]] = tile.load %{{.*}}[%c0, %c0] {{.*}} -> !tile.tile<64x64xi1, sbuf>
// CHECK-NEXT:  %[[AND:.*]] = tile.binary %[[M]], %[[EQ]] {op = "bitwise_and"}
// CHECK-NEXT:  tile.store %[[AND]], %{{.*}}[%c0, %c0] : !tile.tile<64x64xi1, sbuf>
// CHECK-NEXT:  func.return
func.func @mask_block_of_one(%i: tensor<1x1x64x1xi64>, %j: tensor<1x1x1x64xi64>, %m: tensor<1x1x64x64xi1>) -> tensor<1x1x64x64xi1> attributes {neuron.size_arguments = [["s1", 1 : i64, 64 : i64]]} {
  %0 = torch.aten.eq.Tensor %i, %j {neuron.size_bounds = ["", "", "s1", "s1"]} : (tensor<1x1x64x1xi64>, tensor<1x1x1x64xi64>) -> tensor<1x1x64x64xi1>
  %1 = torch.aten.bitwise_and.Tensor %m, %0 {neuron.size_bounds = ["", "", "s1", "s1"]} : (tensor<1x1x64x64xi1>, tensor<1x1x64x64xi1>) -> tensor<1x1x64x64xi1>
  func.return %1 : tensor<1x1x64x64xi1>
}
