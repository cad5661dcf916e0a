"""Regenerate the compiled programs test_vectorize.py runs: `python test/runtime/data/regenerate.py`.

Each case is compiled with torch.compile(backend="neuron-mlir") and its program saved as a bundle, so the runtime
tests run real compiler output without importing torch. Shapes are chosen so that the compiler emits loops.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

import neuron_mlir
from neuron_mlir.frontend import compile_graph
from neuron_mlir.runtime.bundle import write_bundle

HERE = Path(__file__).resolve().parent
CASES: dict[str, tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]] = {
    "softmax_512x512": (lambda x: torch.softmax(x, -1), (torch.randn(512, 512),)),
    "matmul_384x128x1024": (lambda a, b: a @ b, (torch.randn(384, 128), torch.randn(128, 1024))),
    "rowsum_scale_1024x512": (lambda x: x * x.sum(-1, keepdim=True).sigmoid(), (torch.randn(1024, 512),)),
}


def main() -> None:
    captured = []
    original = compile_graph.CompiledGraph.__call__

    def capture(self, args):
        captured.append(self.program)
        return original(self, args)

    compile_graph.CompiledGraph.__call__ = capture  # type: ignore[method-assign]  # records each program run
    try:
        for name, (fn, inputs) in CASES.items():
            torch._dynamo.reset()
            neuron_mlir.reset()
            captured.clear()
            torch.compile(fn, backend="neuron-mlir", options={"check_races": False})(*inputs)
            (program,) = captured
            write_bundle(program, HERE / f"{name}.neuronb")
    finally:
        compile_graph.CompiledGraph.__call__ = original  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
