"""`neuron-run`: execute a bundle or neuron-level `.mlir` on the simulated NeuronCore."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(args: Sequence[str] | None = None) -> int:
    print("neuron-run: not available yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
