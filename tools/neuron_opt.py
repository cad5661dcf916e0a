"""`neuron-opt`: xDSL's opt driver with the torch, tile and neuron dialects and our passes.

    neuron-opt in.mlir -p 'convert-torch-to-tile,convert-tile-to-neuron'
    neuron-opt in.mlir -p neuron-pipeline --check-semantics

Everything `xdsl-opt` offers stays (`-p` pipelines with options, `--split-input-file`, `--verify-diagnostics`,
`--print-between-passes`, `--print-op-generic`, `--print-debuginfo`, ...). `--check-semantics` runs the input and
the output through the reference semantics of their levels on the same random inputs and reports (to stderr)
whether every output matches within its dtype's tolerance; a mismatch is a diagnostic. A bf16, fp16 or fp8 output
of torch-level input that differs is judged again against a float64 run of the input (at most a small multiple of
ATen's own error, `compare.golden_mismatch`): ATen's low-precision kernels round sums the programs keep in fp32.
This module must not
import torch: tile- and neuron-level work never needs it (torch-level semantics import it on demand).

Diagnostics follow MLIR's form: `file:line:col: error: <message>`, then the offending op alone (its source line
with a caret under it, or the op itself when a pass created it). The position is where the op was written in
the input file; an op a pass created has none and is placed by its location attribute (the user's Python line
for imported graphs). A verifier failure and a pass's refusal of an op both print this way, to stderr with exit
code 1, or to stdout with exit code 0 under `--verify-diagnostics`. An unknown pass name or a malformed pass
option is a one-line usage error (exit code 2) naming the closest known passes.

`--print-between-passes` and `--time-passes` see inside `neuron-pipeline`: the IR and the time after each of its
passes, as if they had been listed one by one.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import sys
import time
import weakref
from collections.abc import Sequence
from io import StringIO
from typing import IO, Any, NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue
from xdsl.parser import Parser
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Span
from xdsl.xdsl_opt_main import xDSLOptMain

from neuron_mlir import __version__
from neuron_mlir.ir.context import NeuronContext
from neuron_mlir.ir.dialects import ALL_DIALECTS
from neuron_mlir.ir.locations import describe_location, file_position
from neuron_mlir.lowering import ALL_PASSES
from neuron_mlir.lowering.pipelines import NeuronPipelinePass, pipeline_passes, run_pipeline

# `--check-semantics` draws random inputs up to this size (a tensor type may well ask for terabytes)
_CHECK_SEMANTICS_MAX_INPUT_BYTES = 2 * 2**30
# An op with regions longer than this is shown by its first and last lines only.
_MAX_OP_LINES = 12
# the results an op binds, then its name: bare (custom syntax) or quoted (generic syntax)
_OP_NAME_AFTER_RESULTS = re.compile(
    r'\s*(?:%[\w.$#-]+(?::\d+)?\s*(?:,\s*%[\w.$#-]+(?::\d+)?\s*)*=\s*)?(?:([A-Za-z_][\w.$]*)|"([^"]+)")'
)
# xDSL keeps its input as it is given: text, or the bytes of a file read in binary mode
SourceSpan = Span[str] | Span[bytes]


class SemanticsMismatch(DiagnosticException):
    """The IR after the passes computes something else than the IR before them."""


class LocatedDiagnostic(DiagnosticException):
    """A diagnostic already laid out MLIR's way (`file:line:col: error: ...` and the op): printed as it is."""


