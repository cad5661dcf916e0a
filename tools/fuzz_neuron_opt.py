"""Fuzzing `neuron-opt`: mutated IR goes in, and a result or a positioned diagnostic comes out, never a traceback
or a hang.

    python -m neuron_mlir.tools.fuzz_neuron_opt --cases 10000 --jobs 2 --save-dir build/fuzz

The seed corpus is every `.mlir` file under `test/lit` (split at `// -----` as `--split-input-file` would), which
includes the IR dumped from whole models in `test/lit/lowering/Inputs` at every stage. Case `i` of a run with seed
`s` is fully determined by `(s, i)`: a seed chunk, then one to three mutations (tokens deleted, duplicated or
swapped, integers, shapes, element types and attribute values changed, an op renamed to another op of its dialect,
lines deleted, duplicated or swapped, the text truncated). Each case runs through `neuron-opt -p neuron-pipeline`,
half of them with `--check-semantics`, in a worker process and in-process there (neuron-opt's own `main`), and is
classified:

- accepted: exit code 0;
- diagnosed: exit code 1 with a positioned diagnostic first (`file:line:col`, of the input or of the op's
  source location), the tool's own error path;
- unpositioned: exit code 1, but the diagnostic says nowhere where;
- mismatch: `--check-semantics` found the output computing something else than the input, or not running at
  all (a miscompile);
- crash: any exception escaping neuron-opt's main (a Python traceback), grouped by the innermost frame of the
  project or of xDSL that raised it;
- hang: more CPU seconds than a case's time limit (or no answer at all); the worker is replaced and the run goes on.

A run prints a summary and exits with 1 when anything but accepted and diagnosed cases occurred. `--save-dir`
keeps every failing input (and its traceback), `--minimize` shrinks the first input of each crash site to the
lines and tokens that still raise the same way, the start of a regression test.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import redirect_stderr, redirect_stdout, suppress
from io import StringIO
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
LIT_ROOT = REPOSITORY / "test" / "lit"

# What a worker may use: a mutated shape can ask for tensors of terabytes, which must fail as a diagnostic, not
# take the machine's memory with it.
WORKER_MEMORY_BYTES = 6 * 1024**3
# A case's own limit counts the CPU seconds its worker spends, so that a loaded machine does not make slow cases
# hangs; a worker that gives no answer for this many times that limit of wall time is stuck where no signal
# reaches (asleep, or starved) and is killed.
HARD_TIMEOUT_FACTOR = 5.0

PIPELINE_ARGS: tuple[tuple[str, ...], ...] = (
    ("-p", "neuron-pipeline"),
    ("-p", "neuron-pipeline", "--check-semantics"),
)

# `file:line:col` at the start of the first line: xDSL's parse errors, and our `file:line:col: error: ...`
_POSITIONED = re.compile(r"^[^\s:][^:\n]*:\d+:\d+(:|$)")
_TOKEN = re.compile(
    r"""%[\w.$#-]+|\^[\w.$-]+|@[\w.$-]+|#[\w.$-]+|![\w.$-]+|"(?:[^"\\\n]|\\.)*"|-?\d+\.\d*(?:[eE][-+]?\d+)?"""
    r"""|-?\d+|[A-Za-z_][\w.$]*|->|\S"""
)
_INTEGER = re.compile(r"(?<![\w.%#@^])-?\d+(?![\w.])")
# the dimensions of a shaped type (`4x?x3x`), then its element type
_SHAPED_TYPE = re.compile(r"\b(?:tensor|memref|vector)<((?:(?:\d+|\?)x)*)([a-z]\w*)")
_ELEMENT_TYPE = re.compile(r"(?:(?<=[\d?]x)|\b)(f16|bf16|f32|f64|i1|i8|i16|i32|i64|index)(?!\w)")
_ATTRIBUTE_ENTRY = re.compile(r"(?:(?<=\{)|(?<=, ))([A-Za-z_]\w*) = ([^,{}]+?)(?=[,}])")
_OP_NAME = re.compile(r"\b(torch|tile|neuron|mem|arith|scf|func|memref)\.([A-Za-z_][\w.]*)")
ELEMENT_TYPES = ("f16", "bf16", "f32", "f64", "i1", "i8", "i32", "i64", "index")
INTERESTING_INTEGERS = (0, 1, -1, 2, 3, 127, 128, 129, 255, 512, 4096, 65536, 2**31, 2**40, -(2**31))


