"""The mirror between source and tests, and the registries that tools rely on (docs/architecture.md#tests)."""

import re

import pytest
from support import REPO

from neuron_mlir.ir.dialects import ALL_DIALECTS
from neuron_mlir.lowering import ALL_PASSES


@pytest.mark.parametrize("name", sorted(ALL_PASSES))
def test_pass_registry_names_match(name):
    assert ALL_PASSES[name]().name == name


@pytest.mark.parametrize("name", sorted(ALL_PASSES))
def test_every_pass_has_a_lit_test(name):
    assert (REPO / "test" / "lit" / "lowering" / f"{name}.mlir").is_file(), f"test/lit/lowering/{name}.mlir"


@pytest.mark.parametrize("name", sorted(ALL_PASSES))
def test_every_pass_module_states_its_contract(name):
    import inspect

    module = inspect.getmodule(ALL_PASSES[name]())
    assert module is not None
    assert module.__doc__, f"{name}: module docstring"


@pytest.mark.parametrize("dialect", sorted(ALL_DIALECTS))
def test_every_dialect_has_round_trip_and_invalid_tests(dialect):
    folder = REPO / "test" / "lit" / "dialects" / dialect
    assert (folder / "ops.mlir").is_file(), f"{folder}/ops.mlir"
    assert (folder / "invalid.mlir").is_file(), f"{folder}/invalid.mlir"


@pytest.mark.parametrize("dialect", sorted(ALL_DIALECTS))
def test_every_op_has_a_docstring(dialect):
    for op in ALL_DIALECTS[dialect]().operations:
        assert (op.__doc__ or "").strip(), f"{op.name} has no docstring"


def test_every_neuron_instruction_has_runtime_semantics():
    from neuron_mlir.ir.dialects.neuron import INSTRUCTION_OPS
    from neuron_mlir.runtime.isa import OPCODES

    assert {op.OPCODE for op in INSTRUCTION_OPS} == set(OPCODES)


def test_every_invalid_chunk_checks_something():
    for path in (REPO / "test" / "lit").rglob("*invalid*.mlir"):
        for index, chunk in enumerate(path.read_text().split("// -----")):
            if re.search(r"^\s*(func\.func|builtin\.module|\"|%|[a-z_]+\.[a-z_.]+ )", chunk, re.M):
                assert re.search(r"//\s*[A-Z]*CHECK", chunk), f"{path.name}: chunk {index} has no CHECK"


def test_every_lowering_names_a_torch_op():
    from neuron_mlir.ir.dialects.torch import NkiKernelOp, all_op_classes
    from neuron_mlir.lowering.convert_torch_to_tile import LOWERINGS

    names = {op.name for op in all_op_classes()} | {NkiKernelOp.name}
    assert sorted(set(LOWERINGS) - names) == []
