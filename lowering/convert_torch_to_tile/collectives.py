"""Collective lowerings: the functional collectives become `tile.collective`s on whole HBM tensors.

A functional collective (`torch.c10d_functional.all_reduce`, `all_gather_into_tensor`, `reduce_scatter_tensor`,
`all_to_all_single`, `broadcast`, and the coalesced forms, which exchange a list of tensors: one collective per
tensor) names its process group; the module's `neuron.process_groups` attribute (written by the
frontend, which resolves each name) gives the group's ranks, and they become the op's replica group. The result
is a fresh HBM tensor the collective writes whole; `wait_tensor` is its input (the exchange is complete when the
collective's instruction is, and the synchronisation of the neuron level orders every reader after it).
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.torch import (
    COALESCED_COLLECTIVE_KINDS,
    COLLECTIVE_KINDS,
    PROCESS_GROUPS_ATTR,
    all_to_all_splits,
    process_group_ranks,
)
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    alloc,
    arguments_of,
    result_element_type,
    result_shape,
    tensor_shape,
)
from neuron_mlir.lowering.loop_nests import LoopNestBuilder
from neuron_mlir.runtime.collectives import REDUCTIONS
from neuron_mlir.runtime.validate import INT32_MAX


def legal(op: Operation) -> str | None:
    """A collective lowers when its group is known to the module, its reduction is one the collective queue
    computes, its group size agrees with the group, (all_to_all_single) its splits give one count per rank adding
    up to the tensors' rows and (broadcast) its source is a rank of the group."""
    if op.name == "torch.c10d_functional.wait_tensor":
        return None
    args = arguments_of(op)
    ranks = process_group_ranks(op, str(args["group_name"]))
    if ranks is None:
        return (
            f"the process group '{args['group_name']}' is not in the module's {PROCESS_GROUPS_ATTR} (the frontend "
            "records the ranks of every group a graph names)"
        )
    if not ranks:
        return f"the process group '{args['group_name']}' has no ranks"
    if not all(0 <= rank <= INT32_MAX for rank in ranks) or len(set(ranks)) != len(ranks):
        # a program's replica groups are distinct ranks of a 32-bit count (runtime/validate.py)
        return f"the process group '{args['group_name']}' has ranks {list(ranks)}: distinct ranks in [0, 2^31) only"
    if "reduce_op" in args and str(args["reduce_op"]).lower() not in REDUCTIONS:
        return f"reduction '{args['reduce_op']}' is not one of {', '.join(sorted(REDUCTIONS))}"
    if "group_size" in args and int(args["group_size"]) != len(ranks):
        return f"group_size {args['group_size']} but the group '{args['group_name']}' has {len(ranks)} ranks"
    if op.name == "torch.c10d_functional.broadcast" and not 0 <= int(args["src"]) < len(ranks):
        return f"source rank {args['src']} is not a rank of the group '{args['group_name']}' ({len(ranks)} ranks)"
    if op.name == "torch.c10d_functional.all_to_all_single":
        shapes = {"input_split_sizes": tensor_shape(args["input"]), "output_split_sizes": result_shape(op)}
        for name, shape in shapes.items():
            splits = list(args[name] or [])
            rows = shape[0] if shape else 1
            if splits and len(splits) != len(ranks):
                return f"{name} {splits} give {len(splits)} counts for a group of {len(ranks)} ranks"
            if splits and sum(splits) != rows:
                return f"{name} {splits} add up to {sum(splits)} rows, not the {rows} of its tensor"
            if not splits and rows % len(ranks):
                return f"{rows} rows do not split equally over {len(ranks)} ranks"
    return None


def _collective(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    kind = COLLECTIVE_KINDS[op.name]
    ranks = process_group_ranks(op, str(args["group_name"]))
    assert ranks is not None, "legal() checked the group"
    result = alloc(em, result_shape(op), result_element_type(op))
    reduce = str(args["reduce_op"]).lower() if "reduce_op" in args else None
    root = int(args["src"]) if kind == "broadcast" else None
    splits = all_to_all_splits(op) if kind == "all_to_all" else None
    em.insert(tile.CollectiveOp(kind, args["input"], result, [ranks], reduce, root, splits))
    return [result]


def _coalesced(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """One collective per tensor of the list, in the list's order (every rank issues them in that order)."""
    kind = COALESCED_COLLECTIVE_KINDS[op.name]
    ranks = process_group_ranks(op, str(args["group_name"]))
    assert ranks is not None, "legal() checked the group"
    reduce = str(args["reduce_op"]).lower() if "reduce_op" in args else None
    results = []
    for index, source in enumerate(args["inputs"]):
        result = alloc(em, result_shape(op, index), result_element_type(op, index))
        em.insert(tile.CollectiveOp(kind, source, result, [ranks], reduce))
        results.append(result)
    return results


def _wait(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [args["tensor"]]


COLLECTIVE_LOWERINGS: dict[str, Lowering] = {
    **dict.fromkeys(COLLECTIVE_KINDS, _collective),
    **dict.fromkeys(COALESCED_COLLECTIVE_KINDS, _coalesced),
    "torch.c10d_functional.wait_tensor": _wait,
}
