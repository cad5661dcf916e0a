"""The neuron dialect's verifiers and the bundle validator apply the same rules to an instruction.

Both call `runtime.isa.check_instruction`. Random instructions (engines, memories, dtypes, partition ranges,
free patterns, matmul shapes, attributes, queues; all inside their buffers, so only the instruction set's rules
decide) are verified as IR, then built into a program and validated as a bundle would be: the two must accept
the same instructions and refuse the others with the same diagnostic. Before the rules were shared, IR that
verified could make a bundle the validator refused (an integer matmul, say).
"""

from __future__ import annotations

import random
import re

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.backend_trn.translate import build_program
from neuron_mlir.ir.context import make_context
from neuron_mlir.runtime.validate import BundleError, validate_program

ENGINES = ["tensor", "vector", "scalar", "gpsimd", "dma"]
ALU = ["add", "multiply", "max", "is_gt", "bitwise_and", "divide"]  # 'divide' is no ALU operator
TYPES = {"f32": 4, "bf16": 2, "i32": 4}


class _Function:
    """A neuron-level function being written: one buffer per operand, each large enough for its access."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.arguments: list[str] = []
        self.count = 0

    def access(self, memory: str, dtype: str, partitions: int, pattern: list[tuple[int, int]], offset: int = 0,
               start: int = 0, address: int = 0) -> tuple[str, str]:  # fmt: skip
        """(`%buf[...]`, its type) for an access; the buffer is an argument in HBM, else an allocation."""
        self.count += 1
        name = f"%b{self.count}"
        high = offset + sum(step * (num - 1) for step, num in pattern)
        row = max(high + 1, 1)
        dims = ", ".join(f"[{step}, {num}]" for step, num in pattern)
        if memory == "hbm":
            memref = f"memref<{row}x{dtype}, #mem<hbm>>"
            self.arguments.append(f"{name}: {memref}")
            return f"{name}[{offset}, [{dims}]]", memref
        memref = f"memref<128x{row}x{dtype}, #mem<{memory}>>"
        self.lines.append(f"{name} = neuron.alloc {{address = {address} : i64}} : {memref}")
        return f"{name}[{start}:{start + partitions}, {offset}, [{dims}]]", memref

    def instruction(self, opcode: str, engine: str, roles: dict[str, tuple[str, str]], attrs: str = "") -> None:
        operands = ", ".join(f"{role} {text}" for role, (text, _) in roles.items())
        types = ", ".join(memref for _, memref in roles.values())
        attributes = f" {{{attrs}}}" if attrs else ""
        self.lines.append(f"neuron.{opcode} {engine} {operands}{attributes} : {types}")

    def text(self) -> str:
        body = "\n    ".join(self.lines)
        return f"""
