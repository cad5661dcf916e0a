"""Fuzzing the bundle reader: whatever the bytes, only BundleError may escape, and what loads runs safely.

Three kinds of mutants of valid bundles: raw bit flips and truncations (mostly caught by the header and the
checksum), byte flips inside the manifest text re-sealed with a fresh checksum (JSON and type errors), and
structured edits of the decoded manifest re-encoded with a fresh checksum (the validator's job). Mutants that
load are also run when they are small, and must then finish or report a data race, nothing else.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
import random
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from neuron_mlir.runtime import bundle, dtypes, isa
from neuron_mlir.runtime.bundle import BundleError
from neuron_mlir.runtime.program import Loop, Program, Reg, ScalarOp
from neuron_mlir.runtime.simulator import RaceError, run_program

CASES_PER_CHUNK = 200
CHUNKS = {"bits": 4, "text": 4, "manifest": 8}  # 3,200 cases in all

NAMES = [
    *isa.OPCODES,
    *dtypes.DTYPES,
    "sbuf",
    "psum",
    "hbm",
    "tensor",
    "vector",
    "scalar",
    "gpsimd",
    "dma",
    "sync",
    "dst",
    "src",
    "in0",
    "moving",
    "add",
    "exp",
    "reg",
    "float",
    "nan",
    "-inf",
    "",
    "x" * 300,
]
INTERESTING_INTS = [
    0,
    1,
    -1,
    2,
    3,
    7,
    31,
    32,
    64,
    96,
    127,
    128,
    129,
    511,
    512,
    513,
    2047,
    2048,
    4096,
    65535,
    65536,
    2**31 - 1,
    2**31,
    -(2**31),
    2**32,
    2**40,
    2**63,
    -(2**63),
    10**30,
]


@pytest.fixture(scope="module")
def seeds(request) -> list[bytes]:
    from importlib.util import module_from_spec, spec_from_file_location
    from pathlib import Path

    spec = spec_from_file_location("runtime_conftest", Path(__file__).with_name("conftest.py"))
    assert spec is not None
    assert spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return [
        bundle.encode_bundle(module.build_rich_program()),
        bundle.encode_bundle(module.build_rich_program(tiles=1, target="trn3")),
    ]


# ---- mutators ----------------------------------------------------------------------------------------------


def flip_bits(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    choice = rng.random()
    if choice < 0.3:
        return bytes(data[: rng.randrange(len(data))])
    if choice < 0.4:
        return bytes(data) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 100)))
    for _ in range(rng.randrange(1, 4)):
        # bias towards the header, where every field matters
        position = rng.randrange(128) if rng.random() < 0.5 else rng.randrange(len(data))
        data[position] ^= 1 << rng.randrange(8)
    return bytes(data)


def reseal(text: bytes, data: bytes) -> bytes:
    """A bundle with a correct header and checksum around any manifest bytes."""
    manifest_length = len(text)
    data_offset = -(-(128 + manifest_length) // 64) * 64
    header = struct.pack(
        "<8sIIQQQQQ8x",
        bundle.MAGIC,
        bundle.FORMAT_VERSION,
        128,
        128,
        manifest_length,
        data_offset,
        len(data),
        data_offset + len(data),
    )
    body = text + b" " * (data_offset - 128 - manifest_length) + data
    return header + hashlib.sha256(header + body).digest() + bytes(32) + body


def flip_text(raw: bytes, rng: random.Random) -> bytes:
    """Mutate the manifest's JSON text itself, then seal it with a valid header and checksum."""
    manifest_length = struct.unpack("<Q", raw[24:32])[0]
    data_offset = struct.unpack("<Q", raw[32:40])[0]
    text = bytearray(raw[128 : 128 + manifest_length])
    data = raw[data_offset:]
    for _ in range(rng.randrange(1, 4)):
        position = rng.randrange(len(text))
        action = rng.random()
        if action < 0.4:
            text[position] = rng.choice(b'0123456789-.,:{}[]"etfn \\x')
        elif action < 0.7:
            del text[position : position + rng.randrange(1, 20)]
        else:
            text[position:position] = rng.choice([b"0", b"9", b'"a"', b"[]", b"{}", b",", b"-1", b"1e999"])
    return reseal(bytes(text), data)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice(INTERESTING_INTS)
    if kind == 1:
        return rng.choice([0.5, -1.5, 1e300, -0.0, 3.0])
    if kind == 2:
        return rng.choice(NAMES)
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4 and depth < 2:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 5 and depth < 2:
        return {rng.choice(["reg", "float", "kind", "buffer", "x"]): random_value(rng, depth + 1)}
    if kind == 6:
        return {"reg": rng.choice([0, 1, 5, 100, -1])}
    if kind == 7:
        return {"float": rng.choice(["nan", "inf", "-inf", "1"])}
    return rng.randrange(-3, 600)


def containers(node: Any, path: tuple = ()) -> list[tuple[Any, Any]]:
    """Every (container, key) pair in the JSON tree."""
    found: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((node, key))
            found.extend(containers(value))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.append((node, index))
            found.extend(containers(value))
    return found


