"""The simulated NeuronCore: bundle format, instruction semantics, cost model, profile and trace.

This package stands alone on NumPy and ml_dtypes: a bundle plus this package is a complete executor.

Contracts shared with the compiler: `hardware` (targets, limits, cost constants), `dtypes`, `isa` (one record per
opcode: engines, roles, attributes, rules, semantics), `program` (the in-memory program). The executor: `validate`
(every check before a run), `machine` (memories), `alu` and `semantics` (what instructions compute, for one
instance or many lanes at once), `cost_model` (how long they take), `simulator` (`run_program`), `vectorize` (loops
of independent iterations as whole NumPy operations), `races` (the race checker), `profile` (numbers, summary,
Chrome trace), `bundle` (the on-disk format), `builder` (hand-written programs), `blas` (BLAS threads:
one during runs, all for a tape's large products), `heap` (the garbage collector around compiles).
"""
