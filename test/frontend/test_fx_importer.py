"""The FX importer, case by case: every kind of argument, result, input and output real graphs hold, symbolic
sizes, constants and buffers, locations, and errors that name the node, its ATen op and the user's line.

Each imported graph goes through `check_import`: verify, print/re-parse/re-print identically, and (given inputs)
torch-level semantics equal to the FX graph's own outputs.
"""

import operator
import re

import pytest
import torch
from torch import nn
from torch._functorch.aot_autograd import aot_function
from xdsl.dialects.builtin import NoneType, TensorType

import neuron_mlir
from neuron_mlir.frontend.backend import decompositions
from neuron_mlir.frontend.fx_importer import GraphImportError, import_fx_graph
from neuron_mlir.frontend.import_check import check_import, print_with_locations


def aten_graph(function, *inputs):
    """The AOTAutograd inference graph of `function` on `inputs`, with the backend's decompositions."""
    graphs = []

    def keep(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module

    aot_function(function, fw_compiler=keep, decompositions=decompositions())(*inputs)
    (graph,) = graphs
    return graph


def checked(function, *inputs):
    """Import the graph of `function`, check it all ways, and return (module text, signature)."""
    graph = aten_graph(function, *inputs)
    placeholders = sum(n.op == "placeholder" for n in graph.graph.nodes)
    # AOTAutograd adds an input of its own for an effect token: then only check structure and text
    module, signature = check_import(graph, list(inputs) if placeholders == len(inputs) else None)
    return print_with_locations(module), signature


def hand_made(build):
    """A GraphModule from `build(graph)`, which adds nodes with real tensors as their `meta["val"]`."""
    graph = torch.fx.Graph()
    build(graph)
    return torch.fx.GraphModule(nn.Module(), graph)


def placeholder(graph, name, value):
    node = graph.placeholder(name)
    node.meta["val"] = value
    return node


def call(graph, target, args, value, **kwargs):
    node = graph.call_function(target, tuple(args), kwargs)
    node.meta["val"] = value
    return node


# -- arguments -------------------------------------------------------------------------------------------------


def test_python_numbers_select_scalar_overloads():
    text, _ = checked(lambda x: x * 2.5 + 1, torch.randn(3, 4))
    assert "torch.aten.mul.Scalar" in text
    assert "other = 2.500000e+00 : f64" in text


def test_a_number_in_the_self_position_becomes_a_0d_full_of_the_promoted_dtype():
    x = torch.arange(6).reshape(2, 3)

    def build(graph):
        node = placeholder(graph, "x", x)
        graph.output((call(graph, torch.ops.aten.sub.Tensor, (2.5, node), 2.5 - x),))

    graph_module = hand_made(build)
    module, _ = check_import(graph_module, [x])
    text = print_with_locations(module)
    assert re.search(r"torch.aten.full {.*dtype = f32.*} : \(\) -> tensor<f32>", text), text
    assert "torch.aten.sub.Tensor" in text


def test_list_arguments():
    def function(x, y):
        return torch.cat([x.permute(1, 0), y], dim=0).sum(dim=[0, 1], keepdim=True), x.view(2, 6)

    text, _ = checked(function, torch.randn(3, 4), torch.randn(2, 3))
    assert "torch.aten.cat [" in text
    assert "dims = array<i64: 1, 0>" in text
    assert "size = array<i64: 2, 6>" in text


def test_a_one_element_list_for_a_fixed_length_argument_is_repeated_as_the_kernel_reads_it():
    function = lambda x: torch.ops.aten.avg_pool2d(x, [2, 2], [2, 2], [1])  # noqa: E731
    text, _ = checked(function, torch.randn(1, 2, 6, 6))
    assert "padding = array<i64: 1, 1>" in text


def test_none_arguments_and_optional_tensor_lists():
    def function(x, index, value):
        y = torch.clamp(x, max=1.0)  # min is None
        return torch.ops.aten.index_put(y, [None, index], value)  # a None position in Tensor?[]

    text, _ = checked(function, torch.randn(3, 4), torch.tensor([0, 2]), torch.randn(3, 2))
    assert "torch.aten.clamp %" in text
    assert "torch.aten.index_put %" in text
    assert "[none, %" in text


def test_dtype_device_layout_and_memory_format_arguments():
    def function(x):
        half = torch.ops.aten._to_copy(x, dtype=torch.float16, layout=torch.strided, device=torch.device("cpu"))
        ones = torch.ops.aten.ones_like(x, dtype=torch.int64, memory_format=torch.preserve_format)
        zeros = torch.zeros(3, dtype=torch.int32, device="cpu")
        return half, ones, zeros

    text, _ = checked(function, torch.randn(3, 4))
    assert "dtype = f16" in text
    assert 'layout = "strided"' in text
    assert 'device = "cpu"' in text
    assert "dtype = i32" in text


def test_integer_and_boolean_tensors():
    def function(a, mask):
        return a * 3 - a.sum(), mask & (a > 2), torch.where(mask, a, 0)

    text, _ = checked(function, torch.randint(0, 5, (4, 5)), torch.rand(4, 5) > 0.5)
    assert "tensor<4x5xi64>" in text
    assert "tensor<4x5xi1>" in text


def test_zero_dimensional_tensors():
    text, _ = checked(lambda s, x: (s * x, s.exp(), x.sum()), torch.tensor(1.5), torch.randn(3))
    assert "(tensor<f32>) -> tensor<f32>" in text


# -- results, inputs and outputs -------------------------------------------------------------------------------


def test_multiple_results_and_their_elements():
    text, _ = checked(lambda x: torch.max(x, dim=1), torch.randn(3, 4))
    assert re.search(r"torch.aten.max.dim .* -> \(tensor<3xf32>, tensor<3xi64>\)", text), text


def test_nested_outputs_and_a_tuple_valued_node_are_flattened():
    x = torch.randn(3, 4)
    values, indices = torch.max(x, 1)

    def build(graph):
        node = placeholder(graph, "x", x)
        both = call(graph, torch.ops.aten.max.dim, (node, 1), (values, indices))
        doubled = call(graph, torch.ops.aten.mul.Scalar, (node, 2.0), x * 2)
        graph.output(((doubled, (node, None)), both))

    graph_module = hand_made(build)
    _module, signature = check_import(graph_module, [x])
    assert signature.outputs == [0, 1, None, 2, 3]
    assert signature.output_spec is not None
    assert signature.output_names == ["mul_scalar", "x", "None", "max_dim[0]", "max_dim[1]"]


def test_unused_inputs_and_inputs_returned_directly():
    x, unused = torch.randn(2, 3), torch.randn(5)

    def build(graph):
        node = placeholder(graph, "x", x)
        placeholder(graph, "unused", unused)
        graph.output((node, call(graph, torch.ops.aten.neg.default, (node,), -x)))

    module, signature = check_import(hand_made(build), [x, unused])
    text = str(module)
    assert "func.func @main(%x: tensor<2x3xf32>, %unused: tensor<5xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)" in text
    assert re.search(r"func.return %x, %neg\w*", text), text
    assert signature.inputs == [0, 1]


def test_undefined_results_have_type_none():
    def function(grad, x, weight):
        return torch.ops.aten.convolution_backward(
            grad, x, weight, [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False]
        )[:2]

    x, weight = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    text, _ = checked(function, torch.randn(1, 3, 3, 3), x, weight)
    assert re.search(r"torch.aten.convolution_backward .*-> \(tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, none\)", text)


def test_a_none_result_type_in_the_module():
    def build(graph):
        grad = placeholder(graph, "grad", torch.randn(1, 3, 3, 3))
        x = placeholder(graph, "x", torch.randn(1, 2, 5, 5))
        w = placeholder(graph, "w", torch.randn(3, 2, 3, 3))
        args = (grad, x, w, [3], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False])
        node = call(graph, torch.ops.aten.convolution_backward.default, args, (None, torch.randn(3, 2, 3, 3), None))
        graph.output((call(graph, operator.getitem, (node, 1), torch.randn(3, 2, 3, 3)),))

    module, _ = check_import(hand_made(build))
    op = next(op for op in module.walk() if op.name == "torch.aten.convolution_backward")
    assert [type(r.type) for r in op.results] == [NoneType, TensorType, NoneType]


