"""The FX importer: an ATen-level `torch.fx.GraphModule` becomes a torch-dialect `func.func @main`.

Placeholders become function arguments, tensor constants (`get_attr`) become extra trailing arguments whose
values the caller supplies, each `call_function` on an ATen overload becomes the torch op of that overload, and
the output becomes `func.return`. Shapes and dtypes come from each node's fake-tensor metadata (`meta["val"]`).
Each op is located at the user's source line (the last frame of the node's `stack_trace`) and named by the
module path that ran it (`model.layers.0.mlp`), so diagnostics and profiles point at the model's code.

Errors name the FX node, its ATen op and the user's source line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, NameLoc, StringAttr, TensorType, UnknownLoc
from xdsl.ir import Attribute, Block, Region, SSAValue

from neuron_mlir.ir.dialects.neuron import TARGET_ATTR_NAME, TargetAttr
from neuron_mlir.ir.dialects.torch import element_type_for_dtype, op_class_for
from neuron_mlir.ir.locations import describe_location, source_location


class GraphImportError(RuntimeError):
    """A graph the importer cannot represent; the message names the node, its op and the source line."""


@dataclass
class GraphSignature:
    """How the imported function's arguments and results map to the FX graph's inputs and outputs."""

    num_inputs: int  # FX placeholders, in order, are the first arguments
    constants: list[torch.Tensor] = field(default_factory=list)  # then these, as trailing arguments
    # per FX output: the index of the function result that carries it, or None for a None output
    outputs: list[int | None] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def node_location(node: torch.fx.Node) -> Attribute:
    """`loc("model.l1"("file.py":12:0))` from a node's stack trace and module stack (unknown if absent)."""
    trace = node.meta.get("stack_trace") or ""
    frames = _FRAME.findall(trace)
    module_path = _module_path(node)
    if not frames:
        return NameLoc(StringAttr(module_path), UnknownLoc()) if module_path else UnknownLoc()
    filename, line = frames[-1]
    return source_location(filename, int(line), 0, module_path)


def _module_path(node: torch.fx.Node) -> str | None:
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
    if not stack:
        return None
    path = list(stack.values())[-1][0]
    # Dynamo spells paths like "L['self'].layers[0].mlp": the root module is `model`
    path = re.sub(r"^L\['[^']*'\]", "model", str(path))
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\['([^']*)'\]", r".\1", path)
    return path


def describe_node(node: torch.fx.Node) -> str:
    where = describe_location(node_location(node))
    target = getattr(node.target, "__name__", str(node.target))
    return f"FX node '{node.name}' ({target})" + (f" at {where}" if where else "")


def tensor_type(value: Any, node: torch.fx.Node) -> TensorType:
    if not isinstance(value, torch.Tensor):
        raise GraphImportError(f"{describe_node(node)}: expected a tensor value, got {type(value).__name__}")
    shape = []
    for extent in value.shape:
        if not isinstance(extent, int):
            raise GraphImportError(f"{describe_node(node)}: symbolic size {extent} is not supported yet")
        shape.append(extent)
    return TensorType(element_type_for_dtype(value.dtype), shape)


def _result_types(node: torch.fx.Node) -> list[Attribute]:
    value = node.meta.get("val")
    if value is None:
        raise GraphImportError(f"{describe_node(node)}: the node has no fake-tensor metadata (meta['val'])")
    if isinstance(value, list | tuple):
        return [tensor_type(v, node) for v in value]
    return [tensor_type(value, node)]