# -- the corpus -------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Seed:
    """A chunk of a corpus file: the IR between two `// -----` lines, with its comment lines dropped."""

    name: str
    text: str


def load_corpus(roots: Iterable[Path] = (LIT_ROOT,), max_chars: int | None = None) -> list[Seed]:
    """Every chunk of every `.mlir` file under `roots`, in a stable order; chunks longer than `max_chars` are left
    out (a short run keeps to small inputs)."""
    seeds: list[Seed] = []
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.mlir"))
        for path in files:
            chunks = path.read_text().split("// -----")
            for index, chunk in enumerate(chunks):
                # comments (RUN and CHECK lines) only dilute the mutations
                text = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("//")).strip()
                if not text or (max_chars is not None and len(text) > max_chars):
                    continue
                name = str(path.relative_to(REPOSITORY) if path.is_relative_to(REPOSITORY) else path)
                seeds.append(Seed(f"{name}#{index}" if len(chunks) > 1 else name, text + "\n"))
    return seeds


def op_names_by_dialect(seeds: Sequence[Seed]) -> dict[str, list[str]]:
    """The op names an op-name swap picks from, by dialect: those the corpus uses, and every op of our dialects
    (most torch ops appear in no test)."""
    from neuron_mlir.ir.dialects import ALL_DIALECTS

    names: dict[str, set[str]] = defaultdict(set)
    for seed in seeds:
        for match in _OP_NAME.finditer(seed.text):
            names[match.group(1)].add(match.group(0))
    for dialect, factory in ALL_DIALECTS.items():
        names[dialect].update(op.name for op in factory().operations)
    return {dialect: sorted(ops) for dialect, ops in names.items() if ops}


# -- mutations ------------------------------------------------------------------------------------------------

Mutation = Callable[[random.Random, str, dict[str, list[str]]], str]


def _tokens(text: str) -> list[re.Match[str]]:
    return list(_TOKEN.finditer(text))


