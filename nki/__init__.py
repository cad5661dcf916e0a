"""NKI kernels on the simulated NeuronCore: `import neuron_mlir.nki as nki`.

A kernel written for the Neuron Kernel Interface runs with only its imports changed:

    import neuron_mlir.nki as nki
    import neuron_mlir.nki.language as nl
    import neuron_mlir.nki.isa as nisa

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    result = nki.simulate(add)(x, y)                   # NumPy in, NumPy out
    bench = nki.benchmark(add, target="trn1")(x, y)    # + simulated latency and the profile

A kernel is traced once per argument signature (shapes, dtypes, the Python values passed, the launch grid and
the target) into a neuron-dialect module (`nki.trace` returns it: `neuron-opt` prints and checks it), whose
instructions are verified by the hardware's rules as they are traced (loops become `scf.for` where the kernel
lets them, see `tracing.py`). The module then goes through the compiler's own back end (`BACKEND_PASSES`), the
bundle's program and its validator, and runs on the simulator, which times it with the target's cost model.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from neuron_mlir.nki import isa, language
from neuron_mlir.nki.source_digest import source_digest
from neuron_mlir.nki.tracing import (
    LoopKey,
    NeedsUnrolling,
    NkiError,
    NkiTensor,
    NkiWarning,
    Trace,
    dtype_of,
    tracing,
)
from neuron_mlir.runtime.profile import Profile
from neuron_mlir.runtime.validate import ValidatedProgram

__all__ = [
    "BenchmarkResult",
    "BenchmarkedKernel",
    "Kernel",
    "KernelCall",
    "NkiError",
    "NkiTensor",
    "NkiWarning",
    "benchmark",
    "ir_text",
    "isa",
    "jit",
    "language",
    "simulate",
    "simulate_kernel",
    "trace",
]

# The passes that take a traced module to a runnable program: the kernel's own instructions and engines stay
# as written (no fusion or rebalancing); loops that move data, where no loop inside them does, get copies with
# buffers of their own so that a trip's loads overlap the previous trip's compute (as NKI's compiler pipelines
# affine loops), and the back end queues, places and synchronises the instructions.
BACKEND_PASSES = (
    "neuron-unroll-loops",
    "neuron-assign-dma-queues",
    "neuron-allocate-memory",
    "neuron-insert-sync",
)


def default_target() -> str:
    """NKI's target override variable, else the project's default target."""
    from neuron_mlir.runtime.hardware import DEFAULT_TARGET

    return os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", DEFAULT_TARGET)


@dataclass
class _Compiled:
    module: ModuleOp
    program: ValidatedProgram
    outputs: int
    returned: str  # "one" tensor, a "tuple" of them, or "none"
    modified: list[int]  # the inputs (positions among the array arguments) the kernel writes into


class Kernel:
    """An `@nki.jit` kernel: call it with NumPy arrays (and Python values); `kernel[n]` launches n programs."""

    def __init__(
        self,
        function: Callable[..., Any],
        grid: tuple[int, ...] = (1,),
        target: str | None = None,
        unroll: bool = False,
        seed: int = 0,
    ):
        self.function = function
        self.grid = grid
        self.target = target
        self.unroll = unroll  # trace every loop unrolled, not only those that need it
        self.seed = seed  # the key of random draws (nisa.dropout)
        self._cache: dict[Any, _Compiled] = {}
        self.traces = 0  # how many signatures were traced
        self.__name__ = getattr(function, "__name__", "kernel")
        self.__doc__ = function.__doc__

    def __getitem__(self, grid: Any) -> Kernel:
        dims = tuple(int(g) for g in (grid if isinstance(grid, tuple) else (grid,)))
        if not dims or any(g <= 0 for g in dims):
            raise NkiError(f"kernel {self.__name__}: launch grid {grid!r} must be positive integers")
        launched = Kernel(self.function, dims, self.target, self.unroll, self.seed)
        launched._cache = self._cache
        return launched

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.simulate(*args, **kwargs)[0]

    # ---- tracing ---------------------------------------------------------------------------------------------

    def _key(self, target: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        def part(value: Any) -> Any:
            if isinstance(value, np.ndarray):
                return ("array", value.shape, value.dtype.str)
            if isinstance(value, list | tuple):
                return (type(value).__name__, tuple(part(v) for v in value))
            return ("value", type(value).__name__, value)

        return (target, self.grid, tuple(part(a) for a in args), tuple(sorted((k, part(v)) for k, v in kwargs.items())))

    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> _Compiled:
        """The traced and lowered program of this argument signature (cached)."""
        chosen = target or self.target or default_target()
        key = self._key(chosen, args, kwargs)
        if key not in self._cache:
            self._cache[key] = self._compile(chosen, args, kwargs)
        return self._cache[key]

    def trace(self, *args: Any, target: str | None = None, **kwargs: Any) -> ModuleOp:
        """The neuron-dialect module traced for these arguments, before placement and synchronisation (it returns
        the kernel's results, then the inputs the kernel writes into)."""
        from neuron_mlir.runtime.hardware import get_target

        chosen = target or self.target or default_target()
        return self._trace(get_target(chosen), args, kwargs)[0]

    def _trace(
        self, target: Any, args: Sequence[Any], kwargs: dict[str, Any], rotate: bool = True
    ) -> tuple[ModuleOp, int, str, list[int]]:
        """Trace with loops as `scf.for`, again with more loops unrolled for each that needs it, and (with
        `rotate`) once more with the loops that make buffers traced two trips at a time."""
        self.traces += 1
        unrolled: frozenset[LoopKey] = frozenset()
        rotated: frozenset[LoopKey] = frozenset()
        while True:
            try:
                traced, candidates = self._trace_once(target, args, kwargs, unrolled, rotated)
            except NeedsUnrolling as needs:
                if not needs.loops or needs.loops <= unrolled:
                    raise NkiError(f"kernel {self.__name__}: {needs.reason}") from None
                unrolled |= needs.loops
                continue
            if not rotate or self.unroll or candidates <= rotated:
                return traced
            rotated |= candidates

    def _trace_once(
        self,
        target: Any,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        unrolled: frozenset[LoopKey],
        rotated: frozenset[LoopKey],
    ) -> tuple[tuple[ModuleOp, int, str, list[int]], frozenset[LoopKey]]:
        parameters = list(inspect.signature(self.function).parameters)
        inputs = []
        for index, value in enumerate(args):
            if isinstance(value, np.ndarray):
                name = parameters[index] if index < len(parameters) else f"arg{index}"
                inputs.append((name, tuple(value.shape), dtype_of(value.dtype)))
        for name, value in kwargs.items():
            if isinstance(value, np.ndarray):
                inputs.append((name, tuple(value.shape), dtype_of(value.dtype)))
        active = Trace(
            self.__name__, target, self.grid, unrolled=unrolled, unroll_all=self.unroll, rotated=rotated, seed=self.seed
        )
        tensors = iter(active.start(inputs))
        call_args = [next(tensors) if isinstance(a, np.ndarray) else a for a in args]
        call_kwargs = {k: next(tensors) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        results: Any = None
        with tracing(active):
            for program in np.ndindex(*self.grid):
                active.program_ids = tuple(int(i) for i in program)
                active.shared_cursor = 0
                returned = self.function(*call_args, **call_kwargs)
                if results is None:
                    results = returned
        returned = "one" if isinstance(results, NkiTensor) else "none" if results is None else "tuple"
        outputs = [results] if returned == "one" else list(results or ())
        if not all(isinstance(o, NkiTensor) for o in outputs):
            raise NkiError(f"kernel {self.__name__} must return NKI tensors, got {results!r}")
        module, modified = active.finish(outputs)
        module.verify()
        return (module, len(outputs), returned, modified), active.rotation_candidates()

    def _compile(self, target_name: str, args: Sequence[Any], kwargs: dict[str, Any], rotate: bool = True) -> _Compiled:
        """Trace and lower; where the rotated buffers of `_trace` do not fit on chip, trace again without."""
        from xdsl.context import Context
        from xdsl.utils.exceptions import DiagnosticException

        from neuron_mlir import __version__
        from neuron_mlir.backend_trn.translate import build_program
        from neuron_mlir.lowering.pipelines import pass_class
        from neuron_mlir.lowering.verify_stage_contract import check_stage_contract
        from neuron_mlir.runtime.hardware import get_target
        from neuron_mlir.runtime.validate import validate_program

        module, outputs, returned, modified = self._trace(get_target(target_name), args, kwargs, rotate)
        traced = module.clone()
        context = Context()
        try:
            for name in BACKEND_PASSES:
                pass_class(name)().apply(context, module)
            module.verify()
            check_stage_contract(module, "synchronised")
        except DiagnosticException as failure:
            if rotate:
                return self._compile(target_name, args, kwargs, rotate=False)
            # the back end's refusals (memory that does not fit, ...) name the op and the kernel's line
            raise NkiError(f"kernel {self.__name__}: {failure}") from None
        program = build_program(module, require_allocated=True, compiler_version=__version__)
        return _Compiled(traced, validate_program(program), outputs, returned, modified)

    def write_bundle(self, path: str | os.PathLike[str], *args: Any, target: str | None = None, **kwargs: Any) -> None:
        """Write the program of this argument signature as a bundle file (`neuron-run path` runs it); the bundle's
        inputs are the kernel's array arguments in order, its outputs the results, then the inputs it writes."""
        from neuron_mlir.backend_trn.emit_bundle import write_bundle

        write_bundle(self.compile(*args, target=target, **kwargs).program, Path(path))

    # ---- running ---------------------------------------------------------------------------------------------

    def simulate(self, *args: Any, target: str | None = None, **kwargs: Any) -> tuple[Any, Profile]:
        """(the kernel's results as NumPy arrays, the run's profile) on the simulated core."""
        from neuron_mlir.runtime.simulator import run_validated

        compiled = self.compile(*args, target=target, **kwargs)
        given = [a for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray)]
        outputs, profile = run_validated(compiled.program, [np.ascontiguousarray(a) for a in given])
        results = [np.asarray(o) for o in outputs[: compiled.outputs]]
        # inputs the kernel wrote into get their new contents, as on the device
        for position, contents in zip(compiled.modified, outputs[compiled.outputs :], strict=True):
            np.copyto(given[position], contents)
        if compiled.returned == "none":
            return None, profile
        return (results[0] if compiled.returned == "one" else tuple(results)), profile


@dataclass(frozen=True)
class KernelCall:
    """A kernel registered as a torch op (`neuron_mlir.as_torch_op`), as a compiled program calls it: the
    compiler inlines the kernel's traced instructions where the op is (convert-tile-to-neuron)."""

    name: str  # the op's qualified name, "mylib::rms_norm"
    kernel: Kernel
    parameters: tuple[str, ...]
    tensor_parameters: tuple[str, ...]
    defaults: dict[str, Any]  # the scalar parameters' defaults

    @property
    def fingerprint(self) -> str:
        """A digest of what the traced instructions depend on besides the arguments: the kernel's source and the
        user code it reaches (`source_digest`), its launch grid and its options."""
        return source_digest(self.kernel.function, f"{self.kernel.grid}\0{self.kernel.unroll}\0{self.kernel.seed}")

    def traced(
        self, inputs: Sequence[tuple[tuple[int, ...], np.dtype]], scalars: dict[str, Any], target: str
    ) -> ModuleOp:
        """The kernel's traced module (before placement) for tensors of these shapes and dtypes (the tensor
        parameters in order) and these scalars, on `target`: the same trace the kernel runs alone."""
        shapes = iter(inputs)
        args: list[Any] = []
        for name in self.parameters:
            if name in self.tensor_parameters:
                shape, dtype = next(shapes)
                args.append(np.zeros(shape, dtype))
            else:
                args.append(scalars.get(name, self.defaults.get(name)))
        compiled = self.kernel.compile(*args, target=target)
        if compiled.returned == "none" or compiled.modified:
            raise NkiError(f"kernel {self.kernel.__name__} of torch op {self.name} writes into its inputs")
        return compiled.module.clone()


_CALLS: dict[str, KernelCall] = {}


def traced_call(op: Any, values: Sequence[Any]) -> Any:
    """The traced function (a fresh copy, before placement) of the kernel that `op` calls (a torch or tile
    `nki_kernel`) with tensors typed as `values` (SSA values of tensor or memref types), on the target of the
    module holding `op`. Raises `NkiError` when the kernel does not trace, LookupError when this process has no
    such kernel."""
    from xdsl.dialects import func

    from neuron_mlir.ir.dialects.neuron import target_of
    from neuron_mlir.ir.dialects.torch import NkiKernelOp
    from neuron_mlir.ir.types import runtime_dtype_name
    from neuron_mlir.runtime.dtypes import numpy_dtype

    name = op.kernel.data
    call = registered_call(name)
    if call is None:
        raise LookupError(f"the kernel of torch op {name} is not registered in this process (neuron_mlir.as_torch_op)")
    signature = [
        (tuple(value.type.get_shape()), numpy_dtype(runtime_dtype_name(value.type.element_type))) for value in values
    ]
    module = call.traced(signature, NkiKernelOp.scalar_values_of(op.scalars), target_of(op).name)
    return next(inner for inner in module.ops if isinstance(inner, func.FuncOp))


def _register_tracer() -> None:
    from neuron_mlir.ir.kernel_calls import register_kernel_tracer

    register_kernel_tracer(traced_call)


_register_tracer()


def register_call(call: KernelCall) -> None:
    """Make a kernel callable from compiled programs by its torch op's name."""
    _CALLS[call.name] = call


def registered_call(name: str) -> KernelCall | None:
    """The kernel registered as the torch op `name` in this process, if any."""
    return _CALLS.get(name)


def jit(function: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Declare an NKI kernel: `@nki.jit`, or `@nki.jit(target="trn1", unroll=True, seed=7)` (unroll every loop;
    the key of the kernel's random draws)."""
    target, unroll, seed = options.get("target"), bool(options.get("unroll", False)), int(options.get("seed", 0))
    if function is None:
        return lambda f: Kernel(f, target=target, unroll=unroll, seed=seed)
    return Kernel(function, target=target, unroll=unroll, seed=seed)


def _kernel(kernel: Any) -> Kernel:
    return kernel if isinstance(kernel, Kernel) else Kernel(kernel)


def simulate(kernel: Any, target: str | None = None) -> Callable[..., Any]:
    """`nki.simulate(kernel)(*arrays)`: the kernel's results as NumPy arrays."""
    launched = _kernel(kernel)

    def run(*args: Any, **kwargs: Any) -> Any:
        return launched.simulate(*args, target=target, **kwargs)[0]

    return run


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """The legacy spelling of `nki.simulate(kernel)(*args)`."""
    return simulate(kernel)(*args, **kwargs)


@dataclass
class BenchmarkResult:
    """One simulated run: the results, the latency on the target's cost model and the full profile."""

    outputs: Any
    profile: Profile
    target: str

    @property
    def latency_ns(self) -> float:
        return float(self.profile.total_ns)

    @property
    def latency_us(self) -> float:
        return self.latency_ns / 1e3

    @property
    def nc_latency(self) -> Latency:
        return Latency(self.latency_us)

    def summary(self) -> str:
        return self.profile.summary()


class Latency:
    """The latency statistics of NKI's benchmark API; a simulated run takes the same time every time."""

    def __init__(self, microseconds: float) -> None:
        self.microseconds = microseconds

    def get_latency_percentile(self, percentile: float) -> float:
        """The latency in microseconds at any percentile."""
        if not 0 <= percentile <= 100:
            raise ValueError(f"percentile {percentile} is outside 0..100")
        return self.microseconds


def _run_benchmark(
    launched: Kernel, target: str | None, args: Sequence[Any], kwargs: dict[str, Any]
) -> BenchmarkResult:
    chosen = target or launched.target or default_target()
    outputs, profile = launched.simulate(*args, target=chosen, **kwargs)
    return BenchmarkResult(outputs, profile, chosen)


class BenchmarkedKernel:
    """`@nki.benchmark(warmup=..., iters=...)`: calls return the results, `benchmark_result` holds the last run."""

    def __init__(self, kernel: Kernel, target: str | None) -> None:
        self.kernel = kernel
        self.target = target
        self.benchmark_result: BenchmarkResult | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.benchmark_result = _run_benchmark(self.kernel, self.target, args, kwargs)
        return self.benchmark_result.outputs


def benchmark(kernel: Any = None, target: str | None = None, **legacy: Any) -> Any:
    """`nki.benchmark(kernel, target="trn1")(*arrays)`: results, simulated latency and profile of one run.

    The simulated core is deterministic, so one run is every run: warm-up and repeat counts mean nothing. The
    decorator form of NKI's benchmark API, `@nki.benchmark(warmup=2, iters=10)`, gives a `BenchmarkedKernel`."""
    if kernel is None:
        return lambda function: BenchmarkedKernel(_kernel(function), target)
    launched = _kernel(kernel)

    def run(*args: Any, **kwargs: Any) -> BenchmarkResult:
        return _run_benchmark(launched, target, args, kwargs)

    return run


def trace(kernel: Any, *args: Any, target: str | None = None, **kwargs: Any) -> ModuleOp:
    """The neuron-dialect module a kernel traces to for these arguments (print it, or feed it to neuron-opt)."""
    return _kernel(kernel).trace(*args, target=target, **kwargs)


def ir_text(module: ModuleOp) -> str:
    """A traced module as text with its source locations, as `neuron-opt` and `neuron-run` read it."""
    from io import StringIO

    from xdsl.printer import Printer

    stream = StringIO()
    Printer(stream=stream, print_debuginfo=True).print_op(module)
    return stream.getvalue() + "\n"
