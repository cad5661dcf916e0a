"""The neuron level's reference semantics: translate to the runtime program, then run it on the simulated core.

A neuron-level function means the program it denotes (`translate.build_program`), so this is the one definition
`neuron-opt --check-semantics` and a bundle share. The runner is registered with `ir.semantics` when
`neuron_mlir.backend_trn` is imported: `ir/` may not import the backend, so the backend plugs its level in.

IR that has not been through `neuron-allocate-memory` still runs, in simulated memories grown to fit its fresh
addresses; races are checked once the IR is synchronised (`translate.is_synchronised`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from neuron_mlir.backend_trn.translate import ProgramBuildError, build_program, is_synchronised, memory_sizes_needed
from neuron_mlir.ir.semantics import register_level_semantics
from neuron_mlir.runtime.collectives import CollectiveError
from neuron_mlir.runtime.races import SimulationError
from neuron_mlir.runtime.simulator import run_program
from neuron_mlir.runtime.validate import BundleError


def run_neuron_function(module: ModuleOp, inputs: Sequence[np.ndarray], entry: str = "main") -> list[np.ndarray]:
    """Execute a neuron-level function on the simulator, its arguments and results in signature order."""
    program = build_program(module, entry)
    try:
        outputs, _ = run_program(
            program,
            list(inputs),
            check_races=is_synchronised(program),
            memory_sizes_override=memory_sizes_needed(program),
        )
    except (BundleError, SimulationError, CollectiveError) as error:
        # the program the IR denotes breaks a rule of the core (a race, an instruction id used twice, ...), or its
        # collectives need ranks a lone run does not have
        raise ProgramBuildError(f"the program it denotes cannot run: {error}") from error
    return outputs


register_level_semantics("neuron", run_neuron_function)
