"""A small interpreter for the structured glue every level shares: func, scf.for, arith on index/integers.

Each level's reference semantics plugs its own ops in as handlers; values are plain Python objects (ints for
`index`, NumPy arrays for tensors, memrefs and tiles). It is deliberately simpler and faster than xDSL's generic
interpreter: no boxing of scalars, and loops run as Python loops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from neuron_mlir.ir.locations import at_source

Handler = Callable[["StructuredInterpreter", Operation, list[Any]], Sequence[Any]]

# Loop iterations one run may take in all: the loops of tile-level IR run a few thousand; a loop of billions
# (a mutated bound) would run for hours in Python.
MAX_LOOP_ITERATIONS = 1_000_000


class InterpretationError(RuntimeError):
    """An op the interpreter cannot run, named with its source location; `op` is that op when there is one (a
    tool points at it in the IR it read)."""

    def __init__(self, message: str, op: Operation | None = None):
        super().__init__(message)
        self.op = op


def truncating_division(a: int, b: int) -> int:
    """`arith.divsi`: the quotient rounded toward zero, exactly (no float division, so any size of integer)."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def truncating_remainder(a: int, b: int) -> int:
    """`arith.remsi`: the remainder of `truncating_division`, with the sign of the dividend (C's `%`)."""
    return a - b * truncating_division(a, b)


# MLIR's signed integer arithmetic. Only floordivsi rounds toward negative infinity; divsi and remsi truncate.
_INTEGER_BINARY: dict[type[Operation], Callable[[int, int], int]] = {
    arith.AddiOp: lambda a, b: a + b,
    arith.SubiOp: lambda a, b: a - b,
    arith.MuliOp: lambda a, b: a * b,
    arith.FloorDivSIOp: lambda a, b: a // b,
    arith.DivSIOp: truncating_division,
    arith.RemSIOp: truncating_remainder,
    arith.MinSIOp: min,
    arith.MaxSIOp: max,
}

_CMPI: dict[int, Callable[[int, int], bool]] = {
    0: lambda a, b: a == b,
    1: lambda a, b: a != b,
    2: lambda a, b: a < b,
    3: lambda a, b: a <= b,
    4: lambda a, b: a > b,
    5: lambda a, b: a >= b,
}


class StructuredInterpreter:
    """Runs a `func.func` whose body mixes the glue ops with ops that `handlers` know."""

    def __init__(self, handlers: dict[type[Operation], Handler]):
        self.handlers = handlers
        self.values: dict[SSAValue, Any] = {}
        self.iterations_left = MAX_LOOP_ITERATIONS

    def run_function(self, module: ModuleOp, inputs: Sequence[Any], entry: str = "main") -> list[Any]:
        function = find_function(module, entry)
        block = function.body.block
        if len(inputs) != len(block.args):
            raise InterpretationError(f"@{entry} takes {len(block.args)} arguments, got {len(inputs)}")
        for arg, value in zip(block.args, inputs, strict=True):
            self.values[arg] = value
        return list(self.run_block(block))

    def run_block(self, block: Block) -> Sequence[Any]:
        """Run a block; returns the operands of its terminator (func.return / scf.yield)."""
        for op in block.ops:
            if isinstance(op, func.ReturnOp | scf.YieldOp):
                return [self.values[v] for v in op.operands]
            self.run_op(op)
        return []

    def run_op(self, op: Operation) -> None:
        args = [self.values[v] for v in op.operands]
        try:
            if isinstance(op, scf.ForOp):
                results = self._run_for(op, args)
            elif (handler := self.handlers.get(type(op))) is not None:
                results = handler(self, op, args)
            else:
                results = self._run_arith(op, args)
        except InterpretationError as error:
            if error.op is None:  # the innermost op that failed, which a nested op has named already
                error.op = op
            raise
        for result, value in zip(op.results, results, strict=True):
            self.values[result] = value

    def _run_for(self, op: scf.ForOp, args: list[Any]) -> Sequence[Any]:
        lower, upper, step, *carried = args
        if step <= 0:
            raise InterpretationError(f"scf.for: a step of {step} never reaches the upper bound{at_source(op)}")
        trips = max(0, -((lower - upper) // step))
        if trips > self.iterations_left:
            # checked before the loop runs, so that a loop of billions of trips is refused at once, not after hours
            raise InterpretationError(
                f"scf.for: {trips} iterations ({lower} to {upper} step {step}) take the run beyond the "
                f"{MAX_LOOP_ITERATIONS} loop iterations the interpreter runs{at_source(op)}"
            )
        self.iterations_left -= trips
        body = op.body.block
        for index in range(lower, upper, step):
            self.values[body.args[0]] = index
            for arg, value in zip(body.args[1:], carried, strict=True):
                self.values[arg] = value
            carried = list(self.run_block(body))
        return carried

    def _run_arith(self, op: Operation, args: list[Any]) -> Sequence[Any]:
        if isinstance(op, arith.ConstantOp):
            value = op.value
            if isinstance(value, IntegerAttr):
                return [value.value.data]
            if isinstance(value, FloatAttr):
                return [value.value.data]
            if (handler := self.handlers.get(arith.ConstantOp)) is not None:
                return handler(self, op, args)
        elif (binary := _INTEGER_BINARY.get(type(op))) is not None:
            try:
                return [binary(args[0], args[1])]
            except ZeroDivisionError:
                raise InterpretationError(
                    f"{op.name}: division by zero ({args[0]} by {args[1]}), which MLIR leaves undefined{at_source(op)}"
                ) from None
        elif isinstance(op, arith.CmpiOp):
            return [_CMPI[op.predicate.value.data](args[0], args[1])]
        elif isinstance(op, arith.SelectOp):
            return [args[1] if args[0] else args[2]]
        elif isinstance(op, arith.IndexCastOp):
            return [int(args[0])]
        raise InterpretationError(f"no reference semantics for {op.name}{at_source(op)}")


def find_function(module: ModuleOp, entry: str) -> func.FuncOp:
    """The `func.func @entry` of a module (the only function if there is just one)."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for function in functions:
        if function.sym_name.data == entry:
            return function
    if len(functions) == 1:
        return functions[0]
    raise InterpretationError(f"no function @{entry} in the module")