class _PositionRecordingParser(Parser):
    """xDSL's parser, remembering where in the input each op starts (xDSL keeps no positions on ops)."""

    def __init__(
        self,
        ctx: Context,
        text: str | bytes,
        name: str,
        positions: weakref.WeakKeyDictionary[Operation, SourceSpan],
        line_offset: int,
    ):
        super().__init__(ctx, text, name)
        self._positions = positions
        self._line_offset = line_offset

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as error:
            # xDSL verifies some ops as it builds them (a region's terminator, a property's kind): the failure is
            # an error at the op, like any other (nested ops catch theirs first: the innermost op is named)
            name = _op_name_at(start)
            message = str(error)
            if name and not message.startswith(name):
                message = f"{name}: {message}"
            raise self._diagnostic(start, message) from None
        except MemoryError:
            # xDSL expands a dense splat into one Python value per element: a constant of 2^40 elements asks for
            # terabytes before anything could check its size (the innermost op catches it first)
            name = _op_name_at(start) or "an op"
            raise self._diagnostic(
                start, f"{name}: its attributes hold more elements than this process can allocate"
            ) from None
        self._positions[op] = dataclasses.replace(start, line_offset=self._line_offset)
        return op

    def _get_op_by_name(self, name: str) -> type[Operation]:
        """The op class called `name`; a name no dialect defines is an error at the name, naming the closest known
        ops (or dialects), as a misspelled pass name is."""
        found = self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack)
        if found is not None:
            return found
        # the name was just read: it ends before the current token (after a quote in the generic form)
        content = self.lexer.input.content
        needle = name if isinstance(content, str) else name.encode()
        start = content.rfind(needle, 0, self._current_token.span.start)
        span = Span(max(start, 0), max(start, 0) + len(name), self.lexer.input)
        dialect = name.split(".", 1)[0]
        if "." in name and dialect not in self.ctx.registered_dialect_names:
            close = difflib.get_close_matches(dialect, list(self.ctx.registered_dialect_names), n=3, cutoff=0.6)
            hint = f"; no dialect '{dialect}'" + (f" (closest known: {', '.join(close)})" if close else "")
        else:
            # looking the name up loaded its dialect, so its ops are all known now; a name without a dialect is
            # looked up in the enclosing ops' dialects (`return` in a func.func)
            dialects = {dialect} if "." in name else set(self._parser_state.dialect_stack)
            names = [op.name for op in self.ctx.loaded_ops if op.name.split(".", 1)[0] in dialects]
            if "." not in name:
                names = [known.split(".", 1)[1] for known in names]
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
            hint = f" (closest known: {', '.join(close)})" if close else ""
        raise self._diagnostic(span, f"unknown op '{name}'{hint}")

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        module = super().parse_module(allow_implicit_module)
        # xDSL's parser resolves a name anywhere in the file (and a loop's initial value sometimes not at all),
        # and its verifier checks no dominance: a use its definition does not reach is an error here, at the use
        unreached = _use_before_definition(module)
        if unreached is not None:
            op, index = unreached
            span = self._positions.get(op) or Span(0, 0, self.lexer.input)
            raise self._diagnostic(span, f"{op.name}: operand {index} is used where its definition does not reach")
        return module

    def _parse_dialect_type_or_attribute_body(
        self, attr_name: str, is_type: bool, is_opaque: bool, starting_opaque_pos: int | None
    ) -> Attribute:
        """A dialect attribute or type: one that fails its verifier (a tile of rank 1, an unknown engine) is an
        error at the attribute, not an exception escaping the parser."""
        body_start = self.pos
        try:
            return super()._parse_dialect_type_or_attribute_body(attr_name, is_type, is_opaque, starting_opaque_pos)
        except VerifyException as error:
            # the span starts at the attribute's name (`!tile.tile<`), which the caller has consumed
            prefix = ("!" if is_type else "#") + attr_name
            start = body_start - len(prefix)
            if self.lexer.input.content[start:body_start] not in (prefix, prefix.encode()):
                start = body_start
            raise self._diagnostic(Span(start, start, self.lexer.input), f"{prefix}: {error}") from None

    def _diagnostic(self, span: SourceSpan, message: str) -> LocatedDiagnostic:
        """An invalid op or attribute the parser built, reported as a verifier failure is (it is one): a
        diagnostic, which `--verify-diagnostics` prints, not a syntax error."""
        span = dataclasses.replace(span, line_offset=self._line_offset)
        return LocatedDiagnostic(f"{span.get_location()}: error: {message}\n{_source_excerpt(span)}")


