"""Random ops from a counter-based generator: reproducible under `torch.manual_seed`, the same on any tiling.
Stochastically rounded casts draw from the same streams.

Every element of a random result is `uniform(counter, key)` or `normal(counter, key)`, the GpSimdE kernels
of `runtime.isa.GPSIMD_KERNELS` (Philox-4x32-10; Box-Muller for normals), where

    counter  the element's flat index in the result (a GpSimdE iota whose base is the tile's offset)
    key      seed + k * 0x9E3779B9 (wrapping int32, GpSimdE) for the k-th random op of the function

The seed is the function's last argument, `%rng_seed: memref<1xi32>`, which this family appends when the
function has a random op; the frontend draws it from torch's default CPU generator at every call, so
`torch.manual_seed(s)` makes a compiled program's draws repeat, and consecutive calls differ. The numbers are
not those of eager PyTorch (a different generator); their distribution is.

    rand / uniform          from + (to - from) * u,  u in [0, 1) with 24 random bits
    randn / normal          mean + std * z
    bernoulli.p             u < p
    native_dropout          keep = u < 1 - p;  output = input * keep / (1 - p), mask = keep (train); identity
                            and an all-true mask otherwise
    _to_copy fp32 -> bf16   under the module's `neuron.stochastic_rounding`: stochastic_round_bf16(x, u)
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ModuleOp, TensorType, bf16, f32, i1, i32
from xdsl.ir import Block, Operation, SSAValue

from neuron_mlir.ir.dialects import tile
from neuron_mlir.ir.dialects.tile import TileType
from neuron_mlir.lowering.convert_torch_to_tile.common import (
    Lowering,
    load,
    result_element_type,
    result_shape,
    view,
)
from neuron_mlir.lowering.convert_torch_to_tile.elementwise import TileMath, TilePosition, emit_elementwise
from neuron_mlir.lowering.layout import Layout
from neuron_mlir.lowering.loop_nests import LoopNestBuilder
from neuron_mlir.lowering.torch_auto_cast import STOCHASTIC_ROUNDING_ATTR
from neuron_mlir.runtime.hardware import PARTITIONS, Memory

SEED_ARGUMENT = "rng_seed"
_GOLDEN = 0x9E3779B9


def _wrapped(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def _seed_argument(block: Block) -> SSAValue:
    """The function's seed argument, appended on first use."""
    for arg in block.args:
        if arg.name_hint == SEED_ARGUMENT:
            return arg
    arg = block.insert_arg(tile.hbm_type((1,), i32), len(block.args))
    arg.name_hint = SEED_ARGUMENT
    return arg


class RandomStream:
    """The key of one random op, and its draws for a tile."""

    def __init__(self, em: LoopNestBuilder):
        block = em.block  # random lowerings emit at the function's top level
        seed = _seed_argument(block)
        # each random op views the seed once: the number of views so far numbers the streams
        self.stream = sum(1 for _ in seed.uses)
        self.seed = view(em, seed, Layout((PARTITIONS, 1), (0, 0), 0))

    def key(self, em: LoopNestBuilder, partitions: int) -> SSAValue:
        column = load(em, self.seed, [0, 0], (partitions, 1))
        if self.stream == 0:
            return column
        column_type = TileType((partitions, 1), i32, Memory.SBUF)
        salt = float(_wrapped(self.stream * _GOLDEN))
        return em.insert(tile.BinaryScalarOp(column, "add", column_type, scalar=salt)).result

    def draw(self, em: LoopNestBuilder, kind: str, result: TileType, position: TilePosition) -> SSAValue:
        """fp32 `uniform` or `normal` values for the tile at `position`."""
        counters = position.element_offsets(em, result, i32)
        out = TileType(result.get_shape(), result.element_type, Memory.SBUF)
        f32_type = TileMath(em, out).inner
        return em.insert(tile.KernelOp(counters, kind, f32_type, self.key(em, result.partitions))).result


