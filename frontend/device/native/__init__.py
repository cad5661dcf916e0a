"""The device's native hooks: the parts of PyTorch's PrivateUse1 runtime interface Python cannot provide.

torch asks a PrivateUse1 device's runtime (`at::PrivateUse1HooksInterface`) for things the Python binding
`torch._C._acc.PrivateUse1Hooks` does not forward: resizing a storage in place (`untyped_storage().resize_(n)`,
which FSDP2 uses to free and re-materialise unsharded parameters), new and default generators on the device
(`torch.Generator(device="neuron")`), the pinned host memory the accelerator owns (`pin_memory()`,
`is_pinned()`), and an allocator for storages torch makes itself (`torch.UntypedStorage(n, device="neuron")`);
a device guard answering in C++ what torch's Python-backed one answers by a call into the interpreter on every
guarded op and autograd node; and kernels for the view ops that reach the device (`view`, `as_strided`: every
`transpose`, `expand`, slice and `t` ends in one), which run the CPU kernel over the device tensor without the
Python fallback's call.
The library also holds the device memory's address space (`address_space`: the first-fit ranges and counters of
`runtime/device_memory.py`, whose blocks are taken and given back without running Python code), and the kernels of
`empty`, `empty_strided` and `fill_.Scalar` (`register_device_kernels`), which make a contiguous tensor and replay a
constant fill without the Python fallback's call: `torch.ones_like`, the gradient `loss.backward()` starts from.
`neuron_hooks.cpp` implements them; the storages over the blocks stay in Python (`storage.py`), which the resize
hook and the allocator call back.

The library is compiled with the system's C++ compiler against the installed torch and NumPy's C API (one file,
~10 s), once per torch version, Python version, NumPy version and source, and kept in `$NEURON_MLIR_NATIVE_DIR` (default
`~/.cache/neuron-mlir/native`): `make venv` builds it, and a process that finds it missing builds it on first use
(under a file lock, so ranks started together build it once). Without a compiler (or with
`NEURON_MLIR_NATIVE=0`) the device registers torch's Python hooks instead; a failed build makes registration warn
once, naming `unavailable_reason()` and what raises NotImplementedError without the hooks.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

SOURCE = Path(__file__).with_name("neuron_hooks.cpp")

_library: ctypes.PyDLL | None = None
_reason: str | None = None  # why the library is not loaded, once a load was attempted


def library_directory() -> Path:
    setting = os.environ.get("NEURON_MLIR_NATIVE_DIR")
    if setting:
        return Path(setting)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "neuron-mlir" / "native"


def _compiler() -> str | None:
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def _command(compiler: str, output: Path) -> list[str]:
    import numpy
    from torch.utils import cpp_extension

    includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"], numpy.get_include()]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [
        compiler,
        "-O2",
        "-std=c++20",
        "-shared",
        "-fPIC",
        "-w",  # torch's headers warn in plenty; the file's own code is kept clean by review
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *(f"-I{path}" for path in includes),
        str(SOURCE),
        *(f"-L{path}" for path in cpp_extension.library_paths()),
        *(f"-Wl,-rpath,{path}" for path in cpp_extension.library_paths()),
        "-lc10",
        "-ltorch_cpu",
        "-ltorch_python",
        "-o",
        str(output),
    ]


def library_path() -> Path:
    """Where the library built from this source for this torch and Python lives."""
    key = hashlib.sha256()
    key.update(SOURCE.read_bytes())
    # NumPy's C API is compiled in: a library built against one NumPy may not load with another
    key.update(f"{torch.__version__}|{sys.version}|{platform.machine()}|numpy {_numpy_version()}".encode())
    return library_directory() / f"neuron_hooks-{key.hexdigest()[:16]}.so"


def _numpy_version() -> str:
    import numpy  # torch has imported it

    return str(numpy.__version__)


def build(*, verbose: bool = False) -> Path:
    """Compile the library if it is not built yet; returns its path. Raises RuntimeError when it cannot."""
    target = library_path()
    if target.exists():
        return target
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then use its result
        if target.exists():
            return target
        with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
            partial = Path(scratch) / target.name
            command = _command(compiler, partial)
            if verbose:
                print(" ".join(command), file=sys.stderr)
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise RuntimeError(f"building {SOURCE.name} failed:\n{result.stderr[-4000:]}")
            os.replace(partial, target)  # atomic: readers see no half-written library
    return target


# The library's functions that return one of its Python callables (`neuron_<name>_function`).
_FUNCTION_GETTERS = (
    "fresh_tensor",
    "fresh_tensors",
    "cached_array",
    "cached_arrays",
    "tensor_facts",
    "sources_of",
    "signature",
    "user_line",
    "record_fresh",
    "overlap_alone",
)


def load() -> ctypes.PyDLL | None:
    """The loaded library (built first if needed), or None with `unavailable_reason()` saying why."""
    global _library, _reason
    if _library is not None or _reason is not None:
        return _library
    if os.environ.get("NEURON_MLIR_NATIVE", "1") == "0":
        _reason = "NEURON_MLIR_NATIVE=0"
        return None
    try:
        library = ctypes.PyDLL(str(build()))
    except (RuntimeError, OSError) as error:
        _reason = str(error)
        return None
    library.neuron_register_hooks.argtypes = [ctypes.py_object, ctypes.py_object]
    library.neuron_register_hooks.restype = ctypes.c_bool
    library.neuron_register_metadata_kernels.argtypes = [ctypes.py_object]
    library.neuron_register_metadata_kernels.restype = ctypes.c_bool
    library.neuron_tensor_over.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.py_object]
    library.neuron_tensor_over.restype = ctypes.py_object
    library.neuron_register_device_guard.argtypes = []
    library.neuron_register_attention_choice.argtypes = [ctypes.py_object]
    library.neuron_register_attention_choice.restype = ctypes.c_bool
    library.neuron_register_device_guard.restype = ctypes.c_bool
    library.neuron_default_generator.argtypes = []
    library.neuron_default_generator.restype = ctypes.py_object
    library.neuron_address_space.argtypes = [ctypes.c_longlong, ctypes.c_longlong]
    library.neuron_address_space.restype = ctypes.py_object
    for name in _FUNCTION_GETTERS:  # each returns a Python callable the library defines
        getter = getattr(library, f"neuron_{name}_function")
        getter.argtypes = []
        getter.restype = ctypes.py_object
    library.neuron_register_device_kernels.argtypes = [ctypes.py_object] * 5
    library.neuron_register_device_kernels.restype = ctypes.c_bool
    library.neuron_forget_fills.argtypes = []
    library.neuron_forget_fills.restype = None
    _library = library
    return library


def loaded() -> bool:
    return _library is not None


def unavailable_reason() -> str | None:
    return _reason


def register_hooks(
    resize_bytes: Callable[[torch.UntypedStorage, int], int], allocate: Callable[[int], tuple[int, object]]
) -> bool:
    """Register the native hooks as the device's runtime, and `allocate` (bytes -> (address, owner)) as its C++
    allocator; False when the library is unavailable or another PrivateUse1 runtime was registered first (then
    the caller registers the Python hooks)."""
    library = load()
    if library is None:
        return False
    if not library.neuron_register_hooks(resize_bytes, allocate):
        _set_reason("another PrivateUse1 runtime was registered before the neuron device's")
        return False
    return True


def register_device_guard() -> bool:
    """Register the native device guard (no Python call per guarded op); False when the library is unavailable
    or PrivateUse1 has a guard already (then the caller registers torch's Python guard)."""
    library = _library
    return library is not None and bool(library.neuron_register_device_guard())


def register_attention_choice() -> bool:
    """Make `scaled_dot_product_attention` on device tensors pick the implementation it picks on CPU tensors for
    the same arguments (`_scaled_dot_product_flash_attention_for_cpu` where the CPU takes it: one eager op, and
    under torch.compile the CPU's graph), rather than the math composite torch takes on devices it has no choice
    for; False when the library is unavailable. A DTensor keeps the math composite, as it would need a sharding rule
    for the CPU's fused op, which torch does not give (so on CPU tensors too such a call fails)."""
    library = _library
    return library is not None and bool(library.neuron_register_attention_choice(takes_cpus_attention))


def takes_cpus_attention(query: torch.Tensor) -> bool:
    """Whether an attention call whose query is a tensor subclass takes the CPU's choice of implementation: the
    subclasses torch.compile traces with (fake and functional tensors) do, so that the device's graphs are the
    CPU's; a DTensor does not."""
    distributed = sys.modules.get("torch.distributed.tensor")
    return distributed is None or not isinstance(query, distributed.DTensor)


def register_metadata_kernels(names: list[str]) -> bool:
    """Register a C++ kernel for each aten op in `names` ("view", "as_strided", "unfold.default" style: name and
    overload) that runs the op's CPU kernel over the device tensor, as `dispatch.neuron_fallback` does for view ops
    from Python; False when the library is unavailable. Raises RuntimeError when torch refuses one."""
    library = _library
    if library is None:
        return False
    if not library.neuron_register_metadata_kernels(list(names)):
        raise RuntimeError("registering the device's view kernels failed")  # the Python error is chained
    return True


def tensor_over() -> Callable[[torch.UntypedStorage, tuple[int, ...], torch.dtype], torch.Tensor] | None:
    """The native constructor of a contiguous device tensor over the start of a device storage, `(storage, shape,
    dtype) -> tensor`, or None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_tensor_over)


def address_space(capacity: int, alignment: int) -> Any | None:
    """A native address space for `runtime.device_memory.DeviceMemory` (`capacity` bytes handed out in multiples
    of `alignment`, first fit), or None without the library: its blocks are taken and given back without running
    Python code (a block's range returns as the block is deallocated)."""
    library = load()
    return None if library is None else library.neuron_address_space(capacity, alignment)


def fresh_tensor() -> Callable[..., tuple[torch.Tensor, Any] | None] | None:
    """The native maker of a fresh device result, `(space, shape, dtype, element, attribute[, arrays_attribute])
    -> (tensor, array)`: a block of native address space `space` for a contiguous tensor of `shape` and torch
    `dtype`, a storage over its bytes with the block as its attribute `attribute`, the tensor, and a NumPy array of
    dtype `element` over the bytes, which the storage keeps as `storage.dense_array` keeps the arrays it makes (a
    dict by offset, shape and dtype as attribute `arrays_attribute`) when that is given; None when the space cannot
    hold the block. None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_fresh_tensor_function())


def fresh_tensors() -> Callable[..., list[tuple[torch.Tensor, Any]] | None] | None:
    """The native maker of several fresh device results in one call, `(space, layouts, attribute, arrays_attribute)
    -> [(tensor, array), ...]`: `fresh_tensor()`'s result for each `(shape, dtype, element)` of `layouts`, in order;
    None, with every block it made given back, when the space cannot hold one of them. None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_fresh_tensors_function())


def tensor_facts() -> Callable[[torch.Tensor, str], tuple[Any, torch.UntypedStorage, int, bool, bool] | None] | None:
    """The native reader of what a deferred region asks of a device tensor, `(tensor, attribute) -> (block,
    storage, storage_offset, contiguous, plain)`: its untyped storage, that storage's attribute `attribute` (None
    when it has none), its storage offset in elements, whether it is contiguous, and whether it is neither a
    conjugate nor a negative view; None for a tensor without a storage. One builtin call where the tensor's
    methods are one call each. None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_tensor_facts_function())


def cached_array() -> Callable[[torch.Tensor, str], Any] | None:
    """The native reader of the NumPy array `storage.dense_array` keeps for a contiguous device tensor, `(tensor,
    arrays_attribute) -> array`: the array its storage's dict `arrays_attribute` holds by the tensor's storage
    offset, shape and dtype, or None (not contiguous, a conjugate or negative view, or no array kept). One builtin
    call where the tensor's methods are one call each. None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_cached_array_function())


def register_device_kernels(
    fill_python: Callable[[torch.Tensor, Any], tuple[Callable[[], bool], Any] | None],
    empty_python: Callable[..., torch.Tensor],
    attribute: str,
    arrays_attribute: str,
    storage_globals: dict[str, Any],
) -> bool:
    """Register C++ kernels of `fill_.Scalar`, `empty.memory_format` and `empty_strided` for the device; False when
    the library is unavailable. A contiguous `empty` is made in C++ from the device memory's native address space
    (`address_space`; the memory is `storage_globals["_memory"]`, which the Python kernel makes first), with its
    block as the storage's attribute `attribute` and, for dtypes NumPy has itself, a NumPy array over its bytes
    kept in a dict by (0, shape, dtype) as its attribute `arrays_attribute` (as `storage.dense_array` keeps the
    arrays it makes); other layouts call
    `empty_python(size, stride | None, dtype, memory_format | None)`. Every fill not replayed runs
    `fill_python(tensor, value)` (the Python path), which answers `(replay, memo)` when its program is a constant
    one with a kept output of the tensor's bytes: later fills of a contiguous tensor of that dtype, sizes and value
    are written from `memo` in C++ once `replay()` has accounted the run (False from it: the Python path instead).
    Raises RuntimeError when torch refuses one."""
    library = _library
    if library is None:
        return False
    if not library.neuron_register_device_kernels(
        fill_python, empty_python, attribute, arrays_attribute, storage_globals
    ):
        raise RuntimeError("registering the device's fill and empty kernels failed")  # the Python error is chained
    return True


def forget_fills() -> None:
    """Forget the fills the native kernel replays (their programs were forgotten)."""
    if _library is not None:
        _library.neuron_forget_fills()


def cached_arrays() -> Callable[[list[Any], str], list[Any]] | None:
    """`cached_array()` of each value of a list in one call, `(values, arrays_attribute) -> [array | None, ...]`
    (None for a value that is not a tensor): a compiled graph's inputs. None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_cached_arrays_function())


def sources_of() -> Callable[..., list[Any] | None] | None:
    """The native reader of a recorded op's operands' sources in a deferred region, `(operands, region,
    input_sources, block_attribute, arrays_attribute, held, slow) -> [source | slow, ...] | None`: per operand,
    `region._source_of`'s answer where it needs no Python (a contiguous device tensor over exactly a pending value
    or a reshape of it, or read from device memory whose array `storage.dense_array` keeps: a region input, added
    as `_source_of` adds it while no earlier operand was left to it), `slow` where `_source_of` is to answer; None
    when an operand's bytes are pending as another dtype (the region runs first). None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_sources_of_function())


