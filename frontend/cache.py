"""The compile cache: a graph compiled once is not compiled again, in this process or the next.

The key is a SHA-256 of everything that decides the program: the graph (with source locations, which the
profile reports), the compile options that affect code, the target, and the compiler itself: a fingerprint of
the installed package's source, so that an edited compiler never reuses programs its previous version produced.
The graph is spelled, preferably, by `fx_importer.graph_key_text` (a canonical text of the FX graph, which
determines the imported IR: a hit then needs no import at all), with PyTorch's version (the importer reads op
schemas); a graph that text cannot spell is keyed by its imported torch-dialect IR, printed with locations.

Programs are kept in memory and, as bundles, on disk (`$NEURON_MLIR_CACHE_DIR`, default `~/.cache/neuron-mlir`;
`NEURON_MLIR_CACHE_DIR=off` keeps the cache in memory only). An entry may carry metadata, a text (the frontend's
graph signature, JSON) kept beside the bundle as `<key>.meta`; the metadata is written before the bundle, so a
bundle on disk has its metadata, and an entry asked for with metadata and found without is a miss. A bundle read
back is validated like any other; a corrupt or stale file is ignored, removed and recompiled, never trusted
(the metadata's reader checks it likewise, `discard` drops an entry it refuses).

Entries are `ValidatedProgram`s: validated once, when compiled or read back, and run from then on without
validating again (and sharing the simulator's preparation between the graphs that use one entry).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

from neuron_mlir.runtime import bundle
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.validate import ValidatedProgram, validate_program

logger = logging.getLogger("neuron_mlir")


def default_directory() -> Path | None:
    setting = os.environ.get("NEURON_MLIR_CACHE_DIR")
    if setting is not None and setting.strip().lower() in ("", "0", "off", "none"):
        return None
    if setting:
        return Path(setting)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "neuron-mlir"


_FINGERPRINT: str | None = None


def compiler_fingerprint() -> str:
    """SHA-256 of every Python source file of the installed compiler (computed once per process).

    Reading and hashing the sources costs about as much as the rest of a warm start of a small model, so the
    digest is remembered in the cache directory (`fingerprint-<stat digest>`) under a digest of every source
    file's path, size and modification time: the two facts by which Python itself decides that a module's
    bytecode is stale, so a compiler edited in any way Python would notice gets its digest computed again. A
    memo that is not a digest is ignored (and at worst a wrong one makes every key miss; it never makes one hit).
    """
    global _FINGERPRINT
    if _FINGERPRINT is None:
        files = _source_files()
        directory = default_directory()
        memo = None
        if directory is not None:
            stats = hashlib.sha256()
            for path, name in files:
                status = os.stat(path)
                stats.update(f"{name}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
            memo = directory / f"fingerprint-{stats.hexdigest()}"
            try:
                remembered = memo.read_text(encoding="ascii").strip()
            except (OSError, UnicodeDecodeError):
                remembered = ""
            if len(remembered) == 64 and all(c in "0123456789abcdef" for c in remembered):
                _FINGERPRINT = remembered
                return remembered
        digest = hashlib.sha256()
        for path, name in files:
            with open(path, "rb") as handle:
                digest.update(name.encode() + b"\0" + handle.read())
        _FINGERPRINT = digest.hexdigest()
        if memo is not None:
            try:
                memo.parent.mkdir(parents=True, exist_ok=True)
                _write_atomically(memo, _FINGERPRINT.encode("ascii"))
            except OSError:
                pass  # the memo only saves time
    return _FINGERPRINT


def _source_files() -> list[tuple[str, str]]:
    """Every Python source of the compiler, once, in a fixed order: (path, name relative to the folder holding
    its package root).

    Walked with `os.walk` and plain strings: `Path.rglob` and `Path` arithmetic cost ten times more, and this
    runs on every start, warm or cold. A package folder nested in another root (an installed layout, where the
    subpackages live inside `neuron_mlir/`) is listed once, under the first root that reaches it.
    """
    seen: set[str] = set()
    files = []
    for root in _compiler_roots():
        root_text = os.fspath(root)
        base = len(os.path.dirname(root_text)) + 1
        for folder, folders, names in os.walk(root_text):
            folders[:] = sorted(name for name in folders if name != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    if path not in seen:
                        seen.add(path)
                        files.append((path, path[base:]))
    return files


def _compiler_roots() -> list[Path]:
    """The folders of the compiler's packages, found without importing them."""
    import importlib.util

    roots = []
    packages = ("ir", "frontend", "lowering", "backend_trn", "runtime")
    for name in ("neuron_mlir", *(f"neuron_mlir.{package}" for package in packages)):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            roots.append(Path(spec.origin).parent)
    return sorted(set(roots))


