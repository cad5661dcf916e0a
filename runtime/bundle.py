"""The bundle: the one on-disk form of a compiled program, and its reader and writer.

A bundle is a single binary file (layout in `docs/bundle-format.md`, which this module implements):

    header (128 bytes)   magic, format version, offsets and lengths, SHA-256 of the rest
    manifest             UTF-8 JSON: versions, target, entry signature, memory plan, instruction stream,
                         registers, waits, source locations, where each constant's bytes are
    data                 the constants as raw little-endian arrays, each at a 64-byte aligned offset

Nothing in it is executable and nothing is unpickled. `read_bundle` checks the header, the lengths, the checksum,
the JSON structure and the type of every field, then hands the decoded `Program` to
`validate.validate_program`, which checks everything about its meaning; any problem raises one `BundleError`
(a ValueError) saying what and where, before anything runs. `read_validated_bundle` returns that validation
(a `ValidatedProgram`, which `simulator.run_validated` runs without checking again). `encode_bundle` validates
too, so an invalid program is never written; given a `ValidatedProgram` it relies on the validation it holds.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from neuron_mlir.runtime import dtypes
from neuron_mlir.runtime.hardware import Engine, Memory
from neuron_mlir.runtime.program import (
    Access,
    AttrValue,
    BufferDecl,
    Instruction,
    Loop,
    Node,
    Program,
    Reg,
    ScalarInput,
    ScalarOp,
    TensorBinding,
)
from neuron_mlir.runtime.validate import MAX_NESTING, BundleError, ValidatedProgram, validate_program

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "BundleError",
    "decode_manifest",
    "encode_bundle",
    "encode_manifest",
    "pack",
    "programs_equal",
    "read_bundle",
    "read_validated_bundle",
    "unpack",
    "write_bundle",
]

MAGIC = b"\x89NEURON\n"  # high bit and newline catch text-mode transfers, as PNG's signature does
FORMAT_VERSION = 1
HEADER_SIZE = 128
ALIGNMENT = 64
FORMAT_NAME = "neuron-mlir-bundle"
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
# magic, version, header size, manifest offset, manifest length, data offset, data length, file length
_HEADER = struct.Struct("<8sIIQQQQQ8x")
_CHECKSUM_AT = 64


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _require_little_endian() -> None:
    if sys.byteorder != "little":
        raise BundleError("bundles store little-endian arrays; this host is big-endian")


# ---- container ---------------------------------------------------------------------------------------------


def pack(manifest: dict[str, Any], data: bytes) -> bytes:
    """Assemble a bundle from a manifest object and its data section (no validation of their meaning)."""
    text = json.dumps(manifest, separators=(",", ":"), allow_nan=False).encode("utf-8")
    manifest_end = HEADER_SIZE + len(text)
    data_offset = _align(manifest_end)
    total = data_offset + len(data)
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, HEADER_SIZE, HEADER_SIZE, len(text), data_offset, len(data), total)
    body = text + b" " * (data_offset - manifest_end) + data
    checksum = hashlib.sha256(header + body).digest()
    return header + checksum + bytes(HEADER_SIZE - _CHECKSUM_AT - len(checksum)) + body


def unpack(raw: bytes) -> tuple[dict[str, Any], bytes]:
    """Check a bundle's header, lengths and checksum; return (manifest object, data section)."""
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise BundleError(f"a bundle is bytes, got {type(raw).__name__}")
    raw = bytes(raw)
    if len(raw) < len(MAGIC) or raw[: len(MAGIC)] != MAGIC:
        raise BundleError("not a neuron-mlir bundle (bad magic number)")
    if len(raw) < HEADER_SIZE:
        raise BundleError(f"bundle is truncated: {len(raw)} bytes, shorter than its {HEADER_SIZE}-byte header")
    _, version, header_size, manifest_offset, manifest_length, data_offset, data_length, total = _HEADER.unpack(
        raw[:_CHECKSUM_AT]
    )
    if version != FORMAT_VERSION:
        raise BundleError(
            f"bundle format version {version} is not supported (this runtime reads version {FORMAT_VERSION})"
        )
    if total != len(raw):
        if total > len(raw):
            raise BundleError(f"bundle is truncated: the header says {total} bytes, the file has {len(raw)}")
        raise BundleError(f"bundle has {len(raw) - total} trailing bytes after the {total} its header declares")
    if header_size != HEADER_SIZE or manifest_offset != HEADER_SIZE:
        raise BundleError(f"bundle header size {header_size} / manifest offset {manifest_offset} must be {HEADER_SIZE}")
    if raw[_CHECKSUM_AT + 32 : HEADER_SIZE] != bytes(HEADER_SIZE - _CHECKSUM_AT - 32) or raw[56:64] != bytes(8):
        raise BundleError("bundle header has non-zero reserved bytes")
    manifest_end = manifest_offset + manifest_length
    if manifest_length > MAX_MANIFEST_BYTES:
        raise BundleError(f"bundle manifest of {manifest_length} bytes exceeds the {MAX_MANIFEST_BYTES}-byte limit")
    if data_offset % ALIGNMENT or not manifest_end <= data_offset or data_offset + data_length != total:
        raise BundleError(
            f"bundle sections are inconsistent (manifest {manifest_offset}+{manifest_length}, data "
            f"{data_offset}+{data_length}, file {total})"
        )
    checksum = hashlib.sha256(raw[:_CHECKSUM_AT] + raw[HEADER_SIZE:]).digest()
    if checksum != raw[_CHECKSUM_AT : _CHECKSUM_AT + 32]:
        raise BundleError("bundle checksum mismatch: the file is corrupted or was modified")
    if raw[manifest_end:data_offset].strip(b" "):
        raise BundleError("bundle manifest padding holds data")
    try:
        manifest = json.loads(raw[manifest_offset:manifest_end].decode("utf-8"), object_pairs_hook=_unique_keys)
    except RecursionError:
        raise BundleError("bundle manifest nests too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as error:
        raise BundleError(f"bundle manifest is not valid JSON: {error}") from None
    if not isinstance(manifest, dict):
        raise BundleError("bundle manifest must be a JSON object")
    return manifest, raw[data_offset:]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)  # built in C; a duplicate key shows as a shorter dict, then named below
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return result


