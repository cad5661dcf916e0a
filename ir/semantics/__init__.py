"""Reference semantics: run IR of any level on NumPy inputs, so a pass can be checked by execution."""
