"""`neuron-opt`: xDSL's opt driver with the torch, tile and neuron dialects and our passes.

    neuron-opt in.mlir -p 'convert-torch-to-tile,convert-tile-to-neuron'
    neuron-opt in.mlir -p neuron-pipeline --check-semantics

Everything `xdsl-opt` offers stays (`-p` pipelines with options, `--split-input-file`, `--verify-diagnostics`,
`--print-between-passes`, `--print-op-generic`, `--print-debuginfo`, ...). `--check-semantics` runs the input and
the output through the reference semantics of their levels on the same random inputs and reports (to stderr)
whether every output matches within its dtype's tolerance; a mismatch is a diagnostic. This module must not
import torch: tile- and neuron-level work never needs it (torch-level semantics import it on demand).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from neuron_mlir import __version__
from neuron_mlir.ir.dialects import ALL_DIALECTS
from neuron_mlir.lowering import ALL_PASSES


class SemanticsMismatch(DiagnosticException):
    """The IR after the passes computes something else than the IR before them."""


class NeuronOptMain(xDSLOptMain):
    version_format = f"neuron-opt {__version__} (xdsl {{xdsl_version}})"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in ALL_DIALECTS.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
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

    def run(self) -> None:
        """xDSL's driver, but a malformed input or a failing pass is a diagnostic and exit code 1, not a traceback."""
        try:
            super().run()
        except ParseError as error:
            print(error, file=sys.stderr)
            sys.exit(1)
        except DiagnosticException as error:
            print(error, file=sys.stderr)
            for note in getattr(error, "__notes__", []):
                print(note, file=sys.stderr)
            sys.exit(1)

    def apply_passes(self, prog: ModuleOp) -> None:
        if not self.args.check_semantics:
            super().apply_passes(prog)
            return
        from neuron_mlir.ir.semantics import check_semantics, random_inputs

        before = prog.clone()
        super().apply_passes(prog)
        inputs = random_inputs(before, seed=self.args.check_semantics_seed)
        problems = check_semantics(before, prog, inputs)
        if problems:
            raise SemanticsMismatch("check-semantics: outputs differ:\n  " + "\n  ".join(problems))
        print(f"check-semantics: {len(inputs)} inputs, all outputs match", file=sys.stderr)


def main(args: Sequence[str] | None = None) -> None:
    NeuronOptMain(description="neuron-mlir modular optimizer driver", args=args).run()


if __name__ == "__main__":
    main()