def mutate_manifest(raw: bytes, rng: random.Random) -> bytes:
    """Edit one or two places of the decoded manifest, mostly keeping each value's type."""
    manifest, data = bundle.unpack(raw)
    manifest = copy.deepcopy(manifest)
    for _ in range(rng.randrange(1, 3)):
        slots = containers(manifest)
        leaves = [(c, k) for c, k in slots if not isinstance(c[k], (dict, list))]
        # mostly leaves, so that many mutants are well-formed and reach the validator's semantic checks
        container, key = rng.choice(leaves if rng.random() < 0.8 else slots)
        value = container[key]
        action = rng.random()
        if isinstance(value, int) and not isinstance(value, bool) and action < 0.6:
            if rng.random() < 0.5:
                container[key] = value + rng.choice([-1, 1, -2, 2, -64, 64, 128, -128, 512, 2**20, -(2**20)])
            else:
                container[key] = rng.choice(INTERESTING_INTS)
        elif isinstance(value, str) and action < 0.6:
            container[key] = rng.choice(NAMES)
        elif isinstance(value, bool) and action < 0.6:
            container[key] = not value
        elif action < 0.75:
            container[key] = random_value(rng)
        elif action < 0.83:
            if isinstance(container, dict):
                del container[key]
            else:
                container.pop(key)
        elif action < 0.93 and isinstance(container, list):
            container.insert(key, copy.deepcopy(value))
        elif isinstance(container, dict):
            container[rng.choice(["extra", "kind", "id", "reg", "attrs", "accumulate"])] = random_value(rng)
        else:
            container[key] = random_value(rng)
    return bundle.pack(manifest, data)


MUTATORS = {"bits": flip_bits, "text": flip_text, "manifest": mutate_manifest}


# ---- running what loads ------------------------------------------------------------------------------------


def instances(program: Program, limit: int) -> int:
    """How many instruction instances the program issues, counting no further than `limit`."""
    regs = [0] * program.num_registers
    count = 0
    operations: dict[str, Callable[[int, int], int]] = {
        "add": int.__add__,
        "sub": int.__sub__,
        "mul": int.__mul__,
        "min": min,
        "max": max,
        "floordiv": lambda a, b: a // b,
        "rem": lambda a, b: a % b,
        "eq": lambda a, b: int(a == b),
        "ne": lambda a, b: int(a != b),
        "lt": lambda a, b: int(a < b),
        "le": lambda a, b: int(a <= b),
        "gt": lambda a, b: int(a > b),
        "ge": lambda a, b: int(a >= b),
    }

    def value(scalar) -> int:
        return regs[scalar.index] if isinstance(scalar, Reg) else scalar

    def walk(nodes) -> None:
        nonlocal count
        for node in nodes:
            if count > limit:
                return
            if isinstance(node, Loop):
                for i in range(value(node.lower), value(node.upper), node.step):
                    regs[node.induction.index] = i
                    walk(node.body)
                    if count > limit:
                        return
            elif isinstance(node, ScalarOp):
                result = operations[node.op](value(node.lhs), value(node.rhs))
                regs[node.dest.index] = ((result + 2**31) & 0xFFFFFFFF) - 2**31
            else:
                count += 1

    walk(program.body)
    return count


def small_enough_to_run(program: Program) -> bool:
    footprint = sum(math.prod(b.shape) * dtypes.itemsize(b.dtype) for b in program.buffers)
    return footprint <= 64 * 2**20 and instances(program, 500) <= 500


def run_loaded(program: Program, rng: np.random.Generator) -> None:
    inputs = []
    for binding in program.inputs:
        dtype = dtypes.numpy_dtype(program.buffers[binding.buffer].dtype)
        inputs.append(rng.standard_normal(binding.shape).astype(np.float32).astype(dtype))
    with contextlib.suppress(RaceError):  # a mutated wait list: reported clearly, which is the point
        run_program(program, inputs)


@pytest.mark.parametrize(("kind", "chunk"), [(kind, chunk) for kind, n in CHUNKS.items() for chunk in range(n)])
def test_mutants_raise_only_bundle_errors(seeds, kind, chunk):
    rng = random.Random(f"{kind}-{chunk}")
    run_rng = np.random.default_rng(chunk)
    mutate = MUTATORS[kind]
    loaded = rejected = 0
    messages: list[str] = []
    with np.errstate(all="ignore"):
        for case in range(CASES_PER_CHUNK):
            mutant = mutate(seeds[case % len(seeds)], rng)
            try:
                program = bundle.read_bundle(mutant)
            except BundleError as error:
                messages.append(str(error))
                rejected += 1
                continue
            loaded += 1
            if small_enough_to_run(program):
                run_loaded(program, run_rng)
    assert loaded + rejected == CASES_PER_CHUNK
    assert all(messages), "a BundleError must say what is wrong"
    if kind == "manifest":
        assert rejected > CASES_PER_CHUNK // 4  # the mutations do reach the validator
