"""The bundle: round trip, layout, and malformed bundles each rejected with their own clear BundleError."""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from neuron_mlir.runtime import bundle, isa
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.bundle import BundleError
from neuron_mlir.runtime.simulator import run_program


@pytest.fixture
def program(rich_program):
    return rich_program()


@pytest.fixture
def raw(program) -> bytes:
    return bundle.encode_bundle(program)


def test_round_trip_gives_an_equal_program_and_the_same_results(program, raw, tmp_path):
    path = tmp_path / "model.neuronb"
    bundle.write_bundle(program, path)
    assert path.read_bytes() == raw
    decoded = bundle.read_bundle(path)
    assert bundle.programs_equal(decoded, program)
    assert bundle.encode_bundle(decoded) == raw  # the encoding is deterministic
    x = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    expected, expected_profile = run_program(program, [x])
    actual, profile = run_program(decoded, [x])
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)
    assert profile.total_ns == expected_profile.total_ns


def test_row_tiles_round_trip():
    """nc_matmul's row tile is an attribute of the instruction: it survives the bundle and is validated there."""
    b = ProgramBuilder("trn2")
    stationary, moving, dst = b.sbuf("s", (128, 64), "bf16"), b.sbuf("m", (128, 512), "bf16"), b.psum("p", (64, 512))
    b.inst(
        "nc_matmul",
        "tensor",
        {
            "dst": b.ap(dst),
            "stationary": b.ap(stationary, partitions=32, partition_start=96),
            "moving": b.ap(moving, partitions=32, partition_start=96),
        },
        {"row_tile_start": 96, "row_tile_size": 32},
    )
    program = b.build()
    decoded = bundle.read_bundle(bundle.encode_bundle(program))
    assert bundle.programs_equal(decoded, program)
    (matmul,) = decoded.instructions()
    assert (matmul.attrs["row_tile_start"], matmul.attrs["row_tile_size"]) == (96, 32)


def test_layout(raw):
    assert raw[:8] == b"\x89NEURON\n"
    version, header_size, manifest_offset, _, data_offset, data_length, total = struct.unpack("<IIQQQQQ", raw[8:56])
    assert (version, header_size, manifest_offset, total) == (1, 128, 128, len(raw))
    assert data_offset % 64 == 0
    assert data_offset + data_length == len(raw)
    assert raw[64:96] == hashlib.sha256(raw[:64] + raw[128:]).digest()
    manifest, data = bundle.unpack(raw)
    assert manifest["target"] == "trn2"
    assert manifest["entry"]["inputs"][0] == {
        "name": "x",
        "buffer": 0,
        "shape": [256, 512],
        "strides": [512, 1],
        "offset": 0,
        "dtype": "f32",
    }
    for constant in manifest["constants"]:
        assert constant["offset"] % 64 == 0
    assert len(data) == data_length


def test_non_finite_attributes_round_trip(program):
    decoded = bundle.read_bundle(bundle.encode_bundle(program))
    (select,) = [i for i in decoded.instructions() if i.opcode == "affine_select"]
    assert select.attrs["on_false_value"] == -np.inf
    manifest, _ = bundle.unpack(bundle.encode_bundle(program))
    assert '{"float":"-inf"}' in str(manifest).replace("'", '"').replace(" ", "")


def test_invalid_program_is_never_written(program):
    program.buffers[0] = type(program.buffers[0])("x", program.buffers[0].memory, 0, (256, 512), "f64")
    with pytest.raises(BundleError, match="unknown dtype 'f64'"):
        bundle.encode_bundle(program)


# ---- malformed bundles -------------------------------------------------------------------------------------


