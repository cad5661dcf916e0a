"""Each opcode, run end to end on the simulated core, against a NumPy formula."""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from neuron_mlir.runtime import alu, isa
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.hardware import TRN2, Engine
from neuron_mlir.runtime.simulator import run_program

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = {"f32": np.float32, "bf16": BF16, "f16": np.float16}
# Free shapes per partition: single element, odd, longer than one PSUM bank, multi-dimensional.
SHAPES = [(1, 1), (128, 7), (128, 513), (7, 1), (32, 3, 5), (3, 2, 3, 4)]


def rand(shape, dtype, rng, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


def expected_cast(values, dtype):
    return np.asarray(values, dtype=np.float32).astype(dtype)


def assert_close(actual, expected, dtype, rtol=None):
    tolerance = {"f32": 2e-6, "bf16": 1e-2, "f16": 2e-3}[dtype] if rtol is None else rtol
    np.testing.assert_allclose(
        actual.astype(np.float64), np.asarray(expected).astype(np.float64), rtol=tolerance, atol=tolerance
    )


# ---- activation --------------------------------------------------------------------------------------------

REFERENCE_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu_dx": lambda x: (
        0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    ),
    "silu_dx": lambda x: (1 + np.exp(-x)) ** -1 * (1 + x * (1 - (1 + np.exp(-x)) ** -1)),
    "erf": np.vectorize(math.erf),
    "softplus": lambda x: np.log1p(np.exp(x)),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "sin": np.sin,
    "arctan": np.arctan,
    "sign": np.sign,
    "abs": np.abs,
    "square": np.square,
}
# Inputs are kept where the function is defined: log/sqrt/rsqrt/reciprocal get |x| + 0.5.
POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}


@pytest.mark.parametrize("func", sorted(REFERENCE_FUNCTIONS))
def test_activation_functions_f32(kernel, func):
    rng = np.random.default_rng(1)
    x = rand((128, 67), np.float32, rng, 2.0)
    if func in POSITIVE:
        x = np.abs(x) + np.float32(0.5)
    reference = REFERENCE_FUNCTIONS[func](x.astype(np.float64))
    out = kernel("activation", "scalar", {"src": x}, {"dst": (x.shape, "f32")}, {"func": func})["dst"]
    np.testing.assert_allclose(out, reference, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", sorted(FLOAT_DTYPES))
@pytest.mark.parametrize("shape", SHAPES)
def test_activation_scale_bias_and_dtypes(kernel, dtype, shape):
    rng = np.random.default_rng(2)
    np_dtype = FLOAT_DTYPES[dtype]
    x = rand(shape, np_dtype, rng)
    bias = rand((shape[0], 1), np.float32, rng)
    out = kernel(
        "activation",
        "scalar",
        {"src": x, "bias": bias},
        {"dst": (shape, dtype)},
        {"func": "tanh", "scale": 0.75},
    )["dst"]
    x32 = x.astype(np.float32).reshape(shape[0], -1)
    expected = np.tanh(x32 * np.float32(0.75) + bias).reshape(shape)
    assert out.dtype == np_dtype
    assert_close(out, expected_cast(expected, np_dtype), dtype)


def test_activation_scale_vector_bias_value_and_accumulate(kernel):
    rng = np.random.default_rng(3)
    x = rand((64, 4, 8), np.float32, rng)
    scale = rand((64, 1), np.float32, rng)
    results = kernel(
        "activation",
        "scalar",
        {"src": x, "scale_vector": scale},
        {"dst": ((64, 4, 8), "f32"), "accumulate_dst": ((64, 1), "f32")},
        {"func": "exp", "bias_value": -1.0},
    )
    expected = np.exp(x.reshape(64, -1) * scale - 1).reshape(x.shape)
    np.testing.assert_allclose(results["dst"], expected, rtol=2e-6)
    np.testing.assert_allclose(results["accumulate_dst"][:, 0], expected.reshape(64, -1).sum(axis=1), rtol=1e-5)


def test_tensor_scalar_accumulate_sums_what_it_writes(kernel):
    # VectorE's tensor_scalar with accumulate_dst: dst = x - f, and the sum of dst's values along its free axes
    rng = np.random.default_rng(4)
    x = rand((64, 4, 8), np.float32, rng)
    shift = rand((64, 1), np.float32, rng)
    results = kernel(
        "tensor_scalar",
        "vector",
        {"src": x, "operand0": shift},
        {"dst": ((64, 4, 8), "f32"), "accumulate_dst": ((64, 1), "f32")},
        {"op0": "subtract"},
    )
    expected = (x.reshape(64, -1) - shift).reshape(x.shape)
    np.testing.assert_array_equal(results["dst"], expected)
    np.testing.assert_allclose(results["accumulate_dst"][:, 0], expected.reshape(64, -1).sum(axis=1), rtol=1e-5)


# ---- tensor_tensor -----------------------------------------------------------------------------------------

FLOAT_ALU: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "power": lambda a, b: np.power(np.abs(a), b),
    "is_equal": lambda a, b: (a == b).astype(np.float32),
    "not_equal": lambda a, b: (a != b).astype(np.float32),
    "is_ge": lambda a, b: (a >= b).astype(np.float32),
    "is_gt": lambda a, b: (a > b).astype(np.float32),
    "is_le": lambda a, b: (a <= b).astype(np.float32),
    "is_lt": lambda a, b: (a < b).astype(np.float32),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float32),
}


@pytest.mark.parametrize("op", sorted(FLOAT_ALU))
def test_tensor_tensor_ops_f32(kernel, op):
    rng = np.random.default_rng(4)
    a = rand((128, 33), np.float32, rng)
    b = rand((128, 33), np.float32, rng)
    b[:, :5] = a[:, :5]  # some equal elements for the comparisons
    a[:, 5:8] = 0
    if op == "power":
        a = np.abs(a)
    out = kernel("tensor_tensor", "vector", {"in0": a, "in1": b}, {"dst": (a.shape, "f32")}, {"op": op})["dst"]
    with np.errstate(divide="ignore"):
        expected = FLOAT_ALU[op](a, b)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


@pytest.mark.parametrize("dtype", sorted(FLOAT_DTYPES))
@pytest.mark.parametrize("shape", SHAPES)
def test_tensor_tensor_dtypes_and_shapes(kernel, dtype, shape):
    rng = np.random.default_rng(5)
    np_dtype = FLOAT_DTYPES[dtype]
    a, b = rand(shape, np_dtype, rng), rand(shape, np_dtype, rng)
    out = kernel("tensor_tensor", "vector", {"in0": a, "in1": b}, {"dst": (shape, dtype)}, {"op": "multiply"})
    # fp32 product of the stored inputs, rounded once to the destination type
    expected = (a.astype(np.float32) * b.astype(np.float32)).astype(np_dtype)
    np.testing.assert_array_equal(out["dst"].view(np.uint8), expected.view(np.uint8))


