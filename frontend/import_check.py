"""Check an imported FX graph three ways: it verifies, its text round-trips, and it computes what the graph does.

    module, signature = check_import(graph_module, inputs)     # raises ImportCheckError naming the failed step

1. Import and verify (`import_fx_graph`, then `module.verify()`).
2. Text: print with locations, parse, print again: the two texts must be identical.
3. Meaning (when `inputs` are given): the torch-level reference semantics of the imported IR
   (`run_torch_function`) on `inputs` reproduce the FX graph's own outputs, within the dtype tolerances of
   `neuron_mlir.ir.semantics.compare`. Graphs with random ops are run from the same seed both ways.

The model tests, the OpInfo sweep (`tools/opinfo_sweep.py`) and anything else that needs "does this graph
import" share these steps, so a failure means the same thing everywhere. `ImportCheckError.step` says which step
failed: "import", "verify", "round-trip" or "semantics".
"""

from __future__ import annotations

from collections.abc import Sequence
from io import StringIO
from typing import Any

import numpy as np
import torch
import torch.fx
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from neuron_mlir.frontend.fx_importer import GraphImportError, GraphSignature, import_fx_graph
from neuron_mlir.frontend.tensors import to_numpy
from neuron_mlir.ir.dialects import ALL_DIALECTS
from neuron_mlir.ir.semantics.compare import compare_all


class ImportCheckError(RuntimeError):
    """One of the checks failed; `step` is "import", "verify", "round-trip" or "semantics"."""

    def __init__(self, step: str, message: str):
        super().__init__(f"{step}: {message}")
        self.step = step


def parsing_context() -> Context:
    """A context that parses everything the importer prints (builtin, func, arith and our dialects)."""
    ctx = Context()
    for dialect in (Builtin, Func, Arith):
        ctx.load_dialect(dialect)
    for name, factory in ALL_DIALECTS.items():
        ctx.register_dialect(name, factory)
    return ctx


def print_with_locations(module: ModuleOp) -> str:
    stream = StringIO()
    Printer(stream=stream, print_debuginfo=True).print_op(module)
    return stream.getvalue()


def round_trip(module: ModuleOp) -> str:
    """The module's text (with locations), after checking that parsing and printing it again gives the same."""
    text = print_with_locations(module)
    try:
        reparsed = Parser(parsing_context(), text, "imported.mlir").parse_module()
    except ParseError as error:
        raise ImportCheckError("round-trip", f"the printed IR does not parse: {error}") from error
    again = print_with_locations(reparsed)
    if again != text:
        first = next(
            (i for i, (a, b) in enumerate(zip(text.splitlines(), again.splitlines(), strict=False)) if a != b), None
        )
        line = ""
        if first is not None:
            line = f" at line {first + 1}:\n  {text.splitlines()[first]}\n  {again.splitlines()[first]}"
        raise ImportCheckError("round-trip", f"printing the re-parsed IR gives different text{line}")
    return text


def graph_outputs(graph_module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
    """The FX graph's flat outputs on `inputs` (eager PyTorch)."""
    import torch.utils._pytree as pytree

    with torch.no_grad():
        return pytree.tree_leaves(graph_module(*inputs), is_leaf=lambda x: x is None)


def check_semantics(
    module: ModuleOp,
    signature: GraphSignature,
    graph_module: torch.fx.GraphModule,
    inputs: Sequence[Any],
    seed: int = 0,
) -> None:
    """Raise ImportCheckError when the IR's reference semantics and the FX graph disagree on `inputs`."""
    from neuron_mlir.ir.semantics.torch import run_torch_function

    arguments = [_array(a) for a in signature.arguments(list(inputs))] + [to_numpy(c) for c in signature.constants]
    torch.manual_seed(seed)
    expected = graph_outputs(graph_module, [_clone(a) for a in inputs])
    torch.manual_seed(seed)
    try:
        results = run_torch_function(module, arguments)
    except Exception as error:  # an ATen error or a type the IR got wrong: report it as this step's failure
        raise ImportCheckError("semantics", f"running the IR failed: {type(error).__name__}: {error}") from error
    actual = signature.results(results)
    if len(actual) != len(expected):
        raise ImportCheckError("semantics", f"{len(actual)} outputs, the graph has {len(expected)}")
    pairs = [
        (np.asarray(a), _array(e))
        for a, e in zip(actual, expected, strict=True)
        if isinstance(e, torch.Tensor) and a is not None
    ]
    for (got, want), index in zip(pairs, range(len(pairs)), strict=True):
        if got.dtype != want.dtype:
            raise ImportCheckError("semantics", f"output {index} is {got.dtype}, the graph gives {want.dtype}")
    problems = compare_all([p[0] for p in pairs], [p[1] for p in pairs])
    if problems:
        raise ImportCheckError("semantics", "; ".join(problems[:3]))


def check_import(
    graph_module: torch.fx.GraphModule, inputs: Sequence[Any] | None = None, seed: int = 0
) -> tuple[ModuleOp, GraphSignature]:
    """Import, verify, round-trip and (given `inputs`) compare semantics; see the module docstring."""
    try:
        module, signature = import_fx_graph(graph_module, inputs=None if inputs is None else list(inputs))
    except GraphImportError as error:
        raise ImportCheckError("import", str(error)) from error
    try:
        module.verify()
    except DiagnosticException as error:
        raise ImportCheckError("verify", str(error)) from error
    round_trip(module)
    if inputs is not None:
        check_semantics(module, signature, graph_module, inputs, seed)
    return module, signature


def _array(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return to_numpy(value.detach().resolve_conj().resolve_neg())
    return np.asarray(value)


def _clone(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value
