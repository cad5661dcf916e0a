"""`neuron-opt`: xDSL's opt driver with the torch, tile and neuron dialects and our passes.

    neuron-opt in.mlir -p 'convert-torch-to-tile,convert-tile-to-neuron'

Everything `xdsl-opt` offers stays (`-p` pipelines with options, `--split-input-file`, `--verify-diagnostics`,
`--print-between-passes`, `--print-op-generic`, `--print-debuginfo`, ...). This module must not import torch:
tile- and neuron-level work never needs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from neuron_mlir import __version__
from neuron_mlir.ir.dialects import ALL_DIALECTS
from neuron_mlir.lowering import ALL_PASSES


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


def main(args: Sequence[str] | None = None) -> None:
    NeuronOptMain(description="neuron-mlir modular optimizer driver", args=args).run()


if __name__ == "__main__":
    main()