def test_tensor_tensor_one_input_in_psum(kernel):
    rng = np.random.default_rng(6)
    a, b = rand((128, 16), np.float32, rng), rand((128, 16), np.float32, rng)
    out = kernel(
        "tensor_tensor",
        "vector",
        {"in0": a, "in1": b},
        {"dst": ((128, 16), "f32")},
        {"op": "add"},
        psum=("in0",),
    )
    np.testing.assert_array_equal(out["dst"], a + b)


def test_integer_ops_exact_on_gpsimd_and_fp32_on_vector(kernel):
    a = np.array([[2**24 + 1, -7, 2**31 - 1, 5]], dtype=np.int32)
    b = np.array([[1, 2, 1, 3]], dtype=np.int32)
    exact = kernel("tensor_tensor", "gpsimd", {"in0": a, "in1": b}, {"dst": ((1, 4), "i32")}, {"op": "add"})["dst"]
    np.testing.assert_array_equal(exact, [[2**24 + 2, -5, -(2**31), 8]])  # 32-bit wrap
    rounded = kernel("tensor_tensor", "vector", {"in0": a, "in1": b}, {"dst": ((1, 4), "i32")}, {"op": "add"})["dst"]
    # VectorE widens to fp32: 2^24 + 1 is not representable, and the saturating cast caps 2^31
    assert rounded[0, 0] == 2**24 + 2 or rounded[0, 0] == 2**24
    assert rounded[0, 2] == 2**31 - 1


BITVEC_A = np.array([[0b1100, -1, 6, 1]], dtype=np.int32)
BITVEC_B = np.array([[0b1010, 0, 3, 40]], dtype=np.int32)


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("bitwise_and", [0b1000, 0, 2, 0]),
        ("bitwise_or", [0b1110, -1, 7, 41]),
        ("bitwise_xor", [0b0110, -1, 5, 41]),
        ("left_shift", [0b1100 << 10, -1, 48, 0]),  # shifts past 31 give 0
        ("right_shift", [0, -1, 0, 0]),
    ],
)
@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
def test_bitvec_ops_on_int32(kernel, op, expected, engine):
    out = kernel("tensor_tensor", engine, {"in0": BITVEC_A, "in1": BITVEC_B}, {"dst": ((1, 4), "i32")}, {"op": op})
    np.testing.assert_array_equal(out["dst"][0], expected)


def test_right_shift_is_logical():
    values = alu.binary("right_shift", np.array([-8], np.int32), np.array([1], np.int32))
    assert values[0] == (2**32 - 8) >> 1  # no sign extension


# ---- tensor_scalar -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(FLOAT_DTYPES))
def test_tensor_scalar_two_ops_with_reverse(kernel, dtype):
    rng = np.random.default_rng(7)
    np_dtype = FLOAT_DTYPES[dtype]
    x = rand((128, 513), np_dtype, rng)
    out = kernel(
        "tensor_scalar",
        "vector",
        {"src": x},
        {"dst": (x.shape, dtype)},
        {"op0": "subtract", "scalar0": 2.0, "reverse0": True, "op1": "multiply", "scalar1": 0.5},
    )["dst"]
    expected = ((np.float32(2.0) - x.astype(np.float32)) * np.float32(0.5)).astype(np_dtype)
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("engine", ["vector", "scalar", "gpsimd"])
def test_tensor_scalar_per_partition_operands(kernel, engine):
    rng = np.random.default_rng(8)
    x = rand((32, 5, 3), np.float32, rng)
    s0, s1 = rand((32, 1), np.float32, rng), rand((32, 1), np.float32, rng)
    out = kernel(
        "tensor_scalar",
        engine,
        {"src": x, "operand0": s0, "operand1": s1},
        {"dst": (x.shape, "f32")},
        {"op0": "multiply", "op1": "add"},
    )["dst"]
    expected = (x.reshape(32, -1) * s0 + s1).reshape(x.shape)
    np.testing.assert_array_equal(out, expected)


# ---- scalar_tensor_tensor ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(FLOAT_DTYPES))
@pytest.mark.parametrize(
    ("attrs", "column"),
    [
        ({"op0": "subtract", "op1": "multiply"}, True),
        ({"op0": "multiply", "scalar0": -0.75, "op1": "add", "reverse1": True}, False),
        ({"op0": "subtract", "reverse0": True, "op1": "subtract", "reverse1": True}, True),
        ({"op0": "max", "scalar0": 0.0, "op1": "is_gt"}, False),
    ],
)
def test_scalar_tensor_tensor_is_tensor_scalar_then_tensor_tensor(kernel, dtype, attrs, column):
    # the intermediate stays fp32 in the engine: the two-instruction form through an fp32 tile, bit for bit
    rng = np.random.default_rng(11)
    np_dtype = FLOAT_DTYPES[dtype]
    x, y = rand((128, 3, 171), np_dtype, rng), rand((128, 513), np_dtype, rng)
    scalar_step = {"src": x, **({"operand0": rand((128, 1), np.float32, rng)} if column else {})}
    scalar_attrs = {name: attrs[name] for name in ("op0", "scalar0", "reverse0") if name in attrs}
    operands = {**scalar_step, "in1": y}
    out = kernel("scalar_tensor_tensor", "vector", operands, {"dst": (y.shape, dtype)}, attrs)["dst"]
    intermediate = kernel("tensor_scalar", "vector", scalar_step, {"dst": (x.shape, "f32")}, scalar_attrs)["dst"]
    pair = {"in0": y, "in1": intermediate.reshape(y.shape)} if attrs.get("reverse1") else {
        "in0": intermediate.reshape(y.shape), "in1": y}  # fmt: skip
    expected = kernel("tensor_tensor", "vector", pair, {"dst": (y.shape, dtype)}, {"op": attrs["op1"]})["dst"]
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))


def test_scalar_tensor_tensor_values(kernel):
    rng = np.random.default_rng(12)
    dy, y, s = rand((64, 40), np.float32, rng), rand((64, 40), np.float32, rng), rand((64, 1), np.float32, rng)
    out = kernel(
        "scalar_tensor_tensor",
        "vector",
        {"src": dy, "in1": y, "operand0": s},
        {"dst": (dy.shape, "f32")},
        {"op0": "subtract", "op1": "multiply"},
    )["dst"]
    np.testing.assert_array_equal(out, (dy - s) * y)


def test_tensor_scalar_integer_on_gpsimd(kernel):
    x = np.arange(-5, 11, dtype=np.int32).reshape(2, 8)
    out = kernel(
        "tensor_scalar",
        "gpsimd",
        {"src": x},
        {"dst": (x.shape, "i32")},
        {"op0": "multiply", "scalar0": 3, "op1": "max", "scalar1": 0},
    )["dst"]
    np.testing.assert_array_equal(out, np.maximum(x * 3, 0))


# ---- tensor_reduce -----------------------------------------------------------------------------------------