# -- constants and buffers -------------------------------------------------------------------------------------


class WithConstants(nn.Module):
    def forward(self, x):
        table = torch.tensor([1.0, 2.0, 3.0])  # a non-splat constant: a trailing argument
        scale = torch.tensor(0.5)  # all elements equal: an aten.full in the IR
        return x * table * scale


def test_tensor_constants_are_fills_or_trailing_arguments():
    from support import capture_aten_graphs_with_inputs

    ((graph, inputs),) = capture_aten_graphs_with_inputs(WithConstants(), torch.randn(2, 3))
    assert any(n.op == "get_attr" for n in graph.graph.nodes)
    module, signature = check_import(graph, inputs)
    text = print_with_locations(module)
    assert len(signature.constants) == 1
    assert signature.constants[0].tolist() == [1.0, 2.0, 3.0]
    assert "torch.aten.full" in text
    assert "fill_value = 5.000000e-01 : f64" in text


def test_constants_compile_and_run_on_the_simulated_core(fresh_compiler):
    from support import assert_close_to_torch

    class Constants(nn.Module):
        def forward(self, x):
            masked = torch.where(x > 0, x, torch.tensor(-1.0))  # a 0-d fill the lowering consumes
            return x * torch.tensor(0.5) + masked, x + torch.tensor([1.0, 2.0, 3.0])

    model, x = Constants(), torch.randn(4, 3)
    compiled = torch.compile(model, backend="neuron-mlir", options={"strict": True})
    assert_close_to_torch(compiled(x), model(x))


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.arange(4.0))
        self.weight = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ self.weight + self.offset


