"""Graph partitioning: the nodes the NeuronCore can run are compiled, the others run eagerly on the CPU in place.

An ATen graph with some unsupported nodes is split into maximal regions of supported nodes (torch.fx's
capability-based partitioner, which never creates a cycle between regions). Each region becomes a submodule of
the returned graph module, which `compile_region` replaces by the compiled callable; the unsupported nodes stay in
the outer graph, so they execute with PyTorch between the compiled regions and their values flow in and out as
ordinary tensors. The outer graph keeps the original inputs and outputs, so callers cannot tell the difference
except in speed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

RegionCompiler = Callable[[torch.fx.GraphModule, str], Callable[..., Any]]


class _Supported(OperatorSupportBase):
    def __init__(self, is_supported: Callable[[torch.fx.Node], bool]):
        self.is_supported = is_supported

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            return True  # goes with its producer
        return self.is_supported(node)


class CompiledRegion(torch.nn.Module):
    """A compiled region standing in for its submodule: call it like the submodule, get tensors back."""

    def __init__(self, compiled: Callable[..., Any], returns_tuple: bool):
        super().__init__()
        self.compiled = compiled
        self.returns_tuple = returns_tuple

    def forward(self, *args: Any) -> Any:
        outputs = self.compiled(list(args))
        return tuple(outputs) if self.returns_tuple else outputs[0]


def boxed_call(module: torch.fx.GraphModule) -> Callable[[list[Any]], list[Any]]:
    """`module` as a boxed callable (AOTAutograd's convention: it takes the argument list, empties it so that the
    arguments can be freed as soon as they are used, and returns a list)."""

    def run(args: list[Any]) -> list[Any]:
        inputs = list(args)
        args.clear()
        result = module(*inputs)
        return list(result) if isinstance(result, list | tuple) else [result]

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _copy_input_metadata(outer: torch.fx.GraphModule, call: torch.fx.Node, region: torch.fx.GraphModule) -> None:
    """Give the region's placeholders the fake-tensor metadata of the values that feed them."""
    placeholders = [n for n in region.graph.nodes if n.op == "placeholder"]
    for placeholder, argument in zip(placeholders, call.args, strict=True):
        if isinstance(argument, torch.fx.Node):
            for key in ("val", "tensor_meta", "example_value"):
                if key in argument.meta and key not in placeholder.meta:
                    placeholder.meta[key] = argument.meta[key]


def partition(
    graph_module: torch.fx.GraphModule,
    is_supported: Callable[[torch.fx.Node], bool],
    compile_region: RegionCompiler,
) -> tuple[torch.fx.GraphModule, int]:
    """Split `graph_module` and compile its supported regions; returns (outer module, number of regions)."""
    partitioner = CapabilityBasedPartitioner(graph_module, _Supported(is_supported), allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    fused = partitioner.fuse_partitions(partitions)
    regions = 0
    for node in list(fused.graph.nodes):
        if node.op != "call_module":
            continue
        region = fused.get_submodule(str(node.target))
        assert isinstance(region, torch.fx.GraphModule)
        _copy_input_metadata(fused, node, region)
        output = next(n for n in region.graph.nodes if n.op == "output")
        returns_tuple = isinstance(output.args[0], list | tuple)
        compiled = compile_region(region, str(node.target))
        setattr(fused, str(node.target), CompiledRegion(compiled, returns_tuple))
        regions += 1
    fused.recompile()
    return fused, regions
