"""Matmul chains: a Linear layer and its activation computed as the next Linear layer's stationary panel.

In `act(x @ W1 + b1) @ W2` (a transformer's MLP), the second matmul reads the hidden activations h as A, that is
as h^T tiles with the hidden features on partitions. The first matmul can produce exactly those tiles, with its
operands swapped: h^T[n, tokens] = W1[:, n]^T-stationary times x^T-moving, where W1's [K, n] tiles load straight
from a row-major W1 (K on partitions) and x^T is the first matmul's own A^T panel. The bias b1 is then one value
per partition, so each PSUM tile leaves through a single ScalarE activation `act(p + b1[n])` into its slot of the
second matmul's panel. h never goes to HBM, neither matmul adds its bias with a ones-row pass nor transposes
the hidden activations, and the second matmul starts as soon as the first one ends.

Input contract: an `addmm` marked by torch-fuse-matmul-chains (the decision), with beta = alpha = 1, a 1-d bias,
A [M, K1] with M > 1, B [K1, N1] row-major, K1 and N1 multiples of 128, whose result only an activation in
`ACTIVATIONS` reads (through views), whose result in turn only an `addmm`/`mm` reads as A, with nothing but
views in between (`chain_activation` checks the torch-level part for the pass and again here, so that a mark
the IR no longer bears out is not followed; B's layout is known only here). The first matmul is then deferred
(prologue.py) and the activation absorbed into it; the second matmul takes the chain as its prologue when its
panel is hoisted, and otherwise materializes both ops where they stood (their own lowerings: tile-fuse-epilogues
then folds the activation into the product's stores).

Output guarantee: the second matmul's panel holds act(x @ W1 + b1)^T rounded once to the activation's type
(the product and the bias in fp32, as PSUM holds them, where eager PyTorch rounds the product to its type before
the activation: one rounding fewer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    alloc,
    arguments_of,
    layout_of,
    load,
    result_element_type,
    result_shape,
    tensor_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.matmul import (
    Blocking,
    _addmm,
    _Kernel,
    carry,
    split_axis,
    window,
)
from neuron_mlir.lowering.convert_torch_to_tile.prologue import (
    MATMUL_CHAIN,
    absorb,
    consumer_of,
    defer,
    drop_unused,
    fusion_mark,
)
from neuron_mlir.lowering.convert_torch_to_tile.prologue import take as take_prologue
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import Index, LoopNestBuilder
from neuron_mlir.runtime.hardware import PARTITIONS, Memory

# Hidden features per load of W1: [128, K1 / 128, 512] takes 1 KiB runs of each row (512 bf16), which DMA moves
# near its full rate, and feeds four 128-feature PSUM tiles.
FEATURES_PER_LOAD = 512


def _activation_fn(op: Operation) -> str | None:
    """The ScalarE function of an activation op the chain can absorb (None when it cannot)."""
    if op.name == "torch.aten.gelu":
        approximate = op.arguments().get("approximate", "none")  # type: ignore[attr-defined]
        return {"none": "gelu", "tanh": "gelu_apprx_tanh"}.get(approximate)
    return {"torch.aten.relu": "relu", "torch.aten.sigmoid": "sigmoid", "torch.aten.tanh": "tanh"}.get(op.name)


ACTIVATIONS = ("torch.aten.gelu", "torch.aten.relu", "torch.aten.sigmoid", "torch.aten.tanh")


@dataclass
class _ChainPrologue:
    """The first matmul and its activation, deferred into the second matmul's panel (module docstring)."""

    op: Operation  # the first addmm
    args: dict[str, Any]
    activation: Operation
    activation_args: dict[str, Any] | None
    fn: str
    product: SSAValue  # the first addmm's (never written) result allocation
    result: SSAValue  # the activation's (never written) result allocation
    rows: int  # M
    length: int  # N1: the second matmul's K
    inner: _Kernel | None = None  # builds x^T, the first matmul's A^T panel (through a layer norm's prologue)
    biases: SSAValue | None = None  # b1 as [128, N1 / 128]: the bias of hidden feature t * 128 + p at [p, t]

    def materialize(self, em: LoopNestBuilder) -> SSAValue:
        from neuron_mlir.lowering.convert_torch_to_tile.activations import ACTIVATION_LOWERINGS

        [product] = _addmm(em, self.op, self.args)
        self.product.replace_all_uses_with(product)
        assert self.activation_args is not None
        # the activation read the deferred allocation itself, or a view of it (now of the product)
        args = {name: product if value is self.product else value for name, value in self.activation_args.items()}
        lowering = ACTIVATION_LOWERINGS[self.activation.name]
        [activated] = lowering(em.located(self.activation.location), self.activation, args)
        assert activated is not None, f"{self.activation.name} lowered to no value"
        self.result.replace_all_uses_with(activated)
        self.discard()
        return activated

    def discard(self) -> None:
        for allocation in (self.product, self.result):
            drop_unused(allocation)

    def setup(self, em: LoopNestBuilder, k_tile: int) -> None:
        em = em.located(self.op.location)
        a, b = self.args["mat1"], self.args["mat2"]
        m, k1 = layout_of(a).shape
        blocking = Blocking(k_tile, PARTITIONS, FEATURES_PER_LOAD, 1, 1, k1 // k_tile, 1, True)
        lhs = layout_of(a)
        transposed = lhs.strides[1] == 1 and m > 1 and lhs.strides[0] != 1
        inner = _Kernel(a, b, self.product, result_element_type(self.op), None, blocking, transposed, False, k1)
        taken = take_prologue(em, a)
        if taken is not None:
            prologue = taken[1]
            fits = lhs.shape == (prologue.rows, prologue.length) and lhs.is_contiguous() and not lhs.offset
            if fits and transposed:
                inner.prologue = prologue
                prologue.setup(em, k_tile)
            else:
                result = prologue.materialize(em)
                if a is taken[0]:
                    inner.lhs = result
        self.inner = inner
        bias = self.args["self"]
        stride = layout_of(bias).strides[-1]
        offset = layout_of(bias).offset
        columns = view(em, bias, Layout((k_tile, self.length // k_tile), (stride, k_tile * stride), offset))
        self.biases = load(em, columns, [0, 0], (k_tile, self.length // k_tile))

    def build_panel(
        self, em: LoopNestBuilder, subs: list[tuple[Index, int]], tiles: int, rest: bool
    ) -> tuple[list[SSAValue], list[SSAValue]] | None:
        assert self.inner is not None, "setup comes first"
        assert self.biases is not None, "setup comes first"
        assert not rest, "N1 is a multiple of the partition count"
        inner, biases = self.inner, self.biases
        k_tile = inner.blocking.k_tile
        k1_tiles = inner.k // k_tile
        x_t = inner.panel(em.located(self.op.location), [], subs, 0, k1_tiles, False).full  # [k_tile, K1 tiles, m]
        weights = split_axis(em, inner.rhs, 0, k1_tiles, k_tile)  # W1 as [K1 tiles, k_tile, N1]
        out_type = result_element_type(self.activation)
        per_load = FEATURES_PER_LOAD // k_tile
        panel_type = [TileType((k_tile, tiles, m_size), out_type, Memory.SBUF) for _, m_size in subs]
        empty: list[SSAValue] = [em.insert(tile.EmptyOp(t)).result for t in panel_type]

        def feature(e: LoopNestBuilder, w: SSAValue, first: Index, j: Index, carried: list[SSAValue]) -> list[SSAValue]:
            """Hidden-feature tile first + j of every sub: the K1 products of each sub into a PSUM tile, one sub
            at a time (one accumulator live per product, evacuated by its activation while the next sub's
            products run), each activation written into the sub's panel."""
            e = e.located(self.op.location)
            t = e.add(first, j)
            offset = e.mul(j, k_tile)
            column_type = TileType((k_tile, 1), _element(biases), Memory.SBUF)
            column = e.insert(tile.ExtractOp(biases, [e.index(t)], column_type)).result
            act = e.located(self.activation.location)
            panels = list(carried)
            for s, (part, (_, m_size)) in enumerate(zip(x_t, subs, strict=True)):

                def product(
                    inner_e: LoopNestBuilder,
                    k: Index,
                    accs: list[SSAValue] | None,
                    part: SSAValue = part,
                    m_size: int = m_size,
                ) -> list[SSAValue]:
                    stationary = window(inner_e, w, [k, offset], (k_tile, k_tile))
                    moving = window(inner_e, part, [k, 0], (k_tile, m_size))
                    psum = TileType((k_tile, m_size), f32, Memory.PSUM)
                    acc = None if accs is None else accs[0]
                    return [inner_e.insert(tile.MatmulOp(stationary, moving, psum, acc)).result]

                [acc] = carry(e, 1, k1_tiles, 1, product(e, 0, None), product, always_loop=True)
                value_type = TileType((k_tile, m_size), out_type, Memory.SBUF)
                value = act.insert(tile.UnaryOp(acc, self.fn, value_type, bias=column)).result
                panels[s] = act.insert(tile.InsertOp(value, panels[s], [act.index(t), act.index(0)])).result
            return panels

        def load_weights(e: LoopNestBuilder, first: Index, count: int) -> SSAValue:
            """W1's columns of hidden-feature tiles [first, first + count): [k_tile, K1 tiles, count * k_tile]."""
            e = e.located(self.op.location)
            return load(e, weights, [0, 0, e.mul(first, k_tile)], (k_tile, k1_tiles, count * k_tile), dims=(1, 0, 2))

        def features(
            e: LoopNestBuilder, w: SSAValue, first: Index, count: int, panels: list[SSAValue]
        ) -> list[SSAValue]:
            return carry(e, 0, count, 1, panels, lambda e2, j, p: feature(e2, w, first, j, p), always_loop=True)

        def pair(e: LoopNestBuilder, first: Index, panels: list[SSAValue]) -> list[SSAValue]:
            # both loads first: the next pair's first load overlaps this pair's second half
            second = e.add(first, per_load)
            w_first, w_second = load_weights(e, first, per_load), load_weights(e, second, per_load)
            panels = features(e, w_first, first, per_load, panels)
            return features(e, w_second, second, per_load, panels)

        full_loads, last = divmod(tiles, per_load)
        pairs, odd = divmod(full_loads, 2)
        panels = carry(em, 0, pairs * 2 * per_load, 2 * per_load, empty, pair, always_loop=True)
        for first, count in ((pairs * 2 * per_load, per_load if odd else 0), (full_loads * per_load, last)):
            if count:
                panels = features(em, load_weights(em, first, count), first, count, panels)
        return panels, []

    def row_tiles(self, em: LoopNestBuilder, subs: list[tuple[Index, int]]) -> list[SSAValue]:
        raise NotImplementedError("the chain builds its panel itself")

    def evacuate(self, em: LoopNestBuilder, transposed: SSAValue, k_index: Index | None) -> SSAValue:
        raise NotImplementedError("the chain builds its panel itself")


def _element(value: SSAValue) -> Any:
    tile_type = value.type
    assert isinstance(tile_type, TileType)
    return tile_type.element_type


def chain_activation(op: Operation) -> Operation | None:
    """The activation through which torch op `op`, an addmm, can be computed as the next matmul's panel (the
    torch-level part of the module docstring's input contract: arguments, shapes, and who reads what), or None."""
    if op.name != "torch.aten.addmm":
        return None
    args = arguments_of(op)
    if float(args.get("beta", 1)) != 1.0 or float(args.get("alpha", 1)) != 1.0:
        return None
    a, b, bias = tensor_shape(args["mat1"]), tensor_shape(args["mat2"]), tensor_shape(args["self"])
    if len(bias) != 1 or len(a) != 2 or len(b) != 2:
        return None
    (m, k1), (n1,) = a, bias
    if m < 2 or k1 % PARTITIONS or n1 % PARTITIONS or b[1] != n1:
        return None
    activation = consumer_of(op, {name: "self" for name in ACTIVATIONS})
    if activation is None or _activation_fn(activation) is None or consumer_of(activation) is None:
        return None
    arguments = arguments_of(activation)
    if activation.name == "torch.aten.gelu" and set(arguments) - {"self", "approximate"}:
        return None
    return activation


def _chainable(op: Operation, args: dict[str, Any]) -> Operation | None:
    """The activation of an addmm marked by torch-fuse-matmul-chains, when the IR still bears the mark out and W1
    is row-major (a layout, known only here), or None."""
    if fusion_mark(op) != MATMUL_CHAIN or layout_of(args["mat2"]).strides[1] != 1:
        return None
    return chain_activation(op)


def _chained_addmm(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    activation = _chainable(op, args)
    if activation is None:
        return _addmm(em, op, args)
    fn = _activation_fn(activation)
    assert fn is not None
    m, n1 = result_shape(op)
    product = alloc(em, (m, n1), result_element_type(op))
    chain = _ChainPrologue(op, args, activation, None, fn, product, product, m, n1)

    def absorbed(e: LoopNestBuilder, act_op: Operation, act_args: dict[str, Any]) -> list[SSAValue]:
        chain.activation_args = act_args
        chain.result = alloc(e, result_shape(act_op), result_element_type(act_op))
        defer(e, chain.result, chain)
        return [chain.result]

    absorb(em, activation, absorbed)
    return [product]


CHAIN_LOWERINGS: dict[str, Lowering] = {"torch.aten.addmm": _chained_addmm}