class NeuronOptMain(xDSLOptMain):
    version_format = f"neuron-opt {__version__} (xdsl {{xdsl_version}})"

    def __init__(self, description: str = "neuron-mlir modular optimizer driver", args: Sequence[str] | None = None):
        # op -> the span of its first token in the input (ops that passes create are not in it)
        self.positions: weakref.WeakKeyDictionary[Operation, SourceSpan] = weakref.WeakKeyDictionary()
        super().__init__(description=description, args=args)

    def register_all_dialects(self) -> None:
        # xDSL's driver created a plain Context just before: ours also names an unknown memory space as such
        self.ctx = NeuronContext()
        super().register_all_dialects()  # type: ignore[no-untyped-call]  # unannotated in xDSL
        for name, factory in ALL_DIALECTS.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()  # type: ignore[no-untyped-call]  # unannotated in xDSL
        for name, factory in ALL_PASSES.items():
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--check-semantics",
            action="store_true",
            help="run input and output IR on the same random inputs and compare every result",
        )
        arg_parser.add_argument(
            "--check-semantics-seed", type=int, default=0, help="seed of the random inputs of --check-semantics"
        )

    # -- the pass pipeline ---------------------------------------------------------------------------------------

    def setup_pipeline(self) -> None:
        """The passes of `-p`, each checked by name and options first: a mistake there is a usage error."""
        try:
            specs = list(parse_pipeline(self.args.passes))
        except ArgSpecParseError as error:
            _usage_error(_pipeline_syntax_error(str(error)))
        for spec in specs:
            if spec.name not in self.available_passes:
                close = difflib.get_close_matches(spec.name, list(self.available_passes), n=3, cutoff=0.6)
                hint = f" (closest known: {', '.join(close)})" if close else " (`neuron-opt --help` lists the passes)"
                _usage_error(f"unknown pass '{spec.name}'{hint}")
        passes: list[ModulePass] = []
        for spec in specs:
            try:
                passes.append(self.available_passes[spec.name]().from_pass_spec(spec))
            except (ValueError, TypeError) as error:
                _usage_error(f"pass '{spec.name}': {error}")
        self.pipeline = PassPipeline(tuple(passes))

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        if (self.args.frontend or file_extension) != "mlir":
            return super().parse_chunk(chunk, file_extension, start_offset)
        parser = _PositionRecordingParser(self.ctx, chunk.read(), self.get_input_name(), self.positions, start_offset)
        module = parser.parse_module(not self.args.no_implicit_module)
        if module not in self.positions:
            # the implicit module around the ops: what concerns the module as a whole is reported at its first op
            first = module.ops.first
            start = self.positions.get(first) if first is not None else None
            self.positions[module] = start or Span(0, 0, parser.lexer.input, start_offset)
        return module

    def output_resulting_program(self, prog: ModuleOp) -> str:
        """The output as xDSL prints it, ending in one newline (not two): a file written with `-o` then equals the
        same IR written by the compiler (`NEURON_MLIR_DEBUG_DIR`)."""
        return super().output_resulting_program(prog).rstrip("\n") + "\n"

    def run(self) -> None:
        """xDSL's driver, but a malformed input or a failing pass is a diagnostic and exit code 1, not a traceback."""
        try:
            super().run()  # type: ignore[no-untyped-call]  # unannotated in xDSL
        except ParseError as error:
            print(error, file=sys.stderr)
            sys.exit(1)
        except DiagnosticException as error:
            print(error, file=sys.stderr)
            for note in getattr(error, "__notes__", []):
                print(note, file=sys.stderr)
            sys.exit(1)

    def apply_passes(self, prog: ModuleOp) -> None:
        try:
            if not self.args.check_semantics:
                self._run_passes(prog)
                return
            self._check_semantics(prog)
        except VerifyException as error:
            raise self._verifier_diagnostic(prog, error) from None
        except LocatedDiagnostic:
            raise
        except DiagnosticException as error:
            op = getattr(error, "op", None)
            if not isinstance(op, Operation):
                raise
            raise LocatedDiagnostic(self.located(op, str(error))) from None

    def _check_semantics(self, module: ModuleOp) -> None:
        """The passes, then the input (as it was before them) and the output on the same random inputs. The
        input's copy keeps the positions of the ops it copies, so an op it cannot run is reported where it was
        written; the passes run first, so the reference semantics see only IR the compiler took."""
        import numpy as np

        import neuron_mlir.backend_trn  # noqa: F401  (registers the neuron level's semantics)
        from neuron_mlir.ir.semantics import random_inputs, run_function
        from neuron_mlir.ir.semantics.compare import compare_all
        from neuron_mlir.ir.semantics.structured import InterpretationError, find_function

        before = module.clone()
        for copy, original in zip(before.walk(), module.walk(), strict=True):
            if (span := self.positions.get(original)) is not None:
                self.positions[copy] = span
        self._run_passes(module)
        try:
            entry = find_function(before, "main").sym_name.data
        except InterpretationError:
            raise LocatedDiagnostic(
                self.located(before, "check-semantics: no function to run: name one @main (or write only one)")
            ) from None
        try:
            inputs = random_inputs(before, entry, self.args.check_semantics_seed, _CHECK_SEMANTICS_MAX_INPUT_BYTES)
            expected = run_function(before, [np.copy(a) for a in inputs], entry)
        except InterpretationError as error:
            raise LocatedDiagnostic(self.located(error.op or before, f"check-semantics: the input: {error}")) from None
        except MemoryError:
            raise LocatedDiagnostic(self.located(before, "check-semantics: out of memory running the input")) from None
        arguments_after = len(find_function(module, entry).function_type.inputs)
        if arguments_after != len(inputs):
            # the passes give random ops a seed argument: their results are drawn anew, nothing to compare
            raise LocatedDiagnostic(
                self.located(
                    before,
                    f"check-semantics: @{entry} takes {arguments_after} arguments after the passes, {len(inputs)} "
                    "before (a seed for its random ops): the outputs cannot be compared",
                )
            )
        try:
            actual = run_function(module, [np.copy(a) for a in inputs], entry)
        except InterpretationError as error:
            # the input ran: an output that cannot is the passes' fault (it reads "the output" for that reason)
            raise LocatedDiagnostic(self.located(error.op or module, f"check-semantics: the output: {error}")) from None
        except MemoryError:
            raise LocatedDiagnostic(self.located(module, "check-semantics: out of memory running the output")) from None
        # under auto_cast the passes compute fp32 matmuls in bf16 and the input runs as written: bf16's tolerance
        auto_cast = before.attributes.get("neuron.auto_cast")
        narrowed = isinstance(auto_cast, StringAttr) and auto_cast.data != "none"
        problems = compare_all(actual, expected, "bfloat16" if narrowed else None)
        if problems and not narrowed:
            judged = self._judged_by_golden(before, entry, inputs, actual, expected)
            problems = problems if judged is None else judged
        if problems:
            raise SemanticsMismatch("check-semantics: outputs differ:\n  " + "\n  ".join(problems))
        print(f"check-semantics: {len(inputs)} inputs, all outputs match", file=sys.stderr)

    @staticmethod
    def _judged_by_golden(
        before: ModuleOp, entry: str, inputs: list[Any], actual: list[Any], expected: list[Any]
    ) -> list[str] | None:
        """The outputs' problems again, with each low-precision float output that differs from the input's run
        judged against a float64 run of the input instead (`compare.golden_mismatch`): ATen's kernels in bf16
        round intermediate sums that the compiled program keeps in fp32, so its results may be off where ours
        are not. None when the input has no float64 run (not torch-level IR, or an op that refuses float64)."""
        import numpy as np

        from neuron_mlir.ir.semantics import level_of
        from neuron_mlir.ir.semantics.compare import golden_mismatch, mismatch
        from neuron_mlir.ir.semantics.structured import InterpretationError

        if level_of(before) != "torch":
            return None
        from neuron_mlir.ir.semantics.torch import run_torch_function

        try:
            golden = run_torch_function(before, [np.copy(a) for a in inputs], entry, widened=True)
        except (InterpretationError, MemoryError):
            return None
        problems = []
        for index, (got, want, exact) in enumerate(zip(actual, expected, golden, strict=True)):
            want = np.asarray(want)
            # bf16 and fp8 are ml_dtypes' ("V" kind), fp16 NumPy's
            narrow = want.dtype.kind in "fV" and want.dtype.itemsize < 4
            problem = mismatch(got, want)
            if problem is not None and narrow:
                problem = golden_mismatch(got, want, exact)
            if problem is not None:
                problems.append(f"output {index}: {problem}")
        return problems

    def _run_passes(self, module: ModuleOp) -> None:
        """The passes in order, verifying the IR before the first and after each (the IR a pass gets is valid, so
        a verifier failure after a pass is that pass's fault), with xDSL's `--print-between-passes` and
        `--time-passes` output; `neuron-pipeline` reports each of its own passes so."""
        passes = self.pipeline.passes
        self._verify(module)
        for index, pass_ in enumerate(passes):
            last = index == len(passes) - 1
            started = time.perf_counter()
            if isinstance(pass_, NeuronPipelinePass):
                self._run_neuron_pipeline(pass_, module, last)
                if self.args.time_passes:
                    print(f"Pass {pass_.name} took {time.perf_counter() - started} seconds")
                continue
            pass_.apply(self.ctx, module)
            self._after_pass(pass_.name, module, time.perf_counter() - started, last)

    def _run_neuron_pipeline(self, pipeline: NeuronPipelinePass, module: ModuleOp, last: bool) -> None:
        remaining = len(pipeline_passes(pipeline.until))
        timings: dict[str, float] = {}
        reported: dict[str, float] = {}

        def after_pass(name: str, current: ModuleOp) -> None:
            nonlocal remaining
            remaining -= 1
            seconds = timings[name] - reported.get(name, 0.0)  # a pass may run twice: its time of this run
            reported[name] = timings[name]
            self._after_pass(name, current, seconds, last and remaining == 0)

        run_pipeline(self.ctx, module, pipeline.until, timings=timings, after_pass=after_pass)

    def _after_pass(self, name: str, module: ModuleOp, seconds: float, last: bool) -> None:
        if self.args.time_passes:
            print(f"Pass {name} took {seconds} seconds")
        self._verify(module)
        if self.args.print_between_passes and not last:
            print(f"IR after {name}:")
            Printer(stream=sys.stdout, print_generic_format=self.args.print_op_generic).print_op(module)
            print("\n\n\n")

    def _verify(self, module: ModuleOp) -> None:
        if not self.args.disable_verify:
            module.verify()

    # -- diagnostics ---------------------------------------------------------------------------------------------

    def _verifier_diagnostic(self, module: ModuleOp, error: VerifyException) -> LocatedDiagnostic:
        """The verifier's message at the op that failed. xDSL names no op: it is the first whose own checks fail,
        nested ops before their parent, the order xDSL verifies in."""
        message = str(error)
        # an op's own checks first; then its regions' structure (an empty block where a terminator must be),
        # which only a full verification of the innermost op holding it finds
        for verify_nested_ops in (False, True):
            for op in module.walk(region_first=True):
                try:
                    op.verify(verify_nested_ops=verify_nested_ops)
                except VerifyException:
                    if not message.startswith(op.name):
                        message = f"{op.name}: {message}"
                    return LocatedDiagnostic(self.located(op, message))
        return LocatedDiagnostic(self.located(module, message))

    def located(self, op: Operation | None, message: str) -> str:
        """`file:line:col: error: <message>` followed by the op: its source line and a caret when it was written
        in the input, the op itself otherwise."""
        span = self.positions.get(op) if op is not None else None
        if span is not None:
            position = span.get_location()
            where = describe_location(op.location) if op is not None else ""
            if where and f"(at {where})" not in message:
                message += f" (at {where})"
            return f"{position}: error: {message}\n{_source_excerpt(span)}"
        if op is None:
            return f"{self.get_input_name()}: error: {message}"
        op_position = file_position(op.location) or self._enclosing_position(op) or self.get_input_name()
        return f"{op_position}: error: {message}\n{self._op_excerpt(op)}"

    def _enclosing_position(self, op: Operation) -> str | None:
        """The position of the innermost op around `op` that was written in the input (the function a pass
        created it in), for an op that has neither a position nor a source location of its own."""
        parent = op.parent_op()
        while parent is not None:
            if (span := self.positions.get(parent)) is not None:
                return str(span.get_location())
            parent = parent.parent_op()
        return None

    def _op_excerpt(self, op: Operation) -> str:
        stream = StringIO()
        Printer(stream=stream, print_generic_format=self.args.print_op_generic).print_op(op)
        lines = stream.getvalue().strip("\n").splitlines()
        if len(lines) > _MAX_OP_LINES:
            lines = [lines[0], "  ...", lines[-1]]
        return "\n".join(lines)