def test_buffers_and_parameters_of_a_traced_module_are_constants():
    graph = torch.fx.symbolic_trace(WithBuffer())
    from torch.fx.passes.shape_prop import ShapeProp

    x = torch.randn(2, 4)
    ShapeProp(graph).propagate(x)
    for node in graph.graph.nodes:  # ShapeProp records tensor_meta; the importer reads meta["val"]
        if node.op == "call_function":
            node.target = {operator.matmul: torch.ops.aten.mm.default, operator.add: torch.ops.aten.add.Tensor}[
                node.target
            ]
        node.meta["val"] = getattr(graph, str(node.target)) if node.op == "get_attr" else None
    ShapeProp(graph).propagate(x)
    for node in graph.graph.nodes:
        if node.op != "get_attr":
            meta = node.meta.get("tensor_meta")
            node.meta["val"] = torch.empty(meta.shape, dtype=meta.dtype) if meta is not None else None
    _module, signature = check_import(graph, [x])
    assert [tuple(c.shape) for c in signature.constants] == [(4, 4), (4,)]


def test_batch_norm_buffers_in_training_are_inputs_and_updated_outputs():
    from support import capture_aten_graphs_with_inputs

    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)).train()
    graphs = capture_aten_graphs_with_inputs(model, torch.randn(2, 2, 6, 6), backward=True)
    forward, inputs = graphs[0]
    module, _signature = check_import(forward, inputs)
    assert "_native_batch_norm_legit_functional" in print_with_locations(module)
    for graph, graph_inputs in graphs[1:]:
        check_import(graph, graph_inputs)


# -- symbolic sizes --------------------------------------------------------------------------------------------


def _dynamic_graph(function, *inputs, table=None):
    from support import capture_aten_graphs_with_inputs

    class Wrapper(nn.Module):
        def forward(self, *args):
            return function(*args)

    torch._dynamo.reset()
    captured = []

    def backend(graph_module, example_inputs):
        from torch._functorch.aot_autograd import aot_module_simplified

        def keep(gm, ex):
            captured.append(gm)
            return gm

        chosen = decompositions() if table is None else table
        return aot_module_simplified(graph_module, example_inputs, fw_compiler=keep, decompositions=chosen)

    compiled = torch.compile(Wrapper(), backend=backend, dynamic=True)
    compiled(*inputs)
    torch._dynamo.reset()
    del capture_aten_graphs_with_inputs
    return captured[0]


def test_symbolic_sizes_are_specialised_with_a_guard():
    x = torch.randn(4, 6)
    graph = _dynamic_graph(lambda t: t.reshape(t.shape[0] * 2, -1).sum(1) * t.shape[1], x)
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    assert any(isinstance(n.meta["val"], torch.SymInt) for n in placeholders), "expected SymInt inputs"
    module, signature = import_fx_graph(graph)
    module.verify()
    text = print_with_locations(module)
    assert "tensor<4x6xf32>" in text
    assert "tensor<8x3xf32>" in text
    real_inputs = [n.meta["val"].node.hint if isinstance(n.meta["val"], torch.SymInt) else x for n in placeholders]
    signature.check_guards(real_inputs)
    assert len(signature.arguments(real_inputs)) == 1
    bigger = [5 if isinstance(v, int) else torch.randn(5, 6) for v in real_inputs]
    with pytest.raises(ValueError, match="specialised for"):
        signature.check_guards(bigger)
    check_import(graph, real_inputs)


