"""The banded weight gradient of convert-torch-to-tile's convolutions (lowering/convert_torch_to_tile/convolution.py).

`emit_banded_weight_gradient` has two strategies over one set-up: panels of transposed operands kept on chip for
every position tile (resident, taken wherever they fit) and operands loaded and transposed per block of the
result. Each case here forces each strategy in turn and runs the converted tile IR against PyTorch's weight
gradient, so both stay correct on the same convolution, whichever one the size heuristics pick.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from support import numpy_close
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import SSAValue
from xdsl.parser import Parser

from neuron_mlir.ir.context import make_context
from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.semantics import random_inputs, run_function
from neuron_mlir.lowering.convert_torch_to_tile import ConvertTorchToTilePass, convolution


def _lowered(text: str) -> tuple[ModuleOp, list[np.ndarray]]:
    """The torch-level module `text` through convert-torch-to-tile, and random inputs for it."""
    inputs = random_inputs(Parser(make_context(), text).parse_module())
    module = Parser(make_context(), text).parse_module()
    ConvertTorchToTilePass().apply(Context(), module)
    return module, inputs


def _allocated_shapes(module: ModuleOp) -> list[tuple[int, ...]]:
    """The shapes of the tensors the lowered `module` allocates in HBM."""
    return [tuple(op.memref.type.get_shape()) for op in module.walk() if isinstance(op, memref.AllocOp)]


def _weight_gradient_module(go: tuple[int, ...], x: tuple[int, ...], w: tuple[int, ...], stride: tuple[int, ...],
                            dilation: tuple[int, ...], groups: int, padding: tuple[int, ...] | None = None) -> str:  # fmt: skip
    def tensor(shape: tuple[int, ...]) -> str:
        return f"tensor<{'x'.join(map(str, shape))}xf32>"

    def array(values: tuple[int, ...]) -> str:
        return f"array<i64: {', '.join(map(str, values))}>"

    zeros = tuple(0 for _ in stride)
    return f"""
