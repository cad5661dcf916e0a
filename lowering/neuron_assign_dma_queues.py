"""neuron-assign-dma-queues: give the DMA instructions of each function distinct queues, round-robin.

Input contract: neuron-level functions after loop unrolling (`neuron-unroll-loops`), whose copies of a loop body
repeat the queue numbers of the body they were cloned from.

Output guarantee: the same instructions; the k-th DMA instruction of a function in program order runs on queue
k mod the target's DMA queue count. Each queue is in order, so two transfers on one queue never overlap even when
nothing else orders them: after unrolling, the load of the next tile shared a queue with the load of this one and
waited for it, and double buffering overlapped nothing. Spread over the queues, transfers wait only for what the
synchronisation pass says they depend on, and their fixed latencies overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.ir.dialects.neuron import InstructionOp
from neuron_mlir.lowering.ir_queries import defined_functions
from neuron_mlir.runtime.hardware import Engine


@dataclass(frozen=True)
class NeuronAssignDmaQueuesPass(ModulePass):
    name = "neuron-assign-dma-queues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        queues = neuron.target_of(op).dma_queues
        for function in defined_functions(op):
            transfers = [
                i for i in function.body.walk() if isinstance(i, InstructionOp) and i.engine_kind is Engine.DMA
            ]
            for number, transfer in enumerate(transfers):
                transfer.properties["queue"] = IntegerAttr(number % queues, i64)