def remanifest(raw: bytes, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """Decode the manifest, edit it, and re-encode with a fresh checksum (so only the validator can object)."""
    manifest, data = bundle.unpack(raw)
    edit(manifest)
    return bundle.pack(manifest, data)


def instructions(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    found = []

    def walk(nodes):
        for node in nodes:
            if node["kind"] == "inst":
                found.append(node)
            elif node["kind"] == "loop":
                walk(node["body"])

    walk(manifest["body"])
    return found


def first(manifest: dict[str, Any], opcode: str) -> dict[str, Any]:
    return next(i for i in instructions(manifest) if i["opcode"] == opcode)


def loop_of(manifest: dict[str, Any]) -> dict[str, Any]:
    return next(node for node in manifest["body"] if node["kind"] == "loop")


def set_field(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(manifest):
        target = manifest
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = keys[-1]
        target[int(last) if last.isdigit() else last] = value

    return edit


def edit_instruction(opcode: str, change: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], None]:
    def edit(manifest: dict[str, Any]) -> None:
        change(first(manifest, opcode))

    return edit


def overlapping_psum_groups(manifest):
    """A second matmul accumulates into half of the first one's PSUM region before it is evicted."""
    loop = loop_of(manifest)
    matmul = first(manifest, "nc_matmul")
    second = {**matmul, "id": 900, "operands": {**matmul["operands"]}}
    second["operands"]["dst"] = {**matmul["operands"]["dst"], "offset": 256, "pattern": [[1, 256]]}
    second["operands"]["moving"] = {**matmul["operands"]["moving"], "pattern": [[1, 256]]}
    position = loop["body"].index(matmul)
    loop["body"].insert(position + 1, second)


def access_past_the_end_on_the_last_iteration(manifest):
    """The loop runs one tile more than x has: only the largest value of the offset register is out of bounds."""
    loop_of(manifest)["upper"] = 3


MALFORMED: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "truncated": (lambda raw: raw[:-100], r"truncated: the header says \d+ bytes, the file has \d+"),
    "truncated header": (lambda raw: raw[:40], "truncated: 40 bytes, shorter than its 128-byte header"),
    "empty": (lambda raw: b"", "bad magic"),
    "wrong magic": (lambda raw: b"PK\x03\x04" + raw[4:], "not a neuron-mlir bundle"),
    "wrong version": (lambda raw: raw[:8] + struct.pack("<I", 2) + raw[12:], "version 2 is not supported"),
    "bad checksum": (lambda raw: raw[:200] + bytes([raw[200] ^ 0x20]) + raw[201:], "checksum mismatch"),
    "tampered data": (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), "checksum mismatch"),
    "trailing bytes": (lambda raw: raw + b"\0" * 64, "64 trailing bytes"),
    "reserved bytes": (lambda raw: raw[:100] + b"\1" + raw[101:], "reserved bytes"),
    "out-of-bounds address": (
        lambda raw: remanifest(raw, set_field("memory_plan.7.address", 224 * 1024 - 64)),
        r"buffer 7 \('x_tile'\): bytes 229312..231360 of each partition exceed the 229376 bytes per partition",
    ),
    "access out of bounds for the largest loop value": (
        lambda raw: remanifest(raw, access_past_the_end_on_the_last_iteration),
        r"instruction \d+ \(dma_copy\), operand 'src': elements 0..196607 \(offset 0 \+ register r\d+ in "
        r"0..131072\) lie outside buffer 'x' of 131072 elements",
    ),
    "unknown dtype": (
        lambda raw: remanifest(raw, set_field("memory_plan.0.dtype", "f64")),
        r"memory_plan\[0\].dtype: unknown dtype 'f64'",
    ),
    "unknown opcode": (
        lambda raw: remanifest(raw, edit_instruction("activation", lambda i: i.update(opcode="conv2d"))),
        r"instruction \d+: unknown opcode 'conv2d'",
    ),
    "wrong engine for the opcode": (
        lambda raw: remanifest(raw, edit_instruction("nc_matmul", lambda i: i.update(engine="vector"))),
        r"instruction \d+ \(nc_matmul\): cannot run on the vector engine \(allowed: tensor\)",
    ),
    "engine reading a memory it cannot": (
        lambda raw: remanifest(
            raw,
            edit_instruction(
                "activation",
                lambda i: i.update(
                    engine="gpsimd",
                    opcode="tensor_copy",
                    attrs={},
                    operands={"dst": i["operands"]["dst"], "src": i["operands"]["src"]},
                ),
            ),
        ),
        r"operand 'src': the gpsimd engine cannot read PSUM",
    ),
    "dma writing psum": (
        lambda raw: remanifest(
            raw, edit_instruction("dma_copy", lambda i: i["operands"]["dst"].update(buffer=9, partitions=128))
        ),
        r"operand 'dst': the dma engine cannot write PSUM",
    ),
    "huge sizes": (
        lambda raw: remanifest(raw, set_field("memory_plan.0.shape", [2**40, 2**20])),
        "exceed the HBM capacity",
    ),
    "bad wait id": (
        lambda raw: remanifest(raw, edit_instruction("nc_matmul", lambda i: i.update(waits=[12345]))),
        r"waits on instruction 12345, which does not exist",
    ),
    "overlapping PSUM accumulation groups": (
        lambda raw: remanifest(raw, overlapping_psum_groups),
        r"instruction 900 \(nc_matmul\), operand 'dst': writes PSUM bytes overlapping the accumulation region of "
        r"instruction \d+",
    ),
    "duplicate instruction id": (
        lambda raw: remanifest(raw, edit_instruction("activation", lambda i: i.update(id=0))),
        "instruction id 0 is used twice",
    ),
    "unknown ALU operator": (
        lambda raw: remanifest(raw, edit_instruction("tensor_tensor", lambda i: i["attrs"].update(op="divide"))),
        r"attribute 'op': unknown ALU operator 'divide'",
    ),
    "unknown activation function": (
        lambda raw: remanifest(raw, edit_instruction("activation", lambda i: i["attrs"].update(func="swish"))),
        r"attribute 'func': unknown activation function 'swish'",
    ),
    "unknown attribute": (
        lambda raw: remanifest(raw, edit_instruction("activation", lambda i: i["attrs"].update(gain=2.0))),
        r"attribute 'gain': unknown attribute",
    ),
    "attribute of the wrong type": (
        lambda raw: remanifest(raw, edit_instruction("activation", lambda i: i["attrs"].update(scale="2"))),
        r"attribute 'scale': expected a number, got '2'",
    ),
    "register attribute not allowed": (
        lambda raw: remanifest(raw, edit_instruction("activation", lambda i: i["attrs"].update(scale={"reg": 0}))),
        r"attribute 'scale': cannot be a register",
    ),
    "unknown operand role": (
        lambda raw: remanifest(
            raw, edit_instruction("tensor_copy", lambda i: i["operands"].update(bias=i["operands"]["src"]))
        ),
        r"unknown operand role 'bias'",
    ),
    "missing operand": (
        lambda raw: remanifest(raw, edit_instruction("tensor_tensor", lambda i: i["operands"].pop("in1"))),
        r"missing operand 'in1'",
    ),
    "register out of range": (
        lambda raw: remanifest(raw, edit_instruction("dma_copy", lambda i: i["operands"]["src"].update(offset_reg=77))),
        r"register r77 is outside the program's \d+ registers",
    ),
    "loop step zero": (
        lambda raw: remanifest(raw, lambda m: loop_of(m).update(step=0)),
        "step must be a non-zero 32-bit integer",
    ),
    "start partition not allowed": (
        lambda raw: remanifest(
            raw,
            edit_instruction(
                "tensor_copy",
                lambda i: [i["operands"][r].update(partition_start=16, partitions=32) for r in ("dst", "src")],
            ),
        ),
        r"an access of 32 partitions cannot start at partition 16 \(allowed: 0, 32, 64, 96\)",
    ),
    "too many partitions": (
        lambda raw: remanifest(
            raw, edit_instruction("tensor_copy", lambda i: i["operands"]["src"].update(partitions=129))
        ),
        "129 partitions; an on-chip access covers 1..128",
    ),
    "matmul moving free size": (
        lambda raw: remanifest(
            raw, edit_instruction("nc_matmul", lambda i: i["operands"]["moving"].update(pattern=[[1, 513]]))
        ),
        r"operand 'moving': free size 513 exceeds 512 on trn2",
    ),
    "matmul row tile size": (
        lambda raw: remanifest(raw, edit_instruction("nc_matmul", lambda i: i["attrs"].update(row_tile_size=48))),
        r"instruction \d+ \(nc_matmul\): row tile size 48 is not one trn2 has \(row tile sizes: 32, 64\)",
    ),
    "matmul operands outside their row tile": (
        lambda raw: remanifest(
            raw, edit_instruction("nc_matmul", lambda i: i["attrs"].update(row_tile_start=64, row_tile_size=64))
        ),
        r"operand 'stationary': partitions 0..127 lie outside the row tile's rows 64..127",
    ),
    "matmul row tile of the wrong type": (
        lambda raw: remanifest(raw, edit_instruction("nc_matmul", lambda i: i["attrs"].update(row_tile_size="64"))),
        r"attribute 'row_tile_size': expected a 32-bit integer, got '64'",
    ),
    "psum bank crossing": (
        lambda raw: remanifest(
            raw,
            lambda m: (
                set_field("memory_plan.9.shape", [128, 1024])(m)
                or edit_instruction(
                    "nc_matmul",
                    lambda i: [
                        i["operands"]["dst"].update(pattern=[[1, 256]], offset=384),
                        i["operands"]["moving"].update(pattern=[[1, 256]]),
                    ],
                )(m)
            ),
        ),
        r"bytes 1536..2559 of each partition cross a 2048-byte PSUM bank boundary",
    ),
    "constant outside the data section": (
        lambda raw: remanifest(raw, set_field("constants.0.offset", 1 << 30)),
        r"constants\[0\]: bytes \d+..\d+ are not a 64-byte aligned range",
    ),
    "constant size mismatch": (
        lambda raw: remanifest(raw, set_field("constants.0.nbytes", 64)),
        r"constants\[0\]: 64 bytes for buffer 'w'",
    ),
    "binding out of bounds": (
        lambda raw: remanifest(raw, set_field("entry.outputs.1.offset", 1)),
        r"output 1 \('z'\): elements 1..65536 lie outside buffer 'z'",
    ),
    "binding dtype mismatch": (
        lambda raw: remanifest(raw, set_field("entry.inputs.0.dtype", "bf16")),
        r"entry.inputs\[0\].dtype: 'bf16' differs from its buffer's 'f32'",
    ),
    "missing field": (
        lambda raw: remanifest(raw, lambda m: m.pop("num_registers")),
        "manifest: missing field 'num_registers'",
    ),
    "unknown field": (
        lambda raw: remanifest(raw, lambda m: m.update(extra=1)),
        "manifest: unknown field 'extra'",
    ),
    "wrong field type": (
        lambda raw: remanifest(raw, set_field("num_registers", "7")),
        "manifest.num_registers: expected an integer, got a string",
    ),
    "boolean for an integer": (
        lambda raw: remanifest(raw, set_field("memory_plan.0.address", True)),
        r"memory_plan\[0\].address: expected an integer, got a boolean",
    ),
    "unknown node kind": (
        lambda raw: remanifest(raw, lambda m: m["body"].append({"kind": "call"})),
        "unknown node kind 'call'",
    ),
    "unknown target": (lambda raw: remanifest(raw, set_field("target", "trn9")), "unknown target 'trn9'"),
    "manifest version mismatch": (
        lambda raw: remanifest(raw, set_field("format_version", 2)),
        "manifest format version 2 does not match",
    ),
    "possible division by zero": (
        lambda raw: remanifest(
            raw,
            lambda m: loop_of(m)["body"].insert(
                0, {"kind": "scalar", "dest": 1, "op": "rem", "lhs": 5, "rhs": {"reg": 1}}
            ),
        ),
        r"scalar op rem\): the divisor may be zero",
    ),
    "loop bound register unbounded": (
        lambda raw: remanifest(
            raw,
            lambda m: m["body"].insert(
                3, {"kind": "scalar", "dest": 0, "op": "mul", "lhs": {"reg": 0}, "rhs": 1 << 20}
            ),
        ),
        r"lie outside buffer 'x'",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_bundles_raise_their_own_error(raw, case, monkeypatch):
    corrupt, message = MALFORMED[case]
    _forbid_execution(monkeypatch)
    with pytest.raises(BundleError, match=message):
        bundle.read_bundle(corrupt(raw))


def _must_not_run(*args: Any) -> None:
    raise AssertionError("an instruction ran")


def _forbid_execution(monkeypatch) -> None:
    """Nothing may execute: every instruction's semantics fails the test."""
    for opcode, spec in list(isa.OPCODES.items()):
        monkeypatch.setitem(isa.OPCODES, opcode, dataclasses.replace(spec, semantics=_must_not_run))


def test_raw_manifest_json_errors(raw):
    manifest, data = bundle.unpack(raw)
    good = bundle.pack(manifest, data)
    text_start, text_length = 128, struct.unpack("<Q", good[24:32])[0]

    def rebuild(text: bytes) -> bytes:
        data_offset = -(-(128 + len(text)) // 64) * 64
        header = struct.pack(
            "<8sIIQQQQQ8x",
            bundle.MAGIC,
            1,
            128,
            128,
            len(text),
            data_offset,
            len(data),
            data_offset + len(data),
        )
        body = text + b" " * (data_offset - 128 - len(text)) + data
        return header + hashlib.sha256(header + body).digest() + bytes(32) + body

    text = good[text_start : text_start + text_length]
    with pytest.raises(BundleError, match="not valid JSON"):
        bundle.read_bundle(rebuild(text[:-1]))
    with pytest.raises(BundleError, match="duplicate key 'target'"):
        bundle.read_bundle(rebuild(b'{"target":"trn2",' + text[1:]))
    with pytest.raises(BundleError, match=r"nests too deeply|not valid JSON"):
        bundle.read_bundle(rebuild(b"[" * 100000 + b"]" * 100000))
    with pytest.raises(BundleError, match="must be a JSON object"):
        bundle.read_bundle(rebuild(b"[1, 2]"))
    with pytest.raises(BundleError, match="not valid JSON"):
        bundle.read_bundle(rebuild(b"\xff\xfe"))


def test_unreadable_path(tmp_path):
    with pytest.raises(BundleError, match="cannot read bundle"):
        bundle.read_bundle(tmp_path / "missing.neuronb")


def test_run_program_validates_in_memory_programs(program, monkeypatch):
    _forbid_execution(monkeypatch)
    program.num_registers = 1  # the loop uses more
    with pytest.raises(BundleError, match="outside the program's 1 registers"):
        run_program(program, [np.zeros((256, 512), np.float32)])


def test_input_checks(program):
    with pytest.raises(ValueError, match=r"input 0 \('x'\): expected f32\[256, 512\], got float64\[256, 512\]"):
        run_program(program, [np.zeros((256, 512))])
    with pytest.raises(ValueError, match="takes 1 inputs, got 0"):
        run_program(program, [])