def _use_before_definition(module: ModuleOp) -> tuple[Operation, int] | None:
    """The first (op, operand index) whose value is not defined before it in its block or an enclosing one."""
    order: dict[Operation, int] = {}
    for op in module.walk():
        for region in op.regions:
            for block in region.blocks:
                order.update((child, position) for position, child in enumerate(block.ops))
    for op in module.walk():
        for index, operand in enumerate(op.operands):
            if not _reaches(operand, op, order):
                return op, index
    return None


def _reaches(value: SSAValue, user: Operation, order: dict[Operation, int]) -> bool:
    if isinstance(value, BlockArgument):
        enclosing: Operation | None = user
        while enclosing is not None:
            if enclosing.parent_block() is value.block:
                return True
            enclosing = enclosing.parent_op()
        return False
    if not isinstance(value, OpResult):
        return False  # a placeholder of the parser's that no definition replaced
    definer = value.op
    enclosing = user
    while enclosing is not None and enclosing.parent_block() is not definer.parent_block():
        enclosing = enclosing.parent_op()
    return enclosing is not None and enclosing is not definer and order[definer] < order[enclosing]


def _op_name_at(span: SourceSpan) -> str | None:
    """The name of the op written at `span` (`%r = torch.aten.relu ...` or `"tile.load"(...)`), if it reads as one."""
    text = span.input.content[span.start : span.start + 400]
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    match = _OP_NAME_AFTER_RESULTS.match(text)
    return match.group(1) or match.group(2) if match else None


def _source_excerpt(span: SourceSpan) -> str:
    """The line `span` starts on, and a caret under its first character."""
    source = span.input
    line_start = source.get_start_of_line(span.start)
    before = source.content[line_start : span.start]
    line = source.content[line_start : source.get_end_of_line(span.start)]
    # columns of bytes (a file is parsed as it is read): the caret goes by characters
    if isinstance(before, bytes):
        before = before.decode("utf-8", "replace")
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    return f"{line}\n{' ' * len(before)}^"


def _pipeline_syntax_error(text: str) -> str:
    """xDSL's pass-pipeline syntax error (a heading, the position, the spec, a caret, the message) as the message
    first, then the spec and the caret."""
    lines = text.rstrip("\n").splitlines()
    if len(lines) != 5:
        return text.strip()
    spec, caret, message = lines[2], lines[3], lines[4].strip()
    return f"malformed pass pipeline: {message}\n  {spec}\n  {caret}"


def _usage_error(message: str) -> NoReturn:
    print(f"neuron-opt: error: {message}", file=sys.stderr)
    sys.exit(2)


def main(args: Sequence[str] | None = None) -> None:
    NeuronOptMain(description="neuron-mlir modular optimizer driver", args=args).run()


if __name__ == "__main__":
    main()