def _replace(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def delete_token(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    tokens = _tokens(text)
    if not tokens:
        return text
    token = rng.choice(tokens)
    return _replace(text, token.start(), token.end(), "")


def duplicate_token(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    tokens = _tokens(text)
    if not tokens:
        return text
    token = rng.choice(tokens)
    return _replace(text, token.end(), token.end(), " " + token.group(0))


def swap_tokens(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    tokens = _tokens(text)
    if len(tokens) < 2:
        return text
    first = rng.randrange(len(tokens) - 1)
    # mostly neighbours (`%a, %b` -> `%b, %a`), sometimes anywhere
    second = first + 1 if rng.random() < 0.6 else rng.randrange(len(tokens))
    a, b = sorted((tokens[first], tokens[second]), key=lambda match: match.start())
    if a is b:
        return text
    return text[: a.start()] + b.group(0) + text[a.end() : b.start()] + a.group(0) + text[b.end() :]


def _new_integer(rng: random.Random, old: int) -> int:
    return rng.choice((*INTERESTING_INTEGERS, old + 1, old - 1, old * 2, -old, old // 2))


def change_integer(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    integers = list(_INTEGER.finditer(text))
    if not integers:
        return text
    match = rng.choice(integers)
    return _replace(text, match.start(), match.end(), str(_new_integer(rng, int(match.group(0)))))


def change_shape(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    """A dimension of a tensor, memref or vector type changed, added or removed (the rank changes)."""
    types = list(_SHAPED_TYPE.finditer(text))
    if not types:
        return text
    match = rng.choice(types)
    dims = match.group(1).split("x")[:-1]
    choice = rng.random()
    if dims and choice < 0.5:
        index = rng.randrange(len(dims))
        old = int(dims[index]) if dims[index].isdigit() else 1
        dims[index] = str(abs(_new_integer(rng, old)))
    elif dims and choice < 0.75:
        del dims[rng.randrange(len(dims))]
    else:
        dims.insert(rng.randrange(len(dims) + 1), str(rng.choice((1, 2, 3, 128, 129))))
    return _replace(text, match.start(1), match.end(1), "".join(f"{dim}x" for dim in dims))


def swap_element_type(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    types = list(_ELEMENT_TYPE.finditer(text))
    if not types:
        return text
    match = rng.choice(types)
    if rng.random() < 0.5:  # every use of that type at once: a consistently retyped program
        new = rng.choice([name for name in ELEMENT_TYPES if name != match.group(0)])
        return re.sub(rf"\b{match.group(0)}\b", new, text)
    return _replace(text, match.start(), match.end(), rng.choice(ELEMENT_TYPES))


def change_attribute(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    """An entry `name = value` of an attribute dictionary: a new value, a value of another kind, or gone."""
    entries = list(_ATTRIBUTE_ENTRY.finditer(text))
    if not entries:
        return text
    match = rng.choice(entries)
    value = match.group(2)
    choice = rng.random()
    if choice < 0.2:
        return _replace(text, match.start(), match.end(), f"{match.group(1)}_renamed = {value}")
    if choice < 0.35:
        return _replace(text, match.start(2), match.end(2), rng.choice(("unit", '"x"', "1 : i64", "[]", "array<i64>")))
    if choice < 0.5:
        # remove the entry (and the comma after it, when there is one)
        end = match.end() + 1 if text[match.end() : match.end() + 1] == "," else match.end()
        return _replace(text, match.start(), end, "")
    integers = list(_INTEGER.finditer(value))
    if integers:
        integer = rng.choice(integers)
        new_value = _replace(value, integer.start(), integer.end(), str(_new_integer(rng, int(integer.group(0)))))
    elif "array<i64:" in value and rng.random() < 0.5:
        new_value = value.replace("array<i64:", "array<i64", 1).split(">")[0].split(":")[0] + ">"
    else:
        new_value = rng.choice(("true", "false", "0 : i64", "-1 : i64", '"none"', "1.5 : f32"))
    return _replace(text, match.start(2), match.end(2), new_value)


def swap_op_name(rng: random.Random, text: str, ops: dict[str, list[str]]) -> str:
    names = list(_OP_NAME.finditer(text))
    if not names:
        return text
    match = rng.choice(names)
    candidates = ops.get(match.group(1), [])
    if not candidates:
        return text
    return _replace(text, match.start(), match.end(), rng.choice(candidates))


def truncate(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
    return text[: rng.randrange(len(text) + 1)]


def _line_mutation(name: str, edit: Callable[[random.Random, list[str]], None]) -> Mutation:
    def mutate(rng: random.Random, text: str, _ops: dict[str, list[str]]) -> str:
        lines = text.splitlines()
        if len(lines) < 2:
            return text
        edit(rng, lines)
        return "\n".join(lines) + "\n"

    mutate.__name__ = name
    return mutate


def _delete_line(rng: random.Random, lines: list[str]) -> None:
    del lines[rng.randrange(len(lines))]


def _duplicate_line(rng: random.Random, lines: list[str]) -> None:
    index = rng.randrange(len(lines))
    lines.insert(index, lines[index])


def _swap_lines(rng: random.Random, lines: list[str]) -> None:
    first, second = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[first], lines[second] = lines[second], lines[first]


delete_line = _line_mutation("delete_line", _delete_line)
duplicate_line = _line_mutation("duplicate_line", _duplicate_line)
swap_lines = _line_mutation("swap_lines", _swap_lines)

# (mutation, weight): the type- and value-level ones get through the parser more often, so they weigh more
MUTATIONS: tuple[tuple[Mutation, int], ...] = (
    (delete_token, 2),
    (duplicate_token, 1),
    (swap_tokens, 2),
    (change_integer, 4),
    (change_shape, 5),
    (swap_element_type, 4),
    (change_attribute, 4),
    (swap_op_name, 4),
    (truncate, 1),
    (delete_line, 2),
    (duplicate_line, 1),
    (swap_lines, 1),
)


@dataclasses.dataclass(frozen=True)
class Case:
    index: int
    seed: str
    mutations: tuple[str, ...]
    args: tuple[str, ...]
    text: str


def make_case(seed: int, index: int, corpus: Sequence[Seed], ops: dict[str, list[str]]) -> Case:
    """Case `index` of the run with `seed`: the same every time, whatever ran before it."""
    rng = random.Random(f"{seed}:{index}")
    chunk = rng.choice(corpus)
    text = chunk.text
    applied: list[str] = []
    functions, weights = zip(*MUTATIONS, strict=True)
    for mutation in rng.choices(functions, weights, k=rng.choice((1, 1, 1, 2, 2, 3))):
        text = mutation(rng, text, ops)
        applied.append(mutation.__name__)
    return Case(index, chunk.name, tuple(applied), rng.choice(PIPELINE_ARGS), text)


# -- running a case -----------------------------------------------------------------------------------------------

ACCEPTED, DIAGNOSED, UNPOSITIONED, MISMATCH, CRASH, HANG = (
    "accepted",
    "diagnosed",
    "unpositioned",
    "mismatch",
    "crash",
    "hang",
)
FAILURES = (UNPOSITIONED, MISMATCH, CRASH, HANG)


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str
    # crashes: `ExceptionType at file.py:line (function)`, the site they are grouped by; else the first line
    signature: str
    detail: str
    seconds: float


class CaseTimeout(BaseException):
    """A case ran out of time (a BaseException, so that no `except Exception` in the code under test eats it)."""


def _on_alarm(_signal: int, _frame: object) -> None:
    raise CaseTimeout


def crash_site(error: BaseException) -> str:
    """`IndexError at lowering/foo.py:12 (bar)`: the innermost frame of the project's own code, or of xDSL's when
    the project's code is not on the stack."""
    frames = traceback.extract_tb(error.__traceback__)

    def own(path: Path) -> bool:
        return path.is_relative_to(REPOSITORY) and "site-packages" not in path.parts

    site = next((frame for frame in reversed(frames) if own(Path(frame.filename))), None)
    site = site or next((frame for frame in reversed(frames) if "xdsl" in Path(frame.filename).parts), None)
    site = site or (frames[-1] if frames else None)
    if site is None:
        return type(error).__name__
    path = Path(site.filename)
    shown = path.relative_to(REPOSITORY) if own(path) else Path(*path.parts[-3:])
    return f"{type(error).__name__} at {shown}:{site.lineno} ({site.name})"


def run_neuron_opt(text: str, args: Sequence[str], path: Path, timeout: float | None = None) -> Outcome:
    """Run neuron-opt's main on `text` (written to `path`) in this process, and classify what it did; a case that
    spends more than `timeout` CPU seconds is a hang."""
    from neuron_mlir.tools.neuron_opt import main

    path.write_text(text)
    stdout, stderr = StringIO(), StringIO()
    started, cpu_started = time.perf_counter(), time.process_time()
    code: object = 0
    if timeout is not None:
        signal.signal(signal.SIGPROF, _on_alarm)
        signal.setitimer(signal.ITIMER_PROF, timeout)
    try:
        with redirect_stdout(stdout), redirect_stderr(stderr):
            main([str(path), *args, "-o", os.devnull])
    except SystemExit as exit_:
        code = exit_.code
    except CaseTimeout:
        return Outcome(HANG, f"more than {timeout:g} CPU seconds", "", time.perf_counter() - started)
    except Exception as error:  # everything else escaping main is what the fuzzer looks for
        site = crash_site(error)
        detail = "".join(traceback.format_exception(error))
        return Outcome(CRASH, site, detail, time.perf_counter() - started)
    finally:
        if timeout is not None:
            signal.setitimer(signal.ITIMER_PROF, 0)
    seconds = time.perf_counter() - started
    if timeout is not None and time.process_time() - cpu_started > timeout:
        # over its limit even where the time limit's exception was swallowed on its way out (an `except
        # BaseException` in the code under test): the CPU seconds decide, not where the signal landed
        return Outcome(HANG, f"more than {timeout:g} CPU seconds", "", seconds)
    message = stderr.getvalue()
    first_line = message.splitlines()[0] if message.strip() else ""
    if code in (0, None):
        return Outcome(ACCEPTED, "", "", seconds)
    # the input ran, so an output that computes otherwise, or cannot run at all, is the passes' fault
    if "check-semantics: outputs differ" in message or "error: check-semantics: the output:" in message:
        return Outcome(MISMATCH, first_line, message, seconds)
    if code == 1 and _POSITIONED.match(first_line):
        return Outcome(DIAGNOSED, first_line, message, seconds)
    return Outcome(UNPOSITIONED, f"exit code {code}: {first_line}", message, seconds)


def _worker(connection: multiprocessing.connection.Connection, directory: str, timeout: float) -> None:
    """Runs the cases the parent sends until it sends None. It imports what cases use before it says it is ready:
    a time limit that fired inside an import would leave the module half-initialised for every later case."""
    import resource

    import torch  # noqa: F401, TID251  # the semantics checker's reference runs import it lazily

    from neuron_mlir.tools.neuron_opt import main  # noqa: F401

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    sys.setrecursionlimit(5000)
    connection.send(None)
    while True:
        case = connection.recv()
        if case is None:
            return
        path = Path(directory) / f"case-{case.index}.mlir"
        try:
            outcome = run_neuron_opt(case.text, case.args, path, timeout)
        except MemoryError as error:  # raised outside main (writing the file, classifying): still the case's
            outcome = Outcome(CRASH, crash_site(error), "".join(traceback.format_exception(error)), 0.0)
        finally:
            path.unlink(missing_ok=True)
        connection.send(outcome)


class _WorkerHandle:
    def __init__(self, context: multiprocessing.context.BaseContext, directory: str, timeout: float):
        self.connection, child = multiprocessing.Pipe()
        self.process = context.Process(target=_worker, args=(child, directory, timeout), daemon=True)  # type: ignore[attr-defined]
        self.process.start()
        child.close()
        self.case: Case | None = None
        self.started = 0.0

    def wait_ready(self) -> None:
        """Wait for the worker's imports, which no case's time should pay for."""
        with suppress(EOFError, OSError):  # a worker that died starting is reported with its first case
            self.connection.recv()

    def send(self, case: Case) -> None:
        self.case, self.started = case, time.perf_counter()
        self.connection.send(case)

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.connection.close()


def run_cases(cases: Iterable[Case], jobs: int = 1, timeout: float = 60.0) -> Iterator[tuple[Case, Outcome]]:
    """Each case in a worker process (`jobs` of them), in order of completion; a worker that dies or stops
    answering is reported as that case's crash or hang and replaced."""
    context = multiprocessing.get_context("spawn")
    pending = iter(cases)
    with tempfile.TemporaryDirectory(prefix="neuron-opt-fuzz-") as directory:
        workers = [_WorkerHandle(context, directory, timeout) for _ in range(jobs)]
        for worker in workers:
            worker.wait_ready()
        busy: list[_WorkerHandle] = []
        try:
            for worker in workers:
                case = next(pending, None)
                if case is None:
                    break
                worker.send(case)
                busy.append(worker)
            while busy:
                ready = multiprocessing.connection.wait([worker.connection for worker in busy], timeout=1.0)
                for worker in list(busy):
                    assert worker.case is not None
                    outcome: Outcome | None = None
                    if worker.connection in ready:
                        try:
                            outcome = worker.connection.recv()
                        except (EOFError, OSError):
                            worker.process.join()
                            outcome = Outcome(CRASH, f"worker died (exit code {worker.process.exitcode})", "", 0.0)
                    elif time.perf_counter() - worker.started > timeout * HARD_TIMEOUT_FACTOR:
                        limit = timeout * HARD_TIMEOUT_FACTOR
                        outcome = Outcome(HANG, f"no answer within {limit:g} s of wall time (killed)", "", 0.0)
                    if outcome is None:
                        continue
                    yield worker.case, outcome
                    # a time limit can fire anywhere (inside a module's import, a cache's update): a worker
                    # interrupted by one is not trusted with another case
                    if not worker.process.is_alive() or outcome.kind == HANG:
                        worker.stop()
                        busy.remove(worker)
                        worker = _WorkerHandle(context, directory, timeout)
                        worker.wait_ready()
                        workers.append(worker)
                        busy.append(worker)
                    case = next(pending, None)
                    if case is None:
                        busy.remove(worker)
                    else:
                        worker.send(case)
        finally:
            for worker in workers:
                if worker.process.is_alive():
                    with suppress(BrokenPipeError, OSError):
                        worker.connection.send(None)
                worker.process.join(timeout=5)
                worker.stop()


# -- minimising -----------------------------------------------------------------------------------------------


def minimize(text: str, args: Sequence[str], signature: str, timeout: float = 60.0) -> str:
    """The smallest text found (dropping lines, then tokens) that still fails with `signature`."""
    with tempfile.TemporaryDirectory(prefix="neuron-opt-minimize-") as directory:
        path = Path(directory) / "input.mlir"

        def still_fails(candidate: str) -> bool:
            return run_neuron_opt(candidate, args, path, timeout).signature == signature

        lines = text.splitlines()
        lines = _reduce(lines, lambda kept: still_fails("\n".join(kept) + "\n"))
        text = "\n".join(lines) + "\n"
        tokens = [match.group(0) for match in _TOKEN.finditer(text)]
        # tokens with their spacing, so that kept ones still read as the original lines
        pieces = _TOKEN.split(text)
        spaced = [pieces[i] + tokens[i] for i in range(len(tokens))]
        kept = _reduce(spaced, lambda kept: still_fails("".join(kept) + "\n"))
        return "".join(kept).rstrip() + "\n"


def _reduce(items: list[str], interesting: Callable[[list[str]], bool]) -> list[str]:
    """Delta debugging: drop chunks of `items`, halving the chunk size, while the rest stays interesting."""
    chunk = max(1, len(items) // 2)
    while chunk >= 1:
        index = 0
        while index < len(items):
            candidate = items[:index] + items[index + chunk :]
            if candidate and interesting(candidate):
                items = candidate
            else:
                index += chunk
        if chunk == 1:
            break
        chunk //= 2
    return items


# -- the command line ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Summary:
    cases: int = 0
    seconds: float = 0.0
    kinds: Counter[str] = dataclasses.field(default_factory=Counter)
    # failure signature -> the cases that failed so
    failures: dict[tuple[str, str], list[Case]] = dataclasses.field(default_factory=lambda: defaultdict(list))

    def add(self, case: Case, outcome: Outcome) -> None:
        self.cases += 1
        self.kinds[outcome.kind] += 1
        if outcome.kind in FAILURES:
            self.failures[outcome.kind, outcome.signature].append(case)

    @property
    def failed(self) -> int:
        return sum(self.kinds[kind] for kind in FAILURES)

    def render(self, seed: int) -> str:
        lines = [
            f"neuron-opt fuzz: {self.cases} cases (seed {seed}) in {self.seconds:.0f} s",
            f"  accepted                              {self.kinds[ACCEPTED]:7d}",
            f"  rejected with a positioned diagnostic {self.kinds[DIAGNOSED]:7d}",
            f"  rejected without a position           {self.kinds[UNPOSITIONED]:7d}",
            f"  check-semantics mismatches            {self.kinds[MISMATCH]:7d}",
            f"  crashes (Python tracebacks)           {self.kinds[CRASH]:7d}",
            f"  hangs                                 {self.kinds[HANG]:7d}",
        ]
        if self.failures:
            lines.append("failures by site (count, kind, site, first case):")
            ranked = sorted(self.failures.items(), key=lambda item: (-len(item[1]), item[0]))
            for (kind, signature), cases in ranked:
                lines.append(f"  {len(cases):5d}  {kind:12s} {signature}  (case {cases[0].index}: {cases[0].seed})")
        return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cases", type=int, default=1000, help="how many cases to run (default 1000)")
    parser.add_argument("--first-case", type=int, default=0, help="index of the first case (to replay a range)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed: the cases follow from it")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=60.0, help="CPU seconds a case may take before it is a hang")
    parser.add_argument("--corpus", type=Path, action="append", help="files or directories (default test/lit)")
    parser.add_argument("--max-seed-chars", type=int, help="leave out corpus chunks longer than this")
    parser.add_argument("--save-dir", type=Path, help="write each failing case's input and traceback here")
    parser.add_argument("--minimize", action="store_true", help="shrink the first input of each crash site")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)

    corpus = load_corpus(args.corpus or (LIT_ROOT,), args.max_seed_chars)
    if not corpus:
        parser.error("the corpus is empty")
    ops = op_names_by_dialect(corpus)
    cases = (make_case(args.seed, index, corpus, ops) for index in range(args.first_case, args.first_case + args.cases))
    summary = Summary()
    started = time.perf_counter()
    if args.save_dir:
        args.save_dir.mkdir(parents=True, exist_ok=True)
    for case, outcome in run_cases(cases, args.jobs, args.timeout):
        summary.add(case, outcome)
        if outcome.kind in FAILURES and args.save_dir:
            stem = args.save_dir / f"{outcome.kind}-{case.index}"
            stem.with_suffix(".mlir").write_text(
                f"// neuron-opt {' '.join(case.args)}\n// seed chunk {case.seed}, mutations {', '.join(case.mutations)}"
                f"\n{case.text}"
            )
            stem.with_suffix(".txt").write_text(f"{outcome.signature}\n\n{outcome.detail}")
        if not args.quiet and sys.stderr.isatty():
            print(f"\r{summary.cases}/{args.cases} cases, {summary.failed} failures", end="", file=sys.stderr)
    summary.seconds = time.perf_counter() - started
    if not args.quiet and sys.stderr.isatty():
        print(file=sys.stderr)
    print(summary.render(args.seed))
    if args.minimize:
        for (kind, signature), failed in summary.failures.items():
            if kind != CRASH:
                continue
            reduced = minimize(failed[0].text, failed[0].args, signature, args.timeout)
            print(f"\n{signature}: case {failed[0].index} minimised ({' '.join(failed[0].args)}):\n{reduced}")
            if args.save_dir:
                (args.save_dir / f"crash-{failed[0].index}.min.mlir").write_text(reduced)
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