REDUCERS = {
    "add": lambda x, axes: x.sum(axis=axes),
    "max": lambda x, axes: x.max(axis=axes),
    "min": lambda x, axes: x.min(axis=axes),
    "multiply": lambda x, axes: x.prod(axis=axes),
    "abs_max": lambda x, axes: np.abs(x).max(axis=axes),
}


@pytest.mark.parametrize("op", sorted(REDUCERS))
@pytest.mark.parametrize("axes", [1, 2])
def test_tensor_reduce(kernel, op, axes):
    rng = np.random.default_rng(9)
    x = rand((128, 6, 7), np.float32, rng, 0.9)
    kept = (128, 6) if axes == 1 else (128, 1)
    out = kernel("tensor_reduce", "vector", {"src": x}, {"dst": (kept, "f32")}, {"op": op, "axes": axes})["dst"]
    expected = REDUCERS[op](x.astype(np.float64), tuple(range(3 - axes, 3))).reshape(kept)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_tensor_reduce_negate_bf16(kernel):
    rng = np.random.default_rng(10)
    x = rand((1, 513), BF16, rng)
    out = kernel("tensor_reduce", "vector", {"src": x}, {"dst": ((1, 1), "bf16")}, {"op": "max", "negate": True})
    assert out["dst"][0, 0] == (-x.astype(np.float32).max()).astype(BF16)


# ---- tensor_copy and conversions ---------------------------------------------------------------------------


def test_bf16_rounds_to_nearest_even(kernel):
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0); 1 + 3*2^-8 goes up.
    x = np.array([[1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20, 3.4e38]], dtype=np.float32)
    out = kernel("tensor_copy", "vector", {"src": x}, {"dst": (x.shape, "bf16")})["dst"]
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.astype(np.float32), [[1.0, 1 + 2**-6, -1.0, 1 + 2**-7, np.inf]])


def test_same_dtype_copy_is_bit_exact(kernel):
    payload_nan = np.array([[0x7FC00001, 0xFFFFFFFF, 0x3F800000]], dtype=np.uint32).view(np.float32)
    for engine in ("vector", "scalar", "gpsimd"):
        out = kernel("tensor_copy", engine, {"src": payload_nan}, {"dst": ((1, 3), "f32")})["dst"]
        np.testing.assert_array_equal(out.view(np.uint32), payload_nan.view(np.uint32))


def test_float_to_int_truncates_and_saturates(kernel):
    x = np.array([[2.7, -2.7, 1e10, -1e10, np.nan, 0.5]], dtype=np.float32)
    out = kernel("tensor_copy", "vector", {"src": x}, {"dst": (x.shape, "i32")})["dst"]
    np.testing.assert_array_equal(out, [[2, -2, 2**31 - 1, -(2**31), 0, 0]])


def test_copy_pairs_elements_row_major_across_free_shapes(kernel):
    x = np.arange(2 * 12, dtype=np.float32).reshape(2, 3, 4)
    out = kernel("tensor_copy", "vector", {"src": x}, {"dst": ((2, 12), "f16")})["dst"]
    np.testing.assert_array_equal(out, x.reshape(2, 12).astype(np.float16))


# ---- select, memset, iota, affine_select -------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
def test_select(kernel, engine):
    rng = np.random.default_rng(11)
    predicate = (rng.random((128, 9)) < 0.5).astype(np.float32)
    on_true, on_false = rand((128, 9), np.float32, rng), rand((128, 9), np.float32, rng)
    out = kernel(
        "select",
        engine,
        {"predicate": predicate, "on_true": on_true, "on_false": on_false},
        {"dst": ((128, 9), "bf16")},
    )["dst"]
    np.testing.assert_array_equal(out, np.where(predicate != 0, on_true, on_false).astype(BF16))


@pytest.mark.parametrize(("dtype", "value"), [("f32", -np.inf), ("bf16", 0.1), ("i32", 7), ("f16", 65504.0)])
def test_memset(kernel, dtype, value):
    out = kernel("memset", "vector", {}, {"dst": ((128, 5, 3), dtype)}, {"value": value})["dst"]
    expected = np.full((128, 5, 3), value, dtype=np.float64).astype(np.float32).astype(out.dtype)
    np.testing.assert_array_equal(out, expected)


def test_iota(kernel):
    out = kernel(
        "iota",
        "gpsimd",
        {},
        {"dst": ((4, 2, 3), "i32")},
        {"base": 10, "channel_multiplier": 100, "pattern": ((-1, 2), (5, 3))},
    )["dst"]
    p, i, j = np.meshgrid(np.arange(4), np.arange(2), np.arange(3), indexing="ij")
    np.testing.assert_array_equal(out, 10 + 100 * p - i + 5 * j)


def test_iota_into_float(kernel):
    out = kernel("iota", "gpsimd", {}, {"dst": ((1, 513), "f32")}, {"pattern": ((1, 513),)})["dst"]
    np.testing.assert_array_equal(out[0], np.arange(513, dtype=np.float32))


def test_affine_select_causal_mask(kernel):
    rng = np.random.default_rng(12)
    scores = rand((128, 128), np.float32, rng)
    # keep column j <= row p: p - j >= 0
    out = kernel(
        "affine_select",
        "gpsimd",
        {"on_true": scores},
        {"dst": ((128, 128), "f32")},
        {"cmp": "is_ge", "channel_multiplier": 1, "pattern": ((-1, 128),), "on_false_value": -np.inf},
    )["dst"]
    np.testing.assert_array_equal(out, np.where(np.tril(np.ones((128, 128))) != 0, scores, -np.inf))


def test_affine_select_identity(kernel):
    ones = np.ones((128, 128), np.float32)
    out = kernel(
        "affine_select",
        "gpsimd",
        {"on_true": ones},
        {"dst": ((128, 128), "bf16")},
        {"cmp": "is_equal", "channel_multiplier": 1, "pattern": ((-1, 128),), "on_false_value": 0.0},
    )["dst"]
    np.testing.assert_array_equal(out.astype(np.float32), np.eye(128))


# ---- matmul ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize(("k", "m", "n"), [(128, 128, 512), (1, 1, 1), (37, 5, 7), (128, 17, 513 - 1)])
def test_matmul(kernel, dtype, k, m, n):
    rng = np.random.default_rng(13)
    np_dtype = FLOAT_DTYPES[dtype]
    stationary, moving = rand((k, m), np_dtype, rng), rand((k, n), np_dtype, rng)
    out = kernel(
        "nc_matmul",
        "tensor",
        {"stationary": stationary, "moving": moving},
        {"dst": ((m, n), "f32")},
        psum=("dst",),
    )["dst"]
    expected = stationary.astype(np.float64).T @ moving.astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * math.sqrt(k))


