"""Passes that take the torch dialect through tile to neuron instructions.

`ALL_PASSES` maps each pass name to a lazy factory returning the pass class, so that `neuron-opt` starts
without importing every pass (and never torch). A test checks each key equals the pass's `name` and that the
pass has its lit test in `test/lit/lowering/<name>.mlir`.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _torch_canonicalize() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_canonicalize import TorchCanonicalizePass

    return TorchCanonicalizePass


def _torch_fold_constants() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_fold_constants import TorchFoldConstantsPass

    return TorchFoldConstantsPass


def _torch_recognize_activations() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_recognize_activations import TorchRecognizeActivationsPass

    return TorchRecognizeActivationsPass


def _torch_recognize_rms_norm() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_recognize_rms_norm import TorchRecognizeRmsNormPass

    return TorchRecognizeRmsNormPass


def _torch_auto_cast() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_auto_cast import TorchAutoCastPass

    return TorchAutoCastPass


def _torch_fuse_cross_entropy_backward() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_fuse_cross_entropy_backward import TorchFuseCrossEntropyBackwardPass

    return TorchFuseCrossEntropyBackwardPass


def _torch_fuse_rms_norm_neighbours() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_fuse_rms_norm_neighbours import TorchFuseRmsNormNeighboursPass

    return TorchFuseRmsNormNeighboursPass


def _torch_fuse_batch_norm_casts() -> type[ModulePass]:
    from neuron_mlir.lowering.torch_fuse_batch_norm_casts import TorchFuseBatchNormCastsPass

    return TorchFuseBatchNormCastsPass


def _convert_torch_to_tile() -> type[ModulePass]:
    from neuron_mlir.lowering.convert_torch_to_tile import ConvertTorchToTilePass

    return ConvertTorchToTilePass


def _tile_fuse_matmul_prologues() -> type[ModulePass]:
    from neuron_mlir.lowering.tile_fuse_matmul_prologues import TileFuseMatmulProloguesPass

    return TileFuseMatmulProloguesPass


def _tile_fuse_matmul_chains() -> type[ModulePass]:
    from neuron_mlir.lowering.tile_fuse_matmul_chains import TileFuseMatmulChainsPass

    return TileFuseMatmulChainsPass


def _tile_fuse_epilogues() -> type[ModulePass]:
    from neuron_mlir.lowering.tile_fuse_epilogues import TileFuseEpiloguesPass

    return TileFuseEpiloguesPass


def _tile_fuse_loops() -> type[ModulePass]:
    from neuron_mlir.lowering.tile_fuse_loops import TileFuseLoopsPass

    return TileFuseLoopsPass


def _tile_unroll_streaming_loops() -> type[ModulePass]:
    from neuron_mlir.lowering.tile_unroll_streaming_loops import TileUnrollStreamingLoopsPass

    return TileUnrollStreamingLoopsPass


def _convert_tile_to_neuron() -> type[ModulePass]:
    from neuron_mlir.lowering.convert_tile_to_neuron import ConvertTileToNeuronPass

    return ConvertTileToNeuronPass


def _neuron_allocate_memory() -> type[ModulePass]:
    from neuron_mlir.lowering.neuron_allocate_memory import NeuronAllocateMemoryPass

    return NeuronAllocateMemoryPass


def _neuron_fuse_instructions() -> type[ModulePass]:
    from neuron_mlir.lowering.neuron_fuse_instructions import NeuronFuseInstructionsPass

    return NeuronFuseInstructionsPass


def _neuron_balance_engines() -> type[ModulePass]:
    from neuron_mlir.lowering.neuron_balance_engines import NeuronBalanceEnginesPass

    return NeuronBalanceEnginesPass


def _neuron_assign_dma_queues() -> type[ModulePass]:
    from neuron_mlir.lowering.neuron_assign_dma_queues import NeuronAssignDmaQueuesPass

    return NeuronAssignDmaQueuesPass


def _neuron_unroll_loops() -> type[ModulePass]:
    from neuron_mlir.lowering.neuron_unroll_loops import NeuronUnrollLoopsPass

    return NeuronUnrollLoopsPass


def _neuron_insert_sync() -> type[ModulePass]:
    from neuron_mlir.lowering.neuron_insert_sync import NeuronInsertSyncPass

    return NeuronInsertSyncPass


def _verify_stage_contract() -> type[ModulePass]:
    from neuron_mlir.lowering.verify_stage_contract import VerifyStageContractPass

    return VerifyStageContractPass


def _neuron_pipeline() -> type[ModulePass]:
    from neuron_mlir.lowering.pipelines import NeuronPipelinePass

    return NeuronPipelinePass


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "torch-canonicalize": _torch_canonicalize,
    "torch-fold-constants": _torch_fold_constants,
    "torch-recognize-activations": _torch_recognize_activations,
    "torch-recognize-rms-norm": _torch_recognize_rms_norm,
    "torch-auto-cast": _torch_auto_cast,
    "torch-fuse-cross-entropy-backward": _torch_fuse_cross_entropy_backward,
    "torch-fuse-rms-norm-neighbours": _torch_fuse_rms_norm_neighbours,
    "torch-fuse-batch-norm-casts": _torch_fuse_batch_norm_casts,
    "convert-torch-to-tile": _convert_torch_to_tile,
    "tile-fuse-epilogues": _tile_fuse_epilogues,
    "tile-fuse-matmul-prologues": _tile_fuse_matmul_prologues,
    "tile-fuse-matmul-chains": _tile_fuse_matmul_chains,
    "tile-fuse-loops": _tile_fuse_loops,
    "tile-unroll-streaming-loops": _tile_unroll_streaming_loops,
    "convert-tile-to-neuron": _convert_tile_to_neuron,
    "neuron-fuse-instructions": _neuron_fuse_instructions,
    "neuron-balance-engines": _neuron_balance_engines,
    "neuron-unroll-loops": _neuron_unroll_loops,
    "neuron-assign-dma-queues": _neuron_assign_dma_queues,
    "neuron-allocate-memory": _neuron_allocate_memory,
    "neuron-insert-sync": _neuron_insert_sync,
    "verify-stage-contract": _verify_stage_contract,
    "neuron-pipeline": _neuron_pipeline,
}
