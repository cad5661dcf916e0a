"""View lowerings: ATen view ops become `tile.view`s, new strided descriptions of the same HBM memory.

Value semantics make aliasing safe: nothing at this level writes to an existing tensor, so `alias`, `detach`,
`clone` and `lift_fresh_copy` can share their input's memory. A reshape that strides cannot express (merging
dimensions that are not contiguous together) copies into a contiguous tensor first.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Operation, SSAValue

from neuron_mlir.lowering.convert_torch_to_tile.common import Lowering, layout_of, result_shape, view
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import copy_to
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import LoopNestBuilder


def _same(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [args["self"]]


def _reshape(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    source = args["self"]
    shape = result_shape(op)
    layout = layout_of(source).reshape(shape)
    if layout is None:
        source = copy_to(em, source)
        layout = layout_of(source).reshape(shape)
        assert layout is not None, "a contiguous tensor can always be reshaped"
    return [view(em, source, layout)]


def _permute(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [view(em, args["self"], layout_of(args["self"]).permute(args["dims"]))]


def _t(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    layout = layout_of(args["self"])
    return [view(em, args["self"], layout.transpose(0, 1) if layout.rank == 2 else layout)]


def _transpose(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [view(em, args["self"], layout_of(args["self"]).transpose(args["dim0"], args["dim1"]))]


def _expand(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [view(em, args["self"], layout_of(args["self"]).expand(result_shape(op)))]


def _unsqueeze(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [view(em, args["self"], layout_of(args["self"]).unsqueeze(args["dim"]))]


def _squeeze(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    dims = args.get("dim")
    chosen = None if dims is None else ([dims] if isinstance(dims, int) else list(dims))
    return [view(em, args["self"], layout_of(args["self"]).squeeze(chosen))]


def _select(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    return [view(em, args["self"], layout_of(args["self"]).select(args["dim"], args["index"]))]


def _slice(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    layout: Layout = layout_of(args["self"])
    sliced = layout.slice(args.get("dim", 0), args.get("start"), args.get("end"), args.get("step", 1))
    return [view(em, args["self"], sliced)]


def legal(op: Operation) -> str | None:
    """Every verified view op lowers: the torch dialect's verifier already checks its arguments against the
    operand's shape, and a reshape that strides cannot express copies first."""
    return None


VIEW_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.alias": _same,
    "torch.aten.detach": _same,
    "torch.aten.clone": _same,
    "torch.aten.lift_fresh_copy": _same,
    "torch.aten.view": _reshape,
    "torch.aten._unsafe_view": _reshape,
    "torch.aten.permute": _permute,
    "torch.aten.t": _t,
    "torch.aten.expand": _expand,
    "torch.aten.unsqueeze": _unsqueeze,
    "torch.aten.squeeze.dim": _squeeze,
    "torch.aten.squeeze.dims": _squeeze,
    "torch.aten.select.int": _select,
    "torch.aten.slice.Tensor": _slice,
}