def test_matmul_multi_dim_free_patterns(kernel):
    rng = np.random.default_rng(14)
    stationary, moving = rand((64, 4, 8), np.float32, rng), rand((64, 2, 256), np.float32, rng)
    out = kernel(
        "nc_matmul",
        "tensor",
        {"stationary": stationary, "moving": moving},
        {"dst": ((32, 512), "f32")},
        psum=("dst",),
    )["dst"]
    expected = stationary.reshape(64, 32).T.astype(np.float64) @ moving.reshape(64, 512)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_matmul_accumulate_immediate(kernel):
    rng = np.random.default_rng(15)
    stationary, moving = rand((16, 8), np.float32, rng), rand((16, 4), np.float32, rng)
    previous = rand((8, 4), np.float32, rng)
    out = kernel(
        "nc_matmul",
        "tensor",
        {"stationary": stationary, "moving": moving},
        {"dst": ((8, 4), "f32")},
        {"accumulate": True},
        psum=("dst",),
        fill={"dst": previous},
    )["dst"]
    np.testing.assert_allclose(out, previous + stationary.T @ moving, rtol=1e-5)


def test_psum_accumulation_with_register_flag():
    """K = 4 x 128 reduced in PSUM: accumulate = (k != 0), computed by a ScalarOp inside the loop."""
    rng = np.random.default_rng(16)
    k_tiles, m, n = 4, 64, 96
    a = rand((k_tiles * 128, m), BF16, rng)
    b_matrix = rand((k_tiles * 128, n), BF16, rng)
    b = ProgramBuilder("trn2", auto_waits=True)
    a_hbm, b_hbm = b.input("a", a.shape, "bf16"), b.input("b", b_matrix.shape, "bf16")
    c_hbm = b.output("c", (m, n), "f32")
    a_tile, b_tile = b.sbuf("a_tile", (128, m), "bf16"), b.sbuf("b_tile", (128, n), "bf16")
    acc = b.psum("acc", (m, n))
    out = b.sbuf("out", (m, n), "f32")
    with b.loop(0, k_tiles) as k:
        a_offset = b.scalar(b.reg(), "mul", k, 128 * m)
        b_offset = b.scalar(b.reg(), "mul", k, 128 * n)
        b.dma(b.ap(a_tile), b.ap(a_hbm, [(m, 128), (1, m)], reg=a_offset), queue=0)
        b.dma(b.ap(b_tile), b.ap(b_hbm, [(n, 128), (1, n)], reg=b_offset), queue=1)
        flag = b.scalar(b.reg(), "ne", k, 0)
        b.inst(
            "nc_matmul",
            "tensor",
            {"dst": b.ap(acc), "stationary": b.ap(a_tile), "moving": b.ap(b_tile)},
            {"accumulate": flag},
        )
    b.inst("tensor_copy", "vector", {"dst": b.ap(out), "src": b.ap(acc)})
    b.dma(b.ap(c_hbm), b.ap(out), queue=2)
    (c,), _ = run_program(b.build(), [a, b_matrix])
    expected = a.astype(np.float64).T @ b_matrix.astype(np.float64)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_transpose_is_bit_exact_on_trn2(kernel):
    rng = np.random.default_rng(17)
    moving = rand((128, 96), BF16, rng)
    moving[3, 5] = np.nan
    moving[7, 1] = np.inf
    identity = np.eye(128, dtype=BF16)
    out = kernel(
        "nc_matmul",
        "tensor",
        {"stationary": identity, "moving": moving},
        {"dst": ((96, 128), "bf16")},
        {"is_transpose": True},
        psum=("dst",),
    )["dst"]
    np.testing.assert_array_equal(out.view(np.uint16), moving.T.view(np.uint16))


def test_transpose_on_trn1_goes_through_the_array_arithmetic(kernel):
    moving = np.arange(16, dtype=np.float32).reshape(4, 4)
    moving[1, 2] = np.nan
    out = kernel(
        "nc_matmul",
        "tensor",
        {"stationary": np.eye(4, dtype=np.float32), "moving": moving},
        {"dst": ((4, 4), "f32")},
        {"is_transpose": True},
        target="trn1",
        psum=("dst",),
    )["dst"]
    # NaN * 0 spreads along the transposed row: not bit exact on NeuronCore-v2
    assert np.isnan(out[2]).all()
    finite = ~np.isnan(moving.T)
    finite[2] = False
    np.testing.assert_array_equal(out[finite], moving.T[finite])


# ---- dma_copy ----------------------------------------------------------------------------------------------


def test_dma_converts_and_transposes_through_strided_hbm_views():
    rng = np.random.default_rng(18)
    x = rand((48, 40), np.float32, rng)
    b = ProgramBuilder("trn2", auto_waits=True)
    x_hbm = b.input("x", x.shape, "f32")
    y_hbm = b.output("y", (40, 48), "bf16")
    tile = b.sbuf("t", (40, 48), "bf16")
    # read x transposed: partition = column, free = rows (element steps 1 then 40)
    b.dma(b.ap(tile), b.ap(x_hbm, [(1, 40), (40, 48)]))
    b.dma(b.ap(y_hbm), b.ap(tile), queue=3)
    (y,), _ = run_program(b.build(), [x])
    np.testing.assert_array_equal(y, x.T.astype(BF16))


def test_dma_transpose_from_hbm_and_between_sbuf_tiles_is_bit_exact():
    rng = np.random.default_rng(19)
    x = rand((96, 40), np.float32, rng).astype(BF16)
    x[3, 5], x[7, 1] = np.nan, -np.inf
    b = ProgramBuilder("trn2", auto_waits=True)
    x_hbm = b.input("x", x.shape, "bf16")
    y_hbm = b.output("y", (40, 96), "bf16")
    z_hbm = b.output("z", (96, 40), "bf16")
    tile = b.sbuf("t", (40, 96), "bf16")
    back = b.sbuf("u", (96, 40), "bf16")
    # HBM rows [96, 40] -> [40 partitions, 96]; then SBUF [40, 96] -> [96 partitions, 40] (the original again)
    b.inst("dma_transpose", "dma", {"dst": b.ap(tile), "src": b.ap(x_hbm)}, queue=1)
    b.inst("dma_transpose", "dma", {"dst": b.ap(back), "src": b.ap(tile)}, queue=2)
    b.dma(b.ap(y_hbm), b.ap(tile), queue=3)
    b.dma(b.ap(z_hbm), b.ap(back), queue=4)
    (y, z), _ = run_program(b.build(), [x])
    np.testing.assert_array_equal(y.view(np.uint16), x.T.view(np.uint16))
    np.testing.assert_array_equal(z.view(np.uint16), x.view(np.uint16))