func.func @main(%go: {tensor(go)}, %x: {tensor(x)}, %w: {tensor(w)}) -> {tensor(w)} {{
  %gi, %gw, %gb = torch.aten.convolution_backward %go, %x, %w {{bias_sizes = array<i64: 0>, stride = {array(stride)}, padding = {array(padding or zeros)}, dilation = {array(dilation)}, transposed = false, output_padding = {array(zeros)}, groups = {groups} : i64, output_mask = array<i1: false, true, false>}} : ({tensor(go)}, {tensor(x)}, {tensor(w)}) -> (none, {tensor(w)}, none)
  func.return %gw : {tensor(w)}
}}
"""


# (name, grad_output, input, weight, stride, dilation, groups): strided 2-d over 40 channels (several position tiles
# of partial rows), a grouped 1-d one with dilation, and a 2-d one with two input-channel tiles.
CASES = [
    ("2d_strided", (1, 7, 4, 5), (1, 40, 9, 11), (7, 40, 3, 3), (2, 2), (1, 1), 1),
    ("1d_grouped_dilated", (2, 6, 9), (2, 4, 21), (6, 2, 3), (2,), (2,), 2),
    ("2d_two_channel_tiles", (1, 5, 3, 4), (1, 130, 7, 9), (5, 130, 2, 2), (2, 2), (1, 1), 1),
]


@pytest.mark.parametrize("resident", [True, False], ids=["resident", "per_block"])
@pytest.mark.parametrize(("name", "go", "x", "w", "stride", "dilation", "groups"), CASES, ids=[c[0] for c in CASES])
def test_weight_gradient_strategies_agree(monkeypatch, resident, name, go, x, w, stride, dilation, groups):
    original = convolution.emit_banded_weight_gradient
    taken: list[bool] = []

    def forced(*args, **kwargs):
        gradient = original(*args, **{**kwargs, "resident": resident})
        taken.append(gradient is not None)
        return gradient

    monkeypatch.setattr(convolution, "emit_banded_weight_gradient", forced)
    _weight_gradient_matches(name, go, x, w, stride, dilation, groups)
    assert taken == [True], f"the {'resident' if resident else 'per-block'} strategy did not lower {name}"


def _weight_gradient_matches(name, go, x, w, stride, dilation, groups, padding=None) -> None:
    """Convert the weight gradient's torch function to tile IR and run it against PyTorch's."""
    padding = padding or tuple(0 for _ in stride)
    text = _weight_gradient_module(go, x, w, stride, dilation, groups, padding)
    module, inputs = _lowered(text)
    [got] = run_function(module, inputs)
    go_t, x_t, w_t = (torch.from_numpy(a) for a in inputs)
    _, expected, _ = torch.ops.aten.convolution_backward(
        go_t, x_t, w_t, None, list(stride), list(padding), list(dilation), False, [0] * len(stride), groups,
        [False, True, False],
    )  # fmt: skip
    numpy_close(np.asarray(got), expected.numpy(), f"{name} weight gradient")


# (name, grad_output, input, weight, stride, dilation, groups): an RGB patchify stem (3 channels x 16 taps), a
# strided one of 2 x 3 windows, a grouped dilated 1-d one (2 channels per group x 3 taps).
FOLDED_CASES = [
    ("rgb_patchify", (1, 5, 3, 3), (1, 3, 12, 12), (5, 3, 4, 4), (4, 4), (1, 1), 1),
    ("rgb_strided", (2, 4, 4, 3), (2, 3, 9, 8), (4, 3, 2, 3), (2, 2), (1, 1), 1),
    ("1d_grouped_dilated", (2, 6, 9), (2, 4, 21), (6, 2, 3), (2,), (2,), 2),
]


@pytest.mark.parametrize(
    ("name", "go", "x", "w", "stride", "dilation", "groups"), FOLDED_CASES, ids=[c[0] for c in FOLDED_CASES]
)
def test_weight_gradient_folds_few_channels_taps(monkeypatch, name, go, x, w, stride, dilation, groups):
    """Few input channels: every tap's window lands in one PSUM tile through its selector matmul (instead of a
    transpose per tap); the weight gradient stays PyTorch's."""
    original = convolution._insert_taps_folded
    calls: list[int] = []

    def recording(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(convolution, "_insert_taps_folded", recording)
    _weight_gradient_matches(name, go, x, w, stride, dilation, groups)
    assert calls, f"{name}: the taps were not folded"


# (name, grad_output, input, weight, stride, dilation, padding): few channels over output rows of 48-128 columns: a
# stem-like 7 x 7 / 2 one padded on chip over two images and two output-channel tiles, one with dilated rows over
# more input rows than a partition tile and padding on one axis only, and two whose output rows of 50 and 60
# columns go two to a transpose (a patchify one, and a dilated one over two output-channel tiles).
ROW_CONTRACTED_CASES = [
    ("stem_two_channel_tiles", (2, 130, 4, 64), (2, 3, 7, 127), (130, 3, 7, 7), (2, 2), (1, 1), (3, 3)),
    ("dilated_rows_past_a_tile", (1, 2, 63, 66), (1, 1, 130, 66), (2, 1, 3, 5), (2, 1), (2, 1), (0, 2)),
    ("patchify_two_rows_per_tile", (2, 5, 4, 50), (2, 3, 16, 200), (5, 3, 4, 4), (4, 4), (1, 1), (0, 0)),
    ("dilated_two_rows_per_tile", (1, 130, 6, 60), (1, 2, 10, 60), (130, 2, 3, 3), (1, 1), (2, 1), (0, 1)),
]


@pytest.mark.parametrize(
    ("name", "go", "x", "w", "stride", "dilation", "padding"),
    ROW_CONTRACTED_CASES,
    ids=[c[0] for c in ROW_CONTRACTED_CASES],
)
def test_weight_gradient_contracted_over_output_rows(monkeypatch, name, go, x, w, stride, dilation, padding):
    """Few input channels and long output rows: each output row's columns are the contraction, against the input
    transposed once per kernel column; the weight gradient stays PyTorch's."""
    original = convolution.emit_row_weight_gradient
    calls: list[int] = []

    def recording(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(convolution, "emit_row_weight_gradient", recording)
    _weight_gradient_matches(name, go, x, w, stride, dilation, 1, padding)
    assert calls, f"{name}: the weight gradient was not contracted over output rows"


def _backward_module(
    go: tuple[int, ...], x: tuple[int, ...], w: tuple[int, ...], stride: tuple[int, ...], with_bias: bool = True
) -> str:
    def tensor(shape: tuple[int, ...]) -> str:
        return f"tensor<{'x'.join(map(str, shape))}xf32>"

    def array(values: tuple[int, ...]) -> str:
        return f"array<i64: {', '.join(map(str, values))}>"

    zeros, ones = tuple(0 for _ in stride), tuple(1 for _ in stride)
    if not with_bias:
        return f"""
func.func @main(%go: {tensor(go)}, %x: {tensor(x)}, %w: {tensor(w)}) -> ({tensor(x)}, {tensor(w)}) {{
  %gi, %gw, %gb = torch.aten.convolution_backward %go, %x, %w {{bias_sizes = array<i64: 0>, stride = {array(stride)}, padding = {array(zeros)}, dilation = {array(ones)}, transposed = false, output_padding = {array(zeros)}, groups = 1 : i64, output_mask = array<i1: true, true, false>}} : ({tensor(go)}, {tensor(x)}, {tensor(w)}) -> ({tensor(x)}, {tensor(w)}, none)
  func.return %gi, %gw : {tensor(x)}, {tensor(w)}
}}
"""
    bias = (w[0],)
    return f"""
func.func @main(%go: {tensor(go)}, %x: {tensor(x)}, %w: {tensor(w)}) -> ({tensor(x)}, {tensor(w)}, {tensor(bias)}) {{
  %gi, %gw, %gb = torch.aten.convolution_backward %go, %x, %w {{bias_sizes = {array(bias)}, stride = {array(stride)}, padding = {array(zeros)}, dilation = {array(ones)}, transposed = false, output_padding = {array(zeros)}, groups = 1 : i64, output_mask = array<i1: true, true, true>}} : ({tensor(go)}, {tensor(x)}, {tensor(w)}) -> ({tensor(x)}, {tensor(w)}, {tensor(bias)})
  func.return %gi, %gw, %gb : {tensor(x)}, {tensor(w)}, {tensor(bias)}
}}
"""


# (name, grad_output, input, weight, stride): a 2 x 2 / 2 patchify convolution, a 3 x 3 / 2 one (a 1 x 1 / 2 one
# shares grad_output instead: the test after this one).
BACKWARD_CASES = [
    ("2x2_patchify", (2, 9, 3, 3), (2, 5, 6, 7), (9, 5, 2, 2), (2, 2)),
    ("3x3_stride2", (1, 6, 3, 4), (1, 20, 8, 9), (6, 20, 3, 3), (2, 2)),
]


@pytest.mark.parametrize(("name", "go", "x", "w", "stride"), BACKWARD_CASES, ids=[c[0] for c in BACKWARD_CASES])
def test_weight_gradient_products_emitted_after_the_input_gradient(monkeypatch, name, go, x, w, stride):
    """A direct convolution's backward emits the weight gradient's panels first and its products last (after the
    input and bias gradients); all three gradients stay PyTorch's."""
    original = convolution._weight_gradient_resident
    later: list[bool] = []

    def recording(*args, **kwargs):
        later.append(args[4] is not None if len(args) > 4 else kwargs.get("deferred") is not None)
        return original(*args, **kwargs)

    monkeypatch.setattr(convolution, "_weight_gradient_resident", recording)
    text = _backward_module(go, x, w, stride)
    module, inputs = _lowered(text)
    assert later == [True], f"{name}: the weight gradient's products were not left for after the input gradient"
    got = run_function(module, inputs)
    go_t, x_t, w_t = (torch.from_numpy(a) for a in inputs)
    expected = torch.ops.aten.convolution_backward(
        go_t, x_t, w_t, [w[0]], list(stride), [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]
    )
    for label, ours, theirs in zip(("input", "weight", "bias"), got, expected, strict=True):
        numpy_close(np.asarray(ours), theirs.numpy(), f"{name} {label} gradient")


def _constant(value: SSAValue) -> int:
    owner = value.owner
    assert isinstance(owner, arith.ConstantOp), "loop bounds are constants"
    assert isinstance(owner.value, IntegerAttr), "loop bounds are index constants"
    return owner.value.value.data


def _elements_loaded(module, tensor) -> int:
    """Elements the tile.loads of `tensor` read, each counted once per trip of the loops around it."""
    total = 0
    for op in module.walk():
        if not isinstance(op, tile.LoadOp):
            continue
        source = op.source
        while isinstance(source.owner, tile.ViewOp):
            source = source.owner.source
        if source is not tensor:
            continue
        trips, parent = 1, op.parent_op()
        while parent is not None:
            if isinstance(parent, scf.ForOp):
                bounds = [_constant(value) for value in (parent.lb, parent.ub, parent.step)]
                trips *= len(range(*bounds))
            parent = parent.parent_op()
        total += trips * math.prod(op.tile_type().get_shape())
    return total


# (name, grad_output, input, weight, stride, bias): kernels narrower than the stride, whose input gradient reads
# grad_output itself: 1 x 1 / 2 over a full output-channel tile and two more channels, two images (with a bias
# too); a 1 x 1 / (2, 3) one over two full tiles; a 1-d kernel of 2 at stride 3. Wider kernels, whose input
# gradient reads grad_output with a margin of zeros: 3 x 3 / 2, a 1-d kernel of 3 at stride 2.
SHARED_CASES = [
    ("1x1_stride2_two_images", (2, 130, 3, 4), (2, 24, 6, 8), (130, 24, 1, 1), (2, 2), False),
    ("1x1_two_full_tiles", (1, 256, 3, 3), (1, 40, 6, 9), (256, 40, 1, 1), (2, 3), False),
    ("1d_kernel2_stride3", (2, 140, 5), (2, 30, 15), (140, 30, 2), (3,), False),
    ("1x1_stride2_bias", (2, 130, 3, 4), (2, 24, 6, 8), (130, 24, 1, 1), (2, 2), True),
    ("3x3_stride2_margin", (2, 130, 3, 4), (2, 40, 8, 9), (130, 40, 3, 3), (2, 2), True),
    ("1d_kernel3_stride2_margin", (2, 140, 7), (2, 30, 15), (140, 30, 3), (2,), False),
]


@pytest.mark.parametrize(
    ("name", "go", "x", "w", "stride", "with_bias"), SHARED_CASES, ids=[c[0] for c in SHARED_CASES]
)
def test_grad_output_loaded_once_for_both_gradients(name, go, x, w, stride, with_bias):
    """The weight, input and bias gradients read grad_output from one copy on chip (the margin of zeros the
    input gradient's phases read written there): each element is loaded once, where each gradient loaded it
    before (and the input gradient read a padded copy written to HBM). The gradients stay PyTorch's."""
    text = _backward_module(go, x, w, stride, with_bias)
    module, inputs = _lowered(text)
    grad_output = next(op for op in module.walk() if isinstance(op, func.FuncOp)).args[0]
    assert _elements_loaded(module, grad_output) == math.prod(go), f"{name}: grad_output was loaded more than once"
    got = run_function(module, inputs)
    go_t, x_t, w_t = (torch.from_numpy(a) for a in inputs)
    zeros, ones = [0] * len(stride), [1] * len(stride)
    expected = torch.ops.aten.convolution_backward(
        go_t, x_t, w_t, [w[0]] if with_bias else None, list(stride), zeros, ones, False, zeros, 1,
        [True, True, with_bias],
    )  # fmt: skip
    for label, ours, theirs in zip(("input", "weight", "bias"), got, expected, strict=False):
        numpy_close(np.asarray(ours), theirs.numpy(), f"{name} {label} gradient")


# (name, grad_output, input, weight, stride, padding): padded convolutions whose weight gradient reads the input
# held on chip with its padding: 3 x 3 / 2 over two input-channel tiles (one partial), two images; a 3 x 3 stride-1
# one; a 1-d kernel of 5 at stride 2.
HELD_INPUT_CASES = [
    ("3x3_stride2_padded", (2, 6, 4, 5), (2, 130, 8, 9), (6, 130, 3, 3), (2, 2), (1, 1)),
    ("3x3_stride1_padded", (1, 7, 6, 5), (1, 40, 6, 5), (7, 40, 3, 3), (1, 1), (1, 1)),
    ("1d_kernel5_stride2_padded", (2, 9, 8), (2, 36, 15), (9, 36, 5), (2,), (2,)),
]


@pytest.mark.parametrize(
    ("name", "go", "x", "w", "stride", "padding"), HELD_INPUT_CASES, ids=[c[0] for c in HELD_INPUT_CASES]
)
def test_weight_gradient_reads_the_input_with_its_padding_on_chip(name, go, x, w, stride, padding):
    """A padded convolution's weight gradient reads the input's bands from one copy on chip, its padding's zeros
    written there: no padded copy of the input is written to HBM (an allocation of the padded shape), and the
    gradient stays PyTorch's."""
    text = _weight_gradient_module(go, x, w, stride, tuple(1 for _ in stride), 1, padding)
    module, inputs = _lowered(text)
    padded = (*x[:2], *(s + 2 * p for s, p in zip(x[2:], padding, strict=True)))
    shapes = _allocated_shapes(module)
    assert padded not in shapes, f"{name}: the input was copied to HBM with its padding"
    [got] = run_function(module, inputs)
    go_t, x_t, w_t = (torch.from_numpy(a) for a in inputs)
    zeros, ones = [0] * len(stride), [1] * len(stride)
    expected = torch.ops.aten.convolution_backward(
        go_t, x_t, w_t, None, list(stride), list(padding), ones, False, zeros, 1, [False, True, False]
    )[1]
    numpy_close(np.asarray(got), expected.numpy(), f"{name} weight gradient")


def _forward_module(
    x: tuple[int, ...],
    w: tuple[int, ...],
    stride: tuple[int, ...],
    out: tuple[int, ...],
    padding: tuple[int, ...] = (0, 0),
    dilation: tuple[int, ...] = (1, 1),
) -> str:
    def tensor(shape: tuple[int, ...]) -> str:
        return f"tensor<{'x'.join(map(str, shape))}xf32>"

    bias = (w[0],)
    return f"""
func.func @main(%x: {tensor(x)}, %w: {tensor(w)}, %b: {tensor(bias)}) -> {tensor(out)} {{
  %0 = torch.aten.convolution %x, %w, %b {{stride = array<i64: {stride[0]}, {stride[1]}>, padding = array<i64: {padding[0]}, {padding[1]}>, dilation = array<i64: {dilation[0]}, {dilation[1]}>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64}} : ({tensor(x)}, {tensor(w)}, {tensor(bias)}) -> {tensor(out)}
  func.return %0 : {tensor(out)}
}}
"""


# (name, input, weight, stride, output): fp32 weight rows of 2 KiB, two to a partition per load, over two loads
# (1 x 1) and one (2 x 2, four taps per row).
INTERLEAVED_CASES = [
    ("1x1_two_loads", (1, 512, 4, 6), (512, 512, 1, 1), (2, 2), (1, 512, 2, 3)),
    ("2x2_taps", (1, 128, 4, 4), (256, 128, 2, 2), (2, 2), (1, 256, 2, 2)),
]


@pytest.mark.parametrize(("name", "x", "w", "stride", "out"), INTERLEAVED_CASES, ids=[c[0] for c in INTERLEAVED_CASES])
def test_interleaved_weight_rows_give_the_convolution(monkeypatch, name, x, w, stride, out):
    """Stationaries built from several weight rows per partition (output channels J apart in each transpose)."""
    original = convolution._interleaved_weight_panel
    taken: list[int] = []

    def recording(*args, **kwargs):
        taken.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(convolution, "_interleaved_weight_panel", recording)
    text = _forward_module(x, w, stride, out)
    module, inputs = _lowered(text)
    assert taken, f"{name}: the weight rows were not interleaved"
    [got] = run_function(module, inputs)
    x_t, w_t, b_t = (torch.from_numpy(a) for a in inputs)
    expected = torch.nn.functional.conv2d(x_t, w_t, b_t, stride=stride)
    numpy_close(np.asarray(got), expected.numpy(), f"{name} convolution")


# (name, input, weight, stride, padding, dilation, output): few channels over output rows of 48-128 columns, as in the
# weight gradient's cases above (two output-channel tiles and two kernel-column chunks; dilated rows past a tile;
# two output rows per transpose), and patches of 588 columns, more than the weight gradient's moving operand takes
# (five chunks of kernel columns, the last partial).
ROW_CONVOLUTION_CASES = [
    ("stem_two_channel_tiles", (2, 3, 7, 127), (130, 3, 7, 7), (2, 2), (3, 3), (1, 1), (2, 130, 4, 64)),
    ("dilated_rows_past_a_tile", (1, 1, 130, 66), (2, 1, 3, 5), (2, 1), (0, 2), (2, 1), (1, 2, 63, 66)),
    ("patchify_two_rows_per_tile", (2, 3, 16, 200), (5, 3, 4, 4), (4, 4), (0, 0), (1, 1), (2, 5, 4, 50)),
    ("dilated_two_rows_per_tile", (1, 2, 10, 60), (130, 2, 3, 3), (1, 1), (0, 1), (2, 1), (1, 130, 6, 60)),
    ("patches_wider_than_a_bank", (1, 3, 28, 700), (4, 3, 14, 14), (14, 14), (0, 0), (1, 1), (1, 4, 2, 50)),
    # two output rows to a window (their input rows 2 apart, dilated ones 1 kernel row apart), in blocks of 16
    # rows and a partial last one
    ("stem_blocks_and_a_partial_one", (1, 3, 67, 127), (5, 3, 7, 7), (2, 2), (3, 3), (1, 1), (1, 5, 34, 64)),
    ("dilated_rows_sharing_windows", (1, 2, 41, 70), (3, 2, 3, 5), (2, 1), (1, 2), (2, 1), (1, 3, 20, 70)),
]


@pytest.mark.parametrize(
    ("name", "x", "w", "stride", "padding", "dilation", "out"),
    ROW_CONVOLUTION_CASES,
    ids=[c[0] for c in ROW_CONVOLUTION_CASES],
)
def test_convolution_over_transposed_rows(monkeypatch, name, x, w, stride, padding, dilation, out):
    """Few input channels and long output rows: each output row's patches come from the input transposed once
    per kernel column, transposed back in chunks of kernel columns; the output stays PyTorch's."""
    original = convolution.emit_row_convolution
    taken: list[int] = []

    def recording(*args, **kwargs):
        taken.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(convolution, "emit_row_convolution", recording)
    text = _forward_module(x, w, stride, out, padding, dilation)
    module, inputs = _lowered(text)
    assert taken, f"{name}: the convolution did not take the transposed rows"
    [got] = run_function(module, inputs)
    x_t, w_t, b_t = (torch.from_numpy(a) for a in inputs)
    expected = torch.nn.functional.conv2d(x_t, w_t, b_t, stride=stride, padding=padding, dilation=dilation)
    numpy_close(np.asarray(got), expected.numpy(), f"{name} convolution")


# (name, input, weight, stride, padding, dilation, output): padded convolutions over the input held on chip with
# its padding: 3 x 3 / 2 over two input-channel tiles (one partial) and two output-channel tiles; 3 x 3 stride 1
# over 200 channels; a dilated 3 x 3 padded by 2.
HELD_FORWARD_CASES = [
    ("3x3_stride2_padded", (2, 130, 8, 9), (130, 130, 3, 3), (2, 2), (1, 1), (1, 1), (2, 130, 4, 5)),
    ("3x3_stride1_padded", (1, 200, 6, 5), (7, 200, 3, 3), (1, 1), (1, 1), (1, 1), (1, 7, 6, 5)),
    ("3x3_dilated_padded", (1, 40, 9, 10), (9, 40, 3, 3), (1, 1), (2, 2), (2, 2), (1, 9, 9, 10)),
]


@pytest.mark.parametrize(
    ("name", "x", "w", "stride", "padding", "dilation", "out"),
    HELD_FORWARD_CASES,
    ids=[c[0] for c in HELD_FORWARD_CASES],
)
def test_convolution_reads_the_input_with_its_padding_on_chip(name, x, w, stride, padding, dilation, out):
    """A padded convolution reads its bands from the input held on chip, its padding's zeros written there: no
    padded copy of the input is written to HBM, and the output stays PyTorch's."""
    text = _forward_module(x, w, stride, out, padding, dilation)
    module, inputs = _lowered(text)
    padded = (*x[:2], *(s + 2 * p for s, p in zip(x[2:], padding, strict=True)))
    shapes = _allocated_shapes(module)
    assert padded not in shapes, f"{name}: the input was copied to HBM with its padding"
    [got] = run_function(module, inputs)
    x_t, w_t, b_t = (torch.from_numpy(a) for a in inputs)
    expected = torch.nn.functional.conv2d(x_t, w_t, b_t, stride=stride, padding=padding, dilation=dilation)
    numpy_close(np.asarray(got), expected.numpy(), f"{name} convolution")


def _transposed_module(x: tuple[int, ...], w: tuple[int, ...], padding: tuple[int, ...], out: tuple[int, ...]) -> str:
    def tensor(shape: tuple[int, ...]) -> str:
        return f"tensor<{'x'.join(map(str, shape))}xf32>"

    def array(values: tuple[int, ...]) -> str:
        return f"array<i64: {', '.join(map(str, values))}>"

    ones, zeros = tuple(1 for _ in padding), tuple(0 for _ in padding)
    return f"""
func.func @main(%x: {tensor(x)}, %w: {tensor(w)}) -> {tensor(out)} {{
  %0 = torch.aten.convolution %x, %w, none {{stride = {array(ones)}, padding = {array(padding)}, dilation = {array(ones)}, transposed = true, output_padding = {array(zeros)}, groups = 1 : i64}} : ({tensor(x)}, {tensor(w)}) -> {tensor(out)}
  func.return %0 : {tensor(out)}
}}
"""


# (name, input, weight [Cin, Cout, K...], padding, output): stride-1 transposed convolutions (a stride-1
# convolution's input gradient), whose input is read with a margin of the kernel's reach less the padding: 3 x 3
# padded by 1 over two input-channel tiles (one partial), unpadded 3 x 3, a 1-d kernel of 5.
HELD_TRANSPOSED_CASES = [
    ("3x3_padded", (2, 130, 5, 6), (130, 9, 3, 3), (1, 1), (2, 9, 5, 6)),
    ("3x3_unpadded", (1, 40, 4, 4), (40, 7, 3, 3), (0, 0), (1, 7, 6, 6)),
    ("1d_kernel5", (2, 36, 9), (36, 11, 5), (1,), (2, 11, 11)),
]


@pytest.mark.parametrize(
    ("name", "x", "w", "padding", "out"), HELD_TRANSPOSED_CASES, ids=[c[0] for c in HELD_TRANSPOSED_CASES]
)
def test_transposed_convolution_reads_the_input_with_its_margin_on_chip(name, x, w, padding, out):
    """A stride-1 transposed convolution reads its input's bands from one copy on chip, the margin of zeros
    written there: no padded copy of the input is written to HBM, and the output stays PyTorch's."""
    text = _transposed_module(x, w, padding, out)
    module, inputs = _lowered(text)
    reach = [k - 1 for k in w[2:]]
    margined = (*x[:2], *(s + 2 * (r - p) for s, r, p in zip(x[2:], reach, padding, strict=True)))
    shapes = _allocated_shapes(module)
    assert margined not in shapes, f"{name}: the input was copied to HBM with its margin"
    [got] = run_function(module, inputs)
    x_t, w_t = (torch.from_numpy(a) for a in inputs)
    transposed = torch.nn.functional.conv_transpose2d if len(padding) == 2 else torch.nn.functional.conv_transpose1d
    expected = transposed(x_t, w_t, padding=padding)
    numpy_close(np.asarray(got), expected.numpy(), f"{name} transposed convolution")