class FxImporter:
    def __init__(self, graph_module: torch.fx.GraphModule, target: str = "trn2", name: str = "main"):
        self.graph_module = graph_module
        self.target = target
        self.name = name
        self.values: dict[torch.fx.Node, SSAValue | list[SSAValue]] = {}

    def import_graph(self) -> tuple[ModuleOp, GraphSignature]:
        graph = self.graph_module.graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        constants = [n for n in graph.nodes if n.op == "get_attr"]
        arg_types = [self._placeholder_type(n) for n in placeholders]
        constant_values = [self._constant(n) for n in constants]
        arg_types += [tensor_type(t, n) for t, n in zip(constant_values, constants, strict=True)]
        block = Block(arg_types=arg_types)
        for node, arg in zip([*placeholders, *constants], block.args, strict=True):
            arg.name_hint = _ssa_name(node.name)
            self.values[node] = arg
        signature = GraphSignature(num_inputs=len(placeholders), constants=constant_values)
        results: list[SSAValue] = []
        for node in graph.nodes:
            if node.op == "call_function":
                self._call_function(node, block)
            elif node.op == "output":
                results = self._output(node, signature)
            elif node.op not in ("placeholder", "get_attr"):
                raise GraphImportError(f"{describe_node(node)}: FX '{node.op}' nodes are not supported")
        return_op = func.ReturnOp(*results)
        block.add_op(return_op)
        function = func.FuncOp(
            self.name, ([a.type for a in block.args], [r.type for r in results]), Region(block)
        )
        module = ModuleOp([function])
        module.attributes[TARGET_ATTR_NAME] = TargetAttr(self.target)
        module.attributes["neuron.source"] = StringAttr("fx")
        return module, signature

    def _placeholder_type(self, node: torch.fx.Node) -> TensorType:
        value = node.meta.get("val")
        if value is None:
            value = node.meta.get("example_value")
        return tensor_type(value, node)

    def _constant(self, node: torch.fx.Node) -> torch.Tensor:
        value = getattr(self.graph_module, str(node.target))
        if not isinstance(value, torch.Tensor):
            raise GraphImportError(f"{describe_node(node)}: constant of type {type(value).__name__}")
        return value.detach()

    def _value(self, argument: Any) -> Any:
        if isinstance(argument, torch.fx.Node):
            if argument not in self.values:
                raise GraphImportError(f"{describe_node(argument)} is used before it is defined")
            return self.values[argument]
        if isinstance(argument, list | tuple):
            return [self._value(a) for a in argument]
        return argument

    def _call_function(self, node: torch.fx.Node, block: Block) -> None:
        import operator

        if node.target is operator.getitem:
            source, index = node.args
            values = self.values[source]  # type: ignore[index]
            assert isinstance(values, list)
            self.values[node] = values[index]  # type: ignore[index]
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise GraphImportError(f"{describe_node(node)}: only ATen operators are imported")
        target, raw_arguments = _with_scalar_overload(node.target, _named_arguments(node))
        op_class = op_class_for(str(target))
        if op_class is None:
            raise GraphImportError(f"{describe_node(node)}: the torch dialect has no op for {target}")
        arguments = {name: self._value(value) for name, value in raw_arguments.items()}
        try:
            op = op_class.from_args(arguments, _result_types(node))
        except (ValueError, TypeError, AssertionError) as error:
            raise GraphImportError(f"{describe_node(node)}: {error}") from error
        op.location = node_location(node)
        block.add_op(op)
        if len(op.results) == 1 and not isinstance(node.meta.get("val"), list | tuple):
            op.results[0].name_hint = _ssa_name(node.name)
            self.values[node] = op.results[0]
        else:
            self.values[node] = list(op.results)

    def _output(self, node: torch.fx.Node, signature: GraphSignature) -> list[SSAValue]:
        (outputs,) = node.args
        if not isinstance(outputs, list | tuple):
            outputs = (outputs,)
        results: list[SSAValue] = []
        for output in outputs:
            if output is None:
                signature.outputs.append(None)
                signature.output_names.append("None")
                continue
            if not isinstance(output, torch.fx.Node):
                raise GraphImportError(f"{describe_node(node)}: output {output!r} is not a tensor")
            value = self.values[output]
            if isinstance(value, list):
                raise GraphImportError(f"{describe_node(output)}: returning a tuple-valued node is not supported")
            signature.outputs.append(len(results))
            signature.output_names.append(output.name)
            results.append(value)
        return results


def _named_arguments(node: torch.fx.Node) -> dict[str, Any]:
    schema = node.target._schema  # type: ignore[union-attr]
    arguments = {spec.name: value for spec, value in zip(schema.arguments, node.args, strict=False)}
    arguments.update(node.kwargs)
    return arguments


def _with_scalar_overload(target: torch._ops.OpOverload, arguments: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Python numbers in Tensor positions (FX's wrapped numbers) select the op's Scalar overload.

    `aten.mul.Tensor(x, 2.0)` is `aten.mul.Scalar(x, 2.0)`: PyTorch promotes wrapped numbers exactly as scalars.
    """
    schema = target._schema
    wrapped = {
        spec.name
        for spec in schema.arguments
        if isinstance(arguments.get(spec.name), int | float | bool) and str(spec.type) == "Tensor"
    }
    if not wrapped:
        return target, arguments
    packet = target.overloadpacket
    for overload_name in packet.overloads():
        candidate = getattr(packet, overload_name)
        specs = {spec.name: str(spec.type) for spec in candidate._schema.arguments}
        if set(specs) != {spec.name for spec in schema.arguments}:
            continue
        if all(specs[name] in ("Scalar", "number") for name in wrapped) and all(
            specs[spec.name] == str(spec.type) for spec in schema.arguments if spec.name not in wrapped
        ):
            return candidate, arguments
    return target, arguments


def _ssa_name(name: str) -> str | None:
    # xDSL treats a trailing "_<n>" as a uniquing suffix and drops it; "addmm_1" stays readable as "addmm1"
    cleaned = re.sub(r"_(\d+)$", r"\1", re.sub(r"[^A-Za-z0-9_]", "_", name))
    if not cleaned or cleaned[0].isdigit():
        cleaned = "v" + cleaned
    return cleaned


def import_fx_graph(
    graph_module: torch.fx.GraphModule, target: str = "trn2", name: str = "main"
) -> tuple[ModuleOp, GraphSignature]:
    """Import an ATen-level FX graph (see the module docstring)."""
    return FxImporter(graph_module, target, name).import_graph()