def _generated(
    kind: str, scale_args: tuple[str, str] | None = None, defaults: tuple[float, float] = (0.0, 1.0)
) -> Lowering:
    """rand/randn (and the `_like` and in-place-functional forms): `low + (high - low) * u` or `mean + std * z`."""

    def lower(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
        stream = RandomStream(em)
        first, second = defaults
        if scale_args is not None:
            first = float(args.get(scale_args[0], first))
            second = float(args.get(scale_args[1], second))
        # uniform: low + (high - low) * u;  normal: mean + std * z
        factor, offset = (second - first, first) if kind == "uniform" else (second, first)

        def compute_at(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType, position: TilePosition) -> SSAValue:
            m = TileMath(e, result)
            value = stream.draw(e, kind, result, position)
            if factor == 1 and offset == 0:
                return m.copy(value, result)
            return m.sc("add", m.sc("multiply", value, factor), offset, result)

        out = emit_elementwise(em, result_shape(op), result_element_type(op), [], None, compute_at=compute_at)
        return [out]

    return lower


def _bernoulli(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    stream = RandomStream(em)
    p = float(args["p"])

    def compute_at(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType, position: TilePosition) -> SSAValue:
        return TileMath(e, result).sc("is_lt", stream.draw(e, "uniform", result, position), p, result)

    return [emit_elementwise(em, result_shape(op), result_element_type(op), [], None, compute_at=compute_at)]


def _native_dropout(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    source = args["input"]
    p = float(args["p"])
    train = args.get("train")
    shape = result_shape(op, 0)
    if train is False:  # None means training, as in ATen
        copy = emit_elementwise(
            em, shape, result_element_type(op, 0), [source], lambda e, t, r: TileMath(e, r).copy(t[0], r)
        )
        mask = emit_elementwise(em, shape, i1, [], lambda e, t, r: TileMath(e, r).fill(1.0, r))
        return [copy, mask]
    stream = RandomStream(em)
    keep_probability = 1.0 - p
    scale = 1.0 / keep_probability if keep_probability > 0 else 0.0
    mask_type = result_element_type(op, 1)
    # the mask is drawn first into its own tensor; the output then reads it, as ATen's dropout does
    mask = emit_elementwise(
        em,
        shape,
        mask_type,
        [],
        None,
        compute_at=lambda e, t, r, position: TileMath(e, r).sc(
            "is_lt", stream.draw(e, "uniform", r, position), keep_probability, r
        ),
    )

    def apply(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType) -> SSAValue:
        m = TileMath(e, result)
        kept = m.select(tiles[1], tiles[0], m.fill(0.0))
        return m.sc("multiply", kept, scale, result)

    output = emit_elementwise(em, shape, result_element_type(op, 0), [source, mask], apply)
    return [output, mask]


def rounds_stochastically(op: Operation) -> bool:
    """Whether `op` is a cast from fp32 to bf16 in a module compiled with stochastic rounding."""
    if op.name != "torch.aten._to_copy" or not isinstance(op.operands[0].type, TensorType):
        return False
    if op.operands[0].type.element_type != f32 or result_element_type(op) != bf16:
        return False
    module = op.get_toplevel_object()
    return isinstance(module, ModuleOp) and STOCHASTIC_ROUNDING_ATTR in module.attributes


def stochastic_rounding_cast(em: LoopNestBuilder, op: Operation, args: dict[str, Any]) -> list[SSAValue]:
    """fp32 -> bf16 with stochastic rounding: each element goes to its upper or lower bf16 neighbour with
    probabilities that make the expected result the fp32 value (GpSimdE's `stochastic_round_bf16` kernel on a
    `uniform` draw of the function's random stream, so the draws follow the seed like other random ops)."""
    stream = RandomStream(em)

    def compute_at(e: LoopNestBuilder, tiles: list[SSAValue], result: TileType, position: TilePosition) -> SSAValue:
        draws = stream.draw(e, "uniform", result, position)
        return e.insert(tile.KernelOp(tiles[0], "stochastic_round_bf16", result, draws)).result

    return [emit_elementwise(em, result_shape(op), bf16, [args["self"]], None, compute_at=compute_at)]


def legal(op: Operation) -> str | None:
    """Every random op of the table lowers, for any shape and float dtype."""
    return None


RANDOM_LOWERINGS: dict[str, Lowering] = {
    "torch.aten.rand": _generated("uniform"),
    "torch.aten.randn": _generated("normal"),
    "torch.aten.randn_like": _generated("normal"),
    "torch.aten.uniform": _generated("uniform", ("from", "to")),
    "torch.aten.normal_functional": _generated("normal", ("mean", "std")),
    "torch.aten.bernoulli.p": _bernoulli,
    "torch.aten.native_dropout": _native_dropout,
}