# ---- writing -----------------------------------------------------------------------------------------------


def encode_bundle(program: Program | ValidatedProgram) -> bytes:
    """The bundle bytes of `program` (validated first: an invalid program raises `BundleError`; a
    `ValidatedProgram` already was, and must not have changed since)."""
    _require_little_endian()
    if isinstance(program, ValidatedProgram):
        program = program.program
    else:
        validate_program(program)
    manifest, data = encode_manifest(program)
    return pack(manifest, data)


def write_bundle(program: Program | ValidatedProgram, path: str | os.PathLike[str]) -> None:
    data = encode_bundle(program)
    with open(path, "wb") as handle:
        handle.write(data)


def encode_manifest(program: Program) -> tuple[dict[str, Any], bytes]:
    """The manifest object and data section of `program` (no validation)."""
    constants = []
    chunks: list[bytes] = []
    offset = 0
    for index in sorted(program.constants):
        raw = np.ascontiguousarray(program.constants[index]).tobytes()
        constants.append({"buffer": int(index), "offset": offset, "nbytes": len(raw)})
        padded = _align(len(raw))
        chunks.append(raw + bytes(padded - len(raw)))
        offset += padded
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "compiler_version": program.compiler_version,
        "target": program.target,
        "entry": {
            "name": program.entry,
            "inputs": [_encode_binding(b, program) for b in program.inputs],
            "outputs": [_encode_binding(b, program) for b in program.outputs],
            # integer arguments (register-bounded loops); absent when there are none
            **(
                {
                    "scalars": [
                        {"name": x.name, "register": x.register.index, "lower": x.lower, "upper": x.upper}
                        for x in program.scalars
                    ]
                }
                if program.scalars
                else {}
            ),
        },
        "memory_plan": [
            {
                "name": b.name,
                "memory": b.memory.value,
                "address": int(b.address),
                "shape": [int(d) for d in b.shape],
                "dtype": b.dtype,
            }
            for b in program.buffers
        ],
        "constants": constants,
        "num_registers": int(program.num_registers),
        "locations": list(program.locations),
        "body": [_encode_node(node) for node in program.body],
    }
    return manifest, b"".join(chunks)


def _encode_binding(binding: TensorBinding, program: Program) -> dict[str, Any]:
    return {
        "name": binding.name,
        "buffer": int(binding.buffer),
        "shape": [int(d) for d in binding.shape],
        "strides": [int(s) for s in binding.strides],
        "offset": int(binding.offset),
        "dtype": program.buffers[binding.buffer].dtype,
    }


