"""Element types a NeuronCore program may use, by the names the bundle and the neuron dialect spell them.

Low-precision floats come from ml_dtypes, so bf16 and fp8 values round exactly as the hardware's converters do
(round to nearest even). Engines compute in fp32 internally, casting on input and output for free
[nki-arch-trn1]; these types describe storage.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i16": np.dtype(np.int16),
    "i8": np.dtype(np.int8),
    "u32": np.dtype(np.uint32),
    "u16": np.dtype(np.uint16),
    "u8": np.dtype(np.uint8),
    "i1": np.dtype(np.bool_),
}

FLOAT_DTYPES = frozenset({"f32", "bf16", "f16", "f8e4m3", "f8e5m2"})
INTEGER_DTYPES = frozenset({"i64", "i32", "i16", "i8", "u32", "u16", "u8", "i1"})

# New buffers hold these so reads of uninitialised memory show (as the NKI simulator does: NaN for floats).
UNINITIALISED_FLOAT = np.nan


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of element type `name`; a clear error for unknown names."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown element type '{name}' (known: {', '.join(DTYPES)})") from None


def itemsize(name: str) -> int:
    return numpy_dtype(name).itemsize


def dtype_name(dtype: np.dtype) -> str:
    """The inverse of `numpy_dtype`."""
    for name, candidate in DTYPES.items():
        if candidate == dtype:
            return name
    raise ValueError(f"NumPy dtype {dtype} has no NeuronCore element type")


def matmul_family(name: str) -> str:
    """The TensorE rate class of an input dtype: 'fp32' (quarter rate), 'bf16' (16-bit) or 'fp8'."""
    if name == "f32":
        return "fp32"
    if name in ("f8e4m3", "f8e5m2"):
        return "fp8"
    return "bf16"
