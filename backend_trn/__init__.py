"""From neuron IR to what the runtime executes: the program a neuron-level function denotes, and bundle files.

`translate.py` builds the runtime program, `emit_bundle.py` writes it as a bundle, and `semantics.py` gives the
neuron level its reference semantics (translate, then simulate). Importing this package registers those
semantics with `ir.semantics`, which cannot import the backend itself (docs/architecture.md#layering).
"""

from neuron_mlir.backend_trn import semantics as _semantics  # noqa: F401  (registers the neuron level's runner)
