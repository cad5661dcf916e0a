"""`init_op` makes the op IRDL's generic builder makes: for ops of the tile and neuron dialects whose constructors
use it, random arguments of every form (values, lists and tuples of values for variadic and optional operands, an
absent optional operand, properties given as None), the same operands, results, properties in the same order,
attributes and text; forms it does not take, and wrong ones, go through IRDL's builder and its errors."""

from __future__ import annotations

import io
import random

import pytest
from xdsl.dialects.builtin import DenseArrayBase, IndexType, StringAttr, f32, i64
from xdsl.ir import Attribute, Block, Operation
from xdsl.irdl import IRDLOperation
from xdsl.printer import Printer

from neuron_mlir.ir.dialects import neuron, tile
from neuron_mlir.ir.op_init import _OPTIONAL, _SINGLE, _form, init_op
from neuron_mlir.runtime.hardware import Memory

_TILE = tile.TileType((4, 8), f32, Memory.SBUF)


def _text(op: Operation) -> str:
    stream = io.StringIO()
    Printer(stream=stream).print_op(op)
    return stream.getvalue()


def _classes() -> list[type[IRDLOperation]]:
    found = []
    for module in (tile, neuron):
        for value in vars(module).values():
            ours = isinstance(value, type) and issubclass(value, IRDLOperation) and value.__module__ == module.__name__
            if ours and _form(value) is not None:
                found.append(value)
    return found


def _arguments(cls: type[IRDLOperation], rng: random.Random, block: Block) -> tuple[list, list, dict]:
    kinds, results = _form(cls)  # type: ignore[misc]
    values = list(block.args)
    operands: list = []
    for kind in kinds:
        if kind == _SINGLE:
            operands.append(rng.choice(values))
        elif kind == _OPTIONAL:
            operands.append(rng.choice([None, [], [rng.choice(values)], (rng.choice(values),), rng.choice(values)]))
        else:
            chosen = [rng.choice(values) for _ in range(rng.randint(0, 3))]
            operands.append(chosen if rng.random() < 0.5 else tuple(chosen))
    properties: dict[str, Attribute | None] = {
        "steps": DenseArrayBase.from_list(i64, [2, 1]) if rng.random() < 0.5 else None
    }
    if rng.random() < 0.5:
        properties["op"] = StringAttr("add")
    return operands, [_TILE] * results, properties


def test_the_dialects_ops_take_the_fast_form():
    """The ops made by the hundred thousand at real widths (windows, tiles, buffers) are among those it takes."""
    classes = _classes()
    for cls in (tile.ExtractOp, tile.InsertOp, tile.LoadOp, tile.StoreOp, tile.MatmulOp, neuron.AllocOp):
        assert cls in classes


@pytest.mark.parametrize("seed", range(3))
def test_every_op_is_made_as_the_generic_builder_makes_it(seed: int) -> None:
    rng = random.Random(seed)
    block = Block(arg_types=[_TILE, IndexType(), _TILE])
    for cls in _classes():
        for _ in range(4):
            operands, result_types, properties = _arguments(cls, rng, block)
            fast, generic = cls.__new__(cls), cls.__new__(cls)
            init_op(fast, operands=operands, result_types=result_types, properties=properties)
            IRDLOperation.__init__(generic, operands=operands, result_types=result_types, properties=properties)
            assert list(fast.operands) == list(generic.operands)
            assert [result.type for result in fast.results] == [result.type for result in generic.results]
            assert list(fast.properties.items()) == list(generic.properties.items())
            assert fast.attributes == generic.attributes
            assert _text(fast) == _text(generic)


def test_other_forms_go_through_the_generic_builder():
    """An op given as an operand (its result is taken), and wrong arguments, which IRDL's builder refuses."""
    block = Block(arg_types=[_TILE, IndexType()])
    source, index = block.args
    empty = tile.EmptyOp(_TILE)
    extract = tile.ExtractOp(empty, [index], _TILE)  # type: ignore[arg-type]
    assert extract.source is empty.result
    with pytest.raises(ValueError, match="non-variadic"):
        tile.ExtractOp(None, [index], _TILE)  # type: ignore[arg-type]
    extract_op = tile.ExtractOp.__new__(tile.ExtractOp)
    with pytest.raises(ValueError, match="Expected 1 result"):
        init_op(extract_op, operands=[source, [index]], result_types=[])
    matmul = tile.MatmulOp.__new__(tile.MatmulOp)
    with pytest.raises(ValueError, match="at most 1"):
        init_op(matmul, operands=[source, source, [source, source]], result_types=[_TILE])
