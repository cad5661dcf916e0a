"""A training graph's backward compiled ahead, in a forked process, while the forward compiles and runs.

AOTAutograd partitions the joint graph into a forward and a backward before it compiles either, then compiles the
forward, runs it, and compiles the backward only when the first backward call needs it: a first training step is
forward compile, forward run, backward compile, backward run, one after the other on one core. The backward graph
is final at the partition, though (AOTAutograd may still give its saved activations the strides the compiled
forward returns them with; ours returns them as traced). So when the forward's compile starts, a forked child
compiles the backward with the same `compile_graph` on the other core, and the parent, when AOTAutograd asks for
the backward, takes what the child made.

Contract:
- `AheadCompile.remember` is the partition's hook: it keeps the backward graph. `start` (from the forward's
  compiler) forks the child unless compiling ahead is off (the `compile_ahead` option) or cannot pay: one core, a
  platform without a safe `fork` (only Linux is used), a debug directory or `time_passes` (whose files and
  printed times come from compiling in the process), the compile cache off (the child's programs come back
  through it), a process group initialised (its sockets and threads are not the child's to share), a graph of
  fewer than `MIN_NODES` ops (compiled in about a second anyway), or `os.cpu_count() - 1` children already
  running.
- The child compiles the graph as the parent would (progress display, logging and output off, one intra-op
  thread) and writes every program it added to the compile cache, with its metadata (the graph signature), to a
  private directory, then a file saying they are all there. Then it makes each program's first-run analysis
  (`simulator.analyse_validated`: the profile and the race check, which need no data) and writes it there too,
  and exits without running the parent's exit handlers. It dies with the parent.
- `collect` (from the backward's compiler) waits for the programs while the child lives and its CPU time
  advances (a child stuck for `STALL_SECONDS` is killed), reads each bundle back (validated as any bundle read
  from disk) into the process's compile cache, marked as compiled ahead, and leaves the child analysing: the
  program's first run (`simulator.expect_analysis`) does its data work meanwhile, on this core, then takes the
  child's analysis (waiting for it as for the programs); when none comes (a race, which that run then finds and
  words itself, a failure, bytes that are not a profile), it times and checks itself as any first run does.
- The backward's compile then goes as always: a graph the child compiled is found in the cache
  (`stats()["compiled_ahead"]` counts it, not as a cache hit); a graph that differs from the one the child saw
  misses and is compiled in the process. A child that failed leaves nothing, and the parent's compile reports what
  the child's would have.
- A child whose backward is never asked for (a training graph only run forward) is killed and its directory
  removed when its `AheadCompile` is collected or the process exits.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from neuron_mlir.frontend.backend import CompileOptions
    from neuron_mlir.runtime.profile import Profile

logger = logging.getLogger("neuron_mlir")

MIN_NODES = 200
"""Backward graphs with fewer ops are compiled in the process: they compile in about a second, where forking,
writing and reading back the programs is a fixed cost of tens of milliseconds."""

STALL_SECONDS = 10.0
"""How long a child's CPU time may stand still before it is taken for stuck and killed."""

_POLL_SECONDS = 0.02
_COMPILED = "compiled"
"""The file a child writes once every program it compiled is in its directory."""
_CHILDREN: dict[int, int | None] = {}
"""The children not yet collected or abandoned, by pid: their exit code once reaped, None while they run."""


def enabled(options: CompileOptions) -> bool:
    """Whether the options (`compile_ahead`, NEURON_MLIR_COMPILE_AHEAD=0) and the process allow compiling ahead."""
    if not options.compile_ahead:
        return False
    if not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2:
        return False
    if not options.cache or options.debug_dir or options.time_passes:
        return False
    return not (torch.distributed.is_available() and torch.distributed.is_initialized())


class AheadCompile:
    """The backward of one AOTAutograd trace, compiled ahead in a child process (module docstring)."""

    def __init__(self, options: CompileOptions) -> None:
        self.options = options
        self.backward: torch.fx.GraphModule | None = None
        self.child: _Child | None = None
        self._abandon: weakref.finalize[[int, Path], AheadCompile] | None = None

    def remember(self, backward: torch.fx.GraphModule) -> None:
        self.backward = backward

    def start(self) -> None:
        """Fork the child compiling the remembered backward, when that can pay (module docstring)."""
        backward, self.backward = self.backward, None
        if backward is None or self.child is not None or not enabled(self.options):
            return
        if sum(1 for node in backward.graph.nodes if node.op == "call_function") < MIN_NODES:
            return
        if sum(1 for pid in _CHILDREN if _exit_code(pid) is None) >= (os.cpu_count() or 1) - 1:
            return
        self.child = _Child.fork(backward, self.options)
        if self.child is not None:
            self._abandon = weakref.finalize(self, _abandon, self.child.pid, self.child.directory)

    def collect(self) -> None:
        """Wait for the child and put the programs it compiled into the compile cache (module docstring)."""
        child, self.child = self.child, None
        if child is not None:
            assert self._abandon is not None
            self._abandon.detach()  # the child is the programs' now, while it analyses them
            child.collect()


