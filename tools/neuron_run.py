"""`neuron-run`: execute a bundle on the simulated NeuronCore and print its outputs and profile.

    neuron-run model.neuronb --input x=x.npy --input w=w.npy --trace trace.json

Inputs come from `.npy` files (`--input name=path`, loaded without pickle) or, for any input not given, from a
seeded random generator (normal floats, small integers, random booleans). The target is the bundle's own. Every
output's shape, dtype, min, max and mean are printed, then the profile summary; `--save-outputs DIR` writes
them as `.npy` files and `--trace` writes a Chrome/Perfetto trace. A neuron-level `.mlir` file runs too (the program
it denotes, see `backend_trn/translate.py`); IR not yet through `neuron-allocate-memory` runs in memories grown to
fit, and IR not yet through `neuron-insert-sync` runs without the race checker.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neuron_mlir.runtime import bundle, dtypes
from neuron_mlir.runtime.program import Program
from neuron_mlir.runtime.races import SimulationError
from neuron_mlir.runtime.simulator import run_program


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuron-run", description="Run a neuron-mlir bundle on the simulated NeuronCore."
    )
    parser.add_argument("program", help="a bundle file written by the neuron-mlir backend, or neuron-level .mlir")
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="an entry argument from a .npy file (repeatable); missing inputs are random",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    parser.add_argument("--trace", metavar="PATH", help="write a Chrome/Perfetto trace JSON here")
    parser.add_argument("--save-outputs", metavar="DIR", help="write each output as DIR/<name>.npy")
    parser.add_argument("--no-race-check", action="store_true", help="skip the data-race checker")
    return parser


def _random_input(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 10, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def _load_inputs(program: Program, given: list[str], seed: int) -> list[np.ndarray]:
    paths: dict[str, str] = {}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--input expects NAME=PATH, got {item!r}")
        paths[name] = path
    names = [binding.name for binding in program.inputs]
    unknown = sorted(set(paths) - set(names))
    if unknown:
        raise ValueError(f"unknown input {unknown[0]!r} (inputs: {', '.join(names) or 'none'})")
    rng = np.random.default_rng(seed)
    inputs = []
    for binding in program.inputs:
        dtype = dtypes.numpy_dtype(program.buffers[binding.buffer].dtype)
        if binding.name in paths:
            array = np.load(paths[binding.name], allow_pickle=False)
            if array.shape != binding.shape:
                raise ValueError(
                    f"input {binding.name!r}: {paths[binding.name]} has shape {list(array.shape)}, the program "
                    f"expects {list(binding.shape)}"
                )
            if array.dtype != dtype:
                array = array.astype(dtype)
            inputs.append(array)
        else:
            inputs.append(_random_input(binding.shape, dtype, rng))
    return inputs


def _describe(name: str, array: np.ndarray) -> str:
    text = f"{name}: shape {list(array.shape)} dtype {dtypes.dtype_name(array.dtype)}"
    if array.size == 0:
        return text + " (empty)"
    values = array.astype(np.float64)
    return f"{text} min {np.nanmin(values):.6g} max {np.nanmax(values):.6g} mean {np.nanmean(values):.6g}" + (
        f" ({int(np.isnan(values).sum())} NaN)" if np.isnan(values).any() else ""
    )


def _program_from_mlir(path: Path) -> tuple[Program, dict[str, int] | None, bool]:
    """The program of a neuron-level .mlir file, the memory sizes it needs, and whether it is synchronised."""
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import DiagnosticException, ParseError

    from neuron_mlir.backend_trn.translate import build_program, is_synchronised, memory_sizes_needed
    from neuron_mlir.ir.context import make_context
    from neuron_mlir.ir.semantics import level_of

    try:
        module = Parser(make_context(), path.read_text(), str(path)).parse_module()
        module.verify()
    except (ParseError, DiagnosticException) as error:
        raise ValueError(str(error)) from error
    level = level_of(module)
    if level != "neuron":
        raise ValueError(
            f"{path} holds {level}-level IR; lower it first: neuron-opt {path} -p neuron-pipeline -o lowered.mlir"
        )
    program = build_program(module)
    return program, memory_sizes_needed(program), is_synchronised(program)


def main(args: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(args)
    path = Path(options.program)
    check_races = not options.no_race_check
    memory_sizes = None
    try:
        if path.suffix == ".mlir":
            program, memory_sizes, synchronised = _program_from_mlir(path)
            check_races = check_races and synchronised
        else:
            program = bundle.read_bundle(path)
        inputs = _load_inputs(program, options.input, options.seed)
        outputs, profile = run_program(program, inputs, check_races=check_races, memory_sizes_override=memory_sizes)
    except (bundle.BundleError, ValueError, OSError, SimulationError) as error:
        print(f"neuron-run: {error}", file=sys.stderr)
        return 1
    for binding, array in zip(program.outputs, outputs, strict=True):
        print(_describe(binding.name, array))
    if options.save_outputs:
        directory = Path(options.save_outputs)
        directory.mkdir(parents=True, exist_ok=True)
        for binding, array in zip(program.outputs, outputs, strict=True):
            np.save(directory / f"{binding.name}.npy", array, allow_pickle=False)
    print()
    print(profile.summary())
    if options.trace:
        profile.write_chrome_trace(options.trace)
        print(f"\ntrace written to {options.trace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