def cache_key(ir_text: str, *parts: str) -> str:
    digest = hashlib.sha256(ir_text.encode())
    digest.update(b"\0" + compiler_fingerprint().encode())
    for part in parts:
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()


class CompileCache:
    def __init__(self, directory: Path | None):
        self.directory = directory
        self.memory: dict[str, tuple[ValidatedProgram, str | None]] = {}
        self.compiled_ahead: set[str] = set()
        """Keys of entries a child process compiled ahead for this one (`frontend.compile_ahead`) and no graph
        has taken yet: the first graph to find one counts a compile, not a cache hit."""

    def _path(self, key: str, suffix: str = ".bundle") -> Path | None:
        return self.directory / f"{key}{suffix}" if self.directory is not None else None

    def get(self, key: str) -> ValidatedProgram | None:
        entry = self.get_entry(key)
        return entry[0] if entry is not None else None

    def get_entry(self, key: str, with_metadata: bool = False) -> tuple[ValidatedProgram, str | None] | None:
        """The program under `key` and its metadata; None when absent (or, `with_metadata`, kept without any)."""
        entry = self.memory.get(key)
        if entry is None or (with_metadata and entry[1] is None):
            entry = self._read(key, with_metadata)
        if entry is None or (with_metadata and entry[1] is None):
            return None
        return entry

    def _read(self, key: str, with_metadata: bool) -> tuple[ValidatedProgram, str | None] | None:
        path, meta_path = self._path(key), self._path(key, ".meta")
        if path is None or meta_path is None:
            return None
        metadata = None
        if with_metadata:
            try:
                metadata = meta_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return None  # no metadata, no entry (the program alone would be of no use)
        if not path.is_file():
            return None
        try:
            program = bundle.read_validated_bundle(path)
        except (bundle.BundleError, OSError) as error:
            logger.warning("neuron-mlir: ignoring unreadable cache entry %s: %s", path, error)
            self.discard(key)
            return None
        entry = self.memory[key] = (program, metadata)
        return entry

    def adopt(self, key: str, program: ValidatedProgram, metadata: str | None) -> None:
        """Keep in memory an entry another process compiled (and wrote to disk, if the cache has a directory)."""
        self.memory[key] = (program, metadata)

    def discard(self, key: str) -> None:
        """Forget the entry under `key`, in memory and on disk (one found corrupt)."""
        self.memory.pop(key, None)
        for suffix in (".bundle", ".meta"):
            path = self._path(key, suffix)
            if path is not None:
                path.unlink(missing_ok=True)

    def put(self, key: str, program: Program | ValidatedProgram, metadata: str | None = None) -> ValidatedProgram:
        """Keep `program` (validated now unless it already was) and `metadata`; return the entry's program."""
        if not isinstance(program, ValidatedProgram):
            program = validate_program(program)
        self.memory[key] = (program, metadata)
        path, meta_path = self._path(key), self._path(key, ".meta")
        if path is None or meta_path is None:
            return program
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if metadata is not None:  # first: a bundle on disk always has its metadata
                _write_atomically(meta_path, metadata.encode("utf-8"))
            _write_atomically(path, bundle.encode_bundle(program))
        except OSError as error:
            logger.warning("neuron-mlir: could not write the compile cache at %s: %s", path, error)
        return program


def _write_atomically(path: Path, data: bytes) -> None:
    """Write then rename, so that a concurrent reader never sees half a file."""
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as handle:
        handle.write(data)
    os.replace(handle.name, path)


_CACHES: dict[Path | None, CompileCache] = {}


def compile_cache() -> CompileCache:
    """The process-wide cache for the current cache directory setting."""
    directory = default_directory()
    if directory not in _CACHES:
        _CACHES[directory] = CompileCache(directory)
    return _CACHES[directory]


def clear_memory() -> None:
    """Forget in-memory entries (the disk stays): the next lookup behaves as in a new process."""
    for cache in _CACHES.values():
        cache.memory.clear()
        cache.compiled_ahead.clear()