def test_data_dependent_sizes_are_dynamic_dimensions():
    # nonzero kept whole (the backend's table computes it into a buffer of its bound instead)
    table = {op: fn for op, fn in decompositions().items() if op is not torch.ops.aten.nonzero.default}
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        graph = _dynamic_graph(lambda t: torch.nonzero(t) * 2, torch.tensor([[1.0, 0.0], [0.0, 3.0]]), table=table)
    module, _ = import_fx_graph(graph)
    module.verify()
    assert "tensor<?x2xi64>" in print_with_locations(module)


def test_a_size_of_a_later_symint_input_is_specialised():
    # AOTAutograd's backward may take a tensor of [2*u1, 32] before the SymInt u1 itself (a data-dependent
    # count): the tensor is typed by the symbol the later input binds, not left `?`
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv()
    with FakeTensorMode(shape_env=shape_env):
        count = shape_env.create_unbacked_symint()
        rows = torch.empty(2 * count, 32)
        viewed = rows.view(count, 2, 32)

    def build(graph):
        x = placeholder(graph, "x", rows)
        n = placeholder(graph, "n", count)
        graph.output((call(graph, torch.ops.aten.view.default, (x, [n, 2, 32]), viewed),))

    graph = hand_made(build)
    inputs = [torch.randn(6, 32), 3]
    module, signature = check_import(graph, inputs)
    text = print_with_locations(module)
    assert "%x: tensor<6x32xf32>" in text
    assert "tensor<3x2x32xf32>" in text
    assert signature.arguments(inputs)[0].shape == (6, 32)


def test_a_region_after_data_dependent_sizes_binds_their_expressions_from_its_inputs():
    # a region cut from a graph after two counts read from tensors (EnCodec's padding amounts) takes -u0,
    # u1 + 3 and u0 + u1 + 3 as inputs, never u0 or u1 alone: the call's values solve for u0 and u1, or where
    # only their sum is an input fix the sum, which is all the region's sizes need
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv()
    with FakeTensorMode(shape_env=shape_env):
        left, right = shape_env.create_unbacked_symint(), shape_env.create_unbacked_symint()
        rows = torch.empty(left + right + 3, 4)
        column = torch.empty(left + right + 3)

    def ramp(graph):
        start = placeholder(graph, "start", -left)
        end = placeholder(graph, "end", right + 3)
        x = placeholder(graph, "x", rows)
        arange = call(graph, torch.ops.aten.arange.start_step, (start, end), column, dtype=torch.float32)
        summed = call(graph, torch.ops.aten.sum.dim_IntList, (x, [1]), column)
        graph.output((call(graph, torch.ops.aten.add.Tensor, (arange, summed), column),))

    def ones(graph):
        x = placeholder(graph, "x", rows)
        total = placeholder(graph, "total", left + right + 3)
        filled = call(graph, torch.ops.aten.full.default, ([total], 1.0), column, dtype=torch.float32)
        summed = call(graph, torch.ops.aten.sum.dim_IntList, (x, [1]), column)
        graph.output((call(graph, torch.ops.aten.add.Tensor, (filled, summed), column),))

    for build, inputs in ((ramp, [-2, 5, torch.randn(7, 4)]), (ones, [torch.randn(7, 4), 7])):
        module, _ = check_import(hand_made(build), inputs)
        text = print_with_locations(module)
        assert "%x: tensor<7x4xf32>" in text
        assert "?" not in text


def test_compiling_with_dynamic_shapes_runs_specialised(fresh_compiler):
    from support import assert_close_to_torch

    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU())
    compiled = torch.compile(model, backend="neuron-mlir", dynamic=True, options={"strict": True})
    for batch in (3, 7, 3, 9, 100):  # compiled for a bucket of 64 rows (3 to 9), then of 512 (100)
        x = torch.randn(batch, 6)
        assert_close_to_torch(compiled(x), model(x))
    stats = neuron_mlir.stats()
    assert stats["nodes_fallen_back"] == 0
    assert stats["recompilations"] == 1


# -- effects, locations, errors --------------------------------------------------------------------------------