def _encode_scalar(value: int | Reg) -> Any:
    return {"reg": value.index} if isinstance(value, Reg) else int(value)


def _encode_access(access: Access) -> dict[str, Any]:
    return {
        "buffer": int(access.buffer),
        "pattern": [[int(step), int(num)] for step, num in access.pattern],
        "offset": int(access.offset),
        "offset_reg": access.offset_reg.index if access.offset_reg is not None else None,
        "partition_start": int(access.partition_start),
        "partitions": int(access.partitions),
    }


def _encode_attr(value: AttrValue) -> Any:
    if isinstance(value, Reg):
        return {"reg": value.index}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, tuple):
        return [_encode_attr(item) for item in value]
    return value  # str or None


def _encode_node(node: Node) -> dict[str, Any]:
    if isinstance(node, Instruction):
        return {
            "kind": "inst",
            "id": int(node.id),
            "opcode": node.opcode,
            "engine": node.engine.value,
            "queue": int(node.queue),
            "operands": {role: _encode_access(access) for role, access in node.operands.items()},
            "attrs": {name: _encode_attr(value) for name, value in node.attrs.items()},
            "waits": [int(w) for w in node.waits],
            "location": int(node.location),
        }
    if isinstance(node, ScalarOp):
        return {
            "kind": "scalar",
            "dest": node.dest.index,
            "op": node.op,
            "lhs": _encode_scalar(node.lhs),
            "rhs": _encode_scalar(node.rhs),
        }
    return {
        "kind": "loop",
        "induction": node.induction.index,
        "lower": _encode_scalar(node.lower),
        "upper": _encode_scalar(node.upper),
        "step": int(node.step),
        "body": [_encode_node(child) for child in node.body],
    }


# ---- reading -----------------------------------------------------------------------------------------------


def read_bundle(source: str | os.PathLike[str] | bytes | bytearray | memoryview) -> Program:
    """Decode and fully validate a bundle (a path or its bytes); raise `BundleError` on any problem."""
    return read_validated_bundle(source).program


def read_validated_bundle(source: str | os.PathLike[str] | bytes | bytearray | memoryview) -> ValidatedProgram:
    """`read_bundle`, returning the validation itself (to run with `simulator.run_validated`)."""
    _require_little_endian()
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
    else:
        try:
            with open(source, "rb") as handle:
                raw = handle.read()
        except OSError as error:
            raise BundleError(f"cannot read bundle {os.fspath(source)!r}: {error.strerror or error}") from None
    # Decoding and validating allocate many small objects, none of them garbage: in a process holding a large
    # heap (torch's), the collections they would trigger cost more than the reading itself.
    collecting = gc.isenabled()
    gc.disable()
    try:
        manifest, data = unpack(raw)
        return validate_program(decode_manifest(manifest, data))
    finally:
        if collecting:
            gc.enable()


def decode_manifest(manifest: dict[str, Any], data: bytes) -> Program:
    """The Program a manifest describes; checks structure and field types (meaning: `validate_program`)."""
    try:
        return _Decoder(data).program(manifest)
    except BundleError:
        raise
    except (
        TypeError,
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
    ) as error:
        raise BundleError(f"malformed bundle manifest: {type(error).__name__}: {error}") from None


# Enum members by value: a dict lookup, where `Engine(text)` and `{e.value for e in Engine}` go through the
# Enum machinery (per instruction, a visible share of decoding).
_ENGINES = {engine.value: engine for engine in Engine}
_MEMORIES = {memory.value: memory for memory in Memory}
_INSTRUCTION_FIELDS = frozenset(("kind", "id", "opcode", "engine", "queue", "operands", "attrs", "waits", "location"))
_BUFFER_FIELDS = frozenset(("name", "memory", "address", "shape", "dtype"))
_ACCESS_FIELDS = frozenset(("buffer", "pattern", "offset", "offset_reg", "partition_start", "partitions"))