builtin.module attributes {{neuron.target = #neuron.target<trn2>}} {{
  func.func @main({", ".join(self.arguments)}) {{
    {body}
    func.return
  }}
}}
"""


def _pattern(rng: random.Random, elements_hint: int) -> list[tuple[int, int]]:
    dims = rng.choice([1, 1, 1, 2, 2, 3, 5])
    pattern = []
    for index in range(dims):
        num = rng.choice([1, 2, 4, elements_hint]) if index == dims - 1 else rng.choice([1, 2, 3])
        pattern.append((rng.choice([0, 1, 1, 1, 2, 64, 40000]) if num > 1 else 1, num))
    return pattern


def _on_chip(rng: random.Random, function: _Function, dtype: str, memory: str | None = None,
             partitions: int | None = None, free: int | None = None, address: int = 0) -> tuple[str, str]:  # fmt: skip
    memory = memory or rng.choice(["sbuf", "sbuf", "psum", "hbm"])
    partitions = partitions or rng.choice([1, 32, 64, 96, 128])
    start = rng.choice([0, 0, 32, 64, 96])
    start = start if start + partitions <= 128 else 0
    pattern = [(1, free)] if free is not None else _pattern(rng, rng.choice([8, 16, 512]))
    row_bytes = TYPES[dtype] * (sum(step * (num - 1) for step, num in pattern) + 1)
    if row_bytes > (16384 if memory == "psum" else 200_000):  # the buffer would not fit its memory
        pattern = [(1, 8)]
    return function.access(memory, dtype, partitions, pattern, start=start, address=address)


def _random_instruction(seed: int) -> str:
    rng = random.Random(seed)
    f = _Function(rng)
    kind = rng.choice(["memset", "tensor_copy", "tensor_tensor", "tensor_scalar", "nc_matmul", "iota", "dma_copy"])
    engine = rng.choice(ENGINES + [{"memset": "vector", "nc_matmul": "tensor", "iota": "gpsimd",
                                    "dma_copy": "dma"}.get(kind, "vector")] * 3)  # fmt: skip
    dtype = rng.choice(list(TYPES))
    # (a bundle encodes "no queue" as queue 0: IR giving a compute instruction queue 0 has no bundle to compare)
    queue = f"queue = {rng.choice([0, 3, 16] if engine == 'dma' else [3, 16])} : i64"
    queue = queue if engine == "dma" or rng.random() < 0.05 else ""
    if kind == "memset":
        f.instruction(
            "memset", engine, {"dst": _on_chip(rng, f, dtype)}, ", ".join(filter(None, ["value = 1.0 : f64", queue]))
        )
    elif kind in ("tensor_copy", "dma_copy"):
        partitions = rng.choice([32, 64, 128])
        free = rng.choice([16, 16, 32])
        dst = _on_chip(rng, f, dtype, partitions=partitions, free=free)
        src = _on_chip(rng, f, rng.choice(list(TYPES)), partitions=rng.choice([partitions, partitions, 32]), free=free)
        f.instruction(kind, engine, {"dst": dst, "src": src}, queue)
    elif kind == "tensor_tensor":
        partitions, free = rng.choice([32, 128]), 16
        roles = {role: _on_chip(rng, f, dtype, partitions=partitions, free=rng.choice([free, free, free, 8]))
                 for role in ("dst", "in0", "in1")}  # fmt: skip
        f.instruction("tensor_tensor", engine, roles, ", ".join(filter(None, [f'op = "{rng.choice(ALU)}"', queue])))
    elif kind == "tensor_scalar":
        roles = {role: _on_chip(rng, f, dtype, partitions=64, free=16) for role in ("dst", "src")}
        attrs = [f'op0 = "{rng.choice(ALU)}"']
        if rng.random() < 0.5:
            roles["operand1"] = _on_chip(rng, f, "f32", partitions=rng.choice([64, 64, 32]), free=rng.choice([1, 1, 2]))
        if rng.random() < 0.5:
            attrs.append(f'op1 = "{rng.choice(ALU)}"')
        f.instruction("tensor_scalar", engine, roles, ", ".join(filter(None, [*attrs, queue])))
    elif kind == "nc_matmul":
        k = rng.choice([64, 128])
        m, n = rng.choice([32, 128, 128, 129]), rng.choice([64, 512, 512, 513])
        transpose = rng.random() < 0.3
        in_types = [rng.choice(["f32", "bf16", "i32"])] * 2 if rng.random() < 0.7 else rng.choices(["f32", "bf16"], k=2)
        dst_partitions, dst_free = (n, k) if transpose else (m, n)
        dst_partitions = min(dst_partitions, 128)
        dst_type = rng.choice(["f32", "f32", "bf16"])
        address = rng.choice([0, 0, 1024, 2048])
        roles = {
            "dst": _on_chip(rng, f, dst_type, memory=rng.choice(["psum", "psum", "sbuf"]), partitions=dst_partitions,
                            free=dst_free, address=address),
            "stationary": _on_chip(rng, f, in_types[0], memory="sbuf", partitions=k, free=k if transpose else m),
            "moving": _on_chip(rng, f, in_types[1], memory="sbuf", partitions=k, free=n),
        }  # fmt: skip
        attrs = ["is_transpose = true"] if transpose else []
        if rng.random() < 0.3:
            attrs.append("accumulate = true")
        f.instruction("nc_matmul", engine, roles, ", ".join(filter(None, [*attrs, queue])))
    else:
        free = rng.choice([[(1, 16)], [(1, 4), (4, 4)]])
        dst = f.access("sbuf", "i32", 64, free)
        nums = rng.choice([[16], [4, 4], [2, 8], [1, 1, 1, 1, 16]])
        pattern = ", ".join(f"1, {num}" for num in nums)
        f.instruction(
            "iota", engine, {"dst": dst}, ", ".join(filter(None, [f"pattern = array<i64: {pattern}>", queue]))
        )
    return f.text()


def _dialect_verdict(module) -> str | None:
    try:
        module.verify()
    except VerifyException as error:
        message = str(error).splitlines()[0]
    else:
        return None
    match = re.match(r"neuron\.\w+: (.*?)( \(at .*\))?$", message)
    assert match, message  # an instruction's diagnostic, not some other failure
    return match.group(1)


def _validator_verdict(module) -> str | None:
    try:
        validate_program(build_program(module))
    except BundleError as error:
        message = str(error)
    else:
        return None
    match = re.match(r"instruction \d+ \(\w+\)(?:, operand '(\w+)'|(, attribute '\w+'))?: (.*)$", message)
    assert match, message
    role, attribute, text = match.groups()
    if role:
        return f"{role}: {text}"
    if attribute:
        return f"{attribute[2:]}: {text}"
    return text


@pytest.mark.parametrize("seed", range(400))
def test_verifier_and_validator_accept_and_refuse_alike(seed: int) -> None:
    module = Parser(make_context(), _random_instruction(seed)).parse_module()
    assert _dialect_verdict(module) == _validator_verdict(module)


def test_the_cases_cover_acceptance_and_each_kind_of_refusal() -> None:
    """The random instructions exercise both verdicts and rules of operands, attributes and opcodes."""
    verdicts = [
        _dialect_verdict(Parser(make_context(), _random_instruction(seed)).parse_module()) for seed in range(400)
    ]
    refused = [v for v in verdicts if v is not None]
    assert 40 <= len(refused) <= 360
    assert any(v.startswith("attribute '") for v in refused)
    assert any(re.match(r"(dst|src|in\d|stationary|moving): ", v) for v in refused)
    for rule in [
        "TensorE reads float inputs",
        "cannot run on the",
        "touches some elements twice",
        "PSUM bank",
        "does not fit an engine access pattern",
        "given without op1",
        "covers the free shape",
        "queue",
    ]:
        assert any(rule in v for v in refused), rule