def test_a_factorizations_error_check_becomes_a_host_check_of_the_returned_info():
    text, signature = checked(lambda a: torch.linalg.inv(a), torch.randn(4, 4) + 4 * torch.eye(4))
    assert "torch.aten._linalg_check_errors" not in text
    assert [(api_name, is_matrix) for _, api_name, is_matrix in signature.linalg_checks] == [("linalg.inv", True)]
    assert signature.inputs[0] is None  # the effect token: None at run time, no argument of the function


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.proj(x))


def test_locations_name_the_source_line_and_module_path():
    from support import capture_aten_graphs_with_inputs

    model = nn.Sequential(Block(), Block())
    ((graph, inputs),) = capture_aten_graphs_with_inputs(model, torch.randn(2, 4))
    module, _ = check_import(graph, inputs)
    text = print_with_locations(module)
    assert re.search(r'torch.aten.tanh .* loc\("model.1"\(".*test_fx_importer.py":\d+:0\)\)', text), text


def test_an_op_traced_inside_torch_is_located_at_the_users_line():
    """Dynamo inlines torch's own Python functions (a functional collective, DTensor's redistribution): their frames
    end the node's stack trace, but the op belongs to the user's line that called them."""
    from pathlib import Path

    from neuron_mlir.frontend.fx_importer import node_location

    inside = Path(torch.__file__).parent / "distributed" / "_functional_collectives.py"
    graph = torch.fx.Graph()
    node = graph.placeholder("x")
    node.meta["stack_trace"] = (
        '  File "/home/user/train.py", line 12, in step\n    y = funcol.all_reduce(x, "sum", group)\n'
        f'  File "{inside}", line 179, in all_reduce\n    tensor = torch.ops._c10d_functional.all_reduce(...)\n'
    )
    assert '"/home/user/train.py":12:0' in str(node_location(node))
    node.meta["stack_trace"] = f'  File "{inside}", line 179, in all_reduce\n    tensor = ...\n'  # torch's alone
    assert f'"{inside}":179:0' in str(node_location(node))


def _stack_trace_node(graph, node, line=7):
    node.meta["stack_trace"] = f'  File "/home/user/model.py", line {line}, in forward\n    y = op(x)\n'
    node.meta["nn_module_stack"] = {"L__self___attn": ("L['self'].layers[0].attn", nn.Module)}


def test_an_op_the_dialect_lacks_is_named_with_its_node_and_line():
    x = torch.randn(3)

    def build(graph):
        node = placeholder(graph, "x", x)
        op = call(graph, torch.ops.aten.linalg_lstsq.default, (node, node), x)
        _stack_trace_node(graph, op)
        graph.output((op,))

    with pytest.raises(GraphImportError) as error:
        import_fx_graph(hand_made(build))
    message = str(error.value)
    assert "FX node 'linalg_lstsq_default' (aten.linalg_lstsq.default)" in message
    assert "/home/user/model.py:7 (model.layers.0.attn)" in message
    assert "no op for aten.linalg_lstsq.default" in message


def test_metadata_that_disagrees_with_the_verifier_is_an_importer_bug_with_its_line():
    x = torch.randn(3, 4)

    def build(graph):
        node = placeholder(graph, "x", x)
        op = call(graph, torch.ops.aten.add.Tensor, (node, node), torch.randn(4, 3))  # wrong shape
        _stack_trace_node(graph, op, line=12)
        graph.output((op,))

    with pytest.raises(
        GraphImportError,
        match=r"FX node 'add_tensor' \(aten.add.Tensor\) at /home/user/model.py:12 .*"
        r"does not verify.*importer bug.*broadcast",
    ):
        import_fx_graph(hand_made(build))


def test_a_python_function_is_refused_by_name():
    x = torch.randn(3)

    def build(graph):
        node = placeholder(graph, "x", x)
        op = call(graph, torch.sin, (node,), x.sin())
        _stack_trace_node(graph, op, line=3)
        graph.output((op,))

    with pytest.raises(GraphImportError, match=r"FX node 'sin' \(sin\) at /home/user/model.py:3 .*only ATen"):
        import_fx_graph(hand_made(build))


def test_a_bad_argument_names_node_and_argument():
    x = torch.randn(3)

    def build(graph):
        node = placeholder(graph, "x", x)
        op = call(graph, torch.ops.aten.mul.Scalar, (node, "two"), x)
        _stack_trace_node(graph, op, line=5)
        graph.output((op,))

    with pytest.raises(GraphImportError, match=r"FX node 'mul_scalar'.*model.py:5.*argument 'other'"):
        import_fx_graph(hand_made(build))