def test_offset_and_partition_start_accesses():
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    b = ProgramBuilder("trn2", auto_waits=True)
    x_hbm = b.input("x", x.shape, "f32")
    y_hbm = b.output("y", (32, 10), "f32")
    tile = b.sbuf("t", (128, 64), "f32")
    half = b.sbuf("h", (128, 10), "f32")
    b.dma(b.ap(tile), b.ap(x_hbm))
    # partitions 64..95, elements 7, 12, ..., 52 of each row, doubled
    b.inst(
        "tensor_scalar",
        "vector",
        {
            "dst": b.ap(half, partitions=32, partition_start=64),
            "src": b.ap(tile, [(5, 10)], offset=7, partitions=32, partition_start=64),
        },
        {"op0": "multiply", "scalar0": 2.0},
    )
    b.dma(b.ap(y_hbm), b.ap(half, partitions=32, partition_start=64))
    (y,), _ = run_program(b.build(), [x])
    np.testing.assert_array_equal(y, 2 * x[64:96, 7:57:5])


def test_dynamic_offset_registers_in_loops():
    """A row of 8 tiles processed by a loop whose offset register walks the free axis (and backwards)."""
    x = np.arange(4 * 8 * 16, dtype=np.float32).reshape(4, 128)
    b = ProgramBuilder("trn2", auto_waits=True)
    x_hbm, y_hbm = b.input("x", x.shape, "f32"), b.output("y", x.shape, "f32")
    tile, result = b.sbuf("t", (4, 128), "f32"), b.sbuf("r", (4, 128), "f32")
    b.dma(b.ap(tile), b.ap(x_hbm))
    with b.loop(0, 8) as i:
        offset = b.scalar(b.reg(), "mul", i, 16)
        mirrored = b.scalar(b.reg(), "sub", 112, offset)
        b.inst(
            "activation",
            "scalar",
            {"dst": b.ap(result, [(1, 16)], reg=mirrored), "src": b.ap(tile, [(1, 16)], reg=offset)},
            {"func": "square"},
        )
    b.dma(b.ap(y_hbm), b.ap(result))
    (y,), _ = run_program(b.build(), [x])
    expected = (x.reshape(4, 8, 16)[:, ::-1, :] ** 2).reshape(4, 128)
    np.testing.assert_array_equal(y, expected)


def test_uninitialised_memory_reads_as_nan():
    b = ProgramBuilder("trn2", auto_waits=True)
    y = b.output("y", (2, 3), "f32")
    tile = b.sbuf("t", (2, 3), "f32")
    b.dma(b.ap(y), b.ap(tile))
    (out,), _ = run_program(b.build(), [])
    assert np.isnan(out).all()


def test_execute_on_plain_arrays():
    """The semantics functions serve the IR's reference interpreter on ordinary arrays too."""
    dst = np.zeros((2, 3), np.float32)
    src = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    isa.execute("activation", Engine.SCALAR, {"dst": dst, "src": src}, {"func": "relu"}, TRN2)
    np.testing.assert_array_equal(dst, np.maximum(src, 0))


def test_erf_accuracy():
    x = np.linspace(-6, 6, 10001, dtype=np.float32)
    reference = np.vectorize(math.erf)(x.astype(np.float64))
    np.testing.assert_allclose(alu.erf(x), reference, rtol=3e-7, atol=1e-9)


# ---- gpsimd_kernel -----------------------------------------------------------------------------------------


def _torch_like_floor_divide(a, b):
    """Python's float floor division, which is what PyTorch's div(rounding_mode='floor') computes."""
    return np.array(
        [x // y if y != 0 else (x / y if x != 0 else math.nan) for x, y in zip(a.ravel(), b.ravel(), strict=True)]
    )


@pytest.mark.parametrize("name", ["divide", "divide_trunc", "divide_floor", "fmod", "remainder"])
def test_gpsimd_division_kernels_f32(kernel, name):
    rng = np.random.default_rng(11)
    a = rand((64, 37), np.float32, rng, 20.0)
    b = rand((64, 37), np.float32, rng, 3.0)
    b[0, :5] = [0.0, -0.0, 1.0, -1.0, 0.5]
    a[0, 2:5] = [6.0, -6.0, 7.25]
    out = kernel("gpsimd_kernel", "gpsimd", {"in0": a, "in1": b}, {"dst": (a.shape, "f32")}, {"kernel": name})["dst"]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        fmod = np.fmod(a64, b64)  # exact in any precision
        expected = {
            "divide": a / b,  # fp32 IEEE division: correctly rounded
            "divide_trunc": np.trunc(a / b),
            "divide_floor": _torch_like_floor_divide(a64, b64).reshape(a.shape),
            "fmod": fmod,
            # Python's %: fmod moved by one divisor when the signs differ (exact for these magnitudes)
            "remainder": np.where((fmod != 0) & ((b64 < 0) != (fmod < 0)), fmod + b64, fmod),
        }[name]
    np.testing.assert_array_equal(out, expected.astype(np.float32))


@pytest.mark.parametrize("name", ["divide_trunc", "divide_floor", "fmod", "remainder"])
def test_gpsimd_division_kernels_exact_on_int32(kernel, name):
    a = np.array([[7, -7, 7, -7, 2**31 - 1, -(2**31), 5, 0]], np.int32)
    b = np.array([[2, 2, -2, -2, 3, 7, 0, 3]], np.int32)
    out = kernel("gpsimd_kernel", "gpsimd", {"in0": a, "in1": b}, {"dst": (a.shape, "i32")}, {"kernel": name})["dst"]
    a64, b64 = a.astype(np.int64), np.where(b == 0, 1, b).astype(np.int64)
    expected = {
        "divide_trunc": np.sign(a64) * np.sign(b64) * (np.abs(a64) // np.abs(b64)),
        "divide_floor": a64 // b64,
        "fmod": np.fmod(a64, b64),
        "remainder": a64 % b64,
    }[name]
    expected[b == 0] = 0  # integer division by zero gives 0 (PyTorch raises)
    np.testing.assert_array_equal(out, expected.astype(np.int32))


@pytest.mark.parametrize("name", ["divide_trunc", "divide_floor", "fmod", "remainder"])
def test_gpsimd_division_kernels_exact_on_int64_extremes(kernel, name):
    low, high = -(2**63), 2**63 - 1
    a = np.array([[low, low, high, high, low + 1, -7, 2**62 + 1]], np.int64)
    b = np.array([[2**40 + 7, -3, 2**40 + 7, -3, 2, 2, -(2**33)]], np.int64)
    out = kernel("gpsimd_kernel", "gpsimd", {"in0": a, "in1": b}, {"dst": (a.shape, "i64")}, {"kernel": name})["dst"]
    expected = {  # Python's integers: exact at any size
        "divide_trunc": lambda x, y: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1),
        "divide_floor": lambda x, y: x // y,
        "fmod": lambda x, y: abs(x) % abs(y) * (1 if x >= 0 else -1),
        "remainder": lambda x, y: x % y,
    }[name]
    assert out.tolist() == [[expected(int(x), int(y)) for x, y in zip(a[0], b[0], strict=True)]]


def test_gpsimd_kernel_column_operand(kernel):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = np.array([[2], [3], [5]], np.int32)
    out = kernel("gpsimd_kernel", "gpsimd", {"in0": a, "in1": b}, {"dst": (a.shape, "i32")}, {"kernel": "remainder"})[
        "dst"
    ]
    np.testing.assert_array_equal(out, a % b)


def test_philox_known_answer():
    """Philox-4x32-10 of counter (0, 0, 0, 0) under key (0, 0): the Random123 known-answer vector."""
    words = alu.philox(np.array([0]), np.array([0]))
    assert [int(w[0]) for w in words] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


def test_random_kernels_are_counter_based_and_well_distributed(kernel):
    counters = np.arange(128 * 512, dtype=np.int32).reshape(128, 512)
    key = np.full((128, 1), 1234, np.int32)
    uniform = kernel(
        "gpsimd_kernel",
        "gpsimd",
        {"in0": counters, "in1": key},
        {"dst": (counters.shape, "f32")},
        {"kernel": "uniform"},
    )["dst"]
    assert uniform.min() >= 0
    assert uniform.max() < 1
    assert abs(uniform.mean() - 0.5) < 0.01
    assert abs(uniform.var() - 1 / 12) < 0.005
    # the value of an element depends only on its counter: a permuted evaluation gives the same numbers
    shuffled = kernel(
        "gpsimd_kernel",
        "gpsimd",
        {"in0": counters[::-1].copy(), "in1": key},
        {"dst": (counters.shape, "f32")},
        {"kernel": "uniform"},
    )["dst"]
    np.testing.assert_array_equal(shuffled, uniform[::-1])
    normal = kernel(
        "gpsimd_kernel", "gpsimd", {"in0": counters, "in1": key}, {"dst": (counters.shape, "f32")}, {"kernel": "normal"}
    )["dst"]
    assert np.isfinite(normal).all()
    assert abs(normal.mean()) < 0.02
    assert abs(normal.std() - 1) < 0.02
    other_key = kernel(
        "gpsimd_kernel",
        "gpsimd",
        {"in0": counters, "in1": key + 1},
        {"dst": (counters.shape, "f32")},
        {"kernel": "uniform"},
    )["dst"]
    assert np.mean(other_key == uniform) < 0.001


# ---- 64-bit integers on GpSimdE ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "formula"),
    [
        ("add", lambda a, b: a + b),
        ("multiply", lambda a, b: a * b),
        ("subtract", lambda a, b: a - b),
        ("is_lt", lambda a, b: (a < b).astype(np.int64)),
        ("max", np.maximum),
        ("bitwise_xor", np.bitwise_xor),
    ],
)
def test_int64_arithmetic_is_exact_in_64_bits(kernel, op, formula):
    a = np.array([[2**40 + 3, -(2**35), 2**31, 7, -(2**62)]], dtype=np.int64)
    b = np.array([[5, 2**20, 2**31, -3, -2]], dtype=np.int64)
    out = kernel("tensor_tensor", "gpsimd", {"in0": a, "in1": b}, {"dst": (a.shape, "i64")}, {"op": op})["dst"]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, formula(a, b))  # int64 wrapping, as PyTorch's int64


