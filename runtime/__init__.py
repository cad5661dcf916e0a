"""The simulated NeuronCore: bundle format, instruction semantics, cost model, profile and trace.

This package stands alone on NumPy and ml_dtypes: a bundle plus this package is a complete executor.
"""