class _Child:
    def __init__(self, pid: int, directory: Path) -> None:
        self.pid = pid
        self.directory = directory
        self.started = time.perf_counter()
        self.awaited: set[str] = set()  # the programs whose first run is to take the child's analysis

    @staticmethod
    def fork(backward: torch.fx.GraphModule, options: CompileOptions) -> _Child | None:
        directory = Path(tempfile.mkdtemp(prefix="neuron-mlir-ahead-"))
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as error:  # out of processes or memory: compile in the process as usual
            logger.debug("neuron-mlir: no compile ahead: %s", error)
            shutil.rmtree(directory, ignore_errors=True)
            return None
        if pid == 0:  # the child never returns
            _child_main(backward, options, directory, parent)
        _CHILDREN[pid] = None
        return _Child(pid, directory)

    def collect(self) -> None:
        from neuron_mlir.frontend import stats

        waited = time.perf_counter()
        if self._wait_for(self.directory / _COMPILED, "compile"):
            self._read_programs()
        if self.awaited:  # killed with the last program awaiting it, if that never runs, or at exit
            weakref.finalize(self, _abandon, self.pid, self.directory)
        else:
            self.abandon()
        stats.record_compile_seconds(time.perf_counter() - waited)

    def _wait_for(self, path: Path, work: str) -> bool:
        """Whether `path` is there: waits while the child runs and its CPU time advances (a child whose CPU time
        stands still for `STALL_SECONDS` is given up on)."""
        last_cpu, last_progress = -1, time.perf_counter()
        while not path.exists() and _exit_code(self.pid) is None:
            cpu = _cpu_ticks(self.pid)
            now = time.perf_counter()
            if cpu != last_cpu:
                last_cpu, last_progress = cpu, now
            elif now - last_progress > STALL_SECONDS:
                logger.warning("neuron-mlir: the backward's %s ahead stopped progressing; doing it here", work)
                return False
            time.sleep(_POLL_SECONDS)
        return path.exists()

    def _read_programs(self) -> None:
        from neuron_mlir.frontend.cache import compile_cache
        from neuron_mlir.runtime import bundle, simulator

        cache = compile_cache()
        for path in sorted(self.directory.glob("*.bundle")):
            key = path.stem
            meta_path = path.with_suffix(".meta")
            try:
                metadata = meta_path.read_text(encoding="utf-8") if meta_path.exists() else None
                program = bundle.read_validated_bundle(path)
            except (OSError, UnicodeDecodeError, bundle.BundleError) as error:
                logger.warning("neuron-mlir: ignoring a program compiled ahead: %s", error)
                continue
            cache.adopt(key, program, metadata)  # on disk already, if the cache has a directory: the child's put
            cache.compiled_ahead.add(key)
            if not program.program.scalars:  # the child analyses those alone
                self.awaited.add(key)
                simulator.expect_analysis(program, functools.partial(self._analysis, key))

    def _analysis(self, key: str) -> Profile | None:
        """The child's analysis of the program `key` (`simulator.analyse_validated`), once it is made; None when
        the child made none (a race, which the run then finds itself, or a failure)."""
        from neuron_mlir.runtime import profile

        path = self.directory / f"{key}.analysis"
        try:
            if self._wait_for(path, "analysis"):
                return profile.decode_profile(path.read_bytes())
        except (OSError, ValueError) as error:
            logger.warning("neuron-mlir: ignoring a first run's analysis made ahead: %s", error)
        finally:
            self.awaited.discard(key)
            if not self.awaited:
                self.abandon()
        return None

    def abandon(self) -> None:
        _abandon(self.pid, self.directory)


def _abandon(pid: int, directory: Path) -> None:
    """Kill the child if it still runs, reap it and remove its directory."""
    if pid in _CHILDREN and _exit_code(pid) is None:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    _CHILDREN.pop(pid, None)
    shutil.rmtree(directory, ignore_errors=True)


def _exit_code(pid: int) -> int | None:
    """The child's exit code, reaping it if it has just exited; None while it runs."""
    if _CHILDREN.get(pid) is None:
        try:
            reaped, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else: its result cannot be trusted
            reaped, status = pid, 1 << 8
        if reaped:
            _CHILDREN[pid] = os.waitstatus_to_exitcode(status)
    return _CHILDREN.get(pid)


def _cpu_ticks(pid: int) -> int:
    """The process's user and system CPU time in clock ticks (-1 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return -1
    return int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15 of proc(5)


def _child_main(backward: torch.fx.GraphModule, options: CompileOptions, directory: Path, parent: int) -> None:
    """The forked child: compile `backward`, write the programs it added to the cache into `directory`, exit."""
    code = 1
    try:
        _die_with_parent(parent)
        devnull = os.open(os.devnull, os.O_RDWR)
        for descriptor in (0, 1, 2):
            os.dup2(devnull, descriptor)
        logging.disable(logging.CRITICAL)
        torch.set_num_threads(1)  # the parent's intra-op threads are not in the child
        import dataclasses
        import warnings

        from neuron_mlir.frontend.cache import compile_cache
        from neuron_mlir.frontend.compile_graph import compile_graph
        from neuron_mlir.runtime import bundle, profile, simulator

        warnings.simplefilter("ignore")
        cache = compile_cache()
        before = set(cache.memory)
        compile_graph(backward, [], dataclasses.replace(options, progress=False), "backward")
        compiled = [(key, program, metadata) for key, (program, metadata) in cache.memory.items() if key not in before]
        for key, program, metadata in compiled:
            if metadata is not None:  # a program keyed by its imported IR has none
                (directory / f"{key}.meta").write_text(metadata, encoding="utf-8")
            _write_whole(directory / f"{key}.bundle", bundle.encode_bundle(program))
        (directory / _COMPILED).touch()
        code = 0
        for key, program, _ in compiled:
            if not program.program.scalars:  # a program with scalar arguments is analysed per their values
                found = simulator.analyse_validated(program)
                if found is not None:
                    _write_whole(directory / f"{key}.analysis", profile.encode_profile(found))
    except BaseException:  # the parent compiles again and reports any error itself
        code = 1
    finally:
        os._exit(code)


def _write_whole(path: Path, data: bytes) -> None:
    """Write `path` so that a reader sees it whole or not at all."""
    written = path.with_suffix(".tmp")
    written.write_bytes(data)
    written.rename(path)


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent exits (Linux's PR_SET_PDEATHSIG)."""
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the parent exited before the call
        os._exit(1)