def test_int64_immediates_copies_fills_and_division(kernel):
    a = np.array([[2**40 + 7, -(2**40) - 7, 2**33]], dtype=np.int64)
    shifted = kernel(
        "tensor_scalar", "gpsimd", {"src": a}, {"dst": (a.shape, "i64")}, {"op0": "add", "scalar0": float(2**45)}
    )["dst"]
    np.testing.assert_array_equal(shifted, a + 2**45)
    copied = kernel("tensor_copy", "gpsimd", {"src": a}, {"dst": (a.shape, "i64")})["dst"]
    np.testing.assert_array_equal(copied, a)
    filled = kernel("memset", "gpsimd", {}, {"dst": ((2, 3), "i64")}, {"value": float(2**50 + 1)})["dst"]
    np.testing.assert_array_equal(filled, np.full((2, 3), 2**50 + 1))
    divisor = np.array([[3, 3, -5]], dtype=np.int64)
    quotient = kernel(
        "gpsimd_kernel", "gpsimd", {"in0": a, "in1": divisor}, {"dst": (a.shape, "i64")}, {"kernel": "divide_floor"}
    )["dst"]
    np.testing.assert_array_equal(quotient, a // divisor)


# ---- lanes: many instances in one call, bit for bit as one by one ------------------------------------------


def _lane_cases():
    """(opcode, engine, operands: role -> (shape, dtype[, (low, high) of integer values]), attrs), covering
    every opcode's paths: in-place fast paths and general ones, conversions, integers, data-dependent forms."""
    f32, bf16, i32, i64 = "f32", "bf16", "i32", "i64"
    matmul = {"stationary": ((32, 24), f32), "moving": ((32, 40), f32), "dst": ((24, 40), f32)}
    square = {"stationary": ((24, 24), f32), "moving": ((24, 40), f32), "dst": ((40, 24), f32)}
    yield "nc_matmul", "tensor", matmul, {}
    yield "nc_matmul", "tensor", matmul, {"accumulate": True}
    yield "nc_matmul", "tensor", {**matmul, "moving": ((32, 40), bf16)}, {"accumulate": True}
    yield "nc_matmul", "tensor", {**matmul, "dst": ((24, 40), bf16)}, {}
    yield "nc_matmul", "tensor", square, {"is_transpose": True}
    yield "nc_matmul", "tensor", "identity", {"is_transpose": True}
    tile = {"src": ((16, 24), f32), "dst": ((16, 24), f32)}
    for func in ("exp", "gelu", "relu", "copy", "rsqrt"):
        yield "activation", "scalar", tile, {"func": func, "scale": 0.5}
    yield "activation", "scalar", tile, {"func": "sin", "bias_value": 0.25}
    yield "activation", "scalar", {**tile, "bias": ((16, 1), f32), "accumulate_dst": ((16, 1), f32)}, {"func": "exp"}
    yield "activation", "scalar", {**tile, "dst": ((16, 24), bf16), "scale_vector": ((16, 1), f32)}, {"func": "tanh"}
    pair = {"in0": ((16, 24), f32), "in1": ((16, 24), f32), "dst": ((16, 24), f32)}
    for op in ("add", "max", "is_gt", "power", "bitwise_xor"):
        yield "tensor_tensor", "vector", pair, {"op": op}
    yield "tensor_tensor", "vector", {**pair, "in1": ((16, 24), bf16), "dst": ((16, 24), bf16)}, {"op": "subtract"}
    for dtype in (i32, i64):
        ints = {"in0": ((16, 24), dtype), "in1": ((16, 24), dtype), "dst": ((16, 24), dtype)}
        yield "tensor_tensor", "gpsimd", ints, {"op": "multiply"}
    yield "tensor_scalar", "vector", tile, {"op0": "multiply", "scalar0": 3.0, "op1": "subtract", "scalar1": 1.0}
    yield "tensor_scalar", "vector", {**tile, "operand0": ((16, 1), f32)}, {"op0": "min", "reverse0": True}
    yield "tensor_scalar", "vector", {**tile, "operand0": ((16, 1), f32), "accumulate_dst": ((16, 1), f32)}, {
        "op0": "subtract"}  # fmt: skip
    yield (
        "tensor_scalar",
        "vector",
        {**tile, "operand1": ((16, 1), f32)},
        {"op0": "is_ge", "scalar0": 0.5, "op1": "add", "reverse1": True},
    )
    yield (
        "tensor_scalar",
        "gpsimd",
        {"src": ((16, 24), i32), "dst": ((16, 24), i32)},
        {"op0": "left_shift", "scalar0": 3.0},
    )
    triple = {"src": ((16, 24), f32), "in1": ((16, 4, 6), f32), "dst": ((16, 24), f32)}
    yield (
        "scalar_tensor_tensor",
        "vector",
        {**triple, "operand0": ((16, 1), f32)},
        {"op0": "subtract", "op1": "multiply"},
    )
    yield (
        "scalar_tensor_tensor",
        "vector",
        {**triple, "in1": ((16, 24), bf16), "dst": ((16, 24), bf16)},
        {"op0": "multiply", "scalar0": -0.5, "reverse0": True, "op1": "add", "reverse1": True},
    )
    yield "tensor_reduce", "vector", {"src": ((16, 4, 6), f32), "dst": ((16, 4), f32)}, {"op": "add"}
    yield "tensor_reduce", "vector", {"src": ((16, 4, 6), bf16), "dst": ((16, 1), f32)}, {"op": "max", "axes": 2}
    yield (
        "tensor_reduce",
        "vector",
        {"src": ((16, 4, 6), f32), "dst": ((16, 4), bf16)},
        {"op": "abs_max", "negate": True},
    )
    yield "tensor_copy", "vector", {"src": ((16, 24), f32), "dst": ((16, 24), bf16)}, {}
    yield "tensor_copy", "vector", {"src": ((16, 24), f32), "dst": ((16, 4, 6), f32)}, {}
    yield "tensor_copy", "gpsimd", {"src": ((16, 24), i64), "dst": ((16, 24), i32)}, {}
    yield "select", "vector", {"predicate": ((16, 24), f32), "on_true": ((16, 24), f32), "on_false": ((16, 24), bf16),
                               "dst": ((16, 24), f32)}, {}  # fmt: skip
    yield "memset", "vector", {"dst": ((16, 24), i64)}, {"value": 7.0}
    yield "memset", "vector", {"dst": ((16, 24), bf16)}, {"value": -0.1}
    yield "iota", "gpsimd", {"dst": ((16, 24), i32)}, {"pattern": ((1, 24),), "channel_multiplier": 24, "base": 5}
    yield "iota", "gpsimd", {"dst": ((16, 4, 6), f32)}, {"pattern": ((6, 4), (-1, 6)), "base": -3}
    yield (
        "affine_select",
        "gpsimd",
        {"on_true": ((16, 24), f32), "dst": ((16, 24), f32)},
        {"cmp": "is_ge", "pattern": ((-1, 24),), "channel_multiplier": 1, "on_false_value": -1.0},
    )
    for kernel in ("divide", "remainder", "uniform"):
        yield (
            "gpsimd_kernel",
            "gpsimd",
            {"in0": ((16, 24), f32), "in1": ((16, 1), f32), "dst": ((16, 24), f32)},
            {"kernel": kernel},
        )
    yield (
        "gpsimd_kernel",
        "gpsimd",
        {"in0": ((16, 24), i32), "in1": ((16, 24), i32), "dst": ((16, 24), i32)},
        {"kernel": "divide_floor"},
    )
    yield "dma_copy", "dma", {"src": ((16, 24), f32), "dst": ((16, 24), bf16)}, {}
    yield "dma_copy", "dma", {"src": ((384,), f32), "dst": ((16, 24), f32)}, {}
    yield "dma_transpose", "dma", {"src": ((16, 24), bf16), "dst": ((24, 16), bf16)}, {}
    yield "dma_transpose", "dma", {"src": ((16, 3, 8), bf16), "dst": ((24, 16), bf16)}, {}
    offsets = ((4, 3), i32, (0, 10))
    yield "dma_copy", "dma", {"src": ((10, 6), f32), "dst": ((4, 18), bf16), "offsets": offsets}, {"indirect": "src"}
    yield "dma_copy", "dma", {"src": ((4, 18), f32), "dst": ((10, 6), f32), "offsets": offsets}, {"indirect": "dst"}
    yield (
        "dma_copy",
        "dma",
        {"src": ((4, 18), f32), "dst": ((10, 6), f32), "offsets": offsets},
        {"indirect": "dst", "accumulate": True},
    )
    # groups of one rank: no transport, each lane exchanges with itself
    alone = ((0,),)
    yield "all_reduce", "collective", {"src": ((6, 4), f32), "dst": ((24,), f32)}, {"replica_groups": alone}
    yield "all_gather", "collective", {"src": ((6, 4), bf16), "dst": ((6, 4), bf16)}, {"replica_groups": alone}
    yield (
        "reduce_scatter",
        "collective",
        {"src": ((5,), f32), "dst": ((5,), f32)},
        {"replica_groups": alone, "reduce": "max"},
    )
    yield "all_to_all", "collective", {"src": ((3, 2), f32), "dst": ((6,), f32)}, {"replica_groups": alone}
    yield "broadcast", "collective", {"src": ((3, 2), f32), "dst": ((6,), f32)}, {"replica_groups": alone, "root": 0}


def _lane_arrays(operands, lanes: tuple[int, ...], rng) -> dict[str, np.ndarray]:
    from neuron_mlir.runtime import dtypes

    arrays = {}
    for role, (shape, dtype, *value_range) in operands.items():
        numpy_dtype = dtypes.numpy_dtype(dtype)
        if dtype.startswith("i"):
            low, high = value_range[0] if value_range else ((-(2**40), 2**40) if dtype == "i64" else (-1000, 1000))
            values = rng.integers(low, high, (*lanes, *shape))
        else:
            values = rng.standard_normal((*lanes, *shape)) * 3
            values.reshape(-1)[rng.integers(values.size, size=3)] = np.nan  # few: a matmul's results stay numbers
        arrays[role] = values.astype(numpy_dtype)
    return arrays


def _one_by_one(opcode, arrays, attrs, engine, lanes, writes):
    """Each lane's instance alone (no lane dimensions), into copies of the written operands."""
    results = {role: arrays[role].copy() for role in writes}
    for lane in np.ndindex(*lanes):
        views = {role: (results[role][lane] if role in writes else array[lane]) for role, array in arrays.items()}
        isa.OPCODES[opcode].semantics(views, attrs, engine, TRN2)
    return results


LANE_CASES = list(_lane_cases())


@pytest.mark.parametrize("lanes", [(3,), (2, 2)], ids=["1-lane-dim", "2-lane-dims"])
@pytest.mark.parametrize("case", [pytest.param(case, id=f"{case[0]}-{index}") for index, case in enumerate(LANE_CASES)])
def test_lanes_compute_what_each_instance_computes_alone(case, lanes):
    opcode, engine, operands, attrs = case
    engine = Engine(engine)
    rng = np.random.default_rng(len(str(case)) + len(lanes))
    if operands == "identity":  # a transpose whose stationary is the identity in every lane: a bit-exact copy
        operands = {"stationary": ((24, 24), "f32"), "moving": ((24, 40), "f32"), "dst": ((40, 24), "f32")}
    arrays = _lane_arrays(operands, lanes, rng)
    if attrs.get("is_transpose"):  # every lane's stationary the identity, or only the first lane's
        first = (0,) * len(lanes)
        arrays["stationary"][... if case[2] == "identity" else first] = np.eye(24, dtype=np.float32)
    full_attrs = isa.with_defaults(opcode, attrs)
    spec = isa.OPCODES[opcode]
    writes = spec.written_roles & set(arrays)
    expected = _one_by_one(opcode, arrays, full_attrs, engine, lanes, writes)
    together = {role: array.copy() for role, array in arrays.items()}
    spec.semantics(together, full_attrs, engine, TRN2, len(lanes))
    for role in writes:
        assert together[role].tobytes() == expected[role].tobytes(), role
    # An input the same in every lane (lane strides of 0, as the vectoriser passes one) gives the same results.
    shared = {
        role: (array.copy() if role in writes else np.broadcast_to(array[(0,) * len(lanes)], array.shape))
        for role, array in arrays.items()
    }
    expected = _one_by_one(opcode, shared, full_attrs, engine, lanes, writes)
    spec.semantics(shared, full_attrs, engine, TRN2, len(lanes))
    for role in writes:
        assert shared[role].tobytes() == expected[role].tobytes(), role


def test_lane_cases_cover_every_opcode():
    assert {case[0] for case in LANE_CASES} == set(isa.OPCODES)


def test_lanewise_takes_per_lane_attributes():
    """An attribute given per lane (a register that differs between lanes) runs each lane with its own value."""
    from neuron_mlir.runtime import semantics

    dst = np.zeros((3, 2, 4), np.int32)
    bases = np.array([5, -1, 100])
    attrs = isa.with_defaults("iota", {"pattern": ((1, 4),), "base": bases})
    semantics.lanewise(semantics.iota, {"dst": dst}, attrs, Engine.GPSIMD, TRN2, 1)
    for lane, base in enumerate(bases):
        np.testing.assert_array_equal(dst[lane], base + np.arange(4)[None, :].repeat(2, 0))


def test_alu_implements_exactly_the_instruction_sets_operators():
    assert set(alu._INT_OPS) == isa.ALU_OPS
    assert set(alu._INT_OPS) - set(alu._FLOAT_OPS) == isa.BITVEC_OPS  # no fp32 form: always on integers
    assert set(alu.ACTIVATIONS) == isa.ACTIVATION_FUNCTIONS
    assert set(alu.REDUCE) == isa.REDUCE_OPS


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_power_is_pythons_wrapped_to_the_lane_width(dtype):
    rng = np.random.default_rng(5)
    bases = rng.integers(-40, 40, 300).astype(dtype)
    exponents = rng.integers(-3, 70, 300).astype(dtype)
    bases[:4], exponents[:4] = [1, -1, -1, 0], [-5, -5, -4, 0]
    bits = 32 if dtype == np.int32 else 64
    out = alu.binary("power", bases[None, :], exponents[None, :], integer=True)[0]
    for base, exponent, got in zip(bases.tolist(), exponents.tolist(), out.tolist(), strict=True):
        if exponent < 0:
            want = {1: 1, -1: -1 if exponent % 2 else 1}.get(base, 0)  # only +-1 have integral negative powers
        else:
            want = (pow(base, exponent, 2**bits) + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
        assert got == want, (base, exponent)


def _bf16_neighbours(value: float) -> tuple[float, float]:
    """The largest bf16 value <= `value` and the smallest >= it."""
    nearest = ml_dtypes.bfloat16(value)
    if float(nearest) < value:
        return float(nearest), float(np.nextafter(nearest, ml_dtypes.bfloat16(np.inf)))
    if float(nearest) > value:
        return float(np.nextafter(nearest, ml_dtypes.bfloat16(-np.inf))), float(nearest)
    return float(nearest), float(nearest)


def test_stochastic_rounding_to_bf16_is_unbiased(kernel):
    """Each value goes to one of its two bf16 neighbours, and the mean of many roundings of one value is the value
    within the statistical bound: 5 standard errors of a two-point draw, (spacing) * sqrt(p (1 - p) / n)."""
    n = 4096
    # one value per partition: just above 1 (spacing 2^-7), just below 1 (2^-8), negative, tiny, large, exact
    values = np.array([1 + 2**-10, 1 - 3 * 2**-12, -2.71828, 3.1e-5, 12345.678, 1.5, -0.3337, 7e37], np.float32)
    x = np.repeat(values[:, None], n, axis=1)
    counters = np.arange(x.size, dtype=np.int32).reshape(x.shape)
    key = np.full((len(values), 1), 99, np.int32)
    u = kernel(
        "gpsimd_kernel", "gpsimd", {"in0": counters, "in1": key}, {"dst": (x.shape, "f32")}, {"kernel": "uniform"}
    )["dst"]
    rounded = kernel(
        "gpsimd_kernel", "gpsimd", {"in0": x, "in1": u}, {"dst": (x.shape, "bf16")}, {"kernel": "stochastic_round_bf16"}
    )["dst"].astype(np.float64)
    for row, value in enumerate(values.astype(np.float64)):
        below, above = _bf16_neighbours(value)
        assert set(np.unique(rounded[row])) <= {below, above}, (value, np.unique(rounded[row]))
        spacing = above - below
        p = 0.0 if spacing == 0 else (value - below) / spacing
        bound = 5 * spacing * math.sqrt(p * (1 - p) / n)
        assert abs(rounded[row].mean() - value) <= bound, (value, rounded[row].mean(), bound)
    # round to nearest is biased on the same data: the test can tell the two apart
    assert abs(float(np.float32(values[0]).astype(ml_dtypes.bfloat16)) - values[0]) > 5 * 2**-7 * math.sqrt(
        0.125 * 0.875 / n
    )


def test_stochastic_rounding_passes_specials_and_bf16_values():
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.5, -448.0], np.float32)
    out = alu.stochastic_round_bf16(special, np.full(special.shape, 0.999, np.float32))
    np.testing.assert_array_equal(out, special)
    assert np.signbit(out[4])