class _Decoder:
    def __init__(self, data: bytes) -> None:
        self.data = data

    # ---- typed field access --------------------------------------------------------------------------------

    @staticmethod
    def obj(value: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise BundleError(f"{where}: expected a JSON object, got {_json_kind(value)}")
        missing = [key for key in required if key not in value]
        if missing:
            raise BundleError(f"{where}: missing field '{missing[0]}'")
        unknown = [key for key in value if key not in required and key not in optional]
        if unknown:
            raise BundleError(f"{where}: unknown field '{unknown[0]}'")
        return value

    @staticmethod
    def integer(value: Any, where: str) -> int:
        if type(value) is not int:
            raise BundleError(f"{where}: expected an integer, got {_json_kind(value)}")
        return value

    @staticmethod
    def string(value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise BundleError(f"{where}: expected a string, got {_json_kind(value)}")
        return value

    @staticmethod
    def array(value: Any, where: str, limit: int = 1 << 24) -> list[Any]:
        if not isinstance(value, list):
            raise BundleError(f"{where}: expected a JSON array, got {_json_kind(value)}")
        if len(value) > limit:
            raise BundleError(f"{where}: more than {limit} entries")
        return value

    def ints(self, value: Any, where: str) -> tuple[int, ...]:
        items = self.array(value, where, 64)
        for i, item in enumerate(items):
            if type(item) is not int:  # where[i] is only formatted for the error (most of decoding's time otherwise)
                self.integer(item, f"{where}[{i}]")
        return tuple(items)

    def scalar(self, value: Any, where: str) -> int | Reg:
        if isinstance(value, dict):
            return self.reg(value, where)
        return self.integer(value, where)

    def reg(self, value: Any, where: str) -> Reg:
        fields = self.obj(value, where, ("reg",))
        return Reg(self.integer(fields["reg"], f"{where}.reg"))

    # ---- sections ------------------------------------------------------------------------------------------

    def program(self, manifest: dict[str, Any]) -> Program:
        fields = self.obj(
            manifest,
            "manifest",
            (
                "format",
                "format_version",
                "compiler_version",
                "target",
                "entry",
                "memory_plan",
                "constants",
                "num_registers",
                "locations",
                "body",
            ),
        )
        if fields["format"] != FORMAT_NAME:
            raise BundleError(f"manifest.format: expected '{FORMAT_NAME}', got {fields['format']!r}")
        version = self.integer(fields["format_version"], "manifest.format_version")
        if version != FORMAT_VERSION:
            raise BundleError(f"manifest format version {version} does not match the header's {FORMAT_VERSION}")
        buffers = [
            self.buffer(entry, f"memory_plan[{i}]")
            for i, entry in enumerate(self.array(fields["memory_plan"], "memory_plan"))
        ]
        entry = self.obj(fields["entry"], "entry", ("name", "inputs", "outputs"), ("scalars",))
        scalars = []
        for i, item in enumerate(self.array(entry.get("scalars", []), "entry.scalars")):
            where = f"entry.scalars[{i}]"
            scalar = self.obj(item, where, ("name", "register", "lower", "upper"))
            scalars.append(
                ScalarInput(
                    self.string(scalar["name"], f"{where}.name"),
                    Reg(self.integer(scalar["register"], f"{where}.register")),
                    self.integer(scalar["lower"], f"{where}.lower"),
                    self.integer(scalar["upper"], f"{where}.upper"),
                )
            )
        inputs = [
            self.binding(item, f"entry.inputs[{i}]", buffers)
            for i, item in enumerate(self.array(entry["inputs"], "entry.inputs"))
        ]
        outputs = [
            self.binding(item, f"entry.outputs[{i}]", buffers)
            for i, item in enumerate(self.array(entry["outputs"], "entry.outputs"))
        ]
        locations = [
            self.string(text, f"locations[{i}]") for i, text in enumerate(self.array(fields["locations"], "locations"))
        ]
        body = [self.node(node, f"body[{i}]", 0) for i, node in enumerate(self.array(fields["body"], "body"))]
        return Program(
            target=self.string(fields["target"], "manifest.target"),
            buffers=buffers,
            inputs=inputs,
            outputs=outputs,
            body=body,
            constants=self.constants(fields["constants"], buffers),
            num_registers=self.integer(fields["num_registers"], "manifest.num_registers"),
            locations=locations,
            entry=self.string(entry["name"], "entry.name"),
            compiler_version=self.string(fields["compiler_version"], "manifest.compiler_version"),
            scalars=scalars,
        )

    def buffer(self, value: Any, where: str) -> BufferDecl:
        if type(value) is dict and value.keys() == _BUFFER_FIELDS:  # the common case, as in `instruction`
            name, memory, address, shape, dtype = (
                value["name"],
                value["memory"],
                value["address"],
                value["shape"],
                value["dtype"],
            )
            if (
                type(name) is str
                and type(memory) is str
                and memory in _MEMORIES
                and type(address) is int
                and type(dtype) is str
                and dtype in dtypes.DTYPES
                and type(shape) is list
                and len(shape) <= 64
                and all(type(d) is int for d in shape)
            ):
                return BufferDecl(name, _MEMORIES[memory], address, tuple(shape), dtype)
        fields = self.obj(value, where, ("name", "memory", "address", "shape", "dtype"))
        memory = self.string(fields["memory"], f"{where}.memory")
        if memory not in _MEMORIES:
            raise BundleError(f"{where}.memory: unknown memory {memory!r} (expected hbm, sbuf or psum)")
        dtype = self.string(fields["dtype"], f"{where}.dtype")
        if dtype not in dtypes.DTYPES:
            raise BundleError(f"{where}.dtype: unknown dtype {dtype!r} (known: {', '.join(dtypes.DTYPES)})")
        return BufferDecl(
            self.string(fields["name"], f"{where}.name"),
            _MEMORIES[memory],
            self.integer(fields["address"], f"{where}.address"),
            self.ints(fields["shape"], f"{where}.shape"),
            dtype,
        )

    def binding(self, value: Any, where: str, buffers: list[BufferDecl]) -> TensorBinding:
        fields = self.obj(value, where, ("name", "buffer", "shape", "strides", "offset", "dtype"))
        buffer = self.integer(fields["buffer"], f"{where}.buffer")
        dtype = self.string(fields["dtype"], f"{where}.dtype")
        if 0 <= buffer < len(buffers) and dtype != buffers[buffer].dtype:
            raise BundleError(f"{where}.dtype: {dtype!r} differs from its buffer's {buffers[buffer].dtype!r}")
        return TensorBinding(
            self.string(fields["name"], f"{where}.name"),
            buffer,
            self.ints(fields["shape"], f"{where}.shape"),
            self.ints(fields["strides"], f"{where}.strides"),
            self.integer(fields["offset"], f"{where}.offset"),
        )

    def constants(self, value: Any, buffers: list[BufferDecl]) -> dict[int, np.ndarray]:
        result: dict[int, np.ndarray] = {}
        for i, item in enumerate(self.array(value, "constants")):
            where = f"constants[{i}]"
            fields = self.obj(item, where, ("buffer", "offset", "nbytes"))
            index = self.integer(fields["buffer"], f"{where}.buffer")
            offset = self.integer(fields["offset"], f"{where}.offset")
            nbytes = self.integer(fields["nbytes"], f"{where}.nbytes")
            if not 0 <= index < len(buffers):
                raise BundleError(f"{where}.buffer: buffer {index} does not exist")
            if index in result:
                raise BundleError(f"{where}.buffer: buffer {index} has two constants")
            buffer = buffers[index]
            dtype = dtypes.numpy_dtype(buffer.dtype)
            expected = math.prod(buffer.shape) * dtype.itemsize
            if nbytes != expected:
                raise BundleError(
                    f"{where}: {nbytes} bytes for buffer '{buffer.name}' of {expected} bytes "
                    f"({buffer.dtype}{list(buffer.shape)})"
                )
            if offset < 0 or offset % ALIGNMENT or offset + nbytes > len(self.data):
                raise BundleError(
                    f"{where}: bytes {offset}..{offset + nbytes} are not a {ALIGNMENT}-byte aligned range of the "
                    f"{len(self.data)}-byte data section"
                )
            array = np.frombuffer(self.data, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset)
            result[index] = array.reshape(buffer.shape)
        return result

    def node(self, value: Any, where: str, depth: int) -> Node:
        if depth > MAX_NESTING:
            raise BundleError(f"{where}: loops nest deeper than {MAX_NESTING}")
        if not isinstance(value, dict):
            raise BundleError(f"{where}: expected a JSON object, got {_json_kind(value)}")
        kind = value.get("kind")
        if kind == "inst":
            return self.instruction(value, where)
        if kind == "scalar":
            fields = self.obj(value, where, ("kind", "dest", "op", "lhs", "rhs"))
            return ScalarOp(
                Reg(self.integer(fields["dest"], f"{where}.dest")),
                self.string(fields["op"], f"{where}.op"),
                self.scalar(fields["lhs"], f"{where}.lhs"),
                self.scalar(fields["rhs"], f"{where}.rhs"),
            )
        if kind == "loop":
            fields = self.obj(value, where, ("kind", "induction", "lower", "upper", "step", "body"))
            body = tuple(
                self.node(child, f"{where}.body[{i}]", depth + 1)
                for i, child in enumerate(self.array(fields["body"], f"{where}.body"))
            )
            return Loop(
                Reg(self.integer(fields["induction"], f"{where}.induction")),
                self.scalar(fields["lower"], f"{where}.lower"),
                self.scalar(fields["upper"], f"{where}.upper"),
                self.integer(fields["step"], f"{where}.step"),
                body,
            )
        raise BundleError(f"{where}: unknown node kind {kind!r} (expected inst, scalar or loop)")

    def instruction(self, value: dict[str, Any], where: str) -> Instruction:
        # The common case, a well-formed instruction, checked field by field without formatting the location
        # of each field (most of decoding's time otherwise); anything else takes `checked_instruction`, which
        # accepts exactly what this accepts and names the first problem of the rest.
        if value.keys() == _INSTRUCTION_FIELDS:
            inst_id, opcode, engine = value["id"], value["opcode"], value["engine"]
            queue, waits, location = value["queue"], value["waits"], value["location"]
            operands_value, attrs_value = value["operands"], value["attrs"]
            if (
                type(inst_id) is int
                and type(opcode) is str
                and type(engine) is str
                and engine in _ENGINES
                and type(queue) is int
                and type(location) is int
                and type(waits) is list
                and len(waits) <= 1 << 24
                and type(operands_value) is dict
                and type(attrs_value) is dict
                and all(type(w) is int for w in waits)
            ):
                operands = {}
                for role, item in operands_value.items():
                    access = self.plain_access(item)
                    if access is None:
                        access = self.access(item, f"instruction {inst_id}, operand '{role}'")
                    operands[role] = access
                attrs = {}
                for name, item in attrs_value.items():
                    if item is None or type(item) in (bool, int, str, float):
                        attrs[name] = item
                    else:
                        attrs[name] = self.attr(item, f"instruction {inst_id}, attribute '{name}'", 0)
                return Instruction(inst_id, opcode, _ENGINES[engine], operands, attrs, queue, tuple(waits), location)
        return self.checked_instruction(value, where)

    def checked_instruction(self, value: dict[str, Any], where: str) -> Instruction:
        fields = self.obj(
            value,
            where,
            ("kind", "id", "opcode", "engine", "queue", "operands", "attrs", "waits", "location"),
        )
        inst_id = self.integer(fields["id"], f"{where}.id")
        where = f"instruction {inst_id}"
        engine = self.string(fields["engine"], f"{where}: engine")
        if engine not in _ENGINES:
            raise BundleError(f"{where}: unknown engine {engine!r}")
        operands_value = fields["operands"]
        if not isinstance(operands_value, dict):
            raise BundleError(f"{where}: operands must be a JSON object")
        operands = {role: self.access(access, f"{where}, operand '{role}'") for role, access in operands_value.items()}
        attrs_value = fields["attrs"]
        if not isinstance(attrs_value, dict):
            raise BundleError(f"{where}: attrs must be a JSON object")
        attrs = {name: self.attr(item, f"{where}, attribute '{name}'", 0) for name, item in attrs_value.items()}
        waits = tuple(
            self.integer(w, f"{where}: waits[{i}]")
            for i, w in enumerate(self.array(fields["waits"], f"{where}: waits"))
        )
        return Instruction(
            inst_id,
            self.string(fields["opcode"], f"{where}: opcode"),
            _ENGINES[engine],
            operands,
            attrs,
            self.integer(fields["queue"], f"{where}: queue"),
            waits,
            self.integer(fields["location"], f"{where}: location"),
        )

    @staticmethod
    def plain_access(value: Any) -> Access | None:
        """The Access of a well-formed access object (what `access` returns for it), or None for anything
        `access` must look at (to decode it or to say what is wrong)."""
        if type(value) is not dict or value.keys() != _ACCESS_FIELDS:
            return None
        buffer, pattern, offset = value["buffer"], value["pattern"], value["offset"]
        offset_reg, start, partitions = value["offset_reg"], value["partition_start"], value["partitions"]
        if not (
            type(buffer) is int
            and type(offset) is int
            and type(start) is int
            and type(partitions) is int
            and (offset_reg is None or type(offset_reg) is int)
            and type(pattern) is list
            and len(pattern) <= 64
        ):
            return None
        dims = []
        for dim in pattern:
            if type(dim) is not list or len(dim) != 2 or type(dim[0]) is not int or type(dim[1]) is not int:
                return None
            dims.append((dim[0], dim[1]))
        return Access(
            buffer, tuple(dims), offset, Reg(offset_reg) if offset_reg is not None else None, start, partitions
        )

    def access(self, value: Any, where: str) -> Access:
        fields = self.obj(value, where, ("buffer", "pattern", "offset", "offset_reg", "partition_start", "partitions"))
        pattern: list[tuple[int, int]] = []
        for i, dim in enumerate(self.array(fields["pattern"], f"{where}: pattern", 64)):
            pair = self.ints(dim, f"{where}: pattern[{i}]")
            if len(pair) != 2:
                raise BundleError(f"{where}: pattern[{i}] must be [step, num]")
            pattern.append((pair[0], pair[1]))
        offset_reg = fields["offset_reg"]
        return Access(
            self.integer(fields["buffer"], f"{where}: buffer"),
            tuple(pattern),
            self.integer(fields["offset"], f"{where}: offset"),
            Reg(self.integer(offset_reg, f"{where}: offset_reg")) if offset_reg is not None else None,
            self.integer(fields["partition_start"], f"{where}: partition_start"),
            self.integer(fields["partitions"], f"{where}: partitions"),
        )

    def attr(self, value: Any, where: str, depth: int) -> AttrValue:
        if depth > 4:
            raise BundleError(f"{where}: nested too deeply")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value
        if isinstance(value, list):
            return tuple(self.attr(item, where, depth + 1) for item in self.array(value, where, 64))
        if isinstance(value, dict):
            if "reg" in value:
                return self.reg(value, where)
            fields = self.obj(value, where, ("float",))
            special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
            if fields["float"] not in special:
                raise BundleError(f"{where}: unknown special float {fields['float']!r} (expected nan, inf, -inf)")
            return special[fields["float"]]
        raise BundleError(f"{where}: unsupported value {_json_kind(value)}")


def _json_kind(value: Any) -> str:
    kinds: dict[type, str] = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }
    return kinds.get(type(value), type(value).__name__)


# ---- comparing ---------------------------------------------------------------------------------------------


def programs_equal(a: Program, b: Program) -> bool:
    """Whether two programs are the same (constants compared byte for byte, so NaN payloads count)."""
    scalar_fields: list[Callable[[Program], Any]] = [
        lambda p: p.target,
        lambda p: p.buffers,
        lambda p: p.inputs,
        lambda p: p.outputs,
        lambda p: p.num_registers,
        lambda p: p.locations,
        lambda p: p.entry,
        lambda p: p.compiler_version,
        lambda p: [_normalise(node) for node in p.body],
    ]
    if any(field(a) != field(b) for field in scalar_fields):
        return False
    if sorted(a.constants) != sorted(b.constants):
        return False
    return all(
        a.constants[k].dtype == b.constants[k].dtype
        and a.constants[k].shape == b.constants[k].shape
        and np.ascontiguousarray(a.constants[k]).tobytes() == np.ascontiguousarray(b.constants[k]).tobytes()
        for k in a.constants
    )


def _normalise(node: Node) -> Any:
    """A comparable form of a node: loop bodies as tuples, NaN attributes equal to each other."""
    if isinstance(node, Loop):
        return (
            "loop",
            node.induction,
            node.lower,
            node.upper,
            node.step,
            tuple(_normalise(n) for n in node.body),
        )
    if isinstance(node, Instruction):
        attrs = {k: ("nan",) if isinstance(v, float) and math.isnan(v) else v for k, v in node.attrs.items()}
        return (
            "inst",
            node.id,
            node.opcode,
            node.engine,
            node.queue,
            node.operands,
            attrs,
            node.waits,
            node.location,
        )
    return node