def signature() -> Callable[..., Any] | None:
    """The native maker of an eager op's program key, `(facts, args, kwargs, flat, symbolic, python) -> key |
    python`: the key `eager._signature` makes (equal to it, sizes as plain tuples), or `python` for the calls that
    function is to answer itself (other layouts, symbolic values, a CPU tensor beside a device tensor, tensor
    subclasses). None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_signature_function())


def user_line() -> Callable[..., str] | None:
    """The native walk for the user's source line of an eager op, `(issuer, engine_code, skipped, suffix) -> str`:
    `sources.user_line` in one call (the frame `issuer.frame` marks or the caller's, out through the files under the
    prefixes `skipped`, stopping at `engine_code`, else the autograd node's name and `suffix`). None without the
    library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_user_line_function())


def record_fresh() -> Callable[..., tuple[int, int]] | None:
    """The native loop of `region.record` over a recorded op's fresh results, `(outputs, first, pending, stored,
    target_blocks, values, targets, value, written_type, value_sources, block_attribute) -> (value, next)`: each
    result's pending value registered as the Python loop registers it, up to the first it leaves to that loop (a
    storage without a block of its own). None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_record_fresh_function())


def overlap_alone() -> Callable[..., list[bool] | None] | None:
    """`eager._check_overlap` where it has nothing to check, `(flat, tensor_positions, written_positions) ->
    [True, ...] | None`: every written tensor contiguous and the only operand over its storage; None for any other
    call, which the Python function checks. None without the library."""
    library = _library
    return None if library is None else cast(Any, library.neuron_overlap_alone_function())


def _set_reason(reason: str) -> None:
    global _library, _reason
    _library, _reason = None, reason


def default_generator() -> torch.Generator | None:
    """The device's default generator (`torch.Generator` on `neuron`), None without the native hooks."""
    if _library is None:
        return None
    return cast(torch.Generator, _library.neuron_default_generator())
